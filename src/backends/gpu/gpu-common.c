/* gpu-common.c - the host side shared by the GPU backends (see
 * gpu-common.h): supports_op, compile and compute over er_gpu_api. */
#include "backends/gpu/gpu-common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/partition.h"
#include "ops/fused.h"
#include "ops/op.h"

/* ======================================================================== */
/* What a GPU backend runs                                                   */
/* ======================================================================== */

typedef enum kind {
  OP_UNARY, OP_BINARY, OP_VARIADIC, OP_AFFINE, OP_CONV, OP_POOL, OP_GEMM, OP_MATMUL, OP_CONCAT,
  OP_ALIAS, OP_TRANSPOSE, OP_SOFTMAX, OP_LRN, OP_QUANT, OP_DEQUANT, OP_QCONV, OP_QMATMUL, OP_FILL,
  OP_CUSTOM
} kind;

static const struct op_entry {
  const char *name;
  kind k;
  int sub;
} op_table[] = {
    {"Relu", OP_UNARY, ER_GPU_U_RELU},          {"Sigmoid", OP_UNARY, ER_GPU_U_SIGMOID},
    {"Tanh", OP_UNARY, ER_GPU_U_TANH},          {"Exp", OP_UNARY, ER_GPU_U_EXP},
    {"Log", OP_UNARY, ER_GPU_U_LOG},            {"Abs", OP_UNARY, ER_GPU_U_ABS},
    {"Neg", OP_UNARY, ER_GPU_U_NEG},            {"Sqrt", OP_UNARY, ER_GPU_U_SQRT},
    {"Reciprocal", OP_UNARY, ER_GPU_U_RECIP},   {"Floor", OP_UNARY, ER_GPU_U_FLOOR},
    {"Ceil", OP_UNARY, ER_GPU_U_CEIL},          {"Erf", OP_UNARY, ER_GPU_U_ERF},
    {"LeakyRelu", OP_UNARY, ER_GPU_U_LEAKY},    {"Elu", OP_UNARY, ER_GPU_U_ELU},
    {"Selu", OP_UNARY, ER_GPU_U_SELU},          {"HardSigmoid", OP_UNARY, ER_GPU_U_HARDSIGMOID},
    {"HardSwish", OP_UNARY, ER_GPU_U_HARDSWISH}, {"Clip", OP_UNARY, ER_GPU_U_CLIP},
    {"Gelu", OP_UNARY, ER_GPU_U_GELU},          {"Softplus", OP_UNARY, ER_GPU_U_SOFTPLUS},
    {"Softsign", OP_UNARY, ER_GPU_U_SOFTSIGN},  {"Sin", OP_UNARY, ER_GPU_U_SIN},
    {"Cos", OP_UNARY, ER_GPU_U_COS},            {"Round", OP_UNARY, ER_GPU_U_ROUND},
    {"Add", OP_BINARY, ER_GPU_B_ADD},           {"Sub", OP_BINARY, ER_GPU_B_SUB},
    {"Mul", OP_BINARY, ER_GPU_B_MUL},           {"Div", OP_BINARY, ER_GPU_B_DIV},
    {"Pow", OP_BINARY, ER_GPU_B_POW},           {"PRelu", OP_BINARY, ER_GPU_B_PRELU},
    {"Sum", OP_VARIADIC, ER_GPU_B_ADD},         {"Max", OP_VARIADIC, ER_GPU_B_MAX},
    {"Min", OP_VARIADIC, ER_GPU_B_MIN},         {"BatchNormalization", OP_AFFINE, 0},
    {"Conv", OP_CONV, 0},                {"MaxPool", OP_POOL, 1},
    {"AveragePool", OP_POOL, 0},         {"GlobalMaxPool", OP_POOL, 3},
    {"GlobalAveragePool", OP_POOL, 2},   {"Gemm", OP_GEMM, 0},
    {"MatMul", OP_MATMUL, 0},            {"Concat", OP_CONCAT, 0},
    {"Reshape", OP_ALIAS, 0},            {"Flatten", OP_ALIAS, 0},
    {"Squeeze", OP_ALIAS, 0},            {"Unsqueeze", OP_ALIAS, 0},
    {"Identity", OP_ALIAS, 0},           {"Dropout", OP_ALIAS, 0},
    {"Transpose", OP_TRANSPOSE, 0},      {"Softmax", OP_SOFTMAX, 0},
    {"LogSoftmax", OP_SOFTMAX, 1},       {"LRN", OP_LRN, 0},
    {"QuantizeLinear", OP_QUANT, 0},     {"DequantizeLinear", OP_DEQUANT, 0},
    {"QLinearConv", OP_QCONV, 0},        {"QLinearMatMul", OP_QMATMUL, 0},
    {"ConstantOfShape", OP_FILL, 0},
};

/* edgerun's fused ops (ops/fused.h) run on the kernels of the op they
 * extend, with the bias, residual and activation as the kernels' epilogue. */
static const struct op_entry fused_table[] = {
    {"FusedConv", OP_CONV, 0}, {"FusedGemm", OP_GEMM, 0}, {"FusedMatMul", OP_MATMUL, 0},
};

static bool is_fused(const er_node *n) { return strcmp(n->domain, ER_FUSED_DOMAIN) == 0; }

static const struct op_entry *find_op(const er_node *n) {
  const struct op_entry *table = op_table;
  size_t count = ER_ARRAY_LEN(op_table);
  if (is_fused(n)) {
    table = fused_table;
    count = ER_ARRAY_LEN(fused_table);
  } else if (n->domain[0] != '\0') {
    return NULL;
  }
  for (size_t i = 0; i < count; i++)
    if (strcmp(table[i].name, n->op_type) == 0) return &table[i];
  return NULL;
}

/* The epilogue activation the kernels compute for `act`, or -1 where they
 * have none: a kind added to er_act later is declined, with its name, until
 * act_f32 in both kernel files learns it. */
static int gpu_act(er_act act) {
  switch (act) {
    case ER_ACT_NONE: return ER_GPU_ACT_NONE;
    case ER_ACT_RELU: return ER_GPU_ACT_RELU;
    case ER_ACT_CLIP: return ER_GPU_ACT_CLIP;
    case ER_ACT_SIGMOID: return ER_GPU_ACT_SIGMOID;
    case ER_ACT_TANH: return ER_GPU_ACT_TANH;
    case ER_ACT_HARDSIGMOID: return ER_GPU_ACT_HARDSIGMOID;
    case ER_ACT_HARDSWISH: return ER_GPU_ACT_HARDSWISH;
    case ER_ACT_LEAKYRELU: return ER_GPU_ACT_LEAKYRELU;
    case ER_ACT_SILU: return ER_GPU_ACT_SILU;
    case ER_ACT_GELU: return ER_GPU_ACT_GELU;
    case ER_ACT_GELU_TANH: return ER_GPU_ACT_GELU_TANH;
    default: return -1;
  }
}

/* A fused node's activation, parsed by the reference's own rule. */
static er_status node_act(const er_graph *g, const er_node *n, er_activation *act) {
  er_kctx kc;
  memset(&kc, 0, sizeof kc);
  kc.node = n;
  kc.checking = true;
  kc.graph = g;
  return er__act_from_node(&kc, act);
}

