/* llm.c - LLM versions in the service: one engine per loaded model.gguf.
 *
 * The engine owns one er_llm_context whose KV cache holds `slots`
 * sequences of `ctx` positions, all allocated at load, so no request can
 * grow the service's memory. One thread runs the decode loop:
 *
 *   take queued requests into free slots (the slot whose cached tokens
 *   share the longest prefix with the prompt: a repeated system prompt is
 *   not computed again), then build one batch of every decoding slot's
 *   next token and the prompt tokens of slots still prefilling (up to
 *   n_batch in all), run it, sample each slot that produced logits, and
 *   hand the new text to its connection.
 *
 * So requests join between steps and leave when done (continuous
 * batching). A request whose connection went away, or whose deadline
 * passed, leaves at the next step. The engine never takes or drops a
 * version reference: the connections hold those, so the version (and the
 * engine) outlives every request it holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define MAX_PIECE 512
#define DRAIN_MARGIN_US 2000000   /* streams end this long before the drain timeout */

typedef struct slot {
  er__llm_req *req;          /* NULL = free */
  int32_t *cached;           /* the tokens the sequence holds [n_ctx] */
  int64_t n_cached;
  size_t fed;                /* prompt tokens in the cache */
  bool decoding;             /* the prompt is in: feed `next` */
  int32_t next;
  er_llm_sampler *sampler;
  er__sb gen;                /* all generated text */
  size_t emitted;            /* bytes of gen handed to the connection */
  int64_t t_prev;            /* time of the previous token */
  int64_t last_use;
} slot;

struct er__llm_engine {
  er__server *srv;           /* NULL when loaded outside the service (edgerun repo) */
  er__model_metrics *m;      /* the model's (or own_m) */
  er__model_metrics own_m;
  char name[ER_SERVE_MAX_NAME + 1];
  const er_llm *llm;
  er_llm_context *ctx;
  er__llm_config cfg;
  int64_t n_ctx;
  int n_slots;
  uint64_t kv_bytes;
  int64_t timeout_ms;
  int queue_cap;
  slot slots[ER_SERVE_MAX_SLOTS];
  /* batch scratch */
  int32_t *b_tok, *b_seq;
  bool *b_logits;
  int *b_owner;              /* slot of each flagged entry, in order */
  /* the queue */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  er__llm_req *q_head, *q_tail;
  int q_len;
  int n_active;              /* slots holding a request */
  bool stop, end_all;
  int end_all_done;          /* generations of end_all answered */
  pthread_cond_t ended;
  pthread_t thread;
  bool started;
};

/* ---- requests ------------------------------------------------------------ */

er__llm_req *er__llm_req_new(void) {
  er__llm_req *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  atomic_init(&r->refs, 1);
  pthread_mutex_init(&r->lock, NULL);
  return r;
}

