/* misc.c - loss operators: NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss.
 *
 * Both read scores of shape [N, C, d1, ..., dk] and integer targets of
 * shape [N, d1, ..., dk] (k >= 0). The kernels view them as [N, C, D] and
 * [N, D] with D = d1 * ... * dk. Everything is computed in double and
 * rounded once on store; a sum over many samples then loses nothing
 * before the final rounding. */
#include "ops/op.h"
#include "ops/op-groups.h"

#include <stdlib.h>

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

typedef enum loss_reduction { LOSS_NONE, LOSS_SUM, LOSS_MEAN } loss_reduction;

typedef struct loss_cfg {
  loss_reduction reduction;
  bool has_ignore;
  int64_t ignore_index;
} loss_cfg;

static er_status loss_cfg_of(const er_kctx *ctx, loss_cfg *c) {
  const char *r;
  ER_CHECK(er__attr_string(ctx, "reduction", "mean", &r));
  if (strcmp(r, "none") == 0) c->reduction = LOSS_NONE;
  else if (strcmp(r, "sum") == 0) c->reduction = LOSS_SUM;
  else if (strcmp(r, "mean") == 0) c->reduction = LOSS_MEAN;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "reduction '%s' is not one of none, sum, mean", r);
  c->has_ignore = er__node_attr(ctx->node, "ignore_index") != NULL;
  ER_CHECK(er__attr_int(ctx, "ignore_index", 0, &c->ignore_index));
  return ER_STATUS_OK;
}

/* Validates (scores, target, weight) and sets output 0 (the loss) and, when
 * `log_prob_out` >= 0, that output with the scores' type and shape. */
static er_status loss_check(er_kctx *ctx, int log_prob_out) {
  loss_cfg c;
  ER_CHECK(loss_cfg_of(ctx, &c));
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(er__require_rank(ctx, 0, 2, ER_MAX_RANK));
  ER_CHECK(er__require_rank(ctx, 1, 1, ER_MAX_RANK - 1));
  if (er__in(ctx, 2)) {
    ER_CHECK(er__require_type(ctx, 2, er__types_float));
    ER_CHECK(er__require_same_type(ctx, 0, 2));
    ER_CHECK(er__require_rank(ctx, 2, 1, 1));
  }
  const er_tensor *x = ctx->in[0], *t = ctx->in[1], *w = er__in(ctx, 2);
  char a[160], b[160];
  if (x->rank >= 0 && t->rank >= 0) {
    bool ok = t->rank == x->rank - 1;
    for (int d = 0; ok && d < t->rank; d++) {
      int64_t xd = x->dims[d == 0 ? 0 : d + 1], td = t->dims[d];
      if (xd >= 0 && td >= 0 && xd != td) ok = false;
    }
    if (!ok)
      return er__op_error(
          ctx, ER_STATUS_INVALID_SHAPE,
          "target shape %s does not fit scores shape %s; it must be the scores' shape "
          "without the class axis 1",
          er__shape_str(t, a, sizeof a), er__shape_str(x, b, sizeof b));
  }
  if (w && w->rank == 1 && x->rank >= 2 && w->dims[0] >= 0 && x->dims[1] >= 0 &&
      w->dims[0] != x->dims[1])
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "weight has %lld entries; there are %lld classes", (long long)w->dims[0],
                        (long long)x->dims[1]);

  if (c.reduction != LOSS_NONE) {
    er__set_output(ctx, 0, x->dtype, 0, NULL);
  } else if (t->rank >= 0) {
    /* The target's shape, filling dims it leaves unknown from the scores. */
    int64_t dims[ER_MAX_RANK];
    for (int d = 0; d < t->rank; d++) {
      dims[d] = t->dims[d];
      if (dims[d] < 0 && x->rank == t->rank + 1) dims[d] = x->dims[d == 0 ? 0 : d + 1];
    }
    er__set_output(ctx, 0, x->dtype, t->rank, dims);
  } else if (x->rank >= 2) {
    int64_t dims[ER_MAX_RANK];
    for (int d = 0; d < x->rank - 1; d++) dims[d] = x->dims[d == 0 ? 0 : d + 1];
    er__set_output(ctx, 0, x->dtype, x->rank - 1, dims);
  } else {
    er__set_output(ctx, 0, x->dtype, -1, NULL);
  }
  if (log_prob_out >= 0) er__same_as_input(ctx, log_prob_out, 0);
  return ER_STATUS_OK;
}

/* The loss from log-probabilities lp [N, C, D] (double) and the node's
 * target and optional weight, into output 0:
 *   loss[n, d] = -lp[n, c, d] * w[c], c = target[n, d]; 0 when c is ignore_index
 *   none: loss;  sum: sum(loss);  mean: sum(loss) / sum(w[c] over samples not ignored)
 * Without weight, w is 1, so mean divides by the count of samples kept. */
