/* vec-norm-impl.h - normalization: affine, LRN, softmax, instance and
 * layer normalization (vec_affine, vec_lrn, vec_softmax, vec_instnorm,
 * vec_layernorm), written once over simd.h and vmath.h for every ISA;
 * included by vec-impl.h, which vec-<isa>.c compiles. */

/* ======================================================================== */
/* Normalization                                                             */
/* ======================================================================== */

static void vec_affine(const float *x, float *y, int64_t n, float a, float b) {
  vf va = v_set(a), vb = v_set(b);
  int64_t i = 0;
  for (; i + 2 * VN <= n; i += 2 * VN) {
    v_st(y + i, v_fma(v_ld(x + i), va, vb));
    v_st(y + i + VN, v_fma(v_ld(x + i + VN), va, vb));
  }
  for (; i < n; i += VN) {
    int m = n - i >= VN ? VN : (int)(n - i);
    v_st_n(y + i, v_fma(v_ld_n(x + i, m), va, vb), m);
  }
}

/* t^-beta: for the common beta = 0.75 as 1 / (sqrt(t) * sqrt(sqrt(t)))
 * (correctly rounded roots), else exp(-beta log t). */
static inline vf lrn_scale(vf t, float beta) {
  if (beta == 0.75f) {
    vf r = v_sqrt(t);
    return v_div(v_set(1.0f), v_mul(r, v_sqrt(r)));
  }
  return v_exp(v_mul(v_set(-beta), v_log(t)));
}

static void vec_lrn(const float *x, float *y, int64_t c, int64_t inner, int64_t c0, int64_t c1, int64_t before,
                    int64_t after, float bias, float k, float beta) {
  for (int64_t ch = c0; ch < c1; ch++) {
    int64_t lo = ch - before < 0 ? 0 : ch - before, hi = ch + after > c - 1 ? c - 1 : ch + after;
    const float *xc = x + ch * inner;
    float *yc = y + ch * inner;
    for (int64_t i = 0; i < inner; i += VN) {
      int m = inner - i >= VN ? VN : (int)(inner - i);
      vf ss = v_zero();
      for (int64_t j = lo; j <= hi; j++) {
        vf v = v_ld_n(x + j * inner + i, m);
        ss = v_fma(v, v, ss);
      }
      vf t = v_fma(v_set(k), ss, v_set(bias));
      v_st_n(yc + i, v_mul(v_ld_n(xc + i, m), lrn_scale(t, beta)), m);
    }
  }
}

/* Softmax of one [n, inner] slice. Rows (inner == 1): max, then exp and
 * sum in one pass storing the exps, then a scale by 1 / sum (log-softmax:
 * x - (max + log sum), the log in double). Columns (inner > 1): the same
 * with vectors along inner. The max skips NaN; a NaN element still makes
 * its sum, and so its whole row, NaN, as in the reference. */
