/* conv-direct.c - the "conv" group's direct convolution of small dense
 * layers at stride 1, every tap one input vector times broadcast weights
 * (see conv.c). */
#include "kernels/conv-impl.h"

/* ======================================================================== */
/* Direct convolution of small dense layers                                  */
/* ======================================================================== */

#define CD_MAX_PADDED_FLOATS (INT64_C(1) << 21)

/* One image's direct convolution for the workers. */
struct cd_job_s {
  const er_vec_ops *ops;
  er_conv_direct d;
};

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
bool er__kconv_cd_fits(const er_window *g, const er_vec_ops *ops) {
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
bool er__kconv_dense_unit_steps(const er_kernel_info *ki) {
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

bool er__kconv_cd_supports(const er_kernel_info *ki, const er_vec_ops *ops, bool isa_ok) {
  if (!isa_ok || !er__kconv_conv_common_ok(ki, is_fused(ki))) return false;
  const er_tensor *x = ki->in[0], *w = ki->in[1], *y = ki->out[0];
  if (x->rank != 4 || !w->data || !er__tensor_shape_known(w) || !known_but_batch(y)) return false;
  er_kctx ctx = er__ki_ctx(ki);
  er_window g;
  if (!known_but_batch(x) || !er__window_get(&ctx, x, w, y, &g)) return false;
  return er__kconv_cd_fits(&g, ops);
}

er_status er__kconv_cd_prepare(const er_kernel_info *ki, const er_vec_ops *ops, void **state_out, size_t *scratch_out) {
  cd_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a Conv kernel");
  er_kctx ctx = er__ki_ctx(ki);
  const er_tensor *x = ki->in[0], *w = ki->in[1], *y = ki->out[0];
  s->ops = ops;
  s->act = er__kconv_node_act(&ctx);
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

static void cd_chunk(void *arg, int64_t begin, int64_t end) {
  const struct cd_job_s *j = arg;
  j->ops->conv_direct(&j->d, begin, end);
}

er_status er__kconv_cd_run(const er_kernel_run *kr) {
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
