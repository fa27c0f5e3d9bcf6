/* layout-avx2.c - Transpose's 2-D step for 4-byte elements with AVX2 (8 x 8
 * blocks; layout-impl.h). Called only when er__cpu_features() reports AVX2
 * (layout.c checks). */
#define ER_SIMD_AVX2 1
#include "kernels/simd.h"
#define TR32_FN er__transpose32_avx2
#define TR_MASKED_EDGE 0
#include "kernels/layout-impl.h"
