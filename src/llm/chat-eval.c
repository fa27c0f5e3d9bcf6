/* chat-er__cev_eval.c - the chat-template evaluator: walks the AST of chat-parse.c
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
#include "llm/chat-eval-impl.h"

static const char LOOP_NAME[] = "loop";

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

er_status er__cev_rerr(er_chat_rt *r, const char *fmt, ...) {
  char msg[800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return er__error(ER_STATUS_INVALID_ARGUMENT, "chat template line %u: %s", r->line, msg);
}

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
er_status er__cev_scope_set(er_chat_rt *r, er_chat_scope *s, const char *name, er_cv v) {
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

void er__cev_scope_release(er_chat_rt *r, er_chat_scope *s) {
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

/* str(v) as a string value (a new reference). */
er_status er__cev_str_of(er_chat_rt *r, er_cv v, er_cv *out) {
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

/* Iterates v as Python's iter() would, into a list (a new reference):
 * lists and tuples themselves, a dict's keys, a string's characters,
 * nothing for Undefined. */
NOINLINE er_status er__cev_to_items(er_chat_rt *r, er_cv v, er_cv *out) {
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
  default: return er__cev_rerr(r, "'%s' object is not iterable", tname(v));
  }
}

/* The value of a filter jinja2 computes as a generator, from the filter's
 * status and eager result: failures of the computation itself (not caps)
 * wait until the generator is iterated, as in Python. */
