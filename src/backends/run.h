/* run.h - what one run of a session is, as the backends see it: the
 * values of a graph (frames), the memory a run reuses, the kernels chosen
 * for nodes at compile time, and the interpreter's entry a backend calls to
 * run nodes on the host. The runtime (src/runtime/exec.c) owns the
 * interpreter and fills er_exec.interp; backends never include the
 * runtime. */
#ifndef ER_RUN_H
#define ER_RUN_H

#include "core/pool.h"
#include "ir/ir.h"
#include "ops/op.h"

struct er_cpu_kernel;
struct er_interp;

/* Memory a run of the main graph reuses from one run to the next (owned by
 * a session's run context): with a plan, intermediates live in `arena` at
 * planned offsets and a run allocates nothing. */
typedef struct er_run_mem {
  const int64_t *offset;         /* [n_values] arena offset, -1 = not planned;
                                    NULL = no plan yet */
  const uint64_t *capacity;      /* [n_values] bytes reserved at offset */
  uint8_t *arena;
  uint64_t *need;                /* [n_values] bytes each value took (max),
                                    recorded to build or grow the plan */
  bool overflow;                 /* a value outgrew its slot this run */
  void *scratch;                 /* kernel scratch, scratch_bytes */
  size_t scratch_bytes;
  /* Scratch a kernel needed beyond what prepare could size (shapes known
   * only at run time): grown on demand, kept for later runs, so that
   * steady-state runs allocate nothing. Owned by the run context. */
  void *spill;
  size_t spill_bytes;
  er_tensor **inp, **outp;       /* [width] operand pointer arrays */
  int width;
  /* Caller-provided output tensors (er_session_run_into), by value id;
   * NULL entries are allocated as usual. */
  er_tensor *const *bound_outputs;
  /* [n_values] the value whose planned memory this one shares (the input
   * of a view op, ER_OP_VIEW), -2 for a Concat output whose inputs were
   * made in place in it, -1 for neither; NULL = none. Such a slot already
   * holds bytes, so it is never zeroed. */
  const int32_t *view_of;
} er_run_mem;

/* Values of one graph during one execution. */
typedef struct er_frame {
  const er_graph *g;
  er_tensor *vals;               /* [g->n_values] */
  const struct er_frame *parent; /* frame of the enclosing graph, for OUTER */
  er_run_mem *mem;               /* reusable memory of the main graph; NULL
                                    for subgraphs (they allocate) */
} er_frame;

/* Timing of one node of the main graph (nanoseconds). */
typedef struct er_node_prof {
  uint64_t total_ns, count;
  uint64_t start_ns, dur_ns;     /* in the last run, start relative to it */
} er_node_prof;

/* Called after each node has run, with its outputs (entries may be NULL
 * for omitted outputs) still alive; a non-OK status stops the run. Used by
 * the quantizer (calibration) and analysis to see intermediate tensors
 * without making them graph outputs. `g` is the graph holding the node
 * (subgraph nodes are reported too). */
typedef er_status (*er_exec_observer)(void *user, const er_graph *g, int32_t node_index,
                                      er_tensor *const *outputs, int n_outputs);

/* State of one run; one per er_session_run call (so runs never share). */
typedef struct er_exec {
  er_thread_pool *pool;          /* the session's workers; may be NULL */
  const er_frame *frame;         /* frame of the node being run */
  int depth;                     /* subgraph nesting of the current call */
  er_node_prof *prof;            /* [main graph n_nodes] or NULL */
  uint64_t t0_ns;                /* run start, for prof start times */
  er_run_mem *mem;               /* the main graph's run memory, or NULL */

  er_exec_observer observe;      /* NULL = nobody watches (one test per node) */
  void *observe_user;            /* passed back to observe */
  /* Kernels chosen when the running CPU segment was compiled for the
   * subgraphs (If/Loop/Scan bodies) its nodes hold; subgraphs not listed
   * run on the reference kernels. */
  const struct er_sub_kernels *subs;
  int n_subs;
  /* The interpreter that made this run (the runtime's, runtime/exec.c):
   * backends run nodes through it on the host. */
  const struct er_interp *interp;
} er_exec;

/* The kernel chosen for a node at compile time: an application's custom
 * kernel registered for the CPU, else an optimized kernel with its state,
 * else (both NULL) the op's reference run(). */
typedef struct er_node_kernel {
  const struct er_custom_kernel *custom;
  const struct er_cpu_kernel *kernel;  /* NULL: the op's reference run() */
  void *state;                         /* from the kernel's prepare() */
  size_t scratch_bytes;                /* per run */
} er_node_kernel;

/* The kernels of one subgraph, by node index. */
typedef struct er_sub_kernels {
  const struct er_graph *graph;
  er_node_kernel *kernels;             /* [graph->n_nodes] */
  int32_t *last_use;                   /* [graph->n_values] (er__graph_last_use), computed once */
} er_sub_kernels;

/* The interpreter, as a backend reaches it from compute() through
 * er_exec.interp. */
typedef struct er_interp {
  /* Runs nodes[0..n_nodes) (indices into frame->g->nodes; NULL = the first
   * n_nodes nodes in order) in `frame`, freeing intermediates after their
   * last use. kernels[node index] (may be NULL) names optimized kernels. */
  er_status (*run_nodes)(er_exec *ex, er_frame *frame, const int32_t *nodes, int32_t n_nodes,
                         const int32_t *last_use, const er_node_kernel *kernels);
} er_interp;

#endif /* ER_RUN_H */
