/* qblock.c - the block-quantized types in plain C: geometry, dequantize and
 * quantize rows, the activation quantizers, the reference products and the
 * choice of kernel. This file is the numerical truth the optimized kernels
 * (qblock-<isa>.c) are tested against.
 *
 * The quantizers follow ggml's reference quantizers (ggml-quants.c,
 * quantize_row_*_ref) operation by operation, in the same order and with the
 * same roundings, so a tensor edgerun writes is byte for byte what
 * llama.cpp writes from the same floats (without an importance matrix).
 * Two roundings recur and are kept apart on purpose:
 *  - nearest_int(): ggml's magic-number rounding (ties to even, for
 *    |x| < 2^22), used by the K-quants and by the activation formats;
 *  - roundf() (ties away from zero) and truncation of x + 0.5, used by the
 *    32-element formats' reference quantizers.
 * This file is built without -mfma and as ISO C (GCC then contracts no
 * a * b + c into a fused multiply-add), so every expression rounds as
 * written. The products compute what ggml's vec_dot_*_q8_*_generic do, in
 * their order: an exact integer dot product of the quants per block, then
 * the block's scales in float, so their results are the generic C's bit
 * for bit. (Checked against ggml's code compiled from the llama-cpp-python
 * source distribution, as were the quantizers, byte for byte, and the
 * activation quantizers against ggml's x86 ones. ggml's SIMD products sum
 * in other orders, as ours do, so CPU results agree to float rounding.) */
#include <float.h>
#include <math.h>
#include <stdatomic.h>

#include "kernels/kernel.h"
#include "kernels/qblock-impl.h"
#include "kernels/qblock-ref.h"

/* ======================================================================== */
/* Layouts                                                                   */
/* ======================================================================== */

/* ggml's sizes (ggml-common.h); a GGUF tensor is read in place, so these
 * must hold on every compiler. */
_Static_assert(sizeof(er_block_q4_0) == 18, "Q4_0 block must be 18 bytes (ggml's block_q4_0)");
_Static_assert(sizeof(er_block_q4_1) == 20, "Q4_1 block must be 20 bytes (ggml's block_q4_1)");
_Static_assert(sizeof(er_block_q5_0) == 22, "Q5_0 block must be 22 bytes (ggml's block_q5_0)");
_Static_assert(sizeof(er_block_q5_1) == 24, "Q5_1 block must be 24 bytes (ggml's block_q5_1)");
_Static_assert(sizeof(er_block_q8_0) == 34, "Q8_0 block must be 34 bytes (ggml's block_q8_0)");
_Static_assert(sizeof(er_block_q8_1) == 36, "Q8_1 block must be 36 bytes (ggml's block_q8_1)");
_Static_assert(sizeof(er_block_q2_k) == 84, "Q2_K block must be 84 bytes (ggml's block_q2_K)");
_Static_assert(sizeof(er_block_q3_k) == 110, "Q3_K block must be 110 bytes (ggml's block_q3_K)");
_Static_assert(sizeof(er_block_q4_k) == 144, "Q4_K block must be 144 bytes (ggml's block_q4_K)");
_Static_assert(sizeof(er_block_q5_k) == 176, "Q5_K block must be 176 bytes (ggml's block_q5_K)");
_Static_assert(sizeof(er_block_q6_k) == 210, "Q6_K block must be 210 bytes (ggml's block_q6_K)");
_Static_assert(sizeof(er_block_q8_k) == 292, "Q8_K block must be 292 bytes (ggml's block_q8_K)");
_Static_assert(offsetof(er_block_q5_0, qs) == 6 && offsetof(er_block_q5_1, qs) == 8, "Q5 quants follow qh");
_Static_assert(offsetof(er_block_q8_1, qs) == 4, "Q8_1 quants follow d and s");
_Static_assert(offsetof(er_block_q4_k, qs) == 16 && offsetof(er_block_q5_k, qs) == 48, "K-quant layout");
_Static_assert(offsetof(er_block_q6_k, d) == 208 && offsetof(er_block_q8_k, bsums) == 260, "K-quant layout");
_Static_assert(offsetof(er_block_q2_k, d) == 80 && offsetof(er_block_q3_k, d) == 108, "K-quant layout");

/* ======================================================================== */
/* Geometry                                                                  */
/* ======================================================================== */

