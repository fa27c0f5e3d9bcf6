/* passes-layernorm.c - layer normalization written as primitives (see
 * passes.h for the contract every rewrite keeps):
 *
 *   layernorm  ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div[/Mul/Add]
 *              -> LayerNormalization */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/passes.h"

/* LayerNorm from primitives (PyTorch's export below opset 17):
 *   m = ReduceMean(x, -1); d = Sub(x, m); v = ReduceMean(Pow(d, 2), -1);
 *   y = Div(d, Sqrt(Add(v, eps))) [; y = Mul(y, gamma); y = Add(y, beta)] */
static bool reduce_last_axis(const er_graph *g, const er_node *n, int rank) {
  if (!er__rw_is(n, "ReduceMean")) return false;
  const er_attr *kd = er__node_attr(n, "keepdims");
  if (kd && kd->i == 0) return false;
  const int64_t *axes = NULL;
  int64_t n_axes = 0;
  const er_attr *aa = er__node_attr(n, "axes");
  if (aa && aa->type == ER_ATTR_INTS) {
    axes = aa->ints;
    n_axes = aa->n;
  } else if (n->n_inputs > 1) {
    const er_tensor *t = er__graph_const(g, n->inputs[1]);
    if (!t || t->dtype != ER_DTYPE_INT64) return false;
    axes = t->data;
    n_axes = er__tensor_count(t);
  }
  return n_axes == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

er_status er__pass_layernorm(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *rm = &g->nodes[i];
    int32_t x = rm->n_inputs ? rm->inputs[0] : -1;
    if (x < 0 || !er__rw_is_f32(g, x) || g->values[x].info.rank < 1) continue;
    int rank = g->values[x].info.rank;
    /* x may have readers beyond the ReduceMean and the Sub (a pre-norm
     * residual): the fused node reads x as they do. */
    if (!reduce_last_axis(g, rm, rank) || pc->uses[x] < 2) continue;
    int32_t sub = er__rw_sole_consumer(pc, rm->outputs[0]);
    if (sub < 0 || !er__rw_is(&g->nodes[sub], "Sub") || g->nodes[sub].inputs[0] != x ||
        g->nodes[sub].inputs[1] != rm->outputs[0])
      continue;
    int32_t d = g->nodes[sub].outputs[0];
    if (pc->uses[d] != 2) continue;
    int32_t pow = -1, div = -1;
    for (int32_t j = 0; j < g->n_nodes; j++) {
      if (pc->dead[j]) continue;
      const er_node *m = &g->nodes[j];
      if (m->n_inputs >= 1 && m->inputs[0] == d) {
        if (er__rw_is(m, "Pow") && fabs(er__rw_const_scalar(g, m->inputs[1]) - 2.0) < 1e-6) pow = j;
        if (er__rw_is(m, "Div")) div = j;
      }
    }
    if (pow < 0 || div < 0) continue;
    int32_t rm2 = er__rw_sole_consumer(pc, g->nodes[pow].outputs[0]);
    if (rm2 < 0 || !reduce_last_axis(g, &g->nodes[rm2], rank)) continue;
    int32_t add = er__rw_sole_consumer(pc, g->nodes[rm2].outputs[0]);
    if (add < 0 || !er__rw_is(&g->nodes[add], "Add")) continue;
    double eps = er__rw_const_scalar(g, g->nodes[add].inputs[1]);
    if (isnan(eps)) eps = er__rw_const_scalar(g, g->nodes[add].inputs[0]);
    if (isnan(eps) || eps < 0) continue;
    int32_t sq = er__rw_sole_consumer(pc, g->nodes[add].outputs[0]);
    if (sq < 0 || !er__rw_is(&g->nodes[sq], "Sqrt")) continue;
    if (g->nodes[div].inputs[1] != g->nodes[sq].outputs[0] || pc->uses[g->nodes[sq].outputs[0]] != 1) continue;
    int32_t y = g->nodes[div].outputs[0];
    int64_t hidden = g->values[x].info.dims[rank - 1];
    if (hidden <= 0) continue;
    /* Optional affine: Mul(gamma) then Add(beta), both 1-D of hidden. */
    int32_t mul = er__rw_sole_consumer(pc, y), gamma = -1, beta = -1, last = div, addb = -1;
    if (mul >= 0 && er__rw_is(&g->nodes[mul], "Mul")) {
      const er_node *m = &g->nodes[mul];
      int32_t o = m->inputs[0] == y ? m->inputs[1] : m->inputs[0];
      const er_tensor *t = er__graph_const(g, o);
      if (t && t->dtype == ER_DTYPE_FLOAT && er__tensor_count(t) == hidden && t->rank == 1) {
        gamma = o;
        last = mul;
        addb = er__rw_sole_consumer(pc, m->outputs[0]);
        if (addb >= 0 && er__rw_is(&g->nodes[addb], "Add")) {
          const er_node *ab = &g->nodes[addb];
          int32_t ob = ab->inputs[0] == m->outputs[0] ? ab->inputs[1] : ab->inputs[0];
          const er_tensor *tb = er__graph_const(g, ob);
          if (tb && tb->dtype == ER_DTYPE_FLOAT && er__tensor_count(tb) == hidden && tb->rank == 1) {
            beta = ob;
            last = addb;
          }
        }
      }
    }
    if (gamma < 0) {
      /* LayerNormalization needs a scale: use ones. */
      er_tensor ones;
      er__tensor_set(&ones, ER_DTYPE_FLOAT, 1, &hidden);
      ER_CHECK(er__tensor_alloc(&ones, 0));
      for (int64_t k = 0; k < hidden; k++) ((float *)ones.data)[k] = 1.0f;
      ER_CHECK(er__rw_new_const(g, "layernorm", "folded", &ones, &gamma));
    }
    int32_t out = g->nodes[last].outputs[0];
    er_node *ln = &g->nodes[last];
    int32_t ins[3] = {x, gamma, beta};
    ER_CHECK(er__rw_set_inputs(g, ln, ins, beta >= 0 ? 3 : 2));
    ER_CHECK(er__rw_set_op(ln, "", "LayerNormalization", 17));
    er_attr attrs[2];
    memset(attrs, 0, sizeof attrs);
    attrs[0].name = "axis";
    attrs[0].type = ER_ATTR_INT;
    attrs[0].i = -1;
    attrs[1].name = "epsilon";
    attrs[1].type = ER_ATTR_FLOAT;
    attrs[1].f = (float)eps;
    ln->n_attrs = 0;
    ER_CHECK(er__rw_merge_attrs(g, ln, attrs, 2));
    ln->outputs[0] = out;
    int32_t all[9] = {i, sub, pow, rm2, add, sq, div, gamma >= 0 && last != div ? mul : -1, beta >= 0 ? addb : -1};
    for (int k = 0; k < 9; k++)
      if (all[k] >= 0 && all[k] != last) pc->dead[all[k]] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}
