/* edgerun-backend.h - the frozen extension ABI of libedgerun: backends
 * loaded from shared objects (NPU SDK wrappers built out of tree), custom
 * operators, and the placement report of a session.
 *
 * Version 1.0 of this ABI is frozen: every struct below keeps its layout
 * (tests/backends/test-abi.c asserts the offsets), and a later minor version
 * only appends members at the end of a struct, behind the `struct_size`
 * field, so a plugin built against 1.0 keeps loading into a 1.x core. A
 * change of the major version means a plugin must be rebuilt.
 *
 * A plugin never links against libedgerun: everything it may call reaches
 * it through the er_host_api table handed to its entry point, so the same
 * .so loads into the edgerun command (which links the library statically)
 * and into any application.
 *
 * A minimal plugin:
 *
 *   #include "edgerun-backend.h"
 *   static const er_host_api *host;
 *   static bool my_supports(void *u, const er_graph *g, const er_node *n,
 *                           char *why, size_t size) { ... }
 *   ...
 *   ER_PLUGIN_EXPORT er_status er_backend_plugin_init(const er_host_api *h,
 *                                                      er_backend_plugin *p) {
 *     if (ER_PLUGIN_ABI_MAJOR_OF(h->abi_version) != ER_PLUGIN_ABI_MAJOR)
 *       return ER_STATUS_UNSUPPORTED;
 *     host = h;
 *     p->abi_version = ER_PLUGIN_ABI_VERSION;
 *     p->struct_size = sizeof *p;
 *     p->name = "mynpu";
 *     p->supports_op = my_supports;  ...
 *     return ER_STATUS_OK;
 *   }
 *
 * tests/backends/sample-plugin/ is a complete one. */
#ifndef EDGERUN_BACKEND_H
#define EDGERUN_BACKEND_H

#include "edgerun.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ER_PLUGIN_ABI_MAJOR 1
#define ER_PLUGIN_ABI_MINOR 0
#define ER_PLUGIN_ABI_VERSION ((uint32_t)((ER_PLUGIN_ABI_MAJOR << 16) | ER_PLUGIN_ABI_MINOR))
#define ER_PLUGIN_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define ER_PLUGIN_ABI_MINOR_OF(v) ((uint32_t)(v) & 0xffffu)

/* The symbol every plugin exports. */
#define ER_PLUGIN_ENTRY "er_backend_plugin_init"
#define ER_PLUGIN_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------------ */
/* Opaque views of the core's objects                                        */
/* ------------------------------------------------------------------------ */

/* A graph, a node of it, the values of one run (the "frame"), and the state
 * of one custom kernel call. All are owned by the core; a plugin reads them
 * only through er_host_api and only during the call that hands them over
 * (a graph and its nodes also stay valid for the life of a compiled
 * subgraph). Values are named by their index in the graph ("value id"). */
typedef struct er_graph er_graph;
typedef struct er_node er_node;
typedef struct er_frame er_frame;
typedef struct er_kctx er_kernel_ctx;

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum er_device_kind {
  ER_DEVICE_CPU = 0,
  ER_DEVICE_GPU = 1,
  ER_DEVICE_NPU = 2,
  ER_DEVICE_OTHER = 3,
} er_device_kind;

typedef struct er_device_desc {
  char name[128];            /* "Intel(R) Xeon(R) ...", "pthread-cpu" */
  char vendor[64];
  char driver[64];           /* driver or runtime version text */
  er_device_kind kind;
  uint64_t memory_bytes;     /* bytes; 0 when unknown */
  int compute_units;         /* cores / SMs / CUs; 0 when unknown */
} er_device_desc;

/* ------------------------------------------------------------------------ */
/* Subgraphs handed to a backend                                             */
/* ------------------------------------------------------------------------ */

/* Node indices of one graph, in the order they must run, with the values
 * that cross the subgraph's boundary. Inputs are read from the frame (they
 * come from the caller or from another backend's subgraph: the core moves
 * them); outputs must be written to the frame. Values fixed at load
 * (weights) are not listed: read them with graph_value_constant at compile
 * time. All arrays are owned by the core and outlive the compiled subgraph. */
