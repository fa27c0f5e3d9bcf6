/* prepare.c - constant folding for weights and folding of BatchNormalization
 * and per-channel affine ops into convolutions (see prepare.h). */
#include "quant/prepare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "quant/qgraph.h"

static bool is_op(const er_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

/* A value whose data is fixed: an initializer a caller cannot override. */
static bool is_const(const er_graph *g, int32_t id) {
  if (id < 0) return false;
  const er_value *v = &g->values[id];
  if (v->kind != ER_VALUE_CONSTANT || !v->constant) return false;
  return !v->is_graph_input || g->model->ir_version < 4;
}

/* ======================================================================== */
/* Constant folding                                                          */
/* ======================================================================== */

/* Runs one node on constant inputs; outs[k] receive owned tensors. */
static er_status eval_node(er_graph *g, const er_node *node, er_tensor *outs) {
  er_tensor in_t[16], *inp[16], *outp[16];
  if (node->n_inputs > 16 || node->n_outputs > 16) return ER_STATUS_UNSUPPORTED;
  for (int k = 0; k < node->n_inputs; k++) {
    int32_t id = node->inputs[k];
    if (id < 0) {
      inp[k] = NULL;
      continue;
    }
    in_t[k] = *g->values[id].constant;
    in_t[k].flags = 0;  /* borrowed */
    inp[k] = &in_t[k];
  }
  for (int k = 0; k < node->n_outputs; k++) {
    er__tensor_set(&outs[k], ER_DTYPE_UNDEFINED, -1, NULL);
    outp[k] = node->outputs[k] >= 0 ? &outs[k] : NULL;
  }
  er_kctx ctx = {node, node->n_inputs, inp, node->n_outputs, outp, false, NULL, g, NULL};
  er_status st = node->op->check(&ctx);
  for (int k = 0; k < node->n_outputs && st == ER_STATUS_OK; k++)
    if (outp[k] && !(node->op->flags & ER_OP_DYNAMIC_OUTPUT))
      st = er__tensor_alloc(outp[k], g->model->limits.max_tensor_bytes);
  if (st == ER_STATUS_OK) st = node->op->run(&ctx);
  if (st != ER_STATUS_OK)
    for (int k = 0; k < node->n_outputs; k++) er__tensor_release(&outs[k]);
  return st;
}

er_status er__qprep_fold_constants(struct er_model *m, int *n_folded) {
  er_graph *g = m->graph;
  *n_folded = 0;
  bool *wanted = calloc((size_t)g->n_values + 1, 1);
  bool *dead = calloc((size_t)g->n_nodes + 1, 1);
  er_status st = ER_STATUS_OK;
  er_qbuild b;
  er__qb_init(&b, g);
  if (!wanted || !dead) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory preparing the model");
    goto done;
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    int first = -1, last = -1;
    if (is_op(n, "Conv") || is_op(n, "ConvTranspose") || is_op(n, "Gemm") || is_op(n, "MatMul")) first = 1, last = 2;
    else if (is_op(n, "BatchNormalization")) first = 1, last = 4;
    else if (is_op(n, "Mul") || is_op(n, "Add") || is_op(n, "Sub") || is_op(n, "Div")) first = 0, last = 1;
    for (int k = first; k >= 0 && k <= last && k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) wanted[n->inputs[k]] = true;
  }
  for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
    const er_node *n = &g->nodes[i];
    bool out_wanted = false;
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0 && wanted[n->outputs[k]]) out_wanted = true;
    if (out_wanted)
      for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0) wanted[n->inputs[k]] = true;
  }
  /* Initializers also listed as graph inputs (old PyTorch exports list
   * every weight) are overridable in IR >= 4; a quantized model cannot
   * honour an override of a weight it stores in int8, so the ones that
   * feed weights become plain initializers. */
  int32_t w = 0;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    er_value *v = &g->values[g->inputs[i]];
    if (v->kind == ER_VALUE_CONSTANT && wanted[g->inputs[i]]) {
      v->is_graph_input = false;
      continue;
    }
    g->inputs[w++] = g->inputs[i];
  }
  g->n_inputs = w;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    er_node *n = &g->nodes[i];
    bool out_wanted = is_op(n, "Constant");
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0 && wanted[n->outputs[k]]) out_wanted = true;
    bool all_const = n->op && !(n->op->flags & ER_OP_NO_FOLD) && !er__rw_has_graphs(n) && n->n_outputs <= 16;
    for (int k = 0; k < n->n_inputs && all_const; k++)
      if (n->inputs[k] >= 0 && !is_const(g, n->inputs[k])) all_const = false;
    /* A graph output produced by a constant node stays a node: outputs
     * must be produced by something the model runs in ONNX's view too. */
    for (int k = 0; k < n->n_outputs && all_const; k++)
      if (n->outputs[k] >= 0 && g->values[n->outputs[k]].is_graph_output) all_const = false;
    if (!out_wanted || !all_const) continue;
    er_tensor outs[16];
    st = eval_node(g, n, outs);
    if (st != ER_STATUS_OK) {
      er__error_prefix("folding constant %s node '%s'", n->op_type, n->name);
      goto done;
    }
    for (int k = 0; k < n->n_outputs && st == ER_STATUS_OK; k++)
      if (n->outputs[k] >= 0) st = er__qb_make_constant(&b, n->outputs[k], &outs[k]);
      else er__tensor_release(&outs[k]);
    if (st != ER_STATUS_OK) goto done;
    dead[i] = true;
    (*n_folded)++;
  }
  if (*n_folded) {
    for (int32_t i = 0; i < g->n_nodes && st == ER_STATUS_OK; i++)
      if (!dead[i]) st = er__qb_keep(&b, &g->nodes[i]);
    if (st == ER_STATUS_OK) st = er__qb_commit(&b);
  }
