/* test-core.c - unit tests of the foundation: status codes, conversions,
 * the protobuf reader, tensors and tensor files, the public model and
 * session API, and concurrent runs. */
#define _GNU_SOURCE
#include <fenv.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernels/kernel.h"
#include "core/tensor.h"
#include "harness.h"
#include "onnx-builder.h"

/* ---- status codes ------------------------------------------------------ */

static void test_status_names(void) {
  CHECK(strcmp(er_status_name(ER_STATUS_OK), "OK") == 0);
  CHECK(strcmp(er_status_name(ER_STATUS_UNSAFE_PATH), "UNSAFE_PATH") == 0);
  CHECK(strcmp(er_status_name((er_status)9999), "UNKNOWN") == 0);
  CHECK(strcmp(er_status_name((er_status)-1), "UNKNOWN") == 0);
  /* Every code has a distinct name and a non-empty description. */
  for (int i = 0; i < ER_STATUS_COUNT_; i++) {
    CHECK(er_status_str((er_status)i)[0] != '\0');
    for (int j = 0; j < i; j++) CHECK(strcmp(er_status_name((er_status)i), er_status_name((er_status)j)) != 0);
  }
}

static void *error_thread(void *arg) {
  (void)arg;
  er__error(ER_STATUS_LIMIT, "thread message");
  return NULL;
}

static void test_error_is_per_thread(void) {
  er__error(ER_STATUS_IO, "main message %d", 42);
  pthread_t t;
  pthread_create(&t, NULL, error_thread, NULL);
  pthread_join(t, NULL);
  CHECK(strcmp(er_last_error(), "main message 42") == 0);
  er__error_prefix("ctx %s", "a");
  CHECK(strcmp(er_last_error(), "ctx a: main message 42") == 0);
}

/* ---- conversions ------------------------------------------------------- */

