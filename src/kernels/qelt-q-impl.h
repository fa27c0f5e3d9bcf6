/* qelt-q-impl.h - QuantizeLinear, DequantizeLinear and the byte-exact QAdd
 * / QMul, written once over the vector primitives of qelt-impl.h and
 * compiled per ISA; included by qelt-impl.h. */

/* ======================================================================== */
/* QuantizeLinear, DequantizeLinear                                          */
/* ======================================================================== */

static void quantize(const float *x, uint8_t *y, int64_t n, float s, int32_t zp, int32_t lo, int32_t hi) {
  const vf vs = f_set(s);
  const vi z = i_set(zp), l = i_set(lo), h = i_set(hi);
  int64_t i = 0;
  for (; i + VL <= n; i += VL) st8(y + i, quant_vec(f_div(f_ld(x + i), vs), z, l, h));
  for (; i < n; i++) y[i] = (uint8_t)quant_one(x[i] / s, zp, lo, hi);
}

static void dequantize(const uint8_t *x, bool is_signed, float *y, int64_t n, float s, int32_t zp) {
  const vf vs = f_set(s);
  const vi z = i_set(zp);
  int64_t i = 0;
  for (; i + VL <= n; i += VL) f_st(y + i, f_mul(i2f(i_sub(i_ld8(x + i, is_signed), z)), vs));
  for (; i < n; i++) y[i] = (float)(ld8(x + i, is_signed) - zp) * s;
}

/* ======================================================================== */
/* QAdd, QMul                                                                */
/* ======================================================================== */

/* x / y rounded once, from r = 1 / y (itself rounded once): q = x r lies
 * within an ulp of x / y, the residual x - q y is exact in one FMA, and
 * q + residual r rounds to the correctly rounded quotient (Markstein's
 * theorem) as long as nothing overflows or goes subnormal: div_recip_ok
 * checks the operands' bounds. vdivps was most of QAdd's time (53 us for
 * ResNet-18's 64 x 56 x 56 adds on an AVX-512 Xeon, a division every 10
 * cycles or so); the reciprocal, multiply and two FMAs pipeline. 10^8
 * random quotients over 2000 divisors (all-ones significands among them)
 * matched the division exactly, and the kernel harness compares QAdd and
 * QMul with their reference bit for bit. */
static inline vf f_div_r(vf x, vf y, vf r) {
  vf q = f_mul(x, r);
  return f_fma(f_fnma(q, y, x), r, q);
}

/* Whether every quotient x / ys of qbinary may go through f_div_r: the
 * scales normal and within 2^+-50 (so every nonzero x, a sum or product
 * of (q - zp) s terms, is at least 2^-120, and no residual is subnormal),
 * and the largest x times 1 / ys below 2^100. */
static bool div_recip_ok(float as, float bs, float ys, bool mul) {
  /* (It also rules out NaN and infinite quotients.) */
  const double lo = 0x1p-50, hi = 0x1p50;
  const double a = fabs((double)as), b = fabs((double)bs), y = fabs((double)ys);
  if (!(a >= lo && a <= hi && b >= lo && b <= hi && y >= lo && y <= hi)) return false;
  const double xmax = mul ? 255.0 * a * 255.0 * b : 255.0 * (a + b);
  return xmax / y < 0x1p100;
}

/* The common case of qbinary, two operands of one signedness read
 * element by element, mul and the signedness fixed: two vectors per
 * iteration, clamped in float to [lo - yz, hi - yz] before rounding (the
 * same integers as rounding then clamping, integer bounds; NaN is 0 first,
 * as in quant_vec) and stored as one. Returns the elements done. */
static inline __attribute__((always_inline)) int64_t qbinary_pairs(const uint8_t *a, float as, int32_t az,
                                                                 const uint8_t *b, float bs, int32_t bz, uint8_t *y,
                                                                 int64_t n, float ys, int32_t yz, int32_t lo,
                                                                 int32_t hi, const bool mul, const bool sgn,
                                                                 const bool recip) {
  const vf vas = f_set(as), vbs = f_set(bs), vys = f_set(ys), vr = f_set(1.0f / ys);
  const vf flo = f_set((float)(lo - yz)), fhi = f_set((float)(hi - yz));
  const vi vaz = i_set(az), vbz = i_set(bz), z = i_set(yz);
  const bool out_signed = lo < 0;
  int64_t i = 0;
  for (; i + 2 * VL <= n; i += 2 * VL) {
    vi r[2];
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) {
      vf fa = f_mul(i2f(i_sub(i_ld8(a + i + k * VL, sgn), vaz)), vas);
      vf fb = f_mul(i2f(i_sub(i_ld8(b + i + k * VL, sgn), vbz)), vbs);
      vf x = mul ? f_mul(fa, fb) : f_add(fa, fb);
      /* (With div_recip_ok no x is NaN or infinite.) */
      vf q = recip ? f_div_r(x, vys, vr) : f_nan_to_zero(f_div(x, vys));
      r[k] = i_add(f2i_rhe(f_min(f_max(q, flo), fhi)), z);
    }
    st8x2(y + i, r[0], r[1], out_signed);
  }
  return i;
}

static void qbinary(const uint8_t *a, bool a_signed, int a_step, float as, int32_t az, const uint8_t *b, bool b_signed,
                    int b_step, float bs, int32_t bz, uint8_t *y, int64_t n, float ys, int32_t yz, int32_t lo,
                    int32_t hi, bool mul) {
  const bool recip = div_recip_ok(as, bs, ys, mul);
  if (a_step && b_step && a_signed == b_signed) {
    int64_t done;
#define QB_PAIRS(MUL, SGN)                                                                         \
  (recip ? qbinary_pairs(a, as, az, b, bs, bz, y, n, ys, yz, lo, hi, MUL, SGN, true)               \
         : qbinary_pairs(a, as, az, b, bs, bz, y, n, ys, yz, lo, hi, MUL, SGN, false))
    if (mul) done = a_signed ? QB_PAIRS(true, true) : QB_PAIRS(true, false);
    else done = a_signed ? QB_PAIRS(false, true) : QB_PAIRS(false, false);
#undef QB_PAIRS
    if (done == n) return;
    a += done;
    b += done;
    y += done;
    n -= done;
  }
  const vf vas = f_set(as), vbs = f_set(bs), vys = f_set(ys), vr = f_set(1.0f / ys);
  const vi vaz = i_set(az), vbz = i_set(bz), z = i_set(yz), l = i_set(lo), h = i_set(hi);
  /* A repeated operand is dequantized once. */
  const float fa0 = (float)(ld8(a, a_signed) - az) * as, fb0 = (float)(ld8(b, b_signed) - bz) * bs;
  int64_t i = 0;
  for (; i + VL <= n; i += VL) {
    vf fa = a_step ? f_mul(i2f(i_sub(i_ld8(a + i, a_signed), vaz)), vas) : f_set(fa0);
    vf fb = b_step ? f_mul(i2f(i_sub(i_ld8(b + i, b_signed), vbz)), vbs) : f_set(fb0);
    vf s = mul ? f_mul(fa, fb) : f_add(fa, fb);
    st8(y + i, quant_vec(recip ? f_div_r(s, vys, vr) : f_div(s, vys), z, l, h));
  }
  for (; i < n; i++) {
    float fa = a_step ? (float)(ld8(a + i, a_signed) - az) * as : fa0;
    float fb = b_step ? (float)(ld8(b + i, b_signed) - bz) * bs : fb0;
    float s = mul ? fa * fb : fa + fb;
    y[i] = (uint8_t)quant_one(s / ys, yz, lo, hi);
  }
}
