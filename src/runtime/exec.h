/* exec.h - the runtime's interpreter: runs nodes with their chosen kernels
 * (optimized, custom or reference). Sessions run the main graph through it
 * segment by segment; the CPU backend's compute comes back to it through
 * er_exec.interp, and the control-flow ops (If, Loop, Scan) run their
 * subgraphs with it through er_kctx.run_subgraph. */
#ifndef ER_EXEC_H
#define ER_EXEC_H

#include "backends/run.h"

struct er_backend;

/* A compiled piece of the main graph placed on one backend. */
typedef struct er_segment {
  struct er_backend *backend;
  void *compiled;                /* from backend->iface->compile */
  const int32_t *release;        /* [n_release] intermediates to free after
                                    the segment (their last reader ran) */
  int32_t n_release;
} er_segment;

/* Runs nodes[0..n_nodes) (indices into frame->g->nodes; NULL = the first
 * n_nodes nodes in order) in `frame`, freeing intermediates after their last
 * use. kernels[node index] (may be NULL) names optimized kernels. */
er_status er__exec_nodes(er_exec *ex, er_frame *frame, const int32_t *nodes, int32_t n_nodes,
                         const int32_t *last_use, const er_node_kernel *kernels);

/* Runs the main graph in `vals` (g->n_values tensors, all released; the
 * caller's run context owns them) with ex->mem's memory: binds inputs and
 * constants, computes the segments, and leaves the graph outputs in vals
 * (owned there, or written into mem->bound_outputs). */
er_status er__exec_main(er_exec *ex, const er_graph *g, er_tensor *vals, const er_tensor *const *inputs,
                        int n_inputs, const er_segment *segs, int n_segs);

#endif /* ER_EXEC_H */
