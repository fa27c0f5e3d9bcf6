/* tokenizer.c - byte-level BPE and SentencePiece tokenizers, equal to
 * Hugging Face `tokenizers` (tokenizer.h has the contract).
 *
 * One merge engine serves both kinds. A word is a row of symbols, each a
 * token id; a hash map from (left id, right id) to (rank, merged id) says
 * which neighbours merge and in what order; a binary heap keyed by (rank,
 * position) picks the next merge, and a stale entry (one of its symbols
 * merged away since it was pushed) is recognised by its ids and skipped.
 * Each merge is O(log n), a word of n symbols O(n log n): no rescans.
 *
 *  - Byte-level BPE: the text is cut by the pre-tokenizer's patterns
 *    (tok-regex.c); a piece's symbols are its bytes (each byte's token is
 *    the vocabulary entry of its GPT-2 printable stand-in); the ranks are
 *    the merge list's order.
 *  - SentencePiece BPE: spaces become U+2581 and one is put in front; the
 *    symbols are the text's code points, or <0xNN> byte tokens for one the
 *    vocabulary lacks; a GGUF "llama" vocabulary has scores and no merges,
 *    so the merges are derived from the scores exactly as transformers
 *    derives them (generate_merges), which is what Hugging Face runs.
 *
 * Sections: the tables (hashes, trie); building; encoding. Decoding is in
 * tok-decode.c, the struct in tok-impl.h. */
#include <math.h>
#include <stdlib.h>

#include "llm/tok-impl.h"
#include "llm/unicode.h"

/* ======================================================================== */
/* The tokenizer                                                             */
/* ======================================================================== */

/* GPT-2's bytes_to_unicode: the printable bytes stand for themselves, the
 * other 68 for U+0100 onwards in byte order. */
static uint32_t byte_to_cp(uint8_t b) {
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
  uint32_t k = 0;
  for (uint32_t x = 0; x < b; x++)
    if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) k++;
  return 0x100 + k;
}

/* The inverse, -1 for a code point that stands for no byte. */
static int cp_to_byte(uint32_t cp) {
  if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
  if (cp < 0x100 || cp >= 0x100 + 68) return -1;
  uint32_t k = cp - 0x100;
  for (uint32_t x = 0; x < 256; x++) {
    if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) {
      if (k == 0) return (int)x;
      k--;
    }
  }
  return -1;
}

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;  /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

static uint64_t hash_pair(uint64_t key) {
  key *= 0x9E3779B97F4A7C15ull;
  return key ^ (key >> 31);
}

static int32_t find_text(const er_tokenizer *t, const char *s, size_t len) {
  size_t i = (size_t)hash_bytes(s, len) & t->tab_mask;
  for (;;) {
    int32_t v = t->tab[i];
    if (v == 0) return -1;
    const er_tok_str *e = &t->text[v - 1];
    if (e->len == len && memcmp(e->p, s, len) == 0) return v - 1;
    i = (i + 1) & t->tab_mask;
  }
}

static const merge_slot *find_merge(const er_tokenizer *t, int32_t left, int32_t right) {
  if (!t->mtab) return NULL;
  uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
  size_t i = (size_t)hash_pair(key) & t->mtab_mask;
  for (;;) {
    const merge_slot *m = &t->mtab[i];
    if (m->key == UINT64_MAX) return NULL;
    if (m->key == key) return m;
    i = (i + 1) & t->mtab_mask;
  }
}

/* ---- public accessors --------------------------------------------------- */

size_t er__tok_vocab_size(const er_tokenizer *t) { return t ? t->n : 0; }
int32_t er__tok_bos(const er_tokenizer *t) { return t ? t->bos : -1; }
int32_t er__tok_eos(const er_tokenizer *t) { return t ? t->eos : -1; }
int32_t er__tok_eot(const er_tokenizer *t) { return t ? t->eot : -1; }

bool er__tok_is_eog(const er_tokenizer *t, int32_t id) {
  return t && id >= 0 && (size_t)id < t->n && (t->flags[id] & TF_EOG);
}

bool er__tok_is_control(const er_tokenizer *t, int32_t id) {
  return t && id >= 0 && (size_t)id < t->n && t->type[id] == ER_TOK_TYPE_CONTROL;
}

const char *er__tok_text(const er_tokenizer *t, int32_t id, size_t *len_out) {
  if (!t || id < 0 || (size_t)id >= t->n) {
    if (len_out) *len_out = 0;
    return NULL;
  }
  if (len_out) *len_out = t->text[id].len;
  return t->text[id].p;
}

int32_t er__tok_find(const er_tokenizer *t, const char *s, size_t len) {
  if (!t || (!s && len)) return -1;
  return find_text(t, s ? s : "", len);
}

/* ======================================================================== */
/* Building                                                                  */
/* ======================================================================== */

static const char *kind_name(er_tok_kind k) {
  switch (k) {
    case ER_TOK_BPE: return "byte-level BPE";
    case ER_TOK_SPM: return "SentencePiece BPE";
    case ER_TOK_UNIGRAM: return "SentencePiece unigram";
  }
  return "?";
}

void er__tok_free(er_tokenizer *t) {
  if (!t) return;
  free(t->text);
  free(t->piece);
  free(t->type);
  free(t->flags);
  free(t->pool);
  free(t->tab);
  free(t->mtab);
  for (size_t i = 0; i < t->n_pre; i++) er__regex_free(t->pre[i]);
  free(t->trie);
  free(t);
}

static size_t pow2_at_least(size_t n) {
  size_t p = 16;
  while (p < n) p <<= 1;
  return p;
}

static er_status check_special_id(const char *what, int32_t id, size_t n) {
  if (id < -1 || (id >= 0 && (size_t)id >= n))
    return er__error(ER_STATUS_INVALID_MODEL, "tokenizer: %s id %d is outside the vocabulary of %zu tokens", what, id,
                     n);
  return ER_STATUS_OK;
}

