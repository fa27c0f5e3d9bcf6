/* passes-qdq-fuse.c - the QDQ pass's fusions into integer GEMMs,
 * additions, multiplications, average pools and int4 block-wise matmuls
 * (see passes-qdq.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/passes-qdq.h"

/* ======================================================================== */
/* Integer GEMMs: Conv, MatMul, Gemm                                         */
/* ======================================================================== */

static bool dq_weights(const qctx *qc, int32_t v, wparam *wp) {
  const er_graph *g = qc->rw.g;
  int32_t i = er__rw_producer(&qc->rw, v);
  if (i < 0) return false;
  const er_node *n = &g->nodes[i];
  if (!er__rw_is(n, "DequantizeLinear") || n->n_inputs < 2 || !er__qdq_attr_is(n, "block_size", 0)) return false;
  wp->w_v = n->inputs[0];
  wp->w = er__qdq_const_of(g, n->inputs[0]);
  wp->s = er__qdq_const_of(g, n->inputs[1]);
  wp->z = n->n_inputs > 2 && n->inputs[2] >= 0 ? er__qdq_const_of(g, n->inputs[2]) : NULL;
  wp->zp_v = n->n_inputs > 2 ? n->inputs[2] : -1;
  if (!wp->w || !er__qdq_is_q8(wp->w->dtype) || !wp->s || wp->s->dtype != ER_DTYPE_FLOAT || wp->w->rank < 1) return false;
  if (wp->zp_v >= 0 && (!wp->z || wp->z->dtype != wp->w->dtype)) return false;
  int64_t ax = 1;
  const er_attr *a = er__node_attr(n, "axis");
  if (a && a->type == ER_ATTR_INT) ax = a->i;
  if (ax < 0) ax += wp->w->rank;
  wp->channels = er__tensor_count(wp->s);
  wp->axis = (int)ax;
  if (wp->channels != 1 && (wp->s->rank != 1 || ax < 0 || ax >= wp->w->rank || wp->w->dims[ax] != wp->channels))
    return false;
  if (wp->z && er__tensor_count(wp->z) != wp->channels) return false;
  for (int64_t c = 0; c < wp->channels; c++) {
    float s = ((const float *)wp->s->data)[c];
    if (!isfinite(s)) return false;
  }
  return true;
}

static float wscale(const wparam *wp, int64_t c) { return ((const float *)wp->s->data)[wp->channels == 1 ? 0 : c]; }

/* A bias that broadcasts along the last axis: rank <= 1, or [1, N]. */
static bool row_shaped(const er_tensor *t) { return t->rank <= 1 || (t->rank == 2 && t->dims[0] == 1); }

/* The bias of an integer GEMM with M channels: a float constant of M (or
 * one) values, or the DequantizeLinear of an int32 constant. *exact_int
 * (may be NULL) receives the int32 bias value when it can be added to the
 * accumulator as it is (zero point 0, scale equal to xs * ws[m] in float,
 * as quantizers compute it). bias_real[m] receives the dequantized bias. */
static bool bias_of(const qctx *qc, int32_t v, int64_t m, float xs, const wparam *wp, float scale_mul, float *bias_real,
                    int32_t *exact_int) {
  const er_graph *g = qc->rw.g;
  *exact_int = -1;
  const er_tensor *c = er__qdq_const_of(g, v);
  if (c) {
    int64_t n = er__tensor_count(c);
    if (c->dtype != ER_DTYPE_FLOAT || (n != 1 && n != m) || !row_shaped(c)) return false;
    for (int64_t i = 0; i < m; i++) bias_real[i] = scale_mul * ((const float *)c->data)[n == 1 ? 0 : i];
    return true;
  }
  int32_t d = er__rw_producer(&qc->rw, v);
  if (d < 0) return false;
  const er_node *n = &g->nodes[d];
  if (!er__rw_is(n, "DequantizeLinear") || n->n_inputs < 2 || !er__qdq_attr_is(n, "block_size", 0)) return false;
  const er_tensor *b = er__qdq_const_of(g, n->inputs[0]), *s = er__qdq_const_of(g, n->inputs[1]);
  const er_tensor *z = n->n_inputs > 2 && n->inputs[2] >= 0 ? er__qdq_const_of(g, n->inputs[2]) : NULL;
  if (!b || b->dtype != ER_DTYPE_INT32 || !s || s->dtype != ER_DTYPE_FLOAT || !row_shaped(b)) return false;
  if (n->n_inputs > 2 && n->inputs[2] >= 0 && (!z || z->dtype != ER_DTYPE_INT32)) return false;
  int64_t nb = er__tensor_count(b), ns = er__tensor_count(s), nz = z ? er__tensor_count(z) : 1;
  if ((nb != m && nb != 1) || (ns != 1 && ns != nb) || (nz != 1 && nz != ns)) return false;
  bool exact = nb == m && b->rank == 1 && scale_mul == 1.0f;
  for (int64_t i = 0; i < m; i++) {
    int64_t bi = nb == 1 ? 0 : i;
    float si = ((const float *)s->data)[ns == 1 ? 0 : bi];
    int32_t zi = z ? ((const int32_t *)z->data)[nz == 1 ? 0 : bi] : 0;
    int32_t q = ((const int32_t *)b->data)[bi];
    bias_real[i] = scale_mul * ((float)((int64_t)q - zi) * si); /* DequantizeLinear's float product */
    if (zi != 0 || si != xs * wscale(wp, i)) exact = false;
  }
  if (exact) *exact_int = n->inputs[0];
  return true;
}

