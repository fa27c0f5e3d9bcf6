/* passes-fold.c - constants folded into the weights of the node before
 * them (see passes.h for the contract every rewrite keeps):
 *
 *   conv_bn      Conv + BatchNormalization folded into the Conv weights
 *   conv_mul     Conv + Mul(per-channel constant) into the weights
 *   conv_bias    Conv + Add(per-channel constant) into the bias
 *   matmul_bias  MatMul + Add(bias)           -> FusedMatMul
 *   bn_affine    BatchNormalization + per-channel Mul/Add -> one
 *                BatchNormalization */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/passes.h"

er_status er__pass_conv_bn(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *conv = &g->nodes[i];
    if (!er__rw_is(conv, "Conv") || conv->n_outputs != 1 || !er__rw_is_f32(g, conv->outputs[0])) continue;
    int32_t b = er__rw_sole_consumer(pc, conv->outputs[0]);
    if (b < 0) continue;
    er_node *bn = &g->nodes[b];
    if (!er__rw_is(bn, "BatchNormalization") || bn->n_inputs != 5 || bn->inputs[0] != conv->outputs[0]) continue;
    bool training = false;
    for (int k = 1; k < bn->n_outputs; k++)
      if (bn->outputs[k] >= 0) training = true;
    const er_attr *tm = er__node_attr(bn, "training_mode");
    if (training || (tm && tm->i)) continue;
    const er_tensor *w = er__graph_const(g, conv->inputs[1]);
    const er_tensor *bias = conv->n_inputs > 2 ? er__graph_const(g, conv->inputs[2]) : NULL;
    if (!w || w->dtype != ER_DTYPE_FLOAT || w->rank < 3 || (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !bias))
      continue;
    const er_tensor *sc = er__graph_const(g, bn->inputs[1]), *sh = er__graph_const(g, bn->inputs[2]),
                    *mean = er__graph_const(g, bn->inputs[3]), *var = er__graph_const(g, bn->inputs[4]);
    int64_t cout = w->dims[0];
    if (!sc || !sh || !mean || !var || er__tensor_count(sc) != cout || er__tensor_count(sh) != cout ||
        er__tensor_count(mean) != cout || er__tensor_count(var) != cout)
      continue;
    const er_attr *ea = er__node_attr(bn, "epsilon");
    double eps = ea && ea->type == ER_ATTR_FLOAT ? ea->f : 1e-5;
    /* Weights the model already owns (made by load-time folding) and only
     * this conv reads are rescaled in place: no second copy. Weights in
     * the mapped file are copied once and their pages released. */
    bool in_place = (w->flags & ER_TENSOR_OWNS_DATA) && pc->uses[conv->inputs[1]] == 1;
    er_tensor nw, nb;
    er__tensor_set(&nw, ER_DTYPE_FLOAT, w->rank, w->dims);
    er__tensor_set(&nb, ER_DTYPE_FLOAT, 1, &cout);
    if (!in_place) ER_CHECK(er__tensor_alloc(&nw, 0));
    if (er__tensor_alloc(&nb, 0) != ER_STATUS_OK) {
      er__tensor_release(&nw);
      return ER_STATUS_OUT_OF_MEMORY;
    }
    float *dst = in_place ? (float *)w->data : (float *)nw.data;
    int64_t per = er__tensor_count(w) / (cout ? cout : 1);
    for (int64_t c = 0; c < cout; c++) {
      /* Folded in double so the fold adds no float32 rounding of its own
       * beyond the final store. */
      double f = er__load_f64(sc->data, sc->dtype, c) / sqrt(er__load_f64(var->data, var->dtype, c) + eps);
      for (int64_t k = 0; k < per; k++) dst[c * per + k] = (float)(((const float *)w->data)[c * per + k] * f);
      double b0 = bias ? er__load_f64(bias->data, bias->dtype, c) : 0.0;
      ((float *)nb.data)[c] =
          (float)((b0 - er__load_f64(mean->data, mean->dtype, c)) * f + er__load_f64(sh->data, sh->dtype, c));
    }
    int32_t wid = conv->inputs[1], bid;
    if (!in_place) {
      er__model_release_pages(g->model, w->data, w->nbytes);
      ER_CHECK(er__rw_new_const(g, conv->name[0] ? conv->name : "conv", "folded", &nw, &wid));
    }
    ER_CHECK(er__rw_new_const(g, conv->name[0] ? conv->name : "conv", "folded", &nb, &bid));
    conv = &g->nodes[i]; /* values may have moved, nodes have not */
    int32_t ins[3] = {conv->inputs[0], wid, bid};
    ER_CHECK(er__rw_set_inputs(g, conv, ins, 3));
    er__rw_redirect_output(g, i, conv->outputs[0], bn->outputs[0]);
    pc->dead[b] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

/* True when constant c broadcasts against a conv output of rank r with
 * cout channels along every axis but the channels (or is one value). */
static bool per_channel_const(const er_tensor *c, int r, int64_t cout) {
  int64_t count = er__tensor_count(c);
  int pos = 1 - (r - c->rank);
  return c->dtype == ER_DTYPE_FLOAT && c->rank <= r &&
         (count == 1 || (count == cout && pos >= 0 && c->dims[pos] == cout));
}

/* A float32 Conv with constant weights (and a constant float bias or
 * none) whose only consumer is an `op` node whose other operand is a
 * constant per output channel (or one value): the start of the Mul and
 * Add folds. */
typedef struct conv_chan {
  int32_t consumer;      /* the `op` node */
  int32_t y;             /* the conv's output */
  const er_tensor *w, *bias, *c;
  int64_t cout, count;   /* output channels; elements of c (1 or cout) */
} conv_chan;

static bool conv_then_channel_const(const er_rewrite *pc, int32_t i, const char *op, conv_chan *m) {
  er_graph *g = pc->g;
  const er_node *conv = &g->nodes[i];
  if (pc->dead[i] || !er__rw_is(conv, "Conv") || conv->n_outputs != 1 || !er__rw_is_f32(g, conv->outputs[0])) return false;
  m->y = conv->outputs[0];
  m->consumer = er__rw_sole_consumer(pc, m->y);
  if (m->consumer < 0 || !er__rw_is(&g->nodes[m->consumer], op)) return false;
  const er_node *n = &g->nodes[m->consumer];
  int32_t other = n->inputs[0] == m->y ? n->inputs[1] : n->inputs[0];
  m->w = er__graph_const(g, conv->inputs[1]);
  m->c = er__graph_const(g, other);
  m->bias = conv->n_inputs > 2 ? er__graph_const(g, conv->inputs[2]) : NULL;
  if (other == m->y || !m->w || !m->c || m->w->dtype != ER_DTYPE_FLOAT || m->w->rank < 3 ||
      (conv->n_inputs > 2 && conv->inputs[2] >= 0 && (!m->bias || m->bias->dtype != ER_DTYPE_FLOAT)))
    return false;
  m->cout = m->w->dims[0];
  m->count = er__tensor_count(m->c);
  return per_channel_const(m->c, m->w->rank, m->cout);
}

/* Conv + Mul(constant per output channel) -> weights and bias scaled:
 * BatchNormalization exported as Mul + Add (Caffe2's Inception-v2 and
 * others); the Add then folds into the bias (pass_conv_bias). */
er_status er__pass_conv_mul(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    conv_chan m;
    if (!conv_then_channel_const(pc, i, "Mul", &m)) continue;
    er_node *conv = &g->nodes[i];
    const er_tensor *w = m.w, *c = m.c, *bias = m.bias;
    int32_t a = m.consumer, y = m.y;
    int64_t cout = m.cout, count = m.count;
    /* As in pass_conv_bn: weights the model owns and only this conv reads
     * are scaled in place; others (the mapped file) are copied once. */
    bool in_place = (w->flags & ER_TENSOR_OWNS_DATA) && pc->uses[conv->inputs[1]] == 1;
    er_tensor nw, nb;
    er__tensor_set(&nw, ER_DTYPE_FLOAT, w->rank, w->dims);
    if (!in_place) ER_CHECK(er__tensor_alloc(&nw, 0));
    float *dst = in_place ? (float *)w->data : (float *)nw.data;
    int64_t per = er__tensor_count(w) / (cout ? cout : 1);
    for (int64_t o = 0; o < cout; o++) {
      float f = ((const float *)c->data)[count == 1 ? 0 : o];
      for (int64_t k = 0; k < per; k++) dst[o * per + k] = ((const float *)w->data)[o * per + k] * f;
    }
    int32_t wid = conv->inputs[1], bid = -1;
    if (bias) {
      er__tensor_set(&nb, ER_DTYPE_FLOAT, 1, &cout);
      if (er__tensor_alloc(&nb, 0) != ER_STATUS_OK) {
        if (!in_place) er__tensor_release(&nw);
        return ER_STATUS_OUT_OF_MEMORY;
      }
      for (int64_t o = 0; o < cout; o++)
        ((float *)nb.data)[o] = ((const float *)bias->data)[o] * ((const float *)c->data)[count == 1 ? 0 : o];
    }
    if (!in_place) {
      if (pc->uses[conv->inputs[1]] == 1) er__model_release_pages(g->model, w->data, w->nbytes);
      ER_CHECK(er__rw_new_const(g, conv->name[0] ? conv->name : "conv", "folded", &nw, &wid));
    }
    if (bias) ER_CHECK(er__rw_new_const(g, conv->name[0] ? conv->name : "conv", "folded", &nb, &bid));
    conv = &g->nodes[i];
    int32_t ins[3] = {conv->inputs[0], wid, bid};
    ER_CHECK(er__rw_set_inputs(g, conv, ins, bias ? 3 : 2));
    er__rw_redirect_output(g, i, y, g->nodes[a].outputs[0]);
    pc->dead[a] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

/* Conv + Add(constant per output channel) -> the conv's bias: exporters
 * (CNTK's MNIST, Caffe converters) write the bias as a separate Add of a
 * [M,1,1] constant. A constant of one value counts too. */
er_status er__pass_conv_bias(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    conv_chan m;
    if (!conv_then_channel_const(pc, i, "Add", &m)) continue;
    er_node *conv = &g->nodes[i];
    const er_tensor *c = m.c, *bias = m.bias;
    int32_t a = m.consumer, y = m.y;
    int64_t cout = m.cout, count = m.count;
    er_tensor nb;
    er__tensor_set(&nb, ER_DTYPE_FLOAT, 1, &cout);
    ER_CHECK(er__tensor_alloc(&nb, 0));
    for (int64_t k = 0; k < cout; k++)
      ((float *)nb.data)[k] = (bias ? ((const float *)bias->data)[k] : 0.0f) +
                              ((const float *)c->data)[count == 1 ? 0 : k];
    int32_t bid;
    ER_CHECK(er__rw_new_const(g, conv->name[0] ? conv->name : "conv", "folded", &nb, &bid));
    conv = &g->nodes[i];
    int32_t ins[3] = {conv->inputs[0], conv->inputs[1], bid};
    ER_CHECK(er__rw_set_inputs(g, conv, ins, 3));
    er__rw_redirect_output(g, i, y, g->nodes[a].outputs[0]);
    pc->dead[a] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

er_status er__pass_matmul_bias(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *mm = &g->nodes[i];
    if (!er__rw_is(mm, "MatMul") || !er__rw_is_f32(g, mm->outputs[0])) continue;
    const er_tensor *bt = er__graph_const(g, mm->inputs[1]);
    const er_value *ov = &g->values[mm->outputs[0]];
    if (!bt || bt->rank != 2 || ov->info.rank < 2) continue;
    int32_t a = er__rw_sole_consumer(pc, mm->outputs[0]);
    if (a < 0 || !er__rw_is(&g->nodes[a], "Add")) continue;
    er_node *add = &g->nodes[a];
    int32_t other = add->inputs[0] == mm->outputs[0] ? add->inputs[1] : add->inputs[0];
    const er_tensor *bias = er__graph_const(g, other);
    if (!bias || bias->dtype != ER_DTYPE_FLOAT || er__tensor_count(bias) != bt->dims[1]) continue;
    /* The bias must broadcast only along the last dim. */
    bool row = true;
    for (int d = 0; d + 1 < bias->rank; d++)
      if (bias->dims[d] != 1) row = false;
    if (!row || bias->rank > ov->info.rank) continue;
    int32_t bias_id = other;
    if (bias->rank != 1) {
      er_tensor nb;
      int64_t n = bt->dims[1];
      er__tensor_set(&nb, ER_DTYPE_FLOAT, 1, &n);
      ER_CHECK(er__tensor_alloc(&nb, 0));
      memcpy(nb.data, bias->data, (size_t)n * sizeof(float));
      ER_CHECK(er__rw_new_const(g, mm->name[0] ? mm->name : "matmul", "folded", &nb, &bias_id));
      mm = &g->nodes[i];
      add = &g->nodes[a];
    }
    int32_t ins[3] = {mm->inputs[0], mm->inputs[1], bias_id};
    ER_CHECK(er__rw_set_inputs(g, mm, ins, 3));
    ER_CHECK(er__rw_set_op(mm, ER_FUSED_DOMAIN, "FusedMatMul", 1));
    er__rw_redirect_output(g, i, mm->outputs[0], add->outputs[0]);
    pc->dead[a] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

/* ---- BatchNormalization + per-channel Mul / Add ---------------------------- */

/* Inference BatchNormalization with constant parameters, then Mul and Add
 * nodes whose other operand is a constant per channel (or one value):
 * one BatchNormalization with the composed scale and shift, mean 0,
 * variance 1 and epsilon 0 (so it computes exactly x * scale + shift).
 * DenseNet-121 as converted from Caffe2 writes BatchNormalization, Mul,
 * Add before every layer: three passes over the growing concatenation
 * where one does. Conv + BatchNormalization is folded at load already;
 * these are the ones with nothing to fold into. */
er_status er__pass_bn_affine(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *n = &g->nodes[i];
    if (!er__rw_is(n, "BatchNormalization") || n->n_inputs != 5 || n->n_outputs != 1 || !er__rw_is_f32(g, n->outputs[0]))
      continue;
    const er_attr *tm = er__node_attr(n, "training_mode"), *sp = er__node_attr(n, "spatial");
    if ((tm && tm->type == ER_ATTR_INT && tm->i != 0) || (sp && sp->type == ER_ATTR_INT && sp->i != 1)) continue;
    const er_tensor *p[4];
    bool ok = true;
    for (int k = 0; k < 4; k++) {
      p[k] = er__graph_const(g, n->inputs[k + 1]);
      ok = ok && p[k] && p[k]->dtype == ER_DTYPE_FLOAT && p[k]->rank == 1;
    }
    if (!ok) continue;
    int64_t c = p[0]->dims[0];
    int r = g->values[n->outputs[0]].info.rank;
    if (r < 2 || p[1]->dims[0] != c || p[2]->dims[0] != c || p[3]->dims[0] != c) continue;
    /* The chain: every Mul / Add with a per-channel constant that reads the
     * previous value alone. */
    int32_t chain[8], n_chain = 0, v = n->outputs[0];
    while (n_chain < 8) {
      int32_t k = er__rw_sole_consumer(pc, v);
      if (k < 0) break;
      const er_node *kn = &g->nodes[k];
      if (!(er__rw_is(kn, "Mul") || er__rw_is(kn, "Add")) || kn->n_inputs != 2 || kn->n_outputs != 1) break;
      int32_t other = kn->inputs[0] == v ? kn->inputs[1] : kn->inputs[0];
      const er_tensor *ct = er__graph_const(g, other);
      if (other == v || !ct || !per_channel_const(ct, r, c) || !er__rw_is_f32(g, kn->outputs[0])) break;
      if (g->values[kn->outputs[0]].info.rank != r) break;
      chain[n_chain++] = k;
      v = kn->outputs[0];
    }
    if (n_chain == 0) continue;
    float *ab = malloc((size_t)(4 * c + 1) * sizeof *ab);
    if (!ab) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory optimizing graph '%s'", g->name);
    float *a = ab, *b = ab + c, *zero = ab + 2 * c, *one = ab + 3 * c;
    const er_attr *ea = er__node_attr(n, "epsilon");
    double eps = ea && ea->type == ER_ATTR_FLOAT ? ea->f : 1e-5;
    const float *scale = p[0]->data, *bias = p[1]->data, *mean = p[2]->data, *var = p[3]->data;
    for (int64_t ch = 0; ch < c; ch++) {
      double av = (double)scale[ch] / sqrt((double)var[ch] + eps), bv = (double)bias[ch] - (double)mean[ch] * av;
      for (int32_t k = 0; k < n_chain; k++) {
        const er_node *kn = &g->nodes[chain[k]];
        int32_t other = kn->inputs[0] == (k ? g->nodes[chain[k - 1]].outputs[0] : n->outputs[0]) ? kn->inputs[1]
                                                                                                    : kn->inputs[0];
        const er_tensor *ct = er__graph_const(g, other);
        double q = er__load_f64(ct->data, ct->dtype, er__tensor_count(ct) == 1 ? 0 : ch);
        if (er__rw_is(kn, "Mul")) {
          av *= q;
          bv *= q;
        } else {
          bv += q;
        }
      }
      a[ch] = (float)av;
      b[ch] = (float)bv;
      zero[ch] = 0.0f;
      one[ch] = 1.0f;
    }
    int32_t ids[4];
    const char *base = n->name[0] ? n->name : "batchnorm";
    er_status st = ER_STATUS_OK;
    for (int k = 0; k < 4 && st == ER_STATUS_OK; k++) st = er__rw_new_const_data(g, base, "folded", ER_DTYPE_FLOAT, c, ab + k * c, &ids[k]);
    free(ab);
    ER_CHECK(st);
    n = &g->nodes[i];
    int32_t ins[5] = {n->inputs[0], ids[0], ids[1], ids[2], ids[3]};
    ER_CHECK(er__rw_set_inputs(g, n, ins, 5));
    er_attr e;
    memset(&e, 0, sizeof e);
    e.name = "epsilon";
    e.type = ER_ATTR_FLOAT;
    e.f = 0.0f;
    ER_CHECK(er__rw_merge_attrs(g, n, &e, 1));
    er__rw_redirect_output(g, i, n->outputs[0], v);
    for (int32_t k = 0; k < n_chain; k++) pc->dead[chain[k]] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}
