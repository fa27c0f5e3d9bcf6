/* fuzz-load.c - libFuzzer target for model load + validate + (when it
 * loads) one run on zero-filled inputs of the declared shapes. Caps are
 * small so the fuzzer explores structure rather than allocation size. */
#include <stdlib.h>

#include "edgerun.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  er_load_options o;
  er_load_options_init(&o);
  o.max_tensor_bytes = 1 << 20;
  o.max_total_bytes = 4 << 20;
  o.max_nodes = 2000;
  er_model *m = NULL;
  if (er_model_load_buffer(data, size, NULL, &o, &m) != ER_STATUS_OK) return 0;
  er_session *s = NULL;
  size_t n_in = er_model_input_count(m), n_out = er_model_output_count(m);
  er_tensor **ins = calloc(n_in + 1, sizeof *ins);
  er_named_tensor *named = calloc(n_in + 1, sizeof *named);
  er_tensor **outs = calloc(n_out + 1, sizeof *outs);
  bool ok = ins && named && outs && er_session_create(m, NULL, &s) == ER_STATUS_OK;
  for (size_t i = 0; ok && i < n_in; i++) {
    er_value_info info;
    er_model_input_info(m, i, &info);
    int64_t dims[ER_MAX_RANK];
    int64_t count = 1;
    for (int d = 0; d < info.rank; d++) {
      dims[d] = info.dims[d] < 0 ? 1 : info.dims[d];
      count *= dims[d] > 0 ? dims[d] : 1;
      if (count > 65536) ok = false;
    }
    if (!ok || info.rank < 0 || er_tensor_create(info.dtype, info.rank, dims, &ins[i]) != ER_STATUS_OK) {
      ok = false;
      break;
    }
    named[i] = (er_named_tensor){info.name, ins[i]};
  }
  if (ok && er_session_run(s, named, n_in, NULL, n_out, outs) == ER_STATUS_OK)
    for (size_t i = 0; i < n_out; i++) er_tensor_free(outs[i]);
  for (size_t i = 0; ins && i < n_in; i++) er_tensor_free(ins[i]);
  free(ins);
  free(named);
  free(outs);
  er_session_free(s);
  er_model_free(m);
  return 0;
}
