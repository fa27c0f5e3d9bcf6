/* qfused.c - reference kernels of edgerun's integer operators (see
 * qfused.h). Where an op extends a standard one (QConv extends
 * ConvInteger, QMatMul extends MatMulInteger, QAvgPool extends
 * AveragePool), the standard op's own check and reference kernel run on a
 * shadow node, and only the epilogue is written here; so these ops are
 * exactly as correct as the ones they build on, and the optimized kernels
 * are tested against them. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/op-groups.h"
#include "ops/qfused.h"

static const er_dtype q8_types[] = {ER_DTYPE_UINT8, ER_DTYPE_INT8, ER_DTYPE_UNDEFINED};
static const er_dtype f32_only[] = {ER_DTYPE_FLOAT, ER_DTYPE_UNDEFINED};
static const er_dtype i32_only[] = {ER_DTYPE_INT32, ER_DTYPE_UNDEFINED};
static const er_dtype block_types[] = {ER_DTYPE_INT4, ER_DTYPE_UINT4, ER_DTYPE_INT8, ER_DTYPE_UINT8,
                                       ER_DTYPE_UNDEFINED};

/* ======================================================================== */
/* Shared checks                                                             */
/* ======================================================================== */

er_status er__q_clamp_attrs(const er_kctx *ctx, er_dtype out, int32_t *lo, int32_t *hi) {
  int32_t tlo, thi;
  int64_t a, b;
  er__q_range(out, &tlo, &thi);
  ER_CHECK(er__attr_int(ctx, "qmin", tlo, &a));
  ER_CHECK(er__attr_int(ctx, "qmax", thi, &b));
  if (a < tlo || b > thi || a > b)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "qmin %lld and qmax %lld must satisfy %d <= qmin <= qmax <= %d (the range of %s)",
                        (long long)a, (long long)b, tlo, thi, er_dtype_name(out));
  *lo = (int32_t)a;
  *hi = (int32_t)b;
  return ER_STATUS_OK;
}

/* Input i, when present with a known shape, holds one value. */
static er_status require_scalar(const er_kctx *ctx, int i, const char *name) {
  const er_tensor *t = er__in(ctx, i);
  if (!t || !er__tensor_shape_known(t) || er__tensor_count(t) == 1) return ER_STATUS_OK;
  char buf[160];
  return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s has shape %s; it must hold one value", name,
                      er__shape_str(t, buf, sizeof buf));
}

/* Input i, when present with a known shape, holds one value or is 1-D of
 * `len` values (len < 0: unknown). */
static er_status require_vec(const er_kctx *ctx, int i, int64_t len, const char *name) {
  const er_tensor *t = er__in(ctx, i);
  if (!t || !er__tensor_shape_known(t)) return ER_STATUS_OK;
  int64_t n = er__tensor_count(t);
  if (n == 1 || (t->rank == 1 && (len < 0 || n == len))) return ER_STATUS_OK;
  char buf[160];
  return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s has shape %s; it must hold one value or %lld (one per channel)",
                      name, er__shape_str(t, buf, sizeof buf), (long long)len);
}

/* Element i of a per-channel parameter of one or `len` values. */
static double param(const er_tensor *t, int64_t i) {
  return er__load_f64(t->data, t->dtype, er__tensor_count(t) == 1 ? 0 : i);
}

/* A standard op run on a shadow of the node: same attributes, another op
 * type, the given inputs. */
typedef struct shadow {
  er_node node;
  er_tensor *in[8];
  er_kctx ctx;
} shadow;

static er_status make_shadow(const er_kctx *ctx, const char *op_type, int version, er_tensor *const *in, int n_in,
                             shadow *sh) {
  sh->node = *ctx->node;
  sh->node.op_type = op_type;
  sh->node.domain = "";
  sh->node.version = version;
  sh->node.n_inputs = n_in;
  sh->node.n_outputs = 1;
  sh->node.op = er__op_find("", op_type, version);
  if (!sh->node.op) return er__op_error(ctx, ER_STATUS_INTERNAL, "no %s version %d to build on", op_type, version);
  for (int i = 0; i < n_in; i++) sh->in[i] = in[i];
  sh->ctx = *ctx;
  sh->ctx.node = &sh->node;
  sh->ctx.n_in = n_in;
  sh->ctx.in = sh->in;
  sh->ctx.n_out = 1;
  return ER_STATUS_OK;
}

