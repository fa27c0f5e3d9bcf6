/* vec-elt-impl.h - elementwise unary and binary loops, broadcast rows and
 * the per-channel affine map (vec_unary, vec_binary, vec_binary_rows),
 * written once over simd.h and vmath.h for every ISA; included by
 * vec-impl.h, which vec-<isa>.c compiles. */

/* ======================================================================== */
/* Elementwise                                                               */
/* ======================================================================== */

/* log over every float: v_log for positive normal finite lanes, the
 * reference's double log (rounded to float) for the others (zero, negative,
 * subnormal, infinite, NaN), which are rare in real inputs. */
static inline vf v_log_any(vf x) {
  vf y = v_log(x);
  if (!v_any(v_lt(x, v_set(FLT_MIN))) && !v_any(v_isnan(x)) && !v_any(v_lt(v_set(FLT_MAX), x))) return y;
  float xs[VN], ys[VN];
  v_st(xs, x);
  v_st(ys, y);
  for (int l = 0; l < VN; l++)
    if (!(xs[l] >= FLT_MIN && xs[l] <= FLT_MAX)) ys[l] = (float)log((double)xs[l]);
  return v_ld(ys);
}

static inline vf unary_apply(const er_unary *u, vf x) {
  switch (u->op) {
    case ER_UNOP_ACT: return v_act(x, &u->act);
    case ER_UNOP_EXP: return v_exp(x);
    case ER_UNOP_ERF: return v_erf(x);
    case ER_UNOP_ABS: return v_abs(x);
    case ER_UNOP_NEG: return v_neg(x);
    case ER_UNOP_SQRT: return v_sqrt(x);
    case ER_UNOP_RECIPROCAL: return v_div(v_set(1.0f), x);
    case ER_UNOP_LOG: return v_log_any(x);
  }
  return x;
}

/* One loop per function (the switch is outside the loop), two vectors per
 * step. */
#define UNARY_LOOP(EXPR)                                          \
  do {                                                            \
    int64_t i = 0;                                                \
    for (; i + 2 * VN <= n; i += 2 * VN) {                        \
      vf x0 = v_ld(x + i), x1 = v_ld(x + i + VN);                 \
      {                                                           \
        vf v = x0;                                                \
        v_st(y + i, EXPR);                                        \
      }                                                           \
      {                                                           \
        vf v = x1;                                                \
        v_st(y + i + VN, EXPR);                                   \
      }                                                           \
    }                                                             \
    for (; i < n; i += VN) {                                      \
      int m = n - i >= VN ? VN : (int)(n - i);                    \
      vf v = v_ld_n(x + i, m);                                    \
      v_st_n(y + i, EXPR, m);                                     \
    }                                                             \
  } while (0)

static void vec_unary(const er_unary *u, const float *x, float *y, int64_t n) {
  const er_activation *a = &u->act;
  if (u->op == ER_UNOP_ACT) {
    switch (a->kind) {
      case ER_ACT_NONE: if (x != y) memmove(y, x, (size_t)n * sizeof *y); return;
      case ER_ACT_RELU: UNARY_LOOP(v_max(v_zero(), v)); return;
      case ER_ACT_CLIP: {
        vf lo = v_set(a->p[0]), hi = v_set(a->p[1]);
        UNARY_LOOP(v_min(hi, v_max(lo, v)));
        return;
      }
      case ER_ACT_SIGMOID: UNARY_LOOP(v_sigmoid(v)); return;
      case ER_ACT_TANH: UNARY_LOOP(v_tanh(v)); return;
      case ER_ACT_GELU: UNARY_LOOP(v_gelu(v)); return;
      case ER_ACT_GELU_TANH: UNARY_LOOP(v_gelu_tanh(v)); return;
      case ER_ACT_SILU: UNARY_LOOP(v_silu(v)); return;
      case ER_ACT_HARDSWISH: UNARY_LOOP(v_hardswish(v)); return;
      default: UNARY_LOOP(v_act(v, a)); return;
    }
  }
  switch (u->op) {
    case ER_UNOP_EXP: UNARY_LOOP(v_exp(v)); return;
    case ER_UNOP_ERF: UNARY_LOOP(v_erf(v)); return;
    case ER_UNOP_LOG: UNARY_LOOP(v_log_any(v)); return;
    default: UNARY_LOOP(unary_apply(u, v)); return;
  }
}

