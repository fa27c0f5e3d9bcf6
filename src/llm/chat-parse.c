/* chat-parse.c - the chat-template lexer and parser: Jinja source to the AST
 * of chat-impl.h.
 *
 * The lexer follows jinja2's (lexer.py) rule for rule, with the options
 * transformers sets: trim_blocks (a newline right after a block or comment
 * tag is dropped) and lstrip_blocks (spaces and tabs before a block or
 * comment tag at the start of a line are dropped), `-` inside a delimiter
 * strips all whitespace on that side, `+` turns lstrip/trim off for that
 * tag. Line endings are normalized to \n and one final newline is dropped,
 * as jinja2 does (keep_trailing_newline=False). Inside a tag the end
 * delimiter only counts while brackets are balanced, so {{ {'a': {}} }}
 * lexes as jinja2 lexes it.
 *
 * The parser follows jinja2's (parser.py) precedence: conditional
 * expressions, or, and, not, comparisons (chained, `in`, `not in`),
 * + and -, ~, * / // %, ** (left-associative, as in Jinja), unary - and +,
 * then postfix (attributes, subscripts, slices, calls), filters and tests. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "llm/chat-impl.h"
#include "llm/chat-lex.h"

/* Parser helpers                                                            */
/* ======================================================================== */

static bool is_name(const token *t, const char *name) {
  return t->kind == T_NAME && t->len == strlen(name) && memcmp(t->s, name, t->len) == 0;
}
static bool is_op(const token *t, uint8_t op) { return t->kind == T_OP && t->op == op; }

static const char *describe(const token *t, char *buf, size_t n) {
  switch (t->kind) {
  case T_EOF: return "end of template";
  case T_DATA: return "template text";
  case T_VAR_BEGIN: return "'{{'";
  case T_VAR_END: return "'}}'";
  case T_BLOCK_BEGIN: return "'{%'";
  case T_BLOCK_END: return "'%}'";
  case T_NAME: snprintf(buf, n, "'%.*s'", (int)(t->len > 64 ? 64 : t->len), t->s); return buf;
  case T_STRING: return "string literal";
  case T_INT: case T_FLOAT: return "number";
  default: snprintf(buf, n, "'%s'", op_text[t->op]); return buf;
  }
}

er_status er__clex_unexpected(parser *p, const char *wanted) {
  token *t = cur(p);
  if (p->st) return p->st;
  char buf[96];
  if (wanted) return er__clex_perr(p, t->line, t->col, "expected %s, got %s", wanted, describe(t, buf, sizeof buf));
  return er__clex_perr(p, t->line, t->col, "unexpected %s", describe(t, buf, sizeof buf));
}

static bool expect_op(parser *p, uint8_t op) {
  if (is_op(cur(p), op)) {
    next(p);
    return true;
  }
  char want[16];
  snprintf(want, sizeof want, "'%s'", op_text[op]);
  er__clex_unexpected(p, want);
  return false;
}

static bool expect_kind(parser *p, uint8_t kind, const char *what) {
  if (cur(p)->kind == kind) {
    next(p);
    return true;
  }
  er__clex_unexpected(p, what);
  return false;
}

static er_chat_node *mk(parser *p, uint8_t kind, const token *at) {
  if (p->st) return NULL;
  if (++p->nodes > ER_CHAT_MAX_NODES) {
    plimit(p, at->line, at->col, "the template's size in syntax nodes", "ER_CHAT_MAX_NODES", ER_CHAT_MAX_NODES);
    return NULL;
  }
  er_chat_node *n = er__arena_alloc(&p->t->arena, sizeof *n);
  if (!n) {
    p->st = ER_STATUS_OUT_OF_MEMORY;
    return NULL;
  }
  n->kind = kind;
  n->line = at->line;
  n->col = at->col;
  return n;
}

static const char *intern(parser *p, const char *s, size_t len) {
  char *c = er__arena_strndup(&p->t->arena, s, len);
  if (!c) p->st = ER_STATUS_OUT_OF_MEMORY;
  return c;
}

static bool enter(parser *p, const token *at) {
  if (++p->depth > ER_CHAT_MAX_DEPTH) {
    plimit(p, at->line, at->col, "nesting of blocks and expressions", "ER_CHAT_MAX_DEPTH", ER_CHAT_MAX_DEPTH);
    return false;
  }
  return true;
}
static void leave(parser *p) { p->depth--; }

static void note_unknown(parser *p, const er_chat_node *n, bool filter) {
  if (p->n_unk == p->cap_unk) {
    size_t cap = p->cap_unk ? p->cap_unk * 2 : 8;
    struct unknown_name *u = realloc(p->unk, cap * sizeof *u);
    if (!u) {
      p->st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory parsing a chat template");
      return;
    }
    p->unk = u;
    p->cap_unk = cap;
  }
  p->unk[p->n_unk++] = (struct unknown_name){p->nodes, n->line, n->col, p->soft > 0, filter, n->name};
}

static bool stk_push(parser *p, void *v) {
  if (p->stk_n == p->stk_cap) {
    size_t cap = p->stk_cap ? p->stk_cap * 2 : 64;
    void **s = realloc(p->stk, cap * sizeof(void *));
    if (!s) {
      p->st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory parsing a chat template");
      return false;
    }
    p->stk = s;
    p->stk_cap = cap;
  }
  p->stk[p->stk_n++] = v;
  return true;
}

/* Moves the scratch entries above `base` into an arena array. */
static void *stk_take(parser *p, size_t base, uint32_t *n_out) {
  size_t n = p->stk_n - base;
  *n_out = (uint32_t)n;
  void **arr = NULL;
  if (n && !p->st) {
    arr = er__arena_array(&p->t->arena, n, sizeof(void *));
    if (!arr) p->st = ER_STATUS_OUT_OF_MEMORY;
    else memcpy(arr, p->stk + base, n * sizeof(void *));
  }
  p->stk_n = base;
  return arr;
}

/* ======================================================================== */
/* Expressions                                                               */
/* ======================================================================== */

