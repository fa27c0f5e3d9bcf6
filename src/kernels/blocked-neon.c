/* blocked-neon.c - the channel-blocked layout's kernels (blocked-impl.h)
 * for neon, block = VN. Called only when er__cpu_features() reports the ISA. */
#define ER_SIMD_NEON 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/blocked.h"
#include "kernels/blocked-impl.h"

const er_blocked_ops er__blocked_neon = BK_OPS_INIT;
