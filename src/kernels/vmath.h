/* vmath.h - vectorized float32 exp, sigmoid, tanh, erf and the fused
 * activations, over the simd.h vocabulary (include simd.h first).
 *
 * The polynomials are Cephes' single-precision ones (expf, tanhf, erff,
 * erfcf; public domain), evaluated with FMA. Measured against the double
 * reference by tests/kernels (the tolerances are stated there): exp and
 * sigmoid stay within a few ulp over the whole float range, tanh and erf
 * within a few ulp of the result. Formulas are chosen to avoid
 * cancellation where the result is small: 1 + tanh(u) is computed as
 * 2 / (1 + exp(-2u)) and 1 + erf(z) for z < -1 as erfc(-z), so that GELU's
 * tiny negative outputs keep their relative accuracy. NaN inputs give NaN
 * outputs (the clamps put the data operand second, see simd.h). */
#ifndef ER_KERNELS_VMATH_H
#define ER_KERNELS_VMATH_H

#include "ops/fused.h"

/* exp(x). x is clamped to [-104, 88.8]: below, the true result is under
 * half the smallest denormal; above, 2^128 overflows to +inf as it should.
 * The scale 2^n is v_ldexp's (vscalefps on AVX-512, two halves elsewhere),
 * so denormal results and n = 128 need no special case. */
/* exp(x) = 2^n (1 + q): n = round(x / ln 2) into *n, and q = e^r - 1 for
 * the remainder r (|r| <= ln 2 / 2), Cephes' two-part ln 2. q = r + r^2
 * P(r) with P of degree 4, a Chebyshev fit of (e^r - 1 - r) / r^2: e^r
 * within 1.1e-8 relative in exact arithmetic, below float's rounding
 * (Cephes' degree 5, 2e-10, cost one more FMA in every exp, sigmoid,
 * SiLU, tanh, GELU and softmax). */
static inline __attribute__((always_inline)) vf v_exp_reduced(vf x, vf *n_out) {
  vf n = v_round(v_mul(x, v_set(1.44269504088896341f)));
  vf r = v_fnma(n, v_set(0.693359375f), x);
  r = v_fnma(n, v_set(-2.12194440e-4f), r);
  vf p = v_set(1.3933651e-3f);
  p = v_fma(p, r, v_set(8.3631815e-3f));
  p = v_fma(p, r, v_set(4.1666465e-2f));
  p = v_fma(p, r, v_set(1.6666577e-1f));
  p = v_fma(p, r, v_set(5.0000000e-1f));
  *n_out = n;
  return v_fma(p, v_mul(r, r), r);
}

/* (1 + q) 2^n for integer-valued n in [-126, 127]: one vscalefps on
 * AVX-512, a 2^n built from its bits elsewhere. */
static inline __attribute__((always_inline)) vf v_exp_scale(vf q, vf n) {
#if defined(ER_SIMD_AVX512)
  return v_ldexp(v_add(q, v_set(1.0f)), n);
#else
  vf s = v_pow2i(n);
  return v_fma(q, s, s);
#endif
}

static inline __attribute__((always_inline)) vf v_exp(vf x) {
  vf xc = v_min(v_set(88.8f), v_max(v_set(-104.0f), x));
  vf n;
  vf p = v_add(v_exp_reduced(xc, &n), v_set(1.0f));
  return v_ldexp(p, n);
}

/* log(x) for positive normal x (Cephes logf): x = m 2^e with m moved into
 * [sqrt(1/2), sqrt(2)), log(m) from a polynomial in m - 1, e ln 2 added in
 * two parts. Zero, negative, infinite and NaN inputs are the caller's
 * business (LRN's argument is at least its bias). */
static inline vf v_log(vf x) {
  vf e = v_getexp(x), m = v_getmant(x);
  vm big = v_lt(v_set(1.41421356237f), m);
  m = v_sel(big, m, v_mul(m, v_set(0.5f)));
  e = v_sel(big, e, v_add(e, v_set(1.0f)));
  vf t = v_sub(m, v_set(1.0f));
  vf z = v_mul(t, t);
  vf p = v_set(7.0376836292e-2f);
  p = v_fma(p, t, v_set(-1.1514610310e-1f));
  p = v_fma(p, t, v_set(1.1676998740e-1f));
  p = v_fma(p, t, v_set(-1.2420140846e-1f));
  p = v_fma(p, t, v_set(1.4249322787e-1f));
  p = v_fma(p, t, v_set(-1.6668057665e-1f));
  p = v_fma(p, t, v_set(2.0000714765e-1f));
  p = v_fma(p, t, v_set(-2.4999993993e-1f));
  p = v_fma(p, t, v_set(3.3333331174e-1f));
  vf y = v_mul(v_mul(p, t), z);
  y = v_fma(e, v_set(-2.12194440e-4f), y);
  y = v_fnma(v_set(0.5f), z, y);
  return v_fma(e, v_set(0.693359375f), v_add(t, y));
}

