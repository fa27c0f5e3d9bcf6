/* qelt.h - the vector loops of the integer kernels other than the GEMM
 * (depthwise convolution, QuantizeLinear, DequantizeLinear, QAdd/QMul,
 * max and average pooling on 8-bit data), one table per ISA. The loops are
 * written once in qelt-impl.h and compiled per ISA by qelt-<isa>.c; the
 * kernels (qkernels.c) choose a table at compile time. Each loop repeats
 * its reference kernel's arithmetic operation for operation, so results
 * are bit-identical. */
#ifndef ER_KERNELS_QELT_H
#define ER_KERNELS_QELT_H

#include "kernels/qgemm.h"

/* One channel of a depthwise convolution (see quant.c): planes of float
 * (x - x_zp) values, padded with 0 and split by stride phase, so that
 * every tap reads one contiguous run over the "virtual" output pixels
 * oy * ws + ox (columns ox >= ow are computed and dropped). */
/* The QConv epilogue of one channel, for depthwise planes requantized as
 * they are summed: q = clamp(rhe(fma(sum + corr, mult, off)) + zp, lo, hi). */
typedef struct er_qdw_q8 {
  int32_t corr;
  float mult, off;
  int32_t zp, lo, hi;
} er_qdw_q8;

typedef struct er_qdw_args {
  const float *planes;   /* [sh * sw][ps]: plane (py, px) at planes + (py * sw + px) * ps */
  int64_t hs, ws;
  int64_t ps;            /* er__qdw_plane_stride(hs, ws): each plane's hs * ws floats
                            and slack whole vectors may run into */
  const uint8_t *x_hi;   /* the end of the readable input: a vector of a plane
                            row may read the next rows' bytes up to it */
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t oh, ow;
  const float *w;        /* [kh * kw] weights minus their zero point */
  const float **taps;    /* [kh * kw] each tap's first plane element (er__qdw_taps) */
  int32_t *iacc;         /* [oh * ws] scratch; the result, [oh * ow] */
  /* With q8 set, the outputs requantized to 8 bits straight into y
   * [oh * ow] instead (iacc unused): no int32 plane, no pass to compact
   * it, no second pass to requantize it. */
  const er_qdw_q8 *q8;
  uint8_t *y;
} er_qdw_args;

/* Floats from one plane to the next: vectors that start in a plane may
 * run up to 16 floats past its end (rows are written, and the last row's
 * sums read, a whole vector at a time). */
static inline int64_t er__qdw_plane_stride(int64_t hs, int64_t ws) { return (hs * ws + 16 + 15) / 16 * 16; }

/* Points a->taps at each tap's first element in the planes; the same for
 * every channel whose planes share the buffer. */
static inline void er__qdw_taps(const er_qdw_args *a) {
  for (int64_t ky = 0; ky < a->kh; ky++) {
    int64_t py = ky * a->dh % a->sh, qy = ky * a->dh / a->sh;
    for (int64_t kx = 0; kx < a->kw; kx++) {
      int64_t px = kx * a->dw % a->sw, qx = kx * a->dw / a->sw;
      a->taps[ky * a->kw + kx] = a->planes + (py * a->sw + px) * a->ps + qy * a->ws + qx;
    }
  }
}

/* The most taps a depthwise filter may have for these kernels: products of
 * 9-bit integers summed over at most 258 taps stay below 2^24, so float
 * sums are exact. */
#define ER_QDW_MAX_TAPS 258

/* A block of up to `lanes` channels of a depthwise convolution computed
 * with the channels in vector lanes, requantized to 8 bits (the QConv
 * epilogue's arithmetic). Rows of the zero-padded input of the block are
 * written, pixel by pixel, as float (x - x_zp) vectors of the block's
 * channels into a band buffer; each output pixel is then kh * kw vector
 * FMAs whatever the plane size or stride, which suits the small planes
 * (and stride-2 layers) where a plane at a time pays more in set-up than
 * in arithmetic. Exact for the same reason as er_qdw_args. */
typedef struct er_qdwc_args {
  const uint8_t *x;      /* the block's first input plane [h, w]; planes h * w apart */
  int64_t h, w, pt, pl;
  int64_t kh, kw, sh, sw, dh, dw, oh, ow;
  int nc;                /* channels in the block, 1 .. lanes */
  bool is_signed;        /* int8 input (else uint8) */
  int32_t xz;
  const float *wt;       /* [kh * kw][lanes] weights minus their zero point */
  const int32_t *corr;   /* [lanes] added to the sums (the bias) */
  const float *mult, *off; /* [lanes] */
  int32_t yz, lo, hi;
  float *band;           /* scratch: band_rows output rows of input (er__qdwc_band_floats) */
  int64_t band_rows;
  uint8_t *y;            /* the block's first output plane [oh, ow]; planes oh * ow apart */
  const uint8_t *x_end;  /* the end of the readable input: short rows may be
                            read a whole vector at a time up to it */
} er_qdwc_args;

