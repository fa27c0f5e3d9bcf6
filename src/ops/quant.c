/* quant.c - quantization operators: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and
 * QLinearConv.
 *
 * Numerical rules shared by the file:
 *  - Rounding to an integer is round-half-to-even, then saturation to the
 *    target type's range (never wrap-around), as the ONNX spec states.
 *  - Integer products and sums of the matmul/conv ops are exact: operands
 *    are 8-bit values minus 8-bit zero points (|v| <= 255), so every product
 *    fits in 17 bits and an int64 accumulator cannot overflow for any tensor
 *    edgerun can hold. Outputs of type int32 take the low 32 bits, which is
 *    what a wrapping int32 accumulator would give.
 *  - Requantization multipliers (a_scale * b_scale / y_scale) are computed
 *    in the scale type's precision, the product with the integer
 *    accumulator in double, like the ONNX reference implementation. */
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"
#include "ops/quant-impl.h"

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

/* Round half to even, independent of the floating-point environment. NaN
 * and infinities pass through. */
static double round_half_even(double v) {
  double r = floor(v);
  double frac = v - r; /* exact: v and floor(v) share the binade or frac is 0 */
  if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
  return r;
}

/* Rounds a double to the precision of float type t (float, f16, bf16) and
 * back. Used to reproduce arithmetic done in a narrower type: for +, -, *, /
 * rounding the exact double result once more is the same as doing the
 * operation in the narrow type, because double has more than twice the
 * mantissa bits plus two (the double rounding is innocuous). */
double er__oq_round_to(er_dtype t, double v) {
  switch (t) {
    case ER_DTYPE_FLOAT: return (float)v;
    case ER_DTYPE_FLOAT16: return er__f16_to_f32(er__f32_to_f16((float)v));
    case ER_DTYPE_BFLOAT16: return er__bf16_to_f32(er__f32_to_bf16((float)v));
    default: return v;
  }
}

/* Range of an integer quantized type; false for other types. */
bool er__oq_quant_int_range(er_dtype t, double *lo, double *hi) {
  switch (t) {
    case ER_DTYPE_INT8: *lo = -128; *hi = 127; return true;
    case ER_DTYPE_UINT8: *lo = 0; *hi = 255; return true;
    case ER_DTYPE_INT16: *lo = -32768; *hi = 32767; return true;
    case ER_DTYPE_UINT16: *lo = 0; *hi = 65535; return true;
    case ER_DTYPE_INT4: *lo = -8; *hi = 7; return true;
    case ER_DTYPE_UINT4: *lo = 0; *hi = 15; return true;
    default: return false;
  }
}

/* Rounds half to even and saturates into [lo, hi]. NaN has no magnitude and
 * maps to `nan_value` (the zero point, i.e. the representation of 0). */
int64_t er__oq_saturate_round(double v, double lo, double hi, double nan_value) {
  if (v != v) v = nan_value;
  double r = round_half_even(v);
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  return (int64_t)r;
}

/* Stores real value v into element i of a quantized tensor of type t:
 * integers round and saturate, float8 converts with `saturate`. */
void er__oq_store_quant(void *data, er_dtype t, int64_t i, double v, double zp, bool saturate) {
  double lo, hi;
  if (er__oq_quant_int_range(t, &lo, &hi))
    er__store_i64(data, t, i, er__oq_saturate_round(v, lo, hi, zp));
  else
    ((uint8_t *)data)[i] = er__f32_to_f8((float)v, t, saturate);
}

