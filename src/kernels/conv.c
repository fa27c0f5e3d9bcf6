/* conv.c - optimized CPU kernels of the "conv" group: float32 Conv and
 * FusedConv over NCHW (1-D and 2-D).
 *
 *  - f32_dwconv__<isa>: depthwise (group == C == M) as a direct kernel
 *    (vec-impl.h), with bias, residual and activation fused.
 *  - f32_conv_gemm_<tile>__<isa>: everything else as one GEMM per image
 *    and group, Y[Mg, OH*OW] = W[Mg, Cg*kh*kw] X'[Cg*kh*kw, OH*OW]: the
 *    weights are packed once at compile time as the GEMM's A; X' is never
 *    materialized: a 1x1 stride-1 convolution packs X itself (it already
 *    is X' in NCHW), any other packs its patches block by block straight
 *    from the image (im2col fused into the packing, so no column buffer);
 *    bias (per output channel), residual and activation are the GEMM
 *    epilogue. */
#include <stdatomic.h>

#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/sgemm.h"
#include "kernels/vec.h"
#include "kernels/window.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* What both kernels accept: float32 tensors of rank 3 or 4 with
 * attributes the window code reads. */
static bool conv_common_ok(const er_kernel_info *ki, bool fused) {
  if (!er__ki_f32(ki, 0) || !er__ki_f32(ki, 1) || !er__ki_out_f32(ki)) return false;
  for (int i = 2; i < ki->n_in; i++)
    if (ki->in[i] && ki->in[i]->dtype != ER_DTYPE_FLOAT) return false;
  if (!fused && ki->n_in > 3) return false;
  /* X of unknown rank (an If whose branches differ, as in Silero VAD's
   * STFT input) has W's rank whenever the node runs: its check says so. */
  const er_tensor *x = ki->in[0], *w = ki->in[1];
  if ((x->rank >= 0 && x->rank != w->rank) || (w->rank != 3 && w->rank != 4)) return false;
  er_kctx ctx = er__ki_ctx(ki);
  if (!er__window_attrs_ok(&ctx, w->rank)) return false;
  if (fused) {
    er_activation act;
    if (er__act_from_node(&ctx, &act) != ER_STATUS_OK) {
      er__error_clear();
      return false;
    }
  }
  return true;
}

static bool is_fused(const er_kernel_info *ki) { return strcmp(ki->node->domain, ER_FUSED_DOMAIN) == 0; }

static er_activation node_act(const er_kctx *ctx) {
  er_activation act;
  memset(&act, 0, sizeof act);
  if (strcmp(ctx->node->domain, ER_FUSED_DOMAIN) == 0 && er__act_from_node(ctx, &act) != ER_STATUS_OK) {
    er__error_clear();
    memset(&act, 0, sizeof act);
  }
  return act;
}

/* ======================================================================== */
/* Convolution as GEMM                                                       */
/* ======================================================================== */

typedef struct conv_state {
  const er_sgemm_isa *isa;
  const er_vec_ops *ops;
  er_activation act;
  /* Pixel-major: the GEMM is Y^T[OH*OW, Mg] = X'^T W^T, stored
   * transposed. Chosen at compile time when the output has few pixels
   * (7x7, 14x14) and many channels: its tiles then cover the pixels
   * exactly (any row count) and the channels in whole 32-wide panels,
   * where the channel-major form would pad 49 pixels to 64. */
  bool pixel_major;
  float *packed_w;    /* per group, group g at packed_w + g * gstride: as
                         A [Mg, Kg] (channel-major) or B [Kg, Mg] (pixel-major) */
  size_t gstride;     /* floats */
  /* Output size unknown at compile time (symbolic dims, subgraph bodies)
   * and the weights small: both packings are kept and each run takes the
   * one its pixel count wants (Silero VAD's 1-D convolutions over 4
   * positions would otherwise fill 4 of 32 columns per panel). */
  bool decide_at_run;
  float *packed_pm;   /* the pixel-major packing when decide_at_run */
  size_t gstride_pm;
  /* Output size unknown at compile time and a layer the direct kernel
   * takes (few channels, short patches, stride 1): its state, for the run
   * sizes it fits (cd_fits; YOLOv8n's 16-channel layers at 80x80). */
  void *cd;
  /* Batch folded into the columns: one GEMM W[M, K] x P[K, N*OH*OW] for
   * all images (conv_fold), chosen when images have fewer pixels than a
   * panel holds. Needs the channel-major packing. */
  bool fold;
  int64_t m, kg, group;
  int slots;
} conv_state;

/* Weights up to this size are packed both ways when the output size is
 * unknown at compile time (conv_state.decide_at_run). */
#define CONV_BOTH_PACKINGS_BYTES (INT64_C(4) << 20)

/* Share of the tile work that is useful along a dimension of n split in
 * panels of p. */
static double panel_use(int64_t n, int64_t p) { return n <= 0 ? 1.0 : (double)n / (double)((n + p - 1) / p * p); }

static bool want_pixel_major(const er_sgemm_isa *isa, int64_t pixels, int64_t mg) {
  return panel_use(mg, isa->nr) > panel_use(pixels, isa->nr) + 0.02;
}

/* The patch matrix of one image and group, packed on demand. */
typedef struct im2col {
  er_im2col ic;
  const er_vec_ops *ops;
} im2col;

/* The GEMM's packing callback: the ISA's im2col packer. */
static void conv_pack(const void *vctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *dst) {
  const im2col *ic = vctx;
  ic->ops->im2col_pack(&ic->ic, k0, kc, j0, nc, dst);
}

/* p + o, or NULL for a null p (sizing a problem at compile time, when no
 * tensor has data yet). */
static const float *at(const float *p, int64_t o) { return p ? p + o : NULL; }

/* The GEMM of image n, group gi. */
static void conv_problem(const conv_state *s, const er_window *g, const float *x, const float *w,
                         const float *bias, const float *z, float *y, int64_t n, int64_t gi, im2col *ic,
                         er_gemm_problem *p) {
  int64_t cg = g->c / g->group, mg = g->m / g->group, kg = cg * g->kh * g->kw;
  int64_t hw = g->h * g->w, ohw = g->oh * g->ow;
  bool pointwise = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
                   g->oh == g->h && g->ow == g->w;
  memset(p, 0, sizeof *p);
  p->isa = s->isa;
  p->scale = 1.0f;
  p->k = kg;
  p->c = (float *)at(y, (n * g->m + gi * mg) * ohw);
  p->ldc = ohw;
  p->epi.act = s->act;
  const float *xg = at(x, (n * g->c + gi * cg) * hw);
  const float *wg = at(w, gi * mg * kg);
  /* The patch operand: X itself for a pointwise convolution, else packed
   * from the image block by block. */
  er_gemm_operand patches;
  memset(&patches, 0, sizeof patches);
  if (pointwise) {
    patches.data = xg;
  } else {
    ic->ic.x = xg;
    ic->ic.g = g;
    ic->ops = s->ops;
    patches.pack = conv_pack;
    patches.pack_ctx = ic;
  }
  if (s->pixel_major) {
    p->m = ohw;
    p->n = mg;
    p->c_trans = true;
    patches.rs = 1;   /* A(pixel, k) = X'[k, pixel] */
    patches.cs = hw;
    ic->ic.nr = s->isa->mr;
    p->a = patches;
    if (s->packed_w) {
      p->b.packed = s->packed_w + (size_t)gi * s->gstride;
    } else {
      p->b.data = wg;
      p->b.rs = 1;
      p->b.cs = kg;
    }
    p->epi.bias = at(bias, gi * mg);
    if (z) {
      p->epi.add = z + (n * g->m + gi * mg) * ohw;
      p->epi.add_rs = 1;
      p->epi.add_cs = ohw;
      p->epi.beta = 1.0f;
    }
    return;
  }
  p->m = mg;
  p->n = ohw;
  patches.rs = hw;
  patches.cs = 1;
  ic->ic.nr = s->isa->nr;
  p->b = patches;
  if (s->packed_w) {
    p->a.packed = s->packed_w + (size_t)gi * s->gstride;
  } else {
    p->a.data = wg;
    p->a.rs = kg;
    p->a.cs = 1;
  }
  p->epi.bias = at(bias, gi * mg);
  p->epi.bias_rows = true;
  if (z) {
    p->epi.add = z + (n * g->m + gi * mg) * ohw;
    p->epi.add_rs = ohw;
    p->epi.add_cs = 1;
    p->epi.beta = 1.0f;
  }
}

/* ------------------------------------------------------------------------ */
/* Batch folded into the GEMM's columns                                      */
/* ------------------------------------------------------------------------ */

/* A batch of images with few output pixels each (Silero VAD's 1-D layers
 * over 1 to 4 positions, batched over audio chunks): image by image, every
 * GEMM streams the whole weight matrix for a few pixels. Folded, the
 * pixels of all images are the rows of one pixel-major GEMM
 * P^T[N * OH * OW, K] x W^T[K, M], so the weights stream once; the product
 * goes to scratch and is transposed to [N, M, OH * OW] image by image.
 * Not for grouped convolutions or a fused residual. */
#define FOLD_ONE_IMAGE_PIXELS 8

static bool fold_wanted(const er_sgemm_isa *isa, int64_t n, int64_t pixels, int64_t group, bool residual) {
  if (group != 1 || residual) return false;
  /* One image: only for the packer's sake (rows of a few pixels cost
   * less per tap run than the vector packer's per-k-row set-up). */
  return n > 1 ? pixels < isa->nr : n == 1 && pixels <= FOLD_ONE_IMAGE_PIXELS;
}

typedef struct fold_pack {
  const float *x;     /* [N, C, H, W] */
  const er_window *g;
  int mr;
} fold_pack;

/* Packs rows [i0, i0 + mc) x columns [k0, k0 + kc) of the folded patch
 * matrix P^T into panels [q][kc][mr]; row i is pixel i % (OH * OW) of
 * image i / (OH * OW). Rows past the last are zeros. */
