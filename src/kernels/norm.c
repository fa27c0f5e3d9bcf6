/* norm.c - optimized CPU kernels of the "norm" group, float32:
 * BatchNormalization (inference), LRN, Softmax, LogSoftmax,
 * LayerNormalization and InstanceNormalization, on the vector routines of vec-impl.h. Work is split
 * over threads by channels or rows, which does not change results. */
#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/vec.h"

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Elements of work below which a second thread does not pay. */
#define NORM_GRAIN_ELEMENTS 16384

static int64_t grain_for(int64_t unit_elements) {
  return max64(1, NORM_GRAIN_ELEMENTS / max64(1, unit_elements));
}

static bool all_f32(const er_kernel_info *ki) {
  for (int i = 0; i < ki->n_in; i++)
    if (ki->in[i] && ki->in[i]->dtype != ER_DTYPE_FLOAT) return false;
  return er__ki_f32(ki, 0) && er__ki_out_f32(ki);
}

typedef struct norm_state {
  const er_vec_ops *ops;
} norm_state;

static er_status norm_prepare(const er_vec_ops *ops, void **state_out, size_t *scratch_out) {
  norm_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a normalization kernel");
  s->ops = ops;
  *state_out = s;
  *scratch_out = 0;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* BatchNormalization (inference)                                            */
/* ======================================================================== */

/* y = (x - mean) * scale / sqrt(var + eps) + B per channel, as x * a + b
 * with a and b worked out in double once per run. */
static bool bn_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !all_f32(ki) || ki->n_in != 5 || ki->in[0]->rank < 2) return false;
  for (int k = 1; k < ki->n_out; k++)
    if (ki->out[k]) return false; /* training outputs */
  er_kctx ctx = er__ki_ctx(ki);
  int64_t spatial = 1, training = 0;
  if (ki->node->version < 9 && er__attr_int(&ctx, "spatial", 1, &spatial) != ER_STATUS_OK) return false;
  if (ki->node->version >= 14 && er__attr_int(&ctx, "training_mode", 0, &training) != ER_STATUS_OK) return false;
  return spatial == 1 && training == 0;
}

typedef struct bn_job {
  const er_vec_ops *ops;
  const float *x, *a, *b;
  float *y;
  int64_t c, inner;
} bn_job;

static void bn_chunk(void *arg, int64_t begin, int64_t end) {
  const bn_job *j = arg;
  for (int64_t p = begin; p < end; p++) {
    int64_t ch = p % j->c;
    j->ops->affine(j->x + p * j->inner, j->y + p * j->inner, j->inner, j->a[ch], j->b[ch]);
  }
}

/* y = x a + b per channel; a and b from the parameters, in double. */
static void bn_affine(const er_kctx *ctx, float eps, int64_t c, float *ab) {
  const float *scale = ctx->in[1]->data, *bias = ctx->in[2]->data, *mean = ctx->in[3]->data,
              *var = ctx->in[4]->data;
  for (int64_t ch = 0; ch < c; ch++) {
    double a = (double)scale[ch] / sqrt((double)var[ch] + (double)eps);
    ab[ch] = (float)a;
    ab[c + ch] = (float)((double)bias[ch] - (double)mean[ch] * a);
  }
}

/* Constant parameters (the usual case) give a and b once at compile time;
 * otherwise a run works them out in its scratch. */
typedef struct bn_state {
  const er_vec_ops *ops;
  float *ab;          /* [2 * c] or NULL */
  int64_t c;
} bn_state;

static er_status bn_prepare(const er_kernel_info *ki, const er_vec_ops *ops, void **state_out, size_t *scratch_out) {
  bn_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a BatchNormalization kernel");
  s->ops = ops;
  *scratch_out = 0;
  const er_tensor *scale = ki->in[1];
  bool constant = er__tensor_shape_known(scale) && scale->rank == 1;
  for (int k = 1; k < 5; k++) constant = constant && ki->in[k]->data;
  er_kctx ctx = er__ki_ctx(ki);
  float eps;
  if (er__attr_float(&ctx, "epsilon", 1e-5f, &eps) != ER_STATUS_OK) constant = false;
  if (constant) {
    s->c = scale->dims[0];
    s->ab = malloc((size_t)(2 * s->c + 1) * sizeof *s->ab);
    if (!s->ab) {
      free(s);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "BatchNormalization '%s': out of memory", ki->node->name);
    }
    bn_affine(&ctx, eps, s->c, s->ab);
  } else if (er__tensor_shape_known(scale) && scale->rank == 1) {
    *scratch_out = (size_t)(2 * scale->dims[0]) * sizeof(float);
  }
  *state_out = s;
  return ER_STATUS_OK;
}

