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

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

/* The view copier below handles views of up to twice the largest tensor
 * rank: Tile views its output as [r0, d0, r1, d1, ...]. */
#define VIEW_MAX_RANK ER_VIEW_MAX_RANK

/* Bit of er_op_def.value_inputs for input i. */
#define VALUE_IN(i) (1u << (i))

static int version(const er_kctx *ctx) { return ctx->node->version; }

/* Requires input i to be present and of a type edgerun can hold (strings,
 * complex numbers and float4 are rejected as UNSUPPORTED). */
static er_status require_holdable(const er_kctx *ctx, int i) {
  const er_tensor *t = er__in(ctx, i);
  if (!t) return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "required input %d is missing", i);
  if (t->dtype == ER_DTYPE_UNDEFINED || er__dtype_is_numeric(t->dtype)) return ER_STATUS_OK;
  return er__op_error(ctx, ER_STATUS_UNSUPPORTED,
                      "input %d has type %s, which edgerun cannot hold in a tensor", i,
                      er_dtype_name(t->dtype));
}

/* Sets output i to `dtype` with rank `rank` (-1 = unknown) and every dim
 * unknown. */
static void set_unknown_dims(const er_kctx *ctx, int i, er_dtype dtype, int rank) {
  int64_t dims[ER_MAX_RANK];
  for (int d = 0; d < ER_MAX_RANK; d++) dims[d] = -1;
  er__set_output(ctx, i, dtype, rank, rank > 0 ? dims : NULL);
}

/* Ops that create elements (Expand, Tile, Pad, ConstantOfShape, Range)
 * could be asked for absurd sizes; a known shape whose element count
 * overflows or passes ER_MAX_RUNTIME_ELEMENTS is rejected here, naming it. */
static er_status check_output_size(const er_kctx *ctx, int rank, const int64_t *dims) {
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

/* A short integer list that a shape rule reads: from an input tensor or an
 * attribute. */
typedef struct ivec {
  int64_t n;  /* length; -1 when unknown */
  bool known; /* the values are known */
  int64_t v[VIEW_MAX_RANK];
} ivec;

/* Formats an ivec as "[1,-1,3]" (the values as given, unlike
 * er__dims_str, which prints negative dims as "?"). */
static const char *ivec_str(const ivec *a, char *buf, size_t size) {
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
static er_status read_ivec(const er_kctx *ctx, int i, const char *what, int cap, bool scalar_ok,
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
static er_status attr_ivec(const er_kctx *ctx, const char *name, int cap, ivec *out) {
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
static er_status norm_axes(const er_kctx *ctx, const char *what, ivec *axes, int rank) {
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

/* Copies a strided view of `src` into the contiguous `dst`: element
 * (i_0, ..., i_{r-1}) of the view, for i_k < dims[k], is the src element at
 * offset + sum(i_k * strides[k]) (in elements; strides may be zero or
 * negative). This one routine is Transpose, Slice, Expand, Tile,
 * DepthToSpace and SpaceToDepth. */
static void copy_view(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                      const int64_t *strides, int64_t offset) {
  er_view v;
  er__view_make(&v, es, rank, dims, strides, offset);
  er__view_copy(&v, dst, src, 0, er__view_rows(&v));
}

/* Fills `n` elements of dst with the `es`-byte value at `value`. */
static void fill_bytes(uint8_t *dst, const void *value, size_t es, int64_t n) {
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
static int64_t dims_product(const int64_t *dims, int lo, int hi) {
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
                            ivec_str(shape, a, sizeof a));
      infer = k;
      dims[k] = -1;
    } else if (v < -1) {
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "shape %s has the invalid dim %lld at index %d",
                          ivec_str(shape, a, sizeof a), (long long)v, k);
    } else if (v == 0 && !allowzero) {
      if (x->rank >= 0 && k >= x->rank)
        return er__op_error(
            ctx, ER_STATUS_INVALID_SHAPE,
            "shape %s copies input dim %d (the 0 at index %d), but the input %s has rank %d",
            ivec_str(shape, a, sizeof a), k, k, er__shape_str(x, b, sizeof b), x->rank);
      dims[k] = x->rank >= 0 ? x->dims[k] : -1;
    } else {
      dims[k] = v;
      if (v == 0) has_zero = true;
    }
  }
  if (has_zero && infer >= 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "with allowzero=1, shape %s cannot hold both 0 and -1",
                        ivec_str(shape, a, sizeof a));
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
                          ivec_str(shape, a, sizeof a));
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
                        er__shape_str(x, b, sizeof b), ivec_str(shape, a, sizeof a),
                        (long long)in_count, (long long)rest, infer >= 0 ? " times the -1" : "");
  if (infer >= 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "cannot reshape %s (%lld elements) to %s: the other dims hold %lld "
                        "elements, which does not divide %lld",
                        er__shape_str(x, b, sizeof b), (long long)in_count,
                        ivec_str(shape, a, sizeof a), (long long)rest, (long long)in_count);
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
  ER_CHECK(require_holdable(ctx, 0));
  if (version(ctx) >= 14) ER_CHECK(er__attr_int(ctx, "allowzero", 0, &allowzero));
  if (!er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'shape' is missing");
  ER_CHECK(read_ivec(ctx, 1, "shape", ER_MAX_RANK, false, ER_STATUS_LIMIT, &shape));
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
  ER_CHECK(require_holdable(ctx, 0));
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
  dims[0] = dims_product(x->dims, 0, a);
  dims[1] = dims_product(x->dims, a, r);
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
  if (version(ctx) < 13) return attr_ivec(ctx, "axes", ER_MAX_RANK, axes);
  return read_ivec(ctx, 1, "axes", ER_MAX_RANK, true, ER_STATUS_INVALID_SHAPE, axes);
}

static er_status squeeze_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t dims[ER_MAX_RANK];
  char buf[160];
  ivec axes;
  int r = x->rank, n = 0;
  ER_CHECK(require_holdable(ctx, 0));
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
  ER_CHECK(norm_axes(ctx, "axes", &axes, r));
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
  ER_CHECK(require_holdable(ctx, 0));
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
  ER_CHECK(norm_axes(ctx, "axes", &axes, (int)out_rank));
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
  ER_CHECK(attr_ivec(ctx, "perm", ER_MAX_RANK, &p));
  if (p.n < 0) {
    for (int d = 0; d < rank; d++) perm[d] = rank - 1 - d;
    return ER_STATUS_OK;
  }
  if (p.n != rank)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "perm %s has %lld entries but the input has rank %d",
                        ivec_str(&p, buf, sizeof buf), (long long)p.n, rank);
  bool seen[ER_MAX_RANK] = {false};
  for (int d = 0; d < rank; d++) {
    if (p.v[d] < 0 || p.v[d] >= rank || seen[p.v[d]])
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "perm %s is not a permutation of 0..%d",
                          ivec_str(&p, buf, sizeof buf), rank - 1);
    seen[p.v[d]] = true;
    perm[d] = (int)p.v[d];
  }
  return ER_STATUS_OK;
}

