/* index.c - operators of the "index" group: ops that pick, place, sort or
 * count elements by position.
 *
 *   Gather, GatherElements, GatherND        read elements at given indices
 *   ScatterElements, Scatter, ScatterND     write (or reduce) into a copy
 *   OneHot, NonZero, Compress               positions <-> values
 *   TopK, ArgMax, ArgMin, Unique            order-based selection
 *   CumSum, CumProd                         running sums and products
 *   ReverseSequence                         per-batch reversal in time
 *
 * Ops that only move elements are type-generic: they copy element-size
 * chunks of bytes, so they work for every type edgerun can hold (float8 and
 * int4 included, one element per byte). Every index read from a tensor is
 * bounds-checked before it is used and a bad one is an OUT_OF_RANGE error
 * naming the value, the axis and its size. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

/* Product of dims[from..to). Shapes of allocated tensors are validated, so
 * this cannot overflow for them. */
static int64_t dims_prod(const int64_t *dims, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; d++) p *= dims[d];
  return p;
}

/* Requires input i to be present with a type edgerun can hold. Byte-moving
 * ops accept any such type; string, complex and float4 are UNSUPPORTED. */
static er_status require_holdable(const er_kctx *ctx, int i) {
  const er_tensor *t = er__in(ctx, i);
  if (!t) return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "required input %d is missing", i);
  if (t->dtype != ER_DTYPE_UNDEFINED && !er__dtype_is_numeric(t->dtype))
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "input %d has type %s, which edgerun cannot hold",
                        i, er_dtype_name(t->dtype));
  return ER_STATUS_OK;
}

/* An output shape built from several inputs (Gather's, OneHot's depth)
 * must have an element count that fits in int64 before the executor looks
 * at it. */
static er_status require_countable(const er_kctx *ctx, int rank, const int64_t *dims) {
  int64_t count;
  for (int d = 0; d < rank; d++)
    if (dims[d] < 0) return ER_STATUS_OK; /* not known yet */
  if (!er__shape_count(rank, dims, &count)) {
    char buf[160];
    return er__op_error(ctx, ER_STATUS_LIMIT, "output shape %s has more elements than int64 can count",
                        er__dims_str(rank, dims, buf, sizeof buf));
  }
  return ER_STATUS_OK;
}

static er_status check_out_rank(const er_kctx *ctx, int rank) {
  if (rank > ER_MAX_RANK)
    return er__op_error(ctx, ER_STATUS_LIMIT, "output would have rank %d; at most %d (ER_MAX_RANK)",
                        rank, ER_MAX_RANK);
  return ER_STATUS_OK;
}

/* Reads the one value of input i (a scalar or one-element tensor; floats
 * are truncated toward zero). *known is false while the values are unknown
 * (load time). `what` names the input in messages. */
static er_status read_scalar(const er_kctx *ctx, int i, const char *what, bool *known, int64_t *v) {
  const er_tensor *t = er__in(ctx, i);
  *known = false;
  *v = 0;
  if (!t) return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input '%s' is missing", what);
  int64_t n = er__tensor_count(t);
  if (n >= 0 && n != 1) {
    char buf[160];
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "'%s' must hold exactly one value; its shape is %s",
                        what, er__shape_str(t, buf, sizeof buf));
  }
  if (n == 1 && t->data) {
    *v = er__get_i64(t, 0);
    *known = true;
  }
  return ER_STATUS_OK;
}

/* Maps index value v into [0, n), counting negative values from the end;
 * OUT_OF_RANGE naming the value and the axis otherwise. INT64_MIN is caught
 * by the first comparison, so the addition never overflows. */
static er_status norm_index(const er_kctx *ctx, int64_t v, int64_t n, int axis, int64_t *out) {
  if (v < -n || v >= n) {
    if (n == 0)
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                          "index %lld is out of range: axis %d has size 0, so no index is valid",
                          (long long)v, axis);
    return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                        "index %lld is out of range [%lld, %lld] for axis %d of size %lld",
                        (long long)v, (long long)-n, (long long)(n - 1), axis, (long long)n);
  }
  *out = v < 0 ? v + n : v;
  return ER_STATUS_OK;
}

/* Copies one element or chunk of `bytes` bytes; the common element sizes
 * become single moves. */
static inline void copy_bytes(void *dst, const void *src, size_t bytes) {
  switch (bytes) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, bytes);
  }
}

/* Row-major walk over a shape `dims` that keeps an element offset into
 * another tensor with the given strides (elements) up to date. */
typedef struct walk {
  int rank;
  int64_t dims[ER_MAX_RANK];
  int64_t strides[ER_MAX_RANK];  /* elements per step of each dim */
  int64_t idx[ER_MAX_RANK];
  int64_t off;                   /* elements */
} walk;

static void walk_init(walk *w, int rank, const int64_t *dims, const int64_t *strides) {
  memset(w, 0, sizeof *w);
  w->rank = rank;
  for (int d = 0; d < rank; d++) {
    w->dims[d] = dims[d];
    w->strides[d] = strides[d];
  }
}

static void walk_next(walk *w) {
  for (int d = w->rank - 1; d >= 0; d--) {
    w->idx[d]++;
    w->off += w->strides[d];
    if (w->idx[d] < w->dims[d]) return;
    w->off -= w->strides[d] * w->dims[d];
    w->idx[d] = 0;
  }
}

/* A key whose unsigned order is the value order of element i: integers
 * shifted to unsigned, floats by their sign-magnitude bits. -0.0 equals 0.0
 * (they compare equal) and every NaN becomes `nan_key`, so NaNs sort
 * together at the end (UINT64_MAX) or the start (0). */
static uint64_t order_key(const void *data, er_dtype t, int64_t i, uint64_t nan_key) {
  const uint64_t sign = UINT64_C(1) << 63;
  if (t == ER_DTYPE_UINT64) return ((const uint64_t *)data)[i];
  if (er__dtype_is_float(t) || er__dtype_is_float8(t)) {
    double v = t == ER_DTYPE_FLOAT ? ((const float *)data)[i] : er__load_f64(data, t, i);
    uint64_t bits;
    if (v != v) return nan_key;
    if (v == 0) v = 0.0;
    memcpy(&bits, &v, sizeof bits);
    return (bits & sign) ? ~bits : bits | sign;
  }
  return (uint64_t)er__load_i64(data, t, i) ^ sign;
}

/* Stable bottom-up merge sort of the index array a[n] under cmp (tmp holds
 * n entries). The comparators below break ties by index, which makes the
 * order fully determined. */
typedef int (*index_cmp)(const void *ctx, int64_t a, int64_t b);

static void sort_indices(int64_t *a, int64_t *tmp, int64_t n, index_cmp cmp, const void *c) {
  int64_t *src = a, *dst = tmp;
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n;
      int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) dst[k++] = cmp(c, src[j], src[i]) < 0 ? src[j++] : src[i++];
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    int64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* ---- reductions for the scatter ops ------------------------------------- */

typedef enum reduction { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduction;

/* Reads the `reduction` attribute where the schema version has it (add and
 * mul from 16, max and min from 18). */
static er_status read_reduction(const er_kctx *ctx, reduction *out) {
  const char *s;
  *out = RED_NONE;
  if (ctx->node->version < 16) return ER_STATUS_OK;
  ER_CHECK(er__attr_string(ctx, "reduction", "none", &s));
  if (strcmp(s, "none") == 0) *out = RED_NONE;
  else if (strcmp(s, "add") == 0) *out = RED_ADD;
  else if (strcmp(s, "mul") == 0) *out = RED_MUL;
  else if (strcmp(s, "max") == 0 && ctx->node->version >= 18) *out = RED_MAX;
  else if (strcmp(s, "min") == 0 && ctx->node->version >= 18) *out = RED_MIN;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "reduction '%s' is not one of %s at version %d", s,
                        ctx->node->version >= 18 ? "none, add, mul, max, min" : "none, add, mul",
                        ctx->node->version);
  return ER_STATUS_OK;
}

