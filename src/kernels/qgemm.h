/* qgemm.h - the 8-bit integer matrix product every optimized integer
 * kernel (QConv, QMatMul, QLinearConv, QLinearMatMul, ConvInteger,
 * MatMulInteger) runs on: packed operands, register-blocked microkernels
 * per ISA (AVX-512 VNNI vpdpbusd, AVX2 vpmaddwd, or vpmaddubsw for 7-bit
 * weights), and an epilogue that
 * requantizes a tile while it is hot.
 *
 *   C[M, N] = epilogue(A[M, K] B[K, N])
 *
 * One side of every product is activations, read as unsigned bytes (int8
 * activations are shifted by +128, their zero point with them), the other
 * is weights, read as signed bytes (uint8 weights are shifted by -128).
 * The sum over k of (x - x_zp)(w - w_zp) is then
 *
 *   sum x w - x_zp sum w - w_zp sum x + K x_zp w_zp,
 *
 * where sum x w is what the microkernel accumulates in int32 (exact: each
 * 4-term dot product is at most 4 * 255 * 128, and the sum wraps modulo
 * 2^32 exactly like the int32 accumulator the ONNX integer ops define), the
 * weight terms are per-channel constants folded with the bias at prepare
 * time, and sum x (needed only when a weight zero point is not 0) is
 * gathered while the activations are packed. So every kernel matches its
 * reference kernel exactly, whatever the ISA, blocking or thread count.
 *
 * Orientation. "Rows" (A, broadcast in the microkernel, MR of them per
 * tile) and "columns" (B, vector lanes, NR per tile). Convolutions put the
 * weights in rows and output pixels in columns (C is [M channels, pixels],
 * NCHW); matrix products put activation rows in rows and weight columns
 * in columns. Either side may be packed once at compile time (weights) or
 * per block at run time by a callback (activations).
 *
 * Packed layouts, with K padded to a multiple of the ISA's group KG (4 for
 * vpdpbusd and AMX, 2 for vpmaddwd; 64 for AMX, see kpad) by zeros:
 *   rows panel:    [K / KG][MR][KG] elements of `row_bytes` (1, or 2 when
 *                  the ISA wants 16-bit rows: AVX2)
 *   columns panel: [K / KG][NR][KG] bytes
 * A panel holds all of K, so the microkernel runs the whole sum in
 * registers; blocks of panels are sized to stay in L2. */
#ifndef ER_KERNELS_QGEMM_H
#define ER_KERNELS_QGEMM_H

#include "kernels/kernel.h"

/* The largest tile any ISA uses. */
#define ER_QGEMM_MAX_MR 32
#define ER_QGEMM_MAX_NR 64

/* What the epilogue writes. */
typedef enum er_qepi_kind {
  ER_QEPI_Q8 = 0,      /* QConv/QMatMul: rhe(fmaf(acc, mult, off)) + zp, clamped, 8-bit */
  ER_QEPI_F32,         /* QConv/QMatMul with float output: clamp(fmaf(acc, mult, off)) */
  ER_QEPI_QLINEAR,     /* QLinearConv/QLinearMatMul: rhe((double)acc * mult_d + zp), clamped */
  ER_QEPI_I32,         /* ConvInteger/MatMulInteger: acc */
} er_qepi_kind;

/* The epilogue's parameters, per channel (a row of C for convolutions, a
 * column for matrix products: `channel_rows`). */
typedef struct er_qepi {
  er_qepi_kind kind;
  bool channel_rows;
  const int32_t *corr;   /* [channels] int32 added to every sum: bias - x_zp sum w + K x_zp w_zp */
  const int32_t *wzp;    /* [channels] weight zero points (shifted), or NULL when all are 0 */
  const float *mult;     /* [channels] (Q8, F32) */
  const float *off;      /* [channels] (Q8, F32) */
  const double *mult_d;  /* [channels] (QLINEAR) */
  int32_t zp, lo, hi;    /* output zero point and clamp (Q8, QLINEAR) */
  float clip_lo, clip_hi;/* F32 */
  bool out_signed;       /* int8 (else uint8) output */
} er_qepi;

/* One tile for the epilogue: acc [MR][NR] int32 (row stride NR) of `rows`
 * x `cols` valid entries, whose first element is C[i0, j0]. asum[] holds
 * the activation sums of the tile's activation side (rows for matrix
 * products, columns for convolutions), used when epi->wzp is set. */
