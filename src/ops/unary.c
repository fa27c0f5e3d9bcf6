/* unary.c - elementwise operators with one input: math functions,
 * activations, predicates, Clip, Cast and CastLike.
 *
 * Reference kernels compute float types in double precision and round once
 * on store, so they are at least as accurate as any float32 implementation
 * they are compared with. Integer inputs never travel through double where
 * the result is an integer (int64 values above 2^53 would lose bits).
 *
 * Type rule: check() accepts the union of the types that any implemented
 * schema version allows (e.g. bfloat16 also at versions before it was
 * listed), because the computation is the same for every version and a
 * model that the ONNX checker accepts is always accepted here. */
#include <stdio.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

/* A float function of one value with up to four parameters taken from
 * attributes (alpha, beta, ...). */
typedef struct unary_params {
  double p[4];
} unary_params;

typedef double (*unary_f64)(double x, const unary_params *prm);

/* Magnitude m (an integer) rounded to odd into float's 24-bit significand. */
static float u64_to_f32_odd(uint64_t m) {
  int width = 64 - (m ? __builtin_clzll(m) : 64);
  if (width <= 24) return (float)m;
  int shift = width - 24;
  uint64_t top = m >> shift;
  if (m & ((UINT64_C(1) << shift) - 1)) top |= 1;
  return ldexpf((float)top, shift); /* exact: top has 24 bits */
}

/* Applies f to every element of in[0] (any float type) into out[0].
 * Always inlined so that each caller's constant f becomes a direct, inlined
 * call in the typed loops rather than a call through a pointer. */
