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

#include "backends/cpu/kernels/qgemm.h"

static inline __attribute__((always_inline)) void tile_body(int64_t groups, const int16_t *a, const uint8_t *b,
                                                            int32_t *acc, const int MR, const int R,
                                                            const bool w_rows) {
  __m256i c[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
    if (r < R) c[r][0] = c[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < groups; q++) {
    __m128i b0 = _mm_loadu_si128((const __m128i *)b), b1 = _mm_loadu_si128((const __m128i *)(b + 16));
    /* Activations (conv columns) are unsigned, weights (mm columns) signed. */
    __m256i v0 = w_rows ? _mm256_cvtepu8_epi16(b0) : _mm256_cvtepi8_epi16(b0);
    __m256i v1 = w_rows ? _mm256_cvtepu8_epi16(b1) : _mm256_cvtepi8_epi16(b1);
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      if (r < R) {
        int32_t w;
        memcpy(&w, a + r * 2, sizeof w);
        __m256i av = _mm256_set1_epi32(w);
        c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(v0, av));
        c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(v1, av));
      }
    }
    a += MR * 2;
    b += 32;
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) {
    if (r < R) {
      _mm256_storeu_si256((__m256i *)(acc + r * 16), c[r][0]);
      _mm256_storeu_si256((__m256i *)(acc + r * 16 + 8), c[r][1]);
    }
  }
}

/* The convolution tile over columns read in place (pairs of bytes,
 * widened in the loop). */
static inline __attribute__((always_inline)) void tile_ind_body(int64_t groups, const int16_t *a, const uint8_t *b,
                                                                const int64_t *koff, int32_t *acc, const int R) {
  __m256i c[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < 6; r++)
    if (r < R) c[r][0] = c[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < groups; q++) {
    const uint8_t *bq = b + koff[q];
    __m256i v0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)bq));
    __m256i v1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(bq + 16)));
#pragma GCC unroll 6
    for (int r = 0; r < 6; r++) {
      if (r < R) {
        int32_t w;
        memcpy(&w, a + r * 2, sizeof w);
        __m256i av = _mm256_set1_epi32(w);
        c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(v0, av));
        c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(v1, av));
      }
    }
    a += 12;
  }
#pragma GCC unroll 6
  for (int r = 0; r < 6; r++)
    if (r < R) {
      _mm256_storeu_si256((__m256i *)(acc + r * 16), c[r][0]);
      _mm256_storeu_si256((__m256i *)(acc + r * 16 + 8), c[r][1]);
    }
}

#define DEFINE_TILE_IND(R) \
  static void ind_##R(int64_t g, const int16_t *a, const uint8_t *b, const int64_t *koff, int32_t *acc) { \
    tile_ind_body(g, a, b, koff, acc, R);                                                               \
  }
DEFINE_TILE_IND(1)
DEFINE_TILE_IND(2)
DEFINE_TILE_IND(3)
DEFINE_TILE_IND(4)
DEFINE_TILE_IND(5)
DEFINE_TILE_IND(6)

typedef void (*tile_ind_fn)(int64_t, const int16_t *, const uint8_t *, const int64_t *, int32_t *);

static void tile_conv_ind(int64_t groups, const void *rows, const uint8_t *cols, const int64_t *koff, int rows_valid,
                          int32_t *acc) {
  static const tile_ind_fn fns[] = {NULL, ind_1, ind_2, ind_3, ind_4, ind_5, ind_6};
  fns[rows_valid](groups, rows, cols, koff, acc);
}

#define DEFINE_TILE(NAME, MR, WR, R) \
  static void NAME##_##R(int64_t g, const int16_t *a, const uint8_t *b, int32_t *acc) { tile_body(g, a, b, acc, MR, R, WR); }

DEFINE_TILE(conv, 6, true, 1)
DEFINE_TILE(conv, 6, true, 2)
DEFINE_TILE(conv, 6, true, 3)
DEFINE_TILE(conv, 6, true, 4)
DEFINE_TILE(conv, 6, true, 5)
DEFINE_TILE(conv, 6, true, 6)
DEFINE_TILE(mm, 4, false, 1)
DEFINE_TILE(mm, 4, false, 2)
DEFINE_TILE(mm, 4, false, 3)
DEFINE_TILE(mm, 4, false, 4)

typedef void (*tile_fn)(int64_t, const int16_t *, const uint8_t *, int32_t *);

