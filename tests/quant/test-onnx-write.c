/* test-onnx-write.c - the ONNX writer against real models: every ONNX
 * test-data folder under the given roots (default: the shared conformance
 * suites and real models) is loaded as written, serialized, loaded again
 * from the bytes, and both models are run on the folder's first test set.
 * The outputs must be bit-identical, and writing the reloaded model must
 * give the same bytes again (the writer loses nothing it wrote).
 *
 * usage: test-onnx-write [--save DIR] [ROOT...]
 *   a ROOT holds test folders, or is one; --save also writes each rewritten
 *   model to DIR/<folder name>.onnx (with er__onnx_save_model) so that
 *   check_written.py can run onnx.checker over them. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "harness.h"
#include "onnx/onnx-write.h"

#define MAX_IO 64

static int n_models, n_skipped;
static const char *g_save_dir;

static bool is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool file_exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Reads test_data_set_0/input_K.pb into inputs matched to the model's
 * inputs by TensorProto name, else by position. Returns the count, or -1
 * when the set is unusable. */
static int read_inputs(const char *dir, const er_model *m, er_named_tensor *named, er_tensor **tensors) {
  int n = 0;
  for (int k = 0; k < MAX_IO; k++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, k);
    if (!file_exists(path)) break;
    char *name = NULL;
    if (er_tensor_read_file(path, &tensors[n], &name) != ER_STATUS_OK) {
      free(name);
      return -1;
    }
    const char *use = NULL;
    for (size_t i = 0; i < er_model_input_count(m); i++) {
      er_value_info info;
      er_model_input_info(m, i, &info);
      if (name && strcmp(info.name, name) == 0) use = info.name;
    }
    if (!use && (size_t)k < er_model_input_count(m)) {
      er_value_info info;
      er_model_input_info(m, (size_t)k, &info);
      use = info.name;
    }
    free(name);
    if (!use) return -1;
    named[n].name = use;
    named[n].tensor = tensors[n];
    n++;
  }
  return n;
}

static bool same_bits(const er_tensor *a, const er_tensor *b) {
  if (er_tensor_dtype(a) != er_tensor_dtype(b) || er_tensor_rank(a) != er_tensor_rank(b)) return false;
  if (memcmp(er_tensor_dims(a), er_tensor_dims(b), (size_t)er_tensor_rank(a) * sizeof(int64_t)) != 0)
    return false;
  return er_tensor_nbytes(a) == er_tensor_nbytes(b) &&
         memcmp(er_tensor_cdata(a), er_tensor_cdata(b), er_tensor_nbytes(a)) == 0;
}

/* Runs the model on the inputs; NULL outputs on failure. */
static er_status run(const er_model *m, const er_named_tensor *in, int n_in, er_tensor **out, size_t n_out) {
  er_session *s = NULL;
  er_status st = er_session_create(m, NULL, &s);
  if (st == ER_STATUS_OK) st = er_session_run(s, in, (size_t)n_in, NULL, n_out, out);
  er_session_free(s);
  return st;
}

