/* gpu-params.h - the kernel parameter structs and op codes the GPU
 * backends share with their kernels. Plain C with fixed-size fields and no
 * edgerun headers, so the CUDA sources (compiled as C++ by nvcc) can
 * include it. */
#ifndef ER_GPU_PARAMS_H
#define ER_GPU_PARAMS_H

#include <stddef.h>
#include <stdint.h>

/* Codes shared with the kernels (opencl-kernels.cl, cuda-kernels.cu). */
enum {
  ER_GPU_U_RELU, ER_GPU_U_SIGMOID, ER_GPU_U_TANH, ER_GPU_U_EXP, ER_GPU_U_LOG, ER_GPU_U_ABS,
  ER_GPU_U_NEG, ER_GPU_U_SQRT, ER_GPU_U_RECIP, ER_GPU_U_FLOOR, ER_GPU_U_CEIL, ER_GPU_U_ERF,
  ER_GPU_U_LEAKY, ER_GPU_U_ELU, ER_GPU_U_SELU, ER_GPU_U_HARDSIGMOID, ER_GPU_U_HARDSWISH,
  ER_GPU_U_CLIP, ER_GPU_U_GELU, ER_GPU_U_GELU_TANH, ER_GPU_U_SOFTPLUS, ER_GPU_U_SOFTSIGN,
  ER_GPU_U_IDENTITY, ER_GPU_U_SIN, ER_GPU_U_COS, ER_GPU_U_ROUND
};
enum {
  ER_GPU_B_ADD, ER_GPU_B_SUB, ER_GPU_B_MUL, ER_GPU_B_DIV, ER_GPU_B_POW, ER_GPU_B_MAX,
  ER_GPU_B_MIN, ER_GPU_B_PRELU, ER_GPU_B_MEAN2
};
/* Activations of the conv and gemm epilogues: the er_act kinds of
 * ops/fused.h (gpu-common.c maps one onto the other), computed as
 * er__act_apply does, in float: NONE, RELU, CLIP(p0 = min, p1 = max),
 * SIGMOID, TANH, HARDSIGMOID(p0 = alpha, p1 = beta), HARDSWISH,
 * LEAKYRELU(p0 = alpha), SILU, GELU (erf), GELU_TANH. */
enum {
  ER_GPU_ACT_NONE, ER_GPU_ACT_RELU, ER_GPU_ACT_CLIP, ER_GPU_ACT_SIGMOID, ER_GPU_ACT_TANH,
  ER_GPU_ACT_HARDSIGMOID, ER_GPU_ACT_HARDSWISH, ER_GPU_ACT_LEAKYRELU, ER_GPU_ACT_SILU,
  ER_GPU_ACT_GELU, ER_GPU_ACT_GELU_TANH, ER_GPU_ACT_COUNT
};

/* Kernel parameters. Buffers are the backend's handles (cl_mem, device
 * pointers); counts are elements unless named bytes. Shapes are at most
 * rank 8; index arithmetic in the kernels is 32-bit (tensors of more than
 * INT32_MAX elements are refused before any launch). */
typedef struct er_gpu_unary {
  void *x, *y;
  int64_t n;
  int op;
  float a, b;
} er_gpu_unary;

typedef struct er_gpu_binary {
  void *a, *b, *y;
  int64_t n;
  int op, rank;
  int dims[8];               /* output dims */
  int sa[8], sb[8];          /* element strides aligned to the output, 0
                                on broadcast axes */
} er_gpu_binary;

typedef struct er_gpu_affine {
  void *x, *y, *scale, *shift;
  int64_t n;
  int c, inner;              /* [N, c, inner] */
} er_gpu_affine;

/* What the conv and gemm kernels do to a result while it is still in a
 * register (the fused ops of ops/fused.h): y[o] = act(r + z[o]), where r
 * is the conv (bias included) or gemm (C included) value and z, when
 * has_z, a residual laid out as y. With has_z 0 and act NONE the kernels
 * store r as before. */