static inline __attribute__((always_inline)) er_status
run_float_unary(er_kctx *ctx, unary_f64 f, const unary_params *prm) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t n = er__count(x);
  switch (x->dtype) {
    case ER_DTYPE_FLOAT: {
      const float *a = x->data; /* [n] */
      float *b = y->data;       /* [n] */
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

/* check() for ops with a bool output of the input's shape. */
static er_status check_to_bool(er_kctx *ctx, const er_dtype *types) {
  ER_CHECK(er__require_type(ctx, 0, types));
  const er_tensor *x = ctx->in[0];
  er__set_output(ctx, 0, ER_DTYPE_BOOL, x->rank, x->dims);
  return ER_STATUS_OK;
}

static er_status check_float(er_kctx *ctx) { return check_same(ctx, er__types_float); }

static bool is_unsigned(er_dtype t) {
  return t == ER_DTYPE_UINT8 || t == ER_DTYPE_UINT16 || t == ER_DTYPE_UINT32 ||
         t == ER_DTYPE_UINT64 || t == ER_DTYPE_UINT4 || t == ER_DTYPE_BOOL;
}

/* Reads a float attribute into a double parameter. */
static er_status attr_param(const er_kctx *ctx, const char *name, float def, double *out) {
  float v;
  ER_CHECK(er__attr_float(ctx, name, def, &v));
  *out = v;
  return ER_STATUS_OK;
}

/* Round half to even without depending on the floating-point environment
 * (a library must not assume the caller left it at round-to-nearest). */
static double round_half_even(double x) {
  if (!(fabs(x) < 4503599627370496.0)) return x; /* >= 2^52 (already integral), inf, NaN */
  double r = floor(x);
  double d = x - r; /* exact: r and x are within one unit */
  if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
  return r == 0.0 ? copysign(0.0, x) : r;
}

static double sigmoid_d(double x) {
  /* Both branches avoid exp overflow. */
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

/* log(1 + exp(x)) without overflow for large x. */
static double softplus_d(double x) {
  if (x > 0) return x + log1p(exp(-x));
  return log1p(exp(x));
}

/* ======================================================================== */
/* Float math functions: Ceil .. Tanh                                        */
/* ======================================================================== */

/* Each op: its function, its run(), its def. All of them take and give
 * float16/bfloat16/float/double of the input's shape. */
#define FLOAT_OP(NAME, ONNX, LO, HI)                                            \
  static er_status NAME##_run(er_kctx *ctx) {                                   \
    return run_float_unary(ctx, NAME##_f, NULL);                                \
  }                                                                             \
  static const er_op_def op_##NAME = {                                          \
      .name = ONNX, .domain = "", .min_version = LO, .max_version = HI,         \
      .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,     \
      .check = check_float, .run = NAME##_run,                                  \
  };

/* Version 1 of the old ops differs only by the ignored legacy attribute
 * consumed_inputs, so they start at 1. */
static double ceil_f(double x, const unary_params *p) { ER_UNUSED(p); return ceil(x); }
FLOAT_OP(ceil, "Ceil", 1, 13)
static double floor_f(double x, const unary_params *p) { ER_UNUSED(p); return floor(x); }
FLOAT_OP(floor, "Floor", 1, 13)
static double round_f(double x, const unary_params *p) { ER_UNUSED(p); return round_half_even(x); }
FLOAT_OP(round, "Round", 11, 22)
static double sqrt_f(double x, const unary_params *p) { ER_UNUSED(p); return sqrt(x); }
FLOAT_OP(sqrt, "Sqrt", 1, 13)
static double reciprocal_f(double x, const unary_params *p) { ER_UNUSED(p); return 1.0 / x; }
FLOAT_OP(reciprocal, "Reciprocal", 1, 13)
static double exp_f(double x, const unary_params *p) { ER_UNUSED(p); return exp(x); }
FLOAT_OP(exp, "Exp", 1, 13)
static double log_f(double x, const unary_params *p) { ER_UNUSED(p); return log(x); }
FLOAT_OP(log, "Log", 1, 13)
static double sin_f(double x, const unary_params *p) { ER_UNUSED(p); return sin(x); }
FLOAT_OP(sin, "Sin", 7, 22)
static double cos_f(double x, const unary_params *p) { ER_UNUSED(p); return cos(x); }
FLOAT_OP(cos, "Cos", 7, 22)
static double tan_f(double x, const unary_params *p) { ER_UNUSED(p); return tan(x); }
FLOAT_OP(tan, "Tan", 7, 22)
static double asin_f(double x, const unary_params *p) { ER_UNUSED(p); return asin(x); }
FLOAT_OP(asin, "Asin", 7, 22)
static double acos_f(double x, const unary_params *p) { ER_UNUSED(p); return acos(x); }
FLOAT_OP(acos, "Acos", 7, 22)
static double atan_f(double x, const unary_params *p) { ER_UNUSED(p); return atan(x); }
FLOAT_OP(atan, "Atan", 7, 22)
static double sinh_f(double x, const unary_params *p) { ER_UNUSED(p); return sinh(x); }
FLOAT_OP(sinh, "Sinh", 9, 22)
static double cosh_f(double x, const unary_params *p) { ER_UNUSED(p); return cosh(x); }
FLOAT_OP(cosh, "Cosh", 9, 22)
static double asinh_f(double x, const unary_params *p) { ER_UNUSED(p); return asinh(x); }
FLOAT_OP(asinh, "Asinh", 9, 22)
static double acosh_f(double x, const unary_params *p) { ER_UNUSED(p); return acosh(x); }
FLOAT_OP(acosh, "Acosh", 9, 22)
static double atanh_f(double x, const unary_params *p) { ER_UNUSED(p); return atanh(x); }
FLOAT_OP(atanh, "Atanh", 9, 22)
static double tanh_f(double x, const unary_params *p) { ER_UNUSED(p); return tanh(x); }
FLOAT_OP(tanh, "Tanh", 1, 13)
static double sigmoid_f(double x, const unary_params *p) { ER_UNUSED(p); return sigmoid_d(x); }
FLOAT_OP(sigmoid, "Sigmoid", 1, 13)
static double softplus_f(double x, const unary_params *p) { ER_UNUSED(p); return softplus_d(x); }
FLOAT_OP(softplus, "Softplus", 1, 22)
static double softsign_f(double x, const unary_params *p) { ER_UNUSED(p); return x / (1.0 + fabs(x)); }
FLOAT_OP(softsign, "Softsign", 1, 22)
static double mish_f(double x, const unary_params *p) { ER_UNUSED(p); return x * tanh(softplus_d(x)); }
FLOAT_OP(mish, "Mish", 18, 22)
/* HardSwish is HardSigmoid with alpha 1/6, beta 0.5, times x. NaN passes. */
static double hardswish_f(double x, const unary_params *p) {
  ER_UNUSED(p);
  double s = x / 6.0 + 0.5;
  return x * (s < 0 ? 0.0 : s > 1 ? 1.0 : s);
}
FLOAT_OP(hardswish, "HardSwish", 14, 22)

/* ======================================================================== */
/* Ops that also take integers: Abs, Neg, Sign, Erf, Relu                     */
/* ======================================================================== */

/* Integer kernels run in int64 with two's complement wrap on store (so
 * Abs/Neg of the most negative value give it back, as in C and numpy). */

static double abs_f(double x, const unary_params *p) { ER_UNUSED(p); return fabs(x); }

static er_status abs_check(er_kctx *ctx) { return check_same(ctx, er__types_numeric); }

static er_status abs_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t n = er__count(x);
  if (er__dtype_is_float(x->dtype)) return run_float_unary(ctx, abs_f, NULL);
  if (is_unsigned(x->dtype)) {
    if (n > 0) memcpy(y->data, x->data, (size_t)n * er_dtype_size(x->dtype));
    return ER_STATUS_OK;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t v = er__load_i64(x->data, x->dtype, i);
    er__store_i64(y->data, y->dtype, i, v < 0 ? (int64_t)(0 - (uint64_t)v) : v);
  }
  return ER_STATUS_OK;
}

static const er_op_def op_abs = {
    .name = "Abs", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = abs_check, .run = abs_run,
};

static double neg_f(double x, const unary_params *p) { ER_UNUSED(p); return -x; }

static er_status neg_check(er_kctx *ctx) { return check_same(ctx, er__types_signed); }

static er_status neg_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  if (er__dtype_is_float(x->dtype)) return run_float_unary(ctx, neg_f, NULL);
  int64_t n = er__count(x);
  if (x->dtype == ER_DTYPE_INT64) {
    const int64_t *a = x->data;
    int64_t *b = y->data;
    for (int64_t i = 0; i < n; i++) b[i] = (int64_t)(0 - (uint64_t)a[i]);
    return ER_STATUS_OK;
  }
  for (int64_t i = 0; i < n; i++)
    er__store_i64(y->data, y->dtype, i, (int64_t)(0 - (uint64_t)er__load_i64(x->data, x->dtype, i)));
  return ER_STATUS_OK;
}

static const er_op_def op_neg = {
    .name = "Neg", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = neg_check, .run = neg_run,
};

/* Sign of NaN is NaN, of zero is zero (numpy's rule). */
static double sign_f(double x, const unary_params *p) {
  ER_UNUSED(p);
  return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
}

static er_status sign_check(er_kctx *ctx) { return check_same(ctx, er__types_numeric); }

static er_status sign_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  if (er__dtype_is_float(x->dtype)) return run_float_unary(ctx, sign_f, NULL);
  int64_t n = er__count(x);
  bool uns = is_unsigned(x->dtype);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = er__load_i64(x->data, x->dtype, i);
    /* uint64 values above INT64_MAX load as negative int64: test != 0. */
    int64_t s = uns ? (v != 0) : (v > 0) - (v < 0);
    er__store_i64(y->data, y->dtype, i, s);
  }
  return ER_STATUS_OK;
}

static const er_op_def op_sign = {
    .name = "Sign", .domain = "", .min_version = 9, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = sign_check, .run = sign_run,
};

static double erf_f(double x, const unary_params *p) { ER_UNUSED(p); return erf(x); }

/* Erf-9 also lists integer types; the result is erf(x) truncated toward
 * zero into the input type (so -1, 0 or 1). */
static er_status erf_check(er_kctx *ctx) { return check_same(ctx, er__types_numeric); }

