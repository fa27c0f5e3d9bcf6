/* sample.c - the sampler chain and generation.
 *
 * The chain is a sequence of small steps over one candidate array (id,
 * logit, then probability), each a function: penalties -> top-k -> top-p
 * -> min-p -> temperature -> draw. Greedy (temperature 0) is the argmax of
 * the penalized logits, ties to the lower id. The draw uses a 64-bit
 * xorshift-multiply generator seeded by the options: the same seed and
 * logits give the same token on every machine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/llm-impl.h"

typedef struct cand {
  int32_t id;
  float logit;
  float p;
} cand;

struct er_llm_sampler {
  er_llm_sampler_options o;
  int64_t n_vocab;
  cand *c;                    /* [n_vocab] */
  float *logit;               /* [n_vocab] penalized copy */
  uint32_t *count;            /* [n_vocab] occurrences in the penalty window */
  uint64_t rng;
};

void er_llm_sampler_options_init(er_llm_sampler_options *o) {
  memset(o, 0, sizeof *o);
  o->temperature = 0.8f;
  o->top_k = 40;
  o->top_p = 0.95f;
  o->min_p = 0.05f;
  o->repeat_penalty = 1.0f;
  o->penalty_last_n = 64;
}

static uint64_t next_u64(uint64_t *s) {
  /* splitmix64: simple, seedable with any value (0 included). */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

er_status er_llm_sampler_create(const er_llm *m, const er_llm_sampler_options *opts, er_llm_sampler **out) {
  if (!m || !out) return er__error(ER_STATUS_INVALID_ARGUMENT, "llm and sampler_out must not be NULL");
  er_llm_sampler_options o;
  er_llm_sampler_options_init(&o);
  if (opts) o = *opts;
  if (!(o.temperature >= 0.0f) || o.temperature > 100.0f)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "temperature %g: it must be between 0 and 100", (double)o.temperature);
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "top_p %g: it must be in (0, 1]", (double)o.top_p);
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "min_p %g: it must be in [0, 1]", (double)o.min_p);
  if (o.top_k < 0) return er__error(ER_STATUS_INVALID_ARGUMENT, "top_k %d: it must not be negative", o.top_k);
  if (!(o.repeat_penalty > 0.0f && o.repeat_penalty <= 100.0f))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "repeat_penalty %g: it must be in (0, 100]", (double)o.repeat_penalty);
  if (!(fabsf(o.presence_penalty) <= 2.0f) || !(fabsf(o.frequency_penalty) <= 2.0f))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "presence and frequency penalties must be between -2 and 2 (%g, %g)",
                     (double)o.presence_penalty, (double)o.frequency_penalty);
  if (o.penalty_last_n < 0)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "penalty_last_n %d: it must not be negative", o.penalty_last_n);
  er_llm_sampler *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a sampler");
  s->o = o;
  s->n_vocab = m->hp.n_vocab;
  s->c = malloc((size_t)s->n_vocab * sizeof *s->c);
  s->logit = malloc((size_t)s->n_vocab * sizeof *s->logit);
  s->count = calloc((size_t)s->n_vocab, sizeof *s->count);
  if (!s->c || !s->logit || !s->count) {
    er_llm_sampler_free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a sampler for %lld tokens", (long long)m->hp.n_vocab);
  }
  s->rng = o.seed;
  *out = s;
  return ER_STATUS_OK;
}

void er_llm_sampler_free(er_llm_sampler *s) {
  if (!s) return;
  free(s->c);
  free(s->logit);
  free(s->count);
  free(s);
}

/* ---- the steps ------------------------------------------------------------- */

/* llama.cpp's repetition penalty (a seen token's logit divided by the
 * penalty when positive, multiplied when negative) and OpenAI's presence
 * and frequency penalties, over the last penalty_last_n tokens. */
