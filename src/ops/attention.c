/* attention.c - operators of the "attention" group: Attention (scaled
 * dot-product attention with grouped KV heads, masks and a KV cache),
 * RotaryEmbedding, TensorScatter (KV-cache writes), SwiGLU, and the
 * recurrent-model blocks LinearAttention and CausalConvWithState.
 *
 * Numerics: products are accumulated in double. Where the ONNX function body
 * of an op passes a value between nodes in the tensor's own type (Attention's
 * scaled Q and K, the QK scores, the softmax result), the reference rounds to
 * that type at the same point, so float16 results follow the definition
 * rather than an idealized double computation. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Shared helpers                                                            */
/* ======================================================================== */

/* x rounded to the precision of float type t; other types leave it alone. */
static double round_to(er_dtype t, double x) {
  switch (t) {
    case ER_DTYPE_FLOAT: return (double)(float)x;
    case ER_DTYPE_FLOAT16: return er__f16_to_f32(er__f32_to_f16(er__f64_to_f32_odd(x)));
    case ER_DTYPE_BFLOAT16: return er__bf16_to_f32(er__f32_to_bf16(er__f64_to_f32_odd(x)));
    default: return x;
  }
}

/* Unifies a dim known from several places: -1 (unknown) yields to a known
 * value; two known values must agree. Returns false on a clash. */
static bool unify(int64_t *acc, int64_t v) {
  if (v < 0) return true;
  if (*acc < 0) {
    *acc = v;
    return true;
  }
  return *acc == v;
}

/* a / b when both are known and b divides a; -1 when unknown; -2 when b does
 * not divide a. */
static int64_t div_dim(int64_t a, int64_t b) {
  if (a < 0 || b <= 0) return -1;
  return a % b ? -2 : a / b;
}

static int64_t add_dim(int64_t a, int64_t b) { return a < 0 || b < 0 ? -1 : a + b; }

/* ======================================================================== */
/* Attention (23, 24, 25)                                                    */
/* ======================================================================== */

/* Inputs and outputs by position. */
enum { AT_Q, AT_K, AT_V, AT_MASK, AT_PAST_K, AT_PAST_V, AT_NONPAD };
enum { AT_Y, AT_PRESENT_K, AT_PRESENT_V, AT_QK };

/* Attributes and the problem size, in the 4-D view
 * Q (batch, q_heads, q_len, head), K (batch, kv_heads, kv_len, head),
 * V (batch, kv_heads, kv_len, v_head). A dim is -1 while unknown. */
typedef struct attn_cfg {
  /* attributes */
  int64_t is_causal;
  int64_t q_num_heads, kv_num_heads;  /* 0 when absent */
  bool has_scale;
  float scale;
  float softcap;
  int64_t qk_mode;                    /* qk_matmul_output_mode, 0..3 */
  er_dtype softmax_type;              /* UNDEFINED: the type of Q */
  int64_t left_window, right_window;  /* -1: unbounded (version 25) */
  /* sizes */
  bool is3d;
  int64_t batch, q_heads, kv_heads, q_len, kv_len, past_len, total_len, head, v_head;
} attn_cfg;

static er_status attn_attrs(const er_kctx *ctx, attn_cfg *c) {
  const er_attr *sa = er__node_attr(ctx->node, "scale");
  int64_t sp;
  ER_CHECK(er__attr_int(ctx, "is_causal", 0, &c->is_causal));
  ER_CHECK(er__attr_int(ctx, "q_num_heads", 0, &c->q_num_heads));
  ER_CHECK(er__attr_int(ctx, "kv_num_heads", 0, &c->kv_num_heads));
  ER_CHECK(er__attr_float(ctx, "scale", 0.0f, &c->scale));
  ER_CHECK(er__attr_float(ctx, "softcap", 0.0f, &c->softcap));
  ER_CHECK(er__attr_int(ctx, "qk_matmul_output_mode", 0, &c->qk_mode));
  ER_CHECK(er__attr_int(ctx, "softmax_precision", 0, &sp));
  c->has_scale = sa != NULL;
  c->left_window = c->right_window = -1;
  if (ctx->node->version >= 25) {
    ER_CHECK(er__attr_int(ctx, "left_window_size", -1, &c->left_window));
    ER_CHECK(er__attr_int(ctx, "right_window_size", -1, &c->right_window));
  }
  if (c->is_causal != 0 && c->is_causal != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "is_causal is %lld; it must be 0 or 1",
                        (long long)c->is_causal);
  if (c->q_num_heads < 0 || c->kv_num_heads < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "q_num_heads %lld and kv_num_heads %lld must be positive",
                        (long long)c->q_num_heads, (long long)c->kv_num_heads);
  if (c->qk_mode < 0 || c->qk_mode > 3)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "qk_matmul_output_mode is %lld; it must be 0, 1, 2 or 3",
                        (long long)c->qk_mode);
  if (!(c->softcap >= 0.0f))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "softcap is %g; it must be >= 0",
                        (double)c->softcap);
  if (c->has_scale && !(c->scale >= 0.0f))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "scale is %g; it must be >= 0 (Q and K are each scaled by sqrt(scale))",
                        (double)c->scale);
  switch (sp) {
    case 0: c->softmax_type = ER_DTYPE_UNDEFINED; break;
    case ER_DTYPE_FLOAT:
    case ER_DTYPE_FLOAT16:
    case ER_DTYPE_DOUBLE:
    case ER_DTYPE_BFLOAT16: c->softmax_type = (er_dtype)sp; break;
    default:
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "softmax_precision is %lld; it must be 1 (float), 10 (float16), "
                          "11 (double) or 16 (bfloat16)",
                          (long long)sp);
  }
  if (c->left_window < -1 || c->right_window < -1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "left_window_size %lld and right_window_size %lld must be -1 or >= 0",
                        (long long)c->left_window, (long long)c->right_window);
  return ER_STATUS_OK;
}

static er_status attn_shape_error(const er_kctx *ctx, const char *what) {
  char q[96], k[96], v[96];
  return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s (Q %s, K %s, V %s)", what,
                      er__shape_str(ctx->in[AT_Q], q, sizeof q),
                      er__shape_str(ctx->in[AT_K], k, sizeof k),
                      er__shape_str(ctx->in[AT_V], v, sizeof v));
}

/* Derives the problem size from the input shapes as far as they are known
 * and validates everything that is. */
