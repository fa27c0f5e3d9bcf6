/* kcases-quant.c - cases for the integer kernels: QConv, QLinearConv,
 * ConvInteger, QMatMul, QLinearMatMul, MatMulInteger (on the integer GEMM
 * with tiles 8x32 / 4x64 for AVX-512 VNNI, 32x32 for AMX and 6x16 / 4x16
 * for AVX2, k in groups of 4 or 2, padded to 64 for AMX): output channels, pixels, rows and columns below, at
 * and above the tiles, K not a multiple of the k group, every kind of
 * window (1x1 stride 1, padding, strides, dilations, groups, depthwise,
 * 1-D, SAME padding), uint8 and int8 activations, int8 and uint8 weights
 * with and without zero points, per-channel and per-tensor parameters,
 * bias, clamps, float outputs, batches, and shapes unknown at compile time.
 * The "w7" variants hold weights within [-64, 64] as the tiles read them
 * (uint8 weights shifted by -128), which the AVX2 vpmaddubsw kernels
 * (names with "w7") must take; their "extremes" variants put activations
 * at their type's ends and weights at +-64 only, where pairs of products
 * reach 32640, one short of what int16 saturation would change.
 * Integer results must equal the reference exactly: the harness compares
 * integer outputs byte for byte, and float outputs here with TOL_EXACT. */
#include "kcases.h"

#include <stdlib.h>

/* Appends an input of an integer type with values uniform in [lo, hi]. */
static er_tensor *q_input(kcase *c, er_dtype t, int rank, const int64_t *dims, int lo, int hi, bool constant) {
  if (c->n_in >= KC_MAX_IO) {
    fprintf(stderr, "case %s: too many inputs\n", c->name);
    exit(2);
  }
  er_tensor *x = calloc(1, sizeof *x);
  er__tensor_set(x, t, rank, dims);
  int64_t n = er__tensor_count(x);
  x->nbytes = (size_t)n * er_dtype_size(t);
  x->data = calloc(1, x->nbytes ? x->nbytes : 1);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = lo + (int64_t)(kc_uniform(c, 0.0f, 1.0f) * (float)(hi - lo + 1));
    if (v > hi) v = hi;
    er__store_i64(x->data, t, i, v);
  }
  c->is_const[c->n_in] = constant;
  c->in[c->n_in++] = x;
  return x;
}

/* A one-value (rank 0) or per-channel ([n]) integer constant. */
static er_tensor *q_param(kcase *c, er_dtype t, int64_t n, int lo, int hi) {
  return n < 0 ? q_input(c, t, 0, NULL, lo, hi, true) : q_input(c, t, 1, DIMS(n), lo, hi, true);
}

/* A one-value or per-channel float constant. */
static er_tensor *f_param(kcase *c, int64_t n, float lo, float hi) {
  return n < 0 ? kc_input(c, 0, NULL, lo, hi, true) : kc_input(c, 1, DIMS(n), lo, hi, true);
}

static int type_lo(er_dtype t) { return t == ER_DTYPE_INT8 ? -128 : 0; }
static int type_hi(er_dtype t) { return t == ER_DTYPE_INT8 ? 127 : 255; }
static const char *tname(er_dtype t) { return t == ER_DTYPE_INT8 ? "s8" : "u8"; }

/* Weight values of the "w7" variants: [-64, 64] once uint8 is shifted. */
static int w7_lo(er_dtype t) { return t == ER_DTYPE_INT8 ? -64 : 64; }
static int w7_hi(er_dtype t) { return t == ER_DTYPE_INT8 ? 64 : 192; }

/* Sets every element of an integer tensor to lo or hi at random. */
static void q_extremes(kcase *c, er_tensor *t, int lo, int hi) {
  int64_t n = er__tensor_count(t);
  for (int64_t i = 0; i < n; i++) er__store_i64(t->data, t->dtype, i, kc_uniform(c, 0.0f, 1.0f) < 0.5f ? lo : hi);
}

/* ======================================================================== */
/* Convolutions                                                              */
/* ======================================================================== */

typedef struct conv_shape {
  int64_t n, c, h, w, m, kh, kw, sh, sw, ph, pw, dh, dw, group;
  bool one_d;
  /* 0: pads (ph, pw, ph, pw + 1 when pw > 0); 1 (true): auto_pad
   * SAME_UPPER; SYM: pads (ph, pw, ph, pw). */
  int same;
} conv_shape;
#define SYM 2

