/* test-custom-opencl.c - custom kernels on the OpenCL backend: a standard
 * op (Relu) overridden on OpenCL only, a new op with a CPU kernel and an
 * OpenCL kernel (its own OpenCL program, run on the backend's queue with
 * the backend's buffers), and a new op with only a CPU kernel, which falls
 * back to the CPU with the reason. Built when the OpenCL backend is. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdatomic.h>

#include "edgerun-backend.h"
#include "harness.h"
#include "model-kit.h"

static atomic_int device_calls, cpu_calls;

/* Relu on OpenCL replaced by a copy (identity): negative inputs survive,
 * which only this kernel can have done. */
static er_status relu_as_copy(void *user, er_kernel_ctx *ctx) {
  (void)user;
  cl_command_queue q = er_kernel_stream(ctx);
  cl_mem x = (cl_mem)er_tensor_cdata(er_kernel_input(ctx, 0));
  cl_mem y = (cl_mem)er_tensor_data(er_kernel_output(ctx, 0));
  if (!q || !x || !y) return ER_STATUS_INTERNAL;
  atomic_fetch_add(&device_calls, 1);
  return clEnqueueCopyBuffer(q, x, y, 0, 0, er_tensor_nbytes(er_kernel_input(ctx, 0)), 0, NULL, NULL) == CL_SUCCESS
             ? ER_STATUS_OK
             : ER_STATUS_BACKEND;
}

/* com.example.Twice: y = 2x, on the CPU and as an OpenCL C kernel. */
static er_status twice_cpu(void *user, er_kernel_ctx *ctx) {
  (void)user;
  const er_tensor *x = er_kernel_input(ctx, 0);
  const float *xv = er_tensor_cdata(x);
  float *yv = er_tensor_data(er_kernel_output(ctx, 0));
  for (int64_t i = 0; i < er_tensor_count(x); i++) yv[i] = 2 * xv[i];
  atomic_fetch_add(&cpu_calls, 1);
  return ER_STATUS_OK;
}

static cl_kernel twice_kernel;  /* built on first use for the backend's context */

static er_status twice_cl(void *user, er_kernel_ctx *ctx) {
  (void)user;
  cl_command_queue q = er_kernel_stream(ctx);
  cl_int e;
  if (!twice_kernel) {
    cl_context c;
    cl_device_id d;
    clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof c, &c, NULL);
    clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof d, &d, NULL);
    const char *src = "__kernel void twice(__global const float *x, __global float *y) {"
                      "  int i = get_global_id(0); y[i] = 2.0f * x[i]; }";
    cl_program p = clCreateProgramWithSource(c, 1, &src, NULL, &e);
    if (e != CL_SUCCESS || clBuildProgram(p, 1, &d, NULL, NULL, NULL) != CL_SUCCESS) return ER_STATUS_BACKEND;
    twice_kernel = clCreateKernel(p, "twice", &e);
    clReleaseProgram(p);
    if (e != CL_SUCCESS) return ER_STATUS_BACKEND;
  }
  cl_mem x = (cl_mem)er_tensor_cdata(er_kernel_input(ctx, 0));
  cl_mem y = (cl_mem)er_tensor_data(er_kernel_output(ctx, 0));
  size_t n = (size_t)er_tensor_count(er_kernel_input(ctx, 0));
  clSetKernelArg(twice_kernel, 0, sizeof x, &x);
  clSetKernelArg(twice_kernel, 1, sizeof y, &y);
  atomic_fetch_add(&device_calls, 1);
  return clEnqueueNDRangeKernel(q, twice_kernel, 1, NULL, &n, NULL, 0, NULL, NULL) == CL_SUCCESS ? ER_STATUS_OK
                                                                                                : ER_STATUS_BACKEND;
}

