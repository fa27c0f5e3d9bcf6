/* cli-backend.c - the backend options every model command shares:
 * --backend LIST, --no-fallback, --backend-path PATH (and the
 * EDGERUN_BACKEND_PATH environment variable, colon-separated). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "edgerun-backend.h"

const char er_cli_backend_help[] =
    "  --backend LIST      preferred backends in order, comma-separated (cpu,\n"
    "                      opencl, cuda, or a plugin's name); nodes none of them\n"
    "                      supports run on the CPU, each listed with its reason\n"
    "  --no-fallback       make any CPU placement an error\n"
    "  --backend-path P    load backend plugins from P (a .so file or a folder of\n"
    "                      them; repeatable; EDGERUN_BACKEND_PATH adds more,\n"
    "                      colon-separated)\n";

void er_cli_backend_init(er_cli_backend *b) { memset(b, 0, sizeof *b); }

int er_cli_backend_arg(const char *cmd, er_cli_backend *b, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  if (strcmp(a, "--no-fallback") == 0) {
    b->no_fallback = true;
    return 1;
  }
  if (strcmp(a, "--backend") == 0 || strcmp(a, "-b") == 0) {
    if (++*i >= argc) return -er_cli_fail(cmd, "--backend needs a name (cpu, opencl, cuda, ...)");
    snprintf(b->list, sizeof b->list, "%s", argv[*i]);
    b->n_names = 0;
    for (char *tok = strtok(b->list, ","); tok; tok = strtok(NULL, ",")) {
      if (b->n_names == ER_CLI_MAX_BACKENDS)
        return -er_cli_fail(cmd, "--backend lists more than %d backends", ER_CLI_MAX_BACKENDS);
      b->names[b->n_names++] = tok;
    }
    if (!b->n_names) return -er_cli_fail(cmd, "--backend needs a name (cpu, opencl, cuda, ...)");
    return 1;
  }
  if (strcmp(a, "--backend-path") == 0) {
    if (++*i >= argc) return -er_cli_fail(cmd, "--backend-path needs a file or folder");
    if (b->n_paths == ER_CLI_MAX_BACKENDS)
      return -er_cli_fail(cmd, "more than %d --backend-path options", ER_CLI_MAX_BACKENDS);
    b->paths[b->n_paths++] = argv[*i];
    return 1;
  }
  return 0;
}

int er_cli_backend_load(const char *cmd, const er_cli_backend *b) {
  for (int k = 0; k < b->n_paths; k++) {
    er_status st = er_backend_load(b->paths[k]);
    if (st != ER_STATUS_OK) return er_cli_fail_status(cmd, st, "--backend-path");
  }
  const char *env = getenv("EDGERUN_BACKEND_PATH");
  if (env && env[0]) {
    char *copy = strdup(env);
    if (!copy) return er_cli_fail(cmd, "out of memory");
    char *save = NULL;
    for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
      er_status st = er_backend_load(tok);
      if (st != ER_STATUS_OK) {
        free(copy);
        return er_cli_fail_status(cmd, st, "EDGERUN_BACKEND_PATH");
      }
    }
    free(copy);
  }
  return 0;
}

void er_cli_backend_apply(const er_cli_backend *b, er_session_options *o) {
  o->backends = b->n_names ? (const char *const *)b->names : NULL;
  o->backend_count = (size_t)b->n_names;
  o->allow_fallback = !b->no_fallback;
}