static er_status transpose_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int perm[ER_MAX_RANK];
  int64_t dims[ER_MAX_RANK];
  ER_CHECK(require_holdable(ctx, 0));
  if (x->rank < 0) {
    ivec p;
    ER_CHECK(attr_ivec(ctx, "perm", ER_MAX_RANK, &p));
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
/* Concat                                                                    */
/* ======================================================================== */

/* The axis attribute: optional (default 1) in opset 1, required later. */
static er_status concat_axis(const er_kctx *ctx, int64_t *axis) {
  if (version(ctx) < 4) return er__attr_int(ctx, "axis", 1, axis);
  if (!er__node_attr(ctx->node, "axis"))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'axis' is required");
  return er__attr_int(ctx, "axis", 0, axis);
}

static er_status concat_check(er_kctx *ctx) {
  int64_t axis_attr;
  int64_t dims[ER_MAX_RANK];
  char a[160], b[160];
  int rank = -1, first = -1, axis;
  er_dtype dtype = ER_DTYPE_UNDEFINED;
  ER_CHECK(concat_axis(ctx, &axis_attr));
  for (int i = 0; i < ctx->n_in; i++) {
    const er_tensor *t = er__in(ctx, i);
    ER_CHECK(require_holdable(ctx, i));
    if (t->dtype != ER_DTYPE_UNDEFINED) {
      if (dtype != ER_DTYPE_UNDEFINED && t->dtype != dtype)
        return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH,
                            "input %d is %s but an earlier input is %s", i, er_dtype_name(t->dtype),
                            er_dtype_name(dtype));
      dtype = t->dtype;
    }
    if (t->rank < 0) continue;
    if (rank >= 0 && t->rank != rank)
      return er__op_error(
          ctx, ER_STATUS_INVALID_SHAPE, "input %d has shape %s but input %d has %s; ranks differ",
          i, er__shape_str(t, a, sizeof a), first, er__shape_str(ctx->in[first], b, sizeof b));
    rank = t->rank;
    if (first < 0) first = i;
  }
  if (rank < 0) {
    set_unknown_dims(ctx, 0, dtype, -1);
    return ER_STATUS_OK;
  }
  if (rank == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "cannot concatenate scalars (rank 0)");
  ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, rank, &axis));
  for (int d = 0; d < rank; d++) dims[d] = d == axis ? 0 : -1;
  for (int i = 0; i < ctx->n_in; i++) {
    const er_tensor *t = ctx->in[i];
    if (t->rank < 0) {
      dims[axis] = -1;
      continue;
    }
    for (int d = 0; d < rank; d++) {
      int64_t v = t->dims[d];
      if (d == axis) {
        if (v < 0 || dims[axis] < 0 || !er__add_i64(dims[axis], v, &dims[axis])) dims[axis] = -1;
        continue;
      }
      if (v < 0) continue;
      if (dims[d] >= 0 && dims[d] != v)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "input %d has shape %s, which differs from %s of input %d in dim %d "
                            "(only axis %d may differ)",
                            i, er__shape_str(t, a, sizeof a),
                            er__shape_str(ctx->in[first], b, sizeof b), first, d, axis);
      dims[d] = v;
    }
  }
  er__set_output(ctx, 0, dtype, rank, dims);
  return ER_STATUS_OK;
}

bool er__concat_misplaced(const er_kctx *ctx, int axis) {
  const er_tensor *y = ctx->out[0];
  size_t es = er_dtype_size(y->dtype);
  const uint8_t *y0 = y->data, *y1 = y0 + (size_t)er__count(y) * es, *dest = y0;
  bool one_row = dims_product(y->dims, 0, axis) == 1;
  for (int i = 0; i < ctx->n_in; i++) {
    const er_tensor *t = ctx->in[i];
    size_t len = (size_t)er__count(t) * es;
    const uint8_t *s0 = t->data;
    bool inside = len && s0 < y1 && y0 < s0 + len;
    if (inside && (!one_row || s0 != dest)) return true;
    dest += len;
  }
  return false;
}

static er_status concat_run(er_kctx *ctx) {
  er_tensor *y = ctx->out[0];
  int64_t axis_attr;
  int axis;
  size_t es = er_dtype_size(y->dtype);
  ER_CHECK(concat_axis(ctx, &axis_attr));
  ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, y->rank, &axis));
  /* Each output row (fixed index over the dims before axis) is the
   * concatenation of the matching rows of the inputs. */
  int64_t outer = dims_product(y->dims, 0, axis);
  int64_t after = dims_product(y->dims, axis + 1, y->rank);
  size_t total = (size_t)er__count(y) * es;
  uint8_t *out = y->data, *built = NULL;
  if (total && er__concat_misplaced(ctx, axis)) {
    built = malloc(total);
    if (!built) return er__op_error(ctx, ER_STATUS_OUT_OF_MEMORY, "out of memory concatenating %zu bytes", total);
    out = built;
  }
  for (int64_t o = 0; o < outer; o++) {
    for (int i = 0; i < ctx->n_in; i++) {
      const er_tensor *t = ctx->in[i];
      size_t row = (size_t)(t->dims[axis] * after) * es; /* bytes */
      if (row == 0) continue;
      const uint8_t *src = (const uint8_t *)t->data + (size_t)o * row;
      if (src != out) memcpy(out, src, row); /* else made in place (session.c) */
      out += row;
    }
  }
  if (built) {
    memcpy(y->data, built, total);
    free(built);
  }
  return ER_STATUS_OK;
}

