/* qelt-avx512.c - the loops of qelt.h for AVX-512 (F, BW, VL, DQ): 16
 * lanes. Called only when er__cpu_features() reports them. */
#define QE_AVX512 1
#include "kernels/qelt-impl.h"