static void bn_release(void *state) {
  bn_state *s = state;
  if (!s) return;
  free(s->ab);
  free(s);
}

static er_status bn_run(const er_kernel_run *kr) {
  const bn_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  int64_t n = x->dims[0], c = x->dims[1], inner = 1;
  for (int d = 2; d < x->rank; d++) inner *= x->dims[d];
  const float *ab = s->ab;
  void *owned = NULL;
  if (!ab || s->c != c) {
    float eps;
    ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
    size_t bytes = (size_t)(2 * c + 1) * sizeof(float);
    float *tmp = kr->scratch && kr->scratch_bytes >= bytes ? kr->scratch : er__kr_spill(kr, bytes, &owned);
    if (!tmp) return er__error(ER_STATUS_OUT_OF_MEMORY, "BatchNormalization '%s': out of memory", ctx->node->name);
    bn_affine(ctx, eps, c, tmp);
    ab = tmp;
  }
  bn_job j = {s->ops, x->data, ab, ab + c, ctx->out[0]->data, c, inner};
  er__parallel_for(kr->pool, n * c, grain_for(inner), bn_chunk, &j);
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* LRN                                                                       */
/* ======================================================================== */

typedef struct lrn_job {
  const er_vec_ops *ops;
  const float *x;
  float *y;
  int64_t n, c, inner, before, after;
  float bias, k, beta;
} lrn_job;

static void lrn_chunk(void *arg, int64_t begin, int64_t end) {
  const lrn_job *j = arg;
  /* Items are (image, channel) pairs. */
  for (int64_t p = begin; p < end;) {
    int64_t img = p / j->c, c0 = p % j->c, c1 = c0 + (end - p);
    if (c1 > j->c) c1 = j->c;
    j->ops->lrn(j->x + img * j->c * j->inner, j->y + img * j->c * j->inner, j->c, j->inner, c0, c1, j->before,
                j->after, j->bias, j->k, j->beta);
    p += c1 - c0;
  }
}

static bool lrn_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !all_f32(ki) || ki->in[0]->rank < 2) return false;
  er_kctx ctx = er__ki_ctx(ki);
  int64_t size;
  return er__node_attr(ki->node, "size") && er__attr_int(&ctx, "size", 1, &size) == ER_STATUS_OK && size >= 1;
}

