/* reduce.c - operators of the "reduce" group: the Reduce* family and the
 * softmax family (Softmax, LogSoftmax, Hardmax).
 *
 * Numerics: float reductions accumulate in double and round once on store,
 * so a float32 sum of millions of elements is as accurate as the data.
 * Integer reductions accumulate in 64-bit two's complement (sums and
 * products wrap, like the C types they are stored in); the reductions whose
 * result is not an integer function (L2, LogSum, LogSumExp) go through
 * double and saturate on store. */
#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Reductions: which, and which types                                        */
/* ======================================================================== */

typedef enum reduce_kind {
  RK_L1,
  RK_L2,
  RK_LOG_SUM,
  RK_LOG_SUM_EXP,
  RK_MAX,
  RK_MEAN,
  RK_MIN,
  RK_PROD,
  RK_SUM,
  RK_SUM_SQUARE,
} reduce_kind;

/* The schema version from which `axes` is an input instead of an
 * attribute: ReduceSum moved first (13), the others followed in 18. */
static int axes_input_since(reduce_kind k) { return k == RK_SUM ? 13 : 18; }

#define T_END ER_DTYPE_UNDEFINED
/* Versions 1 and 11 of every reduction. */
static const er_dtype types_v1[] = {ER_DTYPE_UINT32, ER_DTYPE_UINT64, ER_DTYPE_INT32,
                                    ER_DTYPE_INT64,  ER_DTYPE_FLOAT16, ER_DTYPE_FLOAT,
                                    ER_DTYPE_DOUBLE, T_END};
/* Version 13 added bfloat16. */
static const er_dtype types_v13[] = {ER_DTYPE_UINT32, ER_DTYPE_UINT64,  ER_DTYPE_INT32,
                                     ER_DTYPE_INT64,  ER_DTYPE_FLOAT16, ER_DTYPE_FLOAT,
                                     ER_DTYPE_DOUBLE, ER_DTYPE_BFLOAT16, T_END};
/* ReduceMax/ReduceMin took 8-bit integers in 12, bfloat16 in 13, bool in 20. */
static const er_dtype types_minmax_v12[] = {ER_DTYPE_UINT32, ER_DTYPE_UINT64,  ER_DTYPE_INT32,
                                            ER_DTYPE_INT64,  ER_DTYPE_FLOAT16, ER_DTYPE_FLOAT,
                                            ER_DTYPE_DOUBLE, ER_DTYPE_UINT8,   ER_DTYPE_INT8,
                                            T_END};
static const er_dtype types_minmax_v13[] = {
    ER_DTYPE_UINT32, ER_DTYPE_UINT64, ER_DTYPE_INT32, ER_DTYPE_INT64,    ER_DTYPE_FLOAT16,
    ER_DTYPE_FLOAT,  ER_DTYPE_DOUBLE, ER_DTYPE_UINT8, ER_DTYPE_INT8,     ER_DTYPE_BFLOAT16,
    T_END};
static const er_dtype types_minmax_v20[] = {
    ER_DTYPE_UINT32, ER_DTYPE_UINT64, ER_DTYPE_INT32, ER_DTYPE_INT64,    ER_DTYPE_FLOAT16,
    ER_DTYPE_FLOAT,  ER_DTYPE_DOUBLE, ER_DTYPE_UINT8, ER_DTYPE_INT8,     ER_DTYPE_BFLOAT16,
    ER_DTYPE_BOOL,   T_END};

static const er_dtype *reduce_types(reduce_kind k, int version) {
  if (k == RK_MAX || k == RK_MIN) {
    if (version >= 20) return types_minmax_v20;
    if (version >= 13) return types_minmax_v13;
    if (version >= 12) return types_minmax_v12;
    return types_v1;
  }
  /* Opset 28 dropped the integer types of the logarithmic reductions. */
  if ((k == RK_LOG_SUM || k == RK_LOG_SUM_EXP) && version >= 28) return er__types_float;
  return version >= 13 ? types_v13 : types_v1;
}

/* ======================================================================== */
/* Which axes: attribute or input, keepdims, noop_with_empty_axes            */
/* ======================================================================== */

/* The reduction a node asks for, as far as it is known. */
typedef struct reduce_axes {
  bool known;               /* false: axes come from an input not yet known */
  bool keepdims;
  bool mask[ER_MAX_RANK];   /* axis d is reduced (valid when known and rank >= 0) */
} reduce_axes;

