/* test-quant.c - unit tests of the quantization toolchain: streaming
 * statistics and range methods, calibration data layouts, image decoding
 * and preprocessing, the graph passes, and bad-input case 16 of TESTING.md
 * (constant or all-zero tensors, NaN/Inf in weights or calibration data, a
 * bad channel axis, an output path that would overwrite its input: a clear
 * error or a correct result, and never a partial output file). */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
/* jpeglib.h needs FILE and size_t declared before it. */
#include <jpeglib.h>
#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "onnx-builder.h"
#include "onnx/onnx-write.h"
#include "quant/prepare.h"
#include "quant/quantize.h"

static char g_dir[256];

static void path_in(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", g_dir, name); }

static bool exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

/* No "*.tmp.*" leftovers in the test folder. */
static int temp_files(void) {
  DIR *d = opendir(g_dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strstr(e->d_name, ".tmp.")) n++;
  if (d) closedir(d);
  return n;
}

static void write_bytes(const char *path, const er_pbw *w) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f) return;
  fwrite(w->buf, 1, w->len, f);
  fclose(f);
}

/* y = Conv(x [1,2,4,4], W [3,2,1,1], B [3]) -> Relu, saved as `name`. */
static void conv_model(const char *name, const float *w6, const float *b3) {
  er_pbw g = {0}, t = {0}, tb = {0}, m = {0};
  const int64_t xd[4] = {1, 2, 4, 4}, yd[4] = {1, 3, 4, 4}, wd[4] = {3, 2, 1, 1}, bd[1] = {3};
  tb_tensor(&t, "W", 1, 4, wd, w6, 6 * sizeof(float));
  tb_tensor(&tb, "B", 1, 1, bd, b3, 3 * sizeof(float));
  tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", "B", NULL}, (const char *const[]){"c", NULL}, NULL);
  tb_node(&g, "Relu", "relu", (const char *const[]){"c", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_initializer(&g, &t);
  tb_graph_initializer(&g, &tb);
  tb_graph_input(&g, "x", 1, 4, xd);
  tb_graph_output(&g, "y", 1, 4, yd);
  tb_model(&m, 8, 13, &g);
  char p[512];
  path_in(p, sizeof p, name);
  write_bytes(p, &m);
  er__pbw_free(&g);
  er__pbw_free(&t);
  er__pbw_free(&tb);
  er__pbw_free(&m);
}

/* Calibration samples [n,1,2,4,4] -> written as [n,2,4,4]... the model's
 * input is [1,2,4,4], so the file holds n samples of that shape. */
static void calib_file(const char *name, int n, float (*fill)(int sample, int i)) {
  int64_t dims[4] = {n, 2, 4, 4};
  er_tensor *t;
  CHECK_STATUS(er_tensor_create(ER_DTYPE_FLOAT, 4, dims, &t), ER_STATUS_OK);
  float *v = er_tensor_data(t);
  for (int s = 0; s < n; s++)
    for (int i = 0; i < 32; i++) v[s * 32 + i] = fill(s, i);
  char p[512];
  path_in(p, sizeof p, name);
  CHECK_STATUS(er_tensor_write_file(p, t, NULL), ER_STATUS_OK);
  er_tensor_free(t);
}

static float fill_ramp(int s, int i) { return (float)((s * 7 + i) % 13) / 13.0f - 0.2f; }
static float fill_zero(int s, int i) {
  (void)s;
  (void)i;
  return 0.0f;
}
static float fill_inf(int s, int i) { return s == 2 && i == 5 ? INFINITY : 0.5f; }

static const float w_ok[6] = {0.5f, -0.25f, 1.0f, 0.75f, -1.0f, 0.125f};
static const float b_ok[3] = {0.1f, -0.2f, 0.3f};

/* Runs `model` on one input and returns output 0 (caller frees). */
static er_tensor *run_one(const char *model, const float *x32) {
  er_model *m = NULL;
  er_session *s = NULL;
  er_tensor *x = NULL, *y = NULL;
  const int64_t xd[4] = {1, 2, 4, 4};
  if (er_model_load_file(model, NULL, &m) != ER_STATUS_OK) return NULL;
  if (er_session_create(m, NULL, &s) == ER_STATUS_OK &&
      er_tensor_wrap(ER_DTYPE_FLOAT, 4, xd, (void *)x32, 32 * sizeof(float), &x) == ER_STATUS_OK) {
    er_named_tensor in = {"x", x};
    if (er_session_run(s, &in, 1, NULL, 1, &y) != ER_STATUS_OK) y = NULL;
  }
  er_tensor_free(x);
  er_session_free(s);
  er_model_free(m);
  return y;
}

static er_status quantize(const char *model, const char *calib, const char *out, const char *channel_axis) {
  char mp[512], cp[512], op[512];
  path_in(mp, sizeof mp, model);
  path_in(cp, sizeof cp, calib);
  path_in(op, sizeof op, out);
  er_quant_options o;
  er_quant_options_init(&o);
  o.channel_axis = channel_axis;
  er_qreport *r = NULL;
  er_status st = er_quantize(mp, cp, op, &o, &r);
  er_qreport_free(r);
  return st;
}

/* ======================================================================== */
/* Case 16                                                                   */
/* ======================================================================== */

static void test_case16_all_zero_weights(void) {
  /* An all-zero weight quantizes exactly (scale 1, values 0): the output is
   * the bias alone, up to the int32 bias rounding (half an input step). */
  static const float zero[6] = {0};
  conv_model("zero.onnx", zero, b_ok);
  calib_file("ramp.npy", 8, fill_ramp);
  CHECK_STATUS(quantize("zero.onnx", "ramp.npy", "zero-q.onnx", NULL), ER_STATUS_OK);
  char p[512];
  path_in(p, sizeof p, "zero-q.onnx");
  float x[32];
  for (int i = 0; i < 32; i++) x[i] = fill_ramp(3, i);
  er_tensor *y = run_one(p, x);
  CHECK(y != NULL);
  if (!y) return;
  const float *v = er_tensor_cdata(y);
  float worst = 0;
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 16; i++) worst = fmaxf(worst, fabsf(v[c * 16 + i] - fmaxf(b_ok[c], 0)));
  CHECK(worst < 0.01f);
  er_tensor_free(y);
}

static void test_case16_constant_calibration(void) {
  /* Calibration data that is all zeros gives a zero-width range: the
   * quantizer picks scale 1 and represents 0 exactly. */
  conv_model("conv.onnx", w_ok, b_ok);
  calib_file("zeros.npy", 4, fill_zero);
  CHECK_STATUS(quantize("conv.onnx", "zeros.npy", "const-q.onnx", NULL), ER_STATUS_OK);
  char p[512];
  path_in(p, sizeof p, "const-q.onnx");
  float x[32] = {0};
  er_tensor *y = run_one(p, x);
  CHECK(y != NULL);
  if (!y) return;
  /* The output is the bias; it went through int32 with scale
   * s_x * s_w = 1 * (max |w_c| / 127), so it is off by at most half that. */
  const float *v = er_tensor_cdata(y);
  bool close = true;
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 16; i++) close = close && fabsf(v[c * 16 + i] - fmaxf(b_ok[c], 0)) <= 0.5f * 1.0f / 127 + 1e-6f;
  CHECK(close);
  er_tensor_free(y);
}

