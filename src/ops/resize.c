/* resize.c - resampling operators: Resize, Upsample, GridSample and
 * AffineGrid.
 *
 * Resize is separable: every mode (nearest, linear, cubic, with or without
 * antialiasing) weights input samples by a product of one-dimensional
 * weights, one factor per axis. The reference kernel therefore plans, per
 * axis, which input indices and weights make each output position (the
 * "taps"), and then
 *  - nearest: gathers elements directly in their own type (exact for every
 *    type, int64 included);
 *  - linear / cubic: resamples one axis at a time in double precision,
 *    shrinking axes first so intermediates never exceed max(input, output),
 *    and rounds once on the final store. */
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

/* Round half to even, independent of the floating-point environment. */
static double round_half_even(double v) {
  double r = floor(v);
  double frac = v - r;
  if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
  return r;
}

/* Stores an interpolated value: floats round to the type, integers (and
 * bool) round half to even and saturate to the type's range, so that
 * interpolation never wraps around. */
static void store_interp(void *data, er_dtype t, int64_t i, double v) {
  double lo, hi;
  switch (t) {
    case ER_DTYPE_FLOAT: ((float *)data)[i] = (float)v; return;
    case ER_DTYPE_DOUBLE: ((double *)data)[i] = v; return;
    case ER_DTYPE_FLOAT16:
    case ER_DTYPE_BFLOAT16: er__store_f64(data, t, i, v); return;
    case ER_DTYPE_BOOL: lo = 0; hi = 1; break;
    case ER_DTYPE_INT8: lo = -128; hi = 127; break;
    case ER_DTYPE_UINT8: lo = 0; hi = 255; break;
    case ER_DTYPE_INT16: lo = -32768; hi = 32767; break;
    case ER_DTYPE_UINT16: lo = 0; hi = 65535; break;
    case ER_DTYPE_INT32: lo = -2147483648.0; hi = 2147483647.0; break;
    case ER_DTYPE_UINT32: lo = 0; hi = 4294967295.0; break;
    case ER_DTYPE_INT64: lo = -9223372036854775808.0; hi = 9223372036854774784.0; break;
    case ER_DTYPE_UINT64: lo = 0; hi = 18446744073709549568.0; break;
    default: er__store_f64(data, t, i, v); return;
  }
  double r = v != v ? 0.0 : round_half_even(v);
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  if (t == ER_DTYPE_UINT64)
    ((uint64_t *)data)[i] = (uint64_t)r;
  else
    er__store_i64(data, t, i, (int64_t)r);
}

/* Copies element `src_i` of src to element `dst_i` of dst (same type of
 * `esize` bytes). */
static inline void copy_elem(void *dst, int64_t dst_i, const void *src, int64_t src_i, size_t esize) {
  switch (esize) {
    case 1: ((uint8_t *)dst)[dst_i] = ((const uint8_t *)src)[src_i]; return;
    case 2: ((uint16_t *)dst)[dst_i] = ((const uint16_t *)src)[src_i]; return;
    case 4: ((uint32_t *)dst)[dst_i] = ((const uint32_t *)src)[src_i]; return;
    case 8: ((uint64_t *)dst)[dst_i] = ((const uint64_t *)src)[src_i]; return;
    default: memcpy((char *)dst + dst_i * esize, (const char *)src + src_i * esize, esize);
  }
}

/* Keys' cubic convolution kernel with coefficient a (a = -0.75 in PyTorch,
 * -0.5 in TensorFlow). */
static double cubic_kernel(double t, double a) {
  t = fabs(t);
  if (t <= 1.0) return ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
  if (t < 2.0) return ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a;
  return 0.0;
}

static er_status oom(const er_kctx *ctx) {
  er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
  return ER_STATUS_OUT_OF_MEMORY;
}

/* ======================================================================== */
/* Resize / Upsample: parameters and shape rule                              */
/* ======================================================================== */

typedef enum rs_mode { RS_NEAREST, RS_LINEAR, RS_CUBIC } rs_mode;

typedef enum rs_coord {
  CT_HALF_PIXEL,
  CT_HALF_PIXEL_SYMMETRIC,
  CT_PYTORCH_HALF_PIXEL,
  CT_ALIGN_CORNERS,
  CT_ASYMMETRIC,
  CT_TF_HALF_PIXEL_FOR_NN,
  CT_TF_CROP_AND_RESIZE,
} rs_coord;

typedef enum rs_nearest {
  NM_ROUND_PREFER_FLOOR,
  NM_ROUND_PREFER_CEIL,
  NM_FLOOR,
  NM_CEIL,
  /* Resize-10 and Upsample: truncate, or ceil when downsampling (what
   * onnxruntime has always done for these versions, which name no mode). */
  NM_SIMPLE,
} rs_nearest;

typedef enum rs_policy { KP_STRETCH, KP_NOT_LARGER, KP_NOT_SMALLER } rs_policy;

/* Everything a Resize / Upsample node says about how to resample. */
typedef struct rs_params {
  rs_mode mode;
  rs_coord coord;
  rs_nearest nearest;
  rs_policy policy;
  double cubic_a;
  double extrapolation;
  bool exclude_outside, antialias;
  bool upsample;            /* Upsample: scales must be >= 1 */
  int x_i, roi_i, scales_i, sizes_i; /* input indices; -1 = not in this version */
  int64_t n_axes;           /* -1 = all axes */
  const int64_t *axes;      /* [n_axes] as given (maybe negative) */
  const float *scales_attr; /* Upsample-7 */
  int64_t n_scales_attr;
} rs_params;

/* Upsample also accepts "bilinear", its name for linear before opset 7,
 * which old exporters kept writing. */
static er_status parse_mode(const er_kctx *ctx, const char *s, bool upsample, bool cubic_ok, rs_mode *out) {
  if (strcmp(s, "nearest") == 0) *out = RS_NEAREST;
  else if (strcmp(s, "linear") == 0 || (upsample && strcmp(s, "bilinear") == 0)) *out = RS_LINEAR;
  else if (cubic_ok && strcmp(s, "cubic") == 0) *out = RS_CUBIC;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "mode '%s' must be nearest, linear%s", s,
                        cubic_ok ? " or cubic" : "");
  return ER_STATUS_OK;
}