static er_status nll_from_logprob(const er_kctx *ctx, const loss_cfg *c, const double *lp,
                                  int64_t N, int64_t C, int64_t D) {
  const er_tensor *target = ctx->in[1], *weight = er__in(ctx, 2);
  er_tensor *out = ctx->out[0];
  double sum = 0.0, wsum = 0.0;
  for (int64_t n = 0; n < N; n++) {
    for (int64_t d = 0; d < D; d++) {
      int64_t i = n * D + d;
      int64_t cls = er__get_i64(target, i);
      double loss = 0.0, w = 0.0;
      if (!(c->has_ignore && cls == c->ignore_index)) {
        if (cls < 0 || cls >= C)
          return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                              "target[%lld] = %lld is not a class in [0, %lld) nor ignore_index",
                              (long long)i, (long long)cls, (long long)C);
        w = weight ? er__load_f64(weight->data, weight->dtype, cls) : 1.0;
        loss = -lp[(n * C + cls) * D + d] * w;
      }
      if (c->reduction == LOSS_NONE) er__store_f64(out->data, out->dtype, i, loss);
      sum += loss;
      wsum += w;
    }
  }
  /* A mean over no kept samples is 0 / 0, NaN, as in the ONNX reference. */
  if (c->reduction == LOSS_SUM) er__store_f64(out->data, out->dtype, 0, sum);
  if (c->reduction == LOSS_MEAN) er__store_f64(out->data, out->dtype, 0, sum / wsum);
  return ER_STATUS_OK;
}

/* N, C and D of scores x. */
static void loss_dims(const er_tensor *x, int64_t *N, int64_t *C, int64_t *D) {
  *N = x->dims[0];
  *C = x->dims[1];
  *D = 1;
  for (int d = 2; d < x->rank; d++) *D *= x->dims[d];
}

static er_status check_target_count(const er_kctx *ctx, int64_t N, int64_t D) {
  if (er__count(ctx->in[1]) != N * D)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "target has %lld elements; the scores need %lld",
                        (long long)er__count(ctx->in[1]), (long long)(N * D));
  const er_tensor *w = er__in(ctx, 2);
  if (w && er__count(w) != ctx->in[0]->dims[1])
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "weight has %lld entries; there are %lld classes", (long long)er__count(w),
                        (long long)ctx->in[0]->dims[1]);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* NegativeLogLikelihoodLoss                                                 */
/* ======================================================================== */

static er_status nll_check(er_kctx *ctx) { return loss_check(ctx, -1); }

static er_status nll_run(er_kctx *ctx) {
  loss_cfg c;
  int64_t N, C, D;
  ER_CHECK(loss_cfg_of(ctx, &c));
  const er_tensor *x = ctx->in[0];
  loss_dims(x, &N, &C, &D);
  ER_CHECK(check_target_count(ctx, N, D));
  int64_t n = er__count(x);
  double *lp = er__malloc((size_t)(n ? n : 1) * sizeof *lp, "NegativeLogLikelihoodLoss input");
  if (!lp) return ER_STATUS_OUT_OF_MEMORY;
  if (x->dtype == ER_DTYPE_FLOAT) {
    const float *s = x->data;
    for (int64_t i = 0; i < n; i++) lp[i] = s[i];
  } else {
    for (int64_t i = 0; i < n; i++) lp[i] = er__load_f64(x->data, x->dtype, i);
  }
  er_status st = nll_from_logprob(ctx, &c, lp, N, C, D);
  free(lp);
  return st;
}

/* Versions 12, 13 and 22 differ only in the types they list. */
static const er_op_def op_nll = {
    .name = "NegativeLogLikelihoodLoss", .domain = "", .min_version = 12, .max_version = 22,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = nll_check, .run = nll_run,
};

/* ======================================================================== */
/* SoftmaxCrossEntropyLoss                                                   */
/* ======================================================================== */

static er_status sce_check(er_kctx *ctx) { return loss_check(ctx, ctx->n_out > 1 ? 1 : -1); }

static er_status sce_run(er_kctx *ctx) {
  loss_cfg c;
  int64_t N, C, D;
  ER_CHECK(loss_cfg_of(ctx, &c));
  const er_tensor *x = ctx->in[0];
  er_tensor *log_prob = er__out(ctx, 1);
  loss_dims(x, &N, &C, &D);
  ER_CHECK(check_target_count(ctx, N, D));
  int64_t n = er__count(x);
  double *lp =
      er__malloc((size_t)(n ? n : 1) * sizeof *lp, "SoftmaxCrossEntropyLoss log-probabilities");
  if (!lp) return ER_STATUS_OUT_OF_MEMORY;
  for (int64_t i = 0; i < n; i++) lp[i] = er__load_f64(x->data, x->dtype, i);
  /* log_softmax over the class axis: x - max - log(sum(exp(x - max))). */
  for (int64_t b = 0; b < N; b++) {
    for (int64_t d = 0; d < D; d++) {
      double *v = lp + b * C * D + d; /* stride D */
      double mx = -INFINITY, s = 0.0;
      for (int64_t k = 0; k < C; k++) mx = v[k * D] > mx ? v[k * D] : mx;
      for (int64_t k = 0; k < C; k++) s += exp(v[k * D] - mx);
      double lse = mx + log(s);
      for (int64_t k = 0; k < C; k++) v[k * D] -= lse;
    }
  }
  if (log_prob) {
    if (log_prob->dtype == ER_DTYPE_FLOAT) {
      float *o = log_prob->data;
      for (int64_t i = 0; i < n; i++) o[i] = (float)lp[i];
    } else {
      for (int64_t i = 0; i < n; i++) er__store_f64(log_prob->data, log_prob->dtype, i, lp[i]);
    }
  }
  er_status st = nll_from_logprob(ctx, &c, lp, N, C, D);
  free(lp);
  return st;
}

/* Versions 12 and 13 (bfloat16 added). */
static const er_op_def op_sce = {
    .name = "SoftmaxCrossEntropyLoss", .domain = "", .min_version = 12, .max_version = 13,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 2,
    .check = sce_check, .run = sce_run,
};

const er_op_def *const er__ops_misc[] = {
    &op_nll,
    &op_sce,
    NULL,
};