/* Reads every element of t as double into a new array of `count` values. */
static er_status load_all_f64(const er_kctx *ctx, const er_tensor *t, double **out, const char *what) {
  int64_t n = er__count(t);
  double *v = er__malloc((size_t)(n > 0 ? n : 1) * sizeof *v, what);
  if (!v) {
    er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  for (int64_t i = 0; i < n; i++) v[i] = er__load_f64(t->data, t->dtype, i);
  *out = v;
  return ER_STATUS_OK;
}

/* Names an ONNX TensorProto type number, including those edgerun cannot hold. */
static const char *onnx_type_name(int64_t v) {
  switch (v) {
    case 24: return "float8e8m0";
    case 25: return "uint2";
    case 26: return "int2";
    default:
      if (v >= 1 && v <= 23) return er_dtype_name((er_dtype)v);
      return "unknown";
  }
}

/* True when both shapes are fully known and equal. */
static bool same_known_shape(const er_tensor *a, const er_tensor *b) {
  if (!er__tensor_shape_known(a) || !er__tensor_shape_known(b) || a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

/* Requires input i, when present with a known shape, to hold one element. */
er_status er__oq_require_scalar_like(const er_kctx *ctx, int i, const char *name) {
  const er_tensor *t = er__in(ctx, i);
  if (!t || !er__tensor_shape_known(t)) return ER_STATUS_OK;
  if (er__tensor_count(t) != 1) {
    char buf[160];
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "%s has shape %s; it must hold one value (per-tensor quantization)", name,
                        er__shape_str(t, buf, sizeof buf));
  }
  return ER_STATUS_OK;
}

/* Requires input i, when present with a known shape, to be one value or a
 * 1-D tensor of `len` values (per output channel); len < 0 = unknown. */
er_status er__oq_require_scalar_or_vec(const er_kctx *ctx, int i, int64_t len, const char *name) {
  const er_tensor *t = er__in(ctx, i);
  if (!t || !er__tensor_shape_known(t)) return ER_STATUS_OK;
  int64_t n = er__tensor_count(t);
  if (n == 1) return ER_STATUS_OK;
  if (t->rank == 1 && (len < 0 || n == len)) return ER_STATUS_OK;
  char buf[160];
  return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                      "%s has shape %s; it must be a scalar or a 1-D tensor of one value per output "
                      "channel (%lld)",
                      name, er__shape_str(t, buf, sizeof buf), (long long)len);
}

/* ======================================================================== */
/* Quantization granularity (QuantizeLinear / DequantizeLinear)              */
/* ======================================================================== */

/* How a scale / zero-point tensor maps onto the elements of x. x is viewed
 * as [outer, axis_len, inner]; element (o, a, i) uses the parameter at
 * o * s_outer + (a / block) * s_axis + i * s_inner. Per-tensor: all strides
 * 0; per-axis: s_axis = 1, block = 1; blocked: the scale has x's shape with
 * the axis shrunk to ceil(axis_len / block). */
typedef struct qmap {
  int64_t outer, axis_len, inner;
  int64_t block;
  int64_t s_outer, s_axis, s_inner;
} qmap;

/* Validates the scale (input s_i) and zero point (input z_i) against x
 * (input x_i) for the given axis and block size, with whatever is known,
 * and fills *m when everything is known (at run time). allow_axis is false
 * for opset 10, where only per-tensor parameters exist. */
static er_status quant_layout(const er_kctx *ctx, int x_i, int s_i, int z_i, int64_t axis_attr,
                              int64_t block, bool allow_axis, qmap *m) {
  const er_tensor *x = ctx->in[x_i], *s = ctx->in[s_i], *z = er__in(ctx, z_i);
  char a[160], b[160];
  if (block < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "block_size %lld must be >= 0",
                        (long long)block);
  if (z && er__tensor_shape_known(z) && er__tensor_shape_known(s) && !same_known_shape(s, z) &&
      !(er__tensor_count(s) == 1 && er__tensor_count(z) == 1))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "zero point shape %s does not match scale shape %s; they must be equal",
                        er__shape_str(z, a, sizeof a), er__shape_str(s, b, sizeof b));
  m->outer = 1;
  m->axis_len = 1;
  m->inner = er__tensor_count(x);
  m->block = 1;
  m->s_outer = m->s_axis = m->s_inner = 0;
  if (s->rank < 0 || !er__tensor_shape_known(s)) return ER_STATUS_OK;
  if (er__tensor_count(s) == 1) return ER_STATUS_OK; /* per-tensor */
  if (!allow_axis)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "scale has shape %s; this opset allows only a scalar (per-tensor) scale",
                        er__shape_str(s, a, sizeof a));
  if (block == 0 && s->rank != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "scale has shape %s; without block_size it must be a scalar or 1-D "
                        "(per-axis)",
                        er__shape_str(s, a, sizeof a));
  if (x->rank < 0) return ER_STATUS_OK;
  int axis;
  ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, x->rank, &axis));
  if (block == 0) {
    if (x->dims[axis] >= 0 && s->dims[0] != x->dims[axis])
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "per-axis scale has %lld values but input dim %d (axis) is %lld",
                          (long long)s->dims[0], axis, (long long)x->dims[axis]);
  } else {
    if (s->rank != x->rank)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "blocked scale has shape %s but input has shape %s; ranks must match",
                          er__shape_str(s, a, sizeof a), er__shape_str(x, b, sizeof b));
    for (int d = 0; d < x->rank; d++) {
      int64_t xd = x->dims[d];
      if (xd < 0) continue;
      int64_t want = d == axis ? (xd + block - 1) / block : xd;
      if (s->dims[d] != want)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "blocked scale has shape %s but input %s with axis %d and block_size "
                            "%lld needs dim %d = %lld",
                            er__shape_str(s, a, sizeof a), er__shape_str(x, b, sizeof b), axis,
                            (long long)block, d, (long long)want);
    }
  }
  if (!er__tensor_shape_known(x)) return ER_STATUS_OK;
  m->outer = 1;
  for (int d = 0; d < axis; d++) m->outer *= x->dims[d];
  m->axis_len = x->dims[axis];
  m->inner = 1;
  for (int d = axis + 1; d < x->rank; d++) m->inner *= x->dims[d];
  if (block == 0) {
    m->s_axis = 1;
  } else {
    m->block = block;
    m->s_inner = 1;
    m->s_axis = m->inner;
    m->s_outer = s->dims[axis] * m->inner;
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* QuantizeLinear                                                            */
/* ======================================================================== */

/* Output types QuantizeLinear can produce at schema version v. */
static er_status quantize_out_type_ok(const er_kctx *ctx, er_dtype t, int v) {
  switch (t) {
    case ER_DTYPE_INT8:
    case ER_DTYPE_UINT8: return ER_STATUS_OK;
    case ER_DTYPE_FLOAT8E4M3FN:
    case ER_DTYPE_FLOAT8E4M3FNUZ:
    case ER_DTYPE_FLOAT8E5M2:
    case ER_DTYPE_FLOAT8E5M2FNUZ:
      if (v >= 19) return ER_STATUS_OK;
      break;
    case ER_DTYPE_INT16:
    case ER_DTYPE_UINT16:
    case ER_DTYPE_INT4:
    case ER_DTYPE_UINT4:
      if (v >= 21) return ER_STATUS_OK;
      break;
    case ER_DTYPE_FLOAT4E2M1:
      return er__op_error(ctx, ER_STATUS_UNSUPPORTED,
                          "quantizing to float4e2m1 is not supported (edgerun cannot hold that type)");
    default: break;
  }
  return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH,
                      "output type %s is not a quantized type of QuantizeLinear-%d", er_dtype_name(t),
                      v);
}

