/* main.c - the edgerun command: dispatches to one file per subcommand. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli-llm.h"

static const er_cli_cmd commands[] = {
    {"run", "run a model once on input files and write its outputs", er_cmd_run, er_cmd_run_help},
    {"conform", "run ONNX test-data folders and report pass/fail", er_cmd_conform, er_cmd_conform_help},
    {"inspect", "describe a model: inputs, outputs, ops, weights", er_cmd_inspect, er_cmd_inspect_help},
    {"devices", "list the CPU, accelerators, memory and temperatures", er_cmd_devices, er_cmd_devices_help},
    {"fix-shapes", "make symbolic input dims static and write the model", er_cmd_fix_shapes, er_cmd_fix_shapes_help},
    {"bench", "measure load time, latency percentiles, throughput and memory; --compare another backend", er_cmd_bench, er_cmd_bench_help},
    {"serve", "serve a model repository over HTTP (KServe v2)", er_cmd_serve, er_cmd_serve_help},
    {"repo", "roll back, pin or list versions in a model repository", er_cmd_repo, er_cmd_repo_help},
    {"keygen", "create an Ed25519 key pair for signing models", er_cmd_keygen, er_cmd_keygen_help},
    {"sign", "sign model files (FILE.sig)", er_cmd_sign, er_cmd_sign_help},
    {"verify", "check model files' signatures", er_cmd_verify, er_cmd_verify_help},
    {"quantize", "quantize a model to int8/int4 QDQ with calibration data", er_cmd_quantize, er_cmd_quantize_help},
    {"analyze", "compare a float and a quantized model layer by layer", er_cmd_analyze, er_cmd_analyze_help},
    {"eval", "accuracy or agreement of a model on data; a deployment gate", er_cmd_eval, er_cmd_eval_help},
    {"generate", "generate text with a GGUF LLM, streamed, with tokens/s", er_cmd_generate, er_cmd_generate_help},
    {"tokenize", "print the token ids of a text under a GGUF model's tokenizer", er_cmd_tokenize, er_cmd_tokenize_help},
    {"perplexity", "perplexity of a GGUF LLM on a text (llama.cpp's chunking)", er_cmd_perplexity, er_cmd_perplexity_help},
};

int er_cli_fail(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "edgerun %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 1;
}

int er_cli_fail_status(const char *cmd, er_status st, const char *what) {
  return er_cli_fail(cmd, "%s: %s (%s)", what, er_last_error()[0] ? er_last_error() : er_status_str(st),
                     er_status_name(st));
}

void er_cli_json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
    switch (*p) {
      case '"': fputs("\\\"", out); break;
      case '\\': fputs("\\\\", out); break;
      case '\n': fputs("\\n", out); break;
      case '\r': fputs("\\r", out); break;
      case '\t': fputs("\\t", out); break;
      default:
        if (*p < 0x20) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
    }
  }
  fputc('"', out);
}

bool er_cli_is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

bool er_cli_parse_int(const char *s, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < 0 || v > 1000000) return false;
  *out = (int)v;
  return true;
}

bool er_cli_parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= 0)) return false;
  *out = v;
  return true;
}

static void usage(FILE *out) {
  fprintf(out, "usage: edgerun <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\n'edgerun <command> --help' describes a command. edgerun %s\n", er_version());
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (er_cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("edgerun %s\n", er_version());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(argv[1], commands[i].name) != 0) continue;
    for (int k = 2; k < argc; k++)
      if (er_cli_is_help(argv[k])) {
        commands[i].help(stdout);
        return 0;
      }
    return commands[i].main(argc - 1, argv + 1);
  }
  fprintf(stderr, "edgerun: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