static void vec_softmax(const float *x, float *y, int64_t n, int64_t inner, bool log_out) {
  if (inner == 1) {
    vf m0 = v_set(-INFINITY), m1 = m0;
    int64_t i = 0;
    for (; i + 2 * VN <= n; i += 2 * VN) {
      m0 = v_max(v_ld(x + i), m0);
      m1 = v_max(v_ld(x + i + VN), m1);
    }
    float m = v_hmax(v_max(m1, m0));
    for (; i < n; i++)
      if (x[i] > m) m = x[i];
    vf vm_ = v_set(m), s0 = v_zero(), s1 = v_zero();
    for (i = 0; i + 2 * VN <= n; i += 2 * VN) {
      vf e0 = v_exp(v_sub(v_ld(x + i), vm_)), e1 = v_exp(v_sub(v_ld(x + i + VN), vm_));
      if (!log_out) {
        v_st(y + i, e0);
        v_st(y + i + VN, e1);
      }
      s0 = v_add(s0, e0);
      s1 = v_add(s1, e1);
    }
    for (; i < n; i += VN) {
      int c = n - i >= VN ? VN : (int)(n - i);
      vf e = v_exp(v_sub(v_ld_n(x + i, c), vm_));
      if (!log_out) v_st_n(y + i, e, c);
      /* Lanes past c loaded 0, so exp(0 - m) must not count (masked in
       * registers: a stack copy with scalar zeros stalled every short
       * row on the reload). */
      s0 = v_add(s0, first_lanes(e, c));
    }
    float sum = v_hsum(v_add(s0, s1));
    if (log_out) {
      /* (x - max) - log(sum): both terms are <= 0, so nothing cancels,
       * unlike x - (max + log(sum)) rounded as one float. */
      vf vls = v_set((float)log((double)sum));
      for (i = 0; i < n; i += VN) {
        int c = n - i >= VN ? VN : (int)(n - i);
        v_st_n(y + i, v_sub(v_sub(v_ld_n(x + i, c), vm_), vls), c);
      }
    } else {
      vf r = v_set(1.0f / sum);
      for (i = 0; i < n; i += VN) {
        int c = n - i >= VN ? VN : (int)(n - i);
        v_st_n(y + i, v_mul(v_ld_n(y + i, c), r), c);
      }
    }
    return;
  }
  for (int64_t j = 0; j < inner; j += VN) {
    int c = inner - j >= VN ? VN : (int)(inner - j);
    vf m = v_set(-INFINITY);
    for (int64_t i = 0; i < n; i++) m = v_max(v_ld_n(x + i * inner + j, c), m);
    vf s = v_zero();
    for (int64_t i = 0; i < n; i++) {
      vf e = v_exp(v_sub(v_ld_n(x + i * inner + j, c), m));
      if (!log_out) v_st_n(y + i * inner + j, e, c);
      s = v_add(s, e);
    }
    if (log_out) {
      float ss[VN];
      v_st(ss, s);
      for (int l = 0; l < c; l++) ss[l] = (float)log((double)ss[l]);
      vf ls = v_ld(ss);
      for (int64_t i = 0; i < n; i++)
        v_st_n(y + i * inner + j, v_sub(v_sub(v_ld_n(x + i * inner + j, c), m), ls), c);
    } else {
      vf r = v_div(v_set(1.0f), s);
      for (int64_t i = 0; i < n; i++) v_st_n(y + i * inner + j, v_mul(v_ld_n(y + i * inner + j, c), r), c);
    }
  }
}

/* InstanceNormalization of one plane of n floats: y = (x - mean) * a + b
 * with a = scale / sqrt(var + eps). A first mean m0 from a float sum, then
 * the sums of d = x - m0 and d^2 (the corrected two-pass algorithm): mean
 * = m0 + sum(d) / n, var = sum(d^2) / n - (sum(d) / n)^2, so a plane far
 * from zero (values near 100, spread 0.3) keeps its mean to the rounding
 * of m0's correction, not of the first sum (a float mean there was off by
 * 1e-5 of the spread). Two vectors of partial sums each. */