static const er_op_def op_concat = {
    .name = "Concat", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = ER_VARIADIC, .min_outputs = 1, .max_outputs = 1,
    .check = concat_check, .run = concat_run,
};

/* ======================================================================== */
/* Split                                                                     */
/* ======================================================================== */

/* How the split axis divides: an explicit list (attribute before opset 13,
 * input from 13 on), or equal chunks (the last one smaller from opset 18). */
typedef struct split_plan {
  const int64_t *list;     /* attribute values, or NULL */
  const er_tensor *tensor; /* input values, or NULL */
  bool unknown;            /* the sizes are not known (yet) */
  int64_t chunk, last;     /* equal chunks: size of each, and of the last */
} split_plan;

static int64_t split_size(const split_plan *p, int j, int n) {
  if (p->unknown) return -1;
  if (p->list) return p->list[j];
  if (p->tensor) return er__get_i64(p->tensor, j);
  return j == n - 1 ? p->last : p->chunk;
}

/* Works out the plan for input dim `dim` (-1 unknown) on the split axis. */
static er_status split_plan_make(const er_kctx *ctx, int axis, int64_t dim, split_plan *p) {
  int n = ctx->n_out;
  int64_t count = -1, num_outputs = 0;
  memset(p, 0, sizeof *p);
  if (version(ctx) < 13) {
    int64_t len;
    ER_CHECK(er__attr_ints(ctx, "split", &p->list, &len));
    count = len;
  } else {
    const er_tensor *s = er__in(ctx, 1);
    if (s) {
      if (s->dtype != ER_DTYPE_UNDEFINED && s->dtype != ER_DTYPE_INT64)
        return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH, "'split' has type %s; expected int64",
                            er_dtype_name(s->dtype));
      if (s->rank >= 0 && s->rank != 1)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "'split' must be 1-D, but has rank %d",
                            s->rank);
      count = s->rank == 1 ? s->dims[0] : -1;
      if (s->data) {
        p->tensor = s;
        count = er__count(s);
      } else {
        p->unknown = true;
      }
    }
    if (version(ctx) >= 18) {
      ER_CHECK(er__attr_int(ctx, "num_outputs", 0, &num_outputs));
      if (er__node_attr(ctx->node, "num_outputs")) {
        if (s)
          return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                              "input 'split' and attribute 'num_outputs' cannot both be given");
        if (num_outputs != n)
          return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                              "num_outputs %lld does not match the node's %d outputs",
                              (long long)num_outputs, n);
      }
    }
  }
  if (count >= 0 && count != n)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "'split' has %lld values but the node has %d outputs", (long long)count, n);
  if (p->list || p->tensor) {
    int64_t sum = 0;
    for (int j = 0; j < n; j++) {
      int64_t v = split_size(p, j, n);
      if (v < 0)
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                            "'split' value %lld for output %d is negative", (long long)v, j);
      if (!er__add_i64(sum, v, &sum))
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "'split' values overflow int64");
    }
    /* An attribute that disagrees with the input is a bad attribute; a
     * 'split' input (opset 13+) that does is a bad shape. */
    if (dim >= 0 && sum != dim)
      return er__op_error(ctx, p->list ? ER_STATUS_INVALID_ATTRIBUTE : ER_STATUS_INVALID_SHAPE,
                          "'split' values sum to %lld but axis %d has dim %lld", (long long)sum,
                          axis, (long long)dim);
    return ER_STATUS_OK;
  }
  if (p->unknown) return ER_STATUS_OK;
  if (dim < 0) {
    p->unknown = true;
    return ER_STATUS_OK;
  }
  if (version(ctx) < 18) {
    if (dim % n != 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "axis %d of dim %lld does not split evenly into %d outputs", axis,
                          (long long)dim, n);
    p->chunk = p->last = dim / n;
    return ER_STATUS_OK;
  }
  /* Opset 18: chunks of ceil(dim / n), the last one taking what is left. */
  p->chunk = dim / n + (dim % n != 0);
  p->last = dim - p->chunk * (n - 1);
  if (p->last < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "axis %d of dim %lld cannot be split into %d outputs: with chunks of "
                        "ceil(%lld / %d) = %lld the last would have %lld elements",
                        axis, (long long)dim, n, (long long)dim, n, (long long)p->chunk,
                        (long long)p->last);
  return ER_STATUS_OK;
}

static er_status split_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t axis_attr;
  int axis;
  split_plan plan;
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(er__attr_int(ctx, "axis", 0, &axis_attr));
  if (x->rank < 0) {
    ER_CHECK(split_plan_make(ctx, 0, -1, &plan));
    for (int j = 0; j < ctx->n_out; j++) set_unknown_dims(ctx, j, x->dtype, -1);
    return ER_STATUS_OK;
  }
  if (x->rank == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "cannot split a scalar (rank 0)");
  ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, x->rank, &axis));
  ER_CHECK(split_plan_make(ctx, axis, x->dims[axis], &plan));
  for (int j = 0; j < ctx->n_out; j++) {
    int64_t dims[ER_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = split_size(&plan, j, ctx->n_out);
    er__set_output(ctx, j, x->dtype, x->rank, dims);
  }
  return ER_STATUS_OK;
}

static er_status split_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t axis_attr;
  int axis;
  split_plan plan;
  size_t es = er_dtype_size(x->dtype);
  ER_CHECK(er__attr_int(ctx, "axis", 0, &axis_attr));
  ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, x->rank, &axis));
  ER_CHECK(split_plan_make(ctx, axis, x->dims[axis], &plan));
  int64_t outer = dims_product(x->dims, 0, axis);
  int64_t after = dims_product(x->dims, axis + 1, x->rank);
  size_t in_row = (size_t)(x->dims[axis] * after) * es; /* bytes */
  int64_t start = 0;
  for (int j = 0; j < ctx->n_out; j++) {
    int64_t size = split_size(&plan, j, ctx->n_out);
    er_tensor *y = ctx->out[j];
    size_t row = (size_t)(size * after) * es; /* bytes */
    if (y && row) {
      const uint8_t *src = (const uint8_t *)x->data + (size_t)(start * after) * es;
      for (int64_t o = 0; o < outer; o++)
        memcpy((uint8_t *)y->data + (size_t)o * row, src + (size_t)o * in_row, row);
    }
    start += size;
  }
  return ER_STATUS_OK;
}

