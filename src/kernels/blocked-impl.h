/* blocked-impl.h - the channel-blocked layout's kernels (blocked.h), written
 * once over simd.h and compiled per ISA by blocked-<isa>.c with the block B
 * equal to VN: one vector is the B channels of one pixel.
 *
 * Dense convolution. A tile is R output pixels of one row times two output
 * blocks: 2R accumulators (28 of AVX-512's 32 registers at R = 14, as the
 * SGEMM's 14 x 32 tile), and for every tap and input channel two weight
 * vectors and R broadcasts of the input, 2R FMAs. Input and output stay in
 * their layout: no patch matrix, no packing, no transposed store (what the
 * planar GEMM path spends on a 1x1 layer). Taps never test borders: the
 * caller hands a zero-padded copy when the convolution pads.
 *
 * Depthwise convolution and pools. A tile is 8 output pixels of one block:
 * per tap one weight vector, 8 input loads and 8 FMAs (max or add for
 * pools), all lanes useful whatever the image size; pixels whose window
 * crosses a border take only the taps inside. */
#ifndef VN
#error "include simd.h first"
#endif

#include <float.h>
#include <math.h>

/* A work unit (group) has up to a->gb output blocks (2, or BK_GB_MAX for
 * 1x1 layers where the ISA allows more); a tile of nb blocks is up to
 * BK_R_FOR(nb) pixels wide, so that it keeps about BK_ACC accumulators.
 * On AVX2 (16 registers) 1x1 layers take 4 blocks x 3 pixels: each
 * broadcast input then feeds four FMAs, and the input is re-read once
 * per 32 output channels instead of per 16. */
#if VN == 16
#define BK_RMAX 14
#define BK_GB_MAX 2
#define BK_ACC 28
#elif VN == 8
#define BK_RMAX 6
#define BK_GB_MAX 4
#define BK_ACC 12
#else
#define BK_RMAX 12
#define BK_GB_MAX 2
#define BK_ACC 24
#endif
/* Bytes of a group's weights a row is run with at a time (input blocks
 * chunked so that they stay in L1; 0: all blocks at once). */
#if VN == 8
#define BK_KCHUNK_BYTES (16 * 1024)
#else
#define BK_KCHUNK_BYTES 0
#endif
#define BK_R_FOR(nb) (BK_ACC / (nb) < BK_RMAX ? BK_ACC / (nb) : BK_RMAX)
#define BK_DW_R 8
/* The dense tile prefetches its weights this many lane steps ahead (two
 * taps at B = 16): ResNet-50's 3x3 layers stream up to 9 MB of weights
 * from memory per run, and the stalls at every 4 KiB page cost 5-10%
 * (55.2 -> 52.2-52.9 ms for the model on this Xeon; 16 ahead gained
 * less, 64 no more). */
#define BK_PF_LANES 32
#ifndef BK_UNROLL_FEW
#define BK_UNROLL_FEW 1
#endif
#define BK_STR(x) #x
#define BK_UNROLL(n) _Pragma(BK_STR(GCC unroll n))

/* ---- epilogue ---------------------------------------------------------------- */

/* Lanes at or past `valid` (channels past M in the last block) become 0. */
static inline vf bk_keep(vf x, int valid) {
  if (valid >= VN) return x;
  float lane[VN];
  for (int i = 0; i < VN; i++) lane[i] = (float)i;
  return v_sel(v_lt(v_ld(lane), v_set((float)valid)), v_zero(), x);
}

/* The activation `act` applied through MAP, a macro that maps EXPR (of
 * the sum `o`) over a tile's sums: the switch happens once per tile, not
 * per vector. v_act's switch per stored vector (or a call, when GCC left
 * it out of line) cost the 1x1 layers with few input channels a fifth of
 * their time. */
#define BK_ACT_SWITCH(act, MAP)                                  \
  switch ((act)->kind) {                                         \
    case ER_ACT_NONE: MAP(o); break;                             \
    case ER_ACT_RELU: MAP(v_max(v_zero(), o)); break;            \
    case ER_ACT_CLIP: {                                          \
      const vf act_lo = v_set((act)->p[0]), act_hi = v_set((act)->p[1]); \
      MAP(v_min(act_hi, v_max(act_lo, o)));                      \
      break;                                                     \
    }                                                            \
    case ER_ACT_HARDSWISH: MAP(v_hardswish(o)); break;           \
    case ER_ACT_LEAKYRELU: {                                     \
      const vf act_slope = v_set((act)->p[0]);                   \
      MAP(v_sel(v_lt(o, v_zero()), o, v_mul(o, act_slope)));     \
      break;                                                     \
    }                                                            \
    default: MAP(v_act(o, (act))); break;                        \
  }

/* A tile's sums start from the partial sums in y (a later pass over input
 * blocks), the bias, or zero. */
static inline __attribute__((always_inline)) void bk_acc_init(const er_bconv *a, vf acc[BK_RMAX][BK_GB_MAX],
                                                              int64_t ob, int64_t oy, int64_t ox0, int64_t cb0,
                                                              const int R, const int NB) {
  const float *yt = a->y + ob * a->ybs + (oy * a->ow + ox0) * VN;
#pragma GCC unroll 16
  for (int p = 0; p < BK_RMAX; p++)
#pragma GCC unroll 4
    for (int v = 0; v < BK_GB_MAX; v++)
      if (p < R && v < NB)
        acc[p][v] = cb0 ? v_ld(yt + v * a->ybs + p * VN) : a->bias ? v_ld(a->bias + (ob + v) * VN) : v_zero();
}

/* Partial sums back to y when input blocks remain (cb1 < cbk); else the
 * residual, the activation and the zeroed padding lanes. */
static inline __attribute__((always_inline)) void bk_acc_store(const er_bconv *a, vf acc[BK_RMAX][BK_GB_MAX],
                                                               int64_t ob, int64_t oy, int64_t ox0, int64_t cb1,
                                                               const int R, const int NB) {
  if (cb1 < a->cbk) {
    float *yt = a->y + ob * a->ybs + (oy * a->ow + ox0) * VN;
#pragma GCC unroll 16
    for (int p = 0; p < BK_RMAX; p++)
#pragma GCC unroll 4
      for (int v = 0; v < BK_GB_MAX; v++)
        if (p < R && v < NB) v_st(yt + v * a->ybs + p * VN, acc[p][v]);
    return;
  }
  const int64_t at0 = ob * a->ybs + (oy * a->ow + ox0) * VN;
  if (a->add) {
#pragma GCC unroll 4
    for (int v = 0; v < BK_GB_MAX; v++)
#pragma GCC unroll 16
      for (int p = 0; p < BK_RMAX; p++)
        if (p < R && v < NB) acc[p][v] = v_add(acc[p][v], v_ld(a->add + at0 + v * a->ybs + p * VN));
  }
#define BK_ACC_MAP(EXPR)                                        \
  _Pragma("GCC unroll 4") for (int v = 0; v < BK_GB_MAX; v++)   \
  _Pragma("GCC unroll 16") for (int p = 0; p < BK_RMAX; p++)    \
    if (p < R && v < NB) {                                      \
      vf o = acc[p][v];                                         \
      acc[p][v] = (EXPR);                                       \
    }
  BK_ACT_SWITCH(&a->act, BK_ACC_MAP)
#undef BK_ACC_MAP
#pragma GCC unroll 4
  for (int v = 0; v < BK_GB_MAX; v++) {
    if (v >= NB) break;
    const int valid = (int)(a->m - (ob + v) * VN);
    float *y = a->y + at0 + v * a->ybs;
#pragma GCC unroll 16
    for (int p = 0; p < BK_RMAX; p++)
      if (p < R) v_st(y + p * VN, bk_keep(acc[p][v], valid));
  }
}

