/* shape-make.c - the "shape" group's ops that make tensors from shapes and
 * attributes: Shape, Size, ConstantOfShape, Constant, Range, EyeLike (see
 * shape.c). */
#include "ops/shape-impl.h"

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

const er_op_def er__shp_op_shape = {
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

const er_op_def er__shp_op_size = {
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
  ER_CHECK(er__shp_read_ivec(ctx, 0, "input", ER_MAX_RANK, false, ER_STATUS_LIMIT, &shape));
  if (!shape.known) {
    set_unknown_dims(ctx, 0, dtype, (int)shape.n);
    return ER_STATUS_OK;
  }
  for (int k = 0; k < shape.n; k++)
    if (shape.v[k] < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "shape %s has the negative dim %lld",
                          er__shp_ivec_str(&shape, buf, sizeof buf), (long long)shape.v[k]);
  ER_CHECK(er__shp_check_output_size(ctx, (int)shape.n, shape.v));
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
  er__shp_fill_bytes(y->data, value->data, er_dtype_size(y->dtype), er__count(y));
  return ER_STATUS_OK;
}

const er_op_def er__shp_op_constant_of_shape = {
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

const er_op_def er__shp_op_constant = {
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

const er_op_def er__shp_op_range = {
    .name = "Range", .domain = "", .min_version = 11, .max_version = 27,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(0) | VALUE_IN(1) | VALUE_IN(2), .check = range_check, .run = range_run,
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
  ER_CHECK(er__shp_require_holdable(ctx, 0));
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

const er_op_def er__shp_op_eyelike = {
    .name = "EyeLike", .domain = "", .min_version = 9, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = eyelike_check, .run = eyelike_run,
};

/* ======================================================================== */
/* CenterCropPad                                                             */
