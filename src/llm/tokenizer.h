/* tokenizer.h - text to token ids and back, in C, equal to Hugging Face
 * `tokenizers` on the models edgerun runs.
 *
 * Two families:
 *  - byte-level BPE (GPT-2, Qwen2, SmolLM2, Llama 3, ...): the text is split
 *    by the family's pre-tokenizer regex, each piece's bytes are mapped to
 *    printable code points (GPT-2's bytes_to_unicode) and merged by rank;
 *  - SentencePiece (Llama 2, Gemma, ...): spaces become U+2581, an optional
 *    prefix space, BPE by score or unigram (Viterbi over scores), with byte
 *    fallback tokens <0xNN> for what the vocabulary lacks.
 * Special and added tokens (control/user-defined types) are matched in the
 * text first when parse_special is set, and never split.
 *
 * A tokenizer is built once from a vocabulary description (er_tok_config,
 * filled by the GGUF loader from tokenizer.ggml.* or by the tokenizer.json
 * reader) and is then read-only: encode and decode may run from many
 * threads at once. */
#ifndef ER_LLM_TOKENIZER_H
#define ER_LLM_TOKENIZER_H

#include "core/core.h"

#define ER_TOK_MAX_VOCAB 1048576      /* tokens in one vocabulary */
#define ER_TOK_MAX_TOKEN_BYTES 4096   /* bytes of one token's text */
#define ER_TOK_MAX_MERGES 2097152     /* BPE merge rules */

typedef enum er_tok_kind {
  ER_TOK_BPE = 0,                     /* byte-level BPE ("gpt2" in GGUF) */
  ER_TOK_SPM,                         /* SentencePiece BPE ("llama") */
  ER_TOK_UNIGRAM,                     /* SentencePiece unigram ("t5") */
} er_tok_kind;

/* Token types as GGUF numbers them (tokenizer.ggml.token_type). */
typedef enum er_tok_type {
  ER_TOK_TYPE_UNDEFINED = 0,
  ER_TOK_TYPE_NORMAL = 1,
  ER_TOK_TYPE_UNKNOWN = 2,
  ER_TOK_TYPE_CONTROL = 3,
  ER_TOK_TYPE_USER_DEFINED = 4,
  ER_TOK_TYPE_UNUSED = 5,
  ER_TOK_TYPE_BYTE = 6,
} er_tok_type;

/* A byte string that need not be NUL-terminated (GGUF strings are not). */
typedef struct er_tok_str {
  const char *p;
  size_t len;
} er_tok_str;

/* What a tokenizer is built from. Every array is borrowed for the create
 * call only (the tokenizer copies what it keeps). */
typedef struct er_tok_config {
  er_tok_kind kind;
  /* The pre-tokenizer, by llama.cpp's tokenizer.ggml.pre name: "default" /
   * "gpt2" (GPT-2's regex), "llama3" / "llama-bpe" / "smollm" and "qwen2"
   * (their regexes), ...; NULL = "default". An unknown name is UNSUPPORTED
   * naming it. Ignored by the SentencePiece kinds. */
  const char *pre;
  size_t n_tokens;
  const er_tok_str *tokens;           /* [n_tokens] token texts */
  const float *scores;                /* [n_tokens] or NULL (BPE: unused) */
  const int32_t *types;               /* [n_tokens] er_tok_type or NULL (all normal) */
  size_t n_merges;
  const er_tok_str *merges;           /* [n_merges] "left right", rank order (BPE) */
  int32_t bos, eos, unk, pad;         /* -1 when the model has none */
  int32_t eot;                        /* end of turn (<|im_end|>, <|eot_id|>), -1 = none */
  bool add_bos, add_eos;              /* added by encode when add_special */
  bool add_space_prefix;              /* SentencePiece: prepend U+2581 */
  bool nfc;                           /* text segments in Unicode NFC first (tokenizer.json's NFC normalizer) */
} er_tok_config;

