/* qelt-pool-impl.h - 8-bit pooling: maxima, sums, planes and the quantized
 * average, written once over the vector primitives of qelt-impl.h and
 * compiled per ISA; included by qelt-impl.h. */

/* ======================================================================== */
/* Pooling helpers                                                           */
/* ======================================================================== */

static void max_u8(uint8_t *y, const uint8_t *x, int64_t n, bool is_signed) {
  int64_t i = 0;
  for (; i + BL <= n; i += BL) max_bytes(y + i, x + i, is_signed);
#if defined(QE_MASKED)
  if (i < n) {
    __mmask64 m = ~(__mmask64)0 >> (64 - (n - i));
    __m512i a = _mm512_maskz_loadu_epi8(m, y + i), b = _mm512_maskz_loadu_epi8(m, x + i);
    _mm512_mask_storeu_epi8(y + i, m, is_signed ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b));
    return;
  }
#endif
  for (; i < n; i++) {
    if (is_signed) {
      if ((int8_t)x[i] > (int8_t)y[i]) y[i] = x[i];
    } else if (x[i] > y[i]) {
      y[i] = x[i];
    }
  }
}

static void sum_u8(int32_t *acc, const uint8_t *x, int64_t n, bool is_signed) {
  int64_t i = 0;
  for (; i + VL <= n; i += VL) i_st(acc + i, i_add(i_ld(acc + i), i_ld8(x + i, is_signed)));
#if defined(QE_MASKED)
  /* A masked last vector: the pools of 7x7 and 14x14 maps are mostly
   * tails. */
  if (i < n) {
    int64_t r = n - i;
    i_st_n(acc + i, i_add(_mm512_maskz_loadu_epi32(mask16(r), acc + i), i_ld8_n(x + i, r, is_signed)), r);
    return;
  }
#endif
  for (; i < n; i++) acc[i] += ld8(x + i, is_signed);
}

#if defined(QE_AVX512)
/* Bits b of the 64 bytes from column c with 0 <= c + b < w. */
static inline __mmask64 row_mask(int64_t c, int64_t w) {
  int64_t lo = c < 0 ? -c : 0, hi = w - c;
  if (hi > 64) hi = 64;
  if (lo >= hi) return 0;
  uint64_t m = hi == 64 ? ~(uint64_t)0 : ((uint64_t)1 << hi) - 1;
  return (__mmask64)(m & ~(((uint64_t)1 << lo) - 1));
}

/* Max pooling of one plane with windows 2 or 3 wide at column stride 2
 * (dilation 1), any height and row stride: per 32 output columns, the
 * max over the window's rows of 64 input bytes (two loads: at the
 * window's first column and 2 further), then even and odd bytes by
 * narrowing 16-bit lanes. Columns outside the input read `pad`. */
