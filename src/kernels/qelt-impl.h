/* qelt-impl.h - the loops of qelt.h, written once and compiled per ISA by
 * qelt-avx512.c and qelt-avx2.c, which define QE_AVX512 or QE_AVX2 before
 * including it. Vector bodies cover whole vectors; the few elements left
 * at the end of a row run the scalar form of the same arithmetic, which is
 * also the reference kernels' (the harness checks all of it bit for bit). */
#include <immintrin.h>
#include <math.h>

#include "kernels/qelt.h"
#include "ops/qfused.h"

/* simd.h for its in-register transpose (v_transpose); its vf and vi are
 * the same types as the ones below. */
#if defined(QE_AVX512)
#define ER_SIMD_AVX512 1
#elif defined(QE_AVX2)
#define ER_SIMD_AVX2 1
#endif
#include "kernels/simd.h"

#if defined(QE_AVX512)
#define VL 16
typedef __m512 vf;
typedef __m512i vi;
static inline vf f_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline void f_st(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf f_set(float x) { return _mm512_set1_ps(x); }
static inline vf f_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf f_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf f_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf f_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf f_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf f_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
static inline vf f_min(vf a, vf b) { return _mm512_min_ps(a, b); }
static inline vf f_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf f_nan_to_zero(vf a) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), a);
}
static inline vi i_ld8(const uint8_t *p, bool is_signed) {
  __m128i b = _mm_loadu_si128((const __m128i *)p);
  return is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
}
/* Bytes p[0], p[2], ..., p[2 * 15] (reads 32 bytes). */
static inline vi i_ld8_even(const uint8_t *p, bool is_signed) {
  __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
  return is_signed ? _mm512_srai_epi32(_mm512_slli_epi32(w, 24), 24) : _mm512_and_si512(w, _mm512_set1_epi32(0xff));
}
#define QE_MASKED 1
static inline __mmask16 mask16(int64_t n) { return (__mmask16)((1u << n) - 1u); }
static inline vi i_ld8_n(const uint8_t *p, int64_t n, bool is_signed) {
  __m128i b = _mm_maskz_loadu_epi8(mask16(n), p);
  return is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
}
/* The first n of bytes p[0], p[2], ... (reads 2n - 1 bytes). */
static inline vi i_ld8_even_n(const uint8_t *p, int64_t n, bool is_signed) {
  __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi8((__mmask32)((1u << (2 * n - 1)) - 1u), p));
  return is_signed ? _mm512_srai_epi32(_mm512_slli_epi32(w, 24), 24) : _mm512_and_si512(w, _mm512_set1_epi32(0xff));
}
static inline vf f_ld_n(const float *p, int64_t n) { return _mm512_maskz_loadu_ps(mask16(n), p); }
/* v with lanes n and up (n <= VL) set to 0. */
static inline vf f_keep(vf v, int64_t n) { return _mm512_maskz_mov_ps(mask16(n), v); }
static inline void f_st_n(float *p, vf v, int64_t n) { _mm512_mask_storeu_ps(p, mask16(n), v); }
static inline void i_st_n(int32_t *p, vi v, int64_t n) { _mm512_mask_storeu_epi32(p, mask16(n), v); }
static inline vi i_set(int32_t x) { return _mm512_set1_epi32(x); }
static inline vi i_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
static inline vi i_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
static inline vi i_clamp(vi a, vi lo, vi hi) { return _mm512_min_epi32(_mm512_max_epi32(a, lo), hi); }
static inline vf i2f(vi a) { return _mm512_cvtepi32_ps(a); }
static inline vi f2i_trunc(vf a) { return _mm512_cvttps_epi32(a); }
static inline vi f2i_rhe(vf a) { return _mm512_cvt_roundps_epi32(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline void i_st(int32_t *p, vi v) { _mm512_storeu_si512((void *)p, v); }
static inline vi i_ld(const int32_t *p) { return _mm512_loadu_si512((const void *)p); }
static inline void st8(uint8_t *p, vi v) { _mm512_mask_cvtepi32_storeu_epi8(p, (__mmask16)0xffff, v); }
/* Two vectors of values already in the 8-bit range, stored one after the
 * other. */
static inline void st8x2(uint8_t *p, vi a, vi b, bool is_signed) {
  ER_UNUSED(is_signed);
  st8(p, a);
  st8(p + VL, b);
}
#define BL 64 /* bytes per vector for byte-wise max */
static inline void max_bytes(uint8_t *y, const uint8_t *x, bool is_signed) {
  __m512i a = _mm512_loadu_si512((const void *)y), b = _mm512_loadu_si512((const void *)x);
  _mm512_storeu_si512((void *)y, is_signed ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b));
}
#define QE_CAST_F(v) _mm512_castsi512_ps(v)
#define QE_CAST_I(v) _mm512_castps_si512(v)
#define QE_NAME "avx512"
#define QE_OPS er__qelt_avx512
#elif defined(QE_AVX2)
#define VL 8
typedef __m256 vf;
typedef __m256i vi;
static inline vf f_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline void f_st(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf f_set(float x) { return _mm256_set1_ps(x); }
static inline vf f_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf f_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf f_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf f_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf f_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf f_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vf f_min(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vf f_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf f_nan_to_zero(vf a) { return _mm256_and_ps(a, _mm256_cmp_ps(a, a, _CMP_ORD_Q)); }
/* v with lanes n and up (n <= VL) set to 0. */
static inline vf f_keep(vf v, int64_t n) {
  __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_and_ps(v, _mm256_castsi256_ps(keep));
}
static inline vi i_ld8(const uint8_t *p, bool is_signed) {
  __m128i b = _mm_loadl_epi64((const __m128i *)p);
  return is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
}
static inline vi i_ld8_even(const uint8_t *p, bool is_signed) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return is_signed ? _mm256_srai_epi32(_mm256_slli_epi32(w, 24), 24) : _mm256_and_si256(w, _mm256_set1_epi32(0xff));
}
static inline vi i_set(int32_t x) { return _mm256_set1_epi32(x); }
static inline vi i_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
static inline vi i_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
static inline vi i_clamp(vi a, vi lo, vi hi) { return _mm256_min_epi32(_mm256_max_epi32(a, lo), hi); }
static inline vf i2f(vi a) { return _mm256_cvtepi32_ps(a); }
static inline vi f2i_trunc(vf a) { return _mm256_cvttps_epi32(a); }
/* cvtps2dq rounds as MXCSR says: to nearest even in runs
 * (er__fp_mode_for_run). */
static inline vi f2i_rhe(vf a) { return _mm256_cvtps_epi32(a); }
static inline void i_st(int32_t *p, vi v) { _mm256_storeu_si256((__m256i *)p, v); }
static inline vi i_ld(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* Values are already clamped to the 8-bit range, so the saturating packs
 * only narrow them. */
static inline void st8(uint8_t *p, vi v) {
  __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  /* packs_epi16 would saturate uint8 values above 127: narrow by shuffle. */
  w = _mm_shuffle_epi8(w, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1));
  _mm_storel_epi64((__m128i *)p, w);
}
/* Two vectors of values already in the 8-bit range (int8 when is_signed),
 * stored one after the other: the packs do not saturate them. */
static inline void st8x2(uint8_t *p, vi a, vi b, bool is_signed) {
  __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
  __m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
  _mm_storeu_si128((__m128i *)p, is_signed ? _mm_packs_epi16(lo, hi) : _mm_packus_epi16(lo, hi));
}
#define BL 32
static inline void max_bytes(uint8_t *y, const uint8_t *x, bool is_signed) {
  __m256i a = _mm256_loadu_si256((const __m256i *)y), b = _mm256_loadu_si256((const __m256i *)x);
  _mm256_storeu_si256((__m256i *)y, is_signed ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b));
}
#define QE_CAST_F(v) _mm256_castsi256_ps(v)
#define QE_CAST_I(v) _mm256_castps_si256(v)
#define QE_NAME "avx2"
#define QE_OPS er__qelt_avx2
#else
#error "define QE_AVX512 or QE_AVX2 before including qelt-impl.h"
#endif

static inline int32_t ld8(const uint8_t *p, bool is_signed) { return is_signed ? (int8_t)*p : *p; }

/* QuantizeLinear's arithmetic for one float that is already x / s. */
static inline int32_t quant_one(float q, int32_t zp, int32_t lo, int32_t hi) {
  return er__q_clamp(er__q_rhe(q) + zp, lo, hi);
}

/* The same for a vector: NaN -> 0 (then the zero point), saturate. */
static inline vi quant_vec(vf q, vi zp, vi lo, vi hi) {
  q = f_nan_to_zero(q);
  q = f_min(f_max(q, f_set(-1073741824.0f)), f_set(1073741824.0f));
  return i_clamp(i_add(f2i_rhe(q), zp), lo, hi);
}

/* ======================================================================== */
/* Depthwise convolution                                                     */
/* ======================================================================== */

/* n / sw for n >= 0, without a 64-bit division for the common strides
 * (it is slow, and small planes pay it once per channel). */
static inline int64_t div_sw(int64_t n, int64_t sw) { return sw == 1 ? n : sw == 2 ? n >> 1 : n / sw; }

/* The stride-phase planes of one input channel as floats (x - zp) into
 * planes whose padding is already 0 (er_qelt_ops.dw_planes). Each phase
 * row's input columns [lo, hi) are converted whole vectors at a time
 * straight from the input; the lanes of the last vector past hi are set
 * to 0 before it is stored, so that it writes only padding (0) or, past
 * the row, elements of the next row that are written after it (or the
 * plane's slack). Rows whose last vector would read past a->x_hi are
 * converted element by element. */
static inline __attribute__((always_inline)) void dw_planes_t(const uint8_t *x, int64_t h, int64_t w, int64_t pt,
                                                            int64_t pl, bool is_signed, int32_t zp,
                                                            const er_qdw_args *a) {
  const int64_t sh = a->sh, sw = a->sw, hs = a->hs, ws = a->ws, ps = a->ps;
  const vi z = i_set(zp);
  for (int64_t py = 0; py < sh; py++)
    for (int64_t px = 0; px < sw; px++) {
      float *d = (float *)a->planes + (py * sw + px) * ps;
      /* Columns [lo, hi) of the phase rows lie in the input. */
      const int64_t lo = pl > px ? div_sw(pl - px + sw - 1, sw) : 0;
      int64_t hi = div_sw(w + pl - px + sw - 1, sw);
      hi = hi < ws ? hi : ws;
      if (hi <= lo) continue;
      const int64_t last = lo + (hi - lo - 1) / VL * VL;
      for (int64_t yy = 0, ir = py - pt; yy < hs; yy++, ir += sh, d += ws) {
        if (ir < 0 || ir >= h) continue;
        const uint8_t *src = x + ir * w + px - pl;
        if (sw <= 2 && src + sw * last + (sw == 1 ? VL : 2 * VL) <= a->x_hi) {
          int64_t xx = lo;
          if (sw == 1) {
            for (; xx < last; xx += VL) f_st(d + xx, i2f(i_sub(i_ld8(src + xx, is_signed), z)));
            f_st(d + xx, f_keep(i2f(i_sub(i_ld8(src + xx, is_signed), z)), hi - xx));
          } else {
            for (; xx < last; xx += VL) f_st(d + xx, i2f(i_sub(i_ld8_even(src + 2 * xx, is_signed), z)));
            f_st(d + xx, f_keep(i2f(i_sub(i_ld8_even(src + 2 * xx, is_signed), z)), hi - xx));
          }
          continue;
        }
        for (int64_t xx = lo; xx < hi; xx++) d[xx] = (float)(ld8(src + sw * xx, is_signed) - zp);
      }
    }
}

static void dw_planes(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, bool is_signed, int32_t zp,
                      const er_qdw_args *a) {
  if (is_signed) dw_planes_t(x, h, w, pt, pl, true, zp, a);
  else dw_planes_t(x, h, w, pt, pl, false, zp, a);
}

static inline void st8_part(uint8_t *p, vi v, int64_t n);

/* The flat sums at v of a depthwise plane: the 3x3 case with its weights
 * and tap pointers in registers, as three chains of three (the sums are
 * exact integers, so their order does not matter, and shorter chains keep
 * more vectors in flight), any other window tap by tap. Exact: products of
 * values below 2^8 in magnitude, and sums of at most 258 of them (the
 * kernel's limit), stay below 2^24. */
static inline __attribute__((always_inline)) vf dw_sum3x3(const float *const *t, const vf *w, int64_t v) {
  vf a0 = f_mul(w[0], f_ld(t[0] + v)), a1 = f_mul(w[3], f_ld(t[3] + v)), a2 = f_mul(w[6], f_ld(t[6] + v));
  a0 = f_fma(w[1], f_ld(t[1] + v), a0);
  a1 = f_fma(w[4], f_ld(t[4] + v), a1);
  a2 = f_fma(w[7], f_ld(t[7] + v), a2);
  a0 = f_fma(w[2], f_ld(t[2] + v), a0);
  a1 = f_fma(w[5], f_ld(t[5] + v), a1);
  a2 = f_fma(w[8], f_ld(t[8] + v), a2);
  return f_add(f_add(a0, a1), a2);
}

static inline vf dw_sum_any(const float *const *taps, const float *w, int64_t ntaps, int64_t v) {
  vf acc = f_set(0.0f);
  for (int64_t t = 0; t < ntaps; t++) acc = f_fma(f_set(w[t]), f_ld(taps[t] + v), acc);
  return acc;
}

/* dw_plane with a->q8: output rows of whole vectors of the flat sums,
 * requantized and stored as bytes; the vectors of a row end past it (into
 * the virtual columns, and on the last row into the plane's slack: see
 * er__qdw_plane_stride) and only the row's bytes are stored. */
static void dw_plane_q8_any(const er_qdw_args *a, const float *const *taps) {
  const int64_t ws = a->ws, ntaps = a->kh * a->kw, ow = a->ow, oh = a->oh;
  const er_qdw_q8 q = *a->q8;
  /* Clamped in float to [lo - zp, hi - zp] before rounding (the same
   * integers as rounding then clamping, integer bounds), which keeps
   * the constants within the registers the nine weights leave. */
  const vi corr = i_set(q.corr), zp = i_set(q.zp);
  const vf mult = f_set(q.mult), off = f_set(q.off), flo = f_set((float)(q.lo - q.zp)), fhi = f_set((float)(q.hi - q.zp));
  const bool k3 = ntaps == 9;
  /* Local copies: the byte stores to y could alias the tables. */
  const float *t[9];
  vf wv[9];
  for (int i = 0; i < 9; i++) {
    t[i] = k3 ? taps[i] : taps[0];
    wv[i] = f_set(k3 ? a->w[i] : 0.0f);
  }
  const float *const w = a->w;
  uint8_t *const y = a->y;
  for (int64_t oy = 0; oy < oh; oy++) {
    uint8_t *yr = y + oy * ow;
    for (int64_t ox = 0; ox < ow; ox += VL) {
      const int64_t v = oy * ws + ox, n = ow - ox < VL ? ow - ox : VL;
      vf acc = k3 ? dw_sum3x3(t, wv, v) : dw_sum_any(taps, w, ntaps, v);
      vf f = f_fma(i2f(i_add(f2i_trunc(acc), corr)), mult, off);
      vi r = i_add(f2i_rhe(f_min(f_max(f, flo), fhi)), zp);
      if (n == VL) st8(yr + ox, r);
      else st8_part(yr + ox, r, n);
    }
  }
}

/* The 3x3 sums at v, dilation 1, starting from c: stride 1 (rows r[0..2],
 * taps at +0, +1, +2) or stride 2 (r[0..5] = the even and odd phase rows
 * of each kernel row; taps even +0, odd +0, even +1). Base pointers and
 * constant displacements, so that no tap pointer is reloaded. */
static inline __attribute__((always_inline)) vf dw_sum3x3_s(int stride, const float *const *r, const vf *w, vf c,
                                                          int64_t v) {
  if (stride == 1) {
    vf a0 = f_fma(w[0], f_ld(r[0] + v), c), a1 = f_mul(w[3], f_ld(r[1] + v)), a2 = f_mul(w[6], f_ld(r[2] + v));
    a0 = f_fma(w[1], f_ld(r[0] + v + 1), a0);
    a1 = f_fma(w[4], f_ld(r[1] + v + 1), a1);
    a2 = f_fma(w[7], f_ld(r[2] + v + 1), a2);
    a0 = f_fma(w[2], f_ld(r[0] + v + 2), a0);
    a1 = f_fma(w[5], f_ld(r[1] + v + 2), a1);
    a2 = f_fma(w[8], f_ld(r[2] + v + 2), a2);
    return f_add(f_add(a0, a1), a2);
  }
  vf a0 = f_fma(w[0], f_ld(r[0] + v), c), a1 = f_mul(w[3], f_ld(r[2] + v)), a2 = f_mul(w[6], f_ld(r[4] + v));
  a0 = f_fma(w[1], f_ld(r[1] + v), a0);
  a1 = f_fma(w[4], f_ld(r[3] + v), a1);
  a2 = f_fma(w[7], f_ld(r[5] + v), a2);
  a0 = f_fma(w[2], f_ld(r[0] + v + 1), a0);
  a1 = f_fma(w[5], f_ld(r[2] + v + 1), a1);
  a2 = f_fma(w[8], f_ld(r[4] + v + 1), a2);
  return f_add(f_add(a0, a1), a2);
}

/* dw_plane_q8 for 3x3 windows at stride 1 or 2, dilation 1, with the
 * bias small enough (|corr| < 2^23) to start the float sums from it: the
 * sums stay exact integers below 2^24, and no conversion to int32 and back
 * is needed before the requantization. Two vectors at a time are stored
 * as one. */
static inline __attribute__((always_inline)) void dw_plane_q8_3x3(const er_qdw_args *a, const float *const *taps,
                                                                int stride) {
  const int64_t ws = a->ws, ow = a->ow, oh = a->oh;
  const er_qdw_q8 q = *a->q8;
  const vi zp = i_set(q.zp);
  const vf c = f_set((float)q.corr), mult = f_set(q.mult), off = f_set(q.off);
  const vf flo = f_set((float)(q.lo - q.zp)), fhi = f_set((float)(q.hi - q.zp));
  const bool out_signed = q.lo < 0;
  vf wv[9];
  for (int i = 0; i < 9; i++) wv[i] = f_set(a->w[i]);
  /* Local copies: the byte stores to y could alias the tables. */
  const float *r[6];
  if (stride == 1) {
    r[0] = taps[0], r[1] = taps[3], r[2] = taps[6];
    r[3] = r[4] = r[5] = taps[0];
  } else {
    r[0] = taps[0], r[1] = taps[1], r[2] = taps[3], r[3] = taps[4], r[4] = taps[6], r[5] = taps[7];
  }
  uint8_t *const y = a->y;
  for (int64_t oy = 0; oy < oh; oy++) {
    uint8_t *yr = y + oy * ow;
    int64_t ox = 0;
    for (; ox + 2 * VL <= ow; ox += 2 * VL) {
      const int64_t v = oy * ws + ox;
      vf f0 = f_fma(dw_sum3x3_s(stride, r, wv, c, v), mult, off);
      vf f1 = f_fma(dw_sum3x3_s(stride, r, wv, c, v + VL), mult, off);
      vi r0 = i_add(f2i_rhe(f_min(f_max(f0, flo), fhi)), zp);
      vi r1 = i_add(f2i_rhe(f_min(f_max(f1, flo), fhi)), zp);
      st8x2(yr + ox, r0, r1, out_signed);
    }
    for (; ox < ow; ox += VL) {
      const int64_t v = oy * ws + ox, n = ow - ox < VL ? ow - ox : VL;
      vf f = f_fma(dw_sum3x3_s(stride, r, wv, c, v), mult, off);
      vi r0 = i_add(f2i_rhe(f_min(f_max(f, flo), fhi)), zp);
      /* A whole vector where it ends within the plane: the bytes past
       * the row belong to rows stored after it. */
      if (n == VL || oy * ow + ox + VL <= oh * ow) st8(yr + ox, r0);
      else st8_part(yr + ox, r0, n);
    }
  }
}

static void dw_plane_q8(const er_qdw_args *a, const float *const *taps) {
  const bool k3 = a->kh == 3 && a->kw == 3 && a->dh == 1 && a->dw == 1 && a->sh == a->sw;
  const bool small_corr = a->q8->corr > -(1 << 23) && a->q8->corr < (1 << 23);
  if (k3 && small_corr && a->sh == 1) dw_plane_q8_3x3(a, taps, 1);
  else if (k3 && small_corr && a->sh == 2) dw_plane_q8_3x3(a, taps, 2);
  else dw_plane_q8_any(a, taps);
}

static void dw_plane(const er_qdw_args *a) {
  const int64_t ws = a->ws, len = (a->oh - 1) * ws + a->ow, ntaps = a->kh * a->kw;
  const float *const *taps = a->taps;
  if (a->q8) {
    dw_plane_q8(a, taps);
    return;
  }
  int32_t *out = a->iacc;
  int64_t v = 0;
  if (ntaps == 9) {
    const float *t[9];
    vf wv[9];
    for (int i = 0; i < 9; i++) {
      t[i] = taps[i];
      wv[i] = f_set(a->w[i]);
    }
    for (; v + VL <= len; v += VL) i_st(out + v, f2i_trunc(dw_sum3x3(t, wv, v)));
  } else {
    for (; v + VL <= len; v += VL) i_st(out + v, f2i_trunc(dw_sum_any(taps, a->w, ntaps, v)));
  }
#if defined(QE_MASKED)
  if (v < len) {
    int64_t n = len - v;
    vf acc = f_set(0.0f);
    for (int64_t t = 0; t < ntaps; t++) acc = f_fma(f_set(a->w[t]), f_ld_n(taps[t] + v, n), acc);
    i_st_n(out + v, f2i_trunc(acc), n);
    v = len;
  }
#endif
  for (; v < len; v++) {
    float acc = 0.0f;
    for (int64_t t = 0; t < ntaps; t++) acc = fmaf(a->w[t], taps[t][v], acc);
    out[v] = (int32_t)acc;
  }
  /* Drop the virtual columns: row oy moves from oy * ws to oy * ow. */
  if (ws != a->ow)
    for (int64_t oy = 1; oy < a->oh; oy++) memmove(out + oy * a->ow, out + oy * ws, (size_t)a->ow * sizeof *out);
}

/* ---- depthwise, channels in lanes (er_qdwc_args) ------------------------ */

/* The first n (< VL) bytes at p as VL int32 lanes, the rest 0 or (when
 * the VL bytes at p are readable, before `end`) whatever follows: callers
 * use only the first n lanes. A copy through the stack stalled on store
 * forwarding, once per channel and row of 7- and 14-pixel planes. */
static inline vi i_ld8_part(const uint8_t *p, int64_t n, bool is_signed, const uint8_t *end) {
#if defined(QE_MASKED)
  ER_UNUSED(end);
  return i_ld8_n(p, n, is_signed);
#else
  if (p + VL <= end) return i_ld8(p, is_signed);
  uint8_t tmp[16] = {0};
  memcpy(tmp, p, (size_t)n);
  return i_ld8(tmp, is_signed);
#endif
}

/* Stores the first n (<= VL) lanes of v, already in the 8-bit range. */
static inline void st8_part(uint8_t *p, vi v, int64_t n) {
#if defined(QE_MASKED)
  _mm512_mask_cvtepi32_storeu_epi8(p, mask16(n), v);
#else
  if (n == VL) {
    st8(p, v);
    return;
  }
  /* The bytes from a register (not through the stack). */
  __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  w = _mm_shuffle_epi8(w, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1));
  er__store_low_bytes(p, (uint64_t)_mm_cvtsi128_si64(w), (int)n);
#endif
}