static er_status erf_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  if (er__dtype_is_float(x->dtype)) return run_float_unary(ctx, erf_f, NULL);
  int64_t n = er__count(x);
  bool uns = is_unsigned(x->dtype);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = er__load_i64(x->data, x->dtype, i);
    double d = uns ? (double)(uint64_t)v : (double)v;
    er__store_i64(y->data, y->dtype, i, (int64_t)erf(d));
  }
  return ER_STATUS_OK;
}

static const er_op_def op_erf = {
    .name = "Erf", .domain = "", .min_version = 9, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = erf_check, .run = erf_run,
};

/* ---- Relu ---------------------------------------------------------------- */

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
    .name = "Relu", .domain = "", .min_version = 1, .max_version = 14,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = relu_check, .run = relu_run,
};

/* ======================================================================== */
/* Activations with attributes                                               */
/* ======================================================================== */

/* ---- LeakyRelu: x < 0 ? alpha * x : x ------------------------------------ */

static double leakyrelu_f(double x, const unary_params *prm) { return x < 0 ? prm->p[0] * x : x; }

static er_status leakyrelu_run(er_kctx *ctx) {
  unary_params prm = {{0}};
  ER_CHECK(attr_param(ctx, "alpha", 0.01f, &prm.p[0]));
  return run_float_unary(ctx, leakyrelu_f, &prm);
}

static er_status leakyrelu_check(er_kctx *ctx) {
  double alpha;
  ER_CHECK(attr_param(ctx, "alpha", 0.01f, &alpha));
  return check_float(ctx);
}

static const er_op_def op_leakyrelu = {
    .name = "LeakyRelu", .domain = "", .min_version = 1, .max_version = 16,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = leakyrelu_check, .run = leakyrelu_run,
};

/* ---- Elu: x < 0 ? alpha * (exp(x) - 1) : x ------------------------------- */

static double elu_f(double x, const unary_params *prm) { return x < 0 ? prm->p[0] * expm1(x) : x; }

static er_status elu_check(er_kctx *ctx) {
  double alpha;
  ER_CHECK(attr_param(ctx, "alpha", 1.0f, &alpha));
  return check_float(ctx);
}

static er_status elu_run(er_kctx *ctx) {
  unary_params prm = {{0}};
  ER_CHECK(attr_param(ctx, "alpha", 1.0f, &prm.p[0]));
  return run_float_unary(ctx, elu_f, &prm);
}

static const er_op_def op_elu = {
    .name = "Elu", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = elu_check, .run = elu_run,
};

/* ---- Selu: gamma * (x > 0 ? x : alpha * (exp(x) - 1)) --------------------- */

/* Selu-1 had rounder defaults than Selu-6 and later. */
static er_status selu_params(const er_kctx *ctx, unary_params *prm) {
  bool v1 = ctx->node->version < 6;
  ER_CHECK(attr_param(ctx, "alpha", v1 ? 1.673200011253357f : 1.6732631921768188f, &prm->p[0]));
  ER_CHECK(attr_param(ctx, "gamma", v1 ? 1.0506999492645264f : 1.0507010221481323f, &prm->p[1]));
  return ER_STATUS_OK;
}

static double selu_f(double x, const unary_params *prm) {
  return prm->p[1] * (x > 0 ? x : prm->p[0] * expm1(x));
}

static er_status selu_check(er_kctx *ctx) {
  unary_params prm;
  ER_CHECK(selu_params(ctx, &prm));
  return check_float(ctx);
}

static er_status selu_run(er_kctx *ctx) {
  unary_params prm = {{0}};
  ER_CHECK(selu_params(ctx, &prm));
  return run_float_unary(ctx, selu_f, &prm);
}

static const er_op_def op_selu = {
    .name = "Selu", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = selu_check, .run = selu_run,
};

/* ---- Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) --------------- */

static er_status celu_params(const er_kctx *ctx, unary_params *prm) {
  ER_CHECK(attr_param(ctx, "alpha", 1.0f, &prm->p[0]));
  if (prm->p[0] == 0.0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "alpha is 0; Celu divides by alpha, so it must be nonzero");
  return ER_STATUS_OK;
}

static double celu_f(double x, const unary_params *prm) {
  if (x >= 0) return x;
  double a = prm->p[0];
  double v = a * expm1(x / a);
  return v < 0 ? v : (v == v ? 0.0 : v);
}

static er_status celu_check(er_kctx *ctx) {
  unary_params prm;
  ER_CHECK(celu_params(ctx, &prm));
  return check_float(ctx);
}

static er_status celu_run(er_kctx *ctx) {
  unary_params prm = {{0}};
  ER_CHECK(celu_params(ctx, &prm));
  return run_float_unary(ctx, celu_f, &prm);
}

static const er_op_def op_celu = {
    .name = "Celu", .domain = "", .min_version = 12, .max_version = 28,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = celu_check, .run = celu_run,
};

/* ---- HardSigmoid: max(0, min(1, alpha * x + beta)) ------------------------ */

static er_status hardsigmoid_params(const er_kctx *ctx, unary_params *prm) {
  ER_CHECK(attr_param(ctx, "alpha", 0.2f, &prm->p[0]));
  ER_CHECK(attr_param(ctx, "beta", 0.5f, &prm->p[1]));
  return ER_STATUS_OK;
}

static double hardsigmoid_f(double x, const unary_params *prm) {
  double v = prm->p[0] * x + prm->p[1];
  return v < 0 ? 0.0 : v > 1 ? 1.0 : v; /* NaN passes */
}

static er_status hardsigmoid_check(er_kctx *ctx) {
  unary_params prm;
  ER_CHECK(hardsigmoid_params(ctx, &prm));
  return check_float(ctx);
}

static er_status hardsigmoid_run(er_kctx *ctx) {
  unary_params prm = {{0}};
  ER_CHECK(hardsigmoid_params(ctx, &prm));
  return run_float_unary(ctx, hardsigmoid_f, &prm);
}

static const er_op_def op_hardsigmoid = {
    .name = "HardSigmoid", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = hardsigmoid_check, .run = hardsigmoid_run,
};

/* ---- ThresholdedRelu: x > alpha ? x : 0 ----------------------------------- */

static double thresholdedrelu_f(double x, const unary_params *prm) { return x > prm->p[0] ? x : 0.0; }

