/* backend.h - the backend interface every compute backend implements.
 *
 * A backend is a table of function pointers (ggml-style). The CPU backend
 * implements it and is always registered last, so nodes nobody else claims
 * land there. Accelerator backends (OpenCL, CUDA) and out-of-tree NPU
 * plugins implement the same table; the session asks each preferred backend
 * `supports_op` per node (with a reason when it says no), groups claimed
 * nodes into subgraphs, and has the backend compile and compute them.
 *
 * The table is versioned: a plugin built against ER_BACKEND_ABI_VERSION N is
 * accepted by a core of the same major version; members marked (optional)
 * may be NULL. */
#ifndef ER_BACKEND_H
#define ER_BACKEND_H

#include "edgerun-backend.h"
#include "backends/run.h"
#include "core/log.h"
#include "ir/ir.h"

#define ER_BACKEND_ABI_VERSION 1

typedef struct er_backend er_backend;

/* What a session asks of every compile. */
typedef struct er_compile_options {
  /* Keep every node on its op's reference kernel (the session option
   * force_reference; ER_FORCE_REFERENCE in the environment is read by the
   * backends themselves). */
  bool force_reference;
} er_compile_options;

/* er_device_kind, er_device_desc and er_subgraph are public (the plugin
 * ABI, include/edgerun-backend.h); the core's own backends use them too. */

typedef struct er_backend_iface {
  uint32_t abi_version;      /* ER_BACKEND_ABI_VERSION */
  const char *name;          /* "cpu", "opencl", "cuda", plugin name */

  /* Devices this backend can drive (0 when none are present). */
  int (*device_count)(er_backend *be);
  er_status (*device_desc)(er_backend *be, int index, er_device_desc *desc_out);

  /* Whether the backend can run `node` (of `graph`, with the value infos
   * known at load). On false it writes a one-line reason ("dtype float64 is
   * not supported", "Resize mode cubic not implemented") into reason[size]. */
  bool (*supports_op)(er_backend *be, const er_graph *graph, const er_node *node,
                      char *reason, size_t reason_size);

  /* Device memory. (optional for backends that compute on host memory.) */
  er_status (*buffer_alloc)(er_backend *be, size_t bytes, void **buffer_out);
  void (*buffer_free)(er_backend *be, void *buffer);
  er_status (*buffer_write)(er_backend *be, void *buffer, size_t offset, const void *src,
                            size_t bytes);
  er_status (*buffer_read)(er_backend *be, const void *buffer, size_t offset, void *dst,
                           size_t bytes);

  /* Prepares a subgraph once at session creation (kernels, weights on the
   * device); *compiled_out is released with release(). */
  er_status (*compile)(er_backend *be, const er_subgraph *sg, const er_compile_options *opts,
                       void **compiled_out);
  /* Computes a compiled subgraph. `values` is the frame of the graph's
   * values (host tensors, graph->n_values of them): inputs of the subgraph
   * are read from it and its outputs are written to it. `run` is the state
   * of this run (opaque to backends; passed back to core services). Safe to
   * call from several threads at once with different `values`. */
  er_status (*compute)(er_backend *be, void *compiled, er_exec *run, er_tensor *values);
  void (*release)(er_backend *be, void *compiled);

  /* Frees the backend. (optional) */
  void (*destroy)(er_backend *be);

  /* Why the backend cannot be used here ("no OpenCL platform found"), or
   * NULL when it can. Called before device_count. (optional) */
  const char *(*unavailable)(er_backend *be);

  /* Host scratch (bytes) one compute of `compiled` needs at most; the
   * session gives each run context one buffer of the largest. (optional:
   * none) */
  size_t (*scratch_bytes)(er_backend *be, const void *compiled);
  /* The name of the kernel `compiled` runs for node `node` (index in its
   * graph), or NULL for the op's reference kernel or a node not in it;
   * shown by er_session_kernel and profiles. (optional) */
  const char *(*kernel_name)(er_backend *be, const void *compiled, int32_t node);

  /* Layout preferences, asked when every node of a session runs on this
   * backend and the session rewrites its graph (optimize level 2): the
   * channel block of its blocked kernels (0 keeps every tensor planar), and
   * whether node i of g is faster left planar. (optional: planar) */
  int (*layout_block)(er_backend *be);
  bool (*keep_planar)(const er_graph *g, int32_t node);
} er_backend_iface;

struct er_backend {
  const er_backend_iface *iface;
  void *impl;                /* backend-private state */
};

/* Built-in backends. */
er_backend *er__backend_cpu(void);
/* NULL when the backend was not compiled in (no OpenCL headers, no CUDA
 * toolkit at build time). */
er_backend *er__backend_opencl(void);
er_backend *er__backend_cuda(void);
/* Finds a registered backend by name (built in or loaded); NULL when none
 * has that name. registry.c. */
er_backend *er__backend_find(const char *name);
/* Whether a backend of this name is usable: OK, or UNSUPPORTED naming the
 * reason (not built, no device, unknown name) with the message set. */
er_status er__backend_require(const char *name, er_backend **backend_out);

#endif /* ER_BACKEND_H */
