/* chat-value.c - the chat-template interpreter's value model: refcounted
 * strings, lists and dicts charged to a per-render byte budget; Python's
 * truthiness, ==, <, str() and repr(); json.dumps as transformers' tojson
 * calls it; and the UTF-8 and Unicode helpers the string functions need.
 *
 * Values are refcounted rather than arena-allocated because templates build
 * strings in loops (`ns.text = ns.text + part`): an arena would hold every
 * intermediate until the render ends, quadratic in the conversation's size.
 * Cycles can only form through namespaces (`set ns.me = ns`); the list of
 * live objects lets the render free those at its end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "llm/chat-impl.h"

/* ======================================================================== */
/* Budgets                                                                   */
/* ======================================================================== */

er_status er__cv_step(er_chat_rt *r, uint64_t units) {
  r->steps += units;
  if (r->steps > ER_CHAT_MAX_STEPS)
    return er__error(ER_STATUS_LIMIT,
                     "chat template line %u: render exceeds ER_CHAT_MAX_STEPS (%d interpreter steps); "
                     "the template loops too long or copies too much text",
                     r->line, ER_CHAT_MAX_STEPS);
  return ER_STATUS_OK;
}

er_status er__cv_charge(er_chat_rt *r, size_t bytes) {
  if (bytes > ER_CHAT_MAX_LIVE_BYTES || r->live_bytes > ER_CHAT_MAX_LIVE_BYTES - bytes)
    return er__error(ER_STATUS_LIMIT,
                     "chat template line %u: render needs more than ER_CHAT_MAX_LIVE_BYTES (%u bytes) "
                     "of values at once",
                     r->line, (unsigned)ER_CHAT_MAX_LIVE_BYTES);
  r->live_bytes += bytes;
  return ER_STATUS_OK;
}

void er__cv_uncharge(er_chat_rt *r, size_t bytes) {
  ER_ASSERT(r->live_bytes >= bytes);
  r->live_bytes -= bytes;
}

/* ======================================================================== */
/* Objects                                                                   */
/* ======================================================================== */

er_status er__cv_obj_new(er_chat_rt *r, uint8_t type, size_t bytes, void **out) {
  *out = NULL;
  ER_CHECK(er__cv_charge(r, bytes));
  er_cv_obj *o = calloc(1, bytes);
  if (!o) {
    er__cv_uncharge(r, bytes);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory allocating %zu bytes for a chat-template value",
                     bytes);
  }
  o->bytes = bytes;
  o->refs = 1;
  o->type = type;
  o->next = r->live.next;
  o->prev = &r->live;
  r->live.next->prev = o;
  r->live.next = o;
  *out = o;
  return ER_STATUS_OK;
}

void er__cv_ref(er_cv v) {
  if (er__cv_is_obj(v) && v.o->refs != ER_CV_IMMORTAL) v.o->refs++;
}

static void obj_release_memory(er_chat_rt *r, er_cv_obj *o) {
  size_t extra = 0;
  if (o->type == ER_CV_LIST) {
    er_cv_list *l = (er_cv_list *)o;
    extra = l->cap * sizeof(er_cv);
    free(l->items);
  } else if (o->type == ER_CV_DICT || o->type == ER_CV_NAMESPACE) {
    er_cv_dict *d = (er_cv_dict *)o;
    extra = 2 * d->cap * sizeof(er_cv);
    free(d->keys);
    free(d->vals);
  }
  er__cv_uncharge(r, o->bytes + extra);
  free(o);
}

/* Releases one reference. Objects reaching zero move to a work list (linked
 * through prev/next) so that freeing a list nested a million deep takes no
 * stack. */
void er__cv_unref(er_chat_rt *r, er_cv v) {
  if (!er__cv_is_obj(v) || v.o->refs == ER_CV_IMMORTAL) return;
  er_cv_obj *o = v.o;
  ER_ASSERT(o->refs > 0);
  if (--o->refs) return;
  er_cv_obj *work = NULL;
  o->prev->next = o->next;
  o->next->prev = o->prev;
  o->next = work;
  work = o;
  while (work) {
    er_cv_obj *cur = work;
    work = cur->next;
    er_cv *kids[2] = {NULL, NULL};
    size_t nk = 0;
    er_cv single;
    if (cur->type == ER_CV_LIST) {
      kids[0] = ((er_cv_list *)cur)->items;
      nk = ((er_cv_list *)cur)->n;
    } else if (cur->type == ER_CV_DICT || cur->type == ER_CV_NAMESPACE) {
      kids[0] = ((er_cv_dict *)cur)->keys;
      kids[1] = ((er_cv_dict *)cur)->vals;
      nk = ((er_cv_dict *)cur)->n;
    } else if (cur->type == ER_CV_LOOP) {
      single = ((er_cv_loop *)cur)->items;
      kids[0] = &single;
      nk = 1;
    } else if (cur->type == ER_CV_METHOD) {
      single = ((er_cv_method *)cur)->self;
      kids[0] = &single;
      nk = 1;
    }
    for (int k = 0; k < 2; k++) {
      if (!kids[k]) continue;
      for (size_t i = 0; i < nk; i++) {
        er_cv c = kids[k][i];
        if (!er__cv_is_obj(c) || c.o->refs == ER_CV_IMMORTAL) continue;
        ER_ASSERT(c.o->refs > 0);
        if (--c.o->refs) continue;
        c.o->prev->next = c.o->next;
        c.o->next->prev = c.o->prev;
        c.o->next = work;
        work = c.o;
      }
    }
    obj_release_memory(r, cur);
  }
}

void er__cv_free_all(er_chat_rt *r) {
  er_cv_obj *o = r->live.next;
  while (o && o != &r->live) {
    er_cv_obj *next = o->next;
    obj_release_memory(r, o);
    o = next;
  }
  r->live.next = r->live.prev = &r->live;
}

