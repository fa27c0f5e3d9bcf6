/* test-qblock.c - the block-quantized kernels (src/kernels/
 * qblock*.c) against their reference and against dequantize-then-multiply
 * in double.
 *
 * Every product in er__qb_kernels_all() runs on seeded random weights
 * (quantized floats and raw random blocks, so every bit pattern of the
 * packed scales occurs) and activations, at k of one block, several and
 * odd numbers of blocks, weight rows at, below and above the 4-row tile
 * and activation rows at, below and above the 3- and 4-row tiles, with
 * ldy > n, old data in the outputs, guard bytes after them, and splits of
 * [0, n) into pieces that must give the same bits. Kernels for an ISA this
 * CPU lacks are skipped with a message.
 *
 * Tolerances. Both the reference and an optimized product compute each
 * block's integer dot product exactly; they differ only in how the float
 * terms (a block's scales times its integer sum, and the minimums' terms)
 * are rounded and summed. Each of the nb per-block terms is rounded a few
 * times and the sum over blocks adds one rounding per term, so either
 * result is within (nb + c) * FLT_EPSILON * M of the exact sum of its terms,
 * where M is the sum of the terms' magnitudes, bounded by
 *   M <= sum_k (|scale part of w_k| + |minimum part of w_k|) * |x_k|
 * (mag() below; for the types without minimums simply sum |w_k x_k|). The
 * float weight types have k terms instead of nb. Against dequantize-then-
 * multiply in double the same bound holds, plus, for the Q8_1 activations,
 * the rounding of their stored s = fp16(d * sum q), which is weighted by
 * the weight blocks' minimums (s_err() below). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kernel.h"
#include "kernels/qblock-impl.h"
#include "harness.h"

/* ======================================================================== */
/* Random numbers and buffers                                                */
/* ======================================================================== */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_u64(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double rng_unit(void) { return (double)(rng_u64() >> 11) * 0x1p-53; }

static float rng_gauss(void) {
  double u = rng_unit(), v = rng_unit();
  if (u < 1e-300) u = 1e-300;
  return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* Random floats with a row-wide scale, block-wise variation and a few
 * outliers, as weights and activations have. */
static void fill_floats(float *x, int64_t n, float scale) {
  for (int64_t i = 0; i < n; i++) {
    float v = rng_gauss() * scale;
    if (rng_u64() % 61 == 0) v *= 8.0f;
    if ((i / 32) % 7 == 3) v *= 0.05f;
    x[i] = v;
  }
}

#define GUARD 64
#define GUARD_BYTE 0xA5

/* A buffer of `bytes` followed by GUARD guard bytes. */
static void *alloc_guarded(size_t bytes) {
  uint8_t *p = malloc(bytes + GUARD);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
    exit(2);
  }
  memset(p + bytes, GUARD_BYTE, GUARD);
  return p;
}

static bool guard_ok(const void *p, size_t bytes) {
  const uint8_t *g = (const uint8_t *)p + bytes;
  for (int i = 0; i < GUARD; i++) {
    if (g[i] != GUARD_BYTE) return false;
  }
  return true;
}

/* The output's old data: a NaN with a payload no kernel computes. */
static const uint32_t SENTINEL = 0x7fc0beefu;

static void fill_sentinel(float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) memcpy(&y[i], &SENTINEL, sizeof SENTINEL);
}