/* The message form of a token's text: quoted, cut at 60 bytes. */
#define TOKQ(s) (int)((s).len < 60 ? (s).len : 60), (s).p

static er_status merge_insert(er_tokenizer *t, int32_t left, int32_t right, int32_t rank, int32_t merged,
                              bool *dup) {
  uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
  size_t i = (size_t)hash_pair(key) & t->mtab_mask;
  for (;;) {
    merge_slot *m = &t->mtab[i];
    if (m->key == UINT64_MAX) {
      m->key = key;
      m->rank = rank;
      m->merged = merged;
      *dup = false;
      return ER_STATUS_OK;
    }
    if (m->key == key) {
      *dup = true;
      return ER_STATUS_OK;
    }
    i = (i + 1) & t->mtab_mask;
  }
}

static er_status alloc_merges(er_tokenizer *t, size_t n) {
  t->mtab_mask = pow2_at_least(n * 2 + 1) - 1;
  t->mtab = er__malloc((t->mtab_mask + 1) * sizeof *t->mtab, "tokenizer merge table");
  if (!t->mtab) return ER_STATUS_OUT_OF_MEMORY;
  for (size_t i = 0; i <= t->mtab_mask; i++) t->mtab[i].key = UINT64_MAX;
  return ER_STATUS_OK;
}

/* The merge list of a BPE vocabulary: "left right", rank = position. */
static er_status build_merges_from_list(er_tokenizer *t, const er_tok_config *cfg) {
  ER_CHECK(alloc_merges(t, cfg->n_merges));
  char *buf = er__malloc(2 * ER_TOK_MAX_TOKEN_BYTES + 2, "tokenizer merge text");
  if (!buf) return ER_STATUS_OUT_OF_MEMORY;
  er_status st = ER_STATUS_OK;
  for (size_t r = 0; r < cfg->n_merges; r++) {
    er_tok_str m = cfg->merges[r];
    if (!m.p && m.len) {
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "tokenizer: merge %zu has a NULL text", r);
      break;
    }
    const char *sp = m.len ? memchr(m.p, ' ', m.len) : NULL;
    if (!sp || sp == m.p || sp + 1 == m.p + m.len || memchr(sp + 1, ' ', (size_t)(m.p + m.len - sp - 1))) {
      st = er__error(ER_STATUS_INVALID_MODEL, "tokenizer: merge %zu '%.*s' is not two tokens separated by one space",
                     r, TOKQ(m));
      break;
    }
    size_t ll = (size_t)(sp - m.p), rl = m.len - ll - 1;
    int32_t a = find_text(t, m.p, ll), b = find_text(t, sp + 1, rl);
    if (a < 0 || b < 0) {
      st = er__error(ER_STATUS_INVALID_MODEL, "tokenizer: merge %zu '%.*s' names '%.*s', which is not in the vocabulary",
                     r, TOKQ(m), a < 0 ? (int)(ll < 60 ? ll : 60) : (int)(rl < 60 ? rl : 60), a < 0 ? m.p : sp + 1);
      break;
    }
    if (ll + rl > 2 * ER_TOK_MAX_TOKEN_BYTES) {
      st = er__error(ER_STATUS_LIMIT, "tokenizer: merge %zu is longer than two tokens of %d bytes", r,
                     ER_TOK_MAX_TOKEN_BYTES);
      break;
    }
    memcpy(buf, m.p, ll);
    memcpy(buf + ll, sp + 1, rl);
    int32_t merged = find_text(t, buf, ll + rl);
    if (merged < 0) {
      st = er__error(ER_STATUS_INVALID_MODEL,
                     "tokenizer: merge %zu '%.*s' makes '%.*s', which is not in the vocabulary", r, TOKQ(m),
                     (int)(ll + rl < 60 ? ll + rl : 60), buf);
      break;
    }
    bool dup;
    st = merge_insert(t, a, b, (int32_t)r, merged, &dup);
    if (st != ER_STATUS_OK) break;
    if (dup) {
      st = er__error(ER_STATUS_INVALID_MODEL, "tokenizer: merge %zu '%.*s' repeats an earlier merge", r, TOKQ(m));
      break;
    }
  }
  free(buf);
  t->n_merges = cfg->n_merges;
  return st;
}

/* A merge derived from SentencePiece scores, with its sort keys. */
typedef struct gen_merge {
  float score;           /* of the merged token */
  uint32_t len_l, len_r; /* code points */
  int32_t merged, l, r;
} gen_merge;

static int cmp_gen_merge(const void *pa, const void *pb) {
  const gen_merge *a = pa, *b = pb;
  /* transformers' generate_merges: sorted by (score, len(left),
   * len(right)) descending, ties in vocabulary order and within one
   * token by (left id, right id). */
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  if (a->len_l != b->len_l) return a->len_l > b->len_l ? -1 : 1;
  if (a->len_r != b->len_r) return a->len_r > b->len_r ? -1 : 1;
  if (a->merged != b->merged) return a->merged < b->merged ? -1 : 1;
  if (a->l != b->l) return a->l < b->l ? -1 : 1;
  return a->r < b->r ? -1 : a->r > b->r;
}

