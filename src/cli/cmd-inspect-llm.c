/* cmd-inspect-llm.c - edgerun inspect on a GGUF LLM: what it is, what its
 * weights cost, and under which licence (users have been caught by model
 * licences after deployment, so restrictive terms get a warning). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli-llm.h"

/* Licence names that restrict commercial use or redistribution, matched
 * case-insensitively as substrings of general.license. */
static const char *const restrictive[] = {
    "cc-by-nc", "non-commercial", "noncommercial", "research", "llama2", "llama3", "llama-2", "llama-3",
    "gemma", "openrail", "other", "proprietary", "custom", "qwen-research", "deepseek"};

static bool contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (const char *p = hay; *p; p++) {
    size_t i = 0;
    while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == n) return true;
  }
  return false;
}

/* Why a licence needs a second look, or NULL. */
static const char *licence_warning(const char *lic) {
  if (!lic[0]) return "the model declares no licence (general.license): check its terms before deploying";
  for (size_t i = 0; i < sizeof restrictive / sizeof restrictive[0]; i++)
    if (contains_ci(lic, restrictive[i]))
      return "this licence restricts use (non-commercial, acceptable-use or custom terms): read it before deploying";
  return NULL;
}

typedef struct type_row {
  const char *type;
  uint64_t tensors, elems, bytes;
} type_row;

int er_cmd_inspect_llm(const char *path, bool json) {
  const char *cmd = "inspect";
  er_cli_llm lo;
  er_cli_llm_init(&lo);
  er_llm *llm = NULL;
  int rc = er_cli_llm_open(cmd, path, &lo, &llm, NULL);
  if (rc) return rc;
  er_llm_info in;
  er_llm_info_get(llm, &in);
  type_row rows[48];
  size_t n_rows = 0;
  for (size_t i = 0; i < er_llm_tensor_count(llm); i++) {
    const char *name, *type;
    uint64_t el, by;
    er_llm_tensor_info(llm, i, &name, &type, &el, &by);
    size_t r = 0;
    while (r < n_rows && strcmp(rows[r].type, type) != 0) r++;
    if (r == n_rows && n_rows < 48) rows[n_rows++] = (type_row){type, 0, 0, 0};
    if (r < n_rows) {
      rows[r].tensors++;
      rows[r].elems += el;
      rows[r].bytes += by;
    }
  }
  const char *warn = licence_warning(in.license);
  /* An ONNX decoder is converted at load; the importer says so in a key. */
  bool onnx = false;
  for (size_t i = 0; i < er_llm_metadata_count(llm); i++) {
    const char *key = NULL;
    if (er_llm_metadata(llm, i, &key, NULL, 0) == ER_STATUS_OK && strcmp(key, "general.source.format") == 0) onnx = true;
  }
  double bpw = in.n_params ? 8.0 * (double)in.weight_bytes / (double)in.n_params : 0;
  if (json) {
    printf("{\"format\": \"%s\", \"architecture\": ", onnx ? "onnx" : "gguf");
    er_cli_json_string(stdout, in.architecture);
    printf(", \"name\": ");
    er_cli_json_string(stdout, in.name);
    printf(", \"license\": ");
    er_cli_json_string(stdout, in.license);
    printf(", \"license_warning\": ");
    if (warn) er_cli_json_string(stdout, warn);
    else printf("null");
    printf(",\n \"layers\": %d, \"heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"embedding\": %lld, "
           "\"feed_forward\": %lld, \"vocab\": %lld, \"context_length\": %lld, \"rope_freq_base\": %g,\n"
           " \"params\": %llu, \"weight_bytes\": %llu, \"bits_per_weight\": %.3f, \"tokenizer\": ",
           in.n_layers, in.n_heads, in.n_kv_heads, in.head_dim, (long long)in.n_embd, (long long)in.n_ff,
           (long long)in.n_vocab, (long long)in.n_ctx_train, (double)in.rope_freq_base,
           (unsigned long long)in.n_params, (unsigned long long)in.weight_bytes, bpw);
    er_cli_json_string(stdout, in.tokenizer);
    printf(", \"bos\": %d, \"eos\": %d,\n \"tensor_types\": [", in.bos, in.eos);
    for (size_t r = 0; r < n_rows; r++)
      printf("%s{\"type\": \"%s\", \"tensors\": %llu, \"params\": %llu, \"bytes\": %llu, \"bits_per_weight\": %.3f}",
             r ? ", " : "", rows[r].type, (unsigned long long)rows[r].tensors, (unsigned long long)rows[r].elems,
             (unsigned long long)rows[r].bytes, rows[r].elems ? 8.0 * (double)rows[r].bytes / (double)rows[r].elems : 0);
    printf("],\n \"chat_template\": ");
    er_cli_json_string(stdout, in.chat_template);
    printf(",\n \"metadata\": {");
    char val[512];
    bool first = true;
    for (size_t i = 0; i < er_llm_metadata_count(llm); i++) {
      const char *key;
      if (er_llm_metadata(llm, i, &key, val, sizeof val) != ER_STATUS_OK) continue;
      if (strcmp(key, "tokenizer.chat_template") == 0) continue;
      printf("%s", first ? "" : ", ");
      first = false;
      er_cli_json_string(stdout, key);
      printf(": ");
      er_cli_json_string(stdout, val);
    }
    printf("}}\n");
  } else {
    printf("model         %s\n", path);
    printf("format        %s, architecture %s%s%s\n", onnx ? "ONNX (onnxruntime-genai builder), converted at load" : "GGUF",
           in.architecture, in.name[0] ? ", name " : "", in.name);
    printf("licence       %s\n", in.license[0] ? in.license : "(none declared)");
    if (warn) printf("WARNING       %s\n", warn);
    printf("layers        %d    heads %d (key/value heads %d, head dim %d)\n", in.n_layers, in.n_heads,
           in.n_kv_heads, in.head_dim);
    printf("width         %lld  feed-forward %lld  vocabulary %lld\n", (long long)in.n_embd, (long long)in.n_ff,
           (long long)in.n_vocab);
    printf("context       %lld positions (training), rope base %g\n", (long long)in.n_ctx_train,
           (double)in.rope_freq_base);
    printf("parameters    %.2f M, %.2f MB of weights, %.3f bits per weight\n", (double)in.n_params / 1e6,
           (double)in.weight_bytes / 1e6, bpw);
    printf("tokenizer     %s (BOS %d, EOS %d)\n", in.tokenizer, in.bos, in.eos);
    printf("\n%-8s %8s %14s %14s %10s\n", "type", "tensors", "params", "bytes", "bits/w");
    for (size_t r = 0; r < n_rows; r++)
      printf("%-8s %8llu %14llu %14llu %10.3f\n", rows[r].type, (unsigned long long)rows[r].tensors,
             (unsigned long long)rows[r].elems, (unsigned long long)rows[r].bytes,
             rows[r].elems ? 8.0 * (double)rows[r].bytes / (double)rows[r].elems : 0);
    printf("\nchat template %s\n", in.chat_template[0] ? "(tokenizer.chat_template):" : "none");
    if (in.chat_template[0]) printf("%s\n", in.chat_template);
  }
  er_llm_free(llm);
  return 0;
}
