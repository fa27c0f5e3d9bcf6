/* test-passes.c - each load-time graph pass on a graph that contains its
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

static uint64_t rng_state = 12345;

static float frand(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((rng_state >> 40) / 16777216.0 * 2.0 - 1.0);
}

static void add_weight(er_pbw *g, const char *name, int rank, const int64_t *dims, float scale, float offset) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  float *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = frand() * scale + offset;
  er_pbw t = {0};
  tb_tensor(&t, name, 1, rank, dims, v, (size_t)n * sizeof *v);
  tb_graph_initializer(g, &t);
  er__pbw_free(&t);
  free(v);
}

static void add_scalar(er_pbw *g, const char *name, float v) {
  er_pbw t = {0};
  tb_tensor(&t, name, 1, 0, NULL, &v, sizeof v);
  tb_graph_initializer(g, &t);
  er__pbw_free(&t);
}

static er_model *load(const er_pbw *m, int optimize) {
  er_load_options o;
  er_load_options_init(&o);
  o.optimize = optimize;
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m->buf, m->len, NULL, &o, &model), ER_STATUS_OK);
  return model;
}

/* The graph a CPU session runs: model-level rewrites plus the session's
 * own fusions. Counts nodes of op type `op` (NULL: all nodes). */
static int session_count_named(const er_model *m, const char *op, const char *fragment) {
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

static int session_count(const er_model *m, const char *op) { return session_count_named(m, op, NULL); }

static int count_op(const er_model *m, const char *op) { return session_count(m, op); }

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
  for (int64_t i = 0; i < er_tensor_count(x); i++) xv[i] = frand() * 2;
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
  add_weight(&g, "W", 4, w, 0.5f, 0);
  add_weight(&g, "B", 1, c, 0.1f, 0);
  add_weight(&g, "scale", 1, c, 0.2f, 1);
  add_weight(&g, "shift", 1, c, 0.1f, 0);
  add_weight(&g, "mean", 1, c, 0.1f, 0);
  add_weight(&g, "var", 1, c, 0.2f, 1);
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
  er_model *opt = load(&m, 2), *plain = load(&m, -1);
  CHECK(count_op(opt, "BatchNormalization") == 0 && node_count(opt) == 1);
  CHECK(count_op(plain, "BatchNormalization") == 1);
  same_outputs(opt, plain, 4, x);
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&m);
  /* Conv + BN + Relu: one fused node. */
  er_pbw m2 = {0};
  conv_bn_model(&m2, "Relu", false);
  opt = load(&m2, 2);
  plain = load(&m2, -1);
  CHECK(node_count(opt) == 1 && count_op(opt, "FusedConv") == 1);
  same_outputs(opt, plain, 4, x);
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&m2);
  /* Near miss: the conv output is also a graph output. */
  er_pbw m3 = {0};
  conv_bn_model(&m3, NULL, true);
  opt = load(&m3, 2);
  /* (in either layout: the BN may run blocked on the conv's output) */
  CHECK(count_op(opt, "BatchNormalization") + count_op(opt, "BlockedBatchNormalization") == 1 &&
        count_op(opt, "Conv") + count_op(opt, "BlockedConv") == 1);
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    CHECK(node_count(opt) == 1 && count_op(opt, "FusedConv") == 1);
    same_outputs(opt, plain, 4, x);
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&m);
  }
  /* Near miss: an activation we do not fuse (Softplus) stays. */
  er_pbw m = {0};
  conv_bn_model(&m, "Softplus", false);
  er_model *opt = load(&m, 2);
  CHECK(count_op(opt, "Softplus") == 1 && count_op(opt, "Conv") == 1);
  er_model_free(opt);
  er__pbw_free(&m);
}