static void max_plane_s2(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                         int64_t dh, int64_t kw, int64_t oh, int64_t ow, bool is_signed, uint8_t *y) {
  const __m512i padv = _mm512_set1_epi8(is_signed ? (char)0x80 : 0);
  if (ow <= 16) {
    /* The same with 32-byte loads: 64-byte ones at unaligned addresses
     * span two cache lines, and small maps (SqueezeNet's 512 x 13 x 13 ->
     * 6 x 6, Inception's 14 x 14 -> 7 x 7) are all such rows. */
    const __m256i pad32 = _mm512_castsi512_si256(padv);
    const __mmask32 m0 = (__mmask32)row_mask(-pl, w), m2 = (__mmask32)row_mask(2 - pl, w);
    for (int64_t oy = 0; oy < oh; oy++) {
      __m256i a = pad32, b2 = pad32;
      for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = oy * sh - pt + ky * dh;
        if (iy < 0 || iy >= h) continue;
        uintptr_t row = (uintptr_t)(x + iy * w);
        __m256i r0 = _mm256_mask_loadu_epi8(pad32, m0, (const void *)(row - (uintptr_t)pl));
        a = is_signed ? _mm256_max_epi8(a, r0) : _mm256_max_epu8(a, r0);
        if (kw == 3) {
          __m256i r2 = _mm256_mask_loadu_epi8(pad32, m2, (const void *)(row + (uintptr_t)(2 - pl)));
          b2 = is_signed ? _mm256_max_epi8(b2, r2) : _mm256_max_epu8(b2, r2);
        }
      }
      __m128i even = _mm256_cvtepi16_epi8(a), odd = _mm256_cvtepi16_epi8(_mm256_srli_epi16(a, 8));
      __m128i r = is_signed ? _mm_max_epi8(even, odd) : _mm_max_epu8(even, odd);
      if (kw == 3) {
        __m128i e2 = _mm256_cvtepi16_epi8(b2);
        r = is_signed ? _mm_max_epi8(r, e2) : _mm_max_epu8(r, e2);
      }
      _mm_mask_storeu_epi8(y + oy * ow, (__mmask16)((1u << ow) - 1u), r);
    }
    return;
  }
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t iy0 = oy * sh - pt;
    for (int64_t ox0 = 0; ox0 < ow; ox0 += 32) {
      int64_t c = 2 * ox0 - pl;
      /* Bytes of the two loads inside the row. */
      __mmask64 m0 = row_mask(c, w), m2 = row_mask(c + 2, w);
      __m512i a = padv, b2 = padv;
      for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = iy0 + ky * dh;
        if (iy < 0 || iy >= h) continue;
        uintptr_t row = (uintptr_t)(x + iy * w);
        __m512i r0 = _mm512_mask_loadu_epi8(padv, m0, (const void *)(row + (uintptr_t)c));
        a = is_signed ? _mm512_max_epi8(a, r0) : _mm512_max_epu8(a, r0);
        if (kw == 3) {
          __m512i r2 = _mm512_mask_loadu_epi8(padv, m2, (const void *)(row + (uintptr_t)(c + 2)));
          b2 = is_signed ? _mm512_max_epi8(b2, r2) : _mm512_max_epu8(b2, r2);
        }
      }
      __m256i even = _mm512_cvtepi16_epi8(a), odd = _mm512_cvtepi16_epi8(_mm512_srli_epi16(a, 8));
      __m256i r = is_signed ? _mm256_max_epi8(even, odd) : _mm256_max_epu8(even, odd);
      if (kw == 3) {
        __m256i e2 = _mm512_cvtepi16_epi8(b2);
        r = is_signed ? _mm256_max_epi8(r, e2) : _mm256_max_epu8(r, e2);
      }
      int64_t n = ow - ox0 < 32 ? ow - ox0 : 32;
      _mm256_mask_storeu_epi8(y + oy * ow + ox0, (__mmask32)(~0u >> (32 - n)), r);
    }
  }
}
#define QE_MAX_PLANE_S2 max_plane_s2
#else
/* The same on AVX2, per 16 output columns: the max over the window's rows
 * of 32 input bytes at the window's first column (and 32 from 2 further for
 * 3-wide windows), even and odd bytes apart by a byte shuffle within lanes
 * and a swap of the middle 64-bit quarters. The row-at-a-time path this
 * replaces ran ResNet-18's int8 stem pool (64 x 112 x 112) in 1.4 ms
 * against onnxruntime's 0.12 ms on a Zen 3 core: its 112- and 56-byte rows
 * left 16- and 24-byte tails to a byte loop. */
#define QE_S2_BUF 16384 /* bytes of padded row maxima per strip of output rows */
static inline __m128i s2_cols(__m256i a, __m256i b2, int64_t kw, bool is_signed) {
  const __m256i idx = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14,
                                       1, 3, 5, 7, 9, 11, 13, 15);
  /* [even bytes (16) | odd bytes (16)] */
  __m256i eo = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a, idx), 0xD8);
  __m128i even = _mm256_castsi256_si128(eo), odd = _mm256_extracti128_si256(eo, 1);
  __m128i r = is_signed ? _mm_max_epi8(even, odd) : _mm_max_epu8(even, odd);
  if (kw == 3) {
    __m128i e2 = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_shuffle_epi8(b2, idx), 0xD8));
    r = is_signed ? _mm_max_epi8(r, e2) : _mm_max_epu8(r, e2);
  }
  return r;
}

static inline void s2_store(uint8_t *y, __m128i r, int64_t n) {
  if (n == 16) {
    _mm_storeu_si128((__m128i *)y, r);
  } else {
    uint8_t out[16];
    _mm_storeu_si128((__m128i *)out, r);
    memcpy(y, out, (size_t)n);
  }
}

