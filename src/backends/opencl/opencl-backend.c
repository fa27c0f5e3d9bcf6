/* opencl-backend.c - the OpenCL backend (OpenCL 1.2 through the ICD
 * loader; tested on PoCL, meant for GPUs and NPUs with OpenCL drivers).
 *
 * A compiled segment keeps its weights in device buffers. A run uploads
 * the segment's inputs, runs every node on device buffers (intermediates
 * never come back to the host; Reshape-like nodes share their input's
 * buffer), and downloads only the segment's outputs. Output shapes come
 * from each op's own shape rule (its `check`), so the backend and the CPU
 * reference can never disagree about a shape.
 *
 * Kernels live in opencl-kernels.cl (embedded at build time). One device is
 * used: the first GPU, else the first accelerator, else the first device of
 * any kind; EDGERUN_OPENCL_DEVICE=P:D picks platform P's device D. Runs on
 * one session are serialized on the device's in-order queue (kernel
 * arguments are per kernel object, so a lock guards enqueueing). */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/backend.h"
#include "backends/partition.h"
#include "ops/op.h"

extern const char er__opencl_source[];

/* The most devices listed across all platforms. */
#define ER_OCL_MAX_DEVICES 16

/* ======================================================================== */
/* State                                                                     */
/* ======================================================================== */

enum {
  K_UNARY, K_BINARY, K_AFFINE, K_CONV, K_POOL, K_GEMM, K_CONCAT, K_TRANSPOSE, K_SOFTMAX, K_LRN,
  K_QUANT, K_DEQUANT, K_QCONV, K_QMATMUL, K_COUNT
};
static const char *const kernel_names[K_COUNT] = {
    "unary_f32",   "binary_f32",      "channel_affine_f32", "conv2d_f32", "pool2d_f32",
    "gemm_f32",    "concat_copy",     "transpose_bytes",    "softmax_f32", "lrn_f32",
    "quantize_f32", "dequantize_f32", "qconv2d",            "qmatmul"};

typedef struct ocl {
  pthread_once_t once;
  char why[256];                 /* non-empty: unusable, and why */
  cl_device_id devices[ER_OCL_MAX_DEVICES];
  cl_platform_id dev_platform[ER_OCL_MAX_DEVICES];
  int n_devices;
  int chosen;                    /* index into devices */
  cl_context ctx;
  cl_command_queue queue;
  cl_program prog;
  cl_kernel k[K_COUNT];
  pthread_mutex_t lock;          /* kernel arguments and the queue */
} ocl;

static ocl state = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static const char *cl_err(cl_int e) {
  switch (e) {
#define E(x) \
  case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_BUILD_PROGRAM_FAILURE) E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
    E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_PROGRAM)
    E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE)
    E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION)
    E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET)
    E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_GLOBAL_WORK_SIZE)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no ICD installed)";
    default: return "unknown OpenCL error";
  }
}

static er_status cl_fail(cl_int e, const char *what, const er_node *node) {
  if (node)
    return er__error(ER_STATUS_BACKEND, "opencl: %s failed for %s node '%s': %s (%d)", what,
                     node->op_type, node->name, cl_err(e), (int)e);
  return er__error(ER_STATUS_BACKEND, "opencl: %s failed: %s (%d)", what, cl_err(e), (int)e);
}

static void init_once(void) {
  ocl *s = &state;
  cl_platform_id plats[8];
  cl_uint n_plats = 0;
  cl_int e = clGetPlatformIDs(8, plats, &n_plats);
  if (e != CL_SUCCESS || n_plats == 0) {
    snprintf(s->why, sizeof s->why,
             "no OpenCL platform found (%s; install a driver such as pocl-opencl-icd, or the "
             "GPU vendor's ICD)", e == CL_SUCCESS ? "0 platforms" : cl_err(e));
    return;
  }
  for (cl_uint p = 0; p < n_plats && p < 8; p++) {
    cl_device_id devs[ER_OCL_MAX_DEVICES];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, ER_OCL_MAX_DEVICES, devs, &nd) != CL_SUCCESS) continue;
    for (cl_uint d = 0; d < nd && s->n_devices < ER_OCL_MAX_DEVICES; d++) {
      s->devices[s->n_devices] = devs[d];
      s->dev_platform[s->n_devices++] = plats[p];
    }
  }
  if (s->n_devices == 0) {
    snprintf(s->why, sizeof s->why, "OpenCL platforms exist but none has a device");
    return;
  }
  /* Prefer a GPU, then an accelerator, then anything. */
  s->chosen = -1;
  static const cl_device_type order[] = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL};
  for (size_t o = 0; o < 3 && s->chosen < 0; o++)
    for (int d = 0; d < s->n_devices && s->chosen < 0; d++) {
      cl_device_type t = 0;
      clGetDeviceInfo(s->devices[d], CL_DEVICE_TYPE, sizeof t, &t, NULL);
      if (t & order[o]) s->chosen = d;
    }
  const char *pick = getenv("EDGERUN_OPENCL_DEVICE");
  if (pick) {
    int want = atoi(pick), p_index = -1;
    const char *colon = strchr(pick, ':');
    if (colon) {
      p_index = atoi(pick);
      want = atoi(colon + 1);
    }
    int seen = 0;
    s->chosen = -1;
    for (int d = 0; d < s->n_devices; d++) {
      int pi = 0;
      for (cl_uint p = 0; p < n_plats; p++)
        if (plats[p] == s->dev_platform[d]) pi = (int)p;
      if (p_index >= 0 && pi != p_index) continue;
      if (seen++ == want) s->chosen = d;
    }
    if (s->chosen < 0) {
      snprintf(s->why, sizeof s->why, "EDGERUN_OPENCL_DEVICE='%s' names no device", pick);
      return;
    }
  }
  cl_device_id dev = s->devices[s->chosen];
  s->ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  if (e != CL_SUCCESS) {
    snprintf(s->why, sizeof s->why, "clCreateContext failed: %s", cl_err(e));
    return;
  }
  s->queue = clCreateCommandQueue(s->ctx, dev, 0, &e);
  if (e != CL_SUCCESS) {
    snprintf(s->why, sizeof s->why, "clCreateCommandQueue failed: %s", cl_err(e));
    return;
  }
  const char *src = er__opencl_source;
  s->prog = clCreateProgramWithSource(s->ctx, 1, &src, NULL, &e);
  if (e == CL_SUCCESS) e = clBuildProgram(s->prog, 1, &dev, "-cl-std=CL1.2", NULL, NULL);
  if (e != CL_SUCCESS) {
    char log[160] = "";
    if (s->prog) clGetProgramBuildInfo(s->prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    log[sizeof log - 1] = '\0';
    snprintf(s->why, sizeof s->why, "the kernels did not build: %s: %s", cl_err(e), log);
    return;
  }
  for (int k = 0; k < K_COUNT; k++) {
    s->k[k] = clCreateKernel(s->prog, kernel_names[k], &e);
    if (e != CL_SUCCESS) {
      snprintf(s->why, sizeof s->why, "clCreateKernel(%s) failed: %s", kernel_names[k], cl_err(e));
      return;
    }
  }
}

static ocl *get_state(void) {
  pthread_once(&state.once, init_once);
  return &state;
}

static const char *ocl_unavailable(er_backend *be) {
  ER_UNUSED(be);
  ocl *s = get_state();
  return s->why[0] ? s->why : NULL;
}

static int ocl_device_count(er_backend *be) {
  ER_UNUSED(be);
  ocl *s = get_state();
  return s->why[0] && s->n_devices == 0 ? 0 : s->n_devices;
}

