/* blocked.c - operators of the channel-blocked layout (domain com.edgerun).
 *
 * A blocked tensor holds a 4-D float32 tensor [N, C, H, W] as
 * [N, ceil(C / B), H, W, B]: the B channels of one block lie side by side
 * for every pixel, so one vector of B lanes is B channels of one pixel.
 * Convolutions and pools then run with every vector full whatever the image
 * size (a 7x7 map in NCHW fills vectors badly and its depthwise taps need
 * shuffles), and a chain of them never converts back. The session's layout
 * pass (src/graph/passes-blocked.c) makes these ops from Conv, FusedConv and
 * pools on the CPU's vector width; standard elementwise ops and Concat run
 * on blocked tensors unchanged, as on any 5-D tensor.
 *
 * Channels past C in the last block are padding. ToBlocked and the
 * convolutions write zeros there; other ops may leave any finite value
 * (a Sigmoid makes them 0.5), and every reader ignores them: a convolution
 * gives them zero weights, FromBlocked drops them.
 *
 *   ToBlocked(x [N,C,H,W])            block           -> [N,CB,H,W,B]
 *   FromBlocked(x [N,CB,H,W,B])       block, channels -> [N,C,H,W]
 *       with channels_last = 1 the planar side is [N,H,W,C] instead (a
 *       Transpose to or from NHWC folded into the conversion)
 *   BlockedConv(x, w, [bias], [add])  Conv's attributes, activation,
 *                                     block, planar_input -> [N,MB,OH,OW,B]
 *       x is blocked, or planar [N,C,H,W] with planar_input = 1 (a stem
 *       on the image); w [M, C / group, kh, kw] as in Conv; group 1,
 *       depthwise (group = C = M), groups of whole blocks (C / group
 *       and M / group multiples of the block; x blocked), or narrow
 *       groups (M = C, C / group below the block and dividing it: whole
 *       groups in every block; x blocked); add is a
 *       blocked residual like the output.
 *   BlockedPool(x [N,CB,H,W,B])       op = MaxPool | AveragePool |
 *                                     GlobalMaxPool | GlobalAveragePool,
 *                                     that op's attributes, block
 *   BlockedBatchNormalization(x [N,CB,H,W,B], scale, B, mean, var)
 *                                     epsilon, block, activation: act of
 *                                     the inference BatchNormalization of
 *                                     C = |scale| channels (DenseNet's BN
 *                                     and ReLU before each convolution)
 *   BlockedResize(x [N,CB,H,W,B], [roi], [scales], [sizes])
 *                                     Resize's attributes, opset (the
 *                                     Resize version whose inputs and
 *                                     rules these are), block: a Resize
 *                                     that keeps N and C (YOLO and FPN
 *                                     upsampling); every lane is resized
 *
 * The reference kernels convert to planar copies, run the standard op's own
 * check and reference kernel (FusedConv's for the convolution) and convert
 * back, so these ops are exactly as correct as the ones they replace and
 * the optimized kernels (kernels/blocked.c) are tested against
 * that. */
#include <stdio.h>

#include "ops/fused.h"
#include "ops/op-groups.h"

/* The widest block the layout takes (AVX-512's 16 floats, with room). */
#define BLOCKED_MAX_BLOCK 64

static er_status get_block(const er_kctx *ctx, int64_t *b) {
  ER_CHECK(er__attr_int(ctx, "block", 0, b));
  if (*b < 1 || *b > BLOCKED_MAX_BLOCK)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "block is %lld; it must be in [1, %d]", (long long)*b,
                        BLOCKED_MAX_BLOCK);
  return ER_STATUS_OK;
}

static int64_t blocks_of(int64_t c, int64_t b) { return c < 0 ? -1 : (c + b - 1) / b; }

