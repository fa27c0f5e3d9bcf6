/* qgemm-avx512.c - the integer GEMM microkernels and epilogue for AVX-512
 * with VNNI (vpdpbusd: 64 unsigned x signed byte products into 16 int32
 * lanes per instruction, no intermediate saturation). Called only when
 * er__cpu_features() reports AVX-512 F/BW/VL/DQ and VNNI (er__qgemm_best).
 *
 * Two orientations (see qgemm.h):
 *  - conv, 8 x 32: weight rows are broadcast (4 signed bytes each), 32
 *    output pixels are two vectors of activations; 16 accumulators (8 x
 *    48, 24 accumulators, for the 3x3 tile over planes read in place).
 *  - mm, 4 x 64: activation rows are broadcast (4 unsigned bytes), 64
 *    weight columns are four vectors; 16 accumulators, so a single row
 *    (batch 1) still keeps four independent chains in flight.
 * One copy of the loop is compiled per row count so that bottom-edge
 * tiles do no wasted work. */
#include <immintrin.h>

#include "kernels/qgemm.h"

/* The convolution tile: CMR weight rows x CNV vectors of 16 pixels. */
#ifndef CMR
#define CMR 8
#endif
#ifndef CNV
#define CNV 2
#endif
#define CNR (CNV * 16)

/* acc + the 4-byte dot products of u8 (unsigned) and s8 (signed): what
 * _mm512_dpbusd_epi32 computes. GCC 12 copied every accumulator of these
 * loops through another register around each of its uses (32 moves for 16
 * vpdpbusd per k group in the 8 x 32 tile); in asm the accumulator stays
 * in its register. */
static inline __attribute__((always_inline)) __m512i dpbusd(__m512i acc, __m512i u8, __m512i s8) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
  return acc;
}

/* The same on the lanes in k only (the others keep acc): one uop, as
 * unmasked. */
static inline __attribute__((always_inline)) __m512i dpbusd_mask(__m512i acc, __mmask16 k, __m512i u8, __m512i s8) {
  __asm__("vpdpbusd %2, %1, %0%{%3%}" : "+v"(acc) : "v"(u8), "v"(s8), "Yk"(k));
  return acc;
}

/* The Q8 requantization of f = sum * mult + off: clamp(rhe(f) + zp, lo,
 * hi), with the clamp done on f against lo - zp and hi - zp (integers, so
 * rounding the clamped value gives the same bytes: rhe is monotonic) and
 * no integer clamp after. NaN takes the lower bound, as before (max_ps
 * returns its second operand). Two instructions fewer per vector than
 * clamping f to +-2^30, converting, and clamping the integers. */
