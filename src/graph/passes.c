/* passes.c - graph optimization: patterns of standard ops become fewer,
 * larger nodes that optimized kernels run in one pass over memory. The
 * basic passes run at model load and keep standard ops (so accelerators and
 * NPU plugins see the model's operators); the fusion passes make edgerun's
 * own com.edgerun ops and run per session, on the session's copy of the
 * graph, when every node is on the CPU (see ir.h).
 *
 *   identity       Identity / inference Dropout removed
 *   conv_bn        Conv + BatchNormalization folded into the Conv weights
 *   matmul_bias    MatMul + Add(bias)           -> FusedMatMul
 *   gemm/conv act  Conv/Gemm/FusedMatMul + activation -> fused activation
 *                  (Relu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish,
 *                   LeakyRelu, x*Sigmoid(x), Gelu and its Erf and tanh
 *                   patterns)
 *   conv_add       Conv + Add(residual) [+ activation] -> FusedConv
 *   layernorm      ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div[/Mul/Add]
 *                  -> LayerNormalization
 *   gelu           0.5*x*(1+Erf(x/sqrt 2)) -> Gelu
 *                  0.5*x*(1+Tanh(sqrt(2/pi)*(x+0.044715*x^3)))
 *                  -> Gelu(approximate="tanh")
 *   hardswish      x*Clip(x+3,0,6)/6, x*HardSigmoid(x) -> HardSwish
 *   bn_affine      BatchNormalization + per-channel Mul/Add -> one
 *                  BatchNormalization
 *   attention      MatMul/[Div|Mul]/[Add]/Softmax/MatMul (with the head
 *                  split and merge Transposes/Reshapes when present)
 *                  -> Attention
 *   transpose      Transpose o Transpose composed; identity perms removed
 *   reshape        Reshape o Reshape -> one Reshape
 *   slice          Slice o Slice on disjoint axes -> one Slice
 *
 * Every rewrite requires the values it makes disappear to have no other
 * reader and not to be graph outputs, so what a caller can observe never
 * changes. Fused ops' reference kernels run the replaced ops' references,
 * so outputs stay within float rounding of the unfused graph (the tests in
 * tests/unit/test-passes.c compare both). Subgraphs are left as written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/graph.h"
#include "ops/fused.h"

typedef struct pass_ctx {
  er_graph *g;
  int32_t *uses;    /* [cap] readers (nodes and graph outputs) per value */
  size_t cap;
  bool *dead;       /* [n_nodes] nodes removed by a rewrite */
  int changed;
} pass_ctx;

/* ---- helpers ------------------------------------------------------------- */

static bool is_op(const er_node *n, const char *op) {
  return n->domain[0] == '\0' && strcmp(n->op_type, op) == 0;
}

static void count_uses(pass_ctx *pc) {
  er_graph *g = pc->g;
  ER_ASSERT((size_t)g->n_values <= pc->cap);
  memset(pc->uses, 0, (size_t)g->n_values * sizeof *pc->uses);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) pc->uses[n->inputs[k]]++;
    /* Subgraph captures count as uses; such values are never folded away. */
    er__node_count_captures(g, n, pc->uses, 1000);
  }
  for (int32_t k = 0; k < g->n_outputs; k++) pc->uses[g->outputs[k]] += 1000;
}

/* The single node reading value v (and only once), or -1. */
static int32_t sole_consumer(const pass_ctx *pc, int32_t v) {
  if (v < 0 || pc->uses[v] != 1) return -1;
  const er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == v) return i;
  }
  return -1;
}

static const er_tensor *const_of(const er_graph *g, int32_t v) { return er__graph_const(g, v); }

/* A float32 scalar-like constant (one element) or NAN. */
static double const_scalar(const er_graph *g, int32_t v) {
  const er_tensor *t = const_of(g, v);
  if (!t || er__tensor_count(t) != 1 || !er__dtype_is_float(t->dtype)) return NAN;
  return er__load_f64(t->data, t->dtype, 0);
}

static bool is_float32(const er_graph *g, int32_t v) {
  return v >= 0 && g->values[v].info.dtype == ER_DTYPE_FLOAT;
}

/* Makes the value `from` disappear: the node producing it now produces
 * `to`'s slot instead (used when the consumer of `from` is removed and its
 * output `to` should come straight from `from`'s producer). */
static void redirect_output(er_graph *g, int32_t producer, int32_t from, int32_t to) {
  er_node *p = &g->nodes[producer];
  for (int k = 0; k < p->n_outputs; k++)
    if (p->outputs[k] == from) p->outputs[k] = to;
  g->values[to].producer = producer;
  g->values[from].producer = -1;
}

er_status er__graph_new_const(er_graph *g, const char *base, er_tensor *t, int32_t *id_out) {
  char name[256];
  for (int k = 0;; k++) {
    snprintf(name, sizeof name, "%s/er_folded%s%d", base, k ? "_" : "", k);
    if (er__graph_find(g, name) < 0) break;
  }
  char *copy = er__arena_strdup(g->arena, name);
  if (!copy) return ER_STATUS_OUT_OF_MEMORY;
  er_tensor *heap = er__arena_alloc(g->arena, sizeof *heap);
  if (!heap) return ER_STATUS_OUT_OF_MEMORY;
  *heap = *t;
  ER_CHECK(er__owned_add(g->owned, heap));
  int32_t id;
  ER_CHECK(er__graph_add_value(g, copy, &id));
  er_value *v = &g->values[id];
  v->kind = ER_VALUE_CONSTANT;
  v->constant = heap;
  er__tensor_set(&v->info, heap->dtype, heap->rank, heap->dims);
  *id_out = id;
  return ER_STATUS_OK;
}

/* Appends attributes to a node (arena copy). */
static er_status add_attrs(er_graph *g, er_node *n, const er_attr *extra, int n_extra) {
  er_attr *attrs = er__arena_array(g->arena, (size_t)(n->n_attrs + n_extra) + 1, sizeof *attrs);
  if (!attrs) return ER_STATUS_OUT_OF_MEMORY;
  int w = 0;
  for (int i = 0; i < n->n_attrs; i++) {
    bool replaced = false;
    for (int j = 0; j < n_extra; j++)
      if (strcmp(n->attrs[i].name, extra[j].name) == 0) replaced = true;
    if (!replaced) attrs[w++] = n->attrs[i];
  }
  for (int j = 0; j < n_extra; j++) attrs[w++] = extra[j];
  n->attrs = attrs;
  n->n_attrs = w;
  return ER_STATUS_OK;
}

/* Sets a Transpose's perm (the ints must live in the graph's arena). */
static er_status set_perm(er_graph *g, er_node *n, int64_t *perm, int64_t rank) {
  er_attr a;
  memset(&a, 0, sizeof a);
  a.name = "perm";
  a.type = ER_ATTR_INTS;
  a.ints = perm;
  a.n = rank;
  return add_attrs(g, n, &a, 1);
}

static er_status set_inputs(er_graph *g, er_node *n, const int32_t *ids, int count) {
  int32_t *in = er__arena_array(g->arena, (size_t)count + 1, sizeof *in);
  if (!in) return ER_STATUS_OUT_OF_MEMORY;
  memcpy(in, ids, (size_t)count * sizeof *in);
  n->inputs = in;
  n->n_inputs = count;
  return ER_STATUS_OK;
}

/* Turns node n into the fused op `op` of domain com.edgerun. */
static er_status make_fused(er_node *n, const char *op) {
  const er_op_def *def = er__op_find(ER_FUSED_DOMAIN, op, 1);
  if (!def) return er__error(ER_STATUS_INTERNAL, "fused op %s is missing", op);
  n->op_type = op;
  n->domain = ER_FUSED_DOMAIN;
  n->version = 1;
  n->op = def;
  return ER_STATUS_OK;
}

static er_status make_standard(er_node *n, const char *op, int version) {
  const er_op_def *def = er__op_find("", op, version);
  if (!def) return er__error(ER_STATUS_INTERNAL, "op %s version %d is missing", op, version);
  n->op_type = op;
  n->domain = "";
  n->version = version;
  n->op = def;
  return ER_STATUS_OK;
}

/* The activation node `consumer` applies, if it is one fusion supports;
 * *out_value receives its output. (x * Sigmoid(x) and GELU from
 * primitives are matched by silu_of and gelu_of.) */
static bool activation_of(const pass_ctx *pc, int32_t consumer, er_activation *act, int32_t *out_value) {
  const er_graph *g = pc->g;
  const er_node *n = &g->nodes[consumer];
  memset(act, 0, sizeof *act);
  if (n->n_outputs != 1 || n->outputs[0] < 0) return false;
  *out_value = n->outputs[0];
  if (is_op(n, "Relu")) {
    act->kind = ER_ACT_RELU;
    return true;
  }
  if (is_op(n, "Sigmoid")) {
    act->kind = ER_ACT_SIGMOID;
    return true;
  }
  if (is_op(n, "Tanh")) {
    act->kind = ER_ACT_TANH;
    return true;
  }
  if (is_op(n, "HardSwish")) {
    act->kind = ER_ACT_HARDSWISH;
    return true;
  }
  if (is_op(n, "Gelu")) {
    const er_attr *a = er__node_attr(n, "approximate");
    act->kind = a && a->type == ER_ATTR_STRING && strcmp(a->s, "tanh") == 0 ? ER_ACT_GELU_TANH : ER_ACT_GELU;
    return true;
  }
  if (is_op(n, "LeakyRelu")) {
    const er_attr *a = er__node_attr(n, "alpha");
    act->kind = ER_ACT_LEAKYRELU;
    act->p[0] = a && a->type == ER_ATTR_FLOAT ? a->f : 0.01f;
    return true;
  }
  if (is_op(n, "HardSigmoid")) {
    const er_attr *a = er__node_attr(n, "alpha"), *b = er__node_attr(n, "beta");
    act->kind = ER_ACT_HARDSIGMOID;
    act->p[0] = a && a->type == ER_ATTR_FLOAT ? a->f : 0.2f;
    act->p[1] = b && b->type == ER_ATTR_FLOAT ? b->f : 0.5f;
    return true;
  }
  if (is_op(n, "Clip")) {
    double lo = -INFINITY, hi = INFINITY;
    if (n->version < 11) {
      const er_attr *a = er__node_attr(n, "min"), *b = er__node_attr(n, "max");
      if (a && a->type == ER_ATTR_FLOAT) lo = a->f;
      if (b && b->type == ER_ATTR_FLOAT) hi = b->f;
    } else {
      if (n->n_inputs > 1 && n->inputs[1] >= 0 && isnan(lo = const_scalar(g, n->inputs[1]))) return false;
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && isnan(hi = const_scalar(g, n->inputs[2]))) return false;
    }
    act->kind = ER_ACT_CLIP;
    act->p[0] = isinf(lo) ? -INFINITY : (float)lo;
    act->p[1] = isinf(hi) ? INFINITY : (float)hi;
    return true;
  }
  return false;
}

