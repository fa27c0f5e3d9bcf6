/* simd.h - one small vector vocabulary over AVX-512, AVX2+FMA and NEON, so
 * that the elementwise, activation, normalization, pooling and depthwise
 * kernels are written once (vec-impl.h) and compiled once per ISA.
 *
 * Include it only from an ISA file (*-avx512.c, *-avx2.c, *-neon.c), after
 * defining exactly one of ER_SIMD_AVX512, ER_SIMD_AVX2 or ER_SIMD_NEON; the
 * CMake rules give those files the matching -m flags. Everything here is
 * static inline, so the same names compile to different code per file.
 *
 * Conventions: vf is a vector of VN floats, vm a lane mask. v_max(a, b) and
 * v_min(a, b) follow the x86 rule "a > b ? a : b": when either lane is NaN
 * they return b, so callers put the data operand second to propagate NaN
 * (as the reference kernels do). Partial loads read only the first n lanes
 * and fill the rest with zeros; partial stores write only the first n. */
#ifndef ER_KERNELS_SIMD_H
#define ER_KERNELS_SIMD_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(ER_SIMD_AVX512)
/* ======================================================================== */
/* AVX-512 (F, BW, VL, DQ): 16 lanes                                         */
/* ======================================================================== */
#include <immintrin.h>

#define ER_ISA_NAME "avx512"
#define ER_ISA_FN(name) name##__avx512
#define VN 16

typedef __m512 vf;
typedef __mmask16 vm;
typedef __m512i vi;

static inline __mmask16 tail_mask(int n) { return (__mmask16)((1u << n) - 1u); }
static inline vf v_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline vf v_ld_n(const float *p, int n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
static inline void v_st(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline void v_st_n(float *p, vf v, int n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
static inline vf v_set(float x) { return _mm512_set1_ps(x); }
static inline vf v_zero(void) { return _mm512_setzero_ps(); }
static inline vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf v_div(vf a, vf b) { return _mm512_div_ps(a, b); }
/* 1 / d within about an ulp for finite normal d whose reciprocal is
 * normal: the 14-bit estimate and one Newton step, no division. */
static inline vf v_recip(vf d) {
  vf r = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
}
static inline vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   /* a*b + c */
static inline vf v_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a*b */
static inline vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf v_min(vf a, vf b) { return _mm512_min_ps(a, b); }
static inline vf v_sqrt(vf a) { return _mm512_sqrt_ps(a); }
static inline vf v_abs(vf a) { return _mm512_abs_ps(a); }
static inline vf v_neg(vf a) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
}
/* Copies the sign of s onto the magnitude of m. */
static inline vf v_copysign(vf m, vf s) {
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_set1_epi32(INT32_MAX),
                                                       _mm512_castps_si512(m),
                                                       _mm512_castps_si512(s), 0xca));
}
static inline vm v_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline vm v_le(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
static inline vm v_ge(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
static inline vm v_isnan(vf a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
static inline vf v_sel(vm m, vf if_false, vf if_true) { return _mm512_mask_blend_ps(m, if_false, if_true); }
static inline bool v_any(vm m) { return m != 0; }
/* Lane i of the result is lane idx[i] of x (idx: VN values in [0, VN)). */
static inline vf v_permute(vf x, const int32_t *idx) {
  return _mm512_permutexvar_ps(_mm512_loadu_si512((const void *)idx), x);
}
/* Lanes [lo, hi) loaded from p (only those are read), the others `fill`;
 * lo and hi are clamped to [0, VN]. */
static inline vf v_ld_range(const float *p, int lo, int hi, vf fill) {
  lo = lo < 0 ? 0 : lo > VN ? VN : lo;
  hi = hi < lo ? lo : hi > VN ? VN : hi;
  __mmask16 m = (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
  return _mm512_mask_loadu_ps(fill, m, p);
}
/* Round to nearest, ties to even. */
static inline vf v_round(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf v_floor(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
/* 2^n for integer-valued n in [-126, 127]. */
static inline vf v_pow2i(vf n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
/* x * 2^n for integer-valued n, rounded once (vscalefps: denormal and
 * overflowing results come out as the product would). */
static inline vf v_ldexp(vf x, vf n) { return _mm512_scalef_ps(x, n); }
/* For positive normal x: x = m * 2^e with m in [1, 2). */
static inline vf v_getexp(vf x) { return _mm512_getexp_ps(x); }
static inline vf v_getmant(vf x) { return _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src); }
static inline float v_hsum(vf a) { return _mm512_reduce_add_ps(a); }
static inline float v_hmax(vf a) { return _mm512_reduce_max_ps(a); }
/* Splits 2 VN floats at p into even and odd elements. */
static inline void v_deinterleave2(const float *p, vf *even, vf *odd) {
  vf a = v_ld(p), b = v_ld(p + VN);
  *even = _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
  *odd = _mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
}
/* Even and odd elements of the 2 VN floats a, b (registers). */
static inline void v_uzp(vf a, vf b, vf *even, vf *odd) {
  *even = _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
  *odd = _mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
}
/* The inverse: *lo and *hi take a0 b0 a1 b1 ... */
static inline void v_interleave2(vf a, vf b, vf *lo, vf *hi) {
  *lo = _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), b);
  *hi = _mm512_permutex2var_ps(a, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), b);
}
/* Loads VN floats at p[0], p[s], p[2s], ... */
static inline vf v_ld_stride(const float *p, int64_t s) {
  if (s == 1) return v_ld(p);
  vi idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32((int)s));
  return _mm512_i32gather_ps(idx, p, 4);
}

/* Transposes the VN x VN block r[i][j] in place (r[j][i] after). */
static inline __attribute__((always_inline)) void v_transpose(vf r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  /* u[4g + m], 128-bit lane k: rows 4g .. 4g + 3 of column 4k + m. */
  __m512 u[16];
  for (int g = 0; g < 16; g += 4) {
    __m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 2]);
    __m512d c = _mm512_castps_pd(t[g + 1]), d = _mm512_castps_pd(t[g + 3]);
    u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  for (int m = 0; m < 4; m++) {
    __m512 v0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x44), v1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xEE);
    __m512 v2 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x44), v3 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xEE);
    r[m] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[4 + m] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[8 + m] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + m] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

