/* cuda-backend.c - the CUDA backend: device discovery and er_gpu_api over
 * the CUDA runtime; what runs where and how segments run on device memory
 * is shared with the OpenCL backend (gpu/gpu-common.c), and the kernels are
 * the CUDA twins of the OpenCL ones (cuda-kernels.cu).
 *
 * Built only when CMake finds nvcc (cmake/backends.cmake). On a machine
 * without an NVIDIA driver or GPU the backend stays registered and says
 * why it cannot run ("CUDA driver version is insufficient", "no CUDA-capable
 * device"), so `edgerun devices` and session errors explain it. One device
 * is used: EDGERUN_CUDA_DEVICE=N picks it (default 0). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/backend.h"
#include "backends/cuda/cuda-kernels.h"
#include "backends/gpu/gpu-common.h"

typedef struct cuda_state {
  pthread_once_t once;
  char why[256];               /* non-empty: unusable, and why */
  int n_devices;
  int device;
  cudaStream_t stream;
} cuda_state;

static cuda_state state = {.once = PTHREAD_ONCE_INIT};

static er_status cu_fail(cudaError_t e, const char *what) {
  return er__error(ER_STATUS_BACKEND, "cuda: %s failed: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static void init_once(void) {
  cuda_state *s = &state;
  cudaError_t e = cudaGetDeviceCount(&s->n_devices);
  if (e != cudaSuccess) {
    s->n_devices = 0;
    snprintf(s->why, sizeof s->why, "no usable CUDA device: %s", cudaGetErrorString(e));
    return;
  }
  if (s->n_devices == 0) {
    snprintf(s->why, sizeof s->why, "no CUDA-capable device is present");
    return;
  }
  const char *pick = getenv("EDGERUN_CUDA_DEVICE");
  s->device = pick ? atoi(pick) : 0;
  if (s->device < 0 || s->device >= s->n_devices) {
    snprintf(s->why, sizeof s->why, "EDGERUN_CUDA_DEVICE=%s, but there are %d devices", pick, s->n_devices);
    return;
  }
  e = cudaSetDevice(s->device);
  if (e == cudaSuccess) e = cudaStreamCreate(&s->stream);
  if (e != cudaSuccess) snprintf(s->why, sizeof s->why, "cannot open device %d: %s", s->device, cudaGetErrorString(e));
}

static cuda_state *get_state(void) {
  pthread_once(&state.once, init_once);
  return &state;
}

static const char *cu_unavailable(er_backend *be) {
  ER_UNUSED(be);
  cuda_state *s = get_state();
  return s->why[0] ? s->why : NULL;
}

static int cu_device_count(er_backend *be) {
  ER_UNUSED(be);
  return get_state()->n_devices;
}

static er_status cu_device_desc(er_backend *be, int index, er_device_desc *d) {
  ER_UNUSED(be);
  cuda_state *s = get_state();
  if (index < 0 || index >= s->n_devices)
    return er__error(ER_STATUS_NOT_FOUND, "cuda has %d devices; %d does not exist", s->n_devices, index);
  struct cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, index);
  if (e != cudaSuccess) return cu_fail(e, "cudaGetDeviceProperties");
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "%s", prop.name);
  snprintf(d->vendor, sizeof d->vendor, "NVIDIA; compute capability %d.%d", prop.major, prop.minor);
  snprintf(d->driver, sizeof d->driver, "CUDA driver %d.%d, runtime %d.%d%s", drv / 1000, (drv % 1000) / 10,
           rt / 1000, (rt % 1000) / 10, index == s->device ? " (used)" : "");
  d->kind = ER_DEVICE_GPU;
  d->memory_bytes = prop.totalGlobalMem;
  d->compute_units = prop.multiProcessorCount;
  return ER_STATUS_OK;
}

/* ---- er_gpu_api ---------------------------------------------------------- */

static er_status cu_alloc(void *ctx, size_t bytes, const void *init, void **out) {
  ER_UNUSED(ctx);
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 4);
  if (e != cudaSuccess) return cu_fail(e, "cudaMalloc");
  if (init && bytes) {
    e = cudaMemcpy(p, init, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      cudaFree(p);
      return cu_fail(e, "cudaMemcpy to the device");
    }
  }
  *out = p;
  return ER_STATUS_OK;
}

static void cu_free(void *ctx, void *buf) {
  ER_UNUSED(ctx);
  if (buf) cudaFree(buf);
}

static er_status cu_download(void *ctx, const void *buf, void *dst, size_t bytes) {
  cuda_state *s = ctx;
  cudaError_t e = cudaMemcpyAsync(dst, buf, bytes, cudaMemcpyDeviceToHost, s->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
  return e == cudaSuccess ? ER_STATUS_OK : cu_fail(e, "copying an output to the host");
}

static er_status cu_copy(void *ctx, void *dst, const void *src, size_t bytes) {
  cuda_state *s = ctx;
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->stream);
  return e == cudaSuccess ? ER_STATUS_OK : cu_fail(e, "cudaMemcpyAsync");
}