/* max and min propagate NaN, like the ONNX Max and Min operators. */
static float red_f32(float a, float b, reduction r) {
  switch (r) {
    case RED_ADD: return a + b;
    case RED_MUL: return a * b;
    case RED_MAX: return (a != a || b != b) ? a + b : (a > b ? a : b);
    case RED_MIN: return (a != a || b != b) ? a + b : (a < b ? a : b);
    default: return b;
  }
}

static double red_f64(double a, double b, reduction r) {
  switch (r) {
    case RED_ADD: return a + b;
    case RED_MUL: return a * b;
    case RED_MAX: return (a != a || b != b) ? a + b : (a > b ? a : b);
    case RED_MIN: return (a != a || b != b) ? a + b : (a < b ? a : b);
    default: return b;
  }
}

/* Integers wrap (two's complement, computed unsigned); the store narrows
 * with wrap too. Bool: add and max are OR, mul and min are AND, which is
 * what the int result gives once stored as v != 0. */
static int64_t red_i64(int64_t a, int64_t b, reduction r) {
  switch (r) {
    case RED_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case RED_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case RED_MAX: return a > b ? a : b;
    case RED_MIN: return a < b ? a : b;
    default: return b;
  }
}

static uint64_t red_u64(uint64_t a, uint64_t b, reduction r) {
  switch (r) {
    case RED_ADD: return a + b;
    case RED_MUL: return a * b;
    case RED_MAX: return a > b ? a : b;
    case RED_MIN: return a < b ? a : b;
    default: return b;
  }
}

/* dst[di] = f(dst[di], src[si]) in type t. Each float type computes in its
 * own precision: float32 in float, the narrower floats exactly in double
 * and rounded once to the type on store (one operation, so this equals the
 * correctly rounded result). */
static void reduce_elem(void *dst, int64_t di, const void *src, int64_t si, er_dtype t, reduction r) {
  switch (t) {
    case ER_DTYPE_FLOAT: {
      float *d = dst;
      d[di] = red_f32(d[di], ((const float *)src)[si], r);
      return;
    }
    case ER_DTYPE_DOUBLE: {
      double *d = dst;
      d[di] = red_f64(d[di], ((const double *)src)[si], r);
      return;
    }
    case ER_DTYPE_UINT64: {
      uint64_t *d = dst;
      d[di] = red_u64(d[di], ((const uint64_t *)src)[si], r);
      return;
    }
    default:
      if (er__dtype_is_float(t) || er__dtype_is_float8(t))
        er__store_f64(dst, t, di, red_f64(er__load_f64(dst, t, di), er__load_f64(src, t, si), r));
      else
        er__store_i64(dst, t, di, red_i64(er__load_i64(dst, t, di), er__load_i64(src, t, si), r));
  }
}

/* ======================================================================== */
/* Gather                                                                    */
/* ======================================================================== */

/* output = data.shape[:axis] ++ indices.shape ++ data.shape[axis+1:]. */
static er_status gather_check(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1];
  int64_t axis_attr;
  int axis;
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(er__attr_int(ctx, "axis", 0, &axis_attr));
  ER_CHECK(er__require_rank(ctx, 0, 1, ER_MAX_RANK));
  if (data->rank < 0 || ind->rank < 0) {
    if (data->rank >= 0) ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, data->rank, &axis));
    er__set_output(ctx, 0, data->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, data->rank, &axis));
  int rank = data->rank - 1 + ind->rank;
  ER_CHECK(check_out_rank(ctx, rank));
  int64_t dims[ER_MAX_RANK];
  int k = 0;
  for (int d = 0; d < axis; d++) dims[k++] = data->dims[d];
  for (int d = 0; d < ind->rank; d++) dims[k++] = ind->dims[d];
  for (int d = axis + 1; d < data->rank; d++) dims[k++] = data->dims[d];
  ER_CHECK(require_countable(ctx, rank, dims));
  er__set_output(ctx, 0, data->dtype, rank, dims);
  return ER_STATUS_OK;
}

static er_status gather_run(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1];
  er_tensor *out = ctx->out[0];
  int64_t axis_attr;
  int axis;
  ER_CHECK(er__attr_int(ctx, "axis", 0, &axis_attr));
  ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, data->rank, &axis));
  size_t es = er_dtype_size(data->dtype);
  int64_t outer = dims_prod(data->dims, 0, axis);
  int64_t n = data->dims[axis];
  int64_t inner = dims_prod(data->dims, axis + 1, data->rank);
  int64_t nidx = er__count(ind);
  size_t chunk = (size_t)inner * es; /* bytes of one gathered slice */
  const char *src = data->data;      /* [outer, n, inner] */
  char *dst = out->data;             /* [outer, nidx, inner] */
  /* Validate every index first, then copy with the index loop innermost so
   * reads and writes both move forward. */
  for (int64_t j = 0; j < nidx; j++) {
    int64_t k;
    ER_CHECK(norm_index(ctx, er__get_i64(ind, j), n, axis, &k));
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < nidx; j++) {
      int64_t k = er__get_i64(ind, j);
      if (k < 0) k += n;
      copy_bytes(dst + (size_t)(o * nidx + j) * chunk, src + (size_t)(o * n + k) * chunk, chunk);
    }
  return ER_STATUS_OK;
}

static const er_op_def op_gather = {
    .name = "Gather", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = gather_check, .run = gather_run,
};

/* ======================================================================== */
/* GatherElements                                                            */
/* ======================================================================== */

/* data and indices have the same rank; off the axis, each indices dim must
 * fit inside data's (so only the axis needs run-time index checks). */
static er_status check_same_rank_within(er_kctx *ctx, const er_tensor *data, const er_tensor *ind,
                                        int axis, const char *ind_name) {
  char a[160], b[160];
  if (data->rank < 0 || ind->rank < 0) return ER_STATUS_OK;
  if (ind->rank != data->rank)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s %s must have the rank of data %s", ind_name,
                        er__shape_str(ind, a, sizeof a), er__shape_str(data, b, sizeof b));
  for (int d = 0; d < data->rank; d++) {
    if (d == axis || data->dims[d] < 0 || ind->dims[d] < 0) continue;
    if (ind->dims[d] > data->dims[d])
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "%s %s exceeds data %s in dim %d (only the axis %d may be larger)", ind_name,
                          er__shape_str(ind, a, sizeof a), er__shape_str(data, b, sizeof b), d, axis);
  }
  return ER_STATUS_OK;
}

static er_status gather_elements_axis(er_kctx *ctx, int *axis) {
  int64_t axis_attr;
  const er_tensor *data = ctx->in[0];
  ER_CHECK(er__attr_int(ctx, "axis", 0, &axis_attr));
  *axis = 0;
  if (data->rank < 0) return ER_STATUS_OK;
  return er__norm_axis(ctx, "axis", axis_attr, data->rank, axis);
}

static er_status gather_elements_check(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1];
  int axis;
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(er__require_rank(ctx, 0, 1, ER_MAX_RANK));
  ER_CHECK(gather_elements_axis(ctx, &axis));
  ER_CHECK(check_same_rank_within(ctx, data, ind, axis, "indices"));
  er__set_output(ctx, 0, data->dtype, ind->rank, ind->dims);
  return ER_STATUS_OK;
}