/* Reads keepdims, noop_with_empty_axes and the axes (attribute before
 * axes_input_since, else the optional second input), validates them against
 * the input rank where it is known and fills *ra. Duplicate axes are
 * accepted and count once, as onnxruntime does. */
static er_status get_reduce_axes(er_kctx *ctx, reduce_kind k, reduce_axes *ra) {
  const er_tensor *x = ctx->in[0];
  int rank = x->rank;
  int64_t keepdims, noop = 0;
  const int64_t *attr_axes = NULL;
  int64_t n_axes = -1;
  const er_tensor *axes_t = NULL;
  memset(ra, 0, sizeof *ra);

  ER_CHECK(er__attr_int(ctx, "keepdims", 1, &keepdims));
  ra->keepdims = keepdims != 0;
  if (ctx->node->version >= axes_input_since(k)) {
    ER_CHECK(er__attr_int(ctx, "noop_with_empty_axes", 0, &noop));
    axes_t = er__in(ctx, 1);
    if (axes_t) {
      static const er_dtype axes_types[] = {ER_DTYPE_INT64, T_END};
      ER_CHECK(er__require_type(ctx, 1, axes_types));
      if (axes_t->rank > 1) {
        char buf[96];
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "axes must be a 1-D tensor, got shape %s",
                            er__shape_str(axes_t, buf, sizeof buf));
      }
      if (!axes_t->data) {
        /* An empty axes tensor is known to be empty even without data. */
        int64_t count = er__tensor_count(axes_t);
        if (count != 0) return ER_STATUS_OK; /* known stays false */
        n_axes = 0;
      } else {
        n_axes = er__count(axes_t);
      }
    } else {
      n_axes = 0;
    }
  } else {
    ER_CHECK(er__attr_ints(ctx, "axes", &attr_axes, &n_axes));
    if (n_axes < 0) n_axes = 0;
  }

  ra->known = true;
  if (rank < 0) return ER_STATUS_OK;
  if (n_axes == 0) {
    /* No axes: reduce everything, or (noop_with_empty_axes) nothing. */
    for (int d = 0; d < rank; d++) ra->mask[d] = noop == 0;
    return ER_STATUS_OK;
  }
  for (int64_t i = 0; i < n_axes; i++) {
    int64_t a = attr_axes ? attr_axes[i] : er__get_i64(axes_t, i);
    /* A scalar has no axes; 0 and -1 name "the" axis and reduce nothing, as
     * onnxruntime accepts. */
    if (rank == 0 && (a == 0 || a == -1)) continue;
    if (a < -(int64_t)rank || a >= rank)
      return er__op_error(ctx, attr_axes ? ER_STATUS_INVALID_ATTRIBUTE : ER_STATUS_OUT_OF_RANGE,
                          "axes[%lld] = %lld is out of range [%d, %d] for input rank %d",
                          (long long)i, (long long)a, -rank, rank - 1, rank);
    ra->mask[a < 0 ? a + rank : a] = true;
  }
  return ER_STATUS_OK;
}