static er_chat_node *parse_expression(parser *p, bool with_condexpr);
static er_chat_node *parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                                 bool explicit_parens, bool with_namespace);
static er_chat_node *parse_unary(parser *p, bool with_filter);
static er_chat_node *parse_postfix(parser *p, er_chat_node *node);

/* Call arguments into n->kids / n->kw: positional first, then keyword. */
static bool parse_call_args(parser *p, er_chat_node *n) {
  token open = *cur(p);
  if (!expect_op(p, P_LPAREN)) return false;
  if (!enter(p, &open)) return false;
  size_t base = p->stk_n;
  const char *names[256];
  int n_kw = 0;
  bool require_comma = false;
  while (!p->st && !is_op(cur(p), P_RPAREN)) {
    if (require_comma) {
      if (!expect_op(p, P_COMMA)) break;
      if (is_op(cur(p), P_RPAREN)) break;
    }
    token *t = cur(p);
    if (is_op(t, P_MUL) || is_op(t, P_POW)) {
      er__clex_perr(p, t->line, t->col, "*args and **kwargs in calls are not supported");
      break;
    }
    if (t->kind == T_NAME && is_op(peek(p, 1), P_ASSIGN)) {
      if (n_kw == (int)ER_ARRAY_LEN(names)) {
        er__clex_perr(p, t->line, t->col, "more than %d keyword arguments", (int)ER_ARRAY_LEN(names));
        break;
      }
      names[n_kw] = intern(p, t->s, t->len);
      next(p);
      next(p);
      er_chat_node *v = parse_expression(p, true);
      if (!v || !stk_push(p, v)) break;
      n_kw++;
    } else {
      if (n_kw) {
        er__clex_perr(p, t->line, t->col, "a positional argument follows a keyword argument");
        break;
      }
      er_chat_node *v = parse_expression(p, true);
      if (!v || !stk_push(p, v)) break;
    }
    require_comma = true;
  }
  if (!p->st) expect_op(p, P_RPAREN);
  n->kids = stk_take(p, base, &n->n);
  n->n_kw = (uint16_t)n_kw;
  if (n_kw && !p->st) {
    n->kw = er__arena_array(&p->t->arena, (size_t)n_kw, sizeof(char *));
    if (!n->kw) p->st = ER_STATUS_OUT_OF_MEMORY;
    else memcpy(n->kw, names, (size_t)n_kw * sizeof(char *));
  }
  leave(p);
  return !p->st;
}

static er_chat_node *parse_list(parser *p) {
  token open = *cur(p);
  next(p);
  if (!enter(p, &open)) return NULL;
  er_chat_node *n = mk(p, ER_CN_LIST, &open);
  size_t base = p->stk_n;
  while (!p->st && !is_op(cur(p), P_RBRACKET)) {
    if (p->stk_n > base && !expect_op(p, P_COMMA)) break;
    if (is_op(cur(p), P_RBRACKET)) break;
    er_chat_node *e = parse_expression(p, true);
    if (!e || !stk_push(p, e)) break;
  }
  if (!p->st) expect_op(p, P_RBRACKET);
  if (n) n->kids = stk_take(p, base, &n->n);
  else p->stk_n = base;
  leave(p);
  return p->st ? NULL : n;
}

static er_chat_node *parse_dict(parser *p) {
  token open = *cur(p);
  next(p);
  if (!enter(p, &open)) return NULL;
  er_chat_node *n = mk(p, ER_CN_DICT, &open);
  size_t base = p->stk_n;
  while (!p->st && !is_op(cur(p), P_RBRACE)) {
    if (p->stk_n > base && !expect_op(p, P_COMMA)) break;
    if (is_op(cur(p), P_RBRACE)) break;
    er_chat_node *k = parse_expression(p, true);
    if (!k || !expect_op(p, P_COLON)) break;
    er_chat_node *v = parse_expression(p, true);
    if (!v || !stk_push(p, k) || !stk_push(p, v)) break;
  }
  if (!p->st) expect_op(p, P_RBRACE);
  uint32_t cnt;
  er_chat_node **pairs = stk_take(p, base, &cnt);
  if (n && !p->st && cnt) {
    n->n = n->n2 = cnt / 2;
    n->kids = er__arena_array(&p->t->arena, cnt / 2, sizeof(er_chat_node *));
    n->kids2 = er__arena_array(&p->t->arena, cnt / 2, sizeof(er_chat_node *));
    if (!n->kids || !n->kids2) p->st = ER_STATUS_OUT_OF_MEMORY;
    else
      for (uint32_t i = 0; i < cnt / 2; i++) {
        n->kids[i] = pairs[2 * i];
        n->kids2[i] = pairs[2 * i + 1];
      }
  }
  leave(p);
  return p->st ? NULL : n;
}