/* ======================================================================== */
/* Buffers                                                                   */
/* ======================================================================== */

static er_status buf_reserve(er_chat_rt *r, er_cv_buf *b, size_t extra) {
  if (b->cap - b->len > extra) return ER_STATUS_OK;
  if (extra > SIZE_MAX / 4 - b->len)
    return er__error(ER_STATUS_LIMIT, "chat template: text of %zu bytes is too large", extra);
  size_t need = b->len + extra + 1;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  ER_CHECK(er__cv_charge(r, cap - b->cap));
  char *p = realloc(b->p, cap);
  if (!p) {
    er__cv_uncharge(r, cap - b->cap);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory growing chat-template text to %zu bytes", cap);
  }
  b->p = p;
  b->cap = cap;
  return ER_STATUS_OK;
}

er_status er__cv_buf_put(er_chat_rt *r, er_cv_buf *b, const char *s, size_t n) {
  if (!n) return ER_STATUS_OK;
  ER_CHECK(er__cv_step(r, n / ER_CHAT_STEP_BYTES));
  ER_CHECK(buf_reserve(r, b, n));
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
  return ER_STATUS_OK;
}

er_status er__cv_buf_putc(er_chat_rt *r, er_cv_buf *b, char c) {
  ER_CHECK(buf_reserve(r, b, 1));
  b->p[b->len++] = c;
  b->p[b->len] = '\0';
  return ER_STATUS_OK;
}

void er__cv_buf_free(er_chat_rt *r, er_cv_buf *b) {
  if (b->p) er__cv_uncharge(r, b->cap);
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

/* ======================================================================== */
/* Constructors                                                              */
/* ======================================================================== */

er_status er__cv_str_new(er_chat_rt *r, const char *s, size_t n, er_cv *out) {
  *out = er__cv_none();
  if (n > ER_CHAT_MAX_LIVE_BYTES)
    return er__error(ER_STATUS_LIMIT, "chat template line %u: a string of %zu bytes exceeds "
                     "ER_CHAT_MAX_LIVE_BYTES (%u)", r->line, n, (unsigned)ER_CHAT_MAX_LIVE_BYTES);
  ER_CHECK(er__cv_step(r, n / ER_CHAT_STEP_BYTES));
  er_cv_str *str;
  ER_CHECK(er__cv_obj_new(r, ER_CV_STR, sizeof *str + n + 1, (void **)&str));
  if (n) memcpy(str->data, s, n);
  str->data[n] = '\0';
  str->len = n;
  str->nchars = er__utf8_count(s, n);
  out->type = ER_CV_STR;
  out->o = &str->h;
  return ER_STATUS_OK;
}

er_status er__cv_str_from_buf(er_chat_rt *r, er_cv_buf *b, er_cv *out) {
  er_status st = er__cv_str_new(r, b->p ? b->p : "", b->len, out);
  er__cv_buf_free(r, b);
  return st;
}

er_status er__cv_str_const(er_arena *a, const char *s, size_t n, er_cv *out) {
  er_cv_str *str = er__arena_alloc(a, sizeof *str + n + 1);
  if (!str) return ER_STATUS_OUT_OF_MEMORY;
  if (n) memcpy(str->data, s, n);
  str->data[n] = '\0';
  str->len = n;
  str->nchars = er__utf8_count(s, n);
  str->h.refs = ER_CV_IMMORTAL;
  str->h.type = ER_CV_STR;
  out->type = ER_CV_STR;
  out->o = &str->h;
  return ER_STATUS_OK;
}

er_status er__cv_list_new(er_chat_rt *r, size_t cap, er_cv *out) {
  *out = er__cv_none();
  er_cv_list *l;
  ER_CHECK(er__cv_obj_new(r, ER_CV_LIST, sizeof *l, (void **)&l));
  out->type = ER_CV_LIST;
  out->o = &l->h;
  if (cap) {
    if (cap > ER_CHAT_MAX_LIVE_BYTES / sizeof(er_cv)) {
      er__cv_unref(r, *out);
      return er__error(ER_STATUS_LIMIT, "chat template line %u: a list of %zu items exceeds "
                       "ER_CHAT_MAX_LIVE_BYTES", r->line, cap);
    }
    er_status st = er__cv_charge(r, cap * sizeof(er_cv));
    if (st) {
      er__cv_unref(r, *out);
      return st;
    }
    l->items = malloc(cap * sizeof(er_cv));
    if (!l->items) {
      er__cv_uncharge(r, cap * sizeof(er_cv));
      er__cv_unref(r, *out);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a list of %zu items", cap);
    }
    l->cap = cap;
  }
  return ER_STATUS_OK;
}

er_status er__cv_list_push(er_chat_rt *r, er_cv list, er_cv v) {
  er_cv_list *l = ER_CV_LIST_OF(list);
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4;
    er_status st = er__cv_charge(r, (cap - l->cap) * sizeof(er_cv));
    if (st) {
      er__cv_unref(r, v);
      return st;
    }
    er_cv *p = realloc(l->items, cap * sizeof(er_cv));
    if (!p) {
      er__cv_uncharge(r, (cap - l->cap) * sizeof(er_cv));
      er__cv_unref(r, v);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory growing a list to %zu items", cap);
    }
    l->items = p;
    l->cap = cap;
  }
  l->items[l->n++] = v;
  return ER_STATUS_OK;
}

er_status er__cv_dict_new(er_chat_rt *r, uint8_t type, er_cv *out) {
  *out = er__cv_none();
  er_cv_dict *d;
  ER_CHECK(er__cv_obj_new(r, type, sizeof *d, (void **)&d));
  out->type = type;
  out->o = &d->h;
  return ER_STATUS_OK;
}

