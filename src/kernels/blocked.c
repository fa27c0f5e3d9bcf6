/* blocked.c - optimized CPU kernels of the "blocked" group: the
 * channel-blocked layout's convolutions, pools and conversions
 * (ops/blocked.c), on blocked-impl.h's tiles. A kernel takes a node only
 * when its block is the ISA's vector width, which is the block the
 * session's layout pass chose from the same CPU features.
 *
 * Dense convolution: the weights are packed once into the tiles' order,
 * [M/B][C/B][kh][kw][B in][B out] (zeros past M and C), and the bias into
 * [M/B * B]. A run that pads first copies the input into a zero-padded
 * buffer (in parallel, then the tiles), because the tiles read whole rows
 * of taps without testing borders; the copy costs one pass over the input
 * against kh * kw * C/B * 2 multiply-adds per output element. Work units
 * are one output row of two output blocks, ordered so that whichever of
 * weights and input is larger streams once: row-major when the weights are
 * the smaller, so every output-channel group of a row reuses the rows in
 * cache; group-major otherwise (ResNet's 512-channel 3x3 layers hold 9 MB
 * of weights for a 7x7 map). */
#include "kernels/blocked.h"

#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/window.h"

enum { IN_X, IN_W, IN_B, IN_ADD };

/* Pool windows wider than this per axis go to the reference kernel. */
#define BK_MAX_POOL_TAPS 64

static int64_t attr_or(const er_kernel_info *ki, const char *name, int64_t def) {
  er_kctx ctx = er__ki_ctx(ki);
  int64_t v;
  return er__attr_int(&ctx, name, def, &v) == ER_STATUS_OK ? v : def;
}

static int64_t blocks(int64_t c, int64_t b) { return (c + b - 1) / b; }

/* Planar [N, C, H, W] view (shape only) of a blocked tensor holding c
 * channels, or the tensor itself when already planar. */
static er_tensor planar_view(const er_tensor *t, int64_t c, bool planar) {
  er_tensor v;
  memset(&v, 0, sizeof v);
  if (planar || t->rank != 5) {
    er__tensor_set(&v, t->dtype, t->rank, t->rank > 0 ? t->dims : NULL);
    return v;
  }
  int64_t d[4] = {t->dims[0], c, t->dims[2], t->dims[3]};
  er__tensor_set(&v, t->dtype, 4, d);
  return v;
}

/* A float32 blocked tensor of block vn, as far as known (run() checks the
 * block again when it was unknown at compile time). */
static bool blocked_f32(const er_tensor *t, int vn) {
  return t && t->dtype == ER_DTYPE_FLOAT && t->rank == 5 && (t->dims[4] == vn || t->dims[4] < 0);
}

static bool blocked_at_run(const er_tensor *t, int vn) { return t->rank == 5 && t->dims[4] == vn; }

/* ======================================================================== */
/* BlockedConv                                                               */
/* ======================================================================== */

typedef struct bconv_state {
  const er_blocked_ops *ops;
  er_activation act;
  bool depthwise, planar;   /* depthwise: also narrow groups (gw > 1) */
  int64_t gw;               /* lanes per group of depthwise / narrow-group layers */
  int64_t m, c, kh, kw;
  int64_t mb, cbk, lanes;
  /* Dense convolutions in groups (ShuffleNet's grouped 1x1 layers): each
   * group's input and output channels whole blocks, cbg and mbg of them;
   * one group: cbg = cbk, mbg = mb. */
  int64_t cgroups, cbg, mbg;
  float *wp;          /* dense: [mb][cbg][kh][kw][lanes][B]; depthwise: [cb][kh][kw][gw][B] */
  float *bias;        /* [mb * B] or NULL */
} bconv_state;

static bool bconv_supports(const er_kernel_info *ki, const er_blocked_ops *ops, bool isa_ok) {
  if (!isa_ok || attr_or(ki, "block", 0) != ops->vn) return false;
  const er_tensor *x = ki->in[IN_X], *w = er__ki_in(ki, IN_W), *b = er__ki_in(ki, IN_B);
  const er_tensor *add = er__ki_in(ki, IN_ADD);
  bool planar = attr_or(ki, "planar_input", 0) == 1;
  int64_t group = attr_or(ki, "group", 1);
  if (!w || !w->data || w->dtype != ER_DTYPE_FLOAT || w->rank != 4 || !er__tensor_shape_known(w)) return false;
  if (!er__ki_out_f32(ki) || x->dtype != ER_DTYPE_FLOAT) return false;
  if (planar ? x->rank != 4 : !blocked_f32(x, ops->vn)) return false;
  if (b && (!b->data || b->dtype != ER_DTYPE_FLOAT || er__tensor_count(b) != w->dims[0])) return false;
  if (add && !blocked_f32(add, ops->vn)) return false;
  if (group < 1) return false;
  bool depthwise = group > 1 && w->dims[1] == 1 && group == w->dims[0];
  /* Narrow groups: as many input as output channels a group, fewer than
   * a block and dividing it (whole groups in every block). */
  bool narrow = group > 1 && !depthwise && w->dims[0] == w->dims[1] * group && w->dims[1] < ops->vn &&
                ops->vn % w->dims[1] == 0;
  if ((depthwise || narrow) && planar) return false;
  /* Other groups: blocked input, every group a whole number of input and
   * of output blocks. */
  if (group > 1 && !depthwise && !narrow &&
      (planar || w->dims[1] % ops->vn != 0 || w->dims[0] % group != 0 || (w->dims[0] / group) % ops->vn != 0))
    return false;
  er_kctx ctx = er__ki_ctx(ki);
  const char *ap;
  if (er__attr_string(&ctx, "auto_pad", "NOTSET", &ap) != ER_STATUS_OK || !er__window_attrs_ok(&ctx, 4))
    return false;
  er_activation act;
  return er__act_from_node(&ctx, &act) == ER_STATUS_OK && w->dims[2] <= 16 && w->dims[3] <= 16;
}