/* x * Sigmoid(x): value x read exactly by a Sigmoid s and a Mul m with
 * inputs (x, s(x)) in either order. Returns the Mul and the Sigmoid. */
static bool silu_of(const pass_ctx *pc, int32_t x, int32_t *mul_out, int32_t *sig_out) {
  const er_graph *g = pc->g;
  if (pc->uses[x] != 2) return false;
  int32_t sig = -1, mul = -1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    bool reads = false;
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == x) reads = true;
    if (!reads) continue;
    if (is_op(n, "Sigmoid")) sig = i;
    else if (is_op(n, "Mul") && n->n_inputs == 2) mul = i;
    else return false;
  }
  if (sig < 0 || mul < 0) return false;
  int32_t s_out = g->nodes[sig].outputs[0];
  const er_node *m = &g->nodes[mul];
  if (pc->uses[s_out] != 1) return false;
  if (!((m->inputs[0] == x && m->inputs[1] == s_out) || (m->inputs[1] == x && m->inputs[0] == s_out)))
    return false;
  *mul_out = mul;
  *sig_out = sig;
  return true;
}

/* Value v is `Mul(a, b)`'s operand: returns the other operand, or -1. */
static int32_t mul_other(const er_node *m, int32_t v) {
  if (!is_op(m, "Mul") || m->n_inputs != 2) return -1;
  if (m->inputs[0] == v) return m->inputs[1];
  if (m->inputs[1] == v) return m->inputs[0];
  return -1;
}

/* GELU from primitives, as exporters write 0.5 * x * (1 + erf(x / sqrt 2)):
 * x feeds D = Div(x, sqrt 2) (or Mul(x, 1/sqrt 2)) and one Mul; D -> Erf ->
 * A = Add(., 1); the two Muls with x and 0.5 then combine in one of three
 * orders: (x * A) * 0.5, x * (A * 0.5), or (x * 0.5) * A. On success
 * nodes[] holds the five nodes and *out the final value. */
static bool gelu_of(const pass_ctx *pc, int32_t x, int32_t nodes[5], int32_t *out) {
  const er_graph *g = pc->g;
  if (pc->uses[x] != 2) return false;
  int32_t div = -1, mulx = -1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    if (n->n_inputs < 2) continue;
    if (is_op(n, "Div") && n->inputs[0] == x && fabs(const_scalar(g, n->inputs[1]) - sqrt(2.0)) < 1e-4)
      div = i;
    else if (is_op(n, "Mul") && n->inputs[0] == x && fabs(const_scalar(g, n->inputs[1]) - sqrt(0.5)) < 1e-4)
      div = i;
    else if (mul_other(n, x) >= 0)
      mulx = i;
  }
  if (div < 0 || mulx < 0) return false;
  int32_t erf = sole_consumer(pc, g->nodes[div].outputs[0]);
  if (erf < 0 || !is_op(&g->nodes[erf], "Erf")) return false;
  int32_t e = g->nodes[erf].outputs[0];
  int32_t add = sole_consumer(pc, e);
  if (add < 0 || !is_op(&g->nodes[add], "Add")) return false;
  const er_node *an = &g->nodes[add];
  if (fabs(const_scalar(g, an->inputs[0] == e ? an->inputs[1] : an->inputs[0]) - 1.0) > 1e-6) return false;
  int32_t a = an->outputs[0];
  const er_node *mx = &g->nodes[mulx];
  int32_t mx_other = mul_other(mx, x), last = -1;
  if (mx_other == a) {
    /* (x * A) * 0.5 */
    last = sole_consumer(pc, mx->outputs[0]);
    if (last < 0 || fabs(const_scalar(g, mul_other(&g->nodes[last], mx->outputs[0])) - 0.5) > 1e-6) return false;
  } else if (fabs(const_scalar(g, mx_other) - 0.5) < 1e-6) {
    /* (x * 0.5) * A */
    last = sole_consumer(pc, mx->outputs[0]);
    if (last < 0 || mul_other(&g->nodes[last], mx->outputs[0]) != a || pc->uses[a] != 1) return false;
  } else {
    /* x * (A * 0.5): mulx reads the half-product H = Mul(A, 0.5). */
    int32_t h = sole_consumer(pc, a);
    if (h < 0 || fabs(const_scalar(g, mul_other(&g->nodes[h], a)) - 0.5) > 1e-6) return false;
    if (mx_other != g->nodes[h].outputs[0]) return false;
    nodes[0] = div, nodes[1] = erf, nodes[2] = add, nodes[3] = h, nodes[4] = mulx;
    *out = mx->outputs[0];
    return true;
  }
  nodes[0] = div, nodes[1] = erf, nodes[2] = add, nodes[3] = mulx, nodes[4] = last;
  *out = g->nodes[last].outputs[0];
  return true;
}

/* GELU's tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as
 * exporters write it (PyTorch's approximate='tanh' below opset 20, JAX's
 * and TensorFlow's approximate GELU): each product may be a tree of Muls
 * in any order and grouping, x^3 a Pow(x, 3) or repeated factors. */
#define GELU_TANH_MAX_NODES 16

typedef struct mul_tree {
  int nx;          /* factors that are x (Pow(x, 3) counts 3) */
  double k;        /* product of the constant factors */
  int32_t other;   /* the one factor that is neither, or -1 */
  int n_other;
  int32_t nodes[GELU_TANH_MAX_NODES];
  int n_nodes;
} mul_tree;

/* Adds the factors of value v to t: v itself when it is x, a scalar
 * constant or (root, or read only here) the output of a Mul or of
 * Pow(x, 3); anything else is "the other" factor. */
static bool mul_factors(const pass_ctx *pc, int32_t v, int32_t x, bool root, mul_tree *t, int depth) {
  const er_graph *g = pc->g;
  if (v == x) {
    t->nx++;
    return true;
  }
  double c = const_scalar(g, v);
  if (!isnan(c)) {
    t->k *= c;
    return true;
  }
  int32_t p = v >= 0 ? g->values[v].producer : -1;
  const er_node *n = p >= 0 && !pc->dead[p] ? &g->nodes[p] : NULL;
  bool single = root || pc->uses[v] == 1;
  if (n && single && depth > 0 && t->n_nodes < GELU_TANH_MAX_NODES) {
    if (is_op(n, "Mul") && n->n_inputs == 2) {
      t->nodes[t->n_nodes++] = p;
      return mul_factors(pc, n->inputs[0], x, false, t, depth - 1) &&
             mul_factors(pc, n->inputs[1], x, false, t, depth - 1);
    }
    if (is_op(n, "Pow") && n->n_inputs == 2 && n->inputs[0] == x && const_scalar(g, n->inputs[1]) == 3.0) {
      t->nodes[t->n_nodes++] = p;
      t->nx += 3;
      return true;
    }
  }
  if (t->n_other > 0) return false;
  t->other = v;
  t->n_other = 1;
  return true;
}

static bool near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b); }

/* The tanh GELU around Tanh node `ti`: on success *x_out is its input x,
 * nodes[] every node of the pattern (the last one produces *out). */