/* x -> Conv -> c; SiLU: c * Sigmoid(c); and Clip(0, 6) as constant inputs. */
static void test_silu_and_clip(void) {
  const int64_t x[4] = {1, 3, 8, 8}, w[4] = {4, 3, 3, 3};
  for (int variant = 0; variant < 3; variant++) {
    er_pbw g = {0}, m = {0};
    add_weight(&g, "W", 4, w, 0.5f, 0);
    add_scalar(&g, "lo", 0.0f);
    add_scalar(&g, "hi", 6.0f);
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (variant < 2) CHECK(node_count(opt) == 1 && count_op(opt, "FusedConv") == 1);
    else CHECK(count_op(opt, "Sigmoid") == 1 && count_op(opt, "FusedConv") == 0);
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
    add_weight(&g, "W", 4, w, 0.3f, 0);
    add_weight(&g, "Bc", 1, (const int64_t[]){4}, 0.2f, 0.1f);
    tb_attr_ints(&a, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", "Bc", NULL}, (const char *const[]){"c", NULL}, &a);
    if (variant < 4) {
      add_weight(&g, "B", ranks[variant], shapes[variant], 0.5f, -0.2f);
    } else {
      /* B from the input: not a constant */
      tb_node(&g, "ReduceMax", "rm", (const char *const[]){"x", NULL}, (const char *const[]){"B", NULL}, NULL);
    }
    tb_node(&g, "Add", "add", (const char *const[]){"B", "c", NULL}, (const char *const[]){"s", NULL}, NULL);
    tb_node(&g, "Relu", "r", (const char *const[]){"s", NULL}, (const char *const[]){"y", NULL}, NULL);
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (variant < 3) CHECK(node_count(opt) == 1 && count_op(opt, "FusedConv") == 1);
    else CHECK(count_op(opt, "Add") == 1);
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
    add_weight(&g, "W", 4, w, 0.3f, 0);
    add_weight(&g, "Bc", 1, (const int64_t[]){4}, 0.2f, 0.1f);
    add_weight(&g, "B", 3, (const int64_t[]){4, 1, 1}, 0.5f, -0.2f);
    tb_attr_ints(&a, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    if (variant == 1)
      tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", "Bc", NULL}, (const char *const[]){"c", NULL}, &a);
    else
      tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", NULL}, (const char *const[]){"c", NULL}, &a);
    if (variant == 0) add_weight(&g, "S", 3, (const int64_t[]){4, 1, 1}, 0.7f, 0.3f);
    else if (variant == 1) add_weight(&g, "S", 1, (const int64_t[]){1}, 0.7f, 0.3f);
    else if (variant == 2) add_weight(&g, "S", 3, (const int64_t[]){1, 1, 8}, 0.7f, 0.3f);
    else tb_node(&g, "ReduceMax", "rm", (const char *const[]){"x", NULL}, (const char *const[]){"S", NULL}, NULL);
    tb_node(&g, "Mul", "mul", (const char *const[]){"c", "S", NULL}, (const char *const[]){"p", NULL}, NULL);
    tb_node(&g, "Add", "add", (const char *const[]){"p", "B", NULL}, (const char *const[]){"s", NULL}, NULL);
    tb_node(&g, "Relu", "r", (const char *const[]){"s", NULL}, (const char *const[]){"y", NULL}, NULL);
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (variant < 2) CHECK(node_count(opt) == 1 && count_op(opt, "FusedConv") == 1);
    else CHECK(count_op(opt, "Mul") == 1);
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
    add_weight(&g, "W", 4, w, 0.3f, 0);
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (variant == 0 || variant == 2) CHECK(node_count(opt) == 1 && count_op(opt, "FusedConv") == 1);
    else if (variant == 1) CHECK(count_op(opt, "Add") == 1);
    else CHECK(count_op(opt, "Sum") == 1);
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
    add_weight(&g, "W", 2, w, 0.4f, 0);
    add_weight(&g, "b", 1, b, 0.1f, 0);
    add_scalar(&g, "sqrt2", 1.41421356f);
    add_scalar(&g, "one", 1.0f);
    add_scalar(&g, "half", 0.5f);
    add_scalar(&g, "three", 3.0f);
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (variant < 3) {
      CHECK(node_count(opt) == 1 && count_op(opt, "FusedMatMul") == 1);
    } else {
      /* Near miss: divides by 3, not sqrt 2: only the bias fuses. */
      CHECK(count_op(opt, "FusedMatMul") == 1 && count_op(opt, "Erf") == 1);
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
    add_weight(&g, "W", 2, w, 0.4f, 0);
    add_weight(&g, "b", 1, b, 0.1f, 0);
    add_scalar(&g, "c", variant == 2 ? 0.05f : 0.044715f);
    add_scalar(&g, "k", 0.7978845608f);
    add_scalar(&g, "one", 1.0f);
    add_scalar(&g, "half", 0.5f);
    add_scalar(&g, "three", 3.0f);
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (variant < 2) {
      CHECK(node_count(opt) == 1 && count_op(opt, "FusedMatMul") == 1);
    } else if (variant == 2) {
      CHECK(count_op(opt, "FusedMatMul") == 1 && count_op(opt, "Tanh") == 1 && count_op(opt, "Gelu") == 0);
    } else {
      CHECK(count_op(opt, "FusedMatMul") == 1 && count_op(opt, "Gelu") == 1 && count_op(opt, "Tanh") == 0);
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
    add_weight(&g, "gamma", 1, h, 0.2f, 1);
    add_weight(&g, "beta", 1, h, 0.1f, 0);
    add_scalar(&g, "two", 2.0f);
    add_scalar(&g, "eps", 1e-5f);
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (variant == 0) CHECK(node_count(opt) == 1 && count_op(opt, "LayerNormalization") == 1);
    else if (variant == 2) CHECK(node_count(opt) == 2 && count_op(opt, "LayerNormalization") == 1);
    else CHECK(count_op(opt, "LayerNormalization") == 0 && count_op(opt, "ReduceMean") == 2);
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (variant == 0) CHECK(node_count(opt) == 1 && count_op(opt, "Transpose") == 0);
    if (variant == 1) CHECK(count_op(opt, "Transpose") == 1);
    if (variant == 2) CHECK(count_op(opt, "Reshape") == 1);
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

static void add_i64(er_pbw *g, const char *name, int n, const int64_t *v) {
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
  add_weight(&g, "Wq", 2, (const int64_t[]){16, 16}, 0.5f, 0);
  add_weight(&g, "Wk", 2, (const int64_t[]){16, 16}, 0.5f, 0);
  add_weight(&g, "Wv", 2, (const int64_t[]){16, 2 * dv}, 0.5f, 0);
  add_i64(&g, "split", 4, v->split);
  add_i64(&g, "split_v", 4, v->split_v);
  add_i64(&g, "merge", 3, v->merge_shape);
  add_scalar(&g, "c", v->scale_op == 2 ? 1.0f / sqrtf(8.0f) : sqrtf(8.0f));
  add_weight(&g, "c3", 3, (const int64_t[]){2, 1, 1}, 0.2f, 2.8f);
  if (v->mask == 1) add_weight(&g, "M", 2, (const int64_t[]){6, t}, 0.5f, -0.5f);
  if (v->mask == 2) add_weight(&g, "M", 4, (const int64_t[]){2, 1, 6, t}, 0.5f, -0.5f);
  if (v->mask == 3) add_weight(&g, "M", 2, (const int64_t[]){6, 1}, 0.5f, -0.5f);
  tb_attr_ints(&pq, "perm", (const int64_t[]){0, 2, 1, 3}, 4);
  tb_attr_ints(&pk, "perm", (const int64_t[]){0, 2, 3, 1}, 4);
  tb_attr_ints(&pkt, "perm", (const int64_t[]){0, 1, 3, 2}, 4);
  tb_attr_ints(&po, "perm", (const int64_t[]){0, 2, 1, 3}, 4);
  if (v->softmax_axis != 99) tb_attr_int(&sa, "axis", v->softmax_axis);
  const char *kv_in = "x";
  if (v->cross) {
    add_i64(&g, "s0", 1, (const int64_t[]){0});
    add_i64(&g, "s1", 1, (const int64_t[]){4});
    add_i64(&g, "ax", 1, (const int64_t[]){1});
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
  for (int64_t i = 0; i < er_tensor_count(x); i++) xv[i] = frand() * 2;
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    int att = count_op(opt, "Attention"), sm = count_op(opt, "Softmax");
    int tr = count_op(opt, "Transpose"), rs = count_op(opt, "Reshape");
    bool ok;
    if (v->expect == 3) ok = att == 1 && sm == 0 && tr == 0 && rs == 0;
    else if (v->expect == 4) ok = att == 1 && sm == 0 && tr >= 2 && rs >= 3;
    else ok = att == 0 && sm == 1;
    if (!ok)
      fprintf(stderr, "attention variant '%s': %d Attention, %d Softmax, %d Transpose, %d Reshape\n", v->what, att,
              sm, tr, rs);
    CHECK(ok);
    CHECK(count_op(plain, "Attention") == 0);
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
  er_model *model = load(&m, 2);
  CHECK(count_op(model, "FusedConv") == 1);
  er_model_summary s;
  er_model_summary_get(model, &s);
  int fused = 0, relu = 0;
  for (size_t i = 0; i < s.node_count; i++) {
    const char *t, *name;
    er_model_node(model, i, &t, &name);
    fused += strcmp(t, "FusedConv") == 0;
    relu += strcmp(t, "Relu") == 0;
  }
  CHECK(fused == 0 && relu == 1 && s.node_count == 2); /* BatchNorm folded at load */
  er_model_free(model);
  er__pbw_free(&m);
}

/* ---- the channel-blocked layout (passes-blocked.c) ------------------------------ */

/* Ops of type `op` in a session with EDGERUN_LAYOUT = layout. */
static int count_in_layout(const er_model *m, const char *layout, const char *op) {
  setenv("EDGERUN_LAYOUT", layout, 1);
  int n = count_op(m, op);
  unsetenv("EDGERUN_LAYOUT");
  return n;
}

/* Every graph output of a run in each layout, and of the model as
 * written, agree within rtol 1e-4 / atol 1e-5. */
static void same_in_layouts(er_model *opt, er_model *plain, int rank, const int64_t *dims) {
  const char *layouts[2] = {"blocked", "planar"};
  size_t n_out = er_model_output_count(opt);
  er_tensor *x;
  er_tensor_create(ER_DTYPE_FLOAT, rank, dims, &x);
  float *xv = er_tensor_data(x);
  for (int64_t i = 0; i < er_tensor_count(x); i++) xv[i] = frand() * 2;
  er_named_tensor in = {"x", x};
  er_tensor *want[8] = {0}, *got[2][8] = {{0}};
  CHECK(n_out <= 8);
  er_session *sp = NULL;
  CHECK_STATUS(er_session_create(plain, NULL, &sp), ER_STATUS_OK);
  CHECK_STATUS(er_session_run(sp, &in, 1, NULL, n_out, want), ER_STATUS_OK);
  er_session_free(sp);
  for (int l = 0; l < 2; l++) {
    setenv("EDGERUN_LAYOUT", layouts[l], 1);
    er_session *s = NULL;
    CHECK_STATUS(er_session_create(opt, NULL, &s), ER_STATUS_OK);
    unsetenv("EDGERUN_LAYOUT");
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, n_out, got[l]), ER_STATUS_OK);
    er_session_free(s);
    for (size_t k = 0; k < n_out; k++) {
      if (!got[l][k] || !want[k]) continue;
      CHECK(er_tensor_rank(got[l][k]) == er_tensor_rank(want[k]) &&
            er_tensor_count(got[l][k]) == er_tensor_count(want[k]));
      const float *a = er_tensor_cdata(got[l][k]), *b = er_tensor_cdata(want[k]);
      int bad = 0;
      for (int64_t i = 0; i < er_tensor_count(want[k]); i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-5f + 1e-4f * fabsf(b[i]))) bad++;
      if (bad) fprintf(stderr, "  %s layout, output %zu: %d elements differ\n", layouts[l], k, bad);
      CHECK(bad == 0);
    }
  }
  for (size_t k = 0; k < n_out; k++) {
    er_tensor_free(want[k]);
    er_tensor_free(got[0][k]);
    er_tensor_free(got[1][k]);
  }
  er_tensor_free(x);
}

#define IN(...) (const char *const[]){__VA_ARGS__, NULL}
#define OUT(...) (const char *const[]){__VA_ARGS__, NULL}

/* A small MobileNet-style network with every kind of node the layout
 * takes: a dense stem reading the planar input, a depthwise layer with a
 * fused HardSwish, a squeeze-excite block (global pool, two 1x1 convs,
 * Sigmoid, a broadcasting Mul), 24 channels (not whole blocks of 16), a
 * 5x5 layer with a residual (a 3x3 one would stay planar for Winograd), a
 * Div by a constant, max pools, a Concat over channels and a
 * last 1x1 conv; and what must come back planar: the graph output y, the
 * intermediate h1 that is also a graph output, and c2 read by a
 * Transpose. */
static void blocked_net(er_pbw *m) {
  er_pbw g = {0};
  add_weight(&g, "W1", 4, (const int64_t[]){32, 8, 3, 3}, 0.3f, 0);
  add_weight(&g, "B1", 1, (const int64_t[]){32}, 0.1f, 0);
  add_weight(&g, "Wd", 4, (const int64_t[]){32, 1, 3, 3}, 0.5f, 0);
  add_weight(&g, "Ws1", 4, (const int64_t[]){8, 32, 1, 1}, 0.3f, 0);
  add_weight(&g, "Ws2", 4, (const int64_t[]){32, 8, 1, 1}, 0.3f, 0);
  add_weight(&g, "W2", 4, (const int64_t[]){24, 32, 1, 1}, 0.3f, 0);
  add_weight(&g, "B2", 1, (const int64_t[]){24}, 0.1f, 0);
  add_weight(&g, "W3", 4, (const int64_t[]){24, 24, 5, 5}, 0.1f, 0);
  add_weight(&g, "Wb", 4, (const int64_t[]){32, 32, 1, 1}, 0.3f, 0);
  add_weight(&g, "Wy", 4, (const int64_t[]){16, 56, 1, 1}, 0.2f, 0);
  add_scalar(&g, "six", 6.0f);
  er_pbw p1 = {0}, p2 = {0}, gr = {0}, pool = {0}, cat = {0}, perm = {0};
  tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_ints(&gr, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_attr_int(&gr, "group", 32);
  tb_attr_ints(&pool, "kernel_shape", (const int64_t[]){2, 2}, 2);
  tb_attr_ints(&pool, "strides", (const int64_t[]){2, 2}, 2);
  tb_attr_int(&cat, "axis", 1);
  tb_attr_ints(&perm, "perm", (const int64_t[]){0, 2, 3, 1}, 4);
  tb_node(&g, "Conv", "c1", IN("x", "W1", "B1"), OUT("c1"), &p1);
  tb_node(&g, "Relu", "r1", IN("c1"), OUT("r1"), NULL);
  tb_node(&g, "Conv", "d1", IN("r1", "Wd"), OUT("d1"), &gr);
  tb_node(&g, "HardSwish", "h1", IN("d1"), OUT("h1"), NULL);
  tb_node(&g, "GlobalAveragePool", "gap", IN("h1"), OUT("p"), NULL);
  tb_node(&g, "Conv", "s1", IN("p", "Ws1"), OUT("s1"), NULL);
  tb_node(&g, "Relu", "s1r", IN("s1"), OUT("s1r"), NULL);
  tb_node(&g, "Conv", "s2", IN("s1r", "Ws2"), OUT("s2"), NULL);
  tb_node(&g, "Sigmoid", "sg", IN("s2"), OUT("sg"), NULL);
  tb_node(&g, "Mul", "se", IN("h1", "sg"), OUT("se"), NULL);
  tb_node(&g, "Conv", "c2", IN("se", "W2", "B2"), OUT("c2"), NULL);
  tb_node(&g, "Conv", "c3", IN("c2", "W3"), OUT("c3"), &p2);
  tb_node(&g, "Add", "res", IN("c3", "c2"), OUT("a"), NULL);
  tb_node(&g, "Div", "div", IN("a", "six"), OUT("q"), NULL);
  tb_node(&g, "MaxPool", "mp", IN("q"), OUT("mp"), &pool);
  tb_node(&g, "Conv", "br", IN("se", "Wb"), OUT("br"), NULL);
  tb_node(&g, "MaxPool", "bp", IN("br"), OUT("bp"), &pool);
  tb_node(&g, "Concat", "cat", IN("bp", "mp"), OUT("cat"), &cat);
  tb_node(&g, "Conv", "cy", IN("cat", "Wy"), OUT("y"), NULL);
  tb_node(&g, "Transpose", "t", IN("c2"), OUT("t"), &perm);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 14, 14});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_graph_output(&g, "h1", 1, -1, NULL);
  tb_graph_output(&g, "t", 1, -1, NULL);
  tb_model(m, 8, 14, &g);
  er__pbw_free(&g);
  er__pbw_free(&p1);
  er__pbw_free(&p2);
  er__pbw_free(&gr);
  er__pbw_free(&pool);
  er__pbw_free(&cat);
  er__pbw_free(&perm);
}

static void test_blocked_layout(void) {
  if (er__cpu_layout_block() == 0) {
    printf("  (this CPU has no blocked kernels: the layout stays planar)\n");
    return;
  }
  er_pbw m = {0};
  blocked_net(&m);
  er_model *opt = load(&m, 2), *plain = load(&m, -1);
  /* Eight convolutions and three pools blocked; y, h1 and c2 come back
   * planar once each; nothing is converted in. */
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 8);
  CHECK(count_in_layout(opt, "blocked", "BlockedPool") == 3);
  CHECK(count_in_layout(opt, "blocked", "FromBlocked") == 3);
  CHECK(count_in_layout(opt, "blocked", "ToBlocked") == 0);
  CHECK(count_in_layout(opt, "planar", "BlockedConv") == 0);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 14, 14});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&m);
}