static er_status attn_sizes(const er_kctx *ctx, attn_cfg *c) {
  const er_tensor *q = ctx->in[AT_Q], *k = ctx->in[AT_K], *v = ctx->in[AT_V];
  const er_tensor *pk = er__in(ctx, AT_PAST_K), *pv = er__in(ctx, AT_PAST_V);
  int rank = q->rank >= 0 ? q->rank : k->rank >= 0 ? k->rank : v->rank;
  if (rank >= 0 && rank != 3 && rank != 4)
    return attn_shape_error(ctx, "Q, K and V must have rank 3 or 4");
  if ((q->rank >= 0 && q->rank != rank) || (k->rank >= 0 && k->rank != rank) ||
      (v->rank >= 0 && v->rank != rank))
    return attn_shape_error(ctx, "Q, K and V must have the same rank");
  c->is3d = rank == 3;
  c->batch = c->q_heads = c->kv_heads = c->q_len = c->kv_len = c->head = c->v_head = -1;
  c->past_len = 0;
  if (rank == 3) {
    if (c->q_num_heads <= 0 || c->kv_num_heads <= 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "3-D inputs need q_num_heads and kv_num_heads > 0 (got %lld and %lld)",
                          (long long)c->q_num_heads, (long long)c->kv_num_heads);
    c->q_heads = c->q_num_heads;
    c->kv_heads = c->kv_num_heads;
    int64_t qd = div_dim(er__dim_of(q, 2), c->q_heads), kd = div_dim(er__dim_of(k, 2), c->kv_heads);
    int64_t vd = div_dim(er__dim_of(v, 2), c->kv_heads);
    if (qd == -2) return attn_shape_error(ctx, "Q's hidden size is not a multiple of q_num_heads");
    if (kd == -2 || vd == -2)
      return attn_shape_error(ctx, "K's or V's hidden size is not a multiple of kv_num_heads");
    bool ok = unify(&c->batch, er__dim_of(q, 0)) && unify(&c->batch, er__dim_of(k, 0)) &&
              unify(&c->batch, er__dim_of(v, 0));
    if (!ok) return attn_shape_error(ctx, "batch sizes differ");
    c->q_len = er__dim_of(q, 1);
    if (!unify(&c->kv_len, er__dim_of(k, 1)) || !unify(&c->kv_len, er__dim_of(v, 1)))
      return attn_shape_error(ctx, "K and V sequence lengths differ");
    if (!unify(&c->head, qd) || !unify(&c->head, kd))
      return attn_shape_error(ctx, "Q and K head sizes differ");
    c->v_head = vd;
  } else if (rank == 4) {
    bool ok = unify(&c->batch, er__dim_of(q, 0)) && unify(&c->batch, er__dim_of(k, 0)) &&
              unify(&c->batch, er__dim_of(v, 0));
    if (!ok) return attn_shape_error(ctx, "batch sizes differ");
    c->q_heads = er__dim_of(q, 1);
    c->q_len = er__dim_of(q, 2);
    if (!unify(&c->kv_heads, er__dim_of(k, 1)) || !unify(&c->kv_heads, er__dim_of(v, 1)))
      return attn_shape_error(ctx, "K and V head counts differ");
    if (!unify(&c->kv_len, er__dim_of(k, 2)) || !unify(&c->kv_len, er__dim_of(v, 2)))
      return attn_shape_error(ctx, "K and V sequence lengths differ");
    if (!unify(&c->head, er__dim_of(q, 3)) || !unify(&c->head, er__dim_of(k, 3)))
      return attn_shape_error(ctx, "Q and K head sizes differ");
    c->v_head = er__dim_of(v, 3);
    if ((c->q_num_heads && !unify(&c->q_heads, c->q_num_heads)) ||
        (c->kv_num_heads && !unify(&c->kv_heads, c->kv_num_heads)))
      return attn_shape_error(ctx, "q_num_heads / kv_num_heads disagree with the 4-D head dims");
  }
  if (c->q_heads > 0 && c->kv_heads == 0)
    return attn_shape_error(ctx, "K and V have no heads");
  if (c->q_heads >= 0 && c->kv_heads > 0 && c->q_heads % c->kv_heads != 0) {
    char msg[128];
    snprintf(msg, sizeof msg, "q heads (%lld) must be a multiple of kv heads (%lld)",
             (long long)c->q_heads, (long long)c->kv_heads);
    return attn_shape_error(ctx, msg);
  }
  /* The KV cache. */
  if ((pk == NULL) != (pv == NULL))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH,
                        "past_key and past_value must be given together");
  if (pk) {
    char a[96], b[96];
    if ((pk->rank >= 0 && pk->rank != 4) || (pv->rank >= 0 && pv->rank != 4))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "past_key %s and past_value %s must have rank 4",
                          er__shape_str(pk, a, sizeof a), er__shape_str(pv, b, sizeof b));
    int64_t plen = -1;
    bool ok = unify(&c->batch, er__dim_of(pk, 0)) && unify(&c->batch, er__dim_of(pv, 0)) &&
              unify(&c->kv_heads, er__dim_of(pk, 1)) && unify(&c->kv_heads, er__dim_of(pv, 1)) &&
              unify(&plen, er__dim_of(pk, 2)) && unify(&plen, er__dim_of(pv, 2)) &&
              unify(&c->head, er__dim_of(pk, 3)) && unify(&c->v_head, er__dim_of(pv, 3));
    if (!ok)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "past_key %s / past_value %s do not match (batch, kv_heads, past_len, "
                          "head) of K and V",
                          er__shape_str(pk, a, sizeof a), er__shape_str(pv, b, sizeof b));
    c->past_len = plen;
  }
  c->total_len = add_dim(c->past_len, c->kv_len);
  return ER_STATUS_OK;
}

static er_status attention_check(er_kctx *ctx) {
  attn_cfg c;
  const er_tensor *mask = er__in(ctx, AT_MASK), *nonpad = er__in(ctx, AT_NONPAD);
  ER_CHECK(attn_attrs(ctx, &c));
  ER_CHECK(er__require_type(ctx, AT_Q, er__types_float));
  ER_CHECK(er__require_type(ctx, AT_K, er__types_float));
  ER_CHECK(er__require_type(ctx, AT_V, er__types_float));
  ER_CHECK(er__require_same_type(ctx, AT_Q, AT_K));
  if (er__in(ctx, AT_PAST_K)) {
    ER_CHECK(er__require_same_type(ctx, AT_PAST_K, AT_K));
    ER_CHECK(er__require_same_type(ctx, AT_PAST_V, AT_V));
  }
  ER_CHECK(attn_sizes(ctx, &c));
  if (mask) {
    /* A bool mask selects; any other numeric mask is added to the scores. */
    ER_CHECK(er__require_type(ctx, AT_MASK, er__types_all));
    if (mask->rank == 0 || mask->rank > 4) {
      char a[96];
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "attn_mask %s must have rank 1 to 4 (broadcast to batch, q_heads, q_len, "
                          "total_len)",
                          er__shape_str(mask, a, sizeof a));
    }
    if (mask->rank > 0) {
      const int64_t full[3] = {c.batch, c.q_heads, c.q_len};
      int64_t mlast = mask->dims[mask->rank - 1];
      char a[96];
      if (mlast >= 0 && c.total_len >= 0 && mlast > c.total_len)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "attn_mask %s is longer than the total sequence length %lld",
                            er__shape_str(mask, a, sizeof a), (long long)c.total_len);
      for (int d = 0; d < mask->rank - 1; d++) {
        int64_t want = full[3 - (mask->rank - 1) + d], m = mask->dims[d];
        if (m >= 0 && m != 1 && want >= 0 && m != want)
          return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                              "attn_mask %s does not broadcast to (batch %lld, q_heads %lld, "
                              "q_len %lld, total_len)",
                              er__shape_str(mask, a, sizeof a), (long long)c.batch,
                              (long long)c.q_heads, (long long)c.q_len);
      }
    }
  }
  if (nonpad) {
    static const er_dtype i64[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};
    char a[96];
    ER_CHECK(er__require_type(ctx, AT_NONPAD, i64));
    if (er__in(ctx, AT_PAST_K))
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH,
                          "nonpad_kv_seqlen cannot be combined with past_key / past_value");
    if (nonpad->rank >= 0 && (nonpad->rank != 1 || !unify(&c.batch, nonpad->dims[0])))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "nonpad_kv_seqlen %s must have shape (batch_size = %lld)",
                          er__shape_str(nonpad, a, sizeof a), (long long)c.batch);
  }
  if (er__out(ctx, AT_PRESENT_K) && !er__in(ctx, AT_PAST_K) && ctx->node->version >= 24 &&
      nonpad)
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH,
                        "present_key / present_value cannot be combined with nonpad_kv_seqlen");

  er_dtype t1 = ctx->in[AT_Q]->dtype, t2 = ctx->in[AT_V]->dtype, tk = ctx->in[AT_K]->dtype;
  int rank = c.is3d ? 3 : 4;
  if (ctx->in[AT_Q]->rank < 0 && ctx->in[AT_K]->rank < 0 && ctx->in[AT_V]->rank < 0) {
    er__set_output(ctx, AT_Y, t1, -1, NULL);
  } else if (c.is3d) {
    int64_t hidden = c.q_heads >= 0 && c.v_head >= 0 ? c.q_heads * c.v_head : -1;
    int64_t y[3] = {c.batch, c.q_len, hidden};
    er__set_output(ctx, AT_Y, t1, rank, y);
  } else {
    int64_t y[4] = {c.batch, c.q_heads, c.q_len, c.v_head};
    er__set_output(ctx, AT_Y, t1, rank, y);
  }
  int64_t pk[4] = {c.batch, c.kv_heads, c.total_len, c.head};
  int64_t pv[4] = {c.batch, c.kv_heads, c.total_len, c.v_head};
  int64_t qk[4] = {c.batch, c.q_heads, c.q_len, c.total_len};
  er__set_output(ctx, AT_PRESENT_K, tk, 4, pk);
  er__set_output(ctx, AT_PRESENT_V, t2, 4, pv);
  er__set_output(ctx, AT_QK, t1, 4, qk);
  return ER_STATUS_OK;
}

