/* cmd-conform.c - `edgerun conform`: runs ONNX backend test-data folders
 * (model.onnx + test_data_set_N/input_K.pb, output_K.pb) and reports each
 * as pass, fail (numbers differ), error (load or run failed) or unsupported
 * (an op, type or version edgerun does not implement). */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

void er_cmd_conform_help(FILE *out) {
  fprintf(out,
          "usage: edgerun conform [--json] [--rtol R] [--atol A] [--quiet] [--backend LIST]\n"
          "                       [--no-fallback] [--backend-path P] PATH...\n\n"
          "Each PATH is an ONNX test-data folder (model.onnx plus test_data_set_*/\n"
          "input_*.pb and output_*.pb) or a folder of such folders. Inputs are\n"
          "matched to the model's inputs by name, else in order. Outputs must match\n"
          "within |got - want| <= atol + rtol * |want| (defaults: rtol 1e-3,\n"
          "atol 1e-7, the ONNX test data's own; a few ops are looser, each with its\n"
          "reason in cmd-conform.c); integers and bools must be equal.\n"
          "--json prints one object: {\"passed\", \"failed\", \"errors\", \"unsupported\",\n"
          "\"results\": [{\"name\", \"status\", \"message\"}]}. Exit code 0 when\n"
          "nothing failed or errored.\n\n%s",
          er_cli_backend_help);
}

typedef enum { R_PASS, R_FAIL, R_ERROR, R_UNSUPPORTED } result_kind;
static const char *const kind_names[] = {"pass", "fail", "error", "unsupported"};

typedef struct result {
  char *name;
  result_kind kind;
  char message[512];
} result;

typedef struct results {
  result *items;
  size_t n, cap;
} results;

static bool is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted names of entries in `dir` whose name starts with `prefix`. */
static char **list_dir(const char *dir, const char *prefix, size_t *n_out) {
  DIR *d = opendir(dir);
  char **names = NULL;
  size_t n = 0, cap = 0;
  *n_out = 0;
  if (!d) return NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn) break;
      names = nn;
    }
    names[n] = strdup(e->d_name);
    if (names[n]) n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  *n_out = n;
  return names;
}

static void free_list(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static double load_num(const void *data, er_dtype t, int64_t i) {
  switch (t) {
    case ER_DTYPE_FLOAT: return ((const float *)data)[i];
    case ER_DTYPE_DOUBLE: return ((const double *)data)[i];
    case ER_DTYPE_INT8: return ((const int8_t *)data)[i];
    case ER_DTYPE_UINT8: return ((const uint8_t *)data)[i];
    case ER_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    case ER_DTYPE_INT16: return ((const int16_t *)data)[i];
    case ER_DTYPE_UINT16: return ((const uint16_t *)data)[i];
    case ER_DTYPE_INT32: return ((const int32_t *)data)[i];
    case ER_DTYPE_UINT32: return ((const uint32_t *)data)[i];
    default: return NAN;
  }
}

/* Converts a 16-bit or 8-bit float to double (the library's own helpers are
 * internal; these few lines keep the CLI on the public API). */
static double half_to_double(uint16_t h, bool bf16) {
  if (bf16) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * ldexp(1024 + m, e - 25);
}

/* Compares one output; fills msg on mismatch. */
static bool compare(const er_tensor *got, const er_tensor *want, double rtol, double atol, char *msg,
                    size_t size) {
  er_dtype gt = er_tensor_dtype(got), wt = er_tensor_dtype(want);
  if (gt != wt) {
    snprintf(msg, size, "type %s, expected %s", er_dtype_name(gt), er_dtype_name(wt));
    return false;
  }
  int rank = er_tensor_rank(got);
  const int64_t *gd = er_tensor_dims(got), *wd = er_tensor_dims(want);
  bool same = rank == er_tensor_rank(want);
  for (int i = 0; same && i < rank; i++) same = gd[i] == wd[i];
  if (!same) {
    char a[128] = "", b[128] = "";
    size_t k = 0;
    for (int i = 0; i < rank; i++) k += (size_t)snprintf(a + k, sizeof a - k, "%s%lld", i ? "," : "", (long long)gd[i]);
    k = 0;
    for (int i = 0; i < er_tensor_rank(want); i++)
      k += (size_t)snprintf(b + k, sizeof b - k, "%s%lld", i ? "," : "", (long long)wd[i]);
    snprintf(msg, size, "shape [%s], expected [%s]", a, b);
    return false;
  }
  int64_t n = er_tensor_count(got);
  const void *g = er_tensor_cdata(got), *w = er_tensor_cdata(want);
  bool exact = !(gt == ER_DTYPE_FLOAT || gt == ER_DTYPE_DOUBLE || gt == ER_DTYPE_FLOAT16 ||
                 gt == ER_DTYPE_BFLOAT16);
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    if (gt == ER_DTYPE_INT64 || gt == ER_DTYPE_UINT64) {
      if (((const int64_t *)g)[i] != ((const int64_t *)w)[i]) {
        if (first < 0) first = i;
        bad++;
      }
      continue;
    }
    if (exact && er_dtype_size(gt) == 1 && gt != ER_DTYPE_BOOL && gt != ER_DTYPE_INT8 && gt != ER_DTYPE_UINT8) {
      /* float8 and 4-bit types: compare the stored bytes. */
      if (((const uint8_t *)g)[i] != ((const uint8_t *)w)[i]) {
        if (first < 0) first = i;
        bad++;
      }
      continue;
    }
    double a, b;
    if (gt == ER_DTYPE_FLOAT16 || gt == ER_DTYPE_BFLOAT16) {
      a = half_to_double(((const uint16_t *)g)[i], gt == ER_DTYPE_BFLOAT16);
      b = half_to_double(((const uint16_t *)w)[i], gt == ER_DTYPE_BFLOAT16);
    } else {
      a = load_num(g, gt, i);
      b = load_num(w, gt, i);
    }
    bool ok;
    if (exact) ok = a == b;
    else if (isnan(b)) ok = isnan(a);
    else if (isinf(b)) ok = a == b;
    else ok = fabs(a - b) <= atol + rtol * fabs(b);
    if (!ok) {
      double err = fabs(a - b);
      if (first < 0 || err > worst || isnan(err)) worst = isnan(err) ? INFINITY : err;
      if (first < 0) first = i;
      bad++;
    }
  }
  if (bad) {
    snprintf(msg, size, "%lld of %lld elements differ (first at %lld, max abs error %.3g)", (long long)bad,
             (long long)n, (long long)first, worst);
    return false;
  }
  return true;
}