static const conv_shape conv_shapes[] = {
    /* n  c   h   w   m  kh kw sh sw ph pw dh dw g */
    {1, 3, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},      /* one full row tile */
    {1, 5, 9, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},      /* 9 rows: tile + 1 */
    {1, 4, 4, 8, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},      /* 1x1, 32 pixels, 7 rows */
    {2, 17, 5, 7, 33, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},    /* 1x1, 35 pixels, K 17 */
    {1, 16, 12, 12, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false},  /* stride 2 */
    {1, 6, 11, 13, 10, 3, 3, 1, 1, 2, 2, 2, 2, 1, false, false},   /* dilation 2 */
    {1, 8, 9, 9, 12, 3, 3, 1, 1, 1, 1, 1, 1, 2, false, false},     /* 2 groups */
    {1, 16, 10, 10, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16, false, false}, /* depthwise */
    {1, 8, 15, 15, 8, 3, 3, 2, 2, 1, 1, 1, 1, 8, false, false},    /* depthwise stride 2 */
    {1, 3, 23, 21, 5, 7, 7, 2, 2, 3, 3, 1, 1, 1, false, false},    /* a 7x7 stem */
    {1, 7, 1, 40, 6, 1, 5, 1, 2, 0, 2, 1, 1, 1, true, false},      /* 1-D */
    {1, 9, 7, 6, 11, 3, 2, 1, 1, 0, 0, 1, 1, 1, false, true},      /* SAME_UPPER */
    {1, 64, 7, 7, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},    /* K 576, 49 pixels */
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},      /* 1x1x1x1 */
    {1, 24, 17, 33, 24, 5, 5, 2, 2, 2, 2, 1, 1, 24, false, false}, /* depthwise 5x5 stride 2, odd sizes */
    {1, 12, 9, 20, 12, 3, 3, 1, 1, 2, 2, 2, 2, 12, false, false},  /* depthwise dilated */
    {2, 10, 1, 70, 10, 1, 7, 1, 1, 0, 3, 1, 1, 10, true, false},   /* depthwise 1-D, batch 2 */
    {1, 6, 19, 18, 6, 3, 3, 2, 2, 0, 0, 1, 1, 6, false, true},     /* depthwise SAME stride 2 */
    {1, 40, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 40, false, false},   /* depthwise 7x7, a partial channel block */
    {1, 20, 14, 14, 20, 3, 3, 2, 2, 1, 1, 1, 1, 20, false, false}, /* depthwise 14x14 stride 2 */
    /* Depthwise 3x3 over planes of one to three output vectors (the
     * VBMI window loop is compiled per vector count; the right pad makes
     * outputs w + 1 wide): 4x3, 5x6 and 6x7 maps read as one table,
     * stride 2 from 9x9 (unpadded), 8x8 and 12x11 as two. */
    {1, 7, 4, 3, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7, false, false},
    {1, 5, 9, 9, 5, 3, 3, 2, 2, 0, 0, 1, 1, 5, false, false},
    {1, 9, 5, 6, 9, 3, 3, 1, 1, 1, 1, 1, 1, 9, false, false},
    {1, 6, 6, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, false, false},
    {1, 5, 8, 8, 5, 3, 3, 2, 2, 1, 1, 1, 1, 5, false, false},
    {1, 11, 12, 11, 11, 3, 3, 2, 2, 1, 1, 1, 1, 11, false, false},
    /* ... and of more than four vectors, four at a time and a tail of
     * one or two: 8x9 and 9x9 maps (one table per vector). */
    {1, 6, 8, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, false, false},
    {1, 5, 9, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5, false, false},
    {1, 17, 60, 60, 17, 3, 3, 1, 1, 1, 1, 1, 1, 17, false, false}, /* depthwise over several bands */
    /* Depthwise planes past the channels-in-lanes limits (400 output
     * pixels, 1024 when strided), requantized as they are summed: stride
     * 2 with an odd row, and 5x5; each limit just passed; no padding (the
     * first row's vectors start at the input's first byte). Below them, in
     * lanes: stride 2 to 23x23. */
    {1, 9, 70, 66, 9, 3, 3, 2, 2, 1, 1, 1, 1, 9, false, false},
    {1, 5, 40, 37, 5, 5, 5, 1, 1, 2, 2, 1, 1, 5, false, false},
    {1, 10, 21, 20, 10, 3, 3, 1, 1, 1, 1, 1, 1, 10, false, false},
    {1, 9, 65, 63, 9, 3, 3, 2, 2, 1, 1, 1, 1, 9, false, false},
    {1, 12, 45, 45, 12, 3, 3, 2, 2, 1, 1, 1, 1, 12, false, false},
    {1, 9, 32, 40, 9, 3, 3, 1, 1, 0, 0, 1, 1, 9, false, false},
    /* Too few channels for the lanes: planes whose rows are shorter than
     * a vector (stride 2), and stride 3 (converted element by element). */
    {1, 3, 30, 9, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3, false, false},
    {1, 2, 20, 20, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, false, false},
    /* Small feature maps, where the in-place convolution runs pixels by
     * channels (7-bit weights): a 7x7 map (a last tile of one pixel),
     * stride 2 to 7x7, two groups, and channels past a group of KG. */
    {1, 32, 7, 7, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 20, 14, 14, 48, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false},
    {1, 32, 6, 6, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2, false, false},
    {1, 19, 14, 14, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    /* ... with each pixel tail of AVX-512's 8-row transposed tile and
     * channel panels short of 32 (the right pad makes outputs w + 1
     * wide): 15 pixels (a tail of 7) by 40 channels, 42 (2) by 36, 9 (1)
     * by 50, 27 (3) by 64, 45 (5) by 64, 30 (6) by 40, 20 (4) by 33. */
    {1, 24, 3, 4, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 16, 6, 6, 36, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 40, 3, 2, 50, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 12, 9, 2, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 30, 5, 8, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 20, 10, 2, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 8, 4, 4, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    /* ... and rows of 10 to 14 outputs, which AVX-512 VNNI's row tile
     * takes whole (a second byte transpose past 8 pixels), and of 29 (in
     * three runs). */
    {1, 20, 5, 9, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 12, 4, 10, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 30, 3, 11, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 24, 4, 12, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 16, 3, 13, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 64, 2, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    /* ... and 1x1 layers on them: read in place only then (a batch of 2,
     * and stride 2, which reads one of four phase planes). */
    {1, 256, 7, 7, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},
    {2, 128, 7, 7, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},
    {1, 128, 14, 14, 32, 1, 1, 2, 2, 0, 0, 1, 1, 1, false, false},
    /* Grouped planes from long rows: a 1x1 layer over 210 pixels, rows
     * of 141 padded columns, and stride 2 to rows of 76; channel counts
     * that leave rows of the last group empty. */
    {1, 6, 3, 70, 10, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},
    {1, 5, 4, 140, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},
    {1, 7, 5, 150, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false},
    /* Layers that fill AMX's 32 x 32 tiles (K at least 128, padded to 64):
     * pixel tails, batches, stride 2, groups, dilation. */
    {1, 32, 9, 11, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false},   /* K 288, 99 pixels */
    {2, 128, 5, 6, 48, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},   /* K 128, 48 of 64 rows */
    {1, 96, 8, 8, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false},    /* K 864, stride 2 */
    {1, 64, 6, 6, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2, false, false},    /* 2 groups of 32 */
    {1, 40, 7, 7, 32, 3, 3, 1, 1, 2, 2, 2, 2, 1, false, false},    /* K 360, dilation 2 */
    /* "Same" 3x3 layers at stride 1 (one pixel of padding all round),
     * which AVX-512 VNNI reads from planes without padding columns: rows of
     * 16 pixels, rows of 9 across the 16-pixel vectors (13 channels, a
     * partial channel group; 20 rows, a partial row panel), rows of 40 and
     * of 56 (a batch of 2), two groups, rows of 2 and of 1 pixel. */
    {1, 8, 5, 16, 8, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, true},
    {1, 13, 7, 9, 20, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, true},
    {1, 32, 6, 40, 17, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, true},
    {2, 12, 9, 56, 16, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, true},
    {1, 16, 6, 11, 24, 3, 3, 1, 1, 0, 0, 1, 1, 2, false, true},
    {1, 6, 10, 2, 9, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, true},
    {1, 8, 10, 1, 8, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, true},
    /* (planes of 300 KB: built by all workers) */
    {1, 128, 48, 48, 8, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, true},
    /* ... and at stride 2 with one pixel of padding on each side (an even
     * width: the right taps never reach the padding): rows of 20 output
     * pixels, of 14 (13 channels, a batch of 2, an odd height), of 10
     * (two groups), and of 2. */
    {1, 8, 12, 40, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, SYM},
    {2, 13, 9, 28, 20, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, SYM},
    {1, 16, 10, 20, 16, 3, 3, 2, 2, 1, 1, 1, 1, 2, false, SYM},
    {1, 8, 6, 4, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, SYM},
};

static void conv_attrs(kcase *c, const conv_shape *s) {
  if (s->one_d) {
    kc_attr_ints(c, "kernel_shape", 1, DIMS(s->kw));
    kc_attr_ints(c, "strides", 1, DIMS(s->sw));
    kc_attr_ints(c, "pads", 2, DIMS(s->pw, s->pw + 1));
    kc_attr_ints(c, "dilations", 1, DIMS(s->dw));
  } else {
    /* Depthwise shapes leave out strides and dilations of 1 (their
     * defaults), so that kernels reading the attributes meet both. */
    bool defaults = s->group > 1 && s->sh == 1 && s->sw == 1 && s->dh == 1 && s->dw == 1;
    kc_attr_ints(c, "kernel_shape", 2, DIMS(s->kh, s->kw));
    if (!defaults) kc_attr_ints(c, "strides", 2, DIMS(s->sh, s->sw));
    if (s->same == 1) kc_attr_string(c, "auto_pad", "SAME_UPPER");
    else kc_attr_ints(c, "pads", 4, DIMS(s->ph, s->pw, s->ph, s->pw + (s->pw > 0 && s->same != SYM ? 1 : 0)));
    if (!defaults) kc_attr_ints(c, "dilations", 2, DIMS(s->dh, s->dw));
  }
  if (s->group > 1) kc_attr_int(c, "group", s->group);
}

static void conv_xw(kcase *c, const conv_shape *s, er_dtype xt, bool dynamic) {
  if (s->one_d) q_input(c, xt, 3, DIMS(s->n, s->c, s->w), type_lo(xt), type_hi(xt), false);
  else q_input(c, xt, 4, DIMS(s->n, s->c, s->h, s->w), type_lo(xt), type_hi(xt), false);
  c->dynamic = dynamic;
}

/* Weights over their type's range, or the w7 range when w7. */
static er_tensor *conv_w(kcase *c, const conv_shape *s, er_dtype wt, bool w7) {
  int64_t cg = s->c / s->group;
  int lo = w7 ? w7_lo(wt) : type_lo(wt), hi = w7 ? w7_hi(wt) : type_hi(wt);
  if (s->one_d) return q_input(c, wt, 3, DIMS(s->m, cg, s->kw), lo, hi, true);
  return q_input(c, wt, 4, DIMS(s->m, cg, s->kh, s->kw), lo, hi, true);
}

/* Multipliers that keep outputs inside the 8-bit range most of the time
 * (so that rounding, not only the clamp, is exercised). */
static float mult_for(const conv_shape *s) {
  float k = (float)(s->c / s->group * s->kh * s->kw);
  return 0.5f / (k * 40.0f);
}

static void gen_qconv(case_fn fn, void *arg) {
  kcase c;
  static const er_dtype ts[] = {ER_DTYPE_UINT8, ER_DTYPE_INT8};
  for (size_t i = 0; i < ER_ARRAY_LEN(conv_shapes); i++) {
    const conv_shape *s = &conv_shapes[i];
    for (int variant = 0; variant < 8; variant++) {
      /* 6: w7; 7: w7 extremes, uint8 weights with zero points */
      bool w7 = variant >= 6, ext = variant == 7;
      er_dtype xt = ts[variant % 2], yt = ts[(variant / 2) % 2];
      er_dtype wt = variant == 5 || variant == 7 ? ER_DTYPE_UINT8 : ER_DTYPE_INT8;
      bool per_channel = variant != 3, bias = variant != 2, wzp = variant >= 4 && variant != 6, float_out = variant == 4;
      kc_begin(&c, "QConv", "com.edgerun", 1, "QConv #%zu x%s w%s %s %s%s%s%s%s", i, tname(xt), tname(wt),
               float_out ? "f32" : tname(yt), per_channel ? "per-channel" : "per-tensor", bias ? " bias" : "",
               wzp ? " w_zp" : "", variant == 1 ? " dynamic" : "", ext ? " w7 extremes" : w7 ? " w7" : "");
      c.tol = TOL_EXACT_T;
      if (w7) c.must_take = "w7";
      conv_xw(&c, s, xt, variant == 1);
      if (ext) q_extremes(&c, c.in[0], type_lo(xt), type_hi(xt));
      q_param(&c, xt, -1, type_lo(xt) + 3, type_hi(xt) - 3);
      er_tensor *w = conv_w(&c, s, wt, w7);
      if (ext) q_extremes(&c, w, w7_lo(wt), w7_hi(wt));
      if (wzp) q_param(&c, wt, per_channel ? s->m : -1, type_lo(wt) + 10, type_hi(wt) - 10);
      else q_param(&c, wt, per_channel ? s->m : -1, wt == ER_DTYPE_UINT8 ? 128 : 0, wt == ER_DTYPE_UINT8 ? 128 : 0);
      if (bias) q_input(&c, ER_DTYPE_INT32, 1, DIMS(s->m), -20000, 20000, true);
      else kc_input_none(&c);
      float mu = mult_for(s);
      f_param(&c, per_channel ? s->m : -1, mu * 0.5f, mu * 1.5f);
      f_param(&c, per_channel ? s->m : -1, -3.0f, 3.0f);
      if (!float_out) {
        q_param(&c, yt, -1, type_lo(yt) + 20, type_hi(yt) - 20);
        if (variant == 2) {
          kc_attr_int(&c, "qmin", type_lo(yt) + 30);
          kc_attr_int(&c, "qmax", type_hi(yt) - 40);
        }
      } else {
        kc_attr_float(&c, "clip_min", 0.0f);
        kc_attr_float(&c, "clip_max", 4.0f);
      }
      conv_attrs(&c, s);
      fn(&c, arg);
    }
  }
}

static void gen_qlinearconv(case_fn fn, void *arg) {
  kcase c;
  static const er_dtype ts[] = {ER_DTYPE_UINT8, ER_DTYPE_INT8};
  for (size_t i = 0; i < ER_ARRAY_LEN(conv_shapes); i++) {
    const conv_shape *s = &conv_shapes[i];
    for (int variant = 0; variant < 5; variant++) {
      /* 4: w7 extremes, int8 activations and weights */
      bool w7 = variant == 4;
      er_dtype xt = ts[variant % 2], wt = variant == 3 ? ER_DTYPE_UINT8 : ER_DTYPE_INT8, yt = ts[(variant / 2) % 2];
      bool per_channel = variant != 1;
      kc_begin(&c, "QLinearConv", "", 10, "QLinearConv #%zu x%s w%s y%s %s%s", i, tname(xt), tname(wt), tname(yt),
               per_channel ? "per-channel" : "per-tensor", w7 ? " w7 extremes" : "");
      if (w7) c.must_take = "w7";
      conv_xw(&c, s, xt, variant == 2);
      if (w7) q_extremes(&c, c.in[0], type_lo(xt), type_hi(xt));
      float k = (float)(s->c / s->group * s->kh * s->kw);
      f_param(&c, -1, 0.01f, 0.02f);
      q_param(&c, xt, -1, type_lo(xt) + 3, type_hi(xt) - 3);
      er_tensor *w = conv_w(&c, s, wt, w7);
      if (w7) q_extremes(&c, w, w7_lo(wt), w7_hi(wt));
      f_param(&c, per_channel ? s->m : -1, 0.005f, 0.01f);
      q_param(&c, wt, per_channel ? s->m : -1, type_lo(wt) + 60, type_hi(wt) - 60);
      f_param(&c, -1, 0.0005f * k, 0.001f * k);
      q_param(&c, yt, -1, type_lo(yt) + 20, type_hi(yt) - 20);
      if (variant != 1) q_input(&c, ER_DTYPE_INT32, 1, DIMS(s->m), -5000, 5000, true);
      conv_attrs(&c, s);
      fn(&c, arg);
    }
  }
}

static void gen_convinteger(case_fn fn, void *arg) {
  kcase c;
  static const er_dtype ts[] = {ER_DTYPE_UINT8, ER_DTYPE_INT8};
  for (size_t i = 0; i < ER_ARRAY_LEN(conv_shapes); i++) {
    const conv_shape *s = &conv_shapes[i];
    /* 3 and 4: the input zero point computed at run time (quantize_dynamic's
     * DynamicQuantizeLinear feeds it), with weight zero points. */
    for (int variant = 0; variant < 6; variant++) {
      /* 5: w7, uint8 weights with zero points, x_zp at run time */
      bool w7 = variant == 5;
      er_dtype xt = ts[variant % 2], wt = variant == 2 || variant >= 4 ? ER_DTYPE_UINT8 : ER_DTYPE_INT8;
      bool runtime_zp = variant >= 3;
      kc_begin(&c, "ConvInteger", "", 10, "ConvInteger #%zu x%s w%s%s%s", i, tname(xt), tname(wt),
               variant == 0 ? " no zero points" : runtime_zp ? " x_zp at run time" : "", w7 ? " w7" : "");
      /* (depthwise layers take a run-time zero point only in the reference) */
      if (w7 && !(s->group > 1 && s->group == s->c && s->m == s->c)) c.must_take = "w7";
      conv_xw(&c, s, xt, false);
      conv_w(&c, s, wt, w7);
      if (variant > 0) {
        if (runtime_zp) q_input(&c, xt, 0, NULL, type_lo(xt), type_hi(xt), false);
        else q_param(&c, xt, -1, type_lo(xt), type_hi(xt));
        q_param(&c, wt, variant >= 2 ? s->m : -1, type_lo(wt), type_hi(wt));
      }
      conv_attrs(&c, s);
      fn(&c, arg);
    }
  }
}

/* ======================================================================== */
/* Matrix products                                                           */
/* ======================================================================== */

static const int64_t mkn[][3] = {
    {1, 1, 1},   {1, 256, 10}, {3, 7, 65}, {4, 64, 64}, {5, 17, 63}, {13, 100, 130}, {64, 300, 64},
    {1, 2048, 1000}, {7, 3, 129}, {130, 33, 17},
};

static void gen_qmatmul(case_fn fn, void *arg) {
  kcase c;
  static const er_dtype ts[] = {ER_DTYPE_UINT8, ER_DTYPE_INT8};
  for (size_t i = 0; i < ER_ARRAY_LEN(mkn); i++) {
    int64_t m = mkn[i][0], k = mkn[i][1], n = mkn[i][2];
    for (int variant = 0; variant < 8; variant++) {
      /* 6: w7; 7: w7 extremes, uint8 weights with zero points */
      bool w7 = variant >= 6, ext = variant == 7;
      er_dtype xt = ts[variant % 2], yt = ts[(variant / 2) % 2];
      er_dtype wt = variant == 5 || variant == 7 ? ER_DTYPE_UINT8 : ER_DTYPE_INT8;
      bool per_col = variant != 3, bias = variant != 2, wzp = variant >= 4 && variant != 6, float_out = variant == 4;
      bool batched = variant == 1;
      kc_begin(&c, "QMatMul", "com.edgerun", 1, "QMatMul [%s%lld,%lld]x[%lld,%lld] x%s w%s %s%s%s%s%s",
               batched ? "2,3," : "", (long long)m, (long long)k, (long long)k, (long long)n, tname(xt), tname(wt),
               float_out ? "f32" : tname(yt), per_col ? "" : " per-tensor", bias ? " bias" : "", wzp ? " w_zp" : "",
               ext ? " w7 extremes" : w7 ? " w7" : "");
      c.tol = TOL_EXACT_T;
      if (w7) c.must_take = "w7";
      er_tensor *x = batched ? q_input(&c, xt, 4, DIMS(2, 3, m, k), type_lo(xt), type_hi(xt), false)
                             : q_input(&c, xt, 2, DIMS(m, k), type_lo(xt), type_hi(xt), false);
      if (ext) q_extremes(&c, x, type_lo(xt), type_hi(xt));
      c.dynamic = variant == 3;
      q_param(&c, xt, -1, type_lo(xt) + 3, type_hi(xt) - 3);
      er_tensor *w = q_input(&c, wt, 2, DIMS(k, n), w7 ? w7_lo(wt) : type_lo(wt), w7 ? w7_hi(wt) : type_hi(wt), true);
      if (ext) q_extremes(&c, w, w7_lo(wt), w7_hi(wt));
      if (wzp) q_param(&c, wt, per_col ? n : -1, type_lo(wt) + 10, type_hi(wt) - 10);
      else q_param(&c, wt, per_col ? n : -1, wt == ER_DTYPE_UINT8 ? 128 : 0, wt == ER_DTYPE_UINT8 ? 128 : 0);
      if (bias) q_input(&c, ER_DTYPE_INT32, 1, DIMS(n), -20000, 20000, true);
      else kc_input_none(&c);
      float mu = 0.5f / ((float)k * 40.0f);
      f_param(&c, per_col ? n : -1, mu * 0.5f, mu * 1.5f);
      f_param(&c, per_col ? n : -1, -3.0f, 3.0f);
      if (!float_out) {
        q_param(&c, yt, -1, type_lo(yt) + 20, type_hi(yt) - 20);
        if (variant == 2) {
          kc_attr_int(&c, "qmin", type_lo(yt) + 30);
          kc_attr_int(&c, "qmax", type_hi(yt) - 40);
        }
      } else {
        kc_attr_float(&c, "clip_min", -1.0f);
        kc_attr_float(&c, "clip_max", 1.0f);
      }
      fn(&c, arg);
    }
  }
}

static void gen_qlinearmatmul(case_fn fn, void *arg) {
  kcase c;
  static const er_dtype ts[] = {ER_DTYPE_UINT8, ER_DTYPE_INT8};
  for (size_t i = 0; i < ER_ARRAY_LEN(mkn); i++) {
    int64_t m = mkn[i][0], k = mkn[i][1], n = mkn[i][2];
    for (int variant = 0; variant < 5; variant++) {
      /* 4: w7 extremes, uint8 weights */
      bool w7 = variant == 4;
      er_dtype xt = ts[variant % 2], wt = variant >= 3 ? ER_DTYPE_UINT8 : ER_DTYPE_INT8, yt = ts[(variant / 2) % 2];
      kc_begin(&c, "QLinearMatMul", "", 10, "QLinearMatMul [%lld,%lld]x[%lld,%lld] x%s w%s y%s%s%s", (long long)m,
               (long long)k, (long long)k, (long long)n, tname(xt), tname(wt), tname(yt),
               variant == 1 ? " per-tensor" : "", w7 ? " w7 extremes" : "");
      if (w7) c.must_take = "w7";
      er_tensor *x = q_input(&c, xt, 2, DIMS(m, k), type_lo(xt), type_hi(xt), false);
      if (w7) q_extremes(&c, x, type_lo(xt), type_hi(xt));
      f_param(&c, -1, 0.01f, 0.02f);
      q_param(&c, xt, -1, type_lo(xt) + 3, type_hi(xt) - 3);
      er_tensor *w = q_input(&c, wt, 2, DIMS(k, n), type_lo(wt), type_hi(wt), true);
      if (w7) q_extremes(&c, w, w7_lo(wt), w7_hi(wt));
      f_param(&c, variant == 1 ? -1 : n, 0.005f, 0.01f);
      q_param(&c, wt, variant == 1 ? -1 : n, type_lo(wt) + 60, type_hi(wt) - 60);
      f_param(&c, -1, 0.0005f * (float)k, 0.001f * (float)k);
      q_param(&c, yt, -1, type_lo(yt) + 20, type_hi(yt) - 20);
      fn(&c, arg);
    }
  }
}

static void gen_matmulinteger(case_fn fn, void *arg) {
  kcase c;
  static const er_dtype ts[] = {ER_DTYPE_UINT8, ER_DTYPE_INT8};
  for (size_t i = 0; i < ER_ARRAY_LEN(mkn); i++) {
    int64_t m = mkn[i][0], k = mkn[i][1], n = mkn[i][2];
    for (int variant = 0; variant < 6; variant++) {
      /* 5: w7, int8 weights with zero points, a_zp at run time */
      bool w7 = variant == 5;
      er_dtype xt = ts[variant % 2], wt = variant == 2 || variant == 4 ? ER_DTYPE_UINT8 : ER_DTYPE_INT8;
      bool runtime_zp = variant >= 3;
      kc_begin(&c, "MatMulInteger", "", 10, "MatMulInteger [%lld,%lld]x[%lld,%lld] x%s w%s%s%s", (long long)m,
               (long long)k, (long long)k, (long long)n, tname(xt), tname(wt),
               variant == 0 ? " no zero points" : runtime_zp ? " a_zp at run time" : "", w7 ? " w7" : "");
      if (w7) c.must_take = "w7";
      q_input(&c, xt, variant == 1 ? 3 : 2, variant == 1 ? DIMS(2, m, k) : DIMS(m, k), type_lo(xt), type_hi(xt),
              false);
      q_input(&c, wt, 2, DIMS(k, n), w7 ? w7_lo(wt) : type_lo(wt), w7 ? w7_hi(wt) : type_hi(wt), true);
      if (variant > 0) {
        if (runtime_zp) q_input(&c, xt, 0, NULL, type_lo(xt), type_hi(xt), false);
        else q_param(&c, xt, -1, type_lo(xt), type_hi(xt));
        q_param(&c, wt, variant >= 2 ? n : -1, type_lo(wt), type_hi(wt));
      }
      fn(&c, arg);
    }
  }
}

/* ======================================================================== */
/* QuantizeLinear, DequantizeLinear, QAdd, QMul, QLut                        */
/* ======================================================================== */

static const int64_t elt_sizes[] = {1, 15, 16, 17, 64, 100, 1000, 70001};

/* DynamicQuantizeLinear: sizes around the vector width, mixed signs,
 * positive only, all zero, and the special values (NaN, infinities,
 * subnormals) of kc_specials. */
static void gen_dynquant(case_fn fn, void *arg) {
  kcase c;
  static const char *const what[] = {"mixed", "positive", "zeros", "specials"};
  for (size_t i = 0; i < ER_ARRAY_LEN(elt_sizes); i++)
    for (int variant = 0; variant < 4; variant++) {
      int64_t n = elt_sizes[i];
      kc_begin(&c, "DynamicQuantizeLinear", "", 11, "DynamicQuantizeLinear [%lld] %s", (long long)n, what[variant]);
      er_tensor *x = kc_input(&c, 1, DIMS(n), variant == 1 ? 0.5f : -3.0f, variant == 2 ? -3.0f : 5.0f, false);
      if (variant == 2) memset(x->data, 0, x->nbytes);
      if (variant == 3) kc_specials(&c, x);
      c.n_out = 3;
      c.tol = TOL_EXACT_T;
      fn(&c, arg);
    }
}

static void gen_quantize(case_fn fn, void *arg) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(elt_sizes); i++) {
    int64_t n = elt_sizes[i];
    for (int variant = 0; variant < 4; variant++) {
      /* 0 uint8, 1 int8, 2 no zero point (uint8), 3 int8 with specials */
      er_dtype t = variant == 1 || variant == 3 ? ER_DTYPE_INT8 : ER_DTYPE_UINT8;
      kc_begin(&c, "QuantizeLinear", "", variant == 3 ? 21 : 13, "QuantizeLinear [%lld] %s%s%s", (long long)n,
               tname(t), variant == 2 ? " no zero point" : "", variant == 3 ? " specials" : "");
      er_tensor *x = kc_input(&c, 1, DIMS(n), -3.0f, 3.0f, false);
      float *xv = x->data;
      float sc = 0.0123f;
      /* Exact half steps, where round half to even decides. */
      for (int64_t k = 0; k < n; k += 7) xv[k] = sc * ((float)(k % 50) - 25.5f);
      if (variant == 3) kc_specials(&c, x);
      kc_input(&c, 0, NULL, sc, sc, true);
      if (variant != 2) q_param(&c, t, -1, type_lo(t) + 5, type_hi(t) - 5);
      fn(&c, arg);
    }
  }
}

