/* contrib.c - onnxruntime's com.microsoft QLinear operators, rewritten at
 * load into the standard pattern each stands for:
 *
 *   QLinearAdd, QLinearMul          DQ(A), DQ(B) -> Add | Mul -> Q
 *   QLinearSigmoid, QLinearLeakyRelu DQ(X) -> Sigmoid | LeakyRelu(alpha) -> Q
 *   QLinearAveragePool              DQ(X) -> AveragePool(attributes) -> Q
 *   QLinearGlobalAveragePool        DQ(X) -> GlobalAveragePool -> Q
 *   QLinearConcat                   DQ(X_i) ... -> Concat(axis) -> Q
 *   QLinearSoftmax                  DQ(X) -> Softmax(axis) -> Q
 *   QGemm                           DQ(A), DQ(B), DQ(C; scale a_scale * b_scale)
 *                                   -> Gemm(alpha, transA, transB) [-> Q]
 *
 * They make up onnxruntime's "QOperator" quantization format
 * (quantize_static with QuantFormat.QOperator; the ONNX model zoo's int8
 * models) together with the standard QLinearConv and QLinearMatMul. Each
 * contrib op is defined as dequantize, compute in float, quantize; written
 * out that way, the standard reference kernels are its reference, and the
 * session's QDQ pass (graph/passes-qdq.c) fuses the pattern back into
 * edgerun's integer kernels (QAdd, QMul, QAvgPool, tables for the
 * activations). onnxruntime's own kernels fold the scales differently
 * (for QLinearAdd, (A - az) * as / cs + (B - bz) * bs / cs), so the two
 * runtimes may differ by one quantization step where a value rounds at .5.
 *
 * The rewrite runs after validation (nodes in topological order, producers
 * known) and before the ops are bound, so the new nodes bind to the
 * model's default-domain opset like the rest; DequantizeLinear needs 10 or
 * later, and a QLinearSoftmax whose `opset` attribute and the model's opset
 * disagree on Softmax's axis rule (before 13: the input flattened to 2-D
 * at the axis) is refused by name. channels_last pools are refused too. */
#include <stdio.h>
#include <stdlib.h>

#include "graph/graph.h"
#include "graph/rewrite.h"

#define MS_DOMAIN "com.microsoft"

static bool is_ms(const er_node *n, const char *op) { return er__rw_is_in(n, MS_DOMAIN, op); }

static bool expands(const er_node *n) {
  static const char *const ops[] = {"QLinearAdd",         "QLinearMul",           "QLinearSigmoid",
                                    "QLinearLeakyRelu",   "QLinearAveragePool",   "QLinearGlobalAveragePool",
                                    "QLinearConcat",      "QLinearSoftmax",       "QGemm"};
  for (size_t i = 0; i < ER_ARRAY_LEN(ops); i++)
    if (is_ms(n, ops[i])) return true;
  return false;
}

/* Input i of n, or -1 when absent. */
static int32_t in_at(const er_node *n, int i) { return i < n->n_inputs ? n->inputs[i] : -1; }

/* Appends a default-domain node `op` named `<src name>/<suffix>`. */
static er_status emit(er_rw_list *l, const er_node *src, const char *op, const char *suffix, const int32_t *in, int n_in,
                      int32_t out, er_attr *attrs, int n_attrs) {
  er_graph *g = l->g;
  er_node n;
  memset(&n, 0, sizeof n);
  char name[512];
  snprintf(name, sizeof name, "%s/%s", src->name[0] ? src->name : src->op_type, suffix);
  n.name = er__arena_strdup(g->arena, name);
  n.op_type = op;
  n.domain = "";
  n.inputs = er__arena_array(g->arena, (size_t)n_in + 1, sizeof *n.inputs);
  n.outputs = er__arena_array(g->arena, 2, sizeof *n.outputs);
  if (!n.name || !n.inputs || !n.outputs) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory expanding contrib operators");
  /* Trailing omitted inputs are dropped (an absent zero point). */
  while (n_in > 0 && in[n_in - 1] < 0) n_in--;
  memcpy(n.inputs, in, (size_t)n_in * sizeof *in);
  n.n_inputs = n_in;
  n.outputs[0] = out;
  n.n_outputs = 1;
  n.attrs = attrs;
  n.n_attrs = n_attrs;
  return er__rw_list_push(l, &n);
}

/* DequantizeLinear of (x, scale, zp) into a new value. */
static er_status dq(er_rw_list *l, const er_node *src, int32_t x, int32_t s, int32_t z, const char *tag, int32_t *out) {
  if (x < 0 || s < 0)
    return er__error(ER_STATUS_INVALID_GRAPH, "%s node '%s': a quantized input or its scale is missing", src->op_type,
                     src->name);
  ER_CHECK(er__rw_new_value(l->g, l->g->values[x].name, tag, ER_DTYPE_UNDEFINED, -1, NULL, out));
  int32_t in[3] = {x, s, z};
  char suffix[32];
  snprintf(suffix, sizeof suffix, "er_%s", tag);
  return emit(l, src, "DequantizeLinear", suffix, in, 3, *out, NULL, 0);
}

