/* forward.c - one forward pass of a decoder over a wave of tokens.
 *
 * A wave is up to n_batch entries, each a token at a position of one
 * sequence: a prompt's tokens (prefill), one new token of each running
 * sequence (decode), or both mixed (continuous batching). Every matrix
 * product runs once over the whole wave, so the weights stream from memory
 * once per wave, not once per token; attention alone is per entry, over its
 * own sequence's cache.
 *
 * Follow one token through one layer in layer() below: RMSNorm, Q/K/V
 * products (plus biases), rotary embedding, K and V into the cache,
 * attention over the cache, the output product added to the residual
 * stream, RMSNorm, gate and up products, SwiGLU, the down product added to
 * the stream. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/llm-ops.h"
#include "llm/llm-impl.h"

/* ======================================================================== */
/* Matrix products over the wave                                             */
/* ======================================================================== */

typedef struct gemm_job {
  const er_llm_weight *w;
  const void *x;               /* n rows in w->act's format */
  size_t x_row_bytes;
  int64_t n;                   /* activation rows */
  float *y;                    /* [n][ldy] */
  int64_t ldy;
  int64_t chunk;               /* weight rows per work item */
} gemm_job;

static void gemm_chunk(void *arg, int64_t begin, int64_t end) {
  const gemm_job *j = arg;
  for (int64_t c = begin; c < end; c++) {
    int64_t r0 = c * j->chunk, r1 = r0 + j->chunk < j->w->rows ? r0 + j->chunk : j->w->rows;
    j->w->kernel->gemm(j->w->data, j->w->row_bytes, j->x, j->x_row_bytes, j->w->cols, r0, r1, j->n, j->y, j->ldy);
  }
}

/* The wave's activations in one format, quantized once and shared by the
 * products that read the same input in the same format (Q, K and V; gate
 * and up). */
typedef struct act_cache {
  const float *src;
  uint32_t act;
  int64_t n, k;
} act_cache;

static const void *quantized(er_llm_context *ctx, act_cache *c, const float *x, int64_t n, int64_t k, uint32_t act,
                             size_t *row_bytes) {
  if (act == ER_GGML_F32) {
    *row_bytes = (size_t)k * sizeof(float);
    return x;
  }
  *row_bytes = er__qb_act_row_bytes(act, k);
  if (c->src != x || c->act != act || c->n != n || c->k != k) {
    er__qb_quantize_act(act, x, k, n, k, ctx->xq, *row_bytes);
    *c = (act_cache){x, act, n, k};
  }
  return ctx->xq;
}

/* y[t][r] = W x[t] for the n rows of x (k = w->cols floats each). Work
 * items are runs of weight rows, several per thread, so a worker slowed
 * by another process takes fewer of them (the pool hands out items to
 * whoever is free; each item's result does not depend on who runs it). */
static void matmul(er_llm_context *ctx, act_cache *c, const er_llm_weight *w, const float *x, int64_t n, float *y,
                   int64_t ldy) {
  size_t xrb;
  const void *xq = quantized(ctx, c, x, n, w->cols, w->act, &xrb);
  int64_t items = ctx->threads > 1 ? 8 * (int64_t)ctx->threads : 1;
  /* Rows per item: a multiple of 16 (the products' row tiles divide it),
   * and at least 64 so an item amortizes its call. */
  int64_t chunk = (w->rows + items - 1) / items;
  chunk = (chunk + 15) / 16 * 16;
  if (chunk < 64) chunk = 64;
  gemm_job j = {w, xq, xrb, n, y, ldy, chunk};
  int64_t n_items = (w->rows + chunk - 1) / chunk;
  er__parallel_for_items(ctx->pool, n_items, gemm_chunk, &j);
  if (ctx->observe) ctx->observe(ctx->observe_user, w->t ? w->t->name_z : "", x, n, w->cols, y, w->rows, ldy);
}

void er__llm_context_observe(er_llm_context *ctx, er_llm_observer fn, void *user) {
  ctx->observe = fn;
  ctx->observe_user = user;
}

/* The residual stream after a block's half, to the observer (y NULL:
 * there is no product; `what` is "attn" or "ffn"). */
static void observe_stream(er_llm_context *ctx, int il, const char *what, int64_t n) {
  if (!ctx->observe) return;
  char name[48];
  snprintf(name, sizeof name, "blk.%d.%s_residual", il, what);
  ctx->observe(ctx->observe_user, name, ctx->x, n, ctx->llm->hp.n_embd, NULL, 0, 0);
}

/* ======================================================================== */
/* fp16 activations (er_llm_context_options.fp16_activations)                */
/* ======================================================================== */

/* Rounds n activations to fp16 as an accelerator that computes in fp16
 * stores them; an error names the layer (-1: outside the blocks), the
 * site and the largest magnitude when one is beyond fp16's range (it
 * would be inf there). Nothing happens without the option. */