static er_chat_node *parse_primary(parser *p, bool with_namespace) {
  token t = *cur(p);
  if (p->st) return NULL;
  if (t.kind == T_NAME) {
    next(p);
    if (is_name(&t, "true") || is_name(&t, "True") || is_name(&t, "false") || is_name(&t, "False")) {
      er_chat_node *n = mk(p, ER_CN_CONST, &t);
      if (n) n->cval = er__cv_bool(t.s[0] == 't' || t.s[0] == 'T');
      return n;
    }
    if (is_name(&t, "none") || is_name(&t, "None")) {
      er_chat_node *n = mk(p, ER_CN_CONST, &t);
      if (n) n->cval = er__cv_none();
      return n;
    }
    er_chat_node *n = mk(p, ER_CN_NAME, &t);
    if (n) n->name = intern(p, t.s, t.len);
    if (n && with_namespace && is_op(cur(p), P_DOT)) {
      next(p);
      token a = *cur(p);
      if (!expect_kind(p, T_NAME, "an attribute name")) return NULL;
      er_chat_node *r = mk(p, ER_CN_ATTR, &t);
      if (!r) return NULL;
      r->a = n;
      r->name = intern(p, a.s, a.len);
      return r;
    }
    return n;
  }
  if (t.kind == T_STRING) {
    /* Adjacent literals concatenate, as in Python: their (decoded, in the
     * arena) texts are collected first and copied once. */
    size_t base = p->stk_n, total = 0;
    while (!p->st && cur(p)->kind == T_STRING) {
      token u = *cur(p);
      next(p);
      if (!stk_push(p, (void *)u.s) || !stk_push(p, (void *)(uintptr_t)u.len)) break;
      total += u.len;
    }
    char *joined = p->st ? NULL : er__arena_alloc(&p->t->arena, total + 1);
    if (!p->st && !joined) p->st = ER_STATUS_OUT_OF_MEMORY;
    size_t at = 0;
    for (size_t i = base; joined && i + 1 < p->stk_n; i += 2) {
      size_t len = (size_t)(uintptr_t)p->stk[i + 1];
      memcpy(joined + at, p->stk[i], len);
      at += len;
    }
    p->stk_n = base;
    er_chat_node *n = mk(p, ER_CN_CONST, &t);
    if (!n) return NULL;
    if (er__cv_str_const(&p->t->arena, joined, total, &n->cval)) {
      p->st = ER_STATUS_OUT_OF_MEMORY;
      return NULL;
    }
    return n;
  }
  if (t.kind == T_INT || t.kind == T_FLOAT) {
    next(p);
    er_chat_node *n = mk(p, ER_CN_CONST, &t);
    if (n) n->cval = t.kind == T_INT ? er__cv_int(t.i) : er__cv_float(t.f);
    return n;
  }
  if (is_op(&t, P_LPAREN)) {
    next(p);
    if (!enter(p, &t)) return NULL;
    er_chat_node *n = parse_tuple(p, false, true, NULL, true, false);
    if (n) expect_op(p, P_RPAREN);
    leave(p);
    return p->st ? NULL : n;
  }
  if (is_op(&t, P_LBRACKET)) return parse_list(p);
  if (is_op(&t, P_LBRACE)) return parse_dict(p);
  er__clex_unexpected(p, NULL);
  return NULL;
}

/* One entry between [ and ]: an expression, or a slice (returned as a
 * SLICE node with a == NULL). */
static er_chat_node *parse_subscribed(parser *p) {
  token t = *cur(p);
  er_chat_node *args[3] = {NULL, NULL, NULL};
  if (is_op(&t, P_COLON)) {
    next(p);
  } else {
    er_chat_node *e = parse_expression(p, true);
    if (!e) return NULL;
    if (!is_op(cur(p), P_COLON)) return e;
    next(p);
    args[0] = e;
  }
  if (!is_op(cur(p), P_COLON) && !is_op(cur(p), P_RBRACKET) && !is_op(cur(p), P_COMMA)) {
    args[1] = parse_expression(p, true);
    if (!args[1]) return NULL;
  }
  if (is_op(cur(p), P_COLON)) {
    next(p);
    if (!is_op(cur(p), P_RBRACKET) && !is_op(cur(p), P_COMMA)) {
      args[2] = parse_expression(p, true);
      if (!args[2]) return NULL;
    }
  }
  er_chat_node *s = mk(p, ER_CN_SLICE, &t);
  if (!s) return NULL;
  s->kids = er__arena_array(&p->t->arena, 3, sizeof(er_chat_node *));
  if (!s->kids) {
    p->st = ER_STATUS_OUT_OF_MEMORY;
    return NULL;
  }
  memcpy(s->kids, args, sizeof args);
  s->n = 3;
  return s;
}

/* Whether jinja2 can evaluate n at compile time (as_const: literals and
 * operators, filters and tests over them). Deeper than ER_CHAT_MAX_DEPTH
 * counts as not constant, which keeps this recursion bounded. */
static bool is_const_at(const er_chat_node *n, int depth) {
  if (depth > ER_CHAT_MAX_DEPTH) return false;
#define is_const(x) is_const_at((x), depth + 1)
  switch (n->kind) {
  case ER_CN_CONST: return true;
  case ER_CN_LIST: case ER_CN_TUPLE: case ER_CN_CONCAT:
    for (uint32_t i = 0; i < n->n; i++)
      if (!is_const(n->kids[i])) return false;
    return true;
  case ER_CN_DICT:
    for (uint32_t i = 0; i < n->n; i++)
      if (!is_const(n->kids[i]) || !is_const(n->kids2[i])) return false;
    return true;
  case ER_CN_NEG: case ER_CN_POS: case ER_CN_NOT: return is_const(n->a);
  case ER_CN_BINOP: case ER_CN_AND: case ER_CN_OR: case ER_CN_ITEM: return is_const(n->a) && is_const(n->b);
  case ER_CN_COMPARE:
    for (const er_chat_node *c = n; c; c = c->c)
      if ((c->a && !is_const(c->a)) || !is_const(c->b)) return false;
    return true;
  case ER_CN_COND: return is_const(n->a) && is_const(n->b) && (!n->c || is_const(n->c));
  case ER_CN_FILTER: case ER_CN_TEST:
    /* Filters that take the context are never folded. */
    if (!n->a || !is_const(n->a)) return false;
    if (n->kind == ER_CN_FILTER && (!strcmp(n->name, "map") || !strcmp(n->name, "select") ||
                                    !strcmp(n->name, "reject") || !strcmp(n->name, "selectattr") ||
                                    !strcmp(n->name, "rejectattr")))
      return false;
    for (uint32_t i = 0; i < n->n; i++)
      if (!is_const(n->kids[i])) return false;
    return true;
  case ER_CN_SLICE:
    for (int k = 0; k < 3; k++)
      if (n->kids[k] && !is_const(n->kids[k])) return false;
    return is_const(n->a);
  default: return false;
  }
#undef is_const
}

/* jinja2 renders a {{ }} whose expression is constant from its compile-time
 * value, where slices go through getitem (a slice of a non-sequence is
 * Undefined there, an error at run time). Marks those slices (op = 1). */