static er_dtype in_type(const er_graph *g, const er_node *n, int k) {
  return k < n->n_inputs && n->inputs[k] >= 0 ? g->values[n->inputs[k]].info.dtype : ER_DTYPE_UNDEFINED;
}
static int in_rank(const er_graph *g, const er_node *n, int k) {
  return k < n->n_inputs && n->inputs[k] >= 0 ? g->values[n->inputs[k]].info.rank : -2;
}
static bool in_fixed(const er_graph *g, const er_node *n, int k) {
  return k >= n->n_inputs || n->inputs[k] < 0 || er__value_is_fixed(g, n->inputs[k]);
}
static const er_tensor *in_const(const er_graph *g, const er_node *n, int k) {
  if (k >= n->n_inputs || n->inputs[k] < 0 || !er__value_is_fixed(g, n->inputs[k])) return NULL;
  return g->values[n->inputs[k]].constant;
}
/* True when nothing reads value `id` (no node input, not a graph output,
 * and no subgraph that could capture it). */
static bool value_unused(const er_graph *g, int32_t id) {
  if (g->values[id].is_graph_output) return false;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == id) return false;
    for (int a = 0; a < n->n_attrs; a++)
      if (n->attrs[a].type == ER_ATTR_GRAPH || n->attrs[a].type == ER_ATTR_GRAPHS) return false;
  }
  return true;
}

static bool is_q8(er_dtype t) { return t == ER_DTYPE_INT8 || t == ER_DTYPE_UINT8; }

#define NO(...)                         \
  do {                                  \
    snprintf(why, size, __VA_ARGS__);   \
    return false;                       \
  } while (0)

bool er__gpu_supports_op(er_gpu *gpu, const er_graph *g, const er_node *n, char *why, size_t size) {
  if (er__custom_kernel_find(gpu->name, n)) return true;
  const struct op_entry *e = find_op(n);
  if (!e) NO("no %s kernel for %s%s%s", gpu->name, n->domain, n->domain[0] ? "." : "", n->op_type);
  /* Shape rules must be computable from shapes alone: inputs they read
   * by value must be constants. */
  for (int k = 0; k < n->n_inputs && k < 32; k++)
    if ((n->op->value_inputs & (1u << k)) && !in_fixed(g, n, k))
      NO("input %d ('%s') decides the output shape at run time", k, g->values[n->inputs[k]].name);
  for (int k = 0; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0 && g->values[n->inputs[k]].info.rank < 0)
      NO("the rank of input %d is unknown at load", k);
  if (is_fused(n)) {
    er_activation act;
    if (node_act(g, n, &act) != ER_STATUS_OK) NO("%s", er_last_error());
    if (gpu_act(act.kind) < 0)
      NO("activation %s has no %s epilogue kernel", er__act_name(act.kind), gpu->name);
    /* FusedConv's residual (input 3) and FusedMatMul's bias (input 2) are
     * read by the epilogue as float32; FusedGemm's C is Gemm's. */
    int extra = strcmp(n->op_type, "FusedConv") == 0 ? 3 : strcmp(n->op_type, "FusedMatMul") == 0 ? 2 : -1;
    if (extra >= 0 && extra < n->n_inputs && n->inputs[extra] >= 0) {
      if (in_type(g, n, extra) != ER_DTYPE_FLOAT)
        NO("%s input %d is %s, not float32", n->op_type, extra, er_dtype_name(in_type(g, n, extra)));
      if (extra == 2 && in_rank(g, n, 2) != 1) NO("FusedMatMul bias of rank %d (the kernel adds a row)", in_rank(g, n, 2));
    }
  }
  bool quant = e->k == OP_DEQUANT || e->k == OP_QCONV || e->k == OP_QMATMUL || e->k == OP_FILL;
  if (e->k != OP_ALIAS && e->k != OP_CONCAT && e->k != OP_TRANSPOSE && !quant &&
      in_type(g, n, 0) != ER_DTYPE_FLOAT)
    NO("input type %s; the %s kernels compute float32", er_dtype_name(in_type(g, n, 0)), gpu->name);
  size_t es = er_dtype_size(in_type(g, n, 0));
  switch (e->k) {
    case OP_UNARY:
      if (e->sub == ER_GPU_U_CLIP && (!in_fixed(g, n, 1) || !in_fixed(g, n, 2)))
        NO("Clip bounds computed at run time");
      if (strcmp(n->op_type, "Gelu") == 0) {
        const er_attr *a = er__node_attr(n, "approximate");
        if (a && a->type == ER_ATTR_STRING && strcmp(a->s, "none") != 0 && strcmp(a->s, "tanh") != 0)
          NO("Gelu approximate='%s'", a->s);
      }
      return true;
    case OP_BINARY:
    case OP_VARIADIC:
      for (int k = 0; k < n->n_inputs; k++)
        if (in_type(g, n, k) != ER_DTYPE_FLOAT) NO("input %d is not float32", k);
      return true;
    case OP_AFFINE:
      if (n->n_outputs > 1 && (n->outputs[1] >= 0 || (n->n_outputs > 2 && n->outputs[2] >= 0)))
        NO("BatchNormalization in training mode");
      if (er__node_attr_int(n, "training_mode", 0)) NO("BatchNormalization in training mode");
      for (int k = 1; k < 5; k++)
        if (!in_const(g, n, k) || in_const(g, n, k)->dtype != ER_DTYPE_FLOAT)
          NO("BatchNormalization input %d is not a float32 constant", k);
      if (in_rank(g, n, 0) < 2) NO("BatchNormalization of rank %d", in_rank(g, n, 0));
      return true;
    case OP_CONV:
    case OP_QCONV: {
      int r = in_rank(g, n, 0);
      if (r != 3 && r != 4) NO("%dD convolution (the %s kernel does 1D and 2D)", r - 2, gpu->name);
      if (e->k == OP_QCONV) {
        if (!is_q8(in_type(g, n, 0)) || !is_q8(in_type(g, n, 3)))
          NO("QLinearConv of %s x %s (int8/uint8 only)", er_dtype_name(in_type(g, n, 0)),
             er_dtype_name(in_type(g, n, 3)));
        for (int k = 1; k < 9; k++)
          if (k != 3 && k < n->n_inputs && !in_const(g, n, k)) NO("QLinearConv input %d is not a constant", k);
      } else if (in_type(g, n, 1) != ER_DTYPE_FLOAT) {
        NO("Conv weights are not float32");
      }
      return true;
    }
    case OP_POOL: {
      int r = in_rank(g, n, 0);
      if (r != 3 && r != 4) NO("%dD pooling (the %s kernel does 1D and 2D)", r - 2, gpu->name);
      if (n->n_outputs > 1 && n->outputs[1] >= 0) NO("MaxPool with an Indices output");
      return true;
    }
    case OP_GEMM:
      if (in_rank(g, n, 0) != 2 || in_rank(g, n, 1) != 2) NO("Gemm inputs must be 2-D");
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && (in_rank(g, n, 2) > 2 || in_type(g, n, 2) != ER_DTYPE_FLOAT))
        NO("Gemm C of rank %d", in_rank(g, n, 2));
      if (in_type(g, n, 1) != ER_DTYPE_FLOAT) NO("Gemm B is not float32");
      return true;
    case OP_MATMUL:
      if (in_rank(g, n, 0) < 2 || in_rank(g, n, 1) < 2)
        NO("MatMul with a 1-D operand (the kernel multiplies matrices)");
      if (in_type(g, n, 1) != ER_DTYPE_FLOAT) NO("MatMul B is not float32");
      return true;
    case OP_CONCAT:
    case OP_TRANSPOSE:
    case OP_ALIAS:
      if (!es) NO("type %s cannot be moved", er_dtype_name(in_type(g, n, 0)));
      if (e->k == OP_ALIAS && strcmp(n->op_type, "Dropout") == 0) {
        if (n->n_outputs > 1 && n->outputs[1] >= 0 && !value_unused(g, n->outputs[1]))
          NO("Dropout with a mask output that is used");
        if (!in_fixed(g, n, 2)) NO("Dropout training_mode decided at run time");
        const er_tensor *tm = in_const(g, n, 2);
        if (tm && er__load_i64(tm->data, tm->dtype, 0)) NO("Dropout in training mode");
      }
      return true;
    case OP_SOFTMAX:
    case OP_LRN:
      return true;
    case OP_QUANT: {
      er_dtype out = n->outputs[0] >= 0 ? g->values[n->outputs[0]].info.dtype : ER_DTYPE_UNDEFINED;
      if (!is_q8(out)) NO("QuantizeLinear to %s (int8/uint8 only)", er_dtype_name(out));
      if (er__node_attr_int(n, "block_size", 0)) NO("blocked quantization");
      const er_tensor *sc = in_const(g, n, 1);
      if (!sc || sc->dtype != ER_DTYPE_FLOAT) NO("the scale is not a float32 constant");
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && !in_const(g, n, 2)) NO("the zero point is not a constant");
      return true;
    }
    case OP_DEQUANT: {
      if (!is_q8(in_type(g, n, 0))) NO("DequantizeLinear of %s (int8/uint8 only)", er_dtype_name(in_type(g, n, 0)));
      if (er__node_attr_int(n, "block_size", 0)) NO("blocked quantization");
      const er_tensor *sc = in_const(g, n, 1);
      if (!sc || sc->dtype != ER_DTYPE_FLOAT) NO("the scale is not a float32 constant");
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && !in_const(g, n, 2)) NO("the zero point is not a constant");
      return true;
    }
    case OP_QMATMUL:
      if (in_rank(g, n, 0) != 2 || in_rank(g, n, 3) != 2) NO("QLinearMatMul of rank > 2");
      if (!is_q8(in_type(g, n, 0)) || !is_q8(in_type(g, n, 3))) NO("QLinearMatMul of non-8-bit types");
      for (int k = 1; k < 8; k++)
        if (k != 3 && !in_const(g, n, k)) NO("QLinearMatMul input %d is not a constant", k);
      if (in_const(g, n, 1)->dtype != ER_DTYPE_FLOAT) NO("QLinearMatMul scales are not float32");
      return true;
    case OP_FILL: {
      const er_attr *v = er__node_attr(n, "value");
      if (v && (v->type != ER_ATTR_TENSOR || !v->t || er_dtype_size(v->t->dtype) == 0))
        NO("ConstantOfShape value of a type that cannot be filled");
      return true;
    }
    case OP_CUSTOM:
      return true;
  }
  NO("not supported");
}