typedef struct er_qtile_out {
  const int32_t *acc;
  int rows, cols, nr;
  int64_t i0, j0;
  const int32_t *asum;   /* [rows] or [cols], or NULL */
  void *c;               /* C at (i0, j0) */
  int64_t ldc;           /* elements */
} er_qtile_out;

/* A run of a tile's columns: columns [first, first + len) of the tile are
 * C's columns [col, col + len). */
typedef struct er_qseg {
  int first, len;
  int64_t col;
} er_qseg;

/* The most runs a tile of NR columns can split into (rows at least 2
 * columns wide: NR / 2 + 1 runs). */
#define ER_QGEMM_MAX_SEGS (ER_QGEMM_MAX_NR / 2 + 2)

/* One row count's copy of an ISA's transposed tile (px_tile below, R
 * fixed): the tables px_tile dispatches through. */
typedef void (*er_qpx_rows_fn)(int64_t kgroups, const uint8_t *const *px, const int64_t *koff, const uint8_t *w,
                               const int32_t *corr, const float *mult, const float *off, const er_qepi *e,
                               uint8_t *out, int64_t ldo, int ncols);

/* One ISA: its tile shapes and functions. The microkernel computes
 * acc[r][j] = sum over k of rows[k][r] * cols[k][j] for r < rows, all NR
 * columns, with the rows side signed (weights: `w_rows` = 1) or unsigned
 * (activations: `w_rows` = 0), the columns side the other. */
typedef struct er_qgemm_isa {
  const char *name;      /* "8x32__avx512vnni" */
  int mr, nr, kg;        /* tile rows, tile columns, k group */
  int row_bytes;         /* bytes per element of a rows panel (1 or 2) */
  void (*tile)(int64_t kgroups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,
               int32_t *acc /* [mr][nr] */);
  /* (optional; convolutions) The same with the columns read in place:
   * k group g of the tile's columns is NR * KG bytes at cols + koff[g]. */
  void (*tile_ind)(int64_t kgroups, const void *rows, const uint8_t *cols, const int64_t *koff, int rows_valid,
                   int32_t *acc /* [mr][nr] */);
  void (*epilogue)(const er_qepi *e, const er_qtile_out *t);
  /* (optional) The convolution tiles with the ER_QEPI_Q8 epilogue (per
   * row, no weight zero points) applied in registers: rows [i0, i0 +
   * rows_valid) of C (row stride ldc, C at c); the tile's columns land in
   * nseg runs (see er_qseg). koff NULL: the packed-columns tile. */
  void (*tile_q8)(int64_t kgroups, const void *rows, const uint8_t *cols, const int64_t *koff, int rows_valid,
                  const er_qepi *e, int64_t i0, uint8_t *c, int64_t ldc, const er_qseg *segs, int nseg);
  /* (optional, 0 = KG) K is padded to a multiple of kpad, and rows panels
   * group k by row_kg instead of KG: AMX's tiles take 64 bytes of K per
   * row, so its rows panels are [K / 64][MR][64] (each 16-row half an A
   * tile) while its columns panels keep [K / 4][NR][4] (B tiles). */
  int kpad, row_kg;
  /* (optional; convolutions read in place, ER_QEPI_Q8 per output channel,
   * no weight zero points) The transposed tile: R <= MR output pixels by
   * NR output channels, so that small feature maps compute no padding
   * columns and no partial pixel tiles. Pixel r's k group g is KG bytes at
   * px[r] + koff[g]; the weights are one columns panel (NR channels,
   * er__qgemm_pack_cols); corr, mult and off hold NR channels' values.
   * Channel c < ncols of pixel r lands at out[c * ldo + r]. */
  void (*px_tile)(int64_t kgroups, const uint8_t *const *px, int R, const int64_t *koff, const uint8_t *w,
                  const int32_t *corr, const float *mult, const float *off, const er_qepi *e, uint8_t *out,
                  int64_t ldo, int ncols);
  /* (optional; 3x3 windows at stride 1 with one pixel of padding on each
   * side, read in place from planes without padding columns) tile_q8 over
   * k groups that come as runs of 9 taps (kx = t % 3) per channel group:
   * a tap with kx 0 adds nothing to the tile's columns in edge[0] (bit j:
   * column j lies at x = 0, where the tap falls in the left padding, and
   * reads the previous row's last pixel), one with kx 2 nothing to those
   * in edge[1] (x = W - 1), and those columns' sums get ecorr[0][i0 + r] /
   * ecorr[1][i0 + r] added instead: the padding's part of row r's sum. */
  void (*tile_q8_w3)(int64_t kgroups, const void *rows, const uint8_t *cols, const int64_t *koff, int rows_valid,
                     const er_qepi *e, int64_t i0, uint8_t *c, int64_t ldc, const er_qseg *segs, int nseg,
                     const uint64_t edge[2], const int32_t *const ecorr[2]);
  /* (with tile_q8_w3) Its columns per tile: up to 16 more than NR, as its
   * columns are read in place and need no panel. */
  int w3_nr;
  /* (optional; taken instead of px_tile where present) The transposed
   * tile over R <= px_row_max pixels of one output row, consecutive in the
   * planes: pixel r's k group g at p0 + r KG + koff[g]; otherwise as
   * px_tile. */
  void (*px_row_tile)(int64_t kgroups, const uint8_t *p0, int R, const int64_t *koff, const uint8_t *w,
                      const int32_t *corr, const float *mult, const float *off, const er_qepi *e, uint8_t *out,
                      int64_t ldo, int ncols);
  int px_row_max;
} er_qgemm_isa;


