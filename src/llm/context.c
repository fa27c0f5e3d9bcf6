/* context.c - contexts (the KV cache and a wave's buffers), the decode
 * entry point that splits a batch into waves, and the text wrappers of the
 * public API (tokenize, detokenize, chat prompts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm-impl.h"

/* ======================================================================== */
/* Text                                                                      */
/* ======================================================================== */

er_status er_llm_tokenize(const er_llm *m, const char *text, size_t len, bool add_special, bool parse_special,
                          int32_t *ids, size_t cap, size_t *n_out) {
  if (!m || (!text && len) || !n_out || (!ids && cap))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "llm, text, ids and n_out must not be NULL");
  return er__tok_encode(m->tok, text ? text : "", len, add_special, parse_special, ids, cap, n_out);
}

er_status er_llm_detokenize(const er_llm *m, const int32_t *ids, size_t n, bool special, char *buf, size_t cap,
                            size_t *len_out) {
  if (!m || (!ids && n) || !len_out || (!buf && cap))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "llm, ids, buf and len_out must not be NULL");
  return er__tok_decode(m->tok, ids, n, special, buf, cap, len_out);
}

er_status er_llm_token_piece(const er_llm *m, int32_t id, bool special, char *buf, size_t cap, size_t *len_out) {
  if (!m || !len_out || (!buf && cap)) return er__error(ER_STATUS_INVALID_ARGUMENT, "llm, buf and len_out must not be NULL");
  return er__tok_piece(m->tok, id, special, buf, cap, len_out);
}

bool er_llm_token_is_eog(const er_llm *m, int32_t id) { return m && er__tok_is_eog(m->tok, id); }

er_status er_llm_chat_prompt(const er_llm *m, const er_llm_message *msgs, size_t n, bool add_generation_prompt,
                             char **text_out) {
  if (!m || (!msgs && n) || !text_out)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "llm, msgs and text_out must not be NULL");
  if (n > ER_CHAT_MAX_MESSAGES)
    return er__error(ER_STATUS_LIMIT, "%zu messages; at most %d (ER_CHAT_MAX_MESSAGES)", n, ER_CHAT_MAX_MESSAGES);
  for (size_t i = 0; i < n; i++)
    if (!msgs[i].role || !msgs[i].content)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "message %zu has a NULL role or content", i);
  er_chat_template *fallback = NULL;
  const er_chat_template *t = m->chat;
  if (!t) {
    /* No usable template: ChatML, which most small instruct models use,
     * when the vocabulary has its markers; else the request cannot be
     * served faithfully. */
    if (er__tok_find(m->tok, "<|im_start|>", 12) < 0)
      return er__error(ER_STATUS_UNSUPPORTED, "the model has no chat template edgerun can render, and no ChatML "
                       "markers; give the prompt as plain text");
    ER_CHECK(er__chat_parse(NULL, 0, ER_CHAT_CHATML, &fallback));
    t = fallback;
  }
  size_t bl = 0, el = 0;
  const char *bos = er__tok_bos(m->tok) >= 0 ? er__tok_text(m->tok, er__tok_bos(m->tok), &bl) : NULL;
  const char *eos = er__tok_eos(m->tok) >= 0 ? er__tok_text(m->tok, er__tok_eos(m->tok), &el) : NULL;
  char bosz[256] = "", eosz[256] = "";
  if (bos) snprintf(bosz, sizeof bosz, "%.*s", (int)bl, bos);
  if (eos) snprintf(eosz, sizeof eosz, "%.*s", (int)el, eos);
  er_chat_message cm[ER_CHAT_MAX_MESSAGES];
  for (size_t i = 0; i < n; i++) cm[i] = (er_chat_message){msgs[i].role, msgs[i].content};
  size_t len = 0;
  er_status st = er__chat_render(t, cm, n, add_generation_prompt, bosz, eosz, text_out, &len);
  er__chat_free(fallback);
  return st;
}

/* ======================================================================== */
/* Contexts                                                                  */
/* ======================================================================== */

void er_llm_context_options_init(er_llm_context_options *o) {
  memset(o, 0, sizeof *o);
  o->kv_type = ER_LLM_KV_F16;
}

