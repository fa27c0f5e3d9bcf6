/* test-plugin.c - the plugin ABI and the partitioner, through the sample
 * out-of-tree backend (sample-plugin/): loading and version checks,
 * placement with reasons, maximal grouping, transfers, the fallback share,
 * --no-fallback, and outputs equal to the CPU's. */
#include <math.h>
#include <stdlib.h>

#include "edgerun-backend.h"
#include "harness.h"
#include "model-kit.h"

#ifndef SAMPLE_PLUGIN_PATH
#error "the build passes SAMPLE_PLUGIN_PATH"
#endif

static bool plugin_loaded;

static void load_sample(void) {
  if (plugin_loaded) return;
  CHECK_STATUS(er_backend_load(SAMPLE_PLUGIN_PATH), ER_STATUS_OK);
  plugin_loaded = true;
}

/* Runs `m` with one float input on the given backends; returns output 0. */
static er_status run_on(const er_model *m, const char *backend, bool fallback, const char *in_name,
                        float *x, int rank, const int64_t *dims, er_session **s_out, er_tensor **y) {
  er_session_options o;
  er_session_options_init(&o);
  const char *names[1] = {backend};
  o.backends = names;
  o.backend_count = 1;
  o.allow_fallback = fallback;
  er_session *s;
  er_status st = er_session_create(m, &o, &s);
  if (st != ER_STATUS_OK) return st;
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  er_tensor *t;
  er_tensor_wrap(ER_DTYPE_FLOAT, rank, dims, x, (size_t)n * sizeof(float), &t);
  er_named_tensor in = {in_name, t};
  st = er_session_run(s, &in, 1, NULL, 1, y);
  er_tensor_free(t);
  if (s_out) *s_out = s;
  else er_session_free(s);
  return st;
}

static float max_abs_diff(const er_tensor *a, const er_tensor *b) {
  if (er_tensor_count(a) != er_tensor_count(b)) return INFINITY;
  const float *x = er_tensor_cdata(a), *y = er_tensor_cdata(b);
  float m = 0;
  for (int64_t i = 0; i < er_tensor_count(a); i++) m = fmaxf(m, fabsf(x[i] - y[i]));
  return m;
}

/* x[2,3] -> MatMul W[3,4] -> Add b -> Relu -> Softmax -> Mul 2 -> y.
 * Softmax is not in the sample backend, so it splits the graph. */
static er_model *mlp_model(void) {
  mk_model m;
  mk_begin(&m, "mlp");
  int64_t xd[2] = {2, 3}, wd[2] = {3, 4}, bd[1] = {4}, sd[1] = {1};
  float w[12], b[4], two = 2.0f;
  mk_rng r = {42};
  mk_fill(&r, w, 12, -1, 1);
  mk_fill(&r, b, 4, -0.5f, 0.5f);
  mk_input(&m, "x", ER_DTYPE_FLOAT, 2, xd);
  mk_const(&m, "w", ER_DTYPE_FLOAT, 2, wd, w);
  mk_const(&m, "b", ER_DTYPE_FLOAT, 1, bd, b);
  mk_const(&m, "two", ER_DTYPE_FLOAT, 1, sd, &two);
  mk_node(&m, "MatMul", "mm", "x,w", "h0", NULL);
  mk_node(&m, "Add", "bias", "h0,b", "h1", NULL);
  mk_node(&m, "Relu", "act", "h1", "h2", NULL);
  mk_node(&m, "Softmax", "sm", "h2", "h3", NULL);
  mk_node(&m, "Mul", "scale", "h3,two", "y", NULL);
  mk_output(&m, "y", ER_DTYPE_FLOAT, 2, (int64_t[]){2, 4});
  er_model *model = NULL;
  CHECK_STATUS(mk_load(&m, 13, &model), ER_STATUS_OK);
  return model;
}