#elif defined(ER_SIMD_AVX2)
/* ======================================================================== */
/* AVX2 + FMA: 8 lanes                                                       */
/* ======================================================================== */
#include <immintrin.h>

#define ER_ISA_NAME "avx2"
#define ER_ISA_FN(name) name##__avx2
#define VN 8

typedef __m256 vf;
typedef __m256 vm;
typedef __m256i vi;

static inline __m256i tail_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline vf v_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline vf v_ld_n(const float *p, int n) { return _mm256_maskload_ps(p, tail_mask(n)); }
static inline void v_st(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline void v_st_n(float *p, vf v, int n) { _mm256_maskstore_ps(p, tail_mask(n), v); }
static inline vf v_set(float x) { return _mm256_set1_ps(x); }
static inline vf v_zero(void) { return _mm256_setzero_ps(); }
static inline vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf v_div(vf a, vf b) { return _mm256_div_ps(a, b); }
/* The 12-bit estimate and two Newton steps. */
static inline vf v_recip(vf d) {
  vf one = _mm256_set1_ps(1.0f), r = _mm256_rcp_ps(d);
  r = _mm256_fmadd_ps(r, _mm256_fnmadd_ps(d, r, one), r);
  return _mm256_fmadd_ps(r, _mm256_fnmadd_ps(d, r, one), r);
}
static inline vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf v_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf v_min(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vf v_sqrt(vf a) { return _mm256_sqrt_ps(a); }
static inline vf v_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf v_neg(vf a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
static inline vf v_copysign(vf m, vf s) {
  __m256 sign = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(sign, m), _mm256_and_ps(sign, s));
}
static inline vm v_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline vm v_le(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
static inline vm v_ge(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
static inline vm v_isnan(vf a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
static inline vf v_sel(vm m, vf if_false, vf if_true) { return _mm256_blendv_ps(if_false, if_true, m); }
static inline bool v_any(vm m) { return _mm256_movemask_ps(m) != 0; }
static inline vf v_permute(vf x, const int32_t *idx) {
  return _mm256_permutevar8x32_ps(x, _mm256_loadu_si256((const __m256i *)idx));
}
static inline vf v_ld_range(const float *p, int lo, int hi, vf fill) {
  __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(iota, _mm256_set1_epi32(lo - 1)),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), iota));
  return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline vf v_round(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf v_floor(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
static inline vf v_pow2i(vf n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
/* x * 2^n for integer-valued n in [-252, 254]: two normal halves. */
static inline vf v_ldexp(vf x, vf n) {
  vf n1 = _mm256_floor_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)));
  return _mm256_mul_ps(_mm256_mul_ps(x, v_pow2i(n1)), v_pow2i(_mm256_sub_ps(n, n1)));
}
static inline vf v_getexp(vf x) {
  __m256i e = _mm256_srli_epi32(_mm256_castps_si256(x), 23);
  return _mm256_cvtepi32_ps(_mm256_sub_epi32(e, _mm256_set1_epi32(127)));
}
static inline vf v_getmant(vf x) {
  __m256i m = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x007fffff));
  return _mm256_castsi256_ps(_mm256_or_si256(m, _mm256_set1_epi32(0x3f800000)));
}
static inline float v_hsum(vf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
static inline float v_hmax(vf a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
static inline void v_deinterleave2(const float *p, vf *even, vf *odd) {
  vf a = v_ld(p), b = v_ld(p + VN);
  __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}
static inline void v_uzp(vf a, vf b, vf *even, vf *odd) {
  __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}
static inline void v_interleave2(vf a, vf b, vf *lo, vf *hi) {
  __m256 l = _mm256_unpacklo_ps(a, b), h = _mm256_unpackhi_ps(a, b); /* a0 b0 a1 b1 | a4 b4 a5 b5 */
  *lo = _mm256_permute2f128_ps(l, h, 0x20);
  *hi = _mm256_permute2f128_ps(l, h, 0x31);
}
static inline vf v_ld_stride(const float *p, int64_t s) {
  if (s == 1) return v_ld(p);
  __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)s));
  return _mm256_i32gather_ps(p, idx, 4);
}