static const er_dtype quantize_x_types_10[] = {ER_DTYPE_FLOAT, ER_DTYPE_INT32, ER_DTYPE_UNDEFINED};
static const er_dtype quantize_x_types_19[] = {ER_DTYPE_FLOAT, ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16,
                                               ER_DTYPE_INT32, ER_DTYPE_UNDEFINED};

typedef struct quantize_attrs {
  int64_t axis, block, saturate, output_dtype, precision;
} quantize_attrs;

static er_status quantize_attrs_get(const er_kctx *ctx, quantize_attrs *qa) {
  ER_CHECK(er__attr_int(ctx, "axis", 1, &qa->axis));
  ER_CHECK(er__attr_int(ctx, "block_size", 0, &qa->block));
  ER_CHECK(er__attr_int(ctx, "saturate", 1, &qa->saturate));
  ER_CHECK(er__attr_int(ctx, "output_dtype", 0, &qa->output_dtype));
  ER_CHECK(er__attr_int(ctx, "precision", 0, &qa->precision));
  return ER_STATUS_OK;
}

static er_status quantize_check(er_kctx *ctx) {
  int v = ctx->node->version;
  const er_tensor *x = ctx->in[0], *zp = er__in(ctx, 2);
  quantize_attrs qa;
  qmap m;
  ER_CHECK(quantize_attrs_get(ctx, &qa));
  ER_CHECK(er__require_type(ctx, 0, v >= 19 ? quantize_x_types_19 : quantize_x_types_10));
  if (v >= 23) {
    const er_tensor *s = ctx->in[1];
    if (s->dtype != ER_DTYPE_UNDEFINED && s->dtype != ER_DTYPE_INT32)
      ER_CHECK(er__require_type(ctx, 1, scale_types_19));
  } else {
    ER_CHECK(er__require_type(ctx, 1, v >= 19 ? scale_types_19 : scale_types_10));
  }
  if (qa.precision != 0 && qa.precision != ER_DTYPE_FLOAT && qa.precision != ER_DTYPE_FLOAT16 &&
      qa.precision != ER_DTYPE_BFLOAT16 && qa.precision != ER_DTYPE_DOUBLE)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "precision %lld (%s) must be float, float16, bfloat16 or double",
                        (long long)qa.precision, onnx_type_name(qa.precision));
  if (qa.block > 0 && v < 21)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "block_size needs QuantizeLinear-21 or later (node is version %d)", v);

  /* Output type: the zero point's, else output_dtype, else uint8. */
  er_dtype out = ER_DTYPE_UINT8;
  if (qa.output_dtype != 0) {
    if (qa.output_dtype < 1 || qa.output_dtype > 23)
      return er__op_error(ctx, ER_STATUS_UNSUPPORTED,
                          "output_dtype %lld (%s) is not a type edgerun can hold",
                          (long long)qa.output_dtype, onnx_type_name(qa.output_dtype));
    out = (er_dtype)qa.output_dtype;
  }
  if (zp) {
    if (zp->dtype != ER_DTYPE_UNDEFINED && qa.output_dtype != 0 && zp->dtype != out)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "output_dtype %s does not match the zero point type %s",
                          er_dtype_name(out), er_dtype_name(zp->dtype));
    out = zp->dtype;
  }
  if (out != ER_DTYPE_UNDEFINED) ER_CHECK(quantize_out_type_ok(ctx, out, v));
  ER_CHECK(quant_layout(ctx, 0, 1, 2, qa.axis, qa.block, v >= 13, &m));
  er__set_output(ctx, 0, out, x->rank, x->dims);
  return ER_STATUS_OK;
}