/* Runs the shadow's check (and, when run is set, allocates its output and
 * runs its reference kernel). `out` receives the result; the caller
 * releases it. */
static er_status shadow_eval(shadow *sh, er_tensor *out, bool run) {
  er_tensor *outp[1] = {out};
  sh->ctx.out = outp;
  er__tensor_set(out, ER_DTYPE_UNDEFINED, -1, NULL);
  ER_CHECK(sh->node.op->check(&sh->ctx));
  if (!run) return ER_STATUS_OK;
  ER_CHECK(er__tensor_alloc(out, 0));
  er_status st = sh->node.op->run(&sh->ctx);
  if (st != ER_STATUS_OK) er__tensor_release(out);
  return st;
}

/* ======================================================================== */
/* QConv and QMatMul                                                         */
/* ======================================================================== */

/* Inputs: 0 X, 1 x_zp, 2 W, 3 w_zp, 4 bias?, 5 mult, 6 offset, 7 y_zp?. */
enum { QI_X = 0, QI_XZP, QI_W, QI_WZP, QI_BIAS, QI_MULT, QI_OFF, QI_YZP };

/* The integer product of QConv (ConvInteger) or QMatMul (MatMulInteger) on
 * a shadow node. */
static er_status qgemm_shadow(const er_kctx *ctx, bool conv, shadow *sh) {
  /* ConvInteger / MatMulInteger take (x, w, x_zp, w_zp). */
  er_tensor *in[4] = {ctx->in[QI_X], ctx->in[QI_W], ctx->in[QI_XZP], ctx->in[QI_WZP]};
  return make_shadow(ctx, conv ? "ConvInteger" : "MatMulInteger", 10, in, 4, sh);
}

static er_status qgemm_check(er_kctx *ctx, bool conv) {
  ER_CHECK(er__require_type(ctx, QI_X, q8_types));
  ER_CHECK(er__require_same_type(ctx, QI_X, QI_XZP));
  ER_CHECK(er__require_type(ctx, QI_W, q8_types));
  ER_CHECK(er__require_same_type(ctx, QI_W, QI_WZP));
  if (er__in(ctx, QI_BIAS)) ER_CHECK(er__require_type(ctx, QI_BIAS, i32_only));
  ER_CHECK(er__require_type(ctx, QI_MULT, f32_only));
  ER_CHECK(er__require_type(ctx, QI_OFF, f32_only));
  if (er__in(ctx, QI_YZP)) ER_CHECK(er__require_type(ctx, QI_YZP, q8_types));
  ER_CHECK(require_scalar(ctx, QI_XZP, "x_zero_point"));
  if (er__in(ctx, QI_YZP)) ER_CHECK(require_scalar(ctx, QI_YZP, "y_zero_point"));
  const er_tensor *w = ctx->in[QI_W];
  if (!conv && w->rank >= 0 && w->rank != 2) {
    char buf[160];
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "B has shape %s; it must be 2-D [K, N]",
                        er__shape_str(w, buf, sizeof buf));
  }
  int64_t ch = w->rank >= 1 ? w->dims[conv ? 0 : w->rank - 1] : -1;
  ER_CHECK(require_vec(ctx, QI_WZP, ch, conv ? "w_zero_point" : "b_zero_point"));
  ER_CHECK(require_vec(ctx, QI_BIAS, ch, "bias"));
  ER_CHECK(require_vec(ctx, QI_MULT, ch, "multiplier"));
  ER_CHECK(require_vec(ctx, QI_OFF, ch, "offset"));
  const er_tensor *bias = er__in(ctx, QI_BIAS);
  if (bias && bias->rank >= 0 && bias->rank != 1) ER_CHECK(require_vec(ctx, QI_BIAS, -2, "bias"));
  er_dtype out_t = er__in(ctx, QI_YZP) ? ctx->in[QI_YZP]->dtype : ER_DTYPE_FLOAT;
  if (out_t != ER_DTYPE_FLOAT && out_t != ER_DTYPE_UNDEFINED) {
    int32_t lo, hi;
    ER_CHECK(er__q_clamp_attrs(ctx, out_t, &lo, &hi));
  }
  shadow sh;
  er_tensor acc;
  ER_CHECK(qgemm_shadow(ctx, conv, &sh));
  ER_CHECK(shadow_eval(&sh, &acc, false));
  er__set_output(ctx, 0, out_t, acc.rank, acc.dims);
  return ER_STATUS_OK;
}

