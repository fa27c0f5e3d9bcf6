/* tok-dump.c - the tokenizer driver tokenizer_check.py compares with
 * llama.cpp's vectors and Hugging Face.
 *
 *   tok-dump MODEL TEXTS        for each text: "ids: ..." and "dec: <hex>"
 *   tok-dump MODEL TEXTS bench  encodes the whole of TEXTS (read as one
 *                               text) and prints the time per run
 *
 * MODEL is a .gguf file or a tokenizer.json. TEXTS holds records "<byte
 * count>\n<bytes>\n", so any text (newlines, NULs) passes unchanged. The
 * ids are encode(add_special = false, parse_special = true), as llama.cpp's
 * test-tokenizer-0 and Hugging Face's encode(add_special_tokens=False) do;
 * "dec" is decode(ids, special = true) in hex. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "llm/tokenizer.h"

static char *read_all(const char *path, size_t *len_out) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (len == cap) buf = realloc(buf, cap *= 2);
    size_t got = fread(buf + len, 1, cap - len, f);
    if (got == 0) break;
    len += got;
  }
  fclose(f);
  *len_out = len;
  return buf;
}

static er_status load(const char *path, er_tokenizer **t) {
  size_t n = strlen(path);
  if (n > 5 && strcmp(path + n - 5, ".gguf") == 0) {
    er_gguf *g = NULL;
    er_status st = er__gguf_open(path, 0, &g);
    if (st != ER_STATUS_OK) return st;
    st = er__tok_create_gguf(g, t);
    er__gguf_close(g);
    return st;
  }
  return er__tok_create_hf_json(path, t);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: tok-dump MODEL TEXTS [bench]\n");
    return 2;
  }
  er_tokenizer *t = NULL;
  er_status st = load(argv[1], &t);
  if (st != ER_STATUS_OK) {
    fprintf(stderr, "tok-dump: %s: %s\n", er_status_name(st), er_last_error());
    return 1;
  }
  size_t len;
  char *data = read_all(argv[2], &len);
  if (!data) {
    fprintf(stderr, "tok-dump: cannot read %s\n", argv[2]);
    er__tok_free(t);
    return 1;
  }
  int rc = 0;
  if (argc > 3 && strcmp(argv[3], "bench") == 0) {
    size_t n = 0;
    st = er__tok_encode(t, data, len, false, true, NULL, 0, &n);
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
      double t0 = now_ms();
      st = er__tok_encode(t, data, len, false, true, ids, n, &n);
      double dt = now_ms() - t0;
      if (dt < best) best = dt;
    }
    printf("bench: %zu bytes -> %zu tokens in %.2f ms (%s)\n", len, n, best, er_status_name(st));
    free(ids);
  } else {
    size_t pos = 0;
    int32_t *ids = NULL;
    char *dec = NULL;
    while (pos < len) {
      char *end;
      unsigned long long tl = strtoull(data + pos, &end, 10);
      if (end == data + pos || *end != '\n' || (size_t)(end + 1 - data) + tl > len) {
        fprintf(stderr, "tok-dump: malformed record at byte %zu\n", pos);
        rc = 1;
        break;
      }
      const char *text = end + 1;
      pos = (size_t)(text - data) + tl + 1;
      size_t n = 0;
      st = er__tok_encode(t, text, tl, false, true, NULL, 0, &n);
      if (st != ER_STATUS_OK && st != ER_STATUS_LIMIT) {
        printf("error: %s: %s\n", er_status_name(st), er_last_error());
        continue;
      }
      ids = realloc(ids, (n + 1) * sizeof *ids);
      st = er__tok_encode(t, text, tl, false, true, ids, n, &n);
      printf("ids:");
      for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
      printf("\n");
      size_t dl = 0;
      er__tok_decode(t, ids, n, true, NULL, 0, &dl);
      dec = realloc(dec, dl + 1);
      st = er__tok_decode(t, ids, n, true, dec, dl, &dl);
      printf("dec: ");
      for (size_t i = 0; i < dl; i++) printf("%02x", (unsigned char)dec[i]);
      printf("%s\n", st == ER_STATUS_OK ? "" : " (decode failed)");
    }
    free(ids);
    free(dec);
  }
  free(data);
  er__tok_free(t);
  return rc;
}