/* Reads the attributes of Resize (any version) or Upsample. */
static er_status rs_params_get(const er_kctx *ctx, bool upsample, rs_params *p) {
  int v = ctx->node->version;
  const char *s;
  memset(p, 0, sizeof *p);
  p->upsample = upsample;
  p->n_axes = -1;
  p->x_i = 0;
  p->roi_i = p->scales_i = p->sizes_i = -1;
  p->coord = CT_ASYMMETRIC;
  p->nearest = NM_SIMPLE;
  p->cubic_a = -0.75;
  ER_CHECK(er__attr_string(ctx, "mode", "nearest", &s));
  ER_CHECK(parse_mode(ctx, s, upsample, !upsample && v >= 11, &p->mode));
  if (upsample) {
    if (v < 9) {
      ER_CHECK(er__attr_floats(ctx, "scales", &p->scales_attr, &p->n_scales_attr));
      if (!p->scales_attr)
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'scales' is required");
    } else {
      p->scales_i = 1;
    }
    return ER_STATUS_OK;
  }
  if (v < 11) {
    p->scales_i = 1;
    return ER_STATUS_OK;
  }
  p->roi_i = 1;
  p->scales_i = 2;
  p->sizes_i = 3;
  ER_CHECK(er__attr_string(ctx, "coordinate_transformation_mode", "half_pixel", &s));
  if (strcmp(s, "half_pixel") == 0) p->coord = CT_HALF_PIXEL;
  else if (strcmp(s, "half_pixel_symmetric") == 0 && v >= 19) p->coord = CT_HALF_PIXEL_SYMMETRIC;
  else if (strcmp(s, "pytorch_half_pixel") == 0) p->coord = CT_PYTORCH_HALF_PIXEL;
  else if (strcmp(s, "align_corners") == 0) p->coord = CT_ALIGN_CORNERS;
  else if (strcmp(s, "asymmetric") == 0) p->coord = CT_ASYMMETRIC;
  else if (strcmp(s, "tf_half_pixel_for_nn") == 0) p->coord = CT_TF_HALF_PIXEL_FOR_NN;
  else if (strcmp(s, "tf_crop_and_resize") == 0) p->coord = CT_TF_CROP_AND_RESIZE;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "coordinate_transformation_mode '%s' is not one of half_pixel,%s "
                        "pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize",
                        s, v >= 19 ? " half_pixel_symmetric," : "");
  ER_CHECK(er__attr_string(ctx, "nearest_mode", "round_prefer_floor", &s));
  if (strcmp(s, "round_prefer_floor") == 0) p->nearest = NM_ROUND_PREFER_FLOOR;
  else if (strcmp(s, "round_prefer_ceil") == 0) p->nearest = NM_ROUND_PREFER_CEIL;
  else if (strcmp(s, "floor") == 0) p->nearest = NM_FLOOR;
  else if (strcmp(s, "ceil") == 0) p->nearest = NM_CEIL;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "nearest_mode '%s' must be round_prefer_floor, round_prefer_ceil, floor or ceil", s);
  float f;
  int64_t i;
  ER_CHECK(er__attr_float(ctx, "cubic_coeff_a", -0.75f, &f));
  p->cubic_a = f;
  ER_CHECK(er__attr_float(ctx, "extrapolation_value", 0.0f, &f));
  p->extrapolation = f;
  ER_CHECK(er__attr_int(ctx, "exclude_outside", 0, &i));
  p->exclude_outside = i != 0;
  if (v >= 18) {
    ER_CHECK(er__attr_int(ctx, "antialias", 0, &i));
    p->antialias = i != 0;
    if (p->antialias && p->mode == RS_NEAREST)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "antialias applies to linear and cubic modes, not nearest");
    ER_CHECK(er__attr_ints(ctx, "axes", &p->axes, &p->n_axes));
    ER_CHECK(er__attr_string(ctx, "keep_aspect_ratio_policy", "stretch", &s));
    if (strcmp(s, "stretch") == 0) p->policy = KP_STRETCH;
    else if (strcmp(s, "not_larger") == 0) p->policy = KP_NOT_LARGER;
    else if (strcmp(s, "not_smaller") == 0) p->policy = KP_NOT_SMALLER;
    else
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "keep_aspect_ratio_policy '%s' must be stretch, not_larger or not_smaller", s);
  }
  return ER_STATUS_OK;
}

/* One axis of a resize. */
typedef struct rs_axis {
  int64_t in, out;   /* lengths; -1 unknown */
  double scale;      /* output / input length factor the coordinate rule divides by */
  double out_w;      /* scale * in: the output length, fractional when scales are given */
  double roi0, roi1; /* crop window (tf_crop_and_resize), normalized input coordinates */
} rs_axis;

typedef struct rs_plan {
  int rank;          /* -1 unknown */
  rs_axis ax[ER_MAX_RANK];
} rs_plan;

/* The tensor input i when it holds at least one element (or might);
 * an empty tensor stands for an omitted input (Resize-11 needs a name for
 * scales even when sizes is used). */
static const er_tensor *nonempty_in(const er_kctx *ctx, int i) {
  const er_tensor *t = i >= 0 ? er__in(ctx, i) : NULL;
  if (t && er__tensor_count(t) == 0) return NULL;
  return t;
}

/* Validates the inputs and computes the output lengths (the shape rule),
 * with whatever is known. */
