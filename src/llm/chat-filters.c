/* chat-filters.c - the chat-template evaluator's filters, tests and global
 * functions and macros (see chat-eval.c). */
#include "llm/chat-eval-impl.h"

/* Filters                                                                   */
/* ======================================================================== */

/* jinja2's make_attrgetter: "a.b.0" walks getitem per part (digits as
 * integers); an integer attribute indexes. */
static NOINLINE er_status attr_path(er_chat_rt *r, er_cv item, er_cv attr, er_cv *out) {
  if (is_int(attr)) return er__cev_get_item(r, item, attr, out);
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
    if (!st) st = er__cev_get_item(r, curv, key, &next_v);
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
    er_status st = er__cev_case_map(r, v, CASE_LOWER, out);
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
    if (is_gen(in)) return er__cev_rerr(r, "object of type 'generator' has no len()");
    *out = er__cv_int((int64_t)ER_CV_LIST_OF(in)->n);
    return ER_STATUS_OK;
  case ER_CV_DICT: *out = er__cv_int((int64_t)ER_CV_DICT_OF(in)->n); return ER_STATUS_OK;
  case ER_CV_UNDEFINED: *out = er__cv_int(0); return ER_STATUS_OK;
  case ER_CV_LOOP: *out = er__cv_int(((er_cv_loop *)in.o)->length); return ER_STATUS_OK;
  default: return er__cev_rerr(r, "object of type '%s' has no len()", tname(in));
  }
}

static er_status f_default(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"default_value", "boolean", NULL};
  ER_CHECK(er__cev_check_args(r, a, "filter 'default'", 2, kw));
  er_cv *d = er__cev_argp(a, 0, "default_value");
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'trim'", 1, kw));
  er_cv s;
  ER_CHECK(er__cev_str_of(r, in, &s));
  er_status st = er__cev_do_strip(r, s, er__cev_argp(a, 0, "chars"), true, true, out);
  er__cv_unref(r, s);
  return st;
}

static er_status f_case(er_chat_rt *r, er_cv in, cargs *a, int mode, const char *name, er_cv *out) {
  ER_CHECK(er__cev_check_args(r, a, name, 0, NULL));
  return er__cev_case_map(r, in, mode, out);
}
static er_status f_upper(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_case(r, in, a, CASE_UPPER, "filter 'upper'", out); }
static er_status f_lower(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_case(r, in, a, CASE_LOWER, "filter 'lower'", out); }
static er_status f_capitalize(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  return f_case(r, in, a, CASE_CAPITALIZE, "filter 'capitalize'", out);
}
static er_status f_title(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return f_case(r, in, a, CASE_JTITLE, "filter 'title'", out); }

static er_status f_string(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(er__cev_check_args(r, a, "filter 'string'", 0, NULL));
  return er__cev_str_of(r, in, out);
}

static er_status f_safe(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(er__cev_check_args(r, a, "filter 'safe'", 0, NULL));
  if (in.type == ER_CV_STR && ER_CV_STR_OF(in)->markup) {
    er__cv_ref(in);
    *out = in;
    return ER_STATUS_OK;
  }
  er_cv s;
  ER_CHECK(er__cev_str_of(r, in, &s));
  er_status st = new_str(r, ER_CV_STR_OF(s)->data, ER_CV_STR_OF(s)->len, out);
  er__cv_unref(r, s);
  if (!st) ER_CV_STR_OF(*out)->markup = true;
  return st;
}

