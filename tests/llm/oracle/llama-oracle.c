/* llama-oracle.c - llama.cpp as the reference for edgerun's LLM engine:
 * loads a GGUF with libllama (built by scripts/setup-llama-cpp.sh from the
 * llama-cpp-python source distribution), tokenizes a prompt, and prints
 * as JSON the prompt's ids, the greedy continuation of N tokens and the
 * first step's top logits. Not part of edgerun: built only by
 * tests/llm/oracle/make_refs.py against llama.cpp's headers.
 *
 *   llama-oracle MODEL.gguf N_GEN THREADS PROMPT_FILE */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define TOP 64

static void quiet(enum ggml_log_level level, const char *text, void *user) {
  (void)level;
  (void)text;
  (void)user;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: llama-oracle MODEL.gguf N_GEN THREADS PROMPT_FILE\n");
    return 2;
  }
  int n_gen = atoi(argv[2]), threads = atoi(argv[3]);
  FILE *f = fopen(argv[4], "rb");
  if (!f) return 2;
  static char text[1 << 20];
  size_t len = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[len] = 0;
  llama_log_set(quiet, NULL);
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  bool nofa = false;
  for (int a = 5; a < argc; a++) {
    if (strcmp(argv[a], "nofa") == 0) nofa = true;
    /* "norepack": weights as stored, not repacked into llama.cpp's
     * interleaved CPU layouts (whose products sum in another order). */
    if (strcmp(argv[a], "norepack") == 0) mp.use_extra_bufts = false;
  }
  struct llama_model *model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 3;
  const struct llama_vocab *vocab = llama_model_get_vocab(model);
  int n_vocab = llama_vocab_n_tokens(vocab);
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_batch = 512;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  /* "nofa": llama.cpp's attention without flash attention (its default,
   * "auto", uses it on the CPU: fp16 queries and fp16 accumulation). */
  if (nofa) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  struct llama_context *ctx = llama_init_from_model(model, cp);
  if (!ctx) return 4;
  static llama_token ids[8192];
  int n = llama_tokenize(vocab, text, (int32_t)len, ids, 8192, true, false);
  if (n < 0) return 5;
  printf("{\"prompt_ids\": [");
  for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
  printf("],\n");
  if (llama_decode(ctx, llama_batch_get_one(ids, n)) != 0) return 6;
  const float *lg = llama_get_logits_ith(ctx, -1);
  /* The first step's largest logits and the log of the softmax's sum. */
  int top[TOP];
  for (int k = 0; k < TOP; k++) {
    int best = -1;
    for (int v = 0; v < n_vocab; v++) {
      int used = 0;
      for (int j = 0; j < k; j++) used |= top[j] == v;
      if (!used && (best < 0 || lg[v] > lg[best])) best = v;
    }
    top[k] = best;
  }
  double mx = lg[top[0]], sum = 0;
  for (int v = 0; v < n_vocab; v++) sum += exp((double)lg[v] - mx);
  printf("\"logsumexp0\": %.9g, \"top0\": [", mx + log(sum));
  for (int k = 0; k < TOP; k++) printf("%s[%d, %.9g]", k ? ", " : "", top[k], lg[top[k]]);
  printf("],\n\"greedy\": [");
  /* margins[i]: how far the logit of greedy[i] led the runner-up's, so a
   * checker can tell a near tie (where engines may part) from a real gap. */
  static float margins[8192];
  int n_out = 0;
  llama_token tok = top[0];
  margins[0] = lg[top[0]] - lg[top[1]];
  for (int i = 0; i < n_gen && i < 8192; i++) {
    printf("%s%d", i ? ", " : "", tok);
    n_out = i + 1;
    if (llama_vocab_is_eog(vocab, tok) || i + 1 == n_gen) break;
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return 7;
    lg = llama_get_logits_ith(ctx, -1);
    int best = 0, second = -1;
    for (int v = 1; v < n_vocab; v++) {
      if (lg[v] > lg[best]) {
        second = best;
        best = v;
      } else if (second < 0 || lg[v] > lg[second]) {
        second = v;
      }
    }
    if (second < 0) second = best == 0 ? 1 : 0;
    margins[i + 1] = lg[best] - lg[second];
    tok = best;
  }
  printf("],\n\"margins\": [");
  for (int i = 0; i < n_out; i++) printf("%s%.6g", i ? ", " : "", margins[i]);
  printf("]}\n");
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
