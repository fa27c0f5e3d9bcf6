/* kcases-gemm.c - cases for MatMul, Gemm, FusedMatMul and FusedGemm:
 * sizes below, at and above the tiles (14x32 and 6x16) and the blocks
 * (MC 252/144, KC 256, NC 512), odd sizes, M = 1 (GEMV), K = 0, batches
 * with each broadcast form, transposes, every C shape, every activation,
 * constant (prepacked) and run-time weights, and dims unknown at compile
 * time. */
#include "kcases.h"

/* (M, K, N) triples chosen around the tile and block sizes. */
static const int64_t mkn[][3] = {
    {1, 1, 1},     {1, 17, 33},   {3, 7, 65},    {12, 256, 32}, {13, 257, 33}, {11, 255, 31},
    {6, 64, 16},   {7, 3, 17},    {24, 64, 64},  {25, 300, 97}, {64, 64, 64},  {100, 600, 130},
    {1, 600, 200}, {257, 513, 65}, {30, 40, 1100}, {63, 129, 63}, {2, 1, 5},
    /* 5 and 8 rows: the few-row product's largest row counts on AVX-512. */
    {5, 130, 47},  {8, 96, 70},
};

/* The fused activations, in turn, with their parameters. */
const int er_kcases_n_activations = 11;
void er_kcases_activation(int i, kcase *c, char *label, size_t size) {
  static const char *const names[] = {"",     "Relu", "Clip",      "Sigmoid", "Tanh", "HardSigmoid",
                                      "HardSwish", "LeakyRelu", "Silu", "Gelu", "GeluTanh"};
  snprintf(label, size, "%s", names[i][0] ? names[i] : "none");
  if (!c) return;
  kc_attr_string(c, "activation", names[i]);
  if (strcmp(names[i], "Clip") == 0) kc_attr_floats(c, "activation_params", 2, (const float[]){-0.25f, 0.5f});
  if (strcmp(names[i], "HardSigmoid") == 0) kc_attr_floats(c, "activation_params", 2, (const float[]){0.2f, 0.5f});
  if (strcmp(names[i], "LeakyRelu") == 0) kc_attr_floats(c, "activation_params", 1, (const float[]){0.1f});
}