static void test_half(void) {
  /* Every half value converts to float and back unchanged (NaNs stay NaN). */
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = er__f16_to_f32((uint16_t)h);
    uint16_t back = er__f32_to_f16(f);
    if (isnan(f) ? !((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != h) bad++;
  }
  CHECK(bad == 0);
  CHECK(er__f32_to_f16(1.0f) == 0x3c00);
  CHECK(er__f32_to_f16(65504.0f) == 0x7bff);
  CHECK(er__f32_to_f16(65520.0f) == 0x7c00);  /* rounds to infinity */
  CHECK(er__f32_to_f16(1.0f + 0x1p-11f) == 0x3c00); /* tie to even */
  CHECK(er__f32_to_f16(5.96046448e-08f) == 0x0001);  /* smallest subnormal */
  CHECK(er__bf16_to_f32(er__f32_to_bf16(3.140625f)) == 3.140625f);
  CHECK(er__f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);  /* tie to even */
}

static void test_float8(void) {
  /* Decoding then encoding every float8 code gives it back (NaN codes map
   * to the canonical NaN). */
  static const er_dtype types[] = {ER_DTYPE_FLOAT8E4M3FN, ER_DTYPE_FLOAT8E4M3FNUZ, ER_DTYPE_FLOAT8E5M2,
                                   ER_DTYPE_FLOAT8E5M2FNUZ};
  for (size_t k = 0; k < ER_ARRAY_LEN(types); k++) {
    int bad = 0;
    for (int v = 0; v < 256; v++) {
      float f = er__f8_to_f32((uint8_t)v, types[k]);
      if (isnan(f) || isinf(f)) continue; /* saturating encode maps inf to max */
      if (er__f32_to_f8(f, types[k], true) != v && !(f == 0 && (v == 0x80 || v == 0))) bad++;
    }
    CHECK(bad == 0);
  }
  CHECK(er__f8_to_f32(0x7e, ER_DTYPE_FLOAT8E4M3FN) == 448.0f);
  CHECK(er__f32_to_f8(1000.0f, ER_DTYPE_FLOAT8E4M3FN, true) == 0x7e);
  CHECK(er__f32_to_f8(1000.0f, ER_DTYPE_FLOAT8E4M3FN, false) == 0x7f);
  CHECK(er__f32_to_f8(INFINITY, ER_DTYPE_FLOAT8E5M2, false) == 0x7c);
  CHECK(er__f8_to_f32(0x7f, ER_DTYPE_FLOAT8E4M3FNUZ) == 240.0f);
}

static void test_load_store(void) {
  int64_t big = (INT64_C(1) << 60) + 1;
  int64_t buf[1];
  er__store_i64(buf, ER_DTYPE_INT64, 0, big);
  CHECK(er__load_i64(buf, ER_DTYPE_INT64, 0) == big);
  int8_t i8[1];
  er__store_i64(i8, ER_DTYPE_INT8, 0, 200);  /* wraps */
  CHECK(i8[0] == -56);
  int32_t i32[1];
  er__store_f64(i32, ER_DTYPE_INT32, 0, -2.7);  /* truncates toward zero */
  CHECK(i32[0] == -2);
  er__store_f64(i32, ER_DTYPE_INT32, 0, NAN);  /* defined, not UB */
  CHECK(i32[0] == 0);
  int8_t i4[1];
  er__store_i64(i4, ER_DTYPE_INT4, 0, 9);
  CHECK(i4[0] == -7);
}

/* ---- protobuf reader ------------------------------------------------------ */

static void test_varint(void) {
  uint8_t enc[10];
  er_pbw w = {0};
  const uint64_t vals[] = {0, 1, 127, 128, 300, UINT32_MAX, UINT64_MAX, UINT64_C(1) << 63};
  for (size_t i = 0; i < ER_ARRAY_LEN(vals); i++) {
    w.len = 0;
    er__pbw_varint(&w, vals[i]);
    const uint8_t *p = w.buf;
    uint64_t v;
    CHECK_STATUS(er__pb_varint(&p, w.buf + w.len, &v), ER_STATUS_OK);
    CHECK(v == vals[i]);
    CHECK(p == w.buf + w.len);
    /* Every shorter prefix is truncated. */
    for (size_t cut = 0; cut < w.len; cut++) {
      p = w.buf;
      CHECK_STATUS(er__pb_varint(&p, w.buf + cut, &v), ER_STATUS_TRUNCATED);
    }
  }
  er__pbw_free(&w);
  memset(enc, 0x80, sizeof enc);
  const uint8_t *p = enc;
  uint64_t v;
  CHECK_STATUS(er__pb_varint(&p, enc + 10, &v), ER_STATUS_MALFORMED);
}

static void test_pb_fields(void) {
  er_pbw w = {0};
  er__pbw_varint_field(&w, 1, 5);
  er__pbw_bytes_field(&w, 2, "hey", 3);
  float f = 1.5f;
  er__pbw_tag(&w, 3, ER_PB_FIXED32);
  er__pbw_raw(&w, &f, 4);
  er_pb pb = er__pb_init(w.buf, w.len);
  er_pb_field fld;
  bool done;
  CHECK_STATUS(er__pb_next(&pb, &fld, &done), ER_STATUS_OK);
  CHECK(!done && fld.number == 1 && fld.value == 5);
  CHECK_STATUS(er__pb_next(&pb, &fld, &done), ER_STATUS_OK);
  CHECK(fld.number == 2 && fld.len == 3 && memcmp(fld.data, "hey", 3) == 0);
  CHECK_STATUS(er__pb_next(&pb, &fld, &done), ER_STATUS_OK);
  CHECK(fld.number == 3 && fld.wire == ER_PB_FIXED32);
  CHECK_STATUS(er__pb_next(&pb, &fld, &done), ER_STATUS_OK);
  CHECK(done);
  er__pbw_free(&w);
  /* Groups (wire types 3/4) and field number 0 are malformed. */
  const uint8_t group[] = {0x0b, 0x0c};
  pb = er__pb_init(group, sizeof group);
  CHECK_STATUS(er__pb_next(&pb, &fld, &done), ER_STATUS_MALFORMED);
  const uint8_t zero[] = {0x00, 0x01};
  pb = er__pb_init(zero, sizeof zero);
  CHECK_STATUS(er__pb_next(&pb, &fld, &done), ER_STATUS_MALFORMED);
  /* A packed varint block that ends mid-varint. */
  const uint8_t packed[] = {0x80};
  er_pb_field pf = {.number = 8, .wire = ER_PB_LEN, .data = packed, .len = 1};
  uint64_t count;
  CHECK_STATUS(er__pb_scalar_count(&pf, ER_PB_S_VARINT, &count), ER_STATUS_TRUNCATED);
}

/* ---- shapes and tensors -------------------------------------------------- */

static void test_shape_count(void) {
  int64_t n;
  const int64_t ok[3] = {2, 3, 4};
  CHECK(er__shape_count(3, ok, &n) && n == 24);
  const int64_t over[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
  CHECK(!er__shape_count(2, over, &n));
  const int64_t neg[2] = {2, -1};
  CHECK(!er__shape_count(2, neg, &n));
  CHECK(er__shape_count(0, NULL, &n) && n == 1);
  const int64_t empty[2] = {0, INT64_MAX};
  CHECK(er__shape_count(2, empty, &n) && n == 0);
}

static void test_tensor_api(void) {
  er_tensor *t = NULL;
  const int64_t dims[2] = {2, 3};
  CHECK_STATUS(er_tensor_create(ER_DTYPE_FLOAT, 2, dims, &t), ER_STATUS_OK);
  CHECK(er_tensor_count(t) == 6 && er_tensor_nbytes(t) == 24);
  CHECK(((uintptr_t)er_tensor_data(t) & 63) == 0);
  er_tensor_free(t);
  er_tensor_free(NULL);
  CHECK_STATUS(er_tensor_create(ER_DTYPE_STRING, 2, dims, &t), ER_STATUS_UNSUPPORTED);
  CHECK_STATUS(er_tensor_create(ER_DTYPE_FLOAT, 9, dims, &t), ER_STATUS_INVALID_SHAPE);
  float buf[6];
  CHECK_STATUS(er_tensor_wrap(ER_DTYPE_FLOAT, 2, dims, buf, 20, &t), ER_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(er_tensor_wrap(ER_DTYPE_FLOAT, 2, dims, buf, sizeof buf, &t), ER_STATUS_OK);
  CHECK(er_tensor_data(t) == buf);
  er_tensor_free(t); /* must not free buf */
}

static void test_tensor_files(void) {
  char dir[] = "/tmp/er-io-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  const int64_t dims[3] = {2, 1, 3};
  er_tensor *t;
  CHECK_STATUS(er_tensor_create(ER_DTYPE_INT64, 3, dims, &t), ER_STATUS_OK);
  int64_t *d = er_tensor_data(t);
  for (int i = 0; i < 6; i++) d[i] = (INT64_C(1) << 40) * (i - 3);
  const char *exts[] = {"npy", "pb"};
  for (int e = 0; e < 2; e++) {
    char path[128];
    snprintf(path, sizeof path, "%s/t.%s", dir, exts[e]);
    CHECK_STATUS(er_tensor_write_file(path, t, "tname"), ER_STATUS_OK);
    er_tensor *back = NULL;
    char *name = NULL;
    CHECK_STATUS(er_tensor_read_file(path, &back, &name), ER_STATUS_OK);
    if (!back) continue;
    CHECK(er_tensor_dtype(back) == ER_DTYPE_INT64 && er_tensor_rank(back) == 3);
    CHECK(er_tensor_dims(back)[2] == 3);
    CHECK(memcmp(er_tensor_cdata(back), d, 48) == 0);
    if (e == 1) CHECK(name && strcmp(name, "tname") == 0);
    free(name);
    er_tensor_free(back);
  }
  /* Garbage and truncated files fail cleanly. */
  char path[128];
  snprintf(path, sizeof path, "%s/bad.npy", dir);
  FILE *f = fopen(path, "wb");
  fputs("\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'", f);
  fclose(f);
  er_tensor *back = NULL;
  CHECK(er_tensor_read_file(path, &back, NULL) != ER_STATUS_OK);
  CHECK(back == NULL);
  CHECK_STATUS(er_tensor_read_file("/nonexistent/x.npy", &back, NULL), ER_STATUS_IO);
  er_tensor_free(t);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* ---- models and sessions ---------------------------------------------------- */

static er_model *relu_model(void) {
  er_pbw m = {0};
  tb_relu_model(&m);
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  er__pbw_free(&m);
  return model;
}

static void test_model_info(void) {
  er_model *m = relu_model();
  if (!m) return;
  CHECK(er_model_input_count(m) == 1 && er_model_output_count(m) == 1);
  er_value_info info;
  CHECK_STATUS(er_model_input_info(m, 0, &info), ER_STATUS_OK);
  CHECK(strcmp(info.name, "x") == 0 && info.dtype == ER_DTYPE_FLOAT && info.rank == 2);
  CHECK(info.dims[1] == 4);
  CHECK_STATUS(er_model_input_info(m, 1, &info), ER_STATUS_NOT_FOUND);
  er_model_summary s;
  er_model_summary_get(m, &s);
  CHECK(s.ir_version == 8 && s.opset == 13 && s.node_count == 1);
  er_model_free(m);
  er_model_free(NULL);

  /* Symbolic dims are reported by name. */
  er_model *digits = NULL;
  CHECK_STATUS(er_model_load_file(ER_SOURCE_DIR "/models/digits/model.onnx", NULL, &digits),
               ER_STATUS_OK);
  if (digits) {
    CHECK_STATUS(er_model_input_info(digits, 0, &info), ER_STATUS_OK);
    CHECK(info.dims[0] == -1 && info.dim_params[0] && strcmp(info.dim_params[0], "N") == 0);
    er_model_free(digits);
  }
}

static void test_session_api(void) {
  er_model *m = relu_model();
  if (!m) return;
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, NULL, &s), ER_STATUS_OK);
  const int64_t dims[2] = {1, 4};
  float xin[4] = {-1, 2, -3, 4};
  er_tensor *x;
  er_tensor_wrap(ER_DTYPE_FLOAT, 2, dims, xin, sizeof xin, &x);
  er_named_tensor in = {"x", x};
  er_tensor *y = NULL;
  CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &y), ER_STATUS_OK);
  if (y) {
    const float *yv = er_tensor_cdata(y);
    CHECK(yv[0] == 0 && yv[1] == 2 && yv[2] == 0 && yv[3] == 4);
    er_tensor_free(y);
  }
  /* Misuse gets specific errors. */
  er_named_tensor wrong = {"nope", x};
  CHECK_STATUS(er_session_run(s, &wrong, 1, NULL, 1, &y), ER_STATUS_NOT_FOUND);
  CHECK_STATUS(er_session_run(s, NULL, 0, NULL, 1, &y), ER_STATUS_NOT_FOUND);
  CHECK_MSG("'x' is required");
  const char *bad_out[1] = {"zzz"};
  CHECK_STATUS(er_session_run(s, &in, 1, bad_out, 1, &y), ER_STATUS_NOT_FOUND);
  const int64_t wrong_dims[2] = {1, 5};
  er_tensor *x5;
  er_tensor_create(ER_DTYPE_FLOAT, 2, wrong_dims, &x5);
  er_named_tensor in5 = {"x", x5};
  CHECK_STATUS(er_session_run(s, &in5, 1, NULL, 1, &y), ER_STATUS_INVALID_SHAPE);
  CHECK_MSG("[1,5]");
  er_tensor *xi;
  er_tensor_create(ER_DTYPE_INT32, 2, dims, &xi);
  er_named_tensor ini = {"x", xi};
  CHECK_STATUS(er_session_run(s, &ini, 1, NULL, 1, &y), ER_STATUS_TYPE_MISMATCH);
  er_tensor_free(x5);
  er_tensor_free(xi);
  er_tensor_free(x);
  er_session_free(s);
  er_session_free(NULL);
  /* Unknown backends are refused at creation. */
  er_session_options o;
  er_session_options_init(&o);
  const char *be[1] = {"warp-drive"};
  o.backends = be;
  o.backend_count = 1;
  CHECK_STATUS(er_session_create(m, &o, &s), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("warp-drive");
  er_model_free(m);
}

/* A graph may list one value as two outputs: each result gets its own
 * copy (the first used to be moved out, leaving the second to copy from a
 * freed buffer; found by fuzz-load). */
static void test_duplicate_graph_outputs(void) {
  er_pbw g = {0}, mb = {0};
  const int64_t dims[2] = {1, 4};
  tb_str(&g, 2, "dup_graph");
  tb_node(&g, "Relu", "relu", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 2, dims);
  tb_graph_output(&g, "y", 1, 2, dims);
  tb_graph_output(&g, "y", 1, 2, dims);
  tb_model(&mb, 8, 13, &g);
  er_model *m = NULL;
  CHECK_STATUS(er_model_load_buffer(mb.buf, mb.len, NULL, NULL, &m), ER_STATUS_OK);
  er__pbw_free(&g);
  er__pbw_free(&mb);
  if (!m) return;
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, NULL, &s), ER_STATUS_OK);
  float xin[4] = {-1, 2, -3, 4};
  er_tensor *x;
  er_tensor_wrap(ER_DTYPE_FLOAT, 2, dims, xin, sizeof xin, &x);
  er_named_tensor in = {"x", x};
  for (int round = 0; round < 2; round++) {
    er_tensor *y[2] = {NULL, NULL};
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, 2, y), ER_STATUS_OK);
    for (int k = 0; k < 2; k++) {
      const float *yv = y[k] ? er_tensor_cdata(y[k]) : NULL;
      CHECK(yv != NULL);
      if (yv) CHECK(yv[0] == 0 && yv[1] == 2 && yv[2] == 0 && yv[3] == 4);
    }
    CHECK(!y[0] || !y[1] || er_tensor_cdata(y[0]) != er_tensor_cdata(y[1]));
    er_tensor_free(y[0]);
    er_tensor_free(y[1]);
  }
  er_tensor_free(x);
  er_session_free(s);
  er_model_free(m);
}