static er_status build_merges_from_scores(er_tokenizer *t, const float *scores) {
  /* Pass 1 counts, pass 2 fills: every split of every token at a code
   * point boundary whose halves are both tokens. */
  size_t count = 0;
  /* Each split hashes both halves: a token of L bytes costs about L^2.
   * Real vocabularies are short tokens (Llama 2: 32,000 of at most 16
   * code points); a vocabulary of many maximal tokens would take minutes,
   * so the work is capped. */
  uint64_t work_bytes = 0;
  for (size_t id = 0; id < t->n; id++) work_bytes += (uint64_t)t->text[id].len * t->text[id].len;
  if (work_bytes > ((uint64_t)1 << 32))
    return er__error(ER_STATUS_LIMIT, "tokenizer: deriving merges from %zu scored tokens would hash %llu bytes, over "
                     "2^32; the vocabulary's tokens are unusually long", t->n, (unsigned long long)work_bytes);
  for (int pass = 0; pass < 2; pass++) {
    gen_merge *list = NULL;
    if (pass == 1) {
      if (count > ER_TOK_MAX_MERGES)
        return er__error(ER_STATUS_LIMIT, "tokenizer: the scores imply %zu merges, over %d (ER_TOK_MAX_MERGES)", count,
                         ER_TOK_MAX_MERGES);
      list = er__malloc((count ? count : 1) * sizeof *list, "tokenizer derived merges");
      if (!list) return ER_STATUS_OUT_OF_MEMORY;
    }
    size_t k = 0;
    for (size_t id = 0; id < t->n; id++) {
      const er_tok_str s = t->text[id];
      uint32_t cps_total = 0;
      for (size_t i = 0; i < s.len; i++) cps_total += ((uint8_t)s.p[i] & 0xC0) != 0x80;
      uint32_t left_cps = 0;
      for (size_t i = 0; i < s.len;) {
        uint32_t cp;
        size_t l = er__utf8_decode((const uint8_t *)s.p + i, s.len - i, &cp);
        i += l;
        left_cps++;
        if (i >= s.len) break;
        int32_t a = find_text(t, s.p, i), b = find_text(t, s.p + i, s.len - i);
        if (a < 0 || b < 0) continue;
        if (list) {
          list[k].score = scores[id];
          list[k].len_l = left_cps;
          list[k].len_r = cps_total - left_cps;
          list[k].merged = (int32_t)id;
          list[k].l = a;
          list[k].r = b;
        }
        k++;
      }
    }
    if (pass == 0) {
      count = k;
      continue;
    }
    qsort(list, count, sizeof *list, cmp_gen_merge);
    er_status st = alloc_merges(t, count);
    for (size_t r = 0; st == ER_STATUS_OK && r < count; r++) {
      bool dup;
      st = merge_insert(t, list[r].l, list[r].r, (int32_t)r, list[r].merged, &dup);
      /* Two tokens cannot split into the same pair: the pair's text is the
       * token's text, and texts are unique. */
      ER_ASSERT(!dup);
    }
    free(list);
    t->n_merges = count;
    return st;
  }
  return ER_STATUS_OK;
}

static er_status trie_add(er_tokenizer *t, int32_t id, size_t *cap) {
  const er_tok_str s = t->text[id];
  /* `parent` is the node whose children hold byte i (-1: the root, whose
   * children are trie_root[]); indices, not pointers, because adding a
   * node may move the array. */
  int32_t parent = -1;
  for (size_t i = 0;; i++) {
    uint8_t b = (uint8_t)s.p[i];
    int32_t node = parent < 0 ? t->trie_root[b] : t->trie[parent].child;
    while (node >= 0 && t->trie[node].byte != b) node = t->trie[node].sibling;
    if (node < 0) {
      if (t->n_trie == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        trie_node *nt = realloc(t->trie, nc * sizeof *nt);
        if (!nt) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory building the special-token trie");
        t->trie = nt;
        *cap = nc;
      }
      node = (int32_t)t->n_trie++;
      t->trie[node].child = -1;
      t->trie[node].token = -1;
      t->trie[node].byte = b;
      if (parent < 0) {
        t->trie[node].sibling = -1;
        t->trie_root[b] = node;
      } else {
        t->trie[node].sibling = t->trie[parent].child;
        t->trie[parent].child = node;
      }
    }
    if (i + 1 == s.len) {
      if (t->trie[node].token < 0) t->trie[node].token = id;
      return ER_STATUS_OK;
    }
    parent = node;
  }
}

/* Texts of control tokens that end a turn or a document in the chat
 * formats edgerun knows (llama.cpp's list). */
static bool is_eog_text(er_tok_str s) {
  static const char *const names[] = {
      "<|endoftext|>", "<|im_end|>",   "<|eot_id|>", "<|eom_id|>",  "<|end|>",         "<end_of_turn>",
      "<|return|>",    "<|call|>",     "<EOT>",      "_<EOT>",      "<|end_of_text|>", "<end_of_utterance>",
      "<|END_OF_TURN_TOKEN|>",
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(names); i++)
    if (strlen(names[i]) == s.len && memcmp(names[i], s.p, s.len) == 0) return true;
  return false;
}

bool er__tok_is_byte_text(er_tok_str s, uint8_t *byte) {
  if (s.len != 6 || memcmp(s.p, "<0x", 3) != 0 || s.p[5] != '>') return false;
  unsigned v = 0;
  for (int k = 3; k < 5; k++) {
    char c = s.p[k];
    unsigned d;
    if (c >= '0' && c <= '9')
      d = (unsigned)(c - '0');
    else if (c >= 'A' && c <= 'F')
      d = (unsigned)(c - 'A' + 10);
    else if (c >= 'a' && c <= 'f')
      d = (unsigned)(c - 'a' + 10);
    else
      return false;
    v = v * 16 + d;
  }
  *byte = (uint8_t)v;
  return true;
}

/* The bytes a token stands for, written at *dst; returns the length.
 * Byte-level: Hugging Face's ByteLevel decoder, which maps a token whose
 * every code point is a byte's stand-in to those bytes and leaves any
 * other token as its UTF-8 (added tokens such as "<|im_start|>" are
 * printable ASCII, which stands for itself). SentencePiece: U+2581 is a
 * space, a BYTE token <0xNN> is the byte. */
