/* qelt-dw-impl.h - depthwise convolution of 8-bit planes and of channels
 * in lanes, written once over the vector primitives of qelt-impl.h and
 * compiled per ISA; included by qelt-impl.h. */

/* ======================================================================== */
/* Depthwise convolution                                                     */
/* ======================================================================== */

/* n / sw for n >= 0, without a 64-bit division for the common strides
 * (it is slow, and small planes pay it once per channel). */
static inline int64_t div_sw(int64_t n, int64_t sw) { return sw == 1 ? n : sw == 2 ? n >> 1 : n / sw; }

/* The stride-phase planes of one input channel as floats (x - zp) into
 * planes whose padding is already 0 (er_qelt_ops.dw_planes). Each phase
 * row's input columns [lo, hi) are converted whole vectors at a time
 * straight from the input; the lanes of the last vector past hi are set
 * to 0 before it is stored, so that it writes only padding (0) or, past
 * the row, elements of the next row that are written after it (or the
 * plane's slack). Rows whose last vector would read past a->x_hi are
 * converted element by element. */
static inline __attribute__((always_inline)) void dw_planes_t(const uint8_t *x, int64_t h, int64_t w, int64_t pt,
                                                            int64_t pl, bool is_signed, int32_t zp,
                                                            const er_qdw_args *a) {
  const int64_t sh = a->sh, sw = a->sw, hs = a->hs, ws = a->ws, ps = a->ps;
  const vi z = i_set(zp);
  for (int64_t py = 0; py < sh; py++)
    for (int64_t px = 0; px < sw; px++) {
      float *d = (float *)a->planes + (py * sw + px) * ps;
      /* Columns [lo, hi) of the phase rows lie in the input. */
      const int64_t lo = pl > px ? div_sw(pl - px + sw - 1, sw) : 0;
      int64_t hi = div_sw(w + pl - px + sw - 1, sw);
      hi = hi < ws ? hi : ws;
      if (hi <= lo) continue;
      const int64_t last = lo + (hi - lo - 1) / VL * VL;
      for (int64_t yy = 0, ir = py - pt; yy < hs; yy++, ir += sh, d += ws) {
        if (ir < 0 || ir >= h) continue;
        const uint8_t *src = x + ir * w + px - pl;
        if (sw <= 2 && src + sw * last + (sw == 1 ? VL : 2 * VL) <= a->x_hi) {
          int64_t xx = lo;
          if (sw == 1) {
            for (; xx < last; xx += VL) f_st(d + xx, i2f(i_sub(i_ld8(src + xx, is_signed), z)));
            f_st(d + xx, f_keep(i2f(i_sub(i_ld8(src + xx, is_signed), z)), hi - xx));
          } else {
            for (; xx < last; xx += VL) f_st(d + xx, i2f(i_sub(i_ld8_even(src + 2 * xx, is_signed), z)));
            f_st(d + xx, f_keep(i2f(i_sub(i_ld8_even(src + 2 * xx, is_signed), z)), hi - xx));
          }
          continue;
        }
        for (int64_t xx = lo; xx < hi; xx++) d[xx] = (float)(ld8(src + sw * xx, is_signed) - zp);
      }
    }
}

static void dw_planes(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, bool is_signed, int32_t zp,
                      const er_qdw_args *a) {
  if (is_signed) dw_planes_t(x, h, w, pt, pl, true, zp, a);
  else dw_planes_t(x, h, w, pt, pl, false, zp, a);
}

static inline void st8_part(uint8_t *p, vi v, int64_t n);

/* The flat sums at v of a depthwise plane: the 3x3 case with its weights
 * and tap pointers in registers, as three chains of three (the sums are
 * exact integers, so their order does not matter, and shorter chains keep
 * more vectors in flight), any other window tap by tap. Exact: products of
 * values below 2^8 in magnitude, and sums of at most 258 of them (the
 * kernel's limit), stay below 2^24. */
