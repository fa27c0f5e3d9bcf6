/* qelt-impl.h - the loops of qelt.h, written once and compiled per ISA by
 * qelt-avx512.c and qelt-avx2.c, which define QE_AVX512 or QE_AVX2 before
 * including it. This file holds the vector primitives of each ISA and
 * the table; the loops are one family per header, included below. Vector bodies cover whole vectors; the few elements left
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

#include "kernels/qelt-dw-impl.h"
#include "kernels/qelt-q-impl.h"
#include "kernels/qelt-pool-impl.h"
#include "kernels/qelt-lut-impl.h"
#include "kernels/qelt-block-impl.h"

const er_qelt_ops QE_OPS = {QE_NAME, dw_planes, dw_plane, quantize,  dequantize, qbinary,       max_u8,   sum_u8,
                            gather2, lut,       avg_quant, BNR,      block_dequant, block_fma, VL, dw_block, sum_bytes,
                            QE_MAX_PLANE_S2, QE_MAX_PLANE_S1, QE_AVG_PLANE_NARROW};
