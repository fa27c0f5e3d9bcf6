/* er_batch_run.c - runs one model on many samples with one session, for
 * the accuracy side of bench/int8_compare.py (one process per sample would
 * spend its time loading). The input file holds the samples stacked along
 * a new first axis: [S, ...input shape]; output 0 of every run is stacked
 * the same way into the output file. Not a test.
 *
 *   er-batch-run MODEL INPUT.npy OUTPUT.npy [--threads T] [--reference]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"

int main(int argc, char **argv) {
  const char *paths[3] = {NULL, NULL, NULL};
  int np = 0, threads = 1;
  bool reference = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reference") == 0) reference = true;
    else if (np < 3) paths[np++] = argv[i];
  }
  if (np != 3) {
    fprintf(stderr, "usage: er-batch-run MODEL INPUT.npy OUTPUT.npy [--threads T] [--reference]\n");
    return 2;
  }
  er_model *model = NULL;
  er_session *session = NULL;
  er_tensor *all = NULL, *out = NULL;
  int rc = 1;
  if (er_model_load_file(paths[0], NULL, &model) != ER_STATUS_OK || er_tensor_read_file(paths[1], &all, NULL) != ER_STATUS_OK) {
    fprintf(stderr, "er-batch-run: %s\n", er_last_error());
    goto done;
  }
  er_session_options o;
  er_session_options_init(&o);
  o.threads = threads;
  o.force_reference = reference;
  er_value_info in;
  if (er_session_create(model, &o, &session) != ER_STATUS_OK || er_model_input_info(model, 0, &in) != ER_STATUS_OK) {
    fprintf(stderr, "er-batch-run: %s\n", er_last_error());
    goto done;
  }
  int rank = er_tensor_rank(all);
  const int64_t *dims = er_tensor_dims(all);
  int64_t samples = rank > 0 ? dims[0] : 0, per = samples ? er_tensor_count(all) / samples : 0;
  size_t es = er_dtype_size(er_tensor_dtype(all));
  for (int64_t s = 0; s < samples; s++) {
    er_tensor *x = NULL, *y = NULL;
    if (er_tensor_wrap(er_tensor_dtype(all), rank - 1, dims + 1, (char *)er_tensor_data(all) + (size_t)(s * per) * es,
                       (size_t)per * es, &x) != ER_STATUS_OK) {
      fprintf(stderr, "er-batch-run: %s\n", er_last_error());
      goto done;
    }
    er_named_tensor feed = {in.name, x};
    er_status st = er_session_run(session, &feed, 1, NULL, 1, &y);
    er_tensor_free(x);
    if (st != ER_STATUS_OK) {
      fprintf(stderr, "er-batch-run: sample %lld: %s\n", (long long)s, er_last_error());
      goto done;
    }
    if (!out) {
      int64_t od[8];
      int orank = er_tensor_rank(y);
      if (orank > 7) {
        fprintf(stderr, "er-batch-run: output rank %d is too large\n", orank);
        er_tensor_free(y);
        goto done;
      }
      od[0] = samples;
      memcpy(od + 1, er_tensor_dims(y), (size_t)orank * sizeof *od);
      if (er_tensor_create(er_tensor_dtype(y), orank + 1, od, &out) != ER_STATUS_OK) {
        er_tensor_free(y);
        goto done;
      }
    }
    size_t bytes = (size_t)er_tensor_count(y) * er_dtype_size(er_tensor_dtype(y));
    memcpy((char *)er_tensor_data(out) + (size_t)s * bytes, er_tensor_cdata(y), bytes);
    er_tensor_free(y);
  }
  if (out && er_tensor_write_file(paths[2], out, NULL) != ER_STATUS_OK) {
    fprintf(stderr, "er-batch-run: %s\n", er_last_error());
    goto done;
  }
  rc = 0;
done:
  er_tensor_free(out);
  er_tensor_free(all);
  er_session_free(session);
  er_model_free(model);
  return rc;
}