static size_t make_piece(const er_tokenizer *t, const er_tok_str s, uint8_t type, char *dst) {
  if (t->kind == ER_TOK_BPE) {
    size_t n = 0;
    for (size_t i = 0; i < s.len;) {
      uint32_t cp;
      size_t l = er__utf8_decode((const uint8_t *)s.p + i, s.len - i, &cp);
      int b = cp_to_byte(cp);
      if (b < 0) {
        memcpy(dst, s.p, s.len);
        return s.len;
      }
      dst[n++] = (char)b;
      i += l;
    }
    return n;
  }
  /* A <0xNN> token is its byte whatever its type says: tokenizer.json
   * vocabularies have no types, and Hugging Face's ByteFallback decoder
   * goes by the text too. */
  uint8_t byte;
  if (type != ER_TOK_TYPE_CONTROL && type != ER_TOK_TYPE_USER_DEFINED && er__tok_is_byte_text(s, &byte)) {
    dst[0] = (char)byte;
    return 1;
  }
  if (type == ER_TOK_TYPE_CONTROL || type == ER_TOK_TYPE_USER_DEFINED) {
    memcpy(dst, s.p, s.len);
    return s.len;
  }
  size_t n = 0;
  for (size_t i = 0; i < s.len;) {
    if (i + 3 <= s.len && memcmp(s.p + i, "\xE2\x96\x81", 3) == 0) {
      dst[n++] = ' ';
      i += 3;
    } else {
      dst[n++] = s.p[i++];
    }
  }
  return n;
}

/* Every token of cfg: length cap, UTF-8, type, score; *pool_out: the
 * bytes of the text pool they need. The caps bound the pool before
 * anything is allocated by it. */
static er_status check_tokens(const er_tok_config *cfg, uint64_t *pool_out) {
  uint64_t pool_bytes = 0;
  for (size_t i = 0; i < cfg->n_tokens; i++) {
    er_tok_str s = cfg->tokens[i];
    if (!s.p && s.len) return er__error(ER_STATUS_INVALID_ARGUMENT, "tokenizer: token %zu has a NULL text", i);
    if (s.len > ER_TOK_MAX_TOKEN_BYTES)
      return er__error(ER_STATUS_LIMIT, "tokenizer: token %zu is %zu bytes, over %d (ER_TOK_MAX_TOKEN_BYTES)", i,
                       s.len, ER_TOK_MAX_TOKEN_BYTES);
    size_t bad = er__utf8_check(s.p, s.len);
    if (bad != s.len)
      return er__error(ER_STATUS_INVALID_MODEL, "tokenizer: token %zu is not valid UTF-8 (byte %zu of %zu)", i, bad,
                       s.len);
    if (cfg->types && (cfg->types[i] < ER_TOK_TYPE_UNDEFINED || cfg->types[i] > ER_TOK_TYPE_BYTE))
      return er__error(ER_STATUS_INVALID_MODEL, "tokenizer: token %zu '%.*s' has type %d, not 0..6", i, TOKQ(s),
                       (int)cfg->types[i]);
    if (cfg->scores && !isfinite(cfg->scores[i]))
      return er__error(ER_STATUS_INVALID_MODEL, "tokenizer: token %zu '%.*s' has a score that is not finite", i,
                       TOKQ(s));
    pool_bytes += 2 * (uint64_t)s.len + 1;
  }

  *pool_out = pool_bytes;
  return ER_STATUS_OK;
}

/* Texts into the pool and the text -> id table (a repeated text is an
 * error because a text must name one token), then each token's piece. */
static er_status fill_texts(er_tokenizer *t, const er_tok_config *cfg) {
  char *w = t->pool;
  for (size_t i = 0; i < t->n; i++) {
    er_tok_str s = cfg->tokens[i];
    if (s.len) memcpy(w, s.p, s.len);
    w[s.len] = 0;
    t->text[i].p = w;
    t->text[i].len = s.len;
    w += s.len + 1;
    t->type[i] = (uint8_t)(cfg->types ? cfg->types[i] : ER_TOK_TYPE_NORMAL);
    if (s.len == 0) continue;  /* an empty token can never be produced or looked up */
    size_t h = (size_t)hash_bytes(t->text[i].p, s.len) & t->tab_mask;
    for (;;) {
      int32_t v = t->tab[h];
      if (v == 0) {
        t->tab[h] = (int32_t)i + 1;
        break;
      }
      const er_tok_str *e = &t->text[v - 1];
      if (e->len == s.len && memcmp(e->p, t->text[i].p, s.len) == 0) {
        return er__error(ER_STATUS_INVALID_MODEL, "tokenizer: token %zu '%.*s' repeats the text of token %d", i,
                         TOKQ(s), v - 1);
      }
      h = (h + 1) & t->tab_mask;
    }
  }
  for (size_t i = 0; i < t->n; i++) {
    size_t len = make_piece(t, t->text[i], t->type[i], w);
    t->piece[i].p = w;
    t->piece[i].len = len;
    w += len;
  }

  return ER_STATUS_OK;
}