typedef struct er_tokenizer er_tokenizer;

/* Builds the tokenizer; errors name the problem: a duplicate token text, a
 * merge naming a token that is not in the vocabulary, a special id out of
 * range, invalid UTF-8 in a token where the kind needs text. The result is
 * owned by the caller (er__tok_free). */
er_status er__tok_create(const er_tok_config *cfg, er_tokenizer **out);
void er__tok_free(er_tokenizer *t);

size_t er__tok_vocab_size(const er_tokenizer *t);
/* The special ids as configured (-1 = none). */
int32_t er__tok_bos(const er_tokenizer *t);
int32_t er__tok_eos(const er_tokenizer *t);
int32_t er__tok_eot(const er_tokenizer *t);
/* Whether generation should stop at `id`: EOS, EOT, or another control
 * token that marks an end (<|endoftext|>, <|im_end|>, <end_of_turn>). */
bool er__tok_is_eog(const er_tokenizer *t, int32_t id);
/* Whether `id` is a control token (rendered only when asked). */
bool er__tok_is_control(const er_tokenizer *t, int32_t id);
/* The token's text as stored in the vocabulary (not decoded), or NULL. */
const char *er__tok_text(const er_tokenizer *t, int32_t id, size_t *len_out);
/* The id of a token whose stored text is exactly s, or -1. */
int32_t er__tok_find(const er_tokenizer *t, const char *s, size_t len);

/* Encodes `len` bytes of `text` (which must be valid UTF-8: else
 * INVALID_ARGUMENT naming the byte offset). add_special: BOS/EOS as the
 * config says; parse_special: special-token texts in the text become those
 * tokens (else they are encoded as plain text). "Special" means CONTROL
 * (and UNKNOWN) tokens: USER_DEFINED tokens are matched either way, as
 * Hugging Face matches its non-special added tokens and llama.cpp its
 * user-defined ones. Writes at most `cap` ids;
 * *n_out is the full count even when it exceeds cap (then LIMIT, so a
 * caller can size a buffer with cap = 0). */
er_status er__tok_encode(const er_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                         int32_t *ids, size_t cap, size_t *n_out);

/* The bytes token `id` stands for (byte-level mapping undone, U+2581 as a
 * space, <0xNN> as that byte); control tokens give their text only when
 * `special` is set, else nothing. A piece may be part of a UTF-8 sequence:
 * callers that stream text join pieces before printing. OUT_OF_RANGE for
 * an id outside the vocabulary. Writes at most cap bytes; *len_out is the
 * full length (LIMIT when it exceeds cap). */
er_status er__tok_piece(const er_tokenizer *t, int32_t id, bool special, char *buf, size_t cap, size_t *len_out);

/* The text of a token sequence, as Hugging Face's decode with
 * skip_special_tokens = !special (SentencePiece: the leading space of the
 * first piece removed when the config adds a space prefix). Same buffer
 * rules as er__tok_piece. */
er_status er__tok_decode(const er_tokenizer *t, const int32_t *ids, size_t n, bool special, char *buf, size_t cap,
                         size_t *len_out);

/* ---- building from model files (tok-gguf.c, tok-json.c) ----------------- */

struct er_gguf;
/* From a GGUF file's tokenizer.ggml.* metadata (model, pre, tokens,
 * scores, token_type, merges, the special ids and add_* flags). A missing
 * or malformed key is an error naming it; a tokenizer.ggml.model or .pre
 * edgerun does not implement is UNSUPPORTED naming it. */
er_status er__tok_create_gguf(const struct er_gguf *g, er_tokenizer **out);
/* From a Hugging Face tokenizer.json (and, when present beside it,
 * tokenizer_config.json for bos/eos and add_bos), the form ONNX decoders
 * ship with. `path` is borrowed. */
er_status er__tok_create_hf_json(const char *path, er_tokenizer **out);

#endif /* ER_LLM_TOKENIZER_H */