static inline __attribute__((always_inline)) __m512i requant(__m512 f, __m512 flo, __m512 fhi, __m512i zp) {
  f = _mm512_min_ps(_mm512_max_ps(f, flo), fhi);
  return _mm512_add_epi32(_mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
}

static inline __attribute__((always_inline)) void tile_body(int64_t groups, const uint8_t *a, const uint8_t *b,
                                                            int32_t *acc, const int MR, const int NV, const int R,
                                                            const bool w_rows) {
  __m512i c[16][4];
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      if (r < R) c[r][v] = _mm512_setzero_si512();
  for (int64_t q = 0; q < groups; q++) {
    __m512i bv[4];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_si512((const void *)(b + v * 64));
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      if (r < R) {
        int32_t w;
        memcpy(&w, a + r * 4, sizeof w);
        __m512i av = _mm512_set1_epi32(w);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
          c[r][v] = w_rows ? dpbusd(c[r][v], bv[v], av) : dpbusd(c[r][v], av, bv[v]);
      }
    }
    a += MR * 4;
    b += NV * 64;
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      if (r < R) _mm512_storeu_si512((void *)(acc + r * NV * 16 + v * 16), c[r][v]);
}

/* Columns read in place jump between k groups (a tap's row of the
 * padded input, then the next tap's, then the next channel quad's), so
 * the core's stride prefetchers miss most of them: a 3x3 tile's 32 columns
 * touch about 36 KB over all k groups, and the weight panel streaming past
 * evicts them from L1 before the next panel comes back to them. Group q +
 * 9's 128 bytes (the same tap of the next channel quad, for 3x3) are
 * fetched ahead: 3 lines, as they rarely start on a line. On the Xeon
 * (AVX-512, 48 KB L1) of bench/REPORT-cpu.md a 256-channel 3x3 int8
 * convolution on 56x56 went from 6.0 to 5.4 ms, VGG-19 int8 from 71.4 to
 * 68.4 ms. */
static inline __attribute__((always_inline)) void prefetch_cols(const uint8_t *b, const int64_t *koff, int64_t q,
                                                                int64_t groups) {
  if (q + 9 < groups) {
    const char *pf = (const char *)(b + koff[q + 9]);
    _mm_prefetch(pf, _MM_HINT_T0);
    _mm_prefetch(pf + 64, _MM_HINT_T0);
    _mm_prefetch(pf + 127, _MM_HINT_T0);
  }
}

/* The convolution tile over columns read in place: k group g at
 * b + koff[g] (activations, unsigned), weights broadcast. */
static inline __attribute__((always_inline)) void tile_ind_body(int64_t groups, const uint8_t *a, const uint8_t *b,
                                                                const int64_t *koff, int32_t *acc, const int R) {
  __m512i c[CMR][CNV];
#pragma GCC unroll 16
  for (int r = 0; r < CMR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < CNV; v++)
      if (r < R) c[r][v] = _mm512_setzero_si512();
  for (int64_t q = 0; q < groups; q++) {
    const uint8_t *bq = b + koff[q];
    __m512i bv[CNV];
#pragma GCC unroll 4
    for (int v = 0; v < CNV; v++) bv[v] = _mm512_loadu_si512((const void *)(bq + v * 64));
    prefetch_cols(b, koff, q, groups);
#pragma GCC unroll 16
    for (int r = 0; r < CMR; r++) {
      if (r < R) {
        int32_t w;
        memcpy(&w, a + r * 4, sizeof w);
        __m512i av = _mm512_set1_epi32(w);
#pragma GCC unroll 4
        for (int v = 0; v < CNV; v++) c[r][v] = dpbusd(c[r][v], bv[v], av);
      }
    }
    a += CMR * 4;
  }
#pragma GCC unroll 16
  for (int r = 0; r < CMR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < CNV; v++)
      if (r < R) _mm512_storeu_si512((void *)(acc + r * CNR + v * 16), c[r][v]);
}

#define DEFINE_TILE_IND(R) \
  static void ind_##R(int64_t g, const uint8_t *a, const uint8_t *b, const int64_t *koff, int32_t *acc) { \
    tile_ind_body(g, a, b, koff, acc, R);                                                               \
  }
#define FOR_ROWS(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14)
FOR_ROWS(DEFINE_TILE_IND)

typedef void (*tile_ind_fn)(int64_t, const uint8_t *, const uint8_t *, const int64_t *, int32_t *);

static void tile_conv_ind(int64_t groups, const void *rows, const uint8_t *cols, const int64_t *koff, int rows_valid,
                          int32_t *acc) {
#define IND_NAME(R) ind_##R,
  static const tile_ind_fn fns[] = {NULL, FOR_ROWS(IND_NAME)};
  fns[rows_valid](groups, rows, cols, koff, acc);
}

/* The most vectors of the Q8 tiles: the 3x3 tile's 48 columns. */
#define QNV 3

/* One k group of the convolution tiles below: each of the R weight rows
 * (4 bytes at a) broadcast against the NV column vectors bv, on the lanes
 * of mask[v] only where mask is not NULL. */
static inline __attribute__((always_inline)) void q8_rows_step(__m512i (*c)[QNV], const uint8_t *a, const __m512i *bv,
                                                               const __mmask16 *mask, const int R, const int NV) {
#pragma GCC unroll 16
  for (int r = 0; r < CMR; r++) {
    if (r < R) {
      int32_t w;
      memcpy(&w, a + r * 4, sizeof w);
      __m512i av = _mm512_set1_epi32(w);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        c[r][v] = mask ? dpbusd_mask(c[r][v], mask[v], bv[v], av) : dpbusd(c[r][v], bv[v], av);
    }
  }
}

/* Both convolution tiles (packed columns, or in place with koff) with the
 * Q8 epilogue in registers: the accumulators never go to memory. */