/* 1 / (1 + exp(-x)); exact division, so the result is accurate where it
 * is tiny (x very negative) and saturates to 1 cleanly. */
static inline __attribute__((always_inline)) vf v_sigmoid(vf x) {
  vf one = v_set(1.0f);
  return v_div(one, v_add(one, v_exp(v_neg(x))));
}

/* x * sigmoid(x), the fused SiLU, about twice as fast as x / (1 + exp(-x))
 * in full: exp(-x) with -x clamped to [-87, 80] and one 2^n scale (at the
 * clamps x / (1 + e) is already x, or a value below 2e-33 in magnitude
 * where the true one is smaller still), and 1 / (1 + e) by v_recip
 * instead of a division. -inf gives NaN, as x / (1 + exp(-x)) does. */
static inline __attribute__((always_inline)) vf v_silu(vf x) {
  vf t = v_min(v_set(80.0f), v_max(v_set(-87.0f), v_neg(x)));
  vf n;
  vf q = v_exp_reduced(t, &n);
  vf e = v_exp_scale(q, n);
  vf y = v_mul(x, v_recip(v_add(v_set(1.0f), e)));
  return v_sel(v_lt(x, v_set(-3.4028235e38f)), y, v_set(__builtin_nanf("")));
}

/* tanh: Cephes' odd polynomial below |x| = 0.625 (where 1 - 2/(e^2x + 1)
 * would cancel), the exp form above. From |x| = 9 on tanh rounds to +-1,
 * so 2|x| is clamped to 18: e^2|x| stays normal below 2^26 with one 2^n
 * scale, and 2 / (e + 1) takes v_recip (an ulp) instead of a division
 * (131072 floats, AVX-512 on Zen 4: 73.5 -> 64 us). NaN stays NaN
 * (v_min returns its second operand when either is NaN). */
static inline __attribute__((always_inline)) vf v_tanh(vf x) {
  vf a = v_abs(x);
  vf z = v_mul(x, x);
  vf p = v_set(-5.70498872745e-3f);
  p = v_fma(p, z, v_set(2.06390887954e-2f));
  p = v_fma(p, z, v_set(-5.37397155531e-2f));
  p = v_fma(p, z, v_set(1.33314422036e-1f));
  p = v_fma(p, z, v_set(-3.33332819422e-1f));
  vf small = v_fma(v_mul(p, z), x, x);
  vf one = v_set(1.0f);
  vf n;
  vf q = v_exp_reduced(v_min(v_set(18.0f), v_add(a, a)), &n);
  vf e = v_exp_scale(q, n);
  vf big = v_fnma(v_set(2.0f), v_recip(v_add(e, one)), one);
  big = v_copysign(big, x);
  return v_sel(v_lt(a, v_set(0.625f)), big, small);
}

/* erf(x) for |x| < 1 (Cephes erff's odd polynomial). */
static inline __attribute__((always_inline)) vf v_erf_small(vf x) {
  vf z = v_mul(x, x);
  vf p = v_set(7.853861353153693e-5f);
  p = v_fma(p, z, v_set(-8.010193625184903e-4f));
  p = v_fma(p, z, v_set(5.188327685732524e-3f));
  p = v_fma(p, z, v_set(-2.685381193529856e-2f));
  p = v_fma(p, z, v_set(1.128358514861418e-1f));
  p = v_fma(p, z, v_set(-3.761262582423300e-1f));
  p = v_fma(p, z, v_set(1.128379165726710e+0f));
  return v_mul(x, p);
}

/* erfc(a) for a >= 1 (Cephes erfcf): exp(-a^2) / a * P(1/a^2), with one
 * polynomial below a = 2 and another above. */
