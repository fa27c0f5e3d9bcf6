/* qops.c - optimized CPU kernels of the "qops" group: the 8-bit kernels
 * around the integer GEMM, on the loops of qelt.h.
 *
 *  - q8_quantize__<isa>, q8_dequantize__<isa>: per-tensor QuantizeLinear
 *    (float32 -> uint8/int8) and DequantizeLinear (-> float32).
 *  - q8_qadd__<isa>, q8_qmul__<isa>: QAdd / QMul with equal shapes or one
 *    single-value operand (other broadcasts: the reference).
 *  - q8_lut__scalar: QLut (a byte table lookup; no vector form helps).
 *  - q8_maxpool__<isa>: MaxPool on uint8/int8 NCHW (1-D, 2-D): planes
 *    padded with the type's minimum and split by stride phase, so that
 *    each tap is a contiguous run and a window is a byte-wise max of runs.
 *  - q8_avgpool__<isa>: QAvgPool (AveragePool and GlobalAveragePool): the
 *    exact integer sum over planes padded with the zero point, then the
 *    reference's division by the tap count in double.
 * All of them repeat the reference's arithmetic and match it bit for bit. */
#include <stdlib.h>

/* Builds for CPUs none of the ISA variants below targets (Arm without
 * dotprod, other architectures) use none of the shared code: the
 * reference kernels run instead. */
#if !defined(__x86_64__) && !defined(__i386__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/qelt.h"
#include "kernels/window.h"
#include "ops/qfused.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Elements per worker below which a split is not worth a wake-up. */
#define QOPS_MIN_PER_WORKER (INT64_C(1) << 15)

static bool q8(er_dtype t) { return t == ER_DTYPE_UINT8 || t == ER_DTYPE_INT8; }

/* A constant holding one value. */
static bool const_one(const er_tensor *t) { return t && t->data && er__tensor_count(t) == 1; }

static float cfloat(const er_tensor *t) { return ((const float *)t->data)[0]; }
static int32_t cint(const er_tensor *t) { return t ? (int32_t)er__load_i64(t->data, t->dtype, 0) : 0; }

static bool attr_is(const er_kernel_info *ki, const char *name, int64_t want) {
  const er_attr *a = er__node_attr(ki->node, name);
  return !a || (a->type == ER_ATTR_INT && a->i == want);
}

/* Splits [0, n) elements over the pool in chunks of whole vectors. */
typedef struct span_job {
  void (*fn)(const struct span_job *j, int64_t lo, int64_t hi);
  int64_t n;
  int chunks;
  const void *ctx;
} span_job;

static void span_chunk(void *arg, int64_t begin, int64_t end) {
  const span_job *j = arg;
  for (int64_t c = begin; c < end; c++) {
    int64_t lo = j->n * c / j->chunks / 64 * 64, hi = c + 1 == j->chunks ? j->n : j->n * (c + 1) / j->chunks / 64 * 64;
    if (hi > lo) j->fn(j, lo, hi);
  }
}

static void run_spans(er_thread_pool *pool, span_job *j) {
  int64_t workers = er__pool_threads(pool);
  j->chunks = (int)min64(workers, j->n / QOPS_MIN_PER_WORKER > 1 ? j->n / QOPS_MIN_PER_WORKER : 1);
  if (j->chunks <= 1) {
    j->chunks = 1;
    j->fn(j, 0, j->n);
    return;
  }
  er__parallel_for(pool, j->chunks, 1, span_chunk, j);
}

/* ======================================================================== */
/* QuantizeLinear, DequantizeLinear                                          */
/* ======================================================================== */

typedef struct qd_ctx {
  const er_qelt_ops *ops;
  const void *x;
  void *y;
  float s;
  int32_t zp, lo, hi;
  bool is_signed;
} qd_ctx;

static bool quantize_supports(const er_kernel_info *ki, bool isa_ok) {
  const er_tensor *x = er__ki_in(ki, 0), *s = er__ki_in(ki, 1), *z = er__ki_in(ki, 2);
  if (!isa_ok || !x || x->dtype != ER_DTYPE_FLOAT || !const_one(s) || s->dtype != ER_DTYPE_FLOAT) return false;
  if (z && (!const_one(z) || !q8(z->dtype))) return false;
  if (ki->n_out != 1 || !ki->out[0] || !q8(ki->out[0]->dtype)) return false;
  if (!attr_is(ki, "block_size", 0)) return false;
  const er_attr *prec = er__node_attr(ki->node, "precision");
  return !prec || (prec->type == ER_ATTR_INT && (prec->i == 0 || prec->i == ER_DTYPE_FLOAT));
}

static void quantize_span(const span_job *j, int64_t lo, int64_t hi) {
  const qd_ctx *c = j->ctx;
  c->ops->quantize((const float *)c->x + lo, (uint8_t *)c->y + lo, hi - lo, c->s, c->zp, c->lo, c->hi);
}

static er_status quantize_run(const er_kernel_run *kr, const er_qelt_ops *ops) {
  er_kctx *ctx = kr->ctx;
  er_tensor *y = ctx->out[0];
  qd_ctx c = {ops, ctx->in[0]->data, y->data, cfloat(ctx->in[1]), cint(er__in(ctx, 2)), 0, 0, false};
  er__q_range(y->dtype, &c.lo, &c.hi);
  span_job j = {quantize_span, er__tensor_count(y), 1, &c};
  run_spans(kr->pool, &j);
  return ER_STATUS_OK;
}

/* DynamicQuantizeLinear: the reference's range (0 included, NaN left
 * out) in eight independent chains, its scale and zero point
 * (er__dynamic_qparams_range_u8), then QuantizeLinear's vector loop over
 * the workers; the result equals the reference's. quantize_dynamic writes
 * one before every integer layer. */
static bool dynquant_supports(const er_kernel_info *ki, bool isa_ok) {
  const er_tensor *x = er__ki_in(ki, 0);
  return isa_ok && x && x->dtype == ER_DTYPE_FLOAT && ki->n_out == 3 && ki->out[0];
}

/* The smallest and largest of x[0..n) and 0, in 16 lanes GCC vectorizes
 * at -O2 (a trip count of whole blocks). NaN never replaces a lane's
 * value; -0 never replaces the starting +0, so every split of the range
 * gives the same result. */
