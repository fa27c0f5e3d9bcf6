/* gpu-common.h - what the OpenCL and CUDA backends share: which nodes a GPU
 * backend runs (supports_op), compiling a segment (weights to the device,
 * parameters folded once), and running it on device buffers (shapes from
 * each op's own rule, intermediates kept on the device, Reshape-like nodes
 * aliasing their input's buffer).
 *
 * A backend supplies an er_gpu_api: buffer management and one launcher per
 * kernel, each taking a plain parameter struct, so the launch geometry and
 * every index computation live here once and the OpenCL backend's tests
 * cover the CUDA backend's host logic too. */
#ifndef ER_GPU_COMMON_H
#define ER_GPU_COMMON_H

#include <pthread.h>

#include "backends/backend.h"

#include "backends/gpu/gpu-params.h"

typedef struct er_gpu_api {
  /* Buffers (bytes may be 0: the backend allocates a spare word). */
  er_status (*alloc)(void *ctx, size_t bytes, const void *init, void **buf_out);
  void (*free)(void *ctx, void *buf);
  er_status (*download)(void *ctx, const void *buf, void *dst, size_t bytes);
  er_status (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
  er_status (*fill)(void *ctx, void *buf, const void *pattern, size_t pattern_bytes, size_t bytes);
  /* Waits for everything queued (after an error, before buffers go). */
  void (*finish)(void *ctx);
  /* The queue handed to custom kernels (cl_command_queue, cudaStream_t). */
  void *(*stream)(void *ctx);

  er_status (*unary)(void *ctx, const er_gpu_unary *p);
  er_status (*binary)(void *ctx, const er_gpu_binary *p);
  er_status (*affine)(void *ctx, const er_gpu_affine *p);
  er_status (*conv)(void *ctx, const er_gpu_conv *p);
  er_status (*im2col)(void *ctx, const er_gpu_im2col *p);
  er_status (*pool)(void *ctx, const er_gpu_pool *p);
  er_status (*gemm)(void *ctx, const er_gpu_gemm *p);
  er_status (*concat)(void *ctx, const er_gpu_concat *p);
  er_status (*transpose)(void *ctx, const er_gpu_transpose *p);
  er_status (*softmax)(void *ctx, const er_gpu_softmax *p);
  er_status (*lrn)(void *ctx, const er_gpu_lrn *p);
  er_status (*quantize)(void *ctx, const er_gpu_quant *p);
  er_status (*dequantize)(void *ctx, const er_gpu_quant *p);
  er_status (*qconv)(void *ctx, const er_gpu_qconv *p);
  er_status (*qmatmul)(void *ctx, const er_gpu_qmatmul *p);
} er_gpu_api;

/* One GPU backend: its API, its context, and the lock that serializes
 * runs on its queue. */
typedef struct er_gpu {
  const char *name;          /* "opencl", "cuda": custom kernels register
                                under this name */
  const er_gpu_api *api;
  void *ctx;
  pthread_mutex_t lock;
  bool direct_conv;          /* EDGERUN_GPU_DIRECT_CONV=1: no im2col + GEMM */
} er_gpu;

/* Reads the environment switches into gpu (call once at backend init). */
void er__gpu_configure(er_gpu *gpu);

bool er__gpu_supports_op(er_gpu *gpu, const er_graph *g, const er_node *n, char *why, size_t size);
er_status er__gpu_compile(er_gpu *gpu, const er_subgraph *sg, void **compiled_out);
er_status er__gpu_compute(er_gpu *gpu, void *compiled, er_tensor *values);
void er__gpu_release(er_gpu *gpu, void *compiled);

#endif /* ER_GPU_COMMON_H */