static er_status rs_plan_make(const er_kctx *ctx, const rs_params *p, rs_plan *pl) {
  const er_tensor *x = ctx->in[p->x_i];
  const er_tensor *scales = nonempty_in(ctx, p->scales_i), *sizes = nonempty_in(ctx, p->sizes_i);
  const er_tensor *roi = p->roi_i >= 0 ? er__in(ctx, p->roi_i) : NULL;
  int r = x->rank;
  pl->rank = r;
  /* An input of still unknown length may turn out empty: decide only on
   * what is certain. */
  bool scales_given = scales && er__tensor_count(scales) > 0;
  bool sizes_given = sizes && er__tensor_count(sizes) > 0;
  if (scales_given && sizes_given)
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "scales and sizes are both given; give exactly one");
  if (!scales && !sizes && !p->scales_attr)
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "one of scales and sizes is required");
  if (scales && sizes) {
    if (scales_given) sizes = NULL;
    else if (sizes_given) scales = NULL;
  }
  if (r < 0) return ER_STATUS_OK;
  if (r == 0) return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input X must have rank >= 1");

  /* Which axes scales / sizes / roi talk about. */
  int axes[ER_MAX_RANK], n_axes = 0;
  bool used[ER_MAX_RANK] = {false};
  if (p->n_axes >= 0) {
    if (p->n_axes > r)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "axes has %lld values for rank %d",
                          (long long)p->n_axes, r);
    for (int64_t k = 0; k < p->n_axes; k++) {
      int a;
      ER_CHECK(er__norm_axis(ctx, "axes", p->axes[k], r, &a));
      if (used[a])
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "axis %d appears twice in axes", a);
      used[a] = true;
      axes[n_axes++] = a;
    }
  } else {
    for (int a = 0; a < r; a++) axes[n_axes++] = a;
  }
  for (int d = 0; d < r; d++) {
    pl->ax[d].in = x->dims[d];
    pl->ax[d].out = x->dims[d];
    pl->ax[d].scale = 1.0;
    pl->ax[d].out_w = (double)x->dims[d];
    pl->ax[d].roi0 = 0.0;
    pl->ax[d].roi1 = 1.0;
  }
  bool undecided = scales && sizes; /* which one is not known yet */
  const er_tensor *given = undecided ? NULL : (scales ? scales : sizes);
  int64_t n_given = p->scales_attr ? p->n_scales_attr : (given ? er__tensor_count(given) : -1);
  if (n_given >= 0 && n_given != n_axes)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s has %lld values; expected %d (%s)",
                        sizes ? "sizes" : "scales", (long long)n_given, n_axes,
                        p->n_axes >= 0 ? "one per entry of axes" : "one per input dim");

  if (p->coord == CT_TF_CROP_AND_RESIZE) {
    if (!roi)
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "tf_crop_and_resize needs the roi input");
    int64_t nr = er__tensor_count(roi);
    if (nr >= 0 && nr != 2 * n_axes)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "roi has %lld values; expected %d (starts, then ends)",
                          (long long)nr, 2 * n_axes);
    if (roi->data)
      for (int k = 0; k < n_axes; k++) {
        pl->ax[axes[k]].roi0 = er__load_f64(roi->data, roi->dtype, k);
        pl->ax[axes[k]].roi1 = er__load_f64(roi->data, roi->dtype, n_axes + k);
      }
  }

  /* Output lengths of the resized axes. */
  bool values_known = p->scales_attr || (given && given->data);
  if (undecided) values_known = false;
  for (int k = 0; k < n_axes; k++) pl->ax[axes[k]].out = -1;
  if (!values_known) return ER_STATUS_OK;
  if (p->scales_attr || scales) {
    for (int k = 0; k < n_axes; k++) {
      rs_axis *a = &pl->ax[axes[k]];
      double s = p->scales_attr ? p->scales_attr[k] : er__load_f64(scales->data, scales->dtype, k);
      if (!(s > 0.0) || (p->upsample && !(s >= 1.0)) || s > 1e15)
        return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE, "scales[%d] = %g must be %s", k, s,
                            p->upsample ? ">= 1" : "> 0 (and finite)");
      a->scale = s;
      if (a->in < 0) continue;
      a->out_w = s * (double)a->in;
      if (a->out_w >= 9.2e18)
        return er__op_error(ctx, ER_STATUS_LIMIT, "scales[%d] = %g makes axis %d too long", k, s, axes[k]);
      a->out = (int64_t)floor(a->out_w);
    }
    return ER_STATUS_OK;
  }
  /* sizes */
  double policy_scale = p->policy == KP_NOT_LARGER ? INFINITY : 0.0;
  bool all_in_known = true;
  for (int k = 0; k < n_axes; k++) {
    rs_axis *a = &pl->ax[axes[k]];
    int64_t sz = er__get_i64(sizes, k);
    if (sz < 0)
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE, "sizes[%d] = %lld must be >= 0", k, (long long)sz);
    if (a->in < 0) {
      all_in_known = false;
      continue;
    }
    if (a->in == 0 && sz != 0)
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                          "axis %d is empty and cannot be resized to sizes[%d] = %lld", axes[k], k,
                          (long long)sz);
    a->out = sz;
    a->scale = a->in == 0 ? 1.0 : (double)sz / (double)a->in;
    a->out_w = (double)sz;
    if (p->policy == KP_NOT_LARGER && a->scale < policy_scale) policy_scale = a->scale;
    if (p->policy == KP_NOT_SMALLER && a->scale > policy_scale) policy_scale = a->scale;
  }
  if (p->policy != KP_STRETCH) {
    for (int k = 0; k < n_axes; k++) {
      rs_axis *a = &pl->ax[axes[k]];
      if (!all_in_known) {
        a->out = -1;
        continue;
      }
      a->scale = policy_scale;
      a->out_w = policy_scale * (double)a->in;
      /* round_int: nearest, halfway cases up */
      a->out = (int64_t)floor(a->out_w + 0.5);
    }
  }
  return ER_STATUS_OK;
}

static void rs_set_output(const er_kctx *ctx, const rs_params *p, const rs_plan *pl) {
  const er_tensor *x = ctx->in[p->x_i];
  int64_t dims[ER_MAX_RANK];
  for (int d = 0; d < pl->rank; d++) dims[d] = pl->ax[d].out;
  er__set_output(ctx, 0, x->dtype, pl->rank, dims);
}

/* ======================================================================== */
/* Resize / Upsample: per-axis taps and the kernel                           */
/* ======================================================================== */

