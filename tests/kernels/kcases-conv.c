/* kcases-conv.c - cases for Conv and FusedConv: pointwise, KxK with
 * strides, pads (symmetric, asymmetric, auto_pad), dilations, groups,
 * depthwise 3x3 / 5x5 / other, 1-D, batches, K and N beyond the GEMM
 * blocks, bias, residual, every activation, constant and run-time weights,
 * dims unknown at compile time. */
#include "kcases.h"

typedef struct conv_spec {
  int64_t n, c, h, w, m, kh, kw;
  int64_t sh, sw, dh, dw;
  int64_t pads[4];        /* top, left, bottom, right */
  int64_t group;
  const char *auto_pad;   /* NULL = explicit pads */
} conv_spec;

static const conv_spec specs[] = {
    /* n  c   h   w   m  kh kw sh sw dh dw  pads        group auto_pad */
    {1, 16, 7, 9, 33, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},       /* pointwise */
    {1, 64, 14, 14, 40, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},     /* pointwise, N < NR*... */
    {1, 300, 6, 6, 17, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},      /* pointwise, K over KC */
    {1, 8, 30, 31, 20, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},      /* pointwise, N over NC */
    {1, 16, 9, 11, 24, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, 1, NULL},      /* strided pointwise */
    {1, 8, 14, 14, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
    {1, 3, 23, 17, 64, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
    {1, 5, 15, 16, 7, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 1, NULL},
    {1, 3, 32, 32, 20, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, 1, NULL},      /* ResNet stem */
    {1, 4, 13, 12, 6, 5, 5, 1, 1, 2, 2, {4, 4, 4, 4}, 1, NULL},       /* dilated */
    {1, 6, 10, 9, 5, 3, 2, 1, 2, 1, 1, {1, 0, 2, 1}, 1, NULL},        /* asymmetric */
    {1, 6, 11, 10, 5, 3, 3, 2, 1, 1, 1, {0, 0, 0, 0}, 1, "SAME_UPPER"},
    {1, 6, 11, 10, 5, 4, 4, 2, 2, 1, 1, {0, 0, 0, 0}, 1, "SAME_LOWER"},
    {1, 6, 11, 10, 5, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 1, "VALID"},
    {1, 8, 9, 9, 12, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 2, NULL},        /* groups */
    {1, 12, 8, 8, 12, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 3, NULL},       /* ShuffleNet-style */
    {1, 64, 10, 10, 260, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},    /* M over MC, K over KC */
    {2, 7, 9, 8, 11, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},        /* batch */
    {1, 16, 7, 7, 32, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},       /* N = 49 */
    {1, 2, 1, 1, 3, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},         /* 1x1 image */
    {1, 1, 28, 28, 8, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 1, NULL},       /* MNIST-8 conv1 (direct) */
    {1, 8, 14, 14, 16, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 1, NULL},      /* MNIST-8 conv2 (direct) */
    {2, 5, 13, 30, 24, 3, 4, 1, 1, 1, 1, {0, 2, 3, 1}, 1, NULL},      /* direct: 3 blocks, asymmetric, batch */
    {1, 4, 9, 16, 7, 2, 2, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},        /* direct: a partial block */
    /* batch folded into the GEMM rows (few pixels per image) */
    {2, 20, 3, 3, 40, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 1, NULL},       /* 2x2 pixels, batch 2 */
    {4, 24, 1, 2, 33, 1, 3, 1, 2, 1, 1, {0, 1, 0, 1}, 1, NULL},       /* 1 pixel, batch 4 */
    {3, 9, 5, 4, 17, 2, 3, 2, 1, 2, 1, {1, 0, 0, 2}, 1, NULL},        /* dilated, asymmetric, batch 3 */
    {1, 37, 2, 3, 70, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},       /* one image of 6 pixels */
    {5, 6, 3, 3, 8, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},         /* pointwise, batch 5 */
    /* column images (W = 1, k x 1: 1-D convolutions on H), run as rows */
    {1, 24, 40, 1, 48, 5, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},
    {2, 16, 37, 1, 20, 3, 1, 2, 1, 1, 1, {1, 0, 1, 0}, 1, NULL},      /* stride, pads, batch */
    {1, 8, 30, 1, 12, 3, 1, 1, 1, 2, 1, {2, 0, 2, 0}, 2, NULL},       /* dilation, groups */
    {1, 64, 100, 1, 40, 5, 1, 1, 1, 1, 1, {2, 0, 2, 0}, 1, NULL},
    {1, 6, 20, 1, 8, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},        /* pads left and right: a column */
    /* wide windows at a stride past 2 (im2col by 16 taps and a
     * transpose where a block's taps are inside every window): a 1-D
     * STFT-like layer, and 2-D with pads that leave some blocks outside */
    {1, 1, 1, 2000, 40, 1, 64, 1, 9, 1, 1, {0, 0, 0, 0}, 1, NULL},
    {1, 2, 5, 100, 24, 2, 40, 1, 3, 1, 1, {1, 5, 0, 3}, 1, NULL},
    /* depthwise */
    {1, 33, 7, 7, 33, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 33, NULL},
    {1, 32, 15, 16, 32, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 32, NULL},
    {1, 8, 56, 56, 8, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 8, NULL},
    {1, 17, 19, 21, 17, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 17, NULL},
    {1, 16, 19, 20, 16, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, 16, NULL},
    {1, 6, 12, 13, 6, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, 6, NULL},       /* dilated */
    {1, 6, 12, 13, 6, 3, 3, 2, 2, 1, 1, {0, 1, 1, 0}, 6, NULL},       /* asymmetric */
    {1, 5, 9, 40, 5, 3, 7, 1, 3, 1, 1, {1, 3, 1, 3}, 5, NULL},        /* odd taps, stride 3 */
    {1, 4, 9, 9, 4, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 4, "SAME_UPPER"},
    {2, 9, 5, 6, 9, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 9, NULL},         /* batch */
    {1, 4, 3, 2, 4, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 4, NULL},         /* image smaller than window */
    {1, 3, 37, 37, 3, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 3, NULL},       /* s2, width past 2 vectors */
    {1, 3, 20, 23, 3, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, 3, NULL},       /* 7x7 s2: general taps */
    {1, 3, 18, 35, 3, 7, 7, 1, 1, 1, 1, {3, 2, 3, 4}, 3, NULL},       /* 7x7 s1, asymmetric */
    {1, 4, 11, 19, 4, 4, 4, 2, 2, 1, 1, {1, 2, 2, 1}, 4, NULL},       /* even taps at stride 2 */
    {1, 3, 13, 17, 3, 2, 5, 3, 1, 1, 1, {0, 2, 1, 2}, 3, NULL},       /* sh 3, sw 1 */
    {1, 5, 6, 7, 5, 3, 3, 1, 2, 1, 1, {2, 2, 2, 2}, 5, NULL},         /* pads of 2 on 3x3 */
    {1, 4, 70, 66, 4, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 4, NULL},       /* plane past the direct kernel's size */
    {1, 3, 67, 80, 3, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, 3, NULL},       /* 5x5 stride 2, direct */
    {1, 2, 131, 133, 2, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 2, NULL},     /* stride 2 past the direct kernel's size */
    /* Pads wider than the image and the window (found by fuzz-load): the
     * im2col column blocks end inside a row's left padding. */
    {2, 1, 7, 5, 9, 3, 3, 1, 1, 1, 1, {1, 117, 64, 1}, 1, NULL},
    {1, 2, 4, 3, 5, 2, 2, 1, 2, 1, 1, {9, 40, 3, 29}, 1, NULL},
};

static void add_conv_attrs(kcase *c, const conv_spec *s, bool one_d) {
  if (one_d) {
    kc_attr_ints(c, "kernel_shape", 1, DIMS(s->kw));
    kc_attr_ints(c, "strides", 1, DIMS(s->sw));
    kc_attr_ints(c, "dilations", 1, DIMS(s->dw));
    if (!s->auto_pad) kc_attr_ints(c, "pads", 2, DIMS(s->pads[1], s->pads[3]));
  } else {
    kc_attr_ints(c, "kernel_shape", 2, DIMS(s->kh, s->kw));
    kc_attr_ints(c, "strides", 2, DIMS(s->sh, s->sw));
    kc_attr_ints(c, "dilations", 2, DIMS(s->dh, s->dw));
    if (!s->auto_pad) kc_attr_ints(c, "pads", 4, s->pads);
  }
  if (s->auto_pad) kc_attr_string(c, "auto_pad", s->auto_pad);
  if (s->group != 1) kc_attr_int(c, "group", s->group);
}

/* Output extent along one axis, as the Conv shape rule computes it. */
static int64_t out_extent(const conv_spec *s, int axis) {
  int64_t in = axis ? s->w : s->h, k = axis ? s->kw : s->kh, st = axis ? s->sw : s->sh;
  int64_t d = axis ? s->dw : s->dh, pb = s->pads[axis], pe = s->pads[axis + 2];
  if (s->auto_pad && strcmp(s->auto_pad, "VALID") != 0) return (in + st - 1) / st;
  if (s->auto_pad) pb = pe = 0;
  return (in + pb + pe - (k - 1) * d - 1) / st + 1;
}

/* The spec table in three variants each, and a symbolic batch. */
static void gen_conv_specs(case_fn fn, void *arg, bool fused) {
  const char *op = fused ? "FusedConv" : "Conv", *domain = fused ? "com.edgerun" : "";
  int version = fused ? 1 : 11;
  kcase c;
  char act[32];
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++) {
    const conv_spec *s = &specs[i];
    int64_t cg = s->c / s->group;
    for (int variant = 0; variant < 3; variant++) {
      /* 0: constant weights and bias; 1: run-time weights, no bias;
       * 2: dims unknown at compile time. Fused cases add a residual on
       * variant 1 and rotate through the activations. */
      int a = (int)((i * 3 + (size_t)variant) % (size_t)er_kcases_n_activations);
      if (fused) er_kcases_activation(a, NULL, act, sizeof act);
      else snprintf(act, sizeof act, "-");
      kc_begin(&c, op, domain, version,
               "%s x[%lld,%lld,%lld,%lld] w[%lld,%lld,%lld,%lld] s%lldx%lld d%lldx%lld p%lld,%lld,%lld,%lld g%lld %s v%d %s",
               op, (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->m, (long long)cg,
               (long long)s->kh, (long long)s->kw, (long long)s->sh, (long long)s->sw, (long long)s->dh,
               (long long)s->dw, (long long)s->pads[0], (long long)s->pads[1], (long long)s->pads[2],
               (long long)s->pads[3], (long long)s->group, s->auto_pad ? s->auto_pad : "", variant, act);
      kc_input(&c, 4, DIMS(s->n, s->c, s->h, s->w), -1, 1, false);
      kc_input(&c, 4, DIMS(s->m, cg, s->kh, s->kw), -1, 1, variant != 1);
      if (variant != 1 || fused) kc_input(&c, 1, DIMS(s->m), -1, 1, variant != 1);
      if (fused && variant == 1)
        kc_input(&c, 4, DIMS(s->n, s->m, out_extent(s, 0), out_extent(s, 1)), -1, 1, false);
      add_conv_attrs(&c, s, false);
      if (fused) er_kcases_activation(a, &c, act, sizeof act);
      c.dynamic = variant == 2;
      fn(&c, arg);
    }
  }
  /* A symbolic batch (models exported with a free N): the kernels that
   * need only the other dims at compile time, run with N = 1 and 3. */
  for (int64_t n = 1; n <= 3; n += 2) {
    kc_begin(&c, op, domain, version, "%s x[%lld,16,2,2] w[40,16,3,3] p1 symbolic batch", op, (long long)n);
    kc_input(&c, 4, DIMS(n, 16, 2, 2), -1, 1, false);
    kc_input(&c, 4, DIMS(40, 16, 3, 3), -1, 1, true);
    kc_input(&c, 1, DIMS(40), -1, 1, true);
    kc_attr_ints(&c, "kernel_shape", 2, DIMS(3, 3));
    kc_attr_ints(&c, "pads", 4, DIMS(1, 1, 1, 1));
    if (fused) kc_attr_string(&c, "activation", "Relu");
    c.dynamic_batch = true;
    fn(&c, arg);
    kc_begin(&c, op, domain, version, "%s x[%lld,8,14,14] w[16,8,5,5] p2 symbolic batch", op, (long long)n);
    kc_input(&c, 4, DIMS(n, 8, 14, 14), -1, 1, false);
    kc_input(&c, 4, DIMS(16, 8, 5, 5), -1, 1, true);
    kc_input(&c, 1, DIMS(16), -1, 1, true);
    kc_attr_ints(&c, "kernel_shape", 2, DIMS(5, 5));
    kc_attr_ints(&c, "pads", 4, DIMS(2, 2, 2, 2));
    if (fused) kc_attr_string(&c, "activation", "Relu");
    c.dynamic_batch = true;
    fn(&c, arg);
  }
}

/* 1-D convolutions, X of unknown rank, pixel-major layers. */
static void gen_conv_shapes(case_fn fn, void *arg, bool fused) {
  const char *op = fused ? "FusedConv" : "Conv", *domain = fused ? "com.edgerun" : "";
  int version = fused ? 1 : 11;
  kcase c;
  /* 1-D convolutions. */
  static const conv_spec specs1[] = {
      {1, 4, 1, 50, 6, 1, 3, 1, 1, 1, 1, {0, 1, 0, 1}, 1, NULL},
      {2, 6, 1, 33, 6, 1, 5, 1, 2, 1, 2, {0, 4, 0, 3}, 6, NULL},
      {1, 8, 1, 20, 8, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},
      {3, 129, 1, 4, 128, 1, 3, 1, 1, 1, 1, {0, 1, 0, 1}, 1, NULL},     /* Silero VAD encoder, batch 3 */
      {3, 1, 1, 640, 258, 1, 256, 1, 128, 1, 1, {0, 0, 0, 0}, 1, NULL}, /* Silero VAD STFT, batch 3 */
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(specs1); i++) {
    const conv_spec *s = &specs1[i];
    kc_begin(&c, op, domain, version, "%s 1-D x[%lld,%lld,%lld] w[%lld,%lld,%lld] s%lld d%lld g%lld", op,
             (long long)s->n, (long long)s->c, (long long)s->w, (long long)s->m, (long long)(s->c / s->group),
             (long long)s->kw, (long long)s->sw, (long long)s->dw, (long long)s->group);
    kc_input(&c, 3, DIMS(s->n, s->c, s->w), -1, 1, false);
    kc_input(&c, 3, DIMS(s->m, s->c / s->group, s->kw), -1, 1, true);
    kc_input(&c, 1, DIMS(s->m), -1, 1, true);
    add_conv_attrs(&c, s, true);
    if (fused) kc_attr_string(&c, "activation", "Relu");
    fn(&c, arg);
  }
  /* X of unknown rank at compile time (Silero VAD's STFT input leaves an
   * If whose branches differ in rank): the GEMM and depthwise kernels
   * must still take the node, with the rank W gives. */
  static const conv_spec anyrank[] = {
      {1, 1, 1, 640, 258, 1, 256, 1, 64, 1, 1, {0, 0, 0, 0}, 1, NULL},
      {1, 12, 1, 30, 12, 1, 5, 1, 1, 1, 1, {0, 2, 0, 2}, 12, NULL},
      {2, 6, 9, 7, 10, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(anyrank); i++) {
    const conv_spec *s = &anyrank[i];
    bool one_d = s->h == 1 && s->kh == 1 && s->dh == 1 && i < 2;
    kc_begin(&c, op, domain, version, "%s x of unknown rank [%lld,%lld,%lld,%lld] w[%lld,%lld,%lld,%lld] g%lld", op,
             (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->m,
             (long long)(s->c / s->group), (long long)s->kh, (long long)s->kw, (long long)s->group);
    if (one_d) {
      kc_input(&c, 3, DIMS(s->n, s->c, s->w), -1, 1, false);
      kc_input(&c, 3, DIMS(s->m, s->c / s->group, s->kw), -1, 1, true);
    } else {
      kc_input(&c, 4, DIMS(s->n, s->c, s->h, s->w), -1, 1, false);
      kc_input(&c, 4, DIMS(s->m, s->c / s->group, s->kh, s->kw), -1, 1, true);
    }
    kc_input(&c, 1, DIMS(s->m), -1, 1, true);
    add_conv_attrs(&c, s, one_d);
    if (fused) kc_attr_string(&c, "activation", "Relu");
    c.unknown_rank = true;
    /* The main GEMM tiles; AVX-512's 16 x 16 one takes only shapes it
     * knows to fill better. */
    c.must_take = s->group > 1 ? "_dwconv_" : "conv_gemm_6x16_|conv_gemm_14x32_|conv_gemm_8x8_";
    fn(&c, arg);
  }
  /* Pixel-major layers (few pixels, whole channel panels) with residual,
   * constant weights and bias, 1x1 and 3x3. */
  if (fused) {
    for (int k = 1; k <= 3; k += 2) {
      kc_begin(&c, op, domain, version, "FusedConv 7x7 pixels, 64 channels, %dx%d, residual, Relu", k, k);
      kc_input(&c, 4, DIMS(1, 40, 7, 7), -1, 1, false);
      kc_input(&c, 4, DIMS(64, 40, k, k), -0.5f, 0.5f, true);
      kc_input(&c, 1, DIMS(64), -1, 1, true);
      kc_input(&c, 4, DIMS(1, 64, 7, 7), -1, 1, false);
      kc_attr_ints(&c, "kernel_shape", 2, DIMS(k, k));
      kc_attr_ints(&c, "pads", 4, DIMS(k / 2, k / 2, k / 2, k / 2));
      kc_attr_string(&c, "activation", "Relu");
      fn(&c, arg);
    }
  }
}

/* Winograd-sized layers, sizes unknown at compile time, and a residual
 * with every activation. */
static void gen_conv_wino(case_fn fn, void *arg, bool fused) {
  const char *op = fused ? "FusedConv" : "Conv", *domain = fused ? "com.edgerun" : "";
  int version = fused ? 1 : 11;
  kcase c;
  char act[32];
  /* Winograd-sized 3x3 stride-1 layers: odd output sizes (partial
   * tiles), asymmetric and automatic pads, a batch, and an image large
   * enough for several tile chunks with a chunk ending mid-row. */
  static const conv_spec wino[] = {
      {1, 16, 7, 7, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
      {1, 20, 9, 13, 24, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},
      {1, 17, 11, 10, 19, 3, 3, 1, 1, 1, 1, {2, 0, 1, 2}, 1, NULL},
      {2, 16, 6, 5, 32, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 1, "SAME_LOWER"},
      {1, 64, 50, 50, 64, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
      /* F(4x4)-sized: odd extents, asymmetric and automatic pads, a batch. */
      {1, 16, 37, 41, 24, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
      {1, 17, 30, 29, 16, 3, 3, 1, 1, 1, 1, {0, 2, 1, 0}, 1, NULL},
      {2, 16, 33, 34, 17, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 1, "SAME_UPPER"},
      {1, 32, 64, 64, 32, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(wino); i++) {
    const conv_spec *w = &wino[i];
    int64_t oh = out_extent(w, 0), ow = out_extent(w, 1);
    kc_begin(&c, op, domain, version, "%s winograd-sized x[%lld,%lld,%lld,%lld] m%lld p%lld,%lld,%lld,%lld %s", op,
             (long long)w->n, (long long)w->c, (long long)w->h, (long long)w->w, (long long)w->m,
             (long long)w->pads[0], (long long)w->pads[1], (long long)w->pads[2], (long long)w->pads[3],
             w->auto_pad ? w->auto_pad : "");
    kc_input(&c, 4, DIMS(w->n, w->c, w->h, w->w), -1, 1, false);
    kc_input(&c, 4, DIMS(w->m, w->c, 3, 3), -0.5f, 0.5f, true);
    kc_input(&c, 1, DIMS(w->m), -1, 1, true);
    if (fused) {
      kc_input(&c, 4, DIMS(w->n, w->m, oh, ow), -1, 1, false);
      kc_attr_string(&c, "activation", "Relu");
    }
    add_conv_attrs(&c, w, false);
    fn(&c, arg);
  }
  /* Height and width unknown at compile time (detectors exported with a
   * free image size). 3x3 with more than 16 channels: F(4x4) on the large
   * map, F(2x2) at 10x10, the GEMM (channel-major for 18 channels,
   * pixel-major for 32) on the smallest, with weights the first run
   * transforms or packs. Few channels: the direct kernel where the run's
   * rows fill its vectors (20 x 24, 16 x 32), the GEMM where they do not
   * (6 x 5). */
  static const conv_spec dyn[] = {
      {1, 24, 10, 10, 32, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
      {1, 20, 7, 9, 18, 3, 3, 1, 1, 1, 1, {1, 0, 1, 2}, 1, NULL},
      {1, 20, 6, 7, 32, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
      {1, 24, 40, 36, 20, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
      {1, 16, 20, 24, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
      {2, 8, 16, 32, 24, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
      {1, 16, 6, 5, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(dyn); i++) {
    const conv_spec *w = &dyn[i];
    int64_t oh = out_extent(w, 0), ow = out_extent(w, 1);
    kc_begin(&c, op, domain, version, "%s %s x[%lld,%lld,%lld,%lld] m%lld, size unknown at compile time", op,
             w->c > 16 ? "winograd-sized" : "few channels", (long long)w->n, (long long)w->c, (long long)w->h,
             (long long)w->w, (long long)w->m);
    kc_input(&c, 4, DIMS(w->n, w->c, w->h, w->w), -1, 1, false);
    kc_input(&c, 4, DIMS(w->m, w->c, 3, 3), -0.5f, 0.5f, true);
    kc_input(&c, 1, DIMS(w->m), -1, 1, true);
    if (fused) {
      kc_input(&c, 4, DIMS(w->n, w->m, oh, ow), -1, 1, false);
      kc_attr_string(&c, "activation", i % 2 ? "Relu" : "Silu");
    }
    add_conv_attrs(&c, w, false);
    c.dynamic = true;
    fn(&c, arg);
  }
  /* A residual with every activation, on a depthwise and a dense layer. */
  if (fused) {
    for (int a = 0; a < er_kcases_n_activations; a++) {
      for (int dw = 0; dw < 2; dw++) {
        er_kcases_activation(a, NULL, act, sizeof act);
        /* dense: 40 channels (GEMM) and, every other activation, 16
         * channels on 16-wide rows (the direct kernel) */
        int64_t ch = 24, m = dw ? 24 : (a % 2 ? 16 : 40);
        kc_begin(&c, op, domain, version, "FusedConv %s 3x3 residual %s", dw ? "depthwise" : "dense", act);
        int64_t wd = m == 16 ? 16 : 11;
        kc_input(&c, 4, DIMS(1, ch, 10, wd), -3, 3, false);
        kc_input(&c, 4, DIMS(m, dw ? 1 : ch, 3, 3), -0.5f, 0.5f, true);
        kc_input(&c, 1, DIMS(m), -1, 1, true);
        kc_input(&c, 4, DIMS(1, m, 10, wd), -1, 1, false);
        kc_attr_ints(&c, "kernel_shape", 2, DIMS(3, 3));
        kc_attr_ints(&c, "pads", 4, DIMS(1, 1, 1, 1));
        if (dw) kc_attr_int(&c, "group", ch);
        er_kcases_activation(a, &c, act, sizeof act);
        fn(&c, arg);
      }
    }
  }
}

static void gen_conv_family(case_fn fn, void *arg, bool fused) {
  gen_conv_specs(fn, arg, fused);
  gen_conv_shapes(fn, arg, fused);
  gen_conv_wino(fn, arg, fused);
}

/* Full-size layers of ResNet-50 and MobileNet, for --time. */
static const conv_spec big_specs[] = {
    {1, 256, 56, 56, 64, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},
    {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
    {1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
    {1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, NULL},
    {1, 1024, 14, 14, 256, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, NULL},
    {1, 3, 224, 224, 64, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, 1, NULL},
    {1, 32, 112, 112, 32, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 32, NULL},
    {1, 96, 112, 112, 96, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 96, NULL},
    {1, 512, 14, 14, 512, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 512, NULL},
    {1, 240, 14, 14, 240, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 240, NULL},
};

static void gen_conv_big(case_fn fn, void *arg, bool fused) {
  kcase c;
  for (size_t i = 0; kc_timing && i < ER_ARRAY_LEN(big_specs); i++) {
    const conv_spec *s = &big_specs[i];
    kc_begin(&c, fused ? "FusedConv" : "Conv", fused ? "com.edgerun" : "", fused ? 1 : 11,
             "full-size x[1,%lld,%lld,%lld] w[%lld,%lld,%lld,%lld] s%lld g%lld", (long long)s->c, (long long)s->h,
             (long long)s->w, (long long)s->m, (long long)(s->c / s->group), (long long)s->kh, (long long)s->kw,
             (long long)s->sh, (long long)s->group);
    kc_input(&c, 4, DIMS(s->n, s->c, s->h, s->w), -1, 1, false);
    kc_input(&c, 4, DIMS(s->m, s->c / s->group, s->kh, s->kw), -1, 1, true);
    kc_input(&c, 1, DIMS(s->m), -1, 1, true);
    add_conv_attrs(&c, s, false);
    if (fused) kc_attr_string(&c, "activation", "Relu");
    fn(&c, arg);
  }
}

static void gen_conv(case_fn fn, void *arg) {
  gen_conv_family(fn, arg, false);
  gen_conv_big(fn, arg, false);
}
static void gen_fused_conv(case_fn fn, void *arg) {
  gen_conv_family(fn, arg, true);
  gen_conv_big(fn, arg, true);
}

const case_gen kcases_conv[] = {
    {"Conv", "", gen_conv},
    {"FusedConv", "com.edgerun", gen_fused_conv},
    {NULL, NULL, NULL},
};

/* ---- ConvTranspose ---------------------------------------------------------- */

typedef struct convt_spec {
  int64_t n, c, h, w, m, kh, kw, sh, sw, dh, dw;
  int64_t pads[4], opad[2];
  int64_t group;
  const char *auto_pad;
  bool output_shape;     /* give output_shape (the output the pads give) */
} convt_spec;

static void gen_convt(case_fn fn, void *arg) {
  static const convt_spec tspecs[] = {
      {1, 16, 8, 9, 8, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, {0, 0}, 1, NULL, false},     /* 2x upsample */
      {1, 8, 7, 6, 5, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, {1, 1}, 1, NULL, false},      /* output_padding */
      {2, 6, 5, 5, 4, 4, 4, 2, 2, 1, 1, {1, 1, 1, 1}, {0, 0}, 1, NULL, false},      /* overlaps, batch */
      {1, 4, 6, 7, 6, 3, 3, 1, 1, 2, 2, {2, 1, 0, 1}, {0, 0}, 2, NULL, false},      /* dilated, groups, asymmetric */
      {1, 5, 6, 6, 3, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, {0, 0}, 1, "SAME_UPPER", false},
      {1, 5, 6, 6, 3, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, {0, 0}, 1, "SAME_LOWER", false},
      {1, 5, 6, 6, 3, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, {1, 1}, 1, NULL, true},
      {1, 64, 30, 30, 64, 4, 4, 2, 2, 1, 1, {1, 1, 1, 1}, {0, 0}, 1, NULL, false},  /* several pixel chunks */
      {1, 3, 4, 4, 2, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, {0, 0}, 1, "VALID", false},
  };
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(tspecs); i++) {
    const convt_spec *s = &tspecs[i];
    for (int bias = 0; bias < 2; bias++) {
      kc_begin(&c, "ConvTranspose", "", 11, "ConvTranspose#%zu x[%lld,%lld,%lld,%lld] m%lld k%lldx%lld s%lld %s%s", i,
               (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->m, (long long)s->kh,
               (long long)s->kw, (long long)s->sh, s->auto_pad ? s->auto_pad : "", bias ? " bias" : "");
      kc_input(&c, 4, DIMS(s->n, s->c, s->h, s->w), -1, 1, false);
      kc_input(&c, 4, DIMS(s->c, s->m / s->group, s->kh, s->kw), -0.5f, 0.5f, true);
      if (bias) kc_input(&c, 1, DIMS(s->m), -1, 1, true);
      kc_attr_ints(&c, "kernel_shape", 2, DIMS(s->kh, s->kw));
      kc_attr_ints(&c, "strides", 2, DIMS(s->sh, s->sw));
      kc_attr_ints(&c, "dilations", 2, DIMS(s->dh, s->dw));
      if (s->auto_pad) kc_attr_string(&c, "auto_pad", s->auto_pad);
      else if (!s->output_shape) kc_attr_ints(&c, "pads", 4, s->pads);
      if (s->opad[0] || s->opad[1]) kc_attr_ints(&c, "output_padding", 2, s->opad);
      if (s->output_shape) {
        int64_t oh = s->sh * (s->h - 1) + s->opad[0] + (s->kh - 1) * s->dh + 1 - 1;
        int64_t ow = s->sw * (s->w - 1) + s->opad[1] + (s->kw - 1) * s->dw + 1 - 2;
        kc_attr_ints(&c, "output_shape", 2, DIMS(oh, ow));
      }
      if (s->group != 1) kc_attr_int(&c, "group", s->group);
      fn(&c, arg);
    }
  }
}

const case_gen kcases_convt[] = {
    {"ConvTranspose", "", gen_convt},
    {NULL, NULL, NULL},
};
