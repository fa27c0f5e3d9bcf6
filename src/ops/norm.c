/* norm.c - operators of the "norm" group: BatchNormalization,
 * InstanceNormalization, LayerNormalization, GroupNormalization,
 * RMSNormalization, LpNormalization, MeanVarianceNormalization and LRN.
 *
 * Numerics: statistics (means, variances, norms) are computed in double with
 * two passes (mean first, then the mean of squared deviations), so there is
 * no E[x^2] - E[x]^2 cancellation, and outputs are rounded once on store.
 * The spec's stash_type asks for "at least float" precision; double meets
 * it for every type. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

#define T_END ER_DTYPE_UNDEFINED
/* The float types of schemas that predate bfloat16. */
static const er_dtype types_float_old[] = {ER_DTYPE_FLOAT16, ER_DTYPE_FLOAT, ER_DTYPE_DOUBLE,
                                           T_END};

/* Element access with a float32 fast path; other types convert through
 * double. */
static inline double load_el(const void *p, er_dtype t, int64_t i) {
  return t == ER_DTYPE_FLOAT ? ((const float *)p)[i] : er__load_f64(p, t, i);
}
static inline void store_el(void *p, er_dtype t, int64_t i, double v) {
  if (t == ER_DTYPE_FLOAT)
    ((float *)p)[i] = (float)v;
  else
    er__store_f64(p, t, i, v);
}

/* Product of dims[from .. to-1] of a fully known shape. */
static int64_t dims_product(const er_tensor *t, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= t->dims[d];
  return n;
}

/* Mean and population variance of the n contiguous elements at x[off..]. */
static void moments(const void *x, er_dtype t, int64_t off, int64_t n, double *mean,
                    double *var) {
  double s = 0.0, ss = 0.0;
  for (int64_t i = 0; i < n; i++) s += load_el(x, t, off + i);
  double m = s / (double)n;
  for (int64_t i = 0; i < n; i++) {
    double d = load_el(x, t, off + i) - m;
    ss += d * d;
  }
  *mean = m;
  *var = ss / (double)n;
}

/* Requires input i (when present and its shape known) to be 1-D with
 * `want` elements (when want >= 0). `why` says where `want` comes from, for
 * the message: "X [2,3,4] has 3 channels (dim 1)". */
static er_status require_vector(const er_kctx *ctx, int i, const char *what, int64_t want,
                                const char *why) {
  const er_tensor *t = er__in(ctx, i);
  char buf[96];
  if (!t || t->rank < 0) return ER_STATUS_OK;
  if (t->rank != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s must be 1-D, got shape %s", what,
                        er__shape_str(t, buf, sizeof buf));
  if (want >= 0 && t->dims[0] >= 0 && t->dims[0] != want)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "%s has %lld elements but %s; it must have %lld", what,
                        (long long)t->dims[0], why, (long long)want);
  return ER_STATUS_OK;
}

/* Requires input i (when present) to broadcast unidirectionally to X
 * (input 0): no more dims than X, and each trailing dim 1 or X's. */
static er_status require_unidirectional(const er_kctx *ctx, int i, const char *what) {
  const er_tensor *x = ctx->in[0], *t = er__in(ctx, i);
  char a[96], b[96];
  if (!t || t->rank < 0 || x->rank < 0) return ER_STATUS_OK;
  bool ok = t->rank <= x->rank;
  for (int d = 0; ok && d < t->rank; d++) {
    int64_t td = t->dims[d], xd = x->dims[d + x->rank - t->rank];
    if (td >= 0 && xd >= 0 && td != 1 && td != xd) ok = false;
  }
  if (!ok)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "%s of shape %s does not broadcast to X of shape %s", what,
                        er__shape_str(t, a, sizeof a), er__shape_str(x, b, sizeof b));
  return ER_STATUS_OK;
}

/* The number of channels (dim 1) of X as far as known; -1 if unknown. */
static int64_t channels_of(const er_tensor *x) {
  if (x->rank < 0) return -1;
  if (x->rank < 2) return 1;
  return x->dims[1];
}