static const er_op_def op_split_2 = {
    .name = "Split", .domain = "", .min_version = 2, .max_version = 12,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = ER_VARIADIC,
    .check = split_check, .run = split_run,
};

static const er_op_def op_split_13 = {
    .name = "Split", .domain = "", .min_version = 13, .max_version = 18,
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = ER_VARIADIC,
    .value_inputs = VALUE_IN(1), .check = split_check, .run = split_run,
};

/* ======================================================================== */
/* Slice                                                                     */
/* ======================================================================== */

/* Per axis of the input: the first index, the step and the output dim. */
typedef struct slice_plan {
  int64_t start[ER_MAX_RANK];
  int64_t step[ER_MAX_RANK];
  int64_t dims[ER_MAX_RANK]; /* -1 where unknown */
} slice_plan;

/* The effective start, step and length of one sliced axis of size dim
 * (the opset 13 rules: negative indices count from the end, then starts
 * and ends clamp to the valid range for the direction of the step). */
static void slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                       int64_t *len) {
  if (start < 0) start += dim; /* INT64_MIN + dim cannot overflow */
  if (end < 0) end += dim;
  if (step > 0) {
    start = start < 0 ? 0 : start > dim ? dim : start;
    end = end < 0 ? 0 : end > dim ? dim : end;
    *len = end > start ? (int64_t)((uint64_t)(end - start - 1) / (uint64_t)step) + 1 : 0;
  } else {
    start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
    end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    uint64_t neg = (uint64_t)0 - (uint64_t)step; /* |step|, also for INT64_MIN */
    *len = start > end ? (int64_t)((uint64_t)(start - end - 1) / neg) + 1 : 0;
  }
  *first = *len > 0 ? start : 0;
}

static er_status slice_plan_make(const er_kctx *ctx, slice_plan *p) {
  const er_tensor *x = ctx->in[0];
  int r = x->rank;
  ivec starts, ends, axes, steps;
  char buf[160];
  if (version(ctx) < 10) {
    ER_CHECK(attr_ivec(ctx, "starts", ER_MAX_RANK, &starts));
    ER_CHECK(attr_ivec(ctx, "ends", ER_MAX_RANK, &ends));
    ER_CHECK(attr_ivec(ctx, "axes", ER_MAX_RANK, &axes));
    if (starts.n < 0 || ends.n < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "attributes 'starts' and 'ends' are required");
    steps.n = -1;
    steps.known = false;
  } else {
    if (!er__in(ctx, 1) || !er__in(ctx, 2))
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "inputs 'starts' and 'ends' are required");
    ER_CHECK(read_ivec(ctx, 1, "starts", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &starts));
    ER_CHECK(read_ivec(ctx, 2, "ends", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &ends));
    ER_CHECK(read_ivec(ctx, 3, "axes", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &axes));
    ER_CHECK(read_ivec(ctx, 4, "steps", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &steps));
    for (int i = 2; i <= 4; i++) ER_CHECK(er__require_same_type(ctx, 1, i));
  }
  bool has_axes = version(ctx) < 10 ? axes.n >= 0 : er__in(ctx, 3) != NULL;
  bool has_steps = version(ctx) >= 10 && er__in(ctx, 4) != NULL;
  /* The lengths must agree wherever they are known. */
  int64_t n = starts.n;
  const ivec *lists[3] = {&ends, has_axes ? &axes : NULL, has_steps ? &steps : NULL};
  const char *names[3] = {"ends", "axes", "steps"};
  for (int k = 0; k < 3; k++) {
    if (!lists[k] || lists[k]->n < 0) continue;
    if (n >= 0 && lists[k]->n != n)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "'%s' has %lld values but 'starts' has %lld", names[k],
                          (long long)lists[k]->n, (long long)n);
    n = lists[k]->n;
  }
  for (int d = 0; d < ER_MAX_RANK; d++) {
    p->start[d] = 0;
    p->step[d] = 1;
    p->dims[d] = d < r ? x->dims[d] : 0;
  }
  if (r < 0) return ER_STATUS_OK;
  if (n > r)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "slicing %lld axes of an input of rank %d",
                        (long long)n, r);
  /* Which axes are sliced: needed before anything else is known. */
  if (has_axes && !axes.known) {
    for (int d = 0; d < r; d++) p->dims[d] = -1;
    return ER_STATUS_OK;
  }
  if (!has_axes) {
    if (n < 0) {
      for (int d = 0; d < r; d++) p->dims[d] = -1;
      return ER_STATUS_OK;
    }
    axes.n = n;
    for (int64_t k = 0; k < n; k++) axes.v[k] = k;
  }
  ER_CHECK(norm_axes(ctx, "axes", &axes, r));
  if (!starts.known || !ends.known || (has_steps && !steps.known)) {
    for (int64_t k = 0; k < axes.n; k++) p->dims[axes.v[k]] = -1;
    return ER_STATUS_OK;
  }
  for (int64_t k = 0; k < n; k++) {
    int a = (int)axes.v[k];
    int64_t step = has_steps ? steps.v[k] : 1;
    if (step == 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ARGUMENT, "steps %s has a 0 (for axis %d)",
                          ivec_str(&steps, buf, sizeof buf), a);
    p->step[a] = step;
    if (x->dims[a] < 0) {
      p->dims[a] = -1;
      continue;
    }
    slice_axis(x->dims[a], starts.v[k], ends.v[k], step, &p->start[a], &p->dims[a]);
  }
  return ER_STATUS_OK;
}

static er_status slice_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  slice_plan p;
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(slice_plan_make(ctx, &p));
  er__set_output(ctx, 0, x->dtype, x->rank, p.dims);
  return ER_STATUS_OK;
}

er_status er__slice_view(const er_kctx *ctx, er_view *v) {
  const er_tensor *x = ctx->in[0];
  const er_tensor *y = ctx->out[0];
  slice_plan p;
  int64_t in_strides[ER_MAX_RANK], strides[ER_MAX_RANK], offset = 0;
  ER_CHECK(slice_plan_make(ctx, &p));
  er__strides(x->rank, x->dims, in_strides);
  for (int d = 0; d < x->rank; d++) {
    offset += p.start[d] * in_strides[d];
    /* A step longer than the axis takes one element and its stride is
     * never used; multiplying it out could overflow. */
    strides[d] = p.dims[d] > 1 ? p.step[d] * in_strides[d] : 0;
  }
  er__view_make(v, er_dtype_size(x->dtype), y->rank, y->dims, strides, offset);
  return ER_STATUS_OK;
}

