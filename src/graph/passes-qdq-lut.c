/* passes-qdq-lut.c - the QDQ pass's lookup tables: elementwise functions
 * of one quantized variable become QLut, chains of tables merge, and
 * QAdd / QMul of a value with its own table become one table (see
 * passes-qdq.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/passes-qdq.h"

/* ======================================================================== */
/* Lookup tables                                                             */
/* ======================================================================== */

/* Elementwise ops of one variable (with constant other operands) whose
 * quantized form is a table. */
static bool lut_op(const er_node *n) {
  static const char *const ops[] = {
      "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Celu",
      "Softplus", "Softsign", "Gelu", "Erf", "Exp", "Log", "Sqrt", "Neg", "Abs", "Reciprocal", "Sin", "Cos",
      "Floor", "Ceil", "Round", "Sign", "Identity", "ThresholdedRelu", "Mish", "Add", "Sub", "Mul", "Div",
      "Pow", "Max", "Min", "PRelu", "BatchNormalization", NULL};
  if (n->domain[0] != '\0') return false;
  for (int k = 0; ops[k]; k++)
    if (strcmp(n->op_type, ops[k]) == 0) return true;
  return false;
}

/* Runs node n's reference kernel on the given inputs into *out (allocated
 * here; the caller releases it). */
er_status er__qdq_eval_node(const qctx *qc, const er_node *n, er_tensor *const *in, er_tensor *out) {
  er_tensor *outp[1] = {out};
  er__tensor_set(out, ER_DTYPE_UNDEFINED, -1, NULL);
  er_kctx ctx = {n, n->n_inputs, in, 1, outp, false, NULL, qc->rw.g, NULL};
  ER_CHECK(n->op->check(&ctx));
  ER_CHECK(er__tensor_alloc(out, 0));
  er_status st = n->op->run(&ctx);
  if (st != ER_STATUS_OK) er__tensor_release(out);
  return st;
}

/* Output of node n on the 256-value tensor `x` placed at every input that
 * reads value v (the other inputs are constants). */
/* Value id is a DequantizeLinear of constants. */
bool er__qdq_dq_of_consts(const struct qctx *qc, int32_t id) {
  int32_t d = er__rw_producer(&qc->rw, id);
  if (d < 0 || !er__rw_is(&qc->rw.g->nodes[d], "DequantizeLinear")) return false;
  const er_node *dn = &qc->rw.g->nodes[d];
  for (int k = 0; k < dn->n_inputs; k++)
    if (dn->inputs[k] >= 0 && !er__qdq_const_of(qc->rw.g, dn->inputs[k])) return false;
  return true;
}

/* Value id as a constant: a constant itself, or the output of a
 * DequantizeLinear of constants (onnxruntime's quantizer dequantizes
 * parameters it quantized, e.g. BatchNormalization's), evaluated into
 * *tmp (*owned set: the caller releases it). NULL when neither. */
static const er_tensor *const_input(const qctx *qc, int32_t id, er_tensor *tmp, bool *owned) {
  *owned = false;
  const er_tensor *c = er__qdq_const_of(qc->rw.g, id);
  if (c) return c;
  int32_t d = er__rw_producer(&qc->rw, id);
  if (d < 0 || !er__rw_is(&qc->rw.g->nodes[d], "DequantizeLinear") || qc->rw.g->nodes[d].n_inputs > 3) return NULL;
  const er_node *dn = &qc->rw.g->nodes[d];
  er_tensor *in[3] = {NULL, NULL, NULL};
  for (int k = 0; k < dn->n_inputs; k++) {
    if (dn->inputs[k] < 0) continue;
    in[k] = (er_tensor *)er__qdq_const_of(qc->rw.g, dn->inputs[k]);
    if (!in[k]) return NULL;
  }
  if (er__qdq_eval_node(qc, dn, in, tmp) != ER_STATUS_OK) {
    er__error_clear();
    return NULL;
  }
  *owned = true;
  return tmp;
}

