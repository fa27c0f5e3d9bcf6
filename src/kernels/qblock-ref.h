/* qblock-ref.h - what qblock.c (layouts, geometry, dequantization, the
 * activation quantizers, the reference products and the kernel choice) and
 * qblock-quant.c (the weight quantizers) share: the rounding helpers and
 * the block geometry. */
#ifndef ER_KERNELS_QBLOCK_REF_H
#define ER_KERNELS_QBLOCK_REF_H

#include <float.h>
#include <math.h>
#include <stdatomic.h>

#include "kernels/kernel.h"
#include "kernels/qblock-impl.h"

#define QB_MIN(a, b) ((a) < (b) ? (a) : (b))

#define QB_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it is
 * all zeros to the K-quant searches. */
#define QB_GROUP_MAX_EPS 1e-15f

/* The 16 6-bit scales of a Q3_K super-block, minus 32: the low nibbles of
 * scales[0..7] then their high nibbles, each with two high bits from
 * scales[8 + j % 4] at bit 2 * (j / 4). */
void er__qbk_q3k_scales(const uint8_t *s, int sc[16]);

/* Q8_K (ggml's quantize_row_q8_K_ref): the first element of largest
 * magnitude maps to -127 exactly; ties round to even. An all-zero block
 * gets d = 0 and zero sums (ggml leaves its sums unwritten). */
void er__qbk_quant_q8_k(const float *x, er_block_q8_k *b, int64_t nb);

/* Elements per block of a type the reference converts (k is checked
 * against it: a caller that sized its rows with er__qb_row_bytes cannot
 * fail this). */
static inline int64_t block_elems(uint32_t type) {
  int64_t be = 0, bb = 0;
  ER_ASSERT(er__ggml_type_geometry(type, &be, &bb));
  return be;
}

static inline float h2f(uint16_t h) { return er__f16_to_f32(h); }

static inline uint16_t f2h(float f) { return er__f32_to_f16(f); }

/* Round to nearest, ties to even, for |f| <= 2^22 - 1: adding 1.5 * 2^23
 * leaves the integer in the low mantissa bits (ggml's nearest_int; the
 * same result as rintf in the default rounding mode, but it is the
 * operation ggml runs, so it is the one written here). */
static inline int nearest_int(float f) {
  float v = f + 12582912.f;
  int32_t i;
  memcpy(&i, &v, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

/* The largest magnitude of a block. */
static inline float absmax(const float *x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; j++) amax = QB_MAX(amax, fabsf(x[j]));
  return amax;
}

#endif /* ER_KERNELS_QBLOCK_REF_H */
