/* passes-activation.c - activations fused into the node that feeds them,
 * and activations written as primitives recognised (see passes.h for the
 * contract every rewrite keeps):
 *
 *   gemm/conv act  Conv/Gemm/FusedMatMul + activation -> fused activation
 *                  (Relu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish,
 *                   LeakyRelu, x*Sigmoid(x), Gelu and its Erf and tanh
 *                   patterns)
 *   conv_add       Conv + Add(residual) [+ activation] -> FusedConv
 *   gelu           0.5*x*(1+Erf(x/sqrt 2)) -> Gelu
 *                  0.5*x*(1+Tanh(sqrt(2/pi)*(x+0.044715*x^3)))
 *                  -> Gelu(approximate="tanh")
 *   hardswish      x*Clip(x+3,0,6)/6, x*HardSigmoid(x) -> HardSwish */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/passes.h"

/* The activation node `consumer` applies, if it is one fusion supports;
 * *out_value receives its output. (x * Sigmoid(x) and GELU from
 * primitives are matched by silu_of and gelu_of.) */
static bool activation_of(const er_rewrite *pc, int32_t consumer, er_activation *act, int32_t *out_value) {
  const er_graph *g = pc->g;
  const er_node *n = &g->nodes[consumer];
  memset(act, 0, sizeof *act);
  if (n->n_outputs != 1 || n->outputs[0] < 0) return false;
  *out_value = n->outputs[0];
  if (er__rw_is(n, "Relu")) {
    act->kind = ER_ACT_RELU;
    return true;
  }
  if (er__rw_is(n, "Sigmoid")) {
    act->kind = ER_ACT_SIGMOID;
    return true;
  }
  if (er__rw_is(n, "Tanh")) {
    act->kind = ER_ACT_TANH;
    return true;
  }
  if (er__rw_is(n, "HardSwish")) {
    act->kind = ER_ACT_HARDSWISH;
    return true;
  }
  if (er__rw_is(n, "Gelu")) {
    const er_attr *a = er__node_attr(n, "approximate");
    act->kind = a && a->type == ER_ATTR_STRING && strcmp(a->s, "tanh") == 0 ? ER_ACT_GELU_TANH : ER_ACT_GELU;
    return true;
  }
  if (er__rw_is(n, "LeakyRelu")) {
    const er_attr *a = er__node_attr(n, "alpha");
    act->kind = ER_ACT_LEAKYRELU;
    act->p[0] = a && a->type == ER_ATTR_FLOAT ? a->f : 0.01f;
    return true;
  }
  if (er__rw_is(n, "HardSigmoid")) {
    const er_attr *a = er__node_attr(n, "alpha"), *b = er__node_attr(n, "beta");
    act->kind = ER_ACT_HARDSIGMOID;
    act->p[0] = a && a->type == ER_ATTR_FLOAT ? a->f : 0.2f;
    act->p[1] = b && b->type == ER_ATTR_FLOAT ? b->f : 0.5f;
    return true;
  }
  if (er__rw_is(n, "Clip")) {
    double lo = -INFINITY, hi = INFINITY;
    if (n->version < 11) {
      const er_attr *a = er__node_attr(n, "min"), *b = er__node_attr(n, "max");
      if (a && a->type == ER_ATTR_FLOAT) lo = a->f;
      if (b && b->type == ER_ATTR_FLOAT) hi = b->f;
    } else {
      if (n->n_inputs > 1 && n->inputs[1] >= 0 && isnan(lo = er__rw_const_scalar(g, n->inputs[1]))) return false;
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && isnan(hi = er__rw_const_scalar(g, n->inputs[2]))) return false;
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
static bool silu_of(const er_rewrite *pc, int32_t x, int32_t *mul_out, int32_t *sig_out) {
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
    if (er__rw_is(n, "Sigmoid")) sig = i;
    else if (er__rw_is(n, "Mul") && n->n_inputs == 2) mul = i;
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


/* GELU from primitives, as exporters write 0.5 * x * (1 + erf(x / sqrt 2)):
 * x feeds D = Div(x, sqrt 2) (or Mul(x, 1/sqrt 2)) and one Mul; D -> Erf ->
 * A = Add(., 1); the two Muls with x and 0.5 then combine in one of three
 * orders: (x * A) * 0.5, x * (A * 0.5), or (x * 0.5) * A. On success
 * nodes[] holds the five nodes and *out the final value. */
static bool gelu_of(const er_rewrite *pc, int32_t x, int32_t nodes[5], int32_t *out) {
  const er_graph *g = pc->g;
  if (pc->uses[x] != 2) return false;
  int32_t div = -1, mulx = -1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    if (n->n_inputs < 2) continue;
    if (er__rw_is(n, "Div") && n->inputs[0] == x && fabs(er__rw_const_scalar(g, n->inputs[1]) - sqrt(2.0)) < 1e-4)
      div = i;
    else if (er__rw_is(n, "Mul") && n->inputs[0] == x && fabs(er__rw_const_scalar(g, n->inputs[1]) - sqrt(0.5)) < 1e-4)
      div = i;
    else if (er__pass_mul_other(n, x) >= 0)
      mulx = i;
  }
  if (div < 0 || mulx < 0) return false;
  int32_t erf = er__rw_sole_consumer(pc, g->nodes[div].outputs[0]);
  if (erf < 0 || !er__rw_is(&g->nodes[erf], "Erf")) return false;
  int32_t e = g->nodes[erf].outputs[0];
  int32_t add = er__rw_sole_consumer(pc, e);
  if (add < 0 || !er__rw_is(&g->nodes[add], "Add")) return false;
  const er_node *an = &g->nodes[add];
  if (fabs(er__rw_const_scalar(g, an->inputs[0] == e ? an->inputs[1] : an->inputs[0]) - 1.0) > 1e-6) return false;
  int32_t a = an->outputs[0];
  const er_node *mx = &g->nodes[mulx];
  int32_t mx_other = er__pass_mul_other(mx, x), last = -1;
  if (mx_other == a) {
    /* (x * A) * 0.5 */
    last = er__rw_sole_consumer(pc, mx->outputs[0]);
    if (last < 0 || fabs(er__rw_const_scalar(g, er__pass_mul_other(&g->nodes[last], mx->outputs[0])) - 0.5) > 1e-6) return false;
  } else if (fabs(er__rw_const_scalar(g, mx_other) - 0.5) < 1e-6) {
    /* (x * 0.5) * A */
    last = er__rw_sole_consumer(pc, mx->outputs[0]);
    if (last < 0 || er__pass_mul_other(&g->nodes[last], mx->outputs[0]) != a || pc->uses[a] != 1) return false;
  } else {
    /* x * (A * 0.5): mulx reads the half-product H = Mul(A, 0.5). */
    int32_t h = er__rw_sole_consumer(pc, a);
    if (h < 0 || fabs(er__rw_const_scalar(g, er__pass_mul_other(&g->nodes[h], a)) - 0.5) > 1e-6) return false;
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
static bool mul_factors(const er_rewrite *pc, int32_t v, int32_t x, bool root, mul_tree *t, int depth) {
  const er_graph *g = pc->g;
  if (v == x) {
    t->nx++;
    return true;
  }
  double c = er__rw_const_scalar(g, v);
  if (!isnan(c)) {
    t->k *= c;
    return true;
  }
  int32_t p = v >= 0 ? g->values[v].producer : -1;
  const er_node *n = p >= 0 && !pc->dead[p] ? &g->nodes[p] : NULL;
  bool single = root || pc->uses[v] == 1;
  if (n && single && depth > 0 && t->n_nodes < GELU_TANH_MAX_NODES) {
    if (er__rw_is(n, "Mul") && n->n_inputs == 2) {
      t->nodes[t->n_nodes++] = p;
      return mul_factors(pc, n->inputs[0], x, false, t, depth - 1) &&
             mul_factors(pc, n->inputs[1], x, false, t, depth - 1);
    }
    if (er__rw_is(n, "Pow") && n->n_inputs == 2 && n->inputs[0] == x && er__rw_const_scalar(g, n->inputs[1]) == 3.0) {
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
static bool gelu_tanh_of(const er_rewrite *pc, int32_t ti, int32_t *x_out, int32_t *nodes, int *n_nodes,
                         int32_t *out) {
  const er_graph *g = pc->g;
  const er_node *tn = &g->nodes[ti];
  if (pc->dead[ti] || !er__rw_is(tn, "Tanh") || tn->n_inputs != 1 || pc->uses[tn->inputs[0]] != 1) return false;
  /* u = sqrt(2/pi) * S */
  mul_tree tu = {0, 1.0, -1, 0, {0}, 0};
  if (!mul_factors(pc, tn->inputs[0], -1, true, &tu, 4) || tu.n_nodes == 0 || tu.n_other != 1 ||
      !near(tu.k, 0.7978845608028654, 1e-4))
    return false;
  /* S = x + 0.044715 x^3 */
  int32_t sv = tu.other, sp = g->values[sv].producer;
  if (sp < 0 || pc->dead[sp] || pc->uses[sv] != 1 || !er__rw_is(&g->nodes[sp], "Add") || g->nodes[sp].n_inputs != 2)
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
  int32_t tv = tn->outputs[0], ai = er__rw_sole_consumer(pc, tv);
  if (ai < 0 || !er__rw_is(&g->nodes[ai], "Add") || g->nodes[ai].n_inputs != 2) return false;
  const er_node *an = &g->nodes[ai];
  if (er__rw_const_scalar(g, an->inputs[0] == tv ? an->inputs[1] : an->inputs[0]) != 1.0) return false;
  int32_t a = an->outputs[0];
  /* y = 0.5 * x * A: the product tree rooted one or two Muls above A. */
  int32_t m1 = er__rw_sole_consumer(pc, a);
  if (m1 < 0 || !er__rw_is(&g->nodes[m1], "Mul")) return false;
  int32_t m2 = er__rw_sole_consumer(pc, g->nodes[m1].outputs[0]);
  int32_t roots[2] = {m2 >= 0 && er__rw_is(&g->nodes[m2], "Mul") ? m2 : -1, m1};
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

/* ---- HardSwish from primitives ------------------------------------------- */

/* A one-value float constant equal to `want` (to float rounding). */
static bool scalar_is(const er_graph *g, int32_t v, double want) {
  double c = er__rw_const_scalar(g, v);
  return !isnan(c) && fabs(c - want) <= 1e-6 * fabs(want);
}

/* Binary node n reads v and a one-value constant equal to `want` (either
 * order for a commutative op, only as the second input otherwise). */
static bool binary_with(const er_graph *g, const er_node *n, const char *op, int32_t v, double want, bool commutes) {
  if (!er__rw_is(n, op) || n->n_inputs != 2 || n->n_outputs != 1) return false;
  if (n->inputs[0] == v && scalar_is(g, n->inputs[1], want)) return true;
  return commutes && n->inputs[1] == v && scalar_is(g, n->inputs[0], want);
}

/* Clip node n bounds its input to [lo, hi], bounds as constants. */
static bool clip_is(const er_graph *g, const er_node *n, double lo, double hi) {
  if (!er__rw_is(n, "Clip") || n->n_outputs != 1) return false;
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
  return er__rw_is(n, "Mul") && n->n_inputs == 2 && n->n_outputs == 1 &&
         ((n->inputs[0] == x && n->inputs[1] == v) || (n->inputs[1] == x && n->inputs[0] == v));
}

/* x * Clip(x + 3, 0, 6) / 6 with the division before or after the product
 * (paddle2onnx writes Add, Clip, Mul, Div; PyTorch's x * relu6(x + 3) / 6
 * the same), and x * HardSigmoid(x) with alpha 1/6 and beta 1/2 (TF
 * exports): one HardSwish, which the activation pass then fuses into the
 * convolution before it. PP-OCRv4's recognizer spent 6 of its 17 ms in
 * the four elementwise ops. The intermediates must have no other reader. */
er_status er__pass_hardswish(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    int32_t x = -1, gone[3] = {-1, -1, -1}, last = -1;
    if (er__rw_is(n, "Add") && n->n_inputs == 2 && n->n_outputs == 1) {
      x = scalar_is(g, n->inputs[1], 3.0) ? n->inputs[0] : scalar_is(g, n->inputs[0], 3.0) ? n->inputs[1] : -1;
      if (x < 0 || !er__rw_is_f32(g, x) || !binary_with(g, n, "Add", x, 3.0, true)) continue;
      int32_t c = er__rw_sole_consumer(pc, n->outputs[0]);
      if (c < 0 || !clip_is(g, &g->nodes[c], 0.0, 6.0)) continue;
      int32_t cv = g->nodes[c].outputs[0], k = er__rw_sole_consumer(pc, cv);
      if (k < 0) continue;
      const er_node *kn = &g->nodes[k];
      int32_t f = er__rw_sole_consumer(pc, kn->outputs[0]);
      if (f < 0) continue;
      if (mul_of(kn, x, cv) && sixth_of(g, &g->nodes[f], kn->outputs[0])) {
        /* (x * clip) / 6 */
      } else if (sixth_of(g, kn, cv) && mul_of(&g->nodes[f], x, kn->outputs[0])) {
        /* x * (clip / 6) */
      } else {
        continue;
      }
      gone[0] = i, gone[1] = c, gone[2] = k, last = f;
    } else if (er__rw_is(n, "HardSigmoid") && n->n_inputs == 1 && n->n_outputs == 1) {
      const er_attr *a = er__node_attr(n, "alpha"), *b = er__node_attr(n, "beta");
      double alpha = a && a->type == ER_ATTR_FLOAT ? a->f : 0.2, beta = b && b->type == ER_ATTR_FLOAT ? b->f : 0.5;
      x = n->inputs[0];
      if (!er__rw_is_f32(g, x) || fabs(alpha - 1.0 / 6.0) > 1e-6 || beta != 0.5) continue;
      int32_t f = er__rw_sole_consumer(pc, n->outputs[0]);
      if (f < 0 || !mul_of(&g->nodes[f], x, n->outputs[0])) continue;
      gone[0] = i, last = f;
    } else {
      continue;
    }
    er_node *fn = &g->nodes[last];
    ER_CHECK(er__rw_set_inputs(g, fn, &x, 1));
    ER_CHECK(er__rw_set_op(fn, "", "HardSwish", 14));
    fn->n_attrs = 0;
    for (int k = 0; k < 3; k++)
      if (gone[k] >= 0) pc->dead[gone[k]] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

/* Fuses a following activation into Conv/FusedConv/Gemm/FusedGemm/
 * MatMul/FusedMatMul nodes that have none yet. */
er_status er__pass_activation(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *n = &g->nodes[i];
    bool conv = er__rw_is(n, "Conv") || (strcmp(n->domain, ER_FUSED_DOMAIN) == 0 && strcmp(n->op_type, "FusedConv") == 0);
    bool gemm = er__rw_is(n, "Gemm") || (strcmp(n->domain, ER_FUSED_DOMAIN) == 0 && strcmp(n->op_type, "FusedGemm") == 0);
    bool mm = er__rw_is(n, "MatMul") || (strcmp(n->domain, ER_FUSED_DOMAIN) == 0 && strcmp(n->op_type, "FusedMatMul") == 0);
    if (!(conv || gemm || mm) || n->n_outputs != 1 || !er__rw_is_f32(g, n->outputs[0])) continue;
    if (er__node_attr(n, "activation")) continue;
    int32_t y = n->outputs[0];
    er_activation act;
    int32_t out = -1, dead[GELU_TANH_MAX_NODES * 3 + 3];
    int n_dead = 0;
    int32_t c = er__rw_sole_consumer(pc, y);
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
          if (pc->dead[t] || !er__rw_is(&g->nodes[t], "Tanh")) continue;
          int nn;
          if (gelu_tanh_of(pc, t, &tx, dead, &nn, &out) && tx == y && reads_of(g, dead, nn, y) == pc->uses[y])
            n_dead = nn;
        }
        if (n_dead == 0) continue;
        memset(&act, 0, sizeof act);
        act.kind = ER_ACT_GELU_TANH;
      }
    }
    if (conv) ER_CHECK(er__rw_set_op(n, ER_FUSED_DOMAIN, "FusedConv", 1));
    else if (gemm) ER_CHECK(er__rw_set_op(n, ER_FUSED_DOMAIN, "FusedGemm", 1));
    else ER_CHECK(er__rw_set_op(n, ER_FUSED_DOMAIN, "FusedMatMul", 1));
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
    ER_CHECK(er__rw_merge_attrs(g, n, extra_attrs, n_extra));
    er__rw_redirect_output(g, i, y, out);
    for (int k = 0; k < n_dead; k++) pc->dead[dead[k]] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

/* Conv + Add(residual) (or a Sum of two): the residual must already exist
 * when the conv runs, i.e. be produced by an earlier node (or be an
 * input/constant). */
er_status er__pass_conv_add(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *n = &g->nodes[i];
    if (!er__rw_is(n, "Conv") || n->n_outputs != 1 || !er__rw_is_f32(g, n->outputs[0])) continue;
    int32_t y = n->outputs[0];
    int32_t a = er__rw_sole_consumer(pc, y);
    /* Sum of two is Add (ResNets exported at opset 6 and earlier). */
    if (a < 0 || !(er__rw_is(&g->nodes[a], "Add") || (er__rw_is(&g->nodes[a], "Sum") && g->nodes[a].n_inputs == 2)))
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
    ER_CHECK(er__rw_set_inputs(g, n, ins, 4));
    ER_CHECK(er__rw_set_op(n, ER_FUSED_DOMAIN, "FusedConv", 1));
    er__rw_redirect_output(g, i, y, add->outputs[0]);
    pc->dead[a] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

/* The node producing `out` becomes Gelu(x) (approximate="tanh" when
 * tanh); the other nodes[0..n) die. */
static er_status become_gelu(er_rewrite *pc, int32_t x, int32_t out, const int32_t *nodes, int n_nodes, bool tanh) {
  er_graph *g = pc->g;
  int32_t last = g->values[out].producer;
  er_node *n = &g->nodes[last];
  int32_t ins[1] = {x};
  ER_CHECK(er__rw_set_inputs(g, n, ins, 1));
  ER_CHECK(er__rw_set_op(n, "", "Gelu", 20));
  n->n_attrs = 0;
  if (tanh) {
    er_attr ap;
    memset(&ap, 0, sizeof ap);
    ap.name = "approximate";
    ap.type = ER_ATTR_STRING;
    ap.s = "tanh";
    ap.s_len = 4;
    ER_CHECK(er__rw_merge_attrs(g, n, &ap, 1));
  }
  for (int k = 0; k < n_nodes; k++)
    if (nodes[k] != last) pc->dead[nodes[k]] = true;
  pc->changed++;
  ER_CHECK(er__rw_count_uses(pc));
  return ER_STATUS_OK;
}

/* Gelu from Erf or tanh primitives not preceded by a fusable producer. */
er_status er__pass_gelu(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t v = 0; v < g->n_values; v++) {
    int32_t nodes[5], out;
    if (er__rw_is_f32(g, v) && gelu_of(pc, v, nodes, &out)) ER_CHECK(become_gelu(pc, v, out, nodes, 5, false));
  }
  for (int32_t t = 0; t < g->n_nodes; t++) {
    int32_t nodes[GELU_TANH_MAX_NODES * 3 + 3], x, out;
    int nn;
    if (!pc->dead[t] && er__rw_is(&g->nodes[t], "Tanh") && gelu_tanh_of(pc, t, &x, nodes, &nn, &out) &&
        er__rw_is_f32(g, x))
      ER_CHECK(become_gelu(pc, x, out, nodes, nn, true));
  }
  return ER_STATUS_OK;
}