static void fold_pack_fn(const void *vctx, int64_t k0, int64_t kc, int64_t i0, int64_t mc, float *dst) {
  const fold_pack *f = vctx;
  const er_window *g = f->g;
  const int64_t mr = f->mr, ohw = g->oh * g->ow, hw = g->h * g->w, rows = g->n * ohw;
  const int64_t mcp = (mc + mr - 1) / mr * mr;
  memset(dst, 0, (size_t)(mcp * kc) * sizeof *dst);
  const int64_t taps = g->kh * g->kw;
  for (int64_t i = i0; i < i0 + mc && i < rows; i++) {
    int64_t img = i / ohw, pix = i % ohw, oy = pix / g->ow, ox = pix % g->ow;
    float *d = dst + ((i - i0) / mr) * kc * mr + (i - i0) % mr;
    const float *xi = f->x + img * g->c * hw;
    /* (c, ky, kx) of column k0, stepped along: one division per row. */
    int64_t c = k0 / taps, ky = (k0 / g->kw) % g->kh, kx = k0 % g->kw;
    const int64_t ix0 = ox * g->sw - g->pl, iy0 = oy * g->sh - g->pt;
    for (int64_t kk = 0; kk < kc;) {
      /* One run of taps along x: row (c, ky), taps kx .. kw - 1. */
      int64_t run = g->kw - kx < kc - kk ? g->kw - kx : kc - kk;
      int64_t iy = iy0 + ky * g->dh;
      if (iy >= 0 && iy < g->h) {
        const float *row = xi + c * hw + iy * g->w;
        for (int64_t t = 0; t < run; t++) {
          int64_t ix = ix0 + (kx + t) * g->dw;
          if (ix >= 0 && ix < g->w) d[(kk + t) * mr] = row[ix];
        }
      }
      kk += run;
      kx = 0;
      if (++ky == g->kh) {
        ky = 0;
        c++;
      }
    }
  }
}

static void fold_problem(const conv_state *s, const float *packed_b, const er_window *g, const float *bias,
                         fold_pack *fp, er_gemm_problem *p) {
  memset(p, 0, sizeof *p);
  p->isa = s->isa;
  p->scale = 1.0f;
  p->m = g->n * g->oh * g->ow;
  p->n = g->m;
  p->k = g->c * g->kh * g->kw;
  p->ldc = g->m;
  p->epi.act = s->act;
  p->epi.bias = bias;
  p->b.packed = packed_b;
  fp->g = g;
  fp->mr = s->isa->mr;
  p->a.pack = fold_pack_fn;
  p->a.pack_ctx = fp;
}

/* Bytes of the folded product, 64-byte aligned. */
static size_t fold_c_bytes(const er_window *g) {
  if (g->n == 1) return 0; /* written in place, transposed */
  return ((size_t)(g->m * g->n * g->oh * g->ow) * sizeof(float) + 63) / 64 * 64;
}

static er_status fold_run(const conv_state *s, const float *packed_b, const er_kernel_run *kr, const er_window *g,
                          const float *x, const float *bias, float *y) {
  er_gemm_problem p;
  fold_pack fp = {x, g, 0};
  fold_problem(s, packed_b, g, bias, &fp, &p);
  size_t slot = er__sgemm_scratch_floats(&p) * sizeof(float);
  int want = er__pool_threads(kr->pool);
  if (want > ER_KERNEL_MAX_SLOTS) want = ER_KERNEL_MAX_SLOTS;
  size_t cbytes = fold_c_bytes(g), need = cbytes + slot * (size_t)want;
  void *owned = NULL;
  unsigned char *base = kr->scratch;
  int slots = want;
  if (!base || kr->scratch_bytes < cbytes + slot) {
    base = er__kr_spill(kr, need, &owned);
    if (!base)
      return er__error(ER_STATUS_OUT_OF_MEMORY, "Conv '%s': out of memory for %zu bytes of kernel scratch",
                       kr->ctx->node->name, need);
  } else if (slot > 0) {
    size_t have = (kr->scratch_bytes - cbytes) / slot;
    if (have < (size_t)slots) slots = (int)have;
  }
  int64_t ohw = g->oh * g->ow;
  float *cbuf = (float *)base;
  if (g->n == 1) {
    p.c = y;
    p.c_trans = true;
    p.ldc = ohw;
    er__sgemm_run(&p, kr->pool, (float *)base, slots);
    er__aligned_free(owned);
    return ER_STATUS_OK;
  }
  p.c = cbuf;
  er__sgemm_run(&p, kr->pool, (float *)(base + cbytes), slots);
  for (int64_t n = 0; n < g->n; n++) {
    const float *src = cbuf + n * ohw * g->m;
    float *dst = y + n * g->m * ohw;
    for (int64_t m = 0; m < g->m; m++)
      for (int64_t q = 0; q < ohw; q++) dst[m * ohw + q] = src[q * g->m + m];
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

static bool conv_gemm_supports(const er_kernel_info *ki, const er_sgemm_isa *isa, bool isa_ok) {
  if (!isa_ok) return false;
  ER_UNUSED(isa);
  return conv_common_ok(ki, is_fused(ki));
}

#if defined(__x86_64__) || defined(__i386__)
/* Share of the GEMM's tile work that is useful for a convolution of mg
 * output channels (per group) over `pixels` positions, in the better of
 * the two orientations (channel-major or pixel-major). */
static double tile_use(const er_sgemm_isa *isa, int64_t mg, int64_t pixels) {
  double cm = panel_use(mg, isa->mr) * panel_use(pixels, isa->nr);
  double pm = panel_use(pixels, isa->mr) * panel_use(mg, isa->nr);
  return cm > pm ? cm : pm;
}

/* The 16 x 16 tile instead of the main one, where the shape fills it
 * clearly better (by a tenth): known weights and output size but for the
 * batch. */
static bool narrow_tile_better(const er_kernel_info *ki, const er_sgemm_isa *wide, const er_sgemm_isa *narrow) {
  const er_tensor *w = ki->in[1], *y = ki->out[0];
  if (!er__tensor_shape_known(w) || w->rank < 3 || y->rank != w->rank) return false;
  er_kctx ctx = er__ki_ctx(ki);
  int64_t group = 1;
  er__attr_int(&ctx, "group", 1, &group);
  if (group < 1 || w->dims[0] % group != 0) return false;
  int64_t pixels = 1;
  for (int d = 2; d < y->rank; d++) {
    if (y->dims[d] < 0) return false;
    pixels *= y->dims[d];
  }
  int64_t mg = w->dims[0] / group;
  return tile_use(narrow, mg, pixels) > 1.1 * tile_use(wide, mg, pixels);
}
#endif

/* The direct kernel (below), which the GEMM's state keeps for run sizes
 * it fits when the size is unknown at compile time. */
static bool cd_weights_ok(const er_kernel_info *ki);
static bool cd_fits(const er_window *g, const er_vec_ops *ops);
static er_status cd_prepare(const er_kernel_info *ki, const er_vec_ops *ops, void **state_out, size_t *scratch_out);
static er_status cd_run(const er_kernel_run *kr);
static void cd_release(void *state);
static void conv_gemm_release(void *state);

/* Packs the weights [group][mg][kg] for s->pixel_major into s->packed_w. */
static bool conv_pack_weights(conv_state *s, const er_sgemm_isa *isa, const float *w, int64_t group, int64_t mg,
                              int64_t kg) {
  s->gstride = ((s->pixel_major ? er__sgemm_packed_b_floats(isa, kg, mg) : er__sgemm_packed_a_floats(isa, mg, kg)) +
                15) / 16 * 16;
  s->packed_w = er__aligned_alloc(s->gstride * (size_t)group * sizeof(float));
  if (!s->packed_w) return false;
  for (int64_t gi = 0; gi < group; gi++) {
    const float *wg = w + gi * mg * kg;
    float *dst = s->packed_w + (size_t)gi * s->gstride;
    if (s->pixel_major) er__sgemm_pack_b(isa, wg, 1, kg, kg, mg, dst);
    else er__sgemm_pack_a(isa, wg, kg, 1, mg, kg, 1.0f, dst);
  }
  s->m = mg * group;
  s->kg = kg;
  s->group = group;
  return true;
}

static er_status conv_gemm_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, const er_vec_ops *ops,
                                   void **state_out, size_t *scratch_out) {
  conv_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a Conv kernel");
  er_kctx ctx = er__ki_ctx(ki);
  s->isa = isa;
  s->ops = ops;
  s->act = node_act(&ctx);
  s->slots = er__ki_slots(ki);
  const er_tensor *x = ki->in[0], *w = ki->in[1], *y = ki->out[0];
  int64_t group = 1;
  er__attr_int(&ctx, "group", 1, &group);
  if (er__tensor_shape_known(w) && er__tensor_shape_known(y) && group >= 1 && w->dims[0] % group == 0) {
    int64_t pixels = 1;
    for (int d = 2; d < y->rank; d++) pixels *= y->dims[d];
    s->fold = w->data && fold_wanted(isa, y->dims[0], pixels, group, er__ki_in(ki, 3) != NULL);
    s->pixel_major = s->fold || want_pixel_major(isa, pixels, w->dims[0] / group);
  } else if (w->data && er__tensor_shape_known(w) && group >= 1 && w->dims[0] % group == 0 &&
             w->nbytes <= CONV_BOTH_PACKINGS_BYTES) {
    s->decide_at_run = true;
  }
  if (!er__tensor_shape_known(y) && cd_weights_ok(ki)) {
    size_t cd_scratch = 0;
    er_status st = cd_prepare(ki, ops, &s->cd, &cd_scratch);
    if (st != ER_STATUS_OK) {
      free(s);
      return st;
    }
  }
  if (w->data && er__tensor_shape_known(w) && group >= 1 && w->dims[0] % group == 0) {
    int64_t m = w->dims[0], kg = 1;
    for (int d = 1; d < w->rank; d++) kg *= w->dims[d];
    int64_t mg = m / group;
    if (!conv_pack_weights(s, isa, w->data, group, mg, kg)) {
      conv_gemm_release(s);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "Conv '%s': out of memory packing weights", ki->node->name);
    }
    if (s->decide_at_run) {
      s->gstride_pm = (er__sgemm_packed_b_floats(isa, kg, mg) + 15) / 16 * 16;
      s->packed_pm = er__aligned_alloc(s->gstride_pm * (size_t)group * sizeof(float));
      if (!s->packed_pm) {
        conv_gemm_release(s);
        return er__error(ER_STATUS_OUT_OF_MEMORY, "Conv '%s': out of memory packing weights", ki->node->name);
      }
      for (int64_t gi = 0; gi < group; gi++)
        er__sgemm_pack_b(isa, (const float *)w->data + gi * mg * kg, 1, kg, kg, mg,
                         s->packed_pm + (size_t)gi * s->gstride_pm);
    }
  }
  *scratch_out = 0;
  er_window g;
  if (er__tensor_shape_known(x) && er__tensor_shape_known(w) && er__tensor_shape_known(y) &&
      er__window_get(&ctx, x, w, y, &g)) {
    er_gemm_problem p;
    if (s->fold) {
      fold_pack fp = {NULL, &g, 0};
      fold_problem(s, s->packed_w, &g, NULL, &fp, &p);
      *scratch_out = fold_c_bytes(&g) + er__sgemm_scratch_floats(&p) * sizeof(float) * (size_t)s->slots;
    } else {
      im2col ic;
      conv_problem(s, &g, NULL, NULL, NULL, NULL, NULL, 0, 0, &ic, &p);
      *scratch_out = er__sgemm_scratch_floats(&p) * sizeof(float) * (size_t)s->slots;
    }
  }
  *state_out = s;
  return ER_STATUS_OK;
}