static er_status ocl_device_desc(er_backend *be, int index, er_device_desc *d) {
  ER_UNUSED(be);
  ocl *s = get_state();
  if (index < 0 || index >= s->n_devices)
    return er__error(ER_STATUS_NOT_FOUND, "opencl has %d devices; %d does not exist", s->n_devices, index);
  memset(d, 0, sizeof *d);
  cl_device_id dev = s->devices[index];
  /* Queries fail outright when the buffer is too small, so read into
   * roomy buffers and cut to the descriptor's fields. */
  char name[512] = "", vendor[256] = "", plat[256] = "", ver[512] = "", drv[256] = "";
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof vendor - 1, vendor, NULL);
  clGetPlatformInfo(s->dev_platform[index], CL_PLATFORM_NAME, sizeof plat - 1, plat, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_VERSION, sizeof ver - 1, ver, NULL);
  clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof drv - 1, drv, NULL);
  /* "OpenCL 3.0 PoCL HSTR: ..." - the version words come first. */
  char *cut = strstr(ver, " HSTR:");
  if (cut) *cut = '\0';
  snprintf(d->name, sizeof d->name, "%s", name);
  snprintf(d->vendor, sizeof d->vendor, "%s; platform %s", vendor, plat);
  snprintf(d->driver, sizeof d->driver, "%s, driver %s%s", ver, drv, index == s->chosen ? " (used)" : "");
  cl_device_type t = 0;
  clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof t, &t, NULL);
  d->kind = (t & CL_DEVICE_TYPE_GPU) ? ER_DEVICE_GPU : (t & CL_DEVICE_TYPE_CPU) ? ER_DEVICE_CPU
           : (t & CL_DEVICE_TYPE_ACCELERATOR) ? ER_DEVICE_NPU : ER_DEVICE_OTHER;
  cl_ulong mem = 0;
  cl_uint cu = 0;
  clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  d->memory_bytes = mem;
  d->compute_units = (int)cu;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* What the backend runs                                                     */
/* ======================================================================== */

typedef enum kind {
  OP_UNARY, OP_BINARY, OP_VARIADIC, OP_AFFINE, OP_CONV, OP_POOL, OP_GEMM, OP_MATMUL, OP_CONCAT,
  OP_ALIAS, OP_TRANSPOSE, OP_SOFTMAX, OP_LRN, OP_QUANT, OP_DEQUANT, OP_QCONV, OP_QMATMUL, OP_FILL,
  OP_CUSTOM
} kind;

/* Codes shared with opencl-kernels.cl. */
enum {
  U_RELU, U_SIGMOID, U_TANH, U_EXP, U_LOG, U_ABS, U_NEG, U_SQRT, U_RECIP, U_FLOOR, U_CEIL,
  U_ERF, U_LEAKY, U_ELU, U_SELU, U_HARDSIGMOID, U_HARDSWISH, U_CLIP, U_GELU, U_GELU_TANH,
  U_SOFTPLUS, U_SOFTSIGN, U_IDENTITY, U_SIN, U_COS, U_ROUND
};
enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_PRELU, B_MEAN2 };

static const struct op_entry {
  const char *name;
  kind k;
  int sub;
} op_table[] = {
    {"Relu", OP_UNARY, U_RELU},          {"Sigmoid", OP_UNARY, U_SIGMOID},
    {"Tanh", OP_UNARY, U_TANH},          {"Exp", OP_UNARY, U_EXP},
    {"Log", OP_UNARY, U_LOG},            {"Abs", OP_UNARY, U_ABS},
    {"Neg", OP_UNARY, U_NEG},            {"Sqrt", OP_UNARY, U_SQRT},
    {"Reciprocal", OP_UNARY, U_RECIP},   {"Floor", OP_UNARY, U_FLOOR},
    {"Ceil", OP_UNARY, U_CEIL},          {"Erf", OP_UNARY, U_ERF},
    {"LeakyRelu", OP_UNARY, U_LEAKY},    {"Elu", OP_UNARY, U_ELU},
    {"Selu", OP_UNARY, U_SELU},          {"HardSigmoid", OP_UNARY, U_HARDSIGMOID},
    {"HardSwish", OP_UNARY, U_HARDSWISH}, {"Clip", OP_UNARY, U_CLIP},
    {"Gelu", OP_UNARY, U_GELU},          {"Softplus", OP_UNARY, U_SOFTPLUS},
    {"Softsign", OP_UNARY, U_SOFTSIGN},  {"Sin", OP_UNARY, U_SIN},
    {"Cos", OP_UNARY, U_COS},            {"Round", OP_UNARY, U_ROUND},
    {"Add", OP_BINARY, B_ADD},           {"Sub", OP_BINARY, B_SUB},
    {"Mul", OP_BINARY, B_MUL},           {"Div", OP_BINARY, B_DIV},
    {"Pow", OP_BINARY, B_POW},           {"PRelu", OP_BINARY, B_PRELU},
    {"Sum", OP_VARIADIC, B_ADD},         {"Max", OP_VARIADIC, B_MAX},
    {"Min", OP_VARIADIC, B_MIN},         {"BatchNormalization", OP_AFFINE, 0},
    {"Conv", OP_CONV, 0},                {"MaxPool", OP_POOL, 1},
    {"AveragePool", OP_POOL, 0},         {"GlobalMaxPool", OP_POOL, 3},
    {"GlobalAveragePool", OP_POOL, 2},   {"Gemm", OP_GEMM, 0},
    {"MatMul", OP_MATMUL, 0},            {"Concat", OP_CONCAT, 0},
    {"Reshape", OP_ALIAS, 0},            {"Flatten", OP_ALIAS, 0},
    {"Squeeze", OP_ALIAS, 0},            {"Unsqueeze", OP_ALIAS, 0},
    {"Identity", OP_ALIAS, 0},           {"Dropout", OP_ALIAS, 0},
    {"Transpose", OP_TRANSPOSE, 0},      {"Softmax", OP_SOFTMAX, 0},
    {"LogSoftmax", OP_SOFTMAX, 1},       {"LRN", OP_LRN, 0},
    {"QuantizeLinear", OP_QUANT, 0},     {"DequantizeLinear", OP_DEQUANT, 0},
    {"QLinearConv", OP_QCONV, 0},        {"QLinearMatMul", OP_QMATMUL, 0},
    {"ConstantOfShape", OP_FILL, 0},
};

static const struct op_entry *find_op(const er_node *n) {
  if (n->domain[0] != '\0') return NULL;
  for (size_t i = 0; i < ER_ARRAY_LEN(op_table); i++)
    if (strcmp(op_table[i].name, n->op_type) == 0) return &op_table[i];
  return NULL;
}

static er_dtype in_type(const er_graph *g, const er_node *n, int k) {
  return k < n->n_inputs && n->inputs[k] >= 0 ? g->values[n->inputs[k]].info.dtype : ER_DTYPE_UNDEFINED;
}
static int in_rank(const er_graph *g, const er_node *n, int k) {
  return k < n->n_inputs && n->inputs[k] >= 0 ? g->values[n->inputs[k]].info.rank : -2;
}
static bool in_fixed(const er_graph *g, const er_node *n, int k) {
  return k >= n->n_inputs || n->inputs[k] < 0 || er__value_is_fixed(g, n->inputs[k]);
}
static const er_tensor *in_const(const er_graph *g, const er_node *n, int k) {
  if (k >= n->n_inputs || n->inputs[k] < 0 || !er__value_is_fixed(g, n->inputs[k])) return NULL;
  return g->values[n->inputs[k]].constant;
}
static int64_t attr_i(const er_node *n, const char *name, int64_t def) {
  const er_attr *a = er__node_attr(n, name);
  return a && a->type == ER_ATTR_INT ? a->i : def;
}
static float attr_f(const er_node *n, const char *name, float def) {
  const er_attr *a = er__node_attr(n, name);
  return a && a->type == ER_ATTR_FLOAT ? a->f : def;
}
/* True when nothing reads value `id` (no node input, not a graph output,
 * and no subgraph that could capture it). */
static bool value_unused(const er_graph *g, int32_t id) {
  if (g->values[id].is_graph_output) return false;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == id) return false;
    for (int a = 0; a < n->n_attrs; a++)
      if (n->attrs[a].type == ER_ATTR_GRAPH || n->attrs[a].type == ER_ATTR_GRAPHS) return false;
  }
  return true;
}

static bool is_q8(er_dtype t) { return t == ER_DTYPE_INT8 || t == ER_DTYPE_UINT8; }

#define NO(...)                         \
  do {                                  \
    snprintf(why, size, __VA_ARGS__);   \
    return false;                       \
  } while (0)