static inline __attribute__((always_inline)) void tile_q8_body(int64_t groups, const uint8_t *a, const uint8_t *b,
                                                               const int64_t *koff, const er_qepi *e, int64_t i0,
                                                               uint8_t *out, int64_t ldc, const er_qseg *segs,
                                                               int nseg, const uint64_t *edge,
                                                               const int32_t *const *ecorr, const int R,
                                                               const bool W3, const int NV) {
  __m512i c[CMR][QNV];
  /* The sums start from the channels' corrections. */
#pragma GCC unroll 16
  for (int r = 0; r < CMR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      if (r < R) c[r][v] = _mm512_set1_epi32(e->corr[i0 + r]);
  if (W3) {
    /* Planes without padding columns (qgemm.h, tile_q8_w3): the taps of
     * the window's left column add nothing at x = 0 (their products are
     * masked off: the lanes read the previous row's last pixel), those of
     * its right column at x = W - 1, and those columns' sums take the
     * padding's part from ecorr. Masking the loads instead (zeroing) cost
     * 4-6% on 56x56 and 112x112 layers. */
    /* Per vector: the edge lanes, and the lanes the left / right taps add to. */
    __mmask16 el[QNV], er[QNV], kl[QNV], kr[QNV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      el[v] = (__mmask16)(edge[0] >> (16 * v));
      er[v] = (__mmask16)(edge[1] >> (16 * v));
      kl[v] = (__mmask16)~el[v];
      kr[v] = (__mmask16)~er[v];
    }
    if (edge[0] | edge[1]) {
      /* (Most tiles of wide maps hold no edge column.) */
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
#pragma GCC unroll 16
        for (int r = 0; r < CMR; r++) {
          if (r < R) {
            c[r][v] = _mm512_mask_add_epi32(c[r][v], el[v], c[r][v], _mm512_set1_epi32(ecorr[0][i0 + r]));
            c[r][v] = _mm512_mask_add_epi32(c[r][v], er[v], c[r][v], _mm512_set1_epi32(ecorr[1][i0 + r]));
          }
        }
    }
    for (int64_t q = 0; q < groups; q += 9) {
#pragma GCC unroll 9
      for (int t = 0; t < 9; t++) {
        const uint8_t *bq = b + koff[q + t];
        __m512i bv[QNV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_si512((const void *)(bq + v * 64));
        if (t % 3 == 1 && q + t + 9 < groups) {
          /* The next channel group's window row: its three taps read
           * 4 bytes apart, one span of NV * 64 + 8 bytes. */
          const char *pf = (const char *)(b + koff[q + t + 9]) - 4;
#pragma GCC unroll 4
          for (int v = 0; v <= NV; v++) _mm_prefetch(pf + 64 * v, _MM_HINT_T0);
          _mm_prefetch(pf + 64 * NV + 7, _MM_HINT_T0);
        }
        q8_rows_step(c, a, bv, t % 3 == 0 ? kl : t % 3 == 2 ? kr : NULL, R, NV);
        a += CMR * 4;
      }
    }
    groups = 0;
  }
  for (int64_t q = 0; q < groups; q++) {
    const uint8_t *bq = koff ? b + koff[q] : b + q * CNR * 4;
    __m512i bv[QNV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_si512((const void *)(bq + v * 64));
    if (koff) prefetch_cols(b, koff, q, groups);
    q8_rows_step(c, a, bv, NULL, R, NV);
    a += CMR * 4;
  }
  const __m512i zp = _mm512_set1_epi32(e->zp);
  const __m512 flo = _mm512_set1_ps((float)(e->lo - e->zp)), fhi = _mm512_set1_ps((float)(e->hi - e->zp));
  /* The stores each row makes, worked out once per tile: vector v's
   * lanes under mask m go to the row at byte offset off (lane 0's
   * address, which may lie before the row: only the unmasked lanes are
   * written). One unmasked store per vector when the tile is one whole
   * run. Computed in the rows loop, they were redone for every row (the
   * stores could alias the runs as far as the compiler knew). */
  const bool whole = nseg == 1 && segs[0].first == 0 && segs[0].len == NV * 16;
  int64_t st_off[QNV][ER_QGEMM_MAX_SEGS];
  __mmask16 st_mask[QNV][ER_QGEMM_MAX_SEGS];
  int nst[QNV] = {0};
  if (!whole)
    for (int sg = 0; sg < nseg; sg++) {
      int first = segs[sg].first, end = first + segs[sg].len;
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) {
        int lane0 = first > v * 16 ? first - v * 16 : 0, lane1 = end < v * 16 + 16 ? end - v * 16 : 16;
        if (lane1 <= lane0) continue;
        st_mask[v][nst[v]] = (__mmask16)(((1u << (lane1 - lane0)) - 1u) << lane0);
        st_off[v][nst[v]++] = segs[sg].col - first + v * 16;
      }
    }
  const int64_t col0 = whole ? segs[0].col : 0;
#pragma GCC unroll 16
  for (int r = 0; r < CMR; r++) {
    if (r < R) {
      const __m512 mult = _mm512_set1_ps(e->mult[i0 + r]), off = _mm512_set1_ps(e->off[i0 + r]);
      __m128i bytes[4];
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        bytes[v] = _mm512_cvtepi32_epi8(requant(_mm512_fmadd_ps(_mm512_cvtepi32_ps(c[r][v]), mult, off), flo, fhi, zp));
      uint8_t *row = out + r * ldc;
      if (whole) {
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm_storeu_si128((__m128i *)(row + col0 + v * 16), bytes[v]);
      } else {
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
          for (int k = 0; k < nst[v]; k++)
            _mm_mask_storeu_epi8((void *)((uintptr_t)row + (uintptr_t)st_off[v][k]), st_mask[v][k], bytes[v]);
      }
    }
  }
}

#define DEFINE_TILE_Q8(R)                                                                                  \
  static void q8_##R(int64_t g, const uint8_t *a, const uint8_t *b, const int64_t *koff, const er_qepi *e,   \
                     int64_t i0, uint8_t *out, int64_t ldc, const er_qseg *segs, int nseg) {               \
    tile_q8_body(g, a, b, koff, e, i0, out, ldc, segs, nseg, NULL, NULL, R, false, CNV);                      \
  }
FOR_ROWS(DEFINE_TILE_Q8)

#define FOR_TILE_ROWS(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8)
_Static_assert(CMR == 8, "the 3x3 tile is compiled for up to 8 rows");
#define DEFINE_TILE_Q8_W3(R)                                                                                 \
  static void q8w3_##R(int64_t g, const uint8_t *a, const uint8_t *b, const int64_t *koff, const er_qepi *e,  \
                       int64_t i0, uint8_t *out, int64_t ldc, const er_qseg *segs, int nseg,                 \
                       const uint64_t *edge, const int32_t *const *ecorr) {                                  \
    tile_q8_body(g, a, b, koff, e, i0, out, ldc, segs, nseg, edge, ecorr, R, true, CNV);                     \
  }                                                                                                          \
  static void q8w3w_##R(int64_t g, const uint8_t *a, const uint8_t *b, const int64_t *koff, const er_qepi *e, \
                        int64_t i0, uint8_t *out, int64_t ldc, const er_qseg *segs, int nseg,                \
                        const uint64_t *edge, const int32_t *const *ecorr) {                                 \
    tile_q8_body(g, a, b, koff, e, i0, out, ldc, segs, nseg, edge, ecorr, R, true, 3);                       \
  }                                                                                                          \
  static void q8w3h_##R(int64_t g, const uint8_t *a, const uint8_t *b, const int64_t *koff, const er_qepi *e, \
                        int64_t i0, uint8_t *out, int64_t ldc, const er_qseg *segs, int nseg,                \
                        const uint64_t *edge, const int32_t *const *ecorr) {                                 \
    tile_q8_body(g, a, b, koff, e, i0, out, ldc, segs, nseg, edge, ecorr, R, true, 1);                       \
  }