static bool is_sentinel(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return u == SENTINEL;
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ======================================================================== */
/* Weight types                                                              */
/* ======================================================================== */

/* The fp16 fields of each type's block: scales (pos) and minimums (neg):
 * byte offsets, -1 ending each list. */
typedef struct wtype_info {
  uint32_t type;
  int64_t be, bb;         /* elements and bytes per block */
  int scale_off[2];       /* fp16 scale fields (-1 = none) */
  int min_off;            /* fp16 minimum field, -1 = none */
  bool has_quantizer;
} wtype_info;

static const wtype_info WTYPES[] = {
    {ER_GGML_F32, 1, 4, {-1, -1}, -1, true},
    {ER_GGML_F16, 1, 2, {-1, -1}, -1, true},
    {ER_GGML_BF16, 1, 2, {-1, -1}, -1, true},
    {ER_GGML_Q4_0, 32, 18, {0, -1}, -1, true},
    {ER_GGML_Q4_1, 32, 20, {0, -1}, 2, true},
    {ER_GGML_Q5_0, 32, 22, {0, -1}, -1, true},
    {ER_GGML_Q5_1, 32, 24, {0, -1}, 2, true},
    {ER_GGML_Q8_0, 32, 34, {0, -1}, -1, true},
    {ER_GGML_Q2_K, 256, 84, {80, -1}, 82, true},
    {ER_GGML_Q3_K, 256, 110, {108, -1}, -1, true},
    {ER_GGML_Q4_K, 256, 144, {0, -1}, 2, true},
    {ER_GGML_Q5_K, 256, 176, {0, -1}, 2, true},
    {ER_GGML_Q6_K, 256, 210, {208, -1}, -1, true},
};

static const wtype_info *wtype_find(uint32_t type) {
  for (size_t i = 0; i < ER_ARRAY_LEN(WTYPES); i++) {
    if (WTYPES[i].type == type) return &WTYPES[i];
  }
  return NULL;
}

static void put_f16(uint8_t *p, float v) {
  uint16_t h = er__f32_to_f16(v);
  memcpy(p, &h, 2);
}

/* n rows of k weights of `type`: even rows quantized from random floats,
 * odd rows random bytes with finite scales (every packed bit pattern). */
static uint8_t *make_weights(const wtype_info *wi, int64_t n, int64_t k, size_t *wrb_out) {
  const size_t wrb = er__qb_row_bytes(wi->type, k);
  uint8_t *w = malloc(wrb * (size_t)n); /* exact: an over-read is an ASan error */
  float *tmp = malloc((size_t)k * sizeof(float));
  if (!w || !tmp) exit(2);
  for (int64_t r = 0; r < n; r++) {
    uint8_t *row = w + (size_t)r * wrb;
    if (r % 2 == 0 || wi->be == 1) {
      fill_floats(tmp, k, 0.02f * (float)(1 + r % 3));
      er__qb_quantize_row(wi->type, tmp, row, k);
    } else {
      for (size_t i = 0; i < wrb; i++) row[i] = (uint8_t)rng_u64();
      for (int64_t b = 0; b < k / wi->be; b++) {
        uint8_t *blk = row + (size_t)b * (size_t)wi->bb;
        for (int s = 0; s < 2 && wi->scale_off[s] >= 0; s++) {
          put_f16(blk + wi->scale_off[s], (float)(rng_unit() * 0.01 * (rng_u64() % 2 ? 1 : -1)));
        }
        if (wi->min_off >= 0) put_f16(blk + wi->min_off, (float)(rng_unit() * 0.02 - 0.01));
      }
    }
  }
  free(tmp);
  *wrb_out = wrb;
  return w;
}

/* Per element of a weight row, |scale part| + |minimum part|: the row
 * dequantized with the minimums zeroed, and with the scales zeroed. */
static void weight_mag(const wtype_info *wi, const uint8_t *row, int64_t k, double *mag) {
  const size_t wrb = er__qb_row_bytes(wi->type, k);
  float *a = malloc((size_t)k * sizeof(float)), *b = malloc((size_t)k * sizeof(float));
  uint8_t *tmp = malloc(wrb);
  if (!a || !b || !tmp) exit(2);
  if (wi->min_off < 0) {
    er__qb_dequantize_row(wi->type, row, a, k);
    for (int64_t i = 0; i < k; i++) mag[i] = fabs((double)a[i]);
  } else {
    memcpy(tmp, row, wrb);
    for (int64_t blk = 0; blk < k / wi->be; blk++) put_f16(tmp + (size_t)blk * (size_t)wi->bb + wi->min_off, 0.0f);
    er__qb_dequantize_row(wi->type, tmp, a, k);
    memcpy(tmp, row, wrb);
    for (int64_t blk = 0; blk < k / wi->be; blk++) put_f16(tmp + (size_t)blk * (size_t)wi->bb + wi->scale_off[0], 0.0f);
    er__qb_dequantize_row(wi->type, tmp, b, k);
    for (int64_t i = 0; i < k; i++) mag[i] = fabs((double)a[i]) + fabs((double)b[i]);
  }
  free(a);
  free(b);
  free(tmp);
}

/* An activation row in double: d * q exactly (Q8_K's float d times an
 * 8-bit quant is exact in double, not always in float). */
static void act_deq(uint32_t atype, const uint8_t *q, int64_t k, double *x) {
  switch (atype) {
    case ER_GGML_F32:
      for (int64_t i = 0; i < k; i++) {
        float f;
        memcpy(&f, q + 4 * i, 4);
        x[i] = f;
      }
      return;
    case ER_GGML_Q8_0:
    case ER_GGML_Q8_1: {
      const int bytes = atype == ER_GGML_Q8_0 ? 34 : 36, qs = atype == ER_GGML_Q8_0 ? 2 : 4;
      for (int64_t b = 0; b < k / 32; b++) {
        uint16_t h;
        memcpy(&h, q + b * bytes, 2);
        const double d = er__f16_to_f32(h);
        for (int j = 0; j < 32; j++) x[32 * b + j] = d * (int8_t)q[b * bytes + qs + j];
      }
      return;
    }
    case ER_GGML_Q8_K:
      for (int64_t b = 0; b < k / 256; b++) {
        float d;
        memcpy(&d, q + b * 292, 4);
        for (int j = 0; j < 256; j++) x[256 * b + j] = (double)d * (int8_t)q[b * 292 + 4 + j];
      }
      return;
    default: ER_ASSERT(!"act_deq: not an activation format");
  }
}

/* For a Q4_1 / Q5_1 weight row against a Q8_1 activation row: sum over
 * blocks of |m| * |s - d * sum q| (the stored s's rounding, which the
 * products use and the double product does not). */
static double s_err(const wtype_info *wi, const uint8_t *wrow, const uint8_t *xrow, int64_t k) {
  if (wi->type != ER_GGML_Q4_1 && wi->type != ER_GGML_Q5_1) return 0;
  double e = 0;
  for (int64_t b = 0; b < k / 32; b++) {
    uint16_t hm, hd, hs;
    memcpy(&hm, wrow + b * wi->bb + 2, 2);
    memcpy(&hd, xrow + b * 36, 2);
    memcpy(&hs, xrow + b * 36 + 2, 2);
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += (int8_t)xrow[b * 36 + 4 + j];
    e += fabs((double)er__f16_to_f32(hm)) * fabs((double)er__f16_to_f32(hs) - (double)er__f16_to_f32(hd) * sum);
  }
  return e;
}

static bool kernel_runs_here(const er_qb_kernel *kern) {
  if (strstr(kern->name, "__avx2")) {
#if defined(__x86_64__) || defined(__i386__)
    const er_cpu_features *cpu = er__cpu_features();
    return cpu->avx2 && cpu->fma && cpu->f16c;
#else
    return false;
#endif
  }
  return strstr(kern->name, "__ref") != NULL;
}

/* ======================================================================== */
/* One product at one shape                                                  */
/* ======================================================================== */

typedef struct case_stats {
  int shapes;
  double worst_ref_ratio, worst_exact_ratio; /* |difference| / tolerance */
} case_stats;

/* n weight rows, m activation rows, k: the kernel against the reference
 * and the double product, every output written, guards and the gaps of
 * ldy untouched, splits and single activation rows bit-identical. */
static void check_shape(const er_qb_kernel *kern, int64_t n, int64_t m, int64_t k, case_stats *st) {
  const wtype_info *wi = wtype_find(kern->wtype);
  const er_qb_kernel *ref = er__qb_kernel(kern->wtype, true);
  CHECK(wi != NULL && ref != NULL && ref->atype == kern->atype);
  if (!wi || !ref) return;
  const uint32_t atype = kern->atype;
  size_t wrb;
  uint8_t *w = make_weights(wi, n, k, &wrb);
  const size_t xrb = er__qb_act_row_bytes(atype, k) + (m > 1 ? 4 : 0); /* padded rows when several */
  float *xf = malloc((size_t)(m * k) * sizeof(float));
  uint8_t *xq = malloc(xrb * (size_t)m);
  double *xd = malloc((size_t)(m * k) * sizeof(double));
  double *wd = malloc((size_t)(n * k) * sizeof(double)), *wm = malloc((size_t)(n * k) * sizeof(double));
  float *wf = malloc((size_t)k * sizeof(float));
  if (!xf || !xq || !xd || !wd || !wm || !wf) exit(2);
  for (int64_t t = 0; t < m; t++) fill_floats(xf + t * k, k, 1.0f + (float)t);
  memset(xq, 0x5A, xrb * (size_t)m);
  er__qb_quantize_act_ref(atype, xf, k, m, k, xq, xrb);
  for (int64_t t = 0; t < m; t++) act_deq(atype, xq + (size_t)t * xrb, k, xd + t * k);
  for (int64_t r = 0; r < n; r++) {
    er__qb_dequantize_row(wi->type, w + (size_t)r * wrb, wf, k);
    for (int64_t i = 0; i < k; i++) wd[r * k + i] = wf[i];
    weight_mag(wi, w + (size_t)r * wrb, k, wm + r * k);
  }

  const int64_t ldy = n + 3;
  const size_t ybytes = (size_t)(m * ldy) * sizeof(float);
  float *y = alloc_guarded(ybytes), *yr = alloc_guarded(ybytes), *ys = alloc_guarded(ybytes);
  fill_sentinel(y, m * ldy);
  fill_sentinel(yr, m * ldy);
  kern->gemm(w, wrb, xq, xrb, k, 0, n, m, y, ldy);
  ref->gemm(w, wrb, xq, xrb, k, 0, n, m, yr, ldy);
  CHECK(guard_ok(y, ybytes));
  CHECK(guard_ok(yr, ybytes));

  /* Terms per output: blocks, or elements for the float types. */
  const double nterms = wi->be == 1 ? (double)k : (double)(k / wi->be);
  bool written = true, gaps = true, finite = true, close_ref = true, close_exact = true;
  for (int64_t t = 0; t < m; t++) {
    for (int64_t c = 0; c < ldy; c++) {
      const float v = y[t * ldy + c];
      if (c >= n) {
        gaps = gaps && is_sentinel(v) && is_sentinel(yr[t * ldy + c]);
        continue;
      }
      if (is_sentinel(v) || is_sentinel(yr[t * ldy + c])) {
        written = false;
        continue;
      }
      finite = finite && isfinite(v);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < k; i++) {
        exact += wd[c * k + i] * xd[t * k + i];
        mag += wm[c * k + i] * fabs(xd[t * k + i]);
      }
      const double se = atype == ER_GGML_Q8_1 ? s_err(wi, w + (size_t)c * wrb, xq + (size_t)t * xrb, k) : 0;
      const double tol_ref = (2 * nterms + 16) * FLT_EPSILON * mag + 1e-30;
      const double tol_exact = (nterms + 8) * FLT_EPSILON * mag + se + 1e-30;
      const double dref = fabs((double)v - (double)yr[t * ldy + c]);
      const double dex = fabs((double)v - exact), dex_ref = fabs((double)yr[t * ldy + c] - exact);
      if (dref > tol_ref) {
        if (close_ref) {
          fprintf(stderr, "  %s n=%lld m=%lld k=%lld y[%lld,%lld]: %.9g vs reference %.9g (tolerance %.3g)\n",
                  kern->name, (long long)n, (long long)m, (long long)k, (long long)t, (long long)c, v,
                  yr[t * ldy + c], tol_ref);
        }
        close_ref = false;
      }
      if (dex > tol_exact || dex_ref > tol_exact) {
        if (close_exact) {
          fprintf(stderr, "  %s n=%lld m=%lld k=%lld y[%lld,%lld]: %.9g, reference %.9g, double %.9g (tol %.3g)\n",
                  kern->name, (long long)n, (long long)m, (long long)k, (long long)t, (long long)c, v,
                  yr[t * ldy + c], exact, tol_exact);
        }
        close_exact = false;
      }
      if (dref / tol_ref > st->worst_ref_ratio) st->worst_ref_ratio = dref / tol_ref;
      if (dex / tol_exact > st->worst_exact_ratio) st->worst_exact_ratio = dex / tol_exact;
    }
  }
  CHECK(written);
  CHECK(gaps);
  CHECK(finite);
  CHECK(close_ref);
  CHECK(close_exact);

  /* Splits of [0, n): three pieces at random cuts, then every row alone. */
  bool split_same = true;
  for (int pass = 0; pass < 2; pass++) {
    fill_sentinel(ys, m * ldy);
    if (pass == 0) {
      int64_t a = (int64_t)(rng_u64() % (uint64_t)(n + 1)), b = (int64_t)(rng_u64() % (uint64_t)(n + 1));
      if (a > b) {
        int64_t tmp = a;
        a = b;
        b = tmp;
      }
      kern->gemm(w, wrb, xq, xrb, k, b, n, m, ys, ldy);
      kern->gemm(w, wrb, xq, xrb, k, 0, a, m, ys, ldy);
      kern->gemm(w, wrb, xq, xrb, k, a, b, m, ys, ldy);
    } else {
      for (int64_t r = n - 1; r >= 0; r--) kern->gemm(w, wrb, xq, xrb, k, r, r + 1, m, ys, ldy);
    }
    CHECK(guard_ok(ys, ybytes));
    for (int64_t i = 0; i < m * ldy; i++) split_same = split_same && same_bits(ys[i], y[i]);
  }
  CHECK(split_same);

  /* Each activation row alone (m = 1, the decode path) gives the bits it
   * got inside the batch. */
  bool rows_same = true;
  for (int64_t t = 0; t < m && m > 1; t++) {
    float *y1 = alloc_guarded((size_t)n * sizeof(float));
    fill_sentinel(y1, n);
    kern->gemm(w, wrb, xq + (size_t)t * xrb, xrb, k, 0, n, 1, y1, n);
    CHECK(guard_ok(y1, (size_t)n * sizeof(float)));
    for (int64_t r = 0; r < n; r++) rows_same = rows_same && same_bits(y1[r], y[t * ldy + r]);
    free(y1);
  }
  CHECK(rows_same);
  if (!split_same || !rows_same) {
    fprintf(stderr, "  %s n=%lld m=%lld k=%lld: results depend on the split\n", kern->name, (long long)n,
            (long long)m, (long long)k);
  }
  st->shapes++;
  free(w);
  free(xf);
  free(xq);
  free(xd);
  free(wd);
  free(wm);
  free(wf);
  free(y);
  free(yr);
  free(ys);
}

