/* shape-pad.c - the "shape" group's Pad, DepthToSpace, SpaceToDepth, Trilu
 * and CenterCropPad (see shape.c). */
#include "ops/shape-impl.h"

/* Pad                                                                       */
/* ======================================================================== */

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

/* Per input axis: the (possibly negative) pads before and after. */
typedef struct pad_plan {
  pad_mode mode;
  bool known;                /* pads known */
  bool touched[ER_MAX_RANK]; /* the axis is listed (opset 18 axes) */
  int64_t begin[ER_MAX_RANK], end[ER_MAX_RANK];
} pad_plan;

static er_status pad_plan_make(const er_kctx *ctx, pad_plan *p) {
  const er_tensor *x = ctx->in[0];
  const char *mode;
  ivec pads, axes;
  char buf[160], buf2[160];
  int r = x->rank;
  memset(p, 0, sizeof *p);
  ER_CHECK(er__attr_string(ctx, "mode", "constant", &mode));
  if (strcmp(mode, "constant") == 0) {
    p->mode = PAD_CONSTANT;
  } else if (strcmp(mode, "reflect") == 0) {
    p->mode = PAD_REFLECT;
  } else if (strcmp(mode, "edge") == 0) {
    p->mode = PAD_EDGE;
  } else if (strcmp(mode, "wrap") == 0 && version(ctx) >= 19) {
    p->mode = PAD_WRAP;
  } else {
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "mode '%s' is not one of constant, reflect, edge%s", mode,
                        version(ctx) >= 19 ? ", wrap" : " (wrap needs opset 19)");
  }
  if (version(ctx) < 11) {
    const char *name = version(ctx) < 2 ? "paddings" : "pads";
    ER_CHECK(er__shp_attr_ivec(ctx, name, 2 * ER_MAX_RANK, &pads));
    if (pads.n < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute '%s' is required", name);
    axes.n = -1;
  } else {
    if (!er__in(ctx, 1))
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'pads' is required");
    ER_CHECK(er__shp_read_ivec(ctx, 1, "pads", 2 * ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &pads));
    ER_CHECK(er__shp_read_ivec(ctx, 3, "axes", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &axes));
  }
  if (r < 0) return ER_STATUS_OK;
  bool has_axes = version(ctx) >= 18 && er__in(ctx, 3) != NULL;
  if (!has_axes) {
    axes.n = r;
    axes.known = true;
    for (int d = 0; d < r; d++) axes.v[d] = d;
  }
  if (axes.n >= 0 && pads.n >= 0 && pads.n != 2 * axes.n)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "pads has %lld values; expected %lld (2 per axis%s)", (long long)pads.n,
                        (long long)(2 * axes.n), has_axes ? " in 'axes'" : " of the input");
  if (!axes.known) {
    for (int d = 0; d < r; d++) p->touched[d] = true;
    return ER_STATUS_OK;
  }
  ER_CHECK(er__shp_norm_axes(ctx, "axes", &axes, r));
  for (int64_t k = 0; k < axes.n; k++) p->touched[axes.v[k]] = true;
  if (!pads.known) return ER_STATUS_OK;
  p->known = true;
  for (int64_t k = 0; k < axes.n; k++) {
    int a = (int)axes.v[k];
    p->begin[a] = pads.v[k];
    p->end[a] = pads.v[axes.n + k];
    int64_t d = x->dims[a];
    if (d < 0) continue;
    /* Pads beyond ER_MAX_RUNTIME_ELEMENTS could only make a too-large
     * output; refusing them keeps the sums below in range. */
    if (p->begin[a] > ER_MAX_RUNTIME_ELEMENTS || p->end[a] > ER_MAX_RUNTIME_ELEMENTS)
      return er__op_error(ctx, ER_STATUS_LIMIT, "pads %s exceed %lld (ER_MAX_RUNTIME_ELEMENTS)",
                          er__shp_ivec_str(&pads, buf, sizeof buf), (long long)ER_MAX_RUNTIME_ELEMENTS);
    if (p->begin[a] < -d || p->end[a] < -d || d + p->begin[a] + p->end[a] < 0)
      return er__op_error(
          ctx, ER_STATUS_INVALID_SHAPE,
          "pads %s crop %lld and %lld elements from axis %d of %s, which has only %lld",
          er__shp_ivec_str(&pads, buf, sizeof buf), (long long)(p->begin[a] < 0 ? -p->begin[a] : 0),
          (long long)(p->end[a] < 0 ? -p->end[a] : 0), a, er__shape_str(x, buf2, sizeof buf2),
          (long long)d);
    int64_t kept = d + (p->begin[a] < 0 ? p->begin[a] : 0) + (p->end[a] < 0 ? p->end[a] : 0);
    if (p->mode != PAD_CONSTANT && kept <= 0 && (p->begin[a] > 0 || p->end[a] > 0))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "%s padding needs data, but axis %d of %s has none left", mode, a,
                          er__shape_str(x, buf, sizeof buf));
  }
  return ER_STATUS_OK;
}