/* Input coordinate of output position j along one axis. */
static double rs_source_coord(const rs_params *p, const rs_axis *a, double j) {
  double in = (double)a->in, s = a->scale;
  switch (p->coord) {
    case CT_HALF_PIXEL: return (j + 0.5) / s - 0.5;
    case CT_HALF_PIXEL_SYMMETRIC: {
      /* Centres the sampled window when the output length was rounded. */
      double adjustment = (double)a->out / a->out_w;
      double offset = in / 2.0 * (1.0 - adjustment);
      return offset + (j + 0.5) / s - 0.5;
    }
    case CT_PYTORCH_HALF_PIXEL: return a->out > 1 ? (j + 0.5) / s - 0.5 : 0.0;
    /* align_corners and tf_crop_and_resize use the fractional output length
     * when scales are given, as the spec's output_width and the ONNX test
     * data do. */
    case CT_ALIGN_CORNERS: return a->out_w == 1.0 ? 0.0 : j * (in - 1.0) / (a->out_w - 1.0);
    case CT_ASYMMETRIC: return j / s;
    case CT_TF_HALF_PIXEL_FOR_NN: return (j + 0.5) / s;
    case CT_TF_CROP_AND_RESIZE:
      if (a->out_w == 1.0) return 0.5 * (a->roi0 + a->roi1) * (in - 1.0);
      return a->roi0 * (in - 1.0) + j * (a->roi1 - a->roi0) * (in - 1.0) / (a->out_w - 1.0);
  }
  return 0.0;
}

/* Which input samples make each output position along one axis. */
typedef struct rs_taps {
  int64_t ntaps;   /* taps per output position */
  int64_t *idx;    /* [out, ntaps] input indices, clamped into [0, in) */
  double *w;       /* [out, ntaps] weights */
  bool *extrap;    /* [out] position takes the extrapolation value */
  bool identity;   /* output j is exactly input j */
} rs_taps;

static void rs_taps_free(rs_taps *t) {
  free(t->idx);
  free(t->w);
  free(t->extrap);
  memset(t, 0, sizeof *t);
}

/* Nearest input index to coordinate x. */
static int64_t rs_nearest_index(const rs_params *p, const rs_axis *a, double x) {
  double f = floor(x);
  switch (p->nearest) {
    case NM_ROUND_PREFER_FLOOR: return (int64_t)(x - f <= 0.5 ? f : f + 1.0);
    case NM_ROUND_PREFER_CEIL: return (int64_t)(x - f < 0.5 ? f : f + 1.0);
    case NM_FLOOR: return (int64_t)f;
    case NM_CEIL: return (int64_t)ceil(x);
    case NM_SIMPLE: return a->scale < 1.0 ? (int64_t)ceil(x) : (int64_t)trunc(x);
  }
  return (int64_t)f;
}

static er_status rs_build_taps(const er_kctx *ctx, const rs_params *p, const rs_axis *a, rs_taps *t) {
  int64_t in = a->in, out = a->out;
  memset(t, 0, sizeof *t);
  /* Support radius of the kernel (in input samples at scale 1) and how far
   * antialiasing stretches it when downsampling. */
  double radius = p->mode == RS_CUBIC ? 2.0 : 1.0;
  double aa = (p->antialias && a->scale < 1.0) ? a->scale : 1.0;
  int64_t first; /* offset of the first tap from floor(x) */
  if (p->mode == RS_NEAREST) {
    t->ntaps = 1;
    first = 0;
  } else {
    /* Taps cover every integer offset i with |i - frac| * aa < radius:
     * i in [first, 2 - first). With aa >= 1/in (the output has at least one
     * element) this is at most 2 * radius * in + 2 taps. */
    double lim = radius / aa;
    first = (int64_t)floor(-lim) + 1;
    t->ntaps = 2 - 2 * first;
  }
  size_t n = (size_t)(out > 0 ? out : 1);
  t->idx = er__malloc(n * (size_t)t->ntaps * sizeof *t->idx, "resize taps");
  t->w = er__malloc(n * (size_t)t->ntaps * sizeof *t->w, "resize weights");
  t->extrap = er__calloc(n, sizeof *t->extrap, "resize flags");
  if (!t->idx || !t->w || !t->extrap) {
    rs_taps_free(t);
    return oom(ctx);
  }
  bool identity = in == out;
  /* Coordinates far outside the input behave like the nearest edge (or
   * extrapolate); bounding them keeps the integer conversions defined. */
  double bound = (double)in + 16.0 + (double)t->ntaps;
  for (int64_t j = 0; j < out; j++) {
    double x = rs_source_coord(p, a, (double)j);
    if (p->coord == CT_TF_CROP_AND_RESIZE && !(x >= 0.0 && x <= (double)in - 1.0)) t->extrap[j] = true;
    if (!(x >= -bound)) x = -bound; /* NaN included */
    if (x > bound) x = bound;
    int64_t *ti = t->idx + j * t->ntaps;
    double *tw = t->w + j * t->ntaps;
    if (p->mode == RS_NEAREST) {
      ti[0] = rs_nearest_index(p, a, x);
      tw[0] = 1.0;
    } else {
      double x0 = floor(x), frac = x - x0, sum = 0.0;
      for (int64_t k = 0; k < t->ntaps; k++) {
        double off = (double)(first + k) - frac; /* sample position - x */
        double wv;
        if (p->mode == RS_LINEAR) {
          wv = 1.0 - fabs(off * aa);
          if (wv < 0.0) wv = 0.0;
        } else {
          wv = cubic_kernel(off * aa, p->cubic_a);
        }
        ti[k] = (int64_t)x0 + first + k;
        tw[k] = wv;
        sum += wv;
      }
      /* The stretched antialiasing filter is normalized to sum 1 (the
       * plain kernels already do). */
      if (aa < 1.0 && sum != 0.0)
        for (int64_t k = 0; k < t->ntaps; k++) tw[k] /= sum;
      if (p->exclude_outside) {
        sum = 0.0;
        for (int64_t k = 0; k < t->ntaps; k++) {
          if (ti[k] < 0 || ti[k] >= in) tw[k] = 0.0;
          sum += tw[k];
        }
        if (sum != 0.0)
          for (int64_t k = 0; k < t->ntaps; k++) tw[k] /= sum;
      }
    }
    /* Samples past the edges repeat the edge sample. */
    bool one = false;
    for (int64_t k = 0; k < t->ntaps; k++) {
      if (ti[k] < 0) ti[k] = 0;
      if (ti[k] > in - 1) ti[k] = in - 1;
      if (tw[k] != 0.0) {
        if (ti[k] != j || tw[k] != 1.0 || one) identity = false;
        one = true;
      }
    }
    if (!one || t->extrap[j]) identity = false;
  }
  t->identity = identity;
  return ER_STATUS_OK;
}

