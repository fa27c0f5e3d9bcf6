/* norm.c - optimized CPU kernels of the "norm" group. */
#include "backends/cpu/kernels/kernel-groups.h"

const er_cpu_kernel *const er__kernels_norm[] = {
    NULL,
};