static er_status quantize_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *s = ctx->in[1], *z = er__in(ctx, 2);
  er_tensor *y = ctx->out[0];
  quantize_attrs qa;
  qmap m;
  ER_CHECK(quantize_attrs_get(ctx, &qa));
  ER_CHECK(quant_layout(ctx, 0, 1, 2, qa.axis, qa.block, ctx->node->version >= 13, &m));
  /* The division runs in `precision`, else in the scale's type; an int32
   * scale (opset 23+) divides in double. */
  er_dtype prec = qa.precision ? (er_dtype)qa.precision : s->dtype;
  if (prec == ER_DTYPE_INT32) prec = ER_DTYPE_DOUBLE;
  bool saturate = qa.saturate != 0;
  double *sv = NULL, *zv = NULL;
  er_status st = load_all_f64(ctx, s, &sv, "quantization scales");
  if (st == ER_STATUS_OK && z) st = load_all_f64(ctx, z, &zv, "quantization zero points");
  if (st != ER_STATUS_OK) {
    free(sv);
    return st;
  }
  int64_t idx = 0;
  for (int64_t o = 0; o < m.outer; o++)
    for (int64_t a = 0; a < m.axis_len; a++) {
      int64_t pbase = o * m.s_outer + (a / m.block) * m.s_axis;
      for (int64_t i = 0; i < m.inner; i++, idx++) {
        int64_t p = pbase + i * m.s_inner;
        double xv = x->dtype == ER_DTYPE_FLOAT ? ((const float *)x->data)[idx]
                                               : er__load_f64(x->data, x->dtype, idx);
        double q = er__oq_round_to(prec, er__oq_round_to(prec, xv) / er__oq_round_to(prec, sv[p]));
        double zpv = zv ? zv[p] : 0.0;
        double lo, hi;
        if (er__oq_quant_int_range(y->dtype, &lo, &hi)) {
          /* Round the quotient first, then add the (integer) zero point. */
          double r = q != q ? 0.0 : round_half_even(q);
          er__store_i64(y->data, y->dtype, idx, er__oq_saturate_round(r + zpv, lo, hi, zpv));
        } else {
          er__oq_store_quant(y->data, y->dtype, idx, q + zpv, zpv, saturate);
        }
      }
    }
  free(sv);
  free(zv);
  return ER_STATUS_OK;
}

static const er_op_def op_quantize_linear = {
    .name = "QuantizeLinear", .domain = "", .min_version = 10, .max_version = 28,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = quantize_check, .run = quantize_run,
};

/* ======================================================================== */
/* DequantizeLinear                                                          */
/* ======================================================================== */