static er_status slice_run(er_kctx *ctx) {
  er_view v;
  ER_CHECK(er__slice_view(ctx, &v));
  er__view_copy(&v, ctx->out[0]->data, ctx->in[0]->data, 0, er__view_rows(&v));
  return ER_STATUS_OK;
}

static const er_op_def op_slice_1 = {
    .name = "Slice", .domain = "", .min_version = 1, .max_version = 9,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = slice_check, .run = slice_run,
};

static const er_op_def op_slice_10 = {
    .name = "Slice", .domain = "", .min_version = 10, .max_version = 13,
    .min_inputs = 3, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1) | VALUE_IN(2) | VALUE_IN(3) | VALUE_IN(4),
    .check = slice_check, .run = slice_run,
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
  ER_CHECK(require_holdable(ctx, 0));
  if (!er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'shape' is missing");
  ER_CHECK(read_ivec(ctx, 1, "shape", ER_MAX_RANK, false, ER_STATUS_LIMIT, &shape));
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
                          ivec_str(&shape, buf, sizeof buf), (long long)shape.v[k]);
    s.dims[k] = shape.known ? shape.v[k] : -1;
  }
  const er_tensor *ins[2] = {x, &s};
  er__tensor_set(y, x->dtype, -1, NULL);
  ER_CHECK(er__broadcast_shapes(ctx, 2, ins, y));
  if (y->rank >= 0) ER_CHECK(check_output_size(ctx, y->rank, y->dims));
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
  ER_CHECK(require_holdable(ctx, 0));
  if (!er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'repeats' is missing");
  ER_CHECK(read_ivec(ctx, 1, "repeats", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &rep));
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
                          ivec_str(&rep, buf2, sizeof buf2), (long long)rep.v[d]);
    int64_t v = x->rank >= 0 ? x->dims[d] : -1;
    if (v >= 0 && !er__mul_i64(v, rep.v[d], &dims[d]))
      return er__op_error(ctx, ER_STATUS_LIMIT, "repeats %s overflow the dims of %s",
                          ivec_str(&rep, buf2, sizeof buf2), er__shape_str(x, buf, sizeof buf));
    if (v < 0) dims[d] = rep.v[d] == 0 ? 0 : -1;
  }
  ER_CHECK(check_output_size(ctx, rank, dims));
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
  ER_CHECK(require_holdable(ctx, 0));
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
  ER_CHECK(require_holdable(ctx, 0));
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
    fill_bytes(mask->data, one, er_dtype_size(mask->dtype), er__count(mask));
  }
  return ER_STATUS_OK;
}

static const er_op_def op_dropout = {
    .name = "Dropout", .domain = "", .min_version = 7, .max_version = 22,
    .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 2,
    .check = dropout_check, .run = dropout_run,
};

/* ======================================================================== */
/* Shape / Size                                                              */
/* ======================================================================== */

/* Shape and Size read only their input's shape; the load-time folder runs
 * them when the shape is known even if the data is not (infer.c), so their
 * check and run never touch in[0]->data. */

/* The [start, end) range of axes Shape reports (opset 15 start/end,
 * clamped to [0, rank]). */
static er_status shape_range(const er_kctx *ctx, int rank, int64_t *start, int64_t *end) {
  *start = 0;
  *end = rank;
  if (version(ctx) < 15) return ER_STATUS_OK;
  ER_CHECK(er__attr_int(ctx, "start", 0, start));
  ER_CHECK(er__attr_int(ctx, "end", rank, end));
  if (*start < 0) *start += rank;
  if (*end < 0) *end += rank;
  *start = *start < 0 ? 0 : *start > rank ? rank : *start;
  *end = *end < 0 ? 0 : *end > rank ? rank : *end;
  if (*end < *start) *end = *start;
  return ER_STATUS_OK;
}

static er_status shape_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t start, end;
  if (x->rank < 0) {
    set_unknown_dims(ctx, 0, ER_DTYPE_INT64, 1);
    return ER_STATUS_OK;
  }
  ER_CHECK(shape_range(ctx, x->rank, &start, &end));
  int64_t n = end - start;
  er__set_output(ctx, 0, ER_DTYPE_INT64, 1, &n);
  return ER_STATUS_OK;
}

static er_status shape_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t start, end;
  int64_t *y = ctx->out[0]->data; /* [end - start] */
  ER_CHECK(shape_range(ctx, x->rank, &start, &end));
  for (int64_t d = start; d < end; d++) y[d - start] = x->dims[d];
  return ER_STATUS_OK;
}

static const er_op_def op_shape = {
    .name = "Shape", .domain = "", .min_version = 1, .max_version = 25,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = shape_check, .run = shape_run,
};

static er_status size_check(er_kctx *ctx) {
  er__set_output(ctx, 0, ER_DTYPE_INT64, 0, NULL);
  return ER_STATUS_OK;
}

static er_status size_run(er_kctx *ctx) {
  *(int64_t *)ctx->out[0]->data = er__count(ctx->in[0]);
  return ER_STATUS_OK;
}

static const er_op_def op_size = {
    .name = "Size", .domain = "", .min_version = 1, .max_version = 25,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = size_check, .run = size_run,
};

/* ======================================================================== */
/* ConstantOfShape                                                           */
/* ======================================================================== */

/* The fill value: the one-element 'value' tensor, or float 0. */
static er_status cos_value(const er_kctx *ctx, const er_tensor **value) {
  char buf[160];
  ER_CHECK(er__attr_tensor(ctx, "value", value));
  if (!*value) return ER_STATUS_OK;
  if (!er__dtype_is_numeric((*value)->dtype))
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED,
                        "'value' has type %s, which edgerun cannot hold in a tensor",
                        er_dtype_name((*value)->dtype));
  if (er__tensor_count(*value) != 1 || !(*value)->data)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "'value' must hold exactly one element, but has shape %s",
                        er__shape_str(*value, buf, sizeof buf));
  return ER_STATUS_OK;
}

