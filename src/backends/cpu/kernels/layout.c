/* layout.c - optimized CPU kernels of the "layout" group. */
#include "backends/cpu/kernels/kernel-groups.h"

const er_cpu_kernel *const er__kernels_layout[] = {
    NULL,
};
