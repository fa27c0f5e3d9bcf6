/* opencl-kernels.cl - the OpenCL C 1.2 kernels of the OpenCL backend.
 * opencl-kernels.c embeds this file as a string (CMake generates it with
 * cmake/embed.cmake), so the backend needs no file at run time.
 *
 * Conventions: one work item per output element unless said otherwise;
 * shapes travel as int8 vectors (rank <= 8, unused lanes 1 or 0); every
 * kernel is float32 except the quantized ones, which read int8/uint8 through
 * uchar buffers and a signedness flag. Index arithmetic is int: the host
 * refuses tensors of more than INT_MAX elements. */

/* ---- elementwise ------------------------------------------------------- */

enum {
  U_RELU, U_SIGMOID, U_TANH, U_EXP, U_LOG, U_ABS, U_NEG, U_SQRT, U_RECIP, U_FLOOR, U_CEIL,
  U_ERF, U_LEAKY, U_ELU, U_SELU, U_HARDSIGMOID, U_HARDSWISH, U_CLIP, U_GELU, U_GELU_TANH,
  U_SOFTPLUS, U_SOFTSIGN, U_IDENTITY, U_SIN, U_COS, U_ROUND
};

__kernel void unary_f32(__global const float *x, __global float *y, int op, float a, float b, int n_items) {
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  float v = x[i], r;
  switch (op) {
    case U_RELU: r = fmax(v, 0.0f); break;
    case U_SIGMOID: r = 1.0f / (1.0f + exp(-v)); break;
    case U_TANH: r = tanh(v); break;
    case U_EXP: r = exp(v); break;
    case U_LOG: r = log(v); break;
    case U_ABS: r = fabs(v); break;
    case U_NEG: r = -v; break;
    case U_SQRT: r = sqrt(v); break;
    case U_RECIP: r = 1.0f / v; break;
    case U_FLOOR: r = floor(v); break;
    case U_CEIL: r = ceil(v); break;
    case U_ERF: r = erf(v); break;
    case U_LEAKY: r = v >= 0.0f ? v : a * v; break;
    case U_ELU: r = v >= 0.0f ? v : a * (exp(v) - 1.0f); break;
    case U_SELU: r = v > 0.0f ? b * v : b * (a * exp(v) - a); break;
    case U_HARDSIGMOID: r = fmax(0.0f, fmin(1.0f, a * v + b)); break;
    case U_HARDSWISH: r = v * fmax(0.0f, fmin(1.0f, v / 6.0f + 0.5f)); break;
    case U_CLIP: r = fmin(fmax(v, a), b); break;
    case U_GELU: r = 0.5f * v * (1.0f + erf(v * 0.70710678118654752f)); break;
    case U_GELU_TANH:
      r = 0.5f * v * (1.0f + tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
      break;
    case U_SOFTPLUS: r = v > 20.0f ? v : log1p(exp(v)); break;
    case U_SOFTSIGN: r = v / (1.0f + fabs(v)); break;
    case U_SIN: r = sin(v); break;
    case U_COS: r = cos(v); break;
    case U_ROUND: r = rint(v); break;
    default: r = v; break;
  }
  y[i] = r;
}

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_PRELU, B_MEAN2 };

/* Offset of output element i in an input whose strides are aligned to the
 * output's dims (0 on broadcast axes). */
inline int bcast_offset(int i, int rank, int8 dims, int8 strides) {
  int d[8] = {dims.s0, dims.s1, dims.s2, dims.s3, dims.s4, dims.s5, dims.s6, dims.s7};
  int s[8] = {strides.s0, strides.s1, strides.s2, strides.s3,
              strides.s4, strides.s5, strides.s6, strides.s7};
  int off = 0;
  for (int k = rank - 1; k >= 0; k--) {
    int c = i % d[k];
    i /= d[k];
    off += c * s[k];
  }
  return off;
}