static void *scratch(er_llm_context *c, size_t count, size_t size, bool *oom) {
  uint64_t bytes;
  if (!er__mul_u64(count, size, &bytes)) {
    *oom = true;
    return NULL;
  }
  void *p = er__aligned_alloc((size_t)bytes + 64);
  if (!p) *oom = true;
  c->scratch_bytes += bytes;
  return p;
}

er_status er_llm_context_create(const er_llm *m, const er_llm_context_options *opts, er_llm_context **ctx_out) {
  if (!m || !ctx_out) return er__error(ER_STATUS_INVALID_ARGUMENT, "llm and ctx_out must not be NULL");
  er_llm_context_options o;
  er_llm_context_options_init(&o);
  if (opts) o = *opts;
  const er_llm_hparams *hp = &m->hp;
  if (o.n_ctx == 0) o.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
  if (o.n_seq == 0) o.n_seq = 1;
  if (o.threads == 0) o.threads = 1;
  if (o.n_batch == 0) o.n_batch = 512;
  if (o.n_ctx < 1 || o.n_ctx > ER_LLM_MAX_CTX)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "n_ctx is %lld; it must be between 1 and %d (ER_LLM_MAX_CTX)",
                     (long long)o.n_ctx, ER_LLM_MAX_CTX);
  if (o.n_seq < 1 || o.n_seq > ER_LLM_MAX_SEQ)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "n_seq is %d; it must be between 1 and %d (ER_LLM_MAX_SEQ)", o.n_seq,
                     ER_LLM_MAX_SEQ);
  if (o.n_batch < 1 || o.n_batch > ER_LLM_MAX_BATCH)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "n_batch is %d; it must be between 1 and %d (ER_LLM_MAX_BATCH)",
                     o.n_batch, ER_LLM_MAX_BATCH);
  if (o.threads < 1 || o.threads > 256)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "threads is %d; it must be between 1 and 256", o.threads);
  if (o.kv_type != ER_LLM_KV_F16 && o.kv_type != ER_LLM_KV_Q8)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "kv_type %d is not a KV cache type", (int)o.kv_type);
  er_llm_context *c = calloc(1, sizeof *c);
  if (!c) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating an LLM context");
  c->llm = m;
  c->threads = o.threads;
  c->n_batch = o.n_batch;
  c->fp16 = o.fp16_activations;
  pthread_mutex_init(&c->lock, NULL);
  er_status st = er__kv_init(&c->kv, hp, o.kv_type, o.n_ctx, o.n_seq);
  if (st == ER_STATUS_OK) st = er__pool_create(o.threads, &c->pool);
  if (st != ER_STATUS_OK) {
    er_llm_context_free(c);
    return st;
  }
  size_t B = (size_t)o.n_batch, E = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
  size_t QW = (size_t)hp->n_head * (size_t)hp->head_dim, KW = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
  size_t widest = E > F ? E : F;
  if (QW > widest) widest = QW;
  /* The largest quantized row any product reads (the widest activation
   * in the fattest format). */
  size_t xq_row = widest * sizeof(float);
  const uint32_t formats[] = {ER_GGML_Q8_0, ER_GGML_Q8_1, ER_GGML_Q8_K};
  for (size_t i = 0; i < ER_ARRAY_LEN(formats); i++) {
    int64_t k = (int64_t)(widest + ER_QK_K - 1) / ER_QK_K * ER_QK_K;
    size_t b = er__qb_act_row_bytes(formats[i], k);
    if (b > xq_row) xq_row = b;
  }
  c->xq_row_bytes = xq_row;
  bool oom = false;
  c->x = scratch(c, B * E, sizeof(float), &oom);
  c->h = scratch(c, B * widest, sizeof(float), &oom);
  c->q = scratch(c, B * QW, sizeof(float), &oom);
  c->kk = scratch(c, B * KW, sizeof(float), &oom);
  c->vv = scratch(c, B * KW, sizeof(float), &oom);
  c->att = scratch(c, B * QW, sizeof(float), &oom);
  c->g = scratch(c, B * F, sizeof(float), &oom);
  c->u = scratch(c, B * F, sizeof(float), &oom);
  int group = hp->n_head / hp->n_head_kv;
  c->scores = scratch(c, (size_t)o.threads * (size_t)group * (size_t)o.n_ctx, sizeof(float), &oom);
  c->xq = scratch(c, B, xq_row, &oom);
  c->logits = scratch(c, B * (size_t)hp->n_vocab, sizeof(float), &oom);
  c->rope = scratch(c, B * (size_t)hp->n_rot, sizeof(float), &oom);
  c->pos = scratch(c, B, sizeof(int32_t), &oom);
  c->seq = scratch(c, B, sizeof(int32_t), &oom);
  if (oom) {
    uint64_t want = c->scratch_bytes;
    er_llm_context_free(c);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for %llu bytes of activation scratch (n_batch %d); lower "
                     "n_batch",
                     (unsigned long long)want, o.n_batch);
  }
  /* The products this model runs, for stats and `edgerun bench`. */
  const er_llm_weight *ws[] = {&m->layers[0].wq, &m->layers[0].wk, &m->layers[0].wv, &m->layers[0].wo,
                               &m->layers[0].gate, &m->layers[0].up, &m->layers[0].down, &m->output};
  size_t used = 0;
  for (size_t i = 0; i < ER_ARRAY_LEN(ws); i++) {
    const char *name = ws[i]->kernel->name;
    if (strstr(c->kernels, name)) continue;
    used += (size_t)snprintf(c->kernels + used, sizeof c->kernels - used, "%s%s", used ? ", " : "", name);
    if (used >= sizeof c->kernels) break;
  }
  *ctx_out = c;
  return ER_STATUS_OK;
}

