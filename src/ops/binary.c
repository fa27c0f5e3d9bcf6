/* binary.c - elementwise operators with broadcasting: arithmetic, power and
 * modulo, comparison, logic, bit operations, the variadic Max/Min/Sum/Mean,
 * Where and PRelu.
 *
 * Every kernel walks its broadcast as rows: the output's dims are coalesced
 * (size-1 dims dropped, neighbouring dims merged where every input is
 * contiguous across them), and the innermost remaining dim is a row along
 * which each input steps by 1 or stays put (step 0). Equal shapes and
 * scalar operands therefore become a single long row, and each row runs a
 * loop typed for the element type, specialised on which operands stay put
 * so that the float32 paths vectorize.
 *
 * Numerics: float32 and float64 compute in their own type where IEEE
 * rounding makes that exact (+ - * /, comparisons, fmod) and in double
 * otherwise (pow); float16 and bfloat16 compute in double and round once
 * on store. Integers wrap in two's complement (computed in uint64 for
 * + - *); integer division and modulo by zero are run-time errors. */
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Row walker                                                                */
/* ======================================================================== */

#define ROWS_MAX_IN 3

/* A broadcast of up to three inputs onto an output, walked as rows. */
typedef struct rows {
  int n;                                    /* inputs */
  int outer;                                /* dims outside the row */
  int64_t dims[ER_MAX_RANK];                /* [outer] */
  int64_t strides[ROWS_MAX_IN][ER_MAX_RANK];/* [n][outer] elements; 0 = broadcast */
  int64_t idx[ER_MAX_RANK];                 /* [outer] position of the current row */
  int64_t off[ROWS_MAX_IN];                 /* element offset of the row start per input */
  int64_t len;                              /* elements per row */
  int64_t step[ROWS_MAX_IN];                /* 0 or 1: element step along the row */
  int64_t count;                            /* rows; the output holds count * len */
} rows;

/* Sets up the walk of `out` (fully shaped) from inputs that broadcast to it
 * (check() has verified that they do). */
static void rows_init(rows *w, int n, const er_tensor *const *ins, const er_tensor *out) {
  int64_t in_st[ROWS_MAX_IN][ER_MAX_RANK];
  int64_t dims[ER_MAX_RANK], st[ROWS_MAX_IN][ER_MAX_RANK];
  int m = 0;
  ER_ASSERT(n >= 1 && n <= ROWS_MAX_IN);
  memset(w, 0, sizeof *w);
  w->n = n;
  for (int k = 0; k < n; k++) er__strides(ins[k]->rank, ins[k]->dims, in_st[k]);

  /* Size-1 output dims are dropped; a dim joins the one outside it when
   * every input is contiguous across the pair (true also when both are
   * broadcast, stride 0). */
  for (int d = 0; d < out->rank; d++) {
    if (out->dims[d] == 1) continue;
    int64_t s[ROWS_MAX_IN];
    for (int k = 0; k < n; k++) {
      const er_tensor *t = ins[k];
      int o = d - (out->rank - t->rank);
      s[k] = (o < 0 || t->dims[o] == 1) ? 0 : in_st[k][o];
    }
    bool merge = m > 0;
    for (int k = 0; k < n && merge; k++) merge = st[k][m - 1] == s[k] * out->dims[d];
    if (merge) {
      dims[m - 1] *= out->dims[d];
      for (int k = 0; k < n; k++) st[k][m - 1] = s[k];
    } else {
      dims[m] = out->dims[d];
      for (int k = 0; k < n; k++) st[k][m] = s[k];
      m++;
    }
  }

  int64_t total = er__count(out);
  if (total == 0) return; /* count = 0: nothing to walk */
  if (m == 0) {
    w->len = 1;
    w->count = 1;
    return;
  }
  w->len = dims[m - 1];
  for (int k = 0; k < n; k++) w->step[k] = st[k][m - 1];
  w->outer = m - 1;
  for (int d = 0; d < w->outer; d++) {
    w->dims[d] = dims[d];
    for (int k = 0; k < n; k++) w->strides[k][d] = st[k][d];
  }
  w->count = total / w->len;
}

/* Moves to the next row (row-major over the outer dims). */
static void rows_next(rows *w) {
  for (int d = w->outer - 1; d >= 0; d--) {
    for (int k = 0; k < w->n; k++) w->off[k] += w->strides[k][d];
    if (++w->idx[d] < w->dims[d]) return;
    for (int k = 0; k < w->n; k++) w->off[k] -= w->strides[k][d] * w->dims[d];
    w->idx[d] = 0;
  }
}

/* One row of BCAST2_TYPED: LOADS declares `a` and/or `b` for element k_.
 * Blocks of 8 are computed into a local array before they are stored, so
 * that no store can alias a later load of the block; gcc's -O2 vectorizer
 * (which takes no run-time alias checks and no remainder loops) then turns
 * a block into a few SIMD instructions. The tail runs element by element. */
#define ROW_BLOCKED_(TY, LOADS, EXPR)                                                   \
  {                                                                                     \
    int64_t i_ = 0;                                                                     \
    for (; i_ + 8 <= n_; i_ += 8) {                                                     \
      TY t_[8];                                                                         \
      for (int j_ = 0; j_ < 8; j_++) {                                                  \
        const int64_t k_ = i_ + j_;                                                     \
        LOADS t_[j_] = (TY)(EXPR);                                                      \
      }                                                                                 \
      for (int j_ = 0; j_ < 8; j_++) ry_[i_ + j_] = t_[j_];                             \
    }                                                                                   \
    for (; i_ < n_; i_++) {                                                             \
      const int64_t k_ = i_;                                                            \
      LOADS ry_[k_] = (TY)(EXPR);                                                       \
    }                                                                                   \
  }

/* Runs EXPR, an expression in `a` (type TA) and `b` (type TB), over every
 * output element of the walk `w` (a rows *), storing it as TY. pa, pb and
 * py are the data pointers. pa may equal py (in-place accumulation). Each
 * row is specialised on which operands stay put along it. */
#define BCAST2_TYPED(w, TA, TB, TY, pa, pb, py, EXPR)                                   \
  do {                                                                                  \
    for (int64_t r_ = 0; r_ < (w)->count; r_++, rows_next(w)) {                         \
      const TA *ra_ = (const TA *)(pa) + (w)->off[0];                                   \
      const TB *rb_ = (const TB *)(pb) + (w)->off[1];                                   \
      TY *ry_ = (TY *)(py) + r_ * (w)->len;                                             \
      const int64_t n_ = (w)->len;                                                      \
      if ((w)->step[0] && (w)->step[1]) {                                               \
        ROW_BLOCKED_(TY, const TA a = ra_[k_]; const TB b = rb_[k_];, EXPR)             \
      } else if ((w)->step[0]) {                                                        \
        const TB b = rb_[0];                                                            \
        ROW_BLOCKED_(TY, const TA a = ra_[k_];, EXPR)                                   \
      } else if ((w)->step[1]) {                                                        \
        const TA a = ra_[0];                                                            \
        ROW_BLOCKED_(TY, const TB b = rb_[k_];, EXPR)                                   \
      } else {                                                                          \
        const TA a = ra_[0];                                                            \
        const TB b = rb_[0];                                                            \
        const TY v_ = (TY)(EXPR);                                                       \
        for (int64_t i_ = 0; i_ < n_; i_++) ry_[i_] = v_;                               \
      }                                                                                 \
    }                                                                                   \
  } while (0)

