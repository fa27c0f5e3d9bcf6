/* qblock-quant.c - the weight quantizers of the block types: the
 * 32-element types (ggml's quantize_row_*_ref) and the K-quants
 * (quantize_row_q*_K_ref), with and without an importance matrix,
 * bit-identical to ggml's reference quantizers (see qblock.c). */
#include "kernels/qblock-ref.h"

/* Quantize: the 32-element types (ggml's quantize_row_*_ref)                */
/* ======================================================================== */

/* The first element of largest magnitude, with its sign (ggml picks the
 * scale's sign from it, so that element lands exactly on the end of the
 * range: -8 for Q4_0, -16 for Q5_0). */
static float signed_absmax(const float *x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; j++) {
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  return max;
}

static void quant_q4_0(const float *x, er_block_q4_0 *b, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK) {
    const float d = signed_absmax(x, ER_QK) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    for (int j = 0; j < ER_QK / 2; j++) {
      /* x * id is in [-8, 8]: + 8.5 and truncation round it half up. */
      const int q0 = QB_MIN(15, (int8_t)(x[j] * id + 8.5f));
      const int q1 = QB_MIN(15, (int8_t)(x[j + ER_QK / 2] * id + 8.5f));
      b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}

/* The range of a block (the _1 types store its minimum). */
static void block_min_max(const float *x, int n, float *min_out, float *max_out) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < n; j++) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  *min_out = min;
  *max_out = max;
}

static void quant_q4_1(const float *x, er_block_q4_1 *b, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK) {
    float min, max;
    block_min_max(x, ER_QK, &min, &max);
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    b[i].m = f2h(min);
    for (int j = 0; j < ER_QK / 2; j++) {
      const int q0 = QB_MIN(15, (int8_t)((x[j] - min) * id + 0.5f));
      const int q1 = QB_MIN(15, (int8_t)((x[j + ER_QK / 2] - min) * id + 0.5f));
      b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}

/* Packs 32 five-bit quants: low nibbles as Q4 does, fifth bits into qh. */
static void pack_q5(const int q[ER_QK], uint8_t qs[ER_QK / 2], uint8_t qh4[4]) {
  uint32_t qh = 0;
  for (int j = 0; j < ER_QK / 2; j++) {
    qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + ER_QK / 2] & 0xF) << 4));
    qh |= (uint32_t)((q[j] >> 4) & 1) << j;
    qh |= (uint32_t)((q[j + ER_QK / 2] >> 4) & 1) << (j + ER_QK / 2);
  }
  memcpy(qh4, &qh, sizeof qh);
}

static void quant_q5_0(const float *x, er_block_q5_0 *b, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK) {
    const float d = signed_absmax(x, ER_QK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    int q[ER_QK];
    for (int j = 0; j < ER_QK; j++) q[j] = QB_MIN(31, (int8_t)(x[j] * id + 16.5f));
    pack_q5(q, b[i].qs, b[i].qh);
  }
}

static void quant_q5_1(const float *x, er_block_q5_1 *b, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK) {
    float min, max;
    block_min_max(x, ER_QK, &min, &max);
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    b[i].m = f2h(min);
    int q[ER_QK];
    /* ggml does not clamp here; (x - min) * id + 0.5 stays below 32 for
     * every finite block, so the clamp changes nothing and keeps a stray
     * 32 from wrapping to 0 (gguf-py clamps too). */
    for (int j = 0; j < ER_QK; j++) q[j] = QB_MIN(31, (uint8_t)((x[j] - min) * id + 0.5f));
    pack_q5(q, b[i].qs, b[i].qh);
  }
}

/* Q8_0 and Q8_1 as files hold them: the quants of ggml's reference, x * (1
 * / d) rounded half away from zero. */
static void quant_q8_0(const float *x, er_block_q8_0 *b, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK) {
    const float d = absmax(x, ER_QK) / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    for (int j = 0; j < ER_QK; j++) b[i].qs[j] = (int8_t)roundf(x[j] * id);
  }
}

static void quant_q8_1(const float *x, er_block_q8_1 *b, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK) {
    const float d = absmax(x, ER_QK) / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    b[i].d = f2h(d);
    for (int j = 0; j < ER_QK; j++) {
      b[i].qs[j] = (int8_t)roundf(x[j] * id);
      sum += b[i].qs[j];
    }
    b[i].s = f2h((float)sum * d);
  }
}

/* ======================================================================== */
/* Quantize: the K-quants (ggml's quantize_row_q*_K_ref)                     */
/* ======================================================================== */