static void mark_folded_slices(er_chat_node *n, int depth) {
  if (!n || depth > ER_CHAT_MAX_DEPTH) return;
  if (n->kind == ER_CN_SLICE) n->op = 1;
  mark_folded_slices(n->a, depth + 1);
  mark_folded_slices(n->b, depth + 1);
  if (n->kind == ER_CN_COMPARE || n->kind == ER_CN_COND) mark_folded_slices(n->c, depth + 1);
  for (uint32_t i = 0; i < n->n; i++) mark_folded_slices(n->kids[i], depth + 1);
  if (n->kind == ER_CN_DICT)
    for (uint32_t i = 0; i < n->n2; i++) mark_folded_slices(n->kids2[i], depth + 1);
}

static er_chat_node *parse_subscript(parser *p, er_chat_node *node) {
  token t = *cur(p);
  next(p);
  if (is_op(&t, P_DOT)) {
    token a = *cur(p);
    if (a.kind == T_NAME) {
      next(p);
      er_chat_node *n = mk(p, ER_CN_ATTR, &t);
      if (!n) return NULL;
      n->a = node;
      n->name = intern(p, a.s, a.len);
      return n;
    }
    if (a.kind == T_INT) {
      next(p);
      er_chat_node *k = mk(p, ER_CN_CONST, &a), *n = mk(p, ER_CN_ITEM, &t);
      if (!n) return NULL;
      k->cval = er__cv_int(a.i);
      n->a = node;
      n->b = k;
      return n;
    }
    er__clex_unexpected(p, "an attribute name or number after '.'");
    return NULL;
  }
  /* '[' */
  if (!enter(p, &t)) return NULL;
  size_t base = p->stk_n;
  while (!p->st && !is_op(cur(p), P_RBRACKET)) {
    if (p->stk_n > base && !expect_op(p, P_COMMA)) break;
    er_chat_node *e = parse_subscribed(p);
    if (!e || !stk_push(p, e)) break;
  }
  if (!p->st) expect_op(p, P_RBRACKET);
  uint32_t cnt;
  er_chat_node **args = stk_take(p, base, &cnt);
  leave(p);
  if (p->st) return NULL;
  if (cnt == 0) {
    er__clex_perr(p, t.line, t.col, "empty subscript '[]'");
    return NULL;
  }
  if (cnt == 1 && args[0]->kind == ER_CN_SLICE && !args[0]->a) {
    args[0]->a = node;
    return args[0];
  }
  er_chat_node *n = mk(p, ER_CN_ITEM, &t);
  if (!n) return NULL;
  n->a = node;
  if (cnt == 1) {
    n->b = args[0];
  } else {
    er__clex_perr(p, t.line, t.col, "multi-dimensional subscripts are not supported");
    return NULL;
  }
  return n;
}

static er_chat_node *parse_call(parser *p, er_chat_node *node) {
  token t = *cur(p);
  er_chat_node *n = mk(p, ER_CN_CALL, &t);
  if (!n) return NULL;
  n->a = node;
  return parse_call_args(p, n) ? n : NULL;
}

static er_chat_node *parse_postfix(parser *p, er_chat_node *node) {
  while (node && !p->st) {
    token *t = cur(p);
    if (is_op(t, P_DOT) || is_op(t, P_LBRACKET)) node = parse_subscript(p, node);
    else if (is_op(t, P_LPAREN)) node = parse_call(p, node);
    else break;
  }
  return p->st ? NULL : node;
}

/* `| name(args)` chains; node may be NULL (filter blocks, set blocks). */
static er_chat_node *parse_filter(parser *p, er_chat_node *node, bool start_inline) {
  while (!p->st && (is_op(cur(p), P_PIPE) || start_inline)) {
    if (!start_inline) next(p);
    start_inline = false;
    token t = *cur(p);
    if (!expect_kind(p, T_NAME, "a filter name")) return NULL;
    if (is_op(cur(p), P_DOT)) {
      er__clex_perr(p, t.line, t.col, "dotted filter names ('%.*s.') are not supported", (int)t.len, t.s);
      return NULL;
    }
    er_chat_node *f = mk(p, ER_CN_FILTER, &t);
    if (!f) return NULL;
    f->a = node;
    f->name = intern(p, t.s, t.len);
    if (f->name && !er__chat_known_filter(f->name)) note_unknown(p, f, true);
    if (is_op(cur(p), P_LPAREN) && !parse_call_args(p, f)) return NULL;
    node = f;
  }
  return p->st ? NULL : node;
}

static er_chat_node *parse_test(parser *p, er_chat_node *node) {
  token is = *cur(p);
  next(p);
  bool negated = false;
  if (is_name(cur(p), "not")) {
    next(p);
    negated = true;
  }
  token t = *cur(p);
  if (!expect_kind(p, T_NAME, "a test name after 'is'")) return NULL;
  if (is_op(cur(p), P_DOT)) {
    er__clex_perr(p, t.line, t.col, "dotted test names are not supported");
    return NULL;
  }
  er_chat_node *n = mk(p, ER_CN_TEST, &is);
  if (!n) return NULL;
  n->a = node;
  n->op = negated;
  n->name = intern(p, t.s, t.len);
  if (n->name && !er__chat_known_test(n->name)) note_unknown(p, n, false);
  token *c = cur(p);
  if (is_op(c, P_LPAREN)) {
    if (!parse_call_args(p, n)) return NULL;
  } else if ((c->kind == T_NAME || c->kind == T_STRING || c->kind == T_INT || c->kind == T_FLOAT ||
              is_op(c, P_LBRACKET) || is_op(c, P_LBRACE)) &&
             !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
    if (is_name(c, "is")) {
      er__clex_perr(p, c->line, c->col, "tests cannot be chained with 'is'");
      return NULL;
    }
    er_chat_node *arg = parse_primary(p, false);
    arg = parse_postfix(p, arg);
    if (!arg) return NULL;
    n->kids = er__arena_array(&p->t->arena, 1, sizeof(er_chat_node *));
    if (!n->kids) {
      p->st = ER_STATUS_OUT_OF_MEMORY;
      return NULL;
    }
    n->kids[0] = arg;
    n->n = 1;
  }
  return n;
}

