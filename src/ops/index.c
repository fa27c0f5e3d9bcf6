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
#include "ops/index-impl.h"

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

/* Requires input i to be present with a type edgerun can hold. Byte-moving
 * ops accept any such type; string, complex and float4 are UNSUPPORTED. */
er_status er__idx_require_holdable(const er_kctx *ctx, int i) {
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
er_status er__idx_require_countable(const er_kctx *ctx, int rank, const int64_t *dims) {
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

/* Reads the one value of input i (a scalar or one-element tensor; floats
 * are truncated toward zero). *known is false while the values are unknown
 * (load time). `what` names the input in messages. */
er_status er__idx_read_scalar(const er_kctx *ctx, int i, const char *what, bool *known, int64_t *v) {
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

void er__idx_walk_init(walk *w, int rank, const int64_t *dims, const int64_t *strides) {
  memset(w, 0, sizeof *w);
  w->rank = rank;
  for (int d = 0; d < rank; d++) {
    w->dims[d] = dims[d];
    w->strides[d] = strides[d];
  }
}

void er__idx_walk_next(walk *w) {
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
uint64_t er__idx_order_key(const void *data, er_dtype t, int64_t i, uint64_t nan_key) {
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

void er__idx_sort_indices(int64_t *a, int64_t *tmp, int64_t n, index_cmp cmp, const void *c) {
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
  ER_CHECK(er__idx_require_holdable(ctx, 0));
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
  ER_CHECK(er__idx_require_countable(ctx, rank, dims));
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
  ER_CHECK(er__idx_require_holdable(ctx, 0));
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
  er__idx_walk_init(&w, ind->rank, ind->dims, wstr);
  int64_t n = er__count(ind), size = data->dims[axis];
  const char *src = data->data;
  char *dst = out->data;
  for (int64_t i = 0; i < n; i++, er__idx_walk_next(&w)) {
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
  ER_CHECK(er__idx_require_holdable(ctx, 0));
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
  ER_CHECK(er__idx_require_countable(ctx, rank, dims));
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
  ER_CHECK(er__idx_require_holdable(ctx, 0));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(er__idx_require_holdable(ctx, 2));
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
  er__idx_walk_init(&w, ind->rank, ind->dims, wstr);
  int64_t n = er__count(ind), size = data->dims[axis];
  char *dst = out->data;
  const char *src = upd->data;
  /* Updates apply in row-major order of `updates`, so with duplicate
   * indices and no reduction the last one wins. */
  for (int64_t i = 0; i < n; i++, er__idx_walk_next(&w)) {
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
  ER_CHECK(er__idx_require_holdable(ctx, 0));
  ER_CHECK(er__require_type(ctx, 1, er__types_index));
  ER_CHECK(er__idx_require_holdable(ctx, 2));
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

const er_op_def *const er__ops_index[] = {
    &op_gather,
    &op_gather_elements,
    &op_gather_nd,
    &op_scatter_elements,
    &op_scatter,
    &op_scatter_nd,
    &er__idx_op_onehot,
    &er__idx_op_nonzero,
    &er__idx_op_topk_1,
    &er__idx_op_topk,
    &er__idx_op_argmax,
    &er__idx_op_argmin,
    &er__idx_op_cumsum,
    &er__idx_op_cumprod,
    &er__idx_op_compress,
    &er__idx_op_unique,
    &er__idx_op_reverse_sequence,
    NULL,
};