static void gen_dequantize(case_fn fn, void *arg) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(elt_sizes); i++) {
    int64_t n = elt_sizes[i];
    for (int variant = 0; variant < 3; variant++) {
      er_dtype t = variant == 1 ? ER_DTYPE_INT8 : ER_DTYPE_UINT8;
      kc_begin(&c, "DequantizeLinear", "", 13, "DequantizeLinear [%lld] %s%s", (long long)n, tname(t),
               variant == 2 ? " no zero point" : "");
      c.tol = TOL_EXACT_T;
      q_input(&c, t, 1, DIMS(n), type_lo(t), type_hi(t), false);
      kc_input(&c, 0, NULL, 0.001f, 0.1f, true);
      if (variant != 2) q_param(&c, t, -1, type_lo(t), type_hi(t));
      fn(&c, arg);
    }
  }
}

static void gen_qbinary(case_fn fn, void *arg, const char *op) {
  kcase c;
  static const int64_t shapes[][2][4] = {
      /* a, b (4-D; a trailing 0 marks a scalar) */
      {{1, 3, 5, 7}, {1, 3, 5, 7}},     {{2, 16, 8, 8}, {2, 16, 8, 8}}, {{1, 1, 1, 1}, {1, 8, 9, 10}},
      {{1, 8, 9, 10}, {1, 1, 1, 1}},    {{1, 4, 5, 6}, {1, 4, 1, 1}},   {{1, 64, 40, 40}, {1, 64, 40, 40}},
      {{2, 3, 4, 5}, {1, 1, 4, 5}},     {{1, 1, 7, 9}, {1, 6, 1, 1}},   {{2, 5, 1, 3}, {2, 1, 4, 1}},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(shapes); i++) {
    for (int variant = 0; variant < 4; variant++) {
      er_dtype at = variant & 1 ? ER_DTYPE_INT8 : ER_DTYPE_UINT8, bt = variant == 2 ? ER_DTYPE_INT8 : at;
      er_dtype yt = variant >= 2 ? ER_DTYPE_INT8 : ER_DTYPE_UINT8;
      const int64_t *as = shapes[i][0], *bs = shapes[i][1];
      kc_begin(&c, op, "com.edgerun", 1, "%s [%lld,%lld,%lld,%lld]+[%lld,%lld,%lld,%lld] a%s b%s y%s%s", op,
               (long long)as[0], (long long)as[1], (long long)as[2], (long long)as[3], (long long)bs[0],
               (long long)bs[1], (long long)bs[2], (long long)bs[3], tname(at), tname(bt), tname(yt),
               variant == 3 ? " clamp" : "");
      bool mul = strcmp(op, "QMul") == 0;
      q_input(&c, at, 4, as, type_lo(at), type_hi(at), false);
      kc_input(&c, 0, NULL, 0.01f, 0.05f, true);
      q_param(&c, at, -1, type_lo(at) + 10, type_hi(at) - 10);
      q_input(&c, bt, 4, bs, type_lo(bt), type_hi(bt), i == 2 || i == 3);
      kc_input(&c, 0, NULL, 0.01f, 0.05f, true);
      q_param(&c, bt, -1, type_lo(bt) + 10, type_hi(bt) - 10);
      kc_input(&c, 0, NULL, mul ? 0.02f : 0.03f, mul ? 0.05f : 0.06f, true);
      q_param(&c, yt, -1, type_lo(yt) + 20, type_hi(yt) - 20);
      if (variant == 3) {
        kc_attr_int(&c, "qmin", type_lo(yt) + 100);
        kc_attr_int(&c, "qmax", type_hi(yt) - 10);
      }
      fn(&c, arg);
    }
  }
}

