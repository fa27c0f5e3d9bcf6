/* test-tokenizer.c - the tokenizers' unit tests: bad input (TESTING.md
 * 16b) with its specific status and message, caps, merge order, special
 * tokens, decode and piece rules, round trips, the Unicode table and the
 * pattern matcher, the GGUF and tokenizer.json readers. The comparison
 * with llama.cpp and Hugging Face over whole vocabularies is
 * tokenizer_check.py. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"

/* ======================================================================== */
/* A small byte-level vocabulary                                             */
/* ======================================================================== */

/* GPT-2's stand-in for byte b (bytes_to_unicode). */
static uint32_t stand_in(unsigned b) {
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
  uint32_t k = 0;
  for (unsigned x = 0; x < b; x++)
    if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) k++;
  return 0x100 + k;
}

#define MAX_TOK 400
typedef struct vocab {
  char text[MAX_TOK][32];
  er_tok_str toks[MAX_TOK];
  int32_t types[MAX_TOK];
  float scores[MAX_TOK];
  size_t n;
  er_tok_str merges[64];
  char merge_text[64][40];
  size_t n_merges;
} vocab;

static int32_t add_tok(vocab *v, const char *s, int32_t type) {
  size_t len = strlen(s);
  memcpy(v->text[v->n], s, len + 1);
  v->toks[v->n].p = v->text[v->n];
  v->toks[v->n].len = len;
  v->types[v->n] = type;
  v->scores[v->n] = -(float)v->n;
  return (int32_t)v->n++;
}

static void add_merge(vocab *v, const char *s) {
  strcpy(v->merge_text[v->n_merges], s);
  v->merges[v->n_merges].p = v->merge_text[v->n_merges];
  v->merges[v->n_merges].len = strlen(s);
  v->n_merges++;
}

/* Ids 0..255: the byte stand-ins, in byte order; then merged tokens and
 * the added ones. */
static void byte_vocab(vocab *v) {
  memset(v, 0, sizeof *v);
  for (unsigned b = 0; b < 256; b++) {
    char buf[8] = {0};
    er__utf8_encode(stand_in(b), buf);
    add_tok(v, buf, ER_TOK_TYPE_NORMAL);
  }
}

static er_tok_config bpe_config(vocab *v) {
  er_tok_config c;
  memset(&c, 0, sizeof c);
  c.kind = ER_TOK_BPE;
  c.pre = "gpt2";
  c.n_tokens = v->n;
  c.tokens = v->toks;
  c.types = v->types;
  c.n_merges = v->n_merges;
  c.merges = v->merges;
  c.bos = c.eos = c.unk = c.pad = c.eot = -1;
  return c;
}

/* The test vocabulary: "he", "ll", "hell", "hello", "Ġw" ... and added
 * tokens. */
enum { T_HE = 256, T_LL, T_HELL, T_HELLO, T_GW, T_AB, T_BC, T_AA, T_IM_START, T_IM_END, T_TOOL, T_TOOLX, T_EOS };

static void test_vocab(vocab *v) {
  byte_vocab(v);
  add_tok(v, "he", 1);
  add_tok(v, "ll", 1);
  add_tok(v, "hell", 1);
  add_tok(v, "hello", 1);
  add_tok(v, "\xC4\xA0w", 1); /* "Ġw" */
  add_tok(v, "ab", 1);
  add_tok(v, "bc", 1);
  add_tok(v, "aa", 1);
  add_tok(v, "<|im_start|>", ER_TOK_TYPE_CONTROL);
  add_tok(v, "<|im_end|>", ER_TOK_TYPE_CONTROL);
  add_tok(v, "<tool>", ER_TOK_TYPE_USER_DEFINED);
  add_tok(v, "<tool>x", ER_TOK_TYPE_USER_DEFINED);
  add_tok(v, "</s>", ER_TOK_TYPE_CONTROL);
  add_merge(v, "h e");
  add_merge(v, "l l");
  add_merge(v, "he ll");
  add_merge(v, "hell o");
  add_merge(v, "\xC4\xA0 w");
  add_merge(v, "a b");
  add_merge(v, "b c");
  add_merge(v, "a a");
}

static er_tokenizer *make(er_tok_config *c) {
  er_tokenizer *t = NULL;
  er_status st = er__tok_create(c, &t);
  if (st != ER_STATUS_OK) fprintf(stderr, "create: %s: %s\n", er_status_name(st), er_last_error());
  return t;
}

/* Encodes into ids (at most 64) and returns the count, -1 on error. */
static int enc(const er_tokenizer *t, const char *s, bool add_special, bool parse_special, int32_t *ids) {
  size_t n = 0;
  er_status st = er__tok_encode(t, s, strlen(s), add_special, parse_special, ids, 64, &n);
  if (st != ER_STATUS_OK) return -1;
  return (int)n;
}

static bool ids_are(const int32_t *got, int n, const int32_t *want, int n_want) {
  if (n != n_want) return false;
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) return false;
  return true;
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__}), (int)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))

/* ======================================================================== */
/* Building: bad input                                                       */
/* ======================================================================== */

static void test_create_args(void) {
  er_tokenizer *t = (er_tokenizer *)1;
  CHECK_STATUS(er__tok_create(NULL, &t), ER_STATUS_INVALID_ARGUMENT);
  CHECK(t == NULL);
  vocab v;
  test_vocab(&v);
  er_tok_config c = bpe_config(&v);
  CHECK_STATUS(er__tok_create(&c, NULL), ER_STATUS_INVALID_ARGUMENT);
  c.n_tokens = 0;
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("empty");
  c = bpe_config(&v);
  c.kind = (er_tok_kind)7;
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_ARGUMENT);
  c = bpe_config(&v);
  c.kind = ER_TOK_UNIGRAM;
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("unigram");
  er__tok_free(NULL);
}

