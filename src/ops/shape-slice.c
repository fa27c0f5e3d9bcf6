/* shape-slice.c - the "shape" group's Concat, Split and Slice (see
 * shape.c). */
#include "ops/shape-impl.h"

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
    ER_CHECK(er__shp_require_holdable(ctx, i));
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
  bool one_row = er__shp_dims_product(y->dims, 0, axis) == 1;
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
  int64_t outer = er__shp_dims_product(y->dims, 0, axis);
  int64_t after = er__shp_dims_product(y->dims, axis + 1, y->rank);
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

const er_op_def er__shp_op_concat = {
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
  ER_CHECK(er__shp_require_holdable(ctx, 0));
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
  int64_t outer = er__shp_dims_product(x->dims, 0, axis);
  int64_t after = er__shp_dims_product(x->dims, axis + 1, x->rank);
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

const er_op_def er__shp_op_split_2 = {
    .name = "Split", .domain = "", .min_version = 2, .max_version = 12,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = ER_VARIADIC,
    .check = split_check, .run = split_run,
};

const er_op_def er__shp_op_split_13 = {
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
    ER_CHECK(er__shp_attr_ivec(ctx, "starts", ER_MAX_RANK, &starts));
    ER_CHECK(er__shp_attr_ivec(ctx, "ends", ER_MAX_RANK, &ends));
    ER_CHECK(er__shp_attr_ivec(ctx, "axes", ER_MAX_RANK, &axes));
    if (starts.n < 0 || ends.n < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "attributes 'starts' and 'ends' are required");
    steps.n = -1;
    steps.known = false;
  } else {
    if (!er__in(ctx, 1) || !er__in(ctx, 2))
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "inputs 'starts' and 'ends' are required");
    ER_CHECK(er__shp_read_ivec(ctx, 1, "starts", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &starts));
    ER_CHECK(er__shp_read_ivec(ctx, 2, "ends", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &ends));
    ER_CHECK(er__shp_read_ivec(ctx, 3, "axes", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &axes));
    ER_CHECK(er__shp_read_ivec(ctx, 4, "steps", ER_MAX_RANK, false, ER_STATUS_INVALID_SHAPE, &steps));
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
  ER_CHECK(er__shp_norm_axes(ctx, "axes", &axes, r));
  if (!starts.known || !ends.known || (has_steps && !steps.known)) {
    for (int64_t k = 0; k < axes.n; k++) p->dims[axes.v[k]] = -1;
    return ER_STATUS_OK;
  }
  for (int64_t k = 0; k < n; k++) {
    int a = (int)axes.v[k];
    int64_t step = has_steps ? steps.v[k] : 1;
    if (step == 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ARGUMENT, "steps %s has a 0 (for axis %d)",
                          er__shp_ivec_str(&steps, buf, sizeof buf), a);
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
  ER_CHECK(er__shp_require_holdable(ctx, 0));
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

const er_op_def er__shp_op_slice_1 = {
    .name = "Slice", .domain = "", .min_version = 1, .max_version = 9,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = slice_check, .run = slice_run,
};

const er_op_def er__shp_op_slice_10 = {
    .name = "Slice", .domain = "", .min_version = 10, .max_version = 13,
    .min_inputs = 3, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1) | VALUE_IN(2) | VALUE_IN(3) | VALUE_IN(4),
    .check = slice_check, .run = slice_run,
};

/* ======================================================================== */