size_t er__qb_row_bytes(uint32_t type, int64_t k) {
  int64_t be, bb;
  uint64_t bytes;
  if (k < 0 || !er__ggml_type_geometry(type, &be, &bb) || k % be != 0) return 0;
  if (!er__mul_u64((uint64_t)(k / be), (uint64_t)bb, &bytes) || bytes > SIZE_MAX) return 0;
  return (size_t)bytes;
}

bool er__qb_can_dequantize(uint32_t type) {
  switch (type) {
    case ER_GGML_F32: case ER_GGML_F16: case ER_GGML_BF16:
    case ER_GGML_Q4_0: case ER_GGML_Q4_1: case ER_GGML_Q5_0: case ER_GGML_Q5_1:
    case ER_GGML_Q8_0: case ER_GGML_Q8_1:
    case ER_GGML_Q2_K: case ER_GGML_Q3_K: case ER_GGML_Q4_K: case ER_GGML_Q5_K:
    case ER_GGML_Q6_K: case ER_GGML_Q8_K:
      return true;
    default:
      return false;
  }
}

bool er__qb_can_quantize(uint32_t type) {
  return er__qb_can_dequantize(type); /* the same list, both ways */
}

uint32_t er__qb_act_type(uint32_t wtype) {
  switch (wtype) {
    case ER_GGML_F32: case ER_GGML_F16: case ER_GGML_BF16:
      return ER_GGML_F32;
    case ER_GGML_Q4_0: case ER_GGML_Q5_0: case ER_GGML_Q8_0:
      return ER_GGML_Q8_0;
    case ER_GGML_Q4_1: case ER_GGML_Q5_1:
      return ER_GGML_Q8_1;
    case ER_GGML_Q2_K: case ER_GGML_Q3_K: case ER_GGML_Q4_K: case ER_GGML_Q5_K: case ER_GGML_Q6_K:
      return ER_GGML_Q8_K;
    default:
      return UINT32_MAX;
  }
}

size_t er__qb_act_row_bytes(uint32_t atype, int64_t k) {
  switch (atype) {
    case ER_GGML_F32: case ER_GGML_Q8_0: case ER_GGML_Q8_1: case ER_GGML_Q8_K:
      return er__qb_row_bytes(atype, k);
    default:
      return 0;
  }
}

/* ======================================================================== */
/* Rounding helpers                                                          */
/* ======================================================================== */

/* ======================================================================== */
/* Dequantize                                                                */
/* ======================================================================== */

/* The 6-bit scale and minimum of sub-block j (0..7) of a Q4_K / Q5_K
 * super-block: j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 in the
 * nibbles of byte j + 4 with their top two bits in the top bits of bytes
 * j - 4 and j. */
void er__qb_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

/* The 16 6-bit scales of a Q3_K super-block, minus 32: the low nibbles of
 * scales[0..7] then their high nibbles, each with two high bits from
 * scales[8 + j % 4] at bit 2 * (j / 4). */
void er__qbk_q3k_scales(const uint8_t *s, int sc[16]) {
  for (int j = 0; j < 16; j++) {
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    sc[j] = (lo | (hi << 4)) - 32;
  }
}

static void dequant_q4_0(const er_block_q4_0 *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, y += ER_QK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < ER_QK / 2; j++) {
      y[j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
      y[j + ER_QK / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

static void dequant_q4_1(const er_block_q4_1 *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, y += ER_QK) {
    const float d = h2f(b[i].d), m = h2f(b[i].m);
    for (int j = 0; j < ER_QK / 2; j++) {
      y[j] = (float)(b[i].qs[j] & 0xF) * d + m;
      y[j + ER_QK / 2] = (float)(b[i].qs[j] >> 4) * d + m;
    }
  }
}

/* Element j of a Q5 block: low nibble of qs[j] (j < 16) or high nibble of
 * qs[j - 16], and bit j of qh as the fifth bit. */
static int q5_quant(const uint8_t *qs, const uint8_t *qh4, int j) {
  uint32_t qh;
  memcpy(&qh, qh4, sizeof qh);
  int lo = j < ER_QK / 2 ? qs[j] & 0xF : qs[j - ER_QK / 2] >> 4;
  return lo | (int)(((qh >> j) & 1) << 4);
}

static void dequant_q5_0(const er_block_q5_0 *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, y += ER_QK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < ER_QK; j++) y[j] = (float)(q5_quant(b[i].qs, b[i].qh, j) - 16) * d;
  }
}

