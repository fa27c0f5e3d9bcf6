/* fused.c - reference kernels of edgerun's fused operators (see fused.h).
 * Each runs the standard op's own check and reference kernel on a shadow
 * node (same attributes, the standard op type and its newest version), then
 * adds the residual or bias and applies the activation in double. So the
 * fused ops are exactly as correct as the ops they replace, and optimized
 * kernels for them are tested against this. */
#include <stdio.h>

#include "ops/fused.h"
#include "ops/op-groups.h"

static const char *const act_names[ER_ACT_COUNT_] = {
    "", "Relu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu", "Silu",
    "Gelu", "GeluTanh",
};
static const int act_param_count[ER_ACT_COUNT_] = {0, 0, 2, 0, 0, 2, 0, 1, 0, 0, 0};

const char *er__act_name(er_act kind) {
  return (unsigned)kind < ER_ACT_COUNT_ ? act_names[kind] : "?";
}

er_status er__act_from_node(const er_kctx *ctx, er_activation *out) {
  const char *name;
  const float *params;
  int64_t n;
  memset(out, 0, sizeof *out);
  ER_CHECK(er__attr_string(ctx, "activation", "", &name));
  ER_CHECK(er__attr_floats(ctx, "activation_params", &params, &n));
  int kind = -1;
  for (int k = 0; k < ER_ACT_COUNT_; k++)
    if (strcmp(name, act_names[k]) == 0) kind = k;
  if (kind < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "activation '%s' is not one edgerun fuses", name);
  if (n < 0) n = 0;
  if (n != act_param_count[kind])
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "activation %s takes %d parameters, got %lld",
                        name, act_param_count[kind], (long long)n);
  out->kind = (er_act)kind;
  for (int64_t i = 0; i < n; i++) out->p[i] = params[i];
  return ER_STATUS_OK;
}

/* The standard op a fused op extends, and the version its shadow runs as. */
typedef struct shadow {
  er_node node;
  const er_op_def *op;
} shadow;

static er_status make_shadow(const er_kctx *ctx, const char *op_type, int version, int n_inputs, shadow *sh) {
  sh->node = *ctx->node;
  sh->node.op_type = op_type;
  sh->node.domain = "";
  sh->node.version = version;
  sh->node.n_inputs = n_inputs < ctx->node->n_inputs ? n_inputs : ctx->node->n_inputs;
  sh->op = er__op_find("", op_type, version);
  if (!sh->op) return er__op_error(ctx, ER_STATUS_INTERNAL, "no %s version %d to fuse into", op_type, version);
  sh->node.op = sh->op;
  return ER_STATUS_OK;
}

static er_kctx shadow_ctx(const er_kctx *ctx, const shadow *sh) {
  er_kctx c = *ctx;
  c.node = &sh->node;
  c.n_in = sh->node.n_inputs;
  return c;
}

/* y = act(y + extra), where extra (may be NULL) has y's shape (mode
 * "same") or is 1-D over y's last dim (mode "row"). */
static void finish(er_tensor *y, const er_tensor *extra, bool row, const er_activation *act) {
  if (!extra && act->kind == ER_ACT_NONE) return;
  int64_t n = er__count(y);
  int64_t cols = y->rank > 0 ? y->dims[y->rank - 1] : 1;
  for (int64_t i = 0; i < n; i++) {
    double v = er__load_f64(y->data, y->dtype, i);
    if (extra) v += er__load_f64(extra->data, extra->dtype, row ? (cols ? i % cols : 0) : i);
    er__store_f64(y->data, y->dtype, i, er__act_apply(act, v));
  }
}

