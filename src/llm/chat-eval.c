/* chat-eval.c - the chat-template evaluator: walks the AST of chat-parse.c
 * over a conversation and writes the prompt.
 *
 * Semantics are jinja2's as transformers configures it (sandboxed and
 * immutable: list.append, dict.update and the like are refused):
 *  - variables live in frames: the template's top level, one per for-loop
 *    iteration (a `set` inside a loop is gone at the next iteration, as in
 *    Jinja), one per macro call whose parent is the top level (macros see
 *    the top level's variables as they are when called);
 *  - a missing variable, attribute or item is Undefined: falsy, prints as
 *    "", iterates as empty, and fails when used further (attribute access,
 *    arithmetic, calls), with the message naming it;
 *  - printing uses Python's str(): None, True, [1, 'a'], 1.0.
 *
 * Bounds: every node evaluated is a step and bulk copies are charged by
 * size (ER_CHAT_MAX_STEPS); recursion through expressions, blocks and
 * macros is capped (ER_CHAT_MAX_FRAMES, macro calls ER_CHAT_MAX_DEPTH);
 * live values and buffers are capped (ER_CHAT_MAX_LIVE_BYTES) and so is
 * the output (ER_CHAT_MAX_OUTPUT_BYTES); range() is capped as jinja2's
 * sandbox caps it (ER_CHAT_MAX_RANGE). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "llm/chat-impl.h"

#define NOINLINE __attribute__((noinline))

struct er_chat_scope {
  er_chat_scope *parent;
  size_t n, cap;
  const char **names;
  er_cv *vals;             /* owned references */
};

/* Evaluated call arguments: v[0..npos) positional, v[npos..npos+nkw)
 * named kw[i]. */
typedef struct cargs {
  er_cv *v;
  size_t npos, nkw;
  const char *const *kw;
} cargs;

enum { B_RANGE = 1, B_NAMESPACE, B_DICT, B_RAISE, B_STRFTIME };

static const struct {
  const char *name;
  int id;
} builtins[] = {
    {"range", B_RANGE}, {"namespace", B_NAMESPACE}, {"dict", B_DICT},
    {"raise_exception", B_RAISE}, {"strftime_now", B_STRFTIME},
};

static const char LOOP_NAME[] = "loop";

static er_status eval(er_chat_rt *r, const er_chat_node *n, er_cv *out);
static er_status exec_block(er_chat_rt *r, er_chat_node *const *kids, uint32_t n);
static er_status apply_filter(er_chat_rt *r, const char *name, er_cv in, cargs *a, er_cv *out);
static er_status apply_test(er_chat_rt *r, const char *name, er_cv in, cargs *a, bool *out);

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

static er_status rerr(er_chat_rt *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static er_status rerr(er_chat_rt *r, const char *fmt, ...) {
  char msg[800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return er__error(ER_STATUS_INVALID_ARGUMENT, "chat template line %u: %s", r->line, msg);
}

static er_status undef_err(er_chat_rt *r, er_cv v) {
  return rerr(r, "'%s' is undefined", v.undef_name ? v.undef_name : "value");
}

static const char *tname(er_cv v) { return er__cv_type_name(v); }

/* ======================================================================== */
/* Frames of variables                                                       */
/* ======================================================================== */

static er_cv *scope_find(er_chat_scope *s, const char *name) {
  for (size_t i = s->n; i-- > 0;)
    if (s->names[i] == name || strcmp(s->names[i], name) == 0) return &s->vals[i];
  return NULL;
}

static er_cv *lookup(er_chat_rt *r, const char *name) {
  for (er_chat_scope *s = r->scope; s; s = s->parent) {
    r->steps++;
    er_cv *v = scope_find(s, name);
    if (v) return v;
  }
  return NULL;
}

/* Binds name to v in s, taking v's reference. */
static er_status scope_set(er_chat_rt *r, er_chat_scope *s, const char *name, er_cv v) {
  er_cv *slot = scope_find(s, name);
  if (slot) {
    er_cv old = *slot;
    *slot = v;
    er__cv_unref(r, old);
    return ER_STATUS_OK;
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    size_t grow = (cap - s->cap) * (sizeof(er_cv) + sizeof(char *));
    er_status st = er__cv_charge(r, grow);
    if (st) {
      er__cv_unref(r, v);
      return st;
    }
    const char **nn = realloc(s->names, cap * sizeof(char *));
    if (nn) s->names = nn;
    er_cv *vv = nn ? realloc(s->vals, cap * sizeof(er_cv)) : NULL;
    if (vv) s->vals = vv;
    if (!nn || !vv) {
      er__cv_uncharge(r, grow);
      er__cv_unref(r, v);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for chat-template variables");
    }
    s->cap = cap;
  }
  s->names[s->n] = name;
  s->vals[s->n] = v;
  s->n++;
  return ER_STATUS_OK;
}

static void scope_clear(er_chat_rt *r, er_chat_scope *s) {
  for (size_t i = 0; i < s->n; i++) er__cv_unref(r, s->vals[i]);
  s->n = 0;
}

static void scope_release(er_chat_rt *r, er_chat_scope *s) {
  scope_clear(r, s);
  if (s->cap) er__cv_uncharge(r, s->cap * (sizeof(er_cv) + sizeof(char *)));
  free(s->names);
  free(s->vals);
  s->names = NULL;
  s->vals = NULL;
  s->cap = 0;
}

/* ======================================================================== */
/* Output                                                                    */
/* ======================================================================== */

static er_status out_limit(er_chat_rt *r) {
  return er__error(ER_STATUS_LIMIT, "chat template line %u: output exceeds ER_CHAT_MAX_OUTPUT_BYTES (%u bytes)",
                   r->line, (unsigned)ER_CHAT_MAX_OUTPUT_BYTES);
}

static er_status emit(er_chat_rt *r, const char *s, size_t n) {
  if (n > ER_CHAT_MAX_OUTPUT_BYTES || r->out->len > ER_CHAT_MAX_OUTPUT_BYTES - n) return out_limit(r);
  return er__cv_buf_put(r, r->out, s, n);
}

static er_status emit_value(er_chat_rt *r, er_cv v) {
  if (v.type == ER_CV_STR) return emit(r, ER_CV_STR_OF(v)->data, ER_CV_STR_OF(v)->len);
  ER_CHECK(er__cv_to_str(r, v, r->out));
  return r->out->len > ER_CHAT_MAX_OUTPUT_BYTES ? out_limit(r) : ER_STATUS_OK;
}

/* ======================================================================== */
/* Small value helpers                                                       */
/* ======================================================================== */

static bool is_int(er_cv v) { return v.type == ER_CV_INT || v.type == ER_CV_BOOL; }
static int64_t int_of(er_cv v) { return v.type == ER_CV_INT ? v.i : v.b; }
static bool is_num(er_cv v) { return is_int(v) || v.type == ER_CV_FLOAT; }
static double float_of(er_cv v) { return v.type == ER_CV_FLOAT ? v.f : (double)int_of(v); }

static er_status new_str(er_chat_rt *r, const char *s, size_t n, er_cv *out) { return er__cv_str_new(r, s, n, out); }
static er_status new_cstr(er_chat_rt *r, const char *s, er_cv *out) { return er__cv_str_new(r, s, strlen(s), out); }

/* str(v) as a string value (a new reference). */
static er_status str_of(er_chat_rt *r, er_cv v, er_cv *out) {
  if (v.type == ER_CV_STR) {
    er__cv_ref(v);
    *out = v;
    return ER_STATUS_OK;
  }
  er_cv_buf b = {0};
  er_status st = er__cv_to_str(r, v, &b);
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  return er__cv_str_from_buf(r, &b, out);
}

static er_status need_str(er_chat_rt *r, er_cv v, const char *what) {
  if (v.type == ER_CV_STR) return ER_STATUS_OK;
  if (v.type == ER_CV_UNDEFINED) return undef_err(r, v);
  return rerr(r, "%s must be a string, not '%s'", what, tname(v));
}

/* Iterates v as Python's iter() would, into a list (a new reference):
 * lists and tuples themselves, a dict's keys, a string's characters,
 * nothing for Undefined. */
static NOINLINE er_status to_items(er_chat_rt *r, er_cv v, er_cv *out) {
  switch (v.type) {
  case ER_CV_LIST: {
    er_cv_list *l = ER_CV_LIST_OF(v);
    if (l->generator) {
      if (l->failed)
        return er__error(ER_STATUS_INVALID_ARGUMENT, "%s", ER_CV_STR_OF(l->items[0])->data);
      if (l->consumed) return er__cv_list_new(r, 0, out);
      l->consumed = true;
    }
    er__cv_ref(v);
    *out = v;
    return ER_STATUS_OK;
  }
  case ER_CV_UNDEFINED: return er__cv_list_new(r, 0, out);
  case ER_CV_DICT: {
    er_cv_dict *d = ER_CV_DICT_OF(v);
    ER_CHECK(er__cv_list_new(r, d->n, out));
    for (size_t i = 0; i < d->n; i++) {
      er__cv_ref(d->keys[i]);
      er_status st = er__cv_list_push(r, *out, d->keys[i]);
      if (st) {
        er__cv_unref(r, *out);
        return st;
      }
    }
    return ER_STATUS_OK;
  }
  case ER_CV_STR: {
    er_cv_str *s = ER_CV_STR_OF(v);
    ER_CHECK(er__cv_list_new(r, s->nchars, out));
    size_t i = 0;
    while (i < s->len) {
      size_t st0 = i;
      er__utf8_next(s->data, s->len, &i);
      er_cv c;
      er_status st = new_str(r, s->data + st0, i - st0, &c);
      if (!st) st = er__cv_list_push(r, *out, c);
      if (st) {
        er__cv_unref(r, *out);
        return st;
      }
    }
    return ER_STATUS_OK;
  }
  default: return rerr(r, "'%s' object is not iterable", tname(v));
  }
}

/* The value of a filter jinja2 computes as a generator, from the filter's
 * status and eager result: failures of the computation itself (not caps)
 * wait until the generator is iterated, as in Python. */
static er_status as_generator(er_chat_rt *r, er_status st, er_cv *out) {
  if (st == ER_STATUS_OK) {
    ER_CV_LIST_OF(*out)->generator = true;
    return ER_STATUS_OK;
  }
  if (st != ER_STATUS_INVALID_ARGUMENT) return st;
  er_cv msg;
  ER_CHECK(new_cstr(r, er_last_error(), &msg));
  er__error_clear();
  st = er__cv_list_new(r, 1, out);
  if (st) {
    er__cv_unref(r, msg);
    return st;
  }
  ER_CHECK(er__cv_list_push(r, *out, msg));
  ER_CV_LIST_OF(*out)->generator = ER_CV_LIST_OF(*out)->failed = true;
  return ER_STATUS_OK;
}

static bool is_gen(er_cv v) { return v.type == ER_CV_LIST && ER_CV_LIST_OF(v)->generator; }
/* A list as Python's list/tuple operators see one (not a generator or range). */
static bool is_plain_list(er_cv v) {
  return v.type == ER_CV_LIST && !ER_CV_LIST_OF(v)->generator && !ER_CV_LIST_OF(v)->range;
}

static bool is_hashable(er_cv v) {
  if (v.type == ER_CV_LIST) {
    if (!ER_CV_LIST_OF(v)->tuple) return false;
    for (size_t i = 0; i < ER_CV_LIST_OF(v)->n; i++)
      if (!is_hashable(ER_CV_LIST_OF(v)->items[i])) return false;
    return true;
  }
  return v.type != ER_CV_DICT && v.type != ER_CV_NAMESPACE;
}

/* ======================================================================== */
/* Text helpers: search, case, whitespace                                    */
/* ======================================================================== */

static size_t find_bytes(const char *h, size_t hn, const char *nd, size_t nn, size_t from) {
  if (nn == 0) return from <= hn ? from : SIZE_MAX;
  if (nn > hn) return SIZE_MAX;
  for (size_t i = from; i + nn <= hn; i++) {
    const char *p = memchr(h + i, nd[0], hn - nn + 1 - i);
    if (!p) return SIZE_MAX;
    i = (size_t)(p - h);
    if (memcmp(h + i, nd, nn) == 0) return i;
  }
  return SIZE_MAX;
}

static size_t rfind_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
  if (nn > hn) return SIZE_MAX;
  for (size_t i = hn - nn + 1; i-- > 0;)
    if (memcmp(h + i, nd, nn) == 0) return i;
  return SIZE_MAX;
}

static bool in_chars(uint32_t cp, const char *chars, size_t n) {
  size_t i = 0;
  while (i < n)
    if (er__utf8_next(chars, n, &i) == cp) return true;
  return false;
}

/* Python's strip/lstrip/rstrip: `chars` NULL means whitespace. */
static void strip_range(const char *s, size_t n, const char *chars, size_t cn, bool left, bool right, size_t *b,
                        size_t *e) {
  size_t i = 0, end = n;
  if (left) {
    while (i < n) {
      size_t k = i;
      uint32_t cp = er__utf8_next(s, n, &k);
      if (chars ? !in_chars(cp, chars, cn) : !er__uni_space(cp)) break;
      i = k;
    }
  }
  if (right) {
    while (end > i) {
      size_t lead = end - 1;
      while (lead > i && ((unsigned char)s[lead] & 0xc0) == 0x80) lead--;
      size_t k = lead;
      uint32_t cp = er__utf8_next(s, end, &k);
      if (chars ? !in_chars(cp, chars, cn) : !er__uni_space(cp)) break;
      end = lead;
    }
  }
  *b = i;
  *e = end;
}

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_JTITLE, CASE_SWAP };

static bool jtitle_sep(uint32_t cp) {
  return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || er__uni_space(cp);
}

static er_status put_cp(er_chat_rt *r, er_cv_buf *b, uint32_t cp) {
  char u[4];
  return er__cv_buf_put(r, b, u, er__utf8_put(cp, u));
}

static er_status put_upper(er_chat_rt *r, er_cv_buf *b, uint32_t cp) {
  if (cp == 0xdf) return er__cv_buf_put(r, b, "SS", 2);          /* ß */
  if (cp == 0x149) return er__cv_buf_put(r, b, "\xca\xbcN", 3);  /* ŉ */
  if (cp == 0xfb01) return er__cv_buf_put(r, b, "FI", 2);        /* ﬁ */
  if (cp == 0xfb02) return er__cv_buf_put(r, b, "FL", 2);        /* ﬂ */
  return put_cp(r, b, er__uni_upper(cp));
}

static er_status put_title(er_chat_rt *r, er_cv_buf *b, uint32_t cp) {
  if (cp == 0xdf) return er__cv_buf_put(r, b, "Ss", 2);
  return put_upper(r, b, cp);
}

static er_status put_lower(er_chat_rt *r, er_cv_buf *b, const char *s, size_t n, size_t at, uint32_t cp) {
  if (cp == 0x130) return er__cv_buf_put(r, b, "i\xcc\x87", 3); /* İ */
  if (cp == 0x3a3) {
    /* Python's final sigma: a capital sigma after a cased letter and not
     * before one lowers to ς. */
    bool before = false, after = false;
    size_t k = at;
    while (k > 0) {
      size_t lead = k - 1;
      while (lead > 0 && ((unsigned char)s[lead] & 0xc0) == 0x80) lead--;
      size_t q = lead;
      uint32_t c = er__utf8_next(s, n, &q);
      k = lead;
      if (c == '\'' || c == 0x2019 || c == 0xad) continue;
      before = er__uni_cased(c);
      break;
    }
    size_t q = at;
    er__utf8_next(s, n, &q);
    while (q < n) {
      uint32_t c = er__utf8_next(s, n, &q);
      if (c == '\'' || c == 0x2019 || c == 0xad) continue;
      after = er__uni_cased(c);
      break;
    }
    return put_cp(r, b, before && !after ? 0x3c2 : 0x3c3);
  }
  return put_cp(r, b, er__uni_lower(cp));
}

static NOINLINE er_status case_map(er_chat_rt *r, er_cv in, int mode, er_cv *out) {
  er_cv s;
  ER_CHECK(str_of(r, in, &s));
  er_cv_str *str = ER_CV_STR_OF(s);
  er_cv_buf b = {0};
  er_status st = ER_STATUS_OK;
  bool prev_cased = false, first = true, word_start = true;
  size_t i = 0;
  while (i < str->len && !st) {
    size_t at = i;
    uint32_t cp = er__utf8_next(str->data, str->len, &i);
    switch (mode) {
    case CASE_UPPER: st = put_upper(r, &b, cp); break;
    case CASE_LOWER: st = put_lower(r, &b, str->data, str->len, at, cp); break;
    case CASE_SWAP:
      if (er__uni_upper(cp) != cp || cp == 0xdf) st = put_upper(r, &b, cp);
      else st = put_lower(r, &b, str->data, str->len, at, cp);
      break;
    case CASE_CAPITALIZE:
      st = first ? put_title(r, &b, cp) : put_lower(r, &b, str->data, str->len, at, cp);
      break;
    case CASE_TITLE:
      st = prev_cased ? put_lower(r, &b, str->data, str->len, at, cp) : put_title(r, &b, cp);
      prev_cased = er__uni_cased(cp);
      break;
    default: /* CASE_JTITLE: jinja2's title filter, words split at -, space, ( { [ < */
      if (jtitle_sep(cp)) {
        st = put_cp(r, &b, cp);
        word_start = true;
      } else {
        st = word_start ? put_upper(r, &b, cp) : put_lower(r, &b, str->data, str->len, at, cp);
        word_start = false;
      }
      break;
    }
    first = false;
  }
  er__cv_unref(r, s);
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  return er__cv_str_from_buf(r, &b, out);
}