/* Input i must be a blocked tensor of block b (as far as known). */
static er_status require_blocked(const er_kctx *ctx, int i, int64_t b) {
  const er_tensor *t = ctx->in[i];
  char s[160];
  if (t->dtype != ER_DTYPE_UNDEFINED && t->dtype != ER_DTYPE_FLOAT)
    return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH, "input %d is %s; blocked tensors are float32", i,
                        er_dtype_name(t->dtype));
  if (t->rank >= 0 && (t->rank != 5 || (t->dims[4] >= 0 && t->dims[4] != b)))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input %d %s is not blocked by %lld ([N, C/%lld, H, W, %lld])",
                        i, er__shape_str(t, s, sizeof s), (long long)b, (long long)b, (long long)b);
  return ER_STATUS_OK;
}

/* ---- conversions --------------------------------------------------------- */

/* Where channel ch of pixel p of image i lies in a planar tensor: NCHW
 * ([n][c][hw]), or NHWC ([n][hw][c]) when channels_last. */
static int64_t planar_at(int64_t i, int64_t ch, int64_t p, int64_t c, int64_t hw, bool channels_last) {
  return channels_last ? (i * hw + p) * c + ch : (i * c + ch) * hw + p;
}

/* planar -> blocked [n][cb][hw][b], zeros in the padding. */
static void to_blocked_cl(const float *x, float *y, int64_t n, int64_t c, int64_t hw, int64_t b, bool channels_last) {
  int64_t cb = blocks_of(c, b);
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < cb; k++)
      for (int64_t p = 0; p < hw; p++)
        for (int64_t l = 0; l < b; l++) {
          int64_t ch = k * b + l;
          y[((i * cb + k) * hw + p) * b + l] = ch < c ? x[planar_at(i, ch, p, c, hw, channels_last)] : 0.0f;
        }
}

/* blocked [n][cb][hw][b] -> planar, the first c channels. */
static void from_blocked_cl(const float *x, float *y, int64_t n, int64_t c, int64_t hw, int64_t b,
                            bool channels_last) {
  int64_t cb = blocks_of(c, b);
  for (int64_t i = 0; i < n; i++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t p = 0; p < hw; p++)
        y[planar_at(i, ch, p, c, hw, channels_last)] = x[((i * cb + ch / b) * hw + p) * b + ch % b];
}

static void to_blocked(const float *x, float *y, int64_t n, int64_t c, int64_t hw, int64_t b) {
  to_blocked_cl(x, y, n, c, hw, b, false);
}

static void from_blocked(const float *x, float *y, int64_t n, int64_t c, int64_t hw, int64_t b) {
  from_blocked_cl(x, y, n, c, hw, b, false);
}

/* A planar float32 tensor [n, c, h, w] (shape only, or allocated). */
static void planar(er_tensor *t, int64_t n, int64_t c, int64_t h, int64_t w) {
  int64_t d[4] = {n, c, h, w};
  er__tensor_set(t, ER_DTYPE_FLOAT, 4, d);
}

static void blocked_shape(er_tensor *t, int64_t n, int64_t c, int64_t h, int64_t w, int64_t b) {
  int64_t d[5] = {n, blocks_of(c, b), h, w, b};
  er__tensor_set(t, ER_DTYPE_FLOAT, 5, d);
}

/* ---- ToBlocked / FromBlocked -------------------------------------------- */

/* channels_last: the planar side is NHWC (the layout pass turns the
 * Transposes around a channels-last block, ConvNeXt's LayerNorm and MLP,
 * into these conversions). */
static er_status get_channels_last(const er_kctx *ctx, bool *cl) {
  int64_t v;
  ER_CHECK(er__attr_int(ctx, "channels_last", 0, &v));
  if (v != 0 && v != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "channels_last is %lld; it must be 0 or 1", (long long)v);
  *cl = v == 1;
  return ER_STATUS_OK;
}

