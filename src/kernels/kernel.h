/* kernel.h - the table of optimized CPU kernels the CPU backend chooses
 * from when it compiles a graph.
 *
 * Every node has a reference kernel (its op's run(), src/ops/); optimized
 * kernels are alternatives chosen once, at compile time, when the CPU has
 * their ISA and the node's types, shapes and attributes are ones they
 * handle. ER_FORCE_REFERENCE=1 in the environment (or the session option
 * force_reference) skips them all. Kernel names carry dtype, kernel and ISA,
 * XNNPACK-style: "f32_gemm_6x16__avx2_fma". Every optimized kernel is tested
 * against the reference by tests/kernels/ (seeded inputs, sizes around its
 * tiles, guard bytes), and skipped with a message where the CPU lacks it. */
#ifndef ER_KERNEL_H
#define ER_KERNEL_H

#include "core/cpu-features.h"
#include "core/pool.h"
#include "ir/ir.h"
#include "ops/op.h"

/* What a kernel sees at compile time: the node and what is known of its
 * inputs and outputs (shapes may hold -1; data is set for constants, e.g.
 * weights). */
typedef struct er_kernel_info {
  const er_node *node;
  int n_in, n_out;
  const er_tensor *const *in;   /* [n_in], NULL for omitted inputs */
  const er_tensor *const *out;  /* [n_out], NULL for omitted outputs */
  const er_cpu_features *cpu;
} er_kernel_info;

/* What a kernel sees at run time. */
typedef struct er_kernel_run {
  er_kctx *ctx;                 /* inputs and allocated outputs */
  const void *state;            /* from prepare(); read-only, shared by runs */
  void *scratch;                /* scratch_bytes, 64-byte aligned, per run */
  size_t scratch_bytes;
  er_thread_pool *pool;         /* may be NULL */
  /* (may be NULL) the run context's spill scratch: er__kr_scratch grows
   * it when scratch_bytes is too small, instead of allocating per run */
  void **spill;
  size_t *spill_bytes;
} er_kernel_run;

typedef struct er_cpu_kernel {
  const char *name;             /* "<dtype>_<kernel>__<isa>" */
  const char *op;               /* op type */
  const char *domain;           /* "" (ONNX) or "com.edgerun" (fused ops) */
  /* Whether the kernel handles this node given what is known and the CPU.
   * Must be cheap and must not fail. */
  bool (*supports)(const er_kernel_info *ki);
  /* (optional) Per-node state made once: packed weights, folded constants.
   * *scratch_bytes_out is the per-run scratch the kernel needs when the
   * shapes are fully known (0 otherwise: run() may then allocate). */
  er_status (*prepare)(const er_kernel_info *ki, void **state_out, size_t *scratch_bytes_out);
  er_status (*run)(const er_kernel_run *kr);
  void (*release)(void *state); /* (optional) */
} er_cpu_kernel;

/* Every kernel (for the test harness and `edgerun devices`). */
const er_cpu_kernel *const *er__cpu_kernels_all(void);
/* The first kernel that supports the node, or NULL (use the reference). */
const er_cpu_kernel *er__cpu_kernel_pick(const er_kernel_info *ki);
/* The channel block the session's layout pass uses (graph/passes-blocked.c):
 * the vector width of the best ISA the blocked kernels have (16 floats on
 * AVX-512, 8 on AVX2, 4 on NEON), or 0 to keep every tensor planar: no
 * such ISA, or EDGERUN_LAYOUT=planar in the environment (for comparisons
 * and as a way out). */
int er__cpu_layout_block(void);

#endif /* ER_KERNEL_H */