static void test_load_and_list(void) {
  load_sample();
  /* A second load of the same name is refused, naming it. */
  CHECK_STATUS(er_backend_load(SAMPLE_PLUGIN_PATH), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("'sample' is already loaded");
  bool found = false;
  for (size_t i = 0; i < er_backend_count(); i++) {
    er_backend_info info;
    CHECK_STATUS(er_backend_get_info(i, &info), ER_STATUS_OK);
    if (strcmp(info.name, "sample") == 0) {
      found = true;
      CHECK(info.plugin && info.built && info.device_count == 1 && info.status[0] == '\0');
    }
  }
  CHECK(found);
  er_device_desc d;
  CHECK_STATUS(er_backend_device("sample", 0, &d), ER_STATUS_OK);
  CHECK(strstr(d.name, "sample accelerator") != NULL && d.kind == ER_DEVICE_NPU);
  CHECK_STATUS(er_backend_device("sample", 1, &d), ER_STATUS_NOT_FOUND);
}

static void test_bad_plugins(void) {
  /* Built for ABI 99.x: refused with both versions in the message. */
  CHECK_STATUS(er_backend_load(SAMPLE_FUTURE_PLUGIN_PATH), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("ABI 99.0");
  CHECK_MSG("speaks 1.0");
  /* A shared object that is not a plugin. */
  CHECK_STATUS(er_backend_load(NOT_A_PLUGIN_PATH), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("does not export er_backend_plugin_init");
  CHECK_STATUS(er_backend_load("/nonexistent/plugin.so"), ER_STATUS_IO);
  /* A table without compute, registered in process. */
  er_backend_plugin t = {0};
  t.abi_version = ER_PLUGIN_ABI_VERSION;
  t.struct_size = sizeof t;
  t.name = "Bad Name";
  CHECK_STATUS(er_backend_register(&t), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("[a-z0-9_-]");
  t.name = "cpu";
  CHECK_STATUS(er_backend_register(&t), ER_STATUS_INVALID_ARGUMENT);
  t.name = "nocompute";
  CHECK_STATUS(er_backend_register(&t), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("lacks supports_op, compile or compute");
  /* Unknown and missing backends name the reason. */
  er_model *m = mlp_model();
  er_session_options o;
  er_session_options_init(&o);
  const char *names[1] = {"nosuch"};
  o.backends = names;
  o.backend_count = 1;
  er_session *s;
  CHECK_STATUS(er_session_create(m, &o, &s), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("no backend named 'nosuch'");
  er_model_free(m);
}

static void test_split_run(void) {
  load_sample();
  er_model *m = mlp_model();
  if (!m) return;
  float x[6] = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};
  int64_t xd[2] = {2, 3};
  er_tensor *ref = NULL, *got = NULL;
  er_session *s = NULL;
  CHECK_STATUS(run_on(m, "cpu", true, "x", x, 2, xd, NULL, &ref), ER_STATUS_OK);
  CHECK_STATUS(run_on(m, "sample", true, "x", x, 2, xd, &s, &got), ER_STATUS_OK);
  if (ref && got) CHECK(max_abs_diff(ref, got) < 1e-5f);
  if (s) {
    er_partition_summary sum;
    er_session_partition(s, &sum);
    CHECK(strcmp(sum.preferred, "sample") == 0);
    CHECK(sum.node_count == 5);
    CHECK(sum.fallback_nodes == 1);
    CHECK(sum.segments == 3);  /* sample | cpu | sample */
    /* x in, h2 out, h3 in, y out: four values cross host and device. */
    CHECK(sum.transfers == 4);
    CHECK(sum.transfer_bytes == (6 + 8 + 8 + 8) * 4);
    /* MatMul 2*4*3 = 24 MACs, Add/Relu/Softmax/Mul 8 each: 56 in all. */
    CHECK(sum.total_macs == 56 && sum.fallback_macs == 8);
    CHECK(fabs(sum.fallback_share - 8.0 / 56.0) < 1e-9);
    for (size_t i = 0; i < 5; i++) {
      er_placement p;
      CHECK_STATUS(er_session_placement(s, i, &p), ER_STATUS_OK);
      if (strcmp(p.op_type, "Softmax") == 0) {
        CHECK(strcmp(p.backend, "cpu") == 0);
        CHECK(strstr(p.reason, "no Softmax kernel") != NULL);
        CHECK(p.segment == 1);
      } else {
        CHECK(strcmp(p.backend, "sample") == 0 && p.reason[0] == '\0');
      }
    }
    er_placement p;
    CHECK_STATUS(er_session_placement(s, 5, &p), ER_STATUS_NOT_FOUND);
  }
  er_tensor_free(ref);
  er_tensor_free(got);
  er_session_free(s);

  /* Fallback off: the Softmax is named with its reason. */
  CHECK_STATUS(run_on(m, "sample", false, "x", x, 2, xd, NULL, &got), ER_STATUS_NO_FALLBACK);
  CHECK_MSG("Softmax 'sm' (the sample backend has no Softmax kernel)");
  er_model_free(m);
}

/* Grouping: the model's own order alternates sample and CPU nodes, but
 * the CPU branch does not feed the sample nodes after it, so the sample
 * nodes form one segment:
 *   a = Relu(x)          sample
 *   s = Softmax(a)       cpu
 *   c = Sigmoid(x)       sample
 *   d = Add(a, c)        sample
 *   y = Concat(s, d)     cpu  */
static void test_maximal_segments(void) {
  load_sample();
  mk_model mm;
  mk_begin(&mm, "branches");
  int64_t xd[2] = {2, 3};
  mk_input(&mm, "x", ER_DTYPE_FLOAT, 2, xd);
  mk_node(&mm, "Relu", "a", "x", "a", NULL);
  mk_node(&mm, "Softmax", "s", "a", "s", NULL);
  mk_node(&mm, "Sigmoid", "c", "x", "c", NULL);
  mk_node(&mm, "Add", "d", "a,c", "d", NULL);
  er_pbw at = {0};
  tb_attr_int(&at, "axis", 1);
  mk_node(&mm, "Concat", "y", "s,d", "y", &at);
  er__pbw_free(&at);
  mk_output(&mm, "y", ER_DTYPE_FLOAT, 2, (int64_t[]){2, 6});
  er_model *m = NULL;
  CHECK_STATUS(mk_load(&mm, 13, &m), ER_STATUS_OK);
  if (!m) return;
  float x[6] = {1, -2, 3, -4, 5, -6};
  er_tensor *ref = NULL, *got = NULL;
  er_session *s = NULL;
  CHECK_STATUS(run_on(m, "cpu", true, "x", x, 2, xd, NULL, &ref), ER_STATUS_OK);
  CHECK_STATUS(run_on(m, "sample", true, "x", x, 2, xd, &s, &got), ER_STATUS_OK);
  if (ref && got) CHECK(max_abs_diff(ref, got) < 1e-6f);
  if (s) {
    er_partition_summary sum;
    er_session_partition(s, &sum);
    CHECK(sum.segments == 2);
    CHECK(sum.fallback_nodes == 2);
  }
  er_tensor_free(ref);
  er_tensor_free(got);
  er_session_free(s);
  er_model_free(m);
}

/* A model the sample covers entirely: no fallback, one segment, and the
 * same numbers as the CPU from several threads at once. */
typedef struct thread_arg {
  er_session *s;
  const er_tensor *ref;
  int bad;
} thread_arg;

#include <pthread.h>
static void *worker(void *p) {
  thread_arg *a = p;
  float x[6] = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};
  int64_t xd[2] = {2, 3};
  for (int i = 0; i < 50; i++) {
    er_tensor *t, *y = NULL;
    er_tensor_wrap(ER_DTYPE_FLOAT, 2, xd, x, sizeof x, &t);
    er_named_tensor in = {"x", t};
    if (er_session_run(a->s, &in, 1, NULL, 1, &y) != ER_STATUS_OK || max_abs_diff(a->ref, y) > 1e-5f)
      a->bad++;
    er_tensor_free(y);
    er_tensor_free(t);
  }
  return NULL;
}

static void test_full_coverage(void) {
  load_sample();
  mk_model mm;
  mk_begin(&mm, "covered");
  int64_t xd[2] = {2, 3}, wd[2] = {3, 4}, bd[2] = {1, 4};
  float w[12], b[4];
  mk_rng r = {7};
  mk_fill(&r, w, 12, -1, 1);
  mk_fill(&r, b, 4, -1, 1);
  mk_input(&mm, "x", ER_DTYPE_FLOAT, 2, xd);
  mk_const(&mm, "w", ER_DTYPE_FLOAT, 2, wd, w);
  mk_const(&mm, "b", ER_DTYPE_FLOAT, 2, bd, b);
  mk_node(&mm, "Gemm", "fc", "x,w,b", "h", NULL);
  mk_node(&mm, "Sigmoid", "sig", "h", "y", NULL);
  mk_output(&mm, "y", ER_DTYPE_FLOAT, 2, (int64_t[]){2, 4});
  er_model *m = NULL;
  CHECK_STATUS(mk_load(&mm, 13, &m), ER_STATUS_OK);
  if (!m) return;
  float x[6] = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};
  er_tensor *ref = NULL, *got = NULL;
  er_session *s = NULL;
  CHECK_STATUS(run_on(m, "cpu", true, "x", x, 2, xd, NULL, &ref), ER_STATUS_OK);
  CHECK_STATUS(run_on(m, "sample", false, "x", x, 2, xd, &s, &got), ER_STATUS_OK);
  if (ref && got) CHECK(max_abs_diff(ref, got) < 1e-5f);
  if (s && ref) {
    er_partition_summary sum;
    er_session_partition(s, &sum);
    CHECK(sum.fallback_nodes == 0 && sum.fallback_share == 0.0 && sum.segments == 1);
    thread_arg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
      args[i] = (thread_arg){s, ref, 0};
      pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
      pthread_join(th[i], NULL);
      CHECK(args[i].bad == 0);
    }
  }
  er_tensor_free(ref);
  er_tensor_free(got);
  er_session_free(s);
  er_model_free(m);
}

/* Fallback warnings reach the log callback: one line per kind of
 * fallback, then the share, as a warning above 20%. */
typedef struct log_capture {
  int warnings;
  char last[1024];
  bool saw_share_warning, saw_softmax;
} log_capture;

static void capture(void *user, er_log_level level, const char *msg) {
  log_capture *c = user;
  if (level >= ER_LOG_WARNING) c->warnings++;
  snprintf(c->last, sizeof c->last, "%s", msg);
  if (level == ER_LOG_WARNING && strstr(msg, "more than the 20%")) c->saw_share_warning = true;
  if (strstr(msg, "Softmax") && strstr(msg, "back from sample to the CPU")) c->saw_softmax = true;
}

static void test_fallback_log(void) {
  load_sample();
  /* Relu(x) on the sample, then a heavy CPU-only Conv: the share is high. */
  mk_model mm;
  mk_begin(&mm, "heavy-fallback");
  int64_t xd[4] = {1, 2, 6, 6}, wd[4] = {4, 2, 3, 3};
  float w[72];
  mk_rng r = {3};
  mk_fill(&r, w, 72, -1, 1);
  mk_input(&mm, "x", ER_DTYPE_FLOAT, 4, xd);
  mk_const(&mm, "w", ER_DTYPE_FLOAT, 4, wd, w);
  mk_node(&mm, "Relu", "act", "x", "a", NULL);
  mk_node(&mm, "Conv", "conv", "a,w", "c", NULL);
  mk_node(&mm, "Softmax", "sm", "c", "y", NULL);
  mk_output(&mm, "y", ER_DTYPE_FLOAT, -1, NULL);
  er_model *m = NULL;
  CHECK_STATUS(mk_load(&mm, 13, &m), ER_STATUS_OK);
  if (!m) return;
  log_capture cap = {0};
  er_log_set_callback(capture, &cap, ER_LOG_INFO);
  er_session_options o;
  er_session_options_init(&o);
  const char *names[1] = {"sample"};
  o.backends = names;
  o.backend_count = 1;
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(m, &o, &s), ER_STATUS_OK);
  er_log_set_callback(NULL, NULL, ER_LOG_WARNING);
  CHECK(cap.saw_share_warning);
  CHECK(cap.saw_softmax);
  if (s) {
    er_partition_summary sum;
    er_session_partition(s, &sum);
    CHECK(sum.fallback_share > ER_FALLBACK_WARN_SHARE);
  }
  er_session_free(s);
  er_model_free(m);
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"load_and_list", test_load_and_list},
      {"bad_plugins", test_bad_plugins},
      {"split_run", test_split_run},
      {"maximal_segments", test_maximal_segments},
      {"full_coverage", test_full_coverage},
      {"fallback_log", test_fallback_log},
  };
  return er_test_run(cases, sizeof cases / sizeof cases[0], argc, argv);
}
