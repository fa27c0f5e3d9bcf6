/* cmd-analyze-llm.c - `edgerun analyze MODEL.gguf --calib-text FILE`: the
 * activation ranges of an LLM over calibration text, run in fp32, and
 * what an accelerator that computes in fp16 would make of each site:
 * overflow (beyond 65504), little headroom, or lost precision. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli-llm.h"

/* Less than this factor between a site's largest value and fp16's is
 * "headroom": the text the device sees may reach further than the
 * calibration text did. quantize --fp16-safe scales below it. */
#define FP16_MAX 65504.0
#define HEADROOM 16.0
/* fp16's rounding of normal values is at most 2^-11 relative; a site whose
 * rounding error is above this has many values in fp16's subnormal range. */
#define PRECISION_RMS 1e-3

void er_cmd_analyze_llm_help(FILE *out) {
  fprintf(out,
          "       edgerun analyze MODEL.gguf --calib-text FILE [--calib-ctx 512] [--calib-chunks N]\n"
          "                       [--json] [--all] [--threads N]\n\n"
          "An LLM: runs the text through the model in fp32 and measures every activation\n"
          "site of every block (norm outputs, Q/K/V, the attention output and its\n"
          "projection, the FFN gate and up projections, the SwiGLU product, the down\n"
          "projection, the residual stream). Lists the sites an fp16 accelerator would\n"
          "overflow (a value beyond 65504), those with less than 16x headroom, and those\n"
          "that lose precision in fp16 (relative RMS rounding error above 1e-3, from\n"
          "values below fp16's normal range), each with its layer and largest value;\n"
          "--all lists every site. edgerun quantize --fp16-safe fixes the SwiGLU case.\n");
}

static const char *verdict(const er_llm_act_range *r) {
  if (r->over_fp16 > 0) return "overflow";
  if (r->max_abs * HEADROOM > FP16_MAX) return "headroom";
  if (r->fp16_rel_rms > PRECISION_RMS) return "precision";
  return "ok";
}

static void show_json(const char *model, const char *text, const er_llm_analyze_result *r) {
  printf("{\"model\": ");
  er_cli_json_string(stdout, model);
  printf(", \"text\": ");
  er_cli_json_string(stdout, text);
  printf(", \"chunks\": %lld, \"tokens\": %lld, \"fp16_max\": %g, \"headroom\": %g, \"precision_rms\": %g,\n"
         " \"sites\": [",
         (long long)r->chunks, (long long)r->tokens, FP16_MAX, HEADROOM, PRECISION_RMS);
  for (size_t i = 0; i < r->n_ranges; i++) {
    const er_llm_act_range *a = &r->ranges[i];
    printf("%s\n  {\"site\": \"%s\", \"what\": \"%s\", \"layer\": %d, \"max_abs\": %.9g, \"count\": %lld, "
           "\"over_fp16\": %lld, \"subnormal_fp16\": %lld, \"zero_fp16\": %lld, \"fp16_rel_rms\": %.6g, "
           "\"verdict\": \"%s\"}",
           i ? "," : "", a->site, a->what, a->layer, a->max_abs, (long long)a->count, (long long)a->over_fp16,
           (long long)a->subnormal_fp16, (long long)a->zero_fp16, a->fp16_rel_rms, verdict(a));
  }
  printf("]}\n");
}

