/* qgemm.c - the 8-bit integer GEMM driver: packing, blocking, the split
 * over threads and the scalar epilogue (see qgemm.h). Plain C (with SSE2,
 * which every x86-64 has, for the byte interleave); the ISA files supply
 * the microkernels and the vector epilogues. */
#include "kernels/qgemm.h"

#include "ops/qfused.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Bytes of activations packed per block: a block stays in L2 while every
 * weight panel passes over it. */
#define QGEMM_BLOCK_BYTES (192 * 1024)
/* Below this many multiply-adds per worker a split costs more than it
 * saves. */
#define QGEMM_MIN_MACS_PER_WORKER (INT64_C(1) << 18)

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

const er_qgemm_isa *er__qgemm_best(const er_cpu_features *cpu, bool conv) {
#if defined(__x86_64__) || defined(__i386__)
  if (cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512dq && cpu->avx512vnni)
    return conv ? &er__qgemm_conv_avx512vnni : &er__qgemm_mm_avx512vnni;
  if (cpu->avx2 && cpu->fma && cpu->f16c) return conv ? &er__qgemm_conv_avx2 : &er__qgemm_mm_avx2;
#endif
#if defined(ER_QGEMM_NEONDOT)
  if (cpu->neon && cpu->dotprod) return conv ? &er__qgemm_conv_neondot : &er__qgemm_mm_neondot;
#endif
  ER_UNUSED(cpu);
  ER_UNUSED(conv);
  return NULL;
}

/* ======================================================================== */
/* Packing                                                                   */
/* ======================================================================== */

void er__qgemm_pack_rows(const er_qgemm_isa *isa, const er_qsrc *src, int64_t r0, int rows, int64_t k, void *dst,
                         int32_t *sums) {
  const int mr = isa->mr, kg = isa->row_kg ? isa->row_kg : isa->kg;
  const int64_t groups = er__qgemm_kgroups(isa, k);
  size_t bytes = er__qgemm_row_panel_bytes(isa, k);
  memset(dst, 0, bytes);
  /* By k groups, without a division per element: the 64-bit q / kg and
   * q % kg were most of packing a DynamicQuantizeLSTM step's one row (2.2
   * us for 512 bytes on a Zen 3 EPYC). */
  const int64_t ks = src->ks;
  const uint8_t flip = src->flip;
  for (int r = 0; r < rows; r++) {
    const uint8_t *s = src->data + (r0 + r) * src->rs;
    int32_t sum = 0;
    for (int64_t q0 = 0, g = 0; q0 < k; q0 += kg, g++) {
      const int n = k - q0 < kg ? (int)(k - q0) : kg;
      const uint8_t *sq = s + q0 * ks;
      if (isa->row_bytes == 1) {
        uint8_t *d = (uint8_t *)dst + (g * mr + r) * kg;
        for (int i = 0; i < n; i++) {
          uint8_t v = (uint8_t)(sq[i * ks] ^ flip);
          d[i] = v;
          sum += src->is_weights ? (int8_t)v : v;
        }
      } else {
        int16_t *d = (int16_t *)dst + (g * mr + r) * kg;
        for (int i = 0; i < n; i++) {
          uint8_t v = (uint8_t)(sq[i * ks] ^ flip);
          int16_t w = src->is_weights ? (int16_t)(int8_t)v : (int16_t)v;
          d[i] = w;
          sum += w;
        }
      }
    }
    if (sums) sums[r] = sum;
  }
  ER_UNUSED(groups);
}

