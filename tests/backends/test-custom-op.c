/* test-custom-op.c - custom operators: a new op in the user's domain with a
 * shape rule and a CPU kernel, used in a test model; its CPU kernel as the
 * fallback when the preferred backend lacks it; overriding a standard op
 * on the CPU; and the registration rules. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "edgerun-backend.h"
#include "harness.h"
#include "model-kit.h"

/* com.example.ScaledTanh(x; alpha) = alpha * tanh(x), and a second output
 * (optional) with the row sums of the first: [N, C] -> [N]. */
static atomic_int tanh_calls;

static er_status scaled_tanh_infer(void *user, er_kernel_ctx *ctx) {
  (void)user;
  const er_tensor *x = er_kernel_input(ctx, 0);
  int rank = er_tensor_rank(x);
  if (rank >= 0 && rank != 2) return ER_STATUS_INVALID_SHAPE;  /* core writes the message */
  er_status st = er_kernel_set_output(ctx, 0, er_tensor_dtype(x), rank, er_tensor_dims(x));
  if (st == ER_STATUS_OK && er_kernel_output_count(ctx) > 1)
    st = er_kernel_set_output(ctx, 1, er_tensor_dtype(x), rank < 0 ? -1 : 1, er_tensor_dims(x));
  return st;
}

static er_status scaled_tanh_compute(void *user, er_kernel_ctx *ctx) {
  const float *scale_bias = user;  /* the user pointer reaches the kernel */
  const er_tensor *x = er_kernel_input(ctx, 0);
  er_tensor *y = er_kernel_output(ctx, 0);
  float alpha;
  er_status st = er_node_attr_float(er_kernel_node(ctx), "alpha", 1.0f, &alpha);
  if (st != ER_STATUS_OK) return st;
  const float *xv = er_tensor_cdata(x);
  float *yv = er_tensor_data(y);
  for (int64_t i = 0; i < er_tensor_count(x); i++) yv[i] = alpha * tanhf(xv[i]) + scale_bias[0];
  er_tensor *sums = er_kernel_output(ctx, 1);
  if (sums) {
    const int64_t *d = er_tensor_dims(x);
    float *sv = er_tensor_data(sums);
    for (int64_t r = 0; r < d[0]; r++)
      for (int64_t c = 0; c < d[1]; c++) sv[r] += yv[r * d[1] + c];
  }
  atomic_fetch_add(&tanh_calls, 1);
  return ER_STATUS_OK;
}

static const float bias_zero = 0.0f;

static er_custom_op scaled_tanh_op(const char *backend) {
  er_custom_op op = {0};
  op.abi_version = ER_PLUGIN_ABI_VERSION;
  op.struct_size = sizeof op;
  op.domain = "com.example";
  op.op_type = "ScaledTanh";
  op.backend = backend;
  op.min_inputs = 1;
  op.max_inputs = 1;
  op.min_outputs = 1;
  op.max_outputs = 2;
  op.infer = scaled_tanh_infer;
  op.compute = scaled_tanh_compute;
  op.user = (void *)&bias_zero;
  return op;
}

/* x[2,3] -> ScaledTanh(alpha=2) -> (y, s) ; y -> Relu -> z */
static er_status custom_model(er_model **out) {
  mk_model m;
  mk_begin(&m, "custom");
  m.domain = "com.example";
  m.domain_version = 1;
  int64_t xd[2] = {2, 3};
  mk_input(&m, "x", ER_DTYPE_FLOAT, 2, xd);
  er_pbw at = {0};
  tb_attr_float(&at, "alpha", 2.0f);
  mk_node_domain(&m, "ScaledTanh", "com.example", "st", "x", "y,s", &at);
  er__pbw_free(&at);
  mk_node(&m, "Relu", "relu", "y", "z", NULL);
  mk_output(&m, "z", ER_DTYPE_FLOAT, -1, NULL);
  mk_output(&m, "s", ER_DTYPE_FLOAT, -1, NULL);
  return mk_load(&m, 13, out);
}