static bool ocl_supports_op(er_backend *be, const er_graph *g, const er_node *n, char *why,
                            size_t size) {
  ER_UNUSED(be);
  if (er__custom_kernel_find("opencl", n)) return true;
  const struct op_entry *e = find_op(n);
  if (!e) NO("no OpenCL kernel for %s%s%s", n->domain, n->domain[0] ? "." : "", n->op_type);
  /* Shape rules must be computable from shapes alone: inputs they read
   * by value must be constants. */
  for (int k = 0; k < n->n_inputs && k < 32; k++)
    if ((n->op->value_inputs & (1u << k)) && !in_fixed(g, n, k))
      NO("input %d ('%s') decides the output shape at run time", k, g->values[n->inputs[k]].name);
  for (int k = 0; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0 && g->values[n->inputs[k]].info.rank < 0)
      NO("the rank of input %d is unknown at load", k);
  bool quant = e->k == OP_DEQUANT || e->k == OP_QCONV || e->k == OP_QMATMUL || e->k == OP_FILL;
  if (e->k != OP_ALIAS && e->k != OP_CONCAT && e->k != OP_TRANSPOSE && !quant &&
      in_type(g, n, 0) != ER_DTYPE_FLOAT)
    NO("input type %s; the OpenCL kernels compute float32", er_dtype_name(in_type(g, n, 0)));
  size_t es = er_dtype_size(in_type(g, n, 0));
  switch (e->k) {
    case OP_UNARY:
      if (e->sub == U_CLIP && (!in_fixed(g, n, 1) || !in_fixed(g, n, 2)))
        NO("Clip bounds computed at run time");
      if (strcmp(n->op_type, "Gelu") == 0) {
        const er_attr *a = er__node_attr(n, "approximate");
        if (a && a->type == ER_ATTR_STRING && strcmp(a->s, "none") != 0 && strcmp(a->s, "tanh") != 0)
          NO("Gelu approximate='%s'", a->s);
      }
      return true;
    case OP_BINARY:
    case OP_VARIADIC:
      for (int k = 0; k < n->n_inputs; k++)
        if (in_type(g, n, k) != ER_DTYPE_FLOAT) NO("input %d is not float32", k);
      return true;
    case OP_AFFINE:
      if (n->n_outputs > 1 && (n->outputs[1] >= 0 || (n->n_outputs > 2 && n->outputs[2] >= 0)))
        NO("BatchNormalization in training mode");
      if (attr_i(n, "training_mode", 0)) NO("BatchNormalization in training mode");
      for (int k = 1; k < 5; k++)
        if (!in_const(g, n, k) || in_const(g, n, k)->dtype != ER_DTYPE_FLOAT)
          NO("BatchNormalization input %d is not a float32 constant", k);
      if (in_rank(g, n, 0) < 2) NO("BatchNormalization of rank %d", in_rank(g, n, 0));
      return true;
    case OP_CONV:
    case OP_QCONV: {
      int r = in_rank(g, n, 0);
      if (r != 3 && r != 4) NO("%dD convolution (the OpenCL kernel does 1D and 2D)", r - 2);
      if (e->k == OP_QCONV) {
        if (!is_q8(in_type(g, n, 0)) || !is_q8(in_type(g, n, 3)))
          NO("QLinearConv of %s x %s (int8/uint8 only)", er_dtype_name(in_type(g, n, 0)),
             er_dtype_name(in_type(g, n, 3)));
        for (int k = 1; k < 9; k++)
          if (k != 3 && k < n->n_inputs && !in_const(g, n, k)) NO("QLinearConv input %d is not a constant", k);
      } else if (in_type(g, n, 1) != ER_DTYPE_FLOAT) {
        NO("Conv weights are not float32");
      }
      return true;
    }
    case OP_POOL: {
      int r = in_rank(g, n, 0);
      if (r != 3 && r != 4) NO("%dD pooling (the OpenCL kernel does 1D and 2D)", r - 2);
      if (n->n_outputs > 1 && n->outputs[1] >= 0) NO("MaxPool with an Indices output");
      return true;
    }
    case OP_GEMM:
      if (in_rank(g, n, 0) != 2 || in_rank(g, n, 1) != 2) NO("Gemm inputs must be 2-D");
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && (in_rank(g, n, 2) > 2 || in_type(g, n, 2) != ER_DTYPE_FLOAT))
        NO("Gemm C of rank %d", in_rank(g, n, 2));
      if (in_type(g, n, 1) != ER_DTYPE_FLOAT) NO("Gemm B is not float32");
      return true;
    case OP_MATMUL:
      if (in_rank(g, n, 0) < 2 || in_rank(g, n, 1) < 2)
        NO("MatMul with a 1-D operand (the kernel multiplies matrices)");
      if (in_type(g, n, 1) != ER_DTYPE_FLOAT) NO("MatMul B is not float32");
      return true;
    case OP_CONCAT:
    case OP_TRANSPOSE:
    case OP_ALIAS:
      if (!es) NO("type %s cannot be moved", er_dtype_name(in_type(g, n, 0)));
      if (e->k == OP_ALIAS && strcmp(n->op_type, "Dropout") == 0) {
        if (n->n_outputs > 1 && n->outputs[1] >= 0 && !value_unused(g, n->outputs[1]))
          NO("Dropout with a mask output that is used");
        if (!in_fixed(g, n, 2)) NO("Dropout training_mode decided at run time");
        const er_tensor *tm = in_const(g, n, 2);
        if (tm && er__load_i64(tm->data, tm->dtype, 0)) NO("Dropout in training mode");
      }
      return true;
    case OP_SOFTMAX:
    case OP_LRN:
      return true;
    case OP_QUANT: {
      er_dtype out = n->outputs[0] >= 0 ? g->values[n->outputs[0]].info.dtype : ER_DTYPE_UNDEFINED;
      if (!is_q8(out)) NO("QuantizeLinear to %s (int8/uint8 only)", er_dtype_name(out));
      if (attr_i(n, "block_size", 0)) NO("blocked quantization");
      const er_tensor *sc = in_const(g, n, 1);
      if (!sc || sc->dtype != ER_DTYPE_FLOAT) NO("the scale is not a float32 constant");
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && !in_const(g, n, 2)) NO("the zero point is not a constant");
      return true;
    }
    case OP_DEQUANT: {
      if (!is_q8(in_type(g, n, 0))) NO("DequantizeLinear of %s (int8/uint8 only)", er_dtype_name(in_type(g, n, 0)));
      if (attr_i(n, "block_size", 0)) NO("blocked quantization");
      const er_tensor *sc = in_const(g, n, 1);
      if (!sc || sc->dtype != ER_DTYPE_FLOAT) NO("the scale is not a float32 constant");
      if (n->n_inputs > 2 && n->inputs[2] >= 0 && !in_const(g, n, 2)) NO("the zero point is not a constant");
      return true;
    }
    case OP_QMATMUL:
      if (in_rank(g, n, 0) != 2 || in_rank(g, n, 3) != 2) NO("QLinearMatMul of rank > 2");
      if (!is_q8(in_type(g, n, 0)) || !is_q8(in_type(g, n, 3))) NO("QLinearMatMul of non-8-bit types");
      for (int k = 1; k < 8; k++)
        if (k != 3 && !in_const(g, n, k)) NO("QLinearMatMul input %d is not a constant", k);
      if (in_const(g, n, 1)->dtype != ER_DTYPE_FLOAT) NO("QLinearMatMul scales are not float32");
      return true;
    case OP_FILL: {
      const er_attr *v = er__node_attr(n, "value");
      if (v && (v->type != ER_ATTR_TENSOR || !v->t || er_dtype_size(v->t->dtype) == 0))
        NO("ConstantOfShape value of a type that cannot be filled");
      return true;
    }
    case OP_CUSTOM:
      return true;
  }
  NO("not supported");
}

/* ======================================================================== */
/* Compile                                                                   */
/* ======================================================================== */

typedef struct onode {
  const er_node *node;
  int32_t index;
  kind k;
  int sub;
  float a, b;                 /* unary parameters */
  cl_mem aux0, aux1;          /* BN scale/shift; quant scale/zp buffers */
  const er_custom_kernel *custom;
} onode;

