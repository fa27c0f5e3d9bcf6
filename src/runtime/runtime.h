/* runtime.h - internal services of sessions for other library layers (the
 * quantizer and analysis tools), not part of the public API. */
#ifndef ER_RUNTIME_H
#define ER_RUNTIME_H

#include "runtime/exec.h"

/* er_session_run with an observer: `observe` (may be NULL) is called after
 * every node runs, with the node's outputs still alive, and `user` passed
 * back. Nodes placed on an accelerator backend are reported only if that
 * backend runs them through the CPU interpreter, so observers are meant for
 * CPU sessions. Arguments and ownership as for er_session_run. */
er_status er__session_run_observed(er_session *session, const er_named_tensor *inputs,
                                   size_t n_inputs, const char *const *output_names,
                                   size_t n_outputs, er_tensor **outputs_out,
                                   er_exec_observer observe, void *user);

/* Loads an ONNX file as data: parsed (external data resolved, every limit
 * of `opts` applied) and topologically checked, but neither bound to
 * operators nor rewritten, so a reader of its structure (the LLM engine's
 * decoder importer) sees the nodes as the file wrote them, contrib
 * operators included. Such a model cannot make a session. */
er_status er__model_load_file_raw(const char *path, const er_load_options *opts, er_model **model_out);

#endif /* ER_RUNTIME_H */
