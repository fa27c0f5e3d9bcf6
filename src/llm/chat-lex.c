/* chat-lex.c - the chat-template lexer: template text into tokens (text,
 * expression and statement delimiters with their whitespace control,
 * names, numbers, strings, operators), with the bounds of chat-parse.c. */
#include "llm/chat-lex.h"

/* ======================================================================== */
/* Tokens                                                                    */
/* ======================================================================== */

er_status er__clex_perr(parser *p, uint32_t line, uint32_t col, const char *fmt, ...) {
  if (p->st) return p->st;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  p->st = er__error(ER_STATUS_INVALID_ARGUMENT, "chat template line %u column %u: %s", line, col, msg);
  return p->st;
}

/* ======================================================================== */
/* Lexer                                                                     */
/* ======================================================================== */

static void advance(parser *p, size_t to) {
  for (size_t i = p->pos; i < to; i++) {
    if (p->src[i] == '\n') {
      p->line++;
      p->line_start = i + 1;
    }
  }
  p->pos = to;
}

static uint32_t col_at(const parser *p, size_t pos) {
  /* Columns count bytes from 1 on pos's line; pos is at or after line_start
   * whenever a token is made. */
  return (uint32_t)(pos >= p->line_start ? pos - p->line_start + 1 : 1);
}

static bool space_at(const char *s, size_t n, size_t i, size_t *next) {
  size_t k = i;
  uint32_t cp = er__utf8_next(s, n, &k);
  if (!er__uni_space(cp)) return false;
  *next = k;
  return true;
}

static size_t skip_space(const char *s, size_t n, size_t i) {
  size_t k;
  while (i < n && space_at(s, n, i, &k)) i = k;
  return i;
}

/* Python's text.rstrip(): the end of [start, end) without trailing
 * whitespace. */
static size_t rstrip_end(const char *s, size_t start, size_t end) {
  while (end > start) {
    size_t lead = end - 1;
    while (lead > start && ((unsigned char)s[lead] & 0xc0) == 0x80 && end - lead < 4) lead--;
    size_t k = lead;
    uint32_t cp = er__utf8_next(s, end, &k);
    if (k != end || !er__uni_space(cp)) break;
    end = lead;
  }
  return end;
}

/* lstrip_blocks: drops the spaces between the last newline of [ts, te) (or
 * its start, when the text begins a line) and the tag. */
static size_t lstrip_end(const parser *p, size_t ts, size_t te) {
  size_t lp = te;
  while (lp > ts && p->src[lp - 1] != '\n') lp--;
  if (lp == te || !(lp > ts || p->line_starting)) return te;
  size_t i = lp, k;
  while (i < te && space_at(p->src, te, i, &k)) i = k;
  return i == te ? lp : te;
}