static er_status bconv_prepare(const er_kernel_info *ki, const er_blocked_ops *ops, void **state_out,
                               size_t *scratch_out) {
  bconv_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a BlockedConv kernel");
  er_kctx ctx = er__ki_ctx(ki);
  const er_tensor *w = ki->in[IN_W], *b = er__ki_in(ki, IN_B);
  const int64_t B = ops->vn;
  s->ops = ops;
  er__act_from_node(&ctx, &s->act);
  s->planar = attr_or(ki, "planar_input", 0) == 1;
  const int64_t group = attr_or(ki, "group", 1);
  const bool narrow = group > 1 && w->dims[0] == w->dims[1] * group && w->dims[1] < B && B % w->dims[1] == 0;
  s->depthwise = (group > 1 && w->dims[1] == 1 && group == w->dims[0]) || narrow;
  s->gw = s->depthwise ? w->dims[1] : 0;
  s->cgroups = s->depthwise ? 1 : group;
  s->m = w->dims[0];
  s->c = s->depthwise ? s->m : w->dims[1] * group;
  s->kh = w->dims[2];
  s->kw = w->dims[3];
  s->mb = blocks(s->m, B);
  s->cbk = s->planar ? 1 : blocks(s->c, B);
  s->lanes = s->planar ? s->c : B;
  s->cbg = s->cgroups > 1 ? w->dims[1] / B : s->cbk;
  s->mbg = s->mb / s->cgroups;
  const int64_t cpg = s->depthwise ? 1 : w->dims[1]; /* input channels per group */
  const float *wd = w->data;
  const int64_t taps = s->kh * s->kw;
  size_t floats = s->depthwise ? (size_t)(s->mb * taps * s->gw * B) : (size_t)(s->mb * s->cbg * taps * s->lanes * B);
  s->wp = er__aligned_alloc(floats * sizeof(float));
  s->bias = b ? er__aligned_alloc((size_t)(s->mb * B) * sizeof(float)) : NULL;
  if (!s->wp || (b && !s->bias)) {
    er__aligned_free(s->wp);
    er__aligned_free(s->bias);
    free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "BlockedConv '%s': out of memory packing weights", ki->node->name);
  }
  if (s->depthwise) {
    /* wp[k][t][q][j] = W[k * B + j][q][t]: output lane j's q-th input of
     * its group (depthwise: q = 0 only). */
    for (int64_t k = 0; k < s->mb; k++)
      for (int64_t t = 0; t < taps; t++)
        for (int64_t q = 0; q < s->gw; q++)
          for (int64_t j = 0; j < B; j++) {
            int64_t ch = k * B + j;
            s->wp[((k * taps + t) * s->gw + q) * B + j] = ch < s->m ? wd[(ch * s->gw + q) * taps + t] : 0.0f;
          }
  } else {
    /* wp[ob][cb][t][l][j] = W[ob * B + j][cb * lanes + l][t], cb and l
     * counting the input channels of ob's group (its blocks are
     * consecutive, so group gi's weights start at gi * mbg blocks). */
    for (int64_t ob = 0; ob < s->mb; ob++)
      for (int64_t cb = 0; cb < s->cbg; cb++)
        for (int64_t t = 0; t < taps; t++)
          for (int64_t l = 0; l < s->lanes; l++)
            for (int64_t j = 0; j < B; j++) {
              int64_t mo = ob * B + j, ci = cb * s->lanes + l;
              s->wp[(((ob * s->cbg + cb) * taps + t) * s->lanes + l) * B + j] =
                  mo < s->m && ci < cpg ? wd[(mo * cpg + ci) * taps + t] : 0.0f;
            }
  }
  if (b) {
    const float *bd = b->data;
    for (int64_t j = 0; j < s->mb * B; j++) s->bias[j] = j < s->m ? bd[j] : 0.0f;
  }
  /* Scratch: the padded copy of one image, when the shapes say there is
   * padding (else run() grows the spill scratch if it needs one). */
  *scratch_out = 0;
  const er_tensor *x = ki->in[IN_X], *y = ki->out[0];
  er_tensor xv = planar_view(x, s->c, s->planar), yv = planar_view(y, s->m, false);
  er_window g;
  if (!s->depthwise && er__tensor_shape_known(x) && er__tensor_shape_known(y) &&
      er__window_get(&ctx, &xv, w, &yv, &g) && (g.pt || g.pl || g.pb || g.pr))
    *scratch_out = (size_t)(s->cbk * (g.h + g.pt + g.pb) * (g.w + g.pl + g.pr) * s->lanes) * sizeof(float);
  *state_out = s;
  return ER_STATUS_OK;
}