static er_chat_node *parse_filter_expr(parser *p, er_chat_node *node) {
  while (node && !p->st) {
    token *t = cur(p);
    if (is_op(t, P_PIPE)) node = parse_filter(p, node, false);
    else if (is_name(t, "is")) node = parse_test(p, node);
    else if (is_op(t, P_LPAREN)) node = parse_call(p, node);
    else break;
  }
  return p->st ? NULL : node;
}

static er_chat_node *parse_unary(parser *p, bool with_filter) {
  token t = *cur(p);
  er_chat_node *node;
  if (is_op(&t, P_SUB) || is_op(&t, P_ADD)) {
    next(p);
    if (!enter(p, &t)) return NULL;
    er_chat_node *x = parse_unary(p, false);
    leave(p);
    if (!x) return NULL;
    node = mk(p, is_op(&t, P_SUB) ? ER_CN_NEG : ER_CN_POS, &t);
    if (!node) return NULL;
    node->a = x;
  } else {
    node = parse_primary(p, false);
  }
  node = parse_postfix(p, node);
  if (with_filter) node = parse_filter_expr(p, node);
  return node;
}

static er_chat_node *binop(parser *p, const token *at, uint8_t kind, uint8_t op, er_chat_node *a, er_chat_node *b) {
  er_chat_node *n = mk(p, kind, at);
  if (!n) return NULL;
  n->op = op;
  n->a = a;
  n->b = b;
  return n;
}

static er_chat_node *parse_pow(parser *p) {
  er_chat_node *left = parse_unary(p, true);
  while (left && is_op(cur(p), P_POW)) {
    token t = *cur(p);
    next(p);
    er_chat_node *right = parse_unary(p, true);
    left = right ? binop(p, &t, ER_CN_BINOP, ER_OP_POW, left, right) : NULL;
  }
  return left;
}

static er_chat_node *parse_math2(parser *p) {
  er_chat_node *left = parse_pow(p);
  for (;;) {
    token t = *cur(p);
    uint8_t op = is_op(&t, P_MUL) ? ER_OP_MUL : is_op(&t, P_DIV) ? ER_OP_DIV
                 : is_op(&t, P_FLOORDIV) ? ER_OP_FLOORDIV : is_op(&t, P_MOD) ? ER_OP_MOD : 0;
    if (!left || !op) return left;
    next(p);
    er_chat_node *right = parse_pow(p);
    left = right ? binop(p, &t, ER_CN_BINOP, op, left, right) : NULL;
  }
}

static er_chat_node *parse_concat(parser *p) {
  token t = *cur(p);
  er_chat_node *first = parse_math2(p);
  if (!first || !is_op(cur(p), P_TILDE)) return first;
  size_t base = p->stk_n;
  if (!stk_push(p, first)) return NULL;
  while (!p->st && is_op(cur(p), P_TILDE)) {
    next(p);
    er_chat_node *e = parse_math2(p);
    if (!e || !stk_push(p, e)) break;
  }
  er_chat_node *n = mk(p, ER_CN_CONCAT, &t);
  uint32_t cnt;
  er_chat_node **kids = stk_take(p, base, &cnt);
  if (!n || p->st) return NULL;
  n->kids = kids;
  n->n = cnt;
  return n;
}

static er_chat_node *parse_math1(parser *p) {
  er_chat_node *left = parse_concat(p);
  for (;;) {
    token t = *cur(p);
    uint8_t op = is_op(&t, P_ADD) ? ER_OP_ADD : is_op(&t, P_SUB) ? ER_OP_SUB : 0;
    if (!left || !op) return left;
    next(p);
    er_chat_node *right = parse_concat(p);
    left = right ? binop(p, &t, ER_CN_BINOP, op, left, right) : NULL;
  }
}

static er_chat_node *parse_compare(parser *p) {
  er_chat_node *expr = parse_math1(p);
  er_chat_node *first = NULL, *last = NULL;
  while (expr && !p->st) {
    token t = *cur(p);
    uint8_t op = 0;
    if (t.kind == T_OP) {
      op = t.op == P_EQ ? ER_OP_EQ : t.op == P_NE ? ER_OP_NE : t.op == P_LT ? ER_OP_LT
           : t.op == P_LTEQ ? ER_OP_LTEQ : t.op == P_GT ? ER_OP_GT : t.op == P_GTEQ ? ER_OP_GTEQ : 0;
      if (op) next(p);
    } else if (is_name(&t, "in")) {
      op = ER_OP_IN;
      next(p);
    } else if (is_name(&t, "not") && is_name(peek(p, 1), "in")) {
      op = ER_OP_NOTIN;
      next(p);
      next(p);
    }
    if (!op) break;
    er_chat_node *rhs = parse_math1(p);
    if (!rhs) return NULL;
    er_chat_node *c = binop(p, &t, ER_CN_COMPARE, op, first ? NULL : expr, rhs);
    if (!c) return NULL;
    if (last) last->c = c;
    else first = c;
    last = c;
  }
  if (p->st) return NULL;
  return first ? first : expr;
}

static er_chat_node *parse_not(parser *p) {
  token t = *cur(p);
  if (is_name(&t, "not")) {
    next(p);
    if (!enter(p, &t)) return NULL;
    er_chat_node *x = parse_not(p);
    leave(p);
    if (!x) return NULL;
    er_chat_node *n = mk(p, ER_CN_NOT, &t);
    if (n) n->a = x;
    return n;
  }
  return parse_compare(p);
}

static er_chat_node *parse_and(parser *p) {
  er_chat_node *left = parse_not(p);
  while (left && is_name(cur(p), "and")) {
    token t = *cur(p);
    next(p);
    er_chat_node *right = parse_not(p);
    left = right ? binop(p, &t, ER_CN_AND, 0, left, right) : NULL;
  }
  return left;
}