/* Looser tolerances, per op, each with its reason. A folder whose model
 * uses one of these ops is compared with the loosest that applies (never
 * tighter than the command line's). */
static const struct op_tolerance {
  const char *op;
  double rtol, atol;
  const char *reason;
} op_tolerances[] = {
    {"DFT", 1e-3, 1e-6,
     "the ONNX test data for the inverse DFT was computed in float32 and holds about 2e-7 "
     "of rounding noise where the exact result is 0; edgerun computes in double"},
};

static void tolerance_for(const er_model *model, double *rtol, double *atol) {
  er_model_summary s;
  er_model_summary_get(model, &s);
  for (size_t i = 0; i < s.node_count; i++) {
    const char *op, *name;
    if (er_model_node(model, i, &op, &name) != ER_STATUS_OK) continue;
    for (size_t k = 0; k < sizeof op_tolerances / sizeof op_tolerances[0]; k++) {
      if (strcmp(op, op_tolerances[k].op) != 0) continue;
      if (op_tolerances[k].rtol > *rtol) *rtol = op_tolerances[k].rtol;
      if (op_tolerances[k].atol > *atol) *atol = op_tolerances[k].atol;
    }
  }
}

static result_kind kind_of(er_status st) {
  return st == ER_STATUS_UNSUPPORTED ? R_UNSUPPORTED : R_ERROR;
}

/* --backend and friends (the same for every folder). */
static er_cli_backend conform_backend;