FOR_TILE_ROWS(DEFINE_TILE_Q8_W3)

typedef void (*tile_q8_fn)(int64_t, const uint8_t *, const uint8_t *, const int64_t *, const er_qepi *, int64_t,
                           uint8_t *, int64_t, const er_qseg *, int);

static void tile_conv_q8(int64_t groups, const void *rows, const uint8_t *cols, const int64_t *koff, int rows_valid,
                         const er_qepi *e, int64_t i0, uint8_t *c, int64_t ldc, const er_qseg *segs, int nseg) {
#define Q8_NAME(R) q8_##R,
  static const tile_q8_fn fns[] = {NULL, FOR_ROWS(Q8_NAME)};
  fns[rows_valid](groups, rows, cols, koff, e, i0, c, ldc, segs, nseg);
}

typedef void (*tile_q8_w3_fn)(int64_t, const uint8_t *, const uint8_t *, const int64_t *, const er_qepi *, int64_t,
                              uint8_t *, int64_t, const er_qseg *, int, const uint64_t *, const int32_t *const *);

static void tile_conv_q8_w3(int64_t groups, const void *rows, const uint8_t *cols, const int64_t *koff,
                            int rows_valid, const er_qepi *e, int64_t i0, uint8_t *c, int64_t ldc,
                            const er_qseg *segs, int nseg, const uint64_t edge[2], const int32_t *const ecorr[2]) {
#define Q8W3_NAME(R) q8w3_##R,
#define Q8W3H_NAME(R) q8w3h_##R,
  static const tile_q8_w3_fn fns[] = {NULL, FOR_TILE_ROWS(Q8W3_NAME)};
  static const tile_q8_w3_fn half[] = {NULL, FOR_TILE_ROWS(Q8W3H_NAME)};
#define Q8W3W_NAME(R) q8w3w_##R,
  static const tile_q8_w3_fn wide[] = {NULL, FOR_TILE_ROWS(Q8W3W_NAME)};
  /* Tiles of 48 columns: per k group 8 broadcasts and 3 loads feed 24
   * products (16 for 10 loads at 32 columns). A last tile of at most 16
   * or 32 columns (28x28 maps: 784 = 16 x 48 + 16) on one or two
   * vectors. */
  const int end = segs[nseg - 1].first + segs[nseg - 1].len;
  (end <= 16   ? half
   : end <= 32 ? fns
               : wide)[rows_valid](groups, rows, cols, koff, e, i0, c, ldc, segs, nseg, edge, ecorr);
}