static void conv_gemm_release(void *state) {
  conv_state *s = state;
  if (!s) return;
  cd_release(s->cd);
  er__aligned_free(s->packed_w);
  er__aligned_free(s->packed_pm);
  free(s);
}

static er_status conv_gemm_run(const er_kernel_run *kr) {
  const conv_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *b = er__in(ctx, 2), *z = er__in(ctx, 3);
  er_tensor *y = ctx->out[0];
  er_window g;
  if (!er__window_get(ctx, x, w, y, &g)) return er__kr_reference(kr);
  /* Column images as rows: the patches then pack whole rows, not one
   * pixel per segment (Magika's 5x1 layer: 8.5 ms -> see the commit). */
  er__window_column_as_row(&g);
  int64_t kg = (g.c / g.group) * g.kh * g.kw;
  if (s->packed_w && (s->m != g.m || s->kg != kg || s->group != g.group)) return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  if (s->cd && cd_fits(&g, s->ops)) {
    er_kernel_run dkr = *kr;
    dkr.state = s->cd;
    return cd_run(&dkr);
  }
  /* All images at once, on the pixel-major packing. */
  if (((s->fold && s->pixel_major && s->packed_w) || (s->decide_at_run && s->packed_pm)) &&
      fold_wanted(s->isa, g.n, g.oh * g.ow, g.group, z != NULL))
    return fold_run(s, s->fold ? s->packed_w : s->packed_pm, kr, &g, x->data, b ? b->data : NULL, y->data);
  conv_state chosen;
  if (s->decide_at_run && g.group >= 1 && s->packed_w &&
      want_pixel_major(s->isa, g.oh * g.ow, g.m / g.group)) {
    chosen = *s;
    chosen.pixel_major = true;
    chosen.packed_w = s->packed_pm;
    chosen.gstride = s->gstride_pm;
    s = &chosen;
  }
  er_gemm_problem p;
  im2col ic;
  conv_problem(s, &g, x->data, w->data, b ? b->data : NULL, z ? z->data : NULL, y->data, 0, 0, &ic, &p);
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, er__sgemm_scratch_floats(&p) * sizeof(float), &scratch, &slots, &owned));
  for (int64_t n = 0; n < g.n; n++) {
    for (int64_t gi = 0; gi < g.group; gi++) {
      conv_problem(s, &g, x->data, w->data, b ? b->data : NULL, z ? z->data : NULL, y->data, n, gi, &ic, &p);
      er__sgemm_run(&p, kr->pool, scratch, slots);
    }
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Direct convolution of small dense layers                                  */
/* ======================================================================== */

/* Stride-1 convolutions with few output channels (at most CD_MAX_M, in
 * whole or nearly whole blocks of 8) and short patches (Cin x kh x kw at
 * most CD_MAX_K) over rows that fill the vectors: MNIST-style CNNs and the
 * tails of small detectors. Each image is copied once into a zero-padded
 * buffer, then blocks of 8 channels x rows x one vector of columns take
 * every tap as one input vector times 8 broadcast weights (vec-impl.h):
 * no patch matrix, no GEMM tiles of mostly padding. MNIST-8's 8->16 5x5
 * layer on 14x14 went from 34 us (GEMM, patches packed per block) to the
 * figure in the commit that added this. */
#define CD_MAX_M 32
#define CD_MAX_K 1024
#define CD_MAX_PADDED_FLOATS (INT64_C(1) << 21)

/* One image's direct convolution for the workers. */
struct cd_job_s {
  const er_vec_ops *ops;
  er_conv_direct d;
};

typedef struct cd_state {
  const er_vec_ops *ops;
  er_activation act;
  float *wp;          /* [ceil(m / 8)][k][8] */
  int64_t m, k;
} cd_state;

/* Padded geometry of one image: rows of whole row blocks plus the
 * window, columns of whole vectors plus the window. */
static void cd_geometry(const er_window *g, const er_vec_ops *ops, int64_t *hp, int64_t *wpa, int64_t *row_blocks) {
  int rows = ops->cd_rows;
  *row_blocks = (g->oh + rows - 1) / rows;
  *hp = *row_blocks * rows + g->kh - 1;
  int64_t ox_end = (g->ow + ops->vn - 1) / ops->vn * ops->vn;
  *wpa = (ox_end + g->kw - 1 + 15) / 16 * 16;
}

/* Every dim known but perhaps the batch (models exported with a symbolic
 * batch are compiled before it is known). */
static bool known_but_batch(const er_tensor *t) {
  if (t->rank < 1) return false;
  for (int d = 1; d < t->rank; d++)
    if (t->dims[d] < 0) return false;
  return true;
}

/* Whether the direct kernel takes this geometry: stride 1, a window of
 * at least two taps, few channels in nearly whole blocks of 8, short
 * patches, rows that fill the vectors, and a padded image that fits. */
static bool cd_fits(const er_window *g, const er_vec_ops *ops) {
  if (g->group != 1 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->kh * g->kw < 2) return false;
  int64_t m = g->m, k = g->c * g->kh * g->kw;
  if (m > CD_MAX_M || k > CD_MAX_K || g->ow <= 0 || g->oh <= 0) return false;
  /* Blocks of 8 channels and vectors of columns at least 3/4 full. */
  int64_t mblocks = (m + ER_CD_MB - 1) / ER_CD_MB, vecs = (g->ow + ops->vn - 1) / ops->vn;
  if (4 * m < 3 * mblocks * ER_CD_MB || 4 * g->ow < 3 * vecs * ops->vn) return false;
  int64_t hp, wpa, rb;
  cd_geometry(g, ops, &hp, &wpa, &rb);
  return g->c * hp * wpa <= CD_MAX_PADDED_FLOATS;
}

/* One group, every stride and dilation 1 (absent attributes are 1). */
static bool dense_unit_steps(const er_kernel_info *ki) {
  er_kctx ctx = er__ki_ctx(ki);
  int64_t group = 1;
  const int64_t *st, *dl;
  int64_t nst, ndl;
  if (er__attr_int(&ctx, "group", 1, &group) != ER_STATUS_OK || group != 1) return false;
  if (er__attr_ints(&ctx, "strides", &st, &nst) != ER_STATUS_OK ||
      er__attr_ints(&ctx, "dilations", &dl, &ndl) != ER_STATUS_OK)
    return false;
  for (int64_t i = 0; st && i < nst; i++)
    if (st[i] != 1) return false;
  for (int64_t i = 0; dl && i < ndl; i++)
    if (dl[i] != 1) return false;
  return true;
}

/* Constant 2-D weights the direct kernel could take at some size. */
static bool cd_weights_ok(const er_kernel_info *ki) {
  const er_tensor *x = ki->in[0], *w = ki->in[1];
  if (x->rank != 4 || w->rank != 4 || !w->data || !er__tensor_shape_known(w) || !dense_unit_steps(ki)) return false;
  return w->dims[0] <= CD_MAX_M && w->dims[1] * w->dims[2] * w->dims[3] <= CD_MAX_K &&
         w->dims[2] * w->dims[3] >= 2;
}

static bool cd_supports(const er_kernel_info *ki, const er_vec_ops *ops, bool isa_ok) {
  if (!isa_ok || !conv_common_ok(ki, is_fused(ki))) return false;
  const er_tensor *x = ki->in[0], *w = ki->in[1], *y = ki->out[0];
  if (x->rank != 4 || !w->data || !er__tensor_shape_known(w) || !known_but_batch(y)) return false;
  er_kctx ctx = er__ki_ctx(ki);
  er_window g;
  if (!known_but_batch(x) || !er__window_get(&ctx, x, w, y, &g)) return false;
  return cd_fits(&g, ops);
}

static er_status cd_prepare(const er_kernel_info *ki, const er_vec_ops *ops, void **state_out, size_t *scratch_out) {
  cd_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a Conv kernel");
  er_kctx ctx = er__ki_ctx(ki);
  const er_tensor *x = ki->in[0], *w = ki->in[1], *y = ki->out[0];
  s->ops = ops;
  s->act = node_act(&ctx);
  s->m = w->dims[0];
  s->k = w->dims[1] * w->dims[2] * w->dims[3];
  int64_t mblocks = (s->m + ER_CD_MB - 1) / ER_CD_MB;
  s->wp = er__aligned_alloc((size_t)(mblocks * s->k * ER_CD_MB) * sizeof(float));
  if (!s->wp) {
    free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "Conv '%s': out of memory packing weights", ki->node->name);
  }
  const float *wd = w->data;
  for (int64_t mb = 0; mb < mblocks; mb++)
    for (int64_t kk = 0; kk < s->k; kk++)
      for (int j = 0; j < ER_CD_MB; j++) {
        int64_t m = mb * ER_CD_MB + j;
        s->wp[(mb * s->k + kk) * ER_CD_MB + j] = m < s->m ? wd[m * s->k + kk] : 0.0f;
      }
  er_window g;
  *scratch_out = 0;
  if (er__window_get(&ctx, x, w, y, &g)) {
    int64_t hp, wpa, rb;
    cd_geometry(&g, ops, &hp, &wpa, &rb);
    *scratch_out = (size_t)(g.c * hp * wpa) * sizeof(float);
  }
  *state_out = s;
  return ER_STATUS_OK;
}