done:
  er__qb_free(&b);
  free(wanted);
  free(dead);
  return st;
}

/* ======================================================================== */
/* BatchNormalization and affine folding                                     */
/* ======================================================================== */

/* Per-channel values of a constant operand for a conv output of rank
 * `rank` with M channels (axis 1): the constant may be a scalar or have
 * every dim 1 except the channel one. Fills vals[M] (double); false when
 * the constant does not have that form. */
static bool per_channel(const er_tensor *c, int rank, int64_t M, double *vals) {
  if (c->dtype != ER_DTYPE_FLOAT || c->rank > rank) return false;
  int64_t n = er__tensor_count(c);
  int ch_axis = c->rank - (rank - 1);  /* channel axis of c, right-aligned */
  for (int d = 0; d < c->rank; d++)
    if (d != ch_axis && c->dims[d] != 1) return false;
  if (n != 1 && (ch_axis < 0 || c->dims[ch_axis] != M)) return false;
  for (int64_t i = 0; i < M; i++) vals[i] = ((const float *)c->data)[n == 1 ? 0 : i];
  return true;
}

/* Readers of each value (node inputs, graph outputs, captures). */
static void count_uses(const er_graph *g, const bool *dead, int32_t *uses, int32_t *reader) {
  memset(uses, 0, (size_t)g->n_values * sizeof *uses);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    if (dead[i]) continue;
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) {
        uses[n->inputs[k]]++;
        reader[n->inputs[k]] = i;
      }
    for (int a = 0; a < n->n_attrs; a++) {
      const er_attr *at = &n->attrs[a];
      int64_t cnt = at->type == ER_ATTR_GRAPH ? 1 : at->type == ER_ATTR_GRAPHS ? at->n : 0;
      for (int64_t j = 0; j < cnt; j++) {
        const er_graph *sg = at->type == ER_ATTR_GRAPH ? at->g : at->graphs[j];
        for (int32_t v = 0; v < sg->n_values; v++)
          if (sg->values[v].kind == ER_VALUE_OUTER && sg->values[v].outer >= 0) uses[sg->values[v].outer] += 2;
      }
    }
  }
  for (int32_t i = 0; i < g->n_outputs; i++) uses[g->outputs[i]] += 2;
}

/* The affine map y' = a[m] * y + s[m] the consumer applies per channel;
 * false when it is not such a map. */
