/* quant-impl.h - what the files of the "quant" op group share (quant.c:
 * the shared machinery, QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear and the group table; quant-gemm.c: MatMulInteger,
 * QLinearMatMul, ConvInteger, QLinearConv): the helpers more than one uses
 * and the op definitions the table lists. */
#ifndef ER_OPS_QUANT_IMPL_H
#define ER_OPS_QUANT_IMPL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

static const er_dtype scale_types_10[] = {ER_DTYPE_FLOAT, ER_DTYPE_UNDEFINED};

static const er_dtype scale_types_19[] = {ER_DTYPE_FLOAT, ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16,
                                          ER_DTYPE_UNDEFINED};

/* Rounds a double to the precision of float type t (float, f16, bf16) and
 * back. Used to reproduce arithmetic done in a narrower type: for +, -, *, /
 * rounding the exact double result once more is the same as doing the
 * operation in the narrow type, because double has more than twice the
 * mantissa bits plus two (the double rounding is innocuous). */
double er__oq_round_to(er_dtype t, double v);

/* Range of an integer quantized type; false for other types. */
bool er__oq_quant_int_range(er_dtype t, double *lo, double *hi);

/* Rounds half to even and saturates into [lo, hi]. NaN has no magnitude and
 * maps to `nan_value` (the zero point, i.e. the representation of 0). */
int64_t er__oq_saturate_round(double v, double lo, double hi, double nan_value);

/* Stores real value v into element i of a quantized tensor of type t:
 * integers round and saturate, float8 converts with `saturate`. */
void er__oq_store_quant(void *data, er_dtype t, int64_t i, double v, double zp, bool saturate);

/* Requires input i, when present with a known shape, to hold one element. */
er_status er__oq_require_scalar_like(const er_kctx *ctx, int i, const char *name);

/* Requires input i, when present with a known shape, to be one value or a
 * 1-D tensor of `len` values (per output channel); len < 0 = unknown. */
er_status er__oq_require_scalar_or_vec(const er_kctx *ctx, int i, int64_t len, const char *name);

extern const er_op_def er__oq_op_matmul_integer;
extern const er_op_def er__oq_op_qlinear_matmul;
extern const er_op_def er__oq_op_conv_integer;
extern const er_op_def er__oq_op_qlinear_conv;

#endif /* ER_OPS_QUANT_IMPL_H */