static void gen_matmul(case_fn fn, void *arg) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(mkn); i++) {
    int64_t m = mkn[i][0], k = mkn[i][1], n = mkn[i][2];
    for (int variant = 0; variant < 3; variant++) {
      /* 0: constant B (prepacked); 1: B at run time; 2: dims unknown. */
      kc_begin(&c, "MatMul", "", 13, "MatMul [%lld,%lld]x[%lld,%lld] %s", (long long)m, (long long)k, (long long)k,
               (long long)n, variant == 0 ? "const B" : variant == 1 ? "run-time B" : "dynamic shapes");
      kc_input(&c, 2, DIMS(m, k), -1, 1, false);
      kc_input(&c, 2, DIMS(k, n), -1, 1, variant == 0);
      c.dynamic = variant == 2;
      fn(&c, arg);
    }
    if (m <= 8) {
      kc_begin(&c, "MatMul", "", 13, "MatMul [%lld,%lld]x[%lld,%lld] const B, rows unknown at compile time",
               (long long)m, (long long)k, (long long)k, (long long)n);
      kc_input(&c, 2, DIMS(m, k), -1, 1, false);
      kc_input(&c, 2, DIMS(k, n), -1, 1, true);
      c.dynamic_batch = true;
      fn(&c, arg);
    }
  }
  /* Batches and broadcasts. */
  kc_begin(&c, "MatMul", "", 13, "MatMul [2,3,13,40]x[2,3,40,33] same batch");
  kc_input(&c, 4, DIMS(2, 3, 13, 40), -1, 1, false);
  kc_input(&c, 4, DIMS(2, 3, 40, 33), -1, 1, false);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [4,5,70]x[70,20] folded batch, const B");
  kc_input(&c, 3, DIMS(4, 5, 70), -1, 1, false);
  kc_input(&c, 2, DIMS(70, 20), -1, 1, true);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [2,1,9,16]x[1,1,16,40] B batch of ones, const B");
  kc_input(&c, 4, DIMS(2, 1, 9, 16), -1, 1, false);
  kc_input(&c, 4, DIMS(1, 1, 16, 40), -1, 1, true);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [9,16]x[3,16,40] broadcast A");
  kc_input(&c, 2, DIMS(9, 16), -1, 1, false);
  kc_input(&c, 3, DIMS(3, 16, 40), -1, 1, false);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [1,3,9,16]x[3,16,40] broadcast with leading ones");
  kc_input(&c, 4, DIMS(1, 3, 9, 16), -1, 1, false);
  kc_input(&c, 3, DIMS(3, 16, 40), -1, 1, false);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [2,1,9,16]x[1,3,16,40] two-sided broadcast");
  kc_input(&c, 4, DIMS(2, 1, 9, 16), -1, 1, false);
  kc_input(&c, 4, DIMS(1, 3, 16, 40), -1, 1, false);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [8,128,64]x[8,64,128] attention-shaped");
  kc_input(&c, 3, DIMS(8, 128, 64), -1, 1, false);
  kc_input(&c, 3, DIMS(8, 64, 128), -1, 1, false);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [8,1,64]x[8,64,130] batched GEMV (decode-shaped)");
  kc_input(&c, 3, DIMS(8, 1, 64), -1, 1, false);
  kc_input(&c, 3, DIMS(8, 64, 130), -1, 1, false);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [37]x[37,45] 1-D A");
  kc_input(&c, 1, DIMS(37), -1, 1, false);
  kc_input(&c, 2, DIMS(37, 45), -1, 1, true);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [3,0]x[0,5] K = 0");
  kc_input(&c, 2, DIMS(3, 0), -1, 1, false);
  kc_input(&c, 2, DIMS(0, 5), -1, 1, false);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [0,4]x[4,5] M = 0");
  kc_input(&c, 2, DIMS(0, 4), -1, 1, false);
  kc_input(&c, 2, DIMS(4, 5), -1, 1, true);
  fn(&c, arg);
  kc_begin(&c, "MatMul", "", 13, "MatMul [5,4]x[4,3] with specials");
  kc_specials(&c, kc_input(&c, 2, DIMS(5, 4), -1, 1, false));
  kc_input(&c, 2, DIMS(4, 3), -1, 1, true);
  fn(&c, arg);
}

static void gen_fused_matmul(case_fn fn, void *arg) {
  kcase c;
  char act[32];
  for (int a = 0; a < er_kcases_n_activations; a++) {
    er_kcases_activation(a, NULL, act, sizeof act);
    for (int bias = 0; bias < 2; bias++) {
      int64_t m = a % 3 == 0 ? 1 : 37, k = 70 + a, n = 33 + 7 * a;
      kc_begin(&c, "FusedMatMul", "com.edgerun", 1, "FusedMatMul [%lld,%lld]x[%lld,%lld] %s %s", (long long)m,
               (long long)k, (long long)k, (long long)n, bias ? "bias" : "no bias", act);
      kc_input(&c, 2, DIMS(m, k), -2, 2, false);
      kc_input(&c, 2, DIMS(k, n), -0.5f, 0.5f, true);
      if (bias) kc_input(&c, 1, DIMS(n), -1, 1, true);
      er_kcases_activation(a, &c, act, sizeof act);
      fn(&c, arg);
    }
  }
  kc_begin(&c, "FusedMatMul", "com.edgerun", 1, "FusedMatMul [2,64,300]x[300,600] bias Gelu, K over KC");
  kc_input(&c, 3, DIMS(2, 64, 300), -1, 1, false);
  kc_input(&c, 2, DIMS(300, 600), -0.2f, 0.2f, true);
  kc_input(&c, 1, DIMS(600), -1, 1, true);
  kc_attr_string(&c, "activation", "Gelu");
  fn(&c, arg);
  kc_begin(&c, "FusedMatMul", "com.edgerun", 1, "FusedMatMul [3,70]x[70,100] const B, bias, Relu, rows unknown at compile time");
  kc_input(&c, 2, DIMS(3, 70), -1, 1, false);
  kc_input(&c, 2, DIMS(70, 100), -0.5f, 0.5f, true);
  kc_input(&c, 1, DIMS(100), -1, 1, true);
  kc_attr_string(&c, "activation", "Relu");
  c.dynamic_batch = true;
  fn(&c, arg);
  kc_begin(&c, "FusedMatMul", "com.edgerun", 1, "FusedMatMul [2,300]x[300,70] run-time B, bias, Gelu (GEMV path)");
  kc_input(&c, 2, DIMS(2, 300), -1, 1, false);
  kc_input(&c, 2, DIMS(300, 70), -0.2f, 0.2f, false);
  kc_input(&c, 1, DIMS(70), -1, 1, true);
  kc_attr_string(&c, "activation", "Gelu");
  fn(&c, arg);
  kc_begin(&c, "FusedMatMul", "com.edgerun", 1, "FusedMatMul [4,9,16]x[4,16,40] batched, run-time bias Relu");
  kc_input(&c, 3, DIMS(4, 9, 16), -1, 1, false);
  kc_input(&c, 3, DIMS(4, 16, 40), -1, 1, false);
  kc_input(&c, 1, DIMS(40), -1, 1, false);
  kc_attr_string(&c, "activation", "Relu");
  fn(&c, arg);
}

