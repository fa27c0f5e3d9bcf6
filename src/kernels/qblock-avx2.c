/* qblock-avx2.c - the block-quantized products and activation quantizers
 * for AVX2 + FMA + F16C. Called only when er__cpu_features() reports all
 * three (qblock.c).
 *
 * Decode (one activation row, a GEMV) reads every weight byte once and is
 * bound by memory bandwidth, so the kernels spend as few instructions per
 * weight byte as they can and keep the memory system busy:
 *  - 4 weight rows per pass share each activation block and one
 *    conversion of their 4 fp16 scales; each row's sum stays in float
 *    lanes until one horizontal sum at the end;
 *  - Q4_0 / Q4_1 / Q5_0 / Q5_1 pack the 4 rows into the lanes of one
 *    accumulator (tile_q45), and a GEMV prepares the activation side of
 *    every block once per call for all rows;
 *  - each tile prefetches the next tile's rows (prefetch_next).
 * Prefill (several activation rows) runs a register tile of 4 weight rows
 * x T activation rows, so each weight block is unpacked once for T tokens,
 * over row chunks sized to stay in L2 while every activation tile passes
 * over them. T = 4, or 3 for the float weights: the best of 2, 3 and 4 at
 * k = 1536, n = 576, m = 64 on Zen 3 (some accumulators then spill, which
 * costs less than unpacking the weights for fewer tokens).
 *
 * Integer products use vpmaddubsw (unsigned x signed bytes, pairs summed
 * into int16) and vpmaddwd (pairs into int32), exact throughout:
 *  - Q4_x / Q5_x weights are the unsigned operand as stored (0..15, 0..31);
 *    Q4_0 / Q5_0's offset (8, 16) times the activation's sums is taken off
 *    the int16 lanes. A lane holds at most 4 products (4 * 31 * 127), 8
 *    after the first vpmaddwd (31496, so the narrowing vpackssdw cannot
 *    saturate).
 *  - Q8_0 weights are signed: |w| (unsigned) against x with w's sign
 *    (vpsignb), exact also for a stored -128 (|w| = 128, 2 * 128 * 127 <
 *    32767); activations are never -128 (their quantizer stays in
 *    [-127, 127]).
 *  - K-quants: the 6- or 8-bit sub-block scales enter through vpmaddwd
 *    against the int16 pair sums, so a super-block's whole integer sum is
 *    exact in int32 before its one float scale.
 *
 * Every (weight row, activation row) result is computed by the same
 * sequence of operations whatever the tile it falls in (a tile of fewer
 * than 4 rows computes repeats of its last row), so results do not depend
 * on how rows are split over calls or workers, nor on the number of
 * activation rows: a token's logits are the same in a batch and alone.
 * They differ from the reference (qblock.c) in the order the per-block
 * float terms are summed and, for the minimums of Q4_1 / Q5_1 / Q4_K /
 * Q5_K, in where those terms are rounded (tests/llm/test-qblock.c bounds
 * the difference). */
#include <immintrin.h>

#include "kernels/qblock-impl.h"

/* Every helper is inlined into its kernel: GCC otherwise calls some of
 * them per block. */
#define QB_INLINE static inline __attribute__((always_inline))

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

QB_INLINE uint16_t f2h(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

QB_INLINE float f32_at(const uint8_t *p) {
  float f;
  memcpy(&f, p, sizeof f);
  return f;
}

QB_INLINE __m256i load256(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* The sum of the 8 lanes, in one fixed order. */
QB_INLINE float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

QB_INLINE uint64_t u16_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof h);
  return h;
}

QB_INLINE uint64_t u32_at(const uint8_t *p) {
  uint32_t u;
  memcpy(&u, p, sizeof u);
  return u;
}

/* Prefetching. A tile reads its 4 rows as 4 streams, each as short as a
 * row (360 bytes for SmolLM2's Q4_1 rows), too short for the hardware
 * prefetchers to follow: measured on Zen 3, GEMVs over rows of 576 to 1536
 * elements ran at 30 to 55% of a streaming read without help. So each
 * tile, while it runs, prefetches the next tile's rows (4 rows, contiguous
 * in memory) front to back, at the pace it consumes its own: per step the
 * cache lines of the 4 rows' blocks of that step. */
QB_INLINE int lines_per_step(int block_bytes) { return (4 * block_bytes + 63) / 64; }

QB_INLINE void prefetch_next(const uint8_t *pf, int64_t step, const int lines) {
#pragma GCC unroll 12
  for (int j = 0; j < lines; j++) _mm_prefetch((const char *)pf + ((size_t)step * (size_t)lines + (size_t)j) * 64, _MM_HINT_T0);
}

/* ======================================================================== */
/* The 32-element types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0                        */
/* ======================================================================== */

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

