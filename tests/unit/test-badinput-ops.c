/* test-badinput-ops.c - bad-input cases 13 and 14 of TESTING.md: attributes
 * that disagree with initializer shapes or are out of range are refused at
 * load time with INVALID_ATTRIBUTE (naming the attribute and the values), and
 * out-of-range indices at run time give OUT_OF_RANGE naming the index. */
#include <stdlib.h>

#include "harness.h"
#include "onnx-builder.h"

static er_status load_expect(const er_pbw *m) {
  er_model *model = NULL;
  er_status st = er_model_load_buffer(m->buf, m->len, NULL, NULL, &model);
  er_model_free(model);
  return st;
}

/* x [1,1,8,8] -> Conv(W [4,1,wk,wk]) -> y, with extra attributes. */
static er_status conv_case(int wk, const er_pbw *attrs) {
  er_pbw g = {0}, m = {0}, w = {0};
  const int64_t xd[4] = {1, 1, 8, 8};
  const int64_t wd[4] = {4, 1, wk, wk};
  float *wdata = calloc((size_t)(4 * wk * wk), sizeof(float));
  tb_tensor(&w, "W", 1, 4, wd, wdata, (size_t)(4 * wk * wk) * sizeof(float));
  tb_graph_initializer(&g, &w);
  tb_node(&g, "Conv", "conv_3", (const char *const[]){"x", "W", NULL}, (const char *const[]){"y", NULL}, attrs);
  tb_graph_input(&g, "x", 1, 4, xd);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_status st = load_expect(&m);
  free(wdata);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&w);
  return st;
}

static void test_conv_attributes(void) {
  er_pbw a = {0};
  CHECK_STATUS(conv_case(3, NULL), ER_STATUS_OK);
  /* kernel_shape disagrees with the weight initializer. */
  tb_attr_ints(&a, "kernel_shape", (const int64_t[]){3, 3}, 2);
  CHECK_STATUS(conv_case(5, &a), ER_STATUS_INVALID_ATTRIBUTE);
  CHECK_MSG("conv_3");
  CHECK_MSG("kernel_shape");
  er__pbw_free(&a);
  /* Zero and negative strides, dilations, group. */
  const char *names[] = {"strides", "dilations"};
  for (int k = 0; k < 2; k++) {
    er_pbw b = {0};
    tb_attr_ints(&b, names[k], (const int64_t[]){1, 0}, 2);
    CHECK_STATUS(conv_case(3, &b), ER_STATUS_INVALID_ATTRIBUTE);
    CHECK_MSG(names[k]);
    er__pbw_free(&b);
    er_pbw c = {0};
    tb_attr_ints(&c, names[k], (const int64_t[]){-1, 1}, 2);
    CHECK_STATUS(conv_case(3, &c), ER_STATUS_INVALID_ATTRIBUTE);
    er__pbw_free(&c);
  }
  er_pbw gz = {0};
  tb_attr_int(&gz, "group", 0);
  CHECK_STATUS(conv_case(3, &gz), ER_STATUS_INVALID_ATTRIBUTE);
  CHECK_MSG("group");
  er__pbw_free(&gz);
  /* Pads of the wrong length. */
  er_pbw p = {0};
  tb_attr_ints(&p, "pads", (const int64_t[]){1, 1, 1}, 3);
  CHECK_STATUS(conv_case(3, &p), ER_STATUS_INVALID_ATTRIBUTE);
  CHECK_MSG("pads");
  er__pbw_free(&p);
}

/* x [2,3] -> op(axis) -> y */
static er_status axis_case(const char *op, int64_t axis, int opset) {
  er_pbw g = {0}, m = {0}, a = {0};
  const int64_t xd[2] = {2, 3};
  tb_attr_int(&a, "axis", axis);
  if (strcmp(op, "Concat") == 0)
    tb_node(&g, op, "n", (const char *const[]){"x", "x", NULL}, (const char *const[]){"y", NULL}, &a);
  else
    tb_node(&g, op, "n", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, &a);
  tb_graph_input(&g, "x", 1, 2, xd);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, opset, &g);
  er_status st = load_expect(&m);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&a);
  return st;
}

static void test_axis_out_of_range(void) {
  const char *ops[] = {"Concat", "Softmax", "Flatten", "LogSoftmax"};
  for (size_t i = 0; i < ER_ARRAY_LEN(ops); i++) {
    CHECK_STATUS(axis_case(ops[i], 1, 13), ER_STATUS_OK);
    CHECK_STATUS(axis_case(ops[i], 5, 13), ER_STATUS_INVALID_ATTRIBUTE);
    CHECK_MSG("axis");
    CHECK_MSG("5");
    CHECK_STATUS(axis_case(ops[i], -4, 13), ER_STATUS_INVALID_ATTRIBUTE);
  }
}

/* x [6] -> Split(split=[2,2]) with n_out outputs. */
static er_status split_case(int n_out, const int64_t *split, int n_split) {
  er_pbw g = {0}, m = {0}, a = {0};
  const int64_t xd[1] = {6};
  const char *outs[5] = {"a", "b", "c", "d", NULL};
  outs[n_out] = NULL;
  tb_attr_ints(&a, "split", split, n_split);
  tb_node(&g, "Split", "split", (const char *const[]){"x", NULL}, outs, &a);
  tb_graph_input(&g, "x", 1, 1, xd);
  for (int i = 0; i < n_out; i++) tb_graph_output(&g, outs[i], 1, -1, NULL);
  tb_model(&m, 8, 11, &g);
  er_status st = load_expect(&m);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&a);
  return st;
}

