/* vec-conv-impl.h - direct convolution of small dense layers at stride 1
 * (vec_conv_direct), written once over simd.h and vmath.h for every ISA;
 * included by vec-impl.h, which vec-<isa>.c compiles. */

/* ======================================================================== */
/* Direct convolution (small dense layers at stride 1)                      */
/* ======================================================================== */

/* Rows per block: 8 channels x CD_ROWS rows of accumulators, plus the
 * input vectors and a weight, must fit the vector registers (32 with
 * AVX-512 and NEON, 16 with AVX2). */
#if VN == 8
#define CD_ROWS 1
#else
#define CD_ROWS 2
#endif

static inline __attribute__((always_inline)) void cd_block(const er_conv_direct *d, int64_t mb, int64_t oy, int64_t ox,
                                                           const int ROWS) {
  vf acc[ER_CD_MB][CD_ROWS];
#pragma GCC unroll 8
  for (int j = 0; j < ER_CD_MB; j++) {
    int64_t m = mb * ER_CD_MB + j;
    vf b = v_set(d->bias && m < d->m ? d->bias[m] : 0.0f);
#pragma GCC unroll 2
    for (int r = 0; r < ROWS; r++) acc[j][r] = b;
  }
  const int64_t k = d->c * d->kh * d->kw;
  const float *wk = d->wp + mb * k * ER_CD_MB;
  const float *xb = d->xp + oy * d->wpa + ox;
  for (int64_t c = 0; c < d->c; c++) {
    for (int64_t ky = 0; ky < d->kh; ky++) {
      const float *xr = xb + (c * d->hp + ky) * d->wpa;
      for (int64_t kx = 0; kx < d->kw; kx++, wk += ER_CD_MB) {
        vf xv[CD_ROWS];
#pragma GCC unroll 2
        for (int r = 0; r < ROWS; r++) xv[r] = v_ld(xr + r * d->wpa + kx);
#pragma GCC unroll 8
        for (int j = 0; j < ER_CD_MB; j++) {
          vf wj = v_set(wk[j]);
#pragma GCC unroll 2
          for (int r = 0; r < ROWS; r++) acc[j][r] = v_fma(wj, xv[r], acc[j][r]);
        }
      }
    }
  }
  int n = d->ow - ox >= VN ? VN : (int)(d->ow - ox);
  for (int j = 0; j < ER_CD_MB; j++) {
    int64_t m = mb * ER_CD_MB + j;
    if (m >= d->m) break;
    for (int r = 0; r < ROWS && oy + r < d->oh; r++) {
      int64_t at = (m * d->oh + oy + r) * d->ow + ox;
      vf o = acc[j][r];
      if (d->add) o = v_add(o, n == VN ? v_ld(d->add + at) : v_ld_n(d->add + at, n));
      o = v_act(o, &d->act);
      if (n == VN) v_st(d->y + at, o);
      else v_st_n(d->y + at, o, n);
    }
  }
}

static void vec_conv_direct(const er_conv_direct *d, int64_t u0, int64_t u1) {
  for (int64_t u = u0; u < u1; u++) {
    int64_t mb = u / d->row_blocks, oy = (u % d->row_blocks) * CD_ROWS;
    for (int64_t ox = 0; ox < d->ow; ox += VN) cd_block(d, mb, oy, ox, CD_ROWS);
  }
}
