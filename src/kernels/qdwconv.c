/* qdwconv.c - the "quant" group's depthwise integer convolutions, on the
 * 8-bit loops of qelt.h (see quant.c). */
#include "kernels/quant-impl.h"

/* ======================================================================== */
/* Depthwise convolution                                                     */
/* ======================================================================== */

/* One filter per channel (group = C = M): a direct kernel per channel over
 * float planes of (x - x_zp) (qelt.h). Float arithmetic is exact here:
 * products of 9-bit integers and sums of up to 258 of them stay below
 * 2^24, so the int32 result equals the integer reference's. */

bool er__q8_is_depthwise(const er_kernel_info *ki, qg_op op) {
  const er_tensor *x = in_at(ki, layouts[op].x), *w = in_at(ki, layouts[op].w);
  if (!is_conv(op) || !w || w->rank < 3 || w->dims[1] != 1 || er__tensor_count(w) / w->dims[0] > ER_QDW_MAX_TAPS)
    return false;
  er_kctx ctx = er__ki_ctx(ki);
  int64_t group = 1;
  if (er__attr_int(&ctx, "group", 1, &group) != ER_STATUS_OK) return false;
  return group == w->dims[0] && group > 1 && (x->rank < 0 || x->dims[1] < 0 || x->dims[1] == group);
}

static void dw_geometry(const er_window *g, int64_t *hs, int64_t *ws) {
  int64_t hp = g->h + g->pt + g->pb, wp = g->w + g->pl + g->pr;
  *hs = (hp + g->sh - 1) / g->sh;
  *ws = (wp + g->sw - 1) / g->sw;
}

/* The channels-in-lanes path keeps a band of input rows within this many
 * bytes (L2-resident: every band element is read kh * kw / (sh * sw)
 * times). */
#define DWC_BAND_BYTES (160 * 1024)

static int64_t dwc_band_rows(const qg_state *s, const er_window *g) {
  int lanes = s->dw->dwc_lanes;
  int64_t cols = er__qdwc_band_cols(g->ow, g->sw, g->kw, g->dw);
  int64_t row_bytes = g->sh * cols * lanes * (int64_t)sizeof(float);
  int64_t base = er__qdwc_band_floats(1, g->sh, g->kh, g->dh, cols, lanes) * (int64_t)sizeof(float);
  int64_t rows = base >= DWC_BAND_BYTES ? 1 : 1 + (DWC_BAND_BYTES - base) / row_bytes;
  return rows < g->oh ? rows : g->oh;
}

/* Channels in lanes pays for its transposes where planes are small (a
 * plane at a time costs more in set-up than in arithmetic there); larger
 * planes run a plane at a time. Strided layers convert sh * sw input
 * pixels per output pixel into planes, so lanes pay longer for them
 * (measured on AVX2 with MobileNetV2's layers: stride 1 faster in lanes
 * up to 14x14 outputs, even at 28x28, slower at 56x56; stride 2 faster
 * in lanes at 28x28 outputs, slower at 56x56). */
#define DWC_MAX_PIXELS 400
#define DWC_MAX_PIXELS_STRIDED 1024

static bool dwc_use(const qg_state *s, const er_window *g) {
  return s->dwc_w && g->oh * g->ow <= (g->sh * g->sw > 1 ? DWC_MAX_PIXELS_STRIDED : DWC_MAX_PIXELS);
}

/* One worker's planes, sums and tap pointers, or its band. */
size_t er__q8_dw_slot_bytes(const qg_state *s, const er_window *g) {
  if (dwc_use(s, g)) {
    int64_t cols = er__qdwc_band_cols(g->ow, g->sw, g->kw, g->dw);
    int64_t f = er__qdwc_band_floats(dwc_band_rows(s, g), g->sh, g->kh, g->dh, cols, s->dw->dwc_lanes);
    return ((size_t)f * sizeof(float) + 63) / 64 * 64;
  }
  int64_t hs, ws;
  dw_geometry(g, &hs, &ws);
  size_t f = (size_t)(g->sh * g->sw * er__qdw_plane_stride(hs, ws) + g->oh * ws + 64);
  return (f * sizeof(float) + (size_t)(g->kh * g->kw) * sizeof(float *) + 63) / 64 * 64 + 64;
}

