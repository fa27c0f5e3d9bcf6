/* fuzz-onnxdec.c - libFuzzer target for the ONNX decoder importer
 * (src/llm/onnx-import.c). An input that starts with '{' is the folder's
 * genai_config.json, any other is its model.onnx; the other file, the
 * external weights and the tokenizer are those of the committed
 * qwen2-int4 test model, copied once into a private folder. The import
 * then reads the graph, converts every weight and builds the GGUF image,
 * which is opened as the engine opens it. Any crash, sanitizer report or
 * leak is a bug. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "llm/llm-impl.h"

#ifndef ER_SOURCE_DIR
#define ER_SOURCE_DIR "."
#endif
#define MODEL ER_SOURCE_DIR "/tests/llm/data/onnx-decoders/qwen2-int4"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static void *model_bytes, *config_bytes;
static size_t model_n, config_n;

static void put(const char *name, const void *bytes, size_t n) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n && fwrite(bytes, 1, n, f) != n) abort();
  fclose(f);
}

static void *slurp(const char *name, size_t *n) {
  FILE *f = fopen(name, "rb");
  if (!f) abort();
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc((size_t)len + 1);
  if (!p || fread(p, 1, (size_t)len, f) != (size_t)len) abort();
  fclose(f);
  *n = (size_t)len;
  return p;
}

static void cleanup(void) {
  static const char *const names[] = {"model.onnx", "model.onnx.data", "genai_config.json", "tokenizer.json",
                                      "tokenizer_config.json"};
  char path[128];
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
  free(model_bytes);
  free(config_bytes);
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/fuzz-onnxdec-XXXXXX");
  if (!mkdtemp(dir)) abort();
  atexit(cleanup);
  static const char *const files[] = {"model.onnx.data", "tokenizer.json", "tokenizer_config.json"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    size_t n;
    void *p = slurp(i == 0 ? MODEL "/model.onnx.data" : i == 1 ? MODEL "/tokenizer.json" : MODEL "/tokenizer_config.json",
                    &n);
    put(files[i], p, n);
    free(p);
  }
  model_bytes = slurp(MODEL "/model.onnx", &model_n);
  config_bytes = slurp(MODEL "/genai_config.json", &config_n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) setup();
  bool config = size > 0 && data[0] == '{';
  put("genai_config.json", config ? (const void *)data : config_bytes, config ? size : config_n);
  put("model.onnx", config ? model_bytes : (const void *)data, config ? model_n : size);
  void *image = NULL;
  size_t n = 0;
  char *tok = NULL;
  if (er__llm_import_onnx(dir, 0, size % 2 == 1, &image, &n, &tok) == ER_STATUS_OK) {
    er_gguf *g = NULL;
    if (er__gguf_open_buffer(image, n, "fuzz image", &g) == ER_STATUS_OK) er__gguf_close(g);
  }
  er__aligned_free(image);
  free(tok);
  er__error_clear();
  return 0;
}
