/* qconv.c - the "quant" group's integer convolutions (QConv, QLinearConv,
 * ConvInteger over NCHW): one integer GEMM per image and group on packed
 * patches, the 3x3 stride-1 window path and small-map tiles (see quant.c). */
#include "kernels/quant-impl.h"

/* ======================================================================== */
/* Convolution                                                               */
/* ======================================================================== */

/* Whether any tap reads plane phase (py, px) (a 1x1 window at stride 2
 * reads one of the four). */
static bool phase_used(const er_window *g, int64_t py, int64_t px) {
  bool row = false, col = false;
  for (int64_t ky = 0; ky < g->kh && !row; ky++) row = ky * g->dh % g->sh == py;
  for (int64_t kx = 0; kx < g->kw && !col; kx++) col = kx * g->dw % g->sw == px;
  return row && col;
}

/* dst[i] = src[i * stride] for i < n; bytes up to `end` (one past the last
 * byte the caller's buffer holds) may be read, the others are not used. */
static void gather_stride(const uint8_t *src, int64_t n, int64_t stride, uint8_t *dst, const uint8_t *end) {
  int64_t i = 0;
  ER_UNUSED(end); /* (read only by the x86 vector path) */
#if defined(__x86_64__)
  if (stride == 2) {
    /* Even bytes of 32 by masking 16-bit lanes and packing (SSE2, the
     * x86-64 baseline); the 32 bytes read must lie in the buffer. */
    const __m128i lowb = _mm_set1_epi16(0xff);
    const int64_t avail = end - src;
    for (; i + 16 <= n && 2 * i + 32 <= avail; i += 16) {
      __m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *)(src + 2 * i)), lowb);
      __m128i b = _mm_and_si128(_mm_loadu_si128((const __m128i *)(src + 2 * i + 16)), lowb);
      _mm_storeu_si128((__m128i *)(dst + i), _mm_packus_epi16(a, b));
    }
    if (i < n && n - i < 16) {
      /* The last m < 16: read in place while the buffer lasts, else from
       * a padded copy of their 2 m - 1 bytes; written byte by byte. */
      int64_t m = n - i;
      uint8_t in[32] = {0}, out[16];
      const uint8_t *from = src + 2 * i;
      if (2 * i + 32 > avail) {
        memcpy(in, from, (size_t)(2 * m - 1));
        from = in;
      }
      __m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *)from), lowb);
      __m128i b = _mm_and_si128(_mm_loadu_si128((const __m128i *)(from + 16)), lowb);
      _mm_storeu_si128((__m128i *)out, _mm_packus_epi16(a, b));
      for (int64_t t = 0; t < m; t++) dst[i + t] = out[t];
      return;
    }
  }
#endif
  for (; i < n; i++) dst[i] = src[i * stride];
}

/* Writes the planes of x ([Cg, H, W]) into dst. */
static void build_planes(const er_window *g, const uint8_t *x, uint8_t pad, uint8_t *dst) {
  conv_planes pl;
  planes_geometry(g, &pl);
  int64_t cg = g->c / g->group;
  for (int64_t py = 0; py < g->sh; py++)
    for (int64_t px = 0; px < g->sw; px++)
      for (int64_t c = 0; c < cg && phase_used(g, py, px); c++) {
        uint8_t *d = dst + ((py * g->sw + px) * cg + c) * pl.plane;
        const uint8_t *xc = x + c * g->h * g->w;
        /* Plane columns xx read input column xx * sw + px - pl. */
        int64_t lo = 0, hi = pl.ws;
        while (lo < pl.ws && lo * g->sw + px - g->pl < 0) lo++;
        while (hi > lo && (hi - 1) * g->sw + px - g->pl >= g->w) hi--;
        for (int64_t yy = 0; yy < pl.hs; yy++, d += pl.ws) {
          int64_t r = yy * g->sh + py - g->pt;
          if (r < 0 || r >= g->h) {
            memset(d, pad, (size_t)pl.ws);
            continue;
          }
          const uint8_t *row = xc + r * g->w;
          memset(d, pad, (size_t)lo);
          if (g->sw == 1) memcpy(d + lo, row + lo + px - g->pl, (size_t)(hi - lo));
          else if (hi > lo) gather_stride(row + lo * g->sw + px - g->pl, hi - lo, g->sw, d + lo, x + cg * g->h * g->w);
          memset(d + hi, pad, (size_t)(pl.ws - hi));
        }
      }
}