void er__gpu_configure(er_gpu *gpu) {
  const char *e = getenv("EDGERUN_GPU_DIRECT_CONV");
  gpu->direct_conv = e && e[0] == '1';
}

/* ======================================================================== */
/* Compile                                                                   */
/* ======================================================================== */

typedef struct onode {
  const er_node *node;
  int32_t index;
  kind k;
  int sub;
  float a, b;                 /* unary parameters */
  void *aux0, *aux1;          /* BN scale/shift; quant scale/zero point */
  bool fused;                 /* a com.edgerun fused op */
  int act;                    /* its epilogue activation (ER_GPU_ACT_*) */
  float act_p[2];             /* and the activation's parameters */
  const er_custom_kernel *custom;
} onode;

typedef struct compiled {
  const er_graph *g;
  onode *nodes;               /* [n_nodes] */
  int32_t n_nodes;
  void **weights;             /* [n_values]: device copies of constants */
  int32_t *last;              /* [n_values] position of the last reader in
                                 the segment; INT32_MAX = keep */
  er_subgraph sg;
} compiled;

void er__gpu_release(er_gpu *gpu, void *p) {
  compiled *c = p;
  if (!c) return;
  for (int32_t j = 0; j < c->n_nodes; j++) {
    if (c->nodes[j].aux0) gpu->api->free(gpu->ctx, c->nodes[j].aux0);
    if (c->nodes[j].aux1) gpu->api->free(gpu->ctx, c->nodes[j].aux1);
  }
  if (c->weights)
    for (int32_t v = 0; v < c->g->n_values; v++)
      if (c->weights[v]) gpu->api->free(gpu->ctx, c->weights[v]);
  free(c->weights);
  free(c->nodes);
  free(c->last);
  free(c);
}

static er_status make_buffer(er_gpu *gpu, const void *host, size_t bytes, void **out, const er_node *node) {
  er_status st = gpu->api->alloc(gpu->ctx, bytes, host, out);
  if (st != ER_STATUS_OK && node) er__error_prefix("%s node '%s'", node->op_type, node->name);
  return st;
}

static float const_f32(const er_tensor *t, int64_t i, float def) {
  return t && t->data && er__tensor_count(t) > i ? (float)er__load_f64(t->data, t->dtype, i) : def;
}