static er_status gather_elements_run(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1];
  er_tensor *out = ctx->out[0];
  int axis;
  ER_CHECK(gather_elements_axis(ctx, &axis));
  size_t es = er_dtype_size(data->dtype);
  int64_t dstr[ER_MAX_RANK], wstr[ER_MAX_RANK];
  er__strides(data->rank, data->dims, dstr);
  /* Walk indices' shape over data's strides with the axis left out; the
   * index value supplies the axis coordinate. */
  for (int d = 0; d < data->rank; d++) wstr[d] = d == axis ? 0 : dstr[d];
  walk w;
  walk_init(&w, ind->rank, ind->dims, wstr);
  int64_t n = er__count(ind), size = data->dims[axis];
  const char *src = data->data;
  char *dst = out->data;
  for (int64_t i = 0; i < n; i++, walk_next(&w)) {
    int64_t k = 0;
    ER_CHECK(norm_index(ctx, er__get_i64(ind, i), size, axis, &k));
    copy_bytes(dst + (size_t)i * es, src + (size_t)(w.off + k * dstr[axis]) * es, es);
  }
  return ER_STATUS_OK;
}

static const er_op_def op_gather_elements = {
    .name = "GatherElements", .domain = "", .min_version = 11, .max_version = 13,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = gather_elements_check, .run = gather_elements_run,
};

/* ======================================================================== */
/* GatherND                                                                  */
/* ======================================================================== */

/* batch_dims exists from version 12. */
static er_status gather_nd_batch_dims(er_kctx *ctx, int64_t *b) {
  *b = 0;
  if (ctx->node->version < 12) return ER_STATUS_OK;
  return er__attr_int(ctx, "batch_dims", 0, b);
}

/* output = indices.shape[:q-1] ++ data.shape[b+k:], k = indices.shape[-1]. */
static er_status gather_nd_check(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1];
  int64_t b;
  char s1[160], s2[160];
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(er__require_rank(ctx, 0, 1, ER_MAX_RANK));
  ER_CHECK(er__require_rank(ctx, 1, 1, ER_MAX_RANK));
  ER_CHECK(gather_nd_batch_dims(ctx, &b));
  if (b < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "batch_dims %lld must not be negative",
                        (long long)b);
  int r = data->rank, q = ind->rank;
  if ((r >= 0 && b >= r) || (q >= 0 && b >= q))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "batch_dims %lld must be less than the ranks of data (%d) and indices (%d)",
                        (long long)b, r, q);
  int64_t k = q >= 0 ? ind->dims[q - 1] : -1;
  if (r < 0 || q < 0 || k < 0) {
    er__set_output(ctx, 0, data->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  if (k < 1 || k > r - b)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "the last dim of indices %s is %lld; it must be in [1, %lld] (rank of data %s "
                        "minus batch_dims %lld)",
                        er__shape_str(ind, s1, sizeof s1), (long long)k, (long long)(r - b),
                        er__shape_str(data, s2, sizeof s2), (long long)b);
  for (int d = 0; d < b; d++)
    if (data->dims[d] >= 0 && ind->dims[d] >= 0 && data->dims[d] != ind->dims[d])
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "batch dim %d differs between data %s and indices %s", d,
                          er__shape_str(data, s2, sizeof s2), er__shape_str(ind, s1, sizeof s1));
  int rank = q - 1 + r - (int)b - (int)k;
  ER_CHECK(check_out_rank(ctx, rank));
  int64_t dims[ER_MAX_RANK];
  int n = 0;
  for (int d = 0; d < q - 1; d++) dims[n++] = d < b && ind->dims[d] < 0 ? data->dims[d] : ind->dims[d];
  for (int d = (int)(b + k); d < r; d++) dims[n++] = data->dims[d];
  ER_CHECK(require_countable(ctx, rank, dims));
  er__set_output(ctx, 0, data->dtype, rank, dims);
  return ER_STATUS_OK;
}

static er_status gather_nd_run(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1];
  er_tensor *out = ctx->out[0];
  int64_t b64;
  ER_CHECK(gather_nd_batch_dims(ctx, &b64));
  int b = (int)b64, r = data->rank, q = ind->rank;
  int k = (int)ind->dims[q - 1];
  size_t es = er_dtype_size(data->dtype);
  int64_t dstr[ER_MAX_RANK];
  er__strides(r, data->dims, dstr);
  int64_t nbatch = dims_prod(data->dims, 0, b);
  int64_t batch_elems = dims_prod(data->dims, b, r);  /* elements of data per batch */
  int64_t ntuples = dims_prod(ind->dims, b, q - 1);   /* index tuples per batch */
  int64_t slice = dims_prod(data->dims, b + k, r);    /* elements per gathered slice */
  const char *src = data->data;
  char *dst = out->data;
  for (int64_t bi = 0; bi < nbatch; bi++)
    for (int64_t t = 0; t < ntuples; t++) {
      int64_t tuple = bi * ntuples + t;
      int64_t off = bi * batch_elems;
      for (int j = 0; j < k; j++) {
        int64_t v = 0;
        ER_CHECK(norm_index(ctx, er__get_i64(ind, tuple * k + j), data->dims[b + j], b + j, &v));
        off += v * dstr[b + j];
      }
      copy_bytes(dst + (size_t)(tuple * slice) * es, src + (size_t)off * es, (size_t)slice * es);
    }
  return ER_STATUS_OK;
}

static const er_op_def op_gather_nd = {
    .name = "GatherND", .domain = "", .min_version = 11, .max_version = 13,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = gather_nd_check, .run = gather_nd_run,
};

/* ======================================================================== */
/* ScatterElements and Scatter                                               */
/* ======================================================================== */

static er_status scatter_elements_check(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1], *upd = ctx->in[2];
  int axis;
  reduction red;
  char s1[160], s2[160];
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(require_holdable(ctx, 2));
  ER_CHECK(er__require_same_type(ctx, 0, 2));
  ER_CHECK(er__require_rank(ctx, 0, 1, ER_MAX_RANK));
  ER_CHECK(read_reduction(ctx, &red));
  ER_CHECK(gather_elements_axis(ctx, &axis));
  ER_CHECK(check_same_rank_within(ctx, data, ind, axis, "indices"));
  if (ind->rank >= 0 && upd->rank >= 0) {
    bool same = ind->rank == upd->rank;
    for (int d = 0; same && d < ind->rank; d++)
      if (ind->dims[d] >= 0 && upd->dims[d] >= 0 && ind->dims[d] != upd->dims[d]) same = false;
    if (!same)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "updates %s must have the shape of indices %s",
                          er__shape_str(upd, s1, sizeof s1), er__shape_str(ind, s2, sizeof s2));
  }
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status scatter_elements_run(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1], *upd = ctx->in[2];
  er_tensor *out = ctx->out[0];
  int axis;
  reduction red;
  ER_CHECK(read_reduction(ctx, &red));
  ER_CHECK(gather_elements_axis(ctx, &axis));
  size_t es = er_dtype_size(data->dtype);
  if (out->nbytes) memcpy(out->data, data->data, out->nbytes);
  int64_t dstr[ER_MAX_RANK], wstr[ER_MAX_RANK];
  er__strides(data->rank, data->dims, dstr);
  for (int d = 0; d < data->rank; d++) wstr[d] = d == axis ? 0 : dstr[d];
  walk w;
  walk_init(&w, ind->rank, ind->dims, wstr);
  int64_t n = er__count(ind), size = data->dims[axis];
  char *dst = out->data;
  const char *src = upd->data;
  /* Updates apply in row-major order of `updates`, so with duplicate
   * indices and no reduction the last one wins. */
  for (int64_t i = 0; i < n; i++, walk_next(&w)) {
    int64_t k = 0;
    ER_CHECK(norm_index(ctx, er__get_i64(ind, i), size, axis, &k));
    int64_t at = w.off + k * dstr[axis];
    if (red == RED_NONE)
      copy_bytes(dst + (size_t)at * es, src + (size_t)i * es, es);
    else
      reduce_elem(out->data, at, upd->data, i, data->dtype, red);
  }
  return ER_STATUS_OK;
}

