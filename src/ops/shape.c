/* shape.c - operators of the "shape" group: ops that only move, copy or
 * create bytes (Reshape, Transpose, Slice, Pad, Concat, ...) and ops that
 * compute shapes (Shape, Size, Range, ConstantOfShape).
 *
 * Data-moving kernels are type-generic: they copy whole elements of
 * er_dtype_size() bytes, so one kernel serves bool, every integer and float
 * type, float8 and int4/uint4 (stored one element per byte).
 *
 * Many of these ops have a shape rule that reads the values of an input
 * (Reshape's shape, Slice's starts, Pad's pads, ...). Their check() computes
 * the output shape when those values are known (a constant at load time, or
 * any value at run time) and otherwise leaves as much unknown as it must, so
 * load-time inference and constant folding get as far as possible. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"
#include "ops/shape-impl.h"

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

/* Requires input i to be present and of a type edgerun can hold (strings,
 * complex numbers and float4 are rejected as UNSUPPORTED). */
er_status er__shp_require_holdable(const er_kctx *ctx, int i) {
  const er_tensor *t = er__in(ctx, i);
  if (!t) return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "required input %d is missing", i);
  if (t->dtype == ER_DTYPE_UNDEFINED || er__dtype_is_numeric(t->dtype)) return ER_STATUS_OK;
  return er__op_error(ctx, ER_STATUS_UNSUPPORTED,
                      "input %d has type %s, which edgerun cannot hold in a tensor", i,
                      er_dtype_name(t->dtype));
}

/* Ops that create elements (Expand, Tile, Pad, ConstantOfShape, Range)
 * could be asked for absurd sizes; a known shape whose element count
 * overflows or passes ER_MAX_RUNTIME_ELEMENTS is rejected here, naming it. */
er_status er__shp_check_output_size(const er_kctx *ctx, int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) {
    if (dims[d] < 0) return ER_STATUS_OK; /* unknown: decided at run time */
  }
  if (!er__shape_count(rank, dims, &n) || n > ER_MAX_RUNTIME_ELEMENTS) {
    char buf[200];
    return er__op_error(
        ctx, ER_STATUS_LIMIT, "output shape %s exceeds %lld elements (ER_MAX_RUNTIME_ELEMENTS)",
        er__dims_str(rank, dims, buf, sizeof buf), (long long)ER_MAX_RUNTIME_ELEMENTS);
  }
  return ER_STATUS_OK;
}

/* Formats an ivec as "[1,-1,3]" (the values as given, unlike
 * er__dims_str, which prints negative dims as "?"). */
const char *er__shp_ivec_str(const ivec *a, char *buf, size_t size) {
  size_t n = 0;
  if (!a->known) {
    snprintf(buf, size, "[?]");
    return buf;
  }
  n += (size_t)snprintf(buf, size, "[");
  for (int64_t k = 0; k < a->n && n < size; k++)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", k ? "," : "", (long long)a->v[k]);
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

/* Reads integer input i (int32 or int64), 1-D or, when scalar_ok, a scalar
 * (then n = 1), into *out. Lengths above `cap` are refused with `over`
 * status: callers pass LIMIT where the length becomes a rank (Reshape's
 * shape) and INVALID_SHAPE where it must match a rank. An absent input
 * gives n = -1 and known = false; callers test presence first. */
er_status er__shp_read_ivec(const er_kctx *ctx, int i, const char *what, int cap, bool scalar_ok,
                           er_status over, ivec *out) {
  const er_tensor *t = er__in(ctx, i);
  char buf[160];
  out->n = -1;
  out->known = false;
  if (!t) return ER_STATUS_OK;
  if (t->dtype != ER_DTYPE_UNDEFINED && t->dtype != ER_DTYPE_INT64 && t->dtype != ER_DTYPE_INT32)
    return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH,
                        "'%s' (input %d) has type %s; expected int64 or int32", what, i,
                        er_dtype_name(t->dtype));
  if (t->rank >= 0) {
    if (t->rank == 0 && scalar_ok) {
      out->n = 1;
    } else if (t->rank != 1) {
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "'%s' (input %d) must be %s, but has shape %s", what, i,
                          scalar_ok ? "a scalar or 1-D" : "1-D", er__shape_str(t, buf, sizeof buf));
    } else {
      out->n = t->dims[0];
    }
  }
  if (out->n > cap)
    return er__op_error(
        ctx, over, "'%s' (input %d) has %lld values; at most %d are possible here (ER_MAX_RANK %d)",
        what, i, (long long)out->n, cap, ER_MAX_RANK);
  if (t->data && out->n >= 0) {
    for (int64_t k = 0; k < out->n; k++) out->v[k] = er__get_i64(t, k);
    out->known = true;
  }
  return ER_STATUS_OK;
}