static er_status compile_node(er_gpu *gpu, compiled *c, onode *o) {
  const er_graph *g = c->g;
  const er_node *n = o->node;
  o->custom = er__custom_kernel_find(gpu->name, n);
  if (o->custom) {
    o->k = OP_CUSTOM;
    return ER_STATUS_OK;
  }
  const struct op_entry *e = find_op(n);
  ER_ASSERT(e);
  o->k = e->k;
  o->sub = e->sub;
  if (is_fused(n)) {
    er_activation act;
    er_status st = node_act(g, n, &act);
    if (st != ER_STATUS_OK) return st;
    o->fused = true;
    o->act = gpu_act(act.kind);
    ER_ASSERT(o->act >= 0);  /* supports_op declined the others */
    o->act_p[0] = act.p[0];
    o->act_p[1] = act.p[1];
    return ER_STATUS_OK;
  }
  if (o->k == OP_UNARY) {
    switch (o->sub) {
      case ER_GPU_U_GELU: {
        const er_attr *a = er__node_attr(n, "approximate");
        if (a && a->type == ER_ATTR_STRING && strcmp(a->s, "tanh") == 0) o->sub = ER_GPU_U_GELU_TANH;
        break;
      }
      case ER_GPU_U_LEAKY: o->a = er__node_attr_float(n, "alpha", 0.01f); break;
      case ER_GPU_U_ELU: o->a = er__node_attr_float(n, "alpha", 1.0f); break;
      case ER_GPU_U_SELU:
        o->a = er__node_attr_float(n, "alpha", 1.67326319217681884765625f);
        o->b = er__node_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
      case ER_GPU_U_HARDSIGMOID:
        o->a = er__node_attr_float(n, "alpha", 0.2f);
        o->b = er__node_attr_float(n, "beta", 0.5f);
        break;
      case ER_GPU_U_CLIP:
        if (n->version < 11) {
          o->a = er__node_attr_float(n, "min", -INFINITY);
          o->b = er__node_attr_float(n, "max", INFINITY);
        } else {
          o->a = const_f32(in_const(g, n, 1), 0, -INFINITY);
          o->b = const_f32(in_const(g, n, 2), 0, INFINITY);
        }
        break;
      default: break;
    }
    return ER_STATUS_OK;
  }
  if (o->k == OP_AFFINE) {
    const er_tensor *sc = in_const(g, n, 1), *bi = in_const(g, n, 2), *mu = in_const(g, n, 3),
                    *var = in_const(g, n, 4);
    int64_t ch = er__tensor_count(sc);
    float eps = er__node_attr_float(n, "epsilon", 1e-5f);
    float *scale = malloc(((size_t)ch + 1) * sizeof *scale), *shift = malloc(((size_t)ch + 1) * sizeof *shift);
    if (!scale || !shift) {
      free(scale);
      free(shift);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for %s", gpu->name);
    }
    /* Fold the statistics once: y = x * s + t. */
    for (int64_t i = 0; i < ch; i++) {
      double sv = const_f32(sc, i, 1) / sqrt((double)const_f32(var, i, 1) + eps);
      scale[i] = (float)sv;
      shift[i] = (float)(const_f32(bi, i, 0) - const_f32(mu, i, 0) * sv);
    }
    er_status st = make_buffer(gpu, scale, (size_t)ch * sizeof(float), &o->aux0, n);
    if (st == ER_STATUS_OK) st = make_buffer(gpu, shift, (size_t)ch * sizeof(float), &o->aux1, n);
    free(scale);
    free(shift);
    return st;
  }
  if (o->k == OP_QUANT || o->k == OP_DEQUANT || o->k == OP_QCONV || o->k == OP_QMATMUL) {
    /* Scale (float) and zero point (8-bit) of the per-channel operand: the
     * only one for Q/DQ, the weights or B otherwise. */
    int si = o->k == OP_QCONV || o->k == OP_QMATMUL ? 4 : 1;
    const er_tensor *sc = in_const(g, n, si), *zp = in_const(g, n, si + 1);
    int64_t cnt = er__tensor_count(sc);
    float *f = malloc(((size_t)cnt + 1) * sizeof *f);
    if (!f) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for %s", gpu->name);
    for (int64_t i = 0; i < cnt; i++) f[i] = const_f32(sc, i, 1);
    er_status st = make_buffer(gpu, f, (size_t)cnt * sizeof(float), &o->aux0, n);
    free(f);
    uint8_t zero[1] = {0};
    if (st == ER_STATUS_OK)
      st = zp && zp->data ? make_buffer(gpu, zp->data, zp->nbytes, &o->aux1, n) : make_buffer(gpu, zero, 1, &o->aux1, n);
    return st;
  }
  return ER_STATUS_OK;
}

er_status er__gpu_compile(er_gpu *gpu, const er_subgraph *sg, void **out) {
  const er_graph *g = sg->graph;
  compiled *c = calloc(1, sizeof *c);
  if (!c) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for %s", gpu->name);
  c->g = g;
  c->sg = *sg;
  c->n_nodes = sg->n_nodes;
  c->nodes = calloc((size_t)sg->n_nodes + 1, sizeof *c->nodes);
  c->weights = calloc((size_t)g->n_values + 1, sizeof *c->weights);
  c->last = malloc(((size_t)g->n_values + 1) * sizeof *c->last);
  er_id_list reads = {0};
  er_status st = ER_STATUS_OK;
  if (!c->nodes || !c->weights || !c->last) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for %s", gpu->name);
    goto fail;
  }
  for (int32_t v = 0; v < g->n_values; v++) c->last[v] = -1;
  pthread_mutex_lock(&gpu->lock);
  for (int32_t j = 0; j < sg->n_nodes && st == ER_STATUS_OK; j++) {
    onode *o = &c->nodes[j];
    o->index = sg->nodes[j];
    o->node = &g->nodes[o->index];
    st = compile_node(gpu, c, o);
    /* Weights go to the device once. */
    for (int k = 0; k < o->node->n_inputs && st == ER_STATUS_OK; k++) {
      int32_t id = o->node->inputs[k];
      if (id < 0 || c->weights[id] || !er__value_is_fixed(g, id) || !g->values[id].constant) continue;
      const er_tensor *t = g->values[id].constant;
      st = make_buffer(gpu, t->data, t->nbytes, &c->weights[id], o->node);
    }
    if (st == ER_STATUS_OK && !er__node_reads(g, o->index, &reads))
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for %s", gpu->name);
    for (int32_t k = 0; st == ER_STATUS_OK && k < reads.n; k++) c->last[reads.v[k]] = j;
  }
  pthread_mutex_unlock(&gpu->lock);
  free(reads.v);
  if (st != ER_STATUS_OK) goto fail;
  for (int32_t k = 0; k < sg->n_outputs; k++) c->last[sg->outputs[k]] = INT32_MAX;
  for (int32_t k = 0; k < g->n_outputs; k++) c->last[g->outputs[k]] = INT32_MAX;
  *out = c;
  return ER_STATUS_OK;
fail:
  er__gpu_release(gpu, c);
  return st;
}

/* ======================================================================== */
/* Compute                                                                   */
/* ======================================================================== */

/* A device buffer shared by a value and the Reshape-like values aliasing
 * it; freed when the last of them is dropped. */
typedef struct dbuf {
  void *h;
  int refs;
} dbuf;

/* A value during one run: its shape (data NULL, or host data for shape
 * rules that read it) and its buffer. */
typedef struct dval {
  er_tensor t;
  void *weight;               /* a weight's buffer (owned by the segment) */
  dbuf *buf;                  /* else this run's buffer */
} dval;

typedef struct run {
  er_gpu *gpu;
  compiled *c;
  dval *v;                    /* [n_values] */
} run;

static void *mem(const dval *d) { return d->weight ? d->weight : d->buf ? d->buf->h : NULL; }

static void drop(run *r, int32_t id) {
  dbuf *b = r->v[id].buf;
  r->v[id].buf = NULL;
  if (b && --b->refs == 0) {
    r->gpu->api->free(r->gpu->ctx, b->h);
    free(b);
  }
}

static er_status new_buf(run *r, dval *d, const void *init, size_t bytes, const er_node *node) {
  dbuf *b = calloc(1, sizeof *b);
  if (!b) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory running a %s segment", r->gpu->name);
  er_status st = make_buffer(r->gpu, init, bytes, &b->h, node);
  if (st != ER_STATUS_OK) {
    free(b);
    return st;
  }
  b->refs = 1;
  d->buf = b;
  return ER_STATUS_OK;
}

/* Aligned strides (elements) of `in` for output dims `out` (broadcast). */
static void bcast_strides(const er_tensor *in, const er_tensor *out, int *dims, int *strides) {
  int64_t st = 1;
  for (int d = 0; d < 8; d++) {
    dims[d] = d < out->rank ? (int)out->dims[d] : 1;
    strides[d] = 0;
  }
  for (int d = out->rank - 1; d >= 0; d--) {
    int di = d - (out->rank - in->rank);
    if (di < 0) break;
    strides[d] = in->dims[di] == 1 ? 0 : (int)st;
    st *= in->dims[di];
  }
}

static er_status run_binary(run *r, int op, void *a, const er_tensor *ta, void *b, const er_tensor *tb, void *y,
                            const er_tensor *ty) {
  er_gpu_binary p = {a, b, y, er__tensor_count(ty), op, ty->rank, {0}, {0}, {0}};
  bcast_strides(ta, ty, p.dims, p.sa);
  bcast_strides(tb, ty, p.dims, p.sb);
  return p.n ? r->gpu->api->binary(r->gpu->ctx, &p) : ER_STATUS_OK;
}

