/* cmd-eval.c - `edgerun eval`: accuracy of a model on labelled data, or its
 * agreement with a baseline, as a deployment gate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli-llm.h"
#include "edgerun-quant.h"

void er_cmd_eval_help(FILE *out) {
  fprintf(out,
          "usage: edgerun eval MODEL --data DATA [--labels FILE] [--baseline FLOAT]\n"
          "                    [--max-drop X] [--json] [options]\n\n"
          "Runs MODEL over DATA as it would be deployed (optimized kernels) and reports\n"
          "top-1 / top-5 accuracy against --labels, and with --baseline the baseline's\n"
          "accuracy, the top-1 agreement and the output SQNR / cosine between the two.\n"
          "--max-drop X (with --baseline) makes it a gate: exit status 3 when the top-1\n"
          "accuracy drop from the baseline (with labels) or the disagreement with it\n"
          "(without) is more than X percentage points.\n\n"
          "  --samples N, --batch N, --preprocess SPEC, --threads N   as for quantize\n\n");
  er_cmd_eval_llm_help(out);
}

int er_cmd_eval(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (argv[i][0] != '-' && er_cli_is_llm(argv[i])) return er_cmd_eval_llm(argc, argv);
  const char *mpath = NULL, *data_path = NULL, *labels_path = NULL, *base = NULL, *prep = NULL;
  bool json = false, gate = false;
  double max_drop = 0;
  int threads = 1;
  er_qdata_options dopt;
  er_qdata_options_init(&dopt);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes = strcmp(a, "--data") == 0 || strcmp(a, "--labels") == 0 || strcmp(a, "--baseline") == 0 ||
                 strcmp(a, "--max-drop") == 0 || strcmp(a, "--samples") == 0 || strcmp(a, "--batch") == 0 ||
                 strcmp(a, "--preprocess") == 0 || strcmp(a, "--threads") == 0;
    if (takes && !v) return er_cli_fail("eval", "%s needs a value", a);
    if (strcmp(a, "--data") == 0) data_path = v;
    else if (strcmp(a, "--labels") == 0) labels_path = v;
    else if (strcmp(a, "--baseline") == 0) base = v;
    else if (strcmp(a, "--preprocess") == 0) prep = v;
    else if (strcmp(a, "--json") == 0) json = true;
    else if (strcmp(a, "--max-drop") == 0) {
      if (!er_cli_parse_double(v, &max_drop)) return er_cli_fail("eval", "--max-drop '%s' is not a number >= 0", v);
      gate = true;
    } else if (strcmp(a, "--samples") == 0) {
      int n;
      if (!er_cli_parse_int(v, &n) || n < 1) return er_cli_fail("eval", "--samples '%s' is not a positive count", v);
      dopt.limit = n;
    } else if (strcmp(a, "--batch") == 0) {
      if (!er_cli_parse_int(v, &dopt.batch) || dopt.batch < 1) return er_cli_fail("eval", "--batch '%s' is not positive", v);
    } else if (strcmp(a, "--threads") == 0) {
      if (!er_cli_parse_int(v, &threads) || threads < 1) return er_cli_fail("eval", "--threads needs a positive integer");
    } else if (a[0] == '-') {
      return er_cli_fail("eval", "unknown option '%s' (see edgerun eval --help)", a);
    } else if (!mpath) {
      mpath = a;
      continue;
    } else {
      return er_cli_fail("eval", "unexpected argument '%s'", a);
    }
    if (takes) i++;
  }
  if (!mpath) return er_cli_fail("eval", "no MODEL given (see edgerun eval --help)");
  if (!data_path) return er_cli_fail("eval", "--data DATA is required");
  if (gate && !base) return er_cli_fail("eval", "--max-drop needs --baseline (the drop is measured from it)");
  if (prep) {
    er_status st = er_image_prep_parse(&dopt.image, prep);
    if (st != ER_STATUS_OK) return er_cli_fail_status("eval", st, "--preprocess");
  }
  int rc = 1;
  er_model *m = NULL, *b = NULL;
  er_qdata *data = NULL;
  er_qcompare *c = NULL;
  int64_t *labels = NULL, n_labels = 0;
  er_status st = er_model_load_file(mpath, NULL, &m);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("eval", st, mpath);
    goto done;
  }
  if (base && (st = er_model_load_file(base, NULL, &b)) != ER_STATUS_OK) {
    rc = er_cli_fail_status("eval", st, base);
    goto done;
  }
  if (labels_path && (st = er_qdata_read_labels(labels_path, &labels, &n_labels)) != ER_STATUS_OK) {
    rc = er_cli_fail_status("eval", st, labels_path);
    goto done;
  }
  if ((st = er_qdata_open(data_path, m, &dopt, &data)) != ER_STATUS_OK) {
    rc = er_cli_fail_status("eval", st, data_path);
    goto done;
  }
  if (labels && n_labels < er_qdata_samples(data)) {
    rc = er_cli_fail("eval", "'%s' holds %lld labels for %lld samples", labels_path, (long long)n_labels,
                     (long long)er_qdata_samples(data));
    goto done;
  }
  er_qcompare_options co = {false, labels, n_labels, threads, !json, "evaluating"};
  if ((st = er_qcompare_run(b, m, data, &co, &c)) != ER_STATUS_OK) {
    rc = er_cli_fail_status("eval", st, "evaluating");
    goto done;
  }
  double n = (double)c->labelled;
  double drop = NAN;
  if (b && c->labelled) drop = 100.0 * (double)(c->f_top1 - c->q_top1) / n;
  else if (b && c->rows) drop = 100.0 * (1.0 - (double)c->agree / (double)c->rows);
  bool failed = gate && !(drop <= max_drop);
  if (json) {
    printf("{\"model\": ");
    er_cli_json_string(stdout, mpath);
    printf(", \"baseline\": ");
    if (base) er_cli_json_string(stdout, base);
    else printf("null");
    printf(", \"samples\": %lld", (long long)c->samples);
    if (c->labelled) {
      printf(", \"top1\": %.6f, \"top5\": %.6f", c->q_top1 / n, c->q_top5 / n);
      if (b) printf(", \"baseline_top1\": %.6f, \"baseline_top5\": %.6f", c->f_top1 / n, c->f_top5 / n);
    }
    if (b) {
      printf(", \"agreement\": ");
      if (c->rows) printf("%.6f", (double)c->agree / (double)c->rows);
      else printf("null");
      printf(", \"outputs\": [");
      for (size_t i = 0; i < c->n_tensors; i++) {
        double db = er_qmetric_sqnr(&c->tensors[i].m);
        printf("%s{\"name\": ", i ? ", " : "");
        er_cli_json_string(stdout, c->tensors[i].name);
        printf(", \"sqnr_db\": ");
        if (isfinite(db)) printf("%.4f", db);
        else printf("null");
        printf(", \"cosine\": %.8f}", er_qmetric_cosine(&c->tensors[i].m));
      }
      printf("]");
    }
    printf(", \"drop_points\": ");
    if (isfinite(drop)) printf("%.4f", drop);
    else printf("null");
    printf(", \"max_drop\": ");
    if (gate) printf("%.4f", max_drop);
    else printf("null");
    printf(", \"passed\": %s}\n", failed ? "false" : "true");
  } else {
    printf("%lld samples\n", (long long)c->samples);
    if (c->labelled) {
      printf("top-1 %.2f%%  top-5 %.2f%%", 100 * c->q_top1 / n, 100 * c->q_top5 / n);
      if (b) printf("   (baseline top-1 %.2f%%  top-5 %.2f%%)", 100 * c->f_top1 / n, 100 * c->f_top5 / n);
      printf("\n");
    }
    if (b) {
      if (c->rows) printf("top-1 agreement with the baseline: %.2f%%\n", 100.0 * c->agree / c->rows);
      for (size_t i = 0; i < c->n_tensors; i++)
        printf("output %s: SQNR %.2f dB, cosine %.6f\n", c->tensors[i].name, er_qmetric_sqnr(&c->tensors[i].m),
               er_qmetric_cosine(&c->tensors[i].m));
    }
    if (gate) printf("drop %.3f points, max %.3f: %s\n", drop, max_drop, failed ? "FAIL" : "pass");
  }
  rc = failed ? 3 : 0;
done:
  er_qcompare_free(c);
  er_qdata_free(data);
  free(labels);
  er_model_free(m);
  er_model_free(b);
  return rc;
}