typedef struct compiled {
  const er_graph *g;
  onode *nodes;               /* [n_nodes] */
  int32_t n_nodes;
  cl_mem *weights;            /* [n_values]: device copies of constants */
  int32_t *last;              /* [n_values] position of the last reader in
                                 the segment; INT32_MAX = keep */
  er_subgraph sg;
} compiled;

static void ocl_release(er_backend *be, void *p) {
  ER_UNUSED(be);
  compiled *c = p;
  if (!c) return;
  for (int32_t j = 0; j < c->n_nodes; j++) {
    if (c->nodes[j].aux0) clReleaseMemObject(c->nodes[j].aux0);
    if (c->nodes[j].aux1) clReleaseMemObject(c->nodes[j].aux1);
  }
  if (c->weights)
    for (int32_t v = 0; v < c->g->n_values; v++)
      if (c->weights[v]) clReleaseMemObject(c->weights[v]);
  free(c->weights);
  free(c->nodes);
  free(c->last);
  free(c);
}

static er_status make_buffer(ocl *s, const void *host, size_t bytes, cl_mem *out, const er_node *node) {
  cl_int e;
  /* OpenCL has no empty buffers: a zero-size tensor gets one spare word. */
  size_t sz = bytes ? bytes : 4;
  *out = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE | (host && bytes ? CL_MEM_COPY_HOST_PTR : 0), sz,
                        host && bytes ? (void *)host : NULL, &e);
  if (e != CL_SUCCESS) {
    *out = NULL;
    return cl_fail(e, "clCreateBuffer", node);
  }
  return ER_STATUS_OK;
}

static float const_f32(const er_tensor *t, int64_t i, float def) {
  return t && t->data && er__tensor_count(t) > i ? (float)er__load_f64(t->data, t->dtype, i) : def;
}

static er_status compile_node(ocl *s, compiled *c, onode *o) {
  const er_graph *g = c->g;
  const er_node *n = o->node;
  o->custom = er__custom_kernel_find("opencl", n);
  if (o->custom) {
    o->k = OP_CUSTOM;
    return ER_STATUS_OK;
  }
  const struct op_entry *e = find_op(n);
  ER_ASSERT(e);
  o->k = e->k;
  o->sub = e->sub;
  switch (o->sub == U_GELU && o->k == OP_UNARY ? -1 : (int)o->k) {
    case -1: {
      const er_attr *a = er__node_attr(n, "approximate");
      if (a && a->type == ER_ATTR_STRING && strcmp(a->s, "tanh") == 0) o->sub = U_GELU_TANH;
      break;
    }
    case OP_UNARY:
      if (o->sub == U_LEAKY) o->a = attr_f(n, "alpha", 0.01f);
      if (o->sub == U_ELU) o->a = attr_f(n, "alpha", 1.0f);
      if (o->sub == U_SELU) {
        o->a = attr_f(n, "alpha", 1.67326319217681884765625f);
        o->b = attr_f(n, "gamma", 1.05070102214813232421875f);
      }
      if (o->sub == U_HARDSIGMOID) {
        o->a = attr_f(n, "alpha", 0.2f);
        o->b = attr_f(n, "beta", 0.5f);
      }
      if (o->sub == U_CLIP) {
        if (n->version < 11) {
          o->a = attr_f(n, "min", -INFINITY);
          o->b = attr_f(n, "max", INFINITY);
        } else {
          o->a = const_f32(in_const(g, n, 1), 0, -INFINITY);
          o->b = const_f32(in_const(g, n, 2), 0, INFINITY);
        }
      }
      break;
    case OP_AFFINE: {
      const er_tensor *sc = in_const(g, n, 1), *bi = in_const(g, n, 2), *mu = in_const(g, n, 3),
                      *var = in_const(g, n, 4);
      int64_t ch = er__tensor_count(sc);
      float eps = attr_f(n, "epsilon", 1e-5f);
      float *scale = malloc(((size_t)ch + 1) * sizeof *scale), *shift = malloc(((size_t)ch + 1) * sizeof *shift);
      if (!scale || !shift) {
        free(scale);
        free(shift);
        return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for opencl");
      }
      /* Fold the statistics once: y = x * s + t. */
      for (int64_t i = 0; i < ch; i++) {
        double sv = const_f32(sc, i, 1) / sqrt((double)const_f32(var, i, 1) + eps);
        scale[i] = (float)sv;
        shift[i] = (float)(const_f32(bi, i, 0) - const_f32(mu, i, 0) * sv);
      }
      er_status st = make_buffer(s, scale, (size_t)ch * sizeof(float), &o->aux0, n);
      if (st == ER_STATUS_OK) st = make_buffer(s, shift, (size_t)ch * sizeof(float), &o->aux1, n);
      free(scale);
      free(shift);
      return st;
    }
    case OP_QUANT:
    case OP_DEQUANT:
    case OP_QCONV:
    case OP_QMATMUL: {
      /* Scale (float) and zero point (8-bit) buffers of the per-channel
       * operand: the only input or the weights / B. */
      int si = o->k == OP_QCONV ? 4 : o->k == OP_QMATMUL ? 4 : 1;
      const er_tensor *sc = in_const(g, n, si), *zp = in_const(g, n, si + 1);
      int64_t cnt = er__tensor_count(sc);
      float *f = malloc(((size_t)cnt + 1) * sizeof *f);
      if (!f) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for opencl");
      for (int64_t i = 0; i < cnt; i++) f[i] = const_f32(sc, i, 1);
      er_status st = make_buffer(s, f, (size_t)cnt * sizeof(float), &o->aux0, n);
      free(f);
      uint8_t zero[1] = {0};
      if (st == ER_STATUS_OK)
        st = zp && zp->data ? make_buffer(s, zp->data, zp->nbytes, &o->aux1, n)
                            : make_buffer(s, zero, 1, &o->aux1, n);
      return st;
    }
    default:
      break;
  }
  return ER_STATUS_OK;
}

static er_status ocl_compile(er_backend *be, const er_subgraph *sg, void **out) {
  ocl *s = get_state();
  const er_graph *g = sg->graph;
  if (s->why[0]) return er__error(ER_STATUS_BACKEND, "opencl: %s", s->why);
  compiled *c = calloc(1, sizeof *c);
  if (!c) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for opencl");
  c->g = g;
  c->sg = *sg;
  c->n_nodes = sg->n_nodes;
  c->nodes = calloc((size_t)sg->n_nodes + 1, sizeof *c->nodes);
  c->weights = calloc((size_t)g->n_values + 1, sizeof *c->weights);
  c->last = malloc(((size_t)g->n_values + 1) * sizeof *c->last);
  er_id_list reads = {0};
  er_status st = ER_STATUS_OK;
  if (!c->nodes || !c->weights || !c->last) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for opencl");
    goto fail;
  }
  for (int32_t v = 0; v < g->n_values; v++) c->last[v] = -1;
  pthread_mutex_lock(&s->lock);
  for (int32_t j = 0; j < sg->n_nodes && st == ER_STATUS_OK; j++) {
    onode *o = &c->nodes[j];
    o->index = sg->nodes[j];
    o->node = &g->nodes[o->index];
    st = compile_node(s, c, o);
    /* Weights go to the device once. */
    for (int k = 0; k < o->node->n_inputs && st == ER_STATUS_OK; k++) {
      int32_t id = o->node->inputs[k];
      if (id < 0 || c->weights[id] || !er__value_is_fixed(g, id) || !g->values[id].constant) continue;
      const er_tensor *t = g->values[id].constant;
      st = make_buffer(s, t->data, t->nbytes, &c->weights[id], o->node);
    }
    if (st == ER_STATUS_OK && !er__node_reads(g, o->index, &reads))
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for opencl");
    for (int32_t k = 0; st == ER_STATUS_OK && k < reads.n; k++) c->last[reads.v[k]] = j;
  }
  pthread_mutex_unlock(&s->lock);
  free(reads.v);
  if (st != ER_STATUS_OK) goto fail;
  for (int32_t k = 0; k < sg->n_outputs; k++) c->last[sg->outputs[k]] = INT32_MAX;
  for (int32_t k = 0; k < g->n_outputs; k++) c->last[g->outputs[k]] = INT32_MAX;
  *out = c;
  return ER_STATUS_OK;
