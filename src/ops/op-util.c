/* op-util.c - shared helpers for operator checks and reference kernels. */
#include <stdio.h>

#include "ops/op.h"

const er_dtype er__types_float[] = {ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,
                                    ER_DTYPE_DOUBLE, ER_DTYPE_UNDEFINED};
const er_dtype er__types_numeric[] = {
    ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,  ER_DTYPE_DOUBLE, ER_DTYPE_INT8,
    ER_DTYPE_INT16,   ER_DTYPE_INT32,    ER_DTYPE_INT64,  ER_DTYPE_UINT8,  ER_DTYPE_UINT16,
    ER_DTYPE_UINT32,  ER_DTYPE_UINT64,   ER_DTYPE_UNDEFINED};
const er_dtype er__types_signed[] = {ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,
                                     ER_DTYPE_DOUBLE,  ER_DTYPE_INT8,     ER_DTYPE_INT16,
                                     ER_DTYPE_INT32,   ER_DTYPE_INT64,    ER_DTYPE_UNDEFINED};
const er_dtype er__types_int[] = {ER_DTYPE_INT8,   ER_DTYPE_INT16,  ER_DTYPE_INT32,
                                  ER_DTYPE_INT64,  ER_DTYPE_UINT8,  ER_DTYPE_UINT16,
                                  ER_DTYPE_UINT32, ER_DTYPE_UINT64, ER_DTYPE_UNDEFINED};
const er_dtype er__types_all[] = {
    ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,  ER_DTYPE_DOUBLE, ER_DTYPE_INT8,
    ER_DTYPE_INT16,   ER_DTYPE_INT32,    ER_DTYPE_INT64,  ER_DTYPE_UINT8,  ER_DTYPE_UINT16,
    ER_DTYPE_UINT32,  ER_DTYPE_UINT64,   ER_DTYPE_BOOL,   ER_DTYPE_UNDEFINED};
const er_dtype er__types_index[] = {ER_DTYPE_INT32, ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};

er_status er__op_error(const er_kctx *ctx, er_status status, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return er__error(status, "%s '%s': %s", ctx->node->op_type, ctx->node->name, msg);
}

static const char *attr_type_name(er_attr_type t) {
  static const char *const names[] = {"undefined", "float",   "int",    "string",
                                      "tensor",    "graph",   "floats", "ints",
                                      "strings",   "tensors", "graphs", "sparse_tensor",
                                      "sparse_tensors", "type_proto", "type_protos"};
  return (unsigned)t < ER_ARRAY_LEN(names) ? names[t] : "unknown";
}

static er_status find_typed(const er_kctx *ctx, const char *name, er_attr_type want,
                            const er_attr **out) {
  const er_attr *a = er__node_attr(ctx->node, name);
  *out = NULL;
  if (!a) return ER_STATUS_OK;
  if (a->type != want)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute '%s' is of type %s, expected %s",
                        name, attr_type_name(a->type), attr_type_name(want));
  *out = a;
  return ER_STATUS_OK;
}

er_status er__attr_int(const er_kctx *ctx, const char *name, int64_t def, int64_t *out) {
  const er_attr *a;
  ER_CHECK(find_typed(ctx, name, ER_ATTR_INT, &a));
  *out = a ? a->i : def;
  return ER_STATUS_OK;
}

er_status er__attr_float(const er_kctx *ctx, const char *name, float def, float *out) {
  const er_attr *a;
  ER_CHECK(find_typed(ctx, name, ER_ATTR_FLOAT, &a));
  *out = a ? a->f : def;
  return ER_STATUS_OK;
}

er_status er__attr_string(const er_kctx *ctx, const char *name, const char *def, const char **out) {
  const er_attr *a;
  ER_CHECK(find_typed(ctx, name, ER_ATTR_STRING, &a));
  *out = a ? a->s : def;
  return ER_STATUS_OK;
}

er_status er__attr_ints(const er_kctx *ctx, const char *name, const int64_t **out, int64_t *n) {
  const er_attr *a;
  ER_CHECK(find_typed(ctx, name, ER_ATTR_INTS, &a));
  *out = a ? a->ints : NULL;
  *n = a ? a->n : -1;
  return ER_STATUS_OK;
}

er_status er__attr_floats(const er_kctx *ctx, const char *name, const float **out, int64_t *n) {
  const er_attr *a;
  ER_CHECK(find_typed(ctx, name, ER_ATTR_FLOATS, &a));
  *out = a ? a->floats : NULL;
  *n = a ? a->n : -1;
  return ER_STATUS_OK;
}

er_status er__attr_tensor(const er_kctx *ctx, const char *name, const er_tensor **out) {
  const er_attr *a;
  ER_CHECK(find_typed(ctx, name, ER_ATTR_TENSOR, &a));
  *out = a ? a->t : NULL;
  return ER_STATUS_OK;
}