QB_INLINE int wbytes(const int K) { return K == K_Q4_0 ? 18 : K == K_Q4_1 ? 20 : K == K_Q5_0 ? 22 : K == K_Q5_1 ? 24 : 34; }
QB_INLINE bool has_min(const int K) { return K == K_Q4_1 || K == K_Q5_1; }
/* The offset of the unsigned quants (x = d * (q - off)). */
QB_INLINE int qoff(const int K) { return K == K_Q4_0 ? 8 : K == K_Q5_0 ? 16 : 0; }
/* Activation blocks: Q8_1 (d, s, qs) for the types with a minimum, else
 * Q8_0 (d, qs). */
QB_INLINE int xbytes(const int K) { return has_min(K) ? 36 : 34; }
QB_INLINE int xqs(const int K) { return has_min(K) ? 4 : 2; }

/* ---- Q8_0: one row per accumulator ------------------------------------------
 *
 * A tile of 4 weight rows x T activation rows over nb blocks; a tile of
 * fewer rows (R < 4) runs the same code on repeats of its last row and
 * stores R results, so a row's arithmetic is the same in every tile.
 * y[t * ldy + r] for the tile's rows; w and x at the tile's first rows.
 * Per block the 4 rows' fp16 scales are gathered into one vector in
 * integer registers and converted at once; their products with the
 * activation's scale go through memory to vbroadcastss (a load, not a
 * shuffle), so a row pays about one vector instruction for its scale. */
QB_INLINE void tile_q8_0(const int R, const int T, const uint8_t *w, size_t wrb, const uint8_t *x, size_t xrb, int64_t nb,
                  float *y, int64_t ldy, const uint8_t *pf) {
  const __m256i ones16 = _mm256_set1_epi16(1);
  const uint8_t *wr[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++) wr[r] = w + (size_t)(r < R ? r : R - 1) * wrb;
  __m256 acc[4][4];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; b++) {
    const size_t wo = (size_t)b * 34;
    if (pf) prefetch_next(pf, b, lines_per_step(34));
    const uint64_t d = u16_at(wr[0] + wo) | u16_at(wr[1] + wo) << 16 | u16_at(wr[2] + wo) << 32 |
                       u16_at(wr[3] + wo) << 48;
    const __m128 dw4 = _mm_cvtph_ps(_mm_set_epi64x(0, (long long)d));
    const uint8_t *xb[4];
    float sc[4][4]; /* per activation row: the rows' d * dx */
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      xb[t] = x + (size_t)t * xrb + (size_t)b * 34;
      _mm_storeu_ps(sc[t], _mm_mul_ps(dw4, _mm_set1_ps(_cvtsh_ss((uint16_t)u16_at(xb[t])))));
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const __m256i q = load256(wr[r] + wo + 2), qa = _mm256_abs_epi8(q);
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) {
        const __m256i p16 = _mm256_maddubs_epi16(qa, _mm256_sign_epi8(load256(xb[t] + 2), q));
        const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones16));
        acc[r][t] = _mm256_fmadd_ps(p, _mm256_broadcast_ss(&sc[t][r]), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) y[t * ldy + r] = hsum_ps(acc[r][t]);
  }
}

/* ---- Q4_0, Q4_1, Q5_0, Q5_1: 4 rows per vector ----------------------------
 *
 * The 4-bit types spend most of their instructions per weight byte on
 * unpacking and on per-block bookkeeping, so their tile packs the 4 rows
 * into the lanes of one accumulator: rows A, B in one vector's halves (the
 * 16 quant bytes of each, low nibbles = elements 0..15 against the
 * activation's first 16 bytes in both halves, high nibbles against the
 * last 16), rows C, D in another; the int16 pair sums of both nibble halves
 * are added (4 products per lane), widened by vpmaddwd (8 per lane) and the
 * two vectors narrowed together by vpackssdw and vpmaddwd into one vector
 * of 16-product sums, lanes [A A C C | B B D D]. One conversion and one
 * multiply-add per block then serve all 4 rows, the scale vector
 * (sA sA sC sC | sB sB sD sD) coming from the 4 rows' fp16 scales converted
 * together. Every lane sum is exact: 16 products of at most 31 * 127, and
 * 8 (at most 31496) before the narrowing. Two accumulators per activation
 * row, for even and odd blocks, keep the multiply-adds from waiting on each
 * other. A row's lanes compute the same operations in every position and
 * tile, so results do not depend on the tile. */

#define QB_HOIST_BLOCKS 256 /* a GEMV prepares its activation once per call for k <= 8192 (16 KiB of stack) */

/* The activation side of one block, prepared once per call for a GEMV:
 * its scale (and s, for Q8_1) and the offset's share of each int16 lane. */
typedef struct act_prep {
  float ds[2];   /* dx (, sx) */
  __m256i c;     /* off * (x_2i + x_2i+1 + x_16+2i + x_17+2i), both halves */
} act_prep;

QB_INLINE int qs_at(const int K) { return K == K_Q4_0 ? 2 : K == K_Q4_1 ? 4 : K == K_Q5_0 ? 6 : 8; }
QB_INLINE int qh_at(const int K) { return K == K_Q5_0 ? 2 : 4; }

/* Rows p (low half) and q (high half): 16 bytes of each. */
QB_INLINE __m256i load_pair(const uint8_t *p, const uint8_t *q) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                 _mm_loadu_si128((const __m128i *)q), 1);
}

