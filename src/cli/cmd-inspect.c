/* cmd-inspect.c - `edgerun inspect`: what a model is made of. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli-llm.h"

void er_cmd_inspect_help(FILE *out) {
  fprintf(out,
          "usage: edgerun inspect MODEL [--json] [--backend LIST [--no-fallback]]\n"
          "                     [--backend-path P] [--target PROFILE.json [--assume-quantized]]\n\n"
          "Loads MODEL and prints its inputs and outputs (with symbolic dims), the\n"
          "operator histogram, parameter count and weight bytes, the opset and IR\n"
          "version, and metadata_props.\n"
          "On a GGUF LLM: architecture, layers, heads, context length, parameters, tensor\n"
          "types with bytes per weight, the chat template and the licence.\n\n"
          "With --backend, also where each node would run and why not on the\n"
          "preferred backend, the share of compute (MACs) that falls back to the CPU\n"
          "(a warning above 20%%), the segments and the host/device transfers.\n"
          "With --target, every node that would not run on the NPU the profile\n"
          "describes, with the rule it breaks (profiles/ has profiles of real NPUs,\n"
          "each citing its source document). --target may be given more than once.\n"
          "--assume-quantized judges a float model as it will be once quantized to\n"
          "int8, so the structural rules show instead of one type finding per node.\n\n%s",
          er_cli_backend_help);
}

typedef struct op_count {
  const char *op;
  int n;
} op_count;

static int cmp_count(const void *a, const void *b) {
  const op_count *x = a, *y = b;
  if (x->n != y->n) return y->n - x->n;
  return strcmp(x->op, y->op);
}

static void print_value(FILE *o, const er_value_info *v, bool json) {
  if (json) {
    fprintf(o, "{\"name\": ");
    er_cli_json_string(o, v->name);
    fprintf(o, ", \"dtype\": \"%s\", \"shape\": ", er_dtype_name(v->dtype));
    if (v->rank < 0) {
      fprintf(o, "null}");
      return;
    }
    fprintf(o, "[");
    for (int d = 0; d < v->rank; d++) {
      if (d) fprintf(o, ", ");
      if (v->dims[d] >= 0) fprintf(o, "%lld", (long long)v->dims[d]);
      else if (v->dim_params[d]) er_cli_json_string(o, v->dim_params[d]);
      else fprintf(o, "null");
    }
    fprintf(o, "]}");
    return;
  }
  fprintf(o, "  %-24s %-8s ", v->name, er_dtype_name(v->dtype));
  if (v->rank < 0) {
    fprintf(o, "[unknown rank]\n");
    return;
  }
  fprintf(o, "[");
  for (int d = 0; d < v->rank; d++) {
    if (d) fprintf(o, ",");
    if (v->dims[d] >= 0) fprintf(o, "%lld", (long long)v->dims[d]);
    else fprintf(o, "%s", v->dim_params[d] ? v->dim_params[d] : "?");
  }
  fprintf(o, "]\n");
}

/* The model's summary as JSON (the object left open for placement and
 * target checks). */
static void print_json(FILE *o, er_model *m, const er_model_summary *sp, const op_count *ops, int n_ops,
                       int dynamic) {
  const er_model_summary s = *sp;
  fprintf(o, "{\"ir_version\": %lld, \"opset\": %lld, \"producer\": ", (long long)s.ir_version,
          (long long)s.opset);
  er_cli_json_string(o, s.producer_name);
  fprintf(o, ", \"graph\": ");
  er_cli_json_string(o, s.graph_name);
  fprintf(o, ", \"nodes\": %zu, \"initializers\": %zu, \"parameters\": %llu, \"weight_bytes\": %llu, "
             "\"dynamic_dims\": %d,\n \"inputs\": [",
          s.node_count, s.initializer_count, (unsigned long long)s.parameter_count,
          (unsigned long long)s.weight_bytes, dynamic);
  for (size_t i = 0; i < er_model_input_count(m); i++) {
    er_value_info v;
    er_model_input_info(m, i, &v);
    if (i) fprintf(o, ", ");
    print_value(o, &v, true);
  }
  fprintf(o, "],\n \"outputs\": [");
  for (size_t i = 0; i < er_model_output_count(m); i++) {
    er_value_info v;
    er_model_output_info(m, i, &v);
    if (i) fprintf(o, ", ");
    print_value(o, &v, true);
  }
  fprintf(o, "],\n \"ops\": {");
  for (int k = 0; k < n_ops; k++) {
    if (k) fprintf(o, ", ");
    er_cli_json_string(o, ops[k].op);
    fprintf(o, ": %d", ops[k].n);
  }
  fprintf(o, "},\n \"metadata\": {");
  for (size_t i = 0; i < s.metadata_count; i++) {
    const char *key, *val;
    er_model_metadata(m, i, &key, &val);
    if (i) fprintf(o, ", ");
    er_cli_json_string(o, key);
    fprintf(o, ": ");
    er_cli_json_string(o, val);
  }
  fprintf(o, "}");
}

