/* qgemm-neon.c - the integer GEMM microkernels for AArch64 with the dot
 * product extension (sdot: four int8 x int8 products into each int32
 * lane). Compiled only for Arm, and only when the compiler targets dotprod
 * (__ARM_FEATURE_DOTPROD, e.g. -march=armv8.2-a+dotprod or -mcpu=native on
 * such a core); er__qgemm_best() then also requires the CPU's dotprod
 * hwcap. Written against the same packed layouts as the x86 kernels (k in
 * groups of 4 bytes; see qgemm.h); not run on the x86 machine this was
 * developed on.
 *
 * sdot multiplies signed by signed, and qgemm's activations are unsigned
 * bytes: the kernels flip them to signed (x - 128, an XOR with 0x80) as
 * they load them, and add back 128 times the weight sums, which they
 * accumulate alongside with a dot product against ones. The results are the
 * same int32 sums as the x86 kernels'. The epilogue is the scalar one. */
#include "kernels/qgemm.h"

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

/* ---- convolution: 8 weight rows (broadcast lanes) x 8 pixels ---------------- */

/* k group q: weights a[q][8][4] (two 16-byte vectors, rows 0-3 and 4-7),
 * activations at b_q (8 pixels x 4 bytes, two vectors). */
static inline __attribute__((always_inline)) void conv_step(const int8_t *a, const uint8_t *bq, int32x4_t c[8][2],
                                                            int32x4_t *ws0, int32x4_t *ws1) {
  const uint8x16_t flip = vdupq_n_u8(0x80);
  const int8x16_t ones = vdupq_n_s8(1);
  int8x16_t b0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(bq), flip));
  int8x16_t b1 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(bq + 16), flip));
  int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
  c[0][0] = vdotq_laneq_s32(c[0][0], b0, a0, 0);
  c[0][1] = vdotq_laneq_s32(c[0][1], b1, a0, 0);
  c[1][0] = vdotq_laneq_s32(c[1][0], b0, a0, 1);
  c[1][1] = vdotq_laneq_s32(c[1][1], b1, a0, 1);
  c[2][0] = vdotq_laneq_s32(c[2][0], b0, a0, 2);
  c[2][1] = vdotq_laneq_s32(c[2][1], b1, a0, 2);
  c[3][0] = vdotq_laneq_s32(c[3][0], b0, a0, 3);
  c[3][1] = vdotq_laneq_s32(c[3][1], b1, a0, 3);
  c[4][0] = vdotq_laneq_s32(c[4][0], b0, a1, 0);
  c[4][1] = vdotq_laneq_s32(c[4][1], b1, a1, 0);
  c[5][0] = vdotq_laneq_s32(c[5][0], b0, a1, 1);
  c[5][1] = vdotq_laneq_s32(c[5][1], b1, a1, 1);
  c[6][0] = vdotq_laneq_s32(c[6][0], b0, a1, 2);
  c[6][1] = vdotq_laneq_s32(c[6][1], b1, a1, 2);
  c[7][0] = vdotq_laneq_s32(c[7][0], b0, a1, 3);
  c[7][1] = vdotq_laneq_s32(c[7][1], b1, a1, 3);
  /* Row sums of the weights: lane r of ws0 (rows 0-3) and ws1 (4-7). */
  *ws0 = vdotq_s32(*ws0, a0, ones);
  *ws1 = vdotq_s32(*ws1, a1, ones);
}

/* acc[r][j] = sum + 128 * (sum of row r's weights), rows < rows_valid. */
static void conv_store(int32x4_t c[8][2], int32x4_t ws0, int32x4_t ws1, int rows_valid, int32_t *acc) {
  int32_t ws[8];
  vst1q_s32(ws, vshlq_n_s32(ws0, 7));
  vst1q_s32(ws + 4, vshlq_n_s32(ws1, 7));
  for (int r = 0; r < rows_valid; r++) {
    int32x4_t w = vdupq_n_s32(ws[r]);
    vst1q_s32(acc + r * 8, vaddq_s32(c[r][0], w));
    vst1q_s32(acc + r * 8 + 4, vaddq_s32(c[r][1], w));
  }
}

static void tile_conv(int64_t groups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,
                      int32_t *acc) {
  int32x4_t c[8][2], ws0 = vdupq_n_s32(0), ws1 = vdupq_n_s32(0);
  for (int r = 0; r < 8; r++) c[r][0] = c[r][1] = vdupq_n_s32(0);
  const int8_t *a = rows;
  ER_UNUSED(w_rows);
  for (int64_t q = 0; q < groups; q++, a += 32, cols += 32) conv_step(a, cols, c, &ws0, &ws1);
  conv_store(c, ws0, ws1, rows_valid, acc);
}

static void tile_conv_ind(int64_t groups, const void *rows, const uint8_t *cols, const int64_t *koff, int rows_valid,
                          int32_t *acc) {
  int32x4_t c[8][2], ws0 = vdupq_n_s32(0), ws1 = vdupq_n_s32(0);
  for (int r = 0; r < 8; r++) c[r][0] = c[r][1] = vdupq_n_s32(0);
  const int8_t *a = rows;
  for (int64_t q = 0; q < groups; q++, a += 32) conv_step(a, cols + koff[q], c, &ws0, &ws1);
  conv_store(c, ws0, ws1, rows_valid, acc);
}

/* ---- matrix product: 4 activation rows (broadcast lanes) x 16 columns ------- */

static void tile_mm(int64_t groups, const void *rows, const uint8_t *cols, int rows_valid, bool w_rows,
                    int32_t *acc) {
  const uint8x16_t flip = vdupq_n_u8(0x80);
  const int8x16_t ones = vdupq_n_s8(1);
  int32x4_t c[4][4], cs[4];
  for (int r = 0; r < 4; r++)
    for (int v = 0; v < 4; v++) c[r][v] = vdupq_n_s32(0);
  for (int v = 0; v < 4; v++) cs[v] = vdupq_n_s32(0);
  const uint8_t *a = rows;
  ER_UNUSED(w_rows);
  for (int64_t q = 0; q < groups; q++, a += 16, cols += 64) {
    /* Activation rows 0-3 (4 bytes each), flipped to signed. */
    int8x16_t av = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(a), flip));
    for (int v = 0; v < 4; v++) {
      int8x16_t bv = vld1q_s8((const int8_t *)cols + v * 16);
      c[0][v] = vdotq_laneq_s32(c[0][v], bv, av, 0);
      c[1][v] = vdotq_laneq_s32(c[1][v], bv, av, 1);
      c[2][v] = vdotq_laneq_s32(c[2][v], bv, av, 2);
      c[3][v] = vdotq_laneq_s32(c[3][v], bv, av, 3);
      cs[v] = vdotq_s32(cs[v], bv, ones); /* column sums of the weights */
    }
  }
  for (int r = 0; r < rows_valid; r++)
    for (int v = 0; v < 4; v++) vst1q_s32(acc + r * 16 + v * 4, vaddq_s32(c[r][v], vshlq_n_s32(cs[v], 7)));
}

const er_qgemm_isa er__qgemm_conv_neondot = {"8x8__neondot", 8, 8, 4, 1, tile_conv, tile_conv_ind, er__qepi_scalar,
                                             NULL, 0, 0, NULL, NULL, 0, NULL, 0};
const er_qgemm_isa er__qgemm_mm_neondot = {"4x16__neondot", 4, 16, 4, 1, tile_mm, NULL, er__qepi_scalar, NULL, 0, 0, NULL,
                                           NULL, 0, NULL, 0};

#endif