/* A description of where the channel count comes from, for messages. */
static const char *channels_why(const er_tensor *x, char *buf, size_t size) {
  char s[96];
  snprintf(buf, size, "X %s has %lld channels", er__shape_str(x, s, sizeof s),
           (long long)channels_of(x));
  return buf;
}

/* stash_type names the precision of the statistics: a float type code. It
 * never lowers ours (double) but it is the type of LayerNormalization's
 * Mean and InvStdDev outputs. */
static er_status get_stash_type(er_kctx *ctx, er_dtype *out) {
  int64_t stash;
  ER_CHECK(er__attr_int(ctx, "stash_type", ER_DTYPE_FLOAT, &stash));
  if (stash != ER_DTYPE_FLOAT && stash != ER_DTYPE_DOUBLE && stash != ER_DTYPE_FLOAT16 &&
      stash != ER_DTYPE_BFLOAT16)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "stash_type %lld is not a float type (1 float, 10 float16, 11 double, "
                        "16 bfloat16)",
                        (long long)stash);
  *out = (er_dtype)stash;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* BatchNormalization                                                        */
/* ======================================================================== */

/* Versions: 7 (spatial attribute; training when the optional outputs are
 * asked for), 9 (spatial removed), 14 (training_mode attribute, mean/var may
 * have their own type), 15 (scale/B may also have their own type).
 *
 * The input is seen as [N, C, inner]; rank 1 is [N] with C = 1, and
 * spatial = 0 (version 7) makes every (c, d1, .., dn) its own channel. */

typedef struct bn_params {
  float epsilon, momentum;
  bool training;
  bool spatial;
} bn_params;

static er_status bn_params_get(er_kctx *ctx, bn_params *p) {
  int v = ctx->node->version;
  int64_t spatial = 1, training = 0;
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &p->epsilon));
  ER_CHECK(er__attr_float(ctx, "momentum", 0.9f, &p->momentum));
  if (v < 9) ER_CHECK(er__attr_int(ctx, "spatial", 1, &spatial));
  if (spatial != 0 && spatial != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "spatial must be 0 or 1, got %lld",
                        (long long)spatial);
  if (v >= 14) {
    ER_CHECK(er__attr_int(ctx, "training_mode", 0, &training));
    if (training != 0 && training != 1)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "training_mode must be 0 or 1, got %lld", (long long)training);
    if (!training && (er__out(ctx, 1) || er__out(ctx, 2)))
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH,
                          "running_mean and running_var outputs are only defined with "
                          "training_mode = 1");
  } else {
    /* Before 14 the mode is implied by the outputs: asking for mean, var,
     * saved_mean or saved_var means training. */
    for (int k = 1; k < ctx->n_out; k++)
      if (ctx->out[k]) training = 1;
  }
  p->training = training != 0;
  p->spatial = spatial != 0;
  return ER_STATUS_OK;
}

/* Channels of the statistics as far as known (-1 unknown). */
static int64_t bn_channels(const er_tensor *x, bool spatial) {
  if (x->rank < 0) return -1;
  if (spatial || x->rank < 2) return channels_of(x);
  int64_t c = 1;
  for (int d = 1; d < x->rank; d++) {
    if (x->dims[d] < 0) return -1;
    c *= x->dims[d];
  }
  return c;
}