static er_status thresholdedrelu_check(er_kctx *ctx) {
  double alpha;
  ER_CHECK(attr_param(ctx, "alpha", 1.0f, &alpha));
  return check_float(ctx);
}

static er_status thresholdedrelu_run(er_kctx *ctx) {
  unary_params prm = {{0}};
  ER_CHECK(attr_param(ctx, "alpha", 1.0f, &prm.p[0]));
  return run_float_unary(ctx, thresholdedrelu_f, &prm);
}

static const er_op_def op_thresholdedrelu = {
    .name = "ThresholdedRelu", .domain = "", .min_version = 10, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = thresholdedrelu_check, .run = thresholdedrelu_run,
};

/* ---- Swish: x * sigmoid(alpha * x) ---------------------------------------- */

static double swish_f(double x, const unary_params *prm) { return x * sigmoid_d(prm->p[0] * x); }

static er_status swish_check(er_kctx *ctx) {
  double alpha;
  ER_CHECK(attr_param(ctx, "alpha", 1.0f, &alpha));
  return check_float(ctx);
}

static er_status swish_run(er_kctx *ctx) {
  unary_params prm = {{0}};
  ER_CHECK(attr_param(ctx, "alpha", 1.0f, &prm.p[0]));
  return run_float_unary(ctx, swish_f, &prm);
}

static const er_op_def op_swish = {
    .name = "Swish", .domain = "", .min_version = 24, .max_version = 24,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = swish_check, .run = swish_run,
};

/* ---- Gelu: approximate "none" (erf) or "tanh" ----------------------------- */

#define SQRT1_2 0.70710678118654752440     /* 1 / sqrt(2) */
#define SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi) */

static double gelu_f(double x, const unary_params *prm) {
  ER_UNUSED(prm);
  return 0.5 * x * (1.0 + erf(x * SQRT1_2));
}

static double gelu_tanh_f(double x, const unary_params *prm) {
  ER_UNUSED(prm);
  return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
}

/* *use_tanh: the approximate attribute is "tanh" (else "none"). */
static er_status gelu_mode(const er_kctx *ctx, bool *use_tanh) {
  const char *mode;
  ER_CHECK(er__attr_string(ctx, "approximate", "none", &mode));
  if (strcmp(mode, "none") != 0 && strcmp(mode, "tanh") != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "approximate is \"%s\"; it must be \"none\" or \"tanh\"", mode);
  *use_tanh = mode[0] == 't';
  return ER_STATUS_OK;
}

static er_status gelu_check(er_kctx *ctx) {
  bool use_tanh;
  ER_CHECK(gelu_mode(ctx, &use_tanh));
  return check_float(ctx);
}

static er_status gelu_run(er_kctx *ctx) {
  bool use_tanh = false;
  ER_CHECK(gelu_mode(ctx, &use_tanh));
  return use_tanh ? run_float_unary(ctx, gelu_tanh_f, NULL) : run_float_unary(ctx, gelu_f, NULL);
}

static const er_op_def op_gelu = {
    .name = "Gelu", .domain = "", .min_version = 20, .max_version = 20,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = gelu_check, .run = gelu_run,
};

/* ---- Shrink: x < -lambd ? x + bias : x > lambd ? x - bias : 0 ------------- */

static er_status shrink_params(const er_kctx *ctx, unary_params *prm) {
  ER_CHECK(attr_param(ctx, "lambd", 0.5f, &prm->p[0]));
  ER_CHECK(attr_param(ctx, "bias", 0.0f, &prm->p[1]));
  return ER_STATUS_OK;
}

static double shrink_f(double x, const unary_params *prm) {
  return x < -prm->p[0] ? x + prm->p[1] : x > prm->p[0] ? x - prm->p[1] : 0.0;
}

static er_status shrink_check(er_kctx *ctx) {
  unary_params prm;
  ER_CHECK(shrink_params(ctx, &prm));
  return check_same(ctx, er__types_numeric);
}

static er_status shrink_run(er_kctx *ctx) {
  unary_params prm = {{0}};
  ER_CHECK(shrink_params(ctx, &prm));
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  if (er__dtype_is_float(x->dtype)) return run_float_unary(ctx, shrink_f, &prm);
  /* Integers: with an integral bias the result is exact in int64 (wrapping);
   * otherwise x +- bias is computed in double and truncated toward zero. */
  int64_t n = er__count(x);
  bool uns = is_unsigned(x->dtype);
  double lambd = prm.p[0], bias = prm.p[1];
  bool exact = bias == trunc(bias) && fabs(bias) < 4.0e18;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = er__load_i64(x->data, x->dtype, i);
    double d = uns ? (double)(uint64_t)v : (double)v;
    int sgn = d < -lambd ? -1 : d > lambd ? 1 : 0;
    if (sgn == 0) continue; /* the output is zeroed */
    if (exact) {
      uint64_t b = (uint64_t)(int64_t)bias;
      er__store_i64(y->data, y->dtype, i, (int64_t)(sgn < 0 ? (uint64_t)v + b : (uint64_t)v - b));
    } else {
      er__store_f64(y->data, y->dtype, i, sgn < 0 ? d + bias : d - bias);
    }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_shrink = {
    .name = "Shrink", .domain = "", .min_version = 9, .max_version = 9,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = shrink_check, .run = shrink_run,
};

/* ======================================================================== */
/* Predicates and bitwise: IsInf, IsNaN, Not, BitwiseNot                     */
/* ======================================================================== */

static const er_dtype types_float_f8[] = {
    ER_DTYPE_FLOAT16,       ER_DTYPE_BFLOAT16,   ER_DTYPE_FLOAT,
    ER_DTYPE_DOUBLE,        ER_DTYPE_FLOAT8E4M3FN, ER_DTYPE_FLOAT8E4M3FNUZ,
    ER_DTYPE_FLOAT8E5M2,    ER_DTYPE_FLOAT8E5M2FNUZ, ER_DTYPE_UNDEFINED};
static const er_dtype types_bool[] = {ER_DTYPE_BOOL, ER_DTYPE_UNDEFINED};

static er_status isinf_flags(const er_kctx *ctx, bool *pos, bool *neg) {
  int64_t p, n;
  ER_CHECK(er__attr_int(ctx, "detect_positive", 1, &p));
  ER_CHECK(er__attr_int(ctx, "detect_negative", 1, &n));
  *pos = p != 0;
  *neg = n != 0;
  return ER_STATUS_OK;
}

static er_status isinf_check(er_kctx *ctx) {
  bool pos, neg;
  ER_CHECK(isinf_flags(ctx, &pos, &neg));
  return check_to_bool(ctx, types_float_f8);
}

static er_status isinf_run(er_kctx *ctx) {
  bool pos, neg;
  ER_CHECK(isinf_flags(ctx, &pos, &neg));
  const er_tensor *x = ctx->in[0];
  uint8_t *b = ctx->out[0]->data; /* bool [n] */
  int64_t n = er__count(x);
  for (int64_t i = 0; i < n; i++) {
    double v = er__load_f64(x->data, x->dtype, i);
    b[i] = isinf(v) && (v > 0 ? pos : neg);
  }
  return ER_STATUS_OK;
}

static const er_op_def op_isinf = {
    .name = "IsInf", .domain = "", .min_version = 10, .max_version = 20,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = isinf_check, .run = isinf_run,
};

static er_status isnan_check(er_kctx *ctx) { return check_to_bool(ctx, types_float_f8); }

static er_status isnan_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  uint8_t *b = ctx->out[0]->data; /* bool [n] */
  int64_t n = er__count(x);
  for (int64_t i = 0; i < n; i++) {
    double v = er__load_f64(x->data, x->dtype, i);
    b[i] = v != v;
  }
  return ER_STATUS_OK;
}