static void tile_conv(int64_t groups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,
                      int32_t *acc) {
  static const tile_fn fns[] = {NULL, conv_1, conv_2, conv_3, conv_4, conv_5, conv_6};
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
/* 7-bit weights: vpmaddubsw                                                  */
/* ======================================================================== */

/* When every packed weight lies in [-64, 64], vpmaddubsw cannot saturate:
 * a pair of u8 x s8 products is at most 2 * 255 * 64 = 32640 in
 * magnitude. Then four bytes of k take one vpmaddubsw (pairs into int16)
 * and one vpmaddwd by ones (pairs of those into int32), the layout of the
 * VNNI kernels (KG = 4, one byte per row element, rows broadcast as 32-bit
 * words), and twice the multiply-adds per instruction of the vpmaddwd
 * tiles above, still exact. The kernel table takes these tiles only for
 * weights checked to fit (quant.c); models quantized with 7-bit weights
 * (edgerun quantize --reduce-range, onnxruntime's reduce_range) do. */
static inline __attribute__((always_inline)) __m256i dot4(__m256i acc, __m256i u8, __m256i s8, __m256i ones) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), ones));
}

/* koff NULL: packed columns (64 bytes per k group), else the k group's
 * columns in place at b + koff[q]. */
static inline __attribute__((always_inline)) void tile7_body(int64_t groups, const uint8_t *a, const uint8_t *b,
                                                             const int64_t *koff, int32_t *acc, const int MR,
                                                             const int R, const bool w_rows) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++)
    if (r < R) c[r][0] = c[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < groups; q++) {
    const uint8_t *bq = koff ? b + koff[q] : b + q * 64;
    __m256i v0 = _mm256_loadu_si256((const __m256i *)bq), v1 = _mm256_loadu_si256((const __m256i *)(bq + 32));
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      if (r < R) {
        int32_t w;
        memcpy(&w, a + r * 4, sizeof w);
        __m256i av = _mm256_set1_epi32(w);
        /* vpmaddubsw's first operand is the unsigned one: activations. */
        if (w_rows) {
          c[r][0] = dot4(c[r][0], v0, av, ones);
          c[r][1] = dot4(c[r][1], v1, av, ones);
        } else {
          c[r][0] = dot4(c[r][0], av, v0, ones);
          c[r][1] = dot4(c[r][1], av, v1, ones);
        }
      }
    }
    a += MR * 4;
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) {
    if (r < R) {
      _mm256_storeu_si256((__m256i *)(acc + r * 16), c[r][0]);
      _mm256_storeu_si256((__m256i *)(acc + r * 16 + 8), c[r][1]);
    }
  }
}

#define DEFINE_TILE7(NAME, MR, WR, R)                                                                        \
  static void NAME##_##R(int64_t g, const uint8_t *a, const uint8_t *b, const int64_t *koff, int32_t *acc) { \
    tile7_body(g, a, b, koff, acc, MR, R, WR);                                                             \
  }
DEFINE_TILE7(conv7, 6, true, 1)
DEFINE_TILE7(conv7, 6, true, 2)
DEFINE_TILE7(conv7, 6, true, 3)
DEFINE_TILE7(conv7, 6, true, 4)
DEFINE_TILE7(conv7, 6, true, 5)
DEFINE_TILE7(conv7, 6, true, 6)
DEFINE_TILE7(mm7, 4, false, 1)
DEFINE_TILE7(mm7, 4, false, 2)
DEFINE_TILE7(mm7, 4, false, 3)
DEFINE_TILE7(mm7, 4, false, 4)

typedef void (*tile7_fn)(int64_t, const uint8_t *, const uint8_t *, const int64_t *, int32_t *);
static const tile7_fn conv7_fns[] = {NULL, conv7_1, conv7_2, conv7_3, conv7_4, conv7_5, conv7_6};

static void tile_conv7(int64_t groups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,
                       int32_t *acc) {
  ER_UNUSED(w_rows);
  conv7_fns[rows_valid](groups, rows, cols, NULL, acc);
}

static void tile_conv7_ind(int64_t groups, const void *rows, const uint8_t *cols, const int64_t *koff,
                           int rows_valid, int32_t *acc) {
  conv7_fns[rows_valid](groups, rows, cols, koff, acc);
}

static void tile_mm7(int64_t groups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,
                     int32_t *acc) {
  static const tile7_fn fns[] = {NULL, mm7_1, mm7_2, mm7_3, mm7_4};
  ER_UNUSED(w_rows);
  fns[rows_valid](groups, rows, cols, NULL, acc);
}

/* ======================================================================== */
/* The epilogue                                                              */
/* ======================================================================== */