static er_status cos_check(er_kctx *ctx) {
  const er_tensor *value;
  ivec shape;
  char buf[160];
  ER_CHECK(cos_value(ctx, &value));
  er_dtype dtype = value ? value->dtype : ER_DTYPE_FLOAT;
  ER_CHECK(read_ivec(ctx, 0, "input", ER_MAX_RANK, false, ER_STATUS_LIMIT, &shape));
  if (!shape.known) {
    set_unknown_dims(ctx, 0, dtype, (int)shape.n);
    return ER_STATUS_OK;
  }
  for (int k = 0; k < shape.n; k++)
    if (shape.v[k] < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "shape %s has the negative dim %lld",
                          ivec_str(&shape, buf, sizeof buf), (long long)shape.v[k]);
  ER_CHECK(check_output_size(ctx, (int)shape.n, shape.v));
  er__set_output(ctx, 0, dtype, (int)shape.n, shape.v);
  return ER_STATUS_OK;
}

static er_status cos_run(er_kctx *ctx) {
  const er_tensor *value;
  er_tensor *y = ctx->out[0];
  ER_CHECK(cos_value(ctx, &value));
  size_t bytes = (size_t)er__count(y) * er_dtype_size(y->dtype);
  if (!value) {
    if (bytes) memset(y->data, 0, bytes); /* float zeros (ER_OP_WRITES_ALL) */
    return ER_STATUS_OK;
  }
  fill_bytes(y->data, value->data, er_dtype_size(y->dtype), er__count(y));
  return ER_STATUS_OK;
}

static const er_op_def op_constant_of_shape = {
    .name = "ConstantOfShape", .domain = "", .min_version = 9, .max_version = 25,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(0), .flags = ER_OP_WRITES_ALL, .check = cos_check, .run = cos_run,
};

/* ======================================================================== */
/* Constant                                                                  */
/* ======================================================================== */

/* Exactly one of these attributes gives the value. The loader densifies
 * sparse_value into a tensor attribute. */
static const char *const constant_attrs[] = {"value",        "sparse_value", "value_float",
                                             "value_floats", "value_int",    "value_ints",
                                             "value_string", "value_strings"};

static er_status constant_attr(const er_kctx *ctx, const er_attr **out) {
  int found = 0;
  *out = NULL;
  for (size_t k = 0; k < ER_ARRAY_LEN(constant_attrs); k++) {
    const er_attr *a = er__node_attr(ctx->node, constant_attrs[k]);
    if (!a) continue;
    found++;
    *out = a;
  }
  if (found != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "exactly one of value, sparse_value, value_float(s), value_int(s), "
                        "value_string(s) must be given; found %d",
                        found);
  const er_attr *a = *out;
  er_attr_type want = ER_ATTR_TENSOR;
  if (strcmp(a->name, "value_float") == 0) want = ER_ATTR_FLOAT;
  if (strcmp(a->name, "value_floats") == 0) want = ER_ATTR_FLOATS;
  if (strcmp(a->name, "value_int") == 0) want = ER_ATTR_INT;
  if (strcmp(a->name, "value_ints") == 0) want = ER_ATTR_INTS;
  if (strncmp(a->name, "value_string", 12) == 0)
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "string constants ('%s') are not supported",
                        a->name);
  if (a->type != want)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute '%s' has the wrong type (%d)",
                        a->name, (int)a->type);
  if (want == ER_ATTR_TENSOR && !er__dtype_is_numeric(a->t->dtype))
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED,
                        "'%s' has type %s, which edgerun cannot hold in a tensor", a->name,
                        er_dtype_name(a->t->dtype));
  return ER_STATUS_OK;
}

static er_status constant_check(er_kctx *ctx) {
  const er_attr *a;
  ER_CHECK(constant_attr(ctx, &a));
  switch (a->type) {
    case ER_ATTR_FLOAT: er__set_output(ctx, 0, ER_DTYPE_FLOAT, 0, NULL); break;
    case ER_ATTR_INT: er__set_output(ctx, 0, ER_DTYPE_INT64, 0, NULL); break;
    case ER_ATTR_FLOATS: er__set_output(ctx, 0, ER_DTYPE_FLOAT, 1, &a->n); break;
    case ER_ATTR_INTS: er__set_output(ctx, 0, ER_DTYPE_INT64, 1, &a->n); break;
    default: er__set_output(ctx, 0, a->t->dtype, a->t->rank, a->t->dims); break;
  }
  return ER_STATUS_OK;
}

