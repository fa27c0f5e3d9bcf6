/* chat-eval-ops.c - the chat-template evaluator's operators (arithmetic,
 * comparison, membership, concatenation, as jinja2 computes them) and its
 * call arguments (see chat-eval.c). */
#include "llm/chat-eval-impl.h"

/* Operators                                                                 */
/* ======================================================================== */

static const char *op_name(int op) {
  static const char *const names[] = {"", "+", "-", "*", "/", "//", "%", "**"};
  return op > 0 && op < (int)ER_ARRAY_LEN(names) ? names[op] : "?";
}

er_status er__cev_html_escape(er_chat_rt *r, const er_cv_str *s, er_cv_buf *b) {
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
  if (markup && !a->markup) st = er__cev_html_escape(r, a, &buf);
  else st = er__cv_buf_put(r, &buf, a->data, a->len);
  if (!st) st = markup && !b->markup ? er__cev_html_escape(r, b, &buf) : er__cv_buf_put(r, &buf, b->data, b->len);
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
      if (!er__mul_i64(acc, base, &acc)) return er__cev_rerr(r, "integer overflow in '**' (beyond 64 bits)");
    }
    e >>= 1;
    if (e && !er__mul_i64(base, base, &base)) return er__cev_rerr(r, "integer overflow in '**' (beyond 64 bits)");
  }
  *out = er__cv_int(acc);
  return ER_STATUS_OK;
}

