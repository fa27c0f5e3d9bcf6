/* tok-gguf.c - a tokenizer from a GGUF file's tokenizer.ggml.* metadata.
 *
 * The keys, as llama.cpp writes them: model ("gpt2" = byte-level BPE,
 * "llama" = SentencePiece BPE), pre (the pre-tokenizer's name), tokens,
 * scores, token_type, merges, the special ids (bos/eos/unknown/padding/
 * eot _token_id) and the add_bos_token / add_eos_token / add_space_prefix
 * flags. Strings and arrays are read in place from the mapping; only the
 * (pointer, length) views are allocated here, and freed once the
 * tokenizer has copied what it keeps. */
#include <stdlib.h>

#include "gguf/gguf.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"

/* An optional token id: absent = `dflt`; UINT32_MAX or a negative value
 * (how some converters write "none") = -1. */
static er_status get_id(const er_gguf *g, const char *key, int32_t dflt, int32_t *out) {
  int64_t v;
  er_status st = er__gguf_get_i64(g, key, &v);
  if (st == ER_STATUS_NOT_FOUND) {
    er__error_clear();
    *out = dflt;
    return ER_STATUS_OK;
  }
  ER_CHECK(st);
  if (v < 0 || v == UINT32_MAX) {
    *out = -1;
    return ER_STATUS_OK;
  }
  if (v > INT32_MAX)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: key '%s' is %lld, not a token id", er__gguf_what(g), key,
                     (long long)v);
  *out = (int32_t)v;
  return ER_STATUS_OK;
}

static er_status get_flag(const er_gguf *g, const char *key, bool dflt, bool *out) {
  er_status st = er__gguf_get_bool(g, key, out);
  if (st == ER_STATUS_NOT_FOUND) {
    er__error_clear();
    *out = dflt;
    return ER_STATUS_OK;
  }
  return st;
}

/* An array of `want` type (or any integer type for want == INT32) with n
 * elements; NULL when absent. */
static er_status get_array(const er_gguf *g, const char *key, er_gguf_vtype want, bool required, size_t n_expect,
                           const er_gguf_kv **out) {
  *out = NULL;
  const er_gguf_kv *kv = er__gguf_find(g, key);
  if (!kv) {
    if (required) return er__error(ER_STATUS_INVALID_MODEL, "%s: key '%s' is missing", er__gguf_what(g), key);
    return ER_STATUS_OK;
  }
  bool ok = kv->type == ER_GGUF_ARRAY;
  if (ok && want == ER_GGUF_INT32)
    ok = kv->elem_type == ER_GGUF_INT32 || kv->elem_type == ER_GGUF_UINT32 || kv->elem_type == ER_GGUF_INT8 ||
         kv->elem_type == ER_GGUF_UINT8 || kv->elem_type == ER_GGUF_INT16 || kv->elem_type == ER_GGUF_UINT16 ||
         kv->elem_type == ER_GGUF_INT64 || kv->elem_type == ER_GGUF_UINT64;
  else if (ok && want == ER_GGUF_FLOAT32)
    ok = kv->elem_type == ER_GGUF_FLOAT32 || kv->elem_type == ER_GGUF_FLOAT64;
  else if (ok)
    ok = kv->elem_type == want;
  if (!ok)
    return er__error(ER_STATUS_TYPE_MISMATCH, "%s: key '%s' is %s of %s; an array of %s was expected",
                     er__gguf_what(g), key, er__gguf_vtype_name(kv->type),
                     er__gguf_vtype_name(kv->type == ER_GGUF_ARRAY ? kv->elem_type : kv->type),
                     er__gguf_vtype_name(want));
  if (n_expect != SIZE_MAX && kv->n != n_expect)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: key '%s' has %llu entries for %zu tokens", er__gguf_what(g), key,
                     (unsigned long long)kv->n, n_expect);
  *out = kv;
  return ER_STATUS_OK;
}