typedef struct run_job {
  er_session *s;
  int seed;
  int bad;
} run_job;

static void *run_many(void *arg) {
  run_job *job = arg;
  const int64_t dims[2] = {1, 4};
  for (int it = 0; it < 2000; it++) {
    float xin[4];
    for (int i = 0; i < 4; i++) xin[i] = (float)((job->seed * 31 + it * 7 + i) % 11) - 5.0f;
    er_tensor *x, *y = NULL;
    er_tensor_wrap(ER_DTYPE_FLOAT, 2, dims, xin, sizeof xin, &x);
    er_named_tensor in = {"x", x};
    if (er_session_run(job->s, &in, 1, NULL, 1, &y) != ER_STATUS_OK) {
      job->bad++;
    } else {
      const float *yv = er_tensor_cdata(y);
      for (int i = 0; i < 4; i++)
        if (yv[i] != (xin[i] > 0 ? xin[i] : 0)) job->bad++;
    }
    er_tensor_free(y);
    er_tensor_free(x);
  }
  return NULL;
}

static void test_concurrent_runs(void) {
  er_model *m = relu_model();
  if (!m) return;
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, NULL, &s), ER_STATUS_OK);
  enum { N = 4 };
  pthread_t th[N];
  run_job jobs[N];
  for (int i = 0; i < N; i++) {
    jobs[i] = (run_job){s, i, 0};
    pthread_create(&th[i], NULL, run_many, &jobs[i]);
  }
  int bad = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    bad += jobs[i].bad;
  }
  CHECK(bad == 0);
  er_session_free(s);
  er_model_free(m);
}

/* fix-shapes: a symbolic dim made static survives a save and reload, the
 * output shape follows, and the numbers do not change. */
static void test_fix_dims(void) {
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  er_model *m = NULL, *back = NULL, *orig = NULL;
  const char *path = ER_SOURCE_DIR "/models/digits/model.onnx";
  CHECK_STATUS(er_model_load_file(path, &lo, &m), ER_STATUS_OK);
  CHECK_STATUS(er_model_load_file(path, NULL, &orig), ER_STATUS_OK);
  if (!m || !orig) return;
  const char *bad[1] = {"batch"};
  const int64_t three[1] = {3};
  CHECK_STATUS(er_model_fix_dims(m, bad, three, 1), ER_STATUS_NOT_FOUND);
  CHECK_MSG("symbolic dims: N");
  const char *names[1] = {"N"};
  const int64_t zero[1] = {0};
  CHECK_STATUS(er_model_fix_dims(m, names, zero, 1), ER_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(er_model_fix_dims(m, names, three, 1), ER_STATUS_OK);
  char out[] = "/tmp/er-fix-XXXXXX";
  int fd = mkstemp(out);
  close(fd);
  CHECK_STATUS(er_model_save(m, out), ER_STATUS_OK);
  CHECK_STATUS(er_model_load_file(out, NULL, &back), ER_STATUS_OK);
  if (back) {
    er_value_info in, o;
    er_model_input_info(back, 0, &in);
    er_model_output_info(back, 0, &o);
    CHECK(in.rank == 4 && in.dims[0] == 3 && o.rank == 2 && o.dims[0] == 3 && o.dims[1] == 10);
    /* Same outputs as the original model on a batch of 3. */
    er_session *sa = NULL, *sb = NULL;
    er_session_create(orig, NULL, &sa);
    er_session_create(back, NULL, &sb);
    const int64_t dims[4] = {3, 1, 8, 8};
    er_tensor *x, *ya = NULL, *yb = NULL;
    er_tensor_create(ER_DTYPE_FLOAT, 4, dims, &x);
    float *xv = er_tensor_data(x);
    for (int i = 0; i < 192; i++) xv[i] = (float)(i % 17) / 16.0f;
    er_named_tensor nt = {"input", x};
    CHECK_STATUS(er_session_run(sa, &nt, 1, NULL, 1, &ya), ER_STATUS_OK);
    CHECK_STATUS(er_session_run(sb, &nt, 1, NULL, 1, &yb), ER_STATUS_OK);
    /* Static shapes may pick other kernels (Winograd, pixel-major
     * layouts) than dynamic ones: equal within float rounding. */
    if (ya && yb) {
      const float *a = er_tensor_cdata(ya), *b = er_tensor_cdata(yb);
      int differ = 0;
      for (int64_t i = 0; i < er_tensor_count(ya); i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-5f + 1e-5f * fabsf(b[i]))) differ++;
      CHECK(differ == 0);
    }
    er_tensor_free(x);
    er_tensor_free(ya);
    er_tensor_free(yb);
    er_session_free(sa);
    er_session_free(sb);
  }
  unlink(out);
  er_model_free(back);
  er_model_free(m);
  er_model_free(orig);
}