/* Nearest: out[o...] = x[idx_0[o_0], idx_1[o_1], ...] copied in its own
 * type; positions flagged on any axis take the extrapolation value. */
static void rs_run_nearest(const rs_params *p, const rs_plan *pl, const rs_taps *taps,
                           const er_tensor *x, er_tensor *y) {
  int r = pl->rank;
  size_t es = er_dtype_size(x->dtype);
  int64_t in_str[ER_MAX_RANK], coord[ER_MAX_RANK] = {0};
  er__strides(r, x->dims, in_str);
  int64_t total = er__count(y);
  if (total == 0) return;
  int64_t last = pl->ax[r - 1].out;
  for (int64_t o = 0; o < total; o += last) {
    int64_t base = 0;
    bool ex = false;
    for (int d = 0; d < r - 1; d++) {
      base += taps[d].idx[coord[d]] * in_str[d];
      ex = ex || taps[d].extrap[coord[d]];
    }
    const rs_taps *tl = &taps[r - 1];
    for (int64_t j = 0; j < last; j++) {
      if (ex || tl->extrap[j])
        store_interp(y->data, y->dtype, o + j, p->extrapolation);
      else
        copy_elem(y->data, o + j, x->data, base + tl->idx[j] * in_str[r - 1], es);
    }
    for (int d = r - 2; d >= 0; d--) {
      if (++coord[d] < pl->ax[d].out) break;
      coord[d] = 0;
    }
  }
}

/* Resamples axis d of src (dims) into dst (dims with axis d = out). */
static void rs_pass(const double *src, double *dst, const int64_t *dims, int r, int d, const rs_taps *t,
                    int64_t out) {
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < d; k++) outer *= dims[k];
  for (int k = d + 1; k < r; k++) inner *= dims[k];
  int64_t in = dims[d];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < out; j++) {
      double *dp = dst + (o * out + j) * inner;
      for (int64_t i = 0; i < inner; i++) dp[i] = 0.0;
      for (int64_t k = 0; k < t->ntaps; k++) {
        double wv = t->w[j * t->ntaps + k];
        if (wv == 0.0) continue;
        const double *sp = src + (o * in + t->idx[j * t->ntaps + k]) * inner;
        for (int64_t i = 0; i < inner; i++) dp[i] += wv * sp[i];
      }
    }
}

/* Linear / cubic: separable passes in double, then one rounding store. */
static er_status rs_run_interp(const er_kctx *ctx, const rs_params *p, const rs_plan *pl,
                               const rs_taps *taps, const er_tensor *x, er_tensor *y) {
  int r = pl->rank;
  int64_t nin = er__count(x), nout = er__count(y);
  int64_t cap = nin > nout ? nin : nout;
  double *a = er__malloc((size_t)cap * sizeof *a, "resize buffers"); /* current data */
  double *b = er__malloc((size_t)cap * sizeof *b, "resize buffers"); /* next pass */
  if (!a || !b) {
    free(a);
    free(b);
    return oom(ctx);
  }
  if (nout > 0) {
    if (x->dtype == ER_DTYPE_FLOAT)
      for (int64_t i = 0; i < nin; i++) a[i] = ((const float *)x->data)[i];
    else
      for (int64_t i = 0; i < nin; i++) a[i] = er__load_f64(x->data, x->dtype, i);
    /* Shrinking axes first keeps every intermediate within max(in, out). */
    int order[ER_MAX_RANK], n = 0;
    for (int pass = 0; pass < 2; pass++)
      for (int d = 0; d < r; d++) {
        bool shrinks = pl->ax[d].out < pl->ax[d].in;
        if ((pass == 0) == shrinks && !taps[d].identity) order[n++] = d;
      }
    int64_t dims[ER_MAX_RANK];
    for (int d = 0; d < r; d++) dims[d] = pl->ax[d].in;
    for (int k = 0; k < n; k++) {
      int d = order[k];
      rs_pass(a, b, dims, r, d, &taps[d], pl->ax[d].out);
      dims[d] = pl->ax[d].out;
      double *tmp = a;
      a = b;
      b = tmp;
    }
    /* tf_crop_and_resize: positions outside the input on any axis. */
    int64_t str[ER_MAX_RANK];
    er__strides(r, dims, str);
    for (int d = 0; d < r; d++)
      for (int64_t j = 0; j < dims[d]; j++) {
        if (!taps[d].extrap[j]) continue;
        int64_t outer = nout / (dims[d] * str[d]);
        for (int64_t o = 0; o < outer; o++) {
          double *dp = a + o * dims[d] * str[d] + j * str[d];
          for (int64_t i = 0; i < str[d]; i++) dp[i] = p->extrapolation;
        }
      }
    if (y->dtype == ER_DTYPE_FLOAT)
      for (int64_t i = 0; i < nout; i++) ((float *)y->data)[i] = (float)a[i];
    else
      for (int64_t i = 0; i < nout; i++) store_interp(y->data, y->dtype, i, a[i]);
  }
  free(a);
  free(b);
  return ER_STATUS_OK;
}

static er_status rs_run(er_kctx *ctx, bool upsample) {
  rs_params p;
  rs_plan pl;
  ER_CHECK(rs_params_get(ctx, upsample, &p));
  ER_CHECK(rs_plan_make(ctx, &p, &pl));
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  if (er__count(y) == 0) return ER_STATUS_OK;
  rs_taps taps[ER_MAX_RANK];
  memset(taps, 0, sizeof taps);
  er_status st = ER_STATUS_OK;
  for (int d = 0; d < pl.rank && st == ER_STATUS_OK; d++) st = rs_build_taps(ctx, &p, &pl.ax[d], &taps[d]);
  if (st == ER_STATUS_OK) {
    if (p.mode == RS_NEAREST)
      rs_run_nearest(&p, &pl, taps, x, y);
    else
      st = rs_run_interp(ctx, &p, &pl, taps, x, y);
  }
  for (int d = 0; d < pl.rank; d++) rs_taps_free(&taps[d]);
  return st;
}