static inline __attribute__((always_inline)) vf v_erfc_big(vf a) {
  /* exp(-a^2) with a^2 = p + err exactly (err from an FMA): exp(-p) times
   * (1 - err), so the rounding of a^2 (up to 2^-24 * a^2 absolute) does
   * not become a relative error of the result. Beyond a = 12 erfc is
   * below the smallest float, so a is clamped there (keeping a^2 finite). */
  a = v_min(v_set(12.0f), a);
  vf sq = v_mul(a, a);
  vf sq_err = v_fma(a, a, v_neg(sq));
  vf e = v_exp(v_neg(sq));
  e = v_fnma(e, sq_err, e);
  vf q = v_div(v_set(1.0f), a);
  vf y = v_mul(q, q);
  vf p = v_set(2.326819970068386e-2f);
  p = v_fma(p, y, v_set(-1.387039388740657e-1f));
  p = v_fma(p, y, v_set(3.687424674597105e-1f));
  p = v_fma(p, y, v_set(-5.824733027278666e-1f));
  p = v_fma(p, y, v_set(6.210004621745983e-1f));
  p = v_fma(p, y, v_set(-4.944515323274145e-1f));
  p = v_fma(p, y, v_set(3.404879937665872e-1f));
  p = v_fma(p, y, v_set(-2.741127028184656e-1f));
  p = v_fma(p, y, v_set(5.638259427386472e-1f));
  vf r = v_set(-1.047766399936249e+1f);
  r = v_fma(r, y, v_set(1.297719955372516e+1f));
  r = v_fma(r, y, v_set(-7.495518717768503e+0f));
  r = v_fma(r, y, v_set(2.921019019210786e+0f));
  r = v_fma(r, y, v_set(-1.015265279202700e+0f));
  r = v_fma(r, y, v_set(4.218463358204948e-1f));
  r = v_fma(r, y, v_set(-2.820767439740514e-1f));
  r = v_fma(r, y, v_set(5.641895067754075e-1f));
  vf poly = v_sel(v_lt(a, v_set(2.0f)), r, p);
  return v_mul(v_mul(e, q), poly);
}

static inline __attribute__((always_inline)) vf v_erf(vf x) {
  vf a = v_abs(x);
  /* Clamp before erfc so lanes that take the small branch stay finite. */
  vf big = v_sub(v_set(1.0f), v_erfc_big(v_max(v_set(1.0f), a)));
  big = v_copysign(big, x);
  return v_sel(v_lt(a, v_set(1.0f)), big, v_erf_small(x));
}

/* 1 + erf(z), without cancellation for z <= -1. */
static inline __attribute__((always_inline)) vf v_one_plus_erf(vf z) {
  vf a = v_abs(z);
  vf one = v_set(1.0f);
  vf ec = v_erfc_big(v_max(one, a));
  vf big = v_sel(v_lt(z, v_zero()), v_sub(v_set(2.0f), ec), ec);
  vf small = v_add(one, v_erf_small(z));
  vf r = v_sel(v_lt(a, one), big, small);
  return v_sel(v_isnan(z), r, z);
}

/* GELU, exact form: 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x), from one
 * erfc. With a = |x| / sqrt 2 (clamped to 12: beyond, erfc is below the
 * smallest float) and t = 1 / (1 + 0.4 a), erfc(a) = t exp(-a^2 + P(t)),
 * P of degree 8: a Chebyshev fit of log(erfc(a) e^(a^2) / t) over a in
 * [0, 12], within 1.1e-7 (so a relative error of erfc; Numerical
 * Recipes' erfcc, t = 1 / (1 + a / 2), needs degree 9 for 1.2e-7). Phi(x)
 * is erfc(a) / 2 for x < 0, 1 - erfc(a) / 2 otherwise: no cancellation in
 * the negative tail, where the result is tiny. The halving is ln 2 taken
 * off P's constant term. a^2 = sq + err exactly (an FMA), and exp(-sq)
 * times (1 - err) keeps sq's rounding out of the tail's relative error (as
 * in v_erfc_big). One branch instead of v_one_plus_erf's two (each lane
 * computed both): GELU-fused MatMuls of ConvNeXt spent more in the
 * activation than in the product. NaN stays NaN (v_min returns its NaN
 * second operand). */
