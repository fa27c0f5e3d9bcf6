/* vec-wino-impl.h - Winograd F(2x2, 3x3) and F(4x4, 3x3) transforms
 * (vec_wino_input, vec_wino_output, vec_wino4_input, vec_wino4_output,
 * vec_wino_weights), written once over simd.h and vmath.h for every ISA;
 * included by vec-impl.h, which vec-<isa>.c compiles. */

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