/* The same for any element types: `a` and `b` are doubles loaded from the
 * tensors ta and tb; the double EXPR is stored into ty with the ONNX
 * conversion rules. For float16/bfloat16 and mixed-type operands. */
#define BCAST2_F64(w, ta, tb, ty, EXPR)                                                 \
  do {                                                                                  \
  for (int64_t r_ = 0; r_ < (w)->count; r_++, rows_next(w))                             \
    for (int64_t i_ = 0; i_ < (w)->len; i_++) {                                         \
      const double a = er__load_f64((ta)->data, (ta)->dtype, (w)->off[0] + i_ * (w)->step[0]); \
      const double b = er__load_f64((tb)->data, (tb)->dtype, (w)->off[1] + i_ * (w)->step[1]); \
      er__store_f64((ty)->data, (ty)->dtype, r_ * (w)->len + i_, (EXPR));               \
    }                                                                                   \
  } while (0)

/* Integer element types: (name, C type, dtype). */
#define SINT_TYPES(X)                  \
  X(i8, int8_t, ER_DTYPE_INT8)         \
  X(i16, int16_t, ER_DTYPE_INT16)      \
  X(i32, int32_t, ER_DTYPE_INT32)      \
  X(i64, int64_t, ER_DTYPE_INT64)
#define UINT_TYPES(X)                  \
  X(u8, uint8_t, ER_DTYPE_UINT8)       \
  X(u16, uint16_t, ER_DTYPE_UINT16)    \
  X(u32, uint32_t, ER_DTYPE_UINT32)    \
  X(u64, uint64_t, ER_DTYPE_UINT64)
#define INT_TYPES(X) SINT_TYPES(X) UINT_TYPES(X)

/* ======================================================================== */
/* Shared checks                                                             */
/* ======================================================================== */

/* Input i's type cannot be held by edgerun (string, complex, float4):
 * UNSUPPORTED naming it, before the op's type list would call it a
 * mismatch. */
static er_status reject_unholdable(const er_kctx *ctx, int i) {
  const er_tensor *t = er__in(ctx, i);
  if (!t || t->dtype == ER_DTYPE_UNDEFINED || er__dtype_is_numeric(t->dtype)) return ER_STATUS_OK;
  return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "input %d has type %s, which edgerun does not support",
                      i, er_dtype_name(t->dtype));
}

/* Opset 1-6 broadcasting (Add, Sub, Mul, Div, Pow, And, Or, Xor, Equal,
 * Greater, Less before opset 7): without broadcast=1 both shapes must be
 * equal; with it, B is a scalar, a tensor of one element, or a contiguous
 * run of A's dims starting at `axis` (suffix matching by default). B is
 * returned as a view (a header copy sharing B's data) re-shaped to A's
 * rank, so that numpy broadcasting then does the rest. *b_out is B itself
 * for opset 7 and later, and when B's shape is not yet known. */
static er_status legacy_operand(const er_kctx *ctx, er_tensor *view, const er_tensor **b_out) {
  const er_tensor *a = ctx->in[0], *b = ctx->in[1];
  int64_t bcast, axis;
  char sa[160], sb[160];
  *b_out = b;
  if (ctx->node->version >= 7) return ER_STATUS_OK;
  ER_CHECK(er__attr_int(ctx, "broadcast", 0, &bcast));
  if (bcast != 0 && bcast != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "broadcast is %lld; it must be 0 or 1",
                        (long long)bcast);
  if (a->rank < 0 || b->rank < 0) return ER_STATUS_OK;
  if (!bcast) {
    bool same = a->rank == b->rank;
    for (int d = 0; same && d < a->rank; d++)
      same = a->dims[d] < 0 || b->dims[d] < 0 || a->dims[d] == b->dims[d];
    if (!same)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "shapes %s and %s differ; opset %d needs equal shapes unless broadcast=1",
                          er__shape_str(a, sa, sizeof sa), er__shape_str(b, sb, sizeof sb),
                          ctx->node->version);
    return ER_STATUS_OK;
  }
  /* B with exactly one element is a scalar, whatever its rank. */
  bool one = true;
  for (int d = 0; d < b->rank; d++) one = one && b->dims[d] == 1;
  *view = *b;
  if (one) {
    view->rank = 0;
    *b_out = view;
    return ER_STATUS_OK;
  }
  if (b->rank > a->rank)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "B %s has a higher rank than A %s",
                        er__shape_str(b, sb, sizeof sb), er__shape_str(a, sa, sizeof sa));
  ER_CHECK(er__attr_int(ctx, "axis", a->rank - b->rank, &axis));
  if (axis < 0) axis += a->rank;
  if (axis < 0 || axis + b->rank > a->rank)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "axis %lld leaves no room for B %s within A %s", (long long)axis,
                        er__shape_str(b, sb, sizeof sb), er__shape_str(a, sa, sizeof sa));
  view->rank = a->rank;
  for (int d = 0; d < a->rank; d++) {
    int o = d - (int)axis;
    view->dims[d] = (o >= 0 && o < b->rank) ? b->dims[o] : 1;
    if (view->dims[d] != 1 && view->dims[d] >= 0 && a->dims[d] >= 0 && view->dims[d] != a->dims[d])
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "B %s does not match A %s at axis %lld (dim %d: %lld vs %lld)",
                          er__shape_str(b, sb, sizeof sb), er__shape_str(a, sa, sizeof sa),
                          (long long)axis, d, (long long)view->dims[d], (long long)a->dims[d]);
  }
  *b_out = view;
  return ER_STATUS_OK;
}

/* check() for a broadcasting op of two inputs: A one of `types_a`, B one of
 * `types_b` (the same type as A when `same` is set); the output has type
 * `out_type` (UNDEFINED: A's type) and the broadcast shape. */
static er_status check_broadcast2(er_kctx *ctx, const er_dtype *types_a, const er_dtype *types_b,
                                  bool same, er_dtype out_type) {
  er_tensor view;
  const er_tensor *b;
  ER_CHECK(reject_unholdable(ctx, 0));
  ER_CHECK(reject_unholdable(ctx, 1));
  ER_CHECK(er__require_type(ctx, 0, types_a));
  ER_CHECK(er__require_type(ctx, 1, types_b));
  if (same) ER_CHECK(er__require_same_type(ctx, 0, 1));
  ER_CHECK(legacy_operand(ctx, &view, &b));
  er_tensor *y = ctx->out[0];
  const er_tensor *ins[2] = {ctx->in[0], b};
  er__tensor_set(y, out_type != ER_DTYPE_UNDEFINED ? out_type : ins[0]->dtype, -1, NULL);
  return er__broadcast_shapes(ctx, 2, ins, y);
}

/* The operands of a two-input op at run time, B re-shaped for opsets
 * before 7, and the walk over the output. */
