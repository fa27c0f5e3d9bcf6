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

int er_cmd_run(int argc, char **argv);
void er_cmd_run_help(FILE *out);
int er_cmd_conform(int argc, char **argv);
void er_cmd_conform_help(FILE *out);
int er_cmd_inspect(int argc, char **argv);
void er_cmd_inspect_help(FILE *out);
int er_cmd_quantize(int argc, char **argv);
void er_cmd_quantize_help(FILE *out);
int er_cmd_analyze(int argc, char **argv);
void er_cmd_analyze_help(FILE *out);
int er_cmd_eval(int argc, char **argv);
void er_cmd_eval_help(FILE *out);

#endif /* ER_CLI_H */
