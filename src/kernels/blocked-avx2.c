/* blocked-avx2.c - the channel-blocked layout's kernels (blocked-impl.h)
 * for avx2, block = VN. Called only when er__cpu_features() reports the ISA. */
#define ER_SIMD_AVX2 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/blocked.h"
#include "kernels/blocked-impl.h"

const er_blocked_ops er__blocked_avx2 = BK_OPS_INIT;