static er_status operands2(er_kctx *ctx, er_tensor *view, const er_tensor **a, const er_tensor **b,
                           rows *w) {
  *a = ctx->in[0];
  ER_CHECK(legacy_operand(ctx, view, b));
  const er_tensor *ins[2] = {*a, *b};
  rows_init(w, 2, ins, ctx->out[0]);
  return ER_STATUS_OK;
}

/* Integer division and modulo: a zero anywhere in the divisor is a
 * run-time error (C leaves it undefined; we must not crash). */
static er_status require_no_zero(const er_kctx *ctx, const er_tensor *t, const char *what) {
  int64_t n = er__count(t);
  if (!er__dtype_is_int(t->dtype) || er__count(ctx->out[0]) == 0) return ER_STATUS_OK;
  for (int64_t i = 0; i < n; i++)
    if (er__load_i64(t->data, t->dtype, i) == 0)
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                          "integer %s by zero: input B (%s) has 0 at element %lld", what,
                          er_dtype_name(t->dtype), (long long)i);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Add, Sub, Mul, Div                                                        */
/* ======================================================================== */

typedef enum arith_op { ARITH_ADD, ARITH_SUB, ARITH_MUL, ARITH_DIV } arith_op;

/* Integer kernels, one per type. + - * wrap by computing in uint64 (the low
 * bits of a sum or product do not depend on the high ones). Division
 * truncates toward zero like C; x / -1 is negation, written out because
 * INT_MIN / -1 overflows in C. Zero divisors were rejected before. */
#define DEFINE_ARITH_INT(NAME, T, DIV_EXPR)                                             \
  static void arith_##NAME(rows *w, arith_op op, const void *pa, const void *pb, void *py) { \
    switch (op) {                                                                       \
      case ARITH_ADD: BCAST2_TYPED(w, T, T, T, pa, pb, py, (uint64_t)a + (uint64_t)b); break; \
      case ARITH_SUB: BCAST2_TYPED(w, T, T, T, pa, pb, py, (uint64_t)a - (uint64_t)b); break; \
      case ARITH_MUL: BCAST2_TYPED(w, T, T, T, pa, pb, py, (uint64_t)a * (uint64_t)b); break; \
      case ARITH_DIV: BCAST2_TYPED(w, T, T, T, pa, pb, py, DIV_EXPR); break;            \
    }                                                                                   \
  }
#define SDIV_EXPR(T) (b == -1 ? (T)(0 - (uint64_t)a) : (T)(a / b))
#define DEFINE_ARITH_SINT(NAME, T, E) DEFINE_ARITH_INT(NAME, T, SDIV_EXPR(T))
#define DEFINE_ARITH_UINT(NAME, T, E) DEFINE_ARITH_INT(NAME, T, a / b)
SINT_TYPES(DEFINE_ARITH_SINT)
UINT_TYPES(DEFINE_ARITH_UINT)

/* y = a op b with a, b broadcast to y (all of y's type). Used by the
 * four ops and by Sum/Mean, which accumulate in place (a == y). */
static void arith_pair(rows *w, arith_op op, const er_tensor *xa, const er_tensor *xb, er_tensor *xy) {
  const void *pa = xa->data, *pb = xb->data;
  void *py = xy->data;
  switch (xy->dtype) {
    case ER_DTYPE_FLOAT:
      switch (op) {
        case ARITH_ADD: BCAST2_TYPED(w, float, float, float, pa, pb, py, a + b); break;
        case ARITH_SUB: BCAST2_TYPED(w, float, float, float, pa, pb, py, a - b); break;
        case ARITH_MUL: BCAST2_TYPED(w, float, float, float, pa, pb, py, a * b); break;
        case ARITH_DIV: BCAST2_TYPED(w, float, float, float, pa, pb, py, a / b); break;
      }
      break;
    case ER_DTYPE_DOUBLE:
      switch (op) {
        case ARITH_ADD: BCAST2_TYPED(w, double, double, double, pa, pb, py, a + b); break;
        case ARITH_SUB: BCAST2_TYPED(w, double, double, double, pa, pb, py, a - b); break;
        case ARITH_MUL: BCAST2_TYPED(w, double, double, double, pa, pb, py, a * b); break;
        case ARITH_DIV: BCAST2_TYPED(w, double, double, double, pa, pb, py, a / b); break;
      }
      break;
#define CASE(NAME, T, E) \
  case E: arith_##NAME(w, op, pa, pb, py); break;
      INT_TYPES(CASE)
#undef CASE
    default:
      /* float16, bfloat16: exact in double, rounded once on store. */
      switch (op) {
        case ARITH_ADD: BCAST2_F64(w, xa, xb, xy, a + b); break;
        case ARITH_SUB: BCAST2_F64(w, xa, xb, xy, a - b); break;
        case ARITH_MUL: BCAST2_F64(w, xa, xb, xy, a * b); break;
        case ARITH_DIV: BCAST2_F64(w, xa, xb, xy, a / b); break;
      }
  }
}

static er_status arith_check(er_kctx *ctx) {
  return check_broadcast2(ctx, er__types_numeric, er__types_numeric, true, ER_DTYPE_UNDEFINED);
}

static er_status arith_run(er_kctx *ctx, arith_op op) {
  er_tensor view;
  const er_tensor *a, *b;
  rows w;
  ER_CHECK(operands2(ctx, &view, &a, &b, &w));
  if (op == ARITH_DIV) ER_CHECK(require_no_zero(ctx, b, "division"));
  arith_pair(&w, op, a, b, ctx->out[0]);
  return ER_STATUS_OK;
}

static er_status add_run(er_kctx *ctx) { return arith_run(ctx, ARITH_ADD); }
static er_status sub_run(er_kctx *ctx) { return arith_run(ctx, ARITH_SUB); }
static er_status mul_run(er_kctx *ctx) { return arith_run(ctx, ARITH_MUL); }
static er_status div_run(er_kctx *ctx) { return arith_run(ctx, ARITH_DIV); }

/* Opsets 1 and 6 use the legacy broadcast attributes (see legacy_operand);
 * opset 1's consumed_inputs is an old memory hint and is ignored. Types
 * are the union over versions (opset 14's list). */
#define BINARY_DEF(VAR, NAME, MINV, MAXV, CHECK, RUN)                                   \
  static const er_op_def VAR = {                                                        \
      .name = NAME, .domain = "", .min_version = MINV, .max_version = MAXV,             \
      .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,             \
      .check = CHECK, .run = RUN,                                                       \
  };

BINARY_DEF(op_add, "Add", 1, 14, arith_check, add_run)
BINARY_DEF(op_sub, "Sub", 1, 14, arith_check, sub_run)
BINARY_DEF(op_mul, "Mul", 1, 14, arith_check, mul_run)
BINARY_DEF(op_div, "Div", 1, 14, arith_check, div_run)

/* ======================================================================== */
/* Pow                                                                       */
/* ======================================================================== */

/* Base types (T) and exponent types (T1) of Pow 15. */
static const er_dtype pow_base_types[] = {ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,
                                          ER_DTYPE_DOUBLE,  ER_DTYPE_INT32,    ER_DTYPE_INT64,
                                          ER_DTYPE_UNDEFINED};