static inline __attribute__((always_inline)) vf dw_sum3x3(const float *const *t, const vf *w, int64_t v) {
  vf a0 = f_mul(w[0], f_ld(t[0] + v)), a1 = f_mul(w[3], f_ld(t[3] + v)), a2 = f_mul(w[6], f_ld(t[6] + v));
  a0 = f_fma(w[1], f_ld(t[1] + v), a0);
  a1 = f_fma(w[4], f_ld(t[4] + v), a1);
  a2 = f_fma(w[7], f_ld(t[7] + v), a2);
  a0 = f_fma(w[2], f_ld(t[2] + v), a0);
  a1 = f_fma(w[5], f_ld(t[5] + v), a1);
  a2 = f_fma(w[8], f_ld(t[8] + v), a2);
  return f_add(f_add(a0, a1), a2);
}

static inline vf dw_sum_any(const float *const *taps, const float *w, int64_t ntaps, int64_t v) {
  vf acc = f_set(0.0f);
  for (int64_t t = 0; t < ntaps; t++) acc = f_fma(f_set(w[t]), f_ld(taps[t] + v), acc);
  return acc;
}

/* dw_plane with a->q8: output rows of whole vectors of the flat sums,
 * requantized and stored as bytes; the vectors of a row end past it (into
 * the virtual columns, and on the last row into the plane's slack: see
 * er__qdw_plane_stride) and only the row's bytes are stored. */
static void dw_plane_q8_any(const er_qdw_args *a, const float *const *taps) {
  const int64_t ws = a->ws, ntaps = a->kh * a->kw, ow = a->ow, oh = a->oh;
  const er_qdw_q8 q = *a->q8;
  /* Clamped in float to [lo - zp, hi - zp] before rounding (the same
   * integers as rounding then clamping, integer bounds), which keeps
   * the constants within the registers the nine weights leave. */
  const vi corr = i_set(q.corr), zp = i_set(q.zp);
  const vf mult = f_set(q.mult), off = f_set(q.off), flo = f_set((float)(q.lo - q.zp)), fhi = f_set((float)(q.hi - q.zp));
  const bool k3 = ntaps == 9;
  /* Local copies: the byte stores to y could alias the tables. */
  const float *t[9];
  vf wv[9];
  for (int i = 0; i < 9; i++) {
    t[i] = k3 ? taps[i] : taps[0];
    wv[i] = f_set(k3 ? a->w[i] : 0.0f);
  }
  const float *const w = a->w;
  uint8_t *const y = a->y;
  for (int64_t oy = 0; oy < oh; oy++) {
    uint8_t *yr = y + oy * ow;
    for (int64_t ox = 0; ox < ow; ox += VL) {
      const int64_t v = oy * ws + ox, n = ow - ox < VL ? ow - ox : VL;
      vf acc = k3 ? dw_sum3x3(t, wv, v) : dw_sum_any(taps, w, ntaps, v);
      vf f = f_fma(i2f(i_add(f2i_trunc(acc), corr)), mult, off);
      vi r = i_add(f2i_rhe(f_min(f_max(f, flo), fhi)), zp);
      if (n == VL) st8(yr + ox, r);
      else st8_part(yr + ox, r, n);
    }
  }
}

/* The 3x3 sums at v, dilation 1, starting from c: stride 1 (rows r[0..2],
 * taps at +0, +1, +2) or stride 2 (r[0..5] = the even and odd phase rows
 * of each kernel row; taps even +0, odd +0, even +1). Base pointers and
 * constant displacements, so that no tap pointer is reloaded. */