/* Dicts in templates are small (a message, a tool call, a literal), so keys
 * are found by a linear scan; the scan is charged as steps so a template
 * cannot make it unbounded work. */
static er_cv *dict_find(er_chat_rt *r, er_cv_dict *d, er_cv key, size_t *at) {
  if (r) r->steps += d->n / 8;
  for (size_t i = 0; i < d->n; i++) {
    er_cv k = d->keys[i];
    bool eq = false;
    if (k.type == ER_CV_STR && key.type == ER_CV_STR) {
      er_cv_str *a = ER_CV_STR_OF(k), *b = ER_CV_STR_OF(key);
      eq = a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
    } else if ((k.type == ER_CV_INT || k.type == ER_CV_BOOL) && (key.type == ER_CV_INT || key.type == ER_CV_BOOL)) {
      eq = (k.type == ER_CV_INT ? k.i : k.b) == (key.type == ER_CV_INT ? key.i : key.b);
    } else if (k.type == ER_CV_NONE && key.type == ER_CV_NONE) {
      eq = true;
    } else if (k.type == ER_CV_FLOAT || key.type == ER_CV_FLOAT) {
      double x = k.type == ER_CV_FLOAT ? k.f : k.type == ER_CV_INT ? (double)k.i : k.type == ER_CV_BOOL ? k.b : NAN;
      double y = key.type == ER_CV_FLOAT ? key.f
                 : key.type == ER_CV_INT ? (double)key.i
                 : key.type == ER_CV_BOOL ? key.b
                                           : NAN;
      eq = x == y;
    }
    if (eq) {
      if (at) *at = i;
      return &d->vals[i];
    }
  }
  return NULL;
}

er_status er__cv_dict_set(er_chat_rt *r, er_cv dict, er_cv key, er_cv val) {
  er_cv_dict *d = ER_CV_DICT_OF(dict);
  size_t at;
  er_cv *old = dict_find(r, d, key, &at);
  if (old) {
    er_cv prev = *old;
    *old = val;
    er__cv_unref(r, key);
    er__cv_unref(r, prev);
    return ER_STATUS_OK;
  }
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 4;
    er_status st = er__cv_charge(r, 2 * (cap - d->cap) * sizeof(er_cv));
    er_cv *k = NULL, *v = NULL;
    if (st == ER_STATUS_OK) {
      k = realloc(d->keys, cap * sizeof(er_cv));
      if (k) d->keys = k;
      v = k ? realloc(d->vals, cap * sizeof(er_cv)) : NULL;
      if (v) d->vals = v;
      if (!k || !v) {
        /* Keep the accounting exact: whatever did grow stays at `cap`
         * only if both did; otherwise give the charge back. The arrays
         * still hold d->n valid entries either way. */
        er__cv_uncharge(r, 2 * (cap - d->cap) * sizeof(er_cv));
        st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory growing a dict to %zu keys", cap);
      }
    }
    if (st) {
      er__cv_unref(r, key);
      er__cv_unref(r, val);
      return st;
    }
    d->cap = cap;
  }
  d->keys[d->n] = key;
  d->vals[d->n] = val;
  d->n++;
  return ER_STATUS_OK;
}

er_cv *er__cv_dict_get(er_chat_rt *r, er_cv dict, er_cv key) {
  return dict_find(r, ER_CV_DICT_OF(dict), key, NULL);
}

er_cv *er__cv_dict_get_str(er_chat_rt *r, er_cv dict, const char *key) {
  er_cv_dict *d = ER_CV_DICT_OF(dict);
  size_t n = strlen(key);
  if (r) r->steps += d->n / 8;
  for (size_t i = 0; i < d->n; i++) {
    if (d->keys[i].type != ER_CV_STR) continue;
    er_cv_str *s = ER_CV_STR_OF(d->keys[i]);
    if (s->len == n && memcmp(s->data, key, n) == 0) return &d->vals[i];
  }
  return NULL;
}

/* ======================================================================== */
/* Truth, equality, order                                                    */
/* ======================================================================== */

bool er__cv_truthy(er_cv v) {
  switch (v.type) {
  case ER_CV_UNDEFINED: case ER_CV_NONE: return false;
  case ER_CV_BOOL: return v.b;
  case ER_CV_INT: return v.i != 0;
  case ER_CV_FLOAT: return v.f != 0.0;
  case ER_CV_STR: return ER_CV_STR_OF(v)->len != 0;
  case ER_CV_LIST: return ER_CV_LIST_OF(v)->generator || ER_CV_LIST_OF(v)->n != 0;
  case ER_CV_DICT: return ER_CV_DICT_OF(v)->n != 0;
  default: return true;  /* namespaces, loops, functions */
  }
}

static bool is_num(er_cv v) { return v.type == ER_CV_BOOL || v.type == ER_CV_INT || v.type == ER_CV_FLOAT; }

static er_status depth_error(er_chat_rt *r, const char *what) {
  return er__error(ER_STATUS_LIMIT, "chat template line %u: %s of values nested deeper than ER_CHAT_MAX_DEPTH (%d)",
                   r->line, what, ER_CHAT_MAX_DEPTH);
}