/* Views share their input's planned memory (ER_OP_VIEW): a Reshape of a
 * Relu output whose input is still read after the view, a chain of views,
 * and a view that is the last reader. The outputs must be what the plain
 * ops compute, run after run (the shared slot lives as long as its last
 * member), and Reshape must not be zeroed before it runs. */
static void test_views_share_memory(void) {
  er_pbw g = {0}, m = {0}, st = {0}, st2 = {0}, fl = {0};
  const int64_t xd[3] = {2, 3, 4}, sd[1] = {2}, sv[2] = {6, 4}, sv2[2] = {4, 6};
  tb_tensor(&st, "S", 7, 1, sd, sv, sizeof sv);
  tb_tensor(&st2, "S2", 7, 1, sd, sv2, sizeof sv2);
  tb_graph_initializer(&g, &st);
  tb_graph_initializer(&g, &st2);
  tb_attr_int(&fl, "axis", 2);
  /* b outlives its root a: d would take a's slot if the shared slot
   * ended with a's own last reader. */
  tb_node(&g, "Relu", "relu", (const char *const[]){"x", NULL}, (const char *const[]){"a", NULL}, NULL);
  tb_node(&g, "Reshape", "r1", (const char *const[]){"a", "S", NULL}, (const char *const[]){"b", NULL}, NULL);
  tb_node(&g, "Neg", "neg", (const char *const[]){"x", NULL}, (const char *const[]){"d", NULL}, NULL);
  tb_node(&g, "Reshape", "r2", (const char *const[]){"d", "S2", NULL}, (const char *const[]){"e", NULL}, NULL);
  tb_node(&g, "Reshape", "r3", (const char *const[]){"e", "S", NULL}, (const char *const[]){"f", NULL}, NULL);
  tb_node(&g, "Add", "add1", (const char *const[]){"b", "f", NULL}, (const char *const[]){"t", NULL}, NULL);
  /* p is read again after its view q */
  tb_node(&g, "Sigmoid", "sig", (const char *const[]){"x", NULL}, (const char *const[]){"p", NULL}, NULL);
  tb_node(&g, "Flatten", "flat", (const char *const[]){"p", NULL}, (const char *const[]){"q", NULL}, &fl);
  tb_node(&g, "Abs", "abs", (const char *const[]){"p", NULL}, (const char *const[]){"r", NULL}, NULL);
  tb_node(&g, "Reshape", "r4", (const char *const[]){"r", "S", NULL}, (const char *const[]){"r2", NULL}, NULL);
  tb_node(&g, "Add", "add2", (const char *const[]){"q", "r2", NULL}, (const char *const[]){"u", NULL}, NULL);
  tb_node(&g, "Add", "add3", (const char *const[]){"t", "u", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 3, xd);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  er_session *s = NULL;
  if (model) CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
  for (int run = 0; s && run < 3; run++) {
    float xv[24];
    for (int i = 0; i < 24; i++) xv[i] = (float)((i * 7 + run * 5) % 11) - 5.0f;
    er_tensor *x = NULL, *y = NULL;
    er_tensor_wrap(ER_DTYPE_FLOAT, 3, xd, xv, sizeof xv, &x);
    er_named_tensor in = {"x", x};
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &y), ER_STATUS_OK);
    if (y) {
      CHECK(er_tensor_rank(y) == 2 && er_tensor_dims(y)[0] == 6 && er_tensor_dims(y)[1] == 4);
      const float *yv = er_tensor_cdata(y);
      int bad = 0;
      for (int i = 0; i < 24; i++) {
        float a = xv[i] > 0 ? xv[i] : 0.0f;
        float want = a - xv[i] + 2.0f / (1.0f + expf(-xv[i]));
        if (fabsf(yv[i] - want) > 1e-6f) bad++;
      }
      CHECK(bad == 0);
      er_tensor_free(y);
    }
    er_tensor_free(x);
  }
  er_session_free(s);
  er_model_free(model);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&st);
  er__pbw_free(&st2);
  er__pbw_free(&fl);
}

/* Concat in place: inputs made straight into their slice of the output.
 * b = Neg(x), a = Relu(x) and a2 = Abs(x) go in place into
 * cat = Concat(b, a, a2) along the channels; a is read again after the
 * Concat's last reader, with a value made from the Concat's result in
 * between (its slice must live on); a second
 * Concat lists b twice (copied, not placed) and a third has a batch of 2
 * before its axis (copied). Outputs must equal the plain ops, run after
 * run. */
static void test_concat_in_place(void) {
  er_pbw g = {0}, m = {0}, ax1 = {0}, ax0 = {0}, ax1s = {0};
  const int64_t xd[4] = {1, 2, 3, 4};
  tb_attr_int(&ax1, "axis", 1);
  tb_attr_ints(&ax1s, "axes", (const int64_t[]){1}, 1);
  tb_attr_int(&ax0, "axis", 0);
  tb_node(&g, "Abs", "abs", (const char *const[]){"x", NULL}, (const char *const[]){"a2", NULL}, NULL);
  tb_node(&g, "Relu", "relu", (const char *const[]){"x", NULL}, (const char *const[]){"a", NULL}, NULL);
  tb_node(&g, "Neg", "neg", (const char *const[]){"x", NULL}, (const char *const[]){"b", NULL}, NULL);
  tb_node(&g, "Concat", "cat", (const char *const[]){"b", "a", "a2", NULL}, (const char *const[]){"cat", NULL}, &ax1);
  tb_node(&g, "Sigmoid", "sig", (const char *const[]){"cat", NULL}, (const char *const[]){"y1", NULL}, NULL);
  /* a read after the Concat's last reader and after a new value (z)
   * that would take a's slice if the slice died with the Concat */
  tb_node(&g, "ReduceMean", "mz", (const char *const[]){"y1", NULL}, (const char *const[]){"z", NULL}, &ax1s);
  tb_node(&g, "Add", "az", (const char *const[]){"a", "z", NULL}, (const char *const[]){"y2", NULL}, NULL);
  tb_node(&g, "Concat", "cat2", (const char *const[]){"b", "b", NULL}, (const char *const[]){"y3", NULL}, &ax1);
  tb_node(&g, "Concat", "cat3", (const char *const[]){"y2", "y2", NULL}, (const char *const[]){"y4", NULL}, &ax0);
  tb_graph_input(&g, "x", 1, 4, xd);
  tb_graph_output(&g, "y1", 1, -1, NULL);
  tb_graph_output(&g, "y3", 1, -1, NULL);
  tb_graph_output(&g, "y4", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  er_session *s = NULL;
  if (model) CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
  for (int run = 0; s && run < 3; run++) {
    float xv[24];
    for (int i = 0; i < 24; i++) xv[i] = (float)((i * 5 + run * 3) % 13) - 6.0f;
    er_tensor *x = NULL, *y[3] = {NULL, NULL, NULL};
    er_tensor_wrap(ER_DTYPE_FLOAT, 4, xd, xv, sizeof xv, &x);
    er_named_tensor in = {"x", x};
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, 3, y), ER_STATUS_OK);
    if (y[0] && y[1] && y[2]) {
      const float *y1 = er_tensor_cdata(y[0]), *y3 = er_tensor_cdata(y[1]), *y4 = er_tensor_cdata(y[2]);
      int bad = 0;
      for (int i = 0; i < 24; i++) {
        float a = xv[i] > 0 ? xv[i] : 0.0f;
        float sig[3] = {1.0f / (1.0f + expf(xv[i])), 1.0f / (1.0f + expf(-a)), 1.0f / (1.0f + expf(-fabsf(xv[i])))};
        for (int k = 0; k < 3; k++)
          if (fabsf(y1[k * 24 + i] - sig[k]) > 1e-6f) bad++;
        if (y3[i] != -xv[i] || y3[24 + i] != -xv[i]) bad++;
        float q = 0;
        for (int ch = 0; ch < 6; ch++) q += y1[ch * 12 + i % 12];
        if (fabsf(y4[i] - (a + q / 6.0f)) > 1e-5f || y4[24 + i] != y4[i]) bad++;
      }
      CHECK(bad == 0);
    }
    for (int k = 0; k < 3; k++) er_tensor_free(y[k]);
    er_tensor_free(x);
  }
  er_session_free(s);
  er_model_free(model);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&ax1);
  er__pbw_free(&ax0);
  er__pbw_free(&ax1s);
}

