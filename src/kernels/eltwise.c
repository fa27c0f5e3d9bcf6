/* eltwise.c - optimized CPU kernels of the "eltwise" group: float32
 * activations and unary math (Relu, Sigmoid, Tanh, Clip, HardSigmoid,
 * HardSwish, LeakyRelu, Gelu, Erf, Exp, Abs, Neg, Sqrt, Reciprocal, Log) and
 * broadcasting binary ops (Add, Sub, Mul, Div, PRelu, Sum, Max, Min).
 *
 * Binary broadcasting is reduced once per run to a few collapsed axes:
 * axes where the output has extent 1 are dropped and neighbours are merged
 * while both inputs stay contiguous (or both stay broadcast) across them,
 * so the innermost run is contiguous or a repeated scalar for each input.
 * Same shapes, scalars, per-channel [1,C,1,1] and per-row [W] operands all
 * become long vector loops. Work is split over threads by output element
 * ranges, which does not change any result. */
#include <float.h>

#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/vec.h"

/* Elements below which an elementwise op is not worth a second thread. */
#define ELTWISE_GRAIN 16384

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ======================================================================== */
/* Unary                                                                     */
/* ======================================================================== */

typedef struct un_state {
  const er_vec_ops *ops;
  er_unary u;
  bool clip_inputs;   /* Clip 11+: bounds come from inputs 1 and 2 */
} un_state;

/* The unary function of the node, from its type and attributes; false
 * for nodes the kernels do not take. */
static bool unary_of(const er_kernel_info *ki, er_unary *u, bool *clip_inputs) {
  er_kctx ctx = er__ki_ctx(ki);
  const char *op = ki->node->op_type;
  int version = ki->node->version;
  memset(u, 0, sizeof *u);
  *clip_inputs = false;
  u->op = ER_UNOP_ACT;
  float a = 0, b = 0;
  if (strcmp(op, "Relu") == 0) {
    u->act.kind = ER_ACT_RELU;
  } else if (strcmp(op, "Sigmoid") == 0) {
    u->act.kind = ER_ACT_SIGMOID;
  } else if (strcmp(op, "Tanh") == 0) {
    u->act.kind = ER_ACT_TANH;
  } else if (strcmp(op, "HardSwish") == 0) {
    u->act.kind = ER_ACT_HARDSWISH;
  } else if (strcmp(op, "Clip") == 0) {
    u->act.kind = ER_ACT_CLIP;
    if (version < 6) return false;
    if (version >= 11) {
      *clip_inputs = true;
      for (int i = 1; i < ki->n_in; i++)
        if (ki->in[i] && ki->in[i]->dtype != ER_DTYPE_FLOAT) return false;
    } else {
      if (er__attr_float(&ctx, "min", -FLT_MAX, &a) != ER_STATUS_OK ||
          er__attr_float(&ctx, "max", FLT_MAX, &b) != ER_STATUS_OK)
        return false;
      u->act.p[0] = a;
      u->act.p[1] = b;
    }
  } else if (strcmp(op, "HardSigmoid") == 0) {
    u->act.kind = ER_ACT_HARDSIGMOID;
    if (er__attr_float(&ctx, "alpha", 0.2f, &a) != ER_STATUS_OK ||
        er__attr_float(&ctx, "beta", 0.5f, &b) != ER_STATUS_OK)
      return false;
    u->act.p[0] = a;
    u->act.p[1] = b;
  } else if (strcmp(op, "LeakyRelu") == 0) {
    u->act.kind = ER_ACT_LEAKYRELU;
    if (er__attr_float(&ctx, "alpha", 0.01f, &a) != ER_STATUS_OK) return false;
    u->act.p[0] = a;
  } else if (strcmp(op, "Gelu") == 0) {
    const char *mode;
    if (er__attr_string(&ctx, "approximate", "none", &mode) != ER_STATUS_OK) return false;
    if (strcmp(mode, "none") == 0) u->act.kind = ER_ACT_GELU;
    else if (strcmp(mode, "tanh") == 0) u->act.kind = ER_ACT_GELU_TANH;
    else return false;
  } else if (strcmp(op, "Erf") == 0) {
    u->op = ER_UNOP_ERF;
  } else if (strcmp(op, "Exp") == 0) {
    u->op = ER_UNOP_EXP;
  } else if (strcmp(op, "Abs") == 0) {
    u->op = ER_UNOP_ABS;
  } else if (strcmp(op, "Neg") == 0) {
    u->op = ER_UNOP_NEG;
  } else if (strcmp(op, "Sqrt") == 0) {
    u->op = ER_UNOP_SQRT;
  } else if (strcmp(op, "Reciprocal") == 0) {
    u->op = ER_UNOP_RECIPROCAL;
  } else if (strcmp(op, "Log") == 0) {
    u->op = ER_UNOP_LOG;
  } else {
    return false;
  }
  return true;
}

static bool un_supports(const er_kernel_info *ki, bool isa_ok) {
  er_unary u;
  bool clip_inputs;
  if (!isa_ok || !er__ki_f32(ki, 0) || !er__ki_out_f32(ki)) return false;
  bool ok = unary_of(ki, &u, &clip_inputs);
  er__error_clear();
  return ok;
}

