/* sgemm-neon.c - the SGEMM tile for AArch64 NEON: 8 rows x 8 columns (two
 * q registers per row, 16 accumulators of the 32). Compiled only for Arm. */
#define ER_SIMD_NEON 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/sgemm.h"

#define MR 8
#define NV 2
#include "kernels/sgemm-impl.h"

const er_sgemm_isa er__sgemm_neon = {"8x8__neon", MR, NR, 128, 256, 512, tile, SGEMM_PACK_A};