/* ---- dense convolution ---------------------------------------------------------- */

/* MODE: 1 or 2 = blocked input at that horizontal stride (lanes = VN, all
 * strides compile-time constants, the lane loop unrolled); 3 or 4 = planar
 * input at horizontal stride 1 or 2 (pixel steps constant, so every
 * broadcast is an immediate offset; lanes and the plane stride read at run
 * time); 0 = anything else (other strides), strides read at run time.
 * Reading a 16-channel planar input at stride 1 with run-time strides cost
 * 50% more than the same layer on a blocked input (YOLOv8n's C2f
 * bottlenecks, which read their Split's planar halves in place). */
/* Input blocks [cb0, cb1): a tile that does not start at block 0 resumes
 * the sums it left in y; one that does not end at the last block leaves
 * them there, without the residual or the activation. */
static inline __attribute__((always_inline)) void bk_conv_tile(const er_bconv *a, int64_t g, int64_t oy,
                                                               int64_t ox0, int64_t cb0, int64_t cb1,
                                                               const int R, const int NB, const int MODE) {
  vf acc[BK_RMAX][BK_GB_MAX];
  const int64_t ob = a->gb * g;
  bk_acc_init(a, acc, ob, oy, ox0, cb0, R, NB);
  const bool blk = MODE == 1 || MODE == 2, planar = MODE >= 3 || (MODE == 0 && a->planar);
  const int64_t sw = MODE == 1 || MODE == 3 ? 1 : MODE == 2 || MODE == 4 ? 2 : a->sw;
  const int64_t lanes = blk ? VN : a->lanes, kh = a->kh, kw = a->kw;
  /* Element strides of the input: pixel, lane, row, block. */
  const int64_t ps = planar ? 1 : VN, ls = planar ? a->h * a->w : 1;
  const int64_t rs = a->w * ps, bs = planar ? 0 : a->xbs;
  const int64_t pstep = sw * ps;
  const int64_t wtap = lanes * VN, wblock = a->cbk * kh * kw * wtap;
  const int64_t iy0 = oy * a->sh - a->pt;
  int64_t ky0 = 0, ky1 = kh;
  while (ky0 < kh && iy0 + ky0 * a->dh < 0) ky0++;
  while (ky1 > ky0 && iy0 + (ky1 - 1) * a->dh >= a->h) ky1--;
  const float *wg = a->wp + ob * wblock;
  if ((MODE == 3 || MODE == 4) && R >= NB) {
    /* A planar input (a stem: 3 lanes of 7 x 7 taps) runs the kernel's
     * columns innermost: loops of kw steps with one pointer each for the
     * input and the weights, instead of loops over 3 lanes with pointers
     * set up per tap. */
    const int64_t xs = a->dw;
    for (int64_t cb = cb0; cb < cb1; cb++) {
      for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *row = a->x + cb * bs + (iy0 + ky * a->dh) * rs + (ox0 * sw - a->pl);
        const float *wrow = wg + (cb * kh + ky) * kw * wtap;
        for (int64_t l = 0; l < lanes; l++) {
          const float *xl = row + l * ls, *wl = wrow + l * VN;
          for (int64_t kx = 0; kx < kw; kx++) {
            vf wv[BK_GB_MAX];
#pragma GCC unroll 4
            for (int v = 0; v < BK_GB_MAX; v++)
              if (v < NB) wv[v] = v_ld(wl + v * wblock);
#pragma GCC unroll 16
            for (int p = 0; p < BK_RMAX; p++) {
              if (p < R) {
                vf bv = v_set(xl[p * pstep]);
#pragma GCC unroll 4
                for (int v = 0; v < BK_GB_MAX; v++)
                  if (v < NB) acc[p][v] = v_fma(bv, wv[v], acc[p][v]);
              }
            }
            xl += xs;
            wl += wtap;
          }
        }
      }
    }
    bk_acc_store(a, acc, ob, oy, ox0, cb1, R, NB);
    return;
  }
  for (int64_t cb = cb0; cb < cb1; cb++) {
    for (int64_t ky = ky0; ky < ky1; ky++) {
      const float *row = a->x + cb * bs + (iy0 + ky * a->dh) * rs;
      for (int64_t kx = 0; kx < kw; kx++) {
        const float *xp = row + (ox0 * sw - a->pl + kx * a->dw) * ps;
        const float *wt = wg + ((cb * kh + ky) * kw + kx) * wtap;
        if (R < NB) {
          BK_UNROLL(BK_UNROLL_FEW)
          for (int64_t l = 0; l < lanes; l++) {
            const float *xl = xp + l * ls;
            /* Fewer pixels than blocks (4 x 3 on AVX2): the R broadcasts
             * first, then one weight vector at a time, as registers allow
             * (R * NB + R + 1). */
            vf bv[BK_RMAX];
#pragma GCC unroll 16
            for (int p = 0; p < BK_RMAX; p++)
              if (p < R) bv[p] = v_set(xl[p * pstep]);
#pragma GCC unroll 4
            for (int v = 0; v < BK_GB_MAX; v++) {
              if (v < NB) {
                vf wv = v_ld(wt + v * wblock + l * VN);
#pragma GCC unroll 16
                for (int p = 0; p < BK_RMAX; p++)
                  if (p < R) acc[p][v] = v_fma(bv[p], wv, acc[p][v]);
              }
            }
          }
        } else {
          for (int64_t l = 0; l < lanes; l++) {
            const float *xl = xp + l * ls;
            /* The NB weight vectors first, then one broadcast at a time
             * (R * NB + NB + 1 registers). */
            vf wv[BK_GB_MAX];
#pragma GCC unroll 4
            for (int v = 0; v < BK_GB_MAX; v++) {
              if (v < NB) {
                __builtin_prefetch(wt + v * wblock + (l + BK_PF_LANES) * VN, 0, 3);
                wv[v] = v_ld(wt + v * wblock + l * VN);
              }
            }
#pragma GCC unroll 16
            for (int p = 0; p < BK_RMAX; p++) {
              if (p < R) {
                vf bv = v_set(xl[p * pstep]);
#pragma GCC unroll 4
                for (int v = 0; v < BK_GB_MAX; v++)
                  if (v < NB) acc[p][v] = v_fma(bv, wv[v], acc[p][v]);
              }
            }
          }
        }
      }
    }
  }
  bk_acc_store(a, acc, ob, oy, ox0, cb1, R, NB);
}