typedef struct er_subgraph {
  const er_graph *graph;
  const int32_t *nodes;      /* [n_nodes] indices into the graph's nodes */
  int32_t n_nodes;
  const int32_t *inputs;     /* [n_inputs] value ids read from outside */
  int32_t n_inputs;
  const int32_t *outputs;    /* [n_outputs] value ids read outside or
                                graph outputs */
  int32_t n_outputs;
} er_subgraph;

/* ------------------------------------------------------------------------ */
/* Custom operators                                                          */
/* ------------------------------------------------------------------------ */

/* A kernel for an operator, registered with er_custom_op_register.
 *
 * Two uses:
 *  - a new operator in the user's own domain ("com.example", or another
 *    runtime's domain such as "com.microsoft" for fused ops some exporters
 *    write): register its CPU kernel (backend "cpu") with `infer`; that CPU
 *    kernel is the fallback wherever an accelerator kernel is missing. An
 *    accelerator kernel for the same op may be registered in addition.
 *  - overriding a standard ONNX op (domain "") on one backend: the
 *    standard shape rule stays, `compute` replaces the kernel for nodes
 *    placed on that backend, and `infer` must be NULL.
 *
 * Kernels for backend "cpu" see host tensors. Kernels for "opencl" see
 * tensors whose data is the device buffer (a cl_mem cast to void *) and get
 * the command queue from er_kernel_stream; kernels for "cuda" see device
 * pointers and the cudaStream_t. Plugin backends claim ops through their
 * own supports_op and are not dispatched here.
 *
 * New operators must be registered before the models that use them are
 * loaded (loading binds each node to its implementation); kernels for a
 * backend, before the sessions that should use them are created (sessions
 * pick kernels when they compile). */
typedef struct er_custom_op {
  uint32_t abi_version;      /* ER_PLUGIN_ABI_VERSION */
  uint32_t struct_size;      /* sizeof(er_custom_op) */
  const char *domain;        /* "" = the default ONNX domain (override) */
  const char *op_type;
  const char *backend;       /* "cpu" (NULL means cpu), "opencl" or "cuda" */
  int min_version, max_version;  /* opset versions of the domain it serves;
                                    0, 0 = every version */
  int min_inputs, max_inputs;    /* arity of a new op (ignored for overrides) */
  int min_outputs, max_outputs;
  /* Type and shape rule of a new op: set every output with
   * er_kernel_set_output from the inputs. Called at load with what is
   * known (a rank of -1 or a dim of -1 is unknown; data is NULL unless the
   * input is a constant) and again at run time with everything known.
   * NULL: output 0 takes input 0's type and shape. */
  er_status (*infer)(void *user, er_kernel_ctx *ctx);
  /* Computes the outputs, which arrive allocated with the shapes `infer`
   * set. Must be safe to call from several threads at once. */
  er_status (*compute)(void *user, er_kernel_ctx *ctx);
  void *user;                /* passed back; must outlive the registration */
} er_custom_op;

/* Registers a kernel. `op` is copied; its strings are copied too. A second
 * registration of the same (domain, op_type, backend) replaces the first.
 * INVALID_ARGUMENT when a field is missing or contradictory (a new op
 * without a CPU kernel, an override with an `infer`). Thread-safe. */
ER_API er_status er_custom_op_register(const er_custom_op *op);

/* Accessors for kernels (also in er_host_api for plugins). Tensors are
 * owned by the core and valid during the call. */
ER_API int er_kernel_input_count(const er_kernel_ctx *ctx);
ER_API int er_kernel_output_count(const er_kernel_ctx *ctx);
/* Input i; NULL when omitted. */
ER_API const er_tensor *er_kernel_input(const er_kernel_ctx *ctx, int i);
/* Output i (allocated, in compute); NULL when omitted or while inferring. */
ER_API er_tensor *er_kernel_output(const er_kernel_ctx *ctx, int i);
/* Sets output i's type and shape (in infer). dims borrowed. */
ER_API er_status er_kernel_set_output(er_kernel_ctx *ctx, int i, er_dtype dtype, int rank,
                                      const int64_t *dims);
