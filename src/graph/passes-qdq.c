/* passes-qdq.c - the QDQ pass: DequantizeLinear -> op -> QuantizeLinear
 * patterns become integer operators (src/ops/qfused.h), so that a QDQ model
 * (onnxruntime's quantize_static, edgerun quantize) runs in int8 from layer
 * to layer instead of dequantizing between layers.
 *
 * Rewrites, applied until none applies (each keeps what a caller can
 * observe: values it removes have no other reader and are not graph
 * outputs):
 *
 *   hoist   Q(P(u)) -> P(Q(u)) for a data-movement or max op P (Reshape,
 *           Transpose, MaxPool, Concat, ...): exact, because quantization
 *           is elementwise and monotonic (edgerun's quantizer writes
 *           Conv -> Relu -> MaxPool -> Q).
 *   sink    P(DQ(x)) -> DQ(P(x)) for the same ops (a Concat needs equal
 *           parameters on every input): exact for the same reason.
 *   gemm    DQ(x), DQ(W const) [, bias] -> Conv / MatMul / Gemm [-> Relu /
 *           Clip] -> Q  =>  QConv / QMatMul with int8 output; without a Q,
 *           QConv / QMatMul with float output. Within one quantization
 *           step of the unfused graph: the integer sum is exact where the
 *           float Conv rounds, and the requantization multiplier is one
 *           float (xs * ws / ys); a result can differ only where the exact
 *           value lies within float rounding of a half step.
 *   binary  DQ(a), DQ(b) -> Add / Mul [-> Relu / Clip] -> Q  =>  QAdd / QMul:
 *           the same float arithmetic, bit-identical.
 *   pool    DQ(x) -> AveragePool / GlobalAveragePool -> Q  =>  QAvgPool:
 *           exact integer sums; within one step (the float pool sums
 *           dequantized floats).
 *   lut     DQ(x) -> f -> Q for an elementwise f of one variable (Relu,
 *           Sigmoid, HardSwish, x * 0.5, ...; per channel for
 *           BatchNormalization and per-channel constants), and DQ(x) -> Q
 *           with other parameters  =>  QLut, whose table is computed on all
 *           256 inputs with f's own reference kernel between
 *           DequantizeLinear's and QuantizeLinear's arithmetic:
 *           bit-identical. DQ -> Q with equal parameters vanishes; chains
 *           of tables merge.
 *   self    QAdd / QMul(x, QLut(x)) (SiLU: x * sigmoid(x))  =>  one QLut,
 *           the QAdd / QMul reference kernel run on all 256 values of x
 *           and their entries: bit-identical.
 *   int4    DQ(W int4/uint4 const, blocked along K) -> MatMul / Gemm  =>
 *           QBlockMatMul (float activations, weights dequantized inside
 *           the kernel).
 *
 * Relu and Clip before a Q fold into the integer clamp [qmin, qmax]
 * (Q(relu(v)) = max(Q(v), Q(0)) exactly, as Q is monotonic).
 *
 * Constant folding at load leaves DequantizeLinear nodes alone (infer.c),
 * so that this pass sees integer weights and their scales; what it does
 * not fuse it folds at the end, and the graph is then sorted and
 * re-inferred once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/passes-qdq.h"

/* ======================================================================== */
/* Graph helpers (the rest is graph/rewrite.h)                              */
/* ======================================================================== */

/* A constant with data (a zero-element one is no use to a fusion). */
const er_tensor *er__qdq_const_of(const er_graph *g, int32_t v) {
  const er_tensor *t = er__graph_const(g, v);
  return t && t->data ? t : NULL;
}

er_dtype er__qdq_vtype(const er_graph *g, int32_t v) { return v >= 0 ? g->values[v].info.dtype : ER_DTYPE_UNDEFINED; }
bool er__qdq_is_q8(er_dtype t) { return t == ER_DTYPE_INT8 || t == ER_DTYPE_UINT8; }

static const char *base_of(const char *base) { return base[0] ? base : "qdq"; }

