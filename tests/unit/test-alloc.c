/* test-alloc.c - "a run allocates nothing": with static shapes and outputs
 * written into caller tensors (er_session_run_into), steady-state runs make
 * no heap allocation at all. Proven by counting every malloc, calloc,
 * realloc and posix_memalign of the process (glibc lets the program replace
 * them; the counting versions forward to glibc's own). Sanitizer builds
 * replace malloc themselves, so there the test is skipped and says so. */
#include <stdlib.h>

#include "harness.h"
#include "onnx-builder.h"

#ifndef ER_SANITIZE
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile long allocations;

void *malloc(size_t n) {
  allocations++;
  return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
  allocations++;
  return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
  allocations++;
  return __libc_realloc(p, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
  allocations++;
  void *p = __libc_memalign(align, n);
  if (!p) return 12; /* ENOMEM */
  *out = p;
  return 0;
}
void *aligned_alloc(size_t align, size_t n) {
  allocations++;
  return __libc_memalign(align, n);
}
void free(void *p) { __libc_free(p); }

/* Runs a loaded model a few times and checks the later runs allocate
 * nothing. */
static void check_model(er_model *m, const char *what) {
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, NULL, &s), ER_STATUS_OK);
  size_t n_in = er_model_input_count(m), n_out = er_model_output_count(m);
  er_tensor *ins[8] = {0}, *outs[8] = {0};
  er_named_tensor named[8];
  for (size_t i = 0; i < n_in && i < 8; i++) {
    er_value_info info;
    er_model_input_info(m, i, &info);
    int64_t dims[ER_MAX_RANK];
    for (int d = 0; d < info.rank; d++) dims[d] = info.dims[d] < 0 ? 1 : info.dims[d];
    er_tensor_create(info.dtype, info.rank, dims, &ins[i]);
    float *v = er_tensor_data(ins[i]);
    for (int64_t k = 0; info.dtype == ER_DTYPE_FLOAT && k < er_tensor_count(ins[i]); k++) v[k] = (float)(k % 7) - 3;
    named[i] = (er_named_tensor){info.name, ins[i]};
  }
  /* The first run shows the output shapes; make the caller's tensors. */
  er_tensor *first[8] = {0};
  CHECK_STATUS(er_session_run(s, named, n_in, NULL, n_out, first), ER_STATUS_OK);
  for (size_t i = 0; i < n_out && i < 8 && first[i]; i++)
    er_tensor_create(er_tensor_dtype(first[i]), er_tensor_rank(first[i]), er_tensor_dims(first[i]), &outs[i]);
  for (int warm = 0; warm < 2; warm++) CHECK_STATUS(er_session_run_into(s, named, n_in, NULL, n_out, outs), ER_STATUS_OK);
  long before = allocations;
  for (int it = 0; it < 5; it++) CHECK_STATUS(er_session_run_into(s, named, n_in, NULL, n_out, outs), ER_STATUS_OK);
  long made = allocations - before;
  if (made) fprintf(stderr, "%s: %ld allocations in 5 runs\n", what, made);
  CHECK(made == 0);
  /* Same outputs as the allocating path. */
  for (size_t i = 0; i < n_out && i < 8 && first[i]; i++)
    CHECK(memcmp(er_tensor_cdata(first[i]), er_tensor_cdata(outs[i]), er_tensor_nbytes(outs[i])) == 0);
  er_session_stats st;
  er_session_stats_get(s, &st);
  CHECK(st.arena_bytes > 0);
  for (size_t i = 0; i < 8; i++) {
    er_tensor_free(ins[i]);
    er_tensor_free(outs[i]);
    er_tensor_free(first[i]);
  }
  er_session_free(s);
}

/* Elementwise and layout ops, whose reference kernels need no scratch:
 * x [2,3,8] -> Mul W -> Add B -> Relu -> Sigmoid -> Transpose -> Concat
 * with itself -> Reshape -> y. */
