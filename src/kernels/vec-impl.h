/* vec-impl.h - the vectorized non-GEMM kernels of vec.h, written once over
 * simd.h and vmath.h; vec-<isa>.c includes it to build er__vec_<isa>. */
#include <float.h>
#include <math.h>

#include "kernels/vec.h"
#include "kernels/window.h"

/* The first n lanes of v, the rest 0 (in registers: reading back what a
 * partial store just wrote stalls store forwarding). */
static inline vf first_lanes(vf v, int n) {
  static const float iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return n >= VN ? v : v_sel(v_lt(v_ld(iota), v_set((float)n)), v_zero(), v);
}

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
static void vec_unary(const er_unary *u, const float *x, float *y, int64_t n);

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

/* ======================================================================== */
/* im2col packing                                                            */
/* ======================================================================== */

/* A write cursor over one row kk of a panel block (panels [q][kc][nr]):
 * consecutive columns, jumping to the next panel every nr. */
typedef struct panel_cursor {
  float *d;            /* current panel's row */
  int64_t lane, nr, step;
} panel_cursor;

static inline void put_zeros(panel_cursor *pc, int64_t n) {
  while (n > 0) {
    int64_t m = pc->nr - pc->lane < n ? pc->nr - pc->lane : n;
    float *d = pc->d + pc->lane;
    int64_t i = 0;
    for (; i + VN <= m; i += VN) v_st(d + i, v_zero());
    if (i < m) v_st_n(d + i, v_zero(), (int)(m - i));
    n -= m;
    pc->lane += m;
    if (pc->lane == pc->nr) {
      pc->lane = 0;
      pc->d += pc->step;
    }
  }
}

/* Copies n values src[0], src[stride], ...: vector copies for stride 1,
 * even/odd splits for stride 2 (a split reads 2 VN floats, the last of
 * them one past the last value it keeps, so only while more than VN
 * values remain: nothing past the input row is read), scalar otherwise. */
static inline void put_values(panel_cursor *pc, const float *src, int64_t stride, int64_t n) {
  while (n > 0) {
    int64_t m = pc->nr - pc->lane < n ? pc->nr - pc->lane : n;
    float *d = pc->d + pc->lane;
    int64_t i = 0;
    if (stride == 1) {
      for (; i + VN <= m; i += VN) v_st(d + i, v_ld(src + i));
      if (i < m) v_st_n(d + i, v_ld_n(src + i, (int)(m - i)), (int)(m - i));
    } else if (stride == 2) {
      for (; i + VN < m; i += VN) {
        vf e, o;
        v_deinterleave2(src + 2 * i, &e, &o);
        v_st(d + i, e);
      }
      if (i < m) {
        /* The last (up to VN) values: partial loads of exactly the 2 r - 1
         * floats they span, split (pixel-major panels of 14 pixels at
         * stride 2: a ResNet or MobileNet stem's patches). */
        int r = (int)(m - i), span = 2 * r - 1;
        int n0 = span < VN ? span : VN, n1 = span - n0;
        vf e, o;
        v_uzp(v_ld_n(src + 2 * i, n0), n1 > 0 ? v_ld_n(src + 2 * i + VN, n1) : v_zero(), &e, &o);
        if (r == VN) v_st(d + i, e);
        else v_st_n(d + i, e, r);
      }
    } else {
      for (; i < m; i++) d[i] = src[i * stride];
    }
    src += m * stride;
    n -= m;
    pc->lane += m;
    if (pc->lane == pc->nr) {
      pc->lane = 0;
      pc->d += pc->step;
    }
  }
}

/* VN consecutive taps kx .. kx + VN - 1 of kernel row ky of channel c as
 * VN rows of the panels, when every pixel's window row holds all of them
 * (dilation 1, no padding met): per VN pixels, VN loads of VN contiguous
 * floats and a transpose. Wide strided windows (an STFT as a 1-D
 * convolution: 512 taps at stride 160) went element by element. */
static inline bool im2col_taps_inside(const er_window *g, int64_t ky, int64_t kx) {
  const int64_t xoff = kx - g->pl, y0 = ky * g->dh - g->pt;
  return g->dw == 1 && kx + VN <= g->kw && xoff >= 0 && xoff + VN - 1 + (g->ow - 1) * g->sw < g->w && y0 >= 0 &&
         y0 + (g->oh - 1) * g->sh < g->h;
}