static void cd_release(void *state) {
  cd_state *s = state;
  if (!s) return;
  er__aligned_free(s->wp);
  free(s);
}

static void cd_chunk(void *arg, int64_t begin, int64_t end) {
  const struct cd_job_s *j = arg;
  j->ops->conv_direct(&j->d, begin, end);
}

static er_status cd_run(const er_kernel_run *kr) {
  const cd_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *b = er__in(ctx, 2), *z = er__in(ctx, 3);
  er_tensor *y = ctx->out[0];
  er_window g;
  if (!er__window_get(ctx, x, w, y, &g) || g.group != 1 || g.m != s->m || g.c * g.kh * g.kw != s->k ||
      g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1)
    return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  int64_t hp, wpa, rb;
  cd_geometry(&g, s->ops, &hp, &wpa, &rb);
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, (size_t)(g.c * hp * wpa) * sizeof(float), &scratch, &slots, &owned));
  float *xp = scratch;
  /* Zero once; each image then overwrites only its own pixels. */
  memset(xp, 0, (size_t)(g.c * hp * wpa) * sizeof(float));
  int64_t r0 = g.pt < hp ? g.pt : hp, r1 = g.pt + g.h < hp ? g.pt + g.h : hp;
  int64_t lead = g.pl < wpa ? g.pl : wpa, cols = g.w < wpa - lead ? g.w : wpa - lead;
  int64_t mblocks = (g.m + ER_CD_MB - 1) / ER_CD_MB, units = mblocks * rb;
  int64_t macs = g.m * s->k * g.oh * g.ow;
  /* About 64k multiply-adds per unit of work a second thread takes. */
  int64_t grain = max64(1, (INT64_C(1) << 16) / max64(1, macs / units));
  for (int64_t n = 0; n < g.n; n++) {
    const float *xn = (const float *)x->data + n * g.c * g.h * g.w;
    for (int64_t c = 0; c < g.c; c++)
      for (int64_t r = r0; r < r1; r++)
        memcpy(xp + (c * hp + r) * wpa + lead, xn + (c * g.h + r - g.pt) * g.w, (size_t)cols * sizeof(float));
    struct cd_job_s job = {s->ops,
                           {xp, g.c, hp, wpa, g.kh, g.kw, g.m, g.oh, g.ow, s->wp, b ? b->data : NULL,
                            z ? (const float *)z->data + n * g.m * g.oh * g.ow : NULL,
                            (float *)y->data + n * g.m * g.oh * g.ow, s->act, rb}};
    er__parallel_for(kr->pool, units, grain, cd_chunk, &job);
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Winograd F(2x2, 3x3)                                                      */
/* ======================================================================== */

/* 3x3 stride-1 convolutions as 16 GEMMs over 4x4 input tiles (Lavin and
 * Gray): Y = A^T [ (G g G^T) .* (B^T d B) ] A per 2x2 output tile, so each
 * output costs 16 / 4 = 4 multiply-adds per input channel instead of 9.
 * U_t = (G g G^T)_t [M, C] is packed once per t as a GEMM left-hand side;
 * per chunk of tiles the input transform writes V_t [C, tiles] straight
 * into the right-hand packing layout, 16 GEMMs (one per t, spread over the
 * workers) give M_t = U_t V_t, and the output transform adds bias and
 * residual and applies the activation. F(2x2, 3x3)'s transforms hold only
 * 0, +-1 and 1/2, so its rounding error stays within a few times that of
 * the direct sum. Tiles are chunked so that V and M stay in the last-level
 * cache. */

/* Bytes of V and M one chunk of tiles may use. */
#define WINO_CHUNK_BYTES (INT64_C(4) << 20)
/* At or below these channel counts the transforms cost more than they
 * save (measured: the Fashion-MNIST CNN's 16 -> 32 layer at 14x14 took 33
 * us in F(2x2) and 22 us direct at batch 1, 545 and 323 us at batch 16;
 * YOLOv8n's 16 -> 16 layers and the detector's ran as fast either way). */
#define WINO_FEW_CHANNELS 16

typedef struct wino_state {
  const er_sgemm_isa *isa;
  const er_vec_ops *ops;
  int tile;           /* output tile: 2 (F(2x2,3x3)) or 4 (F(4x4,3x3)) */
  int mats;           /* (tile + 2)^2 products */
  er_activation act;
  float *u;           /* `mats` packed [M, C] matrices, u_stride floats apart */
  size_t u_stride;
  int64_t m, c;
  int slots;
  /* Output size unknown at load (F(4x4) only): where a run's size makes
   * F(4x4) compute mostly padding tiles, F(2x2) or the GEMM, their
   * weights transformed or packed by the first run that needs them (so
   * memory goes only to the forms a model's sizes use). `gemm` is the
   * GEMM's state without weights; the rest is published through the
   * atomics (F(2x2)'s U has u_stride too). */
  conv_state *gemm;
  _Atomic(float *) u2;
  _Atomic(float *) gemm_w;
} wino_state;

/* Panel-rounded GEMM columns times products: the work of each form. */
static int64_t wino_work(int64_t oh, int64_t ow, int tile) {
  int64_t tiles = ((oh + tile - 1) / tile) * ((ow + tile - 1) / tile);
  return (int64_t)(tile + 2) * (tile + 2) * ((tiles + 31) / 32 * 32);
}

/* Whether the tile-`tile` form pays at this output size: the products
 * over the tiles (rounded up to whole 32-wide panels) against 9 over the
 * pixels, with a margin for the transforms; F(4x4) only where it beats
 * F(2x2) by the same margin. Small images (7x7: 16 tiles) stay with the
 * direct GEMM. */
static bool wino_worth(int64_t oh, int64_t ow, int tile) {
  int64_t direct = 9 * oh * ow;
  int64_t w2 = wino_work(oh, ow, 2), w4 = wino_work(oh, ow, 4);
  if (tile == 4) return 4 * w4 < 3 * direct && 4 * w4 < 3 * w2;
  return 4 * w2 < 3 * direct;
}

static bool wino_supports(const er_kernel_info *ki, bool isa_ok, int tile) {
  if (!isa_ok || !conv_common_ok(ki, is_fused(ki))) return false;
  const er_tensor *x = ki->in[0], *w = ki->in[1];
  if (x->rank != 4 || !w->data || !er__tensor_shape_known(w)) return false;
  if (w->dims[2] != 3 || w->dims[3] != 3 || w->dims[0] <= WINO_FEW_CHANNELS || w->dims[1] <= WINO_FEW_CHANNELS ||
      !dense_unit_steps(ki))
    return false;
  const er_tensor *y = ki->out[0];
  if (y->rank != 4) return false;
  /* Image size unknown until run time (detectors exported with a free
   * height and width): F(4x4), which wins on the images such models take,
   * with the GEMM for the small maps deep in the network (wino_run);
   * F(2x2) is chosen only when the size is known. */
  if (y->dims[2] < 0 || y->dims[3] < 0) return tile == 4;
  return wino_worth(y->dims[2], y->dims[3], tile);
}

/* The chunk of tiles and the scratch layout for a given geometry. */
typedef struct wino_plan {
  int64_t th, tw, tiles, chunk;   /* chunk: tiles per pass, a multiple of 32 */
  size_t v_stride, m_stride;      /* floats */
  size_t slot_floats;             /* input-transform rows per worker */
  size_t total_floats;            /* V + M + slots */
} wino_plan;

static void wino_plan_make(const wino_state *s, const er_window *g, int slots, wino_plan *p) {
  p->th = (g->oh + s->tile - 1) / s->tile;
  p->tw = (g->ow + s->tile - 1) / s->tile;
  p->tiles = p->th * p->tw;
  int64_t per_tile = s->mats * (s->c + s->m) * (int64_t)sizeof(float);
  /* A multiple of 32, so of every ISA's panel width. */
  int64_t chunk = WINO_CHUNK_BYTES / per_tile / 32 * 32;
  if (chunk < 32) chunk = 32;
  int64_t all = (p->tiles + 31) / 32 * 32;
  p->chunk = chunk < all ? chunk : all;
  p->v_stride = (size_t)(s->c * p->chunk);
  p->m_stride = (size_t)(s->m * p->chunk);
  p->slot_floats = (er__wino_scratch_floats(p->tw, s->ops->vn, s->tile, p->chunk) + 15) / 16 * 16;
  p->total_floats = (size_t)s->mats * (p->v_stride + p->m_stride) + (size_t)slots * p->slot_floats;
}

/* U = G g G^T of every (output, input) channel pair for F(tile x tile,
 * 3x3): (tile + 2)^2 matrices [M, C], each packed as the GEMM's A, *stride
 * floats apart. NULL when out of memory. */
static float *wino_make_u(const er_sgemm_isa *isa, const er_vec_ops *ops, const float *wd, int64_t mm, int64_t cc,
                          int tile, size_t *stride) {
  const int a = tile + 2, mats = a * a;
  *stride = (er__sgemm_packed_a_floats(isa, mm, cc) + 15) / 16 * 16;
  float *u_out = er__aligned_alloc((size_t)mats * *stride * sizeof(float));
  float *tmp = malloc((size_t)(mats * mm * cc) * sizeof *tmp);
  if (!u_out || !tmp) {
    er__aligned_free(u_out);
    free(tmp);
    return NULL;
  }
  ops->wino_weights(wd, mm, cc, tile, tmp);
  for (int t = 0; t < mats; t++)
    er__sgemm_pack_a(isa, tmp + (size_t)t * (size_t)(mm * cc), cc, 1, mm, cc, 1.0f, u_out + (size_t)t * *stride);
  free(tmp);
  return u_out;
}

/* Transformed weights shared by the nodes that convolve with one weight
 * tensor: detection heads apply the same towers to every pyramid level
 * (an FCOS head's eight 128 x 128 3x3 layers at three levels held 24
 * copies of 2.4 MB U, 57 MB, and transformed each at load). Entries are
 * found by shape and a 64-bit hash of the weights' contents (not their
 * address, which a freed session's folded weights could pass on to other
 * ones), and freed with their last user; any session on any thread may
 * share them, so two sessions of one model share theirs too. */
typedef struct wino_u_entry {
  const er_sgemm_isa *isa;
  uint64_t hash;
  int64_t m, c;
  int tile;
  float *u;
  size_t stride;
  int refs;
  struct wino_u_entry *next;
} wino_u_entry;

/* The list's lock: a spin lock held only to walk and link the list (the
 * kernel files compile for every target without pthread.h). */
static atomic_flag wino_u_busy = ATOMIC_FLAG_INIT;
static wino_u_entry *wino_u_list;

static void wino_u_lock(void) {
  while (atomic_flag_test_and_set_explicit(&wino_u_busy, memory_order_acquire)) {
  }
}

static void wino_u_unlock(void) { atomic_flag_clear_explicit(&wino_u_busy, memory_order_release); }

/* A 64-bit multiply-xorshift hash of n floats' bits: four independent
 * chains over interleaved 8-byte words (one chain's multiply latency
 * bounded it: 1 ms of fast_style's session), folded together at the end. */
static uint64_t hash_floats(const float *p, size_t n) {
  const uint64_t k = 0x9e3779b97f4a7c15ull;
  uint64_t h[4] = {0x243f6a8885a308d3ull ^ (uint64_t)n, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                   0x082efa98ec4e6c89ull};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 4; l++) {
      uint64_t w;
      memcpy(&w, p + i + 2 * l, sizeof w);
      h[l] = (h[l] ^ w) * k;
      h[l] ^= h[l] >> 29;
    }
  for (; i < n; i++) {
    uint32_t w;
    memcpy(&w, p + i, sizeof w);
    h[0] = (h[0] ^ w) * k;
    h[0] ^= h[0] >> 29;
  }
  uint64_t r = h[0];
  for (int l = 1; l < 4; l++) {
    r = (r ^ h[l]) * k;
    r ^= r >> 29;
  }
  return r;
}