typedef struct dw_job {
  const qg_state *s;
  const er_window *g;
  const uint8_t *x;          /* [C, H, W] of this image */
  uint8_t *y;                /* [C, OH, OW] of this image, element size es */
  size_t es;
  uint8_t *scratch;
  size_t slot_bytes;
  int chunks;
} dw_job;

/* Blocks of lanes channels, block range [begin, end) of the job's chunks. */
static void dwc_chunk(void *arg, int64_t begin, int64_t end) {
  const dw_job *j = arg;
  const qg_state *s = j->s;
  const er_window *g = j->g;
  const int lanes = s->dw->dwc_lanes;
  const int64_t blocks = (g->c + lanes - 1) / lanes, taps = g->kh * g->kw;
  er_qdwc_args a = {NULL, g->h, g->w, g->pt, g->pl, g->kh, g->kw, g->sh, g->sw, g->dh, g->dw, g->oh, g->ow, 0,
                    s->x_type == ER_DTYPE_INT8, s->xz, NULL, NULL, NULL, NULL, s->epi.zp, s->epi.lo, s->epi.hi,
                    NULL, dwc_band_rows(s, g), NULL, j->x + g->c * g->h * g->w};
  for (int64_t ch = begin; ch < end; ch++) {
    a.band = (float *)(j->scratch + (size_t)ch * j->slot_bytes);
    for (int64_t b = blocks * ch / j->chunks; b < blocks * (ch + 1) / j->chunks; b++) {
      int64_t c0 = b * lanes;
      a.nc = (int)(g->c - c0 < lanes ? g->c - c0 : lanes);
      a.x = j->x + c0 * g->h * g->w;
      a.wt = s->dwc_w + b * taps * lanes;
      a.corr = s->corr + c0;
      a.mult = s->mult + c0;
      a.off = s->off + c0;
      a.y = j->y + c0 * g->oh * g->ow;
      s->dw->dw_block(&a);
    }
  }
}

static void dw_chunk(void *arg, int64_t begin, int64_t end) {
  const dw_job *j = arg;
  const qg_state *s = j->s;
  const er_window *g = j->g;
  int64_t hs, ws, taps = g->kh * g->kw;
  dw_geometry(g, &hs, &ws);
  for (int64_t ch = begin; ch < end; ch++) {
    const int64_t ps = er__qdw_plane_stride(hs, ws);
    float *planes = (float *)(j->scratch + (size_t)ch * j->slot_bytes);
    int32_t *iacc = (int32_t *)(planes + g->sh * g->sw * ps);
    /* The tap pointers after the sums, 64-byte aligned. */
    uintptr_t tp = ((uintptr_t)(iacc + g->oh * ws) + 63) & ~(uintptr_t)63;
    er_qdw_args a = {planes, hs, ws, ps, j->x + g->c * g->h * g->w, g->kh, g->kw, g->sh, g->sw, g->dh, g->dw,
                     g->oh, g->ow, NULL, (const float **)(void *)tp, iacc, NULL, NULL};
    er__qdw_taps(&a);
    /* The padding, once: every channel writes only its input elements. */
    memset(planes, 0, (size_t)(g->sh * g->sw * ps) * sizeof *planes);
    /* 8-bit outputs (QConv) requantized as the plane is summed. */
    const bool fused = s->epi.kind == ER_QEPI_Q8 && !s->epi.wzp && j->es == 1;
    er_qdw_q8 q8 = {0, 0.0f, 0.0f, s->epi.zp, s->epi.lo, s->epi.hi};
    int64_t lo = g->c * ch / j->chunks, hi = g->c * (ch + 1) / j->chunks;
    for (int64_t c = lo; c < hi; c++) {
      a.w = (const float *)s->packed + c * taps;
      s->dw->dw_planes(j->x + c * g->h * g->w, g->h, g->w, g->pt, g->pl, s->x_type == ER_DTYPE_INT8, s->xz, &a);
      if (fused) {
        q8.corr = s->corr[c];
        q8.mult = s->mult[c];
        q8.off = s->off[c];
        a.q8 = &q8;
        a.y = j->y + (size_t)(c * g->oh * g->ow);
        s->dw->dw_plane(&a);
        continue;
      }
      s->dw->dw_plane(&a);
      /* The channel's output plane is contiguous: one epilogue call. */
      er_qtile_out t;
      t.acc = iacc;
      t.rows = 1;
      t.cols = (int)(g->oh * g->ow);
      t.nr = t.cols;
      t.i0 = c;
      t.j0 = 0;
      t.asum = NULL;
      t.c = j->y + (size_t)(c * g->oh * g->ow) * j->es;
      t.ldc = g->oh * g->ow;
      s->isa->epilogue(&s->epi, &t);
    }
  }
}

