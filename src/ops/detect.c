/* detect.c - operators of the "detect" group, used by object detectors:
 * NonMaxSuppression, RoiAlign and DeformConv. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* Unifies a dim known from several places (-1 = unknown); false on a clash. */
static bool unify(int64_t *acc, int64_t v) {
  if (v < 0) return true;
  if (*acc < 0) {
    *acc = v;
    return true;
  }
  return *acc == v;
}

/* ======================================================================== */
/* NonMaxSuppression (10, 11)                                                */
/* ======================================================================== */

/* Version 11 only clarified that an IoU equal to the threshold keeps the
 * box, which is what version 10 implementations did; one kernel serves both.
 *
 * The geometry is computed in float, like the ONNX reference and common
 * runtimes, so that boxes whose IoU sits exactly on the threshold are decided
 * the same way. */

/* One box as an axis-aligned rectangle. */
typedef struct nms_box {
  float x0, x1, y0, y1; /* x0 <= x1, y0 <= y1 */
} nms_box;

typedef struct nms_cand {
  float score;
  int64_t idx;
} nms_cand;

/* Highest score first; equal scores by lower index; NaN scores last. */
static int nms_cmp(const void *pa, const void *pb) {
  const nms_cand *a = pa, *b = pb;
  bool an = isnan(a->score), bn = isnan(b->score);
  if (an != bn) return an ? 1 : -1;
  if (!an && a->score != b->score) return a->score > b->score ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static nms_box nms_read_box(const float *p, int64_t center) {
  nms_box r;
  if (center) {
    /* [x_center, y_center, width, height] */
    float hw = p[2] / 2, hh = p[3] / 2;
    r.x0 = p[0] - hw;
    r.x1 = p[0] + hw;
    r.y0 = p[1] - hh;
    r.y1 = p[1] + hh;
  } else {
    /* [y1, x1, y2, x2], any diagonal pair of corners */
    r.y0 = fminf(p[0], p[2]);
    r.y1 = fmaxf(p[0], p[2]);
    r.x0 = fminf(p[1], p[3]);
    r.x1 = fmaxf(p[1], p[3]);
  }
  return r;
}

/* True when IoU(a, b) > threshold. Degenerate boxes never suppress. */
static bool nms_suppress(const nms_box *a, const nms_box *b, float threshold) {
  float ix0 = fmaxf(a->x0, b->x0), ix1 = fminf(a->x1, b->x1);
  if (ix1 <= ix0) return false;
  float iy0 = fmaxf(a->y0, b->y0), iy1 = fminf(a->y1, b->y1);
  if (iy1 <= iy0) return false;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float area_a = (a->x1 - a->x0) * (a->y1 - a->y0);
  float area_b = (b->x1 - b->x0) * (b->y1 - b->y0);
  float uni = area_a + area_b - inter;
  if (!(inter > 0) || !(area_a > 0) || !(area_b > 0) || !(uni > 0)) return false;
  return inter / uni > threshold;
}

static er_status nms_attrs(const er_kctx *ctx, int64_t *center) {
  ER_CHECK(er__attr_int(ctx, "center_point_box", 0, center));
  if (*center != 0 && *center != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "center_point_box is %lld; it must be 0 or 1", (long long)*center);
  return ER_STATUS_OK;
}

static er_status nms_check(er_kctx *ctx) {
  static const er_dtype f32[] = {ER_DTYPE_FLOAT, ER_DTYPE_UNDEFINED};
  static const er_dtype i64[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};
  const er_tensor *boxes = ctx->in[0], *scores = ctx->in[1];
  int64_t center;
  char a[96], b[96];
  ER_CHECK(nms_attrs(ctx, &center));
  ER_CHECK(er__require_type(ctx, 0, f32));
  ER_CHECK(er__require_type(ctx, 1, f32));
  ER_CHECK(er__require_rank(ctx, 0, 3, 3));
  ER_CHECK(er__require_rank(ctx, 1, 3, 3));
  if (er__in(ctx, 2)) ER_CHECK(er__require_type(ctx, 2, i64));
  if (er__in(ctx, 3)) ER_CHECK(er__require_type(ctx, 3, f32));
  if (er__in(ctx, 4)) ER_CHECK(er__require_type(ctx, 4, f32));
  for (int i = 2; i < 5; i++) {
    const er_tensor *t = er__in(ctx, i);
    if (t && t->rank > 1)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input %d %s must be a scalar", i,
                          er__shape_str(t, a, sizeof a));
  }
  int64_t batches = -1, nboxes = -1;
  if (er__dim_of(boxes, 2) >= 0 && er__dim_of(boxes, 2) != 4)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "boxes %s must have shape [num_batches, num_boxes, 4]",
                        er__shape_str(boxes, a, sizeof a));
  if (!unify(&batches, er__dim_of(boxes, 0)) || !unify(&batches, er__dim_of(scores, 0)) ||
      !unify(&nboxes, er__dim_of(boxes, 1)) || !unify(&nboxes, er__dim_of(scores, 2)))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "boxes %s and scores %s disagree; expected [num_batches, num_boxes, 4] "
                        "and [num_batches, num_classes, num_boxes]",
                        er__shape_str(boxes, a, sizeof a), er__shape_str(scores, b, sizeof b));
  const int64_t dims[2] = {-1, 3};
  er__set_output(ctx, 0, ER_DTYPE_INT64, 2, dims);
  return ER_STATUS_OK;
}