static inline __attribute__((always_inline)) vf v_gelu(vf x) {
  vf a = v_min(v_set(12.0f), v_mul(v_abs(x), v_set(0.70710678118654752f)));
  vf t = v_recip(v_fma(a, v_set(0.4f), v_set(1.0f)));
  vf p = v_set(-0.21372404f);
  p = v_fma(p, t, v_set(0.95517903f));
  p = v_fma(p, t, v_set(-1.5495146f));
  p = v_fma(p, t, v_set(1.0721296f));
  p = v_fma(p, t, v_set(-0.49391668f));
  p = v_fma(p, t, v_set(0.32182188f));
  p = v_fma(p, t, v_set(0.39432519f));
  p = v_fma(p, t, v_set(1.0024545f));
  p = v_fma(p, t, v_set(-2.1819021f));   /* -1.4887549 - ln 2 */
  vf sq = v_mul(a, a);
  vf sq_err = v_fma(a, a, v_neg(sq));
  /* p - sq lies in [-146, -0.69] (a <= 12), so exp needs neither v_exp's
   * clamps nor more than v_ldexp's range. */
  vf n;
  vf q = v_exp_reduced(v_sub(p, sq), &n);
  vf e = v_ldexp(v_add(q, v_set(1.0f)), n);
  e = v_fnma(e, sq_err, e);
  vf half = v_mul(t, e);
  vf phi = v_sel(v_lt(x, v_zero()), v_sub(v_set(1.0f), half), half);
  return v_mul(x, phi);
}

/* GELU, tanh form: 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), with exp's
 * argument clamped to [-87, 80] as in v_silu: one 2^n scale, and
 * 1 / (1 + e) by v_recip (e + 1 stays below 2^116, its reciprocal normal).
 * At the lower clamp the quotient is x; at the upper one (u <= -40) it is
 * x * 0: -0 as the reference's 0.5 x (1 + tanh(u)) rounds to, NaN for
 * -inf as there. NaN stays NaN (v_max and v_min return their second, NaN
 * operand). */
static inline __attribute__((always_inline)) vf v_gelu_tanh(vf x) {
  vf x3 = v_mul(v_mul(x, x), x);
  vf u = v_mul(v_set(0.79788456080286535588f), v_fma(v_set(0.044715f), x3, x));
  vf t = v_min(v_set(80.0f), v_max(v_set(-87.0f), v_mul(v_set(-2.0f), u)));
  vf n;
  vf q = v_exp_reduced(t, &n);
  vf y = v_mul(x, v_recip(v_add(v_set(1.0f), v_exp_scale(q, n))));
  return v_sel(v_lt(t, v_set(80.0f)), v_mul(x, v_zero()), y);
}

/* HardSwish: x * clamp((x + 3) / 6, 0, 1). (x + 3) / 6 rather than
 * x * (1/6) + 1/2: near x = -3 the sum cancels, and the rounding error of
 * 1/6 would be all that is left. Near -3 x + 3 is exact, so multiplying it
 * by the rounded 1/6 keeps the relative error of the factor within about
 * 1e-7 everywhere, without a division (a 512-bit divide issues once per 16
 * cycles on Intel cores: PP-LCNet's depthwise layers spent a third of
 * their time on it). */
static inline vf v_hardswish(vf x) {
  vf h = v_min(v_set(1.0f), v_max(v_zero(), v_mul(v_add(x, v_set(3.0f)), v_set(1.0f / 6.0f))));
  return v_mul(x, h);
}

/* The fused activations of ops/fused.h. */
static inline vf v_act(vf x, const er_activation *a) {
  switch (a->kind) {
    case ER_ACT_NONE: return x;
    case ER_ACT_RELU: return v_max(v_zero(), x);
    case ER_ACT_CLIP: return v_min(v_set(a->p[1]), v_max(v_set(a->p[0]), x));
    case ER_ACT_SIGMOID: return v_sigmoid(x);
    case ER_ACT_TANH: return v_tanh(x);
    case ER_ACT_HARDSIGMOID:
      return v_min(v_set(1.0f), v_max(v_zero(), v_fma(v_set(a->p[0]), x, v_set(a->p[1]))));
    case ER_ACT_HARDSWISH: return v_hardswish(x);
    case ER_ACT_LEAKYRELU: return v_sel(v_lt(x, v_zero()), x, v_mul(x, v_set(a->p[0])));
    case ER_ACT_SILU: return v_silu(x);
    case ER_ACT_GELU: return v_gelu(x);
    case ER_ACT_GELU_TANH: return v_gelu_tanh(x);
    default: return x;
  }
}

#endif /* ER_KERNELS_VMATH_H */