/* The id of the first of `texts` present in the vocabulary, or -1. */
static int32_t find_any(const er_tok_str *tokens, size_t n, const char *const *texts, size_t n_texts) {
  for (size_t k = 0; k < n_texts; k++) {
    size_t len = strlen(texts[k]);
    for (size_t i = 0; i < n; i++)
      if (tokens[i].len == len && memcmp(tokens[i].p, texts[k], len) == 0) return (int32_t)i;
  }
  return -1;
}

er_status er__tok_create_gguf(const struct er_gguf *g, er_tokenizer **out) {
  if (!out) return er__error(ER_STATUS_INVALID_ARGUMENT, "er__tok_create_gguf: out is NULL");
  *out = NULL;
  if (!g) return er__error(ER_STATUS_INVALID_ARGUMENT, "er__tok_create_gguf: g is NULL");
  const char *what = er__gguf_what(g);
  er_tok_config cfg;
  memset(&cfg, 0, sizeof cfg);

  er_gguf_str model;
  er_status st = er__gguf_get_str(g, "tokenizer.ggml.model", &model);
  if (st == ER_STATUS_NOT_FOUND)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: key 'tokenizer.ggml.model' is missing", what);
  ER_CHECK(st);
  bool spm = false;
  if (model.len == 4 && memcmp(model.p, "gpt2", 4) == 0) {
    cfg.kind = ER_TOK_BPE;
  } else if (model.len == 5 && memcmp(model.p, "llama", 5) == 0) {
    cfg.kind = ER_TOK_SPM;
    spm = true;
  } else {
    return er__error(ER_STATUS_UNSUPPORTED,
                     "%s: tokenizer.ggml.model '%.*s' is not implemented (edgerun has \"gpt2\" and \"llama\")", what,
                     (int)(model.len < 64 ? model.len : 64), model.p);
  }

  /* The pre-tokenizer name, NUL-terminated for er_tok_config. */
  char pre[64] = "default";
  er_gguf_str pre_s;
  st = er__gguf_get_str(g, "tokenizer.ggml.pre", &pre_s);
  if (st == ER_STATUS_OK) {
    if (pre_s.len >= sizeof pre || memchr(pre_s.p, 0, pre_s.len))
      return er__error(ER_STATUS_UNSUPPORTED, "%s: tokenizer.ggml.pre '%.*s' is not implemented", what,
                       (int)(pre_s.len < 64 ? pre_s.len : 64), pre_s.p);
    memcpy(pre, pre_s.p, pre_s.len);
    pre[pre_s.len] = 0;
  } else if (st == ER_STATUS_NOT_FOUND) {
    er__error_clear();
  } else {
    return st;
  }
  if (!spm && !er__tok_pre_find(pre))
    return er__error(ER_STATUS_UNSUPPORTED, "%s: tokenizer.ggml.pre '%s' is not implemented", what, pre);
  cfg.pre = pre;

  const er_gguf_kv *tokens_kv, *scores_kv, *types_kv, *merges_kv;
  ER_CHECK(get_array(g, "tokenizer.ggml.tokens", ER_GGUF_STRING, true, SIZE_MAX, &tokens_kv));
  if (tokens_kv->n > ER_TOK_MAX_VOCAB)
    return er__error(ER_STATUS_LIMIT, "%s: tokenizer.ggml.tokens has %llu entries, over %d (ER_TOK_MAX_VOCAB)", what,
                     (unsigned long long)tokens_kv->n, ER_TOK_MAX_VOCAB);
  size_t n = (size_t)tokens_kv->n;
  ER_CHECK(get_array(g, "tokenizer.ggml.scores", ER_GGUF_FLOAT32, false, n, &scores_kv));
  ER_CHECK(get_array(g, "tokenizer.ggml.token_type", ER_GGUF_INT32, false, n, &types_kv));
  ER_CHECK(get_array(g, "tokenizer.ggml.merges", ER_GGUF_STRING, false, SIZE_MAX, &merges_kv));
  if (merges_kv && merges_kv->n > ER_TOK_MAX_MERGES)
    return er__error(ER_STATUS_LIMIT, "%s: tokenizer.ggml.merges has %llu entries, over %d (ER_TOK_MAX_MERGES)", what,
                     (unsigned long long)merges_kv->n, ER_TOK_MAX_MERGES);
  size_t n_merges = merges_kv ? (size_t)merges_kv->n : 0;

  er_tok_str *toks = er__calloc(n ? n : 1, sizeof *toks, "GGUF token views");
  float *scores = scores_kv ? er__calloc(n ? n : 1, sizeof *scores, "GGUF token scores") : NULL;
  int32_t *types = types_kv ? er__calloc(n ? n : 1, sizeof *types, "GGUF token types") : NULL;
  er_tok_str *merges = n_merges ? er__calloc(n_merges, sizeof *merges, "GGUF merge views") : NULL;
  if (!toks || (scores_kv && !scores) || (types_kv && !types) || (n_merges && !merges)) {
    st = ER_STATUS_OUT_OF_MEMORY;
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    toks[i].p = tokens_kv->strs[i].p;
    toks[i].len = (size_t)tokens_kv->strs[i].len;
  }
  for (size_t i = 0; scores && i < n; i++) scores[i] = (float)er__gguf_kv_f64(scores_kv, i);
  for (size_t i = 0; types && i < n; i++) {
    int64_t v = er__gguf_kv_i64(types_kv, i);
    /* Out-of-range types are passed on (clamped to int32) so that
     * er__tok_create names the token and its type. */
    types[i] = v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int32_t)v;
  }
  for (size_t i = 0; i < n_merges; i++) {
    merges[i].p = merges_kv->strs[i].p;
    merges[i].len = (size_t)merges_kv->strs[i].len;
  }
  cfg.n_tokens = n;
  cfg.tokens = toks;
  cfg.scores = scores;
  cfg.types = types;
  cfg.n_merges = n_merges;
  cfg.merges = merges;

  /* Defaults as llama.cpp has them: SentencePiece vocabularies number
   * <unk> <s> </s> first and add BOS and the prefix space; Llama 3's
   * byte-level vocabulary adds BOS too. */
  const er_tok_pre_def *pd = spm ? NULL : er__tok_pre_find(pre);
  bool llama3 = pd && strcmp(pd->name, "llama3") == 0;
  if ((st = get_id(g, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, &cfg.bos)) != ER_STATUS_OK) goto done;
  if ((st = get_id(g, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, &cfg.eos)) != ER_STATUS_OK) goto done;
  if ((st = get_id(g, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, &cfg.unk)) != ER_STATUS_OK) goto done;
  if ((st = get_id(g, "tokenizer.ggml.padding_token_id", -1, &cfg.pad)) != ER_STATUS_OK) goto done;
  if ((st = get_id(g, "tokenizer.ggml.eot_token_id", -2, &cfg.eot)) != ER_STATUS_OK) goto done;
  if (cfg.eot == -2) {
    /* No key: the end-of-turn marker of the chat formats edgerun knows. */
    static const char *const eot_texts[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>",
                                            "<|END_OF_TURN_TOKEN|>", "<|endoftext|>"};
    cfg.eot = find_any(toks, n, eot_texts, ER_ARRAY_LEN(eot_texts));
    if (cfg.eot >= 0 && types && types[cfg.eot] != ER_TOK_TYPE_CONTROL) cfg.eot = -1;
  }
  if ((st = get_flag(g, "tokenizer.ggml.add_bos_token", spm || llama3, &cfg.add_bos)) != ER_STATUS_OK) goto done;
  if ((st = get_flag(g, "tokenizer.ggml.add_eos_token", false, &cfg.add_eos)) != ER_STATUS_OK) goto done;
  if ((st = get_flag(g, "tokenizer.ggml.add_space_prefix", spm, &cfg.add_space_prefix)) != ER_STATUS_OK) goto done;
  /* A flag asking for a token the file does not have is dropped, as
   * llama.cpp does, rather than failing a model that is otherwise fine. */
  if (cfg.add_bos && cfg.bos < 0) cfg.add_bos = false;
  if (cfg.add_eos && cfg.eos < 0) cfg.add_eos = false;

  st = er__tok_create(&cfg, out);
  if (st != ER_STATUS_OK) er__error_prefix("%s", what);
done:
  free(toks);
  free(scores);
  free(types);
  free(merges);
  return st;
}