static inline __attribute__((always_inline)) vf dw_sum3x3_s(int stride, const float *const *r, const vf *w, vf c,
                                                          int64_t v) {
  if (stride == 1) {
    vf a0 = f_fma(w[0], f_ld(r[0] + v), c), a1 = f_mul(w[3], f_ld(r[1] + v)), a2 = f_mul(w[6], f_ld(r[2] + v));
    a0 = f_fma(w[1], f_ld(r[0] + v + 1), a0);
    a1 = f_fma(w[4], f_ld(r[1] + v + 1), a1);
    a2 = f_fma(w[7], f_ld(r[2] + v + 1), a2);
    a0 = f_fma(w[2], f_ld(r[0] + v + 2), a0);
    a1 = f_fma(w[5], f_ld(r[1] + v + 2), a1);
    a2 = f_fma(w[8], f_ld(r[2] + v + 2), a2);
    return f_add(f_add(a0, a1), a2);
  }
  vf a0 = f_fma(w[0], f_ld(r[0] + v), c), a1 = f_mul(w[3], f_ld(r[2] + v)), a2 = f_mul(w[6], f_ld(r[4] + v));
  a0 = f_fma(w[1], f_ld(r[1] + v), a0);
  a1 = f_fma(w[4], f_ld(r[3] + v), a1);
  a2 = f_fma(w[7], f_ld(r[5] + v), a2);
  a0 = f_fma(w[2], f_ld(r[0] + v + 1), a0);
  a1 = f_fma(w[5], f_ld(r[2] + v + 1), a1);
  a2 = f_fma(w[8], f_ld(r[4] + v + 1), a2);
  return f_add(f_add(a0, a1), a2);
}

/* dw_plane_q8 for 3x3 windows at stride 1 or 2, dilation 1, with the
 * bias small enough (|corr| < 2^23) to start the float sums from it: the
 * sums stay exact integers below 2^24, and no conversion to int32 and back
 * is needed before the requantization. Two vectors at a time are stored
 * as one. */
static inline __attribute__((always_inline)) void dw_plane_q8_3x3(const er_qdw_args *a, const float *const *taps,
                                                                int stride) {
  const int64_t ws = a->ws, ow = a->ow, oh = a->oh;
  const er_qdw_q8 q = *a->q8;
  const vi zp = i_set(q.zp);
  const vf c = f_set((float)q.corr), mult = f_set(q.mult), off = f_set(q.off);
  const vf flo = f_set((float)(q.lo - q.zp)), fhi = f_set((float)(q.hi - q.zp));
  const bool out_signed = q.lo < 0;
  vf wv[9];
  for (int i = 0; i < 9; i++) wv[i] = f_set(a->w[i]);
  /* Local copies: the byte stores to y could alias the tables. */
  const float *r[6];
  if (stride == 1) {
    r[0] = taps[0], r[1] = taps[3], r[2] = taps[6];
    r[3] = r[4] = r[5] = taps[0];
  } else {
    r[0] = taps[0], r[1] = taps[1], r[2] = taps[3], r[3] = taps[4], r[4] = taps[6], r[5] = taps[7];
  }
  uint8_t *const y = a->y;
  for (int64_t oy = 0; oy < oh; oy++) {
    uint8_t *yr = y + oy * ow;
    int64_t ox = 0;
    for (; ox + 2 * VL <= ow; ox += 2 * VL) {
      const int64_t v = oy * ws + ox;
      vf f0 = f_fma(dw_sum3x3_s(stride, r, wv, c, v), mult, off);
      vf f1 = f_fma(dw_sum3x3_s(stride, r, wv, c, v + VL), mult, off);
      vi r0 = i_add(f2i_rhe(f_min(f_max(f0, flo), fhi)), zp);
      vi r1 = i_add(f2i_rhe(f_min(f_max(f1, flo), fhi)), zp);
      st8x2(yr + ox, r0, r1, out_signed);
    }
    for (; ox < ow; ox += VL) {
      const int64_t v = oy * ws + ox, n = ow - ox < VL ? ow - ox : VL;
      vf f = f_fma(dw_sum3x3_s(stride, r, wv, c, v), mult, off);
      vi r0 = i_add(f2i_rhe(f_min(f_max(f, flo), fhi)), zp);
      /* A whole vector where it ends within the plane: the bytes past
       * the row belong to rows stored after it. */
      if (n == VL || oy * ow + ox + VL <= oh * ow) st8(yr + ox, r0);
      else st8_part(yr + ox, r0, n);
    }
  }
}