static void dequant_q5_1(const er_block_q5_1 *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, y += ER_QK) {
    const float d = h2f(b[i].d), m = h2f(b[i].m);
    for (int j = 0; j < ER_QK; j++) y[j] = (float)q5_quant(b[i].qs, b[i].qh, j) * d + m;
  }
}

static void dequant_q8_0(const er_block_q8_0 *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, y += ER_QK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < ER_QK; j++) y[j] = (float)b[i].qs[j] * d;
  }
}

static void dequant_q8_1(const er_block_q8_1 *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, y += ER_QK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < ER_QK; j++) y[j] = (float)b[i].qs[j] * d;
  }
}

/* Q2_K: 16 sub-blocks of 16; quants of 128 elements in 32 bytes, element
 * 32 * s + l (s = 0..3) in bits 2s of byte l. */
static void dequant_q2_k(const er_block_q2_k *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t *q = b[i].qs;
    int is = 0;
    for (int n = 0; n < ER_QK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; half++) {
          const uint8_t sc = b[i].scales[is++];
          const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
          for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
  }
}

/* Q3_K: the Q2_K quant layout, each quant less 4 where its hmask bit is
 * clear (bit s of hmask[l] for the s-th group of 32 elements). */
static void dequant_q3_k(const er_block_q3_k *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = h2f(b[i].d);
    int sc[16];
    er__qbk_q3k_scales(b[i].scales, sc);
    const uint8_t *q = b[i].qs;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < ER_QK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
        for (int half = 0; half < 2; half++) {
          const float dl = d * (float)sc[is++];
          for (int l = 16 * half; l < 16 * half + 16; l++) {
            int v = ((q[l] >> shift) & 3) - ((b[i].hmask[l] & m) ? 0 : 4);
            *y++ = dl * (float)v;
          }
        }
      }
    }
  }
}

/* Q4_K: 8 sub-blocks of 32; each 32 bytes of qs hold two sub-blocks, the
 * first in the low nibbles. */
static void dequant_q4_k(const er_block_q4_k *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t *q = b[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32) {
      uint8_t sc, m;
      er__qb_k4_scale_min(j, b[i].scales, &sc, &m);
      const float d1 = d * (float)sc, m1 = dmin * (float)m;
      er__qb_k4_scale_min(j + 1, b[i].scales, &sc, &m);
      const float d2 = d * (float)sc, m2 = dmin * (float)m;
      for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
  }
}

/* Q5_K: Q4_K's layout plus fifth bits, bit j of qh[l] for element
 * 32 * j + l. */
static void dequant_q5_k(const er_block_q5_k *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t *ql = b[i].qs, *qh = b[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 8; j += 2, ql += 32) {
      uint8_t sc, m;
      er__qb_k4_scale_min(j, b[i].scales, &sc, &m);
      const float d1 = d * (float)sc, m1 = dmin * (float)m;
      er__qb_k4_scale_min(j + 1, b[i].scales, &sc, &m);
      const float d2 = d * (float)sc, m2 = dmin * (float)m;
      for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      u1 = (uint8_t)(u1 << 2);
      u2 = (uint8_t)(u2 << 2);
    }
  }
}

/* The 6-bit quant of element e (0..255) of a Q6_K super-block, 0..63: per
 * 128 elements, 64 bytes of low nibbles (elements l and l + 64 in byte l,
 * l + 32 and l + 96 in byte l + 32) and 32 bytes of high bit pairs
 * (element l + 32 s in bits 2s of byte l). */
static int q6k_quant(const er_block_q6_k *b, int e) {
  const int half = e / 128, r = e % 128, l = r % 32, s = r / 32;
  const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
  const int lo = (s & 1 ? ql[l + 32] : ql[l]) >> (s & 2 ? 4 : 0) & 0xF;
  return lo | (((qh[l] >> (2 * s)) & 3) << 4);
}

static void dequant_q6_k(const er_block_q6_k *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, y += ER_QK_K) {
    const float d = h2f(b[i].d);
    for (int e = 0; e < ER_QK_K; e++) y[e] = d * (float)b[i].scales[e / 16] * (float)(q6k_quant(&b[i], e) - 32);
  }
}

static void dequant_q8_k(const er_block_q8_k *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, y += ER_QK_K) {
    for (int j = 0; j < ER_QK_K; j++) y[j] = b[i].d * (float)b[i].qs[j];
  }
}