static er_status to_blocked_check(er_kctx *ctx) {
  int64_t b;
  bool cl = false;
  ER_CHECK(get_block(ctx, &b));
  ER_CHECK(get_channels_last(ctx, &cl));
  static const er_dtype f32[] = {ER_DTYPE_FLOAT, ER_DTYPE_UNDEFINED};
  ER_CHECK(er__require_type(ctx, 0, f32));
  ER_CHECK(er__require_rank(ctx, 0, 4, 4));
  const er_tensor *x = ctx->in[0];
  if (x->rank < 0) {
    er__set_output(ctx, 0, ER_DTYPE_FLOAT, -1, NULL);
    return ER_STATUS_OK;
  }
  if (cl) blocked_shape(ctx->out[0], x->dims[0], x->dims[3], x->dims[1], x->dims[2], b);
  else blocked_shape(ctx->out[0], x->dims[0], x->dims[1], x->dims[2], x->dims[3], b);
  return ER_STATUS_OK;
}

static er_status to_blocked_run(er_kctx *ctx) {
  int64_t b;
  bool cl = false;
  ER_CHECK(get_block(ctx, &b));
  ER_CHECK(get_channels_last(ctx, &cl));
  const er_tensor *x = ctx->in[0];
  to_blocked_cl(x->data, ctx->out[0]->data, x->dims[0], x->dims[cl ? 3 : 1], x->dims[cl ? 1 : 2] * x->dims[cl ? 2 : 3],
                b, cl);
  return ER_STATUS_OK;
}

static er_status from_blocked_check(er_kctx *ctx) {
  int64_t b, c;
  bool cl = false;
  ER_CHECK(get_block(ctx, &b));
  ER_CHECK(get_channels_last(ctx, &cl));
  ER_CHECK(er__attr_int(ctx, "channels", -1, &c));
  ER_CHECK(require_blocked(ctx, 0, b));
  const er_tensor *x = ctx->in[0];
  if (c < 1 || (x->rank == 5 && x->dims[1] >= 0 && blocks_of(c, b) != x->dims[1]))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "channels is %lld; %lld blocks of %lld hold %lld to %lld",
                        (long long)c, (long long)(x->rank == 5 ? x->dims[1] : -1), (long long)b,
                        (long long)(x->rank == 5 ? (x->dims[1] - 1) * b + 1 : -1),
                        (long long)(x->rank == 5 ? x->dims[1] * b : -1));
  if (x->rank < 0) {
    er__set_output(ctx, 0, ER_DTYPE_FLOAT, -1, NULL);
    return ER_STATUS_OK;
  }
  if (cl) {
    int64_t d[4] = {x->dims[0], x->dims[2], x->dims[3], c};
    er__tensor_set(ctx->out[0], ER_DTYPE_FLOAT, 4, d);
  } else {
    planar(ctx->out[0], x->dims[0], c, x->dims[2], x->dims[3]);
  }
  return ER_STATUS_OK;
}

static er_status from_blocked_run(er_kctx *ctx) {
  int64_t b, c;
  bool cl = false;
  ER_CHECK(get_block(ctx, &b));
  ER_CHECK(get_channels_last(ctx, &cl));
  ER_CHECK(er__attr_int(ctx, "channels", -1, &c));
  const er_tensor *x = ctx->in[0];
  from_blocked_cl(x->data, ctx->out[0]->data, x->dims[0], c, x->dims[2] * x->dims[3], b, cl);
  return ER_STATUS_OK;
}

/* ---- shadows: the standard op on planar copies ---------------------------- */

#define SHADOW_MAX_IN 5

typedef struct shadow {
  er_node node;
  er_tensor in[SHADOW_MAX_IN], out;
  er_tensor *inp[SHADOW_MAX_IN], *outp[1];
  er_kctx ctx;
} shadow;

/* A kctx for standard op `op_type` (or the fused op when domain is given),
 * with this node's attributes, over sh's planar tensors. */