static er_status eval_on(const qctx *qc, const er_node *n, int32_t v, er_tensor *x, er_tensor *out) {
  er_tensor *in[8], tmp[8];
  bool owned[8] = {false};
  if (n->n_inputs > 8) return ER_STATUS_UNSUPPORTED;
  er_status st = ER_STATUS_OK;
  for (int k = 0; k < n->n_inputs; k++) {
    int32_t id = n->inputs[k];
    in[k] = id < 0 ? NULL : id == v ? x : (er_tensor *)const_input(qc, id, &tmp[k], &owned[k]);
    if (id >= 0 && !in[k]) st = ER_STATUS_UNSUPPORTED;
  }
  if (st == ER_STATUS_OK) st = er__qdq_eval_node(qc, n, in, out);
  for (int k = 0; k < n->n_inputs; k++)
    if (owned[k]) er__tensor_release(&tmp[k]);
  return st;
}

/* The table of Q(f(DQ(x))) for every 8-bit x (f may be -1: none): DQ's and
 * Q's arithmetic exactly as their reference kernels do it (float product;
 * float quotient, round half to even, zero point, saturation), f on its
 * own reference kernel. With channels > 0 the tables are per channel (f has
 * per-channel constants): the 256 values are fed to every channel of a
 * tensor of x's rank ([1, C, 256] or [1, C, 16, 16]) and the table is
 * [C, 256]. */
static er_status lut_table(const qctx *qc, int32_t dq, int32_t f, const qparam *xp, const qparam *yp, int rank,
                           int64_t channels, er_tensor *table) {
  const er_graph *g = qc->rw.g;
  er_tensor d, h;
  int64_t dims[4] = {256, 0, 0, 0};
  int xr = 1;
  if (channels > 0) {
    xr = rank;
    dims[0] = 1;
    dims[1] = channels;
    if (rank == 3) dims[2] = 256;
    else dims[2] = dims[3] = 16;
  }
  int64_t c_count = channels > 0 ? channels : 1;
  /* DequantizeLinear's arithmetic (quant.c): (float)(x - zp) * scale. */
  ER_CHECK(er__qdq_alloc_tensor(&d, ER_DTYPE_FLOAT, xr, dims));
  for (int64_t c = 0; c < c_count; c++)
    for (int i = 0; i < 256; i++) {
      int32_t v = xp->type == ER_DTYPE_INT8 ? (int8_t)(uint8_t)(i ^ 0x80) : i;
      ((float *)d.data)[c * 256 + i] = (float)(v - xp->zp) * xp->scale;
    }
  er_tensor *cur = &d;
  er_status st = ER_STATUS_OK;
  if (f >= 0) {
    /* f itself runs on its reference kernel. */
    st = eval_on(qc, &g->nodes[f], g->nodes[dq].outputs[0], &d, &h);
    er__tensor_release(&d);
    if (st != ER_STATUS_OK) return st;
    cur = &h;
  }
  if (cur->dtype != ER_DTYPE_FLOAT || er__tensor_count(cur) != 256 * c_count) {
    er__tensor_release(cur);
    return ER_STATUS_UNSUPPORTED;
  }
  /* QuantizeLinear's arithmetic: float division, round half to even, the
   * zero point, saturation (quantize_value). */
  int64_t td[2] = {channels, 256};
  st = er__qdq_alloc_tensor(table, yp->type, channels > 0 ? 2 : 1, channels > 0 ? td : td + 1);
  if (st == ER_STATUS_OK)
    for (int64_t k = 0; k < 256 * c_count; k++)
      ((uint8_t *)table->data)[k] = (uint8_t)er__qdq_quantize_value(yp, ((const float *)cur->data)[k]);
  er__tensor_release(cur);
  return st;
}

/* Whether f's constants vary at most along axis 1 of its rank-`rank`
 * data (per channel): *channels receives C when some do, 0 when all are
 * single values; false for anything else. */