/* Reads an ints attribute into *out; n = -1 when absent. */
er_status er__shp_attr_ivec(const er_kctx *ctx, const char *name, int cap, ivec *out) {
  const int64_t *v;
  int64_t n;
  ER_CHECK(er__attr_ints(ctx, name, &v, &n));
  out->n = n;
  out->known = n >= 0;
  if (n > cap)
    return er__op_error(
        ctx, ER_STATUS_INVALID_ATTRIBUTE,
        "attribute '%s' has %lld values; at most %d are possible here (ER_MAX_RANK %d)", name,
        (long long)n, cap, ER_MAX_RANK);
  for (int64_t k = 0; k < n; k++) out->v[k] = v[k];
  return ER_STATUS_OK;
}

/* Normalizes a list of axes for a tensor of rank `rank` in place and
 * rejects out-of-range and repeated axes. `what` names the list. */
er_status er__shp_norm_axes(const er_kctx *ctx, const char *what, ivec *axes, int rank) {
  bool seen[ER_MAX_RANK] = {false};
  for (int64_t k = 0; k < axes->n; k++) {
    int64_t a = axes->v[k];
    if (a < -(int64_t)rank || a >= rank)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "%s value %lld is out of range [%d, %d] for rank %d", what, (long long)a,
                          -rank, rank - 1, rank);
    if (a < 0) a += rank;
    if (seen[a])
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "%s lists axis %lld more than once",
                          what, (long long)a);
    seen[a] = true;
    axes->v[k] = a;
  }
  return ER_STATUS_OK;
}

/* Copies `n` elements of `es` bytes from src, `stride` elements apart, to
 * contiguous dst. */
static void copy_row(uint8_t *dst, const uint8_t *src, size_t es, int64_t n, int64_t stride) {
  if (stride == 1) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  /* A constant stride of 2 (YOLO "Focus" stems, even/odd splits) lets the
   * compiler load whole vectors and shuffle them; fixed-size memcpy
   * compiles to one load and store per element otherwise. */
#define COPY_ROW_CASE(SIZE)                                                                  \
  case SIZE:                                                                                 \
    if (stride == 2)                                                                         \
      for (int64_t i = 0; i < n; i++) memcpy(dst + i * SIZE, src + i * 2 * SIZE, SIZE);      \
    else                                                                                     \
      for (int64_t i = 0; i < n; i++) memcpy(dst + i * SIZE, src + i * stride * SIZE, SIZE); \
    return;
  switch (es) {
    COPY_ROW_CASE(1)
    COPY_ROW_CASE(2)
    COPY_ROW_CASE(4)
    COPY_ROW_CASE(8)
    default:
      for (int64_t i = 0; i < n; i++)
        memcpy(dst + (size_t)i * es, src + i * stride * (int64_t)es, es);
  }
#undef COPY_ROW_CASE
}

void er__view_make(er_view *v, size_t es, int rank, const int64_t *dims, const int64_t *strides,
                   int64_t offset) {
  ER_ASSERT(rank <= ER_VIEW_MAX_RANK);
  v->rank = 0;
  v->es = es;
  v->offset = offset;
  v->empty = false;
  /* Drop dims of size 1 and merge neighbours that walk memory as one, so the
   * inner loop runs as long as possible (a plain copy becomes one memcpy). */
  for (int k = 0; k < rank; k++) {
    if (dims[k] == 0) v->empty = true;
    if (dims[k] <= 1) continue;
    if (v->rank > 0 && v->strides[v->rank - 1] == strides[k] * dims[k]) {
      v->dims[v->rank - 1] *= dims[k];
      v->strides[v->rank - 1] = strides[k];
      continue;
    }
    v->dims[v->rank] = dims[k];
    v->strides[v->rank] = strides[k];
    v->rank++;
  }
}

int64_t er__view_rows(const er_view *v) {
  if (v->empty) return 0;
  int64_t rows = 1;
  for (int k = 0; k < v->rank - 1; k++) rows *= v->dims[k];
  return rows;
}