fail:
  ocl_release(be, c);
  return st;
}

/* ======================================================================== */
/* Compute                                                                   */
/* ======================================================================== */

/* A value during one run: its shape (data NULL, or the constant's data for
 * shape rules that read it) and its device buffer. */
typedef struct dval {
  er_tensor t;
  cl_mem mem;
  bool owned;                 /* released by this run (not a weight) */
} dval;

typedef struct run {
  ocl *s;
  compiled *c;
  dval *v;                    /* [n_values] */
} run;

static void drop(run *r, int32_t id) {
  if (r->v[id].mem && r->v[id].owned) clReleaseMemObject(r->v[id].mem);
  r->v[id].mem = NULL;
  r->v[id].owned = false;
}

#define SET(kern, idx, val)                                                    \
  do {                                                                         \
    cl_int e_ = clSetKernelArg(kern, (cl_uint)(idx), sizeof(val), &(val));      \
    if (e_ != CL_SUCCESS) return cl_fail(e_, "clSetKernelArg", node);          \
  } while (0)

static er_status launch(run *r, int k, size_t global, const er_node *node) {
  if (global == 0) return ER_STATUS_OK;
  cl_int e = clEnqueueNDRangeKernel(r->s->queue, r->s->k[k], 1, NULL, &global, NULL, 0, NULL, NULL);
  return e == CL_SUCCESS ? ER_STATUS_OK : cl_fail(e, kernel_names[k], node);
}

static int count_i(const er_tensor *t) { return (int)er__tensor_count(t); }

/* Aligned strides (elements) of `in` for output dims `out` (broadcast). */
static void bcast_strides(const er_tensor *in, const er_tensor *out, cl_int8 *dims, cl_int8 *strides) {
  int64_t st = 1;
  for (int d = 0; d < 8; d++) {
    dims->s[d] = d < out->rank ? (cl_int)out->dims[d] : 1;
    strides->s[d] = 0;
  }
  for (int d = out->rank - 1; d >= 0; d--) {
    int di = d - (out->rank - in->rank);
    if (di < 0) break;
    strides->s[d] = in->dims[di] == 1 ? 0 : (cl_int)st;
    st *= in->dims[di];
  }
}

static er_status run_binary(run *r, const er_node *node, int op, cl_mem a, const er_tensor *ta, cl_mem b,
                            const er_tensor *tb, cl_mem y, const er_tensor *ty) {
  cl_kernel k = r->s->k[K_BINARY];
  cl_int8 dims, sa, sb;
  bcast_strides(ta, ty, &dims, &sa);
  bcast_strides(tb, ty, &dims, &sb);
  cl_int opc = op, rank = ty->rank;
  SET(k, 0, a);
  SET(k, 1, b);
  SET(k, 2, y);
  SET(k, 3, opc);
  SET(k, 4, rank);
  SET(k, 5, dims);
  SET(k, 6, sa);
  SET(k, 7, sb);
  return launch(r, K_BINARY, (size_t)count_i(ty), node);
}

/* Convolution / pooling geometry: begin and end pads per spatial axis from
 * pads or auto_pad (as the ONNX rule computes SAME). */
static void spatial(const er_node *n, const er_tensor *x, const er_tensor *y, const int64_t *kernel,
                    const int64_t *strides, const int64_t *dil, int nsp, int64_t *pb, int64_t *pe) {
  const er_attr *pads = er__node_attr(n, "pads");
  const er_attr *ap = er__node_attr(n, "auto_pad");
  const char *mode = ap && ap->type == ER_ATTR_STRING ? ap->s : "NOTSET";
  for (int d = 0; d < nsp; d++) {
    pb[d] = pe[d] = 0;
    if (strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0) {
      int64_t in = x->dims[2 + d], out = y->dims[2 + d];
      int64_t total = (out - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1 - in;
      if (total < 0) total = 0;
      pb[d] = mode[5] == 'U' ? total / 2 : total - total / 2;
      pe[d] = total - pb[d];
    } else if (strcmp(mode, "VALID") != 0 && pads && pads->type == ER_ATTR_INTS && pads->n == 2 * nsp) {
      pb[d] = pads->ints[d];
      pe[d] = pads->ints[nsp + d];
    }
  }
}

static void ints_attr(const er_node *n, const char *name, int count, int64_t def, int64_t *out) {
  const er_attr *a = er__node_attr(n, name);
  for (int i = 0; i < count; i++)
    out[i] = a && a->type == ER_ATTR_INTS && a->n == count ? a->ints[i] : def;
}

/* The 16 geometry ints shared by conv2d_f32 and qconv2d; 1-D runs as H = 1. */
static void conv_params(const er_node *n, const er_tensor *x, const er_tensor *w, const er_tensor *y,
                        cl_int16 *p) {
  int nsp = x->rank - 2;
  int64_t k[2] = {1, 1}, st[2], dl[2], pb[2], pe[2];
  for (int d = 0; d < nsp && d < 2; d++) k[d] = w->dims[2 + d];
  ints_attr(n, "strides", nsp, 1, st);
  ints_attr(n, "dilations", nsp, 1, dl);
  spatial(n, x, y, k, st, dl, nsp, pb, pe);
  bool one = nsp == 1;
  int64_t v[16] = {x->dims[0], x->dims[1], one ? 1 : x->dims[2], x->dims[one ? 2 : 3],
                   y->dims[1], one ? 1 : y->dims[2], y->dims[one ? 2 : 3], one ? 1 : k[0],
                   k[one ? 0 : 1], one ? 1 : st[0], st[one ? 0 : 1], one ? 0 : pb[0],
                   pb[one ? 0 : 1], one ? 1 : dl[0], dl[one ? 0 : 1], attr_i(n, "group", 1)};
  for (int i = 0; i < 16; i++) p->s[i] = (cl_int)v[i];
}

static er_status run_pool(run *r, const onode *o, dval *x, dval *y) {
  const er_node *node = o->node;
  const er_tensor *tx = &x->t;
  int nsp = tx->rank - 2;
  bool one = nsp == 1, global = o->sub >= 2, is_max = o->sub == 1 || o->sub == 3;
  int64_t k[2] = {1, 1}, st[2], dl[2], pb[2] = {0, 0}, pe[2] = {0, 0};
  for (int d = 0; d < nsp && d < 2; d++) k[d] = global ? tx->dims[2 + d] : 1;
  if (!global) ints_attr(node, "kernel_shape", nsp, 1, k);
  ints_attr(node, "strides", nsp, 1, st);
  ints_attr(node, "dilations", nsp, 1, dl);
  if (global)
    for (int d = 0; d < nsp; d++) st[d] = dl[d] = 1;
  else
    spatial(node, tx, &y->t, k, st, dl, nsp, pb, pe);
  int64_t v[16] = {one ? 0 : pe[0], pe[one ? 0 : 1], one ? 1 : tx->dims[2], tx->dims[one ? 2 : 3],
                   one ? 1 : y->t.dims[2], y->t.dims[one ? 2 : 3], one ? 1 : k[0], k[one ? 0 : 1],
                   one ? 1 : st[0], st[one ? 0 : 1], one ? 0 : pb[0], pb[one ? 0 : 1],
                   one ? 1 : dl[0], dl[one ? 0 : 1], attr_i(node, "count_include_pad", 0), is_max};
  cl_int16 p;
  for (int i = 0; i < 16; i++) p.s[i] = (cl_int)v[i];
  cl_kernel kern = r->s->k[K_POOL];
  SET(kern, 0, x->mem);
  SET(kern, 1, y->mem);
  SET(kern, 2, p);
  return launch(r, K_POOL, (size_t)count_i(&y->t), node);
}

static er_status run_gemm(run *r, const onode *o, dval *a, dval *b, dval *cv, dval *y) {
  const er_node *node = o->node;
  cl_kernel k = r->s->k[K_GEMM];
  cl_int M, N, K, sai, sak, sbk, sbj, sci = 0, scj = 0, has_c = cv != NULL, brank = 0;
  cl_float alpha = 1, beta = 1;
  cl_int8 bdims, bsa, bsb;
  for (int d = 0; d < 8; d++) bdims.s[d] = 1, bsa.s[d] = bsb.s[d] = 0;
  size_t batch = 1;
  if (o->k == OP_GEMM) {
    bool ta = attr_i(node, "transA", 0), tb = attr_i(node, "transB", 0);
    M = (cl_int)a->t.dims[ta ? 1 : 0];
    K = (cl_int)a->t.dims[ta ? 0 : 1];
    N = (cl_int)b->t.dims[tb ? 0 : 1];
    sai = ta ? 1 : K;
    sak = ta ? M : 1;
    sbk = tb ? 1 : N;
    sbj = tb ? K : 1;
    alpha = attr_f(node, "alpha", 1.0f);
    beta = attr_f(node, "beta", 1.0f);
    if (cv) {
      const er_tensor *c = &cv->t;
      scj = c->rank >= 1 && c->dims[c->rank - 1] != 1 ? 1 : 0;
      sci = c->rank == 2 && c->dims[0] != 1 ? (cl_int)c->dims[1] : 0;
    }
  } else {
    const er_tensor *ta = &a->t, *tb = &b->t, *ty = &y->t;
    M = (cl_int)ta->dims[ta->rank - 2];
    K = (cl_int)ta->dims[ta->rank - 1];
    N = (cl_int)tb->dims[tb->rank - 1];
    sai = K;
    sak = 1;
    sbk = N;
    sbj = 1;
    brank = ty->rank - 2;
    /* Batch strides in elements of each operand, 0 where it broadcasts. */
    int64_t sa_ = (int64_t)M * K, sb_ = (int64_t)K * N;
    for (int d = brank - 1; d >= 0; d--) {
      bdims.s[d] = (cl_int)ty->dims[d];
      batch *= (size_t)ty->dims[d];
      int da = d - (brank - (ta->rank - 2)), db = d - (brank - (tb->rank - 2));
      if (da >= 0) {
        bsa.s[d] = ta->dims[da] == 1 ? 0 : (cl_int)sa_;
        sa_ *= ta->dims[da];
      }
      if (db >= 0) {
        bsb.s[d] = tb->dims[db] == 1 ? 0 : (cl_int)sb_;
        sb_ *= tb->dims[db];
      }
    }
  }
  cl_mem cm = cv ? cv->mem : a->mem;
  SET(k, 0, a->mem);
  SET(k, 1, b->mem);
  SET(k, 2, cm);
  SET(k, 3, has_c);
  SET(k, 4, y->mem);
  SET(k, 5, M);
  SET(k, 6, N);
  SET(k, 7, K);
  SET(k, 8, sai);
  SET(k, 9, sak);
  SET(k, 10, sbk);
  SET(k, 11, sbj);
  SET(k, 12, sci);
  SET(k, 13, scj);
  SET(k, 14, alpha);
  SET(k, 15, beta);
  SET(k, 16, brank);
  SET(k, 17, bdims);
  SET(k, 18, bsa);
  SET(k, 19, bsb);
  if (M == 0 || N == 0 || batch == 0) return ER_STATUS_OK;
  size_t local[3] = {16, 16, 1};
  size_t global[3] = {((size_t)N + 15) / 16 * 16, ((size_t)M + 15) / 16 * 16, batch};
  cl_int e = clEnqueueNDRangeKernel(r->s->queue, k, 3, NULL, global, local, 0, NULL, NULL);
  return e == CL_SUCCESS ? ER_STATUS_OK : cl_fail(e, "gemm_f32", node);
}

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= d[i];
  return p;
}