static er_chat_node *parse_or(parser *p) {
  er_chat_node *left = parse_and(p);
  while (left && is_name(cur(p), "or")) {
    token t = *cur(p);
    next(p);
    er_chat_node *right = parse_and(p);
    left = right ? binop(p, &t, ER_CN_OR, 0, left, right) : NULL;
  }
  return left;
}

static er_chat_node *parse_condexpr(parser *p) {
  token t = *cur(p);
  uint32_t seq0 = p->nodes;
  er_chat_node *e1 = parse_or(p);
  while (e1 && is_name(cur(p), "if")) {
    next(p);
    er_chat_node *e2 = parse_or(p), *e3 = NULL;
    if (!e2) return NULL;
    if (is_name(cur(p), "else")) {
      token e = *cur(p);
      next(p);
      if (!enter(p, &e)) return NULL;
      e3 = parse_condexpr(p);
      leave(p);
      if (!e3) return NULL;
    }
    er_chat_node *n = mk(p, ER_CN_COND, &t);
    if (!n) return NULL;
    n->a = e1;
    n->b = e2;
    n->c = e3;
    e1 = n;
    for (size_t i = p->n_unk; i-- > 0 && p->unk[i].seq >= seq0;) p->unk[i].soft = true;
  }
  return e1;
}

static er_chat_node *parse_expression(parser *p, bool with_condexpr) {
  return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static bool is_tuple_end(parser *p, const char *extra_end) {
  token *t = cur(p);
  if (t->kind == T_VAR_END || t->kind == T_BLOCK_END || is_op(t, P_RPAREN)) return true;
  return extra_end && is_name(t, extra_end);
}

static er_chat_node *parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                                 bool explicit_parens, bool with_namespace) {
  token t = *cur(p);
  size_t base = p->stk_n;
  bool is_tuple = false;
  while (!p->st) {
    if (p->stk_n > base && !expect_op(p, P_COMMA)) break;
    if (is_tuple_end(p, extra_end)) break;
    er_chat_node *e = simplified ? parse_primary(p, with_namespace) : parse_expression(p, with_condexpr);
    if (!e || !stk_push(p, e)) break;
    if (is_op(cur(p), P_COMMA)) is_tuple = true;
    else break;
  }
  uint32_t cnt;
  er_chat_node **items = stk_take(p, base, &cnt);
  if (p->st) return NULL;
  if (!is_tuple) {
    if (cnt) return items[0];
    if (!explicit_parens) {
      er__clex_unexpected(p, "an expression");
      return NULL;
    }
  }
  er_chat_node *n = mk(p, ER_CN_TUPLE, &t);
  if (!n) return NULL;
  n->kids = items;
  n->n = cnt;
  return n;
}

/* ======================================================================== */
/* Statements                                                                */
/* ======================================================================== */

static bool subparse(parser *p, const char *const *ends, er_chat_node ***kids, uint32_t *n);
static er_chat_node *parse_statement(parser *p);

static bool ends_with(const token *t, const char *const *ends) {
  for (; ends && *ends; ends++)
    if (is_name(t, *ends)) return true;
  return false;
}

/* The body of a block statement up to one of `ends` (left as the current
 * token, or consumed when drop_needle). */
static bool parse_body(parser *p, const char *const *ends, bool drop_needle, const token *opener,
                       er_chat_node ***kids, uint32_t *n) {
  if (is_op(cur(p), P_COLON)) next(p);
  if (!expect_kind(p, T_BLOCK_END, "'%}' to end the statement")) return false;
  if (!subparse(p, ends, kids, n)) return false;
  if (cur(p)->kind == T_EOF) {
    const char *closer = ends[0];
    for (const char *const *e = ends; *e; e++)
      if (!strncmp(*e, "end", 3)) closer = *e;
    er__clex_perr(p, opener->line, opener->col, "'%.*s' block is never closed: the template ends before its '{%% %s %%}'",
         (int)opener->len, opener->s, closer);
    return false;
  }
  if (drop_needle) next(p);
  return true;
}

static bool can_assign(const er_chat_node *n, bool allow_ns) {
  if (n->kind == ER_CN_NAME) return true;
  if (n->kind == ER_CN_ATTR && allow_ns && n->a && n->a->kind == ER_CN_NAME) return true;
  if (n->kind == ER_CN_TUPLE) {
    for (uint32_t i = 0; i < n->n; i++)
      if (n->kids[i]->kind != ER_CN_NAME) return false;
    return true;
  }
  return false;
}

static er_chat_node *parse_for(parser *p, const token *kw) {
  er_chat_node *n = mk(p, ER_CN_FOR, kw);
  if (!n) return NULL;
  n->b = parse_tuple(p, true, true, "in", false, false);
  if (!n->b) return NULL;
  if (!can_assign(n->b, false)) {
    er__clex_perr(p, n->b->line, n->b->col, "a for loop can only assign to names");
    return NULL;
  }
  if (!is_name(cur(p), "in")) {
    er__clex_unexpected(p, "'in'");
    return NULL;
  }
  next(p);
  n->a = parse_tuple(p, false, false, "recursive", false, false);
  if (!n->a) return NULL;
  if (is_name(cur(p), "if")) {
    next(p);
    int soft = p->soft;
    p->soft = 0;
    n->c = parse_expression(p, true);
    p->soft = soft;
    if (!n->c) return NULL;
  }
  if (is_name(cur(p), "recursive")) {
    er__clex_perr(p, cur(p)->line, cur(p)->col, "recursive for loops are not supported");
    return NULL;
  }
  static const char *const ends[] = {"endfor", "else", NULL};
  static const char *const endfor[] = {"endfor", NULL};
  int soft = p->soft;
  p->soft = 0; /* the loop body is a frame of its own, never soft */
  p->loop_depth++;
  bool ok = parse_body(p, ends, false, kw, &n->kids, &n->n);
  p->loop_depth--;
  if (ok) {
    bool has_else = is_name(cur(p), "else");
    next(p);
    if (has_else && !parse_body(p, endfor, true, kw, &n->kids2, &n->n2)) ok = false;
  }
  p->soft = soft;
  return ok ? n : NULL;
}