/* Gemm's C in each broadcast shape. */
static er_tensor *gemm_c(kcase *c, int shape, int64_t m, int64_t n, bool constant, char *label, size_t size) {
  switch (shape) {
    case 0: snprintf(label, size, "no C"); return NULL;
    case 1: snprintf(label, size, "C []"); return kc_input(c, 0, NULL, -1, 1, constant);
    case 2: snprintf(label, size, "C [1]"); return kc_input(c, 1, DIMS(1), -1, 1, constant);
    case 3: snprintf(label, size, "C [N]"); return kc_input(c, 1, DIMS(n), -1, 1, constant);
    case 4: snprintf(label, size, "C [1,N]"); return kc_input(c, 2, DIMS(1, n), -1, 1, constant);
    case 5: snprintf(label, size, "C [M,1]"); return kc_input(c, 2, DIMS(m, 1), -1, 1, constant);
    default: snprintf(label, size, "C [M,N]"); return kc_input(c, 2, DIMS(m, n), -1, 1, constant);
  }
}

static void gen_gemm_common(case_fn fn, void *arg, const char *op, const char *domain, int version) {
  kcase c;
  /* 2-4 rows: the few-row products on weights as stored (dot products
   * with transB), one instance per row count. */
  static const int64_t sizes[][3] = {{1, 64, 100}, {13, 257, 33}, {30, 100, 70}, {5, 3, 2},
                                     {2, 129, 17}, {3, 70, 40},   {4, 33, 9}};
  char clabel[32], act[32];
  bool fused = strcmp(op, "FusedGemm") == 0;
  for (size_t s = 0; s < ER_ARRAY_LEN(sizes); s++) {
    int64_t m = sizes[s][0], k = sizes[s][1], n = sizes[s][2];
    for (int ta = 0; ta < 2; ta++) {
      for (int tb = 0; tb < 2; tb++) {
        for (int cs = 0; cs < 7; cs++) {
          int a_act = (int)((s * 7 + (size_t)cs + (size_t)ta * 3 + (size_t)tb) % (size_t)er_kcases_n_activations);
          if (fused) er_kcases_activation(a_act, NULL, act, sizeof act);
          else snprintf(act, sizeof act, "-");
          kc_begin(&c, op, domain, version, "%s M%lld K%lld N%lld transA=%d transB=%d C#%d %s", op, (long long)m,
                   (long long)k, (long long)n, ta, tb, cs, act);
          kc_input(&c, 2, ta ? DIMS(k, m) : DIMS(m, k), -1, 1, false);
          kc_input(&c, 2, tb ? DIMS(n, k) : DIMS(k, n), -1, 1, (cs + ta) % 2 == 0);
          gemm_c(&c, cs, m, n, cs % 3 != 0, clabel, sizeof clabel);
          if (ta) kc_attr_int(&c, "transA", 1);
          if (tb) kc_attr_int(&c, "transB", 1);
          if (cs == 2) kc_attr_float(&c, "alpha", 0.5f);
          if (cs == 4) kc_attr_float(&c, "beta", -2.0f);
          if (cs == 6 && ta) kc_attr_float(&c, "beta", 0.0f);
          if (fused) er_kcases_activation(a_act, &c, act, sizeof act);
          fn(&c, arg);
        }
      }
    }
  }
  kc_begin(&c, op, domain, version, "%s [1,2048]x[1000,2048]^T + C[1000] classifier", op);
  kc_input(&c, 2, DIMS(1, 2048), -1, 1, false);
  kc_input(&c, 2, DIMS(1000, 2048), -0.1f, 0.1f, true);
  kc_input(&c, 1, DIMS(1000), -1, 1, true);
  kc_attr_int(&c, "transB", 1);
  fn(&c, arg);
  kc_begin(&c, op, domain, version, "%s [7,300]x[300,40] dynamic shapes", op);
  kc_input(&c, 2, DIMS(7, 300), -1, 1, false);
  kc_input(&c, 2, DIMS(300, 40), -1, 1, false);
  kc_input(&c, 2, DIMS(7, 40), -1, 1, false);
  c.dynamic = true;
  fn(&c, arg);
  /* Weights packed at compile time, rows known only at run time (a served
   * model's batch dimension): few rows run along the packed panels. */
  static const int64_t rows[][3] = {{1, 1568, 64}, {2, 100, 70}, {3, 33, 31}, {4, 257, 100},
                                    {5, 64, 33},   {1, 7, 1},    {6, 40, 50}, {8, 96, 33}};
  for (size_t r = 0; r < ER_ARRAY_LEN(rows); r++) {
    int64_t m = rows[r][0], k = rows[r][1], n = rows[r][2];
    int tb = r % 2 == 0;
    int a_act = (int)(r * 3 + 1) % er_kcases_n_activations;
    if (fused) er_kcases_activation(a_act, NULL, act, sizeof act);
    else snprintf(act, sizeof act, "-");
    kc_begin(&c, op, domain, version, "%s M%lld (unknown at compile time) K%lld N%lld transB=%d const B, C [N] %s", op,
             (long long)m, (long long)k, (long long)n, tb, act);
    kc_input(&c, 2, DIMS(m, k), -1, 1, false);
    kc_input(&c, 2, tb ? DIMS(n, k) : DIMS(k, n), -0.5f, 0.5f, true);
    kc_input(&c, 1, DIMS(n), -1, 1, true);
    if (tb) kc_attr_int(&c, "transB", 1);
    if (r == 3) kc_attr_float(&c, "alpha", 0.5f);
    if (fused) er_kcases_activation(a_act, &c, act, sizeof act);
    c.dynamic_batch = true;
    fn(&c, arg);
  }
  kc_begin(&c, op, domain, version, "%s M3 (unknown at compile time) K40 N50 const B, run-time C [M,N], beta 0.5", op);
  kc_input(&c, 2, DIMS(3, 40), -1, 1, false);
  kc_input(&c, 2, DIMS(40, 50), -1, 1, true);
  kc_input(&c, 2, DIMS(3, 50), -1, 1, false);
  kc_attr_float(&c, "beta", 0.5f);
  c.dynamic_batch = true;
  fn(&c, arg);
}

static void gen_gemm(case_fn fn, void *arg) {
  gen_gemm_common(fn, arg, "Gemm", "", 13);
  kcase c;
  kc_begin(&c, "Gemm", "", 6, "Gemm version 6 (broadcast attribute)");
  kc_input(&c, 2, DIMS(4, 5), -1, 1, false);
  kc_input(&c, 2, DIMS(5, 6), -1, 1, true);
  kc_input(&c, 1, DIMS(6), -1, 1, true);
  kc_attr_int(&c, "broadcast", 1);
  fn(&c, arg);
}

static void gen_fused_gemm(case_fn fn, void *arg) { gen_gemm_common(fn, arg, "FusedGemm", "com.edgerun", 1); }

const case_gen kcases_gemm[] = {
    {"MatMul", "", gen_matmul},
    {"FusedMatMul", "com.edgerun", gen_fused_matmul},
    {"Gemm", "", gen_gemm},
    {"FusedGemm", "com.edgerun", gen_fused_gemm},
    {NULL, NULL, NULL},
};
