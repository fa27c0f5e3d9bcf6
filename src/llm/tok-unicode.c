/* tok-unicode.c - general-category lookup and UTF-8 for the tokenizers. */
#include "llm/unicode.h"

er_ucd_cat er__ucd_category(uint32_t cp) {
  if (cp > 0x10FFFF) return ER_UCD_CN;
  /* The run holding cp is the last whose first code point is <= cp (the
   * first run starts at 0). Twelve probes over the 4,100 runs; callers
   * look each code point of a text up once. */
  size_t lo = 0, hi = er__ucd_gc_run_count;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if ((er__ucd_gc_runs[mid] >> 5) <= cp)
      lo = mid;
    else
      hi = mid;
  }
  return (er_ucd_cat)(er__ucd_gc_runs[lo] & 31u);
}

size_t er__utf8_decode(const uint8_t *s, size_t n, uint32_t *cp_out) {
  uint8_t b0 = s[0];
  if (b0 < 0x80) {
    *cp_out = b0;
    return 1;
  }
  size_t len;
  uint32_t cp, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1Fu, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0Fu, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07u, min = 0x10000;
  } else {
    return 0;  /* a continuation byte, C0/C1 (always overlong) or F5..FF */
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  *cp_out = cp;
  return len;
}

size_t er__utf8_encode(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

size_t er__utf8_check(const char *s, size_t n) {
  const uint8_t *u = (const uint8_t *)s;
  size_t i = 0;
  while (i < n) {
    if (u[i] < 0x80) {
      i++;
      continue;
    }
    uint32_t cp;
    size_t len = er__utf8_decode(u + i, n - i, &cp);
    if (len == 0) return i;
    i += len;
  }
  return n;
}

size_t er__utf8_maximal_subpart(const uint8_t *s, size_t n) {
  /* The second byte's allowed range depends on the first (Unicode Table
   * 3-7); later bytes are any continuation byte. */
  uint8_t b0 = s[0];
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF)
    len = 2;
  else if (b0 == 0xE0)
    len = 3, lo = 0xA0;
  else if (b0 == 0xED)
    len = 3, hi = 0x9F;
  else if (b0 >= 0xE1 && b0 <= 0xEF)
    len = 3;
  else if (b0 == 0xF0)
    len = 4, lo = 0x90;
  else if (b0 == 0xF4)
    len = 4, hi = 0x8F;
  else if (b0 >= 0xF1 && b0 <= 0xF3)
    len = 4;
  else
    return 1;
  size_t i = 1;
  for (; i < len && i < n; i++) {
    uint8_t b = s[i];
    if (i == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
  }
  return i;
}