static er_status nms_run(er_kctx *ctx) {
  const er_tensor *boxes = ctx->in[0], *scores = ctx->in[1];
  const er_tensor *tmax = er__in(ctx, 2), *tiou = er__in(ctx, 3), *tscore = er__in(ctx, 4);
  int64_t center;
  ER_CHECK(nms_attrs(ctx, &center));
  const int64_t batches = boxes->dims[0], nboxes = boxes->dims[1], classes = scores->dims[1];
  /* Absent or empty scalars take their defaults: no output, IoU 0, no
   * score filter. */
  int64_t max_out = tmax && er__count(tmax) > 0 ? ((const int64_t *)tmax->data)[0] : 0;
  float iou = tiou && er__count(tiou) > 0 ? ((const float *)tiou->data)[0] : 0.0f;
  bool has_score = tscore && er__count(tscore) > 0;
  float score_thr = has_score ? ((const float *)tscore->data)[0] : 0.0f;
  if (max_out < 0) max_out = 0;
  const int64_t per_class = max_out < nboxes ? max_out : nboxes;

  /* Worst case every (batch, class) keeps per_class boxes: bounded by the
   * scores' element count. */
  int64_t cap = batches * classes * per_class;
  size_t scratch = (size_t)nboxes * (sizeof(nms_box) + sizeof(nms_cand) + sizeof(int64_t)) +
                   (size_t)cap * 3 * sizeof(int64_t) + 1;
  char *mem = er__malloc(scratch, "NonMaxSuppression scratch");
  if (!mem) return ER_STATUS_OUT_OF_MEMORY;
  nms_box *bx = (nms_box *)mem;                       /* [nboxes] */
  nms_cand *cand = (nms_cand *)(bx + nboxes);         /* [nboxes] */
  int64_t *kept = (int64_t *)(cand + nboxes);         /* [nboxes] kept box indices */
  int64_t *sel = kept + nboxes;                       /* [cap, 3] */
  int64_t nsel = 0;

  const float *bdata = boxes->data, *sdata = scores->data;
  for (int64_t b = 0; b < batches && per_class > 0; b++) {
    for (int64_t i = 0; i < nboxes; i++) bx[i] = nms_read_box(bdata + (b * nboxes + i) * 4, center);
    for (int64_t c = 0; c < classes; c++) {
      const float *sc = sdata + (b * classes + c) * nboxes;
      int64_t ncand = 0, nkept = 0;
      for (int64_t i = 0; i < nboxes; i++)
        if (!has_score || sc[i] > score_thr) cand[ncand++] = (nms_cand){sc[i], i};
      qsort(cand, (size_t)ncand, sizeof *cand, nms_cmp);
      for (int64_t k = 0; k < ncand && nkept < per_class; k++) {
        bool keep = true;
        for (int64_t s = 0; s < nkept && keep; s++)
          if (nms_suppress(&bx[cand[k].idx], &bx[kept[s]], iou)) keep = false;
        if (!keep) continue;
        kept[nkept++] = cand[k].idx;
        sel[nsel * 3 + 0] = b;
        sel[nsel * 3 + 1] = c;
        sel[nsel * 3 + 2] = cand[k].idx;
        nsel++;
      }
    }
  }
  const int64_t dims[2] = {nsel, 3};
  er_status st = er__op_output(ctx, 0, ER_DTYPE_INT64, 2, dims);
  if (st == ER_STATUS_OK && nsel > 0)
    memcpy(ctx->out[0]->data, sel, (size_t)nsel * 3 * sizeof(int64_t));
  free(mem);
  return st;
}