static const er_op_def op_isnan = {
    .name = "IsNaN", .domain = "", .min_version = 9, .max_version = 20,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = isnan_check, .run = isnan_run,
};

static er_status not_check(er_kctx *ctx) { return check_same(ctx, types_bool); }

static er_status not_run(er_kctx *ctx) {
  const uint8_t *a = ctx->in[0]->data;
  uint8_t *b = ctx->out[0]->data;
  int64_t n = er__count(ctx->in[0]);
  for (int64_t i = 0; i < n; i++) b[i] = !a[i];
  return ER_STATUS_OK;
}

static const er_op_def op_not = {
    .name = "Not", .domain = "", .min_version = 1, .max_version = 1,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = not_check, .run = not_run,
};

static er_status bitwisenot_check(er_kctx *ctx) { return check_same(ctx, er__types_int); }

static er_status bitwisenot_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t n = er__count(x);
  /* Complementing all 64 bits and wrapping on store complements exactly the
   * type's bits, for signed and unsigned types alike. */
  for (int64_t i = 0; i < n; i++)
    er__store_i64(y->data, y->dtype, i, ~er__load_i64(x->data, x->dtype, i));
  return ER_STATUS_OK;
}

static const er_op_def op_bitwisenot = {
    .name = "BitwiseNot", .domain = "", .min_version = 18, .max_version = 18,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = bitwisenot_check, .run = bitwisenot_run,
};

/* ======================================================================== */
/* Clip                                                                      */
/* ======================================================================== */

/* y = min(max(x, lo), hi): when lo > hi every element becomes hi (the spec's
 * rule). NaN inputs pass through. Bounds of integer types are compared in
 * their own signedness, so uint64 values above INT64_MAX clip correctly. */

typedef struct clip_bounds {
  bool has_lo, has_hi;
  double flo, fhi;   /* float types */
  int64_t ilo, ihi;  /* signed integer types (and unsigned below 2^63) */
  uint64_t ulo, uhi; /* unsigned integer types */
} clip_bounds;

static er_status clip_run_bounds(er_kctx *ctx, const clip_bounds *cb) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t n = er__count(x);
  if (x->dtype == ER_DTYPE_FLOAT) {
    const float *a = x->data; /* [n] */
    float *b = y->data;       /* [n] */
    /* The bounds are values of the input type, so comparing in float is exact. */
    float lo = cb->has_lo ? (float)cb->flo : -INFINITY, hi = cb->has_hi ? (float)cb->fhi : INFINITY;
    for (int64_t i = 0; i < n; i++) {
      float v = a[i];
      v = v < lo ? lo : v;
      b[i] = v > hi ? hi : v;
    }
  } else if (er__dtype_is_float(x->dtype)) {
    for (int64_t i = 0; i < n; i++) {
      double v = er__load_f64(x->data, x->dtype, i);
      if (cb->has_lo && v < cb->flo) v = cb->flo;
      if (cb->has_hi && v > cb->fhi) v = cb->fhi;
      er__store_f64(y->data, y->dtype, i, v);
    }
  } else if (x->dtype == ER_DTYPE_UINT64) {
    const uint64_t *a = x->data;
    uint64_t *b = y->data;
    for (int64_t i = 0; i < n; i++) {
      uint64_t v = a[i];
      if (cb->has_lo && v < cb->ulo) v = cb->ulo;
      if (cb->has_hi && v > cb->uhi) v = cb->uhi;
      b[i] = v;
    }
  } else {
    /* Every other integer type fits int64 without changing order. */
    for (int64_t i = 0; i < n; i++) {
      int64_t v = er__load_i64(x->data, x->dtype, i);
      if (cb->has_lo && v < cb->ilo) v = cb->ilo;
      if (cb->has_hi && v > cb->ihi) v = cb->ihi;
      er__store_i64(y->data, y->dtype, i, v);
    }
  }
  return ER_STATUS_OK;
}

/* ---- Clip 6 to 10: min and max attributes -------------------------------- */

static er_status clip6_bounds(const er_kctx *ctx, clip_bounds *cb) {
  memset(cb, 0, sizeof *cb);
  cb->has_lo = cb->has_hi = true;
  ER_CHECK(attr_param(ctx, "min", -3.402823466e+38f, &cb->flo));
  ER_CHECK(attr_param(ctx, "max", 3.402823466e+38f, &cb->fhi));
  return ER_STATUS_OK;
}