void er__llm_req_unref(er__llm_req *r) {
  if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
  free(r->prompt);
  for (size_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
  er__sb_free(&r->text);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

/* Under r->lock. */
static void wake(er__llm_req *r) {
  if (r->gone) return;
  if (r->stream ? r->waiting : r->done) {
    r->waiting = false;
    if (r->wake) r->wake(r->wake_arg);
  }
}

static void count_finish(er__llm_engine *e, int finish) {
  atomic_fetch_add(&e->m->finish[finish], 1);
}

/* Marks a request failed with an HTTP status and message; wakes its connection. */
static void set_error(er__llm_req *r, int status, const char *msg) {
  pthread_mutex_lock(&r->lock);
  r->done = true;
  r->finish = ER__FIN_ERROR;
  r->status = status;
  r->t_done = er__now_us();
  snprintf(r->err, sizeof r->err, "%s", msg);
  wake(r);
  pthread_mutex_unlock(&r->lock);
}

/* Ends a request that never got a slot. */
static void fail_req(er__llm_engine *e, er__llm_req *r, int status, const char *msg) {
  count_finish(e, ER__FIN_ERROR);
  set_error(r, status, msg);
  er__llm_req_unref(r);
}

/* ---- stop strings and UTF-8 --------------------------------------------- */

/* Bytes at the end of p[0..n) that may start a stop string. */
static size_t stop_hold(const er__llm_req *r, const char *p, size_t n) {
  size_t hold = 0;
  for (size_t i = 0; i < r->n_stop; i++) {
    size_t sl = strlen(r->stop[i]);
    for (size_t k = sl > 1 ? sl - 1 : 0; k > hold; k--)
      if (k <= n && memcmp(p + n - k, r->stop[i], k) == 0) {
        hold = k;
        break;
      }
  }
  return hold;
}

/* Bytes at the end of p[0..n) that are an incomplete UTF-8 sequence. */
static size_t utf8_hold(const char *p, size_t n) {
  for (size_t k = 1; k <= 3 && k <= n; k++) {
    unsigned char c = (unsigned char)p[n - k];
    if ((c & 0xC0) == 0x80) continue;           /* continuation: look further back */
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > k ? k : 0;
  }
  return 0;
}

/* The earliest stop string in gen at or after `from`; -1 when none. */
static int64_t find_stop(const er__llm_req *r, const er__sb *gen, size_t from) {
  int64_t best = -1;
  for (size_t i = 0; i < r->n_stop; i++) {
    size_t sl = strlen(r->stop[i]);
    size_t start = from >= sl ? from - sl + 1 : 0;
    for (size_t at = start; at + sl <= gen->len; at++)
      if (memcmp(gen->p + at, r->stop[i], sl) == 0) {
        if (best < 0 || (int64_t)at < best) best = (int64_t)at;
        break;
      }
  }
  return best;
}

/* ---- slots ----------------------------------------------------------------- */

static void kv_gauge(er__llm_engine *e) {
  int64_t used = 0;
  for (int s = 0; s < e->n_slots; s++) used += e->slots[s].n_cached;
  atomic_store(&e->m->kv_used, used);
}

/* Hands text up to `upto` of gen to the connection; on `finish` >= 0 the
 * request is done. */
static void emit(er__llm_engine *e, slot *sl, size_t upto, int finish) {
  er__llm_req *r = sl->req;
  pthread_mutex_lock(&r->lock);
  if (upto > sl->emitted) {
    er__sb_put(&r->text, sl->gen.p + sl->emitted, upto - sl->emitted);
    sl->emitted = upto;
  }
  if (finish >= 0) {
    r->done = true;
    r->finish = finish;
    r->t_done = er__now_us();
    /* Counted before the connection is woken: a client that reads the
     * metrics right after its answer sees its own request in them. */
    count_finish(e, finish);
  }
  wake(r);
  pthread_mutex_unlock(&r->lock);
}

/* Frees the slot of a request already ended (and counted). */
static void release(er__llm_engine *e, slot *sl) {
  er__llm_req *r = sl->req;
  er_llm_sampler_free(sl->sampler);
  sl->sampler = NULL;
  er__sb_free(&sl->gen);
  sl->emitted = 0;
  sl->req = NULL;
  sl->decoding = false;
  sl->last_use = er__now_us();
  atomic_fetch_sub(&e->m->active, 1);
  pthread_mutex_lock(&e->lock);
  e->n_active--;
  pthread_mutex_unlock(&e->lock);
  er__llm_req_unref(r);
}

static void finish_slot(er__llm_engine *e, slot *sl, int finish) {
  emit(e, sl, sl->gen.len, finish);
  release(e, sl);
}

static void error_slot(er__llm_engine *e, slot *sl, int status, const char *msg) {
  count_finish(e, ER__FIN_ERROR);
  set_error(sl->req, status, msg);
  release(e, sl);
}

/* Puts a queued request into the free slot sharing the longest prefix of
 * its prompt (else the one unused longest). */
static bool admit(er__llm_engine *e, er__llm_req *r) {
  int best = -1;
  size_t best_common = 0;
  for (int s = 0; s < e->n_slots; s++) {
    slot *sl = &e->slots[s];
    if (sl->req) continue;
    size_t common = 0;
    if (e->cfg.prefix_cache)
      while (common < r->n_prompt && (int64_t)common < sl->n_cached && sl->cached[common] == r->prompt[common])
        common++;
    if (best < 0 || common > best_common ||
        (common == best_common && sl->last_use < e->slots[best].last_use)) {
      best = s;
      best_common = common;
    }
  }
  if (best < 0) return false;
  slot *sl = &e->slots[best];
  if (best_common >= r->n_prompt) best_common = r->n_prompt - 1;   /* one token to feed at least */
  if (er_llm_seq_truncate(e->ctx, best, (int64_t)best_common) != ER_STATUS_OK) best_common = 0;
  if (best_common == 0) er_llm_seq_truncate(e->ctx, best, 0);
  sl->n_cached = (int64_t)best_common;
  sl->fed = best_common;
  sl->decoding = false;
  sl->emitted = 0;
  memset(&sl->gen, 0, sizeof sl->gen);
  if (er_llm_sampler_create(e->llm, &r->sampling, &sl->sampler) != ER_STATUS_OK) {
    char msg[ER_SERVE_ERR];
    snprintf(msg, sizeof msg, "sampler: %s", er_last_error());
    fail_req(e, r, 400, msg);
    return true;
  }
  sl->req = r;
  sl->t_prev = 0;
  e->n_active++;   /* admit runs under e->lock */
  atomic_fetch_add(&e->m->active, 1);
  atomic_fetch_add(&e->m->prompt_tokens, r->n_prompt);
  atomic_fetch_add(&e->m->reused_tokens, best_common);
  pthread_mutex_lock(&r->lock);
  r->started = true;
  r->reused_tokens = (int64_t)best_common;
  pthread_mutex_unlock(&r->lock);
  return true;
}

/* After a token was sampled for slot sl: stop checks and emission.
 * Returns true when the slot goes on decoding. */
static bool take_token(er__llm_engine *e, slot *sl, int32_t tok) {
  er__llm_req *r = sl->req;
  int64_t now = er__now_us();
  er__model_metrics *m = e->m;
  if (!sl->t_prev) {
    pthread_mutex_lock(&r->lock);
    r->t_first = now;
    pthread_mutex_unlock(&r->lock);
    er__metrics_time(m->ttft_bucket, &m->ttft_sum_us, &m->ttft_count, now - r->t_submit);
  } else {
    er__metrics_time(m->tpot_bucket, &m->tpot_sum_us, &m->tpot_count, now - sl->t_prev);
  }
  sl->t_prev = now;
  if (er_llm_token_is_eog(e->llm, tok)) {
    finish_slot(e, sl, ER__FIN_STOP);
    return false;
  }
  atomic_fetch_add(&m->gen_tokens, 1);
  atomic_fetch_add(&m->gen_this_second, 1);
  pthread_mutex_lock(&r->lock);
  r->completion_tokens++;
  int64_t done_tokens = r->completion_tokens;
  pthread_mutex_unlock(&r->lock);
  char piece[MAX_PIECE];
  size_t pl = 0;
  if (er_llm_token_piece(e->llm, tok, false, piece, sizeof piece, &pl) != ER_STATUS_OK) pl = 0;
  size_t before = sl->gen.len;
  er__sb_put(&sl->gen, piece, pl);
  if (sl->gen.oom) {
    error_slot(e, sl, 503, "out of memory for the generated text");
    return false;
  }
  if (r->n_stop) {
    int64_t at = find_stop(r, &sl->gen, before);
    if (at >= 0) {
      emit(e, sl, (size_t)at, ER__FIN_STOP);
      release(e, sl);
      return false;
    }
  }
  if ((r->max_tokens > 0 && done_tokens >= r->max_tokens) || sl->n_cached + 1 > e->n_ctx) {
    finish_slot(e, sl, ER__FIN_LENGTH);
    return false;
  }
  size_t hold = stop_hold(r, sl->gen.p, sl->gen.len);
  size_t upto = sl->gen.len - hold;
  upto -= utf8_hold(sl->gen.p, upto);
  if (r->stream && upto > sl->emitted) emit(e, sl, upto, -1);
  sl->next = tok;
  sl->decoding = true;
  return true;
}

/* ---- the decode loop ---------------------------------------------------- */

static bool draining_late(er__llm_engine *e) {
  if (!e->srv) return false;
  int64_t t0 = atomic_load(&e->srv->drain_start_us);
  if (!t0) return false;
  int64_t limit = (int64_t)e->srv->opt.drain_timeout_s * 1000000 - DRAIN_MARGIN_US;
  return er__now_us() - t0 >= (limit > 0 ? limit : 0);
}

static void step(er__llm_engine *e) {
  int64_t now = er__now_us();
  /* Leavers: gone connections, passed deadlines, the drain's end. */
  bool late = draining_late(e);
  for (int s = 0; s < e->n_slots; s++) {
    slot *sl = &e->slots[s];
    if (!sl->req) continue;
    er__llm_req *r = sl->req;
    pthread_mutex_lock(&r->lock);
    bool gone = r->gone, closed = r->peer_closed;
    if (gone || closed) count_finish(e, ER__FIN_CANCELLED);
    if (closed && !gone) {   /* the connection waits suspended: end it so it can finish */
      r->done = true;
      r->finish = ER__FIN_CANCELLED;
      r->t_done = now;
      wake(r);
    }
    pthread_mutex_unlock(&r->lock);
    if (gone || closed) release(e, sl);
    else if (now > sl->req->deadline) {
      char msg[ER_SERVE_ERR];
      snprintf(msg, sizeof msg, "the request's deadline of %lld ms passed (config.json timeout_ms)",
               (long long)e->timeout_ms);
      error_slot(e, sl, 504, msg);
    } else if (late) {
      finish_slot(e, sl, ER__FIN_LENGTH);
    }
  }
  /* The batch: decoding slots first (one token each), then prompt chunks. */
  size_t n = 0, n_flag = 0;
  int cap = e->cfg.n_batch;
  for (int s = 0; s < e->n_slots && (int)n < cap; s++) {
    slot *sl = &e->slots[s];
    if (!sl->req || !sl->decoding) continue;
    e->b_tok[n] = sl->next;
    e->b_seq[n] = s;
    e->b_logits[n] = true;
    e->b_owner[n_flag++] = s;
    n++;
  }
  for (int s = 0; s < e->n_slots && (int)n < cap; s++) {
    slot *sl = &e->slots[s];
    if (!sl->req || sl->decoding) continue;
    size_t left = sl->req->n_prompt - sl->fed;
    size_t take = left < (size_t)cap - n ? left : (size_t)cap - n;
    for (size_t k = 0; k < take; k++) {
      e->b_tok[n] = sl->req->prompt[sl->fed + k];
      e->b_seq[n] = s;
      e->b_logits[n] = false;
      n++;
    }
    if (take == left) {
      e->b_logits[n - 1] = true;
      e->b_owner[n_flag++] = s;
    }
  }
  if (n == 0) return;
  /* Flagged entries must be read in entry order: the decoding slots come
   * first, then the prefill slots in slot order, as filled above. */
  er_llm_batch b = {n, e->b_tok, e->b_seq, e->b_logits};
  er_status st = er_llm_decode(e->ctx, &b);
  if (st != ER_STATUS_OK) {
    char msg[ER_SERVE_ERR];
    snprintf(msg, sizeof msg, "decode failed: %s (%s)", er_last_error(), er_status_name(st));
    er__serve_log(ER__LOG_ERROR, "llm_decode_failed", json_pack("{s:s,s:s}", "model", e->name, "error", msg),
                  "model '%s': %s", e->name, msg);
    for (size_t i = 0; i < n; i++) {
      slot *sl = &e->slots[e->b_seq[i]];
      if (sl->req) error_slot(e, sl, 500, msg);
      sl->n_cached = er_llm_seq_length(e->ctx, e->b_seq[i]);
      if (sl->n_cached < 0) sl->n_cached = 0;
    }
    kv_gauge(e);
    return;
  }
  /* The cache mirrors: what each slot now holds. */
  for (size_t i = 0; i < n; i++) {
    slot *sl = &e->slots[e->b_seq[i]];
    if (sl->n_cached < e->n_ctx) sl->cached[sl->n_cached++] = e->b_tok[i];
    if (!sl->decoding) sl->fed++;
  }
  for (size_t f = 0; f < n_flag; f++) {
    slot *sl = &e->slots[e->b_owner[f]];
    if (!sl->req) continue;
    const float *logits = er_llm_logits(e->ctx, f);
    int32_t tok;
    st = logits ? er_llm_sample(sl->sampler, logits, sl->cached, (size_t)sl->n_cached, &tok)
                : ER_STATUS_INTERNAL;
    if (st != ER_STATUS_OK) {
      char msg[ER_SERVE_ERR];
      snprintf(msg, sizeof msg, "sampling failed: %s", er_last_error());
      error_slot(e, sl, 500, msg);
      continue;
    }
    take_token(e, sl, tok);
  }
  kv_gauge(e);
}

static void *engine_main(void *p) {
  er__llm_engine *e = p;
  pthread_mutex_lock(&e->lock);
  for (;;) {
    int active = 0;
    for (int s = 0; s < e->n_slots; s++) active += e->slots[s].req != NULL;
    if (e->end_all || e->stop) {
      /* Everyone ends now: sequences with what they have, queued ones with 503. */
      er__llm_req *q = e->q_head;
      e->q_head = e->q_tail = NULL;
      e->q_len = 0;
      atomic_store(&e->m->queued, 0);
      pthread_mutex_unlock(&e->lock);
      for (int s = 0; s < e->n_slots; s++)
        if (e->slots[s].req) finish_slot(e, &e->slots[s], ER__FIN_LENGTH);
      while (q) {
        er__llm_req *nx = q->next;
        fail_req(e, q, 503, "the server is shutting down; send the request elsewhere");
        q = nx;
      }
      pthread_mutex_lock(&e->lock);
      if (e->stop) break;
      e->end_all = false;
      e->end_all_done++;
      pthread_cond_broadcast(&e->ended);
      continue;
    }
    if (!active && !e->q_head) {
      pthread_cond_wait(&e->cond, &e->lock);
      continue;
    }
    while (e->q_head && active < e->n_slots) {
      er__llm_req *r = e->q_head;
      e->q_head = r->next;
      if (!e->q_head) e->q_tail = NULL;
      e->q_len--;
      r->next = NULL;
      if (admit(e, r)) active++;
    }
    atomic_store(&e->m->queued, e->q_len);
    pthread_mutex_unlock(&e->lock);
    step(e);
    pthread_mutex_lock(&e->lock);
  }
  pthread_mutex_unlock(&e->lock);
  return NULL;
}

int er__llm_submit(er__llm_engine *e, er__llm_req *r, void (*on_accept)(void *arg), void *arg,
                   char *err, size_t errsz) {
  pthread_mutex_lock(&e->lock);
  int active = e->n_active;
  if (e->stop || (e->srv && atomic_load(&e->srv->draining))) {
    pthread_mutex_unlock(&e->lock);
    snprintf(err, errsz, "the server is shutting down; send the request elsewhere");
    return 503;
  }
  /* A request beyond the free slots waits in the bounded queue. */
  if (active + e->q_len >= e->n_slots + e->queue_cap) {
    pthread_mutex_unlock(&e->lock);
    snprintf(err, errsz, "model '%s' is busy: %d sequences decoding and %d requests queued "
                         "(config.json slots %d, queue_size %d); retry shortly",
             e->name, active, e->q_len, e->n_slots, e->queue_cap);
    return 429;
  }
  if (on_accept) on_accept(arg);
  if (!r->t_submit) r->t_submit = er__now_us();
  r->deadline = r->t_submit + e->timeout_ms * 1000;
  r->next = NULL;
  if (e->q_tail) e->q_tail->next = r;
  else e->q_head = r;
  e->q_tail = r;
  e->q_len++;
  atomic_store(&e->m->queued, e->q_len);
  pthread_cond_signal(&e->cond);
  pthread_mutex_unlock(&e->lock);
  return 0;
}

void er__llm_engine_end_all(er__llm_engine *e) {
  if (!e || !e->started) return;
  pthread_mutex_lock(&e->lock);
  int gen = e->end_all_done;
  e->end_all = true;
  pthread_cond_signal(&e->cond);
  while (e->end_all_done == gen && !e->stop) pthread_cond_wait(&e->ended, &e->lock);
  pthread_mutex_unlock(&e->lock);
}

void er__llm_engine_info(const er__llm_engine *e, int64_t *n_ctx, int *slots, uint64_t *kv_bytes) {
  if (n_ctx) *n_ctx = e->n_ctx;
  if (slots) *slots = e->n_slots;
  if (kv_bytes) *kv_bytes = e->kv_bytes;
}

const er__llm_config *er__llm_engine_config(const er__llm_engine *e) { return &e->cfg; }

void er__llm_engine_free(er__llm_engine *e) {
  if (!e) return;
  if (e->started) {
    pthread_mutex_lock(&e->lock);
    e->stop = true;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    atomic_fetch_sub(&e->m->kv_total, e->n_ctx * e->n_slots);
  }
  for (int s = 0; s < e->n_slots; s++) {
    free(e->slots[s].cached);
    er_llm_sampler_free(e->slots[s].sampler);
    er__sb_free(&e->slots[s].gen);
  }
  er_llm_context_free(e->ctx);
  free(e->b_tok);
  free(e->b_seq);
  free(e->b_logits);
  free(e->b_owner);
  pthread_mutex_destroy(&e->lock);
  pthread_cond_destroy(&e->cond);
  pthread_cond_destroy(&e->ended);
  free(e);
}

/* ---- loading ------------------------------------------------------------ */

bool er__llm_version_load(er__version *v, const char *path, const er__model_config *cfg,
                          er__model *owner, er__server *srv, char *err, size_t errsz) {
  er_status st = er_llm_load(path, NULL, &v->llm);
  if (st != ER_STATUS_OK) {
    snprintf(err, errsz, "load failed: %s (%s)", er_last_error(), er_status_name(st));
    return false;
  }
  er__llm_engine *e = calloc(1, sizeof *e);
  if (!e) {
    snprintf(err, errsz, "out of memory");
    return false;
  }
  v->engine = e;
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->cond, NULL);
  pthread_cond_init(&e->ended, NULL);
  e->srv = srv;
  e->m = owner ? &owner->m : &e->own_m;
  snprintf(e->name, sizeof e->name, "%s", owner ? owner->name : "model");
  e->llm = v->llm;
  e->cfg = cfg->llm;
  e->queue_cap = cfg->queue_size;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cfg->threads_given ? cfg->threads : (int)(cores > 0 ? cores : 1);
  e->timeout_ms = cfg->timeout_given ? cfg->timeout_ms : 300000;
  er_llm_context_options co;
  er_llm_context_options_init(&co);
  co.n_ctx = cfg->llm.ctx;
  co.n_seq = cfg->llm.slots;
  co.threads = threads;
  co.n_batch = cfg->llm.n_batch;
  co.kv_type = (er_llm_kv_type)cfg->llm.kv_type;
  st = er_llm_context_create(v->llm, &co, &e->ctx);
  if (st != ER_STATUS_OK) {
    snprintf(err, errsz, "context of %d slots: %s (%s)", co.n_seq, er_last_error(), er_status_name(st));
    return false;
  }
  er_llm_context_stats cs;
  er_llm_context_stats_get(e->ctx, &cs);
  e->n_ctx = cs.n_ctx;
  e->n_slots = cs.n_seq;
  e->kv_bytes = cs.kv_bytes;
  e->cfg.n_batch = cs.n_batch;
  if (e->cfg.max_prompt_tokens <= 0 || e->cfg.max_prompt_tokens >= e->n_ctx)
    e->cfg.max_prompt_tokens = e->n_ctx - 1;
  size_t nb = (size_t)cs.n_batch;
  e->b_tok = malloc(nb * sizeof *e->b_tok);
  e->b_seq = malloc(nb * sizeof *e->b_seq);
  e->b_logits = malloc(nb * sizeof *e->b_logits);
  e->b_owner = malloc(nb * sizeof *e->b_owner);
  bool ok = e->b_tok && e->b_seq && e->b_logits && e->b_owner;
  for (int s = 0; ok && s < e->n_slots; s++)
    ok = (e->slots[s].cached = malloc((size_t)e->n_ctx * sizeof(int32_t))) != NULL;
  if (!ok) {
    snprintf(err, errsz, "out of memory for %d slots of %lld positions", e->n_slots, (long long)e->n_ctx);
    return false;
  }
  /* Warm-up: one token through the model, which touches every weight. */
  er_llm_info info;
  er_llm_info_get(v->llm, &info);
  int32_t tok = info.bos >= 0 ? info.bos : 0, seq = 0;
  er_llm_batch b = {1, &tok, &seq, NULL};
  st = er_llm_decode(e->ctx, &b);
  er_llm_seq_truncate(e->ctx, 0, 0);
  if (st != ER_STATUS_OK) {
    snprintf(err, errsz, "warm-up decode failed: %s (%s)", er_last_error(), er_status_name(st));
    return false;
  }
  if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
    snprintf(err, errsz, "cannot start the decode thread");
    return false;
  }
  e->started = true;
  atomic_fetch_add(&e->m->kv_total, e->n_ctx * e->n_slots);
  atomic_store(&e->m->kv_bytes, e->kv_bytes);
  return true;
}

