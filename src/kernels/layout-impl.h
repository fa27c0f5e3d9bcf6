/* layout-impl.h - Transpose's 2-D step for 4-byte elements, written once
 * over simd.h (included by layout-<isa>.c after it defines the ISA and
 * TR32_FN, the function's name, and TR_MASKED_EDGE): VN x VN blocks moved through registers
 * (v_transpose; the shuffles move bits, so any 4-byte type goes through
 * them unchanged), in tiles of 4 VN x 4 VN so that the cache lines a tile
 * reads and writes are used whole. */
#include "kernels/vec.h"

#define TR_TILE (4 * VN)

void TR32_FN(const uint32_t *in, int64_t in_b, uint32_t *out, int64_t out_a, int64_t na, int64_t nb) {
  const int64_t av = na / VN * VN, bv = nb / VN * VN;
  for (int64_t at = 0; at < av; at += TR_TILE)
    for (int64_t bt = 0; bt < bv; bt += TR_TILE) {
      const int64_t a_end = at + TR_TILE < av ? at + TR_TILE : av, b_end = bt + TR_TILE < bv ? bt + TR_TILE : bv;
      for (int64_t a0 = at; a0 < a_end; a0 += VN)
        for (int64_t b0 = bt; b0 < b_end; b0 += VN) {
          vf r[VN];
          for (int i = 0; i < VN; i++) r[i] = v_ld((const float *)(const void *)(in + a0 + (b0 + i) * in_b));
          v_transpose(r);
          for (int k = 0; k < VN; k++) v_st((float *)(void *)(out + (a0 + k) * out_a + b0), r[k]);
        }
    }
  /* Columns past bv of the first av rows: the rest of the block from
   * zeros, stored with a mask (YOLOv5's head has 85 columns: 5 past 80).
   * Not on AVX2, whose masked stores are slow on AMD cores. */
  if (TR_MASKED_EDGE && nb > bv)
    for (int64_t a0 = 0; a0 < av; a0 += VN) {
      vf r[VN];
      for (int i = 0; i < VN; i++)
        r[i] = i < nb - bv ? v_ld((const float *)(const void *)(in + a0 + (bv + i) * in_b)) : v_zero();
      v_transpose(r);
      for (int k = 0; k < VN; k++) v_st_n((float *)(void *)(out + (a0 + k) * out_a + bv), r[k], (int)(nb - bv));
    }
  /* The last rows, and with AVX2 the columns past bv of the others. */
  for (int64_t a = 0; a < na; a++)
    for (int64_t b = a < av ? (TR_MASKED_EDGE ? nb : bv) : 0; b < nb; b++) out[a * out_a + b] = in[a + b * in_b];
}