static const er_op_def op_scatter_elements = {
    .name = "ScatterElements", .domain = "", .min_version = 11, .max_version = 18,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = scatter_elements_check, .run = scatter_elements_run,
};

/* Scatter (9; deprecated at 11 in favour of ScatterElements) is
 * ScatterElements without reduction; version < 16 keeps reduction off. */
static const er_op_def op_scatter = {
    .name = "Scatter", .domain = "", .min_version = 9, .max_version = 11,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = scatter_elements_check, .run = scatter_elements_run,
};

/* ======================================================================== */
/* ScatterND                                                                 */
/* ======================================================================== */

/* updates.shape must be indices.shape[:q-1] ++ data.shape[k:]. */
static er_status scatter_nd_check(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1], *upd = ctx->in[2];
  reduction red;
  char s1[160], s2[160], s3[160];
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(require_holdable(ctx, 2));
  ER_CHECK(er__require_same_type(ctx, 0, 2));
  ER_CHECK(er__require_rank(ctx, 0, 1, ER_MAX_RANK));
  ER_CHECK(er__require_rank(ctx, 1, 1, ER_MAX_RANK));
  ER_CHECK(read_reduction(ctx, &red));
  int r = data->rank, q = ind->rank;
  int64_t k = q >= 0 ? ind->dims[q - 1] : -1;
  if (r >= 0 && k >= 0 && (k < 1 || k > r))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "the last dim of indices %s is %lld; it must be in [1, %d] (rank of data %s)",
                        er__shape_str(ind, s1, sizeof s1), (long long)k, r,
                        er__shape_str(data, s2, sizeof s2));
  if (r >= 0 && k >= 0 && upd->rank >= 0) {
    int want = q - 1 + r - (int)k;
    bool ok = upd->rank == want;
    for (int d = 0; ok && d < want; d++) {
      int64_t e = d < q - 1 ? ind->dims[d] : data->dims[k + d - (q - 1)];
      if (e >= 0 && upd->dims[d] >= 0 && e != upd->dims[d]) ok = false;
    }
    if (!ok)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "updates %s must have shape indices.shape[:-1] ++ data.shape[%lld:] "
                          "(indices %s, data %s)",
                          er__shape_str(upd, s1, sizeof s1), (long long)k,
                          er__shape_str(ind, s2, sizeof s2), er__shape_str(data, s3, sizeof s3));
  }
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status scatter_nd_run(er_kctx *ctx) {
  const er_tensor *data = ctx->in[0], *ind = ctx->in[1], *upd = ctx->in[2];
  er_tensor *out = ctx->out[0];
  reduction red;
  ER_CHECK(read_reduction(ctx, &red));
  int r = data->rank, q = ind->rank;
  int k = (int)ind->dims[q - 1];
  size_t es = er_dtype_size(data->dtype);
  if (out->nbytes) memcpy(out->data, data->data, out->nbytes);
  int64_t dstr[ER_MAX_RANK];
  er__strides(r, data->dims, dstr);
  int64_t ntuples = dims_prod(ind->dims, 0, q - 1);
  int64_t slice = dims_prod(data->dims, k, r); /* elements per update slice */
  char *dst = out->data;
  const char *src = upd->data;
  for (int64_t t = 0; t < ntuples; t++) {
    int64_t off = 0;
    for (int j = 0; j < k; j++) {
      int64_t v = 0;
      ER_CHECK(norm_index(ctx, er__get_i64(ind, t * k + j), data->dims[j], j, &v));
      off += v * dstr[j];
    }
    if (red == RED_NONE) {
      copy_bytes(dst + (size_t)off * es, src + (size_t)(t * slice) * es, (size_t)slice * es);
    } else {
      for (int64_t e = 0; e < slice; e++) reduce_elem(out->data, off + e, upd->data, t * slice + e, data->dtype, red);
    }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_scatter_nd = {
    .name = "ScatterND", .domain = "", .min_version = 11, .max_version = 18,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = scatter_nd_check, .run = scatter_nd_run,
};

/* ======================================================================== */
/* OneHot                                                                    */
/* ======================================================================== */

/* Output: indices' shape with `depth` inserted at axis (in [-r-1, r]); the
 * type of `values` = [off_value, on_value]. */
static er_status onehot_shape(er_kctx *ctx, int *axis_out, int64_t *depth_out, bool *depth_known) {
  const er_tensor *ind = ctx->in[0], *vals = ctx->in[2];
  int64_t axis, depth;
  bool known;
  char buf[160];
  ER_CHECK(er__attr_int(ctx, "axis", -1, &axis));
  ER_CHECK(read_scalar(ctx, 1, "depth", &known, &depth));
  if (known && depth < 0)
    return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE, "depth %lld must not be negative", (long long)depth);
  int64_t nv = er__tensor_count(vals);
  if (nv >= 0 && nv != 2)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "values %s must hold two elements [off, on]",
                        er__shape_str(vals, buf, sizeof buf));
  *depth_out = known ? depth : -1;
  *depth_known = known;
  *axis_out = 0;
  if (ind->rank < 0) return ER_STATUS_OK;
  int r = ind->rank;
  if (axis < -(int64_t)r - 1 || axis > r)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "axis %lld is out of range [%d, %d] for indices of rank %d",
                        (long long)axis, -r - 1, r, r);
  *axis_out = (int)(axis < 0 ? axis + r + 1 : axis);
  return ER_STATUS_OK;
}