static void max_plane_s2(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                         int64_t dh, int64_t kw, int64_t oh, int64_t ow, bool is_signed, uint8_t *y) {
  const uint8_t pad = is_signed ? 0x80 : 0;
  const __m256i padv = _mm256_set1_epi8((char)pad);
  /* The last block reads up to 2 * (ow rounded up to 16) - pl + 34. */
  const int64_t span = (pl + 2 * ((ow + 15) / 16 * 16) + 34 + 31) / 32 * 32;
  if (w >= 16 && pl + w <= span && 4 * span <= QE_S2_BUF) {
    /* Strips of output rows: first each row's max over the window's rows
     * into a buffer padded on both sides (one store per 32 bytes, the
     * tail by one overlapping vector), then the blocks from the buffer.
     * Reading a row right after writing it at other offsets stalled on
     * store forwarding (over half the time in perf). */
    uint8_t vr[QE_S2_BUF] __attribute__((aligned(32)));
    const int64_t strip = QE_S2_BUF / span < oh ? QE_S2_BUF / span : oh;
    memset(vr, pad, (size_t)(strip * span));
    for (int64_t oy0 = 0; oy0 < oh; oy0 += strip) {
      int64_t rows = oh - oy0 < strip ? oh - oy0 : strip;
      for (int64_t r = 0; r < rows; r++) {
        const int64_t iy0 = (oy0 + r) * sh - pt;
        uint8_t *d = vr + r * span + pl;
        if (w < 32) {
          /* Rows of 16 to 31 bytes (27x27 planes): two overlapping
           * 16-byte vectors, read inside the row. */
          for (int64_t i = 0;; i += 16) {
            if (i + 16 > w) i = w - 16;
            __m128i v = _mm256_castsi256_si128(padv);
            for (int64_t ky = 0; ky < kh; ky++) {
              int64_t iy = iy0 + ky * dh;
              if (iy < 0 || iy >= h) continue;
              __m128i q = _mm_loadu_si128((const __m128i *)(x + iy * w + i));
              v = is_signed ? _mm_max_epi8(v, q) : _mm_max_epu8(v, q);
            }
            _mm_storeu_si128((__m128i *)(d + i), v);
            if (i + 16 >= w) break;
          }
          continue;
        }
        for (int64_t i = 0;; i += 32) {
          if (i + 32 > w) i = w - 32;
          __m256i v = padv;
          for (int64_t ky = 0; ky < kh; ky++) {
            int64_t iy = iy0 + ky * dh;
            if (iy < 0 || iy >= h) continue;
            __m256i q = _mm256_loadu_si256((const __m256i *)(x + iy * w + i));
            v = is_signed ? _mm256_max_epi8(v, q) : _mm256_max_epu8(v, q);
          }
          _mm256_storeu_si256((__m256i *)(d + i), v);
          if (i + 32 >= w) break;
        }
      }
      for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = vr + r * span;
        uint8_t *yr = y + (oy0 + r) * ow;
        for (int64_t ox0 = 0; ox0 < ow; ox0 += 16) {
          __m256i a = _mm256_load_si256((const __m256i *)(src + 2 * ox0));
          __m256i b2 = kw == 3 ? _mm256_loadu_si256((const __m256i *)(src + 2 * ox0 + 2)) : a;
          s2_store(yr + ox0, s2_cols(a, b2, kw, is_signed), ow - ox0 < 16 ? ow - ox0 : 16);
        }
      }
    }
    return;
  }
  /* Narrow or very wide rows: block by block, blocks reaching outside the
   * row through a padded copy. */
  uint8_t buf[64];
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t iy0 = oy * sh - pt;
    for (int64_t ox0 = 0; ox0 < ow; ox0 += 16) {
      int64_t c = 2 * ox0 - pl, end = c + 34;
      bool inside = c >= 0 && end <= w;
      int64_t lo = c < 0 ? 0 : c, hi = end < w ? end : w;
      __m256i a = padv, b2 = padv;
      for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = iy0 + ky * dh;
        if (iy < 0 || iy >= h) continue;
        const uint8_t *src = buf;
        if (inside) {
          src = x + iy * w + c;
        } else {
          memset(buf, pad, sizeof buf);
          if (lo < hi) memcpy(buf + (lo - c), x + iy * w + lo, (size_t)(hi - lo));
        }
        __m256i r0 = _mm256_loadu_si256((const __m256i *)src);
        a = is_signed ? _mm256_max_epi8(a, r0) : _mm256_max_epu8(a, r0);
        if (kw == 3) {
          __m256i r2 = _mm256_loadu_si256((const __m256i *)(src + 2));
          b2 = is_signed ? _mm256_max_epi8(b2, r2) : _mm256_max_epu8(b2, r2);
        }
      }
      s2_store(y + oy * ow + ox0, s2_cols(a, b2, kw, is_signed), ow - ox0 < 16 ? ow - ox0 : 16);
    }
  }
}
#define QE_MAX_PLANE_S2 max_plane_s2
#endif

