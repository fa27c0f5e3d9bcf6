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

#include "graph/graph.h"
#include "ops/op.h"
#include "ops/qfused.h"

/* Rounds of rewrites before giving up on a fixpoint (each round either
 * changes something or ends the loop; real graphs settle in 2-4). */
#define QDQ_MAX_ROUNDS 16

typedef struct qctx {
  er_graph *g;
  int32_t *uses;     /* [ucap] readers per value; +1000 for graph outputs and captures */
  int32_t ucap;
  bool *dead;        /* [ncap] */
  int32_t ncap;      /* capacity of g->nodes and dead */
  int changed;
  int serial;        /* for unique names */
  bool float_out;    /* fuse_gemm may make float-output ops (last phase) */
} qctx;

/* ======================================================================== */
/* Graph helpers                                                             */
/* ======================================================================== */

static bool is_op(const er_node *n, const char *op) { return n->domain[0] == '\0' && strcmp(n->op_type, op) == 0; }

static er_status count_uses(qctx *qc) {
  er_graph *g = qc->g;
  if (g->n_values > qc->ucap) {
    int32_t cap = g->n_values * 2 + 64;
    int32_t *u = realloc(qc->uses, (size_t)cap * sizeof *u);
    if (!u) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory in the QDQ pass");
    qc->uses = u;
    qc->ucap = cap;
  }
  memset(qc->uses, 0, (size_t)g->n_values * sizeof *qc->uses);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (qc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) qc->uses[n->inputs[k]]++;
    er__node_count_captures(g, n, qc->uses, 1000);
  }
  for (int32_t k = 0; k < g->n_outputs; k++) qc->uses[g->outputs[k]] += 1000;
  return ER_STATUS_OK;
}

static bool node_has_graphs(const er_node *n) {
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].type == ER_ATTR_GRAPH || n->attrs[a].type == ER_ATTR_GRAPHS) return true;
  return false;
}

/* The one live node reading v (once), or -1. */
static int32_t sole_consumer(const qctx *qc, int32_t v) {
  if (v < 0 || qc->uses[v] != 1) return -1;
  for (int32_t i = 0; i < qc->g->n_nodes; i++) {
    if (qc->dead[i]) continue;
    const er_node *n = &qc->g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == v) return i;
  }
  return -1;
}

/* The live node producing v, or -1. */
static int32_t producer(const qctx *qc, int32_t v) {
  if (v < 0) return -1;
  int32_t p = qc->g->values[v].producer;
  return p >= 0 && p < qc->g->n_nodes && !qc->dead[p] ? p : -1;
}

static const er_tensor *const_of(const er_graph *g, int32_t v) {
  if (v < 0) return NULL;
  const er_value *val = &g->values[v];
  if (val->kind != ER_VALUE_CONSTANT || !val->constant || !val->constant->data) return NULL;
  if (val->is_graph_input && g->model->ir_version >= 4) return NULL; /* overridable */
  return val->constant;
}

static er_dtype vtype(const er_graph *g, int32_t v) { return v >= 0 ? g->values[v].info.dtype : ER_DTYPE_UNDEFINED; }
static bool is_q8(er_dtype t) { return t == ER_DTYPE_INT8 || t == ER_DTYPE_UINT8; }

/* Where the pass allocates and who owns new constants: the only two places
 * that know the graph's storage (kept here so a change of ownership model is
 * a two-line edit). */
static er_arena *graph_arena(er_graph *g) { return g->arena; }
static er_status own_tensor(er_graph *g, er_tensor *t) { return er__owned_add(g->owned, t); }

static char *unique_name(qctx *qc, const char *base, const char *what) {
  er_graph *g = qc->g;
  char name[512];
  do {
    snprintf(name, sizeof name, "%s/er_%s%d", base[0] ? base : "qdq", what, qc->serial++);
  } while (er__graph_find(g, name) >= 0);
  return er__arena_strdup(graph_arena(g), name);
}

/* A new intermediate value of the given type and shape. */
static er_status new_value(qctx *qc, const char *base, er_dtype t, const er_tensor *shape, int32_t *id_out) {
  char *name = unique_name(qc, base, "q");
  if (!name) return ER_STATUS_OUT_OF_MEMORY;
  ER_CHECK(er__graph_add_value(qc->g, name, id_out));
  er_value *v = &qc->g->values[*id_out];
  v->kind = ER_VALUE_INTERMEDIATE;
  er__tensor_set(&v->info, t, shape ? shape->rank : -1, shape && shape->rank > 0 ? shape->dims : NULL);
  return ER_STATUS_OK;
}