static er_status fp16_site(const er_llm_context *ctx, float *v, int64_t n, int il, const char *what) {
  if (!ctx->fp16) return ER_STATUS_OK;
  float worst = 0;
  for (int64_t i = 0; i < n; i++) {
    float a = fabsf(v[i]);
    if (a > worst || a != a) worst = a; /* a NaN stays the worst */
    v[i] = er__f16_to_f32(er__f32_to_f16(v[i]));
  }
  if (worst < 65520.0f) return ER_STATUS_OK; /* 65520 and up round to inf */
  if (il < 0)
    return er__error(ER_STATUS_OUT_OF_RANGE, "%s reaches %g, beyond fp16's largest value 65504 (fp16 activations)", what,
                     (double)worst);
  return er__error(ER_STATUS_OUT_OF_RANGE, "layer %d: %s reaches %g, beyond fp16's largest value 65504 (fp16 "
                   "activations; edgerun analyze lists such sites, edgerun quantize --fp16-safe scales the SwiGLU "
                   "product into range)",
                   il, what, (double)worst);
}

/* ======================================================================== */
/* Rotary embedding                                                          */
/* ======================================================================== */

/* cos/sin of every rotated pair for each wave entry: [n][n_rot / 2] each.
 * The angles are built as ggml builds them (theta *= theta_scale per pair,
 * in float), so positions far into a context round as llama.cpp's do. */
static void rope_tables(const er_llm *m, const int32_t *pos, size_t n, float *cosv, float *sinv) {
  const int half = m->hp.n_rot / 2;
  const float theta_scale = powf(m->hp.rope_base, -2.0f / (float)m->hp.n_rot);
  for (size_t e = 0; e < n; e++) {
    float theta = (float)pos[e] * m->hp.rope_scale;
    for (int i = 0; i < half; i++) {
      float th = m->rope_freqs ? theta / m->rope_freqs[i] : theta;
      cosv[e * (size_t)half + (size_t)i] = cosf(th);
      sinv[e * (size_t)half + (size_t)i] = sinf(th);
      theta *= theta_scale;
    }
  }
}

/* Rotates the first n_rot dims of each of `heads` heads of one entry. */
static void rope_apply(const er_llm *m, float *v, int heads, const float *cosv, const float *sinv) {
  const int hd = m->hp.head_dim, half = m->hp.n_rot / 2;
  for (int h = 0; h < heads; h++) {
    float *x = v + (size_t)h * (size_t)hd;
    for (int i = 0; i < half; i++) {
      int a = m->arch->rope == ER_ROPE_NEOX ? i : 2 * i, b = m->arch->rope == ER_ROPE_NEOX ? i + half : 2 * i + 1;
      float x0 = x[a], x1 = x[b];
      x[a] = x0 * cosv[i] - x1 * sinv[i];
      x[b] = x0 * sinv[i] + x1 * cosv[i];
    }
  }
}

/* ======================================================================== */
/* Attention                                                                 */
/* ======================================================================== */

typedef struct attn_job {
  er_llm_context *ctx;
  int layer;
  size_t n;                    /* wave entries */
  bool failed;                 /* a row of scores had no finite maximum */
} attn_job;

/* Work item e * n_groups + grp: query-head group grp (the heads sharing
 * one key/value head) of wave entry e, over positions 0..pos[e] of its
 * sequence (its own key included: the wave's K/V are stored first). */
static void attn_items(void *arg, int64_t begin, int64_t end) {
  attn_job *j = arg;
  er_llm_context *ctx = j->ctx;
  const er_llm *m = ctx->llm;
  const int hd = m->hp.head_dim, g = m->hp.n_head / m->hp.n_head_kv;
  const er_llm_ops *ops = er__llm_ops(m->force_reference);
  const bool q8 = ctx->kv.type == ER_LLM_KV_Q8;
  const size_t sub = ctx->kv.type == ER_LLM_KV_Q8 ? (size_t)hd / ER_QK * sizeof(er_block_q8_0) : (size_t)hd * 2;
  float *s = ctx->scores + (size_t)er__pool_slot() * (size_t)g * (size_t)ctx->kv.n_ctx;
  const float scale = 1.0f / sqrtf((float)hd);
  for (int64_t it = begin; it < end; it++) {
    size_t e = (size_t)(it / m->hp.n_head_kv);
    int kvh = (int)(it % m->hp.n_head_kv);
    int64_t len = (int64_t)ctx->pos[e] + 1;
    const float *q = ctx->q + e * (size_t)m->hp.n_head * (size_t)hd + (size_t)kvh * (size_t)g * (size_t)hd;
    float *o = ctx->att + e * (size_t)m->hp.n_head * (size_t)hd + (size_t)kvh * (size_t)g * (size_t)hd;
    const uint8_t *k0 = er__kv_k(&ctx->kv, j->layer, ctx->seq[e], 0) + (size_t)kvh * sub;
    const uint8_t *v0 = er__kv_v(&ctx->kv, j->layer, ctx->seq[e], 0) + (size_t)kvh * sub;
    ops->scores(q, g, hd, k0, ctx->kv.row_bytes, q8, len, scale, s, ctx->kv.n_ctx);
    if (!ops->softmax(s, g, len, ctx->kv.n_ctx)) {
      j->failed = true;
      memset(o, 0, (size_t)g * (size_t)hd * sizeof *o);
      continue;
    }
    ops->mix(s, ctx->kv.n_ctx, g, hd, v0, ctx->kv.row_bytes, q8, len, o);
  }
}

