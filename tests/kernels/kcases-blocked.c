/* kcases-blocked.c - cases for the channel-blocked layout's ops
 * (ops/blocked.c): BlockedConv dense and depthwise, from blocked and planar
 * inputs, BlockedPool, ToBlocked, FromBlocked, BlockedBatchNormalization and
 * BlockedResize.
 * Every case is made for
 * blocks 16, 8 and 4; a kernel takes those of its ISA's vector width and
 * reports the rest as outside what it supports. Sizes sit below, at and
 * above the tiles (14 pixels on AVX-512, 6 on AVX2; 8 for depthwise),
 * channel counts that are not whole blocks, every activation, residuals,
 * strides, dilations, asymmetric and automatic padding, batches, and shapes
 * unknown at compile time. */
#include "kcases.h"

static const int64_t block_sizes[] = {16, 8, 4};

static int64_t nblocks(int64_t c, int64_t b) { return (c + b - 1) / b; }

/* A blocked input holding c channels; every lane random (padding lanes
 * included: readers must ignore them, which the zero weights do). */
static er_tensor *blocked_input(kcase *c, int64_t n, int64_t ch, int64_t h, int64_t w, int64_t b) {
  return kc_input(c, 5, DIMS(n, nblocks(ch, b), h, w, b), -1, 1, false);
}

typedef struct bconv_spec {
  int64_t n, c, h, w, m, kh, kw, sh, sw, dh, dw;
  int64_t pads[4];
  bool depthwise, planar;
  const char *auto_pad;
} bconv_spec;