static er_status shadow_init(const er_kctx *ctx, const char *domain, const char *op_type, int version, int n_in,
                             shadow *sh) {
  const er_op_def *def = er__op_find(domain, op_type, version);
  if (!def) return er__op_error(ctx, ER_STATUS_INTERNAL, "no %s version %d to run", op_type, version);
  sh->node = *ctx->node;
  sh->node.op_type = op_type;
  sh->node.domain = domain;
  sh->node.version = version;
  sh->node.op = def;
  sh->node.n_inputs = n_in;
  sh->node.n_outputs = 1;
  for (int i = 0; i < SHADOW_MAX_IN; i++) sh->inp[i] = i < n_in ? &sh->in[i] : NULL;
  sh->outp[0] = &sh->out;
  sh->ctx = *ctx;
  sh->ctx.node = &sh->node;
  sh->ctx.n_in = n_in;
  sh->ctx.in = sh->inp;
  sh->ctx.n_out = 1;
  sh->ctx.out = sh->outp;
  er__tensor_set(&sh->out, ER_DTYPE_UNDEFINED, -1, NULL);
  return ER_STATUS_OK;
}

static void shadow_release(shadow *sh) {
  for (int i = 0; i < SHADOW_MAX_IN; i++)
    if (sh->in[i].flags & ER_TENSOR_OWNS_DATA) er__tensor_release(&sh->in[i]);
  if (sh->out.flags & ER_TENSOR_OWNS_DATA) er__tensor_release(&sh->out);
}

/* sh->in[i] := planar view of blocked input t holding c channels: its
 * shape, and a copy of its data when `data` (the reference run; a check,
 * which also runs before every optimized kernel, must not pay for it). */
static er_status shadow_unblock(shadow *sh, int i, const er_tensor *t, int64_t c, int64_t b, bool data) {
  if (t->rank != 5) {
    er__tensor_set(&sh->in[i], ER_DTYPE_FLOAT, -1, NULL);
    return ER_STATUS_OK;
  }
  planar(&sh->in[i], t->dims[0], c, t->dims[2], t->dims[3]);
  if (!t->data || !data) return ER_STATUS_OK;
  ER_CHECK(er__tensor_alloc_raw(&sh->in[i], 0));
  from_blocked(t->data, sh->in[i].data, t->dims[0], c, t->dims[2] * t->dims[3], b);
  return ER_STATUS_OK;
}

/* The shadow of an op that runs the standard op on every lane (pools,
 * Resize): sh, and the block in *b_out. */
typedef er_status (*lanes_shadow_fn)(er_kctx *ctx, bool data, shadow *sh, int64_t *b_out);

/* The blocked output of such an op: the standard op's output y [N, C', H',
 * W'] over x's blocks, or unknown when either shape is. */
static void lanes_output(er_kctx *ctx, const er_tensor *y, int64_t b) {
  const er_tensor *x = ctx->in[0];
  if (y->rank == 4 && x->rank == 5) {
    int64_t d[5] = {y->dims[0], x->dims[1], y->dims[2], y->dims[3], b};
    er__set_output(ctx, 0, ER_DTYPE_FLOAT, 5, d);
  } else {
    er__set_output(ctx, 0, ER_DTYPE_FLOAT, -1, NULL);
  }
}

/* Its reference run: the standard op on a planar copy of every lane, the
 * result blocked back. */
static er_status lanes_run(er_kctx *ctx, lanes_shadow_fn make) {
  shadow sh;
  int64_t b;
  memset(&sh, 0, sizeof sh);
  er_status st = make(ctx, true, &sh, &b);
  sh.ctx.checking = false;
  if (st == ER_STATUS_OK) st = sh.node.op->check(&sh.ctx);
  if (st == ER_STATUS_OK) st = er__tensor_alloc(&sh.out, 0);
  if (st == ER_STATUS_OK) st = sh.node.op->run(&sh.ctx);
  if (st == ER_STATUS_OK) {
    const er_tensor *y = &sh.out;
    to_blocked(y->data, ctx->out[0]->data, y->dims[0], y->dims[1], y->dims[2] * y->dims[3], b);
  }
  shadow_release(&sh);
  return st;
}

/* ---- BlockedConv ------------------------------------------------------------ */

enum { BC_X, BC_W, BC_B, BC_ADD };

/* The planar problem behind a BlockedConv: sh runs FusedConv over planar
 * views of x and the residual (copies of their data when they have data),
 * and sh->out gets FusedConv's output shape. *m_out: output channels. */
