/* bench-model.c - times er_session_run on one model: median latency over
 * repeated runs after a warm-up, for comparing kernels (compare_models.py
 * runs it next to onnxruntime). Inputs come from a test_data_set folder's
 * input_*.pb files (in graph-input order) or, without one, are filled with
 * a fixed pattern (unknown dims become 1). Not a test.
 *
 *   bench-model MODEL.onnx [--data DIR] [--threads T] [--runs N] [--warmup N] [--reference]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "edgerun.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define MAX_INPUTS 64

int main(int argc, char **argv) {
  const char *model_path = NULL, *data = NULL;
  int threads = 1, runs = 20, warmup = 3;
  bool reference = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) data = argv[++i];
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc) warmup = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reference") == 0) reference = true;
    else model_path = argv[i];
  }
  if (!model_path || runs < 1) {
    fprintf(stderr, "usage: bench-model MODEL [--data DIR] [--threads T] [--runs N] [--warmup N] [--reference]\n");
    return 2;
  }
  er_model *model;
  double t0 = now_ms();
  if (er_model_load_file(model_path, NULL, &model) != ER_STATUS_OK) {
    fprintf(stderr, "load: %s\n", er_last_error());
    return 1;
  }
  er_session_options so;
  er_session_options_init(&so);
  so.threads = threads;
  so.force_reference = reference;
  er_session *s;
  if (er_session_create(model, &so, &s) != ER_STATUS_OK) {
    fprintf(stderr, "session: %s\n", er_last_error());
    return 1;
  }
  double load_ms = now_ms() - t0;
  size_t n_in = er_model_input_count(model);
  er_named_tensor inputs[MAX_INPUTS];
  er_tensor *owned[MAX_INPUTS];
  size_t n = 0;
  for (size_t i = 0; i < n_in && n < MAX_INPUTS; i++) {
    er_value_info info;
    er_model_input_info(model, i, &info);
    er_tensor *t = NULL;
    if (data) {
      char path[4096];
      snprintf(path, sizeof path, "%s/input_%zu.pb", data, i);
      if (er_tensor_read_file(path, &t, NULL) != ER_STATUS_OK) continue;
    } else {
      int64_t dims[16];
      int rank = info.rank < 0 ? 0 : info.rank;
      for (int d = 0; d < rank && d < 16; d++) dims[d] = info.dims[d] > 0 ? info.dims[d] : 1;
      if (er_tensor_create(info.dtype, rank, dims, &t) != ER_STATUS_OK) continue;
      if (info.dtype == ER_DTYPE_FLOAT) {
        float *f = er_tensor_data(t);
        for (int64_t j = 0; j < er_tensor_count(t); j++) f[j] = (float)((j * 7919) % 255) / 255.0f - 0.5f;
      }
    }
    owned[n] = t;
    inputs[n].name = info.name;
    inputs[n].tensor = t;
    n++;
  }
  size_t n_out = er_model_output_count(model);
  er_tensor **outs = calloc(n_out, sizeof *outs);
  double *times = calloc((size_t)runs, sizeof *times);
  double first = 0;
  for (int r = 0; r < warmup + runs; r++) {
    double a = now_ms();
    if (er_session_run(s, inputs, n, NULL, n_out, outs) != ER_STATUS_OK) {
      fprintf(stderr, "run: %s\n", er_last_error());
      return 1;
    }
    double dt = now_ms() - a;
    if (r == 0) first = dt;
    if (r >= warmup) times[r - warmup] = dt;
    for (size_t o = 0; o < n_out; o++) er_tensor_free(outs[o]);
  }
  qsort(times, (size_t)runs, sizeof *times, cmp_double);
  printf("{\"load_ms\": %.3f, \"first_run_ms\": %.3f, \"p50_ms\": %.4f, \"min_ms\": %.4f, \"threads\": %d}\n", load_ms,
         first, times[runs / 2], times[0], threads);
  for (size_t i = 0; i < n; i++) er_tensor_free(owned[i]);
  free(outs);
  free(times);
  er_session_free(s);
  er_model_free(model);
  return 0;
}