static void test_caps_before_allocation(void) {
  /* The counts are checked before anything is read or sized by them: a
   * one-entry array with a huge count must not be touched past entry 0. */
  vocab v;
  test_vocab(&v);
  er_tok_config c = bpe_config(&v);
  er_tokenizer *t = NULL;
  c.n_tokens = (size_t)ER_TOK_MAX_VOCAB + 1;
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_LIMIT);
  CHECK_MSG("ER_TOK_MAX_VOCAB");
  c = bpe_config(&v);
  c.n_merges = (size_t)ER_TOK_MAX_MERGES + 1;
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_LIMIT);
  CHECK_MSG("ER_TOK_MAX_MERGES");
  static char big[ER_TOK_MAX_TOKEN_BYTES + 1];
  memset(big, 'x', sizeof big);
  er_tok_str save = v.toks[T_AB];
  v.toks[T_AB].p = big;
  v.toks[T_AB].len = sizeof big;
  c = bpe_config(&v);
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_LIMIT);
  CHECK_MSG("ER_TOK_MAX_TOKEN_BYTES");
  v.toks[T_AB].len = ER_TOK_MAX_TOKEN_BYTES; /* at the cap: fine (the merge "a b" now makes an unknown token) */
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("makes 'ab'");
  v.toks[T_AB] = save;
}

static void test_bad_vocabulary(void) {
  vocab v;
  er_tok_config c;
  er_tokenizer *t = NULL;

  test_vocab(&v);
  strcpy(v.text[T_LL], "he"); /* duplicate of T_HE */
  v.toks[T_LL].len = 2;
  c = bpe_config(&v);
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("repeats the text of token 256");

  test_vocab(&v);
  v.text[T_HELLO][1] = (char)0xC3; /* "h\xC3llo": a lead byte without its continuation */
  c = bpe_config(&v);
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("not valid UTF-8");

  test_vocab(&v);
  v.types[T_AB] = 9;
  c = bpe_config(&v);
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("type 9");

  test_vocab(&v);
  c = bpe_config(&v);
  c.bos = (int32_t)v.n;
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("bos id");
  c = bpe_config(&v);
  c.add_bos = true;
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("no BOS");

  c = bpe_config(&v);
  c.pre = "no-such-pre";
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("no-such-pre");

  test_vocab(&v);
  c = bpe_config(&v);
  c.kind = ER_TOK_SPM;
  c.n_merges = 0;
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("needs scores");
  c.scores = v.scores;
  v.scores[5] = NAN;
  CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("not finite");
}

static void test_bad_merges(void) {
  vocab v;
  er_tok_config c;
  er_tokenizer *t = NULL;
  const char *bad[][2] = {
      {"h q\xC3\xA9", "not in the vocabulary"},  /* names a token that is not there */
      {"a c", "makes 'ac'"},                     /* the merged token is not there */
      {"he", "not two tokens"},
      {"h  e", "not two tokens"},
      {" he", "not two tokens"},
      {"h e", "repeats an earlier merge"},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(bad); i++) {
    test_vocab(&v);
    add_merge(&v, bad[i][0]);
    c = bpe_config(&v);
    CHECK_STATUS(er__tok_create(&c, &t), ER_STATUS_INVALID_MODEL);
    CHECK_MSG(bad[i][1]);
  }
}

/* ======================================================================== */
/* Byte-level BPE                                                            */
/* ======================================================================== */

static void test_bpe_merges(void) {
  vocab v;
  test_vocab(&v);
  er_tok_config c = bpe_config(&v);
  er_tokenizer *t = make(&c);
  CHECK(t != NULL);
  if (!t) return;
  int32_t ids[64];
  int n = enc(t, "hello", false, true, ids);
  CHECK(ids_are(ids, n, IDS(T_HELLO)));
  n = enc(t, "hello world", false, true, ids);
  /* " world" is one piece: Ġw merges, the rest stay bytes. */
  CHECK(ids_are(ids, n, IDS(T_HELLO, T_GW, 'o', 'r', 'l', 'd')));
  /* Rank order decides: "a b" (rank 5) before "b c" (rank 6). */
  n = enc(t, "abc", false, true, ids);
  CHECK(ids_are(ids, n, IDS(T_AB, 'c')));
  /* Equal ranks: leftmost first. */
  n = enc(t, "aaa", false, true, ids);
  CHECK(ids_are(ids, n, IDS(T_AA, 'a')));
  n = enc(t, "", false, true, ids);
  CHECK(n == 0);
  er__tok_free(t);

  /* The same with the merge order swapped. */
  test_vocab(&v);
  strcpy(v.merge_text[5], "b c");
  strcpy(v.merge_text[6], "a b");
  c = bpe_config(&v);
  t = make(&c);
  n = enc(t, "abc", false, true, ids);
  CHECK(ids_are(ids, n, IDS('a', T_BC)));
  er__tok_free(t);
}

static void test_bpe_specials(void) {
  vocab v;
  test_vocab(&v);
  er_tok_config c = bpe_config(&v);
  c.eos = T_EOS;
  c.bos = T_IM_START;
  c.add_bos = c.add_eos = true;
  er_tokenizer *t = make(&c);
  CHECK(t != NULL);
  if (!t) return;
  int32_t ids[64];
  int n = enc(t, "<|im_start|>hello<|im_end|>", false, true, ids);
  CHECK(ids_are(ids, n, IDS(T_IM_START, T_HELLO, T_IM_END)));
  /* Without parse_special a control token's text is plain text... */
  n = enc(t, "<|im_end|>", false, false, ids);
  CHECK(n == 10 && ids[0] == '<' && ids[1] == '|');
  /* ...but a user-defined token is always one token, the longest that
   * matches ("<tool>x" over "<tool>"). */
  n = enc(t, "<tool>x<tool>y", false, false, ids);
  CHECK(ids_are(ids, n, IDS(T_TOOLX, T_TOOL, 'y')));
  /* BOS/EOS come with add_special. */
  n = enc(t, "hello", true, true, ids);
  CHECK(ids_are(ids, n, IDS(T_IM_START, T_HELLO, T_EOS)));
  /* A half-written marker is text. */
  n = enc(t, "<|im_start", false, true, ids);
  CHECK(n == 10 && ids[0] == '<');
  CHECK(er__tok_is_control(t, T_IM_END));
  CHECK(!er__tok_is_control(t, T_TOOL));
  CHECK(er__tok_is_eog(t, T_IM_END)); /* by its text */
  CHECK(er__tok_is_eog(t, T_EOS));    /* the configured EOS */
  CHECK(!er__tok_is_eog(t, T_HELLO));
  CHECK(!er__tok_is_eog(t, -1) && !er__tok_is_eog(t, 100000));
  CHECK(er__tok_find(t, "hello", 5) == T_HELLO);
  CHECK(er__tok_find(t, "zzz", 3) == -1);
  size_t len;
  CHECK(er__tok_text(t, T_GW, &len) && len == 3);
  CHECK(er__tok_text(t, -5, &len) == NULL && len == 0);
  CHECK(er__tok_vocab_size(t) == v.n);
  CHECK(er__tok_bos(t) == T_IM_START && er__tok_eos(t) == T_EOS && er__tok_eot(t) == -1);
  er__tok_free(t);
}