static void conv_pack(const void *vctx, int64_t j0, int64_t cols, uint8_t *dst, int32_t *sums) {
  const conv_pack_ctx *cc = vctx;
  const qg_state *s = cc->s;
  const er_window *g = cc->g;
  const er_qgemm_isa *isa = s->isa;
  const int nr = isa->nr, kg = isa->kg;
  const int64_t K = s->k, groups = er__qgemm_kgroups(isa, K), khw = g->kh * g->kw, cg = g->c / g->group;
  const size_t cpb = er__qgemm_col_panel_bytes(isa, K);
  /* The start of each patch row's run, for the k group at hand. */
  for (int64_t q = 0; q * nr < cols; q++) {
    int32_t *ps = sums ? sums + q * nr : NULL;
    if (ps) memset(ps, 0, (size_t)nr * sizeof *ps);
  }
  for (int64_t g4 = 0; g4 < groups; g4++) {
    const uint8_t *base[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < kg; i++) {
      int64_t kk = g4 * kg + i;
      if (kk >= K) break;
      int64_t c = kk / khw, r = kk % khw, ky = r / g->kw, kx = r % g->kw;
      if (cc->pl.direct) {
        base[i] = cc->pl.base + c * cc->pl.plane + ky * g->dh * cc->pl.ws + kx * g->dw;
      } else {
        int64_t py = ky * g->dh % g->sh, qy = ky * g->dh / g->sh, px = kx * g->dw % g->sw, qx = kx * g->dw / g->sw;
        base[i] = cc->pl.base + ((py * g->sw + px) * cg + c) * cc->pl.plane + qy * cc->pl.ws + qx;
      }
    }
    const uint8_t *rows[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < kg; i++)
      if (base[i]) rows[i] = base[i] + j0;
    er__qgemm_interleave_panels(kg, nr, rows, cols, s->x_flip, dst + g4 * nr * kg, cpb, sums);
  }
}

bool er__q8_conv_geom(const er_kctx *ctx, const qg_state *s, const er_tensor *x, const er_tensor *y, er_window *g) {
  er_tensor w;
  er__tensor_set(&w, ER_DTYPE_INT8, s->wrank, s->wdims);
  if (!er__window_get(ctx, x, &w, y, g)) return false;
  if (!(g->group == s->group && g->m == s->channels && (g->c / g->group) * g->kh * g->kw == s->k &&
        g->c % g->group == 0 && g->oh > 0 && g->ow > 0))
    return false;
  /* Every tap of every output must fall inside the padded input (the
   * reference ignores taps beyond it; the planes hold no such taps). */
  return (g->oh - 1) * g->sh + (g->kh - 1) * g->dh < g->h + g->pt + g->pb &&
         (g->ow - 1) * g->sw + (g->kw - 1) * g->dw < g->w + g->pl + g->pr;
}

/* The GEMM of image n, group gi; planes at `planes` (unless direct). */
void er__q8_conv_problem(const qg_state *s, const er_window *g, int64_t gi, conv_pack_ctx *cc, const uint8_t *x,
                         const uint8_t *planes, void *y, int64_t n, er_qgemm_problem *p) {
  int64_t cg = g->c / g->group, mg = g->m / g->group, ohw = g->oh * g->ow;
  size_t es = s->epi.kind == ER_QEPI_Q8 || s->epi.kind == ER_QEPI_QLINEAR ? 1 : 4;
  memset(p, 0, sizeof *p);
  cc->s = s;
  cc->g = g;
  planes_geometry(g, &cc->pl);
  cc->pl.base = cc->pl.direct ? (x ? x + (n * g->c + gi * cg) * g->h * g->w : NULL) : planes;
  p->isa = s->isa;
  p->m = mg;
  p->k = s->k;
  if (cc->pl.ws == g->ow) {
    p->n = ohw;
  } else {
    p->n = (g->oh - 1) * cc->pl.ws + g->ow;
    p->vw = cc->pl.ws;
    p->ow = g->ow;
  }
  p->rows_packed = (const uint8_t *)s->packed + (size_t)gi * s->gstride;
  p->pack_cols = conv_pack;
  p->cols_ctx = cc;
  p->need_asum = s->wzp != NULL;
  p->epi = s->epi;
  p->epi.corr = s->corr + gi * mg;
  p->epi.wzp = s->wzp ? s->wzp + gi * mg : NULL;
  if (s->mult) p->epi.mult = s->mult + gi * mg;
  if (s->off) p->epi.off = s->off + gi * mg;
  if (s->mult_d) p->epi.mult_d = s->mult_d + gi * mg;
  p->c = y ? (uint8_t *)y + (size_t)((n * g->m + gi * mg) * ohw) * es : NULL;
  p->ldc = ohw;
}