static bool all_cp(const er_cv_str *s, int kind) {
  if (!s->len) return false;
  size_t i = 0;
  bool any_cased = false;
  while (i < s->len) {
    uint32_t cp = er__utf8_next(s->data, s->len, &i);
    switch (kind) {
    case 0: if (!(cp >= '0' && cp <= '9')) return false; break;
    case 1: if (!(er__uni_cased(cp) || cp >= 0x3040)) return false; break;
    case 2: if (!(er__uni_cased(cp) || cp >= 0x3040 || (cp >= '0' && cp <= '9'))) return false; break;
    case 3: if (!er__uni_space(cp)) return false; break;
    case 4: /* isupper */
      if (er__uni_upper(cp) != cp) return false;
      if (er__uni_lower(cp) != cp) any_cased = true;
      break;
    case 5: /* islower */
      if (er__uni_lower(cp) != cp) return false;
      if (er__uni_upper(cp) != cp || cp == 0xdf) any_cased = true;
      break;
    }
  }
  return kind < 4 ? true : any_cased;
}

/* ======================================================================== */
/* Attributes and items                                                      */
/* ======================================================================== */

static const char *const str_methods[] = {
    "upper", "lower", "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace",
    "title", "capitalize", "format", "join", "count", "find", "rfind", "index", "rindex", "isdigit",
    "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal", "splitlines",
    "swapcase", "casefold", "removeprefix", "removesuffix", "center", "ljust", "rjust", "zfill", "partition",
    "rpartition", "isascii",
    /* known to Python, refused with a clear message */
    "encode", "expandtabs", "format_map", "isidentifier", "isprintable", "istitle", "maketrans", "translate", NULL,
};
static const char *const dict_methods[] = {"get", "items", "keys", "values", "copy", "pop", "update", "clear",
                                           "setdefault", "popitem", NULL};
static const char *const list_methods[] = {"count", "index", "copy", "append", "extend", "insert", "pop",
                                           "remove", "reverse", "sort", "clear", NULL};

static bool in_names(const char *const *names, const char *name) {
  for (; *names; names++)
    if (strcmp(*names, name) == 0) return true;
  return false;
}

static bool has_method(er_cv v, const char *name) {
  switch (v.type) {
  case ER_CV_STR: return in_names(str_methods, name);
  case ER_CV_DICT: return in_names(dict_methods, name);
  case ER_CV_LIST: return in_names(list_methods, name);
  case ER_CV_LOOP: return strcmp(name, "cycle") == 0 || strcmp(name, "changed") == 0;
  default: return false;
  }
}

static er_status make_method(er_chat_rt *r, er_cv self, const char *name, er_cv *out) {
  er_cv_method *m;
  ER_CHECK(er__cv_obj_new(r, ER_CV_METHOD, sizeof *m, (void **)&m));
  er__cv_ref(self);
  m->self = self;
  m->name = name;
  out->type = ER_CV_METHOD;
  out->o = &m->h;
  return ER_STATUS_OK;
}

static er_status loop_attr(er_chat_rt *r, er_cv v, const char *name, er_cv *out) {
  er_cv_loop *l = (er_cv_loop *)v.o;
  er_cv_list *items = ER_CV_LIST_OF(l->items);
  int64_t i = l->index0, n = l->length;
  if (!strcmp(name, "index")) *out = er__cv_int(i + 1);
  else if (!strcmp(name, "index0")) *out = er__cv_int(i);
  else if (!strcmp(name, "revindex")) *out = er__cv_int(n - i);
  else if (!strcmp(name, "revindex0")) *out = er__cv_int(n - i - 1);
  else if (!strcmp(name, "first")) *out = er__cv_bool(i == 0);
  else if (!strcmp(name, "last")) *out = er__cv_bool(i == n - 1);
  else if (!strcmp(name, "length")) *out = er__cv_int(n);
  else if (!strcmp(name, "depth")) *out = er__cv_int(1);
  else if (!strcmp(name, "depth0")) *out = er__cv_int(0);
  else if (!strcmp(name, "previtem") || !strcmp(name, "nextitem")) {
    int64_t k = name[0] == 'p' ? i - 1 : i + 1;
    if (k < 0 || k >= n) {
      *out = er__cv_undef(name);
    } else {
      *out = items->items[k];
      er__cv_ref(*out);
    }
  } else if (has_method(v, name)) {
    return make_method(r, v, name, out);
  } else {
    *out = er__cv_undef(name);
  }
  return ER_STATUS_OK;
}

/* jinja2's getattr: a Python attribute first (methods), then an item. */
static NOINLINE er_status get_attr(er_chat_rt *r, er_cv obj, const char *name, er_cv *out) {
  *out = er__cv_undef(name);
  switch (obj.type) {
  case ER_CV_UNDEFINED: return undef_err(r, obj);
  case ER_CV_DICT: case ER_CV_NAMESPACE: {
    if (obj.type == ER_CV_DICT && has_method(obj, name)) return make_method(r, obj, name, out);
    er_cv *v = er__cv_dict_get_str(r, obj, name);
    if (v) {
      *out = *v;
      er__cv_ref(*out);
    }
    return ER_STATUS_OK;
  }
  case ER_CV_LOOP: return loop_attr(r, obj, name, out);
  case ER_CV_STR: case ER_CV_LIST:
    if (has_method(obj, name)) return make_method(r, obj, name, out);
    return ER_STATUS_OK;
  default: return ER_STATUS_OK;
  }
}

/* jinja2's getitem: an item first, then (for a string key) an attribute. */
static NOINLINE er_status get_item(er_chat_rt *r, er_cv obj, er_cv key, er_cv *out) {
  *out = er__cv_undef(key.type == ER_CV_STR ? ER_CV_STR_OF(key)->data : "item");
  switch (obj.type) {
  case ER_CV_UNDEFINED: return undef_err(r, obj);
  case ER_CV_DICT: case ER_CV_NAMESPACE: {
    if (!is_hashable(key)) return ER_STATUS_OK;
    er_cv *v = obj.type == ER_CV_DICT ? er__cv_dict_get(r, obj, key) : NULL;
    if (v) {
      *out = *v;
      er__cv_ref(*out);
      return ER_STATUS_OK;
    }
    break;
  }
  case ER_CV_LIST: case ER_CV_STR:
    if (is_gen(obj)) return ER_STATUS_OK; /* a generator is not subscriptable: Undefined */
    if (is_int(key)) {
      int64_t i = int_of(key);
      if (obj.type == ER_CV_LIST) {
        er_cv_list *l = ER_CV_LIST_OF(obj);
        if (i < 0) i += (int64_t)l->n;
        if (i >= 0 && i < (int64_t)l->n) {
          *out = l->items[i];
          er__cv_ref(*out);
        }
      } else {
        er_cv_str *s = ER_CV_STR_OF(obj);
        if (i < 0) i += (int64_t)s->nchars;
        if (i >= 0 && i < (int64_t)s->nchars) {
          size_t b = er__utf8_offset(s->data, s->len, s->nchars, (size_t)i), e = b;
          er__utf8_next(s->data, s->len, &e);
          return new_str(r, s->data + b, e - b, out);
        }
      }
      return ER_STATUS_OK;
    }
    break;
  default: break;
  }
  if (key.type == ER_CV_STR) return get_attr(r, obj, ER_CV_STR_OF(key)->data, out);
  return ER_STATUS_OK;
}

/* Python's slice.indices() and the slice itself. jinja2 compiles a[b:c]
 * to a plain Python subscript, so unlike a[b] its errors are not turned
 * into Undefined. */
static NOINLINE er_status do_slice(er_chat_rt *r, er_cv obj, er_cv *bounds, er_cv *out) {
  *out = er__cv_undef(NULL);
  if (obj.type == ER_CV_UNDEFINED) return undef_err(r, obj);
  if ((obj.type != ER_CV_LIST && obj.type != ER_CV_STR) || is_gen(obj))
    return rerr(r, "'%s' object is not subscriptable by a slice", tname(obj));
  int64_t v[3];
  bool given[3];
  for (int k = 0; k < 3; k++) {
    given[k] = bounds[k].type != ER_CV_NONE;
    if (given[k] && !is_int(bounds[k]))
      return rerr(r, "slice indices must be integers or None, not '%s'", tname(bounds[k]));
    v[k] = given[k] ? int_of(bounds[k]) : 0;
  }
  int64_t step = given[2] ? v[2] : 1;
  if (step == 0) return rerr(r, "slice step cannot be zero");
  bool is_list = obj.type == ER_CV_LIST;
  er_cv_str *s = is_list ? NULL : ER_CV_STR_OF(obj);
  int64_t len = is_list ? (int64_t)ER_CV_LIST_OF(obj)->n : (int64_t)s->nchars;
  int64_t start, stop;
  if (!given[0]) start = step < 0 ? len - 1 : 0;
  else {
    start = v[0];
    if (start < 0) {
      start += len;
      if (start < 0) start = step < 0 ? -1 : 0;
    } else if (start >= len) {
      start = step < 0 ? len - 1 : len;
    }
  }
  if (!given[1]) stop = step < 0 ? -1 : len;
  else {
    stop = v[1];
    if (stop < 0) {
      stop += len;
      if (stop < 0) stop = step < 0 ? -1 : 0;
    } else if (stop >= len) {
      stop = step < 0 ? len - 1 : len;
    }
  }
  int64_t count = 0;
  if (step > 0 && start < stop) count = (stop - start - 1) / step + 1;
  else if (step < 0 && stop < start) count = (start - stop - 1) / (-step) + 1;
  ER_CHECK(er__cv_step(r, (uint64_t)count / 16));
  if (is_list) {
    er_cv_list *l = ER_CV_LIST_OF(obj);
    ER_CHECK(er__cv_list_new(r, (size_t)count, out));
    ER_CV_LIST_OF(*out)->tuple = l->tuple;
    for (int64_t k = 0, i = start; k < count; k++, i += step) {
      er__cv_ref(l->items[i]);
      er_status st = er__cv_list_push(r, *out, l->items[i]);
      if (st) {
        er__cv_unref(r, *out);
        *out = er__cv_undef(NULL);
        return st;
      }
    }
    return ER_STATUS_OK;
  }
  if (step == 1) {
    size_t b = er__utf8_offset(s->data, s->len, s->nchars, (size_t)start);
    size_t e = er__utf8_offset(s->data, s->len, s->nchars, (size_t)(start + count));
    return new_str(r, s->data + b, count ? e - b : 0, out);
  }
  er_cv_buf b = {0};
  er_status st = ER_STATUS_OK;
  for (int64_t k = 0, i = start; k < count && !st; k++, i += step) {
    size_t off = er__utf8_offset(s->data, s->len, s->nchars, (size_t)i), e = off;
    er__utf8_next(s->data, s->len, &e);
    st = er__cv_buf_put(r, &b, s->data + off, e - off);
    if (!st && s->nchars != s->len) st = er__cv_step(r, (uint64_t)s->nchars / ER_CHAT_STEP_BYTES);
  }
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  return er__cv_str_from_buf(r, &b, out);
}

/* ======================================================================== */
/* Operators                                                                 */
/* ======================================================================== */

static const char *op_name(int op) {
  static const char *const names[] = {"", "+", "-", "*", "/", "//", "%", "**"};
  return op > 0 && op < (int)ER_ARRAY_LEN(names) ? names[op] : "?";
}

static er_status html_escape(er_chat_rt *r, const er_cv_str *s, er_cv_buf *b) {
  for (size_t i = 0; i < s->len; i++) {
    const char *e = NULL;
    switch (s->data[i]) {
    case '&': e = "&amp;"; break;
    case '<': e = "&lt;"; break;
    case '>': e = "&gt;"; break;
    case '"': e = "&#34;"; break;
    case '\'': e = "&#39;"; break;
    default: break;
    }
    ER_CHECK(e ? er__cv_buf_put(r, b, e, strlen(e)) : er__cv_buf_putc(r, b, s->data[i]));
  }
  return ER_STATUS_OK;
}

static er_status str_concat(er_chat_rt *r, er_cv x, er_cv y, er_cv *out) {
  er_cv_str *a = ER_CV_STR_OF(x), *b = ER_CV_STR_OF(y);
  er_cv_buf buf = {0};
  er_status st;
  bool markup = a->markup || b->markup;
  /* markupsafe: `Markup + str` (either side) HTML-escapes the plain str. */
  if (markup && !a->markup) st = html_escape(r, a, &buf);
  else st = er__cv_buf_put(r, &buf, a->data, a->len);
  if (!st) st = markup && !b->markup ? html_escape(r, b, &buf) : er__cv_buf_put(r, &buf, b->data, b->len);
  if (!st) st = er__cv_str_from_buf(r, &buf, out);
  else er__cv_buf_free(r, &buf);
  if (!st && markup) ER_CV_STR_OF(*out)->markup = true;
  return st;
}

static er_status repeat(er_chat_rt *r, er_cv seq, int64_t times, er_cv *out) {
  if (times < 0) times = 0;
  if (seq.type == ER_CV_STR) {
    er_cv_str *s = ER_CV_STR_OF(seq);
    if (s->len && (uint64_t)times > ER_CHAT_MAX_LIVE_BYTES / s->len)
      return er__error(ER_STATUS_LIMIT, "chat template line %u: a string repeated %lld times exceeds "
                       "ER_CHAT_MAX_LIVE_BYTES (%u)", r->line, (long long)times, (unsigned)ER_CHAT_MAX_LIVE_BYTES);
    er_cv_buf b = {0};
    for (int64_t k = 0; k < times; k++) {
      er_status st = er__cv_buf_put(r, &b, s->data, s->len);
      if (st) {
        er__cv_buf_free(r, &b);
        return st;
      }
    }
    return er__cv_str_from_buf(r, &b, out);
  }
  er_cv_list *l = ER_CV_LIST_OF(seq);
  if (l->n && (uint64_t)times > ER_CHAT_MAX_LIVE_BYTES / sizeof(er_cv) / l->n)
    return er__error(ER_STATUS_LIMIT, "chat template line %u: a list repeated %lld times exceeds "
                     "ER_CHAT_MAX_LIVE_BYTES", r->line, (long long)times);
  ER_CHECK(er__cv_list_new(r, l->n * (size_t)times, out));
  ER_CV_LIST_OF(*out)->tuple = l->tuple;
  for (int64_t k = 0; k < times; k++)
    for (size_t i = 0; i < l->n; i++) {
      er__cv_ref(l->items[i]);
      er_status st = er__cv_list_push(r, *out, l->items[i]);
      if (!st) st = er__cv_step(r, 1);
      if (st) {
        er__cv_unref(r, *out);
        return st;
      }
    }
  return ER_STATUS_OK;
}

static er_status int_pow(er_chat_rt *r, int64_t base, int64_t e, er_cv *out) {
  int64_t acc = 1;
  while (e > 0) {
    if (e & 1) {
      if (!er__mul_i64(acc, base, &acc)) return rerr(r, "integer overflow in '**' (beyond 64 bits)");
    }
    e >>= 1;
    if (e && !er__mul_i64(base, base, &base)) return rerr(r, "integer overflow in '**' (beyond 64 bits)");
  }
  *out = er__cv_int(acc);
  return ER_STATUS_OK;
}

static NOINLINE er_status binop(er_chat_rt *r, int op, er_cv x, er_cv y, er_cv *out) {
  *out = er__cv_undef(NULL);
  if (x.type == ER_CV_UNDEFINED) return undef_err(r, x);
  if (y.type == ER_CV_UNDEFINED) return undef_err(r, y);
  if (op == ER_OP_ADD) {
    if (x.type == ER_CV_STR && y.type == ER_CV_STR) return str_concat(r, x, y, out);
    if (is_plain_list(x) && is_plain_list(y) && ER_CV_LIST_OF(x)->tuple == ER_CV_LIST_OF(y)->tuple) {
      er_cv_list *a = ER_CV_LIST_OF(x), *b = ER_CV_LIST_OF(y);
      ER_CHECK(er__cv_list_new(r, a->n + b->n, out));
      ER_CV_LIST_OF(*out)->tuple = a->tuple;
      for (size_t k = 0; k < a->n + b->n; k++) {
        er_cv it = k < a->n ? a->items[k] : b->items[k - a->n];
        er__cv_ref(it);
        er_status st = er__cv_list_push(r, *out, it);
        if (st) {
          er__cv_unref(r, *out);
          *out = er__cv_undef(NULL);
          return st;
        }
      }
      return er__cv_step(r, (a->n + b->n) / 16);
    }
  }
  if (op == ER_OP_MUL) {
    if ((x.type == ER_CV_STR || is_plain_list(x)) && is_int(y)) return repeat(r, x, int_of(y), out);
    if ((y.type == ER_CV_STR || is_plain_list(y)) && is_int(x)) return repeat(r, y, int_of(x), out);
  }
  if (op == ER_OP_MOD && x.type == ER_CV_STR)
    return rerr(r, "printf-style string formatting ('...' %% values) is not supported");
  if (!is_num(x) || !is_num(y))
    return rerr(r, "unsupported operand type(s) for %s: '%s' and '%s'", op_name(op), tname(x), tname(y));
  if (is_int(x) && is_int(y)) {
    int64_t a = int_of(x), b = int_of(y), c;
    switch (op) {
    case ER_OP_ADD:
      if (!er__add_i64(a, b, &c)) return rerr(r, "integer overflow in '+' (beyond 64 bits)");
      *out = er__cv_int(c);
      return ER_STATUS_OK;
    case ER_OP_SUB:
      if (__builtin_sub_overflow(a, b, &c)) return rerr(r, "integer overflow in '-' (beyond 64 bits)");
      *out = er__cv_int(c);
      return ER_STATUS_OK;
    case ER_OP_MUL:
      if (!er__mul_i64(a, b, &c)) return rerr(r, "integer overflow in '*' (beyond 64 bits)");
      *out = er__cv_int(c);
      return ER_STATUS_OK;
    case ER_OP_DIV:
      if (!b) return rerr(r, "division by zero");
      *out = er__cv_float((double)a / (double)b);
      return ER_STATUS_OK;
    case ER_OP_FLOORDIV: case ER_OP_MOD: {
      if (!b) return rerr(r, "integer division or modulo by zero");
      if (a == INT64_MIN && b == -1) {
        if (op == ER_OP_MOD) *out = er__cv_int(0);
        else return rerr(r, "integer overflow in '//' (beyond 64 bits)");
        return ER_STATUS_OK;
      }
      int64_t q = a / b, m = a % b;
      if (m && ((m < 0) != (b < 0))) {
        q--;
        m += b;
      }
      *out = er__cv_int(op == ER_OP_MOD ? m : q);
      return ER_STATUS_OK;
    }
    default: /* POW */
      if (b >= 0) return int_pow(r, a, b, out);
      if (!a) return rerr(r, "0 cannot be raised to a negative power");
      *out = er__cv_float(pow((double)a, (double)b));
      return ER_STATUS_OK;
    }
  }
  double a = float_of(x), b = float_of(y);
  switch (op) {
  case ER_OP_ADD: *out = er__cv_float(a + b); break;
  case ER_OP_SUB: *out = er__cv_float(a - b); break;
  case ER_OP_MUL: *out = er__cv_float(a * b); break;
  case ER_OP_DIV:
    if (b == 0) return rerr(r, "float division by zero");
    *out = er__cv_float(a / b);
    break;
  case ER_OP_FLOORDIV: case ER_OP_MOD: {
    if (b == 0) return rerr(r, "float division or modulo by zero");
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    *out = er__cv_float(op == ER_OP_MOD ? m : floor((a - m) / b + 0.5));
    if (op == ER_OP_FLOORDIV) *out = er__cv_float(floor(a / b));
    break;
  }
  default:
    if (a < 0 && b != floor(b)) return rerr(r, "a negative number raised to a fractional power is complex");
    if (a == 0 && b < 0) return rerr(r, "0.0 cannot be raised to a negative power");
    *out = er__cv_float(pow(a, b));
    break;
  }
  return ER_STATUS_OK;
}