static bool lut_channels(const qctx *qc, const er_node *fn, int32_t src, int rank, int64_t c, int64_t *channels) {
  *channels = 0;
  for (int k = 0; k < fn->n_inputs; k++) {
    int32_t id = fn->inputs[k];
    if (id < 0 || id == src) continue;
    /* Shapes only: the value info of a (dequantized) constant. */
    const er_tensor *t = er__qdq_const_of(qc->rw.g, id) ? er__qdq_const_of(qc->rw.g, id) : &qc->rw.g->values[id].info;
    int64_t n = er__tensor_count(t);
    if (n < 0) return false;
    if (n == 1) continue;
    if (c <= 0 || n != c || (rank != 3 && rank != 4)) return false;
    if (er__rw_is(fn, "BatchNormalization")) {
      if (t->rank != 1) return false;
    } else {
      /* Aligned to the data's rank, every dim but axis 1 is 1. */
      if (t->rank > rank) return false;
      for (int d = 0; d < t->rank; d++) {
        int ad = d + rank - t->rank;
        if (t->dims[d] != (ad == 1 ? c : 1)) return false;
      }
    }
    *channels = c;
  }
  return true;
}

/* Q reading DQ(x) directly, or through one elementwise f: a table (or
 * nothing, when the parameters are equal). */
er_status er__qdq_fuse_lut(qctx *qc, int32_t q, bool *done) {
  er_graph *g = qc->rw.g;
  *done = false;
  qparam qp, xp;
  if (!er__qdq_q_per_tensor(qc, q, &qp)) return ER_STATUS_OK;
  int32_t v = g->nodes[q].inputs[0], q_out = g->nodes[q].outputs[0];
  int32_t f = -1, dq = er__rw_producer(&qc->rw, v), xq;
  int64_t channels = 0;
  int rank = 1;
  if (!er__qdq_dq_per_tensor(qc, dq, &xp, &xq)) {
    /* Q(f(DQ(x))): f is the sole reader of nothing in particular, but its
     * output must be read by this Q alone. */
    f = dq;
    if (f < 0 || !lut_op(&g->nodes[f]) || g->nodes[f].n_outputs != 1 || er__rw_sole_consumer(&qc->rw, v) != q) return ER_STATUS_OK;
    const er_node *fn = &g->nodes[f];
    int32_t src = -1;
    for (int k = 0; k < fn->n_inputs; k++) {
      int32_t id = fn->inputs[k];
      if (id < 0 || er__qdq_const_of(g, id) || er__qdq_dq_of_consts(qc, id)) continue;
      if (src >= 0 && id != src) return ER_STATUS_OK; /* two variables */
      src = id;
    }
    dq = er__rw_producer(&qc->rw, src);
    if (src < 0 || !er__qdq_dq_per_tensor(qc, dq, &xp, &xq)) return ER_STATUS_OK;
    /* f must keep the shape: constants may not broadcast it wider. */
    const er_tensor *si = &g->values[src].info, *so = &g->values[v].info;
    if (si->rank < 0 || si->rank != so->rank) return ER_STATUS_OK;
    for (int d = 0; d < si->rank; d++)
      if (si->dims[d] != so->dims[d]) return ER_STATUS_OK;
    if (er__rw_is(fn, "BatchNormalization") && (fn->n_outputs != 1 || !er__qdq_attr_is(fn, "training_mode", 0)))
      return ER_STATUS_OK;
    if (!lut_channels(qc, fn, src, si->rank, si->rank >= 2 ? si->dims[1] : -1, &channels)) return ER_STATUS_OK;
    rank = si->rank;
  }
  if (qc->rw.uses[q_out] >= ER_RW_PINNED && f < 0 && er__qdq_same_param(&xp, &qp)) return ER_STATUS_OK; /* keep a graph output's node */
  if (f < 0 && er__qdq_same_param(&xp, &qp)) {
    /* DQ -> Q with the same parameters is the identity. */
    er__rw_replace_uses(&qc->rw, q_out, xq);
    qc->rw.dead[q] = true;
    *done = true;
    return ER_STATUS_OK;
  }
  er_tensor table;
  er_status st = lut_table(qc, dq, f, &xp, &qp, rank, channels, &table);
  if (st == ER_STATUS_UNSUPPORTED) return ER_STATUS_OK;
  if (st != ER_STATUS_OK) {
    /* A kernel that refuses these inputs: leave the pattern alone. */
    er__error_clear();
    return ER_STATUS_OK;
  }
  int32_t table_v;
  ER_CHECK(er__qdq_new_const(qc, g->nodes[q].name, &table, &table_v));
  er_node *n = &g->nodes[q];
  int32_t ins[2] = {xq, table_v};
  ER_CHECK(er__rw_set_inputs(g, n, ins, 2));
  ER_CHECK(er__rw_set_attrs(g, n, NULL, NULL, 0));
  ER_CHECK(er__rw_set_op(n, ER_QFUSED_DOMAIN, "QLut", 1));
  if (f >= 0) qc->rw.dead[f] = true;
  *done = true;
  return ER_STATUS_OK;
}