static void test_case16_nan_weight(void) {
  float w[6];
  memcpy(w, w_ok, sizeof w);
  w[4] = NAN;
  conv_model("nan.onnx", w, b_ok);
  calib_file("ramp.npy", 8, fill_ramp);
  CHECK_STATUS(quantize("nan.onnx", "ramp.npy", "nan-q.onnx", NULL), ER_STATUS_INVALID_TENSOR);
  CHECK_MSG("weight 'W'");
  CHECK_MSG("NaN");
  char p[512];
  path_in(p, sizeof p, "nan-q.onnx");
  CHECK(!exists(p));
  CHECK(temp_files() == 0);
}

static void test_case16_inf_bias(void) {
  float b[3] = {0.1f, INFINITY, 0.3f};
  conv_model("infb.onnx", w_ok, b);
  calib_file("ramp.npy", 8, fill_ramp);
  CHECK_STATUS(quantize("infb.onnx", "ramp.npy", "infb-q.onnx", NULL), ER_STATUS_INVALID_TENSOR);
  CHECK_MSG("infinity");
  char p[512];
  path_in(p, sizeof p, "infb-q.onnx");
  CHECK(!exists(p));
}

static void test_case16_inf_calibration(void) {
  conv_model("conv.onnx", w_ok, b_ok);
  calib_file("inf.npy", 4, fill_inf);
  CHECK_STATUS(quantize("conv.onnx", "inf.npy", "inf-q.onnx", NULL), ER_STATUS_INVALID_TENSOR);
  CHECK_MSG("'x'");
  CHECK_MSG("infinity");
  char p[512];
  path_in(p, sizeof p, "inf-q.onnx");
  CHECK(!exists(p));
  CHECK(temp_files() == 0);
}