static er_status qgemm_run(er_kctx *ctx, bool conv) {
  shadow sh;
  er_tensor acc;
  ER_CHECK(qgemm_shadow(ctx, conv, &sh));
  ER_CHECK(shadow_eval(&sh, &acc, true));
  const er_tensor *bias = er__in(ctx, QI_BIAS), *mult = ctx->in[QI_MULT], *off = ctx->in[QI_OFF];
  const er_tensor *yzp = er__in(ctx, QI_YZP);
  er_tensor *y = ctx->out[0];
  const int32_t *a = acc.data; /* [N, M, P] (conv) or [..., rows, N] (matmul) */
  int64_t count = er__count(y);
  /* The channel of element i: conv [N, M, spatial...] -> (i / P) % M;
   * matmul [..., N] -> i % N. */
  int64_t ch = conv ? y->dims[1] : (y->rank >= 1 ? y->dims[y->rank - 1] : 1), inner = 1;
  if (conv)
    for (int d = 2; d < y->rank; d++) inner *= y->dims[d];
  int32_t lo = 0, hi = 0, zp = 0;
  float clip_lo = -INFINITY, clip_hi = INFINITY;
  er_status st = ER_STATUS_OK;
  if (yzp) {
    st = er__q_clamp_attrs(ctx, y->dtype, &lo, &hi);
    zp = (int32_t)er__load_i64(yzp->data, yzp->dtype, 0);
  } else {
    st = er__attr_float(ctx, "clip_min", -INFINITY, &clip_lo);
    if (st == ER_STATUS_OK) st = er__attr_float(ctx, "clip_max", INFINITY, &clip_hi);
  }
  for (int64_t i = 0; i < count && st == ER_STATUS_OK; i++) {
    int64_t c = conv ? (inner ? (i / inner) % ch : 0) : (ch ? i % ch : 0);
    /* int32 wrap, like QLinearConv's accumulator */
    int32_t v = (int32_t)((uint32_t)a[i] + (uint32_t)(bias ? (int32_t)param(bias, c) : 0));
    float m = (float)param(mult, c), o = (float)param(off, c);
    if (yzp) {
      er__store_i64(y->data, y->dtype, i, er__q_requant(v, m, o, zp, lo, hi));
    } else {
      float f = fmaf((float)v, m, o);
      ((float *)y->data)[i] = f < clip_lo ? clip_lo : f > clip_hi ? clip_hi : f;
    }
  }
  er__tensor_release(&acc);
  return st;
}

static er_status qconv_check(er_kctx *ctx) { return qgemm_check(ctx, true); }
static er_status qconv_run(er_kctx *ctx) { return qgemm_run(ctx, true); }
static er_status qmatmul_check(er_kctx *ctx) { return qgemm_check(ctx, false); }
static er_status qmatmul_run(er_kctx *ctx) { return qgemm_run(ctx, false); }

static const er_op_def op_qconv = {
    .name = "QConv", .domain = ER_QFUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 7, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .check = qconv_check, .run = qconv_run,
};