er_status er__tok_create(const er_tok_config *cfg, er_tokenizer **out) {
  if (!out) return er__error(ER_STATUS_INVALID_ARGUMENT, "er__tok_create: out is NULL");
  *out = NULL;
  if (!cfg) return er__error(ER_STATUS_INVALID_ARGUMENT, "er__tok_create: cfg is NULL");
  if (cfg->kind != ER_TOK_BPE && cfg->kind != ER_TOK_SPM && cfg->kind != ER_TOK_UNIGRAM)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "tokenizer: kind %d is not a tokenizer kind", (int)cfg->kind);
  if (cfg->kind == ER_TOK_UNIGRAM)
    return er__error(ER_STATUS_UNSUPPORTED, "tokenizer: %s (\"t5\") is not implemented", kind_name(cfg->kind));
  if (cfg->n_tokens == 0) return er__error(ER_STATUS_INVALID_MODEL, "tokenizer: the vocabulary is empty");
  if (cfg->n_tokens > ER_TOK_MAX_VOCAB)
    return er__error(ER_STATUS_LIMIT, "tokenizer: %zu tokens is over %d (ER_TOK_MAX_VOCAB)", cfg->n_tokens,
                     ER_TOK_MAX_VOCAB);
  if (cfg->n_merges > ER_TOK_MAX_MERGES)
    return er__error(ER_STATUS_LIMIT, "tokenizer: %zu merges is over %d (ER_TOK_MAX_MERGES)", cfg->n_merges,
                     ER_TOK_MAX_MERGES);
  if (!cfg->tokens) return er__error(ER_STATUS_INVALID_ARGUMENT, "tokenizer: tokens is NULL for %zu tokens", cfg->n_tokens);
  if (cfg->n_merges && !cfg->merges)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "tokenizer: merges is NULL for %zu merges", cfg->n_merges);
  if (cfg->kind == ER_TOK_SPM && !cfg->scores && cfg->n_merges == 0)
    return er__error(ER_STATUS_INVALID_MODEL, "tokenizer: a SentencePiece vocabulary needs scores or merges");
  const er_tok_pre_def *pre = NULL;
  if (cfg->kind == ER_TOK_BPE) {
    pre = er__tok_pre_find(cfg->pre);
    if (!pre)
      return er__error(ER_STATUS_UNSUPPORTED, "tokenizer: pre-tokenizer '%.100s' is not implemented", cfg->pre);
  }
  const int32_t ids[5] = {cfg->bos, cfg->eos, cfg->unk, cfg->pad, cfg->eot};
  static const char *const id_names[5] = {"bos", "eos", "unk", "pad", "eot"};
  for (int i = 0; i < 5; i++) ER_CHECK(check_special_id(id_names[i], ids[i], cfg->n_tokens));
  if (cfg->add_bos && cfg->bos < 0)
    return er__error(ER_STATUS_INVALID_MODEL, "tokenizer: add_bos is set but the vocabulary has no BOS token");
  if (cfg->add_eos && cfg->eos < 0)
    return er__error(ER_STATUS_INVALID_MODEL, "tokenizer: add_eos is set but the vocabulary has no EOS token");

  uint64_t pool_bytes = 0;
  ER_CHECK(check_tokens(cfg, &pool_bytes));

  er_status st = ER_STATUS_OK;
  er_tokenizer *t = er__calloc(1, sizeof *t, "tokenizer");
  if (!t) return ER_STATUS_OUT_OF_MEMORY;
  t->kind = cfg->kind;
  t->n = cfg->n_tokens;
  t->bos = cfg->bos, t->eos = cfg->eos, t->unk = cfg->unk, t->pad = cfg->pad, t->eot = cfg->eot;
  t->add_bos = cfg->add_bos, t->add_eos = cfg->add_eos, t->add_space_prefix = cfg->add_space_prefix;
  t->nfc = cfg->nfc;
  for (int i = 0; i < 256; i++) t->byte_tok[i] = -1, t->trie_root[i] = -1;
  t->text = er__calloc(t->n, sizeof *t->text, "tokenizer texts");
  t->piece = er__calloc(t->n, sizeof *t->piece, "tokenizer pieces");
  t->type = er__calloc(t->n, 1, "tokenizer types");
  t->flags = er__calloc(t->n, 1, "tokenizer flags");
  t->pool = er__malloc((size_t)pool_bytes, "tokenizer text pool");
  t->tab_mask = pow2_at_least(t->n * 2 + 1) - 1;
  t->tab = er__calloc(t->tab_mask + 1, sizeof *t->tab, "tokenizer text table");
  if (!t->text || !t->piece || !t->type || !t->flags || !t->pool || !t->tab) {
    st = ER_STATUS_OUT_OF_MEMORY;
    goto fail;
  }

  st = fill_texts(t, cfg);
  if (st != ER_STATUS_OK) goto fail;

  /* Byte tokens. */
  for (int b = 0; b < 256; b++) {
    char buf[8];
    size_t len;
    if (t->kind == ER_TOK_BPE) {
      len = er__utf8_encode(byte_to_cp((uint8_t)b), buf);
    } else {
      static const char hex[] = "0123456789ABCDEF";
      memcpy(buf, "<0x", 3);
      buf[3] = hex[b >> 4];
      buf[4] = hex[b & 15];
      buf[5] = '>';
      len = 6;
    }
    t->byte_tok[b] = find_text(t, buf, len);
  }

  /* Merges. */
  if (cfg->n_merges)
    st = build_merges_from_list(t, cfg);
  else if (t->kind == ER_TOK_SPM)
    st = build_merges_from_scores(t, cfg->scores);
  if (st != ER_STATUS_OK) goto fail;

  /* The pre-tokenizer. */
  if (pre) {
    for (size_t i = 0; i < pre->n_patterns; i++) {
      st = er__regex_compile(pre->patterns[i], strlen(pre->patterns[i]), &t->pre[i]);
      if (st != ER_STATUS_OK) goto fail;
      t->n_pre = i + 1;
    }
    t->ignore_merges = pre->ignore_merges;
    t->mapped_stages = pre->mapped_stages;
  }

  /* Added tokens: flags and the trie. */
  size_t trie_cap = 0;
  for (size_t i = 0; i < t->n; i++) {
    uint8_t ty = t->type[i];
    if (ty == ER_TOK_TYPE_CONTROL || ty == ER_TOK_TYPE_UNKNOWN) t->flags[i] |= TF_SPECIAL;
    if (ty == ER_TOK_TYPE_CONTROL || ty == ER_TOK_TYPE_UNKNOWN || ty == ER_TOK_TYPE_USER_DEFINED) {
      t->flags[i] |= TF_ADDED;
      if (t->text[i].len) {
        st = trie_add(t, (int32_t)i, &trie_cap);
        if (st != ER_STATUS_OK) goto fail;
      }
    }
    if (ty == ER_TOK_TYPE_CONTROL && is_eog_text(t->text[i])) t->flags[i] |= TF_EOG;
  }
  if (t->eos >= 0) t->flags[t->eos] |= TF_EOG;
  if (t->eot >= 0) t->flags[t->eot] |= TF_EOG;
  *out = t;
  return ER_STATUS_OK;
