/* sgemm16-avx512.c - a second AVX-512 SGEMM tile: 16 rows x 16 columns
 * (one zmm per row, 16 accumulators). For convolutions whose output
 * channels come in multiples of 16 but not of 14 and whose pixels fill
 * 16-wide panels (MobileNetV2's 32 -> 16 layer at 112 x 112 filled 16 of
 * the 14 x 32 tile's 28 rows): conv.c's f32_conv_gemm_16x16 kernels take a
 * layer only where this tile wastes less. */
#define ER_SIMD_AVX512 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/sgemm.h"

#define MR 16
#define NV 1
#include "kernels/sgemm-impl.h"

/* Blocks as for 14 x 32: a 16 x 256 A panel (16 KiB) in L1, 256 x 16 B
 * panels from a 256 x 512 block in L2. */
const er_sgemm_isa er__sgemm_avx512_16 = {"16x16__avx512", MR, NR, 256, 256, 512, tile, SGEMM_PACK_A};