static er_status equal_at(er_chat_rt *r, er_cv a, er_cv b, bool *out, int depth) {
  if (depth > ER_CHAT_MAX_DEPTH) return depth_error(r, "comparison");
  ER_CHECK(er__cv_step(r, 1));
  *out = false;
  if (is_num(a) && is_num(b)) {
    if (a.type == ER_CV_FLOAT || b.type == ER_CV_FLOAT) {
      double x = a.type == ER_CV_FLOAT ? a.f : a.type == ER_CV_INT ? (double)a.i : a.b;
      double y = b.type == ER_CV_FLOAT ? b.f : b.type == ER_CV_INT ? (double)b.i : b.b;
      *out = x == y;
    } else {
      *out = (a.type == ER_CV_INT ? a.i : a.b) == (b.type == ER_CV_INT ? b.i : b.b);
    }
    return ER_STATUS_OK;
  }
  if (a.type != b.type) return ER_STATUS_OK;
  switch (a.type) {
  case ER_CV_UNDEFINED: case ER_CV_NONE: *out = true; return ER_STATUS_OK;
  case ER_CV_STR: {
    er_cv_str *x = ER_CV_STR_OF(a), *y = ER_CV_STR_OF(b);
    ER_CHECK(er__cv_step(r, x->len / ER_CHAT_STEP_BYTES));
    *out = x->len == y->len && memcmp(x->data, y->data, x->len) == 0;
    return ER_STATUS_OK;
  }
  case ER_CV_LIST: {
    er_cv_list *x = ER_CV_LIST_OF(a), *y = ER_CV_LIST_OF(b);
    if (x->generator || y->generator) {
      *out = x == y;
      return ER_STATUS_OK;
    }
    if (x->range != y->range) return ER_STATUS_OK;
    if (x->tuple != y->tuple || x->n != y->n) return ER_STATUS_OK;
    for (size_t i = 0; i < x->n; i++) {
      bool e;
      ER_CHECK(equal_at(r, x->items[i], y->items[i], &e, depth + 1));
      if (!e) return ER_STATUS_OK;
    }
    *out = true;
    return ER_STATUS_OK;
  }
  case ER_CV_DICT: {
    er_cv_dict *x = ER_CV_DICT_OF(a), *y = ER_CV_DICT_OF(b);
    if (x->n != y->n) return ER_STATUS_OK;
    for (size_t i = 0; i < x->n; i++) {
      er_cv *w = dict_find(r, y, x->keys[i], NULL);
      if (!w) return ER_STATUS_OK;
      bool e;
      ER_CHECK(equal_at(r, x->vals[i], *w, &e, depth + 1));
      if (!e) return ER_STATUS_OK;
    }
    *out = true;
    return ER_STATUS_OK;
  }
  case ER_CV_MACRO: *out = a.macro == b.macro; return ER_STATUS_OK;
  case ER_CV_BUILTIN: *out = a.builtin == b.builtin; return ER_STATUS_OK;
  default: *out = a.o == b.o; return ER_STATUS_OK;
  }
}

er_status er__cv_equal(er_chat_rt *r, er_cv a, er_cv b, bool *out) { return equal_at(r, a, b, out, 0); }

static er_status compare_at(er_chat_rt *r, er_cv a, er_cv b, int *out, int depth) {
  if (depth > ER_CHAT_MAX_DEPTH) return depth_error(r, "comparison");
  ER_CHECK(er__cv_step(r, 1));
  if (is_num(a) && is_num(b)) {
    if (a.type == ER_CV_FLOAT || b.type == ER_CV_FLOAT) {
      double x = a.type == ER_CV_FLOAT ? a.f : a.type == ER_CV_INT ? (double)a.i : a.b;
      double y = b.type == ER_CV_FLOAT ? b.f : b.type == ER_CV_INT ? (double)b.i : b.b;
      /* NaN compares unordered; Python's < and > are then both false,
       * which a 0 here gives for every operator but <= and >=. */
      *out = x < y ? -1 : x > y ? 1 : 0;
    } else {
      int64_t x = a.type == ER_CV_INT ? a.i : a.b, y = b.type == ER_CV_INT ? b.i : b.b;
      *out = x < y ? -1 : x > y;
    }
    return ER_STATUS_OK;
  }
  if (a.type == ER_CV_STR && b.type == ER_CV_STR) {
    /* Byte order of valid UTF-8 is code-point order, which Python uses. */
    er_cv_str *x = ER_CV_STR_OF(a), *y = ER_CV_STR_OF(b);
    size_t n = x->len < y->len ? x->len : y->len;
    ER_CHECK(er__cv_step(r, n / ER_CHAT_STEP_BYTES));
    int c = memcmp(x->data, y->data, n);
    *out = c < 0 ? -1 : c > 0 ? 1 : x->len < y->len ? -1 : x->len > y->len;
    return ER_STATUS_OK;
  }
  if (a.type == ER_CV_LIST && b.type == ER_CV_LIST && ER_CV_LIST_OF(a)->tuple == ER_CV_LIST_OF(b)->tuple &&
      !ER_CV_LIST_OF(a)->generator && !ER_CV_LIST_OF(b)->generator) {
    er_cv_list *x = ER_CV_LIST_OF(a), *y = ER_CV_LIST_OF(b);
    for (size_t i = 0; i < x->n && i < y->n; i++) {
      bool e;
      ER_CHECK(equal_at(r, x->items[i], y->items[i], &e, depth + 1));
      if (!e) return compare_at(r, x->items[i], y->items[i], out, depth + 1);
    }
    *out = x->n < y->n ? -1 : x->n > y->n;
    return ER_STATUS_OK;
  }
  if (a.type == ER_CV_UNDEFINED || b.type == ER_CV_UNDEFINED)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "chat template line %u: '%s' is undefined", r->line,
                     (a.type == ER_CV_UNDEFINED ? a : b).undef_name ? (a.type == ER_CV_UNDEFINED ? a : b).undef_name
                                                                   : "value");
  return er__error(ER_STATUS_INVALID_ARGUMENT,
                   "chat template line %u: ordering is not supported between instances of '%s' and '%s'", r->line,
                   er__cv_type_name(a), er__cv_type_name(b));
}

er_status er__cv_compare(er_chat_rt *r, er_cv a, er_cv b, int *out) { return compare_at(r, a, b, out, 0); }