fail:
  er__tok_free(t);
  return st;
}

/* ======================================================================== */
/* Encoding                                                                  */
/* ======================================================================== */

/* Where the ids go: the first cap into the caller's buffer, all counted. */
typedef struct sink {
  int32_t *ids;
  size_t cap, n;
} sink;

static void put(sink *s, int32_t id) {
  if (s->n < s->cap) s->ids[s->n] = id;
  s->n++;
}

typedef struct sym {
  int32_t id;            /* -1 once merged into its left neighbour */
  int32_t prev, next;    /* indices, -1 = none */
} sym;

typedef struct heap_entry {
  int32_t rank, pos;     /* ordered by rank, then position (leftmost first) */
  int32_t left, right;   /* the ids the pair had when pushed */
} heap_entry;

/* Per-call working memory, grown as needed and freed at the end. */
typedef struct work {
  uint32_t *cps;         /* [cap_cps] a segment's code points */
  uint8_t *cats;         /* [cap_cps] their categories */
  size_t *off;           /* [cap_cps + 1] their byte offsets in the segment */
  size_t cap_cps;
  size_t *pieces, *pieces2; /* [cap_pieces] (start, end) code point pairs */
  size_t cap_pieces;
  sym *syms;
  size_t cap_syms;
  heap_entry *heap;
  size_t cap_heap, n_heap;
  char *buf;             /* normalized or byte-mapped text */
  size_t cap_buf;
  er_regex_scratch rx;
} work;

static void work_free(work *w) {
  free(w->cps);
  free(w->cats);
  free(w->off);
  free(w->pieces);
  free(w->pieces2);
  free(w->syms);
  free(w->heap);
  free(w->buf);
  er__regex_scratch_free(&w->rx);
}

static er_status grow(void **p, size_t *cap, size_t want, size_t elem, const char *what) {
  if (want <= *cap) return ER_STATUS_OK;
  size_t nc = *cap ? *cap : 64;
  while (nc < want) {
    if (nc > SIZE_MAX / 2 / elem) return er__error(ER_STATUS_OUT_OF_MEMORY, "tokenizer: %s would overflow", what);
    nc *= 2;
  }
  void *np = realloc(*p, nc * elem);
  if (!np) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the tokenizer's %s (%zu bytes)", what, nc * elem);
  *p = np;
  *cap = nc;
  return ER_STATUS_OK;
}

static bool heap_less(const heap_entry *a, const heap_entry *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static er_status heap_push(work *w, heap_entry e) {
  size_t cap = w->cap_heap;
  ER_CHECK(grow((void **)&w->heap, &cap, w->n_heap + 1, sizeof *w->heap, "merge queue"));
  w->cap_heap = cap;
  size_t i = w->n_heap++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!heap_less(&e, &w->heap[parent])) break;
    w->heap[i] = w->heap[parent];
    i = parent;
  }
  w->heap[i] = e;
  return ER_STATUS_OK;
}

static heap_entry heap_pop(work *w) {
  heap_entry top = w->heap[0];
  heap_entry last = w->heap[--w->n_heap];
  size_t i = 0, n = w->n_heap;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && heap_less(&w->heap[c + 1], &w->heap[c])) c++;
    if (!heap_less(&w->heap[c], &last)) break;
    w->heap[i] = w->heap[c];
    i = c;
  }
  if (n) w->heap[i] = last;
  return top;
}

static er_status push_pair(const er_tokenizer *t, work *w, int32_t left) {
  if (left < 0) return ER_STATUS_OK;
  int32_t right = w->syms[left].next;
  if (right < 0) return ER_STATUS_OK;
  const merge_slot *m = find_merge(t, w->syms[left].id, w->syms[right].id);
  if (!m) return ER_STATUS_OK;
  heap_entry e = {m->rank, left, w->syms[left].id, w->syms[right].id};
  return heap_push(w, e);
}

/* Merges w->syms[0, n) (linked in order) and emits the result. */
static er_status merge_and_emit(const er_tokenizer *t, work *w, size_t n, sink *out) {
  if (n == 0) return ER_STATUS_OK;
  w->n_heap = 0;
  for (size_t i = 0; i + 1 < n; i++) ER_CHECK(push_pair(t, w, (int32_t)i));
  while (w->n_heap) {
    heap_entry e = heap_pop(w);
    sym *l = &w->syms[e.pos];
    if (l->id != e.left || l->next < 0) continue;
    sym *r = &w->syms[l->next];
    if (r->id != e.right) continue;
    const merge_slot *m = find_merge(t, e.left, e.right);
    l->id = m->merged;
    r->id = -1;
    l->next = r->next;
    if (l->next >= 0) w->syms[l->next].prev = e.pos;
    ER_CHECK(push_pair(t, w, l->prev));
    ER_CHECK(push_pair(t, w, e.pos));
  }
  for (int32_t i = 0; i >= 0; i = w->syms[i].next) put(out, w->syms[i].id);
  return ER_STATUS_OK;
}

static er_status add_sym(work *w, size_t *n, int32_t id) {
  size_t cap = w->cap_syms;
  ER_CHECK(grow((void **)&w->syms, &cap, *n + 1, sizeof *w->syms, "symbols"));
  w->cap_syms = cap;
  sym *s = &w->syms[*n];
  s->id = id;
  s->prev = *n ? (int32_t)*n - 1 : -1;
  s->next = -1;
  if (*n) w->syms[*n - 1].next = (int32_t)*n;
  (*n)++;
  return ER_STATUS_OK;
}