/* ---- metrics ------------------------------------------------------------- */

static const char *fin_names[4] = {"stop", "length", "cancelled", "error"};

static void time_hist(er__sb *o, const char *name, const char *model, const atomic_ullong *bucket,
                      const atomic_ullong *sum_us, const atomic_ullong *count) {
  static const double le[ER__LAT_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                             0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  unsigned long long acc = 0;
  for (int b = 0; b < ER__LAT_BUCKETS; b++) {
    acc += atomic_load(&bucket[b]);
    er__sb_printf(o, "%s_bucket{model=\"%s\",le=\"%g\"} %llu\n", name, model, le[b], acc);
  }
  acc += atomic_load(&bucket[ER__LAT_BUCKETS]);
  er__sb_printf(o, "%s_bucket{model=\"%s\",le=\"+Inf\"} %llu\n", name, model, acc);
  er__sb_printf(o, "%s_sum{model=\"%s\"} %.6f\n%s_count{model=\"%s\"} %llu\n", name, model,
                (double)atomic_load(sum_us) * 1e-6, name, model, atomic_load(count));
}

void er__llm_metrics_write(er__server *srv, er__sb *o) {
  int nm = atomic_load(&srv->n_models);
  static const struct { const char *name, *type, *help; } fam[] = {
      {"edgerun_llm_prompt_tokens_total", "counter", "Prompt tokens of admitted requests."},
      {"edgerun_llm_prompt_tokens_reused_total", "counter", "Prompt tokens found in a slot's cache (not computed again)."},
      {"edgerun_llm_generated_tokens_total", "counter", "Tokens generated."},
      {"edgerun_llm_requests_finished_total", "counter", "Generation requests by how they ended."},
      {"edgerun_llm_sequences_active", "gauge", "Sequences being decoded."},
      {"edgerun_llm_requests_queued", "gauge", "Requests waiting for a free slot."},
      {"edgerun_llm_kv_cache_used_ratio", "gauge", "Positions of the KV cache held by sequences, of all."},
      {"edgerun_llm_kv_cache_bytes", "gauge", "Bytes of the KV cache, allocated at load."},
      {"edgerun_llm_time_to_first_token_seconds", "histogram", "From the request's arrival to its first token."},
      {"edgerun_llm_time_per_output_token_seconds", "histogram", "Between consecutive tokens of one request."},
  };
  for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
    bool headed = false;
    for (int i = 0; i < nm; i++) {
      er__model *m = srv->models[i];
      er__model_metrics *mm = &m->m;
      if (!atomic_load(&mm->kv_total) && !atomic_load(&mm->prompt_tokens)) continue;
      if (!headed) er__sb_printf(o, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name, fam[f].help, fam[f].name, fam[f].type);
      headed = true;
      const char *n = m->name;   /* names are [A-Za-z0-9_.-]: no escaping needed */
      switch (f) {
        case 0: er__sb_printf(o, "%s{model=\"%s\"} %llu\n", fam[f].name, n, atomic_load(&mm->prompt_tokens)); break;
        case 1: er__sb_printf(o, "%s{model=\"%s\"} %llu\n", fam[f].name, n, atomic_load(&mm->reused_tokens)); break;
        case 2: er__sb_printf(o, "%s{model=\"%s\"} %llu\n", fam[f].name, n, atomic_load(&mm->gen_tokens)); break;
        case 3:
          for (int k = 0; k < 4; k++)
            er__sb_printf(o, "%s{model=\"%s\",reason=\"%s\"} %llu\n", fam[f].name, n, fin_names[k],
                          atomic_load(&mm->finish[k]));
          break;
        case 4: er__sb_printf(o, "%s{model=\"%s\"} %d\n", fam[f].name, n, atomic_load(&mm->active)); break;
        case 5: er__sb_printf(o, "%s{model=\"%s\"} %d\n", fam[f].name, n, atomic_load(&mm->queued)); break;
        case 6: {
          long long tot = atomic_load(&mm->kv_total);
          er__sb_printf(o, "%s{model=\"%s\"} %.6f\n", fam[f].name, n, tot > 0 ? (double)atomic_load(&mm->kv_used) / (double)tot : 0.0);
          break;
        }
        case 7: er__sb_printf(o, "%s{model=\"%s\"} %llu\n", fam[f].name, n, atomic_load(&mm->kv_bytes)); break;
        case 8: time_hist(o, fam[f].name, n, mm->ttft_bucket, &mm->ttft_sum_us, &mm->ttft_count); break;
        default: time_hist(o, fam[f].name, n, mm->tpot_bucket, &mm->tpot_sum_us, &mm->tpot_count); break;
      }
    }
  }
}