void er__view_copy(const er_view *v, void *dst, const void *src, int64_t begin, int64_t end) {
  const size_t es = v->es;
  const uint8_t *in = src;
  if (v->empty || begin >= end) return;
  if (v->rank == 0) {
    memcpy(dst, in + v->offset * (int64_t)es, es);
    return;
  }
  int r = v->rank;
  int64_t inner = v->dims[r - 1], inner_stride = v->strides[r - 1];
  int64_t idx[ER_VIEW_MAX_RANK], off = v->offset;
  /* Row `begin` as a mixed-radix index over the outer dims. */
  int64_t q = begin;
  for (int k = r - 2; k >= 0; k--) {
    idx[k] = q % v->dims[k];
    q /= v->dims[k];
    off += idx[k] * v->strides[k];
  }
  uint8_t *out = (uint8_t *)dst + begin * inner * (int64_t)es;
  const size_t row_bytes = (size_t)inner * es;
  if (r == 2 && inner_stride == 1 && row_bytes <= 32) {
    /* Short rows at one stride (YOLOv5's head splits [19200, 85] into
     * rows of 2, 2 and 81 floats): fixed-size copies the compiler turns
     * into moves, instead of a memcpy call per row. */
    const uint8_t *p = in + off * (int64_t)es;
    const int64_t step = v->strides[0] * (int64_t)es, n = end - begin;
#define VIEW_SHORT_ROWS(BYTES)                                                    \
  for (int64_t i = 0; i < n; i++) memcpy(out + i * (BYTES), p + i * step, BYTES); \
  return;
    switch (row_bytes) {
      case 4: VIEW_SHORT_ROWS(4)
      case 8: VIEW_SHORT_ROWS(8)
      case 12: VIEW_SHORT_ROWS(12)
      case 16: VIEW_SHORT_ROWS(16)
      case 24: VIEW_SHORT_ROWS(24)
      case 32: VIEW_SHORT_ROWS(32)
      default: break;
    }
#undef VIEW_SHORT_ROWS
  }
  for (int64_t row = begin; row < end; row++) {
    copy_row(out, in + off * (int64_t)es, es, inner, inner_stride);
    out += inner * (int64_t)es;
    for (int k = r - 2; k >= 0; k--) {
      off += v->strides[k];
      if (++idx[k] < v->dims[k]) break;
      off -= v->strides[k] * v->dims[k];
      idx[k] = 0;
    }
  }
}

/* Fills `n` elements of dst with the `es`-byte value at `value`. */
void er__shp_fill_bytes(uint8_t *dst, const void *value, size_t es, int64_t n) {
  if (n <= 0) return;
  memcpy(dst, value, es);
  /* Doubling copies: log2(n) memcpy calls. */
  int64_t have = 1;
  while (have < n) {
    int64_t take = have < n - have ? have : n - have;
    memcpy(dst + (size_t)have * es, dst, (size_t)take * es);
    have += take;
  }
}

/* Copies all of input `in` to output `out` (same element count); nothing
 * when the output is omitted. */
static void copy_all(const er_kctx *ctx, int out, int in) {
  const er_tensor *x = ctx->in[in];
  er_tensor *y = ctx->out[out];
  if (!y) return;
  size_t bytes = (size_t)er__count(x) * er_dtype_size(x->dtype);
  ER_ASSERT(bytes <= y->nbytes);
  if (bytes && y->data != x->data) memcpy(y->data, x->data, bytes);
}

static er_status run_copy(er_kctx *ctx) {
  copy_all(ctx, 0, 0);
  return ER_STATUS_OK;
}

/* Product of dims[lo..hi) or -1 when one is unknown or it overflows. */
int64_t er__shp_dims_product(const int64_t *dims, int lo, int hi) {
  int64_t p = 1;
  for (int d = lo; d < hi; d++) {
    if (dims[d] < 0 || !er__mul_i64(p, dims[d], &p)) return -1;
  }
  return p;
}

/* ======================================================================== */
/* Reshape                                                                   */
/* ======================================================================== */

/* The output dims of Reshape for a known `shape` list: 0 copies the input
 * dim (unless allowzero), one -1 is inferred from the element count. */
