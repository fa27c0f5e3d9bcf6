/* test-passes.c - each tp_load-time graph pass on a graph that contains its
 * pattern (the rewrite happens) and on one that nearly does (it must not):
 * the optimized model's node list is checked, and its outputs are compared
 * with the same model loaded as written (optimize = -1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "onnx-builder.h"
#include "kernels/kernel.h"
#include "graph/graph.h"
#include "test-passes.h"

static uint64_t rng_state = 12345;

float tp_frand(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((rng_state >> 40) / 16777216.0 * 2.0 - 1.0);
}

void tp_add_weight(er_pbw *g, const char *name, int rank, const int64_t *dims, float scale, float offset) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  float *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = tp_frand() * scale + offset;
  er_pbw t = {0};
  tb_tensor(&t, name, 1, rank, dims, v, (size_t)n * sizeof *v);
  tb_graph_initializer(g, &t);
  er__pbw_free(&t);
  free(v);
}

void tp_add_scalar(er_pbw *g, const char *name, float v) {
  er_pbw t = {0};
  tb_tensor(&t, name, 1, 0, NULL, &v, sizeof v);
  tb_graph_initializer(g, &t);
  er__pbw_free(&t);
}

er_model *tp_load(const er_pbw *m, int optimize) {
  er_load_options o;
  er_load_options_init(&o);
  o.optimize = optimize;
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m->buf, m->len, NULL, &o, &model), ER_STATUS_OK);
  return model;
}

/* The graph a CPU session runs: model-level rewrites plus the session's
 * own fusions. Counts nodes of op type `op` (NULL: all nodes). */
int tp_session_count_named(const er_model *m, const char *op, const char *fragment) {
  er_session *s = NULL;
  if (er_session_create(m, NULL, &s) != ER_STATUS_OK) return -1;
  er_session_stats st;
  er_session_stats_get(s, &st);
  int n = 0;
  for (size_t i = 0; i < st.node_count; i++) {
    const char *t, *name;
    er_session_node(s, i, &t, &name);
    if ((!op || strcmp(t, op) == 0) && (!fragment || strstr(name, fragment))) n++;
  }
  er_session_free(s);
  return n;
}

static int session_count(const er_model *m, const char *op) { return tp_session_count_named(m, op, NULL); }

int tp_count_op(const er_model *m, const char *op) { return session_count(m, op); }

static size_t node_count(const er_model *m) { return (size_t)session_count(m, NULL); }

/* Runs both models on the same random input x of `dims`; the outputs must
 * agree within rtol 1e-4 / atol 1e-5 (float rounding of the rewrite). */
static void same_outputs(er_model *a, er_model *b, int rank, const int64_t *dims) {
  er_session *sa = NULL, *sb = NULL;
  CHECK_STATUS(er_session_create(a, NULL, &sa), ER_STATUS_OK);
  CHECK_STATUS(er_session_create(b, NULL, &sb), ER_STATUS_OK);
  er_tensor *x;
  er_tensor_create(ER_DTYPE_FLOAT, rank, dims, &x);
  float *xv = er_tensor_data(x);
  for (int64_t i = 0; i < er_tensor_count(x); i++) xv[i] = tp_frand() * 2;
  er_named_tensor in = {"x", x};
  er_tensor *ya = NULL, *yb = NULL;
  CHECK_STATUS(er_session_run(sa, &in, 1, NULL, 1, &ya), ER_STATUS_OK);
  CHECK_STATUS(er_session_run(sb, &in, 1, NULL, 1, &yb), ER_STATUS_OK);
  if (ya && yb) {
    CHECK(er_tensor_count(ya) == er_tensor_count(yb));
    const float *pa = er_tensor_cdata(ya), *pb = er_tensor_cdata(yb);
    int bad = 0;
    for (int64_t i = 0; i < er_tensor_count(ya); i++)
      if (!(fabsf(pa[i] - pb[i]) <= 1e-5f + 1e-4f * fabsf(pb[i]))) bad++;
    CHECK(bad == 0);
  }
  er_tensor_free(ya);
  er_tensor_free(yb);
  er_tensor_free(x);
  er_session_free(sa);
  er_session_free(sb);
}

/* ---- Conv + BatchNormalization (+ Relu / Add) --------------------------- */

/* x [1,3,8,8] -> Conv -> BN -> [act] -> y; `extra_use` also makes the conv
 * output a second graph output (so BN must not be folded into it). */
static void conv_bn_model(er_pbw *m, const char *act, bool extra_use) {
  er_pbw g = {0};
  const int64_t x[4] = {1, 3, 8, 8}, w[4] = {4, 3, 3, 3}, c[1] = {4};
  tp_add_weight(&g, "W", 4, w, 0.5f, 0);
  tp_add_weight(&g, "B", 1, c, 0.1f, 0);
  tp_add_weight(&g, "scale", 1, c, 0.2f, 1);
  tp_add_weight(&g, "shift", 1, c, 0.1f, 0);
  tp_add_weight(&g, "mean", 1, c, 0.1f, 0);
  tp_add_weight(&g, "var", 1, c, 0.2f, 1);
  er_pbw a = {0};
  tb_attr_ints(&a, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", "B", NULL}, (const char *const[]){"c", NULL}, &a);
  tb_node(&g, "BatchNormalization", "bn", (const char *const[]){"c", "scale", "shift", "mean", "var", NULL},
          (const char *const[]){act ? "b" : "y", NULL}, NULL);
  if (act) tb_node(&g, act, "act", (const char *const[]){"b", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 4, x);
  tb_graph_output(&g, "y", 1, -1, NULL);
  if (extra_use) tb_graph_output(&g, "c", 1, -1, NULL);
  tb_model(m, 8, 14, &g); /* HardSwish needs opset 14 */
  er__pbw_free(&g);
  er__pbw_free(&a);
}

static void test_conv_bn(void) {
  const int64_t x[4] = {1, 3, 8, 8};
  er_pbw m = {0};
  conv_bn_model(&m, NULL, false);
  er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
  CHECK(tp_count_op(opt, "BatchNormalization") == 0 && node_count(opt) == 1);
  CHECK(tp_count_op(plain, "BatchNormalization") == 1);
  same_outputs(opt, plain, 4, x);
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&m);
  /* Conv + BN + Relu: one fused node. */
  er_pbw m2 = {0};
  conv_bn_model(&m2, "Relu", false);
  opt = tp_load(&m2, 2);
  plain = tp_load(&m2, -1);
  CHECK(node_count(opt) == 1 && tp_count_op(opt, "FusedConv") == 1);
  same_outputs(opt, plain, 4, x);
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&m2);
  /* Near miss: the conv output is also a graph output. */
  er_pbw m3 = {0};
  conv_bn_model(&m3, NULL, true);
  opt = tp_load(&m3, 2);
  /* (in either layout: the BN may run blocked on the conv's output) */
  CHECK(tp_count_op(opt, "BatchNormalization") + tp_count_op(opt, "BlockedBatchNormalization") == 1 &&
        tp_count_op(opt, "Conv") + tp_count_op(opt, "BlockedConv") == 1);
  er_model_free(opt);
  er__pbw_free(&m3);
}

/* ---- activations ----------------------------------------------------------------- */

static void test_conv_activations(void) {
  const int64_t x[4] = {1, 3, 8, 8};
  const char *acts[] = {"Relu", "Sigmoid", "Tanh", "HardSwish", "LeakyRelu", "HardSigmoid"};
  for (size_t i = 0; i < ER_ARRAY_LEN(acts); i++) {
    er_pbw m = {0};
    conv_bn_model(&m, acts[i], false);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    CHECK(node_count(opt) == 1 && tp_count_op(opt, "FusedConv") == 1);
    same_outputs(opt, plain, 4, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&m);
  }
  /* Near miss: an activation we do not fuse (Softplus) stays. */
  er_pbw m = {0};
  conv_bn_model(&m, "Softplus", false);
  er_model *opt = tp_load(&m, 2);
  CHECK(tp_count_op(opt, "Softplus") == 1 && tp_count_op(opt, "Conv") == 1);
  er_model_free(opt);
  er__pbw_free(&m);
}