static wino_u_entry *wino_u_find(const er_sgemm_isa *isa, uint64_t hash, int64_t mm, int64_t cc, int tile) {
  for (wino_u_entry *e = wino_u_list; e; e = e->next)
    if (e->isa == isa && e->hash == hash && e->m == mm && e->c == cc && e->tile == tile) return e;
  return NULL;
}

static float *wino_u_get(const er_sgemm_isa *isa, const er_vec_ops *ops, const float *wd, int64_t mm, int64_t cc,
                         int tile, size_t *stride) {
  const uint64_t hash = hash_floats(wd, (size_t)(mm * cc * 9));
  wino_u_lock();
  wino_u_entry *e = wino_u_find(isa, hash, mm, cc, tile);
  if (e) {
    e->refs++;
    *stride = e->stride;
    wino_u_unlock();
    return e->u;
  }
  wino_u_unlock();
  /* Made outside the lock (tens of milliseconds for large layers); a
   * racing maker of the same U keeps the first one inserted. */
  float *u = wino_make_u(isa, ops, wd, mm, cc, tile, stride);
  wino_u_entry *made = u ? malloc(sizeof *made) : NULL;
  if (!made) {
    er__aligned_free(u);
    return NULL;
  }
  wino_u_lock();
  e = wino_u_find(isa, hash, mm, cc, tile);
  if (e) {
    e->refs++;
    *stride = e->stride;
    wino_u_unlock();
    er__aligned_free(u);
    free(made);
    return e->u;
  }
  *made = (wino_u_entry){isa, hash, mm, cc, tile, u, *stride, 1, wino_u_list};
  wino_u_list = made;
  wino_u_unlock();
  return u;
}

static void wino_u_put(float *u) {
  if (!u) return;
  wino_u_lock();
  for (wino_u_entry **p = &wino_u_list; *p; p = &(*p)->next) {
    wino_u_entry *e = *p;
    if (e->u != u) continue;
    if (--e->refs == 0) {
      *p = e->next;
      er__aligned_free(e->u);
      free(e);
    }
    break;
  }
  wino_u_unlock();
}

static void wino_release(void *state) {
  wino_state *s = state;
  if (!s) return;
  conv_gemm_release(s->gemm);
  er__aligned_free(atomic_load(&s->u2));
  er__aligned_free(atomic_load(&s->gemm_w));
  wino_u_put(s->u);
  free(s);
}

static er_status wino_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, const er_vec_ops *ops, int tile,
                              void **state_out, size_t *scratch_out) {
  wino_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a Conv kernel");
  er_kctx ctx = er__ki_ctx(ki);
  const er_tensor *w = ki->in[1];
  s->isa = isa;
  s->ops = ops;
  s->tile = tile;
  s->mats = (tile + 2) * (tile + 2);
  s->act = node_act(&ctx);
  s->slots = er__ki_slots(ki);
  s->m = w->dims[0];
  s->c = w->dims[1];
  const float *wd = w->data;
  s->u = wino_u_get(isa, ops, wd, s->m, s->c, tile, &s->u_stride);
  if (!s->u) {
    free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "Conv '%s': out of memory transforming weights", ki->node->name);
  }
  const er_tensor *y = ki->out[0];
  if (tile == 4 && y->rank == 4 && (y->dims[2] < 0 || y->dims[3] < 0)) {
    /* The GEMM's state without weights (conv_gemm_prepare would pack
     * them both ways for an unknown size); a run packs them once if a
     * size needs them (wino_gemm_weights). */
    const er_tensor *in[8];
    er_tensor w_nodata = *w;
    w_nodata.data = NULL;
    int n_in = ki->n_in < 8 ? ki->n_in : 8;
    for (int i = 0; i < n_in; i++) in[i] = ki->in[i];
    in[1] = &w_nodata;
    er_kernel_info gki = *ki;
    gki.n_in = n_in;
    gki.in = in;
    size_t gscratch = 0;
    void *gs = NULL;
    er_status st = conv_gemm_prepare(&gki, isa, ops, &gs, &gscratch);
    if (st != ER_STATUS_OK) {
      wino_release(s);
      return st;
    }
    s->gemm = gs;
  }
  *scratch_out = 0;
  er_window g;
  if (er__tensor_shape_known(ki->in[0]) && er__tensor_shape_known(ki->out[0]) &&
      er__window_get(&ctx, ki->in[0], w, ki->out[0], &g)) {
    wino_plan p;
    wino_plan_make(s, &g, s->slots, &p);
    *scratch_out = p.total_floats * sizeof(float);
  }
  *state_out = s;
  return ER_STATUS_OK;
}


typedef struct wino_job {
  const wino_state *s;
  const er_wino *w;
  const wino_plan *p;
  float *slots;       /* input-transform rows, one slot per chunk */
  int64_t count;      /* channels or output channels split */
  int chunks;
  bool per_thread;    /* input-transform slot per thread (er__pool_slot), else per chunk */
} wino_job;

static void wino_in_chunk(void *arg, int64_t begin, int64_t end) {
  const wino_job *j = arg;
  for (int64_t c = begin; c < end; c++) {
    int64_t slot = j->per_thread ? er__pool_slot() : c;
    (j->s->tile == 4 ? j->s->ops->wino4_input : j->s->ops->wino_input)(
        j->w, j->count * c / j->chunks, j->count * (c + 1) / j->chunks, j->slots + (size_t)slot * j->p->slot_floats);
  }
}

static void wino_gemm_chunk(void *arg, int64_t begin, int64_t end) {
  const wino_job *j = arg;
  for (int64_t t = begin; t < end; t++) {
    er_gemm_problem gp;
    memset(&gp, 0, sizeof gp);
    gp.isa = j->s->isa;
    gp.m = j->s->m;
    gp.n = j->w->tn;
    gp.k = j->s->c;
    gp.a.packed = j->s->u + (size_t)t * j->s->u_stride;
    gp.b.packed = j->w->v + (size_t)t * j->w->v_stride;
    gp.scale = 1.0f;
    gp.c = (float *)j->w->mo + (size_t)t * j->w->m_stride;
    gp.ldc = j->w->tn;
    er__sgemm_run(&gp, NULL, NULL, 1);
  }
}

static void wino_out_chunk(void *arg, int64_t begin, int64_t end) {
  const wino_job *j = arg;
  (j->s->tile == 4 ? j->s->ops->wino4_output : j->s->ops->wino_output)(j->w, begin, end);
}

/* The GEMM's view of weights packed by wino_lazy: pixel-major when the
 * output channels fill whole panels (small maps have few pixels). */
static void wino_gemm_view(const wino_state *s, float *packed, conv_state *cs) {
  cs->pixel_major = s->m % s->isa->nr == 0;
  cs->packed_w = packed;
  cs->gstride = ((cs->pixel_major ? er__sgemm_packed_b_floats(s->isa, s->c * 9, s->m)
                                  : er__sgemm_packed_a_floats(s->isa, s->m, s->c * 9)) + 15) / 16 * 16;
  cs->m = s->m;
  cs->kg = s->c * 9;
  cs->group = 1;
}

