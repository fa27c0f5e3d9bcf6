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
#include "kernels/conv-impl.h"

/* What both kernels accept: float32 tensors of rank 3 or 4 with
 * attributes the window code reads. */
bool er__kconv_conv_common_ok(const er_kernel_info *ki, bool fused) {
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

er_activation er__kconv_node_act(const er_kctx *ctx) {
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
  return er__kconv_conv_common_ok(ki, is_fused(ki));
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

/* Packs the weights [group][mg][kg] for s->pixel_major into s->packed_w. */
bool er__kconv_conv_pack_weights(conv_state *s, const er_sgemm_isa *isa, const float *w, int64_t group, int64_t mg,
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

er_status er__kconv_conv_gemm_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, const er_vec_ops *ops,
                                   void **state_out, size_t *scratch_out) {
  conv_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a Conv kernel");
  er_kctx ctx = er__ki_ctx(ki);
  s->isa = isa;
  s->ops = ops;
  s->act = er__kconv_node_act(&ctx);
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
    er_status st = er__kconv_cd_prepare(ki, ops, &s->cd, &cd_scratch);
    if (st != ER_STATUS_OK) {
      free(s);
      return st;
    }
  }
  if (w->data && er__tensor_shape_known(w) && group >= 1 && w->dims[0] % group == 0) {
    int64_t m = w->dims[0], kg = 1;
    for (int d = 1; d < w->rank; d++) kg *= w->dims[d];
    int64_t mg = m / group;
    if (!er__kconv_conv_pack_weights(s, isa, w->data, group, mg, kg)) {
      er__kconv_conv_gemm_release(s);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "Conv '%s': out of memory packing weights", ki->node->name);
    }
    if (s->decide_at_run) {
      s->gstride_pm = (er__sgemm_packed_b_floats(isa, kg, mg) + 15) / 16 * 16;
      s->packed_pm = er__aligned_alloc(s->gstride_pm * (size_t)group * sizeof(float));
      if (!s->packed_pm) {
        er__kconv_conv_gemm_release(s);
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

void er__kconv_conv_gemm_release(void *state) {
  conv_state *s = state;
  if (!s) return;
  cd_release(s->cd);
  er__aligned_free(s->packed_w);
  er__aligned_free(s->packed_pm);
  free(s);
}

er_status er__kconv_conv_gemm_run(const er_kernel_run *kr) {
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
  if (s->cd && er__kconv_cd_fits(&g, s->ops)) {
    er_kernel_run dkr = *kr;
    dkr.state = s->cd;
    return er__kconv_cd_run(&dkr);
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
/* Depthwise convolution                                                     */
/* ======================================================================== */

typedef struct dw_state {
  const er_vec_ops *ops;
  er_activation act;
  int slots;
} dw_state;

static bool dw_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !er__kconv_conv_common_ok(ki, is_fused(ki))) return false;
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
  s->act = er__kconv_node_act(&ctx);
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
    return er__kconv_conv_gemm_prepare(ki, &SG, &VO, st, scratch);                                                    \
  }                                                                                                    \
  static const er_cpu_kernel k_gemm_##SFX = {"f32_" PREFIX "conv_gemm_" TILE "__" ISA, OP, DOMAIN,               \
                                            gemm_supports_##SFX, gemm_prepare_##SFX, er__kconv_conv_gemm_run,    \
                                            er__kconv_conv_gemm_release};                                        \
  static bool dw_supports_##SFX(const er_kernel_info *ki) { return dw_supports(ki, ISA_OK(ki->cpu)); }  \
  static er_status dw_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {            \
    return dw_prepare_common(ki, &VO, st, scratch);                                                    \
  }                                                                                                    \
  static const er_cpu_kernel k_dw_##SFX = {"f32_" PREFIX "dwconv__" ISA, OP, DOMAIN, dw_supports_##SFX,          \
                                          dw_prepare_##SFX, dw_run, free};                                     \
  static bool wino_supports_##SFX(const er_kernel_info *ki) { return er__kconv_wino_supports(ki, ISA_OK(ki->cpu), 2); }    \
  static er_status wino_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                  \
    return er__kconv_wino_prepare(ki, &SG, &VO, 2, st, scratch);                                                         \
  }                                                                                                            \
  static const er_cpu_kernel k_wino_##SFX = {"f32_" PREFIX "conv_winograd_2x2_3x3__" ISA, OP, DOMAIN,           \
                                            wino_supports_##SFX, wino_prepare_##SFX, er__kconv_wino_run, er__kconv_wino_release};  \
  static bool wino4_supports_##SFX(const er_kernel_info *ki) { return er__kconv_wino_supports(ki, ISA_OK(ki->cpu), 4); }   \
  static er_status wino4_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                 \
    return er__kconv_wino_prepare(ki, &SG, &VO, 4, st, scratch);                                                         \
  }                                                                                                            \
  static const er_cpu_kernel k_wino4_##SFX = {"f32_" PREFIX "conv_winograd_4x4_3x3__" ISA, OP, DOMAIN,          \
                                             wino4_supports_##SFX, wino4_prepare_##SFX, er__kconv_wino_run, er__kconv_wino_release}; \
  static bool cd_supports_##SFX(const er_kernel_info *ki) { return er__kconv_cd_supports(ki, &VO, ISA_OK(ki->cpu)); }     \
  static er_status cd_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                    \
    return er__kconv_cd_prepare(ki, &VO, st, scratch);                                                                   \
  }                                                                                                            \
  static const er_cpu_kernel k_cd_##SFX = {"f32_" PREFIX "conv_direct_8x__" ISA, OP, DOMAIN, cd_supports_##SFX, \
                                          cd_prepare_##SFX, er__kconv_cd_run, cd_release};

/* The 16 x 16 tile's convolution kernels: the GEMM path of
 * DEFINE_CONV_KERNELS on er__sgemm_avx512_16, for the layers
 * narrow_tile_better picks. */
#define DEFINE_CONV_GEMM16_KERNEL(OP, DOMAIN, PREFIX, SFX)                                                        \
  static bool gemm16_supports_##SFX(const er_kernel_info *ki) {                                                    \
    return conv_gemm_supports(ki, &er__sgemm_avx512_16, er__cpu_has_avx512(ki->cpu)) &&                           \
           narrow_tile_better(ki, &er__sgemm_avx512, &er__sgemm_avx512_16);                                       \
  }                                                                                                                \
  static er_status gemm16_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                   \
    return er__kconv_conv_gemm_prepare(ki, &er__sgemm_avx512_16, &er__vec_avx512, st, scratch);                              \
  }                                                                                                                \
  static const er_cpu_kernel k_gemm16_##SFX = {"f32_" PREFIX "conv_gemm_16x16__avx512", OP, DOMAIN,               \
                                              gemm16_supports_##SFX, gemm16_prepare_##SFX, er__kconv_conv_gemm_run,         \
                                              er__kconv_conv_gemm_release};

#define DEFINE_CONVT_KERNEL(SFX, TILE, ISA, SG, ISA_OK)                                                  \
  static bool convt_supports_##SFX(const er_kernel_info *ki) { return er__kconv_convt_supports(ki, ISA_OK(ki->cpu)); } \
  static er_status convt_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {            \
    return er__kconv_convt_prepare(ki, &SG, st, scratch);                                                           \
  }                                                                                                       \
  static const er_cpu_kernel k_convt_##SFX = {"f32_conv_transpose_gemm_" TILE "__" ISA, "ConvTranspose", "", \
                                             convt_supports_##SFX, convt_prepare_##SFX, er__kconv_convt_run, convt_release};

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
