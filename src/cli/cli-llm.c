/* cli-llm.c - what the LLM commands share: recognising a GGUF file or ONNX decoder, the
 * context options (--threads, --ctx, --batch, --kv), loading model and
 * context with errors that name the file, reading a text file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli-llm.h"

bool er_cli_is_gguf(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  char magic[4] = {0};
  size_t got = fread(magic, 1, 4, f);
  fclose(f);
  return got == 4 && memcmp(magic, "GGUF", 4) == 0;
}

/* A GGUF file, or an ONNX decoder: a folder with genai_config.json, or a
 * .onnx file beside one. */
bool er_cli_is_llm(const char *path) {
  struct stat sb;
  char cfg[4096];
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(cfg, sizeof cfg, "%s/genai_config.json", path);
    return stat(cfg, &sb) == 0;
  }
  size_t n = strlen(path);
  if (n > 5 && n < sizeof cfg - 32 && strcmp(path + n - 5, ".onnx") == 0) {
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path) : 1;
    snprintf(cfg, sizeof cfg, "%.*s/genai_config.json", dir, slash ? path : ".");
    return stat(cfg, &sb) == 0;
  }
  return er_cli_is_gguf(path);
}

void er_cli_llm_init(er_cli_llm *o) {
  memset(o, 0, sizeof *o);
  er_llm_context_options_init(&o->ctx);
  o->ctx.threads = 1;
}

const char er_cli_llm_help[] =
    "  --threads T      worker threads (default 1)\n"
    "  --ctx N          context positions per sequence (default: the model's, at most 4096)\n"
    "  --batch N        tokens per forward pass at most (default 512)\n"
    "  --kv f16|q8      KV-cache type (default f16; q8 halves its memory)\n"
    "  --reference      plain C kernels only (the numerical truth; slow)\n"
    "  --fp16           round every activation to fp16, as an accelerator computing\n"
    "                   in fp16 does; fails naming the layer where one overflows\n";

int er_cli_llm_arg(const char *cmd, er_cli_llm *o, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  int v;
  if (strcmp(a, "--threads") == 0 || strcmp(a, "-t") == 0) {
    if (++*i >= argc || !er_cli_parse_int(argv[*i], &v) || v < 1 || v > 256)
      return -er_cli_fail(cmd, "--threads needs a count from 1 to 256");
    o->ctx.threads = v;
    return 1;
  }
  if (strcmp(a, "--ctx") == 0 || strcmp(a, "-c") == 0) {
    if (++*i >= argc || !er_cli_parse_int(argv[*i], &v) || v < 1)
      return -er_cli_fail(cmd, "--ctx needs a positive position count");
    o->ctx.n_ctx = v;
    return 1;
  }
  if (strcmp(a, "--batch") == 0 || strcmp(a, "-b") == 0) {
    if (++*i >= argc || !er_cli_parse_int(argv[*i], &v) || v < 1)
      return -er_cli_fail(cmd, "--batch needs a positive token count");
    o->ctx.n_batch = v;
    return 1;
  }
  if (strcmp(a, "--kv") == 0) {
    if (++*i >= argc) return -er_cli_fail(cmd, "--kv needs f16 or q8");
    if (strcmp(argv[*i], "f16") == 0) o->ctx.kv_type = ER_LLM_KV_F16;
    else if (strcmp(argv[*i], "q8") == 0) o->ctx.kv_type = ER_LLM_KV_Q8;
    else return -er_cli_fail(cmd, "--kv is '%s'; it must be f16 or q8", argv[*i]);
    return 1;
  }
  if (strcmp(a, "--reference") == 0) {
    o->reference = true;
    return 1;
  }
  if (strcmp(a, "--fp16") == 0) {
    o->ctx.fp16_activations = true;
    return 1;
  }
  return 0;
}

int er_cli_llm_open(const char *cmd, const char *path, const er_cli_llm *o, er_llm **llm_out,
                    er_llm_context **ctx_out) {
  er_llm_load_options lo;
  er_llm_load_options_init(&lo);
  lo.force_reference = o->reference;
  er_status st = er_llm_load(path, &lo, llm_out);
  if (st != ER_STATUS_OK) return er_cli_fail_status(cmd, st, "loading the model");
  if (!ctx_out) return 0;
  st = er_llm_context_create(*llm_out, &o->ctx, ctx_out);
  if (st != ER_STATUS_OK) {
    er_llm_free(*llm_out);
    *llm_out = NULL;
    return er_cli_fail_status(cmd, st, "creating a context");
  }
  return 0;
}

int er_cli_read_text(const char *cmd, const char *path, char **text_out, size_t *len_out) {
  FILE *f = fopen(path, "rb");
  if (!f) return er_cli_fail(cmd, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 30)) {
    fclose(f);
    return er_cli_fail(cmd, "'%s' is not a regular file of at most 1 GiB", path);
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n + 1);
  if (!buf || fread(buf, 1, n, f) != n) {
    free(buf);
    fclose(f);
    return er_cli_fail(cmd, "cannot read '%s'", path);
  }
  fclose(f);
  buf[n] = 0;
  *text_out = buf;
  *len_out = n;
  return 0;
}

int er_cli_tokenize(const char *cmd, const er_llm *llm, const char *text, size_t len, bool add_special,
                    bool parse_special, int32_t **ids_out, size_t *n_out) {
  size_t n = 0;
  er_status st = er_llm_tokenize(llm, text, len, add_special, parse_special, NULL, 0, &n);
  if (st != ER_STATUS_OK && st != ER_STATUS_LIMIT) return er_cli_fail_status(cmd, st, "tokenizing");
  int32_t *ids = malloc((n + 1) * sizeof *ids);
  if (!ids) return er_cli_fail(cmd, "out of memory for %zu tokens", n);
  st = er_llm_tokenize(llm, text, len, add_special, parse_special, ids, n, &n);
  if (st != ER_STATUS_OK) {
    free(ids);
    return er_cli_fail_status(cmd, st, "tokenizing");
  }
  *ids_out = ids;
  *n_out = n;
  return 0;
}