/* Convolution / pooling geometry: begin and end pads per spatial axis from
 * pads or auto_pad (as the ONNX rule computes SAME). */
static void spatial(const er_node *n, const er_tensor *x, const er_tensor *y, const int64_t *kernel,
                    const int64_t *strides, const int64_t *dil, int nsp, int64_t *pb, int64_t *pe) {
  const er_attr *pads = er__node_attr(n, "pads");
  const er_attr *ap = er__node_attr(n, "auto_pad");
  const char *mode = ap && ap->type == ER_ATTR_STRING ? ap->s : "NOTSET";
  for (int d = 0; d < nsp; d++) {
    pb[d] = pe[d] = 0;
    if (strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0) {
      int64_t in = x->dims[2 + d], out = y->dims[2 + d];
      int64_t total = (out - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1 - in;
      if (total < 0) total = 0;
      pb[d] = mode[5] == 'U' ? total / 2 : total - total / 2;
      pe[d] = total - pb[d];
    } else if (strcmp(mode, "VALID") != 0 && pads && pads->type == ER_ATTR_INTS && pads->n == 2 * nsp) {
      pb[d] = pads->ints[d];
      pe[d] = pads->ints[nsp + d];
    }
  }
}

static void ints_attr(const er_node *n, const char *name, int count, int64_t def, int64_t *out) {
  const er_attr *a = er__node_attr(n, name);
  for (int i = 0; i < count; i++) out[i] = a && a->type == ER_ATTR_INTS && a->n == count ? a->ints[i] : def;
}

/* The 16 geometry ints of conv kernels; 1-D runs as H = 1. */
static void conv_params(const er_node *n, const er_tensor *x, const er_tensor *w, const er_tensor *y, int *p) {
  int nsp = x->rank - 2;
  int64_t k[2] = {1, 1}, st[2] = {1, 1}, dl[2] = {1, 1}, pb[2], pe[2];
  for (int d = 0; d < nsp && d < 2; d++) k[d] = w->dims[2 + d];
  ints_attr(n, "strides", nsp, 1, st);
  ints_attr(n, "dilations", nsp, 1, dl);
  spatial(n, x, y, k, st, dl, nsp, pb, pe);
  bool one = nsp == 1;
  int64_t v[16] = {x->dims[0], x->dims[1], one ? 1 : x->dims[2], x->dims[one ? 2 : 3],
                   y->dims[1], one ? 1 : y->dims[2], y->dims[one ? 2 : 3], one ? 1 : k[0],
                   k[one ? 0 : 1], one ? 1 : st[0], st[one ? 0 : 1], one ? 0 : pb[0],
                   pb[one ? 0 : 1], one ? 1 : dl[0], dl[one ? 0 : 1], er__node_attr_int(n, "group", 1)};
  for (int i = 0; i < 16; i++) p[i] = (int)v[i];
}

static er_status run_pool(run *r, const onode *o, dval *x, dval *y) {
  const er_node *node = o->node;
  const er_tensor *tx = &x->t;
  int nsp = tx->rank - 2;
  bool one = nsp == 1, global = o->sub >= 2, is_max = o->sub == 1 || o->sub == 3;
  int64_t k[2] = {1, 1}, st[2] = {1, 1}, dl[2] = {1, 1}, pb[2] = {0, 0}, pe[2] = {0, 0};
  for (int d = 0; d < nsp && d < 2; d++) k[d] = global ? tx->dims[2 + d] : 1;
  if (!global) ints_attr(node, "kernel_shape", nsp, 1, k);
  ints_attr(node, "strides", nsp, 1, st);
  ints_attr(node, "dilations", nsp, 1, dl);
  if (global)
    for (int d = 0; d < nsp; d++) st[d] = dl[d] = 1;
  else
    spatial(node, tx, &y->t, k, st, dl, nsp, pb, pe);
  int64_t v[16] = {one ? 0 : pe[0], pe[one ? 0 : 1], one ? 1 : tx->dims[2], tx->dims[one ? 2 : 3],
                   one ? 1 : y->t.dims[2], y->t.dims[one ? 2 : 3], one ? 1 : k[0], k[one ? 0 : 1],
                   one ? 1 : st[0], st[one ? 0 : 1], one ? 0 : pb[0], pb[one ? 0 : 1],
                   one ? 1 : dl[0], dl[one ? 0 : 1], er__node_attr_int(node, "count_include_pad", 0), is_max};
  er_gpu_pool p = {mem(x), mem(y), er__tensor_count(&y->t), {0}};
  for (int i = 0; i < 16; i++) p.p[i] = (int)v[i];
  return p.n ? r->gpu->api->pool(r->gpu->ctx, &p) : ER_STATUS_OK;
}

/* The epilogue of a node: its activation, and the residual z (NULL for
 * none; `spare` stands in for it, since OpenCL wants a real buffer). */
static er_gpu_epilogue epilogue(const onode *o, dval *z, void *spare) {
  er_gpu_epilogue ep = {z ? mem(z) : spare, z != NULL, o->fused ? o->act : ER_GPU_ACT_NONE, 0, 0};
  if (o->fused) {
    ep.p0 = o->act_p[0];
    ep.p1 = o->act_p[1];
  }
  return ep;
}

/* Gemm and MatMul, and their fused forms: cv is Gemm's C, or FusedMatMul's
 * bias (1-D over the columns, added to every row as C with beta 1). */
static er_status run_gemm(run *r, const onode *o, dval *a, dval *b, dval *cv, dval *y) {
  const er_node *node = o->node;
  er_gpu_gemm p;
  memset(&p, 0, sizeof p);
  p.a = mem(a);
  p.b = mem(b);
  p.c = cv ? mem(cv) : mem(a);
  p.y = mem(y);
  p.has_c = cv != NULL;
  p.alpha = p.beta = 1;
  p.batch = 1;
  p.ep = epilogue(o, NULL, mem(a));
  for (int d = 0; d < 8; d++) p.bdims[d] = 1;
  if (o->k == OP_GEMM) {
    bool ta = er__node_attr_int(node, "transA", 0), tb = er__node_attr_int(node, "transB", 0);
    p.M = (int)a->t.dims[ta ? 1 : 0];
    p.K = (int)a->t.dims[ta ? 0 : 1];
    p.N = (int)b->t.dims[tb ? 0 : 1];
    p.sai = ta ? 1 : p.K;
    p.sak = ta ? p.M : 1;
    p.sbk = tb ? 1 : p.N;
    p.sbj = tb ? p.K : 1;
    p.alpha = er__node_attr_float(node, "alpha", 1.0f);
    p.beta = er__node_attr_float(node, "beta", 1.0f);
    if (cv) {
      const er_tensor *c = &cv->t;
      p.scj = c->rank >= 1 && c->dims[c->rank - 1] != 1 ? 1 : 0;
      p.sci = c->rank == 2 && c->dims[0] != 1 ? (int)c->dims[1] : 0;
    }
  } else {
    const er_tensor *ta = &a->t, *tb = &b->t, *ty = &y->t;
    p.M = (int)ta->dims[ta->rank - 2];
    p.K = (int)ta->dims[ta->rank - 1];
    p.N = (int)tb->dims[tb->rank - 1];
    p.sai = p.K;
    p.sak = 1;
    p.sbk = p.N;
    p.sbj = 1;
    p.brank = ty->rank - 2;
    if (cv) {
      p.sci = 0;  /* bias[j] for every row */
      p.scj = 1;
    }
    /* Batch strides in elements of each operand, 0 where it broadcasts. */
    int64_t sa_ = (int64_t)p.M * p.K, sb_ = (int64_t)p.K * p.N;
    for (int d = p.brank - 1; d >= 0; d--) {
      p.bdims[d] = (int)ty->dims[d];
      p.batch *= ty->dims[d];
      int da = d - (p.brank - (ta->rank - 2)), db = d - (p.brank - (tb->rank - 2));
      if (da >= 0) {
        p.bsa[d] = ta->dims[da] == 1 ? 0 : (int)sa_;
        sa_ *= ta->dims[da];
      }
      if (db >= 0) {
        p.bsb[d] = tb->dims[db] == 1 ? 0 : (int)sb_;
        sb_ *= tb->dims[db];
      }
    }
  }
  if (p.M == 0 || p.N == 0 || p.batch == 0) return ER_STATUS_OK;
  return r->gpu->api->gemm(r->gpu->ctx, &p);
}

/* A group-1 convolution as one batched GEMM: Y[b] (M x OH*OW) = W (M x
 * C*KH*KW) times the im2col matrix of x[b] (C*KH*KW x OH*OW), plus the bias
 * per row. A pointwise convolution (1x1, stride 1, no padding) needs no
 * im2col: x[b] already is that matrix. Grouped and depthwise convolutions,
 * and ones whose im2col matrix would pass ER_GPU_IM2COL_MAX_BYTES, use the
 * direct kernel. */
#define ER_GPU_IM2COL_MAX_BYTES (UINT64_C(64) << 20)

static er_status conv(run *r, const er_gpu_conv *c) {
  const er_gpu_api *api = r->gpu->api;
  void *ctx = r->gpu->ctx;
  int N = c->p[0], C = c->p[1], H = c->p[2], W = c->p[3], M = c->p[4], OH = c->p[5], OW = c->p[6];
  int KH = c->p[7], KW = c->p[8], G = c->p[15];
  int64_t K = (int64_t)C * KH * KW, L = (int64_t)OH * OW;
  bool pointwise = KH == 1 && KW == 1 && c->p[9] == 1 && c->p[10] == 1 && c->p[11] == 0 && c->p[12] == 0 &&
                   OH == H && OW == W;
  uint64_t col_bytes = (uint64_t)N * (uint64_t)K * (uint64_t)L * sizeof(float);
  if (G != 1 || !api->im2col || (!pointwise && col_bytes > ER_GPU_IM2COL_MAX_BYTES) || r->gpu->direct_conv)
    return api->conv(ctx, c);
  void *col = c->x;
  er_status st = ER_STATUS_OK;
  if (!pointwise) {
    st = api->alloc(ctx, col_bytes, NULL, &col);
    if (st != ER_STATUS_OK) return st;
    er_gpu_im2col ic = {c->x, col, N * K * L, {0}};
    memcpy(ic.p, c->p, sizeof ic.p);
    st = api->im2col(ctx, &ic);
  }
  if (st == ER_STATUS_OK) {
    er_gpu_gemm g;
    memset(&g, 0, sizeof g);
    g.a = c->w;
    g.b = col;
    g.c = c->bias;
    g.y = c->y;
    g.has_c = c->has_bias;
    g.M = M;
    g.N = (int)L;
    g.K = (int)K;
    g.sai = (int)K;
    g.sak = 1;
    g.sbk = (int)L;
    g.sbj = 1;
    g.sci = 1;  /* bias[m] for every column */
    g.scj = 0;
    g.alpha = g.beta = 1;
    g.brank = 1;
    g.bdims[0] = N;
    for (int d = 1; d < 8; d++) g.bdims[d] = 1;
    g.bsa[0] = 0;  /* one weight matrix for every batch item */
    g.bsb[0] = (int)(K * L);
    g.batch = N;
    g.ep = c->ep;  /* the GEMM's Y[b, m, l] is y[b, m, oh, ow], as z is */
    st = api->gemm(ctx, &g);
  }
  /* Freeing is safe with the GEMM still queued: OpenCL releases a buffer
   * when the commands using it are done, and cudaFree waits for the device. */
  if (!pointwise) api->free(ctx, col);
  return st;
}

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= d[i];
  return p;
}

