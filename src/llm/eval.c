/* eval.c - a model measured on text: perplexity with llama.cpp's chunking
 * rule, and beside a baseline (the float model a quantized one came from)
 * the next-token argmax agreement and the KL divergence, position by
 * position. The quantizer's perplexity budget and `edgerun eval`'s gate
 * both stand on this.
 *
 * The chunking is llama-perplexity's, so the figures compare with it:
 *  - the text is cut into floor(tokens / n_ctx) chunks (at most
 *    max_chunks), each run on an empty cache with its first token replaced
 *    by BOS when the text starts with BOS;
 *  - only the second half of each chunk is scored: the logits at positions
 *    n_ctx/2 .. n_ctx-2 predict the tokens after them;
 *  - PPL = exp(mean negative log-likelihood), its error from the variance
 *    of the per-token values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm-impl.h"

void er_llm_eval_options_init(er_llm_eval_options *o) {
  memset(o, 0, sizeof *o);
  o->n_ctx = 512;
  o->threads = 1;
}

/* -log p(tok) under softmax(logits) as llama.cpp computes it: the sum of
 * exponentials in double, each term in float. */
static double nll_of(const float *logits, int64_t n_vocab, int32_t tok) {
  float mx = logits[0];
  for (int64_t i = 1; i < n_vocab; i++)
    if (logits[i] > mx) mx = logits[i];
  double sum = 0.0;
  for (int64_t i = 0; i < n_vocab; i++) sum += expf(logits[i] - mx);
  return -((double)(logits[tok] - mx) - log(sum));
}

