/* qgemm-avx2.c - the integer GEMM microkernels and epilogue for AVX2.
 * AVX2 has no byte dot product that cannot saturate (vpmaddubsw adds two
 * u8 x s8 products into int16 with saturation: 2 * 255 * 127 > 32767), so
 * operands are widened to int16 and multiplied with vpmaddwd (two int16
 * products summed into int32, exact): k runs in pairs (KG = 2), the rows
 * panel holds int16 pairs (broadcast as one 32-bit value) and the columns
 * panel bytes, widened in the loop. Called only when er__cpu_features()
 * reports AVX2, FMA and F16C (er__qgemm_best).
 *
 *  - conv, 6 x 16: weight rows broadcast, two vectors of 8 pixels; 12
 *    accumulators of the 16 registers.
 *  - mm, 4 x 16: activation rows broadcast, two vectors of 8 columns.
 *  - the same two shapes with vpmaddubsw for weights within [-64, 64]
 *    (7-bit weights), which cannot saturate (the "w7" tiles below). */
#include <immintrin.h>

#include "kernels/qgemm.h"

#define AI static inline __attribute__((always_inline))

/* The accumulators of one tile: MR rows x two vectors of 8 columns. */
typedef struct tile_acc {
  __m256i c[6][2];
} tile_acc;

/* The 7-bit weight ("w7") tiles' product. When every packed weight lies in
 * [-64, 64], vpmaddubsw cannot saturate: a pair of u8 x s8 products is at
 * most 2 * 255 * 64 = 32640 in magnitude. Then four bytes of k take one
 * vpmaddubsw (pairs into int16; its first operand is the unsigned one) and
 * one vpmaddwd by ones (pairs of those into int32), on the layout of the
 * VNNI kernels (KG = 4, one byte per row element, rows broadcast as 32-bit
 * words): 32 exact multiply-adds per vpmaddubsw, vpmaddwd and add, against
 * 16 per vpmaddwd and add. The kernel table takes these tiles only for
 * weights checked to fit (quant.c); models quantized with 7-bit weights
 * (edgerun quantize --reduce-range, onnxruntime's reduce_range) do. */
AI __m256i dot4(__m256i acc, __m256i u8, __m256i s8, __m256i ones) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), ones));
}

/* The whole sum of a tile over `groups` k groups.
 *  - W7 false: KG = 2, rows int16 pairs (broadcast as 32-bit words),
 *    columns bytes widened to int16 (activations unsigned when w_rows,
 *    weights signed otherwise), vpmaddwd.
 *  - W7 true: KG = 4, rows bytes (broadcast as 32-bit words), columns
 *    bytes, dot4.
 * koff NULL: packed columns (NR * KG bytes per k group), else the k
 * group's columns in place at b + koff[q]. */
AI tile_acc tile_sum_loop(int64_t groups, const uint8_t *a, const uint8_t *b, const int64_t *koff, const int32_t *init,
                          const int MR, const int R, const bool w_rows, const bool W7, const bool IND) {
  const int kg = W7 ? 4 : 2, row_bytes = W7 ? 1 : 2;
  const __m256i ones = _mm256_set1_epi16(1);
  tile_acc t;
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
    if (r < R) t.c[r][0] = t.c[r][1] = init ? _mm256_set1_epi32(init[r]) : _mm256_setzero_si256();
  for (int64_t q = 0; q < groups; q++) {
    const uint8_t *bq = IND ? b + koff[q] : b + q * 16 * kg;
    __m256i v0, v1;
    if (W7) {
      v0 = _mm256_loadu_si256((const __m256i *)bq);
      v1 = _mm256_loadu_si256((const __m256i *)(bq + 32));
    } else {
      __m128i b0 = _mm_loadu_si128((const __m128i *)bq), b1 = _mm_loadu_si128((const __m128i *)(bq + 16));
      v0 = w_rows ? _mm256_cvtepu8_epi16(b0) : _mm256_cvtepi8_epi16(b0);
      v1 = w_rows ? _mm256_cvtepu8_epi16(b1) : _mm256_cvtepi8_epi16(b1);
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      if (r < R) {
        int32_t w;
        memcpy(&w, a + r * kg * row_bytes, sizeof w);
        __m256i av = _mm256_set1_epi32(w);
        if (!W7) {
          t.c[r][0] = _mm256_add_epi32(t.c[r][0], _mm256_madd_epi16(v0, av));
          t.c[r][1] = _mm256_add_epi32(t.c[r][1], _mm256_madd_epi16(v1, av));
        } else if (w_rows) {
          t.c[r][0] = dot4(t.c[r][0], v0, av, ones);
          t.c[r][1] = dot4(t.c[r][1], v1, av, ones);
        } else {
          t.c[r][0] = dot4(t.c[r][0], av, v0, ones);
          t.c[r][1] = dot4(t.c[r][1], av, v1, ones);
        }
      }
    }
    a += MR * kg * row_bytes;
  }
  return t;
}