#define DEFINE_TILE(NAME, MR, NV, WR, R) \
  static void NAME##_##R(int64_t g, const uint8_t *a, const uint8_t *b, int32_t *acc) { tile_body(g, a, b, acc, MR, NV, R, WR); }

#define DEFINE_CONV_TILE(R) DEFINE_TILE(conv, CMR, CNV, true, R)
FOR_ROWS(DEFINE_CONV_TILE)
DEFINE_TILE(mm, 4, 4, false, 1)
DEFINE_TILE(mm, 4, 4, false, 2)
DEFINE_TILE(mm, 4, 4, false, 3)
DEFINE_TILE(mm, 4, 4, false, 4)

typedef void (*tile_fn)(int64_t, const uint8_t *, const uint8_t *, int32_t *);

static void tile_conv(int64_t groups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,
                      int32_t *acc) {
#define CONV_NAME(R) conv_##R,
  static const tile_fn fns[] = {NULL, FOR_ROWS(CONV_NAME)};
  ER_UNUSED(w_rows);
  fns[rows_valid](groups, rows, cols, acc);
}

static void tile_mm(int64_t groups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,
                    int32_t *acc) {
  static const tile_fn fns[] = {NULL, mm_1, mm_2, mm_3, mm_4};
  ER_UNUSED(w_rows);
  fns[rows_valid](groups, rows, cols, acc);
}

/* ======================================================================== */
/* The transposed (pixel rows) convolution tile                              */
/* ======================================================================== */

/* Eight rows of 16 bytes (rows r < 8, channels c < 16) transposed into
 * eight vectors of two channels each: channel 2i's 8 pixel bytes in the
 * low half of out[i], channel 2i + 1's in the high half. */
_Static_assert(CMR == 8 && CNV == 2, "the transposed tile's byte transpose is written for 8 x 32");

static inline void transpose8x16(const __m128i *r, __m128i *out) {
  __m128i a[8], b[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    a[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);     /* c0-7: r2i r2i+1 */
    a[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]); /* c8-15 */
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    b[4 * h + 0] = _mm_unpacklo_epi16(a[h], a[2 + h]); /* r0-3 of c0-3 (h 0) or c8-11 (h 1) */
    b[4 * h + 1] = _mm_unpackhi_epi16(a[h], a[2 + h]); /* c4-7 / c12-15 */
    b[4 * h + 2] = _mm_unpacklo_epi16(a[4 + h], a[6 + h]); /* r4-7 */
    b[4 * h + 3] = _mm_unpackhi_epi16(a[4 + h], a[6 + h]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
      out[4 * h + 2 * j] = _mm_unpacklo_epi32(b[4 * h + j], b[4 * h + 2 + j]);
      out[4 * h + 2 * j + 1] = _mm_unpackhi_epi32(b[4 * h + j], b[4 * h + 2 + j]);
    }
}

/* The transposed tile (isa->px_row_tile): R <= PXR pixels of one output
 * row, consecutive in the planes (pixel r at p0 + 4 r, 4 activation bytes
 * broadcast per k group), by 32 output channels (the weights' columns
 * panel, two vectors). Every broadcast addresses p0 + koff[g] plus a
 * constant, so no pointer per pixel is kept and a tile takes a 14x14
 * map's whole row: 28 accumulators, per k group 2 weight loads and R
 * broadcasts for 2 R products, and the weight panel streams from L2 once
 * per 14 pixels (an 8-pixel tile with a pointer per pixel, before: 512 ->
 * 512 at 14x14 1.443 -> 1.382 ms). The sums start from the channels'
 * corrections, are requantized per lane, and the R x 32 bytes are
 * transposed in registers so that each channel's R pixels (consecutive
 * in the output plane) go out in one store. */