static er_status clip6_check(er_kctx *ctx) {
  clip_bounds cb;
  ER_CHECK(clip6_bounds(ctx, &cb));
  return check_float(ctx);
}

static er_status clip6_run(er_kctx *ctx) {
  clip_bounds cb;
  ER_CHECK(clip6_bounds(ctx, &cb));
  return clip_run_bounds(ctx, &cb);
}

static const er_op_def op_clip6 = {
    .name = "Clip", .domain = "", .min_version = 6, .max_version = 10,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = clip6_check, .run = clip6_run,
};

/* ---- Clip 11+: optional scalar inputs min and max ------------------------ */

static er_status clip11_check(er_kctx *ctx) {
  ER_CHECK(er__require_type(ctx, 0, er__types_numeric));
  for (int k = 1; k <= 2; k++) {
    const er_tensor *b = er__in(ctx, k);
    if (!b) continue;
    ER_CHECK(er__require_same_type(ctx, 0, k));
    /* The spec asks for scalars; a one-element tensor of any rank is taken
     * as one too, as other runtimes do. */
    int64_t count = er__tensor_count(b);
    if (count >= 0 && count != 1) {
      char buf[96];
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s has shape %s; it must be a scalar",
                          k == 1 ? "min" : "max", er__shape_str(b, buf, sizeof buf));
    }
  }
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status clip11_run(er_kctx *ctx) {
  clip_bounds cb;
  memset(&cb, 0, sizeof cb);
  er_dtype t = ctx->in[0]->dtype;
  const er_tensor *lo = er__in(ctx, 1), *hi = er__in(ctx, 2);
  if (lo) {
    cb.has_lo = true;
    if (er__dtype_is_float(t)) cb.flo = er__load_f64(lo->data, t, 0);
    else cb.ilo = er__load_i64(lo->data, t, 0);
    cb.ulo = (uint64_t)cb.ilo;
  }
  if (hi) {
    cb.has_hi = true;
    if (er__dtype_is_float(t)) cb.fhi = er__load_f64(hi->data, t, 0);
    else cb.ihi = er__load_i64(hi->data, t, 0);
    cb.uhi = (uint64_t)cb.ihi;
  }
  return clip_run_bounds(ctx, &cb);
}

static const er_op_def op_clip11 = {
    .name = "Clip", .domain = "", .min_version = 11, .max_version = 13,
    .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = clip11_check, .run = clip11_run,
};

/* ======================================================================== */
/* Cast and CastLike                                                         */
/* ======================================================================== */

/* Conversion rules (ONNX Cast; numpy astype where the spec leaves a choice):
 *  - float to float rounds to nearest even, once (also double to half or
 *    bfloat16, see er__f64_to_f32_odd); out of range gives infinity.
 *  - float to integer truncates toward zero. NaN gives 0, values beyond
 *    int64 saturate to its bounds, and the int64 result is then narrowed by
 *    keeping the low bits, so for every value within int32's range the
 *    result equals numpy's (float 300.5 to int8 is 44). The spec leaves
 *    NaN and out-of-range values undefined; numpy's own results there depend
 *    on the CPU, so we pick this well-defined rule.
 *  - integer to integer keeps the low bits (two's complement wrap); this
 *    includes int4/uint4 (float 9.0 to int4 is -7, as onnx's test data has).
 *  - anything to bool: nonzero (and NaN) is true. bool to numbers: 0 or 1.
 *  - to float8: round to nearest even on the float8 grid; with saturate
 *    (the default) out-of-range values and infinities become the largest
 *    finite value of the sign; without, they become NaN (or infinity for
 *    E5M2). Opset 19's table said FNUZ turns infinity into NaN even with
 *    saturate; opset 25 corrected that to FLT_MAX, which onnx's reference
 *    always implemented, so every version here saturates. */

/* double -> float8 with a single rounding (the core converter takes a
 * float, so rounding to the float8 grid happens here, in double). */
static uint8_t f64_to_f8(double d, er_dtype t, bool saturate) {
  bool fnuz = t == ER_DTYPE_FLOAT8E4M3FNUZ || t == ER_DTYPE_FLOAT8E5M2FNUZ;
  if (d != d) {
    /* NaN codes as onnx's reference (ml_dtypes) writes them: E5M2 uses the
     * quiet NaN 0x7e, E4M3FN 0x7f, both with the sign; FNUZ has only 0x80. */
    uint8_t sign = signbit(d) ? 0x80 : 0;
    if (fnuz) return 0x80;
    return (uint8_t)(sign | (t == ER_DTYPE_FLOAT8E5M2 ? 0x7e : 0x7f));
  }
  if (isinf(d)) return er__f32_to_f8((float)d, t, saturate);
  int mbits = (t == ER_DTYPE_FLOAT8E5M2 || t == ER_DTYPE_FLOAT8E5M2FNUZ) ? 2 : 3;
  int bias = t == ER_DTYPE_FLOAT8E4M3FN ? 7 : t == ER_DTYPE_FLOAT8E4M3FNUZ ? 8
           : t == ER_DTYPE_FLOAT8E5M2 ? 15 : 16;
  double a = fabs(d);
  int e;
  frexp(a, &e);
  e -= 1; /* a = 1.xxx * 2^e */
  if (e < 1 - bias) e = 1 - bias; /* subnormals share the smallest normal's quantum */
  double q = ldexp(1.0, e - mbits);
  double r = round_half_even(a / q) * q; /* exact scaling, one rounding */
  /* r lies on the float8 grid (or beyond its range), so converting it to
   * float is exact (or overflows to infinity, which is out of range too). */
  float rf = (float)r;
  return er__f32_to_f8(signbit(d) ? -rf : rf, t, saturate);
}

/* Float-to-integer truncation with the rule above (NaN 0, saturate at int64). */
static int64_t trunc_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

