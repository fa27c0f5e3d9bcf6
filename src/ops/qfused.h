/* qfused.h - edgerun's integer operators (domain "com.edgerun"), made by the
 * QDQ pass (src/graph/passes-qdq.c) from DequantizeLinear -> op ->
 * QuantizeLinear patterns, so that a QDQ model runs in int8 from layer to
 * layer. Models never name these ops; every one has a reference kernel
 * (qfused.c), and the optimized kernels (src/kernels/quant.c)
 * are tested against it.
 *
 * Quantized tensors are uint8 or int8 with a per-tensor zero point. The
 * integer products are exact (int32 accumulators that wrap like the int32
 * of QLinearConv); what differs from the unfused QDQ graph is only where
 * floating-point rounding happens, and every op below states it.
 *
 *   QConv(X, x_zp, W, w_zp, B?, mult, offset, y_zp?) -> Y
 *     Conv's attributes. acc[n, m, p] = sum over the window of
 *     (x - x_zp)(w - w_zp[m]) (padding holds x_zp, i.e. real 0) plus B[m]
 *     (int32), wrapped to int32. v = fmaf((float)acc, mult[m], offset[m]).
 *     With y_zp (uint8/int8 scalar): Y = clamp(rhe(v) + y_zp, qmin, qmax),
 *     rhe = round half to even (QuantizeLinear's order: round, then add the
 *     zero point). Without y_zp, Y is float32: clamp(v, clip_min, clip_max).
 *     W is int8 or uint8 [M, C/group, k...]; w_zp is a scalar or [M];
 *     mult and offset are float32 [M] or [1].
 *   QMatMul(A, a_zp, B, b_zp, bias?, mult, offset, y_zp?) -> Y
 *     numpy matmul of A [..., M, K] (uint8/int8) and a 2-D B [K, N]
 *     (int8/uint8), per-column b_zp / bias / mult / offset ([N] or one
 *     value); the epilogue is QConv's with the column in place of m.
 *   QAdd / QMul(A, a_scale, a_zp, B, b_scale, b_zp, y_scale, y_zp) -> Y
 *     Broadcasting. Exactly the float arithmetic of DequantizeLinear,
 *     Add/Mul and QuantizeLinear: fa = (float)(a - a_zp) * a_scale, the
 *     float sum or product, rhe(s / y_scale) + y_zp clamped to [qmin, qmax]
 *     - bit-identical to the unfused graph.
 *   QLut(X, table) -> Y
 *     Y[i] = table[X[i]] (int8 X indexes table[X + 128]); table is 256
 *     values of Y's type, or [C, 256]: one table per channel (axis 1 of
 *     X). The pass computes the table by running the reference kernels of
 *     the pattern it replaces on all 256 inputs (of every channel), so the
 *     result is bit-identical to the unfused graph.
 *   QAvgPool(X, x_zp, mult, y_zp) -> Y
 *     AveragePool's attributes, or GlobalAveragePool when `global` = 1.
 *     avg = (float)(exact integer sum of (x - x_zp) / (double)count), as
 *     the float AveragePool computes it; Y = clamp(rhe(avg * mult) + y_zp).
 *   QBlockMatMul(A, B, scales, zp?, bias?) -> Y
 *     A float32 [..., M, K] times the dequantized 2-D B: B holds int4 or
 *     uint4 (or 8-bit) values in blocks of `block_size` along K
 *     (transB = 0: B is [K, N], scales [ceil(K / bs), N]; transB = 1: B is
 *     [N, K], scales [N, ceil(K / bs)]), dequantized as DequantizeLinear
 *     does ((float)(b - zp) * scale); float bias [N] added. Kernels
 *     dequantize block by block inside the product and never hold B in
 *     float.
 *
 * qmin / qmax (ints) default to the output type's range; the pass narrows
 * them to fold Relu (qmin = max(qmin, y_zp)) and Clip (the quantized
 * bounds), which is exact because quantization is monotonic. */
#ifndef ER_QFUSED_H
#define ER_QFUSED_H

#include <math.h>

#include "ops/op.h"

#define ER_QFUSED_DOMAIN "com.edgerun"

/* Round half to even of a float, saturated to +-2^30 (so that adding a
 * zero point cannot overflow), NaN -> 0. Independent of the floating-point
 * environment, like QuantizeLinear's reference. */
static inline int32_t er__q_rhe(float v) {
  if (v != v) return 0;
  if (v >= 1073741824.0f) return 1073741824;
  if (v <= -1073741824.0f) return -1073741824;
  float r = floorf(v);
  float frac = v - r; /* exact */
  int32_t i = (int32_t)r;
  if (frac > 0.5f || (frac == 0.5f && (i & 1))) i++;
  return i;
}

static inline int32_t er__q_clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The QConv / QMatMul epilogue for one accumulator (see above). */
static inline int32_t er__q_requant(int32_t acc, float mult, float offset, int32_t zp, int32_t lo, int32_t hi) {
  float v = fmaf((float)acc, mult, offset);
  return er__q_clamp(er__q_rhe(v) + zp, lo, hi);
}

/* Range of a quantized activation type (uint8 or int8). */
static inline void er__q_range(er_dtype t, int32_t *lo, int32_t *hi) {
  if (t == ER_DTYPE_INT8) {
    *lo = -128;
    *hi = 127;
  } else {
    *lo = 0;
    *hi = 255;
  }
}

/* The clamp attributes of a quantized-output op, validated against the
 * output type. */
er_status er__q_clamp_attrs(const er_kctx *ctx, er_dtype out, int32_t *lo, int32_t *hi);

#endif /* ER_QFUSED_H */