/* A new intermediate value of the given type and shape. */
er_status er__qdq_new_value(qctx *qc, const char *base, er_dtype t, const er_tensor *shape, int32_t *id_out) {
  return er__rw_new_value(qc->rw.g, base_of(base), "q", t, shape ? shape->rank : -1,
                          shape && shape->rank > 0 ? shape->dims : NULL, id_out);
}

/* A new constant owning the data of *t (allocated with er__tensor_alloc;
 * moved, see er__rw_new_const). */
er_status er__qdq_new_const(qctx *qc, const char *base, er_tensor *t, int32_t *id_out) {
  return er__rw_new_const(qc->rw.g, base_of(base), "c", t, id_out);
}

er_status er__qdq_alloc_tensor(er_tensor *t, er_dtype dtype, int rank, const int64_t *dims) {
  er__tensor_set(t, dtype, rank, dims);
  return er__tensor_alloc(t, 0);
}

/* A constant of one value (rank 0). */
er_status er__qdq_new_scalar(qctx *qc, const char *base, er_dtype t, double v, int32_t *id_out) {
  return er__rw_new_const_f64(qc->rw.g, base_of(base), "c", t, 0, 1, &v, id_out);
}

/* A float32 constant [n]. */
er_status er__qdq_new_floats(qctx *qc, const char *base, const float *v, int64_t n, int32_t *id_out) {
  return er__rw_new_const_data(qc->rw.g, base_of(base), "c", ER_DTYPE_FLOAT, n, v, id_out);
}

/* Runs node n's check (at load, with what is known) on the given input
 * infos; *out receives output 0's type and shape. False when the op
 * rejects them. */
bool er__qdq_check_with(const qctx *qc, const er_node *n, er_tensor *const *in, er_tensor *out) {
  er_tensor outs[4];
  er_tensor *outp[4];
  if (n->n_outputs > 4) return false;
  for (int k = 0; k < n->n_outputs; k++) {
    er__tensor_set(&outs[k], ER_DTYPE_UNDEFINED, -1, NULL);
    outp[k] = n->outputs[k] >= 0 ? &outs[k] : NULL;
  }
  er_kctx ctx = {n, n->n_inputs, in, n->n_outputs, outp, true, NULL, qc->rw.g, NULL};
  if (n->op->check(&ctx) != ER_STATUS_OK) {
    er__error_clear();
    return false;
  }
  *out = outs[0];
  return true;
}

/* What node n's check sees of its inputs now: constants with data, other
 * values as type and shape; input `k_over` (if >= 0) replaced by `over`. */
void er__qdq_input_infos(const qctx *qc, const er_node *n, int k_over, const er_tensor *over, er_tensor *buf,
                        er_tensor **ptrs) {
  for (int k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v < 0) {
      ptrs[k] = NULL;
      continue;
    }
    const er_tensor *c = er__qdq_const_of(qc->rw.g, v);
    buf[k] = c ? *c : qc->rw.g->values[v].info;
    if (!c) buf[k].data = NULL;
    buf[k].flags = 0;
    if (k == k_over) {
      buf[k] = *over;
      buf[k].data = NULL;
    }
    ptrs[k] = &buf[k];
  }
}

/* ======================================================================== */
/* Quantization parameters                                                   */
/* ======================================================================== */


bool er__qdq_attr_is(const er_node *n, const char *name, int64_t want) {
  const er_attr *a = er__node_attr(n, name);
  return !a || (a->type == ER_ATTR_INT && a->i == want);
}

/* A scalar float32 constant > 0 and finite. */
static bool scale_of(const er_graph *g, int32_t v, float *s) {
  const er_tensor *t = er__qdq_const_of(g, v);
  if (!t || t->dtype != ER_DTYPE_FLOAT || er__tensor_count(t) != 1) return false;
  *s = ((const float *)t->data)[0];
  return isfinite(*s) && *s > 0;
}

