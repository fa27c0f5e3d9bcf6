/* pool.c - optimized CPU kernels of the "pool" group: float32 MaxPool and
 * AveragePool over 1-D and 2-D NCHW windows (on the depthwise machinery of
 * vec-impl.h: explicit padding, phase-split planes, vector taps), and
 * GlobalAveragePool / GlobalMaxPool. MaxPool's optional Indices output is
 * left to the reference kernel. */
#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/vec.h"
#include "kernels/window.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

typedef struct pool_state {
  const er_vec_ops *ops;
  int kind;                 /* 1 max, 2 average */
  bool count_include_pad;
  int slots;
} pool_state;

static bool pool_supports(const er_kernel_info *ki, int kind, bool isa_ok) {
  if (!isa_ok || !er__ki_f32(ki, 0) || !er__ki_out_f32(ki)) return false;
  if (ki->n_out > 1 && ki->out[1]) return false; /* MaxPool Indices */
  const er_tensor *x = ki->in[0];
  er_kctx ctx = er__ki_ctx(ki);
  if (!er__window_attrs_ok(&ctx, x->rank)) return false;
  ER_UNUSED(kind);
  const int64_t *ks;
  int64_t nks;
  if (er__attr_ints(&ctx, "kernel_shape", &ks, &nks) != ER_STATUS_OK || !ks) return false;
  for (int64_t i = 0; i < nks; i++)
    if (ks[i] > ER_DW_MAX_TAPS) return false;
  return true;
}

static er_status pool_prepare(const er_kernel_info *ki, int kind, const er_vec_ops *ops, void **state_out,
                              size_t *scratch_out) {
  pool_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a pooling kernel");
  er_kctx ctx = er__ki_ctx(ki);
  int64_t cip = 0;
  if (kind == 2) er__attr_int(&ctx, "count_include_pad", 0, &cip);
  s->ops = ops;
  s->kind = kind;
  s->count_include_pad = cip != 0;
  s->slots = er__ki_slots(ki);
  *scratch_out = 0;
  er_window g;
  if (er__tensor_shape_known(ki->in[0]) && er__tensor_shape_known(ki->out[0]) &&
      er__window_get(&ctx, ki->in[0], NULL, ki->out[0], &g)) {
    er_dw_args a;
    memset(&a, 0, sizeof a);
    a.oh = g.oh, a.ow = g.ow, a.kh = g.kh, a.kw = g.kw, a.sh = g.sh, a.sw = g.sw, a.dh = g.dh, a.dw = g.dw;
    a.h = g.h, a.w_ = g.w, a.pt = g.pt, a.pl = g.pl, a.pb = g.pb, a.pr = g.pr;
    a.pool = kind;
    *scratch_out = ((er__dw_scratch_floats(&a, ops->vn) + 15) / 16 * 16) * sizeof(float) * (size_t)s->slots;
  }
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct pool_job {
  const er_dw_args *a;
  const er_vec_ops *ops;
  float *scratch;
  size_t slot_floats;
  int64_t planes;
  int chunks;
} pool_job;

static void pool_chunk(void *arg, int64_t begin, int64_t end) {
  const pool_job *j = arg;
  for (int64_t c = begin; c < end; c++) {
    int64_t lo = j->planes * c / j->chunks, hi = j->planes * (c + 1) / j->chunks;
    j->ops->dw(j->a, lo, hi, j->scratch + (size_t)c * j->slot_floats);
  }
}

static er_status gpool_planes(const er_kernel_run *kr, const er_vec_ops *ops, bool max, int64_t planes, int64_t size);

static er_status pool_run(const er_kernel_run *kr) {
  const pool_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  er_window g;
  if (!er__window_get(ctx, x, NULL, y, &g) || g.kh > ER_DW_MAX_TAPS || g.kw > ER_DW_MAX_TAPS)
    return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  /* An average over the whole unpadded plane (ResNet's last 7x7 pool) is
   * a global average: one pass per plane instead of a plane kernel's set-up
   * per plane. */
  if (s->kind == 2 && g.oh == 1 && g.ow == 1 && g.kh == g.h && g.kw == g.w && g.dh == 1 && g.dw == 1 && g.pt == 0 &&
      g.pl == 0 && g.pb == 0 && g.pr == 0)
    return gpool_planes(kr, s->ops, false, g.n * g.c, g.h * g.w);
  er_dw_args a;
  memset(&a, 0, sizeof a);
  a.x = x->data;
  a.y = y->data;
  a.h = g.h, a.w_ = g.w, a.oh = g.oh, a.ow = g.ow, a.kh = g.kh, a.kw = g.kw;
  a.sh = g.sh, a.sw = g.sw, a.dh = g.dh, a.dw = g.dw, a.pt = g.pt, a.pl = g.pl, a.pb = g.pb, a.pr = g.pr;
  a.pool = s->kind;
  a.count_include_pad = s->count_include_pad;
  if (er__dw_ring_slots(&a) > ER_DW_RING_MAX) return er__kr_reference(kr);
  size_t slot_floats = (er__dw_scratch_floats(&a, s->ops->vn) + 15) / 16 * 16;
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, slot_floats * sizeof(float), &scratch, &slots, &owned));
  int64_t planes = g.n * g.c;
  int64_t work = planes * g.oh * g.ow * g.kh * g.kw;
  int chunks = (int)min64(min64(slots, planes), max64(1, work >> 15));
  /* Planes of all images in one sweep: consecutive in memory for both x
   * and y, so the per-image offsets fold into the plane index. */
  pool_job j = {&a, s->ops, scratch, slot_floats, planes, chunks};
  er__parallel_for(kr->pool, chunks, 1, pool_chunk, &j);
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ---- global pools ---------------------------------------------------------- */