static er_status bconv_shadow(er_kctx *ctx, bool data, shadow *sh, int64_t *b_out, int64_t *m_out) {
  int64_t b, planar_in, group;
  ER_CHECK(get_block(ctx, &b));
  ER_CHECK(er__attr_int(ctx, "planar_input", 0, &planar_in));
  ER_CHECK(er__attr_int(ctx, "group", 1, &group));
  const er_tensor *x = ctx->in[BC_X], *w = ctx->in[BC_W];
  const er_tensor *bias = er__in(ctx, BC_B), *add = er__in(ctx, BC_ADD);
  char s[160], t[160];
  if (planar_in != 0 && planar_in != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "planar_input is %lld; it must be 0 or 1",
                        (long long)planar_in);
  if (w->rank != 4 || w->dims[0] < 1 || w->dims[1] < 1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "weights %s must be [M, C/group, kh, kw] and known",
                        er__shape_str(w, s, sizeof s));
  if (group < 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "group %lld must be >= 1", (long long)group);
  int64_t m = w->dims[0], c = w->dims[1] * group;
  bool whole_blocks = !planar_in && w->dims[1] % b == 0 && m % group == 0 && (m / group) % b == 0;
  bool narrow = !planar_in && m == c && w->dims[1] < b && b % w->dims[1] == 0;
  if (group != 1 && !(w->dims[1] == 1 && group == m) && !whole_blocks && !narrow)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "group is %lld with weights %s and block %lld; the blocked layout takes group 1, depthwise, "
                        "groups of whole blocks, or groups of as many outputs as inputs that divide the block, of "
                        "a blocked input",
                        (long long)group, er__shape_str(w, s, sizeof s), (long long)b);
  if (planar_in) {
    ER_CHECK(er__require_rank(ctx, BC_X, 4, 4));
    if (x->rank == 4 && x->dims[1] >= 0 && x->dims[1] != c)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input %s does not have the %lld channels of weights %s",
                          er__shape_str(x, s, sizeof s), (long long)c, er__shape_str(w, t, sizeof t));
  } else {
    ER_CHECK(require_blocked(ctx, BC_X, b));
    if (x->rank == 5 && x->dims[1] >= 0 && x->dims[1] != blocks_of(c, b))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input %s does not hold the %lld channels of weights %s",
                          er__shape_str(x, s, sizeof s), (long long)c, er__shape_str(w, t, sizeof t));
  }
  if (add) ER_CHECK(require_blocked(ctx, BC_ADD, b));
  ER_CHECK(shadow_init(ctx, ER_FUSED_DOMAIN, "FusedConv", 1, add ? 4 : bias ? 3 : 2, sh));
  if (planar_in) {
    if (x->data && data) er__tensor_borrow(&sh->in[0], x);
    else er__tensor_set(&sh->in[0], x->dtype, x->rank, x->rank > 0 ? x->dims : NULL);
  } else {
    ER_CHECK(shadow_unblock(sh, 0, x, c, b, data));
  }
  er__tensor_borrow(&sh->in[1], w);
  if (bias) er__tensor_borrow(&sh->in[2], bias);
  else sh->inp[2] = NULL;
  if (add) ER_CHECK(shadow_unblock(sh, 3, add, m, b, data));
  *b_out = b;
  *m_out = m;
  return ER_STATUS_OK;
}

static er_status bconv_check(er_kctx *ctx) {
  shadow sh;
  int64_t b, m;
  memset(&sh, 0, sizeof sh);
  er_status st = bconv_shadow(ctx, false, &sh, &b, &m);
  if (st == ER_STATUS_OK) st = sh.node.op->check(&sh.ctx);
  if (st == ER_STATUS_OK) {
    const er_tensor *y = &sh.out;
    if (y->rank == 4) blocked_shape(ctx->out[0], y->dims[0], m, y->dims[2], y->dims[3], b);
    else er__set_output(ctx, 0, ER_DTYPE_FLOAT, -1, NULL);
    const er_tensor *add = er__in(ctx, BC_ADD), *o = ctx->out[0];
    char s1[160], s2[160];
    bool same = !add || add->rank < 0 || o->rank < 0 || add->rank == o->rank;
    for (int d = 0; same && add && add->rank == 5 && o->rank == 5 && d < 5; d++)
      if (add->dims[d] >= 0 && o->dims[d] >= 0 && add->dims[d] != o->dims[d]) same = false;
    if (!same)
      st = er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "residual %s does not match the output %s",
                        er__shape_str(add, s1, sizeof s1), er__shape_str(o, s2, sizeof s2));
  }
  shadow_release(&sh);
  return st;
}