static er_status batchnorm_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  static const char *const names[5] = {"X", "scale", "B", "mean", "var"};
  int v = ctx->node->version;
  bn_params p;
  char why[160];
  ER_CHECK(bn_params_get(ctx, &p));
  const er_dtype *types = v >= 14 ? er__types_float : types_float_old;
  for (int i = 0; i < 5; i++) ER_CHECK(er__require_type(ctx, i, types));
  if (v < 14) {
    for (int i = 1; i < 5; i++) ER_CHECK(er__require_same_type(ctx, 0, i));
  } else {
    if (v == 14) ER_CHECK(er__require_same_type(ctx, 0, 1));
    ER_CHECK(er__require_same_type(ctx, 1, 2));
    ER_CHECK(er__require_same_type(ctx, 3, 4));
  }
  ER_CHECK(er__require_rank(ctx, 0, 1, ER_MAX_RANK));

  int64_t c = bn_channels(x, p.spatial);
  if (p.spatial) {
    channels_why(x, why, sizeof why);
    for (int i = 1; i < 5; i++) ER_CHECK(require_vector(ctx, i, names[i], c, why));
  } else {
    /* spatial = 0: the statistics have X's shape without N, (C, D1, .., Dn). */
    char s[96];
    snprintf(why, sizeof why, "X %s has %lld values per sample", er__shape_str(x, s, sizeof s),
             (long long)c);
    for (int i = 1; i < 5; i++) {
      int64_t n = er__tensor_count(ctx->in[i]);
      if (c >= 0 && n >= 0 && n != c)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "%s has %lld elements but %s (spatial = 0); it must have %lld",
                            names[i], (long long)n, why, (long long)c);
    }
  }

  er__same_as_input(ctx, 0, 0);
  /* Statistics outputs have mean's shape ([C], or (C, D1, .., Dn) with
   * spatial = 0) and mean's type (T2 from version 14, T before). */
  int64_t cdims[1] = {c};
  const er_tensor *mean = ctx->in[3];
  for (int k = 1; k < ctx->n_out; k++) {
    if (p.spatial)
      er__set_output(ctx, k, mean->dtype, 1, cdims);
    else
      er__set_output(ctx, k, mean->dtype, mean->rank, mean->dims);
  }
  return ER_STATUS_OK;
}

static er_status batchnorm_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  bn_params p;
  ER_CHECK(bn_params_get(ctx, &p));
  int64_t n = x->dims[0];
  int64_t c = bn_channels(x, p.spatial);
  int64_t inner = p.spatial ? dims_product(x, 2, x->rank) : 1;

  /* prm: scale, B, mean, var (the statistics used), each [c]. */
  double *prm = er__malloc((size_t)(c > 0 ? c : 1) * 4 * sizeof(double),
                           "BatchNormalization parameters");
  if (!prm) return ER_STATUS_OUT_OF_MEMORY;
  double *scale = prm, *bias = prm + c, *mean = prm + 2 * c, *var = prm + 3 * c;
  for (int i = 0; i < 4; i++)
    for (int64_t j = 0; j < c; j++)
      prm[i * c + j] = er__load_f64(ctx->in[i + 1]->data, ctx->in[i + 1]->dtype, j);

  if (p.training) {
    /* Batch statistics over N and the spatial dims; the running ones move
     * toward them by (1 - momentum). */
    double cnt = (double)(n * inner);
    for (int64_t ch = 0; ch < c; ch++) {
      double s = 0.0, ss = 0.0;
      for (int64_t b = 0; b < n; b++)
        for (int64_t i = 0; i < inner; i++)
          s += load_el(x->data, x->dtype, (b * c + ch) * inner + i);
      double m = s / cnt;
      for (int64_t b = 0; b < n; b++)
        for (int64_t i = 0; i < inner; i++) {
          double d = load_el(x->data, x->dtype, (b * c + ch) * inner + i) - m;
          ss += d * d;
        }
      double bv = ss / cnt;
      double mom = p.momentum;
      double run_mean = mean[ch] * mom + m * (1.0 - mom);
      double run_var = var[ch] * mom + bv * (1.0 - mom);
      /* Outputs 1 and 2: running mean and variance. Version 7/9 also has
       * saved_mean and saved_var (3, 4): the batch mean and variance. */
      er_tensor *o;
      if ((o = er__out(ctx, 1))) er__store_f64(o->data, o->dtype, ch, run_mean);
      if ((o = er__out(ctx, 2))) er__store_f64(o->data, o->dtype, ch, run_var);
      if ((o = er__out(ctx, 3))) er__store_f64(o->data, o->dtype, ch, m);
      if ((o = er__out(ctx, 4))) er__store_f64(o->data, o->dtype, ch, bv);
      mean[ch] = m;
      var[ch] = bv;
    }
  }

  for (int64_t ch = 0; ch < c; ch++) {
    double a = scale[ch] / sqrt(var[ch] + (double)p.epsilon);
    for (int64_t b = 0; b < n; b++) {
      int64_t off = (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; i++)
        store_el(y->data, y->dtype, off + i,
                 (load_el(x->data, x->dtype, off + i) - mean[ch]) * a + bias[ch]);
    }
  }
  free(prm);
  return ER_STATUS_OK;
}