static NOINLINE er_status contains(er_chat_rt *r, er_cv hay, er_cv item, bool *out) {
  *out = false;
  switch (hay.type) {
  case ER_CV_STR: {
    if (item.type != ER_CV_STR) return rerr(r, "'in <string>' requires string as left operand, not %s", tname(item));
    er_cv_str *h = ER_CV_STR_OF(hay), *n = ER_CV_STR_OF(item);
    ER_CHECK(er__cv_step(r, h->len / ER_CHAT_STEP_BYTES));
    *out = find_bytes(h->data, h->len, n->data, n->len, 0) != SIZE_MAX;
    return ER_STATUS_OK;
  }
  case ER_CV_LIST: {
    er_cv items;
    ER_CHECK(to_items(r, hay, &items)); /* consumes a generator */
    er_cv_list *l = ER_CV_LIST_OF(items);
    er_status st = ER_STATUS_OK;
    for (size_t i = 0; i < l->n && !*out && !st; i++) st = er__cv_equal(r, l->items[i], item, out);
    er__cv_unref(r, items);
    return st;
  }
  case ER_CV_DICT:
    if (!is_hashable(item)) return rerr(r, "unhashable type: '%s'", tname(item));
    *out = er__cv_dict_get(r, hay, item) != NULL;
    return ER_STATUS_OK;
  case ER_CV_UNDEFINED: return ER_STATUS_OK; /* iterates as empty */
  default: return rerr(r, "argument of type '%s' is not iterable", tname(hay));
  }
}

static er_status compare_op(er_chat_rt *r, int op, er_cv a, er_cv b, bool *out) {
  switch (op) {
  case ER_OP_EQ: return er__cv_equal(r, a, b, out);
  case ER_OP_NE:
    ER_CHECK(er__cv_equal(r, a, b, out));
    *out = !*out;
    return ER_STATUS_OK;
  case ER_OP_IN: return contains(r, b, a, out);
  case ER_OP_NOTIN:
    ER_CHECK(contains(r, b, a, out));
    *out = !*out;
    return ER_STATUS_OK;
  default: {
    int c;
    ER_CHECK(er__cv_compare(r, a, b, &c));
    bool nan = (a.type == ER_CV_FLOAT && isnan(a.f)) || (b.type == ER_CV_FLOAT && isnan(b.f));
    *out = !nan && (op == ER_OP_LT ? c < 0 : op == ER_OP_LTEQ ? c <= 0 : op == ER_OP_GT ? c > 0 : c >= 0);
    return ER_STATUS_OK;
  }
  }
}

/* ======================================================================== */
/* Arguments                                                                 */
/* ======================================================================== */

static void args_free(er_chat_rt *r, cargs *a) {
  size_t n = a->npos + a->nkw;
  if (!a->v) return;
  for (size_t i = 0; i < n; i++) er__cv_unref(r, a->v[i]);
  free(a->v);
  er__cv_uncharge(r, n * sizeof(er_cv));
  a->v = NULL;
}

static er_status eval_args(er_chat_rt *r, const er_chat_node *n, cargs *a) {
  a->npos = n->n - n->n_kw;
  a->nkw = n->n_kw;
  a->kw = n->kw;
  a->v = NULL;
  if (!n->n) return ER_STATUS_OK;
  ER_CHECK(er__cv_charge(r, n->n * sizeof(er_cv)));
  a->v = calloc(n->n, sizeof(er_cv));
  if (!a->v) {
    er__cv_uncharge(r, n->n * sizeof(er_cv));
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for call arguments");
  }
  for (uint32_t i = 0; i < n->n; i++) {
    er_status st = eval(r, n->kids[i], &a->v[i]);
    if (st) {
      args_free(r, a);
      return st;
    }
  }
  return ER_STATUS_OK;
}

/* Argument `pos` (positional) or `name` (keyword), or NULL. */
static er_cv *argp(cargs *a, size_t pos, const char *name) {
  if (pos < a->npos) return &a->v[pos];
  if (name)
    for (size_t k = 0; k < a->nkw; k++)
      if (strcmp(a->kw[k], name) == 0) return &a->v[a->npos + k];
  return NULL;
}

/* Rejects more than `max_pos` positional arguments or keywords not in
 * `names` (NULL-terminated). */
static er_status check_args(er_chat_rt *r, cargs *a, const char *what, size_t max_pos, const char *const *names) {
  if (a->npos > max_pos) return rerr(r, "%s takes at most %zu argument(s), %zu given", what, max_pos, a->npos);
  for (size_t k = 0; k < a->nkw; k++) {
    bool ok = false;
    for (size_t j = 0; names && names[j]; j++) ok |= strcmp(names[j], a->kw[k]) == 0;
    if (!ok) return rerr(r, "%s got an unexpected keyword argument '%s'", what, a->kw[k]);
  }
  return ER_STATUS_OK;
}

static bool arg_bool(cargs *a, size_t pos, const char *name, bool dflt) {
  er_cv *v = argp(a, pos, name);
  return v ? er__cv_truthy(*v) : dflt;
}

/* ======================================================================== */
/* Methods of str, dict, list and loop                                       */
/* ======================================================================== */

static er_status push_str(er_chat_rt *r, er_cv list, const char *s, size_t n) {
  er_cv v;
  ER_CHECK(new_str(r, s, n, &v));
  return er__cv_list_push(r, list, v);
}

static bool space_at_cp(const er_cv_str *s, size_t i, size_t *next) {
  size_t k = i;
  uint32_t cp = er__utf8_next(s->data, s->len, &k);
  *next = k;
  return er__uni_space(cp);
}

/* str.split / str.rsplit. */
static NOINLINE er_status str_split(er_chat_rt *r, const er_cv_str *s, er_cv *sep, int64_t maxsplit, bool from_right,
                                    er_cv *out) {
  ER_CHECK(er__cv_list_new(r, 0, out));
  er_status st = er__cv_step(r, s->len / ER_CHAT_STEP_BYTES);
  if (!st && sep && sep->type != ER_CV_NONE) {
    st = need_str(r, *sep, "split separator");
    er_cv_str *p = st ? NULL : ER_CV_STR_OF(*sep);
    if (!st && !p->len) st = rerr(r, "empty separator");
    if (!st && !from_right) {
      size_t at = 0;
      int64_t splits = 0;
      for (;;) {
        size_t k = (maxsplit < 0 || splits < maxsplit) ? find_bytes(s->data, s->len, p->data, p->len, at) : SIZE_MAX;
        if (k == SIZE_MAX) {
          st = push_str(r, *out, s->data + at, s->len - at);
          break;
        }
        if ((st = push_str(r, *out, s->data + at, k - at))) break;
        at = k + p->len;
        splits++;
      }
    } else if (!st) {
      /* From the right: collect pieces backwards, then reverse. */
      size_t end = s->len;
      int64_t splits = 0;
      for (;;) {
        size_t k = (maxsplit < 0 || splits < maxsplit) ? rfind_bytes(s->data, end, p->data, p->len) : SIZE_MAX;
        if (k == SIZE_MAX) {
          st = push_str(r, *out, s->data, end);
          break;
        }
        if ((st = push_str(r, *out, s->data + k + p->len, end - k - p->len))) break;
        end = k;
        splits++;
      }
      er_cv_list *l = ER_CV_LIST_OF(*out);
      for (size_t i = 0; !st && i < l->n / 2; i++) {
        er_cv t = l->items[i];
        l->items[i] = l->items[l->n - 1 - i];
        l->items[l->n - 1 - i] = t;
      }
    }
  } else if (!st) {
    /* Whitespace runs separate; no empty strings. rsplit with maxsplit
     * keeps the leftover at the front. */
    if (!from_right || maxsplit < 0) {
      size_t i = 0;
      int64_t splits = 0;
      while (!st) {
        size_t k;
        while (i < s->len && space_at_cp(s, i, &k)) i = k;
        if (i >= s->len) break;
        if (maxsplit >= 0 && splits >= maxsplit) {
          st = push_str(r, *out, s->data + i, s->len - i);
          break;
        }
        size_t start = i;
        while (i < s->len && !space_at_cp(s, i, &k)) er__utf8_next(s->data, s->len, &i);
        st = push_str(r, *out, s->data + start, i - start);
        splits++;
      }
    } else {
      size_t b0, e0;
      strip_range(s->data, s->len, NULL, 0, false, true, &b0, &e0);
      size_t end = e0;
      int64_t splits = 0;
      while (!st && end > 0) {
        if (splits >= maxsplit) {
          st = push_str(r, *out, s->data, end);
          break;
        }
        size_t start = end;
        while (start > 0) {
          size_t lead = start - 1;
          while (lead > 0 && ((unsigned char)s->data[lead] & 0xc0) == 0x80) lead--;
          size_t k;
          if (space_at_cp(s, lead, &k)) break;
          start = lead;
        }
        st = push_str(r, *out, s->data + start, end - start);
        splits++;
        size_t b, e;
        strip_range(s->data, start, NULL, 0, false, true, &b, &e);
        end = e;
      }
      er_cv_list *l = ER_CV_LIST_OF(*out);
      for (size_t i = 0; !st && i < l->n / 2; i++) {
        er_cv t = l->items[i];
        l->items[i] = l->items[l->n - 1 - i];
        l->items[l->n - 1 - i] = t;
      }
    }
  }
  if (st) {
    er__cv_unref(r, *out);
    *out = er__cv_undef(NULL);
  }
  return st;
}

/* str.format: {} {0} {name}, {{ and }}, !s and !r; format specs are not
 * supported (no template in the collection uses one). */
static NOINLINE er_status str_format(er_chat_rt *r, const er_cv_str *f, cargs *a, er_cv *out) {
  er_cv_buf b = {0};
  er_status st = ER_STATUS_OK;
  size_t auto_index = 0;
  for (size_t i = 0; i < f->len && !st;) {
    char c = f->data[i];
    if ((c == '{' || c == '}') && i + 1 < f->len && f->data[i + 1] == c) {
      st = er__cv_buf_putc(r, &b, c);
      i += 2;
      continue;
    }
    if (c == '}') {
      st = rerr(r, "str.format: single '}' encountered in format string");
      break;
    }
    if (c != '{') {
      st = er__cv_buf_putc(r, &b, c);
      i++;
      continue;
    }
    size_t close = i + 1;
    while (close < f->len && f->data[close] != '}') close++;
    if (close >= f->len) {
      st = rerr(r, "str.format: single '{' encountered in format string");
      break;
    }
    const char *field = f->data + i + 1;
    size_t flen = close - i - 1, name_len = flen;
    char conv = 0;
    for (size_t k = 0; k < flen; k++) {
      if (field[k] == '!' || field[k] == ':') {
        name_len = k;
        if (field[k] == '!' && k + 1 < flen) conv = field[k + 1];
        if (field[k] == ':' || (k + 2 < flen && field[k + 2] == ':')) {
          st = rerr(r, "str.format: format specifications ('{%.*s}') are not supported", (int)flen, field);
        }
        break;
      }
    }
    if (st) break;
    er_cv *v = NULL;
    if (name_len == 0) {
      v = argp(a, auto_index++, NULL);
    } else if (field[0] >= '0' && field[0] <= '9') {
      size_t idx = 0;
      for (size_t k = 0; k < name_len; k++) idx = idx * 10 + (size_t)(field[k] - '0');
      v = argp(a, idx, NULL);
    } else {
      for (size_t k = 0; k < a->nkw; k++)
        if (strlen(a->kw[k]) == name_len && memcmp(a->kw[k], field, name_len) == 0) v = &a->v[a->npos + k];
    }
    if (!v) {
      st = rerr(r, "str.format: no argument for field '{%.*s}'", (int)flen, field);
      break;
    }
    st = conv == 'r' ? er__cv_repr(r, *v, &b) : er__cv_to_str(r, *v, &b);
    i = close + 1;
  }
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  return er__cv_str_from_buf(r, &b, out);
}

static er_status str_replace(er_chat_rt *r, const er_cv_str *s, const er_cv_str *old, const er_cv_str *rep,
                             int64_t count, er_cv *out) {
  er_cv_buf b = {0};
  er_status st = ER_STATUS_OK;
  int64_t done = 0;
  if (!old->len) {
    /* Python inserts the replacement around every character. */
    size_t i = 0;
    while (!st && (count < 0 || done < count)) {
      st = er__cv_buf_put(r, &b, rep->data, rep->len);
      done++;
      if (st || i >= s->len) break;
      size_t k = i;
      er__utf8_next(s->data, s->len, &k);
      st = er__cv_buf_put(r, &b, s->data + i, k - i);
      i = k;
    }
    if (!st) st = er__cv_buf_put(r, &b, s->data + i, s->len - i);
  } else {
    size_t at = 0;
    while (!st) {
      size_t k = (count < 0 || done < count) ? find_bytes(s->data, s->len, old->data, old->len, at) : SIZE_MAX;
      if (k == SIZE_MAX) {
        st = er__cv_buf_put(r, &b, s->data + at, s->len - at);
        break;
      }
      st = er__cv_buf_put(r, &b, s->data + at, k - at);
      if (!st) st = er__cv_buf_put(r, &b, rep->data, rep->len);
      at = k + old->len;
      done++;
    }
  }
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  return er__cv_str_from_buf(r, &b, out);
}

static er_status unsafe_method(er_chat_rt *r, er_cv self, const char *m) {
  return rerr(r, "access to attribute '%s' of '%s' object is unsafe (chat templates cannot modify values)", m,
              tname(self));
}

static er_status do_strip(er_chat_rt *r, er_cv self, er_cv *chars, bool left, bool right, er_cv *out) {
  er_cv_str *s = ER_CV_STR_OF(self);
  const char *cs = NULL;
  size_t cn = 0;
  if (chars && chars->type != ER_CV_NONE) {
    ER_CHECK(need_str(r, *chars, "strip characters"));
    cs = ER_CV_STR_OF(*chars)->data;
    cn = ER_CV_STR_OF(*chars)->len;
  }
  size_t b, e;
  strip_range(s->data, s->len, cs, cn, left, right, &b, &e);
  return new_str(r, s->data + b, e - b, out);
}

/* Python's str.splitlines boundaries. */
static size_t line_break(const char *s, size_t n, size_t i, size_t *len) {
  unsigned char c = (unsigned char)s[i];
  if (c == '\r') {
    *len = i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
    return 1;
  }
  if (c == '\n' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e) {
    *len = 1;
    return 1;
  }
  if (c >= 0x80) {
    size_t k = i;
    uint32_t cp = er__utf8_next(s, n, &k);
    if (cp == 0x85 || cp == 0x2028 || cp == 0x2029) {
      *len = k - i;
      return 1;
    }
  }
  return 0;
}

static er_status split_lines(er_chat_rt *r, const er_cv_str *s, bool keepends, er_cv *out) {
  ER_CHECK(er__cv_list_new(r, 0, out));
  size_t start = 0, i = 0;
  er_status st = ER_STATUS_OK;
  while (i < s->len && !st) {
    size_t bl;
    if (line_break(s->data, s->len, i, &bl)) {
      st = push_str(r, *out, s->data + start, (keepends ? i + bl : i) - start);
      i += bl;
      start = i;
    } else {
      i++;
    }
  }
  if (!st && start < s->len) st = push_str(r, *out, s->data + start, s->len - start);
  if (st) er__cv_unref(r, *out);
  return st;
}