static er_status bconv_run(er_kctx *ctx) {
  shadow sh;
  int64_t b, m;
  memset(&sh, 0, sizeof sh);
  er_status st = bconv_shadow(ctx, true, &sh, &b, &m);
  sh.ctx.checking = false;
  if (st == ER_STATUS_OK) st = sh.node.op->check(&sh.ctx);
  if (st == ER_STATUS_OK) st = er__tensor_alloc(&sh.out, 0);
  if (st == ER_STATUS_OK) st = sh.node.op->run(&sh.ctx);
  if (st == ER_STATUS_OK) {
    const er_tensor *y = &sh.out;
    to_blocked(y->data, ctx->out[0]->data, y->dims[0], m, y->dims[2] * y->dims[3], b);
  }
  shadow_release(&sh);
  return st;
}

/* ---- BlockedPool ------------------------------------------------------------ */

/* The standard pool a BlockedPool runs; every lane is pooled, padding
 * included (it stays finite). */
static er_status bpool_op(const er_kctx *ctx, const char **op) {
  static const char *const ops[] = {"MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool"};
  const char *name;
  ER_CHECK(er__attr_string(ctx, "op", "", &name));
  for (size_t i = 0; i < ER_ARRAY_LEN(ops); i++)
    if (strcmp(name, ops[i]) == 0) {
      *op = ops[i];
      return ER_STATUS_OK;
    }
  return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                      "op '%s' is not MaxPool, AveragePool, GlobalMaxPool or GlobalAveragePool", name);
}

static er_status bpool_shadow(er_kctx *ctx, bool data, shadow *sh, int64_t *b_out) {
  int64_t b;
  const char *op = NULL;
  ER_CHECK(get_block(ctx, &b));
  ER_CHECK(bpool_op(ctx, &op));
  ER_CHECK(require_blocked(ctx, 0, b));
  ER_CHECK(shadow_init(ctx, "", op, 22, 1, sh));
  const er_tensor *x = ctx->in[0];
  ER_CHECK(shadow_unblock(sh, 0, x, x->rank == 5 && x->dims[1] >= 0 ? x->dims[1] * b : -1, b, data));
  *b_out = b;
  return ER_STATUS_OK;
}

static er_status bpool_check(er_kctx *ctx) {
  shadow sh;
  int64_t b;
  memset(&sh, 0, sizeof sh);
  er_status st = bpool_shadow(ctx, false, &sh, &b);
  if (st == ER_STATUS_OK) st = sh.node.op->check(&sh.ctx);
  if (st == ER_STATUS_OK) lanes_output(ctx, &sh.out, b);
  shadow_release(&sh);
  return st;
}

static er_status bpool_run(er_kctx *ctx) { return lanes_run(ctx, bpool_shadow); }

/* ---- BlockedBatchNormalization --------------------------------------------------- */

/* Inference BatchNormalization of a blocked x: the standard op (opset 15,
 * this node's epsilon) on a planar copy; the channels are scale's. */
