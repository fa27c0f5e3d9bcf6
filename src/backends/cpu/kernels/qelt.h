/* qelt.h - the vector loops of the integer kernels other than the GEMM
 * (depthwise convolution, QuantizeLinear, DequantizeLinear, QAdd/QMul,
 * max and average pooling on 8-bit data), one table per ISA. The loops are
 * written once in qelt-impl.h and compiled per ISA by qelt-<isa>.c; the
 * kernels (qkernels.c) choose a table at compile time. Each loop repeats
 * its reference kernel's arithmetic operation for operation, so results
 * are bit-identical. */
#ifndef ER_KERNELS_QELT_H
#define ER_KERNELS_QELT_H

#include "backends/cpu/kernels/qgemm.h"

/* One channel of a depthwise convolution (see quant.c): planes of float
 * (x - x_zp) values, padded with 0 and split by stride phase, so that
 * every tap reads one contiguous run over the "virtual" output pixels
 * oy * ws + ox (columns ox >= ow are computed and dropped). */
typedef struct er_qdw_args {
  const float *planes;   /* [sh * sw][hs * ws] */
  int64_t hs, ws;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t oh, ow;
  const float *w;        /* [kh * kw] weights minus their zero point */
  const float **taps;    /* [kh * kw] scratch */
  int32_t *iacc;         /* [oh * ws] scratch; the result, [oh * ow] */
} er_qdw_args;

typedef struct er_qelt_ops {
  const char *isa;
  /* Writes the planes of one channel: x [h, w] (int8 when is_signed,
   * else uint8) minus the zero point zp, into a->planes with pads pt /
   * pl. */
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
   * ((double)(vs[i] - sub) / cnt[i]) * mult) + yz, lo, hi). */
  void (*avg_quant)(const int32_t *vs, int64_t n, int32_t sub, const double *cnt, float mult, int32_t yz, int32_t lo,
                    int32_t hi, uint8_t *y);
  int block_nr;
  void (*block_dequant)(const uint8_t *nib, int64_t kn, bool is_signed, const float *zp, const float *scale,
                        float *dst);
  void (*block_fma)(const float *a, int64_t lda, int mr, const float *w, int64_t kn, float *acc);
} er_qelt_ops;

#if defined(__x86_64__) || defined(__i386__)
extern const er_qelt_ops er__qelt_avx512, er__qelt_avx2;
#endif

#endif /* ER_KERNELS_QELT_H */