/* ---- in place: grouped planes ---------------------------------------------
 * The input of one image and group, padded and split by stride phase as
 * above, with KG consecutive channels interleaved per pixel: plane (phase,
 * q) holds pixels of channels q KG .. q KG + KG - 1, KG bytes each (values
 * shifted to the unsigned domain; pads hold the zero point, channels past
 * Cg hold 0). Then k group (q, tap) of output pixel v is KG contiguous
 * bytes at offset(q, tap) + v KG, and so is every run of pixels: the GEMM
 * reads its columns straight from the planes (qgemm's tile_ind), and no
 * patch matrix or packed block is ever written. */
static size_t grouped_plane_bytes(const qg_state *s, const er_window *g) {
  conv_planes pl;
  planes_geometry(g, &pl);
  int64_t hs = pl.direct ? g->h : pl.hs, ws = pl.direct ? g->w : pl.ws;
  return (size_t)(hs * ws * s->isa->kg);
}

static size_t grouped_bytes(const qg_state *s, const er_window *g) {
  /* Slack: the last tile reads up to NR (w3_nr) columns past the last one. */
  const int nr = s->isa->w3_nr > s->isa->nr ? s->isa->w3_nr : s->isa->nr;
  return (size_t)(g->sh * g->sw * s->cq) * grouped_plane_bytes(s, g) + (size_t)((nr + 64) * s->isa->kg) + 64;
}

grouped_layout er__q8_grouped_scratch(const qg_state *s, const er_window *g) {
  grouped_layout L;
  conv_planes pl;
  planes_geometry(g, &pl);
  size_t ws = (size_t)(pl.direct ? g->w : pl.ws), kg = (size_t)s->isa->kg;
  size_t pix = (size_t)((pl.direct ? g->h : pl.hs) * (pl.direct ? g->w : pl.ws));
  /* 64 bytes before the planes: in w3_mode the first left tap loads the 4
   * bytes before the first plane (into a lane whose product is masked
   * off). */
  L.planes = 64;
  L.koff = L.planes + (grouped_bytes(s, g) + 63) / 64 * 64;
  L.padrow = L.koff + ((size_t)(s->cq * g->kh * g->kw) * sizeof(int64_t) + 63) / 64 * 64;
  L.gather = L.padrow + (ws * kg + 63) / 64 * 64;
  L.chsum = L.gather + (ws * kg + 63) / 64 * 64;
  L.asum = L.chsum;
  if (s->wzp) L.asum += ((size_t)(g->sh * g->sw) * pix * sizeof(int32_t) + 63) / 64 * 64;
  L.total = L.asum + (s->wzp ? (pix * sizeof(int32_t) + 63) / 64 * 64 : 0);
  return L;
}

/* One row of a grouped plane with KG = 4, stride sw 1 or 2, straight
 * from the input: column i of dst is bytes rows[t][i * sw] for t < 4 (a
 * NULL row is zeros), XORed with flip, for i < n, 16 columns at a time.
 * Reads up to 32 bytes past each row's last byte used and writes up to 15
 * columns past n; false (nothing written) where a read would pass `end`. */
static bool grouped_row4(const uint8_t *const *rows, int64_t n, int64_t sw, uint8_t flip, uint8_t *dst,
                         const uint8_t *end) {
#if defined(__x86_64__)
  if (n <= 0) return true;
  const int64_t span = sw * ((n + 15) / 16 * 16) + 16;
  for (int t = 0; t < 4; t++)
    if (rows[t] && rows[t] + span > end) return false;
  /* The four rows in registers (an array of vectors indexed in a loop
   * stayed on the stack: a store and a forwarded reload per vector); a
   * NULL row reads row 0 and is masked to zeros. */
  const __m128i f = _mm_set1_epi8((char)flip), lowb = _mm_set1_epi16(0xff), ones = _mm_set1_epi8(-1);
  const uint8_t *r0 = rows[0] ? rows[0] : rows[1] ? rows[1] : rows[2] ? rows[2] : rows[3];
  if (!r0) {
    for (int64_t i = 0; i < n; i += 16, dst += 64) memset(dst, 0, 64);
    return true;
  }
  const uint8_t *r1 = rows[1] ? rows[1] : r0, *r2 = rows[2] ? rows[2] : r0, *r3 = rows[3] ? rows[3] : r0;
  const __m128i m0 = rows[0] ? ones : _mm_setzero_si128(), m1 = rows[1] ? ones : _mm_setzero_si128(),
                m2 = rows[2] ? ones : _mm_setzero_si128(), m3 = rows[3] ? ones : _mm_setzero_si128();
#define ROW1(P, M) _mm_and_si128(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(P)), f), M)
#define ROW2(P, M)                                                                                           \
  _mm_and_si128(_mm_xor_si128(_mm_packus_epi16(_mm_and_si128(_mm_loadu_si128((const __m128i *)(P)), lowb),   \
                                               _mm_and_si128(_mm_loadu_si128((const __m128i *)(P) + 1), lowb)), \
                              f),                                                                            \
                M)
  if (sw == 1) {
    for (int64_t i = 0; i < n; i += 16, dst += 64)
      er__store_interleaved4(dst, ROW1(r0 + i, m0), ROW1(r1 + i, m1), ROW1(r2 + i, m2), ROW1(r3 + i, m3));
  } else {
    for (int64_t i = 0; i < n; i += 16, dst += 64)
      er__store_interleaved4(dst, ROW2(r0 + 2 * i, m0), ROW2(r1 + 2 * i, m1), ROW2(r2 + 2 * i, m2),
                             ROW2(r3 + 2 * i, m3));
  }
#undef ROW1
#undef ROW2
  return true;
#else
  ER_UNUSED(rows);
  ER_UNUSED(n);
  ER_UNUSED(sw);
  ER_UNUSED(flip);
  ER_UNUSED(dst);
  ER_UNUSED(end);
  return false;
#endif
}

