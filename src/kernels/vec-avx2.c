/* vec-avx2.c - the vectorized non-GEMM kernels (vec-impl.h) for avx2.
 * Called only when er__cpu_features() reports the ISA. */
#define ER_SIMD_AVX2 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/vec-impl.h"

const er_vec_ops er__vec_avx2 = VEC_OPS_INIT;