static void dq_minmax(const float *restrict x, int64_t n, float *lo_out, float *hi_out) {
  float lo[16] = {0}, hi[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; l++) {
      float v = x[i + l];
      lo[l] = v < lo[l] ? v : lo[l];
      hi[l] = v > hi[l] ? v : hi[l];
    }
  for (; i < n; i++) {
    lo[0] = x[i] < lo[0] ? x[i] : lo[0];
    hi[0] = x[i] > hi[0] ? x[i] : hi[0];
  }
  for (int l = 1; l < 16; l++) {
    lo[0] = lo[l] < lo[0] ? lo[l] : lo[0];
    hi[0] = hi[l] > hi[0] ? hi[l] : hi[0];
  }
  *lo_out = lo[0];
  *hi_out = hi[0];
}

#define DQ_MAX_CHUNKS 64

typedef struct dq_range_job {
  const float *x;
  int64_t n;
  int chunks;
  float lo[DQ_MAX_CHUNKS], hi[DQ_MAX_CHUNKS];
} dq_range_job;

static void dq_range_chunk(void *arg, int64_t begin, int64_t end) {
  dq_range_job *j = arg;
  for (int64_t c = begin; c < end; c++) {
    int64_t a = j->n * c / j->chunks, b = j->n * (c + 1) / j->chunks;
    dq_minmax(j->x + a, b - a, &j->lo[c], &j->hi[c]);
  }
}

static er_status dynquant_run(const er_kernel_run *kr, const er_qelt_ops *ops) {
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  const float *xv = x->data;
  const int64_t n = er__tensor_count(x);
  /* The range over the workers (min and max are exact, so the split does
   * not change it), then the quantization. */
  dq_range_job rj;
  rj.x = xv;
  rj.n = n;
  rj.chunks = (int)min64(min64(er__pool_threads(kr->pool), DQ_MAX_CHUNKS),
                         n / QOPS_MIN_PER_WORKER > 1 ? n / QOPS_MIN_PER_WORKER : 1);
  if (rj.chunks <= 1) {
    rj.chunks = 1;
    dq_minmax(xv, n, &rj.lo[0], &rj.hi[0]);
  } else {
    er__parallel_for(kr->pool, rj.chunks, 1, dq_range_chunk, &rj);
  }
  float lo = rj.lo[0], hi = rj.hi[0];
  for (int c = 1; c < rj.chunks; c++) {
    lo = rj.lo[c] < lo ? rj.lo[c] : lo;
    hi = rj.hi[c] > hi ? rj.hi[c] : hi;
  }
  float scale;
  uint8_t zp;
  er__dynamic_qparams_range_u8(lo, hi, &scale, &zp);
  if (er__out(ctx, 1)) *(float *)ctx->out[1]->data = scale;
  if (er__out(ctx, 2)) *(uint8_t *)ctx->out[2]->data = zp;
  qd_ctx c = {ops, xv, ctx->out[0]->data, scale, zp, 0, 255, false};
  span_job j = {quantize_span, n, 1, &c};
  run_spans(kr->pool, &j);
  return ER_STATUS_OK;
}

static bool dequantize_supports(const er_kernel_info *ki, bool isa_ok) {
  const er_tensor *x = er__ki_in(ki, 0), *s = er__ki_in(ki, 1), *z = er__ki_in(ki, 2);
  if (!isa_ok || !x || !q8(x->dtype) || !const_one(s) || s->dtype != ER_DTYPE_FLOAT) return false;
  if (z && (!const_one(z) || z->dtype != x->dtype)) return false;
  if (!attr_is(ki, "block_size", 0)) return false;
  return ki->n_out == 1 && ki->out[0] && ki->out[0]->dtype == ER_DTYPE_FLOAT;
}

static void dequantize_span(const span_job *j, int64_t lo, int64_t hi) {
  const qd_ctx *c = j->ctx;
  c->ops->dequantize((const uint8_t *)c->x + lo, c->is_signed, (float *)c->y + lo, hi - lo, c->s, c->zp);
}

static er_status dequantize_run(const er_kernel_run *kr, const er_qelt_ops *ops) {
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  qd_ctx c = {ops, x->data, ctx->out[0]->data, cfloat(ctx->in[1]), cint(er__in(ctx, 2)), 0, 0,
              x->dtype == ER_DTYPE_INT8};
  span_job j = {dequantize_span, er__tensor_count(x), 1, &c};
  run_spans(kr->pool, &j);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* QAdd, QMul                                                                */
/* ======================================================================== */

static bool qbinary_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || ki->n_in != 8) return false;
  for (int i = 0; i < 8; i++) {
    const er_tensor *t = er__ki_in(ki, i);
    if (!t) return false;
    if (i != 0 && i != 3 && !const_one(t)) return false;
  }
  return q8(ki->in[0]->dtype) && q8(ki->in[3]->dtype) && ki->in[1]->dtype == ER_DTYPE_FLOAT &&
         ki->in[4]->dtype == ER_DTYPE_FLOAT && ki->in[6]->dtype == ER_DTYPE_FLOAT && q8(ki->in[7]->dtype);
}

typedef struct qb_ctx {
  const er_qelt_ops *ops;
  const uint8_t *a, *b;
  uint8_t *y;
  bool as_, bs_;
  int a_step, b_step;
  float as, bs, ys;
  int32_t az, bz, yz, lo, hi;
  bool mul;
} qb_ctx;

static void qbinary_span(const span_job *j, int64_t lo, int64_t hi) {
  const qb_ctx *c = j->ctx;
  c->ops->qbinary(c->a + lo * c->a_step, c->as_, c->a_step, c->as, c->az, c->b + lo * c->b_step, c->bs_, c->b_step,
                  c->bs, c->bz, c->y + lo, hi - lo, c->ys, c->yz, c->lo, c->hi, c->mul);
}

/* Broadcasting as rows: the output's trailing dims [d0, rank) form rows
 * over which each input is either contiguous or one repeated element;
 * the leading dims index the rows. */
typedef struct qb_rows {
  int outer_rank;
  int64_t dims[ER_MAX_RANK];   /* leading dims */
  int64_t st[2][ER_MAX_RANK];  /* element strides of a and b per leading dim */
  int64_t len;                 /* row length */
  int step[2];                 /* 1: contiguous along the row; 0: repeated */
} qb_rows;