static er_status pad_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  const er_tensor *cv = er__in(ctx, 2);
  pad_plan p;
  int64_t dims[ER_MAX_RANK];
  char buf[160];
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  if (version(ctx) >= 11 && cv) {
    ER_CHECK(er__require_same_type(ctx, 0, 2));
    int64_t n = er__tensor_count(cv);
    if (n >= 0 && n != 1)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "constant_value must be a scalar, but has shape %s",
                          er__shape_str(cv, buf, sizeof buf));
  }
  ER_CHECK(pad_plan_make(ctx, &p));
  if (x->rank < 0) {
    set_unknown_dims(ctx, 0, x->dtype, -1);
    return ER_STATUS_OK;
  }
  for (int d = 0; d < x->rank; d++) {
    dims[d] = x->dims[d];
    if (!p.touched[d]) continue;
    if (!p.known || dims[d] < 0)
      dims[d] = -1;
    else
      dims[d] += p.begin[d] + p.end[d];
  }
  ER_CHECK(er__shp_check_output_size(ctx, x->rank, dims));
  er__set_output(ctx, 0, x->dtype, x->rank, dims);
  return ER_STATUS_OK;
}

/* Maps output index o of one axis to the input index it reads, or -1 for
 * the constant. The kept (uncropped) input range is [lo, lo + len). */
static int64_t pad_source(pad_mode mode, int64_t o, int64_t before, int64_t lo, int64_t len) {
  int64_t i = o - before; /* index relative to the kept range */
  if (i >= 0 && i < len) return lo + i;
  switch (mode) {
    case PAD_CONSTANT: return -1;
    case PAD_EDGE: i = i < 0 ? 0 : len - 1; break;
    case PAD_WRAP: i = ((i % len) + len) % len; break;
    case PAD_REFLECT:
      if (len == 1) {
        i = 0;
      } else {
        /* Reflection without repeating the edge is periodic in 2(len-1);
         * pads longer than the axis reflect again, as numpy does. */
        int64_t period = 2 * (len - 1);
        i = ((i % period) + period) % period;
        if (i >= len) i = period - i;
      }
      break;
  }
  return lo + i;
}