static void vec_instnorm(const float *x, float *y, int64_t n, float scale, float bias, float eps) {
  vf s0 = v_zero(), s1 = v_zero();
  int64_t i = 0;
  for (; i + 2 * VN <= n; i += 2 * VN) {
    s0 = v_add(s0, v_ld(x + i));
    s1 = v_add(s1, v_ld(x + i + VN));
  }
  for (; i < n; i += VN) s0 = v_add(s0, v_ld_n(x + i, n - i >= VN ? VN : (int)(n - i)));
  const float m0 = v_hsum(v_add(s0, s1)) / (float)n;
  const vf vm0 = v_set(m0);
  vf d0 = v_zero(), d1 = v_zero(), q0 = v_zero(), q1 = v_zero();
  for (i = 0; i + 2 * VN <= n; i += 2 * VN) {
    vf a0 = v_sub(v_ld(x + i), vm0), a1 = v_sub(v_ld(x + i + VN), vm0);
    d0 = v_add(d0, a0);
    d1 = v_add(d1, a1);
    q0 = v_fma(a0, a0, q0);
    q1 = v_fma(a1, a1, q1);
  }
  for (; i < n; i += VN) {
    int c = n - i >= VN ? VN : (int)(n - i);
    vf a0 = first_lanes(v_sub(v_ld_n(x + i, c), vm0), c);
    d0 = v_add(d0, a0);
    q0 = v_fma(a0, a0, q0);
  }
  const double dm = (double)v_hsum(v_add(d0, d1)) / (double)n;
  double var = (double)v_hsum(v_add(q0, q1)) / (double)n - dm * dm;
  if (var < 0) var = 0;
  /* The mean as m0 + dm, subtracted in that order: x - m0 is exact where
   * x is near m0, so (x - m0) - dm rounds only once, at the difference's
   * scale. */
  const vf vdm = v_set((float)dm), va = v_set((float)((double)scale / sqrt(var + (double)eps))), vb = v_set(bias);
  for (i = 0; i + VN <= n; i += VN) v_st(y + i, v_fma(v_sub(v_sub(v_ld(x + i), vm0), vdm), va, vb));
  if (i < n) {
    int c = (int)(n - i);
    v_st_n(y + i, v_fma(v_sub(v_sub(v_ld_n(x + i, c), vm0), vdm), va, vb), c);
  }
}

/* Rows of at most 4 VN floats (ConvNeXt-Atto's 40 and 80 channels, a
 * transformer's 64): NV vectors per row held in registers, four rows at a
 * time so their reductions overlap (one row's sum, mean, variance and
 * square root form a chain each row waited on: 125 us for ConvNeXt's 3136
 * rows of 40 on Zen 4), scale and bias loaded once. The same sums in the
 * same order as the general path. */
#define LN_ROWS 4
static inline __attribute__((always_inline)) void ln_small_rows(const float *x, float *y, int64_t r, int64_t cols,
                                                                const vf *sc, const vf *bi, bool has_bias, float eps,
                                                                float *mean_out, float *inv_out, const int NV,
                                                                const int R) {
  const int tail = (int)(cols - (NV - 1) * VN);
  vf xv[LN_ROWS][4];
  float mean[LN_ROWS], inv[LN_ROWS];
#pragma GCC unroll 4
  for (int k = 0; k < R; k++) {
    const float *xr = x + (r + k) * cols;
    vf s0 = v_zero(), s1 = v_zero();
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      xv[k][v] = v + 1 < NV ? v_ld(xr + v * VN) : v_ld_n(xr + v * VN, tail);
      if (v + 1 < NV && v % 2 == 1) s1 = v_add(s1, xv[k][v]);
      else s0 = v_add(s0, xv[k][v]);
    }
    mean[k] = v_hsum(v_add(s0, s1)) / (float)cols;
  }
#pragma GCC unroll 4
  for (int k = 0; k < R; k++) {
    vf vmean = v_set(mean[k]), s0 = v_zero(), s1 = v_zero();
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      vf d = v_sub(xv[k][v], vmean);
      if (v + 1 == NV) d = first_lanes(d, tail);
      xv[k][v] = d;
      if (v + 1 < NV && v % 2 == 1) s1 = v_fma(d, d, s1);
      else s0 = v_fma(d, d, s0);
    }
    float var = v_hsum(v_add(s0, s1)) / (float)cols;
    inv[k] = (float)(1.0 / sqrt((double)var + (double)eps));
  }
#pragma GCC unroll 4
  for (int k = 0; k < R; k++) {
    float *yr = y + (r + k) * cols;
    if (mean_out) mean_out[r + k] = mean[k];
    if (inv_out) inv_out[r + k] = inv[k];
    vf vinv = v_set(inv[k]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      vf o = v_mul(v_mul(xv[k][v], vinv), sc[v]);
      if (has_bias) o = v_add(o, bi[v]);
      if (v + 1 < NV) v_st(yr + v * VN, o);
      else v_st_n(yr + v * VN, o, tail);
    }
  }
}

