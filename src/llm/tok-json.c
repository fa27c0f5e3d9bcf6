/* tok-json.c - a tokenizer from a Hugging Face tokenizer.json (and the
 * tokenizer_config.json beside it), the form ONNX decoders ship with.
 *
 * What is read: model (type "BPE": vocab, merges, byte_fallback,
 * ignore_merges, unk_token), added_tokens (special -> CONTROL, else
 * USER_DEFINED), the normalizer and pre_tokenizer (to tell byte-level BPE
 * from SentencePiece and to name the pre-tokenizer), the post_processor
 * (for BOS/EOS when no tokenizer_config.json says), and from
 * tokenizer_config.json bos_token, eos_token, add_bos_token and
 * add_eos_token. A construct edgerun does not implement is UNSUPPORTED
 * naming it, never silently approximated. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "llm/tokenizer.h"
#include "llm/unicode.h"

#define MAX_PATH_BYTES 4096

/* What the reader collects before er__tok_create. */
typedef struct jtok {
  const char *path;          /* for messages */
  json_t *root, *config;
  er_tok_str *tokens;        /* [n] views into root's strings */
  int32_t *types;            /* [n] */
  size_t n;
  er_tok_str *merges;        /* [n_merges] */
  char *merge_pool;
  size_t n_merges;
  char *patterns[ER_TOK_MAX_PRE_STAGES];  /* owned copies */
  size_t n_patterns;
  bool byte_level;           /* a ByteLevel pre-tokenizer or decoder */
  size_t bytelevel_at;       /* n_patterns when the ByteLevel pre-tokenizer came; SIZE_MAX = none */
  int spm_prefix;            /* -1 = no SentencePiece normalizer, 0 = Replace only, 1 = Prepend + Replace */
  bool nfc;                  /* an NFC normalizer (Qwen2) */
} jtok;

static void jtok_free(jtok *j) {
  json_decref(j->root);
  json_decref(j->config);
  free(j->tokens);
  free(j->types);
  free(j->merges);
  free(j->merge_pool);
  for (size_t i = 0; i < j->n_patterns; i++) free(j->patterns[i]);
}

static er_status load_json(const char *path, bool optional, json_t **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (optional) return ER_STATUS_NOT_FOUND;
    return er__error(ER_STATUS_IO, "%s: cannot be opened", path);
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return er__error(ER_STATUS_IO, "%s: not a regular file", path);
  }
  if ((uint64_t)sb.st_size > ER_TOK_MAX_JSON_BYTES) {
    fclose(f);
    return er__error(ER_STATUS_LIMIT, "%s: %lld bytes is over %u (ER_TOK_MAX_JSON_BYTES)", path,
                     (long long)sb.st_size, ER_TOK_MAX_JSON_BYTES);
  }
  json_error_t err;
  json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
  fclose(f);
  if (!root) return er__error(ER_STATUS_INVALID_MODEL, "%s: line %d: %s", path, err.line, err.text);
  if (!json_is_object(root)) {
    json_decref(root);
    return er__error(ER_STATUS_INVALID_MODEL, "%s: the top level is not an object", path);
  }
  *out = root;
  return ER_STATUS_OK;
}