static void run_custom(const er_model *m, const char *backend, float *z, float *s) {
  er_session_options o;
  er_session_options_init(&o);
  const char *names[1] = {backend};
  o.backends = names;
  o.backend_count = 1;
  er_session *sess = NULL;
  CHECK_STATUS(er_session_create(m, &o, &sess), ER_STATUS_OK);
  if (!sess) return;
  float x[6] = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};
  er_tensor *t, *outs[2] = {NULL, NULL};
  er_tensor_wrap(ER_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, x, sizeof x, &t);
  er_named_tensor in = {"x", t};
  CHECK_STATUS(er_session_run(sess, &in, 1, NULL, 2, outs), ER_STATUS_OK);
  if (outs[0] && outs[1]) {
    CHECK(er_tensor_count(outs[0]) == 6 && er_tensor_count(outs[1]) == 2);
    memcpy(z, er_tensor_cdata(outs[0]), 6 * sizeof(float));
    memcpy(s, er_tensor_cdata(outs[1]), 2 * sizeof(float));
  }
  er_tensor_free(outs[0]);
  er_tensor_free(outs[1]);
  er_tensor_free(t);
  er_session_free(sess);
}

static void test_unregistered_is_refused(void) {
  er_model *m = NULL;
  CHECK_STATUS(custom_model(&m), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("com.example.ScaledTanh is not supported");
  er_model_free(m);
}

static void test_new_op_on_cpu(void) {
  er_custom_op op = scaled_tanh_op(NULL);
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_OK);
  er_model *m = NULL;
  CHECK_STATUS(custom_model(&m), ER_STATUS_OK);
  if (!m) return;
  /* The shape rule ran at load: the outputs' shapes are known. */
  er_value_info vi;
  CHECK_STATUS(er_model_output_info(m, 1, &vi), ER_STATUS_OK);
  CHECK(vi.rank == 1 && vi.dims[0] == 2);
  float z[6] = {0}, s[2] = {0};
  int before = atomic_load(&tanh_calls);
  run_custom(m, "cpu", z, s);
  CHECK(atomic_load(&tanh_calls) == before + 1);
  const float x[6] = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};
  for (int i = 0; i < 6; i++) CHECK(fabsf(z[i] - fmaxf(0.0f, 2.0f * tanhf(x[i]))) < 1e-6f);
  CHECK(fabsf(s[0] - 2.0f * (tanhf(0.5f) + tanhf(-1.0f) + tanhf(2.0f))) < 1e-5f);
  er_model_free(m);
}

static void test_cpu_kernel_is_the_fallback(void) {
  /* The sample plugin knows Relu but not com.example.ScaledTanh: the
   * custom node falls back to its CPU kernel, named with the reason. */
  CHECK_STATUS(er_backend_load(SAMPLE_PLUGIN_PATH), ER_STATUS_OK);
  er_model *m = NULL;
  CHECK_STATUS(custom_model(&m), ER_STATUS_OK);
  if (!m) return;
  er_session_options o;
  er_session_options_init(&o);
  const char *names[1] = {"sample"};
  o.backends = names;
  o.backend_count = 1;
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, &o, &s), ER_STATUS_OK);
  if (s) {
    er_placement p;
    CHECK_STATUS(er_session_placement(s, 0, &p), ER_STATUS_OK);
    CHECK(strcmp(p.op_type, "ScaledTanh") == 0 && strcmp(p.backend, "cpu") == 0);
    CHECK(strstr(p.reason, "no ScaledTanh kernel") != NULL);
    CHECK_STATUS(er_session_placement(s, 1, &p), ER_STATUS_OK);
    CHECK(strcmp(p.backend, "sample") == 0);
  }
  er_session_free(s);
  float z[6] = {0}, sums[2] = {0}, z_cpu[6] = {0}, s_cpu[2] = {0};
  run_custom(m, "sample", z, sums);
  run_custom(m, "cpu", z_cpu, s_cpu);
  CHECK(memcmp(z, z_cpu, sizeof z) == 0 && memcmp(sums, s_cpu, sizeof sums) == 0);
  er_model_free(m);
}