/* The loop once per way of reading the columns: a test of koff inside it
 * cost the 1-row product (a GEMV, every LSTM step) a third of its speed.
 * init: each row's sums start from init[r] (else 0). */
AI tile_acc tile_sum(int64_t groups, const uint8_t *a, const uint8_t *b, const int64_t *koff, const int32_t *init,
                     const int MR, const int R, const bool w_rows, const bool W7) {
  if (koff) return tile_sum_loop(groups, a, b, koff, init, MR, R, w_rows, W7, true);
  return tile_sum_loop(groups, a, b, koff, init, MR, R, w_rows, W7, false);
}

AI void tile_store(const tile_acc *t, int32_t *acc, const int MR, const int R) {
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) {
    if (r < R) {
      _mm256_storeu_si256((__m256i *)(acc + r * 16), t->c[r][0]);
      _mm256_storeu_si256((__m256i *)(acc + r * 16 + 8), t->c[r][1]);
    }
  }
}

/* Bytes [first, first + len) of v (len <= 16) to p. */
AI void store_run(uint8_t *p, __m128i v, int first, int len) {
  uint8_t tmp[16];
  _mm_storeu_si128((__m128i *)tmp, v);
  const uint8_t *s = tmp + first;
  if (len == 16) {
    memcpy(p, s, 16);
    return;
  }
  if (len & 8) {
    memcpy(p, s, 8);
    p += 8;
    s += 8;
  }
  if (len & 4) {
    memcpy(p, s, 4);
    p += 4;
    s += 4;
  }
  if (len & 2) {
    memcpy(p, s, 2);
    p += 2;
    s += 2;
  }
  if (len & 1) *p = *s;
}

/* The ER_QEPI_Q8 epilogue (per row, no weight zero points) of a tile just
 * summed, its sums still in registers and already holding the rows'
 * corrections (tile_sum's init), the same operations as epilogue() below
 * without its per-element generality: rows [i0, i0 + R) of C at out (row
 * stride ldc); the tile's columns land in nseg runs. cvtps2dq rounds to
 * nearest even: runs set that mode (er__fp_mode_for_run). */
AI void tile_q8_store(const tile_acc *t, const er_qepi *e, int64_t i0, uint8_t *out, int64_t ldc, const er_qseg *segs,
                      int nseg, const int R) {
  /* Clamped in float to [lo - zp, hi - zp] before rounding: with integer
   * bounds, rounding then clamping gives the same integer (the sums are
   * finite, so no NaN reaches here), and the zero point then adds in 16
   * bits without leaving [lo, hi]. */
  const __m256 flo = _mm256_set1_ps((float)(e->lo - e->zp)), fhi = _mm256_set1_ps((float)(e->hi - e->zp));
  const __m256i zp16 = _mm256_set1_epi16((int16_t)e->zp);
  /* In locals: the byte stores to out may alias e and what it points to. */
  const float *const mult_p = e->mult + i0, *const off_p = e->off + i0;
  const bool out_signed = e->out_signed, whole = nseg == 1 && segs[0].first == 0 && segs[0].len == 16;
  const int64_t col0 = segs[0].col;
  __m128i bytes[6];
#pragma GCC unroll 6
  for (int r = 0; r < 6; r++) {
    if (r < R) {
      const __m256 mult = _mm256_broadcast_ss(mult_p + r), off = _mm256_broadcast_ss(off_p + r);
      __m256i q[2];
#pragma GCC unroll 2
      for (int v = 0; v < 2; v++) {
        __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t->c[r][v]), mult, off);
        q[v] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(f, flo), fhi));
      }
      /* 16 int32 in [lo, hi] (after the zero point) to 16 bytes in column
       * order (the packs work within 128-bit lanes). */
      __m256i w = _mm256_permute4x64_epi64(_mm256_add_epi16(_mm256_packs_epi32(q[0], q[1]), zp16), 0xD8);
      __m128i w0 = _mm256_castsi256_si128(w), w1 = _mm256_extracti128_si256(w, 1);
      bytes[r] = out_signed ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
    }
  }
  /* Stored after all rows are converted: no load of the parameters waits
   * on a store it might alias. */