static void test_planned_graph(void) {
  er_pbw g = {0}, m = {0}, tp = {0}, cc = {0};
  const int64_t x[3] = {2, 3, 8}, w[1] = {8};
  float wv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  er_pbw wt = {0}, bt = {0}, st = {0};
  tb_tensor(&wt, "W", 1, 1, w, wv, sizeof wv);
  tb_tensor(&bt, "B", 1, 1, w, wv, sizeof wv);
  const int64_t sd[1] = {2}, sv[2] = {6, 16};
  tb_tensor(&st, "S", 7, 1, sd, sv, sizeof sv);
  tb_graph_initializer(&g, &wt);
  tb_graph_initializer(&g, &bt);
  tb_graph_initializer(&g, &st);
  tb_attr_ints(&tp, "perm", (const int64_t[]){1, 0, 2}, 3);
  tb_attr_int(&cc, "axis", 2);
  tb_node(&g, "Mul", "mul", (const char *const[]){"x", "W", NULL}, (const char *const[]){"a", NULL}, NULL);
  tb_node(&g, "Add", "add", (const char *const[]){"a", "B", NULL}, (const char *const[]){"b", NULL}, NULL);
  tb_node(&g, "Relu", "relu", (const char *const[]){"b", NULL}, (const char *const[]){"c", NULL}, NULL);
  tb_node(&g, "Sigmoid", "sig", (const char *const[]){"c", NULL}, (const char *const[]){"d", NULL}, NULL);
  tb_node(&g, "Transpose", "tr", (const char *const[]){"d", NULL}, (const char *const[]){"e", NULL}, &tp);
  tb_node(&g, "Concat", "cat", (const char *const[]){"e", "e", NULL}, (const char *const[]){"f", NULL}, &cc);
  tb_node(&g, "Reshape", "rs", (const char *const[]){"f", "S", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 3, x);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  if (model) check_model(model, "planned graph");
  er_model_free(model);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&tp);
  er__pbw_free(&cc);
  er__pbw_free(&wt);
  er__pbw_free(&bt);
  er__pbw_free(&st);
}

/* com.microsoft DynamicQuantizeLSTM (bidirectional, int8 weights, per
 * direction scales): the kernel quantizes X and every step's hidden state
 * and runs its products on the integer GEMM, all in the run context's
 * scratch. x [5,2,8], hidden 8; Y_h through a Relu (an arena value). */