static const er_op_def op_batchnorm = {
    .name = "BatchNormalization", .domain = "", .min_version = 7, .max_version = 15,
    .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 5,
    .check = batchnorm_check, .run = batchnorm_run,
};

/* ======================================================================== */
/* InstanceNormalization                                                     */
/* ======================================================================== */

static er_status instancenorm_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  float eps;
  char why[160];
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  const er_dtype *types = ctx->node->version >= 22 ? er__types_float : types_float_old;
  for (int i = 0; i < 3; i++) ER_CHECK(er__require_type(ctx, i, types));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  ER_CHECK(er__require_same_type(ctx, 0, 2));
  ER_CHECK(er__require_rank(ctx, 0, 2, ER_MAX_RANK));
  channels_why(x, why, sizeof why);
  ER_CHECK(require_vector(ctx, 1, "scale", channels_of(x), why));
  ER_CHECK(require_vector(ctx, 2, "B", channels_of(x), why));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status instancenorm_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *sc = ctx->in[1], *bi = ctx->in[2];
  er_tensor *y = ctx->out[0];
  float eps;
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  int64_t n = x->dims[0], c = x->dims[1], inner = dims_product(x, 2, x->rank);
  for (int64_t b = 0; b < n; b++)
    for (int64_t ch = 0; ch < c; ch++) {
      int64_t off = (b * c + ch) * inner;
      double m, var;
      moments(x->data, x->dtype, off, inner, &m, &var);
      double a = er__load_f64(sc->data, sc->dtype, ch) / sqrt(var + (double)eps);
      double bias = er__load_f64(bi->data, bi->dtype, ch);
      for (int64_t i = 0; i < inner; i++)
        store_el(y->data, y->dtype, off + i, (load_el(x->data, x->dtype, off + i) - m) * a + bias);
    }
  return ER_STATUS_OK;
}

/* Version 1 differs from 6 only by the legacy consumed_inputs attribute. */
static const er_op_def op_instancenorm = {
    .name = "InstanceNormalization", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = instancenorm_check, .run = instancenorm_run,
};

/* ======================================================================== */
/* LayerNormalization and RMSNormalization                                   */
/* ======================================================================== */

/* Both normalize X over dims [axis, rank) - one row of `cols` elements per
 * index of the leading dims - then scale (and LayerNormalization shifts)
 * with tensors that broadcast unidirectionally to X. */

static er_status rownorm_axis(er_kctx *ctx, int *axis) {
  int64_t a;
  ER_CHECK(er__attr_int(ctx, "axis", -1, &a));
  *axis = -1;
  if (ctx->in[0]->rank < 0) return ER_STATUS_OK;
  return er__norm_axis(ctx, "axis", a, ctx->in[0]->rank, axis);
}

static er_status layernorm_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  float eps;
  int axis;
  er_dtype stash = ER_DTYPE_UNDEFINED;
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  ER_CHECK(get_stash_type(ctx, &stash));
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  ER_CHECK(er__require_type(ctx, 1, er__types_float));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  if (er__in(ctx, 2)) {
    ER_CHECK(er__require_type(ctx, 2, er__types_float));
    ER_CHECK(er__require_same_type(ctx, 0, 2));
  }
  ER_CHECK(rownorm_axis(ctx, &axis));
  ER_CHECK(require_unidirectional(ctx, 1, "Scale"));
  ER_CHECK(require_unidirectional(ctx, 2, "B"));
  er__same_as_input(ctx, 0, 0);
  /* Mean and InvStdDev: [d0, .., d(axis-1), 1, .., 1] of the stash type. */
  int64_t dims[ER_MAX_RANK];
  for (int d = 0; d < x->rank; d++) dims[d] = d < axis ? x->dims[d] : 1;
  er__set_output(ctx, 1, stash, x->rank, dims);
  er__set_output(ctx, 2, stash, x->rank, dims);
  return ER_STATUS_OK;
}