static er_status check_extra(const er_kctx *ctx, int i, bool row) {
  const er_tensor *e = er__in(ctx, i), *y = ctx->out[0];
  if (!e) return ER_STATUS_OK;
  ER_CHECK(er__require_same_type(ctx, 0, i));
  if (e->rank < 0 || y->rank < 0) return ER_STATUS_OK;
  char a[160], b[160];
  if (row) {
    if (e->rank != 1 || (y->rank > 0 && e->dims[0] >= 0 && y->dims[y->rank - 1] >= 0 &&
                         e->dims[0] != y->dims[y->rank - 1]))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "bias %s does not match the output's last dim of %s",
                          er__shape_str(e, a, sizeof a), er__shape_str(y, b, sizeof b));
    return ER_STATUS_OK;
  }
  bool same = e->rank == y->rank;
  for (int d = 0; same && d < e->rank; d++)
    if (e->dims[d] >= 0 && y->dims[d] >= 0 && e->dims[d] != y->dims[d]) same = false;
  if (!same)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "residual %s does not match the output %s",
                        er__shape_str(e, a, sizeof a), er__shape_str(y, b, sizeof b));
  return ER_STATUS_OK;
}

/* ---- FusedConv ------------------------------------------------------------- */

static er_status fused_conv_check(er_kctx *ctx) {
  shadow sh;
  er_activation act;
  ER_CHECK(er__act_from_node(ctx, &act));
  ER_CHECK(make_shadow(ctx, "Conv", 22, 3, &sh));
  er_kctx c = shadow_ctx(ctx, &sh);
  ER_CHECK(sh.op->check(&c));
  return check_extra(ctx, 3, false);
}

static er_status fused_conv_run(er_kctx *ctx) {
  shadow sh;
  er_activation act;
  ER_CHECK(er__act_from_node(ctx, &act));
  ER_CHECK(make_shadow(ctx, "Conv", 22, 3, &sh));
  er_kctx c = shadow_ctx(ctx, &sh);
  ER_CHECK(sh.op->run(&c));
  finish(ctx->out[0], er__in(ctx, 3), false, &act);
  return ER_STATUS_OK;
}

static const er_op_def op_fused_conv = {
    .name = "FusedConv", .domain = ER_FUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .check = fused_conv_check, .run = fused_conv_run,
};

/* ---- FusedGemm ------------------------------------------------------------- */

static er_status fused_gemm_check(er_kctx *ctx) {
  shadow sh;
  er_activation act;
  ER_CHECK(er__act_from_node(ctx, &act));
  ER_CHECK(make_shadow(ctx, "Gemm", 13, 3, &sh));
  er_kctx c = shadow_ctx(ctx, &sh);
  return sh.op->check(&c);
}

static er_status fused_gemm_run(er_kctx *ctx) {
  shadow sh;
  er_activation act;
  ER_CHECK(er__act_from_node(ctx, &act));
  ER_CHECK(make_shadow(ctx, "Gemm", 13, 3, &sh));
  er_kctx c = shadow_ctx(ctx, &sh);
  ER_CHECK(sh.op->run(&c));
  if (act.kind != ER_ACT_NONE) finish(ctx->out[0], NULL, false, &act);
  return ER_STATUS_OK;
}

static const er_op_def op_fused_gemm = {
    .name = "FusedGemm", .domain = ER_FUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = fused_gemm_check, .run = fused_gemm_run,
};

/* ---- FusedMatMul ------------------------------------------------------------- */

static er_status fused_matmul_check(er_kctx *ctx) {
  shadow sh;
  er_activation act;
  ER_CHECK(er__act_from_node(ctx, &act));
  ER_CHECK(make_shadow(ctx, "MatMul", 13, 2, &sh));
  er_kctx c = shadow_ctx(ctx, &sh);
  ER_CHECK(sh.op->check(&c));
  return check_extra(ctx, 2, true);
}

static er_status fused_matmul_run(er_kctx *ctx) {
  shadow sh;
  er_activation act;
  ER_CHECK(er__act_from_node(ctx, &act));
  ER_CHECK(make_shadow(ctx, "MatMul", 13, 2, &sh));
  er_kctx c = shadow_ctx(ctx, &sh);
  ER_CHECK(sh.op->run(&c));
  finish(ctx->out[0], er__in(ctx, 2), true, &act);
  return ER_STATUS_OK;
}

static const er_op_def op_fused_matmul = {
    .name = "FusedMatMul", .domain = ER_FUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = fused_matmul_check, .run = fused_matmul_run,
};

const er_op_def *const er__ops_fused[] = {
    &op_fused_conv,
    &op_fused_gemm,
    &op_fused_matmul,
    NULL,
};
