/* chat-eval-impl.h - what the files of the chat-template evaluator share
 * (chat-eval.c: frames, values, expressions, statements and the entry
 * point; chat-eval-ops.c: operators and call arguments; chat-methods.c:
 * text helpers and the methods of str, dict, list and loop;
 * chat-filters.c: filters, tests and global functions): the scopes, call
 * arguments and the helpers more than one of them uses. */
#ifndef ER_LLM_CHAT_EVAL_IMPL_H
#define ER_LLM_CHAT_EVAL_IMPL_H

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

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_JTITLE, CASE_SWAP };

er_status er__cev_rerr(er_chat_rt *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Binds name to v in s, taking v's reference. */
er_status er__cev_scope_set(er_chat_rt *r, er_chat_scope *s, const char *name, er_cv v);

void er__cev_scope_release(er_chat_rt *r, er_chat_scope *s);

/* str(v) as a string value (a new reference). */
er_status er__cev_str_of(er_chat_rt *r, er_cv v, er_cv *out);

/* Iterates v as Python's iter() would, into a list (a new reference):
 * lists and tuples themselves, a dict's keys, a string's characters,
 * nothing for Undefined. */
NOINLINE er_status er__cev_to_items(er_chat_rt *r, er_cv v, er_cv *out);

/* The value of a filter jinja2 computes as a generator, from the filter's
 * status and eager result: failures of the computation itself (not caps)
 * wait until the generator is iterated, as in Python. */
er_status er__cev_as_generator(er_chat_rt *r, er_status st, er_cv *out);

bool er__cev_is_hashable(er_cv v);

size_t er__cev_find_bytes(const char *h, size_t hn, const char *nd, size_t nn, size_t from);

/* Python's strip/lstrip/rstrip: `chars` NULL means whitespace. */
void er__cev_strip_range(const char *s, size_t n, const char *chars, size_t cn, bool left, bool right, size_t *b,
                        size_t *e);

NOINLINE er_status er__cev_case_map(er_chat_rt *r, er_cv in, int mode, er_cv *out);

bool er__cev_all_cp(const er_cv_str *s, int kind);

bool er__cev_has_method(er_cv v, const char *name);

er_status er__cev_make_method(er_chat_rt *r, er_cv self, const char *name, er_cv *out);

/* jinja2's getattr: a Python attribute first (methods), then an item. */
NOINLINE er_status er__cev_get_attr(er_chat_rt *r, er_cv obj, const char *name, er_cv *out);

/* jinja2's getitem: an item first, then (for a string key) an attribute. */
NOINLINE er_status er__cev_get_item(er_chat_rt *r, er_cv obj, er_cv key, er_cv *out);

er_status er__cev_html_escape(er_chat_rt *r, const er_cv_str *s, er_cv_buf *b);

NOINLINE er_status er__cev_binop(er_chat_rt *r, int op, er_cv x, er_cv y, er_cv *out);

NOINLINE er_status er__cev_contains(er_chat_rt *r, er_cv hay, er_cv item, bool *out);

er_status er__cev_compare_op(er_chat_rt *r, int op, er_cv a, er_cv b, bool *out);

void er__cev_args_free(er_chat_rt *r, cargs *a);

er_status er__cev_eval_args(er_chat_rt *r, const er_chat_node *n, cargs *a);

/* Argument `pos` (positional) or `name` (keyword), or NULL. */
er_cv *er__cev_argp(cargs *a, size_t pos, const char *name);

/* Rejects more than `max_pos` positional arguments or keywords not in
 * `names` (NULL-terminated). */
er_status er__cev_check_args(er_chat_rt *r, cargs *a, const char *what, size_t max_pos, const char *const *names);

er_status er__cev_str_replace(er_chat_rt *r, const er_cv_str *s, const er_cv_str *old, const er_cv_str *rep,
                             int64_t count, er_cv *out);

er_status er__cev_do_strip(er_chat_rt *r, er_cv self, er_cv *chars, bool left, bool right, er_cv *out);

/* Python's str.splitlines boundaries. */
size_t er__cev_line_break(const char *s, size_t n, size_t i, size_t *len);

NOINLINE er_status er__cev_dict_method(er_chat_rt *r, er_cv self, const char *m, cargs *a, er_cv *out);

NOINLINE er_status er__cev_call_method(er_chat_rt *r, er_cv self, const char *m, cargs *a, er_cv *out);

NOINLINE er_status er__cev_apply_filter(er_chat_rt *r, const char *name, er_cv in, cargs *a, er_cv *out);

NOINLINE er_status er__cev_apply_test(er_chat_rt *r, const char *name, er_cv v, cargs *a, bool *out);

NOINLINE er_status er__cev_call_builtin(er_chat_rt *r, int id, cargs *a, er_cv *out);

NOINLINE er_status er__cev_call_macro(er_chat_rt *r, const er_chat_node *m, cargs *a, er_cv *out);

er_status er__cev_eval(er_chat_rt *r, const er_chat_node *n, er_cv *out);

er_status er__cev_exec_block(er_chat_rt *r, er_chat_node *const *kids, uint32_t n);

static inline er_status undef_err(er_chat_rt *r, er_cv v) {
  return er__cev_rerr(r, "'%s' is undefined", v.undef_name ? v.undef_name : "value");
}

static inline const char *tname(er_cv v) { return er__cv_type_name(v); }

static inline bool is_int(er_cv v) { return v.type == ER_CV_INT || v.type == ER_CV_BOOL; }

static inline int64_t int_of(er_cv v) { return v.type == ER_CV_INT ? v.i : v.b; }

static inline bool is_num(er_cv v) { return is_int(v) || v.type == ER_CV_FLOAT; }

static inline double float_of(er_cv v) { return v.type == ER_CV_FLOAT ? v.f : (double)int_of(v); }

static inline er_status new_str(er_chat_rt *r, const char *s, size_t n, er_cv *out) { return er__cv_str_new(r, s, n, out); }

static inline er_status new_cstr(er_chat_rt *r, const char *s, er_cv *out) { return er__cv_str_new(r, s, strlen(s), out); }

static inline er_status need_str(er_chat_rt *r, er_cv v, const char *what) {
  if (v.type == ER_CV_STR) return ER_STATUS_OK;
  if (v.type == ER_CV_UNDEFINED) return undef_err(r, v);
  return er__cev_rerr(r, "%s must be a string, not '%s'", what, tname(v));
}

static inline bool is_gen(er_cv v) { return v.type == ER_CV_LIST && ER_CV_LIST_OF(v)->generator; }

/* A list as Python's list/tuple operators see one (not a generator or range). */
static inline bool is_plain_list(er_cv v) {
  return v.type == ER_CV_LIST && !ER_CV_LIST_OF(v)->generator && !ER_CV_LIST_OF(v)->range;
}

static inline bool in_names(const char *const *names, const char *name) {
  for (; *names; names++)
    if (strcmp(*names, name) == 0) return true;
  return false;
}

static inline bool arg_bool(cargs *a, size_t pos, const char *name, bool dflt) {
  er_cv *v = er__cev_argp(a, pos, name);
  return v ? er__cv_truthy(*v) : dflt;
}

#endif /* ER_LLM_CHAT_EVAL_IMPL_H */