/* Writes padded input rows [r0, r1) of the block into the band: row r,
 * column xx is the vector of (x - x_zp) of the block's channels at input
 * (r - pt, xx - pl), or 0 outside the input. */
static void dwc_fill(const er_qdwc_args *a, int64_t r0, int64_t r1, int64_t cols) {
  const vi z = i_set(a->xz);
  const vf zero = f_set(0.0f);
  const int64_t hw = a->h * a->w;
  /* Columns [lo, hi) come from the input. */
  int64_t lo = a->pl < cols ? a->pl : cols, hi = a->pl + a->w < cols ? a->pl + a->w : cols;
  for (int64_t r = r0; r < r1; r++) {
    float *row = a->band + (r - r0) * cols * VL;
    int64_t iy = r - a->pt;
    if (iy < 0 || iy >= a->h) {
      for (int64_t xx = 0; xx < cols; xx++) f_st(row + xx * VL, zero);
      continue;
    }
    for (int64_t xx = 0; xx < lo; xx++) f_st(row + xx * VL, zero);
    for (int64_t xx = hi; xx < cols; xx++) f_st(row + xx * VL, zero);
    const uint8_t *src = a->x + iy * a->w;
#if defined(QE_AVX2)
    /* Eight channels' eight pixels transposed as bytes (12 unpacks), then
     * each pixel's eight channels converted: cheaper than converting each
     * channel and transposing floats, whose eight vectors spilled. Channels
     * past nc read the zero point, which converts to 0. */
    const __m128i fill = _mm_set1_epi8((char)a->xz);
    for (int64_t ix = 0; ix < hi - lo; ix += VL) {
      int64_t n = hi - lo - ix < VL ? hi - lo - ix : VL;
      __m128i bv[8];
#pragma GCC unroll 8
      for (int c = 0; c < 8; c++) {
        const uint8_t *p = src + c * hw + ix;
        if (c >= a->nc) {
          bv[c] = fill;
        } else if (n == VL || p + VL <= a->x_end) {
          bv[c] = _mm_loadl_epi64((const __m128i *)p);
        } else {
          uint8_t tmp[8] = {0};
          memcpy(tmp, p, (size_t)n);
          bv[c] = _mm_loadl_epi64((const __m128i *)tmp);
        }
      }
      __m128i t0 = _mm_unpacklo_epi8(bv[0], bv[1]), t1 = _mm_unpacklo_epi8(bv[2], bv[3]);
      __m128i t2 = _mm_unpacklo_epi8(bv[4], bv[5]), t3 = _mm_unpacklo_epi8(bv[6], bv[7]);
      __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1);
      __m128i u2 = _mm_unpacklo_epi16(t2, t3), u3 = _mm_unpackhi_epi16(t2, t3);
      /* w[k]: pixels 2k and 2k + 1, eight channels each. */
      __m128i w[4] = {_mm_unpacklo_epi32(u0, u2), _mm_unpackhi_epi32(u0, u2), _mm_unpacklo_epi32(u1, u3),
                      _mm_unpackhi_epi32(u1, u3)};
      float *d = row + (lo + ix) * VL;
#pragma GCC unroll 8
      for (int q = 0; q < 8; q++) {
        if (q >= n) break;
        __m128i px8 = q % 2 ? _mm_unpackhi_epi64(w[q / 2], w[q / 2]) : w[q / 2];
        __m256i v32 = a->is_signed ? _mm256_cvtepi8_epi32(px8) : _mm256_cvtepu8_epi32(px8);
        f_st(d + q * VL, i2f(i_sub(v32, z)));
      }
    }
    ER_UNUSED(zero);
#else
    for (int64_t ix = 0; ix < hi - lo; ix += VL) {
      int64_t n = hi - lo - ix < VL ? hi - lo - ix : VL;
      vf v[VL];
#pragma GCC unroll 16
      for (int c = 0; c < VL; c++) {
        const uint8_t *p = src + c * hw + ix;
        v[c] = c >= a->nc ? zero
                          : i2f(i_sub(n == VL ? i_ld8(p, a->is_signed) : i_ld8_part(p, n, a->is_signed, a->x_end), z));
      }
      v_transpose(v);
      float *d = row + (lo + ix) * VL;
      /* Constant indices only, so that the vectors stay in registers. */
#pragma GCC unroll 16
      for (int q = 0; q < VL; q++)
        if (q < n) f_st(d + q * VL, v[q]);
    }
#endif
  }
}

