/* fuzz-gguf.c - libFuzzer target for the GGUF reader: the bytes opened as
 * a GGUF file, then every metadata value and every tensor's bytes read
 * through the accessors the engine uses. Any crash, sanitizer report or
 * leak is a bug. */
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  er_gguf *g = NULL;
  if (er__gguf_open_buffer(data, size, "fuzz.gguf", &g) != ER_STATUS_OK) return 0;
  volatile uint64_t sink = 0;
  for (size_t i = 0; i < er__gguf_kv_count(g); i++) {
    const er_gguf_kv *kv = er__gguf_kv_at(g, i);
    char key[128];
    size_t n = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
    memcpy(key, kv->key.p, n);
    key[n] = 0;
    if (kv->elem_type == ER_GGUF_STRING) {
      for (uint64_t k = 0; k < kv->n; k++)
        if (kv->strs[k].len) sink += (uint8_t)kv->strs[k].p[kv->strs[k].len - 1];
    } else {
      for (uint64_t k = 0; k < kv->n; k++) {
        /* The float's bits, not a conversion: a negative, huge or NaN value
         * has no uint64_t (UBSan stopped this harness on -1.0 once). */
        double d = er__gguf_kv_f64(kv, k);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        sink += (uint64_t)er__gguf_kv_i64(kv, k) + bits;
      }
    }
    uint64_t u;
    float f;
    bool b;
    er_gguf_str s;
    (void)er__gguf_get_u64(g, key, &u);
    (void)er__gguf_get_f32(g, key, &f);
    (void)er__gguf_get_bool(g, key, &b);
    (void)er__gguf_get_str(g, key, &s);
  }
  for (size_t i = 0; i < er__gguf_tensor_count(g); i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(g, i);
    if (er__gguf_find_tensor(g, t->name_z) != t) abort();
    const uint8_t *p = t->data;
    if (t->nbytes) sink += p[0] + p[t->nbytes - 1];
  }
  (void)sink;
  er__gguf_close(g);
  return 0;
}
