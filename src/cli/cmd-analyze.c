/* cmd-analyze.c - `edgerun analyze`: runs a float model and its quantized
 * version on the same samples and compares every tensor they share. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli-llm.h"
#include "edgerun-quant.h"

void er_cmd_analyze_help(FILE *out) {
  fprintf(out,
          "usage: edgerun analyze FLOAT QUANT --data DATA [--html FILE] [--json] [options]\n\n"
          "Runs both models on the same samples and compares every intermediate tensor\n"
          "they share by name (where QUANT quantizes a tensor, what its readers see:\n"
          "the DequantizeLinear output). Prints the layers ranked by the error each adds\n"
          "(local SQNR), or the full comparison as JSON with --json; --html writes a\n"
          "self-contained page with tables and a layers x samples heatmap.\n\n"
          "  --data DATA       samples (as for quantize --calib)\n"
          "  --labels FILE     labels of the samples: accuracy too\n"
          "  --samples N       compare at most N samples\n"
          "  --batch N, --preprocess SPEC, --threads N   as for quantize\n"
          "  --top N           rows in the printed ranking (default 15)\n\n");
  er_cmd_analyze_llm_help(out);
}

/* The comparison as JSON on stdout, through a temporary file written by
 * the same writer the report uses. 0, or the exit status. */
static int print_json(const er_qcompare *c, const char *fpath, const char *qpath) {
  char tmp[] = "/tmp/edgerun-analyze-XXXXXX";
  int fd = mkstemp(tmp);
  if (fd < 0) return er_cli_fail("analyze", "cannot create a temporary file in /tmp");
  close(fd);
  er_status st = er_qcompare_write_json(c, fpath, qpath, tmp);
  FILE *f = st == ER_STATUS_OK ? fopen(tmp, "r") : NULL;
  if (f) {
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
    fclose(f);
  }
  unlink(tmp);
  return st == ER_STATUS_OK ? 0 : er_cli_fail_status("analyze", st, "writing JSON");
}

/* The outputs' figures, agreement and accuracy, then the `top` tensors
 * ranked by local SQNR (the noise each layer adds itself). */
static void print_ranking(const er_qcompare *c, int top, const char *html) {
  printf("%lld samples compared, %zu tensors\n", (long long)c->samples, c->n_tensors);
  for (size_t i = 0; i < c->n_tensors; i++)
    if (c->tensors[i].is_output)
      printf("output %-20s SQNR %8.2f dB  cosine %.6f  max abs %.4g\n", c->tensors[i].name,
             er_qmetric_sqnr(&c->tensors[i].m), er_qmetric_cosine(&c->tensors[i].m), c->tensors[i].m.max_abs);
  if (c->rows) printf("top-1 agreement: %.2f%% of %lld rows\n", 100.0 * c->agree / c->rows, (long long)c->rows);
  if (c->labelled)
    printf("top-1 accuracy: float %.2f%%, quantized %.2f%%\n", 100.0 * c->f_top1 / c->labelled,
           100.0 * c->q_top1 / c->labelled);
  size_t *idx = malloc((c->n_tensors + 1) * sizeof *idx);
  if (idx) {
    for (size_t i = 0; i < c->n_tensors; i++) idx[i] = i;
    for (size_t i = 1; i < c->n_tensors; i++)
      for (size_t j = i; j > 0 && c->tensors[idx[j]].local_sqnr < c->tensors[idx[j - 1]].local_sqnr; j--) {
        size_t t = idx[j];
        idx[j] = idx[j - 1];
        idx[j - 1] = t;
      }
    printf("\n%-4s %-36s %-14s %10s %10s %10s %12s\n", "rank", "tensor", "op", "local dB", "SQNR dB", "cosine",
           "max abs");
    for (size_t r = 0; r < c->n_tensors && (int)r < top; r++) {
      const er_qcmp_tensor *t = &c->tensors[idx[r]];
      printf("%-4zu %-36.36s %-14.14s %10.2f %10.2f %10.6f %12.4g\n", r + 1, t->name, t->op_type, t->local_sqnr,
             er_qmetric_sqnr(&t->m), er_qmetric_cosine(&t->m), t->m.max_abs);
    }
    free(idx);
  }
  if (html) printf("\nwrote %s\n", html);
}