/* F(2x2)'s U (tile 2) or the GEMM's packed weights (tile 0), built by the
 * first run that needs them; NULL when out of memory. Runs that race to
 * build them each build a copy and publish it with a compare-and-swap; the
 * losers free theirs (no lock: this happens once per layer and size). */
static float *wino_lazy(const wino_state *cs, int tile, const float *wd) {
  wino_state *s = (wino_state *)cs;  /* only the atomic members change */
  _Atomic(float *) *slot = tile == 2 ? &s->u2 : &s->gemm_w;
  float *p = atomic_load_explicit(slot, memory_order_acquire);
  if (p || !wd) return p;
  if (tile == 2) {
    size_t stride;
    p = wino_make_u(s->isa, s->ops, wd, s->m, s->c, 2, &stride);
  } else {
    conv_state tmp = *s->gemm;
    wino_gemm_view(s, NULL, &tmp);
    if (conv_pack_weights(&tmp, s->isa, wd, 1, s->m, s->c * 9)) p = tmp.packed_w;
  }
  if (!p) return NULL;
  float *expected = NULL;
  if (!atomic_compare_exchange_strong_explicit(slot, &expected, p, memory_order_acq_rel, memory_order_acquire)) {
    er__aligned_free(p);
    p = expected;
  }
  return p;
}

static er_status wino_run(const er_kernel_run *kr) {
  const wino_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *b = er__in(ctx, 2), *z = er__in(ctx, 3);
  er_tensor *y = ctx->out[0];
  er_window g;
  if (!er__window_get(ctx, x, w, y, &g) || g.c != s->c || g.m != s->m || g.kh != 3 || g.kw != 3 || g.sh != 1 ||
      g.sw != 1 || g.dh != 1 || g.dw != 1 || g.group != 1)
    return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  if (s->gemm && !wino_worth(g.oh, g.ow, s->tile)) {
    /* The size was unknown at load and F(4x4) does not pay at this one:
     * F(2x2) where it does, else the GEMM (F(4x4) after all if memory
     * for their weights runs out: slower, never wrong). */
    if (wino_worth(g.oh, g.ow, 2)) {
      float *u2 = wino_lazy(s, 2, kr->ctx->in[1]->data);
      if (u2) {
        wino_state s2 = *s;
        s2.tile = 2;
        s2.mats = 16;
        s2.u = u2;
        s2.gemm = NULL;
        er_kernel_run wkr = *kr;
        wkr.state = &s2;
        return wino_run(&wkr);
      }
    } else {
      float *pw = wino_lazy(s, 0, kr->ctx->in[1]->data);
      if (pw) {
        conv_state cs = *s->gemm;
        wino_gemm_view(s, pw, &cs);
        er_kernel_run gkr = *kr;
        gkr.state = &cs;
        return conv_gemm_run(&gkr);
      }
    }
  }
  int workers = er__pool_threads(kr->pool);
  if (workers > ER_KERNEL_MAX_SLOTS) workers = ER_KERNEL_MAX_SLOTS;
  wino_plan p;
  wino_plan_make(s, &g, workers, &p);
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  /* One allocation for V, M and every worker's rows: ask for it as one slot. */
  ER_CHECK(er__kr_scratch(kr, p.total_floats * sizeof(float), &scratch, &slots, &owned));
  float *v = scratch, *mo = v + (size_t)s->mats * p.v_stride, *rows = mo + (size_t)s->mats * p.m_stride;
  for (int64_t n = 0; n < g.n; n++) {
    for (int64_t t0 = 0; t0 < p.tiles; t0 += p.chunk) {
      er_wino wj;
      memset(&wj, 0, sizeof wj);
      wj.x = (const float *)x->data + n * g.c * g.h * g.w;
      wj.c = g.c, wj.h = g.h, wj.w = g.w, wj.oh = g.oh, wj.ow = g.ow, wj.pt = g.pt, wj.pl = g.pl;
      wj.tw = p.tw;
      wj.t0 = t0;
      wj.tn = p.tiles - t0 < p.chunk ? p.tiles - t0 : p.chunk;
      wj.chunk = p.chunk;
      wj.v = v;
      wj.nr = s->isa->nr;
      wj.v_stride = p.v_stride;
      wj.mo = mo;
      wj.m_stride = (size_t)(g.m * wj.tn);
      wj.m = g.m;
      wj.y = (float *)y->data + n * g.m * g.oh * g.ow;
      wj.bias = b ? b->data : NULL;
      wj.add = z ? (const float *)z->data + n * g.m * g.oh * g.ow : NULL;
      wj.act = s->act;
      /* The last panel's columns past the chunk's tiles: zeros. */
      int64_t nr = s->isa->nr, tail = wj.tn % nr;
      if (tail)
        for (int t = 0; t < s->mats; t++)
          for (int64_t c = 0; c < g.c; c++)
            memset(v + (size_t)t * p.v_stride + (size_t)(((wj.tn / nr) * g.c + c) * nr + tail), 0,
                   (size_t)(nr - tail) * sizeof(float));
      int64_t work = g.c * wj.tn;
      /* The plan has a rows slot for every thread of the pool: several
       * chunks per thread (see sgemm.c). */
      bool per_thread = workers > 1 && workers == er__pool_threads(kr->pool);
      int in_chunks = (int)min64(min64(per_thread ? 4 * (int64_t)workers : workers, g.c), max64(1, work >> 8));
      wino_job jin = {s, &wj, &p, rows, g.c, in_chunks, per_thread};
      er__parallel_for(kr->pool, in_chunks, 1, wino_in_chunk, &jin);
      wino_job jg = {s, &wj, &p, rows, s->mats, s->mats, false};
      er__parallel_for(kr->pool, s->mats, 1, wino_gemm_chunk, &jg);
      er__parallel_for(kr->pool, g.m, max64(1, 256 / max64(1, wj.tn)), wino_out_chunk, &jg);
    }
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* ConvTranspose                                                             */
/* ======================================================================== */

/* 2-D ConvTranspose as GEMM and col2im: per image, group and chunk of
 * input pixels, col [Mg * kh * kw, pixels] = W_g^T X_g (W_g^T packed once
 * as the GEMM's A), then every column adds its kh x kw window into Y,
 * which starts as the bias. The adds run per output channel (one worker
 * owns a channel's plane), chunk after chunk, so the order of the sums is
 * fixed. */

/* Bytes of column buffer one chunk of pixels may use. */
#define CONVT_COL_BYTES (INT64_C(2) << 20)

typedef struct convt_state {
  const er_sgemm_isa *isa;
  float *packed;      /* per group: W_g^T [Mg * kh * kw, Cg], gstride floats apart */
  size_t gstride;
  int64_t c, mg, kh, kw, group;
  int slots;
} convt_state;

typedef struct convt_geom {
  int64_t n, h, w, oh, ow;
  int64_t sh, sw, dh, dw, pt, pl;
} convt_geom;

/* Pads in force from the attributes and the output extents, as the
 * reference derives them: from output_shape or SAME_* as the split of the
 * total (halves rounded down), else the explicit pads. */
static bool convt_geom_get(const er_kctx *ctx, const convt_state *s, const er_tensor *x, const er_tensor *y,
                           convt_geom *g) {
  const int64_t *st, *dl, *pads, *os, *op;
  int64_t nst, ndl, npads, nos, nop;
  const char *ap;
  if (er__attr_ints(ctx, "strides", &st, &nst) != ER_STATUS_OK ||
      er__attr_ints(ctx, "dilations", &dl, &ndl) != ER_STATUS_OK ||
      er__attr_ints(ctx, "pads", &pads, &npads) != ER_STATUS_OK ||
      er__attr_ints(ctx, "output_shape", &os, &nos) != ER_STATUS_OK ||
      er__attr_ints(ctx, "output_padding", &op, &nop) != ER_STATUS_OK ||
      er__attr_string(ctx, "auto_pad", "NOTSET", &ap) != ER_STATUS_OK)
    return false;
  if ((st && nst != 2) || (dl && ndl != 2) || (pads && npads != 4) || (op && nop != 2)) return false;
  g->n = x->dims[0];
  g->h = x->dims[2];
  g->w = x->dims[3];
  g->oh = y->dims[2];
  g->ow = y->dims[3];
  int64_t s2[2] = {st ? st[0] : 1, st ? st[1] : 1}, d2[2] = {dl ? dl[0] : 1, dl ? dl[1] : 1};
  int64_t in[2] = {g->h, g->w}, out[2] = {g->oh, g->ow}, k[2] = {s->kh, s->kw}, pb[2];
  bool upper = strcmp(ap, "SAME_UPPER") == 0, same = upper || strcmp(ap, "SAME_LOWER") == 0;
  for (int a = 0; a < 2; a++) {
    if (os || same) {
      int64_t full = s2[a] * (in[a] > 0 ? in[a] - 1 : 0) + (op ? op[a] : 0) + (k[a] - 1) * d2[a] + 1;
      int64_t total = full - out[a], half = total >= 0 ? total / 2 : -((1 - total) / 2);
      pb[a] = upper ? half : total - half;
    } else {
      pb[a] = strcmp(ap, "VALID") == 0 || !pads ? 0 : pads[a];
    }
  }
  g->sh = s2[0], g->sw = s2[1], g->dh = d2[0], g->dw = d2[1], g->pt = pb[0], g->pl = pb[1];
  return g->sh > 0 && g->sw > 0 && g->dh > 0 && g->dw > 0;
}

static bool convt_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !er__ki_f32(ki, 0) || !er__ki_f32(ki, 1) || !er__ki_out_f32(ki)) return false;
  if (ki->n_in > 2 && ki->in[2] && ki->in[2]->dtype != ER_DTYPE_FLOAT) return false;
  const er_tensor *x = ki->in[0], *w = ki->in[1];
  if (x->rank != 4 || w->rank != 4 || !w->data || !er__tensor_shape_known(w)) return false;
  er_kctx ctx = er__ki_ctx(ki);
  int64_t group = 1;
  return er__window_attrs_ok(&ctx, 4) && er__attr_int(&ctx, "group", 1, &group) == ER_STATUS_OK && group >= 1 &&
         w->dims[0] % group == 0;
}