/* Stride 1 without padding columns (w3_mode): a channel group's rows
 * follow each other in the plane as in the input, so the whole image
 * interleaves in one pass (per row, a 28-pixel row cost a call and 32
 * pixels); then the padding rows (padrow: one, for these groups' lanes),
 * over what the pass wrote past the image. (A group whose vector reads
 * would leave the input takes the plain interleave.) Groups [q0, q1). */
static void w3_planes(const qg_state *s, const er_window *g, const uint8_t *x, uint8_t *dst, const uint8_t *padrow,
                      int64_t q0, int64_t q1) {
  const int kg = s->isa->kg;
  const int64_t cg = g->c / g->group, ws = g->w, hs = g->h + g->pt + g->pb;
  const size_t pb = grouped_plane_bytes(s, g), row = (size_t)(ws * kg);
  for (int64_t q = q0; q < q1; q++) {
    const uint8_t *rows[4] = {NULL, NULL, NULL, NULL};
    for (int t = 0; t < kg && q * kg + t < cg; t++) rows[t] = x + (q * kg + t) * g->h * g->w;
    uint8_t *d = dst + q * pb, *img = d + (size_t)g->pt * row;
    if (!grouped_row4(rows, g->h * g->w, 1, s->x_flip, img, x + cg * g->h * g->w))
      er__qgemm_interleave_panels(kg, 16, rows, g->h * g->w, s->x_flip, img, (size_t)(16 * kg), NULL);
    for (int64_t yy = 0; yy < g->pt; yy++) memcpy(d + (size_t)yy * row, padrow, row);
    for (int64_t yy = g->pt + g->h; yy < hs; yy++) memcpy(d + (size_t)yy * row, padrow, row);
  }
}

/* Planes of at least this many bytes are built by all workers (ResNet-18's
 * 28x28x128: 107 KB; the split costs a few microseconds). */
#define W3_PLANES_SPLIT_BYTES (64 * 1024)

typedef struct w3_planes_job {
  const qg_state *s;
  const er_window *g;
  const uint8_t *x;
  uint8_t *dst;
  const uint8_t *padrow;
  int64_t quads;
  int chunks;
} w3_planes_job;

static void w3_planes_chunk(void *arg, int64_t begin, int64_t end) {
  const w3_planes_job *j = arg;
  w3_planes(j->s, j->g, j->x, j->dst, j->padrow, j->quads * begin / j->chunks, j->quads * end / j->chunks);
}

