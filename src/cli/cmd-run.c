/* cmd-run.c - `edgerun run`: one inference on tensors read from files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

void er_cmd_run_help(FILE *out) {
  fprintf(out,
          "usage: edgerun run MODEL --input NAME=FILE [--input NAME=FILE ...] [--out DIR]\n"
          "                   [--format npy|pb] [--threads N] [--backend LIST]\n"
          "                   [--no-fallback] [--backend-path P]\n\n"
          "Runs MODEL once. Each FILE is a NumPy .npy or an ONNX TensorProto .pb file.\n"
          "With a single model input, --input FILE (without NAME=) is accepted.\n"
          "Outputs are summarised on stdout; with --out they are also written to\n"
          "DIR/<output name>.npy (or .pb with --format pb).\n\n%s",
          er_cli_backend_help);
}

#define MAX_INPUTS 256

/* Output names may contain characters a file name cannot; replace them. */
static void safe_name(const char *in, char *out, size_t size) {
  size_t k = 0;
  for (const char *p = in; *p && k + 1 < size; p++)
    out[k++] = (*p == '/' || *p == '\\' || *p == ':' || (*p == '.' && p == in)) ? '_' : *p;
  out[k] = '\0';
  if (k == 0) snprintf(out, size, "output");
}

static void print_summary(const char *name, er_tensor *t) {
  const int64_t *dims = er_tensor_dims(t);
  int rank = er_tensor_rank(t);
  int64_t n = er_tensor_count(t);
  printf("%s: %s [", name, er_dtype_name(er_tensor_dtype(t)));
  for (int i = 0; i < rank; i++) printf("%s%lld", i ? "," : "", (long long)dims[i]);
  printf("]");
  if (er_tensor_dtype(t) == ER_DTYPE_FLOAT && n > 0) {
    const float *v = er_tensor_cdata(t);
    int64_t show = n < 10 ? n : 10, best = 0;
    printf(" =");
    for (int64_t i = 0; i < show; i++) printf(" %.6g", v[i]);
    if (n > show) printf(" ...");
    /* For a row of class scores the argmax is what a user wants to see. */
    for (int64_t i = 1; i < n; i++)
      if (v[i] > v[best]) best = i;
    if (n <= 1000 && (rank == 1 || (rank == 2 && dims[0] == 1))) printf("  (argmax %lld)", (long long)best);
  } else if (er_tensor_dtype(t) == ER_DTYPE_INT64 && n > 0) {
    const int64_t *v = er_tensor_cdata(t);
    printf(" =");
    for (int64_t i = 0; i < n && i < 10; i++) printf(" %lld", (long long)v[i]);
    if (n > 10) printf(" ...");
  }
  printf("\n");
}

int er_cmd_run(int argc, char **argv) {
  const char *model_path = NULL, *out_dir = NULL, *format = "npy";
  const char *in_names[MAX_INPUTS], *in_files[MAX_INPUTS];
  int n_in = 0, threads = 1, rc = 1;
  er_model *model = NULL;
  er_session *session = NULL;
  er_tensor *inputs[MAX_INPUTS] = {0};
  er_tensor **outputs = NULL;
  size_t n_out = 0;
  er_status st;
  er_cli_backend be;
  er_cli_backend_init(&be);

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int used = er_cli_backend_arg("run", &be, argc, argv, &i);
    if (used < 0) return 1;
    if (used) continue;
    if (strcmp(a, "--input") == 0 || strcmp(a, "-i") == 0) {
      if (++i >= argc) return er_cli_fail("run", "--input needs NAME=FILE");
      if (n_in >= MAX_INPUTS) return er_cli_fail("run", "more than %d inputs", MAX_INPUTS);
      char *eq = strchr(argv[i], '=');
      if (eq) {
        *eq = '\0';
        in_names[n_in] = argv[i];
        in_files[n_in] = eq + 1;
      } else {
        in_names[n_in] = NULL;
        in_files[n_in] = argv[i];
      }
      n_in++;
    } else if (strcmp(a, "--out") == 0 || strcmp(a, "-o") == 0) {
      if (++i >= argc) return er_cli_fail("run", "--out needs a folder");
      out_dir = argv[i];
    } else if (strcmp(a, "--format") == 0) {
      if (++i >= argc) return er_cli_fail("run", "--format needs npy or pb");
      format = argv[i];
      if (strcmp(format, "npy") != 0 && strcmp(format, "pb") != 0)
        return er_cli_fail("run", "--format '%s' is not npy or pb", format);
    } else if (strcmp(a, "--threads") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &threads) || threads < 1)
        return er_cli_fail("run", "--threads needs a positive integer");
    } else if (a[0] == '-') {
      return er_cli_fail("run", "unknown option '%s' (see edgerun run --help)", a);
    } else if (!model_path) {
      model_path = a;
    } else {
      return er_cli_fail("run", "unexpected argument '%s'", a);
    }
  }
  if (!model_path) return er_cli_fail("run", "no MODEL given (see edgerun run --help)");
  if (er_cli_backend_load("run", &be)) return 1;

  st = er_model_load_file(model_path, NULL, &model);
  if (st != ER_STATUS_OK) return er_cli_fail_status("run", st, model_path);
  size_t need = er_model_input_count(model);
  for (int i = 0; i < n_in; i++) {
    if (!in_names[i]) {
      er_value_info info;
      if (need != 1) {
        rc = er_cli_fail("run", "the model has %zu inputs; name each as --input NAME=FILE", need);
        goto done;
      }
      er_model_input_info(model, 0, &info);
      in_names[i] = info.name;
    }
    st = er_tensor_read_file(in_files[i], &inputs[i], NULL);
    if (st != ER_STATUS_OK) {
      rc = er_cli_fail_status("run", st, in_files[i]);
      goto done;
    }
  }
  er_session_options opts;
  er_session_options_init(&opts);
  opts.threads = threads;
  er_cli_backend_apply(&be, &opts);
  st = er_session_create(model, &opts, &session);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("run", st, "creating a session");
    goto done;
  }
  er_named_tensor named[MAX_INPUTS];
  for (int i = 0; i < n_in; i++) named[i] = (er_named_tensor){in_names[i], inputs[i]};
  n_out = er_model_output_count(model);
  outputs = calloc(n_out + 1, sizeof *outputs);
  if (!outputs) {
    rc = er_cli_fail("run", "out of memory");
    goto done;
  }
  st = er_session_run(session, named, (size_t)n_in, NULL, n_out, outputs);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("run", st, "running the model");
    goto done;
  }
  if (out_dir && mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
    rc = er_cli_fail("run", "cannot create folder '%s': %s", out_dir, strerror(errno));
    goto done;
  }
  for (size_t i = 0; i < n_out; i++) {
    er_value_info info;
    er_model_output_info(model, i, &info);
    print_summary(info.name, outputs[i]);
    if (out_dir) {
      char fname[512], path[4096];
      safe_name(info.name, fname, sizeof fname);
      snprintf(path, sizeof path, "%s/%s.%s", out_dir, fname, format);
      st = er_tensor_write_file(path, outputs[i], info.name);
      if (st != ER_STATUS_OK) {
        rc = er_cli_fail_status("run", st, path);
        goto done;
      }
    }
  }
  rc = 0;
done:
  for (int i = 0; i < n_in; i++) er_tensor_free(inputs[i]);
  if (outputs)
    for (size_t i = 0; i < n_out; i++) er_tensor_free(outputs[i]);
  free(outputs);
  er_session_free(session);
  er_model_free(model);
  return rc;
}