static er_status reduce_check(er_kctx *ctx, reduce_kind k) {
  const er_tensor *x = ctx->in[0];
  reduce_axes ra;
  ER_CHECK(er__require_type(ctx, 0, reduce_types(k, ctx->node->version)));
  ER_CHECK(get_reduce_axes(ctx, k, &ra));

  if (x->rank < 0) {
    er__set_output(ctx, 0, x->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  int rank = 0;
  if (!ra.known) {
    /* Axes not known yet (load time only): with keepdims the rank stays and
     * dims of 1 stay 1 whichever axes are reduced. */
    ER_ASSERT(ctx->checking);
    if (!ra.keepdims) {
      er__set_output(ctx, 0, x->dtype, -1, NULL);
      return ER_STATUS_OK;
    }
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[d] == 1 ? 1 : -1;
    er__set_output(ctx, 0, x->dtype, x->rank, dims);
    return ER_STATUS_OK;
  }
  for (int d = 0; d < x->rank; d++) {
    if (!ra.mask[d])
      dims[rank++] = x->dims[d];
    else if (ra.keepdims)
      dims[rank++] = 1;
  }
  er__set_output(ctx, 0, x->dtype, rank, dims);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The iteration plan                                                        */
/* ======================================================================== */

/* An input seen as kept dims (one output element each) times reduced dims
 * (summed into it). Dims of size 1 are dropped and neighbouring dims of the
 * same kind merged, so reducing the last axis is one contiguous run per
 * output and reducing everything is a single run. */
typedef struct reduce_plan {
  int n_keep;
  int64_t keep_dims[ER_MAX_RANK], keep_strides[ER_MAX_RANK];  /* elements */
  int n_red;                                                  /* >= 1 */
  int64_t red_dims[ER_MAX_RANK], red_strides[ER_MAX_RANK];    /* elements */
  int64_t n_out;         /* output elements */
  int64_t n_red_elems;   /* elements reduced into each output (may be 0) */
} reduce_plan;

static void make_plan(const er_tensor *x, const bool *mask, reduce_plan *p) {
  int64_t strides[ER_MAX_RANK];
  memset(p, 0, sizeof *p);
  er__strides(x->rank, x->dims, strides);
  p->n_out = 1;
  p->n_red_elems = 1;
  int last = -1; /* kind of the previous kept entry: 0 keep, 1 reduce */
  for (int d = 0; d < x->rank; d++) {
    int64_t n = x->dims[d];
    if (mask[d])
      p->n_red_elems *= n;
    else
      p->n_out *= n;
    if (n == 1) continue;
    int kind = mask[d] ? 1 : 0;
    int64_t *dims = kind ? p->red_dims : p->keep_dims;
    int64_t *st = kind ? p->red_strides : p->keep_strides;
    int *cnt = kind ? &p->n_red : &p->n_keep;
    if (last == kind) {
      /* Row-major: dims[d-1]'s stride is dims[d] * stride[d], so the two
       * merge into one dim of stride[d]. */
      dims[*cnt - 1] *= n;
      st[*cnt - 1] = strides[d];
    } else {
      dims[*cnt] = n;
      st[*cnt] = strides[d];
      (*cnt)++;
    }
    last = kind;
  }
  if (p->n_red == 0) {
    p->n_red = 1;
    p->red_dims[0] = 1;
    p->red_strides[0] = 1;
  }
}

/* Walks the reduced elements of one output as strided runs of at most
 * WALK_CHUNK elements, so kernels convert a run into a small buffer once
 * and then loop over plain doubles or int64s. */
#define WALK_CHUNK 256

typedef struct red_walk {
  const reduce_plan *p;
  int64_t idx[ER_MAX_RANK];  /* odometer over red_dims[0 .. n_red-2] */
  int64_t outer_off;         /* offset of the current run's start */
  int64_t pos;               /* position inside the innermost dim */
  bool done;
} red_walk;

static void walk_init(red_walk *w, const reduce_plan *p, int64_t base) {
  memset(w, 0, sizeof *w);
  w->p = p;
  w->outer_off = base;
  w->done = p->n_red_elems == 0;
}

/* Next run: its first element's offset, stride and length (0 when done). */
static int64_t walk_next(red_walk *w, int64_t *off, int64_t *stride) {
  const reduce_plan *p = w->p;
  int in = p->n_red - 1;
  if (w->done) return 0;
  int64_t n = p->red_dims[in] - w->pos;
  if (n > WALK_CHUNK) n = WALK_CHUNK;
  *off = w->outer_off + w->pos * p->red_strides[in];
  *stride = p->red_strides[in];
  w->pos += n;
  if (w->pos == p->red_dims[in]) {
    w->pos = 0;
    int d = in - 1;
    for (; d >= 0; d--) {
      w->idx[d]++;
      w->outer_off += p->red_strides[d];
      if (w->idx[d] < p->red_dims[d]) break;
      w->outer_off -= p->red_strides[d] * p->red_dims[d];
      w->idx[d] = 0;
    }
    if (d < 0) w->done = true;
  }
  return n;
}

static void load_run_f64(const void *data, er_dtype t, int64_t off, int64_t stride, int64_t n,
                         double *buf) {
  switch (t) {
    case ER_DTYPE_FLOAT: {
      const float *p = (const float *)data + off;
      for (int64_t i = 0; i < n; i++) buf[i] = p[i * stride];
      break;
    }
    case ER_DTYPE_DOUBLE: {
      const double *p = (const double *)data + off;
      for (int64_t i = 0; i < n; i++) buf[i] = p[i * stride];
      break;
    }
    default:
      for (int64_t i = 0; i < n; i++) buf[i] = er__load_f64(data, t, off + i * stride);
  }
}

static void load_run_i64(const void *data, er_dtype t, int64_t off, int64_t stride, int64_t n,
                         int64_t *buf) {
  switch (t) {
    case ER_DTYPE_INT64: {
      const int64_t *p = (const int64_t *)data + off;
      for (int64_t i = 0; i < n; i++) buf[i] = p[i * stride];
      break;
    }
    case ER_DTYPE_INT32: {
      const int32_t *p = (const int32_t *)data + off;
      for (int64_t i = 0; i < n; i++) buf[i] = p[i * stride];
      break;
    }
    default:
      for (int64_t i = 0; i < n; i++) buf[i] = er__load_i64(data, t, off + i * stride);
  }
}

/* ======================================================================== */
/* Float kernel (also used for integer L2, LogSum and LogSumExp)             */
/* ======================================================================== */

/* Folds a run of values into acc. RK_LOG_SUM_EXP here is its second pass:
 * the sum of exp(x - shift). Max and Min propagate NaN, like numpy. */
static double fold_f64(reduce_kind k, double acc, const double *v, int64_t n, double shift) {
  switch (k) {
    case RK_SUM: case RK_MEAN: case RK_LOG_SUM:
      for (int64_t i = 0; i < n; i++) acc += v[i];
      break;
    case RK_L1:
      for (int64_t i = 0; i < n; i++) acc += fabs(v[i]);
      break;
    case RK_L2: case RK_SUM_SQUARE:
      for (int64_t i = 0; i < n; i++) acc += v[i] * v[i];
      break;
    case RK_PROD:
      for (int64_t i = 0; i < n; i++) acc *= v[i];
      break;
    case RK_MAX:
      for (int64_t i = 0; i < n; i++)
        if (v[i] > acc || v[i] != v[i]) acc = v[i];
      break;
    case RK_MIN:
      for (int64_t i = 0; i < n; i++)
        if (v[i] < acc || v[i] != v[i]) acc = v[i];
      break;
    case RK_LOG_SUM_EXP:
      for (int64_t i = 0; i < n; i++) acc += exp(v[i] - shift);
      break;
  }
  return acc;
}

static double fold_init_f64(reduce_kind k) {
  switch (k) {
    case RK_PROD: return 1.0;
    case RK_MAX: return -INFINITY;
    case RK_MIN: return INFINITY;
    default: return 0.0;
  }
}

/* One pass of kind k over the elements of the output at `base`. */
static double pass_f64(const reduce_plan *p, reduce_kind k, const void *data, er_dtype t,
                       int64_t base, double shift) {
  double buf[WALK_CHUNK];
  double acc = fold_init_f64(k);
  red_walk w;
  int64_t off, stride, n;
  walk_init(&w, p, base);
  while ((n = walk_next(&w, &off, &stride)) > 0) {
    load_run_f64(data, t, off, stride, n, buf);
    acc = fold_f64(k, acc, buf, n, shift);
  }
  return acc;
}

static double reduce_one_f64(const reduce_plan *p, reduce_kind k, const void *data, er_dtype t,
                             int64_t base) {
  if (k == RK_LOG_SUM_EXP) {
    /* log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the max, so no
     * exp overflows. An infinite or NaN max is the answer itself (all -inf
     * gives -inf, the empty set included). */
    double m = pass_f64(p, RK_MAX, data, t, base, 0.0);
    if (isinf(m) || isnan(m)) return m;
    return m + log(pass_f64(p, RK_LOG_SUM_EXP, data, t, base, m));
  }
  double acc = pass_f64(p, k, data, t, base, 0.0);
  switch (k) {
    case RK_L2: return sqrt(acc);
    case RK_LOG_SUM: return log(acc);
    case RK_MEAN: return acc / (double)p->n_red_elems; /* empty: 0/0 = NaN */
    default: return acc;
  }
}

/* ======================================================================== */
/* Integer kernel                                                            */
/* ======================================================================== */

/* The smallest and largest values of an integer type, as int64 bit
 * patterns (uint64's largest is all ones, i.e. -1). */
static void int_range(er_dtype t, int64_t *lo, int64_t *hi) {
  switch (t) {
    case ER_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; return;
    case ER_DTYPE_INT16: *lo = INT16_MIN; *hi = INT16_MAX; return;
    case ER_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return;
    case ER_DTYPE_INT64: *lo = INT64_MIN; *hi = INT64_MAX; return;
    case ER_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; return;
    case ER_DTYPE_UINT16: *lo = 0; *hi = UINT16_MAX; return;
    case ER_DTYPE_UINT32: *lo = 0; *hi = UINT32_MAX; return;
    case ER_DTYPE_UINT64: *lo = 0; *hi = -1; return;
    case ER_DTYPE_BOOL: *lo = 0; *hi = 1; return;
    default: ER_ASSERT(!"int_range: not an integer type");
  }
}

/* Sum, SumSquare, Prod, L1 wrap modulo 2^64 (computed unsigned, so no
 * signed overflow); Max and Min compare unsigned only for uint64, the one
 * type whose values do not all fit int64; Mean divides the wrapped sum. */
static int64_t reduce_one_i64(const reduce_plan *p, reduce_kind k, const void *data, er_dtype t,
                              int64_t base) {
  int64_t buf[WALK_CHUNK];
  int64_t lo, hi;
  uint64_t acc;
  bool u64 = t == ER_DTYPE_UINT64;
  int_range(t, &lo, &hi);
  switch (k) {
    case RK_PROD: acc = 1; break;
    case RK_MAX: acc = (uint64_t)lo; break;
    case RK_MIN: acc = (uint64_t)hi; break;
    default: acc = 0;
  }
  red_walk w;
  int64_t off, stride, n;
  walk_init(&w, p, base);
  while ((n = walk_next(&w, &off, &stride)) > 0) {
    load_run_i64(data, t, off, stride, n, buf);
    switch (k) {
      case RK_SUM: case RK_MEAN:
        for (int64_t i = 0; i < n; i++) acc += (uint64_t)buf[i];
        break;
      case RK_SUM_SQUARE:
        for (int64_t i = 0; i < n; i++) acc += (uint64_t)buf[i] * (uint64_t)buf[i];
        break;
      case RK_L1:
        for (int64_t i = 0; i < n; i++)
          acc += (!u64 && buf[i] < 0) ? 0 - (uint64_t)buf[i] : (uint64_t)buf[i];
        break;
      case RK_PROD:
        for (int64_t i = 0; i < n; i++) acc *= (uint64_t)buf[i];
        break;
      case RK_MAX:
        for (int64_t i = 0; i < n; i++)
          if (u64 ? (uint64_t)buf[i] > acc : buf[i] > (int64_t)acc) acc = (uint64_t)buf[i];
        break;
      case RK_MIN:
        for (int64_t i = 0; i < n; i++)
          if (u64 ? (uint64_t)buf[i] < acc : buf[i] < (int64_t)acc) acc = (uint64_t)buf[i];
        break;
      default: ER_ASSERT(!"reduce_one_i64: kind goes through double");
    }
  }
  if (k == RK_MEAN) {
    /* Integer mean truncates toward zero, like numpy's mean cast back. The
     * mean of nothing is undefined; we answer 0 rather than divide by 0. */
    if (p->n_red_elems == 0) return 0;
    if (u64) return (int64_t)(acc / (uint64_t)p->n_red_elems);
    return (int64_t)acc / p->n_red_elems;
  }
  return (int64_t)acc;
}

static er_status reduce_run(er_kctx *ctx, reduce_kind k) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  reduce_axes ra;
  reduce_plan p;
  ER_CHECK(get_reduce_axes(ctx, k, &ra));
  ER_ASSERT(ra.known);
  make_plan(x, ra.mask, &p);
  ER_ASSERT(p.n_out == er__count(y));
  if (p.n_out == 0) return ER_STATUS_OK;

  bool via_int = er__dtype_is_int(x->dtype) || x->dtype == ER_DTYPE_BOOL;
  if (k == RK_L2 || k == RK_LOG_SUM || k == RK_LOG_SUM_EXP) via_int = false;

  /* Output elements in row-major order of the kept dims. */
  int64_t idx[ER_MAX_RANK] = {0};
  int64_t base = 0;
  for (int64_t o = 0; o < p.n_out; o++) {
    if (via_int) {
      er__store_i64(y->data, y->dtype, o, reduce_one_i64(&p, k, x->data, x->dtype, base));
    } else {
      double v = reduce_one_f64(&p, k, x->data, x->dtype, base);
      if (y->dtype == ER_DTYPE_FLOAT)
        ((float *)y->data)[o] = (float)v;
      else
        er__store_f64(y->data, y->dtype, o, v); /* integers saturate */
    }
    for (int d = p.n_keep - 1; d >= 0; d--) {
      idx[d]++;
      base += p.keep_strides[d];
      if (idx[d] < p.keep_dims[d]) break;
      base -= p.keep_strides[d] * p.keep_dims[d];
      idx[d] = 0;
    }
  }
  return ER_STATUS_OK;
}

/* One check/run pair per reduction, sharing the code above. */
#define REDUCE_OP(fn, kind)                                                         \
  static er_status fn##_check(er_kctx *ctx) { return reduce_check(ctx, kind); }     \
  static er_status fn##_run(er_kctx *ctx) { return reduce_run(ctx, kind); }

REDUCE_OP(reduce_l1, RK_L1)
REDUCE_OP(reduce_l2, RK_L2)
REDUCE_OP(reduce_log_sum, RK_LOG_SUM)
REDUCE_OP(reduce_log_sum_exp, RK_LOG_SUM_EXP)
REDUCE_OP(reduce_max, RK_MAX)
REDUCE_OP(reduce_mean, RK_MEAN)
REDUCE_OP(reduce_min, RK_MIN)
REDUCE_OP(reduce_prod, RK_PROD)
REDUCE_OP(reduce_sum, RK_SUM)
REDUCE_OP(reduce_sum_square, RK_SUM_SQUARE)

/* Two defs per reduction: `axes` as an attribute (versions 1 to 17, or 1 to
 * 12 for ReduceSum; 11 only allowed negative axes, which we accept from 1),
 * then `axes` as an optional input read by the shape rule. */
#define REDUCE_DEFS(fn, onnx_name, split, newest)                                    \
  static const er_op_def op_##fn##_attr = {                                          \
      .name = onnx_name, .domain = "", .min_version = 1, .max_version = (split) - 1, \
      .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,          \
      .check = fn##_check, .run = fn##_run,                                          \
  };                                                                                 \
  static const er_op_def op_##fn##_input = {                                         \
      .name = onnx_name, .domain = "", .min_version = (split), .max_version = (newest), \
      .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,          \
      .value_inputs = 1u << 1, .check = fn##_check, .run = fn##_run,                 \
  };