er_status er__attr_graph(const er_kctx *ctx, const char *name, const er_graph **out) {
  const er_attr *a;
  ER_CHECK(find_typed(ctx, name, ER_ATTR_GRAPH, &a));
  if (!a) return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "graph attribute '%s' is missing", name);
  *out = a->g;
  return ER_STATUS_OK;
}

er_status er__norm_axis(const er_kctx *ctx, const char *what, int64_t axis, int rank, int *out) {
  if (axis < -(int64_t)rank || axis >= (int64_t)rank) {
    if (rank == 0 && (axis == 0 || axis == -1)) {
      *out = 0;
      return ER_STATUS_OK;
    }
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "%s %lld is out of range [%d, %d] for rank %d",
                        what, (long long)axis, -rank, rank - 1, rank);
  }
  *out = (int)(axis < 0 ? axis + rank : axis);
  return ER_STATUS_OK;
}

er_status er__require_type(const er_kctx *ctx, int i, const er_dtype *allowed) {
  const er_tensor *t = er__in(ctx, i);
  if (!t) return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "required input %d is missing", i);
  if (t->dtype == ER_DTYPE_UNDEFINED) return ER_STATUS_OK;
  for (const er_dtype *d = allowed; *d != ER_DTYPE_UNDEFINED; d++)
    if (*d == t->dtype) return ER_STATUS_OK;
  return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH, "input %d has type %s, which this op does not accept",
                      i, er_dtype_name(t->dtype));
}

er_status er__require_same_type(const er_kctx *ctx, int i, int j) {
  const er_tensor *a = er__in(ctx, i), *b = er__in(ctx, j);
  if (!a || !b || a->dtype == ER_DTYPE_UNDEFINED || b->dtype == ER_DTYPE_UNDEFINED)
    return ER_STATUS_OK;
  if (a->dtype != b->dtype)
    return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH, "input %d is %s but input %d is %s; they must match",
                        i, er_dtype_name(a->dtype), j, er_dtype_name(b->dtype));
  return ER_STATUS_OK;
}

er_status er__require_rank(const er_kctx *ctx, int i, int lo, int hi) {
  const er_tensor *t = er__in(ctx, i);
  if (!t || t->rank < 0) return ER_STATUS_OK;
  if (t->rank < lo || t->rank > hi) {
    if (lo == hi)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input %d has rank %d, expected %d", i,
                          t->rank, lo);
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input %d has rank %d, expected %d to %d", i,
                        t->rank, lo, hi);
  }
  return ER_STATUS_OK;
}

void er__set_output(const er_kctx *ctx, int i, er_dtype dtype, int rank, const int64_t *dims) {
  er_tensor *o = er__out(ctx, i);
  if (!o) return;
  er__tensor_set(o, dtype, rank, dims);
}

void er__same_as_input(const er_kctx *ctx, int i, int j) {
  const er_tensor *t = er__in(ctx, j);
  er__set_output(ctx, i, t->dtype, t->rank, t->dims);
}

er_status er__broadcast_shapes(const er_kctx *ctx, int n, const er_tensor *const *shapes,
                               er_tensor *out) {
  int rank = 0;
  for (int k = 0; k < n; k++) {
    if (!shapes[k]) continue;
    if (shapes[k]->rank < 0) {
      out->rank = -1;
      return ER_STATUS_OK;
    }
    if (shapes[k]->rank > rank) rank = shapes[k]->rank;
  }
  int64_t dims[ER_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    int64_t dim = 1;
    bool unknown = false;
    for (int k = 0; k < n; k++) {
      const er_tensor *s = shapes[k];
      if (!s) continue;
      int off = d - (rank - s->rank);
      if (off < 0) continue;
      int64_t v = s->dims[off];
      if (v < 0) {
        unknown = true;
        continue;
      }
      if (v == 1) continue;
      if (dim == 1) {
        dim = v;
      } else if (dim != v) {
        char a[160], b[160];
        int first = 0;
        while (!shapes[first]) first++;
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "shapes %s and %s cannot be broadcast together (dim %d: %lld vs %lld)",
                            er__shape_str(shapes[first], a, sizeof a), er__shape_str(s, b, sizeof b),
                            d, (long long)dim, (long long)v);
      }
    }
    /* An unknown dim could be 1 or match; only a known dim > 1 decides. */
    dims[d] = (unknown && dim == 1) ? -1 : dim;
  }
  out->rank = rank;
  for (int d = 0; d < ER_MAX_RANK; d++) out->dims[d] = d < rank ? dims[d] : 0;
  return ER_STATUS_OK;
}