/* Input columns the band holds, and the floats it needs for `rows` output
 * rows per band. */
static inline int64_t er__qdwc_band_cols(int64_t ow, int64_t sw, int64_t kw, int64_t dw) {
  return (ow - 1) * sw + (kw - 1) * dw + 1;
}
static inline int64_t er__qdwc_band_floats(int64_t rows, int64_t sh, int64_t kh, int64_t dh, int64_t cols, int lanes) {
  return ((rows - 1) * sh + (kh - 1) * dh + 1) * cols * lanes;
}

typedef struct er_qelt_ops {
  const char *isa;
  /* Writes the planes of one channel: x [h, w] (int8 when is_signed,
   * else uint8) minus the zero point zp, into a->planes with pads pt /
   * pl. Only the input's elements are written: the planes' padding must
   * be 0 already (the buffer zeroed once, before its first channel). */
  void (*dw_planes)(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, bool is_signed, int32_t zp,
                    const er_qdw_args *a);
  /* The channel's exact integer sums into a->iacc, [oh * ow]. */
  void (*dw_plane)(const er_qdw_args *a);
  /* QuantizeLinear, per tensor: y = clamp(rhe(x / s) + zp, lo, hi), NaN -> zp. */
  void (*quantize)(const float *x, uint8_t *y, int64_t n, float s, int32_t zp, int32_t lo, int32_t hi);
  /* DequantizeLinear, per tensor: y = (float)(x - zp) * s. */
  void (*dequantize)(const uint8_t *x, bool is_signed, float *y, int64_t n, float s, int32_t zp);
  /* QAdd / QMul over n elements; a_step / b_step 0 repeats element 0. */
  void (*qbinary)(const uint8_t *a, bool a_signed, int a_step, float as, int32_t az, const uint8_t *b,
                  bool b_signed, int b_step, float bs, int32_t bz, uint8_t *y, int64_t n, float ys, int32_t yz,
                  int32_t lo, int32_t hi, bool mul);
  /* y[i] = max(y[i], x[i]) over n bytes, unsigned or signed. */
  void (*max_u8)(uint8_t *y, const uint8_t *x, int64_t n, bool is_signed);
  /* acc[i] += x[i] (bytes, unsigned or signed) over n. */
  void (*sum_u8)(int32_t *acc, const uint8_t *x, int64_t n, bool is_signed);
  /* Block-wise 4-bit weights (QBlockMatMul), in panels of block_nr
   * columns. block_dequant: kn rows of one panel, nibbles [kn][nr / 2]
   * (column 2i in the low nibble of byte i), into dst [kn][nr] as
   * DequantizeLinear computes them: ((float)q - zp[j]) * scale[j]
   * (zp may be NULL). block_fma: acc[r][j] += sum over k < kn of
   * a[r * lda + k] * w[k][j] for r < mr (mr <= 4), k in order. */
  /* dst[i] = src[2 i] for i < n (reads 2 n - 1 bytes). */
  void (*gather2)(const uint8_t *src, int64_t n, uint8_t *dst);
  /* y[i] = table[x[i] ^ flip] over n bytes (table: 256 entries). */
  void (*lut)(const uint8_t *x, uint8_t flip, const uint8_t *table, uint8_t *y, int64_t n);
  /* Average-pool requantization over n outputs: y[i] = clamp(rhe((float)
   * ((double)(vs[i] - sub) / cnt[i]) * mult) + yz, lo, hi), the
   * reference's double division, computed as one float division: for
   * |vs[i] - sub| and cnt[i] below 2^24 (exact in float), rounding the
   * double quotient to float gives the correctly rounded float quotient
   * (double rounding is innocuous for division when the wider format has
   * at least 2p + 2 bits, 53 >= 2 * 24 + 2: S. Figueroa, "When is double
   * rounding innocuous?", SIGNUM Newsletter 1995). Callers keep to that
   * bound. */
  void (*avg_quant)(const int32_t *vs, int64_t n, int32_t sub, const float *cnt, float mult, int32_t yz, int32_t lo,
                    int32_t hi, uint8_t *y);
  int block_nr;
  void (*block_dequant)(const uint8_t *nib, int64_t kn, bool is_signed, const float *zp, const float *scale,
                        float *dst);
  void (*block_fma)(const float *a, int64_t lda, int mr, const float *w, int64_t kn, float *acc);
  /* Channels per depthwise block (the vector width in floats), and the
   * block's computation (er_qdwc_args). */
  int dwc_lanes;
  void (*dw_block)(const er_qdwc_args *a);
  /* The exact sum of n bytes, unsigned or signed. */
  int64_t (*sum_bytes)(const uint8_t *x, int64_t n, bool is_signed);
  /* (optional) MaxPool of one plane, windows kw = 2 or 3 wide at column
   * stride 2, column dilation 1, pads pt / pl; every window holds an
   * input element. */
  void (*max_plane_s2)(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                       int64_t dh, int64_t kw, int64_t oh, int64_t ow, bool is_signed, uint8_t *y);
  /* (optional) MaxPool of one plane at column stride 1, ow <= 64 and
   * kw <= 16; every window holds an input element. */
  void (*max_plane_s1)(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                       int64_t dh, int64_t kw, int64_t dw, int64_t oh, int64_t ow, bool is_signed, uint8_t *y);
  /* (optional) AveragePool of one plane, column stride and dilation 1,
   * rows of ow + kw - 1 <= 32 padded columns: y = avg_quant's value of
   * (window sum - sub) / cnt[oy * ow + ox], with padding read as xz;
   * every window holds an input row. */
  void (*avg_plane_narrow)(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                           int64_t dh, int64_t kw, int64_t oh, int64_t ow, bool is_signed, int32_t xz, int32_t sub,
                           const float *cnt, float mult, int32_t yz, int32_t lo, int32_t hi, uint8_t *y);
} er_qelt_ops;