static er_status pow_check(er_kctx *ctx) {
  /* Opset 7 wanted one type for both; 12+ lets the exponent differ. A
   * model that mixes them under opset 7 is still well defined, so it is
   * accepted. */
  return check_broadcast2(ctx, pow_base_types, er__types_numeric, false, ER_DTYPE_UNDEFINED);
}

/* base^e in 64-bit wrapping arithmetic by repeated squaring; the low bits
 * are those of the base's own width. */
static uint64_t ipow_wrap(uint64_t base, uint64_t e) {
  uint64_t r = 1;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}

/* Integer base and integer exponent. A negative exponent gives the
 * truncated 1 / base^-e: 1 for base 1, +-1 for base -1, 0 otherwise, and
 * an error for base 0 (a division by zero). */
static er_status pow_int(er_kctx *ctx, rows *w, const er_tensor *xa, const er_tensor *xb, er_tensor *xy) {
  bool e_unsigned = xb->dtype == ER_DTYPE_UINT64;
  for (int64_t r = 0; r < w->count; r++, rows_next(w))
    for (int64_t i = 0; i < w->len; i++) {
      int64_t base = er__load_i64(xa->data, xa->dtype, w->off[0] + i * w->step[0]);
      int64_t e = er__load_i64(xb->data, xb->dtype, w->off[1] + i * w->step[1]);
      int64_t v;
      if (e >= 0 || e_unsigned) {
        v = (int64_t)ipow_wrap((uint64_t)base, (uint64_t)e);
      } else if (base == 1) {
        v = 1;
      } else if (base == -1) {
        v = (e & 1) ? -1 : 1;
      } else if (base == 0) {
        return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                            "integer 0 raised to the negative power %lld (division by zero)",
                            (long long)e);
      } else {
        v = 0;
      }
      er__store_i64(xy->data, xy->dtype, r * w->len + i, v);
    }
  return ER_STATUS_OK;
}

/* True when t holds exactly one float32 element equal to v. */
static bool is_f32_scalar(const er_tensor *t, float v) {
  return t->dtype == ER_DTYPE_FLOAT && er__count(t) == 1 && ((const float *)t->data)[0] == v;
}

static er_status pow_run(er_kctx *ctx) {
  er_tensor view;
  const er_tensor *xa, *xb;
  er_tensor *xy = ctx->out[0];
  rows w;
  ER_CHECK(operands2(ctx, &view, &xa, &xb, &w));
  if (xa->dtype == ER_DTYPE_FLOAT && xb->dtype == ER_DTYPE_FLOAT) {
    /* x^2 (variance, norms) is common enough for its own loop; x*x in
     * float is the correctly rounded square. Otherwise pow in double,
     * rounded once, is at least as accurate as powf. */
    if (is_f32_scalar(xb, 2.0f))
      BCAST2_TYPED(&w, float, float, float, xa->data, xb->data, xy->data, ((void)b, a * a));
    else
      BCAST2_TYPED(&w, float, float, float, xa->data, xb->data, xy->data, pow(a, b));
  } else if (xa->dtype == ER_DTYPE_DOUBLE && xb->dtype == ER_DTYPE_DOUBLE) {
    BCAST2_TYPED(&w, double, double, double, xa->data, xb->data, xy->data, pow(a, b));
  } else if (er__dtype_is_float(xa->dtype) || er__dtype_is_float(xb->dtype)) {
    /* A float on either side computes in double; an integer base then
     * truncates the result toward zero (saturating, NaN to 0). */
    BCAST2_F64(&w, xa, xb, xy, pow(a, b));
  } else {
    return pow_int(ctx, &w, xa, xb, xy);
  }
  return ER_STATUS_OK;
}

BINARY_DEF(op_pow, "Pow", 1, 15, pow_check, pow_run)

/* ======================================================================== */
/* Mod                                                                       */
/* ======================================================================== */

/* fmod=0 on floats: like Python's %, the result takes the divisor's sign;
 * a zero result is a zero with the divisor's sign (Mod 28's rule). */
static double mod_floor_f64(double a, double b) {
  double r = fmod(a, b);
  if (r != 0) {
    if ((r < 0) != (b < 0)) r += b;
  } else {
    r = copysign(0.0, b);
  }
  return r;
}
static float mod_floor_f32(float a, float b) {
  float r = fmodf(a, b);
  if (r != 0) {
    if ((r < 0) != (b < 0)) r += b;
  } else {
    r = copysignf(0.0f, b);
  }
  return r;
}

/* Integer modulo. fmod=1 is C's %, fmod=0 moves a nonzero remainder to the
 * divisor's sign. x % -1 is 0, written out because INT_MIN % -1 overflows
 * in C. Zero divisors were rejected before. */
static int64_t mod_trunc_i64(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }
static int64_t mod_floor_i64(int64_t a, int64_t b) {
  int64_t r = mod_trunc_i64(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

#define DEFINE_MOD_SINT(NAME, T, E)                                                     \
  static void mod_##NAME(rows *w, bool cmod, const void *pa, const void *pb, void *py) { \
    if (cmod)                                                                           \
      BCAST2_TYPED(w, T, T, T, pa, pb, py, mod_trunc_i64(a, b));                        \
    else                                                                                \
      BCAST2_TYPED(w, T, T, T, pa, pb, py, mod_floor_i64(a, b));                        \
  }
/* Unsigned: both rules agree. */
#define DEFINE_MOD_UINT(NAME, T, E)                                                     \
  static void mod_##NAME(rows *w, bool cmod, const void *pa, const void *pb, void *py) { \
    ER_UNUSED(cmod);                                                                    \
    BCAST2_TYPED(w, T, T, T, pa, pb, py, a % b);                                        \
  }
SINT_TYPES(DEFINE_MOD_SINT)
UINT_TYPES(DEFINE_MOD_UINT)

static er_status mod_fmod_attr(const er_kctx *ctx, int64_t *fmod_out) {
  ER_CHECK(er__attr_int(ctx, "fmod", 0, fmod_out));
  if (*fmod_out != 0 && *fmod_out != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "fmod is %lld; it must be 0 or 1",
                        (long long)*fmod_out);
  return ER_STATUS_OK;
}

static er_status mod_check(er_kctx *ctx) {
  int64_t cmod;
  ER_CHECK(mod_fmod_attr(ctx, &cmod));
  /* Opsets 10 and 13 ask for fmod=1 on floats; fmod=0 on floats is Mod
   * 28's floor rule, which is also what numpy and onnxruntime do, so every
   * version accepts both. */
  return check_broadcast2(ctx, er__types_numeric, er__types_numeric, true, ER_DTYPE_UNDEFINED);
}