/* Near misses: an Add of a per-channel tensor made at run time (a
 * ReduceMean, which stays planar; a constant one would be folded into
 * the bias at load), a Div by a tensor and a Concat whose first input is
 * not whole blocks (20 channels) take planar inputs; the convolutions
 * around them stay blocked and the results agree. */
static void test_blocked_near_misses(void) {
  if (er__cpu_layout_block() == 0) return;
  er_pbw g = {0}, m = {0}, p2 = {0}, cat = {0}, rm = {0};
  add_weight(&g, "W1", 4, (const int64_t[]){32, 16, 5, 5}, 0.1f, 0);
  add_weight(&g, "W2", 4, (const int64_t[]){20, 32, 5, 5}, 0.1f, 0);
  add_weight(&g, "W3", 4, (const int64_t[]){16, 32, 5, 5}, 0.1f, 0);
  add_weight(&g, "D", 4, (const int64_t[]){1, 16, 1, 1}, 0.2f, 2);
  tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_int(&cat, "axis", 1);
  tb_attr_ints(&rm, "axes", (const int64_t[]){2, 3}, 2);
  tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p2);
  tb_node(&g, "ReduceMean", "rm", IN("c1"), OUT("r"), &rm);
  tb_node(&g, "Add", "k", IN("c1", "r"), OUT("k"), NULL);
  tb_node(&g, "Conv", "c2", IN("k", "W2"), OUT("c2"), &p2);
  tb_node(&g, "Conv", "c3", IN("k", "W3"), OUT("c3"), &p2);
  tb_node(&g, "Div", "dv", IN("c3", "D"), OUT("dv"), NULL);
  tb_node(&g, "Concat", "cat", IN("c2", "dv"), OUT("y"), &cat);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 12, 12});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = load(&m, 2), *plain = load(&m, -1);
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 3);
  CHECK(count_in_layout(opt, "blocked", "Add") == 1 && count_in_layout(opt, "blocked", "Div") == 1);
  /* c1 once for the ReduceMean and the Add, c2 for the Concat, c3 for
   * the Div. */
  CHECK(count_in_layout(opt, "blocked", "FromBlocked") == 3);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 12, 12});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p2);
  er__pbw_free(&cat);
  er__pbw_free(&rm);
}