static int q_signed(er_dtype t) { return t == ER_DTYPE_INT8; }

/* QConv / QLinearConv on the device. */
static er_status run_qconv(run *r, const onode *o, dval *x, dval *y, int64_t n) {
  const er_node *node = o->node;
  const er_graph *g = r->c->g;
  dval *w = &r->v[node->inputs[3]];
  dval *b = node->n_inputs > 8 && node->inputs[8] >= 0 ? &r->v[node->inputs[8]] : NULL;
  const er_tensor *xz = in_const(g, node, 2), *yz = in_const(g, node, 7);
  er_gpu_qconv p;
  memset(&p, 0, sizeof p);
  p.x = mem(x);
  p.w = mem(w);
  p.bias = b ? mem(b) : o->aux0;
  p.y = mem(y);
  p.wscale = o->aux0;
  p.wzp = o->aux1;
  p.xscale = const_f32(in_const(g, node, 1), 0, 1);
  p.yscale = const_f32(in_const(g, node, 6), 0, 1);
  p.n = n;
  conv_params(node, &x->t, &w->t, &y->t, p.p);
  p.q[0] = q_signed(x->t.dtype);
  p.q[1] = q_signed(w->t.dtype);
  p.q[2] = q_signed(y->t.dtype);
  p.q[3] = er__tensor_count(in_const(g, node, 4)) > 1;
  p.q[4] = xz ? (int)er__load_i64(xz->data, xz->dtype, 0) : 0;
  p.q[5] = yz ? (int)er__load_i64(yz->data, yz->dtype, 0) : 0;
  p.q[6] = b != NULL;
  return n ? r->gpu->api->qconv(r->gpu->ctx, &p) : ER_STATUS_OK;
}

/* QMatMul / QLinearMatMul on the device. */
static er_status run_qmatmul(run *r, const onode *o, dval *x, dval *y) {
  const er_node *node = o->node;
  const er_graph *g = r->c->g;
  dval *b = &r->v[node->inputs[3]];
  const er_tensor *az = in_const(g, node, 2), *yz = in_const(g, node, 7);
  er_gpu_qmatmul p;
  memset(&p, 0, sizeof p);
  p.a = mem(x);
  p.b = mem(b);
  p.y = mem(y);
  p.bscale = o->aux0;
  p.bzp = o->aux1;
  p.ascale = const_f32(in_const(g, node, 1), 0, 1);
  p.yscale = const_f32(in_const(g, node, 6), 0, 1);
  p.M = (int)x->t.dims[0];
  p.K = (int)x->t.dims[1];
  p.N = (int)b->t.dims[1];
  p.q[0] = q_signed(x->t.dtype);
  p.q[1] = q_signed(b->t.dtype);
  p.q[2] = q_signed(y->t.dtype);
  p.q[3] = er__tensor_count(in_const(g, node, 4)) > 1;
  p.q[4] = az ? (int)er__load_i64(az->data, az->dtype, 0) : 0;
  p.q[5] = yz ? (int)er__load_i64(yz->data, yz->dtype, 0) : 0;
  return p.M && p.N ? r->gpu->api->qmatmul(r->gpu->ctx, &p) : ER_STATUS_OK;
}