static bool row_plan(const er_tensor *y, const er_tensor *const *in, qb_rows *r) {
  int rank = y->rank;
  int64_t st[2][ER_MAX_RANK];
  for (int t = 0; t < 2; t++) {
    const er_tensor *x = in[t];
    if (x->rank > rank) return false;
    int64_t acc = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int xd = d - (rank - x->rank);
      int64_t dim = xd >= 0 ? x->dims[xd] : 1;
      if (dim != 1 && dim != y->dims[d]) return false;
      st[t][d] = dim == 1 ? 0 : acc;
      acc *= dim;
    }
  }
  /* Grow the row leftwards while every input stays contiguous or
   * repeated over it. */
  int d0 = rank;
  int64_t len = 1;
  int step[2] = {-1, -1};
  while (d0 > 0) {
    int d = d0 - 1;
    bool ok = true;
    int ns[2];
    for (int t = 0; t < 2; t++) {
      int want = st[t][d] == 0 ? 0 : 1;
      if (y->dims[d] == 1) want = step[t] < 0 ? 0 : step[t];
      if (step[t] >= 0 && want != step[t]) ok = false;
      if (want == 1 && st[t][d] != 0 && st[t][d] != len) ok = false;
      ns[t] = want;
    }
    if (!ok) break;
    step[0] = ns[0];
    step[1] = ns[1];
    len *= y->dims[d];
    d0 = d;
  }
  r->outer_rank = d0;
  for (int d = 0; d < d0; d++) {
    r->dims[d] = y->dims[d];
    r->st[0][d] = st[0][d];
    r->st[1][d] = st[1][d];
  }
  r->len = len;
  r->step[0] = step[0] < 0 ? 0 : step[0];
  r->step[1] = step[1] < 0 ? 0 : step[1];
  return true;
}

