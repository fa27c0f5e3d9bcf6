/* qdw-avx512vbmi.c - the depthwise 8-bit convolution of qelt.h's
 * er_qdwv_args on AVX-512 VNNI + VBMI. Called only when er__cpu_features()
 * reports both (quant.c checks). */
#include <immintrin.h>
#include <string.h>

#include "kernels/qelt.h"

/* ---- plans ----------------------------------------------------------------- */

static bool plan_rows(er_qdwv_plan *p) {
  const er_qdwv_geom *g = &p->g;
  const int64_t span = (ER_QDWV_LANES - 1) * g->sw + (g->kw - 1) * g->dw + 1;
  p->nvec = (g->ow + ER_QDWV_LANES - 1) / ER_QDWV_LANES;
  if (span > 64 || p->nvec > ER_QDWV_MAX_VECS) return false;
  for (int64_t v = 0; v < p->nvec; v++) {
    p->start[v] = v * ER_QDWV_LANES * g->sw - g->pl;
    uint64_t m = 0;
    for (int64_t b = 0; b < span; b++)
      if (p->start[v] + b >= 0 && p->start[v] + b < g->w) m |= (uint64_t)1 << b;
    p->in_row[v] = m;
  }
  for (int gi = 0; gi < p->groups; gi++)
    for (int l = 0; l < ER_QDWV_LANES; l++)
      for (int k = 0; k < 4; k++) {
        int64_t tap = 4 * gi + k;
        p->idx[gi][4 * l + k] = (uint8_t)(tap < g->kw ? l * g->sw + tap * g->dw : 0);
      }
  p->window = false;
  return true;
}

static bool plan_window(er_qdwv_plan *p) {
  const er_qdwv_geom *g = &p->g;
  const int64_t ohw = g->oh * g->ow, lanes = ER_QDWV_LANES;
  p->nvec = (ohw + lanes - 1) / lanes;
  if (p->nvec > ER_QDWV_MAX_VECS || g->kh * p->groups > ER_QDWV_WINDOW_TAPS) return false;
  /* Every vector's bytes first: one table (63 bytes and a padding byte)
   * for all, or two (127 and one). */
  int64_t lens[ER_QDWV_MAX_VECS];
  int64_t most = 0;
  /* A plane of at most 63 bytes is one table for all (7x7 maps: one
   * masked load per channel instead of one per vector). */
  p->whole = g->h * g->w <= 63;
  for (int64_t v = 0; v < p->nvec; v++) {
    int64_t p0 = v * lanes, p1 = (v + 1) * lanes < ohw ? (v + 1) * lanes : ohw;
    int64_t r_lo = (p0 / g->ow) * g->sh - g->pt, r_hi = ((p1 - 1) / g->ow) * g->sh - g->pt + (g->kh - 1) * g->dh;
    if (r_lo < 0 || p->whole) r_lo = 0;
    if (p->whole) r_hi = g->h - 1;
    if (r_hi > g->h - 1) r_hi = g->h - 1;
    p->base[v] = r_lo <= r_hi ? r_lo * g->w : 0;
    lens[v] = r_lo <= r_hi ? (r_hi + 1) * g->w - p->base[v] : 0;
    if (lens[v] > most) most = lens[v];
  }
  if (most > 127) return false;
  p->two = most > 63;
  const uint8_t pad_at = p->two ? 127 : 63;
  for (int64_t v = 0; v < p->nvec; v++) {
    int64_t len = lens[v];
    p->m_lo[v] = len >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << len) - 1;
    p->m_hi[v] = len <= 64 ? 0 : len >= 128 ? ~(uint64_t)0 : ((uint64_t)1 << (len - 64)) - 1;
    for (int64_t ky = 0; ky < g->kh; ky++)
      for (int gi = 0; gi < p->groups; gi++) {
        uint8_t *idx = p->widx[(v * g->kh + ky) * p->groups + gi];
        for (int64_t l = 0; l < lanes; l++)
          for (int k = 0; k < 4; k++) {
            int64_t pix = v * lanes + l, tap = 4 * gi + k;
            uint8_t at = pad_at;
            if (pix < ohw && tap < g->kw) {
              int64_t iy = (pix / g->ow) * g->sh - g->pt + ky * g->dh;
              int64_t ix = (pix % g->ow) * g->sw - g->pl + tap * g->dw;
              if (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w) {
                int64_t off = iy * g->w + ix - p->base[v];
                if (off < 0 || off >= len) return false;
                at = (uint8_t)off;
              }
            }
            idx[4 * l + k] = at;
          }
      }
  }
  p->window = true;
  return true;
}