/* A 1x1 layer on a blocked input at horizontal stride SW (1 or 2): the
 * sums of bk_conv_tile,
 * written with one pointer per weight block and the input, all stepped
 * once per input block, and the lanes unrolled, so every load is an
 * immediate offset from one of them. GCC compiled bk_conv_tile's form of this loop (a lane loop with
 * indexed weight loads) to about 75% of the FMA peak on a Zen 3 EPYC,
 * this form to about 95% (a kernel-only loop in L1). */
static inline __attribute__((always_inline)) void bk_pw_tile(const er_bconv *a, int64_t g, int64_t oy, int64_t ox0,
                                                             int64_t cb0, int64_t cb1, const int R, const int NB,
                                                             const int SW) {
  vf acc[BK_RMAX][BK_GB_MAX];
  const int64_t ob = a->gb * g;
  bk_acc_init(a, acc, ob, oy, ox0, cb0, R, NB);
  const int64_t wblock = a->cbk * VN * VN;
  const float *xp = a->x + cb0 * a->xbs + (oy * a->sh * a->w + ox0 * SW) * VN;
  const float *wp[BK_GB_MAX];
#pragma GCC unroll 4
  for (int v = 0; v < BK_GB_MAX; v++) wp[v] = a->wp + (ob + v) * wblock + cb0 * VN * VN;
  for (int64_t cb = cb0; cb < cb1; cb++) {
#pragma GCC unroll 16
    for (int l = 0; l < VN; l++) {
      if (R > NB) {
        /* More pixels than blocks: the lane's weights stay in registers
         * and each broadcast feeds NB FMAs at once. */
        vf wv[BK_GB_MAX];
#pragma GCC unroll 4
        for (int v = 0; v < BK_GB_MAX; v++)
          if (v < NB) wv[v] = v_ld(wp[v] + l * VN);
#pragma GCC unroll 16
        for (int p = 0; p < BK_RMAX; p++) {
          if (p < R) {
            vf b = v_set(xp[p * SW * VN + l]);
#pragma GCC unroll 4
            for (int v = 0; v < BK_GB_MAX; v++)
              if (v < NB) acc[p][v] = v_fma(b, wv[v], acc[p][v]);
          }
        }
        continue;
      }
      vf bv[BK_RMAX];
#pragma GCC unroll 16
      for (int p = 0; p < BK_RMAX; p++)
        if (p < R) bv[p] = v_set(xp[p * SW * VN + l]);
#pragma GCC unroll 4
      for (int v = 0; v < BK_GB_MAX; v++) {
        if (v < NB) {
          vf wv = v_ld(wp[v] + l * VN);
#pragma GCC unroll 16
          for (int p = 0; p < BK_RMAX; p++)
            if (p < R) acc[p][v] = v_fma(bv[p], wv, acc[p][v]);
        }
      }
    }
    xp += a->xbs;
#pragma GCC unroll 4
    for (int v = 0; v < BK_GB_MAX; v++) wp[v] += VN * VN;
  }
  bk_acc_store(a, acc, ob, oy, ox0, cb1, R, NB);
}

/* One instance per tile width, block count and mode, so that the
 * accumulators stay in registers and the input strides are constants. */
/* Tiles wider than BK_R_FOR(NB) are never called: they get the body of a
 * one-pixel tile (compiling 4 x 6 accumulators on 16 registers took clang's
 * sanitizer build minutes). */
#define BK_RV(R, NB) ((R) <= BK_R_FOR(NB) ? (R) : 1)
/* The pointwise tile (one instance per tile, in its own function: inlined
 * into the five-mode tile, GCC spilled accumulators) takes R < NB, and on
 * AVX2 every width: there bk_conv_tile's 2 x 6 tile of a 1x1 layer ran at
 * about half the FMA peak. SLANet's 192 -> 48 layer at 122 x 122 (4 + 2
 * blocks a row) went 3.6 -> 3.25 ms on a Zen 3 EPYC (onnxruntime 3.18).
 * The wider ISAs keep the measured bk_conv_tile for R >= NB. */
#if VN == 8
#define BK_PW_ANY_R 1
#else
#define BK_PW_ANY_R 0
#endif
#define BK_PW_R(R, NB) (BK_PW_ANY_R || BK_RV(R, NB) < (NB) ? BK_RV(R, NB) : 1)
#define BK_PW_OK(a, R, NB) \
  ((BK_PW_ANY_R || BK_RV(R, NB) < (NB)) && (a)->kh == 1 && (a)->kw == 1 && (a)->pt == 0 && (a)->pl == 0)
/* Each instance runs nt tiles of width R along the row from ox0: one call
 * per run of equal tiles, not per tile (a 1x1 layer of 16 input channels
 * does about 200 FMAs a tile). */
#define BK_CONV_NB(R, NB)                                                                      \
  static __attribute__((noinline)) void bk_pw_##R##_##NB(const er_bconv *a, int64_t g, int64_t oy,   \
                                                         int64_t ox0, int64_t cb0, int64_t cb1,      \
                                                         int64_t nt) {                               \
    for (int64_t t = 0; t < nt; t++) {                                                         \
      if (a->sw == 1) bk_pw_tile(a, g, oy, ox0 + t * (R), cb0, cb1, BK_PW_R(R, NB), NB, 1);    \
      else bk_pw_tile(a, g, oy, ox0 + t * (R), cb0, cb1, BK_PW_R(R, NB), NB, 2);               \
    }                                                                                          \
  }                                                                                            \
  static void bk_conv_##R##_##NB(const er_bconv *a, int64_t g, int64_t oy, int64_t ox0, int64_t cb0, \
                                 int64_t cb1, int mode, int64_t nt) {                          \
    if ((mode == 1 || mode == 2) && BK_PW_OK(a, R, NB)) {                                      \
      bk_pw_##R##_##NB(a, g, oy, ox0, cb0, cb1, nt);                                           \
      return;                                                                                  \
    }                                                                                          \
    for (int64_t t = 0; t < nt; t++) {                                                         \
      const int64_t ox = ox0 + t * (R);                                                        \
      switch (mode) {                                                                          \
        case 0: bk_conv_tile(a, g, oy, ox, cb0, cb1, BK_RV(R, NB), NB, 0); break;              \
        case 1: bk_conv_tile(a, g, oy, ox, cb0, cb1, BK_RV(R, NB), NB, 1); break;              \
        case 2: bk_conv_tile(a, g, oy, ox, cb0, cb1, BK_RV(R, NB), NB, 2); break;              \
        case 3: bk_conv_tile(a, g, oy, ox, cb0, cb1, BK_RV(R, NB), NB, 3); break;              \
        default: bk_conv_tile(a, g, oy, ox, cb0, cb1, BK_RV(R, NB), NB, 4); break;             \
      }                                                                                        \
    }                                                                                          \
  }