static bool gelu_tanh_of(const pass_ctx *pc, int32_t ti, int32_t *x_out, int32_t *nodes, int *n_nodes,
                         int32_t *out) {
  const er_graph *g = pc->g;
  const er_node *tn = &g->nodes[ti];
  if (pc->dead[ti] || !is_op(tn, "Tanh") || tn->n_inputs != 1 || pc->uses[tn->inputs[0]] != 1) return false;
  /* u = sqrt(2/pi) * S */
  mul_tree tu = {0, 1.0, -1, 0, {0}, 0};
  if (!mul_factors(pc, tn->inputs[0], -1, true, &tu, 4) || tu.n_nodes == 0 || tu.n_other != 1 ||
      !near(tu.k, 0.7978845608028654, 1e-4))
    return false;
  /* S = x + 0.044715 x^3 */
  int32_t sv = tu.other, sp = g->values[sv].producer;
  if (sp < 0 || pc->dead[sp] || pc->uses[sv] != 1 || !is_op(&g->nodes[sp], "Add") || g->nodes[sp].n_inputs != 2)
    return false;
  mul_tree tc = {0, 1.0, -1, 0, {0}, 0};
  int32_t x = -1;
  for (int side = 0; side < 2 && x < 0; side++) {
    int32_t cand = g->nodes[sp].inputs[side], cube = g->nodes[sp].inputs[1 - side];
    mul_tree t = {0, 1.0, -1, 0, {0}, 0};
    if (pc->uses[cube] == 1 && mul_factors(pc, cube, cand, true, &t, 4) && t.n_nodes > 0 && t.nx == 3 &&
        t.n_other == 0 && near(t.k, 0.044715, 1e-4)) {
      x = cand;
      tc = t;
    }
  }
  if (x < 0) return false;
  /* A = 1 + tanh(u) */
  int32_t tv = tn->outputs[0], ai = sole_consumer(pc, tv);
  if (ai < 0 || !is_op(&g->nodes[ai], "Add") || g->nodes[ai].n_inputs != 2) return false;
  const er_node *an = &g->nodes[ai];
  if (const_scalar(g, an->inputs[0] == tv ? an->inputs[1] : an->inputs[0]) != 1.0) return false;
  int32_t a = an->outputs[0];
  /* y = 0.5 * x * A: the product tree rooted one or two Muls above A. */
  int32_t m1 = sole_consumer(pc, a);
  if (m1 < 0 || !is_op(&g->nodes[m1], "Mul")) return false;
  int32_t m2 = sole_consumer(pc, g->nodes[m1].outputs[0]);
  int32_t roots[2] = {m2 >= 0 && is_op(&g->nodes[m2], "Mul") ? m2 : -1, m1};
  mul_tree ty = {0, 1.0, -1, 0, {0}, 0};
  int32_t root = -1;
  for (int r = 0; r < 2 && root < 0; r++) {
    if (roots[r] < 0) continue;
    mul_tree t = {0, 1.0, -1, 0, {0}, 0};
    if (mul_factors(pc, g->nodes[roots[r]].outputs[0], x, true, &t, 3) && t.nx == 1 && t.n_other == 1 &&
        t.other == a && near(t.k, 0.5, 1e-6)) {
      root = roots[r];
      ty = t;
    }
  }
  if (root < 0) return false;
  int n = 0;
  const mul_tree *trees[3] = {&tu, &tc, &ty};
  for (int k = 0; k < 3; k++)
    for (int j = 0; j < trees[k]->n_nodes; j++) nodes[n++] = trees[k]->nodes[j];
  nodes[n++] = sp;
  nodes[n++] = ti;
  nodes[n++] = ai;
  /* Each node once (a tree never holds another's node: every value
   * between them is read once). */
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (nodes[i] == nodes[j]) return false;
  *x_out = x;
  *n_nodes = n;
  *out = g->nodes[root].outputs[0];
  return true;
}

/* How many inputs of nodes[0..n) read v. */
static int reads_of(const er_graph *g, const int32_t *nodes, int n, int32_t v) {
  int c = 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < g->nodes[nodes[i]].n_inputs; k++)
      if (g->nodes[nodes[i]].inputs[k] == v) c++;
  return c;
}

/* ---- passes ---------------------------------------------------------------- */

static void pass_identity(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *n = &g->nodes[i];
    bool drop = is_op(n, "Identity") ||
                (is_op(n, "Dropout") && (n->n_outputs < 2 || n->outputs[1] < 0 || pc->uses[n->outputs[1]] == 0) &&
                 (n->n_inputs < 3 || n->inputs[2] < 0));
    if (!drop || n->n_inputs < 1 || n->inputs[0] < 0 || n->outputs[0] < 0) continue;
    int32_t in = n->inputs[0], out = n->outputs[0];
    if (pc->uses[out] >= 1000) continue; /* graph output or captured */
    /* Readers of out read in instead. */
    for (int32_t j = 0; j < g->n_nodes; j++) {
      if (pc->dead[j]) continue;
      er_node *m = &g->nodes[j];
      for (int k = 0; k < m->n_inputs; k++)
        if (m->inputs[k] == out) m->inputs[k] = in;
    }
    pc->dead[i] = true;
    pc->changed++;
    count_uses(pc);
  }
}

static er_status pass_conv_bn(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *conv = &g->nodes[i];
    if (!is_op(conv, "Conv") || conv->n_outputs != 1 || !is_float32(g, conv->outputs[0])) continue;
    int32_t b = sole_consumer(pc, conv->outputs[0]);
    if (b < 0) continue;
    er_node *bn = &g->nodes[b];
    if (!is_op(bn, "BatchNormalization") || bn->n_inputs != 5 || bn->inputs[0] != conv->outputs[0]) continue;
    bool training = false;
    for (int k = 1; k < bn->n_outputs; k++)
      if (bn->outputs[k] >= 0) training = true;
    const er_attr *tm = er__node_attr(bn, "training_mode");
    if (training || (tm && tm->i)) continue;
    const er_tensor *w = const_of(g, conv->inputs[1]);
    const er_tensor *bias = conv->n_inputs > 2 ? const_of(g, conv->inputs[2]) : NULL;
    if (!w || w->dtype != ER_DTYPE_FLOAT || w->rank < 3 || (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !bias))
      continue;
    const er_tensor *sc = const_of(g, bn->inputs[1]), *sh = const_of(g, bn->inputs[2]),
                    *mean = const_of(g, bn->inputs[3]), *var = const_of(g, bn->inputs[4]);
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
      ER_CHECK(er__graph_new_const(g, conv->name[0] ? conv->name : "conv", &nw, &wid));
    }
    ER_CHECK(er__graph_new_const(g, conv->name[0] ? conv->name : "conv", &nb, &bid));
    conv = &g->nodes[i]; /* values may have moved, nodes have not */
    int32_t ins[3] = {conv->inputs[0], wid, bid};
    ER_CHECK(set_inputs(g, conv, ins, 3));
    redirect_output(g, i, conv->outputs[0], bn->outputs[0]);
    pc->dead[b] = true;
    pc->changed++;
    count_uses(pc);
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

