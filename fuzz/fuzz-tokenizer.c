/* fuzz-tokenizer.c - libFuzzer target for the tokenizers and the
 * pre-tokenizer pattern matcher. The first byte picks what the rest is:
 *
 *   0: text for a small byte-level BPE vocabulary (every byte has a
 *      token, so valid UTF-8 must round-trip: decode(encode(x)) == x);
 *   1: text for a small SentencePiece vocabulary with byte fallback (the
 *      same round trip, less the prefix space);
 *   2: token ids (4 bytes each, any value) to decode and to piece;
 *   3: a pattern (up to the first NUL) and a subject (the rest) for the
 *      matcher, whose split must tile the subject.
 *
 * Any crash, sanitizer report, leak or broken invariant (trap) is a bug;
 * bad input must come back as an error status. */
#include <stdio.h>
#include <stdlib.h>

#include "llm/tokenizer.h"
#include "llm/unicode.h"

#define N_EXTRA 12

static er_tokenizer *bpe, *spm;

static uint32_t stand_in(unsigned b) {
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
  uint32_t k = 0;
  for (unsigned x = 0; x < b; x++)
    if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) k++;
  return 0x100 + k;
}

static void build(void) {
  static char bytes[256][8];
  static er_tok_str toks[256 + N_EXTRA];
  static int32_t types[256 + N_EXTRA];
  static const char *const extra[N_EXTRA] = {"he", "ll", "hell", "hello", "\xC4\xA0t", "\xC4\xA0th", "th",
                                             "<|im_start|>", "<|im_end|>", "<tool>", "<tool>x", "\xC4\xA0\xC4\xA0"};
  static const char *const merge_text[] = {"h e", "l l", "he ll", "hell o", "t h", "\xC4\xA0 t", "\xC4\xA0t h",
                                           "\xC4\xA0 \xC4\xA0"};
  static er_tok_str merges[ER_ARRAY_LEN(merge_text)];
  for (unsigned b = 0; b < 256; b++) {
    er__utf8_encode(stand_in(b), bytes[b]);
    toks[b].p = bytes[b];
    toks[b].len = strlen(bytes[b]);
    types[b] = ER_TOK_TYPE_NORMAL;
  }
  for (int i = 0; i < N_EXTRA; i++) {
    toks[256 + i].p = extra[i];
    toks[256 + i].len = strlen(extra[i]);
    types[256 + i] = i == 7 || i == 8 ? ER_TOK_TYPE_CONTROL : i == 9 || i == 10 ? ER_TOK_TYPE_USER_DEFINED
                                                                                 : ER_TOK_TYPE_NORMAL;
  }
  for (size_t i = 0; i < ER_ARRAY_LEN(merge_text); i++) {
    merges[i].p = merge_text[i];
    merges[i].len = strlen(merge_text[i]);
  }
  er_tok_config c;
  memset(&c, 0, sizeof c);
  c.kind = ER_TOK_BPE;
  c.pre = "llama3";
  c.n_tokens = 256 + N_EXTRA;
  c.tokens = toks;
  c.types = types;
  c.n_merges = ER_ARRAY_LEN(merge_text);
  c.merges = merges;
  c.bos = 256 + 7, c.eos = 256 + 8, c.unk = -1, c.pad = -1, c.eot = 256 + 8;
  c.add_bos = true;
  if (er__tok_create(&c, &bpe) != ER_STATUS_OK) __builtin_trap();

  /* SentencePiece: <unk> <s> </s>, the 256 byte tokens, a few pieces. */
  static char names[259][8];
  static er_tok_str stoks[259 + 6];
  static int32_t stypes[259 + 6];
  static float scores[259 + 6];
  static const char *const pieces[6] = {"\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab"};
  const char *fixed[3] = {"<unk>", "<s>", "</s>"};
  for (int i = 0; i < 259; i++) {
    if (i < 3)
      strcpy(names[i], fixed[i]);
    else
      snprintf(names[i], sizeof names[i], "<0x%02X>", i - 3);
    stoks[i].p = names[i];
    stoks[i].len = strlen(names[i]);
    stypes[i] = i == 0 ? ER_TOK_TYPE_UNKNOWN : i < 3 ? ER_TOK_TYPE_CONTROL : ER_TOK_TYPE_BYTE;
    scores[i] = 0;
  }
  for (int i = 0; i < 6; i++) {
    stoks[259 + i].p = pieces[i];
    stoks[259 + i].len = strlen(pieces[i]);
    stypes[259 + i] = ER_TOK_TYPE_NORMAL;
    scores[259 + i] = -(float)i;
  }
  memset(&c, 0, sizeof c);
  c.kind = ER_TOK_SPM;
  c.n_tokens = 259 + 6;
  c.tokens = stoks;
  c.types = stypes;
  c.scores = scores;
  c.bos = 1, c.eos = 2, c.unk = 0, c.pad = -1, c.eot = -1;
  c.add_bos = true;
  c.add_space_prefix = true;
  if (er__tok_create(&c, &spm) != ER_STATUS_OK) __builtin_trap();
}

