/* quantize-emit.c - edgerun quantize's weight quantization (per tensor or
 * per channel, int8 or int4 blocks) and the QDQ model it writes (see
 * quantize.c). */
#define _GNU_SOURCE
#include "quant/quantize-impl.h"

/* ======================================================================== */
/* Weight quantization                                                       */
/* ======================================================================== */

static er_status check_finite(const er_tensor *W, const char *name, const char *node_op, const char *node) {
  const float *w = W->data;
  int64_t n = er__tensor_count(W);
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(w[i]))
      return er__error(ER_STATUS_INVALID_TENSOR,
                       "weight '%s' of %s node '%s' holds %s at element %lld; it cannot be quantized", name,
                       node_op, node, isnan(w[i]) ? "NaN" : "infinity", (long long)i);
  return ER_STATUS_OK;
}

/* Symmetric int8 weight quantization along `axis` (-1 = one scale).
 * scales[ch] receives the scale of each of *n_ch channels; *sqnr the
 * weight quantization SQNR. */
static er_status quant_int8(const er_tensor *W, int axis, int qmax, er_tensor *q, float **scales_out,
                            int64_t *n_ch, double *sqnr) {
  int64_t outer = 1, C = 1, inner = 1;
  if (axis >= 0) {
    for (int d = 0; d < axis; d++) outer *= W->dims[d];
    C = W->dims[axis];
    for (int d = axis + 1; d < W->rank; d++) inner *= W->dims[d];
  } else {
    inner = er__tensor_count(W);
  }
  float *scales = malloc((size_t)(C > 0 ? C : 1) * sizeof *scales);
  if (!scales) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing weights");
  const float *w = W->data;
  for (int64_t c = 0; c < C; c++) {
    double amax = 0;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) amax = fmax(amax, fabs(w[(o * C + c) * inner + i]));
    /* int8 symmetric uses [-127, 127] so that -x quantizes like x
     * ([-64, 64] with reduce_range: CPUs without VNNI then multiply
     * exactly with vpmaddubsw). An all-zero channel gets scale 1 (every
     * value is exactly 0). */
    float s = (float)(amax / qmax);
    scales[c] = s >= FLT_MIN ? s : 1.0f;
  }
  er__tensor_set(q, ER_DTYPE_INT8, W->rank, W->dims);
  er_status st = er__tensor_alloc(q, 0);
  if (st != ER_STATUS_OK) {
    free(scales);
    return st;
  }
  int8_t *qd = q->data;
  double sw = 0, se = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t at = (o * C + c) * inner + i;
        double v = nearbyint((double)w[at] / scales[c]);
        if (v > qmax) v = qmax;
        if (v < -qmax) v = -qmax;
        qd[at] = (int8_t)v;
        double e = (double)w[at] - v * scales[c];
        sw += (double)w[at] * w[at];
        se += e * e;
      }
  *scales_out = scales;
  *n_ch = C;
  *sqnr = se == 0 ? INFINITY : sw == 0 ? -INFINITY : 10 * log10(sw / se);
  return ER_STATUS_OK;
}

/* Block-wise symmetric int4 of a 2-D weight: blocks of `bs` along
 * block_axis (K), one scale per block and column. Values use [-7, 7], so a
 * weight's error is at most half its block's scale (max |w| / 14). */
