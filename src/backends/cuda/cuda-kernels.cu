/* cuda-kernels.cu - the CUDA backend's kernels and their C launchers.
 *
 * Each kernel is the CUDA twin of the OpenCL C kernel of the same name in
 * src/backends/opencl/opencl-kernels.cl: same parameters (the structs of
 * gpu/gpu-params.h, passed by value), same index arithmetic, same rounding
 * (rintf for round-half-to-even), so both backends match the CPU reference
 * the same way. One thread per output element unless said otherwise;
 * 32-bit indices (the host refuses larger tensors). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cuda-kernels.h"

#define BLOCK 256

static unsigned blocks(int64_t n) { return (unsigned)((n + BLOCK - 1) / BLOCK); }

__device__ static int bcast_offset(int i, int rank, const int *dims, const int *strides) {
  int off = 0;
  for (int k = rank - 1; k >= 0; k--) {
    int c = i % dims[k];
    i /= dims[k];
    off += c * strides[k];
  }
  return off;
}

/* ---- elementwise --------------------------------------------------------- */

__global__ static void unary_f32(const er_gpu_unary p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  const float *x = (const float *)p.x;
  float v = x[i], r, a = p.a, b = p.b;
  switch (p.op) {
    case ER_GPU_U_RELU: r = fmaxf(v, 0.0f); break;
    case ER_GPU_U_SIGMOID: r = 1.0f / (1.0f + expf(-v)); break;
    case ER_GPU_U_TANH: r = tanhf(v); break;
    case ER_GPU_U_EXP: r = expf(v); break;
    case ER_GPU_U_LOG: r = logf(v); break;
    case ER_GPU_U_ABS: r = fabsf(v); break;
    case ER_GPU_U_NEG: r = -v; break;
    case ER_GPU_U_SQRT: r = sqrtf(v); break;
    case ER_GPU_U_RECIP: r = 1.0f / v; break;
    case ER_GPU_U_FLOOR: r = floorf(v); break;
    case ER_GPU_U_CEIL: r = ceilf(v); break;
    case ER_GPU_U_ERF: r = erff(v); break;
    case ER_GPU_U_LEAKY: r = v >= 0.0f ? v : a * v; break;
    case ER_GPU_U_ELU: r = v >= 0.0f ? v : a * (expf(v) - 1.0f); break;
    case ER_GPU_U_SELU: r = v > 0.0f ? b * v : b * (a * expf(v) - a); break;
    case ER_GPU_U_HARDSIGMOID: r = fmaxf(0.0f, fminf(1.0f, a * v + b)); break;
    case ER_GPU_U_HARDSWISH: r = v * fmaxf(0.0f, fminf(1.0f, v / 6.0f + 0.5f)); break;
    case ER_GPU_U_CLIP: r = fminf(fmaxf(v, a), b); break;
    case ER_GPU_U_GELU: r = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
    case ER_GPU_U_GELU_TANH: r = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))); break;
    case ER_GPU_U_SOFTPLUS: r = v > 20.0f ? v : log1pf(expf(v)); break;
    case ER_GPU_U_SOFTSIGN: r = v / (1.0f + fabsf(v)); break;
    case ER_GPU_U_SIN: r = sinf(v); break;
    case ER_GPU_U_COS: r = cosf(v); break;
    case ER_GPU_U_ROUND: r = rintf(v); break;
    default: r = v; break;
  }
  ((float *)p.y)[i] = r;
}

__global__ static void binary_f32(const er_gpu_binary p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  float x = ((const float *)p.a)[bcast_offset(i, p.rank, p.dims, p.sa)];
  float z = ((const float *)p.b)[bcast_offset(i, p.rank, p.dims, p.sb)];
  float r;
  switch (p.op) {
    case ER_GPU_B_ADD: r = x + z; break;
    case ER_GPU_B_SUB: r = x - z; break;
    case ER_GPU_B_MUL: r = x * z; break;
    case ER_GPU_B_DIV: r = x / z; break;
    case ER_GPU_B_POW: r = powf(x, z); break;
    case ER_GPU_B_MAX: r = fmaxf(x, z); break;
    case ER_GPU_B_MIN: r = fminf(x, z); break;
    case ER_GPU_B_PRELU: r = x < 0.0f ? x * z : x; break;
    case ER_GPU_B_MEAN2: r = (x + z) * 0.5f; break;
    default: r = x; break;
  }
  ((float *)p.y)[i] = r;
}

