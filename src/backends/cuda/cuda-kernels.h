/* cuda-kernels.h - launchers of the CUDA backend's kernels (cuda-kernels.cu),
 * callable from C. Each takes the shared parameter struct of
 * gpu/gpu-common.h and the stream, and returns the cudaError_t of the
 * launch as an int (0 = success). Device pointers travel as void *. */
#ifndef ER_CUDA_KERNELS_H
#define ER_CUDA_KERNELS_H

#include "backends/gpu/gpu-params.h"

#ifdef __cplusplus
extern "C" {
#endif

int er__cuda_unary(const er_gpu_unary *p, void *stream);
int er__cuda_binary(const er_gpu_binary *p, void *stream);
int er__cuda_affine(const er_gpu_affine *p, void *stream);
int er__cuda_conv(const er_gpu_conv *p, void *stream);
int er__cuda_pool(const er_gpu_pool *p, void *stream);
int er__cuda_im2col(const er_gpu_im2col *p, void *stream);
int er__cuda_gemm(const er_gpu_gemm *p, void *stream);
int er__cuda_concat(const er_gpu_concat *p, void *stream);
int er__cuda_transpose(const er_gpu_transpose *p, void *stream);
int er__cuda_softmax(const er_gpu_softmax *p, void *stream);
int er__cuda_lrn(const er_gpu_lrn *p, void *stream);
int er__cuda_quantize(const er_gpu_quant *p, void *stream);
int er__cuda_dequantize(const er_gpu_quant *p, void *stream);
int er__cuda_qconv(const er_gpu_qconv *p, void *stream);
int er__cuda_qmatmul(const er_gpu_qmatmul *p, void *stream);
/* Repeats a pattern of pattern_bytes (1 to 16) over bytes (a multiple). */
int er__cuda_fill(void *buf, const void *pattern, size_t pattern_bytes, size_t bytes, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* ER_CUDA_KERNELS_H */