/* QLut -> QLut (the first read by the second alone): one table, t2 after
 * t1, per channel when either is. Exact: both are exact tables. */
er_status er__qdq_fuse_lut_chain(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->rw.g;
  *done = false;
  er_node *n2 = &g->nodes[i];
  if (strcmp(n2->op_type, "QLut") != 0 || strcmp(n2->domain, ER_QFUSED_DOMAIN) != 0) return ER_STATUS_OK;
  int32_t mid = n2->inputs[0], p = er__rw_producer(&qc->rw, mid);
  if (p < 0 || er__rw_sole_consumer(&qc->rw, mid) != i) return ER_STATUS_OK;
  er_node *n1 = &g->nodes[p];
  if (strcmp(n1->op_type, "QLut") != 0 || strcmp(n1->domain, ER_QFUSED_DOMAIN) != 0) return ER_STATUS_OK;
  const er_tensor *t1 = er__qdq_const_of(g, n1->inputs[1]), *t2 = er__qdq_const_of(g, n2->inputs[1]);
  if (!t1 || !t2) return ER_STATUS_OK;
  int64_t c1 = er__tensor_count(t1) / 256, c2 = er__tensor_count(t2) / 256, c = c1 > c2 ? c1 : c2;
  if ((c1 != 1 && c1 != c) || (c2 != 1 && c2 != c)) return ER_STATUS_OK;
  /* The merged table is indexed like t1; t1's entries are values of the
   * middle type, which index t2 (int8 ones shifted by 128). */
  er_dtype mt = er__qdq_vtype(g, mid);
  uint8_t flip2 = mt == ER_DTYPE_INT8 ? 0x80 : 0;
  er_tensor t;
  int64_t dims[2] = {c, 256};
  ER_CHECK(er__qdq_alloc_tensor(&t, t2->dtype, c > 1 ? 2 : 1, c > 1 ? dims : dims + 1));
  const uint8_t *a = t1->data, *b = t2->data;
  uint8_t *d = t.data;
  for (int64_t ch = 0; ch < c; ch++)
    for (int k = 0; k < 256; k++) {
      /* Index k is input value k ^ flip1; t1 gives a value of mt. */
      uint8_t v = a[(c1 > 1 ? ch : 0) * 256 + k];
      d[ch * 256 + k] = b[(c2 > 1 ? ch : 0) * 256 + (uint8_t)(v ^ flip2)];
    }
  int32_t table_v;
  ER_CHECK(er__qdq_new_const(qc, g->nodes[i].name, &t, &table_v));
  n2 = &g->nodes[i];
  int32_t ins[2] = {g->nodes[p].inputs[0], table_v};
  ER_CHECK(er__rw_set_inputs(g, n2, ins, 2));
  qc->rw.dead[p] = true;
  *done = true;
  return ER_STATUS_OK;
}

