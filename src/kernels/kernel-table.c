/* kernel-table.c - the table of optimized CPU kernels and the choice among
 * them. Kernel files live beside it; each exports a NULL-terminated array
 * listed in kernels/kernel-groups.h, best kernels first within a group. */
#include <pthread.h>
#include <stdlib.h>

#include "kernels/kernel-groups.h"
#include "kernels/kernel.h"

static const er_cpu_kernel *const *const groups[] = {
#define ER_KERNEL_GROUP(name) er__kernels_##name,
    ER_KERNEL_GROUP_LIST(ER_KERNEL_GROUP)
#undef ER_KERNEL_GROUP
};

/* Flattened once: every kernel, in group order. */
static const er_cpu_kernel *all_kernels[512];
static pthread_once_t flatten_once = PTHREAD_ONCE_INIT;

static void flatten(void) {
  size_t n = 0;
  for (size_t g = 0; g < ER_ARRAY_LEN(groups); g++)
    for (const er_cpu_kernel *const *k = groups[g]; *k; k++) {
      ER_ASSERT(n + 1 < ER_ARRAY_LEN(all_kernels));
      all_kernels[n++] = *k;
    }
  all_kernels[n] = NULL;
}

const er_cpu_kernel *const *er__cpu_kernels_all(void) {
  pthread_once(&flatten_once, flatten);
  return all_kernels;
}

int er__cpu_layout_block(void) {
  const char *v = getenv("EDGERUN_LAYOUT");
  if (v && strcmp(v, "planar") == 0) return 0;
  const er_cpu_features *c = er__cpu_features();
#if defined(__x86_64__) || defined(__i386__)
  if (c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq) return 16;
  if (c->avx2 && c->fma && c->f16c) return 8;
#elif defined(__aarch64__)
  if (c->neon) return 4;
#endif
  ER_UNUSED(c);
  return 0;
}

const er_cpu_kernel *er__cpu_kernel_pick(const er_kernel_info *ki) {
  const er_node *node = ki->node;
  for (const er_cpu_kernel *const *k = er__cpu_kernels_all(); *k; k++) {
    if (strcmp((*k)->op, node->op_type) != 0 || strcmp((*k)->domain, node->domain) != 0) continue;
    if ((*k)->supports(ki)) return *k;
  }
  return NULL;
}