bool er__qdwv_plan_build(er_qdwv_plan *p, const er_qdwv_geom *g, int groups, uint8_t (*widx)[64]) {
  p->g = *g;
  p->groups = groups;
  p->widx = widx;
  if (groups < 1 || groups > ER_QDWV_MAX_GROUPS || g->kw > 4 * groups) return false;
  return (widx && plan_window(p)) || plan_rows(p);
}

/* ---- the kernel -------------------------------------------------------------- */

typedef struct epi {
  __m512i corr, zp;
  __m512 mult, off, flo, fhi;
} epi;

/* The epilogue constants every channel shares. */
static inline epi epi_shared(const er_qdwv_args *a) {
  epi e;
  e.corr = _mm512_setzero_si512();
  e.zp = _mm512_set1_epi32(a->yz);
  e.mult = e.off = _mm512_setzero_ps();
  e.flo = _mm512_set1_ps((float)(a->lo - a->yz));
  e.fhi = _mm512_set1_ps((float)(a->hi - a->yz));
  return e;
}

/* Channel c's correction, multiplier and offset into e. */
static inline void epi_channel(epi *e, const er_qdwv_args *a, int64_t c) {
  e->corr = _mm512_set1_epi32(a->corr[c]);
  e->mult = _mm512_set1_ps(a->mult[c]);
  e->off = _mm512_set1_ps(a->off[c]);
}

/* Requantizes acc (the correction already in), then n bytes. */
static inline void put_sum(const epi *e, __m512i acc, uint8_t *y, int64_t n) {
  __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), e->mult, e->off);
  /* The clamp on f against lo - zp and hi - zp, as qgemm-avx512.c's
   * requant: the same bytes, two instructions fewer. */
  f = _mm512_min_ps(_mm512_max_ps(f, e->flo), e->fhi);
  __m512i q = _mm512_add_epi32(_mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), e->zp);
  if (n == ER_QDWV_LANES) _mm_storeu_si128((__m128i *)y, _mm512_cvtepi32_epi8(q));
  else _mm_mask_storeu_epi8(y, (__mmask16)((1u << n) - 1u), _mm512_cvtepi32_epi8(q));
}

/* The QConv epilogue (qgemm-avx512.c's epilogue_q8_rows), then n bytes. */
static inline void put(const epi *e, __m512i acc, uint8_t *y, int64_t n) {
  put_sum(e, _mm512_add_epi32(acc, e->corr), y, n);
}

/* Input bytes at `at` under mask m, padding elsewhere, flipped. Integer
 * address arithmetic: a row's first vector may start before the row (its
 * bytes there are masked off and never read). */
static inline __m512i load(const uint8_t *base, int64_t at, uint64_t m, __m512i padv, __m512i flip, bool flipped) {
  __m512i r = _mm512_mask_loadu_epi8(padv, (__mmask64)m, (const void *)((uintptr_t)base + (uintptr_t)at));
  return flipped ? _mm512_xor_si512(r, flip) : r;
}

/* One channel's arguments. */
typedef struct chan {
  const uint8_t *x;
  const int32_t *wq;
  uint8_t *y;
} chan;

/* Vectors of one channel computed together in run_window: their chains
 * of vpdpbusd and epilogues are independent, and one vector at a time left
 * the core waiting on each chain's latency (a 7x7 plane is four vectors). */