static const er_op_def op_qmatmul = {
    .name = "QMatMul", .domain = ER_QFUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 7, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .check = qmatmul_check, .run = qmatmul_run,
};

/* ======================================================================== */
/* QAdd and QMul                                                             */
/* ======================================================================== */

static er_status qbinary_check(er_kctx *ctx) {
  ER_CHECK(er__require_type(ctx, 0, q8_types));
  ER_CHECK(er__require_type(ctx, 3, q8_types));
  ER_CHECK(er__require_same_type(ctx, 0, 2));
  ER_CHECK(er__require_same_type(ctx, 3, 5));
  ER_CHECK(er__require_type(ctx, 7, q8_types));
  static const int scales[] = {1, 4, 6};
  static const char *const names[] = {"a_scale", "b_scale", "y_scale"};
  for (int k = 0; k < 3; k++) {
    ER_CHECK(er__require_type(ctx, scales[k], f32_only));
    ER_CHECK(require_scalar(ctx, scales[k], names[k]));
  }
  ER_CHECK(require_scalar(ctx, 2, "a_zero_point"));
  ER_CHECK(require_scalar(ctx, 5, "b_zero_point"));
  ER_CHECK(require_scalar(ctx, 7, "y_zero_point"));
  er_dtype out_t = ctx->in[7]->dtype;
  if (out_t != ER_DTYPE_UNDEFINED) {
    int32_t lo, hi;
    ER_CHECK(er__q_clamp_attrs(ctx, out_t, &lo, &hi));
  }
  const er_tensor *shapes[2] = {ctx->in[0], ctx->in[3]};
  er_tensor out;
  er__tensor_set(&out, out_t, -1, NULL);
  ER_CHECK(er__broadcast_shapes(ctx, 2, shapes, &out));
  er__set_output(ctx, 0, out_t, out.rank, out.dims);
  return ER_STATUS_OK;
}

static float scalar_f(const er_tensor *t) { return ((const float *)t->data)[0]; }
static int32_t scalar_i(const er_tensor *t) { return (int32_t)er__load_i64(t->data, t->dtype, 0); }

static er_status qbinary_run(er_kctx *ctx, bool mul) {
  const er_tensor *a = ctx->in[0], *b = ctx->in[3];
  er_tensor *y = ctx->out[0];
  float as = scalar_f(ctx->in[1]), bs = scalar_f(ctx->in[4]), ys = scalar_f(ctx->in[6]);
  int32_t az = scalar_i(ctx->in[2]), bz = scalar_i(ctx->in[5]), yz = scalar_i(ctx->in[7]);
  int32_t lo, hi;
  ER_CHECK(er__q_clamp_attrs(ctx, y->dtype, &lo, &hi));
  const er_tensor *ins[2] = {a, b};
  er_bcast it;
  er__bcast_init(&it, 2, ins, y);
  int64_t n = er__count(y);
  for (int64_t i = 0; i < n; i++, er__bcast_next(&it)) {
    /* DequantizeLinear's float product, the float Add/Mul, and
     * QuantizeLinear's float division: the unfused graph's arithmetic. */
    float fa = (float)(er__load_i64(a->data, a->dtype, it.off[0]) - az) * as;
    float fb = (float)(er__load_i64(b->data, b->dtype, it.off[1]) - bz) * bs;
    float s = mul ? fa * fb : fa + fb;
    er__store_i64(y->data, y->dtype, i, er__q_clamp(er__q_rhe(s / ys) + yz, lo, hi));
  }
  return ER_STATUS_OK;
}

static er_status qadd_run(er_kctx *ctx) { return qbinary_run(ctx, false); }
static er_status qmul_run(er_kctx *ctx) { return qbinary_run(ctx, true); }

static const er_op_def op_qadd = {
    .name = "QAdd", .domain = ER_QFUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .check = qbinary_check, .run = qadd_run,
};

static const er_op_def op_qmul = {
    .name = "QMul", .domain = ER_QFUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .check = qbinary_check, .run = qmul_run,
};

