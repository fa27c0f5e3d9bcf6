/* qblock-imatrix.c - block quantizers that weigh each column's rounding
 * error by how much it matters: llama.cpp's importance-matrix quantizers
 * (ggml-quants.c, quantize_row_*_impl with quant_weights), so a file
 * quantized with the same importance values has the same bytes as
 * llama-quantize's.
 *
 * The importance of column j is qw[j], the mean square of the activation
 * that multiplies it (src/quant/llm-imatrix.c measures it on calibration
 * text): the expected squared error of the product y = w . x from an error
 * e_j on w_j is sum_j qw[j] e_j^2 when the activations are uncorrelated.
 * The 32-element types and Q4_K / Q5_K use qw[j] * sqrt(sigma2 + x_j^2),
 * ggml's blend with the weight's own magnitude (sigma2 is the row's or
 * super-block's mean square), and fit each block's scale (and minimum) to
 * the weighted error; Q4_K / Q5_K then fit their 6-bit sub-block scales and
 * minimums to the error weighted by each sub-block's total weight
 * (fit_scale_pos); Q6_K fits its 16-element groups to qw itself. */
#include <math.h>
#include <string.h>

#include "kernels/kernel.h"
#include "kernels/qblock.h"

#define QW_MIN(a, b) ((a) < (b) ? (a) : (b))
#define QW_MAX(a, b) ((a) > (b) ? (a) : (b))
#define QW_GROUP_MAX_EPS 1e-15f