#define QDW_WINDOW_BLOCK 4

static inline void run_window(const er_qdwv_args *a, const chan *ch, const epi *e, bool flipped) {
  const er_qdwv_plan *p = a->plan;
  const int64_t kg = p->g.kh * p->groups, ohw = p->g.oh * p->g.ow;
  const __m512i flip = _mm512_set1_epi8((char)a->flip), padv = _mm512_set1_epi8((char)a->pad);
  __m512i w[ER_QDWV_WINDOW_TAPS];
  for (int64_t t = 0; t < kg; t++) w[t] = _mm512_set1_epi32(ch->wq[t]);
  const __m512i padf = flipped ? _mm512_xor_si512(padv, flip) : padv;
  const __m512i plane = p->whole && p->m_lo[0] ? load(ch->x, 0, p->m_lo[0], padv, flip, flipped) : padf;
  for (int64_t v0 = 0; v0 < p->nvec; v0 += QDW_WINDOW_BLOCK) {
    const int nb = p->nvec - v0 < QDW_WINDOW_BLOCK ? (int)(p->nvec - v0) : QDW_WINDOW_BLOCK;
    __m512i lo[QDW_WINDOW_BLOCK], hi[QDW_WINDOW_BLOCK], acc[QDW_WINDOW_BLOCK];
#pragma GCC unroll 4
    for (int j = 0; j < QDW_WINDOW_BLOCK; j++) {
      lo[j] = hi[j] = padf;
      acc[j] = _mm512_setzero_si512();
      if (j >= nb) continue;
      const int64_t v = v0 + j;
      lo[j] = p->whole ? plane : p->m_lo[v] ? load(ch->x, p->base[v], p->m_lo[v], padv, flip, flipped) : padf;
      hi[j] = p->two && p->m_hi[v] ? load(ch->x, p->base[v] + 64, p->m_hi[v], padv, flip, flipped) : padf;
    }
    for (int64_t t = 0; t < kg; t++) {
#pragma GCC unroll 4
      for (int j = 0; j < QDW_WINDOW_BLOCK; j++) {
        if (j >= nb) break;
        const __m512i ix = _mm512_loadu_si512((const void *)p->widx[(v0 + j) * kg + t]);
        const __m512i bytes = p->two ? _mm512_permutex2var_epi8(lo[j], ix, hi[j]) : _mm512_permutexvar_epi8(ix, lo[j]);
        acc[j] = _mm512_dpbusd_epi32(acc[j], bytes, w[t]);
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < QDW_WINDOW_BLOCK; j++) {
      if (j >= nb) break;
      const int64_t v = v0 + j;
      int64_t n = ohw - v * ER_QDWV_LANES < ER_QDWV_LANES ? ohw - v * ER_QDWV_LANES : ER_QDWV_LANES;
      put(e, acc[j], ch->y + v * ER_QDWV_LANES, n);
    }
  }
}

/* The window way for three tables of taps (3x3 kernels: kh 3, one group)
 * over planes of NV <= 4 vectors, all channels in one loop: the 3 NV
 * index vectors are loaded once, the sums start from the correction, and
 * the shape's branches are compile-time (7x7 maps took about 100 cycles a
 * channel through run_window, most in its per-channel setup and
 * branches). */
static inline __attribute__((always_inline)) void run_window3(const er_qdwv_args *a, int64_t channels, const int NV,
                                                              const bool two, const bool whole, const bool flipped) {
  const er_qdwv_plan *p = a->plan;
  const int64_t hw = p->g.h * p->g.w, ohw = p->g.oh * p->g.ow;
  const __m512i flip = _mm512_set1_epi8((char)a->flip), padv = _mm512_set1_epi8((char)a->pad);
  const __m512i padf = flipped ? _mm512_xor_si512(padv, flip) : padv;
  __m512i ix[4][3];
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++)
#pragma GCC unroll 3
    for (int t = 0; t < 3; t++) ix[v][t] = _mm512_loadu_si512((const void *)p->widx[v * 3 + t]);
  const int64_t nlast = ohw - (NV - 1) * ER_QDWV_LANES;
  epi e = epi_shared(a);
  for (int64_t c = 0; c < channels; c++) {
    const uint8_t *x = a->x + c * hw;
    const __m512i w0 = _mm512_set1_epi32(a->wq[3 * c]), w1 = _mm512_set1_epi32(a->wq[3 * c + 1]),
                  w2 = _mm512_set1_epi32(a->wq[3 * c + 2]);
    epi_channel(&e, a, c);
    const __m512i corr = e.corr;
    __m512i lo[4], hi[4], acc[4];
    const __m512i plane = whole ? load(x, 0, p->m_lo[0], padv, flip, flipped) : padf;
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      lo[v] = whole ? plane : load(x, p->base[v], p->m_lo[v], padv, flip, flipped);
      hi[v] = two ? load(x, p->base[v] + 64, p->m_hi[v], padv, flip, flipped) : padf;
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
#define QDW_BYTES(T) (two ? _mm512_permutex2var_epi8(lo[v], ix[v][T], hi[v]) : _mm512_permutexvar_epi8(ix[v][T], lo[v]))
      acc[v] = _mm512_dpbusd_epi32(corr, QDW_BYTES(0), w0);
      acc[v] = _mm512_dpbusd_epi32(acc[v], QDW_BYTES(1), w1);
      acc[v] = _mm512_dpbusd_epi32(acc[v], QDW_BYTES(2), w2);
#undef QDW_BYTES
    }
    uint8_t *y = a->y + c * ohw;
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) put_sum(&e, acc[v], y + v * ER_QDWV_LANES, v == NV - 1 ? nlast : ER_QDWV_LANES);
  }
}