/* Transposes the VN x VN block r[i][j] in place (r[j][i] after). */
static inline __attribute__((always_inline)) void v_transpose(vf r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  /* u[4g + m], 128-bit lane k: rows 4g .. 4g + 3 of column 4k + m. */
  for (int g = 0; g < 8; g += 4) {
    __m256d a = _mm256_castps_pd(t[g]), b = _mm256_castps_pd(t[g + 2]);
    __m256d c = _mm256_castps_pd(t[g + 1]), d = _mm256_castps_pd(t[g + 3]);
    u[g] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, b));
    u[g + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, b));
    u[g + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(c, d));
    u[g + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(c, d));
  }
  for (int m = 0; m < 4; m++) {
    r[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
    r[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
  }
}

#elif defined(ER_SIMD_NEON)
/* ======================================================================== */
/* AArch64 NEON: 4 lanes                                                     */
/* ======================================================================== */
#include <arm_neon.h>

#define ER_ISA_NAME "neon"
#define ER_ISA_FN(name) name##__neon
#define VN 4

typedef float32x4_t vf;
typedef uint32x4_t vm;

static inline vf v_ld(const float *p) { return vld1q_f32(p); }
static inline vf v_ld_n(const float *p, int n) {
  float t[4] = {0, 0, 0, 0};
  memcpy(t, p, (size_t)n * sizeof *t);
  return vld1q_f32(t);
}
static inline void v_st(float *p, vf v) { vst1q_f32(p, v); }
static inline void v_st_n(float *p, vf v, int n) {
  float t[4];
  vst1q_f32(t, v);
  memcpy(p, t, (size_t)n * sizeof *t);
}
static inline vf v_set(float x) { return vdupq_n_f32(x); }
static inline vf v_zero(void) { return vdupq_n_f32(0.0f); }
static inline vf v_add(vf a, vf b) { return vaddq_f32(a, b); }
static inline vf v_sub(vf a, vf b) { return vsubq_f32(a, b); }
static inline vf v_mul(vf a, vf b) { return vmulq_f32(a, b); }
static inline vf v_div(vf a, vf b) { return vdivq_f32(a, b); }
/* The 8-bit estimate and three Newton steps. */
static inline vf v_recip(vf d) {
  vf r = vrecpeq_f32(d);
  r = vmulq_f32(vrecpsq_f32(d, r), r);
  r = vmulq_f32(vrecpsq_f32(d, r), r);
  return vmulq_f32(vrecpsq_f32(d, r), r);
}
static inline vf v_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
static inline vf v_fnma(vf a, vf b, vf c) { return vfmsq_f32(c, a, b); }
/* The x86 rule, so NaN handling matches the other ISAs. */
static inline vf v_max(vf a, vf b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
static inline vf v_min(vf a, vf b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
static inline vf v_sqrt(vf a) { return vsqrtq_f32(a); }
static inline vf v_abs(vf a) { return vabsq_f32(a); }
static inline vf v_neg(vf a) { return vnegq_f32(a); }
static inline vf v_copysign(vf m, vf s) { return vbslq_f32(vdupq_n_u32(0x80000000u), s, m); }
static inline vm v_lt(vf a, vf b) { return vcltq_f32(a, b); }
static inline vm v_le(vf a, vf b) { return vcleq_f32(a, b); }
static inline vm v_ge(vf a, vf b) { return vcgeq_f32(a, b); }
static inline vm v_isnan(vf a) { return vmvnq_u32(vceqq_f32(a, a)); }
static inline vf v_sel(vm m, vf if_false, vf if_true) { return vbslq_f32(m, if_true, if_false); }
static inline bool v_any(vm m) { return vmaxvq_u32(m) != 0; }
static inline vf v_permute(vf x, const int32_t *idx) {
  float t[4], r[4];
  vst1q_f32(t, x);
  for (int i = 0; i < 4; i++) r[i] = t[idx[i] & 3];
  return vld1q_f32(r);
}
static inline vf v_ld_range(const float *p, int lo, int hi, vf fill) {
  float t[4];
  vst1q_f32(t, fill);
  for (int i = lo < 0 ? 0 : lo; i < hi && i < 4; i++) t[i] = p[i];
  return vld1q_f32(t);
}
static inline vf v_round(vf a) { return vrndnq_f32(a); }
static inline vf v_floor(vf a) { return vrndmq_f32(a); }
static inline vf v_pow2i(vf n) {
  return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23));
}
/* x * 2^n for integer-valued n in [-252, 254]: two normal halves. */
static inline vf v_ldexp(vf x, vf n) {
  vf n1 = vrndmq_f32(vmulq_f32(n, vdupq_n_f32(0.5f)));
  return vmulq_f32(vmulq_f32(x, v_pow2i(n1)), v_pow2i(vsubq_f32(n, n1)));
}
static inline vf v_getexp(vf x) {
  int32x4_t e = vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_f32(x), 23));
  return vcvtq_f32_s32(vsubq_s32(e, vdupq_n_s32(127)));
}
static inline vf v_getmant(vf x) {
  uint32x4_t m = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x007fffff));
  return vreinterpretq_f32_u32(vorrq_u32(m, vdupq_n_u32(0x3f800000)));
}
static inline float v_hsum(vf a) { return vaddvq_f32(a); }
static inline float v_hmax(vf a) { return vmaxvq_f32(a); }
static inline void v_deinterleave2(const float *p, vf *even, vf *odd) {
  vf a = v_ld(p), b = v_ld(p + VN);
  *even = vuzp1q_f32(a, b);
  *odd = vuzp2q_f32(a, b);
}
static inline void v_uzp(vf a, vf b, vf *even, vf *odd) {
  *even = vuzp1q_f32(a, b);
  *odd = vuzp2q_f32(a, b);
}
static inline void v_interleave2(vf a, vf b, vf *lo, vf *hi) {
  *lo = vzip1q_f32(a, b);
  *hi = vzip2q_f32(a, b);
}
static inline vf v_ld_stride(const float *p, int64_t s) {
  float t[4] = {p[0], p[s], p[2 * s], p[3 * s]};
  return vld1q_f32(t);
}

/* Transposes the VN x VN block r[i][j] in place (r[j][i] after). */
static inline __attribute__((always_inline)) void v_transpose(vf r[4]) {
  float32x4_t t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
  float32x4_t t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
  r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
  r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
  r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
  r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

#else
#error "define ER_SIMD_AVX512, ER_SIMD_AVX2 or ER_SIMD_NEON before including simd.h"
#endif

#endif /* ER_KERNELS_SIMD_H */