static er_status dequantize_in_type_ok(const er_kctx *ctx, er_dtype t, int v) {
  switch (t) {
    case ER_DTYPE_UNDEFINED:
    case ER_DTYPE_INT8:
    case ER_DTYPE_UINT8:
    case ER_DTYPE_INT32: return ER_STATUS_OK;
    case ER_DTYPE_FLOAT8E4M3FN:
    case ER_DTYPE_FLOAT8E4M3FNUZ:
    case ER_DTYPE_FLOAT8E5M2:
    case ER_DTYPE_FLOAT8E5M2FNUZ:
      if (v >= 19) return ER_STATUS_OK;
      break;
    case ER_DTYPE_INT16:
    case ER_DTYPE_UINT16:
    case ER_DTYPE_INT4:
    case ER_DTYPE_UINT4:
      if (v >= 21) return ER_STATUS_OK;
      break;
    case ER_DTYPE_FLOAT4E2M1:
      return er__op_error(ctx, ER_STATUS_UNSUPPORTED,
                          "dequantizing float4e2m1 is not supported (edgerun cannot hold that type)");
    default: break;
  }
  return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH,
                      "input type %s is not a quantized type of DequantizeLinear-%d",
                      er_dtype_name(t), v);
}

static er_status dequantize_check(er_kctx *ctx) {
  int v = ctx->node->version;
  const er_tensor *x = ctx->in[0], *s = ctx->in[1];
  int64_t axis, block, output_dtype;
  qmap m;
  ER_CHECK(er__attr_int(ctx, "axis", 1, &axis));
  ER_CHECK(er__attr_int(ctx, "block_size", 0, &block));
  ER_CHECK(er__attr_int(ctx, "output_dtype", 0, &output_dtype));
  ER_CHECK(dequantize_in_type_ok(ctx, x->dtype, v));
  ER_CHECK(er__require_type(ctx, 1, v >= 19 ? scale_types_19 : scale_types_10));
  if (er__in(ctx, 2)) {
    const er_tensor *z = ctx->in[2];
    /* A float8 zero point is accepted with any float8 input: only its value
     * (normally 0) matters. */
    if (!(er__dtype_is_float8(x->dtype) && er__dtype_is_float8(z->dtype)))
      ER_CHECK(er__require_same_type(ctx, 0, 2));
  }
  if (block > 0 && v < 21)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "block_size needs DequantizeLinear-21 or later (node is version %d)", v);
  er_dtype out = s->dtype;
  if (output_dtype != 0) {
    if (output_dtype != ER_DTYPE_FLOAT && output_dtype != ER_DTYPE_FLOAT16 &&
        output_dtype != ER_DTYPE_BFLOAT16)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "output_dtype %lld (%s) must be float, float16 or bfloat16",
                          (long long)output_dtype, onnx_type_name(output_dtype));
    out = (er_dtype)output_dtype;
  }
  ER_CHECK(quant_layout(ctx, 0, 1, 2, axis, block, v >= 13, &m));
  er__set_output(ctx, 0, out, x->rank, x->dims);
  return ER_STATUS_OK;
}

static er_status dequantize_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *s = ctx->in[1], *z = er__in(ctx, 2);
  er_tensor *y = ctx->out[0];
  int64_t axis, block;
  qmap m;
  ER_CHECK(er__attr_int(ctx, "axis", 1, &axis));
  ER_CHECK(er__attr_int(ctx, "block_size", 0, &block));
  ER_CHECK(quant_layout(ctx, 0, 1, 2, axis, block, ctx->node->version >= 13, &m));
  double *sv = NULL, *zv = NULL;
  er_status st = load_all_f64(ctx, s, &sv, "dequantization scales");
  if (st == ER_STATUS_OK && z) st = load_all_f64(ctx, z, &zv, "dequantization zero points");
  if (st != ER_STATUS_OK) {
    free(sv);
    return st;
  }
  bool int_x = er__dtype_is_int(x->dtype);
  int64_t idx = 0;
  for (int64_t o = 0; o < m.outer; o++)
    for (int64_t a = 0; a < m.axis_len; a++) {
      int64_t pbase = o * m.s_outer + (a / m.block) * m.s_axis;
      for (int64_t i = 0; i < m.inner; i++, idx++) {
        int64_t p = pbase + i * m.s_inner;
        double dx;
        if (int_x) /* exact: both are integers of at most 32 bits */
          dx = (double)(er__load_i64(x->data, x->dtype, idx) - (zv ? (int64_t)zv[p] : 0));
        else
          dx = er__load_f64(x->data, x->dtype, idx) - (zv ? zv[p] : 0.0);
        /* The multiplication runs in float (the widest output type); a
         * float16/bfloat16 output rounds the float product once. */
        float yv = (float)dx * (float)sv[p];
        if (y->dtype == ER_DTYPE_FLOAT)
          ((float *)y->data)[idx] = yv;
        else
          er__store_f64(y->data, y->dtype, idx, yv);
      }
    }
  free(sv);
  free(zv);
  return ER_STATUS_OK;
}

