/* kernel-groups.h - the optimized kernel files. Each kernels/<group>.c
 * defines `const er_cpu_kernel *const er__kernels_<group>[]`, a
 * NULL-terminated array, best kernel first. ISA-specific code lives in
 * files named *-avx2.c, *-avx512.c or *-neon.c, which CMake compiles with the
 * matching flags; they are called only after er__cpu_features() says so. */
#ifndef ER_KERNEL_GROUPS_H
#define ER_KERNEL_GROUPS_H

#include "kernels/kernel.h"

#define ER_KERNEL_GROUP_LIST(X) \
  X(gemm)                       \
  X(conv)                       \
  X(pool)                       \
  X(eltwise)                    \
  X(norm)                       \
  X(layout)                     \
  X(quant)                      \
  X(qops)                       \
  X(rnn)                        \
  X(attn)                       \
  X(blocked)

#define ER_KERNEL_GROUP_DECL(name) extern const er_cpu_kernel *const er__kernels_##name[];
ER_KERNEL_GROUP_LIST(ER_KERNEL_GROUP_DECL)
#undef ER_KERNEL_GROUP_DECL

#endif
