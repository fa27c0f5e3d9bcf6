/* cmd-eval-llm.c - `edgerun eval MODEL.gguf --text FILE`: perplexity of an
 * LLM on a text and, with --baseline (the float model it was quantized
 * from), the rise over the baseline's perplexity, the next-token argmax
 * agreement and the KL divergence; --max-ppl-rise makes it a deployment
 * gate (exit status 3). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli-llm.h"

void er_cmd_eval_llm_help(FILE *out) {
  fprintf(out,
          "       edgerun eval MODEL.gguf --text FILE [--baseline FLOAT.gguf] [--max-ppl-rise X%%]\n"
          "                    [--ctx 512] [--chunks N] [--json] [--threads N] [--fp16]\n\n"
          "An LLM: perplexity on FILE (llama-perplexity's chunking), and with --baseline\n"
          "the baseline's perplexity, the relative rise, how often both pick the same next\n"
          "token (greedy agreement) and the mean KL divergence. --max-ppl-rise X%% (or a\n"
          "fraction, 0.02) makes it a gate: exit status 3 when the rise is larger.\n"
          "--fp16 runs the model (not the baseline) with every activation rounded to fp16,\n"
          "as an accelerator computing in fp16 would; it fails naming the layer and the\n"
          "site where a value overflows fp16.\n");
}

/* "2%" -> 0.02, "0.02" -> 0.02. */
static bool parse_rise(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v < 0) return false;
  if (*end == '%') {
    v /= 100;
    end++;
  }
  if (*end) return false;
  *out = v;
  return true;
}

static void show_chunk(void *user, int64_t chunk, int64_t n_chunks, double ppl) {
  (void)user;
  fprintf(stderr, "\r[%lld/%lld] ppl %.4f", (long long)chunk, (long long)n_chunks, ppl);
  fflush(stderr);
}

int er_cmd_eval_llm(int argc, char **argv) {
  const char *cmd = "eval", *model = NULL, *text_path = NULL, *base_path = NULL;
  int max_chunks = 0;
  bool json = false, gate = false;
  double max_rise = 0;
  er_cli_llm lo;
  er_cli_llm_init(&lo);
  lo.ctx.n_ctx = 512;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int r = er_cli_llm_arg(cmd, &lo, argc, argv, &i);
    if (r < 0) return -r;
    if (r > 0) continue;
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if ((strcmp(a, "--text") == 0 || strcmp(a, "--baseline") == 0 || strcmp(a, "--max-ppl-rise") == 0 ||
         strcmp(a, "--chunks") == 0) && !v)
      return er_cli_fail(cmd, "%s needs a value", a);
    if (strcmp(a, "--text") == 0) {
      text_path = argv[++i];
    } else if (strcmp(a, "--baseline") == 0) {
      base_path = argv[++i];
    } else if (strcmp(a, "--max-ppl-rise") == 0) {
      if (!parse_rise(argv[++i], &max_rise))
        return er_cli_fail(cmd, "--max-ppl-rise '%s' is not a percentage (2%%) or fraction (0.02) >= 0", argv[i]);
      gate = true;
    } else if (strcmp(a, "--chunks") == 0) {
      if (!er_cli_parse_int(argv[++i], &max_chunks) || max_chunks < 1)
        return er_cli_fail(cmd, "--chunks needs a positive count");
    } else if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (a[0] == '-') {
      return er_cli_fail(cmd, "unknown option '%s' for an LLM (see --help)", a);
    } else if (!model) {
      model = a;
    } else {
      return er_cli_fail(cmd, "unexpected argument '%s'", a);
    }
  }
  if (!model || !text_path) return er_cli_fail(cmd, "give MODEL.gguf and --text FILE (see --help)");
  if (gate && !base_path) return er_cli_fail(cmd, "--max-ppl-rise needs --baseline (the rise is measured from it)");
  if (lo.ctx.n_ctx < 4) return er_cli_fail(cmd, "--ctx %lld is too small (at least 4)", (long long)lo.ctx.n_ctx);
  er_llm *llm = NULL, *base = NULL;
  char *text = NULL;
  size_t len = 0, n_tok = 0;
  int32_t *toks = NULL;
  int rc = er_cli_llm_open(cmd, model, &lo, &llm, NULL);
  if (!rc && base_path) rc = er_cli_llm_open(cmd, base_path, &lo, &base, NULL);
  if (!rc) rc = er_cli_read_text(cmd, text_path, &text, &len);
  if (!rc) rc = er_cli_tokenize(cmd, llm, text, len, true, false, &toks, &n_tok);
  if (!rc) {
    er_llm_eval_options eo;
    er_llm_eval_options_init(&eo);
    eo.n_ctx = lo.ctx.n_ctx;
    eo.max_chunks = max_chunks;
    eo.threads = lo.ctx.threads;
    eo.kv_type = lo.ctx.kv_type;
    eo.fp16_activations = lo.ctx.fp16_activations;
    if (!json && isatty(2)) eo.progress = show_chunk;
    er_llm_eval_result r;
    er_status st = er_llm_evaluate(llm, base, toks, n_tok, &eo, &r);
    if (!json && isatty(2)) fputc('\n', stderr);
    if (st != ER_STATUS_OK) {
      rc = er_cli_fail_status(cmd, st, "evaluating");
    } else {
      double rise = base ? r.ppl / r.base_ppl - 1 : 0;
      bool failed = gate && !(rise <= max_rise);
      if (json) {
        printf("{\"model\": \"%s\", \"text\": \"%s\", \"ctx\": %lld, \"chunks\": %lld, \"tokens_scored\": %lld, "
               "\"ppl\": %.6f, \"ppl_error\": %.6f",
               model, text_path, (long long)r.n_ctx, (long long)r.chunks, (long long)r.tokens_scored, r.ppl,
               r.ppl_error);
        if (base)
          printf(", \"baseline\": \"%s\", \"baseline_ppl\": %.6f, \"ppl_rise\": %.6f, \"top1_agreement\": %.6f, "
                 "\"mean_kld\": %.6f",
                 base_path, r.base_ppl, rise, r.top1_agreement, r.mean_kld);
        if (gate) printf(", \"max_ppl_rise\": %.6f, \"pass\": %s", max_rise, failed ? "false" : "true");
        printf("}\n");
      } else {
        printf("%s: PPL %.4f +/- %.4f (%lld chunks of %lld, %lld tokens scored)\n", model, r.ppl, r.ppl_error,
               (long long)r.chunks, (long long)r.n_ctx, (long long)r.tokens_scored);
        if (base) {
          printf("%s: PPL %.4f +/- %.4f\n", base_path, r.base_ppl, r.base_ppl_error);
          printf("rise %+.3f%%, greedy agreement %.2f%%, mean KL divergence %.5f\n", 100 * rise,
                 100 * r.top1_agreement, r.mean_kld);
        }
        if (gate)
          printf("perplexity rise %.3f%%, max %.3f%%: %s\n", 100 * rise, 100 * max_rise, failed ? "FAIL" : "pass");
      }
      if (failed) rc = 3;
    }
  }
  free(toks);
  free(text);
  er_llm_free(base);
  er_llm_free(llm);
  return rc;
}