static void dw_plane_q8(const er_qdw_args *a, const float *const *taps) {
  const bool k3 = a->kh == 3 && a->kw == 3 && a->dh == 1 && a->dw == 1 && a->sh == a->sw;
  const bool small_corr = a->q8->corr > -(1 << 23) && a->q8->corr < (1 << 23);
  if (k3 && small_corr && a->sh == 1) dw_plane_q8_3x3(a, taps, 1);
  else if (k3 && small_corr && a->sh == 2) dw_plane_q8_3x3(a, taps, 2);
  else dw_plane_q8_any(a, taps);
}

static void dw_plane(const er_qdw_args *a) {
  const int64_t ws = a->ws, len = (a->oh - 1) * ws + a->ow, ntaps = a->kh * a->kw;
  const float *const *taps = a->taps;
  if (a->q8) {
    dw_plane_q8(a, taps);
    return;
  }
  int32_t *out = a->iacc;
  int64_t v = 0;
  if (ntaps == 9) {
    const float *t[9];
    vf wv[9];
    for (int i = 0; i < 9; i++) {
      t[i] = taps[i];
      wv[i] = f_set(a->w[i]);
    }
    for (; v + VL <= len; v += VL) i_st(out + v, f2i_trunc(dw_sum3x3(t, wv, v)));
  } else {
    for (; v + VL <= len; v += VL) i_st(out + v, f2i_trunc(dw_sum_any(taps, a->w, ntaps, v)));
  }
#if defined(QE_MASKED)
  if (v < len) {
    int64_t n = len - v;
    vf acc = f_set(0.0f);
    for (int64_t t = 0; t < ntaps; t++) acc = f_fma(f_set(a->w[t]), f_ld_n(taps[t] + v, n), acc);
    i_st_n(out + v, f2i_trunc(acc), n);
    v = len;
  }
#endif
  for (; v < len; v++) {
    float acc = 0.0f;
    for (int64_t t = 0; t < ntaps; t++) acc = fmaf(a->w[t], taps[t][v], acc);
    out[v] = (int32_t)acc;
  }
  /* Drop the virtual columns: row oy moves from oy * ws to oy * ow. */
  if (ws != a->ow)
    for (int64_t oy = 1; oy < a->oh; oy++) memmove(out + oy * a->ow, out + oy * ws, (size_t)a->ow * sizeof *out);
}

/* ---- depthwise, channels in lanes (er_qdwc_args) ------------------------ */

/* The first n (< VL) bytes at p as VL int32 lanes, the rest 0 or (when
 * the VL bytes at p are readable, before `end`) whatever follows: callers
 * use only the first n lanes. A copy through the stack stalled on store
 * forwarding, once per channel and row of 7- and 14-pixel planes. */
static inline vi i_ld8_part(const uint8_t *p, int64_t n, bool is_signed, const uint8_t *end) {
#if defined(QE_MASKED)
  ER_UNUSED(end);
  return i_ld8_n(p, n, is_signed);
#else
  if (p + VL <= end) return i_ld8(p, is_signed);
  uint8_t tmp[16] = {0};
  memcpy(tmp, p, (size_t)n);
  return i_ld8(tmp, is_signed);
#endif
}

/* Stores the first n (<= VL) lanes of v, already in the 8-bit range. */
static inline void st8_part(uint8_t *p, vi v, int64_t n) {
#if defined(QE_MASKED)
  _mm512_mask_cvtepi32_storeu_epi8(p, mask16(n), v);
#else
  if (n == VL) {
    st8(p, v);
    return;
  }
  /* The bytes from a register (not through the stack). */
  __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  w = _mm_shuffle_epi8(w, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1));
  er__store_low_bytes(p, (uint64_t)_mm_cvtsi128_si64(w), (int)n);
#endif
}