#define PXR 14
static inline __attribute__((always_inline)) void px_row_body(int64_t groups, const uint8_t *p0,
                                                              const int64_t *koff, const uint8_t *w,
                                                              const int32_t *corr, const float *mult_p,
                                                              const float *off_p, const er_qepi *e, uint8_t *out,
                                                              int64_t ldo, int ncols, const int R) {
  __m512i acc[PXR][CNV];
#pragma GCC unroll 16
  for (int r = 0; r < PXR; r++)
#pragma GCC unroll 2
    for (int v = 0; v < CNV; v++)
      if (r < R) acc[r][v] = _mm512_loadu_si512((const void *)(corr + 16 * v));
  for (int64_t q = 0; q < groups; q++, w += CNR * 4) {
    const uint8_t *pq = p0 + koff[q];
    __m512i b[CNV];
#pragma GCC unroll 2
    for (int v = 0; v < CNV; v++) b[v] = _mm512_loadu_si512((const void *)(w + 64 * v));
#pragma GCC unroll 16
    for (int r = 0; r < PXR; r++) {
      if (r < R) {
        int32_t a;
        memcpy(&a, pq + 4 * r, sizeof a);
        const __m512i av = _mm512_set1_epi32(a);
#pragma GCC unroll 2
        for (int v = 0; v < CNV; v++) acc[r][v] = dpbusd(acc[r][v], av, b[v]);
      }
    }
  }
  const __m512i zp = _mm512_set1_epi32(e->zp);
  const __m512 flo = _mm512_set1_ps((float)(e->lo - e->zp)), fhi = _mm512_set1_ps((float)(e->hi - e->zp));
  const __mmask16 keep = (__mmask16)((1u << R) - 1u);
#pragma GCC unroll 2
  for (int v = 0; v < CNV; v++) {
    const __m512 mult = _mm512_loadu_ps(mult_p + 16 * v), off = _mm512_loadu_ps(off_p + 16 * v);
    __m128i rows[16], t[8], u[8];
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) {
      if (r < R) {
        rows[r] = _mm512_cvtepi32_epi8(requant(_mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][v]), mult, off), flo, fhi, zp));
      } else {
        rows[r] = _mm_setzero_si128();
      }
    }
    /* Pixels 0-7 and 8-15 of channels 2i and 2i + 1 in t[i] and u[i]. */
    transpose8x16(rows, t);
    if (R > 8) transpose8x16(rows + 8, u);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      const int c = 16 * v + 2 * i;
      const __m128i lo = R > 8 ? _mm_unpacklo_epi64(t[i], u[i]) : t[i];
      const __m128i hi = R > 8 ? _mm_unpackhi_epi64(t[i], u[i]) : _mm_unpackhi_epi64(t[i], t[i]);
      if (c < ncols) _mm_mask_storeu_epi8(out + c * ldo, keep, lo);
      if (c + 1 < ncols) _mm_mask_storeu_epi8(out + (c + 1) * ldo, keep, hi);
    }
  }
}

#define DEFINE_PX_ROW(R)                                                                                       \
  static void pxr_##R(int64_t groups, const uint8_t *p0, const int64_t *koff, const uint8_t *w,                \
                      const int32_t *corr, const float *mult, const float *off, const er_qepi *e, uint8_t *out, \
                      int64_t ldo, int ncols) {                                                                  \
    px_row_body(groups, p0, koff, w, corr, mult, off, e, out, ldo, ncols, R);                                    \
  }
#define FOR_PX_ROWS(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14)
FOR_PX_ROWS(DEFINE_PX_ROW)

typedef void (*px_row_fn)(int64_t, const uint8_t *, const int64_t *, const uint8_t *, const int32_t *, const float *,
                          const float *, const er_qepi *, uint8_t *, int64_t, int);

static void px_row_conv(int64_t groups, const uint8_t *p0, int R, const int64_t *koff, const uint8_t *w,
                        const int32_t *corr, const float *mult, const float *off, const er_qepi *e, uint8_t *out,
                        int64_t ldo, int ncols) {
#define PXR_NAME(R) pxr_##R,
  static const px_row_fn fns[] = {NULL, FOR_PX_ROWS(PXR_NAME)};
  fns[R](groups, p0, koff, w, corr, mult, off, e, out, ldo, ncols);
}

/* ======================================================================== */
/* The epilogue                                                              */
/* ======================================================================== */

static inline __m512i load_n(const int32_t *p, __mmask16 m) { return _mm512_maskz_loadu_epi32(m, p); }

/* Narrows 16 int32 already in the 8-bit range and stores the first n
 * (vpmovdb to a register, then a plain store: the memory form of vpmovdb
 * is slow on some cores). */