static er_status bbn_shadow(er_kctx *ctx, bool data, shadow *sh, int64_t *b_out, int64_t *c_out) {
  int64_t b, training = 0;
  ER_CHECK(get_block(ctx, &b));
  ER_CHECK(require_blocked(ctx, 0, b));
  ER_CHECK(er__attr_int(ctx, "training_mode", 0, &training));
  if (training != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "training_mode is %lld; the blocked form is inference only",
                        (long long)training);
  const er_tensor *x = ctx->in[0], *scale = ctx->in[1];
  char s[160], t[160];
  if (scale->rank != 1 || scale->dims[0] < 1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "scale %s must be [C] with C known",
                        er__shape_str(scale, s, sizeof s));
  const int64_t c = scale->dims[0];
  if (x->rank == 5 && x->dims[1] >= 0 && x->dims[1] != blocks_of(c, b))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input %s does not hold the %lld channels of scale %s",
                        er__shape_str(x, s, sizeof s), (long long)c, er__shape_str(scale, t, sizeof t));
  ER_CHECK(shadow_init(ctx, "", "BatchNormalization", 15, 5, sh));
  ER_CHECK(shadow_unblock(sh, 0, x, c, b, data));
  for (int i = 1; i < 5; i++) er__tensor_borrow(&sh->in[i], ctx->in[i]);
  *b_out = b;
  *c_out = c;
  return ER_STATUS_OK;
}

static er_status bbn_check(er_kctx *ctx) {
  shadow sh;
  int64_t b, c;
  memset(&sh, 0, sizeof sh);
  er_status st = bbn_shadow(ctx, false, &sh, &b, &c);
  if (st == ER_STATUS_OK) st = sh.node.op->check(&sh.ctx);
  er_activation act;
  if (st == ER_STATUS_OK) st = er__act_from_node(ctx, &act);
  if (st == ER_STATUS_OK) {
    const er_tensor *x = ctx->in[0];
    er__set_output(ctx, 0, ER_DTYPE_FLOAT, x->rank, x->rank > 0 ? x->dims : NULL);
  }
  shadow_release(&sh);
  return st;
}

static er_status bbn_run(er_kctx *ctx) {
  shadow sh;
  int64_t b, c;
  memset(&sh, 0, sizeof sh);
  er_status st = bbn_shadow(ctx, true, &sh, &b, &c);
  sh.ctx.checking = false;
  if (st == ER_STATUS_OK) st = sh.node.op->check(&sh.ctx);
  if (st == ER_STATUS_OK) st = er__tensor_alloc(&sh.out, 0);
  if (st == ER_STATUS_OK) st = sh.node.op->run(&sh.ctx);
  er_activation act;
  if (st == ER_STATUS_OK) st = er__act_from_node(ctx, &act);
  if (st == ER_STATUS_OK) {
    const er_tensor *y = &sh.out;
    float *yv = y->data;
    for (int64_t i = 0, n = er__tensor_count(y); i < n; i++) yv[i] = (float)er__act_apply(&act, yv[i]);
    to_blocked(y->data, ctx->out[0]->data, y->dims[0], c, y->dims[2] * y->dims[3], b);
  }
  shadow_release(&sh);
  return st;
}

/* ---- BlockedResize ------------------------------------------------------------- */

enum { BR_MIN_OPSET = 10, BR_MAX_OPSET = 19 };

/* The standard Resize of this node's opset over a planar copy of every
 * lane (CB * B channels): sizes, when given, get that channel count too. */