/* ======================================================================== */
/* QLut                                                                      */
/* ======================================================================== */

static er_status qlut_check(er_kctx *ctx) {
  ER_CHECK(er__require_type(ctx, 0, q8_types));
  ER_CHECK(er__require_type(ctx, 1, q8_types));
  const er_tensor *x = ctx->in[0], *t = ctx->in[1];
  char buf[160], xb[160];
  if (er__tensor_shape_known(t) && !(t->rank == 1 && t->dims[0] == 256) && !(t->rank == 2 && t->dims[1] == 256))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "table has shape %s; it must be [256] or [C, 256]",
                        er__shape_str(t, buf, sizeof buf));
  if (t->rank == 2 && x->rank >= 0 && (x->rank < 2 || (x->dims[1] >= 0 && t->dims[0] >= 0 && x->dims[1] != t->dims[0])))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "per-channel table %s does not match X %s (channels on axis 1)",
                        er__shape_str(t, buf, sizeof buf), er__shape_str(x, xb, sizeof xb));
  er__set_output(ctx, 0, t->dtype, x->rank, x->dims);
  return ER_STATUS_OK;
}

static er_status qlut_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *t = ctx->in[1];
  const uint8_t *table = t->data; /* [256] or [C, 256] */
  uint8_t *y = ctx->out[0]->data;
  const uint8_t *xv = x->data;
  int64_t n = er__count(x);
  uint8_t flip = x->dtype == ER_DTYPE_INT8 ? 0x80 : 0; /* int8 v indexes v + 128 */
  /* Per channel: element i is in channel (i / inner) % C. */
  int64_t c_count = t->rank == 2 ? t->dims[0] : 1, inner = 1;
  for (int d = 2; d < x->rank && c_count > 1; d++) inner *= x->dims[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t c = c_count > 1 ? (i / inner) % c_count : 0;
    y[i] = table[c * 256 + (uint8_t)(xv[i] ^ flip)];
  }
  return ER_STATUS_OK;
}

static const er_op_def op_qlut = {
    .name = "QLut", .domain = ER_QFUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = qlut_check, .run = qlut_run,
};

/* ======================================================================== */
/* QAvgPool                                                                  */
/* ======================================================================== */

static er_status qavgpool_global(const er_kctx *ctx, bool *global) {
  int64_t v;
  ER_CHECK(er__attr_int(ctx, "global", 0, &v));
  if (v != 0 && v != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "global %lld must be 0 or 1", (long long)v);
  *global = v != 0;
  return ER_STATUS_OK;
}

/* The float average pool of (x - x_zp) on a shadow AveragePool or
 * GlobalAveragePool; the input tensor `xf` is float32 of x's shape. */
static er_status qavgpool_shadow(const er_kctx *ctx, er_tensor *xf, shadow *sh) {
  bool global = false;
  ER_CHECK(qavgpool_global(ctx, &global));
  er_tensor *in[1] = {xf};
  return make_shadow(ctx, global ? "GlobalAveragePool" : "AveragePool", 22, in, 1, sh);
}

static er_status qavgpool_check(er_kctx *ctx) {
  ER_CHECK(er__require_type(ctx, 0, q8_types));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  ER_CHECK(er__require_type(ctx, 2, f32_only));
  ER_CHECK(er__require_type(ctx, 3, q8_types));
  ER_CHECK(require_scalar(ctx, 1, "x_zero_point"));
  ER_CHECK(require_scalar(ctx, 2, "multiplier"));
  ER_CHECK(require_scalar(ctx, 3, "y_zero_point"));
  er_dtype out_t = ctx->in[3]->dtype;
  if (out_t != ER_DTYPE_UNDEFINED) {
    int32_t lo, hi;
    ER_CHECK(er__q_clamp_attrs(ctx, out_t, &lo, &hi));
  }
  er_tensor xf = *ctx->in[0], avg;
  xf.dtype = ER_DTYPE_FLOAT;
  xf.data = NULL;
  xf.flags = 0;
  shadow sh;
  ER_CHECK(qavgpool_shadow(ctx, &xf, &sh));
  ER_CHECK(shadow_eval(&sh, &avg, false));
  er__set_output(ctx, 0, out_t, avg.rank, avg.dims);
  return ER_STATUS_OK;
}