/* ======================================================================== */
/* The pass                                                                  */
/* ======================================================================== */

/* The first non-finite value of n floats, or -1. */
static int64_t first_nonfinite(const float *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(v[i])) return i;
  return -1;
}

/* One transformer block over the wave. x: [n][n_embd], the residual stream. */
static er_status layer(er_llm_context *ctx, int il, size_t n, const float *cosv, const float *sinv) {
  const er_llm *m = ctx->llm;
  const er_llm_layer *L = &m->layers[il];
  const er_llm_ops *ops = er__llm_ops(m->force_reference);
  const int64_t E = m->hp.n_embd, F = m->hp.n_ff;
  const int hd = m->hp.head_dim, nh = m->hp.n_head, nkv = m->hp.n_head_kv;
  const int64_t QW = (int64_t)nh * hd, KW = (int64_t)nkv * hd;
  act_cache c = {0};

  /* Attention. h = RMSNorm(x) * attn_norm; q, k, v = W h (+ b). */
  for (size_t e = 0; e < n; e++) ops->rmsnorm(ctx->x + e * E, L->attn_norm, ctx->h + e * E, E, m->hp.norm_eps);
  ER_CHECK(fp16_site(ctx, ctx->h, (int64_t)n * E, il, "the attention norm's output"));
  matmul(ctx, &c, &L->wq, ctx->h, (int64_t)n, ctx->q, QW);
  matmul(ctx, &c, &L->wk, ctx->h, (int64_t)n, ctx->kk, KW);
  matmul(ctx, &c, &L->wv, ctx->h, (int64_t)n, ctx->vv, KW);
  const int half = m->hp.n_rot / 2;
  for (size_t e = 0; e < n; e++) {
    float *q = ctx->q + e * QW, *k = ctx->kk + e * KW, *v = ctx->vv + e * KW;
    if (L->bq)
      for (int64_t i = 0; i < QW; i++) q[i] += L->bq[i];
    if (L->bk)
      for (int64_t i = 0; i < KW; i++) k[i] += L->bk[i];
    if (L->bv)
      for (int64_t i = 0; i < KW; i++) v[i] += L->bv[i];
    rope_apply(m, q, nh, cosv + e * (size_t)half, sinv + e * (size_t)half);
    rope_apply(m, k, nkv, cosv + e * (size_t)half, sinv + e * (size_t)half);
    ER_CHECK(fp16_site(ctx, q, QW, il, "the query projection"));
    ER_CHECK(fp16_site(ctx, k, KW, il, "the key projection"));
    ER_CHECK(fp16_site(ctx, v, KW, il, "the value projection"));
    /* This entry's key and value into its sequence's cache row. */
    er__kv_store(&ctx->kv, k, KW, er__kv_k(&ctx->kv, il, ctx->seq[e], ctx->pos[e]));
    er__kv_store(&ctx->kv, v, KW, er__kv_v(&ctx->kv, il, ctx->seq[e], ctx->pos[e]));
  }
  attn_job aj = {ctx, il, n, false};
  er__parallel_for_items(ctx->pool, (int64_t)n * nkv, attn_items, &aj);
  if (aj.failed)
    return er__error(ER_STATUS_OUT_OF_RANGE, "layer %d: attention scores are not finite (NaN or overflowing activations)",
                     il);
  ER_CHECK(fp16_site(ctx, ctx->att, (int64_t)n * QW, il, "the attention output"));
  /* x += Wo att. The product writes to h, then the stream adds it. */
  matmul(ctx, &c, &L->wo, ctx->att, (int64_t)n, ctx->h, E);
  ER_CHECK(fp16_site(ctx, ctx->h, (int64_t)n * E, il, "the attention output projection"));
  for (size_t e = 0; e < n * (size_t)E; e++) ctx->x[e] += ctx->h[e];
  ER_CHECK(fp16_site(ctx, ctx->x, (int64_t)n * E, il, "the residual stream after attention"));
  observe_stream(ctx, il, "attn", (int64_t)n);

  /* Feed-forward: x += down(silu(gate h) * up h), h = RMSNorm(x) * ffn_norm. */
  for (size_t e = 0; e < n; e++) ops->rmsnorm(ctx->x + e * E, L->ffn_norm, ctx->h + e * E, E, m->hp.norm_eps);
  ER_CHECK(fp16_site(ctx, ctx->h, (int64_t)n * E, il, "the FFN norm's output"));
  matmul(ctx, &c, &L->gate, ctx->h, (int64_t)n, ctx->g, F);
  matmul(ctx, &c, &L->up, ctx->h, (int64_t)n, ctx->u, F);
  ER_CHECK(fp16_site(ctx, ctx->g, (int64_t)n * F, il, "the FFN gate projection"));
  ER_CHECK(fp16_site(ctx, ctx->u, (int64_t)n * F, il, "the FFN up projection"));
  for (size_t e = 0; e < n; e++) ops->silu_mul(ctx->g + e * F, ctx->u + e * F, ctx->g + e * F, F);
  ER_CHECK(fp16_site(ctx, ctx->g, (int64_t)n * F, il, "the SwiGLU product (gate x up)"));
  matmul(ctx, &c, &L->down, ctx->g, (int64_t)n, ctx->h, E);
  ER_CHECK(fp16_site(ctx, ctx->h, (int64_t)n * E, il, "the FFN down projection"));
  for (size_t e = 0; e < n * (size_t)E; e++) ctx->x[e] += ctx->h[e];
  ER_CHECK(fp16_site(ctx, ctx->x, (int64_t)n * E, il, "the residual stream after the FFN"));
  observe_stream(ctx, il, "ffn", (int64_t)n);

  /* fp16 overflow in SwiGLU and broken weights show here first; naming
   * the layer is what a user needs (TESTING.md 16d). One pass over the
   * stream per layer is noise next to the products. */
  int64_t bad = first_nonfinite(ctx->x, (int64_t)n * E);
  if (bad >= 0)
    return er__error(ER_STATUS_OUT_OF_RANGE, "layer %d produced a non-finite activation (%g at token %lld of the wave, "
                     "dim %lld)",
                     il, (double)ctx->x[bad], (long long)(bad / E), (long long)(bad % E));
  return ER_STATUS_OK;
}