/* Q5's fifth bits of a pair of rows as 0x10 bytes: lo for elements 0..15
 * (bits 0..15 of each row's word), hi for 16..31. */
QB_INLINE void high_bits_pair(const uint8_t *qp, const uint8_t *qq, __m256i *lo, __m256i *hi) {
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_cvtsi32_si128((int)u32_at(qp))),
                                            _mm_cvtsi32_si128((int)u32_at(qq)), 1);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  const __m256i s01 = _mm256_setr_epi64x(0, 0x0101010101010101, 0, 0x0101010101010101);
  const __m256i s23 = _mm256_setr_epi64x(0x0202020202020202, 0x0303030303030303, 0x0202020202020202,
                                         0x0303030303030303);
  const __m256i x10 = _mm256_set1_epi8(0x10);
  *lo = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, s01), bit), bit), x10);
  *hi = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, s23), bit), bit), x10);
}

/* The activation side of block xb (d, [s,] qs) as act_prep. */
QB_INLINE act_prep prep_act(const int K, const uint8_t *xb) {
  act_prep a;
  a.ds[0] = _cvtsh_ss((uint16_t)u16_at(xb));
  a.ds[1] = has_min(K) ? _cvtsh_ss((uint16_t)u16_at(xb + 2)) : 0.0f;
  a.c = _mm256_setzero_si256();
  if (qoff(K)) {
    const __m256i xl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xb + xqs(K))));
    const __m256i xh = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xb + xqs(K) + 16)));
    const __m256i off = _mm256_set1_epi8((char)qoff(K));
    a.c = _mm256_add_epi16(_mm256_maddubs_epi16(off, xl), _mm256_maddubs_epi16(off, xh));
  }
  return a;
}

/* One block of the 4 rows wr[] (at byte offset wo) against T activation
 * rows: xb[t] their blocks, ap[t] their prepared sides (NULL: prepare
 * here), into acc[t]; accm[t] gathers the minimums' terms. */
QB_INLINE void step_q45(const int K, const int T, const uint8_t *const wr[4], size_t wo, const uint8_t *const xb[4],
                 const act_prep *const ap[4], __m256 acc[4], __m256 accm[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
  const uint8_t *a = wr[0] + wo, *b = wr[1] + wo, *c = wr[2] + wo, *d = wr[3] + wo;
  /* Scales: (dA dB dC dD) or (dA mA dB mB dC mC dD mD). */
  __m128 dw4 = _mm_setzero_ps();
  __m256 dm8 = _mm256_setzero_ps();
  if (has_min(K)) {
    const uint64_t lo = u32_at(a) | u32_at(b) << 32, hi = u32_at(c) | u32_at(d) << 32;
    dm8 = _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
  } else {
    const uint64_t h = u16_at(a) | u16_at(b) << 16 | u16_at(c) << 32 | u16_at(d) << 48;
    dw4 = _mm_cvtph_ps(_mm_set_epi64x(0, (long long)h));
  }
  const __m256i vab = load_pair(a + qs_at(K), b + qs_at(K)), vcd = load_pair(c + qs_at(K), d + qs_at(K));
  __m256i lab = _mm256_and_si256(vab, m4), hab = _mm256_and_si256(_mm256_srli_epi16(vab, 4), m4);
  __m256i lcd = _mm256_and_si256(vcd, m4), hcd = _mm256_and_si256(_mm256_srli_epi16(vcd, 4), m4);
  if (K == K_Q5_0 || K == K_Q5_1) {
    __m256i l5, h5;
    high_bits_pair(a + qh_at(K), b + qh_at(K), &l5, &h5);
    lab = _mm256_or_si256(lab, l5);
    hab = _mm256_or_si256(hab, h5);
    high_bits_pair(c + qh_at(K), d + qh_at(K), &l5, &h5);
    lcd = _mm256_or_si256(lcd, l5);
    hcd = _mm256_or_si256(hcd, h5);
  }
  const __m256i idx = has_min(K) ? _mm256_setr_epi32(0, 0, 4, 4, 2, 2, 6, 6) : _mm256_setr_epi32(0, 0, 2, 2, 1, 1, 3, 3);
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
    act_prep local;
    const act_prep *p = ap[t];
    if (!p) {
      local = prep_act(K, xb[t]);
      p = &local;
    }
    const __m256i xl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xb[t] + xqs(K))));
    const __m256i xh = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xb[t] + xqs(K) + 16)));
    __m256i pab = _mm256_add_epi16(_mm256_maddubs_epi16(lab, xl), _mm256_maddubs_epi16(hab, xh));
    __m256i pcd = _mm256_add_epi16(_mm256_maddubs_epi16(lcd, xl), _mm256_maddubs_epi16(hcd, xh));
    if (qoff(K)) {
      pab = _mm256_sub_epi16(pab, p->c);
      pcd = _mm256_sub_epi16(pcd, p->c);
    }
    const __m256i q = _mm256_packs_epi32(_mm256_madd_epi16(pab, ones16), _mm256_madd_epi16(pcd, ones16));
    const __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(q, ones16)); /* [A A C C | B B D D] */
    __m256 sv;
    if (has_min(K)) {
      const __m256 v = _mm256_mul_ps(dm8, _mm256_castpd_ps(_mm256_broadcast_sd((const double *)p->ds)));
      accm[t] = _mm256_add_ps(accm[t], v); /* m_r * s in lane 2r + 1 */
      sv = _mm256_permutevar8x32_ps(v, idx);
    } else {
      sv = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_mul_ps(dw4, _mm_broadcast_ss(&p->ds[0]))), idx);
    }
    acc[t] = _mm256_fmadd_ps(f, sv, acc[t]);
  }
}