static NOINLINE er_status str_method(er_chat_rt *r, er_cv self, const char *m, cargs *a, er_cv *out) {
  er_cv_str *s = ER_CV_STR_OF(self);
  static const char *const no_kw[] = {NULL};
  if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") || !strcmp(m, "capitalize") ||
      !strcmp(m, "swapcase") || !strcmp(m, "casefold")) {
    ER_CHECK(check_args(r, a, m, 0, no_kw));
    int mode = m[0] == 'u' ? CASE_UPPER : m[0] == 't' ? CASE_TITLE : m[0] == 's' ? CASE_SWAP
               : m[1] == 'a' && m[2] == 'p' ? CASE_CAPITALIZE : CASE_LOWER;
    return case_map(r, self, mode, out);
  }
  if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
    ER_CHECK(check_args(r, a, m, 1, no_kw));
    return do_strip(r, self, argp(a, 0, NULL), m[0] != 'r', m[0] != 'l', out);
  }
  if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
    static const char *const kw[] = {"sep", "maxsplit", NULL};
    ER_CHECK(check_args(r, a, m, 2, kw));
    er_cv *ms = argp(a, 1, "maxsplit");
    if (ms && !is_int(*ms)) return rerr(r, "%s: maxsplit must be an integer", m);
    return str_split(r, s, argp(a, 0, "sep"), ms ? int_of(*ms) : -1, m[0] == 'r', out);
  }
  if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
    ER_CHECK(check_args(r, a, m, 1, no_kw));
    er_cv *p = argp(a, 0, NULL);
    if (!p) return rerr(r, "%s() takes at least 1 argument", m);
    size_t np = 1;
    er_cv *cands = p;
    if (p->type == ER_CV_LIST && ER_CV_LIST_OF(*p)->tuple) {
      cands = ER_CV_LIST_OF(*p)->items;
      np = ER_CV_LIST_OF(*p)->n;
    }
    bool hit = false;
    for (size_t k = 0; k < np; k++) {
      ER_CHECK(need_str(r, cands[k], m));
      er_cv_str *x = ER_CV_STR_OF(cands[k]);
      if (x->len <= s->len &&
          memcmp(m[0] == 's' ? s->data : s->data + s->len - x->len, x->data, x->len) == 0)
        hit = true;
    }
    *out = er__cv_bool(hit);
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "replace")) {
    static const char *const kw[] = {"count", NULL};
    ER_CHECK(check_args(r, a, m, 3, kw));
    er_cv *o = argp(a, 0, NULL), *n = argp(a, 1, NULL), *c = argp(a, 2, "count");
    if (!o || !n) return rerr(r, "replace() takes at least 2 arguments");
    ER_CHECK(need_str(r, *o, "replace() argument 1"));
    ER_CHECK(need_str(r, *n, "replace() argument 2"));
    if (c && !is_int(*c)) return rerr(r, "replace(): count must be an integer");
    return str_replace(r, s, ER_CV_STR_OF(*o), ER_CV_STR_OF(*n), c ? int_of(*c) : -1, out);
  }
  if (!strcmp(m, "format")) return str_format(r, s, a, out);
  if (!strcmp(m, "join")) {
    ER_CHECK(check_args(r, a, m, 1, no_kw));
    er_cv *it = argp(a, 0, NULL);
    if (!it) return rerr(r, "join() takes exactly one argument");
    er_cv items;
    ER_CHECK(to_items(r, *it, &items));
    er_cv_list *l = ER_CV_LIST_OF(items);
    er_cv_buf b = {0};
    er_status st = ER_STATUS_OK;
    for (size_t k = 0; k < l->n && !st; k++) {
      if (l->items[k].type != ER_CV_STR) {
        st = rerr(r, "sequence item %zu: expected str instance, %s found", k, tname(l->items[k]));
        break;
      }
      if (k) st = er__cv_buf_put(r, &b, s->data, s->len);
      if (!st) st = er__cv_buf_put(r, &b, ER_CV_STR_OF(l->items[k])->data, ER_CV_STR_OF(l->items[k])->len);
    }
    er__cv_unref(r, items);
    if (st) {
      er__cv_buf_free(r, &b);
      return st;
    }
    return er__cv_str_from_buf(r, &b, out);
  }
  if (!strcmp(m, "count") || !strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") ||
      !strcmp(m, "rindex")) {
    ER_CHECK(check_args(r, a, m, 1, no_kw));
    er_cv *x = argp(a, 0, NULL);
    if (!x) return rerr(r, "%s() takes at least 1 argument", m);
    ER_CHECK(need_str(r, *x, m));
    er_cv_str *sub = ER_CV_STR_OF(*x);
    ER_CHECK(er__cv_step(r, s->len / ER_CHAT_STEP_BYTES));
    if (!strcmp(m, "count")) {
      int64_t c = 0;
      if (!sub->len) c = (int64_t)s->nchars + 1;
      else
        for (size_t at = 0; (at = find_bytes(s->data, s->len, sub->data, sub->len, at)) != SIZE_MAX; at += sub->len)
          c++;
      *out = er__cv_int(c);
      return ER_STATUS_OK;
    }
    size_t k = m[0] == 'r' ? rfind_bytes(s->data, s->len, sub->data, sub->len)
                           : find_bytes(s->data, s->len, sub->data, sub->len, 0);
    if (k == SIZE_MAX && (!strcmp(m, "index") || !strcmp(m, "rindex"))) return rerr(r, "substring not found");
    *out = er__cv_int(k == SIZE_MAX ? -1 : (int64_t)er__utf8_count(s->data, k));
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "isdigit") || !strcmp(m, "isnumeric") || !strcmp(m, "isdecimal") || !strcmp(m, "isalpha") ||
      !strcmp(m, "isalnum") || !strcmp(m, "isspace") || !strcmp(m, "isupper") || !strcmp(m, "islower")) {
    ER_CHECK(check_args(r, a, m, 0, no_kw));
    int kind = !strcmp(m, "isalpha") ? 1 : !strcmp(m, "isalnum") ? 2 : !strcmp(m, "isspace") ? 3
               : !strcmp(m, "isupper") ? 4 : !strcmp(m, "islower") ? 5 : 0;
    *out = er__cv_bool(all_cp(s, kind));
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "splitlines")) {
    static const char *const kw[] = {"keepends", NULL};
    ER_CHECK(check_args(r, a, m, 1, kw));
    return split_lines(r, s, arg_bool(a, 0, "keepends", false), out);
  }
  if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
    ER_CHECK(check_args(r, a, m, 1, no_kw));
    er_cv *x = argp(a, 0, NULL);
    if (!x) return rerr(r, "%s() takes exactly one argument", m);
    ER_CHECK(need_str(r, *x, m));
    er_cv_str *p = ER_CV_STR_OF(*x);
    bool pre = m[6] == 'p';
    if (p->len <= s->len && memcmp(pre ? s->data : s->data + s->len - p->len, p->data, p->len) == 0)
      return new_str(r, pre ? s->data + p->len : s->data, s->len - p->len, out);
    er__cv_ref(self);
    *out = self;
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust") || !strcmp(m, "zfill")) {
    ER_CHECK(check_args(r, a, m, m[0] == 'z' ? 1 : 2, no_kw));
    er_cv *w = argp(a, 0, NULL), *fill = argp(a, 1, NULL);
    if (!w || !is_int(*w)) return rerr(r, "%s() needs an integer width", m);
    const char *fc = " ";
    size_t fl = 1;
    if (fill) {
      if (fill->type != ER_CV_STR || ER_CV_STR_OF(*fill)->nchars != 1)
        return rerr(r, "%s(): the fill character must be exactly one character long", m);
      fc = ER_CV_STR_OF(*fill)->data;
      fl = ER_CV_STR_OF(*fill)->len;
    }
    int64_t width = int_of(*w), n = (int64_t)s->nchars;
    if (width > 1 << 20) return rerr(r, "%s(): width %lld is larger than %d", m, (long long)width, 1 << 20);
    int64_t pad = width > n ? width - n : 0, left = 0;
    if (m[0] == 'r') left = pad;
    else if (m[0] == 'c') left = pad / 2 + (pad & width & 1); /* CPython's centering */
    size_t skip = 0;
    er_cv_buf b = {0};
    er_status st = ER_STATUS_OK;
    if (m[0] == 'z') {
      left = pad;
      fc = "0";
      if (s->len && (s->data[0] == '+' || s->data[0] == '-')) {
        st = er__cv_buf_putc(r, &b, s->data[0]);
        skip = 1;
      }
    }
    for (int64_t k = 0; k < left && !st; k++) st = er__cv_buf_put(r, &b, fc, fl);
    if (!st) st = er__cv_buf_put(r, &b, s->data + skip, s->len - skip);
    for (int64_t k = left; k < pad && !st; k++) st = er__cv_buf_put(r, &b, fc, fl);
    if (st) {
      er__cv_buf_free(r, &b);
      return st;
    }
    return er__cv_str_from_buf(r, &b, out);
  }
  if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
    ER_CHECK(check_args(r, a, m, 1, no_kw));
    er_cv *x = argp(a, 0, NULL);
    if (!x) return rerr(r, "%s() takes exactly one argument", m);
    ER_CHECK(need_str(r, *x, m));
    er_cv_str *sep = ER_CV_STR_OF(*x);
    if (!sep->len) return rerr(r, "empty separator");
    size_t k = m[0] == 'r' ? rfind_bytes(s->data, s->len, sep->data, sep->len)
                           : find_bytes(s->data, s->len, sep->data, sep->len, 0);
    ER_CHECK(er__cv_list_new(r, 3, out));
    ER_CV_LIST_OF(*out)->tuple = true;
    er_status st;
    if (k == SIZE_MAX) {
      bool right = m[0] == 'r';
      st = push_str(r, *out, right ? "" : s->data, right ? 0 : s->len);
      if (!st) st = push_str(r, *out, "", 0);
      if (!st) st = push_str(r, *out, right ? s->data : "", right ? s->len : 0);
    } else {
      st = push_str(r, *out, s->data, k);
      if (!st) st = push_str(r, *out, sep->data, sep->len);
      if (!st) st = push_str(r, *out, s->data + k + sep->len, s->len - k - sep->len);
    }
    if (st) er__cv_unref(r, *out);
    return st;
  }
  if (!strcmp(m, "isascii")) {
    ER_CHECK(check_args(r, a, m, 0, no_kw));
    *out = er__cv_bool(s->nchars == s->len);
    return ER_STATUS_OK;
  }
  return rerr(r, "str.%s() is not supported by edgerun's chat templates", m);
}

static NOINLINE er_status dict_method(er_chat_rt *r, er_cv self, const char *m, cargs *a, er_cv *out) {
  er_cv_dict *d = ER_CV_DICT_OF(self);
  static const char *const no_kw[] = {NULL};
  if (!strcmp(m, "get")) {
    ER_CHECK(check_args(r, a, m, 2, no_kw));
    er_cv *k = argp(a, 0, NULL), *dflt = argp(a, 1, NULL);
    if (!k) return rerr(r, "get() takes at least 1 argument");
    if (!is_hashable(*k)) return rerr(r, "unhashable type: '%s'", tname(*k));
    er_cv *v = er__cv_dict_get(r, self, *k);
    *out = v ? *v : dflt ? *dflt : er__cv_none();
    er__cv_ref(*out);
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
    ER_CHECK(check_args(r, a, m, 0, no_kw));
    ER_CHECK(er__cv_list_new(r, d->n, out));
    for (size_t i = 0; i < d->n; i++) {
      er_cv item;
      er_status st = ER_STATUS_OK;
      if (m[0] == 'i') {
        st = er__cv_list_new(r, 2, &item);
        if (!st) {
          ER_CV_LIST_OF(item)->tuple = true;
          er__cv_ref(d->keys[i]);
          er__cv_ref(d->vals[i]);
          st = er__cv_list_push(r, item, d->keys[i]);
          if (!st) st = er__cv_list_push(r, item, d->vals[i]);
          else er__cv_unref(r, d->vals[i]);
          if (st) er__cv_unref(r, item);
        }
      } else {
        item = m[0] == 'k' ? d->keys[i] : d->vals[i];
        er__cv_ref(item);
      }
      if (!st) st = er__cv_list_push(r, *out, item);
      if (st) {
        er__cv_unref(r, *out);
        return st;
      }
    }
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "copy")) {
    ER_CHECK(er__cv_dict_new(r, ER_CV_DICT, out));
    for (size_t i = 0; i < d->n; i++) {
      er__cv_ref(d->keys[i]);
      er__cv_ref(d->vals[i]);
      er_status st = er__cv_dict_set(r, *out, d->keys[i], d->vals[i]);
      if (st) {
        er__cv_unref(r, *out);
        return st;
      }
    }
    return ER_STATUS_OK;
  }
  return unsafe_method(r, self, m);
}

static NOINLINE er_status list_method(er_chat_rt *r, er_cv self, const char *m, cargs *a, er_cv *out) {
  er_cv_list *l = ER_CV_LIST_OF(self);
  static const char *const no_kw[] = {NULL};
  if (!strcmp(m, "count") || !strcmp(m, "index")) {
    ER_CHECK(check_args(r, a, m, 1, no_kw));
    er_cv *x = argp(a, 0, NULL);
    if (!x) return rerr(r, "%s() takes exactly one argument", m);
    int64_t c = 0, at = -1;
    for (size_t i = 0; i < l->n; i++) {
      bool e;
      ER_CHECK(er__cv_equal(r, l->items[i], *x, &e));
      if (e) {
        c++;
        if (at < 0) at = (int64_t)i;
      }
    }
    if (m[0] == 'i' && at < 0) return rerr(r, "list.index(x): x not in list");
    *out = er__cv_int(m[0] == 'c' ? c : at);
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "copy") && !l->tuple) {
    ER_CHECK(check_args(r, a, m, 0, no_kw));
    ER_CHECK(er__cv_list_new(r, l->n, out));
    for (size_t i = 0; i < l->n; i++) {
      er__cv_ref(l->items[i]);
      er_status st = er__cv_list_push(r, *out, l->items[i]);
      if (st) {
        er__cv_unref(r, *out);
        return st;
      }
    }
    return ER_STATUS_OK;
  }
  return unsafe_method(r, self, m);
}

static NOINLINE er_status call_method(er_chat_rt *r, er_cv self, const char *m, cargs *a, er_cv *out) {
  switch (self.type) {
  case ER_CV_STR: return str_method(r, self, m, a, out);
  case ER_CV_DICT: return dict_method(r, self, m, a, out);
  case ER_CV_LIST: return list_method(r, self, m, a, out);
  case ER_CV_LOOP:
    if (!strcmp(m, "cycle")) {
      if (!a->npos) return rerr(r, "loop.cycle() needs at least one argument");
      *out = a->v[((er_cv_loop *)self.o)->index0 % (int64_t)a->npos];
      er__cv_ref(*out);
      return ER_STATUS_OK;
    }
    return rerr(r, "loop.%s() is not supported", m);
  default: return rerr(r, "'%s' object has no method '%s'", tname(self), m);
  }
}

/* ======================================================================== */
/* Filters                                                                   */
/* ======================================================================== */

/* jinja2's make_attrgetter: "a.b.0" walks getitem per part (digits as
 * integers); an integer attribute indexes. */
static NOINLINE er_status attr_path(er_chat_rt *r, er_cv item, er_cv attr, er_cv *out) {
  if (is_int(attr)) return get_item(r, item, attr, out);
  ER_CHECK(need_str(r, attr, "attribute"));
  er_cv_str *p = ER_CV_STR_OF(attr);
  er_cv curv = item;
  er__cv_ref(curv);
  size_t start = 0;
  for (;;) {
    size_t dot = start;
    while (dot < p->len && p->data[dot] != '.') dot++;
    bool digits = dot > start;
    int64_t idx = 0;
    for (size_t k = start; k < dot; k++) {
      if (p->data[k] < '0' || p->data[k] > '9' || idx > INT64_MAX / 10 - 10) digits = false;
      else idx = idx * 10 + (p->data[k] - '0');
    }
    er_cv key, next_v;
    er_status st = digits ? (key = er__cv_int(idx), ER_STATUS_OK) : new_str(r, p->data + start, dot - start, &key);
    if (!st) st = get_item(r, curv, key, &next_v);
    er__cv_unref(r, key);
    er__cv_unref(r, curv);
    if (st) return st;
    curv = next_v;
    if (dot >= p->len) break;
    start = dot + 1;
  }
  *out = curv;
  return ER_STATUS_OK;
}

/* For sort/unique/min/max/dictsort: the key of an item, lower-cased when
 * not case-sensitive (jinja2's ignore_case). */
static er_status sort_key(er_chat_rt *r, er_cv item, er_cv *attr, bool case_sensitive, er_cv *out) {
  er_cv v;
  if (attr && attr->type != ER_CV_NONE) ER_CHECK(attr_path(r, item, *attr, &v));
  else {
    v = item;
    er__cv_ref(v);
  }
  if (!case_sensitive && v.type == ER_CV_STR) {
    er_status st = case_map(r, v, CASE_LOWER, out);
    er__cv_unref(r, v);
    return st;
  }
  *out = v;
  return ER_STATUS_OK;
}

/* A stable merge sort of idx[] by keys[], as Python's sorted() is stable. */
static er_status merge_sort(er_chat_rt *r, const er_cv *keys, size_t *idx, size_t *tmp, size_t n, bool reverse) {
  if (n < 2) return ER_STATUS_OK;
  size_t h = n / 2;
  ER_CHECK(merge_sort(r, keys, idx, tmp, h, reverse));
  ER_CHECK(merge_sort(r, keys, idx + h, tmp, n - h, reverse));
  size_t i = 0, j = h, k = 0;
  while (i < h && j < n) {
    int c;
    ER_CHECK(er__cv_compare(r, keys[idx[j]], keys[idx[i]], &c));
    /* Take from the right only when strictly before the left item. */
    bool right_first = reverse ? c > 0 : c < 0;
    tmp[k++] = right_first ? idx[j++] : idx[i++];
  }
  while (i < h) tmp[k++] = idx[i++];
  while (j < n) tmp[k++] = idx[j++];
  memcpy(idx, tmp, n * sizeof(size_t));
  return ER_STATUS_OK;
}

/* Sorted order of list `items` by sort_key; *order (n entries) is malloc'd
 * and charged; release with free_order. */