static er_status constant_run(er_kctx *ctx) {
  const er_attr *a;
  er_tensor *y = ctx->out[0];
  ER_CHECK(constant_attr(ctx, &a));
  switch (a->type) {
    case ER_ATTR_FLOAT: memcpy(y->data, &a->f, sizeof(float)); break;
    case ER_ATTR_INT: memcpy(y->data, &a->i, sizeof(int64_t)); break;
    case ER_ATTR_FLOATS:
      if (a->n) memcpy(y->data, a->floats, (size_t)a->n * sizeof(float));
      break;
    case ER_ATTR_INTS:
      if (a->n) memcpy(y->data, a->ints, (size_t)a->n * sizeof(int64_t));
      break;
    default: {
      size_t bytes = (size_t)er__count(a->t) * er_dtype_size(a->t->dtype);
      if (bytes) memcpy(y->data, a->t->data, bytes);
    }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_constant = {
    .name = "Constant", .domain = "", .min_version = 1, .max_version = 25,
    .min_inputs = 0, .max_inputs = 0, .min_outputs = 1, .max_outputs = 1,
    .check = constant_check, .run = constant_run,
};

/* ======================================================================== */
/* Range                                                                     */
/* ======================================================================== */

static const er_dtype range_types[] = {ER_DTYPE_FLOAT,    ER_DTYPE_DOUBLE,   ER_DTYPE_INT16,
                                       ER_DTYPE_INT32,    ER_DTYPE_INT64,    ER_DTYPE_FLOAT16,
                                       ER_DTYPE_BFLOAT16, ER_DTYPE_UNDEFINED};

/* The element count of Range for known inputs. Integers are counted
 * exactly in 64-bit unsigned arithmetic (limit - start may exceed int64);
 * floats in double, as max(ceil((limit - start) / delta), 0). */
static er_status range_count(const er_kctx *ctx, int64_t *count) {
  const er_tensor *t0 = ctx->in[0], *t1 = ctx->in[1], *t2 = ctx->in[2];
  if (er__dtype_is_int(t0->dtype)) {
    int64_t start = er__get_i64(t0, 0), limit = er__get_i64(t1, 0), delta = er__get_i64(t2, 0);
    uint64_t span, step;
    if (delta == 0) return er__op_error(ctx, ER_STATUS_INVALID_ARGUMENT, "delta is 0");
    if ((delta > 0 && limit <= start) || (delta < 0 && limit >= start)) {
      *count = 0;
      return ER_STATUS_OK;
    }
    span = delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
    step = delta > 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
    uint64_t n = span / step + (span % step != 0);
    if (n > (uint64_t)ER_MAX_RUNTIME_ELEMENTS)
      return er__op_error(
          ctx, ER_STATUS_LIMIT,
          "Range(%lld, %lld, %lld) has %llu elements; at most %lld (ER_MAX_RUNTIME_ELEMENTS)",
          (long long)start, (long long)limit, (long long)delta, (unsigned long long)n,
          (long long)ER_MAX_RUNTIME_ELEMENTS);
    *count = (int64_t)n;
    return ER_STATUS_OK;
  }
  double start = er__load_f64(t0->data, t0->dtype, 0), limit = er__load_f64(t1->data, t1->dtype, 0);
  double delta = er__load_f64(t2->data, t2->dtype, 0);
  if (delta == 0) return er__op_error(ctx, ER_STATUS_INVALID_ARGUMENT, "delta is 0");
  double n = ceil((limit - start) / delta);
  if (n != n || n > (double)ER_MAX_RUNTIME_ELEMENTS)
    return er__op_error(ctx, ER_STATUS_LIMIT,
                        "Range(%g, %g, %g) has %g elements; at most %lld (ER_MAX_RUNTIME_ELEMENTS)",
                        start, limit, delta, n, (long long)ER_MAX_RUNTIME_ELEMENTS);
  *count = n > 0 ? (int64_t)n : 0;
  return ER_STATUS_OK;
}

static er_status range_check(er_kctx *ctx) {
  char buf[160];
  bool known = true;
  for (int i = 0; i < 3; i++) {
    const er_tensor *t = ctx->in[i];
    ER_CHECK(er__require_type(ctx, i, range_types));
    ER_CHECK(er__require_same_type(ctx, 0, i));
    int64_t n = er__tensor_count(t);
    if (n >= 0 && n != 1)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "input %d must be a scalar, but has shape %s", i,
                          er__shape_str(t, buf, sizeof buf));
    if (!t->data || n != 1) known = false;
  }
  if (version(ctx) >= 27) {
    int64_t stash;
    ER_CHECK(er__attr_int(ctx, "stash_type", ER_DTYPE_FLOAT, &stash));
    if (stash != ER_DTYPE_FLOAT && stash != ER_DTYPE_DOUBLE)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "stash_type %lld must be 1 (float) or 11 (double)", (long long)stash);
  }
  if (!known) {
    set_unknown_dims(ctx, 0, ctx->in[0]->dtype, 1);
    return ER_STATUS_OK;
  }
  int64_t count;
  ER_CHECK(range_count(ctx, &count));
  er__set_output(ctx, 0, ctx->in[0]->dtype, 1, &count);
  return ER_STATUS_OK;
}

static er_status range_run(er_kctx *ctx) {
  const er_tensor *t0 = ctx->in[0], *t2 = ctx->in[2];
  er_tensor *y = ctx->out[0];
  int64_t n = er__count(y);
  if (er__dtype_is_int(y->dtype)) {
    /* start + i * delta in wrapping unsigned arithmetic: exact wherever
     * the result fits the type, which the count guarantees. */
    uint64_t start = (uint64_t)er__get_i64(t0, 0), delta = (uint64_t)er__get_i64(t2, 0);
    for (int64_t i = 0; i < n; i++)
      er__store_i64(y->data, y->dtype, i, (int64_t)(start + (uint64_t)i * delta));
    return ER_STATUS_OK;
  }
  /* Floats: computed in double and rounded once, at least as accurate as
   * the float (stash) computation the spec describes for float16. */
  double start = er__load_f64(t0->data, t0->dtype, 0), delta = er__load_f64(t2->data, t2->dtype, 0);
  if (y->dtype == ER_DTYPE_FLOAT) {
    float *out = y->data;
    for (int64_t i = 0; i < n; i++) out[i] = (float)(start + (double)i * delta);
  } else {
    for (int64_t i = 0; i < n; i++) er__store_f64(y->data, y->dtype, i, start + (double)i * delta);
  }
  return ER_STATUS_OK;
}

static const er_op_def op_range = {
    .name = "Range", .domain = "", .min_version = 11, .max_version = 27,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(0) | VALUE_IN(1) | VALUE_IN(2), .check = range_check, .run = range_run,
};

