/* test-qdq.c - the QDQ pass (src/graph/passes-qdq.c) on graphs that
 * contain each pattern (the rewrite happens: the optimized model's node
 * list is checked) and on graphs that nearly do (it must not). Every
 * optimized model is run against the same model loaded as written
 * (optimize = -1, the QDQ reference semantics, every node on its reference
 * kernel), once with the optimized kernels and once with the fused ops'
 * reference kernels, on the same random inputs. Patterns the pass computes
 * with the same arithmetic (QAdd, QMul, lookup tables, data movement) must
 * agree exactly; integer GEMMs and average pools within one quantization
 * step of the output (their sums are exact where the float graph rounds). */
#include <math.h>
#include <stdlib.h>

#include "kernels/kernel.h"
#include "harness.h"
#include "onnx-builder.h"

/* ONNX TensorProto element types. */
enum { T_FLOAT = 1, T_UINT8 = 2, T_INT8 = 3, T_INT32 = 6, T_INT4 = 22 };

static uint64_t rng_state = 424242;

static float frand(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((rng_state >> 40) / 16777216.0 * 2.0 - 1.0);
}

#define IN(...) ((const char *const[]){__VA_ARGS__, NULL})

static void node(er_pbw *g, const char *op, const char *const *ins, const char *const *outs, const er_pbw *attrs) {
  tb_node(g, op, outs[0], ins, outs, attrs);
}

static void init_f(er_pbw *g, const char *name, int rank, const int64_t *dims, float scale, float offset) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = frand() * scale + offset;
  er_pbw t = {0};
  tb_tensor(&t, name, T_FLOAT, rank, dims, v, (size_t)n * sizeof *v);
  tb_graph_initializer(g, &t);
  er__pbw_free(&t);
  free(v);
}

static void init_scalar(er_pbw *g, const char *name, float v) {
  er_pbw t = {0};
  tb_tensor(&t, name, T_FLOAT, 0, NULL, &v, sizeof v);
  tb_graph_initializer(g, &t);
  er__pbw_free(&t);
}

/* An integer initializer of `type` with values uniform in [lo, hi] (int4
 * packed two to a byte, as ONNX stores it). */
static void init_q(er_pbw *g, const char *name, int type, int rank, const int64_t *dims, int lo, int hi) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  size_t es = type == T_INT32 ? 4 : 1;
  uint8_t *buf = calloc((size_t)(n ? n : 1), es);
  for (int64_t i = 0; i < n; i++) {
    int32_t v = lo + (int32_t)((frand() * 0.5f + 0.5f) * (float)(hi - lo + 1));
    if (v > hi) v = hi;
    if (type == T_INT32) memcpy(buf + i * 4, &v, 4);
    else if (type == T_INT4) buf[i / 2] |= (uint8_t)((v & 0xf) << (i % 2 ? 4 : 0));
    else buf[i] = (uint8_t)v;
  }
  size_t bytes = type == T_INT4 ? (size_t)(n + 1) / 2 : (size_t)n * es;
  er_pbw t = {0};
  tb_tensor(&t, name, type, rank, dims, buf, bytes);
  tb_graph_initializer(g, &t);
  er__pbw_free(&t);
  free(buf);
}

static void init_zp(er_pbw *g, const char *name, int type, int v) { init_q(g, name, type, 0, NULL, v, v); }

/* x -> QuantizeLinear -> DequantizeLinear -> out, with parameters named
 * <out>_s, <out>_z. */
static void qdq(er_pbw *g, const char *x, const char *out, int type, float scale, int zp) {
  char s[64], z[64], q[64];
  snprintf(s, sizeof s, "%s_s", out);
  snprintf(z, sizeof z, "%s_z", out);
  snprintf(q, sizeof q, "%s_q", out);
  init_scalar(g, s, scale);
  init_zp(g, z, type, zp);
  node(g, "QuantizeLinear", IN(x, s, z), IN(q), NULL);
  node(g, "DequantizeLinear", IN(q, s, z), IN(out), NULL);
}

/* Constant weights W [dims] of `type` behind a DequantizeLinear, per
 * channel along `axis` (channels > 0) or per tensor. */
static void dq_weights(er_pbw *g, const char *out, int type, int rank, const int64_t *dims, int axis, int64_t channels) {
  char w[64], s[64], z[64];
  snprintf(w, sizeof w, "%s_w", out);
  snprintf(s, sizeof s, "%s_s", out);
  snprintf(z, sizeof z, "%s_z", out);
  init_q(g, w, type, rank, dims, type == T_INT8 ? -127 : 0, type == T_INT8 ? 127 : 255);
  if (channels > 0) {
    init_f(g, s, 1, (const int64_t[]){channels}, 0.002f, 0.01f);
    init_q(g, z, type, 1, (const int64_t[]){channels}, type == T_INT8 ? 0 : 128, type == T_INT8 ? 0 : 128);
  } else {
    init_scalar(g, s, 0.01f);
    init_zp(g, z, type, type == T_INT8 ? 0 : 128);
  }
  er_pbw a = {0};
  if (channels > 0) tb_attr_int(&a, "axis", axis);
  node(g, "DequantizeLinear", IN(w, s, z), IN(out), &a);
  er__pbw_free(&a);
}

