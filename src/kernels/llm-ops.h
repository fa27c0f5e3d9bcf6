/* llm-ops.h - the decoder step's small kernels besides the matrix products
 * (qblock.h): RMSNorm, SwiGLU, and attention of a group of query heads over
 * one sequence's cached keys and values (fp16 or Q8_0 rows).
 *
 * One table per ISA (llm-ops.c holds the reference, plain C for clarity;
 * llm-ops-avx2.c the AVX2 + F16C one), picked once from the CPU's features;
 * tests/llm/test-llm-ops.c checks each against the reference. */
#ifndef ER_LLM_OPS_H
#define ER_LLM_OPS_H

#include "core/core.h"

typedef struct er_llm_ops {
  const char *isa;            /* "ref", "avx2" */
  /* y = x / sqrt(mean(x^2) + eps) * w; the mean of squares summed in double
   * (as ggml does). y may be x. */
  void (*rmsnorm)(const float *x, const float *w, float *y, int64_t n, float eps);
  /* y = silu(g) * u = g / (1 + exp(-g)) * u. y may be g. */
  void (*silu_mul)(const float *g, const float *u, float *y, int64_t n);
  /* Attention over an fp16 cache multiplies fp16 by fp16: each query value
   * is rounded to fp16 before its product with a key, and each softmax
   * weight before its product with a value, as llama.cpp's CPU backend
   * does when it multiplies an fp16 cache (mul_mat converts the float
   * operand to the cache's type). The keys and values are fp16 already, so
   * this costs no accuracy a user would see, and it makes edgerun's logits
   * equal llama.cpp's bit for bit on the same file (tests/llm/check_refs.py,
   * against llama.cpp without flash attention, whose fp16 accumulation
   * differs again). Over an int8 cache the float operands stay float.
   *
   * Attention scores of g query heads over n cached keys:
   *   s[j * lds + t] = scale * dot(q[j * hd ...], key t)
   * key t is hd values at (const uint8_t *)k + t * k_stride (bytes): fp16 when
   * q8 is false, else hd / 32 Q8_0 blocks. */
  void (*scores)(const float *q, int g, int hd, const void *k, size_t k_stride, bool q8, int64_t n, float scale,
                 float *s, int64_t lds);
  /* o[j * hd ...] = sum_t p[j * ldp + t] * value t, values as for scores. */
  void (*mix)(const float *p, int64_t ldp, int g, int hd, const void *v, size_t v_stride, bool q8, int64_t n, float *o);
  /* In-place softmax of each of g rows of n scores (lds apart); returns
   * false when a row holds NaN or only -inf. */
  bool (*softmax)(float *s, int g, int64_t n, int64_t lds);
} er_llm_ops;

/* The best table for this CPU (reference = true: the plain C one; also
 * when ER_FORCE_REFERENCE is set). */
const er_llm_ops *er__llm_ops(bool reference);

extern const er_llm_ops er__llm_ops_ref;
#if defined(__x86_64__) || defined(__i386__)
extern const er_llm_ops er__llm_ops_avx2;
#endif

#endif /* ER_LLM_OPS_H */
