/* tok-impl.h - the tokenizer's struct, shared by its building and encoding
 * (tokenizer.c) and its decoding (tok-decode.c). Not for other files:
 * tokenizer.h is the interface. */
#ifndef ER_LLM_TOK_IMPL_H
#define ER_LLM_TOK_IMPL_H

#include "llm/tokenizer.h"
#include "llm/unicode.h"

/* Token flags. */
#define TF_EOG 1u        /* generation stops here */
#define TF_SPECIAL 2u    /* control/unknown: matched in text only with parse_special, skipped by decode */
#define TF_ADDED 4u      /* control, unknown or user-defined: matched in text before pre-tokenizing */

typedef struct merge_slot {
  uint64_t key;          /* (left << 32) | right, UINT64_MAX = empty */
  int32_t rank;
  int32_t merged;
} merge_slot;

/* The special-token trie: one node per distinct prefix. Children are a
 * sibling list (specials are few, a few hundred at most in real models);
 * the root's children are a 256-entry table because every byte of the
 * text probes it. */
typedef struct trie_node {
  int32_t child, sibling;  /* node indices, -1 = none */
  int32_t token;           /* the token ending here, -1 = none */
  uint8_t byte;
} trie_node;

struct er_tokenizer {
  er_tok_kind kind;
  size_t n;                      /* tokens */
  er_tok_str *text;              /* [n] the stored texts (in pool) */
  er_tok_str *piece;             /* [n] the bytes each token stands for (in pool) */
  uint8_t *type;                 /* [n] er_tok_type */
  uint8_t *flags;                /* [n] TF_* */
  char *pool;

  int32_t *tab;                  /* [tab_mask + 1] text -> id + 1, 0 = empty */
  size_t tab_mask;

  merge_slot *mtab;              /* [mtab_mask + 1] */
  size_t mtab_mask;
  size_t n_merges;

  int32_t byte_tok[256];         /* BPE: byte b's stand-in token; SPM: <0xNN> (-1 = none) */

  er_regex *pre[ER_TOK_MAX_PRE_STAGES];
  size_t n_pre;
  size_t mapped_stages;          /* the last ones match byte stand-ins */
  bool ignore_merges;

  trie_node *trie;               /* [n_trie] */
  size_t n_trie;
  int32_t trie_root[256];        /* first-byte -> node, -1 = none */

  int32_t bos, eos, unk, pad, eot;
  bool add_bos, add_eos, add_space_prefix, nfc;
};

/* Whether s is a byte token's text "<0xNN>"; its byte in *byte. */
bool er__tok_is_byte_text(er_tok_str s, uint8_t *byte);

#endif /* ER_LLM_TOK_IMPL_H */