typedef struct er_gpu_epilogue {
  void *z;                   /* [output elements]; another valid buffer
                                when !has_z (OpenCL wants a real one) */
  int has_z, act;            /* act: ER_GPU_ACT_* */
  float p0, p1;              /* the activation's parameters */
} er_gpu_epilogue;

/* Convolution geometry (2-D; 1-D runs with H = 1):
 * p = N C H W | M OH OW KH | KW SH SW PT | PL DH DW G. */
typedef struct er_gpu_conv {
  void *x, *w, *bias, *y;
  int has_bias;
  int64_t n;                 /* output elements */
  int p[16];
  er_gpu_epilogue ep;
} er_gpu_conv;

/* im2col for a group-1 convolution: col[b, (c*KH + kh)*KW + kw, oh*OW + ow]
 * = x[b, c, ih, iw] (0 in the padding); p as er_gpu_conv. n = N * C * KH *
 * KW * OH * OW. The product with the weights is then one batched GEMM. */
typedef struct er_gpu_im2col {
  void *x, *col;
  int64_t n;
  int p[16];
} er_gpu_im2col;

/* Pooling: p = PB PR H W | OH OW KH KW | SH SW PT PL | DH DW
 * count_include_pad is_max (PB, PR: end pads). */
typedef struct er_gpu_pool {
  void *x, *y;
  int64_t n;
  int p[16];
} er_gpu_pool;

/* Y[b, i, j] = alpha * sum_k A(b,i,k) B(b,k,j) + beta * C(i, j), operands
 * addressed by strides; batch offsets from the batch index over bdims. */
typedef struct er_gpu_gemm {
  void *a, *b, *c, *y;
  int has_c;
  int M, N, K, sai, sak, sbk, sbj, sci, scj;
  float alpha, beta;
  int brank;
  int bdims[8], bsa[8], bsb[8];
  int64_t batch;
  er_gpu_epilogue ep;        /* z indexed as y: [batch, M, N] */
} er_gpu_gemm;

typedef struct er_gpu_concat {
  void *src, *dst;
  int64_t bytes;             /* of src */
  int inner_src, inner_dst, offset;  /* bytes */
} er_gpu_concat;

typedef struct er_gpu_transpose {
  void *x, *y;
  int64_t n;
  int rank, es;              /* es: bytes per element */
  int dims[8], strides[8];   /* output dims; input strides in output order */
} er_gpu_transpose;

typedef struct er_gpu_softmax {
  void *x, *y;
  int64_t rows;
  int len, inner, log_softmax;
} er_gpu_softmax;

typedef struct er_gpu_lrn {
  void *x, *y;
  int64_t n;
  int c, inner, size;
  float alpha, beta, bias;
} er_gpu_lrn;

/* QuantizeLinear (x float -> y 8-bit) or DequantizeLinear (x 8-bit -> y
 * float): per tensor (axis_len 1) or per axis. */
typedef struct er_gpu_quant {
  void *x, *y, *scale, *zp;
  int64_t n;
  int has_zp, is_signed, axis_len, inner;
} er_gpu_quant;

/* QLinearConv: p as er_gpu_conv; q = x_signed w_signed y_signed
 * w_per_channel zx zy has_bias -. */
typedef struct er_gpu_qconv {
  void *x, *w, *bias, *y, *wscale, *wzp;
  float xscale, yscale;
  int64_t n;
  int p[16], q[8];
} er_gpu_qconv;

/* QLinearMatMul [M, K] x [K, N]; q = a_signed b_signed y_signed
 * b_per_column za zy - -. */
typedef struct er_gpu_qmatmul {
  void *a, *b, *y, *bscale, *bzp;
  float ascale, yscale;
  int M, N, K;
  int q[8];
} er_gpu_qmatmul;

#endif /* ER_GPU_PARAMS_H */