static er_status layernorm_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *sc = ctx->in[1], *bi = er__in(ctx, 2);
  er_tensor *y = ctx->out[0], *mean_out = er__out(ctx, 1), *inv_out = er__out(ctx, 2);
  float eps;
  int axis;
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  ER_CHECK(rownorm_axis(ctx, &axis));
  int64_t rows = dims_product(x, 0, axis), cols = dims_product(x, axis, x->rank);
  const er_tensor *ins[2] = {sc, bi};
  er_bcast it;
  er__bcast_init(&it, bi ? 2 : 1, ins, y);
  for (int64_t r = 0; r < rows; r++) {
    double m, var;
    moments(x->data, x->dtype, r * cols, cols, &m, &var);
    double inv = 1.0 / sqrt(var + (double)eps);
    if (mean_out) er__store_f64(mean_out->data, mean_out->dtype, r, m);
    if (inv_out) er__store_f64(inv_out->data, inv_out->dtype, r, inv);
    /* Rows are visited in X's row-major order, so the broadcast walk
     * stays in step with r * cols + i. */
    for (int64_t i = 0; i < cols; i++, er__bcast_next(&it)) {
      int64_t k = r * cols + i;
      double v = (load_el(x->data, x->dtype, k) - m) * inv *
                 load_el(sc->data, sc->dtype, it.off[0]);
      if (bi) v += load_el(bi->data, bi->dtype, it.off[1]);
      store_el(y->data, y->dtype, k, v);
    }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_layernorm = {
    .name = "LayerNormalization", .domain = "", .min_version = 17, .max_version = 17,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 3,
    .check = layernorm_check, .run = layernorm_run,
};

static er_status rmsnorm_check(er_kctx *ctx) {
  const er_tensor *sc = ctx->in[1];
  float eps;
  int axis;
  er_dtype stash;
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  ER_CHECK(get_stash_type(ctx, &stash));
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  ER_CHECK(er__require_type(ctx, 1, er__types_float));
  ER_CHECK(rownorm_axis(ctx, &axis));
  ER_CHECK(require_unidirectional(ctx, 1, "scale"));
  /* Y takes scale's type (V), which may differ from X's (T). */
  const er_tensor *x = ctx->in[0];
  er__set_output(ctx, 0, sc->dtype, x->rank, x->dims);
  return ER_STATUS_OK;
}

static er_status rmsnorm_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *sc = ctx->in[1];
  er_tensor *y = ctx->out[0];
  float eps;
  int axis;
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  ER_CHECK(rownorm_axis(ctx, &axis));
  int64_t rows = dims_product(x, 0, axis), cols = dims_product(x, axis, x->rank);
  const er_tensor *ins[1] = {sc};
  er_bcast it;
  er__bcast_init(&it, 1, ins, y);
  for (int64_t r = 0; r < rows; r++) {
    double ss = 0.0;
    for (int64_t i = 0; i < cols; i++) {
      double v = load_el(x->data, x->dtype, r * cols + i);
      ss += v * v;
    }
    double inv = 1.0 / sqrt(ss / (double)cols + (double)eps);
    for (int64_t i = 0; i < cols; i++, er__bcast_next(&it)) {
      int64_t k = r * cols + i;
      store_el(y->data, y->dtype, k,
               load_el(x->data, x->dtype, k) * inv * load_el(sc->data, sc->dtype, it.off[0]));
    }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_rmsnorm = {
    .name = "RMSNormalization", .domain = "", .min_version = 23, .max_version = 23,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = rmsnorm_check, .run = rmsnorm_run,
};

/* ======================================================================== */
/* GroupNormalization                                                        */
/* ======================================================================== */

/* Statistics per sample per group of C / num_groups channels. Version 18
 * has one scale and bias per group; version 21 one per channel. */

static er_status groupnorm_groups(er_kctx *ctx, int64_t *groups) {
  const er_attr *a = er__node_attr(ctx->node, "num_groups");
  if (!a)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'num_groups' is required");
  ER_CHECK(er__attr_int(ctx, "num_groups", 0, groups));
  if (*groups <= 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "num_groups must be positive, got %lld",
                        (long long)*groups);
  return ER_STATUS_OK;
}

static er_status groupnorm_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t g;
  float eps;
  char why[160];
  ER_CHECK(groupnorm_groups(ctx, &g));
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  if (ctx->node->version >= 21) {
    er_dtype stash;
    ER_CHECK(get_stash_type(ctx, &stash));
  }
  for (int i = 0; i < 3; i++) ER_CHECK(er__require_type(ctx, i, er__types_float));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  ER_CHECK(er__require_same_type(ctx, 0, 2));
  ER_CHECK(er__require_rank(ctx, 0, 2, ER_MAX_RANK));
  int64_t c = channels_of(x);
  if (c >= 0 && c % g != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "num_groups %lld does not divide the %lld channels of X", (long long)g,
                        (long long)c);
  if (ctx->node->version >= 21) {
    channels_why(x, why, sizeof why);
    ER_CHECK(require_vector(ctx, 1, "scale", c, why));
    ER_CHECK(require_vector(ctx, 2, "bias", c, why));
  } else {
    snprintf(why, sizeof why, "num_groups is %lld (version 18 has one per group)", (long long)g);
    ER_CHECK(require_vector(ctx, 1, "scale", g, why));
    ER_CHECK(require_vector(ctx, 2, "bias", g, why));
  }
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status groupnorm_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *sc = ctx->in[1], *bi = ctx->in[2];
  er_tensor *y = ctx->out[0];
  int64_t g;
  float eps;
  ER_CHECK(groupnorm_groups(ctx, &g));
  ER_CHECK(er__attr_float(ctx, "epsilon", 1e-5f, &eps));
  bool per_group = ctx->node->version < 21;
  int64_t n = x->dims[0], c = x->dims[1], inner = dims_product(x, 2, x->rank);
  int64_t cpg = c / g; /* channels per group */
  for (int64_t b = 0; b < n; b++)
    for (int64_t gi = 0; gi < g; gi++) {
      int64_t off = (b * c + gi * cpg) * inner;
      double m, var;
      moments(x->data, x->dtype, off, cpg * inner, &m, &var);
      double inv = 1.0 / sqrt(var + (double)eps);
      for (int64_t k = 0; k < cpg; k++) {
        int64_t p = per_group ? gi : gi * cpg + k;
        double s = er__load_f64(sc->data, sc->dtype, p), bv = er__load_f64(bi->data, bi->dtype, p);
        int64_t o = off + k * inner;
        for (int64_t i = 0; i < inner; i++)
          store_el(y->data, y->dtype, o + i,
                   (load_el(x->data, x->dtype, o + i) - m) * inv * s + bv);
      }
    }
  return ER_STATUS_OK;
}

static const er_op_def op_groupnorm = {
    .name = "GroupNormalization", .domain = "", .min_version = 18, .max_version = 21,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = groupnorm_check, .run = groupnorm_run,
};

/* ======================================================================== */
/* LpNormalization                                                           */
/* ======================================================================== */

static er_status lpnorm_attrs(er_kctx *ctx, int *axis, int64_t *p) {
  int64_t a;
  ER_CHECK(er__attr_int(ctx, "p", 2, p));
  if (*p != 1 && *p != 2)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "p must be 1 or 2, got %lld",
                        (long long)*p);
  ER_CHECK(er__attr_int(ctx, "axis", -1, &a));
  *axis = -1;
  if (ctx->in[0]->rank < 0) return ER_STATUS_OK;
  return er__norm_axis(ctx, "axis", a, ctx->in[0]->rank, axis);
}