static void test_split_outputs(void) {
  CHECK_STATUS(split_case(2, (const int64_t[]){3, 3}, 2), ER_STATUS_OK);
  CHECK_STATUS(split_case(3, (const int64_t[]){3, 3}, 2), ER_STATUS_INVALID_ATTRIBUTE);
  CHECK_MSG("split");
  CHECK_STATUS(split_case(2, (const int64_t[]){2, 2}, 2), ER_STATUS_INVALID_ATTRIBUTE);
  CHECK_MSG("6");
}

/* data [4] float, indices [1] int64 (graph input) -> Gather -> y. */
static void test_gather_indices(void) {
  er_pbw g = {0}, m = {0};
  const int64_t dd[1] = {4}, id[1] = {1};
  tb_node(&g, "Gather", "gather", (const char *const[]){"data", "idx", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "data", 1, 1, dd);
  tb_graph_input(&g, "idx", 7, 1, id);
  tb_graph_output(&g, "y", 1, 1, id);
  tb_model(&m, 8, 13, &g);
  er_model *model = NULL;
  er_session *s = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
  float data[4] = {10, 11, 12, 13};
  er_tensor *dt, *it, *y = NULL;
  er_tensor_wrap(ER_DTYPE_FLOAT, 1, dd, data, sizeof data, &dt);
  struct {
    int64_t index;
    er_status want;
    const char *text;
  } cases[] = {
      {-1, ER_STATUS_OK, ""},
      {3, ER_STATUS_OK, ""},
      {-5, ER_STATUS_OUT_OF_RANGE, "-5"},
      {4, ER_STATUS_OUT_OF_RANGE, "index 4"},
      {INT64_MIN, ER_STATUS_OUT_OF_RANGE, "-9223372036854775808"},
      {INT64_MAX, ER_STATUS_OUT_OF_RANGE, "9223372036854775807"},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    int64_t idx = cases[i].index;
    er_tensor_wrap(ER_DTYPE_INT64, 1, id, &idx, sizeof idx, &it);
    er_named_tensor in[2] = {{"data", dt}, {"idx", it}};
    y = NULL;
    CHECK_STATUS(er_session_run(s, in, 2, NULL, 1, &y), cases[i].want);
    if (cases[i].want == ER_STATUS_OK) {
      CHECK(y && ((const float *)er_tensor_cdata(y))[0] == data[(idx + 4) % 4]);
    } else {
      CHECK(y == NULL);
      CHECK_MSG(cases[i].text);
    }
    er_tensor_free(y);
    er_tensor_free(it);
  }
  /* The session still answers the next valid request. */
  int64_t ok_idx = 2;
  er_tensor_wrap(ER_DTYPE_INT64, 1, id, &ok_idx, sizeof ok_idx, &it);
  er_named_tensor in[2] = {{"data", dt}, {"idx", it}};
  CHECK_STATUS(er_session_run(s, in, 2, NULL, 1, &y), ER_STATUS_OK);
  er_tensor_free(y);
  er_tensor_free(it);
  er_tensor_free(dt);
  er_session_free(s);
  er_model_free(model);
  er__pbw_free(&g);
  er__pbw_free(&m);
}

/* What a run computes is held to the loading caller's max_tensor_bytes too
 * (a fuzzed Conv, fuzz/corpus/load/conv-huge-pad-oom, padded a 7x5 input
 * by 14 million and asked for 3.3 GB): LIMIT naming the node and the cap,
 * and the session still serves the next request. */
static void test_runtime_tensor_cap(void) {
  er_pbw g = {0}, m = {0}, w = {0}, a = {0};
  const int64_t xd[4] = {1, 1, 8, 8}, wd[4] = {4, 1, 3, 3};
  float wdata[36] = {0};
  tb_tensor(&w, "W", 1, 4, wd, wdata, sizeof wdata);
  tb_graph_initializer(&g, &w);
  tb_attr_ints(&a, "pads", (const int64_t[]){300, 300, 300, 300}, 4);
  tb_node(&g, "Conv", "wide_pad", (const char *const[]){"x", "W", NULL}, (const char *const[]){"y", NULL}, &a);
  tb_graph_input(&g, "x", 1, 4, xd);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_load_options o;
  er_load_options_init(&o);
  o.max_tensor_bytes = 1 << 20; /* the output is 4 x 606 x 606 floats: 5.9 MB */
  er_model *model = NULL;
  er_session *s = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, &o, &model), ER_STATUS_OK);
  CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
  er_tensor *x = NULL, *y = NULL;
  er_tensor_create(ER_DTYPE_FLOAT, 4, xd, &x);
  er_named_tensor in = {"x", x};
  for (int k = 0; k < 2; k++) {
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &y), ER_STATUS_LIMIT);
    CHECK_MSG("wide_pad");
    CHECK_MSG("max_tensor_bytes");
    CHECK(y == NULL);
  }
  er_tensor_free(x);
  er_session_free(s);
  er_model_free(model);
  /* Under the default cap the same model runs. */
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, NULL, &model), ER_STATUS_OK);
  CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
  er_tensor_create(ER_DTYPE_FLOAT, 4, xd, &x);
  er_named_tensor in2 = {"x", x};
  CHECK_STATUS(er_session_run(s, &in2, 1, NULL, 1, &y), ER_STATUS_OK);
  CHECK(y && er_tensor_count(y) == 4 * 606 * 606);
  er_tensor_free(y);
  er_tensor_free(x);
  er_session_free(s);
  er_model_free(model);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&w);
  er__pbw_free(&a);
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"runtime_tensor_cap", test_runtime_tensor_cap},
      {"conv_attributes", test_conv_attributes},
      {"axis_out_of_range", test_axis_out_of_range},
      {"split_outputs", test_split_outputs},
      {"gather_indices", test_gather_indices},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