/* Copies the attributes of n named in `keep` (NULL: all but those in
 * `drop`) into the arena. */
static er_status copy_attrs(er_graph *g, const er_node *n, const char *const *keep, int n_keep, const char *drop,
                            er_attr **out, int *n_out) {
  *out = NULL;
  *n_out = 0;
  if (!n->n_attrs) return ER_STATUS_OK;
  er_attr *a = er__arena_array(g->arena, (size_t)n->n_attrs + 1, sizeof *a);
  if (!a) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory expanding contrib operators");
  int w = 0;
  for (int i = 0; i < n->n_attrs; i++) {
    bool take = keep == NULL;
    for (int k = 0; k < n_keep; k++)
      if (strcmp(n->attrs[i].name, keep[k]) == 0) take = true;
    if (drop && strcmp(n->attrs[i].name, drop) == 0) take = false;
    if (take) a[w++] = n->attrs[i];
  }
  *out = a;
  *n_out = w;
  return ER_STATUS_OK;
}

static er_status expand(er_rw_list *l, const er_node *n, int64_t opset) {
  er_graph *g = l->g;
  if (n->n_outputs < 1 || n->outputs[0] < 0)
    return er__error(ER_STATUS_INVALID_GRAPH, "%s node '%s' has no output", n->op_type, n->name);
  if (opset < 10)
    return er__error(ER_STATUS_UNSUPPORTED,
                     "%s node '%s': expressing %s.%s needs DequantizeLinear (opset 10 or later); the model imports "
                     "opset %lld",
                     n->op_type, n->name, MS_DOMAIN, n->op_type, (long long)opset);
  const int32_t y = n->outputs[0];
  const char *base = g->values[y].name;
  int32_t f = -1, r = -1; /* the float inputs' value and the float result */
  ER_CHECK(er__rw_new_value(g, base, "f", ER_DTYPE_UNDEFINED, -1, NULL, &r));
  const er_attr *cl = er__node_attr(n, "channels_last");
  if (cl && cl->i != 0)
    return er__error(ER_STATUS_UNSUPPORTED, "%s node '%s': channels_last = %lld is not supported", n->op_type, n->name,
                     (long long)cl->i);
  int32_t ys, yz;
  if (is_ms(n, "QGemm")) {
    /* A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale,
     * y_zero_point: B's scale per tensor or per output column (axis 0 of
     * B when transB, else 1); C int32 with scale a_scale * b_scale. */
    const er_attr *tb = er__node_attr(n, "transB");
    int64_t axis = tb && tb->i ? 0 : 1;
    int32_t a, b;
    ER_CHECK(dq(l, n, in_at(n, 0), in_at(n, 1), in_at(n, 2), "dqa", &a));
    ER_CHECK(dq(l, n, in_at(n, 3), in_at(n, 4), in_at(n, 5), "dqb", &b));
    /* dq() made B's node without an axis: give it one (a per-tensor scale
     * ignores it). */
    er_attr *ax = er__arena_array(g->arena, 3, sizeof *ax);
    if (!ax) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory expanding contrib operators");
    ax[0].name = ax[1].name = "axis";
    ax[0].type = ax[1].type = ER_ATTR_INT;
    ax[0].i = axis;
    ax[1].i = 0; /* C's: its only axis */
    l->nodes[l->n - 1].attrs = &ax[0];
    l->nodes[l->n - 1].n_attrs = 1;
    int32_t in[3] = {a, b, -1};
    if (in_at(n, 6) >= 0) {
      int32_t cs, c;
      ER_CHECK(er__rw_new_value(g, base, "cscale", ER_DTYPE_UNDEFINED, -1, NULL, &cs));
      int32_t sin[2] = {in_at(n, 1), in_at(n, 4)};
      ER_CHECK(emit(l, n, "Mul", "er_cscale", sin, 2, cs, NULL, 0));
      ER_CHECK(dq(l, n, in_at(n, 6), cs, -1, "dqc", &c));
      l->nodes[l->n - 1].attrs = &ax[1];
      l->nodes[l->n - 1].n_attrs = 1;
      in[2] = c;
    }
    er_attr *attrs;
    int n_attrs;
    static const char *const keep[] = {"alpha", "transA", "transB"};
    ER_CHECK(copy_attrs(g, n, keep, 3, NULL, &attrs, &n_attrs));
    ys = in_at(n, 7);
    yz = in_at(n, 8);
    /* Without y_scale the output is the float Gemm's. */
    ER_CHECK(emit(l, n, "Gemm", "er_op", in, 3, ys < 0 ? y : r, attrs, n_attrs));
    if (ys < 0) return ER_STATUS_OK;
  } else if (is_ms(n, "QLinearAdd") || is_ms(n, "QLinearMul")) {
    int32_t a, b;
    ER_CHECK(dq(l, n, in_at(n, 0), in_at(n, 1), in_at(n, 2), "dqa", &a));
    ER_CHECK(dq(l, n, in_at(n, 3), in_at(n, 4), in_at(n, 5), "dqb", &b));
    int32_t in[2] = {a, b};
    ER_CHECK(emit(l, n, is_ms(n, "QLinearAdd") ? "Add" : "Mul", "er_op", in, 2, r, NULL, 0));
    ys = in_at(n, 6);
    yz = in_at(n, 7);
  } else if (is_ms(n, "QLinearConcat")) {
    /* Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input. */
    int k = (n->n_inputs - 2) / 3;
    if (k < 1 || (n->n_inputs - 2) % 3 != 0)
      return er__error(ER_STATUS_INVALID_GRAPH, "QLinearConcat node '%s' has %d inputs; it takes 2 + 3 per input",
                       n->name, n->n_inputs);
    int32_t *parts = er__arena_array(g->arena, (size_t)k + 1, sizeof *parts);
    if (!parts) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory expanding contrib operators");
    for (int i = 0; i < k; i++) ER_CHECK(dq(l, n, in_at(n, 2 + 3 * i), in_at(n, 3 + 3 * i), in_at(n, 4 + 3 * i), "dq", &parts[i]));
    er_attr *attrs;
    int n_attrs;
    static const char *const keep[] = {"axis"};
    ER_CHECK(copy_attrs(g, n, keep, 1, NULL, &attrs, &n_attrs));
    ER_CHECK(emit(l, n, "Concat", "er_op", parts, k, r, attrs, n_attrs));
    ys = in_at(n, 0);
    yz = in_at(n, 1);
  } else {
    /* One input: X, X_scale, X_zero_point, Y_scale, Y_zero_point. */
    ER_CHECK(dq(l, n, in_at(n, 0), in_at(n, 1), in_at(n, 2), "dq", &f));
    er_attr *attrs = NULL;
    int n_attrs = 0;
    const char *op;
    if (is_ms(n, "QLinearSigmoid")) {
      op = "Sigmoid";
    } else if (is_ms(n, "QLinearLeakyRelu")) {
      static const char *const keep[] = {"alpha"};
      ER_CHECK(copy_attrs(g, n, keep, 1, NULL, &attrs, &n_attrs));
      op = "LeakyRelu";
    } else if (is_ms(n, "QLinearAveragePool")) {
      ER_CHECK(copy_attrs(g, n, NULL, 0, "channels_last", &attrs, &n_attrs));
      op = "AveragePool";
    } else if (is_ms(n, "QLinearGlobalAveragePool")) {
      op = "GlobalAveragePool";
    } else {
      /* QLinearSoftmax: `opset` is the Softmax version whose axis rule
       * applies; the new Softmax takes the model's. */
      const er_attr *os = er__node_attr(n, "opset");
      if (!os)
        return er__error(ER_STATUS_INVALID_ATTRIBUTE, "QLinearSoftmax node '%s': required attribute 'opset' is missing",
                         n->name);
      if ((os->i < 13) != (opset < 13))
        return er__error(ER_STATUS_UNSUPPORTED,
                         "QLinearSoftmax node '%s': its opset %lld and the model's opset %lld give Softmax different "
                         "axis rules (13 changed them)",
                         n->name, (long long)os->i, (long long)opset);
      static const char *const keep[] = {"axis"};
      ER_CHECK(copy_attrs(g, n, keep, 1, NULL, &attrs, &n_attrs));
      op = "Softmax";
    }
    int32_t in[1] = {f};
    ER_CHECK(emit(l, n, op, "er_op", in, 1, r, attrs, n_attrs));
    ys = in_at(n, 3);
    yz = in_at(n, 4);
  }
  if (ys < 0)
    return er__error(ER_STATUS_INVALID_GRAPH, "%s node '%s': the output scale is missing", n->op_type, n->name);
  int32_t qin[3] = {r, ys, yz};
  return emit(l, n, "QuantizeLinear", "er_q", qin, 3, y, NULL, 0);
}

er_status er__graph_expand_contrib(er_graph *g) {
  bool any = false;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    er_node *n = &g->nodes[i];
    if (expands(n)) any = true;
    for (int a = 0; a < n->n_attrs; a++) {
      er_attr *at = &n->attrs[a];
      if (at->type == ER_ATTR_GRAPH) ER_CHECK(er__graph_expand_contrib(at->g));
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n; j++) ER_CHECK(er__graph_expand_contrib(at->graphs[j]));
    }
  }
  if (!any) return ER_STATUS_OK;
  int64_t opset = g->model ? g->model->default_opset : -1;
  er_rw_list l;
  er__rw_list_init(&l, g);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    if (expands(n)) ER_CHECK(expand(&l, n, opset));
    else ER_CHECK(er__rw_list_push(&l, n));
  }
  if (g->model && (uint64_t)l.n > g->model->limits.max_nodes)
    return er__error(ER_STATUS_LIMIT, "graph '%s' has %d nodes once its contrib operators are expanded; more than %u "
                     "(max_nodes)", g->name, l.n, g->model->limits.max_nodes);
  er__rw_list_commit(&l);
  return ER_STATUS_OK;
}
