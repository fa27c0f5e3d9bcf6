/* sgemm-avx2.c - the SGEMM tile for AVX2 + FMA: 6 rows x 16 columns (two
 * ymm per row, 12 accumulators). Called only when er__cpu_features()
 * reports AVX2 and FMA (see er__sgemm_best). */
#define ER_SIMD_AVX2 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/sgemm.h"

#define MR 6
#define NV 2
#include "kernels/sgemm-impl.h"

/* Blocks: a 6 x 256 A panel (6 KiB) in L1, 256 x 16 B panels streaming
 * from a 256 x 512 block in L2. */
const er_sgemm_isa er__sgemm_avx2 = {"6x16__avx2", MR, NR, 144, 256, 512, tile, SGEMM_PACK_A};