/* DenseNet's pre-activation: Conv -> Concat -> BatchNormalization ->
 * Relu -> Conv. The BN of the blocked Concat stays blocked (one
 * BlockedBatchNormalization carrying the ReLU, no conversion); the near
 * miss, whose scale
 * is a graph input, is a planar BatchNormalization between a FromBlocked
 * and a ToBlocked. The results agree with the graph as written. */
static void test_blocked_batchnorm(void) {
  if (er__cpu_layout_block() == 0) return;
  for (int near = 0; near < 2; near++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, cat = {0};
    add_weight(&g, "W1", 4, (const int64_t[]){16, 8, 3, 3}, 0.2f, 0);
    add_weight(&g, "W2", 4, (const int64_t[]){12, 24, 1, 1}, 0.2f, 0);
    if (!near) add_weight(&g, "scale", 1, (const int64_t[]){24}, 0.5f, 1.0f);
    add_weight(&g, "bias", 1, (const int64_t[]){24}, 0.3f, 0);
    add_weight(&g, "mean", 1, (const int64_t[]){24}, 0.3f, 0);
    add_weight(&g, "var", 1, (const int64_t[]){24}, 0.2f, 1.0f);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_int(&cat, "axis", 1);
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p1);
    tb_node(&g, "Concat", "cat", IN("c1", "x"), OUT("cat"), &cat);
    tb_node(&g, "BatchNormalization", "bn", IN("cat", "scale", "bias", "mean", "var"), OUT("bn"), NULL);
    tb_node(&g, "Relu", "r", IN("bn"), OUT("r"), NULL);
    tb_node(&g, "Conv", "c2", IN("r", "W2"), OUT("y"), NULL);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 9, 11});
    if (near) tb_graph_input(&g, "scale", 1, 1, (const int64_t[]){24});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 15, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (opt && plain) {
      CHECK(count_in_layout(opt, "blocked", "BlockedBatchNormalization") == (near ? 0 : 1));
      CHECK(count_in_layout(opt, "blocked", "BatchNormalization") == (near ? 1 : 0));
      /* The ReLU goes into the blocked BN. */
      CHECK(count_in_layout(opt, "blocked", "Relu") == (near ? 1 : 0));
      /* One conversion back: the output y, or for the near miss the
       * BN's input (c2 then stays planar, a lone layer not worth two
       * conversions). */
      CHECK(count_in_layout(opt, "blocked", "FromBlocked") == 1);
      if (!near) same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 9, 11});
    }
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&cat);
  }
}

/* Convolutions in groups of whole blocks (ShuffleNet's grouped 1x1
 * layers) go blocked after a dense one, with a blocked input, and so does
 * one in narrow groups (two channels in, two out: whole groups in every
 * block); a near miss whose groups take two channels and make one stays
 * planar, and the results agree. */
static void test_blocked_groups(void) {
  if (er__cpu_layout_block() == 0) return;
  er_pbw g = {0}, m = {0}, p1 = {0}, g4 = {0}, g2 = {0}, g16 = {0};
  add_weight(&g, "W1", 4, (const int64_t[]){64, 16, 3, 3}, 0.1f, 0);
  add_weight(&g, "G1", 4, (const int64_t[]){64, 16, 1, 1}, 0.2f, 0);
  add_weight(&g, "G2", 4, (const int64_t[]){32, 32, 3, 3}, 0.1f, 0);
  add_weight(&g, "G3", 4, (const int64_t[]){32, 2, 1, 1}, 0.5f, 0);
  add_weight(&g, "G4", 4, (const int64_t[]){16, 2, 1, 1}, 0.5f, 0);
  tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_attr_int(&g4, "group", 4);
  tb_attr_int(&g2, "group", 2);
  tb_attr_ints(&g2, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_attr_int(&g16, "group", 16);
  tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p1);
  tb_node(&g, "Conv", "g1", IN("c1", "G1"), OUT("g1"), &g4);
  tb_node(&g, "Relu", "r", IN("g1"), OUT("r"), NULL);
  tb_node(&g, "Conv", "g2", IN("r", "G2"), OUT("g2"), &g2);
  tb_node(&g, "Conv", "g3", IN("g2", "G3"), OUT("g3"), &g16);
  tb_node(&g, "Conv", "g4", IN("g3", "G4"), OUT("y"), &g16);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 9, 11});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = load(&m, 2), *plain = load(&m, -1);
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 4);
  CHECK(count_in_layout(opt, "blocked", "ToBlocked") == 0 && count_in_layout(opt, "blocked", "FromBlocked") == 1);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 9, 11});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p1);
  er__pbw_free(&g4);
  er__pbw_free(&g2);
  er__pbw_free(&g16);
}

/* Blocked convolutions among c x c channels on an h x w map (-2 and -3
 * for sizes known only at run time): a 3x3 layer between two 1x1 layers. */
static int blocked_convs_of_chain(int64_t c, int64_t h, int64_t w) {
  er_pbw g = {0}, m = {0}, p1 = {0};
  add_weight(&g, "A", 4, (const int64_t[]){c, c, 1, 1}, 0.2f, 0);
  add_weight(&g, "W", 4, (const int64_t[]){c, c, 3, 3}, 0.1f, 0);
  add_weight(&g, "B", 4, (const int64_t[]){c, c, 1, 1}, 0.2f, 0);
  tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_node(&g, "Conv", "a", IN("x", "A"), OUT("a"), NULL);
  tb_node(&g, "Relu", "r", IN("a"), OUT("r"), NULL);
  tb_node(&g, "Conv", "w", IN("r", "W"), OUT("w"), &p1);
  tb_node(&g, "Conv", "b", IN("w", "B"), OUT("y"), NULL);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, c, h, w});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = load(&m, 2);
  int n = count_in_layout(opt, "blocked", "BlockedConv");
  if (h > 0 && h * w <= 56 * 56) {
    er_model *plain = load(&m, -1);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, c, h, w});
    er_model_free(plain);
  }
  er_model_free(opt);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p1);
  return n;
}

/* With AVX-512, 3x3 layers with C * M / (C + M) from 12 to 32 go to
 * planar Winograd on maps of 56 x 56 and more: all of them where AVX-512
 * runs as two 256-bit halves (Zen 4), those whose channel counts are not
 * both multiples of 32 elsewhere. On smaller maps, on sizes known only at
 * run time and without AVX-512 they stay blocked. 64 channels (32) take
 * Winograd from 14 x 14 on every CPU with a Winograd kernel. */