/* Every pair of input bytes (a 256 x 256 grid), with output scales of
 * all-ones significands and others: the optimized kernels divide by the
 * output scale through its reciprocal and two FMAs (qelt-impl.h,
 * f_div_r), which must round as the division does. With the "ties"
 * input scales (QAdd: both half the output scale; QMul: 1/2 and the
 * output scale) every quotient is a multiple of 1/2, so a quotient an ulp
 * off rounds to the other integer: the reciprocal product alone (no FMA
 * step) fails these cases. */
static void gen_qbinary_grid(case_fn fn, void *arg, const char *op) {
  kcase c;
  static const float yss[] = {0x1.fffffep-5f, 0x1.8p-6f, 0x1.4p-5f, 0.0371f, 0x1.fffffep-7f};
  const bool mul = strcmp(op, "QMul") == 0;
  for (size_t k = 0; k < ER_ARRAY_LEN(yss); k++) {
    for (int variant = 0; variant < 4; variant++) {
      const bool sg = variant & 1, ties = variant >= 2;
      const er_dtype t = sg ? ER_DTYPE_INT8 : ER_DTYPE_UINT8;
      const float y_scale = mul && !ties ? yss[k] * 8.0f : yss[k];
      kc_begin(&c, op, "com.edgerun", 1, "%s every byte pair, y_scale %a, %s%s", op, (double)y_scale, tname(t),
               ties ? ", ties" : "");
      for (int side = 0; side < 2; side++) {
        er_tensor *x = q_input(&c, t, 4, DIMS(1, 1, 256, 256), 0, 0, false);
        for (int64_t i = 0; i < 65536; i++) ((uint8_t *)x->data)[i] = (uint8_t)(side ? i & 255 : i >> 8);
        er_tensor *sc = kc_input(&c, 0, NULL, 0.01f, 0.05f, true);
        if (ties) ((float *)sc->data)[0] = !mul ? y_scale * 0.5f : side ? y_scale : 0.5f;
        q_param(&c, t, -1, type_lo(t) + 10, type_hi(t) - 10);
      }
      er_tensor *ys = kc_input(&c, 0, NULL, 1.0f, 1.0f, true);
      ((float *)ys->data)[0] = y_scale;
      q_param(&c, t, -1, type_lo(t) + 20, type_hi(t) - 20);
      fn(&c, arg);
    }
  }
}