static void test_case16_bad_channel_axis(void) {
  conv_model("conv.onnx", w_ok, b_ok);
  calib_file("ramp.npy", 8, fill_ramp);
  CHECK_STATUS(quantize("conv.onnx", "ramp.npy", "axis-q.onnx", "Conv=7"), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("--channel-axis");
  CHECK_STATUS(quantize("conv.onnx", "ramp.npy", "axis-q.onnx", "Conv=4"), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("outside [-4, 3]");
  CHECK_STATUS(quantize("conv.onnx", "ramp.npy", "axis-q.onnx", "Conv"), ER_STATUS_INVALID_ARGUMENT);
  char p[512];
  path_in(p, sizeof p, "axis-q.onnx");
  CHECK(!exists(p));
  /* A valid override other than the output channel works; its bias then
   * stays float (int32 needs one scale per output channel). */
  CHECK_STATUS(quantize("conv.onnx", "ramp.npy", "axis1-q.onnx", "Conv=1"), ER_STATUS_OK);
}

static void test_case16_output_is_input(void) {
  conv_model("self.onnx", w_ok, b_ok);
  calib_file("ramp.npy", 8, fill_ramp);
  char p[512];
  path_in(p, sizeof p, "self.onnx");
  struct stat before, after;
  CHECK(stat(p, &before) == 0);
  CHECK_STATUS(quantize("self.onnx", "ramp.npy", "self.onnx", NULL), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("is the input model");
  CHECK(stat(p, &after) == 0);
  CHECK(before.st_size == after.st_size && before.st_mtime == after.st_mtime);
  /* The same file under another spelling of its path. */
  char other[600];
  snprintf(other, sizeof other, "%s/./self.onnx", g_dir);
  er_quant_options o;
  er_quant_options_init(&o);
  char cp[512];
  path_in(cp, sizeof cp, "ramp.npy");
  CHECK_STATUS(er_quantize(p, cp, other, &o, NULL), ER_STATUS_INVALID_ARGUMENT);
  /* An output folder that does not exist: an error, nothing written. */
  char nowhere[600];
  snprintf(nowhere, sizeof nowhere, "%s/no-such-dir/q.onnx", g_dir);
  CHECK_STATUS(er_quantize(p, cp, nowhere, &o, NULL), ER_STATUS_IO);
  CHECK(temp_files() == 0);
}

/* ======================================================================== */
/* Statistics and range methods                                              */
/* ======================================================================== */

static void test_histogram_exact_growth(void) {
  er_qstat s;
  CHECK_STATUS(er__qstat_init(&s, true), ER_STATUS_OK);
  float a[1000], b[10] = {0, 0, 0, 100, -250, 3, 3, 3, 1e4f, -1e-3f};
  for (int i = 0; i < 1000; i++) a[i] = (float)(i % 21) / 10.0f - 1.0f;
  float zeros[5] = {0};
  CHECK_STATUS(er__qstat_add(&s, zeros, 5, "t"), ER_STATUS_OK);  /* before any range */
  CHECK_STATUS(er__qstat_add(&s, a, 1000, "t"), ER_STATUS_OK);
  CHECK_STATUS(er__qstat_add(&s, b, 10, "t"), ER_STATUS_OK);     /* grows the range 2^14x */
  uint64_t total = 0;
  for (int i = 0; i < ER_QHIST_BINS; i++) total += s.hist[i];
  CHECK(total == 1015 && s.count == 1015);
  CHECK(s.min == -250 && s.max == 1e4f);
  CHECK(s.range >= 1e4);
  CHECK(s.zeros == 5 + 1000 / 21 + 1 + 3);
  er__qstat_free(&s);
}

/* Mean squared error of quantizing v[0..n) to 255 steps over [lo, hi]. */
static double quant_mse(const float *v, int n, double lo, double hi) {
  double step = (hi - lo) / 255, e = 0;
  for (int i = 0; i < n; i++) {
    double x = v[i] < lo ? lo : v[i] > hi ? hi : v[i];
    double q = lo + nearbyint((x - lo) / step) * step;
    e += (v[i] - q) * (v[i] - q);
  }
  return e / n;
}

static void test_range_methods(void) {
  /* 100,000 Gaussian values (sigma 1) plus ten outliers at 50: minmax
   * keeps the outliers; percentile and entropy clip them; mse picks a range
   * whose actual quantization error is no worse than minmax's. */
  enum { N = 100000, OUT = 10 };
  er_qstat s;
  CHECK_STATUS(er__qstat_init(&s, true), ER_STATUS_OK);
  float *v = malloc((N + OUT) * sizeof *v);
  uint32_t r = 12345;
  for (int i = 0; i < N; i += 2) {
    double u[2];
    for (int k = 0; k < 2; k++) {
      r = r * 1664525u + 1013904223u;
      u[k] = ((double)(r >> 8) + 0.5) / (double)(1u << 24);
    }
    double rad = sqrt(-2 * log(u[0]));
    v[i] = (float)(rad * cos(2 * M_PI * u[1]));
    v[i + 1] = (float)(rad * sin(2 * M_PI * u[1]));
  }
  for (int i = N; i < N + OUT; i++) v[i] = 50.0f;
  CHECK_STATUS(er__qstat_add(&s, v, N + OUT, "t"), ER_STATUS_OK);
  double lo, hi, mlo, mhi;
  er__qstat_range(&s, ER_CALIB_MINMAX, 0, false, 255, &mlo, &mhi);
  CHECK(mhi == 50.0 && mlo < -3.5);
  er__qstat_range(&s, ER_CALIB_PERCENTILE, 99.9, false, 255, &lo, &hi);
  CHECK(hi > 3.0 && hi < 3.6 && lo < -3.0 && lo > -3.6);  /* the 0.05% tails of N(0,1) */
  er__qstat_range(&s, ER_CALIB_PERCENTILE, 99.9, true, 255, &lo, &hi);
  CHECK(hi > 3.0 && hi < 3.6 && lo == -hi);
  er__qstat_range(&s, ER_CALIB_ENTROPY, 0, true, 255, &lo, &hi);
  CHECK(hi > 2.0 && hi < 10.0 && lo == -hi);
  er__qstat_range(&s, ER_CALIB_MSE, 0, false, 255, &lo, &hi);
  CHECK(hi <= 50.0 && quant_mse(v, N + OUT, lo, hi) <= quant_mse(v, N + OUT, mlo, mhi) * 1.01);
  /* Every range contains 0. */
  float pos[3] = {2, 3, 4};
  er_qstat p;
  CHECK_STATUS(er__qstat_init(&p, false), ER_STATUS_OK);
  CHECK_STATUS(er__qstat_add(&p, pos, 3, "p"), ER_STATUS_OK);
  er__qstat_range(&p, ER_CALIB_MINMAX, 0, false, 255, &lo, &hi);
  CHECK(lo == 0 && hi == 4);
  free(v);
  er__qstat_free(&s);
  er__qstat_free(&p);
}

static void test_qstat_rejects_nan(void) {
  er_qstat s;
  CHECK_STATUS(er__qstat_init(&s, true), ER_STATUS_OK);
  float v[3] = {1, NAN, 2};
  CHECK_STATUS(er__qstat_add(&s, v, 3, "act"), ER_STATUS_INVALID_TENSOR);
  CHECK_MSG("tensor 'act' holds NaN at element 1");
  er__qstat_free(&s);
}

/* ======================================================================== */
/* Data sets                                                                 */
/* ======================================================================== */

/* A two-input model: z = x + y, x and y [N,3]. */
static er_model *two_input_model(void) {
  er_pbw g = {0}, m = {0};
  const int64_t d[2] = {-1, 3};
  tb_node(&g, "Add", "add", (const char *const[]){"x", "y", NULL}, (const char *const[]){"z", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 2, d);
  tb_graph_input(&g, "y", 1, 2, d);
  tb_graph_output(&g, "z", 1, 2, d);
  tb_model(&m, 8, 13, &g);
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  er__pbw_free(&g);
  er__pbw_free(&m);
  return model;
}

static void write_rows(const char *path, int rows, float base, er_dtype dt) {
  int64_t dims[2] = {rows, 3};
  er_tensor *t;
  CHECK_STATUS(er_tensor_create(dt, 2, dims, &t), ER_STATUS_OK);
  for (int i = 0; i < rows * 3; i++) {
    if (dt == ER_DTYPE_DOUBLE) ((double *)er_tensor_data(t))[i] = base + i;
    else ((float *)er_tensor_data(t))[i] = base + (float)i;
  }
  CHECK_STATUS(er_tensor_write_file(path, t, NULL), ER_STATUS_OK);
  er_tensor_free(t);
}

static void test_dataset_named_files(void) {
  er_model *m = two_input_model();
  char dir[512], p[600];
  path_in(dir, sizeof dir, "named");
  mkdir(dir, 0755);
  snprintf(p, sizeof p, "%s/x.npy", dir);
  write_rows(p, 5, 0, ER_DTYPE_FLOAT);
  snprintf(p, sizeof p, "%s/y.npy", dir);
  write_rows(p, 5, 100, ER_DTYPE_DOUBLE);  /* float64 is converted */
  er_qdata_options o;
  er_qdata_options_init(&o);
  o.batch = 2;
  er_qdata *d = NULL;
  CHECK_STATUS(er_qdata_open(dir, m, &o, &d), ER_STATUS_OK);
  if (d) {
    CHECK(er_qdata_samples(d) == 5);
    er_named_tensor in[2];
    int64_t n, total = 0, batches = 0;
    float first_y = -1;
    while (er__qdata_next(d, in, &n) == ER_STATUS_OK && n > 0) {
      CHECK(strcmp(in[0].name, "x") == 0 && strcmp(in[1].name, "y") == 0);
      CHECK(in[1].tensor->dtype == ER_DTYPE_FLOAT && in[1].tensor->dims[0] == n);
      if (batches == 0) first_y = ((const float *)in[1].tensor->data)[0];
      total += n;
      batches++;
    }
    CHECK(total == 5 && batches == 3 && first_y == 100.0f);
  }
  er_qdata_free(d);
  /* A mismatched sample count is refused, naming the file. */
  snprintf(p, sizeof p, "%s/y.npy", dir);
  write_rows(p, 4, 100, ER_DTYPE_FLOAT);
  CHECK_STATUS(er_qdata_open(dir, m, &o, &d), ER_STATUS_INVALID_SHAPE);
  CHECK_MSG("holds 4 samples");
  /* A file that matches no input by name. */
  snprintf(p, sizeof p, "%s/y.npy", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/w.npy", dir);
  write_rows(p, 5, 0, ER_DTYPE_FLOAT);
  CHECK_STATUS(er_qdata_open(dir, m, &o, &d), ER_STATUS_NOT_FOUND);
  CHECK_MSG("matches none");
  er_model_free(m);
}

static void test_dataset_limit_skip(void) {
  er_model *m = two_input_model();
  char dir[512], p[600];
  path_in(dir, sizeof dir, "sets");
  mkdir(dir, 0755);
  /* ONNX test-set layout: folders with input_0.pb / input_1.pb. */
  for (int s = 0; s < 3; s++) {
    char sub[600];
    snprintf(sub, sizeof sub, "%s/test_data_set_%d", dir, s);
    mkdir(sub, 0755);
    for (int k = 0; k < 2; k++) {
      snprintf(p, sizeof p, "%s/input_%d.pb", sub, k);
      write_rows(p, 1, (float)(s * 10 + k), ER_DTYPE_FLOAT);
    }
  }
  er_qdata_options o;
  er_qdata_options_init(&o);
  o.skip = 1;
  o.limit = 1;
  er_qdata *d = NULL;
  CHECK_STATUS(er_qdata_open(dir, m, &o, &d), ER_STATUS_OK);
  if (d) {
    CHECK(er_qdata_samples(d) == 1);
    er_named_tensor in[2];
    int64_t n;
    CHECK_STATUS(er__qdata_next(d, in, &n), ER_STATUS_OK);
    CHECK(n == 1 && ((const float *)in[0].tensor->data)[0] == 10.0f && ((const float *)in[1].tensor->data)[0] == 11.0f);
    CHECK_STATUS(er__qdata_next(d, in, &n), ER_STATUS_OK);
    CHECK(n == 0);
  }
  er_qdata_free(d);
  er_model_free(m);
}

static void test_labels(void) {
  char p[512];
  path_in(p, sizeof p, "labels.txt");
  FILE *f = fopen(p, "w");
  fprintf(f, "3\n 7 \n\n0\n");
  fclose(f);
  int64_t *l = NULL, n = 0;
  CHECK_STATUS(er_qdata_read_labels(p, &l, &n), ER_STATUS_OK);
  CHECK(n == 3 && l && l[0] == 3 && l[1] == 7 && l[2] == 0);
  free(l);
  f = fopen(p, "w");
  fprintf(f, "3\nseven\n");
  fclose(f);
  CHECK_STATUS(er_qdata_read_labels(p, &l, &n), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("line 2");
}

/* ======================================================================== */
/* Images                                                                    */
/* ======================================================================== */

/* A 6x4 RGB test picture: R = 40 x, G = 60 y, B = 200. */
static void picture(uint8_t *px) {
  for (int y = 0; y < 4; y++)
    for (int x = 0; x < 6; x++) {
      px[(y * 6 + x) * 3 + 0] = (uint8_t)(40 * x);
      px[(y * 6 + x) * 3 + 1] = (uint8_t)(60 * y);
      px[(y * 6 + x) * 3 + 2] = 200;
    }
}

static void test_png_roundtrip(void) {
  uint8_t px[72];
  picture(px);
  char p[512];
  path_in(p, sizeof p, "pic.png");
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = 6;
  img.height = 4;
  img.format = PNG_FORMAT_RGB;
  CHECK(png_image_write_to_file(&img, p, 0, px, 0, NULL) != 0);
  uint8_t *out = NULL;
  int h, w, c;
  CHECK_STATUS(er__image_decode(p, &out, &h, &w, &c), ER_STATUS_OK);
  CHECK(h == 4 && w == 6 && c == 3 && out && memcmp(out, px, 72) == 0);
  /* Same size, NCHW, BGR, mean/std: exact arithmetic. */
  er_image_prep prep;
  er_image_prep_init(&prep);
  CHECK_STATUS(er_image_prep_parse(&prep, "size=4x6,channels=bgr,scale=1,mean=1:2:3,std=2"), ER_STATUS_OK);
  float t[72];
  er__image_prepare(out, h, w, c, &prep, t);
  /* Channel 0 is blue: (200 - 1) / 2; channel 2 is red at x=5: (200 - 3)/2. */
  CHECK(t[0] == 99.5f && t[2 * 24 + 5] == 98.5f && t[1 * 24 + 6] == (60.0f - 2.0f) / 2.0f);
  /* Downscale to 2x3 NHWC gray. */
  CHECK_STATUS(er_image_prep_parse(&prep, "size=2x3,layout=nhwc,channels=gray,scale=1,mean=0,std=1"), ER_STATUS_OK);
  er__image_prepare(out, h, w, c, &prep, t);
  CHECK(t[0] > 0 && t[5] > t[0]);
  free(out);
  CHECK_STATUS(er_image_prep_parse(&prep, "size=0x3"), ER_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(er_image_prep_parse(&prep, "colour=red"), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("unknown preprocessing key");
}

static void test_jpeg_decode(void) {
  uint8_t px[72];
  picture(px);
  char p[512];
  path_in(p, sizeof p, "pic.jpg");
  FILE *f = fopen(p, "wb");
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr err;
  ci.err = jpeg_std_error(&err);
  jpeg_create_compress(&ci);
  jpeg_stdio_dest(&ci, f);
  ci.image_width = 6;
  ci.image_height = 4;
  ci.input_components = 3;
  ci.in_color_space = JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, 100, TRUE);
  /* No chroma subsampling: the 6x4 picture's colours change every pixel. */
  for (int k = 0; k < 3; k++) ci.comp_info[k].h_samp_factor = ci.comp_info[k].v_samp_factor = 1;
  jpeg_start_compress(&ci, TRUE);
  while (ci.next_scanline < ci.image_height) {
    JSAMPROW row = px + ci.next_scanline * 18;
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  fclose(f);
  uint8_t *out = NULL;
  int h, w, c;
  CHECK_STATUS(er__image_decode(p, &out, &h, &w, &c), ER_STATUS_OK);
  CHECK(h == 4 && w == 6 && c == 3);
  int worst = 0;
  for (int i = 0; out && i < 72; i++) worst = abs((int)out[i] - (int)px[i]) > worst ? abs((int)out[i] - (int)px[i]) : worst;
  CHECK(worst <= 4);  /* quality 100 without subsampling: rounding only */
  free(out);
  /* A truncated JPEG is an error, not an exit. */
  f = fopen(p, "r+b");
  CHECK(ftruncate(fileno(f), 40) == 0);
  fclose(f);
  out = NULL;
  CHECK_STATUS(er__image_decode(p, &out, &h, &w, &c), ER_STATUS_MALFORMED);
  CHECK(out == NULL);
  path_in(p, sizeof p, "junk.png");
  f = fopen(p, "wb");
  fputs("not an image at all", f);
  fclose(f);
  CHECK_STATUS(er__image_decode(p, &out, &h, &w, &c), ER_STATUS_MALFORMED);
}

/* ======================================================================== */
/* Graph passes                                                              */
/* ======================================================================== */

static void test_batchnorm_folding(void) {
  /* Conv -> BatchNormalization, opset 9 (spatial attribute, as old
   * exports have it): folded into one Conv, raised to opset 13, and the
   * result computes the same numbers. */
  er_pbw g = {0}, m = {0}, t[5] = {{0}}, at = {0};
  const int64_t xd[4] = {1, 2, 4, 4}, yd[4] = {1, 3, 4, 4}, wd[4] = {3, 2, 1, 1}, cd[1] = {3};
  const float sc[3] = {2, 0.5f, 1}, bi[3] = {0.1f, 0.2f, -0.3f}, mu[3] = {0.5f, -1, 0}, va[3] = {4, 1, 0.25f};
  tb_tensor(&t[0], "W", 1, 4, wd, w_ok, sizeof w_ok);
  tb_tensor(&t[1], "s", 1, 1, cd, sc, sizeof sc);
  tb_tensor(&t[2], "b", 1, 1, cd, bi, sizeof bi);
  tb_tensor(&t[3], "m", 1, 1, cd, mu, sizeof mu);
  tb_tensor(&t[4], "v", 1, 1, cd, va, sizeof va);
  tb_attr_int(&at, "spatial", 1);
  tb_node(&g, "Conv", "conv", (const char *const[]){"x", "W", NULL}, (const char *const[]){"c", NULL}, NULL);
  tb_node(&g, "BatchNormalization", "bn", (const char *const[]){"c", "s", "b", "m", "v", NULL},
          (const char *const[]){"y", NULL}, &at);
  for (int i = 0; i < 5; i++) tb_graph_initializer(&g, &t[i]);
  tb_graph_input(&g, "x", 1, 4, xd);
  tb_graph_output(&g, "y", 1, 4, yd);
  tb_model(&m, 4, 9, &g);
  char p[512];
  path_in(p, sizeof p, "bn.onnx");
  write_bytes(p, &m);
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_file(p, &lo, &model), ER_STATUS_OK);
  int folded = 0;
  bool raised = false;
  CHECK_STATUS(er__qprep_fold_affine(model, &folded), ER_STATUS_OK);
  CHECK(folded == 1 && model->graph->n_nodes == 1);
  CHECK_STATUS(er__qprep_raise_opset(model, 13, &raised), ER_STATUS_OK);
  CHECK(raised && model->default_opset == 13 && model->ir_version >= 7);
  char q[512];
  path_in(q, sizeof q, "bn-folded.onnx");
  CHECK_STATUS(er__onnx_save_model(model, q), ER_STATUS_OK);
  er_model_free(model);
  float x[32];
  for (int i = 0; i < 32; i++) x[i] = fill_ramp(1, i) * 3;
  er_tensor *a = run_one(p, x), *b = run_one(q, x);
  CHECK(a && b);
  if (a && b) {
    const float *u = er_tensor_cdata(a), *v = er_tensor_cdata(b);
    float worst = 0;
    for (int i = 0; i < 48; i++) worst = fmaxf(worst, fabsf(u[i] - v[i]));
    CHECK(worst < 1e-5f);
  }
  er_tensor_free(a);
  er_tensor_free(b);
  for (int i = 0; i < 5; i++) er__pbw_free(&t[i]);
  er__pbw_free(&at);
  er__pbw_free(&g);
  er__pbw_free(&m);
}

static void test_opset_refusal(void) {
  /* Softmax on a non-last axis of a rank-3 input changed meaning in opset
   * 13: raising must refuse it by name rather than compute something else. */
  er_pbw g = {0}, m = {0}, at = {0};
  const int64_t d[3] = {2, 3, 4};
  tb_attr_int(&at, "axis", 1);
  tb_node(&g, "Softmax", "sm", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, &at);
  tb_graph_input(&g, "x", 1, 3, d);
  tb_graph_output(&g, "y", 1, 3, d);
  tb_model(&m, 7, 11, &g);
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, &lo, &model), ER_STATUS_OK);
  bool raised;
  CHECK_STATUS(er__qprep_raise_opset(model, 13, &raised), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("Softmax node 'sm'");
  er_model_free(model);
  er__pbw_free(&at);
  er__pbw_free(&g);
  er__pbw_free(&m);
}

int main(int argc, char **argv) {
  snprintf(g_dir, sizeof g_dir, "/tmp/er-quant-test-XXXXXX");
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  static const er_test_case cases[] = {
      {"case16_all_zero_weights", test_case16_all_zero_weights},
      {"case16_constant_calibration", test_case16_constant_calibration},
      {"case16_nan_weight", test_case16_nan_weight},
      {"case16_inf_bias", test_case16_inf_bias},
      {"case16_inf_calibration", test_case16_inf_calibration},
      {"case16_bad_channel_axis", test_case16_bad_channel_axis},
      {"case16_output_is_input", test_case16_output_is_input},
      {"histogram_exact_growth", test_histogram_exact_growth},
      {"range_methods", test_range_methods},
      {"qstat_rejects_nan", test_qstat_rejects_nan},
      {"dataset_named_files", test_dataset_named_files},
      {"dataset_limit_skip", test_dataset_limit_skip},
      {"labels", test_labels},
      {"png_roundtrip", test_png_roundtrip},
      {"jpeg_decode", test_jpeg_decode},
      {"batchnorm_folding", test_batchnorm_folding},
      {"opset_refusal", test_opset_refusal},
  };
  int rc = er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
  return rc;
}