static void test_winograd_choice(void) {
  if (er__cpu_layout_block() == 0) return;
  const er_cpu_features *f = er__cpu_features();
  const bool avx512 = er__cpu_layout_block() == 16;
  CHECK(blocked_convs_of_chain(24, 56, 56) == (avx512 ? 0 : 3));
  CHECK(blocked_convs_of_chain(32, 56, 56) == (f->avx512_split ? 0 : 3));
  CHECK(blocked_convs_of_chain(24, 28, 28) == 3);
  CHECK(blocked_convs_of_chain(32, 28, 28) == 3);
  CHECK(blocked_convs_of_chain(24, -2, -3) == 3);
  if (f->avx2) CHECK(blocked_convs_of_chain(64, 28, 28) == 0);
}

/* Max and Min of two stay blocked: with a one-value constant (openWakeWord
 * clamps every LeakyRelu with Max(x, -0.4)) or of two blocked values, over
 * 24 channels (padding lanes the constant makes non-zero, which the
 * convolutions after ignore). Near misses stay planar: a Max of three
 * inputs and one with a per-channel constant. */
static void test_blocked_max_min(void) {
  if (er__cpu_layout_block() == 0) return;
  er_pbw g = {0}, m = {0}, p1 = {0}, p2 = {0}, lr = {0};
  add_weight(&g, "W1", 4, (const int64_t[]){24, 8, 5, 5}, 0.2f, 0);
  add_weight(&g, "W2", 4, (const int64_t[]){24, 24, 5, 5}, 0.1f, 0);
  add_weight(&g, "W3", 4, (const int64_t[]){24, 24, 1, 1}, 0.3f, 0);
  add_weight(&g, "P", 4, (const int64_t[]){1, 24, 1, 1}, 0.2f, 0);
  add_scalar(&g, "neg", -0.4f);
  add_scalar(&g, "half", 0.5f);
  tb_attr_ints(&p1, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_float(&lr, "alpha", 0.2f);
  tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p1);
  tb_node(&g, "LeakyRelu", "l1", IN("c1"), OUT("l1"), &lr);
  tb_node(&g, "Max", "m1", IN("l1", "neg"), OUT("m1"), NULL);
  tb_node(&g, "Conv", "c2", IN("m1", "W2"), OUT("c2"), &p2);
  tb_node(&g, "Min", "n1", IN("c2", "half"), OUT("n1"), NULL);
  tb_node(&g, "Conv", "c3", IN("n1", "W3"), OUT("c3"), NULL);
  tb_node(&g, "Max", "mx", IN("c3", "n1"), OUT("y"), NULL);
  tb_node(&g, "Max", "m3", IN("c3", "n1", "m1"), OUT("y2"), NULL);
  tb_node(&g, "Max", "mp", IN("c3", "P"), OUT("y3"), NULL);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 12, 12});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_graph_output(&g, "y2", 1, -1, NULL);
  tb_graph_output(&g, "y3", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = load(&m, 2), *plain = load(&m, -1);
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 3);
  /* Back to planar: y (the blocked Max) and, for the near misses, m1, n1
   * and c3. */
  CHECK(count_in_layout(opt, "blocked", "FromBlocked") == 4);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 12, 12});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p1);
  er__pbw_free(&p2);
  er__pbw_free(&lr);
}

/* A channel Concat of a blocked input and a planar one (a Softplus,
 * which stays planar) stays blocked: the planar input is converted in,
 * and the 1x1 layer after it reads the blocked result. */
static void test_blocked_mixed_concat(void) {
  if (er__cpu_layout_block() == 0) return;
  er_pbw g = {0}, m = {0}, p2 = {0}, cat = {0};
  add_weight(&g, "W1", 4, (const int64_t[]){32, 16, 5, 5}, 0.1f, 0);
  add_weight(&g, "W2", 4, (const int64_t[]){24, 48, 1, 1}, 0.2f, 0);
  tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_int(&cat, "axis", 1);
  tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p2);
  tb_node(&g, "Softplus", "sp", IN("x"), OUT("s"), NULL);
  tb_node(&g, "Concat", "cat", IN("c1", "s"), OUT("cat"), &cat);
  tb_node(&g, "Conv", "c2", IN("cat", "W2"), OUT("y"), NULL);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 10, 10});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = load(&m, 2), *plain = load(&m, -1);
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 2);
  CHECK(count_in_layout(opt, "blocked", "ToBlocked") == 1 && count_in_layout(opt, "blocked", "FromBlocked") == 1);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 10, 10});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p2);
  er__pbw_free(&cat);
}

/* YOLOv8's C2f block: a 1x1 layer, a channel Split in halves, a
 * bottleneck (3x3 layer and residual Add) on the second half, a Concat of
 * both halves and the bottleneck, a last 1x1 layer. With the sizes as a
 * constant input (opset 13), an attribute (opset 11) or equal parts
 * (opset 18's num_outputs), the Split runs on the blocked twin and nothing
 * is converted but the output. Near misses stay planar and agree: parts of
 * 2 and 30 channels (not whole blocks), and a Split along the height. */
static void test_blocked_split(void) {
  if (er__cpu_layout_block() == 0) return;
  static const struct {
    int opset;
    int form;          /* 0 input, 1 attribute, 2 num_outputs */
    int64_t first;     /* channels of the first part */
    int64_t axis;
    bool blocked;
  } cases[] = {{13, 0, 16, 1, true},  {11, 1, 16, -3, true}, {18, 2, 16, 1, true},
               {13, 0, 2, 1, false},  {13, 0, 6, 2, false}};
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, cat = {0}, sp = {0}, sizes = {0};
    bool height = cases[i].axis == 2;
    int64_t half = height ? 32 : 32 - cases[i].first;   /* channels of the second part */
    int64_t split[2] = {cases[i].first, height ? 6 : half};
    add_weight(&g, "W1", 4, (const int64_t[]){32, 16, 1, 1}, 0.3f, 0);
    add_weight(&g, "Wm", 4, (const int64_t[]){half, half, 3, 3}, 0.1f, 0);
    add_weight(&g, "Wy", 4, (const int64_t[]){16, height ? 96 : 32 + half, 1, 1}, 0.2f, 0);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_int(&cat, "axis", 1);
    tb_attr_int(&sp, "axis", cases[i].axis);
    if (cases[i].form == 0) {
      tb_tensor(&sizes, "S", 7, 1, (const int64_t[]){2}, split, sizeof split);
      tb_graph_initializer(&g, &sizes);
    } else if (cases[i].form == 1) {
      tb_attr_ints(&sp, "split", split, 2);
    } else {
      tb_attr_int(&sp, "num_outputs", 2);
    }
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), NULL);
    tb_node(&g, "Sigmoid", "s1", IN("c1"), OUT("s1"), NULL);
    if (cases[i].form == 0) tb_node(&g, "Split", "split", IN("s1", "S"), OUT("a", "b"), &sp);
    else tb_node(&g, "Split", "split", IN("s1"), OUT("a", "b"), &sp);
    if (height) {
      /* rows 6..11 of all 32 channels; the bottleneck reads both parts */
      tb_node(&g, "Conv", "m1", IN("s1", "Wm"), OUT("m1"), &p1);
      tb_node(&g, "Add", "res", IN("m1", "s1"), OUT("r"), NULL);
      er_pbw cat2 = {0};
      tb_attr_int(&cat2, "axis", 2);
      tb_node(&g, "Concat", "rows", IN("a", "b"), OUT("ab"), &cat2);
      tb_node(&g, "Concat", "cat", IN("ab", "r", "s1"), OUT("cat"), &cat);
      er__pbw_free(&cat2);
    } else {
      tb_node(&g, "Conv", "m1", IN("b", "Wm"), OUT("m1"), &p1);
      tb_node(&g, "Add", "res", IN("m1", "b"), OUT("r"), NULL);
      tb_node(&g, "Concat", "cat", IN("a", "b", "r"), OUT("cat"), &cat);
    }
    tb_node(&g, "Conv", "cy", IN("cat", "Wy"), OUT("y"), NULL);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 12, 12});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, cases[i].opset, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    /* All blocked: three blocked convolutions, no conversion in, one out
     * (y). A near miss cannot look like that. */
    int to = count_in_layout(opt, "blocked", "ToBlocked"), from = count_in_layout(opt, "blocked", "FromBlocked");
    int convs = count_in_layout(opt, "blocked", "BlockedConv");
    bool all_blocked = convs == 3 && to == 0 && from == 1;
    CHECK(all_blocked == cases[i].blocked);
    if (all_blocked != cases[i].blocked)
      fprintf(stderr, "  case %zu: %d BlockedConv, %d ToBlocked, %d FromBlocked\n", i, convs, to, from);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 12, 12});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&cat);
    er__pbw_free(&sp);
    er__pbw_free(&sizes);
  }
}