static er_status mod_run(er_kctx *ctx) {
  er_tensor view;
  const er_tensor *xa, *xb;
  er_tensor *xy = ctx->out[0];
  rows w;
  int64_t cmod;
  ER_CHECK(mod_fmod_attr(ctx, &cmod));
  ER_CHECK(operands2(ctx, &view, &xa, &xb, &w));
  ER_CHECK(require_no_zero(ctx, xb, "modulo"));
  const void *pa = xa->data, *pb = xb->data;
  void *py = xy->data;
  switch (xy->dtype) {
    case ER_DTYPE_FLOAT:
      if (cmod)
        BCAST2_TYPED(&w, float, float, float, pa, pb, py, fmodf(a, b));
      else
        BCAST2_TYPED(&w, float, float, float, pa, pb, py, mod_floor_f32(a, b));
      break;
    case ER_DTYPE_DOUBLE:
      if (cmod)
        BCAST2_TYPED(&w, double, double, double, pa, pb, py, fmod(a, b));
      else
        BCAST2_TYPED(&w, double, double, double, pa, pb, py, mod_floor_f64(a, b));
      break;
#define CASE(NAME, T, E) \
  case E: mod_##NAME(&w, cmod != 0, pa, pb, py); break;
      INT_TYPES(CASE)
#undef CASE
    default:
      if (cmod)
        BCAST2_F64(&w, xa, xb, xy, fmod(a, b));
      else
        BCAST2_F64(&w, xa, xb, xy, mod_floor_f64(a, b));
  }
  return ER_STATUS_OK;
}

BINARY_DEF(op_mod, "Mod", 10, 28, mod_check, mod_run)

/* ======================================================================== */
/* Equal, Greater, Less, GreaterOrEqual, LessOrEqual                         */
/* ======================================================================== */

typedef enum cmp_op { CMP_EQ, CMP_GT, CMP_LT, CMP_GE, CMP_LE } cmp_op;

/* Output bool (uint8 0/1). NaN compares false with everything, as in C. */
#define CMP_SWITCH(w, T, pa, pb, py, op)                                                \
  switch (op) {                                                                         \
    case CMP_EQ: BCAST2_TYPED(w, T, T, uint8_t, pa, pb, py, a == b); break;             \
    case CMP_GT: BCAST2_TYPED(w, T, T, uint8_t, pa, pb, py, a > b); break;              \
    case CMP_LT: BCAST2_TYPED(w, T, T, uint8_t, pa, pb, py, a < b); break;              \
    case CMP_GE: BCAST2_TYPED(w, T, T, uint8_t, pa, pb, py, a >= b); break;             \
    case CMP_LE: BCAST2_TYPED(w, T, T, uint8_t, pa, pb, py, a <= b); break;             \
  }

static er_status cmp_run(er_kctx *ctx, cmp_op op) {
  er_tensor view;
  const er_tensor *xa, *xb;
  er_tensor *xy = ctx->out[0];
  rows w;
  ER_CHECK(operands2(ctx, &view, &xa, &xb, &w));
  const void *pa = xa->data, *pb = xb->data;
  void *py = xy->data;
  switch (xa->dtype) {
    case ER_DTYPE_FLOAT: CMP_SWITCH(&w, float, pa, pb, py, op) break;
    case ER_DTYPE_DOUBLE: CMP_SWITCH(&w, double, pa, pb, py, op) break;
#define CASE(NAME, T, E) \
  case E: CMP_SWITCH(&w, T, pa, pb, py, op) break;
      INT_TYPES(CASE)
#undef CASE
    case ER_DTYPE_BOOL:
      /* Any nonzero byte is true. Only Equal takes bool. */
      BCAST2_TYPED(&w, uint8_t, uint8_t, uint8_t, pa, pb, py, (a != 0) == (b != 0));
      break;
    default:
      switch (op) {
        case CMP_EQ: BCAST2_F64(&w, xa, xb, xy, a == b); break;
        case CMP_GT: BCAST2_F64(&w, xa, xb, xy, a > b); break;
        case CMP_LT: BCAST2_F64(&w, xa, xb, xy, a < b); break;
        case CMP_GE: BCAST2_F64(&w, xa, xb, xy, a >= b); break;
        case CMP_LE: BCAST2_F64(&w, xa, xb, xy, a <= b); break;
      }
  }
  return ER_STATUS_OK;
}

static er_status equal_check(er_kctx *ctx) {
  return check_broadcast2(ctx, er__types_all, er__types_all, true, ER_DTYPE_BOOL);
}
static er_status order_check(er_kctx *ctx) {
  return check_broadcast2(ctx, er__types_numeric, er__types_numeric, true, ER_DTYPE_BOOL);
}
static er_status equal_run(er_kctx *ctx) { return cmp_run(ctx, CMP_EQ); }
static er_status greater_run(er_kctx *ctx) { return cmp_run(ctx, CMP_GT); }
static er_status less_run(er_kctx *ctx) { return cmp_run(ctx, CMP_LT); }
static er_status greater_equal_run(er_kctx *ctx) { return cmp_run(ctx, CMP_GE); }
static er_status less_equal_run(er_kctx *ctx) { return cmp_run(ctx, CMP_LE); }

/* Equal 19 adds string, which edgerun cannot hold (UNSUPPORTED). */
BINARY_DEF(op_equal, "Equal", 1, 19, equal_check, equal_run)
BINARY_DEF(op_greater, "Greater", 1, 13, order_check, greater_run)
BINARY_DEF(op_less, "Less", 1, 13, order_check, less_run)
BINARY_DEF(op_greater_equal, "GreaterOrEqual", 12, 16, order_check, greater_equal_run)
BINARY_DEF(op_less_equal, "LessOrEqual", 12, 16, order_check, less_equal_run)

/* ======================================================================== */
/* And, Or, Xor                                                              */
/* ======================================================================== */

static const er_dtype bool_types[] = {ER_DTYPE_BOOL, ER_DTYPE_UNDEFINED};

static er_status logic_check(er_kctx *ctx) {
  return check_broadcast2(ctx, bool_types, bool_types, true, ER_DTYPE_BOOL);
}

/* Any nonzero byte is true; outputs are 0 or 1. */
static er_status and_run(er_kctx *ctx) {
  er_tensor view;
  const er_tensor *xa, *xb;
  rows w;
  ER_CHECK(operands2(ctx, &view, &xa, &xb, &w));
  BCAST2_TYPED(&w, uint8_t, uint8_t, uint8_t, xa->data, xb->data, ctx->out[0]->data, (a != 0) & (b != 0));
  return ER_STATUS_OK;
}
static er_status or_run(er_kctx *ctx) {
  er_tensor view;
  const er_tensor *xa, *xb;
  rows w;
  ER_CHECK(operands2(ctx, &view, &xa, &xb, &w));
  BCAST2_TYPED(&w, uint8_t, uint8_t, uint8_t, xa->data, xb->data, ctx->out[0]->data, (a != 0) | (b != 0));
  return ER_STATUS_OK;
}
static er_status xor_run(er_kctx *ctx) {
  er_tensor view;
  const er_tensor *xa, *xb;
  rows w;
  ER_CHECK(operands2(ctx, &view, &xa, &xb, &w));
  BCAST2_TYPED(&w, uint8_t, uint8_t, uint8_t, xa->data, xb->data, ctx->out[0]->data, (a != 0) ^ (b != 0));
  return ER_STATUS_OK;
}

BINARY_DEF(op_and, "And", 1, 7, logic_check, and_run)
BINARY_DEF(op_or, "Or", 1, 7, logic_check, or_run)
BINARY_DEF(op_xor, "Xor", 1, 7, logic_check, xor_run)