/* Writes padded input rows [r0, r1) of the block into the band: row r,
 * column xx is the vector of (x - x_zp) of the block's channels at input
 * (r - pt, xx - pl), or 0 outside the input. */
static void dwc_fill(const er_qdwc_args *a, int64_t r0, int64_t r1, int64_t cols) {
  const vi z = i_set(a->xz);
  const vf zero = f_set(0.0f);
  const int64_t hw = a->h * a->w;
  /* Columns [lo, hi) come from the input. */
  int64_t lo = a->pl < cols ? a->pl : cols, hi = a->pl + a->w < cols ? a->pl + a->w : cols;
  for (int64_t r = r0; r < r1; r++) {
    float *row = a->band + (r - r0) * cols * VL;
    int64_t iy = r - a->pt;
    if (iy < 0 || iy >= a->h) {
      for (int64_t xx = 0; xx < cols; xx++) f_st(row + xx * VL, zero);
      continue;
    }
    for (int64_t xx = 0; xx < lo; xx++) f_st(row + xx * VL, zero);
    for (int64_t xx = hi; xx < cols; xx++) f_st(row + xx * VL, zero);
    const uint8_t *src = a->x + iy * a->w;
#if defined(QE_AVX2)
    /* Eight channels' eight pixels transposed as bytes (12 unpacks), then
     * each pixel's eight channels converted: cheaper than converting each
     * channel and transposing floats, whose eight vectors spilled. Channels
     * past nc read the zero point, which converts to 0. */
    const __m128i fill = _mm_set1_epi8((char)a->xz);
    for (int64_t ix = 0; ix < hi - lo; ix += VL) {
      int64_t n = hi - lo - ix < VL ? hi - lo - ix : VL;
      __m128i bv[8];
#pragma GCC unroll 8
      for (int c = 0; c < 8; c++) {
        const uint8_t *p = src + c * hw + ix;
        if (c >= a->nc) {
          bv[c] = fill;
        } else if (n == VL || p + VL <= a->x_end) {
          bv[c] = _mm_loadl_epi64((const __m128i *)p);
        } else {
          uint8_t tmp[8] = {0};
          memcpy(tmp, p, (size_t)n);
          bv[c] = _mm_loadl_epi64((const __m128i *)tmp);
        }
      }
      __m128i t0 = _mm_unpacklo_epi8(bv[0], bv[1]), t1 = _mm_unpacklo_epi8(bv[2], bv[3]);
      __m128i t2 = _mm_unpacklo_epi8(bv[4], bv[5]), t3 = _mm_unpacklo_epi8(bv[6], bv[7]);
      __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1);
      __m128i u2 = _mm_unpacklo_epi16(t2, t3), u3 = _mm_unpackhi_epi16(t2, t3);
      /* w[k]: pixels 2k and 2k + 1, eight channels each. */
      __m128i w[4] = {_mm_unpacklo_epi32(u0, u2), _mm_unpackhi_epi32(u0, u2), _mm_unpacklo_epi32(u1, u3),
                      _mm_unpackhi_epi32(u1, u3)};
      float *d = row + (lo + ix) * VL;
#pragma GCC unroll 8
      for (int q = 0; q < 8; q++) {
        if (q >= n) break;
        __m128i px8 = q % 2 ? _mm_unpackhi_epi64(w[q / 2], w[q / 2]) : w[q / 2];
        __m256i v32 = a->is_signed ? _mm256_cvtepi8_epi32(px8) : _mm256_cvtepu8_epi32(px8);
        f_st(d + q * VL, i2f(i_sub(v32, z)));
      }
    }
    ER_UNUSED(zero);
#else
    for (int64_t ix = 0; ix < hi - lo; ix += VL) {
      int64_t n = hi - lo - ix < VL ? hi - lo - ix : VL;
      vf v[VL];
#pragma GCC unroll 16
      for (int c = 0; c < VL; c++) {
        const uint8_t *p = src + c * hw + ix;
        v[c] = c >= a->nc ? zero
                          : i2f(i_sub(n == VL ? i_ld8(p, a->is_signed) : i_ld8_part(p, n, a->is_signed, a->x_end), z));
      }
      v_transpose(v);
      float *d = row + (lo + ix) * VL;
      /* Constant indices only, so that the vectors stay in registers. */
#pragma GCC unroll 16
      for (int q = 0; q < VL; q++)
        if (q < n) f_st(d + q * VL, v[q]);
    }
#endif
  }
}