static er_status sorted_indices(er_chat_rt *r, er_cv_list *l, er_cv *attr, bool cs, bool reverse, size_t **order) {
  size_t n = l->n;
  *order = NULL;
  size_t bytes = n * (2 * sizeof(size_t) + sizeof(er_cv)) + 1;
  ER_CHECK(er__cv_charge(r, bytes));
  size_t *idx = malloc(2 * n * sizeof(size_t) + 1);
  er_cv *keys = calloc(n + 1, sizeof(er_cv));
  er_status st = ER_STATUS_OK;
  if (!idx || !keys) st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory sorting %zu items", n);
  size_t made = 0;
  for (; !st && made < n; made++) st = sort_key(r, l->items[made], attr, cs, &keys[made]);
  for (size_t i = 0; !st && i < n; i++) idx[i] = i;
  if (!st) st = er__cv_step(r, n);
  if (!st) st = merge_sort(r, keys, idx, idx + n, n, reverse);
  for (size_t i = 0; i < made; i++) er__cv_unref(r, keys[i]);
  free(keys);
  if (st) {
    free(idx);
    er__cv_uncharge(r, bytes);
    return st;
  }
  *order = idx;
  return ER_STATUS_OK;
}

static void free_order(er_chat_rt *r, size_t *order, size_t n) {
  free(order);
  er__cv_uncharge(r, n * (2 * sizeof(size_t) + sizeof(er_cv)) + 1);
}

typedef er_status (*filter_fn)(er_chat_rt *r, er_cv in, cargs *a, er_cv *out);

static er_status f_length(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  (void)a;
  switch (in.type) {
  case ER_CV_STR: *out = er__cv_int((int64_t)ER_CV_STR_OF(in)->nchars); return ER_STATUS_OK;
  case ER_CV_LIST:
    if (is_gen(in)) return rerr(r, "object of type 'generator' has no len()");
    *out = er__cv_int((int64_t)ER_CV_LIST_OF(in)->n);
    return ER_STATUS_OK;
  case ER_CV_DICT: *out = er__cv_int((int64_t)ER_CV_DICT_OF(in)->n); return ER_STATUS_OK;
  case ER_CV_UNDEFINED: *out = er__cv_int(0); return ER_STATUS_OK;
  case ER_CV_LOOP: *out = er__cv_int(((er_cv_loop *)in.o)->length); return ER_STATUS_OK;
  default: return rerr(r, "object of type '%s' has no len()", tname(in));
  }
}

static er_status f_default(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"default_value", "boolean", NULL};
  ER_CHECK(check_args(r, a, "filter 'default'", 2, kw));
  er_cv *d = argp(a, 0, "default_value");
  bool boolean = arg_bool(a, 1, "boolean", false);
  if (in.type == ER_CV_UNDEFINED || (boolean && !er__cv_truthy(in))) {
    if (!d) return new_str(r, "", 0, out);
    *out = *d;
  } else {
    *out = in;
  }
  er__cv_ref(*out);
  return ER_STATUS_OK;
}

static er_status f_trim(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"chars", NULL};
  ER_CHECK(check_args(r, a, "filter 'trim'", 1, kw));
  er_cv s;
  ER_CHECK(str_of(r, in, &s));
  er_status st = do_strip(r, s, argp(a, 0, "chars"), true, true, out);
  er__cv_unref(r, s);
  return st;
}

static er_status f_case(er_chat_rt *r, er_cv in, cargs *a, int mode, const char *name, er_cv *out) {
  ER_CHECK(check_args(r, a, name, 0, NULL));
  return case_map(r, in, mode, out);
}
static er_status f_upper(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_case(r, in, a, CASE_UPPER, "filter 'upper'", out); }
static er_status f_lower(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_case(r, in, a, CASE_LOWER, "filter 'lower'", out); }
static er_status f_capitalize(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  return f_case(r, in, a, CASE_CAPITALIZE, "filter 'capitalize'", out);
}
static er_status f_title(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_case(r, in, a, CASE_JTITLE, "filter 'title'", out); }

static er_status f_string(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(check_args(r, a, "filter 'string'", 0, NULL));
  return str_of(r, in, out);
}

static er_status f_safe(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(check_args(r, a, "filter 'safe'", 0, NULL));
  if (in.type == ER_CV_STR && ER_CV_STR_OF(in)->markup) {
    er__cv_ref(in);
    *out = in;
    return ER_STATUS_OK;
  }
  er_cv s;
  ER_CHECK(str_of(r, in, &s));
  er_status st = new_str(r, ER_CV_STR_OF(s)->data, ER_CV_STR_OF(s)->len, out);
  er__cv_unref(r, s);
  if (!st) ER_CV_STR_OF(*out)->markup = true;
  return st;
}

static er_status f_escape(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(check_args(r, a, "filter 'escape'", 0, NULL));
  if (in.type == ER_CV_STR && ER_CV_STR_OF(in)->markup) {
    er__cv_ref(in);
    *out = in;
    return ER_STATUS_OK;
  }
  er_cv s;
  ER_CHECK(str_of(r, in, &s));
  er_cv_buf b = {0};
  er_status st = html_escape(r, ER_CV_STR_OF(s), &b);
  er__cv_unref(r, s);
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  ER_CHECK(er__cv_str_from_buf(r, &b, out));
  ER_CV_STR_OF(*out)->markup = true;
  return ER_STATUS_OK;
}

static er_status f_replace(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"old", "new", "count", NULL};
  ER_CHECK(check_args(r, a, "filter 'replace'", 3, kw));
  er_cv *o = argp(a, 0, "old"), *n = argp(a, 1, "new"), *c = argp(a, 2, "count");
  if (!o || !n) return rerr(r, "filter 'replace' needs the old and new strings");
  if (c && c->type != ER_CV_NONE && !is_int(*c)) return rerr(r, "filter 'replace': count must be an integer");
  er_cv s, os, ns;
  ER_CHECK(str_of(r, in, &s));
  er_status st = str_of(r, *o, &os);
  if (st) {
    er__cv_unref(r, s);
    return st;
  }
  st = str_of(r, *n, &ns);
  if (!st) {
    st = str_replace(r, ER_CV_STR_OF(s), ER_CV_STR_OF(os), ER_CV_STR_OF(ns),
                     c && c->type != ER_CV_NONE ? int_of(*c) : -1, out);
    er__cv_unref(r, ns);
  }
  er__cv_unref(r, os);
  er__cv_unref(r, s);
  return st;
}

static er_status f_join(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"d", "attribute", NULL};
  ER_CHECK(check_args(r, a, "filter 'join'", 2, kw));
  er_cv *d = argp(a, 0, "d"), *attr = argp(a, 1, "attribute");
  er_cv sep;
  if (d) ER_CHECK(str_of(r, *d, &sep));
  else ER_CHECK(new_str(r, "", 0, &sep));
  er_cv items;
  er_status st = to_items(r, in, &items);
  if (st) {
    er__cv_unref(r, sep);
    return st;
  }
  er_cv_list *l = ER_CV_LIST_OF(items);
  er_cv_buf b = {0};
  for (size_t i = 0; i < l->n && !st; i++) {
    if (i) st = er__cv_buf_put(r, &b, ER_CV_STR_OF(sep)->data, ER_CV_STR_OF(sep)->len);
    if (st) break;
    if (attr && attr->type != ER_CV_NONE) {
      er_cv v;
      st = attr_path(r, l->items[i], *attr, &v);
      if (!st) {
        st = er__cv_to_str(r, v, &b);
        er__cv_unref(r, v);
      }
    } else {
      st = er__cv_to_str(r, l->items[i], &b);
    }
  }
  er__cv_unref(r, items);
  er__cv_unref(r, sep);
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  return er__cv_str_from_buf(r, &b, out);
}

static er_status f_first_last(er_chat_rt *r, er_cv in, cargs *a, bool last, er_cv *out) {
  ER_CHECK(check_args(r, a, last ? "filter 'last'" : "filter 'first'", 0, NULL));
  er_cv items;
  ER_CHECK(to_items(r, in, &items));
  er_cv_list *l = ER_CV_LIST_OF(items);
  if (!l->n) {
    *out = er__cv_undef(last ? "last item" : "first item");
  } else {
    *out = l->items[last ? l->n - 1 : 0];
    er__cv_ref(*out);
  }
  er__cv_unref(r, items);
  return ER_STATUS_OK;
}
static er_status f_first(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_first_last(r, in, a, false, out); }
static er_status f_last(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_first_last(r, in, a, true, out); }

static er_status copy_list(er_chat_rt *r, er_cv items, bool reverse, er_cv *out) {
  er_cv_list *l = ER_CV_LIST_OF(items);
  ER_CHECK(er__cv_list_new(r, l->n, out));
  for (size_t i = 0; i < l->n; i++) {
    er_cv v = l->items[reverse ? l->n - 1 - i : i];
    er__cv_ref(v);
    er_status st = er__cv_list_push(r, *out, v);
    if (st) {
      er__cv_unref(r, *out);
      return st;
    }
  }
  return ER_STATUS_OK;
}

static er_status f_list(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(check_args(r, a, "filter 'list'", 0, NULL));
  er_cv items;
  ER_CHECK(to_items(r, in, &items));
  er_status st = copy_list(r, items, false, out);
  er__cv_unref(r, items);
  return st;
}

static er_status f_reverse(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(check_args(r, a, "filter 'reverse'", 0, NULL));
  if (in.type == ER_CV_STR) {
    er_cv_str *s = ER_CV_STR_OF(in);
    er_cv_buf b = {0};
    er_status st = ER_STATUS_OK;
    size_t end = s->len;
    while (end > 0 && !st) {
      size_t lead = end - 1;
      while (lead > 0 && ((unsigned char)s->data[lead] & 0xc0) == 0x80) lead--;
      st = er__cv_buf_put(r, &b, s->data + lead, end - lead);
      end = lead;
    }
    if (st) {
      er__cv_buf_free(r, &b);
      return st;
    }
    return er__cv_str_from_buf(r, &b, out);
  }
  /* reversed() of anything else is a lazy iterator, like a generator. */
  er_cv items;
  ER_CHECK(to_items(r, in, &items));
  er_status st = copy_list(r, items, true, out);
  er__cv_unref(r, items);
  return as_generator(r, st, out);
}

static er_status f_items_eager(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(check_args(r, a, "filter 'items'", 0, NULL));
  if (in.type == ER_CV_UNDEFINED) return er__cv_list_new(r, 0, out);
  if (in.type != ER_CV_DICT) return rerr(r, "filter 'items': can only get item pairs from a mapping, not '%s'", tname(in));
  cargs none = {0};
  return dict_method(r, in, "items", &none, out);
}

static er_status f_dictsort(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"case_sensitive", "by", "reverse", NULL};
  ER_CHECK(check_args(r, a, "filter 'dictsort'", 3, kw));
  if (in.type != ER_CV_DICT) return rerr(r, "filter 'dictsort' needs a mapping, not '%s'", tname(in));
  bool cs = arg_bool(a, 0, "case_sensitive", false), rev = arg_bool(a, 2, "reverse", false);
  er_cv *by = argp(a, 1, "by");
  bool by_value = false;
  if (by) {
    ER_CHECK(need_str(r, *by, "dictsort 'by'"));
    if (!strcmp(ER_CV_STR_OF(*by)->data, "value")) by_value = true;
    else if (strcmp(ER_CV_STR_OF(*by)->data, "key")) return rerr(r, "You can only sort by either \"key\" or \"value\"");
  }
  cargs none = {0};
  er_cv pairs, keyed;
  ER_CHECK(dict_method(r, in, "items", &none, &pairs));
  er_cv_list *pl = ER_CV_LIST_OF(pairs);
  /* Sort the pairs by their key or value (item 0 or 1). */
  er_cv pos = er__cv_int(by_value ? 1 : 0);
  size_t *order;
  er_status st = sorted_indices(r, pl, &pos, cs, rev, &order);
  if (!st) {
    st = er__cv_list_new(r, pl->n, &keyed);
    for (size_t i = 0; !st && i < pl->n; i++) {
      er__cv_ref(pl->items[order[i]]);
      st = er__cv_list_push(r, keyed, pl->items[order[i]]);
    }
    free_order(r, order, pl->n);
    if (!st) *out = keyed;
  }
  er__cv_unref(r, pairs);
  return st;
}

static er_status f_sort(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"reverse", "case_sensitive", "attribute", NULL};
  ER_CHECK(check_args(r, a, "filter 'sort'", 3, kw));
  er_cv items;
  ER_CHECK(to_items(r, in, &items));
  er_cv_list *l = ER_CV_LIST_OF(items);
  size_t *order;
  er_status st = sorted_indices(r, l, argp(a, 2, "attribute"), arg_bool(a, 1, "case_sensitive", false),
                                arg_bool(a, 0, "reverse", false), &order);
  if (!st) {
    st = er__cv_list_new(r, l->n, out);
    for (size_t i = 0; !st && i < l->n; i++) {
      er__cv_ref(l->items[order[i]]);
      st = er__cv_list_push(r, *out, l->items[order[i]]);
    }
    free_order(r, order, l->n);
  }
  er__cv_unref(r, items);
  return st;
}

static er_status f_unique_eager(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"case_sensitive", "attribute", NULL};
  ER_CHECK(check_args(r, a, "filter 'unique'", 2, kw));
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  er_cv *attr = argp(a, 1, "attribute");
  er_cv items, seen;
  ER_CHECK(to_items(r, in, &items));
  er_status st = er__cv_list_new(r, 0, &seen);
  if (!st) st = er__cv_list_new(r, 0, out);
  er_cv_list *l = ER_CV_LIST_OF(items);
  for (size_t i = 0; !st && i < l->n; i++) {
    er_cv k;
    st = sort_key(r, l->items[i], attr, cs, &k);
    bool dup = false;
    if (!st) st = contains(r, seen, k, &dup);
    if (!st && !dup) {
      er__cv_ref(l->items[i]);
      st = er__cv_list_push(r, *out, l->items[i]);
      if (!st) {
        er__cv_ref(k);
        st = er__cv_list_push(r, seen, k);
      }
    }
    if (!st || k.type) er__cv_unref(r, k);
  }
  er__cv_unref(r, seen);
  er__cv_unref(r, items);
  return st;
}

static er_status f_minmax(er_chat_rt *r, er_cv in, cargs *a, bool max, er_cv *out) {
  static const char *const kw[] = {"case_sensitive", "attribute", NULL};
  ER_CHECK(check_args(r, a, max ? "filter 'max'" : "filter 'min'", 2, kw));
  er_cv items;
  ER_CHECK(to_items(r, in, &items));
  er_cv_list *l = ER_CV_LIST_OF(items);
  size_t *order;
  er_status st = sorted_indices(r, l, argp(a, 1, "attribute"), arg_bool(a, 0, "case_sensitive", false), false, &order);
  if (!st) {
    if (!l->n) {
      *out = er__cv_undef(max ? "max of an empty sequence" : "min of an empty sequence");
    } else {
      /* max() keeps the first of equal maxima; the stable sort puts it
       * before the others, so take the first index with the last key. */
      size_t pick = order[0];
      if (max) {
        pick = order[l->n - 1];
        for (size_t i = l->n - 1; i-- > 0;) {
          er_cv k1, k2;
          int c = 1;
          st = sort_key(r, l->items[order[i]], argp(a, 1, "attribute"), arg_bool(a, 0, "case_sensitive", false), &k1);
          if (!st) {
            st = sort_key(r, l->items[pick], argp(a, 1, "attribute"), arg_bool(a, 0, "case_sensitive", false), &k2);
            if (!st) {
              st = er__cv_compare(r, k1, k2, &c);
              er__cv_unref(r, k2);
            }
            er__cv_unref(r, k1);
          }
          if (st || c != 0) break;
          pick = order[i];
        }
      }
      if (!st) {
        *out = l->items[pick];
        er__cv_ref(*out);
      }
    }
    free_order(r, order, l->n);
  }
  er__cv_unref(r, items);
  return st;
}
static er_status f_min(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_minmax(r, in, a, false, out); }
static er_status f_max(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_minmax(r, in, a, true, out); }

static er_status f_sum(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"attribute", "start", NULL};
  ER_CHECK(check_args(r, a, "filter 'sum'", 2, kw));
  er_cv *attr = argp(a, 0, "attribute"), *start = argp(a, 1, "start");
  er_cv acc = start ? *start : er__cv_int(0);
  er__cv_ref(acc);
  er_cv items;
  er_status st = to_items(r, in, &items);
  if (st) {
    er__cv_unref(r, acc);
    return st;
  }
  er_cv_list *l = ER_CV_LIST_OF(items);
  for (size_t i = 0; !st && i < l->n; i++) {
    er_cv v, next_acc;
    if (attr && attr->type != ER_CV_NONE) st = attr_path(r, l->items[i], *attr, &v);
    else {
      v = l->items[i];
      er__cv_ref(v);
    }
    if (st) break;
    st = binop(r, ER_OP_ADD, acc, v, &next_acc);
    er__cv_unref(r, v);
    if (st) break;
    er__cv_unref(r, acc);
    acc = next_acc;
  }
  er__cv_unref(r, items);
  if (st) {
    er__cv_unref(r, acc);
    return st;
  }
  *out = acc;
  return ER_STATUS_OK;
}

/* Python's int() of a string: optional sign, digits with single
 * underscores, surrounding whitespace. */