void er__qb_dequantize_row(uint32_t type, const void *src, float *dst, int64_t k) {
  const int64_t nb = k / block_elems(type);
  ER_ASSERT(k >= 0 && k % block_elems(type) == 0);
  switch (type) {
    case ER_GGML_F32: memcpy(dst, src, (size_t)k * sizeof(float)); return;
    case ER_GGML_F16: {
      const uint16_t *h = src;
      for (int64_t i = 0; i < k; i++) dst[i] = h2f(h[i]);
      return;
    }
    case ER_GGML_BF16: {
      const uint16_t *h = src;
      for (int64_t i = 0; i < k; i++) dst[i] = er__bf16_to_f32(h[i]);
      return;
    }
    case ER_GGML_Q4_0: dequant_q4_0(src, dst, nb); return;
    case ER_GGML_Q4_1: dequant_q4_1(src, dst, nb); return;
    case ER_GGML_Q5_0: dequant_q5_0(src, dst, nb); return;
    case ER_GGML_Q5_1: dequant_q5_1(src, dst, nb); return;
    case ER_GGML_Q8_0: dequant_q8_0(src, dst, nb); return;
    case ER_GGML_Q8_1: dequant_q8_1(src, dst, nb); return;
    case ER_GGML_Q2_K: dequant_q2_k(src, dst, nb); return;
    case ER_GGML_Q3_K: dequant_q3_k(src, dst, nb); return;
    case ER_GGML_Q4_K: dequant_q4_k(src, dst, nb); return;
    case ER_GGML_Q5_K: dequant_q5_k(src, dst, nb); return;
    case ER_GGML_Q6_K: dequant_q6_k(src, dst, nb); return;
    case ER_GGML_Q8_K: dequant_q8_k(src, dst, nb); return;
    default: ER_ASSERT(!"er__qb_dequantize_row: type without a dequantizer (check er__qb_can_dequantize)");
  }
}

/* ======================================================================== */

/* ======================================================================== */
/* Activation quantizers                                                     */
/* ======================================================================== */

/* Q8_0 / Q8_1 activations as ggml's SIMD quantize_row_q8_0 / _q8_1 make
 * them (qblock-impl.h): id = 127 / amax rather than 1 / d, ties to even. */
static void act_q8_0(const float *x, er_block_q8_0 *b, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK) {
    const float amax = absmax(x, ER_QK);
    const float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    b[i].d = f2h(d);
    for (int j = 0; j < ER_QK; j++) b[i].qs[j] = (int8_t)nearest_int(x[j] * id);
  }
}

static void act_q8_1(const float *x, er_block_q8_1 *b, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += ER_QK) {
    const float amax = absmax(x, ER_QK);
    const float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    int sum = 0;
    b[i].d = f2h(d);
    for (int j = 0; j < ER_QK; j++) {
      b[i].qs[j] = (int8_t)nearest_int(x[j] * id);
      sum += b[i].qs[j];
    }
    b[i].s = f2h(d * (float)sum);
  }
}

void er__qb_quantize_act_ref(uint32_t atype, const float *x, int64_t ldx, int64_t n, int64_t k, void *xq,
                             size_t x_row_bytes) {
  for (int64_t t = 0; t < n; t++) {
    const float *xr = x + t * ldx;
    uint8_t *q = (uint8_t *)xq + (size_t)t * x_row_bytes;
    switch (atype) {
      case ER_GGML_F32: memcpy(q, xr, (size_t)k * sizeof(float)); break;
      case ER_GGML_Q8_0: ER_ASSERT(k % ER_QK == 0); act_q8_0(xr, (er_block_q8_0 *)q, k / ER_QK); break;
      case ER_GGML_Q8_1: ER_ASSERT(k % ER_QK == 0); act_q8_1(xr, (er_block_q8_1 *)q, k / ER_QK); break;
      case ER_GGML_Q8_K: ER_ASSERT(k % ER_QK_K == 0); er__qbk_quant_q8_k(xr, (er_block_q8_k *)q, k / ER_QK_K); break;
      default: ER_ASSERT(!"er__qb_quantize_act: not an activation format");
    }
  }
}

/* ======================================================================== */
/* Reference products                                                        */
/* ======================================================================== */

/* One dot product of a weight row and an activation row, k elements. */
typedef float (*row_dot_fn)(const void *w, const void *x, int64_t k);

/* The float weight types against float activations: products summed in
 * double (each float * float product is exact in double), rounded once. */