static er_custom_op op(const char *type, const char *backend, er_status (*fn)(void *, er_kernel_ctx *)) {
  er_custom_op o = {0};
  o.abi_version = ER_PLUGIN_ABI_VERSION;
  o.struct_size = sizeof o;
  o.domain = strcmp(type, "Relu") == 0 ? "" : "com.example";
  o.op_type = type;
  o.backend = backend;
  o.min_inputs = o.max_inputs = 1;
  o.min_outputs = o.max_outputs = 1;
  o.compute = fn;
  return o;
}

/* x -> Relu -> Twice -> Thrice -> y on OpenCL. */
static void test_custom_on_opencl(void) {
  er_custom_op a = op("Relu", "opencl", relu_as_copy);
  er_custom_op b = op("Twice", "cpu", twice_cpu);
  er_custom_op c = op("Twice", "opencl", twice_cl);
  er_custom_op d = op("Thrice", "cpu", twice_cpu);  /* CPU only: the fallback */
  CHECK_STATUS(er_custom_op_register(&a), ER_STATUS_OK);
  CHECK_STATUS(er_custom_op_register(&b), ER_STATUS_OK);
  CHECK_STATUS(er_custom_op_register(&c), ER_STATUS_OK);
  CHECK_STATUS(er_custom_op_register(&d), ER_STATUS_OK);
  mk_model m;
  mk_begin(&m, "custom-cl");
  m.domain = "com.example";
  m.domain_version = 1;
  mk_input(&m, "x", ER_DTYPE_FLOAT, 1, (int64_t[]){6});
  mk_node(&m, "Relu", "r", "x", "a", NULL);
  mk_node_domain(&m, "Twice", "com.example", "t", "a", "b", NULL);
  mk_node_domain(&m, "Thrice", "com.example", "u", "b", "y", NULL);
  mk_output(&m, "y", ER_DTYPE_FLOAT, -1, NULL);
  er_model *model = NULL;
  CHECK_STATUS(mk_load(&m, 13, &model), ER_STATUS_OK);
  if (!model) return;
  er_session_options o;
  er_session_options_init(&o);
  const char *names[1] = {"opencl"};
  o.backends = names;
  o.backend_count = 1;
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(model, &o, &s), ER_STATUS_OK);
  if (s) {
    er_placement p;
    er_session_placement(s, 0, &p);
    CHECK(strcmp(p.backend, "opencl") == 0);
    er_session_placement(s, 1, &p);
    CHECK(strcmp(p.backend, "opencl") == 0);
    er_session_placement(s, 2, &p);
    CHECK(strcmp(p.backend, "cpu") == 0 && strstr(p.reason, "no opencl kernel for com.example.Thrice"));
    float x[6] = {-3, -1, 0, 1, 2, 5};
    er_tensor *t, *y = NULL;
    er_tensor_wrap(ER_DTYPE_FLOAT, 1, (int64_t[]){6}, x, sizeof x, &t);
    er_named_tensor in = {"x", t};
    int dev0 = atomic_load(&device_calls), cpu0 = atomic_load(&cpu_calls);
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &y), ER_STATUS_OK);
    if (y) {
      const float *v = er_tensor_cdata(y);
      /* identity (not Relu), then 2x on the device, then 2x on the CPU */
      for (int i = 0; i < 6; i++) CHECK(v[i] == 4 * x[i]);
    }
    CHECK(atomic_load(&device_calls) == dev0 + 2);
    CHECK(atomic_load(&cpu_calls) == cpu0 + 1);
    er_tensor_free(y);
    er_tensor_free(t);
  }
  er_session_free(s);
  er_model_free(model);
}

/* Four threads run one OpenCL session at once; every result equals the
 * CPU's (the backend serializes its queue; runs share only weights). */
#include <pthread.h>
typedef struct worker_arg {
  er_session *s;
  const float *ref;
  int bad;
} worker_arg;