/* Concat in place with symbolic dims: the plan takes the sizes the first
 * run saw. cat = Concat(b, a, c) of Neg, Relu and Abs of x [N, 2, H, W]
 * along the channels, then Sigmoid; a is read again after the Concat (so
 * it must not be a part: a run at other shapes moves parts). Runs at the
 * planned shape, smaller, larger, batch 2 and the planned shape again
 * must all equal the plain ops. */
static void test_concat_in_place_symbolic(void) {
  er_pbw g = {0}, m = {0}, ax1 = {0};
  const int64_t xd[4] = {-1, 2, -2, -3};
  tb_attr_int(&ax1, "axis", 1);
  tb_node(&g, "Abs", "abs", (const char *const[]){"x", NULL}, (const char *const[]){"c", NULL}, NULL);
  tb_node(&g, "Relu", "relu", (const char *const[]){"x", NULL}, (const char *const[]){"a", NULL}, NULL);
  tb_node(&g, "Neg", "neg", (const char *const[]){"x", NULL}, (const char *const[]){"b", NULL}, NULL);
  tb_node(&g, "Concat", "cat", (const char *const[]){"b", "a", "c", NULL}, (const char *const[]){"cat", NULL}, &ax1);
  tb_node(&g, "Sigmoid", "sig", (const char *const[]){"cat", NULL}, (const char *const[]){"y1", NULL}, NULL);
  tb_node(&g, "Add", "add", (const char *const[]){"a", "x", NULL}, (const char *const[]){"y2", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 4, xd);
  tb_graph_output(&g, "y1", 1, -1, NULL);
  tb_graph_output(&g, "y2", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  er_session *s = NULL;
  if (model) CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
  /* [2,2,3,4] fits the slots [1,2,5,5] left: its parts are made in place
   * but belong elsewhere (two rows), which the Concat must see. */
  static const int64_t shapes[][4] = {{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 2, 2}, {1, 2, 5, 5},
                                      {2, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 1, 7}};
  for (size_t run = 0; s && run < ER_ARRAY_LEN(shapes); run++) {
    const int64_t *d = shapes[run];
    const int64_t n = d[0], hw = d[2] * d[3], count = n * 2 * hw;
    float xv[128];
    for (int64_t i = 0; i < count; i++) xv[i] = (float)((i * 5 + (int64_t)run * 3) % 13) - 6.0f;
    er_tensor *x = NULL, *y[2] = {NULL, NULL};
    er_tensor_wrap(ER_DTYPE_FLOAT, 4, d, xv, (size_t)count * sizeof *xv, &x);
    er_named_tensor in = {"x", x};
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, 2, y), ER_STATUS_OK);
    if (y[0] && y[1]) {
      const float *y1 = er_tensor_cdata(y[0]), *y2 = er_tensor_cdata(y[1]);
      CHECK(er_tensor_dims(y[0])[0] == n && er_tensor_dims(y[0])[1] == 6);
      int bad = 0;
      for (int64_t b = 0; b < n; b++)
        for (int64_t i = 0; i < 2 * hw; i++) {
          float xi = xv[b * 2 * hw + i], a = xi > 0 ? xi : 0.0f;
          float want[3] = {1.0f / (1.0f + expf(xi)), 1.0f / (1.0f + expf(-a)), 1.0f / (1.0f + expf(-fabsf(xi)))};
          for (int k = 0; k < 3; k++)
            if (fabsf(y1[b * 6 * hw + k * 2 * hw + i] - want[k]) > 1e-6f) bad++;
          if (y2[b * 2 * hw + i] != a + xi) bad++;
        }
      CHECK(bad == 0);
      if (bad) fprintf(stderr, "  run %zu at [%lld,2,%lld,%lld]: %d wrong\n", run, (long long)n, (long long)d[2],
                       (long long)d[3], bad);
    }
    for (int k = 0; k < 2; k++) er_tensor_free(y[k]);
    er_tensor_free(x);
  }
  er_session_free(s);
  er_model_free(model);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&ax1);
}

/* ---- thread pool -------------------------------------------------------- */

/* Chunks of a parallel loop are claimed by whichever thread is free (so a
 * late worker costs parallelism, not time), yet each index must run
 * exactly once, in the chunk the static split gives it, whoever runs it and
 * however the timing falls. Chunks sleep now and then to shuffle who
 * claims what; two callers share one pool to cover the busy path. */
enum { POOL_MAX_N = 96 };

typedef struct pool_probe {
  atomic_int hits[POOL_MAX_N];
  atomic_int bad_bounds;
  int64_t n;
  int chunks;
  unsigned seed;
} pool_probe;

static void pool_probe_fn(void *arg, int64_t begin, int64_t end) {
  pool_probe *p = arg;
  /* The static split: chunk c is [n c / chunks, n (c + 1) / chunks). */
  bool found = false;
  for (int c = 0; c < p->chunks && !found; c++)
    found = begin == p->n * c / p->chunks && end == p->n * (c + 1) / p->chunks;
  if (!found) atomic_fetch_add(&p->bad_bounds, 1);
  for (int64_t i = begin; i < end; i++) atomic_fetch_add(&p->hits[i], 1);
  if ((begin * 7 + p->seed) % 5 == 0) usleep((useconds_t)((begin + p->seed) % 3) * 100);
}

typedef struct pool_caller {
  er_thread_pool *pool;
  int threads, jobs, bad;
  unsigned seed;
} pool_caller;

static void *pool_calls(void *arg) {
  pool_caller *pc = arg;
  for (int j = 0; j < pc->jobs; j++) {
    pool_probe p;
    memset(&p, 0, sizeof p);
    p.n = 1 + (int64_t)((pc->seed * 2654435761u + (unsigned)j * 40503u) % POOL_MAX_N);
    p.chunks = (int)(p.n < pc->threads ? p.n : pc->threads);
    p.seed = pc->seed + (unsigned)j;
    er__parallel_for(pc->pool, p.n, 1, pool_probe_fn, &p);
    if (atomic_load(&p.bad_bounds)) pc->bad++;
    for (int64_t i = 0; i < p.n; i++)
      if (atomic_load(&p.hits[i]) != 1) pc->bad++;
  }
  return NULL;
}

