/* layout-avx512.c - Transpose's 2-D step for 4-byte elements with AVX-512
 * (16 x 16 blocks; layout-impl.h). Called only when er__cpu_features()
 * reports AVX-512 F (layout.c checks). */
#define ER_SIMD_AVX512 1
#include "kernels/simd.h"
#define TR32_FN er__transpose32_avx512
#define TR_MASKED_EDGE 1
#include "kernels/layout-impl.h"