/* The QConv epilogue on a vector of the block's channels at one pixel. */
static inline vi dwc_requant(vf acc, vi corr, vf mult, vf off, vi zp, vi lo, vi hi) {
  vf f = f_fma(i2f(i_add(f2i_trunc(acc), corr)), mult, off);
  f = f_min(f_max(f, f_set(-1073741824.0f)), f_set(1073741824.0f));
  return i_clamp(i_add(f2i_rhe(f), zp), lo, hi);
}

/* Sums of one output pixel: 3x3, dilation 1 (the common case; weights in
 * registers, taps at fixed offsets from three row pointers). */
#define DWC_3X3(b, rs)                                                                                       \
  f_add(f_fma(w2, f_ld((b) + 2 * VL),                                                                       \
              f_fma(w4, f_ld((b) + (rs) + VL), f_fma(w6, f_ld((b) + 2 * (rs)), f_mul(w0, f_ld(b))))),       \
        f_fma(w8, f_ld((b) + 2 * (rs) + 2 * VL),                                                            \
              f_fma(w1, f_ld((b) + VL), f_fma(w3, f_ld((b) + (rs)),                                          \
                                            f_fma(w5, f_ld((b) + (rs) + 2 * VL), f_mul(w7, f_ld((b) + 2 * (rs) + VL)))))))