static const er_op_def op_nms = {
    .name = "NonMaxSuppression", .domain = "", .min_version = 10, .max_version = 11,
    .min_inputs = 2, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .flags = ER_OP_DYNAMIC_OUTPUT,
    .check = nms_check, .run = nms_run,
};

/* ======================================================================== */
/* RoiAlign (10, 16, 22)                                                     */
/* ======================================================================== */

typedef struct roi_cfg {
  bool max_mode;
  bool half_pixel;        /* shift input coordinates by -0.5 (16+ default) */
  int64_t out_h, out_w, sampling;
  float spatial_scale;
} roi_cfg;

static er_status roi_attrs(const er_kctx *ctx, roi_cfg *c) {
  const char *mode, *ctm;
  ER_CHECK(er__attr_string(ctx, "mode", "avg", &mode));
  /* Version 10 has no coordinate_transformation_mode; it behaves like
   * output_half_pixel. */
  ER_CHECK(er__attr_string(ctx, "coordinate_transformation_mode",
                           ctx->node->version >= 16 ? "half_pixel" : "output_half_pixel", &ctm));
  ER_CHECK(er__attr_int(ctx, "output_height", 1, &c->out_h));
  ER_CHECK(er__attr_int(ctx, "output_width", 1, &c->out_w));
  ER_CHECK(er__attr_int(ctx, "sampling_ratio", 0, &c->sampling));
  ER_CHECK(er__attr_float(ctx, "spatial_scale", 1.0f, &c->spatial_scale));
  if (strcmp(mode, "avg") == 0)
    c->max_mode = false;
  else if (strcmp(mode, "max") == 0)
    c->max_mode = true;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "mode is '%s'; it must be 'avg' or 'max'",
                        mode);
  if (strcmp(ctm, "half_pixel") == 0)
    c->half_pixel = true;
  else if (strcmp(ctm, "output_half_pixel") == 0)
    c->half_pixel = false;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "coordinate_transformation_mode is '%s'; it must be 'half_pixel' or "
                        "'output_half_pixel'",
                        ctm);
  if (c->out_h <= 0 || c->out_w <= 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "output_height %lld and output_width %lld must be > 0",
                        (long long)c->out_h, (long long)c->out_w);
  if (c->sampling < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "sampling_ratio %lld must be >= 0",
                        (long long)c->sampling);
  return ER_STATUS_OK;
}

static er_status roi_check(er_kctx *ctx) {
  static const er_dtype i64[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};
  const er_tensor *x = ctx->in[0], *rois = ctx->in[1], *bi = ctx->in[2];
  roi_cfg c;
  char a[96], b[96];
  ER_CHECK(roi_attrs(ctx, &c));
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  ER_CHECK(er__require_type(ctx, 2, i64));
  ER_CHECK(er__require_rank(ctx, 0, 4, 4));
  ER_CHECK(er__require_rank(ctx, 1, 2, 2));
  ER_CHECK(er__require_rank(ctx, 2, 1, 1));
  int64_t n = -1;
  if (er__dim_of(rois, 1) >= 0 && er__dim_of(rois, 1) != 4)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "rois %s must have shape (num_rois, 4)",
                        er__shape_str(rois, a, sizeof a));
  if (!unify(&n, er__dim_of(rois, 0)) || !unify(&n, er__dim_of(bi, 0)))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "rois %s and batch_indices %s must have the same num_rois",
                        er__shape_str(rois, a, sizeof a), er__shape_str(bi, b, sizeof b));
  const int64_t dims[4] = {n, er__dim_of(x, 1), c.out_h, c.out_w};
  er__set_output(ctx, 0, x->dtype, 4, dims);
  return ER_STATUS_OK;
}

