/* passes.h - the rewrites of the basic and fusion passes, one family per
 * file, run in the order pass-table.c lists them.
 *
 * Patterns of standard ops become fewer, larger nodes that optimized
 * kernels run in one pass over memory. The basic rewrites run at model
 * load and keep standard ops (so accelerators and NPU plugins see the
 * model's operators); the fusion rewrites make edgerun's own com.edgerun
 * ops and run per session, on the session's copy of the graph, when every
 * node is on the CPU.
 *
 *   passes-shape.c       identity, transpose, reshape, slice
 *   passes-fold.c        conv_bn, conv_mul, conv_bias, matmul_bias,
 *                        bn_affine
 *   passes-activation.c  activation, conv_add, gelu, hardswish
 *   passes-layernorm.c   layernorm
 *   passes-attention.c   attention
 *
 * Each rewrite walks the live nodes of an er_rewrite (graph/rewrite.h),
 * marks the nodes it replaces dead, bumps `changed` and recounts readers
 * after every change. Every rewrite requires the values it makes disappear
 * to have no other reader and not to be graph outputs, so what a caller
 * can observe never changes. Fused ops' reference kernels run the replaced
 * ops' references, so outputs stay within float rounding of the unfused
 * graph (tests/unit/test-passes.c compares both). Subgraphs are left as
 * written. */
#ifndef ER_GRAPH_PASSES_H
#define ER_GRAPH_PASSES_H

#include "graph/graph.h"
#include "graph/rewrite.h"
#include "ops/fused.h"

typedef er_status (*er_rewrite_fn)(er_rewrite *rw);

er_status er__pass_identity(er_rewrite *rw);
er_status er__pass_transpose(er_rewrite *rw);
er_status er__pass_reshape(er_rewrite *rw);
er_status er__pass_slice(er_rewrite *rw);
er_status er__pass_conv_bn(er_rewrite *rw);
er_status er__pass_conv_mul(er_rewrite *rw);
er_status er__pass_conv_bias(er_rewrite *rw);
er_status er__pass_matmul_bias(er_rewrite *rw);
er_status er__pass_bn_affine(er_rewrite *rw);
er_status er__pass_activation(er_rewrite *rw);
er_status er__pass_conv_add(er_rewrite *rw);
er_status er__pass_gelu(er_rewrite *rw);
er_status er__pass_hardswish(er_rewrite *rw);
er_status er__pass_layernorm(er_rewrite *rw);
er_status er__pass_attention(er_rewrite *rw);

/* Value v is `Mul(a, b)`'s operand: returns the other operand, or -1. */
static inline int32_t er__pass_mul_other(const er_node *m, int32_t v) {
  if (!er__rw_is(m, "Mul") || m->n_inputs != 2) return -1;
  if (m->inputs[0] == v) return m->inputs[1];
  if (m->inputs[1] == v) return m->inputs[0];
  return -1;
}

/* Sets a Transpose's perm (the ints must live in the graph's arena). */
static inline er_status er__pass_set_perm(er_graph *g, er_node *n, int64_t *perm, int64_t rank) {
  er_attr a = er__rw_attr_ints("perm", perm, rank);
  return er__rw_merge_attrs(g, n, &a, 1);
}

#endif /* ER_GRAPH_PASSES_H */