const char *er__cv_type_name(er_cv v) {
  switch (v.type) {
  case ER_CV_UNDEFINED: return "Undefined";
  case ER_CV_NONE: return "NoneType";
  case ER_CV_BOOL: return "bool";
  case ER_CV_INT: return "int";
  case ER_CV_FLOAT: return "float";
  case ER_CV_STR: return "str";
  case ER_CV_LIST:
    return ER_CV_LIST_OF(v)->generator ? "generator" : ER_CV_LIST_OF(v)->range ? "range"
           : ER_CV_LIST_OF(v)->tuple   ? "tuple"
                                       : "list";
  case ER_CV_DICT: return "dict";
  case ER_CV_NAMESPACE: return "Namespace";
  case ER_CV_LOOP: return "LoopContext";
  case ER_CV_METHOD: return "builtin_function_or_method";
  case ER_CV_MACRO: return "Macro";
  default: return "function";
  }
}

/* ======================================================================== */
/* str() and repr()                                                          */
/* ======================================================================== */

void er__cv_fmt_float(double f, char *buf) {
  if (isnan(f)) {
    strcpy(buf, "nan");
    return;
  }
  if (isinf(f)) {
    strcpy(buf, f < 0 ? "-inf" : "inf");
    return;
  }
  if (f == 0) {
    strcpy(buf, signbit(f) ? "-0.0" : "0.0");
    return;
  }
  /* The shortest digit string that reads back as f, which is what
   * Python's repr() prints; then Python's layout: positional notation for
   * decimal exponents -4..15, scientific otherwise. */
  char tmp[40];
  int p;
  for (p = 1; p <= 17; p++) {
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
    if (strtod(tmp, NULL) == f) break;
  }
  if (p > 17) p = 17;
  const char *s = tmp;
  char *o = buf;
  if (*s == '-') *o++ = *s++;
  char digits[20];
  int nd = 0;
  for (; *s && *s != 'e'; s++)
    if (*s >= '0' && *s <= '9') digits[nd++] = *s;
  int e = *s == 'e' ? atoi(s + 1) : 0;
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  if (e >= -4 && e < 16) {
    if (e >= 0) {
      for (int i = 0; i <= e; i++) *o++ = i < nd ? digits[i] : '0';
      *o++ = '.';
      if (nd > e + 1)
        for (int i = e + 1; i < nd; i++) *o++ = digits[i];
      else
        *o++ = '0';
    } else {
      *o++ = '0';
      *o++ = '.';
      for (int i = 0; i < -e - 1; i++) *o++ = '0';
      for (int i = 0; i < nd; i++) *o++ = digits[i];
    }
    *o = '\0';
  } else {
    *o++ = digits[0];
    if (nd > 1) {
      *o++ = '.';
      for (int i = 1; i < nd; i++) *o++ = digits[i];
    }
    sprintf(o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
  }
}

/* Python's str.isprintable() for the code points repr() escapes; an
 * approximation of the Unicode categories (Cc, Cf, Cs, Co, Zl, Zp, Zs but
 * the space) that covers what text in prompts carries. */
static bool uni_printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
      (cp >= 0x205f && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff ||
      (cp >= 0xd800 && cp <= 0xf8ff) || (cp >= 0xfff9 && cp <= 0xfffb) || cp == 0xfffe || cp == 0xffff ||
      cp >= 0xf0000 || (cp >= 0xe0000 && cp <= 0xe0fff) || cp == 0x61c || (cp >= 0x600 && cp <= 0x605) ||
      cp == 0x6dd || cp == 0x70f || cp == 0x180e)
    return false;
  return true;
}

static er_status repr_str(er_chat_rt *r, const char *s, size_t n, er_cv_buf *b) {
  bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
  char q = has_sq && !has_dq ? '"' : '\'';
  ER_CHECK(er__cv_buf_putc(r, b, q));
  size_t i = 0;
  while (i < n) {
    size_t start = i;
    uint32_t cp = er__utf8_next(s, n, &i);
    char esc[12];
    if (cp == (uint32_t)q || cp == '\\') {
      esc[0] = '\\';
      esc[1] = (char)cp;
      ER_CHECK(er__cv_buf_put(r, b, esc, 2));
    } else if (cp == '\n') {
      ER_CHECK(er__cv_buf_put(r, b, "\\n", 2));
    } else if (cp == '\r') {
      ER_CHECK(er__cv_buf_put(r, b, "\\r", 2));
    } else if (cp == '\t') {
      ER_CHECK(er__cv_buf_put(r, b, "\\t", 2));
    } else if (!uni_printable(cp)) {
      int k = cp < 0x100 ? snprintf(esc, sizeof esc, "\\x%02x", cp)
              : cp < 0x10000 ? snprintf(esc, sizeof esc, "\\u%04x", cp)
                             : snprintf(esc, sizeof esc, "\\U%08x", cp);
      ER_CHECK(er__cv_buf_put(r, b, esc, (size_t)k));
    } else {
      ER_CHECK(er__cv_buf_put(r, b, s + start, i - start));
    }
  }
  return er__cv_buf_putc(r, b, q);
}