__kernel void binary_f32(__global const float *a, __global const float *b, __global float *y, int op,
                         int rank, int8 dims, int8 sa, int8 sb, int n_items) {
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  float x = a[bcast_offset(i, rank, dims, sa)], z = b[bcast_offset(i, rank, dims, sb)], r;
  switch (op) {
    case B_ADD: r = x + z; break;
    case B_SUB: r = x - z; break;
    case B_MUL: r = x * z; break;
    case B_DIV: r = x / z; break;
    case B_POW: r = pow(x, z); break;
    case B_MAX: r = fmax(x, z); break;
    case B_MIN: r = fmin(x, z); break;
    case B_PRELU: r = x < 0.0f ? x * z : x; break;
    case B_MEAN2: r = (x + z) * 0.5f; break;
    default: r = x; break;
  }
  y[i] = r;
}

/* y = x * scale[c] + shift[c] over [N, C, inner]: inference BatchNorm. */
__kernel void channel_affine_f32(__global const float *x, __global float *y,
                                 __global const float *scale, __global const float *shift, int c,
                                 int inner, int n_items) {
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int ch = (i / inner) % c;
  y[i] = x[i] * scale[ch] + shift[ch];
}

/* ---- the conv and gemm epilogue (the fused ops) ----------------------- */

/* The ER_GPU_ACT_* codes of gpu-params.h. */
enum {
  ACT_NONE, ACT_RELU, ACT_CLIP, ACT_SIGMOID, ACT_TANH, ACT_HARDSIGMOID, ACT_HARDSWISH,
  ACT_LEAKYRELU, ACT_SILU, ACT_GELU, ACT_GELU_TANH
};

/* er__act_apply (ops/fused.h) in float, comparison for comparison, so NaN
 * and the clamps' edges behave as in the reference (fmax would turn a NaN
 * into 0 where the reference keeps it). */
inline float act_f32(int act, float p0, float p1, float x) {
  float v;
  switch (act) {
    case ACT_RELU: return x > 0.0f ? x : (x == x ? 0.0f : x);
    case ACT_CLIP: return x < p0 ? p0 : x > p1 ? p1 : x;
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-x));
    case ACT_TANH: return tanh(x);
    case ACT_HARDSIGMOID:
      v = p0 * x + p1;
      return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
    case ACT_HARDSWISH:
      v = x / 6.0f + 0.5f;
      return x * (v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v);
    case ACT_LEAKYRELU: return x >= 0.0f ? x : p0 * x;
    case ACT_SILU: return x / (1.0f + exp(-x));
    case ACT_GELU: return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
    case ACT_GELU_TANH:
      return 0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    default: return x;
  }
}

/* y[o] = act(r + z[o]): the result's last step, while r is in a register. */
inline void epilogue_store(__global float *y, int o, float r, __global const float *z, int has_z, int act,
                           float p0, float p1) {
  if (has_z) r += z[o];
  y[o] = act_f32(act, p0, p1, r);
}

/* ---- convolution and pooling (2-D; 1-D runs with H = 1) ---------------- */

/* p: N C H W | M OH OW KH | KW SH SW PT | PL DH DW G; z, has_z, act, p0,
 * p1: the epilogue (er_gpu_epilogue). */