#pragma GCC unroll 6
  for (int r = 0; r < 6; r++) {
    if (r < R) {
      uint8_t *row = out + r * ldc;
      if (whole) _mm_storeu_si128((__m128i *)(row + col0), bytes[r]);
      else
        for (int sg = 0; sg < nseg; sg++) store_run(row + segs[sg].col, bytes[r], segs[sg].first, segs[sg].len);
    }
  }
}

/* The tiles, per number of valid rows R: conv (6 x 16, weights in rows),
 * mm (4 x 16, activations in rows), each with vpmaddwd and with w7; the
 * conv tiles also in place (koff) and with the Q8 epilogue fused. */
#define DEFINE_TILES(SFX, W7, R)                                                                                  \
  static void conv##SFX##_##R(int64_t g, const uint8_t *a, const uint8_t *b, const int64_t *koff, int32_t *acc) { \
    tile_acc t = tile_sum(g, a, b, koff, NULL, 6, R, true, W7);                                                   \
    tile_store(&t, acc, 6, R);                                                                                    \
  }                                                                                                               \
  static void convq##SFX##_##R(int64_t g, const uint8_t *a, const uint8_t *b, const int64_t *koff, const er_qepi *e, \
                               int64_t i0, uint8_t *out, int64_t ldc, const er_qseg *segs, int nseg) {            \
    tile_acc t = tile_sum(g, a, b, koff, e->corr + i0, 6, R, true, W7);                                           \
    tile_q8_store(&t, e, i0, out, ldc, segs, nseg, R);                                                            \
  }
#define DEFINE_MM_TILE(SFX, W7, R)                                                                                \
  static void mm##SFX##_##R(int64_t g, const uint8_t *a, const uint8_t *b, const int64_t *koff, int32_t *acc) {   \
    tile_acc t = tile_sum(g, a, b, koff, NULL, 4, R, false, W7);                                                        \
    tile_store(&t, acc, 4, R);                                                                                    \
  }
#define FOR_CONV_ROWS(X, SFX, W7) X(SFX, W7, 1) X(SFX, W7, 2) X(SFX, W7, 3) X(SFX, W7, 4) X(SFX, W7, 5) X(SFX, W7, 6)
#define FOR_MM_ROWS(X, SFX, W7) X(SFX, W7, 1) X(SFX, W7, 2) X(SFX, W7, 3) X(SFX, W7, 4)
FOR_CONV_ROWS(DEFINE_TILES, , false)
FOR_CONV_ROWS(DEFINE_TILES, 7, true)
FOR_MM_ROWS(DEFINE_MM_TILE, , false)
FOR_MM_ROWS(DEFINE_MM_TILE, 7, true)

typedef void (*tile_fn)(int64_t, const uint8_t *, const uint8_t *, const int64_t *, int32_t *);
typedef void (*tile_q8_fn)(int64_t, const uint8_t *, const uint8_t *, const int64_t *, const er_qepi *, int64_t,
                           uint8_t *, int64_t, const er_qseg *, int);
static const tile_fn conv_fns[] = {NULL, conv_1, conv_2, conv_3, conv_4, conv_5, conv_6};
static const tile_fn conv7_fns[] = {NULL, conv7_1, conv7_2, conv7_3, conv7_4, conv7_5, conv7_6};
static const tile_q8_fn convq_fns[] = {NULL, convq_1, convq_2, convq_3, convq_4, convq_5, convq_6};
static const tile_q8_fn convq7_fns[] = {NULL, convq7_1, convq7_2, convq7_3, convq7_4, convq7_5, convq7_6};
static const tile_fn mm_fns[] = {NULL, mm_1, mm_2, mm_3, mm_4};
static const tile_fn mm7_fns[] = {NULL, mm7_1, mm7_2, mm7_3, mm7_4};