static inline vf binop_apply(er_binop op, vf a, vf b) {
  switch (op) {
    case ER_BINOP_ADD: return v_add(a, b);
    case ER_BINOP_SUB: return v_sub(a, b);
    case ER_BINOP_MUL: return v_mul(a, b);
    case ER_BINOP_DIV: return v_div(a, b);
    case ER_BINOP_PRELU: return v_sel(v_lt(a, v_zero()), a, v_mul(a, b));
    /* "a > b ? a : b" gives b, NaN, when b is NaN; a NaN a is kept. */
    case ER_BINOP_MAX: return v_sel(v_isnan(a), v_max(a, b), a);
    case ER_BINOP_MIN: return v_sel(v_isnan(a), v_min(a, b), a);
  }
  return a;
}

static inline __attribute__((always_inline)) void binary_loop(er_binop op, const float *a, int64_t as,
                                                             const float *b, int64_t bs, float *y, int64_t n) {
  vf sa = v_set(as ? 0.0f : a[0]), sb = v_set(bs ? 0.0f : b[0]);
  int64_t i = 0;
  for (; i + 2 * VN <= n; i += 2 * VN) {
    vf a0 = as ? v_ld(a + i) : sa, a1 = as ? v_ld(a + i + VN) : sa;
    vf b0 = bs ? v_ld(b + i) : sb, b1 = bs ? v_ld(b + i + VN) : sb;
    v_st(y + i, binop_apply(op, a0, b0));
    v_st(y + i + VN, binop_apply(op, a1, b1));
  }
  for (; i < n; i += VN) {
    int m = n - i >= VN ? VN : (int)(n - i);
    vf a0 = as ? v_ld_n(a + i, m) : sa, b0 = bs ? v_ld_n(b + i, m) : sb;
    v_st_n(y + i, binop_apply(op, a0, b0), m);
  }
}

#define BINARY_CASES(OP)                                               \
  if (as && bs) binary_loop(OP, a, 1, b, 1, y, n);                     \
  else if (as) binary_loop(OP, a, 1, b, 0, y, n);                      \
  else if (bs) binary_loop(OP, a, 0, b, 1, y, n);                      \
  else binary_loop(OP, a, 0, b, 0, y, n);

static void vec_binary(er_binop op, const float *a, int64_t as, const float *b, int64_t bs, float *y, int64_t n) {
  if (n <= 0) return;
  switch (op) {
    case ER_BINOP_ADD: BINARY_CASES(ER_BINOP_ADD) break;
    case ER_BINOP_SUB: BINARY_CASES(ER_BINOP_SUB) break;
    case ER_BINOP_MUL: BINARY_CASES(ER_BINOP_MUL) break;
    case ER_BINOP_DIV: BINARY_CASES(ER_BINOP_DIV) break;
    case ER_BINOP_PRELU: BINARY_CASES(ER_BINOP_PRELU) break;
    case ER_BINOP_MAX: BINARY_CASES(ER_BINOP_MAX) break;
    case ER_BINOP_MIN: BINARY_CASES(ER_BINOP_MIN) break;
  }
}

/* Rows of exactly one vector (a blocked tensor by a per-channel blocked
 * constant: [HW][B] by [1][B]) as whole vectors, b held when it repeats;
 * a masked loop per row cost a blocked PRelu twice the planar one. */
#define BINARY_ROWS(OP)                                                                         \
  if (n == VN && brs == 0) {                                                                    \
    const vf bv = v_ld(b);                                                                      \
    for (int64_t r = 0; r < rows; r++) v_st(y + r * VN, binop_apply(OP, v_ld(a + r * ars), bv)); \
  } else if (n == VN) {                                                                         \
    for (int64_t r = 0; r < rows; r++)                                                          \
      v_st(y + r * VN, binop_apply(OP, v_ld(a + r * ars), v_ld(b + r * brs)));                  \
  } else {                                                                                      \
    for (int64_t r = 0; r < rows; r++) binary_loop(OP, a + r * ars, 1, b + r * brs, 1, y + r * n, n); \
  }

static void vec_binary_rows(er_binop op, const float *a, int64_t ars, const float *b, int64_t brs, float *y,
                            int64_t n, int64_t rows) {
  if (n <= 0) return;
  switch (op) {
    case ER_BINOP_ADD: BINARY_ROWS(ER_BINOP_ADD) break;
    case ER_BINOP_SUB: BINARY_ROWS(ER_BINOP_SUB) break;
    case ER_BINOP_MUL: BINARY_ROWS(ER_BINOP_MUL) break;
    case ER_BINOP_DIV: BINARY_ROWS(ER_BINOP_DIV) break;
    case ER_BINOP_PRELU: BINARY_ROWS(ER_BINOP_PRELU) break;
    case ER_BINOP_MAX: BINARY_ROWS(ER_BINOP_MAX) break;
    case ER_BINOP_MIN: BINARY_ROWS(ER_BINOP_MIN) break;
  }
}
#undef BINARY_ROWS