/* A new constant owning the data of *t (allocated with er__tensor_alloc). */
static er_status new_const(qctx *qc, const char *base, er_tensor *t, int32_t *id_out) {
  er_graph *g = qc->g;
  char *name = unique_name(qc, base, "c");
  er_tensor *heap = er__arena_alloc(graph_arena(g), sizeof *heap);
  if (!name || !heap) {
    er__tensor_release(t);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  *heap = *t;
  er_status st = own_tensor(g, heap);
  if (st != ER_STATUS_OK) {
    er__tensor_release(t);
    return st;
  }
  ER_CHECK(er__graph_add_value(g, name, id_out));
  er_value *v = &g->values[*id_out];
  v->kind = ER_VALUE_CONSTANT;
  v->constant = heap;
  er__tensor_set(&v->info, heap->dtype, heap->rank, heap->dims);
  return ER_STATUS_OK;
}

static er_status alloc_tensor(er_tensor *t, er_dtype dtype, int rank, const int64_t *dims) {
  er__tensor_set(t, dtype, rank, dims);
  return er__tensor_alloc(t, 0);
}

/* A constant of one value (rank 0). */
static er_status new_scalar(qctx *qc, const char *base, er_dtype t, double v, int32_t *id_out) {
  er_tensor c;
  ER_CHECK(alloc_tensor(&c, t, 0, NULL));
  er__store_f64(c.data, t, 0, v);
  return new_const(qc, base, &c, id_out);
}

/* A float32 constant [n]. */
static er_status new_floats(qctx *qc, const char *base, const float *v, int64_t n, int32_t *id_out) {
  er_tensor c;
  ER_CHECK(alloc_tensor(&c, ER_DTYPE_FLOAT, 1, &n));
  memcpy(c.data, v, (size_t)n * sizeof *v);
  return new_const(qc, base, &c, id_out);
}

static int32_t *arena_ids(er_graph *g, const int32_t *ids, int n) {
  int32_t *p = er__arena_array(graph_arena(g), (size_t)n + 1, sizeof *p);
  if (p) memcpy(p, ids, (size_t)n * sizeof *p);
  return p;
}

static er_status set_inputs(er_graph *g, er_node *n, const int32_t *ids, int count) {
  int32_t *in = arena_ids(g, ids, count);
  if (!in) return ER_STATUS_OUT_OF_MEMORY;
  n->inputs = in;
  n->n_inputs = count;
  return ER_STATUS_OK;
}

/* Sets node n's attributes to `keep` of its own (by name; NULL = none)
 * plus `extra`. */
static er_status set_attrs(er_graph *g, er_node *n, const char *const *keep, const er_attr *extra, int n_extra) {
  er_attr *attrs = er__arena_array(graph_arena(g), (size_t)(n->n_attrs + n_extra) + 1, sizeof *attrs);
  if (!attrs) return ER_STATUS_OUT_OF_MEMORY;
  int w = 0;
  for (int i = 0; i < n->n_attrs && keep; i++)
    for (int k = 0; keep[k]; k++)
      if (strcmp(n->attrs[i].name, keep[k]) == 0) attrs[w++] = n->attrs[i];
  for (int j = 0; j < n_extra; j++) attrs[w++] = extra[j];
  n->attrs = attrs;
  n->n_attrs = w;
  return ER_STATUS_OK;
}

static er_attr attr_int(const char *name, int64_t v) {
  er_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = ER_ATTR_INT;
  a.i = v;
  return a;
}

static er_attr attr_float(const char *name, float v) {
  er_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = ER_ATTR_FLOAT;
  a.f = v;
  return a;
}

static er_status make_qop(er_node *n, const char *op) {
  const er_op_def *def = er__op_find(ER_QFUSED_DOMAIN, op, 1);
  if (!def) return er__error(ER_STATUS_INTERNAL, "integer op %s is missing", op);
  n->op_type = op;
  n->domain = ER_QFUSED_DOMAIN;
  n->version = 1;
  n->op = def;
  return ER_STATUS_OK;
}

/* Appends a node (the nodes array grows in the model's arena); returns its
 * index. Node pointers taken before the call are invalid after it. */
static er_status add_node(qctx *qc, const er_node *proto, const int32_t *in, int n_in, const int32_t *out, int n_out,
                          int32_t *index_out) {
  er_graph *g = qc->g;
  if (g->n_nodes == qc->ncap) {
    int32_t cap = qc->ncap * 2 + 16;
    er_node *nodes = er__arena_array(graph_arena(g), (size_t)cap + 1, sizeof *nodes);
    bool *dead = realloc(qc->dead, (size_t)cap + 1);
    if (!nodes || !dead) {
      if (dead) qc->dead = dead;
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory in the QDQ pass");
    }
    memcpy(nodes, g->nodes, (size_t)g->n_nodes * sizeof *nodes);
    g->nodes = nodes;
    qc->dead = dead;
    qc->ncap = cap;
  }
  int32_t i = g->n_nodes;
  er_node *n = &g->nodes[i];
  *n = *proto;
  n->name = unique_name(qc, proto->name, "n");
  n->inputs = arena_ids(g, in, n_in);
  n->outputs = arena_ids(g, out, n_out);
  if (!n->name || !n->inputs || !n->outputs) return ER_STATUS_OUT_OF_MEMORY;
  n->n_inputs = n_in;
  n->n_outputs = n_out;
  qc->dead[i] = false;
  g->n_nodes++;
  for (int k = 0; k < n_out; k++)
    if (out[k] >= 0) g->values[out[k]].producer = i;
  *index_out = i;
  return ER_STATUS_OK;
}

/* Makes node i produce `to` where it produced `from`. */
static void redirect_output(er_graph *g, int32_t i, int32_t from, int32_t to) {
  er_node *n = &g->nodes[i];
  for (int k = 0; k < n->n_outputs; k++)
    if (n->outputs[k] == from) n->outputs[k] = to;
  g->values[to].producer = i;
  if (g->values[from].producer == i) g->values[from].producer = -1;
}

static void replace_uses(qctx *qc, int32_t from, int32_t to) {
  for (int32_t i = 0; i < qc->g->n_nodes; i++) {
    if (qc->dead[i]) continue;
    er_node *n = &qc->g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == from) n->inputs[k] = to;
  }
}

/* Runs node n's check (at load, with what is known) on the given input
 * infos; *out receives output 0's type and shape. False when the op
 * rejects them. */
static bool check_with(const qctx *qc, const er_node *n, er_tensor *const *in, er_tensor *out) {
  er_tensor outs[4];
  er_tensor *outp[4];
  if (n->n_outputs > 4) return false;
  for (int k = 0; k < n->n_outputs; k++) {
    er__tensor_set(&outs[k], ER_DTYPE_UNDEFINED, -1, NULL);
    outp[k] = n->outputs[k] >= 0 ? &outs[k] : NULL;
  }
  er_kctx ctx = {n, n->n_inputs, in, n->n_outputs, outp, true, NULL, qc->g, NULL};
  if (n->op->check(&ctx) != ER_STATUS_OK) {
    er__error_clear();
    return false;
  }
  *out = outs[0];
  return true;
}

/* What node n's check sees of its inputs now: constants with data, other
 * values as type and shape; input `k_over` (if >= 0) replaced by `over`. */
static void input_infos(const qctx *qc, const er_node *n, int k_over, const er_tensor *over, er_tensor *buf,
                        er_tensor **ptrs) {
  for (int k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v < 0) {
      ptrs[k] = NULL;
      continue;
    }
    const er_tensor *c = const_of(qc->g, v);
    buf[k] = c ? *c : qc->g->values[v].info;
    if (!c) buf[k].data = NULL;
    buf[k].flags = 0;
    if (k == k_over) {
      buf[k] = *over;
      buf[k].data = NULL;
    }
    ptrs[k] = &buf[k];
  }
}

static bool dq_of_consts(const struct qctx *qc, int32_t id);

/* ======================================================================== */
/* Quantization parameters                                                   */
/* ======================================================================== */

typedef struct qparam {
  er_dtype type;       /* uint8 / int8 */
  float scale;
  int32_t zp;
  int32_t scale_v;     /* value ids of the scale and zero point (-1: none) */
  int32_t zp_v;
} qparam;

static bool attr_is(const er_node *n, const char *name, int64_t want) {
  const er_attr *a = er__node_attr(n, name);
  return !a || (a->type == ER_ATTR_INT && a->i == want);
}

/* A scalar float32 constant > 0 and finite. */
static bool scale_of(const er_graph *g, int32_t v, float *s) {
  const er_tensor *t = const_of(g, v);
  if (!t || t->dtype != ER_DTYPE_FLOAT || er__tensor_count(t) != 1) return false;
  *s = ((const float *)t->data)[0];
  return isfinite(*s) && *s > 0;
}

/* A one-value zero point of type t (or none: 0). */
static bool zp_of(const er_graph *g, const er_node *n, int i, er_dtype t, int32_t *zp, int32_t *zp_v) {
  *zp = 0;
  *zp_v = -1;
  if (n->n_inputs <= i || n->inputs[i] < 0) return true;
  const er_tensor *z = const_of(g, n->inputs[i]);
  if (!z || z->dtype != t || er__tensor_count(z) != 1) return false;
  *zp = (int32_t)er__load_i64(z->data, z->dtype, 0);
  *zp_v = n->inputs[i];
  return true;
}

/* Node i is a per-tensor DequantizeLinear of a uint8/int8 value to float32;
 * *x_out receives the quantized input. */
static bool dq_per_tensor(const qctx *qc, int32_t i, qparam *p, int32_t *x_out) {
  if (i < 0) return false;
  const er_graph *g = qc->g;
  const er_node *n = &g->nodes[i];
  if (!is_op(n, "DequantizeLinear") || n->n_inputs < 2 || n->n_outputs != 1 || n->inputs[0] < 0) return false;
  if (!attr_is(n, "block_size", 0) || vtype(g, n->outputs[0]) != ER_DTYPE_FLOAT) return false;
  p->type = vtype(g, n->inputs[0]);
  if (!is_q8(p->type) || !scale_of(g, n->inputs[1], &p->scale)) return false;
  p->scale_v = n->inputs[1];
  if (!zp_of(g, n, 2, p->type, &p->zp, &p->zp_v)) return false;
  *x_out = n->inputs[0];
  return true;
}