REDUCE_DEFS(reduce_l1, "ReduceL1", 18, 18)
REDUCE_DEFS(reduce_l2, "ReduceL2", 18, 18)
REDUCE_DEFS(reduce_log_sum, "ReduceLogSum", 18, 28)
REDUCE_DEFS(reduce_log_sum_exp, "ReduceLogSumExp", 18, 28)
REDUCE_DEFS(reduce_max, "ReduceMax", 18, 20)
REDUCE_DEFS(reduce_mean, "ReduceMean", 18, 18)
REDUCE_DEFS(reduce_min, "ReduceMin", 18, 20)
REDUCE_DEFS(reduce_prod, "ReduceProd", 18, 18)
REDUCE_DEFS(reduce_sum, "ReduceSum", 13, 13)
REDUCE_DEFS(reduce_sum_square, "ReduceSumSquare", 18, 18)

/* ======================================================================== */
/* Softmax, LogSoftmax, Hardmax                                              */
/* ======================================================================== */

typedef enum softmax_kind { SK_SOFTMAX, SK_LOG_SOFTMAX, SK_HARDMAX } softmax_kind;

static const er_dtype types_softmax_v1[] = {ER_DTYPE_FLOAT16, ER_DTYPE_FLOAT, ER_DTYPE_DOUBLE,
                                            T_END};