__kernel void conv2d_f32(__global const float *x, __global const float *w, __global const float *bias,
                         int has_bias, __global float *y, int16 p, __global const float *z, int has_z,
                         int act, float p0, float p1, int n_items) {
  int N = p.s0, C = p.s1, H = p.s2, W = p.s3, M = p.s4, OH = p.s5, OW = p.s6, KH = p.s7;
  int KW = p.s8, SH = p.s9, SW = p.sa, PT = p.sb, PL = p.sc, DH = p.sd, DW = p.se, G = p.sf;
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int ow = i % OW, oh = (i / OW) % OH, m = (i / (OW * OH)) % M, n = i / (OW * OH * M);
  int cg = C / G, mg = M / G, g = m / mg;
  float acc = has_bias ? bias[m] : 0.0f;
  for (int c = 0; c < cg; c++) {
    __global const float *xc = x + ((n * C + g * cg + c) * H) * W;
    __global const float *wc = w + ((m * cg + c) * KH) * KW;
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
  (void)N;
  epilogue_store(y, i, acc, z, has_z, act, p0, p1);
}

/* col[b, (c*KH + kh)*KW + kw, oh*OW + ow] = x[b, c, ih, iw], 0 in the
 * padding; p as conv2d_f32 (groups of 1). */
__kernel void im2col_f32(__global const float *x, __global float *col, int16 p, int n_items) {
  int C = p.s1, H = p.s2, W = p.s3, OH = p.s5, OW = p.s6, KH = p.s7;
  int KW = p.s8, SH = p.s9, SW = p.sa, PT = p.sb, PL = p.sc, DH = p.sd, DW = p.se;
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int L = OH * OW, K = C * KH * KW;
  int l = i % L, k = (i / L) % K, b = i / (L * K);
  int ow = l % OW, oh = l / OW;
  int kw = k % KW, kh = (k / KW) % KH, c = k / (KW * KH);
  int ih = oh * SH - PT + kh * DH, iw = ow * SW - PL + kw * DW;
  col[i] = ih >= 0 && ih < H && iw >= 0 && iw < W ? x[((b * C + c) * H + ih) * W + iw] : 0.0f;
}

/* p: PB PR H W | OH OW KH KW | SH SW PT PL | DH DW count_include_pad is_max
 * (PB, PR: the end pads, for count_include_pad) */
__kernel void pool2d_f32(__global const float *x, __global float *y, int16 p, int n_items) {
  int PB = p.s0, PR = p.s1, H = p.s2, W = p.s3, OH = p.s4, OW = p.s5, KH = p.s6, KW = p.s7;
  int SH = p.s8, SW = p.s9, PT = p.sa, PL = p.sb, DH = p.sc, DW = p.sd, inc_pad = p.se,
      is_max = p.sf;
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int ow = i % OW, oh = (i / OW) % OH, nc = i / (OW * OH);
  __global const float *xc = x + nc * H * W;
  float acc = is_max ? -INFINITY : 0.0f;
  int count = 0;
  for (int kh = 0; kh < KH; kh++) {
    int ih = oh * SH - PT + kh * DH;
    for (int kw = 0; kw < KW; kw++) {
      int iw = ow * SW - PL + kw * DW;
      bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
      if (inside) {
        float v = xc[ih * W + iw];
        acc = is_max ? fmax(acc, v) : acc + v;
        count++;
      } else if (inc_pad && !is_max) {
        /* Padding counts only where the window lies inside the padded
         * input (ceil_mode windows past the end do not count). */
        if (ih < H + PB && iw < W + PR) count++;
      }
    }
  }
  y[i] = is_max ? acc : (count ? acc / (float)count : 0.0f);
}

/* ---- matrix products ----------------------------------------------------- */

/* Y[b, i, j] = alpha * sum_k A(b, i, k) B(b, k, j) + beta * Cm(i, j)
 * A(b,i,k) = a[aoff(b) + i*sai + k*sak], likewise B; the batch offsets
 * come from the batch index decomposed over bdims with per-operand
 * strides; then the epilogue (z laid out as Y). Work items: (j, i, b).
 * Tiles of 16x16 through local memory. */
#define TILE 16
__kernel void gemm_f32(__global const float *a, __global const float *b, __global const float *cm,
                       int has_c, __global float *y, int M, int N, int K, int sai, int sak, int sbk,
                       int sbj, int sci, int scj, float alpha, float beta, int brank, int8 bdims,
                       int8 bsa, int8 bsb, __global const float *z, int has_z, int act, float p0,
                       float p1) {
  __local float ta[TILE][TILE + 1], tb[TILE][TILE + 1];
  int j = get_global_id(0), i = get_global_id(1), bb = get_global_id(2);
  int lj = get_local_id(0), li = get_local_id(1);
  int ao = bcast_offset(bb, brank, bdims, bsa), bo = bcast_offset(bb, brank, bdims, bsb);
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int ka = k0 + lj, kb = k0 + li;
    ta[li][lj] = (i < M && ka < K) ? a[ao + i * sai + ka * sak] : 0.0f;
    tb[li][lj] = (kb < K && j < N) ? b[bo + kb * sbk + j * sbj] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE; k++) acc += ta[li][k] * tb[k][lj];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (i < M && j < N) {
    float r = alpha * acc;
    if (has_c) r += beta * cm[i * sci + j * scj];
    epilogue_store(y, (bb * M + i) * N + j, r, z, has_z, act, p0, p1);
  }
}