/* Element strides of a Q/K/V tensor in its 4-D view (batch, head, seq, d):
 * a 3-D tensor (batch, seq, heads * d) has its heads inside each row. */
typedef struct view4 {
  int64_t b, h, s;  /* strides; d has stride 1 */
} view4;

static view4 view_of(bool is3d, int64_t heads, int64_t seq, int64_t d) {
  view4 v;
  if (is3d) {
    v.s = heads * d;
    v.h = d;
    v.b = seq * heads * d;
  } else {
    v.s = d;
    v.h = seq * d;
    v.b = heads * seq * d;
  }
  return v;
}

/* Scratch of one (batch, kv head) step, in double. */
typedef struct attn_work {
  double *k;     /* [total_len, head]   K * sqrt(scale), past rows first */
  double *v;     /* [total_len, v_head] past rows first */
  double *q;     /* [head]              one query row * sqrt(scale) */
  double *raw;   /* [total_len]         Q K^T of the row */
  double *cap;   /* [total_len]         after softcap */
  double *bias;  /* [total_len]         mask + causal + window + padding */
  double *prob;  /* [total_len]         softmax */
} attn_work;

/* The additive bias of row (b, h, i): 0 where key j is visible, -inf where
 * masked, plus a float mask's value. Returns true when every key is masked
 * (the row then outputs zeros, as the spec prescribes for every version). */
static bool attn_bias_row(const er_kctx *ctx, const attn_cfg *c, int64_t b, int64_t h, int64_t i,
                          double *bias) {
  const er_tensor *mask = er__in(ctx, AT_MASK), *nonpad = er__in(ctx, AT_NONPAD);
  int64_t T = c->total_len;
  int64_t valid = T;     /* keys at or beyond this are padding */
  int64_t offset = c->past_len;
  if (nonpad) {
    valid = ((const int64_t *)nonpad->data)[b];
    offset = valid - c->q_len;
  }
  int64_t mbase = 0, mlen = 0;
  if (mask) {
    /* Mask dims right-aligned to (batch, q_heads, q_len, total_len); its last
     * dim may be shorter than total_len, the rest counting as masked. */
    const int64_t pos[3] = {b, h, i};
    int mr = mask->rank;
    int64_t st[ER_MAX_RANK];
    er__strides(mr, mask->dims, st);
    for (int d = 0; d < mr - 1; d++) {
      int64_t coord = pos[3 - (mr - 1) + d];
      if (mask->dims[d] != 1) mbase += coord * st[d];
    }
    mlen = mask->dims[mr - 1];
  }
  bool all_masked = true;
  for (int64_t j = 0; j < T; j++) {
    double x = 0.0;
    if (mask) {
      if (j >= mlen)
        x = -INFINITY;
      else if (mask->dtype == ER_DTYPE_BOOL)
        x = ((const uint8_t *)mask->data)[mbase + j] ? 0.0 : -INFINITY;
      else
        x = er__load_f64(mask->data, mask->dtype, mbase + j);
    }
    /* Disallowed positions add -inf, so a +inf float mask entry there gives
     * NaN, as the definition's additive composition does. */
    int64_t p = offset + i;
    if (c->is_causal && j > p) x += -INFINITY;
    if (c->left_window >= 0 && p - j > c->left_window) x += -INFINITY;
    if (c->right_window >= 0 && j - p > c->right_window) x += -INFINITY;
    if (j >= valid) x += -INFINITY;
    bias[j] = x;
    if (!(isinf(x) && x < 0)) all_masked = false;
  }
  return all_masked;
}