static void check_folder(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  er_model *a = NULL, *b = NULL;
  if (er_model_load_file(path, &lo, &a) != ER_STATUS_OK) {
    n_skipped++;  /* models edgerun cannot load are the reader's business */
    return;
  }
  er_pbw w1 = {0}, w2 = {0};
  er_named_tensor named[MAX_IO];
  er_tensor *tensors[MAX_IO] = {0}, *oa[MAX_IO] = {0}, *ob[MAX_IO] = {0}, *oa2[MAX_IO] = {0};
  int n_in = -1;
  size_t n_out = er_model_output_count(a);
  er_status st = er__onnx_write_model(a, &w1);
  if (st != ER_STATUS_OK) {
    /* TypeProto attributes are the one thing the IR does not keep. */
    if (st == ER_STATUS_UNSUPPORTED) n_skipped++;
    else fprintf(stderr, "FAIL write %s: %s\n", dir, er_last_error());
    CHECK(st == ER_STATUS_UNSUPPORTED);
    goto done;
  }
  st = er_model_load_buffer(w1.buf, w1.len, dir, &lo, &b);
  if (st != ER_STATUS_OK) fprintf(stderr, "FAIL reload %s: %s\n", dir, er_last_error());
  CHECK(st == ER_STATUS_OK);
  if (st != ER_STATUS_OK) goto done;
  n_models++;
  if (g_save_dir) {
    const char *base = strrchr(dir, '/');
    snprintf(path, sizeof path, "%s/%s.onnx", g_save_dir, base ? base + 1 : dir);
    st = er__onnx_save_model(b, path);
    if (st != ER_STATUS_OK) fprintf(stderr, "FAIL save %s: %s\n", path, er_last_error());
    CHECK(st == ER_STATUS_OK);
  }
  CHECK(er__onnx_write_model(b, &w2) == ER_STATUS_OK);
  if (w1.len != w2.len || memcmp(w1.buf, w2.buf, w1.len) != 0) {
    fprintf(stderr, "FAIL %s: writing the reloaded model gives different bytes\n", dir);
    CHECK(false);
  }
  CHECK(er_model_input_count(b) == er_model_input_count(a) && er_model_output_count(b) == n_out);
  n_in = read_inputs(dir, a, named, tensors);
  if (n_in < 0 || n_out > MAX_IO) goto done;
  if (run(a, named, n_in, oa, n_out) != ER_STATUS_OK) goto done;
  st = run(b, named, n_in, ob, n_out);
  if (st != ER_STATUS_OK) fprintf(stderr, "FAIL run rewritten %s: %s\n", dir, er_last_error());
  CHECK(st == ER_STATUS_OK);
  if (st != ER_STATUS_OK) goto done;
  bool all_same = true;
  for (size_t i = 0; i < n_out; i++) all_same = all_same && same_bits(oa[i], ob[i]);
  if (!all_same) {
    /* Random ops give different outputs on each run: a model whose own
     * second run differs cannot be compared. */
    if (run(a, named, n_in, oa2, n_out) != ER_STATUS_OK) goto done;
    for (size_t i = 0; i < n_out; i++)
      if (!same_bits(oa[i], oa2[i])) goto done;
    for (size_t i = 0; i < n_out; i++) {
      bool same = same_bits(oa[i], ob[i]);
      if (!same) fprintf(stderr, "FAIL %s: output %zu differs after rewriting\n", dir, i);
      CHECK(same);
    }
  } else {
    CHECK(all_same);
  }
done:
  for (int i = 0; i < MAX_IO; i++) {
    er_tensor_free(tensors[i]);
    er_tensor_free(oa[i]);
    er_tensor_free(oa2[i]);
    er_tensor_free(ob[i]);
  }
  er__pbw_free(&w1);
  er__pbw_free(&w2);
  er_model_free(a);
  er_model_free(b);
}

static void walk(const char *root) {
  char path[4096];
  snprintf(path, sizeof path, "%s/model.onnx", root);
  if (file_exists(path)) {
    check_folder(root);
    return;
  }
  struct dirent **list = NULL;
  int n = scandir(root, &list, NULL, alphasort);
  for (int i = 0; i < n; i++) {
    if (list[i]->d_name[0] != '.') {
      snprintf(path, sizeof path, "%s/%s", root, list[i]->d_name);
      if (is_dir(path)) walk(path);
    }
    free(list[i]);
  }
  free(list);
}

static char **g_roots;
static int g_n_roots;

static void test_roundtrip(void) {
  for (int i = 0; i < g_n_roots; i++) walk(g_roots[i]);
  printf("rewrote %d models (%d skipped: not loadable or not writable)\n", n_models, n_skipped);
  CHECK(n_models > 0);
}

int main(int argc, char **argv) {
  static char *defaults[8];
  static char buf[8][4096];
  const char *shared = getenv("EDGERUN_SHARED");
  if (!shared) shared = is_dir(ER_SOURCE_DIR "/../shared") ? ER_SOURCE_DIR "/../shared" : "/work/shared";
  const char *sub[] = {"conformance/node", "conformance/light", "conformance/simple",
                       "conformance/pytorch-converted", "conformance/pytorch-operator", "models"};
  if (argc > 2 && strcmp(argv[1], "--save") == 0) {
    g_save_dir = argv[2];
    mkdir(g_save_dir, 0755);  /* an existing folder is fine */
    argv += 2;
    argc -= 2;
  }
  if (argc > 1) {
    g_roots = argv + 1;
    g_n_roots = argc - 1;
  } else {
    for (size_t i = 0; i < ER_ARRAY_LEN(sub); i++) {
      snprintf(buf[i], sizeof buf[i], "%s/%s", shared, sub[i]);
      defaults[i] = buf[i];
    }
    snprintf(buf[6], sizeof buf[6], "%s/models/digits", ER_SOURCE_DIR);
    defaults[6] = buf[6];
    g_roots = defaults;
    g_n_roots = 7;
  }
  static const er_test_case cases[] = {{"roundtrip", test_roundtrip}};
  return er_test_run(cases, 1, 1, argv);
}
