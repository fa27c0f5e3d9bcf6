/* chat-lex.h - the chat-template lexer (chat-lex.c) as the parser
 * (chat-parse.c) uses it: the tokens and the lexer state. */
#ifndef ER_LLM_CHAT_LEX_H
#define ER_LLM_CHAT_LEX_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "llm/chat-impl.h"

typedef enum tkind {
  T_EOF = 0, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END,
  T_NAME, T_STRING, T_INT, T_FLOAT, T_OP,
} tkind;

typedef enum tok_op {
  P_NONE = 0, P_ADD, P_SUB, P_DIV, P_FLOORDIV, P_MUL, P_POW, P_MOD, P_TILDE,
  P_LBRACKET, P_RBRACKET, P_LPAREN, P_RPAREN, P_LBRACE, P_RBRACE,
  P_EQ, P_NE, P_GT, P_GTEQ, P_LT, P_LTEQ, P_ASSIGN, P_DOT, P_COLON, P_PIPE, P_COMMA, P_SEMICOLON,
} tok_op;

static const char *const op_text[] = {
    "", "+", "-", "/", "//", "*", "**", "%", "~", "[", "]", "(", ")", "{", "}",
    "==", "!=", ">", ">=", "<", "<=", "=", ".", ":", "|", ",", ";",
};

typedef struct token {
  uint8_t kind;            /* tkind */
  uint8_t op;              /* tok_op, for T_OP */
  uint32_t line, col;
  const char *s;           /* NAME, DATA: in the source; STRING: decoded, in the arena */
  size_t len;
  int64_t i;
  double f;
} token;

#define LOOKAHEAD 4

typedef struct parser {
  er_chat_template *t;
  const char *src;         /* normalized source, in the arena */
  size_t n;
  /* lexer */
  size_t pos;
  uint32_t line;
  size_t line_start;       /* offset of the current line's first byte */
  int state;               /* 0: text, 1: inside {% %}, 2: inside {{ }} */
  uint32_t tag_line, tag_col;
  bool line_starting;      /* the last match ended with a newline */
  char brackets[ER_CHAT_MAX_DEPTH];
  int n_brackets;
  token q[LOOKAHEAD];
  int qn;
  /* parser */
  er_status st;
  int depth;
  int loop_depth;
  uint32_t nodes;
  void **stk;              /* scratch for lists being built */
  size_t stk_n, stk_cap;
  /* Filters and tests the evaluator does not know. jinja2 rejects them
   * when it compiles the template, except inside an if statement or a
   * conditional expression, where it fails only if they run; `soft` > 0
   * while parsing those. */
  int soft;
  struct unknown_name {
    uint32_t seq;          /* p->nodes when made, to find those inside a conditional later */
    uint32_t line, col;
    bool soft, filter;
    const char *name;
  } *unk;
  size_t n_unk, cap_unk;
} parser;

er_status er__clex_perr(parser *p, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Makes sure q[k] exists (an EOF token once the source, or a lexer error,
 * ends the stream). */
void er__clex_fill(parser *p, int k);

er_status er__clex_unexpected(parser *p, const char *wanted);

static inline er_status plimit(parser *p, uint32_t line, uint32_t col, const char *what, const char *cap, unsigned v) {
  if (p->st) return p->st;
  p->st = er__error(ER_STATUS_LIMIT, "chat template line %u column %u: %s exceeds %s (%u)", line, col, what, cap, v);
  return p->st;
}

static inline token *cur(parser *p) {
  er__clex_fill(p, 0);
  return &p->q[0];
}

static inline token *peek(parser *p, int k) {
  er__clex_fill(p, k);
  return &p->q[k];
}

static inline void next(parser *p) {
  er__clex_fill(p, 0);
  memmove(&p->q[0], &p->q[1], (size_t)(p->qn - 1) * sizeof(token));
  p->qn--;
}

#endif /* ER_LLM_CHAT_LEX_H */