static float dot_f32(const void *w, const void *x, int64_t k) {
  const float *a = w, *b = x;
  double s = 0;
  for (int64_t i = 0; i < k; i++) s += (double)a[i] * (double)b[i];
  return (float)s;
}

static float dot_f16(const void *w, const void *x, int64_t k) {
  const uint16_t *a = w;
  const float *b = x;
  double s = 0;
  for (int64_t i = 0; i < k; i++) s += (double)h2f(a[i]) * (double)b[i];
  return (float)s;
}

static float dot_bf16(const void *w, const void *x, int64_t k) {
  const uint16_t *a = w;
  const float *b = x;
  double s = 0;
  for (int64_t i = 0; i < k; i++) s += (double)er__bf16_to_f32(a[i]) * (double)b[i];
  return (float)s;
}

static float dot_q4_0(const void *w, const void *x, int64_t k) {
  const er_block_q4_0 *a = w;
  const er_block_q8_0 *b = x;
  float sumf = 0;
  for (int64_t i = 0; i < k / ER_QK; i++) {
    int sumi = 0;
    for (int j = 0; j < ER_QK / 2; j++) {
      sumi += ((a[i].qs[j] & 0xF) - 8) * b[i].qs[j];
      sumi += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + ER_QK / 2];
    }
    sumf += (float)sumi * h2f(a[i].d) * h2f(b[i].d);
  }
  return sumf;
}

static float dot_q4_1(const void *w, const void *x, int64_t k) {
  const er_block_q4_1 *a = w;
  const er_block_q8_1 *b = x;
  float sumf = 0;
  for (int64_t i = 0; i < k / ER_QK; i++) {
    int sumi = 0;
    for (int j = 0; j < ER_QK / 2; j++) {
      sumi += (a[i].qs[j] & 0xF) * b[i].qs[j];
      sumi += (a[i].qs[j] >> 4) * b[i].qs[j + ER_QK / 2];
    }
    sumf += (h2f(a[i].d) * h2f(b[i].d)) * (float)sumi + h2f(a[i].m) * h2f(b[i].s);
  }
  return sumf;
}

static float dot_q5_0(const void *w, const void *x, int64_t k) {
  const er_block_q5_0 *a = w;
  const er_block_q8_0 *b = x;
  float sumf = 0;
  for (int64_t i = 0; i < k / ER_QK; i++) {
    int sumi = 0;
    for (int j = 0; j < ER_QK; j++) sumi += (q5_quant(a[i].qs, a[i].qh, j) - 16) * b[i].qs[j];
    sumf += (h2f(a[i].d) * h2f(b[i].d)) * (float)sumi;
  }
  return sumf;
}

static float dot_q5_1(const void *w, const void *x, int64_t k) {
  const er_block_q5_1 *a = w;
  const er_block_q8_1 *b = x;
  float sumf = 0;
  for (int64_t i = 0; i < k / ER_QK; i++) {
    int sumi = 0;
    for (int j = 0; j < ER_QK; j++) sumi += q5_quant(a[i].qs, a[i].qh, j) * b[i].qs[j];
    sumf += (h2f(a[i].d) * h2f(b[i].d)) * (float)sumi + h2f(a[i].m) * h2f(b[i].s);
  }
  return sumf;
}

static float dot_q8_0(const void *w, const void *x, int64_t k) {
  const er_block_q8_0 *a = w;
  const er_block_q8_0 *b = x;
  float sumf = 0;
  for (int64_t i = 0; i < k / ER_QK; i++) {
    int sumi = 0;
    for (int j = 0; j < ER_QK; j++) sumi += a[i].qs[j] * b[i].qs[j];
    sumf += (float)sumi * (h2f(a[i].d) * h2f(b[i].d));
  }
  return sumf;
}

/* The K-quants: per super-block an exact integer sum of scale * quant *
 * activation over the sub-blocks and, for the types with minimums, the
 * minimums against the activation's 16-element sums (bsums), then
 *   sumf += d * isum - dmin * summs
 * with d and dmin the weight's fp16 scales times the activation's float d. */
