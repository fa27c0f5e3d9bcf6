/* vec-neon.c - the vectorized non-GEMM kernels (vec-impl.h) for neon.
 * Called only when er__cpu_features() reports the ISA. */
#define ER_SIMD_NEON 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/vec-impl.h"

const er_vec_ops er__vec_neon = VEC_OPS_INIT;