typedef void (*bk_conv_fn)(const er_bconv *a, int64_t g, int64_t oy, int64_t ox0, int64_t cb0, int64_t cb1,
                           int mode, int64_t nt);
#if BK_GB_MAX == 4
#define BK_CONV_TILE(R) BK_CONV_NB(R, 1) BK_CONV_NB(R, 2) BK_CONV_NB(R, 3) BK_CONV_NB(R, 4)
#define BK_CONV_ROW(R) {NULL, bk_conv_##R##_1, bk_conv_##R##_2, bk_conv_##R##_3, bk_conv_##R##_4}
#else
#define BK_CONV_TILE(R) BK_CONV_NB(R, 1) BK_CONV_NB(R, 2)
#define BK_CONV_ROW(R) {NULL, bk_conv_##R##_1, bk_conv_##R##_2}
#endif
BK_CONV_TILE(1)
BK_CONV_TILE(2)
BK_CONV_TILE(3)
BK_CONV_TILE(4)
BK_CONV_TILE(5)
BK_CONV_TILE(6)
#if BK_RMAX > 6
BK_CONV_TILE(7)
BK_CONV_TILE(8)
BK_CONV_TILE(9)
BK_CONV_TILE(10)
BK_CONV_TILE(11)
BK_CONV_TILE(12)
#endif
#if BK_RMAX > 12
BK_CONV_TILE(13)
BK_CONV_TILE(14)
#endif
#undef BK_CONV_TILE
#undef BK_CONV_NB

/* [R][nb]: tiles wider than BK_R_FOR(nb) are never called. */
static const bk_conv_fn bk_conv_by_r[BK_RMAX + 1][BK_GB_MAX + 1] = {
    {NULL}, BK_CONV_ROW(1), BK_CONV_ROW(2), BK_CONV_ROW(3), BK_CONV_ROW(4), BK_CONV_ROW(5), BK_CONV_ROW(6),
#if BK_RMAX > 6
    BK_CONV_ROW(7), BK_CONV_ROW(8), BK_CONV_ROW(9), BK_CONV_ROW(10), BK_CONV_ROW(11), BK_CONV_ROW(12),
#endif
#if BK_RMAX > 12
    BK_CONV_ROW(13), BK_CONV_ROW(14),
#endif
};
#undef BK_CONV_ROW

static void bk_conv(const er_bconv *a, int64_t u0, int64_t u1) {
  const int mode = a->sw == 1 || a->sw == 2 ? (int)a->sw + (a->planar ? 2 : 0) : 0;
  for (int64_t u = u0; u < u1; u++) {
    int64_t g = a->rows_outer ? u % a->groups : u / a->oh;
    int64_t oy = a->rows_outer ? u / a->groups : u % a->oh;
    const int nb = a->mb - a->gb * g >= a->gb ? (int)a->gb : (int)(a->mb - a->gb * g);
    const int r = BK_R_FOR(nb);
    const int64_t ow = a->ow_last && oy == a->oh - 1 ? a->ow_last : a->ow;
    /* The row once per chunk of input blocks, so that the chunk's weights
     * stay in L1 across the row. */
    for (int64_t cb0 = 0; cb0 < a->cbk; cb0 += a->kchunk) {
      const int64_t cb1 = cb0 + a->kchunk < a->cbk ? cb0 + a->kchunk : a->cbk;
      /* The row in tiles of as equal widths as the tile allows: 7 pixels
       * as 4 + 3, not 6 + 1 (a one-pixel tile loads as much as it
       * multiplies). */
      const int64_t tiles = (ow + r - 1) / r, base = ow / tiles, wide = ow % tiles;
      if (wide) bk_conv_by_r[base + 1][nb](a, g, oy, 0, cb0, cb1, mode, wide);
      bk_conv_by_r[base][nb](a, g, oy, wide * (base + 1), cb0, cb1, mode, tiles - wide);
    }
  }
}

/* ---- depthwise convolution and pools ---------------------------------------------- */

/* Taps [k0, k1) of a window starting at input index i0 with dilation d
 * that lie inside [0, n). */
static inline void bk_taps(int64_t i0, int64_t d, int64_t k, int64_t n, int64_t *k0, int64_t *k1) {
  int64_t lo = 0, hi = k;
  while (lo < k && i0 + lo * d < 0) lo++;
  while (hi > lo && i0 + (hi - 1) * d >= n) hi--;
  *k0 = lo;
  *k1 = hi;
}

/* Max with the reference's order: NaN in a later tap is skipped (v_max
 * keeps its second operand, the running maximum). Empty and all-NaN
 * windows come out -inf and are fixed after. */
static inline vf bk_pool_step(vf acc, vf x, int pool) { return pool == 1 ? v_max(x, acc) : v_add(acc, x); }

/* The reference's max for the lanes of pixel (oy, ox) of block cb that
 * came out -inf: -inf stays unless every tap is NaN (then NaN). */
static void bk_max_fix(const er_bdw *a, int64_t cb, int64_t oy, int64_t ox) {
  float *y = a->y + ((cb * a->oh + oy) * a->ow + ox) * VN;
  const int64_t iy0 = oy * a->sh - a->pt, ix0 = ox * a->sw - a->pl;
  int64_t ky0, ky1, kx0, kx1;
  bk_taps(iy0, a->dh, a->kh, a->h, &ky0, &ky1);
  bk_taps(ix0, a->dw, a->kw, a->w, &kx0, &kx1);
  for (int l = 0; l < VN; l++) {
    if (y[l] != -INFINITY) continue;
    float best = -INFINITY;
    bool first = true;
    for (int64_t ky = ky0; ky < ky1; ky++)
      for (int64_t kx = kx0; kx < kx1; kx++) {
        float v = a->x[((cb * a->h + iy0 + ky * a->dh) * a->w + ix0 + kx * a->dw) * VN + l];
        if (first || v > best || best != best) best = v;
        first = false;
      }
    y[l] = best;
  }
}

/* A depthwise or narrow-group convolution's R outputs from ox0 of row oy
 * of block cb: the residual, the activation, the lanes past the channels
 * zeroed, stored. */
static inline __attribute__((always_inline)) void bk_dw_finish(const er_bdw *a, int64_t cb, int64_t oy, int64_t ox0,
                                                               vf *acc, const int R) {
  float *y = a->y + ((cb * a->oh + oy) * a->ow + ox0) * VN;
  if (a->add)
#pragma GCC unroll 8
    for (int p = 0; p < BK_DW_R; p++)
      if (p < R) acc[p] = v_add(acc[p], v_ld(a->add + ((cb * a->oh + oy) * a->ow + ox0 + p) * VN));
#define BK_DW_MAP(EXPR)                                            \
  _Pragma("GCC unroll 8") for (int p = 0; p < BK_DW_R; p++) if (p < R) { \
    vf o = acc[p];                                                 \
    acc[p] = (EXPR);                                               \
  }
  BK_ACT_SWITCH(&a->act, BK_DW_MAP)
#undef BK_DW_MAP
  const int valid = (int)(a->m - cb * VN);
#pragma GCC unroll 8
  for (int p = 0; p < BK_DW_R; p++)
    if (p < R) v_st(y + p * VN, bk_keep(acc[p], valid));
}