/* The er_qgemm_isa entry points of one tile family, by valid rows. */
#define DEFINE_ENTRIES(SFX)                                                                                       \
  static void tile_conv##SFX(int64_t groups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,   \
                             int32_t *acc) {                                                                      \
    ER_UNUSED(w_rows);                                                                                            \
    conv##SFX##_fns[rows_valid](groups, rows, cols, NULL, acc);                                                   \
  }                                                                                                               \
  static void tile_conv##SFX##_ind(int64_t groups, const void *rows, const uint8_t *cols, const int64_t *koff,     \
                                   int rows_valid, int32_t *acc) {                                                \
    conv##SFX##_fns[rows_valid](groups, rows, cols, koff, acc);                                                   \
  }                                                                                                               \
  static void tile_conv##SFX##_q8(int64_t groups, const void *rows, const uint8_t *cols, const int64_t *koff,      \
                                  int rows_valid, const er_qepi *e, int64_t i0, uint8_t *c, int64_t ldc,          \
                                  const er_qseg *segs, int nseg) {                                                \
    convq##SFX##_fns[rows_valid](groups, rows, cols, koff, e, i0, c, ldc, segs, nseg);                            \
  }                                                                                                               \
  static void tile_mm##SFX(int64_t groups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,     \
                           int32_t *acc) {                                                                        \
    ER_UNUSED(w_rows);                                                                                            \
    mm##SFX##_fns[rows_valid](groups, rows, cols, NULL, acc);                                                     \
  }
DEFINE_ENTRIES()
DEFINE_ENTRIES(7)

/* ======================================================================== */
/* The epilogue                                                              */
/* ======================================================================== */

/* Eight columns at a time; the last n < 8 with masked loads of the
 * per-column parameters and the activation sums, and partial stores (the
 * accumulator tile itself is always NR wide and readable). Tiles over
 * virtual columns arrive in runs of any length (a 56-pixel row in tiles of
 * 16 leaves runs of 8 and 6), so tails are common: ResNet-18's int8 3x3
 * layers spent a fifth of their time in the scalar epilogue. */