static inline __attribute__((always_inline)) void interleave(int kg, int nr, const uint8_t *const *rows, int cols,
                                                            uint8_t flip, uint8_t *dst, int32_t *sums) {
  static const uint8_t zeros[ER_QGEMM_MAX_NR] = {0};
  const uint8_t *r[4];
  for (int i = 0; i < kg; i++) r[i] = rows[i] ? rows[i] : zeros;
  int j = 0;
#if defined(__SSE2__)
  const __m128i f = _mm_set1_epi8((char)flip);
  if (kg == 4) {
    for (; j + 16 <= cols; j += 16) {
      /* NULL rows are zeros (never flipped). */
      const __m128i z = _mm_setzero_si128();
      __m128i a = rows[0] ? _mm_xor_si128(_mm_loadu_si128((const __m128i *)(rows[0] + j)), f) : z;
      __m128i b = rows[1] ? _mm_xor_si128(_mm_loadu_si128((const __m128i *)(rows[1] + j)), f) : z;
      __m128i c = rows[2] ? _mm_xor_si128(_mm_loadu_si128((const __m128i *)(rows[2] + j)), f) : z;
      __m128i d = rows[3] ? _mm_xor_si128(_mm_loadu_si128((const __m128i *)(rows[3] + j)), f) : z;
      er__store_interleaved4(dst + j * 4, a, b, c, d);
      if (sums) {
        /* The columns' sums of the four (flipped, unsigned) bytes: 16-bit
         * lanes hold them (at most 1020), added into the int32 sums. A
         * byte loop here was a fifth of a quantize_dynamic model's run
         * (its uint8 weights have zero points, so activation sums are
         * needed). */
        __m128i lo = _mm_add_epi16(_mm_add_epi16(_mm_unpacklo_epi8(a, z), _mm_unpacklo_epi8(b, z)),
                                   _mm_add_epi16(_mm_unpacklo_epi8(c, z), _mm_unpacklo_epi8(d, z)));
        __m128i hi = _mm_add_epi16(_mm_add_epi16(_mm_unpackhi_epi8(a, z), _mm_unpackhi_epi8(b, z)),
                                   _mm_add_epi16(_mm_unpackhi_epi8(c, z), _mm_unpackhi_epi8(d, z)));
        __m128i *sp = (__m128i *)(void *)(sums + j);
        _mm_storeu_si128(sp + 0, _mm_add_epi32(_mm_loadu_si128(sp + 0), _mm_unpacklo_epi16(lo, z)));
        _mm_storeu_si128(sp + 1, _mm_add_epi32(_mm_loadu_si128(sp + 1), _mm_unpackhi_epi16(lo, z)));
        _mm_storeu_si128(sp + 2, _mm_add_epi32(_mm_loadu_si128(sp + 2), _mm_unpacklo_epi16(hi, z)));
        _mm_storeu_si128(sp + 3, _mm_add_epi32(_mm_loadu_si128(sp + 3), _mm_unpackhi_epi16(hi, z)));
      }
    }
    if (j < cols) {
      /* The last cols - j (< 16) columns through zero-padded copies (short
       * rows, e.g. 14 pixels, would otherwise go byte by byte). */
      int m = cols - j;
      uint8_t in[4][16] = {{0}}, out[64];
      const uint8_t *part[4];
      for (int i = 0; i < 4; i++) {
        if (rows[i]) memcpy(in[i], rows[i] + j, (size_t)m);
        part[i] = rows[i] ? in[i] : NULL;
      }
      __m128i v[4];
      for (int i = 0; i < 4; i++)
        v[i] = part[i] ? _mm_xor_si128(_mm_loadu_si128((const __m128i *)part[i]), f) : _mm_setzero_si128();
      er__store_interleaved4(out, v[0], v[1], v[2], v[3]);
      memcpy(dst + j * 4, out, (size_t)m * 4);
      if (sums)
        for (int t = 0; t < m; t++)
          for (int i = 0; i < 4; i++) sums[j + t] += out[t * 4 + i];
      j = cols;
    }
  } else if (kg == 2) {
    for (; j + 16 <= cols; j += 16) {
      __m128i a = rows[0] ? _mm_xor_si128(_mm_loadu_si128((const __m128i *)(rows[0] + j)), f) : _mm_setzero_si128();
      __m128i b = rows[1] ? _mm_xor_si128(_mm_loadu_si128((const __m128i *)(rows[1] + j)), f) : _mm_setzero_si128();
      __m128i *o = (__m128i *)(dst + j * 2);
      _mm_storeu_si128(o + 0, _mm_unpacklo_epi8(a, b));
      _mm_storeu_si128(o + 1, _mm_unpackhi_epi8(a, b));
      if (sums) {
        /* As for KG = 4: 16-bit column sums of the two bytes, added into
         * the int32 sums (a byte loop here was 3/4 of the packing of
         * quantize_dynamic's 1x1 layers, whose weights have zero points). */
        const __m128i z = _mm_setzero_si128();
        __m128i lo = _mm_add_epi16(_mm_unpacklo_epi8(a, z), _mm_unpacklo_epi8(b, z));
        __m128i hi = _mm_add_epi16(_mm_unpackhi_epi8(a, z), _mm_unpackhi_epi8(b, z));
        __m128i *sp = (__m128i *)(void *)(sums + j);
        _mm_storeu_si128(sp + 0, _mm_add_epi32(_mm_loadu_si128(sp + 0), _mm_unpacklo_epi16(lo, z)));
        _mm_storeu_si128(sp + 1, _mm_add_epi32(_mm_loadu_si128(sp + 1), _mm_unpackhi_epi16(lo, z)));
        _mm_storeu_si128(sp + 2, _mm_add_epi32(_mm_loadu_si128(sp + 2), _mm_unpacklo_epi16(hi, z)));
        _mm_storeu_si128(sp + 3, _mm_add_epi32(_mm_loadu_si128(sp + 3), _mm_unpackhi_epi16(hi, z)));
      }
    }
  }
#endif
  for (; j < cols; j++)
    for (int i = 0; i < kg; i++) {
      uint8_t v = rows[i] ? (uint8_t)(r[i][j] ^ flip) : 0;
      dst[j * kg + i] = v;
      if (sums) sums[j] += v;
    }
  memset(dst + (size_t)cols * (size_t)kg, 0, (size_t)(nr - cols) * (size_t)kg);
}