static void im2col_taps_block(const er_window *g, const float *xc, int64_t ky, int64_t kx, int64_t j0, int64_t nc,
                              int nr, int64_t kc, float *dst) {
  const int64_t xoff = kx - g->pl, y0 = ky * g->dh - g->pt;
  for (int64_t jj = 0; jj < nc; jj += VN) {
    const int n = nc - jj < VN ? (int)(nc - jj) : VN;
    vf r[VN];
    for (int p = 0; p < VN; p++) {
      if (p < n) {
        const int64_t j = j0 + jj + p, oy = j / g->ow, ox = j % g->ow;
        r[p] = v_ld(xc + (oy * g->sh + y0) * g->w + ox * g->sw + xoff);
      } else {
        r[p] = v_zero();
      }
    }
    v_transpose(r);
    /* Columns jj .. jj + n of the block: panel jj / nr, lane jj % nr (nr
     * is a multiple of VN). */
    float *d = dst + (jj / nr) * kc * nr + jj % nr;
    for (int t = 0; t < VN; t++) {
      if (n == VN) v_st(d + t * nr, r[t]);
      else v_st_n(d + t * nr, r[t], n);
    }
  }
}

static void vec_im2col_pack(const er_im2col *ic, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *dst) {
  const er_window *g = ic->g;
  const int nr = ic->nr;
  const int64_t ow = g->ow, hw = g->h * g->w;
  const int64_t ncp = (nc + nr - 1) / nr * nr;
  const int64_t oy0 = j0 / ow, ox0 = j0 % ow;
  /* (c, ky, kx) of row k0, stepped along with kk. */
  int64_t c = k0 / (g->kh * g->kw), ky = (k0 / g->kw) % g->kh, kx = k0 % g->kw;
  const bool blocks = g->sw > 2 && nr % VN == 0 && g->kw >= VN;
  for (int64_t kk = 0; kk < kc; kk++) {
    if (blocks && kk + VN <= kc && im2col_taps_inside(g, ky, kx)) {
      im2col_taps_block(g, ic->x + c * hw, ky, kx, j0, nc, nr, kc, dst + kk * nr);
      /* The padding columns of the last panel, on each of the VN rows. */
      if (ncp > nc) {
        for (int t = 0; t < VN; t++) {
          panel_cursor pc = {dst + (kk + t) * nr + (nc / nr) * kc * nr, (int64_t)(nc % nr), nr, kc * nr};
          put_zeros(&pc, ncp - nc);
        }
      }
      kk += VN - 1;
      kx += VN - 1;
      /* (the step below moves to the next tap) */
    } else {
      const float *xc = ic->x + c * hw;
      int64_t xoff = kx * g->dw - g->pl; /* ix = ox * sw + xoff */
      int64_t lo = xoff >= 0 ? 0 : (-xoff + g->sw - 1) / g->sw;
      int64_t hi = g->w - xoff > 0 ? (g->w - xoff + g->sw - 1) / g->sw : 0;
      if (lo > ow) lo = ow;
      if (hi > ow) hi = ow;
      if (hi < lo) hi = lo;
      panel_cursor pc = {dst + kk * nr, 0, nr, kc * nr};
      int64_t jj = 0, oy = oy0, ox = ox0;
      while (jj < nc) {
        int64_t seg = ow - ox < nc - jj ? ow - ox : nc - jj;
        int64_t iy = oy * g->sh - g->pt + ky * g->dh;
        if (iy < 0 || iy >= g->h) {
          put_zeros(&pc, seg);
        } else {
          const float *row = xc + iy * g->w;
          /* [a, b): the segment's columns inside the row; a segment may
           * end before lo (a left padding wider than the window). */
          int64_t a = ox > lo ? ox : lo, b = ox + seg < hi ? ox + seg : hi;
          if (a > ox + seg) a = ox + seg;
          if (b < a) b = a;
          put_zeros(&pc, a - ox);
          put_values(&pc, row + a * g->sw + xoff, g->sw, b - a);
          put_zeros(&pc, ox + seg - b);
        }
        jj += seg;
        oy++;
        ox = 0;
      }
      put_zeros(&pc, ncp - nc);
    }
    if (++kx == g->kw) {
      kx = 0;
      if (++ky == g->kh) {
        ky = 0;
        c++;
      }
    }
  }
}

/* ======================================================================== */
/* Few-row products with an unpacked B                                       */
/* ======================================================================== */

static inline vf gemv_finish(const er_gemv *g, int64_t i, int64_t j, vf x, int n) {
  x = v_mul(x, v_set(g->scale));
  if (g->add) {
    const float *ad = g->add + i * g->add_rs + j * g->add_cs;
    x = v_fma(v_set(g->beta), g->add_cs ? v_ld_n(ad, n) : v_set(ad[0]), x);
  }
  if (g->bias) x = v_add(x, v_ld_n(g->bias + j, n));
  return v_act(x, &g->act);
}