static void run_folder(const char *dir, const char *name, double rtol, double atol, result *r) {
  char path[4096];
  er_model *model = NULL;
  er_session *session = NULL;
  size_t n_sets = 0;
  char **sets = NULL;
  r->kind = R_PASS;
  r->message[0] = '\0';

  snprintf(path, sizeof path, "%s/model.onnx", dir);
  er_status st = er_model_load_file(path, NULL, &model);
  if (st != ER_STATUS_OK) {
    r->kind = kind_of(st);
    snprintf(r->message, sizeof r->message, "load: %s: %s", er_status_name(st), er_last_error());
    goto done;
  }
  tolerance_for(model, &rtol, &atol);
  er_session_options opts;
  er_session_options_init(&opts);
  er_cli_backend_apply(&conform_backend, &opts);
  st = er_session_create(model, &opts, &session);
  if (st != ER_STATUS_OK) {
    r->kind = kind_of(st);
    snprintf(r->message, sizeof r->message, "session: %s: %s", er_status_name(st), er_last_error());
    goto done;
  }
  sets = list_dir(dir, "test_data_set_", &n_sets);
  if (n_sets == 0) {
    r->kind = R_ERROR;
    snprintf(r->message, sizeof r->message, "no test_data_set_* folders");
    goto done;
  }
  size_t n_in = er_model_input_count(model), n_out = er_model_output_count(model);
  for (size_t s = 0; s < n_sets && r->kind == R_PASS; s++) {
    char sdir[4096];
    snprintf(sdir, sizeof sdir, "%s/%s", dir, sets[s]);
    size_t n_inf = 0, n_outf = 0;
    char **inf = list_dir(sdir, "input_", &n_inf);
    char **outf = list_dir(sdir, "output_", &n_outf);
    er_tensor **ins = calloc(n_inf + 1, sizeof *ins);
    char **in_names = calloc(n_inf + 1, sizeof *in_names);
    er_named_tensor *named = calloc(n_inf + 1, sizeof *named);
    er_tensor **got = calloc(n_out + 1, sizeof *got);
    er_tensor *want = NULL;
    if (!ins || !in_names || !named || !got) {
      r->kind = R_ERROR;
      snprintf(r->message, sizeof r->message, "out of memory");
      goto set_done;
    }
    /* input_K.pb sorts as strings; order numerically by K. */
    for (size_t k = 0; k < n_inf; k++) {
      snprintf(path, sizeof path, "%s/input_%zu.pb", sdir, k);
      if (!is_file(path)) {
        r->kind = R_ERROR;
        snprintf(r->message, sizeof r->message, "%s: missing input_%zu.pb", sets[s], k);
        goto set_done;
      }
      st = er_tensor_read_file(path, &ins[k], &in_names[k]);
      if (st != ER_STATUS_OK) {
        r->kind = kind_of(st);
        snprintf(r->message, sizeof r->message, "%s/input_%zu.pb: %s", sets[s], k, er_last_error());
        goto set_done;
      }
      const char *use = NULL;
      er_value_info info;
      for (size_t m = 0; in_names[k] && m < n_in; m++)
        if (er_model_input_info(model, m, &info) == ER_STATUS_OK && strcmp(info.name, in_names[k]) == 0)
          use = info.name;
      if (!use && k < n_in && er_model_input_info(model, k, &info) == ER_STATUS_OK) use = info.name;
      if (!use) {
        r->kind = R_ERROR;
        snprintf(r->message, sizeof r->message, "%s: input_%zu.pb matches no model input", sets[s], k);
        goto set_done;
      }
      named[k] = (er_named_tensor){use, ins[k]};
    }
    st = er_session_run(session, named, n_inf, NULL, n_out, got);
    if (st != ER_STATUS_OK) {
      r->kind = kind_of(st);
      snprintf(r->message, sizeof r->message, "run %s: %s: %s", sets[s], er_status_name(st), er_last_error());
      for (size_t k = 0; k < n_out; k++) got[k] = NULL;
      goto set_done;
    }
    if (n_outf != n_out) {
      r->kind = R_ERROR;
      snprintf(r->message, sizeof r->message, "%s has %zu output files, the model %zu outputs", sets[s],
               n_outf, n_out);
      goto set_done;
    }
    for (size_t k = 0; k < n_out; k++) {
      snprintf(path, sizeof path, "%s/output_%zu.pb", sdir, k);
      st = er_tensor_read_file(path, &want, NULL);
      if (st != ER_STATUS_OK) {
        r->kind = kind_of(st);
        snprintf(r->message, sizeof r->message, "%s/output_%zu.pb: %s", sets[s], k, er_last_error());
        goto set_done;
      }
      char msg[400];
      if (!compare(got[k], want, rtol, atol, msg, sizeof msg)) {
        er_value_info info;
        er_model_output_info(model, k, &info);
        r->kind = R_FAIL;
        snprintf(r->message, sizeof r->message, "%s output '%s': %s", sets[s], info.name, msg);
      }
      er_tensor_free(want);
      want = NULL;
      if (r->kind != R_PASS) break;
    }
  set_done:
    er_tensor_free(want);
    for (size_t k = 0; ins && k < n_inf; k++) er_tensor_free(ins[k]);
    for (size_t k = 0; in_names && k < n_inf; k++) free(in_names[k]);
    for (size_t k = 0; got && k < n_out; k++) er_tensor_free(got[k]);
    free(ins);
    free(in_names);
    free(named);
    free(got);
    free_list(inf, n_inf);
    free_list(outf, n_outf);
  }
done:
  (void)name;
  free_list(sets, n_sets);
  er_session_free(session);
  er_model_free(model);
}

