/* tok-nfc.c - Unicode normalization form C (UAX #15) for tokenizer.json's
 * NFC normalizer: full canonical decomposition, canonical ordering of
 * combining marks, then canonical composition, with Hangul syllables by
 * the algorithm of the standard (3.12). Tables: unicode-nfc.c. */
#include <stdlib.h>
#include <string.h>

#include "llm/unicode.h"

extern const uint32_t er__nfc_ccc_runs[];
extern const size_t er__nfc_ccc_n;
extern const uint32_t er__nfc_dec_cp[];
extern const uint16_t er__nfc_dec_off[];
extern const uint32_t er__nfc_dec_pool[];
extern const size_t er__nfc_dec_n;
extern const uint64_t er__nfc_comp_key[];
extern const uint32_t er__nfc_comp_cp[];
extern const size_t er__nfc_comp_n;

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, L_N = 19, V_N = 21, T_N = 28,
       N_N = V_N * T_N, S_N = L_N * N_N };

static int ccc(uint32_t cp) {
  size_t lo = 0, hi = er__nfc_ccc_n;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if ((er__nfc_ccc_runs[mid] >> 8) <= cp) lo = mid;
    else hi = mid;
  }
  return (int)(er__nfc_ccc_runs[lo] & 0xff);
}

/* The full decomposition of cp into out (at most 4 code points + Hangul's
 * 3); returns the count. */
static size_t decompose(uint32_t cp, uint32_t out[8]) {
  if (cp >= S_BASE && cp < S_BASE + S_N) {
    uint32_t s = cp - S_BASE, t = s % T_N;
    out[0] = L_BASE + s / N_N;
    out[1] = V_BASE + (s % N_N) / T_N;
    if (t) out[2] = T_BASE + t;
    return t ? 3 : 2;
  }
  size_t lo = 0, hi = er__nfc_dec_n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (er__nfc_dec_cp[mid] < cp) lo = mid + 1;
    else hi = mid;
  }
  if (lo == er__nfc_dec_n || er__nfc_dec_cp[lo] != cp) {
    out[0] = cp;
    return 1;
  }
  size_t n = (size_t)(er__nfc_dec_off[lo + 1] - er__nfc_dec_off[lo]);
  if (n > 8) n = 8;
  memcpy(out, er__nfc_dec_pool + er__nfc_dec_off[lo], n * sizeof *out);
  return n;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= L_BASE && a < L_BASE + L_N && b >= V_BASE && b < V_BASE + V_N)
    return S_BASE + ((a - L_BASE) * V_N + (b - V_BASE)) * T_N;
  if (a >= S_BASE && a < S_BASE + S_N && (a - S_BASE) % T_N == 0 && b > T_BASE && b < T_BASE + T_N)
    return a + (b - T_BASE);
  uint64_t key = ((uint64_t)a << 21) | b;
  size_t lo = 0, hi = er__nfc_comp_n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (er__nfc_comp_key[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo < er__nfc_comp_n && er__nfc_comp_key[lo] == key ? er__nfc_comp_cp[lo] : 0;
}

bool er__nfc_is_trivial(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((uint8_t)s[i] >= 0x80) return false;
  return true;
}

er_status er__nfc(const char *s, size_t n, char **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  /* A code point decomposes into at most 8 (the tables' 4, Hangul's 3). */
  uint32_t *cp = malloc((n * 8 + 1) * sizeof *cp);
  int *cc = malloc((n * 8 + 1) * sizeof *cc);
  if (!cp || !cc) {
    free(cp);
    free(cc);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory normalizing %zu bytes", n);
  }
  size_t m = 0;
  for (size_t i = 0; i < n;) {
    uint32_t c;
    size_t k = er__utf8_decode((const uint8_t *)s + i, n - i, &c);
    if (k == 0) k = 1, c = 0xFFFD;
    i += k;
    uint32_t d[8];
    size_t nd = decompose(c, d);
    for (size_t j = 0; j < nd; j++) {
      cp[m] = d[j];
      cc[m] = ccc(d[j]);
      /* Canonical ordering: a mark sinks below marks of a higher class. */
      for (size_t p = m; p > 0 && cc[p] != 0 && cc[p - 1] > cc[p]; p--) {
        uint32_t tc = cp[p];
        int tcc = cc[p];
        cp[p] = cp[p - 1], cc[p] = cc[p - 1];
        cp[p - 1] = tc, cc[p - 1] = tcc;
      }
      m++;
    }
  }
  /* Composition: each character joins the last starter unless blocked (a
   * character between them of class 0 or of a class >= its own). */
  size_t w = 0;
  long starter = -1;
  for (size_t i = 0; i < m; i++) {
    int c = cc[i];
    if (starter >= 0) {
      bool adjacent = (size_t)starter == w - 1;
      int last = adjacent ? -1 : cc[w - 1];
      if (adjacent || (last != 0 && last < c)) {
        uint32_t comp = compose(cp[starter], cp[i]);
        if (comp) {
          cp[starter] = comp;
          cc[starter] = ccc(comp);
          continue;
        }
      }
    }
    if (c == 0) starter = (long)w;
    cp[w] = cp[i];
    cc[w] = c;
    w++;
  }
  char *buf = malloc(w * 4 + 1);
  if (!buf) {
    free(cp);
    free(cc);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "tokenizer: out of memory normalizing %zu bytes", n);
  }
  size_t len = 0;
  for (size_t i = 0; i < w; i++) len += er__utf8_encode(cp[i], buf + len);
  free(cp);
  free(cc);
  buf[len] = 0;
  *out = buf;
  *n_out = len;
  return ER_STATUS_OK;
}