/* R output pixels ox0.. of row oy of block cb, every tap inside the input
 * for every pixel (interior) when `inside`, else each pixel's own taps. */
/* KW: 3, 5 or 7 for a stride-1, undilated depthwise window of that width
 * (the shared-row path), else 0. S2: 3 or 5 for a stride-2, undilated
 * depthwise window of that width (every offset a constant), else 0. */
/* EDGE (with KW or S2): some of the tile's taps may fall left or right of
 * the input; those loads become zeros, the padding's value. */
static inline __attribute__((always_inline)) void bk_dw_tile(const er_bdw *a, int64_t cb, int64_t oy, int64_t ox0,
                                                             const int R, const bool inside, const int pool,
                                                             const int KW, const int S2, const bool EDGE) {
  vf acc[BK_DW_R];
  const int64_t iy0 = oy * a->sh - a->pt;
  int64_t ky0, ky1;
  bk_taps(iy0, a->dh, a->kh, a->h, &ky0, &ky1);
  const vf init = pool == 1 ? v_set(-INFINITY) : pool == 2 ? v_zero() : a->bias ? v_ld(a->bias + cb * VN) : v_zero();
#pragma GCC unroll 8
  for (int p = 0; p < BK_DW_R; p++)
    if (p < R) acc[p] = init;
  const float *xb = a->x + cb * a->h * a->w * VN;
  const float *wb = a->wp ? a->wp + cb * a->kh * a->kw * VN : NULL;
  for (int64_t ky = ky0; ky < ky1; ky++) {
    const float *row = xb + (iy0 + ky * a->dh) * a->w * VN;
    if ((inside || EDGE) && KW) {
      /* Stride 1, no dilation: outputs p and p + 1 share all but one tap
       * of a row, so the row's R + KW - 1 input vectors are loaded once
       * and each serves up to KW outputs (9 loads per output vector
       * become about 1.5 for a 3x3 window). */
      const int64_t ix0 = ox0 - a->pl;
      vf xv[BK_DW_R + 6];
#pragma GCC unroll 14
      for (int q = 0; q < BK_DW_R + KW - 1; q++)
        if (q < R + KW - 1)
          xv[q] = !EDGE || (ix0 + q >= 0 && ix0 + q < a->w) ? v_ld(row + (ix0 + q) * VN) : v_zero();
#pragma GCC unroll 7
      for (int kx = 0; kx < KW; kx++) {
        vf wt = pool ? v_zero() : v_ld(wb + (ky * KW + kx) * VN);
#pragma GCC unroll 8
        for (int p = 0; p < BK_DW_R; p++)
          if (p < R) acc[p] = pool ? bk_pool_step(acc[p], xv[p + kx], pool) : v_fma(xv[p + kx], wt, acc[p]);
      }
    } else if (inside && S2 && pool) {
      /* A stride-2 pool: outputs p and p + 1 share a tap, so the row's
       * 2 R + S2 - 2 input vectors are loaded once (3x3 stride-2 max
       * pools follow the stems of ResNet, SqueezeNet and Inception). */
      const int64_t ix0 = ox0 * 2 - a->pl;
      vf xv[2 * BK_DW_R + 3];
#pragma GCC unroll 19
      for (int q = 0; q < 2 * BK_DW_R + S2 - 2; q++)
        if (q < 2 * R + S2 - 2) xv[q] = v_ld(row + (ix0 + q) * VN);
#pragma GCC unroll 8
      for (int p = 0; p < BK_DW_R; p++)
        if (p < R)
#pragma GCC unroll 5
          for (int kx = 0; kx < S2; kx++) acc[p] = bk_pool_step(acc[p], xv[2 * p + kx], pool);
    } else if ((inside || EDGE) && S2 && !pool) {
      /* Stride 2 (MobileNet's downsampling layers): with constant offsets
       * every input load folds into its FMA; run-time strides cost these
       * layers about twice onnxruntime's time on a Zen 3 EPYC. */
      const int64_t ix0 = ox0 * 2 - a->pl;
#pragma GCC unroll 5
      for (int kx = 0; kx < S2; kx++) {
        vf wt = v_ld(wb + (ky * S2 + kx) * VN);
#pragma GCC unroll 8
        for (int p = 0; p < BK_DW_R; p++) {
          const int64_t ix = ix0 + 2 * p + kx;
          if (p < R && (!EDGE || (ix >= 0 && ix < a->w))) acc[p] = v_fma(v_ld(row + ix * VN), wt, acc[p]);
        }
      }
    } else if (inside) {
      for (int64_t kx = 0; kx < a->kw; kx++) {
        const float *xp = row + (ox0 * a->sw - a->pl + kx * a->dw) * VN;
        if (pool) {
#pragma GCC unroll 8
          for (int p = 0; p < BK_DW_R; p++)
            if (p < R) acc[p] = bk_pool_step(acc[p], v_ld(xp + p * a->sw * VN), pool);
        } else {
          vf wt = v_ld(wb + (ky * a->kw + kx) * VN);
#pragma GCC unroll 8
          for (int p = 0; p < BK_DW_R; p++)
            if (p < R) acc[p] = v_fma(v_ld(xp + p * a->sw * VN), wt, acc[p]);
        }
      }
    } else {
      for (int p = 0; p < R; p++) {
        int64_t ix0 = (ox0 + p) * a->sw - a->pl, kx0, kx1;
        bk_taps(ix0, a->dw, a->kw, a->w, &kx0, &kx1);
        for (int64_t kx = kx0; kx < kx1; kx++) {
          vf xv = v_ld(row + (ix0 + kx * a->dw) * VN);
          if (pool) acc[p] = bk_pool_step(acc[p], xv, pool);
          else acc[p] = v_fma(xv, v_ld(wb + (ky * a->kw + kx) * VN), acc[p]);
        }
      }
    }
  }
  float *y = a->y + ((cb * a->oh + oy) * a->ow + ox0) * VN;
  if (pool == 2) {
    /* The divisor: taps inside the input, or (count_include_pad) those
     * before the end of the padded extent, as the reference counts. */
    int64_t ny = ky1 - ky0;
    if (a->count_include_pad) {
      int64_t left = a->h + a->pb - iy0;
      ny = left <= 0 ? 0 : (left + a->dh - 1) / a->dh;
      if (ny > a->kh) ny = a->kh;
    }
    for (int p = 0; p < R; p++) {
      int64_t ix0 = (ox0 + p) * a->sw - a->pl, kx0, kx1;
      bk_taps(ix0, a->dw, a->kw, a->w, &kx0, &kx1);
      int64_t nx = kx1 - kx0;
      if (a->count_include_pad) {
        int64_t left = a->w + a->pr - ix0;
        nx = left <= 0 ? 0 : (left + a->dw - 1) / a->dw;
        if (nx > a->kw) nx = a->kw;
      }
      acc[p] = v_div(acc[p], v_set((float)(ny * nx)));
    }
  }
  bool low = false;
  if (!pool) {
    bk_dw_finish(a, cb, oy, ox0, acc, R);
  } else {
#pragma GCC unroll 8
    for (int p = 0; p < BK_DW_R; p++) {
      if (p < R) {
        if (pool == 1) low |= v_any(v_lt(acc[p], v_set(-FLT_MAX)));
        v_st(y + p * VN, acc[p]);
      }
    }
  }
  /* Rare: a max that came out -inf (an empty or all-NaN window, or taps of
   * -inf); the reference's rule decides those lanes. */
  if (low)
    for (int p = 0; p < R; p++) bk_max_fix(a, cb, oy, ox0 + p);
}