static void test_products(void) {
  static const int64_t n_list[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17};
  static const int64_t m_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 17};
  static const int64_t blocks_list[] = {1, 2, 3, 5, 8, 17};
  static const int64_t float_k[] = {1, 7, 8, 9, 15, 16, 17, 100, 259};
  int ran = 0;
  for (const er_qb_kernel *const *kp = er__qb_kernels_all(); *kp; kp++) {
    const er_qb_kernel *kern = *kp;
    if (!kernel_runs_here(kern)) {
      printf("  skipped %s: this CPU lacks its ISA\n", kern->name);
      continue;
    }
    const wtype_info *wi = wtype_find(kern->wtype);
    CHECK(wi != NULL);
    if (!wi) continue;
    case_stats st = {0, 0, 0};
    const size_t nk = wi->be == 1 ? ER_ARRAY_LEN(float_k) : ER_ARRAY_LEN(blocks_list);
    for (size_t ik = 0; ik < nk; ik++) {
      const int64_t k = wi->be == 1 ? float_k[ik] : blocks_list[ik] * wi->be;
      /* The K-quants' rows are 8x longer: fewer shapes at the longest k. */
      const bool big = k >= 2048;
      for (size_t in = 0; in < ER_ARRAY_LEN(n_list); in++) {
        check_shape(kern, n_list[in], 1, k, &st);
        if (!big) check_shape(kern, n_list[in], 3, k, &st);
      }
      for (size_t im = 0; im < ER_ARRAY_LEN(m_list); im++) {
        check_shape(kern, 5, m_list[im], k, &st);
        if (!big) check_shape(kern, 8, m_list[im], k, &st);
      }
    }
    printf("  %-28s %4d shapes, worst |y - reference| %.3f and |y - double| %.3f of the tolerance\n", kern->name,
           st.shapes, st.worst_ref_ratio, st.worst_exact_ratio);
    ran++;
  }
  CHECK(ran > 0);
}