__global__ static void affine_f32(const er_gpu_affine p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  int ch = (i / p.inner) % p.c;
  ((float *)p.y)[i] = ((const float *)p.x)[i] * ((const float *)p.scale)[ch] + ((const float *)p.shift)[ch];
}

/* ---- the conv and gemm epilogue (the fused ops) --------------------------- */

/* er__act_apply (ops/fused.h) in float, comparison for comparison, as
 * act_f32 in opencl-kernels.cl. */
__device__ static float act_f32(int act, float p0, float p1, float x) {
  float v;
  switch (act) {
    case ER_GPU_ACT_RELU: return x > 0.0f ? x : (x == x ? 0.0f : x);
    case ER_GPU_ACT_CLIP: return x < p0 ? p0 : x > p1 ? p1 : x;
    case ER_GPU_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ER_GPU_ACT_TANH: return tanhf(x);
    case ER_GPU_ACT_HARDSIGMOID:
      v = p0 * x + p1;
      return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
    case ER_GPU_ACT_HARDSWISH:
      v = x / 6.0f + 0.5f;
      return x * (v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v);
    case ER_GPU_ACT_LEAKYRELU: return x >= 0.0f ? x : p0 * x;
    case ER_GPU_ACT_SILU: return x / (1.0f + expf(-x));
    case ER_GPU_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case ER_GPU_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    default: return x;
  }
}

/* y[o] = act(r + z[o]): the result's last step, while r is in a register. */
__device__ static void epilogue_store(void *y, int o, float r, const er_gpu_epilogue &ep) {
  if (ep.has_z) r += ((const float *)ep.z)[o];
  ((float *)y)[o] = act_f32(ep.act, ep.p0, ep.p1, r);
}

/* ---- convolution and pooling --------------------------------------------- */

__global__ static void conv2d_f32(const er_gpu_conv p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  int C = p.p[1], H = p.p[2], W = p.p[3], M = p.p[4], OH = p.p[5], OW = p.p[6], KH = p.p[7];
  int KW = p.p[8], SH = p.p[9], SW = p.p[10], PT = p.p[11], PL = p.p[12], DH = p.p[13], DW = p.p[14], G = p.p[15];
  int ow = i % OW, oh = (i / OW) % OH, m = (i / (OW * OH)) % M, n = i / (OW * OH * M);
  int cg = C / G, mg = M / G, g = m / mg;
  const float *x = (const float *)p.x, *w = (const float *)p.w;
  float acc = p.has_bias ? ((const float *)p.bias)[m] : 0.0f;
  for (int c = 0; c < cg; c++) {
    const float *xc = x + ((n * C + g * cg + c) * H) * W;
    const float *wc = w + ((m * cg + c) * KH) * KW;
    for (int kh = 0; kh < KH; kh++) {
      int ih = oh * SH - PT + kh * DH;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; kw++) {
        int iw = ow * SW - PL + kw * DW;
        if (iw < 0 || iw >= W) continue;
        acc += xc[ih * W + iw] * wc[kh * KW + kw];
      }
    }
  }
  epilogue_store(p.y, i, acc, p.ep);
}

__global__ static void im2col_f32(const er_gpu_im2col p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  int C = p.p[1], H = p.p[2], W = p.p[3], OH = p.p[5], OW = p.p[6], KH = p.p[7];
  int KW = p.p[8], SH = p.p[9], SW = p.p[10], PT = p.p[11], PL = p.p[12], DH = p.p[13], DW = p.p[14];
  int L = OH * OW, K = C * KH * KW;
  int l = i % L, k = (i / L) % K, b = i / (L * K);
  int ow = l % OW, oh = l / OW;
  int kw = k % KW, kh = (k / KW) % KH, c = k / (KW * KH);
  int ih = oh * SH - PT + kh * DH, iw = ow * SW - PL + kw * DW;
  ((float *)p.col)[i] = ih >= 0 && ih < H && iw >= 0 && iw < W ? ((const float *)p.x)[((b * C + c) * H + ih) * W + iw] : 0.0f;
}