static er_status convt_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, void **state_out,
                               size_t *scratch_out) {
  convt_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a ConvTranspose kernel");
  er_kctx ctx = er__ki_ctx(ki);
  const er_tensor *w = ki->in[1];
  er__attr_int(&ctx, "group", 1, &s->group);
  s->isa = isa;
  s->slots = er__ki_slots(ki);
  s->c = w->dims[0];
  s->mg = w->dims[1];
  s->kh = w->dims[2];
  s->kw = w->dims[3];
  int64_t cg = s->c / s->group, rows = s->mg * s->kh * s->kw;
  s->gstride = (er__sgemm_packed_a_floats(isa, rows, cg) + 15) / 16 * 16;
  s->packed = er__aligned_alloc(s->gstride * (size_t)s->group * sizeof(float));
  if (!s->packed) {
    free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "ConvTranspose '%s': out of memory packing weights", ki->node->name);
  }
  /* W_g [Cg, Mg * kh * kw] row-major; its transpose is the GEMM's A. */
  for (int64_t gi = 0; gi < s->group; gi++)
    er__sgemm_pack_a(isa, (const float *)w->data + gi * cg * rows, 1, rows, rows, cg, 1.0f,
                     s->packed + (size_t)gi * s->gstride);
  *scratch_out = 0;
  *state_out = s;
  return ER_STATUS_OK;
}

static void convt_release(void *state) {
  convt_state *s = state;
  if (!s) return;
  er__aligned_free(s->packed);
  free(s);
}

typedef struct convt_job {
  const convt_state *s;
  const convt_geom *g;
  const float *col;   /* [Mg * kh * kw, pc] */
  int64_t p0, pc;     /* input pixels of this chunk */
  float *y;           /* this image and group's [Mg, OH, OW] */
} convt_job;

static void convt_col2im(void *arg, int64_t m0, int64_t m1) {
  const convt_job *j = arg;
  const convt_geom *g = j->g;
  const convt_state *s = j->s;
  for (int64_t m = m0; m < m1; m++) {
    float *ym = j->y + m * g->oh * g->ow;
    for (int64_t ky = 0; ky < s->kh; ky++) {
      for (int64_t kx = 0; kx < s->kw; kx++) {
        const float *row = j->col + ((m * s->kh + ky) * s->kw + kx) * j->pc;
        int64_t xoff = kx * g->dw - g->pl; /* ox = ix * sw + xoff */
        int64_t lo = xoff >= 0 ? 0 : (-xoff + g->sw - 1) / g->sw;
        int64_t hi = g->ow - xoff > 0 ? (g->ow - xoff + g->sw - 1) / g->sw : 0;
        if (hi > g->w) hi = g->w;
        for (int64_t p = j->p0; p < j->p0 + j->pc;) {
          int64_t iy = p / g->w, ix0 = p % g->w;
          int64_t ix1 = g->w < ix0 + (j->p0 + j->pc - p) ? g->w : ix0 + (j->p0 + j->pc - p);
          int64_t oy = iy * g->sh - g->pt + ky * g->dh;
          if (oy >= 0 && oy < g->oh) {
            float *yr = ym + oy * g->ow + xoff;
            const float *src = row + (p - j->p0) - ix0;
            int64_t a = ix0 > lo ? ix0 : lo, b = ix1 < hi ? ix1 : hi;
            if (g->sw == 1)
              for (int64_t ix = a; ix < b; ix++) yr[ix] += src[ix];
            else
              for (int64_t ix = a; ix < b; ix++) yr[ix * g->sw] += src[ix];
          }
          p += ix1 - ix0;
        }
      }
    }
  }
}

static er_status convt_run(const er_kernel_run *kr) {
  const convt_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *b = er__in(ctx, 2);
  er_tensor *y = ctx->out[0];
  convt_geom g;
  if (w->dims[0] != s->c || w->dims[1] != s->mg || !convt_geom_get(ctx, s, x, y, &g) || x->dims[1] != s->c)
    return er__kr_reference(kr);
  int64_t m = y->dims[1], cg = s->c / s->group, rows = s->mg * s->kh * s->kw, hw = g.h * g.w;
  int64_t plane = g.oh * g.ow;
  /* Y starts as the bias. */
  float *yd = y->data;
  for (int64_t i = 0; i < g.n * m; i++) {
    float v = b ? ((const float *)b->data)[i % m] : 0.0f;
    for (int64_t q = 0; q < plane; q++) yd[i * plane + q] = v;
  }
  if (hw == 0 || rows == 0) return ER_STATUS_OK;
  int64_t pc = CONVT_COL_BYTES / (rows * (int64_t)sizeof(float));
  pc = pc < 32 ? 32 : pc;
  if (pc > hw) pc = hw;
  er_gemm_problem p;
  memset(&p, 0, sizeof p);
  p.isa = s->isa;
  p.m = rows;
  p.n = pc;
  p.k = cg;
  p.a.packed = s->packed;
  p.b.rs = hw;
  p.b.cs = 1;
  p.b.data = x->data; /* placeholder for sizing the scratch */
  p.scale = 1.0f;
  p.ldc = pc;
  size_t slot_floats = er__sgemm_scratch_floats(&p);
  int workers = er__pool_threads(kr->pool);
  if (workers > ER_KERNEL_MAX_SLOTS) workers = ER_KERNEL_MAX_SLOTS;
  size_t col_floats = ((size_t)(rows * pc) + 15) / 16 * 16;
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, (col_floats + (size_t)workers * slot_floats) * sizeof(float), &scratch, &slots,
                          &owned));
  float *col = scratch, *gemm_scratch = col + col_floats;
  for (int64_t n = 0; n < g.n; n++) {
    for (int64_t gi = 0; gi < s->group; gi++) {
      const float *xg = (const float *)x->data + (n * s->c + gi * cg) * hw;
      float *yg = yd + (n * m + gi * s->mg) * plane;
      for (int64_t p0 = 0; p0 < hw; p0 += pc) {
        int64_t n_px = hw - p0 < pc ? hw - p0 : pc;
        p.a.packed = s->packed + (size_t)gi * s->gstride;
        p.b.data = xg + p0;
        p.n = n_px;
        p.c = col;
        p.ldc = n_px;
        er__sgemm_run(&p, kr->pool, gemm_scratch, workers);
        convt_job j = {s, &g, col, p0, n_px, yg};
        er__parallel_for(kr->pool, s->mg, max64(1, 4096 / max64(1, rows / s->mg * n_px)), convt_col2im, &j);
      }
    }
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Depthwise convolution                                                     */
/* ======================================================================== */

typedef struct dw_state {
  const er_vec_ops *ops;
  er_activation act;
  int slots;
} dw_state;

static bool dw_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !conv_common_ok(ki, is_fused(ki))) return false;
  const er_tensor *w = ki->in[1];
  er_kctx ctx = er__ki_ctx(ki);
  int64_t group = 1;
  if (er__attr_int(&ctx, "group", 1, &group) != ER_STATUS_OK) return false;
  /* One filter per channel: W [C, 1, kh, kw] with group = C. */
  for (int d = 2; d < w->rank; d++)
    if (w->dims[d] > ER_DW_MAX_TAPS) return false;
  return group > 1 && w->dims[0] == group && w->dims[1] == 1;
}

static bool dw_args(const er_kernel_run *kr, const er_window *g, er_dw_args *a) {
  const er_kctx *ctx = kr->ctx;
  const dw_state *s = kr->state;
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *b = er__in(ctx, 2), *z = er__in(ctx, 3);
  memset(a, 0, sizeof *a);
  a->x = x->data;
  a->w = w->data;
  a->bias = b ? b->data : NULL;
  a->add = z ? z->data : NULL;
  a->y = ctx->out[0]->data;
  a->h = g->h;
  a->w_ = g->w;
  a->oh = g->oh;
  a->ow = g->ow;
  a->kh = g->kh;
  a->kw = g->kw;
  a->sh = g->sh;
  a->sw = g->sw;
  a->dh = g->dh;
  a->dw = g->dw;
  a->pt = g->pt;
  a->pl = g->pl;
  a->act = s->act;
  return g->group == g->c && g->m == g->c;
}