/* Output columns [*lo, *hi) whose windows lie inside the input. */
static void bk_inside(const er_bdw *a, int64_t *lo, int64_t *hi) {
  int64_t l = 0, h = a->ow;
  while (l < a->ow && l * a->sw - a->pl < 0) l++;
  while (h > l && (h - 1) * a->sw - a->pl + (a->kw - 1) * a->dw >= a->w) h--;
  *lo = l;
  *hi = h;
}

/* A row of a pool or of a depthwise window without constant offsets;
 * KW or S2 (pools only) as in bk_dw_tile, for the tiles inside. */
static inline __attribute__((always_inline)) void bk_dw_row(const er_bdw *a, int64_t cb, int64_t oy, int64_t lo,
                                                            int64_t hi, const int pool, const int KW,
                                                            const int S2) {
  for (int64_t ox = 0; ox < lo; ox++) bk_dw_tile(a, cb, oy, ox, 1, false, pool, 0, 0, false);
  int64_t ox = lo;
  for (; ox + BK_DW_R <= hi; ox += BK_DW_R) bk_dw_tile(a, cb, oy, ox, BK_DW_R, true, pool, KW, S2, false);
  for (; ox + 4 <= hi; ox += 4) bk_dw_tile(a, cb, oy, ox, 4, true, pool, KW, S2, false);
  for (; ox < hi; ox++) bk_dw_tile(a, cb, oy, ox, 1, true, pool, KW, S2, false);
  for (ox = hi > lo ? hi : lo; ox < a->ow; ox++) bk_dw_tile(a, cb, oy, ox, 1, false, pool, 0, 0, false);
}

/* A depthwise row with a constant-offset window (KW or S2) in tiles of
 * near-equal widths up to BK_DW_R, every tile on the fast path: those
 * with taps past the row's ends (EDGE) load zeros there. Border pixels
 * one at a time through the general path, with 7- and 14-pixel rows
 * split 1 + 4 + 1 + 1 and 1 + 8 + 4 + 1, cost MobileNetV2's small
 * layers a third more than onnxruntime's. */
#define BK_DW_TW(R)                                                                              \
  case R:                                                                                      \
    if (edge) bk_dw_tile(a, cb, oy, ox, R, false, 0, KW, S2, true);                            \
    else bk_dw_tile(a, cb, oy, ox, R, true, 0, KW, S2, false);                                 \
    break;
static inline __attribute__((always_inline)) void bk_dw_row_fixed(const er_bdw *a, int64_t cb, int64_t oy,
                                                                  int64_t lo, int64_t hi, const int KW,
                                                                  const int S2) {
  const int64_t ow = a->ow, tiles = (ow + BK_DW_R - 1) / BK_DW_R, base = ow / tiles, wide = ow % tiles;
  int64_t ox = 0;
  for (int64_t t = 0; t < tiles; t++) {
    const int tw = (int)(base + (t < wide));
    const bool edge = ox < lo || ox + tw > hi;
    switch (tw) {
      BK_DW_TW(1) BK_DW_TW(2) BK_DW_TW(3) BK_DW_TW(4) BK_DW_TW(5) BK_DW_TW(6) BK_DW_TW(7)
      default: BK_DW_TW(8)
    }
    ox += tw;
  }
}
#undef BK_DW_TW

#define BK_DW_FIXED(NAME, KW, S2)                                                                       \
  static __attribute__((noinline)) void NAME(const er_bdw *a, int64_t cb, int64_t oy, int64_t lo, int64_t hi) { \
    bk_dw_row_fixed(a, cb, oy, lo, hi, KW, S2);                                                 \
  }
BK_DW_FIXED(bk_dw_row_k3, 3, 0)
BK_DW_FIXED(bk_dw_row_k5, 5, 0)
BK_DW_FIXED(bk_dw_row_k7, 7, 0)
BK_DW_FIXED(bk_dw_row_s2k3, 0, 3)
BK_DW_FIXED(bk_dw_row_s2k5, 0, 5)
#undef BK_DW_FIXED

/* Pools (max 1, average 2) of width 3 at stride 1 or 2, undilated, with
 * constant offsets inside; any other pool. */
#define BK_POOL_ROW(NAME, POOL, KW, S2)                                                                   \
  static __attribute__((noinline)) void NAME(const er_bdw *a, int64_t cb, int64_t oy, int64_t lo, int64_t hi) { \
    bk_dw_row(a, cb, oy, lo, hi, POOL, KW, S2);                                                   \
  }
BK_POOL_ROW(bk_max_row_k3, 1, 3, 0)
BK_POOL_ROW(bk_max_row_s2k3, 1, 0, 3)
BK_POOL_ROW(bk_max_row, 1, 0, 0)
BK_POOL_ROW(bk_avg_row_k3, 2, 3, 0)
BK_POOL_ROW(bk_avg_row_s2k3, 2, 0, 3)
BK_POOL_ROW(bk_avg_row, 2, 0, 0)
#undef BK_POOL_ROW

static void bk_gw_rows(const er_bdw *a, int64_t u0, int64_t u1);

static void bk_dw(const er_bdw *a, int64_t u0, int64_t u1) {
  if (a->pool == 0 && a->gw > 1) {
    bk_gw_rows(a, u0, u1);
    return;
  }
  int64_t lo, hi;
  bk_inside(a, &lo, &hi);
  for (int64_t u = u0; u < u1; u++) {
    int64_t cb = u / a->oh, oy = u % a->oh;
    bool shared = a->pool == 0 && a->sw == 1 && a->dw == 1;
    bool s2 = a->pool == 0 && a->sw == 2 && a->dw == 1;
    switch (a->pool) {
      case 0:
        if (shared && a->kw == 3) bk_dw_row_k3(a, cb, oy, lo, hi);
        else if (shared && a->kw == 5) bk_dw_row_k5(a, cb, oy, lo, hi);
        else if (shared && a->kw == 7) bk_dw_row_k7(a, cb, oy, lo, hi);
        else if (s2 && a->kw == 3) bk_dw_row_s2k3(a, cb, oy, lo, hi);
        else if (s2 && a->kw == 5) bk_dw_row_s2k5(a, cb, oy, lo, hi);
        else bk_dw_row(a, cb, oy, lo, hi, 0, 0, 0);
        break;
      default: {
        /* [max, average][3x3 stride 1, 3x3 stride 2, other] */
        static void (*const pool_rows[2][3])(const er_bdw *, int64_t, int64_t, int64_t, int64_t) = {
            {bk_max_row_k3, bk_max_row_s2k3, bk_max_row}, {bk_avg_row_k3, bk_avg_row_s2k3, bk_avg_row}};
        const int shape = a->dw == 1 && a->kw == 3 && (a->sw == 1 || a->sw == 2) ? (int)a->sw - 1 : 2;
        pool_rows[a->pool == 1 ? 0 : 1][shape](a, cb, oy, lo, hi);
        break;
      }
    }
  }
}