static bool consumer_affine(const er_graph *g, const er_node *d, int32_t y, int rank, int64_t M, double *a,
                            double *s) {
  if (d->domain[0] || d->n_outputs < 1) return false;
  if (is_op(d, "BatchNormalization")) {
    if (d->n_inputs != 5 || d->inputs[0] != y) return false;
    for (int k = 1; k < d->n_outputs; k++)
      if (d->outputs[k] >= 0) return false;  /* training outputs in use */
    const er_attr *tm = er__node_attr(d, "training_mode");
    if (tm && tm->i != 0) return false;
    const er_attr *sp = er__node_attr(d, "spatial");
    if (sp && sp->i != 1) return false;
    const er_attr *ea = er__node_attr(d, "epsilon");
    double eps = ea ? ea->f : 1e-5;
    const er_tensor *t[4];
    for (int k = 0; k < 4; k++) {
      if (!is_const(g, d->inputs[k + 1])) return false;
      t[k] = g->values[d->inputs[k + 1]].constant;
      if (t[k]->dtype != ER_DTYPE_FLOAT || t[k]->rank != 1 || t[k]->dims[0] != M) return false;
    }
    const float *scale = t[0]->data, *bias = t[1]->data, *mean = t[2]->data, *var = t[3]->data;
    for (int64_t m = 0; m < M; m++) {
      /* The same arithmetic as the BatchNormalization reference kernel. */
      double inv = 1.0 / sqrt((double)var[m] + (double)(float)eps);
      a[m] = (double)scale[m] * inv;
      s[m] = (double)bias[m] - (double)mean[m] * a[m];
    }
    return true;
  }
  bool mul = is_op(d, "Mul"), add = is_op(d, "Add"), sub = is_op(d, "Sub"), div = is_op(d, "Div");
  if (!(mul || add || sub || div) || d->n_inputs != 2) return false;
  int yk = d->inputs[0] == y ? 0 : 1, ck = 1 - yk;
  if (d->inputs[yk] != y || d->inputs[ck] == y) return false;
  if ((sub || div) && yk != 0) return false;
  if (!is_const(g, d->inputs[ck])) return false;
  double *c = malloc((size_t)M * sizeof *c);
  if (!c) return false;
  bool ok = per_channel(g->values[d->inputs[ck]].constant, rank, M, c);
  for (int64_t m = 0; ok && m < M; m++) {
    if (mul) a[m] = c[m], s[m] = 0;
    else if (div) ok = c[m] != 0, a[m] = ok ? 1.0 / c[m] : 0, s[m] = 0;
    else a[m] = 1, s[m] = add ? c[m] : -c[m];
  }
  free(c);
  return ok;
}

/* Folds the consumer `d` of conv node `ci` into it. */
static er_status fold_one(er_qbuild *b, int32_t ci, const er_node *d, const double *a, const double *s, int64_t M,
                          int w_axis) {
  er_graph *g = b->g;
  er_node *conv = &g->nodes[ci];
  const er_tensor *W = g->values[conv->inputs[1]].constant;
  const er_tensor *B = conv->n_inputs > 2 && conv->inputs[2] >= 0 ? g->values[conv->inputs[2]].constant : NULL;
  er_tensor nw, nb;
  er__tensor_set(&nw, W->dtype, W->rank, W->dims);
  ER_CHECK(er__tensor_alloc(&nw, 0));
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < w_axis; i++) outer *= W->dims[i];
  for (int i = w_axis + 1; i < W->rank; i++) inner *= W->dims[i];
  const float *w = W->data;
  float *o = nw.data;
  for (int64_t p = 0; p < outer; p++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t q = 0; q < inner; q++) {
        int64_t at = (p * M + m) * inner + q;
        o[at] = (float)((double)w[at] * a[m]);
      }
  int64_t bd[1] = {M};
  er__tensor_set(&nb, ER_DTYPE_FLOAT, 1, bd);
  er_status st = er__tensor_alloc(&nb, 0);
  if (st != ER_STATUS_OK) {
    er__tensor_release(&nw);
    return st;
  }
  for (int64_t m = 0; m < M; m++) {
    double bias = B ? ((const float *)B->data)[m] : 0.0;
    ((float *)nb.data)[m] = (float)(bias * a[m] + s[m]);
  }
  int32_t wid, bid;
  const char *wname = g->values[conv->inputs[1]].name;
  const char *base = conv->name[0] ? conv->name : wname;
  st = er__qb_constant(b, wname, "_folded", &nw, &wid);
  if (st != ER_STATUS_OK) {
    er__tensor_release(&nb);
    return st;
  }
  ER_CHECK(er__qb_constant(b, base, "_bias_folded", &nb, &bid));
  int32_t ins[3] = {conv->inputs[0], wid, bid};
  int32_t *arr = er__qb_ids(b, ins, 3);
  if (!arr) return ER_STATUS_OUT_OF_MEMORY;
  conv->inputs = arr;
  conv->n_inputs = 3;
  /* The conv now produces what the folded consumer produced. */
  conv->outputs[0] = d->outputs[0];
  g->values[d->outputs[0]].producer = ci;
  return ER_STATUS_OK;
}