static void epilogue(const er_qepi *e, const er_qtile_out *t) {
  if (e->kind == ER_QEPI_QLINEAR) {
    er__qepi_scalar(e, t);
    return;
  }
  /* Everything the loop reads, in locals: the byte stores to C may alias
   * anything, so fields read through e and t were loaded again after every
   * store (the epilogue of the depthwise plane path, one long row per
   * channel, was 7% of MobileNetV2 int8). */
  const er_qepi_kind kind = e->kind;
  const bool rows_ch = e->channel_rows, out_signed = e->out_signed;
  const int32_t *const corr_p = e->corr, *const wzp_p = e->wzp, *const asum = t->asum;
  const float *const mult_p = e->mult, *const off_p = e->off;
  const int rows = t->rows, cols = t->cols, nr = t->nr;
  const int64_t ldc = t->ldc, i0 = t->i0, j0 = t->j0;
  const int32_t *const acc0 = t->acc;
  uint8_t *const c0 = t->c;
  const __m256 big = _mm256_set1_ps(1073741824.0f), nbig = _mm256_set1_ps(-1073741824.0f);
  const __m256i zp = _mm256_set1_epi32(e->zp), lo = _mm256_set1_epi32(e->lo), hi = _mm256_set1_epi32(e->hi);
  const __m256 clo = _mm256_set1_ps(e->clip_lo), chi = _mm256_set1_ps(e->clip_hi);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const size_t es = kind == ER_QEPI_Q8 ? 1 : 4;
  for (int r = 0; r < rows; r++) {
    const int32_t *acc = acc0 + r * nr;
    uint8_t *out = c0 + (size_t)(r * ldc) * es;
    const int64_t row_ch = i0 + r;
    /* A row's own parameters (convolutions), broadcast once. */
    const __m256i rcorr = _mm256_set1_epi32(rows_ch ? corr_p[row_ch] : 0);
    const __m256i rwz = _mm256_set1_epi32(rows_ch && wzp_p ? wzp_p[row_ch] : 0);
    const __m256i ras = _mm256_set1_epi32(!rows_ch && wzp_p ? asum[r] : 0);
    const __m256 rmult = _mm256_set1_ps(rows_ch && mult_p ? mult_p[row_ch] : 0.0f);
    const __m256 roff = _mm256_set1_ps(rows_ch && off_p ? off_p[row_ch] : 0.0f);
    for (int j = 0; j < cols; j += 8) {
      const int n = cols - j < 8 ? cols - j : 8;
      const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
      const int64_t col_ch = j0 + j;
      __m256i v = _mm256_loadu_si256((const __m256i *)(acc + j));
      v = _mm256_add_epi32(v, rows_ch ? rcorr : _mm256_maskload_epi32(corr_p + col_ch, m));
      if (wzp_p) {
        __m256i wz = rows_ch ? rwz : _mm256_maskload_epi32(wzp_p + col_ch, m);
        __m256i as = rows_ch ? _mm256_maskload_epi32(asum + j, m) : ras;
        v = _mm256_sub_epi32(v, _mm256_mullo_epi32(wz, as));
      }
      if (kind == ER_QEPI_I32) {
        if (n == 8) _mm256_storeu_si256((__m256i *)(out + (size_t)j * 4), v);
        else _mm256_maskstore_epi32((int *)(void *)(out + (size_t)j * 4), m, v);
        continue;
      }
      __m256 mult = rows_ch ? rmult : _mm256_maskload_ps(mult_p + col_ch, m);
      __m256 off = rows_ch ? roff : _mm256_maskload_ps(off_p + col_ch, m);
      __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), mult, off);
      if (kind == ER_QEPI_F32) {
        f = _mm256_min_ps(chi, _mm256_max_ps(clo, f));
        if (n == 8) _mm256_storeu_ps((float *)(void *)(out + (size_t)j * 4), f);
        else _mm256_maskstore_ps((float *)(void *)(out + (size_t)j * 4), m, f);
        continue;
      }
      f = _mm256_min_ps(_mm256_max_ps(f, nbig), big);
      __m256i q = _mm256_cvtps_epi32(f); /* to nearest even in runs (er__fp_mode_for_run) */
      q = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(q, zp), lo), hi);
      __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      __m128i p8 = out_signed ? _mm_packs_epi16(p16, p16) : _mm_packus_epi16(p16, p16);
      if (n == 8) _mm_storel_epi64((__m128i *)(out + j), p8);
      else er__store_low_bytes(out + j, (uint64_t)_mm_cvtsi128_si64(p8), n);
    }
  }
}

/* ======================================================================== */
/* The transposed (pixel rows) convolution tile, 7-bit weights              */
/* ======================================================================== */

/* R pixels (broadcast, read in place) by 16 output channels (the weights'
 * columns panel): the sums start from the channels' corrections and are
 * requantized per channel (lane), then written channel-major. */
AI void px_tile7(int64_t groups, const uint8_t *const *px, const int64_t *koff, const uint8_t *w,
                 const int32_t *corr, const float *mult_p, const float *off_p, const er_qepi *e, uint8_t *out,
                 int64_t ldo, int ncols, const int R) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i c0 = _mm256_loadu_si256((const __m256i *)corr), c1 = _mm256_loadu_si256((const __m256i *)(corr + 8));
  const uint8_t *p[6];
  __m256i acc[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < 6; r++) {
    p[r] = px[r < R ? r : 0];
    acc[r][0] = c0;
    acc[r][1] = c1;
  }
  for (int64_t q = 0; q < groups; q++, w += 64) {
    const int64_t o = koff[q];
    const __m256i b0 = _mm256_load_si256((const __m256i *)w), b1 = _mm256_load_si256((const __m256i *)(w + 32));
#pragma GCC unroll 6
    for (int r = 0; r < 6; r++) {
      if (r < R) {
        int32_t v;
        memcpy(&v, p[r] + o, sizeof v);
        const __m256i a = _mm256_set1_epi32(v);
        acc[r][0] = dot4(acc[r][0], a, b0, ones);
        acc[r][1] = dot4(acc[r][1], a, b1, ones);
      }
    }
  }
  const __m256 m0 = _mm256_loadu_ps(mult_p), m1 = _mm256_loadu_ps(mult_p + 8);
  const __m256 o0 = _mm256_loadu_ps(off_p), o1 = _mm256_loadu_ps(off_p + 8);
  const __m256 flo = _mm256_set1_ps((float)(e->lo - e->zp)), fhi = _mm256_set1_ps((float)(e->hi - e->zp));
  const __m256i zp16 = _mm256_set1_epi16((int16_t)e->zp);
  const bool out_signed = e->out_signed;
  uint8_t tb[6][16] __attribute__((aligned(16)));