/* The tile: rows w + r * wrb for r < R (repeats of the last when R < 4),
 * T activation rows; prep: the one activation row's act_prep per block
 * (a GEMV; T = 1), or NULL. */
QB_INLINE void tile_q45(const int K, const int R, const int T, const uint8_t *w, size_t wrb, const uint8_t *x, size_t xrb,
                 int64_t nb, float *y, int64_t ldy, const uint8_t *pf, const act_prep *prep) {
  const uint8_t *wr[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++) wr[r] = w + (size_t)(r < R ? r : R - 1) * wrb;
  __m256 acc0[4], acc1[4], accm[4];
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) acc0[t] = acc1[t] = accm[t] = _mm256_setzero_ps();
  const uint8_t *xb[4];
  const act_prep *ap[4];
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    if (pf) prefetch_next(pf, b / 2, lines_per_step(2 * wbytes(K)));
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      xb[t] = x + (size_t)t * xrb + (size_t)b * xbytes(K);
      ap[t] = prep ? prep + b : NULL;
    }
    step_q45(K, T, wr, (size_t)b * wbytes(K), xb, ap, acc0, accm);
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      xb[t] += xbytes(K);
      if (prep) ap[t] = prep + b + 1;
    }
    step_q45(K, T, wr, (size_t)(b + 1) * wbytes(K), xb, ap, acc1, accm);
  }
  if (b < nb) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      xb[t] = x + (size_t)t * xrb + (size_t)b * xbytes(K);
      ap[t] = prep ? prep + b : NULL;
    }
    step_q45(K, T, wr, (size_t)b * wbytes(K), xb, ap, acc0, accm);
  }
  static const int lane[4] = {0, 4, 2, 6}; /* row r's pair of lanes */
#pragma GCC unroll 4
  for (int t = 0; t < T; t++) {
    float f[8], mt[8];
    _mm256_storeu_ps(f, _mm256_add_ps(acc0[t], acc1[t]));
    _mm256_storeu_ps(mt, accm[t]);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      float v = f[lane[r]] + f[lane[r] + 1];
      if (has_min(K)) v += mt[2 * r + 1];
      y[t * ldy + r] = v;
    }
  }
}

/* ======================================================================== */
/* The K-quants: Q4_K, Q5_K, Q6_K against Q8_K                               */
/* ======================================================================== */

enum { K_Q4_K, K_Q5_K, K_Q6_K };

#define Q8K_BYTES 292 /* d (float), qs[256], bsums[16] */
#define Q8K_QS 4
#define Q8K_BSUMS 260

QB_INLINE int kbytes(const int K) { return K == K_Q4_K ? 144 : K == K_Q5_K ? 176 : 210; }

/* The 8 six-bit scales and minimums of a Q4_K / Q5_K super-block
 * (qblock.c's k4_scale_min, four sub-blocks at a time), as bytes: scales
 * 0..7 in *sc, minimums in *mn. */
QB_INLINE void k4_scales_mins(const uint8_t *packed, uint64_t *sc, uint64_t *mn) {
  uint32_t u[3];
  memcpy(u, packed, sizeof u);
  const uint32_t sc_lo = u[0] & 0x3f3f3f3fu, mn_lo = u[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  const uint32_t mn_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
  *sc = sc_lo | (uint64_t)sc_hi << 32;
  *mn = mn_lo | (uint64_t)mn_hi << 32;
}

/* int16 lane i of v (i < 8) in every lane. */
QB_INLINE __m256i bcast16(__m256i v128x2, int i) {
  return _mm256_shuffle_epi8(v128x2, _mm256_set1_epi16((short)(0x0100 + 0x0202 * i)));
}

/* Q5_K's fifth bits for sub-block j (bit j of every qh byte) as 0x10. */
QB_INLINE __m256i k5_high(__m256i qh, int j) {
  const __m256i s = j <= 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4);
  return _mm256_and_si256(s, _mm256_set1_epi8(0x10));
}

/* A tile of 4 weight rows (repeats of the last when R < 4, as tile_q8_0) x T
 * activation rows over nb super-blocks. The 4 rows' fp16 super-block
 * scales (and minimums' scales) are converted together, as tile_q8_0's. */
