/* vec.h - the vectorized non-GEMM kernels (depthwise convolution, pooling,
 * elementwise, activations, softmax, normalization), written once in
 * vec-impl.h over simd.h and compiled per ISA into a table of functions.
 * The generic kernel files choose a table by CPU feature and call through
 * it; everything here works on float32 and on ranges, so the callers split
 * work over threads. */
#ifndef ER_KERNELS_VEC_H
#define ER_KERNELS_VEC_H

#include "kernels/kernel.h"
#include "ops/fused.h"

/* The most taps along one axis the depthwise and pooling kernels take
 * (larger windows go to the reference kernels). */
#define ER_DW_MAX_TAPS 64

/* One depthwise (or pooling) job: planes [c0, c1) of one image. */
typedef struct er_dw_args {
  const float *x;              /* [C, H, W] */
  const float *w;              /* [C, kh, kw]; NULL for pools */
  const float *bias;           /* [C] or NULL */
  const float *add;            /* [C, OH, OW] residual or NULL */
  float *y;                    /* [C, OH, OW] */
  int64_t h, w_, oh, ow;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  er_activation act;
  /* Pools: */
  int pool;                    /* 0 conv, 1 max, 2 average */
  bool count_include_pad;
  int64_t pb, pr;              /* padding after (average divisor) */
} er_dw_args;

/* The most rows of the ring of padded input rows (see vec-impl.h);
 * windows needing more go to the reference kernels. */
#define ER_DW_RING_MAX 256

/* Rows of the ring: a block of 4 output rows spans (4 - 1) * sh + (kh - 1)
 * * dh + 1 input rows, rounded up to a power of two. */
static inline int64_t er__dw_ring_slots(const er_dw_args *a) {
  int64_t span = 3 * a->sh + (a->kh - 1) * a->dh + 1, slots = 1;
  while (slots < span) slots *= 2;
  return slots;
}

/* Depthwise convolutions the direct kernel takes (vec-impl.h): no
 * dilation, horizontal stride 1 or 2, and a zero-padded copy of the
 * plane's covered rows of at most ER_DW_DIRECT_MAX_FLOATS. */
#define ER_DW_DIRECT_MAX_FLOATS (INT64_C(1) << 20)

/* Row stride (floats) of the direct kernel's padded plane: the columns
 * the windows cover, rounded up to whole output vectors, plus the two
 * vectors a stride-2 split reads past them. */
static inline int64_t er__dw_direct_stride(const er_dw_args *a, int vn) {
  int64_t ox_end = (a->ow + vn - 1) / vn * vn;
  return ((ox_end - 1) * a->sw + a->kw + 2 * vn + 15) / 16 * 16;
}

/* Rows of the padded plane: those of whole blocks of 4 output rows. */
static inline int64_t er__dw_direct_rows(const er_dw_args *a) {
  return ((a->oh + 3) / 4 * 4 - 1) * a->sh + a->kh;
}

static inline int64_t er__dw_direct_floats(const er_dw_args *a, int vn) {
  if (a->oh <= 0 || a->ow <= 0) return 0;
  return er__dw_direct_rows(a) * er__dw_direct_stride(a, vn) + 16;
}

/* Planes of more input pixels than this (four times as many at stride
 * 2) stay with the ring kernel: its few rows live in L1, where a copy of a
 * 112x112 plane would not (on an EPYC with AVX-512, MobileNetV2's 112x112
 * stride-1 layer took 216 us on the ring and 290 us direct; its stride-2
 * 112x112 layer 433 us on the ring, 388 us direct; its 28x28 and smaller
 * layers half as long or less direct). */
#define ER_DW_DIRECT_MAX_PIXELS (64 * 64)

static inline bool er__dw_direct_ok(const er_dw_args *a) {
  return a->pool == 0 && a->dh == 1 && a->dw == 1 && (a->sw == 1 || a->sw == 2) && a->kh <= 7 && a->kw <= 7 &&
         ((a->oh - 1) * a->sh + a->kh) * ((a->ow - 1) * a->sw + a->kw) <= (a->sw == 2 ? 4 : 1) * ER_DW_DIRECT_MAX_PIXELS &&
         er__dw_direct_floats(a, 16) <= ER_DW_DIRECT_MAX_FLOATS;
}