static float dot_q2_k(const void *w, const void *x, int64_t k) {
  const er_block_q2_k *a = w;
  const er_block_q8_k *b = x;
  float sumf = 0;
  for (int64_t i = 0; i < k / ER_QK_K; i++) {
    int summs = 0, isum = 0;
    for (int j = 0; j < 16; j++) summs += b[i].bsums[j] * (a[i].scales[j] >> 4);
    for (int e = 0; e < ER_QK_K; e++) {
      const int half = e / 128, s = (e % 128) / 32, l = e % 32;
      const int q = (a[i].qs[32 * half + l] >> (2 * s)) & 3;
      isum += (a[i].scales[e / 16] & 0xF) * q * b[i].qs[e];
    }
    const float dall = b[i].d * h2f(a[i].d), dmin = b[i].d * h2f(a[i].dmin);
    sumf += dall * (float)isum - dmin * (float)summs;
  }
  return sumf;
}

/* Q3_K .. Q6_K sum in ggml's generic order, so their results are
 * ggml_vec_dot_q*_K_q8_K_generic's bit for bit: per super-block the exact
 * integer sums of scale * quant * activation in 8 lanes (lane l: the
 * elements e with e % 8 == l), each lane's float sum over super-blocks
 * gaining d * lane, the minimums' terms subtracted from a separate sum as
 * they come, and the lanes added to it at the end. q[e] is the quant
 * (offset taken off), sc[e] its sub-block's scale. */
typedef struct k_sums {
  float lanes[8], sumf;
} k_sums;

static void k_sums_add(k_sums *acc, const int q[ER_QK_K], const int sc[ER_QK_K], const int8_t *x, float d) {
  int32_t aux[8] = {0};
  for (int e = 0; e < ER_QK_K; e++) aux[e % 8] += sc[e] * q[e] * x[e];
  for (int l = 0; l < 8; l++) acc->lanes[l] += d * (float)aux[l];
}

static float k_sums_total(k_sums *acc) {
  for (int l = 0; l < 8; l++) acc->sumf += acc->lanes[l];
  return acc->sumf;
}

static float dot_q3_k(const void *w, const void *x, int64_t k) {
  const er_block_q3_k *a = w;
  const er_block_q8_k *b = x;
  k_sums acc = {{0}, 0};
  for (int64_t i = 0; i < k / ER_QK_K; i++) {
    int scales[16], q[ER_QK_K], sc[ER_QK_K];
    er__qbk_q3k_scales(a[i].scales, scales);
    for (int e = 0; e < ER_QK_K; e++) {
      const int half = e / 128, s = (e % 128) / 32, l = e % 32;
      q[e] = ((a[i].qs[32 * half + l] >> (2 * s)) & 3) - ((a[i].hmask[l] >> (e / 32)) & 1 ? 0 : 4);
      sc[e] = scales[e / 16];
    }
    k_sums_add(&acc, q, sc, b[i].qs, h2f(a[i].d) * b[i].d);
  }
  return k_sums_total(&acc);
}

/* The minimums' integer sum of a Q4_K / Q5_K super-block, and its
 * per-element scales: sub-block j of 32 has scale sc_j and minimum m_j,
 * against the activation's 16-element sums (bsums). */
static int k4_scales_summs(const uint8_t packed[12], const er_block_q8_k *b, int sc[ER_QK_K]) {
  int summs = 0;
  for (int j = 0; j < 8; j++) {
    uint8_t s, m;
    er__qb_k4_scale_min(j, packed, &s, &m);
    for (int l = 0; l < 32; l++) sc[32 * j + l] = s;
    summs += m * (b->bsums[2 * j] + b->bsums[2 * j + 1]);
  }
  return summs;
}

static float dot_q4_k(const void *w, const void *x, int64_t k) {
  const er_block_q4_k *a = w;
  const er_block_q8_k *b = x;
  k_sums acc = {{0}, 0};
  for (int64_t i = 0; i < k / ER_QK_K; i++) {
    int q[ER_QK_K], sc[ER_QK_K];
    for (int e = 0; e < ER_QK_K; e++) {
      const uint8_t byte = a[i].qs[32 * (e / 64) + e % 32];
      q[e] = (e % 64) < 32 ? byte & 0xF : byte >> 4;
    }
    const int summs = k4_scales_summs(a[i].scales, &b[i], sc);
    k_sums_add(&acc, q, sc, b[i].qs, h2f(a[i].d) * b[i].d);
    acc.sumf -= h2f(a[i].dmin) * b[i].d * (float)summs;
  }
  return k_sums_total(&acc);
}