static er_status reshape_dims(const er_kctx *ctx, const er_tensor *x, const ivec *shape,
                              bool allowzero, int64_t *dims) {
  char a[200], b[200];
  int infer = -1;
  bool has_zero = false;
  for (int k = 0; k < shape->n; k++) {
    int64_t v = shape->v[k];
    if (v == -1) {
      if (infer >= 0)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "shape %s has more than one -1",
                            er__shp_ivec_str(shape, a, sizeof a));
      infer = k;
      dims[k] = -1;
    } else if (v < -1) {
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "shape %s has the invalid dim %lld at index %d",
                          er__shp_ivec_str(shape, a, sizeof a), (long long)v, k);
    } else if (v == 0 && !allowzero) {
      if (x->rank >= 0 && k >= x->rank)
        return er__op_error(
            ctx, ER_STATUS_INVALID_SHAPE,
            "shape %s copies input dim %d (the 0 at index %d), but the input %s has rank %d",
            er__shp_ivec_str(shape, a, sizeof a), k, k, er__shape_str(x, b, sizeof b), x->rank);
      dims[k] = x->rank >= 0 ? x->dims[k] : -1;
    } else {
      dims[k] = v;
      if (v == 0) has_zero = true;
    }
  }
  if (has_zero && infer >= 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "with allowzero=1, shape %s cannot hold both 0 and -1",
                        er__shp_ivec_str(shape, a, sizeof a));
  /* Input dims that a 0 copies to the same place cancel out of both
   * sides, so the element check and the -1 inference also work when those
   * dims are unknown (the [N, S, 768] -> [0, 0, 12, -1] of attention), and
   * a copied 0 dim does not hide the value of the -1. */
  int rank = (int)shape->n;
  int64_t in_count = 1, rest = 1;
  bool copies = false;
  if (x->rank < 0) return ER_STATUS_OK;
  for (int k = 0; k < x->rank; k++) {
    if (!allowzero && k < rank && shape->v[k] == 0) {
      copies = true;
      continue;
    }
    if (x->dims[k] < 0 || !er__mul_i64(in_count, x->dims[k], &in_count)) return ER_STATUS_OK;
  }
  for (int k = 0; k < rank; k++) {
    if (k == infer || (!allowzero && shape->v[k] == 0)) continue;
    if (!er__mul_i64(rest, dims[k], &rest))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "shape %s has more elements than int64 can count",
                          er__shp_ivec_str(shape, a, sizeof a));
  }
  bool ok = infer >= 0 ? rest != 0 && in_count % rest == 0 : rest == in_count;
  if (ok) {
    if (infer >= 0) dims[infer] = in_count / rest;
    return ER_STATUS_OK;
  }
  if (copies)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "cannot reshape %s to %s: the dims not copied by a 0 hold %lld elements in "
                        "the input but %lld%s in the output",
                        er__shape_str(x, b, sizeof b), er__shp_ivec_str(shape, a, sizeof a),
                        (long long)in_count, (long long)rest, infer >= 0 ? " times the -1" : "");
  if (infer >= 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "cannot reshape %s (%lld elements) to %s: the other dims hold %lld "
                        "elements, which does not divide %lld",
                        er__shape_str(x, b, sizeof b), (long long)in_count,
                        er__shp_ivec_str(shape, a, sizeof a), (long long)rest, (long long)in_count);
  return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                      "cannot reshape %s (%lld elements) to %s (%lld elements)",
                      er__shape_str(x, b, sizeof b), (long long)in_count,
                      er__dims_str(rank, dims, a, sizeof a), (long long)rest);
}

static er_status reshape_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t allowzero = 0;
  int64_t dims[ER_MAX_RANK];
  ivec shape;
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  if (version(ctx) >= 14) ER_CHECK(er__attr_int(ctx, "allowzero", 0, &allowzero));
  if (!er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'shape' is missing");
  ER_CHECK(er__shp_read_ivec(ctx, 1, "shape", ER_MAX_RANK, false, ER_STATUS_LIMIT, &shape));
  if (!shape.known) {
    set_unknown_dims(ctx, 0, x->dtype, (int)shape.n);
    return ER_STATUS_OK;
  }
  ER_CHECK(reshape_dims(ctx, x, &shape, allowzero != 0, dims));
  er__set_output(ctx, 0, x->dtype, (int)shape.n, dims);
  return ER_STATUS_OK;
}

static const er_op_def op_reshape = {
    .name = "Reshape", .domain = "", .min_version = 5, .max_version = 25,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1), .check = reshape_check, .run = run_copy, .flags = ER_OP_VIEW,
};

/* ======================================================================== */
/* Flatten                                                                   */
/* ======================================================================== */

