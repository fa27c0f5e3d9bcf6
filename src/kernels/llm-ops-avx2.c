/* llm-ops-avx2.c - the decoder-step kernels on AVX2 + FMA + F16C. Called
 * only when er__cpu_features() reports all three. Cached keys and values
 * stay fp16 (or Q8_0) in memory and widen in registers: attention reads
 * the cache once per query-head group, the g heads of a group sharing each
 * loaded key and value (grouped-query attention). */
#define ER_SIMD_AVX2 1
#include "kernels/simd.h"
#include "kernels/vmath.h"

#include <math.h>

#include "kernels/llm-ops.h"
#include "kernels/qblock.h"

/* The kernels below handle head dims that are multiples of 8 with at most
 * this many query heads a group; anything else goes to the reference. */
#define GROUP_MAX 8
#define HD_MAX 256

static void rmsnorm_avx2(const float *x, const float *w, float *y, int64_t n, float eps) {
  /* The sum of squares in double, as the reference: four double chains. */
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i), sq = _mm256_mul_ps(v, v);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  double lanes[4];
  _mm256_storeu_pd(lanes, _mm256_add_pd(s0, s1));
  double sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; i++) sum += (double)(x[i] * x[i]);
  const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
  for (; i < n; i++) y[i] = x[i] * scale * w[i];
}

static void silu_mul_avx2(const float *g, const float *u, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) v_st(y + i, v_mul(v_silu(v_ld(g + i)), v_ld(u + i)));
  for (; i < n; i++) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* hd values of a cached row, widened: 8 floats per vector. */
static inline __attribute__((always_inline)) void load_row(const void *row, bool q8, int nv, __m256 *out) {
  if (!q8) {
    const uint16_t *h = row;
    for (int c = 0; c < nv; c++) out[c] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8 * c)));
    return;
  }
  const er_block_q8_0 *b = row;
  for (int c = 0; c < nv; c++) {
    const er_block_q8_0 *blk = &b[c / 4];
    __m256 d = _mm256_set1_ps(_cvtsh_ss(blk->d));
    __m128i q = _mm_loadl_epi64((const __m128i *)(blk->qs + 8 * (c % 4)));
    out[c] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
  }
}

static void scores_avx2(const float *q, int g, int hd, const void *k, size_t k_stride, bool q8, int64_t n, float scale,
                        float *s, int64_t lds) {
  if (hd % 8 != 0 || hd > HD_MAX || g > GROUP_MAX) {
    er__llm_ops_ref.scores(q, g, hd, k, k_stride, q8, n, scale, s, lds);
    return;
  }
  const int nv = hd / 8;
  /* The queries as fp16 rounds them, once (see llm-ops.h). */
  float qr[GROUP_MAX * HD_MAX];
  for (int i = 0; i < g * hd; i += 8) {
    __m256 v = _mm256_loadu_ps(q + i);
    _mm256_storeu_ps(qr + i, q8 ? v : _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
  }
  for (int64_t t = 0; t < n; t++) {
    __m256 kr[HD_MAX / 8];
    load_row((const uint8_t *)k + (size_t)t * k_stride, q8, nv, kr);
    for (int j = 0; j < g; j++) {
      const float *qj = qr + j * hd;
      __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(qj), kr[0]), a1 = _mm256_setzero_ps();
      for (int c = 1; c < nv; c++) {
        if (c & 1) a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qj + 8 * c), kr[c], a1);
        else a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qj + 8 * c), kr[c], a0);
      }
      s[j * lds + t] = v_hsum(_mm256_add_ps(a0, a1)) * scale;
    }
  }
}

static void mix_avx2(const float *p, int64_t ldp, int g, int hd, const void *v, size_t v_stride, bool q8, int64_t n,
                     float *o) {
  if (hd % 8 != 0 || hd > HD_MAX || g > GROUP_MAX) {
    er__llm_ops_ref.mix(p, ldp, g, hd, v, v_stride, q8, n, o);
    return;
  }
  const int nv = hd / 8;
  /* Each head's accumulators stay in registers across the whole sequence
   * when they fit (hd <= 64: 8 vectors); else they live in o. */
  for (int j = 0; j < g; j++)
    for (int i = 0; i < hd; i++) o[j * hd + i] = 0.0f;
  for (int64_t t = 0; t < n; t++) {
    __m256 vr[HD_MAX / 8];
    load_row((const uint8_t *)v + (size_t)t * v_stride, q8, nv, vr);
    for (int j = 0; j < g; j++) {
      const float pt = p[j * ldp + t];
      const __m256 w = _mm256_set1_ps(q8 ? pt : _cvtsh_ss(_cvtss_sh(pt, _MM_FROUND_TO_NEAREST_INT)));
      float *oj = o + j * hd;
      for (int c = 0; c < nv; c++) _mm256_storeu_ps(oj + 8 * c, _mm256_fmadd_ps(w, vr[c], _mm256_loadu_ps(oj + 8 * c)));
    }
  }
}

static bool softmax_avx2(float *s, int g, int64_t n, int64_t lds) {
  for (int j = 0; j < g; j++) {
    float *r = s + j * lds;
    float mx = -INFINITY;
    for (int64_t t = 0; t < n; t++) {
      if (isnan(r[t])) return false;
      if (r[t] > mx) mx = r[t];
    }
    if (mx == -INFINITY) return false;
    const vf vmx = v_set(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
      vf e = v_exp(v_sub(v_ld(r + t), vmx));
      v_st(r + t, e);
      s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
      s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(s0, s1));
    double sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; t < n; t++) {
      r[t] = expf(r[t] - mx);
      sum += r[t];
    }
    const vf inv = v_set((float)(1.0 / sum));
    for (t = 0; t + 8 <= n; t += 8) v_st(r + t, v_mul(v_ld(r + t), inv));
    for (; t < n; t++) r[t] *= (float)(1.0 / sum);
  }
  return true;
}

const er_llm_ops er__llm_ops_avx2 = {"avx2", rmsnorm_avx2, silu_mul_avx2, scores_avx2, mix_avx2, softmax_avx2};