/* The same for planes of more vectors, four at a time with their index
 * vectors read from the plan (L1), the last one to three vectors after
 * (14x14 and 28x28 maps: 13 and 49 vectors). */
static inline __attribute__((always_inline)) void window3_block(const er_qdwv_plan *p, const uint8_t *x, uint8_t *y,
                                                                int64_t v0, const int NB, int64_t nlast,
                                                                __m512i w0, __m512i w1, __m512i w2, __m512i corr,
                                                                const epi *e, __m512i padv, __m512i flip,
                                                                const bool two, const bool flipped) {
  const __m512i padf = flipped ? _mm512_xor_si512(padv, flip) : padv;
  __m512i lo[4], hi[4], acc[4];
#pragma GCC unroll 4
  for (int j = 0; j < NB; j++) {
    lo[j] = load(x, p->base[v0 + j], p->m_lo[v0 + j], padv, flip, flipped);
    hi[j] = two ? load(x, p->base[v0 + j] + 64, p->m_hi[v0 + j], padv, flip, flipped) : padf;
  }
#pragma GCC unroll 4
  for (int j = 0; j < NB; j++) {
    const uint8_t(*ix)[64] = p->widx + (v0 + j) * 3;
#define QDW_BYTES(T)                                                                                     \
  (two ? _mm512_permutex2var_epi8(lo[j], _mm512_loadu_si512((const void *)ix[T]), hi[j])                 \
       : _mm512_permutexvar_epi8(_mm512_loadu_si512((const void *)ix[T]), lo[j]))
    acc[j] = _mm512_dpbusd_epi32(corr, QDW_BYTES(0), w0);
    acc[j] = _mm512_dpbusd_epi32(acc[j], QDW_BYTES(1), w1);
    acc[j] = _mm512_dpbusd_epi32(acc[j], QDW_BYTES(2), w2);
#undef QDW_BYTES
  }
#pragma GCC unroll 4
  for (int j = 0; j < NB; j++)
    put_sum(e, acc[j], y + (v0 + j) * ER_QDWV_LANES, v0 + j == p->nvec - 1 ? nlast : ER_QDWV_LANES);
}