static const er_dtype rs_x_types[] = {
    ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,  ER_DTYPE_DOUBLE, ER_DTYPE_INT8,
    ER_DTYPE_INT16,   ER_DTYPE_INT32,    ER_DTYPE_INT64,  ER_DTYPE_UINT8,  ER_DTYPE_UINT16,
    ER_DTYPE_UINT32,  ER_DTYPE_UINT64,   ER_DTYPE_BOOL,   ER_DTYPE_UNDEFINED};
static const er_dtype float_only[] = {ER_DTYPE_FLOAT, ER_DTYPE_UNDEFINED};
static const er_dtype int64_only[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};
static const er_dtype roi_types[] = {ER_DTYPE_FLOAT16, ER_DTYPE_FLOAT, ER_DTYPE_DOUBLE, ER_DTYPE_UNDEFINED};

static er_status rs_check(er_kctx *ctx, bool upsample) {
  rs_params p;
  rs_plan pl;
  ER_CHECK(rs_params_get(ctx, upsample, &p));
  ER_CHECK(er__require_type(ctx, 0, rs_x_types));
  if (p.scales_i >= 0 && er__in(ctx, p.scales_i)) {
    ER_CHECK(er__require_type(ctx, p.scales_i, float_only));
    ER_CHECK(er__require_rank(ctx, p.scales_i, 1, 1));
  }
  if (p.sizes_i >= 0 && er__in(ctx, p.sizes_i)) {
    ER_CHECK(er__require_type(ctx, p.sizes_i, int64_only));
    ER_CHECK(er__require_rank(ctx, p.sizes_i, 1, 1));
  }
  if (p.roi_i >= 0 && er__in(ctx, p.roi_i) && p.coord == CT_TF_CROP_AND_RESIZE)
    ER_CHECK(er__require_type(ctx, p.roi_i, roi_types));
  ER_CHECK(rs_plan_make(ctx, &p, &pl));
  rs_set_output(ctx, &p, &pl);
  return ER_STATUS_OK;
}

static er_status resize_check(er_kctx *ctx) { return rs_check(ctx, false); }
static er_status resize_run(er_kctx *ctx) { return rs_run(ctx, false); }
static er_status upsample_check(er_kctx *ctx) { return rs_check(ctx, true); }
static er_status upsample_run(er_kctx *ctx) { return rs_run(ctx, true); }

/* Resize-10: X and scales; asymmetric coordinates, nearest or linear. */
static const er_op_def op_resize_10 = {
    .name = "Resize", .domain = "", .min_version = 10, .max_version = 10,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = resize_check, .run = resize_run,
};

/* Resize-11 to 19: X, roi, scales, sizes. */
static const er_op_def op_resize = {
    .name = "Resize", .domain = "", .min_version = 11, .max_version = 19,
    .min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = (1u << 2) | (1u << 3),
    .check = resize_check, .run = resize_run,
};

/* Upsample-7 (scales attribute) and 9/10 (scales input). */
static const er_op_def op_upsample_7 = {
    .name = "Upsample", .domain = "", .min_version = 7, .max_version = 7,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = upsample_check, .run = upsample_run,
};

static const er_op_def op_upsample_9 = {
    .name = "Upsample", .domain = "", .min_version = 9, .max_version = 10,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = upsample_check, .run = upsample_run,
};

/* ======================================================================== */
/* GridSample                                                                */
/* ======================================================================== */

typedef enum gs_padding { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_padding;

typedef struct gs_params {
  rs_mode mode;
  gs_padding padding;
  bool align_corners;
} gs_params;

static er_status gs_params_get(const er_kctx *ctx, gs_params *p) {
  int v = ctx->node->version;
  const char *s;
  int64_t ac;
  /* Version 16 names the modes bilinear / bicubic; 20 renamed them. */
  ER_CHECK(er__attr_string(ctx, "mode", v >= 20 ? "linear" : "bilinear", &s));
  if (strcmp(s, "nearest") == 0) p->mode = RS_NEAREST;
  else if (strcmp(s, v >= 20 ? "linear" : "bilinear") == 0) p->mode = RS_LINEAR;
  else if (strcmp(s, v >= 20 ? "cubic" : "bicubic") == 0) p->mode = RS_CUBIC;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "mode '%s' must be %s", s,
                        v >= 20 ? "linear, nearest or cubic" : "bilinear, nearest or bicubic");
  ER_CHECK(er__attr_string(ctx, "padding_mode", "zeros", &s));
  if (strcmp(s, "zeros") == 0) p->padding = GS_ZEROS;
  else if (strcmp(s, "border") == 0) p->padding = GS_BORDER;
  else if (strcmp(s, "reflection") == 0) p->padding = GS_REFLECTION;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "padding_mode '%s' must be zeros, border or reflection", s);
  ER_CHECK(er__attr_int(ctx, "align_corners", 0, &ac));
  p->align_corners = ac != 0;
  return ER_STATUS_OK;
}

static const er_dtype gs_grid_types[] = {ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,
                                         ER_DTYPE_DOUBLE, ER_DTYPE_UNDEFINED};