#pragma GCC unroll 6
  for (int r = 0; r < 6; r++) {
    if (r < R) {
      /* Rounded to nearest even by cvtps2dq (er__fp_mode_for_run). */
      __m256 f0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][0]), m0, o0);
      __m256 f1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][1]), m1, o1);
      __m256i q0 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(f0, flo), fhi));
      __m256i q1 = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(f1, flo), fhi));
      __m256i v = _mm256_permute4x64_epi64(_mm256_add_epi16(_mm256_packs_epi32(q0, q1), zp16), 0xD8);
      __m128i v0 = _mm256_castsi256_si128(v), v1 = _mm256_extracti128_si256(v, 1);
      _mm_store_si128((__m128i *)tb[r], out_signed ? _mm_packs_epi16(v0, v1) : _mm_packus_epi16(v0, v1));
    }
  }
  for (int c = 0; c < ncols; c++) {
    uint8_t *d = out + c * ldo;
#pragma GCC unroll 6
    for (int r = 0; r < 6; r++)
      if (r < R) d[r] = tb[r][c];
  }
}

#define DEFINE_PX_TILE(R)                                                                                        \
  static void px_tile7_##R(int64_t groups, const uint8_t *const *px, const int64_t *koff, const uint8_t *w,      \
                           const int32_t *corr, const float *mult, const float *off, const er_qepi *e, uint8_t *out, \
                           int64_t ldo, int ncols) {                                                             \
    px_tile7(groups, px, koff, w, corr, mult, off, e, out, ldo, ncols, R);                                       \
  }
DEFINE_PX_TILE(1)
DEFINE_PX_TILE(2)
DEFINE_PX_TILE(3)
DEFINE_PX_TILE(4)
DEFINE_PX_TILE(5)
DEFINE_PX_TILE(6)

static void px_tile_conv7(int64_t groups, const uint8_t *const *px, int R, const int64_t *koff, const uint8_t *w,
                          const int32_t *corr, const float *mult, const float *off, const er_qepi *e, uint8_t *out,
                          int64_t ldo, int ncols) {
  static const er_qpx_rows_fn fns[] = {NULL, px_tile7_1, px_tile7_2, px_tile7_3, px_tile7_4, px_tile7_5, px_tile7_6};
  fns[R](groups, px, koff, w, corr, mult, off, e, out, ldo, ncols);
}

const er_qgemm_isa er__qgemm_conv_avx2 = {"6x16__avx2", 6, 16, 2, 2, tile_conv, tile_conv_ind, epilogue, tile_conv_q8,
                                          0, 0, NULL, NULL, 0, NULL, 0};
const er_qgemm_isa er__qgemm_mm_avx2 = {"4x16__avx2", 4, 16, 2, 2, tile_mm, NULL, epilogue, NULL, 0, 0, NULL, NULL, 0, NULL, 0};
const er_qgemm_isa er__qgemm_conv_avx2w7 = {"6x16w7__avx2", 6, 16, 4, 1, tile_conv7, tile_conv7_ind, epilogue,
                                            tile_conv7_q8, 0, 0, px_tile_conv7, NULL, 0, NULL, 0};
const er_qgemm_isa er__qgemm_mm_avx2w7 = {"4x16w7__avx2", 4, 16, 4, 1, tile_mm7, NULL, epilogue, NULL, 0, 0, NULL,
                                          NULL, 0, NULL, 0};
