/* sgemm-avx512.c - the SGEMM tile for AVX-512: 14 rows x 32 columns (two
 * zmm per row, 28 accumulators + 2 B vectors + 1 broadcast = 31 of the 32
 * registers; measured 5% faster than 12 x 32 on Zen 4). Called only when er__cpu_features()
 * reports AVX-512 F/BW/VL/DQ (see er__sgemm_best). */
#define ER_SIMD_AVX512 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/sgemm.h"

#define MR 14
#define NV 2
#include "kernels/sgemm-impl.h"

/* Blocks: a 14 x 256 A panel (14 KiB) stays in L1 while 256 x 32 B panels
 * stream from a 256 x 512 block (512 KiB) held in L2 next to the 252 x 256
 * A block. */
const er_sgemm_isa er__sgemm_avx512 = {"14x32__avx512", MR, NR, 252, 256, 512, tile, SGEMM_PACK_A};