static void gen_qadd(case_fn fn, void *arg) {
  gen_qbinary(fn, arg, "QAdd");
  gen_qbinary_grid(fn, arg, "QAdd");
}
static void gen_qmul(case_fn fn, void *arg) {
  gen_qbinary(fn, arg, "QMul");
  gen_qbinary_grid(fn, arg, "QMul");
}

static void gen_qlut(case_fn fn, void *arg) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(elt_sizes); i++) {
    for (int variant = 0; variant < 2; variant++) {
      er_dtype t = variant ? ER_DTYPE_INT8 : ER_DTYPE_UINT8;
      kc_begin(&c, "QLut", "com.edgerun", 1, "QLut [%lld] x%s", (long long)elt_sizes[i], tname(t));
      q_input(&c, t, 1, DIMS(elt_sizes[i]), type_lo(t), type_hi(t), false);
      q_input(&c, variant ? ER_DTYPE_UINT8 : ER_DTYPE_INT8, 1, DIMS(256), variant ? 0 : -128, variant ? 255 : 127,
              true);
      fn(&c, arg);
    }
  }
  /* One table per channel (axis 1). */
  static const int64_t shapes[][4] = {{2, 5, 7, 9}, {1, 3, 100, 0}, {1, 64, 28, 28}};
  for (size_t i = 0; i < ER_ARRAY_LEN(shapes); i++) {
    for (int variant = 0; variant < 2; variant++) {
      er_dtype t = variant ? ER_DTYPE_INT8 : ER_DTYPE_UINT8;
      const int64_t *d = shapes[i];
      int rank = d[3] ? 4 : 3;
      kc_begin(&c, "QLut", "com.edgerun", 1, "QLut per channel [%lld,%lld,%lld,%lld] x%s", (long long)d[0],
               (long long)d[1], (long long)d[2], (long long)d[3], tname(t));
      q_input(&c, t, rank, d, type_lo(t), type_hi(t), false);
      q_input(&c, ER_DTYPE_UINT8, 2, DIMS(d[1], 256), 0, 255, true);
      fn(&c, arg);
    }
  }
}