static er_status lpnorm_check(er_kctx *ctx) {
  int axis;
  int64_t p;
  ER_CHECK(lpnorm_attrs(ctx, &axis, &p));
  ER_CHECK(er__require_type(ctx, 0, ctx->node->version >= 22 ? er__types_float : types_float_old));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status lpnorm_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int axis;
  int64_t p;
  ER_CHECK(lpnorm_attrs(ctx, &axis, &p));
  /* [outer, n, inner], normalized along n. */
  int64_t outer = dims_product(x, 0, axis);
  int64_t n = x->rank > 0 ? x->dims[axis] : 1;
  int64_t inner = x->rank > 0 ? dims_product(x, axis + 1, x->rank) : 1;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t off = o * n * inner + i;
      double s = 0.0;
      for (int64_t k = 0; k < n; k++) {
        double v = load_el(x->data, x->dtype, off + k * inner);
        s += p == 1 ? fabs(v) : v * v;
      }
      double norm = p == 1 ? s : sqrt(s);
      /* A zero norm (all zeros) gives zeros, not 0/0. */
      for (int64_t k = 0; k < n; k++) {
        int64_t e = off + k * inner;
        store_el(y->data, y->dtype, e, norm == 0.0 ? 0.0 : load_el(x->data, x->dtype, e) / norm);
      }
    }
  return ER_STATUS_OK;
}