/* The exact sum of n bytes (unsigned, or signed when is_signed), by sums
 * of absolute differences against 0: eight 64-bit sums per vector. */
static int64_t sum_bytes(const uint8_t *x, int64_t n, bool is_signed) {
  int64_t i = 0, total = 0;
#if defined(QE_AVX512)
  const __m512i flip = _mm512_set1_epi8(is_signed ? (char)0x80 : 0), zero = _mm512_setzero_si512();
  __m512i acc = zero;
  for (; i + 64 <= n; i += 64)
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512((const void *)(x + i)), flip), zero));
  if (i < n) {
    __mmask64 m = ~(__mmask64)0 >> (64 - (n - i));
    __m512i v = _mm512_maskz_mov_epi8(m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + i), flip));
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(v, zero));
    i = n;
  }
  total = _mm512_reduce_add_epi64(acc);
#else
  const __m256i flip = _mm256_set1_epi8(is_signed ? (char)0x80 : 0), zero = _mm256_setzero_si256();
  __m256i acc = zero;
  for (; i + 32 <= n; i += 32)
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x + i)), flip), zero));
  /* Tails of 16 and 8 bytes by the same sums: a global pool's 7 x 7
   * planes are 32 + 17 bytes, and 17 bytes one by one took most of its
   * time. */
  const __m128i flip16 = _mm256_castsi256_si128(flip), zero16 = _mm_setzero_si128();
  __m128i acc16 = zero16;
  if (i + 16 <= n) {
    acc16 = _mm_add_epi64(acc16, _mm_sad_epu8(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(x + i)), flip16), zero16));
    i += 16;
  }
  if (i + 8 <= n) {
    /* (the flip only on the 8 loaded bytes: the upper ones stay 0) */
    __m128i v8 = _mm_move_epi64(_mm_xor_si128(_mm_loadl_epi64((const __m128i *)(x + i)), flip16));
    acc16 = _mm_add_epi64(acc16, _mm_sad_epu8(v8, zero16));
    i += 8;
  }
  acc = _mm256_add_epi64(acc, _mm256_inserti128_si256(_mm256_setzero_si256(), acc16, 0));
  int64_t lanes[4];
  _mm256_storeu_si256((__m256i *)lanes, acc);
  total = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; i++) total += (uint8_t)(x[i] ^ (is_signed ? 0x80 : 0));
#endif
  /* Flipped bytes are the signed values plus 128. */
  return is_signed ? total - 128 * n : total;
}

/* One vector of averages: (vs - sub) / cnt, requantized (see avg_quant
 * in qelt.h for why one float division matches the reference's double
 * one). */
static inline vi avg_vec(const int32_t *vs, const float *cnt, vi sb, vf m, vi z, vi l, vi h) {
  vf avg = f_div(i2f(i_sub(i_ld(vs), sb)), f_ld(cnt));
  return quant_vec(f_mul(avg, m), z, l, h);
}

static void avg_quant(const int32_t *vs, int64_t n, int32_t sub, const float *cnt, float mult, int32_t yz,
                      int32_t lo, int32_t hi, uint8_t *y) {
  const vf m = f_set(mult);
  const vi z = i_set(yz), l = i_set(lo), h = i_set(hi), sb = i_set(sub);
  int64_t i = 0;
  for (; i + VL <= n; i += VL) st8(y + i, avg_vec(vs + i, cnt + i, sb, m, z, l, h));
  if (i < n) {
    /* The last part vector with the same arithmetic: the rows of 7x7 and
     * 14x14 maps are all tail. */
#if defined(QE_MASKED)
    /* Masked: copies through the stack stalled on store forwarding. */
    __mmask16 k = mask16(n - i);
    vf avg = f_div(i2f(i_sub(_mm512_maskz_loadu_epi32(k, vs + i), sb)), _mm512_mask_loadu_ps(f_set(1.0f), k, cnt + i));
    _mm512_mask_cvtepi32_storeu_epi8(y + i, k, quant_vec(f_mul(avg, m), z, l, h));
#else
    /* One by one: copies through the stack stalled on store forwarding
     * (the sums' tails were just written one by one too). */
    for (; i < n; i++) y[i] = (uint8_t)quant_one((float)(vs[i] - sub) / cnt[i] * mult, yz, lo, hi);
#endif
  }
}