/* Longer products: k = 4096 with 24 activation rows (prefill tiles), and
 * k past 8192 (a GEMV that prepares its activation inline instead of once
 * per call; row chunks smaller than the rows, so several of them). */
static void test_products_large(void) {
  for (const er_qb_kernel *const *kp = er__qb_kernels_all(); *kp; kp++) {
    const er_qb_kernel *kern = *kp;
    if (!kernel_runs_here(kern) || strstr(kern->name, "__ref")) continue;
    const wtype_info *wi = wtype_find(kern->wtype);
    CHECK(wi != NULL);
    if (!wi) continue;
    const int64_t long_k = wi->be == 1 ? 8193 : (8192 / wi->be + 3) * wi->be;
    case_stats st = {0, 0, 0};
    check_shape(kern, 67, 24, 4096, &st);
    check_shape(kern, 9, 1, long_k, &st);
    check_shape(kern, 67, 3, long_k, &st);
    CHECK(st.shapes == 3);
  }
}

/* ======================================================================== */
/* Activation quantizers                                                     */
/* ======================================================================== */

/* Rows that exercise the roundings: exact ties (amax 127 makes id = 1;
 * Q8_K's -127 makes iscale = 1), zero blocks, tiny and large blocks, the
 * same magnitude with both signs, random data. */