/* One bilinear sample: four flat positions in the (H, W) plane and their
 * weights; all zero for a point outside the map. */
typedef struct roi_sample {
  int64_t pos[4];
  double w[4];
} roi_sample;

static void roi_make_sample(double y, double x, int64_t height, int64_t width, roi_sample *s) {
  /* Written so that NaN coordinates also count as outside. */
  if (!(y >= -1.0 && y <= (double)height && x >= -1.0 && x <= (double)width)) {
    memset(s, 0, sizeof *s);
    return;
  }
  if (y < 0) y = 0;
  if (x < 0) x = 0;
  int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1, x1;
  if (y0 >= height - 1) {
    y0 = y1 = height - 1;
    y = (double)y0;
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= width - 1) {
    x0 = x1 = width - 1;
    x = (double)x0;
  } else {
    x1 = x0 + 1;
  }
  double ly = y - (double)y0, lx = x - (double)x0, hy = 1.0 - ly, hx = 1.0 - lx;
  s->pos[0] = y0 * width + x0;
  s->pos[1] = y0 * width + x1;
  s->pos[2] = y1 * width + x0;
  s->pos[3] = y1 * width + x1;
  s->w[0] = hy * hx;
  s->w[1] = hy * lx;
  s->w[2] = ly * hx;
  s->w[3] = ly * lx;
}

static er_status roi_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *rois = ctx->in[1], *bi = ctx->in[2];
  er_tensor *y = ctx->out[0];
  roi_cfg c;
  ER_CHECK(roi_attrs(ctx, &c));
  const int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
  const int64_t R = rois->dims[0], PH = c.out_h, PW = c.out_w;
  const double scale = c.spatial_scale, off = c.half_pixel ? 0.5 : 0.0;
  if (H == 0 || W == 0) {
    /* Nothing to sample: every output stays zero. */
    return ER_STATUS_OK;
  }
  roi_sample *samples = NULL;
  size_t cap = 0;
  er_status st = ER_STATUS_OK;
  for (int64_t r = 0; r < R && st == ER_STATUS_OK; r++) {
    int64_t b = ((const int64_t *)bi->data)[r];
    if (b < 0 || b >= N) {
      st = er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                        "batch_indices[%lld] = %lld is outside [0, %lld)", (long long)r,
                        (long long)b, (long long)N);
      break;
    }
    double x0 = er__load_f(rois, r * 4 + 0) * scale - off, y0 = er__load_f(rois, r * 4 + 1) * scale - off;
    double x1 = er__load_f(rois, r * 4 + 2) * scale - off, y1 = er__load_f(rois, r * 4 + 3) * scale - off;
    double rw = x1 - x0, rh = y1 - y0;
    if (!c.half_pixel) {
      /* The legacy mode forces malformed RoIs to at least 1x1. */
      if (rw < 1.0) rw = 1.0;
      if (rh < 1.0) rh = 1.0;
    }
    double bh = rh / (double)PH, bw = rw / (double)PW;
    /* Samples per bin: sampling_ratio, else ceil(bin size). A bin size that
     * is not a finite number gives no samples. */
    double gh_d = c.sampling > 0 ? (double)c.sampling : ceil(bh);
    double gw_d = c.sampling > 0 ? (double)c.sampling : ceil(bw);
    int64_t gh = gh_d >= 1.0 && gh_d < 1e6 ? (int64_t)gh_d : 0;
    int64_t gw = gw_d >= 1.0 && gw_d < 1e6 ? (int64_t)gw_d : 0;
    if (isnan(gh_d) || isnan(gw_d)) {
      st = er__op_error(ctx, ER_STATUS_OUT_OF_RANGE, "rois[%lld] has a NaN coordinate",
                        (long long)r);
      break;
    }
    if (!(gh_d < 1e6) || !(gw_d < 1e6)) {
      st = er__op_error(ctx, ER_STATUS_LIMIT,
                        "RoI %lld needs %g x %g samples per bin; at most 1e6 each", (long long)r,
                        gh_d, gw_d);
      break;
    }
    const double count = gh * gw > 0 ? (double)(gh * gw) : 1.0;
    /* The sample grid is shared by all channels. */
    uint64_t need;
    if (!er__mul_u64((uint64_t)(PH * PW), (uint64_t)(gh * gw), &need) ||
        !er__mul_u64(need, sizeof(roi_sample), &need) || need > SIZE_MAX / 2) {
      st = er__op_error(ctx, ER_STATUS_LIMIT, "RoI %lld sample grid is too large", (long long)r);
      break;
    }
    if (need > cap) {
      free(samples);
      cap = (size_t)need;
      samples = er__malloc(cap, "RoiAlign samples");
      if (!samples) {
        st = ER_STATUS_OUT_OF_MEMORY;
        break;
      }
    }
    roi_sample *s = samples;
    for (int64_t ph = 0; ph < PH; ph++)
      for (int64_t pw = 0; pw < PW; pw++)
        for (int64_t iy = 0; iy < gh; iy++) {
          double yy = y0 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
          for (int64_t ix = 0; ix < gw; ix++) {
            double xx = x0 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
            roi_make_sample(yy, xx, H, W, s++);
          }
        }
    for (int64_t ch = 0; ch < C; ch++) {
      const int64_t base = (b * C + ch) * H * W;
      const roi_sample *sp = samples;
      for (int64_t ph = 0; ph < PH; ph++)
        for (int64_t pw = 0; pw < PW; pw++) {
          double acc = 0.0;
          bool first = true;
          for (int64_t k = 0; k < gh * gw; k++, sp++) {
            if (c.max_mode) {
              /* The definition takes the max over the four weighted corner
               * values rather than interpolating first. */
              double v = 0.0;
              for (int q = 0; q < 4; q++) {
                double t = sp->w[q] * er__load_f(x, base + sp->pos[q]);
                if (q == 0 || t > v) v = t;
              }
              if (first || v > acc) acc = v;
              first = false;
            } else {
              for (int q = 0; q < 4; q++) acc += sp->w[q] * er__load_f(x, base + sp->pos[q]);
            }
          }
          if (!c.max_mode) acc /= count;
          er__store_f(y, ((r * C + ch) * PH + ph) * PW + pw, acc);
        }
    }
  }
  free(samples);
  return st;
}