static int q_signed(er_dtype t) { return t == ER_DTYPE_INT8; }

static er_status run_node(run *r, const onode *o) {
  const er_node *node = o->node;
  const er_graph *g = r->c->g;
  dval *x = node->n_inputs > 0 && node->inputs[0] >= 0 ? &r->v[node->inputs[0]] : NULL;
  dval *y = &r->v[node->outputs[0]];
  cl_kernel k;
  switch (o->k) {
    case OP_UNARY: {
      k = r->s->k[K_UNARY];
      cl_int sub = o->sub;
      cl_float a = o->a, b = o->b;
      SET(k, 0, x->mem);
      SET(k, 1, y->mem);
      SET(k, 2, sub);
      SET(k, 3, a);
      SET(k, 4, b);
      return launch(r, K_UNARY, (size_t)count_i(&y->t), node);
    }
    case OP_BINARY:
      return run_binary(r, node, o->sub, x->mem, &x->t, r->v[node->inputs[1]].mem, &r->v[node->inputs[1]].t,
                        y->mem, &y->t);
    case OP_VARIADIC: {
      if (node->n_inputs == 1) {
        cl_int e = clEnqueueCopyBuffer(r->s->queue, x->mem, y->mem, 0, 0, x->t.nbytes ? x->t.nbytes : 4, 0,
                                       NULL, NULL);
        return e == CL_SUCCESS ? ER_STATUS_OK : cl_fail(e, "clEnqueueCopyBuffer", node);
      }
      /* Folds left to right into y; each step reads the previous y (same
       * shape as y, or the first input). */
      er_status st = run_binary(r, node, o->sub, x->mem, &x->t, r->v[node->inputs[1]].mem,
                                &r->v[node->inputs[1]].t, y->mem, &y->t);
      for (int i = 2; i < node->n_inputs && st == ER_STATUS_OK; i++) {
        cl_mem tmp;
        st = make_buffer(r->s, NULL, y->t.nbytes, &tmp, node);
        if (st != ER_STATUS_OK) break;
        cl_int e = clEnqueueCopyBuffer(r->s->queue, y->mem, tmp, 0, 0, y->t.nbytes ? y->t.nbytes : 4, 0, NULL,
                                       NULL);
        st = e == CL_SUCCESS ? run_binary(r, node, o->sub, tmp, &y->t, r->v[node->inputs[i]].mem,
                                          &r->v[node->inputs[i]].t, y->mem, &y->t)
                             : cl_fail(e, "clEnqueueCopyBuffer", node);
        clReleaseMemObject(tmp);
      }
      return st;
    }
    case OP_AFFINE: {
      k = r->s->k[K_AFFINE];
      cl_int c = (cl_int)x->t.dims[1], inner = (cl_int)prod(x->t.dims, 2, x->t.rank);
      SET(k, 0, x->mem);
      SET(k, 1, y->mem);
      SET(k, 2, o->aux0);
      SET(k, 3, o->aux1);
      SET(k, 4, c);
      SET(k, 5, inner);
      return launch(r, K_AFFINE, (size_t)count_i(&y->t), node);
    }
    case OP_CONV: {
      k = r->s->k[K_CONV];
      dval *w = &r->v[node->inputs[1]];
      dval *b = node->n_inputs > 2 && node->inputs[2] >= 0 ? &r->v[node->inputs[2]] : NULL;
      cl_int16 p;
      conv_params(node, &x->t, &w->t, &y->t, &p);
      cl_int has_b = b != NULL;
      cl_mem bm = b ? b->mem : w->mem;
      SET(k, 0, x->mem);
      SET(k, 1, w->mem);
      SET(k, 2, bm);
      SET(k, 3, has_b);
      SET(k, 4, y->mem);
      SET(k, 5, p);
      return launch(r, K_CONV, (size_t)count_i(&y->t), node);
    }
    case OP_POOL:
      return run_pool(r, o, x, y);
    case OP_GEMM:
    case OP_MATMUL: {
      dval *c = o->k == OP_GEMM && node->n_inputs > 2 && node->inputs[2] >= 0 ? &r->v[node->inputs[2]] : NULL;
      return run_gemm(r, o, x, &r->v[node->inputs[1]], c, y);
    }
    case OP_CONCAT: {
      k = r->s->k[K_CONCAT];
      int axis = (int)attr_i(node, "axis", 0);
      if (axis < 0) axis += y->t.rank;
      size_t es = er_dtype_size(y->t.dtype);
      cl_int inner_dst = (cl_int)(prod(y->t.dims, axis, y->t.rank) * (int64_t)es), offset = 0;
      for (int i = 0; i < node->n_inputs; i++) {
        dval *in = &r->v[node->inputs[i]];
        cl_int inner_src = (cl_int)(prod(in->t.dims, axis, in->t.rank) * (int64_t)es);
        SET(k, 0, in->mem);
        SET(k, 1, y->mem);
        SET(k, 2, inner_src);
        SET(k, 3, inner_dst);
        SET(k, 4, offset);
        ER_CHECK(launch(r, K_CONCAT, in->t.nbytes, node));
        offset += inner_src;
      }
      return ER_STATUS_OK;
    }
    case OP_TRANSPOSE: {
      k = r->s->k[K_TRANSPOSE];
      int rank = x->t.rank;
      int64_t perm[ER_MAX_RANK], in_st[ER_MAX_RANK];
      const er_attr *pa = er__node_attr(node, "perm");
      for (int d = 0; d < rank; d++) perm[d] = pa && pa->type == ER_ATTR_INTS ? pa->ints[d] : rank - 1 - d;
      er__strides(rank, x->t.dims, in_st);
      cl_int8 dims, st;
      for (int d = 0; d < 8; d++) {
        dims.s[d] = d < rank ? (cl_int)y->t.dims[d] : 1;
        st.s[d] = d < rank ? (cl_int)in_st[perm[d]] : 0;
      }
      cl_int rk = rank, es = (cl_int)er_dtype_size(x->t.dtype);
      SET(k, 0, x->mem);
      SET(k, 1, y->mem);
      SET(k, 2, rk);
      SET(k, 3, dims);
      SET(k, 4, st);
      SET(k, 5, es);
      return launch(r, K_TRANSPOSE, (size_t)count_i(&y->t), node);
    }
    case OP_SOFTMAX: {
      k = r->s->k[K_SOFTMAX];
      int rank = x->t.rank;
      int axis = (int)attr_i(node, "axis", node->version < 13 ? 1 : -1);
      if (axis < 0) axis += rank;
      cl_int len, inner, lg = o->sub;
      if (node->version < 13) {
        len = (cl_int)prod(x->t.dims, axis, rank);
        inner = 1;
      } else {
        len = (cl_int)x->t.dims[axis];
        inner = (cl_int)prod(x->t.dims, axis + 1, rank);
      }
      SET(k, 0, x->mem);
      SET(k, 1, y->mem);
      SET(k, 2, len);
      SET(k, 3, inner);
      SET(k, 4, lg);
      return launch(r, K_SOFTMAX, len ? (size_t)count_i(&y->t) / (size_t)len : 0, node);
    }
    case OP_LRN: {
      k = r->s->k[K_LRN];
      cl_int c = (cl_int)x->t.dims[1], inner = (cl_int)prod(x->t.dims, 2, x->t.rank),
             size = (cl_int)attr_i(node, "size", 1);
      cl_float al = attr_f(node, "alpha", 1e-4f), be = attr_f(node, "beta", 0.75f),
               bias = attr_f(node, "bias", 1.0f);
      SET(k, 0, x->mem);
      SET(k, 1, y->mem);
      SET(k, 2, c);
      SET(k, 3, inner);
      SET(k, 4, size);
      SET(k, 5, al);
      SET(k, 6, be);
      SET(k, 7, bias);
      return launch(r, K_LRN, (size_t)count_i(&y->t), node);
    }
    case OP_QUANT:
    case OP_DEQUANT: {
      bool q = o->k == OP_QUANT;
      k = r->s->k[q ? K_QUANT : K_DEQUANT];
      const er_tensor *sc = in_const(g, node, 1);
      cl_int axis_len = (cl_int)er__tensor_count(sc), inner = 1;
      if (axis_len > 1) {
        int axis = (int)attr_i(node, "axis", 1);
        if (axis < 0) axis += x->t.rank;
        inner = (cl_int)prod(x->t.dims, axis + 1, x->t.rank);
      }
      cl_int has_zp = node->n_inputs > 2 && node->inputs[2] >= 0;
      cl_int sgn = q_signed(q ? y->t.dtype : x->t.dtype);
      SET(k, 0, x->mem);
      SET(k, 1, y->mem);
      SET(k, 2, o->aux0);
      SET(k, 3, o->aux1);
      SET(k, 4, has_zp);
      SET(k, 5, sgn);
      SET(k, 6, axis_len);
      SET(k, 7, inner);
      return launch(r, q ? K_QUANT : K_DEQUANT, (size_t)count_i(&y->t), node);
    }
    case OP_QCONV: {
      k = r->s->k[K_QCONV];
      dval *w = &r->v[node->inputs[3]];
      dval *b = node->n_inputs > 8 && node->inputs[8] >= 0 ? &r->v[node->inputs[8]] : NULL;
      cl_int16 p;
      conv_params(node, &x->t, &w->t, &y->t, &p);
      const er_tensor *xz = in_const(g, node, 2), *yz = in_const(g, node, 7);
      cl_int8 q;
      q.s[0] = q_signed(x->t.dtype);
      q.s[1] = q_signed(w->t.dtype);
      q.s[2] = q_signed(y->t.dtype);
      q.s[3] = er__tensor_count(in_const(g, node, 4)) > 1;
      q.s[4] = xz ? (cl_int)er__load_i64(xz->data, xz->dtype, 0) : 0;
      q.s[5] = yz ? (cl_int)er__load_i64(yz->data, yz->dtype, 0) : 0;
      q.s[6] = b != NULL;
      q.s[7] = 0;
      cl_float xs = const_f32(in_const(g, node, 1), 0, 1), ys = const_f32(in_const(g, node, 6), 0, 1);
      cl_mem bm = b ? b->mem : o->aux0;
      SET(k, 0, x->mem);
      SET(k, 1, w->mem);
      SET(k, 2, bm);
      SET(k, 3, y->mem);
      SET(k, 4, o->aux0);
      SET(k, 5, o->aux1);
      SET(k, 6, xs);
      SET(k, 7, ys);
      SET(k, 8, p);
      SET(k, 9, q);
      return launch(r, K_QCONV, (size_t)count_i(&y->t), node);
    }
    case OP_QMATMUL: {
      k = r->s->k[K_QMATMUL];
      dval *b = &r->v[node->inputs[3]];
      const er_tensor *az = in_const(g, node, 2), *yz = in_const(g, node, 7);
      cl_int M = (cl_int)x->t.dims[0], K = (cl_int)x->t.dims[1], N = (cl_int)b->t.dims[1];
      cl_int8 q;
      q.s[0] = q_signed(x->t.dtype);
      q.s[1] = q_signed(b->t.dtype);
      q.s[2] = q_signed(y->t.dtype);
      q.s[3] = er__tensor_count(in_const(g, node, 4)) > 1;
      q.s[4] = az ? (cl_int)er__load_i64(az->data, az->dtype, 0) : 0;
      q.s[5] = yz ? (cl_int)er__load_i64(yz->data, yz->dtype, 0) : 0;
      q.s[6] = q.s[7] = 0;
      cl_float as = const_f32(in_const(g, node, 1), 0, 1), ys = const_f32(in_const(g, node, 6), 0, 1);
      SET(k, 0, x->mem);
      SET(k, 1, b->mem);
      SET(k, 2, y->mem);
      SET(k, 3, o->aux0);
      SET(k, 4, o->aux1);
      SET(k, 5, as);
      SET(k, 6, ys);
      SET(k, 7, M);
      SET(k, 8, N);
      SET(k, 9, K);
      SET(k, 10, q);
      if (M == 0 || N == 0) return ER_STATUS_OK;
      size_t global[2] = {(size_t)N, (size_t)M};
      cl_int e = clEnqueueNDRangeKernel(r->s->queue, k, 2, NULL, global, NULL, 0, NULL, NULL);
      return e == CL_SUCCESS ? ER_STATUS_OK : cl_fail(e, "qmatmul", node);
    }
    case OP_FILL: {
      /* The attribute's one element, repeated (OpenCL 1.2 fills by pattern). */
      const er_attr *v = er__node_attr(node, "value");
      uint8_t zero[16] = {0};
      const void *pat = v && v->t && v->t->data ? v->t->data : zero;
      size_t es = er_dtype_size(y->t.dtype);
      if (!y->t.nbytes) return ER_STATUS_OK;
      cl_int e = clEnqueueFillBuffer(r->s->queue, y->mem, pat, es, 0, y->t.nbytes, 0, NULL, NULL);
      return e == CL_SUCCESS ? ER_STATUS_OK : cl_fail(e, "clEnqueueFillBuffer", node);
    }
    case OP_ALIAS:
    case OP_CUSTOM:
      break;
  }
  return er__error(ER_STATUS_INTERNAL, "opencl: %s node '%s' reached the wrong path", node->op_type, node->name);
}

