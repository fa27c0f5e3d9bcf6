/* vec-im2col-impl.h - im2col packing of convolution inputs into the
 * SGEMM's panels (vec_im2col_pack), written once over simd.h and vmath.h
 * for every ISA; included by vec-impl.h, which vec-<isa>.c compiles. */

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