/* Round to nearest, ties to even (qblock.c's nearest_int, ggml's). */
static int nearest(float f) {
  float v = f + 12582912.f;
  int32_t i;
  memcpy(&i, &v, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

static float mean_square(const float *x, int64_t n) {
  float s = 0;
  for (int64_t j = 0; j < n; j++) s += x[j] * x[j];
  return s / (float)n;
}

/* w[j] = qw[j] * sqrt(sigma2 + x[j]^2) for n columns. */
static void blend(const float *x, const float *qw, float sigma2, int n, float *w) {
  for (int j = 0; j < n; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* Non-negative values x[0..n) on the levels 0..nmax with one scale,
 * minimizing sum w_i (x_i - s L_i)^2 (ggml's make_qp_quants): the scale
 * that maps the largest value to nmax and eight trial scales around it
 * are scored; then up to five passes move single levels while the
 * least-squares fit improves. Returns the scale; L gets the levels. */
static float fit_scale_pos(int n, int nmax, const float *x, uint8_t *L, const float *w) {
  float max = 0;
  for (int i = 0; i < n; i++) max = QW_MAX(max, x[i]);
  if (max < QW_GROUP_MAX_EPS) {
    memset(L, 0, (size_t)n);
    return 0.0f;
  }
  float iscale = (float)nmax / max;
  for (int i = 0; i < n; i++) L[i] = (uint8_t)nearest(iscale * x[i]);
  float scale = 1 / iscale, best = 0;
  for (int i = 0; i < n; i++) {
    float d = x[i] - scale * (float)L[i];
    best += w[i] * d * d;
  }
  for (int is = -4; is <= 4; is++) {
    if (is == 0) continue;
    float trial_i = (0.1f * (float)is + (float)nmax) / max, trial = 1 / trial_i, err = 0;
    for (int i = 0; i < n; i++) {
      int l = QW_MIN(nmax, nearest(trial_i * x[i]));
      float d = x[i] - trial * (float)l;
      err += w[i] * d * d;
    }
    if (err < best) {
      best = err;
      iscale = trial_i;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; i++) {
    int l = QW_MIN(nmax, nearest(iscale * x[i]));
    L[i] = (uint8_t)l;
    sumlx += w[i] * x[i] * (float)l;
    suml2 += w[i] * (float)l * (float)l;
  }
  for (int pass = 0; pass < 5; pass++) {
    int changed = 0;
    for (int i = 0; i < n; i++) {
      float slx = sumlx - w[i] * x[i] * (float)L[i], sl2 = suml2 - w[i] * (float)L[i] * (float)L[i];
      if (slx > 0 && sl2 > 0) {
        int l = QW_MIN(nmax, nearest(x[i] * sl2 / slx));
        if (l != L[i]) {
          slx += w[i] * x[i] * (float)l;
          sl2 += w[i] * (float)l * (float)l;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = (uint8_t)l;
            sumlx = slx;
            suml2 = sl2;
            changed++;
          }
        }
      }
    }
    if (!changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- the 32-element types ------------------------------------------------ */

/* Q4_0 / Q5_0: a symmetric scale per block on -half..half-1. */
static void sym_blocks(uint32_t type, const float *x, void *dst, int64_t k, const float *qw) {
  const int half = type == ER_GGML_Q4_0 ? 8 : 16;
  const float sigma2 = mean_square(x, k);
  float w[ER_QK];
  int8_t L[ER_QK];
  for (int64_t ib = 0; ib < k / ER_QK; ib++) {
    const float *xb = x + ib * ER_QK;
    blend(xb, qw + ib * ER_QK, sigma2, ER_QK, w);
    const uint16_t d = er__f32_to_f16(er__qb_fit_scale_sym(ER_QK, half, xb, L, w));
    if (type == ER_GGML_Q4_0) {
      er_block_q4_0 *b = (er_block_q4_0 *)dst + ib;
      b->d = d;
      for (int j = 0; j < ER_QK / 2; j++) b->qs[j] = (uint8_t)(L[j] | (L[j + ER_QK / 2] << 4));
    } else {
      er_block_q5_0 *b = (er_block_q5_0 *)dst + ib;
      uint32_t qh = 0;
      b->d = d;
      for (int j = 0; j < ER_QK / 2; j++) {
        b->qs[j] = (uint8_t)((L[j] & 0xF) | ((L[j + ER_QK / 2] & 0xF) << 4));
        qh |= (uint32_t)((L[j] >> 4) & 1) << j;
        qh |= (uint32_t)((L[j + ER_QK / 2] >> 4) & 1) << (j + ER_QK / 2);
      }
      memcpy(b->qh, &qh, sizeof qh);
    }
  }
}

/* Q4_1 / Q5_1: a scale and a minimum per block on 0..nmax. */
static void min_blocks(uint32_t type, const float *x, void *dst, int64_t k, const float *qw) {
  const int nmax = type == ER_GGML_Q4_1 ? 15 : 31;
  const float sigma2 = mean_square(x, k);
  float w[ER_QK], neg_min;
  uint8_t L[ER_QK], Laux[ER_QK];
  for (int64_t ib = 0; ib < k / ER_QK; ib++) {
    const float *xb = x + ib * ER_QK;
    blend(xb, qw + ib * ER_QK, sigma2, ER_QK, w);
    const float d = er__qb_fit_scale_min(ER_QK, nmax, xb, w, L, &neg_min, Laux, -0.9f, 0.05f, 36, false);
    if (type == ER_GGML_Q4_1) {
      er_block_q4_1 *b = (er_block_q4_1 *)dst + ib;
      b->d = er__f32_to_f16(d);
      b->m = er__f32_to_f16(-neg_min);
      for (int j = 0; j < ER_QK / 2; j++) b->qs[j] = (uint8_t)(L[j] | (L[j + ER_QK / 2] << 4));
    } else {
      er_block_q5_1 *b = (er_block_q5_1 *)dst + ib;
      uint32_t qh = 0;
      b->d = er__f32_to_f16(d);
      b->m = er__f32_to_f16(-neg_min);
      for (int j = 0; j < ER_QK / 2; j++) {
        b->qs[j] = (uint8_t)((L[j] & 0xF) | ((L[j + ER_QK / 2] & 0xF) << 4));
        qh |= (uint32_t)((L[j] >> 4) & 1) << j;
        qh |= (uint32_t)((L[j + ER_QK / 2] >> 4) & 1) << (j + ER_QK / 2);
      }
      memcpy(b->qh, &qh, sizeof qh);
    }
  }
}

/* ---- Q4_K and Q5_K ------------------------------------------------------- */

/* One super-block: the 8 sub-block fits, their 6-bit scales and minimums
 * (packed as Q4_K / Q5_K store them), then every level again against the
 * rounded scales, into L (0..nmax). */
static void k4_superblock(const float *x, const float *qw, int nmax, uint8_t packed[12], uint16_t *d,
                          uint16_t *dmin, uint8_t L[ER_QK_K]) {
  float w[32], sw[8], scales[8], mins[8];
  uint8_t Laux[32], Ls[8], Lm[8];
  const float sigma2 = 2 * mean_square(x, ER_QK_K);
  for (int j = 0; j < 8; j++) {
    blend(x + 32 * j, qw + 32 * j, sigma2, 32, w);
    sw[j] = 0;
    for (int l = 0; l < 32; l++) sw[j] += w[l];
    scales[j] = er__qb_fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
  }
  const float d_block = fit_scale_pos(8, 63, scales, Ls, sw);
  const float m_block = fit_scale_pos(8, 63, mins, Lm, sw);
  memset(packed, 0, 12);
  for (int j = 0; j < 8; j++) {
    const uint8_t ls = QW_MIN(63, Ls[j]), lm = QW_MIN(63, Lm[j]);
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
      packed[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  *d = er__f32_to_f16(d_block);
  *dmin = er__f32_to_f16(m_block);
  for (int j = 0; j < 8; j++) {
    uint8_t sc, m;
    er__qb_k4_scale_min(j, packed, &sc, &m);
    const float dj = er__f16_to_f32(*d) * (float)sc;
    if (dj == 0.0f) continue;
    const float dm = er__f16_to_f32(*dmin) * (float)m;
    for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)QW_MAX(0, QW_MIN(nmax, nearest((x[32 * j + i] + dm) / dj)));
  }
}

static void k4_rows(uint32_t type, const float *x, void *dst, int64_t k, const float *qw) {
  uint8_t L[ER_QK_K];
  for (int64_t i = 0; i < k / ER_QK_K; i++, x += ER_QK_K, qw += ER_QK_K) {
    if (type == ER_GGML_Q4_K) {
      er_block_q4_k *b = (er_block_q4_k *)dst + i;
      k4_superblock(x, qw, 15, b->scales, &b->d, &b->dmin, L);
      uint8_t *q = b->qs;
      for (int j = 0; j < ER_QK_K; j += 64, q += 32)
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    } else {
      er_block_q5_k *b = (er_block_q5_k *)dst + i;
      k4_superblock(x, qw, 31, b->scales, &b->d, &b->dmin, L);
      uint8_t *qh = b->qh, *ql = b->qs, m1 = 1, m2 = 2;
      memset(qh, 0, ER_QK_K / 8);
      for (int n = 0; n < ER_QK_K; n += 64, ql += 32) {
        for (int j = 0; j < 32; j++) {
          int l1 = L[n + j], l2 = L[n + j + 32];
          if (l1 > 15) {
            l1 -= 16;
            qh[j] |= m1;
          }
          if (l2 > 15) {
            l2 -= 16;
            qh[j] |= m2;
          }
          ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
      }
    }
  }
}

/* ---- Q6_K ------------------------------------------------------------------ */

static void q6k_rows(const float *x, er_block_q6_k *b, int64_t k, const float *qw) {
  int8_t L[ER_QK_K];
  float scales[16];
  for (int64_t i = 0; i < k / ER_QK_K; i++, x += ER_QK_K, qw += ER_QK_K) {
    float max_scale = 0, max_abs = 0;
    for (int ib = 0; ib < 16; ib++) {
      scales[ib] = er__qb_fit_scale_sym(16, 32, x + 16 * ib, L + 16 * ib, qw + 16 * ib);
      if (fabsf(scales[ib]) > max_abs) {
        max_abs = fabsf(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs < QW_GROUP_MAX_EPS) {
      memset(&b[i], 0, sizeof b[i]);
      continue;
    }
    const float iscale = -128.f / max_scale;
    b[i].d = er__f32_to_f16(1 / iscale);
    for (int ib = 0; ib < 16; ib++) b[i].scales[ib] = (int8_t)QW_MIN(127, nearest(iscale * scales[ib]));
    for (int j = 0; j < 16; j++) {
      const float d = er__f16_to_f32(b[i].d) * (float)b[i].scales[j];
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ii++)
        L[16 * j + ii] = (int8_t)(QW_MAX(-32, QW_MIN(31, nearest(x[16 * j + ii] / d))) + 32);
    }
    uint8_t *ql = b[i].ql, *qh = b[i].qh;
    for (int j = 0; j < ER_QK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; l++) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

bool er__qb_uses_importance(uint32_t type) {
  switch (type) {
    case ER_GGML_Q4_0: case ER_GGML_Q4_1: case ER_GGML_Q5_0: case ER_GGML_Q5_1:
    case ER_GGML_Q4_K: case ER_GGML_Q5_K: case ER_GGML_Q6_K:
      return true;
    default:
      return false;
  }
}

void er__qb_quantize_row_weighted(uint32_t type, const float *src, void *dst, int64_t k, const float *qw) {
  if (!qw || !er__qb_uses_importance(type)) {
    er__qb_quantize_row(type, src, dst, k);
    return;
  }
  switch (type) {
    case ER_GGML_Q4_0: case ER_GGML_Q5_0: ER_ASSERT(k % ER_QK == 0); sym_blocks(type, src, dst, k, qw); return;
    case ER_GGML_Q4_1: case ER_GGML_Q5_1: ER_ASSERT(k % ER_QK == 0); min_blocks(type, src, dst, k, qw); return;
    case ER_GGML_Q4_K: case ER_GGML_Q5_K: ER_ASSERT(k % ER_QK_K == 0); k4_rows(type, src, dst, k, qw); return;
    case ER_GGML_Q6_K: ER_ASSERT(k % ER_QK_K == 0); q6k_rows(src, dst, k, qw); return;
    default: ER_ASSERT(!"er__qb_quantize_row_weighted: unreachable");
  }
}