static void build_grouped(const qg_state *s, const er_window *g, const uint8_t *x, uint8_t *scratch,
                          er_thread_pool *pool) {
  conv_planes pl;
  planes_geometry(g, &pl);
  const int kg = s->isa->kg;
  const int64_t cg = g->c / g->group, hs = pl.direct ? g->h : pl.hs, ws = pl.direct ? g->w : pl.ws;
  const size_t pb = grouped_plane_bytes(s, g);
  const uint8_t pad = (uint8_t)(s->x_pad ^ s->x_flip);
  grouped_layout L = er__q8_grouped_scratch(s, g);
  uint8_t *dst = scratch + L.planes, *padrow = scratch + L.padrow, *gather = scratch + L.gather;
  if (pl.direct) {
    /* No padding, stride 1: each plane is its channels' whole images
     * interleaved, 16 pixels at a time (small maps paid per row). The
     * last 16 may run past the plane, into the next (written after it)
     * or the slack. */
    for (int64_t q = 0; q < s->cq; q++) {
      const uint8_t *rows[4] = {NULL, NULL, NULL, NULL};
      for (int t = 0; t < kg && q * kg + t < cg; t++) rows[t] = x + (q * kg + t) * g->h * g->w;
      /* With KG = 4 the last columns too, whole vectors, where the reads
       * stay in the input. */
      if (kg == 4 && grouped_row4(rows, g->h * g->w, 1, s->x_flip, dst + q * pb, x + cg * g->h * g->w)) continue;
      er__qgemm_interleave_panels(kg, 16, rows, g->h * g->w, s->x_flip, dst + q * pb, (size_t)(16 * kg), NULL);
    }
    return;
  }
  /* Stride 1 without padding columns (w3_mode): see w3_planes. */
  if (kg == 4 && g->sh == 1 && g->sw == 1 && g->pl == 0 && g->pr == 0 && hs == g->h + g->pt + g->pb) {
    const int64_t full = cg / kg;
    for (int64_t i = 0; i < ws * kg; i++) padrow[i] = pad;
    /* Over the workers where each group's pass stays in its own plane
     * (it writes up to 15 pixels past the image: a padding row below of
     * at least 16 takes them) and the planes are worth a split. */
    w3_planes_job j = {s, g, x, dst, padrow, full, 1};
    if (pool && g->pb >= 1 && ws >= 16 && (size_t)full * pb >= W3_PLANES_SPLIT_BYTES)
      j.chunks = (int)min64(full, er__pool_threads(pool));
    if (j.chunks > 1) er__parallel_for(pool, j.chunks, 1, w3_planes_chunk, &j);
    else w3_planes(s, g, x, dst, padrow, 0, full);
    if (full < s->cq) {
      /* The last group's missing channels read as zeros. */
      const int lanes = (int)(cg - full * kg);
      for (int64_t i = 0; i < ws * kg; i++) padrow[i] = (i % kg) < lanes ? pad : 0;
      w3_planes(s, g, x, dst, padrow, full, s->cq);
    }
    return;
  }
  for (int64_t py = 0; py < g->sh; py++)
    for (int64_t px = 0; px < g->sw; px++) {
      if (!phase_used(g, py, px)) continue;
      int64_t lo = 0, hi = ws;
      if (!pl.direct) {
        while (lo < ws && lo * g->sw + px - g->pl < 0) lo++;
        while (hi > lo && (hi - 1) * g->sw + px - g->pl >= g->w) hi--;
      }
      int filled = -1;
      for (int64_t q = 0; q < s->cq; q++) {
        int lanes = (int)min64(kg, cg - q * kg);
        /* A row of padding: the zero point for real channels, 0 past Cg. */
        if (lanes != filled)
          for (int64_t xx = 0; xx < ws; xx++)
            for (int t = 0; t < kg; t++) padrow[xx * kg + t] = t < lanes ? pad : 0;
        filled = lanes;
        uint8_t *d = dst + ((py * g->sw + px) * s->cq + q) * pb;
        for (int64_t yy = 0; yy < hs; yy++, d += ws * kg) {
          int64_t r = pl.direct ? yy : yy * g->sh + py - g->pt;
          if (r < 0 || r >= g->h) {
            memcpy(d, padrow, (size_t)(ws * kg));
            continue;
          }
          const uint8_t *rows[4] = {NULL, NULL, NULL, NULL};
          if (kg == 4 && g->sw <= 2) {
            /* The whole row in one pass over the input (short rows paid
             * for a gather and an interleave call each, and their
             * tails); what it writes past hi is padding written below,
             * or the next row, written after it. */
            for (int t = 0; t < lanes; t++) rows[t] = x + ((q * kg + t) * g->h + r) * g->w + lo * g->sw + px - g->pl;
            if (grouped_row4(rows, hi - lo, g->sw, s->x_flip, d + lo * kg, x + cg * g->h * g->w)) {
              /* The pad columns, usually one or two (the two memcpy
               * calls per row were about a seventh of building the planes
               * of a stride-2 layer: ResNet-18's 128 -> 256 at 28x28 32
               * -> 28 us). */
              for (int64_t i = 0; i < lo * kg; i++) d[i] = padrow[i];
              for (int64_t i = hi * kg; i < ws * kg; i++) d[i] = padrow[i];
              continue;
            }
          }
          for (int t = 0; t < lanes; t++) {
            const uint8_t *src = x + ((q * kg + t) * g->h + r) * g->w;
            if (pl.direct || g->sw == 1) {
              rows[t] = src + lo * g->sw + px - g->pl * !pl.direct;
            } else {
              uint8_t *gt = gather + t * ws;
              if (hi > lo) gather_stride(src + lo * g->sw + px - g->pl, hi - lo, g->sw, gt, x + cg * g->h * g->w);
              rows[t] = gt;
            }
          }
          memcpy(d, padrow, (size_t)(lo * kg));
          /* Rows past the real channels read as zeros (NULL rows). */
          er__qgemm_interleave(kg, (int)(hi - lo), rows, (int)(hi - lo), s->x_flip, d + lo * kg, NULL);
          memcpy(d + hi * kg, padrow + hi * kg, (size_t)((ws - hi) * kg));
        }
      }
    }
}