static er_status qavgpool_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int32_t xz = scalar_i(ctx->in[1]), yz = scalar_i(ctx->in[3]);
  float mult = scalar_f(ctx->in[2]);
  int32_t lo, hi;
  ER_CHECK(er__q_clamp_attrs(ctx, y->dtype, &lo, &hi));
  er_tensor xf, avg;
  er__tensor_set(&xf, ER_DTYPE_FLOAT, x->rank, x->dims);
  ER_CHECK(er__tensor_alloc(&xf, 0));
  int64_t n = er__count(x);
  for (int64_t i = 0; i < n; i++) ((float *)xf.data)[i] = (float)(er__load_i64(x->data, x->dtype, i) - xz);
  shadow sh;
  er_status st = qavgpool_shadow(ctx, &xf, &sh);
  if (st == ER_STATUS_OK) st = shadow_eval(&sh, &avg, true);
  if (st == ER_STATUS_OK) {
    int64_t m = er__count(y);
    for (int64_t i = 0; i < m; i++)
      er__store_i64(y->data, y->dtype, i, er__q_clamp(er__q_rhe(((const float *)avg.data)[i] * mult) + yz, lo, hi));
    er__tensor_release(&avg);
  }
  er__tensor_release(&xf);
  return st;
}

static const er_op_def op_qavgpool = {
    .name = "QAvgPool", .domain = ER_QFUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 4, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .check = qavgpool_check, .run = qavgpool_run,
};

/* ======================================================================== */
/* QBlockMatMul                                                              */
/* ======================================================================== */

typedef struct block_geom {
  int64_t k, n, blocks, block;
  bool trans;
} block_geom;

/* Validates B, scales and zero points against block_size and transB. */
static er_status block_layout(const er_kctx *ctx, block_geom *g) {
  const er_tensor *b = ctx->in[1], *s = ctx->in[2], *z = er__in(ctx, 3);
  int64_t bs, tb;
  char sb[160], ss[160];
  ER_CHECK(er__attr_int(ctx, "block_size", 0, &bs));
  ER_CHECK(er__attr_int(ctx, "transB", 0, &tb));
  if (bs < 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "block_size %lld must be >= 1", (long long)bs);
  if (tb != 0 && tb != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "transB %lld must be 0 or 1", (long long)tb);
  memset(g, 0, sizeof *g);
  g->block = bs;
  g->trans = tb != 0;
  g->k = g->n = g->blocks = -1;
  if (b->rank >= 0 && b->rank != 2)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "B has shape %s; it must be 2-D", er__shape_str(b, sb, sizeof sb));
  if (b->rank < 0) return ER_STATUS_OK;
  g->k = b->dims[g->trans ? 1 : 0];
  g->n = b->dims[g->trans ? 0 : 1];
  if (g->k >= 0) g->blocks = (g->k + bs - 1) / bs;
  if (s->rank >= 0) {
    int64_t want0 = g->trans ? g->n : g->blocks, want1 = g->trans ? g->blocks : g->n;
    if (s->rank != 2 || (want0 >= 0 && s->dims[0] >= 0 && s->dims[0] != want0) ||
        (want1 >= 0 && s->dims[1] >= 0 && s->dims[1] != want1))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "scales have shape %s but B %s with block_size %lld needs [%lld, %lld]",
                          er__shape_str(s, ss, sizeof ss), er__shape_str(b, sb, sizeof sb), (long long)bs,
                          (long long)want0, (long long)want1);
  }
  if (z && z->rank >= 0 && s->rank >= 0) {
    bool same = z->rank == s->rank;
    for (int d = 0; same && d < z->rank; d++)
      if (z->dims[d] >= 0 && s->dims[d] >= 0 && z->dims[d] != s->dims[d]) same = false;
    if (!same)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "zero points %s do not match scales %s",
                          er__shape_str(z, sb, sizeof sb), er__shape_str(s, ss, sizeof ss));
  }
  return ER_STATUS_OK;
}

