/* fuzz-kserve.c - libFuzzer target for the service's KServe v2 request
 * decoder (JSON tensors and the binary-data extension) against the digits
 * model's inputs. The first byte picks the form: odd = binary data, with
 * the next two bytes as the Inference-Header-Content-Length; bit 1 turns on
 * the preprocessing path (UINT8 pixels widened and scaled). */
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static er__model owner;
static er__version ver;

static void setup(void) {
  if (ver.model) return;
  if (er_model_load_file(ER_SOURCE_DIR "/models/digits/model.onnx", NULL, &ver.model) !=
      ER_STATUS_OK)
    abort();
  snprintf(owner.name, sizeof owner.name, "digits");
  ver.owner = &owner;
  ver.number = 1;
  ver.n_in = er_model_input_count(ver.model);
  ver.n_out = er_model_output_count(ver.model);
  for (size_t i = 0; i < ver.n_in; i++) er_model_input_info(ver.model, i, &ver.in[i]);
  for (size_t i = 0; i < ver.n_out; i++) er_model_output_info(ver.model, i, &ver.out[i]);
  ver.batchable = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  if (size < 3) return 0;
  er__model_config cfg;
  er__config_defaults(&cfg);
  if (data[0] & 2) {
    cfg.pre = true;
    snprintf(cfg.pre_input, sizeof cfg.pre_input, "input");
    cfg.pre_scale = 0.0625f;
    cfg.pre_channels = 1;
    cfg.pre_std[0] = 1.0f;
  }
  int64_t hdr_len = (data[0] & 1) ? (int64_t)(data[1] | data[2] << 8) : -1;
  /* A copy the size of the body, so reads past it are caught. */
  size_t n = size - 3;
  char *body = malloc(n ? n : 1);
  memcpy(body, data + 3, n);
  er__job *job = calloc(1, sizeof *job);
  er__infer_req req;
  char err[ER_SERVE_ERR];
  int st = er__kserve_decode(&ver, &cfg, body, n, hdr_len, 1 << 16, job, &req, err, sizeof err);
  if (st == 0) {
    /* Echo the inputs back as outputs through the encoder. */
    job->n_out = 1;
    job->out_idx[0] = 0;
    req.out_binary[0] = data[0] & 4;
    er_tensor_create(ER_DTYPE_FLOAT, 2, (const int64_t[]){1, 10}, &job->out[0]);
    er__sb sb = {0};
    int64_t jl;
    er__kserve_encode(&ver, job, &req, &sb, &jl);
    er__sb_free(&sb);
  } else if (!err[0]) {
    abort();   /* every rejection names its reason */
  }
  er__job_free(job);   /* job->ver is NULL: nothing to release */
  free(body);
  return 0;
}