void er__qgemm_interleave(int kg, int nr, const uint8_t *const *rows, int cols, uint8_t flip, uint8_t *dst,
                          int32_t *sums) {
  interleave(kg, nr, rows, cols, flip, dst, sums);
}

void er__qgemm_interleave_panels(int kg, int nr, const uint8_t *const *rows, int64_t cols, uint8_t flip,
                                 uint8_t *dst, size_t panel_bytes, int32_t *sums) {
  int64_t q = 0;
#if defined(__SSE2__)
  if ((kg == 4 || kg == 2) && nr == 16) {
    /* Whole panels of 16 columns in one loop: the generic call per panel
     * spent more on its set-up than on the bytes (two fifths of an int8 1x1
     * layer of 24 channels). A NULL row reads zeros, not flipped. */
    static const uint8_t zeros[16] = {0};
    const __m128i z = _mm_setzero_si128();
    const uint8_t *p[4];
    int64_t step[4];
    __m128i f[4];
    for (int i = 0; i < kg; i++) {
      p[i] = rows[i] ? rows[i] : zeros;
      step[i] = rows[i] ? 16 : 0;
      f[i] = rows[i] ? _mm_set1_epi8((char)flip) : z;
    }
    for (; (q + 1) * 16 <= cols; q++) {
      __m128i v[4];
      for (int i = 0; i < kg; i++) {
        v[i] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p[i]), f[i]);
        p[i] += step[i];
      }
      __m128i *o = (__m128i *)(dst + (size_t)q * panel_bytes);
      __m128i lo, hi;
      if (kg == 4) {
        er__store_interleaved4((uint8_t *)o, v[0], v[1], v[2], v[3]);
        if (!sums) continue;
        lo = _mm_add_epi16(_mm_add_epi16(_mm_unpacklo_epi8(v[0], z), _mm_unpacklo_epi8(v[1], z)),
                           _mm_add_epi16(_mm_unpacklo_epi8(v[2], z), _mm_unpacklo_epi8(v[3], z)));
        hi = _mm_add_epi16(_mm_add_epi16(_mm_unpackhi_epi8(v[0], z), _mm_unpackhi_epi8(v[1], z)),
                           _mm_add_epi16(_mm_unpackhi_epi8(v[2], z), _mm_unpackhi_epi8(v[3], z)));
      } else {
        _mm_storeu_si128(o + 0, _mm_unpacklo_epi8(v[0], v[1]));
        _mm_storeu_si128(o + 1, _mm_unpackhi_epi8(v[0], v[1]));
        if (!sums) continue;
        lo = _mm_add_epi16(_mm_unpacklo_epi8(v[0], z), _mm_unpacklo_epi8(v[1], z));
        hi = _mm_add_epi16(_mm_unpackhi_epi8(v[0], z), _mm_unpackhi_epi8(v[1], z));
      }
      __m128i *sp = (__m128i *)(void *)(sums + q * 16);
      _mm_storeu_si128(sp + 0, _mm_add_epi32(_mm_loadu_si128(sp + 0), _mm_unpacklo_epi16(lo, z)));
      _mm_storeu_si128(sp + 1, _mm_add_epi32(_mm_loadu_si128(sp + 1), _mm_unpackhi_epi16(lo, z)));
      _mm_storeu_si128(sp + 2, _mm_add_epi32(_mm_loadu_si128(sp + 2), _mm_unpacklo_epi16(hi, z)));
      _mm_storeu_si128(sp + 3, _mm_add_epi32(_mm_loadu_si128(sp + 3), _mm_unpackhi_epi16(hi, z)));
    }
  }