static void bconv_release(void *state) {
  bconv_state *s = state;
  if (!s) return;
  er__aligned_free(s->wp);
  er__aligned_free(s->bias);
  free(s);
}

typedef struct pad_job {
  const er_blocked_ops *ops;
  const float *x;
  float *y;
  int64_t h, w, lanes, pt, pb, pl, pr;
} pad_job;

static void pad_chunk(void *arg, int64_t b0, int64_t b1) {
  const pad_job *j = arg;
  j->ops->pad(j->x, j->y, j->h, j->w, j->lanes, j->pt, j->pb, j->pl, j->pr, b0, b1);
}

typedef struct conv_job {
  er_bconv a;
  const er_blocked_ops *ops;
} conv_job;

static void conv_chunk(void *arg, int64_t u0, int64_t u1) {
  const conv_job *j = arg;
  j->ops->conv(&j->a, u0, u1);
}

typedef struct dw_job {
  er_bdw a;
  const er_blocked_ops *ops;
} dw_job;

static void dw_chunk(void *arg, int64_t u0, int64_t u1) {
  const dw_job *j = arg;
  j->ops->dw(&j->a, u0, u1);
}

/* Cost of a row of width ow in tiles of nb blocks, in accumulator updates
 * per input lane and tap: the kernel's split into tiles of as equal widths
 * as BK_R_FOR(nb) allows, each tile costing at least BK_ACC_FLOOR (with
 * fewer accumulators the FMA latency, not the FMA rate, sets its pace). */
#define BK_ACC_FLOOR 10
static int64_t dense_row_cost(const er_blocked_ops *ops, int64_t nb, int64_t ow) {
  const int64_t r = ops->acc / nb < ops->rmax ? ops->acc / nb : ops->rmax;
  const int64_t tiles = (ow + r - 1) / r, base = ow / tiles, wide = ow % tiles;
  int64_t cost = 0;
  for (int64_t t = 0; t < tiles; t++) {
    int64_t acc = nb * (base + (t < wide));
    cost += acc > BK_ACC_FLOOR ? acc : BK_ACC_FLOOR;
  }
  return cost;
}

/* Output blocks per work unit of a dense (not 1x1) layer: 2, or up to the
 * ISA's gb_max where a tile of that many blocks still has at least as
 * many pixels as blocks (AVX2: 3 blocks x 4 pixels), whichever leaves the
 * fewest idle accumulators. On a Zen 3 EPYC, 3 blocks ran oww_embedding's
 * 72- and 24-channel 3x1 layers (rows of 8 and 32 pixels) about 20% faster
 * than 2 + 2 + ... + 1, and the rule keeps 2 where 3 was slower (32
 * channels at 112 x 112: 3 + 1 blocks) or no faster (48 channels at 16
 * wide, 64 at 56 wide). */
static int64_t dense_group_blocks(const er_blocked_ops *ops, int64_t mb, int64_t ow) {
  int64_t best = 2, best_cost = -1;
  for (int64_t gb = 2; gb <= ops->gb_max && ops->acc / gb >= gb; gb++) {
    int64_t cost = mb / gb * dense_row_cost(ops, gb, ow) + (mb % gb ? dense_row_cost(ops, mb % gb, ow) : 0);
    if (best_cost < 0 || cost < best_cost) best = gb, best_cost = cost;
  }
  return best;
}

/* About this many multiply-adds per unit a second thread takes. */
#define BK_GRAIN_MACS (INT64_C(1) << 16)

