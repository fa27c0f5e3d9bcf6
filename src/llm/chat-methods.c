/* chat-methods.c - the chat-template evaluator's text helpers (search,
 * case, whitespace) and the methods of str, dict, list and loop that
 * templates call (see chat-eval.c). */
#include "llm/chat-eval-impl.h"

/* Text helpers: search, case, whitespace                                    */
/* ======================================================================== */

size_t er__cev_find_bytes(const char *h, size_t hn, const char *nd, size_t nn, size_t from) {
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
void er__cev_strip_range(const char *s, size_t n, const char *chars, size_t cn, bool left, bool right, size_t *b,
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

NOINLINE er_status er__cev_case_map(er_chat_rt *r, er_cv in, int mode, er_cv *out) {
  er_cv s;
  ER_CHECK(er__cev_str_of(r, in, &s));
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

bool er__cev_all_cp(const er_cv_str *s, int kind) {
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
    if (!st && !p->len) st = er__cev_rerr(r, "empty separator");
    if (!st && !from_right) {
      size_t at = 0;
      int64_t splits = 0;
      for (;;) {
        size_t k = (maxsplit < 0 || splits < maxsplit) ? er__cev_find_bytes(s->data, s->len, p->data, p->len, at) : SIZE_MAX;
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
      er__cev_strip_range(s->data, s->len, NULL, 0, false, true, &b0, &e0);
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
        er__cev_strip_range(s->data, start, NULL, 0, false, true, &b, &e);
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
      st = er__cev_rerr(r, "str.format: single '}' encountered in format string");
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
      st = er__cev_rerr(r, "str.format: single '{' encountered in format string");
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
          st = er__cev_rerr(r, "str.format: format specifications ('{%.*s}') are not supported", (int)flen, field);
        }
        break;
      }
    }
    if (st) break;
    er_cv *v = NULL;
    if (name_len == 0) {
      v = er__cev_argp(a, auto_index++, NULL);
    } else if (field[0] >= '0' && field[0] <= '9') {
      size_t idx = 0;
      for (size_t k = 0; k < name_len; k++) idx = idx * 10 + (size_t)(field[k] - '0');
      v = er__cev_argp(a, idx, NULL);
    } else {
      for (size_t k = 0; k < a->nkw; k++)
        if (strlen(a->kw[k]) == name_len && memcmp(a->kw[k], field, name_len) == 0) v = &a->v[a->npos + k];
    }
    if (!v) {
      st = er__cev_rerr(r, "str.format: no argument for field '{%.*s}'", (int)flen, field);
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

er_status er__cev_str_replace(er_chat_rt *r, const er_cv_str *s, const er_cv_str *old, const er_cv_str *rep,
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
      size_t k = (count < 0 || done < count) ? er__cev_find_bytes(s->data, s->len, old->data, old->len, at) : SIZE_MAX;
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
  return er__cev_rerr(r, "access to attribute '%s' of '%s' object is unsafe (chat templates cannot modify values)", m,
              tname(self));
}

er_status er__cev_do_strip(er_chat_rt *r, er_cv self, er_cv *chars, bool left, bool right, er_cv *out) {
  er_cv_str *s = ER_CV_STR_OF(self);
  const char *cs = NULL;
  size_t cn = 0;
  if (chars && chars->type != ER_CV_NONE) {
    ER_CHECK(need_str(r, *chars, "strip characters"));
    cs = ER_CV_STR_OF(*chars)->data;
    cn = ER_CV_STR_OF(*chars)->len;
  }
  size_t b, e;
  er__cev_strip_range(s->data, s->len, cs, cn, left, right, &b, &e);
  return new_str(r, s->data + b, e - b, out);
}

/* Python's str.splitlines boundaries. */
size_t er__cev_line_break(const char *s, size_t n, size_t i, size_t *len) {
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
    if (er__cev_line_break(s->data, s->len, i, &bl)) {
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

/* str.join(iterable). */
static er_status str_join(er_chat_rt *r, er_cv_str *s, const char *m, cargs *a, er_cv *out) {
  static const char *const no_kw[] = {NULL};
  ER_CHECK(er__cev_check_args(r, a, m, 1, no_kw));
  er_cv *it = er__cev_argp(a, 0, NULL);
  if (!it) return er__cev_rerr(r, "join() takes exactly one argument");
  er_cv items;
  ER_CHECK(er__cev_to_items(r, *it, &items));
  er_cv_list *l = ER_CV_LIST_OF(items);
  er_cv_buf b = {0};
  er_status st = ER_STATUS_OK;
  for (size_t k = 0; k < l->n && !st; k++) {
    if (l->items[k].type != ER_CV_STR) {
      st = er__cev_rerr(r, "sequence item %zu: expected str instance, %s found", k, tname(l->items[k]));
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

/* str.center, ljust, rjust and zfill. */
static er_status str_pad(er_chat_rt *r, er_cv_str *s, const char *m, cargs *a, er_cv *out) {
  static const char *const no_kw[] = {NULL};
  ER_CHECK(er__cev_check_args(r, a, m, m[0] == 'z' ? 1 : 2, no_kw));
  er_cv *w = er__cev_argp(a, 0, NULL), *fill = er__cev_argp(a, 1, NULL);
  if (!w || !is_int(*w)) return er__cev_rerr(r, "%s() needs an integer width", m);
  const char *fc = " ";
  size_t fl = 1;
  if (fill) {
    if (fill->type != ER_CV_STR || ER_CV_STR_OF(*fill)->nchars != 1)
      return er__cev_rerr(r, "%s(): the fill character must be exactly one character long", m);
    fc = ER_CV_STR_OF(*fill)->data;
    fl = ER_CV_STR_OF(*fill)->len;
  }
  int64_t width = int_of(*w), n = (int64_t)s->nchars;
  if (width > 1 << 20) return er__cev_rerr(r, "%s(): width %lld is larger than %d", m, (long long)width, 1 << 20);
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

/* str.partition and rpartition. */
static er_status str_partition(er_chat_rt *r, er_cv_str *s, const char *m, cargs *a, er_cv *out) {
  static const char *const no_kw[] = {NULL};
  ER_CHECK(er__cev_check_args(r, a, m, 1, no_kw));
  er_cv *x = er__cev_argp(a, 0, NULL);
  if (!x) return er__cev_rerr(r, "%s() takes exactly one argument", m);
  ER_CHECK(need_str(r, *x, m));
  er_cv_str *sep = ER_CV_STR_OF(*x);
  if (!sep->len) return er__cev_rerr(r, "empty separator");
  size_t k = m[0] == 'r' ? rfind_bytes(s->data, s->len, sep->data, sep->len)
                         : er__cev_find_bytes(s->data, s->len, sep->data, sep->len, 0);
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

static NOINLINE er_status str_method(er_chat_rt *r, er_cv self, const char *m, cargs *a, er_cv *out) {
  er_cv_str *s = ER_CV_STR_OF(self);
  static const char *const no_kw[] = {NULL};
  if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") || !strcmp(m, "capitalize") ||
      !strcmp(m, "swapcase") || !strcmp(m, "casefold")) {
    ER_CHECK(er__cev_check_args(r, a, m, 0, no_kw));
    int mode = m[0] == 'u' ? CASE_UPPER : m[0] == 't' ? CASE_TITLE : m[0] == 's' ? CASE_SWAP
               : m[1] == 'a' && m[2] == 'p' ? CASE_CAPITALIZE : CASE_LOWER;
    return er__cev_case_map(r, self, mode, out);
  }
  if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
    ER_CHECK(er__cev_check_args(r, a, m, 1, no_kw));
    return er__cev_do_strip(r, self, er__cev_argp(a, 0, NULL), m[0] != 'r', m[0] != 'l', out);
  }
  if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
    static const char *const kw[] = {"sep", "maxsplit", NULL};
    ER_CHECK(er__cev_check_args(r, a, m, 2, kw));
    er_cv *ms = er__cev_argp(a, 1, "maxsplit");
    if (ms && !is_int(*ms)) return er__cev_rerr(r, "%s: maxsplit must be an integer", m);
    return str_split(r, s, er__cev_argp(a, 0, "sep"), ms ? int_of(*ms) : -1, m[0] == 'r', out);
  }
  if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
    ER_CHECK(er__cev_check_args(r, a, m, 1, no_kw));
    er_cv *p = er__cev_argp(a, 0, NULL);
    if (!p) return er__cev_rerr(r, "%s() takes at least 1 argument", m);
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
    ER_CHECK(er__cev_check_args(r, a, m, 3, kw));
    er_cv *o = er__cev_argp(a, 0, NULL), *n = er__cev_argp(a, 1, NULL), *c = er__cev_argp(a, 2, "count");
    if (!o || !n) return er__cev_rerr(r, "replace() takes at least 2 arguments");
    ER_CHECK(need_str(r, *o, "replace() argument 1"));
    ER_CHECK(need_str(r, *n, "replace() argument 2"));
    if (c && !is_int(*c)) return er__cev_rerr(r, "replace(): count must be an integer");
    return er__cev_str_replace(r, s, ER_CV_STR_OF(*o), ER_CV_STR_OF(*n), c ? int_of(*c) : -1, out);
  }
  if (!strcmp(m, "format")) return str_format(r, s, a, out);
  if (!strcmp(m, "join")) return str_join(r, s, m, a, out);
  if (!strcmp(m, "count") || !strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") ||
      !strcmp(m, "rindex")) {
    ER_CHECK(er__cev_check_args(r, a, m, 1, no_kw));
    er_cv *x = er__cev_argp(a, 0, NULL);
    if (!x) return er__cev_rerr(r, "%s() takes at least 1 argument", m);
    ER_CHECK(need_str(r, *x, m));
    er_cv_str *sub = ER_CV_STR_OF(*x);
    ER_CHECK(er__cv_step(r, s->len / ER_CHAT_STEP_BYTES));
    if (!strcmp(m, "count")) {
      int64_t c = 0;
      if (!sub->len) c = (int64_t)s->nchars + 1;
      else
        for (size_t at = 0; (at = er__cev_find_bytes(s->data, s->len, sub->data, sub->len, at)) != SIZE_MAX; at += sub->len)
          c++;
      *out = er__cv_int(c);
      return ER_STATUS_OK;
    }
    size_t k = m[0] == 'r' ? rfind_bytes(s->data, s->len, sub->data, sub->len)
                           : er__cev_find_bytes(s->data, s->len, sub->data, sub->len, 0);
    if (k == SIZE_MAX && (!strcmp(m, "index") || !strcmp(m, "rindex"))) return er__cev_rerr(r, "substring not found");
    *out = er__cv_int(k == SIZE_MAX ? -1 : (int64_t)er__utf8_count(s->data, k));
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "isdigit") || !strcmp(m, "isnumeric") || !strcmp(m, "isdecimal") || !strcmp(m, "isalpha") ||
      !strcmp(m, "isalnum") || !strcmp(m, "isspace") || !strcmp(m, "isupper") || !strcmp(m, "islower")) {
    ER_CHECK(er__cev_check_args(r, a, m, 0, no_kw));
    int kind = !strcmp(m, "isalpha") ? 1 : !strcmp(m, "isalnum") ? 2 : !strcmp(m, "isspace") ? 3
               : !strcmp(m, "isupper") ? 4 : !strcmp(m, "islower") ? 5 : 0;
    *out = er__cv_bool(er__cev_all_cp(s, kind));
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "splitlines")) {
    static const char *const kw[] = {"keepends", NULL};
    ER_CHECK(er__cev_check_args(r, a, m, 1, kw));
    return split_lines(r, s, arg_bool(a, 0, "keepends", false), out);
  }
  if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
    ER_CHECK(er__cev_check_args(r, a, m, 1, no_kw));
    er_cv *x = er__cev_argp(a, 0, NULL);
    if (!x) return er__cev_rerr(r, "%s() takes exactly one argument", m);
    ER_CHECK(need_str(r, *x, m));
    er_cv_str *p = ER_CV_STR_OF(*x);
    bool pre = m[6] == 'p';
    if (p->len <= s->len && memcmp(pre ? s->data : s->data + s->len - p->len, p->data, p->len) == 0)
      return new_str(r, pre ? s->data + p->len : s->data, s->len - p->len, out);
    er__cv_ref(self);
    *out = self;
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust") || !strcmp(m, "zfill"))
    return str_pad(r, s, m, a, out);
  if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) return str_partition(r, s, m, a, out);
  if (!strcmp(m, "isascii")) {
    ER_CHECK(er__cev_check_args(r, a, m, 0, no_kw));
    *out = er__cv_bool(s->nchars == s->len);
    return ER_STATUS_OK;
  }
  return er__cev_rerr(r, "str.%s() is not supported by edgerun's chat templates", m);
}

NOINLINE er_status er__cev_dict_method(er_chat_rt *r, er_cv self, const char *m, cargs *a, er_cv *out) {
  er_cv_dict *d = ER_CV_DICT_OF(self);
  static const char *const no_kw[] = {NULL};
  if (!strcmp(m, "get")) {
    ER_CHECK(er__cev_check_args(r, a, m, 2, no_kw));
    er_cv *k = er__cev_argp(a, 0, NULL), *dflt = er__cev_argp(a, 1, NULL);
    if (!k) return er__cev_rerr(r, "get() takes at least 1 argument");
    if (!er__cev_is_hashable(*k)) return er__cev_rerr(r, "unhashable type: '%s'", tname(*k));
    er_cv *v = er__cv_dict_get(r, self, *k);
    *out = v ? *v : dflt ? *dflt : er__cv_none();
    er__cv_ref(*out);
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
    ER_CHECK(er__cev_check_args(r, a, m, 0, no_kw));
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
    ER_CHECK(er__cev_check_args(r, a, m, 1, no_kw));
    er_cv *x = er__cev_argp(a, 0, NULL);
    if (!x) return er__cev_rerr(r, "%s() takes exactly one argument", m);
    int64_t c = 0, at = -1;
    for (size_t i = 0; i < l->n; i++) {
      bool e;
      ER_CHECK(er__cv_equal(r, l->items[i], *x, &e));
      if (e) {
        c++;
        if (at < 0) at = (int64_t)i;
      }
    }
    if (m[0] == 'i' && at < 0) return er__cev_rerr(r, "list.index(x): x not in list");
    *out = er__cv_int(m[0] == 'c' ? c : at);
    return ER_STATUS_OK;
  }
  if (!strcmp(m, "copy") && !l->tuple) {
    ER_CHECK(er__cev_check_args(r, a, m, 0, no_kw));
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

NOINLINE er_status er__cev_call_method(er_chat_rt *r, er_cv self, const char *m, cargs *a, er_cv *out) {
  switch (self.type) {
  case ER_CV_STR: return str_method(r, self, m, a, out);
  case ER_CV_DICT: return er__cev_dict_method(r, self, m, a, out);
  case ER_CV_LIST: return list_method(r, self, m, a, out);
  case ER_CV_LOOP:
    if (!strcmp(m, "cycle")) {
      if (!a->npos) return er__cev_rerr(r, "loop.cycle() needs at least one argument");
      *out = a->v[((er_cv_loop *)self.o)->index0 % (int64_t)a->npos];
      er__cv_ref(*out);
      return ER_STATUS_OK;
    }
    return er__cev_rerr(r, "loop.%s() is not supported", m);
  default: return er__cev_rerr(r, "'%s' object has no method '%s'", tname(self), m);
  }
}

/* ======================================================================== */