static er_status un_prepare(const er_kernel_info *ki, const er_vec_ops *ops, void **state_out,
                            size_t *scratch_out) {
  un_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for an elementwise kernel");
  s->ops = ops;
  unary_of(ki, &s->u, &s->clip_inputs);
  *scratch_out = 0;
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct un_job {
  const er_vec_ops *ops;
  const er_unary *u;
  const float *x;
  float *y;
} un_job;

static void un_chunk(void *arg, int64_t begin, int64_t end) {
  const un_job *j = arg;
  j->ops->unary(j->u, j->x + begin, j->y + begin, end - begin);
}

static er_status un_run(const er_kernel_run *kr) {
  const un_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  er_unary u = s->u;
  if (s->clip_inputs) {
    const er_tensor *lo = er__in(ctx, 1), *hi = er__in(ctx, 2);
    u.act.p[0] = lo ? ((const float *)lo->data)[0] : -INFINITY;
    u.act.p[1] = hi ? ((const float *)hi->data)[0] : INFINITY;
  }
  int64_t n = er__tensor_count(ctx->in[0]);
  un_job j = {s->ops, &u, ctx->in[0]->data, ctx->out[0]->data};
  er__parallel_for(kr->pool, n, ELTWISE_GRAIN, un_chunk, &j);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Binary                                                                    */
/* ======================================================================== */

typedef struct bin_state {
  const er_vec_ops *ops;
  er_binop op;
  bool sum;           /* variadic Sum: fold the inputs pairwise */
} bin_state;

static bool binop_of(const char *op, int version, er_binop *out, bool *sum) {
  *sum = false;
  /* Versions before 7 broadcast by the `broadcast` / `axis` attributes.
   * The variadic ops fold their inputs pairwise, as the reference does. */
  if (strcmp(op, "Sum") == 0 || (version >= 8 && (strcmp(op, "Max") == 0 || strcmp(op, "Min") == 0))) {
    *out = op[0] == 'S' ? ER_BINOP_ADD : op[1] == 'a' ? ER_BINOP_MAX : ER_BINOP_MIN;
    *sum = true;
    return true;
  }
  if (version < 7) return false;
  if (strcmp(op, "Add") == 0) *out = ER_BINOP_ADD;
  else if (strcmp(op, "Sub") == 0) *out = ER_BINOP_SUB;
  else if (strcmp(op, "Mul") == 0) *out = ER_BINOP_MUL;
  else if (strcmp(op, "Div") == 0) *out = ER_BINOP_DIV;
  else if (strcmp(op, "PRelu") == 0) *out = ER_BINOP_PRELU;
  else return false;
  return true;
}

static bool bin_supports(const er_kernel_info *ki, bool isa_ok) {
  er_binop op;
  bool sum;
  if (!isa_ok || !er__ki_out_f32(ki) || !binop_of(ki->node->op_type, ki->node->version, &op, &sum)) return false;
  for (int i = 0; i < ki->n_in; i++)
    if (!er__ki_f32(ki, i)) return false;
  return ki->n_in >= (sum ? 1 : 2);
}

static er_status bin_prepare(const er_kernel_info *ki, const er_vec_ops *ops, void **state_out,
                             size_t *scratch_out) {
  bin_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for an elementwise kernel");
  s->ops = ops;
  binop_of(ki->node->op_type, ki->node->version, &s->op, &s->sum);
  *scratch_out = 0;
  *state_out = s;
  return ER_STATUS_OK;
}

/* A broadcast over collapsed axes; the last axis is the inner run. */
typedef struct bplan {
  int nd;
  int64_t dims[ER_MAX_RANK];
  int64_t sa[ER_MAX_RANK], sb[ER_MAX_RANK];   /* element strides, 0 = broadcast */
} bplan;

static void input_strides(const er_tensor *t, const er_tensor *y, int64_t *s) {
  int r = y->rank, off = r - t->rank;
  int64_t stride = 1;
  for (int d = r - 1; d >= 0; d--) {
    int64_t dim = d >= off ? t->dims[d - off] : 1;
    s[d] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
}

static void bplan_make(const er_tensor *a, const er_tensor *b, const er_tensor *y, bplan *p) {
  int64_t sa[ER_MAX_RANK], sb[ER_MAX_RANK];
  input_strides(a, y, sa);
  input_strides(b, y, sb);
  p->nd = 0;
  for (int d = 0; d < y->rank; d++) {
    if (y->dims[d] == 1) continue;
    if (p->nd > 0) {
      int k = p->nd - 1;
      /* Merge when each input is contiguous across the two axes or
       * broadcast along both. */
      bool ma = (sa[d] == 0 && p->sa[k] == 0) || (sa[d] != 0 && p->sa[k] == sa[d] * y->dims[d]);
      bool mb = (sb[d] == 0 && p->sb[k] == 0) || (sb[d] != 0 && p->sb[k] == sb[d] * y->dims[d]);
      if (ma && mb) {
        p->dims[k] *= y->dims[d];
        p->sa[k] = sa[d];
        p->sb[k] = sb[d];
        continue;
      }
    }
    p->dims[p->nd] = y->dims[d];
    p->sa[p->nd] = sa[d];
    p->sb[p->nd] = sb[d];
    p->nd++;
  }
  if (p->nd == 0) {
    p->nd = 1;
    p->dims[0] = 1;
    p->sa[0] = p->sb[0] = 0;
  }
}

typedef struct bin_job {
  const er_vec_ops *ops;
  er_binop op;
  const bplan *p;
  const float *a, *b;
  float *y;
} bin_job;

/* Walks output elements [begin, end) in runs along the inner axis:
 * row(ctx, oa, ia, ob, ib, i, n) for n elements from output element i, a's
 * element oa (stride ia: 1 or 0) and b's ob (ib). The rows that follow
 * along the next axis out step their offsets (a blocked squeeze-excite Mul
 * is [N * C/16][H * W][16]: one short run per pixel, where re-deriving each
 * row's offsets cost more than the products). */
typedef void (*bplan_row_fn)(const void *ctx, int64_t oa, int64_t ia, int64_t ob, int64_t ib, int64_t i, int64_t n);

static inline __attribute__((always_inline)) void bplan_walk(const bplan *p, int64_t begin, int64_t end, bplan_row_fn row,
                                                              const void *ctx) {
  const int last = p->nd - 1;
  const int64_t inner = p->dims[last], ia = p->sa[last] ? 1 : 0, ib = p->sb[last] ? 1 : 0;
  int64_t i = begin;
  while (i < end) {
    int64_t r = i / inner, col = i % inner;
    int64_t oa = col * p->sa[last], ob = col * p->sb[last], mid = 0;
    for (int d = last - 1; d >= 0; d--) {
      int64_t idx = r % p->dims[d];
      if (d == last - 1) mid = idx;
      r /= p->dims[d];
      oa += idx * p->sa[d];
      ob += idx * p->sb[d];
    }
    const int64_t sa2 = last > 0 ? p->sa[last - 1] : 0, sb2 = last > 0 ? p->sb[last - 1] : 0;
    const int64_t rows = last > 0 ? p->dims[last - 1] : 1;
    do {
      int64_t n = min64(inner - col, end - i);
      row(ctx, oa, ia, ob, ib, i, n);
      i += n;
      oa += sa2 - col * p->sa[last];
      ob += sb2 - col * p->sb[last];
      col = 0;
    } while (i < end && ++mid < rows);
  }
}

static inline void bin_row(const void *ctx, int64_t oa, int64_t ia, int64_t ob, int64_t ib, int64_t i, int64_t n) {
  const bin_job *j = ctx;
  j->ops->binary(j->op, j->a + oa, ia, j->b + ob, ib, j->y + i, n);
}

/* Inner runs up to this many floats go to binary_rows a row group at a
 * time (one call per run cost a blocked squeeze-excite Mul, [H * W][16]
 * by [16], three times onnxruntime's time: EfficientNet-B0's 144-channel
 * one at 56x56 142 against 44 us). */
#define BIN_SHORT_ROW 64

/* bplan_walk for short inner runs contiguous in both inputs: the rows
 * along the next axis out (constant strides) in one binary_rows call. */
static void bin_rows_walk(const bin_job *j, int64_t begin, int64_t end) {
  const bplan *p = j->p;
  const int last = p->nd - 1;
  const int64_t inner = p->dims[last], rows = p->dims[last - 1];
  const int64_t sa2 = p->sa[last - 1], sb2 = p->sb[last - 1];
  int64_t i = begin;
  while (i < end) {
    int64_t r = i / inner, col = i % inner;
    int64_t oa = col, ob = col, mid = r % rows;
    for (int d = last - 1; d >= 0; d--) {
      int64_t idx = r % p->dims[d];
      r /= p->dims[d];
      oa += idx * p->sa[d];
      ob += idx * p->sb[d];
    }
    if (col != 0 || end - i < inner) {
      int64_t n = min64(inner - col, end - i);
      j->ops->binary(j->op, j->a + oa, 1, j->b + ob, 1, j->y + i, n);
      i += n;
      continue;
    }
    int64_t n_rows = min64(rows - mid, (end - i) / inner);
    j->ops->binary_rows(j->op, j->a + oa, sa2, j->b + ob, sb2, j->y + i, inner, n_rows);
    i += n_rows * inner;
  }
}

static void bin_chunk(void *arg, int64_t begin, int64_t end) {
  const bin_job *j = arg;
  const bplan *p = j->p;
  const int last = p->nd - 1;
  if (last > 0 && p->dims[last] <= BIN_SHORT_ROW && p->sa[last] == 1 && p->sb[last] == 1 && j->ops->binary_rows)
    bin_rows_walk(j, begin, end);
  else
    bplan_walk(p, begin, end, bin_row, j);
}

static void bin_pair(const er_kernel_run *kr, er_binop op, const er_tensor *a, const er_tensor *b, er_tensor *y) {
  const bin_state *s = kr->state;
  bplan p;
  bplan_make(a, b, y, &p);
  bin_job j = {s->ops, op, &p, a->data, b->data, y->data};
  er__parallel_for(kr->pool, er__tensor_count(y), ELTWISE_GRAIN, bin_chunk, &j);
}

static er_status bin_run(const er_kernel_run *kr) {
  const bin_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  er_tensor *y = ctx->out[0];
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  if (s->sum && ctx->n_in == 1) {
    /* One input: a broadcast copy is the reference's business. */
    return er__kr_reference(kr);
  }
  bin_pair(kr, s->op, ctx->in[0], ctx->in[1], y);
  for (int k = 2; k < ctx->n_in; k++) bin_pair(kr, s->op, y, ctx->in[k], y);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* int32 Add, Sub, Mul                                                       */
/* ======================================================================== */

/* quantize_dynamic's convolutions add an int32 bias [1, C, 1, 1] to every
 * ConvInteger sum. Same broadcast plan as the float ops; the arithmetic
 * wraps in two's complement, as the reference's (low 32 bits of its
 * 64-bit sums). */
static bool i32_supports(const er_kernel_info *ki) {
  er_binop op;
  bool sum;
  if (ki->n_in != 2 || ki->n_out != 1 || !ki->out[0] || ki->out[0]->dtype != ER_DTYPE_INT32) return false;
  if (!binop_of(ki->node->op_type, ki->node->version, &op, &sum) || sum) return false;
  if (op != ER_BINOP_ADD && op != ER_BINOP_SUB && op != ER_BINOP_MUL) return false;
  for (int i = 0; i < 2; i++)
    if (!ki->in[i] || ki->in[i]->dtype != ER_DTYPE_INT32) return false;
  return true;
}

static er_status i32_prepare(const er_kernel_info *ki, void **state_out, size_t *scratch_out) {
  return bin_prepare(ki, NULL, state_out, scratch_out);
}

typedef struct i32_job {
  er_binop op;
  const bplan *p;
  const int32_t *a, *b;
  int32_t *y;
} i32_job;

/* Runs of ER_I32_BLOCK elements with restrict operands: loops GCC
 * vectorizes at -O2 (its default cost model takes only loops whose trip
 * count is a multiple of the vector), the rest one by one. */
#define ER_I32_BLOCK 16

#define I32_LOOP(EXPR)                                                                                \
  do {                                                                                                \
    int64_t i = 0;                                                                                    \
    for (; i + ER_I32_BLOCK <= n; i += ER_I32_BLOCK)                                                  \
      for (int k = 0; k < ER_I32_BLOCK; k++) {                                                        \
        const int64_t e = i + k;                                                                      \
        y[e] = (int32_t)(EXPR);                                                                       \
      }                                                                                               \
    for (int64_t e = i; e < n; e++) y[e] = (int32_t)(EXPR);                                           \
  } while (0)

static void i32_add_row(const int32_t *restrict a, int64_t ia, const int32_t *restrict b, int64_t ib,
                        int32_t *restrict y, int64_t n) {
  if (ia && ib) I32_LOOP((uint32_t)a[e] + (uint32_t)b[e]);
  else if (ia) I32_LOOP((uint32_t)a[e] + (uint32_t)b[0]);
  else if (ib) I32_LOOP((uint32_t)a[0] + (uint32_t)b[e]);
  else I32_LOOP((uint32_t)a[0] + (uint32_t)b[0]);
}

static void i32_sub_row(const int32_t *restrict a, int64_t ia, const int32_t *restrict b, int64_t ib,
                        int32_t *restrict y, int64_t n) {
  if (ia && ib) I32_LOOP((uint32_t)a[e] - (uint32_t)b[e]);
  else if (ia) I32_LOOP((uint32_t)a[e] - (uint32_t)b[0]);
  else if (ib) I32_LOOP((uint32_t)a[0] - (uint32_t)b[e]);
  else I32_LOOP((uint32_t)a[0] - (uint32_t)b[0]);
}

static void i32_mul_row(const int32_t *restrict a, int64_t ia, const int32_t *restrict b, int64_t ib,
                        int32_t *restrict y, int64_t n) {
  if (ia && ib) I32_LOOP((uint32_t)a[e] * (uint32_t)b[e]);
  else if (ia) I32_LOOP((uint32_t)a[e] * (uint32_t)b[0]);
  else if (ib) I32_LOOP((uint32_t)a[0] * (uint32_t)b[e]);
  else I32_LOOP((uint32_t)a[0] * (uint32_t)b[0]);
}

/* n results of a (stride ia: 1 or 0) op b (stride ib). The output may be
 * an input's buffer (in place) only where it is that same element, which
 * the planner guarantees; restrict holds for the rest. */
static void i32_run_row(er_binop op, const int32_t *a, int64_t ia, const int32_t *b, int64_t ib, int32_t *y,
                        int64_t n) {
  if (op == ER_BINOP_ADD) i32_add_row(a, ia, b, ib, y, n);
  else if (op == ER_BINOP_SUB) i32_sub_row(a, ia, b, ib, y, n);
  else i32_mul_row(a, ia, b, ib, y, n);
}

static inline void i32_row(const void *ctx, int64_t oa, int64_t ia, int64_t ob, int64_t ib, int64_t i, int64_t n) {
  const i32_job *j = ctx;
  i32_run_row(j->op, j->a + oa, ia, j->b + ob, ib, j->y + i, n);
}

static void i32_chunk(void *arg, int64_t begin, int64_t end) {
  const i32_job *j = arg;
  bplan_walk(j->p, begin, end, i32_row, j);
}

static er_status i32_bin_run(const er_kernel_run *kr) {
  const bin_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  er_tensor *y = ctx->out[0];
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  bplan p;
  bplan_make(ctx->in[0], ctx->in[1], y, &p);
  i32_job j = {s->op, &p, ctx->in[0]->data, ctx->in[1]->data, y->data};
  er__parallel_for(kr->pool, er__tensor_count(y), ELTWISE_GRAIN, i32_chunk, &j);
  return ER_STATUS_OK;
}

static const er_cpu_kernel k_i32_add = {"i32_add__scalar", "Add", "", i32_supports, i32_prepare, i32_bin_run, free};
static const er_cpu_kernel k_i32_sub = {"i32_sub__scalar", "Sub", "", i32_supports, i32_prepare, i32_bin_run, free};
static const er_cpu_kernel k_i32_mul = {"i32_mul__scalar", "Mul", "", i32_supports, i32_prepare, i32_bin_run, free};

/* ======================================================================== */
/* Equal, Greater, Less, GreaterOrEqual, LessOrEqual                         */
/* ======================================================================== */

/* float, int32 and int64 operands: the masks exported graphs build
 * (magika's one-hot input, Equal of [1, 2048, 1] indices against a
 * [1, 1, 257] range, 116 us on the reference's per-element broadcast walk;
 * sequence masks from Less). The arithmetic ops' broadcast plan, rows in
 * blocks of vector compares, bool bytes 0/1 out. NaN
 * compares false, as C's operators do in the reference. */
typedef enum cmp_kind { CMPK_EQ, CMPK_GT, CMPK_LT, CMPK_GE, CMPK_LE } cmp_kind;

static bool cmp_of(const char *op, int version, cmp_kind *k) {
  /* Versions before 7 broadcast by attributes. */
  if (version < 7) return false;
  if (strcmp(op, "Equal") == 0) *k = CMPK_EQ;
  else if (strcmp(op, "Greater") == 0) *k = CMPK_GT;
  else if (strcmp(op, "Less") == 0) *k = CMPK_LT;
  else if (strcmp(op, "GreaterOrEqual") == 0) *k = CMPK_GE;
  else if (strcmp(op, "LessOrEqual") == 0) *k = CMPK_LE;
  else return false;
  return true;
}

static int cmp_type(er_dtype t) {
  return t == ER_DTYPE_FLOAT ? 0 : t == ER_DTYPE_INT32 ? 1 : t == ER_DTYPE_INT64 ? 2 : -1;
}

static bool cmp_supports(const er_kernel_info *ki) {
  cmp_kind k;
  if (ki->n_in != 2 || ki->n_out != 1 || !ki->out[0] || ki->out[0]->dtype != ER_DTYPE_BOOL) return false;
  if (!cmp_of(ki->node->op_type, ki->node->version, &k) || !ki->in[0] || !ki->in[1]) return false;
  return ki->in[0]->dtype == ki->in[1]->dtype && cmp_type(ki->in[0]->dtype) >= 0;
}

/* The rows without vectors (CPUs without AVX2, Arm): one compare per
 * element; cmp-avx2.c has the vector rows. */
#define CMP_ROW(NAME, T, OP)                                                                          \
  static void NAME(const void *av, int64_t ia, const void *bv, int64_t ib, uint8_t *restrict y, int64_t n) { \
    const T *restrict a = av, *restrict b = bv;                                                       \
    for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)(a[ia ? i : 0] OP b[ib ? i : 0]);                 \
  }
#define CMP_ROWS(SFX, T)                                                                              \
  CMP_ROW(cmp_eq_##SFX, T, ==)                                                                        \
  CMP_ROW(cmp_gt_##SFX, T, >)                                                                         \
  CMP_ROW(cmp_lt_##SFX, T, <)                                                                         \
  CMP_ROW(cmp_ge_##SFX, T, >=)                                                                        \
  CMP_ROW(cmp_le_##SFX, T, <=)
CMP_ROWS(f32, float)
CMP_ROWS(i32, int32_t)
CMP_ROWS(i64, int64_t)

static const er_cmp_row_fn cmp_rows_scalar[3][ER_CMP_KINDS] = {
    {cmp_eq_f32, cmp_gt_f32, cmp_lt_f32, cmp_ge_f32, cmp_le_f32},
    {cmp_eq_i32, cmp_gt_i32, cmp_lt_i32, cmp_ge_i32, cmp_le_i32},
    {cmp_eq_i64, cmp_gt_i64, cmp_lt_i64, cmp_ge_i64, cmp_le_i64},
};

typedef struct cmp_job {
  er_cmp_row_fn row;
  size_t es;
  const bplan *p;
  const uint8_t *a, *b;
  uint8_t *y;
} cmp_job;

static inline void cmp_row(const void *ctx, int64_t oa, int64_t ia, int64_t ob, int64_t ib, int64_t i, int64_t n) {
  const cmp_job *j = ctx;
  j->row(j->a + (size_t)oa * j->es, ia, j->b + (size_t)ob * j->es, ib, j->y + i, n);
}

static void cmp_chunk(void *arg, int64_t begin, int64_t end) {
  const cmp_job *j = arg;
  bplan_walk(j->p, begin, end, cmp_row, j);
}

static er_status cmp_run(const er_kernel_run *kr, const er_cmp_row_fn (*rows)[ER_CMP_KINDS]) {
  er_kctx *ctx = kr->ctx;
  er_tensor *y = ctx->out[0];
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  cmp_kind k;
  cmp_of(ctx->node->op_type, ctx->node->version, &k);
  const er_tensor *a = ctx->in[0], *b = ctx->in[1];
  bplan p;
  bplan_make(a, b, y, &p);
  cmp_job j = {rows[cmp_type(a->dtype)][k], er_dtype_size(a->dtype), &p, a->data, b->data, y->data};
  er__parallel_for(kr->pool, er__tensor_count(y), ELTWISE_GRAIN, cmp_chunk, &j);
  return ER_STATUS_OK;
}

static er_status cmp_run_scalar(const er_kernel_run *kr) { return cmp_run(kr, cmp_rows_scalar); }

#define CMP_KERNELS(SFX, ISA, RUN, OK)                                                                \
  static bool cmp_supports_##SFX(const er_kernel_info *ki) { return (OK) && cmp_supports(ki); }       \
  static const er_cpu_kernel k_equal_##SFX = {"any_equal__" ISA, "Equal", "", cmp_supports_##SFX, NULL, RUN, NULL}; \
  static const er_cpu_kernel k_greater_##SFX = {"any_greater__" ISA, "Greater", "", cmp_supports_##SFX, NULL, RUN,  \
                                                NULL};                                                \
  static const er_cpu_kernel k_less_##SFX = {"any_less__" ISA, "Less", "", cmp_supports_##SFX, NULL, RUN, NULL};    \
  static const er_cpu_kernel k_greater_equal_##SFX = {"any_greater_equal__" ISA, "GreaterOrEqual", "",              \
                                                      cmp_supports_##SFX, NULL, RUN, NULL};           \
  static const er_cpu_kernel k_less_equal_##SFX = {"any_less_equal__" ISA, "LessOrEqual", "", cmp_supports_##SFX,   \
                                                   NULL, RUN, NULL};
#define CMP_LIST(SFX) &k_equal_##SFX, &k_greater_##SFX, &k_less_##SFX, &k_greater_equal_##SFX, &k_less_equal_##SFX,

#if defined(__x86_64__) || defined(__i386__)
static er_status cmp_run_avx2(const er_kernel_run *kr) { return cmp_run(kr, er__cmp_rows_avx2); }
CMP_KERNELS(avx2, "avx2", cmp_run_avx2, ki->cpu->avx2 && ki->cpu->fma && ki->cpu->f16c)
#endif
CMP_KERNELS(scalar, "scalar", cmp_run_scalar, true)

/* ======================================================================== */
/* Cast                                                                      */
/* ======================================================================== */

/* The reference's conversion (er__cast_elements) over element ranges on
 * the workers, written straight into the planned output: the same values
 * by construction. Taken between the common numeric types; float8 and
 * strings stay on the reference. */
static bool cast_type_ok(er_dtype t) {
  switch (t) {
    case ER_DTYPE_FLOAT:
    case ER_DTYPE_DOUBLE:
    case ER_DTYPE_FLOAT16:
    case ER_DTYPE_INT8:
    case ER_DTYPE_UINT8:
    case ER_DTYPE_INT16:
    case ER_DTYPE_UINT16:
    case ER_DTYPE_INT32:
    case ER_DTYPE_UINT32:
    case ER_DTYPE_INT64:
    case ER_DTYPE_UINT64:
    case ER_DTYPE_BOOL: return true;
    default: return false;
  }
}

static bool cast_supports(const er_kernel_info *ki) {
  return ki->node->version >= 6 && ki->n_in == 1 && ki->n_out == 1 && ki->in[0] && ki->out[0] &&
         cast_type_ok(ki->in[0]->dtype) && cast_type_ok(ki->out[0]->dtype);
}

typedef struct cast_job {
  const uint8_t *x;
  uint8_t *y;
  er_dtype xt, yt;
  size_t xs, ys;
} cast_job;

/* int32 and uint8 to float (the casts of quantize_dynamic models) and bool
 * to float (one-hot masks), in loops GCC vectorizes (see ER_I32_BLOCK);
 * (float) rounds to nearest even, as the reference's. */
static void i32_to_f32(const int32_t *restrict x, float *restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + ER_I32_BLOCK <= n; i += ER_I32_BLOCK)
    for (int k = 0; k < ER_I32_BLOCK; k++) y[i + k] = (float)x[i + k];
  for (; i < n; i++) y[i] = (float)x[i];
}

static void u8_to_f32(const uint8_t *restrict x, float *restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + ER_I32_BLOCK <= n; i += ER_I32_BLOCK)
    for (int k = 0; k < ER_I32_BLOCK; k++) y[i + k] = (float)x[i + k];
  for (; i < n; i++) y[i] = (float)x[i];
}

static void bool_to_f32(const uint8_t *restrict x, float *restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + ER_I32_BLOCK <= n; i += ER_I32_BLOCK)
    for (int k = 0; k < ER_I32_BLOCK; k++) y[i + k] = x[i + k] ? 1.0f : 0.0f;
  for (; i < n; i++) y[i] = x[i] ? 1.0f : 0.0f;
}

static void cast_chunk(void *arg, int64_t begin, int64_t end) {
  const cast_job *j = arg;
  if (j->xt == ER_DTYPE_BOOL && j->yt == ER_DTYPE_FLOAT) {
    bool_to_f32(j->x + begin, (float *)(void *)j->y + begin, end - begin);
    return;
  }
  if (j->xt == ER_DTYPE_INT32 && j->yt == ER_DTYPE_FLOAT) {
    i32_to_f32((const int32_t *)(const void *)j->x + begin, (float *)(void *)j->y + begin, end - begin);
    return;
  }
  if (j->xt == ER_DTYPE_UINT8 && j->yt == ER_DTYPE_FLOAT) {
    u8_to_f32(j->x + begin, (float *)(void *)j->y + begin, end - begin);
    return;
  }
  er__cast_elements(j->x + (size_t)begin * j->xs, j->xt, j->y + (size_t)begin * j->ys, j->yt, end - begin, true);
}

static er_status cast_run(const er_kernel_run *kr) {
  const er_tensor *x = kr->ctx->in[0];
  er_tensor *y = kr->ctx->out[0];
  int64_t n = er__tensor_count(y);
  if (n == 0) return ER_STATUS_OK;
  if (er__tensor_count(x) != n) return er__kr_reference(kr);
  cast_job j = {x->data, y->data, x->dtype, y->dtype, er_dtype_size(x->dtype), er_dtype_size(y->dtype)};
  er__parallel_for(kr->pool, n, ELTWISE_GRAIN, cast_chunk, &j);
  return ER_STATUS_OK;
}

static const er_cpu_kernel k_cast = {"any_cast__scalar", "Cast", "", cast_supports, NULL, cast_run, NULL};

/* ======================================================================== */
/* ReduceSum, ReduceMean                                                     */
/* ======================================================================== */

/* Float32 sums and means over one contiguous run of axes, known at compile
 * time: x as [outer, r, inner], y [outer, inner]. The reference walks each
 * output's elements by strides; here inner rows are summed whole, in
 * double as the reference does (its order: the reduced elements in index
 * order; here the same per output, in lanes for a reduced last axis), and
 * outputs are split over the workers. JAX exports write LayerNorm this way
 * (Magika: ReduceSum over the middle axis of [1, 2048, 64]). */
typedef struct red_state {
  int a0, a1;           /* reduced axes [a0, a1] of the known rank */
  int rank;
  bool mean;
} red_state;

static bool red_axes(const er_kernel_info *ki, red_state *s) {
  const er_tensor *x = er__ki_in(ki, 0);
  if (!x || x->dtype != ER_DTYPE_FLOAT || x->rank < 1 || ki->n_out != 1 || !ki->out[0] ||
      ki->out[0]->dtype != ER_DTYPE_FLOAT)
    return false;
  bool sum = strcmp(ki->node->op_type, "ReduceSum") == 0;
  int since = sum ? 13 : 18;
  const int64_t *ax = NULL;
  int64_t n = 0;
  if (ki->node->version >= since) {
    const er_tensor *t = er__ki_in(ki, 1);
    if (!t || !t->data || t->dtype != ER_DTYPE_INT64) return false;
    ax = t->data;
    n = er__tensor_count(t);
  } else {
    er_kctx ctx = er__ki_ctx(ki);
    if (er__attr_ints(&ctx, "axes", &ax, &n) != ER_STATUS_OK || !ax) return false;
  }
  if (n < 1 || n > ER_MAX_RANK) return false;
  bool mask[ER_MAX_RANK] = {false};
  for (int64_t i = 0; i < n; i++) {
    int64_t a = ax[i] < 0 ? ax[i] + x->rank : ax[i];
    if (a < 0 || a >= x->rank) return false;
    mask[a] = true;
  }
  int a0 = -1, a1 = -1;
  for (int d = 0; d < x->rank; d++)
    if (mask[d]) {
      if (a0 < 0) a0 = d;
      else if (a1 != d - 1) return false;   /* not one run */
      a1 = d;
    }
  s->a0 = a0, s->a1 = a1, s->rank = x->rank;
  s->mean = !sum;
  return true;
}

static bool red_supports(const er_kernel_info *ki) {
  red_state s;
  return red_axes(ki, &s);
}

static er_status red_prepare(const er_kernel_info *ki, void **state_out, size_t *scratch_out) {
  red_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a reduction kernel");
  red_axes(ki, s);
  *scratch_out = 0;
  *state_out = s;
  return ER_STATUS_OK;
}

#define RED_COLS 256   /* inner columns summed together (doubles on the stack) */

typedef struct red_job {
  const float *x;
  float *y;
  int64_t outer, r, inner, col_blocks;
  double div;           /* 1, or r for a mean (divided in double, as the reference) */
} red_job;

/* Outputs of a reduced last axis: contiguous runs of r. */
static void red_rows(void *arg, int64_t begin, int64_t end) {
  const red_job *j = arg;
  for (int64_t o = begin; o < end; o++) {
    const float *restrict x = j->x + o * j->r;
    double acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= j->r; i += 16)
      for (int k = 0; k < 16; k++) acc[k] += x[i + k];
    double t = 0;
    for (int k = 0; k < 16; k++) t += acc[k];
    for (; i < j->r; i++) t += x[i];
    j->y[o] = (float)(t / j->div);
  }
}

/* Outputs with inner columns: unit u is one outer index and one block of
 * up to RED_COLS columns, summed down the reduced rows. */
static void red_cols(void *arg, int64_t begin, int64_t end) {
  const red_job *j = arg;
  for (int64_t u = begin; u < end; u++) {
    int64_t o = u / j->col_blocks, c0 = u % j->col_blocks * RED_COLS;
    int64_t nc = j->inner - c0 < RED_COLS ? j->inner - c0 : RED_COLS;
    double acc[RED_COLS];
    for (int64_t c = 0; c < nc; c++) acc[c] = 0;
    const float *x = j->x + o * j->r * j->inner + c0;
    for (int64_t q = 0; q < j->r; q++) {
      const float *restrict row = x + q * j->inner;
      int64_t c = 0;
      for (; c + 16 <= nc; c += 16)
        for (int k = 0; k < 16; k++) acc[c + k] += row[c + k];
      for (; c < nc; c++) acc[c] += row[c];
    }
    float *y = j->y + o * j->inner + c0;
    for (int64_t c = 0; c < nc; c++) y[c] = (float)(acc[c] / j->div);
  }
}

static er_status red_run(const er_kernel_run *kr) {
  const red_state *s = kr->state;
  const er_tensor *x = kr->ctx->in[0];
  er_tensor *y = kr->ctx->out[0];
  if (x->rank != s->rank) return er__kr_reference(kr);
  int64_t outer = 1, r = 1, inner = 1;
  for (int d = 0; d < x->rank; d++) {
    if (d < s->a0) outer *= x->dims[d];
    else if (d <= s->a1) r *= x->dims[d];
    else inner *= x->dims[d];
  }
  /* The mean of nothing, and empty outputs: the reference's business. */
  if (r == 0 || er__tensor_count(y) != outer * inner) return er__kr_reference(kr);
  if (outer * inner == 0) return ER_STATUS_OK;
  red_job j = {x->data, y->data, outer, r, inner, (inner + RED_COLS - 1) / RED_COLS,
               s->mean ? (double)r : 1.0};
  if (inner == 1)
    er__parallel_for(kr->pool, outer, max64(1, ELTWISE_GRAIN / r), red_rows, &j);
  else
    er__parallel_for(kr->pool, outer * j.col_blocks, max64(1, ELTWISE_GRAIN / (r * min64(inner, RED_COLS))),
                     red_cols, &j);
  return ER_STATUS_OK;
}

static const er_cpu_kernel k_reduce_sum = {"f32_reduce_sum__scalar", "ReduceSum", "", red_supports, red_prepare,
                                           red_run, free};
static const er_cpu_kernel k_reduce_mean = {"f32_reduce_mean__scalar", "ReduceMean", "", red_supports,
                                            red_prepare, red_run, free};

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

#define UNARY_KERNEL(NAME, OP, SFX, ISA, VO, ISA_OK)                                               \
  static const er_cpu_kernel k_##NAME##_##SFX = {"f32_" #NAME "__" ISA, OP, "", un_supports_##SFX,  \
                                                un_prepare_##SFX, un_run, free};
#define BINARY_KERNEL(NAME, OP, SFX, ISA, VO, ISA_OK)                                              \
  static const er_cpu_kernel k_##NAME##_##SFX = {"f32_" #NAME "__" ISA, OP, "", bin_supports_##SFX, \
                                                bin_prepare_##SFX, bin_run, free};

#define ELTWISE_KERNELS(SFX, ISA, VO, ISA_OK)                                                           \
  static bool un_supports_##SFX(const er_kernel_info *ki) { return un_supports(ki, ISA_OK(ki->cpu)); }  \
  static er_status un_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {             \
    return un_prepare(ki, &VO, st, scratch);                                                            \
  }                                                                                                     \
  static bool bin_supports_##SFX(const er_kernel_info *ki) { return bin_supports(ki, ISA_OK(ki->cpu)); } \
  static er_status bin_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {            \
    return bin_prepare(ki, &VO, st, scratch);                                                           \
  }                                                                                                     \
  UNARY_KERNEL(relu, "Relu", SFX, ISA, VO, ISA_OK)                                                      \
  UNARY_KERNEL(sigmoid, "Sigmoid", SFX, ISA, VO, ISA_OK)                                                \
  UNARY_KERNEL(tanh, "Tanh", SFX, ISA, VO, ISA_OK)                                                      \
  UNARY_KERNEL(clip, "Clip", SFX, ISA, VO, ISA_OK)                                                      \
  UNARY_KERNEL(hardsigmoid, "HardSigmoid", SFX, ISA, VO, ISA_OK)                                        \
  UNARY_KERNEL(hardswish, "HardSwish", SFX, ISA, VO, ISA_OK)                                            \
  UNARY_KERNEL(leakyrelu, "LeakyRelu", SFX, ISA, VO, ISA_OK)                                            \
  UNARY_KERNEL(gelu, "Gelu", SFX, ISA, VO, ISA_OK)                                                      \
  UNARY_KERNEL(erf, "Erf", SFX, ISA, VO, ISA_OK)                                                        \
  UNARY_KERNEL(exp, "Exp", SFX, ISA, VO, ISA_OK)                                                        \
  UNARY_KERNEL(abs, "Abs", SFX, ISA, VO, ISA_OK)                                                        \
  UNARY_KERNEL(neg, "Neg", SFX, ISA, VO, ISA_OK)                                                        \
  UNARY_KERNEL(sqrt, "Sqrt", SFX, ISA, VO, ISA_OK)                                                      \
  UNARY_KERNEL(reciprocal, "Reciprocal", SFX, ISA, VO, ISA_OK)                                          \
  UNARY_KERNEL(log, "Log", SFX, ISA, VO, ISA_OK)                                                        \
  BINARY_KERNEL(add, "Add", SFX, ISA, VO, ISA_OK)                                                       \
  BINARY_KERNEL(sub, "Sub", SFX, ISA, VO, ISA_OK)                                                       \
  BINARY_KERNEL(mul, "Mul", SFX, ISA, VO, ISA_OK)                                                       \
  BINARY_KERNEL(div, "Div", SFX, ISA, VO, ISA_OK)                                                       \
  BINARY_KERNEL(prelu, "PRelu", SFX, ISA, VO, ISA_OK)                                                   \
  BINARY_KERNEL(sum, "Sum", SFX, ISA, VO, ISA_OK)                                                       \
  BINARY_KERNEL(max, "Max", SFX, ISA, VO, ISA_OK)                                                       \
  BINARY_KERNEL(min, "Min", SFX, ISA, VO, ISA_OK)

#define ELTWISE_LIST(SFX)                                                                         \
  &k_relu_##SFX, &k_sigmoid_##SFX, &k_tanh_##SFX, &k_clip_##SFX, &k_hardsigmoid_##SFX,             \
      &k_hardswish_##SFX, &k_leakyrelu_##SFX, &k_gelu_##SFX, &k_erf_##SFX, &k_exp_##SFX,           \
      &k_abs_##SFX, &k_neg_##SFX, &k_sqrt_##SFX, &k_reciprocal_##SFX, &k_log_##SFX, &k_add_##SFX,   \
      &k_sub_##SFX,                                                                               \
      &k_mul_##SFX, &k_div_##SFX, &k_prelu_##SFX, &k_sum_##SFX, &k_max_##SFX, &k_min_##SFX,

#if defined(__x86_64__) || defined(__i386__)
ELTWISE_KERNELS(avx512, "avx512", er__vec_avx512, er__cpu_has_avx512)
ELTWISE_KERNELS(avx2, "avx2", er__vec_avx2, er__cpu_has_avx2)
#endif
#if defined(__aarch64__)
static bool has_neon(const er_cpu_features *c) { return c->neon; }
ELTWISE_KERNELS(neon, "neon", er__vec_neon, has_neon)
#endif

const er_cpu_kernel *const er__kernels_eltwise[] = {
#if defined(__x86_64__) || defined(__i386__)
    ELTWISE_LIST(avx512) ELTWISE_LIST(avx2)
#endif
#if defined(__aarch64__)
    ELTWISE_LIST(neon)
#endif
    &k_i32_add, &k_i32_sub, &k_i32_mul, &k_cast, &k_reduce_sum, &k_reduce_mean,
#if defined(__x86_64__) || defined(__i386__)
    CMP_LIST(avx2)
#endif
    CMP_LIST(scalar)
    NULL,
};