static er_status attention_run(er_kctx *ctx) {
  attn_cfg c;
  ER_CHECK(attn_attrs(ctx, &c));
  ER_CHECK(attn_sizes(ctx, &c));
  const er_tensor *q = ctx->in[AT_Q], *k = ctx->in[AT_K], *v = ctx->in[AT_V];
  const er_tensor *pk = er__in(ctx, AT_PAST_K), *pv = er__in(ctx, AT_PAST_V);
  er_tensor *y = ctx->out[AT_Y];
  er_tensor *present_k = er__out(ctx, AT_PRESENT_K), *present_v = er__out(ctx, AT_PRESENT_V);
  er_tensor *qk_out = er__out(ctx, AT_QK);
  const er_dtype t1 = q->dtype;
  const er_dtype tsm = c.softmax_type != ER_DTYPE_UNDEFINED ? c.softmax_type : t1;
  const int64_t B = c.batch, HQ = c.q_heads, HKV = c.kv_heads, SQ = c.q_len, SKV = c.kv_len;
  const int64_t P = c.past_len, T = c.total_len, D = c.head, DV = c.v_head;
  const int64_t group = HKV > 0 ? HQ / HKV : 0;

  /* The spec scales Q and K by sqrt(scale) each, in Q's type. */
  double scale = c.has_scale ? (double)c.scale : (D > 0 ? 1.0 / sqrt((double)D) : 1.0);
  const double s = round_to(t1, sqrt(scale));

  const view4 vq = view_of(c.is3d, HQ, SQ, D), vk = view_of(c.is3d, HKV, SKV, D);
  const view4 vv = view_of(c.is3d, HKV, SKV, DV), vy = view_of(c.is3d, HQ, SQ, DV);
  const view4 vpk = view_of(false, HKV, P, D), vpv = view_of(false, HKV, P, DV);
  const view4 vnk = view_of(false, HKV, T, D), vnv = view_of(false, HKV, T, DV);

  /* Scratch: T*D + T*DV + D + 4*T doubles; each factor is a dim of an input
   * whose size is already bounded, but the sum is checked anyway. */
  uint64_t kd, vd, n = 0;
  bool ok = er__mul_u64((uint64_t)T, (uint64_t)D, &kd) &&
            er__mul_u64((uint64_t)T, (uint64_t)DV, &vd) && er__add_u64(kd, vd, &n) &&
            er__add_u64(n, (uint64_t)D + 4 * (uint64_t)T + 1, &n) &&
            er__mul_u64(n, sizeof(double), &n) && n <= SIZE_MAX;
  if (!ok) return er__op_error(ctx, ER_STATUS_LIMIT, "scratch size overflows");
  double *buf = er__malloc((size_t)n, "Attention scratch");
  if (!buf) return ER_STATUS_OUT_OF_MEMORY;
  attn_work w;
  w.k = buf;
  w.v = w.k + kd;
  w.q = w.v + vd;
  w.raw = w.q + D;
  w.cap = w.raw + T;
  w.bias = w.cap + T;
  w.prob = w.bias + T;

  const size_t esk = er_dtype_size(k->dtype), esv = er_dtype_size(v->dtype);
  for (int64_t b = 0; b < B; b++) {
    for (int64_t hk = 0; hk < HKV; hk++) {
      /* Gather this head's keys and values (cache first) and write the
       * present cache, which is the concatenation along the sequence. */
      for (int64_t j = 0; j < T; j++) {
        const er_tensor *ks = j < P ? pk : k, *vs = j < P ? pv : v;
        int64_t kbase = j < P ? b * vpk.b + hk * vpk.h + j * vpk.s
                              : b * vk.b + hk * vk.h + (j - P) * vk.s;
        int64_t vbase = j < P ? b * vpv.b + hk * vpv.h + j * vpv.s
                              : b * vv.b + hk * vv.h + (j - P) * vv.s;
        for (int64_t d = 0; d < D; d++) w.k[j * D + d] = round_to(t1, er__load_f(ks, kbase + d) * s);
        for (int64_t d = 0; d < DV; d++) w.v[j * DV + d] = er__load_f(vs, vbase + d);
        if (present_k)
          memcpy((char *)present_k->data + (size_t)(b * vnk.b + hk * vnk.h + j * vnk.s) * esk,
                 (const char *)ks->data + (size_t)kbase * esk, (size_t)D * esk);
        if (present_v)
          memcpy((char *)present_v->data + (size_t)(b * vnv.b + hk * vnv.h + j * vnv.s) * esv,
                 (const char *)vs->data + (size_t)vbase * esv, (size_t)DV * esv);
      }
      for (int64_t g = 0; g < group; g++) {
        int64_t h = hk * group + g;
        for (int64_t i = 0; i < SQ; i++) {
          int64_t qbase = b * vq.b + h * vq.h + i * vq.s;
          for (int64_t d = 0; d < D; d++) w.q[d] = round_to(t1, er__load_f(q, qbase + d) * s);
          bool all_masked = attn_bias_row(ctx, &c, b, h, i, w.bias);
          double mx = -INFINITY;
          for (int64_t j = 0; j < T; j++) {
            const double *kr = w.k + j * D;
            double acc = 0.0;
            for (int64_t d = 0; d < D; d++) acc += w.q[d] * kr[d];
            w.raw[j] = round_to(t1, acc);
            double x = w.raw[j];
            if (c.softcap > 0.0f) x = round_to(t1, c.softcap * tanh(x / c.softcap));
            w.cap[j] = x;
            x = round_to(tsm, round_to(t1, x + w.bias[j]));
            w.prob[j] = x;
            if (x > mx) mx = x;
          }
          /* Softmax; a row whose max is -inf has no visible key. */
          if (isinf(mx) && mx < 0) mx = 0.0;
          double sum = 0.0;
          for (int64_t j = 0; j < T; j++) {
            w.prob[j] = exp(w.prob[j] - mx);
            sum += w.prob[j];
          }
          if (sum == 0.0) sum = 1.0;
          for (int64_t j = 0; j < T; j++)
            w.prob[j] = all_masked ? 0.0 : round_to(t1, round_to(tsm, w.prob[j] / sum));
          if (qk_out) {
            int64_t ob = ((b * HQ + h) * SQ + i) * T;
            for (int64_t j = 0; j < T; j++) {
              double x = c.qk_mode == 0   ? w.raw[j]
                         : c.qk_mode == 1 ? w.cap[j]
                         : c.qk_mode == 2 ? w.cap[j] + w.bias[j]
                                          : w.prob[j];
              er__store_f(qk_out, ob + j, x);
            }
          }
          int64_t yb = b * vy.b + h * vy.h + i * vy.s;
          for (int64_t d = 0; d < DV; d++) {
            double acc = 0.0;
            for (int64_t j = 0; j < T; j++) acc += w.prob[j] * w.v[j * DV + d];
            er__store_f(y, yb + d, acc);
          }
        }
      }
    }
  }
  free(buf);
  return ER_STATUS_OK;
}

static const er_op_def op_attention_23 = {
    .name = "Attention", .domain = "", .min_version = 23, .max_version = 23,
    .min_inputs = 3, .max_inputs = 6, .min_outputs = 1, .max_outputs = 4,
    .check = attention_check, .run = attention_run,
};

/* 24 adds nonpad_kv_seqlen; 25 adds the sliding window attributes. */
static const er_op_def op_attention_24 = {
    .name = "Attention", .domain = "", .min_version = 24, .max_version = 25,
    .min_inputs = 3, .max_inputs = 7, .min_outputs = 1, .max_outputs = 4,
    .check = attention_check, .run = attention_run,
};

/* ======================================================================== */
/* RotaryEmbedding (23)                                                      */
/* ======================================================================== */

typedef struct rope_cfg {
  int64_t interleaved, rotary_dim, num_heads;
  bool is3d;
  int64_t batch, heads, seq, head;  /* -1 while unknown */
} rope_cfg;

