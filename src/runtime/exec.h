/* exec.h - running a graph: the interpreter shared by sessions and by the
 * control-flow ops (If, Loop, Scan) that run subgraphs. */
#ifndef ER_EXEC_H
#define ER_EXEC_H

#include "graph/ir.h"
#include "ops/op.h"

/* Values of one graph during one execution. */
typedef struct er_frame {
  const er_graph *g;
  er_tensor *vals;               /* [g->n_values] */
  const struct er_frame *parent; /* frame of the enclosing graph, for OUTER */
} er_frame;

/* State of one run; one per er_session_run call (so runs never share). */
typedef struct er_exec {
  int threads;
  bool force_reference;
  const er_frame *frame;         /* frame of the node being run */
  int depth;                     /* subgraph nesting of the current call */
} er_exec;

/* Executes `g`. `inputs[i]` binds g->inputs[i] (borrowed; n_inputs may be
 * less than g->n_inputs only when the rest have initializers). Each output
 * outputs[i] receives a tensor whose data it owns (copied when the value is
 * a constant or an input). `parent` is the frame of the enclosing graph
 * (NULL for the main graph). */
er_status er__exec_graph(er_exec *ex, const er_graph *g, const er_frame *parent,
                         const er_tensor *const *inputs, int n_inputs, er_tensor *outputs);

/* For control-flow ops: runs subgraph `sub` of the node being executed with
 * the given inputs; outputs as in er__exec_graph. */
er_status er__exec_subgraph(const er_kctx *ctx, const er_graph *sub,
                            const er_tensor *const *inputs, int n_inputs, er_tensor *outputs);

#endif /* ER_EXEC_H */
