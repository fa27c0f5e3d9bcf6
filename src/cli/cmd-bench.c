/* cmd-bench.c - `edgerun bench`: latency of a model on a backend, and with
 * --compare the same model on a second backend in the same process, with
 * the ratio and how far the two backends' outputs are apart.
 *
 * A minimal benchmark for the accelerator work; the CPU-performance work
 * owns the full one (per-op profile, peak RSS), and the two are meant to
 * merge. Times are wall clock around er_session_run; nothing here is a
 * pass/fail gate. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "edgerun-backend.h"

void er_cmd_bench_help(FILE *out) {
  fprintf(out,
          "usage: edgerun bench MODEL [--backend LIST] [--compare BACKEND] [--runs N] [--warmup N]\n"
          "                     [--threads T] [--input NAME=FILE ...] [--dim NAME=N ...] [--json]\n"
          "                     [--no-fallback] [--backend-path P]\n\n"
          "Loads MODEL, creates a session on the backends of --backend (default cpu),\n"
          "runs it --warmup times (default 3), then --runs times (default 20), and\n"
          "prints the load, session-creation and first-run times, latency\n"
          "percentiles (P50, P90, P99, min, mean) and throughput. Inputs come from\n"
          "files, or are seeded random values (dynamic dims are 1 unless --dim sets\n"
          "them). --compare BACKEND (e.g. cpu) measures the same model on BACKEND in\n"
          "the same run and prints the speed ratio and the largest difference\n"
          "between the two backends' outputs. Also reported: the placement summary\n"
          "(fallback share) of the measured session.\n\n%s",
          er_cli_backend_help);
}

#define MAX_INPUTS 64
#define MAX_DIMS 16

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct stats {
  const char *backend;
  double create_ms, first_ms, p50, p90, p99, min, mean;  /* milliseconds */
  er_partition_summary part;
  er_tensor **outs;          /* outputs of the last run */
} stats;