int er_cmd_analyze(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (argv[i][0] != '-' && er_cli_is_llm(argv[i])) return er_cmd_analyze_llm(argc, argv);
  const char *fpath = NULL, *qpath = NULL, *data_path = NULL, *html = NULL, *labels_path = NULL, *prep = NULL;
  bool json = false;
  int threads = 1, top = 15;
  er_qdata_options dopt;
  er_qdata_options_init(&dopt);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes = strcmp(a, "--data") == 0 || strcmp(a, "--html") == 0 || strcmp(a, "--labels") == 0 ||
                 strcmp(a, "--samples") == 0 || strcmp(a, "--batch") == 0 || strcmp(a, "--preprocess") == 0 ||
                 strcmp(a, "--threads") == 0 || strcmp(a, "--top") == 0;
    if (takes && !v) return er_cli_fail("analyze", "%s needs a value", a);
    if (strcmp(a, "--data") == 0) data_path = v;
    else if (strcmp(a, "--html") == 0) html = v;
    else if (strcmp(a, "--labels") == 0) labels_path = v;
    else if (strcmp(a, "--preprocess") == 0) prep = v;
    else if (strcmp(a, "--json") == 0) json = true;
    else if (strcmp(a, "--samples") == 0) {
      int n;
      if (!er_cli_parse_int(v, &n) || n < 1) return er_cli_fail("analyze", "--samples '%s' is not a positive count", v);
      dopt.limit = n;
    } else if (strcmp(a, "--batch") == 0) {
      if (!er_cli_parse_int(v, &dopt.batch) || dopt.batch < 1) return er_cli_fail("analyze", "--batch '%s' is not positive", v);
    } else if (strcmp(a, "--threads") == 0) {
      if (!er_cli_parse_int(v, &threads) || threads < 1) return er_cli_fail("analyze", "--threads needs a positive integer");
    } else if (strcmp(a, "--top") == 0) {
      if (!er_cli_parse_int(v, &top)) return er_cli_fail("analyze", "--top '%s' is not a count", v);
    } else if (a[0] == '-') {
      return er_cli_fail("analyze", "unknown option '%s' (see edgerun analyze --help)", a);
    } else if (!fpath) {
      fpath = a;
      continue;
    } else if (!qpath) {
      qpath = a;
      continue;
    } else {
      return er_cli_fail("analyze", "unexpected argument '%s'", a);
    }
    if (takes) i++;
  }
  if (!fpath || !qpath) return er_cli_fail("analyze", "FLOAT and QUANT models are required (see --help)");
  if (!data_path) return er_cli_fail("analyze", "--data DATA is required");
  if (prep) {
    er_status st = er_image_prep_parse(&dopt.image, prep);
    if (st != ER_STATUS_OK) return er_cli_fail_status("analyze", st, "--preprocess");
  }
  int rc = 1;
  er_model *fm = NULL, *qm = NULL;
  er_qdata *data = NULL;
  er_qcompare *c = NULL;
  int64_t *labels = NULL, n_labels = 0;
  /* As written: tensor names must survive for matching. */
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  er_status st = er_model_load_file(fpath, &lo, &fm);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("analyze", st, fpath);
    goto done;
  }
  st = er_model_load_file(qpath, &lo, &qm);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("analyze", st, qpath);
    goto done;
  }
  if (labels_path && (st = er_qdata_read_labels(labels_path, &labels, &n_labels)) != ER_STATUS_OK) {
    rc = er_cli_fail_status("analyze", st, labels_path);
    goto done;
  }
  st = er_qdata_open(data_path, qm, &dopt, &data);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("analyze", st, data_path);
    goto done;
  }
  er_qcompare_options co = {true, labels, n_labels, threads, !json, "analyzing"};
  st = er_qcompare_run(fm, qm, data, &co, &c);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("analyze", st, "comparing the models");
    goto done;
  }
  er_qcompare_attribute(c, fm);
  if (html && (st = er_qcompare_write_html(c, fpath, qpath, html)) != ER_STATUS_OK) {
    rc = er_cli_fail_status("analyze", st, html);
    goto done;
  }
  if (json) {
    if ((rc = print_json(c, fpath, qpath)) != 0) goto done;
  } else {
    print_ranking(c, top, html);
  }
  rc = 0;
done:
  er_qcompare_free(c);
  er_qdata_free(data);
  free(labels);
  er_model_free(fm);
  er_model_free(qm);
  return rc;
}