static bool jbool(const json_t *obj, const char *key, bool dflt) {
  const json_t *v = json_object_get(obj, key);
  return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static const char *jstr(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A token given as "text" or {"content": "text"} (tokenizer_config.json). */
static const char *token_text(const json_t *v) {
  if (json_is_string(v)) return json_string_value(v);
  if (json_is_object(v)) return jstr(v, "content");
  return NULL;
}

static int32_t find_token(const jtok *j, const char *s) {
  if (!s) return -1;
  size_t len = strlen(s);
  for (size_t i = 0; i < j->n; i++)
    if (j->tokens[i].len == len && memcmp(j->tokens[i].p, s, len) == 0) return (int32_t)i;
  return -1;
}

static er_status unsupported(const jtok *j, const char *what, const char *name) {
  return er__error(ER_STATUS_UNSUPPORTED, "%s: %s '%.100s' is not implemented", j->path, what, name ? name : "?");
}

/* ---- vocabulary ---------------------------------------------------------- */

static er_status set_token(jtok *j, size_t id, const char *s, size_t len, int32_t type, bool added) {
  if (j->tokens[id].p) {
    if (!added)
      return er__error(ER_STATUS_INVALID_MODEL, "%s: tokens '%.60s' and '%.60s' share id %zu", j->path,
                       j->tokens[id].p, s, id);
    if (j->tokens[id].len != len || memcmp(j->tokens[id].p, s, len) != 0)
      return er__error(ER_STATUS_INVALID_MODEL, "%s: added token '%.60s' has id %zu, which the vocabulary gives '%.60s'",
                       j->path, s, id, j->tokens[id].p);
  }
  j->tokens[id].p = s;
  j->tokens[id].len = len;
  j->types[id] = type;
  return ER_STATUS_OK;
}

static er_status read_vocab(jtok *j, const json_t *model) {
  const json_t *vocab = json_object_get(model, "vocab");
  if (!json_is_object(vocab)) return er__error(ER_STATUS_INVALID_MODEL, "%s: model.vocab is missing or not an object", j->path);
  const json_t *added = json_object_get(j->root, "added_tokens");
  if (added && !json_is_array(added))
    return er__error(ER_STATUS_INVALID_MODEL, "%s: added_tokens is not an array", j->path);
  /* The vocabulary size is the largest id + 1; ids are checked against
   * the cap before the arrays are sized by them. */
  json_int_t max_id = -1;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)vocab, key, val) {
    if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= ER_TOK_MAX_VOCAB)
      return er__error(ER_STATUS_INVALID_MODEL, "%s: model.vocab['%.60s'] is not an id in 0..%d (ER_TOK_MAX_VOCAB)",
                       j->path, key, ER_TOK_MAX_VOCAB - 1);
    if (json_integer_value(val) > max_id) max_id = json_integer_value(val);
  }
  for (size_t i = 0; i < json_array_size(added); i++) {
    const json_t *a = json_array_get(added, i);
    const json_t *id = json_object_get(a, "id");
    if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= ER_TOK_MAX_VOCAB ||
        !json_is_string(json_object_get(a, "content")))
      return er__error(ER_STATUS_INVALID_MODEL, "%s: added_tokens[%zu] lacks a content or an id in 0..%d", j->path, i,
                       ER_TOK_MAX_VOCAB - 1);
    if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
  }
  if (max_id < 0) return er__error(ER_STATUS_INVALID_MODEL, "%s: the vocabulary is empty", j->path);
  j->n = (size_t)max_id + 1;
  j->tokens = er__calloc(j->n, sizeof *j->tokens, "tokenizer.json tokens");
  j->types = er__calloc(j->n, sizeof *j->types, "tokenizer.json token types");
  if (!j->tokens || !j->types) return ER_STATUS_OUT_OF_MEMORY;
  void *it = json_object_iter((json_t *)vocab);
  while (it) {
    size_t id = (size_t)json_integer_value(json_object_iter_value(it));
    ER_CHECK(set_token(j, id, json_object_iter_key(it), json_object_iter_key_len(it), ER_TOK_TYPE_NORMAL, false));
    it = json_object_iter_next((json_t *)vocab, it);
  }
  for (size_t i = 0; i < json_array_size(added); i++) {
    const json_t *a = json_array_get(added, i);
    const json_t *content = json_object_get(a, "content");
    /* lstrip, rstrip and single_word are not applied: GGUF files carry
     * none of them either, and the converters edgerun is checked against
     * set them false. */
    ER_CHECK(set_token(j, (size_t)json_integer_value(json_object_get(a, "id")), json_string_value(content),
                       json_string_length(content),
                       jbool(a, "special", false) ? ER_TOK_TYPE_CONTROL : ER_TOK_TYPE_USER_DEFINED, true));
  }
  for (size_t i = 0; i < j->n; i++)
    if (!j->tokens[i].p) return er__error(ER_STATUS_INVALID_MODEL, "%s: id %zu has no token", j->path, i);
  return ER_STATUS_OK;
}