static er_status lrn_run(const er_kernel_run *kr) {
  const norm_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  int64_t size;
  float alpha, beta, bias;
  ER_CHECK(er__attr_int(ctx, "size", 1, &size));
  ER_CHECK(er__attr_float(ctx, "alpha", 1e-4f, &alpha));
  ER_CHECK(er__attr_float(ctx, "beta", 0.75f, &beta));
  ER_CHECK(er__attr_float(ctx, "bias", 1.0f, &bias));
  int64_t n = x->dims[0], c = x->dims[1], inner = 1;
  for (int d = 2; d < x->rank; d++) inner *= x->dims[d];
  lrn_job j = {s->ops, x->data, ctx->out[0]->data, n, c, inner, (size - 1) / 2, size / 2,
               bias, (float)((double)alpha / (double)size), beta};
  er__parallel_for(kr->pool, n * c, grain_for(inner * size), lrn_chunk, &j);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Softmax, LogSoftmax                                                       */
/* ======================================================================== */

typedef struct softmax_job {
  const er_vec_ops *ops;
  const float *x;
  float *y;
  int64_t n, inner;
  bool log;
} softmax_job;

static void softmax_chunk(void *arg, int64_t begin, int64_t end) {
  const softmax_job *j = arg;
  for (int64_t o = begin; o < end; o++)
    j->ops->softmax(j->x + o * j->n * j->inner, j->y + o * j->n * j->inner, j->n, j->inner, j->log);
}

/* A rank unknown at load (SLANet+'s Softmax reads a Slice of a dynamic
 * shape) is checked when the node runs. */
static bool softmax_supports(const er_kernel_info *ki, bool isa_ok) {
  return isa_ok && all_f32(ki) && ki->in[0]->rank != 0;
}

static er_status softmax_run(const er_kernel_run *kr) {
  const norm_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  if (x->rank < 1) return er__kr_reference(kr);
  int64_t axis;
  int ax;
  ER_CHECK(er__attr_int(ctx, "axis", ctx->node->version >= 13 ? -1 : 1, &axis));
  ER_CHECK(er__norm_axis(ctx, "axis", axis, x->rank, &ax));
  /* Before opset 13 the input is coerced to 2-D at axis. */
  int64_t outer = 1, n = 1, inner = 1;
  for (int d = 0; d < x->rank; d++) {
    if (d < ax) outer *= x->dims[d];
    else if (d == ax || ctx->node->version < 13) n *= x->dims[d];
    else inner *= x->dims[d];
  }
  if (n == 0 || outer == 0 || inner == 0) return ER_STATUS_OK;
  softmax_job j = {s->ops, x->data, ctx->out[0]->data, n, inner, strcmp(ctx->node->op_type, "LogSoftmax") == 0};
  er__parallel_for(kr->pool, outer, grain_for(n * inner * 4), softmax_chunk, &j);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* LayerNormalization                                                        */
/* ======================================================================== */

typedef struct ln_job {
  const er_vec_ops *ops;
  const float *x, *scale, *bias;
  float *y, *mean, *inv;
  int64_t cols;
  float eps;
} ln_job;

static void ln_chunk(void *arg, int64_t begin, int64_t end) {
  const ln_job *j = arg;
  j->ops->layernorm(j->x, j->y, begin, end, j->cols, j->scale, j->bias, j->eps, j->mean, j->inv);
}

/* Scale and B must hold exactly the normalized axes (right-aligned, any
 * leading 1s): then they are plain vectors of length cols. */
static bool covers_cols(const er_tensor *t, const er_tensor *x, int axis) {
  if (!t) return true;
  if (t->rank < 0 || !er__tensor_shape_known(t)) return false;
  int64_t cols = 1;
  for (int d = axis; d < x->rank; d++) cols *= x->dims[d];
  if (er__tensor_count(t) != cols) return false;
  for (int i = 1; i <= t->rank && i <= x->rank - axis; i++)
    if (t->dims[t->rank - i] != x->dims[x->rank - i]) return false;
  return true;
}

static bool ln_axis(const er_kctx *ctx, int rank, int *axis) {
  int64_t a;
  if (er__attr_int(ctx, "axis", -1, &a) != ER_STATUS_OK || a < -rank || a >= rank) return false;
  *axis = (int)(a < 0 ? a + rank : a);
  return true;
}

static bool ln_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !all_f32(ki)) return false;
  const er_tensor *x = ki->in[0];
  er_kctx ctx = er__ki_ctx(ki);
  int axis;
  int64_t stash;
  if (x->rank < 1 || !ln_axis(&ctx, x->rank, &axis)) return false;
  if (er__attr_int(&ctx, "stash_type", ER_DTYPE_FLOAT, &stash) != ER_STATUS_OK || stash != ER_DTYPE_FLOAT)
    return false;
  for (int k = 1; k < ki->n_out; k++)
    if (ki->out[k] && ki->out[k]->dtype != ER_DTYPE_FLOAT) return false;
  for (int d = axis; d < x->rank; d++)
    if (x->dims[d] < 0) return false;
  return covers_cols(ki->in[1], x, axis) && covers_cols(er__ki_in(ki, 2), x, axis);
}

static er_status ln_run(const er_kernel_run *kr) {
  const norm_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0], *sc = ctx->in[1], *b = er__in(ctx, 2);
  int axis;
  float eps;
  if (!ln_axis(ctx, x->rank, &axis)) return er__kr_reference(kr);
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  int64_t rows = 1, cols = 1;
  for (int d = 0; d < x->rank; d++) {
    if (d < axis) rows *= x->dims[d];
    else cols *= x->dims[d];
  }
  if (rows == 0 || cols == 0) return ER_STATUS_OK;
  er_tensor *mo = er__out(ctx, 1), *io = er__out(ctx, 2);
  ln_job j = {s->ops, x->data, sc->data, b ? b->data : NULL, ctx->out[0]->data, mo ? mo->data : NULL,
              io ? io->data : NULL, cols, eps};
  er__parallel_for(kr->pool, rows, grain_for(cols * 3), ln_chunk, &j);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* InstanceNormalization                                                     */
/* ======================================================================== */

/* Planes (image, channel) of [N, C, spatial...], each normalized over its
 * spatial extent (GroupNorm as PyTorch exports it below opset 18:
 * Reshape to [N, groups, -1], InstanceNormalization, Reshape back). */
typedef struct in_job {
  const er_vec_ops *ops;
  const float *x, *scale, *bias;
  float *y;
  int64_t c, inner;
  float eps;
} in_job;

static void in_chunk(void *arg, int64_t begin, int64_t end) {
  const in_job *j = arg;
  for (int64_t r = begin; r < end; r++)
    j->ops->instnorm(j->x + r * j->inner, j->y + r * j->inner, j->inner, j->scale[r % j->c], j->bias[r % j->c],
                     j->eps);
}

