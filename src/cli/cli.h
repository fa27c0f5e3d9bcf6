/* cli.h - shared pieces of the edgerun command-line tool. Each subcommand
 * lives in its own cmd-*.c file and is a thin layer over the library. */
#ifndef ER_CLI_H
#define ER_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "edgerun.h"

typedef struct er_cli_cmd {
  const char *name;
  const char *summary;
  int (*main)(int argc, char **argv);  /* argv[0] is the subcommand name */
  void (*help)(FILE *out);
} er_cli_cmd;

/* Prints "edgerun <cmd>: <message>" to stderr and returns exit code 1. */
int er_cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the library's last error for a failed call with its status name. */
int er_cli_fail_status(const char *cmd, er_status st, const char *what);
/* Writes s as a JSON string literal (with quotes) to out. */
void er_cli_json_string(FILE *out, const char *s);
/* True when arg equals "--help" or "-h". */
bool er_cli_is_help(const char *arg);
/* Parses a non-negative int option value; false on junk. */
bool er_cli_parse_int(const char *s, int *out);
bool er_cli_parse_double(const char *s, double *out);

/* Backend options shared by the model commands (cli-backend.c). */
#define ER_CLI_MAX_BACKENDS 8
typedef struct er_cli_backend {
  char list[256];                       /* --backend text, split in place */
  char *names[ER_CLI_MAX_BACKENDS];     /* into list */
  int n_names;
  const char *paths[ER_CLI_MAX_BACKENDS];  /* --backend-path values (argv) */
  int n_paths;
  bool no_fallback;
} er_cli_backend;
extern const char er_cli_backend_help[];
void er_cli_backend_init(er_cli_backend *b);
/* Consumes argv[*i] (and its value) when it is a backend option: 1 when
 * consumed, 0 when not one, negative after printing an error. */
int er_cli_backend_arg(const char *cmd, er_cli_backend *b, int argc, char **argv, int *i);
/* Loads the plugins named by --backend-path and EDGERUN_BACKEND_PATH;
 * 0 or the exit code after printing the error. */
int er_cli_backend_load(const char *cmd, const er_cli_backend *b);
/* Sets the session options' backends and fallback from b (which must
 * outlive the session creation). */
void er_cli_backend_apply(const er_cli_backend *b, er_session_options *o);

/* The accelerator sections of inspect (cmd-inspect-accel.c): 0, or the
 * exit code after printing the error. JSON output continues an open
 * object (each section starts with ",\n"); first/last bracket the
 * "targets" list. */
int er_cli_inspect_placement(FILE *o, const er_model *m, const er_cli_backend *be, bool json);
int er_cli_inspect_target(FILE *o, const er_model *m, const char *profile, bool assume_quantized,
                          bool json, bool first, bool last);

int er_cmd_run(int argc, char **argv);
void er_cmd_run_help(FILE *out);
int er_cmd_conform(int argc, char **argv);
void er_cmd_conform_help(FILE *out);
int er_cmd_inspect(int argc, char **argv);
void er_cmd_inspect_help(FILE *out);
int er_cmd_fix_shapes(int argc, char **argv);
void er_cmd_fix_shapes_help(FILE *out);
int er_cmd_bench(int argc, char **argv);
void er_cmd_bench_help(FILE *out);
int er_cmd_serve(int argc, char **argv);
void er_cmd_serve_help(FILE *out);
int er_cmd_repo(int argc, char **argv);
void er_cmd_repo_help(FILE *out);
int er_cmd_keygen(int argc, char **argv);
void er_cmd_keygen_help(FILE *out);
int er_cmd_sign(int argc, char **argv);
void er_cmd_sign_help(FILE *out);
int er_cmd_verify(int argc, char **argv);
void er_cmd_verify_help(FILE *out);
int er_cmd_devices(int argc, char **argv);
void er_cmd_devices_help(FILE *out);
int er_cmd_quantize(int argc, char **argv);
void er_cmd_quantize_help(FILE *out);
int er_cmd_analyze(int argc, char **argv);
void er_cmd_analyze_help(FILE *out);
int er_cmd_eval(int argc, char **argv);
void er_cmd_eval_help(FILE *out);

#endif /* ER_CLI_H */