static bool parse_int_text(const char *s, size_t n, int64_t *out) {
  size_t b, e;
  strip_range(s, n, NULL, 0, true, true, &b, &e);
  size_t i = b;
  bool neg = false;
  if (i < e && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i >= e) return false;
  uint64_t v = 0;
  bool prev_digit = false;
  for (; i < e; i++) {
    if (s[i] == '_' && prev_digit && i + 1 < e && s[i + 1] >= '0' && s[i + 1] <= '9') {
      prev_digit = false;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') return false;
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + (uint64_t)(s[i] - '0');
    prev_digit = true;
  }
  if (v > (uint64_t)INT64_MAX + neg) return false;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

static bool parse_float_text(const char *s, size_t n, double *out) {
  size_t b, e;
  strip_range(s, n, NULL, 0, true, true, &b, &e);
  if (b >= e || e - b > 120) return false;
  char buf[128];
  size_t k = 0;
  for (size_t i = b; i < e; i++) {
    char c = s[i];
    /* Python accepts digits, signs, '.', exponents, inf/nan words. */
    if (!((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E' || c == '_' ||
          strchr("infatyINFATY", c)))
      return false;
    if (c != '_') buf[k++] = c;
  }
  buf[k] = '\0';
  char *end;
  double v = strtod(buf, &end);
  if (*end || end == buf) return false;
  *out = v;
  return true;
}

static er_status f_int(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"default", "base", NULL};
  ER_CHECK(check_args(r, a, "filter 'int'", 2, kw));
  er_cv *d = argp(a, 0, "default");
  er_cv *base = argp(a, 1, "base");
  if (base && (!is_int(*base) || int_of(*base) != 10)) return rerr(r, "filter 'int': only base 10 is supported");
  /* int(Undefined) fails in jinja2 (Undefined.__int__), unlike int(None). */
  if (in.type == ER_CV_UNDEFINED) return undef_err(r, in);
  if (is_int(in)) {
    *out = er__cv_int(int_of(in));
    return ER_STATUS_OK;
  }
  if (in.type == ER_CV_FLOAT && isfinite(in.f) && fabs(in.f) < 9.2e18) {
    *out = er__cv_int((int64_t)in.f);
    return ER_STATUS_OK;
  }
  if (in.type == ER_CV_STR) {
    int64_t v;
    double f;
    if (parse_int_text(ER_CV_STR_OF(in)->data, ER_CV_STR_OF(in)->len, &v)) {
      *out = er__cv_int(v);
      return ER_STATUS_OK;
    }
    if (parse_float_text(ER_CV_STR_OF(in)->data, ER_CV_STR_OF(in)->len, &f) && isfinite(f) && fabs(f) < 9.2e18) {
      *out = er__cv_int((int64_t)f);
      return ER_STATUS_OK;
    }
  }
  *out = d ? *d : er__cv_int(0);
  er__cv_ref(*out);
  return ER_STATUS_OK;
}

static er_status f_float(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"default", NULL};
  ER_CHECK(check_args(r, a, "filter 'float'", 1, kw));
  er_cv *d = argp(a, 0, "default");
  double f;
  if (in.type == ER_CV_UNDEFINED) return undef_err(r, in);
  if (is_num(in)) {
    *out = er__cv_float(float_of(in));
    return ER_STATUS_OK;
  }
  if (in.type == ER_CV_STR && parse_float_text(ER_CV_STR_OF(in)->data, ER_CV_STR_OF(in)->len, &f)) {
    *out = er__cv_float(f);
    return ER_STATUS_OK;
  }
  *out = d ? *d : er__cv_float(0.0);
  er__cv_ref(*out);
  return ER_STATUS_OK;
}

static er_status f_abs(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(check_args(r, a, "filter 'abs'", 0, NULL));
  if (in.type == ER_CV_FLOAT) *out = er__cv_float(fabs(in.f));
  else if (is_int(in)) {
    if (int_of(in) == INT64_MIN) return rerr(r, "integer overflow in abs (beyond 64 bits)");
    *out = er__cv_int(int_of(in) < 0 ? -int_of(in) : int_of(in));
  } else {
    return rerr(r, "bad operand type for abs(): '%s'", tname(in));
  }
  return ER_STATUS_OK;
}

static er_status f_round(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"precision", "method", NULL};
  ER_CHECK(check_args(r, a, "filter 'round'", 2, kw));
  er_cv *p = argp(a, 0, "precision"), *m = argp(a, 1, "method");
  int64_t prec = p ? (is_int(*p) ? int_of(*p) : -999) : 0;
  if (prec < 0 || prec > 30) return rerr(r, "filter 'round': precision must be an integer from 0 to 30");
  const char *method = "common";
  if (m) {
    ER_CHECK(need_str(r, *m, "round method"));
    method = ER_CV_STR_OF(*m)->data;
  }
  if (!is_num(in)) return rerr(r, "filter 'round' needs a number, not '%s'", tname(in));
  if (!strcmp(method, "common")) {
    if (is_int(in)) {
      *out = er__cv_int(int_of(in));
      return ER_STATUS_OK;
    }
    /* printf rounds the exact binary value half-to-even, as Python's
     * round() does. */
    char buf[400];
    snprintf(buf, sizeof buf, "%.*f", (int)prec, in.f);
    *out = er__cv_float(strtod(buf, NULL));
    return ER_STATUS_OK;
  }
  if (strcmp(method, "ceil") && strcmp(method, "floor"))
    return rerr(r, "filter 'round': method must be 'common', 'ceil' or 'floor'");
  double scale = pow(10.0, (double)prec), v = float_of(in) * scale;
  *out = er__cv_float((method[0] == 'c' ? ceil(v) : floor(v)) / scale);
  return ER_STATUS_OK;
}

static er_status f_wordcount(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(check_args(r, a, "filter 'wordcount'", 0, NULL));
  er_cv s;
  ER_CHECK(str_of(r, in, &s));
  er_cv_str *str = ER_CV_STR_OF(s);
  int64_t words = 0;
  bool in_word = false;
  size_t i = 0;
  while (i < str->len) {
    uint32_t cp = er__utf8_next(str->data, str->len, &i);
    bool w = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_' ||
             (cp >= 0x80 && !er__uni_space(cp) && !(cp >= 0x2000 && cp <= 0x206f) && !(cp >= 0x3000 && cp <= 0x303f));
    if (w && !in_word) words++;
    in_word = w;
  }
  er__cv_unref(r, s);
  *out = er__cv_int(words);
  return ER_STATUS_OK;
}

static er_status f_attr(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(check_args(r, a, "filter 'attr'", 1, NULL));
  er_cv *name = argp(a, 0, NULL);
  if (!name) return rerr(r, "filter 'attr' needs an attribute name");
  ER_CHECK(need_str(r, *name, "attribute name"));
  if (in.type == ER_CV_DICT) {
    /* Python getattr on a dict finds methods only, never keys. */
    if (has_method(in, ER_CV_STR_OF(*name)->data)) return make_method(r, in, ER_CV_STR_OF(*name)->data, out);
    *out = er__cv_undef(ER_CV_STR_OF(*name)->data);
    return ER_STATUS_OK;
  }
  return get_attr(r, in, ER_CV_STR_OF(*name)->data, out);
}

static er_status f_indent(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"width", "first", "blank", NULL};
  ER_CHECK(check_args(r, a, "filter 'indent'", 3, kw));
  er_cv *w = argp(a, 0, "width");
  bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  /* jinja2 appends "\n" to the value itself (no str()), which only
   * strings accept. */
  if (in.type == ER_CV_UNDEFINED) return undef_err(r, in);
  if (in.type != ER_CV_STR) return rerr(r, "unsupported operand type(s) for +=: '%s' and 'str'", tname(in));
  er_cv_buf ind = {0}, b = {0};
  er_status st = ER_STATUS_OK;
  if (w && w->type == ER_CV_STR) st = er__cv_buf_put(r, &ind, ER_CV_STR_OF(*w)->data, ER_CV_STR_OF(*w)->len);
  else if (w && !is_int(*w)) st = rerr(r, "filter 'indent': width must be an integer or a string");
  else
    for (int64_t k = 0; k < (w ? int_of(*w) : 4) && !st && k < 4096; k++) st = er__cv_buf_putc(r, &ind, ' ');
  er_cv s = er__cv_none();
  if (!st) st = str_of(r, in, &s);
  if (!st) {
    /* jinja2 appends a newline so splitlines() sees a last empty line, then
     * indents every line after the first (blank lines too when `blank`). */
    er_cv_str *str = ER_CV_STR_OF(s);
    const char *ip = ind.p ? ind.p : "";
    if (first) st = er__cv_buf_put(r, &b, ip, ind.len);
    size_t start = 0, i = 0;
    bool line0 = true;
    /* Lines of str + "\n", each without its break. */
    for (;;) {
      size_t bl = 0;
      bool at_end = i >= str->len;
      if (!at_end && !line_break(str->data, str->len, i, &bl)) {
        i++;
        continue;
      }
      size_t len = i - start;
      if (!line0 && !st) {
        st = er__cv_buf_putc(r, &b, '\n');
        if (!st && (blank || len)) st = er__cv_buf_put(r, &b, ip, ind.len);
      }
      if (!st) st = er__cv_buf_put(r, &b, str->data + start, len);
      line0 = false;
      if (at_end || st) break;
      i += bl;
      start = i;
      /* A final lone \r and the appended \n make one line break. */
      if (i >= str->len && bl == 1 && str->data[i - 1] == '\r') break;
    }
    er__cv_unref(r, s);
  }
  er__cv_buf_free(r, &ind);
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  return er__cv_str_from_buf(r, &b, out);
}

static er_status f_tojson(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
  ER_CHECK(check_args(r, a, "filter 'tojson'", 4, kw));
  er_cv_json_opts o = {0};
  o.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
  o.sort_keys = arg_bool(a, 3, "sort_keys", false);
  er_cv *ind = argp(a, 1, "indent"), *sep = argp(a, 2, "separators");
  char spaces[65];
  if (ind && ind->type == ER_CV_STR) {
    o.indent = ER_CV_STR_OF(*ind)->data;
    o.indent_len = ER_CV_STR_OF(*ind)->len;
  } else if (ind && is_int(*ind)) {
    int64_t n = int_of(*ind);
    if (n > 64) return rerr(r, "filter 'tojson': indent %lld is larger than 64", (long long)n);
    if (n < 0) n = 0;
    memset(spaces, ' ', (size_t)n);
    spaces[n] = '\0';
    o.indent = spaces;
    o.indent_len = (size_t)n;
  } else if (ind && ind->type != ER_CV_NONE) {
    return rerr(r, "filter 'tojson': indent must be an integer, a string or none");
  }
  o.item_sep = o.indent ? "," : ", ";
  o.key_sep = ": ";
  if (sep && sep->type != ER_CV_NONE) {
    if (sep->type != ER_CV_LIST || ER_CV_LIST_OF(*sep)->n != 2 || ER_CV_LIST_OF(*sep)->items[0].type != ER_CV_STR ||
        ER_CV_LIST_OF(*sep)->items[1].type != ER_CV_STR)
      return rerr(r, "filter 'tojson': separators must be two strings");
    o.item_sep = ER_CV_STR_OF(ER_CV_LIST_OF(*sep)->items[0])->data;
    o.key_sep = ER_CV_STR_OF(ER_CV_LIST_OF(*sep)->items[1])->data;
  }
  o.item_sep_len = strlen(o.item_sep);
  o.key_sep_len = strlen(o.key_sep);
  er_cv_buf b = {0};
  er_status st = er__cv_json(r, in, &o, &b);
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  return er__cv_str_from_buf(r, &b, out);
}

/* select / reject / selectattr / rejectattr: keep items whose (attribute's)
 * test passes (or fails). */
static er_status select_eager(er_chat_rt *r, er_cv in, cargs *a, bool attr, bool keep, er_cv *out) {
  /* jinja2 yields nothing for a falsy input (None, "", []) before it looks
   * at the arguments. */
  if (!er__cv_truthy(in)) return er__cv_list_new(r, 0, out);
  size_t first_test = attr ? 1 : 0;
  er_cv *attr_name = attr ? argp(a, 0, NULL) : NULL;
  if (attr && !attr_name) return rerr(r, "selectattr/rejectattr need an attribute name");
  er_cv *test = argp(a, first_test, NULL);
  if (test) ER_CHECK(need_str(r, *test, "test name"));
  if (test && !er__chat_known_test(ER_CV_STR_OF(*test)->data))
    return rerr(r, "unknown test '%s'", ER_CV_STR_OF(*test)->data);
  cargs targs = {0};
  if (test) {
    targs.v = a->v + first_test + 1;
    targs.npos = a->npos - first_test - 1;
    targs.nkw = a->nkw;
    targs.kw = a->kw;
  } else if (a->nkw) {
    return rerr(r, "select filters take no keyword arguments without a test");
  }
  er_cv items;
  ER_CHECK(to_items(r, in, &items));
  er_status st = er__cv_list_new(r, 0, out);
  er_cv_list *l = ER_CV_LIST_OF(items);
  for (size_t i = 0; !st && i < l->n; i++) {
    er_cv v;
    if (attr) st = attr_path(r, l->items[i], *attr_name, &v);
    else {
      v = l->items[i];
      er__cv_ref(v);
    }
    if (st) break;
    bool pass;
    if (test) st = apply_test(r, ER_CV_STR_OF(*test)->data, v, &targs, &pass);
    else pass = er__cv_truthy(v);
    er__cv_unref(r, v);
    if (!st && pass == keep) {
      er__cv_ref(l->items[i]);
      st = er__cv_list_push(r, *out, l->items[i]);
    }
  }
  if (st && out->type == ER_CV_LIST) {
    er__cv_unref(r, *out);
    *out = er__cv_undef(NULL);
  }
  er__cv_unref(r, items);
  return st;
}
static er_status select_items(er_chat_rt *r, er_cv in, cargs *a, bool attr, bool keep, er_cv *out) {
  return as_generator(r, select_eager(r, in, a, attr, keep, out), out);
}
static er_status f_select(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return select_items(r, in, a, false, true, out); }
static er_status f_reject(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return select_items(r, in, a, false, false, out); }
static er_status f_selectattr(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return select_items(r, in, a, true, true, out); }
static er_status f_rejectattr(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return select_items(r, in, a, true, false, out); }

static er_status f_map_eager(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  if (!er__cv_truthy(in)) return er__cv_list_new(r, 0, out);
  er_cv *attr = argp(a, SIZE_MAX, "attribute");
  er_cv *dflt = argp(a, SIZE_MAX, "default");
  const char *filter = NULL;
  cargs fargs = {0};
  if (!attr) {
    er_cv *f = argp(a, 0, NULL);
    if (!f) return rerr(r, "filter 'map' needs a filter name or attribute=");
    ER_CHECK(need_str(r, *f, "filter name"));
    filter = ER_CV_STR_OF(*f)->data;
    if (!er__chat_known_filter(filter)) return rerr(r, "unknown filter '%s'", filter);
    fargs.v = a->v + 1;
    fargs.npos = a->npos - 1;
    fargs.nkw = a->nkw;
    fargs.kw = a->kw;
  } else if (a->npos) {
    return rerr(r, "filter 'map' with attribute= takes no positional arguments");
  }
  er_cv items;
  ER_CHECK(to_items(r, in, &items));
  er_status st = er__cv_list_new(r, 0, out);
  er_cv_list *l = ER_CV_LIST_OF(items);
  for (size_t i = 0; !st && i < l->n; i++) {
    er_cv v;
    if (attr) {
      st = attr_path(r, l->items[i], *attr, &v);
      if (!st && v.type == ER_CV_UNDEFINED && dflt) {
        v = *dflt;
        er__cv_ref(v);
      }
    } else {
      st = apply_filter(r, filter, l->items[i], &fargs, &v);
    }
    if (!st) st = er__cv_list_push(r, *out, v);
  }
  if (st && out->type == ER_CV_LIST) {
    er__cv_unref(r, *out);
    *out = er__cv_undef(NULL);
  }
  er__cv_unref(r, items);
  return st;
}

/* jinja2's map, items and unique are generators (see as_generator). */
static er_status f_map(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return as_generator(r, f_map_eager(r, in, a, out), out); }
static er_status f_items(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  return as_generator(r, f_items_eager(r, in, a, out), out);
}
static er_status f_unique(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  return as_generator(r, f_unique_eager(r, in, a, out), out);
}

static const struct {
  const char *name;
  filter_fn fn;   /* NULL: a jinja2 filter edgerun does not implement */
} filters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"batch", NULL}, {"capitalize", f_capitalize}, {"center", NULL},
    {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape}, {"filesizeformat", NULL}, {"first", f_first}, {"float", f_float},
    {"forceescape", NULL}, {"format", NULL}, {"groupby", NULL}, {"indent", f_indent}, {"int", f_int},
    {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length}, {"list", f_list},
    {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min}, {"pprint", NULL}, {"random", NULL},
    {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
    {"round", f_round}, {"safe", f_safe}, {"select", f_select}, {"selectattr", f_selectattr}, {"slice", NULL},
    {"sort", f_sort}, {"string", f_string}, {"striptags", NULL}, {"sum", f_sum}, {"title", f_title},
    {"tojson", f_tojson}, {"trim", f_trim}, {"truncate", NULL}, {"unique", f_unique}, {"upper", f_upper},
    {"urlencode", NULL}, {"urlize", NULL}, {"wordcount", f_wordcount}, {"wordwrap", NULL}, {"xmlattr", NULL},
};

bool er__chat_known_filter(const char *name) {
  for (size_t i = 0; i < ER_ARRAY_LEN(filters); i++)
    if (!strcmp(filters[i].name, name)) return true;
  return false;
}

static NOINLINE er_status apply_filter(er_chat_rt *r, const char *name, er_cv in, cargs *a, er_cv *out) {
  *out = er__cv_undef(NULL);
  ER_CHECK(er__cv_step(r, 1));
  for (size_t i = 0; i < ER_ARRAY_LEN(filters); i++) {
    if (strcmp(filters[i].name, name)) continue;
    if (!filters[i].fn) return rerr(r, "filter '%s' is not supported by edgerun's chat templates", name);
    er_status st = filters[i].fn(r, in, a, out);
    if (st) *out = er__cv_undef(NULL);
    return st;
  }
  return rerr(r, "unknown filter '%s'", name);
}

/* ======================================================================== */
/* Tests                                                                     */
/* ======================================================================== */

static const char *const tests[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "filter",
    "float", "ge", "gt", "greaterthan", "in", "integer", "iterable", "le", "lessthan", "lower", "lt", "mapping",
    "ne", "none", "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined", "upper", NULL,
};

bool er__chat_known_test(const char *name) { return in_names(tests, name); }