/* Output shapes from the op's own rule, with shapes (and constant data)
 * known; then device buffers for them. */
static er_status prepare_outputs(run *r, const onode *o) {
  const er_node *node = o->node;
  const er_graph *g = r->c->g;
  er_tensor *in[ER_MAX_NODE_IO > 64 ? 64 : ER_MAX_NODE_IO], *outp[64];
  er_tensor outs[64];
  if (node->n_inputs > 64 || node->n_outputs > 64)
    return er__error(ER_STATUS_UNSUPPORTED, "opencl: %s node '%s' has more than 64 inputs or outputs",
                     node->op_type, node->name);
  for (int k = 0; k < node->n_inputs; k++) in[k] = node->inputs[k] >= 0 ? &r->v[node->inputs[k]].t : NULL;
  for (int k = 0; k < node->n_outputs; k++) {
    outp[k] = NULL;
    if (node->outputs[k] < 0) continue;
    er__tensor_set(&outs[k], ER_DTYPE_UNDEFINED, -1, NULL);
    outp[k] = &outs[k];
  }
  er_kctx ctx = {node, node->n_inputs, in, node->n_outputs, outp, true, NULL, g};
  ER_CHECK(node->op->check(&ctx));
  for (int k = 0; k < node->n_outputs; k++) {
    if (!outp[k]) continue;
    int64_t count = er__tensor_count(outp[k]);
    if (count < 0)
      return er__error(ER_STATUS_INTERNAL, "opencl: %s node '%s': output %d has no shape", node->op_type,
                       node->name, k);
    if (count > INT32_MAX)
      return er__error(ER_STATUS_LIMIT, "opencl: %s node '%s': output %d has %lld elements; the kernels "
                       "index with 32-bit ints", node->op_type, node->name, k, (long long)count);
    dval *d = &r->v[node->outputs[k]];
    drop(r, node->outputs[k]);
    d->t = outs[k];
    d->t.data = NULL;
    d->t.flags = 0;
    d->t.nbytes = (size_t)count * er_dtype_size(d->t.dtype);
  }
  /* Reshape-like ops share their input's buffer. */
  if (o->k == OP_ALIAS) {
    dval *x = &r->v[node->inputs[0]], *y = &r->v[node->outputs[0]];
    clRetainMemObject(x->mem);
    y->mem = x->mem;
    y->owned = true;
    return ER_STATUS_OK;
  }
  for (int k = 0; k < node->n_outputs; k++) {
    if (node->outputs[k] < 0) continue;
    dval *d = &r->v[node->outputs[k]];
    ER_CHECK(make_buffer(r->s, NULL, d->t.nbytes, &d->mem, node));
    d->owned = true;
  }
  return ER_STATUS_OK;
}