static void fill_act_cases(float *x, int64_t k, int kind) {
  fill_floats(x, k, 1.0f);
  for (int64_t b = 0; b < k / 32; b++) {
    float *blk = x + 32 * b;
    switch ((b + kind) % 8) {
      case 0:
        for (int j = 0; j < 32; j++) blk[j] = (float)((int)(rng_u64() % 253) - 126) + 0.5f;
        blk[5] = 127.0f;
        break;
      case 1: memset(blk, 0, 32 * sizeof(float)); break;
      case 2:
        for (int j = 0; j < 32; j++) blk[j] *= 1e-6f;
        break;
      case 3:
        for (int j = 0; j < 32; j++) blk[j] *= 3000.0f;
        break;
      case 4:
        blk[3] = -9.0f;
        blk[20] = 9.0f;
        break;
      case 5:
        for (int j = 0; j < 32; j++) blk[j] = (float)((int)(rng_u64() % 253) - 126) + 0.5f;
        blk[0] = -127.0f;
        break;
      default: break;
    }
  }
  if (kind % 3 == 1) memset(x, 0, (size_t)k * sizeof(float)); /* a whole zero row */
}

static void test_act_quantizers(void) {
#if defined(__x86_64__) || defined(__i386__)
  const er_cpu_features *cpu = er__cpu_features();
  if (!(cpu->avx2 && cpu->fma && cpu->f16c)) {
    printf("  skipped: no AVX2 + FMA + F16C here\n");
    return;
  }
  static const uint32_t atypes[] = {ER_GGML_F32, ER_GGML_Q8_0, ER_GGML_Q8_1, ER_GGML_Q8_K};
  static const int64_t ks[] = {256, 512, 1536, 4096};
  for (size_t ia = 0; ia < ER_ARRAY_LEN(atypes); ia++) {
    for (size_t ik = 0; ik < ER_ARRAY_LEN(ks); ik++) {
      const int64_t k = ks[ik], n = 5, ldx = k + 7;
      const size_t rb = er__qb_act_row_bytes(atypes[ia], k), xrb = rb + 12, bytes = xrb * (size_t)n;
      float *x = malloc((size_t)(n * ldx) * sizeof(float));
      uint8_t *a = alloc_guarded(bytes), *b = alloc_guarded(bytes);
      if (!x) exit(2);
      for (int64_t t = 0; t < n; t++) fill_act_cases(x + t * ldx, k, (int)(t + ik));
      memset(a, 0x3C, bytes);
      memset(b, 0x3C, bytes);
      er__qb_quantize_act_ref(atypes[ia], x, ldx, n, k, a, xrb);
      er__qb_quantize_act_avx2(atypes[ia], x, ldx, n, k, b, xrb);
      CHECK(memcmp(a, b, bytes) == 0);
      CHECK(guard_ok(a, bytes) && guard_ok(b, bytes));
      bool gap = true;
      for (int64_t t = 0; t < n; t++) {
        for (size_t i = rb; i < xrb; i++) gap = gap && b[(size_t)t * xrb + i] == 0x3C;
      }
      CHECK(gap);
      if (memcmp(a, b, bytes) != 0) {
        for (size_t i = 0; i < bytes; i++) {
          if (a[i] != b[i]) {
            fprintf(stderr, "  atype %u k=%lld: first difference at byte %zu (row %zu, offset %zu): %02x vs %02x\n",
                    atypes[ia], (long long)k, i, i / xrb, i % xrb, a[i], b[i]);
            break;
          }
        }
      }
      /* The dispatching quantizer gives the same bytes. */
      memset(b, 0x3C, bytes);
      er__qb_quantize_act(atypes[ia], x, ldx, n, k, b, xrb);
      CHECK(memcmp(a, b, bytes) == 0);
      free(x);
      free(a);
      free(b);
    }
  }
#else
  printf("  skipped: not x86\n");
#endif
}