/* The QConv epilogue on a vector of the block's channels at one pixel. */
static inline vi dwc_requant(vf acc, vi corr, vf mult, vf off, vi zp, vi lo, vi hi) {
  vf f = f_fma(i2f(i_add(f2i_trunc(acc), corr)), mult, off);
  f = f_min(f_max(f, f_set(-1073741824.0f)), f_set(1073741824.0f));
  return i_clamp(i_add(f2i_rhe(f), zp), lo, hi);
}

/* Sums of one output pixel: 3x3, dilation 1 (the common case; weights in
 * registers, taps at fixed offsets from three row pointers). */
#define DWC_3X3(b, rs)                                                                                       \
  f_add(f_fma(w2, f_ld((b) + 2 * VL),                                                                       \
              f_fma(w4, f_ld((b) + (rs) + VL), f_fma(w6, f_ld((b) + 2 * (rs)), f_mul(w0, f_ld(b))))),       \
        f_fma(w8, f_ld((b) + 2 * (rs) + 2 * VL),                                                            \
              f_fma(w1, f_ld((b) + VL), f_fma(w3, f_ld((b) + (rs)),                                          \
                                            f_fma(w5, f_ld((b) + (rs) + 2 * VL), f_mul(w7, f_ld((b) + 2 * (rs) + VL)))))))