static void test_pool_chunks(void) {
  for (int threads = 2; threads <= 4; threads++) {
    er_thread_pool *pool = NULL;
    CHECK_STATUS(er__pool_create(threads, &pool), ER_STATUS_OK);
    if (!pool) return;
    pool_caller a = {pool, threads, 300, 0, 1}, b = {pool, threads, 300, 0, 7};
    pthread_t t;
    pthread_create(&t, NULL, pool_calls, &b);
    pool_calls(&a);
    pthread_join(t, NULL);
    CHECK(a.bad == 0 && b.bad == 0);
    er__pool_free(pool);
  }
}

/* Runs y = x * w (w a constant [1] of 1.0) over x [2, 65536] holding
 * subnormals in every 256-element run, with `threads` workers, and counts
 * the outputs that kept a subnormal. The caller's floating-point mode must
 * be the same after the run. */
static int64_t subnormals_kept(er_model *model, int threads, bool keep, bool reference) {
  er_session_options o;
  er_session_options_init(&o);
  o.threads = threads;
  o.keep_denormals = keep;
  o.force_reference = reference;
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(model, &o, &s), ER_STATUS_OK);
  if (!s) return -1;
  const int64_t xd[2] = {2, 65536};
  float *xv = malloc(2 * 65536 * sizeof *xv);
  for (int64_t i = 0; i < 2 * 65536; i++) xv[i] = i % 256 == 3 ? 1e-40f * (float)(1 + i % 7) : 0.25f;
  er_tensor *x = NULL, *y = NULL;
  er_tensor_wrap(ER_DTYPE_FLOAT, 2, xd, xv, 2 * 65536 * sizeof *xv, &x);
  er_named_tensor in = {"x", x};
  uint64_t mode = er__fp_mode_get();
  CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &y), ER_STATUS_OK);
  CHECK(er__fp_mode_get() == mode);
  int64_t kept = 0, wrong = 0;
  if (y) {
    const float *yv = er_tensor_cdata(y);
    for (int64_t i = 0; i < 2 * 65536; i++) {
      if (i % 256 != 3) wrong += yv[i] != 0.25f;
      else if (yv[i] == xv[i]) kept++;
      else wrong += yv[i] != 0; /* neither kept nor flushed */
    }
  }
  CHECK(wrong == 0);
  er_tensor_free(y);
  er_tensor_free(x);
  free(xv);
  er_session_free(s);
  return kept;
}

/* Sessions flush subnormal floats to zero on every thread of a run
 * (er_session_options.keep_denormals), and keep them when asked or when
 * running the reference kernels. */