static er_status bconv_run(const er_kernel_run *kr) {
  const bconv_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[IN_X], *w = ctx->in[IN_W], *add = er__in(ctx, IN_ADD);
  er_tensor *y = ctx->out[0];
  const int64_t B = s->ops->vn;
  er_tensor xv = planar_view(x, s->c, s->planar), yv = planar_view(y, s->m, false);
  er_window g;
  if (!er__window_get(ctx, &xv, w, &yv, &g) || g.c != s->c || g.m != s->m || !blocked_at_run(y, (int)B) ||
      y->dims[1] != s->mb || (!s->planar && (!blocked_at_run(x, (int)B) || x->dims[1] != s->cbk)) ||
      (s->planar && x->rank != 4) || (add && (!blocked_at_run(add, (int)B) || add->dims[1] != s->mb)))
    return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  const int64_t hw = g.h * g.w, ohw = g.oh * g.ow;
  if (s->depthwise) {
    dw_job j;
    memset(&j, 0, sizeof j);
    j.ops = s->ops;
    er_bdw *a = &j.a;
    a->cb = s->mb, a->h = g.h, a->w = g.w, a->oh = g.oh, a->ow = g.ow;
    a->kh = g.kh, a->kw = g.kw, a->sh = g.sh, a->sw = g.sw, a->dh = g.dh, a->dw = g.dw, a->pt = g.pt, a->pl = g.pl;
    a->pb = g.pb, a->pr = g.pr;
    a->wp = s->wp, a->bias = s->bias, a->m = s->m, a->act = s->act, a->gw = (int)s->gw;
    int64_t units = s->mb * g.oh, grain = BK_GRAIN_MACS / (g.ow * g.kh * g.kw * s->gw * B) + 1;
    for (int64_t n = 0; n < g.n; n++) {
      a->x = (const float *)x->data + n * s->mb * hw * B;
      a->y = (float *)y->data + n * s->mb * ohw * B;
      a->add = add ? (const float *)add->data + n * s->mb * ohw * B : NULL;
      er__parallel_for(kr->pool, units, grain, dw_chunk, &j);
    }
    return ER_STATUS_OK;
  }
  /* Column images as rows (Magika's 5x1 layer over 512 x 1: 18 ms in
   * one-pixel tiles, 4.1 ms as a row; onnxruntime 4.0). */
  er__window_column_as_row(&g);
  bool padded = g.pt || g.pl || g.pb || g.pr;
  const int64_t hp = g.h + g.pt + g.pb, wpd = g.w + g.pl + g.pr;
  void *owned = NULL;
  float *xp = NULL;
  if (padded) {
    size_t bytes = (size_t)(s->cbk * hp * wpd * s->lanes) * sizeof(float);
    xp = kr->scratch && kr->scratch_bytes >= bytes ? kr->scratch : er__kr_spill(kr, bytes, &owned);
    if (!xp)
      return er__error(ER_STATUS_OUT_OF_MEMORY, "BlockedConv '%s': out of memory for %zu bytes of padded input",
                       ctx->node->name, bytes);
  }
  conv_job j;
  memset(&j, 0, sizeof j);
  j.ops = s->ops;
  er_bconv *a = &j.a;
  a->planar = s->planar;
  a->lanes = s->lanes;
  a->cbk = s->cbg;
  a->h = padded ? hp : g.h;
  a->w = padded ? wpd : g.w;
  a->oh = g.oh, a->ow = g.ow;
  a->kh = g.kh, a->kw = g.kw, a->sh = g.sh, a->sw = g.sw, a->dh = g.dh, a->dw = g.dw;
  a->pt = padded ? 0 : g.pt;
  a->pl = padded ? 0 : g.pl;
  /* One group at a time (one when the layer has none): its input blocks,
   * weights, bias, output and residual blocks. */
  a->wp = s->wp, a->bias = s->bias, a->mb = s->mbg, a->m = s->m / s->cgroups, a->act = s->act;
  /* 1x1 layers take wider groups where the ISA has them (AVX2: 4 blocks x
   * 3 pixels), run over chunks of input blocks whose weights stay in L1.
   * On a Zen 3 EPYC (alternating binaries, best runs; a noisy host) the
   * 1x1 layers of ResNet-50's shapes ran up to a quarter faster and none
   * slower beyond the noise. Other layers take 4 x 3 no faster; they take
   * 2 blocks x 6 pixels or 3 x 4 (dense_group_blocks). */
  const bool pointwise = g.kh == 1 && g.kw == 1 && !s->planar;
  a->gb = pointwise ? s->ops->gb_max : dense_group_blocks(s->ops, s->mbg, g.ow);
  a->groups = (s->mbg + a->gb - 1) / a->gb;
  int64_t kchunk = s->cbg;
  if (s->ops->kchunk_bytes && pointwise) {
    int64_t per_block = a->gb * g.kh * g.kw * s->lanes * B * (int64_t)sizeof(float);
    int64_t fit = s->ops->kchunk_bytes / per_block;
    kchunk = fit < 1 ? 1 : fit < s->cbg ? fit : s->cbg;
  }
  a->xbs = a->h * a->w * B;
  a->ybs = g.oh * g.ow * B;
  /* A blocked 1x1 stride-1 layer runs over its plane as rows of whole
   * tiles: a 7x7 map is then 14 + 14 + 14 + 7 pixels, not seven rows of 7
   * that leave half of every 14-pixel tile idle. */
  const int rmax = s->ops->acc / (int)a->gb < s->ops->rmax ? s->ops->acc / (int)a->gb : s->ops->rmax;
  if (!s->planar && g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && !padded && g.ow % rmax != 0) {
    int64_t rw = (g.ow + rmax - 1) / rmax * rmax;
    a->w = a->ow = rw;
    a->h = a->oh = (ohw + rw - 1) / rw;
    a->ow_last = ohw - (a->oh - 1) * rw;
    a->xbs = a->ybs = ohw * B;
  }
  /* Whichever streams once: the smaller of weights and input is re-read. */
  int64_t w_floats = s->mbg * s->cbg * g.kh * g.kw * s->lanes * B, x_floats = s->cbg * hw * s->lanes;
  a->rows_outer = w_floats <= x_floats;
  int64_t units = a->groups * a->oh;
  int64_t macs_per_unit = a->gb * B * g.ow * g.kh * g.kw * s->cbg * s->lanes;
  int64_t grain = BK_GRAIN_MACS / (macs_per_unit > 0 ? macs_per_unit : 1) + 1;
  /* The planar input of a stem holds C planes; blocked, CB blocks. */
  const int64_t x_image = s->planar ? s->c * hw : s->cbk * hw * B;
  for (int64_t n = 0; n < g.n; n++) {
    const float *xn = (const float *)x->data + n * x_image;
    if (padded) {
      pad_job pj = {s->ops, xn, xp, g.h, g.w, s->planar ? 1 : B, g.pt, g.pb, g.pl, g.pr};
      int64_t planes = s->planar ? s->c : s->cbk;
      er__parallel_for(kr->pool, planes, 1, pad_chunk, &pj);
      xn = xp;
    }
    float *yn = (float *)y->data + n * s->mb * ohw * B;
    const float *addn = add ? (const float *)add->data + n * s->mb * ohw * B : NULL;
    const int64_t y_floats = s->mb * ohw * B;
    const bool alias = addn && addn < yn + y_floats && yn < addn + y_floats;
    for (int64_t gi = 0; gi < s->cgroups; gi++) {
      a->x = xn + gi * s->cbg * a->xbs;
      a->wp = s->wp + gi * s->mbg * s->cbg * g.kh * g.kw * s->lanes * B;
      a->bias = s->bias ? s->bias + gi * s->mbg * B : NULL;
      a->y = yn + gi * s->mbg * a->ybs;
      a->add = addn ? addn + gi * s->mbg * a->ybs : NULL;
      a->kchunk = alias ? s->cbg : kchunk;
      er__parallel_for(kr->pool, units, grain, conv_chunk, &j);
    }
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* BlockedPool                                                               */
/* ======================================================================== */

typedef struct bpool_state {
  const er_blocked_ops *ops;
  int kind;           /* 1 max, 2 average, 3 global max, 4 global average */
  bool count_include_pad;
} bpool_state;

static int pool_kind(const er_kernel_info *ki) {
  er_kctx ctx = er__ki_ctx(ki);
  const char *op;
  if (er__attr_string(&ctx, "op", "", &op) != ER_STATUS_OK) return 0;
  return strcmp(op, "MaxPool") == 0             ? 1
         : strcmp(op, "AveragePool") == 0       ? 2
         : strcmp(op, "GlobalMaxPool") == 0     ? 3
         : strcmp(op, "GlobalAveragePool") == 0 ? 4
                                                : 0;
}

static bool bpool_supports(const er_kernel_info *ki, const er_blocked_ops *ops, bool isa_ok) {
  if (!isa_ok || attr_or(ki, "block", 0) != ops->vn || ki->n_out != 1) return false;
  if (!blocked_f32(ki->in[0], ops->vn) || !er__ki_out_f32(ki)) return false;
  int kind = pool_kind(ki);
  if (kind == 0) return false;
  if (kind >= 3) return true;
  er_kctx ctx = er__ki_ctx(ki);
  const int64_t *ks;
  int64_t nks;
  if (!er__window_attrs_ok(&ctx, 4) || er__attr_ints(&ctx, "kernel_shape", &ks, &nks) != ER_STATUS_OK || nks != 2)
    return false;
  return ks[0] <= BK_MAX_POOL_TAPS && ks[1] <= BK_MAX_POOL_TAPS;
}

static er_status bpool_prepare(const er_kernel_info *ki, const er_blocked_ops *ops, void **state_out,
                               size_t *scratch_out) {
  bpool_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a BlockedPool kernel");
  s->ops = ops;
  s->kind = pool_kind(ki);
  s->count_include_pad = attr_or(ki, "count_include_pad", 0) != 0;
  *scratch_out = 0;
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct gpool_job {
  const er_blocked_ops *ops;
  const float *x;
  float *y;
  int64_t hw;
  bool max;
} gpool_job;

static void gpool_chunk(void *arg, int64_t b0, int64_t b1) {
  const gpool_job *j = arg;
  j->ops->global_pool(j->x, j->y, j->hw, b0, b1, j->max);
}

static er_status bpool_run(const er_kernel_run *kr) {
  const bpool_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  const int64_t B = s->ops->vn, n = x->dims[0], cb = x->dims[1], hw = x->dims[2] * x->dims[3];
  if (!blocked_at_run(x, (int)B) || !blocked_at_run(y, (int)B)) return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  if (s->kind >= 3) {
    if (hw == 0) return er__kr_reference(kr);
    gpool_job j = {s->ops, x->data, y->data, hw, s->kind == 3};
    int64_t grain = BK_GRAIN_MACS / (hw * B) + 1;
    /* Blocks of every image are consecutive: [N * CB][HW][B] -> [N * CB][B]. */
    er__parallel_for(kr->pool, n * cb, grain, gpool_chunk, &j);
    return ER_STATUS_OK;
  }
  er_tensor xv = planar_view(x, cb * B, false), yv = planar_view(y, cb * B, false);
  er_window g;
  if (!er__window_get(ctx, &xv, NULL, &yv, &g) || g.kh > BK_MAX_POOL_TAPS || g.kw > BK_MAX_POOL_TAPS)
    return er__kr_reference(kr);
  dw_job j;
  memset(&j, 0, sizeof j);
  j.ops = s->ops;
  er_bdw *a = &j.a;
  a->cb = cb, a->h = g.h, a->w = g.w, a->oh = g.oh, a->ow = g.ow;
  a->kh = g.kh, a->kw = g.kw, a->sh = g.sh, a->sw = g.sw, a->dh = g.dh, a->dw = g.dw, a->pt = g.pt, a->pl = g.pl;
  a->pb = g.pb, a->pr = g.pr;
  a->pool = s->kind;
  a->count_include_pad = s->count_include_pad;
  int64_t units = cb * g.oh, grain = BK_GRAIN_MACS / (g.ow * g.kh * g.kw * B) + 1;
  for (int64_t i = 0; i < n; i++) {
    a->x = (const float *)x->data + i * cb * hw * B;
    a->y = (float *)y->data + i * cb * g.oh * g.ow * B;
    er__parallel_for(kr->pool, units, grain, dw_chunk, &j);
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* ToBlocked / FromBlocked                                                   */
/* ======================================================================== */

typedef struct reorder_state {
  const er_blocked_ops *ops;
  bool to, cl;   /* cl: the planar side is channels-last (NHWC) */
} reorder_state;

static bool reorder_supports(const er_kernel_info *ki, const er_blocked_ops *ops, bool isa_ok, bool to) {
  if (!isa_ok || attr_or(ki, "block", 0) != ops->vn || !er__ki_out_f32(ki) || ki->in[0]->dtype != ER_DTYPE_FLOAT)
    return false;
  int64_t cl = attr_or(ki, "channels_last", 0);
  if (cl != 0 && cl != 1) return false;
  return to ? ki->in[0]->rank == 4 : blocked_f32(ki->in[0], ops->vn);
}

static er_status reorder_prepare(const er_kernel_info *ki, const er_blocked_ops *ops, bool to, void **state_out,
                                 size_t *scratch_out) {
  reorder_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a layout conversion kernel");
  s->ops = ops;
  s->to = to;
  s->cl = attr_or(ki, "channels_last", 0) == 1;
  *scratch_out = 0;
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct reorder_job {
  const er_blocked_ops *ops;
  const float *x;
  float *y;
  int64_t c, hw, cb;
  bool to;
} reorder_job;

/* Units are blocks of all images: u = image * cb + block. */
static void reorder_chunk(void *arg, int64_t u0, int64_t u1) {
  const reorder_job *j = arg;
  const int64_t B = j->ops->vn;
  for (int64_t u = u0; u < u1; u++) {
    int64_t n = u / j->cb, b = u % j->cb;
    const float *x = j->x + n * (j->to ? j->c : j->cb * B) * j->hw;
    float *y = j->y + n * (j->to ? j->cb * B : j->c) * j->hw;
    if (j->to) j->ops->to_blocked(x, y, j->c, j->hw, b, b + 1);
    else j->ops->from_blocked(x, y, j->c, j->hw, b, b + 1);
  }
}

/* Channels-last units are runs of RUN pixels of all images: u = image *
 * runs + run. */
#define REORDER_CL_RUN 64
static void reorder_cl_chunk(void *arg, int64_t u0, int64_t u1) {
  const reorder_job *j = arg;
  const int64_t B = j->ops->vn, runs = (j->hw + REORDER_CL_RUN - 1) / REORDER_CL_RUN;
  for (int64_t u = u0; u < u1; u++) {
    int64_t n = u / runs, p0 = u % runs * REORDER_CL_RUN, p1 = p0 + REORDER_CL_RUN < j->hw ? p0 + REORDER_CL_RUN : j->hw;
    const float *x = j->x + n * (j->to ? j->c : j->cb * B) * j->hw;
    float *y = j->y + n * (j->to ? j->cb * B : j->c) * j->hw;
    if (j->to) j->ops->to_blocked_cl(x, y, j->c, j->hw, p0, p1);
    else j->ops->from_blocked_cl(x, y, j->c, j->hw, p0, p1);
  }
}

static er_status reorder_run(const er_kernel_run *kr) {
  const reorder_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  const er_tensor *y = ctx->out[0];
  const int64_t B = s->ops->vn;
  const er_tensor *pl = s->to ? x : y, *bl = s->to ? y : x;
  if (pl->rank != 4 || !blocked_at_run(bl, (int)B)) return er__kr_reference(kr);
  const int64_t c = pl->dims[s->cl ? 3 : 1], hw = pl->dims[s->cl ? 1 : 2] * pl->dims[s->cl ? 2 : 3];
  reorder_job j = {s->ops, x->data, y->data, c, hw, bl->dims[1], s->to};
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  if (s->cl) {
    int64_t runs = (hw + REORDER_CL_RUN - 1) / REORDER_CL_RUN;
    int64_t grain = BK_GRAIN_MACS / (REORDER_CL_RUN * j.cb * B + 1) + 1;
    er__parallel_for(kr->pool, pl->dims[0] * runs, grain, reorder_cl_chunk, &j);
    return ER_STATUS_OK;
  }
  int64_t grain = BK_GRAIN_MACS / (j.hw * B + 1) + 1;
  er__parallel_for(kr->pool, pl->dims[0] * j.cb, grain, reorder_chunk, &j);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* BlockedBatchNormalization                                                 */
/* ======================================================================== */

/* Per lane of every block: a = scale / sqrt(var + eps), b = B - mean * a,
 * in double as the reference computes them; 0 and 0 past C (the padding
 * lanes stay 0). */
typedef struct bbn_state {
  const er_blocked_ops *ops;
  er_activation act;
  int64_t c, cb;
  float *a, *b;               /* [cb * B] */
} bbn_state;

static bool bbn_supports(const er_kernel_info *ki, const er_blocked_ops *ops, bool isa_ok) {
  if (!isa_ok || attr_or(ki, "block", 0) != ops->vn || ki->n_in != 5 || ki->n_out != 1) return false;
  if (!blocked_f32(ki->in[0], ops->vn) || !er__ki_out_f32(ki) || attr_or(ki, "training_mode", 0) != 0) return false;
  const er_tensor *scale = ki->in[1];
  if (!scale || scale->rank != 1 || scale->dims[0] < 1) return false;
  for (int i = 1; i < 5; i++) {
    const er_tensor *t = ki->in[i];
    if (!t || !t->data || t->dtype != ER_DTYPE_FLOAT || t->rank != 1 || t->dims[0] != scale->dims[0]) return false;
  }
  return ki->in[0]->rank != 5 || ki->in[0]->dims[1] < 0 || ki->in[0]->dims[1] == blocks(scale->dims[0], ops->vn);
}

static void bbn_release(void *state) {
  bbn_state *s = state;
  if (!s) return;
  er__aligned_free(s->a);
  free(s);
}

static er_status bbn_prepare(const er_kernel_info *ki, const er_blocked_ops *ops, void **state_out,
                             size_t *scratch_out) {
  const int64_t B = ops->vn, c = ki->in[1]->dims[0], cb = blocks(c, B);
  bbn_state *s = calloc(1, sizeof *s);
  float *ab = er__aligned_alloc((size_t)(2 * cb * B) * sizeof(float));
  if (!s || !ab) {
    free(s);
    er__aligned_free(ab);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a BlockedBatchNormalization kernel");
  }
  er_kctx ctx = er__ki_ctx(ki);
  if (er__act_from_node(&ctx, &s->act) != ER_STATUS_OK) {
    free(s);
    er__aligned_free(ab);
    return er__error(ER_STATUS_INVALID_ATTRIBUTE, "BlockedBatchNormalization '%s': bad activation", ki->node->name);
  }
  float eps = 1e-5f;
  if (er__attr_float(&ctx, "epsilon", 1e-5f, &eps) != ER_STATUS_OK) eps = 1e-5f;
  const float *scale = ki->in[1]->data, *bias = ki->in[2]->data, *mean = ki->in[3]->data, *var = ki->in[4]->data;
  s->ops = ops;
  s->c = c;
  s->cb = cb;
  s->a = ab;
  s->b = ab + cb * B;
  for (int64_t ch = 0; ch < cb * B; ch++) {
    if (ch >= c) {
      s->a[ch] = s->b[ch] = 0.0f;
      continue;
    }
    double a = (double)scale[ch] / sqrt((double)var[ch] + (double)eps);
    s->a[ch] = (float)a;
    s->b[ch] = (float)((double)bias[ch] - (double)mean[ch] * a);
  }
  *scratch_out = 0;
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct bbn_job {
  const bbn_state *s;
  const float *x;
  float *y;
  int64_t hw;
} bbn_job;

static void bbn_chunk(void *arg, int64_t b0, int64_t b1) {
  const bbn_job *j = arg;
  const int64_t B = j->s->ops->vn;
  for (int64_t b = b0; b < b1; b++) {
    const int64_t cb = b % j->s->cb;
    const int64_t valid = j->s->c - cb * B;
    j->s->ops->affine(j->x + b * j->hw * B, j->y + b * j->hw * B, j->hw, j->s->a + cb * B, j->s->b + cb * B,
                      &j->s->act, valid < B ? (int)valid : (int)B);
  }
}

static er_status bbn_run(const er_kernel_run *kr) {
  const bbn_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  const int64_t B = s->ops->vn;
  if (!blocked_at_run(x, (int)B) || !blocked_at_run(y, (int)B) || x->dims[1] != s->cb) return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  bbn_job j = {s, x->data, y->data, x->dims[2] * x->dims[3]};
  er__parallel_for(kr->pool, x->dims[0] * s->cb, BK_GRAIN_MACS / (j.hw * B + 1) + 1, bbn_chunk, &j);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

#define DEFINE_BLOCKED_KERNELS(SFX, ISA, OPS, ISA_OK)                                                        \
  static bool bconv_supports_##SFX(const er_kernel_info *ki) { return bconv_supports(ki, &OPS, ISA_OK(ki->cpu)); } \
  static er_status bconv_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {              \
    return bconv_prepare(ki, &OPS, st, scratch);                                                           \
  }                                                                                                        \
  static const er_cpu_kernel k_bconv_##SFX = {"f32_blocked_conv__" ISA, "BlockedConv", ER_FUSED_DOMAIN,      \
                                             bconv_supports_##SFX, bconv_prepare_##SFX, bconv_run,          \
                                             bconv_release};                                                \
  static bool bpool_supports_##SFX(const er_kernel_info *ki) { return bpool_supports(ki, &OPS, ISA_OK(ki->cpu)); } \
  static er_status bpool_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {              \
    return bpool_prepare(ki, &OPS, st, scratch);                                                           \
  }                                                                                                        \
  static const er_cpu_kernel k_bpool_##SFX = {"f32_blocked_pool__" ISA, "BlockedPool", ER_FUSED_DOMAIN,      \
                                             bpool_supports_##SFX, bpool_prepare_##SFX, bpool_run, free};   \
  static bool bbn_supports_##SFX(const er_kernel_info *ki) { return bbn_supports(ki, &OPS, ISA_OK(ki->cpu)); } \
  static er_status bbn_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                \
    return bbn_prepare(ki, &OPS, st, scratch);                                                             \
  }                                                                                                        \
  static const er_cpu_kernel k_bbn_##SFX = {"f32_blocked_bn__" ISA, "BlockedBatchNormalization",            \
                                           ER_FUSED_DOMAIN, bbn_supports_##SFX, bbn_prepare_##SFX, bbn_run,  \
                                           bbn_release};                                                    \
  static bool to_supports_##SFX(const er_kernel_info *ki) {                                                 \
    return reorder_supports(ki, &OPS, ISA_OK(ki->cpu), true);                                               \
  }                                                                                                        \
  static er_status to_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                 \
    return reorder_prepare(ki, &OPS, true, st, scratch);                                                   \
  }                                                                                                        \
  static const er_cpu_kernel k_to_##SFX = {"f32_to_blocked__" ISA, "ToBlocked", ER_FUSED_DOMAIN,             \
                                          to_supports_##SFX, to_prepare_##SFX, reorder_run, free};          \
  static bool from_supports_##SFX(const er_kernel_info *ki) {                                               \
    return reorder_supports(ki, &OPS, ISA_OK(ki->cpu), false);                                              \
  }                                                                                                        \
  static er_status from_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {               \
    return reorder_prepare(ki, &OPS, false, st, scratch);                                                  \
  }                                                                                                        \
  static const er_cpu_kernel k_from_##SFX = {"f32_from_blocked__" ISA, "FromBlocked", ER_FUSED_DOMAIN,       \
                                            from_supports_##SFX, from_prepare_##SFX, reorder_run, free};

#if defined(__x86_64__) || defined(__i386__)
DEFINE_BLOCKED_KERNELS(avx512, "avx512", er__blocked_avx512, er__cpu_has_avx512)
DEFINE_BLOCKED_KERNELS(avx2, "avx2", er__blocked_avx2, er__cpu_has_avx2)
#endif
#if defined(__aarch64__)
static bool has_neon(const er_cpu_features *c) { return c->neon; }
DEFINE_BLOCKED_KERNELS(neon, "neon", er__blocked_neon, has_neon)
#endif

const er_cpu_kernel *const er__kernels_blocked[] = {
#if defined(__x86_64__) || defined(__i386__)
    &k_bconv_avx512, &k_bpool_avx512, &k_to_avx512, &k_from_avx512, &k_bbn_avx512,
    &k_bconv_avx2,   &k_bpool_avx2,   &k_to_avx2,   &k_from_avx2,   &k_bbn_avx2,
#endif
#if defined(__aarch64__)
    &k_bconv_neon, &k_bpool_neon, &k_to_neon, &k_from_neon, &k_bbn_neon,
#endif
    NULL,
};