static void penalize(er_llm_sampler *s, const int32_t *hist, size_t n_hist) {
  const er_llm_sampler_options *o = &s->o;
  if (o->penalty_last_n == 0 || n_hist == 0 ||
      (o->repeat_penalty == 1.0f && o->presence_penalty == 0.0f && o->frequency_penalty == 0.0f))
    return;
  size_t from = n_hist > (size_t)o->penalty_last_n ? n_hist - (size_t)o->penalty_last_n : 0;
  for (size_t i = from; i < n_hist; i++)
    if (hist[i] >= 0 && hist[i] < s->n_vocab) s->count[hist[i]]++;
  for (size_t i = from; i < n_hist; i++) {
    int32_t t = hist[i];
    if (t < 0 || t >= s->n_vocab || s->count[t] == 0) continue;
    float l = s->logit[t];
    l = l > 0 ? l / o->repeat_penalty : l * o->repeat_penalty;
    l -= (float)s->count[t] * o->frequency_penalty + o->presence_penalty;
    s->logit[t] = l;
    s->count[t] = 0; /* applied once per token */
  }
}

static int by_logit(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* The k largest logits first, sorted (ties to the lower id); returns k. */
static size_t top_k(cand *c, size_t n, size_t k) {
  if (k == 0 || k > n) k = n;
  /* Partial selection: a bounded heap would do; a full sort of the
   * vocabulary is ~2 ms on 150k tokens, so select with nth-element
   * passes when k is small. */
  if (k < n && k <= 1024) {
    /* Keep the k best in c[0..k) by repeated replacement of the worst. */
    qsort(c, k, sizeof *c, by_logit);
    for (size_t i = k; i < n; i++) {
      if (by_logit(&c[i], &c[k - 1]) >= 0) continue;
      /* Insert c[i] into the sorted prefix. */
      cand v = c[i];
      size_t j = k - 1;
      while (j > 0 && by_logit(&v, &c[j - 1]) < 0) {
        c[j] = c[j - 1];
        j--;
      }
      c[j] = v;
    }
    return k;
  }
  qsort(c, n, sizeof *c, by_logit);
  return k;
}

/* Probabilities of the first n candidates (sorted) at temperature t. */
static void softmax_c(cand *c, size_t n, float t) {
  double sum = 0.0;
  float mx = c[0].logit;
  for (size_t i = 0; i < n; i++) {
    c[i].p = expf((c[i].logit - mx) / t);
    sum += c[i].p;
  }
  for (size_t i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

er_status er_llm_sample(er_llm_sampler *s, const float *logits, const int32_t *hist, size_t n_hist, int32_t *out) {
  if (!s || !logits || !out || (!hist && n_hist))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "sampler, logits and token_out must not be NULL");
  const size_t n = (size_t)s->n_vocab;
  for (size_t i = 0; i < n; i++) {
    if (isnan(logits[i]))
      return er__error(ER_STATUS_INVALID_ARGUMENT, "logit %zu is NaN; the model's output is broken (nothing sampled)", i);
    s->logit[i] = logits[i];
  }
  penalize(s, hist, n_hist);
  const er_llm_sampler_options *o = &s->o;
  if (o->temperature == 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
      if (s->logit[i] > s->logit[best]) best = i;
    *out = (int32_t)best;
    return ER_STATUS_OK;
  }
  for (size_t i = 0; i < n; i++) s->c[i] = (cand){(int32_t)i, s->logit[i], 0.0f};
  size_t k = top_k(s->c, n, o->top_k > 0 ? (size_t)o->top_k : n);
  /* top-p and min-p on the probabilities at temperature 1 (llama.cpp's
   * order puts temperature last), then the draw at the temperature. */
  softmax_c(s->c, k, 1.0f);
  if (o->top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = k;
    for (size_t i = 0; i < k; i++) {
      cum += s->c[i].p;
      if (cum >= o->top_p) {
        keep = i + 1;
        break;
      }
    }
    k = keep;
  }
  if (o->min_p > 0.0f) {
    float floor_p = s->c[0].p * o->min_p;
    size_t keep = 1;
    while (keep < k && s->c[keep].p >= floor_p) keep++;
    k = keep;
  }
  softmax_c(s->c, k, o->temperature);
  /* A uniform in [0, 1) from the top 53 bits. */
  double r = (double)(next_u64(&s->rng) >> 11) * 0x1p-53, cum = 0.0;
  size_t pick = k - 1;
  for (size_t i = 0; i < k; i++) {
    cum += s->c[i].p;
    if (r < cum) {
      pick = i;
      break;
    }
  }
  *out = s->c[pick].id;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Generation                                                                */
/* ======================================================================== */

void er_llm_generate_options_init(er_llm_generate_options *o) {
  memset(o, 0, sizeof *o);
  o->max_tokens = 256;
  er_llm_sampler_options_init(&o->sampling);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Stop strings over streamed text: text not yet passed to the callback is
 * held in `pending` while it could still be the start of a stop string, so
 * a stop string never reaches the caller, not even in part. */

/* The offset of the first complete stop string in p[0..n), or -1. */
static int64_t find_stop(const char *p, size_t n, const er_llm_generate_options *o) {
  int64_t best = -1;
  for (size_t i = 0; i < o->n_stop; i++) {
    size_t sl = strlen(o->stop[i]);
    if (sl == 0 || sl > n) continue;
    for (size_t at = 0; at + sl <= n; at++)
      if (memcmp(p + at, o->stop[i], sl) == 0) {
        if (best < 0 || (int64_t)at < best) best = (int64_t)at;
        break;
      }
  }
  return best;
}

/* Bytes at the end of p[0..n) that are a proper prefix of a stop string. */
static size_t held_back(const char *p, size_t n, const er_llm_generate_options *o) {
  size_t hold = 0;
  for (size_t i = 0; i < o->n_stop; i++) {
    size_t sl = strlen(o->stop[i]);
    for (size_t k = sl > 0 ? sl - 1 : 0; k > hold; k--)
      if (k <= n && memcmp(p + n - k, o->stop[i], k) == 0) {
        hold = k;
        break;
      }
  }
  return hold;
}

er_status er_llm_generate(er_llm_context *ctx, int seq, const int32_t *prompt, size_t n_prompt,
                          const er_llm_generate_options *opts, er_llm_token_fn fn, void *user,
                          er_llm_generate_result *result_out) {
  if (!ctx || (!prompt && n_prompt)) return er__error(ER_STATUS_INVALID_ARGUMENT, "ctx and prompt must not be NULL");
  if (n_prompt == 0) return er__error(ER_STATUS_INVALID_ARGUMENT, "the prompt is empty: generation needs one token at least");
  er_llm_generate_options o;
  er_llm_generate_options_init(&o);
  if (opts) o = *opts;
  if (o.max_tokens < 0) return er__error(ER_STATUS_INVALID_ARGUMENT, "max_tokens %lld is negative", (long long)o.max_tokens);
  for (size_t i = 0; i < o.n_stop; i++)
    if (!o.stop[i] || strlen(o.stop[i]) > 1024)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "stop string %zu is NULL or longer than 1024 bytes", i);
  const er_llm *m = ctx->llm;
  er_llm_generate_result res = {0};
  res.prompt_tokens = (int64_t)n_prompt;
  res.finish = ER_LLM_FINISH_LENGTH;
  if (seq < 0 || seq >= ctx->kv.n_seq)
    return er__error(ER_STATUS_OUT_OF_RANGE, "sequence %d: the context has %d", seq, ctx->kv.n_seq);
  if (er_llm_seq_length(ctx, seq) + (int64_t)n_prompt > ctx->kv.n_ctx)
    return er__error(ER_STATUS_LIMIT, "the prompt of %zu tokens does not fit: sequence %d holds %lld of %lld positions "
                     "(n_ctx)",
                     n_prompt, seq, (long long)er_llm_seq_length(ctx, seq), (long long)ctx->kv.n_ctx);
  er_llm_sampler *s = NULL;
  ER_CHECK(er_llm_sampler_create(m, &o.sampling, &s));
  size_t hist_cap = n_prompt + (size_t)(o.max_tokens > 0 ? o.max_tokens : 0) + 1;
  int32_t *hist = malloc(hist_cap * sizeof *hist);
  int32_t *seqs = malloc(n_prompt * sizeof *seqs);
  /* Pending text: at most the longest stop string plus one piece. */
  char *text = malloc(1024 + 512 + 64);
  size_t text_len = 0;
  er_status st = hist && seqs && text ? ER_STATUS_OK : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory generating");
  if (st == ER_STATUS_OK) {
    memcpy(hist, prompt, n_prompt * sizeof *hist);
    for (size_t i = 0; i < n_prompt; i++) seqs[i] = seq;
  }
  size_t n_hist = n_prompt;
  double t0 = now_ms(), t1 = t0;
  er_llm_batch b = {n_prompt, prompt, seqs, NULL};
  if (st == ER_STATUS_OK) st = er_llm_decode(ctx, &b);
  t1 = now_ms();
  res.prompt_ms = t1 - t0;
  for (int64_t i = 0; st == ER_STATUS_OK && i < o.max_tokens; i++) {
    int32_t tok;
    st = er_llm_sample(s, er_llm_logits(ctx, 0), hist, n_hist, &tok);
    if (st != ER_STATUS_OK) break;
    if (!o.ignore_eos && er__tok_is_eog(m->tok, tok)) {
      res.finish = ER_LLM_FINISH_STOP;
      break;
    }
    hist[n_hist++] = tok;
    res.completion_tokens++;
    char piece[512];
    size_t pl = 0;
    if (er__tok_piece(m->tok, tok, false, piece, sizeof piece, &pl) != ER_STATUS_OK) {
      er__error_clear();
      pl = 0;
    }
    bool go_on = true;
    if (o.n_stop) {
      memcpy(text + text_len, piece, pl);
      text_len += pl;
      int64_t at = find_stop(text, text_len, &o);
      if (at >= 0) {
        /* What precedes the stop string still goes out; the token stays
         * in the cache, so a next turn continues from it. */
        if (fn && at > 0) fn(user, tok, text, (size_t)at);
        res.finish = ER_LLM_FINISH_STOP;
        er_llm_batch one = {1, &tok, &seq, NULL};
        st = er_llm_decode(ctx, &one);
        text_len = 0;
        break;
      }
      size_t hold = held_back(text, text_len, &o);
      if (fn && text_len > hold) go_on = fn(user, tok, text, text_len - hold);
      memmove(text, text + text_len - hold, hold);
      text_len = hold;
    } else if (fn) {
      go_on = fn(user, tok, piece, pl);
    }
    if (!go_on) {
      res.finish = ER_LLM_FINISH_CALLBACK;
      er_llm_batch one = {1, &tok, &seq, NULL};
      st = er_llm_decode(ctx, &one);
      break;
    }
    if (er_llm_seq_length(ctx, seq) >= ctx->kv.n_ctx) break; /* the context is full: LENGTH */
    er_llm_batch one = {1, &tok, &seq, NULL};
    st = er_llm_decode(ctx, &one);
  }
  /* Text held back for a stop string that never came. */
  if (st == ER_STATUS_OK && fn && text_len && res.finish != ER_LLM_FINISH_CALLBACK)
    fn(user, n_hist > n_prompt ? hist[n_hist - 1] : -1, text, text_len);
  res.decode_ms = now_ms() - t1;
  free(hist);
  free(seqs);
  free(text);
  er_llm_sampler_free(s);
  if (result_out) *result_out = res;
  return st;
}