static token *push_tok(parser *p, uint8_t kind, size_t pos) {
  ER_ASSERT(p->qn < LOOKAHEAD);
  token *t = &p->q[p->qn++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->line = p->line;
  t->col = col_at(p, pos);
  return t;
}

static bool starts(const parser *p, size_t i, const char *lit) {
  size_t n = strlen(lit);
  return i + n <= p->n && memcmp(p->src + i, lit, n) == 0;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/* (\d+_)*\d+ at i: the end, or i when there is no match. */
static size_t scan_digits(const parser *p, size_t i) {
  size_t k = i;
  if (k >= p->n || !is_digit(p->src[k])) return i;
  for (;;) {
    while (k < p->n && is_digit(p->src[k])) k++;
    if (k + 1 < p->n && p->src[k] == '_' && is_digit(p->src[k + 1])) {
      k++;
      continue;
    }
    return k;
  }
}

static size_t scan_exponent(const parser *p, size_t i) {
  if (i >= p->n || (p->src[i] != 'e' && p->src[i] != 'E')) return i;
  size_t k = i + 1;
  if (k < p->n && (p->src[k] == '+' || p->src[k] == '-')) k++;
  size_t e = scan_digits(p, k);
  return e == k ? i : e;
}

static er_status lex_number(parser *p) {
  size_t s = p->pos, n = p->n;
  const char *src = p->src;
  /* float_re first, as jinja2 orders its rules: digits with a fraction,
   * an exponent, or both; never right after a '.'. */
  if (!(s > 0 && src[s - 1] == '.')) {
    size_t m = scan_digits(p, s), end = s;
    if (m > s) {
      if (m < n && src[m] == '.') {
        size_t f = scan_digits(p, m + 1);
        if (f > m + 1) {
          size_t e = scan_exponent(p, f);
          end = e;
        }
      }
      if (end == s) {
        size_t e = scan_exponent(p, m);
        if (e > m) end = e;
      }
    }
    if (end > s) {
      char buf[128];
      size_t k = 0;
      for (size_t i = s; i < end && k + 1 < sizeof buf; i++)
        if (src[i] != '_') buf[k++] = src[i];
      buf[k] = '\0';
      token *t = push_tok(p, T_FLOAT, s);
      t->f = strtod(buf, NULL);
      advance(p, end);
      return ER_STATUS_OK;
    }
  }
  /* integer_re: 0b / 0o / 0x prefixes, [1-9](_?\d)*, or 0(_?0)*. */
  int base = 10;
  size_t i = s, start;
  if (src[i] == '0' && i + 1 < n && strchr("bBoOxX", src[i + 1]) && src[i + 1]) {
    char c = src[i + 1];
    base = (c == 'b' || c == 'B') ? 2 : (c == 'o' || c == 'O') ? 8 : 16;
  }
  uint64_t v = 0;
  bool overflow = false;
  size_t end = s;
  if (base != 10) {
    start = i + 2;
    size_t k = start;
    for (;;) {
      size_t d = k < n && src[k] == '_' ? k + 1 : k;
      if (d >= n) break;
      char c = src[d];
      int dv = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
      if (dv >= base) break;
      if (v > (UINT64_MAX - (uint64_t)dv) / (uint64_t)base) overflow = true;
      v = v * (uint64_t)base + (uint64_t)dv;
      k = d + 1;
    }
    if (k == start) {
      /* "0x" without digits lexes as 0 followed by a name, as jinja2 does. */
      base = 10;
    } else {
      end = k;
    }
  }
  if (base == 10) {
    v = 0;
    size_t k = s;
    if (src[k] == '0') {
      k++;
      while (k + 1 < n && ((src[k] == '_' && src[k + 1] == '0'))) k += 2;
      while (k < n && src[k] == '0') k++;
    } else {
      for (;;) {
        size_t d = (k > s && k < n && src[k] == '_') ? k + 1 : k;
        if (d >= n || !is_digit(src[d])) break;
        if (v > (UINT64_MAX - 9) / 10) overflow = true;
        v = v * 10 + (uint64_t)(src[d] - '0');
        k = d + 1;
      }
    }
    end = k;
  }
  if (overflow || v > (uint64_t)INT64_MAX)
    return er__clex_perr(p, p->line, col_at(p, s), "integer literal '%.*s' is larger than 64 bits", (int)(end - s), src + s);
  token *t = push_tok(p, T_INT, s);
  t->i = (int64_t)v;
  advance(p, end);
  return ER_STATUS_OK;
}

static int hexval(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A string literal, decoded as jinja2 decodes it: Python's unicode-escape
 * codec over the text with non-ASCII characters backslash-replaced. */
static er_status lex_string(parser *p) {
  const char *src = p->src;
  size_t s = p->pos, n = p->n;
  char q = src[s];
  size_t i = s + 1;
  while (i < n && src[i] != q) i += src[i] == '\\' ? 2 : 1;
  if (i >= n) return er__clex_perr(p, p->line, col_at(p, s), "unterminated string literal");
  size_t end = i + 1;
  char *out = er__arena_alloc(&p->t->arena, 2 * (i - s) + 1);
  if (!out) return p->st = ER_STATUS_OUT_OF_MEMORY;
  size_t o = 0;
  for (size_t k = s + 1; k < i;) {
    unsigned char c = (unsigned char)src[k];
    if (c != '\\') {
      out[o++] = (char)c;
      k++;
      continue;
    }
    unsigned char e = (unsigned char)src[k + 1];
    k += 2;
    uint32_t cp;
    int digits = 0;
    switch (e) {
    case '\n': continue;
    case '\\': out[o++] = '\\'; continue;
    case '\'': out[o++] = '\''; continue;
    case '"': out[o++] = '"'; continue;
    case 'a': out[o++] = '\a'; continue;
    case 'b': out[o++] = '\b'; continue;
    case 'f': out[o++] = '\f'; continue;
    case 'n': out[o++] = '\n'; continue;
    case 'r': out[o++] = '\r'; continue;
    case 't': out[o++] = '\t'; continue;
    case 'v': out[o++] = '\v'; continue;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    case 'N':
      return er__clex_perr(p, p->line, col_at(p, s), "string escape \\N{...} (named Unicode characters) is not supported");
    default:
      if (e >= '0' && e <= '7') {
        cp = e - '0';
        for (int d = 0; d < 2 && k < i && src[k] >= '0' && src[k] <= '7'; d++) cp = cp * 8 + (uint32_t)(src[k++] - '0');
        o += er__utf8_put(cp, out + o);
        continue;
      }
      if (e >= 0x80) {
        /* jinja2 backslash-replaces the character (\xhh, \uhhhh or
         * \Uhhhhhhhh) before decoding escapes, so the backslash in front
         * escapes the replacement's backslash and the text stays literal:
         * at most 10 bytes out for the 3 to 5 read. */
        size_t kk = k - 1;
        cp = er__utf8_next(src, i, &kk);
        k = kk;
        char tmp[16];
        int m = cp < 0x100 ? snprintf(tmp, sizeof tmp, "\\x%02x", cp)
                : cp < 0x10000 ? snprintf(tmp, sizeof tmp, "\\u%04x", cp)
                               : snprintf(tmp, sizeof tmp, "\\U%08x", cp);
        memcpy(out + o, tmp, (size_t)m);
        o += (size_t)m;
        continue;
      }
      /* Unknown escapes keep the backslash, as Python's codec does. */
      out[o++] = '\\';
      k--;
      continue;
    }
    cp = 0;
    for (int d = 0; d < digits; d++) {
      int h = k < i ? hexval(src[k]) : -1;
      if (h < 0)
        return er__clex_perr(p, p->line, col_at(p, s), "truncated \\%c escape in a string literal (%d hex digits needed)", e,
                    digits);
      cp = cp * 16 + (uint32_t)h;
      k++;
    }
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return er__clex_perr(p, p->line, col_at(p, s), "string escape U+%X is not a Unicode scalar value", cp);
    o += er__utf8_put(cp, out + o);
  }
  out[o] = '\0';
  token *t = push_tok(p, T_STRING, s);
  t->s = out;
  t->len = o;
  advance(p, end);
  return ER_STATUS_OK;
}

static er_status lex_operator(parser *p) {
  static const struct { const char *s; uint8_t op; } ops[] = {
      {"**", P_POW}, {"//", P_FLOORDIV}, {"==", P_EQ}, {"!=", P_NE}, {">=", P_GTEQ}, {"<=", P_LTEQ},
      {"+", P_ADD}, {"-", P_SUB}, {"/", P_DIV}, {"*", P_MUL}, {"%", P_MOD}, {"~", P_TILDE},
      {"[", P_LBRACKET}, {"]", P_RBRACKET}, {"(", P_LPAREN}, {")", P_RPAREN}, {"{", P_LBRACE},
      {"}", P_RBRACE}, {">", P_GT}, {"<", P_LT}, {"=", P_ASSIGN}, {".", P_DOT}, {":", P_COLON},
      {"|", P_PIPE}, {",", P_COMMA}, {";", P_SEMICOLON},
  };
  size_t s = p->pos;
  for (size_t k = 0; k < ER_ARRAY_LEN(ops); k++) {
    if (!starts(p, s, ops[k].s)) continue;
    uint8_t op = ops[k].op;
    if (op == P_LBRACE || op == P_LPAREN || op == P_LBRACKET) {
      if (p->n_brackets >= ER_CHAT_MAX_DEPTH)
        return plimit(p, p->line, col_at(p, s), "bracket nesting", "ER_CHAT_MAX_DEPTH", ER_CHAT_MAX_DEPTH);
      p->brackets[p->n_brackets++] = op == P_LBRACE ? '}' : op == P_LPAREN ? ')' : ']';
    } else if (op == P_RBRACE || op == P_RPAREN || op == P_RBRACKET) {
      char c = p->src[s];
      if (!p->n_brackets) return er__clex_perr(p, p->line, col_at(p, s), "unexpected '%c'", c);
      char want = p->brackets[--p->n_brackets];
      if (want != c) return er__clex_perr(p, p->line, col_at(p, s), "unexpected '%c', expected '%c'", c, want);
    }
    token *t = push_tok(p, T_OP, s);
    t->op = op;
    advance(p, s + strlen(ops[k].s));
    return ER_STATUS_OK;
  }
  size_t k = s;
  uint32_t cp = er__utf8_next(p->src, p->n, &k);
  char tmp[8] = {0};
  er__utf8_put(cp, tmp);
  return er__clex_perr(p, p->line, col_at(p, s), "unexpected character '%s' inside a tag", tmp);
}

/* One step inside {% %} or {{ }}: a token, or the end of the tag. */
static er_status lex_tag(parser *p) {
  for (;;) {
    size_t s = p->pos;
    if (s >= p->n)
      return er__clex_perr(p, p->tag_line, p->tag_col, "unterminated '%s' tag: the template ends before its '%s'",
                  p->state == 1 ? "{%" : "{{", p->state == 1 ? "%}" : "}}");
    if (!p->n_brackets) {
      size_t end = 0;
      if (p->state == 1) {
        if (starts(p, s, "+%}")) end = s + 3;
        else if (starts(p, s, "-%}")) end = skip_space(p->src, p->n, s + 3);
        else if (starts(p, s, "%}")) end = s + 2 + (s + 2 < p->n && p->src[s + 2] == '\n');
      } else {
        if (starts(p, s, "-}}")) end = skip_space(p->src, p->n, s + 3);
        else if (starts(p, s, "}}")) end = s + 2;
      }
      if (end) {
        push_tok(p, p->state == 1 ? T_BLOCK_END : T_VAR_END, s);
        p->line_starting = p->src[end - 1] == '\n';
        advance(p, end);
        p->state = 0;
        return ER_STATUS_OK;
      }
    }
    size_t k;
    if (space_at(p->src, p->n, s, &k)) {
      advance(p, skip_space(p->src, p->n, s));
      continue;
    }
    char c = p->src[s];
    if (is_digit(c)) return lex_number(p);
    if (is_name_start(c)) {
      size_t e = s;
      while (e < p->n && is_name_char(p->src[e])) e++;
      token *t = push_tok(p, T_NAME, s);
      t->s = p->src + s;
      t->len = e - s;
      advance(p, e);
      return ER_STATUS_OK;
    }
    if (c == '\'' || c == '"') return lex_string(p);
    return lex_operator(p);
  }
}

/* The end of a {% raw %} block: the first {% endraw %} after `from`. */
static er_status lex_raw(parser *p, size_t from, uint32_t line, uint32_t col) {
  for (size_t i = from; i + 1 < p->n; i++) {
    if (p->src[i] != '{' || p->src[i + 1] != '%') continue;
    size_t k = i + 2;
    char sign = k < p->n && (p->src[k] == '-' || p->src[k] == '+') ? p->src[k] : 0;
    if (sign) k++;
    k = skip_space(p->src, p->n, k);
    if (!starts(p, k, "endraw")) continue;
    k = skip_space(p->src, p->n, k + 6);
    size_t end = 0;
    if (starts(p, k, "+%}")) end = k + 3;
    else if (starts(p, k, "-%}")) end = skip_space(p->src, p->n, k + 3);
    else if (starts(p, k, "%}")) end = k + 2 + (k + 2 < p->n && p->src[k + 2] == '\n');
    if (!end) continue;
    size_t te = i;
    if (sign == '-') te = rstrip_end(p->src, from, te);
    else if (sign != '+') te = lstrip_end(p, from, te);
    if (te > from) {
      token *t = push_tok(p, T_DATA, from);
      t->s = p->src + from;
      t->len = te - from;
    }
    p->line_starting = p->src[end - 1] == '\n';
    advance(p, end);
    return ER_STATUS_OK;
  }
  return er__clex_perr(p, line, col, "missing {%% endraw %%} for this {%% raw %%}");
}

/* One step in template text: data up to the next tag and the tag's start
 * (comments are consumed whole). */
static er_status lex_text(parser *p) {
  size_t s = p->pos;
  size_t i = s;
  for (;;) {
    const char *b = i < p->n ? memchr(p->src + i, '{', p->n - i) : NULL;
    if (!b) {
      token *t = push_tok(p, T_DATA, s);
      t->s = p->src + s;
      t->len = p->n - s;
      advance(p, p->n);
      return ER_STATUS_OK;
    }
    i = (size_t)(b - p->src);
    if (i + 1 < p->n && (p->src[i + 1] == '%' || p->src[i + 1] == '{' || p->src[i + 1] == '#')) break;
    i++;
  }
  char kind = p->src[i + 1];
  size_t after = i + 2;
  char sign = after < p->n && (p->src[after] == '-' || p->src[after] == '+') ? p->src[after] : 0;
  if (sign) after++;
  /* {% raw %} (only with %} or -%} right after the word, as jinja2's rule). */
  size_t raw_end = 0;
  if (kind == '%') {
    size_t k = skip_space(p->src, p->n, after);
    if (starts(p, k, "raw")) {
      k = skip_space(p->src, p->n, k + 3);
      if (starts(p, k, "-%}")) raw_end = skip_space(p->src, p->n, k + 3);
      else if (starts(p, k, "%}")) raw_end = k + 2;
    }
  }
  size_t te = i;
  if (sign == '-') te = rstrip_end(p->src, s, te);
  else if (sign != '+' && kind != '{') te = lstrip_end(p, s, te);
  if (te > s) {
    token *t = push_tok(p, T_DATA, s);
    t->s = p->src + s;
    t->len = te - s;
  }
  advance(p, i);
  uint32_t line = p->line, col = col_at(p, i);
  p->line_starting = false;
  if (raw_end) {
    p->line_starting = p->src[raw_end - 1] == '\n';
    advance(p, raw_end);
    return lex_raw(p, raw_end, line, col);
  }
  if (kind == '#') {
    /* The first +#}, -#} or #} ends the comment. */
    for (size_t k = after; k + 1 < p->n; k++) {
      size_t end = 0;
      if (starts(p, k, "+#}")) end = k + 3;
      else if (starts(p, k, "-#}")) end = skip_space(p->src, p->n, k + 3);
      else if (starts(p, k, "#}")) end = k + 2 + (k + 2 < p->n && p->src[k + 2] == '\n');
      if (!end) continue;
      p->line_starting = p->src[end - 1] == '\n';
      advance(p, end);
      return ER_STATUS_OK;
    }
    return er__clex_perr(p, line, col, "unterminated comment: missing '#}'");
  }
  push_tok(p, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, i);
  p->tag_line = line;
  p->tag_col = col;
  p->state = kind == '%' ? 1 : 2;
  p->n_brackets = 0;
  advance(p, after);
  return ER_STATUS_OK;
}

/* Makes sure q[k] exists (an EOF token once the source, or a lexer error,
 * ends the stream). */
void er__clex_fill(parser *p, int k) {
  while (p->qn <= k) {
    if (p->st) {
      token *t = push_tok(p, T_EOF, p->pos);
      (void)t;
      continue;
    }
    if (p->state == 0 && p->pos >= p->n) {
      push_tok(p, T_EOF, p->pos);
      continue;
    }
    if (p->state == 0) lex_text(p);
    else lex_tag(p);
  }
}

/* ======================================================================== */