__global__ static void pool2d_f32(const er_gpu_pool p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  int PB = p.p[0], PR = p.p[1], H = p.p[2], W = p.p[3], OH = p.p[4], OW = p.p[5], KH = p.p[6], KW = p.p[7];
  int SH = p.p[8], SW = p.p[9], PT = p.p[10], PL = p.p[11], DH = p.p[12], DW = p.p[13], inc_pad = p.p[14],
      is_max = p.p[15];
  int ow = i % OW, oh = (i / OW) % OH, nc = i / (OW * OH);
  const float *xc = (const float *)p.x + nc * H * W;
  float acc = is_max ? -INFINITY : 0.0f;
  int count = 0;
  for (int kh = 0; kh < KH; kh++) {
    int ih = oh * SH - PT + kh * DH;
    for (int kw = 0; kw < KW; kw++) {
      int iw = ow * SW - PL + kw * DW;
      bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
      if (inside) {
        float v = xc[ih * W + iw];
        acc = is_max ? fmaxf(acc, v) : acc + v;
        count++;
      } else if (inc_pad && !is_max) {
        if (ih < H + PB && iw < W + PR) count++;
      }
    }
  }
  ((float *)p.y)[i] = is_max ? acc : (count ? acc / (float)count : 0.0f);
}

/* ---- matrix products ------------------------------------------------------ */

#define TILE 16
__global__ static void gemm_f32(const er_gpu_gemm p) {
  __shared__ float ta[TILE][TILE + 1], tb[TILE][TILE + 1];
  int j = blockIdx.x * TILE + threadIdx.x, i = blockIdx.y * TILE + threadIdx.y, bb = blockIdx.z;
  int lj = threadIdx.x, li = threadIdx.y;
  int ao = bcast_offset(bb, p.brank, p.bdims, p.bsa), bo = bcast_offset(bb, p.brank, p.bdims, p.bsb);
  const float *a = (const float *)p.a, *b = (const float *)p.b;
  float acc = 0.0f;
  for (int k0 = 0; k0 < p.K; k0 += TILE) {
    int ka = k0 + lj, kb = k0 + li;
    ta[li][lj] = (i < p.M && ka < p.K) ? a[ao + i * p.sai + ka * p.sak] : 0.0f;
    tb[li][lj] = (kb < p.K && j < p.N) ? b[bo + kb * p.sbk + j * p.sbj] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; k++) acc += ta[li][k] * tb[k][lj];
    __syncthreads();
  }
  if (i < p.M && j < p.N) {
    float r = p.alpha * acc;
    if (p.has_c) r += p.beta * ((const float *)p.c)[i * p.sci + j * p.scj];
    epilogue_store(p.y, (bb * p.M + i) * p.N + j, r, p.ep);
  }
}

/* ---- data movement --------------------------------------------------------- */

__global__ static void concat_copy(const er_gpu_concat p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.bytes) return;
  int o = i / p.inner_src, r = i % p.inner_src;
  ((uint8_t *)p.dst)[o * p.inner_dst + p.offset + r] = ((const uint8_t *)p.src)[i];
}

__global__ static void transpose_bytes(const er_gpu_transpose p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  int off = bcast_offset(i, p.rank, p.dims, p.strides);
  for (int k = 0; k < p.es; k++) ((uint8_t *)p.y)[i * p.es + k] = ((const uint8_t *)p.x)[off * p.es + k];
}

__global__ static void fill_bytes(uint8_t *buf, uint4 pattern, int pattern_bytes, int64_t bytes) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= bytes) return;
  const uint8_t *pat = (const uint8_t *)&pattern;
  buf[i] = pat[i % pattern_bytes];
}

/* ---- softmax and normalization ---------------------------------------------- */

