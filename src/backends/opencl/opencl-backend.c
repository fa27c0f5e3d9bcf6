/* opencl-backend.c - the OpenCL backend (OpenCL 1.2 through the ICD
 * loader; tested on PoCL, meant for GPUs and NPUs with OpenCL drivers).
 *
 * What runs where, compiling and computing segments on device buffers is
 * shared with the CUDA backend (gpu/gpu-common.c); this file finds the
 * device, builds the kernels (opencl-kernels.cl, embedded at build time)
 * and implements er_gpu_api with them. One device is used: the first GPU,
 * else the first accelerator, else the first device of any kind;
 * EDGERUN_OPENCL_DEVICE=P:D picks platform P's device D. Runs are
 * serialized on the device's in-order queue (kernel arguments belong to
 * the kernel objects, so the shared lock also guards setting them). */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/backend.h"
#include "backends/gpu/gpu-common.h"

extern const char er__opencl_source[];

/* The most devices listed across all platforms. */
#define ER_OCL_MAX_DEVICES 16

/* ======================================================================== */
/* State                                                                     */
/* ======================================================================== */

enum {
  K_UNARY, K_BINARY, K_AFFINE, K_CONV, K_POOL, K_GEMM, K_CONCAT, K_TRANSPOSE, K_SOFTMAX, K_LRN,
  K_QUANT, K_DEQUANT, K_QCONV, K_QMATMUL, K_IM2COL, K_COUNT
};
static const char *const kernel_names[K_COUNT] = {
    "unary_f32",   "binary_f32",      "channel_affine_f32", "conv2d_f32", "pool2d_f32",
    "gemm_f32",    "concat_copy",     "transpose_bytes",    "softmax_f32", "lrn_f32",
    "quantize_f32", "dequantize_f32", "qconv2d",            "qmatmul",     "im2col_f32"};

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
  size_t max_wg;                 /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
} ocl;

static ocl state = {.once = PTHREAD_ONCE_INIT};

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
  clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof s->max_wg, &s->max_wg, NULL);
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
/* er_gpu_api over OpenCL                                                    */
/* ======================================================================== */

static er_status ocl_alloc(void *ctx, size_t bytes, const void *init, void **out) {
  ocl *s = ctx;
  cl_int e;
  /* OpenCL has no empty buffers: a zero-size tensor gets one spare word. */
  size_t sz = bytes ? bytes : 4;
  cl_mem m = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE | (init && bytes ? CL_MEM_COPY_HOST_PTR : 0), sz,
                            init && bytes ? (void *)init : NULL, &e);
  if (e != CL_SUCCESS) return cl_fail(e, "clCreateBuffer", NULL);
  *out = m;
  return ER_STATUS_OK;
}

static void ocl_free(void *ctx, void *buf) {
  ER_UNUSED(ctx);
  if (buf) clReleaseMemObject((cl_mem)buf);
}