/* The activation sums of the n virtual columns of the grouped planes (the
 * packed values, pads and the zeros past Cg included), for the weight
 * zero points' term: each used phase's planes summed over channels, then
 * column v's sum is the sum over taps of those sums at the tap's offset
 * from v. */
void er__q8_grouped_asum(const qg_state *s, const er_window *g, uint8_t *scratch, int64_t n) {
  conv_planes pl;
  planes_geometry(g, &pl);
  const int kg = s->isa->kg;
  const int64_t hs = pl.direct ? g->h : pl.hs, ws = pl.direct ? g->w : pl.ws, pix = hs * ws;
  const size_t pb = grouped_plane_bytes(s, g);
  grouped_layout L = er__q8_grouped_scratch(s, g);
  int32_t *chsum = (int32_t *)(void *)(scratch + L.chsum), *asum = (int32_t *)(void *)(scratch + L.asum);
  for (int64_t ph = 0; ph < g->sh * g->sw; ph++) {
    if (!phase_used(g, ph / g->sw, ph % g->sw)) continue;
    int32_t *cs = chsum + ph * pix;
    memset(cs, 0, (size_t)pix * sizeof *cs);
    for (int64_t q = 0; q < s->cq; q++) {
      const uint8_t *d = scratch + L.planes + (size_t)(ph * s->cq + q) * pb;
      if (kg == 2)
        for (int64_t i = 0; i < pix; i++) cs[i] += d[2 * i] + d[2 * i + 1];
      else if (kg == 4)
        for (int64_t i = 0; i < pix; i++) cs[i] += d[4 * i] + d[4 * i + 1] + d[4 * i + 2] + d[4 * i + 3];
      else
        for (int64_t i = 0; i < pix; i++)
          for (int t = 0; t < kg; t++) cs[i] += d[i * kg + t];
    }
  }
  memset(asum, 0, (size_t)n * sizeof *asum);
  for (int64_t ky = 0; ky < g->kh; ky++)
    for (int64_t kx = 0; kx < g->kw; kx++) {
      int64_t py = ky * g->dh % g->sh, qy = ky * g->dh / g->sh, px = kx * g->dw % g->sw, qx = kx * g->dw / g->sw;
      const int32_t *cs = chsum + (py * g->sw + px) * pix + qy * ws + qx;
      for (int64_t v = 0; v < n; v++) asum[v] += cs[v];
    }
}

/* The k group offsets of the grouped planes, in the weights' order
 * (channel group, then tap). */
static void grouped_offsets(const qg_state *s, const er_window *g, int64_t dx, int64_t *koff) {
  conv_planes pl;
  planes_geometry(g, &pl);
  const int64_t ws = pl.direct ? g->w : pl.ws, khw = g->kh * g->kw;
  const size_t pb = grouped_plane_bytes(s, g);
  for (int64_t q = 0; q < s->cq; q++)
    for (int64_t t = 0; t < khw; t++) {
      int64_t ky = t / g->kw, kx = t % g->kw;
      /* (dx < 0: the column kx * dw + dx, whose phase wraps) */
      int64_t cx = kx * g->dw + dx, px = (cx % g->sw + g->sw) % g->sw, qx = (cx - px) / g->sw;
      int64_t py = ky * g->dh % g->sh, qy = ky * g->dh / g->sh;
      koff[q * khw + t] = (int64_t)(((py * g->sw + px) * s->cq + q) * pb) + (qy * ws + qx) * s->isa->kg;
    }
}