/* Conv / MatMul / Gemm whose activation input and weights are dequantized
 * 8-bit values. */
er_status er__qdq_fuse_gemm(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->rw.g;
  er_node *n = &g->nodes[i];
  *done = false;
  bool conv = er__rw_is(n, "Conv"), mm = er__rw_is(n, "MatMul"), gemm = er__rw_is(n, "Gemm");
  if (!(conv || mm || gemm) || n->n_outputs != 1 || n->n_inputs < 2) return ER_STATUS_OK;
  int32_t y = n->outputs[0];
  if (er__qdq_vtype(g, y) != ER_DTYPE_FLOAT) return ER_STATUS_OK;
  qparam xp;
  int32_t xq;
  if (!er__qdq_dq_per_tensor(qc, er__rw_producer(&qc->rw, n->inputs[0]), &xp, &xq)) return ER_STATUS_OK;
  wparam wp;
  if (!dq_weights(qc, n->inputs[1], &wp)) return ER_STATUS_OK;
  const er_tensor *w = wp.w;
  bool trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  if (gemm) {
    const er_attr *ta = er__node_attr(n, "transA"), *tb = er__node_attr(n, "transB");
    const er_attr *al = er__node_attr(n, "alpha"), *be = er__node_attr(n, "beta");
    if (ta && ta->i) return ER_STATUS_OK;
    trans_b = tb && tb->i;
    if (al && al->type == ER_ATTR_FLOAT) alpha = al->f;
    if (be && be->type == ER_ATTR_FLOAT) beta = be->f;
    if (n->version < 7) return ER_STATUS_OK; /* the broadcast attribute era */
    if (!(alpha > 0) || !isfinite(alpha) || !isfinite(beta)) return ER_STATUS_OK;
  }
  if ((mm || gemm) && w->rank != 2) return ER_STATUS_OK;
  if (conv && (w->rank < 3 || g->values[n->inputs[0]].info.rank != w->rank)) return ER_STATUS_OK;
  /* Channels: Conv's output channels (W axis 0); MatMul's columns (W
   * axis 1); Gemm with transB the rows of W. */
  int ch_axis = conv ? 0 : trans_b ? 0 : 1;
  int64_t m = w->dims[ch_axis], k = conv ? 0 : w->dims[1 - ch_axis];
  if (wp.channels != 1 && wp.axis != ch_axis) return ER_STATUS_OK;
  if (m <= 0) return ER_STATUS_OK;
  out_chain c;
  er__qdq_follow_output(qc, y, &c);
  if (c.q < 0 && !qc->float_out) return ER_STATUS_OK;
  float *mult = malloc((size_t)m * sizeof *mult), *off = malloc((size_t)m * sizeof *off);
  float *bias_real = calloc((size_t)m, sizeof *bias_real);
  er_status st = ER_STATUS_OK;
  if (!mult || !off || !bias_real) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory in the QDQ pass");
    goto done;
  }
  int32_t bias_int = -1;
  if (!mm && n->n_inputs > 2 && n->inputs[2] >= 0) {
    if (!bias_of(qc, n->inputs[2], m, xp.scale, &wp, gemm ? beta : 1.0f, bias_real, &bias_int)) goto done;
    if (alpha != 1.0f) bias_int = -1;
  }
  bool quant_out = c.q >= 0;
  for (int64_t j = 0; j < m; j++) {
    double prod = (double)xp.scale * wscale(&wp, j) * alpha;
    double b = bias_int >= 0 ? 0.0 : bias_real[j];
    if (quant_out) {
      mult[j] = (float)(prod / c.qp.scale);
      off[j] = (float)(b / c.qp.scale);
    } else {
      mult[j] = (float)prod;
      off[j] = (float)b;
    }
    if (!isfinite(mult[j]) || !isfinite(off[j])) goto done;
  }
  /* The weights as the op wants them: W as it is for Conv and MatMul,
   * transposed to [K, N] for Gemm with transB. */
  const char *base = n->name;
  int32_t w_v = wp.w_v, wzp_v = wp.zp_v, mult_v, off_v, xzp_v, yzp_v = -1;
  if (trans_b) {
    er_tensor t;
    int64_t dims[2] = {k, m};
    if ((st = er__qdq_alloc_tensor(&t, w->dtype, 2, dims)) != ER_STATUS_OK) goto done;
    const uint8_t *src = w->data;
    uint8_t *dst = t.data;
    for (int64_t r = 0; r < m; r++)
      for (int64_t q = 0; q < k; q++) dst[q * m + r] = src[r * k + q];
    if ((st = er__qdq_new_const(qc, base, &t, &w_v)) != ER_STATUS_OK) goto done;
  }
  if (wzp_v < 0 && (st = er__qdq_new_scalar(qc, base, w->dtype, 0, &wzp_v)) != ER_STATUS_OK) goto done;
  if ((st = er__qdq_new_floats(qc, base, mult, m, &mult_v)) != ER_STATUS_OK) goto done;
  if ((st = er__qdq_new_floats(qc, base, off, m, &off_v)) != ER_STATUS_OK) goto done;
  if ((st = er__qdq_zp_value(qc, &xp, base, &xzp_v)) != ER_STATUS_OK) goto done;
  if (quant_out && (st = er__qdq_zp_value(qc, &c.qp, base, &yzp_v)) != ER_STATUS_OK) goto done;
  n = &g->nodes[i];
  int32_t ins[8] = {xq, xzp_v, w_v, wzp_v, bias_int, mult_v, off_v, yzp_v};
  if ((st = er__rw_set_inputs(g, n, ins, quant_out ? 8 : 7)) != ER_STATUS_OK) goto done;
  er_attr extra[2];
  int n_extra = 0;
  if (quant_out) {
    int64_t lo, hi;
    er__qdq_chain_clamp(&c, &lo, &hi);
    extra[n_extra++] = er__rw_attr_int("qmin", lo);
    extra[n_extra++] = er__rw_attr_int("qmax", hi);
  } else if (c.act.node >= 0) {
    extra[n_extra++] = er__rw_attr_float("clip_min", c.act.lo);
    extra[n_extra++] = er__rw_attr_float("clip_max", c.act.hi);
  }
  static const char *const conv_attrs[] = {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad", NULL};
  if ((st = er__rw_set_attrs(g, n, conv ? conv_attrs : NULL, extra, n_extra)) != ER_STATUS_OK) goto done;
  if ((st = er__rw_set_op(n, ER_QFUSED_DOMAIN, conv ? "QConv" : "QMatMul", 1)) != ER_STATUS_OK) goto done;
  er__qdq_take_chain(qc, i, y, &c);
  *done = true;
done:
  free(mult);
  free(off);
  free(bias_real);
  return st;
}