static const bconv_spec conv_specs[] = {
    /* 1x1 over rows below, at and above the dense tiles. */
    {1, 32, 3, 5, 32, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    {1, 16, 2, 14, 48, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    {2, 24, 3, 15, 20, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},   /* channels not whole blocks */
    {1, 64, 7, 29, 16, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    /* 1x1 layers whose work units take the ISA's widest groups (AVX2: 4
     * blocks) over several passes of input blocks (sums kept in y between
     * passes): a last group of 3 blocks, one of 1, a partial last block,
     * rows flattened with a short last row, a batch, stride 2. */
    {1, 200, 5, 7, 84, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    {2, 136, 4, 6, 40, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    {1, 280, 9, 9, 72, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    /* 3x3 with padding (the padded copy), strides, dilation. */
    {1, 16, 7, 7, 32, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, false, NULL},
    {1, 20, 9, 13, 36, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, false, false, NULL},
    {1, 8, 11, 17, 8, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, false, false, NULL},
    {1, 16, 8, 10, 24, 3, 2, 1, 2, 1, 1, {1, 0, 0, 1}, false, false, NULL},   /* asymmetric */
    {1, 12, 9, 10, 16, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, false, false, "SAME_UPPER"},
    {1, 16, 6, 6, 16, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, false, false, NULL},
    /* Dense layers that take 3-block work units on AVX2 (3 x 4 tiles):
     * oww_embedding's 1x3 and 3x1 layers, and last groups of 1 and 2
     * blocks over rows of 9 and 11 pixels. */
    {1, 24, 6, 32, 24, 1, 3, 1, 1, 1, 1, {0, 1, 0, 1}, false, false, NULL},
    {1, 72, 10, 8, 72, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    {1, 16, 6, 9, 56, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, false, NULL},
    {1, 8, 5, 11, 40, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, false, NULL},
    /* Stems reading a planar image. */
    {1, 3, 17, 30, 16, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, false, true, NULL},
    {2, 3, 12, 12, 24, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, false, true, NULL},
    {1, 1, 9, 16, 8, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, false, true, NULL},
    {1, 5, 6, 20, 32, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, true, NULL},
    /* Planar inputs past the stem: a Split's half read in place (stride 1,
     * every tile width), dilation, and stride 3 (run-time strides). */
    {1, 16, 9, 31, 40, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, true, NULL},
    {1, 20, 10, 12, 16, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, false, true, NULL},
    {1, 6, 11, 23, 24, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, false, true, NULL},
    /* Column images (W = 1, k x 1 kernels: 1-D convolutions exported on
     * H), which run as row images: every tile width, pads above and
     * below, stride and dilation along H, a planar stem; and one with
     * pads left and right, which stays a column. */
    {1, 32, 40, 1, 48, 5, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    {1, 16, 37, 1, 32, 3, 1, 2, 1, 1, 1, {1, 0, 1, 0}, false, false, NULL},
    {2, 24, 30, 1, 20, 3, 1, 1, 1, 2, 1, {2, 0, 2, 0}, false, false, NULL},
    {1, 3, 50, 1, 16, 5, 1, 1, 1, 1, 1, {2, 0, 2, 0}, false, true, NULL},
    {1, 16, 20, 1, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, false, NULL},
    /* Depthwise: 3x3 and 5x5, strides 1 and 2, borders, dilation. */
    {1, 32, 9, 9, 32, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, false, NULL},
    {1, 24, 14, 17, 24, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, false, NULL},
    {2, 16, 7, 7, 16, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, true, false, NULL},
    {1, 40, 10, 19, 40, 5, 5, 2, 2, 1, 1, {2, 2, 1, 1}, true, false, NULL},
    {1, 8, 12, 12, 8, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, true, false, NULL},
    {1, 12, 3, 3, 12, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, false, NULL},      /* every pixel a border */
    {1, 16, 8, 8, 16, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, true, false, "SAME_LOWER"},
    /* Rows in tiles of every width 1-8, edge tiles whose taps fall past
     * either end (zero loads): no padding, padding wider than the window
     * reaches, asymmetric stride-2 pads with a right border. */
    {1, 16, 5, 11, 16, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, true, false, NULL},
    {1, 8, 4, 2, 8, 3, 3, 1, 1, 1, 1, {2, 2, 2, 2}, true, false, NULL},
    {1, 24, 6, 13, 24, 5, 5, 1, 1, 1, 1, {1, 3, 1, 1}, true, false, NULL},
    {1, 16, 10, 9, 16, 5, 5, 2, 2, 1, 1, {2, 1, 2, 3}, true, false, NULL},
    {1, 8, 7, 23, 8, 3, 3, 2, 2, 1, 1, {0, 1, 1, 2}, true, false, NULL},
    /* 7x7 at stride 1 (ConvNeXt): rows in every tile width, a row
     * narrower than the window with asymmetric pads, no padding. */
    {1, 40, 9, 21, 40, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true, false, NULL},
    {1, 16, 6, 5, 16, 7, 7, 1, 1, 1, 1, {3, 2, 1, 4}, true, false, NULL},
    {1, 24, 8, 15, 24, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, true, false, NULL},
};

/* Output extent along one axis, as the Conv shape rule computes it. */
static int64_t conv_extent(const bconv_spec *s, int axis) {
  int64_t in = axis ? s->w : s->h, k = axis ? s->kw : s->kh, st = axis ? s->sw : s->sh;
  int64_t d = axis ? s->dw : s->dh, pb = s->pads[axis], pe = s->pads[axis + 2];
  if (s->auto_pad) return (in + st - 1) / st;
  return (in + pb + pe - (k - 1) * d - 1) / st + 1;
}

static void add_bconv(kcase *c, const bconv_spec *s, int64_t b, int variant, int act) {
  if (s->planar) kc_input(c, 4, DIMS(s->n, s->c, s->h, s->w), -1, 1, false);
  else blocked_input(c, s->n, s->c, s->h, s->w, b);
  kc_input(c, 4, DIMS(s->m, s->depthwise ? 1 : s->c, s->kh, s->kw), -1, 1, true);
  if (variant != 1) kc_input(c, 1, DIMS(s->m), -1, 1, true);
  else kc_input_none(c);
  if (variant == 1) blocked_input(c, s->n, s->m, conv_extent(s, 0), conv_extent(s, 1), b);
  kc_attr_int(c, "block", b);
  kc_attr_ints(c, "kernel_shape", 2, DIMS(s->kh, s->kw));
  kc_attr_ints(c, "strides", 2, DIMS(s->sh, s->sw));
  if (s->dh > 1 || s->dw > 1) kc_attr_ints(c, "dilations", 2, DIMS(s->dh, s->dw));
  if (s->auto_pad) kc_attr_string(c, "auto_pad", s->auto_pad);
  else kc_attr_ints(c, "pads", 4, s->pads);
  if (s->depthwise) kc_attr_int(c, "group", s->c);
  if (s->planar) kc_attr_int(c, "planar_input", 1);
  char label[32];
  er_kcases_activation(act, c, label, sizeof label);
  c->dynamic = variant == 2;
}

/* Full-size layers (--time): ResNet-50, MobileNetV2 and PP-LCNet. */
static const bconv_spec big_specs[] = {
    {1, 256, 56, 56, 128, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    {1, 64, 56, 56, 256, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    {1, 1024, 14, 14, 256, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},
    {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, false, NULL},
    {1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, false, NULL},
    {1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, false, NULL},
    {1, 128, 56, 56, 128, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, false, false, NULL},
    {1, 3, 224, 224, 16, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, false, true, NULL},
    {1, 3, 224, 224, 64, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, false, true, NULL},
    {1, 256, 512, 1, 512, 5, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, NULL},   /* Magika's 1-D layer */
    {1, 16, 112, 112, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, false, NULL},
    {1, 32, 112, 112, 32, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, false, NULL},
    {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, false, NULL},
    {1, 96, 112, 112, 96, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, false, NULL},
    {1, 256, 14, 14, 256, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, true, false, NULL},
    {1, 960, 7, 7, 960, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, false, NULL},
    {1, 40, 56, 56, 40, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true, false, NULL},      /* ConvNeXt-Atto */
};

static void gen_bconv(case_fn fn, void *arg) {
  kcase c;
  char act[32];
  for (size_t bi = 0; bi < ER_ARRAY_LEN(block_sizes); bi++) {
    int64_t b = block_sizes[bi];
    for (size_t i = 0; i < ER_ARRAY_LEN(conv_specs); i++) {
      const bconv_spec *s = &conv_specs[i];
      /* 0: bias; 1: a residual, no bias; 2: dims unknown at compile time.
       * The activations rotate over the cases. */
      for (int variant = 0; variant < 3; variant++) {
        int a = (int)((i * 3 + (size_t)variant + bi) % (size_t)er_kcases_n_activations);
        er_kcases_activation(a, NULL, act, sizeof act);
        kc_begin(&c, "BlockedConv", "com.edgerun", 1,
                 "BlockedConv b%lld %s x[%lld,%lld,%lld,%lld] m%lld k%lldx%lld s%lldx%lld d%lldx%lld p%lld,%lld,%lld,%lld %s%s v%d %s",
                 (long long)b, s->depthwise ? "depthwise" : s->planar ? "planar" : "dense", (long long)s->n,
                 (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->m, (long long)s->kh,
                 (long long)s->kw, (long long)s->sh, (long long)s->sw, (long long)s->dh, (long long)s->dw,
                 (long long)s->pads[0], (long long)s->pads[1], (long long)s->pads[2], (long long)s->pads[3],
                 s->auto_pad ? s->auto_pad : "", s->auto_pad ? " " : "", variant, act);
        add_bconv(&c, s, b, variant, a);
        fn(&c, arg);
      }
    }
  }
  /* Groups of whole blocks (ShuffleNet's grouped 1x1 layers): 1x1 and
   * 3x3, stride 2, a batch, groups of unequal input and output widths;
   * and narrow groups (ResNeXt's grouped 3x3 layers: 2, 4 and 8 channels
   * a group, stride 2, a partial last block, borders on every side); each
   * for the blocks that divide its groups (the op takes no other). */
  static const struct {
    int64_t n, c, h, w, m, group, k, st, pad;
  } grouped[] = {
      {1, 64, 7, 7, 64, 4, 1, 1, 0},   {2, 32, 6, 9, 64, 2, 3, 1, 1},  {1, 96, 9, 11, 48, 3, 1, 2, 0},
      {1, 48, 7, 7, 24, 3, 1, 1, 0},   {1, 64, 5, 13, 128, 4, 3, 2, 1},
      {1, 32, 9, 11, 32, 8, 3, 1, 1},  {1, 64, 7, 10, 64, 8, 3, 2, 1}, {1, 48, 6, 21, 48, 24, 3, 1, 1},
      {2, 40, 5, 7, 40, 10, 3, 1, 1},  {1, 16, 4, 3, 16, 2, 3, 1, 2},
  };
  for (size_t bi = 0; bi < ER_ARRAY_LEN(block_sizes); bi++) {
    int64_t b = block_sizes[bi];
    for (size_t i = 0; i < ER_ARRAY_LEN(grouped); i++) {
      const int64_t n = grouped[i].n, ch = grouped[i].c, h = grouped[i].h, w = grouped[i].w, m = grouped[i].m;
      const int64_t gr = grouped[i].group, k = grouped[i].k, st = grouped[i].st, pad = grouped[i].pad;
      bool narrow = m == ch && ch / gr < b && b % (ch / gr) == 0;
      if (!narrow && ((ch / gr) % b != 0 || (m / gr) % b != 0)) continue;
      const int64_t oh = (h + 2 * pad - k) / st + 1, ow = (w + 2 * pad - k) / st + 1;
      for (int variant = 0; variant < 3; variant++) {
        int a = (int)((i * 3 + (size_t)variant + bi) % (size_t)er_kcases_n_activations);
        er_kcases_activation(a, NULL, act, sizeof act);
        kc_begin(&c, "BlockedConv", "com.edgerun", 1,
                 "BlockedConv b%lld grouped g%lld x[%lld,%lld,%lld,%lld] m%lld k%lld s%lld p%lld v%d %s", (long long)b,
                 (long long)gr, (long long)n, (long long)ch, (long long)h, (long long)w, (long long)m, (long long)k,
                 (long long)st, (long long)pad, variant, act);
        blocked_input(&c, n, ch, h, w, b);
        kc_input(&c, 4, DIMS(m, ch / gr, k, k), -1, 1, true);
        if (variant != 1) kc_input(&c, 1, DIMS(m), -1, 1, true);
        else kc_input_none(&c);
        if (variant == 1) blocked_input(&c, n, m, oh, ow, b);
        kc_attr_int(&c, "block", b);
        kc_attr_int(&c, "group", gr);
        kc_attr_ints(&c, "kernel_shape", 2, DIMS(k, k));
        kc_attr_ints(&c, "strides", 2, DIMS(st, st));
        kc_attr_ints(&c, "pads", 4, DIMS(pad, pad, pad, pad));
        er_kcases_activation(a, &c, act, sizeof act);
        c.dynamic = variant == 2;
        fn(&c, arg);
      }
    }
  }
  /* Near misses the kernels leave to the reference: groups that are not
   * whole blocks cannot be made (the op rejects them), so none here; a
   * wider window than the kernels' limit. */
  kc_begin(&c, "BlockedConv", "com.edgerun", 1, "BlockedConv b16 dense k17x1 (wider than the kernels take)");
  blocked_input(&c, 1, 16, 20, 3, 16);
  kc_input(&c, 4, DIMS(16, 16, 17, 1), -1, 1, true);
  kc_attr_int(&c, "block", 16);
  kc_attr_ints(&c, "kernel_shape", 2, DIMS(17, 1));
  fn(&c, arg);
  for (size_t i = 0; kc_timing && i < ER_ARRAY_LEN(big_specs); i++) {
    const bconv_spec *s = &big_specs[i];
    for (size_t bi = 0; bi < 2; bi++) {
      kc_begin(&c, "BlockedConv", "com.edgerun", 1, "full-size b%lld %s x[1,%lld,%lld,%lld] m%lld k%lld s%lld",
               (long long)block_sizes[bi], s->depthwise ? "depthwise" : s->planar ? "planar" : "dense",
               (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->m, (long long)s->kh,
               (long long)s->sh);
      add_bconv(&c, s, block_sizes[bi], 0, 1 /* Relu */);
      fn(&c, arg);
    }
  }
}

typedef struct bpool_spec {
  const char *op;
  int64_t n, c, h, w, kh, kw, sh, sw, dh, dw;
  int64_t pads[4];
  int ceil, count_include_pad;
} bpool_spec;

static const bpool_spec pool_specs[] = {
    {"MaxPool", 1, 32, 8, 8, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, 0, 0},
    {"MaxPool", 1, 20, 15, 15, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 0},
    {"MaxPool", 2, 16, 13, 13, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, 1, 0},
    {"MaxPool", 1, 8, 10, 11, 3, 3, 1, 1, 2, 2, {1, 1, 1, 1}, 0, 0},
    {"MaxPool", 1, 16, 19, 19, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 0, 0},      /* YOLO's SPPF */
    /* 3x3 stride 1 (Inception's pools): constant offsets inside, rows
     * of 21 and 14 (tiles of 8, 4 and 1) */
    {"MaxPool", 1, 16, 12, 21, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, 0},
    {"AveragePool", 1, 24, 11, 14, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, 1},
    {"AveragePool", 1, 8, 9, 21, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, 0},
    {"MaxPool", 1, 16, 23, 27, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, 1, 0},       /* stride 2, 13 wide */
    {"AveragePool", 1, 16, 9, 9, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 0},
    {"AveragePool", 1, 24, 9, 12, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 1, 1},
    {"AveragePool", 1, 16, 7, 7, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
    {"AveragePool", 1, 8, 6, 17, 2, 3, 1, 2, 1, 1, {0, 1, 1, 0}, 1, 1},
    {"GlobalAveragePool", 2, 40, 7, 9, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0},
    {"GlobalMaxPool", 1, 16, 5, 3, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0},
    {"GlobalAveragePool", 1, 64, 1, 1, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0},
};

static void gen_bpool(case_fn fn, void *arg) {
  kcase c;
  for (size_t bi = 0; bi < ER_ARRAY_LEN(block_sizes); bi++) {
    int64_t b = block_sizes[bi];
    for (size_t i = 0; i < ER_ARRAY_LEN(pool_specs); i++) {
      const bpool_spec *s = &pool_specs[i];
      bool global = strncmp(s->op, "Global", 6) == 0, max = strstr(s->op, "Max") != NULL;
      for (int variant = 0; variant < 2; variant++) {
        /* max: 1 adds NaN and infinities; average: 1 has unknown dims. */
        kc_begin(&c, "BlockedPool", "com.edgerun", 1,
                 "BlockedPool b%lld %s x[%lld,%lld,%lld,%lld] k%lldx%lld s%lldx%lld d%lldx%lld p%lld,%lld,%lld,%lld ceil%d cip%d v%d",
                 (long long)b, s->op, (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w,
                 (long long)s->kh, (long long)s->kw, (long long)s->sh, (long long)s->sw, (long long)s->dh,
                 (long long)s->dw, (long long)s->pads[0], (long long)s->pads[1], (long long)s->pads[2],
                 (long long)s->pads[3], s->ceil, s->count_include_pad, variant);
        er_tensor *x = blocked_input(&c, s->n, s->c, s->h, s->w, b);
        if (max && variant == 1) {
          kc_specials(&c, x);
          /* The first kh x kw pixels of block 0 all NaN: the first window
           * is all NaN, which the reference keeps as NaN. */
          float *d = x->data;
          int64_t kh = global ? s->h : s->kh, kw = global ? s->w : s->kw;
          for (int64_t yy = 0; yy < kh && yy < s->h; yy++)
            for (int64_t xx = 0; xx < kw && xx < s->w; xx++)
              for (int64_t l = 0; l < b; l++) d[(yy * s->w + xx) * b + l] = NAN;
        }
        kc_attr_int(&c, "block", b);
        kc_attr_string(&c, "op", s->op);
        if (!global) {
          kc_attr_ints(&c, "kernel_shape", 2, DIMS(s->kh, s->kw));
          kc_attr_ints(&c, "strides", 2, DIMS(s->sh, s->sw));
          if (s->dh > 1 || s->dw > 1) kc_attr_ints(&c, "dilations", 2, DIMS(s->dh, s->dw));
          kc_attr_ints(&c, "pads", 4, s->pads);
          if (s->ceil) kc_attr_int(&c, "ceil_mode", 1);
          if (s->count_include_pad) kc_attr_int(&c, "count_include_pad", 1);
        }
        c.dynamic = !max && variant == 1;
        c.tol = max ? TOL_EXACT_T : TOL_REDUCE;
        fn(&c, arg);
      }
    }
  }
}

/* Both planar sides: NCHW, and NHWC (channels_last: the Transposes around
 * ConvNeXt's channels-last blocks) with runs of pixels of every length. */
static void gen_reorder(case_fn fn, void *arg, bool to) {
  static const int64_t shapes[][4] = {{1, 16, 4, 4}, {2, 20, 3, 7}, {1, 3, 17, 1},
                                      {1, 64, 1, 1}, {1, 33, 5, 9}, {2, 40, 9, 15}};
  kcase c;
  for (size_t bi = 0; bi < ER_ARRAY_LEN(block_sizes); bi++) {
    int64_t b = block_sizes[bi];
    for (int cl = 0; cl < 2; cl++) {
      for (size_t i = 0; i < ER_ARRAY_LEN(shapes); i++) {
        const int64_t *s = shapes[i];
        kc_begin(&c, to ? "ToBlocked" : "FromBlocked", "com.edgerun", 1, "%s b%lld [%lld,%lld,%lld,%lld]%s",
                 to ? "ToBlocked" : "FromBlocked", (long long)b, (long long)s[0], (long long)s[1], (long long)s[2],
                 (long long)s[3], cl ? " channels_last" : "");
        if (to && cl) kc_input(&c, 4, DIMS(s[0], s[2], s[3], s[1]), -1, 1, false);
        else if (to) kc_input(&c, 4, s, -1, 1, false);
        else blocked_input(&c, s[0], s[1], s[2], s[3], b);
        kc_attr_int(&c, "block", b);
        if (!to) kc_attr_int(&c, "channels", s[1]);
        if (cl) kc_attr_int(&c, "channels_last", 1);
        c.tol = TOL_EXACT_T;
        c.dynamic = i == 1;
        fn(&c, arg);
      }
    }
  }
}

static void gen_to_blocked(case_fn fn, void *arg) { gen_reorder(fn, arg, true); }
static void gen_from_blocked(case_fn fn, void *arg) { gen_reorder(fn, arg, false); }

/* BlockedBatchNormalization: partial last blocks, one pixel, a batch,
 * another epsilon, shapes unknown at compile time, and parameters given at
 * run time (outside what the kernels take: they fold them at load). */
static void gen_bbn(case_fn fn, void *arg) {
  static const int64_t shapes[][4] = {{1, 16, 7, 9}, {2, 20, 3, 5}, {1, 64, 1, 1}, {1, 33, 28, 28}, {1, 3, 17, 1}};
  kcase c;
  for (size_t bi = 0; bi < ER_ARRAY_LEN(block_sizes); bi++) {
    int64_t b = block_sizes[bi];
    for (size_t i = 0; i < ER_ARRAY_LEN(shapes); i++) {
      const int64_t *sh = shapes[i], ch = sh[1];
      for (int variant = 0; variant < 2; variant++) {
        bool constant = !(variant == 1 && i == 4);
        /* The activations rotate over the cases (none included). */
        char act[32];
        int a = (int)((i * 2 + (size_t)variant + bi) % (size_t)er_kcases_n_activations);
        er_kcases_activation(a, NULL, act, sizeof act);
        kc_begin(&c, "BlockedBatchNormalization", "com.edgerun", 1,
                 "BlockedBatchNormalization b%lld x[%lld,%lld,%lld,%lld] v%d %s", (long long)b, (long long)sh[0],
                 (long long)ch, (long long)sh[2], (long long)sh[3], variant, act);
        blocked_input(&c, sh[0], ch, sh[2], sh[3], b);
        kc_input(&c, 1, DIMS(ch), 0.5f, 2, constant);
        kc_input(&c, 1, DIMS(ch), -1, 1, constant);
        kc_input(&c, 1, DIMS(ch), -1, 1, constant);
        kc_input(&c, 1, DIMS(ch), 0.1f, 3, constant);
        kc_attr_int(&c, "block", b);
        if (variant == 1) kc_attr_float(&c, "epsilon", 1e-3f);
        er_kcases_activation(a, &c, act, sizeof act);
        c.dynamic = variant == 1 && i == 1;
        c.tol = TOL_REDUCE;
        fn(&c, arg);
      }
    }
  }
}

/* BlockedResize: nearest over height and width as the YOLO and FPN necks
 * upsample (2x, default modes and asymmetric/floor), fractional and
 * shrinking factors, every coordinate rule the kernel takes, sizes given
 * with channels that are not whole blocks (the reference's planar copy
 * holds every lane), a batch, Resize 10, 11 and 13, and shapes unknown at
 * compile time. */
typedef struct bresize_spec {
  int64_t n, c, h, w;
  float fh, fw;
  bool sizes;
  int opset;
  const char *coord, *round;
} bresize_spec;

static const bresize_spec resize_specs[] = {
    {1, 24, 7, 9, 2, 2, false, 13, NULL, NULL},
    {1, 16, 10, 10, 2, 2, true, 11, "asymmetric", "floor"},
    {1, 12, 7, 9, 2, 2, true, 13, "asymmetric", "floor"},
    {2, 20, 5, 6, 1.7f, 0.6f, false, 13, "align_corners", "ceil"},
    {1, 40, 8, 10, 0.5f, 0.5f, false, 13, "tf_half_pixel_for_nn", "round_prefer_ceil"},
    {1, 8, 5, 6, 2, 3, false, 10, NULL, NULL},
    {1, 32, 9, 7, 3, 1.5f, true, 13, "pytorch_half_pixel", "round_prefer_floor"},
};

static void gen_bresize(case_fn fn, void *arg) {
  kcase c;
  for (size_t bi = 0; bi < ER_ARRAY_LEN(block_sizes); bi++) {
    int64_t b = block_sizes[bi];
    for (size_t i = 0; i < ER_ARRAY_LEN(resize_specs); i++) {
      const bresize_spec *r = &resize_specs[i];
      kc_begin(&c, "BlockedResize", "com.edgerun", 1, "BlockedResize b%lld x[%lld,%lld,%lld,%lld] %gx%g %s opset %d %s %s",
               (long long)b, (long long)r->n, (long long)r->c, (long long)r->h, (long long)r->w, r->fh, r->fw,
               r->sizes ? "sizes" : "scales", r->opset, r->coord ? r->coord : "-", r->round ? r->round : "-");
      blocked_input(&c, r->n, r->c, r->h, r->w, b);
      if (r->opset >= 11) kc_input_none(&c); /* roi */
      if (r->sizes) {
        kc_input_none(&c);
        int64_t sz[4] = {r->n, r->c, (int64_t)((float)r->h * r->fh), (int64_t)((float)r->w * r->fw)};
        kc_input_i64(&c, 1, DIMS(4), sz, true);
      } else {
        er_tensor *t = kc_input(&c, 1, DIMS(4), 0, 0, true);
        float *d = t->data;
        d[0] = d[1] = 1.0f;
        d[2] = r->fh;
        d[3] = r->fw;
      }
      kc_attr_int(&c, "block", b);
      kc_attr_int(&c, "opset", r->opset);
      kc_attr_string(&c, "mode", "nearest");
      if (r->coord) kc_attr_string(&c, "coordinate_transformation_mode", r->coord);
      if (r->round) kc_attr_string(&c, "nearest_mode", r->round);
      c.dynamic = i == 3;
      c.tol = TOL_EXACT_T;
      fn(&c, arg);
    }
  }
}

const case_gen kcases_blocked[] = {
    {"BlockedConv", "com.edgerun", gen_bconv},
    {"BlockedPool", "com.edgerun", gen_bpool},
    {"ToBlocked", "com.edgerun", gen_to_blocked},
    {"FromBlocked", "com.edgerun", gen_from_blocked},
    {"BlockedBatchNormalization", "com.edgerun", gen_bbn},
    {"BlockedResize", "com.edgerun", gen_bresize},
    {NULL, NULL, NULL},
};