static er_status f_escape(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(er__cev_check_args(r, a, "filter 'escape'", 0, NULL));
  if (in.type == ER_CV_STR && ER_CV_STR_OF(in)->markup) {
    er__cv_ref(in);
    *out = in;
    return ER_STATUS_OK;
  }
  er_cv s;
  ER_CHECK(er__cev_str_of(r, in, &s));
  er_cv_buf b = {0};
  er_status st = er__cev_html_escape(r, ER_CV_STR_OF(s), &b);
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'replace'", 3, kw));
  er_cv *o = er__cev_argp(a, 0, "old"), *n = er__cev_argp(a, 1, "new"), *c = er__cev_argp(a, 2, "count");
  if (!o || !n) return er__cev_rerr(r, "filter 'replace' needs the old and new strings");
  if (c && c->type != ER_CV_NONE && !is_int(*c)) return er__cev_rerr(r, "filter 'replace': count must be an integer");
  er_cv s, os, ns;
  ER_CHECK(er__cev_str_of(r, in, &s));
  er_status st = er__cev_str_of(r, *o, &os);
  if (st) {
    er__cv_unref(r, s);
    return st;
  }
  st = er__cev_str_of(r, *n, &ns);
  if (!st) {
    st = er__cev_str_replace(r, ER_CV_STR_OF(s), ER_CV_STR_OF(os), ER_CV_STR_OF(ns),
                     c && c->type != ER_CV_NONE ? int_of(*c) : -1, out);
    er__cv_unref(r, ns);
  }
  er__cv_unref(r, os);
  er__cv_unref(r, s);
  return st;
}

static er_status f_join(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"d", "attribute", NULL};
  ER_CHECK(er__cev_check_args(r, a, "filter 'join'", 2, kw));
  er_cv *d = er__cev_argp(a, 0, "d"), *attr = er__cev_argp(a, 1, "attribute");
  er_cv sep;
  if (d) ER_CHECK(er__cev_str_of(r, *d, &sep));
  else ER_CHECK(new_str(r, "", 0, &sep));
  er_cv items;
  er_status st = er__cev_to_items(r, in, &items);
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
  ER_CHECK(er__cev_check_args(r, a, last ? "filter 'last'" : "filter 'first'", 0, NULL));
  er_cv items;
  ER_CHECK(er__cev_to_items(r, in, &items));
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'list'", 0, NULL));
  er_cv items;
  ER_CHECK(er__cev_to_items(r, in, &items));
  er_status st = copy_list(r, items, false, out);
  er__cv_unref(r, items);
  return st;
}

static er_status f_reverse(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(er__cev_check_args(r, a, "filter 'reverse'", 0, NULL));
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
  ER_CHECK(er__cev_to_items(r, in, &items));
  er_status st = copy_list(r, items, true, out);
  er__cv_unref(r, items);
  return er__cev_as_generator(r, st, out);
}

static er_status f_items_eager(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(er__cev_check_args(r, a, "filter 'items'", 0, NULL));
  if (in.type == ER_CV_UNDEFINED) return er__cv_list_new(r, 0, out);
  if (in.type != ER_CV_DICT) return er__cev_rerr(r, "filter 'items': can only get item pairs from a mapping, not '%s'", tname(in));
  cargs none = {0};
  return er__cev_dict_method(r, in, "items", &none, out);
}