static const er_op_def op_lpnorm = {
    .name = "LpNormalization", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = lpnorm_check, .run = lpnorm_run,
};

/* ======================================================================== */
/* MeanVarianceNormalization                                                 */
/* ======================================================================== */

/* Y = (X - mean) / (sqrt(variance) + 1e-9) with mean and variance over
 * `axes` (default [0, 2, 3]); the 1e-9 is the spec's function body's. */
#define MVN_EPSILON 1e-9

static er_status mvn_axes(er_kctx *ctx, bool *mask) {
  static const int64_t def_axes[3] = {0, 2, 3};
  const int64_t *axes;
  int64_t n;
  int rank = ctx->in[0]->rank;
  ER_CHECK(er__attr_ints(ctx, "axes", &axes, &n));
  if (n < 0) {
    axes = def_axes;
    n = 3;
  }
  for (int d = 0; d < ER_MAX_RANK; d++) mask[d] = false;
  if (rank < 0) return ER_STATUS_OK;
  for (int64_t i = 0; i < n; i++) {
    int64_t a = axes[i];
    if (a < -(int64_t)rank || a >= rank)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "axes[%lld] = %lld is out of range [%d, %d] for input rank %d%s",
                          (long long)i, (long long)a, -rank, rank - 1, rank,
                          axes == def_axes ? " (the default axes are [0,2,3])" : "");
    mask[a < 0 ? a + rank : a] = true;
  }
  return ER_STATUS_OK;
}

static er_status mvn_check(er_kctx *ctx) {
  bool mask[ER_MAX_RANK];
  ER_CHECK(er__require_type(ctx, 0, ctx->node->version >= 13 ? er__types_float : types_float_old));
  ER_CHECK(mvn_axes(ctx, mask));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status mvn_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  bool mask[ER_MAX_RANK];
  ER_CHECK(mvn_axes(ctx, mask));
  int64_t total = er__count(x);
  if (total == 0) return ER_STATUS_OK;

  /* The statistics have X's shape with reduced dims set to 1; a broadcast
   * walk over X maps each element to its statistic. */
  er_tensor stat;
  memset(&stat, 0, sizeof stat);
  stat.rank = x->rank;
  int64_t n_stat = 1, n_red = 1;
  for (int d = 0; d < x->rank; d++) {
    stat.dims[d] = mask[d] ? 1 : x->dims[d];
    if (mask[d])
      n_red *= x->dims[d];
    else
      n_stat *= x->dims[d];
  }
  double *mean = er__calloc((size_t)n_stat * 2, sizeof(double),
                            "MeanVarianceNormalization statistics");
  if (!mean) return ER_STATUS_OUT_OF_MEMORY;
  double *dev = mean + n_stat; /* sum of squared deviations, then the divisor */
  const er_tensor *ins[1] = {&stat};
  er_bcast it;

  er__bcast_init(&it, 1, ins, x);
  for (int64_t i = 0; i < total; i++, er__bcast_next(&it))
    mean[it.off[0]] += load_el(x->data, x->dtype, i);
  for (int64_t s = 0; s < n_stat; s++) mean[s] /= (double)n_red;
  er__bcast_init(&it, 1, ins, x);
  for (int64_t i = 0; i < total; i++, er__bcast_next(&it)) {
    double d = load_el(x->data, x->dtype, i) - mean[it.off[0]];
    dev[it.off[0]] += d * d;
  }
  for (int64_t s = 0; s < n_stat; s++) dev[s] = sqrt(dev[s] / (double)n_red) + MVN_EPSILON;
  er__bcast_init(&it, 1, ins, x);
  for (int64_t i = 0; i < total; i++, er__bcast_next(&it))
    store_el(y->data, y->dtype, i,
             (load_el(x->data, x->dtype, i) - mean[it.off[0]]) / dev[it.off[0]]);
  free(mean);
  return ER_STATUS_OK;
}