/* A one-value zero point of type t (or none: 0). */
static bool zp_of(const er_graph *g, const er_node *n, int i, er_dtype t, int32_t *zp, int32_t *zp_v) {
  *zp = 0;
  *zp_v = -1;
  if (n->n_inputs <= i || n->inputs[i] < 0) return true;
  const er_tensor *z = er__qdq_const_of(g, n->inputs[i]);
  if (!z || z->dtype != t || er__tensor_count(z) != 1) return false;
  *zp = (int32_t)er__load_i64(z->data, z->dtype, 0);
  *zp_v = n->inputs[i];
  return true;
}

/* Node i is a per-tensor DequantizeLinear of a uint8/int8 value to float32;
 * *x_out receives the quantized input. */
bool er__qdq_dq_per_tensor(const qctx *qc, int32_t i, qparam *p, int32_t *x_out) {
  if (i < 0) return false;
  const er_graph *g = qc->rw.g;
  const er_node *n = &g->nodes[i];
  if (!er__rw_is(n, "DequantizeLinear") || n->n_inputs < 2 || n->n_outputs != 1 || n->inputs[0] < 0) return false;
  if (!er__qdq_attr_is(n, "block_size", 0) || er__qdq_vtype(g, n->outputs[0]) != ER_DTYPE_FLOAT) return false;
  p->type = er__qdq_vtype(g, n->inputs[0]);
  if (!er__qdq_is_q8(p->type) || !scale_of(g, n->inputs[1], &p->scale)) return false;
  p->scale_v = n->inputs[1];
  if (!zp_of(g, n, 2, p->type, &p->zp, &p->zp_v)) return false;
  *x_out = n->inputs[0];
  return true;
}

/* Node i is a per-tensor QuantizeLinear of float32 to uint8/int8. */
bool er__qdq_q_per_tensor(const qctx *qc, int32_t i, qparam *p) {
  if (i < 0) return false;
  const er_graph *g = qc->rw.g;
  const er_node *n = &g->nodes[i];
  if (!er__rw_is(n, "QuantizeLinear") || n->n_inputs < 2 || n->n_outputs != 1 || n->inputs[0] < 0) return false;
  if (!er__qdq_attr_is(n, "block_size", 0) || er__qdq_vtype(g, n->inputs[0]) != ER_DTYPE_FLOAT) return false;
  const er_attr *prec = er__node_attr(n, "precision");
  if (prec && !(prec->type == ER_ATTR_INT && (prec->i == 0 || prec->i == ER_DTYPE_FLOAT))) return false;
  p->type = er__qdq_vtype(g, n->outputs[0]);
  if (!er__qdq_is_q8(p->type) || !scale_of(g, n->inputs[1], &p->scale)) return false;
  p->scale_v = n->inputs[1];
  return zp_of(g, n, 2, p->type, &p->zp, &p->zp_v);
}

bool er__qdq_same_param(const qparam *a, const qparam *b) {
  return a->type == b->type && a->scale == b->scale && a->zp == b->zp;
}

/* QuantizeLinear of one float, as its reference computes it (float
 * division, round half to even, add the zero point, saturate). */
int32_t er__qdq_quantize_value(const qparam *p, float v) {
  int32_t lo, hi;
  er__q_range(p->type, &lo, &hi);
  return er__q_clamp(er__q_rhe(v / p->scale) + p->zp, lo, hi);
}

/* The zero point as a value (the node's own, or a new constant). */
er_status er__qdq_zp_value(qctx *qc, const qparam *p, const char *base, int32_t *id) {
  if (p->zp_v >= 0) {
    *id = p->zp_v;
    return ER_STATUS_OK;
  }
  return er__qdq_new_scalar(qc, base, p->type, p->zp, id);
}

/* ======================================================================== */
/* Activations folded into the output range                                  */
/* ======================================================================== */