static er_model *load(const er_pbw *m, int optimize) {
  er_load_options o;
  er_load_options_init(&o);
  o.optimize = optimize;
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m->buf, m->len, NULL, &o, &model), ER_STATUS_OK);
  return model;
}

/* The QDQ fusion is part of what a CPU session runs (its own fused copy of
 * the graph); these helpers read that graph through a session. */
static void print_session_ops(const er_model *m) {
  er_session *s = NULL;
  if (er_session_create(m, NULL, &s) != ER_STATUS_OK) return;
  er_session_stats st;
  er_session_stats_get(s, &st);
  for (size_t i = 0; i < st.node_count; i++) {
    const char *t, *name;
    er_session_node(s, i, &t, &name);
    fprintf(stderr, " %s", t);
  }
  er_session_free(s);
}

static int count_op(const er_model *m, const char *op) {
  er_session *s = NULL;
  if (er_session_create(m, NULL, &s) != ER_STATUS_OK) return -1;
  er_session_stats st;
  er_session_stats_get(s, &st);
  int n = 0;
  for (size_t i = 0; i < st.node_count; i++) {
    const char *t, *name;
    er_session_node(s, i, &t, &name);
    if (strcmp(t, op) == 0) n++;
  }
  er_session_free(s);
  return n;
}

/* Output 0 of model m on input x (float [dims]); the caller frees it. */
static er_tensor *run(er_model *m, const er_tensor *x, bool reference) {
  er_session_options o;
  er_session_options_init(&o);
  o.force_reference = reference;
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, &o, &s), ER_STATUS_OK);
  if (!s) return NULL;
  er_named_tensor in = {"x", x};
  er_tensor *y = NULL;
  const char *names[1] = {"y"};
  CHECK_STATUS(er_session_run(s, &in, 1, names, 1, &y), ER_STATUS_OK);
  er_session_free(s);
  return y;
}

/* Loads the model both ways, checks `expect` on the optimized one, and
 * compares outputs on three random inputs (uniform in [-2, 2]) with the
 * optimized kernels and with the reference kernels: the largest difference
 * must not exceed `tol`. */
static void compare(const er_pbw *m, int rank, const int64_t *dims, double tol, bool (*expect)(const er_model *),
                    const char *what) {
  er_model *opt = load(m, 2), *plain = load(m, -1);
  if (!opt || !plain) {
    er_model_free(opt);
    er_model_free(plain);
    return;
  }
  if (expect && !expect(opt)) {
    er_test_failed++;
    fprintf(stderr, "FAIL %s: %s: the optimized graph is not the expected one:", er_test_current, what);
    print_session_ops(opt);
    fprintf(stderr, "\n");
  } else if (expect) {
    er_test_passed++;
  }
  double worst = 0;
  for (int trial = 0; trial < 3; trial++) {
    er_tensor *x;
    er_tensor_create(ER_DTYPE_FLOAT, rank, dims, &x);
    float *xv = er_tensor_data(x);
    for (int64_t i = 0; i < er_tensor_count(x); i++) xv[i] = frand() * 2;
    er_tensor *want = run(plain, x, true);
    for (int ref = 0; ref < 2; ref++) {
      er_tensor *got = run(opt, x, ref == 1);
      if (got && want && er_tensor_count(got) == er_tensor_count(want)) {
        const float *a = er_tensor_cdata(got), *b = er_tensor_cdata(want);
        for (int64_t i = 0; i < er_tensor_count(got); i++) {
          double d = fabs((double)a[i] - b[i]);
          if (!(d <= worst)) worst = d;
        }
      } else {
        worst = INFINITY;
      }
      er_tensor_free(got);
    }
    er_tensor_free(want);
    er_tensor_free(x);
  }
  if (worst <= tol) {
    er_test_passed++;
  } else {
    er_test_failed++;
    fprintf(stderr, "FAIL %s: %s: largest difference %.9g exceeds %.9g\n", er_test_current, what, worst, tol);
  }
  er_model_free(opt);
  er_model_free(plain);
}

static void finish(er_pbw *g, er_pbw *m, int rank, const int64_t *dims, int opset) {
  tb_graph_input(g, "x", T_FLOAT, rank, dims);
  tb_graph_output(g, "y", T_FLOAT, -1, NULL);
  tb_model(m, 8, opset, g);
}

/* ---- expectations ---------------------------------------------------------- */