/* The flat-plane depthwise kernel (vec-impl.h): equal strides of 1 or 2,
 * no dilation, windows up to 7x7. The padded input is laid out as one
 * plane (stride 1) or four phase planes (stride 2, split by row and column
 * parity) of row stride er__dw_flat_stride, so that every tap is the same
 * plane read at one offset and whole vectors of outputs run across row
 * ends (the few columns past each output row are computed and dropped). */
#define ER_DW_FLAT_UNROLL 4

static inline bool er__dw_flat_shape(const er_dw_args *a) {
  return a->pool == 0 && a->dh == 1 && a->dw == 1 && a->sh == a->sw && (a->sw == 1 || a->sw == 2) &&
         a->kh <= 7 && a->kw <= 7 && a->oh > 0 && a->ow > 0;
}

static inline int64_t er__dw_flat_stride(const er_dw_args *a) { return a->ow + ((a->kw - 1) >> (a->sw - 1)); }
static inline int64_t er__dw_flat_rows(const er_dw_args *a) { return a->oh + ((a->kh - 1) >> (a->sh - 1)); }

/* Floats of one input (phase) plane, with the margin a last block of
 * vectors reads past it (junk outputs only: a block ends at most a block
 * past the last row, and taps reach at most kw columns further), 16-aligned. */
static inline int64_t er__dw_flat_plane_floats(const er_dw_args *a, int vn) {
  return (er__dw_flat_rows(a) * er__dw_flat_stride(a) + ER_DW_FLAT_UNROLL * vn + a->kw + 15) / 16 * 16;
}

/* Outputs of the flat product: OH rows of the plane stride, rounded up to
 * whole blocks of vectors. */
static inline int64_t er__dw_flat_out_floats(const er_dw_args *a, int vn) {
  int64_t block = ER_DW_FLAT_UNROLL * vn;
  return (a->oh * er__dw_flat_stride(a) + block - 1) / block * block;
}

/* One buffer: the input (phase) planes and the flat outputs of one
 * channel. */
static inline int64_t er__dw_flat_buffer_floats(const er_dw_args *a, int vn) {
  /* + one vector: storing a row reads whole vectors of its outputs. */
  return er__dw_flat_plane_floats(a, vn) * (a->sw == 2 ? 4 : 1) + er__dw_flat_out_floats(a, vn) + vn;
}

/* Two buffers: channel c + 1 is copied in and channel c - 1 compacted out
 * while channel c computes, so no load waits on a store just made. */
static inline int64_t er__dw_flat_floats(const er_dw_args *a, int vn) { return 2 * er__dw_flat_buffer_floats(a, vn); }

/* Up to 4 ER_DW_DIRECT_MAX_PIXELS padded pixels at either stride: on the
 * EPYC, MobileNetV2's 112x112 stride-1 layer (32 channels) took 194 us
 * flat against 200 us on the ring. */
static inline bool er__dw_flat_ok(const er_dw_args *a) {
  return er__dw_flat_shape(a) &&
         er__dw_flat_rows(a) * er__dw_flat_stride(a) * a->sw * a->sw <= 4 * ER_DW_DIRECT_MAX_PIXELS &&
         er__dw_flat_floats(a, 16) <= ER_DW_DIRECT_MAX_FLOATS;
}

/* One row buffer of the direct pooling kernel: the padded columns the
 * windows cover for whole output vectors, plus 2 vn that the stride-2
 * splits read past them, 16-aligned. */
static inline int64_t er__pool_row_floats(const er_dw_args *a, int vn) {
  int64_t ox_end = (a->ow + vn - 1) / vn * vn;
  return ((ox_end - 1) * a->sw + a->kw + 2 * vn + 15) / 16 * 16;
}

/* Scratch floats one worker needs for er_dw_args a: the ring of padded,
 * phase-split input rows and a row of divisors, the direct kernel's
 * padded plane, or the flat kernel's two buffers, whichever is largest. */
static inline size_t er__dw_scratch_floats(const er_dw_args *a, int vn) {
  int64_t slots = er__dw_ring_slots(a);
  int64_t wp = (a->ow - 1) * a->sw + (a->kw - 1) * a->dw + 1;
  int64_t len = (wp + a->sw - 1) / a->sw + vn;
  int64_t rs = (a->sw * len + 15) / 16 * 16;
  int64_t ring = slots * rs + a->ow + vn + 16;
  int64_t direct = er__dw_direct_ok(a) ? er__dw_direct_floats(a, vn) : 0;
  int64_t flat = er__dw_flat_ok(a) ? er__dw_flat_floats(a, vn) : 0;
  if (flat > direct) direct = flat;
  /* Pools: two row buffers and the column divisors. */
  int64_t pool = a->pool ? 2 * er__pool_row_floats(a, vn) + (a->ow + vn - 1) / vn * vn + 16 : 0;
  if (pool > direct) direct = pool;
  return (size_t)(ring > direct ? ring : direct);
}