static er_status bresize_shadow(er_kctx *ctx, bool data, shadow *sh, int64_t *b_out) {
  int64_t b, opset;
  ER_CHECK(get_block(ctx, &b));
  ER_CHECK(require_blocked(ctx, 0, b));
  ER_CHECK(er__attr_int(ctx, "opset", 0, &opset));
  if (opset < BR_MIN_OPSET || opset > BR_MAX_OPSET)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "opset is %lld; it must name Resize %d to %d",
                        (long long)opset, BR_MIN_OPSET, BR_MAX_OPSET);
  int max_in = opset == 10 ? 2 : 4;
  if (ctx->n_in > max_in)
    return er__op_error(ctx, ER_STATUS_INVALID_ARGUMENT, "%d inputs; Resize %lld takes at most %d", ctx->n_in,
                        (long long)opset, max_in);
  ER_CHECK(shadow_init(ctx, "", "Resize", (int)opset, ctx->n_in, sh));
  const er_tensor *x = ctx->in[0];
  int64_t lanes = x->rank == 5 && x->dims[1] >= 0 ? x->dims[1] * b : -1;
  ER_CHECK(shadow_unblock(sh, 0, x, lanes, b, data));
  for (int i = 1; i < ctx->n_in; i++) {
    const er_tensor *t = er__in(ctx, i);
    if (!t) {
      sh->inp[i] = NULL;
      continue;
    }
    er__tensor_borrow(&sh->in[i], t);
  }
  const er_tensor *sizes = opset >= 11 ? er__in(ctx, 3) : NULL;
  if (sizes && sizes->data && sizes->dtype == ER_DTYPE_INT64 && sizes->rank == 1 && sizes->dims[0] == 4 &&
      lanes >= 0) {
    er_tensor *t = &sh->in[3];
    er__tensor_set(t, ER_DTYPE_INT64, 1, sizes->dims);
    ER_CHECK(er__tensor_alloc_raw(t, 0));
    memcpy(t->data, sizes->data, 4 * sizeof(int64_t));
    ((int64_t *)t->data)[1] = lanes;
  }
  *b_out = b;
  return ER_STATUS_OK;
}

static er_status bresize_check(er_kctx *ctx) {
  shadow sh;
  int64_t b;
  memset(&sh, 0, sizeof sh);
  er_status st = bresize_shadow(ctx, false, &sh, &b);
  if (st == ER_STATUS_OK) st = sh.node.op->check(&sh.ctx);
  if (st == ER_STATUS_OK) {
    const er_tensor *y = &sh.out, *x = ctx->in[0];
    char s1[160], s2[160];
    if (y->rank == 4 && x->rank == 5 && ((y->dims[0] >= 0 && x->dims[0] >= 0 && y->dims[0] != x->dims[0]) ||
                                         (y->dims[1] >= 0 && x->dims[1] >= 0 && y->dims[1] != x->dims[1] * b)))
      st = er__op_error(ctx, ER_STATUS_INVALID_ARGUMENT,
                        "output %s of input %s: the blocked form resizes only the height and width",
                        er__shape_str(y, s1, sizeof s1), er__shape_str(x, s2, sizeof s2));
    else
      lanes_output(ctx, y, b);
  }
  shadow_release(&sh);
  return st;
}

static er_status bresize_run(er_kctx *ctx) { return lanes_run(ctx, bresize_shadow); }

/* ---- the table ---------------------------------------------------------------- */

static const er_op_def op_to_blocked = {
    .name = "ToBlocked", .domain = ER_FUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .flags = ER_OP_WRITES_ALL,
    .check = to_blocked_check, .run = to_blocked_run,
};
static const er_op_def op_from_blocked = {
    .name = "FromBlocked", .domain = ER_FUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .flags = ER_OP_WRITES_ALL,
    .check = from_blocked_check, .run = from_blocked_run,
};
static const er_op_def op_blocked_conv = {
    .name = "BlockedConv", .domain = ER_FUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1, .flags = ER_OP_WRITES_ALL,
    .check = bconv_check, .run = bconv_run,
};
static const er_op_def op_blocked_pool = {
    .name = "BlockedPool", .domain = ER_FUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .flags = ER_OP_WRITES_ALL,
    .check = bpool_check, .run = bpool_run,
};

static const er_op_def op_blocked_bn = {
    .name = "BlockedBatchNormalization", .domain = ER_FUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1, .flags = ER_OP_WRITES_ALL,
    .check = bbn_check, .run = bbn_run,
};

static const er_op_def op_blocked_resize = {
    .name = "BlockedResize", .domain = ER_FUSED_DOMAIN, .min_version = 1, .max_version = 1,
    .min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1, .flags = ER_OP_WRITES_ALL,
    .check = bresize_check, .run = bresize_run,
};

const er_op_def *const er__ops_blocked[] = {&op_to_blocked, &op_from_blocked, &op_blocked_conv, &op_blocked_pool,
                                            &op_blocked_bn, &op_blocked_resize, NULL};