static er_status onehot_check(er_kctx *ctx) {
  const er_tensor *ind = ctx->in[0], *vals = ctx->in[2];
  int axis;
  int64_t depth;
  bool known;
  ER_CHECK(er__require_type(ctx, 0, er__types_numeric));
  ER_CHECK(er__require_type(ctx, 1, er__types_numeric));
  ER_CHECK(require_holdable(ctx, 2));
  ER_CHECK(onehot_shape(ctx, &axis, &depth, &known));
  if (ind->rank < 0) {
    er__set_output(ctx, 0, vals->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  int rank = ind->rank + 1;
  ER_CHECK(check_out_rank(ctx, rank));
  int64_t dims[ER_MAX_RANK];
  for (int d = 0, k = 0; d < rank; d++) dims[d] = d == axis ? depth : ind->dims[k++];
  ER_CHECK(require_countable(ctx, rank, dims));
  er__set_output(ctx, 0, vals->dtype, rank, dims);
  return ER_STATUS_OK;
}

static er_status onehot_run(er_kctx *ctx) {
  const er_tensor *ind = ctx->in[0], *vals = ctx->in[2];
  er_tensor *out = ctx->out[0];
  int axis;
  int64_t depth;
  bool known;
  ER_CHECK(onehot_shape(ctx, &axis, &depth, &known));
  size_t es = er_dtype_size(vals->dtype);
  const char *off_v = vals->data, *on_v = (const char *)vals->data + es;
  int64_t outer = dims_prod(ind->dims, 0, axis);
  int64_t inner = dims_prod(ind->dims, axis, ind->rank);
  int64_t total = er__count(out);
  char *dst = out->data; /* [outer, depth, inner] */
  /* Indices in [-depth, depth) select a position, negative ones counted
   * from the end; anything else leaves the whole line at off_value.
   * Version 9's text names only [0, depth), but onnxruntime and the ONNX
   * reference wrap negative indices there too, and version 11 made it the
   * rule, so every version wraps. */
  for (int64_t i = 0; i < total; i++) copy_bytes(dst + (size_t)i * es, off_v, es);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      /* Float indices are truncated toward zero; NaN and huge values read
       * as INT64_MIN, which is out of range. */
      int64_t v = er__get_i64(ind, o * inner + j);
      if (v < 0 && v >= -depth) v += depth;
      if (v < 0 || v >= depth) continue;
      copy_bytes(dst + (size_t)((o * depth + v) * inner + j) * es, on_v, es);
    }
  return ER_STATUS_OK;
}

static const er_op_def op_onehot = {
    .name = "OneHot", .domain = "", .min_version = 9, .max_version = 28,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = onehot_check, .run = onehot_run,
};

/* ======================================================================== */
/* NonZero                                                                   */
/* ======================================================================== */

/* Floats compare with zero (so -0.0 is zero and NaN is not); other types
 * are non-zero when any byte is. */
static bool elem_nonzero(const void *data, er_dtype t, size_t es, int64_t i) {
  switch (t) {
    case ER_DTYPE_FLOAT: return ((const float *)data)[i] != 0.0f;
    case ER_DTYPE_DOUBLE: return ((const double *)data)[i] != 0.0;
    default:
      if (er__dtype_is_float(t) || er__dtype_is_float8(t)) return er__load_f64(data, t, i) != 0.0;
      const unsigned char *p = (const unsigned char *)data + (size_t)i * es;
      for (size_t b = 0; b < es; b++)
        if (p[b]) return true;
      return false;
  }
}

/* Output [rank, nnz] int64; nnz is known only from the data, so run()
 * allocates it. A scalar gives [0, nnz], as the spec says. */
static er_status nonzero_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  ER_CHECK(require_holdable(ctx, 0));
  int64_t dims[2] = {x->rank >= 0 ? x->rank : -1, -1};
  er__set_output(ctx, 0, ER_DTYPE_INT64, 2, dims);
  return ER_STATUS_OK;
}

static er_status nonzero_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t n = er__count(x), nnz = 0;
  size_t es = er_dtype_size(x->dtype);
  for (int64_t i = 0; i < n; i++) nnz += elem_nonzero(x->data, x->dtype, es, i);
  int64_t dims[2] = {x->rank, nnz};
  ER_CHECK(er__op_output(ctx, 0, ER_DTYPE_INT64, 2, dims));
  int64_t *y = ctx->out[0]->data; /* [rank, nnz] */
  int64_t zeros[ER_MAX_RANK] = {0};
  walk w;
  walk_init(&w, x->rank, x->dims, zeros);
  for (int64_t i = 0, c = 0; i < n; i++, walk_next(&w)) {
    if (!elem_nonzero(x->data, x->dtype, es, i)) continue;
    for (int d = 0; d < x->rank; d++) y[d * nnz + c] = w.idx[d];
    c++;
  }
  return ER_STATUS_OK;
}

static const er_op_def op_nonzero = {
    .name = "NonZero", .domain = "", .min_version = 9, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = ER_OP_DYNAMIC_OUTPUT,
    .check = nonzero_check, .run = nonzero_run,
};

/* ======================================================================== */
/* TopK                                                                      */
/* ======================================================================== */

/* Version 1 takes k as an attribute; from 10 it is input 1 (one int64). */
static er_status topk_params(er_kctx *ctx, int *axis, int64_t *k, bool *k_known, bool *largest) {
  const er_tensor *x = ctx->in[0];
  int64_t axis_attr, largest_attr = 1;
  ER_CHECK(er__attr_int(ctx, "axis", -1, &axis_attr));
  if (ctx->node->version >= 11) ER_CHECK(er__attr_int(ctx, "largest", 1, &largest_attr));
  *largest = largest_attr != 0;
  if (ctx->node->version < 10) {
    if (!er__node_attr(ctx->node, "k"))
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'k' is missing");
    ER_CHECK(er__attr_int(ctx, "k", 0, k));
    *k_known = true;
  } else {
    ER_CHECK(er__require_type(ctx, 1, er__types_index));
    ER_CHECK(read_scalar(ctx, 1, "K", k_known, k));
  }
  if (*k_known && *k < 0)
    return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE, "k %lld must not be negative", (long long)*k);
  *axis = 0;
  if (x->rank < 0) return ER_STATUS_OK;
  ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, x->rank, axis));
  int64_t n = x->dims[*axis];
  if (*k_known && n >= 0 && *k > n)
    return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE, "k %lld exceeds the size %lld of axis %d",
                        (long long)*k, (long long)n, *axis);
  return ER_STATUS_OK;
}

static er_status topk_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int axis;
  int64_t k;
  bool known, largest;
  ER_CHECK(er__require_type(ctx, 0, er__types_numeric));
  ER_CHECK(er__require_rank(ctx, 0, 1, ER_MAX_RANK));
  ER_CHECK(topk_params(ctx, &axis, &k, &known, &largest));
  if (x->rank < 0) {
    er__set_output(ctx, 0, x->dtype, -1, NULL);
    er__set_output(ctx, 1, ER_DTYPE_INT64, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = known ? k : -1;
  er__set_output(ctx, 0, x->dtype, x->rank, dims);
  er__set_output(ctx, 1, ER_DTYPE_INT64, x->rank, dims);
  return ER_STATUS_OK;
}

typedef struct topk_order {
  const uint64_t *keys; /* [n] order keys of one slice */
  bool largest;
} topk_order;

/* Larger (or smaller) first; equal values keep the lower index first. */
static int topk_cmp(const void *c, int64_t a, int64_t b) {
  const topk_order *o = c;
  uint64_t ka = o->keys[a], kb = o->keys[b];
  if (ka != kb) return (ka > kb) == o->largest ? -1 : 1;
  return a < b ? -1 : (a > b);
}

static er_status topk_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *yv = er__out(ctx, 0), *yi = er__out(ctx, 1);
  int axis;
  int64_t k;
  bool known, largest;
  ER_CHECK(topk_params(ctx, &axis, &k, &known, &largest));
  int64_t outer = dims_prod(x->dims, 0, axis);
  int64_t n = x->dims[axis];
  int64_t inner = dims_prod(x->dims, axis + 1, x->rank);
  if (k == 0 || outer * inner == 0) return ER_STATUS_OK;
  size_t es = er_dtype_size(x->dtype);
  uint64_t *keys = er__malloc((size_t)n * sizeof *keys, "TopK keys");
  int64_t *order = er__malloc((size_t)n * 2 * sizeof *order, "TopK order");
  if (!keys || !order) {
    free(keys);
    free(order);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  /* NaN orders above every number (UINT64_MAX key), as onnxruntime and
   * numpy do: it comes first when largest=1 and last otherwise. */
  topk_order ord = {keys, largest};
  const char *src = x->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t base = o * n * inner + j;
      for (int64_t m = 0; m < n; m++) {
        keys[m] = order_key(x->data, x->dtype, base + m * inner, UINT64_MAX);
        order[m] = m;
      }
      sort_indices(order, order + n, n, topk_cmp, &ord);
      /* sorted=0 leaves the order unspecified; sorted order is valid. */
      for (int64_t r = 0; r < k; r++) {
        int64_t at = (o * k + r) * inner + j;
        if (yv)
          copy_bytes((char *)yv->data + (size_t)at * es, src + (size_t)(base + order[r] * inner) * es, es);
        if (yi) ((int64_t *)yi->data)[at] = order[r];
      }
    }
  free(keys);
  free(order);
  return ER_STATUS_OK;
}