/* ======================================================================== */
/* BitwiseAnd, BitwiseOr, BitwiseXor, BitShift                               */
/* ======================================================================== */

typedef enum bit_op { BIT_AND, BIT_OR, BIT_XOR } bit_op;

static er_status bitwise_check(er_kctx *ctx) {
  return check_broadcast2(ctx, er__types_int, er__types_int, true, ER_DTYPE_UNDEFINED);
}

#define BIT_SWITCH(w, T, pa, pb, py, op)                                                \
  switch (op) {                                                                         \
    case BIT_AND: BCAST2_TYPED(w, T, T, T, pa, pb, py, a & b); break;                   \
    case BIT_OR: BCAST2_TYPED(w, T, T, T, pa, pb, py, a | b); break;                    \
    case BIT_XOR: BCAST2_TYPED(w, T, T, T, pa, pb, py, a ^ b); break;                   \
  }

/* Bit operations do not care about signedness: one loop per width. */
static er_status bitwise_run(er_kctx *ctx, bit_op op) {
  er_tensor view;
  const er_tensor *xa, *xb;
  rows w;
  ER_CHECK(operands2(ctx, &view, &xa, &xb, &w));
  const void *pa = xa->data, *pb = xb->data;
  void *py = ctx->out[0]->data;
  switch (er_dtype_size(xa->dtype)) {
    case 1: BIT_SWITCH(&w, uint8_t, pa, pb, py, op) break;
    case 2: BIT_SWITCH(&w, uint16_t, pa, pb, py, op) break;
    case 4: BIT_SWITCH(&w, uint32_t, pa, pb, py, op) break;
    default: BIT_SWITCH(&w, uint64_t, pa, pb, py, op) break;
  }
  return ER_STATUS_OK;
}

static er_status bitwise_and_run(er_kctx *ctx) { return bitwise_run(ctx, BIT_AND); }
static er_status bitwise_or_run(er_kctx *ctx) { return bitwise_run(ctx, BIT_OR); }
static er_status bitwise_xor_run(er_kctx *ctx) { return bitwise_run(ctx, BIT_XOR); }

BINARY_DEF(op_bitwise_and, "BitwiseAnd", 18, 18, bitwise_check, bitwise_and_run)
BINARY_DEF(op_bitwise_or, "BitwiseOr", 18, 18, bitwise_check, bitwise_or_run)
BINARY_DEF(op_bitwise_xor, "BitwiseXor", 18, 18, bitwise_check, bitwise_xor_run)

/* direction: true for LEFT. */
static er_status bitshift_direction(const er_kctx *ctx, bool *left) {
  const char *dir;
  ER_CHECK(er__attr_string(ctx, "direction", NULL, &dir));
  if (!dir)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "attribute 'direction' is required (\"LEFT\" or \"RIGHT\")");
  if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "direction is \"%s\"; it must be \"LEFT\" or \"RIGHT\"", dir);
  *left = dir[0] == 'L';
  return ER_STATUS_OK;
}

static er_status bitshift_check(er_kctx *ctx) {
  bool left;
  ER_CHECK(bitshift_direction(ctx, &left));
  /* Opset 11 takes unsigned types only; 28 adds signed ones with an
   * arithmetic right shift. Signed inputs get the opset 28 meaning under
   * every version. */
  return check_broadcast2(ctx, er__types_int, er__types_int, true, ER_DTYPE_UNDEFINED);
}

/* Shifts by the type's width or more (or by a negative amount) leave only
 * what the sign fill gives: 0, or -1 for a right shift of a negative
 * value. Left shifts go through uint64 so bits shifted past the sign bit
 * are simply dropped; signed right shifts are arithmetic (gcc and clang
 * define >> on negative values that way). */
#define DEFINE_SHIFT_SINT(NAME, T, E)                                                   \
  static void shift_##NAME(rows *w, bool left, const void *pa, const void *pb, void *py) { \
    const int bits_ = (int)(8 * sizeof(T));                                             \
    if (left)                                                                           \
      BCAST2_TYPED(w, T, T, T, pa, pb, py,                                              \
                   (b < 0 || b >= bits_) ? 0 : (T)((uint64_t)a << b));                  \
    else                                                                                \
      BCAST2_TYPED(w, T, T, T, pa, pb, py,                                              \
                   (b < 0 || b >= bits_) ? (a < 0 ? -1 : 0) : (T)(a >> b));             \
  }
#define DEFINE_SHIFT_UINT(NAME, T, E)                                                   \
  static void shift_##NAME(rows *w, bool left, const void *pa, const void *pb, void *py) { \
    const uint64_t bits_ = 8 * sizeof(T);                                               \
    if (left)                                                                           \
      BCAST2_TYPED(w, T, T, T, pa, pb, py, (uint64_t)b >= bits_ ? 0 : (uint64_t)a << b);\
    else                                                                                \
      BCAST2_TYPED(w, T, T, T, pa, pb, py, (uint64_t)b >= bits_ ? 0 : (uint64_t)a >> b);\
  }
SINT_TYPES(DEFINE_SHIFT_SINT)
UINT_TYPES(DEFINE_SHIFT_UINT)

static er_status bitshift_run(er_kctx *ctx) {
  er_tensor view;
  const er_tensor *xa, *xb;
  rows w;
  bool left = false;
  ER_CHECK(bitshift_direction(ctx, &left));
  ER_CHECK(operands2(ctx, &view, &xa, &xb, &w));
  const void *pa = xa->data, *pb = xb->data;
  void *py = ctx->out[0]->data;
  switch (xa->dtype) {
#define CASE(NAME, T, E) \
  case E: shift_##NAME(&w, left, pa, pb, py); break;
    INT_TYPES(CASE)
#undef CASE
    default: ER_ASSERT(!"BitShift: check() admits integers only");
  }
  return ER_STATUS_OK;
}

BINARY_DEF(op_bitshift, "BitShift", 11, 28, bitshift_check, bitshift_run)

/* ======================================================================== */
/* Max, Min, Sum, Mean (variadic)                                            */
/* ======================================================================== */

/* check() for the variadic ops: 1..N inputs of one type from `types`,
 * broadcast together. */
static er_status check_variadic(er_kctx *ctx, const er_dtype *types) {
  for (int i = 0; i < ctx->n_in; i++) {
    if (!ctx->in[i])
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input %d is empty; every input is required", i);
    ER_CHECK(reject_unholdable(ctx, i));
    ER_CHECK(er__require_type(ctx, i, types));
    ER_CHECK(er__require_same_type(ctx, 0, i));
  }
  er_tensor *y = ctx->out[0];
  er__tensor_set(y, ctx->in[0]->dtype, -1, NULL);
  return er__broadcast_shapes(ctx, ctx->n_in, (const er_tensor *const *)ctx->in, y);
}

static er_status minmax_check(er_kctx *ctx) { return check_variadic(ctx, er__types_numeric); }
static er_status summean_check(er_kctx *ctx) { return check_variadic(ctx, er__types_float); }