static er_status run_custom(run *r, const onode *o) {
  const er_node *node = o->node;
  er_tensor ins[64], outs[64];
  er_tensor *in[64], *outp[64];
  for (int k = 0; k < node->n_inputs; k++) {
    in[k] = NULL;
    if (node->inputs[k] < 0) continue;
    ins[k] = r->v[node->inputs[k]].t;
    ins[k].data = r->v[node->inputs[k]].mem;  /* the cl_mem, as documented */
    in[k] = &ins[k];
  }
  for (int k = 0; k < node->n_outputs; k++) {
    outp[k] = NULL;
    if (node->outputs[k] < 0) continue;
    outs[k] = r->v[node->outputs[k]].t;
    outs[k].data = r->v[node->outputs[k]].mem;
    outp[k] = &outs[k];
  }
  er_kctx ctx = {node, node->n_inputs, in, node->n_outputs, outp, false, NULL, r->c->g};
  return er__custom_kernel_run(o->custom, &ctx, r->s->queue);
}

static er_status ocl_compute(er_backend *be, void *p, struct er_exec *ex, er_tensor *values) {
  ER_UNUSED(be);
  ER_UNUSED(ex);
  compiled *c = p;
  const er_graph *g = c->g;
  run r = {get_state(), c, calloc((size_t)g->n_values + 1, sizeof(dval))};
  if (!r.v) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory running an opencl segment");
  er_status st = ER_STATUS_OK;
  pthread_mutex_lock(&r.s->lock);
  /* Shapes of everything the segment reads; weights are already there. */
  for (int32_t v = 0; v < g->n_values; v++) {
    if (c->weights[v]) {
      r.v[v].t = *g->values[v].constant;
      r.v[v].t.flags = 0;
      r.v[v].mem = c->weights[v];
    } else if (er__value_is_fixed(g, v) && g->values[v].constant) {
      r.v[v].t = *g->values[v].constant;  /* read by shape rules only */
      r.v[v].t.flags = 0;
    }
  }
  /* Host to device. */
  for (int32_t k = 0; k < c->sg.n_inputs && st == ER_STATUS_OK; k++) {
    int32_t id = c->sg.inputs[k];
    const er_tensor *t = &values[id];
    if (!t->data) {
      st = er__error(ER_STATUS_INTERNAL, "opencl: input '%s' has no data", g->values[id].name);
      break;
    }
    r.v[id].t = *t;
    r.v[id].t.flags = 0;
    r.v[id].t.data = NULL;
    st = make_buffer(r.s, t->data, t->nbytes, &r.v[id].mem, NULL);
    r.v[id].owned = true;
    /* A value a shape rule reads keeps its host data for that rule. */
    if (st == ER_STATUS_OK) r.v[id].t.data = t->data;
  }
  for (int32_t j = 0; j < c->n_nodes && st == ER_STATUS_OK; j++) {
    const onode *o = &c->nodes[j];
    st = prepare_outputs(&r, o);
    if (st == ER_STATUS_OK && o->k == OP_CUSTOM) st = run_custom(&r, o);
    else if (st == ER_STATUS_OK && o->k != OP_ALIAS) st = run_node(&r, o);
    /* Buffers whose last reader in the segment has run. */
    for (int k = 0; k < o->node->n_inputs && st == ER_STATUS_OK; k++) {
      int32_t id = o->node->inputs[k];
      if (id >= 0 && c->last[id] == j) drop(&r, id);
    }
    for (int k = 0; k < o->node->n_outputs; k++) {
      int32_t id = o->node->outputs[k];
      if (id >= 0 && c->last[id] < 0) drop(&r, id);
    }
  }
  /* Device to host. */
  for (int32_t k = 0; k < c->sg.n_outputs && st == ER_STATUS_OK; k++) {
    int32_t id = c->sg.outputs[k];
    er_tensor *t = &values[id];
    er__tensor_release(t);
    er__tensor_set(t, r.v[id].t.dtype, r.v[id].t.rank, r.v[id].t.dims);
    st = er__tensor_alloc(t, 0);
    if (st == ER_STATUS_OK && t->nbytes) {
      cl_int e = clEnqueueReadBuffer(r.s->queue, r.v[id].mem, CL_TRUE, 0, t->nbytes, t->data, 0, NULL, NULL);
      if (e != CL_SUCCESS) st = cl_fail(e, "clEnqueueReadBuffer", NULL);
    }
  }
  if (st != ER_STATUS_OK) clFinish(r.s->queue);
  for (int32_t v = 0; v < g->n_values; v++) drop(&r, v);
  pthread_mutex_unlock(&r.s->lock);
  free(r.v);
  return st;
}

static const er_backend_iface ocl_iface = {
    .abi_version = ER_BACKEND_ABI_VERSION,
    .name = "opencl",
    .device_count = ocl_device_count,
    .device_desc = ocl_device_desc,
    .supports_op = ocl_supports_op,
    .compile = ocl_compile,
    .compute = ocl_compute,
    .release = ocl_release,
    .unavailable = ocl_unavailable,
};

static er_backend ocl_backend = {&ocl_iface, NULL};

er_backend *er__backend_opencl(void) { return &ocl_backend; }