/* One pre-tokenized piece of byte-level BPE. */
static er_status bpe_word(const er_tokenizer *t, work *w, const char *p, size_t len, sink *out) {
  if (t->ignore_merges) {
    /* The piece as byte stand-ins: two bytes per byte at most. */
    size_t cap = w->cap_buf;
    ER_CHECK(grow((void **)&w->buf, &cap, 2 * len + 1, 1, "text buffer"));
    w->cap_buf = cap;
    size_t m = 0;
    for (size_t i = 0; i < len; i++) m += er__utf8_encode(byte_to_cp((uint8_t)p[i]), w->buf + m);
    int32_t id = find_text(t, w->buf, m);
    if (id >= 0) {
      put(out, id);
      return ER_STATUS_OK;
    }
  }
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    int32_t id = t->byte_tok[(uint8_t)p[i]];
    /* A byte without a token is dropped, as Hugging Face's BPE without an
     * unknown token and llama.cpp both do. */
    if (id >= 0) ER_CHECK(add_sym(w, &n, id));
  }
  return merge_and_emit(t, w, n, out);
}

/* Grows both piece arrays (they swap roles every stage) to hold `pairs`
 * (start, end) pairs. */
static er_status grow_pieces(work *w, size_t pairs) {
  size_t cap1 = w->cap_pieces, cap2 = w->cap_pieces;
  ER_CHECK(grow((void **)&w->pieces, &cap1, 2 * pairs, sizeof(size_t), "pieces"));
  ER_CHECK(grow((void **)&w->pieces2, &cap2, cap1, sizeof(size_t), "pieces"));
  w->cap_pieces = cap1 < cap2 ? cap1 : cap2;
  return ER_STATUS_OK;
}

/* Cuts the pieces (start, end) in w->pieces by one pattern. */
static er_status split_stage(const er_regex *re, work *w, size_t *n_pieces) {
  size_t n_out = 0;
  for (size_t k = 0; k < *n_pieces; k++) {
    size_t a = w->pieces[2 * k], b = w->pieces[2 * k + 1];
    size_t m = b - a;
    size_t from = 0, prev = 0;
    bool have_last = false;
    size_t last_end = 0;
    /* Oniguruma's find_iter as `tokenizers` runs it: matches left to
     * right; an empty match right where the last one ended is skipped
     * by one code point; matches and the gaps between them become
     * pieces, empty ones dropped. The pattern sees only this piece. */
    while (from <= m) {
      bool found;
      size_t s, e;
      ER_CHECK(er__regex_search(re, w->cps + a, w->cats + a, m, from, &w->rx, &found, &s, &e));
      if (!found) break;
      if (s == e && have_last && last_end == e) {
        from = s + 1;
        continue;
      }
      ER_CHECK(grow_pieces(w, n_out + 2));
      if (s > prev) w->pieces2[2 * n_out] = a + prev, w->pieces2[2 * n_out + 1] = a + s, n_out++;
      if (e > s) w->pieces2[2 * n_out] = a + s, w->pieces2[2 * n_out + 1] = a + e, n_out++;
      prev = e;
      from = e;
      have_last = true;
      last_end = e;
    }
    if (prev < m) {
      ER_CHECK(grow_pieces(w, n_out + 1));
      w->pieces2[2 * n_out] = a + prev, w->pieces2[2 * n_out + 1] = b, n_out++;
    }
  }
  size_t *tmp = w->pieces;
  w->pieces = w->pieces2;
  w->pieces2 = tmp;
  *n_pieces = n_out;
  return ER_STATUS_OK;
}

/* Decodes a (valid UTF-8) segment into w->cps, w->cats and w->off. */
static er_status load_cps(work *w, const char *p, size_t len, size_t *n_out) {
  /* The three arrays are grown to one capacity; a code point is at least
   * a byte, so len + 1 entries always suffice. */
  if (len + 1 > w->cap_cps) {
    size_t c0 = w->cap_cps, c1 = w->cap_cps, c2 = w->cap_cps;
    ER_CHECK(grow((void **)&w->cps, &c0, len + 1, sizeof *w->cps, "code points"));
    ER_CHECK(grow((void **)&w->cats, &c1, c0, 1, "categories"));
    ER_CHECK(grow((void **)&w->off, &c2, c0, sizeof *w->off, "offsets"));
    w->cap_cps = c0;
  }
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t l = er__utf8_decode((const uint8_t *)p + i, len - i, &cp);
    ER_ASSERT(l > 0);
    w->cps[n] = cp;
    w->cats[n] = (uint8_t)er__ucd_category(cp);
    w->off[n] = i;
    n++;
    i += l;
  }
  w->off[n] = len;
  *n_out = n;
  return ER_STATUS_OK;
}

static er_status encode_bpe(const er_tokenizer *t, work *w, const char *p, size_t len, sink *out) {
  size_t n;
  ER_CHECK(load_cps(w, p, len, &n));
  ER_CHECK(grow_pieces(w, 1));
  w->pieces[0] = 0;
  w->pieces[1] = n;
  size_t n_pieces = n ? 1 : 0;
  size_t first_mapped = t->n_pre - t->mapped_stages;
  for (size_t s = 0; s < t->n_pre; s++) {
    if (s == first_mapped) {
      /* From here on the subject is one stand-in code point per byte, as
       * a ByteLevel pre-tokenizer hands it on: pieces move to byte
       * offsets, which are then the code point offsets too. The arrays
       * hold len + 1 entries (load_cps). */
      for (size_t k = 0; k < 2 * n_pieces; k++) w->pieces[k] = w->off[w->pieces[k]];
      for (size_t i = 0; i < len; i++) {
        w->cps[i] = byte_to_cp((uint8_t)p[i]);
        w->cats[i] = (uint8_t)er__ucd_category(w->cps[i]);
        w->off[i] = i;
      }
      w->off[len] = len;
    }
    ER_CHECK(split_stage(t->pre[s], w, &n_pieces));
  }
  for (size_t k = 0; k < n_pieces; k++) {
    size_t a = w->off[w->pieces[2 * k]], b = w->off[w->pieces[2 * k + 1]];
    ER_CHECK(bpe_word(t, w, p + a, b - a, out));
  }
  return ER_STATUS_OK;
}