static inline __attribute__((always_inline)) void run_window3_many(const er_qdwv_args *a, int64_t channels,
                                                                   const bool two, const bool flipped) {
  const er_qdwv_plan *p = a->plan;
  const int64_t hw = p->g.h * p->g.w, ohw = p->g.oh * p->g.ow, full = p->nvec / 4 * 4;
  const int64_t nlast = ohw - (p->nvec - 1) * ER_QDWV_LANES;
  const __m512i flip = _mm512_set1_epi8((char)a->flip), padv = _mm512_set1_epi8((char)a->pad);
  epi e = epi_shared(a);
  for (int64_t c = 0; c < channels; c++) {
    const uint8_t *x = a->x + c * hw;
    uint8_t *y = a->y + c * ohw;
    const __m512i w0 = _mm512_set1_epi32(a->wq[3 * c]), w1 = _mm512_set1_epi32(a->wq[3 * c + 1]),
                  w2 = _mm512_set1_epi32(a->wq[3 * c + 2]);
    epi_channel(&e, a, c);
    const __m512i corr = e.corr;
    for (int64_t v0 = 0; v0 < full; v0 += 4)
      window3_block(p, x, y, v0, 4, nlast, w0, w1, w2, corr, &e, padv, flip, two, flipped);
    switch (p->nvec - full) {
      case 1: window3_block(p, x, y, full, 1, nlast, w0, w1, w2, corr, &e, padv, flip, two, flipped); break;
      case 2: window3_block(p, x, y, full, 2, nlast, w0, w1, w2, corr, &e, padv, flip, two, flipped); break;
      case 3: window3_block(p, x, y, full, 3, nlast, w0, w1, w2, corr, &e, padv, flip, two, flipped); break;
      default: break;
    }
  }
}

static void window3_many(const er_qdwv_args *a, int64_t channels, bool two, bool flipped) {
  if (two) {
    if (flipped) run_window3_many(a, channels, true, true);
    else run_window3_many(a, channels, true, false);
  } else if (flipped) {
    run_window3_many(a, channels, false, true);
  } else {
    run_window3_many(a, channels, false, false);
  }
}

#define QDW_W3(NV)                                                                                        \
  static void window3_##NV(const er_qdwv_args *a, int64_t channels, bool two, bool whole, bool flipped) { \
    if (whole) {                                                                                          \
      if (flipped) run_window3(a, channels, NV, false, true, true);                                      \
      else run_window3(a, channels, NV, false, true, false);                                             \
    } else if (two) {                                                                                     \
      if (flipped) run_window3(a, channels, NV, true, false, true);                                      \
      else run_window3(a, channels, NV, true, false, false);                                             \
    } else if (flipped) {                                                                                 \
      run_window3(a, channels, NV, false, false, true);                                                  \
    } else {                                                                                              \
      run_window3(a, channels, NV, false, false, false);                                                 \
    }                                                                                                     \
  }
QDW_W3(1)
QDW_W3(2)
QDW_W3(3)
QDW_W3(4)