static er_status flatten_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t axis;
  int64_t dims[2] = {-1, -1};
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  ER_CHECK(er__attr_int(ctx, "axis", 1, &axis));
  if (x->rank < 0) {
    if (axis == 0) dims[0] = 1;
    er__set_output(ctx, 0, x->dtype, 2, dims);
    return ER_STATUS_OK;
  }
  int r = x->rank;
  int64_t lo = version(ctx) >= 11 ? -(int64_t)r : 0;
  if (axis < lo || axis > r)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "axis %lld is out of range [%lld, %d] for rank %d", (long long)axis,
                        (long long)lo, r, r);
  int a = (int)(axis < 0 ? axis + r : axis);
  dims[0] = er__shp_dims_product(x->dims, 0, a);
  dims[1] = er__shp_dims_product(x->dims, a, r);
  er__set_output(ctx, 0, x->dtype, 2, dims);
  return ER_STATUS_OK;
}

static const er_op_def op_flatten = {
    .name = "Flatten", .domain = "", .min_version = 1, .max_version = 25,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = flatten_check, .run = run_copy, .flags = ER_OP_VIEW,
};

/* ======================================================================== */
/* Squeeze / Unsqueeze                                                       */
/* ======================================================================== */

/* The axes list: an attribute before opset 13, an input from 13 on (input
 * 1). n = -1 when absent. The spec asks for a 1-D axes input, but exporters
 * (and the ONNX function bodies of AffineGrid) pass a scalar, which
 * onnxruntime accepts as one axis; so do we. */
static er_status squeeze_axes(const er_kctx *ctx, ivec *axes) {
  if (version(ctx) < 13) return er__shp_attr_ivec(ctx, "axes", ER_MAX_RANK, axes);
  return er__shp_read_ivec(ctx, 1, "axes", ER_MAX_RANK, true, ER_STATUS_INVALID_SHAPE, axes);
}

static er_status squeeze_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t dims[ER_MAX_RANK];
  char buf[160];
  ivec axes;
  int r = x->rank, n = 0;
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  ER_CHECK(squeeze_axes(ctx, &axes));
  if (r < 0) {
    set_unknown_dims(ctx, 0, x->dtype, -1);
    return ER_STATUS_OK;
  }
  if (axes.n > r)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "axes has %lld entries but the input has rank %d", (long long)axes.n, r);
  if (axes.n < 0 || (axes.known && axes.n == 0)) {
    /* No axes: drop every dim of size 1, which needs every dim known. */
    for (int d = 0; d < r; d++) {
      if (x->dims[d] < 0) {
        set_unknown_dims(ctx, 0, x->dtype, -1);
        return ER_STATUS_OK;
      }
      if (x->dims[d] != 1) dims[n++] = x->dims[d];
    }
    er__set_output(ctx, 0, x->dtype, n, dims);
    return ER_STATUS_OK;
  }
  if (!axes.known) {
    set_unknown_dims(ctx, 0, x->dtype, r - (int)axes.n);
    return ER_STATUS_OK;
  }
  ER_CHECK(er__shp_norm_axes(ctx, "axes", &axes, r));
  bool drop[ER_MAX_RANK] = {false};
  for (int64_t k = 0; k < axes.n; k++) {
    int64_t a = axes.v[k];
    if (x->dims[a] >= 0 && x->dims[a] != 1)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "cannot squeeze axis %lld of shape %s: its dim is %lld, not 1",
                          (long long)a, er__shape_str(x, buf, sizeof buf), (long long)x->dims[a]);
    drop[a] = true;
  }
  for (int d = 0; d < r; d++)
    if (!drop[d]) dims[n++] = x->dims[d];
  er__set_output(ctx, 0, x->dtype, n, dims);
  return ER_STATUS_OK;
}

static const er_op_def op_squeeze_1 = {
    .name = "Squeeze", .domain = "", .min_version = 1, .max_version = 12,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = squeeze_check, .run = run_copy, .flags = ER_OP_VIEW,
};

static const er_op_def op_squeeze_13 = {
    .name = "Squeeze", .domain = "", .min_version = 13, .max_version = 25,
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1), .check = squeeze_check, .run = run_copy, .flags = ER_OP_VIEW,
};