er_status er__pad_job_make(er_kctx *ctx, er_pad_job *j) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  pad_plan p;
  int r = x->rank;
  size_t es = er_dtype_size(x->dtype);
  memset(j, 0, sizeof *j);
  ER_CHECK(pad_plan_make(ctx, &p));
  if (version(ctx) >= 11) {
    const er_tensor *cv = er__in(ctx, 2);
    if (cv) memcpy(j->value, cv->data, es);
  } else {
    float v;
    ER_CHECK(er__attr_float(ctx, "value", 0.0f, &v));
    er__store_f64(j->value, x->dtype, 0, v);
  }
  j->x = x->data;
  j->es = es;
  j->mode = (int)p.mode;
  int64_t total = er__count(y);
  if (total == 0) return ER_STATUS_OK;
  if (r == 0) {
    j->rank = 0;
    j->inner = j->block = j->rows = 1;
    return ER_STATUS_OK;
  }
  /* Negative pads crop first; the padding then extends the kept range. */
  for (int d = 0; d < r; d++) {
    int64_t cut_lo = p.begin[d] < 0 ? -p.begin[d] : 0, cut_hi = p.end[d] < 0 ? -p.end[d] : 0;
    j->before[d] = p.begin[d] > 0 ? p.begin[d] : 0;
    j->lo[d] = cut_lo;
    j->len[d] = x->dims[d] - cut_lo - cut_hi;
    j->out_dims[d] = y->dims[d];
  }
  /* Trailing axes without pads travel whole with each element of the last
   * padded axis: oww_embedding pads W of an [N, 76, 32, 1] input, which
   * as rows of one element took 63 us for 2.6 K floats. */
  int rr = r;
  int64_t block = 1;
  while (rr > 1 && p.begin[rr - 1] == 0 && p.end[rr - 1] == 0) block *= x->dims[--rr];
  er__strides(rr, x->dims, j->in_strides);
  for (int d = 0; d < rr; d++) j->in_strides[d] *= block;
  j->rank = rr;
  j->block = block;
  j->inner = y->dims[rr - 1];
  j->rows = total / (j->inner * block);
  return ER_STATUS_OK;
}

void er__pad_rows(const er_pad_job *j, void *dst, int64_t begin, int64_t end) {
  const size_t es = j->es;
  const int rr = j->rank;
  const pad_mode mode = (pad_mode)j->mode;
  if (begin >= end) return;
  if (rr == 0) {
    memcpy(dst, j->x, es);
    return;
  }
  const int64_t ees = (int64_t)es * j->block; /* bytes of one element of axis rr - 1 and what it carries */
  const int64_t inner = j->inner, block = j->block;
  int64_t idx[ER_MAX_RANK] = {0};
  int64_t q = begin;
  for (int d = rr - 2; d >= 0; d--) {
    idx[d] = q % j->out_dims[d];
    q /= j->out_dims[d];
  }
  uint8_t *out = (uint8_t *)dst + begin * inner * ees;
  const uint8_t *in = j->x;
  /* The last axis: its kept middle is one memcpy, the padded ends map per
   * element. */
  const int d = rr - 1;
  int64_t mid_lo = j->before[d], mid_hi = j->before[d] + j->len[d];
  if (mid_hi > inner) mid_hi = inner;
  for (int64_t row = begin; row < end; row++, out += inner * ees) {
    /* Source offset of this row (in elements), or a row of constants. */
    int64_t off = 0;
    bool constant_row = false;
    for (int a = 0; a < rr - 1; a++) {
      int64_t s = pad_source(mode, idx[a], j->before[a], j->lo[a], j->len[a]);
      if (s < 0) {
        constant_row = true;
        break;
      }
      off += s * j->in_strides[a];
    }
    if (constant_row) {
      er__shp_fill_bytes(out, j->value, es, inner * block);
    } else {
      if (mid_hi > mid_lo)
        memcpy(out + mid_lo * ees, in + off * (int64_t)es + j->lo[d] * ees, (size_t)((mid_hi - mid_lo) * ees));
      for (int64_t k = 0; k < inner; k++) {
        if (k == mid_lo && mid_hi > mid_lo) k = mid_hi;
        if (k >= inner) break;
        int64_t s = pad_source(mode, k, j->before[d], j->lo[d], j->len[d]);
        if (s < 0) er__shp_fill_bytes(out + k * ees, j->value, es, block);
        else memcpy(out + k * ees, in + off * (int64_t)es + s * ees, (size_t)ees);
      }
    }
    for (int a = rr - 2; a >= 0; a--) {
      if (++idx[a] < j->out_dims[a]) break;
      idx[a] = 0;
    }
  }
}

static er_status pad_run(er_kctx *ctx) {
  er_pad_job j;
  ER_CHECK(er__pad_job_make(ctx, &j));
  er__pad_rows(&j, ctx->out[0]->data, 0, j.rows);
  return ER_STATUS_OK;
}

const er_op_def er__shp_op_pad_1 = {
    .name = "Pad", .domain = "", .min_version = 1, .max_version = 10,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = pad_check, .run = pad_run,
};