/* The input seen as [outer, n, inner], normalized along n. Before opset 13
 * the input is coerced to 2-D at `axis` (n = prod(dims[axis:]), inner = 1);
 * from 13 on only dims[axis] is normalized. */
typedef struct softmax_shape {
  int64_t outer, n, inner;
} softmax_shape;

static er_status softmax_axis(er_kctx *ctx, int *axis_out) {
  const er_tensor *x = ctx->in[0];
  int64_t axis;
  ER_CHECK(er__attr_int(ctx, "axis", ctx->node->version >= 13 ? -1 : 1, &axis));
  *axis_out = -1;
  if (x->rank < 0) return ER_STATUS_OK;
  return er__norm_axis(ctx, "axis", axis, x->rank, axis_out);
}

static er_status softmax_check(er_kctx *ctx) {
  int axis;
  ER_CHECK(er__require_type(ctx, 0, ctx->node->version >= 13 ? er__types_float : types_softmax_v1));
  ER_CHECK(softmax_axis(ctx, &axis));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static inline double load_el(const void *p, er_dtype t, int64_t i) {
  return t == ER_DTYPE_FLOAT ? ((const float *)p)[i] : er__load_f64(p, t, i);
}
static inline void store_el(void *p, er_dtype t, int64_t i, double v) {
  if (t == ER_DTYPE_FLOAT)
    ((float *)p)[i] = (float)v;
  else
    er__store_f64(p, t, i, v);
}

/* One row of n elements starting at `off` with stride `s`. All of it in
 * double: the max is subtracted before exp so nothing overflows. */
static void softmax_row(softmax_kind k, const void *x, void *y, er_dtype t, int64_t off,
                        int64_t n, int64_t s) {
  if (k == SK_HARDMAX) {
    /* The first maximum wins; NaN counts as the maximum, like numpy's
     * argmax. */
    int64_t best = 0;
    double bv = load_el(x, t, off);
    for (int64_t i = 1; i < n && bv == bv; i++) {
      double v = load_el(x, t, off + i * s);
      if (v > bv || v != v) {
        bv = v;
        best = i;
      }
    }
    for (int64_t i = 0; i < n; i++) store_el(y, t, off + i * s, i == best ? 1.0 : 0.0);
    return;
  }
  double m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    double v = load_el(x, t, off + i * s);
    if (v > m || v != v) m = v;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += exp(load_el(x, t, off + i * s) - m);
  if (k == SK_SOFTMAX) {
    for (int64_t i = 0; i < n; i++)
      store_el(y, t, off + i * s, exp(load_el(x, t, off + i * s) - m) / sum);
  } else {
    double lse = m + log(sum);
    for (int64_t i = 0; i < n; i++) store_el(y, t, off + i * s, load_el(x, t, off + i * s) - lse);
  }
}

static er_status softmax_run_kind(er_kctx *ctx, softmax_kind k) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int axis;
  ER_CHECK(softmax_axis(ctx, &axis));
  softmax_shape sh = {1, 1, 1};
  for (int d = 0; d < x->rank; d++) {
    if (d < axis)
      sh.outer *= x->dims[d];
    else if (d == axis || ctx->node->version < 13)
      sh.n *= x->dims[d];
    else
      sh.inner *= x->dims[d];
  }
  if (sh.n == 0) return ER_STATUS_OK;
  for (int64_t o = 0; o < sh.outer; o++)
    for (int64_t i = 0; i < sh.inner; i++)
      softmax_row(k, x->data, y->data, x->dtype, o * sh.n * sh.inner + i, sh.n, sh.inner);
  return ER_STATUS_OK;
}