/* True while `infer` runs at load with partial knowledge. */
ER_API bool er_kernel_is_loading(const er_kernel_ctx *ctx);
/* The node being computed (for its attributes, through er_node_attr_*). */
ER_API const er_node *er_kernel_node(const er_kernel_ctx *ctx);
/* The device queue of an accelerator kernel (cl_command_queue for opencl,
 * cudaStream_t for cuda); NULL on the CPU. */
ER_API void *er_kernel_stream(const er_kernel_ctx *ctx);

/* Attribute getters: `def` when absent; INVALID_ATTRIBUTE naming the
 * attribute when it has another type. Strings and arrays are owned by the
 * model. *count_out is -1 when a list attribute is absent. */
ER_API er_status er_node_attr_int(const er_node *node, const char *name, int64_t def,
                                  int64_t *value_out);
ER_API er_status er_node_attr_float(const er_node *node, const char *name, float def,
                                    float *value_out);
ER_API er_status er_node_attr_string(const er_node *node, const char *name, const char *def,
                                     const char **value_out);
ER_API er_status er_node_attr_ints(const er_node *node, const char *name,
                                   const int64_t **values_out, int64_t *count_out);
ER_API er_status er_node_attr_floats(const er_node *node, const char *name,
                                     const float **values_out, int64_t *count_out);

/* ------------------------------------------------------------------------ */
/* The services a plugin may call                                            */
/* ------------------------------------------------------------------------ */

typedef struct er_host_api {
  uint32_t abi_version;      /* the core's ER_PLUGIN_ABI_VERSION */
  uint32_t struct_size;      /* sizeof(er_host_api) in the core: members
                                past it are absent */

  /* Records the calling thread's error message (shown to the user with the
   * failure) and returns `status`. */
  er_status (*set_error)(er_status status, const char *message);
  /* Sends one line to the core's log (see er_log_set_callback). */
  void (*log)(er_log_level level, const char *message);

  /* Tensors (the same functions as edgerun.h). */
  er_dtype (*tensor_dtype)(const er_tensor *t);
  int (*tensor_rank)(const er_tensor *t);
  const int64_t *(*tensor_dims)(const er_tensor *t);
  int64_t (*tensor_count)(const er_tensor *t);
  size_t (*tensor_nbytes)(const er_tensor *t);
  void *(*tensor_data)(er_tensor *t);
  const void *(*tensor_cdata)(const er_tensor *t);
  size_t (*dtype_size)(er_dtype dtype);
  const char *(*dtype_name)(er_dtype dtype);

  /* The graph. value_info describes a value as known at load (dims of -1
   * are dynamic). value_constant is the data of a value fixed at load
   * (weights, folded constants), NULL otherwise. */
  int32_t (*graph_node_count)(const er_graph *g);
  const er_node *(*graph_node)(const er_graph *g, int32_t index);
  int32_t (*graph_value_count)(const er_graph *g);
  er_status (*graph_value_info)(const er_graph *g, int32_t value, er_value_info *info_out);
  const er_tensor *(*graph_value_constant)(const er_graph *g, int32_t value);

  /* Nodes. node_input / node_output give value ids (-1 = an omitted
   * optional input or output). node_version is the schema version in force. */
  const char *(*node_op_type)(const er_node *n);
  const char *(*node_domain)(const er_node *n);
  const char *(*node_name)(const er_node *n);
  int (*node_version)(const er_node *n);
  int (*node_input_count)(const er_node *n);
  int32_t (*node_input)(const er_node *n, int i);
  int (*node_output_count)(const er_node *n);
  int32_t (*node_output)(const er_node *n, int i);
  er_status (*node_attr_int)(const er_node *n, const char *name, int64_t def, int64_t *out);
  er_status (*node_attr_float)(const er_node *n, const char *name, float def, float *out);
  er_status (*node_attr_string)(const er_node *n, const char *name, const char *def,
                                const char **out);
  er_status (*node_attr_ints)(const er_node *n, const char *name, const int64_t **out,
                              int64_t *count);
  er_status (*node_attr_floats)(const er_node *n, const char *name, const float **out,
                                int64_t *count);

  /* The values of one run. frame_value is NULL for a value not computed
   * yet. frame_output gives value `value` a new host tensor of the given
   * type and shape (zeroed) and returns it for the plugin to fill; it is
   * owned by the frame. */
  const er_tensor *(*frame_value)(const er_frame *f, int32_t value);
  er_status (*frame_output)(er_frame *f, int32_t value, er_dtype dtype, int rank,
                            const int64_t *dims, er_tensor **tensor_out);

  /* Custom operators (the same functions as above). */
  er_status (*custom_op_register)(const er_custom_op *op);
  int (*kernel_input_count)(const er_kernel_ctx *ctx);
  int (*kernel_output_count)(const er_kernel_ctx *ctx);
  const er_tensor *(*kernel_input)(const er_kernel_ctx *ctx, int i);
  er_tensor *(*kernel_output)(const er_kernel_ctx *ctx, int i);
  er_status (*kernel_set_output)(er_kernel_ctx *ctx, int i, er_dtype dtype, int rank,
                                 const int64_t *dims);
  bool (*kernel_is_loading)(const er_kernel_ctx *ctx);
  const er_node *(*kernel_node)(const er_kernel_ctx *ctx);
} er_host_api;