static er_status fmt_at(er_chat_rt *r, er_cv v, er_cv_buf *b, bool repr, int depth) {
  if (depth > ER_CHAT_MAX_DEPTH) return depth_error(r, "printing");
  ER_CHECK(er__cv_step(r, 1));
  char tmp[48];
  switch (v.type) {
  case ER_CV_UNDEFINED: return repr ? er__cv_buf_put(r, b, "Undefined", 9) : ER_STATUS_OK;
  case ER_CV_NONE: return er__cv_buf_put(r, b, "None", 4);
  case ER_CV_BOOL: return v.b ? er__cv_buf_put(r, b, "True", 4) : er__cv_buf_put(r, b, "False", 5);
  case ER_CV_INT: {
    int k = snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
    return er__cv_buf_put(r, b, tmp, (size_t)k);
  }
  case ER_CV_FLOAT:
    er__cv_fmt_float(v.f, tmp);
    return er__cv_buf_put(r, b, tmp, strlen(tmp));
  case ER_CV_STR: {
    er_cv_str *s = ER_CV_STR_OF(v);
    if (!repr) return er__cv_buf_put(r, b, s->data, s->len);
    if (!s->markup) return repr_str(r, s->data, s->len, b);
    ER_CHECK(er__cv_buf_put(r, b, "Markup(", 7));
    ER_CHECK(repr_str(r, s->data, s->len, b));
    return er__cv_buf_putc(r, b, ')');
  }
  case ER_CV_LIST: {
    er_cv_list *l = ER_CV_LIST_OF(v);
    /* Python prints a generator's address, which no template can rely on. */
    if (l->generator) return er__cv_buf_put(r, b, "<generator object>", 18);
    if (l->range) {
      int k = l->range_step == 1 ? snprintf(tmp, sizeof tmp, "range(%lld, %lld)", (long long)l->range_start,
                                            (long long)l->range_stop)
                                 : snprintf(tmp, sizeof tmp, "range(%lld, %lld, %lld)", (long long)l->range_start,
                                            (long long)l->range_stop, (long long)l->range_step);
      return er__cv_buf_put(r, b, tmp, (size_t)k);
    }
    ER_CHECK(er__cv_buf_putc(r, b, l->tuple ? '(' : '['));
    for (size_t i = 0; i < l->n; i++) {
      if (i) ER_CHECK(er__cv_buf_put(r, b, ", ", 2));
      ER_CHECK(fmt_at(r, l->items[i], b, true, depth + 1));
    }
    if (l->tuple && l->n == 1) ER_CHECK(er__cv_buf_putc(r, b, ','));
    return er__cv_buf_putc(r, b, l->tuple ? ')' : ']');
  }
  case ER_CV_DICT: case ER_CV_NAMESPACE: {
    er_cv_dict *d = ER_CV_DICT_OF(v);
    if (v.type == ER_CV_NAMESPACE) ER_CHECK(er__cv_buf_put(r, b, "<Namespace ", 11));
    ER_CHECK(er__cv_buf_putc(r, b, '{'));
    for (size_t i = 0; i < d->n; i++) {
      if (i) ER_CHECK(er__cv_buf_put(r, b, ", ", 2));
      ER_CHECK(fmt_at(r, d->keys[i], b, true, depth + 1));
      ER_CHECK(er__cv_buf_put(r, b, ": ", 2));
      ER_CHECK(fmt_at(r, d->vals[i], b, true, depth + 1));
    }
    ER_CHECK(er__cv_buf_putc(r, b, '}'));
    return v.type == ER_CV_NAMESPACE ? er__cv_buf_putc(r, b, '>') : ER_STATUS_OK;
  }
  case ER_CV_LOOP: {
    er_cv_loop *l = (er_cv_loop *)v.o;
    int k = snprintf(tmp, sizeof tmp, "<LoopContext %lld/%lld>", (long long)(l->index0 + 1), (long long)l->length);
    return er__cv_buf_put(r, b, tmp, (size_t)k);
  }
  case ER_CV_MACRO:
    ER_CHECK(er__cv_buf_put(r, b, "<Macro '", 8));
    ER_CHECK(er__cv_buf_put(r, b, v.macro->name, strlen(v.macro->name)));
    return er__cv_buf_put(r, b, "'>", 2);
  case ER_CV_METHOD: {
    const char *name = ((er_cv_method *)v.o)->name;
    ER_CHECK(er__cv_buf_put(r, b, "<built-in method ", 17));
    ER_CHECK(er__cv_buf_put(r, b, name, strlen(name)));
    return er__cv_buf_putc(r, b, '>');
  }
  default: return er__cv_buf_put(r, b, "<built-in function>", 19);
  }
}

er_status er__cv_to_str(er_chat_rt *r, er_cv v, er_cv_buf *b) { return fmt_at(r, v, b, false, 0); }
er_status er__cv_repr(er_chat_rt *r, er_cv v, er_cv_buf *b) { return fmt_at(r, v, b, true, 0); }

/* ======================================================================== */
/* JSON (transformers' tojson: json.dumps with ensure_ascii=False)           */
/* ======================================================================== */

static er_status json_str(er_chat_rt *r, const char *s, size_t n, bool ascii, er_cv_buf *b) {
  ER_CHECK(er__cv_buf_putc(r, b, '"'));
  size_t i = 0, run = 0;
  while (i < n) {
    size_t start = i;
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char tmp[16];
    if (c == '"') esc = "\\\"";
    else if (c == '\\') esc = "\\\\";
    else if (c == '\n') esc = "\\n";
    else if (c == '\r') esc = "\\r";
    else if (c == '\t') esc = "\\t";
    else if (c == '\b') esc = "\\b";
    else if (c == '\f') esc = "\\f";
    else if (c < 0x20 || (c == 0x7f && ascii)) {
      snprintf(tmp, sizeof tmp, "\\u%04x", c);
      esc = tmp;
    }
    if (esc) {
      ER_CHECK(er__cv_buf_put(r, b, s + run, start - run));
      ER_CHECK(er__cv_buf_put(r, b, esc, strlen(esc)));
      i++;
      run = i;
      continue;
    }
    if (c >= 0x80 && ascii) {
      ER_CHECK(er__cv_buf_put(r, b, s + run, start - run));
      uint32_t cp = er__utf8_next(s, n, &i);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      } else {
        snprintf(tmp, sizeof tmp, "\\u%04x", cp);
      }
      ER_CHECK(er__cv_buf_put(r, b, tmp, strlen(tmp)));
      run = i;
      continue;
    }
    i++;
  }
  ER_CHECK(er__cv_buf_put(r, b, s + run, n - run));
  return er__cv_buf_putc(r, b, '"');
}