const er_op_def er__shp_op_pad_11 = {
    .name = "Pad", .domain = "", .min_version = 11, .max_version = 25,
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1) | VALUE_IN(3), .check = pad_check, .run = pad_run,
};

/* ======================================================================== */
/* DepthToSpace / SpaceToDepth                                               */
/* ======================================================================== */

/* blocksize and whether mode is CRD (DepthToSpace from opset 11,
 * SpaceToDepth from 28; DCR before). */
static er_status block_attrs(const er_kctx *ctx, int mode_since, int64_t *b, bool *crd) {
  const char *mode;
  if (!er__node_attr(ctx->node, "blocksize"))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'blocksize' is required");
  ER_CHECK(er__attr_int(ctx, "blocksize", 0, b));
  if (*b <= 0 || *b > INT32_MAX)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "blocksize %lld must be positive",
                        (long long)*b);
  *crd = false;
  if (version(ctx) < mode_since) return ER_STATUS_OK;
  ER_CHECK(er__attr_string(ctx, "mode", "DCR", &mode));
  if (strcmp(mode, "CRD") == 0) {
    *crd = true;
  } else if (strcmp(mode, "DCR") != 0) {
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "mode '%s' is not DCR or CRD", mode);
  }
  return ER_STATUS_OK;
}

static er_status d2s_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t b, dims[4];
  bool crd;
  char buf[160];
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  ER_CHECK(block_attrs(ctx, 11, &b, &crd));
  ER_CHECK(er__require_rank(ctx, 0, 4, 4));
  if (x->rank < 0) {
    set_unknown_dims(ctx, 0, x->dtype, 4);
    return ER_STATUS_OK;
  }
  int64_t c = x->dims[1];
  if (c >= 0 && c % (b * b) != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "channels %lld of %s are not a multiple of blocksize^2 = %lld",
                        (long long)c, er__shape_str(x, buf, sizeof buf), (long long)(b * b));
  dims[0] = x->dims[0];
  dims[1] = c < 0 ? -1 : c / (b * b);
  dims[2] = x->dims[2] < 0 ? -1 : x->dims[2] * b;
  dims[3] = x->dims[3] < 0 ? -1 : x->dims[3] * b;
  er__set_output(ctx, 0, x->dtype, 4, dims);
  return ER_STATUS_OK;
}

static er_status d2s_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t b;
  bool crd;
  ER_CHECK(block_attrs(ctx, 11, &b, &crd));
  int64_t n = x->dims[0], h = x->dims[2], w = x->dims[3], c = x->dims[1] / (b * b);
  /* Input strides of the split channel axis: DCR reads it as
   * [b1, b2, c], CRD as [c, b1, b2]. */
  int64_t s_w = 1, s_h = w, hw = h * w;
  int64_t s_c = crd ? b * b * hw : hw;
  int64_t s_b1 = crd ? b * hw : b * c * hw;
  int64_t s_b2 = crd ? hw : c * hw;
  /* The output [N, c, H*b, W*b] read as [N, c, H, b1, W, b2]. */
  int64_t dims[6] = {n, c, h, b, w, b};
  int64_t strides[6] = {x->dims[1] * hw, s_c, s_h, s_b1, s_w, s_b2};
  copy_view(y->data, x->data, er_dtype_size(x->dtype), 6, dims, strides, 0);
  return ER_STATUS_OK;
}

const er_op_def er__shp_op_depth_to_space = {
    .name = "DepthToSpace", .domain = "", .min_version = 1, .max_version = 28,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = d2s_check, .run = d2s_run,
};