#if defined(QE_AVX512)
/* avg_plane_narrow (qelt.h): per output row, the window's input rows
 * summed in two int32 vectors (padded columns 0-31, each input row one
 * masked load at column -pl, padding lanes starting at the zero point
 * times the rows it stands for), then the kw shifted copies of that row
 * (valignd) added, divided and requantized in registers. Rows of 7x7 and
 * 14x14 maps went through buffers with masked stores and loads before,
 * which stall on store forwarding. */
static void avg_plane_narrow(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                             int64_t dh, int64_t kw, int64_t oh, int64_t ow, bool is_signed, int32_t xz, int32_t sub,
                             const float *cnt, float mult, int32_t yz, int32_t lo, int32_t hi, uint8_t *y) {
  const int64_t hn = ow + kw - 1;
  /* Input columns [0, cols) are padded columns pl ...; lanes of the row
   * that hold them. */
  const int64_t cols = w < hn - pl ? w : hn - pl;
  const uint32_t in_bits = (uint32_t)((cols >= 32 ? ~(uint64_t)0 : (((uint64_t)1 << cols) - 1)) << pl);
  const __mmask16 in_lo = (__mmask16)in_bits, in_hi = (__mmask16)(in_bits >> 16);
  const __mmask32 load_mask = (__mmask32)in_bits;
  const __mmask16 out_lo = mask16(ow < 16 ? ow : 16), out_hi = mask16(ow > 16 ? ow - 16 : 0);
  const vf m = f_set(mult), one = f_set(1.0f);
  const vi z = i_set(yz), l = i_set(lo), hv = i_set(hi), sb = i_set(sub), zero = _mm512_setzero_si512();
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t rows_in = 0;
    for (int64_t ky = 0; ky < kh; ky++) {
      int64_t iy = oy * sh - pt + ky * dh;
      rows_in += iy >= 0 && iy < h;
    }
    /* Padding columns stand for kh zero points, input columns for the
     * kh - rows_in rows of padding above or below. */
    const vi pad_col = i_set((int32_t)kh * xz), in_col = i_set((int32_t)(kh - rows_in) * xz);
    vi a0 = _mm512_mask_mov_epi32(pad_col, in_lo, in_col), a1 = _mm512_mask_mov_epi32(pad_col, in_hi, in_col);
    for (int64_t ky = 0; ky < kh; ky++) {
      int64_t iy = oy * sh - pt + ky * dh;
      if (iy < 0 || iy >= h) continue;
      /* Lanes outside the input are masked off and not read (integer
       * address arithmetic: the first lanes may lie before the row). */
      if (hn <= 16) {
        /* One 16-byte load (a 32-byte one spans two cache lines more
         * often); the upper vector's lanes are never stored. */
        __m128i b0 = _mm_maskz_loadu_epi8((__mmask16)load_mask, (const void *)((uintptr_t)(x + iy * w) - (uintptr_t)pl));
        a0 = i_add(a0, is_signed ? _mm512_cvtepi8_epi32(b0) : _mm512_cvtepu8_epi32(b0));
        continue;
      }
      __m256i b = _mm256_maskz_loadu_epi8(load_mask, (const void *)((uintptr_t)(x + iy * w) - (uintptr_t)pl));
      __m128i b0 = _mm256_castsi256_si128(b), b1 = _mm256_extracti128_si256(b, 1);
      a0 = i_add(a0, is_signed ? _mm512_cvtepi8_epi32(b0) : _mm512_cvtepu8_epi32(b0));
      a1 = i_add(a1, is_signed ? _mm512_cvtepi8_epi32(b1) : _mm512_cvtepu8_epi32(b1));
    }
    vi s0 = a0, s1 = a1;
    for (int64_t t = 1; t < kw; t++) {
      /* valignd takes its shift as an immediate. */
      __m512i r0, r1;
      switch (t) {
#define AVG_SHIFT(T)                                  \
  case T:                                             \
    r0 = _mm512_alignr_epi32(a1, a0, T);              \
    r1 = _mm512_alignr_epi32(zero, a1, T);            \
    break;
        AVG_SHIFT(1) AVG_SHIFT(2) AVG_SHIFT(3) AVG_SHIFT(4) AVG_SHIFT(5) AVG_SHIFT(6) AVG_SHIFT(7) AVG_SHIFT(8)
        AVG_SHIFT(9) AVG_SHIFT(10) AVG_SHIFT(11) AVG_SHIFT(12) AVG_SHIFT(13) AVG_SHIFT(14) AVG_SHIFT(15)
#undef AVG_SHIFT
        default: /* kw <= 16 (the caller's bound) */
          r0 = r1 = zero;
          break;
      }
      s0 = i_add(s0, r0);
      s1 = i_add(s1, r1);
    }
    const float *c = cnt + oy * ow;
    vf q0 = f_div(i2f(i_sub(s0, sb)), _mm512_mask_loadu_ps(one, out_lo, c));
    _mm512_mask_cvtepi32_storeu_epi8(y + oy * ow, out_lo, quant_vec(f_mul(q0, m), z, l, hv));
    if (ow > 16) {
      vf q1 = f_div(i2f(i_sub(s1, sb)), _mm512_mask_loadu_ps(one, out_hi, c + 16));
      _mm512_mask_cvtepi32_storeu_epi8(y + oy * ow + 16, out_hi, quant_vec(f_mul(q1, m), z, l, hv));
    }
  }
}
#define QE_AVG_PLANE_NARROW avg_plane_narrow