static const er_op_def op_topk_1 = {
    .name = "TopK", .domain = "", .min_version = 1, .max_version = 1,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 2, .max_outputs = 2,
    .check = topk_check, .run = topk_run,
};

static const er_op_def op_topk = {
    .name = "TopK", .domain = "", .min_version = 10, .max_version = 24,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 2, .max_outputs = 2,
    .value_inputs = 1u << 1,
    .check = topk_check, .run = topk_run,
};

/* ======================================================================== */
/* ArgMax and ArgMin                                                         */
/* ======================================================================== */

typedef struct arg_params {
  int axis;
  bool keepdims;
  bool select_last;  /* version 12+ */
} arg_params;

static er_status arg_params_read(er_kctx *ctx, arg_params *p) {
  const er_tensor *x = ctx->in[0];
  int64_t axis, keepdims, last = 0;
  ER_CHECK(er__attr_int(ctx, "axis", 0, &axis));
  ER_CHECK(er__attr_int(ctx, "keepdims", 1, &keepdims));
  if (ctx->node->version >= 12) ER_CHECK(er__attr_int(ctx, "select_last_index", 0, &last));
  p->keepdims = keepdims != 0;
  p->select_last = last != 0;
  p->axis = 0;
  if (x->rank < 0) return ER_STATUS_OK;
  return er__norm_axis(ctx, "axis", axis, x->rank, &p->axis);
}

static er_status arg_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  arg_params p;
  ER_CHECK(er__require_type(ctx, 0, er__types_numeric));
  ER_CHECK(er__require_rank(ctx, 0, 1, ER_MAX_RANK));
  ER_CHECK(arg_params_read(ctx, &p));
  if (x->rank < 0) {
    er__set_output(ctx, 0, ER_DTYPE_INT64, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  int rank = 0;
  bool rest_empty = false;
  for (int d = 0; d < x->rank; d++) {
    if (d == p.axis) {
      if (p.keepdims) dims[rank++] = 1;
      continue;
    }
    if (x->dims[d] == 0) rest_empty = true;
    dims[rank++] = x->dims[d];
  }
  if (x->dims[p.axis] == 0 && !rest_empty)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "axis %d has size 0; there is no element to pick",
                        p.axis);
  er__set_output(ctx, 0, ER_DTYPE_INT64, rank, dims);
  return ER_STATUS_OK;
}

/* Picks along the axis by order key. NaN wins over every number (key
 * UINT64_MAX for ArgMax, 0 for ArgMin), as numpy's argmax/argmin and the
 * ONNX reference do; ties go to the first index, or the last with
 * select_last_index. */
static er_status arg_run(er_kctx *ctx, bool is_max) {
  const er_tensor *x = ctx->in[0];
  int64_t *y = ctx->out[0]->data;
  arg_params p;
  ER_CHECK(arg_params_read(ctx, &p));
  int64_t outer = dims_prod(x->dims, 0, p.axis);
  int64_t n = x->dims[p.axis];
  int64_t inner = dims_prod(x->dims, p.axis + 1, x->rank);
  uint64_t nan_key = is_max ? UINT64_MAX : 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t base = o * n * inner + j, best = 0;
      if (x->dtype == ER_DTYPE_FLOAT) {
        const float *v = (const float *)x->data + base;
        float bv = v[0];
        for (int64_t m = 1; m < n; m++) {
          float c = v[m * inner];
          bool better = bv == bv && (c != c || (is_max ? c > bv : c < bv));
          bool same = c == bv || (c != c && bv != bv);
          if (better || (p.select_last && same)) {
            bv = c;
            best = m;
          }
        }
      } else {
        uint64_t bk = order_key(x->data, x->dtype, base, nan_key);
        for (int64_t m = 1; m < n; m++) {
          uint64_t c = order_key(x->data, x->dtype, base + m * inner, nan_key);
          if ((is_max ? c > bk : c < bk) || (p.select_last && c == bk)) {
            bk = c;
            best = m;
          }
        }
      }
      y[o * inner + j] = best;
    }
  return ER_STATUS_OK;
}

static er_status argmax_run(er_kctx *ctx) { return arg_run(ctx, true); }
static er_status argmin_run(er_kctx *ctx) { return arg_run(ctx, false); }

static const er_op_def op_argmax = {
    .name = "ArgMax", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = arg_check, .run = argmax_run,
};

static const er_op_def op_argmin = {
    .name = "ArgMin", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = arg_check, .run = argmin_run,
};

/* ======================================================================== */
/* CumSum and CumProd                                                        */
/* ======================================================================== */

static const er_dtype cum_types[] = {ER_DTYPE_FLOAT,  ER_DTYPE_DOUBLE, ER_DTYPE_FLOAT16,
                                     ER_DTYPE_BFLOAT16, ER_DTYPE_INT32, ER_DTYPE_INT64,
                                     ER_DTYPE_UINT32, ER_DTYPE_UINT64, ER_DTYPE_UNDEFINED};

/* axis is input 1: a 0-D (or one-element) int32/int64 tensor. */
static er_status cum_axis(er_kctx *ctx, int *axis, bool *known) {
  const er_tensor *x = ctx->in[0];
  int64_t a;
  ER_CHECK(read_scalar(ctx, 1, "axis", known, &a));
  *axis = 0;
  if (!*known || x->rank < 0) {
    *known = false;
    return ER_STATUS_OK;
  }
  if (a < -(int64_t)x->rank || a >= x->rank)
    return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE, "axis %lld (input 1) is out of range [%d, %d] for rank %d",
                        (long long)a, -x->rank, x->rank - 1, x->rank);
  *axis = (int)(a < 0 ? a + x->rank : a);
  return ER_STATUS_OK;
}

static er_status cum_check(er_kctx *ctx) {
  int axis;
  bool known;
  ER_CHECK(er__require_type(ctx, 0, cum_types));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(er__require_rank(ctx, 0, 1, ER_MAX_RANK));
  ER_CHECK(cum_axis(ctx, &axis, &known));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

/* Floats accumulate in double and round once per stored element; integers
 * accumulate in 64-bit two's complement and wrap to their width on store. */
static er_status cum_run(er_kctx *ctx, bool product) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int axis;
  bool known;
  int64_t exclusive, reverse;
  ER_CHECK(cum_axis(ctx, &axis, &known));
  ER_CHECK(er__attr_int(ctx, "exclusive", 0, &exclusive));
  ER_CHECK(er__attr_int(ctx, "reverse", 0, &reverse));
  int64_t outer = dims_prod(x->dims, 0, axis);
  int64_t n = x->dims[axis];
  int64_t inner = dims_prod(x->dims, axis + 1, x->rank);
  bool is_float = er__dtype_is_float(x->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      double accf = product ? 1.0 : 0.0;
      uint64_t acci = product ? 1 : 0;
      for (int64_t s = 0; s < n; s++) {
        int64_t m = reverse ? n - 1 - s : s;
        int64_t at = (o * n + m) * inner + j;
        if (is_float) {
          double v = x->dtype == ER_DTYPE_FLOAT ? ((const float *)x->data)[at]
                                                : er__load_f64(x->data, x->dtype, at);
          if (!exclusive) accf = product ? accf * v : accf + v;
          if (y->dtype == ER_DTYPE_FLOAT)
            ((float *)y->data)[at] = (float)accf;
          else
            er__store_f64(y->data, y->dtype, at, accf);
          if (exclusive) accf = product ? accf * v : accf + v;
        } else {
          uint64_t v = (uint64_t)er__load_i64(x->data, x->dtype, at);
          if (!exclusive) acci = product ? acci * v : acci + v;
          er__store_i64(y->data, y->dtype, at, (int64_t)acci);
          if (exclusive) acci = product ? acci * v : acci + v;
        }
      }
    }
  return ER_STATUS_OK;
}