static bool no_float_ops(const er_model *m, const char *op) { return count_op(m, op) == 0; }
static bool one_qconv(const er_model *m) {
  return count_op(m, "QConv") == 1 && no_float_ops(m, "Conv") && no_float_ops(m, "Relu") && no_float_ops(m, "Clip") &&
         count_op(m, "QuantizeLinear") == 1 && count_op(m, "DequantizeLinear") == 1;
}
static bool qconv_float_out(const er_model *m) { return count_op(m, "QConv") == 1 && no_float_ops(m, "Conv"); }
static bool conv_kept(const er_model *m) {
  return count_op(m, "QConv") == 0 && count_op(m, "Conv") + count_op(m, "FusedConv") == 1;
}
static bool one_qmatmul(const er_model *m) {
  return count_op(m, "QMatMul") == 1 && no_float_ops(m, "Gemm") && no_float_ops(m, "MatMul") &&
         count_op(m, "QuantizeLinear") == 1 && count_op(m, "DequantizeLinear") == 1;
}
static bool gemm_kept(const er_model *m) { return count_op(m, "QMatMul") == 0 && count_op(m, "Gemm") == 1; }
static bool one_qadd(const er_model *m) {
  return count_op(m, "QAdd") == 1 && no_float_ops(m, "Add") && no_float_ops(m, "Relu") &&
         count_op(m, "DequantizeLinear") == 1;
}
static bool one_qmul(const er_model *m) { return count_op(m, "QMul") == 1 && no_float_ops(m, "Mul"); }
static bool add_kept(const er_model *m) { return count_op(m, "QAdd") == 0 && count_op(m, "Add") == 1; }
static bool channel_lut(const er_model *m) {
  return count_op(m, "QLut") == 1 && no_float_ops(m, "Add") && count_op(m, "DequantizeLinear") == 1;
}
static bool one_lut(const er_model *m) {
  return count_op(m, "QLut") == 1 && count_op(m, "QuantizeLinear") == 1 && count_op(m, "DequantizeLinear") == 1;
}
static bool no_lut_one_q(const er_model *m) {
  return count_op(m, "QLut") == 0 && count_op(m, "QuantizeLinear") == 1 && count_op(m, "DequantizeLinear") == 1;
}
static bool int_maxpool(const er_model *m) {
  return count_op(m, "MaxPool") == 1 && count_op(m, "QuantizeLinear") == 1 && count_op(m, "DequantizeLinear") == 1 &&
         count_op(m, "QLut") == 0;
}
static bool float_maxpool(const er_model *m) { return count_op(m, "MaxPool") == 1 && count_op(m, "QuantizeLinear") == 2; }
static bool one_qavgpool(const er_model *m) {
  return count_op(m, "QAvgPool") == 1 && no_float_ops(m, "AveragePool") && no_float_ops(m, "GlobalAveragePool");
}
static bool int_concat(const er_model *m) {
  return count_op(m, "Concat") == 1 && count_op(m, "QLut") == 0 && count_op(m, "DequantizeLinear") == 1;
}
static bool int_concat_lut(const er_model *m) {
  return count_op(m, "Concat") == 1 && count_op(m, "QLut") == 1 && count_op(m, "DequantizeLinear") == 1;
}
static bool hoisted(const er_model *m) {
  return count_op(m, "QConv") == 1 && count_op(m, "MaxPool") == 1 && no_float_ops(m, "Relu") &&
         count_op(m, "QuantizeLinear") == 1;
}
static bool int_reshape(const er_model *m) {
  return count_op(m, "Reshape") == 1 && count_op(m, "QuantizeLinear") == 1 && count_op(m, "DequantizeLinear") == 1;
}
static bool one_block(const er_model *m) { return count_op(m, "QBlockMatMul") == 1 && no_float_ops(m, "MatMul"); }
static bool block_kept(const er_model *m) { return count_op(m, "QBlockMatMul") == 0 && count_op(m, "MatMul") == 1; }

/* ---- Conv ------------------------------------------------------------------ */

