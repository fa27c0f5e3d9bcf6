/* kv.c - the KV cache: allocated once for every sequence at its full
 * length, so no request can grow memory past what the context reported at
 * creation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm-impl.h"

er_status er__kv_init(er_kv_cache *kv, const er_llm_hparams *hp, er_llm_kv_type type, int64_t n_ctx, int n_seq) {
  memset(kv, 0, sizeof *kv);
  int64_t width = (int64_t)hp->n_head_kv * hp->head_dim;
  if (type == ER_LLM_KV_Q8 && width % ER_QK != 0)
    return er__error(ER_STATUS_UNSUPPORTED, "an int8 KV cache needs rows of whole 32-value blocks; this model's rows "
                     "are %lld values (n_head_kv x head_dim)",
                     (long long)width);
  kv->type = type;
  kv->n_ctx = n_ctx;
  kv->n_seq = n_seq;
  kv->row_bytes = type == ER_LLM_KV_Q8 ? (size_t)(width / ER_QK) * sizeof(er_block_q8_0) : (size_t)width * 2;
  uint64_t per, total;
  if (!er__mul_u64((uint64_t)hp->n_layer * (uint64_t)n_seq, (uint64_t)n_ctx, &per) ||
      !er__mul_u64(per, kv->row_bytes, &per) || !er__mul_u64(per, 2, &total) || total > (UINT64_C(1) << 46))
    return er__error(ER_STATUS_LIMIT, "a KV cache of %d sequences x %lld positions x %d layers overflows", n_seq,
                     (long long)n_ctx, hp->n_layer);
  kv->k = er__aligned_alloc((size_t)per);
  kv->v = er__aligned_alloc((size_t)per);
  kv->len = calloc((size_t)n_seq, sizeof *kv->len);
  if (!kv->k || !kv->v || !kv->len) {
    er__kv_free(kv);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a KV cache of %llu bytes (%d sequences x %lld "
                     "positions); lower n_ctx or n_seq",
                     (unsigned long long)total, n_seq, (long long)n_ctx);
  }
  kv->bytes = total;
  return ER_STATUS_OK;
}

void er__kv_free(er_kv_cache *kv) {
  er__aligned_free(kv->k);
  er__aligned_free(kv->v);
  free(kv->len);
  memset(kv, 0, sizeof *kv);
}

void er__kv_store(const er_kv_cache *kv, const float *src, int64_t n, uint8_t *row) {
  if (kv->type == ER_LLM_KV_Q8) {
    er__qb_quantize_row(ER_GGML_Q8_0, src, row, n);
    return;
  }
  uint16_t *h = (uint16_t *)row;
  for (int64_t i = 0; i < n; i++) h[i] = er__f32_to_f16(src[i]);
}
