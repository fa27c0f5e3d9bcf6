/* latency.c - p50/p90 latency of one model in edgerun, for the benchmark
 * scripts (bench/quant_bench.py). Not a test: it prints numbers, it never
 * judges them.
 *
 * usage: er-latency MODEL [--runs N] [--threads T] [--input NAME=FILE ...]
 * Inputs not given are filled with a fixed pseudo-random pattern in [0, 1)
 * (dynamic dims taken as 1). Prints one JSON line:
 *   {"model": ..., "runs": N, "p50_ms": ..., "p90_ms": ..., "mean_ms": ...} */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "edgerun.h"

#define MAX_IN 64

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *path = NULL, *names[MAX_IN], *files[MAX_IN];
  int runs = 50, threads = 1, n_given = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--input") && i + 1 < argc && n_given < MAX_IN) {
      char *eq = strchr(argv[++i], '=');
      if (!eq) return fprintf(stderr, "--input needs NAME=FILE\n"), 2;
      *eq = '\0';
      names[n_given] = argv[i];
      files[n_given++] = eq + 1;
    } else if (!path) path = argv[i];
    else return fprintf(stderr, "usage: er-latency MODEL [--runs N] [--threads T] [--input NAME=FILE]\n"), 2;
  }
  if (!path || runs < 1) return fprintf(stderr, "usage: er-latency MODEL [--runs N]\n"), 2;
  er_model *m;
  er_session *s;
  if (er_model_load_file(path, NULL, &m) != ER_STATUS_OK) return fprintf(stderr, "%s\n", er_last_error()), 1;
  er_session_options o;
  er_session_options_init(&o);
  o.threads = threads;
  if (er_session_create(m, &o, &s) != ER_STATUS_OK) return fprintf(stderr, "%s\n", er_last_error()), 1;
  size_t n_in = er_model_input_count(m), n_out = er_model_output_count(m);
  if (n_in > MAX_IN) return fprintf(stderr, "too many inputs\n"), 1;
  er_named_tensor in[MAX_IN];
  er_tensor *t[MAX_IN] = {0};
  for (size_t k = 0; k < n_in; k++) {
    er_value_info info;
    er_model_input_info(m, k, &info);
    in[k].name = info.name;
    for (int g = 0; g < n_given; g++)
      if (!strcmp(names[g], info.name) && er_tensor_read_file(files[g], &t[k], NULL) != ER_STATUS_OK)
        return fprintf(stderr, "%s\n", er_last_error()), 1;
    if (!t[k]) {
      int64_t dims[ER_MAX_RANK];
      for (int d = 0; d < info.rank; d++) dims[d] = info.dims[d] > 0 ? info.dims[d] : 1;
      if (er_tensor_create(info.dtype, info.rank < 0 ? 0 : info.rank, dims, &t[k]) != ER_STATUS_OK)
        return fprintf(stderr, "%s\n", er_last_error()), 1;
      if (info.dtype == ER_DTYPE_FLOAT) {
        float *v = er_tensor_data(t[k]);
        uint32_t r = 1;
        for (int64_t i = 0; i < er_tensor_count(t[k]); i++) {
          r = r * 1664525u + 1013904223u;
          v[i] = (float)(r >> 8) / 16777216.0f;
        }
      }
    }
    in[k].tensor = t[k];
  }
  er_tensor **outs = calloc(n_out, sizeof *outs);
  double *ms = calloc((size_t)runs, sizeof *ms);
  for (int r = -3; r < runs; r++) {  /* three warm-up runs */
    double t0 = now_ms();
    if (er_session_run(s, in, n_in, NULL, n_out, outs) != ER_STATUS_OK) return fprintf(stderr, "%s\n", er_last_error()), 1;
    double dt = now_ms() - t0;
    if (r >= 0) ms[r] = dt;
    for (size_t k = 0; k < n_out; k++) er_tensor_free(outs[k]);
  }
  double mean = 0;
  for (int r = 0; r < runs; r++) mean += ms[r] / runs;
  qsort(ms, (size_t)runs, sizeof *ms, cmp);
  printf("{\"model\": \"%s\", \"runs\": %d, \"threads\": %d, \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"mean_ms\": %.4f}\n",
         path, runs, threads, ms[runs / 2], ms[(runs * 9) / 10], mean);
  for (size_t k = 0; k < n_in; k++) er_tensor_free(t[k]);
  free(outs);
  free(ms);
  er_session_free(s);
  er_model_free(m);
  return 0;
}
