/* layout-avx2.c - Transpose's 2-D step for 4-byte elements with AVX2:
 * 8 x 8 blocks moved through registers (simd.h's v_transpose; the shuffles
 * move bits, so any 4-byte type goes through them unchanged), in 32 x 32
 * tiles so that the cache lines a tile reads and writes are used whole.
 * Called only when er__cpu_features() reports AVX2 (layout.c checks). */
#define ER_SIMD_AVX2 1
#include "backends/cpu/kernels/simd.h"
#include "backends/cpu/kernels/vec.h"

#define TILE 32

void er__transpose32_avx2(const uint32_t *in, int64_t in_b, uint32_t *out, int64_t out_a, int64_t na, int64_t nb) {
  const int64_t a8 = na / 8 * 8, b8 = nb / 8 * 8;
  for (int64_t at = 0; at < a8; at += TILE)
    for (int64_t bt = 0; bt < b8; bt += TILE) {
      const int64_t a_end = at + TILE < a8 ? at + TILE : a8, b_end = bt + TILE < b8 ? bt + TILE : b8;
      for (int64_t a0 = at; a0 < a_end; a0 += 8)
        for (int64_t b0 = bt; b0 < b_end; b0 += 8) {
          vf r[8];
          for (int i = 0; i < 8; i++) r[i] = v_ld((const float *)(const void *)(in + a0 + (b0 + i) * in_b));
          v_transpose(r);
          for (int k = 0; k < 8; k++) v_st((float *)(void *)(out + (a0 + k) * out_a + b0), r[k]);
        }
    }
  /* The edges: columns past b8 of the first a8 rows, then the last rows. */
  for (int64_t a = 0; a < na; a++)
    for (int64_t b = a < a8 ? b8 : 0; b < nb; b++) out[a * out_a + b] = in[a + b * in_b];
}