static er_status qbinary_run(const er_kernel_run *kr, const er_qelt_ops *ops, bool mul) {
  er_kctx *ctx = kr->ctx;
  const er_tensor *a = ctx->in[0], *b = ctx->in[3];
  er_tensor *y = ctx->out[0];
  int64_t n = er__tensor_count(y);
  const er_tensor *ins[2] = {a, b};
  qb_rows rp;
  if (!row_plan(y, ins, &rp)) return er__kr_reference(kr);
  if (n == 0) return ER_STATUS_OK;
  qb_ctx c = {ops,
              a->data,
              b->data,
              y->data,
              a->dtype == ER_DTYPE_INT8,
              b->dtype == ER_DTYPE_INT8,
              rp.step[0],
              rp.step[1],
              cfloat(ctx->in[1]),
              cfloat(ctx->in[4]),
              cfloat(ctx->in[6]),
              cint(ctx->in[2]),
              cint(ctx->in[5]),
              cint(ctx->in[7]),
              0,
              0,
              mul};
  ER_CHECK(er__q_clamp_attrs(ctx, y->dtype, &c.lo, &c.hi));
  if (rp.outer_rank == 0) {
    span_job j = {qbinary_span, n, 1, &c};
    run_spans(kr->pool, &j);
    return ER_STATUS_OK;
  }
  /* Row by row (each row a span of one thread; rows are many and short). */
  int64_t rows = n / (rp.len ? rp.len : 1), idx[ER_MAX_RANK] = {0}, off[2] = {0, 0};
  for (int64_t r = 0; r < rows; r++) {
    ops->qbinary(c.a + off[0], c.as_, c.a_step, c.as, c.az, c.b + off[1], c.bs_, c.b_step, c.bs, c.bz,
                 c.y + r * rp.len, rp.len, c.ys, c.yz, c.lo, c.hi, mul);
    for (int d = rp.outer_rank - 1; d >= 0; d--) {
      off[0] += rp.st[0][d];
      off[1] += rp.st[1][d];
      if (++idx[d] < rp.dims[d]) break;
      off[0] -= rp.st[0][d] * rp.dims[d];
      off[1] -= rp.st[1][d] * rp.dims[d];
      idx[d] = 0;
    }
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* QLut                                                                      */
/* ======================================================================== */

static bool lut_supports(const er_kernel_info *ki) {
  const er_tensor *x = er__ki_in(ki, 0), *t = er__ki_in(ki, 1);
  if (!x || !q8(x->dtype) || !t || !t->data || !q8(t->dtype)) return false;
  return er__tensor_count(t) == 256 || (t->rank == 2 && t->dims[1] == 256 && x->rank >= 2);
}

static er_status lut_run(const er_kernel_run *kr, const er_qelt_ops *ops) {
  er_kctx *ctx = kr->ctx;
  const uint8_t *x = ctx->in[0]->data, *table = ctx->in[1]->data;
  uint8_t *y = ctx->out[0]->data;
  uint8_t flip = ctx->in[0]->dtype == ER_DTYPE_INT8 ? 0x80 : 0;
  int64_t n = er__tensor_count(ctx->out[0]);
  const er_tensor *t = ctx->in[1], *xt = ctx->in[0];
  int64_t chans = er__tensor_count(t) / 256, inner = n;
  if (chans > 1) {
    if (xt->dims[1] != chans) return er__kr_reference(kr);
    inner = 1;
    for (int d = 2; d < xt->rank; d++) inner *= xt->dims[d];
  }
  /* Planes of `inner` elements, each with its channel's table. */
  for (int64_t p = 0; inner > 0 && p < n / inner; p++) {
    const uint8_t *tab = table + (chans > 1 ? p % chans : 0) * 256;
    if (ops) {
      ops->lut(x + p * inner, flip, tab, y + p * inner, inner);
    } else {
      for (int64_t i = 0; i < inner; i++) y[p * inner + i] = tab[(uint8_t)(x[p * inner + i] ^ flip)];
    }
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Pools                                                                     */
/* ======================================================================== */

/* Planes of one channel padded with `pad` and split by stride phase, tall
 * and wide enough for every window (ceil_mode windows may reach past the
 * declared padding). */
typedef struct pool_geom {
  er_window g;
  int64_t hs, ws;            /* plane height, width */
  int64_t len;               /* virtual outputs: (oh - 1) * ws + ow */
} pool_geom;

static bool pool_geometry(const er_kctx *ctx, const er_tensor *x, const er_tensor *y, bool global, pool_geom *p) {
  er_window *g = &p->g;
  if (global) {
    if (x->rank < 3) return false;
    memset(g, 0, sizeof *g);
    g->n = x->dims[0];
    g->c = x->dims[1];
    g->h = 1;
    g->w = er__tensor_count(x) / (g->n * g->c > 0 ? g->n * g->c : 1);
    g->kh = 1;
    g->kw = g->w;
    g->sh = g->sw = g->dh = g->dw = 1;
    g->oh = g->ow = 1;
    g->m = g->c;
  } else if (!er__window_get(ctx, x, NULL, y, g)) {
    return false;
  }
  if (g->oh <= 0 || g->ow <= 0) return false;
  int64_t need_h = (g->oh - 1) * g->sh + (g->kh - 1) * g->dh + 1, need_w = (g->ow - 1) * g->sw + (g->kw - 1) * g->dw + 1;
  int64_t hp = g->h + g->pt + g->pb, wp = g->w + g->pl + g->pr;
  if (need_h > hp) hp = need_h;
  if (need_w > wp) wp = need_w;
  p->hs = (hp + g->sh - 1) / g->sh;
  p->ws = (wp + g->sw - 1) / g->sw;
  p->len = (g->oh - 1) * p->ws + g->ow;
  return true;
}

/* Taps of the window along one axis that fall inside [lo, hi). */
static int64_t taps_in(int64_t start, int64_t k, int64_t d, int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t t = 0; t < k; t++)
    if (start + t * d >= lo && start + t * d < hi) n++;
  return n;
}

static void build_planes(const er_qelt_ops *ops, const pool_geom *p, const uint8_t *x, uint8_t pad, uint8_t *dst) {
  const er_window *g = &p->g;
  for (int64_t py = 0; py < g->sh; py++)
    for (int64_t px = 0; px < g->sw; px++) {
      uint8_t *d = dst + (py * g->sw + px) * p->hs * p->ws;
      for (int64_t yy = 0; yy < p->hs; yy++, d += p->ws) {
        int64_t r = yy * g->sh + py - g->pt;
        if (r < 0 || r >= g->h) {
          memset(d, pad, (size_t)p->ws);
          continue;
        }
        const uint8_t *row = x + r * g->w;
        /* Plane columns [lo, hi) read input columns xx * sw + px - pl. */
        int64_t lo = 0, hi = p->ws;
        while (lo < p->ws && lo * g->sw + px - g->pl < 0) lo++;
        while (hi > lo && (hi - 1) * g->sw + px - g->pl >= g->w) hi--;
        memset(d, pad, (size_t)lo);
        if (g->sw == 1) memcpy(d + lo, row + lo + px - g->pl, (size_t)(hi - lo));
        else if (g->sw == 2) ops->gather2(row + 2 * lo + px - g->pl, hi - lo, d + lo);
        else
          for (int64_t xx = lo; xx < hi; xx++) d[xx] = row[xx * g->sw + px - g->pl];
        memset(d + hi, pad, (size_t)(p->ws - hi));
      }
    }
}

static const uint8_t *tap_run(const pool_geom *p, const uint8_t *planes, int64_t ky, int64_t kx) {
  const er_window *g = &p->g;
  int64_t py = ky * g->dh % g->sh, qy = ky * g->dh / g->sh, px = kx * g->dw % g->sw, qx = kx * g->dw / g->sw;
  return planes + (py * g->sw + px) * p->hs * p->ws + qy * p->ws + qx;
}

/* Max pooling a row at a time: the max over the window's input rows of one
 * output row (padded to the plane width ws * sw), then its sw column
 * phases. Each input row is read kh / sh times, not kh * kw times. */
static size_t maxrow_bytes(const pool_geom *p) {
  return (size_t)(p->ws * p->g.sw + 63) / 64 * 64 + (size_t)p->g.sw * (size_t)(p->ws + 63) / 64 * 64;
}

/* A worker's planes, then (64-byte aligned) the running max and sums. */
static size_t pool_planes_bytes(const pool_geom *p) { return (size_t)(p->g.sh * p->g.sw * p->hs * p->ws + 63) / 64 * 64; }

/* Geometry avg_plane_narrow takes (qelt.h): column stride and dilation
 * 1, rows of at most 32 padded columns. */
static bool narrow_geometry(const er_window *g) {
  return g->sw == 1 && g->dw == 1 && g->kw <= 16 && g->ow + g->kw - 1 <= 32;
}

/* The divisors of a whole output plane for avg_plane_narrow (floats), in
 * the slots of pools it may take only. */
static size_t cnt_plane_bytes(const pool_geom *p) {
  return narrow_geometry(&p->g) ? (size_t)(p->g.oh * p->g.ow + 15) / 16 * 64 : 0;
}

static size_t pool_slot_bytes(const pool_geom *p) {
  return pool_planes_bytes(p) + ((size_t)p->len + 63) / 64 * 64 + (size_t)((p->len + 15) / 16 * 16) * sizeof(int32_t) +
         (size_t)p->g.ow * sizeof(float) + 64 + maxrow_bytes(p) + cnt_plane_bytes(p);
}

typedef struct pool_job {
  const er_qelt_ops *ops;
  const pool_geom *p;
  const uint8_t *x;          /* [C, H, W] of one image */
  uint8_t *y;                /* [C, OH, OW] of one image */
  bool is_signed, avg, global;
  int32_t xz, yz, lo, hi;
  float mult;
  const int64_t *cy, *cx;    /* tap counts per output row / column (average) */
  uint8_t *scratch;
  size_t slot;
  int chunks;
} pool_job;

/* The largest column stride max_rows takes (larger ones use the planes). */
#define ER_POOL_MAX_SW 8

static void max_rows(const pool_job *j, const uint8_t *xc, uint8_t *yc, uint8_t pad, uint8_t *buf) {
  const pool_geom *p = j->p;
  const er_window *g = &p->g;
  const int64_t wp = p->ws * g->sw;
  uint8_t *vr = buf, *ph = buf + (wp + 63) / 64 * 64;
  const size_t phase = (size_t)(p->ws + 63) / 64 * 64;
  /* Columns outside the input stay padding for every row. */
  int64_t right = g->pl + g->w < wp ? g->pl + g->w : wp;
  memset(vr, pad, (size_t)g->pl);
  memset(vr + right, pad, (size_t)(wp - right));
  for (int64_t oy = 0; oy < g->oh; oy++) {
    bool first = true;
    for (int64_t ky = 0; ky < g->kh; ky++) {
      int64_t iy = oy * g->sh - g->pt + ky * g->dh;
      if (iy < 0 || iy >= g->h) continue;
      if (first) memcpy(vr + g->pl, xc + iy * g->w, (size_t)(right - g->pl));
      else j->ops->max_u8(vr + g->pl, xc + iy * g->w, right - g->pl, j->is_signed);
      first = false;
    }
    /* (pool_run sends windows without an input row to the reference.) */
    const uint8_t *cols[ER_POOL_MAX_SW];
    if (g->sw == 1) {
      cols[0] = vr;
    } else {
      for (int64_t px = 0; px < g->sw; px++) {
        uint8_t *d = ph + (size_t)px * phase;
        if (g->sw == 2) j->ops->gather2(vr + px, p->ws, d);
        else
          for (int64_t xx = 0; xx < p->ws; xx++) d[xx] = vr[xx * g->sw + px];
        cols[px] = d;
      }
    }
    uint8_t *out = yc + oy * g->ow;
    for (int64_t kx = 0; kx < g->kw; kx++) {
      const uint8_t *src = cols[kx * g->dw % g->sw] + kx * g->dw / g->sw;
      if (kx == 0) memcpy(out, src, (size_t)g->ow);
      else j->ops->max_u8(out, src, g->ow, j->is_signed);
    }
  }
}

/* Pools avg_plane_narrow runs. */
static bool avg_narrow(const pool_job *j) {
  return j->avg && !j->global && j->ops->avg_plane_narrow && narrow_geometry(&j->p->g);
}

static void pool_chunk(void *arg, int64_t begin, int64_t end) {
  const pool_job *j = arg;
  const pool_geom *p = j->p;
  const er_window *g = &p->g;
  const int64_t ohw = g->oh * g->ow, ntaps = g->kh * g->kw;
  for (int64_t ch = begin; ch < end; ch++) {
    uint8_t *planes = j->scratch + (size_t)ch * j->slot;
    uint8_t *vmax = planes + pool_planes_bytes(p);
    int32_t *vsum = (int32_t *)(vmax + (p->len + 63) / 64 * 64);
    /* avg_plane_narrow's divisors, at the end of the slot. */
    float *cnt_plane = (float *)(planes + j->slot - cnt_plane_bytes(p));
    bool narrow = avg_narrow(j);
    if (narrow)
      for (int64_t oy = 0; oy < g->oh; oy++)
        for (int64_t ox = 0; ox < g->ow; ox++) cnt_plane[oy * g->ow + ox] = (float)(j->cy[oy] * j->cx[ox]);
    for (int64_t c = g->c * ch / j->chunks; c < g->c * (ch + 1) / j->chunks; c++) {
      const uint8_t *xc = j->x + c * g->h * g->w;
      uint8_t *yc = j->y + c * ohw;
      if (j->global) {
        /* The exact sum of the plane, then the reference's double
         * division. */
        int64_t n = g->w, total = j->ops->sum_bytes(xc, n, j->is_signed);
        total -= (int64_t)j->xz * n;
        float avg = (float)((double)total / (double)n);
        yc[0] = (uint8_t)er__q_clamp(er__q_rhe(avg * j->mult) + j->yz, j->lo, j->hi);
        continue;
      }
      if (narrow) {
        j->ops->avg_plane_narrow(xc, g->h, g->w, g->pt, g->pl, g->kh, g->sh, g->dh, g->kw, g->oh, g->ow, j->is_signed,
                                 j->xz, (int32_t)(ntaps * j->xz), cnt_plane, j->mult, j->yz, j->lo, j->hi, yc);
        continue;
      }
      uint8_t pad = j->avg ? (uint8_t)j->xz : j->is_signed ? 0x80 : 0x00;
      if (!j->avg && j->ops->max_plane_s2 && g->sw == 2 && g->dw == 1 && (g->kw == 2 || g->kw == 3)) {
        j->ops->max_plane_s2(xc, g->h, g->w, g->pt, g->pl, g->kh, g->sh, g->dh, g->kw, g->oh, g->ow, j->is_signed, yc);
        continue;
      }
      if (!j->avg && j->ops->max_plane_s1 && g->sw == 1 && g->ow <= 64 && g->kw <= 16) {
        j->ops->max_plane_s1(xc, g->h, g->w, g->pt, g->pl, g->kh, g->sh, g->dh, g->kw, g->dw, g->oh, g->ow,
                             j->is_signed, yc);
        continue;
      }
      if (!j->avg && g->sw <= ER_POOL_MAX_SW) {
        max_rows(j, xc, yc, pad, planes);
        continue;
      }
      build_planes(j->ops, p, xc, pad, planes);
      if (!j->avg) {
        memcpy(vmax, tap_run(p, planes, 0, 0), (size_t)p->len);
        for (int64_t t = 1; t < ntaps; t++)
          j->ops->max_u8(vmax, tap_run(p, planes, t / g->kw, t % g->kw), p->len, j->is_signed);
        for (int64_t oy = 0; oy < g->oh; oy++) memcpy(yc + oy * g->ow, vmax + oy * p->ws, (size_t)g->ow);
        continue;
      }
      memset(vsum, 0, (size_t)p->len * sizeof *vsum);
      for (int64_t t = 0; t < ntaps; t++)
        j->ops->sum_u8(vsum, tap_run(p, planes, t / g->kw, t % g->kw), p->len, j->is_signed);
      /* Padding holds the zero point: sum (x - x_zp) = sum - taps * x_zp
       * (exact in int32: at most taps * 255 in magnitude). */
      float *cnt = (float *)(vsum + (p->len + 15) / 16 * 16);
      for (int64_t oy = 0; oy < g->oh; oy++) {
        for (int64_t ox = 0; ox < g->ow; ox++) cnt[ox] = (float)(j->cy[oy] * j->cx[ox]);
        j->ops->avg_quant(vsum + oy * p->ws, g->ow, (int32_t)(ntaps * j->xz), cnt, j->mult, j->yz, j->lo, j->hi,
                          yc + oy * g->ow);
      }
    }
  }
}

/* The most taps of an average window: 255 * taps stays below 2^24. */
#define ER_POOL_MAX_AVG_TAPS 65536

/* Tap counts (output rows + columns) a pool keeps on the stack. */
#define POOL_STACK_COUNTS 1024

/* A global pool's scratch: 256 int32 sums. */
#define GLOBAL_SLOT 1024

typedef struct pool_state {
  const er_qelt_ops *ops;
  bool avg, global, count_include_pad;
  int slots;
} pool_state;

static bool pool_supports(const er_kernel_info *ki, bool avg, bool isa_ok) {
  const er_tensor *x = er__ki_in(ki, 0);
  if (!isa_ok || !x || !q8(x->dtype) || ki->n_out != 1 || !ki->out[0]) return false;
  er_kctx ctx = er__ki_ctx(ki);
  int64_t global = 0;
  if (avg) {
    if (ki->n_in != 4 || !const_one(er__ki_in(ki, 1)) || !const_one(er__ki_in(ki, 2)) || !const_one(er__ki_in(ki, 3)))
      return false;
    if (ki->in[2]->dtype != ER_DTYPE_FLOAT || er__attr_int(&ctx, "global", 0, &global) != ER_STATUS_OK) return false;
    if (!q8(ki->in[3]->dtype)) return false;
  }
  if (global) return x->rank >= 3;
  if (!er__window_attrs_ok(&ctx, x->rank)) return false;
  const int64_t *ks;
  int64_t nks;
  return er__attr_ints(&ctx, "kernel_shape", &ks, &nks) == ER_STATUS_OK && ks;
}

static er_status pool_prepare(const er_kernel_info *ki, bool avg, const er_qelt_ops *ops, void **state_out,
                              size_t *scratch_out) {
  pool_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a pooling kernel");
  er_kctx ctx = er__ki_ctx(ki);
  int64_t v = 0;
  s->ops = ops;
  s->avg = avg;
  if (avg) er__attr_int(&ctx, "global", 0, &v);
  s->global = v != 0;
  v = 0;
  if (avg) er__attr_int(&ctx, "count_include_pad", 0, &v);
  s->count_include_pad = v != 0;
  s->slots = er__ki_slots(ki);
  pool_geom p;
  *scratch_out = 0;
  if (er__tensor_shape_known(ki->in[0]) && er__tensor_shape_known(ki->out[0]) &&
      pool_geometry(&ctx, ki->in[0], ki->out[0], s->global, &p))
    *scratch_out = (s->global ? GLOBAL_SLOT : pool_slot_bytes(&p)) * (size_t)s->slots;
  *state_out = s;
  return ER_STATUS_OK;
}

static er_status pool_run(const er_kernel_run *kr) {
  const pool_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  pool_geom p;
  if (!pool_geometry(ctx, x, y, s->global, &p)) return er__kr_reference(kr);
  /* An average over one window that is the whole unpadded map is a
   * global average (Inception-v2's last pool, 7x7 over 7x7: one sum per
   * plane instead of 49 one-byte runs). */
  bool global = s->global;
  if (!global && s->avg && p.g.oh == 1 && p.g.ow == 1 && p.g.kh == p.g.h && p.g.kw == p.g.w && p.g.pt == 0 &&
      p.g.pl == 0 && p.g.pb == 0 && p.g.pr == 0 && p.g.dh == 1 && p.g.dw == 1) {
    global = true;
    if (!pool_geometry(ctx, x, y, true, &p)) return er__kr_reference(kr);
  }
  const er_window *g = &p.g;
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  /* avg_quant's float division is exact for sums below 2^24 (qelt.h). */
  if (s->avg && !global && g->kh * g->kw > ER_POOL_MAX_AVG_TAPS) return er__kr_reference(kr);
  /* Tap counts per output row and column: inside the input, and inside
   * the declared padding (AveragePool's two divisors). Every window must
   * hold an input element, as the planes have no empty windows. */
  /* On the stack up to POOL_STACK_COUNTS rows and columns, so that a run
   * allocates nothing; larger planes (over ~500 x 500) allocate. */
  int64_t cnt_stack[POOL_STACK_COUNTS];
  int64_t *cnt = g->oh + g->ow <= POOL_STACK_COUNTS ? cnt_stack : malloc((size_t)(g->oh + g->ow) * sizeof *cnt);
  if (!cnt) return er__error(ER_STATUS_OUT_OF_MEMORY, "%s '%s': out of memory", ctx->node->op_type, ctx->node->name);
  bool empty = false;
  for (int64_t oy = 0; oy < g->oh; oy++) {
    int64_t st = oy * g->sh - g->pt;
    int64_t nv = taps_in(st, g->kh, g->dh, 0, g->h), np = taps_in(st, g->kh, g->dh, -g->pt, g->h + g->pb);
    cnt[oy] = s->count_include_pad ? np : nv;
    if (nv == 0) empty = true;
  }
  for (int64_t ox = 0; ox < g->ow; ox++) {
    int64_t st = ox * g->sw - g->pl;
    int64_t nv = taps_in(st, g->kw, g->dw, 0, g->w), np = taps_in(st, g->kw, g->dw, -g->pl, g->w + g->pr);
    cnt[g->oh + ox] = s->count_include_pad ? np : nv;
    if (nv == 0) empty = true;
  }
  if (empty && !global) {
    if (cnt != cnt_stack) free(cnt);
    return er__kr_reference(kr);
  }
  size_t slot = global ? GLOBAL_SLOT : pool_slot_bytes(&p);
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  er_status st = er__kr_scratch(kr, slot, &scratch, &slots, &owned);
  if (st != ER_STATUS_OK) {
    if (cnt != cnt_stack) free(cnt);
    return st;
  }
  pool_job j;
  memset(&j, 0, sizeof j);
  j.ops = s->ops;
  j.p = &p;
  j.is_signed = x->dtype == ER_DTYPE_INT8;
  j.avg = s->avg;
  j.global = global;
  j.cy = cnt;
  j.cx = cnt + g->oh;
  j.scratch = scratch;
  j.slot = slot;
  if (s->avg) {
    j.xz = cint(ctx->in[1]);
    j.mult = cfloat(ctx->in[2]);
    j.yz = cint(ctx->in[3]);
    st = er__q_clamp_attrs(ctx, y->dtype, &j.lo, &j.hi);
  }
  int64_t work = er__tensor_count(x) * (global ? 1 : g->kh * g->kw / (g->sh * g->sw) + 1);
  j.chunks = (int)min64(min64(slots, g->c), work / QOPS_MIN_PER_WORKER > 1 ? work / QOPS_MIN_PER_WORKER : 1);
  size_t es = 1;
  for (int64_t n = 0; n < g->n && st == ER_STATUS_OK; n++) {
    j.x = (const uint8_t *)x->data + n * g->c * g->h * g->w;
    j.y = (uint8_t *)y->data + (size_t)(n * g->c * g->oh * g->ow) * es;
    er__parallel_for(kr->pool, j.chunks, 1, pool_chunk, &j);
  }
  if (cnt != cnt_stack) free(cnt);
  er__aligned_free(owned);
  return st;
}

/* ======================================================================== */
/* QBlockMatMul: block-wise 4-bit weights                                    */
/* ======================================================================== */

/* The weights stay 4-bit: packed once into panels of block_nr columns,
 * two nibbles a byte ([panel][K][nr / 2]), with the block scales and zero
 * points beside them ([panel][block][nr]). A run dequantizes one block of
 * one panel at a time into a small tile (block_size x nr floats, in L1) and
 * multiplies every row of A by it; the weights are never held in float
 * beyond that tile. Each output sums over k in order, whatever the
 * threads, so runs are deterministic. */
#define QB_ROWS 256 /* rows of A per pass over a panel (the accumulator tile) */

typedef struct qb_state {
  const er_qelt_ops *ops;
  int64_t k, n, block, nblocks, panels;
  bool is_signed;
  uint8_t *nib;              /* [panels][K][nr / 2] */
  float *scale, *zp;         /* [panels][nblocks][nr]; zp may be NULL */
  const float *bias;         /* [N] (the constant itself) or NULL */
  int slots;
} qb_state;

static void qb_release(void *state) {
  qb_state *s = state;
  if (!s) return;
  er__aligned_free(s->nib);
  er__aligned_free(s->scale);
  er__aligned_free(s->zp);
  free(s);
}

static bool qb_supports(const er_kernel_info *ki, bool isa_ok) {
  const er_tensor *a = er__ki_in(ki, 0), *b = er__ki_in(ki, 1), *sc = er__ki_in(ki, 2), *z = er__ki_in(ki, 3);
  const er_tensor *bias = er__ki_in(ki, 4);
  if (!isa_ok || !a || a->dtype != ER_DTYPE_FLOAT || !b || !b->data || b->rank != 2) return false;
  if (b->dtype != ER_DTYPE_INT4 && b->dtype != ER_DTYPE_UINT4) return false;
  if (!sc || !sc->data || sc->dtype != ER_DTYPE_FLOAT || (z && !z->data) || (bias && !bias->data)) return false;
  return ki->n_out == 1 && ki->out[0] && ki->out[0]->dtype == ER_DTYPE_FLOAT && a->rank >= 1;
}

static size_t qb_slot_bytes(const qb_state *s) {
  size_t nr = (size_t)s->ops->block_nr;
  return ((size_t)s->block * nr + (size_t)QB_ROWS * nr) * sizeof(float) + 64;
}

static er_status qb_prepare(const er_kernel_info *ki, const er_qelt_ops *ops, void **state_out, size_t *scratch_out) {
  const er_tensor *b = ki->in[1], *sc = ki->in[2], *z = er__ki_in(ki, 3), *bias = er__ki_in(ki, 4);
  er_kctx ctx = er__ki_ctx(ki);
  int64_t bs = 0, tb = 0;
  er__attr_int(&ctx, "block_size", 0, &bs);
  er__attr_int(&ctx, "transB", 0, &tb);
  qb_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a QBlockMatMul kernel");
  const int nr = ops->block_nr;
  s->ops = ops;
  s->block = bs;
  s->k = b->dims[tb ? 1 : 0];
  s->n = b->dims[tb ? 0 : 1];
  s->nblocks = (s->k + bs - 1) / bs;
  s->panels = (s->n + nr - 1) / nr;
  s->is_signed = b->dtype == ER_DTYPE_INT4;
  s->bias = bias ? bias->data : NULL;
  s->slots = er__ki_slots(ki);
  size_t nib_bytes = (size_t)(s->panels * s->k * (nr / 2)), par = (size_t)(s->panels * s->nblocks * nr);
  s->nib = er__aligned_alloc(nib_bytes + 64);
  s->scale = er__aligned_alloc(par * sizeof(float) + 64);
  if (z) s->zp = er__aligned_alloc(par * sizeof(float) + 64);
  if (!s->nib || !s->scale || (z && !s->zp)) {
    qb_release(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "QBlockMatMul '%s': out of memory packing weights", ki->node->name);
  }
  memset(s->nib, 0, nib_bytes);
  memset(s->scale, 0, par * sizeof(float));
  if (s->zp) memset(s->zp, 0, par * sizeof(float));
  const float *sv = sc->data;
  for (int64_t n = 0; n < s->n; n++) {
    int64_t p = n / nr, j = n % nr;
    for (int64_t k = 0; k < s->k; k++) {
      int64_t bi = tb ? n * s->k + k : k * s->n + n;
      uint8_t q = (uint8_t)(er__load_i64(b->data, b->dtype, bi) & 0xf);
      s->nib[(p * s->k + k) * (nr / 2) + j / 2] |= (uint8_t)(q << (j % 2 ? 4 : 0));
    }
    for (int64_t blk = 0; blk < s->nblocks; blk++) {
      int64_t si = tb ? n * s->nblocks + blk : blk * s->n + n;
      s->scale[(p * s->nblocks + blk) * nr + j] = sv[si];
      if (s->zp) s->zp[(p * s->nblocks + blk) * nr + j] = (float)er__load_i64(z->data, z->dtype, si);
    }
  }
  *scratch_out = qb_slot_bytes(s) * (size_t)s->slots;
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct qb_job {
  const qb_state *s;
  const float *a;            /* [m, K] */
  float *y;                  /* [m, N] */
  int64_t m;
  uint8_t *scratch;
  size_t slot;
  int chunks;
} qb_job;

static void qb_chunk(void *arg, int64_t begin, int64_t end) {
  const qb_job *j = arg;
  const qb_state *s = j->s;
  const int nr = s->ops->block_nr;
  for (int64_t c = begin; c < end; c++) {
    float *tile = (float *)(j->scratch + (size_t)c * j->slot), *acc = tile + s->block * nr;
    for (int64_t p = s->panels * c / j->chunks; p < s->panels * (c + 1) / j->chunks; p++) {
      int64_t cols = min64(nr, s->n - p * nr);
      for (int64_t r0 = 0; r0 < j->m; r0 += QB_ROWS) {
        int64_t rows = min64(QB_ROWS, j->m - r0);
        memset(acc, 0, (size_t)(rows * nr) * sizeof *acc);
        for (int64_t blk = 0; blk < s->nblocks; blk++) {
          int64_t k0 = blk * s->block, kn = min64(s->block, s->k - k0);
          const float *zp = s->zp ? s->zp + (p * s->nblocks + blk) * nr : NULL;
          s->ops->block_dequant(s->nib + (p * s->k + k0) * (nr / 2), kn, s->is_signed, zp,
                                s->scale + (p * s->nblocks + blk) * nr, tile);
          for (int64_t r = 0; r < rows; r += 4)
            s->ops->block_fma(j->a + (r0 + r) * s->k + k0, s->k, (int)min64(4, rows - r), tile, kn, acc + r * nr);
        }
        for (int64_t r = 0; r < rows; r++) {
          float *yr = j->y + (r0 + r) * s->n + p * nr;
          const float *ar = acc + r * nr;
          for (int64_t col = 0; col < cols; col++) yr[col] = s->bias ? ar[col] + s->bias[p * nr + col] : ar[col];
        }
      }
    }
  }
}

static er_status qb_run(const er_kernel_run *kr) {
  const qb_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *a = ctx->in[0];
  er_tensor *y = ctx->out[0];
  if (a->rank < 1 || a->dims[a->rank - 1] != s->k || s->k == 0) return er__kr_reference(kr);
  int64_t m = er__tensor_count(a) / s->k;
  if (er__tensor_count(y) != m * s->n) return er__kr_reference(kr);
  if (m == 0 || s->n == 0) return ER_STATUS_OK;
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, qb_slot_bytes(s), &scratch, &slots, &owned));
  int64_t work = m * s->k * s->n;
  qb_job j = {s, a->data, y->data, m, scratch, qb_slot_bytes(s), 1};
  j.chunks = (int)min64(min64(slots, s->panels), work >> 16 > 1 ? work >> 16 : 1);
  er__parallel_for(kr->pool, j.chunks, 1, qb_chunk, &j);
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

static er_status run_scalar_lut(const er_kernel_run *kr) { return lut_run(kr, NULL); }

#define DEFINE_QOPS(SFX, OPS, ISA_OK, ISA)                                                                     \
  static bool q_sup_##SFX(const er_kernel_info *ki) { return quantize_supports(ki, ISA_OK(ki->cpu)); }          \
  static er_status q_run_##SFX(const er_kernel_run *kr) { return quantize_run(kr, &OPS); }                    \
  static const er_cpu_kernel k_q_##SFX = {"q8_quantize__" ISA, "QuantizeLinear", "", q_sup_##SFX, NULL,       \
                                          q_run_##SFX, NULL};                                                 \
  static bool dyq_sup_##SFX(const er_kernel_info *ki) { return dynquant_supports(ki, ISA_OK(ki->cpu)); }        \
  static er_status dyq_run_##SFX(const er_kernel_run *kr) { return dynquant_run(kr, &OPS); }                  \
  static const er_cpu_kernel k_dyq_##SFX = {"q8_dynamic_quantize__" ISA, "DynamicQuantizeLinear", "",           \
                                            dyq_sup_##SFX, NULL, dyq_run_##SFX, NULL};                         \
  static bool dq_sup_##SFX(const er_kernel_info *ki) { return dequantize_supports(ki, ISA_OK(ki->cpu)); }       \
  static er_status dq_run_##SFX(const er_kernel_run *kr) { return dequantize_run(kr, &OPS); }                 \
  static const er_cpu_kernel k_dq_##SFX = {"q8_dequantize__" ISA, "DequantizeLinear", "", dq_sup_##SFX, NULL,  \
                                           dq_run_##SFX, NULL};                                               \
  static bool qbin_sup_##SFX(const er_kernel_info *ki) { return qbinary_supports(ki, ISA_OK(ki->cpu)); }          \
  static er_status qadd_run_##SFX(const er_kernel_run *kr) { return qbinary_run(kr, &OPS, false); }           \
  static er_status qmul_run_##SFX(const er_kernel_run *kr) { return qbinary_run(kr, &OPS, true); }            \
  static const er_cpu_kernel k_qadd_##SFX = {"q8_qadd__" ISA, "QAdd", ER_QFUSED_DOMAIN, qbin_sup_##SFX, NULL,  \
                                             qadd_run_##SFX, NULL};                                           \
  static const er_cpu_kernel k_qmul_##SFX = {"q8_qmul__" ISA, "QMul", ER_QFUSED_DOMAIN, qbin_sup_##SFX, NULL,  \
                                             qmul_run_##SFX, NULL};                                           \
  static bool mp_sup_##SFX(const er_kernel_info *ki) { return pool_supports(ki, false, ISA_OK(ki->cpu)); }      \
  static er_status mp_prep_##SFX(const er_kernel_info *ki, void **st, size_t *sb) {                          \
    return pool_prepare(ki, false, &OPS, st, sb);                                                             \
  }                                                                                                            \
  static const er_cpu_kernel k_mp_##SFX = {"q8_maxpool__" ISA, "MaxPool", "", mp_sup_##SFX, mp_prep_##SFX,     \
                                           pool_run, free};                                                   \
  static bool ap_sup_##SFX(const er_kernel_info *ki) { return pool_supports(ki, true, ISA_OK(ki->cpu)); }       \
  static er_status ap_prep_##SFX(const er_kernel_info *ki, void **st, size_t *sb) {                          \
    return pool_prepare(ki, true, &OPS, st, sb);                                                              \
  }                                                                                                            \
  static const er_cpu_kernel k_ap_##SFX = {"q8_avgpool__" ISA, "QAvgPool", ER_QFUSED_DOMAIN, ap_sup_##SFX,     \
                                           ap_prep_##SFX, pool_run, free};                                    \
  static bool lut_sup_##SFX(const er_kernel_info *ki) { return ISA_OK(ki->cpu) && lut_supports(ki); }           \
  static er_status lut_run_##SFX(const er_kernel_run *kr) { return lut_run(kr, &OPS); }                       \
  static const er_cpu_kernel k_lut_##SFX = {"q8_lut__" ISA, "QLut", ER_QFUSED_DOMAIN, lut_sup_##SFX, NULL,     \
                                            lut_run_##SFX, NULL};                                             \
  static bool qb_sup_##SFX(const er_kernel_info *ki) { return qb_supports(ki, ISA_OK(ki->cpu)); }               \
  static er_status qb_prep_##SFX(const er_kernel_info *ki, void **st, size_t *sb) {                          \
    return qb_prepare(ki, &OPS, st, sb);                                                                       \
  }                                                                                                            \
  static const er_cpu_kernel k_qb_##SFX = {"f32_q4matmul__" ISA, "QBlockMatMul", ER_QFUSED_DOMAIN, qb_sup_##SFX, \
                                           qb_prep_##SFX, qb_run, qb_release};

#if defined(__x86_64__) || defined(__i386__)
DEFINE_QOPS(avx512, er__qelt_avx512, er__cpu_has_avx512, "avx512")
DEFINE_QOPS(avx2, er__qelt_avx2, er__cpu_has_avx2, "avx2")
#endif

static const er_cpu_kernel k_lut = {"q8_lut__scalar", "QLut", ER_QFUSED_DOMAIN, lut_supports, NULL, run_scalar_lut,
                                    NULL};

const er_cpu_kernel *const er__kernels_qops[] = {
#if defined(__x86_64__) || defined(__i386__)
    &k_dyq_avx512, &k_dyq_avx2,
    &k_q_avx512, &k_dq_avx512, &k_qadd_avx512, &k_qmul_avx512, &k_mp_avx512, &k_ap_avx512, &k_qb_avx512, &k_lut_avx512,
    &k_q_avx2,   &k_dq_avx2,   &k_qadd_avx2,   &k_qmul_avx2,   &k_mp_avx2,   &k_ap_avx2,   &k_qb_avx2,   &k_lut_avx2,
#endif
    &k_lut,
    NULL,
};