static er_status rope_setup(const er_kctx *ctx, rope_cfg *c) {
  const er_tensor *x = ctx->in[0], *cosc = ctx->in[1], *sinc = ctx->in[2];
  const er_tensor *pos = er__in(ctx, 3);
  char a[96], b[96];
  ER_CHECK(er__attr_int(ctx, "interleaved", 0, &c->interleaved));
  ER_CHECK(er__attr_int(ctx, "rotary_embedding_dim", 0, &c->rotary_dim));
  ER_CHECK(er__attr_int(ctx, "num_heads", 0, &c->num_heads));
  if (c->interleaved != 0 && c->interleaved != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "interleaved is %lld; it must be 0 or 1",
                        (long long)c->interleaved);
  if (c->rotary_dim < 0 || c->num_heads < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "rotary_embedding_dim %lld and num_heads %lld must be >= 0",
                        (long long)c->rotary_dim, (long long)c->num_heads);
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  ER_CHECK(er__require_same_type(ctx, 0, 2));
  ER_CHECK(er__require_rank(ctx, 0, 3, 4));
  c->is3d = x->rank == 3;
  c->batch = er__dim_of(x, 0);
  c->heads = c->seq = c->head = -1;
  if (x->rank == 3) {
    if (c->num_heads <= 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "a 3-D input %s needs num_heads > 0", er__shape_str(x, a, sizeof a));
    c->heads = c->num_heads;
    c->seq = er__dim_of(x, 1);
    c->head = div_dim(er__dim_of(x, 2), c->heads);
    if (c->head == -2)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "hidden size of input %s is not a multiple of num_heads %lld",
                          er__shape_str(x, a, sizeof a), (long long)c->num_heads);
  } else if (x->rank == 4) {
    c->heads = er__dim_of(x, 1);
    c->seq = er__dim_of(x, 2);
    c->head = er__dim_of(x, 3);
  }
  int64_t rd = c->rotary_dim ? c->rotary_dim : c->head;
  if (c->head >= 0 && rd > c->head)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "rotary_embedding_dim %lld exceeds the head size %lld",
                        (long long)c->rotary_dim, (long long)c->head);
  if (rd >= 0 && rd % 2)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "the rotated size %lld (rotary_embedding_dim or head size) must be even",
                        (long long)rd);
  int want_rank = pos ? 2 : 3;
  if ((cosc->rank >= 0 && cosc->rank != want_rank) || (sinc->rank >= 0 && sinc->rank != want_rank))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "cos_cache %s and sin_cache %s must have rank %d %s",
                        er__shape_str(cosc, a, sizeof a), er__shape_str(sinc, b, sizeof b),
                        want_rank, pos ? "with position_ids" : "without position_ids");
  int64_t half = rd >= 0 ? rd / 2 : -1, rows = -1;
  bool ok = unify(&half, er__dim_of(cosc, want_rank - 1)) && unify(&half, er__dim_of(sinc, want_rank - 1));
  if (pos) {
    static const er_dtype i64[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};
    ER_CHECK(er__require_type(ctx, 3, i64));
    ER_CHECK(er__require_rank(ctx, 3, 2, 2));
    ok = ok && unify(&rows, er__dim_of(cosc, 0)) && unify(&rows, er__dim_of(sinc, 0)) &&
         unify(&c->batch, er__dim_of(pos, 0)) && unify(&c->seq, er__dim_of(pos, 1));
  } else {
    ok = ok && unify(&c->batch, er__dim_of(cosc, 0)) && unify(&c->batch, er__dim_of(sinc, 0)) &&
         unify(&c->seq, er__dim_of(cosc, 1)) && unify(&c->seq, er__dim_of(sinc, 1));
  }
  if (!ok) {
    char xs[96];
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "cos_cache %s / sin_cache %s do not fit input %s: they must be %s with "
                        "half = rotated size / 2 = %lld",
                        er__shape_str(cosc, a, sizeof a), er__shape_str(sinc, b, sizeof b),
                        er__shape_str(x, xs, sizeof xs),
                        pos ? "(max_position + 1, half)" : "(batch, seq, half)", (long long)half);
  }
  return ER_STATUS_OK;
}

static er_status rope_check(er_kctx *ctx) {
  rope_cfg c;
  ER_CHECK(rope_setup(ctx, &c));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status rope_run(er_kctx *ctx) {
  rope_cfg c;
  ER_CHECK(rope_setup(ctx, &c));
  const er_tensor *x = ctx->in[0], *cosc = ctx->in[1], *sinc = ctx->in[2];
  const er_tensor *pos = er__in(ctx, 3);
  er_tensor *y = ctx->out[0];
  const int64_t D = c.head, rd = c.rotary_dim ? c.rotary_dim : D, half = rd / 2;
  const view4 vx = view_of(c.is3d, c.heads, c.seq, D);
  const int64_t max_pos = pos ? cosc->dims[0] : 0;
  /* Untouched tail first: a plain copy of the whole input. */
  memcpy(y->data, x->data, (size_t)er__count(x) * er_dtype_size(x->dtype));
  for (int64_t b = 0; b < c.batch; b++) {
    for (int64_t s = 0; s < c.seq; s++) {
      int64_t crow; /* element offset of this token's cos/sin row */
      if (pos) {
        int64_t p = ((const int64_t *)pos->data)[b * c.seq + s];
        if (p < 0 || p >= max_pos)
          return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                              "position_ids[%lld][%lld] = %lld is outside [0, %lld) (cos_cache rows)",
                              (long long)b, (long long)s, (long long)p, (long long)max_pos);
        crow = p * half;
      } else {
        crow = (b * c.seq + s) * half;
      }
      for (int64_t h = 0; h < c.heads; h++) {
        int64_t base = b * vx.b + h * vx.h + s * vx.s;
        for (int64_t k = 0; k < half; k++) {
          /* Pairs are (k, k + half), or (2k, 2k + 1) when interleaved. */
          int64_t i1 = c.interleaved ? 2 * k : k, i2 = c.interleaved ? 2 * k + 1 : k + half;
          double cs = er__load_f(cosc, crow + k), sn = er__load_f(sinc, crow + k);
          double x1 = er__load_f(x, base + i1), x2 = er__load_f(x, base + i2);
          /* Each product is rounded to the tensor type, as the
           * definition's Mul nodes produce it, before the Sub / Add. */
          const er_dtype t = x->dtype;
          er__store_f(y, base + i1, round_to(t, cs * x1) - round_to(t, sn * x2));
          er__store_f(y, base + i2, round_to(t, sn * x1) + round_to(t, cs * x2));
        }
      }
    }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_rotary_embedding = {
    .name = "RotaryEmbedding", .domain = "", .min_version = 23, .max_version = 23,
    .min_inputs = 3, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .check = rope_check, .run = rope_run,
};

/* ======================================================================== */
/* TensorScatter (24)                                                        */
/* ======================================================================== */

typedef struct scatter_cfg {
  bool circular;
  int axis;
} scatter_cfg;

static er_status scatter_setup(const er_kctx *ctx, scatter_cfg *c) {
  const er_tensor *past = ctx->in[0], *upd = ctx->in[1], *wi = er__in(ctx, 2);
  const char *mode;
  int64_t axis;
  char a[96], b[96];
  ER_CHECK(er__attr_string(ctx, "mode", "linear", &mode));
  ER_CHECK(er__attr_int(ctx, "axis", -2, &axis));
  if (strcmp(mode, "linear") == 0)
    c->circular = false;
  else if (strcmp(mode, "circular") == 0)
    c->circular = true;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "mode is '%s'; it must be 'linear' or 'circular'", mode);
  if (past->dtype != ER_DTYPE_UNDEFINED && !er__dtype_is_numeric(past->dtype))
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "past_cache type %s is not supported",
                        er_dtype_name(past->dtype));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  c->axis = -1;
  int rank = past->rank >= 0 ? past->rank : upd->rank;
  if (rank < 0) return ER_STATUS_OK;
  if ((past->rank >= 0 && past->rank != rank) || (upd->rank >= 0 && upd->rank != rank))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "past_cache %s and update %s must have the same rank",
                        er__shape_str(past, a, sizeof a), er__shape_str(upd, b, sizeof b));
  ER_CHECK(er__norm_axis(ctx, "axis", axis, rank, &c->axis));
  if (c->axis == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "axis %lld is the batch dimension; it must not be 0", (long long)axis);
  if (past->rank >= 0 && upd->rank >= 0) {
    for (int d = 0; d < rank; d++) {
      int64_t p = past->dims[d], u = upd->dims[d];
      if (p < 0 || u < 0) continue;
      if (d == c->axis ? u > p : u != p)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "update %s does not fit past_cache %s (dims must match except along "
                            "axis %d, where update may be shorter)",
                            er__shape_str(upd, b, sizeof b), er__shape_str(past, a, sizeof a),
                            c->axis);
    }
  }
  if (wi) {
    static const er_dtype i64[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};
    ER_CHECK(er__require_type(ctx, 2, i64));
    int64_t batch = er__dim_of(past, 0);
    if (wi->rank >= 0 && (wi->rank != 1 || !unify(&batch, wi->dims[0])))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "write_indices %s must have shape (batch_size = %lld)",
                          er__shape_str(wi, a, sizeof a), (long long)batch);
  }
  return ER_STATUS_OK;
}