static er_status read_merges(jtok *j, const json_t *model) {
  const json_t *merges = json_object_get(model, "merges");
  if (!merges) return ER_STATUS_OK;
  if (!json_is_array(merges)) return er__error(ER_STATUS_INVALID_MODEL, "%s: model.merges is not an array", j->path);
  size_t n = json_array_size(merges);
  if (n > ER_TOK_MAX_MERGES)
    return er__error(ER_STATUS_LIMIT, "%s: %zu merges is over %d (ER_TOK_MAX_MERGES)", j->path, n, ER_TOK_MAX_MERGES);
  /* Merges are "left right" strings, or (newer files) [left, right]
   * pairs, rewritten here as strings. */
  size_t pool = 0;
  for (size_t i = 0; i < n; i++) {
    const json_t *m = json_array_get(merges, i);
    if (json_is_string(m)) continue;
    if (!json_is_array(m) || json_array_size(m) != 2 || !json_is_string(json_array_get(m, 0)) ||
        !json_is_string(json_array_get(m, 1)))
      return er__error(ER_STATUS_INVALID_MODEL, "%s: model.merges[%zu] is not a string or a pair of strings", j->path, i);
    pool += json_string_length(json_array_get(m, 0)) + json_string_length(json_array_get(m, 1)) + 1;
  }
  j->merges = er__calloc(n ? n : 1, sizeof *j->merges, "tokenizer.json merges");
  j->merge_pool = er__malloc(pool ? pool : 1, "tokenizer.json merge texts");
  if (!j->merges || !j->merge_pool) return ER_STATUS_OUT_OF_MEMORY;
  char *w = j->merge_pool;
  for (size_t i = 0; i < n; i++) {
    const json_t *m = json_array_get(merges, i);
    if (json_is_string(m)) {
      j->merges[i].p = json_string_value(m);
      j->merges[i].len = json_string_length(m);
      continue;
    }
    const json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
    size_t la = json_string_length(a), lb = json_string_length(b);
    if (memchr(json_string_value(a), ' ', la) || memchr(json_string_value(b), ' ', lb))
      return er__error(ER_STATUS_UNSUPPORTED, "%s: model.merges[%zu] has a token with a space, which the "
                       "\"left right\" merge form cannot carry", j->path, i);
    j->merges[i].p = w;
    memcpy(w, json_string_value(a), la);
    w[la] = ' ';
    memcpy(w + la + 1, json_string_value(b), lb);
    j->merges[i].len = la + 1 + lb;
    w += la + 1 + lb;
  }
  j->n_merges = n;
  return ER_STATUS_OK;
}

/* ---- normalizer and pre-tokenizer ---------------------------------------- */

static bool is_str(const char *s, const char *want) { return s && strcmp(s, want) == 0; }

static er_status add_pattern(jtok *j, const char *pat, size_t len) {
  if (j->n_patterns == ER_TOK_MAX_PRE_STAGES)
    return er__error(ER_STATUS_LIMIT, "%s: more than %d pre-tokenizer splits (ER_TOK_MAX_PRE_STAGES)", j->path,
                     ER_TOK_MAX_PRE_STAGES);
  char *c = er__malloc(len + 1, "pre-tokenizer pattern");
  if (!c) return ER_STATUS_OUT_OF_MEMORY;
  memcpy(c, pat, len);
  c[len] = 0;
  j->patterns[j->n_patterns++] = c;
  return ER_STATUS_OK;
}