static er_status qblock_shadow(const er_kctx *ctx, const block_geom *g, er_tensor *bf, shadow *sh) {
  int64_t dims[2] = {g->k, g->n};
  er__tensor_set(bf, ER_DTYPE_FLOAT, ctx->in[1]->rank < 0 ? -1 : 2, dims);
  er_tensor *in[2] = {ctx->in[0], bf};
  return make_shadow(ctx, "MatMul", 13, in, 2, sh);
}

static er_status qblock_check(er_kctx *ctx) {
  ER_CHECK(er__require_type(ctx, 0, f32_only));
  ER_CHECK(er__require_type(ctx, 1, block_types));
  ER_CHECK(er__require_type(ctx, 2, f32_only));
  if (er__in(ctx, 3)) ER_CHECK(er__require_same_type(ctx, 1, 3));
  block_geom g;
  ER_CHECK(block_layout(ctx, &g));
  if (er__in(ctx, 4)) {
    ER_CHECK(er__require_type(ctx, 4, f32_only));
    const er_tensor *bias = ctx->in[4];
    if (bias->rank >= 0 && (bias->rank != 1 || (g.n >= 0 && bias->dims[0] >= 0 && bias->dims[0] != g.n)))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "bias must be 1-D of N = %lld values", (long long)g.n);
  }
  er_tensor bf, y;
  shadow sh;
  ER_CHECK(qblock_shadow(ctx, &g, &bf, &sh));
  ER_CHECK(shadow_eval(&sh, &y, false));
  er__set_output(ctx, 0, ER_DTYPE_FLOAT, y.rank, y.dims);
  return ER_STATUS_OK;
}

static er_status qblock_run(er_kctx *ctx) {
  const er_tensor *b = ctx->in[1], *s = ctx->in[2], *z = er__in(ctx, 3), *bias = er__in(ctx, 4);
  block_geom g;
  ER_CHECK(block_layout(ctx, &g));
  er_tensor bf, y;
  shadow sh;
  ER_CHECK(qblock_shadow(ctx, &g, &bf, &sh));
  ER_CHECK(er__tensor_alloc(&bf, 0));
  float *w = bf.data; /* [K, N] */
  const float *sv = s->data;
  for (int64_t k = 0; k < g.k; k++)
    for (int64_t n = 0; n < g.n; n++) {
      int64_t bi = g.trans ? n * g.k + k : k * g.n + n;
      int64_t si = g.trans ? n * g.blocks + k / g.block : (k / g.block) * g.n + n;
      int64_t q = er__load_i64(b->data, b->dtype, bi) - (z ? er__load_i64(z->data, z->dtype, si) : 0);
      /* DequantizeLinear's float product */
      w[k * g.n + n] = (float)q * sv[si];
    }
  er_status st = shadow_eval(&sh, &y, true);
  if (st == ER_STATUS_OK) {
    float *out = ctx->out[0]->data;
    int64_t cnt = er__count(ctx->out[0]);
    const float *yv = y.data;
    const float *bv = bias ? bias->data : NULL;
    for (int64_t i = 0; i < cnt; i++) out[i] = bv ? yv[i] + bv[g.n ? i % g.n : 0] : yv[i];
    er__tensor_release(&y);
  }
  er__tensor_release(&bf);
  return st;
}

static const er_op_def op_qblock_matmul = {
    .name = "QBlockMatMul", .domain = ER_QFUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 3, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .check = qblock_check, .run = qblock_run,
};

const er_op_def *const er__ops_qfused[] = {
    &op_qconv, &op_qmatmul, &op_qadd, &op_qmul, &op_qlut, &op_qavgpool, &op_qblock_matmul, NULL,
};