static void dw_block(const er_qdwc_args *a) {
  const int64_t cols = er__qdwc_band_cols(a->ow, a->sw, a->kw, a->dw), ntaps = a->kh * a->kw;
  const int64_t ohw = a->oh * a->ow, rs = cols * VL, step = a->sw * VL;
  const bool k3 = a->kh == 3 && a->kw == 3 && a->dh == 1 && a->dw == 1;
  int32_t corr_a[VL];
  float mult_a[VL], off_a[VL];
  for (int c = 0; c < VL; c++) {
    corr_a[c] = c < a->nc ? a->corr[c] : 0;
    mult_a[c] = c < a->nc ? a->mult[c] : 0.0f;
    off_a[c] = c < a->nc ? a->off[c] : 0.0f;
  }
  const vi corr = i_ld(corr_a), zp = i_set(a->yz), lo = i_set(a->lo), hi = i_set(a->hi);
  const bool out_signed = a->lo < 0;
  ER_UNUSED(out_signed);
  const vf mult = f_ld(mult_a), off = f_ld(off_a);
  const vf w0 = f_ld(a->wt), w1 = f_ld(a->wt + VL), w2 = f_ld(a->wt + 2 * VL);
  const vf w3 = k3 ? f_ld(a->wt + 3 * VL) : w0, w4 = k3 ? f_ld(a->wt + 4 * VL) : w0, w5 = k3 ? f_ld(a->wt + 5 * VL) : w0;
  const vf w6 = k3 ? f_ld(a->wt + 6 * VL) : w0, w7 = k3 ? f_ld(a->wt + 7 * VL) : w0, w8 = k3 ? f_ld(a->wt + 8 * VL) : w0;
  int64_t toff[ER_QDW_MAX_TAPS];
  for (int64_t t = 0; t < ntaps; t++) toff[t] = ((t / a->kw) * a->dh * cols + (t % a->kw) * a->dw) * VL;
  /* One group's sums, pixel after pixel: [VL pixels][VL channels]. */
  _Alignas(64) float sums[VL * VL];
  for (int64_t oy0 = 0; oy0 < a->oh; oy0 += a->band_rows) {
    int64_t oy1 = oy0 + a->band_rows < a->oh ? oy0 + a->band_rows : a->oh;
    int64_t r0 = oy0 * a->sh, r1 = (oy1 - 1) * a->sh + (a->kh - 1) * a->dh + 1;
    dwc_fill(a, r0, r1, cols);
    /* The band's output pixels, VL at a time (a group may cross rows). */
    const int64_t npix = (oy1 - oy0) * a->ow;
    int64_t ox = 0;
    const float *row = a->band, *b = row;
    for (int64_t p0 = 0; p0 < npix; p0 += VL) {
      int64_t n = npix - p0 < VL ? npix - p0 : VL;
      for (int64_t q = 0; q < n; q++) {
        vf acc;
        if (k3) {
          acc = DWC_3X3(b, rs);
        } else {
          acc = f_set(0.0f);
          for (int64_t t = 0; t < ntaps; t++) acc = f_fma(f_ld(a->wt + t * VL), f_ld(b + toff[t]), acc);
        }
        f_st(sums + q * VL, acc);
        b += step;
        if (++ox == a->ow) {
          ox = 0;
          row += a->sh * rs;
          b = row;
        }
      }
      /* Requantized after the group's sums, not per pixel: the FMA loop
       * then keeps its weights in registers. */
      uint8_t *y = a->y + oy0 * a->ow + p0;
#if defined(QE_AVX2)
      /* Narrowed to bytes per pixel (the values are within the output
       * type, so the packs do not saturate them), then transposed as bytes:
       * w[k] holds channels 2k and 2k + 1, eight pixels each. */
      __m128i pk[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) {
        vi q0 = dwc_requant(f_ld(sums + 2 * k * VL), corr, mult, off, zp, lo, hi);
        vi q1 = dwc_requant(f_ld(sums + (2 * k + 1) * VL), corr, mult, off, zp, lo, hi);
        __m128i h0 = _mm_packs_epi32(_mm256_castsi256_si128(q0), _mm256_extracti128_si256(q0, 1));
        __m128i h1 = _mm_packs_epi32(_mm256_castsi256_si128(q1), _mm256_extracti128_si256(q1, 1));
        __m128i by = out_signed ? _mm_packs_epi16(h0, h1) : _mm_packus_epi16(h0, h1);
        pk[k] = _mm_unpacklo_epi8(by, _mm_srli_si128(by, 8));
      }
      __m128i u0 = _mm_unpacklo_epi16(pk[0], pk[1]), u1 = _mm_unpackhi_epi16(pk[0], pk[1]);
      __m128i u2 = _mm_unpacklo_epi16(pk[2], pk[3]), u3 = _mm_unpackhi_epi16(pk[2], pk[3]);
      __m128i w[4] = {_mm_unpacklo_epi32(u0, u2), _mm_unpackhi_epi32(u0, u2), _mm_unpacklo_epi32(u1, u3),
                      _mm_unpackhi_epi32(u1, u3)};
#pragma GCC unroll 8
      for (int c = 0; c < 8; c++) {
        if (c >= a->nc) break;
        __m128i ch = c % 2 ? _mm_unpackhi_epi64(w[c / 2], w[c / 2]) : w[c / 2];
        if (n == VL) _mm_storel_epi64((__m128i *)(y + c * ohw), ch);
        else er__store_low_bytes(y + c * ohw, (uint64_t)_mm_cvtsi128_si64(ch), (int)n);
      }
#else
      vf t[VL];
#pragma GCC unroll 16
      for (int q = 0; q < VL; q++) t[q] = QE_CAST_F(dwc_requant(f_ld(sums + q * VL), corr, mult, off, zp, lo, hi));
      v_transpose(t);
#pragma GCC unroll 16
      for (int c = 0; c < VL; c++)
        if (c < a->nc) st8_part(y + c * ohw, QE_CAST_I(t[c]), n);
#endif
    }
  }
}

/* ======================================================================== */
/* QuantizeLinear, DequantizeLinear                                          */
/* ======================================================================== */

static void quantize(const float *x, uint8_t *y, int64_t n, float s, int32_t zp, int32_t lo, int32_t hi) {
  const vf vs = f_set(s);
  const vi z = i_set(zp), l = i_set(lo), h = i_set(hi);
  int64_t i = 0;
  for (; i + VL <= n; i += VL) st8(y + i, quant_vec(f_div(f_ld(x + i), vs), z, l, h));
  for (; i < n; i++) y[i] = (uint8_t)quant_one(x[i] / s, zp, lo, hi);
}

static void dequantize(const uint8_t *x, bool is_signed, float *y, int64_t n, float s, int32_t zp) {
  const vf vs = f_set(s);
  const vi z = i_set(zp);
  int64_t i = 0;
  for (; i + VL <= n; i += VL) f_st(y + i, f_mul(i2f(i_sub(i_ld8(x + i, is_signed), z)), vs));
  for (; i < n; i++) y[i] = (float)(ld8(x + i, is_signed) - zp) * s;
}

/* ======================================================================== */
/* QAdd, QMul                                                                */
/* ======================================================================== */

/* x / y rounded once, from r = 1 / y (itself rounded once): q = x r lies
 * within an ulp of x / y, the residual x - q y is exact in one FMA, and
 * q + residual r rounds to the correctly rounded quotient (Markstein's
 * theorem) as long as nothing overflows or goes subnormal: div_recip_ok
 * checks the operands' bounds. vdivps was most of QAdd's time (53 us for
 * ResNet-18's 64 x 56 x 56 adds on an AVX-512 Xeon, a division every 10
 * cycles or so); the reciprocal, multiply and two FMAs pipeline. 10^8
 * random quotients over 2000 divisors (all-ones significands among them)
 * matched the division exactly, and the kernel harness compares QAdd and
 * QMul with their reference bit for bit. */
static inline vf f_div_r(vf x, vf y, vf r) {
  vf q = f_mul(x, r);
  return f_fma(f_fnma(q, y, x), r, q);
}

/* Whether every quotient x / ys of qbinary may go through f_div_r: the
 * scales normal and within 2^+-50 (so every nonzero x, a sum or product
 * of (q - zp) s terms, is at least 2^-120, and no residual is subnormal),
 * and the largest x times 1 / ys below 2^100. */