static er_status grid_sample_check(er_kctx *ctx) {
  int v = ctx->node->version;
  const er_tensor *x = ctx->in[0], *grid = ctx->in[1];
  gs_params p;
  char sx[160], sg[160];
  ER_CHECK(gs_params_get(ctx, &p));
  ER_CHECK(er__require_type(ctx, 0, rs_x_types));
  ER_CHECK(er__require_type(ctx, 1, gs_grid_types));
  if (v < 20) {
    ER_CHECK(er__require_rank(ctx, 0, 4, 4));
    ER_CHECK(er__require_rank(ctx, 1, 4, 4));
  } else {
    ER_CHECK(er__require_rank(ctx, 0, 3, ER_MAX_RANK));
    ER_CHECK(er__require_rank(ctx, 1, 3, ER_MAX_RANK));
  }
  int r = x->rank >= 0 ? x->rank : grid->rank;
  if (r < 0) {
    er__set_output(ctx, 0, x->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  if (x->rank >= 0 && grid->rank >= 0) {
    bool ok = x->rank == grid->rank;
    if (ok && x->dims[0] >= 0 && grid->dims[0] >= 0) ok = x->dims[0] == grid->dims[0];
    if (ok && grid->dims[r - 1] >= 0) ok = grid->dims[r - 1] == r - 2;
    if (!ok)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "X %s and grid %s do not fit: grid must be [N, D1_out, ..., %d] for X [N, C, "
                          "D1, ...] of rank %d",
                          er__shape_str(x, sx, sizeof sx), er__shape_str(grid, sg, sizeof sg), r - 2, r);
  }
  int64_t dims[ER_MAX_RANK];
  dims[0] = x->rank >= 0 ? x->dims[0] : grid->dims[0];
  dims[1] = x->rank >= 0 ? x->dims[1] : -1;
  for (int d = 2; d < r; d++) dims[d] = grid->rank >= 0 ? grid->dims[d - 1] : -1;
  er__set_output(ctx, 0, x->dtype, r, dims);
  return ER_STATUS_OK;
}

/* Reflects x into [lo, hi] (repeatedly, like a mirror hall). */
static double gs_reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0.0) return lo;
  if (x < lo) {
    double dx = lo - x, n = floor(dx / range), rem = dx - n * range;
    return fmod(n, 2.0) == 0.0 ? lo + rem : hi - rem;
  }
  if (x > hi) {
    double dx = x - hi, n = floor(dx / range), rem = dx - n * range;
    return fmod(n, 2.0) == 0.0 ? hi - rem : lo + rem;
  }
  return x;
}

/* Taps of one spatial dim for one sampling point. */
typedef struct gs_taps {
  int n;
  int64_t idx[4];   /* input index, -1 = outside (zeros padding) */
  double w[4];
} gs_taps;

/* Maps a sample index i through the padding mode: its index in [0, len),
 * or -1 when it reads zero padding. */
static int64_t gs_pixel(const gs_params *p, int64_t i, int64_t len, double lo, double hi) {
  if (i >= 0 && i < len) return i;
  switch (p->padding) {
    case GS_ZEROS: return -1;
    case GS_BORDER: return i < 0 ? 0 : len - 1;
    case GS_REFLECTION: {
      int64_t k = (int64_t)gs_reflect((double)i, lo, hi);
      return k < 0 ? 0 : (k >= len ? len - 1 : k);
    }
  }
  return -1;
}

static void gs_make_taps(const gs_params *p, double g, int64_t len, gs_taps *t) {
  double lo = p->align_corners ? 0.0 : -0.5, hi = p->align_corners ? (double)len - 1.0 : (double)len - 0.5;
  /* Denormalize: -1 and 1 are the corner pixels' centres (align_corners)
   * or their outer edges. */
  double x = p->align_corners ? (g + 1.0) / 2.0 * ((double)len - 1.0) : ((g + 1.0) * (double)len - 1.0) / 2.0;
  double bound = (double)len + 1e9; /* keeps integer conversions defined; NaN goes low */
  if (!(x >= -bound)) x = -bound;
  if (x > bound) x = bound;
  if (p->mode == RS_NEAREST) x = round_half_even(x);
  /* Like torch.nn.functional.grid_sample (which the spec points to), nearest
   * and linear apply border / reflection to the sampling coordinate, while
   * cubic applies it to each of its taps only (below, in gs_pixel). */
  if ((x < lo || x > hi) && p->mode != RS_CUBIC) {
    if (p->padding == GS_BORDER) x = x < 0.0 ? 0.0 : (x > (double)len - 1.0 ? (double)len - 1.0 : x);
    else if (p->padding == GS_REFLECTION) x = gs_reflect(x, lo, hi);
  }
  if (p->mode == RS_NEAREST) {
    t->n = 1;
    t->idx[0] = gs_pixel(p, (int64_t)x, len, lo, hi);
    t->w[0] = 1.0;
    return;
  }
  double x0 = floor(x), frac = x - x0;
  int64_t i0 = (int64_t)x0;
  if (p->mode == RS_LINEAR) {
    t->n = 2;
    t->idx[0] = gs_pixel(p, i0, len, lo, hi);
    t->idx[1] = gs_pixel(p, i0 + 1, len, lo, hi);
    t->w[0] = 1.0 - frac;
    t->w[1] = frac;
    return;
  }
  t->n = 4;
  for (int k = 0; k < 4; k++) {
    t->idx[k] = gs_pixel(p, i0 - 1 + k, len, lo, hi);
    t->w[k] = cubic_kernel((double)(k - 1) - frac, -0.75);
  }
}

static er_status grid_sample_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *grid = ctx->in[1];
  er_tensor *y = ctx->out[0];
  gs_params p;
  ER_CHECK(gs_params_get(ctx, &p));
  int r = x->rank, ns = r - 2;
  int64_t N = x->dims[0], C = x->dims[1];
  int64_t in_str[ER_MAX_RANK], xs_count = 1, pos_count = 1;
  er__strides(ns, x->dims + 2, in_str);
  for (int d = 0; d < ns; d++) {
    xs_count *= x->dims[d + 2];
    pos_count *= grid->dims[d + 1];
  }
  if (er__count(y) == 0) return ER_STATUS_OK;
  size_t es = er_dtype_size(x->dtype);
  for (int64_t n = 0; n < N; n++)
    for (int64_t q = 0; q < pos_count; q++) {
      gs_taps taps[ER_MAX_RANK];
      /* grid holds coordinates innermost dim first: component 0 is the
       * last spatial dim of X. */
      int64_t gbase = (n * pos_count + q) * ns;
      for (int d = 0; d < ns; d++) {
        double g = er__load_f64(grid->data, grid->dtype, gbase + (ns - 1 - d));
        gs_make_taps(&p, g, x->dims[d + 2], &taps[d]);
      }
      for (int64_t c = 0; c < C; c++) {
        int64_t xoff = (n * C + c) * xs_count, yi = (n * C + c) * pos_count + q;
        if (p.mode == RS_NEAREST) {
          int64_t off = 0;
          bool inside = true;
          for (int d = 0; d < ns; d++) {
            inside = inside && taps[d].idx[0] >= 0;
            off += taps[d].idx[0] * in_str[d];
          }
          if (inside) copy_elem(y->data, yi, x->data, xoff + off, es);
          continue; /* outputs start zeroed: zeros padding needs no store */
        }
        /* Sum over every combination of taps (2^ns or 4^ns). */
        int k[ER_MAX_RANK] = {0};
        double acc = 0.0;
        for (;;) {
          double wv = 1.0;
          int64_t off = 0;
          bool inside = true;
          for (int d = 0; d < ns; d++) {
            wv *= taps[d].w[k[d]];
            inside = inside && taps[d].idx[k[d]] >= 0;
            off += taps[d].idx[k[d]] * in_str[d];
          }
          if (inside && wv != 0.0) acc += wv * er__load_f64(x->data, x->dtype, xoff + off);
          int d = ns - 1;
          while (d >= 0 && ++k[d] == taps[d].n) k[d--] = 0;
          if (d < 0) break;
        }
        store_interp(y->data, y->dtype, yi, acc);
      }
    }
  return ER_STATUS_OK;
}