er_status er__cev_as_generator(er_chat_rt *r, er_status st, er_cv *out) {
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

bool er__cev_is_hashable(er_cv v) {
  if (v.type == ER_CV_LIST) {
    if (!ER_CV_LIST_OF(v)->tuple) return false;
    for (size_t i = 0; i < ER_CV_LIST_OF(v)->n; i++)
      if (!er__cev_is_hashable(ER_CV_LIST_OF(v)->items[i])) return false;
    return true;
  }
  return v.type != ER_CV_DICT && v.type != ER_CV_NAMESPACE;
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

bool er__cev_has_method(er_cv v, const char *name) {
  switch (v.type) {
  case ER_CV_STR: return in_names(str_methods, name);
  case ER_CV_DICT: return in_names(dict_methods, name);
  case ER_CV_LIST: return in_names(list_methods, name);
  case ER_CV_LOOP: return strcmp(name, "cycle") == 0 || strcmp(name, "changed") == 0;
  default: return false;
  }
}

er_status er__cev_make_method(er_chat_rt *r, er_cv self, const char *name, er_cv *out) {
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
  } else if (er__cev_has_method(v, name)) {
    return er__cev_make_method(r, v, name, out);
  } else {
    *out = er__cv_undef(name);
  }
  return ER_STATUS_OK;
}

/* jinja2's getattr: a Python attribute first (methods), then an item. */
NOINLINE er_status er__cev_get_attr(er_chat_rt *r, er_cv obj, const char *name, er_cv *out) {
  *out = er__cv_undef(name);
  switch (obj.type) {
  case ER_CV_UNDEFINED: return undef_err(r, obj);
  case ER_CV_DICT: case ER_CV_NAMESPACE: {
    if (obj.type == ER_CV_DICT && er__cev_has_method(obj, name)) return er__cev_make_method(r, obj, name, out);
    er_cv *v = er__cv_dict_get_str(r, obj, name);
    if (v) {
      *out = *v;
      er__cv_ref(*out);
    }
    return ER_STATUS_OK;
  }
  case ER_CV_LOOP: return loop_attr(r, obj, name, out);
  case ER_CV_STR: case ER_CV_LIST:
    if (er__cev_has_method(obj, name)) return er__cev_make_method(r, obj, name, out);
    return ER_STATUS_OK;
  default: return ER_STATUS_OK;
  }
}

/* jinja2's getitem: an item first, then (for a string key) an attribute. */
NOINLINE er_status er__cev_get_item(er_chat_rt *r, er_cv obj, er_cv key, er_cv *out) {
  *out = er__cv_undef(key.type == ER_CV_STR ? ER_CV_STR_OF(key)->data : "item");
  switch (obj.type) {
  case ER_CV_UNDEFINED: return undef_err(r, obj);
  case ER_CV_DICT: case ER_CV_NAMESPACE: {
    if (!er__cev_is_hashable(key)) return ER_STATUS_OK;
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
  if (key.type == ER_CV_STR) return er__cev_get_attr(r, obj, ER_CV_STR_OF(key)->data, out);
  return ER_STATUS_OK;
}

/* Python's slice.indices() and the slice itself. jinja2 compiles a[b:c]
 * to a plain Python subscript, so unlike a[b] its errors are not turned
 * into Undefined. */
static NOINLINE er_status do_slice(er_chat_rt *r, er_cv obj, er_cv *bounds, er_cv *out) {
  *out = er__cv_undef(NULL);
  if (obj.type == ER_CV_UNDEFINED) return undef_err(r, obj);
  if ((obj.type != ER_CV_LIST && obj.type != ER_CV_STR) || is_gen(obj))
    return er__cev_rerr(r, "'%s' object is not subscriptable by a slice", tname(obj));
  int64_t v[3];
  bool given[3];
  for (int k = 0; k < 3; k++) {
    given[k] = bounds[k].type != ER_CV_NONE;
    if (given[k] && !is_int(bounds[k]))
      return er__cev_rerr(r, "slice indices must be integers or None, not '%s'", tname(bounds[k]));
    v[k] = given[k] ? int_of(bounds[k]) : 0;
  }
  int64_t step = given[2] ? v[2] : 1;
  if (step == 0) return er__cev_rerr(r, "slice step cannot be zero");
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

/* ======================================================================== */
/* Expressions                                                               */
/* ======================================================================== */

static NOINLINE er_status eval_call(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  const er_chat_node *f = n->a;
  er_cv self = er__cv_undef(NULL), callee = er__cv_undef(NULL);
  const char *method = NULL;
  if (f->kind == ER_CN_ATTR) {
    ER_CHECK(er__cev_eval(r, f->a, &self));
    if (er__cev_has_method(self, f->name)) {
      method = f->name;
    } else {
      er_status st = er__cev_get_attr(r, self, f->name, &callee);
      er__cv_unref(r, self);
      self = er__cv_undef(NULL);
      if (st) return st;
    }
  } else {
    ER_CHECK(er__cev_eval(r, f, &callee));
  }
  if (!method && callee.type == ER_CV_METHOD) {
    er_cv_method *m = (er_cv_method *)callee.o;
    self = m->self;
    er__cv_ref(self);
    method = m->name;
  }
  cargs a;
  er_status st = er__cev_eval_args(r, n, &a);
  r->line = n->line;
  if (!st) {
    if (method) st = er__cev_call_method(r, self, method, &a, out);
    else if (callee.type == ER_CV_MACRO) st = er__cev_call_macro(r, callee.macro, &a, out);
    else if (callee.type == ER_CV_BUILTIN) st = er__cev_call_builtin(r, callee.builtin, &a, out);
    else if (callee.type == ER_CV_UNDEFINED) st = undef_err(r, callee);
    else st = er__cev_rerr(r, "'%s' object is not callable", tname(callee));
    er__cev_args_free(r, &a);
  }
  er__cv_unref(r, self);
  er__cv_unref(r, callee);
  return st;
}

static NOINLINE er_status eval_filter(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_cv in;
  if (n->a) {
    ER_CHECK(er__cev_eval(r, n->a, &in));
  } else {
    in = r->block_input;
    er__cv_ref(in);
  }
  cargs a;
  er_status st = er__cev_eval_args(r, n, &a);
  r->line = n->line;
  if (!st) {
    st = er__cev_apply_filter(r, n->name, in, &a, out);
    er__cev_args_free(r, &a);
  }
  er__cv_unref(r, in);
  return st;
}

static NOINLINE er_status eval_test(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_cv in;
  ER_CHECK(er__cev_eval(r, n->a, &in));
  cargs a;
  er_status st = er__cev_eval_args(r, n, &a);
  r->line = n->line;
  bool res = false;
  if (!st) {
    st = er__cev_apply_test(r, n->name, in, &a, &res);
    er__cev_args_free(r, &a);
  }
  er__cv_unref(r, in);
  if (!st) *out = er__cv_bool(n->op ? !res : res);
  return st;
}

static NOINLINE er_status eval_slice(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
  er_cv obj, b[3] = {er__cv_none(), er__cv_none(), er__cv_none()};
  ER_CHECK(er__cev_eval(r, n->a, &obj));
  er_status st = ER_STATUS_OK;
  for (int k = 0; k < 3 && !st; k++)
    if (n->kids[k]) st = er__cev_eval(r, n->kids[k], &b[k]);
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
      st = er__cev_eval(r, n->kids[i], &k);
      if (!st && !er__cev_is_hashable(k)) {
        st = er__cev_rerr(r, "unhashable type: '%s'", tname(k));
        er__cv_unref(r, k);
      }
      if (!st) {
        st = er__cev_eval(r, n->kids2[i], &v);
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
    st = er__cev_eval(r, n->kids[i], &v);
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
  ER_CHECK(er__cev_eval(r, n->a, &left));
  for (const er_chat_node *c = n; c; c = c->c) {
    er_cv right;
    er_status st = er__cev_eval(r, c->b, &right);
    if (st) {
      er__cv_unref(r, left);
      return st;
    }
    r->line = c->line;
    bool res = false;
    st = er__cev_compare_op(r, c->op, left, right, &res);
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
    st = er__cev_eval(r, n->kids[i], &v);
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
    ER_CHECK(er__cev_eval(r, n->a, &x));
    r->line = n->line;
    st = er__cev_get_attr(r, x, n->name, out);
    er__cv_unref(r, x);
    return st;
  case ER_CN_ITEM:
    ER_CHECK(er__cev_eval(r, n->a, &x));
    st = er__cev_eval(r, n->b, &y);
    if (!st) {
      r->line = n->line;
      st = er__cev_get_item(r, x, y, out);
      er__cv_unref(r, y);
    }
    er__cv_unref(r, x);
    return st;
  case ER_CN_SLICE: return eval_slice(r, n, out);
  case ER_CN_CALL: return eval_call(r, n, out);
  case ER_CN_FILTER: return eval_filter(r, n, out);
  case ER_CN_TEST: return eval_test(r, n, out);
  case ER_CN_NOT:
    ER_CHECK(er__cev_eval(r, n->a, &x));
    *out = er__cv_bool(!er__cv_truthy(x));
    er__cv_unref(r, x);
    return ER_STATUS_OK;
  case ER_CN_NEG: case ER_CN_POS:
    ER_CHECK(er__cev_eval(r, n->a, &x));
    r->line = n->line;
    if (x.type == ER_CV_UNDEFINED) return undef_err(r, x);
    if (!is_num(x)) {
      st = er__cev_rerr(r, "bad operand type for unary %c: '%s'", n->kind == ER_CN_NEG ? '-' : '+', tname(x));
      er__cv_unref(r, x);
      return st;
    }
    if (n->kind == ER_CN_POS) *out = x.type == ER_CV_BOOL ? er__cv_int(x.b) : x;
    else if (x.type == ER_CV_FLOAT) *out = er__cv_float(-x.f);
    else if (int_of(x) == INT64_MIN) return er__cev_rerr(r, "integer overflow in unary - (beyond 64 bits)");
    else *out = er__cv_int(-int_of(x));
    return ER_STATUS_OK;
  case ER_CN_BINOP:
    ER_CHECK(er__cev_eval(r, n->a, &x));
    st = er__cev_eval(r, n->b, &y);
    if (!st) {
      r->line = n->line;
      st = er__cev_binop(r, n->op, x, y, out);
      er__cv_unref(r, y);
    }
    er__cv_unref(r, x);
    return st;
  case ER_CN_AND: case ER_CN_OR:
    ER_CHECK(er__cev_eval(r, n->a, &x));
    if (er__cv_truthy(x) == (n->kind == ER_CN_OR)) {
      *out = x;
      return ER_STATUS_OK;
    }
    er__cv_unref(r, x);
    return er__cev_eval(r, n->b, out);
  case ER_CN_CONCAT: return eval_concat(r, n, out);
  case ER_CN_COMPARE: return eval_compare(r, n, out);
  case ER_CN_COND:
    ER_CHECK(er__cev_eval(r, n->b, &x));
    {
      bool t = er__cv_truthy(x);
      er__cv_unref(r, x);
      if (t) return er__cev_eval(r, n->a, out);
      if (n->c) return er__cev_eval(r, n->c, out);
      *out = er__cv_undef("the else branch of a conditional expression");
      return ER_STATUS_OK;
    }
  case ER_CN_LIST: case ER_CN_TUPLE: case ER_CN_DICT: return eval_collection(r, n, out);
  default: return er__cev_rerr(r, "internal: node kind %d is not an expression", n->kind);
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

er_status er__cev_eval(er_chat_rt *r, const er_chat_node *n, er_cv *out) {
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
  if (target->kind == ER_CN_NAME) return er__cev_scope_set(r, s, target->name, v);
  er_cv items;
  er_status st = er__cev_to_items(r, v, &items);
  er__cv_unref(r, v);
  if (st) return st;
  er_cv_list *l = ER_CV_LIST_OF(items);
  if (l->n != target->n) {
    st = l->n < target->n ? er__cev_rerr(r, "not enough values to unpack (expected %u, got %zu)", target->n, l->n)
                          : er__cev_rerr(r, "too many values to unpack (expected %u)", target->n);
  }
  for (uint32_t i = 0; i < target->n && !st; i++) {
    er__cv_ref(l->items[i]);
    st = er__cev_scope_set(r, s, target->kids[i]->name, l->items[i]);
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
    return er__cev_rerr(r, "cannot assign attribute '%s' on '%s': it is not a namespace()", target->name, target->a->name);
  }
  if (target->name[0] == '_') {
    er__cv_unref(r, v);
    return er__cev_rerr(r, "chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'",
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
  er_status st = er__cev_exec_block(r, kids, n);
  r->scope = saved;
  er__cev_scope_release(r, &sc);
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
  er_status st = er__cev_eval(r, chain, out);
  r->block_input = saved;
  return st;
}

static NOINLINE er_status exec_for(er_chat_rt *r, const er_chat_node *n) {
  er_cv it, items;
  ER_CHECK(er__cev_eval(r, n->a, &it));
  r->line = n->line;
  er_status st = er__cev_to_items(r, it, &items);
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
      if (!st) st = er__cev_eval(r, n->c, &c);
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
      er__cev_scope_release(r, &sc);
      return st;
    }
    items = kept;
  }
  er_cv_list *l = ER_CV_LIST_OF(items);
  if (!l->n) {
    er__cev_scope_release(r, &sc);
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
      st = er__cev_scope_set(r, &sc, LOOP_NAME, loopv);
    }
    if (!st) st = er__cev_exec_block(r, n->kids, n->n);
    r->scope = saved;
    scope_clear(r, &sc);
    if (r->loop_ctl == 1) {
      r->loop_ctl = 0;
      break;
    }
    r->loop_ctl = 0;
  }
  er__cev_scope_release(r, &sc);
  er__cv_unref(r, loopv);
  return st;
}

static NOINLINE er_status exec_node(er_chat_rt *r, const er_chat_node *n) {
  er_status st;
  er_cv v;
  switch (n->kind) {
  case ER_CN_DATA: return emit(r, n->name, n->len);
  case ER_CN_PRINT:
    ER_CHECK(er__cev_eval(r, n->a, &v));
    r->line = n->line;
    st = emit_value(r, v);
    er__cv_unref(r, v);
    return st;
  case ER_CN_IF:
    /* elif chains are walked here, not recursed into. */
    for (const er_chat_node *c = n;;) {
      ER_CHECK(er__cev_eval(r, c->a, &v));
      bool t = er__cv_truthy(v);
      er__cv_unref(r, v);
      if (t) return er__cev_exec_block(r, c->kids, c->n);
      if (c->n2 == 1 && c->kids2[0]->kind == ER_CN_IF && c->kids2[0]->op == 1) {
        c = c->kids2[0];
        ER_CHECK(er__cv_step(r, 1));
        continue;
      }
      return er__cev_exec_block(r, c->kids2, c->n2);
    }
  case ER_CN_FOR: return exec_for(r, n);
  case ER_CN_SET:
    ER_CHECK(er__cev_eval(r, n->a, &v));
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
    return er__cev_scope_set(r, r->scope, n->name, m);
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
  default: return er__cev_rerr(r, "internal: node kind %d is not a statement", n->kind);
  }
}

er_status er__cev_exec_block(er_chat_rt *r, er_chat_node *const *kids, uint32_t n) {
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
  if (!st) st = er__cev_scope_set(r, r->globals, "messages", list);
  else er__cv_unref(r, list);
  if (!st) st = er__cev_scope_set(r, r->globals, "add_generation_prompt", er__cv_bool(agp));
  if (!st && !(st = new_cstr(r, bos ? bos : "", &v))) st = er__cev_scope_set(r, r->globals, "bos_token", v);
  if (!st && !(st = new_cstr(r, eos ? eos : "", &v))) st = er__cev_scope_set(r, r->globals, "eos_token", v);
  /* transformers passes tools=None and documents=None explicitly. */
  if (!st) st = er__cev_scope_set(r, r->globals, "tools", er__cv_none());
  if (!st) st = er__cev_scope_set(r, r->globals, "documents", er__cv_none());
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
  if (!st) st = er__cev_exec_block(&r, t->body, t->n_body);
  er__cev_scope_release(&r, &root);
  er__cev_scope_release(&r, &globals);
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