static er_chat_node *parse_if(parser *p, const token *kw) {
  static const char *const ends[] = {"elif", "else", "endif", NULL};
  static const char *const endif[] = {"endif", NULL};
  er_chat_node *top = mk(p, ER_CN_IF, kw), *node = top;
  p->soft++;
  while (node) {
    node->a = parse_tuple(p, false, false, NULL, false, false);
    if (!node->a) return NULL;
    if (!parse_body(p, ends, false, kw, &node->kids, &node->n)) return NULL;
    token t = *cur(p);
    next(p);
    if (is_name(&t, "elif")) {
      er_chat_node *e = mk(p, ER_CN_IF, &t);
      if (!e) return NULL;
      e->op = 1; /* an elif: the evaluator walks these chains in a loop */
      node->kids2 = er__arena_array(&p->t->arena, 1, sizeof(er_chat_node *));
      if (!node->kids2) {
        p->st = ER_STATUS_OUT_OF_MEMORY;
        return NULL;
      }
      node->kids2[0] = e;
      node->n2 = 1;
      node = e;
      continue;
    }
    if (is_name(&t, "else")) parse_body(p, endif, true, kw, &node->kids2, &node->n2);
    break;
  }
  p->soft--;
  return p->st ? NULL : top;
}

static er_chat_node *parse_set(parser *p, const token *kw) {
  static const char *const endset[] = {"endset", NULL};
  er_chat_node *target = parse_tuple(p, true, true, NULL, false, true);
  if (!target) return NULL;
  if (!can_assign(target, true)) {
    er__clex_perr(p, target->line, target->col, "cannot assign to this expression in 'set'");
    return NULL;
  }
  if (is_op(cur(p), P_ASSIGN)) {
    next(p);
    er_chat_node *n = mk(p, ER_CN_SET, kw);
    if (!n) return NULL;
    n->b = target;
    n->a = parse_tuple(p, false, true, NULL, false, false);
    return n->a ? n : NULL;
  }
  er_chat_node *n = mk(p, ER_CN_SET_BLOCK, kw);
  if (!n) return NULL;
  n->b = target;
  er_chat_node *chain = parse_filter(p, NULL, false);
  if (p->st) return NULL;
  if (chain) {
    n->kids2 = er__arena_array(&p->t->arena, 1, sizeof(er_chat_node *));
    if (!n->kids2) {
      p->st = ER_STATUS_OUT_OF_MEMORY;
      return NULL;
    }
    n->kids2[0] = chain;
    n->n2 = 1;
  }
  int soft = p->soft;
  p->soft = 0;
  bool ok = parse_body(p, endset, true, kw, &n->kids, &n->n);
  p->soft = soft;
  return ok ? n : NULL;
}

static er_chat_node *parse_macro(parser *p, const token *kw) {
  static const char *const endmacro[] = {"endmacro", NULL};
  er_chat_node *n = mk(p, ER_CN_MACRO, kw);
  if (!n) return NULL;
  token name = *cur(p);
  if (!expect_kind(p, T_NAME, "a macro name")) return NULL;
  n->name = intern(p, name.s, name.len);
  if (!expect_op(p, P_LPAREN)) return NULL;
  size_t base = p->stk_n;
  bool any_default = false;
  while (!p->st && !is_op(cur(p), P_RPAREN)) {
    if (p->stk_n > base && !expect_op(p, P_COMMA)) break;
    token a = *cur(p);
    if (!expect_kind(p, T_NAME, "a parameter name")) break;
    er_chat_node *param = mk(p, ER_CN_NAME, &a);
    if (!param) break;
    param->name = intern(p, a.s, a.len);
    if (is_op(cur(p), P_ASSIGN)) {
      next(p);
      param->a = parse_expression(p, true);
      if (!param->a) break;
      any_default = true;
    } else if (any_default) {
      er__clex_perr(p, a.line, a.col, "macro parameter '%.*s' without a default follows one with a default", (int)a.len, a.s);
      break;
    }
    if (!stk_push(p, param)) break;
  }
  if (!p->st) expect_op(p, P_RPAREN);
  uint32_t cnt;
  er_chat_node **params = stk_take(p, base, &cnt);
  if (p->st) return NULL;
  if (cnt > UINT16_MAX) {
    er__clex_perr(p, kw->line, kw->col, "macro '%s' has too many parameters", n->name);
    return NULL;
  }
  n->n_kw = (uint16_t)cnt;
  n->n2 = cnt;
  if (cnt) {
    n->kw = er__arena_array(&p->t->arena, cnt, sizeof(char *));
    n->kids2 = er__arena_array(&p->t->arena, cnt, sizeof(er_chat_node *));
    if (!n->kw || !n->kids2) {
      p->st = ER_STATUS_OUT_OF_MEMORY;
      return NULL;
    }
    for (uint32_t i = 0; i < cnt; i++) {
      n->kw[i] = params[i]->name;
      n->kids2[i] = params[i]->a;
    }
  }
  int saved = p->loop_depth, soft = p->soft;
  p->loop_depth = 0;
  p->soft = 0;
  bool ok = parse_body(p, endmacro, true, kw, &n->kids, &n->n);
  p->loop_depth = saved;
  p->soft = soft;
  return ok ? n : NULL;
}

static er_chat_node *parse_filter_block(parser *p, const token *kw) {
  static const char *const endfilter[] = {"endfilter", NULL};
  er_chat_node *n = mk(p, ER_CN_FILTER_BLOCK, kw);
  if (!n) return NULL;
  er_chat_node *chain = parse_filter(p, NULL, true);
  if (!chain) return NULL;
  n->kids2 = er__arena_array(&p->t->arena, 1, sizeof(er_chat_node *));
  if (!n->kids2) {
    p->st = ER_STATUS_OUT_OF_MEMORY;
    return NULL;
  }
  n->kids2[0] = chain;
  n->n2 = 1;
  int soft = p->soft;
  p->soft = 0;
  bool ok = parse_body(p, endfilter, true, kw, &n->kids, &n->n);
  p->soft = soft;
  return ok ? n : NULL;
}

