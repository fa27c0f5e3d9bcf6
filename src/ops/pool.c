/* pool.c - the "conv" group's window ops that are not convolutions:
 * MaxPool, AveragePool, LpPool, the global pools, and MaxUnpool, on the
 * window geometry of conv.c. */
#include "ops/conv-impl.h"

/* ======================================================================== */
/* Window pools: MaxPool, AveragePool, LpPool                                */
/* ======================================================================== */

typedef enum pool_kind { POOL_MAX, POOL_AVG, POOL_LP } pool_kind;

typedef struct pool_plan {
  window win;
  int nsp;                          /* -1 = unknown */
  int64_t n, c;
  int64_t in[ER_MAX_RANK], out[ER_MAX_RANK];
  int64_t pb[ER_MAX_RANK], pe[ER_MAX_RANK];
  bool count_include_pad;           /* AveragePool */
  double p;                         /* LpPool's norm */
  bool column_major;                /* MaxPool storage_order = 1 */
} pool_plan;

static const er_dtype pool_types_max[] = {ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,
                                          ER_DTYPE_DOUBLE,  ER_DTYPE_INT8,     ER_DTYPE_UINT8,
                                          ER_DTYPE_UNDEFINED};

/* LpPool's and GlobalLpPool's p: a float attribute in version 1, an int
 * from version 2; either is accepted. */
static er_status read_p(const er_kctx *ctx, double *p) {
  const er_attr *a = er__node_attr(ctx->node, "p");
  *p = 2.0;
  if (a && a->type == ER_ATTR_FLOAT) *p = a->f;
  else if (a) {
    int64_t v;
    ER_CHECK(er__attr_int(ctx, "p", 2, &v));
    *p = (double)v;
  }
  if (!(*p > 0) || *p > 1e6)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "p = %g must be positive", *p);
  return ER_STATUS_OK;
}

static er_status pool_prepare(er_kctx *ctx, pool_kind kind, pool_plan *p) {
  const er_tensor *x = ctx->in[0];
  int64_t v;
  memset(p, 0, sizeof *p);
  ER_CHECK(er__require_type(ctx, 0, kind == POOL_MAX ? pool_types_max : er__types_float));
  if (x->rank >= 0 && x->rank < 3)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "input X has rank %d; expected [N, C, D1, ...] with at least one spatial axis",
                        x->rank);
  ER_CHECK(er__opconv_read_window(ctx, x->rank >= 0 ? x->rank - 2 : -1, true, &p->win));
  p->nsp = p->win.nsp;
  ER_CHECK(er__attr_int(ctx, "ceil_mode", 0, &v));
  if (v != 0 && v != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "ceil_mode %lld must be 0 or 1", (long long)v);
  p->win.ceil_mode = v != 0;
  if (kind == POOL_AVG) {
    ER_CHECK(er__attr_int(ctx, "count_include_pad", 0, &v));
    if (v != 0 && v != 1)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "count_include_pad %lld must be 0 or 1",
                          (long long)v);
    p->count_include_pad = v != 0;
  }
  if (kind == POOL_LP) ER_CHECK(read_p(ctx, &p->p));
  if (kind == POOL_MAX) {
    ER_CHECK(er__attr_int(ctx, "storage_order", 0, &v));
    if (v != 0 && v != 1)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "storage_order %lld must be 0 (row major) or 1 (column major)", (long long)v);
    p->column_major = v != 0;
  }
  p->n = x->rank >= 0 ? x->dims[0] : -1;
  p->c = x->rank >= 0 ? x->dims[1] : -1;
  for (int d = 0; d < ER_MAX_RANK; d++) p->in[d] = p->out[d] = -1;
  for (int d = 0; d < p->nsp; d++) {
    p->in[d] = x->rank >= 0 ? x->dims[2 + d] : -1;
    if (p->in[d] < 0) continue;
    ER_CHECK(er__opconv_window_output(ctx, &p->win, d, p->in[d], p->win.kernel[d], &p->out[d], &p->pb[d],
                          &p->pe[d]));
  }
  return ER_STATUS_OK;
}