static er_status json_newline(er_chat_rt *r, const er_cv_json_opts *o, int level, er_cv_buf *b) {
  ER_CHECK(er__cv_buf_putc(r, b, '\n'));
  for (int i = 0; i < level; i++) ER_CHECK(er__cv_buf_put(r, b, o->indent, o->indent_len));
  return ER_STATUS_OK;
}

static er_status json_key(er_chat_rt *r, er_cv k, const er_cv_json_opts *o, er_cv_buf *b) {
  char tmp[48];
  switch (k.type) {
  case ER_CV_STR: return json_str(r, ER_CV_STR_OF(k)->data, ER_CV_STR_OF(k)->len, o->ensure_ascii, b);
  case ER_CV_INT: snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.i); break;
  case ER_CV_BOOL: strcpy(tmp, k.b ? "\"true\"" : "\"false\""); break;
  case ER_CV_NONE: strcpy(tmp, "\"null\""); break;
  case ER_CV_FLOAT: {
    char f[32];
    er__cv_fmt_float(k.f, f);
    snprintf(tmp, sizeof tmp, "\"%s\"", isnan(k.f) ? "NaN" : isinf(k.f) ? (k.f < 0 ? "-Infinity" : "Infinity") : f);
    break;
  }
  default:
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "chat template line %u: tojson: keys must be str, int, float, bool or None, not %s", r->line,
                     er__cv_type_name(k));
  }
  return er__cv_buf_put(r, b, tmp, strlen(tmp));
}

/* Key order for sort_keys: Python sorts the keys themselves. */
static er_status sorted_order(er_chat_rt *r, er_cv_dict *d, size_t **out) {
  *out = NULL;
  if (!d->n) return ER_STATUS_OK;
  ER_CHECK(er__cv_charge(r, d->n * sizeof(size_t)));
  size_t *ord = malloc(d->n * sizeof(size_t));
  if (!ord) {
    er__cv_uncharge(r, d->n * sizeof(size_t));
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory sorting %zu keys", d->n);
  }
  for (size_t i = 0; i < d->n; i++) ord[i] = i;
  /* Insertion sort: dicts here are small, and it needs no comparator
   * callback that could fail halfway. */
  er_status st = ER_STATUS_OK;
  for (size_t i = 1; i < d->n && !st; i++) {
    size_t x = ord[i], j = i;
    while (j > 0) {
      int c;
      st = er__cv_compare(r, d->keys[ord[j - 1]], d->keys[x], &c);
      if (st || c <= 0) break;
      ord[j] = ord[j - 1];
      j--;
    }
    ord[j] = x;
  }
  if (st) {
    free(ord);
    er__cv_uncharge(r, d->n * sizeof(size_t));
    return st;
  }
  *out = ord;
  return ER_STATUS_OK;
}

static er_status json_at(er_chat_rt *r, er_cv v, const er_cv_json_opts *o, int level, er_cv_buf *b) {
  if (level > ER_CHAT_MAX_DEPTH) return depth_error(r, "tojson");
  ER_CHECK(er__cv_step(r, 1));
  char tmp[48];
  switch (v.type) {
  case ER_CV_NONE: return er__cv_buf_put(r, b, "null", 4);
  case ER_CV_BOOL: return v.b ? er__cv_buf_put(r, b, "true", 4) : er__cv_buf_put(r, b, "false", 5);
  case ER_CV_INT: {
    int k = snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
    return er__cv_buf_put(r, b, tmp, (size_t)k);
  }
  case ER_CV_FLOAT:
    if (isnan(v.f)) return er__cv_buf_put(r, b, "NaN", 3);
    if (isinf(v.f)) return v.f < 0 ? er__cv_buf_put(r, b, "-Infinity", 9) : er__cv_buf_put(r, b, "Infinity", 8);
    er__cv_fmt_float(v.f, tmp);
    return er__cv_buf_put(r, b, tmp, strlen(tmp));
  case ER_CV_STR: return json_str(r, ER_CV_STR_OF(v)->data, ER_CV_STR_OF(v)->len, o->ensure_ascii, b);
  case ER_CV_LIST: {
    er_cv_list *l = ER_CV_LIST_OF(v);
    if (l->generator || l->range)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "chat template line %u: tojson: Object of type %s is not "
                       "JSON serializable", r->line, l->range ? "range" : "generator");
    if (!l->n) return er__cv_buf_put(r, b, "[]", 2);
    ER_CHECK(er__cv_buf_putc(r, b, '['));
    for (size_t i = 0; i < l->n; i++) {
      if (i) ER_CHECK(er__cv_buf_put(r, b, o->item_sep, o->item_sep_len));
      if (o->indent) ER_CHECK(json_newline(r, o, level + 1, b));
      ER_CHECK(json_at(r, l->items[i], o, level + 1, b));
    }
    if (o->indent) ER_CHECK(json_newline(r, o, level, b));
    return er__cv_buf_putc(r, b, ']');
  }
  case ER_CV_DICT: {
    er_cv_dict *d = ER_CV_DICT_OF(v);
    if (!d->n) return er__cv_buf_put(r, b, "{}", 2);
    size_t *ord = NULL;
    if (o->sort_keys) ER_CHECK(sorted_order(r, d, &ord));
    er_status st = er__cv_buf_putc(r, b, '{');
    for (size_t i = 0; i < d->n && !st; i++) {
      size_t k = ord ? ord[i] : i;
      if (i) st = er__cv_buf_put(r, b, o->item_sep, o->item_sep_len);
      if (!st && o->indent) st = json_newline(r, o, level + 1, b);
      if (!st) st = json_key(r, d->keys[k], o, b);
      if (!st) st = er__cv_buf_put(r, b, o->key_sep, o->key_sep_len);
      if (!st) st = json_at(r, d->vals[k], o, level + 1, b);
    }
    if (ord) {
      free(ord);
      er__cv_uncharge(r, d->n * sizeof(size_t));
    }
    ER_CHECK(st);
    if (o->indent) ER_CHECK(json_newline(r, o, level, b));
    return er__cv_buf_putc(r, b, '}');
  }
  default:
    return er__error(ER_STATUS_INVALID_ARGUMENT, "chat template line %u: tojson: Object of type %s is not JSON "
                     "serializable", r->line, er__cv_type_name(v));
  }
}