static er_status scatter_check(er_kctx *ctx) {
  scatter_cfg c;
  ER_CHECK(scatter_setup(ctx, &c));
  er__same_as_input(ctx, 0, 0);
  return ER_STATUS_OK;
}

static er_status scatter_run(er_kctx *ctx) {
  scatter_cfg c;
  ER_CHECK(scatter_setup(ctx, &c));
  const er_tensor *past = ctx->in[0], *upd = ctx->in[1], *wi = er__in(ctx, 2);
  er_tensor *out = ctx->out[0];
  const size_t es = er_dtype_size(past->dtype);
  memcpy(out->data, past->data, (size_t)er__count(past) * es);
  /* View both as (outer, seq, inner): outer = dims before axis (batch
   * first), inner = dims after it. */
  int64_t outer = 1, inner = 1, per_batch = 1;
  for (int d = 0; d < c.axis; d++) outer *= past->dims[d];
  for (int d = 1; d < c.axis; d++) per_batch *= past->dims[d];
  for (int d = c.axis + 1; d < past->rank; d++) inner *= past->dims[d];
  const int64_t max_len = past->dims[c.axis], len = upd->dims[c.axis];
  if (len == 0) return ER_STATUS_OK;
  for (int64_t o = 0; o < outer; o++) {
    int64_t b = o / per_batch;
    int64_t w = wi ? ((const int64_t *)wi->data)[b] : 0;
    if (!c.circular && (w < 0 || w > max_len - len))
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                          "write_indices[%lld] = %lld: linear mode needs 0 <= index and index + "
                          "%lld (update length) <= %lld (cache length)",
                          (long long)b, (long long)w, (long long)len, (long long)max_len);
    for (int64_t s = 0; s < len; s++) {
      int64_t dst;
      if (c.circular) {
        /* (w + s) mod max_len without overflowing w + s. */
        dst = (w % max_len + s % max_len) % max_len;
        if (dst < 0) dst += max_len;
      } else {
        dst = w + s;
      }
      memcpy((char *)out->data + (size_t)((o * max_len + dst) * inner) * es,
             (const char *)upd->data + (size_t)((o * len + s) * inner) * es, (size_t)inner * es);
    }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_tensor_scatter = {
    .name = "TensorScatter", .domain = "", .min_version = 24, .max_version = 24,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = scatter_check, .run = scatter_run,
};

/* ======================================================================== */
/* SwiGLU (28)                                                               */
/* ======================================================================== */

static er_status swiglu_check(er_kctx *ctx) {
  const er_tensor *a = ctx->in[0], *b = ctx->in[1];
  float alpha;
  ER_CHECK(er__attr_float(ctx, "alpha", 1.0f, &alpha));
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  if (a->rank >= 0 && b->rank >= 0) {
    bool same = a->rank == b->rank;
    for (int d = 0; same && d < a->rank; d++)
      if (a->dims[d] >= 0 && b->dims[d] >= 0 && a->dims[d] != b->dims[d]) same = false;
    if (!same) {
      char x[96], z[96];
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "A %s and B %s must have the same shape (no broadcasting)",
                          er__shape_str(a, x, sizeof x), er__shape_str(b, z, sizeof z));
    }
  }
  /* Take the better-known shape of the two. */
  er__same_as_input(ctx, 0, a->rank >= 0 ? 0 : 1);
  er_tensor *y = ctx->out[0];
  if (a->rank >= 0 && b->rank == a->rank)
    for (int d = 0; d < a->rank; d++)
      if (y->dims[d] < 0) y->dims[d] = b->dims[d];
  return ER_STATUS_OK;
}

static er_status swiglu_run(er_kctx *ctx) {
  const er_tensor *a = ctx->in[0], *b = ctx->in[1];
  er_tensor *y = ctx->out[0];
  float alpha;
  ER_CHECK(er__attr_float(ctx, "alpha", 1.0f, &alpha));
  int64_t n = er__count(a);
  for (int64_t i = 0; i < n; i++) {
    double x = er__load_f(a, i), z = (double)alpha * x;
    /* Sigmoid in the form that cannot overflow exp. */
    double sg = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
    er__store_f(y, i, x * sg * er__load_f(b, i));
  }
  return ER_STATUS_OK;
}

static const er_op_def op_swiglu = {
    .name = "SwiGLU", .domain = "", .min_version = 28, .max_version = 28,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = swiglu_check, .run = swiglu_run,
};

/* ======================================================================== */
/* LinearAttention (27)                                                      */
/* ======================================================================== */

/* A recurrent state S (d_k x d_v) per (batch, kv head) is updated token by
 * token and read by each query head of the group:
 *   linear:      S = S + k v^T
 *   gated:       S = exp(g) S + k v^T
 *   delta:       S = S + k (beta (v - S^T k))^T
 *   gated_delta: S = exp(g) S, then the delta update
 *   o = scale * S^T q
 * The chunk_size attribute is a tuning hint only; the reference runs the
 * recurrence sequentially in double. */

enum { LA_Q, LA_K, LA_V, LA_PAST, LA_DECAY, LA_BETA };

typedef struct la_cfg {
  bool gating, delta;
  int64_t q_heads, kv_heads;
  float scale;
  int64_t batch, len, dk, dv;  /* -1 while unknown */
} la_cfg;