static er_chat_node *parse_statement(parser *p) {
  token kw = *cur(p);
  if (kw.kind != T_NAME) {
    er__clex_unexpected(p, "a tag name");
    return NULL;
  }
  if (!enter(p, &kw)) return NULL;
  next(p);
  er_chat_node *n = NULL;
  if (is_name(&kw, "for")) {
    n = parse_for(p, &kw);
  } else if (is_name(&kw, "if")) {
    n = parse_if(p, &kw);
  } else if (is_name(&kw, "set")) {
    n = parse_set(p, &kw);
  } else if (is_name(&kw, "macro")) {
    n = parse_macro(p, &kw);
  } else if (is_name(&kw, "filter")) {
    n = parse_filter_block(p, &kw);
  } else if (is_name(&kw, "break") || is_name(&kw, "continue")) {
    if (!p->loop_depth) er__clex_perr(p, kw.line, kw.col, "'%.*s' outside a for loop", (int)kw.len, kw.s);
    else n = mk(p, is_name(&kw, "break") ? ER_CN_BREAK : ER_CN_CONTINUE, &kw);
  } else if (is_name(&kw, "generation")) {
    /* transformers' {% generation %} marks the assistant's tokens; for
     * rendering it is its body. */
    static const char *const end[] = {"endgeneration", NULL};
    n = mk(p, ER_CN_FILTER_BLOCK, &kw);
    if (n && !parse_body(p, end, true, &kw, &n->kids, &n->n)) n = NULL;
  } else if (is_name(&kw, "print")) {
    n = mk(p, ER_CN_PRINT, &kw);
    if (n) n->a = parse_tuple(p, false, true, NULL, false, false);
    if (n && !n->a) n = NULL;
  } else if (is_name(&kw, "call") || is_name(&kw, "block") || is_name(&kw, "extends") || is_name(&kw, "include") ||
             is_name(&kw, "import") || is_name(&kw, "from") || is_name(&kw, "with") || is_name(&kw, "autoescape") ||
             is_name(&kw, "raw")) {
    er__clex_perr(p, kw.line, kw.col, "the '%.*s' statement is not supported by edgerun's chat templates", (int)kw.len, kw.s);
  } else {
    er__clex_perr(p, kw.line, kw.col, "unknown tag '%.*s'", (int)(kw.len > 64 ? 64 : kw.len), kw.s);
  }
  leave(p);
  return p->st ? NULL : n;
}

static bool subparse(parser *p, const char *const *ends, er_chat_node ***kids, uint32_t *n) {
  size_t base = p->stk_n;
  while (!p->st) {
    token t = *cur(p);
    if (t.kind == T_EOF) break;
    if (t.kind == T_DATA) {
      next(p);
      er_chat_node *d = mk(p, ER_CN_DATA, &t);
      if (!d) break;
      d->name = t.s;
      d->len = t.len;
      if (!stk_push(p, d)) break;
    } else if (t.kind == T_VAR_BEGIN) {
      next(p);
      er_chat_node *d = mk(p, ER_CN_PRINT, &t);
      if (!d) break;
      d->a = parse_tuple(p, false, true, NULL, false, false);
      if (!d->a || !expect_kind(p, T_VAR_END, "'}}'")) break;
      if (is_const_at(d->a, 0)) mark_folded_slices(d->a, 0);
      if (!stk_push(p, d)) break;
    } else if (t.kind == T_BLOCK_BEGIN) {
      next(p);
      if (ends && ends_with(cur(p), ends)) break;
      er_chat_node *s = parse_statement(p);
      if (!s || !expect_kind(p, T_BLOCK_END, "'%}' to end the statement")) break;
      if (!stk_push(p, s)) break;
    } else {
      er__clex_unexpected(p, NULL);
      break;
    }
  }
  *kids = stk_take(p, base, n);
  return !p->st;
}

/* ======================================================================== */
/* Entry point                                                               */
/* ======================================================================== */

er_status er__chat_parse_jinja(er_chat_template *t, const char *src, size_t len) {
  size_t bad;
  if (!er__utf8_valid(src, len, &bad)) {
    uint32_t line = 1;
    size_t ls = 0;
    for (size_t i = 0; i < bad; i++)
      if (src[i] == '\n') {
        line++;
        ls = i + 1;
      }
    return er__error(ER_STATUS_INVALID_ARGUMENT, "chat template line %u column %zu: invalid UTF-8 (byte 0x%02x)",
                     line, bad - ls + 1, (unsigned char)src[bad]);
  }
  /* Newlines normalized to \n and one trailing newline dropped, as jinja2
   * does before lexing. */
  char *norm = er__arena_alloc(&t->arena, len + 1);
  if (!norm) return ER_STATUS_OUT_OF_MEMORY;
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (src[i] == '\r') {
      norm[n++] = '\n';
      if (i + 1 < len && src[i + 1] == '\n') i++;
    } else {
      norm[n++] = src[i];
    }
  }
  if (n && norm[n - 1] == '\n') n--;
  norm[n] = '\0';

  parser p;
  memset(&p, 0, sizeof p);
  p.t = t;
  p.src = norm;
  p.n = n;
  p.line = 1;
  p.line_starting = true;
  bool ok = subparse(&p, NULL, &t->body, &t->n_body);
  if (ok && cur(&p)->kind != T_EOF) er__clex_unexpected(&p, NULL);
  for (size_t i = 0; i < p.n_unk && !p.st; i++)
    if (!p.unk[i].soft)
      er__clex_perr(&p, p.unk[i].line, p.unk[i].col, "unknown %s '%s'", p.unk[i].filter ? "filter" : "test", p.unk[i].name);
  free(p.stk);
  free(p.unk);
  return p.st;
}