#endif
  for (; q * nr < cols; q++) {
    const uint8_t *r[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < kg && i < 4; i++) r[i] = rows[i] ? rows[i] + q * nr : NULL;
    int n = cols - q * nr < nr ? (int)(cols - q * nr) : nr;
    interleave(kg, nr, r, n, flip, dst + (size_t)q * panel_bytes, sums ? sums + q * nr : NULL);
  }
}

void er__qgemm_pack_cols(const er_qgemm_isa *isa, const er_qsrc *src, int64_t c0, int cols, int64_t k, uint8_t *dst,
                         int32_t *sums) {
  const int nr = isa->nr, kg = isa->kg;
  const int64_t groups = er__qgemm_kgroups(isa, k);
  uint8_t tmp[4][ER_QGEMM_MAX_NR];
  if (sums) memset(sums, 0, (size_t)cols * sizeof *sums);
  for (int64_t q = 0; q < groups; q++) {
    const uint8_t *rows[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < kg; i++) {
      int64_t kk = q * kg + i;
      if (kk >= k) continue;
      const uint8_t *s = src->data + kk * src->rs + c0 * src->ks;
      if (src->ks == 1) {
        rows[i] = s;
      } else {
        for (int c = 0; c < cols; c++) tmp[i][c] = s[c * src->ks];
        rows[i] = tmp[i];
      }
    }
    er__qgemm_interleave(kg, nr, rows, cols, src->flip, dst + q * nr * kg, src->is_weights ? NULL : sums);
  }
  if (sums && src->is_weights) {
    /* Weight sums are signed; recompute them from the packed bytes. */
    for (int c = 0; c < cols; c++) {
      int32_t s = 0;
      for (int64_t q = 0; q < groups; q++)
        for (int i = 0; i < kg; i++) s += (int8_t)dst[(q * nr + c) * kg + i];
      sums[c] = s;
    }
  }
}

/* ======================================================================== */
/* The scalar epilogue                                                       */
/* ======================================================================== */

/* QLinearConv's saturate_round: round half to even of a double, NaN to the
 * zero point, then clamp. */
static int32_t rhe_double(double v, int32_t zp, int32_t lo, int32_t hi) {
  if (v != v) v = zp;
  if (v < lo) return lo;
  if (v > hi) return hi;
  double r = floor(v), frac = v - r;
  if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
  return (int32_t)r;
}

void er__qepi_scalar(const er_qepi *e, const er_qtile_out *t) {
  for (int r = 0; r < t->rows; r++) {
    for (int j = 0; j < t->cols; j++) {
      int64_t ch = e->channel_rows ? t->i0 + r : t->j0 + j;
      uint32_t a = (uint32_t)t->acc[r * t->nr + j] + (uint32_t)e->corr[ch];
      if (e->wzp) a -= (uint32_t)e->wzp[ch] * (uint32_t)t->asum[e->channel_rows ? j : r];
      int32_t acc = (int32_t)a;
      size_t at = (size_t)(r * t->ldc + j);
      switch (e->kind) {
        case ER_QEPI_Q8: {
          int32_t q = er__q_requant(acc, e->mult[ch], e->off[ch], e->zp, e->lo, e->hi);
          ((uint8_t *)t->c)[at] = (uint8_t)q;
          break;
        }
        case ER_QEPI_F32: {
          float f = fmaf((float)acc, e->mult[ch], e->off[ch]);
          ((float *)t->c)[at] = f < e->clip_lo ? e->clip_lo : f > e->clip_hi ? e->clip_hi : f;
          break;
        }
        case ER_QEPI_QLINEAR:
          ((uint8_t *)t->c)[at] = (uint8_t)rhe_double((double)acc * e->mult_d[ch] + e->zp, e->zp, e->lo, e->hi);
          break;
        case ER_QEPI_I32: ((int32_t *)t->c)[at] = acc; break;
      }
    }
  }
}