/* ---- data movement (any element size) ------------------------------------ */

/* Copies one input of a Concat: [outer, inner_src] into [outer, inner_dst]
 * at column `offset` (units of bytes). */
__kernel void concat_copy(__global const uchar *src, __global uchar *dst, int inner_src,
                          int inner_dst, int offset, int n_items) {
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int o = i / inner_src, r = i % inner_src;
  dst[o * inner_dst + offset + r] = src[i];
}

/* y[i] = x[perm offset]: out dims and the input strides permuted into the
 * output's order; es = bytes per element. */
__kernel void transpose_bytes(__global const uchar *x, __global uchar *y, int rank, int8 dims,
                              int8 strides, int es, int n_items) {
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int off = bcast_offset(i, rank, dims, strides);
  for (int k = 0; k < es; k++) y[i * es + k] = x[off * es + k];
}

/* ---- softmax and normalization ------------------------------------------- */

/* One work item per (outer, inner) row of `len` elements strided by inner. */
__kernel void softmax_f32(__global const float *x, __global float *y, int len, int inner,
                          int log_softmax, int n_items) {
  int r = get_global_id(0);
  if (r >= n_items) return;  /* the launch rounds up to whole work groups */
  int o = r / inner, in = r % inner;
  __global const float *xr = x + o * len * inner + in;
  __global float *yr = y + o * len * inner + in;
  float mx = -INFINITY;
  for (int k = 0; k < len; k++) mx = fmax(mx, xr[k * inner]);
  float sum = 0.0f;
  for (int k = 0; k < len; k++) sum += exp(xr[k * inner] - mx);
  for (int k = 0; k < len; k++) {
    float e = xr[k * inner] - mx;
    yr[k * inner] = log_softmax ? e - log(sum) : exp(e) / sum;
  }
}

/* Local response normalization across channels of [N, C, inner]. */
__kernel void lrn_f32(__global const float *x, __global float *y, int C, int inner, int size,
                      float alpha, float beta, float bias, int n_items) {
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int c = (i / inner) % C;
  int base = i - c * inner;
  int lo = c - (size - 1) / 2, hi = c + size / 2;
  float sq = 0.0f;
  for (int k = max(lo, 0); k <= min(hi, C - 1); k++) {
    float v = x[base + k * inner];
    sq += v * v;
  }
  y[i] = x[i] / pow(bias + alpha / (float)size * sq, beta);
}

/* ---- quantization (ONNX QDQ / QLinear semantics) ------------------------- */

inline int load_q(__global const uchar *p, int i, int is_signed) {
  return is_signed ? (int)(char)p[i] : (int)p[i];
}

inline uchar store_q(float v, int zp, int is_signed) {
  /* Round half to even, then saturate to the type's range. */
  float r = rint(v) + (float)zp;
  float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  r = fmin(fmax(r, lo), hi);
  return is_signed ? (uchar)(char)(int)r : (uchar)(int)r;
}

/* Per-tensor (axis_len 1) or per-axis scale and zero point: element i's
 * channel is (i / inner) % axis_len. */