static er_status dw_prepare_common(const er_kernel_info *ki, const er_vec_ops *ops, void **state_out,
                                   size_t *scratch_out) {
  dw_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a Conv kernel");
  er_kctx ctx = er__ki_ctx(ki);
  s->ops = ops;
  s->act = node_act(&ctx);
  s->slots = er__ki_slots(ki);
  *scratch_out = 0;
  er_window g;
  const er_tensor *x = ki->in[0], *w = ki->in[1], *y = ki->out[0];
  if (er__tensor_shape_known(x) && er__tensor_shape_known(w) && er__tensor_shape_known(y) &&
      er__window_get(&ctx, x, w, y, &g)) {
    er_dw_args a;
    memset(&a, 0, sizeof a);
    a.oh = g.oh, a.ow = g.ow, a.kh = g.kh, a.kw = g.kw, a.sh = g.sh, a.sw = g.sw, a.dh = g.dh, a.dw = g.dw;
    /* Slots rounded as dw_run rounds them, so the run finds them all. */
    *scratch_out = (er__dw_scratch_floats(&a, ops->vn) + 15) / 16 * 16 * sizeof(float) * (size_t)s->slots;
  }
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct dw_job {
  const er_dw_args *a;
  const er_vec_ops *ops;
  float *scratch;
  size_t slot_floats;
  int64_t planes;     /* channels of one image */
  int chunks;
  bool per_thread;    /* scratch slot per thread (er__pool_slot), else per chunk */
} dw_job;

static void dw_chunk(void *arg, int64_t begin, int64_t end) {
  const dw_job *j = arg;
  for (int64_t c = begin; c < end; c++) {
    int64_t lo = j->planes * c / j->chunks, hi = j->planes * (c + 1) / j->chunks;
    int64_t slot = j->per_thread ? er__pool_slot() : c;
    j->ops->dw(j->a, lo, hi, j->scratch + (size_t)slot * j->slot_floats);
  }
}

static er_status dw_run(const er_kernel_run *kr) {
  const dw_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  er_window g;
  er_dw_args a;
  if (!er__window_get(ctx, ctx->in[0], ctx->in[1], ctx->out[0], &g) || !dw_args(kr, &g, &a) ||
      g.kh > ER_DW_MAX_TAPS || g.kw > ER_DW_MAX_TAPS || er__dw_ring_slots(&a) > ER_DW_RING_MAX)
    return er__kr_reference(kr);
  if (er__tensor_count(ctx->out[0]) == 0) return ER_STATUS_OK;
  size_t slot_floats = (er__dw_scratch_floats(&a, s->ops->vn) + 15) / 16 * 16;
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, slot_floats * sizeof(float), &scratch, &slots, &owned));
  int64_t work = g.c * g.oh * g.ow * g.kh * g.kw;
  /* With a slot for every thread, several chunks per thread (as in
   * sgemm.c: a slowed core holds back a fraction of its share). */
  bool per_thread = slots > 1 && slots >= er__pool_threads(kr->pool);
  int chunks = (int)min64(min64(per_thread ? 4 * (int64_t)slots : slots, g.c), max64(1, work >> 15));
  for (int64_t n = 0; n < g.n; n++) {
    er_dw_args an = a;
    an.x = a.x + n * g.c * g.h * g.w;
    an.y = a.y + n * g.c * g.oh * g.ow;
    if (a.add) an.add = a.add + n * g.c * g.oh * g.ow;
    dw_job j = {&an, s->ops, scratch, slot_floats, g.c, chunks, per_thread};
    er__parallel_for(kr->pool, chunks, 1, dw_chunk, &j);
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

#define DEFINE_CONV_KERNELS(OP, DOMAIN, PREFIX, SFX, TILE, ISA, SG, VO, ISA_OK)                               \
  static bool gemm_supports_##SFX(const er_kernel_info *ki) { return conv_gemm_supports(ki, &SG, ISA_OK(ki->cpu)); } \
  static er_status gemm_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {          \
    return conv_gemm_prepare(ki, &SG, &VO, st, scratch);                                                    \
  }                                                                                                    \
  static const er_cpu_kernel k_gemm_##SFX = {"f32_" PREFIX "conv_gemm_" TILE "__" ISA, OP, DOMAIN,               \
                                            gemm_supports_##SFX, gemm_prepare_##SFX, conv_gemm_run,    \
                                            conv_gemm_release};                                        \
  static bool dw_supports_##SFX(const er_kernel_info *ki) { return dw_supports(ki, ISA_OK(ki->cpu)); }  \
  static er_status dw_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {            \
    return dw_prepare_common(ki, &VO, st, scratch);                                                    \
  }                                                                                                    \
  static const er_cpu_kernel k_dw_##SFX = {"f32_" PREFIX "dwconv__" ISA, OP, DOMAIN, dw_supports_##SFX,          \
                                          dw_prepare_##SFX, dw_run, free};                                     \
  static bool wino_supports_##SFX(const er_kernel_info *ki) { return wino_supports(ki, ISA_OK(ki->cpu), 2); }    \
  static er_status wino_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                  \
    return wino_prepare(ki, &SG, &VO, 2, st, scratch);                                                         \
  }                                                                                                            \
  static const er_cpu_kernel k_wino_##SFX = {"f32_" PREFIX "conv_winograd_2x2_3x3__" ISA, OP, DOMAIN,           \
                                            wino_supports_##SFX, wino_prepare_##SFX, wino_run, wino_release};  \
  static bool wino4_supports_##SFX(const er_kernel_info *ki) { return wino_supports(ki, ISA_OK(ki->cpu), 4); }   \
  static er_status wino4_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                 \
    return wino_prepare(ki, &SG, &VO, 4, st, scratch);                                                         \
  }                                                                                                            \
  static const er_cpu_kernel k_wino4_##SFX = {"f32_" PREFIX "conv_winograd_4x4_3x3__" ISA, OP, DOMAIN,          \
                                             wino4_supports_##SFX, wino4_prepare_##SFX, wino_run, wino_release}; \
  static bool cd_supports_##SFX(const er_kernel_info *ki) { return cd_supports(ki, &VO, ISA_OK(ki->cpu)); }     \
  static er_status cd_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                    \
    return cd_prepare(ki, &VO, st, scratch);                                                                   \
  }                                                                                                            \
  static const er_cpu_kernel k_cd_##SFX = {"f32_" PREFIX "conv_direct_8x__" ISA, OP, DOMAIN, cd_supports_##SFX, \
                                          cd_prepare_##SFX, cd_run, cd_release};

/* The 16 x 16 tile's convolution kernels: the GEMM path of
 * DEFINE_CONV_KERNELS on er__sgemm_avx512_16, for the layers
 * narrow_tile_better picks. */
#define DEFINE_CONV_GEMM16_KERNEL(OP, DOMAIN, PREFIX, SFX)                                                        \
  static bool gemm16_supports_##SFX(const er_kernel_info *ki) {                                                    \
    return conv_gemm_supports(ki, &er__sgemm_avx512_16, er__cpu_has_avx512(ki->cpu)) &&                           \
           narrow_tile_better(ki, &er__sgemm_avx512, &er__sgemm_avx512_16);                                       \
  }                                                                                                                \
  static er_status gemm16_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                   \
    return conv_gemm_prepare(ki, &er__sgemm_avx512_16, &er__vec_avx512, st, scratch);                              \
  }                                                                                                                \
  static const er_cpu_kernel k_gemm16_##SFX = {"f32_" PREFIX "conv_gemm_16x16__avx512", OP, DOMAIN,               \
                                              gemm16_supports_##SFX, gemm16_prepare_##SFX, conv_gemm_run,         \
                                              conv_gemm_release};

#define DEFINE_CONVT_KERNEL(SFX, TILE, ISA, SG, ISA_OK)                                                  \
  static bool convt_supports_##SFX(const er_kernel_info *ki) { return convt_supports(ki, ISA_OK(ki->cpu)); } \
  static er_status convt_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {            \
    return convt_prepare(ki, &SG, st, scratch);                                                           \
  }                                                                                                       \
  static const er_cpu_kernel k_convt_##SFX = {"f32_conv_transpose_gemm_" TILE "__" ISA, "ConvTranspose", "", \
                                             convt_supports_##SFX, convt_prepare_##SFX, convt_run, convt_release};

#if defined(__x86_64__) || defined(__i386__)
DEFINE_CONVT_KERNEL(avx512, "14x32", "avx512", er__sgemm_avx512, er__cpu_has_avx512)
DEFINE_CONVT_KERNEL(avx2, "6x16", "avx2", er__sgemm_avx2, er__cpu_has_avx2)
DEFINE_CONV_KERNELS("Conv", "", "", conv_avx512, "14x32", "avx512", er__sgemm_avx512, er__vec_avx512, er__cpu_has_avx512)
DEFINE_CONV_KERNELS("FusedConv", ER_FUSED_DOMAIN, "fused_", fconv_avx512, "14x32", "avx512", er__sgemm_avx512, er__vec_avx512,
                    er__cpu_has_avx512)
DEFINE_CONV_GEMM16_KERNEL("Conv", "", "", conv)
DEFINE_CONV_GEMM16_KERNEL("FusedConv", ER_FUSED_DOMAIN, "fused_", fconv)
DEFINE_CONV_KERNELS("Conv", "", "", conv_avx2, "6x16", "avx2", er__sgemm_avx2, er__vec_avx2, er__cpu_has_avx2)
DEFINE_CONV_KERNELS("FusedConv", ER_FUSED_DOMAIN, "fused_", fconv_avx2, "6x16", "avx2", er__sgemm_avx2, er__vec_avx2,
                    er__cpu_has_avx2)
#endif
#if defined(__aarch64__)
static bool has_neon(const er_cpu_features *c) { return c->neon; }
DEFINE_CONVT_KERNEL(neon, "8x8", "neon", er__sgemm_neon, has_neon)
DEFINE_CONV_KERNELS("Conv", "", "", conv_neon, "8x8", "neon", er__sgemm_neon, er__vec_neon, has_neon)
DEFINE_CONV_KERNELS("FusedConv", ER_FUSED_DOMAIN, "fused_", fconv_neon, "8x8", "neon", er__sgemm_neon, er__vec_neon, has_neon)
#endif

const er_cpu_kernel *const er__kernels_conv[] = {
#if defined(__x86_64__) || defined(__i386__)
    &k_dw_conv_avx512,   &k_dw_fconv_avx512,   &k_wino4_conv_avx512, &k_wino4_fconv_avx512,
    &k_wino_conv_avx512, &k_wino_fconv_avx512, &k_cd_conv_avx512,   &k_cd_fconv_avx512,
    &k_gemm16_conv,      &k_gemm16_fconv,      &k_gemm_conv_avx512, &k_gemm_fconv_avx512,
    &k_dw_conv_avx2,     &k_dw_fconv_avx2,     &k_wino4_conv_avx2,  &k_wino4_fconv_avx2,
    &k_wino_conv_avx2,   &k_wino_fconv_avx2,   &k_cd_conv_avx2,     &k_cd_fconv_avx2,
    &k_gemm_conv_avx2,   &k_gemm_fconv_avx2,
    &k_convt_avx512,     &k_convt_avx2,
#endif
#if defined(__aarch64__)
    &k_dw_conv_neon,     &k_dw_fconv_neon,     &k_wino4_conv_neon,  &k_wino4_fconv_neon,
    &k_wino_conv_neon,   &k_wino_fconv_neon,   &k_cd_conv_neon,     &k_cd_fconv_neon,
    &k_gemm_conv_neon,   &k_gemm_fconv_neon,
    &k_convt_neon,
#endif
    NULL,
};