static er_status read_pre(jtok *j, const json_t *pt, unsigned depth) {
  if (!pt || json_is_null(pt)) return ER_STATUS_OK;
  if (depth > 4) return unsupported(j, "pre_tokenizer nesting", "Sequence");
  const char *type = jstr(pt, "type");
  if (is_str(type, "Sequence")) {
    const json_t *list = json_object_get(pt, "pretokenizers");
    for (size_t i = 0; i < json_array_size(list); i++) ER_CHECK(read_pre(j, json_array_get(list, i), depth + 1));
    return ER_STATUS_OK;
  }
  if (is_str(type, "ByteLevel")) {
    if (jbool(pt, "add_prefix_space", false)) return unsupported(j, "pre_tokenizer ByteLevel option", "add_prefix_space");
    if (j->bytelevel_at != SIZE_MAX) return unsupported(j, "pre_tokenizer", "a second ByteLevel");
    j->byte_level = true;
    /* Its own split runs on the text; what follows sees its output. */
    if (jbool(pt, "use_regex", true)) ER_CHECK(add_pattern(j, er__tok_pattern_gpt2, strlen(er__tok_pattern_gpt2)));
    j->bytelevel_at = j->n_patterns;
    return ER_STATUS_OK;
  }
  if (is_str(type, "Digits")) {
    const char *p = jbool(pt, "individual_digits", false) ? "\\p{N}" : "\\p{N}+";
    return add_pattern(j, p, strlen(p));
  }
  if (is_str(type, "Punctuation")) {
    const char *behavior = jstr(pt, "behavior");
    if (!is_str(behavior, "Contiguous")) return unsupported(j, "Punctuation behavior", behavior);
    return add_pattern(j, er__tok_pattern_punct, strlen(er__tok_pattern_punct));
  }
  if (is_str(type, "Split")) {
    const json_t *pat = json_object_get(pt, "pattern");
    const char *behavior = jstr(pt, "behavior");
    if (!is_str(behavior, "Isolated")) return unsupported(j, "Split behavior", behavior);
    if (jbool(pt, "invert", false)) return unsupported(j, "Split option", "invert");
    const json_t *re = json_object_get(pat, "Regex");
    if (json_is_string(re)) return add_pattern(j, json_string_value(re), json_string_length(re));
    const json_t *lit = json_object_get(pat, "String");
    if (!json_is_string(lit)) return er__error(ER_STATUS_INVALID_MODEL, "%s: a Split has no pattern", j->path);
    /* A literal: every character escaped that the pattern syntax gives a
     * meaning to. */
    const char *s = json_string_value(lit);
    size_t n = json_string_length(lit);
    char *buf = er__malloc(2 * n + 1, "pre-tokenizer pattern");
    if (!buf) return ER_STATUS_OUT_OF_MEMORY;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
      if (strchr("\\^$.|?*+()[]{}", s[i]) && s[i]) buf[m++] = '\\';
      buf[m++] = s[i];
    }
    er_status st = add_pattern(j, buf, m);
    free(buf);
    return st;
  }
  if (is_str(type, "Metaspace")) {
    const char *rep = jstr(pt, "replacement");
    const char *scheme = jstr(pt, "prepend_scheme");
    if (!is_str(rep, "\xE2\x96\x81")) return unsupported(j, "Metaspace replacement", rep);
    if (jbool(pt, "split", false)) return unsupported(j, "Metaspace option", "split");
    /* Metaspace "first"/"always" prepend only where the text does not
     * already start with U+2581 (so " a" gets one, not two): not what
     * sentencepiece and Llama 2's normalizer do, and not implemented. */
    if (!is_str(scheme, "never")) return unsupported(j, "Metaspace prepend_scheme", scheme ? scheme : "always");
    if (j->spm_prefix < 0) j->spm_prefix = 0;
    return ER_STATUS_OK;
  }
  return unsupported(j, "pre_tokenizer", type);
}

static bool is_replace_space(const json_t *n) {
  return is_str(jstr(n, "type"), "Replace") && is_str(jstr(json_object_get(n, "pattern"), "String"), " ") &&
         is_str(jstr(n, "content"), "\xE2\x96\x81");
}