/* Node i is a per-tensor QuantizeLinear of float32 to uint8/int8. */
static bool q_per_tensor(const qctx *qc, int32_t i, qparam *p) {
  if (i < 0) return false;
  const er_graph *g = qc->g;
  const er_node *n = &g->nodes[i];
  if (!is_op(n, "QuantizeLinear") || n->n_inputs < 2 || n->n_outputs != 1 || n->inputs[0] < 0) return false;
  if (!attr_is(n, "block_size", 0) || vtype(g, n->inputs[0]) != ER_DTYPE_FLOAT) return false;
  const er_attr *prec = er__node_attr(n, "precision");
  if (prec && !(prec->type == ER_ATTR_INT && (prec->i == 0 || prec->i == ER_DTYPE_FLOAT))) return false;
  p->type = vtype(g, n->outputs[0]);
  if (!is_q8(p->type) || !scale_of(g, n->inputs[1], &p->scale)) return false;
  p->scale_v = n->inputs[1];
  return zp_of(g, n, 2, p->type, &p->zp, &p->zp_v);
}

static bool same_param(const qparam *a, const qparam *b) {
  return a->type == b->type && a->scale == b->scale && a->zp == b->zp;
}

/* QuantizeLinear of one float, as its reference computes it (float
 * division, round half to even, add the zero point, saturate). */
static int32_t quantize_value(const qparam *p, float v) {
  int32_t lo, hi;
  er__q_range(p->type, &lo, &hi);
  return er__q_clamp(er__q_rhe(v / p->scale) + p->zp, lo, hi);
}

/* The zero point as a value (the node's own, or a new constant). */
static er_status zp_value(qctx *qc, const qparam *p, const char *base, int32_t *id) {
  if (p->zp_v >= 0) {
    *id = p->zp_v;
    return ER_STATUS_OK;
  }
  return new_scalar(qc, base, p->type, p->zp, id);
}

/* ======================================================================== */
/* Activations folded into the output range                                  */
/* ======================================================================== */

typedef struct act_range {
  float lo, hi;        /* real bounds (Relu: [0, inf), Clip: [min, max]) */
  int32_t node;        /* the Relu / Clip node, -1 = none */
} act_range;

/* Node i as a Relu or a Clip with constant bounds. */
static bool act_of(const qctx *qc, int32_t i, act_range *a) {
  const er_graph *g = qc->g;
  const er_node *n = &g->nodes[i];
  a->lo = -INFINITY;
  a->hi = INFINITY;
  a->node = i;
  if (n->n_outputs != 1 || n->n_inputs < 1 || vtype(g, n->inputs[0]) != ER_DTYPE_FLOAT) return false;
  if (is_op(n, "Relu")) {
    a->lo = 0.0f;
    return true;
  }
  if (!is_op(n, "Clip")) return false;
  if (n->version < 11) {
    const er_attr *mn = er__node_attr(n, "min"), *mx = er__node_attr(n, "max");
    if (mn && mn->type == ER_ATTR_FLOAT) a->lo = mn->f;
    if (mx && mx->type == ER_ATTR_FLOAT) a->hi = mx->f;
  } else {
    for (int k = 1; k < 3 && k < n->n_inputs; k++) {
      if (n->inputs[k] < 0) continue;
      const er_tensor *t = const_of(g, n->inputs[k]);
      if (!t || t->dtype != ER_DTYPE_FLOAT || er__tensor_count(t) != 1) return false;
      float v = ((const float *)t->data)[0];
      if (v != v) return false;
      if (k == 1) a->lo = v;
      else a->hi = v;
    }
  }
  return a->lo <= a->hi;
}

/* What follows a float value y: an optional Relu/Clip and a per-tensor Q,
 * each the sole reader of its input. */
typedef struct out_chain {
  act_range act;       /* act.node = -1: none */
  int32_t q;           /* Q node, -1: none */
  qparam qp;
  int32_t out;         /* the chain's last value (Q's output, or the act's, or y) */
} out_chain;

static void follow_output(const qctx *qc, int32_t y, out_chain *c) {
  memset(c, 0, sizeof *c);
  c->act.node = -1;
  c->act.lo = -INFINITY;
  c->act.hi = INFINITY;
  c->q = -1;
  c->out = y;
  int32_t n = sole_consumer(qc, y);
  if (n < 0) return;
  act_range a;
  if (act_of(qc, n, &a) && qc->g->nodes[n].inputs[0] == y) {
    c->act = a;
    c->out = qc->g->nodes[n].outputs[0];
    n = sole_consumer(qc, c->out);
  }
  if (n >= 0 && q_per_tensor(qc, n, &c->qp) && qc->g->nodes[n].inputs[0] == c->out) {
    c->q = n;
    c->out = qc->g->nodes[n].outputs[0];
  }
}

/* The integer clamp [lo, hi] of a quantized output with the chain's
 * activation folded in. */
static void chain_clamp(const out_chain *c, int64_t *lo, int64_t *hi) {
  int32_t tlo, thi;
  er__q_range(c->qp.type, &tlo, &thi);
  *lo = tlo;
  *hi = thi;
  if (c->act.node < 0) return;
  if (c->act.lo > -INFINITY) *lo = quantize_value(&c->qp, c->act.lo);
  if (c->act.hi < INFINITY) *hi = quantize_value(&c->qp, c->act.hi);
}

/* Marks the chain's nodes dead and moves its output to node i. */
static void take_chain(qctx *qc, int32_t i, int32_t y, const out_chain *c) {
  if (c->out == y) return;
  redirect_output(qc->g, i, y, c->out);
  if (c->act.node >= 0) qc->dead[c->act.node] = true;
  if (c->q >= 0) qc->dead[c->q] = true;
}

/* ======================================================================== */
/* Integer GEMMs: Conv, MatMul, Gemm                                         */
/* ======================================================================== */

/* A DequantizeLinear of constant 8-bit weights: per tensor, or per
 * channel along `axis` of W. */
typedef struct wparam {
  int32_t w_v, zp_v;   /* quantized weights; zero point value (-1 none) */
  const er_tensor *w, *s, *z;
  int64_t channels;    /* scales: 1 or the channel count */
  int axis;
} wparam;

