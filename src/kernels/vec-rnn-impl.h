/* vec-rnn-impl.h - LSTM and GRU cells (vec_lstm_cell, vec_gru_gates,
 * vec_gru_update), written once over simd.h and vmath.h for every ISA;
 * included by vec-impl.h, which vec-<isa>.c compiles. */

/* ======================================================================== */
/* LSTM cell                                                                 */
/* ======================================================================== */

/* GRU gates: zr [2n] (z then r, before their activation) through the
 * sigmoid in place; with rh, rh = r * h (the reset state the default
 * GRU multiplies by R_h). */
static void vec_gru_gates(float *zr, const float *h, float *rh, int64_t n) {
  for (int64_t j = 0; j < 2 * n; j += VN) {
    int k = 2 * n - j >= VN ? VN : (int)(2 * n - j);
    v_st_n(zr + j, v_sigmoid(v_ld_n(zr + j, k)), k);
  }
  if (!rh) return;
  for (int64_t j = 0; j < n; j += VN) {
    int k = n - j >= VN ? VN : (int)(n - j);
    v_st_n(rh + j, v_mul(v_ld_n(zr + n + j, k), v_ld_n(h + j, k)), k);
  }
}

/* GRU output: hh = tanh(xh + r * gh) (xh and r may be NULL: tanh(gh)),
 * h = (1 - z) hh + z h in place. */
static void vec_gru_update(const float *xh, const float *gh, const float *z, const float *r, float *h, int64_t n) {
  for (int64_t j = 0; j < n; j += VN) {
    int k = n - j >= VN ? VN : (int)(n - j);
    vf g = v_ld_n(gh + j, k);
    if (r) g = v_mul(v_ld_n(r + j, k), g);
    if (xh) g = v_add(v_ld_n(xh + j, k), g);
    vf hh = v_tanh(g), zv = v_ld_n(z + j, k), hv = v_ld_n(h + j, k);
    v_st_n(h + j, v_fma(zv, v_sub(hv, hh), hh), k);
  }
}

static void vec_lstm_cell(const float *g, float *c, float *h, int64_t n) {
  for (int64_t j = 0; j < n; j += VN) {
    int k = n - j >= VN ? VN : (int)(n - j);
    vf gi = v_sigmoid(v_ld_n(g + j, k)), go = v_sigmoid(v_ld_n(g + n + j, k));
    vf gf = v_sigmoid(v_ld_n(g + 2 * n + j, k)), gc = v_tanh(v_ld_n(g + 3 * n + j, k));
    vf cn = v_fma(gf, v_ld_n(c + j, k), v_mul(gi, gc));
    v_st_n(c + j, cn, k);
    v_st_n(h + j, v_mul(go, v_tanh(cn)), k);
  }
}