/* ======================================================================== */
/* Blocking                                                                  */
/* ======================================================================== */

static size_t out_size(const er_qepi *e) { return e->kind == ER_QEPI_Q8 || e->kind == ER_QEPI_QLINEAR ? 1 : 4; }

/* Columns per block when the columns are packed at run time; rows per
 * block when the rows are. */
static int64_t block_cols(const er_qgemm_problem *p) {
  /* In place, a block's columns are scattered over the k groups: the
   * same budget bounds what one block touches. */
  int64_t panels = QGEMM_BLOCK_BYTES / (int64_t)er__qgemm_col_panel_bytes(p->isa, p->k);
  if (panels < 1) panels = 1;
  return min64(panels * p->isa->nr, round_up(p->n > 0 ? p->n : 1, p->isa->nr));
}

static int64_t block_rows(const er_qgemm_problem *p) {
  int64_t panels = QGEMM_BLOCK_BYTES / (int64_t)er__qgemm_row_panel_bytes(p->isa, p->k);
  if (panels < 1) panels = 1;
  return min64(panels * p->isa->mr, round_up(p->m > 0 ? p->m : 1, p->isa->mr));
}

size_t er__qgemm_scratch_bytes(const er_qgemm_problem *p) {
  size_t n = 0;
  if (!p->cols_packed && !p->cols_base) {
    int64_t nc = block_cols(p);
    n += (size_t)(nc / p->isa->nr) * er__qgemm_col_panel_bytes(p->isa, p->k) + (size_t)nc * sizeof(int32_t);
  }
  if (!p->rows_packed) {
    int64_t mc = block_rows(p);
    n += (size_t)(mc / p->isa->mr) * er__qgemm_row_panel_bytes(p->isa, p->k) + (size_t)mc * sizeof(int32_t);
  }
  return (n + 63) / 64 * 64;
}

/* A tile over virtual columns: its runs of real columns, each where it
 * lands in C (the columns-per-channel parameters of matrix products are
 * never virtual, so j0 only locates the activation sums). */
static void virtual_epilogue(const er_qgemm_problem *p, const er_qtile_out *t, size_t es) {
  int j = 0;
  while (j < t->cols) {
    int64_t v = t->j0 + j, row = v / p->vw, col = v % p->vw;
    int seg = (int)min64(t->cols - j, p->vw - col);
    int valid = col < p->ow ? (int)min64(seg, p->ow - col) : 0;
    if (valid > 0) {
      er_qtile_out s = *t;
      s.acc = t->acc + j;
      s.cols = valid;
      s.j0 = v;
      if (s.asum && p->epi.channel_rows) s.asum = t->asum + j;
      s.c = (uint8_t *)p->c + (size_t)(t->i0 * p->ldc + row * p->ow + col) * es;
      p->isa->epilogue(&p->epi, &s);
    }
    j += seg;
  }
}

/* Rows [m0, m1) x columns [n0, n1) (aligned to the tile, except at the
 * ends of C). */