static float dot_q5_k(const void *w, const void *x, int64_t k) {
  const er_block_q5_k *a = w;
  const er_block_q8_k *b = x;
  k_sums acc = {{0}, 0};
  for (int64_t i = 0; i < k / ER_QK_K; i++) {
    int q[ER_QK_K], sc[ER_QK_K];
    for (int e = 0; e < ER_QK_K; e++) {
      const uint8_t byte = a[i].qs[32 * (e / 64) + e % 32];
      q[e] = ((e % 64) < 32 ? byte & 0xF : byte >> 4) | (((a[i].qh[e % 32] >> (e / 32)) & 1) << 4);
    }
    const int summs = k4_scales_summs(a[i].scales, &b[i], sc);
    k_sums_add(&acc, q, sc, b[i].qs, h2f(a[i].d) * b[i].d);
    acc.sumf -= h2f(a[i].dmin) * b[i].d * (float)summs;
  }
  return k_sums_total(&acc);
}

static float dot_q6_k(const void *w, const void *x, int64_t k) {
  const er_block_q6_k *a = w;
  const er_block_q8_k *b = x;
  k_sums acc = {{0}, 0};
  for (int64_t i = 0; i < k / ER_QK_K; i++) {
    int q[ER_QK_K], sc[ER_QK_K];
    for (int e = 0; e < ER_QK_K; e++) {
      q[e] = q6k_quant(&a[i], e) - 32;
      sc[e] = a[i].scales[e / 16];
    }
    k_sums_add(&acc, q, sc, b[i].qs, h2f(a[i].d) * b[i].d);
  }
  return k_sums_total(&acc);
}

/* Every reference product is this loop around its type's dot product. */
static void gemm_rows(row_dot_fn dot, const void *w, size_t w_row_bytes, const void *x, size_t x_row_bytes,
                      int64_t k, int64_t r0, int64_t r1, int64_t m, float *y, int64_t ldy) {
  for (int64_t t = 0; t < m; t++) {
    const uint8_t *xt = (const uint8_t *)x + (size_t)t * x_row_bytes;
    for (int64_t r = r0; r < r1; r++) y[t * ldy + r] = dot((const uint8_t *)w + (size_t)r * w_row_bytes, xt, k);
  }
}

