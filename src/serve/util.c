/* util.c - string builder, clocks and error-text sanitizing for the service. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

/* ========================================================================
 * String builder
 * ======================================================================== */

static bool grow(er__sb *sb, size_t need) {
  if (sb->oom) return false;
  if (sb->len + need + 1 <= sb->cap) return true;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + need + 1) {
    if (cap > SIZE_MAX / 2) {
      sb->oom = true;
      return false;
    }
    cap *= 2;
  }
  char *p = realloc(sb->p, cap);
  if (!p) {
    sb->oom = true;
    return false;
  }
  sb->p = p;
  sb->cap = cap;
  return true;
}

void er__sb_put(er__sb *sb, const void *data, size_t n) {
  if (!grow(sb, n)) return;
  memcpy(sb->p + sb->len, data, n);
  sb->len += n;
  sb->p[sb->len] = '\0';
}

void er__sb_puts(er__sb *sb, const char *s) { er__sb_put(sb, s, strlen(s)); }

void er__sb_printf(er__sb *sb, const char *fmt, ...) {
  va_list ap;
  char small[256];
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    er__sb_put(sb, small, (size_t)n);
    return;
  }
  if (!grow(sb, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(sb->p + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

void er__sb_json_str(er__sb *sb, const char *s) {
  er__sb_put(sb, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
    switch (*p) {
      case '"': er__sb_put(sb, "\\\"", 2); break;
      case '\\': er__sb_put(sb, "\\\\", 2); break;
      case '\n': er__sb_put(sb, "\\n", 2); break;
      case '\r': er__sb_put(sb, "\\r", 2); break;
      case '\t': er__sb_put(sb, "\\t", 2); break;
      default:
        if (*p < 0x20) er__sb_printf(sb, "\\u%04x", *p);
        else er__sb_put(sb, p, 1);
    }
  }
  er__sb_put(sb, "\"", 1);
}

void er__sb_free(er__sb *sb) {
  free(sb->p);
  memset(sb, 0, sizeof *sb);
}

/* ========================================================================
 * Clocks
 * ======================================================================== */

int64_t er__now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

double er__wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ========================================================================
 * Text that leaves the process
 * ======================================================================== */

/* A path component ends at white space, a quote or a separator that error
 * messages put after paths. */
static bool path_char(char c) {
  return c && c != ' ' && c != '\t' && c != '\n' && c != '\'' && c != '"' && c != ',' &&
         c != ';' && c != ')' && c != ']';
}

void er__sanitize(const char *text, char *out, size_t size) {
  size_t k = 0;
  if (!size) return;
  for (const char *p = text; *p && k + 1 < size;) {
    bool starts = *p == '/' && (p == text || p[-1] == ' ' || p[-1] == '\'' || p[-1] == '"' ||
                                p[-1] == '(' || p[-1] == '=' || p[-1] == ':');
    if (!starts) {
      out[k++] = *p++;
      continue;
    }
    const char *end = p;
    while (path_char(*end)) end++;
    const char *last = p;
    for (const char *q = p; q < end; q++)
      if (*q == '/' && q + 1 < end) last = q + 1;
    if (last == p) last = p + 1;      /* "/" alone or "/x" */
    for (const char *q = last; q < end && k + 1 < size; q++) out[k++] = *q;
    p = end;
  }
  out[k] = '\0';
}

bool er__valid_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > ER_SERVE_MAX_NAME || s[0] == '.') return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}