static er_status f_dictsort(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"case_sensitive", "by", "reverse", NULL};
  ER_CHECK(er__cev_check_args(r, a, "filter 'dictsort'", 3, kw));
  if (in.type != ER_CV_DICT) return er__cev_rerr(r, "filter 'dictsort' needs a mapping, not '%s'", tname(in));
  bool cs = arg_bool(a, 0, "case_sensitive", false), rev = arg_bool(a, 2, "reverse", false);
  er_cv *by = er__cev_argp(a, 1, "by");
  bool by_value = false;
  if (by) {
    ER_CHECK(need_str(r, *by, "dictsort 'by'"));
    if (!strcmp(ER_CV_STR_OF(*by)->data, "value")) by_value = true;
    else if (strcmp(ER_CV_STR_OF(*by)->data, "key")) return er__cev_rerr(r, "You can only sort by either \"key\" or \"value\"");
  }
  cargs none = {0};
  er_cv pairs, keyed;
  ER_CHECK(er__cev_dict_method(r, in, "items", &none, &pairs));
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'sort'", 3, kw));
  er_cv items;
  ER_CHECK(er__cev_to_items(r, in, &items));
  er_cv_list *l = ER_CV_LIST_OF(items);
  size_t *order;
  er_status st = sorted_indices(r, l, er__cev_argp(a, 2, "attribute"), arg_bool(a, 1, "case_sensitive", false),
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'unique'", 2, kw));
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  er_cv *attr = er__cev_argp(a, 1, "attribute");
  er_cv items, seen;
  ER_CHECK(er__cev_to_items(r, in, &items));
  er_status st = er__cv_list_new(r, 0, &seen);
  if (!st) st = er__cv_list_new(r, 0, out);
  er_cv_list *l = ER_CV_LIST_OF(items);
  for (size_t i = 0; !st && i < l->n; i++) {
    er_cv k;
    st = sort_key(r, l->items[i], attr, cs, &k);
    bool dup = false;
    if (!st) st = er__cev_contains(r, seen, k, &dup);
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
  ER_CHECK(er__cev_check_args(r, a, max ? "filter 'max'" : "filter 'min'", 2, kw));
  er_cv items;
  ER_CHECK(er__cev_to_items(r, in, &items));
  er_cv_list *l = ER_CV_LIST_OF(items);
  size_t *order;
  er_status st = sorted_indices(r, l, er__cev_argp(a, 1, "attribute"), arg_bool(a, 0, "case_sensitive", false), false, &order);
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
          st = sort_key(r, l->items[order[i]], er__cev_argp(a, 1, "attribute"), arg_bool(a, 0, "case_sensitive", false), &k1);
          if (!st) {
            st = sort_key(r, l->items[pick], er__cev_argp(a, 1, "attribute"), arg_bool(a, 0, "case_sensitive", false), &k2);
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'sum'", 2, kw));
  er_cv *attr = er__cev_argp(a, 0, "attribute"), *start = er__cev_argp(a, 1, "start");
  er_cv acc = start ? *start : er__cv_int(0);
  er__cv_ref(acc);
  er_cv items;
  er_status st = er__cev_to_items(r, in, &items);
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
    st = er__cev_binop(r, ER_OP_ADD, acc, v, &next_acc);
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
  er__cev_strip_range(s, n, NULL, 0, true, true, &b, &e);
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
  er__cev_strip_range(s, n, NULL, 0, true, true, &b, &e);
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'int'", 2, kw));
  er_cv *d = er__cev_argp(a, 0, "default");
  er_cv *base = er__cev_argp(a, 1, "base");
  if (base && (!is_int(*base) || int_of(*base) != 10)) return er__cev_rerr(r, "filter 'int': only base 10 is supported");
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'float'", 1, kw));
  er_cv *d = er__cev_argp(a, 0, "default");
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'abs'", 0, NULL));
  if (in.type == ER_CV_FLOAT) *out = er__cv_float(fabs(in.f));
  else if (is_int(in)) {
    if (int_of(in) == INT64_MIN) return er__cev_rerr(r, "integer overflow in abs (beyond 64 bits)");
    *out = er__cv_int(int_of(in) < 0 ? -int_of(in) : int_of(in));
  } else {
    return er__cev_rerr(r, "bad operand type for abs(): '%s'", tname(in));
  }
  return ER_STATUS_OK;
}

static er_status f_round(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"precision", "method", NULL};
  ER_CHECK(er__cev_check_args(r, a, "filter 'round'", 2, kw));
  er_cv *p = er__cev_argp(a, 0, "precision"), *m = er__cev_argp(a, 1, "method");
  int64_t prec = p ? (is_int(*p) ? int_of(*p) : -999) : 0;
  if (prec < 0 || prec > 30) return er__cev_rerr(r, "filter 'round': precision must be an integer from 0 to 30");
  const char *method = "common";
  if (m) {
    ER_CHECK(need_str(r, *m, "round method"));
    method = ER_CV_STR_OF(*m)->data;
  }
  if (!is_num(in)) return er__cev_rerr(r, "filter 'round' needs a number, not '%s'", tname(in));
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
    return er__cev_rerr(r, "filter 'round': method must be 'common', 'ceil' or 'floor'");
  double scale = pow(10.0, (double)prec), v = float_of(in) * scale;
  *out = er__cv_float((method[0] == 'c' ? ceil(v) : floor(v)) / scale);
  return ER_STATUS_OK;
}

static er_status f_wordcount(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  ER_CHECK(er__cev_check_args(r, a, "filter 'wordcount'", 0, NULL));
  er_cv s;
  ER_CHECK(er__cev_str_of(r, in, &s));
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'attr'", 1, NULL));
  er_cv *name = er__cev_argp(a, 0, NULL);
  if (!name) return er__cev_rerr(r, "filter 'attr' needs an attribute name");
  ER_CHECK(need_str(r, *name, "attribute name"));
  if (in.type == ER_CV_DICT) {
    /* Python getattr on a dict finds methods only, never keys. */
    if (er__cev_has_method(in, ER_CV_STR_OF(*name)->data)) return er__cev_make_method(r, in, ER_CV_STR_OF(*name)->data, out);
    *out = er__cv_undef(ER_CV_STR_OF(*name)->data);
    return ER_STATUS_OK;
  }
  return er__cev_get_attr(r, in, ER_CV_STR_OF(*name)->data, out);
}

static er_status f_indent(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  static const char *const kw[] = {"width", "first", "blank", NULL};
  ER_CHECK(er__cev_check_args(r, a, "filter 'indent'", 3, kw));
  er_cv *w = er__cev_argp(a, 0, "width");
  bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  /* jinja2 appends "\n" to the value itself (no str()), which only
   * strings accept. */
  if (in.type == ER_CV_UNDEFINED) return undef_err(r, in);
  if (in.type != ER_CV_STR) return er__cev_rerr(r, "unsupported operand type(s) for +=: '%s' and 'str'", tname(in));
  er_cv_buf ind = {0}, b = {0};
  er_status st = ER_STATUS_OK;
  if (w && w->type == ER_CV_STR) st = er__cv_buf_put(r, &ind, ER_CV_STR_OF(*w)->data, ER_CV_STR_OF(*w)->len);
  else if (w && !is_int(*w)) st = er__cev_rerr(r, "filter 'indent': width must be an integer or a string");
  else
    for (int64_t k = 0; k < (w ? int_of(*w) : 4) && !st && k < 4096; k++) st = er__cv_buf_putc(r, &ind, ' ');
  er_cv s = er__cv_none();
  if (!st) st = er__cev_str_of(r, in, &s);
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
      if (!at_end && !er__cev_line_break(str->data, str->len, i, &bl)) {
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
  ER_CHECK(er__cev_check_args(r, a, "filter 'tojson'", 4, kw));
  er_cv_json_opts o = {0};
  o.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
  o.sort_keys = arg_bool(a, 3, "sort_keys", false);
  er_cv *ind = er__cev_argp(a, 1, "indent"), *sep = er__cev_argp(a, 2, "separators");
  char spaces[65];
  if (ind && ind->type == ER_CV_STR) {
    o.indent = ER_CV_STR_OF(*ind)->data;
    o.indent_len = ER_CV_STR_OF(*ind)->len;
  } else if (ind && is_int(*ind)) {
    int64_t n = int_of(*ind);
    if (n > 64) return er__cev_rerr(r, "filter 'tojson': indent %lld is larger than 64", (long long)n);
    if (n < 0) n = 0;
    memset(spaces, ' ', (size_t)n);
    spaces[n] = '\0';
    o.indent = spaces;
    o.indent_len = (size_t)n;
  } else if (ind && ind->type != ER_CV_NONE) {
    return er__cev_rerr(r, "filter 'tojson': indent must be an integer, a string or none");
  }
  o.item_sep = o.indent ? "," : ", ";
  o.key_sep = ": ";
  if (sep && sep->type != ER_CV_NONE) {
    if (sep->type != ER_CV_LIST || ER_CV_LIST_OF(*sep)->n != 2 || ER_CV_LIST_OF(*sep)->items[0].type != ER_CV_STR ||
        ER_CV_LIST_OF(*sep)->items[1].type != ER_CV_STR)
      return er__cev_rerr(r, "filter 'tojson': separators must be two strings");
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
  er_cv *attr_name = attr ? er__cev_argp(a, 0, NULL) : NULL;
  if (attr && !attr_name) return er__cev_rerr(r, "selectattr/rejectattr need an attribute name");
  er_cv *test = er__cev_argp(a, first_test, NULL);
  if (test) ER_CHECK(need_str(r, *test, "test name"));
  if (test && !er__chat_known_test(ER_CV_STR_OF(*test)->data))
    return er__cev_rerr(r, "unknown test '%s'", ER_CV_STR_OF(*test)->data);
  cargs targs = {0};
  if (test) {
    targs.v = a->v + first_test + 1;
    targs.npos = a->npos - first_test - 1;
    targs.nkw = a->nkw;
    targs.kw = a->kw;
  } else if (a->nkw) {
    return er__cev_rerr(r, "select filters take no keyword arguments without a test");
  }
  er_cv items;
  ER_CHECK(er__cev_to_items(r, in, &items));
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
    if (test) st = er__cev_apply_test(r, ER_CV_STR_OF(*test)->data, v, &targs, &pass);
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
  return er__cev_as_generator(r, select_eager(r, in, a, attr, keep, out), out);
}
static er_status f_select(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return select_items(r, in, a, false, true, out); }
static er_status f_reject(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return select_items(r, in, a, false, false, out); }
static er_status f_selectattr(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return select_items(r, in, a, true, true, out); }
static er_status f_rejectattr(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return select_items(r, in, a, true, false, out); }

static er_status f_map_eager(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  if (!er__cv_truthy(in)) return er__cv_list_new(r, 0, out);
  er_cv *attr = er__cev_argp(a, SIZE_MAX, "attribute");
  er_cv *dflt = er__cev_argp(a, SIZE_MAX, "default");
  const char *filter = NULL;
  cargs fargs = {0};
  if (!attr) {
    er_cv *f = er__cev_argp(a, 0, NULL);
    if (!f) return er__cev_rerr(r, "filter 'map' needs a filter name or attribute=");
    ER_CHECK(need_str(r, *f, "filter name"));
    filter = ER_CV_STR_OF(*f)->data;
    if (!er__chat_known_filter(filter)) return er__cev_rerr(r, "unknown filter '%s'", filter);
    fargs.v = a->v + 1;
    fargs.npos = a->npos - 1;
    fargs.nkw = a->nkw;
    fargs.kw = a->kw;
  } else if (a->npos) {
    return er__cev_rerr(r, "filter 'map' with attribute= takes no positional arguments");
  }
  er_cv items;
  ER_CHECK(er__cev_to_items(r, in, &items));
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
      st = er__cev_apply_filter(r, filter, l->items[i], &fargs, &v);
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

/* jinja2's map, items and unique are generators (see er__cev_as_generator). */
static er_status f_map(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) { return er__cev_as_generator(r, f_map_eager(r, in, a, out), out); }
static er_status f_items(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  return er__cev_as_generator(r, f_items_eager(r, in, a, out), out);
}
static er_status f_unique(er_chat_rt *r, er_cv in, cargs *a, er_cv *out) {
  return er__cev_as_generator(r, f_unique_eager(r, in, a, out), out);
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

NOINLINE er_status er__cev_apply_filter(er_chat_rt *r, const char *name, er_cv in, cargs *a, er_cv *out) {
  *out = er__cv_undef(NULL);
  ER_CHECK(er__cv_step(r, 1));
  for (size_t i = 0; i < ER_ARRAY_LEN(filters); i++) {
    if (strcmp(filters[i].name, name)) continue;
    if (!filters[i].fn) return er__cev_rerr(r, "filter '%s' is not supported by edgerun's chat templates", name);
    er_status st = filters[i].fn(r, in, a, out);
    if (st) *out = er__cv_undef(NULL);
    return st;
  }
  return er__cev_rerr(r, "unknown filter '%s'", name);
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

NOINLINE er_status er__cev_apply_test(er_chat_rt *r, const char *name, er_cv v, cargs *a, bool *out) {
  ER_CHECK(er__cv_step(r, 1));
  er_cv *x = er__cev_argp(a, 0, NULL);
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
    ER_CHECK(er__cev_str_of(r, v, &s));
    *out = er__cev_all_cp(ER_CV_STR_OF(s), name[0] == 'l' ? 5 : 4);
    er__cv_unref(r, s);
  } else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
    er_cv m;
    er_cv div = name[0] == 'd' ? (x ? *x : er__cv_none()) : er__cv_int(2);
    if (name[0] == 'd' && !x) return er__cev_rerr(r, "test 'divisibleby' needs a number");
    ER_CHECK(er__cev_binop(r, ER_OP_MOD, v, div, &m));
    bool zero = m.type == ER_CV_FLOAT ? m.f == 0 : int_of(m) == 0;
    *out = name[0] == 'o' ? !zero && (m.type == ER_CV_FLOAT ? m.f == 1 : int_of(m) == 1) : zero;
  } else if (!strcmp(name, "filter") || !strcmp(name, "test")) {
    ER_CHECK(need_str(r, v, "the name tested"));
    *out = name[0] == 'f' ? er__chat_known_filter(ER_CV_STR_OF(v)->data) : er__chat_known_test(ER_CV_STR_OF(v)->data);
  } else {
    if (!x) return er__cev_rerr(r, "test '%s' needs an argument", name);
    if (!strcmp(name, "eq") || !strcmp(name, "equalto")) return er__cv_equal(r, v, *x, out);
    if (!strcmp(name, "ne")) return er__cev_compare_op(r, ER_OP_NE, v, *x, out);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan")) return er__cev_compare_op(r, ER_OP_LT, v, *x, out);
    if (!strcmp(name, "le")) return er__cev_compare_op(r, ER_OP_LTEQ, v, *x, out);
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan")) return er__cev_compare_op(r, ER_OP_GT, v, *x, out);
    if (!strcmp(name, "ge")) return er__cev_compare_op(r, ER_OP_GTEQ, v, *x, out);
    if (!strcmp(name, "in")) return er__cev_contains(r, *x, v, out);
    if (!strcmp(name, "sameas")) {
      if (er__cv_is_obj(v) || er__cv_is_obj(*x)) *out = er__cv_is_obj(v) && er__cv_is_obj(*x) && v.o == x->o;
      else if (v.type != x->type) *out = false;
      else return er__cv_equal(r, v, *x, out);
      return ER_STATUS_OK;
    }
    return er__cev_rerr(r, "unknown test '%s'", name);
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Global functions and macros                                               */
/* ======================================================================== */

static er_status fill_mapping(er_chat_rt *r, er_cv target, cargs *a, const char *what, bool check_names) {
  if (a->npos > 1) return er__cev_rerr(r, "%s() takes at most 1 positional argument", what);
  er_cv src = a->npos ? a->v[0] : er__cv_none();
  if (a->npos) {
    if (src.type != ER_CV_DICT && src.type != ER_CV_NAMESPACE)
      return er__cev_rerr(r, "%s(): the positional argument must be a mapping, not '%s'", what, tname(src));
    er_cv_dict *d = ER_CV_DICT_OF(src);
    for (size_t i = 0; i < d->n; i++) {
      if (check_names && d->keys[i].type == ER_CV_STR && ER_CV_STR_OF(d->keys[i])->data[0] == '_')
        return er__cev_rerr(r, "chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'",
                    ER_CV_STR_OF(d->keys[i])->data);
      er__cv_ref(d->keys[i]);
      er__cv_ref(d->vals[i]);
      ER_CHECK(er__cv_dict_set(r, target, d->keys[i], d->vals[i]));
    }
  }
  for (size_t k = 0; k < a->nkw; k++) {
    if (check_names && a->kw[k][0] == '_')
      return er__cev_rerr(r, "chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'",
                  a->kw[k]);
    er_cv key;
    ER_CHECK(new_cstr(r, a->kw[k], &key));
    er__cv_ref(a->v[a->npos + k]);
    ER_CHECK(er__cv_dict_set(r, target, key, a->v[a->npos + k]));
  }
  return ER_STATUS_OK;
}

NOINLINE er_status er__cev_call_builtin(er_chat_rt *r, int id, cargs *a, er_cv *out) {
  *out = er__cv_undef(NULL);
  switch (id) {
  case B_RANGE: {
    if (a->nkw) return er__cev_rerr(r, "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3) return er__cev_rerr(r, "range() takes 1 to 3 arguments, %zu given", a->npos);
    for (size_t i = 0; i < a->npos; i++)
      if (!is_int(a->v[i])) return er__cev_rerr(r, "range(): '%s' object cannot be interpreted as an integer", tname(a->v[i]));
    int64_t start = a->npos > 1 ? int_of(a->v[0]) : 0, stop = int_of(a->v[a->npos > 1 ? 1 : 0]);
    int64_t step = a->npos > 2 ? int_of(a->v[2]) : 1;
    if (!step) return er__cev_rerr(r, "range() arg 3 must not be zero");
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
    er_cv *msg = er__cev_argp(a, 0, "message");
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
      return er__cev_rerr(r, "strftime_now() takes one format string");
    er_cv_str *f = ER_CV_STR_OF(a->v[0]);
    if (f->len > 256) return er__cev_rerr(r, "strftime_now(): a format of %zu bytes is longer than 256", f->len);
    struct tm tm;
    time_t now = r->t->has_now ? (time_t)r->t->now : time(NULL);
    bool ok = r->t->has_now ? gmtime_r(&now, &tm) != NULL : localtime_r(&now, &tm) != NULL;
    if (!ok) return er__cev_rerr(r, "strftime_now(): the clock is out of range");
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

NOINLINE er_status er__cev_call_macro(er_chat_rt *r, const er_chat_node *m, cargs *a, er_cv *out) {
  *out = er__cv_undef(NULL);
  if (r->macro_depth >= ER_CHAT_MAX_DEPTH)
    return er__error(ER_STATUS_LIMIT, "chat template line %u: macro calls nested deeper than ER_CHAT_MAX_DEPTH (%d) "
                     "(macro '%s' recurses too deeply)", r->line, ER_CHAT_MAX_DEPTH, m->name);
  if (a->npos > m->n_kw)
    return er__cev_rerr(r, "macro '%s' takes not more than %u argument(s), %zu given", m->name, (unsigned)m->n_kw, a->npos);
  for (size_t k = 0; k < a->nkw; k++) {
    size_t p = 0;
    while (p < m->n_kw && strcmp(m->kw[p], a->kw[k])) p++;
    if (p == m->n_kw) return er__cev_rerr(r, "macro '%s' takes no keyword argument '%s'", m->name, a->kw[k]);
    if (p < a->npos) return er__cev_rerr(r, "macro '%s' got multiple values for argument '%s'", m->name, a->kw[k]);
  }
  er_chat_scope sc = {.parent = r->root};
  er_chat_scope *saved_scope = r->scope;
  er_cv_buf *saved_out = r->out;
  er_cv_buf buf = {0};
  r->scope = &sc;
  er_status st = ER_STATUS_OK;
  for (uint16_t p = 0; p < m->n_kw && !st; p++) {
    er_cv *given = er__cev_argp(a, p, m->kw[p]);
    er_cv v;
    if (given) {
      v = *given;
      er__cv_ref(v);
    } else if (m->kids2[p]) {
      st = er__cev_eval(r, m->kids2[p], &v);
      if (st) break;
    } else {
      v = er__cv_undef(m->kw[p]);
    }
    st = er__cev_scope_set(r, &sc, m->kw[p], v);
  }
  if (!st) {
    r->out = &buf;
    r->macro_depth++;
    st = er__cev_exec_block(r, m->kids, m->n);
    r->macro_depth--;
    r->loop_ctl = 0;
  }
  r->out = saved_out;
  r->scope = saved_scope;
  er__cev_scope_release(r, &sc);
  if (st) {
    er__cv_buf_free(r, &buf);
    return st;
  }
  return er__cv_str_from_buf(r, &buf, out);
}