/* x -> Conv -> c; SiLU: c * Sigmoid(c); and Clip(0, 6) as constant inputs. */
static void test_silu_and_clip(void) {
  const int64_t x[4] = {1, 3, 8, 8}, w[4] = {4, 3, 3, 3};
  for (int variant = 0; variant < 3; variant++) {
    er_pbw g = {0}, m = {0};
    tp_add_weight(&g, "W", 4, w, 0.5f, 0);
    tp_add_scalar(&g, "lo", 0.0f);
    tp_add_scalar(&g, "hi", 6.0f);
    tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", NULL}, (const char *const[]){"c", NULL}, NULL);
    if (variant == 0) {
      tb_node(&g, "Sigmoid", "s", (const char *const[]){"c", NULL}, (const char *const[]){"s", NULL}, NULL);
      tb_node(&g, "Mul", "m", (const char *const[]){"s", "c", NULL}, (const char *const[]){"y", NULL}, NULL);
    } else if (variant == 1) {
      tb_node(&g, "Clip", "clip", (const char *const[]){"c", "lo", "hi", NULL}, (const char *const[]){"y", NULL}, NULL);
    } else {
      /* Near miss: Sigmoid of c times something else. */
      tb_node(&g, "Sigmoid", "s", (const char *const[]){"c", NULL}, (const char *const[]){"s", NULL}, NULL);
      tb_node(&g, "Mul", "m", (const char *const[]){"s", "x2", NULL}, (const char *const[]){"y", NULL}, NULL);
      tb_node(&g, "Relu", "r", (const char *const[]){"c", NULL}, (const char *const[]){"x2", NULL}, NULL);
    }
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (variant < 2) CHECK(node_count(opt) == 1 && tp_count_op(opt, "FusedConv") == 1);
    else CHECK(tp_count_op(opt, "Sigmoid") == 1 && tp_count_op(opt, "FusedConv") == 0);
    same_outputs(opt, plain, 4, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
  }
}

/* ---- bias as a separate Add ------------------------------------------------------ */

/* x -> Conv -> Add(B) -> Relu: B [4,1,1] and [1,4,1,1] and a scalar fold
 * into the bias (one FusedConv); near misses: B [1,1,8] (along the
 * width) and B computed at run time stay Adds. */
static void test_conv_bias_add(void) {
  const int64_t x[4] = {1, 3, 6, 8}, w[4] = {4, 3, 3, 3};
  const int64_t shapes[4][4] = {{4, 1, 1, 0}, {1, 4, 1, 1}, {1, 0, 0, 0}, {1, 1, 8, 0}};
  const int ranks[4] = {3, 4, 1, 3};
  for (int variant = 0; variant < 5; variant++) {
    er_pbw g = {0}, m = {0}, a = {0};
    tp_add_weight(&g, "W", 4, w, 0.3f, 0);
    tp_add_weight(&g, "Bc", 1, (const int64_t[]){4}, 0.2f, 0.1f);
    tb_attr_ints(&a, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", "Bc", NULL}, (const char *const[]){"c", NULL}, &a);
    if (variant < 4) {
      tp_add_weight(&g, "B", ranks[variant], shapes[variant], 0.5f, -0.2f);
    } else {
      /* B from the input: not a constant */
      tb_node(&g, "ReduceMax", "rm", (const char *const[]){"x", NULL}, (const char *const[]){"B", NULL}, NULL);
    }
    tb_node(&g, "Add", "add", (const char *const[]){"B", "c", NULL}, (const char *const[]){"s", NULL}, NULL);
    tb_node(&g, "Relu", "r", (const char *const[]){"s", NULL}, (const char *const[]){"y", NULL}, NULL);
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (variant < 3) CHECK(node_count(opt) == 1 && tp_count_op(opt, "FusedConv") == 1);
    else CHECK(tp_count_op(opt, "Add") == 1);
    same_outputs(opt, plain, 4, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&a);
  }
}

/* x -> Conv -> Mul(S) -> Add(B) -> Relu, BatchNormalization as exported by
 * Caffe2: S [4,1,1] on a conv without bias, and a scalar S on a conv with
 * one, fold into one FusedConv; near misses: S [1,1,8] and a computed S
 * stay Muls. */
static void test_conv_mul_add(void) {
  const int64_t x[4] = {1, 3, 6, 8}, w[4] = {4, 3, 3, 3};
  for (int variant = 0; variant < 4; variant++) {
    er_pbw g = {0}, m = {0}, a = {0};
    tp_add_weight(&g, "W", 4, w, 0.3f, 0);
    tp_add_weight(&g, "Bc", 1, (const int64_t[]){4}, 0.2f, 0.1f);
    tp_add_weight(&g, "B", 3, (const int64_t[]){4, 1, 1}, 0.5f, -0.2f);
    tb_attr_ints(&a, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    if (variant == 1)
      tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", "Bc", NULL}, (const char *const[]){"c", NULL}, &a);
    else
      tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", NULL}, (const char *const[]){"c", NULL}, &a);
    if (variant == 0) tp_add_weight(&g, "S", 3, (const int64_t[]){4, 1, 1}, 0.7f, 0.3f);
    else if (variant == 1) tp_add_weight(&g, "S", 1, (const int64_t[]){1}, 0.7f, 0.3f);
    else if (variant == 2) tp_add_weight(&g, "S", 3, (const int64_t[]){1, 1, 8}, 0.7f, 0.3f);
    else tb_node(&g, "ReduceMax", "rm", (const char *const[]){"x", NULL}, (const char *const[]){"S", NULL}, NULL);
    tb_node(&g, "Mul", "mul", (const char *const[]){"c", "S", NULL}, (const char *const[]){"p", NULL}, NULL);
    tb_node(&g, "Add", "add", (const char *const[]){"p", "B", NULL}, (const char *const[]){"s", NULL}, NULL);
    tb_node(&g, "Relu", "r", (const char *const[]){"s", NULL}, (const char *const[]){"y", NULL}, NULL);
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (variant < 2) CHECK(node_count(opt) == 1 && tp_count_op(opt, "FusedConv") == 1);
    else CHECK(tp_count_op(opt, "Mul") == 1);
    same_outputs(opt, plain, 4, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&a);
  }
}

/* ---- residual ------------------------------------------------------------------- */

static void test_conv_residual(void) {
  const int64_t x[4] = {1, 4, 6, 6}, w[4] = {4, 4, 3, 3};
  for (int variant = 0; variant < 4; variant++) {
    er_pbw g = {0}, m = {0}, a = {0};
    tp_add_weight(&g, "W", 4, w, 0.3f, 0);
    tb_attr_ints(&a, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", NULL}, (const char *const[]){"c", NULL}, &a);
    if (variant == 0) {
      tb_node(&g, "Add", "add", (const char *const[]){"c", "x", NULL}, (const char *const[]){"s", NULL}, NULL);
    } else if (variant == 2) {
      /* Sum of two, as old ResNet exports write the residual. */
      tb_node(&g, "Sum", "sum", (const char *const[]){"x", "c", NULL}, (const char *const[]){"s", NULL}, NULL);
    } else if (variant == 3) {
      /* Near miss: a Sum of three. */
      tb_node(&g, "Sum", "sum", (const char *const[]){"x", "c", "x", NULL}, (const char *const[]){"s", NULL}, NULL);
    } else {
      /* Near miss: the residual broadcasts ([1,4,1,1], computed: a
       * constant would fold into the bias), it is not the same shape. */
      er_pbw ra = {0};
      tb_attr_ints(&ra, "axes", (const int64_t[]){2, 3}, 2);
      tb_node(&g, "ReduceMax", "rm", (const char *const[]){"x", NULL}, (const char *const[]){"z", NULL}, &ra);
      er__pbw_free(&ra);
      tb_node(&g, "Add", "add", (const char *const[]){"c", "z", NULL}, (const char *const[]){"s", NULL}, NULL);
    }
    tb_node(&g, "Relu", "r", (const char *const[]){"s", NULL}, (const char *const[]){"y", NULL}, NULL);
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (variant == 0 || variant == 2) CHECK(node_count(opt) == 1 && tp_count_op(opt, "FusedConv") == 1);
    else if (variant == 1) CHECK(tp_count_op(opt, "Add") == 1);
    else CHECK(tp_count_op(opt, "Sum") == 1);
    same_outputs(opt, plain, 4, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&a);
  }
}

/* ---- MatMul + bias + GELU, LayerNorm ---------------------------------------------- */

/* x [1,5,8] -> MatMul(W [8,16]) + b -> GELU from Erf (variant order) -> y */
static void test_matmul_gelu(void) {
  const int64_t x[3] = {1, 5, 8}, w[2] = {8, 16}, b[1] = {16};
  for (int variant = 0; variant < 4; variant++) {
    er_pbw g = {0}, m = {0};
    tp_add_weight(&g, "W", 2, w, 0.4f, 0);
    tp_add_weight(&g, "b", 1, b, 0.1f, 0);
    tp_add_scalar(&g, "sqrt2", 1.41421356f);
    tp_add_scalar(&g, "one", 1.0f);
    tp_add_scalar(&g, "half", 0.5f);
    tp_add_scalar(&g, "three", 3.0f);
    tb_node(&g, "MatMul", "mm", (const char *const[]){"x", "W", NULL}, (const char *const[]){"p", NULL}, NULL);
    tb_node(&g, "Add", "bias", (const char *const[]){"p", "b", NULL}, (const char *const[]){"h", NULL}, NULL);
    tb_node(&g, "Div", "d", (const char *const[]){"h", variant == 3 ? "three" : "sqrt2", NULL},
            (const char *const[]){"d", NULL}, NULL);
    tb_node(&g, "Erf", "e", (const char *const[]){"d", NULL}, (const char *const[]){"e", NULL}, NULL);
    tb_node(&g, "Add", "a1", (const char *const[]){"e", "one", NULL}, (const char *const[]){"a", NULL}, NULL);
    if (variant == 0 || variant == 3) {
      tb_node(&g, "Mul", "m1", (const char *const[]){"h", "a", NULL}, (const char *const[]){"m", NULL}, NULL);
      tb_node(&g, "Mul", "m2", (const char *const[]){"m", "half", NULL}, (const char *const[]){"y", NULL}, NULL);
    } else if (variant == 1) {
      tb_node(&g, "Mul", "m1", (const char *const[]){"a", "half", NULL}, (const char *const[]){"m", NULL}, NULL);
      tb_node(&g, "Mul", "m2", (const char *const[]){"h", "m", NULL}, (const char *const[]){"y", NULL}, NULL);
    } else {
      tb_node(&g, "Mul", "m1", (const char *const[]){"h", "half", NULL}, (const char *const[]){"m", NULL}, NULL);
      tb_node(&g, "Mul", "m2", (const char *const[]){"m", "a", NULL}, (const char *const[]){"y", NULL}, NULL);
    }
    tb_graph_input(&g, "x", 1, 3, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (variant < 3) {
      CHECK(node_count(opt) == 1 && tp_count_op(opt, "FusedMatMul") == 1);
    } else {
      /* Near miss: divides by 3, not sqrt 2: only the bias fuses. */
      CHECK(tp_count_op(opt, "FusedMatMul") == 1 && tp_count_op(opt, "Erf") == 1);
    }
    same_outputs(opt, plain, 3, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
  }
}

/* x [1,5,8] -> MatMul(W [8,16]) + b -> GELU's tanh form -> y, as JAX and
 * TensorFlow export it (variant 0: 0.044715 * h, times h twice, h + that,
 * * sqrt(2/pi), Tanh, 1 +, 0.5 *, h *) and as PyTorch's approximate='tanh'
 * below opset 20 does (1: Pow(h, 3), the products the other way round).
 * Near misses: a cubic coefficient of 0.05 (2: only the bias fuses), and h
 * also read by a Relu (3: the MatMul keeps h; a standalone Gelu). */
static void test_matmul_gelu_tanh(void) {
  const int64_t x[3] = {1, 5, 8}, w[2] = {8, 16}, b[1] = {16};
  for (int variant = 0; variant < 4; variant++) {
    er_pbw g = {0}, m = {0};
    tp_add_weight(&g, "W", 2, w, 0.4f, 0);
    tp_add_weight(&g, "b", 1, b, 0.1f, 0);
    tp_add_scalar(&g, "c", variant == 2 ? 0.05f : 0.044715f);
    tp_add_scalar(&g, "k", 0.7978845608f);
    tp_add_scalar(&g, "one", 1.0f);
    tp_add_scalar(&g, "half", 0.5f);
    tp_add_scalar(&g, "three", 3.0f);
#define N(op, name, a, b2, out) \
  tb_node(&g, op, name, (const char *const[]){a, b2, NULL}, (const char *const[]){out, NULL}, NULL)
    tb_node(&g, "MatMul", "mm", (const char *const[]){"x", "W", NULL}, (const char *const[]){"p", NULL}, NULL);
    N("Add", "bias", "p", "b", "h");
    if (variant != 1) {
      N("Mul", "m0", "c", "h", "ch");
      N("Mul", "m1", "h", "ch", "ch2");
      N("Mul", "m2", "h", "ch2", "ch3");
      N("Add", "a0", "h", "ch3", "s");
      N("Mul", "m3", "k", "s", "u");
    } else {
      N("Mul", "mh", "h", "half", "hh");
      N("Pow", "pw", "h", "three", "h3");
      N("Mul", "m2", "h3", "c", "ch3");
      N("Add", "a0", "ch3", "h", "s");
      N("Mul", "m3", "s", "k", "u");
    }
    tb_node(&g, "Tanh", "t", (const char *const[]){"u", NULL}, (const char *const[]){"t", NULL}, NULL);
    if (variant != 1) {
      N("Add", "a1", "one", "t", "a");
      N("Mul", "m4", "half", "a", "ha");
      N("Mul", "m5", "h", "ha", variant == 3 ? "gy" : "y");
      if (variant == 3) {
        tb_node(&g, "Relu", "r", (const char *const[]){"h", NULL}, (const char *const[]){"rh", NULL}, NULL);
        N("Add", "a2", "gy", "rh", "y");
      }
    } else {
      N("Add", "a1", "t", "one", "a");
      N("Mul", "m5", "hh", "a", "y");
    }
#undef N
    tb_graph_input(&g, "x", 1, 3, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (variant < 2) {
      CHECK(node_count(opt) == 1 && tp_count_op(opt, "FusedMatMul") == 1);
    } else if (variant == 2) {
      CHECK(tp_count_op(opt, "FusedMatMul") == 1 && tp_count_op(opt, "Tanh") == 1 && tp_count_op(opt, "Gelu") == 0);
    } else {
      CHECK(tp_count_op(opt, "FusedMatMul") == 1 && tp_count_op(opt, "Gelu") == 1 && tp_count_op(opt, "Tanh") == 0);
    }
    same_outputs(opt, plain, 3, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
  }
}

/* Variants: 0 the plain pattern; 1 near miss, reduces over axis 1; 2 x
 * also read by a residual Add after the norm, as pre-norm transformers
 * (ViT, GPT-2) export it; 3 near miss, the centred d also read by the
 * residual Add. */
static void test_layernorm(void) {
  const int64_t x[3] = {2, 3, 16}, h[1] = {16};
  for (int variant = 0; variant < 4; variant++) {
    er_pbw g = {0}, m = {0}, ra = {0};
    tp_add_weight(&g, "gamma", 1, h, 0.2f, 1);
    tp_add_weight(&g, "beta", 1, h, 0.1f, 0);
    tp_add_scalar(&g, "two", 2.0f);
    tp_add_scalar(&g, "eps", 1e-5f);
    tb_attr_ints(&ra, "axes", (const int64_t[]){variant == 1 ? 1 : -1}, 1);
    tb_node(&g, "ReduceMean", "rm1", (const char *const[]){"x", NULL}, (const char *const[]){"mean", NULL}, &ra);
    tb_node(&g, "Sub", "sub", (const char *const[]){"x", "mean", NULL}, (const char *const[]){"d", NULL}, NULL);
    tb_node(&g, "Pow", "pow", (const char *const[]){"d", "two", NULL}, (const char *const[]){"d2", NULL}, NULL);
    tb_node(&g, "ReduceMean", "rm2", (const char *const[]){"d2", NULL}, (const char *const[]){"var", NULL}, &ra);
    tb_node(&g, "Add", "ae", (const char *const[]){"var", "eps", NULL}, (const char *const[]){"ve", NULL}, NULL);
    tb_node(&g, "Sqrt", "sq", (const char *const[]){"ve", NULL}, (const char *const[]){"sd", NULL}, NULL);
    tb_node(&g, "Div", "div", (const char *const[]){"d", "sd", NULL}, (const char *const[]){"n", NULL}, NULL);
    tb_node(&g, "Mul", "mg", (const char *const[]){"n", "gamma", NULL}, (const char *const[]){"ng", NULL}, NULL);
    tb_node(&g, "Add", "ab", (const char *const[]){"ng", "beta", NULL},
            (const char *const[]){variant >= 2 ? "ln" : "y", NULL}, NULL);
    if (variant >= 2)
      tb_node(&g, "Add", "res", (const char *const[]){"ln", variant == 2 ? "x" : "d", NULL},
              (const char *const[]){"y", NULL}, NULL);
    tb_graph_input(&g, "x", 1, 3, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (variant == 0) CHECK(node_count(opt) == 1 && tp_count_op(opt, "LayerNormalization") == 1);
    else if (variant == 2) CHECK(node_count(opt) == 2 && tp_count_op(opt, "LayerNormalization") == 1);
    else CHECK(tp_count_op(opt, "LayerNormalization") == 0 && tp_count_op(opt, "ReduceMean") == 2);
    same_outputs(opt, plain, 3, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&ra);
  }
}

/* ---- layout chains ------------------------------------------------------------- */

static void test_transpose_reshape(void) {
  const int64_t x[3] = {2, 3, 4};
  for (int variant = 0; variant < 3; variant++) {
    er_pbw g = {0}, m = {0}, a1 = {0}, a2 = {0};
    tb_attr_ints(&a1, "perm", (const int64_t[]){1, 0, 2}, 3);
    tb_attr_ints(&a2, "perm", variant == 0 ? (const int64_t[]){1, 0, 2} : (const int64_t[]){2, 0, 1}, 3);
    if (variant < 2) {
      tb_node(&g, "Transpose", "t1", (const char *const[]){"x", NULL}, (const char *const[]){"t", NULL}, &a1);
      tb_node(&g, "Transpose", "t2", (const char *const[]){"t", NULL}, (const char *const[]){"u", NULL}, &a2);
      tb_node(&g, "Relu", "r", (const char *const[]){"u", NULL}, (const char *const[]){"y", NULL}, NULL);
    } else {
      er_pbw s1 = {0}, s2 = {0};
      const int64_t one[1] = {2};
      const int64_t v1[2] = {6, 4}, v2[2] = {4, 6};
      tb_tensor(&s1, "s1", 7, 1, one, v1, sizeof v1);
      tb_tensor(&s2, "s2", 7, 1, one, v2, sizeof v2);
      tb_graph_initializer(&g, &s1);
      tb_graph_initializer(&g, &s2);
      er__pbw_free(&s1);
      er__pbw_free(&s2);
      tb_node(&g, "Reshape", "r1", (const char *const[]){"x", "s1", NULL}, (const char *const[]){"t", NULL}, NULL);
      tb_node(&g, "Reshape", "r2", (const char *const[]){"t", "s2", NULL}, (const char *const[]){"u", NULL}, NULL);
      tb_node(&g, "Relu", "r", (const char *const[]){"u", NULL}, (const char *const[]){"y", NULL}, NULL);
    }
    tb_graph_input(&g, "x", 1, 3, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (variant == 0) CHECK(node_count(opt) == 1 && tp_count_op(opt, "Transpose") == 0);
    if (variant == 1) CHECK(tp_count_op(opt, "Transpose") == 1);
    if (variant == 2) CHECK(tp_count_op(opt, "Reshape") == 1);
    same_outputs(opt, plain, 3, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&a1);
    er__pbw_free(&a2);
  }
}

/* ---- attention ------------------------------------------------------------------ */

void tp_add_i64(er_pbw *g, const char *name, int n, const int64_t *v) {
  er_pbw t = {0};
  const int64_t dims[1] = {n};
  tb_tensor(&t, name, 7, 1, dims, v, (size_t)n * sizeof *v);
  tb_graph_initializer(g, &t);
  er__pbw_free(&t);
}

/* A self-attention block over x [2, 6, 16] with 2 heads of 8 (values of
 * dv), as exporters write it:
 *   q3/k3/v3 = MatMul(x, W); q = Transpose(Reshape(q3, split), [0,2,1,3]);
 *   kt = Transpose(Reshape(k3, split), [0,2,3,1]); v likewise;
 *   s = MatMul(q, kt) [Div | Mul scale] [+ mask]; p = Softmax(s);
 *   o = MatMul(p, v) [-> Transpose -> Reshape(merge) -> y]
 * and the variations below, each with what the pass must make of it. */
typedef struct attn_variant {
  const char *what;
  int scale_op;              /* 0 none, 1 Div(s, sqrt 8), 2 Mul(1/sqrt 8, s), 3 Div by a [2,1,1] constant */
  int mask;                  /* 0 none, 1 [S,T], 2 [B,1,S,T], 3 [S,1] (broadcast along the keys) */
  int k_form;                /* 0 Transpose [0,2,3,1]; 1 that then Relu; 2 Transpose([0,1,3,2]) of Relu(heads) */
  bool merge;                /* o merged back by Transpose + Reshape into y [2, 6, 16 or 8] */
  int64_t merge_shape[3];
  int64_t split[4], split_v[4];
  int softmax_axis;          /* -1, 3 or 2 (99: attribute absent) */
  int opset;
  bool cross;                /* keys and values from x's first 4 positions */
  int extra;                 /* 0 none, 1 p also read by a second output, 2 scaled scores a graph output,
                                3 q (Q's heads) a graph output */
  int expect;                /* 3: 3-D Attention; 4: 4-D Attention; 0: none */
} attn_variant;

static const attn_variant attn_variants[] = {
    {"3-D, Div", 1, 0, 0, true, {0, 0, -1}, {0, 0, 2, 8}, {0, 0, 2, 8}, -1, 17, false, 0, 3},
    {"3-D, Mul, mask [S,T]", 2, 1, 0, true, {0, 0, 16}, {0, 0, 2, -1}, {0, 0, -1, 8}, -1, 17, false, 0, 3},
    {"3-D, Dv 4, mask [B,1,S,T], S != T", 1, 2, 0, true, {2, 6, 8}, {0, 0, 2, 8}, {0, 0, 2, 4}, 3, 17, true, 0, 3},
    {"3-D, no scale, opset 11 axis 3", 0, 0, 0, true, {0, 0, -1}, {2, 6, 2, 8}, {2, 6, -1, 8}, 3, 11, false, 0, 3},
    {"4-D, K from the split Transpose", 1, 1, 0, false, {0}, {0, 0, 2, 8}, {0, 0, 2, 8}, 99, 17, true, 0, 4},
    {"4-D, K^T from Relu", 2, 2, 1, false, {0}, {0, 0, 2, 8}, {0, 0, 2, 4}, -1, 17, false, 0, 4},
    {"4-D, K^T = Transpose(K, [0,1,3,2])", 1, 0, 2, true, {0, 0, -1}, {0, 0, 2, 8}, {0, 0, 2, 8}, -1, 17, false, 0, 4},
    {"3-D near miss, merge to [1, 12, 16]: 4-D", 1, 0, 0, true, {1, 12, 16}, {0, 0, 2, 8}, {0, 0, 2, 8}, -1, 17, false, 0, 4},
    {"3-D near miss, merge to [0, 12, 8]: 4-D", 1, 0, 0, true, {0, 12, 8}, {0, 0, 2, 8}, {0, 0, 2, 8}, -1, 17, false, 0, 4},
    {"3-D near miss, the heads of q a graph output: 4-D", 1, 0, 0, true, {0, 0, -1}, {0, 0, 2, 8}, {0, 0, 2, 8}, -1, 17, false, 3, 4},
    {"3-D near miss, split [1, 12, 2, 8]: 4-D", 1, 0, 0, true, {2, 6, 16}, {1, 12, 2, 8}, {1, 12, 2, 8}, -1, 17, false, 0, 4},
    {"near miss: probabilities read twice", 1, 0, 0, true, {0, 0, -1}, {0, 0, 2, 8}, {0, 0, 2, 8}, -1, 17, false, 1, 0},
    {"near miss: scaled scores a graph output", 1, 0, 0, true, {0, 0, -1}, {0, 0, 2, 8}, {0, 0, 2, 8}, -1, 17, false, 2, 0},
    {"near miss: Softmax over axis 2", 1, 0, 0, true, {0, 0, -1}, {0, 0, 2, 8}, {0, 0, 2, 8}, 2, 17, false, 0, 0},
    {"near miss: Softmax opset 11, default axis", 1, 0, 0, true, {0, 0, -1}, {0, 0, 2, 8}, {0, 0, 2, 8}, 99, 11, false, 0, 0},
    {"near miss: scale of [2,1,1]", 3, 0, 0, true, {0, 0, -1}, {0, 0, 2, 8}, {0, 0, 2, 8}, -1, 17, false, 0, 0},
    {"near miss: mask [S,1]", 1, 3, 0, true, {0, 0, -1}, {0, 0, 2, 8}, {0, 0, 2, 8}, -1, 17, false, 0, 0},
};

#define NODE(g, op, name, ins, outs, attrs) \
  tb_node(g, op, name, (const char *const[])ins, (const char *const[])outs, attrs)
#define L(...) {__VA_ARGS__, NULL}

static void attn_model(er_pbw *m, const attn_variant *v) {
  er_pbw g = {0}, pq = {0}, pk = {0}, pkt = {0}, po = {0}, sa = {0}, sl = {0};
  const int64_t x[3] = {2, 6, 16}, t = v->cross ? 4 : 6, dv = v->split_v[3] > 0 ? v->split_v[3] : 8;
  tp_add_weight(&g, "Wq", 2, (const int64_t[]){16, 16}, 0.5f, 0);
  tp_add_weight(&g, "Wk", 2, (const int64_t[]){16, 16}, 0.5f, 0);
  tp_add_weight(&g, "Wv", 2, (const int64_t[]){16, 2 * dv}, 0.5f, 0);
  tp_add_i64(&g, "split", 4, v->split);
  tp_add_i64(&g, "split_v", 4, v->split_v);
  tp_add_i64(&g, "merge", 3, v->merge_shape);
  tp_add_scalar(&g, "c", v->scale_op == 2 ? 1.0f / sqrtf(8.0f) : sqrtf(8.0f));
  tp_add_weight(&g, "c3", 3, (const int64_t[]){2, 1, 1}, 0.2f, 2.8f);
  if (v->mask == 1) tp_add_weight(&g, "M", 2, (const int64_t[]){6, t}, 0.5f, -0.5f);
  if (v->mask == 2) tp_add_weight(&g, "M", 4, (const int64_t[]){2, 1, 6, t}, 0.5f, -0.5f);
  if (v->mask == 3) tp_add_weight(&g, "M", 2, (const int64_t[]){6, 1}, 0.5f, -0.5f);
  tb_attr_ints(&pq, "perm", (const int64_t[]){0, 2, 1, 3}, 4);
  tb_attr_ints(&pk, "perm", (const int64_t[]){0, 2, 3, 1}, 4);
  tb_attr_ints(&pkt, "perm", (const int64_t[]){0, 1, 3, 2}, 4);
  tb_attr_ints(&po, "perm", (const int64_t[]){0, 2, 1, 3}, 4);
  if (v->softmax_axis != 99) tb_attr_int(&sa, "axis", v->softmax_axis);
  const char *kv_in = "x";
  if (v->cross) {
    tp_add_i64(&g, "s0", 1, (const int64_t[]){0});
    tp_add_i64(&g, "s1", 1, (const int64_t[]){4});
    tp_add_i64(&g, "ax", 1, (const int64_t[]){1});
    NODE(&g, "Slice", "slice", L("x", "s0", "s1", "ax"), L("xs"), NULL);
    kv_in = "xs";
  }
  NODE(&g, "MatMul", "mq", L("x", "Wq"), L("q3"), NULL);
  NODE(&g, "MatMul", "mk", L(kv_in, "Wk"), L("k3"), NULL);
  NODE(&g, "MatMul", "mv", L(kv_in, "Wv"), L("v3"), NULL);
  NODE(&g, "Reshape", "rq", L("q3", "split"), L("q4"), NULL);
  NODE(&g, "Transpose", "tq", L("q4"), L("q"), &pq);
  NODE(&g, "Reshape", "rk", L("k3", "split"), L("k4"), NULL);
  if (v->k_form == 0) {
    NODE(&g, "Transpose", "tk", L("k4"), L("kt"), &pk);
  } else if (v->k_form == 1) {
    NODE(&g, "Transpose", "tk", L("k4"), L("kt0"), &pk);
    NODE(&g, "Relu", "relu", L("kt0"), L("kt"), NULL);
  } else {
    NODE(&g, "Transpose", "tk", L("k4"), L("kh"), &pq);
    NODE(&g, "Relu", "relu", L("kh"), L("k"), NULL);
    NODE(&g, "Transpose", "tkt", L("k"), L("kt"), &pkt);
  }
  NODE(&g, "Reshape", "rv", L("v3", "split_v"), L("v4"), NULL);
  NODE(&g, "Transpose", "tv", L("v4"), L("v"), &pq);
  NODE(&g, "MatMul", "qk", L("q", "kt"), L("s"), NULL);
  const char *sc = "s";
  if (v->scale_op == 1) NODE(&g, "Div", "scale", L("s", "c"), L("s2"), NULL);
  if (v->scale_op == 2) NODE(&g, "Mul", "scale", L("c", "s"), L("s2"), NULL);
  if (v->scale_op == 3) NODE(&g, "Div", "scale", L("s", "c3"), L("s2"), NULL);
  if (v->scale_op) sc = "s2";
  if (v->mask) {
    NODE(&g, "Add", "mask", L("M", sc), L("s3"), NULL);
    sc = "s3";
  }
  NODE(&g, "Softmax", "softmax", L(sc), L("p"), &sa);
  NODE(&g, "MatMul", "pv", L("p", "v"), L(v->merge ? "o" : "y"), NULL);
  if (v->merge) {
    NODE(&g, "Transpose", "to", L("o"), L("o2"), &po);
    NODE(&g, "Reshape", "ro", L("o2", "merge"), L("y"), NULL);
  }
  if (v->extra == 1) NODE(&g, "ReduceMax", "second", L("p"), L("y2"), NULL);
  tb_graph_input(&g, "x", 1, 3, x);
  tb_graph_output(&g, "y", 1, -1, NULL);
  if (v->extra == 1) tb_graph_output(&g, "y2", 1, -1, NULL);
  if (v->extra == 2) tb_graph_output(&g, sc, 1, -1, NULL);
  if (v->extra == 3) tb_graph_output(&g, "q", 1, -1, NULL);
  tb_model(m, 8, v->opset, &g);
  er_pbw *all[] = {&g, &pq, &pk, &pkt, &po, &sa, &sl};
  for (size_t i = 0; i < ER_ARRAY_LEN(all); i++) er__pbw_free(all[i]);
}

/* Runs both models on the same random x [2, 6, 16]; every output must
 * agree as in same_outputs. */
static void attn_same_outputs(er_model *a, er_model *b, int n_out) {
  er_session *sa = NULL, *sb = NULL;
  CHECK_STATUS(er_session_create(a, NULL, &sa), ER_STATUS_OK);
  CHECK_STATUS(er_session_create(b, NULL, &sb), ER_STATUS_OK);
  er_tensor *x;
  er_tensor_create(ER_DTYPE_FLOAT, 3, (const int64_t[]){2, 6, 16}, &x);
  float *xv = er_tensor_data(x);
  for (int64_t i = 0; i < er_tensor_count(x); i++) xv[i] = tp_frand() * 2;
  er_named_tensor in = {"x", x};
  er_tensor *ya[2] = {NULL, NULL}, *yb[2] = {NULL, NULL};
  CHECK_STATUS(er_session_run(sa, &in, 1, NULL, (size_t)n_out, ya), ER_STATUS_OK);
  CHECK_STATUS(er_session_run(sb, &in, 1, NULL, (size_t)n_out, yb), ER_STATUS_OK);
  for (int k = 0; k < n_out; k++) {
    if (!ya[k] || !yb[k]) continue;
    CHECK(er_tensor_count(ya[k]) == er_tensor_count(yb[k]));
    const float *pa = er_tensor_cdata(ya[k]), *pb = er_tensor_cdata(yb[k]);
    int bad = 0;
    for (int64_t i = 0; i < er_tensor_count(ya[k]); i++)
      if (!(fabsf(pa[i] - pb[i]) <= 1e-5f + 1e-4f * fabsf(pb[i]))) bad++;
    CHECK(bad == 0);
    er_tensor_free(ya[k]);
    er_tensor_free(yb[k]);
  }
  er_tensor_free(x);
  er_session_free(sa);
  er_session_free(sb);
}

static void test_attention(void) {
  for (size_t i = 0; i < ER_ARRAY_LEN(attn_variants); i++) {
    const attn_variant *v = &attn_variants[i];
    er_pbw m = {0};
    attn_model(&m, v);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    int att = tp_count_op(opt, "Attention"), sm = tp_count_op(opt, "Softmax");
    int tr = tp_count_op(opt, "Transpose"), rs = tp_count_op(opt, "Reshape");
    bool ok;
    if (v->expect == 3) ok = att == 1 && sm == 0 && tr == 0 && rs == 0;
    else if (v->expect == 4) ok = att == 1 && sm == 0 && tr >= 2 && rs >= 3;
    else ok = att == 0 && sm == 1;
    if (!ok)
      fprintf(stderr, "attention variant '%s': %d Attention, %d Softmax, %d Transpose, %d Reshape\n", v->what, att,
              sm, tr, rs);
    CHECK(ok);
    CHECK(tp_count_op(plain, "Attention") == 0);
    attn_same_outputs(opt, plain, v->extra ? 2 : 1);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&m);
  }
}

/* A CPU session fuses its own copy: the model keeps standard ops for
 * other sessions (an accelerator or NPU plugin sees Conv and Relu). */
static void test_model_untouched(void) {
  er_pbw m = {0};
  conv_bn_model(&m, "Relu", false);
  er_model *model = tp_load(&m, 2);
  CHECK(tp_count_op(model, "FusedConv") == 1);
  er_model_summary s;
  er_model_summary_get(model, &s);
  int fused = 0, relu = 0;
  for (size_t i = 0; i < s.node_count; i++) {
    const char *t, *name;
    er_model_node(model, i, &t, &name);
    fused += strcmp(t, "FusedConv") == 0;
    relu += strcmp(t, "Relu") == 0;
  }
  CHECK(fused == 0 && relu == 1 && s.node_count == 2); /* BatchNorm folded at tp_load */
  er_model_free(model);
  er__pbw_free(&m);
}

/* ---- BatchNormalization + per-channel Mul / Add ---------------------------------- */

/* x -> BatchNormalization -> Mul(per channel) -> Add(one value) -> Relu:
 * one BatchNormalization (then the Relu). Near misses: a Mul by a
 * constant along the width stays; when the Mul's output is also read by
 * another node, the Mul still merges (the BatchNormalization then writes
 * that value) but the Add after it stays. */
static void test_bn_affine(void) {
  const int64_t x[4] = {1, 6, 5, 7};
  for (int variant = 0; variant < 3; variant++) {
    er_pbw g = {0}, m = {0};
    tp_add_weight(&g, "scale", 1, (const int64_t[]){6}, 0.3f, 1);
    tp_add_weight(&g, "shift", 1, (const int64_t[]){6}, 0.2f, 0);
    tp_add_weight(&g, "mean", 1, (const int64_t[]){6}, 0.2f, 0);
    tp_add_weight(&g, "var", 1, (const int64_t[]){6}, 0.2f, 1);
    if (variant == 1) tp_add_weight(&g, "k", 4, (const int64_t[]){1, 1, 1, 7}, 0.5f, 1);
    else tp_add_weight(&g, "k", 3, (const int64_t[]){6, 1, 1}, 0.5f, 1);
    tp_add_scalar(&g, "b", 0.25f);
    tb_node(&g, "BatchNormalization", "bn", IN("x", "scale", "shift", "mean", "var"), OUT("n"), NULL);
    tb_node(&g, "Mul", "mul", IN("n", "k"), OUT("m"), NULL);
    tb_node(&g, "Add", "add", IN("b", "m"), OUT("a"), NULL);
    tb_node(&g, "Relu", "relu", IN("a"), OUT(variant == 2 ? "r" : "y"), NULL);
    if (variant == 2) tb_node(&g, "Add", "twice", IN("r", "m"), OUT("y"), NULL);
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (variant == 0) CHECK(node_count(opt) == 2 && tp_count_op(opt, "BatchNormalization") == 1);
    else if (variant == 1) CHECK(tp_count_op(opt, "Mul") == 1 && tp_count_op(opt, "Add") == 1);
    else CHECK(tp_count_op(opt, "Mul") == 0 && tp_count_op(opt, "Add") == 2 && node_count(opt) == 4);
    same_outputs(opt, plain, 4, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
  }
}

/* ---- HardSwish from primitives -------------------------------------------------- */

/* x -> Conv -> c; c * Clip(c + 3, 0, 6) / 6 in paddle2onnx's order and in
 * PyTorch's, and c * HardSigmoid(c) with alpha 1/6: one FusedConv with
 * HardSwish. Near misses: + 2 instead of + 3; the Clip read twice. */
static void test_hardswish(void) {
  const int64_t x[4] = {1, 3, 8, 8}, w[4] = {4, 3, 3, 3};
  for (int variant = 0; variant < 5; variant++) {
    er_pbw g = {0}, m = {0}, hs = {0};
    tp_add_weight(&g, "W", 4, w, 0.8f, 0);
    tp_add_scalar(&g, "three", 3.0f);
    tp_add_scalar(&g, "two", 2.0f);
    tp_add_scalar(&g, "zero", 0.0f);
    tp_add_scalar(&g, "six", 6.0f);
    tp_add_scalar(&g, "sixth", 1.0f / 6.0f);
    tb_node(&g, "Conv", "conv", IN("x", "W"), OUT("c"), NULL);
    const char *y = "y";
    if (variant == 3) {
      tb_attr_float(&hs, "alpha", 1.0f / 6.0f);
      tb_attr_float(&hs, "beta", 0.5f);
      tb_node(&g, "HardSigmoid", "hsig", IN("c"), OUT("h"), &hs);
      tb_node(&g, "Mul", "m", IN("c", "h"), OUT("y"), NULL);
    } else {
      tb_node(&g, "Add", "a", IN("c", variant == 2 ? "two" : "three"), OUT("a"), NULL);
      tb_node(&g, "Clip", "clip", IN("a", "zero", "six"), OUT("k"), NULL);
      if (variant == 1) {
        tb_node(&g, "Mul", "d", IN("k", "sixth"), OUT("d"), NULL);
        tb_node(&g, "Mul", "m", IN("d", "c"), OUT(y), NULL);
      } else {
        tb_node(&g, "Mul", "m", IN("c", "k"), OUT("mm"), NULL);
        tb_node(&g, "Div", "d", IN("mm", "six"), OUT(variant == 4 ? "y0" : y), NULL);
        if (variant == 4) tb_node(&g, "Add", "twice", IN("y0", "k"), OUT("y"), NULL);
      }
    }
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    setenv("EDGERUN_LAYOUT", "planar", 1);
    if (variant <= 1 || variant == 3) CHECK(node_count(opt) == 1 && tp_count_op(opt, "FusedConv") == 1);
    else CHECK(tp_count_op(opt, "Clip") == 1);
    unsetenv("EDGERUN_LAYOUT");
    same_outputs(opt, plain, 4, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&hs);
  }
}

/* ---- Slice chains ---------------------------------------------------------------- */

/* x [1, 3, 9, 10] -> Slice s1 -> t -> Slice s2 -> y, as YOLOv5's Focus stem
 * writes it (rows, then columns, with step 2), and near misses. */
static void test_slice_chain(void) {
  static const struct {
    const char *what;
    int64_t st1, en1, ax1, sp1; /* s1: one axis */
    int64_t st2, en2, ax2, sp2; /* s2: one axis */
    bool t_shared;              /* t is also read by a third Slice */
    int expect;                 /* Slice nodes left */
  } v[] = {
      {"focus rows then columns", 1, INT64_MAX, 2, 2, 0, INT64_MAX, -1, 2, false, 1},
      {"negative step, clamped ends", -1, -100, 3, -3, 1, 7, 1, 1, false, 1},
      {"same axis twice", 1, INT64_MAX, 2, 2, 1, INT64_MAX, 2, 2, false, 2},
      {"first result read twice", 0, 5, 2, 1, 0, INT64_MAX, 3, 2, true, 3},
  };
  const int64_t x[4] = {1, 3, 9, 10};
  for (size_t k = 0; k < ER_ARRAY_LEN(v); k++) {
    er_pbw g = {0}, m = {0};
    tp_add_i64(&g, "st1", 1, &v[k].st1);
    tp_add_i64(&g, "en1", 1, &v[k].en1);
    tp_add_i64(&g, "ax1", 1, &v[k].ax1);
    tp_add_i64(&g, "sp1", 1, &v[k].sp1);
    tp_add_i64(&g, "st2", 1, &v[k].st2);
    tp_add_i64(&g, "en2", 1, &v[k].en2);
    tp_add_i64(&g, "ax2", 1, &v[k].ax2);
    tp_add_i64(&g, "sp2", 1, &v[k].sp2);
    tb_node(&g, "Slice", "s1", (const char *const[]){"x", "st1", "en1", "ax1", "sp1", NULL},
            (const char *const[]){"t", NULL}, NULL);
    tb_node(&g, "Slice", "s2", (const char *const[]){"t", "st2", "en2", "ax2", "sp2", NULL},
            (const char *const[]){v[k].t_shared ? "y1" : "y", NULL}, NULL);
    if (v[k].t_shared) {
      tb_node(&g, "Slice", "s3", (const char *const[]){"t", "st2", "en2", "ax2", "sp2", NULL},
              (const char *const[]){"y2", NULL}, NULL);
      tb_node(&g, "Add", "add", (const char *const[]){"y1", "y2", NULL}, (const char *const[]){"y", NULL}, NULL);
    }
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    int n = tp_count_op(opt, "Slice");
    if (n != v[k].expect) fprintf(stderr, "slice chain '%s': %d Slices left, want %d\n", v[k].what, n, v[k].expect);
    CHECK(n == v[k].expect);
    same_outputs(opt, plain, 4, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
  }
}

/* ---- loop-invariant nodes leave Loop bodies -------------------------------- */

/* y = Loop(3 iterations, carried x passed through, carried acc = x):
 *   p = MatMul(x, Wb)  (Wb a body constant)
 *   q = Relu(p), r = Mul(q, G)  (G captured from the main graph)
 *   acc' = acc + r + float(i)
 * p, q and r read only what every iteration sees alike and move in front
 * of the Loop; the rest reads the iteration number or acc and stays. The
 * near miss multiplies acc instead of the passed-through x: nothing
 * moves. */
static void loop_model(er_pbw *m, bool near_miss) {
  er_pbw g = {0}, b = {0}, attrs = {0}, mt = {0}, to = {0};
  const int64_t xd[2] = {4, 3}, wd[2] = {3, 3}, gd[1] = {3}, trips = 3;
  tp_add_weight(&g, "G", 1, gd, 0.5f, 1.0f);
  tb_tensor(&mt, "M", 7, 0, NULL, &trips, sizeof trips);
  tb_graph_initializer(&g, &mt);
  tp_add_weight(&b, "Wb", 2, wd, 1.0f, 0.0f);
  tb_attr_int(&to, "to", 1);
  tb_node(&b, "MatMul", "p", (const char *const[]){near_miss ? "acc" : "xc", "Wb", NULL},
          (const char *const[]){"p", NULL}, NULL);
  tb_node(&b, "Relu", "q", (const char *const[]){"p", NULL}, (const char *const[]){"q", NULL}, NULL);
  tb_node(&b, "Mul", "r", (const char *const[]){"q", "G", NULL}, (const char *const[]){"r", NULL}, NULL);
  tb_node(&b, "Cast", "fi", (const char *const[]){"i", NULL}, (const char *const[]){"fi", NULL}, &to);
  tb_node(&b, "Add", "s", (const char *const[]){"r", "fi", NULL}, (const char *const[]){"s", NULL}, NULL);
  tb_node(&b, "Add", "acc2", (const char *const[]){"acc", "s", NULL}, (const char *const[]){"acc2", NULL}, NULL);
  tb_node(&b, "Identity", "c", (const char *const[]){"cond_in", NULL}, (const char *const[]){"cond_out", NULL},
          NULL);
  tb_graph_input(&b, "i", 7, 0, NULL);
  tb_graph_input(&b, "cond_in", 9, 0, NULL);
  tb_graph_input(&b, "xc", 1, 2, xd);
  tb_graph_input(&b, "acc", 1, 2, xd);
  tb_graph_output(&b, "cond_out", 9, 0, NULL);
  tb_graph_output(&b, "xc", 1, 2, xd);
  tb_graph_output(&b, "acc2", 1, 2, xd);
  tb_attr_graph(&attrs, "body", &b);
  tb_node(&g, "Loop", "loop", (const char *const[]){"M", "", "x", "x", NULL}, (const char *const[]){"xf", "y", NULL},
          &attrs);
  tb_graph_input(&g, "x", 1, 2, xd);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(m, 8, 13, &g);
  er__pbw_free(&g);
  er__pbw_free(&b);
  er__pbw_free(&attrs);
  er__pbw_free(&mt);
  er__pbw_free(&to);
}

static void test_loop_invariants(void) {
  const int64_t xd[2] = {4, 3};
  for (int near = 0; near < 2; near++) {
    er_pbw m = {0};
    loop_model(&m, near != 0);
    er_model *opt = tp_load(&m, 2), *as_written = tp_load(&m, -1);
    if (opt && as_written) {
      /* Written: the Loop alone. Hoisted: MatMul, Relu and Mul (or what
       * the fusions make of them) in front of it. */
      CHECK(node_count(as_written) == 1 && tp_count_op(opt, "Loop") == 1);
      CHECK(near ? node_count(opt) == 1 : node_count(opt) >= 2);
      same_outputs(opt, as_written, 2, xd);
    }
    er_model_free(opt);
    er_model_free(as_written);
    er__pbw_free(&m);
  }
}

/* ---- the links every pass must leave true (issue 35) ------------------- */

/* The fuzz finding: a QDQ model whose MaxPool reads a DequantizeLinear.
 * Sinking the DQ below the MaxPool left the DQ's old output naming it as
 * producer; after the compaction that index pointed past the node list and
 * the planner read past its per-node array. Now the session builds and the
 * run fails on the model's own broken Reshape, by name. */
static void test_stale_producer_finding(void) {
  er_model *m = NULL;
  CHECK_STATUS(er_model_load_file(ER_SOURCE_DIR "/fuzz/corpus/load/stale-producer.onnx", NULL, &m), ER_STATUS_OK);
  if (!m) return;
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, NULL, &s), ER_STATUS_OK);
  if (s) {
    /* Zero-filled inputs of the declared shapes, as fuzz-tp_load gives. */
    size_t n_in = er_model_input_count(m);
    er_tensor *x[4] = {NULL}, *y[4] = {NULL};
    er_named_tensor in[4];
    CHECK(n_in <= 4);
    for (size_t i = 0; i < n_in && i < 4; i++) {
      er_value_info info;
      er_model_input_info(m, i, &info);
      int64_t dims[ER_MAX_RANK];
      for (int d = 0; d < info.rank; d++) dims[d] = info.dims[d] < 0 ? 1 : info.dims[d];
      CHECK_STATUS(er_tensor_create(info.dtype, info.rank, dims, &x[i]), ER_STATUS_OK);
      in[i] = (er_named_tensor){info.name, x[i]};
    }
    size_t n_out = er_model_output_count(m);
    CHECK(n_out <= 4);
    CHECK_STATUS(er_session_run(s, in, n_in, NULL, n_out, y), ER_STATUS_INVALID_SHAPE);
    CHECK_MSG("Times212_reshape0");
    for (size_t i = 0; i < 4; i++) {
      er_tensor_free(y[i]);
      er_tensor_free(x[i]);
    }
  }
  er_session_free(s);
  er_model_free(m);
}

/* The check itself fails, naming the pass, on each kind of broken link,
 * and er__graph_relink repairs what a pass can break. */
static void test_check_links(void) {
  er_pbw g = {0}, mw = {0};
  const int64_t d[1] = {4};
  tb_node(&g, "Relu", "r1", (const char *const[]){"x", NULL}, (const char *const[]){"a", NULL}, NULL);
  tb_node(&g, "Relu", "r2", (const char *const[]){"a", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 1, d);
  tb_graph_output(&g, "y", 1, 1, d);
  tb_model(&mw, 8, 13, &g);
  er_model *m = tp_load(&mw, 1);
  er__pbw_free(&g);
  er__pbw_free(&mw);
  CHECK(m != NULL);
  if (!m) return;
  er_graph *gr = m->graph;
  CHECK_STATUS(er__graph_check_links(gr, "test"), ER_STATUS_OK);
  int32_t a = er__graph_find(gr, "a"), y = er__graph_find(gr, "y"), x = er__graph_find(gr, "x");
  /* A producer past the node list: the finding's shape. */
  gr->values[a].producer = gr->n_nodes + 5;
  CHECK_STATUS(er__graph_check_links(gr, "some-pass"), ER_STATUS_INTERNAL);
  CHECK_MSG("after pass 'some-pass'");
  CHECK_MSG("names producer node 7 but the graph has 2 nodes");
  er__graph_relink(gr);
  CHECK_STATUS(er__graph_check_links(gr, "relinked"), ER_STATUS_OK);
  /* A producer that does not list the value. */
  gr->values[y].producer = gr->values[a].producer;
  CHECK_STATUS(er__graph_check_links(gr, "p2"), ER_STATUS_INTERNAL);
  CHECK_MSG("which does not output it");
  er__graph_relink(gr);
  /* A node reading an intermediate nobody makes (its maker dropped it). */
  gr->nodes[0].outputs[0] = -1;
  er__graph_relink(gr);
  CHECK_STATUS(er__graph_check_links(gr, "p3"), ER_STATUS_INTERNAL);
  CHECK_MSG("reads 'a', which no node produces");
  gr->nodes[0].outputs[0] = a;
  er__graph_relink(gr);
  /* An input id out of range. */
  int32_t keep = gr->nodes[0].inputs[0];
  gr->nodes[0].inputs[0] = gr->n_values;
  CHECK_STATUS(er__graph_check_links(gr, "p4"), ER_STATUS_INTERNAL);
  gr->nodes[0].inputs[0] = keep;
  /* A graph input with a producer. */
  gr->values[x].producer = 0;
  CHECK_STATUS(er__graph_check_links(gr, "p5"), ER_STATUS_INTERNAL);
  er__graph_relink(gr);
  /* Removing a node through the toolkit leaves no stale index. */
  bool dead[2] = {false, true};
  er__graph_remove_nodes(gr, dead);
  CHECK(gr->n_nodes == 1 && gr->values[y].producer == -1 && gr->values[a].producer == 0);
  er_model_free(m);
}

/* The pass table lists every pass once, tp_load passes before session ones. */
static void test_pass_table(void) {
  size_t n = 0;
  const er_pass *p = er__graph_passes(&n);
  CHECK(n >= 9);
  bool session_seen = false, ordered = true;
  for (size_t i = 0; i < n; i++) {
    if (p[i].phase == ER_PASS_SESSION) session_seen = true;
    else if (session_seen) ordered = false;
    for (size_t j = 0; j < i; j++) CHECK(strcmp(p[i].name, p[j].name) != 0);
  }
  CHECK(ordered && session_seen);
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"stale_producer_finding", test_stale_producer_finding},
      {"check_links", test_check_links},
      {"pass_table", test_pass_table},
      {"conv_bn", test_conv_bn},
      {"conv_activations", test_conv_activations},
      {"silu_and_clip", test_silu_and_clip},
      {"conv_bias_add", test_conv_bias_add},
      {"conv_mul_add", test_conv_mul_add},
      {"conv_residual", test_conv_residual},
      {"matmul_gelu", test_matmul_gelu},
      {"matmul_gelu_tanh", test_matmul_gelu_tanh},
      {"layernorm", test_layernorm},
      {"transpose_reshape", test_transpose_reshape},
      {"slice_chain", test_slice_chain},
      {"model_untouched", test_model_untouched},
      {"attention", test_attention},
      {"hardswish", test_hardswish},
      {"bn_affine", test_bn_affine},
      {"blocked_layout", tp_test_blocked_layout},
      {"blocked_near_misses", tp_test_blocked_near_misses},
      {"blocked_groups", tp_test_blocked_groups},
      {"winograd_choice", tp_test_winograd_choice},
      {"blocked_head_split", tp_test_blocked_head_split},
      {"blocked_max_min", tp_test_blocked_max_min},
      {"blocked_mixed_concat", tp_test_blocked_mixed_concat},
      {"blocked_islands", tp_test_blocked_islands},
      {"blocked_half_block", tp_test_blocked_half_block},
      {"blocked_split", tp_test_blocked_split},
      {"blocked_resize", tp_test_blocked_resize},
      {"blocked_channels_last", tp_test_blocked_channels_last},
      {"blocked_channel_consts", tp_test_blocked_channel_consts},
      {"shared_weights", tp_test_shared_weights},
      {"blocked_batchnorm", tp_test_blocked_batchnorm},
      {"loop_invariants", test_loop_invariants},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