/* Encodes and checks the full-count rule and the round trip. The
 * SentencePiece one runs without parse_special (a segment after an added
 * token gets its own prefix space, which decode keeps, as Hugging Face's)
 * and skips texts with U+2581 (which decodes as a space). */
static void round_trip(const er_tokenizer *t, const char *text, size_t len, bool parse_special) {
  size_t n = 0;
  er_status st = er__tok_encode(t, text, len, false, parse_special, NULL, 0, &n);
  bool valid = er__utf8_check(text, len) == len;
  if (!valid) {
    if (st != ER_STATUS_INVALID_ARGUMENT) __builtin_trap();
    return;
  }
  if (st != ER_STATUS_OK && st != ER_STATUS_LIMIT) __builtin_trap();
  int32_t *ids = malloc((n + 1) * sizeof *ids);
  size_t n2 = 0;
  if (er__tok_encode(t, text, len, true, parse_special, ids, n + 1, &n2) == ER_STATUS_OK) {
    /* with add_special: one BOS more */
    if (n2 != n + 1 || ids[0] != er__tok_bos(t)) __builtin_trap();
  }
  if (er__tok_encode(t, text, len, false, parse_special, ids, n, &n2) != ER_STATUS_OK || n2 != n) __builtin_trap();
  if (!parse_special) {
    for (size_t i = 0; i + 3 <= len; i++)
      if (memcmp(text + i, "\xE2\x96\x81", 3) == 0) {
        free(ids);
        return;
      }
  }
  size_t dl = 0;
  er__tok_decode(t, ids, n, true, NULL, 0, &dl);
  char *out = malloc(dl + 1);
  if (er__tok_decode(t, ids, n, true, out, dl, &dl) != ER_STATUS_OK) __builtin_trap();
  if (dl != len || memcmp(out, text, len) != 0) __builtin_trap();
  free(out);
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!bpe) build();
  if (size == 0) return 0;
  const char *rest = (const char *)data + 1;
  size_t n = size - 1;
  switch (data[0] & 3) {
    case 0:
      round_trip(bpe, rest, n, true);
      break;
    case 1:
      round_trip(spm, rest, n, false);
      break;
    case 2: {
      size_t count = n / 4;
      int32_t *ids = malloc((count + 1) * sizeof *ids);
      for (size_t i = 0; i < count; i++) memcpy(&ids[i], rest + 4 * i, 4);
      for (int k = 0; k < 2; k++) {
        const er_tokenizer *t = k ? spm : bpe;
        char buf[64];
        size_t len;
        bool in_range = true;
        for (size_t i = 0; i < count; i++) {
          er_status st = er__tok_piece(t, ids[i], i & 1, buf, sizeof buf, &len);
          bool ok = ids[i] >= 0 && (size_t)ids[i] < er__tok_vocab_size(t);
          in_range = in_range && ok;
          if ((st == ER_STATUS_OUT_OF_RANGE) == ok) __builtin_trap();
        }
        er_status st = er__tok_decode(t, ids, count, data[0] & 4, buf, sizeof buf, &len);
        if (!in_range && st != ER_STATUS_OUT_OF_RANGE) __builtin_trap();
        if (in_range && st != ER_STATUS_OK && st != ER_STATUS_LIMIT) __builtin_trap();
        if (st == ER_STATUS_OK && er__utf8_check(buf, len) != len) __builtin_trap();
      }
      free(ids);
      break;
    }
    default: {
      const char *nul = memchr(rest, 0, n);
      size_t plen = nul ? (size_t)(nul - rest) : n;
      er_regex *re = NULL;
      if (er__regex_compile(rest, plen, &re) != ER_STATUS_OK) break;
      const char *subj = nul ? nul + 1 : rest + n;
      size_t slen = (size_t)(rest + n - subj);
      /* A short subject keeps a backtracking-heavy pattern within the
       * fuzzer's time per input; the step budget is tested elsewhere. */
      if (slen > 256) slen = 256;
      uint32_t *cps = malloc((slen + 1) * sizeof *cps);
      uint8_t *cats = malloc(slen + 1);
      size_t m = 0;
      for (size_t i = 0; i < slen;) {
        size_t l = er__utf8_decode((const uint8_t *)subj + i, slen - i, &cps[m]);
        if (!l) cps[m] = 0xFFFD, l = 1;
        cats[m] = (uint8_t)er__ucd_category(cps[m]);
        m++;
        i += l;
      }
      er_regex_scratch scratch = {0};
      size_t from = 0;
      while (from <= m) {
        bool found;
        size_t a, b;
        if (er__regex_search(re, cps, cats, m, from, &scratch, &found, &a, &b) != ER_STATUS_OK || !found) break;
        if (a < from || b < a || b > m) __builtin_trap();
        from = b > a ? b : a + 1;
      }
      er__regex_scratch_free(&scratch);
      free(cps);
      free(cats);
      er__regex_free(re);
      break;
    }
  }
  return 0;
}