/* B row-major [K, N] (b_cs == 1): rows of B stream once; M rows of C x 2
 * vectors of columns accumulate in registers. M is a constant in each
 * instance so the accumulators stay in registers (with M read at run time
 * they lived on the stack, and every FMA waited on a store: a 1 x 1568 x 64
 * layer took 15 us); one row splits K over two accumulator sets to break
 * the FMA latency chain. */
/* Rows of B prefetched ahead by the multi-row loop: with 2-4 rows of A a
 * k step is long enough that the hardware prefetchers alone left the loads
 * of a 12.8 MB classifier waiting (3 to 4 rows: 28 GB/s against 50-60 for
 * one row). Prefetches never fault. */
#define GEMV_PF_ROWS 32
#define GEMV_LD0(p) (n0 == VN ? v_ld(p) : v_ld_n(p, n0))
#define GEMV_LD1(p) (n1 >= VN ? v_ld((p) + VN) : n1 > 0 ? v_ld_n((p) + VN, n1) : v_zero())
#define GEMV_ROWS_BODY(M, K2)                                                    \
  for (int64_t j = j0; j < j1; j += 2 * VN) {                                    \
    int n0 = j1 - j >= VN ? VN : (int)(j1 - j);                                  \
    int n1 = j1 - j - VN >= VN ? VN : (int)(j1 - j - VN);                        \
    vf acc[M][2], acc2[M][2];                                                    \
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) acc[i][0] = acc[i][1] = acc2[i][0] = acc2[i][1] = v_zero(); \
    const float *br = g->b + j;                                                  \
    int64_t k = 0;                                                               \
    if (K2)                                                                      \
      for (; k + 2 <= g->k; k += 2, br += 2 * g->b_rs) {                         \
        vf b0 = GEMV_LD0(br), b1 = GEMV_LD1(br);                                 \
        vf b2 = GEMV_LD0(br + g->b_rs), b3 = GEMV_LD1(br + g->b_rs);             \
        _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {                    \
          const float *ar = g->a + i * g->a_rs + k * g->a_cs;                    \
          vf av = v_set(ar[0]), aw = v_set(ar[g->a_cs]);                         \
          acc[i][0] = v_fma(av, b0, acc[i][0]);                                  \
          acc[i][1] = v_fma(av, b1, acc[i][1]);                                  \
          acc2[i][0] = v_fma(aw, b2, acc2[i][0]);                                \
          acc2[i][1] = v_fma(aw, b3, acc2[i][1]);                                \
        }                                                                        \
      }                                                                          \
    for (; k < g->k; k++, br += g->b_rs) {                                       \
      __builtin_prefetch(br + GEMV_PF_ROWS * g->b_rs, 0, 3);                     \
      __builtin_prefetch(br + GEMV_PF_ROWS * g->b_rs + VN, 0, 3);                \
      vf b0 = GEMV_LD0(br), b1 = GEMV_LD1(br);                                   \
      _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {                      \
        vf av = v_set(g->a[i * g->a_rs + k * g->a_cs]);                          \
        acc[i][0] = v_fma(av, b0, acc[i][0]);                                    \
        acc[i][1] = v_fma(av, b1, acc[i][1]);                                    \
      }                                                                          \
    }                                                                            \
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {                        \
      float *c = g->c + i * g->ldc + j;                                          \
      v_st_n(c, gemv_finish(g, i, j, v_add(acc[i][0], acc2[i][0]), n0), n0);     \
      if (n1 > 0) v_st_n(c + VN, gemv_finish(g, i, j + VN, v_add(acc[i][1], acc2[i][1]), n1), n1); \
    }                                                                            \
  }

static void gemv_rows1(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(1, 1) }
static void gemv_rows2(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(2, 0) }
static void gemv_rows3(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(3, 0) }
static void gemv_rows4(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(4, 0) }
#if VN == 16
/* 5-8 rows (ER_GEMV_ROWS_MAX_M_16): 2 x M accumulators, in registers
 * only with AVX-512's 32. */
static void gemv_rows5(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(5, 0) }
static void gemv_rows6(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(6, 0) }
static void gemv_rows7(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(7, 0) }
static void gemv_rows8(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(8, 0) }
#endif
#undef GEMV_ROWS_BODY
#undef GEMV_LD0
#undef GEMV_LD1
#undef GEMV_PF_ROWS