static er_status launched(int e, const char *kernel) {
  return e == 0 ? ER_STATUS_OK : cu_fail((cudaError_t)e, kernel);
}

static er_status cu_fill(void *ctx, void *buf, const void *pattern, size_t pattern_bytes, size_t bytes) {
  cuda_state *s = ctx;
  if (pattern_bytes > 16) return er__error(ER_STATUS_UNSUPPORTED, "cuda: fill patterns are at most 16 bytes");
  return launched(er__cuda_fill(buf, pattern, pattern_bytes, bytes, s->stream), "fill_bytes");
}

static void cu_finish(void *ctx) { cudaStreamSynchronize(((cuda_state *)ctx)->stream); }
static void *cu_stream(void *ctx) { return ((cuda_state *)ctx)->stream; }

#define LAUNCHER(name, type, fn)                                            \
  static er_status name(void *ctx, const type *p) {                         \
    return launched(fn(p, ((cuda_state *)ctx)->stream), #fn);               \
  }
LAUNCHER(cu_unary, er_gpu_unary, er__cuda_unary)
LAUNCHER(cu_binary, er_gpu_binary, er__cuda_binary)
LAUNCHER(cu_affine, er_gpu_affine, er__cuda_affine)
LAUNCHER(cu_conv, er_gpu_conv, er__cuda_conv)
LAUNCHER(cu_pool, er_gpu_pool, er__cuda_pool)
LAUNCHER(cu_im2col, er_gpu_im2col, er__cuda_im2col)
LAUNCHER(cu_gemm, er_gpu_gemm, er__cuda_gemm)
LAUNCHER(cu_concat, er_gpu_concat, er__cuda_concat)
LAUNCHER(cu_transpose, er_gpu_transpose, er__cuda_transpose)
LAUNCHER(cu_softmax, er_gpu_softmax, er__cuda_softmax)
LAUNCHER(cu_lrn, er_gpu_lrn, er__cuda_lrn)
LAUNCHER(cu_quantize, er_gpu_quant, er__cuda_quantize)
LAUNCHER(cu_dequantize, er_gpu_quant, er__cuda_dequantize)
LAUNCHER(cu_qconv, er_gpu_qconv, er__cuda_qconv)
LAUNCHER(cu_qmatmul, er_gpu_qmatmul, er__cuda_qmatmul)

static const er_gpu_api cu_api = {
    .alloc = cu_alloc,         .free = cu_free,           .download = cu_download,
    .copy = cu_copy,           .fill = cu_fill,           .finish = cu_finish,
    .stream = cu_stream,       .unary = cu_unary,         .binary = cu_binary,
    .affine = cu_affine,       .conv = cu_conv,           .im2col = cu_im2col,
    .pool = cu_pool,
    .gemm = cu_gemm,           .concat = cu_concat,       .transpose = cu_transpose,
    .softmax = cu_softmax,     .lrn = cu_lrn,             .quantize = cu_quantize,
    .dequantize = cu_dequantize, .qconv = cu_qconv,       .qmatmul = cu_qmatmul,
};

static er_gpu gpu = {"cuda", &cu_api, &state, PTHREAD_MUTEX_INITIALIZER, false};

/* ---- the backend ------------------------------------------------------------ */

static bool cu_supports_op(er_backend *be, const er_graph *g, const er_node *n, char *why, size_t size) {
  ER_UNUSED(be);
  return er__gpu_supports_op(&gpu, g, n, why, size);
}

static void configure(void) { er__gpu_configure(&gpu); }

static er_status cu_compile(er_backend *be, const er_subgraph *sg, const er_compile_options *opts, void **out) {
  ER_UNUSED(opts);
  ER_UNUSED(be);
  cuda_state *s = get_state();
  if (s->why[0]) return er__error(ER_STATUS_BACKEND, "cuda: %s", s->why);
  /* The runtime binds the current device per thread. */
  cudaSetDevice(s->device);
  static pthread_once_t configured = PTHREAD_ONCE_INIT;
  pthread_once(&configured, configure);
  return er__gpu_compile(&gpu, sg, out);
}

static er_status cu_compute(er_backend *be, void *compiled, er_exec *ex, er_tensor *values) {
  ER_UNUSED(be);
  ER_UNUSED(ex);
  cudaSetDevice(get_state()->device);
  return er__gpu_compute(&gpu, compiled, values);
}

static void cu_release(er_backend *be, void *compiled) {
  ER_UNUSED(be);
  er__gpu_release(&gpu, compiled);
}

static const er_backend_iface cu_iface = {
    .abi_version = ER_BACKEND_ABI_VERSION,
    .name = "cuda",
    .device_count = cu_device_count,
    .device_desc = cu_device_desc,
    .supports_op = cu_supports_op,
    .compile = cu_compile,
    .compute = cu_compute,
    .release = cu_release,
    .unavailable = cu_unavailable,
};

static er_backend cu_backend = {&cu_iface, NULL};

er_backend *er__backend_cuda(void) { return &cu_backend; }