static const er_op_def op_roi_align = {
    .name = "RoiAlign", .domain = "", .min_version = 10, .max_version = 22,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = roi_check, .run = roi_run,
};

/* ======================================================================== */
/* DeformConv (19, 22)                                                       */
/* ======================================================================== */

/* N-D deformable convolution (v2 with the optional modulation mask). Each
 * kernel tap samples the input at its regular position plus a learned
 * offset, with multilinear interpolation; points outside the input read
 * zero. */

#define DC_MAX_SPATIAL (ER_MAX_RANK - 2)

typedef struct dc_cfg {
  int nsp;                         /* spatial rank */
  int64_t group, offset_group;
  int64_t kernel[DC_MAX_SPATIAL], strides[DC_MAX_SPATIAL], dilations[DC_MAX_SPATIAL];
  int64_t pads[2 * DC_MAX_SPATIAL];
  int64_t out[DC_MAX_SPATIAL];     /* output spatial dims; -1 unknown */
} dc_cfg;

static er_status dc_ints(const er_kctx *ctx, const char *name, int nsp, int64_t def, int64_t lo,
                         int64_t *dst, int mult) {
  const int64_t *v;
  int64_t n;
  ER_CHECK(er__attr_ints(ctx, name, &v, &n));
  if (n < 0) {
    for (int i = 0; i < mult * nsp; i++) dst[i] = def;
    return ER_STATUS_OK;
  }
  if (n != (int64_t)mult * nsp)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "%s has %lld values; expected %d for %d spatial dims", name, (long long)n,
                        mult * nsp, nsp);
  for (int i = 0; i < mult * nsp; i++) {
    if (v[i] < lo)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "%s[%d] = %lld must be >= %lld", name,
                          i, (long long)v[i], (long long)lo);
    dst[i] = v[i];
  }
  return ER_STATUS_OK;
}