static bool div_recip_ok(float as, float bs, float ys, bool mul) {
  /* (It also rules out NaN and infinite quotients.) */
  const double lo = 0x1p-50, hi = 0x1p50;
  const double a = fabs((double)as), b = fabs((double)bs), y = fabs((double)ys);
  if (!(a >= lo && a <= hi && b >= lo && b <= hi && y >= lo && y <= hi)) return false;
  const double xmax = mul ? 255.0 * a * 255.0 * b : 255.0 * (a + b);
  return xmax / y < 0x1p100;
}

/* The common case of qbinary, two operands of one signedness read
 * element by element, mul and the signedness fixed: two vectors per
 * iteration, clamped in float to [lo - yz, hi - yz] before rounding (the
 * same integers as rounding then clamping, integer bounds; NaN is 0 first,
 * as in quant_vec) and stored as one. Returns the elements done. */
static inline __attribute__((always_inline)) int64_t qbinary_pairs(const uint8_t *a, float as, int32_t az,
                                                                 const uint8_t *b, float bs, int32_t bz, uint8_t *y,
                                                                 int64_t n, float ys, int32_t yz, int32_t lo,
                                                                 int32_t hi, const bool mul, const bool sgn,
                                                                 const bool recip) {
  const vf vas = f_set(as), vbs = f_set(bs), vys = f_set(ys), vr = f_set(1.0f / ys);
  const vf flo = f_set((float)(lo - yz)), fhi = f_set((float)(hi - yz));
  const vi vaz = i_set(az), vbz = i_set(bz), z = i_set(yz);
  const bool out_signed = lo < 0;
  int64_t i = 0;
  for (; i + 2 * VL <= n; i += 2 * VL) {
    vi r[2];
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) {
      vf fa = f_mul(i2f(i_sub(i_ld8(a + i + k * VL, sgn), vaz)), vas);
      vf fb = f_mul(i2f(i_sub(i_ld8(b + i + k * VL, sgn), vbz)), vbs);
      vf x = mul ? f_mul(fa, fb) : f_add(fa, fb);
      /* (With div_recip_ok no x is NaN or infinite.) */
      vf q = recip ? f_div_r(x, vys, vr) : f_nan_to_zero(f_div(x, vys));
      r[k] = i_add(f2i_rhe(f_min(f_max(q, flo), fhi)), z);
    }
    st8x2(y + i, r[0], r[1], out_signed);
  }
  return i;
}

static void qbinary(const uint8_t *a, bool a_signed, int a_step, float as, int32_t az, const uint8_t *b, bool b_signed,
                    int b_step, float bs, int32_t bz, uint8_t *y, int64_t n, float ys, int32_t yz, int32_t lo,
                    int32_t hi, bool mul) {
  const bool recip = div_recip_ok(as, bs, ys, mul);
  if (a_step && b_step && a_signed == b_signed) {
    int64_t done;
#define QB_PAIRS(MUL, SGN)                                                                         \
  (recip ? qbinary_pairs(a, as, az, b, bs, bz, y, n, ys, yz, lo, hi, MUL, SGN, true)               \
         : qbinary_pairs(a, as, az, b, bs, bz, y, n, ys, yz, lo, hi, MUL, SGN, false))
    if (mul) done = a_signed ? QB_PAIRS(true, true) : QB_PAIRS(true, false);
    else done = a_signed ? QB_PAIRS(false, true) : QB_PAIRS(false, false);
#undef QB_PAIRS
    if (done == n) return;
    a += done;
    b += done;
    y += done;
    n -= done;
  }
  const vf vas = f_set(as), vbs = f_set(bs), vys = f_set(ys), vr = f_set(1.0f / ys);
  const vi vaz = i_set(az), vbz = i_set(bz), z = i_set(yz), l = i_set(lo), h = i_set(hi);
  /* A repeated operand is dequantized once. */
  const float fa0 = (float)(ld8(a, a_signed) - az) * as, fb0 = (float)(ld8(b, b_signed) - bz) * bs;
  int64_t i = 0;
  for (; i + VL <= n; i += VL) {
    vf fa = a_step ? f_mul(i2f(i_sub(i_ld8(a + i, a_signed), vaz)), vas) : f_set(fa0);
    vf fb = b_step ? f_mul(i2f(i_sub(i_ld8(b + i, b_signed), vbz)), vbs) : f_set(fb0);
    vf s = mul ? f_mul(fa, fb) : f_add(fa, fb);
    st8(y + i, quant_vec(recip ? f_div_r(s, vys, vr) : f_div(s, vys), z, l, h));
  }
  for (; i < n; i++) {
    float fa = a_step ? (float)(ld8(a + i, a_signed) - az) * as : fa0;
    float fb = b_step ? (float)(ld8(b + i, b_signed) - bz) * bs : fb0;
    float s = mul ? fa * fb : fa + fb;
    y[i] = (uint8_t)quant_one(s / ys, yz, lo, hi);
  }
}

/* ======================================================================== */
/* Pooling helpers                                                           */
/* ======================================================================== */

static void max_u8(uint8_t *y, const uint8_t *x, int64_t n, bool is_signed) {
  int64_t i = 0;
  for (; i + BL <= n; i += BL) max_bytes(y + i, x + i, is_signed);
#if defined(QE_MASKED)
  if (i < n) {
    __mmask64 m = ~(__mmask64)0 >> (64 - (n - i));
    __m512i a = _mm512_maskz_loadu_epi8(m, y + i), b = _mm512_maskz_loadu_epi8(m, x + i);
    _mm512_mask_storeu_epi8(y + i, m, is_signed ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b));
    return;
  }
#endif
  for (; i < n; i++) {
    if (is_signed) {
      if ((int8_t)x[i] > (int8_t)y[i]) y[i] = x[i];
    } else if (x[i] > y[i]) {
      y[i] = x[i];
    }
  }
}

static void sum_u8(int32_t *acc, const uint8_t *x, int64_t n, bool is_signed) {
  int64_t i = 0;
  for (; i + VL <= n; i += VL) i_st(acc + i, i_add(i_ld(acc + i), i_ld8(x + i, is_signed)));
#if defined(QE_MASKED)
  /* A masked last vector: the pools of 7x7 and 14x14 maps are mostly
   * tails. */
  if (i < n) {
    int64_t r = n - i;
    i_st_n(acc + i, i_add(_mm512_maskz_loadu_epi32(mask16(r), acc + i), i_ld8_n(x + i, r, is_signed)), r);
    return;
  }
#endif
  for (; i < n; i++) acc[i] += ld8(x + i, is_signed);
}

#if defined(QE_AVX512)
/* Bits b of the 64 bytes from column c with 0 <= c + b < w. */
static inline __mmask64 row_mask(int64_t c, int64_t w) {
  int64_t lo = c < 0 ? -c : 0, hi = w - c;
  if (hi > 64) hi = 64;
  if (lo >= hi) return 0;
  uint64_t m = hi == 64 ? ~(uint64_t)0 : ((uint64_t)1 << hi) - 1;
  return (__mmask64)(m & ~(((uint64_t)1 << lo) - 1));
}

/* Max pooling of one plane with windows 2 or 3 wide at column stride 2
 * (dilation 1), any height and row stride: per 32 output columns, the
 * max over the window's rows of 64 input bytes (two loads: at the
 * window's first column and 2 further), then even and odd bytes by
 * narrowing 16-bit lanes. Columns outside the input read `pad`. */