/* The activation formats' definitions (qblock-impl.h), on a few values. */
static void test_act_format(void) {
  float x[256];
  er_block_q8_0 q0;
  er_block_q8_1 q1;
  er_block_q8_k qk;
  for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) + 0.5f; /* ties at id = 1 after scaling */
  x[31] = 127.0f;                                              /* amax 127: d = 1, id = 1 */
  er__qb_quantize_act_ref(ER_GGML_Q8_0, x, 32, 1, 32, &q0, sizeof q0);
  CHECK(er__f16_to_f32(q0.d) == 1.0f);
  CHECK(q0.qs[0] == -16);  /* -15.5 ties to even */
  CHECK(q0.qs[1] == -14);  /* -14.5 */
  CHECK(q0.qs[17] == 2);   /* 1.5 */
  CHECK(q0.qs[18] == 2);   /* 2.5 */
  CHECK(q0.qs[31] == 127);
  er__qb_quantize_act_ref(ER_GGML_Q8_1, x, 32, 1, 32, &q1, sizeof q1);
  int sum = 0;
  for (int j = 0; j < 32; j++) sum += q1.qs[j];
  CHECK(memcmp(q1.qs, q0.qs, 32) == 0);
  CHECK(er__f16_to_f32(q1.s) == (float)sum);
  /* The file quantizer rounds ties away from zero instead. */
  er__qb_quantize_row(ER_GGML_Q8_0, x, &q0, 32);
  CHECK(q0.qs[0] == -16 && q0.qs[1] == -15 && q0.qs[18] == 3);
  /* Q8_K: the first element of largest magnitude is -127 -> iscale = 1. */
  for (int j = 0; j < 256; j++) x[j] = (float)((j % 200) - 100) + 0.5f;
  x[7] = -127.0f;
  x[100] = 127.0f;
  er__qb_quantize_act_ref(ER_GGML_Q8_K, x, 256, 1, 256, &qk, sizeof qk);
  CHECK(qk.d == 1.0f);
  CHECK(qk.qs[7] == -127 && qk.qs[100] == 127);
  CHECK(qk.qs[0] == -100); /* -99.5 ties to even */
  CHECK(qk.qs[1] == -98);  /* -98.5 */
  int bs = 0;
  for (int j = 0; j < 16; j++) bs += qk.qs[j];
  CHECK(qk.bsums[0] == bs);
}

/* ======================================================================== */
/* Quantize / dequantize round trips                                         */
/* ======================================================================== */

static float f16_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return er__f16_to_f32(h);
}

