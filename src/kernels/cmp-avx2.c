/* cmp-avx2.c - the comparison rows of eltwise.c's Equal, Greater, Less,
 * GreaterOrEqual and LessOrEqual kernels with AVX2: n results of a (stride
 * ia: 1 or 0) against b (ib), as bool bytes. Called only when
 * er__cpu_features() reports AVX2 (eltwise.c checks).
 *
 * float and int32: 16 elements per step, two 8-lane compares whose masks
 * are packed to 16 bytes. float uses the ordered, quiet predicates, so NaN
 * compares false as C's operators do in the reference. int64 keeps the
 * plain loop (index and shape arithmetic, short rows). */
#include <immintrin.h>

#include "kernels/vec.h"

enum { K_EQ, K_GT, K_LT, K_GE, K_LE };

#define AI static inline __attribute__((always_inline))

AI __m256i cmp8_i32(__m256i a, __m256i b, const int k) {
  const __m256i ones = _mm256_set1_epi32(-1);
  switch (k) {
    case K_EQ: return _mm256_cmpeq_epi32(a, b);
    case K_GT: return _mm256_cmpgt_epi32(a, b);
    case K_LT: return _mm256_cmpgt_epi32(b, a);
    case K_GE: return _mm256_xor_si256(_mm256_cmpgt_epi32(b, a), ones);
    default: return _mm256_xor_si256(_mm256_cmpgt_epi32(a, b), ones);
  }
}

AI __m256i cmp8_f32(__m256 a, __m256 b, const int k) {
  switch (k) {
    case K_EQ: return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_EQ_OQ));
    case K_GT: return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GT_OQ));
    case K_LT: return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_LT_OQ));
    case K_GE: return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GE_OQ));
    default: return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_LE_OQ));
  }
}

/* Two masks of 8 int32 lanes (0 or -1) as 16 bytes 0/1, in order. */
AI void store16(uint8_t *y, __m256i m0, __m256i m1) {
  __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(m0, m1), 0xD8);
  __m128i b = _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
  _mm_storeu_si128((__m128i *)(void *)y, _mm_and_si128(b, _mm_set1_epi8(1)));
}

#define SCALAR_CMP(x, y, k) \
  ((k) == K_EQ ? (x) == (y) : (k) == K_GT ? (x) > (y) : (k) == K_LT ? (x) < (y) : (k) == K_GE ? (x) >= (y) : (x) <= (y))

AI void row_i32(const void *av, int64_t ia, const void *bv, int64_t ib, uint8_t *y, int64_t n, const int k) {
  const int32_t *a = av, *b = bv;
  const __m256i sa = _mm256_set1_epi32(a[0]), sb = _mm256_set1_epi32(b[0]);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i a0 = ia ? _mm256_loadu_si256((const __m256i *)(const void *)(a + i)) : sa;
    __m256i a1 = ia ? _mm256_loadu_si256((const __m256i *)(const void *)(a + i + 8)) : sa;
    __m256i b0 = ib ? _mm256_loadu_si256((const __m256i *)(const void *)(b + i)) : sb;
    __m256i b1 = ib ? _mm256_loadu_si256((const __m256i *)(const void *)(b + i + 8)) : sb;
    store16(y + i, cmp8_i32(a0, b0, k), cmp8_i32(a1, b1, k));
  }
  for (; i < n; i++) y[i] = (uint8_t)SCALAR_CMP(a[ia ? i : 0], b[ib ? i : 0], k);
}

AI void row_f32(const void *av, int64_t ia, const void *bv, int64_t ib, uint8_t *y, int64_t n, const int k) {
  const float *a = av, *b = bv;
  const __m256 sa = _mm256_set1_ps(a[0]), sb = _mm256_set1_ps(b[0]);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a0 = ia ? _mm256_loadu_ps(a + i) : sa, a1 = ia ? _mm256_loadu_ps(a + i + 8) : sa;
    __m256 b0 = ib ? _mm256_loadu_ps(b + i) : sb, b1 = ib ? _mm256_loadu_ps(b + i + 8) : sb;
    store16(y + i, cmp8_f32(a0, b0, k), cmp8_f32(a1, b1, k));
  }
  for (; i < n; i++) y[i] = (uint8_t)SCALAR_CMP(a[ia ? i : 0], b[ib ? i : 0], k);
}

AI void row_i64(const void *av, int64_t ia, const void *bv, int64_t ib, uint8_t *y, int64_t n, const int k) {
  const int64_t *a = av, *b = bv;
  for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)SCALAR_CMP(a[ia ? i : 0], b[ib ? i : 0], k);
}

#define ROWS(T)                                                                                          \
  static void T##_eq(const void *a, int64_t ia, const void *b, int64_t ib, uint8_t *y, int64_t n) {     \
    row_##T(a, ia, b, ib, y, n, K_EQ);                                                                   \
  }                                                                                                      \
  static void T##_gt(const void *a, int64_t ia, const void *b, int64_t ib, uint8_t *y, int64_t n) {     \
    row_##T(a, ia, b, ib, y, n, K_GT);                                                                   \
  }                                                                                                      \
  static void T##_lt(const void *a, int64_t ia, const void *b, int64_t ib, uint8_t *y, int64_t n) {     \
    row_##T(a, ia, b, ib, y, n, K_LT);                                                                   \
  }                                                                                                      \
  static void T##_ge(const void *a, int64_t ia, const void *b, int64_t ib, uint8_t *y, int64_t n) {     \
    row_##T(a, ia, b, ib, y, n, K_GE);                                                                   \
  }                                                                                                      \
  static void T##_le(const void *a, int64_t ia, const void *b, int64_t ib, uint8_t *y, int64_t n) {     \
    row_##T(a, ia, b, ib, y, n, K_LE);                                                                   \
  }
ROWS(f32)
ROWS(i32)
ROWS(i64)

/* [float, int32, int64][==, >, <, >=, <=], as eltwise.c's cmp_kind. */
const er_cmp_row_fn er__cmp_rows_avx2[3][ER_CMP_KINDS] = {
    {f32_eq, f32_gt, f32_lt, f32_ge, f32_le},
    {i32_eq, i32_gt, i32_lt, i32_ge, i32_le},
    {i64_eq, i64_gt, i64_lt, i64_ge, i64_le},
};