QB_INLINE void tilek(const int K, const int R, const int T, const uint8_t *w, size_t wrb, const uint8_t *x, size_t xrb,
              int64_t nb, float *y, int64_t ldy, const uint8_t *pf) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const uint8_t *wr[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++) wr[r] = w + (size_t)(r < R ? r : R - 1) * wrb;
  __m256 acc[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; b++) {
    const size_t wo = (size_t)b * kbytes(K);
    if (pf) prefetch_next(pf, b, lines_per_step(kbytes(K)));
    /* Super-block scales: Q6_K (d0..d3), Q4_K / Q5_K (d0 dmin0 .. d3 dmin3). */
    __m128 dw4 = _mm_setzero_ps();
    __m256 dm8 = _mm256_setzero_ps();
    if (K == K_Q6_K) {
      const uint64_t d = u16_at(wr[0] + wo + 208) | u16_at(wr[1] + wo + 208) << 16 |
                         u16_at(wr[2] + wo + 208) << 32 | u16_at(wr[3] + wo + 208) << 48;
      dw4 = _mm_cvtph_ps(_mm_set_epi64x(0, (long long)d));
    } else {
      const uint64_t lo = u32_at(wr[0] + wo) | u32_at(wr[1] + wo) << 32;
      const uint64_t hi = u32_at(wr[2] + wo) | u32_at(wr[3] + wo) << 32;
      dm8 = _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
    }
    const uint8_t *xb[4];
    __m256i bs[4];   /* Q6_K: the activation's 16 bsums */
    __m128i bs2[4];  /* Q4_K, Q5_K: its sums of each 32 (bsums in pairs) */
    float sc[4][8]; /* per activation row: d_r * dx (, dmin_r * dx) */
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      xb[t] = x + (size_t)t * xrb + (size_t)b * Q8K_BYTES;
      const float dx = f32_at(xb[t]);
      if (K == K_Q6_K) _mm_storeu_ps(sc[t], _mm_mul_ps(dw4, _mm_set1_ps(dx)));
      else _mm256_storeu_ps(sc[t], _mm256_mul_ps(dm8, _mm256_set1_ps(dx)));
      const __m256i bsums = load256(xb[t] + Q8K_BSUMS);
      if (K == K_Q6_K) bs[t] = bsums;
      else bs2[t] = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const uint8_t *wb = wr[r] + wo;
      __m256i isum[4];
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
      if (K == K_Q6_K) {
        /* 16 signed scales; quants 0..63 with the offset 32 taken off at
         * the end as 32 * sum(sc_j * bsums_j). */
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(wb + 192));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
          const __m256i l0 = load256(wb + 64 * h), l1 = load256(wb + 64 * h + 32);
          const __m256i hb = load256(wb + 128 + 32 * h);
          const __m256i m30 = _mm256_set1_epi8(0x30);
          __m256i q[4];
          q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
          q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
          q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
          q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                 _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
#pragma GCC unroll 4
          for (int s = 0; s < 4; s++) {
            /* Elements 128 h + 32 s ..: sub-blocks 8 h + 2 s and the next,
             * one per 128-bit half of the int16 pair sums. */
            const int j = 8 * h + 2 * s;
            const __m256i scv = _mm256_cvtepi8_epi16(
                _mm_shuffle_epi8(sc8, _mm_setr_epi8((char)j, (char)j, (char)j, (char)j, (char)j, (char)j, (char)j,
                                                    (char)j, (char)(j + 1), (char)(j + 1), (char)(j + 1),
                                                    (char)(j + 1), (char)(j + 1), (char)(j + 1), (char)(j + 1),
                                                    (char)(j + 1))));
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
              const __m256i p16 = _mm256_maddubs_epi16(q[s], load256(xb[t] + Q8K_QS + 128 * h + 32 * s));
              isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(scv, p16));
            }
          }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
          const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bs[t], sc16), 5);
          const __m256 sf = _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[t], off));
          acc[r][t] = _mm256_fmadd_ps(sf, _mm256_broadcast_ss(&sc[t][r]), acc[r][t]);
        }
      } else {
        uint64_t scb, mnb;
        k4_scales_mins(wb + 4, &scb, &mnb);
        const __m256i sc2 = _mm256_cvtepu8_epi16(_mm_set1_epi64x((long long)scb)); /* the scales in both halves */
        const __m128i mn8 = _mm_cvtepu8_epi16(_mm_set_epi64x(0, (long long)mnb));
        __m256i qh = _mm256_setzero_si256();
        if (K == K_Q5_K) qh = load256(wb + 16);
        const uint8_t *qs = wb + (K == K_Q5_K ? 48 : 16);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
          const __m256i bits = load256(qs + 32 * j);
          __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
          if (K == K_Q5_K) {
            lo = _mm256_or_si256(lo, k5_high(qh, 2 * j));
            hi = _mm256_or_si256(hi, k5_high(qh, 2 * j + 1));
          }
          const __m256i sl = bcast16(sc2, 2 * j), sh = bcast16(sc2, 2 * j + 1);
#pragma GCC unroll 4
          for (int t = 0; t < T; t++) {
            const uint8_t *xq = xb[t] + Q8K_QS + 64 * j;
            const __m256i pl = _mm256_madd_epi16(sl, _mm256_maddubs_epi16(lo, load256(xq)));
            const __m256i ph = _mm256_madd_epi16(sh, _mm256_maddubs_epi16(hi, load256(xq + 32)));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(pl, ph));
          }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
          /* The minimums' share: 4 int32 sums, zero-extended to 8 lanes. */
          const __m256 mins = _mm256_zextps128_ps256(_mm_cvtepi32_ps(_mm_madd_epi16(mn8, bs2[t])));
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_broadcast_ss(&sc[t][2 * r]), acc[r][t]);
          acc[r][t] = _mm256_fnmadd_ps(mins, _mm256_broadcast_ss(&sc[t][2 * r + 1]), acc[r][t]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) y[t * ldy + r] = hsum_ps(acc[r][t]);
  }
}

