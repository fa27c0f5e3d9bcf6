/* cli-llm.h - shared pieces of the LLM commands (generate, tokenize,
 * perplexity, bench --llm, inspect on GGUF). */
#ifndef ER_CLI_LLM_H
#define ER_CLI_LLM_H

#include "cli/cli.h"

typedef struct er_cli_llm {
  er_llm_context_options ctx;
  bool reference;
} er_cli_llm;

/* A GGUF file or an ONNX decoder (folder with genai_config.json, or its .onnx). */
bool er_cli_is_llm(const char *path);
/* A file that starts with GGUF's magic. */
bool er_cli_is_gguf(const char *path);
void er_cli_llm_init(er_cli_llm *o);
extern const char er_cli_llm_help[];
/* Consumes argv[*i] (and its value) when it is a context option: 1 when
 * consumed, 0 when not one, negative after printing an error. */
int er_cli_llm_arg(const char *cmd, er_cli_llm *o, int argc, char **argv, int *i);
/* Loads the model and (ctx_out not NULL) a context; 0 or the exit code
 * after printing the error. */
int er_cli_llm_open(const char *cmd, const char *path, const er_cli_llm *o, er_llm **llm_out,
                    er_llm_context **ctx_out);
/* A whole text file, NUL-terminated (malloc'd); 0 or the exit code. */
int er_cli_read_text(const char *cmd, const char *path, char **text_out, size_t *len_out);
/* Token ids of text (malloc'd); 0 or the exit code. */
int er_cli_tokenize(const char *cmd, const er_llm *llm, const char *text, size_t len, bool add_special,
                    bool parse_special, int32_t **ids_out, size_t *n_out);

int er_cmd_generate(int argc, char **argv);
void er_cmd_generate_help(FILE *out);
int er_cmd_tokenize(int argc, char **argv);
void er_cmd_tokenize_help(FILE *out);
int er_cmd_perplexity(int argc, char **argv);
void er_cmd_perplexity_help(FILE *out);
/* bench MODEL.gguf --llm (cmd-bench-llm.c): called by cmd-bench.c. */
int er_cmd_bench_llm(int argc, char **argv);
void er_cmd_bench_llm_help(FILE *out);
/* eval MODEL.gguf --text (cmd-eval-llm.c): called by cmd-eval.c. */
int er_cmd_eval_llm(int argc, char **argv);
void er_cmd_eval_llm_help(FILE *out);
/* analyze MODEL.gguf --calib-text (cmd-analyze-llm.c): called by cmd-analyze.c. */
int er_cmd_analyze_llm(int argc, char **argv);
void er_cmd_analyze_llm_help(FILE *out);
/* inspect MODEL.gguf (cmd-inspect-llm.c): called by cmd-inspect.c. */
int er_cmd_inspect_llm(const char *path, bool json);

#endif /* ER_CLI_LLM_H */