static void test_round_trip(void) {
  const int64_t k = 256 * 16;
  float *x = malloc((size_t)k * sizeof(float)), *y = malloc((size_t)k * sizeof(float));
  uint8_t *q = malloc(er__qb_row_bytes(ER_GGML_F32, k) + 64), *q2 = malloc(er__qb_row_bytes(ER_GGML_F32, k) + 64);
  if (!x || !y || !q || !q2) exit(2);
  for (int64_t i = 0; i < k; i++) x[i] = rng_gauss();
  for (size_t it = 0; it < ER_ARRAY_LEN(WTYPES); it++) {
    const wtype_info *wi = &WTYPES[it];
    CHECK(er__qb_can_quantize(wi->type) && er__qb_can_dequantize(wi->type));
    er__qb_quantize_row(wi->type, x, q, k);
    er__qb_dequantize_row(wi->type, q, y, k);
    bool bounded = true, finite = true;
    double se = 0, sx = 0, worst = 0;
    for (int64_t i = 0; i < k; i++) {
      finite = finite && isfinite(y[i]);
      const double e = fabs((double)y[i] - (double)x[i]);
      se += e * e;
      sx += (double)x[i] * x[i];
      /* Per-element bounds where the format gives one: */
      double bound = INFINITY;
      const uint8_t *blk = q + (size_t)(i / wi->be) * (size_t)wi->bb;
      /* fp16_rel: an fp16 scale's relative rounding; the 1e-5 below covers
       * the float arithmetic of the quantizer itself (x * id to 32 levels). */
      const double fp16_rel = 0x1p-11;
      switch (wi->type) {
        case ER_GGML_F16: bound = fabs(x[i]) * 0x1p-11; break;
        case ER_GGML_BF16: bound = fabs(x[i]) * 0x1p-8; break;
        case ER_GGML_F32: bound = 0; break;
        case ER_GGML_Q8_0: {
          /* Half a step, plus |q| <= 127 times the fp16 rounding of d. */
          const double d = fabs(f16_at(blk));
          bound = d * (0.5 + 128 * fp16_rel + 1e-5) + 1e-12;
          break;
        }
        case ER_GGML_Q4_0:
        case ER_GGML_Q5_0: {
          /* d = max / -8 (-16): the opposite extreme +8 (+16) is clamped
           * to 7 (15), one full step; 16 (32) steps of fp16 rounding. */
          const double d = fabs(f16_at(blk)), lv = wi->type == ER_GGML_Q4_0 ? 16 : 32;
          bound = d * (1.0 + lv * fp16_rel + 1e-5) + 1e-12;
          break;
        }
        case ER_GGML_Q4_1:
        case ER_GGML_Q5_1: {
          /* Half a step; d's rounding times up to 15 (31) levels; m's. */
          const double d = fabs(f16_at(blk)), m = fabs(f16_at(blk + 2)), lv = wi->type == ER_GGML_Q4_1 ? 16 : 32;
          bound = d * (0.5 + lv * fp16_rel + 1e-5) + m * fp16_rel + 1e-12;
          break;
        }
        default: break;
      }
      if (e > bound) {
        if (bounded) {
          fprintf(stderr, "  %s element %lld: %.9g -> %.9g (error %.3g > bound %.3g)\n", er__ggml_type_name(wi->type),
                  (long long)i, x[i], y[i], e, bound);
        }
        bounded = false;
      }
      if (e > worst) worst = e;
    }
    CHECK(bounded);
    CHECK(finite);
    /* Relative RMS error on unit Gaussian data. The K-quants' searches
     * make no per-element promise; these bounds are 1.5x the uniform
     * quantizer's step / sqrt(12) for their bits over the range of their
     * sub-blocks (about 4 sigma for 32 values, 3.5 for 16). */
    double rel_bound = 1.0;
    switch (wi->type) {
      case ER_GGML_F32: rel_bound = 0; break;
      case ER_GGML_F16: rel_bound = 1e-3; break;
      case ER_GGML_BF16: rel_bound = 6e-3; break;
      case ER_GGML_Q8_0: rel_bound = 0.01; break;
      case ER_GGML_Q4_0: case ER_GGML_Q4_1: case ER_GGML_Q4_K: rel_bound = 0.12; break;
      case ER_GGML_Q5_0: case ER_GGML_Q5_1: case ER_GGML_Q5_K: rel_bound = 0.06; break;
      case ER_GGML_Q6_K: rel_bound = 0.03; break;
      case ER_GGML_Q3_K: rel_bound = 0.22; break;
      case ER_GGML_Q2_K: rel_bound = 0.5; break;
      default: break;
    }
    const double rel = sqrt(se / sx);
    printf("  %-5s relative RMS error %.5f (bound %.3f), max error %.4g\n", er__ggml_type_name(wi->type), rel,
           rel_bound, worst);
    CHECK(rel <= rel_bound);
  }
  /* Idempotent where the format is closed under its own rounding: Q8_0,
   * F16, BF16 quantize their own dequantized values to the same bytes. */
  static const uint32_t closed[] = {ER_GGML_Q8_0, ER_GGML_F16, ER_GGML_BF16};
  for (size_t i = 0; i < ER_ARRAY_LEN(closed); i++) {
    const size_t rb = er__qb_row_bytes(closed[i], k);
    er__qb_quantize_row(closed[i], x, q, k);
    er__qb_dequantize_row(closed[i], q, y, k);
    er__qb_quantize_row(closed[i], y, q2, k);
    CHECK(memcmp(q, q2, rb) == 0);
  }
  /* An all-zero row quantizes to zero scales and dequantizes to zeros. */
  memset(x, 0, (size_t)k * sizeof(float));
  for (size_t it = 0; it < ER_ARRAY_LEN(WTYPES); it++) {
    er__qb_quantize_row(WTYPES[it].type, x, q, k);
    er__qb_dequantize_row(WTYPES[it].type, q, y, k);
    bool zero = true;
    for (int64_t i = 0; i < k; i++) zero = zero && y[i] == 0.0f;
    CHECK(zero);
  }
  free(x);
  free(y);
  free(q);
  free(q2);
}

/* ======================================================================== */
/* Geometry and dispatch                                                     */
/* ======================================================================== */

static void test_geometry(void) {
  CHECK(er__qb_row_bytes(ER_GGML_Q4_0, 64) == 36);
  CHECK(er__qb_row_bytes(ER_GGML_Q4_1, 576) == 360);
  CHECK(er__qb_row_bytes(ER_GGML_Q8_0, 576) == 612);
  CHECK(er__qb_row_bytes(ER_GGML_Q4_K, 512) == 288);
  CHECK(er__qb_row_bytes(ER_GGML_Q6_K, 256) == 210);
  CHECK(er__qb_row_bytes(ER_GGML_F16, 7) == 14);
  CHECK(er__qb_row_bytes(ER_GGML_Q4_0, 33) == 0);  /* not a whole block */
  CHECK(er__qb_row_bytes(12345, 32) == 0);         /* unknown type */
  CHECK(er__qb_row_bytes(ER_GGML_Q8_0, -32) == 0);
  CHECK(er__qb_act_type(ER_GGML_Q4_0) == ER_GGML_Q8_0);
  CHECK(er__qb_act_type(ER_GGML_Q5_1) == ER_GGML_Q8_1);
  CHECK(er__qb_act_type(ER_GGML_Q6_K) == ER_GGML_Q8_K);
  CHECK(er__qb_act_type(ER_GGML_BF16) == ER_GGML_F32);
  CHECK(er__qb_act_type(ER_GGML_IQ2_XXS) == UINT32_MAX);
  CHECK(er__qb_act_row_bytes(ER_GGML_Q8_K, 512) == 584);
  CHECK(er__qb_act_row_bytes(ER_GGML_F32, 10) == 40);
  CHECK(er__qb_act_row_bytes(ER_GGML_Q4_0, 32) == 0);
  CHECK(!er__qb_can_dequantize(ER_GGML_IQ4_XS) && !er__qb_can_quantize(ER_GGML_MXFP4));
  for (size_t i = 0; i < ER_ARRAY_LEN(WTYPES); i++) {
    int64_t be, bb;
    CHECK(er__ggml_type_geometry(WTYPES[i].type, &be, &bb) && be == WTYPES[i].be && bb == WTYPES[i].bb);
  }
}

