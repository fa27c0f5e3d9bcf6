/* test-quant-api.c - the quantization toolchain through its public header
 * only (edgerun-quant.h): options, preprocessing specs, data sets, a whole
 * quantization of the bundled digits model, and the comparison of the
 * result with the float model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "edgerun.h"
#include "edgerun-quant.h"
#include "harness.h"

#define DIGITS ER_SOURCE_DIR "/models/digits"

static void test_options(void) {
  er_quant_options o;
  er_quant_options_init(&o);
  CHECK(o.weights == ER_QW_INT8);
  CHECK(o.per_channel);
  CHECK(o.activations == ER_QA_UINT8);
  CHECK(o.method == ER_CALIB_MINMAX);
  CHECK(o.fold && o.bias_correction);
  er_qdata_options d;
  er_qdata_options_init(&d);
  CHECK(d.limit == 0 && d.skip == 0);
}

static void test_image_prep(void) {
  er_image_prep p;
  er_image_prep_init(&p);
  CHECK_STATUS(er_image_prep_parse(&p, "size=32x48,layout=nhwc,channels=bgr,mean=0.5,std=0.25"), ER_STATUS_OK);
  CHECK(p.height == 32 && p.width == 48 && p.nhwc && p.bgr);
  CHECK(fabsf(p.mean[0] - 0.5f) < 1e-6f && fabsf(p.std[2] - 0.25f) < 1e-6f);
  CHECK_STATUS(er_image_prep_parse(&p, "size=32"), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("size");
  CHECK_STATUS(er_image_prep_parse(&p, "colour=red"), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("colour");
}

static void test_bad_paths(void) {
  er_model *m = NULL;
  CHECK_STATUS(er_model_load_file(DIGITS "/model.onnx", NULL, &m), ER_STATUS_OK);
  er_qdata *d = NULL;
  CHECK(er_qdata_open("/nonexistent/edgerun-data", m, NULL, &d) != ER_STATUS_OK);
  CHECK(d == NULL);
  int64_t *labels = NULL, n = 0;
  CHECK(er_qdata_read_labels("/nonexistent/labels.txt", &labels, &n) != ER_STATUS_OK);
  er_qreport *r = NULL;
  /* The output may not be the model itself. */
  CHECK_STATUS(er_quantize(DIGITS "/model.onnx", DIGITS "/test_images.npy", DIGITS "/model.onnx", NULL, &r), ER_STATUS_INVALID_ARGUMENT);
  er_qreport_free(r);
  er_model_free(m);
}

static void test_quantize_and_compare(void) {
  char out[] = "/tmp/edgerun-quant-api-XXXXXX";
  int fd = mkstemp(out);
  CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  er_quant_options o;
  er_quant_options_init(&o);
  o.progress = false;
  o.data.limit = 64;
  er_qreport *r = NULL;
  CHECK_STATUS(er_quantize(DIGITS "/model.onnx", DIGITS "/test_images.npy", out, &o, &r), ER_STATUS_OK);
  CHECK(r != NULL);
  if (!r) {
    unlink(out);
    return;
  }
  size_t quantized = 0;
  for (size_t i = 0; i < r->n_layers; i++) quantized += r->layers[i].quantized;
  CHECK(r->n_layers > 0 && quantized > 0);
  CHECK(r->calib_samples > 0);
  CHECK(r->quant_file_bytes > 0 && r->quant_file_bytes < r->float_file_bytes);
  CHECK(r->cmp != NULL);
  char json[sizeof out + 8];
  snprintf(json, sizeof json, "%s.json", out);
  CHECK_STATUS(er_qreport_write_json(r, json), ER_STATUS_OK);
  CHECK(access(json, R_OK) == 0);
  unlink(json);
  er_qreport_free(r);

  /* The written model loads, runs, and stays close to the float one. */
  er_model *fm = NULL, *qm = NULL;
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  CHECK_STATUS(er_model_load_file(DIGITS "/model.onnx", &lo, &fm), ER_STATUS_OK);
  CHECK_STATUS(er_model_load_file(out, &lo, &qm), ER_STATUS_OK);
  er_qdata *d = NULL;
  er_qdata_options dopt;
  er_qdata_options_init(&dopt);
  dopt.limit = 64;
  if (fm && qm) CHECK_STATUS(er_qdata_open(DIGITS "/test_images.npy", qm, &dopt, &d), ER_STATUS_OK);
  if (d) {
    CHECK(er_qdata_samples(d) > 0);
    er_qcompare_options co = {true, NULL, 0, 1, false, "comparing"};
    er_qcompare *c = NULL;
    CHECK_STATUS(er_qcompare_run(fm, qm, d, &co, &c), ER_STATUS_OK);
    if (c) {
      er_qcompare_attribute(c, fm);
      CHECK(c->samples == 64 && er_qdata_samples(d) == 64);
      CHECK(c->n_tensors > 0 && c->tensors[0].is_output);
      /* 8-bit quantization of this small CNN keeps its output within
       * tens of dB of the float one; far below that, it is broken. */
      CHECK(er_qmetric_sqnr(&c->tensors[0].m) > 20.0);
      CHECK(er_qmetric_cosine(&c->tensors[0].m) > 0.99);
      er_qcompare_free(c);
    }
    er_qdata_free(d);
  }
  er_model_free(fm);
  er_model_free(qm);
  unlink(out);
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"options", test_options},
      {"image_prep", test_image_prep},
      {"bad_paths", test_bad_paths},
      {"quantize_and_compare", test_quantize_and_compare},
  };
  return er_test_run(cases, sizeof cases / sizeof cases[0], argc, argv);
}