static int64_t argmax(const float *v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

/* log-softmax of n logits into out, in double. */
static void log_softmax(const float *logits, int64_t n, double *out) {
  float mx = logits[0];
  for (int64_t i = 1; i < n; i++)
    if (logits[i] > mx) mx = logits[i];
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
  const double lse = log(sum) + mx;
  for (int64_t i = 0; i < n; i++) out[i] = (double)logits[i] - lse;
}

/* KL(p || q) of two log-probability rows. */
static double kld(const double *lp, const double *lq, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += exp(lp[i]) * (lp[i] - lq[i]);
  return s > 0 ? s : 0.0;
}

typedef struct stat_acc {
  double nll, nll2;
  int64_t count;
} stat_acc;

static void acc_add(stat_acc *a, double v) {
  a->nll += v;
  a->nll2 += v * v;
  a->count++;
}

static void acc_result(const stat_acc *a, double *ppl, double *err) {
  double mean = a->nll / (double)a->count, var = a->nll2 / (double)a->count - mean * mean;
  *ppl = exp(mean);
  *err = a->count > 1 && var > 0 ? sqrt(var / (double)(a->count - 1)) * exp(mean) : 0.0;
}

static er_status make_ctx(const er_llm *m, const er_llm_eval_options *o, int n_batch, bool fp16,
                          er_llm_context **out) {
  er_llm_context_options co;
  er_llm_context_options_init(&co);
  co.n_ctx = o->n_ctx;
  co.n_batch = n_batch;
  co.threads = o->threads < 1 ? 1 : o->threads;
  co.kv_type = o->kv_type;
  co.fp16_activations = fp16;
  return er_llm_context_create(m, &co, out);
}

er_status er_llm_evaluate(const er_llm *model, const er_llm *baseline, const int32_t *tokens, size_t n_tokens,
                          const er_llm_eval_options *opts, er_llm_eval_result *res) {
  if (!model || !tokens || !res) return er__error(ER_STATUS_INVALID_ARGUMENT, "model, tokens and result must not be NULL");
  er_llm_eval_options o;
  er_llm_eval_options_init(&o);
  if (opts) o = *opts;
  if (o.n_ctx == 0) o.n_ctx = 512;
  if (o.n_ctx < 4) return er__error(ER_STATUS_INVALID_ARGUMENT, "chunks of %lld tokens are too short (at least 4)",
                                    (long long)o.n_ctx);
  if (baseline && baseline->hp.n_vocab != model->hp.n_vocab)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "the baseline has %lld tokens in its vocabulary, the model %lld: "
                     "they must share one", (long long)baseline->hp.n_vocab, (long long)model->hp.n_vocab);
  if ((int64_t)n_tokens < 2 * o.n_ctx)
    return er__error(ER_STATUS_LIMIT, "the text has %zu tokens; chunks of %lld need at least %lld", n_tokens,
                     (long long)o.n_ctx, (long long)(2 * o.n_ctx));
  for (size_t i = 0; i < n_tokens; i++)
    if (tokens[i] < 0 || tokens[i] >= model->hp.n_vocab)
      return er__error(ER_STATUS_OUT_OF_RANGE, "token %zu is %d, outside the vocabulary (0..%lld)", i, tokens[i],
                       (long long)model->hp.n_vocab - 1);
  int64_t n_chunks = (int64_t)n_tokens / o.n_ctx;
  if (o.max_chunks > 0 && o.max_chunks < n_chunks) n_chunks = o.max_chunks;
  const int64_t V = model->hp.n_vocab, first = o.n_ctx / 2;
  /* With a baseline, each pass's wanted rows of its logits are kept while
   * the model runs the same pass: fewer tokens per pass keep that small. */
  int64_t B = o.n_batch > 0 ? o.n_batch : baseline ? 128 : 512;
  if (B > o.n_ctx) B = o.n_ctx;
  er_llm_info info;
  er_llm_info_get(model, &info);
  const bool add_bos = info.bos >= 0 && tokens[0] == info.bos;
  const int32_t bos = info.bos;
  er_llm_context *cm = NULL, *cb = NULL;
  int32_t *batch = malloc((size_t)B * sizeof *batch), *seqs = calloc((size_t)B, sizeof *seqs);
  bool *want = calloc((size_t)B, sizeof *want);
  float *base_rows = baseline ? malloc((size_t)B * (size_t)V * sizeof *base_rows) : NULL;
  double *lp = baseline ? malloc(2 * (size_t)V * sizeof *lp) : NULL;
  er_status st = ER_STATUS_OK;
  if (!batch || !seqs || !want || (baseline && (!base_rows || !lp)))
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for evaluation");
  if (st == ER_STATUS_OK) st = make_ctx(model, &o, (int)B, o.fp16_activations, &cm);
  if (st == ER_STATUS_OK && baseline) st = make_ctx(baseline, &o, (int)B, false, &cb);
  stat_acc am = {0}, ab = {0};
  int64_t agree = 0;
  double kl = 0;
  for (int64_t c = 0; c < n_chunks && st == ER_STATUS_OK; c++) {
    const int32_t *chunk = tokens + c * o.n_ctx;
    st = er_llm_seq_truncate(cm, 0, 0);
    if (st == ER_STATUS_OK && cb) st = er_llm_seq_truncate(cb, 0, 0);
    for (int64_t b0 = 0; b0 < o.n_ctx && st == ER_STATUS_OK; b0 += B) {
      int64_t bn = o.n_ctx - b0 < B ? o.n_ctx - b0 : B;
      for (int64_t j = 0; j < bn; j++) {
        int64_t p = b0 + j;
        batch[j] = p == 0 && add_bos ? bos : chunk[p];
        want[j] = p >= first && p < o.n_ctx - 1;
      }
      er_llm_batch bt = {(size_t)bn, batch, seqs, want};
      size_t rows = 0;
      if (cb) {
        st = er_llm_decode(cb, &bt);
        for (int64_t j = 0; st == ER_STATUS_OK && j < bn; j++)
          if (want[j]) {
            memcpy(base_rows + rows * (size_t)V, er_llm_logits(cb, rows), (size_t)V * sizeof(float));
            rows++;
          }
      }
      if (st == ER_STATUS_OK) st = er_llm_decode(cm, &bt);
      size_t row = 0;
      for (int64_t j = 0; st == ER_STATUS_OK && j < bn; j++) {
        if (!want[j]) continue;
        const float *lm = er_llm_logits(cm, row);
        const int32_t next = chunk[b0 + j + 1];
        acc_add(&am, nll_of(lm, V, next));
        if (cb) {
          const float *lb = base_rows + row * (size_t)V;
          acc_add(&ab, nll_of(lb, V, next));
          agree += argmax(lm, V) == argmax(lb, V);
          log_softmax(lb, V, lp);
          log_softmax(lm, V, lp + V);
          kl += kld(lp, lp + V, V);
        }
        row++;
      }
    }
    if (st == ER_STATUS_OK && o.progress) {
      double ppl, err;
      acc_result(&am, &ppl, &err);
      o.progress(o.progress_user, c + 1, n_chunks, ppl);
    }
  }
  er_llm_context_free(cm);
  er_llm_context_free(cb);
  free(batch);
  free(seqs);
  free(want);
  free(base_rows);
  free(lp);
  if (st != ER_STATUS_OK) return st;
  memset(res, 0, sizeof *res);
  acc_result(&am, &res->ppl, &res->ppl_error);
  if (baseline) {
    acc_result(&ab, &res->base_ppl, &res->base_ppl_error);
    res->top1_agreement = (double)agree / (double)am.count;
    res->mean_kld = kl / (double)am.count;
  }
  res->chunks = n_chunks;
  res->n_ctx = o.n_ctx;
  res->tokens_scored = am.count;
  return ER_STATUS_OK;
}