/* ---- narrow groups ----------------------------------------------------------------- */

/* Convolutions in groups of GW < B channels (ResNeXt's and RegNet's grouped
 * 3x3 layers, 4 to 8 channels a group): a block holds B / GW whole groups,
 * so each output block reads only the same input block, and output lane l
 * sums lanes l / GW * GW + k, k < GW, of each tap's input vector. Per tap
 * and pixel: one load, then GW lane permutes (v_permute by the table
 * below) and GW FMAs with weights packed [cb][kh][kw][GW][B]. Planar, such
 * a layer is im2col and a GEMM of GW rows per group; on the blocked layout
 * it needs no conversion either side. */
static const int32_t bk_gw_idx[3][8][16] = {
#define BK_GW_ROW(GW, K)                                                                                       \
  {0 / GW * GW + K,  1 / GW * GW + K,  2 / GW * GW + K,  3 / GW * GW + K,  4 / GW * GW + K,  5 / GW * GW + K, \
   6 / GW * GW + K,  7 / GW * GW + K,  8 / GW * GW + K,  9 / GW * GW + K,  10 / GW * GW + K, 11 / GW * GW + K, \
   12 / GW * GW + K, 13 / GW * GW + K, 14 / GW * GW + K, 15 / GW * GW + K}
    {BK_GW_ROW(2, 0), BK_GW_ROW(2, 1)},
    {BK_GW_ROW(4, 0), BK_GW_ROW(4, 1), BK_GW_ROW(4, 2), BK_GW_ROW(4, 3)},
    {BK_GW_ROW(8, 0), BK_GW_ROW(8, 1), BK_GW_ROW(8, 2), BK_GW_ROW(8, 3), BK_GW_ROW(8, 4), BK_GW_ROW(8, 5),
     BK_GW_ROW(8, 6), BK_GW_ROW(8, 7)},
#undef BK_GW_ROW
};

static inline __attribute__((always_inline)) void bk_gw_tile(const er_bdw *a, int64_t cb, int64_t oy, int64_t ox0,
                                                             const int R, const bool inside, const int GW) {
  const int32_t(*idx)[16] = bk_gw_idx[GW == 2 ? 0 : GW == 4 ? 1 : 2];
  vf acc[BK_DW_R];
  const int64_t iy0 = oy * a->sh - a->pt;
  int64_t ky0, ky1;
  bk_taps(iy0, a->dh, a->kh, a->h, &ky0, &ky1);
  const vf init = a->bias ? v_ld(a->bias + cb * VN) : v_zero();
#pragma GCC unroll 8
  for (int p = 0; p < BK_DW_R; p++)
    if (p < R) acc[p] = init;
  const float *xb = a->x + cb * a->h * a->w * VN;
  const float *wb = a->wp + cb * a->kh * a->kw * GW * VN;
  for (int64_t ky = ky0; ky < ky1; ky++) {
    const float *row = xb + (iy0 + ky * a->dh) * a->w * VN;
    if (inside) {
      for (int64_t kx = 0; kx < a->kw; kx++) {
        const float *xp = row + (ox0 * a->sw - a->pl + kx * a->dw) * VN;
        const float *wt = wb + (ky * a->kw + kx) * GW * VN;
        vf xv[BK_DW_R];
#pragma GCC unroll 8
        for (int p = 0; p < BK_DW_R; p++)
          if (p < R) xv[p] = v_ld(xp + p * a->sw * VN);
#pragma GCC unroll 8
        for (int k = 0; k < GW; k++) {
          vf w = v_ld(wt + k * VN);
#pragma GCC unroll 8
          for (int p = 0; p < BK_DW_R; p++)
            if (p < R) acc[p] = v_fma(w, v_permute(xv[p], idx[k]), acc[p]);
        }
      }
    } else {
      for (int p = 0; p < R; p++) {
        int64_t ix0 = (ox0 + p) * a->sw - a->pl, kx0, kx1;
        bk_taps(ix0, a->dw, a->kw, a->w, &kx0, &kx1);
        for (int64_t kx = kx0; kx < kx1; kx++) {
          vf xv = v_ld(row + (ix0 + kx * a->dw) * VN);
          const float *wt = wb + (ky * a->kw + kx) * GW * VN;
          for (int k = 0; k < GW; k++) acc[p] = v_fma(v_ld(wt + k * VN), v_permute(xv, idx[k]), acc[p]);
        }
      }
    }
  }
  bk_dw_finish(a, cb, oy, ox0, acc, R);
}

#define BK_GW_ROW_FN(NAME, GW)                                                                             \
  static __attribute__((noinline)) void NAME(const er_bdw *a, int64_t cb, int64_t oy, int64_t lo, int64_t hi) { \
    for (int64_t ox = 0; ox < lo; ox++) bk_gw_tile(a, cb, oy, ox, 1, false, GW);                         \
    int64_t ox = lo;                                                                                  \
    for (; ox + BK_DW_R <= hi; ox += BK_DW_R) bk_gw_tile(a, cb, oy, ox, BK_DW_R, true, GW);             \
    for (; ox + 4 <= hi; ox += 4) bk_gw_tile(a, cb, oy, ox, 4, true, GW);                               \
    for (; ox < hi; ox++) bk_gw_tile(a, cb, oy, ox, 1, true, GW);                                      \
    for (ox = hi > lo ? hi : lo; ox < a->ow; ox++) bk_gw_tile(a, cb, oy, ox, 1, false, GW);             \
  }
BK_GW_ROW_FN(bk_gw_row2, 2)
BK_GW_ROW_FN(bk_gw_row4, 4)
BK_GW_ROW_FN(bk_gw_row8, 8)
#undef BK_GW_ROW_FN

static void bk_gw_rows(const er_bdw *a, int64_t u0, int64_t u1) {
  int64_t lo, hi;
  bk_inside(a, &lo, &hi);
  for (int64_t u = u0; u < u1; u++) {
    int64_t cb = u / a->oh, oy = u % a->oh;
    if (a->gw == 2) bk_gw_row2(a, cb, oy, lo, hi);
    else if (a->gw == 4) bk_gw_row4(a, cb, oy, lo, hi);
    else bk_gw_row8(a, cb, oy, lo, hi);
  }
}

/* ---- global pools ---------------------------------------------------------------- */