static er_status read_normalizer(jtok *j, const json_t *nm) {
  if (!nm || json_is_null(nm)) return ER_STATUS_OK;
  const char *type = jstr(nm, "type");
  /* Llama 2: Sequence[Prepend("▁"), Replace(" ", "▁")]. */
  if (is_str(type, "Sequence")) {
    const json_t *list = json_object_get(nm, "normalizers");
    size_t n = json_array_size(list);
    if (n == 2 && is_str(jstr(json_array_get(list, 0), "type"), "Prepend") &&
        is_str(jstr(json_array_get(list, 0), "prepend"), "\xE2\x96\x81") && is_replace_space(json_array_get(list, 1))) {
      j->spm_prefix = 1;
      return ER_STATUS_OK;
    }
    if (n == 1) return read_normalizer(j, json_array_get(list, 0));
    return unsupported(j, "normalizer", "Sequence");
  }
  if (is_replace_space(nm)) {
    j->spm_prefix = 0;
    return ER_STATUS_OK;
  }
  if (is_str(type, "NFC")) {
    j->nfc = true;
    return ER_STATUS_OK;
  }
  return unsupported(j, "normalizer", type);
}

/* ---- the reader ---------------------------------------------------------- */

er_status er__tok_create_hf_json(const char *path, er_tokenizer **out) {
  if (!out) return er__error(ER_STATUS_INVALID_ARGUMENT, "er__tok_create_hf_json: out is NULL");
  *out = NULL;
  if (!path) return er__error(ER_STATUS_INVALID_ARGUMENT, "er__tok_create_hf_json: path is NULL");
  jtok j;
  memset(&j, 0, sizeof j);
  j.path = path;
  j.spm_prefix = -1;
  j.bytelevel_at = SIZE_MAX;
  er_status st = load_json(path, false, &j.root);
  if (st != ER_STATUS_OK) return st;

  /* tokenizer_config.json in the same folder, when there is one. */
  if (strlen(path) < MAX_PATH_BYTES - 32) {
    char cfg_path[MAX_PATH_BYTES];
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    memcpy(cfg_path, path, dir);
    strcpy(cfg_path + dir, "tokenizer_config.json");
    st = load_json(cfg_path, true, &j.config);
    if (st == ER_STATUS_NOT_FOUND) st = ER_STATUS_OK;
    if (st != ER_STATUS_OK) goto done;
  }

  const json_t *model = json_object_get(j.root, "model");
  if (!json_is_object(model)) {
    st = er__error(ER_STATUS_INVALID_MODEL, "%s: 'model' is missing or not an object", path);
    goto done;
  }
  const char *mtype = jstr(model, "type");
  if (mtype && !is_str(mtype, "BPE")) {
    st = unsupported(&j, "model type", mtype);
    goto done;
  }
  if (json_is_number(json_object_get(model, "dropout"))) {
    st = unsupported(&j, "BPE option", "dropout");
    goto done;
  }
  const char *csp = jstr(model, "continuing_subword_prefix"), *eow = jstr(model, "end_of_word_suffix");
  if ((csp && *csp) || (eow && *eow)) {
    st = unsupported(&j, "BPE option", csp && *csp ? "continuing_subword_prefix" : "end_of_word_suffix");
    goto done;
  }
  if ((st = read_vocab(&j, model)) != ER_STATUS_OK) goto done;
  if ((st = read_merges(&j, model)) != ER_STATUS_OK) goto done;
  if ((st = read_normalizer(&j, json_object_get(j.root, "normalizer"))) != ER_STATUS_OK) goto done;
  if ((st = read_pre(&j, json_object_get(j.root, "pre_tokenizer"), 0)) != ER_STATUS_OK) goto done;
  const json_t *decoder = json_object_get(j.root, "decoder");
  if (is_str(jstr(decoder, "type"), "ByteLevel")) j.byte_level = true;

  er_tok_config cfg;
  memset(&cfg, 0, sizeof cfg);
  bool ignore_merges = jbool(model, "ignore_merges", false);
  if (j.byte_level) {
    if (j.spm_prefix >= 0) {
      st = unsupported(&j, "normalizer with a ByteLevel pre-tokenizer", "Replace");
      goto done;
    }
    cfg.kind = ER_TOK_BPE;
    size_t mapped = j.bytelevel_at == SIZE_MAX ? 0 : j.n_patterns - j.bytelevel_at;
    cfg.pre = er__tok_pre_name_for((const char *const *)j.patterns, j.n_patterns, mapped, ignore_merges);
    if (!cfg.pre) {
      st = er__error(ER_STATUS_UNSUPPORTED, "%s: the pre-tokenizer (%zu splits, the first '%.120s'%s) is none of "
                     "edgerun's named pre-tokenizers", path, j.n_patterns, j.n_patterns ? j.patterns[0] : "",
                     ignore_merges ? ", ignore_merges" : "");
      goto done;
    }
  } else if (j.spm_prefix >= 0 || jbool(model, "byte_fallback", false)) {
    if (j.n_patterns) {
      st = unsupported(&j, "pre-tokenizer split of a SentencePiece model", j.patterns[0]);
      goto done;
    }
    if (ignore_merges) {
      st = unsupported(&j, "BPE option", "ignore_merges");
      goto done;
    }
    cfg.kind = ER_TOK_SPM;
    cfg.add_space_prefix = j.spm_prefix == 1;
  } else {
    st = er__error(ER_STATUS_UNSUPPORTED, "%s: a BPE model with neither a ByteLevel pre-tokenizer nor a "
                   "SentencePiece normalizer", path);
    goto done;
  }
  cfg.nfc = j.nfc;
  cfg.n_tokens = j.n;
  cfg.tokens = j.tokens;
  cfg.types = j.types;
  cfg.n_merges = j.n_merges;
  cfg.merges = j.merges;
  cfg.unk = find_token(&j, jstr(model, "unk_token"));
  cfg.pad = -1;

  /* BOS/EOS: tokenizer_config.json, else the post-processor's template
   * (Llama 3's TemplateProcessing puts <|begin_of_text|> first). */
  cfg.bos = cfg.eos = -1;
  if (j.config) {
    cfg.bos = find_token(&j, token_text(json_object_get(j.config, "bos_token")));
    cfg.eos = find_token(&j, token_text(json_object_get(j.config, "eos_token")));
    cfg.pad = find_token(&j, token_text(json_object_get(j.config, "pad_token")));
    cfg.add_bos = jbool(j.config, "add_bos_token", false);
    cfg.add_eos = jbool(j.config, "add_eos_token", false);
  }
  const json_t *pp = json_object_get(j.root, "post_processor");
  if (is_str(jstr(pp, "type"), "TemplateProcessing") && !(j.config && json_object_get(j.config, "add_bos_token"))) {
    const json_t *single = json_object_get(pp, "single");
    size_t n = json_array_size(single);
    const json_t *first = json_object_get(json_array_get(single, 0), "SpecialToken");
    const json_t *last = n ? json_object_get(json_array_get(single, n - 1), "SpecialToken") : NULL;
    int32_t b = first ? find_token(&j, jstr(first, "id")) : -1;
    int32_t e = last && n > 1 ? find_token(&j, jstr(last, "id")) : -1;
    if (b >= 0) cfg.add_bos = true, cfg.bos = b;
    if (e >= 0) cfg.add_eos = true, cfg.eos = e;
  }
  if (cfg.add_bos && cfg.bos < 0) cfg.add_bos = false;
  if (cfg.add_eos && cfg.eos < 0) cfg.add_eos = false;
  static const char *const eot_texts[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>",
                                          "<|END_OF_TURN_TOKEN|>", "<|endoftext|>"};
  cfg.eot = -1;
  for (size_t k = 0; k < ER_ARRAY_LEN(eot_texts) && cfg.eot < 0; k++) {
    int32_t id = find_token(&j, eot_texts[k]);
    if (id >= 0 && j.types[id] == ER_TOK_TYPE_CONTROL) cfg.eot = id;
  }
  st = er__tok_create(&cfg, out);
  if (st != ER_STATUS_OK) er__error_prefix("%s", path);
done:
  jtok_free(&j);
  return st;
}