/* Copies x, broadcast, into y (same type). */
static void copy_bcast(const er_tensor *x, er_tensor *y) {
  size_t es = er_dtype_size(y->dtype);
  if (er__count(x) == er__count(y)) {
    memcpy(y->data, x->data, (size_t)er__count(y) * es);
    return;
  }
  rows w;
  const er_tensor *ins[1] = {x};
  rows_init(&w, 1, ins, y);
  for (int64_t r = 0; r < w.count; r++, rows_next(&w))
    for (int64_t i = 0; i < w.len; i++)
      memcpy((char *)y->data + (size_t)(r * w.len + i) * es,
             (const char *)x->data + (size_t)(w.off[0] + i * w.step[0]) * es, es);
}

/* Max and Min propagate NaN (numpy's maximum/minimum, onnxruntime since
 * opset 12): a NaN in either operand gives NaN. */
#define FMAX(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define FMIN(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))

/* y = max(a, b) or min(a, b), broadcast; a may be y. */
static void minmax_pair(bool is_max, const er_tensor *xa, const er_tensor *xb, er_tensor *xy) {
  rows w;
  const er_tensor *ins[2] = {xa, xb};
  const void *pa = xa->data, *pb = xb->data;
  void *py = xy->data;
  rows_init(&w, 2, ins, xy);
  switch (xy->dtype) {
    case ER_DTYPE_FLOAT:
      if (is_max)
        BCAST2_TYPED(&w, float, float, float, pa, pb, py, FMAX(a, b));
      else
        BCAST2_TYPED(&w, float, float, float, pa, pb, py, FMIN(a, b));
      break;
    case ER_DTYPE_DOUBLE:
      if (is_max)
        BCAST2_TYPED(&w, double, double, double, pa, pb, py, FMAX(a, b));
      else
        BCAST2_TYPED(&w, double, double, double, pa, pb, py, FMIN(a, b));
      break;
#define CASE(NAME, T, E)                                          \
  case E:                                                         \
    if (is_max)                                                   \
      BCAST2_TYPED(&w, T, T, T, pa, pb, py, a > b ? a : b);       \
    else                                                          \
      BCAST2_TYPED(&w, T, T, T, pa, pb, py, a < b ? a : b);       \
    break;
      INT_TYPES(CASE)
#undef CASE
    default:
      if (is_max)
        BCAST2_F64(&w, xa, xb, xy, FMAX(a, b));
      else
        BCAST2_F64(&w, xa, xb, xy, FMIN(a, b));
  }
}

/* The variadic ops fold their inputs pairwise into the output, which has
 * the broadcast shape of them all: y = in0 op in1, then y = y op in_k. */
static er_status minmax_run(er_kctx *ctx, bool is_max) {
  er_tensor *y = ctx->out[0];
  if (ctx->n_in == 1) {
    copy_bcast(ctx->in[0], y);
    return ER_STATUS_OK;
  }
  minmax_pair(is_max, ctx->in[0], ctx->in[1], y);
  for (int k = 2; k < ctx->n_in; k++) minmax_pair(is_max, y, ctx->in[k], y);
  return ER_STATUS_OK;
}

static er_status max_run(er_kctx *ctx) { return minmax_run(ctx, true); }
static er_status min_run(er_kctx *ctx) { return minmax_run(ctx, false); }

/* Sum and Mean of float16/bfloat16 accumulate in double and round once:
 * rounding after every addition would lose a bit of the 11 per input. */