static er_status unsqueeze_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t dims[ER_MAX_RANK];
  ivec axes;
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  ER_CHECK(squeeze_axes(ctx, &axes));
  if (version(ctx) < 13 && axes.n < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'axes' is required");
  if (version(ctx) >= 13 && !er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'axes' is required");
  if (x->rank < 0 || axes.n < 0) {
    set_unknown_dims(ctx, 0, x->dtype, -1);
    return ER_STATUS_OK;
  }
  int64_t out_rank = x->rank + axes.n;
  if (out_rank > ER_MAX_RANK)
    return er__op_error(ctx, ER_STATUS_LIMIT,
                        "the output would have rank %lld; at most %d (ER_MAX_RANK)",
                        (long long)out_rank, ER_MAX_RANK);
  if (!axes.known) {
    set_unknown_dims(ctx, 0, x->dtype, (int)out_rank);
    return ER_STATUS_OK;
  }
  ER_CHECK(er__shp_norm_axes(ctx, "axes", &axes, (int)out_rank));
  bool ins[ER_MAX_RANK] = {false};
  for (int64_t k = 0; k < axes.n; k++) ins[axes.v[k]] = true;
  for (int d = 0, j = 0; d < out_rank; d++) dims[d] = ins[d] ? 1 : x->dims[j++];
  er__set_output(ctx, 0, x->dtype, (int)out_rank, dims);
  return ER_STATUS_OK;
}

static const er_op_def op_unsqueeze_1 = {
    .name = "Unsqueeze", .domain = "", .min_version = 1, .max_version = 12,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = unsqueeze_check, .run = run_copy, .flags = ER_OP_VIEW,
};

static const er_op_def op_unsqueeze_13 = {
    .name = "Unsqueeze", .domain = "", .min_version = 13, .max_version = 25,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1), .check = unsqueeze_check, .run = run_copy, .flags = ER_OP_VIEW,
};

/* ======================================================================== */
/* Transpose                                                                 */
/* ======================================================================== */

/* perm, validated against `rank`; the reversal when the attribute is
 * absent. */
static er_status transpose_perm(const er_kctx *ctx, int rank, int *perm) {
  ivec p;
  char buf[160];
  ER_CHECK(er__shp_attr_ivec(ctx, "perm", ER_MAX_RANK, &p));
  if (p.n < 0) {
    for (int d = 0; d < rank; d++) perm[d] = rank - 1 - d;
    return ER_STATUS_OK;
  }
  if (p.n != rank)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "perm %s has %lld entries but the input has rank %d",
                        er__shp_ivec_str(&p, buf, sizeof buf), (long long)p.n, rank);
  bool seen[ER_MAX_RANK] = {false};
  for (int d = 0; d < rank; d++) {
    if (p.v[d] < 0 || p.v[d] >= rank || seen[p.v[d]])
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "perm %s is not a permutation of 0..%d",
                          er__shp_ivec_str(&p, buf, sizeof buf), rank - 1);
    seen[p.v[d]] = true;
    perm[d] = (int)p.v[d];
  }
  return ER_STATUS_OK;
}

static er_status transpose_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int perm[ER_MAX_RANK];
  int64_t dims[ER_MAX_RANK];
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  if (x->rank < 0) {
    ivec p;
    ER_CHECK(er__shp_attr_ivec(ctx, "perm", ER_MAX_RANK, &p));
    set_unknown_dims(ctx, 0, x->dtype, (int)p.n);
    return ER_STATUS_OK;
  }
  ER_CHECK(transpose_perm(ctx, x->rank, perm));
  for (int d = 0; d < x->rank; d++) dims[d] = x->dims[perm[d]];
  er__set_output(ctx, 0, x->dtype, x->rank, dims);
  return ER_STATUS_OK;
}

static er_status transpose_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int perm[ER_MAX_RANK];
  int64_t in_strides[ER_MAX_RANK], strides[ER_MAX_RANK];
  ER_CHECK(transpose_perm(ctx, x->rank, perm));
  er__strides(x->rank, x->dims, in_strides);
  for (int d = 0; d < x->rank; d++) strides[d] = in_strides[perm[d]];
  copy_view(y->data, x->data, er_dtype_size(x->dtype), y->rank, y->dims, strides, 0);
  return ER_STATUS_OK;
}

static const er_op_def op_transpose = {
    .name = "Transpose", .domain = "", .min_version = 1, .max_version = 25,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = transpose_check, .run = transpose_run,
};

/* ======================================================================== */

/* Expand                                                                    */
/* ======================================================================== */