#if defined(__x86_64__) || defined(__i386__)
extern const er_qelt_ops er__qelt_avx512, er__qelt_avx2;
#endif

/* Depthwise convolution on AVX-512 VNNI + VBMI with the 8-bit requantized
 * output, a channel at a time: vector lanes are 16 output pixels; each
 * lane's window of up to 4 taps along a kernel row is gathered from input
 * bytes in registers by a byte permutation (vpermb / vpermt2b) and one
 * vpdpbusd adds its 4 products. Padding reads the zero point, which the
 * correction term takes back out. Two ways to get the bytes:
 *   rows:   lanes are 16 pixels of one output row; per kernel row, one
 *           masked load of the input row (needs 15 * sw + (kw - 1) * dw
 *           < 64);
 *   window: lanes are 16 consecutive pixels of the flattened output plane
 *           (small planes, where rows would leave lanes empty); one or two
 *           loads hold every input byte they need (at most 127, the last
 *           table byte left as padding), and per-vector indices, built
 *           once per shape, place each tap. */
#define ER_QDWV_LANES 16
#define ER_QDWV_MAX_GROUPS 4   /* 4-tap groups per kernel row: kw <= 16 */
#define ER_QDWV_MAX_VECS 64    /* vectors per row (rows) or per plane (window) */
#define ER_QDWV_WINDOW_TAPS 8  /* kernel rows x groups for the window tables */

typedef struct er_qdwv_geom {
  int64_t h, w, pt, pl, kh, kw, sh, sw, dh, dw, oh, ow;
} er_qdwv_geom;

typedef struct er_qdwv_plan {
  er_qdwv_geom g;
  int groups;
  bool window;
  int64_t nvec;
  /* rows: per vector of a row, its first input column and the bytes of
   * its load inside the row; the indices per group */
  int64_t start[ER_QDWV_MAX_VECS];
  uint64_t in_row[ER_QDWV_MAX_VECS];
  uint8_t idx[ER_QDWV_MAX_GROUPS][64];
  /* window: per vector, the plane offset of its bytes and the load masks
   * of its two tables; the indices at widx[((v * kh) + ky) * groups + g]
   * (ER_QDWV_WIDX_BYTES, owned by whoever built the plan) */
  bool two;
  /* the whole plane in one table (h * w <= 63): every base is 0 and one
   * load serves every vector */
  bool whole;
  int64_t base[ER_QDWV_MAX_VECS];
  uint64_t m_lo[ER_QDWV_MAX_VECS], m_hi[ER_QDWV_MAX_VECS];
  uint8_t (*widx)[64];
} er_qdwv_plan;

#define ER_QDWV_WIDX_BYTES (ER_QDWV_MAX_VECS * ER_QDWV_WINDOW_TAPS * 64)

typedef struct er_qdwv_args {
  const er_qdwv_plan *plan;
  const uint8_t *x;          /* the first channel's input plane [h, w]; planes h * w apart */
  uint8_t flip;              /* XORed into every input byte (0x80: int8 input) */
  uint8_t pad;               /* a padded input byte, as stored (the zero point) */
  const int32_t *wq;         /* per channel [kh][groups] 4 int8 weights each (0 past kw) */
  const int32_t *corr;       /* per channel: bias - (padded byte after flip) * sum of weights */
  const float *mult, *off;   /* per channel */
  int32_t yz, lo, hi;
  uint8_t *y;                /* the first channel's output plane [oh, ow]; planes oh * ow apart */
} er_qdwv_args;

/* Fills the plan for a shape: the window way when it fits and widx (NULL
 * or ER_QDWV_WIDX_BYTES) is given, else rows; false when neither does. */
#if defined(__x86_64__) || defined(__i386__)
bool er__qdwv_plan_build(er_qdwv_plan *p, const er_qdwv_geom *g, int groups, uint8_t (*widx)[64]);
/* Channels [0, channels) of a. */
void er__qdw_channels_avx512vbmi(const er_qdwv_args *a, int64_t channels);
#endif

#endif /* ER_KERNELS_QELT_H */