static void max_plane_s2(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                         int64_t dh, int64_t kw, int64_t oh, int64_t ow, bool is_signed, uint8_t *y) {
  const __m512i padv = _mm512_set1_epi8(is_signed ? (char)0x80 : 0);
  if (ow <= 16) {
    /* The same with 32-byte loads: 64-byte ones at unaligned addresses
     * span two cache lines, and small maps (SqueezeNet's 512 x 13 x 13 ->
     * 6 x 6, Inception's 14 x 14 -> 7 x 7) are all such rows. */
    const __m256i pad32 = _mm512_castsi512_si256(padv);
    const __mmask32 m0 = (__mmask32)row_mask(-pl, w), m2 = (__mmask32)row_mask(2 - pl, w);
    for (int64_t oy = 0; oy < oh; oy++) {
      __m256i a = pad32, b2 = pad32;
      for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = oy * sh - pt + ky * dh;
        if (iy < 0 || iy >= h) continue;
        uintptr_t row = (uintptr_t)(x + iy * w);
        __m256i r0 = _mm256_mask_loadu_epi8(pad32, m0, (const void *)(row - (uintptr_t)pl));
        a = is_signed ? _mm256_max_epi8(a, r0) : _mm256_max_epu8(a, r0);
        if (kw == 3) {
          __m256i r2 = _mm256_mask_loadu_epi8(pad32, m2, (const void *)(row + (uintptr_t)(2 - pl)));
          b2 = is_signed ? _mm256_max_epi8(b2, r2) : _mm256_max_epu8(b2, r2);
        }
      }
      __m128i even = _mm256_cvtepi16_epi8(a), odd = _mm256_cvtepi16_epi8(_mm256_srli_epi16(a, 8));
      __m128i r = is_signed ? _mm_max_epi8(even, odd) : _mm_max_epu8(even, odd);
      if (kw == 3) {
        __m128i e2 = _mm256_cvtepi16_epi8(b2);
        r = is_signed ? _mm_max_epi8(r, e2) : _mm_max_epu8(r, e2);
      }
      _mm_mask_storeu_epi8(y + oy * ow, (__mmask16)((1u << ow) - 1u), r);
    }
    return;
  }
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t iy0 = oy * sh - pt;
    for (int64_t ox0 = 0; ox0 < ow; ox0 += 32) {
      int64_t c = 2 * ox0 - pl;
      /* Bytes of the two loads inside the row. */
      __mmask64 m0 = row_mask(c, w), m2 = row_mask(c + 2, w);
      __m512i a = padv, b2 = padv;
      for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = iy0 + ky * dh;
        if (iy < 0 || iy >= h) continue;
        uintptr_t row = (uintptr_t)(x + iy * w);
        __m512i r0 = _mm512_mask_loadu_epi8(padv, m0, (const void *)(row + (uintptr_t)c));
        a = is_signed ? _mm512_max_epi8(a, r0) : _mm512_max_epu8(a, r0);
        if (kw == 3) {
          __m512i r2 = _mm512_mask_loadu_epi8(padv, m2, (const void *)(row + (uintptr_t)(c + 2)));
          b2 = is_signed ? _mm512_max_epi8(b2, r2) : _mm512_max_epu8(b2, r2);
        }
      }
      __m256i even = _mm512_cvtepi16_epi8(a), odd = _mm512_cvtepi16_epi8(_mm512_srli_epi16(a, 8));
      __m256i r = is_signed ? _mm256_max_epi8(even, odd) : _mm256_max_epu8(even, odd);
      if (kw == 3) {
        __m256i e2 = _mm512_cvtepi16_epi8(b2);
        r = is_signed ? _mm256_max_epi8(r, e2) : _mm256_max_epu8(r, e2);
      }
      int64_t n = ow - ox0 < 32 ? ow - ox0 : 32;
      _mm256_mask_storeu_epi8(y + oy * ow + ox0, (__mmask32)(~0u >> (32 - n)), r);
    }
  }
}
#define QE_MAX_PLANE_S2 max_plane_s2
#else
/* The same on AVX2, per 16 output columns: the max over the window's rows
 * of 32 input bytes at the window's first column (and 32 from 2 further for
 * 3-wide windows), even and odd bytes apart by a byte shuffle within lanes
 * and a swap of the middle 64-bit quarters. The row-at-a-time path this
 * replaces ran ResNet-18's int8 stem pool (64 x 112 x 112) in 1.4 ms
 * against onnxruntime's 0.12 ms on a Zen 3 core: its 112- and 56-byte rows
 * left 16- and 24-byte tails to a byte loop. */
#define QE_S2_BUF 16384 /* bytes of padded row maxima per strip of output rows */
static inline __m128i s2_cols(__m256i a, __m256i b2, int64_t kw, bool is_signed) {
  const __m256i idx = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14,
                                       1, 3, 5, 7, 9, 11, 13, 15);
  /* [even bytes (16) | odd bytes (16)] */
  __m256i eo = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a, idx), 0xD8);
  __m128i even = _mm256_castsi256_si128(eo), odd = _mm256_extracti128_si256(eo, 1);
  __m128i r = is_signed ? _mm_max_epi8(even, odd) : _mm_max_epu8(even, odd);
  if (kw == 3) {
    __m128i e2 = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_shuffle_epi8(b2, idx), 0xD8));
    r = is_signed ? _mm_max_epi8(r, e2) : _mm_max_epu8(r, e2);
  }
  return r;
}

static inline void s2_store(uint8_t *y, __m128i r, int64_t n) {
  if (n == 16) {
    _mm_storeu_si128((__m128i *)y, r);
  } else {
    uint8_t out[16];
    _mm_storeu_si128((__m128i *)out, r);
    memcpy(y, out, (size_t)n);
  }
}

static void max_plane_s2(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                         int64_t dh, int64_t kw, int64_t oh, int64_t ow, bool is_signed, uint8_t *y) {
  const uint8_t pad = is_signed ? 0x80 : 0;
  const __m256i padv = _mm256_set1_epi8((char)pad);
  /* The last block reads up to 2 * (ow rounded up to 16) - pl + 34. */
  const int64_t span = (pl + 2 * ((ow + 15) / 16 * 16) + 34 + 31) / 32 * 32;
  if (w >= 16 && pl + w <= span && 4 * span <= QE_S2_BUF) {
    /* Strips of output rows: first each row's max over the window's rows
     * into a buffer padded on both sides (one store per 32 bytes, the
     * tail by one overlapping vector), then the blocks from the buffer.
     * Reading a row right after writing it at other offsets stalled on
     * store forwarding (over half the time in perf). */
    uint8_t vr[QE_S2_BUF] __attribute__((aligned(32)));
    const int64_t strip = QE_S2_BUF / span < oh ? QE_S2_BUF / span : oh;
    memset(vr, pad, (size_t)(strip * span));
    for (int64_t oy0 = 0; oy0 < oh; oy0 += strip) {
      int64_t rows = oh - oy0 < strip ? oh - oy0 : strip;
      for (int64_t r = 0; r < rows; r++) {
        const int64_t iy0 = (oy0 + r) * sh - pt;
        uint8_t *d = vr + r * span + pl;
        if (w < 32) {
          /* Rows of 16 to 31 bytes (27x27 planes): two overlapping
           * 16-byte vectors, read inside the row. */
          for (int64_t i = 0;; i += 16) {
            if (i + 16 > w) i = w - 16;
            __m128i v = _mm256_castsi256_si128(padv);
            for (int64_t ky = 0; ky < kh; ky++) {
              int64_t iy = iy0 + ky * dh;
              if (iy < 0 || iy >= h) continue;
              __m128i q = _mm_loadu_si128((const __m128i *)(x + iy * w + i));
              v = is_signed ? _mm_max_epi8(v, q) : _mm_max_epu8(v, q);
            }
            _mm_storeu_si128((__m128i *)(d + i), v);
            if (i + 16 >= w) break;
          }
          continue;
        }
        for (int64_t i = 0;; i += 32) {
          if (i + 32 > w) i = w - 32;
          __m256i v = padv;
          for (int64_t ky = 0; ky < kh; ky++) {
            int64_t iy = iy0 + ky * dh;
            if (iy < 0 || iy >= h) continue;
            __m256i q = _mm256_loadu_si256((const __m256i *)(x + iy * w + i));
            v = is_signed ? _mm256_max_epi8(v, q) : _mm256_max_epu8(v, q);
          }
          _mm256_storeu_si256((__m256i *)(d + i), v);
          if (i + 32 >= w) break;
        }
      }
      for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = vr + r * span;
        uint8_t *yr = y + (oy0 + r) * ow;
        for (int64_t ox0 = 0; ox0 < ow; ox0 += 16) {
          __m256i a = _mm256_load_si256((const __m256i *)(src + 2 * ox0));
          __m256i b2 = kw == 3 ? _mm256_loadu_si256((const __m256i *)(src + 2 * ox0 + 2)) : a;
          s2_store(yr + ox0, s2_cols(a, b2, kw, is_signed), ow - ox0 < 16 ? ow - ox0 : 16);
        }
      }
    }
    return;
  }
  /* Narrow or very wide rows: block by block, blocks reaching outside the
   * row through a padded copy. */
  uint8_t buf[64];
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t iy0 = oy * sh - pt;
    for (int64_t ox0 = 0; ox0 < ow; ox0 += 16) {
      int64_t c = 2 * ox0 - pl, end = c + 34;
      bool inside = c >= 0 && end <= w;
      int64_t lo = c < 0 ? 0 : c, hi = end < w ? end : w;
      __m256i a = padv, b2 = padv;
      for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = iy0 + ky * dh;
        if (iy < 0 || iy >= h) continue;
        const uint8_t *src = buf;
        if (inside) {
          src = x + iy * w + c;
        } else {
          memset(buf, pad, sizeof buf);
          if (lo < hi) memcpy(buf + (lo - c), x + iy * w + lo, (size_t)(hi - lo));
        }
        __m256i r0 = _mm256_loadu_si256((const __m256i *)src);
        a = is_signed ? _mm256_max_epi8(a, r0) : _mm256_max_epu8(a, r0);
        if (kw == 3) {
          __m256i r2 = _mm256_loadu_si256((const __m256i *)(src + 2));
          b2 = is_signed ? _mm256_max_epi8(b2, r2) : _mm256_max_epu8(b2, r2);
        }
      }
      s2_store(y + oy * ow + ox0, s2_cols(a, b2, kw, is_signed), ow - ox0 < 16 ? ow - ox0 : 16);
    }
  }
}
#define QE_MAX_PLANE_S2 max_plane_s2
#endif

/* The exact sum of n bytes (unsigned, or signed when is_signed), by sums
 * of absolute differences against 0: eight 64-bit sums per vector. */
static int64_t sum_bytes(const uint8_t *x, int64_t n, bool is_signed) {
  int64_t i = 0, total = 0;
#if defined(QE_AVX512)
  const __m512i flip = _mm512_set1_epi8(is_signed ? (char)0x80 : 0), zero = _mm512_setzero_si512();
  __m512i acc = zero;
  for (; i + 64 <= n; i += 64)
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512((const void *)(x + i)), flip), zero));
  if (i < n) {
    __mmask64 m = ~(__mmask64)0 >> (64 - (n - i));
    __m512i v = _mm512_maskz_mov_epi8(m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + i), flip));
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(v, zero));
    i = n;
  }
  total = _mm512_reduce_add_epi64(acc);
