/* vec-window-impl.h - depthwise convolution and 2-D pooling on a ring of
 * padded, phase-split rows, and global pooling (vec_dw, vec_global_pool),
 * written once over simd.h and vmath.h for every ISA; included by
 * vec-impl.h, which vec-<isa>.c compiles. */

/* ======================================================================== */
/* Depthwise convolution and 2-D pooling                                     */
/* ======================================================================== */

/* Each input row the window touches is first copied into a small ring of
 * rows (in L1) with its padding made explicit and, for a horizontal
 * stride s, its columns split into s phases (phase p holds padded columns
 * p, p + s, ...). The input of output column ox at tap kx is then phase
 * (kx*dw) % s at index ox + (kx*dw) / s: consecutive outputs read
 * consecutive floats, so every tap is one vector load and one FMA per VN
 * outputs, whatever the stride, with no bounds tests. Each padded row is
 * built once per plane. Blocks of up to 4 output rows by 2 vectors keep
 * enough independent accumulators to hide the FMA latency; with stride 1
 * every loaded input vector serves all the output rows of the block that
 * use it (3 for a 3x3 window), halving the loads per FMA. */

/* Output rows per block, and the ring's rows. */
#define DW_ROWS 4

typedef struct dw_ring {
  float *buf;                 /* [slots][rs] */
  int64_t slots, len, rs;     /* rows (a power of two), phase length, row stride (floats) */
  int64_t wp;                 /* padded columns */
  int64_t tag[ER_DW_RING_MAX]; /* padded row held by each slot; -1 none */
} dw_ring;

static inline void fill_floats(float *d, int64_t n, float v) {
  vf vv = v_set(v);
  int64_t i = 0;
  for (; i + VN <= n; i += VN) v_st(d + i, vv);
  for (; i < n; i++) d[i] = v;
}

static int64_t dw_slots(const er_dw_args *a) { return er__dw_ring_slots(a); }

static void dw_ring_init(dw_ring *rg, const er_dw_args *a, float *buf) {
  rg->buf = buf;
  rg->slots = dw_slots(a);
  rg->wp = (a->ow - 1) * a->sw + (a->kw - 1) * a->dw + 1;
  rg->len = (rg->wp + a->sw - 1) / a->sw + VN;
  rg->rs = (a->sw * rg->len + 15) / 16 * 16;
  for (int64_t i = 0; i < rg->slots; i++) rg->tag[i] = -1;
}

/* Padded row r (input row r - pt) of plane x, split into phases. */
static void dw_build_row(const er_dw_args *a, const dw_ring *rg, const float *x, int64_t r, float fill, float *row) {
  int64_t s = a->sw;
  int64_t iy = r - a->pt;
  if (iy < 0 || iy >= a->h) {
    fill_floats(row, s * rg->len, fill);
    return;
  }
  /* Padded columns [lo, hi) hold input columns [lo - pl, hi - pl). */
  int64_t lo = a->pl < rg->wp ? a->pl : rg->wp, hi = a->pl + a->w_;
  if (hi > rg->wp) hi = rg->wp;
  if (hi < lo) hi = lo;
  const float *src = x + iy * a->w_;
  if (s == 1) {
    /* Padded column q holds input column q - pl when lo <= q < hi: one
     * masked load per vector (only valid lanes are read), no calls. */
    vf vfill = v_set(fill);
    for (int64_t q = 0; q < rg->len; q += VN) {
      int64_t from = lo - q, to = hi - q;
      int la = from < 0 ? 0 : from > VN ? VN : (int)from, lb = to < 0 ? 0 : to > VN ? VN : (int)to;
      v_st(row + q, la < lb ? v_ld_range(src + (q - lo), la, lb, vfill) : vfill);
    }
    return;
  }
  /* Input column ix sits at padded column q = ix + pl: phase q % s, index
   * q / s. The phases are filled, then the input scattered in straight
   * from x (a copy into a buffer read back at once would stall on store
   * forwarding). */
  /* Fill only what the input does not cover: in phase p, index i is
   * padded column p + s * i. */
  for (int64_t p = 0; p < s; p++) {
    int64_t first = lo - p > 0 ? (lo - p + s - 1) / s : 0, end = hi - p > 0 ? (hi - p + s - 1) / s : 0;
    if (end < first) end = first;
    fill_floats(row + p * rg->len, first, fill);
    fill_floats(row + p * rg->len + end, rg->len - end, fill);
  }
  int64_t n_in = hi - lo;
  if (s == 2) {
    float *even = row + (a->pl & 1) * rg->len + (a->pl >> 1);
    float *odd = row + ((a->pl + 1) & 1) * rg->len + ((a->pl + 1) >> 1);
    int64_t j = 0;
    for (; 2 * j + 2 * VN <= n_in; j += VN) {
      vf e, o;
      v_deinterleave2(src + 2 * j, &e, &o);
      v_st(even + j, e);
      v_st(odd + j, o);
    }
    for (int64_t ix = 2 * j; ix < n_in; ix++) (ix & 1 ? odd : even)[ix >> 1] = src[ix];
  } else {
    for (int64_t ix = 0; ix < n_in; ix++) {
      int64_t q = ix + a->pl;
      row[(q % s) * rg->len + q / s] = src[ix];
    }
  }
}

static const float *dw_row(dw_ring *rg, const er_dw_args *a, const float *x, int64_t r, float fill) {
  int64_t slot = r & (rg->slots - 1); /* a power of two: no division per row */
  float *row = rg->buf + slot * rg->rs;
  if (rg->tag[slot] != r) {
    dw_build_row(a, rg, x, r, fill, row);
    rg->tag[slot] = r;
  }
  return row;
}

/* Taps inside [0, in) (valid) and inside [-pad_begin, in + pad_end)
 * (padded) of the window of output position o along one axis. */