static er_status run_node(run *r, const onode *o) {
  const er_node *node = o->node;
  const er_graph *g = r->c->g;
  const er_gpu_api *api = r->gpu->api;
  void *ctx = r->gpu->ctx;
  dval *x = node->n_inputs > 0 && node->inputs[0] >= 0 ? &r->v[node->inputs[0]] : NULL;
  dval *y = &r->v[node->outputs[0]];
  int64_t n = er__tensor_count(&y->t);
  switch (o->k) {
    case OP_UNARY: {
      er_gpu_unary p = {mem(x), mem(y), n, o->sub, o->a, o->b};
      return n ? api->unary(ctx, &p) : ER_STATUS_OK;
    }
    case OP_BINARY:
      return run_binary(r, o->sub, mem(x), &x->t, mem(&r->v[node->inputs[1]]), &r->v[node->inputs[1]].t, mem(y),
                        &y->t);
    case OP_VARIADIC: {
      if (node->n_inputs == 1) return n ? api->copy(ctx, mem(y), mem(x), y->t.nbytes) : ER_STATUS_OK;
      /* Folds left to right into y; each step reads the previous y from a
       * copy (a kernel may not read and write one buffer). */
      er_status st = run_binary(r, o->sub, mem(x), &x->t, mem(&r->v[node->inputs[1]]), &r->v[node->inputs[1]].t,
                                mem(y), &y->t);
      for (int i = 2; i < node->n_inputs && st == ER_STATUS_OK; i++) {
        void *tmp;
        st = make_buffer(r->gpu, NULL, y->t.nbytes, &tmp, node);
        if (st != ER_STATUS_OK) break;
        st = n ? api->copy(ctx, tmp, mem(y), y->t.nbytes) : ER_STATUS_OK;
        if (st == ER_STATUS_OK)
          st = run_binary(r, o->sub, tmp, &y->t, mem(&r->v[node->inputs[i]]), &r->v[node->inputs[i]].t, mem(y),
                          &y->t);
        api->finish(ctx);
        api->free(ctx, tmp);
      }
      return st;
    }
    case OP_AFFINE: {
      er_gpu_affine p = {mem(x), mem(y), o->aux0, o->aux1, n, (int)x->t.dims[1], (int)prod(x->t.dims, 2, x->t.rank)};
      return n ? api->affine(ctx, &p) : ER_STATUS_OK;
    }
    case OP_CONV: {
      dval *w = &r->v[node->inputs[1]];
      dval *b = node->n_inputs > 2 && node->inputs[2] >= 0 ? &r->v[node->inputs[2]] : NULL;
      dval *z = o->fused && node->n_inputs > 3 && node->inputs[3] >= 0 ? &r->v[node->inputs[3]] : NULL;
      er_gpu_conv p = {mem(x), mem(w), b ? mem(b) : mem(w), mem(y), b != NULL, n, {0}, epilogue(o, z, mem(x))};
      conv_params(node, &x->t, &w->t, &y->t, p.p);
      return n ? conv(r, &p) : ER_STATUS_OK;
    }
    case OP_POOL:
      return run_pool(r, o, x, y);
    case OP_GEMM:
    case OP_MATMUL: {
      /* Gemm's C, or FusedMatMul's bias. */
      bool has_third = (o->k == OP_GEMM || o->fused) && node->n_inputs > 2 && node->inputs[2] >= 0;
      dval *c = has_third ? &r->v[node->inputs[2]] : NULL;
      return run_gemm(r, o, x, &r->v[node->inputs[1]], c, y);
    }
    case OP_CONCAT: {
      int axis = (int)er__node_attr_int(node, "axis", 0);
      if (axis < 0) axis += y->t.rank;
      size_t es = er_dtype_size(y->t.dtype);
      int inner_dst = (int)(prod(y->t.dims, axis, y->t.rank) * (int64_t)es), offset = 0;
      for (int i = 0; i < node->n_inputs; i++) {
        dval *in = &r->v[node->inputs[i]];
        int inner_src = (int)(prod(in->t.dims, axis, in->t.rank) * (int64_t)es);
        er_gpu_concat p = {mem(in), mem(y), (int64_t)in->t.nbytes, inner_src, inner_dst, offset};
        if (p.bytes) ER_CHECK(api->concat(ctx, &p));
        offset += inner_src;
      }
      return ER_STATUS_OK;
    }
    case OP_TRANSPOSE: {
      int rank = x->t.rank;
      int64_t perm[ER_MAX_RANK], in_st[ER_MAX_RANK];
      const er_attr *pa = er__node_attr(node, "perm");
      for (int d = 0; d < rank; d++) perm[d] = pa && pa->type == ER_ATTR_INTS ? pa->ints[d] : rank - 1 - d;
      er__strides(rank, x->t.dims, in_st);
      er_gpu_transpose p = {mem(x), mem(y), n, rank, (int)er_dtype_size(x->t.dtype), {0}, {0}};
      for (int d = 0; d < 8; d++) {
        p.dims[d] = d < rank ? (int)y->t.dims[d] : 1;
        p.strides[d] = d < rank ? (int)in_st[perm[d]] : 0;
      }
      return n ? api->transpose(ctx, &p) : ER_STATUS_OK;
    }
    case OP_SOFTMAX: {
      int rank = x->t.rank;
      int axis = (int)er__node_attr_int(node, "axis", node->version < 13 ? 1 : -1);
      if (axis < 0) axis += rank;
      int len, inner;
      if (node->version < 13) {
        len = (int)prod(x->t.dims, axis, rank);
        inner = 1;
      } else {
        len = (int)x->t.dims[axis];
        inner = (int)prod(x->t.dims, axis + 1, rank);
      }
      er_gpu_softmax p = {mem(x), mem(y), len ? n / len : 0, len, inner, o->sub};
      return p.rows ? api->softmax(ctx, &p) : ER_STATUS_OK;
    }
    case OP_LRN: {
      er_gpu_lrn p = {mem(x), mem(y), n, (int)x->t.dims[1], (int)prod(x->t.dims, 2, x->t.rank),
                      (int)er__node_attr_int(node, "size", 1), er__node_attr_float(node, "alpha", 1e-4f), er__node_attr_float(node, "beta", 0.75f),
                      er__node_attr_float(node, "bias", 1.0f)};
      return n ? api->lrn(ctx, &p) : ER_STATUS_OK;
    }
    case OP_QUANT:
    case OP_DEQUANT: {
      bool q = o->k == OP_QUANT;
      const er_tensor *sc = in_const(g, node, 1);
      int axis_len = (int)er__tensor_count(sc), inner = 1;
      if (axis_len > 1) {
        int axis = (int)er__node_attr_int(node, "axis", 1);
        if (axis < 0) axis += x->t.rank;
        inner = (int)prod(x->t.dims, axis + 1, x->t.rank);
      }
      er_gpu_quant p = {mem(x), mem(y), o->aux0, o->aux1, n, node->n_inputs > 2 && node->inputs[2] >= 0,
                        q_signed(q ? y->t.dtype : x->t.dtype), axis_len, inner};
      if (!n) return ER_STATUS_OK;
      return q ? api->quantize(ctx, &p) : api->dequantize(ctx, &p);
    }
    case OP_QCONV:
      return run_qconv(r, o, x, y, n);
    case OP_QMATMUL:
      return run_qmatmul(r, o, x, y);
    case OP_FILL: {
      /* The attribute's one element, repeated. */
      const er_attr *v = er__node_attr(node, "value");
      uint8_t zero[16] = {0};
      const void *pat = v && v->t && v->t->data ? v->t->data : zero;
      return y->t.nbytes ? api->fill(ctx, mem(y), pat, er_dtype_size(y->t.dtype), y->t.nbytes) : ER_STATUS_OK;
    }
    case OP_ALIAS:
    case OP_CUSTOM:
      break;
  }
  return er__error(ER_STATUS_INTERNAL, "%s: %s node '%s' reached the wrong path", r->gpu->name, node->op_type,
                   node->name);
}