/* Elementwise unary functions beyond the fused activations. */
typedef enum er_unop {
  ER_UNOP_ACT = 0,             /* the er_activation in er_unary.act */
  ER_UNOP_EXP,
  ER_UNOP_ERF,
  ER_UNOP_ABS,
  ER_UNOP_NEG,
  ER_UNOP_SQRT,
  ER_UNOP_RECIPROCAL,
  ER_UNOP_LOG,                  /* natural log; libm's for zero, negatives, subnormals, inf, NaN */
} er_unop;

typedef struct er_unary {
  er_unop op;
  er_activation act;
} er_unary;

typedef enum er_binop {
  ER_BINOP_ADD = 0,
  ER_BINOP_SUB,
  ER_BINOP_MUL,
  ER_BINOP_DIV,
  ER_BINOP_PRELU,              /* a < 0 ? a * b : a */
  ER_BINOP_MAX,                /* NaN in either gives NaN, as the reference's */
  ER_BINOP_MIN,
} er_binop;

/* The patch (im2col) matrix of one image and group for convolution as
 * GEMM: row k is (channel, ky, kx), column j the output position. */
struct er_window;
typedef struct er_im2col {
  const float *x;              /* [Cg, H, W] */
  const struct er_window *g;
  int nr;                      /* panel width to pack for */
} er_im2col;

/* A product with few rows (M <= ER_GEMV_MAX_M) and an unpacked B, for
 * weights that are not constants: C = act(scale * A B + beta * D + bias)
 * without packing B (packing would cost as much as the product). */
#define ER_GEMV_MAX_M 4
/* The product along prepacked panels (er__gemv_panels, from gemm.c) takes
 * up to this many rows where the vectors are 16 floats wide: AVX-512's 32
 * registers hold 2 x 8 accumulators (batched requests to a server whose
 * fully connected weights dominate a run). Other callers keep to
 * ER_GEMV_MAX_M. */
#define ER_GEMV_ROWS_MAX_M_16 8
typedef struct er_gemv {
  int64_t m, n, k;
  const float *a;              /* element (i, k) at a[i * a_rs + k * a_cs] */
  int64_t a_rs, a_cs;
  const float *b;              /* element (k, j) at b[k * b_rs + j * b_cs]; b_cs or b_rs is 1 */
  int64_t b_rs, b_cs;
  float *c;                    /* [m, n] at row stride ldc */
  int64_t ldc;
  float scale, beta;
  const float *add;            /* element (i, j) at add[i * add_rs + j * add_cs]; NULL = none */
  int64_t add_rs, add_cs;
  const float *bias;           /* [n] or NULL */
  er_activation act;
} er_gemv;

/* Winograd F(2x2, 3x3) and F(4x4, 3x3) convolution over a chunk of output
 * tiles (see conv.c): the input transform writes V_t = B^T d B of each
 * tile as 16 (36) GEMM right-hand sides, the output transform turns the
 * products M_t = U_t V_t back into 2x2 (4x4) outputs with bias, residual
 * and activation. */
typedef struct er_wino {
  const float *x;              /* [C, H, W], one image */
  int64_t c, h, w, oh, ow, pt, pl;
  int64_t tw;                  /* tiles per row (th = ceil(oh / tile) rows) */
  int64_t t0, tn;              /* this chunk: tiles [t0, t0 + tn), row-major */
  int64_t chunk;               /* the most tiles of a chunk (a multiple of 32) */
  float *v;                    /* 16 x [panels of nr tiles][C][nr] */
  int64_t nr;                  /* the GEMM's panel width */
  size_t v_stride;             /* floats between the 16 matrices */
  const float *mo;             /* 16 x [M][tn] products */
  size_t m_stride;
  int64_t m;                   /* output channels */
  float *y;                    /* [M, OH, OW] */
  const float *bias;           /* [M] or NULL */
  const float *add;            /* [M, OH, OW] residual or NULL */
  er_activation act;
} er_wino;

/* Scratch floats one worker needs for the input transform: rows of the
 * padded input for one row of tiles, then one channel's transformed tiles
 * ([(tile + 2)^2][chunk], copied into the panels once complete). */