static void window_counts(int64_t o, int64_t stride, int64_t pb, int64_t pe, int64_t dil, int64_t k, int64_t in,
                          int64_t *valid, int64_t *padded) {
  int64_t st = o * stride - pb;
  /* Without dilation no division (64-bit divisions made these counts a
   * fifth of a 3x3 average pool's time). */
  int64_t lo, hi, hp;
  if (dil == 1) {
    lo = st >= 0 ? 0 : -st;
    hi = in - st > 0 ? in - st : 0;
    hp = in + pe - st > 0 ? in + pe - st : 0;
  } else {
    lo = st >= 0 ? 0 : (-st + dil - 1) / dil;
    hi = in - st > 0 ? (in - st + dil - 1) / dil : 0;
    hp = in + pe - st > 0 ? (in + pe - st + dil - 1) / dil : 0;
  }
  if (hi > k) hi = k;
  if (lo > k) lo = k;
  if (hi < lo) hi = lo;
  if (hp > k) hp = k;
  *valid = hi - lo;
  *padded = hp;
}

/* The reference's max of one window: NaN is skipped unless every tap is
 * NaN; an empty window is -inf. Used for the rare lanes whose vector max
 * came out -inf. */
static float max_window_scalar(const er_dw_args *a, const float *x, int64_t oy, int64_t ox) {
  float acc = -INFINITY;
  bool any = false;
  for (int64_t ky = 0; ky < a->kh; ky++) {
    int64_t iy = oy * a->sh - a->pt + ky * a->dh;
    if (iy < 0 || iy >= a->h) continue;
    for (int64_t kx = 0; kx < a->kw; kx++) {
      int64_t ix = ox * a->sw - a->pl + kx * a->dw;
      if (ix < 0 || ix >= a->w_) continue;
      float v = x[iy * a->w_ + ix];
      if (!any || v > acc || acc != acc) acc = v;
      any = true;
    }
  }
  return acc;
}

/* One block: ROWS output rows x NVEC vectors at column ox0, any stride.
 * rowp[j] is padded row (first output row) * sh + j. KH, KW are
 * compile-time for 3x3 and 5x5 (0: from a). */
static inline __attribute__((always_inline)) void dw_block(const er_dw_args *a, const float *const *rowp,
                                                          const float *wc, const int64_t *col, int64_t ox0,
                                                          const int ROWS, const int NVEC, const int KH, const int KW,
                                                          vf *out /* [DW_ROWS][2] */) {
  const int64_t kh = KH ? KH : a->kh, kw = KW ? KW : a->kw;
  vf acc[DW_ROWS][2];
  vf init = a->pool == 1 ? v_set(-INFINITY) : v_zero();
#pragma GCC unroll 4
  for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NVEC; v++) acc[r][v] = init;