/* Scale and minimum of a group of n values on the levels 0..nmax,
 * minimizing the weighted error (squared, or absolute when use_mad), by
 * ggml's search (make_qkx2_quants): the plain min/max fit, then nstep + 1
 * trial scales (nmax + rmin + rdelta * is) / (max - min), each followed by
 * the weighted least-squares scale and minimum for its levels, keeping the
 * best. L gets the levels, *neg_min the minimum negated (>= 0); returns
 * the scale. */
float er__qb_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, uint8_t *Laux,
                           float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; i++) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    memset(L, 0, (size_t)n);
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = (float)nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; i++) {
    int l = nearest_int(iscale * (x[i] - min));
    L[i] = (uint8_t)QB_MAX(0, QB_MIN(nmax, l));
    float diff = scale * (float)L[i] + min - x[i];
    diff = use_mad ? fabsf(diff) : diff * diff;
    best_error += w[i] * diff;
  }
  if (nstep < 1) {
    *neg_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; is++) {
    iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; i++) {
      int l = nearest_int(iscale * (x[i] - min));
      l = QB_MAX(0, QB_MIN(nmax, l));
      Laux[i] = (uint8_t)l;
      sum_l += w[i] * (float)l;
      sum_l2 += w[i] * (float)l * (float)l;
      sum_xl += w[i] * (float)l * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; i++) {
        float diff = this_scale * (float)Laux[i] + this_min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        cur_error += w[i] * diff;
      }
      if (cur_error < best_error) {
        memcpy(L, Laux, (size_t)n);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

/* A symmetric scale for n values on the levels -nmax..nmax-1 (stored as
 * L + nmax), weighting each value by qw[i] or, with qw NULL, its square:
 * the scale that puts the largest magnitude on -nmax, then 18 trial scales
 * around it, each with its least-squares scale, keeping the best (ggml's
 * make_qx_quants with rmse_type 1; Q6_K uses it without weights). */
float er__qb_fit_scale_sym(int n, int nmax, const float *x, int8_t *L, const float *qw) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; i++) {
    float ax = fabsf(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < QB_GROUP_MAX_EPS) {
    memset(L, 0, (size_t)n);
    return 0.0f;
  }
  float iscale = (float)-nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; i++) {
    int l = nearest_int(iscale * x[i]);
    l = QB_MAX(-nmax, QB_MIN(nmax - 1, l));
    L[i] = (int8_t)(l + nmax);
    float w = qw ? qw[i] : x[i] * x[i];
    sumlx += w * x[i] * (float)l;
    suml2 += w * (float)l * (float)l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; is++) {
    if (is == 0) continue;
    iscale = -((float)nmax + 0.1f * (float)is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; i++) {
      int l = nearest_int(iscale * x[i]);
      l = QB_MAX(-nmax, QB_MIN(nmax - 1, l));
      float w = qw ? qw[i] : x[i] * x[i];
      sumlx += w * x[i] * (float)l;
      suml2 += w * (float)l * (float)l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        L[i] = (int8_t)(nmax + QB_MAX(-nmax, QB_MIN(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

/* Q3_K's per-group fit (ggml's make_q3_quants with do_rmse): levels
 * -nmax..nmax-1 (returned as L + nmax), then up to five passes that move
 * one level at a time while the weighted fit improves. */
static float fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; i++) {
    float ax = fabsf(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < QB_GROUP_MAX_EPS) {
    memset(L, 0, (size_t)n);
    return 0.0f;
  }
  float iscale = (float)-nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; i++) {
    int l = nearest_int(iscale * x[i]);
    l = QB_MAX(-nmax, QB_MIN(nmax - 1, l));
    L[i] = (int8_t)l;
    float w = x[i] * x[i];
    sumlx += w * x[i] * (float)l;
    suml2 += w * (float)l * (float)l;
  }
  for (int itry = 0; itry < 5; itry++) {
    int n_changed = 0;
    for (int i = 0; i < n; i++) {
      float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * (float)L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * (float)L[i] * (float)L[i];
        int new_l = nearest_int(x[i] * sl2 / slx);
        new_l = QB_MAX(-nmax, QB_MIN(nmax - 1, new_l));
        if (new_l != L[i]) {
          slx += w * x[i] * (float)new_l;
          sl2 += w * (float)new_l * (float)new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = (int8_t)new_l;
            sumlx = slx;
            suml2 = sl2;
            n_changed++;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Packs 2-bit levels of 256 elements: per 128, element 32 s + l at bits
 * 2s of byte l (Q2_K and Q3_K). */
static void pack_2bit(const uint8_t L[ER_QK_K], uint8_t qs[ER_QK_K / 4]) {
  for (int j = 0; j < ER_QK_K; j += 128) {
    for (int l = 0; l < 32; l++) {
      qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

static void quant_q2_k(const float *x, er_block_q2_k *b, int64_t nb) {
  uint8_t L[ER_QK_K], Laux[16];
  float w[16], mins[16], scales[16];
  const float q4scale = 15.f;
  for (int64_t i = 0; i < nb; i++, x += ER_QK_K) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; j++) {
      for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
      scales[j] = er__qb_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      float iscale = q4scale / max_scale;
      for (int j = 0; j < 16; j++) b[i].scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
      b[i].d = f2h(max_scale / q4scale);
    } else {
      memset(b[i].scales, 0, sizeof b[i].scales);
      b[i].d = f2h(0.f);
    }
    if (max_min > 0) {
      float iscale = q4scale / max_min;
      for (int j = 0; j < 16; j++) b[i].scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
      b[i].dmin = f2h(max_min / q4scale);
    } else {
      b[i].dmin = f2h(0.f);
    }
    for (int j = 0; j < 16; j++) {
      const float d = h2f(b[i].d) * (float)(b[i].scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = h2f(b[i].dmin) * (float)(b[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ii++) {
        int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = (uint8_t)QB_MAX(0, QB_MIN(3, l));
      }
    }
    pack_2bit(L, b[i].qs);
  }
}

static void quant_q3_k(const float *x, er_block_q3_k *b, int64_t nb) {
  int8_t L[ER_QK_K];
  float scales[16];
  for (int64_t i = 0; i < nb; i++, x += ER_QK_K) {
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
      scales[j] = fit_scale_q3(16, 4, x + 16 * j, L + 16 * j);
      float scale = fabsf(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    memset(b[i].scales, 0, sizeof b[i].scales);
    if (max_scale != 0.0f) {
      float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; j++) {
        int8_t l = (int8_t)nearest_int(iscale * scales[j]);
        l = (int8_t)(QB_MAX(-32, QB_MIN(31, l)) + 32);
        if (j < 8) {
          b[i].scales[j] = (uint8_t)(l & 0xF);
        } else {
          b[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
        }
        l = (int8_t)(l >> 4);
        b[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
      }
      b[i].d = f2h(1 / iscale);
    } else {
      b[i].d = f2h(0.f);
    }
    int sc[16];
    er__qbk_q3k_scales(b[i].scales, sc);
    for (int j = 0; j < 16; j++) {
      const float d = h2f(b[i].d) * (float)sc[j];
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ii++) {
        int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = (int8_t)(QB_MAX(-4, QB_MIN(3, l)) + 4);
      }
    }
    /* The high bit of element e goes to bit e / 32 of hmask[e % 32]. */
    memset(b[i].hmask, 0, sizeof b[i].hmask);
    uint8_t L2[ER_QK_K];
    for (int e = 0; e < ER_QK_K; e++) {
      int l = L[e];
      if (l > 3) {
        b[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
        l -= 4;
      }
      L2[e] = (uint8_t)l;
    }
    pack_2bit(L2, b[i].qs);
  }
}

/* The 8 scales and minimums of a Q4_K / Q5_K super-block: the largest of
 * each maps to 63, each stored in 6 bits (k4_scale_min's packing), and the
 * two super-block scales as fp16. */
static void pack_k4_scales(const float scales[8], const float mins[8], float max_scale, float max_min,
                           uint8_t packed[12], uint16_t *d, uint16_t *dmin) {
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; j++) {
    uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
    uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
    ls = QB_MIN(63, ls);
    lm = QB_MIN(63, lm);
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
      packed[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  *d = f2h(max_scale / 63.f);
  *dmin = f2h(max_min / 63.f);
}

/* The shared part of Q4_K and Q5_K: per sub-block of 32, weights
 * sqrt(mean x^2) + |x|, the scale/minimum fit, the packed scales, then every
 * level again against the rounded scales (levels 0..nmax into L). */
static void quant_k4_levels(const float *x, int nmax, float rmin, int nstep, uint8_t packed[12], uint16_t *d,
                            uint16_t *dmin, uint8_t L[ER_QK_K]) {
  uint8_t Laux[32];
  float w[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; j++) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
    scales[j] = er__qb_fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  pack_k4_scales(scales, mins, max_scale, max_min, packed, d, dmin);
  for (int j = 0; j < 8; j++) {
    uint8_t sc, m;
    er__qb_k4_scale_min(j, packed, &sc, &m);
    const float dj = h2f(*d) * (float)sc;
    if (dj == 0.0f) continue;
    const float dm = h2f(*dmin) * (float)m;
    for (int ii = 0; ii < 32; ii++) {
      int l = nearest_int((x[32 * j + ii] + dm) / dj);
      L[32 * j + ii] = (uint8_t)QB_MAX(0, QB_MIN(nmax, l));
    }
  }
}

static void quant_q4_k(const float *x, er_block_q4_k *b, int64_t nb) {
  uint8_t L[ER_QK_K];
  for (int64_t i = 0; i < nb; i++, x += ER_QK_K) {
    quant_k4_levels(x, 15, -1.f, 20, b[i].scales, &b[i].d, &b[i].dmin, L);
    uint8_t *q = b[i].qs;
    for (int j = 0; j < ER_QK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

static void quant_q5_k(const float *x, er_block_q5_k *b, int64_t nb) {
  uint8_t L[ER_QK_K];
  for (int64_t i = 0; i < nb; i++, x += ER_QK_K) {
    quant_k4_levels(x, 31, -0.5f, 15, b[i].scales, &b[i].d, &b[i].dmin, L);
    uint8_t *qh = b[i].qh, *ql = b[i].qs;
    memset(qh, 0, ER_QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
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

static void quant_q6_k(const float *x, er_block_q6_k *b, int64_t nb) {
  int8_t L[ER_QK_K];
  float scales[16];
  for (int64_t i = 0; i < nb; i++, x += ER_QK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ib++) {
      scales[ib] = er__qb_fit_scale_sym(16, 32, x + 16 * ib, L + 16 * ib, NULL);
      const float abs_scale = fabsf(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < QB_GROUP_MAX_EPS) {
      memset(&b[i], 0, sizeof b[i]);
      continue;
    }
    const float iscale = -128.f / max_scale;
    b[i].d = f2h(1 / iscale);
    for (int ib = 0; ib < 16; ib++) b[i].scales[ib] = (int8_t)QB_MIN(127, nearest_int(iscale * scales[ib]));
    for (int j = 0; j < 16; j++) {
      const float d = h2f(b[i].d) * (float)b[i].scales[j];
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ii++) {
        int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = (int8_t)(QB_MAX(-32, QB_MIN(31, l)) + 32);
      }
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

/* Q8_K (ggml's quantize_row_q8_K_ref): the first element of largest
 * magnitude maps to -127 exactly; ties round to even. An all-zero block
 * gets d = 0 and zero sums (ggml leaves its sums unwritten). */
void er__qbk_quant_q8_k(const float *x, er_block_q8_k *b, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK_K) {
    const float max = signed_absmax(x, ER_QK_K);
    if (max == 0.0f) {
      memset(&b[i], 0, sizeof b[i]);
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < ER_QK_K; j++) b[i].qs[j] = (int8_t)QB_MIN(127, nearest_int(iscale * x[j]));
    for (int j = 0; j < ER_QK_K / 16; j++) {
      int sum = 0;
      for (int l = 0; l < 16; l++) sum += b[i].qs[16 * j + l];
      b[i].bsums[j] = (int16_t)sum;
    }
    b[i].d = 1 / iscale;
  }
}

void er__qb_quantize_row(uint32_t type, const float *src, void *dst, int64_t k) {
  const int64_t nb = k / block_elems(type);
  ER_ASSERT(k >= 0 && k % block_elems(type) == 0);
  switch (type) {
    case ER_GGML_F32: memcpy(dst, src, (size_t)k * sizeof(float)); return;
    case ER_GGML_F16: {
      uint16_t *h = dst;
      for (int64_t i = 0; i < k; i++) h[i] = f2h(src[i]);
      return;
    }
    case ER_GGML_BF16: {
      uint16_t *h = dst;
      for (int64_t i = 0; i < k; i++) h[i] = er__f32_to_bf16(src[i]);
      return;
    }
    case ER_GGML_Q4_0: quant_q4_0(src, dst, nb); return;
    case ER_GGML_Q4_1: quant_q4_1(src, dst, nb); return;
    case ER_GGML_Q5_0: quant_q5_0(src, dst, nb); return;
    case ER_GGML_Q5_1: quant_q5_1(src, dst, nb); return;
    case ER_GGML_Q8_0: quant_q8_0(src, dst, nb); return;
    case ER_GGML_Q8_1: quant_q8_1(src, dst, nb); return;
    case ER_GGML_Q2_K: quant_q2_k(src, dst, nb); return;
    case ER_GGML_Q3_K: quant_q3_k(src, dst, nb); return;
    case ER_GGML_Q4_K: quant_q4_k(src, dst, nb); return;
    case ER_GGML_Q5_K: quant_q5_k(src, dst, nb); return;
    case ER_GGML_Q6_K: quant_q6_k(src, dst, nb); return;
    case ER_GGML_Q8_K: er__qbk_quant_q8_k(src, dst, nb); return;
    default: ER_ASSERT(!"er__qb_quantize_row: type without a quantizer (check er__qb_can_quantize)");
  }
}
