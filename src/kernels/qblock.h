/* qblock.h - block-quantized weights (GGUF / ggml block types) and the
 * matrix products of the LLM engine over them.
 *
 * Each block type is a plain struct (scales + packed quants) with a
 * reference dequantize and quantize row function beside it, written for
 * clarity; the products read weights in their blocks as stored in the file
 * and activations quantized once per row to the format the type's dot
 * product pairs with (ggml's choice: Q8_0 for Q4_0 / Q5_0 / Q8_0, Q8_1 for
 * Q4_1 / Q5_1, Q8_K for the K-quants, float32 for F32 / F16 / BF16). Every
 * optimized product is tested against dequantize-then-multiply in
 * tests/llm (test-qblock), at, below and above its tile sizes.
 *
 * Layouts are ggml's, byte for byte (static asserts in qblock.c), so a
 * GGUF tensor is used in place: row r of an [n, k] weight starts at
 * r * er__qb_row_bytes(type, k). */
#ifndef ER_QBLOCK_H
#define ER_QBLOCK_H

#include "core/core.h"
#include "gguf/gguf.h"

/* ---- block structs (ggml's layouts) ------------------------------------- */

#define ER_QK 32    /* elements per block of the 32-element types */
#define ER_QK_K 256 /* elements per super-block of the K-quants */

typedef struct er_block_q4_0 {
  uint16_t d;                 /* fp16 scale */
  uint8_t qs[ER_QK / 2];      /* element j in the low nibble of qs[j], j+16 in the high; x = (q - 8) * d */
} er_block_q4_0;

typedef struct er_block_q4_1 {
  uint16_t d, m;              /* fp16 scale and minimum; x = q * d + m */
  uint8_t qs[ER_QK / 2];
} er_block_q4_1;

typedef struct er_block_q5_0 {
  uint16_t d;
  uint8_t qh[4];              /* bit j: the 5th bit of element j */
  uint8_t qs[ER_QK / 2];      /* x = (q - 16) * d */
} er_block_q5_0;

typedef struct er_block_q5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[ER_QK / 2];      /* x = q * d + m */
} er_block_q5_1;

typedef struct er_block_q8_0 {
  uint16_t d;
  int8_t qs[ER_QK];           /* x = q * d */
} er_block_q8_0;

typedef struct er_block_q8_1 {
  uint16_t d;                 /* fp16 scale */
  uint16_t s;                 /* fp16 d * sum(qs) (pairs with Q4_1 / Q5_1 minimums) */
  int8_t qs[ER_QK];
} er_block_q8_1;

typedef struct er_block_q2_k {
  uint8_t scales[ER_QK_K / 16];/* 16 sub-blocks of 16: 4-bit scale (low) and 4-bit minimum (high) */
  uint8_t qs[ER_QK_K / 4];    /* 2-bit quants; x = d * sc * q - dmin * m */
  uint16_t d, dmin;
} er_block_q2_k;

typedef struct er_block_q3_k {
  uint8_t hmask[ER_QK_K / 8]; /* high bits: set means q, clear means q - 4 */
  uint8_t qs[ER_QK_K / 4];    /* low 2 bits */
  uint8_t scales[12];         /* 16 6-bit scales, packed; x = d * (sc - 32) * q */
  uint16_t d;
} er_block_q3_k;

typedef struct er_block_q4_k {
  uint16_t d, dmin;           /* super-block scales of the 6-bit sub-block scales and minimums */
  uint8_t scales[12];         /* 8 sub-blocks of 32: 6-bit scale and 6-bit minimum each, packed */
  uint8_t qs[ER_QK_K / 2];    /* x = d * sc * q - dmin * m */
} er_block_q4_k;

typedef struct er_block_q5_k {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[ER_QK_K / 8];    /* 5th bits */
  uint8_t qs[ER_QK_K / 2];
} er_block_q5_k;

typedef struct er_block_q6_k {
  uint8_t ql[ER_QK_K / 2];    /* low 4 bits */
  uint8_t qh[ER_QK_K / 4];    /* high 2 bits */
  int8_t scales[ER_QK_K / 16];/* 16 sub-blocks of 16, 8-bit scales */
  uint16_t d;                 /* x = d * sc * (q - 32) */
} er_block_q6_k;

typedef struct er_block_q8_k {
  float d;
  int8_t qs[ER_QK_K];
  int16_t bsums[ER_QK_K / 16];/* sums of each 16 quants (the K-quants' minimums) */
} er_block_q8_k;

/* ---- geometry and reference conversions (qblock.c) ---------------------- */