static void test_dynamic_quantize_lstm(void) {
  enum { S = 5, N = 2, I = 8, H = 8, D = 2 };
  int8_t wv[D * I * 4 * H], rv[D * H * 4 * H], zv[D] = {0, 0};
  float bv[D * 8 * H], sv[D] = {0.02f, 0.03f};
  for (size_t i = 0; i < sizeof wv; i++) wv[i] = (int8_t)((int)(i * 37 % 255) - 127);
  for (size_t i = 0; i < sizeof rv; i++) rv[i] = (int8_t)((int)(i * 53 % 251) - 125);
  for (size_t i = 0; i < ER_ARRAY_LEN(bv); i++) bv[i] = (float)((int)(i % 9) - 4) * 0.05f;
  er_pbw g = {0}, m = {0}, at = {0}, w = {0}, r = {0}, b = {0}, ws = {0}, wz = {0}, rs = {0}, rz = {0};
  const int64_t xd[3] = {S, N, I}, wd[3] = {D, I, 4 * H}, rd[3] = {D, H, 4 * H}, bd[2] = {D, 8 * H}, sd[1] = {D};
  tb_tensor(&w, "W", 3, 3, wd, wv, sizeof wv);
  tb_tensor(&r, "R", 3, 3, rd, rv, sizeof rv);
  tb_tensor(&b, "B", 1, 2, bd, bv, sizeof bv);
  tb_tensor(&ws, "W_scale", 1, 1, sd, sv, sizeof sv);
  tb_tensor(&wz, "W_zp", 3, 1, sd, zv, sizeof zv);
  tb_tensor(&rs, "R_scale", 1, 1, sd, sv, sizeof sv);
  tb_tensor(&rz, "R_zp", 3, 1, sd, zv, sizeof zv);
  const er_pbw *inits[] = {&w, &r, &b, &ws, &wz, &rs, &rz};
  for (size_t i = 0; i < ER_ARRAY_LEN(inits); i++) tb_graph_initializer(&g, inits[i]);
  tb_attr_int(&at, "hidden_size", H);
  er_pbw dir = {0};
  tb_str(&dir, 1, "direction");
  tb_str(&dir, 4, "bidirectional");
  er__pbw_varint_field(&dir, 20, 3); /* AttributeProto.type = STRING */
  tb_embed(&at, 5, &dir);
  tb_node_domain(&g, "DynamicQuantizeLSTM", "com.microsoft", "dqlstm",
                 (const char *const[]){"x", "W", "R", "B", "", "", "", "", "W_scale", "W_zp", "R_scale", "R_zp", NULL},
                 (const char *const[]){"y", "y_h", "y_c", NULL}, &at);
  tb_node(&g, "Relu", "relu", (const char *const[]){"y_h", NULL}, (const char *const[]){"h", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 3, xd);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_graph_output(&g, "h", 1, -1, NULL);
  tb_graph_output(&g, "y_c", 1, -1, NULL);
  tb_model_domain(&m, 8, 13, "com.microsoft", 1, &g);
  er_model *model = NULL;
  er_status st = er_model_load_buffer(m.buf, m.len, NULL, NULL, &model);
  if (st != ER_STATUS_OK) fprintf(stderr, "DynamicQuantizeLSTM: %s\n", er_last_error());
  CHECK_STATUS(st, ER_STATUS_OK);
  if (model) check_model(model, "DynamicQuantizeLSTM");
  er_model_free(model);
  er_pbw *all[] = {&g, &m, &at, &w, &r, &b, &ws, &wz, &rs, &rz, &dir};
  for (size_t i = 0; i < ER_ARRAY_LEN(all); i++) er__pbw_free(all[i]);
}

/* Real and generated models from files: the optimized float kernels
 * (convolutions, pools, GEMM, attention, recurrences) and the integer
 * kernels of QDQ and QLinear models. */
static void check_file(const char *path) {
  er_model *model = NULL;
  er_status st = er_model_load_file(path, NULL, &model);
  if (st != ER_STATUS_OK) fprintf(stderr, "%s: %s\n", path, er_last_error());
  CHECK_STATUS(st, ER_STATUS_OK);
  if (model) check_model(model, path);
  er_model_free(model);
}

static void test_repo_models(void) {
  check_file(ER_SOURCE_DIR "/models/digits/model.onnx");
  check_file(ER_SOURCE_DIR "/models/fashion/model.onnx");
}

/* (ctest runs the generator first: the test_models fixture.) */
static void test_generated_models(void) {
  static const char *const names[] = {"qdq_conv",        "qlinear_ops", "resnet_style", "mobilenet_style",
                                      "detector_style",  "transformer_encoder", "lstm", "ocr_crnn"};
  for (size_t i = 0; i < ER_ARRAY_LEN(names); i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.onnx", ER_TEST_MODELS_DIR, names[i]);
    check_file(path);
  }
}

#endif

int main(int argc, char **argv) {
#ifdef ER_SANITIZE
  (void)argc;
  (void)argv;
  printf("skip: the sanitizer runtime owns malloc, so allocations cannot be counted here\n");
  printf("0 passed, 0 failed\n");
  return 0;
#else
  static const er_test_case cases[] = {
      {"planned_graph", test_planned_graph},
      {"repo_models", test_repo_models},
      {"generated_models", test_generated_models},
      {"dynamic_quantize_lstm", test_dynamic_quantize_lstm},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
#endif
}
