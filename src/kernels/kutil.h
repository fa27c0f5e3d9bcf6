/* kutil.h - small helpers shared by the kernel files: attribute access at
 * compile time, type and shape tests, per-run scratch. */
#ifndef ER_KERNELS_KUTIL_H
#define ER_KERNELS_KUTIL_H

#include <stdlib.h>

#include "kernels/kernel.h"
#include "ops/op.h"

/* A kctx over the compile-time view, for the attribute getters (which read
 * only the node). */
static inline er_kctx er__ki_ctx(const er_kernel_info *ki) {
  er_kctx c;
  memset(&c, 0, sizeof c);
  c.node = ki->node;
  c.n_in = ki->n_in;
  c.in = (er_tensor *const *)ki->in;
  c.n_out = ki->n_out;
  c.out = (er_tensor *const *)ki->out;
  c.checking = true;
  return c;
}

static inline const er_tensor *er__ki_in(const er_kernel_info *ki, int i) {
  return i < ki->n_in ? ki->in[i] : NULL;
}

/* Input i is present and known to be float32. */
static inline bool er__ki_f32(const er_kernel_info *ki, int i) {
  const er_tensor *t = er__ki_in(ki, i);
  return t && t->dtype == ER_DTYPE_FLOAT;
}

/* Every output is float32. */
static inline bool er__ki_out_f32(const er_kernel_info *ki) {
  for (int i = 0; i < ki->n_out; i++)
    if (ki->out[i] && ki->out[i]->dtype != ER_DTYPE_FLOAT) return false;
  return ki->n_out > 0;
}

static inline bool er__ki_const(const er_kernel_info *ki, int i) {
  const er_tensor *t = er__ki_in(ki, i);
  return t && t->data;
}

/* The x86 ISA levels the kernels are built for. */
static inline bool er__cpu_has_avx512(const er_cpu_features *c) {
  return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq;
}
static inline bool er__cpu_has_avx2(const er_cpu_features *c) { return c->avx2 && c->fma && c->f16c; }

/* The most workers a kernel's scratch is laid out for (one slot each). */
#define ER_KERNEL_MAX_SLOTS 16

static inline int er__ki_slots(const er_kernel_info *ki) {
  int n = ki->cpu && ki->cpu->cores > 0 ? ki->cpu->cores : 1;
  return n < ER_KERNEL_MAX_SLOTS ? n : ER_KERNEL_MAX_SLOTS;
}

/* Per-run scratch in slots of slot_bytes: the run's scratch when it holds
 * at least one slot, else a fresh allocation (shapes unknown at compile
 * time). *owned is what to free. */
/* `bytes` of scratch beyond kr->scratch: the run context's spill, grown
 * when too small and kept for later runs (*owned = NULL), or, without a
 * run context, a fresh allocation the caller frees (*owned). NULL when out
 * of memory. */
static inline void *er__kr_spill(const er_kernel_run *kr, size_t bytes, void **owned) {
  *owned = NULL;
  if (!kr->spill) return *owned = er__aligned_alloc(bytes);
  if (*kr->spill_bytes < bytes) {
    er__aligned_free(*kr->spill);
    *kr->spill = er__aligned_alloc(bytes);
    *kr->spill_bytes = *kr->spill ? bytes : 0;
  }
  return *kr->spill;
}

static inline er_status er__kr_scratch(const er_kernel_run *kr, size_t slot_bytes, void **p,
                                       int *slots, void **owned) {
  int want = er__pool_threads(kr->pool);
  if (want > ER_KERNEL_MAX_SLOTS) want = ER_KERNEL_MAX_SLOTS;
  *owned = NULL;
  if (slot_bytes == 0) {
    *p = kr->scratch;
    *slots = want;
    return ER_STATUS_OK;
  }
  size_t have = kr->scratch ? kr->scratch_bytes / slot_bytes : 0;
  if (have >= 1) {
    *p = kr->scratch;
    *slots = have < (size_t)want ? (int)have : want;
    return ER_STATUS_OK;
  }
  *p = er__kr_spill(kr, slot_bytes * (size_t)want, owned);
  if (!*p)
    return er__error(ER_STATUS_OUT_OF_MEMORY, "%s '%s': out of memory for %zu bytes of kernel scratch",
                     kr->ctx->node->op_type, kr->ctx->node->name, slot_bytes * (size_t)want);
  *slots = want;
  return ER_STATUS_OK;
}

/* Runs the node's reference kernel, for shapes a kernel's fast path does
 * not cover at run time. Reference kernels expect zeroed outputs (they
 * accumulate into them); planned outputs may hold old data. */
static inline er_status er__kr_reference(const er_kernel_run *kr) {
  er_kctx *ctx = kr->ctx;
  for (int i = 0; i < ctx->n_out; i++)
    if (ctx->out[i] && ctx->out[i]->data) memset(ctx->out[i]->data, 0, ctx->out[i]->nbytes);
  return ctx->node->op->run(ctx);
}

#endif /* ER_KERNELS_KUTIL_H */