NOINLINE er_status er__cev_binop(er_chat_rt *r, int op, er_cv x, er_cv y, er_cv *out) {
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
    return er__cev_rerr(r, "printf-style string formatting ('...' %% values) is not supported");
  if (!is_num(x) || !is_num(y))
    return er__cev_rerr(r, "unsupported operand type(s) for %s: '%s' and '%s'", op_name(op), tname(x), tname(y));
  if (is_int(x) && is_int(y)) {
    int64_t a = int_of(x), b = int_of(y), c;
    switch (op) {
    case ER_OP_ADD:
      if (!er__add_i64(a, b, &c)) return er__cev_rerr(r, "integer overflow in '+' (beyond 64 bits)");
      *out = er__cv_int(c);
      return ER_STATUS_OK;
    case ER_OP_SUB:
      if (__builtin_sub_overflow(a, b, &c)) return er__cev_rerr(r, "integer overflow in '-' (beyond 64 bits)");
      *out = er__cv_int(c);
      return ER_STATUS_OK;
    case ER_OP_MUL:
      if (!er__mul_i64(a, b, &c)) return er__cev_rerr(r, "integer overflow in '*' (beyond 64 bits)");
      *out = er__cv_int(c);
      return ER_STATUS_OK;
    case ER_OP_DIV:
      if (!b) return er__cev_rerr(r, "division by zero");
      *out = er__cv_float((double)a / (double)b);
      return ER_STATUS_OK;
    case ER_OP_FLOORDIV: case ER_OP_MOD: {
      if (!b) return er__cev_rerr(r, "integer division or modulo by zero");
      if (a == INT64_MIN && b == -1) {
        if (op == ER_OP_MOD) *out = er__cv_int(0);
        else return er__cev_rerr(r, "integer overflow in '//' (beyond 64 bits)");
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
      if (!a) return er__cev_rerr(r, "0 cannot be raised to a negative power");
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
    if (b == 0) return er__cev_rerr(r, "float division by zero");
    *out = er__cv_float(a / b);
    break;
  case ER_OP_FLOORDIV: case ER_OP_MOD: {
    if (b == 0) return er__cev_rerr(r, "float division or modulo by zero");
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    *out = er__cv_float(op == ER_OP_MOD ? m : floor((a - m) / b + 0.5));
    if (op == ER_OP_FLOORDIV) *out = er__cv_float(floor(a / b));
    break;
  }
  default:
    if (a < 0 && b != floor(b)) return er__cev_rerr(r, "a negative number raised to a fractional power is complex");
    if (a == 0 && b < 0) return er__cev_rerr(r, "0.0 cannot be raised to a negative power");
    *out = er__cv_float(pow(a, b));
    break;
  }
  return ER_STATUS_OK;
}

NOINLINE er_status er__cev_contains(er_chat_rt *r, er_cv hay, er_cv item, bool *out) {
  *out = false;
  switch (hay.type) {
  case ER_CV_STR: {
    if (item.type != ER_CV_STR) return er__cev_rerr(r, "'in <string>' requires string as left operand, not %s", tname(item));
    er_cv_str *h = ER_CV_STR_OF(hay), *n = ER_CV_STR_OF(item);
    ER_CHECK(er__cv_step(r, h->len / ER_CHAT_STEP_BYTES));
    *out = er__cev_find_bytes(h->data, h->len, n->data, n->len, 0) != SIZE_MAX;
    return ER_STATUS_OK;
  }
  case ER_CV_LIST: {
    er_cv items;
    ER_CHECK(er__cev_to_items(r, hay, &items)); /* consumes a generator */
    er_cv_list *l = ER_CV_LIST_OF(items);
    er_status st = ER_STATUS_OK;
    for (size_t i = 0; i < l->n && !*out && !st; i++) st = er__cv_equal(r, l->items[i], item, out);
    er__cv_unref(r, items);
    return st;
  }
  case ER_CV_DICT:
    if (!er__cev_is_hashable(item)) return er__cev_rerr(r, "unhashable type: '%s'", tname(item));
    *out = er__cv_dict_get(r, hay, item) != NULL;
    return ER_STATUS_OK;
  case ER_CV_UNDEFINED: return ER_STATUS_OK; /* iterates as empty */
  default: return er__cev_rerr(r, "argument of type '%s' is not iterable", tname(hay));
  }
}

er_status er__cev_compare_op(er_chat_rt *r, int op, er_cv a, er_cv b, bool *out) {
  switch (op) {
  case ER_OP_EQ: return er__cv_equal(r, a, b, out);
  case ER_OP_NE:
    ER_CHECK(er__cv_equal(r, a, b, out));
    *out = !*out;
    return ER_STATUS_OK;
  case ER_OP_IN: return er__cev_contains(r, b, a, out);
  case ER_OP_NOTIN:
    ER_CHECK(er__cev_contains(r, b, a, out));
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

void er__cev_args_free(er_chat_rt *r, cargs *a) {
  size_t n = a->npos + a->nkw;
  if (!a->v) return;
  for (size_t i = 0; i < n; i++) er__cv_unref(r, a->v[i]);
  free(a->v);
  er__cv_uncharge(r, n * sizeof(er_cv));
  a->v = NULL;
}

er_status er__cev_eval_args(er_chat_rt *r, const er_chat_node *n, cargs *a) {
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
    er_status st = er__cev_eval(r, n->kids[i], &a->v[i]);
    if (st) {
      er__cev_args_free(r, a);
      return st;
    }
  }
  return ER_STATUS_OK;
}

/* Argument `pos` (positional) or `name` (keyword), or NULL. */
er_cv *er__cev_argp(cargs *a, size_t pos, const char *name) {
  if (pos < a->npos) return &a->v[pos];
  if (name)
    for (size_t k = 0; k < a->nkw; k++)
      if (strcmp(a->kw[k], name) == 0) return &a->v[a->npos + k];
  return NULL;
}

/* Rejects more than `max_pos` positional arguments or keywords not in
 * `names` (NULL-terminated). */
er_status er__cev_check_args(er_chat_rt *r, cargs *a, const char *what, size_t max_pos, const char *const *names) {
  if (a->npos > max_pos) return er__cev_rerr(r, "%s takes at most %zu argument(s), %zu given", what, max_pos, a->npos);
  for (size_t k = 0; k < a->nkw; k++) {
    bool ok = false;
    for (size_t j = 0; names && names[j]; j++) ok |= strcmp(names[j], a->kw[k]) == 0;
    if (!ok) return er__cev_rerr(r, "%s got an unexpected keyword argument '%s'", what, a->kw[k]);
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