er_status er__cv_json(er_chat_rt *r, er_cv v, const er_cv_json_opts *o, er_cv_buf *b) {
  return json_at(r, v, o, 0, b);
}

/* ======================================================================== */
/* UTF-8                                                                     */
/* ======================================================================== */

uint32_t er__utf8_next(const char *s, size_t n, size_t *i) {
  const unsigned char *p = (const unsigned char *)s;
  size_t k = *i;
  uint32_t c = p[k];
  if (c < 0x80) {
    *i = k + 1;
    return c;
  }
  int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
  if (len == 1 || k + (size_t)len > n) {
    *i = k + 1;
    return c;
  }
  uint32_t cp = c & (0x3f >> (len - 1));
  for (int j = 1; j < len; j++) {
    if ((p[k + j] & 0xc0) != 0x80) {
      *i = k + 1;
      return c;
    }
    cp = (cp << 6) | (p[k + j] & 0x3f);
  }
  *i = k + (size_t)len;
  return cp;
}

size_t er__utf8_put(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

size_t er__utf8_count(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
  return c;
}

size_t er__utf8_offset(const char *s, size_t n, size_t nchars, size_t index) {
  if (nchars == n) return index < n ? index : n;
  if (index >= nchars) return n;
  size_t i = 0;
  for (size_t k = 0; k < index && i < n; k++) er__utf8_next(s, n, &i);
  return i;
}

bool er__utf8_valid(const char *s, size_t n, size_t *bad_at) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    size_t len;
    uint32_t min;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      min = 0x10000;
    } else {
      break;
    }
    if (i + len > n) break;
    uint32_t cp = c & (0x3f >> (len - 1));
    size_t j;
    for (j = 1; j < len; j++) {
      if ((p[i + j] & 0xc0) != 0x80) break;
      cp = (cp << 6) | (p[i + j] & 0x3f);
    }
    if (j < len || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) break;
    i += len;
  }
  if (i < n) {
    if (bad_at) *bad_at = i;
    return false;
  }
  return true;
}

/* ======================================================================== */
/* Unicode: whitespace and case                                              */
/* ======================================================================== */

bool er__uni_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

/* Ranges of upper/lower pairs: [lo, hi] of upper-case letters, `delta` to
 * the lower case, or delta 1 with alternating upper/lower when `alt`. */
typedef struct case_range {
  uint32_t lo, hi;
  int32_t delta;
  bool alt;  /* upper at even offset from lo, lower next */
} case_range;

static const case_range case_ranges[] = {
    {0x41, 0x5a, 32, false},     {0xc0, 0xd6, 32, false},     {0xd8, 0xde, 32, false},
    {0x100, 0x12f, 1, true},     {0x132, 0x137, 1, true},     {0x139, 0x148, 1, true},
    {0x14a, 0x177, 1, true},     {0x179, 0x17e, 1, true},     {0x386, 0x386, 38, false},
    {0x388, 0x38a, 37, false},   {0x38c, 0x38c, 64, false},   {0x38e, 0x38f, 63, false},
    {0x391, 0x3a1, 32, false},   {0x3a3, 0x3ab, 32, false},   {0x3d8, 0x3ef, 1, true},
    {0x400, 0x40f, 80, false},   {0x410, 0x42f, 32, false},   {0x460, 0x481, 1, true},
    {0x48a, 0x4bf, 1, true},     {0x4c1, 0x4ce, 1, true},     {0x4d0, 0x52f, 1, true},
    {0x531, 0x556, 48, false},   {0x1e00, 0x1e95, 1, true},   {0x1ea0, 0x1eff, 1, true},
    {0xff21, 0xff3a, 32, false},
};

uint32_t er__uni_lower(uint32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  if (cp == 0x178) return 0xff;
  for (size_t i = 0; i < ER_ARRAY_LEN(case_ranges); i++) {
    const case_range *c = &case_ranges[i];
    if (cp < c->lo || cp > c->hi) continue;
    if (c->alt) return ((cp - c->lo) % 2 == 0) ? cp + 1 : cp;
    return cp + (uint32_t)c->delta;
  }
  return cp;
}

uint32_t er__uni_upper(uint32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
  if (cp == 0xff) return 0x178;
  if (cp == 0xb5) return 0x39c;
  if (cp == 0x131) return 'I';
  if (cp == 0x17f) return 'S';
  if (cp == 0x3c2) return 0x3a3;
  for (size_t i = 0; i < ER_ARRAY_LEN(case_ranges); i++) {
    const case_range *c = &case_ranges[i];
    if (c->alt) {
      if (cp > c->lo && cp <= c->hi + 1 && (cp - c->lo) % 2 == 1 && cp - 1 <= c->hi) return cp - 1;
      continue;
    }
    uint32_t lo = c->lo + (uint32_t)c->delta, hi = c->hi + (uint32_t)c->delta;
    if (cp >= lo && cp <= hi) return cp - (uint32_t)c->delta;
  }
  return cp;
}

bool er__uni_cased(uint32_t cp) {
  if (cp == 0xdf || cp == 0x149 || cp == 0xb5 || cp == 0x131 || cp == 0x17f || cp == 0x3c2) return true;
  return er__uni_lower(cp) != cp || er__uni_upper(cp) != cp;
}
