/* vec-avx512.c - the vectorized non-GEMM kernels (vec-impl.h) for avx512.
 * Called only when er__cpu_features() reports the ISA. */
#define ER_SIMD_AVX512 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/vec-impl.h"

const er_vec_ops er__vec_avx512 = VEC_OPS_INIT;