static void test_encode_buffers(void) {
  vocab v;
  test_vocab(&v);
  er_tok_config c = bpe_config(&v);
  er_tokenizer *t = make(&c);
  if (!t) return;
  size_t n = 99;
  /* cap = 0 sizes the buffer. */
  CHECK_STATUS(er__tok_encode(t, "hello world", 11, false, true, NULL, 0, &n), ER_STATUS_LIMIT);
  CHECK(n == 6);
  int32_t ids[3] = {-7, -7, -7};
  CHECK_STATUS(er__tok_encode(t, "hello world", 11, false, true, ids, 2, &n), ER_STATUS_LIMIT);
  CHECK(n == 6 && ids[0] == T_HELLO && ids[1] == T_GW && ids[2] == -7);
  /* Invalid UTF-8 in the prompt names the byte offset. */
  CHECK_STATUS(er__tok_encode(t, "abc\xFFz", 5, false, true, ids, 3, &n), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("byte offset 3");
  CHECK_STATUS(er__tok_encode(t, "\xE6\x97", 2, false, true, ids, 3, &n), ER_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(er__tok_encode(t, "\xED\xA0\x80", 3, false, true, ids, 3, &n), ER_STATUS_INVALID_ARGUMENT); /* surrogate */
  CHECK_STATUS(er__tok_encode(t, "\xC0\xAF", 2, false, true, ids, 3, &n), ER_STATUS_INVALID_ARGUMENT);     /* overlong */
  CHECK_STATUS(er__tok_encode(t, NULL, 3, false, true, ids, 3, &n), ER_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(er__tok_encode(t, NULL, 0, false, true, NULL, 0, &n), ER_STATUS_OK);
  CHECK(n == 0);
  er__tok_free(t);
}

static void test_decode_rules(void) {
  vocab v;
  test_vocab(&v);
  er_tok_config c = bpe_config(&v);
  er_tokenizer *t = make(&c);
  if (!t) return;
  char buf[64];
  size_t len;
  /* Out-of-range ids. */
  CHECK_STATUS(er__tok_piece(t, -1, true, buf, sizeof buf, &len), ER_STATUS_OUT_OF_RANGE);
  CHECK_MSG("token id -1");
  CHECK_STATUS(er__tok_piece(t, (int32_t)v.n, true, buf, sizeof buf, &len), ER_STATUS_OUT_OF_RANGE);
  const int32_t bad_ids[] = {T_HELLO, 1 << 30};
  CHECK_STATUS(er__tok_decode(t, bad_ids, 2, true, buf, sizeof buf, &len), ER_STATUS_OUT_OF_RANGE);
  CHECK_MSG("id 1 of 2");
  /* Pieces: the byte mapping undone; control tokens only with special. */
  CHECK_STATUS(er__tok_piece(t, T_GW, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 2 && memcmp(buf, " w", 2) == 0);
  CHECK_STATUS(er__tok_piece(t, T_IM_START, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 0);
  CHECK_STATUS(er__tok_piece(t, T_IM_START, true, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 12 && memcmp(buf, "<|im_start|>", 12) == 0);
  CHECK_STATUS(er__tok_piece(t, T_TOOL, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 6);
  /* A piece may be part of a character: the raw byte. */
  CHECK_STATUS(er__tok_piece(t, 0xE6, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 1 && (uint8_t)buf[0] == 0xE6);
  CHECK_STATUS(er__tok_piece(t, T_HELLO, false, buf, 2, &len), ER_STATUS_LIMIT);
  CHECK(len == 5 && memcmp(buf, "he", 2) == 0);
  /* Decode: specials skipped unless asked; bytes joined across tokens;
   * what is not UTF-8 becomes U+FFFD, as Hugging Face's decode. */
  const int32_t seq[] = {T_IM_START, T_HELLO, T_GW, 0xE6, 0x97, 0xA5, T_IM_END};
  CHECK_STATUS(er__tok_decode(t, seq, 7, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 10 && memcmp(buf, "hello w\xE6\x97\xA5", 10) == 0);
  CHECK_STATUS(er__tok_decode(t, seq, 7, true, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 32 && memcmp(buf, "<|im_start|>hello", 17) == 0);
  const int32_t cut[] = {T_HELLO, 0xE6, 0x97, 'x'};
  CHECK_STATUS(er__tok_decode(t, cut, 4, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 9 && memcmp(buf, "hello\xEF\xBF\xBDx", 9) == 0);
  CHECK_STATUS(er__tok_decode(t, seq, 7, false, NULL, 0, &len), ER_STATUS_LIMIT);
  CHECK(len == 10);
  CHECK_STATUS(er__tok_decode(t, NULL, 0, false, NULL, 0, &len), ER_STATUS_OK);
  CHECK(len == 0);
  er__tok_free(t);
}

static void test_bpe_round_trip(void) {
  vocab v;
  test_vocab(&v);
  er_tok_config c = bpe_config(&v);
  er_tokenizer *t = make(&c);
  if (!t) return;
  const char *texts[] = {
      "hello world", "  two  spaces  ", "tabs\tand\nnewlines\r\n", "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 emoji",
      "中文 日本語 한국어", "digits 12345 and 'contractions' don't", "<|im_start|>x<|im_end|>", "",
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(texts); i++) {
    size_t len = strlen(texts[i]), n = 0, dl = 0;
    int32_t ids[256];
    char out[256];
    CHECK_STATUS(er__tok_encode(t, texts[i], len, false, true, ids, 256, &n), ER_STATUS_OK);
    CHECK_STATUS(er__tok_decode(t, ids, n, true, out, sizeof out, &dl), ER_STATUS_OK);
    CHECK(dl == len && memcmp(out, texts[i], len) == 0);
  }
  er__tok_free(t);
}

/* ======================================================================== */
/* SentencePiece                                                             */
/* ======================================================================== */

enum { S_UNK = 0, S_BOS, S_EOS, S_BYTE0 = 3, S_SP = 259, S_H, S_E, S_L, S_O, S_SPH, S_SPHE, S_LL, S_SPHELL, S_SPHELLO };

static void spm_vocab(vocab *v) {
  memset(v, 0, sizeof *v);
  add_tok(v, "<unk>", ER_TOK_TYPE_UNKNOWN);
  add_tok(v, "<s>", ER_TOK_TYPE_CONTROL);
  add_tok(v, "</s>", ER_TOK_TYPE_CONTROL);
  for (unsigned b = 0; b < 256; b++) {
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    add_tok(v, buf, ER_TOK_TYPE_BYTE);
  }
  const char *normal[] = {"\xE2\x96\x81", "h", "e", "l", "o", "\xE2\x96\x81h", "\xE2\x96\x81he", "ll",
                          "\xE2\x96\x81hell", "\xE2\x96\x81hello"};
  for (size_t i = 0; i < ER_ARRAY_LEN(normal); i++) add_tok(v, normal[i], ER_TOK_TYPE_NORMAL);
  for (size_t i = 0; i < v->n; i++) v->scores[i] = i < S_SP ? 0.0f : -(float)(i - S_SP);
  /* "ll" scores above "▁he" so it merges first: ▁ h e l l o -> ▁h e ll o
   * -> ▁he ll o -> ▁hell o -> ▁hello. */
  v->scores[S_LL] = 0.5f;
}

static er_tok_config spm_config(vocab *v) {
  er_tok_config c;
  memset(&c, 0, sizeof c);
  c.kind = ER_TOK_SPM;
  c.n_tokens = v->n;
  c.tokens = v->toks;
  c.types = v->types;
  c.scores = v->scores;
  c.bos = S_BOS, c.eos = S_EOS, c.unk = S_UNK, c.pad = -1, c.eot = -1;
  c.add_bos = true;
  c.add_space_prefix = true;
  return c;
}

static void test_spm(void) {
  vocab v;
  spm_vocab(&v);
  er_tok_config c = spm_config(&v);
  er_tokenizer *t = make(&c);
  CHECK(t != NULL);
  if (!t) return;
  int32_t ids[64];
  int n = enc(t, "hello", true, true, ids);
  CHECK(ids_are(ids, n, IDS(S_BOS, S_SPHELLO)));
  /* The prefix is added even before a space (Llama 2's normalizer). */
  n = enc(t, " hello", false, true, ids);
  CHECK(ids_are(ids, n, IDS(S_SP, S_SPHELLO)));
  /* A code point the vocabulary lacks: its UTF-8 bytes. */
  n = enc(t, "h\xE4\xBD\xA0", false, true, ids);
  CHECK(ids_are(ids, n, IDS(S_SPH, S_BYTE0 + 0xE4, S_BYTE0 + 0xBD, S_BYTE0 + 0xA0)));
  /* Each segment after an added token gets its prefix. */
  n = enc(t, "hello</s>hello", false, true, ids);
  CHECK(ids_are(ids, n, IDS(S_SPHELLO, S_EOS, S_SPHELLO)));
  n = enc(t, "<unk>", false, true, ids);
  CHECK(ids_are(ids, n, IDS(S_UNK)));

  char buf[64];
  size_t len;
  CHECK_STATUS(er__tok_piece(t, S_SPHELLO, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 6 && memcmp(buf, " hello", 6) == 0);
  CHECK_STATUS(er__tok_piece(t, S_BYTE0 + 0x41, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 1 && buf[0] == 'A');
  CHECK_STATUS(er__tok_piece(t, S_UNK, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 0);
  /* Decode strips the prefix space; byte runs join; a broken run is one
   * U+FFFD per byte token. */
  const int32_t seq[] = {S_BOS, S_SPHELLO, S_BYTE0 + 0xE4, S_BYTE0 + 0xBD, S_BYTE0 + 0xA0, S_SPH};
  CHECK_STATUS(er__tok_decode(t, seq, 6, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 10 && memcmp(buf, "hello\xE4\xBD\xA0 h", 10) == 0);
  CHECK_STATUS(er__tok_decode(t, seq, 6, true, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 14 && memcmp(buf, "<s> hello", 9) == 0);
  const int32_t broken[] = {S_SPH, S_BYTE0 + 0xE4, S_BYTE0 + 0xBD, S_SPH};
  CHECK_STATUS(er__tok_decode(t, broken, 4, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 9 && memcmp(buf, "h\xEF\xBF\xBD\xEF\xBF\xBD h", 9) == 0);
  const char *texts[] = {"hello  world", " leading", "tab\there\nnew", "\xF0\x9F\xA6\x99 llama", ""};
  for (size_t i = 0; i < ER_ARRAY_LEN(texts); i++) {
    size_t l = strlen(texts[i]), nn = 0, dl = 0;
    int32_t many[256];
    char out[256];
    CHECK_STATUS(er__tok_encode(t, texts[i], l, false, true, many, 256, &nn), ER_STATUS_OK);
    CHECK_STATUS(er__tok_decode(t, many, nn, false, out, sizeof out, &dl), ER_STATUS_OK);
    CHECK(dl == l && memcmp(out, texts[i], l) == 0);
  }
  er__tok_free(t);

  /* Without byte tokens an unknown code point is <unk>, runs fused. */
  vocab w;
  memset(&w, 0, sizeof w);
  add_tok(&w, "<unk>", ER_TOK_TYPE_UNKNOWN);
  add_tok(&w, "\xE2\x96\x81", 1);
  add_tok(&w, "a", 1);
  c = spm_config(&w);
  c.bos = c.eos = -1;
  c.add_bos = false;
  t = make(&c);
  n = enc(t, "a\xE4\xBD\xA0\xE5\xA5\xBD" "a", false, true, ids);
  CHECK(ids_are(ids, n, IDS(1, 2, 0, 2)));
  er__tok_free(t);
}

/* ======================================================================== */
/* Unicode table and pattern matcher                                         */
/* ======================================================================== */

static void test_unicode(void) {
  CHECK(strcmp(er__ucd_version, "16.0.0") == 0);
  CHECK(er__ucd_category('A') == ER_UCD_LU);
  CHECK(er__ucd_category('z') == ER_UCD_LL);
  CHECK(er__ucd_category('7') == ER_UCD_ND);
  CHECK(er__ucd_category(' ') == ER_UCD_ZS);
  CHECK(er__ucd_category('\n') == ER_UCD_CC);
  CHECK(er__ucd_category(0x4E00) == ER_UCD_LO);
  CHECK(er__ucd_category(0x0301) == ER_UCD_MN);
  CHECK(er__ucd_category(0x1F600) == ER_UCD_SO);
  CHECK(er__ucd_category(0x10D50) == ER_UCD_LU); /* Garay, new in 16.0 */
  CHECK(er__ucd_category(0x10940) == ER_UCD_CN); /* Sidetic, new in 17.0 */
  CHECK(er__ucd_category(0x10FFFF) == ER_UCD_CN);
  CHECK(er__ucd_category(0x110000) == ER_UCD_CN);
  CHECK(er__ucd_is_space(0x3000, er__ucd_category(0x3000)));
  CHECK(er__ucd_is_space(0x85, er__ucd_category(0x85)));
  CHECK(!er__ucd_is_space(0x200B, er__ucd_category(0x200B)));
  uint32_t cp;
  CHECK(er__utf8_decode((const uint8_t *)"\xF4\x8F\xBF\xBF", 4, &cp) == 4 && cp == 0x10FFFF);
  CHECK(er__utf8_decode((const uint8_t *)"\xF4\x90\x80\x80", 4, &cp) == 0);
  CHECK(er__utf8_maximal_subpart((const uint8_t *)"\xE6\x97x", 3) == 2);
  CHECK(er__utf8_maximal_subpart((const uint8_t *)"\xE0\x80", 2) == 1);
}

/* The first match of `pat` in `s` at or after `from`, as code point
 * offsets; -1, -1 when none; -2 on error. */
static void search(const char *pat, const char *s, size_t from, long *a, long *b) {
  *a = *b = -2;
  er_regex *re = NULL;
  if (er__regex_compile(pat, strlen(pat), &re) != ER_STATUS_OK) return;
  uint32_t cps[128];
  uint8_t cats[128];
  size_t n = 0;
  for (size_t i = 0; s[i] && n < 128;) {
    i += er__utf8_decode((const uint8_t *)s + i, strlen(s + i), &cps[n]);
    cats[n] = (uint8_t)er__ucd_category(cps[n]);
    n++;
  }
  er_regex_scratch scratch = {0};
  bool found;
  size_t x, y;
  if (er__regex_search(re, cps, cats, n, from, &scratch, &found, &x, &y) == ER_STATUS_OK) {
    *a = found ? (long)x : -1;
    *b = found ? (long)y : -1;
  }
  er__regex_scratch_free(&scratch);
  er__regex_free(re);
}

static void test_regex(void) {
  long a, b;
  search("\\s+(?!\\S)|\\s+", "a   b", 1, &a, &b);
  CHECK(a == 1 && b == 3);
  search("\\s+(?!\\S)|\\s+", "a   ", 1, &a, &b);
  CHECK(a == 1 && b == 4);
  search("(?i:'s|'ll)", "x'S", 0, &a, &b);
  CHECK(a == 1 && b == 3);
  search("(?i:'s|'ll)", "x'\xC5\xBF", 0, &a, &b); /* U+017F folds to s */
  CHECK(a == 1 && b == 3);
  search("(?i:'s|'ll)", "x'Ll", 0, &a, &b);
  CHECK(a == 1 && b == 4);
  search("'s", "x'S", 0, &a, &b);
  CHECK(a == -1);
  search("\\p{N}{1,3}", "ab12345", 0, &a, &b);
  CHECK(a == 2 && b == 5);
  search("a+?", "aaa", 0, &a, &b);
  CHECK(a == 0 && b == 1);
  search("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", " \xE4\xBD\xA0\xE5\xA5\xBD!", 0, &a, &b);
  CHECK(a == 0 && b == 3);
  search("\\s+$", "ab  \ncd", 0, &a, &b); /* $ before a newline (Ruby syntax) */
  CHECK(a == 2 && b == 4);
  search("[\\u4E00-\\u9FA5]+", "x\xE4\xB8\x80\xE4\xB8\x81y", 0, &a, &b);
  CHECK(a == 1 && b == 3);
  search("\\x{41}\\.\\u0042", "xA.B", 0, &a, &b);
  CHECK(a == 1 && b == 4);
  search("[\\P{L}]+", "ab12cd", 0, &a, &b);
  CHECK(a == 2 && b == 4);

  /* What the matcher does not implement is UNSUPPORTED naming it. */
  const char *unsupported[] = {"(abc", "abc)", "(?<=a)b", "(?P<n>a)", "\\p{Greek}", "[z-a]", "[[a]]",
                               "(a*)*", "a++", "a{100001}", "\\q", "[a&&b]", "*a"};
  for (size_t i = 0; i < ER_ARRAY_LEN(unsupported); i++) {
    er_regex *re = NULL;
    er_status st = er__regex_compile(unsupported[i], strlen(unsupported[i]), &re);
    CHECK(st == ER_STATUS_UNSUPPORTED);
    if (st != ER_STATUS_UNSUPPORTED) fprintf(stderr, "  pattern %s gave %s\n", unsupported[i], er_status_name(st));
    CHECK(re == NULL);
    er__regex_free(re);
  }
  er_regex *re = NULL;
  CHECK_STATUS(er__regex_compile("(?:a{1000}){1000}", 17, &re), ER_STATUS_LIMIT);
  CHECK_MSG("ER_REGEX_MAX_PROGRAM");
  CHECK_STATUS(er__regex_compile("a\xFF", 2, &re), ER_STATUS_INVALID_ARGUMENT);
  /* Exponential backtracking stops at the step budget. */
  CHECK_STATUS(er__regex_compile("(?:a|a)*b", 9, &re), ER_STATUS_OK);
  uint32_t cps[40];
  uint8_t cats[40];
  for (int i = 0; i < 40; i++) cps[i] = 'a', cats[i] = ER_UCD_LL;
  er_regex_scratch scratch = {0};
  bool found;
  size_t x, y;
  CHECK_STATUS(er__regex_search(re, cps, cats, 40, 0, &scratch, &found, &x, &y), ER_STATUS_LIMIT);
  CHECK_MSG("ER_REGEX_STEPS_PER_CHAR");
  er__regex_scratch_free(&scratch);
  er__regex_free(re);
  /* Every named pre-tokenizer compiles. */
  const char *names[] = {"default", "gpt2", "llama3", "llama-bpe", "smollm", "qwen2", "qwen35", "deepseek-llm",
                         "deepseek-coder", "starcoder", "dbrx", "falcon", "gpt-4o", "tekken", NULL};
  for (size_t i = 0; i < ER_ARRAY_LEN(names); i++) {
    const er_tok_pre_def *d = er__tok_pre_find(names[i]);
    CHECK(d != NULL);
    for (size_t k = 0; d && k < d->n_patterns; k++) {
      CHECK_STATUS(er__regex_compile(d->patterns[k], strlen(d->patterns[k]), &re), ER_STATUS_OK);
      er__regex_free(re);
    }
  }
  CHECK(er__tok_pre_find("pre-of-the-future") == NULL);
  const char *chain[] = {"\\p{N}", er__tok_pattern_gpt2};
  CHECK(er__tok_pre_name_for(chain, 2, 0, false) && strcmp(er__tok_pre_name_for(chain, 2, 0, false), "smollm") == 0);
  CHECK(er__tok_pre_name_for(chain, 2, 0, true) == NULL);
  CHECK(er__tok_pre_name_for(chain, 2, 1, false) == NULL);
}

/* ======================================================================== */
/* GGUF                                                                      */
/* ======================================================================== */

/* A GGUF v3 file with only metadata, written key by key. */
typedef struct gw {
  uint8_t *buf;
  size_t len, cap;
  uint64_t n_kv;
} gw;

static void gw_put(gw *w, const void *p, size_t n) {
  if (w->len + n > w->cap) {
    w->cap = (w->len + n) * 2 + 256;
    w->buf = realloc(w->buf, w->cap);
  }
  memcpy(w->buf + w->len, p, n);
  w->len += n;
}
static void gw_u32(gw *w, uint32_t v) { gw_put(w, &v, 4); }
static void gw_u64(gw *w, uint64_t v) { gw_put(w, &v, 8); }
static void gw_str(gw *w, const char *s) {
  gw_u64(w, strlen(s));
  gw_put(w, s, strlen(s));
}
static void gw_key(gw *w, const char *k, uint32_t type) {
  gw_str(w, k);
  gw_u32(w, type);
  w->n_kv++;
}
static void gw_kv_str(gw *w, const char *k, const char *v) {
  gw_key(w, k, ER_GGUF_STRING);
  gw_str(w, v);
}
static void gw_kv_u32(gw *w, const char *k, uint32_t v) {
  gw_key(w, k, ER_GGUF_UINT32);
  gw_u32(w, v);
}
static void gw_kv_strs(gw *w, const char *k, const char *const *v, size_t n) {
  gw_key(w, k, ER_GGUF_ARRAY);
  gw_u32(w, ER_GGUF_STRING);
  gw_u64(w, n);
  for (size_t i = 0; i < n; i++) gw_str(w, v[i]);
}
static void gw_kv_i32s(gw *w, const char *k, const int32_t *v, size_t n) {
  gw_key(w, k, ER_GGUF_ARRAY);
  gw_u32(w, ER_GGUF_INT32);
  gw_u64(w, n);
  gw_put(w, v, 4 * n);
}
/* The finished file: header + pairs. */
static uint8_t *gw_finish(gw *w, size_t *len) {
  gw out = {0};
  gw_put(&out, "GGUF", 4);
  gw_u32(&out, 3);
  gw_u64(&out, 0);
  gw_u64(&out, w->n_kv);
  gw_put(&out, w->buf, w->len);
  free(w->buf);
  *len = out.len;
  return out.buf;
}

/* A tiny byte-level vocabulary as GGUF, with one thing changed. */
typedef enum gguf_fault {
  GF_NONE, GF_NO_MODEL, GF_MODEL_BERT, GF_PRE_UNKNOWN, GF_TOKENS_NOT_STRINGS, GF_TYPES_SHORT, GF_TYPE_BAD,
  GF_BOS_RANGE, GF_DUP_TOKEN, GF_MERGE_UNKNOWN, GF_BAD_UTF8,
} gguf_fault;

static er_status load_fault(gguf_fault f, er_tokenizer **t) {
  gw w = {0};
  static char bytes[256][4];
  const char *tok[260];
  for (unsigned b = 0; b < 256; b++) {
    memset(bytes[b], 0, 4);
    er__utf8_encode(stand_in(b), bytes[b]);
    tok[b] = bytes[b];
  }
  tok[256] = f == GF_DUP_TOKEN ? "a" : "he";
  tok[257] = "<|im_end|>";
  tok[258] = f == GF_BAD_UTF8 ? "x\xC3" : "ll";
  int32_t types[259];
  for (int i = 0; i < 259; i++) types[i] = 1;
  types[257] = f == GF_TYPE_BAD ? 42 : 3;
  const char *merges[] = {f == GF_MERGE_UNKNOWN ? "h zz" : "h e"};
  if (f != GF_NO_MODEL) gw_kv_str(&w, "tokenizer.ggml.model", f == GF_MODEL_BERT ? "bert" : "gpt2");
  gw_kv_str(&w, "tokenizer.ggml.pre", f == GF_PRE_UNKNOWN ? "pre-of-the-future" : "smollm");
  if (f == GF_TOKENS_NOT_STRINGS)
    gw_kv_i32s(&w, "tokenizer.ggml.tokens", types, 259);
  else
    gw_kv_strs(&w, "tokenizer.ggml.tokens", tok, 259);
  gw_kv_i32s(&w, "tokenizer.ggml.token_type", types, f == GF_TYPES_SHORT ? 200 : 259);
  gw_kv_strs(&w, "tokenizer.ggml.merges", merges, 1);
  gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 257);
  gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", f == GF_BOS_RANGE ? 5000 : 257);
  size_t len;
  uint8_t *file = gw_finish(&w, &len);
  er_gguf *g = NULL;
  er_status st = er__gguf_open_buffer(file, len, "test.gguf", &g);
  if (st == ER_STATUS_OK) st = er__tok_create_gguf(g, t);
  er__gguf_close(g);
  free(file);
  return st;
}

static void test_gguf(void) {
  er_tokenizer *t = NULL;
  CHECK_STATUS(load_fault(GF_NONE, &t), ER_STATUS_OK);
  if (t) {
    int32_t ids[64];
    int n = enc(t, "hello<|im_end|>", false, true, ids);
    CHECK(ids_are(ids, n, IDS(256, 'l', 'l', 'o', 257)));
    CHECK(er__tok_eos(t) == 257 && er__tok_eot(t) == 257 && er__tok_is_eog(t, 257));
    er__tok_free(t);
    t = NULL;
  }
  struct {
    gguf_fault f;
    er_status st;
    const char *msg;
  } cases[] = {
      {GF_NO_MODEL, ER_STATUS_INVALID_MODEL, "tokenizer.ggml.model' is missing"},
      {GF_MODEL_BERT, ER_STATUS_UNSUPPORTED, "'bert'"},
      {GF_PRE_UNKNOWN, ER_STATUS_UNSUPPORTED, "pre-of-the-future"},
      {GF_TOKENS_NOT_STRINGS, ER_STATUS_TYPE_MISMATCH, "tokenizer.ggml.tokens"},
      {GF_TYPES_SHORT, ER_STATUS_INVALID_MODEL, "has 200 entries for 259 tokens"},
      {GF_TYPE_BAD, ER_STATUS_INVALID_MODEL, "token 257"},
      {GF_BOS_RANGE, ER_STATUS_INVALID_MODEL, "bos id 5000"},
      {GF_DUP_TOKEN, ER_STATUS_INVALID_MODEL, "repeats the text"},
      {GF_MERGE_UNKNOWN, ER_STATUS_INVALID_MODEL, "not in the vocabulary"},
      {GF_BAD_UTF8, ER_STATUS_INVALID_MODEL, "not valid UTF-8"},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    CHECK_STATUS(load_fault(cases[i].f, &t), cases[i].st);
    CHECK_MSG(cases[i].msg);
    CHECK(t == NULL);
  }
  CHECK_STATUS(er__tok_create_gguf(NULL, &t), ER_STATUS_INVALID_ARGUMENT);
}

/* SmolLM2's own vocabulary, ids from Hugging Face. */
static void test_smollm2(void) {
  er_gguf *g = NULL;
  if (er__gguf_open(ER_SMOLLM2_GGUF, 0, &g) != ER_STATUS_OK) {
    CHECK_MSG("(SmolLM2 GGUF missing: run scripts/setup.sh)");
    return;
  }
  er_tokenizer *t = NULL;
  CHECK_STATUS(er__tok_create_gguf(g, &t), ER_STATUS_OK);
  er__gguf_close(g);
  if (!t) return;
  CHECK(er__tok_vocab_size(t) == 49152);
  int32_t ids[64];
  int n = enc(t, "Hello, world!", false, true, ids);
  CHECK(ids_are(ids, n, IDS(19556, 28, 905, 17)));
  n = enc(t, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n", false, true, ids);
  CHECK(ids_are(ids, n, IDS(1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198)));
  n = enc(t, "I'm 42 years old \xF0\x9F\xA6\x99", false, true, ids);
  CHECK(ids_are(ids, n, IDS(57, 5248, 216, 36, 34, 929, 1573, 15107, 116, 243)));
  CHECK(er__tok_is_eog(t, 2));  /* <|im_end|> */
  CHECK(er__tok_eot(t) == 2);
  CHECK(!er__tok_is_eog(t, 1));
  /* 100 KB of prose: the full count, the same as the paragraph's times
   * the repeats (each ends in a newline, which is a piece of its own). */
  static char text[102400 + 64];
  const char *para = "The quick brown fox jumps over the lazy dog; it wasn't the first time, nor the last.\n";
  size_t pl = strlen(para), len = 0;
  while (len + pl < 102400) memcpy(text + len, para, pl), len += pl;
  size_t nn = 0;
  CHECK_STATUS(er__tok_encode(t, text, len, false, true, NULL, 0, &nn), ER_STATUS_LIMIT);
  CHECK(nn > 10000 && nn < 40000);
  size_t one = 0;
  CHECK_STATUS(er__tok_encode(t, para, pl, false, true, NULL, 0, &one), ER_STATUS_LIMIT);
  CHECK(nn == one * (len / pl));
  er__tok_free(t);
}

static void test_llama_spm_vocab(void) {
  er_gguf *g = NULL;
  if (er__gguf_open(ER_VOCAB_DIR "/ggml-vocab-llama-spm.gguf", 0, &g) != ER_STATUS_OK) {
    CHECK_MSG("(llama.cpp vocabularies missing: run scripts/setup.sh)");
    return;
  }
  er_tokenizer *t = NULL;
  CHECK_STATUS(er__tok_create_gguf(g, &t), ER_STATUS_OK);
  er__gguf_close(g);
  if (!t) return;
  int32_t ids[64];
  int n = enc(t, "Hello, world!", true, true, ids);
  CHECK(ids_are(ids, n, IDS(1, 15043, 29892, 3186, 29991)));
  n = enc(t, " Hello", false, true, ids);
  CHECK(ids_are(ids, n, IDS(29871, 15043)));
  n = enc(t, "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA6\x99", false, true, ids);
  CHECK(ids_are(ids, n, IDS(29871, 30919, 31076, 29871, 243, 162, 169, 156)));
  char buf[64];
  size_t len;
  CHECK_STATUS(er__tok_decode(t, ids, (size_t)n, false, buf, sizeof buf, &len), ER_STATUS_OK);
  CHECK(len == 11 && memcmp(buf, "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA6\x99", 11) == 0);
  er__tok_free(t);
}

/* ======================================================================== */
/* tokenizer.json                                                            */
/* ======================================================================== */

static char json_dir[64];

static void write_file(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", json_dir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static er_status load_json(const char *text, er_tokenizer **t) {
  write_file("tokenizer.json", text);
  char path[128];
  snprintf(path, sizeof path, "%s/tokenizer.json", json_dir);
  return er__tok_create_hf_json(path, t);
}

/* A byte-level tokenizer.json: the printable ASCII stand-ins only, plus
 * "he" and an added token; `extra` replaces the marker. */
static char *json_text(const char *pre, const char *model_extra, const char *added) {
  static char buf[16384];
  char vtext[8192];
  size_t n = 0;
  int id = 0;
  n += (size_t)snprintf(vtext + n, sizeof vtext - n, "{");
  for (int c = 0x21; c <= 0x7E; c++) {
    if (c == '"' || c == '\\')
      n += (size_t)snprintf(vtext + n, sizeof vtext - n, "\"\\%c\": %d, ", c, id++);
    else
      n += (size_t)snprintf(vtext + n, sizeof vtext - n, "\"%c\": %d, ", c, id++);
  }
  n += (size_t)snprintf(vtext + n, sizeof vtext - n, "\"\xC4\xA0\": %d, \"he\": %d}", id, id + 1);
  snprintf(buf, sizeof buf,
           "{\"version\": \"1.0\", \"added_tokens\": [%s], \"normalizer\": null, \"pre_tokenizer\": %s,"
           " \"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\"},"
           " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, %s \"vocab\": %s,"
           " \"merges\": [\"h e\"]}}",
           added, pre, model_extra, vtext);
  return buf;
}

#define PRE_BL "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}"
#define ADDED_EOT "{\"id\": 96, \"content\": \"<|im_end|>\", \"special\": true}"

static void test_json(void) {
  snprintf(json_dir, sizeof json_dir, "/tmp/er-tok-json-XXXXXX");
  if (!mkdtemp(json_dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  er_tokenizer *t = NULL;
  CHECK_STATUS(load_json(json_text(PRE_BL, "", ADDED_EOT), &t), ER_STATUS_OK);
  if (t) {
    int32_t ids[64];
    int n = enc(t, "he said<|im_end|>", true, true, ids);
    /* 'h'=0x68-0x21, ' ' is U+0120 = id 94, "he" = 95, the added = 96. */
    CHECK(n == 7 && ids[0] == 95 && ids[1] == 94 && ids[6] == 96);
    CHECK(er__tok_eot(t) == 96 && er__tok_is_control(t, 96));
    er__tok_free(t);
    t = NULL;
  }
  /* tokenizer_config.json beside it: BOS and add_bos_token. */
  write_file("tokenizer_config.json", "{\"bos_token\": {\"content\": \"<|im_end|>\"}, \"add_bos_token\": true}");
  CHECK_STATUS(load_json(json_text(PRE_BL, "", ADDED_EOT), &t), ER_STATUS_OK);
  if (t) {
    int32_t ids[64];
    int n = enc(t, "he", true, true, ids);
    CHECK(ids_are(ids, n, IDS(96, 95)));
    er__tok_free(t);
    t = NULL;
  }
  write_file("tokenizer_config.json", "{not json");
  CHECK_STATUS(load_json(json_text(PRE_BL, "", ADDED_EOT), &t), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("tokenizer_config.json: line 1");
  char cfgp[128];
  snprintf(cfgp, sizeof cfgp, "%s/tokenizer_config.json", json_dir);
  unlink(cfgp);

  struct {
    const char *text;
    er_status st;
    const char *msg;
  } cases[] = {
      {"[1, 2", ER_STATUS_INVALID_MODEL, "line 1"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", ER_STATUS_UNSUPPORTED, "Unigram"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 2}, \"merges\": []}, \"pre_tokenizer\": " PRE_BL "}",
       ER_STATUS_INVALID_MODEL, "id 1 has no token"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}, \"pre_tokenizer\": " PRE_BL "}",
       ER_STATUS_INVALID_MODEL, "share id 0"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"a\": 1}}}", ER_STATUS_INVALID_MODEL, "duplicate"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}}}", ER_STATUS_INVALID_MODEL, "not an id"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}, \"pre_tokenizer\": " PRE_BL
       "}",
       ER_STATUS_INVALID_MODEL, "not in the vocabulary"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": 0, \"content\": \"b\"}], "
       "\"pre_tokenizer\": " PRE_BL "}",
       ER_STATUS_INVALID_MODEL, "the vocabulary gives 'a'"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}",
       ER_STATUS_UNSUPPORTED, "Whitespace"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
       "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"x+\"}, \"behavior\": \"Isolated\"}, "
       "{\"type\": \"ByteLevel\", \"use_regex\": false}]}}",
       ER_STATUS_UNSUPPORTED, "none of edgerun's named pre-tokenizers"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"continuing_subword_prefix\": \"##\"}}",
       ER_STATUS_UNSUPPORTED, "continuing_subword_prefix"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}", ER_STATUS_UNSUPPORTED,
       "neither a ByteLevel pre-tokenizer nor"},
      {"{\"model\": 3}", ER_STATUS_INVALID_MODEL, "'model'"},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    CHECK_STATUS(load_json(cases[i].text, &t), cases[i].st);
    CHECK_MSG(cases[i].msg);
    CHECK(t == NULL);
  }
  CHECK_STATUS(er__tok_create_hf_json("/nonexistent/tokenizer.json", &t), ER_STATUS_IO);
  char path[128];
  snprintf(path, sizeof path, "%s/tokenizer.json", json_dir);
  unlink(path);
  rmdir(json_dir);
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"create_args", test_create_args},
      {"caps_before_allocation", test_caps_before_allocation},
      {"bad_vocabulary", test_bad_vocabulary},
      {"bad_merges", test_bad_merges},
      {"bpe_merges", test_bpe_merges},
      {"bpe_specials", test_bpe_specials},
      {"encode_buffers", test_encode_buffers},
      {"decode_rules", test_decode_rules},
      {"bpe_round_trip", test_bpe_round_trip},
      {"spm", test_spm},
      {"unicode", test_unicode},
      {"regex", test_regex},
      {"gguf", test_gguf},
      {"smollm2", test_smollm2},
      {"llama_spm_vocab", test_llama_spm_vocab},
      {"json", test_json},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
