/* unary.c - elementwise operators with one input: math functions and
 * activations. Reference kernels compute float types in double precision
 * and round once on store, so they are at least as accurate as any float32
 * implementation they are compared with. */
#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

/* A float function of one value with up to four float parameters taken
 * from attributes (alpha, beta, ...). */
typedef struct unary_params {
  double p[4];
} unary_params;

typedef double (*unary_f64)(double x, const unary_params *prm);

/* Applies f to every element of in[0] (any float type) into out[0]. */
static er_status run_float_unary(er_kctx *ctx, unary_f64 f, const unary_params *prm) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t n = er__count(x);
  switch (x->dtype) {
    case ER_DTYPE_FLOAT: {
      const float *a = x->data;
      float *b = y->data;
      for (int64_t i = 0; i < n; i++) b[i] = (float)f(a[i], prm);
      break;
    }
    case ER_DTYPE_DOUBLE: {
      const double *a = x->data;
      double *b = y->data;
      for (int64_t i = 0; i < n; i++) b[i] = f(a[i], prm);
      break;
    }
    default:
      for (int64_t i = 0; i < n; i++)
        er__store_f64(y->data, y->dtype, i, f(er__load_f64(x->data, x->dtype, i), prm));
  }
  return ER_STATUS_OK;
}

/* check() for ops whose output has the input's type and shape and whose
 * input must be one of `types`. */
static er_status check_same(er_kctx *ctx, const er_dtype *types) {
  ER_CHECK(er__require_type(ctx, 0, types));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Relu                                                                      */
/* ======================================================================== */

static er_status relu_check(er_kctx *ctx) { return check_same(ctx, er__types_signed); }

static double relu_f(double x, const unary_params *prm) {
  ER_UNUSED(prm);
  return x > 0 ? x : (x == x ? 0.0 : x); /* NaN passes through */
}

static er_status relu_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  if (er__dtype_is_float(x->dtype)) return run_float_unary(ctx, relu_f, NULL);
  /* Signed integers (opset 14+). */
  int64_t n = er__count(x);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = er__load_i64(x->data, x->dtype, i);
    er__store_i64(ctx->out[0]->data, x->dtype, i, v > 0 ? v : 0);
  }
  return ER_STATUS_OK;
}

static const er_op_def op_relu = {
    .name = "Relu", .domain = "", .min_version = 6, .max_version = 14,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = relu_check, .run = relu_run,
};

const er_op_def *const er__ops_unary[] = {
    &op_relu,
    NULL,
};