#define QB_REF_GEMM(t)                                                                                      \
  static void gemm_##t##_ref(const void *w, size_t w_row_bytes, const void *x, size_t x_row_bytes, int64_t k, \
                             int64_t r0, int64_t r1, int64_t m, float *y, int64_t ldy) {                     \
    gemm_rows(dot_##t, w, w_row_bytes, x, x_row_bytes, k, r0, r1, m, y, ldy);                               \
  }
QB_REF_GEMM(f32)
QB_REF_GEMM(f16)
QB_REF_GEMM(bf16)
QB_REF_GEMM(q4_0)
QB_REF_GEMM(q4_1)
QB_REF_GEMM(q5_0)
QB_REF_GEMM(q5_1)
QB_REF_GEMM(q8_0)
QB_REF_GEMM(q2_k)
QB_REF_GEMM(q3_k)
QB_REF_GEMM(q4_k)
QB_REF_GEMM(q5_k)
QB_REF_GEMM(q6_k)
#undef QB_REF_GEMM

/* ======================================================================== */
/* Kernel choice                                                             */
/* ======================================================================== */

static const er_qb_kernel ref_f32 = {"f32_f32_gemm__ref", ER_GGML_F32, ER_GGML_F32, gemm_f32_ref};
static const er_qb_kernel ref_f16 = {"f16_f32_gemm__ref", ER_GGML_F16, ER_GGML_F32, gemm_f16_ref};
static const er_qb_kernel ref_bf16 = {"bf16_f32_gemm__ref", ER_GGML_BF16, ER_GGML_F32, gemm_bf16_ref};
static const er_qb_kernel ref_q4_0 = {"q4_0_q8_0_gemm__ref", ER_GGML_Q4_0, ER_GGML_Q8_0, gemm_q4_0_ref};
static const er_qb_kernel ref_q4_1 = {"q4_1_q8_1_gemm__ref", ER_GGML_Q4_1, ER_GGML_Q8_1, gemm_q4_1_ref};
static const er_qb_kernel ref_q5_0 = {"q5_0_q8_0_gemm__ref", ER_GGML_Q5_0, ER_GGML_Q8_0, gemm_q5_0_ref};
static const er_qb_kernel ref_q5_1 = {"q5_1_q8_1_gemm__ref", ER_GGML_Q5_1, ER_GGML_Q8_1, gemm_q5_1_ref};
static const er_qb_kernel ref_q8_0 = {"q8_0_q8_0_gemm__ref", ER_GGML_Q8_0, ER_GGML_Q8_0, gemm_q8_0_ref};
static const er_qb_kernel ref_q2_k = {"q2_k_q8_k_gemm__ref", ER_GGML_Q2_K, ER_GGML_Q8_K, gemm_q2_k_ref};
static const er_qb_kernel ref_q3_k = {"q3_k_q8_k_gemm__ref", ER_GGML_Q3_K, ER_GGML_Q8_K, gemm_q3_k_ref};
static const er_qb_kernel ref_q4_k = {"q4_k_q8_k_gemm__ref", ER_GGML_Q4_K, ER_GGML_Q8_K, gemm_q4_k_ref};
static const er_qb_kernel ref_q5_k = {"q5_k_q8_k_gemm__ref", ER_GGML_Q5_K, ER_GGML_Q8_K, gemm_q5_k_ref};
static const er_qb_kernel ref_q6_k = {"q6_k_q8_k_gemm__ref", ER_GGML_Q6_K, ER_GGML_Q8_K, gemm_q6_k_ref};

static const er_qb_kernel *const ref_kernels[] = {
    &ref_f32,  &ref_f16,  &ref_bf16, &ref_q4_0, &ref_q4_1, &ref_q5_0, &ref_q5_1,
    &ref_q8_0, &ref_q2_k, &ref_q3_k, &ref_q4_k, &ref_q5_k, &ref_q6_k, NULL,
};

#if defined(__x86_64__) || defined(__i386__)
#define QB_AVX2_ENTRY(t) &er__qb_##t##_avx2,
static const er_qb_kernel *const avx2_kernels[] = {ER__QB_AVX2_KERNELS(QB_AVX2_ENTRY) NULL};
#undef QB_AVX2_ENTRY
static bool cpu_has_avx2(void) {
  const er_cpu_features *cpu = er__cpu_features();
  return cpu->avx2 && cpu->fma && cpu->f16c;
}
#endif

/* Every kernel: the optimized ones first (the order er__qb_kernel searches),
 * then the references. */
static const er_qb_kernel *const all_kernels[] = {
#if defined(__x86_64__) || defined(__i386__)
#define QB_AVX2_ENTRY(t) &er__qb_##t##_avx2,
    ER__QB_AVX2_KERNELS(QB_AVX2_ENTRY)
#undef QB_AVX2_ENTRY
#endif
    &ref_f32,  &ref_f16,  &ref_bf16, &ref_q4_0, &ref_q4_1, &ref_q5_0, &ref_q5_1,
    &ref_q8_0, &ref_q2_k, &ref_q3_k, &ref_q4_k, &ref_q5_k, &ref_q6_k, NULL,
};

const er_qb_kernel *const *er__qb_kernels_all(void) { return all_kernels; }

static const er_qb_kernel *find_kernel(const er_qb_kernel *const *list, uint32_t wtype) {
  for (; *list; list++) {
    if ((*list)->wtype == wtype) return *list;
  }
  return NULL;
}

const er_qb_kernel *er__qb_kernel(uint32_t wtype, bool reference) {
  if (!reference && !er__force_reference_env()) {
#if defined(__x86_64__) || defined(__i386__)
    if (cpu_has_avx2()) {
      const er_qb_kernel *k = find_kernel(avx2_kernels, wtype);
      if (k) return k;
    }
#endif
  }
  return find_kernel(ref_kernels, wtype);
}

/* Which activation quantizer runs, chosen on first use: 1 the reference,
 * 2 AVX2. Either gives the same bytes; ER_FORCE_REFERENCE is read once. */
static atomic_int act_quantizer;

void er__qb_quantize_act(uint32_t atype, const float *x, int64_t ldx, int64_t n, int64_t k, void *xq,
                         size_t x_row_bytes) {
  int which = atomic_load_explicit(&act_quantizer, memory_order_relaxed);
  if (which == 0) {
    which = 1;
#if defined(__x86_64__) || defined(__i386__)
    if (!er__force_reference_env() && cpu_has_avx2()) which = 2;
#endif
    atomic_store_explicit(&act_quantizer, which, memory_order_relaxed);
  }
#if defined(__x86_64__) || defined(__i386__)
  if (which == 2) {
    er__qb_quantize_act_avx2(atype, x, ldx, n, k, xq, x_row_bytes);
    return;
  }
#endif
  er__qb_quantize_act_ref(atype, x, ldx, n, k, xq, x_row_bytes);
}