static inline void store8(uint8_t *p, __m512i q, __mmask16 m, int n) {
  __m128i b = _mm512_cvtepi32_epi8(q);
  if (n == 16) _mm_storeu_si128((__m128i *)p, b);
  else _mm_mask_storeu_epi8(p, m, b);
}

/* The common case on its own: requantized 8-bit output, parameters per
 * row (convolutions), no weight zero points. */
static void epilogue_q8_rows(const er_qepi *e, const er_qtile_out *t) {
  const __m512i zp = _mm512_set1_epi32(e->zp);
  const __m512 flo = _mm512_set1_ps((float)(e->lo - e->zp)), fhi = _mm512_set1_ps((float)(e->hi - e->zp));
  for (int r = 0; r < t->rows; r++) {
    const int32_t *acc = t->acc + r * t->nr;
    uint8_t *out = (uint8_t *)t->c + (size_t)(r * t->ldc);
    int64_t ch = t->i0 + r;
    const __m512i corr = _mm512_set1_epi32(e->corr[ch]);
    const __m512 mult = _mm512_set1_ps(e->mult[ch]), off = _mm512_set1_ps(e->off[ch]);
    for (int j = 0; j < t->cols; j += 16) {
      int n = t->cols - j < 16 ? t->cols - j : 16;
      __mmask16 m = (__mmask16)((1u << n) - 1u);
      __m512i v = _mm512_add_epi32(load_n(acc + j, m), corr);
      store8(out + j, requant(_mm512_fmadd_ps(_mm512_cvtepi32_ps(v), mult, off), flo, fhi, zp), m, n);
    }
  }
}

static void epilogue(const er_qepi *e, const er_qtile_out *t) {
  if (e->kind == ER_QEPI_Q8 && e->channel_rows && !e->wzp) {
    epilogue_q8_rows(e, t);
    return;
  }
  const __m512 big = _mm512_set1_ps(1073741824.0f), nbig = _mm512_set1_ps(-1073741824.0f);
  const __m512i zp = _mm512_set1_epi32(e->zp), lo = _mm512_set1_epi32(e->lo), hi = _mm512_set1_epi32(e->hi);
  const __m512 clo = _mm512_set1_ps(e->clip_lo), chi = _mm512_set1_ps(e->clip_hi);
  const __m512d zpd = _mm512_set1_pd((double)e->zp), lod = _mm512_set1_pd((double)e->lo),
                hid = _mm512_set1_pd((double)e->hi);
  const size_t es = e->kind == ER_QEPI_Q8 || e->kind == ER_QEPI_QLINEAR ? 1 : 4;
  for (int r = 0; r < t->rows; r++) {
    const int32_t *acc = t->acc + r * t->nr;
    uint8_t *out = (uint8_t *)t->c + (size_t)(r * t->ldc) * es;
    int64_t row_ch = t->i0 + r;
    for (int j = 0; j < t->cols; j += 16) {
      int n = t->cols - j < 16 ? t->cols - j : 16;
      __mmask16 m = (__mmask16)((1u << n) - 1u);
      int64_t col_ch = t->j0 + j;
      __m512i v = load_n(acc + j, m);
      __m512i corr = e->channel_rows ? _mm512_set1_epi32(e->corr[row_ch]) : load_n(e->corr + col_ch, m);
      v = _mm512_add_epi32(v, corr);
      if (e->wzp) {
        __m512i wz = e->channel_rows ? _mm512_set1_epi32(e->wzp[row_ch]) : load_n(e->wzp + col_ch, m);
        __m512i as = e->channel_rows ? load_n(t->asum + j, m) : _mm512_set1_epi32(t->asum[r]);
        v = _mm512_sub_epi32(v, _mm512_mullo_epi32(wz, as));
      }
      switch (e->kind) {
        case ER_QEPI_Q8:
        case ER_QEPI_F32: {
          __m512 mult = e->channel_rows ? _mm512_set1_ps(e->mult[row_ch]) : _mm512_maskz_loadu_ps(m, e->mult + col_ch);
          __m512 off = e->channel_rows ? _mm512_set1_ps(e->off[row_ch]) : _mm512_maskz_loadu_ps(m, e->off + col_ch);
          __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), mult, off);
          if (e->kind == ER_QEPI_F32) {
            f = _mm512_min_ps(chi, _mm512_max_ps(clo, f));
            _mm512_mask_storeu_ps(out + (size_t)j * 4, m, f);
            break;
          }
          f = _mm512_min_ps(_mm512_max_ps(f, nbig), big);
          __m512i q = _mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          q = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(q, zp), lo), hi);
          store8(out + j, q, m, n);
          break;
        }
        case ER_QEPI_QLINEAR: {
          /* QLinearConv's arithmetic: (double)acc * mult + zp, two roundings. */
          __m512d m0, m1;
          if (e->channel_rows) {
            m0 = m1 = _mm512_set1_pd(e->mult_d[row_ch]);
          } else {
            m0 = _mm512_maskz_loadu_pd((__mmask8)(m & 0xff), e->mult_d + col_ch);
            m1 = _mm512_maskz_loadu_pd((__mmask8)(m >> 8), e->mult_d + col_ch + 8);
          }
          __m512d d0 = _mm512_add_pd(_mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(v)), m0), zpd);
          __m512d d1 = _mm512_add_pd(_mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(v, 1)), m1), zpd);
          d0 = _mm512_roundscale_pd(_mm512_min_pd(_mm512_max_pd(d0, lod), hid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          d1 = _mm512_roundscale_pd(_mm512_min_pd(_mm512_max_pd(d1, lod), hid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtpd_epi32(d0)), _mm512_cvtpd_epi32(d1), 1);
          store8(out + j, q, m, n);
          break;
        }
        case ER_QEPI_I32: _mm512_mask_storeu_epi32(out + (size_t)j * 4, m, v); break;
      }
    }
  }
}

