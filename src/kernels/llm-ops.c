/* llm-ops.c - the reference decoder-step kernels, and the choice of table. */
#include "kernels/llm-ops.h"

#include <math.h>

#include "kernels/kernel.h"
#include "kernels/qblock.h"

static void rmsnorm_ref(const float *x, const float *w, float *y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
  const float mean = (float)(sum / (double)n);
  const float scale = 1.0f / sqrtf(mean + eps);
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

static void silu_mul_ref(const float *g, const float *u, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* One cached row (key or value) as floats. */
static void load_row(const void *row, bool q8, int hd, float *out) {
  if (q8) {
    er__qb_dequantize_row(ER_GGML_Q8_0, row, out, hd);
    return;
  }
  const uint16_t *h = row;
  for (int i = 0; i < hd; i++) out[i] = er__f16_to_f32(h[i]);
}

/* x as fp16 would round it, unless the cache is int8 (see llm-ops.h). */
static float as_f16(float x, bool q8) { return q8 ? x : er__f16_to_f32(er__f32_to_f16(x)); }

static void scores_ref(const float *q, int g, int hd, const void *k, size_t k_stride, bool q8, int64_t n, float scale,
                       float *s, int64_t lds) {
  float row[1024];
  for (int64_t t = 0; t < n; t++) {
    load_row((const uint8_t *)k + (size_t)t * k_stride, q8, hd, row);
    for (int j = 0; j < g; j++) {
      float dot = 0.0f;
      for (int i = 0; i < hd; i++) dot += as_f16(q[j * hd + i], q8) * row[i];
      s[j * lds + t] = dot * scale;
    }
  }
}

static void mix_ref(const float *p, int64_t ldp, int g, int hd, const void *v, size_t v_stride, bool q8, int64_t n,
                    float *o) {
  float row[1024];
  for (int j = 0; j < g; j++)
    for (int i = 0; i < hd; i++) o[j * hd + i] = 0.0f;
  for (int64_t t = 0; t < n; t++) {
    load_row((const uint8_t *)v + (size_t)t * v_stride, q8, hd, row);
    for (int j = 0; j < g; j++) {
      float w = as_f16(p[j * ldp + t], q8);
      for (int i = 0; i < hd; i++) o[j * hd + i] += w * row[i];
    }
  }
}

static bool softmax_ref(float *s, int g, int64_t n, int64_t lds) {
  for (int j = 0; j < g; j++) {
    float *r = s + j * lds;
    float mx = -INFINITY;
    for (int64_t t = 0; t < n; t++) {
      if (isnan(r[t])) return false;
      if (r[t] > mx) mx = r[t];
    }
    if (mx == -INFINITY) return false;
    double sum = 0.0;
    for (int64_t t = 0; t < n; t++) {
      r[t] = expf(r[t] - mx);
      sum += r[t];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t t = 0; t < n; t++) r[t] *= inv;
  }
  return true;
}

const er_llm_ops er__llm_ops_ref = {"ref", rmsnorm_ref, silu_mul_ref, scores_ref, mix_ref, softmax_ref};

const er_llm_ops *er__llm_ops(bool reference) {
  if (reference || er__force_reference_env()) return &er__llm_ops_ref;
#if defined(__x86_64__) || defined(__i386__)
  const er_cpu_features *f = er__cpu_features();
  if (f->avx2 && f->fma && f->f16c) return &er__llm_ops_avx2;
#endif
  return &er__llm_ops_ref;
}