static void add_result(results *rs, const char *dir, double rtol, double atol) {
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? rs->cap * 2 : 256;
    result *n = realloc(rs->items, cap * sizeof *n);
    if (!n) return;
    rs->items = n;
    rs->cap = cap;
  }
  const char *slash = strrchr(dir, '/');
  const char *base = slash ? slash + 1 : dir;
  result *r = &rs->items[rs->n++];
  memset(r, 0, sizeof *r);
  r->name = strdup(base);
  run_folder(dir, base, rtol, atol, r);
}

static void collect(results *rs, const char *path, double rtol, double atol, int depth) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s/model.onnx", path);
  if (is_file(buf)) {
    add_result(rs, path, rtol, atol);
    return;
  }
  if (depth > 3) return;
  size_t n;
  char **names = list_dir(path, "", &n);
  for (size_t i = 0; i < n; i++) {
    snprintf(buf, sizeof buf, "%s/%s", path, names[i]);
    if (is_dir(buf)) collect(rs, buf, rtol, atol, depth + 1);
  }
  free_list(names, n);
}

int er_cmd_conform(int argc, char **argv) {
  bool json = false, quiet = false;
  double rtol = 1e-3, atol = 1e-7;
  results rs = {0};
  int n_paths = 0;
  er_cli_backend_init(&conform_backend);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int used = er_cli_backend_arg("conform", &conform_backend, argc, argv, &i);
    if (used < 0) return 1;
    if (used) continue;
    if (strcmp(a, "--json") == 0) json = true;
    else if (strcmp(a, "--quiet") == 0) quiet = true;
    else if (strcmp(a, "--rtol") == 0) {
      if (++i >= argc || !er_cli_parse_double(argv[i], &rtol)) return er_cli_fail("conform", "--rtol needs a number >= 0");
    } else if (strcmp(a, "--atol") == 0) {
      if (++i >= argc || !er_cli_parse_double(argv[i], &atol)) return er_cli_fail("conform", "--atol needs a number >= 0");
    } else if (a[0] == '-') {
      return er_cli_fail("conform", "unknown option '%s' (see edgerun conform --help)", a);
    }
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--rtol") == 0 || strcmp(a, "--atol") == 0 || strcmp(a, "--backend") == 0 ||
        strcmp(a, "-b") == 0 || strcmp(a, "--backend-path") == 0) {
      i++;
      continue;
    }
    if (a[0] == '-') continue;
    if (!is_dir(a)) return er_cli_fail("conform", "'%s' is not a folder", a);
    n_paths++;
    collect(&rs, a, rtol, atol, 0);
  }
  if (!n_paths) return er_cli_fail("conform", "no PATH given (see edgerun conform --help)");
  if (er_cli_backend_load("conform", &conform_backend)) return 1;
  size_t counts[4] = {0};
  for (size_t i = 0; i < rs.n; i++) counts[rs.items[i].kind]++;
  if (json) {
    printf("{\"passed\": %zu, \"failed\": %zu, \"errors\": %zu, \"unsupported\": %zu, \"results\": [\n", counts[0],
           counts[1], counts[2], counts[3]);
    for (size_t i = 0; i < rs.n; i++) {
      printf("  {\"name\": ");
      er_cli_json_string(stdout, rs.items[i].name);
      printf(", \"status\": \"%s\", \"message\": ", kind_names[rs.items[i].kind]);
      er_cli_json_string(stdout, rs.items[i].message);
      printf("}%s\n", i + 1 < rs.n ? "," : "");
    }
    printf("]}\n");
  } else {
    for (size_t i = 0; i < rs.n; i++) {
      if (quiet && rs.items[i].kind == R_PASS) continue;
      printf("%-11s %s%s%s\n", kind_names[rs.items[i].kind], rs.items[i].name, rs.items[i].message[0] ? "  " : "",
             rs.items[i].message);
    }
    printf("%zu passed, %zu failed, %zu errors, %zu unsupported\n", counts[0], counts[1], counts[2], counts[3]);
  }
  for (size_t i = 0; i < rs.n; i++) free(rs.items[i].name);
  free(rs.items);
  return (counts[1] || counts[2]) ? 1 : 0;
}
