/* qblock-impl.h - what qblock.c (the reference code and the dispatch) and
 * the ISA files of the block-quantized products share, and what the tests
 * reach past the dispatch for (tests/llm/test-qblock.c).
 *
 * The activation formats, as this engine and llama.cpp's CPU backend
 * produce them at run time (er__qb_quantize_act):
 *  - Q8_0: d = amax / 127 (stored as fp16), q = round(x * (127 / amax)),
 *    ties to even. This is ggml's x86 and Arm quantize_row_q8_0, not its
 *    quantize_row_q8_0_ref (which multiplies by 1 / d and rounds ties away
 *    from zero, and is what writes Q8_0 weights: er__qb_quantize_row).
 *  - Q8_1: the same quants, and s = fp16(d * sum(q)) with d the float32
 *    scale before its rounding to fp16.
 *  - Q8_K: ggml's quantize_row_q8_K_ref, which every ggml CPU path runs:
 *    the element of largest magnitude (the first such) sets
 *    iscale = -127 / max, q = min(127, round(iscale * x)) ties to even,
 *    d = 1 / iscale (float32), and bsums the sums of each 16 quants.
 * Both quantizers below give these bytes exactly. */
#ifndef ER_QBLOCK_IMPL_H
#define ER_QBLOCK_IMPL_H

#include "kernels/qblock.h"

/* The reference activation quantizer (plain C), an er_qb_quant_fn. */
void er__qb_quantize_act_ref(uint32_t atype, const float *x, int64_t ldx, int64_t n, int64_t k, void *xq,
                             size_t x_row_bytes);

#if defined(__x86_64__) || defined(__i386__)
/* qblock-avx2.c: call only when er__cpu_features() reports AVX2, FMA and
 * F16C. The quantizer gives the reference's bytes. */
void er__qb_quantize_act_avx2(uint32_t atype, const float *x, int64_t ldx, int64_t n, int64_t k, void *xq,
                              size_t x_row_bytes);
#define ER__QB_AVX2_KERNELS(X) \
  X(f32) X(f16) X(bf16) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(q4_k) X(q5_k) X(q6_k)
#define ER__QB_DECLARE(t) extern const er_qb_kernel er__qb_##t##_avx2;
ER__QB_AVX2_KERNELS(ER__QB_DECLARE)
#undef ER__QB_DECLARE
#endif

#endif /* ER_QBLOCK_IMPL_H */