/* Relu overridden on the CPU by a ReLU6 (clips at 6): nodes placed on the
 * CPU use it; the standard shape rule still applies. */
static atomic_int relu6_calls;
static er_status relu6(void *user, er_kernel_ctx *ctx) {
  (void)user;
  const er_tensor *x = er_kernel_input(ctx, 0);
  er_tensor *y = er_kernel_output(ctx, 0);
  if (er_tensor_dtype(x) != ER_DTYPE_FLOAT) return ER_STATUS_UNSUPPORTED;
  const float *xv = er_tensor_cdata(x);
  float *yv = er_tensor_data(y);
  for (int64_t i = 0; i < er_tensor_count(x); i++) yv[i] = fminf(fmaxf(xv[i], 0.0f), 6.0f);
  atomic_fetch_add(&relu6_calls, 1);
  return ER_STATUS_OK;
}

static void test_override_standard_op(void) {
  mk_model mm;
  mk_begin(&mm, "relu");
  int64_t d[1] = {4};
  mk_input(&mm, "x", ER_DTYPE_FLOAT, 1, d);
  mk_node(&mm, "Relu", "r", "x", "y", NULL);
  mk_output(&mm, "y", ER_DTYPE_FLOAT, 1, d);
  er_model *m = NULL;
  CHECK_STATUS(mk_load(&mm, 13, &m), ER_STATUS_OK);
  if (!m) return;
  er_custom_op op = {0};
  op.abi_version = ER_PLUGIN_ABI_VERSION;
  op.struct_size = sizeof op;
  op.domain = "";
  op.op_type = "Relu";
  op.backend = "cpu";
  op.compute = relu6;
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_OK);
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, NULL, &s), ER_STATUS_OK);
  float x[4] = {-1, 3, 7, 100};
  er_tensor *t, *y = NULL;
  er_tensor_wrap(ER_DTYPE_FLOAT, 1, d, x, sizeof x, &t);
  er_named_tensor in = {"x", t};
  CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &y), ER_STATUS_OK);
  if (y) {
    const float *v = er_tensor_cdata(y);
    CHECK(v[0] == 0 && v[1] == 3 && v[2] == 6 && v[3] == 6);
  }
  CHECK(atomic_load(&relu6_calls) == 1);
  er_tensor_free(y);
  er_tensor_free(t);
  er_session_free(s);
  er_model_free(m);
}

/* The override reaches nodes inside subgraphs: the branches of an If are
 * compiled with the CPU's kernels (registered ones first) when the
 * session is created, not left to the op's reference kernel. */
