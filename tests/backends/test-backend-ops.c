/* test-backend-ops.c - every op case on every available accelerator
 * backend against the CPU reference (ggml's test-backend-ops, for edgerun).
 *
 * Each case is a one-node model (sometimes two, for QDQ) with seeded random
 * inputs, run once on the CPU and once on the backend with fallback off. A
 * backend that declines the node reports "not supported" with its reason -
 * not a failure; a backend that accepts it must match the reference:
 * float outputs by normalized mean squared error (NMSE, as ggml) below
 * 1e-7 and no element off by more than 1e-3 + 1e-3 * |ref|; 8-bit outputs
 * within one quantization step (the reference and a device may round a
 * product that lands on .5 differently).
 *
 * Backends without a usable device are skipped with the reason (the CUDA
 * backend on a machine without a GPU, OpenCL without a driver). Extra
 * plugin backends can be tested with: test-backend-ops --plugin PATH.
 * Last line: "N passed, N failed, N not supported, N skipped". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun-backend.h"
#include "model-kit.h"

#define MAX_IN 9
#define MAX_CASES 256

typedef struct op_case {
  char name[96];
  mk_model m;
  int64_t opset;
  int n_in;                     /* graph inputs fed with random data */
  char in_name[MAX_IN][16];
  er_dtype in_type[MAX_IN];
  int in_rank[MAX_IN];
  int64_t in_dims[MAX_IN][ER_MAX_RANK];
  float lo, hi;                 /* input range */
} op_case;

static op_case cases[MAX_CASES];
static int n_cases;
static int passed, failed, unsupported, skipped;

/* ---- building cases ------------------------------------------------------ */

static op_case *begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static op_case *begin(const char *fmt, ...) {
  if (n_cases == MAX_CASES) {
    fprintf(stderr, "test-backend-ops: more than MAX_CASES (%d) cases; raise it\n", MAX_CASES);
    exit(2);
  }
  op_case *c = &cases[n_cases++];
  memset(c, 0, sizeof *c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->name, sizeof c->name, fmt, ap);
  va_end(ap);
  mk_begin(&c->m, "case");
  c->opset = 13;
  c->lo = -2.0f;
  c->hi = 2.0f;
  return c;
}

static void input(op_case *c, const char *name, er_dtype t, int rank, const int64_t *dims) {
  int i = c->n_in++;
  snprintf(c->in_name[i], sizeof c->in_name[i], "%s", name);
  c->in_type[i] = t;
  c->in_rank[i] = rank;
  memcpy(c->in_dims[i], dims, (size_t)rank * sizeof *dims);
  mk_input(&c->m, name, t, rank, dims);
}

static void weights(op_case *c, const char *name, int rank, const int64_t *dims, uint64_t seed) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  float *w = malloc((size_t)n * sizeof *w);
  mk_rng r = {seed};
  mk_fill(&r, w, n, -1.0f, 1.0f);
  mk_const(&c->m, name, ER_DTYPE_FLOAT, rank, dims, w);
  free(w);
}

static void scalar_const(op_case *c, const char *name, er_dtype t, double v) {
  uint8_t buf[8] = {0};
  if (t == ER_DTYPE_FLOAT) {
    float f = (float)v;
    memcpy(buf, &f, 4);
  } else if (t == ER_DTYPE_INT8) {
    buf[0] = (uint8_t)(int8_t)v;
  } else if (t == ER_DTYPE_UINT8) {
    buf[0] = (uint8_t)v;
  } else if (t == ER_DTYPE_INT64) {
    int64_t i = (int64_t)v;
    memcpy(buf, &i, 8);
  }
  mk_const(&c->m, name, t, 0, NULL, buf);
}

#define D(...) ((const int64_t[]){__VA_ARGS__})