static bool conv_then_channel_const(const pass_ctx *pc, int32_t i, const char *op, conv_chan *m) {
  er_graph *g = pc->g;
  const er_node *conv = &g->nodes[i];
  if (pc->dead[i] || !is_op(conv, "Conv") || conv->n_outputs != 1 || !is_float32(g, conv->outputs[0])) return false;
  m->y = conv->outputs[0];
  m->consumer = sole_consumer(pc, m->y);
  if (m->consumer < 0 || !is_op(&g->nodes[m->consumer], op)) return false;
  const er_node *n = &g->nodes[m->consumer];
  int32_t other = n->inputs[0] == m->y ? n->inputs[1] : n->inputs[0];
  m->w = const_of(g, conv->inputs[1]);
  m->c = const_of(g, other);
  m->bias = conv->n_inputs > 2 ? const_of(g, conv->inputs[2]) : NULL;
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
static er_status pass_conv_mul(pass_ctx *pc) {
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
      ER_CHECK(er__graph_new_const(g, conv->name[0] ? conv->name : "conv", &nw, &wid));
    }
    if (bias) ER_CHECK(er__graph_new_const(g, conv->name[0] ? conv->name : "conv", &nb, &bid));
    conv = &g->nodes[i];
    int32_t ins[3] = {conv->inputs[0], wid, bid};
    ER_CHECK(set_inputs(g, conv, ins, bias ? 3 : 2));
    redirect_output(g, i, y, g->nodes[a].outputs[0]);
    pc->dead[a] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

/* Conv + Add(constant per output channel) -> the conv's bias: exporters
 * (CNTK's MNIST, Caffe converters) write the bias as a separate Add of a
 * [M,1,1] constant. A constant of one value counts too. */
static er_status pass_conv_bias(pass_ctx *pc) {
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
    ER_CHECK(er__graph_new_const(g, conv->name[0] ? conv->name : "conv", &nb, &bid));
    conv = &g->nodes[i];
    int32_t ins[3] = {conv->inputs[0], conv->inputs[1], bid};
    ER_CHECK(set_inputs(g, conv, ins, 3));
    redirect_output(g, i, y, g->nodes[a].outputs[0]);
    pc->dead[a] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

static er_status pass_matmul_bias(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *mm = &g->nodes[i];
    if (!is_op(mm, "MatMul") || !is_float32(g, mm->outputs[0])) continue;
    const er_tensor *bt = const_of(g, mm->inputs[1]);
    const er_value *ov = &g->values[mm->outputs[0]];
    if (!bt || bt->rank != 2 || ov->info.rank < 2) continue;
    int32_t a = sole_consumer(pc, mm->outputs[0]);
    if (a < 0 || !is_op(&g->nodes[a], "Add")) continue;
    er_node *add = &g->nodes[a];
    int32_t other = add->inputs[0] == mm->outputs[0] ? add->inputs[1] : add->inputs[0];
    const er_tensor *bias = const_of(g, other);
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
      ER_CHECK(er__graph_new_const(g, mm->name[0] ? mm->name : "matmul", &nb, &bias_id));
      mm = &g->nodes[i];
      add = &g->nodes[a];
    }
    int32_t ins[3] = {mm->inputs[0], mm->inputs[1], bias_id};
    ER_CHECK(set_inputs(g, mm, ins, 3));
    ER_CHECK(make_fused(mm, "FusedMatMul"));
    redirect_output(g, i, mm->outputs[0], add->outputs[0]);
    pc->dead[a] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

/* ---- BatchNormalization + per-channel Mul / Add ---------------------------- */

/* A 1-D constant of `n` elements of type `dtype` (float32 or int64),
 * copied from v, made for the graph. */
static er_status owned_vec(er_graph *g, const char *base, er_dtype dtype, int64_t n, const void *v, int32_t *id) {
  er_tensor t;
  memset(&t, 0, sizeof t);
  er__tensor_set(&t, dtype, 1, &n);
  ER_CHECK(er__tensor_alloc(&t, 0));
  memcpy(t.data, v, (size_t)n * er_dtype_size(dtype));
  er_status st = er__graph_new_const(g, base, &t, id);
  if (st != ER_STATUS_OK) er__tensor_release(&t);
  return st;
}



/* Inference BatchNormalization with constant parameters, then Mul and Add
 * nodes whose other operand is a constant per channel (or one value):
 * one BatchNormalization with the composed scale and shift, mean 0,
 * variance 1 and epsilon 0 (so it computes exactly x * scale + shift).
 * DenseNet-121 as converted from Caffe2 writes BatchNormalization, Mul,
 * Add before every layer: three passes over the growing concatenation
 * where one does. Conv + BatchNormalization is folded at load already;
 * these are the ones with nothing to fold into. */
static er_status pass_bn_affine(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *n = &g->nodes[i];
    if (!is_op(n, "BatchNormalization") || n->n_inputs != 5 || n->n_outputs != 1 || !is_float32(g, n->outputs[0]))
      continue;
    const er_attr *tm = er__node_attr(n, "training_mode"), *sp = er__node_attr(n, "spatial");
    if ((tm && tm->type == ER_ATTR_INT && tm->i != 0) || (sp && sp->type == ER_ATTR_INT && sp->i != 1)) continue;
    const er_tensor *p[4];
    bool ok = true;
    for (int k = 0; k < 4; k++) {
      p[k] = const_of(g, n->inputs[k + 1]);
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
      int32_t k = sole_consumer(pc, v);
      if (k < 0) break;
      const er_node *kn = &g->nodes[k];
      if (!(is_op(kn, "Mul") || is_op(kn, "Add")) || kn->n_inputs != 2 || kn->n_outputs != 1) break;
      int32_t other = kn->inputs[0] == v ? kn->inputs[1] : kn->inputs[0];
      const er_tensor *ct = const_of(g, other);
      if (other == v || !ct || !per_channel_const(ct, r, c) || !is_float32(g, kn->outputs[0])) break;
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
        const er_tensor *ct = const_of(g, other);
        double q = er__load_f64(ct->data, ct->dtype, er__tensor_count(ct) == 1 ? 0 : ch);
        if (is_op(kn, "Mul")) {
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
    for (int k = 0; k < 4 && st == ER_STATUS_OK; k++) st = owned_vec(g, base, ER_DTYPE_FLOAT, c, ab + k * c, &ids[k]);
    free(ab);
    ER_CHECK(st);
    n = &g->nodes[i];
    int32_t ins[5] = {n->inputs[0], ids[0], ids[1], ids[2], ids[3]};
    ER_CHECK(set_inputs(g, n, ins, 5));
    er_attr e;
    memset(&e, 0, sizeof e);
    e.name = "epsilon";
    e.type = ER_ATTR_FLOAT;
    e.f = 0.0f;
    ER_CHECK(add_attrs(g, n, &e, 1));
    redirect_output(g, i, n->outputs[0], v);
    for (int32_t k = 0; k < n_chain; k++) pc->dead[chain[k]] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

/* ---- HardSwish from primitives ------------------------------------------- */

/* A one-value float constant equal to `want` (to float rounding). */
static bool scalar_is(const er_graph *g, int32_t v, double want) {
  double c = const_scalar(g, v);
  return !isnan(c) && fabs(c - want) <= 1e-6 * fabs(want);
}

/* Binary node n reads v and a one-value constant equal to `want` (either
 * order for a commutative op, only as the second input otherwise). */
static bool binary_with(const er_graph *g, const er_node *n, const char *op, int32_t v, double want, bool commutes) {
  if (!is_op(n, op) || n->n_inputs != 2 || n->n_outputs != 1) return false;
  if (n->inputs[0] == v && scalar_is(g, n->inputs[1], want)) return true;
  return commutes && n->inputs[1] == v && scalar_is(g, n->inputs[0], want);
}

/* Clip node n bounds its input to [lo, hi], bounds as constants. */
static bool clip_is(const er_graph *g, const er_node *n, double lo, double hi) {
  if (!is_op(n, "Clip") || n->n_outputs != 1) return false;
  if (n->version < 11) {
    const er_attr *a = er__node_attr(n, "min"), *b = er__node_attr(n, "max");
    return a && b && a->type == ER_ATTR_FLOAT && b->type == ER_ATTR_FLOAT && a->f == lo && b->f == hi;
  }
  return n->n_inputs == 3 && scalar_is(g, n->inputs[1], lo) && scalar_is(g, n->inputs[2], hi);
}

/* v divided by 6, as Div(v, 6) or Mul(v, 1/6). */
static bool sixth_of(const er_graph *g, const er_node *n, int32_t v) {
  return binary_with(g, n, "Div", v, 6.0, false) || binary_with(g, n, "Mul", v, 1.0 / 6.0, true);
}

/* Mul node n = x * v in either order. */
static bool mul_of(const er_node *n, int32_t x, int32_t v) {
  return is_op(n, "Mul") && n->n_inputs == 2 && n->n_outputs == 1 &&
         ((n->inputs[0] == x && n->inputs[1] == v) || (n->inputs[1] == x && n->inputs[0] == v));
}

/* x * Clip(x + 3, 0, 6) / 6 with the division before or after the product
 * (paddle2onnx writes Add, Clip, Mul, Div; PyTorch's x * relu6(x + 3) / 6
 * the same), and x * HardSigmoid(x) with alpha 1/6 and beta 1/2 (TF
 * exports): one HardSwish, which the activation pass then fuses into the
 * convolution before it. PP-OCRv4's recognizer spent 6 of its 17 ms in
 * the four elementwise ops. The intermediates must have no other reader. */
static er_status pass_hardswish(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    int32_t x = -1, gone[3] = {-1, -1, -1}, last = -1;
    if (is_op(n, "Add") && n->n_inputs == 2 && n->n_outputs == 1) {
      x = scalar_is(g, n->inputs[1], 3.0) ? n->inputs[0] : scalar_is(g, n->inputs[0], 3.0) ? n->inputs[1] : -1;
      if (x < 0 || !is_float32(g, x) || !binary_with(g, n, "Add", x, 3.0, true)) continue;
      int32_t c = sole_consumer(pc, n->outputs[0]);
      if (c < 0 || !clip_is(g, &g->nodes[c], 0.0, 6.0)) continue;
      int32_t cv = g->nodes[c].outputs[0], k = sole_consumer(pc, cv);
      if (k < 0) continue;
      const er_node *kn = &g->nodes[k];
      int32_t f = sole_consumer(pc, kn->outputs[0]);
      if (f < 0) continue;
      if (mul_of(kn, x, cv) && sixth_of(g, &g->nodes[f], kn->outputs[0])) {
        /* (x * clip) / 6 */
      } else if (sixth_of(g, kn, cv) && mul_of(&g->nodes[f], x, kn->outputs[0])) {
        /* x * (clip / 6) */
      } else {
        continue;
      }
      gone[0] = i, gone[1] = c, gone[2] = k, last = f;
    } else if (is_op(n, "HardSigmoid") && n->n_inputs == 1 && n->n_outputs == 1) {
      const er_attr *a = er__node_attr(n, "alpha"), *b = er__node_attr(n, "beta");
      double alpha = a && a->type == ER_ATTR_FLOAT ? a->f : 0.2, beta = b && b->type == ER_ATTR_FLOAT ? b->f : 0.5;
      x = n->inputs[0];
      if (!is_float32(g, x) || fabs(alpha - 1.0 / 6.0) > 1e-6 || beta != 0.5) continue;
      int32_t f = sole_consumer(pc, n->outputs[0]);
      if (f < 0 || !mul_of(&g->nodes[f], x, n->outputs[0])) continue;
      gone[0] = i, last = f;
    } else {
      continue;
    }
    er_node *fn = &g->nodes[last];
    ER_CHECK(set_inputs(g, fn, &x, 1));
    ER_CHECK(make_standard(fn, "HardSwish", 14));
    fn->n_attrs = 0;
    for (int k = 0; k < 3; k++)
      if (gone[k] >= 0) pc->dead[gone[k]] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

/* Fuses a following activation into Conv/FusedConv/Gemm/FusedGemm/
 * MatMul/FusedMatMul nodes that have none yet. */
static er_status pass_activation(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *n = &g->nodes[i];
    bool conv = is_op(n, "Conv") || (strcmp(n->domain, ER_FUSED_DOMAIN) == 0 && strcmp(n->op_type, "FusedConv") == 0);
    bool gemm = is_op(n, "Gemm") || (strcmp(n->domain, ER_FUSED_DOMAIN) == 0 && strcmp(n->op_type, "FusedGemm") == 0);
    bool mm = is_op(n, "MatMul") || (strcmp(n->domain, ER_FUSED_DOMAIN) == 0 && strcmp(n->op_type, "FusedMatMul") == 0);
    if (!(conv || gemm || mm) || n->n_outputs != 1 || !is_float32(g, n->outputs[0])) continue;
    if (er__node_attr(n, "activation")) continue;
    int32_t y = n->outputs[0];
    er_activation act;
    int32_t out = -1, dead[GELU_TANH_MAX_NODES * 3 + 3];
    int n_dead = 0;
    int32_t c = sole_consumer(pc, y);
    if (c >= 0 && activation_of(pc, c, &act, &out)) {
      dead[n_dead++] = c;
    } else {
      int32_t mul, sig, gel[5];
      if (silu_of(pc, y, &mul, &sig)) {
        act.kind = ER_ACT_SILU;
        dead[n_dead++] = mul;
        dead[n_dead++] = sig;
        out = g->nodes[mul].outputs[0];
      } else if (gelu_of(pc, y, gel, &out)) {
        memset(&act, 0, sizeof act);
        act.kind = ER_ACT_GELU;
        for (int k = 0; k < 5; k++) dead[n_dead++] = gel[k];
      } else {
        /* The tanh form, when it reads y and nothing else does. */
        int32_t tx = -1;
        for (int32_t t = 0; t < g->n_nodes && n_dead == 0; t++) {
          if (pc->dead[t] || !is_op(&g->nodes[t], "Tanh")) continue;
          int nn;
          if (gelu_tanh_of(pc, t, &tx, dead, &nn, &out) && tx == y && reads_of(g, dead, nn, y) == pc->uses[y])
            n_dead = nn;
        }
        if (n_dead == 0) continue;
        memset(&act, 0, sizeof act);
        act.kind = ER_ACT_GELU_TANH;
      }
    }
    if (conv) ER_CHECK(make_fused(n, "FusedConv"));
    else if (gemm) ER_CHECK(make_fused(n, "FusedGemm"));
    else ER_CHECK(make_fused(n, "FusedMatMul"));
    er_attr extra_attrs[2];
    memset(extra_attrs, 0, sizeof extra_attrs);
    extra_attrs[0].name = "activation";
    extra_attrs[0].type = ER_ATTR_STRING;
    extra_attrs[0].s = er__act_name(act.kind);
    extra_attrs[0].s_len = strlen(extra_attrs[0].s);
    int n_extra = 1;
    int np = act.kind == ER_ACT_CLIP || act.kind == ER_ACT_HARDSIGMOID ? 2 : act.kind == ER_ACT_LEAKYRELU ? 1 : 0;
    if (np) {
      float *p = er__arena_array(g->arena, 2, sizeof(float));
      if (!p) return ER_STATUS_OUT_OF_MEMORY;
      p[0] = act.p[0];
      p[1] = act.p[1];
      extra_attrs[1].name = "activation_params";
      extra_attrs[1].type = ER_ATTR_FLOATS;
      extra_attrs[1].floats = p;
      extra_attrs[1].n = np;
      n_extra = 2;
    }
    ER_CHECK(add_attrs(g, n, extra_attrs, n_extra));
    redirect_output(g, i, y, out);
    for (int k = 0; k < n_dead; k++) pc->dead[dead[k]] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

/* Conv + Add(residual) (or a Sum of two): the residual must already exist
 * when the conv runs, i.e. be produced by an earlier node (or be an
 * input/constant). */
static er_status pass_conv_add(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *n = &g->nodes[i];
    if (!is_op(n, "Conv") || n->n_outputs != 1 || !is_float32(g, n->outputs[0])) continue;
    int32_t y = n->outputs[0];
    int32_t a = sole_consumer(pc, y);
    /* Sum of two is Add (ResNets exported at opset 6 and earlier). */
    if (a < 0 || !(is_op(&g->nodes[a], "Add") || (is_op(&g->nodes[a], "Sum") && g->nodes[a].n_inputs == 2)))
      continue;
    er_node *add = &g->nodes[a];
    int32_t z = add->inputs[0] == y ? add->inputs[1] : add->inputs[0];
    if (z == y) continue;
    const er_value *zv = &g->values[z], *yv = &g->values[y];
    if (zv->info.dtype != ER_DTYPE_FLOAT || zv->info.rank != yv->info.rank || yv->info.rank < 0) continue;
    bool same = true;
    for (int d = 0; d < yv->info.rank; d++)
      if (zv->info.dims[d] < 0 || zv->info.dims[d] != yv->info.dims[d]) same = false;
    if (!same) continue;
    if (zv->producer >= i) continue;
    int32_t ins[4] = {n->inputs[0], n->inputs[1], n->n_inputs > 2 ? n->inputs[2] : -1, z};
    ER_CHECK(set_inputs(g, n, ins, 4));
    ER_CHECK(make_fused(n, "FusedConv"));
    redirect_output(g, i, y, add->outputs[0]);
    pc->dead[a] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

/* The node producing `out` becomes Gelu(x) (approximate="tanh" when
 * tanh); the other nodes[0..n) die. */
static er_status become_gelu(pass_ctx *pc, int32_t x, int32_t out, const int32_t *nodes, int n_nodes, bool tanh) {
  er_graph *g = pc->g;
  int32_t last = g->values[out].producer;
  er_node *n = &g->nodes[last];
  int32_t ins[1] = {x};
  ER_CHECK(set_inputs(g, n, ins, 1));
  ER_CHECK(make_standard(n, "Gelu", 20));
  n->n_attrs = 0;
  if (tanh) {
    er_attr ap;
    memset(&ap, 0, sizeof ap);
    ap.name = "approximate";
    ap.type = ER_ATTR_STRING;
    ap.s = "tanh";
    ap.s_len = 4;
    ER_CHECK(add_attrs(g, n, &ap, 1));
  }
  for (int k = 0; k < n_nodes; k++)
    if (nodes[k] != last) pc->dead[nodes[k]] = true;
  pc->changed++;
  count_uses(pc);
  return ER_STATUS_OK;
}

/* Gelu from Erf or tanh primitives not preceded by a fusable producer. */
static er_status pass_gelu(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t v = 0; v < g->n_values; v++) {
    int32_t nodes[5], out;
    if (is_float32(g, v) && gelu_of(pc, v, nodes, &out)) ER_CHECK(become_gelu(pc, v, out, nodes, 5, false));
  }
  for (int32_t t = 0; t < g->n_nodes; t++) {
    int32_t nodes[GELU_TANH_MAX_NODES * 3 + 3], x, out;
    int nn;
    if (!pc->dead[t] && is_op(&g->nodes[t], "Tanh") && gelu_tanh_of(pc, t, &x, nodes, &nn, &out) &&
        is_float32(g, x))
      ER_CHECK(become_gelu(pc, x, out, nodes, nn, true));
  }
  return ER_STATUS_OK;
}

/* LayerNorm from primitives (PyTorch's export below opset 17):
 *   m = ReduceMean(x, -1); d = Sub(x, m); v = ReduceMean(Pow(d, 2), -1);
 *   y = Div(d, Sqrt(Add(v, eps))) [; y = Mul(y, gamma); y = Add(y, beta)] */
static bool reduce_last_axis(const er_graph *g, const er_node *n, int rank) {
  if (!is_op(n, "ReduceMean")) return false;
  const er_attr *kd = er__node_attr(n, "keepdims");
  if (kd && kd->i == 0) return false;
  const int64_t *axes = NULL;
  int64_t n_axes = 0;
  const er_attr *aa = er__node_attr(n, "axes");
  if (aa && aa->type == ER_ATTR_INTS) {
    axes = aa->ints;
    n_axes = aa->n;
  } else if (n->n_inputs > 1) {
    const er_tensor *t = const_of(g, n->inputs[1]);
    if (!t || t->dtype != ER_DTYPE_INT64) return false;
    axes = t->data;
    n_axes = er__tensor_count(t);
  }
  return n_axes == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

static er_status pass_layernorm(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *rm = &g->nodes[i];
    int32_t x = rm->n_inputs ? rm->inputs[0] : -1;
    if (x < 0 || !is_float32(g, x) || g->values[x].info.rank < 1) continue;
    int rank = g->values[x].info.rank;
    /* x may have readers beyond the ReduceMean and the Sub (a pre-norm
     * residual): the fused node reads x as they do. */
    if (!reduce_last_axis(g, rm, rank) || pc->uses[x] < 2) continue;
    int32_t sub = sole_consumer(pc, rm->outputs[0]);
    if (sub < 0 || !is_op(&g->nodes[sub], "Sub") || g->nodes[sub].inputs[0] != x ||
        g->nodes[sub].inputs[1] != rm->outputs[0])
      continue;
    int32_t d = g->nodes[sub].outputs[0];
    if (pc->uses[d] != 2) continue;
    int32_t pow = -1, div = -1;
    for (int32_t j = 0; j < g->n_nodes; j++) {
      if (pc->dead[j]) continue;
      const er_node *m = &g->nodes[j];
      if (m->n_inputs >= 1 && m->inputs[0] == d) {
        if (is_op(m, "Pow") && fabs(const_scalar(g, m->inputs[1]) - 2.0) < 1e-6) pow = j;
        if (is_op(m, "Div")) div = j;
      }
    }
    if (pow < 0 || div < 0) continue;
    int32_t rm2 = sole_consumer(pc, g->nodes[pow].outputs[0]);
    if (rm2 < 0 || !reduce_last_axis(g, &g->nodes[rm2], rank)) continue;
    int32_t add = sole_consumer(pc, g->nodes[rm2].outputs[0]);
    if (add < 0 || !is_op(&g->nodes[add], "Add")) continue;
    double eps = const_scalar(g, g->nodes[add].inputs[1]);
    if (isnan(eps)) eps = const_scalar(g, g->nodes[add].inputs[0]);
    if (isnan(eps) || eps < 0) continue;
    int32_t sq = sole_consumer(pc, g->nodes[add].outputs[0]);
    if (sq < 0 || !is_op(&g->nodes[sq], "Sqrt")) continue;
    if (g->nodes[div].inputs[1] != g->nodes[sq].outputs[0] || pc->uses[g->nodes[sq].outputs[0]] != 1) continue;
    int32_t y = g->nodes[div].outputs[0];
    int64_t hidden = g->values[x].info.dims[rank - 1];
    if (hidden <= 0) continue;
    /* Optional affine: Mul(gamma) then Add(beta), both 1-D of hidden. */
    int32_t mul = sole_consumer(pc, y), gamma = -1, beta = -1, last = div, addb = -1;
    if (mul >= 0 && is_op(&g->nodes[mul], "Mul")) {
      const er_node *m = &g->nodes[mul];
      int32_t o = m->inputs[0] == y ? m->inputs[1] : m->inputs[0];
      const er_tensor *t = const_of(g, o);
      if (t && t->dtype == ER_DTYPE_FLOAT && er__tensor_count(t) == hidden && t->rank == 1) {
        gamma = o;
        last = mul;
        addb = sole_consumer(pc, m->outputs[0]);
        if (addb >= 0 && is_op(&g->nodes[addb], "Add")) {
          const er_node *ab = &g->nodes[addb];
          int32_t ob = ab->inputs[0] == m->outputs[0] ? ab->inputs[1] : ab->inputs[0];
          const er_tensor *tb = const_of(g, ob);
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
      ER_CHECK(er__graph_new_const(g, "layernorm", &ones, &gamma));
    }
    int32_t out = g->nodes[last].outputs[0];
    er_node *ln = &g->nodes[last];
    int32_t ins[3] = {x, gamma, beta};
    ER_CHECK(set_inputs(g, ln, ins, beta >= 0 ? 3 : 2));
    ER_CHECK(make_standard(ln, "LayerNormalization", 17));
    er_attr attrs[2];
    memset(attrs, 0, sizeof attrs);
    attrs[0].name = "axis";
    attrs[0].type = ER_ATTR_INT;
    attrs[0].i = -1;
    attrs[1].name = "epsilon";
    attrs[1].type = ER_ATTR_FLOAT;
    attrs[1].f = (float)eps;
    ln->n_attrs = 0;
    ER_CHECK(add_attrs(g, ln, attrs, 2));
    ln->outputs[0] = out;
    int32_t all[9] = {i, sub, pow, rm2, add, sq, div, gamma >= 0 && last != div ? mul : -1, beta >= 0 ? addb : -1};
    for (int k = 0; k < 9; k++)
      if (all[k] >= 0 && all[k] != last) pc->dead[all[k]] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

static er_status pass_transpose(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *t1 = &g->nodes[i];
    if (!is_op(t1, "Transpose")) continue;
    const er_attr *p1 = er__node_attr(t1, "perm");
    if (!p1 || p1->type != ER_ATTR_INTS || p1->n > ER_MAX_RANK) continue;
    int32_t c = sole_consumer(pc, t1->outputs[0]);
    if (c < 0 || !is_op(&g->nodes[c], "Transpose")) continue;
    er_node *t2 = &g->nodes[c];
    const er_attr *p2 = er__node_attr(t2, "perm");
    if (!p2 || p2->type != ER_ATTR_INTS || p2->n != p1->n) continue;
    /* out[k] = in1[p2[k]] = x[p1[p2[k]]] */
    int64_t *perm = er__arena_array(g->arena, (size_t)p1->n + 1, sizeof *perm);
    if (!perm) return ER_STATUS_OUT_OF_MEMORY;
    bool identity = true, ok = true;
    for (int64_t k = 0; k < p1->n; k++) {
      int64_t q = p2->ints[k];
      if (q < 0 || q >= p1->n) ok = false;
      else perm[k] = p1->ints[q];
      if (ok && perm[k] != k) identity = false;
    }
    if (!ok) continue;
    if (identity && pc->uses[t2->outputs[0]] < 1000) {
      /* Both vanish: readers of t2's output read t1's input. */
      int32_t in = t1->inputs[0], out = t2->outputs[0];
      for (int32_t j = 0; j < g->n_nodes; j++) {
        if (pc->dead[j]) continue;
        er_node *m = &g->nodes[j];
        for (int k = 0; k < m->n_inputs; k++)
          if (m->inputs[k] == out) m->inputs[k] = in;
      }
      pc->dead[i] = pc->dead[c] = true;
    } else {
      ER_CHECK(set_perm(g, t2, perm, p1->n));
      t2->inputs[0] = t1->inputs[0];
      pc->dead[i] = true;
    }
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

static er_status pass_reshape(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *r1 = &g->nodes[i];
    if (!is_op(r1, "Reshape") || r1->version < 5) continue;
    int32_t c = sole_consumer(pc, r1->outputs[0]);
    if (c < 0 || !is_op(&g->nodes[c], "Reshape") || g->nodes[c].inputs[0] != r1->outputs[0]) continue;
    er_node *r2 = &g->nodes[c];
    /* The second reshape's shape must not copy dims (0) from the first's
     * output unless allowzero is set; with a constant shape free of 0 the
     * first reshape is irrelevant. */
    const er_tensor *s = const_of(g, r2->inputs[1]);
    if (!s) continue;
    const er_attr *az = er__node_attr(r2, "allowzero");
    bool copies = false;
    for (int64_t k = 0; k < er__tensor_count(s); k++)
      if (er__get_i64(s, k) == 0 && !(az && az->i)) copies = true;
    if (copies) continue;
    r2->inputs[0] = r1->inputs[0];
    pc->dead[i] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

/* ---- Slice chains ------------------------------------------------------------ */

/* A Slice's constant starts, ends, axes and steps (opset 10+), axes made
 * non-negative. False when any is computed at run time, the lists do not
 * fit, or an axis is out of range or repeated: those are left to the op's
 * own checks at run time. */
typedef struct slice_lists {
  int n;
  int64_t starts[ER_MAX_RANK], ends[ER_MAX_RANK], axes[ER_MAX_RANK], steps[ER_MAX_RANK];
} slice_lists;

static bool slice_lists_of(const er_graph *g, const er_node *n, int rank, slice_lists *l) {
  if (!is_op(n, "Slice") || n->version < 10 || n->n_inputs < 3 || rank < 0) return false;
  const er_tensor *t[4] = {NULL, NULL, NULL, NULL};
  for (int k = 0; k < 4; k++) {
    int32_t v = k + 1 < n->n_inputs ? n->inputs[k + 1] : -1;
    if (v < 0) {
      if (k < 2) return false;
      continue;
    }
    t[k] = const_of(g, v);
    if (!t[k] || t[k]->rank != 1 || (t[k]->dtype != ER_DTYPE_INT64 && t[k]->dtype != ER_DTYPE_INT32)) return false;
  }
  int64_t cnt = er__tensor_count(t[0]);
  if (cnt < 1 || cnt > rank) return false;
  for (int k = 1; k < 4; k++)
    if (t[k] && er__tensor_count(t[k]) != cnt) return false;
  l->n = (int)cnt;
  bool seen[ER_MAX_RANK] = {false};
  for (int i = 0; i < l->n; i++) {
    l->starts[i] = er__get_i64(t[0], i);
    l->ends[i] = er__get_i64(t[1], i);
    int64_t a = t[2] ? er__get_i64(t[2], i) : i;
    if (a < -(int64_t)rank || a >= rank) return false;
    if (a < 0) a += rank;
    if (seen[a]) return false;
    seen[a] = true;
    l->axes[i] = a;
    l->steps[i] = t[3] ? er__get_i64(t[3], i) : 1;
    if (l->steps[i] == 0) return false;
  }
  return true;
}

/* Slice(Slice(x)) on disjoint axes -> one Slice. The second Slice's axes
 * have the same extent before and after the first, so its clamping is
 * unchanged. YOLOv5's and YOLOX's "Focus" stem takes rows, then columns,
 * of the image with stride 2, four times: one pass over the image each
 * instead of two. */
static er_status pass_slice(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *s1 = &g->nodes[i];
    if (!is_op(s1, "Slice") || s1->n_outputs != 1) continue;
    int rank = g->values[s1->inputs[0]].info.rank;
    slice_lists a, b;
    if (!slice_lists_of(g, s1, rank, &a)) continue;
    int32_t c = sole_consumer(pc, s1->outputs[0]);
    if (c < 0 || g->nodes[c].inputs[0] != s1->outputs[0]) continue;
    er_node *s2 = &g->nodes[c];
    if (!slice_lists_of(g, s2, rank, &b) || a.n + b.n > rank) continue;
    bool disjoint = true;
    for (int x = 0; x < a.n; x++)
      for (int y = 0; y < b.n; y++)
        if (a.axes[x] == b.axes[y]) disjoint = false;
    /* Four new constants: keep within the pass context's value capacity. */
    if (!disjoint || (size_t)g->n_values + 4 > pc->cap) continue;
    for (int y = 0; y < b.n; y++) {
      a.starts[a.n + y] = b.starts[y];
      a.ends[a.n + y] = b.ends[y];
      a.axes[a.n + y] = b.axes[y];
      a.steps[a.n + y] = b.steps[y];
    }
    int n = a.n + b.n;
    const char *base = g->values[s2->outputs[0]].name;
    int32_t ids[5] = {s1->inputs[0], -1, -1, -1, -1};
    ER_CHECK(owned_vec(g, base, ER_DTYPE_INT64, n, a.starts, &ids[1]));
    ER_CHECK(owned_vec(g, base, ER_DTYPE_INT64, n, a.ends, &ids[2]));
    ER_CHECK(owned_vec(g, base, ER_DTYPE_INT64, n, a.axes, &ids[3]));
    ER_CHECK(owned_vec(g, base, ER_DTYPE_INT64, n, a.steps, &ids[4]));
    ER_CHECK(set_inputs(g, s2, ids, 5));
    pc->dead[i] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

/* ---- attention ------------------------------------------------------------- */

/* Scaled dot-product attention from primitives, as PyTorch and BERT-style
 * exporters write it:
 *
 *   S = MatMul(Q, KT) [; S = Div(S, c) | Mul(S, c)] [; S = Add(S, M)]
 *   P = Softmax(S, last axis); O = MatMul(P, V)
 *
 * with Q [B,H,S,D], KT [B,H,D,T], V [B,H,T,Dv] becomes the standard
 * Attention(Q, K, V[, M]) (opset 23) with an explicit `scale` (its default
 * would be 1/sqrt(D)). When Q, KT and V are the usual head split of 3-D
 * projections, Transpose(Reshape(x3, [0, 0, H, D]), perm), and O is merged
 * back by Transpose + Reshape, the 3-D form Attention(q3, k3, v3[, M])
 * with q_num_heads = kv_num_heads = H replaces all of it: the head split
 * and merge copies disappear.
 *
 * One difference is accepted: a query row whose every score the mask sets
 * to -inf gives NaN through Softmax and zeros through Attention (its spec);
 * masks written as large finite negatives (what exporters emit) behave
 * the same either way. */

typedef struct attn_match {
  int32_t mm1, scale_op, add, softmax, mm2; /* nodes; -1 when absent */
  int32_t q, kt, v, mask;                   /* values; mask -1 when absent */
  float scale;
} attn_match;

static int64_t dim_of(const er_graph *g, int32_t v, int d) {
  const er_tensor *t = &g->values[v].info;
  return t->rank > d && d >= 0 ? t->dims[d] : -1;
}

/* Two dims that must be equal for the rewrite to keep MatMul's meaning:
 * known and equal, or both unknown (a broadcast between unknown dims
 * would then fail loudly in Attention's shape check, not silently). */
static bool same_dim(int64_t a, int64_t b) { return (a >= 0 && a == b) || (a < 0 && b < 0); }

static bool has_perm(const er_node *n, const int64_t *perm, int rank) {
  const er_attr *p = er__node_attr(n, "perm");
  if (!is_op(n, "Transpose") || !p || p->type != ER_ATTR_INTS || p->n != rank) return false;
  for (int k = 0; k < rank; k++)
    if (p->ints[k] != perm[k]) return false;
  return true;
}

/* The softmax axis is the last of a rank-4 input. Before opset 13 the
 * input is flattened at `axis` (default 1) into [prod before, prod from];
 * at axis 3 that is the same as a softmax over the last axis. */
static bool softmax_last_axis(const er_node *n) {
  const er_attr *a = er__node_attr(n, "axis");
  int64_t axis = a && a->type == ER_ATTR_INT ? a->i : n->version >= 13 ? -1 : 1;
  return axis == -1 || axis == 3;
}

/* A mask M added to S [B,H,S,T] that Attention's attn_mask reads the
 * same way: float32, rank 1 to 4, every dim 1 or S's dim, and the last
 * dim T itself (Attention treats a shorter last dim as masked keys, not as
 * a broadcast). */
static bool mask_ok(const er_graph *g, int32_t m, int32_t s) {
  const er_tensor *mi = &g->values[m].info;
  if (!is_float32(g, m) || mi->rank < 1 || mi->rank > 4) return false;
  for (int d = 0; d < mi->rank; d++) {
    int64_t md = mi->dims[d], sd = dim_of(g, s, 4 - mi->rank + d);
    bool last = d == mi->rank - 1;
    if (!(md >= 0 && md == sd) && !(md == 1 && !last)) return false;
  }
  return true;
}

/* Matches the chain from MatMul node i. */
static bool attn_core(const pass_ctx *pc, int32_t i, attn_match *m) {
  const er_graph *g = pc->g;
  const er_node *mm = &g->nodes[i];
  if (pc->dead[i] || !is_op(mm, "MatMul") || mm->n_inputs != 2 || mm->n_outputs != 1) return false;
  m->mm1 = i;
  m->scale_op = m->add = m->softmax = m->mm2 = m->mask = -1;
  m->q = mm->inputs[0];
  m->kt = mm->inputs[1];
  m->scale = 1.0f;
  int32_t s = mm->outputs[0], cur = s;
  if (s < 0 || !is_float32(g, s) || g->values[s].info.rank != 4) return false;
  if (!is_float32(g, m->q) || !is_float32(g, m->kt) || g->values[m->q].info.rank != 4 ||
      g->values[m->kt].info.rank != 4)
    return false;
  int32_t c = sole_consumer(pc, cur);
  if (c < 0) return false;
  const er_node *n = &g->nodes[c];
  if ((is_op(n, "Div") && n->n_inputs == 2 && n->inputs[0] == cur) || mul_other(n, cur) >= 0) {
    int32_t other = is_op(n, "Div") ? n->inputs[1] : mul_other(n, cur);
    const er_tensor *t = const_of(g, other);
    double v = const_scalar(g, other);
    /* One value of rank <= 4, so S keeps its shape; Attention wants a
     * positive scale. */
    if (other == cur || !t || t->rank > 4 || !isfinite(v) || !(v > 0)) return false;
    double sc = is_op(n, "Div") ? 1.0 / v : v;
    if (!isfinite(sc) || !(sc > 0) || sc > 3.4e38) return false;
    m->scale = (float)sc;
    m->scale_op = c;
    cur = n->outputs[0];
    if ((c = sole_consumer(pc, cur)) < 0) return false;
    n = &g->nodes[c];
  }
  if (is_op(n, "Add") && n->n_inputs == 2) {
    int32_t other = n->inputs[0] == cur ? n->inputs[1] : n->inputs[0];
    if (other == cur || !mask_ok(g, other, s)) return false;
    m->mask = other;
    m->add = c;
    cur = n->outputs[0];
    if ((c = sole_consumer(pc, cur)) < 0) return false;
    n = &g->nodes[c];
  }
  if (!is_op(n, "Softmax") || !softmax_last_axis(n) || n->n_outputs != 1) return false;
  m->softmax = c;
  cur = n->outputs[0];
  if ((c = sole_consumer(pc, cur)) < 0) return false;
  n = &g->nodes[c];
  if (!is_op(n, "MatMul") || n->n_inputs != 2 || n->inputs[0] != cur || n->outputs[0] < 0) return false;
  m->mm2 = c;
  m->v = n->inputs[1];
  if (!is_float32(g, m->v) || g->values[m->v].info.rank != 4) return false;
  /* Batch dims equal; K/V heads equal, and equal to Q's or 1 (MatMul's
   * broadcast, which is Attention's grouped heads with one KV head). */
  int64_t hq = dim_of(g, m->q, 1), hk = dim_of(g, m->kt, 1), hv = dim_of(g, m->v, 1);
  if (!same_dim(dim_of(g, m->q, 0), dim_of(g, m->kt, 0)) || !same_dim(dim_of(g, m->q, 0), dim_of(g, m->v, 0)))
    return false;
  if (!same_dim(hk, hv) || !(same_dim(hq, hk) || hk == 1)) return false;
  return true;
}

/* One of Q, KT, V written as Transpose(Reshape(x3, shape), perm): x3
 * [B, S, H * D] split into heads. The Reshape must split only the last
 * dim: shape [0 or B, 0 or S, H, D], with at most one of H and D -1. */
typedef struct attn_split {
  int32_t x3, transpose, reshape;
  int64_t heads, size;
} attn_split;

static bool reshape_const(const er_graph *g, const er_node *r, int64_t n, int64_t *out) {
  if (!is_op(r, "Reshape") || r->version < 5 || r->n_inputs != 2 || r->n_outputs != 1) return false;
  const er_attr *az = er__node_attr(r, "allowzero");
  if (az && az->i != 0) return false;
  const er_tensor *t = const_of(g, r->inputs[1]);
  if (!t || t->dtype != ER_DTYPE_INT64 || t->rank != 1 || er__tensor_count(t) != n) return false;
  for (int64_t k = 0; k < n; k++) out[k] = er__get_i64(t, k);
  return true;
}

static bool attn_heads_of(const pass_ctx *pc, int32_t v, const int64_t perm[4], attn_split *hs) {
  const er_graph *g = pc->g;
  if (pc->uses[v] != 1) return false;
  int32_t t = g->values[v].producer;
  if (t < 0 || pc->dead[t] || !has_perm(&g->nodes[t], perm, 4)) return false;
  int32_t rv = g->nodes[t].inputs[0];
  if (rv < 0 || pc->uses[rv] != 1) return false;
  int32_t r = g->values[rv].producer;
  int64_t sh[4];
  if (r < 0 || pc->dead[r] || !reshape_const(g, &g->nodes[r], 4, sh)) return false;
  int32_t x3 = g->nodes[r].inputs[0];
  if (!is_float32(g, x3) || g->values[x3].info.rank != 3) return false;
  int64_t e = dim_of(g, x3, 2);
  for (int d = 0; d < 2; d++)
    if (!(sh[d] == 0 || (sh[d] > 0 && sh[d] == dim_of(g, x3, d)))) return false;
  /* With the first two dims kept, the element count forces H * D = E. */
  if (sh[2] > 0 && sh[3] > 0) {
    if (e >= 0 && sh[2] * sh[3] != e) return false;
  } else if (sh[2] > 0 && sh[3] == -1 && e > 0 && e % sh[2] == 0) {
    sh[3] = e / sh[2];
  } else if (sh[3] > 0 && sh[2] == -1 && e > 0 && e % sh[3] == 0) {
    sh[2] = e / sh[3];
  } else {
    return false;
  }
  hs->x3 = x3;
  hs->transpose = t;
  hs->reshape = r;
  hs->heads = sh[2];
  hs->size = sh[3];
  return true;
}

/* The 3-D form: Q, KT and V are head splits of q3, k3, v3 with the same H,
 * and O is merged back by Transpose(O, [0,2,1,3]) -> Reshape(.., [0|B,
 * 0|S, -1|H*Dv]). nodes[] receives the eight nodes that go, and *last the
 * final Reshape, which becomes the Attention node. */
static bool attn_3d(const pass_ctx *pc, const attn_match *m, attn_split hs[3], int32_t nodes[8], int32_t *last) {
  static const int64_t p_qv[4] = {0, 2, 1, 3}, p_k[4] = {0, 2, 3, 1};
  const er_graph *g = pc->g;
  if (!attn_heads_of(pc, m->q, p_qv, &hs[0]) || !attn_heads_of(pc, m->kt, p_k, &hs[1]) ||
      !attn_heads_of(pc, m->v, p_qv, &hs[2]))
    return false;
  int64_t h = hs[0].heads;
  if (hs[1].heads != h || hs[2].heads != h || hs[1].size != hs[0].size) return false;
  int64_t b0 = dim_of(g, hs[0].x3, 0);
  if (!same_dim(b0, dim_of(g, hs[1].x3, 0)) || !same_dim(b0, dim_of(g, hs[2].x3, 0))) return false;
  int32_t o = g->nodes[m->mm2].outputs[0];
  int32_t t = sole_consumer(pc, o);
  if (t < 0 || !has_perm(&g->nodes[t], p_qv, 4) || g->nodes[t].outputs[0] < 0) return false;
  int32_t r = sole_consumer(pc, g->nodes[t].outputs[0]);
  int64_t sh[3];
  if (r < 0 || g->nodes[r].inputs[0] != g->nodes[t].outputs[0] || !reshape_const(g, &g->nodes[r], 3, sh)) return false;
  if (g->nodes[r].outputs[0] < 0 || !is_float32(g, g->nodes[r].outputs[0])) return false;
  /* Merged dims: [B, S, H * Dv] of the transposed O [B, S, H, Dv]. */
  for (int d = 0; d < 2; d++)
    if (!(sh[d] == 0 || (sh[d] > 0 && sh[d] == dim_of(g, hs[0].x3, d)))) return false;
  if (!(sh[2] == -1 || sh[2] == h * hs[2].size)) return false;
  nodes[0] = hs[0].transpose, nodes[1] = hs[0].reshape;
  nodes[2] = hs[1].transpose, nodes[3] = hs[1].reshape;
  nodes[4] = hs[2].transpose, nodes[5] = hs[2].reshape;
  nodes[6] = m->mm2, nodes[7] = t;
  *last = r;
  return true;
}

/* A new intermediate value named after `base`, of float32 and the given
 * shape. */
static er_status new_value(er_graph *g, const char *base, const char *what, int rank, const int64_t *dims,
                           int32_t *id_out) {
  char name[256];
  for (int k = 0;; k++) {
    snprintf(name, sizeof name, "%s/er_%s%s%d", base, what, k ? "_" : "", k);
    if (er__graph_find(g, name) < 0) break;
  }
  char *copy = er__arena_strdup(g->arena, name);
  if (!copy) return ER_STATUS_OUT_OF_MEMORY;
  ER_CHECK(er__graph_add_value(g, copy, id_out));
  er__tensor_set(&g->values[*id_out].info, ER_DTYPE_FLOAT, rank, dims);
  return ER_STATUS_OK;
}

static er_status set_attention(er_graph *g, er_node *n, const int32_t *ins, int n_ins, float scale,
                               int64_t heads) {
  ER_CHECK(set_inputs(g, n, ins, n_ins));
  ER_CHECK(make_standard(n, "Attention", 23));
  er_attr attrs[3];
  memset(attrs, 0, sizeof attrs);
  attrs[0].name = "scale";
  attrs[0].type = ER_ATTR_FLOAT;
  attrs[0].f = scale;
  attrs[1].name = "q_num_heads";
  attrs[1].type = ER_ATTR_INT;
  attrs[1].i = heads;
  attrs[2].name = "kv_num_heads";
  attrs[2].type = ER_ATTR_INT;
  attrs[2].i = heads;
  n->n_attrs = 0;
  return add_attrs(g, n, attrs, heads > 0 ? 3 : 1);
}

static er_status pass_attention(pass_ctx *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    attn_match m;
    if (!attn_core(pc, i, &m)) continue;
    attn_split hs[3];
    int32_t gone[8], last;
    int32_t chain[4] = {m.mm1, m.scale_op, m.add, m.softmax};
    if (attn_3d(pc, &m, hs, gone, &last)) {
      int32_t ins[4] = {hs[0].x3, hs[1].x3, hs[2].x3, m.mask};
      ER_CHECK(set_attention(g, &g->nodes[last], ins, m.mask >= 0 ? 4 : 3, m.scale, hs[0].heads));
      for (int k = 0; k < 8; k++) pc->dead[gone[k]] = true;
      for (int k = 0; k < 4; k++)
        if (chain[k] >= 0) pc->dead[chain[k]] = true;
      pc->changed++;
      count_uses(pc);
      continue;
    }
    /* The 4-D form: K [B,H,T,D] from KT. A Transpose making KT (read only
     * here) takes the composed perm; otherwise the first MatMul's node
     * becomes Transpose(KT, [0,1,3,2]). */
    int32_t k = -1, kt = m.kt, tp = g->values[kt].producer;
    er_node *t = tp >= 0 && !pc->dead[tp] && pc->uses[kt] == 1 ? &g->nodes[tp] : NULL;
    const er_attr *pa = t && is_op(t, "Transpose") ? er__node_attr(t, "perm") : NULL;
    if (pa && pa->type == ER_ATTR_INTS && pa->n == 4) {
      int64_t *perm = er__arena_array(g->arena, 5, sizeof *perm);
      if (!perm) return ER_STATUS_OUT_OF_MEMORY;
      perm[0] = pa->ints[0], perm[1] = pa->ints[1], perm[2] = pa->ints[3], perm[3] = pa->ints[2];
      if (perm[0] == 0 && perm[1] == 1 && perm[2] == 2 && perm[3] == 3) {
        k = t->inputs[0];
        pc->dead[tp] = true;
      } else {
        ER_CHECK(set_perm(g, t, perm, 4));
        er_tensor *info = &g->values[kt].info;
        int64_t d2 = info->dims[2];
        info->dims[2] = info->dims[3];
        info->dims[3] = d2;
        k = kt;
      }
      pc->dead[m.mm1] = true;
    } else {
      const er_tensor *ki = &g->values[kt].info;
      int64_t kd[4] = {ki->dims[0], ki->dims[1], ki->dims[3], ki->dims[2]};
      er_node *mm = &g->nodes[m.mm1];
      ER_CHECK(new_value(g, mm->name[0] ? mm->name : "attention", "key", 4, kd, &k));
      mm = &g->nodes[m.mm1];
      g->values[mm->outputs[0]].producer = -1;
      mm->outputs[0] = k;
      g->values[k].producer = m.mm1;
      int32_t in1[1] = {kt};
      ER_CHECK(set_inputs(g, mm, in1, 1));
      ER_CHECK(make_standard(mm, "Transpose", 13));
      static const int64_t swap[4] = {0, 1, 3, 2};
      int64_t *perm = er__arena_array(g->arena, 5, sizeof *perm);
      if (!perm) return ER_STATUS_OUT_OF_MEMORY;
      memcpy(perm, swap, sizeof swap);
      mm->n_attrs = 0;
      ER_CHECK(set_perm(g, mm, perm, 4));
      chain[0] = -1;
    }
    int32_t ins[4] = {m.q, k, m.v, m.mask};
    ER_CHECK(set_attention(g, &g->nodes[m.mm2], ins, m.mask >= 0 ? 4 : 3, m.scale, 0));
    for (int j = 0; j < 4; j++)
      if (chain[j] >= 0) pc->dead[chain[j]] = true;
    pc->changed++;
    count_uses(pc);
  }
  return ER_STATUS_OK;
}

/* ---- driver ------------------------------------------------------------------ */

/* Runs `passes` (a NULL-terminated list) to a fixed point, at most three
 * rounds, then drops dead nodes (order is kept, so it stays topological). */
typedef er_status (*pass_fn)(pass_ctx *pc);

static er_status run_passes(er_graph *g, bool identity, const pass_fn *passes) {
  pass_ctx pc = {g, NULL, 0, NULL, 0};
  er_status st = ER_STATUS_OK;
  /* Rewrites add values (folded weights and biases): at most three per
   * node over all rounds, so this capacity never runs out. */
  pc.cap = (size_t)g->n_values + 3 * (size_t)g->n_nodes + 64;
  pc.uses = calloc(pc.cap, sizeof *pc.uses);
  pc.dead = calloc((size_t)g->n_nodes + 1, sizeof *pc.dead);
  if (!pc.uses || !pc.dead) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory optimizing graph '%s'", g->name);
    goto done;
  }
  count_uses(&pc);
  if (identity) pass_identity(&pc);
  for (int round = 0; round < 3 && st == ER_STATUS_OK; round++) {
    int before = pc.changed;
    for (const pass_fn *p = passes; *p && st == ER_STATUS_OK; p++) st = (*p)(&pc);
    if (pc.changed == before) break;
  }
  if (st == ER_STATUS_OK && pc.changed) er__graph_remove_nodes(g, pc.dead);
done:
  free(pc.uses);
  free(pc.dead);
  return st;
}

er_status er__graph_optimize_basic(er_graph *g) {
  static const pass_fn passes[] = {pass_conv_bn,   pass_conv_mul, pass_conv_bias, pass_transpose,
                                   pass_reshape,   pass_slice,    NULL};
  return run_passes(g, true, passes);
}

er_status er__graph_optimize_fusion(er_graph *g) {
  /* The QDQ pass runs before this one (pass-table.c): these passes see
   * what stays float. Order matters within a round: LayerNorm before the matmul/bias
   * fusion can take its Add; the residual before the activation, so
   * Conv + Add + Relu becomes one node. */
  static const pass_fn passes[] = {pass_layernorm, pass_matmul_bias, pass_hardswish, pass_bn_affine,
                                   pass_conv_add, pass_activation, pass_gelu, pass_attention, NULL};
  return run_passes(g, false, passes);
}