static const er_op_def op_grid_sample = {
    .name = "GridSample", .domain = "", .min_version = 16, .max_version = 22,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = grid_sample_check, .run = grid_sample_run,
};

/* ======================================================================== */
/* AffineGrid                                                                */
/* ======================================================================== */

static er_status affine_grid_check(er_kctx *ctx) {
  const er_tensor *theta = ctx->in[0], *size = ctx->in[1];
  int64_t ac;
  char st[160];
  ER_CHECK(er__attr_int(ctx, "align_corners", 0, &ac));
  ER_CHECK(er__require_type(ctx, 0, gs_grid_types));
  ER_CHECK(er__require_type(ctx, 1, int64_only));
  ER_CHECK(er__require_rank(ctx, 0, 3, 3));
  ER_CHECK(er__require_rank(ctx, 1, 1, 1));
  int64_t ns = -1; /* spatial dims: 2 or 3 */
  if (size->rank == 1 && size->dims[0] >= 0) {
    if (size->dims[0] != 4 && size->dims[0] != 5)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "size has %lld values; expected 4 (N, C, H, W) or 5 (N, C, D, H, W)",
                          (long long)size->dims[0]);
    ns = size->dims[0] - 2;
  }
  if (theta->rank == 3) {
    int64_t a = theta->dims[1], b = theta->dims[2];
    bool ok = (a < 0 || a == 2 || a == 3) && (b < 0 || b == 3 || b == 4);
    if (ok && a >= 0 && b >= 0) ok = b == a + 1;
    if (ok && ns >= 0 && a >= 0) ok = a == ns;
    if (!ok)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "theta has shape %s; expected [N, 2, 3] for 2-D or [N, 3, 4] for 3-D%s",
                          er__shape_str(theta, st, sizeof st), ns >= 0 ? " matching size" : "");
    if (ns < 0 && a >= 0) ns = a;
  }
  if (ns < 0) {
    er__set_output(ctx, 0, theta->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  dims[0] = theta->rank == 3 ? theta->dims[0] : -1;
  for (int d = 0; d < ns; d++) dims[d + 1] = -1;
  dims[ns + 1] = ns;
  if (size->data) {
    int64_t n = er__get_i64(size, 0);
    if (dims[0] >= 0 && n != dims[0])
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "size[0] = %lld but theta holds %lld matrices",
                          (long long)n, (long long)dims[0]);
    dims[0] = n;
    for (int d = 0; d < ns + 2; d++)
      if (er__get_i64(size, d) < 0)
        return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE, "size[%d] = %lld must be >= 0", d,
                            (long long)er__get_i64(size, d));
    for (int d = 0; d < ns; d++) dims[d + 1] = er__get_i64(size, d + 2);
  }
  er__set_output(ctx, 0, theta->dtype, (int)ns + 2, dims);
  return ER_STATUS_OK;
}

/* Normalized coordinate of position i of len along one axis. */
static double affine_base(int64_t i, int64_t len, bool align_corners) {
  /* A single position sits at the centre, 0, as in PyTorch's affine_grid. */
  if (len <= 1) return 0.0;
  if (align_corners) return -1.0 + 2.0 * (double)i / (double)(len - 1);
  return -1.0 + (2.0 * (double)i + 1.0) / (double)len;
}

static er_status affine_grid_run(er_kctx *ctx) {
  const er_tensor *theta = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t ac;
  ER_CHECK(er__attr_int(ctx, "align_corners", 0, &ac));
  int ns = (int)theta->dims[1];
  int64_t N = y->dims[0], D = ns == 3 ? y->dims[1] : 1, H = y->dims[ns - 1], W = y->dims[ns];
  int64_t cols = ns + 1;
  int64_t yi = 0;
  for (int64_t n = 0; n < N; n++) {
    double th[3][4];
    for (int i = 0; i < ns; i++)
      for (int j = 0; j < cols; j++) th[i][j] = er__load_f64(theta->data, theta->dtype, (n * ns + i) * cols + j);
    for (int64_t dz = 0; dz < D; dz++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) {
          /* Homogeneous position, innermost dim first: (x, y[, z], 1). */
          double pos[4] = {affine_base(w, W, ac != 0), affine_base(h, H, ac != 0), 0.0, 1.0};
          if (ns == 3) pos[2] = affine_base(dz, D, ac != 0);
          else pos[2] = 1.0;
          for (int i = 0; i < ns; i++) {
            double v = 0.0;
            for (int j = 0; j < cols; j++) v += th[i][j] * pos[j];
            er__store_f64(y->data, y->dtype, yi++, v);
          }
        }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_affine_grid = {
    .name = "AffineGrid", .domain = "", .min_version = 20, .max_version = 20,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = affine_grid_check, .run = affine_grid_run,
};

const er_op_def *const er__ops_resize[] = {
    &op_resize_10,
    &op_resize,
    &op_upsample_7,
    &op_upsample_9,
    &op_grid_sample,
    &op_affine_grid,
    NULL,
};
