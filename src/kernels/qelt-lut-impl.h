/* qelt-lut-impl.h - byte gathers and 256-entry table lookups, written once
 * over the vector primitives of qelt-impl.h and compiled per ISA; included
 * by qelt-impl.h. */

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