static er_status s2d_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t b, dims[4];
  bool crd;
  char buf[160];
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  ER_CHECK(block_attrs(ctx, 28, &b, &crd));
  ER_CHECK(er__require_rank(ctx, 0, 4, 4));
  if (x->rank < 0) {
    set_unknown_dims(ctx, 0, x->dtype, 4);
    return ER_STATUS_OK;
  }
  for (int d = 2; d < 4; d++)
    if (x->dims[d] >= 0 && x->dims[d] % b != 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "dim %d of %s is not a multiple of blocksize %lld", d,
                          er__shape_str(x, buf, sizeof buf), (long long)b);
  dims[0] = x->dims[0];
  if (x->dims[1] < 0 || !er__mul_i64(x->dims[1], b * b, &dims[1])) dims[1] = -1;
  dims[2] = x->dims[2] < 0 ? -1 : x->dims[2] / b;
  dims[3] = x->dims[3] < 0 ? -1 : x->dims[3] / b;
  er__set_output(ctx, 0, x->dtype, 4, dims);
  return ER_STATUS_OK;
}

static er_status s2d_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t b;
  bool crd;
  ER_CHECK(block_attrs(ctx, 28, &b, &crd));
  int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
  int64_t ho = h / b, wo = w / b;
  /* The input read as [N, c, ho, b1, wo, b2]: */
  int64_t s_n = c * h * w, s_c = h * w, s_ho = b * w, s_b1 = w, s_wo = b, s_b2 = 1;
  /* The output channel is (b1, b2, c) in DCR order, (c, b1, b2) in CRD. */
  int64_t dcr_dims[6] = {n, b, b, c, ho, wo}, dcr_strides[6] = {s_n, s_b1, s_b2, s_c, s_ho, s_wo};
  int64_t crd_dims[6] = {n, c, b, b, ho, wo}, crd_strides[6] = {s_n, s_c, s_b1, s_b2, s_ho, s_wo};
  copy_view(y->data, x->data, er_dtype_size(x->dtype), 6, crd ? crd_dims : dcr_dims,
            crd ? crd_strides : dcr_strides, 0);
  return ER_STATUS_OK;
}

const er_op_def er__shp_op_space_to_depth = {
    .name = "SpaceToDepth", .domain = "", .min_version = 1, .max_version = 28,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = s2d_check, .run = s2d_run,
};

/* ======================================================================== */
/* Trilu                                                                     */
/* ======================================================================== */

static er_status trilu_k(const er_kctx *ctx, int64_t *k) {
  ivec kv;
  *k = 0;
  ER_CHECK(er__shp_read_ivec(ctx, 1, "k", 1, true, ER_STATUS_INVALID_SHAPE, &kv));
  if (kv.n == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "'k' must hold one value, but is empty");
  if (kv.known) *k = kv.v[0];
  return ER_STATUS_OK;
}

static er_status trilu_check(er_kctx *ctx) {
  int64_t upper, k;
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  ER_CHECK(er__attr_int(ctx, "upper", 1, &upper));
  ER_CHECK(trilu_k(ctx, &k));
  ER_CHECK(er__require_rank(ctx, 0, 2, ER_MAX_RANK));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status trilu_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t upper, k;
  size_t es = er_dtype_size(x->dtype);
  ER_CHECK(er__attr_int(ctx, "upper", 1, &upper));
  ER_CHECK(trilu_k(ctx, &k));
  int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
  int64_t batch = er__shp_dims_product(x->dims, 0, x->rank - 2);
  /* Clamping k keeps i + k in range; beyond +-(rows + cols) it changes
   * nothing. */
  int64_t lim = rows + cols;
  if (k > lim) k = lim;
  if (k < -lim) k = -lim;
  /* The output arrives zeroed; copy the kept part of each row. Upper keeps
   * j >= i + k, lower keeps j <= i + k. */
  for (int64_t m = 0; m < batch; m++) {
    for (int64_t i = 0; i < rows; i++) {
      int64_t lo = upper ? i + k : 0, hi = upper ? cols : i + k + 1;
      if (lo < 0) lo = 0;
      if (hi > cols) hi = cols;
      if (hi <= lo) continue;
      size_t off = (size_t)((m * rows + i) * cols + lo) * es;
      memcpy((uint8_t *)y->data + off, (const uint8_t *)x->data + off, (size_t)(hi - lo) * es);
    }
  }
  return ER_STATUS_OK;
}

const er_op_def er__shp_op_trilu = {
    .name = "Trilu", .domain = "", .min_version = 14, .max_version = 14,
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = trilu_check, .run = trilu_run,
};

/* ======================================================================== */