static er_status expand_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  ivec shape;
  er_tensor s;
  char buf[160];
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  if (!er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'shape' is missing");
  ER_CHECK(er__shp_read_ivec(ctx, 1, "shape", ER_MAX_RANK, false, ER_STATUS_LIMIT, &shape));
  if (shape.n < 0) {
    set_unknown_dims(ctx, 0, x->dtype, -1);
    return ER_STATUS_OK;
  }
  /* The shape as a tensor with unknown dims, or its values when known;
   * broadcasting it with the input is the output shape either way. */
  er__tensor_set(&s, ER_DTYPE_INT64, (int)shape.n, NULL);
  for (int k = 0; k < shape.n; k++) {
    if (shape.known && shape.v[k] < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "shape %s has the negative dim %lld",
                          er__shp_ivec_str(&shape, buf, sizeof buf), (long long)shape.v[k]);
    s.dims[k] = shape.known ? shape.v[k] : -1;
  }
  const er_tensor *ins[2] = {x, &s};
  er__tensor_set(y, x->dtype, -1, NULL);
  ER_CHECK(er__broadcast_shapes(ctx, 2, ins, y));
  if (y->rank >= 0) ER_CHECK(er__shp_check_output_size(ctx, y->rank, y->dims));
  return ER_STATUS_OK;
}

static er_status expand_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t in_strides[ER_MAX_RANK], strides[ER_MAX_RANK];
  er__strides(x->rank, x->dims, in_strides);
  for (int d = 0; d < y->rank; d++) {
    int k = d - (y->rank - x->rank);
    strides[d] = (k < 0 || x->dims[k] == 1) ? 0 : in_strides[k];
  }
  copy_view(y->data, x->data, er_dtype_size(x->dtype), y->rank, y->dims, strides, 0);
  return ER_STATUS_OK;
}

static const er_op_def op_expand = {
    .name = "Expand", .domain = "", .min_version = 8, .max_version = 13,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1), .check = expand_check, .run = expand_run,
};

/* ======================================================================== */
/* Tile                                                                      */
/* ======================================================================== */

static er_status tile_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  ivec rep;
  int64_t dims[ER_MAX_RANK];
  char buf[160], buf2[160];
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  if (!er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'repeats' is missing");
  ER_CHECK(er__shp_read_ivec(ctx, 1, "repeats", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &rep));
  if (x->rank >= 0 && x->rank == 0 && rep.n < 0) rep.n = 0;
  if (x->rank >= 0 && rep.n >= 0 && rep.n != x->rank)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "repeats has %lld values but the input %s has rank %d", (long long)rep.n,
                        er__shape_str(x, buf, sizeof buf), x->rank);
  int rank = x->rank >= 0 ? x->rank : (int)rep.n;
  if (rank < 0 || !rep.known) {
    set_unknown_dims(ctx, 0, x->dtype, rank);
    return ER_STATUS_OK;
  }
  for (int d = 0; d < rank; d++) {
    if (rep.v[d] < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "repeats %s has the negative value %lld",
                          er__shp_ivec_str(&rep, buf2, sizeof buf2), (long long)rep.v[d]);
    int64_t v = x->rank >= 0 ? x->dims[d] : -1;
    if (v >= 0 && !er__mul_i64(v, rep.v[d], &dims[d]))
      return er__op_error(ctx, ER_STATUS_LIMIT, "repeats %s overflow the dims of %s",
                          er__shp_ivec_str(&rep, buf2, sizeof buf2), er__shape_str(x, buf, sizeof buf));
    if (v < 0) dims[d] = rep.v[d] == 0 ? 0 : -1;
  }
  ER_CHECK(er__shp_check_output_size(ctx, rank, dims));
  er__set_output(ctx, 0, x->dtype, rank, dims);
  return ER_STATUS_OK;
}

static er_status tile_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t in_strides[ER_MAX_RANK], dims[VIEW_MAX_RANK], strides[VIEW_MAX_RANK];
  /* The output, viewed as [r0, d0, r1, d1, ...], reads the input with
   * stride 0 over each repeat index. */
  er__strides(x->rank, x->dims, in_strides);
  for (int d = 0; d < x->rank; d++) {
    dims[2 * d] = x->dims[d] ? y->dims[d] / x->dims[d] : 0;
    strides[2 * d] = 0;
    dims[2 * d + 1] = x->dims[d];
    strides[2 * d + 1] = in_strides[d];
  }
  if (er__count(y) > 0)
    copy_view(y->data, x->data, er_dtype_size(x->dtype), 2 * x->rank, dims, strides, 0);
  return ER_STATUS_OK;
}

static const er_op_def op_tile = {
    .name = "Tile", .domain = "", .min_version = 6, .max_version = 13,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1), .check = tile_check, .run = tile_run,
};