/* Stores a value read from a float tensor. */
static void cast_store_f64(void *data, er_dtype t, int64_t i, double v, bool saturate) {
  switch (t) {
    case ER_DTYPE_FLOAT:
    case ER_DTYPE_DOUBLE:
    case ER_DTYPE_FLOAT16:
    case ER_DTYPE_BFLOAT16: er__store_f64(data, t, i, v); return;
    case ER_DTYPE_FLOAT8E4M3FN:
    case ER_DTYPE_FLOAT8E4M3FNUZ:
    case ER_DTYPE_FLOAT8E5M2:
    case ER_DTYPE_FLOAT8E5M2FNUZ: ((uint8_t *)data)[i] = f64_to_f8(v, t, saturate); return;
    case ER_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; return;
    case ER_DTYPE_UINT64:
      /* Values in [2^63, 2^64) fit uint64 but not int64. */
      if (v >= 9.2233720368547758e18 && v < 1.8446744073709552e19) {
        ((uint64_t *)data)[i] = (uint64_t)v;
        return;
      }
      er__store_i64(data, t, i, trunc_to_i64(v));
      return;
    default: er__store_i64(data, t, i, trunc_to_i64(v)); return;
  }
}

/* Stores an integer value: `v` is the value's two's complement bits and
 * `uns` says whether they mean an unsigned 64-bit number (uint64 input). */
static void cast_store_int(void *data, er_dtype t, int64_t i, int64_t v, bool uns, bool saturate) {
  uint64_t mag = uns || v >= 0 ? (uint64_t)v : 0 - (uint64_t)v;
  bool neg = !uns && v < 0;
  switch (t) {
    case ER_DTYPE_FLOAT: ((float *)data)[i] = uns ? (float)(uint64_t)v : (float)v; return;
    case ER_DTYPE_DOUBLE: ((double *)data)[i] = uns ? (double)(uint64_t)v : (double)v; return;
    case ER_DTYPE_FLOAT16:
    case ER_DTYPE_BFLOAT16: {
      /* Round to odd into float first, for one correct rounding overall. */
      float f = u64_to_f32_odd(mag);
      f = neg ? -f : f;
      ((uint16_t *)data)[i] = t == ER_DTYPE_FLOAT16 ? er__f32_to_f16(f) : er__f32_to_bf16(f);
      return;
    }
    case ER_DTYPE_FLOAT8E4M3FN:
    case ER_DTYPE_FLOAT8E4M3FNUZ:
    case ER_DTYPE_FLOAT8E5M2:
    case ER_DTYPE_FLOAT8E5M2FNUZ: {
      /* Integers above 2^53 are far beyond every float8 range, so the
       * rounding of the double conversion cannot matter. */
      double d = uns ? (double)(uint64_t)v : (double)v;
      ((uint8_t *)data)[i] = f64_to_f8(d, t, saturate);
      return;
    }
    default: er__store_i64(data, t, i, v); return;
  }
}

/* Converts n elements of src (type st) into dst (type dt). */
void er__cast_elements(const void *src, er_dtype st, void *dst, er_dtype dt, int64_t n, bool saturate) {
  /* Same type: a copy, except that saturating E5M2 turns its infinities
   * into the largest finite value (the spec's table applies to every x, and
   * onnx's reference does it). */
  if (st == dt && !(dt == ER_DTYPE_FLOAT8E5M2 && saturate)) {
    if (n > 0) memcpy(dst, src, (size_t)n * er_dtype_size(st));
    return;
  }
  /* Typed loops for the conversions models use most. */
  if (st == ER_DTYPE_FLOAT && dt == ER_DTYPE_FLOAT16) {
    const float *a = src;
    uint16_t *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = er__f32_to_f16(a[i]);
    return;
  }
  if (st == ER_DTYPE_FLOAT16 && dt == ER_DTYPE_FLOAT) {
    const uint16_t *a = src;
    float *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = er__f16_to_f32(a[i]);
    return;
  }
  if (st == ER_DTYPE_INT64 && dt == ER_DTYPE_FLOAT) {
    const int64_t *a = src;
    float *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = (float)a[i];
    return;
  }
  if (st == ER_DTYPE_FLOAT && dt == ER_DTYPE_INT64) {
    const float *a = src;
    int64_t *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = trunc_to_i64(a[i]);
    return;
  }
  if (st == ER_DTYPE_INT32 && dt == ER_DTYPE_INT64) {
    const int32_t *a = src;
    int64_t *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = a[i];
    return;
  }
  if (st == ER_DTYPE_INT64 && dt == ER_DTYPE_INT32) {
    const int64_t *a = src;
    int32_t *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = (int32_t)(uint32_t)a[i];
    return;
  }
  if (st == ER_DTYPE_FLOAT && dt == ER_DTYPE_DOUBLE) {
    const float *a = src;
    double *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = a[i];
    return;
  }
  if (st == ER_DTYPE_DOUBLE && dt == ER_DTYPE_FLOAT) {
    const double *a = src;
    float *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = (float)a[i];
    return;
  }
  /* Integers to float: one rounding (to nearest even), as the generic
   * path's (float)(int64_t) gives; quantize_dynamic models cast every
   * integer convolution's int32 sums to float. */
  if (st == ER_DTYPE_INT32 && dt == ER_DTYPE_FLOAT) {
    const int32_t *a = src;
    float *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = (float)a[i];
    return;
  }
  if (st == ER_DTYPE_UINT8 && dt == ER_DTYPE_FLOAT) {
    const uint8_t *a = src;
    float *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = (float)a[i];
    return;
  }
  if (st == ER_DTYPE_BOOL && dt == ER_DTYPE_FLOAT) {
    const uint8_t *a = src;
    float *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = a[i] ? 1.0f : 0.0f;
    return;
  }
  /* Everything else, element by element: float sources (f8 included) as
   * double, which holds each of their values exactly; integer sources as
   * int64 bits. */
  if (er__dtype_is_float8(st)) {
    /* A float8 NaN keeps its sign bit through the conversion, as in onnx's
     * reference: the FNUZ NaN 0x80 is a "negative" NaN and becomes 0xff in
     * E4M3FN. The core loader gives every NaN the same sign. */
    const uint8_t *a = src;
    for (int64_t i = 0; i < n; i++) {
      double v = er__f8_to_f32(a[i], st);
      if (v != v) v = copysign((double)NAN, (a[i] & 0x80) ? -1.0 : 1.0);
      cast_store_f64(dst, dt, i, v, saturate);
    }
  } else if (er__dtype_is_float(st)) {
    for (int64_t i = 0; i < n; i++) cast_store_f64(dst, dt, i, er__load_f64(src, st, i), saturate);
  } else {
    bool uns = st == ER_DTYPE_UINT64;
    for (int64_t i = 0; i < n; i++) cast_store_int(dst, dt, i, er__load_i64(src, st, i), uns, saturate);
  }
}

