/* qelt-block-impl.h - block-wise 4-bit weights: dequantized panels and
 * their products, written once over the vector primitives of qelt-impl.h
 * and compiled per ISA; included by qelt-impl.h. */

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