/* max_plane_s1 (qelt.h): an output row is one vector of up to 64 bytes;
 * each tap one masked load of the input row at the tap's column offset,
 * lanes whose column falls outside the row reading the type's minimum
 * (and not read). Inception-v2's 3x3 pool over 1024 x 7 x 7 took 250 us
 * through the row buffers (max_rows), mostly calls on 7-byte runs. */
static void max_plane_s1(const uint8_t *x, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t kh, int64_t sh,
                         int64_t dh, int64_t kw, int64_t dw, int64_t oh, int64_t ow, bool is_signed, uint8_t *y) {
  const __m512i padv = _mm512_set1_epi8(is_signed ? (char)0x80 : 0);
  const uint64_t out_bits = ow >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << ow) - 1;
  /* Lane i of tap kx reads column i - pl + kx * dw: inside for i in
   * [pl - kx * dw, pl - kx * dw + w). */
  __mmask64 tap_mask[16];
  for (int64_t kx = 0; kx < kw; kx++) {
    int64_t lo = pl - kx * dw, hi = lo + w;
    if (lo < 0) lo = 0;
    if (hi > 64) hi = 64;
    uint64_t bits = 0;
    if (lo < hi) bits = (hi - lo >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << (hi - lo)) - 1)) << lo;
    tap_mask[kx] = (__mmask64)(bits & out_bits);
  }
  if (ow <= 16) {
    /* 16-byte loads: a 64-byte one at an unaligned address always spans
     * two cache lines: 1024 x 7 x 7 took 111 us, 62 us with these). */
    const __m128i pad16 = _mm512_castsi512_si128(padv);
    for (int64_t oy = 0; oy < oh; oy++) {
      __m128i acc = pad16;
      for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = oy * sh - pt + ky * dh;
        if (iy < 0 || iy >= h) continue;
        const uintptr_t row = (uintptr_t)(x + iy * w) - (uintptr_t)pl;
        for (int64_t kx = 0; kx < kw; kx++) {
          __m128i v = _mm_mask_loadu_epi8(pad16, (__mmask16)tap_mask[kx], (const void *)(row + (uintptr_t)(kx * dw)));
          acc = is_signed ? _mm_max_epi8(acc, v) : _mm_max_epu8(acc, v);
        }
      }
      _mm_mask_storeu_epi8(y + oy * ow, (__mmask16)out_bits, acc);
    }
    return;
  }
  for (int64_t oy = 0; oy < oh; oy++) {
    __m512i acc = padv;
    for (int64_t ky = 0; ky < kh; ky++) {
      int64_t iy = oy * sh - pt + ky * dh;
      if (iy < 0 || iy >= h) continue;
      const uintptr_t row = (uintptr_t)(x + iy * w) - (uintptr_t)pl;
      for (int64_t kx = 0; kx < kw; kx++) {
        __m512i v = _mm512_mask_loadu_epi8(padv, tap_mask[kx], (const void *)(row + (uintptr_t)(kx * dw)));
        acc = is_signed ? _mm512_max_epi8(acc, v) : _mm512_max_epu8(acc, v);
      }
    }
    _mm512_mask_storeu_epi8(y + oy * ow, (__mmask64)out_bits, acc);
  }
}
#define QE_MAX_PLANE_S1 max_plane_s1
#else
#define QE_AVG_PLANE_NARROW NULL
#define QE_MAX_PLANE_S1 NULL
#endif