static void qgemm_part(const er_qgemm_problem *p, int64_t m0, int64_t m1, int64_t n0, int64_t n1, uint8_t *scratch) {
  const er_qgemm_isa *isa = p->isa;
  const int mr = isa->mr, nr = isa->nr;
  const int64_t groups = er__qgemm_kgroups(isa, p->k);
  const size_t rpb = er__qgemm_row_panel_bytes(isa, p->k), cpb = er__qgemm_col_panel_bytes(isa, p->k);
  /* Planes without padding columns: tiles of w3_nr columns, read in
   * place (no block to pack). */
  const int tw = p->w3 > 0 ? isa->w3_nr : nr;
  const int64_t NC = p->w3 > 0 ? n1 - n0 : p->cols_packed ? round_up(n1 - n0, nr) : block_cols(p);
  const int kg = isa->kg;
  const int64_t MC = p->rows_packed ? round_up(m1 - m0, mr) : block_rows(p);
  const bool w_rows = p->rows_packed != NULL; /* weights are the prepacked side */
  uint8_t *cbuf = scratch;
  int32_t *casum = NULL, *rasum = NULL;
  uint8_t *rbuf = scratch;
  if (!p->cols_packed && !p->cols_base) {
    casum = (int32_t *)(cbuf + (size_t)(NC / nr) * cpb);
    rbuf = (uint8_t *)(casum + NC);
  }
  if (!p->rows_packed) rasum = (int32_t *)(rbuf + (size_t)(MC / mr) * rpb);
  int32_t acc[ER_QGEMM_MAX_MR * ER_QGEMM_MAX_NR] __attribute__((aligned(64)));
  const size_t es = out_size(&p->epi);
  /* Rows of at least 2 columns keep a tile within ER_QGEMM_MAX_SEGS runs. */
  const bool fuse_q8 = isa->tile_q8 && p->rows_packed && p->epi.kind == ER_QEPI_Q8 && p->epi.channel_rows &&
                       !p->epi.wzp && (p->vw == 0 || p->ow >= 2);
  for (int64_t j0 = n0; j0 < n1; j0 += NC) {
    int64_t nc = min64(NC, n1 - j0);
    const uint8_t *cp;
    if (p->cols_base) {
      cp = p->cols_base + j0 * kg;
    } else if (p->cols_packed) {
      cp = p->cols_packed + (size_t)(j0 / nr) * cpb;
    } else {
      p->pack_cols(p->cols_ctx, j0, nc, cbuf, p->need_asum ? casum : NULL);
      cp = cbuf;
    }
    for (int64_t i0 = m0; i0 < m1; i0 += MC) {
      int64_t mc = min64(MC, m1 - i0);
      const uint8_t *rp;
      if (p->rows_packed) {
        rp = (const uint8_t *)p->rows_packed + (size_t)(i0 / mr) * rpb;
      } else {
        p->pack_rows(p->rows_ctx, i0, mc, rbuf, p->need_asum ? rasum : NULL);
        rp = rbuf;
      }
      /* Column tiles outer, row panels inner: a tile's columns (all k
       * groups) stay in L1 while every weight panel passes over them. */
      for (int64_t jr = 0; jr < nc; jr += tw) {
        int cols = (int)min64(tw, nc - jr);
        /* With the fused epilogue, the tile's real columns land in runs
         * of C: the same runs for every row panel. */
        er_qseg segs[ER_QGEMM_MAX_SEGS];
        int nseg = 0;
        if (fuse_q8) {
          int64_t j = j0 + jr;
          if (p->vw > 0) {
            for (int t = 0; t < cols && nseg < ER_QGEMM_MAX_SEGS;) {
              int64_t v = j + t, row = v / p->vw, col = v % p->vw;
              int seg = (int)min64(cols - t, p->vw - col);
              int valid = col < p->ow ? (int)min64(seg, p->ow - col) : 0;
              if (valid > 0) segs[nseg++] = (er_qseg){t, valid, row * p->ow + col};
              t += seg;
            }
          } else {
            segs[nseg++] = (er_qseg){0, cols, j};
          }
        }
        /* Planes without padding columns: which of the tile's columns lie
         * on the left and right edges of the map. */
        uint64_t edge[2] = {0, 0};
        if (p->w3 > 0) {
          int64_t x = (j0 + jr) % p->w3;
          for (int t = 0; t < cols; t++) {
            if (x == 0) edge[0] |= UINT64_C(1) << t;
            if (x == p->w3 - 1 && p->w3_right) edge[1] |= UINT64_C(1) << t;
            if (++x == p->w3) x = 0;
          }
        }
        for (int64_t ir = 0; ir < mc; ir += mr) {
          int rows = (int)min64(mr, mc - ir);
          const uint8_t *a = rp + (size_t)(ir / mr) * rpb;
          if (p->w3 > 0) {
            isa->tile_q8_w3(groups, a, cp + jr * kg, p->cols_koff, rows, &p->epi, i0 + ir,
                            (uint8_t *)p->c + (size_t)((i0 + ir) * p->ldc), p->ldc, segs, nseg, edge, p->w3_corr);
            continue;
          }
          if (fuse_q8) {
            /* Requantize in registers. */
            isa->tile_q8(groups, a, p->cols_base ? cp + jr * kg : cp + (size_t)(jr / nr) * cpb,
                         p->cols_base ? p->cols_koff : NULL, rows, &p->epi, i0 + ir,
                         (uint8_t *)p->c + (size_t)((i0 + ir) * p->ldc), p->ldc, segs, nseg);
            continue;
          }
          if (p->cols_base)
            isa->tile_ind(groups, a, cp + jr * kg, p->cols_koff, rows, acc);
          else
            isa->tile(groups, a, cp + (size_t)(jr / nr) * cpb, rows, w_rows, acc);
          er_qtile_out t;
          t.acc = acc;
          t.rows = rows;
          t.cols = cols;
          t.nr = nr;
          t.i0 = i0 + ir;
          t.j0 = j0 + jr;
          t.asum = !p->need_asum            ? NULL
                   : !p->epi.channel_rows   ? rasum + ir
                   : p->cols_base           ? p->cols_asum + j0 + jr
                                            : casum + jr;
          t.c = (uint8_t *)p->c + ((size_t)(t.i0 * p->ldc + t.j0)) * es;
          t.ldc = p->ldc;
          if (p->vw > 0)
            virtual_epilogue(p, &t, es);
          else
            isa->epilogue(&p->epi, &t);
        }
      }
    }
  }
}