/* ======================================================================== */

/* The target size per input axis (-1 unknown); untouched axes keep theirs. */
static er_status ccp_dims(const er_kctx *ctx, int64_t *dims) {
  const er_tensor *x = ctx->in[0];
  ivec shape, axes;
  char buf[160];
  int r = x->rank;
  ER_CHECK(er__shp_read_ivec(ctx, 1, "shape", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &shape));
  ER_CHECK(er__shp_attr_ivec(ctx, "axes", ER_MAX_RANK, &axes));
  bool has_axes = axes.n >= 0;
  if (r < 0) return ER_STATUS_OK; /* the caller leaves the output unknown */
  if (!has_axes) {
    axes.n = r;
    for (int d = 0; d < r; d++) axes.v[d] = d;
  }
  ER_CHECK(er__shp_norm_axes(ctx, "axes", &axes, r));
  if (shape.n >= 0 && shape.n != axes.n)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "shape has %lld values but %s %lld",
                        (long long)shape.n, has_axes ? "axes lists" : "the input has rank",
                        (long long)axes.n);
  for (int d = 0; d < r; d++) dims[d] = x->dims[d];
  for (int64_t k = 0; k < axes.n; k++) {
    if (!shape.known) {
      dims[axes.v[k]] = -1;
      continue;
    }
    if (shape.v[k] < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "shape %s has the negative value %lld",
                          er__shp_ivec_str(&shape, buf, sizeof buf), (long long)shape.v[k]);
    dims[axes.v[k]] = shape.v[k];
  }
  return ER_STATUS_OK;
}

static er_status ccp_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t dims[ER_MAX_RANK];
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  if (!er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'shape' is missing");
  ER_CHECK(ccp_dims(ctx, dims));
  if (x->rank < 0) {
    set_unknown_dims(ctx, 0, x->dtype, -1);
    return ER_STATUS_OK;
  }
  ER_CHECK(er__shp_check_output_size(ctx, x->rank, dims));
  er__set_output(ctx, 0, x->dtype, x->rank, dims);
  return ER_STATUS_OK;
}

static er_status ccp_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int r = x->rank;
  size_t es = er_dtype_size(x->dtype);
  int64_t in_strides[ER_MAX_RANK], out_strides[ER_MAX_RANK], len[ER_MAX_RANK];
  int64_t src_off = 0, dst_off = 0;
  er__strides(r, x->dims, in_strides);
  er__strides(r, y->dims, out_strides);
  /* Per axis: crop a centred window (start rounded down) or pad, with the
   * odd extra element on the right. The output arrives zeroed, which is the
   * padding; copy the overlapping block row by row. */
  for (int d = 0; d < r; d++) {
    int64_t in = x->dims[d], out = y->dims[d];
    if (out <= in) {
      src_off += (in - out) / 2 * in_strides[d];
      len[d] = out;
    } else {
      dst_off += (out - in) / 2 * out_strides[d];
      len[d] = in;
    }
  }
  int64_t count = er__shp_dims_product(len, 0, r);
  if (count <= 0) return ER_STATUS_OK;
  if (r == 0) {
    memcpy(y->data, x->data, es);
    return ER_STATUS_OK;
  }
  int64_t inner = len[r - 1], rows = count / inner, idx[ER_MAX_RANK] = {0};
  for (int64_t row = 0; row < rows; row++) {
    int64_t so = src_off, dof = dst_off;
    for (int d = 0; d < r - 1; d++) {
      so += idx[d] * in_strides[d];
      dof += idx[d] * out_strides[d];
    }
    memcpy((uint8_t *)y->data + dof * (int64_t)es, (const uint8_t *)x->data + so * (int64_t)es,
           (size_t)inner * es);
    for (int d = r - 2; d >= 0; d--) {
      if (++idx[d] < len[d]) break;
      idx[d] = 0;
    }
  }
  return ER_STATUS_OK;
}

const er_op_def er__shp_op_center_crop_pad = {
    .name = "CenterCropPad", .domain = "", .min_version = 18, .max_version = 18,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1), .check = ccp_check, .run = ccp_run,
};