static NOINLINE er_status apply_test(er_chat_rt *r, const char *name, er_cv v, cargs *a, bool *out) {
  ER_CHECK(er__cv_step(r, 1));
  er_cv *x = argp(a, 0, NULL);
  int t = v.type;
  if (!strcmp(name, "defined")) *out = t != ER_CV_UNDEFINED;
  else if (!strcmp(name, "undefined")) *out = t == ER_CV_UNDEFINED;
  else if (!strcmp(name, "none")) *out = t == ER_CV_NONE;
  else if (!strcmp(name, "boolean")) *out = t == ER_CV_BOOL;
  else if (!strcmp(name, "false")) *out = t == ER_CV_BOOL && !v.b;
  else if (!strcmp(name, "true")) *out = t == ER_CV_BOOL && v.b;
  else if (!strcmp(name, "integer")) *out = t == ER_CV_INT;
  else if (!strcmp(name, "float")) *out = t == ER_CV_FLOAT;
  else if (!strcmp(name, "number")) *out = is_num(v);
  else if (!strcmp(name, "string")) *out = t == ER_CV_STR;
  else if (!strcmp(name, "mapping")) *out = t == ER_CV_DICT;
  else if (!strcmp(name, "iterable")) *out = t == ER_CV_STR || t == ER_CV_LIST || t == ER_CV_DICT || t == ER_CV_UNDEFINED || t == ER_CV_LOOP;
  else if (!strcmp(name, "sequence")) *out = t == ER_CV_STR || (t == ER_CV_LIST && !is_gen(v)) || t == ER_CV_DICT || t == ER_CV_UNDEFINED;
  else if (!strcmp(name, "callable")) *out = t == ER_CV_MACRO || t == ER_CV_BUILTIN || t == ER_CV_METHOD || t == ER_CV_LOOP;
  else if (!strcmp(name, "escaped")) *out = t == ER_CV_STR && ER_CV_STR_OF(v)->markup;
  else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
    er_cv s;
    ER_CHECK(str_of(r, v, &s));
    *out = all_cp(ER_CV_STR_OF(s), name[0] == 'l' ? 5 : 4);
    er__cv_unref(r, s);
  } else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
    er_cv m;
    er_cv div = name[0] == 'd' ? (x ? *x : er__cv_none()) : er__cv_int(2);
    if (name[0] == 'd' && !x) return rerr(r, "test 'divisibleby' needs a number");
    ER_CHECK(binop(r, ER_OP_MOD, v, div, &m));
    bool zero = m.type == ER_CV_FLOAT ? m.f == 0 : int_of(m) == 0;
    *out = name[0] == 'o' ? !zero && (m.type == ER_CV_FLOAT ? m.f == 1 : int_of(m) == 1) : zero;
  } else if (!strcmp(name, "filter") || !strcmp(name, "test")) {
    ER_CHECK(need_str(r, v, "the name tested"));
    *out = name[0] == 'f' ? er__chat_known_filter(ER_CV_STR_OF(v)->data) : er__chat_known_test(ER_CV_STR_OF(v)->data);
  } else {
    if (!x) return rerr(r, "test '%s' needs an argument", name);
    if (!strcmp(name, "eq") || !strcmp(name, "equalto")) return er__cv_equal(r, v, *x, out);
    if (!strcmp(name, "ne")) return compare_op(r, ER_OP_NE, v, *x, out);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan")) return compare_op(r, ER_OP_LT, v, *x, out);
    if (!strcmp(name, "le")) return compare_op(r, ER_OP_LTEQ, v, *x, out);
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan")) return compare_op(r, ER_OP_GT, v, *x, out);
    if (!strcmp(name, "ge")) return compare_op(r, ER_OP_GTEQ, v, *x, out);
    if (!strcmp(name, "in")) return contains(r, *x, v, out);
    if (!strcmp(name, "sameas")) {
      if (er__cv_is_obj(v) || er__cv_is_obj(*x)) *out = er__cv_is_obj(v) && er__cv_is_obj(*x) && v.o == x->o;
      else if (v.type != x->type) *out = false;
      else return er__cv_equal(r, v, *x, out);
      return ER_STATUS_OK;
    }
    return rerr(r, "unknown test '%s'", name);
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Global functions and macros                                               */
/* ======================================================================== */

static er_status fill_mapping(er_chat_rt *r, er_cv target, cargs *a, const char *what, bool check_names) {
  if (a->npos > 1) return rerr(r, "%s() takes at most 1 positional argument", what);
  er_cv src = a->npos ? a->v[0] : er__cv_none();
  if (a->npos) {
    if (src.type != ER_CV_DICT && src.type != ER_CV_NAMESPACE)
      return rerr(r, "%s(): the positional argument must be a mapping, not '%s'", what, tname(src));
    er_cv_dict *d = ER_CV_DICT_OF(src);
    for (size_t i = 0; i < d->n; i++) {
      if (check_names && d->keys[i].type == ER_CV_STR && ER_CV_STR_OF(d->keys[i])->data[0] == '_')
        return rerr(r, "chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'",
                    ER_CV_STR_OF(d->keys[i])->data);
      er__cv_ref(d->keys[i]);
      er__cv_ref(d->vals[i]);
      ER_CHECK(er__cv_dict_set(r, target, d->keys[i], d->vals[i]));
    }
  }
  for (size_t k = 0; k < a->nkw; k++) {
    if (check_names && a->kw[k][0] == '_')
      return rerr(r, "chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'",
                  a->kw[k]);
    er_cv key;
    ER_CHECK(new_cstr(r, a->kw[k], &key));
    er__cv_ref(a->v[a->npos + k]);
    ER_CHECK(er__cv_dict_set(r, target, key, a->v[a->npos + k]));
  }
  return ER_STATUS_OK;
}

static NOINLINE er_status call_builtin(er_chat_rt *r, int id, cargs *a, er_cv *out) {
  *out = er__cv_undef(NULL);
  switch (id) {
  case B_RANGE: {
    if (a->nkw) return rerr(r, "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3) return rerr(r, "range() takes 1 to 3 arguments, %zu given", a->npos);
    for (size_t i = 0; i < a->npos; i++)
      if (!is_int(a->v[i])) return rerr(r, "range(): '%s' object cannot be interpreted as an integer", tname(a->v[i]));
    int64_t start = a->npos > 1 ? int_of(a->v[0]) : 0, stop = int_of(a->v[a->npos > 1 ? 1 : 0]);
    int64_t step = a->npos > 2 ? int_of(a->v[2]) : 1;
    if (!step) return rerr(r, "range() arg 3 must not be zero");
    /* Counted in long double-free integer math: the span fits in 128 bits. */
    __int128 span = step > 0 ? (__int128)stop - start : (__int128)start - stop;
    __int128 count = span <= 0 ? 0 : (span - 1) / (step > 0 ? step : -(__int128)step) + 1;
    if (count > ER_CHAT_MAX_RANGE)
      return er__error(ER_STATUS_LIMIT, "chat template line %u: range() of %lld items exceeds ER_CHAT_MAX_RANGE (%d)",
                       r->line, (long long)(count > INT64_MAX ? INT64_MAX : (int64_t)count), ER_CHAT_MAX_RANGE);
    ER_CHECK(er__cv_step(r, (uint64_t)count / 4));
    ER_CHECK(er__cv_list_new(r, (size_t)count, out));
    er_cv_list *rl = ER_CV_LIST_OF(*out);
    rl->range = true;
    rl->range_start = start;
    rl->range_stop = stop;
    rl->range_step = step;
    for (int64_t k = 0; k < (int64_t)count; k++) {
      er_status st = er__cv_list_push(r, *out, er__cv_int(start + k * step));
      if (st) {
        er__cv_unref(r, *out);
        *out = er__cv_undef(NULL);
        return st;
      }
    }
    return ER_STATUS_OK;
  }
  case B_NAMESPACE: case B_DICT: {
    ER_CHECK(er__cv_dict_new(r, id == B_NAMESPACE ? ER_CV_NAMESPACE : ER_CV_DICT, out));
    er_status st = fill_mapping(r, *out, a, id == B_NAMESPACE ? "namespace" : "dict", id == B_NAMESPACE);
    if (st) {
      er__cv_unref(r, *out);
      *out = er__cv_undef(NULL);
    }
    return st;
  }
  case B_RAISE: {
    er_cv *msg = argp(a, 0, "message");
    er_cv_buf b = {0};
    er_status st = msg ? er__cv_to_str(r, *msg, &b) : ER_STATUS_OK;
    if (!st)
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "chat template line %u: raise_exception: %s", r->line,
                     b.p ? b.p : "");
    er__cv_buf_free(r, &b);
    return st;
  }
  default: { /* B_STRFTIME */
    if (a->npos != 1 || a->nkw || a->v[0].type != ER_CV_STR)
      return rerr(r, "strftime_now() takes one format string");
    er_cv_str *f = ER_CV_STR_OF(a->v[0]);
    if (f->len > 256) return rerr(r, "strftime_now(): a format of %zu bytes is longer than 256", f->len);
    struct tm tm;
    time_t now = r->t->has_now ? (time_t)r->t->now : time(NULL);
    bool ok = r->t->has_now ? gmtime_r(&now, &tm) != NULL : localtime_r(&now, &tm) != NULL;
    if (!ok) return rerr(r, "strftime_now(): the clock is out of range");
    char buf[2048];
    /* The format is the template's, as Python's strftime takes it; the
     * output is bounded by buf. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    size_t n = f->len ? strftime(buf, sizeof buf, f->data, &tm) : 0;
#pragma GCC diagnostic pop
    return new_str(r, buf, n, out);
  }
  }
}

static NOINLINE er_status call_macro(er_chat_rt *r, const er_chat_node *m, cargs *a, er_cv *out) {
  *out = er__cv_undef(NULL);
  if (r->macro_depth >= ER_CHAT_MAX_DEPTH)
    return er__error(ER_STATUS_LIMIT, "chat template line %u: macro calls nested deeper than ER_CHAT_MAX_DEPTH (%d) "
                     "(macro '%s' recurses too deeply)", r->line, ER_CHAT_MAX_DEPTH, m->name);
  if (a->npos > m->n_kw)
    return rerr(r, "macro '%s' takes not more than %u argument(s), %zu given", m->name, (unsigned)m->n_kw, a->npos);
  for (size_t k = 0; k < a->nkw; k++) {
    size_t p = 0;
    while (p < m->n_kw && strcmp(m->kw[p], a->kw[k])) p++;
    if (p == m->n_kw) return rerr(r, "macro '%s' takes no keyword argument '%s'", m->name, a->kw[k]);
    if (p < a->npos) return rerr(r, "macro '%s' got multiple values for argument '%s'", m->name, a->kw[k]);
  }
  er_chat_scope sc = {.parent = r->root};
  er_chat_scope *saved_scope = r->scope;
  er_cv_buf *saved_out = r->out;
  er_cv_buf buf = {0};
  r->scope = &sc;
  er_status st = ER_STATUS_OK;
  for (uint16_t p = 0; p < m->n_kw && !st; p++) {
    er_cv *given = argp(a, p, m->kw[p]);
    er_cv v;
    if (given) {
      v = *given;
      er__cv_ref(v);
    } else if (m->kids2[p]) {
      st = eval(r, m->kids2[p], &v);
      if (st) break;
    } else {
      v = er__cv_undef(m->kw[p]);
    }
    st = scope_set(r, &sc, m->kw[p], v);
  }
  if (!st) {
    r->out = &buf;
    r->macro_depth++;
    st = exec_block(r, m->kids, m->n);
    r->macro_depth--;
    r->loop_ctl = 0;
  }
  r->out = saved_out;
  r->scope = saved_scope;
  scope_release(r, &sc);
  if (st) {
    er__cv_buf_free(r, &buf);
    return st;
  }
  return er__cv_str_from_buf(r, &buf, out);
}

/* ======================================================================== */
/* Expressions                                                               */
/* ======================================================================== */

static NOINLINE er_status eval_call(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  const er_chat_node *f = n->a;
  er_cv self = er__cv_undef(NULL), callee = er__cv_undef(NULL);
  const char *method = NULL;
  if (f->kind == ER_CN_ATTR) {
    ER_CHECK(eval(r, f->a, &self));
    if (has_method(self, f->name)) {
      method = f->name;
    } else {
      er_status st = get_attr(r, self, f->name, &callee);
      er__cv_unref(r, self);
      self = er__cv_undef(NULL);
      if (st) return st;
    }
  } else {
    ER_CHECK(eval(r, f, &callee));
  }
  if (!method && callee.type == ER_CV_METHOD) {
    er_cv_method *m = (er_cv_method *)callee.o;
    self = m->self;
    er__cv_ref(self);
    method = m->name;
  }
  cargs a;
  er_status st = eval_args(r, n, &a);
  r->line = n->line;
  if (!st) {
    if (method) st = call_method(r, self, method, &a, out);
    else if (callee.type == ER_CV_MACRO) st = call_macro(r, callee.macro, &a, out);
    else if (callee.type == ER_CV_BUILTIN) st = call_builtin(r, callee.builtin, &a, out);
    else if (callee.type == ER_CV_UNDEFINED) st = undef_err(r, callee);
    else st = rerr(r, "'%s' object is not callable", tname(callee));
    args_free(r, &a);
  }
  er__cv_unref(r, self);
  er__cv_unref(r, callee);
  return st;
}

static NOINLINE er_status eval_filter(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_cv in;
  if (n->a) {
    ER_CHECK(eval(r, n->a, &in));
  } else {
    in = r->block_input;
    er__cv_ref(in);
  }
  cargs a;
  er_status st = eval_args(r, n, &a);
  r->line = n->line;
  if (!st) {
    st = apply_filter(r, n->name, in, &a, out);
    args_free(r, &a);
  }
  er__cv_unref(r, in);
  return st;
}

static NOINLINE er_status eval_test(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_cv in;
  ER_CHECK(eval(r, n->a, &in));
  cargs a;
  er_status st = eval_args(r, n, &a);
  r->line = n->line;
  bool res = false;
  if (!st) {
    st = apply_test(r, n->name, in, &a, &res);
    args_free(r, &a);
  }
  er__cv_unref(r, in);
  if (!st) *out = er__cv_bool(n->op ? !res : res);
  return st;
}

static NOINLINE er_status eval_slice(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_cv obj, b[3] = {er__cv_none(), er__cv_none(), er__cv_none()};
  ER_CHECK(eval(r, n->a, &obj));
  er_status st = ER_STATUS_OK;
  for (int k = 0; k < 3 && !st; k++)
    if (n->kids[k]) st = eval(r, n->kids[k], &b[k]);
  r->line = n->line;
  if (!st) {
    /* A slice folded at compile time (n->op, see mark_folded_slices) is
     * Undefined where Python's subscript raises a TypeError: a value that
     * is no sequence, or bounds that are no integers. */
    bool bad_bounds = false;
    for (int k = 0; k < 3; k++) bad_bounds |= b[k].type != ER_CV_NONE && !is_int(b[k]);
    if (n->op && obj.type != ER_CV_UNDEFINED &&
        ((obj.type != ER_CV_LIST && obj.type != ER_CV_STR) || is_gen(obj) || bad_bounds))
      *out = er__cv_undef(NULL);
    else
      st = do_slice(r, obj, b, out);
  }
  for (int k = 0; k < 3; k++) er__cv_unref(r, b[k]);
  er__cv_unref(r, obj);
  return st;
}

static NOINLINE er_status eval_collection(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_status st;
  if (n->kind == ER_CN_DICT) {
    ER_CHECK(er__cv_dict_new(r, ER_CV_DICT, out));
    for (uint32_t i = 0; i < n->n; i++) {
      er_cv k, v;
      st = eval(r, n->kids[i], &k);
      if (!st && !is_hashable(k)) {
        st = rerr(r, "unhashable type: '%s'", tname(k));
        er__cv_unref(r, k);
      }
      if (!st) {
        st = eval(r, n->kids2[i], &v);
        if (st) er__cv_unref(r, k);
        else st = er__cv_dict_set(r, *out, k, v);
      }
      if (st) {
        er__cv_unref(r, *out);
        *out = er__cv_undef(NULL);
        return st;
      }
    }
    return ER_STATUS_OK;
  }
  ER_CHECK(er__cv_list_new(r, n->n, out));
  ER_CV_LIST_OF(*out)->tuple = n->kind == ER_CN_TUPLE;
  for (uint32_t i = 0; i < n->n; i++) {
    er_cv v;
    st = eval(r, n->kids[i], &v);
    if (!st) st = er__cv_list_push(r, *out, v);
    if (st) {
      er__cv_unref(r, *out);
      *out = er__cv_undef(NULL);
      return st;
    }
  }
  return ER_STATUS_OK;
}

static NOINLINE er_status eval_compare(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_cv left;
  ER_CHECK(eval(r, n->a, &left));
  for (const er_chat_node *c = n; c; c = c->c) {
    er_cv right;
    er_status st = eval(r, c->b, &right);
    if (st) {
      er__cv_unref(r, left);
      return st;
    }
    r->line = c->line;
    bool res = false;
    st = compare_op(r, c->op, left, right, &res);
    er__cv_unref(r, left);
    left = right;
    if (st || !res || !c->c) {
      er__cv_unref(r, left);
      if (!st) *out = er__cv_bool(res);
      return st;
    }
  }
  er__cv_unref(r, left);
  return ER_STATUS_OK;
}

static NOINLINE er_status eval_concat(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_cv_buf b = {0};
  er_status st = ER_STATUS_OK;
  for (uint32_t i = 0; i < n->n && !st; i++) {
    er_cv v;
    st = eval(r, n->kids[i], &v);
    if (st) break;
    st = er__cv_to_str(r, v, &b);
    er__cv_unref(r, v);
  }
  if (st) {
    er__cv_buf_free(r, &b);
    return st;
  }
  return er__cv_str_from_buf(r, &b, out);
}

static er_status eval_node(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_status st;
  er_cv x, y;
  switch (n->kind) {
  case ER_CN_CONST:
    *out = n->cval;
    er__cv_ref(*out);
    return ER_STATUS_OK;
  case ER_CN_NAME: {
    er_cv *v = lookup(r, n->name);
    if (v) {
      *out = *v;
      er__cv_ref(*out);
      return ER_STATUS_OK;
    }
    for (size_t i = 0; i < ER_ARRAY_LEN(builtins); i++)
      if (!strcmp(builtins[i].name, n->name)) {
        out->type = ER_CV_BUILTIN;
        out->builtin = builtins[i].id;
        return ER_STATUS_OK;
      }
    *out = er__cv_undef(n->name);
    return ER_STATUS_OK;
  }
  case ER_CN_ATTR:
    ER_CHECK(eval(r, n->a, &x));
    r->line = n->line;
    st = get_attr(r, x, n->name, out);
    er__cv_unref(r, x);
    return st;
  case ER_CN_ITEM:
    ER_CHECK(eval(r, n->a, &x));
    st = eval(r, n->b, &y);
    if (!st) {
      r->line = n->line;
      st = get_item(r, x, y, out);
      er__cv_unref(r, y);
    }
    er__cv_unref(r, x);
    return st;
  case ER_CN_SLICE: return eval_slice(r, n, out);
  case ER_CN_CALL: return eval_call(r, n, out);
  case ER_CN_FILTER: return eval_filter(r, n, out);
  case ER_CN_TEST: return eval_test(r, n, out);
  case ER_CN_NOT:
    ER_CHECK(eval(r, n->a, &x));
    *out = er__cv_bool(!er__cv_truthy(x));
    er__cv_unref(r, x);
    return ER_STATUS_OK;
  case ER_CN_NEG: case ER_CN_POS:
    ER_CHECK(eval(r, n->a, &x));
    r->line = n->line;
    if (x.type == ER_CV_UNDEFINED) return undef_err(r, x);
    if (!is_num(x)) {
      st = rerr(r, "bad operand type for unary %c: '%s'", n->kind == ER_CN_NEG ? '-' : '+', tname(x));
      er__cv_unref(r, x);
      return st;
    }
    if (n->kind == ER_CN_POS) *out = x.type == ER_CV_BOOL ? er__cv_int(x.b) : x;
    else if (x.type == ER_CV_FLOAT) *out = er__cv_float(-x.f);
    else if (int_of(x) == INT64_MIN) return rerr(r, "integer overflow in unary - (beyond 64 bits)");
    else *out = er__cv_int(-int_of(x));
    return ER_STATUS_OK;
  case ER_CN_BINOP:
    ER_CHECK(eval(r, n->a, &x));
    st = eval(r, n->b, &y);
    if (!st) {
      r->line = n->line;
      st = binop(r, n->op, x, y, out);
      er__cv_unref(r, y);
    }
    er__cv_unref(r, x);
    return st;
  case ER_CN_AND: case ER_CN_OR:
    ER_CHECK(eval(r, n->a, &x));
    if (er__cv_truthy(x) == (n->kind == ER_CN_OR)) {
      *out = x;
      return ER_STATUS_OK;
    }
    er__cv_unref(r, x);
    return eval(r, n->b, out);
  case ER_CN_CONCAT: return eval_concat(r, n, out);
  case ER_CN_COMPARE: return eval_compare(r, n, out);
  case ER_CN_COND:
    ER_CHECK(eval(r, n->b, &x));
    {
      bool t = er__cv_truthy(x);
      er__cv_unref(r, x);
      if (t) return eval(r, n->a, out);
      if (n->c) return eval(r, n->c, out);
      *out = er__cv_undef("the else branch of a conditional expression");
      return ER_STATUS_OK;
    }
  case ER_CN_LIST: case ER_CN_TUPLE: case ER_CN_DICT: return eval_collection(r, n, out);
  default: return rerr(r, "internal: node kind %d is not an expression", n->kind);
  }
}

static er_status frame_enter(er_chat_rt *r, const er_chat_node *n) {
  r->line = n->line;
  if (r->frames >= ER_CHAT_MAX_FRAMES)
    return er__error(ER_STATUS_LIMIT, "chat template line %u: evaluation nested deeper than ER_CHAT_MAX_FRAMES (%d); "
                     "the template recurses or chains operators too deeply", n->line, ER_CHAT_MAX_FRAMES);
  ER_CHECK(er__cv_step(r, 1));
  r->frames++;
  return ER_STATUS_OK;
}

static er_status eval(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  *out = er__cv_undef(NULL);
  ER_CHECK(frame_enter(r, n));
  er_status st = eval_node(r, n, out);
  r->frames--;
  if (st) *out = er__cv_undef(NULL);
  return st;
}

/* ======================================================================== */
/* Statements                                                                */
/* ======================================================================== */

/* Binds a for/set target (a NAME or a TUPLE of NAMEs) in s, taking v. */
static NOINLINE er_status bind_target(er_chat_rt *r, er_chat_scope *s, const er_chat_node *target, er_cv v) {
  if (target->kind == ER_CN_NAME) return scope_set(r, s, target->name, v);
  er_cv items;
  er_status st = to_items(r, v, &items);
  er__cv_unref(r, v);
  if (st) return st;
  er_cv_list *l = ER_CV_LIST_OF(items);
  if (l->n != target->n) {
    st = l->n < target->n ? rerr(r, "not enough values to unpack (expected %u, got %zu)", target->n, l->n)
                          : rerr(r, "too many values to unpack (expected %u)", target->n);
  }
  for (uint32_t i = 0; i < target->n && !st; i++) {
    er__cv_ref(l->items[i]);
    st = scope_set(r, s, target->kids[i]->name, l->items[i]);
  }
  er__cv_unref(r, items);
  return st;
}

/* `set` (takes v). */
static NOINLINE er_status assign(er_chat_rt *r, const er_chat_node *target, er_cv v) {
  if (target->kind != ER_CN_ATTR) return bind_target(r, r->scope, target, v);
  er_cv *ns = lookup(r, target->a->name);
  if (!ns || ns->type != ER_CV_NAMESPACE) {
    er__cv_unref(r, v);
    return rerr(r, "cannot assign attribute '%s' on '%s': it is not a namespace()", target->name, target->a->name);
  }
  if (target->name[0] == '_') {
    er__cv_unref(r, v);
    return rerr(r, "chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'",
                target->name);
  }
  er_cv key;
  er_status st = new_cstr(r, target->name, &key);
  if (st) {
    er__cv_unref(r, v);
    return st;
  }
  return er__cv_dict_set(r, *ns, key, v);
}

/* A block that is a frame of its own in jinja2 (a for loop's else, the
 * body of a filter or set block): its `set`s end with it. */
static er_status exec_scoped(er_chat_rt *r, er_chat_node *const *kids, uint32_t n) {
  er_chat_scope sc = {.parent = r->scope};
  er_chat_scope *saved = r->scope;
  r->scope = &sc;
  er_status st = exec_block(r, kids, n);
  r->scope = saved;
  scope_release(r, &sc);
  return st;
}

static er_status capture(er_chat_rt *r, er_chat_node *const *kids, uint32_t n, er_cv *out) {
  er_cv_buf buf = {0};
  er_cv_buf *saved = r->out;
  r->out = &buf;
  er_status st = exec_scoped(r, kids, n);
  r->out = saved;
  if (st) {
    er__cv_buf_free(r, &buf);
    return st;
  }
  return er__cv_str_from_buf(r, &buf, out);
}

/* Runs a block's filter chain (FILTER nodes whose innermost input is the
 * block's text). */
static er_status filter_chain(er_chat_rt *r, const er_chat_node *chain, er_cv text, er_cv *out) {
  er_cv saved = r->block_input;
  r->block_input = text;
  er_status st = eval(r, chain, out);
  r->block_input = saved;
  return st;
}

static NOINLINE er_status exec_for(er_chat_rt *r, const er_chat_node *n) {
  er_cv it, items;
  ER_CHECK(eval(r, n->a, &it));
  r->line = n->line;
  er_status st = to_items(r, it, &items);
  er__cv_unref(r, it);
  if (st) return st;
  er_chat_scope sc = {.parent = r->scope};
  er_chat_scope *saved = r->scope;
  if (n->c) {
    er_cv kept;
    st = er__cv_list_new(r, 0, &kept);
    er_cv_list *l = ER_CV_LIST_OF(items);
    for (size_t i = 0; !st && i < l->n; i++) {
      r->scope = &sc;
      st = er__cv_step(r, 1);
      if (st) break;
      er__cv_ref(l->items[i]);
      st = bind_target(r, &sc, n->b, l->items[i]);
      er_cv c;
      if (!st) st = eval(r, n->c, &c);
      r->scope = saved;
      scope_clear(r, &sc);
      if (st) break;
      if (er__cv_truthy(c)) {
        er__cv_ref(l->items[i]);
        st = er__cv_list_push(r, kept, l->items[i]);
      }
      er__cv_unref(r, c);
    }
    er__cv_unref(r, items);
    if (st) {
      er__cv_unref(r, kept);
      scope_release(r, &sc);
      return st;
    }
    items = kept;
  }
  er_cv_list *l = ER_CV_LIST_OF(items);
  if (!l->n) {
    scope_release(r, &sc);
    er__cv_unref(r, items);
    return exec_scoped(r, n->kids2, n->n2);
  }
  er_cv_loop *lo;
  st = er__cv_obj_new(r, ER_CV_LOOP, sizeof *lo, (void **)&lo);
  if (st) {
    er__cv_unref(r, items);
    return st;
  }
  er_cv loopv = {.type = ER_CV_LOOP};
  loopv.o = &lo->h;
  lo->items = items; /* the loop object holds the items' reference */
  lo->length = (int64_t)l->n;
  for (size_t i = 0; i < l->n && !st; i++) {
    /* Every iteration is a step, so an empty loop body cannot hide
     * unbounded work from ER_CHAT_MAX_STEPS. */
    st = er__cv_step(r, 1);
    if (st) break;
    lo->index0 = (int64_t)i;
    r->scope = &sc;
    er__cv_ref(l->items[i]);
    st = bind_target(r, &sc, n->b, l->items[i]);
    if (!st) {
      er__cv_ref(loopv);
      st = scope_set(r, &sc, LOOP_NAME, loopv);
    }
    if (!st) st = exec_block(r, n->kids, n->n);
    r->scope = saved;
    scope_clear(r, &sc);
    if (r->loop_ctl == 1) {
      r->loop_ctl = 0;
      break;
    }
    r->loop_ctl = 0;
  }
  scope_release(r, &sc);
  er__cv_unref(r, loopv);
  return st;
}

static NOINLINE er_status exec_node(er_chat_rt *r, const er_chat_node *n) {
  er_status st;
  er_cv v;
  switch (n->kind) {
  case ER_CN_DATA: return emit(r, n->name, n->len);
  case ER_CN_PRINT:
    ER_CHECK(eval(r, n->a, &v));
    r->line = n->line;
    st = emit_value(r, v);
    er__cv_unref(r, v);
    return st;
  case ER_CN_IF:
    /* elif chains are walked here, not recursed into. */
    for (const er_chat_node *c = n;;) {
      ER_CHECK(eval(r, c->a, &v));
      bool t = er__cv_truthy(v);
      er__cv_unref(r, v);
      if (t) return exec_block(r, c->kids, c->n);
      if (c->n2 == 1 && c->kids2[0]->kind == ER_CN_IF && c->kids2[0]->op == 1) {
        c = c->kids2[0];
        ER_CHECK(er__cv_step(r, 1));
        continue;
      }
      return exec_block(r, c->kids2, c->n2);
    }
  case ER_CN_FOR: return exec_for(r, n);
  case ER_CN_SET:
    ER_CHECK(eval(r, n->a, &v));
    r->line = n->line;
    return assign(r, n->b, v);
  case ER_CN_SET_BLOCK: {
    ER_CHECK(capture(r, n->kids, n->n, &v));
    if (n->n2) {
      er_cv f;
      st = filter_chain(r, n->kids2[0], v, &f);
      er__cv_unref(r, v);
      if (st) return st;
      v = f;
    }
    r->line = n->line;
    return assign(r, n->b, v);
  }
  case ER_CN_MACRO: {
    er_cv m = {.type = ER_CV_MACRO};
    m.macro = n;
    return scope_set(r, r->scope, n->name, m);
  }
  case ER_CN_FILTER_BLOCK: {
    if (!n->n2) return exec_scoped(r, n->kids, n->n);
    ER_CHECK(capture(r, n->kids, n->n, &v));
    er_cv f;
    st = filter_chain(r, n->kids2[0], v, &f);
    er__cv_unref(r, v);
    if (st) return st;
    st = emit_value(r, f);
    er__cv_unref(r, f);
    return st;
  }
  case ER_CN_BREAK: r->loop_ctl = 1; return ER_STATUS_OK;
  case ER_CN_CONTINUE: r->loop_ctl = 2; return ER_STATUS_OK;
  default: return rerr(r, "internal: node kind %d is not a statement", n->kind);
  }
}

static er_status exec_block(er_chat_rt *r, er_chat_node *const *kids, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    ER_CHECK(frame_enter(r, kids[i]));
    er_status st = exec_node(r, kids[i]);
    r->frames--;
    if (st) return st;
    if (r->loop_ctl) break;
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Entry point                                                               */
/* ======================================================================== */

static er_status check_text(const char *s, const char *what, size_t index) {
  size_t bad;
  if (!er__utf8_valid(s, strlen(s), &bad))
    return er__error(ER_STATUS_INVALID_ARGUMENT, "chat message %zu: %s is not valid UTF-8 (byte %zu)", index, what, bad);
  return ER_STATUS_OK;
}

static er_status build_globals(er_chat_rt *r, const er_chat_message *msgs, size_t n_msgs, bool agp, const char *bos,
                               const char *eos) {
  er_cv list, k_role, k_content, v;
  ER_CHECK(er__cv_list_new(r, n_msgs, &list));
  er_status st = new_cstr(r, "role", &k_role);
  if (st) {
    er__cv_unref(r, list);
    return st;
  }
  st = new_cstr(r, "content", &k_content);
  for (size_t i = 0; i < n_msgs && !st; i++) {
    er_cv d, role, content;
    st = er__cv_dict_new(r, ER_CV_DICT, &d);
    if (st) break;
    st = new_cstr(r, msgs[i].role, &role);
    if (!st) {
      er__cv_ref(k_role);
      st = er__cv_dict_set(r, d, k_role, role);
    }
    /* A NULL content is a message without the key, as transformers drops
     * None-valued keys before rendering (message.content is undefined). */
    if (!st && msgs[i].content) {
      st = new_cstr(r, msgs[i].content, &content);
      if (!st) {
        er__cv_ref(k_content);
        st = er__cv_dict_set(r, d, k_content, content);
      }
    }
    if (!st) st = er__cv_list_push(r, list, d);
    else er__cv_unref(r, d);
  }
  er__cv_unref(r, k_role);
  if (k_content.type == ER_CV_STR) er__cv_unref(r, k_content);
  if (!st) st = scope_set(r, r->globals, "messages", list);
  else er__cv_unref(r, list);
  if (!st) st = scope_set(r, r->globals, "add_generation_prompt", er__cv_bool(agp));
  if (!st && !(st = new_cstr(r, bos ? bos : "", &v))) st = scope_set(r, r->globals, "bos_token", v);
  if (!st && !(st = new_cstr(r, eos ? eos : "", &v))) st = scope_set(r, r->globals, "eos_token", v);
  /* transformers passes tools=None and documents=None explicitly. */
  if (!st) st = scope_set(r, r->globals, "tools", er__cv_none());
  if (!st) st = scope_set(r, r->globals, "documents", er__cv_none());
  return st;
}

er_status er__chat_eval(const er_chat_template *t, const er_chat_message *msgs, size_t n_msgs,
                        bool add_generation_prompt, const char *bos, const char *eos, char **out_text,
                        size_t *out_len) {
  if (n_msgs > ER_CHAT_MAX_MESSAGES)
    return er__error(ER_STATUS_LIMIT, "chat: %zu messages exceed ER_CHAT_MAX_MESSAGES (%d)", n_msgs,
                     ER_CHAT_MAX_MESSAGES);
  for (size_t i = 0; i < n_msgs; i++) {
    if (!msgs[i].role) return er__error(ER_STATUS_INVALID_ARGUMENT, "chat message %zu has no role", i);
    ER_CHECK(check_text(msgs[i].role, "the role", i));
    if (msgs[i].content) ER_CHECK(check_text(msgs[i].content, "the content", i));
  }
  if (bos) ER_CHECK(check_text(bos, "bos_token", 0));
  if (eos) ER_CHECK(check_text(eos, "eos_token", 0));

  er_chat_rt r;
  memset(&r, 0, sizeof r);
  r.t = t;
  r.live.next = r.live.prev = &r.live;
  r.live.refs = ER_CV_IMMORTAL;
  er_chat_scope globals = {0}, root = {.parent = &globals};
  r.globals = &globals;
  r.root = &root;
  r.scope = &root;
  er_cv_buf out = {0};
  r.out = &out;
  r.block_input = er__cv_undef(NULL);

  er_status st = build_globals(&r, msgs, n_msgs, add_generation_prompt, bos, eos);
  if (!st) st = exec_block(&r, t->body, t->n_body);
  scope_release(&r, &root);
  scope_release(&r, &globals);
  er__cv_free_all(&r);
  if (st) {
    er__cv_buf_free(&r, &out);
    return st;
  }
  if (!out.p) {
    out.p = malloc(1);
    if (!out.p) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the rendered prompt");
    out.p[0] = '\0';
  } else {
    er__cv_uncharge(&r, out.cap);
  }
  ER_ASSERT(r.live_bytes == 0);
  *out_text = out.p;
  *out_len = out.len;
  return ER_STATUS_OK;
}

void er__chat_set_now(er_chat_template *t, int64_t unix_seconds) {
  t->has_now = true;
  t->now = unix_seconds;
}