/* Bytes of one row of k elements of `type` (k a multiple of its block);
 * 0 for a type the reader does not know. */
size_t er__qb_row_bytes(uint32_t type, int64_t k);
/* Whether the reference code converts this type. */
bool er__qb_can_dequantize(uint32_t type);
bool er__qb_can_quantize(uint32_t type);
/* Reference conversions of one row of k elements (k a multiple of the
 * block). Quantizing follows ggml's reference quantizers (quantize_row_*_ref)
 * so files written here match llama.cpp's; NaN or Inf inputs are the
 * caller's to refuse. */
void er__qb_dequantize_row(uint32_t type, const void *src, float *dst, int64_t k);
void er__qb_quantize_row(uint32_t type, const float *src, void *dst, int64_t k);

/* Quantizing with importance weights (qblock-imatrix.c, llama.cpp's
 * imatrix idea): qw[k] (k floats, >= 0) is how much column j of the row
 * matters to the product, usually the mean square of the activation that
 * multiplies it; each block's scale is fit to minimize the error weighted
 * by qw. Types without a weighted fit (F16, Q8_0, ...) and qw NULL quantize
 * as er__qb_quantize_row does. */
bool er__qb_uses_importance(uint32_t type);
void er__qb_quantize_row_weighted(uint32_t type, const float *src, void *dst, int64_t k, const float *qw);

/* The fits the reference quantizers share with the weighted ones:
 * ggml's make_qkx2/3_quants (scale and minimum on levels 0..nmax, weights
 * w), make_qx_quants with rmse_type 1 (a symmetric scale, weights qw or
 * x^2 when NULL), and the 6-bit scale/minimum unpacking of Q4_K / Q5_K. */
float er__qb_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, uint8_t *Laux,
                           float rmin, float rdelta, int nstep, bool use_mad);
float er__qb_fit_scale_sym(int n, int nmax, const float *x, int8_t *L, const float *qw);
void er__qb_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m);

/* The activation format a weight type's product reads: ER_GGML_Q8_0,
 * ER_GGML_Q8_1, ER_GGML_Q8_K, or ER_GGML_F32 (the float weight types);
 * UINT32_MAX for a weight type without a product. */
uint32_t er__qb_act_type(uint32_t wtype);

/* ---- the products --------------------------------------------------------- */

/* Y = X W^T over block-quantized weights: for each of m activation rows t
 * and weight rows r in [r0, r1),
 *   y[t * ldy + r] = sum_k W[r, k] * X[t, k]
 * W: rows of w_row_bytes (er__qb_row_bytes(wtype, k)); X: m rows already in
 * the activation format (er__qb_quantize_act), x_row_bytes apart. Rows
 * [r0, r1) are the caller's split over workers: a call writes only those
 * columns of Y, and its results do not depend on the split. */
typedef void (*er_qb_gemm_fn)(const void *w, size_t w_row_bytes, const void *x, size_t x_row_bytes, int64_t k,
                              int64_t r0, int64_t r1, int64_t m, float *y, int64_t ldy);
/* Quantizes n rows of k floats (x, ldx floats apart) to the activation
 * format `atype` (rows x_row_bytes apart); for ER_GGML_F32, a copy. */
typedef void (*er_qb_quant_fn)(uint32_t atype, const float *x, int64_t ldx, int64_t n, int64_t k, void *xq,
                               size_t x_row_bytes);

typedef struct er_qb_kernel {
  const char *name;           /* "q4_1_q8_1_gemm_4x4__avx2", "q4_1_q8_1_gemm__ref" */
  uint32_t wtype, atype;
  er_qb_gemm_fn gemm;
} er_qb_kernel;

/* The best product for this weight type on this CPU (reference = true: the
 * plain C one), or NULL when there is none. ER_FORCE_REFERENCE=1 in the
 * environment also picks the reference. */
const er_qb_kernel *er__qb_kernel(uint32_t wtype, bool reference);
/* Every product, reference and optimized, for the tests (NULL-terminated). */
const er_qb_kernel *const *er__qb_kernels_all(void);
/* Bytes of one activation row of k elements in format atype. */
size_t er__qb_act_row_bytes(uint32_t atype, int64_t k);
/* The activation quantizer (the optimized one where the CPU has it; both
 * round as the reference does, so either gives the same bytes). */
void er__qb_quantize_act(uint32_t atype, const float *x, int64_t ldx, int64_t n, int64_t k, void *xq,
                         size_t x_row_bytes);

#endif /* ER_QBLOCK_H */