/* ======================================================================== */
/* AMX-INT8                                                                  */
/* ======================================================================== */

/* A 32 x 32 output tile as four 16 x 16 int32 AMX tiles (tmm0-3), its two
 * 16-row weight halves (tmm4-5, 64 bytes of K per row) and its two 16-
 * pixel activation halves (tmm6-7, 16 k groups of 4 bytes per pixel) per 64
 * of K: one TDPBSUD multiplies a tile pair in 16 x 16 x 64 signed x
 * unsigned byte products, 16 times what one vpdpbusd does. The sums are
 * exact int32 as in the VNNI tiles; the accumulators go through memory to
 * the AVX-512 epilogue. Rows panels are [K / 64][32][64] (row_kg 64),
 * columns panels the VNNI layout [K / 4][32][4], K padded to 64. */
#define AMR 32
#define ANR 32

typedef struct amx_config {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} amx_config;

/* Every tile 16 rows of 64 bytes; loaded once per thread (the tile state
 * is saved and restored with the thread like any register). */
__attribute__((target("amx-tile,amx-int8"))) static void amx_setup(void) {
  static _Thread_local bool configured;
  if (configured) return;
  amx_config c;
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int t = 0; t < 8; t++) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  _tile_loadconfig(&c);
  configured = true;
}

__attribute__((target("amx-tile,amx-int8"))) static void tile_conv_amx(int64_t kgroups, const void *rows,
                                                                       const uint8_t *cols, int rows_valid,
                                                                       bool w_rows, int32_t *acc) {
  ER_UNUSED(rows_valid); /* rows past it are zeros in the panel */
  amx_setup();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const uint8_t *a = rows, *b = cols;
  for (int64_t g = 0; g < kgroups; g += 16) {
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + 16 * 64, 64);
    _tile_loadd(6, b, ANR * 4);
    _tile_loadd(7, b + 64, ANR * 4);
    if (w_rows) {
      _tile_dpbsud(0, 4, 6);
      _tile_dpbsud(1, 4, 7);
      _tile_dpbsud(2, 5, 6);
      _tile_dpbsud(3, 5, 7);
    } else {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
    a += AMR * 64;
    b += 16 * ANR * 4;
  }
  _tile_stored(0, acc, ANR * 4);
  _tile_stored(1, acc + 16, ANR * 4);
  _tile_stored(2, acc + 16 * ANR, ANR * 4);
  _tile_stored(3, acc + 16 * ANR + 16, ANR * 4);
}

const er_qgemm_isa er__qgemm_conv_amx = {"32x32__amx", AMR, ANR, 4, 1, tile_conv_amx, NULL, epilogue, NULL, 64, 64, NULL,
                                         NULL, 0, NULL, 0};

const er_qgemm_isa er__qgemm_conv_avx512vnni = {"8x32__avx512vnni", CMR, CNR, 4, 1, tile_conv, tile_conv_ind, epilogue,
                                                tile_conv_q8, 0, 0, NULL, tile_conv_q8_w3, CNR + 16,
                                                px_row_conv, PXR};
const er_qgemm_isa er__qgemm_mm_avx512vnni = {"4x64__avx512vnni", 4, 64, 4, 1, tile_mm, NULL, epilogue, NULL, 0, 0, NULL,
                                              NULL, 0, NULL, 0};