static er_status pool_check(er_kctx *ctx, pool_kind kind) {
  pool_plan p;
  ER_CHECK(pool_prepare(ctx, kind, &p));
  er_dtype t = ctx->in[0]->dtype;
  if (p.nsp < 0) {
    er__set_output(ctx, 0, t, -1, NULL);
    er__set_output(ctx, 1, ER_DTYPE_INT64, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  dims[0] = p.n;
  dims[1] = p.c;
  for (int d = 0; d < p.nsp; d++) dims[2 + d] = p.out[d];
  er__set_output(ctx, 0, t, p.nsp + 2, dims);
  er__set_output(ctx, 1, ER_DTYPE_INT64, p.nsp + 2, dims);
  return ER_STATUS_OK;
}

/* Loads plane `pl` (pin elements) of x as doubles. */
static void load_plane(const er_tensor *x, int64_t pl, int64_t pin, double *dst) {
  int64_t base = pl * pin;
  if (x->dtype == ER_DTYPE_FLOAT) {
    const float *src = (const float *)x->data + base;
    for (int64_t i = 0; i < pin; i++) dst[i] = src[i];
  } else if (x->dtype == ER_DTYPE_DOUBLE) {
    memcpy(dst, (const double *)x->data + base, (size_t)pin * sizeof *dst);
  } else {
    for (int64_t i = 0; i < pin; i++) dst[i] = er__load_f64(x->data, x->dtype, base + i);
  }
}

/* Every pooling window, computed in double. Per axis the taps inside the
 * input form one range [klo, khi), so a window is a box of taps; padding
 * never takes part except in AveragePool's count_include_pad divisor, which
 * counts the taps inside the padded extent [-pad_begin, in + pad_end). An
 * empty window (possible only with pads >= kernel) gives -inf (max), NaN
 * (average without pads) or 0 (Lp). */
static er_status pool_run(er_kctx *ctx, pool_kind kind) {
  pool_plan p;
  ER_CHECK(pool_prepare(ctx, kind, &p));
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0], *ind = er__out(ctx, 1);
  int nsp = p.nsp;
  int64_t pin = prod(nsp, p.in), pout = prod(nsp, p.out), planes = p.n * p.c;
  int64_t rstride[ER_MAX_RANK], cstride[ER_MAX_RANK];
  er__strides(nsp, p.in, rstride);
  /* Column-major strides (storage_order 1): the first axis varies fastest. */
  for (int d = 0; d < nsp; d++) cstride[d] = d == 0 ? 1 : cstride[d - 1] * p.in[d - 1];
  if (pout == 0 || planes == 0) return ER_STATUS_OK;
  double *plane = er__malloc((size_t)(pin > 0 ? pin : 1) * sizeof *plane, "pooling plane");
  if (!plane) return ER_STATUS_OUT_OF_MEMORY;
  for (int64_t pl = 0; pl < planes; pl++) {
    load_plane(x, pl, pin, plane);
    int64_t o[ER_MAX_RANK] = {0};
    for (int64_t op = 0; op < pout; op++, counter_next(nsp, p.out, o)) {
      int64_t st[ER_MAX_RANK], klo[ER_MAX_RANK], khi[ER_MAX_RANK], kk[ER_MAX_RANK];
      int64_t n_valid = 1, n_padded = 1;
      for (int d = 0; d < nsp; d++) {
        int64_t k = p.win.kernel[d], dl = p.win.dilation[d];
        st[d] = o[d] * p.win.stride[d] - p.pb[d];
        int64_t lo = st[d] >= 0 ? 0 : ceil_div(-st[d], dl);
        int64_t hi = p.in[d] - st[d] > 0 ? ceil_div(p.in[d] - st[d], dl) : 0;
        int64_t hp = p.in[d] + p.pe[d] - st[d] > 0 ? ceil_div(p.in[d] + p.pe[d] - st[d], dl) : 0;
        if (hi > k) hi = k;
        if (lo > k) lo = k;
        if (hi < lo) hi = lo;
        if (hp > k) hp = k;
        klo[d] = kk[d] = lo;
        khi[d] = hi;
        n_valid *= hi - lo;
        n_padded *= hp;
      }
      double acc = kind == POOL_MAX ? -INFINITY : 0.0;
      int64_t best = -1;
      for (int64_t t = 0; t < n_valid; t++) {
        int64_t off = 0, coff = 0;
        for (int d = 0; d < nsp; d++) {
          int64_t i = st[d] + kk[d] * p.win.dilation[d];
          off += i * rstride[d];
          coff += i * cstride[d];
        }
        double v = plane[off];
        switch (kind) {
          case POOL_MAX:
            /* NaN is skipped unless every tap is NaN. */
            if (best < 0 || v > acc || acc != acc) {
              acc = v;
              best = p.column_major ? coff : off;
            }
            break;
          case POOL_AVG: acc += v; break;
          case POOL_LP:
            acc += p.p == 1.0 ? fabs(v) : p.p == 2.0 ? v * v : pow(fabs(v), p.p);
            break;
        }
        for (int d = nsp - 1; d >= 0; d--) {
          if (++kk[d] < khi[d]) break;
          kk[d] = klo[d];
        }
      }
      if (kind == POOL_AVG) acc /= (double)(p.count_include_pad ? n_padded : n_valid);
      if (kind == POOL_LP) acc = p.p == 1.0 ? acc : p.p == 2.0 ? sqrt(acc) : pow(acc, 1.0 / p.p);
      int64_t yi = pl * pout + op;
      if (y->dtype == ER_DTYPE_FLOAT) ((float *)y->data)[yi] = (float)acc;
      else if (kind == POOL_MAX && er__dtype_is_int(y->dtype))
        er__store_i64(y->data, y->dtype, yi, best < 0 ? 0 : (int64_t)acc);
      else er__store_f64(y->data, y->dtype, yi, acc);
      if (ind) ((int64_t *)ind->data)[yi] = best < 0 ? -1 : pl * pin + best;
    }
  }
  free(plane);
  return ER_STATUS_OK;
}

static er_status maxpool_check(er_kctx *ctx) { return pool_check(ctx, POOL_MAX); }
static er_status maxpool_run(er_kctx *ctx) { return pool_run(ctx, POOL_MAX); }
static er_status avgpool_check(er_kctx *ctx) { return pool_check(ctx, POOL_AVG); }
static er_status avgpool_run(er_kctx *ctx) { return pool_run(ctx, POOL_AVG); }
static er_status lppool_check(er_kctx *ctx) { return pool_check(ctx, POOL_LP); }
static er_status lppool_run(er_kctx *ctx) { return pool_run(ctx, POOL_LP); }

const er_op_def er__opconv_op_maxpool = {
    .name = "MaxPool", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 2,
    .check = maxpool_check, .run = maxpool_run,
};

const er_op_def er__opconv_op_avgpool = {
    .name = "AveragePool", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = avgpool_check, .run = avgpool_run,
};

const er_op_def er__opconv_op_lppool = {
    .name = "LpPool", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = lppool_check, .run = lppool_run,
};

/* ======================================================================== */
/* Global pools                                                              */
/* ======================================================================== */

static er_status global_pool_check(er_kctx *ctx, pool_kind kind) {
  const er_tensor *x = ctx->in[0];
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  if (kind == POOL_LP) {
    double p;
    ER_CHECK(read_p(ctx, &p));
  }
  if (x->rank < 0) {
    er__set_output(ctx, 0, x->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  if (x->rank < 2)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input X has rank %d; expected [N, C, D1, ...]",
                        x->rank);
  int64_t dims[ER_MAX_RANK];
  for (int d = 0; d < x->rank; d++) dims[d] = d < 2 ? x->dims[d] : 1;
  er__set_output(ctx, 0, x->dtype, x->rank, dims);
  return ER_STATUS_OK;
}

/* Reduces each [N, C] plane to one value, in double. */
static er_status global_pool_run(er_kctx *ctx, pool_kind kind) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  double p = 2.0;
  if (kind == POOL_LP) ER_CHECK(read_p(ctx, &p));
  int64_t planes = x->dims[0] * x->dims[1];
  int64_t pin = prod(x->rank - 2, x->dims + 2);
  double *plane = er__malloc((size_t)(pin > 0 ? pin : 1) * sizeof *plane, "pooling plane");
  if (!plane) return ER_STATUS_OUT_OF_MEMORY;
  for (int64_t pl = 0; pl < planes; pl++) {
    load_plane(x, pl, pin, plane);
    double acc = kind == POOL_MAX ? -INFINITY : 0.0;
    for (int64_t i = 0; i < pin; i++) {
      double v = plane[i];
      if (kind == POOL_MAX) {
        if (i == 0 || v > acc || acc != acc) acc = v;
      } else if (kind == POOL_AVG) {
        acc += v;
      } else {
        acc += p == 2.0 ? v * v : pow(fabs(v), p);
      }
    }
    if (kind == POOL_AVG) acc /= (double)pin;
    if (kind == POOL_LP) acc = p == 2.0 ? sqrt(acc) : pow(acc, 1.0 / p);
    er__store_f64(y->data, y->dtype, pl, acc);
  }
  free(plane);
  return ER_STATUS_OK;
}

static er_status gmaxpool_check(er_kctx *ctx) { return global_pool_check(ctx, POOL_MAX); }
static er_status gmaxpool_run(er_kctx *ctx) { return global_pool_run(ctx, POOL_MAX); }
static er_status gavgpool_check(er_kctx *ctx) { return global_pool_check(ctx, POOL_AVG); }
static er_status gavgpool_run(er_kctx *ctx) { return global_pool_run(ctx, POOL_AVG); }
static er_status glppool_check(er_kctx *ctx) { return global_pool_check(ctx, POOL_LP); }
static er_status glppool_run(er_kctx *ctx) { return global_pool_run(ctx, POOL_LP); }

const er_op_def er__opconv_op_global_maxpool = {
    .name = "GlobalMaxPool", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = gmaxpool_check, .run = gmaxpool_run,
};

const er_op_def er__opconv_op_global_avgpool = {
    .name = "GlobalAveragePool", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = gavgpool_check, .run = gavgpool_run,
};

const er_op_def er__opconv_op_global_lppool = {
    .name = "GlobalLpPool", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = glppool_check, .run = glppool_run,
};

/* ======================================================================== */
/* MaxUnpool                                                                 */
/* ======================================================================== */

/* The unpooled shape is [N, C, (in - 1) * stride + kernel - pads]. Indices
 * (MaxPool's flattened indices) address that tensor; an output_shape input
 * that is larger places it in the leading corner, as the ONNX reference
 * implementation does. */
typedef struct unpool_plan {
  int rank;                         /* -1 = unknown */
  int64_t inferred[ER_MAX_RANK];    /* unpooled shape; -1 unknown */
  int64_t out[ER_MAX_RANK];         /* output shape; -1 unknown */
} unpool_plan;

static er_status unpool_prepare(er_kctx *ctx, unpool_plan *p) {
  static const er_dtype i64[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};
  const er_tensor *x = ctx->in[0], *ind = ctx->in[1], *os = er__in(ctx, 2);
  window w;
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  ER_CHECK(er__require_type(ctx, 1, i64));
  if (os) {
    ER_CHECK(er__require_type(ctx, 2, i64));
    ER_CHECK(er__require_rank(ctx, 2, 1, 1));
  }
  if (x->rank >= 0 && x->rank < 3)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "input X has rank %d; expected [N, C, D1, ...] with at least one spatial axis",
                        x->rank);
  if (x->rank >= 0 && ind->rank >= 0) {
    bool same = x->rank == ind->rank;
    for (int d = 0; same && d < x->rank; d++)
      if (x->dims[d] >= 0 && ind->dims[d] >= 0 && x->dims[d] != ind->dims[d]) same = false;
    if (!same) {
      char a[160], b[160];
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "indices I %s must have the shape of X %s",
                          er__shape_str(ind, a, sizeof a), er__shape_str(x, b, sizeof b));
    }
  }
  ER_CHECK(er__opconv_read_window(ctx, x->rank >= 0 ? x->rank - 2 : -1, true, &w));
  p->rank = w.nsp >= 0 ? w.nsp + 2 : -1;
  for (int d = 0; d < ER_MAX_RANK; d++) p->inferred[d] = p->out[d] = -1;
  if (p->rank < 0) return ER_STATUS_OK;
  for (int d = 0; d < 2; d++) p->inferred[d] = x->rank >= 0 ? x->dims[d] : -1;
  for (int d = 0; d < w.nsp; d++) {
    int64_t in = x->rank >= 0 ? x->dims[2 + d] : -1;
    if (in < 0) continue;
    int64_t v;
    if (!er__mul_i64(in > 0 ? in - 1 : 0, w.stride[d], &v) || !er__add_i64(v, w.kernel[d], &v))
      return er__op_error(ctx, ER_STATUS_LIMIT, "spatial axis %d: the unpooled extent overflows int64", d);
    v -= w.pad_begin[d] + w.pad_end[d];
    if (v < 0 || (v == 0 && in > 0))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "spatial axis %d: the unpooled extent would be %lld (input %lld, kernel "
                          "%lld, stride %lld, pads %lld+%lld)",
                          d, (long long)v, (long long)in, (long long)w.kernel[d],
                          (long long)w.stride[d], (long long)w.pad_begin[d], (long long)w.pad_end[d]);
    p->inferred[2 + d] = v;
  }
  memcpy(p->out, p->inferred, sizeof p->out);
  if (os) {
    if (os->rank == 1 && os->dims[0] >= 0 && os->dims[0] != p->rank)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "output_shape has %lld values but the output has rank %d",
                          (long long)os->dims[0], p->rank);
    for (int d = 0; d < p->rank; d++) p->out[d] = os->data ? er__get_i64(os, d) : -1;
    for (int d = 0; d < p->rank; d++) {
      if (os->data && p->inferred[d] >= 0 && p->out[d] < p->inferred[d]) {
        char a[160], b[160];
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "output_shape %s is smaller than the unpooled shape %s",
                            er__dims_str(p->rank, p->out, a, sizeof a),
                            er__dims_str(p->rank, p->inferred, b, sizeof b));
      }
    }
  }
  return ER_STATUS_OK;
}