/* ======================================================================== */
/* Pools                                                                     */
/* ======================================================================== */

typedef struct pool_shape {
  int64_t n, c, h, w, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  bool ceil, one_d, same;
} pool_shape;

static const pool_shape pool_shapes[] = {
    {1, 4, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false, false},   /* ResNet's stem pool */
    {2, 3, 9, 11, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, false, false, false},    /* 2x2 stride 2, odd sizes */
    {1, 5, 13, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, false},   /* 3x3 stride 1 */
    {1, 2, 14, 15, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, true, false, false},    /* ceil_mode */
    {1, 3, 12, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, false, false, false},   /* dilation 2 */
    {1, 4, 1, 33, 1, 4, 1, 3, 0, 1, 0, 2, 1, 1, false, true, false},     /* 1-D */
    {1, 6, 10, 7, 3, 2, 2, 1, 0, 0, 0, 0, 1, 1, false, false, true},     /* SAME_UPPER */
    {1, 2, 6, 6, 2, 2, 1, 1, 2, 2, 2, 2, 1, 1, false, false, false},     /* pads >= kernel: reference */
    {1, 64, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false, false},  /* full size */
    {1, 10, 13, 13, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, true, false, false},   /* SqueezeNet's pools; global: 169 */
    /* Stride-2 max pools over rows of 32 bytes and more (AVX2 row buffer):
     * 2 wide, ceil_mode with odd sizes, and rows too wide for the buffer. */
    {1, 3, 9, 70, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, false, false, false},
    {1, 2, 35, 37, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, true, false, false},
    {1, 2, 4, 4200, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false, false},
    /* ... and rows of 16 to 31 bytes (two overlapping 16-byte vectors):
     * SqueezeNet's 27x27 pool, 2 wide with ceil_mode, padded. */
    {1, 3, 27, 27, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, false, false, false},
    {1, 2, 11, 21, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, true, false, false},
    {1, 2, 19, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false, false},
    /* Inception-v2's pools: 3x3 stride 1 over maps narrower than a vector
     * (rows all tail), and a 7x7 window covering the whole map. */
    {1, 24, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, false},
    {1, 40, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, false},
    {1, 33, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, 1, 1, false, false, false},
    /* Rows of exactly 32 padded columns (the AVX-512 narrow average's
     * limit: two vectors), one past it, and a tall window at row stride 2. */
    {1, 5, 28, 28, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, false, false, false},
    {1, 3, 9, 31, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, false},
    {1, 4, 15, 20, 6, 13, 2, 1, 2, 5, 3, 4, 1, 1, true, false, false},
};

