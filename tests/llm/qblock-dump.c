/* qblock-dump.c - the reference block conversions as a command, for
 * qblock_check.py to compare with gguf-py's numpy code:
 *
 *   qblock-dump dequant TYPE IN OUT   IN: whole blocks of ggml type id TYPE;
 *                                     OUT: float32, little-endian
 *   qblock-dump quant TYPE IN OUT     IN: float32 (a whole number of blocks);
 *                                     OUT: the blocks
 *
 * Rows are converted a block's worth at a time (er__qb_dequantize_row and
 * er__qb_quantize_row over the whole file as one row of k elements). */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/qblock.h"

/* The whole file, owned by the caller; NULL (message printed) on failure. */
static uint8_t *read_file(const char *path, size_t *size_out) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "qblock-dump: cannot open %s\n", path);
    return NULL;
  }
  size_t cap = 1 << 20, n = 0;
  uint8_t *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t *grown = realloc(buf, cap * 2);
    if (!grown) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = grown;
    cap *= 2;
  }
  const bool bad = ferror(f) != 0;
  fclose(f);
  if (!buf || bad) {
    fprintf(stderr, "qblock-dump: cannot read %s\n", path);
    free(buf);
    return NULL;
  }
  *size_out = n;
  return buf;
}

static bool write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "qblock-dump: cannot create %s\n", path);
    return false;
  }
  const bool ok = fwrite(data, 1, size, f) == size;
  if (fclose(f) != 0 || !ok) {
    fprintf(stderr, "qblock-dump: cannot write %s\n", path);
    return false;
  }
  return true;
}

int main(int argc, char **argv) {
  if (argc != 5 || (strcmp(argv[1], "dequant") != 0 && strcmp(argv[1], "quant") != 0)) {
    fprintf(stderr, "usage: %s dequant|quant TYPE IN OUT\n", argv[0]);
    return 2;
  }
  const bool dequant = strcmp(argv[1], "dequant") == 0;
  const uint32_t type = (uint32_t)strtoul(argv[2], NULL, 10);
  int64_t be, bb;
  if (!er__ggml_type_geometry(type, &be, &bb) ||
      (dequant ? !er__qb_can_dequantize(type) : !er__qb_can_quantize(type))) {
    fprintf(stderr, "qblock-dump: type %s cannot be %s here\n", argv[2], dequant ? "dequantized" : "quantized");
    return 2;
  }
  size_t size = 0;
  uint8_t *in = read_file(argv[3], &size);
  if (!in) return 1;
  const size_t unit = dequant ? (size_t)bb : (size_t)be * sizeof(float);
  if (size % unit != 0) {
    fprintf(stderr, "qblock-dump: %s holds %zu bytes, not a whole number of %zu-byte %s\n", argv[3], size, unit,
            dequant ? "blocks" : "float blocks");
    free(in);
    return 1;
  }
  const int64_t k = (int64_t)(size / unit) * be;
  const size_t out_bytes = dequant ? (size_t)k * sizeof(float) : er__qb_row_bytes(type, k);
  void *out = malloc(out_bytes ? out_bytes : 1);
  if (!out) {
    fprintf(stderr, "qblock-dump: out of memory (%zu bytes)\n", out_bytes);
    free(in);
    return 1;
  }
  if (k > 0) {
    if (dequant) er__qb_dequantize_row(type, in, out, k);
    else er__qb_quantize_row(type, (const float *)(const void *)in, out, k);
  }
  const bool ok = write_file(argv[4], out, out_bytes);
  free(in);
  free(out);
  return ok ? 0 : 1;
}
