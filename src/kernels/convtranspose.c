/* convtranspose.c - the "conv" group's ConvTranspose: the GEMM of the
 * weights and the input, then col2im (see conv.c). */
#include "kernels/conv-impl.h"

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

bool er__kconv_convt_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !er__ki_f32(ki, 0) || !er__ki_f32(ki, 1) || !er__ki_out_f32(ki)) return false;
  if (ki->n_in > 2 && ki->in[2] && ki->in[2]->dtype != ER_DTYPE_FLOAT) return false;
  const er_tensor *x = ki->in[0], *w = ki->in[1];
  if (x->rank != 4 || w->rank != 4 || !w->data || !er__tensor_shape_known(w)) return false;
  er_kctx ctx = er__ki_ctx(ki);
  int64_t group = 1;
  return er__window_attrs_ok(&ctx, 4) && er__attr_int(&ctx, "group", 1, &group) == ER_STATUS_OK && group >= 1 &&
         w->dims[0] % group == 0;
}

er_status er__kconv_convt_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, void **state_out,
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

er_status er__kconv_convt_run(const er_kernel_run *kr) {
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