static const er_op_def op_dequantize_linear = {
    .name = "DequantizeLinear", .domain = "", .min_version = 10, .max_version = 28,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = dequantize_check, .run = dequantize_run,
};

/* ======================================================================== */
/* DynamicQuantizeLinear                                                     */
/* ======================================================================== */

static const er_dtype float_only[] = {ER_DTYPE_FLOAT, ER_DTYPE_UNDEFINED};

static er_status dynamic_quantize_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  ER_CHECK(er__require_type(ctx, 0, float_only));
  er__set_output(ctx, 0, ER_DTYPE_UINT8, x->rank, x->dims);
  er__set_output(ctx, 1, ER_DTYPE_FLOAT, 0, NULL);
  er__set_output(ctx, 2, ER_DTYPE_UINT8, 0, NULL);
  return ER_STATUS_OK;
}

void er__dynamic_qparams_u8(const float *x, int64_t n, float *scale_out, uint8_t *zp_out) {
  /* The range always includes 0 so that 0 is exactly representable. NaNs
   * are left out of the range. */
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
  }
  er__dynamic_qparams_range_u8(lo, hi, scale_out, zp_out);
}

void er__dynamic_qparams_range_u8(float lo, float hi, float *scale_out, uint8_t *zp_out) {
  /* All arithmetic is float, as the spec's function body computes it. An
   * all-zero input would give scale 0; use (1 / 255) like the ONNX
   * reference so that the output stays finite (every y is then 0). */
  float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  float zp_real = 0.0f - lo / scale;
  *scale_out = scale;
  *zp_out = (uint8_t)er__oq_saturate_round(zp_real, 0, 255, 0);
}

void er__quantize_u8(const float *x, int64_t n, float scale, uint8_t zp, uint8_t *y) {
  /* Below 2^22 in magnitude, adding and subtracting 1.5 * 2^23 rounds a
   * float to the nearest integer, ties to even, in the default rounding
   * mode: round_half_even without its floor and fmod per element, in a
   * loop the compiler vectorizes (a quantize_dynamic model runs 20-odd of
   * these per inference). Adding the zero point and clamping are exact in
   * float. NaN, infinities and larger quotients, which DynamicQuantizeLinear's
   * own scale never produces, take the plain loop. */
  const float magic = 12582912.0f, fz = (float)zp;
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float q = x[i] / scale;
    bad |= !(fabsf(q) < 4194304.0f);
    float r = ((q + magic) - magic) + fz;
    r = r < 0.0f ? 0.0f : r > 255.0f ? 255.0f : r;
    y[i] = (uint8_t)(int32_t)r;
  }
  if (!bad) return;
  for (int64_t i = 0; i < n; i++) {
    float q = x[i] / scale;
    double r = q != q ? 0.0 : round_half_even(q);
    y[i] = (uint8_t)er__oq_saturate_round(r + zp, 0, 255, zp);
  }
}

static er_status dynamic_quantize_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t n = er__count(x);
  float scale;
  uint8_t zp;
  er__dynamic_qparams_u8(x->data, n, &scale, &zp);
  er__quantize_u8(x->data, n, scale, zp, ctx->out[0]->data);
  if (er__out(ctx, 1)) *(float *)ctx->out[1]->data = scale;
  if (er__out(ctx, 2)) *(uint8_t *)ctx->out[2]->data = zp;
  return ER_STATUS_OK;
}

static const er_op_def op_dynamic_quantize_linear = {
    .name = "DynamicQuantizeLinear", .domain = "", .min_version = 11, .max_version = 11,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 3, .max_outputs = 3,
    .check = dynamic_quantize_check, .run = dynamic_quantize_run,
};

const er_op_def *const er__ops_quant[] = {
    &op_quantize_linear,
    &op_dequantize_linear,
    &op_dynamic_quantize_linear,
    &er__oq_op_matmul_integer,
    &er__oq_op_qlinear_matmul,
    &er__oq_op_conv_integer,
    &er__oq_op_qlinear_conv,
    NULL,
};