#else
  const __m256i flip = _mm256_set1_epi8(is_signed ? (char)0x80 : 0), zero = _mm256_setzero_si256();
  __m256i acc = zero;
  for (; i + 32 <= n; i += 32)
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x + i)), flip), zero));
  /* Tails of 16 and 8 bytes by the same sums: a global pool's 7 x 7
   * planes are 32 + 17 bytes, and 17 bytes one by one took most of its
   * time. */
  const __m128i flip16 = _mm256_castsi256_si128(flip), zero16 = _mm_setzero_si128();
  __m128i acc16 = zero16;
  if (i + 16 <= n) {
    acc16 = _mm_add_epi64(acc16, _mm_sad_epu8(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(x + i)), flip16), zero16));
    i += 16;
  }
  if (i + 8 <= n) {
    /* (the flip only on the 8 loaded bytes: the upper ones stay 0) */
    __m128i v8 = _mm_move_epi64(_mm_xor_si128(_mm_loadl_epi64((const __m128i *)(x + i)), flip16));
    acc16 = _mm_add_epi64(acc16, _mm_sad_epu8(v8, zero16));
    i += 8;
  }
  acc = _mm256_add_epi64(acc, _mm256_inserti128_si256(_mm256_setzero_si256(), acc16, 0));
  int64_t lanes[4];
  _mm256_storeu_si256((__m256i *)lanes, acc);
  total = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; i++) total += (uint8_t)(x[i] ^ (is_signed ? 0x80 : 0));
#endif
  /* Flipped bytes are the signed values plus 128. */
  return is_signed ? total - 128 * n : total;
}

static void gather2(const uint8_t *src, int64_t n, uint8_t *dst) {
  int64_t i = 0;
#if defined(QE_AVX512)
  /* 64 bytes as 32 words; the low bytes are the even elements. */
  for (; 2 * i + 64 <= 2 * n - 1; i += 32)
    _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi16_epi8(_mm512_loadu_si512((const void *)(src + 2 * i))));
  if (i < n) {
    /* The last m <= 32 outputs: 2 m - 1 bytes read. */
    int64_t m = n - i;
    __m512i w = _mm512_maskz_loadu_epi8(~(__mmask64)0 >> (64 - (2 * m - 1)), src + 2 * i);
    _mm256_mask_storeu_epi8(dst + i, (__mmask32)(~0u >> (32 - m)), _mm512_cvtepi16_epi8(w));
    return;
  }
#else
  const __m256i lowb = _mm256_set1_epi16(0xff);
  for (; 2 * i + 32 <= 2 * n - 1; i += 16) {
    __m256i w = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(src + 2 * i)), lowb);
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi16(w, w), 0xd8);
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(p));
  }
#endif
  for (; i < n; i++) dst[i] = src[2 * i];
}

/* A 256-entry byte table as 16 tables of 16 (by the high nibble), each
 * looked up with a byte shuffle on the low nibble; the matching one is
 * blended in. */
static void lut(const uint8_t *x, uint8_t flip, const uint8_t *table, uint8_t *y, int64_t n) {
  int64_t i = 0;
#if defined(QE_AVX512)
  __m512i tabs[16];
  for (int h = 0; h < 16; h++) tabs[h] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(table + 16 * h)));
  const __m512i f = _mm512_set1_epi8((char)flip), lown = _mm512_set1_epi8(0x0f);
  for (; i + 64 <= n; i += 64) {
    __m512i v = _mm512_xor_si512(_mm512_loadu_si512((const void *)(x + i)), f);
    __m512i lo = _mm512_and_si512(v, lown), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), lown);
    __m512i r = _mm512_setzero_si512();
    for (int h = 0; h < 16; h++)
      r = _mm512_mask_mov_epi8(r, _mm512_cmpeq_epi8_mask(hi, _mm512_set1_epi8((char)h)),
                               _mm512_shuffle_epi8(tabs[h], lo));
    _mm512_storeu_si512((void *)(y + i), r);
  }
#else
  __m256i tabs[16];
  for (int h = 0; h < 16; h++) tabs[h] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(table + 16 * h)));
  const __m256i f = _mm256_set1_epi8((char)flip), lown = _mm256_set1_epi8(0x0f);
  for (; i + 32 <= n; i += 32) {
    __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x + i)), f);
    __m256i lo = _mm256_and_si256(v, lown), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), lown);
    __m256i r = _mm256_setzero_si256();
    for (int h = 0; h < 16; h++)
      r = _mm256_blendv_epi8(r, _mm256_shuffle_epi8(tabs[h], lo), _mm256_cmpeq_epi8(hi, _mm256_set1_epi8((char)h)));
    _mm256_storeu_si256((__m256i *)(y + i), r);
  }
#endif
  for (; i < n; i++) y[i] = table[(uint8_t)(x[i] ^ flip)];
}

/* One vector of averages: (vs - sub) / cnt, requantized (see avg_quant
 * in qelt.h for why one float division matches the reference's double
 * one). */
static inline vi avg_vec(const int32_t *vs, const float *cnt, vi sb, vf m, vi z, vi l, vi h) {
  vf avg = f_div(i2f(i_sub(i_ld(vs), sb)), f_ld(cnt));
  return quant_vec(f_mul(avg, m), z, l, h);
}

static void avg_quant(const int32_t *vs, int64_t n, int32_t sub, const float *cnt, float mult, int32_t yz,
                      int32_t lo, int32_t hi, uint8_t *y) {
  const vf m = f_set(mult);
  const vi z = i_set(yz), l = i_set(lo), h = i_set(hi), sb = i_set(sub);
  int64_t i = 0;
  for (; i + VL <= n; i += VL) st8(y + i, avg_vec(vs + i, cnt + i, sb, m, z, l, h));
  if (i < n) {
    /* The last part vector with the same arithmetic: the rows of 7x7 and
     * 14x14 maps are all tail. */
#if defined(QE_MASKED)
    /* Masked: copies through the stack stalled on store forwarding. */
    __mmask16 k = mask16(n - i);
    vf avg = f_div(i2f(i_sub(_mm512_maskz_loadu_epi32(k, vs + i), sb)), _mm512_mask_loadu_ps(f_set(1.0f), k, cnt + i));
    _mm512_mask_cvtepi32_storeu_epi8(y + i, k, quant_vec(f_mul(avg, m), z, l, h));
#else
    /* One by one: copies through the stack stalled on store forwarding
     * (the sums' tails were just written one by one too). */
    for (; i < n; i++) y[i] = (uint8_t)quant_one((float)(vs[i] - sub) / cnt[i] * mult, yz, lo, hi);
#endif
  }
}

/* ======================================================================== */
/* Block-wise 4-bit weights                                                  */
/* ======================================================================== */

#define BNR (2 * VL) /* columns per panel */

static void block_dequant(const uint8_t *nib, int64_t kn, bool is_signed, const float *zp, const float *scale,
                          float *dst) {
  const vf s0 = f_ld(scale), s1 = f_ld(scale + VL);
  const vf z0 = zp ? f_ld(zp) : f_set(0.0f), z1 = zp ? f_ld(zp + VL) : f_set(0.0f);
  const __m128i lowmask = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t k = 0; k < kn; k++, nib += BNR / 2, dst += BNR) {
#if defined(QE_AVX512)
    __m128i b = _mm_loadu_si128((const __m128i *)nib);
#else
    __m128i b = _mm_loadl_epi64((const __m128i *)nib);
#endif
    __m128i lo = _mm_and_si128(b, lowmask), hi = _mm_and_si128(_mm_srli_epi16(b, 4), lowmask);
    __m128i c0 = _mm_unpacklo_epi8(lo, hi), c1 = _mm_unpackhi_epi8(lo, hi); /* columns in order */
    if (is_signed) {
      /* int4: (v ^ 8) - 8 sign-extends the nibble */
      c0 = _mm_sub_epi8(_mm_xor_si128(c0, eight), eight);
      c1 = _mm_sub_epi8(_mm_xor_si128(c1, eight), eight);
    }
#if defined(QE_AVX512)
    vi q0 = _mm512_cvtepi8_epi32(c0), q1 = _mm512_cvtepi8_epi32(c1);
#else
    vi q0 = _mm256_cvtepi8_epi32(c0), q1 = _mm256_cvtepi8_epi32(_mm_srli_si128(c0, 8));
    (void)c1;
#endif
    /* DequantizeLinear's float arithmetic: ((float)q - zp) * scale. */
    f_st(dst, f_mul(f_sub(i2f(q0), z0), s0));
    f_st(dst + VL, f_mul(f_sub(i2f(q1), z1), s1));
  }
}

/* block_fma for MR rows, a constant in each instance: with the row count
 * read at run time the accumulators lived on the stack (a load and a store
 * around every FMA). */