/* Stores the low n (< 8) bytes of v. */
static inline void store_bytes(uint8_t *p, __m128i v, int n) {
  uint64_t b = (uint64_t)_mm_cvtsi128_si64(v);
  if (n & 4) {
    uint32_t w = (uint32_t)b;
    memcpy(p, &w, 4);
    p += 4;
    b >>= 32;
  }
  if (n & 2) {
    uint16_t w = (uint16_t)b;
    memcpy(p, &w, 2);
    p += 2;
    b >>= 16;
  }
  if (n & 1) *p = (uint8_t)b;
}

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
  const __m256 big = _mm256_set1_ps(1073741824.0f), nbig = _mm256_set1_ps(-1073741824.0f);
  const __m256i zp = _mm256_set1_epi32(e->zp), lo = _mm256_set1_epi32(e->lo), hi = _mm256_set1_epi32(e->hi);
  const __m256 clo = _mm256_set1_ps(e->clip_lo), chi = _mm256_set1_ps(e->clip_hi);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const size_t es = e->kind == ER_QEPI_Q8 ? 1 : 4;
  for (int r = 0; r < t->rows; r++) {
    const int32_t *acc = t->acc + r * t->nr;
    uint8_t *out = (uint8_t *)t->c + (size_t)(r * t->ldc) * es;
    int64_t row_ch = t->i0 + r;
    for (int j = 0; j < t->cols; j += 8) {
      const int n = t->cols - j < 8 ? t->cols - j : 8;
      const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
      int64_t col_ch = t->j0 + j;
      __m256i v = _mm256_loadu_si256((const __m256i *)(acc + j));
      __m256i corr = e->channel_rows ? _mm256_set1_epi32(e->corr[row_ch]) : _mm256_maskload_epi32(e->corr + col_ch, m);
      v = _mm256_add_epi32(v, corr);
      if (e->wzp) {
        __m256i wz = e->channel_rows ? _mm256_set1_epi32(e->wzp[row_ch]) : _mm256_maskload_epi32(e->wzp + col_ch, m);
        __m256i as = e->channel_rows ? _mm256_maskload_epi32(t->asum + j, m) : _mm256_set1_epi32(t->asum[r]);
        v = _mm256_sub_epi32(v, _mm256_mullo_epi32(wz, as));
      }
      if (e->kind == ER_QEPI_I32) {
        if (n == 8) _mm256_storeu_si256((__m256i *)(out + (size_t)j * 4), v);
        else _mm256_maskstore_epi32((int *)(void *)(out + (size_t)j * 4), m, v);
        continue;
      }
      __m256 mult = e->channel_rows ? _mm256_set1_ps(e->mult[row_ch]) : _mm256_maskload_ps(e->mult + col_ch, m);
      __m256 off = e->channel_rows ? _mm256_set1_ps(e->off[row_ch]) : _mm256_maskload_ps(e->off + col_ch, m);
      __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), mult, off);
      if (e->kind == ER_QEPI_F32) {
        f = _mm256_min_ps(chi, _mm256_max_ps(clo, f));
        if (n == 8) _mm256_storeu_ps((float *)(void *)(out + (size_t)j * 4), f);
        else _mm256_maskstore_ps((float *)(void *)(out + (size_t)j * 4), m, f);
        continue;
      }
      f = _mm256_min_ps(_mm256_max_ps(f, nbig), big);
      __m256i q = _mm256_cvttps_epi32(_mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      q = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(q, zp), lo), hi);
      __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      __m128i p8 = e->out_signed ? _mm_packs_epi16(p16, p16) : _mm_packus_epi16(p16, p16);
      if (n == 8) _mm_storel_epi64((__m128i *)(out + j), p8);
      else store_bytes(out + j, p8, n);
    }
  }
}

const er_qgemm_isa er__qgemm_conv_avx2 = {"6x16__avx2", 6, 16, 2, 2, tile_conv, tile_conv_ind, epilogue, NULL, 0, 0};
const er_qgemm_isa er__qgemm_mm_avx2 = {"4x16__avx2", 4, 16, 2, 2, tile_mm, NULL, epilogue, NULL, 0, 0};
const er_qgemm_isa er__qgemm_conv_avx2w7 = {"6x16w7__avx2", 6, 16, 4, 1, tile_conv7, tile_conv7_ind, epilogue, NULL, 0, 0};
const er_qgemm_isa er__qgemm_mm_avx2w7 = {"4x16w7__avx2", 4, 16, 4, 1, tile_mm7, NULL, epilogue, NULL, 0, 0};