static void pool_attrs(kcase *c, const pool_shape *s, bool dilations) {
  if (s->one_d) {
    kc_attr_ints(c, "kernel_shape", 1, DIMS(s->kw));
    kc_attr_ints(c, "strides", 1, DIMS(s->sw));
    kc_attr_ints(c, "pads", 2, DIMS(s->pl, s->pr));
  } else {
    kc_attr_ints(c, "kernel_shape", 2, DIMS(s->kh, s->kw));
    kc_attr_ints(c, "strides", 2, DIMS(s->sh, s->sw));
    if (s->same) kc_attr_string(c, "auto_pad", "SAME_UPPER");
    else kc_attr_ints(c, "pads", 4, DIMS(s->pt, s->pl, s->pb, s->pr));
    if (dilations) kc_attr_ints(c, "dilations", 2, DIMS(s->dh, s->dw));
  }
  if (s->ceil) kc_attr_int(c, "ceil_mode", 1);
}

static er_tensor *pool_x(kcase *c, const pool_shape *s, er_dtype t) {
  if (s->one_d) return q_input(c, t, 3, DIMS(s->n, s->c, s->w), type_lo(t), type_hi(t), false);
  return q_input(c, t, 4, DIMS(s->n, s->c, s->h, s->w), type_lo(t), type_hi(t), false);
}