static er_status la_setup(const er_kctx *ctx, la_cfg *c) {
  const er_tensor *q = ctx->in[LA_Q], *k = ctx->in[LA_K], *v = ctx->in[LA_V];
  const er_tensor *past = er__in(ctx, LA_PAST), *decay = er__in(ctx, LA_DECAY);
  const er_tensor *beta = er__in(ctx, LA_BETA);
  const char *rule;
  int64_t chunk;
  char a[96], b[96], d[96];
  ER_CHECK(er__attr_string(ctx, "update_rule", "gated_delta", &rule));
  ER_CHECK(er__attr_int(ctx, "chunk_size", 64, &chunk));
  ER_CHECK(er__attr_int(ctx, "q_num_heads", 0, &c->q_heads));
  ER_CHECK(er__attr_int(ctx, "kv_num_heads", 0, &c->kv_heads));
  ER_CHECK(er__attr_float(ctx, "scale", 0.0f, &c->scale));
  if (strcmp(rule, "linear") == 0) {
    c->gating = c->delta = false;
  } else if (strcmp(rule, "gated") == 0) {
    c->gating = true;
    c->delta = false;
  } else if (strcmp(rule, "delta") == 0) {
    c->gating = false;
    c->delta = true;
  } else if (strcmp(rule, "gated_delta") == 0) {
    c->gating = c->delta = true;
  } else {
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "update_rule is '%s'; it must be 'linear', 'gated', 'delta' or "
                        "'gated_delta'",
                        rule);
  }
  if (c->q_heads <= 0 || c->kv_heads <= 0 || c->q_heads % c->kv_heads)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "q_num_heads (%lld) must be a positive multiple of kv_num_heads (%lld); "
                        "both are required",
                        (long long)c->q_heads, (long long)c->kv_heads);
  if (c->gating != (decay != NULL))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "update_rule '%s' %s the decay input", rule,
                        c->gating ? "requires" : "forbids");
  if (c->delta != (beta != NULL))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "update_rule '%s' %s the beta input", rule,
                        c->delta ? "requires" : "forbids");
  ER_CHECK(er__require_type(ctx, LA_Q, er__types_float));
  ER_CHECK(er__require_same_type(ctx, LA_Q, LA_K));
  ER_CHECK(er__require_same_type(ctx, LA_Q, LA_V));
  if (decay) ER_CHECK(er__require_same_type(ctx, LA_Q, LA_DECAY));
  if (beta) ER_CHECK(er__require_same_type(ctx, LA_Q, LA_BETA));
  if (past) ER_CHECK(er__require_type(ctx, LA_PAST, er__types_float));
  for (int i = 0; i < 3; i++) ER_CHECK(er__require_rank(ctx, i, 3, 3));
  if (decay) ER_CHECK(er__require_rank(ctx, LA_DECAY, 3, 3));
  if (beta) ER_CHECK(er__require_rank(ctx, LA_BETA, 3, 3));
  if (past) ER_CHECK(er__require_rank(ctx, LA_PAST, 4, 4));
  c->batch = c->len = c->dk = c->dv = -1;
  int64_t qd = div_dim(er__dim_of(q, 2), c->q_heads), kd = div_dim(er__dim_of(k, 2), c->kv_heads);
  int64_t vd = div_dim(er__dim_of(v, 2), c->kv_heads);
  bool ok = qd != -2 && kd != -2 && vd != -2 && unify(&c->dk, qd) && unify(&c->dk, kd) &&
            unify(&c->dv, vd);
  for (int i = 0; i < 3; i++)
    ok = ok && unify(&c->batch, er__dim_of(ctx->in[i], 0)) && unify(&c->len, er__dim_of(ctx->in[i], 1));
  if (!ok)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "query %s, key %s and value %s must be (B, T, q_heads * d_k), (B, T, "
                        "kv_heads * d_k) and (B, T, kv_heads * d_v) with q_heads %lld, kv_heads "
                        "%lld",
                        er__shape_str(q, a, sizeof a), er__shape_str(k, b, sizeof b),
                        er__shape_str(v, d, sizeof d), (long long)c->q_heads,
                        (long long)c->kv_heads);
  if (decay && decay->rank == 3) {
    int64_t last = decay->dims[2];
    ok = unify(&c->batch, decay->dims[0]) && unify(&c->len, decay->dims[1]) &&
         (last < 0 || last == c->kv_heads || c->dk < 0 || last == c->kv_heads * c->dk);
    if (!ok)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "decay %s must be (B, T, kv_heads) or (B, T, kv_heads * d_k)",
                          er__shape_str(decay, a, sizeof a));
  }
  if (beta && beta->rank == 3) {
    int64_t last = beta->dims[2];
    ok = unify(&c->batch, beta->dims[0]) && unify(&c->len, beta->dims[1]) &&
         (last < 0 || last == c->kv_heads || last == 1);
    if (!ok)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "beta %s must be (B, T, kv_heads) or (B, T, 1)",
                          er__shape_str(beta, a, sizeof a));
  }
  if (past && past->rank == 4) {
    int64_t heads = c->kv_heads;
    ok = unify(&c->batch, past->dims[0]) && unify(&heads, past->dims[1]) &&
         unify(&c->dk, past->dims[2]) && unify(&c->dv, past->dims[3]);
    if (!ok)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "past_state %s must be (B, kv_heads, d_k, d_v)",
                          er__shape_str(past, a, sizeof a));
  }
  return ER_STATUS_OK;
}

static er_status la_check(er_kctx *ctx) {
  la_cfg c;
  ER_CHECK(la_setup(ctx, &c));
  const er_tensor *q = ctx->in[LA_Q], *past = er__in(ctx, LA_PAST);
  const int64_t y[3] = {c.batch, c.len, c.dv >= 0 ? c.q_heads * c.dv : -1};
  const int64_t st[4] = {c.batch, c.kv_heads, c.dk, c.dv};
  er__set_output(ctx, 0, q->dtype, 3, y);
  /* The state keeps past_state's type, else the query's. */
  er__set_output(ctx, 1, past ? past->dtype : q->dtype, 4, st);
  return ER_STATUS_OK;
}

static er_status la_run(er_kctx *ctx) {
  la_cfg c;
  ER_CHECK(la_setup(ctx, &c));
  const er_tensor *q = ctx->in[LA_Q], *k = ctx->in[LA_K], *v = ctx->in[LA_V];
  const er_tensor *past = er__in(ctx, LA_PAST), *decay = er__in(ctx, LA_DECAY);
  const er_tensor *beta = er__in(ctx, LA_BETA);
  er_tensor *y = ctx->out[0], *present = er__out(ctx, 1);
  const int64_t B = c.batch, T = c.len, HQ = c.q_heads, HKV = c.kv_heads, DK = c.dk, DV = c.dv;
  const int64_t group = HQ / HKV;
  const double scale = c.scale != 0.0f ? (double)c.scale : 1.0 / sqrt((double)DK);
  const bool decay_per_dim = decay && decay->dims[2] != HKV;
  const int64_t beta_last = beta ? beta->dims[2] : 0;
  uint64_t n;
  if (!er__mul_u64((uint64_t)DK, (uint64_t)DV, &n) ||
      !er__add_u64(n, (uint64_t)DV + 2 * (uint64_t)DK, &n) ||
      !er__mul_u64(n, sizeof(double), &n) || n > SIZE_MAX / 2)
    return er__op_error(ctx, ER_STATUS_LIMIT, "state of %lld x %lld is too large", (long long)DK,
                        (long long)DV);
  double *S = er__malloc((size_t)n + 1, "LinearAttention state"); /* [DK, DV] */
  if (!S) return ER_STATUS_OUT_OF_MEMORY;
  double *u = S + DK * DV; /* [DV] the value written this step */
  double *kr = u + DV;     /* [DK] this step's key */
  double *qr = kr + DK;    /* [DK] one query head's row */
  for (int64_t b = 0; b < B; b++) {
    for (int64_t h = 0; h < HKV; h++) {
      for (int64_t i = 0; i < DK * DV; i++)
        S[i] = past ? er__load_f(past, ((b * HKV + h) * DK) * DV + i) : 0.0;
      for (int64_t t = 0; t < T; t++) {
        const int64_t kb = (b * T + t) * HKV * DK + h * DK, vb = (b * T + t) * HKV * DV + h * DV;
        for (int64_t i = 0; i < DK; i++) kr[i] = er__load_f(k, kb + i);
        if (c.gating) {
          for (int64_t i = 0; i < DK; i++) {
            int64_t gi = decay_per_dim ? kb + i : (b * T + t) * HKV + h;
            double g = exp(er__load_f(decay, gi));
            for (int64_t j = 0; j < DV; j++) S[i * DV + j] *= g;
          }
        }
        for (int64_t j = 0; j < DV; j++) u[j] = er__load_f(v, vb + j);
        if (c.delta) {
          double bt = er__load_f(beta, (b * T + t) * beta_last + (beta_last == 1 ? 0 : h));
          for (int64_t j = 0; j < DV; j++) {
            double r = 0.0;
            for (int64_t i = 0; i < DK; i++) r += S[i * DV + j] * kr[i];
            u[j] = bt * (u[j] - r);
          }
        }
        for (int64_t i = 0; i < DK; i++)
          for (int64_t j = 0; j < DV; j++) S[i * DV + j] += kr[i] * u[j];
        for (int64_t g = 0; g < group; g++) {
          const int64_t hq = h * group + g;
          const int64_t qb = (b * T + t) * HQ * DK + hq * DK, yb = (b * T + t) * HQ * DV + hq * DV;
          for (int64_t i = 0; i < DK; i++) qr[i] = er__load_f(q, qb + i);
          for (int64_t j = 0; j < DV; j++) {
            double acc = 0.0;
            for (int64_t i = 0; i < DK; i++) acc += qr[i] * S[i * DV + j];
            er__store_f(y, yb + j, scale * acc);
          }
        }
      }
      if (present)
        for (int64_t i = 0; i < DK * DV; i++) er__store_f(present, ((b * HKV + h) * DK) * DV + i, S[i]);
    }
  }
  free(S);
  return ER_STATUS_OK;
}