/* Output shapes from the op's own rule, with shapes (and constant data)
 * known; then device buffers for them. */
static er_status prepare_outputs(run *r, const onode *o) {
  const er_node *node = o->node;
  const er_graph *g = r->c->g;
  er_tensor *in[64], *outp[64];
  er_tensor outs[64];
  if (node->n_inputs > 64 || node->n_outputs > 64)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: %s node '%s' has more than 64 inputs or outputs", r->gpu->name,
                     node->op_type, node->name);
  for (int k = 0; k < node->n_inputs; k++) in[k] = node->inputs[k] >= 0 ? &r->v[node->inputs[k]].t : NULL;
  for (int k = 0; k < node->n_outputs; k++) {
    outp[k] = NULL;
    if (node->outputs[k] < 0) continue;
    er__tensor_set(&outs[k], ER_DTYPE_UNDEFINED, -1, NULL);
    outp[k] = &outs[k];
  }
  er_kctx ctx = {node, node->n_inputs, in, node->n_outputs, outp, true, NULL, g, NULL};
  ER_CHECK(node->op->check(&ctx));
  for (int k = 0; k < node->n_outputs; k++) {
    if (!outp[k]) continue;
    int64_t count = er__tensor_count(outp[k]);
    if (count < 0)
      return er__error(ER_STATUS_INTERNAL, "%s: %s node '%s': output %d has no shape", r->gpu->name, node->op_type,
                       node->name, k);
    if (count > INT32_MAX)
      return er__error(ER_STATUS_LIMIT, "%s: %s node '%s': output %d has %lld elements; the kernels index with "
                       "32-bit ints", r->gpu->name, node->op_type, node->name, k, (long long)count);
    dval *d = &r->v[node->outputs[k]];
    drop(r, node->outputs[k]);
    d->t = outs[k];
    d->t.data = NULL;
    d->t.flags = 0;
    d->t.nbytes = (size_t)count * er_dtype_size(d->t.dtype);
  }
  /* Reshape-like ops share their input's buffer. */
  if (o->k == OP_ALIAS) {
    dval *x = &r->v[node->inputs[0]], *y = &r->v[node->outputs[0]];
    if (x->weight) {
      /* A weight outlives the run: give the alias its own copy. */
      ER_CHECK(new_buf(r, y, NULL, y->t.nbytes, node));
      return y->t.nbytes ? r->gpu->api->copy(r->gpu->ctx, y->buf->h, x->weight, y->t.nbytes) : ER_STATUS_OK;
    }
    y->buf = x->buf;
    if (y->buf) y->buf->refs++;
    return ER_STATUS_OK;
  }
  for (int k = 0; k < node->n_outputs; k++)
    if (node->outputs[k] >= 0) ER_CHECK(new_buf(r, &r->v[node->outputs[k]], NULL, r->v[node->outputs[k]].t.nbytes, node));
  return ER_STATUS_OK;
}

static er_status run_custom(run *r, const onode *o) {
  const er_node *node = o->node;
  er_tensor ins[64], outs[64];
  er_tensor *in[64], *outp[64];
  for (int k = 0; k < node->n_inputs; k++) {
    in[k] = NULL;
    if (node->inputs[k] < 0) continue;
    ins[k] = r->v[node->inputs[k]].t;
    ins[k].data = mem(&r->v[node->inputs[k]]);  /* the device handle, as documented */
    in[k] = &ins[k];
  }
  for (int k = 0; k < node->n_outputs; k++) {
    outp[k] = NULL;
    if (node->outputs[k] < 0) continue;
    outs[k] = r->v[node->outputs[k]].t;
    outs[k].data = mem(&r->v[node->outputs[k]]);
    outp[k] = &outs[k];
  }
  er_kctx ctx = {node, node->n_inputs, in, node->n_outputs, outp, false, NULL, r->c->g, NULL};
  return er__custom_kernel_run(o->custom, &ctx, r->gpu->api->stream(r->gpu->ctx));
}

er_status er__gpu_compute(er_gpu *gpu, void *p, er_tensor *values) {
  compiled *c = p;
  const er_graph *g = c->g;
  run r = {gpu, c, calloc((size_t)g->n_values + 1, sizeof(dval))};
  if (!r.v) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory running a %s segment", gpu->name);
  er_status st = ER_STATUS_OK;
  pthread_mutex_lock(&gpu->lock);
  /* Shapes of everything the segment reads; weights are already there. */
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!er__value_is_fixed(g, v) || !g->values[v].constant) continue;
    r.v[v].t = *g->values[v].constant;  /* data kept for shape rules */
    r.v[v].t.flags = 0;
    r.v[v].weight = c->weights[v];
  }
  /* Host to device. */
  for (int32_t k = 0; k < c->sg.n_inputs && st == ER_STATUS_OK; k++) {
    int32_t id = c->sg.inputs[k];
    const er_tensor *t = &values[id];
    if (!t->data) {
      st = er__error(ER_STATUS_INTERNAL, "%s: input '%s' has no data", gpu->name, g->values[id].name);
      break;
    }
    r.v[id].t = *t;
    r.v[id].t.flags = 0;  /* host data stays readable for shape rules */
    st = new_buf(&r, &r.v[id], t->data, t->nbytes, NULL);
  }
  for (int32_t j = 0; j < c->n_nodes && st == ER_STATUS_OK; j++) {
    const onode *o = &c->nodes[j];
    st = prepare_outputs(&r, o);
    if (st == ER_STATUS_OK && o->k == OP_CUSTOM) st = run_custom(&r, o);
    else if (st == ER_STATUS_OK && o->k != OP_ALIAS) st = run_node(&r, o);
    /* Buffers whose last reader in the segment has run. */
    for (int k = 0; k < o->node->n_inputs && st == ER_STATUS_OK; k++) {
      int32_t id = o->node->inputs[k];
      if (id >= 0 && c->last[id] == j) drop(&r, id);
    }
    for (int k = 0; k < o->node->n_outputs; k++) {
      int32_t id = o->node->outputs[k];
      if (id >= 0 && c->last[id] < 0) drop(&r, id);
    }
  }
  /* Device to host. */
  for (int32_t k = 0; k < c->sg.n_outputs && st == ER_STATUS_OK; k++) {
    int32_t id = c->sg.outputs[k];
    er_tensor *t = &values[id];
    er__tensor_release(t);
    er__tensor_set(t, r.v[id].t.dtype, r.v[id].t.rank, r.v[id].t.dims);
    st = er__tensor_alloc(t, 0);
    if (st == ER_STATUS_OK && t->nbytes) st = gpu->api->download(gpu->ctx, mem(&r.v[id]), t->data, t->nbytes);
  }
  /* Kernels may still read buffers about to go after an error. */
  if (st != ER_STATUS_OK) gpu->api->finish(gpu->ctx);
  for (int32_t v = 0; v < g->n_values; v++) drop(&r, v);
  pthread_mutex_unlock(&gpu->lock);
  free(r.v);
  return st;
}