static void dw_block(const er_qdwc_args *a) {
  const int64_t cols = er__qdwc_band_cols(a->ow, a->sw, a->kw, a->dw), ntaps = a->kh * a->kw;
  const int64_t ohw = a->oh * a->ow, rs = cols * VL, step = a->sw * VL;
  const bool k3 = a->kh == 3 && a->kw == 3 && a->dh == 1 && a->dw == 1;
  int32_t corr_a[VL];
  float mult_a[VL], off_a[VL];
  for (int c = 0; c < VL; c++) {
    corr_a[c] = c < a->nc ? a->corr[c] : 0;
    mult_a[c] = c < a->nc ? a->mult[c] : 0.0f;
    off_a[c] = c < a->nc ? a->off[c] : 0.0f;
  }
  const vi corr = i_ld(corr_a), zp = i_set(a->yz), lo = i_set(a->lo), hi = i_set(a->hi);
  const bool out_signed = a->lo < 0;
  ER_UNUSED(out_signed);
  const vf mult = f_ld(mult_a), off = f_ld(off_a);
  const vf w0 = f_ld(a->wt), w1 = f_ld(a->wt + VL), w2 = f_ld(a->wt + 2 * VL);
  const vf w3 = k3 ? f_ld(a->wt + 3 * VL) : w0, w4 = k3 ? f_ld(a->wt + 4 * VL) : w0, w5 = k3 ? f_ld(a->wt + 5 * VL) : w0;
  const vf w6 = k3 ? f_ld(a->wt + 6 * VL) : w0, w7 = k3 ? f_ld(a->wt + 7 * VL) : w0, w8 = k3 ? f_ld(a->wt + 8 * VL) : w0;
  int64_t toff[ER_QDW_MAX_TAPS];
  for (int64_t t = 0; t < ntaps; t++) toff[t] = ((t / a->kw) * a->dh * cols + (t % a->kw) * a->dw) * VL;
  /* One group's sums, pixel after pixel: [VL pixels][VL channels]. */
  _Alignas(64) float sums[VL * VL];
  for (int64_t oy0 = 0; oy0 < a->oh; oy0 += a->band_rows) {
    int64_t oy1 = oy0 + a->band_rows < a->oh ? oy0 + a->band_rows : a->oh;
    int64_t r0 = oy0 * a->sh, r1 = (oy1 - 1) * a->sh + (a->kh - 1) * a->dh + 1;
    dwc_fill(a, r0, r1, cols);
    /* The band's output pixels, VL at a time (a group may cross rows). */
    const int64_t npix = (oy1 - oy0) * a->ow;
    int64_t ox = 0;
    const float *row = a->band, *b = row;
    for (int64_t p0 = 0; p0 < npix; p0 += VL) {
      int64_t n = npix - p0 < VL ? npix - p0 : VL;
      for (int64_t q = 0; q < n; q++) {
        vf acc;
        if (k3) {
          acc = DWC_3X3(b, rs);
        } else {
          acc = f_set(0.0f);
          for (int64_t t = 0; t < ntaps; t++) acc = f_fma(f_ld(a->wt + t * VL), f_ld(b + toff[t]), acc);
        }
        f_st(sums + q * VL, acc);
        b += step;
        if (++ox == a->ow) {
          ox = 0;
          row += a->sh * rs;
          b = row;
        }
      }
      /* Requantized after the group's sums, not per pixel: the FMA loop
       * then keeps its weights in registers. */
      uint8_t *y = a->y + oy0 * a->ow + p0;
#if defined(QE_AVX2)
      /* Narrowed to bytes per pixel (the values are within the output
       * type, so the packs do not saturate them), then transposed as bytes:
       * w[k] holds channels 2k and 2k + 1, eight pixels each. */
      __m128i pk[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) {
        vi q0 = dwc_requant(f_ld(sums + 2 * k * VL), corr, mult, off, zp, lo, hi);
        vi q1 = dwc_requant(f_ld(sums + (2 * k + 1) * VL), corr, mult, off, zp, lo, hi);
        __m128i h0 = _mm_packs_epi32(_mm256_castsi256_si128(q0), _mm256_extracti128_si256(q0, 1));
        __m128i h1 = _mm_packs_epi32(_mm256_castsi256_si128(q1), _mm256_extracti128_si256(q1, 1));
        __m128i by = out_signed ? _mm_packs_epi16(h0, h1) : _mm_packus_epi16(h0, h1);
        pk[k] = _mm_unpacklo_epi8(by, _mm_srli_si128(by, 8));
      }
      __m128i u0 = _mm_unpacklo_epi16(pk[0], pk[1]), u1 = _mm_unpackhi_epi16(pk[0], pk[1]);
      __m128i u2 = _mm_unpacklo_epi16(pk[2], pk[3]), u3 = _mm_unpackhi_epi16(pk[2], pk[3]);
      __m128i w[4] = {_mm_unpacklo_epi32(u0, u2), _mm_unpackhi_epi32(u0, u2), _mm_unpacklo_epi32(u1, u3),
                      _mm_unpackhi_epi32(u1, u3)};
#pragma GCC unroll 8
      for (int c = 0; c < 8; c++) {
        if (c >= a->nc) break;
        __m128i ch = c % 2 ? _mm_unpackhi_epi64(w[c / 2], w[c / 2]) : w[c / 2];
        if (n == VL) _mm_storel_epi64((__m128i *)(y + c * ohw), ch);
        else er__store_low_bytes(y + c * ohw, (uint64_t)_mm_cvtsi128_si64(ch), (int)n);
      }
#else
      vf t[VL];
#pragma GCC unroll 16
      for (int q = 0; q < VL; q++) t[q] = QE_CAST_F(dwc_requant(f_ld(sums + q * VL), corr, mult, off, zp, lo, hi));
      v_transpose(t);
#pragma GCC unroll 16
      for (int c = 0; c < VL; c++)
        if (c < a->nc) st8_part(y + c * ohw, QE_CAST_I(t[c]), n);
#endif
    }
  }
}