/* ======================================================================== */
/* Float weights: F32, F16, BF16 against float activations                  */
/* ======================================================================== */

enum { K_F32, K_F16, K_BF16 };

QB_INLINE __m256 fload8(const int K, const uint8_t *p) {
  switch (K) {
    case K_F32: return _mm256_loadu_ps((const float *)p);
    case K_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    default:
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
  }
}

QB_INLINE float fload1(const int K, const uint8_t *p) {
  uint16_t h;
  switch (K) {
    case K_F32: return f32_at(p);
    case K_F16: memcpy(&h, p, 2); return _cvtsh_ss(h);
    default: {
      memcpy(&h, p, 2);
      uint32_t u = (uint32_t)h << 16;
      float f;
      memcpy(&f, &u, sizeof f);
      return f;
    }
  }
}

/* k is any length: 8 at a time, then one by one (a float tail summed in
 * order, after the vector's horizontal sum). */
QB_INLINE void tilef(const int K, const int R, const int T, const uint8_t *w, size_t wrb, const uint8_t *x, size_t xrb,
              int64_t k, float *y, int64_t ldy, const uint8_t *pf) {
  const int es = K == K_F32 ? 4 : 2;
  __m256 acc[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 xv[4];
    if (pf) prefetch_next(pf, i / 8, lines_per_step(8 * es));
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) xv[t] = _mm256_loadu_ps((const float *)(x + (size_t)t * xrb) + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const __m256 wv = fload8(K, w + (size_t)r * wrb + (size_t)i * es);
#pragma GCC unroll 4
      for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
      float s = hsum_ps(acc[r][t]);
      const float *xt = (const float *)(x + (size_t)t * xrb);
      for (int64_t j = i; j < k; j++) s += fload1(K, w + (size_t)r * wrb + (size_t)j * es) * xt[j];
      y[t * ldy + r] = s;
    }
  }
}

/* ======================================================================== */
/* Drivers                                                                   */
/* ======================================================================== */

/* Kernel families; the tile functions take a family and a kind. */
enum { F_32, F_K, F_FLOAT };

QB_INLINE void tile_any(const int F, const int K, const int R, const int T, const uint8_t *w, size_t wrb, const uint8_t *x,
                 size_t xrb, int64_t k, float *y, int64_t ldy, const uint8_t *pf, const act_prep *prep) {
  if (F == F_32 && K != K_Q8_0) tile_q45(K, R, T, w, wrb, x, xrb, k / ER_QK, y, ldy, pf, prep);
  else if (F == F_32) tile_q8_0(R, T, w, wrb, x, xrb, k / ER_QK, y, ldy, pf);
  else if (F == F_K) tilek(K, R, T, w, wrb, x, xrb, k / ER_QK_K, y, ldy, pf);
  else tilef(K, R, T, w, wrb, x, xrb, k, y, ldy, pf);
}

/* Rows [r0, r1) against activation rows [0, tt) (tt <= T): whole tiles of 4
 * rows, then 1 to 3. */
QB_INLINE void rows_pass(const int F, const int K, const int T, const uint8_t *w, size_t wrb, const uint8_t *x, size_t xrb,
                  int64_t k, int64_t r0, int64_t r1, float *y, int64_t ldy, const act_prep *prep) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t *pf = r + 8 <= r1 ? w + (size_t)(r + 4) * wrb : NULL; /* the next whole tile */
    tile_any(F, K, 4, T, w + (size_t)r * wrb, wrb, x, xrb, k, y + r, ldy, pf, prep);
  }
  switch (r1 - r) {
    case 3: tile_any(F, K, 3, T, w + (size_t)r * wrb, wrb, x, xrb, k, y + r, ldy, NULL, prep); break;
    case 2: tile_any(F, K, 2, T, w + (size_t)r * wrb, wrb, x, xrb, k, y + r, ldy, NULL, prep); break;
    case 1: tile_any(F, K, 1, T, w + (size_t)r * wrb, wrb, x, xrb, k, y + r, ldy, NULL, prep); break;
    default: break;
  }
}

/* Weight bytes a chunk of rows may take so it stays in L2 (512 KiB or more
 * on the x86 cores this runs on) while every activation tile passes over
 * it. */
#define QB_CHUNK_BYTES (192 * 1024)

/* The product over rows [r0, r1) and m activation rows, tiles of TM
 * activation rows. */