__global__ static void softmax_f32(const er_gpu_softmax p) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= p.rows) return;
  int o = r / p.inner, in = r % p.inner;
  const float *xr = (const float *)p.x + o * p.len * p.inner + in;
  float *yr = (float *)p.y + o * p.len * p.inner + in;
  float mx = -INFINITY;
  for (int k = 0; k < p.len; k++) mx = fmaxf(mx, xr[k * p.inner]);
  float sum = 0.0f;
  for (int k = 0; k < p.len; k++) sum += expf(xr[k * p.inner] - mx);
  for (int k = 0; k < p.len; k++) {
    float e = xr[k * p.inner] - mx;
    yr[k * p.inner] = p.log_softmax ? e - logf(sum) : expf(e) / sum;
  }
}

__global__ static void lrn_f32(const er_gpu_lrn p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  const float *x = (const float *)p.x;
  int c = (i / p.inner) % p.c;
  int base = i - c * p.inner;
  int lo = c - (p.size - 1) / 2, hi = c + p.size / 2;
  float sq = 0.0f;
  for (int k = max(lo, 0); k <= min(hi, p.c - 1); k++) {
    float v = x[base + k * p.inner];
    sq += v * v;
  }
  ((float *)p.y)[i] = x[i] / powf(p.bias + p.alpha / (float)p.size * sq, p.beta);
}

/* ---- quantization ----------------------------------------------------------------- */

__device__ static int load_q(const void *p, int i, int is_signed) {
  const uint8_t *b = (const uint8_t *)p;
  return is_signed ? (int)(int8_t)b[i] : (int)b[i];
}

__device__ static uint8_t store_q(float v, int zp, int is_signed) {
  float r = rintf(v) + (float)zp;  /* round half to even, then saturate */
  float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  r = fminf(fmaxf(r, lo), hi);
  return is_signed ? (uint8_t)(int8_t)(int)r : (uint8_t)(int)r;
}

__global__ static void quantize_f32(const er_gpu_quant p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  int c = p.axis_len > 1 ? (i / p.inner) % p.axis_len : 0;
  int z = p.has_zp ? load_q(p.zp, c, p.is_signed) : 0;
  ((uint8_t *)p.y)[i] = store_q(((const float *)p.x)[i] / ((const float *)p.scale)[c], z, p.is_signed);
}

__global__ static void dequantize_f32(const er_gpu_quant p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  int c = p.axis_len > 1 ? (i / p.inner) % p.axis_len : 0;
  int z = p.has_zp ? load_q(p.zp, c, p.is_signed) : 0;
  ((float *)p.y)[i] = (float)(load_q(p.x, i, p.is_signed) - z) * ((const float *)p.scale)[c];
}

__global__ static void qconv2d(const er_gpu_qconv p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  int C = p.p[1], H = p.p[2], W = p.p[3], M = p.p[4], OH = p.p[5], OW = p.p[6], KH = p.p[7];
  int KW = p.p[8], SH = p.p[9], SW = p.p[10], PT = p.p[11], PL = p.p[12], DH = p.p[13], DW = p.p[14], G = p.p[15];
  int xs = p.q[0], ws = p.q[1], ys = p.q[2], per_ch = p.q[3], zx = p.q[4], zy = p.q[5], has_bias = p.q[6];
  int ow = i % OW, oh = (i / OW) % OH, m = (i / (OW * OH)) % M, n = i / (OW * OH * M);
  int cg = C / G, mg = M / G, g = m / mg;
  int zw = load_q(p.wzp, per_ch ? m : 0, ws);
  int acc = has_bias ? ((const int *)p.bias)[m] : 0;
  for (int c = 0; c < cg; c++) {
    int xbase = ((n * C + g * cg + c) * H) * W;
    int wbase = ((m * cg + c) * KH) * KW;
    for (int kh = 0; kh < KH; kh++) {
      int ih = oh * SH - PT + kh * DH;
      for (int kw = 0; kw < KW; kw++) {
        int iw = ow * SW - PL + kw * DW;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        acc += (load_q(p.x, xbase + ih * W + iw, xs) - zx) * (load_q(p.w, wbase + kh * KW + kw, ws) - zw);
      }
    }
  }
  float s = p.xscale * ((const float *)p.wscale)[per_ch ? m : 0] / p.yscale;
  ((uint8_t *)p.y)[i] = store_q((float)acc * s, zy, ys);
}