static er_status cumsum_run(er_kctx *ctx) { return cum_run(ctx, false); }
static er_status cumprod_run(er_kctx *ctx) { return cum_run(ctx, true); }

static const er_op_def op_cumsum = {
    .name = "CumSum", .domain = "", .min_version = 11, .max_version = 14,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = cum_check, .run = cumsum_run,
};

static const er_op_def op_cumprod = {
    .name = "CumProd", .domain = "", .min_version = 26, .max_version = 26,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = cum_check, .run = cumprod_run,
};

/* ======================================================================== */
/* Compress                                                                  */
/* ======================================================================== */

static er_status compress_axis(er_kctx *ctx, bool *has_axis, int *axis) {
  const er_tensor *x = ctx->in[0];
  int64_t a;
  *has_axis = er__node_attr(ctx->node, "axis") != NULL;
  *axis = 0;
  if (!*has_axis) return ER_STATUS_OK;
  ER_CHECK(er__attr_int(ctx, "axis", 0, &a));
  if (x->rank < 0) return ER_STATUS_OK;
  if (x->rank == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "axis %lld given for a scalar input", (long long)a);
  return er__norm_axis(ctx, "axis", a, x->rank, axis);
}

/* Output: input's shape with the axis resized to the number of selected
 * slices (a 1-D list of elements without axis); the count depends on the
 * data, so run() allocates. */
static er_status compress_check(er_kctx *ctx) {
  static const er_dtype bool_only[] = {ER_DTYPE_BOOL, ER_DTYPE_UNDEFINED};
  const er_tensor *x = ctx->in[0];
  bool has_axis;
  int axis;
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(er__require_type(ctx, 1, bool_only));
  ER_CHECK(er__require_rank(ctx, 1, 1, 1));
  ER_CHECK(compress_axis(ctx, &has_axis, &axis));
  if (!has_axis) {
    int64_t d = -1;
    er__set_output(ctx, 0, x->dtype, 1, &d);
  } else if (x->rank < 0) {
    er__set_output(ctx, 0, x->dtype, -1, NULL);
  } else {
    int64_t dims[ER_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = -1;
    er__set_output(ctx, 0, x->dtype, x->rank, dims);
  }
  return ER_STATUS_OK;
}

static er_status compress_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *cond = ctx->in[1];
  bool has_axis;
  int axis;
  ER_CHECK(compress_axis(ctx, &has_axis, &axis));
  /* Without axis the input is taken as a flat [1, count, 1]. */
  int64_t outer = has_axis ? dims_prod(x->dims, 0, axis) : 1;
  int64_t n = has_axis ? x->dims[axis] : er__count(x);
  int64_t inner = has_axis ? dims_prod(x->dims, axis + 1, x->rank) : 1;
  int64_t nc = cond->dims[0], kept = 0;
  const uint8_t *c = cond->data;
  /* Like numpy.compress: a shorter condition selects from the first slices
   * only; entries past the axis must not select anything. */
  for (int64_t i = 0; i < nc; i++) {
    if (!c[i]) continue;
    if (i >= n)
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                          "condition selects index %lld, but the axis has size %lld", (long long)i,
                          (long long)n);
    kept++;
  }
  int64_t dims[ER_MAX_RANK];
  int rank = 1;
  dims[0] = kept;
  if (has_axis) {
    rank = x->rank;
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = kept;
  }
  ER_CHECK(er__op_output(ctx, 0, x->dtype, rank, dims));
  size_t chunk = (size_t)inner * er_dtype_size(x->dtype);
  const char *src = x->data;
  char *dst = ctx->out[0]->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < nc && i < n; i++) {
      if (!c[i]) continue;
      copy_bytes(dst, src + (size_t)(o * n + i) * chunk, chunk);
      dst += chunk;
    }
  return ER_STATUS_OK;
}

static const er_op_def op_compress = {
    .name = "Compress", .domain = "", .min_version = 9, .max_version = 28,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = ER_OP_DYNAMIC_OUTPUT,
    .check = compress_check, .run = compress_run,
};

/* ======================================================================== */
/* Unique                                                                    */
/* ======================================================================== */

static er_status unique_params(er_kctx *ctx, bool *has_axis, int *axis, bool *sorted) {
  const er_tensor *x = ctx->in[0];
  int64_t a, s;
  ER_CHECK(er__attr_int(ctx, "sorted", 1, &s));
  if (s != 0 && s != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "sorted %lld must be 0 or 1", (long long)s);
  *sorted = s != 0;
  *has_axis = er__node_attr(ctx->node, "axis") != NULL;
  *axis = 0;
  if (!*has_axis) return ER_STATUS_OK;
  ER_CHECK(er__attr_int(ctx, "axis", 0, &a));
  if (x->rank < 0) return ER_STATUS_OK;
  if (x->rank == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "axis %lld given for a scalar input", (long long)a);
  return er__norm_axis(ctx, "axis", a, x->rank, axis);
}

/* Outputs: Y (unique elements, or slices along axis), indices (first
 * occurrence of each in X), inverse_indices (for each element or slice of
 * X, its position in Y) and counts. Sizes depend on the data. */
static er_status unique_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  bool has_axis, sorted;
  int axis;
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(unique_params(ctx, &has_axis, &axis, &sorted));
  int64_t unknown = -1;
  int64_t m = has_axis ? (x->rank >= 0 ? x->dims[axis] : -1) : er__tensor_count(x);
  if (!has_axis) {
    er__set_output(ctx, 0, x->dtype, 1, &unknown);
  } else if (x->rank < 0) {
    er__set_output(ctx, 0, x->dtype, -1, NULL);
  } else {
    int64_t dims[ER_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = -1;
    er__set_output(ctx, 0, x->dtype, x->rank, dims);
  }
  er__set_output(ctx, 1, ER_DTYPE_INT64, 1, &unknown);
  er__set_output(ctx, 2, ER_DTYPE_INT64, 1, &m);
  er__set_output(ctx, 3, ER_DTYPE_INT64, 1, &unknown);
  return ER_STATUS_OK;
}

typedef struct unique_order {
  const uint64_t *keys; /* [items, len] order keys */
  int64_t len;          /* keys per item */
} unique_order;

static int unique_cmp_keys(const unique_order *o, int64_t a, int64_t b) {
  const uint64_t *ka = o->keys + a * o->len, *kb = o->keys + b * o->len;
  for (int64_t e = 0; e < o->len; e++)
    if (ka[e] != kb[e]) return ka[e] < kb[e] ? -1 : 1;
  return 0;
}

/* Lexicographic by value, then by position (so each run of equal items
 * starts at its first occurrence). */
static int unique_cmp(const void *c, int64_t a, int64_t b) {
  int r = unique_cmp_keys(c, a, b);
  if (r) return r;
  return a < b ? -1 : (a > b);
}

/* Orders groups by their first occurrence (sorted = 0). */
static int first_cmp(const void *c, int64_t a, int64_t b) {
  const int64_t *first = c;
  return first[a] < first[b] ? -1 : (first[a] > first[b]);
}