/* x [1,3,9,9] -> QDQ -> Conv(DQ(W) [4,3,3,3], bias) [-> act] -> QDQ -> y. */
static void conv_model(er_pbw *m, int act_type, const char *act, bool per_channel, int bias, bool weights_input,
                       bool extra_output) {
  er_pbw g = {0}, a = {0};
  const int64_t w[4] = {4, 3, 3, 3};
  qdq(&g, "x", "xd", act_type, 0.02f, act_type == T_UINT8 ? 128 : 0);
  if (weights_input) {
    init_scalar(&g, "ws", 0.01f);
    init_zp(&g, "wz", T_INT8, 0);
    node(&g, "DequantizeLinear", IN("wq", "ws", "wz"), IN("wd"), NULL);
  } else {
    dq_weights(&g, "wd", T_INT8, 4, w, 0, per_channel ? 4 : 0);
  }
  const char *b = NULL;
  if (bias == 1) {
    init_f(&g, "bf", 1, (const int64_t[]){4}, 0.1f, 0);
    b = "bf";
  } else if (bias == 2) {
    /* int32 bias with scale xs * ws: added to the accumulator as it is */
    init_q(&g, "bq", T_INT32, 1, (const int64_t[]){4}, -300, 300);
    init_scalar(&g, "bs", 0.02f * 0.01f);
    node(&g, "DequantizeLinear", IN("bq", "bs"), IN("bd"), NULL);
    b = "bd";
  }
  tb_attr_ints(&a, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  node(&g, "Conv", b ? IN("xd", "wd", b) : IN("xd", "wd"), IN("c"), &a);
  const char *c = "c";
  if (act && strcmp(act, "Relu") == 0) {
    node(&g, "Relu", IN("c"), IN("r"), NULL);
    c = "r";
  } else if (act) {
    init_scalar(&g, "lo", 0.0f);
    init_scalar(&g, "hi", 0.6f);
    node(&g, "Clip", IN("c", "lo", "hi"), IN("r"), NULL);
    c = "r";
  }
  qdq(&g, c, "y", act_type, 0.05f, act_type == T_UINT8 ? 10 : -3);
  if (weights_input) tb_graph_input(&g, "wq", T_INT8, 4, w);
  if (extra_output) tb_graph_output(&g, "c", T_FLOAT, -1, NULL);
  finish(&g, m, 4, (const int64_t[]){1, 3, 9, 9}, 13);
  er__pbw_free(&g);
  er__pbw_free(&a);
}

static void test_conv(void) {
  const int64_t x[4] = {1, 3, 9, 9};
  const char *acts[] = {NULL, "Relu", "Clip"};
  for (int t = 0; t < 2; t++)
    for (int ai = 0; ai < 3; ai++)
      for (int bias = 0; bias < 3; bias++) {
        er_pbw m = {0};
        int type = t ? T_INT8 : T_UINT8;
        conv_model(&m, type, acts[ai], bias != 1, bias, false, false);
        char what[96];
        snprintf(what, sizeof what, "conv %s %s bias %d", t ? "int8" : "uint8", acts[ai] ? acts[ai] : "-", bias);
        compare(&m, 4, x, 0.05 * 1.0001, one_qconv, what);
        er__pbw_free(&m);
      }
  /* Near misses: the conv output is also a graph output (the integer
   * conv keeps a float output; the Q stays); the weights are not constant. */
  er_pbw m = {0};
  conv_model(&m, T_UINT8, NULL, true, 2, false, true);
  compare(&m, 4, x, 0.05 * 1.0001, qconv_float_out, "conv output also a graph output");
  er__pbw_free(&m);
  er_pbw m2 = {0};
  conv_model(&m2, T_UINT8, "Relu", true, 2, true, false);
  er_model *opt = load(&m2, 2);
  CHECK(opt && conv_kept(opt));
  if (opt && !conv_kept(opt)) {
    print_session_ops(opt);
    fprintf(stderr, "\n");
  }
  er_model_free(opt);
  er__pbw_free(&m2);
}

/* The optimized kernel the CPU session gave the one node of op type
 * `op`, or NULL. */
static const char *kernel_of(const er_model *m, const char *op, char *buf, size_t cap) {
  er_session_options o;
  er_session_options_init(&o);
  o.profile = true;
  er_session *s = NULL;
  if (er_session_create(m, &o, &s) != ER_STATUS_OK) return NULL;
  er_node_timing t[16];
  size_t n = 0;
  const char *found = NULL;
  if (er_session_profile(s, t, ER_ARRAY_LEN(t), &n) == ER_STATUS_OK)
    for (size_t i = 0; i < n && i < ER_ARRAY_LEN(t); i++)
      if (strcmp(t[i].op_type, op) == 0) {
        snprintf(buf, cap, "%s", t[i].kernel);
        found = buf;
      }
  er_session_free(s);
  return found;
}

/* Depthwise 3x3 with per-channel int8 weights over the whole [-127, 127]
 * range (what quantize_static writes on VNNI CPUs): the result matches the
 * reference, and a CPU with AVX-512 VBMI runs it on the byte-window
 * kernel (it once declined weights beyond [-64, 64] and fell back to the
 * slower float-plane kernel: MobileNetV2 int8 5.8 ms instead of 3.8). */
static void test_depthwise(void) {
  er_pbw g = {0}, a = {0}, m = {0};
  const int64_t w[4] = {8, 1, 3, 3}, x[4] = {1, 8, 12, 12};
  qdq(&g, "x", "xd", T_UINT8, 0.02f, 128);
  dq_weights(&g, "wd", T_INT8, 4, w, 0, 8);
  tb_attr_ints(&a, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_attr_int(&a, "group", 8);
  node(&g, "Conv", IN("xd", "wd"), IN("c"), &a);
  qdq(&g, "c", "y", T_UINT8, 0.05f, 10);
  finish(&g, &m, 4, x, 13);
  compare(&m, 4, x, 0.05 * 1.0001, one_qconv, "depthwise conv, full-range int8 weights");
  er_model *opt = load(&m, 2);
  char buf[96];
  const char *k = opt ? kernel_of(opt, "QConv", buf, sizeof buf) : NULL;
  CHECK(k && strstr(k, "_dw__"));
  const er_cpu_features *f = er__cpu_features();
  if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni && f->avx512vbmi) {
    CHECK(k && strcmp(k, "q8_qconv_dw__avx512vbmi") == 0);
    if (k && strcmp(k, "q8_qconv_dw__avx512vbmi") != 0) fprintf(stderr, "  kernel chosen: %s\n", k);
  } else {
    printf("skip: the VBMI kernel choice (CPU lacks AVX-512 VBMI)\n");
  }
  er_model_free(opt);
  er__pbw_free(&g);
  er__pbw_free(&a);
  er__pbw_free(&m);
}

/* ---- Gemm / MatMul ------------------------------------------------------------ */

static void gemm_model(er_pbw *m, bool matmul, bool trans_a) {
  er_pbw g = {0}, a = {0};
  qdq(&g, "x", "xd", T_UINT8, 0.02f, 100);
  if (matmul) {
    dq_weights(&g, "wd", T_INT8, 2, (const int64_t[]){24, 10}, 1, 10);
    node(&g, "MatMul", IN("xd", "wd"), IN("c"), NULL);
  } else {
    dq_weights(&g, "wd", T_INT8, 2, (const int64_t[]){10, 24}, 0, 10);
    init_q(&g, "bq", T_INT32, 1, (const int64_t[]){10}, -500, 500);
    init_f(&g, "bs", 1, (const int64_t[]){10}, 0.0001f, 0.0002f);
    tb_attr_int(&a, "axis", 0);
    node(&g, "DequantizeLinear", IN("bq", "bs"), IN("bd"), &a);
    er__pbw_free(&a);
    er_pbw ga = {0};
    tb_attr_int(&ga, "transB", 1);
    if (trans_a) tb_attr_int(&ga, "transA", 1);
    node(&g, "Gemm", IN("xd", "wd", "bd"), IN("c"), &ga);
    er__pbw_free(&ga);
  }
  qdq(&g, "c", "y", T_UINT8, 0.04f, 120);
  int64_t xd[3] = {2, 5, 24};
  if (!matmul) {
    xd[0] = trans_a ? 24 : 5;
    xd[1] = trans_a ? 5 : 24;
  }
  finish(&g, m, matmul ? 3 : 2, xd, 13);
  er__pbw_free(&g);
}

static void test_gemm(void) {
  er_pbw m = {0};
  gemm_model(&m, true, false);
  compare(&m, 3, (const int64_t[]){2, 5, 24}, 0.04 * 1.0001, one_qmatmul, "MatMul [2,5,24]x[24,10]");
  er__pbw_free(&m);
  er_pbw m2 = {0};
  gemm_model(&m2, false, false);
  compare(&m2, 2, (const int64_t[]){5, 24}, 0.04 * 1.0001, one_qmatmul, "Gemm transB with a dequantized bias");
  er__pbw_free(&m2);
  er_pbw m3 = {0};
  gemm_model(&m3, false, true);
  compare(&m3, 2, (const int64_t[]){24, 5}, 1e-6, gemm_kept, "Gemm transA (not fused)");
  er__pbw_free(&m3);
}

/* ---- Add / Mul ------------------------------------------------------------------ */

/* y = QDQ(act(QDQ(x) op QDQ(tanh(x)))) on [1,4,5,6]; with a float
 * constant second operand: per channel ([1,4,1,1], a per-channel table)
 * or varying along the last axis ([1,1,1,6]: a near miss). */
static void binary_model(er_pbw *m, const char *op, int type, bool relu, int const_operand) {
  er_pbw g = {0};
  node(&g, "Tanh", IN("x"), IN("x2"), NULL);
  qdq(&g, "x", "a", type, 0.02f, type == T_UINT8 ? 128 : 0);
  if (const_operand == 1) init_f(&g, "b", 4, (const int64_t[]){1, 4, 1, 1}, 0.5f, 0);
  else if (const_operand == 2) init_f(&g, "b", 4, (const int64_t[]){1, 1, 1, 6}, 0.5f, 0);
  else qdq(&g, "x2", "b", type, 0.01f, type == T_UINT8 ? 120 : -5);
  node(&g, op, IN("a", "b"), IN("s"), NULL);
  const char *s = "s";
  if (relu) {
    node(&g, "Relu", IN("s"), IN("r"), NULL);
    s = "r";
  }
  qdq(&g, s, "y", type, 0.03f, type == T_UINT8 ? 7 : -1);
  finish(&g, m, 4, (const int64_t[]){1, 4, 5, 6}, 13);
  er__pbw_free(&g);
}

static void test_binary(void) {
  const int64_t x[4] = {1, 4, 5, 6};
  for (int t = 0; t < 2; t++)
    for (int relu = 0; relu < 2; relu++) {
      er_pbw m = {0};
      binary_model(&m, "Add", t ? T_INT8 : T_UINT8, relu, 0);
      compare(&m, 4, x, 0, one_qadd, relu ? "Add + Relu" : "Add");
      er__pbw_free(&m);
      er_pbw m2 = {0};
      binary_model(&m2, "Mul", t ? T_INT8 : T_UINT8, relu, 0);
      compare(&m2, 4, x, 0, one_qmul, "Mul");
      er__pbw_free(&m2);
    }
  er_pbw m = {0};
  binary_model(&m, "Add", T_UINT8, false, 1);
  compare(&m, 4, x, 0, channel_lut, "Add of a per-channel float constant (per-channel table)");
  er__pbw_free(&m);
  er_pbw m3 = {0};
  binary_model(&m3, "Add", T_UINT8, false, 2);
  compare(&m3, 4, x, 0, add_kept, "Add of a constant varying along W (not fused)");
  er__pbw_free(&m3);
}

/* ---- lookup tables ------------------------------------------------------------- */

/* DQ -> f -> Q where f is "Sigmoid", "Mul" (by a constant 0.5), "none"
 * (requantize) or "same" (equal parameters: the pair vanishes). */
static void lut_model(er_pbw *m, const char *f, int type) {
  er_pbw g = {0};
  qdq(&g, "x", "a", type, 0.02f, type == T_UINT8 ? 128 : 0);
  const char *v = "a";
  if (strcmp(f, "Sigmoid") == 0) {
    node(&g, "Sigmoid", IN("a"), IN("f"), NULL);
    v = "f";
  } else if (strcmp(f, "Mul") == 0) {
    init_scalar(&g, "k", 0.5f);
    node(&g, "Mul", IN("a", "k"), IN("f"), NULL);
    v = "f";
  }
  bool same = strcmp(f, "same") == 0;
  /* the second QDQ: a fresh Q of v */
  char s[8] = "ys", z[8] = "yz";
  init_scalar(&g, s, same ? 0.02f : 0.007f);
  init_zp(&g, z, type, same ? (type == T_UINT8 ? 128 : 0) : (type == T_UINT8 ? 3 : -100));
  node(&g, "QuantizeLinear", IN(v, s, z), IN("yq"), NULL);
  node(&g, "DequantizeLinear", IN("yq", s, z), IN("y"), NULL);
  finish(&g, m, 2, (const int64_t[]){7, 33}, 13);
  er__pbw_free(&g);
}

static void test_lut(void) {
  const int64_t x[2] = {7, 33};
  const char *fs[] = {"Sigmoid", "Mul", "none"};
  for (int t = 0; t < 2; t++)
    for (size_t i = 0; i < ER_ARRAY_LEN(fs); i++) {
      er_pbw m = {0};
      lut_model(&m, fs[i], t ? T_INT8 : T_UINT8);
      compare(&m, 2, x, 0, one_lut, fs[i]);
      er__pbw_free(&m);
    }
  er_pbw m = {0};
  lut_model(&m, "same", T_UINT8);
  compare(&m, 2, x, 0, no_lut_one_q, "DQ -> Q with equal parameters");
  er__pbw_free(&m);
  /* DQ -> BatchNormalization -> Q (left float by onnxruntime's quantizer
   * after a Concat): a per-channel table. */
  for (int t = 0; t < 2; t++) {
    int type = t ? T_INT8 : T_UINT8;
    er_pbw g = {0}, mb = {0};
    qdq(&g, "x", "a", type, 0.02f, type == T_UINT8 ? 128 : 0);
    init_f(&g, "bn_s", 1, (const int64_t[]){3}, 0.5f, 1.0f);
    init_f(&g, "bn_b", 1, (const int64_t[]){3}, 0.2f, 0);
    init_f(&g, "bn_m", 1, (const int64_t[]){3}, 0.2f, 0);
    init_f(&g, "bn_v", 1, (const int64_t[]){3}, 0.2f, 1.0f);
    node(&g, "BatchNormalization", IN("a", "bn_s", "bn_b", "bn_m", "bn_v"), IN("bn"), NULL);
    qdq(&g, "bn", "y", type, 0.03f, type == T_UINT8 ? 100 : -10);
    finish(&g, &mb, 4, (const int64_t[]){1, 3, 5, 7}, 13);
    compare(&mb, 4, (const int64_t[]){1, 3, 5, 7}, 0, one_lut, "BatchNormalization as per-channel tables");
    er__pbw_free(&g);
    er__pbw_free(&mb);
  }
}

/* x -> QDQ (a) -> Sigmoid -> QDQ (s) -> op(a, s) -> QDQ -> y: SiLU (op Mul)
 * and x + sigmoid(x) (Add); with `keep`, s is also a graph output. */
static void self_model(er_pbw *m, const char *op, int type, bool keep) {
  er_pbw g = {0};
  qdq(&g, "x", "a", type, 0.02f, type == T_UINT8 ? 128 : 0);
  node(&g, "Sigmoid", IN("a"), IN("f"), NULL);
  qdq(&g, "f", "s", type, 1.0f / 255.0f, type == T_UINT8 ? 0 : -128);
  node(&g, op, IN("a", "s"), IN("o"), NULL);
  qdq(&g, "o", "y", type, 0.013f, type == T_UINT8 ? 30 : -90);
  if (keep) tb_graph_output(&g, "s", T_FLOAT, -1, NULL);
  finish(&g, m, 4, (const int64_t[]){1, 3, 5, 7}, 13);
  er__pbw_free(&g);
}
static bool self_one_lut(const er_model *m) {
  return count_op(m, "QLut") == 1 && count_op(m, "QMul") == 0 && count_op(m, "QAdd") == 0 &&
         no_float_ops(m, "Sigmoid") && no_float_ops(m, "Mul") && no_float_ops(m, "Add");
}
static bool self_two_luts(const er_model *m) {
  return count_op(m, "QLut") == 2 && count_op(m, "QMul") == 0 && no_float_ops(m, "Mul");
}

/* An 8-bit x and a table of the same x combined by QAdd / QMul become one
 * table, bit-identical to the graph as written. */
static void test_self_binary(void) {
  const int64_t x[4] = {1, 3, 5, 7};
  for (int t = 0; t < 2; t++) {
    int type = t ? T_INT8 : T_UINT8;
    er_pbw m = {0}, m2 = {0}, m3 = {0};
    self_model(&m, "Mul", type, false);
    compare(&m, 4, x, 0, self_one_lut, "x * sigmoid(x) as one table");
    self_model(&m2, "Add", type, false);
    compare(&m2, 4, x, 0, self_one_lut, "x + sigmoid(x) as one table");
    /* The sigmoid's table is also an output: it stays, next to the new one. */
    self_model(&m3, "Mul", type, true);
    compare(&m3, 4, x, 0, self_two_luts, "x * sigmoid(x), sigmoid(x) also an output");
    er__pbw_free(&m);
    er__pbw_free(&m2);
    er__pbw_free(&m3);
  }
}

/* ---- pools, Concat, Reshape ------------------------------------------------------ */

static void pool_model(er_pbw *m, const char *op, const int64_t *pads, int type) {
  er_pbw g = {0}, a = {0};
  qdq(&g, "x", "a", type, 0.02f, type == T_UINT8 ? 128 : 0);
  if (strcmp(op, "GlobalAveragePool") != 0) {
    tb_attr_ints(&a, "kernel_shape", (const int64_t[]){3, 3}, 2);
    tb_attr_ints(&a, "strides", (const int64_t[]){2, 2}, 2);
    tb_attr_ints(&a, "pads", pads, 4);
  }
  node(&g, op, IN("a"), IN("p"), &a);
  bool max = strcmp(op, "MaxPool") == 0;
  qdq(&g, "p", "y", type, max ? 0.02f : 0.011f, max ? (type == T_UINT8 ? 128 : 0) : 5);
  finish(&g, m, 4, (const int64_t[]){1, 3, 11, 10}, 13);
  er__pbw_free(&g);
  er__pbw_free(&a);
}

static void test_pools(void) {
  const int64_t x[4] = {1, 3, 11, 10}, p1[4] = {1, 1, 1, 1}, p3[4] = {3, 3, 3, 3};
  for (int t = 0; t < 2; t++) {
    int type = t ? T_INT8 : T_UINT8;
    er_pbw m = {0};
    pool_model(&m, "MaxPool", p1, type);
    compare(&m, 4, x, 0, int_maxpool, "MaxPool in int8");
    er__pbw_free(&m);
    er_pbw m2 = {0};
    pool_model(&m2, "AveragePool", p1, type);
    compare(&m2, 4, x, 0.011 * 1.0001, one_qavgpool, "AveragePool");
    er__pbw_free(&m2);
    er_pbw m3 = {0};
    pool_model(&m3, "GlobalAveragePool", p1, type);
    compare(&m3, 4, x, 0.011 * 1.0001, one_qavgpool, "GlobalAveragePool");
    er__pbw_free(&m3);
  }
  /* Near miss: pads as large as the kernel make empty windows (-inf in
   * float, 0 in integers): MaxPool stays float. */
  er_pbw m = {0};
  pool_model(&m, "MaxPool", p3, T_UINT8);
  compare(&m, 4, x, 0, float_maxpool, "MaxPool with pads >= kernel (not moved)");
  er__pbw_free(&m);
}

static void concat_model(er_pbw *m, bool same) {
  er_pbw g = {0}, a = {0};
  init_scalar(&g, "k", 0.7f);
  node(&g, "Mul", IN("x", "k"), IN("x2"), NULL);
  qdq(&g, "x", "a", T_UINT8, 0.02f, 128);
  qdq(&g, "x2", "b", T_UINT8, same ? 0.02f : 0.015f, same ? 128 : 100);
  tb_attr_int(&a, "axis", 1);
  node(&g, "Concat", IN("a", "b"), IN("c"), &a);
  qdq(&g, "c", "y", T_UINT8, 0.02f, 128);
  finish(&g, m, 4, (const int64_t[]){1, 2, 3, 4}, 13);
  er__pbw_free(&g);
  er__pbw_free(&a);
}

static void reshape_model(er_pbw *m) {
  er_pbw g = {0}, t = {0};
  qdq(&g, "x", "a", T_INT8, 0.02f, 0);
  const int64_t shape[2] = {3, 8}, two = 2;
  tb_tensor(&t, "shape", 7, 1, &two, shape, sizeof shape);
  tb_graph_initializer(&g, &t);
  er__pbw_free(&t);
  node(&g, "Reshape", IN("a", "shape"), IN("r"), NULL);
  qdq(&g, "r", "y", T_INT8, 0.02f, 0);
  finish(&g, m, 3, (const int64_t[]){2, 3, 4}, 13);
  er__pbw_free(&g);
}

static void test_movement(void) {
  er_pbw m = {0};
  concat_model(&m, true);
  compare(&m, 4, (const int64_t[]){1, 2, 3, 4}, 0, int_concat, "Concat with equal parameters");
  er__pbw_free(&m);
  er_pbw m2 = {0};
  concat_model(&m2, false);
  compare(&m2, 4, (const int64_t[]){1, 2, 3, 4}, 0, int_concat_lut, "Concat with different parameters");
  er__pbw_free(&m2);
  er_pbw m3 = {0};
  reshape_model(&m3);
  compare(&m3, 3, (const int64_t[]){2, 3, 4}, 0, int_reshape, "Reshape");
  er__pbw_free(&m3);
}

/* edgerun quantize's layout: Conv -> Relu -> MaxPool -> Q (one
 * quantization step across ops that commute with it). */
static void test_hoist(void) {
  er_pbw g = {0}, m = {0}, a = {0}, p = {0};
  qdq(&g, "x", "xd", T_INT8, 0.02f, 0);
  dq_weights(&g, "wd", T_INT8, 4, (const int64_t[]){5, 3, 3, 3}, 0, 5);
  tb_attr_ints(&a, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  node(&g, "Conv", IN("xd", "wd"), IN("c"), &a);
  node(&g, "Relu", IN("c"), IN("r"), NULL);
  tb_attr_ints(&p, "kernel_shape", (const int64_t[]){2, 2}, 2);
  tb_attr_ints(&p, "strides", (const int64_t[]){2, 2}, 2);
  node(&g, "MaxPool", IN("r"), IN("mp"), &p);
  qdq(&g, "mp", "y", T_INT8, 0.03f, -128);
  finish(&g, &m, 4, (const int64_t[]){1, 3, 8, 8}, 13);
  compare(&m, 4, (const int64_t[]){1, 3, 8, 8}, 0.03 * 1.0001, hoisted, "Conv -> Relu -> MaxPool -> Q");
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&a);
  er__pbw_free(&p);
}

/* ---- int4 block-wise weights --------------------------------------------------- */

static void block_model(er_pbw *m, int64_t block, int axis) {
  er_pbw g = {0}, a = {0};
  const int64_t k = 80, n = 12, nb = (k + block - 1) / block;
  init_q(&g, "w", T_INT4, 2, (const int64_t[]){k, n}, -7, 7);
  init_f(&g, "s", 2, (const int64_t[]){nb, n}, 0.01f, 0.02f);
  tb_attr_int(&a, "axis", axis);
  tb_attr_int(&a, "block_size", block);
  if (axis == 0) node(&g, "DequantizeLinear", IN("w", "s"), IN("wd"), &a);
  else node(&g, "DequantizeLinear", IN("w", "s"), IN("wd"), NULL);
  node(&g, "MatMul", IN("x", "wd"), IN("y"), NULL);
  finish(&g, m, 2, (const int64_t[]){3, 80}, 21);
  er__pbw_free(&g);
  er__pbw_free(&a);
}

static void test_int4(void) {
  er_pbw m = {0};
  block_model(&m, 32, 0);
  /* float sums in another order: a few float ulps of the largest output */
  compare(&m, 2, (const int64_t[]){3, 80}, 1e-5, one_block, "int4 blocks of 32 along K");
  er__pbw_free(&m);
  er_pbw m2 = {0};
  block_model(&m2, 16, 0);
  compare(&m2, 2, (const int64_t[]){3, 80}, 1e-5, one_block, "int4 blocks of 16 (K not a multiple)");
  er__pbw_free(&m2);
}

static void test_int4_near_miss(void) {
  /* Blocks along N, not K: not fused (the weights are folded instead). */
  er_pbw g = {0}, m = {0}, a = {0};
  init_q(&g, "w", T_INT4, 2, (const int64_t[]){16, 64}, -7, 7);
  init_f(&g, "s", 2, (const int64_t[]){16, 2}, 0.01f, 0.02f);
  tb_attr_int(&a, "axis", 1);
  tb_attr_int(&a, "block_size", 32);
  node(&g, "DequantizeLinear", IN("w", "s"), IN("wd"), &a);
  node(&g, "MatMul", IN("x", "wd"), IN("y"), NULL);
  finish(&g, &m, 2, (const int64_t[]){3, 16}, 21);
  compare(&m, 2, (const int64_t[]){3, 16}, 1e-5, block_kept, "int4 blocks along N (not fused)");
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&a);
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"conv", test_conv},       {"depthwise", test_depthwise}, {"gemm", test_gemm},   {"binary", test_binary},
      {"lut", test_lut},         {"self_binary", test_self_binary}, {"pools", test_pools}, {"movement", test_movement},
      {"hoist", test_hoist},     {"int4", test_int4},   {"int4_near_miss", test_int4_near_miss},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