static er_status ocl_download(void *ctx, const void *buf, void *dst, size_t bytes) {
  ocl *s = ctx;
  cl_int e = clEnqueueReadBuffer(s->queue, (cl_mem)buf, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
  return e == CL_SUCCESS ? ER_STATUS_OK : cl_fail(e, "clEnqueueReadBuffer", NULL);
}

static er_status ocl_copy(void *ctx, void *dst, const void *src, size_t bytes) {
  ocl *s = ctx;
  cl_int e = clEnqueueCopyBuffer(s->queue, (cl_mem)src, (cl_mem)dst, 0, 0, bytes, 0, NULL, NULL);
  return e == CL_SUCCESS ? ER_STATUS_OK : cl_fail(e, "clEnqueueCopyBuffer", NULL);
}

static er_status ocl_fill(void *ctx, void *buf, const void *pattern, size_t pattern_bytes, size_t bytes) {
  ocl *s = ctx;
  cl_int e = clEnqueueFillBuffer(s->queue, (cl_mem)buf, pattern, pattern_bytes, 0, bytes, 0, NULL, NULL);
  return e == CL_SUCCESS ? ER_STATUS_OK : cl_fail(e, "clEnqueueFillBuffer", NULL);
}

static void ocl_finish(void *ctx) { clFinish(((ocl *)ctx)->queue); }
static void *ocl_stream(void *ctx) { return ((ocl *)ctx)->queue; }

/* Kernel arguments: buffers as cl_mem, scalars as themselves, int arrays
 * as the OpenCL vector types the kernels declare. */
typedef struct args {
  cl_kernel k;
  cl_uint i;
  cl_int e;
} args;

static void arg(args *a, size_t size, const void *v) {
  if (a->e == CL_SUCCESS) a->e = clSetKernelArg(a->k, a->i, size, v);
  a->i++;
}
static void arg_mem(args *a, void *m) {
  cl_mem x = m;
  arg(a, sizeof x, &x);
}
static void arg_int(args *a, int v) {
  cl_int x = v;
  arg(a, sizeof x, &x);
}
static void arg_float(args *a, float v) {
  cl_float x = v;
  arg(a, sizeof x, &x);
}
static void arg_int8(args *a, const int *v) {
  cl_int8 x;
  for (int i = 0; i < 8; i++) x.s[i] = v[i];
  arg(a, sizeof x, &x);
}
static void arg_int16(args *a, const int *v) {
  cl_int16 x;
  for (int i = 0; i < 16; i++) x.s[i] = v[i];
  arg(a, sizeof x, &x);
}

/* The fused epilogue's arguments, in the kernels' order: z, has_z, act, p0, p1. */
static void arg_epilogue(args *a, const er_gpu_epilogue *ep) {
  arg_mem(a, ep->z);
  arg_int(a, ep->has_z);
  arg_int(a, ep->act);
  arg_float(a, ep->p0);
  arg_float(a, ep->p1);
}

static er_status go(ocl *s, int kern, args *a, cl_uint dims, const size_t *global, const size_t *local) {
  if (a->e != CL_SUCCESS) return cl_fail(a->e, "clSetKernelArg", NULL);
  cl_int e = clEnqueueNDRangeKernel(s->queue, s->k[kern], dims, NULL, global, local, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return er__error(ER_STATUS_BACKEND, "opencl: launching %s failed: %s (%d)", kernel_names[kern], cl_err(e), (int)e);
  return ER_STATUS_OK;
}

/* One work item per element, in work groups of ER_OCL_GROUP (the kernels
 * return for items past n): implementations left to choose a group size
 * for an odd global size may pick 1, and PoCL then runs one item at a
 * time instead of vectorizing a group. */
#define ER_OCL_GROUP 64
static er_status go1(ocl *s, int kern, args *a, int64_t n) {
  arg_int(a, (int)n);
  size_t local = s->max_wg >= ER_OCL_GROUP ? ER_OCL_GROUP : 1;
  size_t g = ((size_t)n + local - 1) / local * local;
  return go(s, kern, a, 1, &g, &local);
}

#define ARGS(kern) args a = {s->k[kern], 0, CL_SUCCESS}

static er_status ocl_unary(void *ctx, const er_gpu_unary *p) {
  ocl *s = ctx;
  ARGS(K_UNARY);
  arg_mem(&a, p->x);
  arg_mem(&a, p->y);
  arg_int(&a, p->op);
  arg_float(&a, p->a);
  arg_float(&a, p->b);
  return go1(s, K_UNARY, &a, p->n);
}

static er_status ocl_binary(void *ctx, const er_gpu_binary *p) {
  ocl *s = ctx;
  ARGS(K_BINARY);
  arg_mem(&a, p->a);
  arg_mem(&a, p->b);
  arg_mem(&a, p->y);
  arg_int(&a, p->op);
  arg_int(&a, p->rank);
  arg_int8(&a, p->dims);
  arg_int8(&a, p->sa);
  arg_int8(&a, p->sb);
  return go1(s, K_BINARY, &a, p->n);
}

static er_status ocl_affine(void *ctx, const er_gpu_affine *p) {
  ocl *s = ctx;
  ARGS(K_AFFINE);
  arg_mem(&a, p->x);
  arg_mem(&a, p->y);
  arg_mem(&a, p->scale);
  arg_mem(&a, p->shift);
  arg_int(&a, p->c);
  arg_int(&a, p->inner);
  return go1(s, K_AFFINE, &a, p->n);
}

static er_status ocl_conv(void *ctx, const er_gpu_conv *p) {
  ocl *s = ctx;
  ARGS(K_CONV);
  arg_mem(&a, p->x);
  arg_mem(&a, p->w);
  arg_mem(&a, p->bias);
  arg_int(&a, p->has_bias);
  arg_mem(&a, p->y);
  arg_int16(&a, p->p);
  arg_epilogue(&a, &p->ep);
  return go1(s, K_CONV, &a, p->n);
}

static er_status ocl_im2col(void *ctx, const er_gpu_im2col *p) {
  ocl *s = ctx;
  ARGS(K_IM2COL);
  arg_mem(&a, p->x);
  arg_mem(&a, p->col);
  arg_int16(&a, p->p);
  return go1(s, K_IM2COL, &a, p->n);
}

static er_status ocl_pool(void *ctx, const er_gpu_pool *p) {
  ocl *s = ctx;
  ARGS(K_POOL);
  arg_mem(&a, p->x);
  arg_mem(&a, p->y);
  arg_int16(&a, p->p);
  return go1(s, K_POOL, &a, p->n);
}

static er_status ocl_gemm(void *ctx, const er_gpu_gemm *p) {
  ocl *s = ctx;
  ARGS(K_GEMM);
  arg_mem(&a, p->a);
  arg_mem(&a, p->b);
  arg_mem(&a, p->c);
  arg_int(&a, p->has_c);
  arg_mem(&a, p->y);
  int ints[9] = {p->M, p->N, p->K, p->sai, p->sak, p->sbk, p->sbj, p->sci, p->scj};
  for (int i = 0; i < 9; i++) arg_int(&a, ints[i]);
  arg_float(&a, p->alpha);
  arg_float(&a, p->beta);
  arg_int(&a, p->brank);
  arg_int8(&a, p->bdims);
  arg_int8(&a, p->bsa);
  arg_int8(&a, p->bsb);
  arg_epilogue(&a, &p->ep);
  /* 16x16 tiles through local memory (the kernel's TILE). */
  size_t local[3] = {16, 16, 1};
  size_t global[3] = {((size_t)p->N + 15) / 16 * 16, ((size_t)p->M + 15) / 16 * 16, (size_t)p->batch};
  if (s->max_wg && s->max_wg < 256)
    return er__error(ER_STATUS_BACKEND, "opencl: the device runs work groups of at most %zu items; gemm_f32 "
                     "needs 256", s->max_wg);
  return go(s, K_GEMM, &a, 3, global, local);
}

static er_status ocl_concat(void *ctx, const er_gpu_concat *p) {
  ocl *s = ctx;
  ARGS(K_CONCAT);
  arg_mem(&a, p->src);
  arg_mem(&a, p->dst);
  arg_int(&a, p->inner_src);
  arg_int(&a, p->inner_dst);
  arg_int(&a, p->offset);
  return go1(s, K_CONCAT, &a, p->bytes);
}

static er_status ocl_transpose(void *ctx, const er_gpu_transpose *p) {
  ocl *s = ctx;
  ARGS(K_TRANSPOSE);
  arg_mem(&a, p->x);
  arg_mem(&a, p->y);
  arg_int(&a, p->rank);
  arg_int8(&a, p->dims);
  arg_int8(&a, p->strides);
  arg_int(&a, p->es);
  return go1(s, K_TRANSPOSE, &a, p->n);
}

static er_status ocl_softmax(void *ctx, const er_gpu_softmax *p) {
  ocl *s = ctx;
  ARGS(K_SOFTMAX);
  arg_mem(&a, p->x);
  arg_mem(&a, p->y);
  arg_int(&a, p->len);
  arg_int(&a, p->inner);
  arg_int(&a, p->log_softmax);
  return go1(s, K_SOFTMAX, &a, p->rows);
}

static er_status ocl_lrn(void *ctx, const er_gpu_lrn *p) {
  ocl *s = ctx;
  ARGS(K_LRN);
  arg_mem(&a, p->x);
  arg_mem(&a, p->y);
  arg_int(&a, p->c);
  arg_int(&a, p->inner);
  arg_int(&a, p->size);
  arg_float(&a, p->alpha);
  arg_float(&a, p->beta);
  arg_float(&a, p->bias);
  return go1(s, K_LRN, &a, p->n);
}

static er_status quant(ocl *s, int kern, const er_gpu_quant *p) {
  args a = {s->k[kern], 0, CL_SUCCESS};
  arg_mem(&a, p->x);
  arg_mem(&a, p->y);
  arg_mem(&a, p->scale);
  arg_mem(&a, p->zp);
  arg_int(&a, p->has_zp);
  arg_int(&a, p->is_signed);
  arg_int(&a, p->axis_len);
  arg_int(&a, p->inner);
  return go1(s, kern, &a, p->n);
}
static er_status ocl_quantize(void *ctx, const er_gpu_quant *p) { return quant(ctx, K_QUANT, p); }
static er_status ocl_dequantize(void *ctx, const er_gpu_quant *p) { return quant(ctx, K_DEQUANT, p); }

static er_status ocl_qconv(void *ctx, const er_gpu_qconv *p) {
  ocl *s = ctx;
  ARGS(K_QCONV);
  arg_mem(&a, p->x);
  arg_mem(&a, p->w);
  arg_mem(&a, p->bias);
  arg_mem(&a, p->y);
  arg_mem(&a, p->wscale);
  arg_mem(&a, p->wzp);
  arg_float(&a, p->xscale);
  arg_float(&a, p->yscale);
  arg_int16(&a, p->p);
  arg_int8(&a, p->q);
  return go1(s, K_QCONV, &a, p->n);
}

static er_status ocl_qmatmul(void *ctx, const er_gpu_qmatmul *p) {
  ocl *s = ctx;
  ARGS(K_QMATMUL);
  arg_mem(&a, p->a);
  arg_mem(&a, p->b);
  arg_mem(&a, p->y);
  arg_mem(&a, p->bscale);
  arg_mem(&a, p->bzp);
  arg_float(&a, p->ascale);
  arg_float(&a, p->yscale);
  arg_int(&a, p->M);
  arg_int(&a, p->N);
  arg_int(&a, p->K);
  arg_int8(&a, p->q);
  size_t global[2] = {(size_t)p->N, (size_t)p->M};
  return go(s, K_QMATMUL, &a, 2, global, NULL);
}

static const er_gpu_api ocl_api = {
    .alloc = ocl_alloc,         .free = ocl_free,         .download = ocl_download,
    .copy = ocl_copy,           .fill = ocl_fill,         .finish = ocl_finish,
    .stream = ocl_stream,       .unary = ocl_unary,       .binary = ocl_binary,
    .affine = ocl_affine,       .conv = ocl_conv,         .im2col = ocl_im2col,
    .pool = ocl_pool,
    .gemm = ocl_gemm,           .concat = ocl_concat,     .transpose = ocl_transpose,
    .softmax = ocl_softmax,     .lrn = ocl_lrn,           .quantize = ocl_quantize,
    .dequantize = ocl_dequantize, .qconv = ocl_qconv,     .qmatmul = ocl_qmatmul,
};

static er_gpu gpu = {"opencl", &ocl_api, &state, PTHREAD_MUTEX_INITIALIZER, false};

/* ======================================================================== */
/* The backend                                                               */
/* ======================================================================== */

static bool ocl_supports_op(er_backend *be, const er_graph *g, const er_node *n, char *why, size_t size) {
  ER_UNUSED(be);
  return er__gpu_supports_op(&gpu, g, n, why, size);
}

static void configure(void) { er__gpu_configure(&gpu); }

static er_status ocl_compile(er_backend *be, const er_subgraph *sg, const er_compile_options *opts, void **out) {
  ER_UNUSED(opts);
  ER_UNUSED(be);
  ocl *s = get_state();
  if (s->why[0]) return er__error(ER_STATUS_BACKEND, "opencl: %s", s->why);
  static pthread_once_t configured = PTHREAD_ONCE_INIT;
  pthread_once(&configured, configure);
  return er__gpu_compile(&gpu, sg, out);
}

static er_status ocl_compute(er_backend *be, void *compiled, er_exec *ex, er_tensor *values) {
  ER_UNUSED(be);
  ER_UNUSED(ex);
  return er__gpu_compute(&gpu, compiled, values);
}

static void ocl_release(er_backend *be, void *compiled) {
  ER_UNUSED(be);
  er__gpu_release(&gpu, compiled);
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