static void show_text(const char *model, const er_llm_analyze_result *r, bool all) {
  size_t n_over = 0, n_head = 0, n_prec = 0, worst = 0;
  for (size_t i = 0; i < r->n_ranges; i++) {
    const char *v = verdict(&r->ranges[i]);
    n_over += strcmp(v, "overflow") == 0;
    n_head += strcmp(v, "headroom") == 0;
    n_prec += strcmp(v, "precision") == 0;
    if (r->ranges[i].max_abs > r->ranges[worst].max_abs) worst = i;
  }
  printf("%s: %zu activation sites over %lld chunks (%lld tokens), run in fp32\n", model, r->n_ranges,
         (long long)r->chunks, (long long)r->tokens);
  printf("fp16: %zu sites overflow, %zu have less than %gx headroom, %zu lose precision\n", n_over, n_head,
         HEADROOM, n_prec);
  if (r->n_ranges)
    printf("largest value: %.6g at %s (%s)\n", r->ranges[worst].max_abs, r->ranges[worst].site,
           r->ranges[worst].what);
  bool header = false;
  for (size_t i = 0; i < r->n_ranges; i++) {
    const er_llm_act_range *a = &r->ranges[i];
    const char *v = verdict(a);
    if (!all && strcmp(v, "ok") == 0) continue;
    if (!header) {
      printf("\n%-6s %-26s %-32s %12s %10s %10s %9s\n", "layer", "site", "what", "max |v|", "over fp16", "subnormal",
             "rel rms");
      header = true;
    }
    char layer[16];
    if (a->layer >= 0) snprintf(layer, sizeof layer, "%d", a->layer);
    else snprintf(layer, sizeof layer, "-");
    printf("%-6s %-26s %-32s %12.6g %10lld %10lld %9.2e  %s\n", layer, a->site, a->what, a->max_abs,
           (long long)a->over_fp16, (long long)a->subnormal_fp16, a->fp16_rel_rms, v);
  }
  if (n_over)
    printf("\nAn accelerator computing in fp16 gets inf/NaN from this model. Check with\n"
           "`edgerun eval MODEL --text FILE --fp16`; `edgerun quantize --fp16-safe` scales\n"
           "an overflowing SwiGLU product into range.\n");
}

int er_cmd_analyze_llm(int argc, char **argv) {
  const char *cmd = "analyze", *model = NULL, *text = NULL;
  bool json = false, all = false;
  int chunks = 0, ctx = 512;
  er_cli_llm lo;
  er_cli_llm_init(&lo);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--threads") == 0) {
      int r = er_cli_llm_arg(cmd, &lo, argc, argv, &i);
      if (r < 0) return -r;
      continue;
    }
    if ((strcmp(a, "--calib-text") == 0 || strcmp(a, "--calib-ctx") == 0 || strcmp(a, "--calib-chunks") == 0) && !v)
      return er_cli_fail(cmd, "%s needs a value", a);
    if (strcmp(a, "--calib-text") == 0) {
      text = argv[++i];
    } else if (strcmp(a, "--calib-ctx") == 0) {
      if (!er_cli_parse_int(argv[++i], &ctx) || ctx < 8)
        return er_cli_fail(cmd, "--calib-ctx '%s' must be a token count of at least 8", argv[i]);
    } else if (strcmp(a, "--calib-chunks") == 0) {
      if (!er_cli_parse_int(argv[++i], &chunks) || chunks < 1)
        return er_cli_fail(cmd, "--calib-chunks '%s' is not a positive count", argv[i]);
    } else if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (strcmp(a, "--all") == 0) {
      all = true;
    } else if (a[0] == '-') {
      return er_cli_fail(cmd, "unknown option '%s' for an LLM (see edgerun analyze --help)", a);
    } else if (!model) {
      model = a;
    } else {
      return er_cli_fail(cmd, "unexpected argument '%s' (an LLM is analyzed alone)", a);
    }
  }
  if (!model || !text) return er_cli_fail(cmd, "give MODEL.gguf and --calib-text FILE (see --help)");
  er_llm *llm = NULL;
  int rc = er_cli_llm_open(cmd, model, &lo, &llm, NULL);
  if (rc) return rc;
  er_llm_analyze_options ao = {ctx, chunks, lo.ctx.threads, !json};
  er_llm_analyze_result r;
  er_status st = er_llm_analyze(llm, text, &ao, &r);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status(cmd, st, "measuring activation ranges");
  } else {
    if (json) show_json(model, text, &r);
    else show_text(model, &r, all);
    er_llm_analyze_result_free(&r);
  }
  er_llm_free(llm);
  return rc;
}
