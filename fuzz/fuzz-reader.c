/* fuzz-reader.c - libFuzzer target for the protobuf wire reader: the bytes
 * are parsed as a TensorProto (the data-file path) and walked as a generic
 * message, recursing into every length-delimited field the way a schema
 * would. Any crash, sanitizer report or leak is a bug. */
#include <stdlib.h>

#include "core/tensor.h"
#include "onnx/onnx.h"

static void walk(const uint8_t *p, size_t n, int depth) {
  er_pb pb = er__pb_init(p, n);
  er_pb_field f;
  bool done;
  while (er__pb_next(&pb, &f, &done) == ER_STATUS_OK && !done) {
    if (f.wire == ER_PB_LEN && depth < 8) {
      uint64_t c;
      if (er__pb_scalar_count(&f, ER_PB_S_VARINT, &c) == ER_STATUS_OK && c < 4096) {
        uint64_t vals[4096], k = 0;
        er__pb_scalar_read(&f, ER_PB_S_VARINT, vals, c, &k);
      }
      walk(f.data, f.len, depth + 1);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  er_tensor t;
  char *name = NULL;
  if (er__onnx_parse_tensor_file(data, size, &t, &name) == ER_STATUS_OK) {
    er__tensor_release(&t);
    free(name);
  }
  walk(data, size, 0);
  return 0;
}