/* Node i as a Relu or a Clip with constant bounds. */
static bool act_of(const qctx *qc, int32_t i, act_range *a) {
  const er_graph *g = qc->rw.g;
  const er_node *n = &g->nodes[i];
  a->lo = -INFINITY;
  a->hi = INFINITY;
  a->node = i;
  if (n->n_outputs != 1 || n->n_inputs < 1 || er__qdq_vtype(g, n->inputs[0]) != ER_DTYPE_FLOAT) return false;
  if (er__rw_is(n, "Relu")) {
    a->lo = 0.0f;
    return true;
  }
  if (!er__rw_is(n, "Clip")) return false;
  if (n->version < 11) {
    const er_attr *mn = er__node_attr(n, "min"), *mx = er__node_attr(n, "max");
    if (mn && mn->type == ER_ATTR_FLOAT) a->lo = mn->f;
    if (mx && mx->type == ER_ATTR_FLOAT) a->hi = mx->f;
  } else {
    for (int k = 1; k < 3 && k < n->n_inputs; k++) {
      if (n->inputs[k] < 0) continue;
      const er_tensor *t = er__qdq_const_of(g, n->inputs[k]);
      if (!t || t->dtype != ER_DTYPE_FLOAT || er__tensor_count(t) != 1) return false;
      float v = ((const float *)t->data)[0];
      if (v != v) return false;
      if (k == 1) a->lo = v;
      else a->hi = v;
    }
  }
  return a->lo <= a->hi;
}

/* Fills *c with what follows float value y. */
void er__qdq_follow_output(const qctx *qc, int32_t y, out_chain *c) {
  memset(c, 0, sizeof *c);
  c->act.node = -1;
  c->act.lo = -INFINITY;
  c->act.hi = INFINITY;
  c->q = -1;
  c->out = y;
  int32_t n = er__rw_sole_consumer(&qc->rw, y);
  if (n < 0) return;
  act_range a;
  if (act_of(qc, n, &a) && qc->rw.g->nodes[n].inputs[0] == y) {
    c->act = a;
    c->out = qc->rw.g->nodes[n].outputs[0];
    n = er__rw_sole_consumer(&qc->rw, c->out);
  }
  if (n >= 0 && er__qdq_q_per_tensor(qc, n, &c->qp) && qc->rw.g->nodes[n].inputs[0] == c->out) {
    c->q = n;
    c->out = qc->rw.g->nodes[n].outputs[0];
  }
}

/* The integer clamp [lo, hi] of a quantized output with the chain's
 * activation folded in. */
void er__qdq_chain_clamp(const out_chain *c, int64_t *lo, int64_t *hi) {
  int32_t tlo, thi;
  er__q_range(c->qp.type, &tlo, &thi);
  *lo = tlo;
  *hi = thi;
  if (c->act.node < 0) return;
  if (c->act.lo > -INFINITY) *lo = er__qdq_quantize_value(&c->qp, c->act.lo);
  if (c->act.hi < INFINITY) *hi = er__qdq_quantize_value(&c->qp, c->act.hi);
}

/* Marks the chain's nodes dead and moves its output to node i. */
void er__qdq_take_chain(qctx *qc, int32_t i, int32_t y, const out_chain *c) {
  if (c->out == y) return;
  er__rw_redirect_output(qc->rw.g, i, y, c->out);
  if (c->act.node >= 0) qc->rw.dead[c->act.node] = true;
  if (c->q >= 0) qc->rw.dead[c->q] = true;
}

/* ======================================================================== */
/* Driver                                                                    */
/* ======================================================================== */

static er_status sweep(qctx *qc, er_qdq_rewrite_fn fn) {
  for (int32_t i = 0; i < qc->rw.g->n_nodes; i++) {
    if (qc->rw.dead[i]) continue;
    bool done = false;
    ER_CHECK(fn(qc, i, &done));
    if (done) {
      qc->rw.changed++;
      ER_CHECK(er__rw_count_uses(&qc->rw));
      er__rw_prune(&qc->rw, true);
    }
  }
  return ER_STATUS_OK;
}

/* Folds DequantizeLinear nodes whose inputs are all constants (weights the
 * pass did not fuse): their outputs become constants. */