/* ------------------------------------------------------------------------ */
/* What a plugin provides                                                    */
/* ------------------------------------------------------------------------ */

/* Filled in by the plugin's entry point. `user` is passed back to every
 * call. Members marked (optional) may be NULL. */
typedef struct er_backend_plugin {
  uint32_t abi_version;      /* ER_PLUGIN_ABI_VERSION the plugin was built with */
  uint32_t struct_size;      /* sizeof(er_backend_plugin) in the plugin */
  const char *name;          /* "rknn", "qnn", ...: [a-z0-9_-], at most 31
                                bytes; must outlive the plugin */
  void *user;

  /* Devices this backend can drive; 0 when none is present (sessions that
   * ask for the backend then fail with the reason device_desc gives). */
  int (*device_count)(void *user);
  er_status (*device_desc)(void *user, int index, er_device_desc *desc_out);

  /* Whether the backend can run `node`. On false, writes a one-line reason
   * ("dtype float64 is not supported") into reason[reason_size]; the core
   * reports it with the node's CPU placement. */
  bool (*supports_op)(void *user, const er_graph *graph, const er_node *node, char *reason,
                      size_t reason_size);

  /* Prepares a subgraph once per session (weights to the device, device
   * programs); *compiled_out is released with release(). */
  er_status (*compile)(void *user, const er_subgraph *sg, void **compiled_out);
  /* Computes a compiled subgraph over one run's frame: reads sg->inputs
   * with host->frame_value and writes every sg->outputs entry with
   * host->frame_output. Called from several threads at once with
   * different frames when the application runs a session concurrently. */
  er_status (*compute)(void *user, void *compiled, er_frame *frame);
  void (*release)(void *user, void *compiled);

  /* Called once when the core unloads the plugin. (optional) */
  void (*destroy)(void *user);
} er_backend_plugin;

/* The entry point's type. The plugin checks host->abi_version (same major),
 * fills *plugin_out and returns OK, or returns a status (with
 * host->set_error explaining) when it cannot work here. */
typedef er_status (*er_backend_plugin_init_fn)(const er_host_api *host,
                                               er_backend_plugin *plugin_out);
/* Declared here so a plugin's definition is checked against it; the core
 * never defines it. */
ER_PLUGIN_EXPORT er_status er_backend_plugin_init(const er_host_api *host,
                                                  er_backend_plugin *plugin_out);

