/* cmd-fix-shapes.c - `edgerun fix-shapes`: symbolic input dims made static,
 * shapes re-inferred, the model written out. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

void er_cmd_fix_shapes_help(FILE *out) {
  fprintf(out,
          "usage: edgerun fix-shapes MODEL --dim NAME=N [--dim NAME=N ...] -o OUT\n\n"
          "Gives the symbolic dims of MODEL's inputs fixed sizes (every input dim\n"
          "named NAME becomes N), re-infers every value's shape and writes the model\n"
          "to OUT (through a temporary file and a rename). The operators and weights\n"
          "are unchanged. Static shapes let edgerun plan memory before the first run\n"
          "and let NPU toolchains that refuse dynamic shapes take the model.\n");
}

#define MAX_DIMS 64

int er_cmd_fix_shapes(int argc, char **argv) {
  const char *path = NULL, *out = NULL;
  const char *names[MAX_DIMS];
  int64_t values[MAX_DIMS];
  size_t n = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--dim") == 0) {
      char *eq, *end;
      if (++i >= argc || !(eq = strchr(argv[i], '=')) || eq == argv[i])
        return er_cli_fail("fix-shapes", "--dim needs NAME=N");
      errno = 0;
      long long v = strtoll(eq + 1, &end, 10);
      if (errno || end == eq + 1 || *end || v <= 0)
        return er_cli_fail("fix-shapes", "--dim %s: the size must be a positive integer", argv[i]);
      if (n == MAX_DIMS) return er_cli_fail("fix-shapes", "more than %d --dim options", MAX_DIMS);
      *eq = '\0';
      names[n] = argv[i];
      values[n++] = v;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--out") == 0) {
      if (++i >= argc) return er_cli_fail("fix-shapes", "-o needs a file name");
      out = argv[i];
    } else if (a[0] == '-') {
      return er_cli_fail("fix-shapes", "unknown option '%s' (see edgerun fix-shapes --help)", a);
    } else if (!path) {
      path = a;
    } else {
      return er_cli_fail("fix-shapes", "unexpected argument '%s'", a);
    }
  }
  if (!path || !out) return er_cli_fail("fix-shapes", "MODEL and -o OUT are required (see edgerun fix-shapes --help)");
  if (!n) return er_cli_fail("fix-shapes", "no --dim given");
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1; /* the graph exactly as written, only its shapes change */
  er_model *m;
  er_status st = er_model_load_file(path, &lo, &m);
  if (st != ER_STATUS_OK) return er_cli_fail_status("fix-shapes", st, path);
  st = er_model_fix_dims(m, names, values, n);
  if (st == ER_STATUS_OK) st = er_model_save(m, out);
  int rc = st == ER_STATUS_OK ? 0 : er_cli_fail_status("fix-shapes", st, st == ER_STATUS_NOT_FOUND ? path : out);
  if (!rc) {
    for (size_t i = 0; i < er_model_input_count(m); i++) {
      er_value_info info;
      er_model_input_info(m, i, &info);
      printf("%s: [", info.name);
      for (int d = 0; d < info.rank; d++) printf("%s%lld", d ? "," : "", (long long)info.dims[d]);
      printf("]\n");
    }
    printf("wrote %s\n", out);
  }
  er_model_free(m);
  return rc;
}