static void test_override_in_subgraph(void) {
  int64_t d[1] = {4};
  mk_model then_b, else_b, mm;
  mk_begin(&then_b, "then");
  mk_node(&then_b, "Relu", "r_then", "x", "yt", NULL);
  mk_output(&then_b, "yt", ER_DTYPE_FLOAT, 1, d);
  mk_begin(&else_b, "else");
  mk_node(&else_b, "Neg", "n_else", "x", "ye", NULL);
  mk_output(&else_b, "ye", ER_DTYPE_FLOAT, 1, d);
  er_pbw attrs = {0};
  tb_attr_graph(&attrs, "then_branch", &then_b.g);
  tb_attr_graph(&attrs, "else_branch", &else_b.g);
  mk_begin(&mm, "if");
  mk_input(&mm, "x", ER_DTYPE_FLOAT, 1, d);
  mk_input(&mm, "c", ER_DTYPE_BOOL, 0, NULL);
  mk_node(&mm, "If", "if", "c", "y", &attrs);
  mk_output(&mm, "y", ER_DTYPE_FLOAT, 1, d);
  er_model *m = NULL;
  CHECK_STATUS(mk_load(&mm, 13, &m), ER_STATUS_OK);
  er__pbw_free(&attrs);
  er__pbw_free(&then_b.g);
  er__pbw_free(&else_b.g);
  if (!m) return;
  er_custom_op op = {0};
  op.abi_version = ER_PLUGIN_ABI_VERSION;
  op.struct_size = sizeof op;
  op.domain = "";
  op.op_type = "Relu";
  op.backend = "cpu";
  op.compute = relu6;
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_OK);
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, NULL, &s), ER_STATUS_OK);
  float x[4] = {-1, 3, 7, 100};
  bool cond[2] = {true, false};
  for (int k = 0; s && k < 2; k++) {
    er_tensor *t, *c, *y = NULL;
    er_tensor_wrap(ER_DTYPE_FLOAT, 1, d, x, sizeof x, &t);
    er_tensor_wrap(ER_DTYPE_BOOL, 0, NULL, &cond[k], sizeof cond[k], &c);
    er_named_tensor in[2] = {{"x", t}, {"c", c}};
    int before = atomic_load(&relu6_calls);
    CHECK_STATUS(er_session_run(s, in, 2, NULL, 1, &y), ER_STATUS_OK);
    if (y) {
      const float *v = er_tensor_cdata(y);
      if (cond[k]) CHECK(v[0] == 0 && v[1] == 3 && v[2] == 6 && v[3] == 6);
      else CHECK(v[0] == 1 && v[1] == -3 && v[2] == -7 && v[3] == -100);
    }
    CHECK(atomic_load(&relu6_calls) == before + (cond[k] ? 1 : 0));
    er_tensor_free(y);
    er_tensor_free(t);
    er_tensor_free(c);
  }
  er_session_free(s);
  er_model_free(m);
}

static void test_registration_rules(void) {
  er_custom_op op = scaled_tanh_op("opencl");
  op.op_type = "NoCpuYet";
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("register its CPU kernel first");
  op = scaled_tanh_op("cpu");
  op.domain = "";
  op.op_type = "NotAnOnnxOp";
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("put new ops in your own domain");
  op = scaled_tanh_op("cpu");
  op.domain = "";
  op.op_type = "Relu";
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("infer must be NULL");
  op = scaled_tanh_op("mynpu");
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("backend 'mynpu' cannot take registered kernels");
  op = scaled_tanh_op("cpu");
  op.abi_version = 2u << 16;
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_UNSUPPORTED);
  op = scaled_tanh_op("cpu");
  op.compute = NULL;
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_INVALID_ARGUMENT);
  op = scaled_tanh_op("cpu");
  op.max_outputs = 0;
  CHECK_STATUS(er_custom_op_register(&op), ER_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(er_custom_op_register(NULL), ER_STATUS_INVALID_ARGUMENT);
}

/* A shape rule that rejects its input: the model does not load, and the
 * message names the node. */
static void test_infer_rejects(void) {
  mk_model m;
  mk_begin(&m, "bad-rank");
  m.domain = "com.example";
  m.domain_version = 1;
  int64_t xd[3] = {2, 3, 4};
  mk_input(&m, "x", ER_DTYPE_FLOAT, 3, xd);
  mk_node_domain(&m, "ScaledTanh", "com.example", "st3", "x", "y", NULL);
  mk_output(&m, "y", ER_DTYPE_FLOAT, -1, NULL);
  er_model *model = NULL;
  CHECK_STATUS(mk_load(&m, 13, &model), ER_STATUS_INVALID_SHAPE);
  CHECK_MSG("ScaledTanh 'st3'");
  er_model_free(model);
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"unregistered_is_refused", test_unregistered_is_refused},
      {"new_op_on_cpu", test_new_op_on_cpu},
      {"cpu_kernel_is_the_fallback", test_cpu_kernel_is_the_fallback},
      {"infer_rejects", test_infer_rejects},
      {"registration_rules", test_registration_rules},
      /* Last: the overrides change Relu for the rest of the process. */
      {"override_standard_op", test_override_standard_op},
      {"override_in_subgraph", test_override_in_subgraph},
  };
  return er_test_run(cases, sizeof cases / sizeof cases[0], argc, argv);
}