#pragma GCC unroll 5
  for (int64_t ky = 0; ky < kh; ky++) {
#pragma GCC unroll 5
    for (int64_t kx = 0; kx < kw; kx++) {
      int64_t off = col[kx] + ox0;
      if (a->pool == 0) {
        vf wv = v_set(wc[ky * kw + kx]);
#pragma GCC unroll 4
        for (int r = 0; r < ROWS; r++) {
          const float *src = rowp[r * a->sh + ky * a->dh] + off;
#pragma GCC unroll 2
          for (int v = 0; v < NVEC; v++) acc[r][v] = v_fma(wv, v_ld(src + v * VN), acc[r][v]);
        }
      } else {
#pragma GCC unroll 4
        for (int r = 0; r < ROWS; r++) {
          const float *src = rowp[r * a->sh + ky * a->dh] + off;
#pragma GCC unroll 2
          for (int v = 0; v < NVEC; v++)
            acc[r][v] = a->pool == 1 ? v_max(v_ld(src + v * VN), acc[r][v]) : v_add(acc[r][v], v_ld(src + v * VN));
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NVEC; v++) out[r * 2 + v] = acc[r][v];
}

/* Stride 1, dilation 1, convolution: each input row vector is loaded once
 * per kx and used by every output row of the block that reads it. */
static inline __attribute__((always_inline)) void dw_block_s1(const float *const *rowp, const float *wc,
                                                             int64_t ox0, const int ROWS, const int NVEC,
                                                             const int K, vf *out) {
  vf acc[DW_ROWS][2];
  vf w[25];
#pragma GCC unroll 25
  for (int i = 0; i < K * K; i++) w[i] = v_set(wc[i]);
#pragma GCC unroll 4
  for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NVEC; v++) acc[r][v] = v_zero();
#pragma GCC unroll 8
  for (int j = 0; j < ROWS + K - 1; j++) {
    const float *src = rowp[j] + ox0;
#pragma GCC unroll 5
    for (int kx = 0; kx < K; kx++) {
#pragma GCC unroll 2
      for (int v = 0; v < NVEC; v++) {
        vf xv = v_ld(src + kx + v * VN);
#pragma GCC unroll 4
        for (int r = 0; r < ROWS; r++) {
          int ky = j - r;
          if (ky >= 0 && ky < K) acc[r][v] = v_fma(w[ky * K + kx], xv, acc[r][v]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NVEC; v++) out[r * 2 + v] = acc[r][v];
}

typedef void (*dw_block_fn)(const er_dw_args *a, const float *const *rowp, const float *wc, const int64_t *col,
                            int64_t ox0, int rows, int nvec, vf *out);

#define DW_GENERIC(K1, K2)                                                                                  \
  static void dw_gen_##K1##x##K2(const er_dw_args *a, const float *const *rowp, const float *wc,            \
                                 const int64_t *col, int64_t ox0, int rows, int nvec, vf *out) {           \
    switch (rows * 2 + nvec - 1) {                                                                          \
      case 2: dw_block(a, rowp, wc, col, ox0, 1, 1, K1, K2, out); break;                                    \
      case 3: dw_block(a, rowp, wc, col, ox0, 1, 2, K1, K2, out); break;                                    \
      case 4: dw_block(a, rowp, wc, col, ox0, 2, 1, K1, K2, out); break;                                    \
      case 5: dw_block(a, rowp, wc, col, ox0, 2, 2, K1, K2, out); break;                                    \
      case 6: dw_block(a, rowp, wc, col, ox0, 3, 1, K1, K2, out); break;                                    \
      case 7: dw_block(a, rowp, wc, col, ox0, 3, 2, K1, K2, out); break;                                    \
      case 8: dw_block(a, rowp, wc, col, ox0, 4, 1, K1, K2, out); break;                                    \
      default: dw_block(a, rowp, wc, col, ox0, 4, 2, K1, K2, out); break;                                   \
    }                                                                                                       \
  }
DW_GENERIC(3, 3)
DW_GENERIC(5, 5)
DW_GENERIC(0, 0)
#undef DW_GENERIC

#define DW_S1(K)                                                                                            \
  static void dw_s1_##K(const er_dw_args *a, const float *const *rowp, const float *wc, const int64_t *col, \
                        int64_t ox0, int rows, int nvec, vf *out) {                                         \
    ER_UNUSED(a);                                                                                           \
    ER_UNUSED(col);                                                                                         \
    switch (rows * 2 + nvec - 1) {                                                                          \
      case 2: dw_block_s1(rowp, wc, ox0, 1, 1, K, out); break;                                              \
      case 3: dw_block_s1(rowp, wc, ox0, 1, 2, K, out); break;                                              \
      case 4: dw_block_s1(rowp, wc, ox0, 2, 1, K, out); break;                                              \
      case 5: dw_block_s1(rowp, wc, ox0, 2, 2, K, out); break;                                              \
      case 6: dw_block_s1(rowp, wc, ox0, 3, 1, K, out); break;                                              \
      case 7: dw_block_s1(rowp, wc, ox0, 3, 2, K, out); break;                                              \
      case 8: dw_block_s1(rowp, wc, ox0, 4, 1, K, out); break;                                              \
      default: dw_block_s1(rowp, wc, ox0, 4, 2, K, out); break;                                             \
    }                                                                                                       \
  }
DW_S1(3)
DW_S1(5)
#undef DW_S1

static void dw_plane_run(const er_dw_args *a, int64_t c, float *scratch) {
  const float *x = a->x + c * a->h * a->w_;
  float *y = a->y + c * a->oh * a->ow;
  const float *wc = a->w ? a->w + c * a->kh * a->kw : NULL;
  const float *add = a->add ? a->add + c * a->oh * a->ow : NULL;
  const float fill = a->pool == 1 ? -INFINITY : 0.0f;
  dw_ring rg;
  dw_ring_init(&rg, a, scratch);
  int64_t col[ER_DW_MAX_TAPS];
  for (int64_t kx = 0, t = 0; kx < a->kw; kx++, t += a->dw) col[kx] = (t % a->sw) * rg.len + t / a->sw;
  bool s1 = a->pool == 0 && a->sh == 1 && a->sw == 1 && a->dh == 1 && a->dw == 1 && a->kh == a->kw;
  dw_block_fn block = s1 && a->kh == 3                   ? dw_s1_3
                      : s1 && a->kh == 5                 ? dw_s1_5
                      : a->kh == 3 && a->kw == 3         ? dw_gen_3x3
                      : a->kh == 5 && a->kw == 5         ? dw_gen_5x5
                                                         : dw_gen_0x0;
  /* Average pools: per-column tap counts (as floats), after the ring. */
  float *cx = scratch + rg.slots * rg.rs;
  if (a->pool == 2) {
    for (int64_t ox = 0; ox < a->ow; ox++) {
      int64_t valid, padded;
      window_counts(ox, a->sw, a->pl, a->pr, a->dw, a->kw, a->w_, &valid, &padded);
      cx[ox] = (float)(a->count_include_pad ? padded : valid);
    }
    for (int64_t ox = a->ow; ox < a->ow + VN; ox++) cx[ox] = 1.0f;
  }
  vf bias = v_set(a->bias ? a->bias[c] : 0.0f);
  const float *rowp[ER_DW_RING_MAX];
  int rows;
  for (int64_t oy = 0; oy < a->oh; oy += rows) {
    rows = a->oh - oy >= DW_ROWS ? DW_ROWS : (int)(a->oh - oy);
    float cy[DW_ROWS];
    if (a->pool == 2) {
      /* Rows of a block share one divisor row each. */
      for (int r = 0; r < rows; r++) {
        int64_t v0, p0;
        window_counts(oy + r, a->sh, a->pt, a->pb, a->dh, a->kh, a->h, &v0, &p0);
        cy[r] = (float)(a->count_include_pad ? p0 : v0);
      }
    }
    int64_t span = (rows - 1) * a->sh + (a->kh - 1) * a->dh + 1;
    for (int64_t j = 0; j < span; j++) rowp[j] = dw_row(&rg, a, x, oy * a->sh + j, fill);
    for (int64_t ox0 = 0; ox0 < a->ow; ox0 += 2 * VN) {
      int64_t left = a->ow - ox0;
      int nvec = left > VN ? 2 : 1;
      vf out[DW_ROWS * 2];
      block(a, rowp, wc, col, ox0, rows, nvec, out);
      for (int r = 0; r < rows; r++) {
        for (int v = 0; v < nvec; v++) {
          int64_t ox = ox0 + v * VN;
          int n = left - v * VN >= VN ? VN : (int)(left - v * VN);
          float *dst = y + (oy + r) * a->ow + ox;
          vf o = out[r * 2 + v];
          if (a->pool == 0) {
            o = v_add(o, bias);
            if (add) o = v_add(o, n == VN ? v_ld(add + (oy + r) * a->ow + ox) : v_ld_n(add + (oy + r) * a->ow + ox, n));
            o = v_act(o, &a->act);
          } else if (a->pool == 2) {
            o = v_div(o, v_mul(v_set(cy[r]), v_ld(cx + ox)));
          }
          if (n == VN) v_st(dst, o);
          else v_st_n(dst, o, n);
          if (a->pool == 1 && v_any(v_lt(first_lanes(o, n), v_set(-FLT_MAX)))) {
            for (int i = 0; i < n; i++)
              if (dst[i] == -INFINITY) dst[i] = max_window_scalar(a, x, oy + r, ox + i);
          }
        }
      }
    }
  }
}

/* Pooling without dilation at horizontal stride 1 or 2, one plane: per
 * output row, the window's input rows are first reduced into one padded
 * row (contiguous vector loads, padding as the fill value), then each
 * output vector reduces kw taps of that row (stride 2 through even/odd
 * splits). Two passes over short rows instead of the ring's phase-split
 * copies: the pools of CNN stems and of ShuffleNet/SqueezeNet stages.
 * Lanes of a max that come out -inf (empty or all-NaN windows) are
 * recomputed by the reference rule, as in dw_plane_run. */
/* Row oy of the window-row reduction (max or sum over the window's input
 * rows) into rin[0, cols). */
static inline void pool_rows(const er_dw_args *a, const float *x, int64_t oy, float *rin, int64_t cols, bool max,
                             float fill) {
  const int64_t w = a->w_;
  int64_t y0 = oy * a->sh - a->pt;
  int64_t k0 = y0 < 0 ? -y0 : 0, k1 = a->h - y0 < a->kh ? a->h - y0 : a->kh;
  if (k1 < k0) k1 = k0;
  if (k1 == k0) {
    fill_floats(rin, cols, fill);
    return;
  }
  const float *r0 = x + (y0 + k0) * w;
  int64_t i = 0;
  /* Max starts from the fill so that a NaN tap is skipped whichever row it
   * is in (v_max(v, acc) keeps acc when v is NaN). */
  for (; i + VN <= cols; i += VN) {
    vf acc = max ? v_max(v_ld(r0 + i), v_set(fill)) : v_ld(r0 + i);
    for (int64_t ky = k0 + 1; ky < k1; ky++) {
      vf v = v_ld(r0 + (ky - k0) * w + i);
      acc = max ? v_max(v, acc) : v_add(acc, v);
    }
    v_st(rin + i, acc);
  }
  if (i < cols) {
    int n = (int)(cols - i);
    vf acc = max ? v_max(v_ld_n(r0 + i, n), v_set(fill)) : v_ld_n(r0 + i, n);
    for (int64_t ky = k0 + 1; ky < k1; ky++) {
      vf v = v_ld_n(r0 + (ky - k0) * w + i, n);
      acc = max ? v_max(v, acc) : v_add(acc, v);
    }
    /* Stored whole with the lanes past the row set to the fill, which is
     * what the buffer holds there (a masked store per row was slow on Zen
     * 3; the buffer extends past the row, see er__pool_row_floats). */
    static const float iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    v_st(rin + i, v_sel(v_lt(v_ld(iota), v_set((float)n)), v_set(fill), acc));
  }
}

static inline __attribute__((always_inline)) void pool_plane_direct_body(const er_dw_args *a, int64_t c,
                                                                        float *scratch, const bool max) {
  const float *x = a->x + c * a->h * a->w_;
  float *y = a->y + c * a->oh * a->ow;
  const float fill = max ? -INFINITY : 0.0f;
  const int64_t sw = a->sw, kw = a->kw, w = a->w_, pl = a->pl;
  /* Padded columns the windows cover, and what the vector loads past the
   * last output read (2 VN for the stride-2 splits). */
  const int64_t wp = (a->ow - 1) * sw + kw;
  const int64_t ox_end = (a->ow + VN - 1) / VN * VN;
  const int64_t need = er__pool_row_floats(a, VN);
  /* Two row buffers: row oy + 1 is reduced into one while row oy's
   * columns are read from the other, so no load waits on the stores just
   * made (a partial or shifted reload of them cannot be forwarded). */
  float *rows2[2] = {scratch, scratch + need};
  float *cx = scratch + 2 * need;
  if (!max) {
    for (int64_t ox = 0; ox < a->ow; ox++) {
      int64_t valid, padded;
      window_counts(ox, sw, pl, a->pr, 1, kw, w, &valid, &padded);
      cx[ox] = (float)(a->count_include_pad ? padded : valid);
    }
    for (int64_t ox = a->ow; ox < ox_end; ox++) cx[ox] = 1.0f;
  }
  /* Input columns [0, cols) land at row[pl ...]; the rest stays fill. */
  const int64_t cols = w < wp - pl ? w : (wp - pl > 0 ? wp - pl : 0);
  for (int b = 0; b < 2; b++) {
    fill_floats(rows2[b], pl < need ? pl : need, fill);
    if (pl + cols < need) fill_floats(rows2[b] + pl + cols, need - pl - cols, fill);
  }
  pool_rows(a, x, 0, rows2[0] + pl, cols, max, fill);
  for (int64_t oy = 0; oy < a->oh; oy++) {
    const float *row = rows2[oy & 1];
    if (oy + 1 < a->oh) pool_rows(a, x, oy + 1, rows2[(oy + 1) & 1] + pl, cols, max, fill);
    float cy = 1.0f;
    if (!max) {
      int64_t valid, padded;
      window_counts(oy, a->sh, a->pt, a->pb, 1, a->kh, a->h, &valid, &padded);
      cy = (float)(a->count_include_pad ? padded : valid);
    }
    float *yr = y + oy * a->ow;
    for (int64_t ox = 0; ox < a->ow; ox += VN) {
      int n = a->ow - ox >= VN ? VN : (int)(a->ow - ox);
      vf acc = v_set(fill);
      if (sw == 1) {
        const float *p = row + ox;
        for (int64_t kx = 0; kx < kw; kx++) acc = max ? v_max(v_ld(p + kx), acc) : v_add(acc, v_ld(p + kx));
      } else if (sw > 2) {
        /* Wider strides (MNIST's 3x3/s3): taps gathered lane by lane. */
        float lanes[VN];
        for (int i = 0; i < VN; i++) {
          const float *p = row + (ox + i) * sw;
          float t = fill;
          for (int64_t kx = 0; kx < kw; kx++) t = max ? (p[kx] > t || t != t ? p[kx] : t) : t + p[kx];
          lanes[i] = t;
        }
        acc = v_ld(lanes);
      } else {
        const float *p = row + 2 * ox;
        for (int64_t kx = 0; kx < kw; kx += 2) {
          vf e, o;
          v_deinterleave2(p + kx, &e, &o);
          acc = max ? v_max(e, acc) : v_add(acc, e);
          if (kx + 1 < kw) acc = max ? v_max(o, acc) : v_add(acc, o);
        }
      }
      if (!max) acc = v_div(acc, v_mul(v_set(cy), v_ld(cx + ox)));
      /* A row's tail is stored whole where the vector stays inside the
       * plane: the lanes past the row land on later rows, written after. */
      if (n == VN || (oy * a->ow + ox + VN <= a->oh * a->ow)) v_st(yr + ox, acc);
      else v_st_n(yr + ox, acc, n);
      if (max && v_any(v_lt(first_lanes(acc, n), v_set(-FLT_MAX)))) {
        for (int i = 0; i < n; i++)
          if (yr[ox + i] == -INFINITY) yr[ox + i] = max_window_scalar(a, x, oy, ox + i);
      }
    }
  }
}

/* One instance per reduction, so the max-or-sum choice is not tested in
 * the inner loops (SqueezeNet's three max pools: 0.27 -> 0.25 ms). */
static void pool_plane_max(const er_dw_args *a, int64_t c, float *scratch) { pool_plane_direct_body(a, c, scratch, true); }
static void pool_plane_avg(const er_dw_args *a, int64_t c, float *scratch) { pool_plane_direct_body(a, c, scratch, false); }

/* Depthwise convolution without dilation at horizontal stride 1 or 2,
 * one plane: the rows the windows cover are copied once into a
 * zero-padded plane (er__dw_direct_floats), then blocks of 4 output rows
 * x 1 or 2 vectors take their kh x kw taps straight from it (unaligned
 * loads at stride 1, even/odd splits at stride 2), eight independent
 * accumulators in flight. No per-row phase split or ring bookkeeping:
 * what small planes (MobileNet's 7x7 and 14x14 stages) and strided
 * layers spent most of their time on. The plane holds whole blocks of
 * rows (zeros past the last), so a block never reads outside it; rows
 * past the output are computed and dropped. KH, KW (0: from a) and SW
 * are compile-time for the common shapes. */
static inline __attribute__((always_inline)) void dw_direct_block(const er_dw_args *a, const float *plane,
                                                                  int64_t wpa, const float *wc, const vf *wv,
                                                                  vf bias, const float *add, float *y, int64_t oy,
                                                                  int64_t ox, const int NV, const int KH,
                                                                  const int KW, const int SW) {
  const int64_t kh = KH ? KH : a->kh, kw = KW ? KW : a->kw;
  vf acc[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) acc[r][v] = bias;
  const float *base = plane + oy * a->sh * wpa + ox * SW;
  const int64_t rstep = a->sh * wpa;
#pragma GCC unroll 7
  for (int64_t ky = 0; ky < kh; ky++) {
    const float *row = base + ky * wpa;
    if (SW == 1) {
#pragma GCC unroll 7
      for (int64_t kx = 0; kx < kw; kx++) {
        vf wt = KH && KW ? wv[ky * kw + kx] : v_set(wc[ky * kw + kx]);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
          for (int v = 0; v < NV; v++) acc[r][v] = v_fma(wt, v_ld(row + r * rstep + v * VN + kx), acc[r][v]);
      }
    } else {
      for (int64_t kx = 0; kx < kw; kx += 2) {
        vf w0 = KH && KW ? wv[ky * kw + kx] : v_set(wc[ky * kw + kx]);
        bool two = kx + 1 < kw;
        vf w1 = two ? (KH && KW ? wv[ky * kw + kx + 1] : v_set(wc[ky * kw + kx + 1])) : v_zero();
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
          for (int v = 0; v < NV; v++) {
            vf e, o;
            v_deinterleave2(row + r * rstep + 2 * v * VN + kx, &e, &o);
            acc[r][v] = v_fma(w0, e, acc[r][v]);
            if (two) acc[r][v] = v_fma(w1, o, acc[r][v]);
          }
      }
    }
  }
  for (int r = 0; r < 4 && oy + r < a->oh; r++)
    for (int v = 0; v < NV; v++) {
      int64_t at = (oy + r) * a->ow + ox + v * VN;
      int64_t left = a->ow - ox - v * VN;
      int n = left >= VN ? VN : (int)left;
      vf o = acc[r][v];
      if (add) o = v_add(o, n == VN ? v_ld(add + at) : v_ld_n(add + at, n));
      o = v_act(o, &a->act);
      if (n == VN) v_st(y + at, o);
      else v_st_n(y + at, o, n);
    }
}

static inline __attribute__((always_inline)) void dw_direct_body(const er_dw_args *a, int64_t c, float *scratch,
                                                                 const int KH, const int KW, const int SW) {
  const int64_t kh = KH ? KH : a->kh, kw = KW ? KW : a->kw;
  const float *x = a->x + c * a->h * a->w_;
  float *y = a->y + c * a->oh * a->ow;
  const float *wc = a->w + c * kh * kw;
  const float *add = a->add ? a->add + c * a->oh * a->ow : NULL;
  const int64_t wpa = er__dw_direct_stride(a, VN);
  const int64_t hp = er__dw_direct_rows(a);
  /* Only the input's own rows and columns are written: the padding
   * around them was zeroed once for all planes (vec_dw). */
  const int64_t lead = a->pl < wpa ? a->pl : wpa;
  const int64_t cols = a->w_ < wpa - lead ? a->w_ : wpa - lead;
  const int64_t r0 = a->pt, r1 = a->pt + a->h < hp ? a->pt + a->h : hp;
  for (int64_t r = r0; r < r1; r++) {
    float *d = scratch + r * wpa + lead;
    const float *src = x + (r - a->pt) * a->w_;
    int64_t i = 0;
    for (; i + VN <= cols; i += VN) v_st(d + i, v_ld(src + i));
    if (i < cols) v_st_n(d + i, v_ld_n(src + i, (int)(cols - i)), (int)(cols - i));
  }
  vf wv[25];
  if (KH && KW)
    for (int t = 0; t < KH * KW; t++) wv[t] = v_set(wc[t]);
  const vf bias = v_set(a->bias ? a->bias[c] : 0.0f);
  for (int64_t oy = 0; oy < a->oh; oy += 4) {
    int64_t ox = 0;
    for (; ox + VN < a->ow; ox += 2 * VN)
      dw_direct_block(a, scratch, wpa, wc, wv, bias, add, y, oy, ox, 2, KH, KW, SW);
    if (ox < a->ow) dw_direct_block(a, scratch, wpa, wc, wv, bias, add, y, oy, ox, 1, KH, KW, SW);
  }
}

static void dw_direct_3x3_s1(const er_dw_args *a, int64_t c, float *s) { dw_direct_body(a, c, s, 3, 3, 1); }
static void dw_direct_3x3_s2(const er_dw_args *a, int64_t c, float *s) { dw_direct_body(a, c, s, 3, 3, 2); }
static void dw_direct_5x5_s1(const er_dw_args *a, int64_t c, float *s) { dw_direct_body(a, c, s, 5, 5, 1); }
static void dw_direct_5x5_s2(const er_dw_args *a, int64_t c, float *s) { dw_direct_body(a, c, s, 5, 5, 2); }
static void dw_direct_any_s1(const er_dw_args *a, int64_t c, float *s) { dw_direct_body(a, c, s, 0, 0, 1); }
static void dw_direct_any_s2(const er_dw_args *a, int64_t c, float *s) { dw_direct_body(a, c, s, 0, 0, 2); }

/* Flat-plane depthwise convolution (see er__dw_flat_shape): the plane's
 * input is copied into its zero-padded (phase) planes, then every block of
 * ER_DW_FLAT_UNROLL vectors of flat outputs takes each tap as one
 * unaligned load from its plane at a fixed offset and one FMA: no
 * even/odd splits at stride 2, no partial vectors on narrow rows (a 7x7
 * output fills 4 vectors for 63 positions where row by row it took 8
 * half-empty ones). The flat result is then compacted into Y row by row,
 * with the residual, and the activation runs once over the plane. */
/* Input plane c into the padded planes (only input positions are
 * written; the padding stays as vec_dw zeroed it). */
static void dw_flat_load(const er_dw_args *a, const float *x, float *planes, int64_t pf) {
  const int64_t wq = er__dw_flat_stride(a), hq = er__dw_flat_rows(a);
  if (a->sw == 1) {
    int64_t cols = a->w_ < wq - a->pl ? a->w_ : wq - a->pl;
    for (int64_t iy = 0; iy < a->h; iy++) {
      int64_t r = iy + a->pt;
      if (r >= hq) break;
      if (cols <= 0) continue;
      /* The row's tail as a whole vector, zero past the row: it lands on
       * this row's right padding and the next row's left padding (zeros
       * either way), and on the next row's first columns, which that row
       * then writes; the plane's margin holds the last one. A masked store
       * per row was a third of this copy on Zen 3. */
      float *d = planes + r * wq + a->pl;
      const float *src = x + iy * a->w_;
      int64_t i = 0;
      for (; i + VN <= cols; i += VN) v_st(d + i, v_ld(src + i));
      if (i < cols) v_st(d + i, v_ld_n(src + i, (int)(cols - i)));
    }
    return;
  }
  /* Stride 2: padded column X = ix + pl goes to phase X & 1, column X >> 1.
   * Even input columns land in phase pl & 1, odd ones in the other. */
  const int64_t pe = a->pl & 1, ce = a->pl >> 1, co = (a->pl + 1) >> 1;
  int64_t ne = (a->w_ + 1) / 2, no = a->w_ / 2;
  if (ne > wq - ce) ne = wq - ce;
  if (no > wq - co) no = wq - co;
  if (ne < 0) ne = 0;
  if (no < 0) no = 0;
  for (int64_t iy = 0; iy < a->h; iy++) {
    int64_t yy = iy + a->pt, r = yy >> 1;
    if (r >= hq) break;
    float *base = planes + (yy & 1) * 2 * pf + r * wq;
    float *de = base + pe * pf + ce, *dodd = base + (1 - pe) * pf + co;
    const float *src = x + iy * a->w_;
    int64_t j = 0, both = ne < no ? ne : no;
    for (; j + VN <= both && 2 * j + 2 * VN <= a->w_; j += VN) {
      vf e, o;
      v_deinterleave2(src + 2 * j, &e, &o);
      v_st(de + j, e);
      v_st(dodd + j, o);
    }
    /* The rest: partial loads of what is left of the row (at most 2 VN
     * floats), split, partial stores of what each phase takes. */
    int64_t most = ne > no ? ne : no;
    for (; j < most; j += VN) {
      int64_t left = a->w_ - 2 * j;
      int n0 = left >= VN ? VN : (int)left, n1 = left - VN >= VN ? VN : left > VN ? (int)(left - VN) : 0;
      vf e, o;
      v_uzp(v_ld_n(src + 2 * j, n0), n1 > 0 ? v_ld_n(src + 2 * j + VN, n1) : v_zero(), &e, &o);
      int64_t me = ne - j, mo = no - j;
      if (me >= VN) v_st(de + j, e);
      else if (me > 0) v_st_n(de + j, e, (int)me);
      if (mo >= VN) v_st(dodd + j, o);
      else if (mo > 0) v_st_n(dodd + j, o, (int)mo);
    }
  }
}

/* The flat outputs of channel c from its loaded planes into out. Taps
 * address their plane directly (no per-plane tables: small planes are
 * over in one block of vectors, where building tables cost as much as
 * the products). */
static inline __attribute__((always_inline)) void dw_flat_compute(const er_dw_args *a, int64_t c,
                                                                  const float *planes, float *out, const int KH,
                                                                  const int KW) {
  const int64_t kh = KH ? KH : a->kh, kw = KW ? KW : a->kw;
  const int64_t wq = er__dw_flat_stride(a), pf = er__dw_flat_plane_floats(a, VN);
  const int64_t nflat = er__dw_flat_out_floats(a, VN);
  const float *wc = a->w + c * kh * kw;
  const vf bias = v_set(a->bias ? a->bias[c] : 0.0f);
  const bool s2 = a->sw == 2;
  for (int64_t p = 0; p < nflat; p += ER_DW_FLAT_UNROLL * VN) {
    vf acc0 = bias, acc1 = bias, acc2 = bias, acc3 = bias;
#pragma GCC unroll 7
    for (int64_t ky = 0; ky < kh; ky++) {
#pragma GCC unroll 7
      for (int64_t kx = 0; kx < kw; kx++) {
        const float *q = s2 ? planes + ((ky & 1) * 2 + (kx & 1)) * pf + (ky >> 1) * wq + (kx >> 1) + p
                            : planes + ky * wq + kx + p;
        vf w = v_set(wc[ky * kw + kx]);
        acc0 = v_fma(w, v_ld(q), acc0);
        acc1 = v_fma(w, v_ld(q + VN), acc1);
        acc2 = v_fma(w, v_ld(q + 2 * VN), acc2);
        acc3 = v_fma(w, v_ld(q + 3 * VN), acc3);
      }
    }
    v_st(out + p, acc0);
    v_st(out + p + VN, acc1);
    v_st(out + p + 2 * VN, acc2);
    v_st(out + p + 3 * VN, acc3);
  }
}

/* Channel c's flat outputs into Y, with the residual and the activation,
 * row by row (a second pass over the plane for HardSwish cost PP-LCNet's
 * depthwise layers a fifth of their time). `kind` is a constant in each
 * instance, so v_act's choice folds away; DW_ACT_ANY reads it from `a`
 * (the rare ones). */
#define DW_ACT_ANY ((er_act)-1)
static inline __attribute__((always_inline)) void dw_flat_rows(const er_dw_args *a, const float *out, float *y,
                                                               const float *add, const er_act kind) {
  const int64_t wq = er__dw_flat_stride(a), ow = a->ow, plane = a->oh * ow;
  const vf lo = kind == ER_ACT_CLIP ? v_set(a->act.p[0]) : v_zero(), hi = v_set(a->act.p[1]);
  er_activation act = a->act;
  if (kind != DW_ACT_ANY) act.kind = kind;
  /* Whole vectors, in order: a vector past the end of its row writes the
   * next row's first outputs, which that row then overwrites. Only a
   * vector that would pass the end of the plane is masked (masked stores
   * are slow on some cores, e.g. AMD Zen 4). */
  for (int64_t oy = 0; oy < a->oh; oy++) {
    const float *src = out + oy * wq;
    const int64_t at = oy * ow;
    for (int64_t i = 0; i < ow; i += VN) {
      int n = at + i + VN <= plane ? VN : (int)(ow - i < VN ? ow - i : VN);
      vf v = v_ld(src + i);
      if (add) v = v_add(v, n == VN ? v_ld(add + at + i) : v_ld_n(add + at + i, n));
      /* As v_act orders them (NaN handling). */
      if (kind == ER_ACT_RELU) v = v_max(v_zero(), v);
      else if (kind == ER_ACT_CLIP) v = v_min(hi, v_max(lo, v));
      else if (kind != ER_ACT_NONE) v = v_act(v, &act);
      if (n == VN) v_st(y + at + i, v);
      else v_st_n(y + at + i, v, n);
    }
  }
}

static void dw_flat_store(const er_dw_args *a, int64_t c, const float *out) {
  float *y = a->y + c * a->oh * a->ow;
  const float *add = a->add ? a->add + c * a->oh * a->ow : NULL;
  switch (a->act.kind) {
    case ER_ACT_NONE: dw_flat_rows(a, out, y, add, ER_ACT_NONE); return;
    case ER_ACT_RELU: dw_flat_rows(a, out, y, add, ER_ACT_RELU); return;
    case ER_ACT_CLIP: dw_flat_rows(a, out, y, add, ER_ACT_CLIP); return;
    case ER_ACT_HARDSWISH: dw_flat_rows(a, out, y, add, ER_ACT_HARDSWISH); return;
    case ER_ACT_SILU: dw_flat_rows(a, out, y, add, ER_ACT_SILU); return;
    default: dw_flat_rows(a, out, y, add, DW_ACT_ANY); return;
  }
}
#undef DW_ACT_ANY

/* Channels [c0, c1), two buffers in turn (er__dw_flat_floats). */
static inline __attribute__((always_inline)) void dw_flat_range(const er_dw_args *a, int64_t c0, int64_t c1,
                                                                float *scratch, const int KH, const int KW) {
  const int64_t pf = er__dw_flat_plane_floats(a, VN), np = a->sw == 2 ? 4 : 1;
  const int64_t bf = er__dw_flat_buffer_floats(a, VN);
  float *planes[2] = {scratch, scratch + bf};
  float *outs[2] = {scratch + np * pf, scratch + bf + np * pf};
  const int64_t hw = a->h * a->w_;
  dw_flat_load(a, a->x + c0 * hw, planes[0], pf);
  for (int64_t c = c0; c < c1; c++) {
    int b = (int)((c - c0) & 1);
    if (c + 1 < c1) dw_flat_load(a, a->x + (c + 1) * hw, planes[1 - b], pf);
    dw_flat_compute(a, c, planes[b], outs[b], KH, KW);
    if (c > c0) dw_flat_store(a, c - 1, outs[1 - b]);
  }
  dw_flat_store(a, c1 - 1, outs[(c1 - 1 - c0) & 1]);
}

static void dw_flat_3x3(const er_dw_args *a, int64_t c0, int64_t c1, float *s) { dw_flat_range(a, c0, c1, s, 3, 3); }
static void dw_flat_5x5(const er_dw_args *a, int64_t c0, int64_t c1, float *s) { dw_flat_range(a, c0, c1, s, 5, 5); }
static void dw_flat_any(const er_dw_args *a, int64_t c0, int64_t c1, float *s) { dw_flat_range(a, c0, c1, s, 0, 0); }

static void vec_dw(const er_dw_args *a, int64_t c0, int64_t c1, float *scratch) {
  typedef void (*plane_fn)(const er_dw_args *, int64_t, float *);
  plane_fn f = dw_plane_run;
  if (a->pool && a->dh == 1 && a->dw == 1) f = a->pool == 1 ? pool_plane_max : pool_plane_avg;
  else if (er__dw_flat_ok(a)) {
    if (c1 <= c0) return;
    bool k3 = a->kh == 3 && a->kw == 3, k5 = a->kh == 5 && a->kw == 5;
    /* The padding of both buffers' planes stays zero: loads write only
     * input positions. */
    int64_t bf = er__dw_flat_buffer_floats(a, VN), pfl = er__dw_flat_plane_floats(a, VN) * (a->sw == 2 ? 4 : 1);
    fill_floats(scratch, pfl, 0.0f);
    fill_floats(scratch + bf, pfl, 0.0f);
    (k3 ? dw_flat_3x3 : k5 ? dw_flat_5x5 : dw_flat_any)(a, c0, c1, scratch);
    return;
  } else if (er__dw_direct_ok(a)) {
    bool k3 = a->kh == 3 && a->kw == 3, k5 = a->kh == 5 && a->kw == 5;
    f = a->sw == 1 ? (k3 ? dw_direct_3x3_s1 : k5 ? dw_direct_5x5_s1 : dw_direct_any_s1)
                   : (k3 ? dw_direct_3x3_s2 : k5 ? dw_direct_5x5_s2 : dw_direct_any_s2);
  }
  if (f != dw_plane_run && f != pool_plane_max && f != pool_plane_avg && c1 > c0)
    fill_floats(scratch, er__dw_direct_rows(a) * er__dw_direct_stride(a, VN), 0.0f);
  for (int64_t c = c0; c < c1; c++) f(a, c, scratch);
}

/* ======================================================================== */
/* Global pooling                                                            */
/* ======================================================================== */

/* Four accumulators per plane keep the adds independent. Max skips NaN
 * like the reference unless every element is NaN (fixed up in scalar code
 * when the vector result is -inf, which all-NaN planes produce). */
static void vec_global_pool(const float *x, float *y, int64_t size, int64_t p0, int64_t p1, bool max) {
  for (int64_t p = p0; p < p1; p++) {
    const float *src = x + p * size;
    vf init = max ? v_set(-INFINITY) : v_zero();
    vf a0 = init, a1 = init, a2 = init, a3 = init;
    int64_t i = 0;
    if (max) {
      for (; i + 4 * VN <= size; i += 4 * VN) {
        a0 = v_max(v_ld(src + i), a0);
        a1 = v_max(v_ld(src + i + VN), a1);
        a2 = v_max(v_ld(src + i + 2 * VN), a2);
        a3 = v_max(v_ld(src + i + 3 * VN), a3);
      }
      for (; i + VN <= size; i += VN) a0 = v_max(v_ld(src + i), a0);
      a0 = v_max(a1, a0);
      a2 = v_max(a3, a2);
      a0 = v_max(a2, a0);
      float m = v_hmax(a0);
      for (; i < size; i++)
        if (src[i] > m) m = src[i];
      if (m == -INFINITY && size > 0) {
        float acc = src[0];
        for (int64_t j = 1; j < size; j++)
          if (src[j] > acc || acc != acc) acc = src[j];
        m = acc;
      }
      y[p] = m;
    } else {
      for (; i + 4 * VN <= size; i += 4 * VN) {
        a0 = v_add(a0, v_ld(src + i));
        a1 = v_add(a1, v_ld(src + i + VN));
        a2 = v_add(a2, v_ld(src + i + 2 * VN));
        a3 = v_add(a3, v_ld(src + i + 3 * VN));
      }
      for (; i + VN <= size; i += VN) a0 = v_add(a0, v_ld(src + i));
      if (i < size) a1 = v_add(a1, v_ld_n(src + i, (int)(size - i)));
      float s = v_hsum(v_add(v_add(a0, a1), v_add(a2, a3)));
      y[p] = (float)((double)s / (double)size);
    }
  }
}