__kernel void quantize_f32(__global const float *x, __global uchar *y, __global const float *scale,
                           __global const uchar *zp, int has_zp, int is_signed, int axis_len,
                           int inner, int n_items) {
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int c = axis_len > 1 ? (i / inner) % axis_len : 0;
  int z = has_zp ? load_q(zp, c, is_signed) : 0;
  y[i] = store_q(x[i] / scale[c], z, is_signed);
}

__kernel void dequantize_f32(__global const uchar *x, __global float *y, __global const float *scale,
                             __global const uchar *zp, int has_zp, int is_signed, int axis_len,
                             int inner, int n_items) {
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int c = axis_len > 1 ? (i / inner) % axis_len : 0;
  int z = has_zp ? load_q(zp, c, is_signed) : 0;
  y[i] = (float)(load_q(x, i, is_signed) - z) * scale[c];
}

/* QLinearConv: int32 accumulation of (x - zx)(w - zw), then
 * y = saturate(round(acc * sx * sw[m] / sy) + zy). p as conv2d_f32;
 * q: x_signed w_signed y_signed w_per_channel zx zy has_bias. */
__kernel void qconv2d(__global const uchar *x, __global const uchar *w, __global const int *bias,
                      __global uchar *y, __global const float *wscale, __global const uchar *wzp,
                      float xscale, float yscale, int16 p, int8 q, int n_items) {
  int C = p.s1, H = p.s2, W = p.s3, M = p.s4, OH = p.s5, OW = p.s6, KH = p.s7;
  int KW = p.s8, SH = p.s9, SW = p.sa, PT = p.sb, PL = p.sc, DH = p.sd, DW = p.se, G = p.sf;
  int xs = q.s0, ws = q.s1, ys = q.s2, per_ch = q.s3, zx = q.s4, zy = q.s5, has_bias = q.s6;
  int i = get_global_id(0);
  if (i >= n_items) return;  /* the launch rounds up to whole work groups */
  int ow = i % OW, oh = (i / OW) % OH, m = (i / (OW * OH)) % M, n = i / (OW * OH * M);
  int cg = C / G, mg = M / G, g = m / mg;
  int zw = load_q(wzp, per_ch ? m : 0, ws);
  int acc = has_bias ? bias[m] : 0;
  for (int c = 0; c < cg; c++) {
    int xbase = ((n * C + g * cg + c) * H) * W;
    int wbase = ((m * cg + c) * KH) * KW;
    for (int kh = 0; kh < KH; kh++) {
      int ih = oh * SH - PT + kh * DH;
      for (int kw = 0; kw < KW; kw++) {
        int iw = ow * SW - PL + kw * DW;
        /* Padding holds the zero point, i.e. contributes zero. */
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        acc += (load_q(x, xbase + ih * W + iw, xs) - zx) * (load_q(w, wbase + kh * KW + kw, ws) - zw);
      }
    }
  }
  float s = xscale * wscale[per_ch ? m : 0] / yscale;
  y[i] = store_q((float)acc * s, zy, ys);
}

/* QLinearMatMul on 2-D [M, K] x [K, N] per batch (batch folded into rows of
 * a when b is 2-D). q: a_signed b_signed y_signed b_per_col za zy zb0 -. */
__kernel void qmatmul(__global const uchar *a, __global const uchar *b, __global uchar *y,
                      __global const float *bscale, __global const uchar *bzp, float ascale,
                      float yscale, int M, int N, int K, int8 q) {
  int j = get_global_id(0), i = get_global_id(1);
  int as = q.s0, bs = q.s1, ys = q.s2, per_col = q.s3, za = q.s4, zy = q.s5;
  int zb = load_q(bzp, per_col ? j : 0, bs);
  int acc = 0;
  for (int k = 0; k < K; k++) acc += (load_q(a, i * K + k, as) - za) * (load_q(b, k * N + j, bs) - zb);
  float s = ascale * bscale[per_col ? j : 0] / yscale;
  y[i * N + j] = store_q((float)acc * s, zy, ys);
  (void)M;
}
