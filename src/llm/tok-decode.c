/* tok-decode.c - token ids back to text: one token's piece, and a
 * sequence's text as Hugging Face's decode gives it. */
#include <stdlib.h>
#include <string.h>

#include "llm/tok-impl.h"

/* ======================================================================== */
/* Decoding                                                                  */
/* ======================================================================== */

static er_status check_id(const er_tokenizer *t, int32_t id) {
  if (id < 0 || (size_t)id >= t->n)
    return er__error(ER_STATUS_OUT_OF_RANGE, "tokenizer: token id %d is outside the vocabulary of %zu tokens", id,
                     t->n);
  return ER_STATUS_OK;
}

er_status er__tok_piece(const er_tokenizer *t, int32_t id, bool special, char *buf, size_t cap, size_t *len_out) {
  if (!t || !len_out || (!buf && cap))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "er__tok_piece: NULL tokenizer, buf or len_out");
  *len_out = 0;
  ER_CHECK(check_id(t, id));
  if ((t->flags[id] & TF_SPECIAL) && !special) return ER_STATUS_OK;
  const er_tok_str p = t->piece[id];
  memcpy(buf, p.p, p.len < cap ? p.len : cap);
  *len_out = p.len;
  if (p.len > cap)
    return er__error(ER_STATUS_LIMIT, "tokenizer: token %d's piece is %zu bytes, more than the %zu the buffer holds", id,
                     p.len, cap);
  return ER_STATUS_OK;
}

/* Output with the same rules as the ids: the first cap bytes kept, all
 * counted. */
typedef struct bsink {
  char *buf;
  size_t cap, n;
} bsink;

static void bput(bsink *s, const char *p, size_t len) {
  if (s->n < s->cap) memcpy(s->buf + s->n, p, len < s->cap - s->n ? len : s->cap - s->n);
  s->n += len;
}

/* Rust's String::from_utf8_lossy: each maximal ill-formed subpart becomes
 * one U+FFFD. */
static void bput_lossy(bsink *s, const char *p, size_t len) {
  size_t i = 0, run = 0;
  while (i < len) {
    uint32_t cp;
    size_t l = er__utf8_decode((const uint8_t *)p + i, len - i, &cp);
    if (l) {
      i += l;
      continue;
    }
    bput(s, p + run, i - run);
    bput(s, "\xEF\xBF\xBD", 3);
    i += er__utf8_maximal_subpart((const uint8_t *)p + i, len - i);
    run = i;
  }
  bput(s, p + run, len - run);
}

er_status er__tok_decode(const er_tokenizer *t, const int32_t *ids, size_t n, bool special, char *buf, size_t cap,
                         size_t *len_out) {
  if (!t || !len_out || (!ids && n) || (!buf && cap))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "er__tok_decode: NULL tokenizer, ids, buf or len_out");
  *len_out = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    er_status st = check_id(t, ids[i]);
    if (st != ER_STATUS_OK) {
      er__error_prefix("decoding id %zu of %zu", i, n);
      return st;
    }
    /* Room for the text (pieces are no longer than texts) or three bytes
     * of U+FFFD per byte token. */
    total += t->text[ids[i]].len + 3;
  }
  if (total > SIZE_MAX / 3) return er__error(ER_STATUS_OUT_OF_MEMORY, "tokenizer: decoded text too large");
  char *tmp = er__malloc((size_t)total * 3 + 1, "decoded text");
  if (!tmp) return ER_STATUS_OUT_OF_MEMORY;
  size_t m = 0;
  bsink out = {buf, cap, 0};
  if (t->kind == ER_TOK_BPE) {
    /* ByteLevel: every token's bytes joined, then made valid UTF-8 as a
     * whole, so a character split over tokens comes out whole. */
    for (size_t i = 0; i < n; i++) {
      if (!special && (t->flags[ids[i]] & TF_SPECIAL)) continue;
      const er_tok_str p = t->piece[ids[i]];
      memcpy(tmp + m, p.p, p.len);
      m += p.len;
    }
    bput_lossy(&out, tmp, m);
  } else {
    /* Llama 2's decoder: Replace(U+2581, " "), ByteFallback, Fuse, then
     * Strip(" ", 1 left) when a prefix space is added. A run of byte
     * tokens that is valid UTF-8 is kept; one that is not becomes one
     * U+FFFD per byte token, as ByteFallback does. The run is gathered at
     * the end of tmp's used part and rewritten in place. */
    size_t run_start = 0, n_run = 0;
    for (size_t i = 0; i <= n; i++) {
      uint8_t byte = 0;
      bool is_byte = false;
      er_tok_str text = {0};
      if (i < n) {
        if (!special && (t->flags[ids[i]] & TF_SPECIAL)) continue;
        text = t->text[ids[i]];
        is_byte = er__tok_is_byte_text(text, &byte);
      }
      if (is_byte) {
        if (n_run == 0) run_start = m;
        tmp[m++] = (char)byte;
        n_run++;
        continue;
      }
      if (n_run && er__utf8_check(tmp + run_start, n_run) != n_run) {
        m = run_start;
        for (size_t k = 0; k < n_run; k++) memcpy(tmp + m, "\xEF\xBF\xBD", 3), m += 3;
      }
      n_run = 0;
      if (i == n) break;
      for (size_t k = 0; k < text.len;) {
        if (k + 3 <= text.len && memcmp(text.p + k, "\xE2\x96\x81", 3) == 0) {
          tmp[m++] = ' ';
          k += 3;
        } else {
          tmp[m++] = text.p[k++];
        }
      }
    }
    size_t skip = t->add_space_prefix && m && tmp[0] == ' ' ? 1 : 0;
    bput(&out, tmp + skip, m - skip);
  }
  free(tmp);
  *len_out = out.n;
  if (out.n > cap)
    return er__error(ER_STATUS_LIMIT, "tokenizer: the decoded text is %zu bytes, more than the %zu the buffer holds",
                     out.n, cap);
  return ER_STATUS_OK;
}