__global__ static void qmatmul(const er_gpu_qmatmul p) {
  int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
  if (j >= p.N || i >= p.M) return;
  int as = p.q[0], bs = p.q[1], ys = p.q[2], per_col = p.q[3], za = p.q[4], zy = p.q[5];
  int zb = load_q(p.bzp, per_col ? j : 0, bs);
  int acc = 0;
  for (int k = 0; k < p.K; k++) acc += (load_q(p.a, i * p.K + k, as) - za) * (load_q(p.b, k * p.N + j, bs) - zb);
  float s = p.ascale * ((const float *)p.bscale)[per_col ? j : 0] / p.yscale;
  ((uint8_t *)p.y)[i * p.N + j] = store_q((float)acc * s, zy, ys);
}

/* ---- launchers -------------------------------------------------------------------- */

#define LAUNCH1(kernel, n, param)                                                        \
  do {                                                                                   \
    kernel<<<blocks(n), BLOCK, 0, (cudaStream_t)stream>>>(param);                        \
    return (int)cudaGetLastError();                                                      \
  } while (0)

extern "C" {

int er__cuda_unary(const er_gpu_unary *p, void *stream) { LAUNCH1(unary_f32, p->n, *p); }
int er__cuda_binary(const er_gpu_binary *p, void *stream) { LAUNCH1(binary_f32, p->n, *p); }
int er__cuda_affine(const er_gpu_affine *p, void *stream) { LAUNCH1(affine_f32, p->n, *p); }
int er__cuda_conv(const er_gpu_conv *p, void *stream) { LAUNCH1(conv2d_f32, p->n, *p); }
int er__cuda_pool(const er_gpu_pool *p, void *stream) { LAUNCH1(pool2d_f32, p->n, *p); }
int er__cuda_im2col(const er_gpu_im2col *p, void *stream) { LAUNCH1(im2col_f32, p->n, *p); }
int er__cuda_concat(const er_gpu_concat *p, void *stream) { LAUNCH1(concat_copy, p->bytes, *p); }
int er__cuda_transpose(const er_gpu_transpose *p, void *stream) { LAUNCH1(transpose_bytes, p->n, *p); }
int er__cuda_softmax(const er_gpu_softmax *p, void *stream) { LAUNCH1(softmax_f32, p->rows, *p); }
int er__cuda_lrn(const er_gpu_lrn *p, void *stream) { LAUNCH1(lrn_f32, p->n, *p); }
int er__cuda_quantize(const er_gpu_quant *p, void *stream) { LAUNCH1(quantize_f32, p->n, *p); }
int er__cuda_dequantize(const er_gpu_quant *p, void *stream) { LAUNCH1(dequantize_f32, p->n, *p); }
int er__cuda_qconv(const er_gpu_qconv *p, void *stream) { LAUNCH1(qconv2d, p->n, *p); }

int er__cuda_gemm(const er_gpu_gemm *p, void *stream) {
  dim3 block(TILE, TILE, 1);
  dim3 grid((unsigned)((p->N + TILE - 1) / TILE), (unsigned)((p->M + TILE - 1) / TILE), (unsigned)p->batch);
  gemm_f32<<<grid, block, 0, (cudaStream_t)stream>>>(*p);
  return (int)cudaGetLastError();
}

int er__cuda_qmatmul(const er_gpu_qmatmul *p, void *stream) {
  dim3 grid(blocks(p->N), (unsigned)p->M, 1);
  qmatmul<<<grid, BLOCK, 0, (cudaStream_t)stream>>>(*p);
  return (int)cudaGetLastError();
}

int er__cuda_fill(void *buf, const void *pattern, size_t pattern_bytes, size_t bytes, void *stream) {
  uint4 pat;
  memset(&pat, 0, sizeof pat);
  memcpy(&pat, pattern, pattern_bytes > sizeof pat ? sizeof pat : pattern_bytes);
  fill_bytes<<<blocks((int64_t)bytes), BLOCK, 0, (cudaStream_t)stream>>>((uint8_t *)buf, pat, (int)pattern_bytes,
                                                                          (int64_t)bytes);
  return (int)cudaGetLastError();
}

}  /* extern "C" */
