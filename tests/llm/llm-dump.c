/* llm-dump.c - edgerun's side of the llama.cpp comparison: the same JSON
 * as tests/llm/oracle/llama-oracle.c prints (prompt ids, greedy
 * continuation, the first step's top logits), through the public API only.
 *
 *   llm-dump MODEL.gguf N_GEN THREADS PROMPT_FILE [--kv q8] [--reference] [--batch N]
 *   llm-dump MODEL N_GEN THREADS - --ids IDS_FILE P --logits OUT [...]
 *
 * The second form is teacher-forced: IDS_FILE holds token ids (text,
 * whitespace-separated); the first P are decoded as one batch, then each
 * later id one at a time, and the float32 logits after the batch and
 * after each id go to OUT, one vocabulary row each (the onnxruntime
 * comparison of tests/llm/test_llm_onnx.py). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"

#define TOP 64

static int fail(const char *what, er_status st) {
  fprintf(stderr, "llm-dump: %s: %s (%s)\n", what, er_last_error(), er_status_name(st));
  return 1;
}

static int teacher(er_llm *llm, er_llm_context *ctx, const char *ids_path, size_t p, const char *out_path) {
  static int32_t ids[8192];
  size_t n = 0;
  FILE *f = fopen(ids_path, "r");
  if (!f) return 2;
  while (n < 8192 && fscanf(f, "%d", &ids[n]) == 1) n++;
  fclose(f);
  if (p < 1 || p > n) return 2;
  er_llm_info info;
  er_llm_info_get(llm, &info);
  FILE *o = fopen(out_path, "wb");
  if (!o) return 2;
  int32_t *seqs = calloc(n, sizeof *seqs);
  er_llm_batch b = {p, ids, seqs, NULL};
  er_status st = er_llm_decode(ctx, &b);
  for (size_t i = p; st == ER_STATUS_OK; i++) {
    fwrite(er_llm_logits(ctx, 0), sizeof(float), (size_t)info.n_vocab, o);
    if (i == n) break;
    er_llm_batch one = {1, &ids[i], seqs, NULL};
    st = er_llm_decode(ctx, &one);
  }
  free(seqs);
  fclose(o);
  return st == ER_STATUS_OK ? 0 : fail("decode", st);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: llm-dump MODEL.gguf N_GEN THREADS PROMPT_FILE [--kv q8] [--reference] [--batch N]\n");
    return 2;
  }
  int n_gen = atoi(argv[2]);
  er_llm_load_options lo;
  er_llm_load_options_init(&lo);
  er_llm_context_options co;
  er_llm_context_options_init(&co);
  co.threads = atoi(argv[3]);
  co.n_ctx = 1024;
  for (int i = 5; i < argc; i++) {
    if (strcmp(argv[i], "--kv") == 0 && i + 1 < argc) co.kv_type = strcmp(argv[++i], "q8") == 0 ? ER_LLM_KV_Q8 : ER_LLM_KV_F16;
    else if (strcmp(argv[i], "--reference") == 0) lo.force_reference = true;
    else if (strcmp(argv[i], "--unpack") == 0) lo.unpack_weights = true;
    else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) co.n_batch = atoi(argv[++i]);
  }
  for (int i = 5; i + 3 < argc; i++) {
    if (strcmp(argv[i], "--ids") != 0 || strcmp(argv[i + 3], "--logits") != 0 || i + 4 >= argc) continue;
    er_llm *llm = NULL;
    er_status st = er_llm_load(argv[1], &lo, &llm);
    if (st != ER_STATUS_OK) return fail("load", st);
    er_llm_context *ctx = NULL;
    if ((st = er_llm_context_create(llm, &co, &ctx)) != ER_STATUS_OK) return fail("context", st);
    int rc = teacher(llm, ctx, argv[i + 1], (size_t)atoi(argv[i + 2]), argv[i + 4]);
    er_llm_context_free(ctx);
    er_llm_free(llm);
    return rc;
  }
  FILE *f = fopen(argv[4], "rb");
  if (!f) return 2;
  static char text[1 << 20];
  size_t len = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  er_llm *llm = NULL;
  er_status st = er_llm_load(argv[1], &lo, &llm);
  if (st != ER_STATUS_OK) return fail("load", st);
  er_llm_info info;
  er_llm_info_get(llm, &info);
  er_llm_context *ctx = NULL;
  if ((st = er_llm_context_create(llm, &co, &ctx)) != ER_STATUS_OK) return fail("context", st);
  static int32_t ids[8192];
  size_t n = 0;
  if ((st = er_llm_tokenize(llm, text, len, true, false, ids, 8192, &n)) != ER_STATUS_OK) return fail("tokenize", st);
  printf("{\"prompt_ids\": [");
  for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
  printf("],\n");
  int32_t *seqs = calloc(n + 1, sizeof *seqs);
  er_llm_batch b = {n, ids, seqs, NULL};
  if ((st = er_llm_decode(ctx, &b)) != ER_STATUS_OK) return fail("decode", st);
  const float *lg = er_llm_logits(ctx, 0);
  int top[TOP];
  for (int k = 0; k < TOP; k++) {
    int best = -1;
    for (int v = 0; v < info.n_vocab; v++) {
      int used = 0;
      for (int j = 0; j < k; j++) used |= top[j] == v;
      if (!used && (best < 0 || lg[v] > lg[best])) best = v;
    }
    top[k] = best;
  }
  double mx = lg[top[0]], sum = 0;
  for (int v = 0; v < info.n_vocab; v++) sum += exp((double)lg[v] - mx);
  printf("\"logsumexp0\": %.9g, \"top0\": [", mx + log(sum));
  for (int k = 0; k < TOP; k++) printf("%s[%d, %.9g]", k ? ", " : "", top[k], lg[top[k]]);
  printf("],\n\"greedy\": [");
  int32_t tok = top[0], seq0 = 0;
  for (int i = 0; i < n_gen; i++) {
    printf("%s%d", i ? ", " : "", tok);
    if (er_llm_token_is_eog(llm, tok)) break;
    er_llm_batch one = {1, &tok, &seq0, NULL};
    if ((st = er_llm_decode(ctx, &one)) != ER_STATUS_OK) return fail("decode", st);
    lg = er_llm_logits(ctx, 0);
    int best = 0;
    for (int v = 1; v < info.n_vocab; v++)
      if (lg[v] > lg[best]) best = v;
    tok = best;
  }
  printf("]}\n");
  free(seqs);
  er_llm_context_free(ctx);
  er_llm_free(llm);
  return 0;
}