static inline size_t er__wino_scratch_floats(int64_t tw, int vn, int tile, int64_t chunk) {
  size_t rows = tile == 4 ? (size_t)(6 * (4 * tw + 4 + 4 * vn)) : (size_t)(4 * (2 * tw + 2 + 2 * vn));
  return (rows + 15) / 16 * 16 + (size_t)((tile + 2) * (tile + 2) * chunk) + 16;
}

/* A small dense convolution at stride 1 computed directly (conv.c's
 * f32_conv_direct kernels): blocks of ER_CD_MB output channels x 1 or 2
 * output rows x one vector of columns, every tap an input vector times
 * ER_CD_MB broadcast weights. For the layers where a GEMM's tiles would
 * be mostly padding (few output channels) and packing patches costs as
 * much as the product (MNIST-size images). */
#define ER_CD_MB 8
typedef struct er_conv_direct {
  const float *xp;             /* zero-padded input [c][hp][wpa] of one image */
  int64_t c, hp, wpa;
  int64_t kh, kw;
  int64_t m, oh, ow;
  const float *wp;             /* weights [ceil(m / 8)][c * kh * kw][8], 0 past m */
  const float *bias;           /* [m] or NULL */
  const float *add;            /* residual [m][oh][ow] or NULL */
  float *y;                    /* [m][oh][ow] */
  er_activation act;
  int64_t row_blocks;          /* ceil(oh / rows); work unit u: channel block
                                  u / row_blocks, row block u % row_blocks */
} er_conv_direct;

typedef struct er_vec_ops {
  const char *isa;
  int vn;                      /* floats per vector */
  /* Depthwise convolution or 2-D pooling over planes [c0, c1). */
  void (*dw)(const er_dw_args *a, int64_t c0, int64_t c1, float *scratch);
  /* Global average (max = false) or max pooling of planes [p0, p1) of
   * `size` floats each: y[p] = mean or max of x[p * size ...]. */
  void (*global_pool)(const float *x, float *y, int64_t size, int64_t p0, int64_t p1, bool max);
  /* y[i] = f(x[i]) for i in [0, n). */
  void (*unary)(const er_unary *u, const float *x, float *y, int64_t n);
  /* y[i] = a[i * as] op b[i * bs] for i in [0, n); as and bs are 0 or 1. */
  void (*binary)(er_binop op, const float *a, int64_t as, const float *b, int64_t bs, float *y, int64_t n);
  /* y[r * n + i] = a[r * ars + i] op b[r * brs + i] for r in [0, rows), i
   * in [0, n): short rows, one operand's row often repeated (ars or brs
   * 0; a blocked squeeze-excite Mul is [H * W][16] by one [16] row). */
  void (*binary_rows)(er_binop op, const float *a, int64_t ars, const float *b, int64_t brs, float *y, int64_t n,
                      int64_t rows);
  /* y[i] = x[i] * a + b for i in [0, n). */
  void (*affine)(const float *x, float *y, int64_t n, float a, float b);
  /* LRN of channels [c0, c1) of one image x [C, inner]: the square sum over
   * channels [c - before, c + after] clipped to [0, C);
   * y = x / (bias + k * sum)^beta. */
  void (*lrn)(const float *x, float *y, int64_t c, int64_t inner, int64_t c0, int64_t c1, int64_t before,
              int64_t after, float bias, float k, float beta);
  /* Softmax (or log-softmax) along the middle axis of x [n, inner], one
   * slice; inner == 1 is the contiguous-row case. */
  void (*softmax)(const float *x, float *y, int64_t n, int64_t inner, bool log);
  /* The block [k0, k0 + kc) x [j0, j0 + nc) of the patch matrix as panels
   * [q][kc][nr] (the GEMM's packing layout), zero past the last column. */
  void (*im2col_pack)(const er_im2col *ic, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *dst);
  /* Winograd transforms: input for channels [c0, c1), output for output
   * channels [m0, m1). */
  void (*wino_input)(const er_wino *w, int64_t c0, int64_t c1, float *scratch);
  void (*wino_output)(const er_wino *w, int64_t m0, int64_t m1);
  void (*wino4_input)(const er_wino *w, int64_t c0, int64_t c1, float *scratch);
  void (*wino4_output)(const er_wino *w, int64_t m0, int64_t m1);
  /* Winograd weights of F(tile x tile, 3x3): U = G g G^T of every (m, c)
   * kernel of wd [mm][cc][9] into tmp [(tile + 2)^2][mm][cc], in double,
   * rounded once. */
  void (*wino_weights)(const float *wd, int64_t mm, int64_t cc, int tile, float *tmp);
  /* One LSTM step of one batch row: gates [4n] in ONNX order (input,
   * output, forget, cell) before their activations; c and h [n] are
   * updated in place: c = f * c + i * g, h = o * tanh(c). */
  void (*lstm_cell)(const float *gates, float *c, float *h, int64_t n);
  /* GRU steps of one batch row (n = hidden size): gru_gates applies the
   * sigmoid to z, r [2n] in place and, with rh, writes r * h; gru_update
   * sets h = (1 - z) hh + z h with hh = tanh(xh + r * gh) (xh, r may be
   * NULL). */
  void (*gru_gates)(float *zr, const float *h, float *rh, int64_t n);
  void (*gru_update)(const float *xh, const float *gh, const float *z, const float *r, float *h, int64_t n);
  /* Output rows per block of conv_direct (1 or 2: what the registers hold). */
  int cd_rows;
  /* Work units [u0, u1) of a direct convolution. */
  void (*conv_direct)(const er_conv_direct *d, int64_t u0, int64_t u1);
  /* Columns [j0, j1) of a few-row product (see er_gemv). */
  void (*gemv)(const er_gemv *g, int64_t j0, int64_t j1);
  /* Layer normalization of rows [r0, r1) of x [rows, cols]: y = (x - mean)
   * / sqrt(var + eps) * scale + bias (bias may be NULL); mean and inv (may
   * be NULL) receive each row's mean and 1 / sqrt(var + eps). */
  /* InstanceNormalization of one plane of n floats: y = (x - mean) /
   * sqrt(var + eps) * scale + bias. */
  void (*instnorm)(const float *x, float *y, int64_t n, float scale, float bias, float eps);
  void (*layernorm)(const float *x, float *y, int64_t r0, int64_t r1, int64_t cols, const float *scale,
                    const float *bias, float eps, float *mean, float *inv);
} er_vec_ops;