/* QAdd / QMul of x and a QLut of the same x (SiLU, x * sigmoid(x), after
 * the passes above): the result is a function of one 8-bit value, so one
 * table, computed by running the QAdd / QMul reference kernel on all 256
 * values of x and their table entries. Exact: the same operations on the
 * same operands. Per-tensor tables only. */
er_status er__qdq_fuse_self_binary(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->rw.g;
  *done = false;
  er_node *n = &g->nodes[i];
  if ((strcmp(n->op_type, "QAdd") != 0 && strcmp(n->op_type, "QMul") != 0) ||
      strcmp(n->domain, ER_QFUSED_DOMAIN) != 0 || n->n_inputs != 8 || n->n_outputs != 1)
    return ER_STATUS_OK;
  for (int k = 0; k < 2; k++) {
    int32_t u = n->inputs[3 * k], x = n->inputs[3 * (1 - k)], p = er__rw_producer(&qc->rw, u);
    if (p < 0 || x < 0) continue;
    const er_node *lut = &g->nodes[p];
    if (strcmp(lut->op_type, "QLut") != 0 || strcmp(lut->domain, ER_QFUSED_DOMAIN) != 0 || lut->inputs[0] != x)
      continue;
    const er_tensor *t = er__qdq_const_of(g, lut->inputs[1]);
    er_dtype xt = er__qdq_vtype(g, x);
    if (!t || er__tensor_count(t) != 256 || !er__qdq_is_q8(xt) || !er__qdq_is_q8(er__qdq_vtype(g, u))) continue;
    /* Every x value (table index j is the byte j ^ flip) and its entry. */
    const uint8_t flip = xt == ER_DTYPE_INT8 ? 0x80 : 0;
    const int64_t dims[1] = {256};
    er_tensor xs, us, out, table;
    ER_CHECK(er__qdq_alloc_tensor(&xs, xt, 1, dims));
    er_status st = er__qdq_alloc_tensor(&us, er__qdq_vtype(g, u), 1, dims);
    if (st != ER_STATUS_OK) {
      er__tensor_release(&xs);
      return st;
    }
    for (int j = 0; j < 256; j++) {
      ((uint8_t *)xs.data)[j] = (uint8_t)(j ^ flip);
      ((uint8_t *)us.data)[j] = ((const uint8_t *)t->data)[j];
    }
    er_tensor *in[8];
    for (int q = 0; q < 8; q++) in[q] = (er_tensor *)er__qdq_const_of(g, n->inputs[q]);
    in[3 * k] = &us;
    in[3 * (1 - k)] = &xs;
    bool params = true;
    for (int q = 0; q < 8; q++) params = params && (q % 3 == 0 || in[q]);
    st = params ? er__qdq_eval_node(qc, n, in, &out) : ER_STATUS_UNSUPPORTED;
    er__tensor_release(&xs);
    er__tensor_release(&us);
    if (st == ER_STATUS_UNSUPPORTED) {
      er__error_clear();
      continue;
    }
    ER_CHECK(st);
    if (er__tensor_count(&out) != 256) {
      er__tensor_release(&out);
      continue;
    }
    st = er__qdq_alloc_tensor(&table, out.dtype, 1, dims);
    if (st == ER_STATUS_OK) memcpy(table.data, out.data, 256);
    er__tensor_release(&out);
    ER_CHECK(st);
    int32_t table_v;
    bool lut_dead = er__rw_sole_consumer(&qc->rw, u) == i;
    ER_CHECK(er__qdq_new_const(qc, g->nodes[i].name, &table, &table_v));
    n = &g->nodes[i];
    int32_t ins[2] = {x, table_v};
    ER_CHECK(er__rw_set_inputs(g, n, ins, 2));
    ER_CHECK(er__rw_set_attrs(g, n, NULL, NULL, 0));
    ER_CHECK(er__rw_set_op(n, ER_QFUSED_DOMAIN, "QLut", 1));
    if (lut_dead) qc->rw.dead[p] = true;
    *done = true;
    return ER_STATUS_OK;
  }
  return ER_STATUS_OK;
}