/* An FPN upsample: Conv (24 channels, not whole blocks on AVX-512),
 * Sigmoid, nearest Resize, 3x3 Conv. The Resize runs on the blocked twin
 * (BlockedResize) with scales (opset 13), sizes and an empty roi with
 * asymmetric/floor (opset 11), and Resize 10's scales; nothing is
 * converted but y. Near misses stay planar and agree: linear mode, and
 * a Resize that also doubles the channels. */
static void test_blocked_resize(void) {
  if (er__cpu_layout_block() == 0) return;
  static const struct {
    int opset;
    int form;          /* 0 scales, 1 roi + sizes, 2 Resize-10 scales */
    const char *mode;
    float channel_scale;
    bool blocked;
  } cases[] = {{13, 0, "nearest", 1, true}, {11, 1, "nearest", 1, true}, {10, 2, "nearest", 1, true},
               {13, 0, "linear", 1, false}, {13, 0, "nearest", 2, false}};
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, rs = {0}, t = {0};
    int64_t up = (int64_t)(24 * cases[i].channel_scale);
    add_weight(&g, "W1", 4, (const int64_t[]){24, 16, 1, 1}, 0.3f, 0);
    add_weight(&g, "W2", 4, (const int64_t[]){16, up, 3, 3}, 0.1f, 0);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_string(&rs, "mode", cases[i].mode);
    if (cases[i].form == 1) {
      tb_attr_string(&rs, "coordinate_transformation_mode", "asymmetric");
      tb_attr_string(&rs, "nearest_mode", "floor");
      const int64_t sizes[4] = {1, up, 12, 12};
      tb_tensor(&t, "Z", 7, 1, (const int64_t[]){4}, sizes, sizeof sizes);
      tb_graph_initializer(&g, &t);
      er__pbw_free(&t);
      tb_tensor(&t, "R", 1, 1, (const int64_t[]){0}, NULL, 0);
      tb_graph_initializer(&g, &t);
    } else {
      const float scales[4] = {1, cases[i].channel_scale, 2, 2};
      tb_tensor(&t, "S", 1, 1, (const int64_t[]){4}, scales, sizeof scales);
      tb_graph_initializer(&g, &t);
    }
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), NULL);
    tb_node(&g, "Sigmoid", "s1", IN("c1"), OUT("s1"), NULL);
    if (cases[i].form == 0) tb_node(&g, "Resize", "up", IN("s1", "", "S"), OUT("u"), &rs);
    else if (cases[i].form == 1) tb_node(&g, "Resize", "up", IN("s1", "R", "", "Z"), OUT("u"), &rs);
    else tb_node(&g, "Resize", "up", IN("s1", "S"), OUT("u"), &rs);
    tb_node(&g, "Conv", "c2", IN("u", "W2"), OUT("y"), &p1);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 6, 6});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, cases[i].opset, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    int to = count_in_layout(opt, "blocked", "ToBlocked"), from = count_in_layout(opt, "blocked", "FromBlocked");
    int resized = count_in_layout(opt, "blocked", "BlockedResize");
    bool all_blocked = resized == 1 && to == 0 && from == 1;
    CHECK(all_blocked == cases[i].blocked);
    if (all_blocked != cases[i].blocked)
      fprintf(stderr, "  case %zu: %d BlockedResize, %d ToBlocked, %d FromBlocked\n", i, resized, to, from);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 6, 6});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&rs);
    er__pbw_free(&t);
  }
}

/* A ConvNeXt block: a stem convolution, a 7x7 depthwise one, a Transpose
 * to channels-last rows (Softplus stands in for LayerNorm and the MLP),
 * a Transpose back and the residual Add, then a 3x3 convolution. Both
 * Transposes become conversions (FromBlocked and ToBlocked with
 * channels_last) and the Add runs blocked. Near miss: when only a planar
 * op reads the Transpose back, it stays a Transpose (a ToBlocked there
 * would need a FromBlocked after it). */
static void test_blocked_channels_last(void) {
  if (er__cpu_layout_block() == 0) return;
  for (int near = 0; near < 2; near++) {
    er_pbw g = {0}, m = {0}, dw = {0}, p1 = {0}, to = {0}, back = {0};
    add_weight(&g, "W0", 4, (const int64_t[]){24, 8, 1, 1}, 0.3f, 0);
    add_weight(&g, "Wd", 4, (const int64_t[]){24, 1, 7, 7}, 0.1f, 0);
    add_weight(&g, "W2", 4, (const int64_t[]){16, 24, 3, 3}, 0.1f, 0);
    tb_attr_ints(&dw, "pads", (const int64_t[]){3, 3, 3, 3}, 4);
    tb_attr_int(&dw, "group", 24);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_ints(&to, "perm", (const int64_t[]){0, 2, 3, 1}, 4);
    tb_attr_ints(&back, "perm", (const int64_t[]){0, 3, 1, 2}, 4);
    tb_node(&g, "Conv", "stem", IN("x", "W0"), OUT("r"), NULL);
    tb_node(&g, "Conv", "dw", IN("r", "Wd"), OUT("d"), &dw);
    tb_node(&g, "Transpose", "to_nhwc", IN("d"), OUT("t"), &to);
    tb_node(&g, "Softplus", "mlp", IN("t"), OUT("s"), NULL);
    tb_node(&g, "Transpose", "to_nchw", IN("s"), OUT("b"), &back);
    if (near) {
      tb_node(&g, "Softplus", "post", IN("b"), OUT("y"), NULL);
    } else {
      tb_node(&g, "Add", "res", IN("r", "b"), OUT("a"), NULL);
      tb_node(&g, "Conv", "c2", IN("a", "W2"), OUT("y"), &p1);
    }
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 9, 11});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    int transposes = count_in_layout(opt, "blocked", "Transpose"), to_b = count_in_layout(opt, "blocked", "ToBlocked");
    int from_b = count_in_layout(opt, "blocked", "FromBlocked");
    CHECK(transposes == near && to_b == 1 - near && from_b == (near ? 1 : 2));
    if (transposes != near || to_b != 1 - near || from_b != (near ? 1 : 2))
      fprintf(stderr, "  near %d: %d Transpose, %d ToBlocked, %d FromBlocked\n", near, transposes, to_b, from_b);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 9, 11});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&dw);
    er__pbw_free(&p1);
    er__pbw_free(&to);
    er__pbw_free(&back);
  }
}

/* Nodes of the session's graph whose name holds `fragment`, with the
 * layout `layout`. */
static int count_named(const er_model *m, const char *layout, const char *fragment) {
  setenv("EDGERUN_LAYOUT", layout, 1);
  int n = session_count_named(m, NULL, fragment);
  unsetenv("EDGERUN_LAYOUT");
  return n;
}

/* A YOLO head: a blocked convolution's 30 channels split into 3 anchors of
 * 10 by Reshape, then Transpose (0, 1, 3, 4, 2) puts each anchor's values
 * last. It becomes FromBlocked to channels-last, a Reshape and a row
 * Transpose (0, 3, 1, 2, 4). Near misses keep the planar form and the
 * Transpose as written: another permutation, and the Reshape's result
 * read a second time. */