static void *worker(void *p) {
  worker_arg *a = p;
  float x[2 * 3 * 8 * 8];
  mk_rng r = {99};
  mk_fill(&r, x, 2 * 3 * 8 * 8, -1, 1);
  for (int it = 0; it < 20; it++) {
    er_tensor *t, *y = NULL;
    er_tensor_wrap(ER_DTYPE_FLOAT, 4, (int64_t[]){2, 3, 8, 8}, x, sizeof x, &t);
    er_named_tensor in = {"x", t};
    if (er_session_run(a->s, &in, 1, NULL, 1, &y) != ER_STATUS_OK) a->bad++;
    else
      for (int64_t i = 0; i < er_tensor_count(y); i++)
        if (fabsf(((const float *)er_tensor_cdata(y))[i] - a->ref[i]) > 1e-4f) a->bad++;
    er_tensor_free(y);
    er_tensor_free(t);
  }
  return NULL;
}

static void test_concurrent_runs(void) {
  mk_model m;
  mk_begin(&m, "cnn");
  mk_input(&m, "x", ER_DTYPE_FLOAT, 4, (int64_t[]){2, 3, 8, 8});
  float w[4 * 3 * 3 * 3], b[4];
  mk_rng r = {5};
  mk_fill(&r, w, 108, -1, 1);
  mk_fill(&r, b, 4, -1, 1);
  mk_const(&m, "w", ER_DTYPE_FLOAT, 4, (int64_t[]){4, 3, 3, 3}, w);
  mk_const(&m, "b", ER_DTYPE_FLOAT, 1, (int64_t[]){4}, b);
  er_pbw a = {0};
  tb_attr_ints(&a, "pads", (int64_t[]){1, 1, 1, 1}, 4);
  mk_node(&m, "Conv", "conv", "x,w,b", "c", &a);
  er__pbw_free(&a);
  mk_node(&m, "Relu", "relu", "c", "r", NULL);
  mk_node(&m, "GlobalAveragePool", "gap", "r", "y", NULL);
  mk_output(&m, "y", ER_DTYPE_FLOAT, -1, NULL);
  er_model *model = NULL;
  CHECK_STATUS(mk_load(&m, 13, &model), ER_STATUS_OK);
  if (!model) return;
  er_session *cpu = NULL, *gpu = NULL;
  er_session_options o;
  er_session_options_init(&o);
  CHECK_STATUS(er_session_create(model, &o, &cpu), ER_STATUS_OK);
  const char *names[1] = {"opencl"};
  o.backends = names;
  o.backend_count = 1;
  o.allow_fallback = false;
  CHECK_STATUS(er_session_create(model, &o, &gpu), ER_STATUS_OK);
  float x[2 * 3 * 8 * 8];
  mk_rng rx = {99};
  mk_fill(&rx, x, 2 * 3 * 8 * 8, -1, 1);
  er_tensor *t, *ref = NULL;
  er_tensor_wrap(ER_DTYPE_FLOAT, 4, (int64_t[]){2, 3, 8, 8}, x, sizeof x, &t);
  er_named_tensor in = {"x", t};
  if (cpu) CHECK_STATUS(er_session_run(cpu, &in, 1, NULL, 1, &ref), ER_STATUS_OK);
  if (gpu && ref) {
    worker_arg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
      args[i] = (worker_arg){gpu, er_tensor_cdata(ref), 0};
      pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
      pthread_join(th[i], NULL);
      CHECK(args[i].bad == 0);
    }
  }
  er_tensor_free(ref);
  er_tensor_free(t);
  er_session_free(cpu);
  er_session_free(gpu);
  er_model_free(model);
}

int main(int argc, char **argv) {
  er_backend_info info = {0};
  for (size_t i = 0; i < er_backend_count(); i++) {
    er_backend_get_info(i, &info);
    if (strcmp(info.name, "opencl") == 0) break;
  }
  if (strcmp(info.name, "opencl") != 0 || info.status[0]) {
    printf("SKIP: the OpenCL backend is not usable here: %s\n0 passed, 0 failed\n", info.status);
    return 0;
  }
  er_log_set_callback(NULL, NULL, ER_LOG_ERROR);
  static const er_test_case cases[] = {{"concurrent_runs", test_concurrent_runs},
                                       {"custom_on_opencl", test_custom_on_opencl}};
  return er_test_run(cases, 2, argc, argv);
}
