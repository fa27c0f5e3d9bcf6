/* cpu-exec.h - the CPU backend's interpreter: runs nodes with their
 * reference kernels. Sessions run the main graph through it (via the CPU
 * backend's compute), and the control-flow ops (If, Loop, Scan) run their
 * subgraphs with it. */
#ifndef ER_CPU_EXEC_H
#define ER_CPU_EXEC_H

#include "graph/ir.h"
#include "ops/op.h"

struct er_backend;

/* Values of one graph during one execution. */
typedef struct er_frame {
  const er_graph *g;
  er_tensor *vals;               /* [g->n_values] */
  const struct er_frame *parent; /* frame of the enclosing graph, for OUTER */
} er_frame;

/* Called after each node has run, with its outputs (entries may be NULL
 * for omitted outputs) still alive; a non-OK status stops the run. Used by
 * the quantizer (calibration) and analysis to see intermediate tensors
 * without making them graph outputs. `g` is the graph holding the node
 * (subgraph nodes are reported too). */
typedef er_status (*er_exec_observer)(void *user, const er_graph *g, int32_t node_index,
                                      er_tensor *const *outputs, int n_outputs);

/* State of one run; one per er_session_run call (so runs never share). */
typedef struct er_exec {
  int threads;
  bool force_reference;
  const er_frame *frame;         /* frame of the node being run */
  int depth;                     /* subgraph nesting of the current call */
  er_exec_observer observe;      /* NULL = nobody watches (one test per node) */
  void *observe_user;            /* passed back to observe */
} er_exec;

/* A compiled piece of the main graph placed on one backend. */
typedef struct er_segment {
  struct er_backend *backend;
  void *compiled;                /* from backend->iface->compile */
} er_segment;

/* last_use[v] = index of the last node of g that reads value v (a node
 * whose subgraphs capture v counts), INT32_MAX for graph outputs, -1 when
 * nothing reads it. `last_use` has g->n_values entries. */
void er__exec_last_use(const er_graph *g, int32_t *last_use);

/* Runs nodes[0..n_nodes) (indices into frame->g->nodes; NULL = the first
 * n_nodes nodes in order) in `frame`, freeing intermediates after their last
 * use. */
er_status er__exec_nodes(er_exec *ex, er_frame *frame, const int32_t *nodes, int32_t n_nodes,
                         const int32_t *last_use);

/* Executes `g`. `inputs[i]` binds g->inputs[i] (borrowed; entries may be
 * NULL and n_inputs may be less than g->n_inputs for inputs that have
 * initializers). Each outputs[i] receives a tensor owning its data (copied
 * when the value is a constant or an input). `parent` is the frame of the
 * enclosing graph (NULL for the main graph). */
er_status er__exec_graph(er_exec *ex, const er_graph *g, const er_frame *parent,
                         const er_tensor *const *inputs, int n_inputs, er_tensor *outputs);
/* The same, computing the nodes through backend segments in order. */
er_status er__exec_graph_segments(er_exec *ex, const er_graph *g, const er_frame *parent,
                                  const er_tensor *const *inputs, int n_inputs,
                                  const er_segment *segs, int n_segs, er_tensor *outputs);

/* For control-flow ops: runs subgraph `sub` of the node being executed with
 * the given inputs; outputs as in er__exec_graph. */
er_status er__exec_subgraph(const er_kctx *ctx, const er_graph *sub,
                            const er_tensor *const *inputs, int n_inputs, er_tensor *outputs);

#endif /* ER_CPU_EXEC_H */