void er_llm_context_free(er_llm_context *c) {
  if (!c) return;
  er__pool_free(c->pool);
  er__kv_free(&c->kv);
  float *bufs[] = {c->x, c->h, c->q, c->kk, c->vv, c->att, c->g, c->u, c->scores, c->logits, c->rope};
  for (size_t i = 0; i < ER_ARRAY_LEN(bufs); i++) er__aligned_free(bufs[i]);
  er__aligned_free(c->xq);
  er__aligned_free(c->pos);
  er__aligned_free(c->seq);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void er_llm_context_stats_get(const er_llm_context *c, er_llm_context_stats *s) {
  memset(s, 0, sizeof *s);
  s->n_ctx = c->kv.n_ctx;
  s->n_seq = c->kv.n_seq;
  s->threads = c->threads;
  s->n_batch = c->n_batch;
  s->kv_bytes = c->kv.bytes;
  s->scratch_bytes = c->scratch_bytes;
  s->kernels = c->kernels;
}

int64_t er_llm_seq_length(const er_llm_context *c, int seq) {
  if (!c || seq < 0 || seq >= c->kv.n_seq) return -1;
  return c->kv.len[seq];
}

er_status er_llm_seq_truncate(er_llm_context *c, int seq, int64_t keep) {
  if (!c) return er__error(ER_STATUS_INVALID_ARGUMENT, "ctx must not be NULL");
  if (seq < 0 || seq >= c->kv.n_seq)
    return er__error(ER_STATUS_OUT_OF_RANGE, "sequence %d: the context has %d (0..%d)", seq, c->kv.n_seq, c->kv.n_seq - 1);
  pthread_mutex_lock(&c->lock);
  if (keep < 0) keep = 0;
  if (keep < c->kv.len[seq]) c->kv.len[seq] = keep;
  pthread_mutex_unlock(&c->lock);
  return ER_STATUS_OK;
}

const float *er_llm_logits(const er_llm_context *c, size_t i) {
  if (!c || i >= c->n_logits) return NULL;
  return c->logits + i * (size_t)c->llm->hp.n_vocab;
}

/* Checks a whole batch before any of it runs, so a bad entry appends
 * nothing. */
static er_status check_batch(const er_llm_context *c, const er_llm_batch *b) {
  int64_t grow[ER_LLM_MAX_SEQ] = {0};
  for (size_t i = 0; i < b->n; i++) {
    if (b->seq[i] < 0 || b->seq[i] >= c->kv.n_seq)
      return er__error(ER_STATUS_OUT_OF_RANGE, "batch entry %zu: sequence %d; the context has %d", i, b->seq[i],
                       c->kv.n_seq);
    if (b->tokens[i] < 0 || b->tokens[i] >= c->llm->hp.n_vocab)
      return er__error(ER_STATUS_OUT_OF_RANGE, "batch entry %zu: token %d; the vocabulary has %lld", i, b->tokens[i],
                       (long long)c->llm->hp.n_vocab);
    grow[b->seq[i]]++;
  }
  for (int s = 0; s < c->kv.n_seq; s++)
    if (c->kv.len[s] + grow[s] > c->kv.n_ctx)
      return er__error(ER_STATUS_LIMIT, "sequence %d would hold %lld tokens; the context holds %lld (n_ctx)", s,
                       (long long)(c->kv.len[s] + grow[s]), (long long)c->kv.n_ctx);
  return ER_STATUS_OK;
}

er_status er_llm_decode(er_llm_context *c, const er_llm_batch *b) {
  if (!c || !b || (b->n && (!b->tokens || !b->seq)))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "ctx, batch, tokens and seq must not be NULL");
  pthread_mutex_lock(&c->lock);
  c->n_logits = 0;
  er_status st = check_batch(c, b);
  /* Which entries want logits: as asked, or each sequence's last. */
  bool *want = NULL;
  int32_t *pos = NULL;
  if (st == ER_STATUS_OK) {
    want = malloc(b->n + 1);
    pos = malloc((b->n + 1) * sizeof *pos);
    if (!want || !pos) st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a batch of %zu", b->n);
  }
  if (st == ER_STATUS_OK) {
    int64_t next[ER_LLM_MAX_SEQ];
    for (int s = 0; s < c->kv.n_seq; s++) next[s] = c->kv.len[s];
    for (size_t i = 0; i < b->n; i++) {
      pos[i] = (int32_t)next[b->seq[i]]++;
      if (b->logits) {
        want[i] = b->logits[i];
      } else {
        want[i] = true;
        for (size_t j = i + 1; j < b->n; j++)
          if (b->seq[j] == b->seq[i]) {
            want[i] = false;
            break;
          }
      }
    }
    /* Waves of n_batch entries. Logits of earlier waves are kept by
     * copying them to the front after each wave. */
    size_t done_logits = 0;
    for (size_t w0 = 0; w0 < b->n && st == ER_STATUS_OK; w0 += (size_t)c->n_batch) {
      size_t wn = b->n - w0 < (size_t)c->n_batch ? b->n - w0 : (size_t)c->n_batch;
      size_t wl = 0;
      for (size_t i = 0; i < wn; i++) wl += want[w0 + i];
      if (done_logits + wl > (size_t)c->n_batch) {
        st = er__error(ER_STATUS_LIMIT, "the batch asks for more than n_batch (%d) logits rows", c->n_batch);
        break;
      }
      /* The forward pass writes its logits at the buffer's start: earlier
       * waves' rows move up front after it. */
      float *save = NULL;
      if (done_logits && wl) {
        size_t bytes = done_logits * (size_t)c->llm->hp.n_vocab * sizeof(float);
        save = malloc(bytes);
        if (!save) {
          st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory keeping logits");
          break;
        }
        memcpy(save, c->logits, bytes);
      }
      st = er__llm_forward(c, b->tokens + w0, pos + w0, b->seq + w0, want + w0, wn);
      if (st == ER_STATUS_OK) {
        for (size_t i = 0; i < wn; i++) c->kv.len[b->seq[w0 + i]]++;
        if (save) {
          size_t row = (size_t)c->llm->hp.n_vocab;
          memmove(c->logits + done_logits * row, c->logits, wl * row * sizeof(float));
          memcpy(c->logits, save, done_logits * row * sizeof(float));
        } else if (done_logits) {
          /* Nothing new: the earlier rows are still in place. */
        }
        done_logits += wl;
      }
      free(save);
    }
    c->n_logits = st == ER_STATUS_OK ? done_logits : 0;
  }
  free(want);
  free(pos);
  pthread_mutex_unlock(&c->lock);
  return st;
}