/* Panels [q0, q1) of a few-row product whose B is packed in full-K panels
 * [n / nr][k][nr] (the SGEMM's prepacked weights; g->b is the first
 * panel, g->n all columns): each panel is a row-major B of its own, read
 * once from front to back. MatMul/Gemm with rows unknown at compile time
 * and the LSTM's steps run this way. */
static inline void er__gemv_panels(const er_vec_ops *ops, const er_gemv *g, int64_t nr, int64_t q0, int64_t q1) {
  for (int64_t q = q0; q < q1; q++) {
    er_gemv p = *g;
    int64_t j0 = q * nr;
    p.n = g->n - j0 < nr ? g->n - j0 : nr;
    p.b = g->b + q * g->k * nr;
    p.b_rs = nr;
    p.b_cs = 1;
    p.c += j0;
    if (p.bias) p.bias += j0;
    if (p.add) p.add += j0 * p.add_cs;
    ops->gemv(&p, 0, p.n);
  }
}

/* The comparison ops' rows (eltwise.c): n bool bytes y[i] = a[i * ia]
 * OP b[i * ib] (ia, ib: 1 or 0), per operand type (float, int32, int64)
 * and comparison (==, >, <, >=, <=). */
typedef void (*er_cmp_row_fn)(const void *a, int64_t ia, const void *b, int64_t ib, uint8_t *y, int64_t n);
#define ER_CMP_KINDS 5

#if defined(__x86_64__) || defined(__i386__)
extern const er_vec_ops er__vec_avx512;
extern const er_vec_ops er__vec_avx2;
extern const er_cmp_row_fn er__cmp_rows_avx2[3][ER_CMP_KINDS];
/* Transpose's 2-D step for 4-byte elements (layout-avx2.c):
 * out[a * out_a + b] = in[a + b * in_b] for a < na, b < nb. */
void er__transpose32_avx2(const uint32_t *in, int64_t in_b, uint32_t *out, int64_t out_a, int64_t na, int64_t nb);
void er__transpose32_avx512(const uint32_t *in, int64_t in_b, uint32_t *out, int64_t out_a, int64_t na, int64_t nb);
#endif
#if defined(__aarch64__)
extern const er_vec_ops er__vec_neon;
#endif

#endif /* ER_KERNELS_VEC_H */