/* The model's summary as text. */
static void print_text(FILE *o, const char *path, er_model *m, const er_model_summary *sp, const op_count *ops,
                       int n_ops, int dynamic) {
  const er_model_summary s = *sp;
  fprintf(o, "model:        %s\n", path);
  fprintf(o, "ir version:   %lld\nopset:        %lld\n", (long long)s.ir_version, (long long)s.opset);
  fprintf(o, "producer:     %s %s\n", s.producer_name, s.producer_version);
  fprintf(o, "nodes:        %zu (after load-time constant folding)\n", s.node_count);
  fprintf(o, "parameters:   %llu in %zu initializers, %llu bytes\n", (unsigned long long)s.parameter_count,
          s.initializer_count, (unsigned long long)s.weight_bytes);
  fprintf(o, "dynamic dims: %d in the inputs\n", dynamic);
  fprintf(o, "inputs:\n");
  for (size_t i = 0; i < er_model_input_count(m); i++) {
    er_value_info v;
    er_model_input_info(m, i, &v);
    print_value(o, &v, false);
  }
  fprintf(o, "outputs:\n");
  for (size_t i = 0; i < er_model_output_count(m); i++) {
    er_value_info v;
    er_model_output_info(m, i, &v);
    print_value(o, &v, false);
  }
  fprintf(o, "ops:\n");
  for (int k = 0; k < n_ops; k++) fprintf(o, "  %-24s %d\n", ops[k].op, ops[k].n);
  if (s.metadata_count) fprintf(o, "metadata:\n");
  for (size_t i = 0; i < s.metadata_count; i++) {
    const char *key, *val;
    er_model_metadata(m, i, &key, &val);
    fprintf(o, "  %s: %s\n", key, val);
  }
}

int er_cmd_inspect(int argc, char **argv) {
  const char *path = NULL;
  bool json = false;
  er_cli_backend be;
  er_cli_backend_init(&be);
  const char *targets[ER_CLI_MAX_BACKENDS];
  int n_targets = 0;
  bool assume_q = false;
  for (int i = 1; i < argc; i++) {
    int used = er_cli_backend_arg("inspect", &be, argc, argv, &i);
    if (used < 0) return 1;
    if (used) continue;
    if (strcmp(argv[i], "--target") == 0) {
      if (++i >= argc) return er_cli_fail("inspect", "--target needs a profile file");
      if (n_targets == ER_CLI_MAX_BACKENDS) return er_cli_fail("inspect", "too many --target options");
      targets[n_targets++] = argv[i];
      continue;
    }
    if (strcmp(argv[i], "--assume-quantized") == 0) {
      assume_q = true;
      continue;
    }
    if (strcmp(argv[i], "--json") == 0) json = true;
    else if (argv[i][0] == '-') return er_cli_fail("inspect", "unknown option '%s'", argv[i]);
    else if (!path) path = argv[i];
    else return er_cli_fail("inspect", "unexpected argument '%s'", argv[i]);
  }
  if (!path) return er_cli_fail("inspect", "no MODEL given (see edgerun inspect --help)");
  if (er_cli_is_llm(path)) return er_cmd_inspect_llm(path, json);
  if (er_cli_backend_load("inspect", &be)) return 1;
  er_model *m, *as_written = NULL;
  er_status st = er_model_load_file(path, NULL, &m);
  if (st != ER_STATUS_OK) return er_cli_fail_status("inspect", st, path);
  /* An NPU's toolchain compiles the model's operators as written (and fuses
   * in its own way), so target profiles are checked against the graph with
   * constants folded but without edgerun's operator rewrites. */
  if (n_targets) {
    er_load_options lo;
    er_load_options_init(&lo);
    lo.optimize = 1;
    st = er_model_load_file(path, &lo, &as_written);
    if (st != ER_STATUS_OK) {
      er_model_free(m);
      return er_cli_fail_status("inspect", st, path);
    }
  }
  er_model_summary s;
  er_model_summary_get(m, &s);

  op_count *ops = calloc(s.node_count + 1, sizeof *ops);
  int n_ops = 0;
  for (size_t i = 0; i < s.node_count && ops; i++) {
    const char *op, *name;
    er_model_node(m, i, &op, &name);
    int k = 0;
    while (k < n_ops && strcmp(ops[k].op, op) != 0) k++;
    if (k == n_ops) ops[n_ops++] = (op_count){op, 0};
    ops[k].n++;
  }
  if (ops) qsort(ops, (size_t)n_ops, sizeof *ops, cmp_count);
  int dynamic = 0;
  for (size_t i = 0; i < er_model_input_count(m); i++) {
    er_value_info v;
    er_model_input_info(m, i, &v);
    for (int d = 0; d < v.rank; d++)
      if (v.dims[d] < 0) dynamic++;
  }

  FILE *o = stdout;
  if (json) print_json(o, m, &s, ops, n_ops, dynamic);
  else print_text(o, path, m, &s, ops, n_ops, dynamic);
  int rc = be.n_names ? er_cli_inspect_placement(o, m, &be, json) : 0;
  for (int t = 0; t < n_targets && !rc; t++)
    rc = er_cli_inspect_target(o, as_written, targets[t], assume_q, json, t == 0, t + 1 == n_targets);
  if (json) fprintf(o, "}\n");
  free(ops);
  er_model_free(m);
  er_model_free(as_written);
  return rc;
}