static er_status quant_int4(const er_tensor *W, int block_axis, int bs, er_tensor *q, er_tensor *scale_t,
                            double *sqnr, double *smin, double *smax) {
  int64_t K = W->dims[block_axis], N = W->dims[1 - block_axis], nb = (K + bs - 1) / bs;
  int64_t sdims[2];
  sdims[block_axis] = nb;
  sdims[1 - block_axis] = N;
  er__tensor_set(scale_t, ER_DTYPE_FLOAT, 2, sdims);
  ER_CHECK(er__tensor_alloc(scale_t, 0));
  er__tensor_set(q, ER_DTYPE_INT4, 2, W->dims);
  er_status st = er__tensor_alloc(q, 0);
  if (st != ER_STATUS_OK) {
    er__tensor_release(scale_t);
    return st;
  }
  const float *w = W->data;
  float *s = scale_t->data;
  int8_t *qd = q->data;
  double sw = 0, se = 0;
  *smin = INFINITY;
  *smax = 0;
  /* Element (k, n) lives at k * N + n when K is axis 0, else n * K + k. */
  for (int64_t n = 0; n < N; n++)
    for (int64_t b = 0; b < nb; b++) {
      int64_t k0 = b * bs, k1 = k0 + bs < K ? k0 + bs : K;
      double amax = 0;
      for (int64_t k = k0; k < k1; k++) {
        int64_t at = block_axis == 0 ? k * N + n : n * K + k;
        amax = fmax(amax, fabs(w[at]));
      }
      float sc = (float)(amax / 7.0);
      if (!(sc >= FLT_MIN)) sc = 1.0f;
      s[block_axis == 0 ? b * N + n : n * nb + b] = sc;
      if (sc < *smin) *smin = sc;
      if (sc > *smax) *smax = sc;
      for (int64_t k = k0; k < k1; k++) {
        int64_t at = block_axis == 0 ? k * N + n : n * K + k;
        double v = nearbyint((double)w[at] / sc);
        if (v > 7) v = 7;
        if (v < -7) v = -7;
        qd[at] = (int8_t)v;
        double e = (double)w[at] - v * sc;
        sw += (double)w[at] * w[at];
        se += e * e;
      }
    }
  *sqnr = se == 0 ? INFINITY : sw == 0 ? -INFINITY : 10 * log10(sw / se);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Emitting the QDQ model                                                    */
/* ======================================================================== */

typedef struct wcache {
  int32_t value, axis;
  bool int4;
  int32_t dq;                   /* DQ output id */
  wquant wq;
} wcache;

typedef struct emit_state {
  qplan *p;
  er_qbuild b;
  er_graph *g;
  int32_t *dq_of;               /* [n_values] activation DQ outputs, -1 */
  wcache *wc;
  size_t n_wc;
  float **owned_scales;
  size_t n_owned;
  er_qreport *rep;              /* fill layer details when not NULL */
} emit_state;

static er_status own_scales(emit_state *e, float *s) {
  float **n = realloc(e->owned_scales, (e->n_owned + 1) * sizeof *n);
  if (!n) {
    free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing");
  }
  e->owned_scales = n;
  e->owned_scales[e->n_owned++] = s;
  return ER_STATUS_OK;
}

/* A new node's name: its output value's name without "_Output". Value
 * names are unique, so these are too (a weight shared by two layers gets
 * one DequantizeLinear; a bias shared by two gets one per layer). */
static void node_name(const er_graph *g, int32_t out, char *buf, size_t size) {
  snprintf(buf, size, "%s", g->values[out].name);
  char *tail = strstr(buf, "_Output");
  if (tail && (tail[7] == '\0' || tail[7] == '_')) memmove(tail, tail + 7, strlen(tail + 7) + 1);
}

/* Q -> DQ after tensor `v` (calibrated qten t). */
static er_status emit_qdq(emit_state *e, int32_t v, const qten *t) {
  er_qbuild *b = &e->b;
  const char *name = e->g->values[v].name;
  double s = t->scale, z = t->zp;
  int32_t sid, zid, qid, did;
  ER_CHECK(er__qb_constant_vec(b, name, "_scale", ER_DTYPE_FLOAT, 0, 1, &s, &sid));
  ER_CHECK(er__qb_constant_vec(b, name, "_zero_point", e->p->act_dtype, 0, 1, &z, &zid));
  ER_CHECK(er__qb_value(b, name, "_QuantizeLinear_Output", &qid));
  ER_CHECK(er__qb_value(b, name, "_DequantizeLinear_Output", &did));
  char nm[512];
  int32_t qin[3] = {v, sid, zid}, din[3] = {qid, sid, zid};
  node_name(e->g, qid, nm, sizeof nm);
  ER_CHECK(er__qb_node(b, "QuantizeLinear", nm, qin, 3, &qid, 1, NULL, 0));
  node_name(e->g, did, nm, sizeof nm);
  ER_CHECK(er__qb_node(b, "DequantizeLinear", nm, din, 3, &did, 1, NULL, 0));
  e->dq_of[v] = did;
  return ER_STATUS_OK;
}

/* Q -> DQ from `src` into the existing value `dst` (a graph output the
 * layer produced before; the layer now writes src). */
static er_status emit_qdq_into(emit_state *e, int32_t src, int32_t dst, const qten *t) {
  er_qbuild *b = &e->b;
  const char *name = e->g->values[dst].name;
  double s = t->scale, z = t->zp;
  int32_t sid, zid, qid;
  ER_CHECK(er__qb_constant_vec(b, name, "_scale", ER_DTYPE_FLOAT, 0, 1, &s, &sid));
  ER_CHECK(er__qb_constant_vec(b, name, "_zero_point", e->p->act_dtype, 0, 1, &z, &zid));
  ER_CHECK(er__qb_value(b, name, "_QuantizeLinear_Output", &qid));
  char nm[512];
  int32_t qin[3] = {src, sid, zid}, din[3] = {qid, sid, zid};
  node_name(e->g, qid, nm, sizeof nm);
  ER_CHECK(er__qb_node(b, "QuantizeLinear", nm, qin, 3, &qid, 1, NULL, 0));
  snprintf(nm, sizeof nm, "%s_DequantizeLinear", name);
  return er__qb_node(b, "DequantizeLinear", nm, din, 3, &dst, 1, NULL, 0);
}

static er_qreport_layer *rep_layer(emit_state *e, const qcand *c) {
  return e->rep ? &e->rep->layers[c - e->p->c] : NULL;
}

/* The DQ output standing for weight input c->w of node n. */
static er_status emit_weight(emit_state *e, const er_node *n, const qcand *c, int32_t *dq_out, wquant *wq) {
  er_qbuild *b = &e->b;
  int32_t wv = n->inputs[c->w];
  int axis = c->int4 ? c->block_axis : c->w_axis;
  for (size_t i = 0; i < e->n_wc; i++)
    if (e->wc[i].value == wv && e->wc[i].axis == axis && e->wc[i].int4 == c->int4) {
      *dq_out = e->wc[i].dq;
      *wq = e->wc[i].wq;
      return ER_STATUS_OK;
    }
  const er_value *val = &e->g->values[wv];
  const er_tensor *W = val->constant;
  ER_CHECK(check_finite(W, val->name, n->op_type, n->name));
  er_qreport_layer *L = rep_layer(e, c);
  er_tensor q, sc;
  int32_t qid, sid, zid = -1, did;
  float *ch_scales = NULL;
  int64_t C = 1;
  double sqnr = NAN, smin = 0, smax = 0;
  er_attr attrs[2];
  int n_attrs = 0;
  char scheme[96];
  if (c->int4) {
    ER_CHECK(quant_int4(W, c->block_axis, e->p->o.block_size, &q, &sc, &sqnr, &smin, &smax));
    C = er__tensor_count(&sc);
    ER_CHECK(er__qb_constant(b, val->name, "_quantized", &q, &qid));
    ER_CHECK(er__qb_constant(b, val->name, "_scale", &sc, &sid));
    *wq = (wquant){W, e->g->values[qid].constant, NULL, C, -1, e->g->values[sid].constant, c->block_axis,
                   e->p->o.block_size};
    attrs[n_attrs++] = er__qb_attr_int("axis", c->block_axis);
    attrs[n_attrs++] = er__qb_attr_int("block_size", e->p->o.block_size);
    snprintf(scheme, sizeof scheme, "int4 symmetric, blocks of %d along axis %d", e->p->o.block_size,
             c->block_axis);
  } else {
    ER_CHECK(quant_int8(W, c->w_axis, e->p->o.reduce_range ? 64 : 127, &q, &ch_scales, &C, &sqnr));
    ER_CHECK(own_scales(e, ch_scales));
    smin = INFINITY;
    smax = 0;
    double *sv = malloc((size_t)C * sizeof *sv);
    if (!sv) {
      er__tensor_release(&q);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing weights");
    }
    for (int64_t i = 0; i < C; i++) {
      sv[i] = ch_scales[i];
      smin = fmin(smin, sv[i]);
      smax = fmax(smax, sv[i]);
    }
    /* Symmetric weights have zero points of 0, which is what an omitted
     * zero point means; leaving it out saves a tensor per weight. */
    er_status st = er__qb_constant(b, val->name, "_quantized", &q, &qid);
    if (st == ER_STATUS_OK)
      st = er__qb_constant_vec(b, val->name, "_scale", ER_DTYPE_FLOAT, c->w_axis >= 0 ? 1 : 0, C, sv, &sid);
    free(sv);
    ER_CHECK(st);
    *wq = (wquant){W, e->g->values[qid].constant, ch_scales, C, c->w_axis, NULL, 0, 0};
    if (c->w_axis >= 0) {
      attrs[n_attrs++] = er__qb_attr_int("axis", c->w_axis);
      snprintf(scheme, sizeof scheme, "int8%s symmetric per-channel (axis %d)",
               e->p->o.reduce_range ? " (7-bit range)" : "", c->w_axis);
    } else {
      snprintf(scheme, sizeof scheme, "int8%s symmetric per-tensor", e->p->o.reduce_range ? " (7-bit range)" : "");
    }
  }
  ER_CHECK(er__qb_value(b, val->name, "_DequantizeLinear_Output", &did));
  int32_t din[3] = {qid, sid, zid};
  char nm[512];
  node_name(e->g, did, nm, sizeof nm);
  ER_CHECK(er__qb_node(b, "DequantizeLinear", nm, din, zid >= 0 ? 3 : 2, &did, 1, attrs, n_attrs));
  wcache *nw = realloc(e->wc, (e->n_wc + 1) * sizeof *nw);
  if (!nw) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing");
  e->wc = nw;
  e->wc[e->n_wc++] = (wcache){wv, axis, c->int4, did, *wq};
  if (L) {
    free(L->weight);
    free(L->scheme);
    L->weight = strdup(val->name);
    L->scheme = strdup(scheme);
    L->channels = C;
    L->w_scale_min = smin;
    L->w_scale_max = smax;
    L->w_sqnr = sqnr;
    L->w_bytes_float = W->nbytes;
    L->w_bytes_quant = (uint64_t)(c->int4 ? (er__tensor_count(W) + 1) / 2 + C * 4 : er__tensor_count(W) + C * 4);
  }
  *dq_out = did;
  return ER_STATUS_OK;
}

/* The dequantized value of weight element i. */
static double dq_at(const wquant *wq, int64_t i) {
  const er_tensor *W = wq->w;
  double v = ((const int8_t *)wq->q->data)[i];
  if (wq->blocks) {
    int64_t d0 = W->dims[0], d1 = W->dims[1], r = i / d1, col = i % d1;
    const float *s = wq->blocks->data;
    if (wq->block_axis == 0) return v * s[(r / wq->block_size) * d1 + col];
    int64_t nb = (d1 + wq->block_size - 1) / wq->block_size;
    (void)d0;
    return v * s[r * nb + col / wq->block_size];
  }
  if (wq->axis < 0) return v * wq->scales[0];
  int64_t inner = 1;
  for (int d = wq->axis + 1; d < W->rank; d++) inner *= W->dims[d];
  return v * wq->scales[(i / inner) % W->dims[wq->axis]];
}

/* Bias correction (Nagel et al., "Data-Free Quantization", 2019): weight
 * rounding shifts each output's mean by sum_k dW[m,k] * E[x_k]; subtracting
 * that from the bias removes the shift. corr[m] receives it for the M
 * output channels; false when the input means are not known. */
bool er__qz_bias_correction(const er_node *n, const wquant *wq, const qten *t, double *corr, int64_t M) {
  if (!t || t->ch_n <= 0 || !t->ch_count) return false;
  const er_tensor *W = wq->w;
  const float *w = W->data;
  int64_t count = er__tensor_count(W);
  double inv = 1.0 / (double)t->ch_count;
  for (int64_t m = 0; m < M; m++) corr[m] = 0;
  if (is_op(n, "Conv")) {
    const er_attr *ga = er__node_attr(n, "group");
    int64_t groups = ga ? ga->i : 1, Cg = W->dims[1], per_m = count / M;
    if (groups < 1 || M % groups || t->ch_n != Cg * groups) return false;
    int64_t k = per_m / Cg;  /* kernel elements per input channel */
    for (int64_t i = 0; i < count; i++) {
      int64_t m = i / per_m, c = (i / k) % Cg, cin = (m / (M / groups)) * Cg + c;
      corr[m] += (dq_at(wq, i) - w[i]) * t->ch_sum[cin] * inv;
    }
    return true;
  }
  if (is_op(n, "Gemm") && W->rank == 2) {
    const er_attr *tb = er__node_attr(n, "transB");
    bool trans = tb && tb->i;
    int64_t K = trans ? W->dims[1] : W->dims[0], N = trans ? W->dims[0] : W->dims[1];
    if (N != M || t->ch_n != K) return false;
    for (int64_t i = 0; i < count; i++) {
      int64_t k = trans ? i % K : i / N, col = trans ? i / K : i % N;
      corr[col] += (dq_at(wq, i) - w[i]) * t->ch_sum[k] * inv;
    }
    const er_attr *al = er__node_attr(n, "alpha"), *be = er__node_attr(n, "beta");
    double alpha = al ? al->f : 1.0, beta = be ? be->f : 1.0;
    if (beta == 0) return false;
    for (int64_t m = 0; m < M; m++) corr[m] *= alpha / beta;
    return true;
  }
  return false;
}

/* The bias input of a quantized node: int32 with scale s_x * s_w[m] when
 * the activation is quantized and every value fits, else float. `bvals`
 * [M] are the bias values (corrected). */
static er_status emit_bias(emit_state *e, const er_node *n, const qcand *c, const qten *t, const wquant *wq,
                           const double *bvals, int64_t M, int32_t *id_out, bool *as_int32) {
  er_qbuild *bb = &e->b;
  *as_int32 = false;
  int64_t dims[1] = {M};
  const char *base = c->b >= 0 ? e->g->values[n->inputs[c->b]].name : (n->name[0] ? n->name : n->op_type);
  bool int_ok = t && !c->int4 && (c->natural_axis || c->w_axis < 0) && wq->scales && (wq->n_ch == M || wq->n_ch == 1);
  double *sv = malloc((size_t)M * sizeof *sv);
  if (!sv) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing a bias");
  er_tensor q;
  for (int64_t m = 0; m < M && int_ok; m++) {
    /* The product in float32, as an integer kernel and the DQ node form it. */
    float s = t->scale * wq->scales[wq->n_ch == 1 ? 0 : m];
    sv[m] = s;
    double v = s > 0 ? nearbyint(bvals[m] / s) : 0;
    if (!(s > 0) || fabs(v) > 2147483647.0) int_ok = false;
  }
  er_status st;
  if (!int_ok) {
    /* Float bias (weight-only, int4, or out of int32 range). */
    st = er__qb_constant_vec(bb, base, c->b >= 0 ? "_corrected" : "_bias", ER_DTYPE_FLOAT, 1, M, bvals, id_out);
    free(sv);
    return st;
  }
  er__tensor_set(&q, ER_DTYPE_INT32, 1, dims);
  st = er__tensor_alloc(&q, 0);
  if (st != ER_STATUS_OK) {
    free(sv);
    return st;
  }
  for (int64_t m = 0; m < M; m++) ((int32_t *)q.data)[m] = (int32_t)nearbyint(bvals[m] / sv[m]);
  int32_t qid, sid, did;
  st = er__qb_constant(bb, base, "_quantized", &q, &qid);
  if (st == ER_STATUS_OK) st = er__qb_constant_vec(bb, base, "_quantized_scale", ER_DTYPE_FLOAT, 1, M, sv, &sid);
  free(sv);
  ER_CHECK(st);
  ER_CHECK(er__qb_value(bb, base, "_DequantizeLinear_Output", &did));
  int32_t din[2] = {qid, sid};
  er_attr ax = er__qb_attr_int("axis", 0);
  char nm[512];
  node_name(e->g, did, nm, sizeof nm);
  ER_CHECK(er__qb_node(bb, "DequantizeLinear", nm, din, 2, &did, 1, &ax, 1));
  /* A Gemm bias of shape [1, N] is read as the 1-D dequantized one: C
   * broadcasts either way. */
  *id_out = did;
  *as_int32 = true;
  return ER_STATUS_OK;
}

/* Output channels of a weighted node and whether its bias input may be
 * replaced (absent, or a 1-D per-channel constant the plan accepted). */
static int64_t out_channels(const er_node *n, const qcand *c, const er_tensor *W) {
  if (is_op(n, "Conv")) return W->dims[0];
  if (is_op(n, "Gemm") && W->rank == 2) {
    const er_attr *tb = er__node_attr(n, "transB");
    return tb && tb->i ? W->dims[0] : W->dims[1];
  }
  if (is_op(n, "ConvTranspose") && c->b >= 0) {
    const er_attr *ga = er__node_attr(n, "group");
    return W->dims[1] * (ga ? ga->i : 1);
  }
  return -1;
}

/* Builds the QDQ model with the candidates for which quant[i] is true; the
 * serialized model is appended to `out`. */
er_status er__qz_build(qplan *p, const bool *quant, er_pbw *out, er_qreport *rep) {
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  struct er_model *m = NULL;
  ER_CHECK(er_model_load_buffer(p->prep, p->prep_len, NULL, &lo, &m));
  emit_state e;
  memset(&e, 0, sizeof e);
  e.p = p;
  e.g = m->graph;
  e.rep = rep;
  er_graph *g = m->graph;
  er__qb_init(&e.b, g);
  er_status st = ER_STATUS_OK;
  int32_t *cand_of = malloc(((size_t)g->n_nodes + 1) * sizeof *cand_of);
  bool *needed = calloc((size_t)g->n_values + 1, 1);
  e.dq_of = malloc(((size_t)g->n_values + 1) * sizeof *e.dq_of);
  if (!cand_of || !needed || !e.dq_of) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory building the quantized model");
    goto done;
  }
  if (g->n_nodes != p->mf->graph->n_nodes || g->n_values != p->mf->graph->n_values) {
    st = er__error(ER_STATUS_INTERNAL, "the prepared model loaded differently twice");
    goto done;
  }
  for (int32_t i = 0; i < g->n_nodes; i++) cand_of[i] = -1;
  for (int32_t v = 0; v < g->n_values; v++) e.dq_of[v] = -1;
  for (size_t i = 0; i < p->n_c; i++) {
    const qcand *c = &p->c[i];
    if (c->why_float || !quant[i]) continue;
    cand_of[c->node] = (int32_t)i;
    for (int a = 0; a < c->n_act; a++) needed[g->nodes[c->node].inputs[c->act[a]]] = true;
  }
  /* Graph inputs (and anything not produced by a node) first. New values
   * are added as we go; only the model's own are visited. */
  int32_t n_values0 = g->n_values;
  for (int32_t v = 0; v < n_values0 && st == ER_STATUS_OK; v++)
    if (needed[v] && g->values[v].producer < 0) st = emit_qdq(&e, v, &p->t[p->t_of[v]]);
  for (int32_t i = 0; i < g->n_nodes && st == ER_STATUS_OK; i++) {
    er_node node = g->nodes[i];
    int32_t ci = cand_of[i];
    if (ci >= 0) {
      const qcand *c = &p->c[ci];
      int32_t ins[16];
      for (int k = 0; k < node.n_inputs && k < 16; k++) ins[k] = node.inputs[k];
      for (int a = 0; a < c->n_act; a++) ins[c->act[a]] = e.dq_of[node.inputs[c->act[a]]];
      wquant wq;
      memset(&wq, 0, sizeof wq);
      if (c->w >= 0) st = emit_weight(&e, &node, c, &ins[c->w], &wq);
      if (st != ER_STATUS_OK) break;
      /* The bias: corrected for the weights' rounding, int32 where it can
       * be. A node without a bias gets one only to carry a correction. */
      const qten *t = c->n_act >= 1 ? &p->t[p->t_of[node.inputs[c->act[0]]]] : NULL;
      bool has_other_bias = c->b < 0 && node.n_inputs > 2 && node.inputs[2] >= 0;
      int64_t M = c->w >= 0 ? out_channels(&node, c, wq.w) : -1;
      double *bvals = M > 0 && !has_other_bias ? calloc((size_t)M, sizeof *bvals) : NULL;
      double *corr = bvals ? malloc((size_t)M * sizeof *corr) : NULL;
      bool corrected = false, as_int32 = false;
      if (bvals && corr) {
        if (c->b >= 0) {
          const er_value *bv = &g->values[node.inputs[c->b]];
          st = check_finite(bv->constant, bv->name, node.op_type, node.name);
          for (int64_t j = 0; j < M && st == ER_STATUS_OK; j++) bvals[j] = ((const float *)bv->constant->data)[j];
        }
        if (st == ER_STATUS_OK && p->o.bias_correction && t && c->act[0] == 0 && er__qz_bias_correction(&node, &wq, t, corr, M)) {
          for (int64_t j = 0; j < M; j++) bvals[j] -= corr[j];
          corrected = true;
        }
        if (st == ER_STATUS_OK && (c->b >= 0 || corrected)) {
          int bpos = 2;
          st = emit_bias(&e, &node, c, c->n_act == 1 ? t : NULL, &wq, bvals, M, &ins[bpos], &as_int32);
          if (node.n_inputs < 3) node.n_inputs = 3;
        }
      } else if (M > 0 && !has_other_bias) {
        st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing a bias");
      }
      free(bvals);
      free(corr);
      if (rep && st == ER_STATUS_OK) {
        rep->layers[ci].bias_int32 = as_int32;
        rep->layers[ci].bias_corrected = corrected;
      }
      if (st != ER_STATUS_OK) break;
      node.inputs = er__qb_ids(&e.b, ins, node.n_inputs);
      if (!node.inputs) {
        st = ER_STATUS_OUT_OF_MEMORY;
        break;
      }
    }
    /* Graph outputs of a quantized layer, when chosen: the layer writes a
     * new float value, Q -> DQ turn it into the output. Not for a value
     * quantized layers also read (its own Q -> DQ is emitted below). */
    int32_t outs[16], redirected[16];
    int n_red = 0;
    if (ci >= 0 && p->out_qdq && node.n_outputs <= 16) {
      for (int k = 0; k < node.n_outputs && st == ER_STATUS_OK; k++) {
        int32_t v = node.outputs[k];
        outs[k] = v;
        if (v < 0 || v >= n_values0 || !p->out_qdq[v] || !g->values[v].is_graph_output || p->t_of[v] < 0 ||
            needed[v])
          continue;
        st = er__qb_value(&e.b, g->values[v].name, "_float", &outs[k]);
        redirected[n_red++] = k;
      }
      if (st != ER_STATUS_OK) break;
      if (n_red > 0) {
        node.outputs = er__qb_ids(&e.b, outs, node.n_outputs);
        if (!node.outputs) {
          st = ER_STATUS_OUT_OF_MEMORY;
          break;
        }
      }
    }
    st = er__qb_keep(&e.b, &node);
    for (int r = 0; r < n_red && st == ER_STATUS_OK; r++) {
      int k = redirected[r];
      int32_t v = g->nodes[i].outputs[k];
      st = emit_qdq_into(&e, node.outputs[k], v, &p->t[p->t_of[v]]);
    }
    for (int k = 0; k < node.n_outputs && st == ER_STATUS_OK; k++) {
      int32_t v = node.outputs[k];
      if (v >= 0 && v < n_values0 && needed[v]) st = emit_qdq(&e, v, &p->t[p->t_of[v]]);
    }
  }
  if (st == ER_STATUS_OK) st = er__qb_commit(&e.b);
  if (st == ER_STATUS_OK) st = er__onnx_write_model(m, out);
done:
  er__qb_free(&e.b);
  for (size_t i = 0; i < e.n_owned; i++) free(e.owned_scales[i]);
  free(e.owned_scales);
  free(e.wc);
  free(e.dq_of);
  free(cand_of);
  free(needed);
  er_model_free(m);
  return st;
}