QB_INLINE void gemm_any(const int F, const int K, const int TM, const void *w, size_t wrb, const void *x, size_t xrb,
                 int64_t k, int64_t r0, int64_t r1, int64_t m, float *y, int64_t ldy) {
  const uint8_t *wp = w, *xp = x;
  if (m == 1) {
    /* A GEMV: the 4-bit types' activation side once for all rows. */
    if (F == F_32 && K != K_Q8_0 && k / ER_QK <= QB_HOIST_BLOCKS) {
      act_prep prep[QB_HOIST_BLOCKS];
      for (int64_t b = 0; b < k / ER_QK; b++) prep[b] = prep_act(K, xp + (size_t)b * xbytes(K));
      rows_pass(F, K, 1, wp, wrb, xp, xrb, k, r0, r1, y, ldy, prep);
    } else {
      rows_pass(F, K, 1, wp, wrb, xp, xrb, k, r0, r1, y, ldy, NULL);
    }
    return;
  }
  int64_t chunk = (int64_t)(QB_CHUNK_BYTES / (wrb ? wrb : 1)) & ~(int64_t)3;
  if (chunk < 4) chunk = 4;
  for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
    const int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1;
    int64_t t = 0;
    for (; t + TM <= m; t += TM) rows_pass(F, K, TM, wp, wrb, xp + (size_t)t * xrb, xrb, k, c0, c1, y + t * ldy, ldy, NULL);
    switch (m - t) {
      case 3:
        if (TM > 3) rows_pass(F, K, 3, wp, wrb, xp + (size_t)t * xrb, xrb, k, c0, c1, y + t * ldy, ldy, NULL);
        break;
      case 2:
        if (TM > 2) rows_pass(F, K, 2, wp, wrb, xp + (size_t)t * xrb, xrb, k, c0, c1, y + t * ldy, ldy, NULL);
        break;
      case 1: rows_pass(F, K, 1, wp, wrb, xp + (size_t)t * xrb, xrb, k, c0, c1, y + t * ldy, ldy, NULL); break;
      default: break;
    }
  }
}

#define QB_AVX2_GEMM(name, F, K, TM, wt, at, label)                                                          \
  static void gemm_##name(const void *w, size_t w_row_bytes, const void *x, size_t x_row_bytes, int64_t k, \
                          int64_t r0, int64_t r1, int64_t m, float *y, int64_t ldy) {                      \
    gemm_any(F, K, TM, w, w_row_bytes, x, x_row_bytes, k, r0, r1, m, y, ldy);                              \
  }                                                                                                        \
  const er_qb_kernel er__qb_##name##_avx2 = {label, wt, at, gemm_##name};

QB_AVX2_GEMM(f32, F_FLOAT, K_F32, 3, ER_GGML_F32, ER_GGML_F32, "f32_f32_gemm_4x3__avx2")
QB_AVX2_GEMM(f16, F_FLOAT, K_F16, 3, ER_GGML_F16, ER_GGML_F32, "f16_f32_gemm_4x3__avx2")
QB_AVX2_GEMM(bf16, F_FLOAT, K_BF16, 3, ER_GGML_BF16, ER_GGML_F32, "bf16_f32_gemm_4x3__avx2")
QB_AVX2_GEMM(q4_0, F_32, K_Q4_0, 4, ER_GGML_Q4_0, ER_GGML_Q8_0, "q4_0_q8_0_gemm_4x4__avx2")
QB_AVX2_GEMM(q4_1, F_32, K_Q4_1, 4, ER_GGML_Q4_1, ER_GGML_Q8_1, "q4_1_q8_1_gemm_4x4__avx2")
QB_AVX2_GEMM(q5_0, F_32, K_Q5_0, 4, ER_GGML_Q5_0, ER_GGML_Q8_0, "q5_0_q8_0_gemm_4x4__avx2")
QB_AVX2_GEMM(q5_1, F_32, K_Q5_1, 4, ER_GGML_Q5_1, ER_GGML_Q8_1, "q5_1_q8_1_gemm_4x4__avx2")
QB_AVX2_GEMM(q8_0, F_32, K_Q8_0, 4, ER_GGML_Q8_0, ER_GGML_Q8_0, "q8_0_q8_0_gemm_4x4__avx2")
QB_AVX2_GEMM(q4_k, F_K, K_Q4_K, 4, ER_GGML_Q4_K, ER_GGML_Q8_K, "q4_k_q8_k_gemm_4x4__avx2")
QB_AVX2_GEMM(q5_k, F_K, K_Q5_K, 4, ER_GGML_Q5_K, ER_GGML_Q8_K, "q5_k_q8_k_gemm_4x4__avx2")
QB_AVX2_GEMM(q6_k, F_K, K_Q6_K, 4, ER_GGML_Q6_K, ER_GGML_Q8_K, "q6_k_q8_k_gemm_4x4__avx2")
#undef QB_AVX2_GEMM

/* ======================================================================== */
/* Activation quantizers                                                     */
/* ======================================================================== */