/* ======================================================================== */
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
    ER_CHECK(attr_ivec(ctx, name, 2 * ER_MAX_RANK, &pads));
    if (pads.n < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute '%s' is required", name);
    axes.n = -1;
  } else {
    if (!er__in(ctx, 1))
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'pads' is required");
    ER_CHECK(read_ivec(ctx, 1, "pads", 2 * ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &pads));
    ER_CHECK(read_ivec(ctx, 3, "axes", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &axes));
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
  ER_CHECK(norm_axes(ctx, "axes", &axes, r));
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
                          ivec_str(&pads, buf, sizeof buf), (long long)ER_MAX_RUNTIME_ELEMENTS);
    if (p->begin[a] < -d || p->end[a] < -d || d + p->begin[a] + p->end[a] < 0)
      return er__op_error(
          ctx, ER_STATUS_INVALID_SHAPE,
          "pads %s crop %lld and %lld elements from axis %d of %s, which has only %lld",
          ivec_str(&pads, buf, sizeof buf), (long long)(p->begin[a] < 0 ? -p->begin[a] : 0),
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
  ER_CHECK(require_holdable(ctx, 0));
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
  ER_CHECK(check_output_size(ctx, x->rank, dims));
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
      fill_bytes(out, j->value, es, inner * block);
    } else {
      if (mid_hi > mid_lo)
        memcpy(out + mid_lo * ees, in + off * (int64_t)es + j->lo[d] * ees, (size_t)((mid_hi - mid_lo) * ees));
      for (int64_t k = 0; k < inner; k++) {
        if (k == mid_lo && mid_hi > mid_lo) k = mid_hi;
        if (k >= inner) break;
        int64_t s = pad_source(mode, k, j->before[d], j->lo[d], j->len[d]);
        if (s < 0) fill_bytes(out + k * ees, j->value, es, block);
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

static const er_op_def op_pad_1 = {
    .name = "Pad", .domain = "", .min_version = 1, .max_version = 10,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = pad_check, .run = pad_run,
};

static const er_op_def op_pad_11 = {
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
  ER_CHECK(require_holdable(ctx, 0));
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

static const er_op_def op_depth_to_space = {
    .name = "DepthToSpace", .domain = "", .min_version = 1, .max_version = 28,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = d2s_check, .run = d2s_run,
};

static er_status s2d_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t b, dims[4];
  bool crd;
  char buf[160];
  ER_CHECK(require_holdable(ctx, 0));
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

static const er_op_def op_space_to_depth = {
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
  ER_CHECK(read_ivec(ctx, 1, "k", 1, true, ER_STATUS_INVALID_SHAPE, &kv));
  if (kv.n == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "'k' must hold one value, but is empty");
  if (kv.known) *k = kv.v[0];
  return ER_STATUS_OK;
}

static er_status trilu_check(er_kctx *ctx) {
  int64_t upper, k;
  ER_CHECK(require_holdable(ctx, 0));
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
  int64_t batch = dims_product(x->dims, 0, x->rank - 2);
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

static const er_op_def op_trilu = {
    .name = "Trilu", .domain = "", .min_version = 14, .max_version = 14,
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = trilu_check, .run = trilu_run,
};

/* ======================================================================== */
/* EyeLike                                                                   */
/* ======================================================================== */

static er_status eyelike_dtype(const er_kctx *ctx, er_dtype *dt) {
  int64_t v;
  const er_tensor *x = ctx->in[0];
  ER_CHECK(er__attr_int(ctx, "dtype", x->dtype, &v));
  *dt = (er_dtype)v;
  if (!er__node_attr(ctx->node, "dtype")) return ER_STATUS_OK;
  if (v == ER_DTYPE_BOOL || er__dtype_is_float(*dt) || er__dtype_is_int(*dt)) return ER_STATUS_OK;
  if (v >= 0 && v <= ER_DTYPE_FLOAT4E2M1)
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "dtype %lld (%s) is not supported for EyeLike",
                        (long long)v, er_dtype_name(*dt));
  return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "dtype %lld is not an ONNX element type",
                      (long long)v);
}

static er_status eyelike_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_dtype dt;
  int64_t k;
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(eyelike_dtype(ctx, &dt));
  ER_CHECK(er__attr_int(ctx, "k", 0, &k));
  ER_CHECK(er__require_rank(ctx, 0, 2, 2));
  if (x->rank < 0) {
    set_unknown_dims(ctx, 0, dt, 2);
    return ER_STATUS_OK;
  }
  er__set_output(ctx, 0, dt, 2, x->dims);
  return ER_STATUS_OK;
}

static er_status eyelike_run(er_kctx *ctx) {
  er_tensor *y = ctx->out[0];
  int64_t k;
  uint8_t one[8];
  size_t es = er_dtype_size(y->dtype);
  ER_CHECK(er__attr_int(ctx, "k", 0, &k));
  er__store_f64(one, y->dtype, 0, 1.0);
  int64_t rows = y->dims[0], cols = y->dims[1];
  /* The output arrives zeroed; set the ones of diagonal j = i + k. */
  for (int64_t i = 0; i < rows; i++) {
    if (k < -i || k >= cols - i) continue; /* j = i + k outside [0, cols) */
    memcpy((uint8_t *)y->data + (size_t)(i * cols + i + k) * es, one, es);
  }
  return ER_STATUS_OK;
}

static const er_op_def op_eyelike = {
    .name = "EyeLike", .domain = "", .min_version = 9, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = eyelike_check, .run = eyelike_run,
};

/* ======================================================================== */
/* CenterCropPad                                                             */
/* ======================================================================== */

/* The target size per input axis (-1 unknown); untouched axes keep theirs. */
static er_status ccp_dims(const er_kctx *ctx, int64_t *dims) {
  const er_tensor *x = ctx->in[0];
  ivec shape, axes;
  char buf[160];
  int r = x->rank;
  ER_CHECK(read_ivec(ctx, 1, "shape", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &shape));
  ER_CHECK(attr_ivec(ctx, "axes", ER_MAX_RANK, &axes));
  bool has_axes = axes.n >= 0;
  if (r < 0) return ER_STATUS_OK; /* the caller leaves the output unknown */
  if (!has_axes) {
    axes.n = r;
    for (int d = 0; d < r; d++) axes.v[d] = d;
  }
  ER_CHECK(norm_axes(ctx, "axes", &axes, r));
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
                          ivec_str(&shape, buf, sizeof buf), (long long)shape.v[k]);
    dims[axes.v[k]] = shape.v[k];
  }
  return ER_STATUS_OK;
}

static er_status ccp_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t dims[ER_MAX_RANK];
  ER_CHECK(require_holdable(ctx, 0));
  if (!er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input 'shape' is missing");
  ER_CHECK(ccp_dims(ctx, dims));
  if (x->rank < 0) {
    set_unknown_dims(ctx, 0, x->dtype, -1);
    return ER_STATUS_OK;
  }
  ER_CHECK(check_output_size(ctx, x->rank, dims));
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
  int64_t count = dims_product(len, 0, r);
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

static const er_op_def op_center_crop_pad = {
    .name = "CenterCropPad", .domain = "", .min_version = 18, .max_version = 18,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1), .check = ccp_check, .run = ccp_run,
};

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
    &op_concat,
    &op_split_2,
    &op_split_13,
    &op_slice_1,
    &op_slice_10,
    &op_expand,
    &op_tile,
    &op_identity,
    &op_dropout,
    &op_shape,
    &op_size,
    &op_constant_of_shape,
    &op_constant,
    &op_range,
    &op_pad_1,
    &op_pad_11,
    &op_depth_to_space,
    &op_space_to_depth,
    &op_trilu,
    &op_eyelike,
    &op_center_crop_pad,
    NULL,
};