static er_status unique_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  bool has_axis, sorted;
  int axis;
  er_status st = ER_STATUS_OK;
  ER_CHECK(unique_params(ctx, &has_axis, &axis, &sorted));
  /* Items are elements (no axis) or slices along the axis: X is viewed as
   * [outer, items, inner] and item m is X[:, m, :]. */
  int64_t outer = has_axis ? dims_prod(x->dims, 0, axis) : 1;
  int64_t items = has_axis ? x->dims[axis] : er__count(x);
  int64_t inner = has_axis ? dims_prod(x->dims, axis + 1, x->rank) : 1;
  int64_t len = outer * inner;
  size_t es = er_dtype_size(x->dtype);
  size_t nk = (size_t)(items * len);
  uint64_t *keys = er__malloc((nk ? nk : 1) * sizeof *keys, "Unique keys");
  /* order [items] + tmp [items] + first [items] + counts [items] +
   * inverse [items] + group position [items] */
  int64_t *buf = er__malloc((size_t)(items ? items : 1) * 6 * sizeof *buf, "Unique work");
  if (!keys || !buf) {
    free(keys);
    free(buf);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  int64_t *order = buf, *tmp = buf + items, *first = buf + 2 * items, *counts = buf + 3 * items;
  int64_t *inverse = buf + 4 * items, *pos = buf + 5 * items;
  for (int64_t m = 0; m < items; m++) {
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < inner; j++)
        keys[m * len + o * inner + j] = order_key(x->data, x->dtype, (o * items + m) * inner + j, UINT64_MAX);
    order[m] = m;
  }
  unique_order uo = {keys, len};
  sort_indices(order, tmp, items, unique_cmp, &uo);
  int64_t ngroups = 0;
  for (int64_t s = 0; s < items; s++) {
    int64_t m = order[s];
    if (s == 0 || unique_cmp_keys(&uo, order[s - 1], m) != 0) {
      first[ngroups] = m;
      counts[ngroups] = 0;
      ngroups++;
    }
    inverse[m] = ngroups - 1;
    counts[ngroups - 1]++;
  }
  /* pos[g]: where group g (in value order) goes in the outputs. */
  for (int64_t g = 0; g < ngroups; g++) pos[g] = g;
  if (!sorted) {
    int64_t *perm = order; /* reused: no longer needed */
    for (int64_t g = 0; g < ngroups; g++) perm[g] = g;
    sort_indices(perm, tmp, ngroups, first_cmp, first);
    for (int64_t g = 0; g < ngroups; g++) pos[perm[g]] = g;
  }

  int64_t ydims[ER_MAX_RANK];
  int yrank = 1;
  ydims[0] = ngroups;
  if (has_axis) {
    yrank = x->rank;
    memcpy(ydims, x->dims, sizeof ydims);
    ydims[axis] = ngroups;
  }
  st = er__op_output(ctx, 0, x->dtype, yrank, ydims);
  if (st == ER_STATUS_OK) st = er__op_output(ctx, 1, ER_DTYPE_INT64, 1, &ngroups);
  if (st == ER_STATUS_OK) st = er__op_output(ctx, 2, ER_DTYPE_INT64, 1, &items);
  if (st == ER_STATUS_OK) st = er__op_output(ctx, 3, ER_DTYPE_INT64, 1, &ngroups);
  if (st == ER_STATUS_OK) {
    er_tensor *y = er__out(ctx, 0), *yi = er__out(ctx, 1), *yinv = er__out(ctx, 2), *yc = er__out(ctx, 3);
    size_t chunk = (size_t)inner * es;
    for (int64_t g = 0; g < ngroups; g++) {
      int64_t p = pos[g];
      if (y)
        for (int64_t o = 0; o < outer; o++)
          copy_bytes((char *)y->data + (size_t)(o * ngroups + p) * chunk,
                     (const char *)x->data + (size_t)(o * items + first[g]) * chunk, chunk);
      if (yi) ((int64_t *)yi->data)[p] = first[g];
      if (yc) ((int64_t *)yc->data)[p] = counts[g];
    }
    if (yinv)
      for (int64_t m = 0; m < items; m++) ((int64_t *)yinv->data)[m] = pos[inverse[m]];
  }
  free(keys);
  free(buf);
  return st;
}

static const er_op_def op_unique = {
    .name = "Unique", .domain = "", .min_version = 11, .max_version = 28,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 4,
    .flags = ER_OP_DYNAMIC_OUTPUT,
    .check = unique_check, .run = unique_run,
};

/* ======================================================================== */
/* ReverseSequence                                                           */
/* ======================================================================== */

static er_status reverse_sequence_axes(er_kctx *ctx, int *time_axis, int *batch_axis) {
  int64_t t, b;
  ER_CHECK(er__attr_int(ctx, "time_axis", 0, &t));
  ER_CHECK(er__attr_int(ctx, "batch_axis", 1, &b));
  if ((t != 0 && t != 1) || (b != 0 && b != 1) || t == b)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "time_axis %lld and batch_axis %lld must be 0 and 1 in some order", (long long)t,
                        (long long)b);
  *time_axis = (int)t;
  *batch_axis = (int)b;
  return ER_STATUS_OK;
}

static er_status reverse_sequence_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *lens = ctx->in[1];
  int ta = 0, ba = 0;
  char s1[160], s2[160];
  ER_CHECK(require_holdable(ctx, 0));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(er__require_rank(ctx, 0, 2, ER_MAX_RANK));
  ER_CHECK(er__require_rank(ctx, 1, 1, 1));
  ER_CHECK(reverse_sequence_axes(ctx, &ta, &ba));
  if (x->rank >= 0 && lens->rank == 1 && x->dims[ba] >= 0 && lens->dims[0] >= 0 &&
      x->dims[ba] != lens->dims[0])
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "sequence_lens %s must have one entry per batch (axis %d of input %s)",
                        er__shape_str(lens, s1, sizeof s1), ba, er__shape_str(x, s2, sizeof s2));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status reverse_sequence_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *lens = ctx->in[1];
  er_tensor *y = ctx->out[0];
  int ta = 0, ba = 0;
  ER_CHECK(reverse_sequence_axes(ctx, &ta, &ba));
  int64_t nt = x->dims[ta], nb = x->dims[ba];
  size_t chunk = (size_t)dims_prod(x->dims, 2, x->rank) * er_dtype_size(x->dtype);
  /* Element (t, b) of the first two axes starts at slice t*nb+b when time
   * is axis 0, b*nt+t otherwise. */
  int64_t t_step = ta == 0 ? nb : 1, b_step = ta == 0 ? 1 : nt;
  const char *src = x->data;
  char *dst = y->data;
  for (int64_t b = 0; b < nb; b++) {
    int64_t len = er__get_i64(lens, b);
    if (len < 0 || len > nt)
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                          "sequence_lens[%lld] = %lld is out of range [0, %lld] (the time axis size)",
                          (long long)b, (long long)len, (long long)nt);
    for (int64_t t = 0; t < nt; t++) {
      int64_t from = t < len ? len - 1 - t : t;
      copy_bytes(dst + (size_t)(t * t_step + b * b_step) * chunk,
                 src + (size_t)(from * t_step + b * b_step) * chunk, chunk);
    }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_reverse_sequence = {
    .name = "ReverseSequence", .domain = "", .min_version = 10, .max_version = 28,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = reverse_sequence_check, .run = reverse_sequence_run,
};

const er_op_def *const er__ops_index[] = {
    &op_gather,
    &op_gather_elements,
    &op_gather_nd,
    &op_scatter_elements,
    &op_scatter,
    &op_scatter_nd,
    &op_onehot,
    &op_nonzero,
    &op_topk_1,
    &op_topk,
    &op_argmax,
    &op_argmin,
    &op_cumsum,
    &op_cumprod,
    &op_compress,
    &op_unique,
    &op_reverse_sequence,
    NULL,
};