static inline __attribute__((always_inline)) void block_fma_rows(const float *a, int64_t lda, const float *w,
                                                                 int64_t kn, float *acc, const int MR) {
  vf c[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < MR; r++) {
    c[r][0] = f_ld(acc + r * BNR);
    c[r][1] = f_ld(acc + r * BNR + VL);
  }
  for (int64_t k = 0; k < kn; k++) {
    vf w0 = f_ld(w + k * BNR), w1 = f_ld(w + k * BNR + VL);
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) {
      vf av = f_set(a[r * lda + k]);
      c[r][0] = f_fma(av, w0, c[r][0]);
      c[r][1] = f_fma(av, w1, c[r][1]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; r++) {
    f_st(acc + r * BNR, c[r][0]);
    f_st(acc + r * BNR + VL, c[r][1]);
  }
}

static void block_fma(const float *a, int64_t lda, int mr, const float *w, int64_t kn, float *acc) {
  switch (mr) {
    case 1: block_fma_rows(a, lda, w, kn, acc, 1); break;
    case 2: block_fma_rows(a, lda, w, kn, acc, 2); break;
    case 3: block_fma_rows(a, lda, w, kn, acc, 3); break;
    default: block_fma_rows(a, lda, w, kn, acc, 4); break;
  }
}

#if defined(QE_AVX512)
/* avg_plane_narrow (qelt.h): per output row, the window's input rows
 * summed in two int32 vectors (padded columns 0-31, each input row one
 * masked load at column -pl, padding lanes starting at the zero point
 * times the rows it stands for), then the kw shifted copies of that row
 * (valignd) added, divided and requantized in registers. Rows of 7x7 and
 * 14x14 maps went through buffers with masked stores and loads before,
 * which stall on store forwarding. */
static void avg_plane_narrow(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                             int64_t dh, int64_t kw, int64_t oh, int64_t ow, bool is_signed, int32_t xz, int32_t sub,
                             const float *cnt, float mult, int32_t yz, int32_t lo, int32_t hi, uint8_t *y) {
  const int64_t hn = ow + kw - 1;
  /* Input columns [0, cols) are padded columns pl ...; lanes of the row
   * that hold them. */
  const int64_t cols = w < hn - pl ? w : hn - pl;
  const uint32_t in_bits = (uint32_t)((cols >= 32 ? ~(uint64_t)0 : (((uint64_t)1 << cols) - 1)) << pl);
  const __mmask16 in_lo = (__mmask16)in_bits, in_hi = (__mmask16)(in_bits >> 16);
  const __mmask32 load_mask = (__mmask32)in_bits;
  const __mmask16 out_lo = mask16(ow < 16 ? ow : 16), out_hi = mask16(ow > 16 ? ow - 16 : 0);
  const vf m = f_set(mult), one = f_set(1.0f);
  const vi z = i_set(yz), l = i_set(lo), hv = i_set(hi), sb = i_set(sub), zero = _mm512_setzero_si512();
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t rows_in = 0;
    for (int64_t ky = 0; ky < kh; ky++) {
      int64_t iy = oy * sh - pt + ky * dh;
      rows_in += iy >= 0 && iy < h;
    }
    /* Padding columns stand for kh zero points, input columns for the
     * kh - rows_in rows of padding above or below. */
    const vi pad_col = i_set((int32_t)kh * xz), in_col = i_set((int32_t)(kh - rows_in) * xz);
    vi a0 = _mm512_mask_mov_epi32(pad_col, in_lo, in_col), a1 = _mm512_mask_mov_epi32(pad_col, in_hi, in_col);
    for (int64_t ky = 0; ky < kh; ky++) {
      int64_t iy = oy * sh - pt + ky * dh;
      if (iy < 0 || iy >= h) continue;
      /* Lanes outside the input are masked off and not read (integer
       * address arithmetic: the first lanes may lie before the row). */
      if (hn <= 16) {
        /* One 16-byte load (a 32-byte one spans two cache lines more
         * often); the upper vector's lanes are never stored. */
        __m128i b0 = _mm_maskz_loadu_epi8((__mmask16)load_mask, (const void *)((uintptr_t)(x + iy * w) - (uintptr_t)pl));
        a0 = i_add(a0, is_signed ? _mm512_cvtepi8_epi32(b0) : _mm512_cvtepu8_epi32(b0));
        continue;
      }
      __m256i b = _mm256_maskz_loadu_epi8(load_mask, (const void *)((uintptr_t)(x + iy * w) - (uintptr_t)pl));
      __m128i b0 = _mm256_castsi256_si128(b), b1 = _mm256_extracti128_si256(b, 1);
      a0 = i_add(a0, is_signed ? _mm512_cvtepi8_epi32(b0) : _mm512_cvtepu8_epi32(b0));
      a1 = i_add(a1, is_signed ? _mm512_cvtepi8_epi32(b1) : _mm512_cvtepu8_epi32(b1));
    }
    vi s0 = a0, s1 = a1;
    for (int64_t t = 1; t < kw; t++) {
      /* valignd takes its shift as an immediate. */
      __m512i r0, r1;
      switch (t) {
#define AVG_SHIFT(T)                                  \
  case T:                                             \
    r0 = _mm512_alignr_epi32(a1, a0, T);              \
    r1 = _mm512_alignr_epi32(zero, a1, T);            \
    break;
        AVG_SHIFT(1) AVG_SHIFT(2) AVG_SHIFT(3) AVG_SHIFT(4) AVG_SHIFT(5) AVG_SHIFT(6) AVG_SHIFT(7) AVG_SHIFT(8)
        AVG_SHIFT(9) AVG_SHIFT(10) AVG_SHIFT(11) AVG_SHIFT(12) AVG_SHIFT(13) AVG_SHIFT(14) AVG_SHIFT(15)
#undef AVG_SHIFT
        default: /* kw <= 16 (the caller's bound) */
          r0 = r1 = zero;
          break;
      }
      s0 = i_add(s0, r0);
      s1 = i_add(s1, r1);
    }
    const float *c = cnt + oy * ow;
    vf q0 = f_div(i2f(i_sub(s0, sb)), _mm512_mask_loadu_ps(one, out_lo, c));
    _mm512_mask_cvtepi32_storeu_epi8(y + oy * ow, out_lo, quant_vec(f_mul(q0, m), z, l, hv));
    if (ow > 16) {
      vf q1 = f_div(i2f(i_sub(s1, sb)), _mm512_mask_loadu_ps(one, out_hi, c + 16));
      _mm512_mask_cvtepi32_storeu_epi8(y + oy * ow + 16, out_hi, quant_vec(f_mul(q1, m), z, l, hv));
    }
  }
}
#define QE_AVG_PLANE_NARROW avg_plane_narrow

/* max_plane_s1 (qelt.h): an output row is one vector of up to 64 bytes;
 * each tap one masked load of the input row at the tap's column offset,
 * lanes whose column falls outside the row reading the type's minimum
 * (and not read). Inception-v2's 3x3 pool over 1024 x 7 x 7 took 250 us
 * through the row buffers (max_rows), mostly calls on 7-byte runs. */
static void max_plane_s1(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                         int64_t dh, int64_t kw, int64_t dw, int64_t oh, int64_t ow, bool is_signed, uint8_t *y) {
  const __m512i padv = _mm512_set1_epi8(is_signed ? (char)0x80 : 0);
  const uint64_t out_bits = ow >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << ow) - 1;
  /* Lane i of tap kx reads column i - pl + kx * dw: inside for i in
   * [pl - kx * dw, pl - kx * dw + w). */
  __mmask64 tap_mask[16];
  for (int64_t kx = 0; kx < kw; kx++) {
    int64_t lo = pl - kx * dw, hi = lo + w;
    if (lo < 0) lo = 0;
    if (hi > 64) hi = 64;
    uint64_t bits = 0;
    if (lo < hi) bits = (hi - lo >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << (hi - lo)) - 1)) << lo;
    tap_mask[kx] = (__mmask64)(bits & out_bits);
  }
  if (ow <= 16) {
    /* 16-byte loads: a 64-byte one at an unaligned address always spans
     * two cache lines: 1024 x 7 x 7 took 111 us, 62 us with these). */
    const __m128i pad16 = _mm512_castsi512_si128(padv);
    for (int64_t oy = 0; oy < oh; oy++) {
      __m128i acc = pad16;
      for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = oy * sh - pt + ky * dh;
        if (iy < 0 || iy >= h) continue;
        const uintptr_t row = (uintptr_t)(x + iy * w) - (uintptr_t)pl;
        for (int64_t kx = 0; kx < kw; kx++) {
          __m128i v = _mm_mask_loadu_epi8(pad16, (__mmask16)tap_mask[kx], (const void *)(row + (uintptr_t)(kx * dw)));
          acc = is_signed ? _mm_max_epi8(acc, v) : _mm_max_epu8(acc, v);
        }
      }
      _mm_mask_storeu_epi8(y + oy * ow, (__mmask16)out_bits, acc);
    }
    return;
  }
  for (int64_t oy = 0; oy < oh; oy++) {
    __m512i acc = padv;
    for (int64_t ky = 0; ky < kh; ky++) {
      int64_t iy = oy * sh - pt + ky * dh;
      if (iy < 0 || iy >= h) continue;
      const uintptr_t row = (uintptr_t)(x + iy * w) - (uintptr_t)pl;
      for (int64_t kx = 0; kx < kw; kx++) {
        __m512i v = _mm512_mask_loadu_epi8(padv, tap_mask[kx], (const void *)(row + (uintptr_t)(kx * dw)));
        acc = is_signed ? _mm512_max_epi8(acc, v) : _mm512_max_epu8(acc, v);
      }
    }
    _mm512_mask_storeu_epi8(y + oy * ow, (__mmask64)out_bits, acc);
  }
}
#define QE_MAX_PLANE_S1 max_plane_s1
#else
#define QE_AVG_PLANE_NARROW NULL
#define QE_MAX_PLANE_S1 NULL
#endif

const er_qelt_ops QE_OPS = {QE_NAME, dw_planes, dw_plane, quantize,  dequantize, qbinary,       max_u8,   sum_u8,
                            gather2, lut,       avg_quant, BNR,      block_dequant, block_fma, VL, dw_block, sum_bytes,
                            QE_MAX_PLANE_S2, QE_MAX_PLANE_S1, QE_AVG_PLANE_NARROW};