static void test_blocked_head_split(void) {
  if (er__cpu_layout_block() == 0) return;
  for (int near = 0; near < 3; near++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, tp = {0};
    add_weight(&g, "W1", 4, (const int64_t[]){16, 8, 3, 3}, 0.1f, 0);
    add_weight(&g, "W2", 4, (const int64_t[]){30, 16, 1, 1}, 0.2f, 0);
    add_i64(&g, "shape", 5, (const int64_t[]){1, 3, 10, 6, 7});
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_ints(&tp, "perm", near == 1 ? (const int64_t[]){0, 1, 2, 4, 3} : (const int64_t[]){0, 1, 3, 4, 2}, 5);
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("a"), &p1);
    tb_node(&g, "Relu", "r1", IN("a"), OUT("b"), NULL);
    tb_node(&g, "Conv", "c2", IN("b", "W2"), OUT("c"), NULL);
    tb_node(&g, "Reshape", "split", IN("c", "shape"), OUT("s"), NULL);
    if (near == 2) tb_node(&g, "Sigmoid", "other", IN("s"), OUT("z"), NULL);
    tb_node(&g, "Transpose", "t", IN("s"), OUT("y"), &tp);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 6, 7});
    tb_graph_output(&g, "y", 1, -1, NULL);
    if (near == 2) tb_graph_output(&g, "z", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    int nhwc = count_named(opt, "blocked", "er_to_nhwc"), convs = count_in_layout(opt, "blocked", "BlockedConv");
    CHECK(convs == 2);
    CHECK(nhwc == (near ? 0 : 1));
    if (nhwc != (near ? 0 : 1)) fprintf(stderr, "  near %d: %d channels-last conversions\n", near, nhwc);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 6, 7});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&tp);
  }
}

/* Per-channel constants: a convolution, PRelu with [C,1,1] slopes (face
 * models' activation), Mul by [1,C,1,1] and Add of [C,1,1] (an unfolded
 * BatchNorm), a convolution: all blocked over 24 channels (not whole
 * blocks on AVX-512), the constants made blocked. Near miss: Div by a
 * per-channel constant stays planar (its padding lanes would divide by
 * zero), and the ops after it with it (the last convolution then is an
 * island of the conversion rule, planar too). */
static void test_blocked_channel_consts(void) {
  if (er__cpu_layout_block() == 0) return;
  for (int near = 0; near < 2; near++) {
    er_pbw g = {0}, m = {0}, p1 = {0};
    add_weight(&g, "W1", 4, (const int64_t[]){24, 8, 3, 3}, 0.3f, 0);
    add_weight(&g, "W2", 4, (const int64_t[]){16, 24, 3, 3}, 0.1f, 0);
    add_weight(&g, "slope", 3, (const int64_t[]){24, 1, 1}, 0.3f, 0);
    add_weight(&g, "k", 4, (const int64_t[]){1, 24, 1, 1}, 0.5f, 1);
    add_weight(&g, "b", 3, (const int64_t[]){24, 1, 1}, 0.2f, 0);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p1);
    tb_node(&g, "PRelu", "pr", IN("c1", "slope"), OUT("pr"), NULL);
    tb_node(&g, near ? "Div" : "Mul", "scale", IN("pr", "k"), OUT("sc"), NULL);
    tb_node(&g, "Add", "shift", IN("b", "sc"), OUT("sh"), NULL);
    tb_node(&g, "Conv", "c2", IN("sh", "W2"), OUT("y"), &p1);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 7, 9});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    int convs = count_in_layout(opt, "blocked", "BlockedConv"), to = count_in_layout(opt, "blocked", "ToBlocked");
    int from = count_in_layout(opt, "blocked", "FromBlocked");
    CHECK(convs == 2 - near && to == 0 && from == 1);
    if (convs != 2 - near || to != 0 || from != 1)
      fprintf(stderr, "  near %d: %d BlockedConv, %d ToBlocked, %d FromBlocked\n", near, convs, to, from);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 7, 9});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
  }
}

/* Two 3x3 convolutions with one weight tensor (a detection head's tower
 * at two pyramid levels) and a third with other weights of that shape:
 * the Winograd kernels share the first two's transformed weights and must
 * not hand them to the third. Outputs agree with the reference kernels in
 * both layouts, with a second session of the model alive at once. */
static void test_shared_weights(void) {
  er_pbw g = {0}, m = {0}, p1 = {0};
  add_weight(&g, "W", 4, (const int64_t[]){64, 64, 3, 3}, 0.05f, 0);
  add_weight(&g, "W2", 4, (const int64_t[]){64, 64, 3, 3}, 0.05f, 0);
  tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_node(&g, "Conv", "c1", IN("x", "W"), OUT("c1"), &p1);
  tb_node(&g, "Relu", "r1", IN("c1"), OUT("r1"), NULL);
  tb_node(&g, "Conv", "c2", IN("r1", "W"), OUT("c2"), &p1);
  tb_node(&g, "Conv", "c3", IN("x", "W2"), OUT("c3"), &p1);
  tb_node(&g, "Add", "sum", IN("c2", "c3"), OUT("y"), NULL);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 64, 16, 16});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *model = load(&m, 2);
  er_tensor *x;
  er_tensor_create(ER_DTYPE_FLOAT, 4, (const int64_t[]){1, 64, 16, 16}, &x);
  float *xv = er_tensor_data(x);
  for (int64_t i = 0; i < er_tensor_count(x); i++) xv[i] = frand() * 2;
  er_named_tensor in = {"x", x};
  er_session_options ro;
  er_session_options_init(&ro);
  ro.force_reference = true;
  er_session *sr = NULL, *other = NULL;
  er_tensor *want = NULL;
  CHECK_STATUS(er_session_create(model, &ro, &sr), ER_STATUS_OK);
  CHECK_STATUS(er_session_run(sr, &in, 1, NULL, 1, &want), ER_STATUS_OK);
  er_session_free(sr);
  CHECK_STATUS(er_session_create(model, NULL, &other), ER_STATUS_OK);
  const char *layouts[2] = {"blocked", "planar"};
  for (int l = 0; l < 2; l++) {
    setenv("EDGERUN_LAYOUT", layouts[l], 1);
    er_session *s = NULL;
    er_tensor *got = NULL;
    CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
    unsetenv("EDGERUN_LAYOUT");
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &got), ER_STATUS_OK);
    er_session_free(s);
    const float *a = er_tensor_cdata(got), *b = er_tensor_cdata(want);
    int bad = 0;
    for (int64_t i = 0; i < er_tensor_count(want); i++)
      if (!(fabsf(a[i] - b[i]) <= 1e-4f + 1e-4f * fabsf(b[i]))) bad++;
    if (bad) fprintf(stderr, "  %s layout: %d elements differ from the reference\n", layouts[l], bad);
    CHECK(bad == 0);
    er_tensor_free(got);
  }
  er_session_free(other);
  er_tensor_free(want);
  er_tensor_free(x);
  er_model_free(model);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p1);
}

/* MNIST's layers: a 5x5 convolution of one input channel to half a block
 * of outputs stays planar (the direct kernel; blocked, half of every
 * output vector would be empty lanes); the next two layers are blocked,
 * the first reading it planar in place. The near miss, a whole block of
 * outputs, is blocked too. */