int64_t er__get_i64(const er_tensor *t, int64_t i) {
  switch (t->dtype) {
    case ER_DTYPE_INT64: return ((const int64_t *)t->data)[i];
    case ER_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    default: return er__load_i64(t->data, t->dtype, i);
  }
}

er_status er__op_output(const er_kctx *ctx, int i, er_dtype dtype, int rank, const int64_t *dims) {
  er_tensor *o = er__out(ctx, i);
  int64_t count;
  if (!o) return ER_STATUS_OK;
  if (rank < 0 || rank > ER_MAX_RANK)
    return er__op_error(ctx, ER_STATUS_LIMIT, "output %d would have rank %d; at most %d (ER_MAX_RANK)",
                        i, rank, ER_MAX_RANK);
  if (!er__shape_count(rank, dims, &count) || count > ER_MAX_RUNTIME_ELEMENTS) {
    char buf[160];
    return er__op_error(ctx, ER_STATUS_LIMIT,
                        "output %d of shape %s exceeds %lld elements (ER_MAX_RUNTIME_ELEMENTS)", i,
                        er__dims_str(rank, dims, buf, sizeof buf), (long long)ER_MAX_RUNTIME_ELEMENTS);
  }
  uint64_t bytes = (uint64_t)count * er_dtype_size(dtype);
  if (ctx->graph && bytes > er__graph_tensor_cap(ctx->graph)) {
    char buf[160];
    return er__op_error(ctx, ER_STATUS_LIMIT, "output %d of shape %s needs %llu bytes; the cap is %llu "
                        "(max_tensor_bytes)",
                        i, er__dims_str(rank, dims, buf, sizeof buf), (unsigned long long)bytes,
                        (unsigned long long)er__graph_tensor_cap(ctx->graph));
  }
  er__tensor_release(o);
  er__tensor_set(o, dtype, rank, dims);
  er_status st = er__tensor_alloc(o, 0);
  if (st != ER_STATUS_OK) er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
  return st;
}

void er__strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

void er__bcast_init(er_bcast *b, int n, const er_tensor *const *inputs, const er_tensor *out) {
  ER_ASSERT(n <= 4);
  memset(b, 0, sizeof *b);
  b->rank = out->rank;
  b->n = n;
  for (int d = 0; d < out->rank; d++) b->dims[d] = out->dims[d];
  for (int k = 0; k < n; k++) {
    const er_tensor *t = inputs[k];
    int64_t st[ER_MAX_RANK];
    er__strides(t->rank, t->dims, st);
    for (int d = 0; d < out->rank; d++) {
      int off = d - (out->rank - t->rank);
      b->strides[k][d] = (off < 0 || t->dims[off] == 1) ? 0 : st[off];
    }
  }
}

void er__bcast_next(er_bcast *b) {
  for (int d = b->rank - 1; d >= 0; d--) {
    b->idx[d]++;
    for (int k = 0; k < b->n; k++) b->off[k] += b->strides[k][d];
    if (b->idx[d] < b->dims[d]) return;
    for (int k = 0; k < b->n; k++) b->off[k] -= b->strides[k][d] * b->dims[d];
    b->idx[d] = 0;
  }
}

int64_t er__count(const er_tensor *t) {
  int64_t n = er__tensor_count(t);
  ER_ASSERT(n >= 0);
  return n;
}

er_status er__op_subgraph(const er_kctx *ctx, const er_graph *sub, const er_tensor *const *inputs,
                          int n_inputs, er_tensor *outputs, const bool *skip) {
  if (!ctx->run_subgraph)
    return er__error(ER_STATUS_INTERNAL, "%s '%s': subgraph '%s' run outside the interpreter",
                     ctx->node->op_type, ctx->node->name, sub->name);
  return ctx->run_subgraph(ctx, sub, inputs, n_inputs, outputs, skip);
}

er_status er__as_f32(const er_tensor *t, const float **out, float **owned) {
  *owned = NULL;
  if (t->dtype == ER_DTYPE_FLOAT) {
    *out = t->data;
    return ER_STATUS_OK;
  }
  int64_t n = er__count(t);
  float *f = er__malloc((size_t)(n > 0 ? n : 1) * sizeof *f, "float32 copy of an input");
  if (!f) return ER_STATUS_OUT_OF_MEMORY;
  const uint16_t *h = t->data;
  for (int64_t i = 0; i < n; i++)
    f[i] = t->dtype == ER_DTYPE_FLOAT16 ? er__f16_to_f32(h[i])
           : t->dtype == ER_DTYPE_BFLOAT16 ? er__bf16_to_f32(h[i])
                                           : (float)er__load_f64(t->data, t->dtype, i);
  *out = f;
  *owned = f;
  return ER_STATUS_OK;
}