#if defined(__x86_64__) || defined(__i386__)

typedef struct dwv_job {
  const qg_state *s;
  const er_window *g;
  const er_qdwv_plan *plan;
  const uint8_t *x;
  uint8_t *y;
  int chunks;
} dwv_job;

static void dwv_chunk(void *arg, int64_t begin, int64_t end) {
  const dwv_job *j = arg;
  const qg_state *s = j->s;
  const er_window *g = j->g;
  const int64_t c0 = g->c * begin / j->chunks, c1 = g->c * end / j->chunks;
  er_qdwv_args a = {j->plan,
                    j->x + c0 * g->h * g->w,
                    s->x_flip,
                    s->x_pad,
                    s->dwv_wq + c0 * g->kh * s->dwv_groups,
                    s->dwv_corr + c0,
                    s->mult + c0,
                    s->off + c0,
                    s->epi.zp,
                    s->epi.lo,
                    s->epi.hi,
                    j->y + c0 * g->oh * g->ow};
  er__qdw_channels_avx512vbmi(&a, c1 - c0);
}

/* The VBMI path, when a plan fits the shape (false: it does not). */
static bool dwv_run(const qg_state *s, const er_kernel_run *kr, const er_window *g, const uint8_t *x, uint8_t *y) {
  er_qdwv_geom q = dwv_geom(g);
  const er_qdwv_plan *plan = s->dwv_plan;
  er_qdwv_plan local;
  if (!plan || memcmp(&plan->g, &q, sizeof q) != 0) {
    /* A shape prepare did not see: rows only (no index tables to hold). */
    if (!er__qdwv_plan_build(&local, &q, s->dwv_groups, NULL)) return false;
    plan = &local;
  }
  int64_t work = g->c * g->oh * g->ow * g->kh * g->kw;
  int chunks = (int)min64(g->c, work >> 14 > 1 ? work >> 14 : 1);
  for (int64_t n = 0; n < g->n; n++) {
    dwv_job j = {s, g, plan, x + n * g->c * g->h * g->w, y + n * g->c * g->oh * g->ow, chunks};
    er__parallel_for(kr->pool, chunks, 1, dwv_chunk, &j);
  }
  return true;
}
#endif

er_status er__q8_dw_run(const er_kernel_run *kr) {
  const qg_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[layouts[s->op].x];
  er_tensor *y = ctx->out[0];
  er_window g;
  if (!er__q8_conv_geom(ctx, s, x, y, &g) || g.oh * g.ow > INT32_MAX / 2) return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
#if defined(__x86_64__) || defined(__i386__)
  if (s->dwv_wq && dwv_run(s, kr, &g, x->data, y->data)) return ER_STATUS_OK;
#endif
  size_t slot = er__q8_dw_slot_bytes(s, &g);
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, slot, &scratch, &slots, &owned));
  int64_t work = g.c * g.oh * g.ow * g.kh * g.kw;
  const bool lanes = dwc_use(s, &g);
  int64_t units = lanes ? (g.c + s->dw->dwc_lanes - 1) / s->dw->dwc_lanes : g.c;
  int chunks = (int)min64(min64(slots, units), work >> 14 > 1 ? work >> 14 : 1);
  size_t es = s->epi.kind == ER_QEPI_Q8 || s->epi.kind == ER_QEPI_QLINEAR ? 1 : 4;
  for (int64_t n = 0; n < g.n; n++) {
    dw_job j = {s, &g, (const uint8_t *)x->data + n * g.c * g.h * g.w,
                (uint8_t *)y->data + (size_t)(n * g.c * g.oh * g.ow) * es, es, scratch, slot, chunks};
    er__parallel_for(kr->pool, chunks, 1, lanes ? dwc_chunk : dw_chunk, &j);
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}