/* ---- in place, transposed: pixels by channels ------------------------------
 * On small feature maps the usual tiles (MR channels by NR virtual
 * columns) compute many padding columns and partial tiles: a 7x7 output
 * with 3x3 taps is 63 virtual columns, 64 with the last tile, for 49
 * pixels. The transposed tile takes R <= MR real pixels (their k groups
 * read in place, as the columns are) by NR channels, so only a channel
 * count short of NR is wasted; but each of its tiles stores its bytes
 * one by one, channel-major, which costs about as much as the products
 * of 6 k groups. Chosen where a count of tiles times (k groups + the
 * tile's fixed cost, 3 groups for the usual requantization, 7 for the
 * transposed one's) comes out at least a twentieth lower (7x7 and 14x14
 * maps of MobileNetV2 and ResNet-18 here, not their 1x1 layers with few
 * channels on large maps). */
bool er__q8_px_wins(const qg_state *s, const er_window *g) {
  conv_planes pl;
  planes_geometry(g, &pl);
  const int64_t mr = s->isa->mr, nr = s->isa->nr, mg = g->m / g->group, ohw = g->oh * g->ow;
  const int64_t n = pl.ws == g->ow || w3_mode(s, g) ? ohw : (g->oh - 1) * pl.ws + g->ow;
  const int64_t groups = s->cq * g->kh * g->kw;
  /* In units of one k group of a full tile's products: the current tile
   * computes whole MR x NR tiles; the transposed one's pixel tiles are
   * balanced (px_chunk), so its products follow the real pixel count, and
   * each tile's epilogue (transpose, a store per channel) costs about 7. */
  const int64_t cur = (mg + mr - 1) / mr * ((n + nr - 1) / nr) * (groups + 3) * mr;
  const int64_t px = (mg + nr - 1) / nr * (groups * ohw + 7 * mr * ((ohw + mr - 1) / mr));
  return px * 20 < cur * 19;
}

typedef struct px_job {
  const qg_state *s;
  const er_window *g;
  const uint8_t *planes;
  const int64_t *koff;
  int64_t gi, groups;        /* convolution group, k groups */
  uint8_t *y;                /* the group's first output channel plane */
  int chunks;
} px_job;

/* Channel panels [panel range of chunks begin .. end) for every pixel,
 * a panel's weights reread from L1/L2 for each pixel tile (measured a
 * little faster for 3x3 layers than pixel tiles outer). */
static void px_chunk(void *arg, int64_t begin, int64_t end) {
  const px_job *j = arg;
  const qg_state *s = j->s;
  const er_window *g = j->g;
  const int mr = s->isa->mr, nr = s->isa->nr, kg = s->isa->kg;
  const int64_t mg = g->m / g->group, ohw = g->oh * g->ow, panels = (mg + nr - 1) / nr;
  conv_planes pl;
  planes_geometry(g, &pl);
  const size_t wpanel = er__qgemm_col_panel_bytes(s->isa, j->groups * kg);
  for (int64_t pn = panels * begin / j->chunks; pn < panels * end / j->chunks; pn++) {
    const int64_t c0 = j->gi * mg + pn * nr;
    const int ncols = (int)min64(nr, mg - pn * nr);
    /* The panel's parameters, NR wide (a short last panel padded). */
    int32_t corr[ER_QGEMM_MAX_NR];
    float mult[ER_QGEMM_MAX_NR], off[ER_QGEMM_MAX_NR];
    for (int c = 0; c < nr; c++) {
      corr[c] = c < ncols ? s->corr[c0 + c] : 0;
      mult[c] = c < ncols ? s->mult[c0 + c] : 0.0f;
      off[c] = c < ncols ? s->off[c0 + c] : 0.0f;
    }
    const uint8_t *w = s->pxw + (size_t)j->gi * s->px_gstride + (size_t)pn * wpanel;
    if (s->isa->px_row_tile) {
      /* Each output row in balanced runs of at most px_row_max pixels. */
      const int64_t segs = (g->ow + s->isa->px_row_max - 1) / s->isa->px_row_max;
      for (int64_t oy = 0; oy < g->oh; oy++)
        for (int64_t sg = 0; sg < segs; sg++) {
          const int64_t x0 = g->ow * sg / segs, x1 = g->ow * (sg + 1) / segs;
          s->isa->px_row_tile(j->groups, j->planes + (size_t)(oy * pl.ws + x0) * (size_t)kg, (int)(x1 - x0),
                              j->koff, w, corr, mult, off, &s->epi, j->y + pn * nr * ohw + oy * g->ow + x0, ohw,
                              ncols);
        }
      continue;
    }
    const uint8_t *px[ER_QGEMM_MAX_MR];
    /* Pixel tiles of balanced sizes (49 pixels: seven of 7, not six of 8
     * and one of 1, whose single row would wait on its few chains). */
    const int64_t tiles = (ohw + mr - 1) / mr;
    int64_t oy = 0, ox = 0;
    for (int64_t t = 0; t < tiles; t++) {
      const int64_t p0 = ohw * t / tiles;
      const int rows = (int)(ohw * (t + 1) / tiles - p0);
      for (int r = 0; r < rows; r++) {
        px[r] = j->planes + (size_t)(oy * pl.ws + ox) * (size_t)kg;
        if (++ox == g->ow) {
          ox = 0;
          oy++;
        }
      }
      s->isa->px_tile(j->groups, px, rows, j->koff, w, corr, mult, off, &s->epi, j->y + pn * nr * ohw + p0, ohw,
                      ncols);
    }
  }
}

