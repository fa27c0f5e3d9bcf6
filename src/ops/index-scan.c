/* index-scan.c - the "index" group's ops that search, select or scan along
 * an axis: OneHot, NonZero, TopK, ArgMax, ArgMin, CumSum, CumProd,
 * Compress, Unique, ReverseSequence (see index.c). */
#include "ops/index-impl.h"

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
  ER_CHECK(er__idx_read_scalar(ctx, 1, "depth", &known, &depth));
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
  ER_CHECK(er__idx_require_holdable(ctx, 2));
  ER_CHECK(onehot_shape(ctx, &axis, &depth, &known));
  if (ind->rank < 0) {
    er__set_output(ctx, 0, vals->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  int rank = ind->rank + 1;
  ER_CHECK(check_out_rank(ctx, rank));
  int64_t dims[ER_MAX_RANK];
  for (int d = 0, k = 0; d < rank; d++) dims[d] = d == axis ? depth : ind->dims[k++];
  ER_CHECK(er__idx_require_countable(ctx, rank, dims));
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

const er_op_def er__idx_op_onehot = {
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
  ER_CHECK(er__idx_require_holdable(ctx, 0));
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
  er__idx_walk_init(&w, x->rank, x->dims, zeros);
  for (int64_t i = 0, c = 0; i < n; i++, er__idx_walk_next(&w)) {
    if (!elem_nonzero(x->data, x->dtype, es, i)) continue;
    for (int d = 0; d < x->rank; d++) y[d * nnz + c] = w.idx[d];
    c++;
  }
  return ER_STATUS_OK;
}

const er_op_def er__idx_op_nonzero = {
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
    ER_CHECK(er__idx_read_scalar(ctx, 1, "K", k_known, k));
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
        keys[m] = er__idx_order_key(x->data, x->dtype, base + m * inner, UINT64_MAX);
        order[m] = m;
      }
      er__idx_sort_indices(order, order + n, n, topk_cmp, &ord);
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

const er_op_def er__idx_op_topk_1 = {
    .name = "TopK", .domain = "", .min_version = 1, .max_version = 1,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 2, .max_outputs = 2,
    .check = topk_check, .run = topk_run,
};

const er_op_def er__idx_op_topk = {
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
        uint64_t bk = er__idx_order_key(x->data, x->dtype, base, nan_key);
        for (int64_t m = 1; m < n; m++) {
          uint64_t c = er__idx_order_key(x->data, x->dtype, base + m * inner, nan_key);
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

const er_op_def er__idx_op_argmax = {
    .name = "ArgMax", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = arg_check, .run = argmax_run,
};

const er_op_def er__idx_op_argmin = {
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
  ER_CHECK(er__idx_read_scalar(ctx, 1, "axis", known, &a));
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

const er_op_def er__idx_op_cumsum = {
    .name = "CumSum", .domain = "", .min_version = 11, .max_version = 14,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = cum_check, .run = cumsum_run,
};

const er_op_def er__idx_op_cumprod = {
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
  ER_CHECK(er__idx_require_holdable(ctx, 0));
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

const er_op_def er__idx_op_compress = {
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
  ER_CHECK(er__idx_require_holdable(ctx, 0));
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
        keys[m * len + o * inner + j] = er__idx_order_key(x->data, x->dtype, (o * items + m) * inner + j, UINT64_MAX);
    order[m] = m;
  }
  unique_order uo = {keys, len};
  er__idx_sort_indices(order, tmp, items, unique_cmp, &uo);
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
    er__idx_sort_indices(perm, tmp, ngroups, first_cmp, first);
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

const er_op_def er__idx_op_unique = {
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
  ER_CHECK(er__idx_require_holdable(ctx, 0));
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

const er_op_def er__idx_op_reverse_sequence = {
    .name = "ReverseSequence", .domain = "", .min_version = 10, .max_version = 28,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = reverse_sequence_check, .run = reverse_sequence_run,
};