typedef struct gpool_job {
  const er_vec_ops *ops;
  const float *x;
  float *y;
  int64_t size, planes;
  bool max;
} gpool_job;

static void gpool_chunk(void *arg, int64_t begin, int64_t end) {
  const gpool_job *j = arg;
  j->ops->global_pool(j->x, j->y, j->size, begin, end, j->max);
}

static bool gpool_supports(const er_kernel_info *ki, bool isa_ok) {
  return isa_ok && er__ki_f32(ki, 0) && er__ki_out_f32(ki) && ki->in[0]->rank >= 3;
}

static er_status gpool_planes(const er_kernel_run *kr, const er_vec_ops *ops, bool max, int64_t planes, int64_t size) {
  gpool_job j = {ops, kr->ctx->in[0]->data, kr->ctx->out[0]->data, size, planes, max};
  int64_t grain = max64(1, (INT64_C(1) << 14) / max64(1, size));
  er__parallel_for(kr->pool, planes, grain, gpool_chunk, &j);
  return ER_STATUS_OK;
}

static er_status gpool_run_common(const er_kernel_run *kr, const er_vec_ops *ops, bool max) {
  const er_tensor *x = kr->ctx->in[0];
  int64_t size = 1;
  for (int d = 2; d < x->rank; d++) size *= x->dims[d];
  return gpool_planes(kr, ops, max, x->dims[0] * x->dims[1], size);
}

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

#define DEFINE_POOL_KERNELS(SFX, ISA, VO, ISA_OK)                                                        \
  static bool max_supports_##SFX(const er_kernel_info *ki) { return pool_supports(ki, 1, ISA_OK(ki->cpu)); } \
  static bool avg_supports_##SFX(const er_kernel_info *ki) { return pool_supports(ki, 2, ISA_OK(ki->cpu)); } \
  static er_status max_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {             \
    return pool_prepare(ki, 1, &VO, st, scratch);                                                        \
  }                                                                                                      \
  static er_status avg_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {             \
    return pool_prepare(ki, 2, &VO, st, scratch);                                                        \
  }                                                                                                      \
  static bool g_supports_##SFX(const er_kernel_info *ki) { return gpool_supports(ki, ISA_OK(ki->cpu)); } \
  static er_status gavg_run_##SFX(const er_kernel_run *kr) { return gpool_run_common(kr, &VO, false); } \
  static er_status gmax_run_##SFX(const er_kernel_run *kr) { return gpool_run_common(kr, &VO, true); }  \
  static const er_cpu_kernel k_max_##SFX = {"f32_maxpool__" ISA, "MaxPool", "", max_supports_##SFX,      \
                                           max_prepare_##SFX, pool_run, free};                           \
  static const er_cpu_kernel k_avg_##SFX = {"f32_avgpool__" ISA, "AveragePool", "", avg_supports_##SFX,  \
                                           avg_prepare_##SFX, pool_run, free};                           \
  static const er_cpu_kernel k_gavg_##SFX = {"f32_global_avgpool__" ISA, "GlobalAveragePool", "",        \
                                            g_supports_##SFX, NULL, gavg_run_##SFX, NULL};               \
  static const er_cpu_kernel k_gmax_##SFX = {"f32_global_maxpool__" ISA, "GlobalMaxPool", "",            \
                                            g_supports_##SFX, NULL, gmax_run_##SFX, NULL};

#if defined(__x86_64__) || defined(__i386__)
DEFINE_POOL_KERNELS(avx512, "avx512", er__vec_avx512, er__cpu_has_avx512)
DEFINE_POOL_KERNELS(avx2, "avx2", er__vec_avx2, er__cpu_has_avx2)
#endif
#if defined(__aarch64__)
static bool has_neon(const er_cpu_features *c) { return c->neon; }
DEFINE_POOL_KERNELS(neon, "neon", er__vec_neon, has_neon)
#endif

const er_cpu_kernel *const er__kernels_pool[] = {
#if defined(__x86_64__) || defined(__i386__)
    &k_max_avx512, &k_avg_avx512, &k_gavg_avx512, &k_gmax_avx512,
    &k_max_avx2,   &k_avg_avx2,   &k_gavg_avx2,   &k_gmax_avx2,
#endif
#if defined(__aarch64__)
    &k_max_neon,   &k_avg_neon,   &k_gavg_neon,   &k_gmax_neon,
#endif
    NULL,
};