static const er_op_def op_mvn = {
    .name = "MeanVarianceNormalization", .domain = "", .min_version = 9, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = mvn_check, .run = mvn_run,
};

/* ======================================================================== */
/* LRN                                                                       */
/* ======================================================================== */

/* Y[n,c,...] = X[n,c,...] / (bias + alpha / size * square_sum)^beta, with
 * square_sum over channels c - floor((size-1)/2) .. c + ceil((size-1)/2)
 * clipped to [0, C). */

typedef struct lrn_params {
  float alpha, beta, bias;
  int64_t size;
} lrn_params;

static er_status lrn_params_get(er_kctx *ctx, lrn_params *p) {
  if (!er__node_attr(ctx->node, "size"))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'size' is required");
  ER_CHECK(er__attr_int(ctx, "size", 1, &p->size));
  if (p->size < 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "size must be at least 1, got %lld",
                        (long long)p->size);
  ER_CHECK(er__attr_float(ctx, "alpha", 1e-4f, &p->alpha));
  ER_CHECK(er__attr_float(ctx, "beta", 0.75f, &p->beta));
  ER_CHECK(er__attr_float(ctx, "bias", 1.0f, &p->bias));
  return ER_STATUS_OK;
}

static er_status lrn_check(er_kctx *ctx) {
  lrn_params p;
  ER_CHECK(lrn_params_get(ctx, &p));
  ER_CHECK(er__require_type(ctx, 0, ctx->node->version >= 13 ? er__types_float : types_float_old));
  ER_CHECK(er__require_rank(ctx, 0, 2, ER_MAX_RANK));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status lrn_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  lrn_params p;
  ER_CHECK(lrn_params_get(ctx, &p));
  int64_t n = x->dims[0], c = x->dims[1], inner = dims_product(x, 2, x->rank);
  int64_t before = (p.size - 1) / 2, after = p.size / 2; /* floor, ceil of (size-1)/2 */
  double k = (double)p.alpha / (double)p.size;
  for (int64_t b = 0; b < n; b++)
    for (int64_t ch = 0; ch < c; ch++) {
      int64_t lo = ch - before < 0 ? 0 : ch - before;
      int64_t hi = ch + after > c - 1 ? c - 1 : ch + after;
      for (int64_t i = 0; i < inner; i++) {
        double ss = 0.0;
        for (int64_t j = lo; j <= hi; j++) {
          double v = load_el(x->data, x->dtype, (b * c + j) * inner + i);
          ss += v * v;
        }
        int64_t e = (b * c + ch) * inner + i;
        store_el(y->data, y->dtype, e,
                 load_el(x->data, x->dtype, e) / pow((double)p.bias + k * ss, (double)p.beta));
      }
    }
  return ER_STATUS_OK;
}

static const er_op_def op_lrn = {
    .name = "LRN", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = lrn_check, .run = lrn_run,
};

const er_op_def *const er__ops_norm[] = {
    &op_batchnorm,
    &op_instancenorm,
    &op_layernorm,
    &op_rmsnorm,
    &op_groupnorm,
    &op_lpnorm,
    &op_mvn,
    &op_lrn,
    NULL,
};
