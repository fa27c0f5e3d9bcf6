/* qelt-avx2.c - the loops of qelt.h for AVX2 + FMA: 8 lanes. Called only
 * when er__cpu_features() reports AVX2, FMA and F16C. */
#define QE_AVX2 1
#include "kernels/qelt-impl.h"