static void test_dispatch(void) {
  for (size_t i = 0; i < ER_ARRAY_LEN(WTYPES); i++) {
    const er_qb_kernel *ref = er__qb_kernel(WTYPES[i].type, true), *best = er__qb_kernel(WTYPES[i].type, false);
    CHECK(ref && strstr(ref->name, "__ref"));
    CHECK(best && best->wtype == WTYPES[i].type && best->atype == er__qb_act_type(WTYPES[i].type));
    CHECK(ref && ref->atype == er__qb_act_type(WTYPES[i].type));
    if (best) printf("  %-5s -> %s\n", er__ggml_type_name(WTYPES[i].type), best->name);
  }
  CHECK(er__qb_kernel(ER_GGML_IQ2_XXS, false) == NULL);
  /* ER_FORCE_REFERENCE picks the reference. */
  setenv("ER_FORCE_REFERENCE", "1", 1);
  const er_qb_kernel *forced = er__qb_kernel(ER_GGML_Q4_0, false);
  CHECK(forced && strstr(forced->name, "__ref"));
  unsetenv("ER_FORCE_REFERENCE");
  /* Every kernel's name says its types; each weight type has at most one
   * kernel per ISA. */
  for (const er_qb_kernel *const *kp = er__qb_kernels_all(); *kp; kp++) {
    char prefix[32];
    const char *wn = er__ggml_type_name((*kp)->wtype), *an = er__ggml_type_name((*kp)->atype);
    CHECK(wn && an);
    if (!wn || !an) continue;
    snprintf(prefix, sizeof prefix, "%s_%s_gemm", wn, an);
    for (char *c = prefix; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    CHECK(strncmp((*kp)->name, prefix, strlen(prefix)) == 0);
  }
}

/* The importance-weighted quantizers (qblock-imatrix.c): on rows whose
 * columns matter very unequally (a few hundred times for one column in
 * eight, as activation outliers make them), the error weighted by that
 * importance must be well below plain rounding's, for every weighted type;
 * with no importance values the result is plain rounding byte for byte;
 * and every weighted block decodes to values within the row's range. */
static void test_weighted(void) {
  const uint32_t types[] = {ER_GGML_Q4_0, ER_GGML_Q4_1, ER_GGML_Q5_0, ER_GGML_Q5_1,
                            ER_GGML_Q4_K, ER_GGML_Q5_K, ER_GGML_Q6_K};
  const int64_t k = 1024, rows = 32;
  float *x = malloc((size_t)k * sizeof(float)), *y = malloc((size_t)k * sizeof(float)), *qw = malloc((size_t)k * 4);
  uint8_t *a = malloc(er__qb_row_bytes(ER_GGML_F32, k)), *b = malloc(er__qb_row_bytes(ER_GGML_F32, k));
  if (!x || !y || !qw || !a || !b) exit(2);
  for (int64_t j = 0; j < k; j++) qw[j] = (rng_u64() % 8 == 0) ? 300.0f * (float)(0.5 + rng_unit()) : 1.0f;
  for (size_t it = 0; it < ER_ARRAY_LEN(types); it++) {
    const uint32_t t = types[it];
    const size_t rb = er__qb_row_bytes(t, k);
    CHECK(er__qb_uses_importance(t));
    double err_plain = 0, err_weighted = 0;
    bool same_without = true, in_range = true;
    for (int64_t r = 0; r < rows; r++) {
      float lo = 0, hi = 0;
      for (int64_t j = 0; j < k; j++) {
        x[j] = rng_gauss() * (r % 3 == 0 ? 0.02f : 1.0f);
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
      }
      er__qb_quantize_row(t, x, a, k);
      er__qb_quantize_row_weighted(t, x, b, k, NULL);
      same_without = same_without && memcmp(a, b, rb) == 0;
      er__qb_dequantize_row(t, a, y, k);
      for (int64_t j = 0; j < k; j++) err_plain += qw[j] * ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
      er__qb_quantize_row_weighted(t, x, b, k, qw);
      er__qb_dequantize_row(t, b, y, k);
      const float slack = 0.1f * (hi - lo);
      for (int64_t j = 0; j < k; j++) {
        err_weighted += qw[j] * ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
        if (!(y[j] >= lo - slack && y[j] <= hi + slack)) in_range = false;
      }
    }
    if (!same_without || !in_range || !(err_weighted < 0.8 * err_plain))
      fprintf(stderr, "  %s: weighted error %.4g vs plain %.4g, same without weights %d, in range %d\n",
              er__ggml_type_name(t), err_weighted, err_plain, same_without, in_range);
    CHECK(same_without);
    CHECK(in_range);
    CHECK(err_weighted < 0.8 * err_plain);
  }
  free(x);
  free(y);
  free(qw);
  free(a);
  free(b);
}

int main(int argc, char **argv) {
  const er_test_case cases[] = {
      {"geometry", test_geometry},
      {"dispatch", test_dispatch},
      {"act_format", test_act_format},
      {"act_quantizers_avx2_equal_reference", test_act_quantizers},
      {"round_trip", test_round_trip},
      {"weighted", test_weighted},
      {"products", test_products},
      {"products_large", test_products_large},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