static bool dq_weights(const qctx *qc, int32_t v, wparam *wp) {
  const er_graph *g = qc->g;
  int32_t i = producer(qc, v);
  if (i < 0) return false;
  const er_node *n = &g->nodes[i];
  if (!is_op(n, "DequantizeLinear") || n->n_inputs < 2 || !attr_is(n, "block_size", 0)) return false;
  wp->w_v = n->inputs[0];
  wp->w = const_of(g, n->inputs[0]);
  wp->s = const_of(g, n->inputs[1]);
  wp->z = n->n_inputs > 2 && n->inputs[2] >= 0 ? const_of(g, n->inputs[2]) : NULL;
  wp->zp_v = n->n_inputs > 2 ? n->inputs[2] : -1;
  if (!wp->w || !is_q8(wp->w->dtype) || !wp->s || wp->s->dtype != ER_DTYPE_FLOAT || wp->w->rank < 1) return false;
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
  const er_graph *g = qc->g;
  *exact_int = -1;
  const er_tensor *c = const_of(g, v);
  if (c) {
    int64_t n = er__tensor_count(c);
    if (c->dtype != ER_DTYPE_FLOAT || (n != 1 && n != m) || !row_shaped(c)) return false;
    for (int64_t i = 0; i < m; i++) bias_real[i] = scale_mul * ((const float *)c->data)[n == 1 ? 0 : i];
    return true;
  }
  int32_t d = producer(qc, v);
  if (d < 0) return false;
  const er_node *n = &g->nodes[d];
  if (!is_op(n, "DequantizeLinear") || n->n_inputs < 2 || !attr_is(n, "block_size", 0)) return false;
  const er_tensor *b = const_of(g, n->inputs[0]), *s = const_of(g, n->inputs[1]);
  const er_tensor *z = n->n_inputs > 2 && n->inputs[2] >= 0 ? const_of(g, n->inputs[2]) : NULL;
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
static er_status fuse_gemm(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->g;
  er_node *n = &g->nodes[i];
  *done = false;
  bool conv = is_op(n, "Conv"), mm = is_op(n, "MatMul"), gemm = is_op(n, "Gemm");
  if (!(conv || mm || gemm) || n->n_outputs != 1 || n->n_inputs < 2) return ER_STATUS_OK;
  int32_t y = n->outputs[0];
  if (vtype(g, y) != ER_DTYPE_FLOAT) return ER_STATUS_OK;
  qparam xp;
  int32_t xq;
  if (!dq_per_tensor(qc, producer(qc, n->inputs[0]), &xp, &xq)) return ER_STATUS_OK;
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
  follow_output(qc, y, &c);
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
    if ((st = alloc_tensor(&t, w->dtype, 2, dims)) != ER_STATUS_OK) goto done;
    const uint8_t *src = w->data;
    uint8_t *dst = t.data;
    for (int64_t r = 0; r < m; r++)
      for (int64_t q = 0; q < k; q++) dst[q * m + r] = src[r * k + q];
    if ((st = new_const(qc, base, &t, &w_v)) != ER_STATUS_OK) goto done;
  }
  if (wzp_v < 0 && (st = new_scalar(qc, base, w->dtype, 0, &wzp_v)) != ER_STATUS_OK) goto done;
  if ((st = new_floats(qc, base, mult, m, &mult_v)) != ER_STATUS_OK) goto done;
  if ((st = new_floats(qc, base, off, m, &off_v)) != ER_STATUS_OK) goto done;
  if ((st = zp_value(qc, &xp, base, &xzp_v)) != ER_STATUS_OK) goto done;
  if (quant_out && (st = zp_value(qc, &c.qp, base, &yzp_v)) != ER_STATUS_OK) goto done;
  n = &g->nodes[i];
  int32_t ins[8] = {xq, xzp_v, w_v, wzp_v, bias_int, mult_v, off_v, yzp_v};
  if ((st = set_inputs(g, n, ins, quant_out ? 8 : 7)) != ER_STATUS_OK) goto done;
  er_attr extra[2];
  int n_extra = 0;
  if (quant_out) {
    int64_t lo, hi;
    chain_clamp(&c, &lo, &hi);
    extra[n_extra++] = attr_int("qmin", lo);
    extra[n_extra++] = attr_int("qmax", hi);
  } else if (c.act.node >= 0) {
    extra[n_extra++] = attr_float("clip_min", c.act.lo);
    extra[n_extra++] = attr_float("clip_max", c.act.hi);
  }
  static const char *const conv_attrs[] = {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad", NULL};
  if ((st = set_attrs(g, n, conv ? conv_attrs : NULL, extra, n_extra)) != ER_STATUS_OK) goto done;
  if ((st = make_qop(n, conv ? "QConv" : "QMatMul")) != ER_STATUS_OK) goto done;
  take_chain(qc, i, y, &c);
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

static er_status fuse_binary(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->g;
  er_node *n = &g->nodes[i];
  *done = false;
  bool add = is_op(n, "Add") || (is_op(n, "Sum") && n->n_inputs == 2), mul = is_op(n, "Mul");
  if (!(add || mul) || n->n_inputs != 2 || n->n_outputs != 1 || vtype(g, n->outputs[0]) != ER_DTYPE_FLOAT)
    return ER_STATUS_OK;
  if (n->version < 7) return ER_STATUS_OK; /* legacy broadcast attributes */
  qparam ap, bp;
  int32_t aq, bq;
  if (!dq_per_tensor(qc, producer(qc, n->inputs[0]), &ap, &aq) ||
      !dq_per_tensor(qc, producer(qc, n->inputs[1]), &bp, &bq))
    return ER_STATUS_OK;
  /* A constant operand of one value or one per channel makes the op a
   * (per-channel) lookup table, which fuse_lut builds and which chains of
   * such ops merge into. */
  for (int k = 0; k < 2; k++) {
    int32_t o = n->inputs[k], other = n->inputs[1 - k];
    const er_tensor *oi = &g->values[o].info, *xi = &g->values[other].info;
    if (!dq_of_consts(qc, o) || dq_of_consts(qc, other) || xi->rank < 0 || oi->rank < 0) continue;
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
  follow_output(qc, y, &c);
  if (c.q < 0) return ER_STATUS_OK;
  const char *base = n->name;
  int32_t azp, bzp, yzp;
  ER_CHECK(zp_value(qc, &ap, base, &azp));
  ER_CHECK(zp_value(qc, &bp, base, &bzp));
  ER_CHECK(zp_value(qc, &c.qp, base, &yzp));
  n = &g->nodes[i];
  int32_t ins[8] = {aq, ap.scale_v, azp, bq, bp.scale_v, bzp, c.qp.scale_v, yzp};
  ER_CHECK(set_inputs(g, n, ins, 8));
  int64_t lo, hi;
  chain_clamp(&c, &lo, &hi);
  er_attr extra[2] = {attr_int("qmin", lo), attr_int("qmax", hi)};
  ER_CHECK(set_attrs(g, n, NULL, extra, 2));
  ER_CHECK(make_qop(n, add ? "QAdd" : "QMul"));
  take_chain(qc, i, y, &c);
  *done = true;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Average pools                                                             */
/* ======================================================================== */

static er_status fuse_avgpool(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->g;
  er_node *n = &g->nodes[i];
  *done = false;
  bool global = is_op(n, "GlobalAveragePool");
  if (!(global || is_op(n, "AveragePool")) || n->n_outputs != 1 || n->n_inputs != 1) return ER_STATUS_OK;
  if (!global && n->version < 7) return ER_STATUS_OK;
  qparam xp;
  int32_t xq;
  if (!dq_per_tensor(qc, producer(qc, n->inputs[0]), &xp, &xq)) return ER_STATUS_OK;
  int32_t y = n->outputs[0];
  out_chain c;
  follow_output(qc, y, &c);
  if (c.q < 0 || c.act.node >= 0) return ER_STATUS_OK;
  float mult = (float)((double)xp.scale / c.qp.scale);
  if (!isfinite(mult)) return ER_STATUS_OK;
  const char *base = n->name;
  int32_t xzp, yzp, mult_v;
  ER_CHECK(zp_value(qc, &xp, base, &xzp));
  ER_CHECK(zp_value(qc, &c.qp, base, &yzp));
  ER_CHECK(new_floats(qc, base, &mult, 1, &mult_v));
  n = &g->nodes[i];
  int32_t ins[4] = {xq, xzp, mult_v, yzp};
  ER_CHECK(set_inputs(g, n, ins, 4));
  static const char *const pool_attrs[] = {"kernel_shape", "strides", "pads", "dilations", "auto_pad", "ceil_mode",
                                           "count_include_pad", NULL};
  er_attr extra[1] = {attr_int("global", 1)};
  ER_CHECK(set_attrs(g, n, global ? NULL : pool_attrs, extra, global ? 1 : 0));
  ER_CHECK(make_qop(n, "QAvgPool"));
  take_chain(qc, i, y, &c);
  *done = true;
  return ER_STATUS_OK;
}

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
static er_status eval_node(const qctx *qc, const er_node *n, er_tensor *const *in, er_tensor *out) {
  er_tensor *outp[1] = {out};
  er__tensor_set(out, ER_DTYPE_UNDEFINED, -1, NULL);
  er_kctx ctx = {n, n->n_inputs, in, 1, outp, false, NULL, qc->g, NULL};
  ER_CHECK(n->op->check(&ctx));
  ER_CHECK(er__tensor_alloc(out, 0));
  er_status st = n->op->run(&ctx);
  if (st != ER_STATUS_OK) er__tensor_release(out);
  return st;
}

/* Output of node n on the 256-value tensor `x` placed at every input that
 * reads value v (the other inputs are constants). */
/* Value id is a DequantizeLinear of constants. */
static bool dq_of_consts(const struct qctx *qc, int32_t id) {
  int32_t d = producer(qc, id);
  if (d < 0 || !is_op(&qc->g->nodes[d], "DequantizeLinear")) return false;
  const er_node *dn = &qc->g->nodes[d];
  for (int k = 0; k < dn->n_inputs; k++)
    if (dn->inputs[k] >= 0 && !const_of(qc->g, dn->inputs[k])) return false;
  return true;
}

/* Value id as a constant: a constant itself, or the output of a
 * DequantizeLinear of constants (onnxruntime's quantizer dequantizes
 * parameters it quantized, e.g. BatchNormalization's), evaluated into
 * *tmp (*owned set: the caller releases it). NULL when neither. */
static const er_tensor *const_input(const qctx *qc, int32_t id, er_tensor *tmp, bool *owned) {
  *owned = false;
  const er_tensor *c = const_of(qc->g, id);
  if (c) return c;
  int32_t d = producer(qc, id);
  if (d < 0 || !is_op(&qc->g->nodes[d], "DequantizeLinear") || qc->g->nodes[d].n_inputs > 3) return NULL;
  const er_node *dn = &qc->g->nodes[d];
  er_tensor *in[3] = {NULL, NULL, NULL};
  for (int k = 0; k < dn->n_inputs; k++) {
    if (dn->inputs[k] < 0) continue;
    in[k] = (er_tensor *)const_of(qc->g, dn->inputs[k]);
    if (!in[k]) return NULL;
  }
  if (eval_node(qc, dn, in, tmp) != ER_STATUS_OK) {
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
  if (st == ER_STATUS_OK) st = eval_node(qc, n, in, out);
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
  const er_graph *g = qc->g;
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
  ER_CHECK(alloc_tensor(&d, ER_DTYPE_FLOAT, xr, dims));
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
  st = alloc_tensor(table, yp->type, channels > 0 ? 2 : 1, channels > 0 ? td : td + 1);
  if (st == ER_STATUS_OK)
    for (int64_t k = 0; k < 256 * c_count; k++)
      ((uint8_t *)table->data)[k] = (uint8_t)quantize_value(yp, ((const float *)cur->data)[k]);
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
    const er_tensor *t = const_of(qc->g, id) ? const_of(qc->g, id) : &qc->g->values[id].info;
    int64_t n = er__tensor_count(t);
    if (n < 0) return false;
    if (n == 1) continue;
    if (c <= 0 || n != c || (rank != 3 && rank != 4)) return false;
    if (is_op(fn, "BatchNormalization")) {
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
static er_status fuse_lut(qctx *qc, int32_t q, bool *done) {
  er_graph *g = qc->g;
  *done = false;
  qparam qp, xp;
  if (!q_per_tensor(qc, q, &qp)) return ER_STATUS_OK;
  int32_t v = g->nodes[q].inputs[0], q_out = g->nodes[q].outputs[0];
  int32_t f = -1, dq = producer(qc, v), xq;
  int64_t channels = 0;
  int rank = 1;
  if (!dq_per_tensor(qc, dq, &xp, &xq)) {
    /* Q(f(DQ(x))): f is the sole reader of nothing in particular, but its
     * output must be read by this Q alone. */
    f = dq;
    if (f < 0 || !lut_op(&g->nodes[f]) || g->nodes[f].n_outputs != 1 || sole_consumer(qc, v) != q) return ER_STATUS_OK;
    const er_node *fn = &g->nodes[f];
    int32_t src = -1;
    for (int k = 0; k < fn->n_inputs; k++) {
      int32_t id = fn->inputs[k];
      if (id < 0 || const_of(g, id) || dq_of_consts(qc, id)) continue;
      if (src >= 0 && id != src) return ER_STATUS_OK; /* two variables */
      src = id;
    }
    dq = producer(qc, src);
    if (src < 0 || !dq_per_tensor(qc, dq, &xp, &xq)) return ER_STATUS_OK;
    /* f must keep the shape: constants may not broadcast it wider. */
    const er_tensor *si = &g->values[src].info, *so = &g->values[v].info;
    if (si->rank < 0 || si->rank != so->rank) return ER_STATUS_OK;
    for (int d = 0; d < si->rank; d++)
      if (si->dims[d] != so->dims[d]) return ER_STATUS_OK;
    if (is_op(fn, "BatchNormalization") && (fn->n_outputs != 1 || !attr_is(fn, "training_mode", 0)))
      return ER_STATUS_OK;
    if (!lut_channels(qc, fn, src, si->rank, si->rank >= 2 ? si->dims[1] : -1, &channels)) return ER_STATUS_OK;
    rank = si->rank;
  }
  if (qc->uses[q_out] >= 1000 && f < 0 && same_param(&xp, &qp)) return ER_STATUS_OK; /* keep a graph output's node */
  if (f < 0 && same_param(&xp, &qp)) {
    /* DQ -> Q with the same parameters is the identity. */
    replace_uses(qc, q_out, xq);
    qc->dead[q] = true;
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
  ER_CHECK(new_const(qc, g->nodes[q].name, &table, &table_v));
  er_node *n = &g->nodes[q];
  int32_t ins[2] = {xq, table_v};
  ER_CHECK(set_inputs(g, n, ins, 2));
  ER_CHECK(set_attrs(g, n, NULL, NULL, 0));
  ER_CHECK(make_qop(n, "QLut"));
  if (f >= 0) qc->dead[f] = true;
  *done = true;
  return ER_STATUS_OK;
}

/* QLut -> QLut (the first read by the second alone): one table, t2 after
 * t1, per channel when either is. Exact: both are exact tables. */
static er_status fuse_lut_chain(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->g;
  *done = false;
  er_node *n2 = &g->nodes[i];
  if (strcmp(n2->op_type, "QLut") != 0 || strcmp(n2->domain, ER_QFUSED_DOMAIN) != 0) return ER_STATUS_OK;
  int32_t mid = n2->inputs[0], p = producer(qc, mid);
  if (p < 0 || sole_consumer(qc, mid) != i) return ER_STATUS_OK;
  er_node *n1 = &g->nodes[p];
  if (strcmp(n1->op_type, "QLut") != 0 || strcmp(n1->domain, ER_QFUSED_DOMAIN) != 0) return ER_STATUS_OK;
  const er_tensor *t1 = const_of(g, n1->inputs[1]), *t2 = const_of(g, n2->inputs[1]);
  if (!t1 || !t2) return ER_STATUS_OK;
  int64_t c1 = er__tensor_count(t1) / 256, c2 = er__tensor_count(t2) / 256, c = c1 > c2 ? c1 : c2;
  if ((c1 != 1 && c1 != c) || (c2 != 1 && c2 != c)) return ER_STATUS_OK;
  /* The merged table is indexed like t1; t1's entries are values of the
   * middle type, which index t2 (int8 ones shifted by 128). */
  er_dtype mt = vtype(g, mid);
  uint8_t flip2 = mt == ER_DTYPE_INT8 ? 0x80 : 0;
  er_tensor t;
  int64_t dims[2] = {c, 256};
  ER_CHECK(alloc_tensor(&t, t2->dtype, c > 1 ? 2 : 1, c > 1 ? dims : dims + 1));
  const uint8_t *a = t1->data, *b = t2->data;
  uint8_t *d = t.data;
  for (int64_t ch = 0; ch < c; ch++)
    for (int k = 0; k < 256; k++) {
      /* Index k is input value k ^ flip1; t1 gives a value of mt. */
      uint8_t v = a[(c1 > 1 ? ch : 0) * 256 + k];
      d[ch * 256 + k] = b[(c2 > 1 ? ch : 0) * 256 + (uint8_t)(v ^ flip2)];
    }
  int32_t table_v;
  ER_CHECK(new_const(qc, g->nodes[i].name, &t, &table_v));
  n2 = &g->nodes[i];
  int32_t ins[2] = {g->nodes[p].inputs[0], table_v};
  ER_CHECK(set_inputs(g, n2, ins, 2));
  qc->dead[p] = true;
  *done = true;
  return ER_STATUS_OK;
}

/* QAdd / QMul of x and a QLut of the same x (SiLU, x * sigmoid(x), after
 * the passes above): the result is a function of one 8-bit value, so one
 * table, computed by running the QAdd / QMul reference kernel on all 256
 * values of x and their table entries. Exact: the same operations on the
 * same operands. Per-tensor tables only. */
static er_status fuse_self_binary(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->g;
  *done = false;
  er_node *n = &g->nodes[i];
  if ((strcmp(n->op_type, "QAdd") != 0 && strcmp(n->op_type, "QMul") != 0) ||
      strcmp(n->domain, ER_QFUSED_DOMAIN) != 0 || n->n_inputs != 8 || n->n_outputs != 1)
    return ER_STATUS_OK;
  for (int k = 0; k < 2; k++) {
    int32_t u = n->inputs[3 * k], x = n->inputs[3 * (1 - k)], p = producer(qc, u);
    if (p < 0 || x < 0) continue;
    const er_node *lut = &g->nodes[p];
    if (strcmp(lut->op_type, "QLut") != 0 || strcmp(lut->domain, ER_QFUSED_DOMAIN) != 0 || lut->inputs[0] != x)
      continue;
    const er_tensor *t = const_of(g, lut->inputs[1]);
    er_dtype xt = vtype(g, x);
    if (!t || er__tensor_count(t) != 256 || !is_q8(xt) || !is_q8(vtype(g, u))) continue;
    /* Every x value (table index j is the byte j ^ flip) and its entry. */
    const uint8_t flip = xt == ER_DTYPE_INT8 ? 0x80 : 0;
    const int64_t dims[1] = {256};
    er_tensor xs, us, out, table;
    ER_CHECK(alloc_tensor(&xs, xt, 1, dims));
    er_status st = alloc_tensor(&us, vtype(g, u), 1, dims);
    if (st != ER_STATUS_OK) {
      er__tensor_release(&xs);
      return st;
    }
    for (int j = 0; j < 256; j++) {
      ((uint8_t *)xs.data)[j] = (uint8_t)(j ^ flip);
      ((uint8_t *)us.data)[j] = ((const uint8_t *)t->data)[j];
    }
    er_tensor *in[8];
    for (int q = 0; q < 8; q++) in[q] = (er_tensor *)const_of(g, n->inputs[q]);
    in[3 * k] = &us;
    in[3 * (1 - k)] = &xs;
    bool params = true;
    for (int q = 0; q < 8; q++) params = params && (q % 3 == 0 || in[q]);
    st = params ? eval_node(qc, n, in, &out) : ER_STATUS_UNSUPPORTED;
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
    st = alloc_tensor(&table, out.dtype, 1, dims);
    if (st == ER_STATUS_OK) memcpy(table.data, out.data, 256);
    er__tensor_release(&out);
    ER_CHECK(st);
    int32_t table_v;
    bool lut_dead = sole_consumer(qc, u) == i;
    ER_CHECK(new_const(qc, g->nodes[i].name, &table, &table_v));
    n = &g->nodes[i];
    int32_t ins[2] = {x, table_v};
    ER_CHECK(set_inputs(g, n, ins, 2));
    ER_CHECK(set_attrs(g, n, NULL, NULL, 0));
    ER_CHECK(make_qop(n, "QLut"));
    if (lut_dead) qc->dead[p] = true;
    *done = true;
    return ER_STATUS_OK;
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Moving Q up and DQ down through data-movement ops                         */
/* ======================================================================== */

/* Ops whose output elements are input elements (or maxima of them), so
 * that a monotonic elementwise map commutes with them; only input 0 is
 * data, the others must be constants. */
static bool movement_op(const qctx *qc, const er_node *n) {
  static const char *const ops[] = {"Reshape",   "Flatten",      "Squeeze", "Unsqueeze",     "Transpose",
                                    "Identity",  "MaxPool",      "GlobalMaxPool", "Slice", "Expand",
                                    "Tile",      "DepthToSpace", "SpaceToDepth", "Resize", NULL};
  if (n->domain[0] != '\0' || n->n_inputs < 1 || n->inputs[0] < 0) return false;
  bool known = false;
  for (int k = 0; ops[k]; k++)
    if (strcmp(n->op_type, ops[k]) == 0) known = true;
  if (!known) return false;
  for (int k = 1; k < n->n_outputs; k++)
    if (n->outputs[k] >= 0) return false; /* MaxPool's Indices */
  for (int k = 1; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0 && !const_of(qc->g, n->inputs[k])) return false;
  if (is_op(n, "Resize")) {
    const er_attr *mode = er__node_attr(n, "mode");
    if (!mode || mode->type != ER_ATTR_STRING || strcmp(mode->s, "nearest") != 0) return false;
  }
  if (is_op(n, "MaxPool")) {
    /* Every window must hold an input element (pads smaller than the
     * kernel): an empty window is -inf in float but 0 in integers. */
    const er_attr *ks = er__node_attr(n, "kernel_shape"), *pads = er__node_attr(n, "pads");
    if (!ks || ks->type != ER_ATTR_INTS) return false;
    if (pads && pads->type == ER_ATTR_INTS)
      for (int64_t d = 0; d < pads->n; d++)
        if (pads->ints[d] >= ks->ints[d % ks->n]) return false;
  }
  return true;
}

/* Node p with input 0 of type t: its output info (when the op accepts t). */
static bool accepts_type(const qctx *qc, const er_node *p, er_dtype t, er_tensor *out) {
  er_tensor over = qc->g->values[p->inputs[0]].info, buf[16], *ptrs[16];
  if (p->n_inputs > 16) return false;
  over.dtype = t;
  input_infos(qc, p, 0, &over, buf, ptrs);
  return check_with(qc, p, ptrs, out) && out->dtype == t;
}

/* Q(P(u)) -> P(Q(u)). */
static er_status hoist_q(qctx *qc, int32_t q, bool *done) {
  er_graph *g = qc->g;
  *done = false;
  qparam qp;
  if (!q_per_tensor(qc, q, &qp)) return ER_STATUS_OK;
  int32_t v = g->nodes[q].inputs[0], p = producer(qc, v);
  if (p < 0 || sole_consumer(qc, v) != q || g->nodes[p].n_outputs < 1 || g->nodes[p].outputs[0] != v)
    return ER_STATUS_OK;
  er_node *pn = &g->nodes[p];
  if (is_op(pn, "Concat")) {
    /* Every input gets its own Q. */
    if (pn->n_inputs < 1 || pn->n_inputs > 64) return ER_STATUS_OK;
    for (int k = 0; k < pn->n_inputs; k++) {
      int32_t u = pn->inputs[k];
      if (u < 0 || vtype(g, u) != ER_DTYPE_FLOAT || const_of(g, u) || qc->uses[u] != 1) return ER_STATUS_OK;
    }
    int32_t q_out = g->nodes[q].outputs[0];
    int32_t new_in[64];
    for (int k = 0; k < g->nodes[p].n_inputs; k++) {
      int32_t u = g->nodes[p].inputs[k], t, idx;
      ER_CHECK(new_value(qc, g->nodes[q].name, qp.type, &g->values[u].info, &t));
      er_node proto = g->nodes[q];
      int32_t qin[3] = {u, g->nodes[q].inputs[1], g->nodes[q].n_inputs > 2 ? g->nodes[q].inputs[2] : -1};
      ER_CHECK(add_node(qc, &proto, qin, g->nodes[q].n_inputs, &t, 1, &idx));
      new_in[k] = t;
    }
    pn = &g->nodes[p];
    ER_CHECK(set_inputs(g, pn, new_in, pn->n_inputs));
    redirect_output(g, p, v, q_out);
    qc->dead[q] = true;
    *done = true;
    return ER_STATUS_OK;
  }
  if (!movement_op(qc, pn)) return ER_STATUS_OK;
  int32_t u = pn->inputs[0];
  if (vtype(g, u) != ER_DTYPE_FLOAT || qc->uses[u] != 1 || const_of(g, u)) return ER_STATUS_OK;
  er_tensor out;
  if (!accepts_type(qc, pn, qp.type, &out)) return ER_STATUS_OK;
  int32_t t, q_out = g->nodes[q].outputs[0];
  ER_CHECK(new_value(qc, g->nodes[q].name, qp.type, &g->values[u].info, &t));
  er_node *qn = &g->nodes[q];
  qn->inputs[0] = u;
  qn->outputs[0] = t;
  g->values[t].producer = q;
  pn = &g->nodes[p];
  pn->inputs[0] = t;
  pn->outputs[0] = q_out;
  g->values[q_out].producer = p;
  g->values[v].producer = -1;
  *done = true;
  return ER_STATUS_OK;
}

/* P(DQ(x)) -> DQ(P(x)) for one reader P of the DQ's output. */
static er_status sink_dq(qctx *qc, int32_t p, bool *done) {
  er_graph *g = qc->g;
  *done = false;
  er_node *pn = &g->nodes[p];
  if (pn->n_outputs < 1 || pn->outputs[0] < 0 || qc->uses[pn->outputs[0]] == 0) return ER_STATUS_OK;
  qparam xp;
  int32_t xq;
  if (is_op(pn, "Concat")) {
    if (pn->n_inputs < 1 || pn->n_inputs > 64 || pn->n_outputs != 1) return ER_STATUS_OK;
    /* Input 0's parameters are read before the loop, not on its first
     * trip: gcc (-Wmaybe-uninitialized under -fsanitize=thread) could not
     * see that the trip always runs, and every other input is compared
     * with them. */
    int32_t qs[64];
    qparam first;
    if (pn->inputs[0] < 0 || !dq_per_tensor(qc, producer(qc, pn->inputs[0]), &first, &qs[0])) return ER_STATUS_OK;
    for (int k = 1; k < pn->n_inputs; k++) {
      if (pn->inputs[k] < 0 || !dq_per_tensor(qc, producer(qc, pn->inputs[k]), &xp, &qs[k])) return ER_STATUS_OK;
      if (!same_param(&first, &xp)) return ER_STATUS_OK;
    }
    er_tensor over = g->values[pn->outputs[0]].info;
    over.dtype = first.type;
    int32_t d0 = producer(qc, pn->inputs[0]), t, idx, y = pn->outputs[0];
    ER_CHECK(new_value(qc, pn->name, first.type, &over, &t));
    pn = &g->nodes[p];
    ER_CHECK(set_inputs(g, pn, qs, pn->n_inputs));
    er_node proto = g->nodes[d0];
    int32_t din[3] = {t, proto.inputs[1], proto.n_inputs > 2 ? proto.inputs[2] : -1};
    redirect_output(g, p, y, t);
    ER_CHECK(add_node(qc, &proto, din, proto.n_inputs, &y, 1, &idx));
    *done = true;
    return ER_STATUS_OK;
  }
  if (!movement_op(qc, pn)) return ER_STATUS_OK;
  int32_t d = producer(qc, pn->inputs[0]);
  if (!dq_per_tensor(qc, d, &xp, &xq)) return ER_STATUS_OK;
  for (int k = 1; k < pn->n_inputs; k++)
    if (pn->inputs[k] == pn->inputs[0]) return ER_STATUS_OK;
  er_tensor out;
  if (!accepts_type(qc, pn, xp.type, &out)) return ER_STATUS_OK;
  int32_t y = pn->outputs[0], t, idx;
  ER_CHECK(new_value(qc, pn->name, xp.type, &out, &t));
  pn = &g->nodes[p];
  pn->inputs[0] = xq;
  redirect_output(g, p, y, t);
  if (qc->uses[g->nodes[d].outputs[0]] == 1) {
    /* The DQ moves below P. Its old output, which only P read, is made by
     * no one now: leaving it naming the DQ left a producer index that
     * outlived the node list's compaction (fuzz finding stale-producer). */
    er_node *dn = &g->nodes[d];
    g->values[dn->outputs[0]].producer = -1;
    dn->inputs[0] = t;
    dn->outputs[0] = y;
    g->values[y].producer = d;
  } else {
    er_node proto = g->nodes[d];
    int32_t din[3] = {t, proto.inputs[1], proto.n_inputs > 2 ? proto.inputs[2] : -1};
    ER_CHECK(add_node(qc, &proto, din, proto.n_inputs, &y, 1, &idx));
  }
  *done = true;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* int4 block-wise weights                                                   */
/* ======================================================================== */

/* DQ(W int4/uint4 const, blocked along K) -> MatMul (W [K, N], axis 0) or
 * Gemm with transB (W [N, K], axis 1): QBlockMatMul. */
static er_status fuse_block(qctx *qc, int32_t i, bool *done) {
  er_graph *g = qc->g;
  er_node *n = &g->nodes[i];
  *done = false;
  bool mm = is_op(n, "MatMul"), gemm = is_op(n, "Gemm");
  if (!(mm || gemm) || n->n_inputs < 2 || n->n_outputs != 1) return ER_STATUS_OK;
  if (vtype(g, n->inputs[0]) != ER_DTYPE_FLOAT || vtype(g, n->outputs[0]) != ER_DTYPE_FLOAT) return ER_STATUS_OK;
  int32_t d = producer(qc, n->inputs[1]);
  if (d < 0 || !is_op(&g->nodes[d], "DequantizeLinear")) return ER_STATUS_OK;
  const er_node *dn = &g->nodes[d];
  const er_attr *bsa = er__node_attr(dn, "block_size"), *axa = er__node_attr(dn, "axis");
  if (!bsa || bsa->type != ER_ATTR_INT || bsa->i < 1 || dn->n_inputs < 2) return ER_STATUS_OK;
  const er_tensor *w = const_of(g, dn->inputs[0]), *s = const_of(g, dn->inputs[1]);
  const er_tensor *z = dn->n_inputs > 2 && dn->inputs[2] >= 0 ? const_of(g, dn->inputs[2]) : NULL;
  if (!w || w->rank != 2 || !s || s->dtype != ER_DTYPE_FLOAT || (dn->n_inputs > 2 && dn->inputs[2] >= 0 && !z))
    return ER_STATUS_OK;
  if (w->dtype != ER_DTYPE_INT4 && w->dtype != ER_DTYPE_UINT4 && !is_q8(w->dtype)) return ER_STATUS_OK;
  if (vtype(g, dn->outputs[0]) != ER_DTYPE_FLOAT) return ER_STATUS_OK;
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
      const er_tensor *c = const_of(g, n->inputs[2]);
      int64_t nn = w->dims[trans ? 0 : 1];
      if (!c || c->dtype != ER_DTYPE_FLOAT || c->rank != 1 || c->dims[0] != nn) return ER_STATUS_OK;
      bias = n->inputs[2];
    }
    if (g->values[n->inputs[0]].info.rank != 2) return ER_STATUS_OK;
  }
  if (axis != (trans ? 1 : 0)) return ER_STATUS_OK; /* blocks must run along K */
  n = &g->nodes[i];
  int32_t ins[5] = {n->inputs[0], dn->inputs[0], dn->inputs[1], z ? dn->inputs[2] : -1, bias};
  er_attr extra[2] = {attr_int("block_size", bsa->i), attr_int("transB", trans)};
  /* Its check validates the layout; refuse quietly when it does not hold. */
  er_node trial = *n;
  trial.n_attrs = 0;
  trial.attrs = NULL;
  ER_CHECK(set_inputs(g, &trial, ins, bias >= 0 ? 5 : 4));
  ER_CHECK(set_attrs(g, &trial, NULL, extra, 2));
  ER_CHECK(make_qop(&trial, "QBlockMatMul"));
  er_tensor buf[5], *ptrs[5], out;
  input_infos(qc, &trial, -1, NULL, buf, ptrs);
  if (!check_with(qc, &trial, ptrs, &out)) return ER_STATUS_OK;
  g->nodes[i] = trial;
  *done = true;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Driver                                                                    */
/* ======================================================================== */

typedef er_status (*rewrite_fn)(qctx *qc, int32_t i, bool *done);

/* Marks nodes none of whose outputs are read (the DQs a rewrite left
 * behind), so that the next rewrites see true reader counts. */
static void prune(qctx *qc) {
  er_graph *g = qc->g;
  for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
    if (qc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    bool used = n->n_outputs == 0;
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0 && qc->uses[n->outputs[k]] > 0) used = true;
    if (used || node_has_graphs(n)) continue;
    qc->dead[i] = true;
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) qc->uses[n->inputs[k]]--;
  }
}

static er_status sweep(qctx *qc, rewrite_fn fn) {
  for (int32_t i = 0; i < qc->g->n_nodes; i++) {
    if (qc->dead[i]) continue;
    bool done = false;
    ER_CHECK(fn(qc, i, &done));
    if (done) {
      qc->changed++;
      ER_CHECK(count_uses(qc));
      prune(qc);
    }
  }
  return ER_STATUS_OK;
}

/* Folds DequantizeLinear nodes whose inputs are all constants (weights the
 * pass did not fuse): their outputs become constants. */
static er_status fold_dq(qctx *qc, int *folded) {
  er_graph *g = qc->g;
  *folded = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (qc->dead[i]) continue;
    er_node *n = &g->nodes[i];
    if (!is_op(n, "DequantizeLinear") || n->n_outputs != 1 || n->outputs[0] < 0) continue;
    if (qc->uses[n->outputs[0]] == 0) continue; /* removed below; never expanded */
    er_tensor *in[3] = {NULL, NULL, NULL};
    bool all = n->n_inputs <= 3;
    for (int k = 0; k < n->n_inputs && all; k++) {
      if (n->inputs[k] < 0) continue;
      in[k] = (er_tensor *)const_of(g, n->inputs[k]);
      if (!in[k]) all = false;
    }
    if (!all) continue;
    er_tensor out;
    er_status st = eval_node(qc, n, in, &out);
    if (st != ER_STATUS_OK) {
      er__error_clear();
      continue; /* left to run (and fail) as written */
    }
    er_tensor *heap = er__arena_alloc(graph_arena(g), sizeof *heap);
    if (!heap) {
      er__tensor_release(&out);
      return ER_STATUS_OUT_OF_MEMORY;
    }
    *heap = out;
    ER_CHECK(own_tensor(g, heap));
    er_value *v = &g->values[n->outputs[0]];
    v->kind = ER_VALUE_CONSTANT;
    v->constant = heap;
    v->producer = -1;
    er__tensor_set(&v->info, heap->dtype, heap->rank, heap->dims);
    qc->dead[i] = true;
    (*folded)++;
  }
  return ER_STATUS_OK;
}

/* Drops dead nodes and nodes whose outputs nobody reads (backwards), keeping
 * the order. */
static void compact(qctx *qc) {
  er_graph *g = qc->g;
  for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
    if (qc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    bool used = false;
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0 && qc->uses[n->outputs[k]] > 0) used = true;
    if (!used && n->n_outputs > 0) {
      qc->dead[i] = true;
      for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0) qc->uses[n->inputs[k]]--;
    }
  }
  er__graph_remove_nodes(g, qc->dead);
  memset(qc->dead, 0, (size_t)qc->ncap);
}

er_status er__graph_qdq_fuse(er_graph *g) {
  bool any = false;
  for (int32_t i = 0; i < g->n_nodes && !any; i++)
    any = is_op(&g->nodes[i], "DequantizeLinear") || is_op(&g->nodes[i], "QuantizeLinear");
  if (!any) return ER_STATUS_OK;
  qctx qc;
  memset(&qc, 0, sizeof qc);
  qc.g = g;
  qc.ncap = g->n_nodes;
  qc.dead = calloc((size_t)qc.ncap + 1, 1);
  er_status st = qc.dead ? count_uses(&qc) : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory in the QDQ pass");
  for (int round = 0; round < QDQ_MAX_ROUNDS && st == ER_STATUS_OK; round++) {
    int before = qc.changed;
    /* Movement to a fixpoint first, so that groups see their DQs and Qs
     * next to them. */
    for (int r2 = 0; r2 < QDQ_MAX_ROUNDS && st == ER_STATUS_OK; r2++) {
      int moved = qc.changed;
      st = sweep(&qc, hoist_q);
      if (st == ER_STATUS_OK) st = sweep(&qc, sink_dq);
      if (qc.changed == moved) break;
    }
    static const rewrite_fn groups[] = {fuse_gemm,      fuse_binary,      fuse_avgpool, fuse_lut,
                                        fuse_lut_chain, fuse_self_binary, fuse_block};
    for (size_t r = 0; r < ER_ARRAY_LEN(groups) && st == ER_STATUS_OK; r++) st = sweep(&qc, groups[r]);
    if (qc.changed == before) break;
  }
  /* Last, GEMMs whose result stays float (no Q follows) still multiply in
   * integers. */
  qc.float_out = true;
  if (st == ER_STATUS_OK) st = sweep(&qc, fuse_gemm);
  int folded = 0;
  if (st == ER_STATUS_OK) st = fold_dq(&qc, &folded);
  if (st == ER_STATUS_OK && (qc.changed || folded)) {
    st = count_uses(&qc);
    if (st == ER_STATUS_OK) compact(&qc);
    /* Rewrites add nodes at the end: restore a topological order, then
     * fold what became constant and recompute every value's type and
     * shape once. */
    if (st == ER_STATUS_OK) st = er__graph_validate(g);
    if (st == ER_STATUS_OK) st = er__graph_infer(g, true);
  }
  free(qc.uses);
  free(qc.dead);
  if (st != ER_STATUS_OK) er__error_prefix("QDQ pass over graph '%s'", g->name);
  return st;
}