/* 32 int32 lanes (4 vectors, in element order) to 32 bytes in order. */
QB_INLINE __m256i pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
  const __m256i a = _mm256_packs_epi32(i0, i1), b = _mm256_packs_epi32(i2, i3);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

QB_INLINE __m256 absps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

QB_INLINE float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

QB_INLINE __m256i round_i32(__m256 v) {
  return _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* Q8_0 (with_sum false) or Q8_1 blocks of one row. */
static void act_q8_x(const float *x, uint8_t *q, int64_t nb, bool with_sum) {
  const int bytes = with_sum ? 36 : 34, qs = with_sum ? 4 : 2;
  for (int64_t i = 0; i < nb; i++, x += ER_QK, q += bytes) {
    __m256 v[4];
    for (int j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(x + 8 * j);
    const float amax =
        hmax_ps(_mm256_max_ps(_mm256_max_ps(absps(v[0]), absps(v[1])), _mm256_max_ps(absps(v[2]), absps(v[3]))));
    const float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    const uint16_t dh = f2h(d);
    memcpy(q, &dh, 2);
    __m256i iv[4];
    for (int j = 0; j < 4; j++) iv[j] = round_i32(_mm256_mul_ps(v[j], _mm256_set1_ps(id)));
    if (with_sum) {
      const __m256i s4 = _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3]));
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
      const uint16_t sh = f2h(d * (float)_mm_cvtsi128_si32(s));
      memcpy(q + 2, &sh, 2);
    }
    _mm256_storeu_si256((__m256i *)(q + qs), pack32(iv[0], iv[1], iv[2], iv[3]));
  }
}

/* Q8_K blocks of one row (qblock.c's quant_q8_k). */
static void act_q8_k(const float *x, uint8_t *q, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK_K, q += Q8K_BYTES) {
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 32; j++) m = _mm256_max_ps(m, absps(_mm256_loadu_ps(x + 8 * j)));
    const float amax = hmax_ps(m);
    if (amax == 0.0f) {
      memset(q, 0, Q8K_BYTES);
      continue;
    }
    /* The scale's sign is that of the first element of largest magnitude. */
    float max = amax;
    for (int j = 0; j < 32; j++) {
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(absps(_mm256_loadu_ps(x + 8 * j)), _mm256_set1_ps(amax),
                                                       _CMP_EQ_OQ));
      if (hit) {
        max = x[8 * j + __builtin_ctz((unsigned)hit)];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 is = _mm256_set1_ps(iscale);
    __m256i sums[8];
    for (int c = 0; c < 8; c++) {
      __m256i iv[4];
      for (int j = 0; j < 4; j++) iv[j] = round_i32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * j), is));
      /* Saturating packs stand for ggml's min(127, q): no quant exceeds
       * 127 in magnitude by more than rounding, so none saturates lower. */
      const __m256i qv = pack32(iv[0], iv[1], iv[2], iv[3]);
      _mm256_storeu_si256((__m256i *)(q + Q8K_QS + 32 * c), qv);
      sums[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), qv), _mm256_set1_epi16(1));
    }
    /* sums[c] lanes 0..3 add up to bsums[2c], 4..7 to bsums[2c + 1]; two
     * rounds of hadd leave [bs0 bs2 bs4 bs6 | bs1 bs3 bs5 bs7] (and 8..15). */
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(sums[0], sums[1]), _mm256_hadd_epi32(sums[2], sums[3]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(sums[4], sums[5]), _mm256_hadd_epi32(sums[6], sums[7]));
    const __m256i p = _mm256_packs_epi32(h0, h1); /* [even bsums | odd bsums] */
    const __m128i ev = _mm256_castsi256_si128(p), od = _mm256_extracti128_si256(p, 1);
    _mm_storeu_si128((__m128i *)(q + Q8K_BSUMS), _mm_unpacklo_epi16(ev, od));
    _mm_storeu_si128((__m128i *)(q + Q8K_BSUMS + 16), _mm_unpackhi_epi16(ev, od));
    const float d = 1 / iscale;
    memcpy(q, &d, sizeof d);
  }
}

void er__qb_quantize_act_avx2(uint32_t atype, const float *x, int64_t ldx, int64_t n, int64_t k, void *xq,
                              size_t x_row_bytes) {
  for (int64_t t = 0; t < n; t++) {
    const float *xr = x + t * ldx;
    uint8_t *q = (uint8_t *)xq + (size_t)t * x_row_bytes;
    switch (atype) {
      case ER_GGML_F32: memcpy(q, xr, (size_t)k * sizeof(float)); break;
      case ER_GGML_Q8_0: ER_ASSERT(k % ER_QK == 0); act_q8_x(xr, q, k / ER_QK, false); break;
      case ER_GGML_Q8_1: ER_ASSERT(k % ER_QK == 0); act_q8_x(xr, q, k / ER_QK, true); break;
      case ER_GGML_Q8_K: ER_ASSERT(k % ER_QK_K == 0); act_q8_k(xr, q, k / ER_QK_K); break;
      default: ER_ASSERT(!"er__qb_quantize_act: not an activation format");
    }
  }
}