/* Names of the TensorProto types past ER_DTYPE_FLOAT4E2M1 (newer than
 * edgerun's enum), for messages. */
static const char *onnx_type_name(int64_t t) {
  switch (t) {
    case 24: return "float8e8m0";
    case 25: return "uint2";
    case 26: return "int2";
    case 27: return "float6e2m3";
    case 28: return "float6e3m2";
    default: return (t >= 0 && t <= 23) ? er_dtype_name((er_dtype)t) : "unknown";
  }
}

/* Validates a target type code; UNSUPPORTED for types edgerun cannot hold. */
static er_status cast_target(const er_kctx *ctx, int64_t to, er_dtype *out) {
  if (to < 1 || to > 28)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "'to' is %lld, which is not an ONNX TensorProto data type (1 to 28)",
                        (long long)to);
  if (to > ER_DTYPE_FLOAT4E2M1 || !er__dtype_is_numeric((er_dtype)to))
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "casting to %s is not supported: edgerun cannot hold %s tensors",
                        onnx_type_name(to), onnx_type_name(to));
  *out = (er_dtype)to;
  return ER_STATUS_OK;
}

static er_status cast_source(const er_kctx *ctx, const er_tensor *x) {
  if (x->dtype != ER_DTYPE_UNDEFINED && !er__dtype_is_numeric(x->dtype))
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "casting from %s is not supported: edgerun cannot hold %s tensors",
                        er_dtype_name(x->dtype), er_dtype_name(x->dtype));
  return ER_STATUS_OK;
}

/* The saturate attribute (opset 19+; float8 targets only) and round_mode
 * (opset 24+; it only affects float8e8m0, which edgerun cannot hold, so it
 * is validated and otherwise unused). */
static er_status cast_options(const er_kctx *ctx, bool *saturate) {
  *saturate = true;
  if (ctx->node->version < 19) return ER_STATUS_OK;
  int64_t s;
  ER_CHECK(er__attr_int(ctx, "saturate", 1, &s));
  *saturate = s != 0;
  if (ctx->node->version >= 24) {
    const char *mode;
    ER_CHECK(er__attr_string(ctx, "round_mode", "up", &mode));
    if (strcmp(mode, "up") != 0 && strcmp(mode, "down") != 0 && strcmp(mode, "nearest") != 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "round_mode is \"%s\"; it must be \"up\", \"down\" or \"nearest\"", mode);
  }
  return ER_STATUS_OK;
}

static er_status cast_check(er_kctx *ctx) {
  const er_attr *a = er__node_attr(ctx->node, "to");
  if (!a) return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "required attribute 'to' is missing");
  int64_t to;
  er_dtype dt = ER_DTYPE_UNDEFINED;
  bool saturate;
  ER_CHECK(er__attr_int(ctx, "to", 0, &to));
  ER_CHECK(cast_target(ctx, to, &dt));
  ER_CHECK(cast_options(ctx, &saturate));
  const er_tensor *x = ctx->in[0];
  ER_CHECK(cast_source(ctx, x));
  er__set_output(ctx, 0, dt, x->rank, x->dims);
  return ER_STATUS_OK;
}

static er_status cast_run(er_kctx *ctx) {
  bool saturate;
  ER_CHECK(cast_options(ctx, &saturate));
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  er__cast_elements(x->data, x->dtype, y->data, y->dtype, er__count(x), saturate);
  return ER_STATUS_OK;
}

/* Cast-1 took 'to' as a string; 6 and later take the type code. */
static const er_op_def op_cast = {
    .name = "Cast", .domain = "", .min_version = 6, .max_version = 28,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = cast_check, .run = cast_run,
};

static er_status castlike_check(er_kctx *ctx) {
  bool saturate;
  ER_CHECK(cast_options(ctx, &saturate));
  const er_tensor *x = ctx->in[0], *like = er__in(ctx, 1);
  if (!like) return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "required input 1 (target_type) is missing");
  ER_CHECK(cast_source(ctx, x));
  if (like->dtype != ER_DTYPE_UNDEFINED && !er__dtype_is_numeric(like->dtype))
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "casting to %s is not supported: edgerun cannot hold %s tensors",
                        er_dtype_name(like->dtype), er_dtype_name(like->dtype));
  er__set_output(ctx, 0, like->dtype, x->rank, x->dims);
  return ER_STATUS_OK;
}

static const er_op_def op_castlike = {
    .name = "CastLike", .domain = "", .min_version = 15, .max_version = 25,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = castlike_check, .run = cast_run,
};

/* ======================================================================== */
/* Registration                                                              */
/* ======================================================================== */

const er_op_def *const er__ops_unary[] = {
    &op_abs, &op_neg, &op_sign, &op_erf, &op_relu,
    &op_ceil, &op_floor, &op_round, &op_sqrt, &op_reciprocal, &op_exp, &op_log,
    &op_sin, &op_cos, &op_tan, &op_asin, &op_acos, &op_atan,
    &op_sinh, &op_cosh, &op_asinh, &op_acosh, &op_atanh, &op_tanh,
    &op_sigmoid, &op_softplus, &op_softsign, &op_mish, &op_hardswish,
    &op_leakyrelu, &op_elu, &op_selu, &op_celu, &op_hardsigmoid, &op_thresholdedrelu,
    &op_swish, &op_gelu, &op_shrink,
    &op_isinf, &op_isnan, &op_not, &op_bitwisenot,
    &op_clip6, &op_clip11,
    &op_cast, &op_castlike,
    NULL,
};