#if defined(__x86_64__) || defined(__i386__)
extern const er_qgemm_isa er__qgemm_conv_avx512vnni, er__qgemm_mm_avx512vnni;
/* AMX-INT8 tiles for convolutions (weights in rows), with the AVX-512
 * epilogue: only when er__cpu_features() reports amx_int8 (the OS granted
 * the tile state) and AVX-512 VNNI. */
extern const er_qgemm_isa er__qgemm_conv_amx;
extern const er_qgemm_isa er__qgemm_conv_avx2, er__qgemm_mm_avx2;
/* AVX2 vpmaddubsw tiles, exact only when every packed weight lies in
 * [-64, 64] (7-bit weights): the kernel table checks before it takes them. */
extern const er_qgemm_isa er__qgemm_conv_avx2w7, er__qgemm_mm_avx2w7;
#endif
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#define ER_QGEMM_NEONDOT 1
extern const er_qgemm_isa er__qgemm_conv_neondot, er__qgemm_mm_neondot;
#endif

/* The best ISAs for weights-in-rows (convolution) and activations-in-rows
 * (matrix product) problems, or NULL. */
const er_qgemm_isa *er__qgemm_best(const er_cpu_features *cpu, bool conv);

/* ---- packing --------------------------------------------------------------- */

/* How source bytes become packed values: `flip` is XORed into every byte
 * (0x80 turns int8 activations into uint8 and uint8 weights into int8). */
typedef struct er_qsrc {
  const uint8_t *data;   /* element (r, k) of a rows source at data[r * rs + k * ks] */
  int64_t rs, ks;
  uint8_t flip;
  bool is_weights;       /* signed after the flip */
} er_qsrc;

static inline int64_t er__qgemm_kgroups(const er_qgemm_isa *isa, int64_t k) {
  int64_t unit = isa->kpad > isa->kg ? isa->kpad : isa->kg;
  return (k + unit - 1) / unit * (unit / isa->kg);
}
/* Bytes of one rows panel / one columns panel over all of K. */
static inline size_t er__qgemm_row_panel_bytes(const er_qgemm_isa *isa, int64_t k) {
  return (size_t)(er__qgemm_kgroups(isa, k) * isa->mr * isa->kg * isa->row_bytes);
}
static inline size_t er__qgemm_col_panel_bytes(const er_qgemm_isa *isa, int64_t k) {
  return (size_t)(er__qgemm_kgroups(isa, k) * isa->nr * isa->kg);
}

/* Packs rows [r0, r0 + rows) of the source (rows <= MR; the rest zero) as
 * one rows panel; sums[r] for r < rows (sums may be NULL) receives the sum
 * over k of the packed values. */
void er__qgemm_pack_rows(const er_qgemm_isa *isa, const er_qsrc *src, int64_t r0, int rows, int64_t k, void *dst,
                         int32_t *sums);
/* Packs columns [c0, c0 + cols) of a source viewed as [K, N] (element (k,
 * c) at data[k * rs + c * ks]; cols <= NR, the rest zero) as one columns
 * panel; sums as above, per column (sums[0..cols)). */
void er__qgemm_pack_cols(const er_qgemm_isa *isa, const er_qsrc *src, int64_t c0, int cols, int64_t k, uint8_t *dst,
                         int32_t *sums);
/* Interleaves KG rows of `cols` bytes (row i at rows[i], NULL = zeros)
 * into one k group of a columns panel (KG * NR bytes at dst), XORing
 * `flip`; adds each column's values to sums (may be NULL). */
