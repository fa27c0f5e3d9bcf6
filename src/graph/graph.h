/* graph.h - what the graph layer does to an IR graph: binding nodes to ops,
 * shape inference and constant folding, the rewrites, and the pass table
 * that orders them (pass-table.c). The IR itself (src/ir/ir.h) has no
 * behaviour beyond building and checking its structure. */
#ifndef ER_GRAPH_H
#define ER_GRAPH_H

#include "ir/ir.h"

/* Resolves each node to an op implementation and version (ops layer);
 * UNSUPPORTED naming the op, domain and version when there is none. */
er_status er__graph_bind_ops(er_graph *g);

/* Shape/type inference and constant folding over `g` and its subgraphs:
 * runs each op's check with what is known; folds nodes whose inputs are
 * all constants when `fold` is set. */
er_status er__graph_infer(er_graph *g, bool fold);

/* Moves the loop-invariant nodes of the main graph's Loop bodies in front
 * of their Loop (hoist.c); *hoisted_out (may be NULL): how many moved. */
er_status er__graph_hoist_loop_invariants(er_graph *g, int32_t *hoisted_out);

/* Entries of a small integer vector known at load although the vector is
 * not a constant (shapevals.c): v[i] holds when bit i of `known` is set;
 * n = -1 when nothing is known. */
typedef struct er_shape_vals {
  int64_t v[ER_MAX_RANK];
  int8_t n;
  uint8_t known;
} er_shape_vals;

/* What `node` (checked; out0 its first output's type and shape) makes of
 * its inputs' known entries, into tab[node->outputs[0]]. tab is indexed by
 * value id; in[] are the node's inputs as the check saw them. */
void er__shape_vals_propagate(const er_node *node, const er_tensor *const *in, const er_tensor *out0,
                              er_shape_vals *tab);
/* Fills dims of `out` (the node's first output) that its check left
 * unknown from partly known requested shapes (Reshape, Resize sizes,
 * Expand, ConstantOfShape). */
void er__shape_vals_refine(const er_node *node, const er_tensor *const *in, const er_shape_vals *tab,
                           er_tensor *out);

/* The basic and fusion rewrites (passes.h, one family per file) run
 * through the pass table below; graph/rewrite.h is the toolkit every pass
 * edits with. */
/* onnxruntime's com.microsoft QLinear operators (QLinearAdd, QLinearMul,
 * QLinearSigmoid, QLinearLeakyRelu, QLinearAveragePool,
 * QLinearGlobalAveragePool, QLinearConcat, QLinearSoftmax) rewritten as the
 * standard DequantizeLinear -> op -> QuantizeLinear nodes they stand for
 * (contrib.c), in g and its subgraphs; after validation, before binding. */
er_status er__graph_expand_contrib(er_graph *g);
/* The layout pass (passes-blocked.c), per session after the fusion passes
 * when every node runs on the CPU: float convolutions and pools, and the
 * elementwise ops and channel concatenations between them, to the
 * channel-blocked layout (ops/blocked.c) with `block` channels per block.
 * keep_planar (may be NULL) names convolutions to leave planar (the
 * backend's planar kernel is faster for them). *blocked_out (may be NULL)
 * receives the convolutions and pools it converted; with none the graph is
 * left as it was. */
typedef bool (*er_keep_planar_fn)(const er_graph *g, int32_t node);
er_status er__graph_block_layout(er_graph *g, int block, er_keep_planar_fn keep_planar, int *blocked_out);
/* The QDQ pass (passes-qdq.c), the first session-time pass:
 * DequantizeLinear -> op -> QuantizeLinear patterns to integer ops. */
er_status er__graph_qdq_fuse(er_graph *g);

/* ---- the pass table (pass-table.c) -------------------------------------- */

typedef enum er_pass_phase {
  ER_PASS_LOAD = 0,           /* on the model's graph, for every backend */
  ER_PASS_SESSION,            /* on a session's own copy, CPU-only sessions */
} er_pass_phase;

/* What a pass may need beyond the graph. */
typedef struct er_pass_ctx {
  int level;                  /* the model's optimize level (0-2) */
  int block;                  /* channels per block for the layout pass; 0 = off */
  er_keep_planar_fn keep_planar; /* the layout pass's planar choice (may be NULL) */
} er_pass_ctx;

/* The level of a pass that runs whatever the optimize level: the ones that
 * make a graph runnable at all (validate, bind, infer). */
#define ER_PASS_ALWAYS (-1000)

typedef struct er_pass {
  const char *name;           /* in error messages and the invariant check's */
  er_pass_phase phase;
  int level;                  /* runs when ctx->level >= level */
  er_status (*run)(er_graph *g, const er_pass_ctx *ctx);
} er_pass;

/* The table in run order; *count_out entries. */
const er_pass *er__graph_passes(size_t *count_out);
/* Runs the passes of `phase` in table order, checking the graph's links
 * after each (debug and sanitizer builds) or once after all (release). */
er_status er__graph_run_passes(er_graph *g, er_pass_phase phase, const er_pass_ctx *ctx);

#endif /* ER_GRAPH_H */