/* Validates what is known. Returns with c->nsp = -1 when the rank is not
 * known yet. */
static er_status dc_setup(const er_kctx *ctx, dc_cfg *c) {
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *off = ctx->in[2];
  const er_tensor *bias = er__in(ctx, 3), *mask = er__in(ctx, 4);
  char a[96], b[96];
  ER_CHECK(er__attr_int(ctx, "group", 1, &c->group));
  ER_CHECK(er__attr_int(ctx, "offset_group", 1, &c->offset_group));
  if (c->group <= 0 || c->offset_group <= 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "group %lld and offset_group %lld must be > 0", (long long)c->group,
                        (long long)c->offset_group);
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  for (int i = 1; i < 5; i++)
    if (er__in(ctx, i)) ER_CHECK(er__require_same_type(ctx, 0, i));
  int rank = x->rank >= 0 ? x->rank : w->rank >= 0 ? w->rank : off->rank;
  c->nsp = -1;
  if (rank < 0) return ER_STATUS_OK;
  if (rank < 3 || rank > ER_MAX_RANK)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "X %s must have rank 3 to %d",
                        er__shape_str(x, a, sizeof a), ER_MAX_RANK);
  for (int i = 0; i < 3; i++)
    if (ctx->in[i]->rank >= 0 && ctx->in[i]->rank != rank)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "X, W and offset must have the same rank (input %d is %s)", i,
                          er__shape_str(ctx->in[i], a, sizeof a));
  if (mask && mask->rank >= 0 && mask->rank != rank)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "mask %s must have rank %d",
                        er__shape_str(mask, a, sizeof a), rank);
  if (bias && bias->rank >= 0 && bias->rank != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "B %s must be 1-D",
                        er__shape_str(bias, a, sizeof a));
  const int nsp = rank - 2;
  c->nsp = nsp;
  ER_CHECK(dc_ints(ctx, "strides", nsp, 1, 1, c->strides, 1));
  ER_CHECK(dc_ints(ctx, "dilations", nsp, 1, 1, c->dilations, 1));
  ER_CHECK(dc_ints(ctx, "pads", nsp, 0, 0, c->pads, 2));
  const int64_t *ks;
  int64_t nk;
  ER_CHECK(er__attr_ints(ctx, "kernel_shape", &ks, &nk));
  if (nk >= 0 && nk != nsp)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "kernel_shape has %lld values; expected %d", (long long)nk, nsp);
  for (int i = 0; i < nsp; i++) {
    int64_t kw = er__dim_of(w, 2 + i);
    c->kernel[i] = nk >= 0 ? ks[i] : kw;
    if (nk >= 0 && (ks[i] <= 0 || (kw >= 0 && kw != ks[i])))
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "kernel_shape[%d] = %lld does not match W %s", i, (long long)ks[i],
                          er__shape_str(w, a, sizeof a));
  }
  /* Channels and groups. */
  int64_t C = er__dim_of(x, 1), OC = er__dim_of(w, 0), CG = er__dim_of(w, 1);
  if (C >= 0 && CG >= 0 && C != CG * c->group)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "X %s has %lld channels but W %s expects %lld x group %lld",
                        er__shape_str(x, a, sizeof a), (long long)C, er__shape_str(w, b, sizeof b),
                        (long long)CG, (long long)c->group);
  if (OC >= 0 && OC % c->group)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "W %s: output channels must be a multiple of group %lld",
                        er__shape_str(w, a, sizeof a), (long long)c->group);
  if (C >= 0 && C % c->offset_group)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "X %s: channels must be a multiple of offset_group %lld",
                        er__shape_str(x, a, sizeof a), (long long)c->offset_group);
  if (bias && OC >= 0 && er__dim_of(bias, 0) >= 0 && er__dim_of(bias, 0) != OC)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "B %s must have %lld (output channel) values",
                        er__shape_str(bias, a, sizeof a), (long long)OC);
  /* Output size, and the offset / mask shapes that must match it. */
  int64_t taps = 1;
  for (int i = 0; i < nsp; i++) {
    int64_t in = er__dim_of(x, 2 + i), k = c->kernel[i];
    c->out[i] = -1;
    if (k < 0) taps = -1;
    else if (taps >= 0) taps *= k;
    if (in < 0 || k < 0) continue;
    int64_t span = (k - 1) * c->dilations[i] + 1, padded = in + c->pads[i] + c->pads[nsp + i];
    if (padded < span)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "spatial dim %d: padded input %lld is smaller than the dilated kernel "
                          "%lld",
                          i, (long long)padded, (long long)span);
    c->out[i] = (padded - span) / c->strides[i] + 1;
  }
  int64_t n = er__dim_of(x, 0);
  bool ok = unify(&n, er__dim_of(off, 0)) && (!mask || unify(&n, er__dim_of(mask, 0)));
  if (taps >= 0) {
    int64_t want = c->offset_group * taps * nsp;
    ok = ok && (er__dim_of(off, 1) < 0 || er__dim_of(off, 1) == want);
    ok = ok && (!mask || er__dim_of(mask, 1) < 0 || er__dim_of(mask, 1) == c->offset_group * taps);
  }
  for (int i = 0; i < nsp; i++) {
    ok = ok && unify(&c->out[i], er__dim_of(off, 2 + i));
    if (mask) ok = ok && unify(&c->out[i], er__dim_of(mask, 2 + i));
  }
  if (!ok)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "offset %s%s%s does not fit X %s with this kernel, stride, dilation and "
                        "pads: expected (N, offset_group * prod(kernel) * %d, out...) and mask "
                        "(N, offset_group * prod(kernel), out...)",
                        er__shape_str(off, a, sizeof a), mask ? " or mask " : "",
                        mask ? er__shape_str(mask, b, sizeof b) : "", er__shape_str(x, b, sizeof b),
                        nsp);
  return ER_STATUS_OK;
}