static void gemv_rows(const er_gemv *g, int64_t j0, int64_t j1) {
  switch (g->m) {
    case 1: gemv_rows1(g, j0, j1); break;
    case 2: gemv_rows2(g, j0, j1); break;
    case 3: gemv_rows3(g, j0, j1); break;
#if VN == 16
    case 4: gemv_rows4(g, j0, j1); break;
    case 5: gemv_rows5(g, j0, j1); break;
    case 6: gemv_rows6(g, j0, j1); break;
    case 7: gemv_rows7(g, j0, j1); break;
    default: gemv_rows8(g, j0, j1); break;
#else
    default: gemv_rows4(g, j0, j1); break;
#endif
  }
}

/* One column of gemv_dots for M rows of A (contiguous along K): M a
 * constant in each instance, so the accumulators stay in registers (a
 * run-time count kept them on the stack, a store per FMA). */
static inline __attribute__((always_inline)) void dots_col(const er_gemv *g, const float *br,
                                                           float (*out)[VN], int jj, const int M) {
  const int64_t k = g->k;
  vf acc[ER_GEMV_MAX_M];
#pragma GCC unroll 4
  for (int i = 0; i < M; i++) acc[i] = v_zero();
  int64_t q = 0;
  for (; q + VN <= k; q += VN) {
    vf bv = v_ld(br + q);
#pragma GCC unroll 4
    for (int i = 0; i < M; i++) acc[i] = v_fma(v_ld(g->a + i * g->a_rs + q), bv, acc[i]);
  }
  if (q < k) {
    int r = (int)(k - q);
    vf bv = v_ld_n(br + q, r);
#pragma GCC unroll 4
    for (int i = 0; i < M; i++) acc[i] = v_fma(v_ld_n(g->a + i * g->a_rs + q, r), bv, acc[i]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < M; i++) out[i][jj] = v_hsum(acc[i]);
}

/* B transposed, stored [N, K] (b_rs == 1): each column of C is a dot
 * product along a contiguous row of B, which is read once for all rows of
 * A. */
static void gemv_dots(const er_gemv *g, int64_t j0, int64_t j1) {
  const int64_t m = g->m, k = g->k;
  float out[ER_GEMV_MAX_M][VN];
  for (int64_t jb = j0; jb < j1; jb += VN) {
    int nj = j1 - jb >= VN ? VN : (int)(j1 - jb);
    int jj = 0;
    if (g->a_cs == 1 && m == 1)
      /* One row of A (a classifier at batch 1): four accumulators over
       * consecutive vectors of the row of B, which streams in order (one
       * chain was FMA-latency-bound: MobileNetV2's 1280 x 1000 classifier
       * took 281 us with its weights in cache, 96 us now; four rows of B
       * side by side were slower from DRAM). */
      for (; jj < nj; jj++) {
        const float *br = g->b + (jb + jj) * g->b_cs, *a = g->a;
        vf a0 = v_zero(), a1 = v_zero(), a2 = v_zero(), a3 = v_zero();
        int64_t q = 0;
        for (; q + 4 * VN <= k; q += 4 * VN) {
          a0 = v_fma(v_ld(a + q), v_ld(br + q), a0);
          a1 = v_fma(v_ld(a + q + VN), v_ld(br + q + VN), a1);
          a2 = v_fma(v_ld(a + q + 2 * VN), v_ld(br + q + 2 * VN), a2);
          a3 = v_fma(v_ld(a + q + 3 * VN), v_ld(br + q + 3 * VN), a3);
        }
        for (; q + VN <= k; q += VN) a0 = v_fma(v_ld(a + q), v_ld(br + q), a0);
        if (q < k) a1 = v_fma(v_ld_n(a + q, (int)(k - q)), v_ld_n(br + q, (int)(k - q)), a1);
        out[0][jj] = v_hsum(v_add(v_add(a0, a1), v_add(a2, a3)));
      }
    for (; jj < nj; jj++) {
      const float *br = g->b + (jb + jj) * g->b_cs;
      if (g->a_cs == 1) {
        switch (m) {
          case 1: dots_col(g, br, out, jj, 1); break;
          case 2: dots_col(g, br, out, jj, 2); break;
          case 3: dots_col(g, br, out, jj, 3); break;
          default: dots_col(g, br, out, jj, 4); break;
        }
      } else {
        int64_t q;
        for (int64_t i = 0; i < m; i++) {
          float sacc = 0.0f;
          for (q = 0; q < k; q++) sacc += g->a[i * g->a_rs + q * g->a_cs] * br[q];
          out[i][jj] = sacc;
        }
      }
    }
    for (int64_t i = 0; i < m; i++)
      v_st_n(g->c + i * g->ldc + jb, gemv_finish(g, i, jb, v_ld_n(out[i], nj), nj), nj);
  }
}

static void vec_gemv(const er_gemv *g, int64_t j0, int64_t j1) {
  if (g->b_cs == 1) gemv_rows(g, j0, j1);
  else gemv_dots(g, j0, j1);
}

/* ======================================================================== */
/* Winograd F(2x2, 3x3) transforms                                          */
/* ======================================================================== */

/* One channel's transformed tiles go to a contiguous staging row per
 * product first ([mats][chunk], no panel boundaries inside a vector
 * store), then into the GEMM's panel layout [p / nr][C][nr] in whole
 * panel rows. */
static void wino_flush(const er_wino *w, int mats, int64_t c, const float *stage) {
  const int64_t nr = w->nr;
  for (int t = 0; t < mats; t++) {
    const float *src = stage + (size_t)t * (size_t)w->chunk;
    float *vt = w->v + (size_t)t * w->v_stride;
    for (int64_t p = 0; p < w->tn; p += nr) {
      int64_t n = w->tn - p < nr ? w->tn - p : nr;
      float *d = vt + ((p / nr) * w->c + c) * nr;
      int64_t i = 0;
      for (; i + VN <= n; i += VN) v_st(d + i, v_ld(src + p + i));
      if (i < n) v_st_n(d + i, v_ld_n(src + p + i, (int)(n - i)), (int)(n - i));
    }
  }
}

static void vec_wino_input(const er_wino *w, int64_t c0, int64_t c1, float *scratch) {
  const int64_t tw = w->tw, wpp = 2 * tw + 2 + 2 * VN;
  const int64_t ty0 = w->t0 / tw, ty1 = (w->t0 + w->tn - 1) / tw;
  float *stage = scratch + (4 * wpp + 15) / 16 * 16;
  for (int64_t c = c0; c < c1; c++) {
    const float *xc = w->x + c * w->h * w->w;
    for (int64_t ty = ty0; ty <= ty1; ty++) {
      /* The 4 padded input rows of this tile row, in scratch. */
      for (int r = 0; r < 4; r++) {
        float *row = scratch + r * wpp;
        int64_t iy = 2 * ty - w->pt + r;
        if (iy < 0 || iy >= w->h) {
          for (int64_t q = 0; q < wpp; q++) row[q] = 0.0f;
          continue;
        }
        int64_t lo = w->pl < wpp ? w->pl : wpp, hi = w->pl + w->w < wpp ? w->pl + w->w : wpp;
        for (int64_t q = 0; q < lo; q++) row[q] = 0.0f;
        if (hi > lo) memcpy(row + lo, xc + iy * w->w, (size_t)(hi - lo) * sizeof *row);
        for (int64_t q = hi > lo ? hi : lo; q < wpp; q++) row[q] = 0.0f;
      }
      int64_t txa = w->t0 > ty * tw ? w->t0 - ty * tw : 0;
      int64_t txb = w->t0 + w->tn - ty * tw < tw ? w->t0 + w->tn - ty * tw : tw;
      for (int64_t tx = txa; tx < txb; tx += VN) {
        int n = txb - tx >= VN ? VN : (int)(txb - tx);
        vf d[4][4];
        for (int r = 0; r < 4; r++) {
          const float *row = scratch + r * wpp + 2 * tx;
          v_deinterleave2(row, &d[r][0], &d[r][1]);
          v_deinterleave2(row + 2, &d[r][2], &d[r][3]);
        }
        /* t = B^T d (rows), then v = t B (columns). */
        vf t[4][4];
        for (int j = 0; j < 4; j++) {
          t[0][j] = v_sub(d[0][j], d[2][j]);
          t[1][j] = v_add(d[1][j], d[2][j]);
          t[2][j] = v_sub(d[2][j], d[1][j]);
          t[3][j] = v_sub(d[1][j], d[3][j]);
        }
        int64_t p = ty * tw + tx - w->t0;
        for (int i = 0; i < 4; i++) {
          vf v0 = v_sub(t[i][0], t[i][2]), v1 = v_add(t[i][1], t[i][2]);
          vf v2 = v_sub(t[i][2], t[i][1]), v3 = v_sub(t[i][1], t[i][3]);
          v_st_n(stage + (size_t)(4 * i + 0) * (size_t)w->chunk + p, v0, n);
          v_st_n(stage + (size_t)(4 * i + 1) * (size_t)w->chunk + p, v1, n);
          v_st_n(stage + (size_t)(4 * i + 2) * (size_t)w->chunk + p, v2, n);
          v_st_n(stage + (size_t)(4 * i + 3) * (size_t)w->chunk + p, v3, n);
        }
      }
    }
    wino_flush(w, 16, c, stage);
  }
}

/* Y = A^T M A with A^T = [1 1 1 0; 0 1 -1 -1], then the epilogue; the two
 * output columns of VN tiles are interleaved into 2 VN consecutive pixels. */
static inline void wino_store_row(const er_wino *w, int64_t mch, int64_t oy, int64_t ox, int64_t limit, vf even,
                                  vf odd, vf bias) {
  if (oy >= w->oh) return;
  /* Pixels of this vector's tiles only (limit), and inside the image. */
  int64_t count = w->ow - ox < limit ? w->ow - ox : limit;
  if (count <= 0) return;
  vf lo, hi;
  v_interleave2(even, odd, &lo, &hi);
  float *dst = w->y + (mch * w->oh + oy) * w->ow + ox;
  const float *add = w->add ? w->add + (mch * w->oh + oy) * w->ow + ox : NULL;
  int n0 = count >= VN ? VN : (int)count, n1 = (int)(count - n0);
  lo = v_add(lo, bias);
  if (add) lo = v_add(lo, v_ld_n(add, n0));
  v_st_n(dst, v_act(lo, &w->act), n0);
  if (n1 > 0) {
    hi = v_add(hi, bias);
    if (add) hi = v_add(hi, v_ld_n(add + VN, n1));
    v_st_n(dst + VN, v_act(hi, &w->act), n1);
  }
}

static void vec_wino_output(const er_wino *w, int64_t m0, int64_t m1) {
  const int64_t tw = w->tw;
  const int64_t ty0 = w->t0 / tw, ty1 = (w->t0 + w->tn - 1) / tw;
  for (int64_t mch = m0; mch < m1; mch++) {
    vf bias = v_set(w->bias ? w->bias[mch] : 0.0f);
    for (int64_t ty = ty0; ty <= ty1; ty++) {
      int64_t txa = w->t0 > ty * tw ? w->t0 - ty * tw : 0;
      int64_t txb = w->t0 + w->tn - ty * tw < tw ? w->t0 + w->tn - ty * tw : tw;
      for (int64_t tx = txa; tx < txb; tx += VN) {
        int n = txb - tx >= VN ? VN : (int)(txb - tx);
        int64_t p = ty * tw + tx - w->t0;
        vf mv[16];
        for (int t = 0; t < 16; t++) mv[t] = v_ld_n(w->mo + (size_t)t * w->m_stride + mch * w->tn + p, n);
        vf s0[4], s1[4];
        for (int j = 0; j < 4; j++) {
          s0[j] = v_add(v_add(mv[j], mv[4 + j]), mv[8 + j]);
          s1[j] = v_sub(v_sub(mv[4 + j], mv[8 + j]), mv[12 + j]);
        }
        vf y00 = v_add(v_add(s0[0], s0[1]), s0[2]), y01 = v_sub(v_sub(s0[1], s0[2]), s0[3]);
        vf y10 = v_add(v_add(s1[0], s1[1]), s1[2]), y11 = v_sub(v_sub(s1[1], s1[2]), s1[3]);
        int64_t ox = 2 * tx;
        wino_store_row(w, mch, 2 * ty, ox, 2 * n, y00, y01, bias);
        wino_store_row(w, mch, 2 * ty + 1, ox, 2 * n, y10, y11, bias);
      }
    }
  }
}

/* ---- F(4x4, 3x3) ------------------------------------------------------------ */

/* B^T d for one column of six (or d B for one row): the rows of
 * B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
 *        0 2 -1 -2 1 0; 0 4 0 -5 0 1]. */
static inline void wino4_bt(const vf *d, vf *o) {
  vf four = v_set(4.0f), five = v_set(5.0f), two = v_set(2.0f);
  o[0] = v_add(v_fnma(five, d[2], v_mul(four, d[0])), d[4]);
  o[1] = v_add(v_add(d[3], d[4]), v_mul(four, v_neg(v_add(d[1], d[2]))));
  o[2] = v_add(v_sub(d[4], d[3]), v_mul(four, v_sub(d[1], d[2])));
  o[3] = v_add(v_sub(d[4], d[2]), v_mul(two, v_sub(d[3], d[1])));
  o[4] = v_add(v_sub(d[4], d[2]), v_mul(two, v_sub(d[1], d[3])));
  o[5] = v_add(v_fnma(five, d[3], v_mul(four, d[1])), d[5]);
}

static void vec_wino4_input(const er_wino *w, int64_t c0, int64_t c1, float *scratch) {
  const int64_t tw = w->tw, wpp = 4 * tw + 4 + 4 * VN;
  const int64_t ty0 = w->t0 / tw, ty1 = (w->t0 + w->tn - 1) / tw;
  float *stage = scratch + (6 * wpp + 15) / 16 * 16;
  for (int64_t c = c0; c < c1; c++) {
    const float *xc = w->x + c * w->h * w->w;
    for (int64_t ty = ty0; ty <= ty1; ty++) {
      for (int r = 0; r < 6; r++) {
        float *row = scratch + r * wpp;
        int64_t iy = 4 * ty - w->pt + r;
        if (iy < 0 || iy >= w->h) {
          for (int64_t q = 0; q < wpp; q++) row[q] = 0.0f;
          continue;
        }
        int64_t lo = w->pl < wpp ? w->pl : wpp, hi = w->pl + w->w < wpp ? w->pl + w->w : wpp;
        for (int64_t q = 0; q < lo; q++) row[q] = 0.0f;
        if (hi > lo) memcpy(row + lo, xc + iy * w->w, (size_t)(hi - lo) * sizeof *row);
        for (int64_t q = hi > lo ? hi : lo; q < wpp; q++) row[q] = 0.0f;
      }
      int64_t txa = w->t0 > ty * tw ? w->t0 - ty * tw : 0;
      int64_t txb = w->t0 + w->tn - ty * tw < tw ? w->t0 + w->tn - ty * tw : tw;
      for (int64_t tx = txa; tx < txb; tx += VN) {
        int n = txb - tx >= VN ? VN : (int)(txb - tx);
        /* d[r][j]: column 4 tx + j of padded row r, VN tiles at once (two
         * levels of even/odd splits give the stride-4 columns). */
        vf t[6][6];
        for (int r = 0; r < 6; r++) {
          const float *row = scratch + r * wpp + 4 * tx;
          vf d[8];
          for (int h = 0; h < 2; h++) {
            const float *p = row + 4 * h;
            vf e01, o01, e23, o23;
            v_uzp(v_ld(p), v_ld(p + VN), &e01, &o01);
            v_uzp(v_ld(p + 2 * VN), v_ld(p + 3 * VN), &e23, &o23);
            v_uzp(e01, e23, &d[4 * h + 0], &d[4 * h + 2]);
            v_uzp(o01, o23, &d[4 * h + 1], &d[4 * h + 3]);
          }
          /* Row r of d B, i.e. B^T applied along the row. */
          wino4_bt(d, t[r]);
        }
        int64_t p = ty * tw + tx - w->t0;
        for (int j = 0; j < 6; j++) {
          vf col[6], o[6];
          for (int r = 0; r < 6; r++) col[r] = t[r][j];
          wino4_bt(col, o);
          for (int i = 0; i < 6; i++) v_st_n(stage + (size_t)(6 * i + j) * (size_t)w->chunk + p, o[i], n);
        }
      }
    }
    wino_flush(w, 36, c, stage);
  }
}

/* A^T m for one column of six: rows of A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0;
 * 0 1 1 4 4 0; 0 1 -1 8 -8 1]. */
static inline void wino4_at(const vf *m, vf *o) {
  vf s12 = v_add(m[1], m[2]), d12 = v_sub(m[1], m[2]), s34 = v_add(m[3], m[4]), d34 = v_sub(m[3], m[4]);
  o[0] = v_add(v_add(m[0], s12), s34);
  o[1] = v_fma(v_set(2.0f), d34, d12);
  o[2] = v_fma(v_set(4.0f), s34, s12);
  o[3] = v_add(v_fma(v_set(8.0f), d34, d12), m[5]);
}

/* Winograd weights: U = G g G^T of every (m, c) 3x3 kernel of wd [mm][cc][9]
 * into tmp [a * a][mm][cc] (a = tile + 2), in double and rounded once to
 * float. Here rather than in conv.c so that the double loops vectorize at
 * the ISA's width: the same double operations at any width (GCC in ISO C
 * mode does not contract them into FMAs), so U is bit for bit what conv.c
 * computed with SSE2. */
static void vec_wino_weights(const float *wd, int64_t mm, int64_t cc, int tile, float *tmp) {
  const int a = tile + 2;
  /* In double, rounded once. */
  static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static const double G4[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                  {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  const double(*G)[3] = tile == 4 ? G4 : G2;
  /* Eight input channels at a time, lane by lane: the same arithmetic per
   * channel, in loops the compiler vectorizes (VGG-19's transforms took
   * 165 ms of its load one channel at a time). */
  enum { CB = 8 };
  for (int64_t m = 0; m < mm; m++) {
    for (int64_t c0 = 0; c0 < cc; c0 += CB) {
      int nb = cc - c0 < CB ? (int)(cc - c0) : CB;
      double gk[9][CB], tg[6][3][CB], u[6][6][CB];
      for (int q = 0; q < 9; q++)
        for (int l = 0; l < CB; l++) gk[q][l] = l < nb ? wd[(m * cc + c0 + l) * 9 + q] : 0.0;
      for (int i = 0; i < a; i++)
        for (int j = 0; j < 3; j++)
          for (int l = 0; l < CB; l++)
            tg[i][j][l] = G[i][0] * gk[j][l] + G[i][1] * gk[3 + j][l] + G[i][2] * gk[6 + j][l];
      for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++)
          for (int l = 0; l < CB; l++) u[i][j][l] = tg[i][0][l] * G[j][0] + tg[i][1][l] * G[j][1] + tg[i][2][l] * G[j][2];
      for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) {
          float *dst = tmp + ((size_t)(i * a + j) * (size_t)mm + (size_t)m) * (size_t)cc + (size_t)c0;
          /* A whole batch with a constant count, so the conversion and
           * the store vectorize (scalar stores were half the time). */
          if (nb == CB)
            for (int l = 0; l < CB; l++) dst[l] = (float)u[i][j][l];
          else
            for (int l = 0; l < nb; l++) dst[l] = (float)u[i][j][l];
        }
    }
  }
}

static void vec_wino4_output(const er_wino *w, int64_t m0, int64_t m1) {
  const int64_t tw = w->tw;
  const int64_t ty0 = w->t0 / tw, ty1 = (w->t0 + w->tn - 1) / tw;
  for (int64_t mch = m0; mch < m1; mch++) {
    vf bias = v_set(w->bias ? w->bias[mch] : 0.0f);
    for (int64_t ty = ty0; ty <= ty1; ty++) {
      int64_t txa = w->t0 > ty * tw ? w->t0 - ty * tw : 0;
      int64_t txb = w->t0 + w->tn - ty * tw < tw ? w->t0 + w->tn - ty * tw : tw;
      for (int64_t tx = txa; tx < txb; tx += VN) {
        int n = txb - tx >= VN ? VN : (int)(txb - tx);
        int64_t p = ty * tw + tx - w->t0;
        /* s = A^T M (rows 0..3), column by column. */
        vf s[4][6];
        for (int j = 0; j < 6; j++) {
          vf col[6], o[4];
          for (int i = 0; i < 6; i++) col[i] = v_ld_n(w->mo + (size_t)(6 * i + j) * w->m_stride + mch * w->tn + p, n);
          wino4_at(col, o);
          for (int i = 0; i < 4; i++) s[i][j] = o[i];
        }
        for (int i = 0; i < 4; i++) {
          int64_t oy = 4 * ty + i;
          if (oy >= w->oh) break;
          vf y[4];
          wino4_at(s[i], y);
          /* Pixels 4 tx + j of VN tiles: two levels of interleaving. */
          vf alo, ahi, blo, bhi, out[4];
          v_interleave2(y[0], y[2], &alo, &ahi);
          v_interleave2(y[1], y[3], &blo, &bhi);
          v_interleave2(alo, blo, &out[0], &out[1]);
          v_interleave2(ahi, bhi, &out[2], &out[3]);
          int64_t ox = 4 * tx;
          int64_t count = w->ow - ox < 4 * n ? w->ow - ox : 4 * n;
          float *dst = w->y + (mch * w->oh + oy) * w->ow + ox;
          const float *add = w->add ? w->add + (mch * w->oh + oy) * w->ow + ox : NULL;
          for (int k = 0; k < 4 && count > 0; k++) {
            int c = count >= VN ? VN : (int)count;
            vf o = v_add(out[k], bias);
            if (add) o = v_add(o, v_ld_n(add + k * VN, c));
            v_st_n(dst + k * VN, v_act(o, &w->act), c);
            count -= c;
          }
        }
      }
    }
  }
}

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