er_status er__q8_conv_run(const er_kernel_run *kr) {
  const qg_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[layouts[s->op].x];
  er_tensor *y = ctx->out[0];
  er_window g;
  if (!er__q8_conv_geom(ctx, s, x, y, &g)) return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  er_qgemm_problem p;
  conv_pack_ctx cc;
  er__q8_conv_problem(s, &g, 0, &cc, x->data, NULL, y->data, 0, &p);
  size_t pbytes = conv_scratch_fixed(s, &g), slot = er__qgemm_scratch_bytes(&p);
  /* Scratch: the planes, then one GEMM slot per worker. */
  int want = er__pool_threads(kr->pool);
  if (want > ER_KERNEL_MAX_SLOTS) want = ER_KERNEL_MAX_SLOTS;
  uint8_t *scratch = kr->scratch;
  void *owned = NULL;
  int slots = slot ? (int)((kr->scratch_bytes > pbytes ? kr->scratch_bytes - pbytes : 0) / slot) : want;
  if (!scratch || slots < 1) {
    /* Shapes prepare did not know: the run context's spill (kept). */
    scratch = er__kr_spill(kr, pbytes + slot * (size_t)want, &owned);
    if (!scratch)
      return er__error(ER_STATUS_OUT_OF_MEMORY, "%s '%s': out of memory for %zu bytes of kernel scratch",
                       ctx->node->op_type, ctx->node->name, pbytes + slot * (size_t)want);
    slots = want;
  }
  if (slots > want) slots = want;
  const bool use_px = s->pxw && er__q8_px_wins(s, &g);
  /* The planes' window: without its left and right padding in w3_mode,
   * each tap's offset then one pixel to the left (kx 0 reads x - 1). */
  er_window gl = g;
  const bool w3 = !use_px && w3_mode(s, &g);
  if (w3) gl.pl = gl.pr = 0;
  const grouped_layout GL = s->inplace ? er__q8_grouped_scratch(s, &gl) : (grouped_layout){0};
  int64_t *koff = s->inplace ? (int64_t *)(scratch + GL.koff) : NULL;
  if (koff) grouped_offsets(s, &gl, w3 ? -1 : 0, koff);
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t gi = 0; gi < g.group; gi++) {
      const uint8_t *xg = (const uint8_t *)x->data + (n * g.c + gi * (g.c / g.group)) * g.h * g.w;
      if (s->inplace) build_grouped(s, &gl, xg, scratch, kr->pool);
      else if (pbytes) build_planes(&g, xg, s->x_pad, scratch);
      if (use_px) {
        const int64_t mg = g.m / g.group, panels = (mg + s->isa->nr - 1) / s->isa->nr;
        px_job j = {s, &g, scratch + GL.planes, koff, gi, s->cq * g.kh * g.kw,
                    (uint8_t *)y->data + (n * g.m + gi * mg) * g.oh * g.ow, (int)min64(panels, want)};
        er__parallel_for(kr->pool, j.chunks, 1, px_chunk, &j);
        continue;
      }
      er__q8_conv_problem(s, &g, gi, &cc, x->data, scratch, y->data, n, &p);
      if (s->inplace) {
        p.pack_cols = NULL;
        p.cols_base = scratch + GL.planes;
        p.cols_koff = koff;
        if (w3) {
          const int64_t mg = g.m / g.group;
          p.n = g.oh * g.ow;
          p.vw = p.ow = 0;
          p.w3 = g.ow;
          p.w3_right = g.sw == 1;
          p.w3_corr[0] = s->w3_corr + gi * mg;
          p.w3_corr[1] = s->w3_corr + s->channels + gi * mg;
        }
        p.k = s->cq * g.kh * g.kw * s->isa->kg;
        if (s->wzp) {
          er__q8_grouped_asum(s, &g, scratch, p.n);
          p.cols_asum = (const int32_t *)(const void *)(scratch + er__q8_grouped_scratch(s, &g).asum);
        }
      }
      er__qgemm_run(&p, kr->pool, scratch + pbytes, slots);
    }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}