static inline void run_rows(const er_qdwv_args *a, const chan *ch, const epi *e, bool flipped) {
  const er_qdwv_plan *p = a->plan;
  const er_qdwv_geom *g = &p->g;
  const __m512i flip = _mm512_set1_epi8((char)a->flip), padv = _mm512_set1_epi8((char)a->pad);
  const __m512i padf = flipped ? _mm512_xor_si512(padv, flip) : padv;
  __m512i idx[ER_QDWV_MAX_GROUPS];
  for (int gi = 0; gi < p->groups; gi++) idx[gi] = _mm512_loadu_si512((const void *)p->idx[gi]);
  const bool k3 = g->kh == 3 && p->groups == 1;
  const __m512i w0 = _mm512_set1_epi32(ch->wq[0]);
  const __m512i w1 = k3 ? _mm512_set1_epi32(ch->wq[1]) : w0, w2 = k3 ? _mm512_set1_epi32(ch->wq[2]) : w0;
  for (int64_t oy = 0; oy < g->oh; oy++) {
    const int64_t iy0 = oy * g->sh - g->pt;
    uint8_t *y = ch->y + oy * g->ow;
    if (k3 && iy0 >= 0 && iy0 + 2 * g->dh < g->h) {
      /* Three input rows, all inside the plane. */
      const uint8_t *r0 = ch->x + iy0 * g->w, *r1 = r0 + g->dh * g->w, *r2 = r1 + g->dh * g->w;
      for (int64_t v = 0; v < p->nvec; v++) {
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                          _mm512_permutexvar_epi8(idx[0], load(r0, p->start[v], p->in_row[v], padv,
                                                                               flip, flipped)),
                                          w0);
        acc = _mm512_dpbusd_epi32(
            acc, _mm512_permutexvar_epi8(idx[0], load(r1, p->start[v], p->in_row[v], padv, flip, flipped)), w1);
        acc = _mm512_dpbusd_epi32(
            acc, _mm512_permutexvar_epi8(idx[0], load(r2, p->start[v], p->in_row[v], padv, flip, flipped)), w2);
        int64_t n = g->ow - v * ER_QDWV_LANES < ER_QDWV_LANES ? g->ow - v * ER_QDWV_LANES : ER_QDWV_LANES;
        put(e, acc, y + v * ER_QDWV_LANES, n);
      }
      continue;
    }
    for (int64_t v = 0; v < p->nvec; v++) {
      __m512i acc = _mm512_setzero_si512();
      for (int64_t ky = 0; ky < g->kh; ky++) {
        int64_t iy = iy0 + ky * g->dh;
        __m512i raw = iy >= 0 && iy < g->h ? load(ch->x + iy * g->w, p->start[v], p->in_row[v], padv, flip, flipped)
                                           : padf;
        for (int gi = 0; gi < p->groups; gi++)
          acc = _mm512_dpbusd_epi32(acc, _mm512_permutexvar_epi8(idx[gi], raw),
                                    _mm512_set1_epi32(ch->wq[ky * p->groups + gi]));
      }
      int64_t n = g->ow - v * ER_QDWV_LANES < ER_QDWV_LANES ? g->ow - v * ER_QDWV_LANES : ER_QDWV_LANES;
      put(e, acc, y + v * ER_QDWV_LANES, n);
    }
  }
}

void er__qdw_channels_avx512vbmi(const er_qdwv_args *a, int64_t channels) {
  const er_qdwv_plan *p = a->plan;
  if (channels <= 0) return;
  if (p->window && p->g.kh * p->groups == 3 && p->nvec >= 1 && p->nvec <= 4 && (!p->whole || p->m_lo[0])) {
    static void (*const fns[])(const er_qdwv_args *, int64_t, bool, bool, bool) = {window3_1, window3_2, window3_3,
                                                                                    window3_4};
    fns[p->nvec - 1](a, channels, p->two, p->whole, a->flip != 0);
    return;
  }
  if (p->window && p->g.kh * p->groups == 3 && !p->whole) {
    window3_many(a, channels, p->two, a->flip != 0);
    return;
  }
  const int64_t hw = p->g.h * p->g.w, ohw = p->g.oh * p->g.ow, kg = p->g.kh * p->groups;
  epi e = epi_shared(a);
  for (int64_t c = 0; c < channels; c++) {
    const chan ch = {a->x + c * hw, a->wq + c * kg, a->y + c * ohw};
    epi_channel(&e, a, c);
    /* Two copies of each loop: with and without the int8 flip. */
    if (p->window) {
      if (a->flip) run_window(a, &ch, &e, true);
      else run_window(a, &ch, &e, false);
    } else if (a->flip) {
      run_rows(a, &ch, &e, true);
    } else {
      run_rows(a, &ch, &e, false);
    }
  }
}