er_status er__qprep_fold_affine(struct er_model *m, int *n_folded) {
  er_graph *g = m->graph;
  *n_folded = 0;
  int32_t *uses = malloc(((size_t)g->n_values + 1) * sizeof *uses);
  int32_t *reader = malloc(((size_t)g->n_values + 1) * sizeof *reader);
  bool *dead = calloc((size_t)g->n_nodes + 1, 1);
  double *a = NULL, *s = NULL;
  int64_t cap = 0;
  er_status st = ER_STATUS_OK;
  er_qbuild b;
  er__qb_init(&b, g);
  if (!uses || !reader || !dead) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory preparing the model");
    goto done;
  }
  for (bool again = true; again;) {
    again = false;
    /* Folding adds constants, so the value arrays grow between rounds. */
    int32_t *nu = realloc(uses, ((size_t)g->n_values + 1) * sizeof *uses);
    if (nu) uses = nu;
    int32_t *nr = nu ? realloc(reader, ((size_t)g->n_values + 1) * sizeof *reader) : NULL;
    if (nr) reader = nr;
    if (!nu || !nr) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory preparing the model");
      goto done;
    }
    count_uses(g, dead, uses, reader);
    for (int32_t i = 0; i < g->n_nodes; i++) {
      er_node *conv = &g->nodes[i];
      if (dead[i]) continue;
      bool is_conv = is_op(conv, "Conv"), is_convt = is_op(conv, "ConvTranspose");
      if (!(is_conv || is_convt) || conv->n_inputs < 2 || !is_const(g, conv->inputs[1])) continue;
      if (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !is_const(g, conv->inputs[2])) continue;
      const er_tensor *W = g->values[conv->inputs[1]].constant;
      if (W->dtype != ER_DTYPE_FLOAT || W->rank < 3) continue;
      const er_attr *grp = er__node_attr(conv, "group");
      if (is_convt && grp && grp->i != 1) continue;
      int w_axis = is_conv ? 0 : 1;
      int64_t M = W->dims[w_axis];
      int32_t y = conv->outputs[0];
      if (y < 0 || uses[y] != 1 || g->values[y].is_graph_output) continue;
      const er_node *d = &g->nodes[reader[y]];
      if (dead[reader[y]] || d->n_outputs < 1 || d->outputs[0] < 0) continue;
      if (M > cap) {
        free(a);
        free(s);
        cap = M;
        a = malloc((size_t)M * sizeof *a);
        s = malloc((size_t)M * sizeof *s);
        if (!a || !s) {
          st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory preparing the model");
          goto done;
        }
      }
      int rank = W->rank;  /* the conv output has the weight's rank */
      if (!consumer_affine(g, d, y, rank, M, a, s)) continue;
      bool finite = true;
      for (int64_t k = 0; k < M; k++) finite = finite && isfinite(a[k]) && isfinite(s[k]);
      if (!finite) continue;
      st = fold_one(&b, i, d, a, s, M, w_axis);
      if (st != ER_STATUS_OK) goto done;
      dead[reader[y]] = true;
      (*n_folded)++;
      again = true;
      break;  /* uses changed: count again */
    }
  }
  if (*n_folded) {
    for (int32_t i = 0; i < g->n_nodes && st == ER_STATUS_OK; i++)
      if (!dead[i]) st = er__qb_keep(&b, &g->nodes[i]);
    if (st == ER_STATUS_OK) st = er__qb_commit(&b);
  }
done:
  er__qb_free(&b);
  free(uses);
  free(reader);
  free(dead);
  free(a);
  free(s);
  return st;
}