static er_status softmax_run(er_kctx *ctx) { return softmax_run_kind(ctx, SK_SOFTMAX); }
static er_status log_softmax_run(er_kctx *ctx) { return softmax_run_kind(ctx, SK_LOG_SOFTMAX); }
static er_status hardmax_run(er_kctx *ctx) { return softmax_run_kind(ctx, SK_HARDMAX); }

static const er_op_def op_softmax = {
    .name = "Softmax", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = softmax_check, .run = softmax_run,
};
static const er_op_def op_log_softmax = {
    .name = "LogSoftmax", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = softmax_check, .run = log_softmax_run,
};
static const er_op_def op_hardmax = {
    .name = "Hardmax", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = softmax_check, .run = hardmax_run,
};

const er_op_def *const er__ops_reduce[] = {
    &op_reduce_l1_attr,         &op_reduce_l1_input,
    &op_reduce_l2_attr,         &op_reduce_l2_input,
    &op_reduce_log_sum_attr,    &op_reduce_log_sum_input,
    &op_reduce_log_sum_exp_attr, &op_reduce_log_sum_exp_input,
    &op_reduce_max_attr,        &op_reduce_max_input,
    &op_reduce_mean_attr,       &op_reduce_mean_input,
    &op_reduce_min_attr,        &op_reduce_min_input,
    &op_reduce_prod_attr,       &op_reduce_prod_input,
    &op_reduce_sum_attr,        &op_reduce_sum_input,
    &op_reduce_sum_square_attr, &op_reduce_sum_square_input,
    &op_softmax,
    &op_log_softmax,
    &op_hardmax,
    NULL,
};