er_status er__llm_forward(er_llm_context *ctx, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                          const bool *want, size_t n) {
  const er_llm *m = ctx->llm;
  const int64_t E = m->hp.n_embd;
  const er_llm_ops *ops = er__llm_ops(m->force_reference);
  for (size_t e = 0; e < n; e++) {
    ctx->pos[e] = pos[e];
    ctx->seq[e] = seq[e];
    /* The token's embedding row, in whatever type the file stores it. */
    const uint8_t *row = (const uint8_t *)m->tok_embd.data + (size_t)tokens[e] * m->tok_embd.row_bytes;
    er__qb_dequantize_row(m->tok_embd.type, row, ctx->x + e * E, E);
  }
  ER_CHECK(fp16_site(ctx, ctx->x, (int64_t)n * E, -1, "the token embedding"));
  /* Each entry's rotary angles, shared by every layer and head. */
  const size_t half = (size_t)m->hp.n_rot / 2;
  float *cosv = ctx->rope, *sinv = ctx->rope + n * half;
  rope_tables(m, pos, n, cosv, sinv);
  for (int il = 0; il < m->hp.n_layer; il++) ER_CHECK(layer(ctx, il, n, cosv, sinv));
  /* The wanted entries' final norm, packed, then the output product. */
  size_t w = 0;
  for (size_t e = 0; e < n; e++)
    if (want[e]) ops->rmsnorm(ctx->x + e * E, m->output_norm, ctx->h + w++ * E, E, m->hp.norm_eps);
  ctx->n_logits = w;
  if (w) {
    act_cache c = {0};
    ER_CHECK(fp16_site(ctx, ctx->h, (int64_t)w * E, -1, "the output norm's output"));
    matmul(ctx, &c, &m->output, ctx->h, (int64_t)w, ctx->logits, m->hp.n_vocab);
    ER_CHECK(fp16_site(ctx, ctx->logits, (int64_t)w * m->hp.n_vocab, -1, "the logits"));
    int64_t bad = first_nonfinite(ctx->logits, (int64_t)w * m->hp.n_vocab);
    if (bad >= 0)
      return er__error(ER_STATUS_OUT_OF_RANGE, "the output layer produced a non-finite logit (%g, token %lld)",
                       (double)ctx->logits[bad], (long long)(bad % m->hp.n_vocab));
  }
  return ER_STATUS_OK;
}