static void gen_maxpool(case_fn fn, void *arg) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(pool_shapes); i++) {
    for (int variant = 0; variant < 2; variant++) {
      er_dtype t = variant ? ER_DTYPE_INT8 : ER_DTYPE_UINT8;
      const pool_shape *s = &pool_shapes[i];
      kc_begin(&c, "MaxPool", "", 12, "MaxPool #%zu %s", i, tname(t));
      pool_x(&c, s, t);
      pool_attrs(&c, s, s->dh > 1);
      fn(&c, arg);
    }
  }
}

static void gen_qavgpool(case_fn fn, void *arg) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(pool_shapes) + 3; i++) {
    for (int variant = 0; variant < 3; variant++) {
      er_dtype t = variant == 1 ? ER_DTYPE_INT8 : ER_DTYPE_UINT8, yt = variant == 2 ? ER_DTYPE_INT8 : t;
      bool global = i >= ER_ARRAY_LEN(pool_shapes);
      const pool_shape *s = &pool_shapes[global ? i - ER_ARRAY_LEN(pool_shapes) + 7 : i];
      if (!global && s->dh > 1) continue; /* AveragePool dilations need opset 19; kept simple */
      kc_begin(&c, "QAvgPool", "com.edgerun", 1, "QAvgPool #%zu%s x%s y%s%s", i, global ? " global" : "", tname(t),
               tname(yt), variant == 2 ? " count_include_pad" : "");
      pool_x(&c, s, t);
      q_param(&c, t, -1, type_lo(t) + 5, type_hi(t) - 5);
      kc_input(&c, 0, NULL, 0.7f, 1.3f, true);
      q_param(&c, yt, -1, type_lo(yt) + 20, type_hi(yt) - 20);
      if (global) kc_attr_int(&c, "global", 1);
      else pool_attrs(&c, s, false);
      if (!global && variant == 2) kc_attr_int(&c, "count_include_pad", 1);
      fn(&c, arg);
    }
  }
}

/* ======================================================================== */
/* QBlockMatMul                                                              */
/* ======================================================================== */

static void gen_qblock(case_fn fn, void *arg) {
  kcase c;
  static const int64_t shapes[][4] = {
      /* M, K, N, block */
      {1, 64, 32, 32}, {1, 80, 33, 32}, {3, 256, 64, 128}, {5, 100, 65, 16}, {1, 1, 1, 16},
      {300, 96, 40, 32}, {2, 4096, 48, 64}, {7, 33, 100, 32},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(shapes); i++) {
    int64_t m = shapes[i][0], k = shapes[i][1], n = shapes[i][2], bs = shapes[i][3], nb = (k + bs - 1) / bs;
    for (int variant = 0; variant < 4; variant++) {
      /* 0 int4 [K,N]; 1 uint4 with zero points; 2 transB with bias; 3 int4 zero points, batched A */
      bool trans = variant == 2, zp = variant == 1 || variant == 3;
      er_dtype t = variant == 1 ? ER_DTYPE_UINT4 : ER_DTYPE_INT4;
      kc_begin(&c, "QBlockMatMul", "com.edgerun", 1, "QBlockMatMul [%s%lld,%lld]x[%lld,%lld] block %lld %s%s%s",
               variant == 3 ? "2," : "", (long long)m, (long long)k, (long long)k, (long long)n, (long long)bs,
               t == ER_DTYPE_INT4 ? "int4" : "uint4", zp ? " zero points" : "", trans ? " transB bias" : "");
      if (variant == 3) kc_input(&c, 3, DIMS(2, m, k), -1, 1, false);
      else kc_input(&c, 2, DIMS(m, k), -1, 1, false);
      int lo = t == ER_DTYPE_INT4 ? -8 : 0, hi = t == ER_DTYPE_INT4 ? 7 : 15;
      q_input(&c, t, 2, trans ? DIMS(n, k) : DIMS(k, n), lo, hi, true);
      kc_input(&c, 2, trans ? DIMS(n, nb) : DIMS(nb, n), 0.01f, 0.05f, true);
      if (zp) q_input(&c, t, 2, trans ? DIMS(n, nb) : DIMS(nb, n), lo, hi, true);
      else kc_input_none(&c);
      if (trans) kc_input(&c, 1, DIMS(n), -1, 1, true);
      kc_attr_int(&c, "block_size", bs);
      if (trans) kc_attr_int(&c, "transB", 1);
      fn(&c, arg);
    }
  }
}

const case_gen kcases_quant[] = {
    {"QConv", "com.edgerun", gen_qconv},
    {"QLinearConv", "", gen_qlinearconv},
    {"ConvInteger", "", gen_convinteger},
    {"QMatMul", "com.edgerun", gen_qmatmul},
    {"QLinearMatMul", "", gen_qlinearmatmul},
    {"MatMulInteger", "", gen_matmulinteger},
    {"DynamicQuantizeLinear", "", gen_dynquant},
    {"QuantizeLinear", "", gen_quantize},
    {"DequantizeLinear", "", gen_dequantize},
    {"QAdd", "com.edgerun", gen_qadd},
    {"QMul", "com.edgerun", gen_qmul},
    {"QLut", "com.edgerun", gen_qlut},
    {"MaxPool", "", gen_maxpool},
    {"QAvgPool", "com.edgerun", gen_qavgpool},
    {"QBlockMatMul", "com.edgerun", gen_qblock},
    {NULL, NULL, NULL},
};