static er_status dc_check(er_kctx *ctx) {
  dc_cfg c;
  ER_CHECK(dc_setup(ctx, &c));
  const er_tensor *x = ctx->in[0], *w = ctx->in[1];
  if (c.nsp < 0) {
    er__set_output(ctx, 0, x->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  dims[0] = er__dim_of(x, 0) >= 0 ? er__dim_of(x, 0) : er__dim_of(ctx->in[2], 0);
  dims[1] = er__dim_of(w, 0);
  for (int i = 0; i < c.nsp; i++) dims[2 + i] = c.out[i];
  er__set_output(ctx, 0, x->dtype, c.nsp + 2, dims);
  return ER_STATUS_OK;
}

static er_status dc_run(er_kctx *ctx) {
  dc_cfg c;
  ER_CHECK(dc_setup(ctx, &c));
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *off = ctx->in[2];
  const er_tensor *bias = er__in(ctx, 3), *mask = er__in(ctx, 4);
  er_tensor *y = ctx->out[0];
  const int nsp = c.nsp;
  const int64_t N = x->dims[0], C = x->dims[1], OC = w->dims[0], CG = w->dims[1];
  const int64_t OCG = OC / c.group, CPO = C / c.offset_group;
  int64_t in_sz = 1, out_sz = 1, taps = 1;
  int64_t in_st[DC_MAX_SPATIAL];
  for (int i = nsp - 1; i >= 0; i--) {
    in_st[i] = in_sz;
    in_sz *= x->dims[2 + i];
    out_sz *= c.out[i];
    taps *= c.kernel[i];
  }
  /* For each (batch, offset group, output position, tap) the sample is the
   * same for every channel of the group, so it is computed once: up to 2^nsp
   * corner positions (flat, -1 = outside) and weights. */
  const int corners = 1 << nsp;
  uint64_t nsamp, nacc, total;
  if (!er__mul_u64((uint64_t)taps, (uint64_t)corners, &nsamp) ||
      !er__mul_u64(nsamp, sizeof(int64_t) + sizeof(double), &nsamp) ||
      !er__mul_u64((uint64_t)OC, (uint64_t)out_sz, &nacc) ||
      !er__mul_u64(nacc, sizeof(double), &nacc) || !er__add_u64(nsamp, nacc, &total) ||
      total > SIZE_MAX / 2)
    return er__op_error(ctx, ER_STATUS_LIMIT, "scratch for %lld taps x %lld outputs is too large",
                        (long long)taps, (long long)(OC * out_sz));
  char *mem = er__malloc((size_t)total + 1, "DeformConv scratch");
  if (!mem) return ER_STATUS_OUT_OF_MEMORY;
  /* Partial sums of one batch image stay in double until the end. */
  double *acc = (double *)mem;                         /* [OC, out...] */
  int64_t *cpos = (int64_t *)(acc + OC * out_sz);      /* [taps, corners] */
  double *cw = (double *)(cpos + taps * corners);      /* [taps, corners] */

  for (int64_t n = 0; n < N; n++) {
    for (int64_t oc = 0; oc < OC; oc++) {
      double b = bias ? er__load_f(bias, oc) : 0.0;
      for (int64_t o = 0; o < out_sz; o++) acc[oc * out_sz + o] = b;
    }
    for (int64_t og = 0; og < c.offset_group; og++) {
      for (int64_t o = 0; o < out_sz; o++) {
        int64_t oidx[DC_MAX_SPATIAL], orem = o;
        for (int i = nsp - 1; i >= 0; i--) {
          oidx[i] = orem % c.out[i];
          orem /= c.out[i];
        }
        /* Sample positions of every tap at this output position. */
        for (int64_t t = 0; t < taps; t++) {
          int64_t kidx[DC_MAX_SPATIAL], rem = t;
          for (int i = nsp - 1; i >= 0; i--) {
            kidx[i] = rem % c.kernel[i];
            rem /= c.kernel[i];
          }
          double pos[DC_MAX_SPATIAL];
          for (int i = 0; i < nsp; i++) {
            /* offset layout: (N, offset_group, taps, nsp, out...) */
            int64_t oi = (((n * c.offset_group + og) * taps + t) * nsp + i) * out_sz + o;
            pos[i] = (double)(oidx[i] * c.strides[i] - c.pads[i] + kidx[i] * c.dilations[i]) +
                     er__load_f(off, oi);
          }
          double m = 1.0;
          if (mask) m = er__load_f(mask, ((n * c.offset_group + og) * taps + t) * out_sz + o);
          for (int k = 0; k < corners; k++) {
            double wt = m;
            int64_t flat = 0;
            bool inside = true;
            for (int i = 0; i < nsp; i++) {
              double fl = floor(pos[i]);
              bool hi = (k >> i) & 1;
              double q = fl + (hi ? 1.0 : 0.0);
              double frac = pos[i] - fl;
              wt *= hi ? frac : 1.0 - frac;
              if (!(q >= 0.0 && q < (double)x->dims[2 + i])) {
                inside = false;
              } else {
                flat += (int64_t)q * in_st[i];
              }
            }
            cpos[t * corners + k] = inside && wt != 0.0 ? flat : -1;
            cw[t * corners + k] = wt;
          }
        }
        /* Accumulate every output channel whose group holds channels of
         * this offset group. */
        for (int64_t oc = 0; oc < OC; oc++) {
          int64_t g = oc / OCG;
          double sum = 0.0;
          for (int64_t cg = 0; cg < CG; cg++) {
            int64_t ch = g * CG + cg;
            if (ch / CPO != og) continue;
            int64_t xbase = (n * C + ch) * in_sz, wbase = (oc * CG + cg) * taps;
            for (int64_t t = 0; t < taps; t++) {
              double v = 0.0;
              for (int k = 0; k < corners; k++) {
                int64_t p = cpos[t * corners + k];
                if (p >= 0) v += cw[t * corners + k] * er__load_f(x, xbase + p);
              }
              sum += v * er__load_f(w, wbase + t);
            }
          }
          acc[oc * out_sz + o] += sum;
        }
      }
    }
    for (int64_t i = 0; i < OC * out_sz; i++) er__store_f(y, n * OC * out_sz + i, acc[i]);
  }
  free(mem);
  return ER_STATUS_OK;
}

static const er_op_def op_deform_conv = {
    .name = "DeformConv", .domain = "", .min_version = 19, .max_version = 22,
    .min_inputs = 3, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .check = dc_check, .run = dc_run,
};

const er_op_def *const er__ops_detect[] = {
    &op_nms,
    &op_roi_align,
    &op_deform_conv,
    NULL,
};