static er_status fold_dq(qctx *qc, int *folded) {
  er_graph *g = qc->rw.g;
  *folded = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (qc->rw.dead[i]) continue;
    er_node *n = &g->nodes[i];
    if (!er__rw_is(n, "DequantizeLinear") || n->n_outputs != 1 || n->outputs[0] < 0) continue;
    if (qc->rw.uses[n->outputs[0]] == 0) continue; /* removed below; never expanded */
    er_tensor *in[3] = {NULL, NULL, NULL};
    bool all = n->n_inputs <= 3;
    for (int k = 0; k < n->n_inputs && all; k++) {
      if (n->inputs[k] < 0) continue;
      in[k] = (er_tensor *)er__qdq_const_of(g, n->inputs[k]);
      if (!in[k]) all = false;
    }
    if (!all) continue;
    er_tensor out;
    er_status st = er__qdq_eval_node(qc, n, in, &out);
    if (st != ER_STATUS_OK) {
      er__error_clear();
      continue; /* left to run (and fail) as written */
    }
    ER_CHECK(er__rw_make_const(g, n->outputs[0], &out));
    qc->rw.dead[i] = true;
    (*folded)++;
  }
  return ER_STATUS_OK;
}

er_status er__graph_qdq_fuse(er_graph *g) {
  bool any = false;
  for (int32_t i = 0; i < g->n_nodes && !any; i++)
    any = er__rw_is(&g->nodes[i], "DequantizeLinear") || er__rw_is(&g->nodes[i], "QuantizeLinear");
  if (!any) return ER_STATUS_OK;
  qctx qc;
  memset(&qc, 0, sizeof qc);
  er_status st = er__rw_begin(&qc.rw, g);
  for (int round = 0; round < QDQ_MAX_ROUNDS && st == ER_STATUS_OK; round++) {
    int before = qc.rw.changed;
    /* Movement to a fixpoint first, so that groups see their DQs and Qs
     * next to them. */
    for (int r2 = 0; r2 < QDQ_MAX_ROUNDS && st == ER_STATUS_OK; r2++) {
      int moved = qc.rw.changed;
      st = sweep(&qc, er__qdq_hoist_q);
      if (st == ER_STATUS_OK) st = sweep(&qc, er__qdq_sink_dq);
      if (qc.rw.changed == moved) break;
    }
    static const er_qdq_rewrite_fn groups[] = {er__qdq_fuse_gemm,      er__qdq_fuse_binary,    er__qdq_fuse_avgpool,
                                               er__qdq_fuse_lut,       er__qdq_fuse_lut_chain, er__qdq_fuse_self_binary,
                                               er__qdq_fuse_block};
    for (size_t r = 0; r < ER_ARRAY_LEN(groups) && st == ER_STATUS_OK; r++) st = sweep(&qc, groups[r]);
    if (qc.rw.changed == before) break;
  }
  /* Last, GEMMs whose result stays float (no Q follows) still multiply in
   * integers. */
  qc.float_out = true;
  if (st == ER_STATUS_OK) st = sweep(&qc, er__qdq_fuse_gemm);
  int folded = 0;
  if (st == ER_STATUS_OK) st = fold_dq(&qc, &folded);
  if (st == ER_STATUS_OK && (qc.rw.changed || folded)) {
    st = er__rw_count_uses(&qc.rw);
    /* Drops dead nodes and nodes whose outputs nobody reads, keeping the
     * order. */
    if (st == ER_STATUS_OK) {
      er__rw_prune(&qc.rw, false);
      er__rw_commit(&qc.rw);
    }
    /* Rewrites add nodes at the end: restore a topological order, then
     * fold what became constant and recompute every value's type and
     * shape once. */
    if (st == ER_STATUS_OK) st = er__graph_validate(g);
    if (st == ER_STATUS_OK) st = er__graph_infer(g, true);
  }
  er__rw_end(&qc.rw);
  if (st != ER_STATUS_OK) er__error_prefix("QDQ pass over graph '%s'", g->name);
  return st;
}