/* ======================================================================== */
/* Identity                                                                  */
/* ======================================================================== */

static er_status identity_check(er_kctx *ctx) {
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static const er_op_def op_identity = {
    .name = "Identity", .domain = "", .min_version = 1, .max_version = 25,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = identity_check, .run = run_copy, .flags = ER_OP_VIEW,
};

/* ======================================================================== */
/* Dropout                                                                   */
/* ======================================================================== */

/* Dropout is the identity in inference mode, which is all edgerun runs. In
 * training mode (opset 12+ with training_mode = true) the output is random
 * unless the ratio is 0; the ONNX seed attribute does not define the random
 * sequence, so no other implementation's mask could be reproduced, and we
 * refuse rather than produce numbers nobody can check. */
static er_status dropout_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  const er_tensor *ratio = er__in(ctx, 1), *train = er__in(ctx, 2);
  ER_CHECK(er__shp_require_holdable(ctx, 0));
  if (version(ctx) >= 12) {
    if (ratio && ratio->data && er__tensor_count(ratio) == 1) {
      double r = er__load_f64(ratio->data, ratio->dtype, 0);
      if (!(r >= 0 && r < 1))
        return er__op_error(ctx, ER_STATUS_INVALID_ARGUMENT, "ratio %g is outside [0, 1)", r);
    }
    if (train && train->dtype != ER_DTYPE_UNDEFINED && train->dtype != ER_DTYPE_BOOL)
      return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH, "training_mode has type %s; expected bool",
                          er_dtype_name(train->dtype));
    if (train && train->data && er__tensor_count(train) >= 1 && ((const uint8_t *)train->data)[0]) {
      /* Training: only ratio 0 (keep everything) is deterministic. */
      if (!ratio)
        return er__op_error(ctx, ER_STATUS_UNSUPPORTED,
                            "training_mode=true with the default ratio 0.5 drops random elements; "
                            "edgerun runs Dropout in inference mode only");
      if (ratio->data && er__tensor_count(ratio) == 1) {
        double r = er__load_f64(ratio->data, ratio->dtype, 0);
        if (r != 0)
          return er__op_error(
              ctx, ER_STATUS_UNSUPPORTED,
              "training_mode=true with ratio %g drops random elements; edgerun runs "
              "Dropout in inference mode only (or training with ratio 0)",
              r);
      }
    }
  }
  er__same_as_input(ctx, 0, 0);
  er__set_output(ctx, 1, version(ctx) >= 10 ? ER_DTYPE_BOOL : x->dtype, x->rank, x->dims);
  return ER_STATUS_OK;
}

static er_status dropout_run(er_kctx *ctx) {
  er_tensor *mask = er__out(ctx, 1);
  copy_all(ctx, 0, 0);
  if (mask) {
    /* Everything is kept: the mask is all true (all ones before opset 10,
     * when it had the data's type). */
    uint8_t one[8];
    er__store_f64(one, mask->dtype, 0, 1.0);
    er__shp_fill_bytes(mask->data, one, er_dtype_size(mask->dtype), er__count(mask));
  }
  return ER_STATUS_OK;
}

static const er_op_def op_dropout = {
    .name = "Dropout", .domain = "", .min_version = 7, .max_version = 22,
    .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 2,
    .check = dropout_check, .run = dropout_run,
};

/* ======================================================================== */

/* ======================================================================== */
/* The group                                                                 */
/* ======================================================================== */

const er_op_def *const er__ops_shape[] = {
    &op_reshape,
    &op_flatten,
    &op_squeeze_1,
    &op_squeeze_13,
    &op_unsqueeze_1,
    &op_unsqueeze_13,
    &op_transpose,
    &er__shp_op_concat,
    &er__shp_op_split_2,
    &er__shp_op_split_13,
    &er__shp_op_slice_1,
    &er__shp_op_slice_10,
    &op_expand,
    &op_tile,
    &op_identity,
    &op_dropout,
    &er__shp_op_shape,
    &er__shp_op_size,
    &er__shp_op_constant_of_shape,
    &er__shp_op_constant,
    &er__shp_op_range,
    &er__shp_op_pad_1,
    &er__shp_op_pad_11,
    &er__shp_op_depth_to_space,
    &er__shp_op_space_to_depth,
    &er__shp_op_trilu,
    &er__shp_op_eyelike,
    &er__shp_op_center_crop_pad,
    NULL,
};