static bool in_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !all_f32(ki) || ki->n_in != 3 || !ki->in[1] || !ki->in[2]) return false;
  const er_tensor *x = ki->in[0];
  /* X's shape may be known only at run time (checked there). */
  return (x->rank < 0 || x->rank >= 3) && ki->in[1]->rank == 1 && ki->in[2]->rank == 1 &&
         ki->in[1]->dims[0] == ki->in[2]->dims[0];
}

static er_status in_run(const er_kernel_run *kr) {
  const norm_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0], *sc = ctx->in[1], *b = ctx->in[2];
  float eps;
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  if (x->rank < 3 || sc->rank != 1 || b->rank != 1 || sc->dims[0] != x->dims[1] || b->dims[0] != x->dims[1])
    return er__kr_reference(kr);
  int64_t inner = 1;
  for (int d = 2; d < x->rank; d++) inner *= x->dims[d];
  const int64_t planes = x->dims[0] * x->dims[1];
  if (planes == 0) return ER_STATUS_OK;
  if (inner == 0) return er__kr_reference(kr); /* the mean of nothing: the reference's rule */
  in_job j = {s->ops, x->data, sc->data, b->data, ctx->out[0]->data, x->dims[1], inner, eps};
  er__parallel_for(kr->pool, planes, grain_for(inner * 3), in_chunk, &j);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

#define NORM_KERNELS(SFX, ISA, VO, ISA_OK)                                                                  \
  static er_status prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                    \
    ER_UNUSED(ki);                                                                                          \
    return norm_prepare(&VO, st, scratch);                                                                  \
  }                                                                                                         \
  static bool bn_supports_##SFX(const er_kernel_info *ki) { return bn_supports(ki, ISA_OK(ki->cpu)); }      \
  static bool lrn_supports_##SFX(const er_kernel_info *ki) { return lrn_supports(ki, ISA_OK(ki->cpu)); }    \
  static bool sm_supports_##SFX(const er_kernel_info *ki) { return softmax_supports(ki, ISA_OK(ki->cpu)); } \
  static bool ln_supports_##SFX(const er_kernel_info *ki) { return ln_supports(ki, ISA_OK(ki->cpu)); }      \
  static bool in_supports_##SFX(const er_kernel_info *ki) { return in_supports(ki, ISA_OK(ki->cpu)); }      \
  static er_status bn_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                 \
    return bn_prepare(ki, &VO, st, scratch);                                                                \
  }                                                                                                         \
  static const er_cpu_kernel k_bn_##SFX = {"f32_batchnorm__" ISA, "BatchNormalization", "", bn_supports_##SFX, \
                                          bn_prepare_##SFX, bn_run, bn_release};                            \
  static const er_cpu_kernel k_lrn_##SFX = {"f32_lrn__" ISA, "LRN", "", lrn_supports_##SFX, prepare_##SFX,   \
                                           lrn_run, free};                                                  \
  static const er_cpu_kernel k_sm_##SFX = {"f32_softmax__" ISA, "Softmax", "", sm_supports_##SFX,            \
                                          prepare_##SFX, softmax_run, free};                                \
  static const er_cpu_kernel k_lsm_##SFX = {"f32_log_softmax__" ISA, "LogSoftmax", "", sm_supports_##SFX,    \
                                           prepare_##SFX, softmax_run, free};                               \
  static const er_cpu_kernel k_ln_##SFX = {"f32_layernorm__" ISA, "LayerNormalization", "", ln_supports_##SFX, \
                                          prepare_##SFX, ln_run, free};                                     \
  static const er_cpu_kernel k_in_##SFX = {"f32_instancenorm__" ISA, "InstanceNormalization", "",             \
                                          in_supports_##SFX, prepare_##SFX, in_run, free};

#if defined(__x86_64__) || defined(__i386__)
NORM_KERNELS(avx512, "avx512", er__vec_avx512, er__cpu_has_avx512)
NORM_KERNELS(avx2, "avx2", er__vec_avx2, er__cpu_has_avx2)
#endif
#if defined(__aarch64__)
static bool has_neon(const er_cpu_features *c) { return c->neon; }
NORM_KERNELS(neon, "neon", er__vec_neon, has_neon)
#endif

const er_cpu_kernel *const er__kernels_norm[] = {
#if defined(__x86_64__) || defined(__i386__)
    &k_bn_avx512, &k_lrn_avx512, &k_sm_avx512, &k_lsm_avx512, &k_ln_avx512, &k_in_avx512,
    &k_bn_avx2,   &k_lrn_avx2,   &k_sm_avx2,   &k_lsm_avx2,   &k_ln_avx2,   &k_in_avx2,
#endif
#if defined(__aarch64__)
    &k_bn_neon,   &k_lrn_neon,   &k_sm_neon,   &k_lsm_neon,   &k_ln_neon,   &k_in_neon,
#endif
    NULL,
};