static er_status sum_mean_wide(er_kctx *ctx, bool mean) {
  er_tensor *y = ctx->out[0];
  int64_t n = er__count(y);
  er_tensor acc = *y; /* [y's shape] double */
  acc.dtype = ER_DTYPE_DOUBLE;
  acc.data = er__calloc((size_t)n, sizeof(double), "Sum/Mean accumulator");
  if (!acc.data) {
    er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  for (int k = 0; k < ctx->n_in; k++) {
    rows w;
    const er_tensor *ins[2] = {&acc, ctx->in[k]};
    rows_init(&w, 2, ins, &acc);
    BCAST2_F64(&w, &acc, ctx->in[k], &acc, a + b);
  }
  const double *p = acc.data;
  for (int64_t i = 0; i < n; i++) er__store_f64(y->data, y->dtype, i, mean ? p[i] / ctx->n_in : p[i]);
  free(acc.data);
  return ER_STATUS_OK;
}

/* float32 and float64 accumulate in their own type, input by input, like
 * a chain of Adds. */
static er_status sum_mean_run(er_kctx *ctx, bool mean) {
  er_tensor *y = ctx->out[0];
  int64_t n = er__count(y);
  if (y->dtype != ER_DTYPE_FLOAT && y->dtype != ER_DTYPE_DOUBLE) return sum_mean_wide(ctx, mean);
  if (ctx->n_in == 1) {
    copy_bcast(ctx->in[0], y);
    return ER_STATUS_OK;
  }
  for (int k = 1; k < ctx->n_in; k++) {
    rows w;
    const er_tensor *a = k == 1 ? ctx->in[0] : y;
    const er_tensor *ins[2] = {a, ctx->in[k]};
    rows_init(&w, 2, ins, y);
    arith_pair(&w, ARITH_ADD, a, ctx->in[k], y);
  }
  if (!mean) return ER_STATUS_OK;
  if (y->dtype == ER_DTYPE_FLOAT) {
    float *p = y->data;
    for (int64_t i = 0; i < n; i++) p[i] = (float)((double)p[i] / ctx->n_in);
  } else {
    double *p = y->data;
    for (int64_t i = 0; i < n; i++) p[i] /= ctx->n_in;
  }
  return ER_STATUS_OK;
}

static er_status sum_run(er_kctx *ctx) { return sum_mean_run(ctx, false); }
static er_status mean_run(er_kctx *ctx) { return sum_mean_run(ctx, true); }

/* Opsets 1 and 6 required equal shapes (a case of opset 8's broadcasting)
 * and opset 1's consumed_inputs is an ignored memory hint, so one def
 * covers every version. Integer Max/Min came with opset 12; accepting
 * them earlier is harmless. */
#define VARIADIC_DEF(VAR, NAME, MAXV, CHECK, RUN)                                       \
  static const er_op_def VAR = {                                                        \
      .name = NAME, .domain = "", .min_version = 1, .max_version = MAXV,                \
      .min_inputs = 1, .max_inputs = ER_VARIADIC, .min_outputs = 1, .max_outputs = 1,   \
      .check = CHECK, .run = RUN,                                                       \
  };

VARIADIC_DEF(op_max, "Max", 13, minmax_check, max_run)
VARIADIC_DEF(op_min, "Min", 13, minmax_check, min_run)
VARIADIC_DEF(op_sum, "Sum", 13, summean_check, sum_run)
VARIADIC_DEF(op_mean, "Mean", 13, summean_check, mean_run)

/* ======================================================================== */
/* Where                                                                     */
/* ======================================================================== */

static er_status where_check(er_kctx *ctx) {
  ER_CHECK(er__require_type(ctx, 0, bool_types));
  ER_CHECK(reject_unholdable(ctx, 1));
  ER_CHECK(reject_unholdable(ctx, 2));
  ER_CHECK(er__require_type(ctx, 1, er__types_all));
  ER_CHECK(er__require_type(ctx, 2, er__types_all));
  ER_CHECK(er__require_same_type(ctx, 1, 2));
  er_tensor *y = ctx->out[0];
  er__tensor_set(y, ctx->in[1]->dtype, -1, NULL);
  return er__broadcast_shapes(ctx, 3, (const er_tensor *const *)ctx->in, y);
}

/* Selection moves bits: one loop per element width. */
#define WHERE_LOOP(w, T, pc, px, pz, py)                                                \
  do {                                                                                  \
  for (int64_t r_ = 0; r_ < (w)->count; r_++, rows_next(w)) {                           \
    const uint8_t *rc_ = (const uint8_t *)(pc) + (w)->off[0];                           \
    const T *rx_ = (const T *)(px) + (w)->off[1];                                       \
    const T *rz_ = (const T *)(pz) + (w)->off[2];                                       \
    T *ry_ = (T *)(py) + r_ * (w)->len;                                                 \
    for (int64_t i_ = 0; i_ < (w)->len; i_++)                                           \
      ry_[i_] = rc_[i_ * (w)->step[0]] ? rx_[i_ * (w)->step[1]] : rz_[i_ * (w)->step[2]]; \
  }                                                                                     \
  } while (0)

static er_status where_run(er_kctx *ctx) {
  const er_tensor *c = ctx->in[0], *x = ctx->in[1], *z = ctx->in[2];
  er_tensor *y = ctx->out[0];
  rows w;
  const er_tensor *ins[3] = {c, x, z};
  rows_init(&w, 3, ins, y);
  switch (er_dtype_size(y->dtype)) {
    case 1: WHERE_LOOP(&w, uint8_t, c->data, x->data, z->data, y->data); break;
    case 2: WHERE_LOOP(&w, uint16_t, c->data, x->data, z->data, y->data); break;
    case 4: WHERE_LOOP(&w, uint32_t, c->data, x->data, z->data, y->data); break;
    default: WHERE_LOOP(&w, uint64_t, c->data, x->data, z->data, y->data); break;
  }
  return ER_STATUS_OK;
}

/* Opset 16 only adds bfloat16; string and complex stay UNSUPPORTED. */
static const er_op_def op_where = {
    .name = "Where", .domain = "", .min_version = 9, .max_version = 16,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = where_check, .run = where_run,
};

/* ======================================================================== */
/* PRelu                                                                     */
/* ======================================================================== */

static const er_dtype prelu_types[] = {
    ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,  ER_DTYPE_DOUBLE, ER_DTYPE_INT32,
    ER_DTYPE_INT64,   ER_DTYPE_UINT32,   ER_DTYPE_UINT64, ER_DTYPE_UNDEFINED};

/* Opsets 1 and 6 (Caffe2 semantics, as in PyTorch's exports of that era)
 * apply a 1-D slope of C elements per channel, along axis 1 of X; numpy
 * broadcasting would align it with the last axis instead. This returns the
 * slope as seen by the broadcast: [C,1,...,1] in that case, else as is. */
static er_tensor prelu_slope(const er_kctx *ctx) {
  const er_tensor *x = ctx->in[0], *s = ctx->in[1];
  er_tensor v = *s;
  if (ctx->node->version < 7 && s->rank == 1 && x->rank >= 3 && s->dims[0] > 1 &&
      s->dims[0] == x->dims[1]) {
    v.rank = x->rank - 1;
    v.dims[0] = s->dims[0];
    for (int d = 1; d < v.rank; d++) v.dims[d] = 1;
  }
  return v;
}

/* The slope broadcasts unidirectionally to X: the output has X's shape. */
static er_status prelu_check(er_kctx *ctx) {
  ER_CHECK(er__require_type(ctx, 0, prelu_types));
  ER_CHECK(er__require_type(ctx, 1, prelu_types));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  const er_tensor *x = ctx->in[0];
  er_tensor slope = prelu_slope(ctx);
  const er_tensor *s = &slope;
  er_tensor *y = ctx->out[0];
  const er_tensor *both[2] = {x, s};
  er__tensor_set(y, x->dtype, -1, NULL);
  ER_CHECK(er__broadcast_shapes(ctx, 2, both, y));
  if (x->rank < 0 || y->rank < 0) {
    er__same_as_input(ctx, 0, 0);
    return ER_STATUS_OK;
  }
  bool ok = y->rank == x->rank;
  for (int d = 0; ok && d < x->rank; d++) ok = x->dims[d] < 0 || x->dims[d] == y->dims[d];
  if (!ok) {
    char sx[160], ss[160];
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "slope %s does not broadcast to X %s without growing it",
                        er__shape_str(s, ss, sizeof ss), er__shape_str(x, sx, sizeof sx));
  }
  return ER_STATUS_OK;
}

static er_status prelu_run(er_kctx *ctx) {
  er_tensor slope = prelu_slope(ctx);
  const er_tensor *x = ctx->in[0], *s = &slope;
  er_tensor *y = ctx->out[0];
  const void *pa = x->data, *pb = s->data;
  void *py = y->data;
  rows w;
  const er_tensor *ins[2] = {x, s};
  rows_init(&w, 2, ins, y);
  switch (y->dtype) {
    case ER_DTYPE_FLOAT: BCAST2_TYPED(&w, float, float, float, pa, pb, py, a < 0 ? a * b : a); break;
    case ER_DTYPE_DOUBLE: BCAST2_TYPED(&w, double, double, double, pa, pb, py, a < 0 ? a * b : a); break;
    case ER_DTYPE_INT32:
      BCAST2_TYPED(&w, int32_t, int32_t, int32_t, pa, pb, py, a < 0 ? (uint64_t)a * (uint64_t)b : (uint64_t)a);
      break;
    case ER_DTYPE_INT64:
      BCAST2_TYPED(&w, int64_t, int64_t, int64_t, pa, pb, py, a < 0 ? (uint64_t)a * (uint64_t)b : (uint64_t)a);
      break;
    case ER_DTYPE_UINT32:
    case ER_DTYPE_UINT64:
      /* Nothing unsigned is negative. */
      memcpy(py, pa, (size_t)er__count(y) * er_dtype_size(y->dtype));
      break;
    default: BCAST2_F64(&w, x, s, y, a < 0 ? a * b : a); break;
  }
  return ER_STATUS_OK;
}

/* Opsets 1 and 6 run with opset 7's unidirectional broadcasting plus the
 * per-channel rule of prelu_slope(). Integer types came with opset 9. */
static const er_op_def op_prelu = {
    .name = "PRelu", .domain = "", .min_version = 1, .max_version = 16,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = prelu_check, .run = prelu_run,
};

const er_op_def *const er__ops_binary[] = {
    &op_add,        &op_sub,           &op_mul,       &op_div,         &op_pow,
    &op_mod,        &op_equal,         &op_greater,   &op_less,        &op_greater_equal,
    &op_less_equal, &op_and,           &op_or,        &op_xor,         &op_bitwise_and,
    &op_bitwise_or, &op_bitwise_xor,   &op_bitshift,  &op_max,         &op_min,
    &op_sum,        &op_mean,          &op_where,     &op_prelu,       NULL,
};