static void bk_global_pool(const float *x, float *y, int64_t hw, int64_t b0, int64_t b1, bool max) {
  for (int64_t b = b0; b < b1; b++) {
    const float *xb = x + b * hw * VN;
    if (max) {
      vf acc = v_set(-INFINITY);
      for (int64_t p = 0; p < hw; p++) acc = v_max(v_ld(xb + p * VN), acc);
      v_st(y + b * VN, acc);
      for (int l = 0; l < VN; l++) {
        if (y[b * VN + l] != -INFINITY || hw == 0) continue;
        float best = xb[l];
        for (int64_t p = 1; p < hw; p++)
          if (xb[p * VN + l] > best || best != best) best = xb[p * VN + l];
        y[b * VN + l] = best;
      }
    } else {
      /* Four partial sums, added in a fixed order. */
      vf s0 = v_zero(), s1 = v_zero(), s2 = v_zero(), s3 = v_zero();
      int64_t p = 0;
      for (; p + 4 <= hw; p += 4) {
        s0 = v_add(s0, v_ld(xb + p * VN));
        s1 = v_add(s1, v_ld(xb + (p + 1) * VN));
        s2 = v_add(s2, v_ld(xb + (p + 2) * VN));
        s3 = v_add(s3, v_ld(xb + (p + 3) * VN));
      }
      for (; p < hw; p++) s0 = v_add(s0, v_ld(xb + p * VN));
      vf s = v_add(v_add(s0, s1), v_add(s2, s3));
      v_st(y + b * VN, v_div(s, v_set((float)hw)));
    }
  }
}

/* ---- conversions ----------------------------------------------------------------- */

static void bk_to_blocked(const float *x, float *y, int64_t c, int64_t hw, int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; b++) {
    float *yb = y + b * hw * VN;
    int64_t nc = c - b * VN < VN ? c - b * VN : VN;
    int64_t p = 0;
    for (; p + VN <= hw; p += VN) {
      vf r[VN];
      for (int l = 0; l < VN; l++) r[l] = l < nc ? v_ld(x + (b * VN + l) * hw + p) : v_zero();
      v_transpose(r);
      for (int j = 0; j < VN; j++) v_st(yb + (p + j) * VN, r[j]);
    }
    for (; p < hw; p++)
      for (int l = 0; l < VN; l++) yb[p * VN + l] = l < nc ? x[(b * VN + l) * hw + p] : 0.0f;
  }
}

static void bk_from_blocked(const float *x, float *y, int64_t c, int64_t hw, int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; b++) {
    const float *xb = x + b * hw * VN;
    int64_t nc = c - b * VN < VN ? c - b * VN : VN;
    int64_t p = 0;
    for (; p + VN <= hw; p += VN) {
      vf r[VN];
      for (int j = 0; j < VN; j++) r[j] = v_ld(xb + (p + j) * VN);
      v_transpose(r);
      for (int l = 0; l < nc; l++) v_st(y + (b * VN + l) * hw + p, r[l]);
    }
    for (; p < hw; p++)
      for (int l = 0; l < nc; l++) y[(b * VN + l) * hw + p] = xb[p * VN + l];
  }
}

/* Channels-last pixels are whole vectors of a block each: plain copies,
 * pixels outer so each input row of C floats is read once. */
static void bk_to_blocked_cl(const float *x, float *y, int64_t c, int64_t hw, int64_t p0, int64_t p1) {
  const int64_t cb = (c + VN - 1) / VN, full = c / VN;
  const int tail = (int)(c - full * VN);
  for (int64_t p = p0; p < p1; p++) {
    const float *xp = x + p * c;
    int64_t b = 0;
    for (; b < full; b++) v_st(y + (b * hw + p) * VN, v_ld(xp + b * VN));
    if (b < cb) v_st(y + (b * hw + p) * VN, v_ld_n(xp + b * VN, tail));
  }
}

static void bk_from_blocked_cl(const float *x, float *y, int64_t c, int64_t hw, int64_t p0, int64_t p1) {
  const int64_t cb = (c + VN - 1) / VN, full = c / VN;
  const int tail = (int)(c - full * VN);
  for (int64_t p = p0; p < p1; p++) {
    float *yp = y + p * c;
    int64_t b = 0;
    for (; b < full; b++) v_st(yp + b * VN, v_ld(x + (b * hw + p) * VN));
    if (b < cb) v_st_n(yp + b * VN, v_ld(x + (b * hw + p) * VN), tail);
  }
}

static void bk_pad(const float *x, float *y, int64_t h, int64_t w, int64_t lanes, int64_t pt, int64_t pb, int64_t pl,
                   int64_t pr, int64_t b0, int64_t b1) {
  const int64_t hp = h + pt + pb, wp = w + pl + pr;
  for (int64_t b = b0; b < b1; b++) {
    const float *xb = x + b * h * w * lanes;
    float *yb = y + b * hp * wp * lanes;
    memset(yb, 0, (size_t)(pt * wp * lanes) * sizeof(float));
    for (int64_t r = 0; r < h; r++) {
      float *d = yb + (pt + r) * wp * lanes;
      memset(d, 0, (size_t)(pl * lanes) * sizeof(float));
      memcpy(d + pl * lanes, xb + r * w * lanes, (size_t)(w * lanes) * sizeof(float));
      memset(d + (pl + w) * lanes, 0, (size_t)(pr * lanes) * sizeof(float));
    }
    memset(yb + (pt + h) * wp * lanes, 0, (size_t)(pb * wp * lanes) * sizeof(float));
  }
}

static void bk_affine(const float *x, float *y, int64_t hw, const float *a, const float *b,
                      const er_activation *act, int valid) {
  const vf va = v_ld(a), vb = v_ld(b);
  /* Padding lanes (a partial last block) are zeroed as the convolutions
   * zero theirs: an activation such as Sigmoid would make them nonzero. */
#define BK_AFFINE_LOOP(EXPR)                                        \
  for (int64_t p = 0; p < hw; p++) {                                \
    vf o = v_fma(v_ld(x + p * VN), va, vb);                         \
    o = (EXPR);                                                     \
    v_st(y + p * VN, valid < VN ? bk_keep(o, valid) : o);           \
  }
  BK_ACT_SWITCH(act, BK_AFFINE_LOOP)
#undef BK_AFFINE_LOOP
}

#define BK_OPS_INIT                                                                                     \
  {                                                                                                     \
    .isa = ER_ISA_NAME, .vn = VN, .rmax = BK_RMAX, .acc = BK_ACC, .gb_max = BK_GB_MAX, .kchunk_bytes = BK_KCHUNK_BYTES, .conv = bk_conv, .dw = bk_dw,                         \
    .global_pool = bk_global_pool, .to_blocked = bk_to_blocked, .from_blocked = bk_from_blocked,         \
    .to_blocked_cl = bk_to_blocked_cl, .from_blocked_cl = bk_from_blocked_cl,                          \
    .pad = bk_pad, .affine = bk_affine,                                                                 \
  }