static void test_subnormals_flushed(void) {
  if (er__fp_mode_flushing(er__fp_mode_get()) == er__fp_mode_get()) {
    printf("  (skipped: no flush-to-zero control on this architecture)\n");
    return;
  }
  er_pbw g = {0}, m = {0}, w = {0};
  const float one = 1.0f;
  const int64_t wd[1] = {1}, xd[2] = {2, 65536};
  tb_tensor(&w, "w", 1, 1, wd, &one, sizeof one);
  tb_graph_initializer(&g, &w);
  tb_node(&g, "Mul", "mul", (const char *const[]){"x", "w", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 2, xd);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  const int64_t all = 2 * 65536 / 256;
  for (int threads = 1; model && threads <= 3; threads++) {
    CHECK(subnormals_kept(model, threads, false, false) == 0);
    CHECK(subnormals_kept(model, threads, true, false) == all);
    CHECK(subnormals_kept(model, threads, false, true) == all);
  }
  er_model_free(model);
  er__pbw_free(&w);
  er__pbw_free(&g);
  er__pbw_free(&m);
}

/* Runs round to nearest even whatever rounding the caller set (the
 * optimized kernels' float-to-integer conversions round as the mode says),
 * with or without flushing, on every thread; the caller's mode is
 * restored. x / 3 rounds down towards zero and up to nearest. */
static void test_runs_round_to_nearest(void) {
#if defined(FE_TOWARDZERO)
  er_pbw g = {0}, m = {0}, w = {0};
  const float three = 3.0f;
  const int64_t wd[1] = {1}, xd[1] = {4096};
  tb_tensor(&w, "w", 1, 1, wd, &three, sizeof three);
  tb_graph_initializer(&g, &w);
  tb_node(&g, "Div", "div", (const char *const[]){"x", "w", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 1, xd);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  float xv[4096];
  for (int i = 0; i < 4096; i++) xv[i] = 1.0f + (float)(i % 7);
  volatile float divisor = 3.0f;
  for (int threads = 1; model && threads <= 3; threads++)
    for (int keep = 0; keep <= 1; keep++) {
      er_session_options o;
      er_session_options_init(&o);
      o.threads = threads;
      o.keep_denormals = keep;
      er_session *s = NULL;
      CHECK_STATUS(er_session_create(model, &o, &s), ER_STATUS_OK);
      er_tensor *x = NULL, *y = NULL;
      er_tensor_wrap(ER_DTYPE_FLOAT, 1, xd, xv, sizeof xv, &x);
      er_named_tensor in = {"x", x};
      int prev = fegetround();
      CHECK(fesetround(FE_TOWARDZERO) == 0);
      uint64_t mode = er__fp_mode_get();
      CHECK_STATUS(s ? er_session_run(s, &in, 1, NULL, 1, &y) : ER_STATUS_INVALID_ARGUMENT, ER_STATUS_OK);
      CHECK(er__fp_mode_get() == mode);
      fesetround(prev);
      int64_t wrong = 0;
      for (int i = 0; y && i < 4096; i++) wrong += ((const float *)er_tensor_cdata(y))[i] != xv[i] / divisor;
      CHECK(y && wrong == 0);
      er_tensor_free(y);
      er_tensor_free(x);
      er_session_free(s);
    }
  er_model_free(model);
  er__pbw_free(&w);
  er__pbw_free(&g);
  er__pbw_free(&m);
#else
  printf("  (skipped: no FE_TOWARDZERO on this platform)\n");
#endif
}

/* Pad with trailing axes left alone (oww_embedding pads W of [N, H, W, 1]),
 * which run as rows of whole trailing blocks: every mode, pads and a crop
 * on the leading axes, against the index rule computed here. */
static int64_t pad_index(const char *mode, int64_t o, int64_t before, int64_t len) {
  int64_t i = o - before;
  if (i >= 0 && i < len) return i;
  if (strcmp(mode, "constant") == 0) return -1;
  if (strcmp(mode, "edge") == 0) return i < 0 ? 0 : len - 1;
  int64_t period = 2 * (len - 1); /* reflect */
  i = ((i % period) + period) % period;
  return i >= len ? period - i : i;
}

static void test_pad_trailing_axes(void) {
  static const char *const modes[] = {"constant", "edge", "reflect"};
  const int64_t xd[4] = {2, 3, 4, 2}, pd[1] = {8};
  /* begin: axis 1 by 2, axis 2 by 1; end: axis 1 by 1, axis 2 by 2. */
  const int64_t pads[8] = {0, 2, 1, 0, 0, 1, 2, 0};
  const int64_t yd[4] = {2, 6, 7, 2};
  float xv[48];
  for (int i = 0; i < 48; i++) xv[i] = (float)i;
  for (int mi = 0; mi < 3; mi++) {
    er_pbw g = {0}, m = {0}, pt = {0}, cv = {0}, attrs = {0};
    const float seven = 7.0f;
    tb_tensor(&pt, "pads", 7, 1, pd, pads, sizeof pads);
    tb_tensor(&cv, "cv", 1, 0, NULL, &seven, sizeof seven);
    tb_graph_initializer(&g, &pt);
    tb_graph_initializer(&g, &cv);
    tb_attr_string(&attrs, "mode", modes[mi]);
    tb_node(&g, "Pad", "pad", (const char *const[]){"x", "pads", mi == 0 ? "cv" : "", NULL},
            (const char *const[]){"y", NULL}, &attrs);
    tb_graph_input(&g, "x", 1, 4, xd);
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *model = NULL;
    er_session *s = NULL;
    er_tensor *x = NULL, *y = NULL;
    CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
    CHECK_STATUS(model ? er_session_create(model, NULL, &s) : ER_STATUS_INVALID_ARGUMENT, ER_STATUS_OK);
    er_tensor_wrap(ER_DTYPE_FLOAT, 4, xd, xv, sizeof xv, &x);
    er_named_tensor in = {"x", x};
    CHECK_STATUS(s ? er_session_run(s, &in, 1, NULL, 1, &y) : ER_STATUS_INVALID_ARGUMENT, ER_STATUS_OK);
    int64_t wrong = 0;
    for (int64_t a = 0; y && a < yd[0]; a++)
      for (int64_t b = 0; b < yd[1]; b++)
        for (int64_t c = 0; c < yd[2]; c++)
          for (int64_t d = 0; d < yd[3]; d++) {
            int64_t sb = pad_index(modes[mi], b, 2, 3), sc = pad_index(modes[mi], c, 1, 4);
            float want = sb < 0 || sc < 0 ? seven : xv[((a * 3 + sb) * 4 + sc) * 2 + d];
            wrong += ((const float *)er_tensor_cdata(y))[((a * 6 + b) * 7 + c) * 2 + d] != want;
          }
    CHECK(y && er_tensor_count(y) == 2 * 6 * 7 * 2 && wrong == 0);
    er_tensor_free(y);
    er_tensor_free(x);
    er_session_free(s);
    er_model_free(model);
    er__pbw_free(&attrs);
    er__pbw_free(&cv);
    er__pbw_free(&pt);
    er__pbw_free(&g);
    er__pbw_free(&m);
  }
}

/* ---- partly known shape vectors ------------------------------------------ */

/* A shape computed from Shape at run time still tells its known entries at
 * load: Resize(x, sizes = Concat(Shape(x)[0:2], Shape(x)[2:4] * 2)) keeps
 * x's 6 channels, and so do a Reshape, an Expand and a ConstantOfShape fed
 * by Gather and Cast of the same Shape. A Resize whose aspect-ratio policy
 * rescales every axis (not_larger) leaves the channels unknown. Each
 * output's run-time shape must match what load said. */
static void test_shape_values(void) {
  er_pbw g = {0}, m = {0}, t[6] = {{0}}, a_cat = {0}, a_nl = {0}, a_i64 = {0}, a_f32 = {0}, a_nn = {0};
  const int64_t xd[4] = {-1, 6, -2, -3}, one[1] = {1}, three_d[1] = {3};
  const int64_t i0[1] = {0}, i1[1] = {1}, i2[1] = {2}, i4[1] = {4}, i2v = 2, im1[1] = {-1};
  tb_tensor(&t[0], "zero", 7, 1, one, i0, sizeof i0);
  tb_tensor(&t[1], "two", 7, 1, one, i2, sizeof i2);
  tb_tensor(&t[2], "four", 7, 1, one, i4, sizeof i4);
  tb_tensor(&t[3], "k2", 7, 0, NULL, &i2v, sizeof i2v);
  tb_tensor(&t[4], "m1", 7, 1, one, im1, sizeof im1);
  tb_tensor(&t[5], "v3", 1, 1, three_d, (const float[]){1.0f, 2.0f, 3.0f}, 12);
  for (int k = 0; k < 6; k++) tb_graph_initializer(&g, &t[k]);
  tb_attr_int(&a_cat, "axis", 0);
  tb_attr_string(&a_nl, "keep_aspect_ratio_policy", "not_larger");
  tb_attr_string(&a_nn, "mode", "nearest");
  tb_attr_int(&a_i64, "to", 7);
  tb_attr_int(&a_f32, "to", 1);
  tb_node(&g, "Shape", "shape", (const char *const[]){"x", NULL}, (const char *const[]){"s", NULL}, NULL);
  tb_node(&g, "Slice", "nc", (const char *const[]){"s", "zero", "two", NULL}, (const char *const[]){"nc", NULL}, NULL);
  tb_node(&g, "Slice", "hw", (const char *const[]){"s", "two", "four", NULL}, (const char *const[]){"hw", NULL}, NULL);
  tb_node(&g, "Mul", "hw2", (const char *const[]){"hw", "k2", NULL}, (const char *const[]){"hw2", NULL}, NULL);
  tb_node(&g, "Concat", "sizes", (const char *const[]){"nc", "hw2", NULL}, (const char *const[]){"sizes", NULL}, &a_cat);
  tb_node(&g, "Resize", "up", (const char *const[]){"x", "", "", "sizes", NULL}, (const char *const[]){"y_up", NULL},
          &a_nn);
  tb_node(&g, "Resize", "fit", (const char *const[]){"x", "", "", "sizes", NULL}, (const char *const[]){"y_fit", NULL},
          &a_nl);
  /* [C, -1] through a float round trip of Shape(x)[1]. */
  tb_node(&g, "Gather", "c", (const char *const[]){"s", "one_i", NULL}, (const char *const[]){"c", NULL}, NULL);
  tb_node(&g, "Cast", "cf", (const char *const[]){"c", NULL}, (const char *const[]){"cf", NULL}, &a_f32);
  tb_node(&g, "Cast", "ci", (const char *const[]){"cf", NULL}, (const char *const[]){"ci", NULL}, &a_i64);
  tb_node(&g, "Concat", "rs", (const char *const[]){"ci", "m1", NULL}, (const char *const[]){"rs", NULL}, &a_cat);
  tb_node(&g, "Reshape", "flat", (const char *const[]){"x", "rs", NULL}, (const char *const[]){"y_flat", NULL}, NULL);
  /* Expand of a [3] vector by [C, 1, 1]: [C, 1, 3]. */
  tb_node(&g, "Concat", "es", (const char *const[]){"ci", "one_v", "one_v", NULL}, (const char *const[]){"es", NULL},
          &a_cat);
  tb_node(&g, "Expand", "ex", (const char *const[]){"v3", "es", NULL}, (const char *const[]){"y_ex", NULL}, NULL);
  /* ConstantOfShape([C, H]). */
  tb_node(&g, "Gather", "h", (const char *const[]){"s", "two_i", NULL}, (const char *const[]){"h", NULL}, NULL);
  tb_node(&g, "Concat", "cs", (const char *const[]){"c", "h", NULL}, (const char *const[]){"cs", NULL}, &a_cat);
  tb_node(&g, "ConstantOfShape", "fill", (const char *const[]){"cs", NULL}, (const char *const[]){"y_fill", NULL},
          NULL);
  {
    er_pbw oi = {0}, ti = {0}, ov = {0};
    tb_tensor(&oi, "one_i", 7, 1, one, i1, sizeof i1);
    tb_tensor(&ti, "two_i", 7, 1, one, i2, sizeof i2);
    tb_tensor(&ov, "one_v", 7, 1, one, (const int64_t[]){1}, 8);
    tb_graph_initializer(&g, &oi);
    tb_graph_initializer(&g, &ti);
    tb_graph_initializer(&g, &ov);
    er__pbw_free(&oi);
    er__pbw_free(&ti);
    er__pbw_free(&ov);
  }
  tb_graph_input(&g, "x", 1, 4, xd);
  static const char *const outs[] = {"y_up", "y_fit", "y_flat", "y_ex", "y_fill"};
  for (int k = 0; k < 5; k++) tb_graph_output(&g, outs[k], 1, -1, NULL);
  tb_model(&m, 8, 18, &g);
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  /* What load knows: rank, then dims (-1 unknown). */
  static const int64_t want[5][5] = {
      {4, -1, 6, -1, -1}, {4, -1, -1, -1, -1}, {2, 6, -1, 0, 0}, {3, 6, 1, 3, 0}, {2, 6, -1, 0, 0}};
  for (size_t k = 0; model && k < 5; k++) {
    er_value_info info;
    CHECK_STATUS(er_model_output_info(model, k, &info), ER_STATUS_OK);
    bool ok = info.rank == want[k][0];
    for (int d = 0; ok && d < info.rank; d++) ok = info.dims[d] == want[k][1 + d];
    CHECK(ok);
    if (!ok) {
      fprintf(stderr, "  %s: rank %d dims", outs[k], info.rank);
      for (int d = 0; d < info.rank; d++) fprintf(stderr, " %lld", (long long)info.dims[d]);
      fprintf(stderr, "\n");
    }
  }
  er_session *sess = NULL;
  if (model) CHECK_STATUS(er_session_create(model, NULL, &sess), ER_STATUS_OK);
  const int64_t rd[4] = {2, 6, 3, 5};
  float xv[180];
  for (int i = 0; i < 180; i++) xv[i] = (float)i;
  er_tensor *x = NULL, *y[5] = {NULL};
  er_tensor_wrap(ER_DTYPE_FLOAT, 4, rd, xv, sizeof xv, &x);
  er_named_tensor in = {"x", x};
  if (sess) CHECK_STATUS(er_session_run(sess, &in, 1, NULL, 5, y), ER_STATUS_OK);
  static const int64_t got_want[5][5] = {
      {4, 2, 6, 6, 10}, {4, 2, 6, 3, 5}, {2, 6, 30, 0, 0}, {3, 6, 1, 3, 0}, {2, 6, 3, 0, 0}};
  for (int k = 0; sess && k < 5; k++) {
    bool ok = y[k] && er_tensor_rank(y[k]) == got_want[k][0];
    for (int d = 0; ok && d < got_want[k][0]; d++) ok = er_tensor_dims(y[k])[d] == got_want[k][1 + d];
    CHECK(ok);
  }
  /* Nearest 2x: y_up[b, c, i, j] = x[b, c, i / 2, j / 2]. */
  if (y[0]) {
    const float *yv = er_tensor_cdata(y[0]);
    int bad = 0;
    for (int b = 0; b < 2; b++)
      for (int c = 0; c < 6; c++)
        for (int i = 0; i < 6; i++)
          for (int j = 0; j < 10; j++)
            bad += yv[((b * 6 + c) * 6 + i) * 10 + j] != xv[((b * 6 + c) * 3 + i / 2) * 5 + j / 2];
    CHECK(bad == 0);
  }
  for (int k = 0; k < 5; k++) er_tensor_free(y[k]);
  er_tensor_free(x);
  er_session_free(sess);
  er_model_free(model);
  for (int k = 0; k < 6; k++) er__pbw_free(&t[k]);
  er__pbw_free(&a_cat);
  er__pbw_free(&a_nl);
  er__pbw_free(&a_nn);
  er__pbw_free(&a_i64);
  er__pbw_free(&a_f32);
  er__pbw_free(&g);
  er__pbw_free(&m);

  /* Hostile Slice steps on a shape vector load cleanly (the sanitizer
   * build checks the index arithmetic): the largest and smallest steps
   * from the second and last entries. */
  static const int64_t steps[2][3] = {{1, 8, INT64_MAX}, {3, -9, INT64_MIN}};
  for (int k = 0; k < 2; k++) {
    er_pbw g2 = {0}, m2 = {0}, st = {0}, en = {0}, sp = {0};
    tb_tensor(&st, "st", 7, 1, one, &steps[k][0], 8);
    tb_tensor(&en, "en", 7, 1, one, &steps[k][1], 8);
    tb_tensor(&sp, "sp", 7, 1, one, &steps[k][2], 8);
    tb_graph_initializer(&g2, &st);
    tb_graph_initializer(&g2, &en);
    tb_graph_initializer(&g2, &sp);
    tb_node(&g2, "Shape", "shape", (const char *const[]){"x", NULL}, (const char *const[]){"s", NULL}, NULL);
    tb_node(&g2, "Slice", "sl", (const char *const[]){"s", "st", "en", "", "sp", NULL},
            (const char *const[]){"v", NULL}, NULL);
    tb_node(&g2, "ConstantOfShape", "fill", (const char *const[]){"v", NULL}, (const char *const[]){"y", NULL},
            NULL);
    tb_graph_input(&g2, "x", 1, 4, xd);
    tb_graph_output(&g2, "y", 1, -1, NULL);
    tb_model(&m2, 8, 18, &g2);
    er_model *hm = NULL;
    er_status hs = er_model_load_buffer(m2.buf, m2.len, NULL, NULL, &hm);
    CHECK(hs == ER_STATUS_OK || er_last_error()[0] != '\0');
    er_value_info info;
    /* One entry each: x's 6 channels, then its batch (unknown). */
    if (hm) CHECK(er_model_output_info(hm, 0, &info) == ER_STATUS_OK && info.rank == 1 && info.dims[0] == (k ? -1 : 6));
    er_model_free(hm);
    er__pbw_free(&st);
    er__pbw_free(&en);
    er__pbw_free(&sp);
    er__pbw_free(&g2);
    er__pbw_free(&m2);
  }
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"status_names", test_status_names},
      {"pad_trailing_axes", test_pad_trailing_axes},
      {"shape_values", test_shape_values},
      {"error_is_per_thread", test_error_is_per_thread},
      {"half", test_half},
      {"float8", test_float8},
      {"load_store", test_load_store},
      {"varint", test_varint},
      {"pb_fields", test_pb_fields},
      {"shape_count", test_shape_count},
      {"tensor_api", test_tensor_api},
      {"tensor_files", test_tensor_files},
      {"model_info", test_model_info},
      {"session_api", test_session_api},
      {"duplicate_graph_outputs", test_duplicate_graph_outputs},
      {"concurrent_runs", test_concurrent_runs},
      {"fix_dims", test_fix_dims},
      {"views_share_memory", test_views_share_memory},
      {"concat_in_place", test_concat_in_place},
      {"concat_in_place_symbolic", test_concat_in_place_symbolic},
      {"pool_chunks", test_pool_chunks},
      {"subnormals_flushed", test_subnormals_flushed},
      {"runs_round_to_nearest", test_runs_round_to_nearest},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