static inline __attribute__((always_inline)) void ln_small(const float *x, float *y, int64_t r0, int64_t r1,
                                                           int64_t cols, const float *scale, const float *bias,
                                                           float eps, float *mean_out, float *inv_out, const int NV) {
  const int tail = (int)(cols - (NV - 1) * VN);
  vf sc[4], bi[4];
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++) {
    int c = v + 1 < NV ? VN : tail;
    sc[v] = v_ld_n(scale + v * VN, c);
    bi[v] = bias ? v_ld_n(bias + v * VN, c) : v_zero();
  }
  int64_t r = r0;
  for (; r + LN_ROWS <= r1; r += LN_ROWS)
    ln_small_rows(x, y, r, cols, sc, bi, bias != NULL, eps, mean_out, inv_out, NV, LN_ROWS);
  for (; r < r1; r++) ln_small_rows(x, y, r, cols, sc, bi, bias != NULL, eps, mean_out, inv_out, NV, 1);
}

/* Two passes over each row: the mean, then the variance of x - mean (no
 * cancellation), both summed in float over VN lanes (two partial sums,
 * alternate vectors, the tail in the first). */
static void vec_layernorm(const float *x, float *y, int64_t r0, int64_t r1, int64_t cols, const float *scale,
                          const float *bias, float eps, float *mean_out, float *inv_out) {
  switch ((cols + VN - 1) / VN) {
    case 1: ln_small(x, y, r0, r1, cols, scale, bias, eps, mean_out, inv_out, 1); return;
    case 2: ln_small(x, y, r0, r1, cols, scale, bias, eps, mean_out, inv_out, 2); return;
    case 3: ln_small(x, y, r0, r1, cols, scale, bias, eps, mean_out, inv_out, 3); return;
    case 4: ln_small(x, y, r0, r1, cols, scale, bias, eps, mean_out, inv_out, 4); return;
    default: break;
  }
  for (int64_t r = r0; r < r1; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    vf s0 = v_zero(), s1 = v_zero();
    int64_t i = 0;
    for (; i + 2 * VN <= cols; i += 2 * VN) {
      s0 = v_add(s0, v_ld(xr + i));
      s1 = v_add(s1, v_ld(xr + i + VN));
    }
    for (; i < cols; i += VN) s0 = v_add(s0, v_ld_n(xr + i, cols - i >= VN ? VN : (int)(cols - i)));
    float mean = v_hsum(v_add(s0, s1)) / (float)cols;
    vf vmean = v_set(mean);
    s0 = v_zero();
    s1 = v_zero();
    for (i = 0; i + 2 * VN <= cols; i += 2 * VN) {
      vf d0 = v_sub(v_ld(xr + i), vmean), d1 = v_sub(v_ld(xr + i + VN), vmean);
      s0 = v_fma(d0, d0, s0);
      s1 = v_fma(d1, d1, s1);
    }
    for (; i < cols; i += VN) {
      int c = cols - i >= VN ? VN : (int)(cols - i);
      vf d = first_lanes(v_sub(v_ld_n(xr + i, c), vmean), c);
      s0 = v_fma(d, d, s0);
    }
    float var = v_hsum(v_add(s0, s1)) / (float)cols;
    float inv = (float)(1.0 / sqrt((double)var + (double)eps));
    if (mean_out) mean_out[r] = mean;
    if (inv_out) inv_out[r] = inv;
    vf vinv = v_set(inv);
    for (i = 0; i < cols; i += VN) {
      int c = cols - i >= VN ? VN : (int)(cols - i);
      vf v = v_mul(v_mul(v_sub(v_ld_n(xr + i, c), vmean), vinv), v_ld_n(scale + i, c));
      if (bias) v = v_add(v, v_ld_n(bias + i, c));
      v_st_n(yr + i, v, c);
    }
  }
}