static void unary_cases(void) {
  static const char *const ops[] = {"Relu",  "Sigmoid", "Tanh",    "Exp",      "Abs",      "Neg",
                                    "Floor", "Ceil",    "Erf",     "Softsign", "Softplus", "HardSwish",
                                    "Sin",   "Cos",     "Round",   "Identity"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    op_case *c = begin("%s [2,3,5,7]", ops[i]);
    input(c, "x", ER_DTYPE_FLOAT, 4, D(2, 3, 5, 7));
    mk_node(&c->m, ops[i], "n", "x", "y", NULL);
    mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
    if (strcmp(ops[i], "HardSwish") == 0) c->opset = 14;
  }
  static const char *const pos[] = {"Log", "Sqrt", "Reciprocal"};
  for (size_t i = 0; i < 3; i++) {
    op_case *c = begin("%s positive [33]", pos[i]);
    c->lo = 0.1f;
    c->hi = 3.0f;
    input(c, "x", ER_DTYPE_FLOAT, 1, D(33));
    mk_node(&c->m, pos[i], "n", "x", "y", NULL);
    mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  }
  struct { const char *op, *attr; float v; } withattr[] = {
      {"LeakyRelu", "alpha", 0.2f}, {"Elu", "alpha", 0.7f}, {"Selu", "gamma", 1.2f},
      {"HardSigmoid", "alpha", 0.3f}};
  for (size_t i = 0; i < 4; i++) {
    op_case *c = begin("%s %s=%g", withattr[i].op, withattr[i].attr, withattr[i].v);
    input(c, "x", ER_DTYPE_FLOAT, 2, D(4, 9));
    er_pbw a = {0};
    tb_attr_float(&a, withattr[i].attr, withattr[i].v);
    mk_node(&c->m, withattr[i].op, "n", "x", "y", &a);
    er__pbw_free(&a);
    mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  }
  op_case *c = begin("Clip opset 13 [-0.5, 1]");
  input(c, "x", ER_DTYPE_FLOAT, 2, D(3, 11));
  scalar_const(c, "lo", ER_DTYPE_FLOAT, -0.5);
  scalar_const(c, "hi", ER_DTYPE_FLOAT, 1.0);
  mk_node(&c->m, "Clip", "n", "x,lo,hi", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  c = begin("Clip opset 6 attributes");
  c->opset = 6;
  input(c, "x", ER_DTYPE_FLOAT, 2, D(3, 11));
  er_pbw a = {0};
  tb_attr_float(&a, "min", 0.0f);
  tb_attr_float(&a, "max", 6.0f);
  mk_node(&c->m, "Clip", "n", "x", "y", &a);
  er__pbw_free(&a);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  c->lo = -8;
  c->hi = 8;
  const char *approx[2] = {"none", "tanh"};
  for (int k = 0; k < 2; k++) {
    c = begin("Gelu approximate=%s", approx[k]);
    c->opset = 20;
    input(c, "x", ER_DTYPE_FLOAT, 2, D(5, 13));
    er_pbw g = {0};
    mk_attr_string(&g, "approximate", approx[k]);
    mk_node(&c->m, "Gelu", "n", "x", "y", &g);
    er__pbw_free(&g);
    mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  }
}

static void binary_cases(void) {
  static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
  struct { int ra; int64_t a[4]; int rb; int64_t b[4]; } shapes[] = {
      {4, {2, 3, 4, 5}, 4, {2, 3, 4, 5}},  /* same shape */
      {4, {2, 3, 4, 5}, 1, {5}},           /* trailing vector */
      {4, {2, 3, 4, 5}, 3, {3, 1, 1}},     /* per channel */
      {2, {4, 1}, 3, {2, 1, 6}},           /* both broadcast */
      {3, {2, 3, 4}, 0, {0}},              /* scalar */
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      op_case *c = begin("%s broadcast case %zu", ops[i], s);
      input(c, "a", ER_DTYPE_FLOAT, shapes[s].ra, shapes[s].a);
      input(c, "b", ER_DTYPE_FLOAT, shapes[s].rb, shapes[s].b);
      if (strcmp(ops[i], "Div") == 0) c->lo = 0.5f;  /* keep divisors away from 0 */
      mk_node(&c->m, ops[i], "n", "a,b", "y", NULL);
      mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
    }
  op_case *c = begin("Pow positive base");
  c->lo = 0.2f;
  input(c, "a", ER_DTYPE_FLOAT, 2, D(3, 4));
  input(c, "b", ER_DTYPE_FLOAT, 1, D(4));
  mk_node(&c->m, "Pow", "n", "a,b", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  c = begin("PRelu per channel");
  input(c, "x", ER_DTYPE_FLOAT, 4, D(1, 3, 4, 4));
  weights(c, "slope", 3, D(3, 1, 1), 5);
  mk_node(&c->m, "PRelu", "n", "x,slope", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  static const char *const var[] = {"Sum", "Max", "Min"};
  for (int i = 0; i < 3; i++) {
    c = begin("%s of 3 with broadcast", var[i]);
    input(c, "a", ER_DTYPE_FLOAT, 2, D(3, 4));
    input(c, "b", ER_DTYPE_FLOAT, 1, D(4));
    input(c, "d", ER_DTYPE_FLOAT, 2, D(3, 4));
    mk_node(&c->m, var[i], "n", "a,b,d", "y", NULL);
    mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  }
}

static void conv_case(const char *label, int64_t n, int64_t cin, int64_t h, int64_t w, int64_t cout, int64_t k,
                      int64_t group, int64_t stride, int64_t pad, int64_t dil, bool bias, const char *auto_pad) {
  op_case *c = begin("Conv %s", label);
  input(c, "x", ER_DTYPE_FLOAT, 4, D(n, cin, h, w));
  weights(c, "w", 4, D(cout, cin / group, k, k), 11);
  if (bias) weights(c, "b", 1, D(cout), 12);
  er_pbw a = {0};
  tb_attr_int(&a, "group", group);
  tb_attr_ints(&a, "strides", D(stride, stride), 2);
  tb_attr_ints(&a, "dilations", D(dil, dil), 2);
  if (auto_pad) mk_attr_string(&a, "auto_pad", auto_pad);
  else tb_attr_ints(&a, "pads", D(pad, pad, pad, pad), 4);
  mk_node(&c->m, "Conv", "n", bias ? "x,w,b" : "x,w", "y", &a);
  er__pbw_free(&a);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
}

static void conv_cases(void) {
  conv_case("3x3 pad 1", 1, 3, 9, 11, 8, 3, 1, 1, 1, 1, true, NULL);
  conv_case("1x1 no bias", 2, 16, 5, 5, 4, 1, 1, 1, 0, 1, false, NULL);
  conv_case("5x5 stride 2", 1, 4, 13, 12, 6, 5, 1, 2, 2, 1, true, NULL);
  conv_case("depthwise 3x3 stride 2", 1, 8, 10, 10, 8, 3, 8, 2, 1, 1, true, NULL);
  conv_case("grouped 4 groups", 1, 8, 7, 7, 12, 3, 4, 1, 1, 1, true, NULL);
  conv_case("dilation 2", 1, 3, 12, 12, 4, 3, 1, 1, 2, 2, false, NULL);
  conv_case("SAME_UPPER stride 2", 1, 3, 9, 8, 5, 3, 1, 2, 0, 1, true, "SAME_UPPER");
  conv_case("SAME_LOWER 4x4", 1, 2, 7, 7, 3, 4, 1, 1, 0, 1, true, "SAME_LOWER");
  conv_case("VALID 7x7", 1, 3, 20, 17, 4, 7, 1, 3, 0, 1, true, "VALID");
  op_case *c = begin("Conv 1-D");
  input(c, "x", ER_DTYPE_FLOAT, 3, D(2, 4, 19));
  weights(c, "w", 3, D(6, 4, 3), 13);
  er_pbw a = {0};
  tb_attr_ints(&a, "pads", D(1, 2), 2);
  tb_attr_ints(&a, "strides", D(2), 1);
  mk_node(&c->m, "Conv", "n", "x,w", "y", &a);
  er__pbw_free(&a);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  c = begin("Conv 3-D (expect not supported on OpenCL)");
  input(c, "x", ER_DTYPE_FLOAT, 5, D(1, 2, 4, 4, 4));
  weights(c, "w", 5, D(2, 2, 3, 3, 3), 14);
  mk_node(&c->m, "Conv", "n", "x,w", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
}

static void pool_case(const char *op, const char *label, int rank, const int64_t *xd, int64_t k, int64_t s,
                      int64_t pad, int ceil, int cip) {
  op_case *c = begin("%s %s", op, label);
  input(c, "x", ER_DTYPE_FLOAT, rank, xd);
  er_pbw a = {0};
  int nsp = rank - 2;
  if (strncmp(op, "Global", 6) != 0) {
    tb_attr_ints(&a, "kernel_shape", D(k, k), nsp);
    tb_attr_ints(&a, "strides", D(s, s), nsp);
    tb_attr_ints(&a, "pads", D(pad, pad, pad, pad), 2 * nsp);
    if (ceil) tb_attr_int(&a, "ceil_mode", 1);
    if (cip) tb_attr_int(&a, "count_include_pad", 1);
  }
  mk_node(&c->m, op, "n", "x", "y", &a);
  er__pbw_free(&a);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
}

static void pool_cases(void) {
  pool_case("MaxPool", "3x3 s2", 4, D(1, 3, 11, 11), 3, 2, 0, 0, 0);
  pool_case("MaxPool", "3x3 s2 pad 1 ceil", 4, D(2, 2, 10, 9), 3, 2, 1, 1, 0);
  pool_case("MaxPool", "1-D k2 s2", 3, D(2, 3, 9), 2, 2, 0, 0, 0);
  pool_case("AveragePool", "2x2 s2", 4, D(1, 4, 8, 8), 2, 2, 0, 0, 0);
  pool_case("AveragePool", "3x3 s1 pad 1", 4, D(1, 2, 7, 6), 3, 1, 1, 0, 0);
  pool_case("AveragePool", "3x3 s1 pad 1 count_include_pad", 4, D(1, 2, 7, 6), 3, 1, 1, 0, 1);
  pool_case("AveragePool", "3x3 s2 pad 1 ceil count_include_pad", 4, D(1, 2, 8, 8), 3, 2, 1, 1, 1);
  pool_case("GlobalAveragePool", "[2,5,7,3]", 4, D(2, 5, 7, 3), 0, 0, 0, 0, 0);
  pool_case("GlobalMaxPool", "[1,6,4,4]", 4, D(1, 6, 4, 4), 0, 0, 0, 0, 0);
}

static void matmul_cases(void) {
  struct { const char *label; int tA, tB; float alpha, beta; int crank; int64_t c[2]; } gemms[] = {
      {"plain + C[N]", 0, 0, 1, 1, 1, {20}},      {"transB + C[M,N]", 0, 1, 1, 1, 2, {17, 20}},
      {"transA alpha beta", 1, 0, 0.5f, 2, 2, {1, 20}}, {"no C", 1, 1, 1.5f, 1, 0, {0}},
      {"C [M,1]", 0, 0, 1, 1, 2, {17, 1}}};
  for (size_t i = 0; i < sizeof gemms / sizeof gemms[0]; i++) {
    op_case *c = begin("Gemm %s", gemms[i].label);
    int64_t M = 17, K = 33, N = 20;
    input(c, "a", ER_DTYPE_FLOAT, 2, gemms[i].tA ? D(K, M) : D(M, K));
    weights(c, "b", 2, gemms[i].tB ? D(N, K) : D(K, N), 21);
    if (gemms[i].crank) weights(c, "c", gemms[i].crank, gemms[i].c, 22);
    er_pbw a = {0};
    tb_attr_int(&a, "transA", gemms[i].tA);
    tb_attr_int(&a, "transB", gemms[i].tB);
    tb_attr_float(&a, "alpha", gemms[i].alpha);
    tb_attr_float(&a, "beta", gemms[i].beta);
    mk_node(&c->m, "Gemm", "n", gemms[i].crank ? "a,b,c" : "a,b", "y", &a);
    er__pbw_free(&a);
    mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  }
  struct { const char *label; int ra; int64_t a[4]; int rb; int64_t b[4]; } mms[] = {
      {"2-D 16x16 tile", 2, {16, 16}, 2, {16, 16}},
      {"2-D odd", 2, {5, 37}, 2, {37, 3}},
      {"batched", 3, {4, 7, 9}, 3, {4, 9, 5}},
      {"batch broadcast", 4, {2, 1, 6, 8}, 3, {3, 8, 4}},
      {"weights shared", 3, {3, 5, 6}, 2, {6, 7}},
      {"1-D (expect not supported on OpenCL)", 1, {6}, 2, {6, 4}}};
  for (size_t i = 0; i < sizeof mms / sizeof mms[0]; i++) {
    op_case *c = begin("MatMul %s", mms[i].label);
    input(c, "a", ER_DTYPE_FLOAT, mms[i].ra, mms[i].a);
    input(c, "b", ER_DTYPE_FLOAT, mms[i].rb, mms[i].b);
    mk_node(&c->m, "MatMul", "n", "a,b", "y", NULL);
    mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  }
}

static void layout_cases(void) {
  int axes[] = {0, 1, -1};
  for (int i = 0; i < 3; i++) {
    op_case *c = begin("Concat axis %d", axes[i]);
    input(c, "a", ER_DTYPE_FLOAT, 3, D(2, 3, 4));
    input(c, "b", ER_DTYPE_FLOAT, 3, axes[i] == 0 ? D(1, 3, 4) : axes[i] == 1 ? D(2, 5, 4) : D(2, 3, 2));
    input(c, "d", ER_DTYPE_FLOAT, 3, D(2, 3, 4));
    er_pbw a = {0};
    tb_attr_int(&a, "axis", axes[i]);
    mk_node(&c->m, "Concat", "n", axes[i] == 0 ? "a,b,d" : "a,b", "y", &a);
    er__pbw_free(&a);
    mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  }
  op_case *c = begin("Transpose perm [0,2,3,1]");
  input(c, "x", ER_DTYPE_FLOAT, 4, D(2, 3, 4, 5));
  er_pbw a = {0};
  tb_attr_ints(&a, "perm", D(0, 2, 3, 1), 4);
  mk_node(&c->m, "Transpose", "n", "x", "y", &a);
  er__pbw_free(&a);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  c = begin("Transpose default (reverse) rank 5");
  input(c, "x", ER_DTYPE_FLOAT, 5, D(2, 1, 3, 2, 4));
  mk_node(&c->m, "Transpose", "n", "x", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  /* Reshape-like nodes alias the buffer: follow each with Relu so the
   * device reads through the alias. */
  c = begin("Reshape then Relu");
  input(c, "x", ER_DTYPE_FLOAT, 3, D(2, 3, 4));
  int64_t shape[2] = {6, -1};
  mk_const(&c->m, "s", ER_DTYPE_INT64, 1, D(2), shape);
  mk_node(&c->m, "Reshape", "r", "x,s", "t", NULL);
  mk_node(&c->m, "Relu", "n", "t", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  c = begin("Flatten axis 2 then Sigmoid");
  input(c, "x", ER_DTYPE_FLOAT, 4, D(2, 3, 4, 5));
  a = (er_pbw){0};
  tb_attr_int(&a, "axis", 2);
  mk_node(&c->m, "Flatten", "f", "x", "t", &a);
  er__pbw_free(&a);
  mk_node(&c->m, "Sigmoid", "n", "t", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  c = begin("Unsqueeze + Squeeze");
  input(c, "x", ER_DTYPE_FLOAT, 2, D(3, 4));
  int64_t ax[1] = {1};
  mk_const(&c->m, "ax", ER_DTYPE_INT64, 1, D(1), ax);
  mk_node(&c->m, "Unsqueeze", "u", "x,ax", "t", NULL);
  mk_node(&c->m, "Squeeze", "s", "t,ax", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  c = begin("ConstantOfShape then Add");
  input(c, "x", ER_DTYPE_FLOAT, 2, D(3, 4));
  int64_t shp[2] = {3, 4};
  mk_const(&c->m, "shp", ER_DTYPE_INT64, 1, D(2), shp);
  er_pbw t = {0}, at = {0};
  float val = 1.5f;
  tb_tensor(&t, "v", ER_DTYPE_FLOAT, 1, D(1), &val, 4);
  tb_attr_tensor(&at, "value", &t);
  mk_node(&c->m, "ConstantOfShape", "k", "shp", "ones", &at);
  er__pbw_free(&t);
  er__pbw_free(&at);
  mk_node(&c->m, "Add", "n", "x,ones", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
}

static void norm_cases(void) {
  int axes[] = {1, -1};
  for (int k = 0; k < 2; k++) {
    for (int64_t opset = 11; opset <= 13; opset += 2) {
      static const char *const ops[] = {"Softmax", "LogSoftmax"};
      for (int o = 0; o < 2; o++) {
        op_case *c = begin("%s axis %d opset %lld", ops[o], axes[k], (long long)opset);
        c->opset = opset;
        input(c, "x", ER_DTYPE_FLOAT, 3, D(2, 5, 7));
        c->lo = -6;
        c->hi = 6;
        er_pbw a = {0};
        tb_attr_int(&a, "axis", axes[k]);
        mk_node(&c->m, ops[o], "n", "x", "y", &a);
        er__pbw_free(&a);
        mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
      }
    }
  }
  op_case *c = begin("BatchNormalization [2,4,3,5]");
  input(c, "x", ER_DTYPE_FLOAT, 4, D(2, 4, 3, 5));
  weights(c, "sc", 1, D(4), 31);
  weights(c, "bi", 1, D(4), 32);
  weights(c, "mu", 1, D(4), 33);
  float var[4] = {0.5f, 1.0f, 2.0f, 0.1f};
  mk_const(&c->m, "var", ER_DTYPE_FLOAT, 1, D(4), var);
  mk_node(&c->m, "BatchNormalization", "n", "x,sc,bi,mu,var", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
  c = begin("LRN size 5");
  input(c, "x", ER_DTYPE_FLOAT, 4, D(1, 7, 3, 3));
  er_pbw a = {0};
  tb_attr_int(&a, "size", 5);
  tb_attr_float(&a, "alpha", 0.001f);
  mk_node(&c->m, "LRN", "n", "x", "y", &a);
  er__pbw_free(&a);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
}

/* Quantized: Q and DQ (per tensor, per axis), a QDQ conv, QLinearConv and
 * QLinearMatMul (int8 and uint8). */
static void quant_cases(void) {
  er_dtype qt[2] = {ER_DTYPE_INT8, ER_DTYPE_UINT8};
  for (int t = 0; t < 2; t++) {
    op_case *c = begin("QuantizeLinear to %s then DequantizeLinear", er_dtype_name(qt[t]));
    input(c, "x", ER_DTYPE_FLOAT, 2, D(4, 17));
    c->lo = -3;
    c->hi = 3;
    scalar_const(c, "s", ER_DTYPE_FLOAT, 0.03);
    scalar_const(c, "z", qt[t], qt[t] == ER_DTYPE_INT8 ? -3 : 120);
    mk_node(&c->m, "QuantizeLinear", "q", "x,s,z", "xq", NULL);
    mk_node(&c->m, "DequantizeLinear", "dq", "xq,s,z", "y", NULL);
    mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
    c = begin("QuantizeLinear per axis 1 to %s", er_dtype_name(qt[t]));
    input(c, "x", ER_DTYPE_FLOAT, 3, D(2, 3, 5));
    float sc[3] = {0.01f, 0.02f, 0.05f};
    mk_const(&c->m, "s", ER_DTYPE_FLOAT, 1, D(3), sc);
    uint8_t zp[3] = {0, 5, 10};
    mk_const(&c->m, "z", qt[t], 1, D(3), zp);
    mk_node(&c->m, "QuantizeLinear", "q", "x,s,z", "y", NULL);
    mk_output(&c->m, "y", qt[t], -1, NULL);
  }
  /* QDQ conv: DQ(x) and DQ(w) -> Conv -> Q: the path quantizers write. */
  op_case *c = begin("QDQ Conv int8");
  input(c, "xq", ER_DTYPE_INT8, 4, D(1, 3, 8, 8));
  int8_t w[4 * 3 * 3 * 3];
  mk_rng r = {77};
  for (size_t i = 0; i < sizeof w; i++) w[i] = (int8_t)(mk_uniform(&r, -100, 100));
  mk_const(&c->m, "wq", ER_DTYPE_INT8, 4, D(4, 3, 3, 3), w);
  scalar_const(c, "xs", ER_DTYPE_FLOAT, 0.02);
  scalar_const(c, "xz", ER_DTYPE_INT8, 2);
  scalar_const(c, "ws", ER_DTYPE_FLOAT, 0.01);
  scalar_const(c, "wz", ER_DTYPE_INT8, 0);
  scalar_const(c, "ys", ER_DTYPE_FLOAT, 0.05);
  scalar_const(c, "yz", ER_DTYPE_INT8, -1);
  mk_node(&c->m, "DequantizeLinear", "dqx", "xq,xs,xz", "x", NULL);
  mk_node(&c->m, "DequantizeLinear", "dqw", "wq,ws,wz", "wf", NULL);
  er_pbw a = {0};
  tb_attr_ints(&a, "pads", D(1, 1, 1, 1), 4);
  mk_node(&c->m, "Conv", "conv", "x,wf", "yf", &a);
  er__pbw_free(&a);
  mk_node(&c->m, "QuantizeLinear", "q", "yf,ys,yz", "y", NULL);
  mk_output(&c->m, "y", ER_DTYPE_INT8, -1, NULL);
  for (int t = 0; t < 2; t++) {
    c = begin("QLinearConv %s per-channel weights stride 2", er_dtype_name(qt[t]));
    c->opset = 13;
    input(c, "x", qt[t], 4, D(1, 4, 9, 9));
    uint8_t wq[6 * 4 * 3 * 3];
    for (size_t i = 0; i < sizeof wq; i++) wq[i] = (uint8_t)(int)mk_uniform(&r, qt[t] == ER_DTYPE_INT8 ? -127 : 0, 127);
    mk_const(&c->m, "w", qt[t], 4, D(6, 4, 3, 3), wq);
    scalar_const(c, "xs", ER_DTYPE_FLOAT, 0.05);
    scalar_const(c, "xz", qt[t], qt[t] == ER_DTYPE_INT8 ? 1 : 128);
    float ws[6] = {0.01f, 0.02f, 0.015f, 0.03f, 0.005f, 0.01f};
    mk_const(&c->m, "ws", ER_DTYPE_FLOAT, 1, D(6), ws);
    uint8_t wz[6] = {0};
    if (qt[t] == ER_DTYPE_UINT8)
      for (int i = 0; i < 6; i++) wz[i] = 64;
    mk_const(&c->m, "wz", qt[t], 1, D(6), wz);
    scalar_const(c, "ys", ER_DTYPE_FLOAT, 0.2);
    scalar_const(c, "yz", qt[t], qt[t] == ER_DTYPE_INT8 ? 0 : 100);
    int32_t bias[6] = {100, -200, 0, 50, 7, -9};
    mk_const(&c->m, "b", ER_DTYPE_INT32, 1, D(6), bias);
    a = (er_pbw){0};
    tb_attr_ints(&a, "pads", D(1, 1, 1, 1), 4);
    tb_attr_ints(&a, "strides", D(2, 2), 2);
    mk_node(&c->m, "QLinearConv", "n", "x,xs,xz,w,ws,wz,ys,yz,b", "y", &a);
    er__pbw_free(&a);
    mk_output(&c->m, "y", qt[t], -1, NULL);
    c = begin("QLinearMatMul %s", er_dtype_name(qt[t]));
    input(c, "a", qt[t], 2, D(7, 19));
    input(c, "b", qt[t], 2, D(19, 5));
    scalar_const(c, "as", ER_DTYPE_FLOAT, 0.02);
    scalar_const(c, "az", qt[t], qt[t] == ER_DTYPE_INT8 ? -2 : 130);
    scalar_const(c, "bs", ER_DTYPE_FLOAT, 0.03);
    scalar_const(c, "bz", qt[t], qt[t] == ER_DTYPE_INT8 ? 3 : 125);
    scalar_const(c, "ys", ER_DTYPE_FLOAT, 0.5);
    scalar_const(c, "yz", qt[t], qt[t] == ER_DTYPE_INT8 ? 0 : 128);
    mk_node(&c->m, "QLinearMatMul", "n", "a,as,az,b,bs,bz,ys,yz", "y", NULL);
    mk_output(&c->m, "y", qt[t], -1, NULL);
  }
}

/* edgerun's fused ops (domain com.edgerun, src/ops/fused.h), named in the
 * model directly so the case tests them whatever the load-time passes
 * would make of a pattern: FusedConv = act(Conv + B + Z), FusedGemm =
 * act(Gemm), FusedMatMul = act(MatMul + bias row). Every activation with
 * bias and residual, then each optional input left out, on every conv
 * path (im2col + GEMM, pointwise GEMM, the direct kernel for groups, 1-D). */
static const struct fused_act {
  const char *name;       /* the `activation` attribute; "" = none */
  int n;                  /* activation_params */
  float p[2];
} fused_acts[] = {
    {"", 0, {0, 0}},          {"Relu", 0, {0, 0}},        {"Clip", 2, {-0.5f, 1.0f}},
    {"Sigmoid", 0, {0, 0}},   {"Tanh", 0, {0, 0}},        {"HardSigmoid", 2, {0.3f, 0.4f}},
    {"HardSwish", 0, {0, 0}}, {"LeakyRelu", 1, {0.15f, 0}}, {"Silu", 0, {0, 0}},
    {"Gelu", 0, {0, 0}},      {"GeluTanh", 0, {0, 0}},
};
#define N_FUSED_ACTS ((int)(sizeof fused_acts / sizeof fused_acts[0]))

static op_case *begin_fused(const char *op, int act, const char *label) {
  op_case *c = begin("%s %s %s", op, fused_acts[act].name[0] ? fused_acts[act].name : "(no act)", label);
  c->m.domain = "com.edgerun";
  c->m.domain_version = 1;
  return c;
}

static void fused_attrs(er_pbw *a, int act) {
  /* FusedConv writes "" out for no activation; the FusedGemm and
   * FusedMatMul cases leave the attribute absent: both mean none. */
  mk_attr_string(a, "activation", fused_acts[act].name);
  if (fused_acts[act].n) mk_attr_floats(a, "activation_params", fused_acts[act].p, fused_acts[act].n);
}

/* Residual z: 'in' a graph input, 'const' a weight, 'none' absent. */
typedef enum { Z_NONE, Z_INPUT, Z_CONST } z_kind;

static void fused_conv_case(int act, const char *label, int64_t n, int64_t cin, int64_t h, int64_t w,
                            int64_t cout, int64_t k, int64_t group, int64_t stride, int64_t pad, bool bias,
                            z_kind z) {
  op_case *c = begin_fused("FusedConv", act, label);
  bool one_d = h == 0;
  int rank = one_d ? 3 : 4;
  int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  input(c, "x", ER_DTYPE_FLOAT, rank, one_d ? D(n, cin, w) : D(n, cin, h, w));
  weights(c, "w", rank, one_d ? D(cout, cin / group, k) : D(cout, cin / group, k, k), 41);
  if (bias) weights(c, "b", 1, D(cout), 42);
  const int64_t *yd = one_d ? D(n, cout, ow) : D(n, cout, oh, ow);
  if (z == Z_INPUT) input(c, "z", ER_DTYPE_FLOAT, rank, yd);
  if (z == Z_CONST) weights(c, "z", rank, yd, 43);
  er_pbw a = {0};
  tb_attr_int(&a, "group", group);
  tb_attr_ints(&a, "strides", D(stride, stride), rank - 2);
  tb_attr_ints(&a, "pads", D(pad, pad, pad, pad), 2 * (rank - 2));
  fused_attrs(&a, act);
  const char *ins = z != Z_NONE ? (bias ? "x,w,b,z" : "x,w,,z") : (bias ? "x,w,b" : "x,w");
  mk_node_domain(&c->m, "FusedConv", "com.edgerun", "n", ins, "y", &a);
  er__pbw_free(&a);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
}

static void fused_gemm_case(int act, const char *label, int tA, int tB, float alpha, float beta, int crank,
                            const int64_t *cd) {
  op_case *c = begin_fused("FusedGemm", act, label);
  int64_t M = 19, K = 21, N = 18;
  input(c, "a", ER_DTYPE_FLOAT, 2, tA ? D(K, M) : D(M, K));
  weights(c, "b", 2, tB ? D(N, K) : D(K, N), 44);
  if (crank) weights(c, "c", crank, cd, 45);
  er_pbw a = {0};
  tb_attr_int(&a, "transA", tA);
  tb_attr_int(&a, "transB", tB);
  tb_attr_float(&a, "alpha", alpha);
  tb_attr_float(&a, "beta", beta);
  if (act) fused_attrs(&a, act);
  mk_node_domain(&c->m, "FusedGemm", "com.edgerun", "n", crank ? "a,b,c" : "a,b", "y", &a);
  er__pbw_free(&a);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
}

static void fused_matmul_case(int act, const char *label, int ra, const int64_t *ad, int rb, const int64_t *bd,
                              bool bias, bool b_const) {
  op_case *c = begin_fused("FusedMatMul", act, label);
  input(c, "a", ER_DTYPE_FLOAT, ra, ad);
  if (b_const) weights(c, "b", rb, bd, 46);
  else input(c, "b", ER_DTYPE_FLOAT, rb, bd);
  if (bias) weights(c, "bias", 1, D(bd[rb - 1]), 47);
  er_pbw a = {0};
  if (act) fused_attrs(&a, act);
  mk_node_domain(&c->m, "FusedMatMul", "com.edgerun", "n", bias ? "a,b,bias" : "a,b", "y", &a);
  er__pbw_free(&a);
  mk_output(&c->m, "y", ER_DTYPE_FLOAT, -1, NULL);
}

static void fused_cases(void) {
  for (int act = 0; act < N_FUSED_ACTS; act++) {
    /* 3x3 pad 1 (im2col + GEMM), bias and a residual input. */
    fused_conv_case(act, "3x3 bias+residual", 2, 3, 9, 10, 8, 3, 1, 1, 1, true, Z_INPUT);
    fused_gemm_case(act, "transB + C[N]", 0, 1, 1.0f, 1.0f, 1, D(18));
    fused_matmul_case(act, "batched + bias", 3, D(2, 7, 9), 2, D(9, 18), true, true);
  }
  int relu = 1, silu = 8, clip = 2, gelu_tanh = 10, leaky = 7, hsig = 5;
  /* Each optional input left out, and the other conv paths. */
  fused_conv_case(relu, "3x3 no bias, residual", 1, 4, 7, 7, 6, 3, 1, 1, 1, false, Z_INPUT);
  fused_conv_case(relu, "3x3 bias, no residual", 1, 4, 7, 7, 6, 3, 1, 1, 1, true, Z_NONE);
  fused_conv_case(silu, "3x3 no bias, no residual", 1, 4, 7, 7, 6, 3, 1, 2, 1, false, Z_NONE);
  fused_conv_case(0, "no act, bias+residual (= Conv + Add)", 1, 4, 7, 7, 6, 3, 1, 1, 1, true, Z_INPUT);
  fused_conv_case(clip, "1x1 pointwise bias+residual", 2, 16, 5, 6, 8, 1, 1, 1, 0, true, Z_INPUT);
  fused_conv_case(hsig, "depthwise 3x3 bias+residual", 1, 8, 9, 9, 8, 3, 8, 1, 1, true, Z_INPUT);
  fused_conv_case(leaky, "grouped s2 residual weight", 1, 8, 9, 9, 12, 3, 4, 2, 1, true, Z_CONST);
  fused_conv_case(gelu_tanh, "1-D bias+residual", 2, 4, 0, 17, 6, 3, 1, 1, 1, true, Z_INPUT);
  fused_conv_case(silu, "5x5 s2 residual weight", 1, 3, 12, 11, 5, 5, 1, 2, 2, false, Z_CONST);
  fused_gemm_case(relu, "no C", 1, 0, 1.0f, 1.0f, 0, NULL);
  fused_gemm_case(silu, "transA alpha beta C[M,N]", 1, 0, 0.5f, 2.0f, 2, D(19, 18));
  fused_gemm_case(clip, "C [M,1]", 0, 0, 1.0f, 1.0f, 2, D(19, 1));
  fused_matmul_case(relu, "2-D no bias", 2, D(5, 37), 2, D(37, 3), false, true);
  fused_matmul_case(gelu_tanh, "2-D odd + bias", 2, D(17, 33), 2, D(33, 20), true, true);
  fused_matmul_case(leaky, "batch broadcast, B an input", 4, D(2, 1, 6, 8), 3, D(3, 8, 4), true, false);
}

/* ---- running ------------------------------------------------------------- */

/* Builds the case's bytes once, loads a model per call (load consumes the
 * body, so copy it). */
static er_status load_case(const op_case *c, er_model **out) {
  mk_model copy = c->m;
  er_pbw body = {0};
  er__pbw_raw(&body, c->m.g.buf, c->m.g.len);
  copy.g = body;
  return mk_load(&copy, c->opset, out);
}

static er_tensor *make_input(const op_case *c, int i, uint64_t seed) {
  er_tensor *t;
  er_tensor_create(c->in_type[i], c->in_rank[i], c->in_dims[i], &t);
  mk_rng r = {seed * 7919 + (uint64_t)i + 1};
  int64_t n = er_tensor_count(t);
  if (c->in_type[i] == ER_DTYPE_FLOAT) {
    mk_fill(&r, er_tensor_data(t), n, c->lo, c->hi);
  } else {
    uint8_t *p = er_tensor_data(t);
    for (int64_t k = 0; k < n; k++)
      p[k] = c->in_type[i] == ER_DTYPE_INT8 ? (uint8_t)(int8_t)(int)mk_uniform(&r, -128, 127)
                                            : (uint8_t)(int)mk_uniform(&r, 0, 255);
  }
  return t;
}

static er_status run_case(const op_case *c, const char *backend, er_tensor **y, char *why, size_t size) {
  er_model *m = NULL;
  er_session *s = NULL;
  er_tensor *in[MAX_IN] = {0};
  er_named_tensor named[MAX_IN];
  er_status st = load_case(c, &m);
  if (st != ER_STATUS_OK) goto done;
  er_session_options o;
  er_session_options_init(&o);
  const char *names[1] = {backend};
  o.backends = names;
  o.backend_count = 1;
  o.allow_fallback = false;
  st = er_session_create(m, &o, &s);
  if (st != ER_STATUS_OK) goto done;
  for (int i = 0; i < c->n_in; i++) {
    in[i] = make_input(c, i, 1234);
    named[i] = (er_named_tensor){c->in_name[i], in[i]};
  }
  st = er_session_run(s, named, (size_t)c->n_in, NULL, 1, y);
done:
  if (st != ER_STATUS_OK) snprintf(why, size, "%s", er_last_error());
  for (int i = 0; i < c->n_in; i++) er_tensor_free(in[i]);
  er_session_free(s);
  er_model_free(m);
  return st;
}

static bool compare(const er_tensor *ref, const er_tensor *got, char *msg, size_t size) {
  if (er_tensor_dtype(ref) != er_tensor_dtype(got) || er_tensor_rank(ref) != er_tensor_rank(got) ||
      er_tensor_count(ref) != er_tensor_count(got)) {
    snprintf(msg, size, "type or shape differs (%s vs %s, %lld vs %lld elements)",
             er_dtype_name(er_tensor_dtype(got)), er_dtype_name(er_tensor_dtype(ref)),
             (long long)er_tensor_count(got), (long long)er_tensor_count(ref));
    return false;
  }
  for (int d = 0; d < er_tensor_rank(ref); d++)
    if (er_tensor_dims(ref)[d] != er_tensor_dims(got)[d]) {
      snprintf(msg, size, "dim %d is %lld, reference %lld", d, (long long)er_tensor_dims(got)[d],
               (long long)er_tensor_dims(ref)[d]);
      return false;
    }
  int64_t n = er_tensor_count(ref);
  if (er_tensor_dtype(ref) == ER_DTYPE_FLOAT) {
    const float *a = er_tensor_cdata(ref), *b = er_tensor_cdata(got);
    double err = 0, norm = 0, worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
      double d = (double)a[i] - b[i];
      err += d * d;
      norm += (double)a[i] * a[i];
      double tol = 1e-3 + 1e-3 * fabs(a[i]);
      if (!(fabs(d) <= tol) && (at < 0 || fabs(d) > worst)) {
        worst = fabs(d);
        at = i;
      }
    }
    double nmse = norm > 0 ? err / norm : err;
    snprintf(msg, size, "nmse %.2e", nmse);
    if (!(nmse <= 1e-7) || at >= 0) {
      snprintf(msg, size, "nmse %.2e; element %lld is %g, reference %g", nmse, (long long)(at >= 0 ? at : 0),
               (double)b[at >= 0 ? at : 0], (double)a[at >= 0 ? at : 0]);
      return false;
    }
    return true;
  }
  /* 8-bit: within one quantization step. */
  bool sgn = er_tensor_dtype(ref) == ER_DTYPE_INT8;
  const uint8_t *a = er_tensor_cdata(ref), *b = er_tensor_cdata(got);
  int64_t off = 0;
  for (int64_t i = 0; i < n; i++) {
    int x = sgn ? (int8_t)a[i] : a[i], z = sgn ? (int8_t)b[i] : b[i];
    if (abs(x - z) > 1) {
      snprintf(msg, size, "element %lld is %d, reference %d", (long long)i, z, x);
      return false;
    }
    off += x != z;
  }
  snprintf(msg, size, "%lld of %lld elements one step off", (long long)off, (long long)n);
  return true;
}

static void test_backend(const char *be) {
  printf("== backend %s\n", be);
  for (int i = 0; i < n_cases; i++) {
    const op_case *c = &cases[i];
    er_tensor *ref = NULL, *got = NULL;
    char why[1024], msg[256];
    if (run_case(c, "cpu", &ref, why, sizeof why) != ER_STATUS_OK) {
      printf("FAIL %-8s %-50s the CPU reference failed: %s\n", be, c->name, why);
      failed++;
      continue;
    }
    er_status st = run_case(c, be, &got, why, sizeof why);
    if (st == ER_STATUS_NO_FALLBACK) {
      const char *r = strstr(why, "disabled: ");
      printf("not supported  %-8s %-50s %s\n", be, c->name, r ? r + 10 : why);
      unsupported++;
    } else if (st != ER_STATUS_OK) {
      printf("FAIL %-8s %-50s %s: %s\n", be, c->name, er_status_name(st), why);
      failed++;
    } else if (!compare(ref, got, msg, sizeof msg)) {
      printf("FAIL %-8s %-50s %s\n", be, c->name, msg);
      failed++;
    } else {
      printf("ok   %-8s %-50s %s\n", be, c->name, msg);
      passed++;
    }
    er_tensor_free(ref);
    er_tensor_free(got);
  }
}

int main(int argc, char **argv) {
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) {
      if (er_backend_load(argv[++i]) != ER_STATUS_OK) {
        printf("FAIL loading plugin: %s\n", er_last_error());
        return 1;
      }
    } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      only = argv[++i];
    }
  }
  /* Backend messages (fallback warnings) are expected here; keep the
   * report readable. */
  er_log_set_callback(NULL, NULL, ER_LOG_ERROR);
  unary_cases();
  binary_cases();
  conv_cases();
  pool_cases();
  matmul_cases();
  layout_cases();
  norm_cases();
  quant_cases();
  fused_cases();
  for (size_t b = 0; b < er_backend_count(); b++) {
    er_backend_info info;
    er_backend_get_info(b, &info);
    if (strcmp(info.name, "cpu") == 0 || (only && strcmp(info.name, only) != 0)) continue;
    if (!info.built || info.status[0]) {
      printf("SKIP backend %s: %s\n", info.name, info.status);
      skipped++;
      continue;
    }
    test_backend(info.name);
  }
  for (int i = 0; i < n_cases; i++) er__pbw_free(&cases[i].m.g);
  printf("%d passed, %d failed, %d not supported, %d skipped\n", passed, failed, unsupported, skipped);
  return failed ? 1 : 0;
}