void er__qgemm_interleave(int kg, int nr, const uint8_t *const *rows, int cols, uint8_t flip, uint8_t *dst,
                          int32_t *sums);
/* The same k group of consecutive columns panels: columns [0, cols) of the
 * rows, panel q (columns q NR ..) at dst + q * panel_bytes, its sums at
 * sums + q NR. */
void er__qgemm_interleave_panels(int kg, int nr, const uint8_t *const *rows, int64_t cols, uint8_t flip,
                                 uint8_t *dst, size_t panel_bytes, int32_t *sums);

/* ---- the driver -------------------------------------------------------------- */

/* Writes the columns panels [j0, j0 + cols) (cols <= the block size, a
 * whole number of panels except at the end) at dst, panel after panel, and
 * the activation sums of those columns at sums (when not NULL). */
typedef void (*er_qpack_cols_fn)(const void *ctx, int64_t j0, int64_t cols, uint8_t *dst, int32_t *sums);
/* The same for rows panels. */
typedef void (*er_qpack_rows_fn)(const void *ctx, int64_t i0, int64_t rows, void *dst, int32_t *sums);

typedef struct er_qgemm_problem {
  const er_qgemm_isa *isa;
  int64_t m, n, k;
  /* Rows: prepacked panels (a panel per MR rows, each row_panel_bytes),
   * or packed per block by pack_rows. */
  const void *rows_packed;
  er_qpack_rows_fn pack_rows;
  const void *rows_ctx;
  /* Columns: the same, or read in place (cols_base, with isa->tile_ind):
   * column j of k group g is KG bytes at cols_base + cols_koff[g] + j * KG
   * (convolutions over channel-grouped planes). */
  const uint8_t *cols_packed;
  er_qpack_cols_fn pack_cols;
  const void *cols_ctx;
  const uint8_t *cols_base;
  const int64_t *cols_koff;
  /* In place with need_asum: the activation sum of column j at
   * cols_asum[j] (the caller sums the planes; nothing is packed). */
  const int32_t *cols_asum;
  bool need_asum;        /* the epilogue needs activation sums (weight zero points) */
  er_qepi epi;
  void *c;               /* C [M, N], element size by epi.kind */
  int64_t ldc;           /* elements */
  /* Virtual columns (convolutions over padded planes): when vw > 0,
   * column j is (j / vw, j % vw) of rows vw wide of which the first `ow`
   * are real; it lands in C's column (j / vw) * ow + j % vw, and the rest
   * are dropped. */
  int64_t vw, ow;
  /* In place over planes `w3` pixels wide with no padding columns (3x3,
   * stride 1 or 2, one pixel of padding each side: isa->tile_q8_w3, the
   * fused Q8 epilogue); w3_corr[0] / [1]: per row (channel) the sum over
   * the window's left / right column of pad * w. 0 otherwise. w3_right:
   * the right taps read padding at x = w3 - 1 (stride 1; at stride 2 on
   * an even width they never do). */
  int64_t w3;
  bool w3_right;
  const int32_t *w3_corr[2];
} er_qgemm_problem;

/* Scratch one worker needs (bytes, a multiple of 64). */
size_t er__qgemm_scratch_bytes(const er_qgemm_problem *p);
/* Computes the problem on up to `slots` workers (scratch holds slots *
 * er__qgemm_scratch_bytes(p), 64-byte aligned). */
void er__qgemm_run(const er_qgemm_problem *p, er_thread_pool *pool, void *scratch, int slots);

#if defined(__SSE2__)
#include <emmintrin.h>
/* Bytes j of a, b, c, d as column j's 4 bytes, for 16 columns (64 bytes at
 * dst): one k group (KG = 4) of 16 columns from 4 rows. */
static inline void er__store_interleaved4(uint8_t *dst, __m128i a, __m128i b, __m128i c, __m128i d) {
  __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
  __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
  __m128i *o = (__m128i *)(void *)dst;
  _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(ab0, cd0));
  _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(ab0, cd0));
  _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(ab1, cd1));
  _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(ab1, cd1));
}
#endif

/* Stores the low n (< 8) bytes of b at p, 4, 2 and 1 at a time (partial
 * output runs of the x86 kernels without masked stores). */
static inline void er__store_low_bytes(uint8_t *p, uint64_t b, int n) {
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

/* The scalar epilogue (every ISA's reference for tails and tests). */
void er__qepi_scalar(const er_qepi *e, const er_qtile_out *t);

#endif /* ER_KERNELS_QGEMM_H */