/* ------------------------------------------------------------------------ */
/* Loading and listing backends                                              */
/* ------------------------------------------------------------------------ */

/* Loads a plugin from a shared object (dlopen) and registers it under the
 * name it gives. `path` (borrowed) is a .so file, or a folder whose *.so
 * files are each loaded. UNSUPPORTED with the versions when the plugin's
 * ABI major differs; INVALID_ARGUMENT when a backend of that name exists.
 * Plugins stay loaded until the process exits. Thread-safe. */
ER_API er_status er_backend_load(const char *path);

/* Registers a plugin table directly (an in-process backend; the same rules
 * as a loaded one). `plugin` is copied; what it points to must outlive the
 * process. */
ER_API er_status er_backend_register(const er_backend_plugin *plugin);

/* One backend the core knows: built in (cpu, opencl, cuda) or loaded. */
typedef struct er_backend_info {
  const char *name;          /* static or owned by the core */
  bool built;                /* compiled into this build (plugins: true) */
  bool plugin;               /* loaded from a shared object */
  int device_count;          /* 0 when no device is usable */
  const char *status;        /* why it cannot be used ("no OpenCL platform
                                found"), "" when usable */
} er_backend_info;

/* The number of known backends, and backend `index`. Probing a backend
 * may initialize its driver (first call only). */
ER_API size_t er_backend_count(void);
ER_API er_status er_backend_get_info(size_t index, er_backend_info *info_out);
/* Device `device` of backend `name`. */
ER_API er_status er_backend_device(const char *name, int device, er_device_desc *desc_out);

/* ------------------------------------------------------------------------ */
/* Placement report of a session                                             */
/* ------------------------------------------------------------------------ */

/* Where one node of the top-level graph runs, and why. Strings are owned by
 * the session. */
typedef struct er_placement {
  const char *op_type;
  const char *node_name;
  const char *backend;       /* the backend that runs it */
  const char *reason;        /* why the preferred backend declined it ("" when
                                it runs on its preferred backend) */
  uint64_t macs;             /* estimated multiply-accumulates (one per
                                output element for elementwise ops) */
  int segment;               /* index of its subgraph in execution order */
} er_placement;

typedef struct er_partition_summary {
  const char *preferred;     /* the first preferred backend ("cpu" if none) */
  size_t node_count;
  size_t fallback_nodes;     /* nodes on the CPU although an accelerator was
                                preferred */
  size_t segments;           /* subgraphs, in execution order */
  size_t transfers;          /* values moved between host and a device per run */
  uint64_t transfer_bytes;   /* bytes per run, from shapes known at load
                                (dynamic dims counted as 1) */
  uint64_t total_macs;
  uint64_t fallback_macs;
  double fallback_share;     /* fallback_macs / total_macs, 0..1 */
} er_partition_summary;

/* Above this share of compute on the CPU, session creation logs a warning. */
#define ER_FALLBACK_WARN_SHARE 0.20

/* One value moved between host memory and a device per run: the session
 * uploads a device segment's inputs before it runs and downloads its
 * outputs after (intermediates inside a segment stay on the device). */
typedef struct er_transfer {
  const char *value;         /* the value's name (owned by the model) */
  int segment;               /* the device segment it enters or leaves */
  const char *backend;       /* that segment's backend */
  bool to_device;            /* true: host -> device; false: device -> host */
  uint64_t bytes;            /* from the shape known at load (dynamic dims
                                counted as 1) */
} er_transfer;

ER_API void er_session_partition(const er_session *session, er_partition_summary *summary_out);
/* Transfer `index` (0 .. summary.transfers-1), in execution order. */
ER_API er_status er_session_transfer(const er_session *session, size_t index, er_transfer *transfer_out);
/* Placement of node `index` (0 .. node_count-1, in the model's order). */
ER_API er_status er_session_placement(const er_session *session, size_t index,
                                      er_placement *placement_out);

#ifdef __cplusplus
}
#endif
#endif /* EDGERUN_BACKEND_H */