/* ======================================================================== */
/* Add and Mul                                                               */
/* ======================================================================== */

er_status er__qdq_fuse_binary(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->rw.g;
  er_node *n = &g->nodes[i];
  *done = false;
  bool add = er__rw_is(n, "Add") || (er__rw_is(n, "Sum") && n->n_inputs == 2), mul = er__rw_is(n, "Mul");
  if (!(add || mul) || n->n_inputs != 2 || n->n_outputs != 1 || er__qdq_vtype(g, n->outputs[0]) != ER_DTYPE_FLOAT)
    return ER_STATUS_OK;
  if (n->version < 7) return ER_STATUS_OK; /* legacy broadcast attributes */
  qparam ap, bp;
  int32_t aq, bq;
  if (!er__qdq_dq_per_tensor(qc, er__rw_producer(&qc->rw, n->inputs[0]), &ap, &aq) ||
      !er__qdq_dq_per_tensor(qc, er__rw_producer(&qc->rw, n->inputs[1]), &bp, &bq))
    return ER_STATUS_OK;
  /* A constant operand of one value or one per channel makes the op a
   * (per-channel) lookup table, which er__qdq_fuse_lut builds and which chains of
   * such ops merge into. */
  for (int k = 0; k < 2; k++) {
    int32_t o = n->inputs[k], other = n->inputs[1 - k];
    const er_tensor *oi = &g->values[o].info, *xi = &g->values[other].info;
    if (!er__qdq_dq_of_consts(qc, o) || er__qdq_dq_of_consts(qc, other) || xi->rank < 0 || oi->rank < 0) continue;
    int64_t cnt = er__tensor_count(oi);
    bool per_channel = (xi->rank == 3 || xi->rank == 4) && oi->rank <= xi->rank && cnt == xi->dims[1];
    for (int d = 0; per_channel && d < oi->rank; d++) {
      int ad = d + xi->rank - oi->rank;
      if (oi->dims[d] != (ad == 1 ? xi->dims[1] : 1)) per_channel = false;
    }
    if (cnt == 1 || per_channel) return ER_STATUS_OK;
  }
  int32_t y = n->outputs[0];
  out_chain c;
  er__qdq_follow_output(qc, y, &c);
  if (c.q < 0) return ER_STATUS_OK;
  const char *base = n->name;
  int32_t azp, bzp, yzp;
  ER_CHECK(er__qdq_zp_value(qc, &ap, base, &azp));
  ER_CHECK(er__qdq_zp_value(qc, &bp, base, &bzp));
  ER_CHECK(er__qdq_zp_value(qc, &c.qp, base, &yzp));
  n = &g->nodes[i];
  int32_t ins[8] = {aq, ap.scale_v, azp, bq, bp.scale_v, bzp, c.qp.scale_v, yzp};
  ER_CHECK(er__rw_set_inputs(g, n, ins, 8));
  int64_t lo, hi;
  er__qdq_chain_clamp(&c, &lo, &hi);
  er_attr extra[2] = {er__rw_attr_int("qmin", lo), er__rw_attr_int("qmax", hi)};
  ER_CHECK(er__rw_set_attrs(g, n, NULL, extra, 2));
  ER_CHECK(er__rw_set_op(n, ER_QFUSED_DOMAIN, add ? "QAdd" : "QMul", 1));
  er__qdq_take_chain(qc, i, y, &c);
  *done = true;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Average pools                                                             */
/* ======================================================================== */

er_status er__qdq_fuse_avgpool(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->rw.g;
  er_node *n = &g->nodes[i];
  *done = false;
  bool global = er__rw_is(n, "GlobalAveragePool");
  if (!(global || er__rw_is(n, "AveragePool")) || n->n_outputs != 1 || n->n_inputs != 1) return ER_STATUS_OK;
  if (!global && n->version < 7) return ER_STATUS_OK;
  qparam xp;
  int32_t xq;
  if (!er__qdq_dq_per_tensor(qc, er__rw_producer(&qc->rw, n->inputs[0]), &xp, &xq)) return ER_STATUS_OK;
  int32_t y = n->outputs[0];
  out_chain c;
  er__qdq_follow_output(qc, y, &c);
  if (c.q < 0 || c.act.node >= 0) return ER_STATUS_OK;
  float mult = (float)((double)xp.scale / c.qp.scale);
  if (!isfinite(mult)) return ER_STATUS_OK;
  const char *base = n->name;
  int32_t xzp, yzp, mult_v;
  ER_CHECK(er__qdq_zp_value(qc, &xp, base, &xzp));
  ER_CHECK(er__qdq_zp_value(qc, &c.qp, base, &yzp));
  ER_CHECK(er__qdq_new_floats(qc, base, &mult, 1, &mult_v));
  n = &g->nodes[i];
  int32_t ins[4] = {xq, xzp, mult_v, yzp};
  ER_CHECK(er__rw_set_inputs(g, n, ins, 4));
  static const char *const pool_attrs[] = {"kernel_shape", "strides", "pads", "dilations", "auto_pad", "ceil_mode",
                                           "count_include_pad", NULL};
  er_attr extra[1] = {er__rw_attr_int("global", 1)};
  ER_CHECK(er__rw_set_attrs(g, n, global ? NULL : pool_attrs, extra, global ? 1 : 0));
  ER_CHECK(er__rw_set_op(n, ER_QFUSED_DOMAIN, "QAvgPool", 1));
  er__qdq_take_chain(qc, i, y, &c);
  *done = true;
  return ER_STATUS_OK;
}


/* ======================================================================== */
/* int4 block-wise weights                                                   */
/* ======================================================================== */

/* DQ(W int4/uint4 const, blocked along K) -> MatMul (W [K, N], axis 0) or
 * Gemm with transB (W [N, K], axis 1): QBlockMatMul. */
er_status er__qdq_fuse_block(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->rw.g;
  er_node *n = &g->nodes[i];
  *done = false;
  bool mm = er__rw_is(n, "MatMul"), gemm = er__rw_is(n, "Gemm");
  if (!(mm || gemm) || n->n_inputs < 2 || n->n_outputs != 1) return ER_STATUS_OK;
  if (er__qdq_vtype(g, n->inputs[0]) != ER_DTYPE_FLOAT || er__qdq_vtype(g, n->outputs[0]) != ER_DTYPE_FLOAT) return ER_STATUS_OK;
  int32_t d = er__rw_producer(&qc->rw, n->inputs[1]);
  if (d < 0 || !er__rw_is(&g->nodes[d], "DequantizeLinear")) return ER_STATUS_OK;
  const er_node *dn = &g->nodes[d];
  const er_attr *bsa = er__node_attr(dn, "block_size"), *axa = er__node_attr(dn, "axis");
  if (!bsa || bsa->type != ER_ATTR_INT || bsa->i < 1 || dn->n_inputs < 2) return ER_STATUS_OK;
  const er_tensor *w = er__qdq_const_of(g, dn->inputs[0]), *s = er__qdq_const_of(g, dn->inputs[1]);
  const er_tensor *z = dn->n_inputs > 2 && dn->inputs[2] >= 0 ? er__qdq_const_of(g, dn->inputs[2]) : NULL;
  if (!w || w->rank != 2 || !s || s->dtype != ER_DTYPE_FLOAT || (dn->n_inputs > 2 && dn->inputs[2] >= 0 && !z))
    return ER_STATUS_OK;
  if (w->dtype != ER_DTYPE_INT4 && w->dtype != ER_DTYPE_UINT4 && !er__qdq_is_q8(w->dtype)) return ER_STATUS_OK;
  if (er__qdq_vtype(g, dn->outputs[0]) != ER_DTYPE_FLOAT) return ER_STATUS_OK;
  int64_t axis = axa && axa->type == ER_ATTR_INT ? axa->i : 1;
  if (axis < 0) axis += 2;
  bool trans = false;
  int32_t bias = -1;
  if (gemm) {
    const er_attr *ta = er__node_attr(n, "transA"), *tb = er__node_attr(n, "transB");
    const er_attr *al = er__node_attr(n, "alpha"), *be = er__node_attr(n, "beta");
    if ((ta && ta->i) || (al && al->f != 1.0f) || (be && be->f != 1.0f) || n->version < 7) return ER_STATUS_OK;
    trans = tb && tb->i;
    if (n->n_inputs > 2 && n->inputs[2] >= 0) {
      const er_tensor *c = er__qdq_const_of(g, n->inputs[2]);
      int64_t nn = w->dims[trans ? 0 : 1];
      if (!c || c->dtype != ER_DTYPE_FLOAT || c->rank != 1 || c->dims[0] != nn) return ER_STATUS_OK;
      bias = n->inputs[2];
    }
    if (g->values[n->inputs[0]].info.rank != 2) return ER_STATUS_OK;
  }
  if (axis != (trans ? 1 : 0)) return ER_STATUS_OK; /* blocks must run along K */
  n = &g->nodes[i];
  int32_t ins[5] = {n->inputs[0], dn->inputs[0], dn->inputs[1], z ? dn->inputs[2] : -1, bias};
  er_attr extra[2] = {er__rw_attr_int("block_size", bsa->i), er__rw_attr_int("transB", trans)};
  /* Its check validates the layout; refuse quietly when it does not hold. */
  er_node trial = *n;
  trial.n_attrs = 0;
  trial.attrs = NULL;
  ER_CHECK(er__rw_set_inputs(g, &trial, ins, bias >= 0 ? 5 : 4));
  ER_CHECK(er__rw_set_attrs(g, &trial, NULL, extra, 2));
  ER_CHECK(er__rw_set_op(&trial, ER_QFUSED_DOMAIN, "QBlockMatMul", 1));
  er_tensor buf[5], *ptrs[5], out;
  er__qdq_input_infos(qc, &trial, -1, NULL, buf, ptrs);
  if (!er__qdq_check_with(qc, &trial, ptrs, &out)) return ER_STATUS_OK;
  g->nodes[i] = trial;
  *done = true;
  return ER_STATUS_OK;
}
