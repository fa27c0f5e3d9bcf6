/* cmd-perplexity.c - edgerun perplexity, with llama.cpp's chunking rule so
 * the numbers compare with its llama-perplexity:
 *  - the whole text is tokenized once, with BOS;
 *  - it is cut into floor(tokens / ctx) chunks of ctx tokens (at most
 *    --chunks), each run on an empty cache with its first token replaced
 *    by BOS;
 *  - only the second half of each chunk is scored: the logits at
 *    positions ctx/2 .. ctx-2 predict the tokens after them;
 *  - PPL = exp(mean negative log-likelihood), with llama.cpp's error
 *    estimate from the variance of the per-token values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli-llm.h"

void er_cmd_perplexity_help(FILE *out) {
  fprintf(out,
          "usage: edgerun perplexity MODEL.gguf --text FILE [--ctx 512] [--chunks N] [--json] [options]\n"
          "\n"
          "Perplexity of the model on a text, chunked as llama.cpp's llama-perplexity does\n"
          "(ctx-token chunks from BOS, the second half of each scored).\n"
          "  --text FILE      the text (UTF-8)\n"
          "  --chunks N       at most N chunks (default: all)\n"
          "  --json           the result as JSON\n"
          "%s",
          er_cli_llm_help);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* llama-perplexity's running figures: "[1]18.1234,[2]...". */
static void show_chunk(void *user, int64_t chunk, int64_t n_chunks, double ppl) {
  (void)user;
  (void)n_chunks;
  fprintf(stderr, "[%lld]%.4f,", (long long)chunk, ppl);
  fflush(stderr);
}

int er_cmd_perplexity(int argc, char **argv) {
  const char *cmd = "perplexity", *model = NULL, *path = NULL;
  int max_chunks = 0;
  bool json = false;
  er_cli_llm lo;
  er_cli_llm_init(&lo);
  lo.ctx.n_ctx = 512;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int r = er_cli_llm_arg(cmd, &lo, argc, argv, &i);
    if (r < 0) return -r;
    if (r > 0) continue;
    if (strcmp(a, "--text") == 0 || strcmp(a, "-f") == 0) {
      if (++i >= argc) return er_cli_fail(cmd, "--text needs a file");
      path = argv[i];
    } else if (strcmp(a, "--chunks") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &max_chunks) || max_chunks < 1)
        return er_cli_fail(cmd, "--chunks needs a positive count");
    } else if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (a[0] == '-') {
      return er_cli_fail(cmd, "unknown option '%s' (see --help)", a);
    } else if (!model) {
      model = a;
    } else {
      return er_cli_fail(cmd, "unexpected argument '%s'", a);
    }
  }
  if (!model || !path) return er_cli_fail(cmd, "give MODEL.gguf and --text FILE (see --help)");
  const int64_t n_ctx = lo.ctx.n_ctx;
  if (n_ctx < 4) return er_cli_fail(cmd, "--ctx %lld is too small (at least 4)", (long long)n_ctx);
  if (lo.ctx.n_batch == 0 || lo.ctx.n_batch > n_ctx) lo.ctx.n_batch = (int)(n_ctx < 512 ? n_ctx : 512);
  er_llm *llm = NULL;
  int rc = er_cli_llm_open(cmd, model, &lo, &llm, NULL);
  if (rc) return rc;
  char *text = NULL;
  size_t len = 0;
  int32_t *toks = NULL;
  size_t n_tok = 0;
  if ((rc = er_cli_read_text(cmd, path, &text, &len))) goto done;
  if ((rc = er_cli_tokenize(cmd, llm, text, len, true, false, &toks, &n_tok))) goto done;
  if ((int64_t)n_tok < 2 * n_ctx) {
    rc = er_cli_fail(cmd, "the text has %zu tokens; perplexity at --ctx %lld needs at least %lld", n_tok,
                     (long long)n_ctx, (long long)(2 * n_ctx));
    goto done;
  }
  er_llm_eval_options eo;
  er_llm_eval_options_init(&eo);
  eo.n_ctx = n_ctx;
  eo.max_chunks = max_chunks;
  eo.threads = lo.ctx.threads;
  eo.n_batch = lo.ctx.n_batch;
  eo.kv_type = lo.ctx.kv_type;
  if (!json) {
    int64_t n_chunks = (int64_t)n_tok / n_ctx;
    if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;
    fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %lld\n", n_tok, (long long)n_chunks, (long long)n_ctx);
    eo.progress = show_chunk;
  }
  double t0 = now_s();
  er_llm_eval_result r;
  er_status st = er_llm_evaluate(llm, NULL, toks, n_tok, &eo, &r);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status(cmd, st, "running the model");
    goto done;
  }
  double secs = now_s() - t0;
  if (json)
    printf("{\"ppl\": %.6f, \"ppl_error\": %.6f, \"chunks\": %lld, \"ctx\": %lld, \"tokens_scored\": %lld, "
           "\"seconds\": %.2f}\n",
           r.ppl, r.ppl_error, (long long)r.chunks, (long long)n_ctx, (long long)r.tokens_scored, secs);
  else
    printf("\nFinal estimate: PPL = %.4f +/- %.5f (%lld chunks of %lld, %.1f s)\n", r.ppl, r.ppl_error,
           (long long)r.chunks, (long long)n_ctx, secs);
done:
  free(toks);
  free(text);
  er_llm_free(llm);
  return rc;
}