/* ======================================================================== */
/* Splitting over workers                                                    */
/* ======================================================================== */

typedef struct run_args {
  const er_qgemm_problem *p;
  bool along_n;
  int64_t panels;
  int chunks;
  uint8_t *scratch;
  size_t slot_bytes;
  int64_t nr;                /* columns per panel */
} run_args;

static void run_chunks(void *arg, int64_t begin, int64_t end) {
  const run_args *ra = arg;
  const er_qgemm_problem *p = ra->p;
  for (int64_t c = begin; c < end; c++) {
    int64_t lo = ra->panels * c / ra->chunks, hi = ra->panels * (c + 1) / ra->chunks;
    uint8_t *scratch = ra->scratch + (size_t)c * ra->slot_bytes;
    if (lo >= hi) continue;
    if (ra->along_n)
      qgemm_part(p, 0, p->m, lo * ra->nr, min64(hi * ra->nr, p->n), scratch);
    else
      qgemm_part(p, lo * p->isa->mr, min64(hi * p->isa->mr, p->m), 0, p->n, scratch);
  }
}

void er__qgemm_run(const er_qgemm_problem *p, er_thread_pool *pool, void *scratch, int slots) {
  if (p->m <= 0 || p->n <= 0) return;
  int workers = er__pool_threads(pool);
  if (workers > slots) workers = slots;
  /* Column panels: the 3x3 tile's where it runs (chunks of whole tiles). */
  const int64_t nr = p->w3 > 0 ? p->isa->w3_nr : p->isa->nr;
  int64_t mp = (p->m + p->isa->mr - 1) / p->isa->mr, np = (p->n + nr - 1) / nr;
  int64_t macs = p->m * p->n * (p->k > 0 ? p->k : 1);
  int64_t by_work = macs / QGEMM_MIN_MACS_PER_WORKER;
  int chunks = (int)min64(workers, by_work > 1 ? by_work : 1);
  /* Split the activations' dimension when it has enough panels (each
   * worker packs its own part), else the weights' one (each worker then
   * packs the few activation blocks itself). */
  bool act_cols = p->rows_packed != NULL;
  int64_t act_panels = act_cols ? np : mp, w_panels = act_cols ? mp : np;
  bool along_act = act_panels >= chunks * 2 || act_panels >= w_panels;
  bool along_n = act_cols ? along_act : !along_act;
  int64_t panels = along_n ? np : mp;
  if (chunks > panels) chunks = (int)panels;
  run_args ra = {p, along_n, panels, chunks, scratch, er__qgemm_scratch_bytes(p), nr};
  if (chunks <= 1) {
    qgemm_part(p, 0, p->m, 0, p->n, scratch);
    return;
  }
  er__parallel_for(pool, chunks, 1, run_chunks, &ra);
}