/* Percentile by nearest rank of sorted samples. */
static double pct(const double *s, int n, double p) {
  int k = (int)ceil(p / 100.0 * n) - 1;
  return s[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static int measure(const char *cmd, const er_model *m, er_session_options *o, er_named_tensor *in, int n_in,
                   int warmup, int runs, stats *st) {
  er_session *s;
  double t0 = now_ms();
  er_status e = er_session_create(m, o, &s);
  if (e != ER_STATUS_OK) return er_cli_fail_status(cmd, e, "creating a session");
  st->create_ms = now_ms() - t0;
  er_session_partition(s, &st->part);
  size_t n_out = er_model_output_count(m);
  st->outs = calloc(n_out + 1, sizeof *st->outs);
  double *samples = calloc((size_t)runs + 1, sizeof *samples);
  int rc = 0;
  if (!st->outs || !samples) {
    rc = er_cli_fail(cmd, "out of memory");
    goto done;
  }
  for (int i = 0; i < warmup + runs + 1 && !rc; i++) {
    for (size_t k = 0; k < n_out; k++) {
      er_tensor_free(st->outs[k]);
      st->outs[k] = NULL;
    }
    double t = now_ms();
    e = er_session_run(s, in, (size_t)n_in, NULL, n_out, st->outs);
    double dt = now_ms() - t;
    if (e != ER_STATUS_OK) rc = er_cli_fail_status(cmd, e, "running the model");
    else if (i == 0) st->first_ms = dt;
    else if (i > warmup) samples[i - warmup - 1] = dt;
  }
  if (!rc) {
    qsort(samples, (size_t)runs, sizeof *samples, cmp_double);
    double sum = 0;
    for (int i = 0; i < runs; i++) sum += samples[i];
    st->p50 = pct(samples, runs, 50);
    st->p90 = pct(samples, runs, 90);
    st->p99 = pct(samples, runs, 99);
    st->min = samples[0];
    st->mean = sum / runs;
  }
done:
  free(samples);
  er_session_free(s);
  return rc;
}

/* Largest |a - b| over float outputs (NAN when shapes or types differ). */
static double max_diff(const er_model *m, er_tensor **a, er_tensor **b) {
  double worst = 0;
  for (size_t k = 0; k < er_model_output_count(m); k++) {
    if (er_tensor_count(a[k]) != er_tensor_count(b[k]) || er_tensor_dtype(a[k]) != er_tensor_dtype(b[k])) return NAN;
    if (er_tensor_dtype(a[k]) != ER_DTYPE_FLOAT) continue;
    const float *x = er_tensor_cdata(a[k]), *y = er_tensor_cdata(b[k]);
    for (int64_t i = 0; i < er_tensor_count(a[k]); i++) {
      double d = fabs((double)x[i] - y[i]);
      if (!(d <= worst)) worst = d;
    }
  }
  return worst;
}

static void print_stats(FILE *o, const stats *s, bool json) {
  if (json) {
    fprintf(o, "{\"backend\": ");
    er_cli_json_string(o, s->backend);
    fprintf(o, ", \"session_create_ms\": %.3f, \"first_run_ms\": %.3f, \"p50_ms\": %.3f, \"p90_ms\": %.3f, "
               "\"p99_ms\": %.3f, \"min_ms\": %.3f, \"mean_ms\": %.3f, \"throughput_per_s\": %.2f, "
               "\"fallback_share\": %.6f, \"fallback_nodes\": %zu, \"segments\": %zu}",
            s->create_ms, s->first_ms, s->p50, s->p90, s->p99, s->min, s->mean, s->mean > 0 ? 1000.0 / s->mean : 0,
            s->part.fallback_share, s->part.fallback_nodes, s->part.segments);
    return;
  }
  fprintf(o, "%-8s create %8.2f ms  first %8.2f ms  p50 %8.3f  p90 %8.3f  p99 %8.3f  min %8.3f ms  "
             "%8.1f/s  fallback %.1f%% (%zu nodes, %zu segments)\n",
          s->backend, s->create_ms, s->first_ms, s->p50, s->p90, s->p99, s->min, s->mean > 0 ? 1000.0 / s->mean : 0,
          100.0 * s->part.fallback_share, s->part.fallback_nodes, s->part.segments);
}

int er_cmd_bench(int argc, char **argv) {
  const char *path = NULL, *compare = NULL;
  const char *in_names[MAX_INPUTS], *in_files[MAX_INPUTS];
  const char *dim_names[MAX_DIMS];
  int dim_vals[MAX_DIMS];
  int n_files = 0, n_dims = 0, runs = 20, warmup = 3, threads = 1, rc = 1;
  bool json = false;
  er_cli_backend be;
  er_cli_backend_init(&be);
  for (int i = 1; i < argc; i++) {
    int used = er_cli_backend_arg("bench", &be, argc, argv, &i);
    if (used < 0) return 1;
    if (used) continue;
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) json = true;
    else if (strcmp(a, "--compare") == 0) {
      if (++i >= argc) return er_cli_fail("bench", "--compare needs a backend name");
      compare = argv[i];
    } else if (strcmp(a, "--runs") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &runs) || runs < 1)
        return er_cli_fail("bench", "--runs needs a positive integer");
    } else if (strcmp(a, "--warmup") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &warmup)) return er_cli_fail("bench", "--warmup needs an integer");
    } else if (strcmp(a, "--threads") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &threads) || threads < 1)
        return er_cli_fail("bench", "--threads needs a positive integer");
    } else if (strcmp(a, "--input") == 0 || strcmp(a, "--dim") == 0) {
      bool dim = a[2] == 'd';
      if (++i >= argc || !strchr(argv[i], '=')) return er_cli_fail("bench", "%s needs NAME=%s", a, dim ? "N" : "FILE");
      char *eq = strchr(argv[i], '=');
      *eq = '\0';
      if (dim) {
        if (n_dims == MAX_DIMS || !er_cli_parse_int(eq + 1, &dim_vals[n_dims]) || dim_vals[n_dims] < 1)
          return er_cli_fail("bench", "--dim %s needs a positive size (at most %d --dim)", argv[i], MAX_DIMS);
        dim_names[n_dims++] = argv[i];
      } else {
        if (n_files == MAX_INPUTS) return er_cli_fail("bench", "more than %d inputs", MAX_INPUTS);
        in_names[n_files] = argv[i];
        in_files[n_files++] = eq + 1;
      }
    } else if (a[0] == '-') {
      return er_cli_fail("bench", "unknown option '%s' (see edgerun bench --help)", a);
    } else if (!path) {
      path = a;
    } else {
      return er_cli_fail("bench", "unexpected argument '%s'", a);
    }
  }
  if (!path) return er_cli_fail("bench", "no MODEL given (see edgerun bench --help)");
  if (er_cli_backend_load("bench", &be)) return 1;

  er_model *m = NULL;
  er_tensor *tensors[MAX_INPUTS] = {0};
  er_named_tensor named[MAX_INPUTS];
  int n_in = 0;
  stats main_st = {0}, cmp_st = {0};
  double t0 = now_ms();
  er_status st = er_model_load_file(path, NULL, &m);
  if (st != ER_STATUS_OK) return er_cli_fail_status("bench", st, path);
  double load_ms = now_ms() - t0;
  /* Inputs: files by name, else seeded random data of the declared shape. */
  size_t need = er_model_input_count(m);
  if (need > MAX_INPUTS) {
    rc = er_cli_fail("bench", "the model has %zu inputs; at most %d", need, MAX_INPUTS);
    goto done;
  }
  for (size_t k = 0; k < need; k++) {
    er_value_info vi;
    er_model_input_info(m, k, &vi);
    int f = -1;
    for (int j = 0; j < n_files; j++)
      if (strcmp(in_names[j], vi.name) == 0) f = j;
    if (f >= 0) {
      st = er_tensor_read_file(in_files[f], &tensors[n_in], NULL);
      if (st != ER_STATUS_OK) {
        rc = er_cli_fail_status("bench", st, in_files[f]);
        goto done;
      }
    } else {
      int64_t dims[ER_MAX_RANK];
      int rank = vi.rank < 0 ? 1 : vi.rank;
      for (int d = 0; d < rank; d++) {
        dims[d] = vi.rank < 0 ? 1 : vi.dims[d];
        if (dims[d] >= 0) continue;
        dims[d] = 1;
        for (int j = 0; j < n_dims; j++)
          if (vi.dim_params[d] && strcmp(dim_names[j], vi.dim_params[d]) == 0) dims[d] = dim_vals[j];
      }
      st = er_tensor_create(vi.dtype, rank, dims, &tensors[n_in]);
      if (st != ER_STATUS_OK) {
        rc = er_cli_fail_status("bench", st, vi.name);
        goto done;
      }
      /* Values in [-1, 1) for floats, small integers otherwise: a fixed
       * LCG, so two backends see the same numbers. */
      uint64_t s = 0x2545f4914f6cdd1dULL + k;
      int64_t cnt = er_tensor_count(tensors[n_in]);
      void *data = er_tensor_data(tensors[n_in]);
      for (int64_t i = 0; i < cnt; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        if (vi.dtype == ER_DTYPE_FLOAT) ((float *)data)[i] = (float)(2 * u - 1);
        else if (vi.dtype == ER_DTYPE_INT64) ((int64_t *)data)[i] = (int64_t)(u * 4);
        else if (vi.dtype == ER_DTYPE_INT32) ((int32_t *)data)[i] = (int32_t)(u * 4);
        else if (er_dtype_size(vi.dtype) == 1) ((uint8_t *)data)[i] = (uint8_t)(u * 256);
      }
    }
    named[n_in] = (er_named_tensor){vi.name, tensors[n_in]};
    n_in++;
  }
  er_session_options o;
  er_session_options_init(&o);
  o.threads = threads;
  er_cli_backend_apply(&be, &o);
  main_st.backend = be.n_names ? be.names[0] : "cpu";
  if (measure("bench", m, &o, named, n_in, warmup, runs, &main_st)) goto done;
  if (compare) {
    er_session_options oc;
    er_session_options_init(&oc);
    oc.threads = threads;
    const char *cn[1] = {compare};
    oc.backends = cn;
    oc.backend_count = 1;
    cmp_st.backend = compare;
    if (measure("bench", m, &oc, named, n_in, warmup, runs, &cmp_st)) goto done;
  }
  double diff = compare ? max_diff(m, main_st.outs, cmp_st.outs) : 0;
  double ratio = compare && main_st.p50 > 0 ? cmp_st.p50 / main_st.p50 : 0;
  if (json) {
    printf("{\"model\": ");
    er_cli_json_string(stdout, path);
    printf(", \"load_ms\": %.3f, \"runs\": %d, \"warmup\": %d, \"threads\": %d,\n \"result\": ", load_ms, runs,
           warmup, threads);
    print_stats(stdout, &main_st, true);
    if (compare) {
      printf(",\n \"compare\": ");
      print_stats(stdout, &cmp_st, true);
      printf(",\n \"speedup_p50\": %.4f, \"max_abs_diff\": ", ratio);
      if (diff == diff) printf("%.6g", diff);
      else printf("null");
    }
    printf("}\n");
  } else {
    printf("model:    %s (loaded in %.2f ms)\nruns:     %d after %d warm-up, %d thread%s; times in ms\n", path,
           load_ms, runs, warmup, threads, threads == 1 ? "" : "s");
    print_stats(stdout, &main_st, false);
    if (compare) {
      print_stats(stdout, &cmp_st, false);
      printf("ratio:    %s is %.2fx %s than %s at P50; outputs differ by at most %.3g\n", main_st.backend,
             ratio >= 1 ? ratio : (ratio > 0 ? 1 / ratio : 0), ratio >= 1 ? "faster" : "slower", compare, diff);
    }
  }
  rc = 0;
done:
  for (int i = 0; i < n_in; i++) er_tensor_free(tensors[i]);
  for (size_t k = 0; m && k < er_model_output_count(m); k++) {
    if (main_st.outs) er_tensor_free(main_st.outs[k]);
    if (cmp_st.outs) er_tensor_free(cmp_st.outs[k]);
  }
  free(main_st.outs);
  free(cmp_st.outs);
  er_model_free(m);
  return rc;
}