static er_status unpool_check(er_kctx *ctx) {
  unpool_plan p;
  ER_CHECK(unpool_prepare(ctx, &p));
  er__set_output(ctx, 0, ctx->in[0]->dtype, p.rank, p.out);
  return ER_STATUS_OK;
}

static er_status unpool_run(er_kctx *ctx) {
  unpool_plan p;
  ER_CHECK(unpool_prepare(ctx, &p));
  const er_tensor *x = ctx->in[0], *ind = ctx->in[1];
  er_tensor *y = ctx->out[0];
  int64_t n = er__count(x), total = prod(p.rank, p.inferred);
  int64_t ostride[ER_MAX_RANK];
  size_t es = er_dtype_size(x->dtype);
  er__strides(p.rank, p.out, ostride);
  const int64_t *iv = ind->data;
  for (int64_t i = 0; i < n; i++) {
    int64_t idx = iv[i];
    if (idx < 0 || idx >= total)
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                          "index I[%lld] = %lld is out of range [0, %lld) for the unpooled shape",
                          (long long)i, (long long)idx, (long long)total);
    /* Coordinates in the unpooled shape, re-flattened in the output's. */
    int64_t off = 0, rem = idx;
    for (int d = p.rank - 1; d >= 0; d--) {
      off += (rem % p.inferred[d]) * ostride[d];
      rem /= p.inferred[d];
    }
    memcpy((unsigned char *)y->data + (size_t)off * es, (const unsigned char *)x->data + (size_t)i * es,
           es);
  }
  return ER_STATUS_OK;
}

const er_op_def er__opconv_op_maxunpool = {
    .name = "MaxUnpool", .domain = "", .min_version = 9, .max_version = 22,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = 1u << 2, .check = unpool_check, .run = unpool_run,
};