static void test_blocked_half_block(void) {
  int64_t b = er__cpu_layout_block();
  if (b == 0) return;
  for (int near = 0; near < 2; near++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, p2 = {0};
    int64_t m1 = near ? b : b / 2;
    add_weight(&g, "W1", 4, (const int64_t[]){m1, 1, 5, 5}, 0.3f, 0);
    add_weight(&g, "W2", 4, (const int64_t[]){2 * b, m1, 5, 5}, 0.1f, 0);
    add_weight(&g, "W3", 4, (const int64_t[]){2 * b, 2 * b, 3, 3}, 0.1f, 0);
    tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p2);
    tb_node(&g, "Relu", "r1", IN("c1"), OUT("r1"), NULL);
    tb_node(&g, "Conv", "c2", IN("r1", "W2"), OUT("c2"), &p2);
    tb_node(&g, "Relu", "r2", IN("c2"), OUT("r2"), NULL);
    tb_node(&g, "Conv", "c3", IN("r2", "W3"), OUT("y"), &p1);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 1, 28, 28});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    /* The planar choice goes with the direct kernel, which takes output
     * blocks of 8 channels at least 3/4 full: half of an AVX2 block (4
     * channels) is below that, so on AVX2 the first layer is blocked too
     * (an AMD EPYC without AVX-512 runs this case that way). */
    int want = near || b / 2 < 6 ? 3 : 2;
    int blocked = count_in_layout(opt, "blocked", "BlockedConv");
    CHECK(blocked == want);
    if (blocked != want) fprintf(stderr, "  near %d: %d BlockedConv, expected %d\n", near, blocked, want);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 1, 28, 28});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&p2);
  }
}

/* Islands: a lone small convolution between planar ops is not worth its
 * conversions and stays planar; a lone large one (5x5, 64 channels) is
 * converted; a 3x3 layer the planar Winograd kernel takes stays planar:
 * 64 -> 64, and uneven ones with C * M / (C + M) >= 32 (48 -> 192 and
 * 192 -> 48); 40 -> 96 (28) and 32 -> 32 (16) are converted. */
static void test_blocked_islands(void) {
  if (er__cpu_layout_block() == 0) return;
  struct {
    int64_t c, hw, m, k;
    bool blocked;
  } cases[] = {{4, 8, 8, 1, false},    {64, 14, 64, 5, true},  {64, 32, 64, 3, false}, {48, 16, 192, 3, false},
               {192, 16, 48, 3, false}, {40, 16, 96, 3, true}, {32, 20, 32, 3, true}};
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    er_pbw g = {0}, m = {0}, a = {0};
    add_weight(&g, "W", 4, (const int64_t[]){cases[i].m, cases[i].c, cases[i].k, cases[i].k}, 0.1f, 0);
    int64_t pad = cases[i].k / 2;
    tb_attr_ints(&a, "pads", (const int64_t[]){pad, pad, pad, pad}, 4);
    tb_node(&g, "Softplus", "pre", IN("x"), OUT("sp"), NULL);
    tb_node(&g, "Conv", "c", IN("sp", "W"), OUT("c"), &a);
    tb_node(&g, "Softplus", "post", IN("c"), OUT("y"), NULL);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, cases[i].c, cases[i].hw, cases[i].hw});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    CHECK(count_in_layout(opt, "blocked", "BlockedConv") == (cases[i].blocked ? 1 : 0));
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, cases[i].c, cases[i].hw, cases[i].hw});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&a);
  }
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
    add_weight(&g, "scale", 1, (const int64_t[]){6}, 0.3f, 1);
    add_weight(&g, "shift", 1, (const int64_t[]){6}, 0.2f, 0);
    add_weight(&g, "mean", 1, (const int64_t[]){6}, 0.2f, 0);
    add_weight(&g, "var", 1, (const int64_t[]){6}, 0.2f, 1);
    if (variant == 1) add_weight(&g, "k", 4, (const int64_t[]){1, 1, 1, 7}, 0.5f, 1);
    else add_weight(&g, "k", 3, (const int64_t[]){6, 1, 1}, 0.5f, 1);
    add_scalar(&g, "b", 0.25f);
    tb_node(&g, "BatchNormalization", "bn", IN("x", "scale", "shift", "mean", "var"), OUT("n"), NULL);
    tb_node(&g, "Mul", "mul", IN("n", "k"), OUT("m"), NULL);
    tb_node(&g, "Add", "add", IN("b", "m"), OUT("a"), NULL);
    tb_node(&g, "Relu", "relu", IN("a"), OUT(variant == 2 ? "r" : "y"), NULL);
    if (variant == 2) tb_node(&g, "Add", "twice", IN("r", "m"), OUT("y"), NULL);
    tb_graph_input(&g, "x", 1, 4, x);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    if (variant == 0) CHECK(node_count(opt) == 2 && count_op(opt, "BatchNormalization") == 1);
    else if (variant == 1) CHECK(count_op(opt, "Mul") == 1 && count_op(opt, "Add") == 1);
    else CHECK(count_op(opt, "Mul") == 0 && count_op(opt, "Add") == 2 && node_count(opt) == 4);
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
    add_weight(&g, "W", 4, w, 0.8f, 0);
    add_scalar(&g, "three", 3.0f);
    add_scalar(&g, "two", 2.0f);
    add_scalar(&g, "zero", 0.0f);
    add_scalar(&g, "six", 6.0f);
    add_scalar(&g, "sixth", 1.0f / 6.0f);
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    setenv("EDGERUN_LAYOUT", "planar", 1);
    if (variant <= 1 || variant == 3) CHECK(node_count(opt) == 1 && count_op(opt, "FusedConv") == 1);
    else CHECK(count_op(opt, "Clip") == 1);
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
    add_i64(&g, "st1", 1, &v[k].st1);
    add_i64(&g, "en1", 1, &v[k].en1);
    add_i64(&g, "ax1", 1, &v[k].ax1);
    add_i64(&g, "sp1", 1, &v[k].sp1);
    add_i64(&g, "st2", 1, &v[k].st2);
    add_i64(&g, "en2", 1, &v[k].en2);
    add_i64(&g, "ax2", 1, &v[k].ax2);
    add_i64(&g, "sp2", 1, &v[k].sp2);
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
    er_model *opt = load(&m, 2), *plain = load(&m, -1);
    int n = count_op(opt, "Slice");
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
  add_weight(&g, "G", 1, gd, 0.5f, 1.0f);
  tb_tensor(&mt, "M", 7, 0, NULL, &trips, sizeof trips);
  tb_graph_initializer(&g, &mt);
  add_weight(&b, "Wb", 2, wd, 1.0f, 0.0f);
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
    er_model *opt = load(&m, 2), *as_written = load(&m, -1);
    if (opt && as_written) {
      /* Written: the Loop alone. Hoisted: MatMul, Relu and Mul (or what
       * the fusions make of them) in front of it. */
      CHECK(node_count(as_written) == 1 && count_op(opt, "Loop") == 1);
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
    /* Zero-filled inputs of the declared shapes, as fuzz-load gives. */
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
  er_model *m = load(&mw, 1);
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

/* The pass table lists every pass once, load passes before session ones. */
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
      {"blocked_layout", test_blocked_layout},
      {"blocked_near_misses", test_blocked_near_misses},
      {"blocked_groups", test_blocked_groups},
      {"winograd_choice", test_winograd_choice},
      {"blocked_head_split", test_blocked_head_split},
      {"blocked_max_min", test_blocked_max_min},
      {"blocked_mixed_concat", test_blocked_mixed_concat},
      {"blocked_islands", test_blocked_islands},
      {"blocked_half_block", test_blocked_half_block},
      {"blocked_split", test_blocked_split},
      {"blocked_resize", test_blocked_resize},
      {"blocked_channels_last", test_blocked_channels_last},
      {"blocked_channel_consts", test_blocked_channel_consts},
      {"shared_weights", test_shared_weights},
      {"blocked_batchnorm", test_blocked_batchnorm},
      {"loop_invariants", test_loop_invariants},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