static const er_op_def op_linear_attention = {
    .name = "LinearAttention", .domain = "", .min_version = 27, .max_version = 27,
    .min_inputs = 3, .max_inputs = 6, .min_outputs = 1, .max_outputs = 2,
    .check = la_check, .run = la_run,
};

/* ======================================================================== */
/* CausalConvWithState (27)                                                  */
/* ======================================================================== */

/* Depthwise causal 1-D convolution over (past_state ++ input), where
 * past_state (zeros when absent) holds the k - 1 positions before the
 * input; present_state is the last k - 1 positions of that sequence. */

static er_status ccs_setup(const er_kctx *ctx, bool *silu, int64_t *ksize) {
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *bias = er__in(ctx, 2);
  const er_tensor *past = er__in(ctx, 3);
  const char *act;
  char a[96], b[96];
  ER_CHECK(er__attr_string(ctx, "activation", "none", &act));
  if (strcmp(act, "none") == 0)
    *silu = false;
  else if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0)
    *silu = true;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "activation is '%s'; it must be 'none', 'silu' or 'swish'", act);
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  for (int i = 1; i < 4; i++)
    if (er__in(ctx, i)) ER_CHECK(er__require_same_type(ctx, 0, i));
  ER_CHECK(er__require_rank(ctx, 0, 3, 3));
  ER_CHECK(er__require_rank(ctx, 1, 3, 3));
  if (bias) ER_CHECK(er__require_rank(ctx, 2, 1, 1));
  if (past) ER_CHECK(er__require_rank(ctx, 3, 3, 3));
  int64_t batch = er__dim_of(x, 0), ch = er__dim_of(x, 1);
  *ksize = er__dim_of(w, 2);
  if (*ksize == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "weight %s has an empty kernel",
                        er__shape_str(w, a, sizeof a));
  bool ok = unify(&ch, er__dim_of(w, 0)) && (er__dim_of(w, 1) < 0 || er__dim_of(w, 1) == 1);
  if (!ok)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "weight %s must be (channels, 1, k) for input %s",
                        er__shape_str(w, a, sizeof a), er__shape_str(x, b, sizeof b));
  if (bias && !unify(&ch, er__dim_of(bias, 0)))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "bias %s must have %lld (channels) values",
                        er__shape_str(bias, a, sizeof a), (long long)ch);
  if (past) {
    int64_t km1 = *ksize >= 0 ? *ksize - 1 : -1;
    ok = unify(&batch, er__dim_of(past, 0)) && unify(&ch, er__dim_of(past, 1)) &&
         unify(&km1, er__dim_of(past, 2));
    if (!ok)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "past_state %s must be (batch, channels, k - 1) for input %s",
                          er__shape_str(past, a, sizeof a), er__shape_str(x, b, sizeof b));
    if (*ksize < 0 && km1 >= 0) *ksize = km1 + 1;
  }
  return ER_STATUS_OK;
}

static er_status ccs_check(er_kctx *ctx) {
  bool silu;
  int64_t ksize;
  ER_CHECK(ccs_setup(ctx, &silu, &ksize));
  const er_tensor *x = ctx->in[0];
  er__same_as_input(ctx, 0, 0);
  const int64_t st[3] = {er__dim_of(x, 0), er__dim_of(x, 1) >= 0 ? er__dim_of(x, 1) : er__dim_of(ctx->in[1], 0),
                         ksize >= 0 ? ksize - 1 : -1};
  er__set_output(ctx, 1, x->dtype, 3, st);
  return ER_STATUS_OK;
}

static er_status ccs_run(er_kctx *ctx) {
  bool silu;
  int64_t K;
  ER_CHECK(ccs_setup(ctx, &silu, &K));
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *bias = er__in(ctx, 2);
  const er_tensor *past = er__in(ctx, 3);
  er_tensor *y = ctx->out[0], *present = er__out(ctx, 1);
  const int64_t B = x->dims[0], C = x->dims[1], L = x->dims[2], P = K - 1;
  /* Element p of the padded sequence (length P + L) of (b, c). */
#define CCS_AT(b, c, p)                                                          \
  ((p) < P ? (past ? er__load_f(past, ((b) * C + (c)) * P + (p)) : 0.0)              \
           : er__load_f(x, ((b) * C + (c)) * L + (p) - P))
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++) {
      const double bv = bias ? er__load_f(bias, c) : 0.0;
      for (int64_t t = 0; t < L; t++) {
        double acc = bv;
        for (int64_t j = 0; j < K; j++) acc += er__load_f(w, c * K + j) * CCS_AT(b, c, t + j);
        if (silu) {
          /* The activation reads the convolution rounded to the tensor
           * type, as the definition casts before it. */
          acc = round_to(x->dtype, acc);
          acc = acc >= 0 ? acc / (1.0 + exp(-acc)) : acc * exp(acc) / (1.0 + exp(acc));
        }
        er__store_f(y, (b * C + c) * L + t, acc);
      }
      if (present)
        for (int64_t p = 0; p < P; p++) er__store_f(present, (b * C + c) * P + p, CCS_AT(b, c, L + p));
    }
#undef CCS_AT
  return ER_STATUS_OK;
}

static const er_op_def op_causal_conv_with_state = {
    .name = "CausalConvWithState", .domain = "", .min_version = 27, .max_version = 27,
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 2,
    .check = ccs_check, .run = ccs_run,
};

const er_op_def *const er__ops_attention[] = {
    &op_attention_23,
    &op_attention_24,
    &op_rotary_embedding,
    &op_tensor_scatter,
    &op_swiglu,
    &op_linear_attention,
    &op_causal_conv_with_state,
    NULL,
};