/* One text segment of SentencePiece BPE: spaces as U+2581, one in front
 * when the model adds it (Llama 2's tokenizer.json: Prepend + Replace,
 * applied to every segment between added tokens, as sentencepiece and
 * llama.cpp do), then code points merged by the derived ranks. */
static er_status encode_spm(const er_tokenizer *t, work *w, const char *p, size_t len, sink *out) {
  if (len == 0) return ER_STATUS_OK;
  size_t spaces = 0;
  for (size_t i = 0; i < len; i++) spaces += p[i] == ' ';
  size_t cap = w->cap_buf;
  ER_CHECK(grow((void **)&w->buf, &cap, len + 2 * spaces + 4, 1, "text buffer"));
  w->cap_buf = cap;
  size_t m = 0;
  if (t->add_space_prefix) memcpy(w->buf, "\xE2\x96\x81", 3), m = 3;
  for (size_t i = 0; i < len; i++) {
    if (p[i] == ' ')
      memcpy(w->buf + m, "\xE2\x96\x81", 3), m += 3;
    else
      w->buf[m++] = p[i];
  }
  const char *s = w->buf;
  size_t n = 0;
  /* Hugging Face's BPE.merge_word: a code point the vocabulary lacks
   * becomes its <0xNN> byte tokens when all exist, else the unknown
   * token, runs of unknowns fused into one; the symbols then merge. */
  bool pending_unk = false;
  for (size_t i = 0; i < m;) {
    uint32_t cp;
    size_t l = er__utf8_decode((const uint8_t *)s + i, m - i, &cp);
    ER_ASSERT(l > 0);
    int32_t id = find_text(t, s + i, l);
    bool all = id < 0;
    for (size_t k = 0; all && k < l; k++) all = t->byte_tok[(uint8_t)s[i + k]] >= 0;
    if ((id >= 0 || all) && pending_unk) {
      ER_CHECK(add_sym(w, &n, t->unk));
      pending_unk = false;
    }
    if (id >= 0) {
      ER_CHECK(add_sym(w, &n, id));
    } else if (all) {
      for (size_t k = 0; k < l; k++) ER_CHECK(add_sym(w, &n, t->byte_tok[(uint8_t)s[i + k]]));
    } else if (t->unk >= 0) {
      pending_unk = true;
    }
    i += l;
  }
  if (pending_unk) ER_CHECK(add_sym(w, &n, t->unk));
  return merge_and_emit(t, w, n, out);
}

/* The longest added token at text[i], or -1 (its length in *len_out). */
static int32_t match_added(const er_tokenizer *t, const char *text, size_t len, size_t i, bool parse_special,
                           size_t *len_out) {
  int32_t node = t->trie_root[(uint8_t)text[i]];
  int32_t best = -1;
  for (size_t k = i; node >= 0;) {
    int32_t id = t->trie[node].token;
    if (id >= 0 && (parse_special || !(t->flags[id] & TF_SPECIAL))) best = id, *len_out = k + 1 - i;
    if (++k >= len) break;
    int32_t c = t->trie[node].child;
    while (c >= 0 && t->trie[c].byte != (uint8_t)text[k]) c = t->trie[c].sibling;
    node = c;
  }
  return best;
}

er_status er__tok_encode(const er_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                         int32_t *ids, size_t cap, size_t *n_out) {
  if (!t || !n_out || (!text && len) || (!ids && cap))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "er__tok_encode: NULL tokenizer, text, ids or n_out");
  *n_out = 0;
  if (len > ER_TOK_MAX_TEXT_BYTES)
    return er__error(ER_STATUS_LIMIT, "tokenizer: a text of %zu bytes is over %zu (ER_TOK_MAX_TEXT_BYTES)", len,
                     ER_TOK_MAX_TEXT_BYTES);
  size_t bad = er__utf8_check(text, len);
  if (bad != len)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "tokenizer: the text is not valid UTF-8 at byte offset %zu", bad);
  sink out = {ids, cap, 0};
  work w = {0};
  er_status st = ER_STATUS_OK;
  if (add_special && t->add_bos) put(&out, t->bos);
  /* Added tokens first, leftmost-longest (Hugging Face's AddedVocabulary),
   * then each text segment between them. */
  size_t seg = 0;
  for (size_t i = 0; i <= len && st == ER_STATUS_OK;) {
    size_t mlen = 0;
    int32_t id = i < len && t->n_trie ? match_added(t, text, len, i, parse_special, &mlen) : -1;
    if (id < 0 && i < len) {
      i++;
      continue;
    }
    if (i > seg) {
      const char *p = text + seg;
      size_t n = i - seg;
      char *norm = NULL;
      if (t->nfc && !er__nfc_is_trivial(p, n)) {
        st = er__nfc(p, n, &norm, &n);
        p = norm;
      }
      if (st == ER_STATUS_OK)
        st = t->kind == ER_TOK_BPE ? encode_bpe(t, &w, p, n, &out) : encode_spm(t, &w, p, n, &out);
      free(norm);
    }
    if (id < 0) break;
    put(&out, id);
    i += mlen;
    seg = i;
  }
  if (st == ER_STATUS_OK && add_special && t->add_eos) put(&out, t->eos);
  work_free(&w);
  if (st != ER_STATUS_OK) return st;
  *n_out = out.n;
  if (out.n > cap)
    return er__error(ER_STATUS_LIMIT, "tokenizer: the text is %zu tokens, more than the %zu the buffer holds", out.n,
                     cap);
  return ER_STATUS_OK;
}
