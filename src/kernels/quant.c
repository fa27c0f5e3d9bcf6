/* quant.c - optimized CPU kernels of the "quant" group: integer
 * convolutions and matrix products on the integer GEMM of qgemm.h.
 *
 *  - q8_conv_<tile>__<isa>: QConv (com.edgerun), QLinearConv and
 *    ConvInteger over NCHW (1-D and 2-D): one GEMM per image and group,
 *    Y[Mg, OH*OW] = W[Mg, Cg*kh*kw] X'[Cg*kh*kw, OH*OW], weights packed once
 *    at compile time, the patch matrix X' packed block by block straight
 *    from the image (padding holds the input zero point, i.e. real 0; a
 *    1x1 stride-1 convolution interleaves the image rows directly), the
 *    requantization in the tile epilogue.
 *  - q8_matmul_<tile>__<isa>: QMatMul, QLinearMatMul and MatMulInteger
 *    with constant 2-D weights: A's batch dims fold into M, A is packed per
 *    block at run time, B once at compile time.
 *
 * Every result equals the reference kernel's bit for bit (see qgemm.h for
 * why the integer sums are exact; the epilogues repeat the references'
 * floating-point operations in the same order). Shapes the fast path does
 * not cover at run time go to the reference kernel. */
#include <stdlib.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Builds for other architectures than x86 use none (or, on Arm with
 * dotprod, only the GEMM part) of the shared code: the reference kernels
 * run instead. */
#if !defined(__x86_64__) && !defined(__i386__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/qelt.h"
#include "kernels/qgemm.h"
#include "kernels/vec.h"
#include "kernels/window.h"
#include "ops/qfused.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ======================================================================== */
/* The node, read once                                                       */
/* ======================================================================== */

typedef enum qg_op { QG_QCONV, QG_QLINEARCONV, QG_CONVINTEGER, QG_QMATMUL, QG_QLINEARMATMUL, QG_MATMULINTEGER } qg_op;

/* Where each operand sits among the node's inputs (-1: not an input). */
typedef struct qg_layout {
  int x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias, mult, off;
} qg_layout;

static const qg_layout layouts[] = {
    [QG_QCONV] = {0, -1, 1, 2, -1, 3, -1, 7, 4, 5, 6},
    [QG_QLINEARCONV] = {0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -1},
    [QG_CONVINTEGER] = {0, -1, 2, 1, -1, 3, -1, -1, -1, -1, -1},
    [QG_QMATMUL] = {0, -1, 1, 2, -1, 3, -1, 7, 4, 5, 6},
    [QG_QLINEARMATMUL] = {0, 1, 2, 3, 4, 5, 6, 7, -1, -1, -1},
    [QG_MATMULINTEGER] = {0, -1, 2, 1, -1, 3, -1, -1, -1, -1, -1},
};

static bool is_conv(qg_op op) { return op <= QG_CONVINTEGER; }

static const er_tensor *in_at(const er_kernel_info *ki, int i) { return i < 0 ? NULL : er__ki_in(ki, i); }

/* A constant with data, of one value or `len` values (len < 0: any). */
static bool const_vec(const er_tensor *t, int64_t len) {
  if (!t || !t->data) return false;
  int64_t n = er__tensor_count(t);
  return n == 1 || (len >= 0 && n == len && t->rank == 1);
}

static bool q8(er_dtype t) { return t == ER_DTYPE_UINT8 || t == ER_DTYPE_INT8; }

/* Element c of a one-or-per-channel parameter. */
static double pval(const er_tensor *t, int64_t c) {
  return er__load_f64(t->data, t->dtype, er__tensor_count(t) == 1 ? 0 : c);
}

/* QLinearConv's and QLinearMatMul's multiplier, as their reference
 * computes it: the float product of the scales, then the float quotient. */
static double qlinear_mult(const er_tensor *xs, const er_tensor *ws, const er_tensor *ys, int64_t c) {
  return (float)((double)(float)(pval(xs, 0) * pval(ws, c)) / pval(ys, 0));
}

/* Everything prepare() works out. */
typedef struct qg_state {
  qg_op op;
  const er_qgemm_isa *isa;
  bool conv;
  er_dtype x_type;
  uint8_t x_flip, w_flip;
  uint8_t x_pad;             /* a padded input element (the zero point, as stored) */
  int32_t xz;                /* the input zero point's value */
  int64_t channels, k;       /* M (conv) or N (matmul); K per group */
  int64_t group;             /* conv */
  int64_t wdims[4];          /* conv weight dims */
  int wrank;
  void *packed;              /* weights: rows panels per group (conv) or columns panels */
  size_t gstride;            /* bytes between groups of packed */
  int32_t *corr, *wzp;       /* [channels] */
  /* ConvInteger and MatMulInteger whose input zero point is computed at
   * run time (quantize_dynamic: DynamicQuantizeLinear feeds it): corr
   * is formed per run from the bias part, the weight sums and the weight
   * zero points (dyn_xz_run). */
  bool dyn_xz;
  int32_t *base_corr, *wsum, *wzs; /* [channels]; wzs NULL when all 0 */
  float *mult, *off;         /* [channels] */
  double *mult_d;            /* [channels] */
  er_qepi epi;
  int slots;
  const er_qelt_ops *dw;     /* depthwise: packed holds float (w - w_zp) [C][kh * kw] */
  /* Depthwise with channels in lanes (8-bit requantized output): the same
   * weights as [channel block][kh * kw][lanes], zero past C. */
  float *dwc_w;
  /* Depthwise on AVX-512 VNNI + VBMI (qdw-avx512vbmi.c): per channel and
   * kernel row, 4-tap groups of int8 weights, and the bias less the
   * padded byte times the weight sum. */
  int32_t *dwv_wq, *dwv_corr;
  int dwv_groups;
  er_qdwv_plan *dwv_plan;    /* for the shapes known at prepare (else built per run, rows only) */
  uint8_t (*dwv_widx)[64];
  /* Convolutions read in place (no weight zero points): the weights are
   * packed with k groups ordered (channel group, tap), KG channels per
   * group, to match the grouped planes (see below). */
  bool inplace;
  int64_t cq;                /* channel groups per convolution group */
  /* In place with the transposed tile (isa->px_tile or px_row_tile,
   * small feature maps, px_wins): the same weights as columns panels of
   * NR channels, per group px_gstride bytes apart. */
  uint8_t *pxw;
  size_t px_gstride;
  /* In place over planes without padding columns (w3_mode): per channel,
   * the padding's part of the sum over the window's left column, then
   * over its right one ([2][channels]; NULL where the ISA has no such
   * tile or the layer cannot take it). */
  int32_t *w3_corr;
} qg_state;

static void qg_release(void *state) {
  qg_state *s = state;
  if (!s) return;
  er__aligned_free(s->packed);
  er__aligned_free(s->pxw);
  free(s->w3_corr);
  er__aligned_free(s->dwc_w);
  free(s->dwv_wq);
  free(s->dwv_corr);
  free(s->dwv_plan);
  free(s->dwv_widx);
  free(s->corr);
  free(s->wzp);
  free(s->base_corr);
  free(s->wsum);
  free(s->wzs);
  free(s->mult);
  free(s->off);
  free(s->mult_d);
  free(s);
}

/* Checks what the kernel needs to know at compile time. */
static bool is_depthwise(const er_kernel_info *ki, qg_op op);

static bool qg_supports(const er_kernel_info *ki, qg_op op, const er_qgemm_isa *isa) {
  if (!isa) return false;
  const qg_layout *L = &layouts[op];
  const er_tensor *x = in_at(ki, L->x), *w = in_at(ki, L->w);
  if (!x || !w || !q8(x->dtype) || !q8(w->dtype) || !w->data || !er__tensor_shape_known(w)) return false;
  bool conv = is_conv(op);
  int64_t ch = conv ? w->dims[0] : (w->rank == 2 ? w->dims[1] : -1);
  if (ch <= 0) return false;
  if (conv) {
    if ((w->rank != 3 && w->rank != 4) || (x->rank >= 0 && x->rank != w->rank)) return false;
    er_kctx ctx = er__ki_ctx(ki);
    if (!er__window_attrs_ok(&ctx, w->rank)) return false;
  } else {
    if (w->rank != 2 || x->rank < 1) return false;
    /* The int32 sum must not wrap where QLinearMatMul's double sum does not. */
    if (op == QG_QLINEARMATMUL && w->dims[0] > 33025) return false;
  }
  /* Quantization parameters: constants of the right shapes, but for the
   * input zero point of ConvInteger and MatMulInteger, which may be one
   * value computed at run time (not for the depthwise kernels, whose
   * padding and corrections are fixed at prepare). */
  const er_tensor *xz = in_at(ki, L->x_zp), *wz = in_at(ki, L->w_zp);
  if (xz && (!const_vec(xz, -1) || xz->dtype != x->dtype)) {
    bool scalar = xz->rank == 0 || (xz->rank == 1 && xz->dims[0] == 1);
    if (xz->data || xz->dtype != x->dtype || !scalar || (op != QG_CONVINTEGER && op != QG_MATMULINTEGER) ||
        is_depthwise(ki, op))
      return false;
  }
  if (wz && (!const_vec(wz, ch) || wz->dtype != w->dtype)) return false;
  if (L->x_scale >= 0) {
    const er_tensor *xs = in_at(ki, L->x_scale), *ws = in_at(ki, L->w_scale), *ys = in_at(ki, L->y_scale);
    if (!const_vec(xs, -1) || !const_vec(ws, ch) || !const_vec(ys, -1)) return false;
    if (xs->dtype != ER_DTYPE_FLOAT || ws->dtype != ER_DTYPE_FLOAT || ys->dtype != ER_DTYPE_FLOAT) return false;
    for (int64_t c = 0; c < ch; c++)
      if (!isfinite(qlinear_mult(xs, ws, ys, c))) return false;
  }
  const er_tensor *yz = in_at(ki, L->y_zp);
  if (yz && (!const_vec(yz, -1) || !q8(yz->dtype))) return false;
  if (L->y_zp >= 0 && op != QG_QCONV && op != QG_QMATMUL && !yz) return false;
  const er_tensor *b = in_at(ki, L->bias);
  if (b && (!const_vec(b, ch) || b->dtype != ER_DTYPE_INT32)) return false;
  if (L->mult >= 0) {
    const er_tensor *m = in_at(ki, L->mult), *o = in_at(ki, L->off);
    if (!const_vec(m, ch) || !const_vec(o, ch) || m->dtype != ER_DTYPE_FLOAT || o->dtype != ER_DTYPE_FLOAT) return false;
    for (int64_t c = 0; c < ch; c++)
      if (!isfinite(pval(m, c)) || !isfinite(pval(o, c))) return false;
  }
  return ki->n_out == 1;
}

static er_status oom(const er_kernel_info *ki) {
  return er__error(ER_STATUS_OUT_OF_MEMORY, "%s '%s': out of memory preparing an integer kernel", ki->node->op_type,
                   ki->node->name);
}

static er_status qg_prepare(const er_kernel_info *ki, qg_op op, const er_qgemm_isa *isa, const er_qelt_ops *dw,
                            void **state_out, size_t *scratch_out);

/* ======================================================================== */
/* Convolution                                                               */
/* ======================================================================== */

/* The patch matrix is never built. The input of one image and group is
 * copied once into planes padded with the zero point (the value of real 0)
 * and split by stride phase: plane (py, px) holds padded rows py, py + sh,
 * ... and columns px, px + sw, ... . Then tap (ky, kx) of output pixel
 * (oy, ox) is element (oy + qy, ox + qx) of plane (ky dh % sh, kx dw % sw)
 * with qy = ky dh / sh, qx = kx dw / sw, and over output pixels numbered
 * oy * Ws + ox ("virtual" columns, Ws the plane width) every row of the
 * patch matrix is one contiguous run of a plane: packing only interleaves.
 * Columns ox >= OW are computed and dropped (qgemm's virtual columns). A
 * 1x1 or unpadded stride-1 window reads the input itself. */
typedef struct conv_planes {
  const uint8_t *base;       /* [sh * sw][Cg][hs * ws] */
  int64_t hs, ws;            /* plane height and width */
  int64_t plane;             /* bytes between channels of a phase */
  bool direct;               /* base is the input itself */
} conv_planes;

typedef struct conv_pack_ctx {
  const qg_state *s;
  const er_window *g;
  conv_planes pl;
} conv_pack_ctx;

static void planes_geometry(const er_window *g, conv_planes *pl) {
  int64_t hp = g->h + g->pt + g->pb, wp = g->w + g->pl + g->pr;
  pl->direct = g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 && g->pb == 0 && g->pr == 0;
  pl->hs = pl->direct ? g->h : (hp + g->sh - 1) / g->sh;
  pl->ws = pl->direct ? g->w : (wp + g->sw - 1) / g->sw;
  pl->plane = pl->hs * pl->ws;
}

/* Bytes of the planes of one image and group (0 when direct). */
static size_t planes_bytes(const er_window *g) {
  conv_planes pl;
  planes_geometry(g, &pl);
  return pl.direct ? 0 : (size_t)(g->sh * g->sw * (g->c / g->group) * pl.plane + 64);
}

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

static bool conv_geom(const er_kctx *ctx, const qg_state *s, const er_tensor *x, const er_tensor *y, er_window *g) {
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
static void conv_problem(const qg_state *s, const er_window *g, int64_t gi, conv_pack_ctx *cc, const uint8_t *x,
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

/* The shared scratch of the in-place path: the planes, the offset table,
 * one row of padding and KG rows of strided input; with weight zero points
 * also each phase's sum over channels (int32 per plane pixel) and the
 * activation sum of each virtual column (at most a plane's pixels). */
typedef struct grouped_layout {
  size_t planes, koff, padrow, gather, chsum, asum, total; /* byte offsets; total size */
} grouped_layout;

static grouped_layout grouped_scratch(const qg_state *s, const er_window *g) {
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

/* Bytes of scratch shared by all workers. */
static size_t conv_scratch_fixed(const qg_state *s, const er_window *g) {
  if (!s->inplace) return (planes_bytes(g) + 63) / 64 * 64;
  return grouped_scratch(s, g).total;
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
  grouped_layout L = grouped_scratch(s, g);
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
static void grouped_asum(const qg_state *s, const er_window *g, uint8_t *scratch, int64_t n) {
  conv_planes pl;
  planes_geometry(g, &pl);
  const int kg = s->isa->kg;
  const int64_t hs = pl.direct ? g->h : pl.hs, ws = pl.direct ? g->w : pl.ws, pix = hs * ws;
  const size_t pb = grouped_plane_bytes(s, g);
  grouped_layout L = grouped_scratch(s, g);
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

/* ---- in place, no padding columns ------------------------------------------
 * A 3x3 window at stride 1 with one pixel of padding left and right (the
 * usual "same" 3x3 layer) reads planes as wide as the input: output pixel
 * (y, x) is column y W + x, so no column is computed and dropped (2 of
 * every W + 2 with padded planes: 3.4% at 56x56, 6.7% at 28x28, more with
 * the last partial tile). The taps that would read the left padding
 * column (kx 0 at x = 0) read the previous row's last pixel instead, so
 * the tile masks those lanes' products off and adds the padding's part of
 * the sum from w3_corr; the same for kx 2 at x = W - 1. Rows of padding
 * above and below stay in the planes. Only the fused Q8 tile (QConv with
 * 8-bit output, no weight zero points) does this, and not where the
 * transposed tile runs (px_wins counts the columns this way). Measured on
 * the AVX-512 VNNI Xeon of bench/REPORT-cpu.md, 1 thread: a one-layer
 * 256 -> 256 model at 56x56 5.89 -> 5.70 ms, 64 -> 64 0.446 -> 0.431 ms,
 * VGG-19 int8 70.2 -> 69.6 ms; 28x28 layers, which took the transposed
 * tile before, about as fast either way.
 * At stride 2 on an even width the same holds per phase plane (each W / 2
 * = OW wide): tap kx reads input column 2x + kx - 1, i.e. kx 0 the odd
 * phase at x - 1 (the left padding at x = 0, masked as above), kx 1 the
 * even phase at x, kx 2 the odd phase at x, never the right padding (no
 * mask on that side). One-layer models, 1 thread, medians of 8 alternated
 * p50s: 128 -> 256 at 56x56 0.897 -> 0.848 ms, 64 -> 128 0.265 -> 0.256. */
static bool w3_mode(const qg_state *s, const er_window *g) {
  if (!s->w3_corr || !s->inplace || g->kh != 3 || g->kw != 3 || g->dh != 1 || g->dw != 1 || g->pl != 1 ||
      g->pr != 1 || g->ow < 2)
    return false;
  return (g->sh == 1 && g->sw == 1 && g->ow == g->w) ||
         (g->sh == 2 && g->sw == 2 && g->w % 2 == 0 && g->ow * 2 == g->w);
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
static bool px_wins(const qg_state *s, const er_window *g) {
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

static er_status conv_run(const er_kernel_run *kr) {
  const qg_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[layouts[s->op].x];
  er_tensor *y = ctx->out[0];
  er_window g;
  if (!conv_geom(ctx, s, x, y, &g)) return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  er_qgemm_problem p;
  conv_pack_ctx cc;
  conv_problem(s, &g, 0, &cc, x->data, NULL, y->data, 0, &p);
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
  const bool use_px = s->pxw && px_wins(s, &g);
  /* The planes' window: without its left and right padding in w3_mode,
   * each tap's offset then one pixel to the left (kx 0 reads x - 1). */
  er_window gl = g;
  const bool w3 = !use_px && w3_mode(s, &g);
  if (w3) gl.pl = gl.pr = 0;
  const grouped_layout GL = s->inplace ? grouped_scratch(s, &gl) : (grouped_layout){0};
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
      conv_problem(s, &g, gi, &cc, x->data, scratch, y->data, n, &p);
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
          grouped_asum(s, &g, scratch, p.n);
          p.cols_asum = (const int32_t *)(const void *)(scratch + grouped_scratch(s, &g).asum);
        }
      }
      er__qgemm_run(&p, kr->pool, scratch + pbytes, slots);
    }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Depthwise convolution                                                     */
/* ======================================================================== */

/* One filter per channel (group = C = M): a direct kernel per channel over
 * float planes of (x - x_zp) (qelt.h). Float arithmetic is exact here:
 * products of 9-bit integers and sums of up to 258 of them stay below
 * 2^24, so the int32 result equals the integer reference's. */

static bool is_depthwise(const er_kernel_info *ki, qg_op op) {
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
static size_t dw_slot_bytes(const qg_state *s, const er_window *g) {
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
static er_qdwv_geom dwv_geom(const er_window *g) {
  er_qdwv_geom q = {g->h, g->w, g->pt, g->pl, g->kh, g->kw, g->sh, g->sw, g->dh, g->dw, g->oh, g->ow};
  return q;
}

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

static er_status dw_run(const er_kernel_run *kr) {
  const qg_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[layouts[s->op].x];
  er_tensor *y = ctx->out[0];
  er_window g;
  if (!conv_geom(ctx, s, x, y, &g) || g.oh * g.ow > INT32_MAX / 2) return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
#if defined(__x86_64__) || defined(__i386__)
  if (s->dwv_wq && dwv_run(s, kr, &g, x->data, y->data)) return ER_STATUS_OK;
#endif
  size_t slot = dw_slot_bytes(s, &g);
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

/* ======================================================================== */
/* Matrix product                                                            */
/* ======================================================================== */

typedef struct mm_pack_ctx {
  const qg_state *s;
  const uint8_t *a;          /* [M, K] */
} mm_pack_ctx;

/* Rows [i0, i0 + rows) of activations a [M, k] as rows panels. */
static void pack_act_rows(const er_qgemm_isa *isa, const uint8_t *a, int64_t k, uint8_t flip, int64_t i0,
                          int64_t rows, void *dst, int32_t *sums) {
  er_qsrc src = {a, k, 1, flip, false};
  size_t rpb = er__qgemm_row_panel_bytes(isa, k);
  for (int64_t q = 0; q * isa->mr < rows; q++) {
    int r = (int)min64(isa->mr, rows - q * isa->mr);
    er__qgemm_pack_rows(isa, &src, i0 + q * isa->mr, r, k, (uint8_t *)dst + (size_t)q * rpb,
                        sums ? sums + q * isa->mr : NULL);
  }
}

static void mm_pack(const void *vctx, int64_t i0, int64_t rows, void *dst, int32_t *sums) {
  const mm_pack_ctx *mc = vctx;
  pack_act_rows(mc->s->isa, mc->a, mc->s->k, mc->s->x_flip, i0, rows, dst, sums);
}

/* A matrix product of activation rows (packed per block by pack_rows)
 * and prepacked weight columns, into C [m, n]. */
static void mm_problem(er_qgemm_problem *p, const er_qgemm_isa *isa, int64_t m, int64_t n, int64_t k,
                       er_qpack_rows_fn pack_rows, const void *rows_ctx, const uint8_t *cols_packed,
                       const er_qepi *epi, void *c) {
  memset(p, 0, sizeof *p);
  p->isa = isa;
  p->m = m;
  p->n = n;
  p->k = k;
  p->pack_rows = pack_rows;
  p->rows_ctx = rows_ctx;
  p->cols_packed = cols_packed;
  p->need_asum = epi->wzp != NULL;
  p->epi = *epi;
  p->c = c;
  p->ldc = n;
}

static er_status mm_run(const er_kernel_run *kr) {
  const qg_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *a = ctx->in[layouts[s->op].x];
  er_tensor *y = ctx->out[0];
  if (a->rank < 1 || a->dims[a->rank - 1] != s->k) return er__kr_reference(kr);
  int64_t m = er__tensor_count(a) / (s->k ? s->k : 1);
  if (s->k == 0 || er__tensor_count(y) != m * s->channels) return er__kr_reference(kr);
  if (m == 0) return ER_STATUS_OK;
  mm_pack_ctx mc = {s, a->data};
  er_qgemm_problem p;
  mm_problem(&p, s->isa, m, s->channels, s->k, mm_pack, &mc, s->packed, &s->epi, y->data);
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, er__qgemm_scratch_bytes(&p), &scratch, &slots, &owned));
  er__qgemm_run(&p, kr->pool, scratch, slots);
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* prepare                                                                   */
/* ======================================================================== */

static er_status qg_prepare(const er_kernel_info *ki, qg_op op, const er_qgemm_isa *isa, const er_qelt_ops *dw,
                            void **state_out, size_t *scratch_out) {
  const qg_layout *L = &layouts[op];
  const er_tensor *x = in_at(ki, L->x), *w = in_at(ki, L->w);
  const er_tensor *xz = in_at(ki, L->x_zp), *wz = in_at(ki, L->w_zp), *yz = in_at(ki, L->y_zp);
  const er_tensor *bias = in_at(ki, L->bias);
  er_kctx ctx = er__ki_ctx(ki);
  qg_state *s = calloc(1, sizeof *s);
  if (!s) return oom(ki);
  s->op = op;
  s->isa = isa;
  s->dw = dw;
  s->conv = is_conv(op);
  s->x_type = x->dtype;
  s->x_flip = x->dtype == ER_DTYPE_INT8 ? 0x80 : 0;
  s->w_flip = w->dtype == ER_DTYPE_UINT8 ? 0x80 : 0;
  s->slots = er__ki_slots(ki);
  int64_t group = 1;
  if (s->conv) er__attr_int(&ctx, "group", 1, &group);
  s->group = group;
  s->channels = s->conv ? w->dims[0] : w->dims[1];
  s->k = s->conv ? er__tensor_count(w) / w->dims[0] : w->dims[0];
  s->wrank = w->rank;
  for (int d = 0; d < w->rank && d < 4; d++) s->wdims[d] = w->dims[d];
  const int64_t C = s->channels, K = s->k;
  if (s->conv && (group < 1 || C % group != 0)) {
    qg_release(s);
    return er__error(ER_STATUS_INVALID_ATTRIBUTE, "%s '%s': group %lld does not divide %lld channels",
                     ki->node->op_type, ki->node->name, (long long)group, (long long)C);
  }
  /* Zero points in the packed domain: activations unsigned, weights signed. */
  s->dyn_xz = xz && !xz->data;
  int32_t xz_raw = xz && !s->dyn_xz ? (int32_t)pval(xz, 0) : 0;
  int32_t xz_u = xz_raw + (s->x_flip ? 128 : 0); /* 0 for depthwise (below) */
  s->x_pad = (uint8_t)xz_raw;
  s->xz = xz_raw;
  s->corr = calloc((size_t)C, sizeof *s->corr);
  int32_t *wsum = calloc((size_t)C, sizeof *wsum), *wz_s = calloc((size_t)C, sizeof *wz_s);
  bool any_wz = false;
  for (int64_t c = 0; c < C && wz_s; c++) {
    /* uint8 weights shift by -128, their zero point (0 when absent) too */
    wz_s[c] = (wz ? (int32_t)pval(wz, c) : 0) - (s->w_flip ? 128 : 0);
    if (wz_s[c] != 0) any_wz = true;
  }
  if (any_wz) s->wzp = wz_s;
  if (!s->corr || !wsum || !wz_s) {
    free(wsum);
    if (!any_wz) free(wz_s);
    qg_release(s);
    return oom(ki);
  }
  /* Pack the weights and sum them per channel. */
  if (dw) {
    /* Depthwise: float weights minus their zero point; the sums of the
     * direct kernel are exact without corrections (corr = bias). */
    int64_t taps = K;
    float *wf = er__aligned_alloc((size_t)(C * taps) * sizeof *wf);
    if (!wf) {
      free(wsum);
      if (!any_wz) free(wz_s);
      qg_release(s);
      return oom(ki);
    }
    for (int64_t c = 0; c < C; c++)
      for (int64_t t = 0; t < taps; t++) {
        int32_t v = (int32_t)(((const uint8_t *)w->data)[c * taps + t] ^ s->w_flip);
        wf[c * taps + t] = (float)((int32_t)(int8_t)(uint8_t)v - wz_s[c]);
      }
    s->packed = wf;
    memset(wsum, 0, (size_t)C * sizeof *wsum);
    memset(wz_s, 0, (size_t)C * sizeof *wz_s);
    if (any_wz) {
      free(wz_s);
      s->wzp = NULL;
      any_wz = false;
      wz_s = NULL;
    }
    xz_u = 0;
  } else if (s->conv) {
    int64_t mg = C / group, cg = w->dims[1], khw = K / cg;
    /* In place for windows larger than one pixel, where it saves
     * rereading each input byte kh * kw times; a 1x1 window packs each
     * byte once either way, and packed panels read sequentially. Weight
     * zero points need the activation sums, which the planes give too
     * (grouped_asum). */
    /* 1x1 layers too on AVX2's 7-bit tiles (6 x 16, KG 4), whose grouped
     * planes are built in whole vectors: they beat packed panels there
     * (1 thread, Zen 3: 384 -> 64 at 14x14 0.091 -> 0.082 ms, 64 -> 128
     * stride 2 at 56x56 0.171 -> 0.151 ms, none slower), and the
     * transposed tile reads them where it runs (small maps: px_wins). */
    er_window g;
    const er_tensor *y = ki->out[0];
    const bool px_ok = (isa->px_tile || isa->px_row_tile) && op == QG_QCONV && yz && !any_wz &&
                       er__tensor_shape_known(x) && er__tensor_shape_known(y) && conv_geom(&ctx, s, x, y, &g);
    s->cq = (cg + isa->kg - 1) / isa->kg;
    s->inplace = isa->tile_ind && (khw > 1 || isa->px_tile || isa->px_row_tile || (px_ok && px_wins(s, &g)));
    /* In place: weights reordered to [m][channel group][tap][KG], zero
     * for the channels past Cg. */
    int64_t kp = s->inplace ? s->cq * khw * isa->kg : K;
    uint8_t *reordered = NULL;
    if (s->inplace) {
      reordered = calloc((size_t)(C * kp), 1);
      if (!reordered) {
        free(wsum);
        if (!any_wz) free(wz_s);
        qg_release(s);
        return oom(ki);
      }
      const uint8_t *wv = w->data;
      for (int64_t m = 0; m < C; m++)
        for (int64_t c = 0; c < cg; c++)
          for (int64_t t = 0; t < khw; t++)
            reordered[m * kp + ((c / isa->kg) * khw + t) * isa->kg + c % isa->kg] =
                (uint8_t)(wv[(m * cg + c) * khw + t] ^ s->w_flip);
    }
    s->gstride = (size_t)((mg + isa->mr - 1) / isa->mr) * er__qgemm_row_panel_bytes(isa, kp);
    s->packed = er__aligned_alloc(s->gstride * (size_t)group);
    if (!s->packed) {
      free(reordered);
      free(wsum);
      if (!any_wz) free(wz_s);
      qg_release(s);
      return oom(ki);
    }
    for (int64_t gi = 0; gi < group; gi++) {
      er_qsrc src = {(const uint8_t *)w->data + gi * mg * K, K, 1, s->w_flip, true};
      if (reordered) src = (er_qsrc){reordered + gi * mg * kp, kp, 1, 0, true};
      for (int64_t r = 0; r < mg; r += isa->mr) {
        int rows = (int)min64(isa->mr, mg - r);
        er__qgemm_pack_rows(isa, &src, r, rows, kp, (uint8_t *)s->packed + gi * s->gstride +
                            (size_t)(r / isa->mr) * er__qgemm_row_panel_bytes(isa, kp), wsum + gi * mg + r);
      }
    }
    /* For planes without padding columns (w3_mode): the zero point times
     * each channel's weights over the window's left column, then its right
     * one (without, the padded planes). */
    if (s->inplace && isa->tile_q8_w3 && op == QG_QCONV && yz && !any_wz && w->rank == 4 && w->dims[2] == 3 &&
        w->dims[3] == 3 && (s->w3_corr = malloc(2 * (size_t)C * sizeof *s->w3_corr))) {
      const uint8_t *wv = w->data;
      for (int side = 0; side < 2; side++)
        for (int64_t m = 0; m < C; m++) {
          uint32_t sum = 0;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t ky = 0; ky < 3; ky++)
              sum += (uint32_t)(int32_t)(int8_t)(uint8_t)(wv[((m * cg + c) * 3 + ky) * 3 + side * 2] ^ s->w_flip);
          s->w3_corr[side * C + m] = (int32_t)(sum * (uint32_t)xz_u);
        }
    }
    /* The transposed tile's weights, where it will run: 8-bit outputs
     * (QConv with an output zero point), no weight zero points, and a
     * known shape on which it wins. */
    if (reordered && px_ok && px_wins(s, &g)) {
      size_t cpb = er__qgemm_col_panel_bytes(isa, kp);
      int64_t panels = (mg + isa->nr - 1) / isa->nr;
      s->px_gstride = cpb * (size_t)panels;
      s->pxw = er__aligned_alloc(s->px_gstride * (size_t)group);
      for (int64_t gi = 0; s->pxw && gi < group; gi++) {
        er_qsrc src = {reordered + gi * mg * kp, 1, kp, 0, true};
        for (int64_t q = 0; q < panels; q++)
          er__qgemm_pack_cols(isa, &src, q * isa->nr, (int)min64(isa->nr, mg - q * isa->nr), kp,
                              s->pxw + (size_t)gi * s->px_gstride + (size_t)q * cpb, NULL);
      }
      /* Without it, the usual tiles. */
    }
    free(reordered);
  } else {
    size_t cpb = er__qgemm_col_panel_bytes(isa, K);
    int64_t panels = (C + isa->nr - 1) / isa->nr;
    s->packed = er__aligned_alloc(cpb * (size_t)panels);
    if (!s->packed) {
      free(wsum);
      if (!any_wz) free(wz_s);
      qg_release(s);
      return oom(ki);
    }
    er_qsrc src = {w->data, C, 1, s->w_flip, true};
    for (int64_t q = 0; q < panels; q++)
      er__qgemm_pack_cols(isa, &src, q * isa->nr, (int)min64(isa->nr, C - q * isa->nr), K,
                          (uint8_t *)s->packed + (size_t)q * cpb, wsum + q * isa->nr);
  }
  for (int64_t c = 0; c < C; c++) {
    uint32_t corr = (bias ? (uint32_t)(int32_t)pval(bias, c) : 0u) - (uint32_t)xz_u * (uint32_t)wsum[c] +
                    (uint32_t)K * (uint32_t)xz_u * (uint32_t)(wz_s ? wz_s[c] : 0);
    s->corr[c] = (int32_t)corr;
  }
  if (s->dyn_xz) {
    /* Keep what a run needs: the bias part of corr (xz_u is not known),
     * the weight sums and zero points. */
    s->base_corr = malloc((size_t)C * sizeof *s->base_corr);
    for (int64_t c = 0; c < C && s->base_corr; c++) s->base_corr[c] = bias ? (int32_t)pval(bias, c) : 0;
    s->wsum = wsum;
    wsum = NULL;
    if (any_wz) {
      s->wzs = malloc((size_t)C * sizeof *s->wzs);
      if (s->wzs) memcpy(s->wzs, wz_s, (size_t)C * sizeof *wz_s);
    }
    if (!s->base_corr || (any_wz && !s->wzs)) {
      if (!any_wz) free(wz_s);
      qg_release(s);
      return oom(ki);
    }
  }
  if (!any_wz) free(wz_s);
  free(wsum);
  /* The epilogue. */
  er_qepi *e = &s->epi;
  e->channel_rows = s->conv;
  e->corr = s->corr;
  e->wzp = s->wzp;
  er_dtype out_t = yz ? yz->dtype : ER_DTYPE_UNDEFINED;
  e->out_signed = out_t == ER_DTYPE_INT8;
  if (yz) e->zp = (int32_t)pval(yz, 0);
  er__q_range(out_t, &e->lo, &e->hi);
  if (op == QG_QCONV || op == QG_QMATMUL) {
    const er_tensor *mt = in_at(ki, L->mult), *ot = in_at(ki, L->off);
    s->mult = malloc((size_t)C * sizeof *s->mult);
    s->off = malloc((size_t)C * sizeof *s->off);
    if (!s->mult || !s->off) {
      qg_release(s);
      return oom(ki);
    }
    for (int64_t c = 0; c < C; c++) {
      s->mult[c] = (float)pval(mt, c);
      s->off[c] = (float)pval(ot, c);
    }
    e->mult = s->mult;
    e->off = s->off;
    if (yz) {
      e->kind = ER_QEPI_Q8;
      if (er__q_clamp_attrs(&ctx, out_t, &e->lo, &e->hi) != ER_STATUS_OK) {
        qg_release(s);
        return ER_STATUS_INVALID_ATTRIBUTE;
      }
    } else {
      e->kind = ER_QEPI_F32;
      er__attr_float(&ctx, "clip_min", -INFINITY, &e->clip_lo);
      er__attr_float(&ctx, "clip_max", INFINITY, &e->clip_hi);
    }
  } else if (op == QG_QLINEARCONV || op == QG_QLINEARMATMUL) {
    const er_tensor *xs = in_at(ki, L->x_scale), *ws = in_at(ki, L->w_scale), *ys = in_at(ki, L->y_scale);
    s->mult_d = malloc((size_t)C * sizeof *s->mult_d);
    if (!s->mult_d) {
      qg_release(s);
      return oom(ki);
    }
    for (int64_t c = 0; c < C; c++) s->mult_d[c] = qlinear_mult(xs, ws, ys, c);
    e->kind = ER_QEPI_QLINEAR;
    e->mult_d = s->mult_d;
  } else {
    e->kind = ER_QEPI_I32;
  }
  /* Scratch, when the shapes are known. */
  *scratch_out = 0;
  const er_tensor *y = ki->out[0];
  if (dw && e->kind == ER_QEPI_Q8 && dw->dw_block && C >= dw->dwc_lanes / 2) {
    /* Channels in lanes: at least half a vector of channels (fewer run a
     * plane at a time). */
    const int64_t lanes = dw->dwc_lanes, blocks = (C + lanes - 1) / lanes;
    s->dwc_w = er__aligned_alloc((size_t)(blocks * K * lanes) * sizeof *s->dwc_w);
    if (!s->dwc_w) {
      qg_release(s);
      return oom(ki);
    }
    const float *wf = s->packed;
    for (int64_t b = 0; b < blocks; b++)
      for (int64_t t = 0; t < K; t++)
        for (int64_t l = 0; l < lanes; l++) {
          int64_t c = b * lanes + l;
          s->dwc_w[(b * K + t) * lanes + l] = c < C ? wf[c * K + t] : 0.0f;
        }
  }
  if (dw) {
    er_window g;
    if (er__tensor_shape_known(x) && er__tensor_shape_known(y) && conv_geom(&ctx, s, x, y, &g))
      *scratch_out = dw_slot_bytes(s, &g) * (size_t)s->slots;
  } else if (s->conv) {
    er_window g;
    if (er__tensor_shape_known(x) && er__tensor_shape_known(y) && conv_geom(&ctx, s, x, y, &g)) {
      er_qgemm_problem p;
      conv_pack_ctx cc;
      conv_problem(s, &g, 0, &cc, NULL, NULL, NULL, 0, &p);
      *scratch_out = conv_scratch_fixed(s, &g) + er__qgemm_scratch_bytes(&p) * (size_t)s->slots;
    }
  } else if (er__tensor_shape_known(x)) {
    er_qgemm_problem p;
    memset(&p, 0, sizeof p);
    p.isa = isa;
    p.m = er__tensor_count(x) / (K ? K : 1);
    p.n = C;
    p.k = K;
    p.cols_packed = s->packed;
    *scratch_out = er__qgemm_scratch_bytes(&p) * (size_t)s->slots;
  }
  *state_out = s;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Input zero points computed at run time                                    */
/* ======================================================================== */

/* Corrections on the stack up to this many channels (64 KiB); more are
 * allocated per run. */
#define DYN_XZ_STACK_CHANNELS 16384

/* Runs `run` with the state's input zero point and corrections taken from
 * this run's zero point (a copy of the state; the shared one is never
 * written). */
static er_status dyn_xz_run(const er_kernel_run *kr, er_status (*run)(const er_kernel_run *)) {
  const qg_state *s = kr->state;
  if (!s->dyn_xz) return run(kr);
  const er_tensor *zt = kr->ctx->in[layouts[s->op].x_zp];
  if (!zt || er__tensor_count(zt) != 1) return er__kr_reference(kr);
  int32_t xz = zt->dtype == ER_DTYPE_INT8 ? ((const int8_t *)zt->data)[0] : ((const uint8_t *)zt->data)[0];
  uint32_t xz_u = (uint32_t)(xz + (s->x_flip ? 128 : 0));
  int32_t stack[DYN_XZ_STACK_CHANNELS], *corr = stack;
  if (s->channels > DYN_XZ_STACK_CHANNELS) {
    corr = malloc((size_t)s->channels * sizeof *corr);
    if (!corr)
      return er__error(ER_STATUS_OUT_OF_MEMORY, "%s '%s': out of memory for %lld corrections",
                       kr->ctx->node->op_type, kr->ctx->node->name, (long long)s->channels);
  }
  /* As prepare forms them, in wrapping 32-bit arithmetic. */
  for (int64_t c = 0; c < s->channels; c++)
    corr[c] = (int32_t)((uint32_t)s->base_corr[c] - xz_u * (uint32_t)s->wsum[c] +
                        (uint32_t)s->k * xz_u * (uint32_t)(s->wzs ? s->wzs[c] : 0));
  qg_state local = *s;
  local.xz = xz;
  local.x_pad = (uint8_t)xz;
  local.corr = corr;
  local.epi.corr = corr;
  er_kernel_run k2 = *kr;
  k2.state = &local;
  er_status st = run(&k2);
  if (corr != stack) free(corr);
  return st;
}

static er_status conv_run_any(const er_kernel_run *kr) { return dyn_xz_run(kr, conv_run); }
static er_status mm_run_any(const er_kernel_run *kr) { return dyn_xz_run(kr, mm_run); }

/* ======================================================================== */
/* com.microsoft DynamicQuantizeLSTM                                         */
/* ======================================================================== */

/* The recurrence is the reference's (er__dqlstm_run); its integer
 * products run here on the matrix-product GEMM: W and R of each direction
 * packed once as columns panels [K, 4H], activations (X for every step at
 * once, then each step's hidden state) packed per run, int32 sums out
 * (ER_QEPI_I32) with the input zero point folded into the corrections per
 * product. ddddocr's bidirectional 512-unit LSTM: 77 ms on the plain loops. */

typedef struct dql_mat {
  uint8_t *packed;            /* columns panels over all of K */
  int32_t *wsum, *wzs;        /* [4H]; wzs NULL when every zero point is 0 */
  int64_t k;
} dql_mat;

typedef struct dql_state {
  const er_qgemm_isa *isa;
  const er_vec_ops *vec;      /* the gates' vector sigmoid and tanh (lstm_cell) */
  int dirs;
  int64_t gh;
  dql_mat mats[2][2];         /* [W, R][direction] */
} dql_state;

static void dql_release(void *state) {
  dql_state *s = state;
  if (!s) return;
  for (int w = 0; w < 2; w++)
    for (int d = 0; d < 2; d++) {
      er__aligned_free(s->mats[w][d].packed);
      free(s->mats[w][d].wsum);
      free(s->mats[w][d].wzs);
    }
  free(s);
}

static bool dql_supports_with(const er_kernel_info *ki, const er_qgemm_isa *isa) {
  if (ki->n_in < 12 || !isa) return false;
  const er_tensor *x = ki->in[0];
  if (!x || x->dtype != ER_DTYPE_FLOAT) return false;
  for (int i = 1; i <= 2; i++) {
    const er_tensor *w = ki->in[i];
    if (!w || !w->data || !q8(w->dtype) || w->rank != 3 || !er__tensor_shape_known(w)) return false;
  }
  for (int i = 8; i <= 11; i++)
    if (!ki->in[i] || !ki->in[i]->data) return false;
  return true;
}

static er_status dql_pack(dql_state *s, const er_tensor *w, const er_tensor *zp, int d, dql_mat *m) {
  const er_qgemm_isa *isa = s->isa;
  const int64_t K = w->dims[1], GH = w->dims[2];
  const uint8_t flip = w->dtype == ER_DTYPE_UINT8 ? 0x80 : 0;
  size_t cpb = er__qgemm_col_panel_bytes(isa, K);
  int64_t panels = (GH + isa->nr - 1) / isa->nr;
  m->k = K;
  m->packed = er__aligned_alloc(cpb * (size_t)panels);
  m->wsum = calloc((size_t)GH, sizeof *m->wsum);
  m->wzs = calloc((size_t)GH, sizeof *m->wzs);
  if (!m->packed || !m->wsum || !m->wzs) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory packing DynamicQuantizeLSTM weights");
  er_qsrc src = {(const uint8_t *)w->data + (size_t)(d * K * GH), GH, 1, flip, true};
  for (int64_t q = 0; q < panels; q++)
    er__qgemm_pack_cols(isa, &src, q * isa->nr, (int)min64(isa->nr, GH - q * isa->nr), K,
                        m->packed + (size_t)q * cpb, m->wsum + q * isa->nr);
  bool any = false;
  for (int64_t n = 0; n < GH; n++) {
    /* uint8 weights shift by -128 and their zero points with them */
    m->wzs[n] = (int32_t)pval(zp, zp->rank == 2 ? d * GH + n : d) - (flip ? 128 : 0);
    if (m->wzs[n]) any = true;
  }
  if (!any) {
    free(m->wzs);
    m->wzs = NULL;
  }
  return ER_STATUS_OK;
}

static er_status dql_prepare_with(const er_kernel_info *ki, const er_qgemm_isa *isa, void **state_out,
                                  size_t *scratch_out) {
  dql_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory preparing DynamicQuantizeLSTM");
  s->isa = isa;
#if defined(__x86_64__) || defined(__i386__)
  s->vec = er__cpu_has_avx512(ki->cpu) ? &er__vec_avx512 : &er__vec_avx2;
#elif defined(__aarch64__)
  s->vec = &er__vec_neon;
#endif
  s->dirs = (int)ki->in[1]->dims[0];
  s->gh = ki->in[1]->dims[2];
  if (s->dirs < 1 || s->dirs > 2 || ki->in[2]->dims[0] != s->dirs || ki->in[2]->dims[2] != s->gh) {
    dql_release(s);
    return er__error(ER_STATUS_INVALID_SHAPE, "DynamicQuantizeLSTM '%s': W and R disagree", ki->node->name);
  }
  for (int w = 0; w < 2; w++)
    for (int d = 0; d < s->dirs; d++) {
      er_status st = dql_pack(s, ki->in[1 + w], ki->in[w ? 11 : 9], d, &s->mats[w][d]);
      if (st != ER_STATUS_OK) {
        dql_release(s);
        return st;
      }
    }
  *scratch_out = 0;
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct dql_rows {
  const er_qgemm_isa *isa;
  const uint8_t *a;           /* [m, K] */
  int64_t k;
} dql_rows;

static void dql_pack_rows(const void *vctx, int64_t i0, int64_t rows, void *dst, int32_t *sums) {
  const dql_rows *r = vctx;
  pack_act_rows(r->isa, r->a, r->k, 0, i0, rows, dst, sums);
}

/* What a run hands the products: the kernel run (pool), the state, a
 * buffer for the corrections, the GEMM's scratch, and the first error. */
typedef struct dql_run_ctx {
  const er_kernel_run *kr;
  const dql_state *s;
  int32_t *corr;              /* [4H] */
  uint8_t *gemm;              /* slots * gemm_bytes */
  size_t gemm_bytes;
  int slots;
  er_status st;
} dql_run_ctx;

static void dql_problem(const dql_state *s, const dql_mat *mat, const dql_rows *rows, int64_t m, int32_t *corr,
                        int32_t *acc, er_qgemm_problem *p) {
  er_qepi epi;
  memset(&epi, 0, sizeof epi);
  epi.kind = ER_QEPI_I32;
  epi.corr = corr;
  epi.wzp = mat->wzs;
  mm_problem(p, s->isa, m, s->gh, mat->k, dql_pack_rows, rows, mat->packed, &epi, acc);
}

static void dql_product(void *self, er_kctx *ctx, int which, int d, const uint8_t *a, int32_t az, int64_t m,
                        int32_t *acc) {
  (void)ctx;
  dql_run_ctx *rc = self;
  const dql_state *s = rc->s;
  const dql_mat *mat = &s->mats[which][d];
  if (rc->st != ER_STATUS_OK || m == 0) return;
  const uint32_t az_u = (uint32_t)az;
  for (int64_t n = 0; n < s->gh; n++)
    rc->corr[n] = (int32_t)(0u - az_u * (uint32_t)mat->wsum[n] +
                            (uint32_t)mat->k * az_u * (uint32_t)(mat->wzs ? mat->wzs[n] : 0));
  dql_rows rows = {s->isa, a, mat->k};
  er_qgemm_problem p;
  dql_problem(s, mat, &rows, m, rc->corr, acc, &p);
  if (er__qgemm_scratch_bytes(&p) > rc->gemm_bytes) {
    rc->st = er__error(ER_STATUS_INTERNAL, "DynamicQuantizeLSTM '%s': GEMM scratch larger than sized",
                       rc->kr->ctx->node->name);
    return;
  }
  er__qgemm_run(&p, rc->kr->pool, rc->gemm, rc->slots);
}

/* One buffer per run, from the run context's spill scratch (kept between
 * runs, so steady-state runs allocate nothing): the recurrence's scratch,
 * the corrections [4H] and the GEMM's per-worker scratch, sized for the
 * larger of the two products (all of X's steps at once). */
static er_status dql_run(const er_kernel_run *kr) {
  const dql_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  if (x->rank != 3) return er__kr_reference(kr);
  size_t rec = (er__dqlstm_scratch_bytes(ctx) + 63) / 64 * 64;
  size_t corr = ((size_t)s->gh * sizeof(int32_t) + 63) / 64 * 64;
  size_t gemm = 0;
  for (int w = 0; w < 2; w++) {
    er_qgemm_problem p;
    dql_rows rows = {s->isa, NULL, s->mats[w][0].k};
    dql_problem(s, &s->mats[w][0], &rows, w ? x->dims[1] : x->dims[0] * x->dims[1], NULL, NULL, &p);
    size_t b = er__qgemm_scratch_bytes(&p);
    if (b > gemm) gemm = b;
  }
  int slots = er__pool_threads(kr->pool);
  if (slots > ER_KERNEL_MAX_SLOTS) slots = ER_KERNEL_MAX_SLOTS;
  if (slots < 1) slots = 1;
  void *owned = NULL;
  uint8_t *buf = er__kr_spill(kr, rec + corr + gemm * (size_t)slots, &owned);
  if (!buf)
    return er__error(ER_STATUS_OUT_OF_MEMORY, "DynamicQuantizeLSTM '%s': out of memory for %zu bytes of scratch",
                     ctx->node->name, rec + corr + gemm * (size_t)slots);
  /* The recurrence leaves Y past each sequence's length (and Y_h, Y_c of
   * empty sequences) as it finds them, like the reference: zero first. */
  for (int i = 0; i < ctx->n_out; i++)
    if (ctx->out[i] && ctx->out[i]->data) memset(ctx->out[i]->data, 0, ctx->out[i]->nbytes);
  dql_run_ctx rc = {kr, s, (int32_t *)(void *)(buf + rec), buf + rec + corr, gemm, slots, ER_STATUS_OK};
  const er_dq_products prod = {dql_product, &rc, s->vec ? s->vec->lstm_cell : NULL};
  er_status st = er__dqlstm_run(ctx, &prod, buf);
  er__aligned_free(owned);
  return st != ER_STATUS_OK ? st : rc.st;
}

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

/* Each kernel runs its own ISA when the CPU has it; the table lists the
 * best first, so the choice at compile time takes it. */
#if defined(__x86_64__) || defined(__i386__)
static bool has_vnni(const er_cpu_features *c) { return er__cpu_has_avx512(c) && c->avx512vnni; }

static const er_qgemm_isa *conv_isa(const er_kernel_info *ki, bool vnni) {
  if (vnni) return has_vnni(ki->cpu) ? &er__qgemm_conv_avx512vnni : NULL;
  return er__cpu_has_avx2(ki->cpu) ? &er__qgemm_conv_avx2 : NULL;
}

/* AMX tiles (with the AVX-512 epilogue) where the OS granted them. */
static const er_qgemm_isa *conv_isa_amx(const er_kernel_info *ki, bool unused) {
  ER_UNUSED(unused);
  return ki->cpu->amx_int8 && has_vnni(ki->cpu) ? &er__qgemm_conv_amx : NULL;
}

/* Layers whose GEMM fills AMX's tiles: at least 32 output channels per
 * group in 32-row tiles at least 3/4 full, and a K (input channels x
 * taps) of at least 128, at least 3/4 of it real after padding to 64.
 * Smaller layers stay on VNNI, whose tiles are 8 x 32 with K in fours
 * and which reads its columns in place: MNIST's 1 -> 8 5x5 layer (K 25,
 * padded to 64; 8 of 32 rows) ran 2.4 times slower on AMX, MobileNetV2's
 * and the detector's narrow 1x1 layers 15-40% slower; ResNet-50's layers
 * twice as fast. */
static bool amx_fits(const er_kernel_info *ki, qg_op op) {
  const er_tensor *w = in_at(ki, layouts[op].w);
  if (!w || w->rank < 3 || !er__tensor_shape_known(w)) return false;
  er_kctx ctx = er__ki_ctx(ki);
  int64_t group = 1;
  if (er__attr_int(&ctx, "group", 1, &group) != ER_STATUS_OK || group < 1 || w->dims[0] % group != 0) return false;
  int64_t mg = w->dims[0] / group, k = 1;
  for (int d = 1; d < w->rank; d++) k *= w->dims[d];
  int64_t mp = (mg + 31) / 32 * 32, kp = (k + 63) / 64 * 64;
  return mg >= 32 && 4 * mg >= 3 * mp && k >= 128 && 4 * k >= 3 * kp;
}

static const er_qgemm_isa *mm_isa(const er_kernel_info *ki, bool vnni) {
  if (vnni) return has_vnni(ki->cpu) ? &er__qgemm_mm_avx512vnni : NULL;
  return er__cpu_has_avx2(ki->cpu) ? &er__qgemm_mm_avx2 : NULL;
}

/* The AVX2 vpmaddubsw tiles for weights that fit them: every weight, as
 * the tiles read it (uint8 weights shifted by -128), in [-64, 64], so no
 * pair of products can saturate int16 (qgemm-avx2.c). */
static bool w7_fits(const er_kernel_info *ki, qg_op op) {
  const er_tensor *w = in_at(ki, layouts[op].w);
  if (!w || !w->data || !q8(w->dtype) || !er__tensor_shape_known(w)) return false;
  const uint8_t *b = w->data;
  const uint8_t flip = w->dtype == ER_DTYPE_UINT8 ? 0x80 : 0;
  int64_t n = er__tensor_count(w);
  for (int64_t i = 0; i < n; i++) {
    int v = (int8_t)(uint8_t)(b[i] ^ flip);
    if (v < -64 || v > 64) return false;
  }
  return true;
}

static const er_qgemm_isa *w7_isa(const er_kernel_info *ki, bool conv) {
  if (!er__cpu_has_avx2(ki->cpu)) return NULL;
  return conv ? &er__qgemm_conv_avx2w7 : &er__qgemm_mm_avx2w7;
}
#endif
#if defined(ER_QGEMM_NEONDOT)
static const er_qgemm_isa *conv_isa(const er_kernel_info *ki, bool dot) {
  return dot && ki->cpu->neon && ki->cpu->dotprod ? &er__qgemm_conv_neondot : NULL;
}
static const er_qgemm_isa *mm_isa(const er_kernel_info *ki, bool dot) {
  return dot && ki->cpu->neon && ki->cpu->dotprod ? &er__qgemm_mm_neondot : NULL;
}
#endif

#define DEFINE_QG_KERNEL(SFX, OP, DOMAIN, QOP, ISA_FN, VNNI, NAME, RUN)                                     \
  static bool supports_##SFX(const er_kernel_info *ki) { return qg_supports(ki, QOP, ISA_FN(ki, VNNI)); }    \
  static er_status prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                   \
    return qg_prepare(ki, QOP, ISA_FN(ki, VNNI), NULL, st, scratch);                                       \
  }                                                                                                         \
  static const er_cpu_kernel k_##SFX = {NAME, OP, DOMAIN, supports_##SFX, prepare_##SFX,                     \
                                        RUN, qg_release};

#if defined(__x86_64__) || defined(__i386__)
/* The AMX kernels: the same, for the layers amx_fits takes. */
#define DEFINE_QG_AMX_KERNEL(SFX, OP, DOMAIN, QOP, NAME)                                                     \
  static bool supports_##SFX(const er_kernel_info *ki) {                                                    \
    return qg_supports(ki, QOP, conv_isa_amx(ki, true)) && amx_fits(ki, QOP);                               \
  }                                                                                                         \
  static er_status prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                   \
    return qg_prepare(ki, QOP, conv_isa_amx(ki, true), NULL, st, scratch);                                 \
  }                                                                                                         \
  static const er_cpu_kernel k_##SFX = {NAME, OP, DOMAIN, supports_##SFX, prepare_##SFX, conv_run_any, qg_release};
/* The AVX2 7-bit-weight kernels: the same, for weights w7_fits takes. */
#define DEFINE_QG_W7_KERNEL(SFX, OP, DOMAIN, QOP, NAME, RUN)                                                 \
  static bool supports_##SFX(const er_kernel_info *ki) {                                                    \
    return qg_supports(ki, QOP, w7_isa(ki, is_conv(QOP))) && w7_fits(ki, QOP);                              \
  }                                                                                                         \
  static er_status prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                   \
    return qg_prepare(ki, QOP, w7_isa(ki, is_conv(QOP)), NULL, st, scratch);                                \
  }                                                                                                         \
  static const er_cpu_kernel k_##SFX = {NAME, OP, DOMAIN, supports_##SFX, prepare_##SFX, RUN, qg_release};
DEFINE_QG_W7_KERNEL(qconv_w7, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, "q8_qconv_6x16w7__avx2", conv_run)
DEFINE_QG_W7_KERNEL(qlconv_w7, "QLinearConv", "", QG_QLINEARCONV, "q8_qlinearconv_6x16w7__avx2", conv_run)
DEFINE_QG_W7_KERNEL(convint_w7, "ConvInteger", "", QG_CONVINTEGER, "q8_convinteger_6x16w7__avx2", conv_run_any)
DEFINE_QG_W7_KERNEL(qmm_w7, "QMatMul", ER_QFUSED_DOMAIN, QG_QMATMUL, "q8_qmatmul_4x16w7__avx2", mm_run)
DEFINE_QG_W7_KERNEL(qlmm_w7, "QLinearMatMul", "", QG_QLINEARMATMUL, "q8_qlinearmatmul_4x16w7__avx2", mm_run)
DEFINE_QG_W7_KERNEL(mmint_w7, "MatMulInteger", "", QG_MATMULINTEGER, "q8_matmulinteger_4x16w7__avx2", mm_run_any)

DEFINE_QG_AMX_KERNEL(qconv_amx, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, "q8_qconv_32x32__amx")
DEFINE_QG_AMX_KERNEL(qlconv_amx, "QLinearConv", "", QG_QLINEARCONV, "q8_qlinearconv_32x32__amx")
DEFINE_QG_AMX_KERNEL(convint_amx, "ConvInteger", "", QG_CONVINTEGER, "q8_convinteger_32x32__amx")
DEFINE_QG_KERNEL(qconv_vnni, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, conv_isa, true, "q8_qconv_8x32__avx512vnni", conv_run)
DEFINE_QG_KERNEL(qlconv_vnni, "QLinearConv", "", QG_QLINEARCONV, conv_isa, true, "q8_qlinearconv_8x32__avx512vnni", conv_run)
DEFINE_QG_KERNEL(convint_vnni, "ConvInteger", "", QG_CONVINTEGER, conv_isa, true, "q8_convinteger_8x32__avx512vnni", conv_run_any)
DEFINE_QG_KERNEL(qmm_vnni, "QMatMul", ER_QFUSED_DOMAIN, QG_QMATMUL, mm_isa, true, "q8_qmatmul_4x64__avx512vnni", mm_run)
DEFINE_QG_KERNEL(qlmm_vnni, "QLinearMatMul", "", QG_QLINEARMATMUL, mm_isa, true, "q8_qlinearmatmul_4x64__avx512vnni", mm_run)
DEFINE_QG_KERNEL(mmint_vnni, "MatMulInteger", "", QG_MATMULINTEGER, mm_isa, true, "q8_matmulinteger_4x64__avx512vnni", mm_run_any)
DEFINE_QG_KERNEL(qconv_avx2, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, conv_isa, false, "q8_qconv_6x16__avx2", conv_run)
DEFINE_QG_KERNEL(qlconv_avx2, "QLinearConv", "", QG_QLINEARCONV, conv_isa, false, "q8_qlinearconv_6x16__avx2", conv_run)
DEFINE_QG_KERNEL(convint_avx2, "ConvInteger", "", QG_CONVINTEGER, conv_isa, false, "q8_convinteger_6x16__avx2", conv_run_any)
DEFINE_QG_KERNEL(qmm_avx2, "QMatMul", ER_QFUSED_DOMAIN, QG_QMATMUL, mm_isa, false, "q8_qmatmul_4x16__avx2", mm_run)
DEFINE_QG_KERNEL(qlmm_avx2, "QLinearMatMul", "", QG_QLINEARMATMUL, mm_isa, false, "q8_qlinearmatmul_4x16__avx2", mm_run)
DEFINE_QG_KERNEL(mmint_avx2, "MatMulInteger", "", QG_MATMULINTEGER, mm_isa, false, "q8_matmulinteger_4x16__avx2", mm_run_any)
#endif

/* Depthwise kernels: the epilogue of the ISA's conv GEMM, the loops of
 * its qelt table. */
#define DEFINE_DW_KERNEL(SFX, OP, QOP, VNNI, OPS, NAME)                                                     \
  static bool dw_supports_##SFX(const er_kernel_info *ki) {                                                  \
    return qg_supports(ki, QOP, conv_isa(ki, VNNI)) && is_depthwise(ki, QOP);                               \
  }                                                                                                         \
  static er_status dw_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                \
    return qg_prepare(ki, QOP, conv_isa(ki, VNNI), &OPS, st, scratch);                                     \
  }                                                                                                         \
  static const er_cpu_kernel k_dw_##SFX = {NAME, OP, QOP == QG_QCONV ? ER_QFUSED_DOMAIN : "", dw_supports_##SFX, \
                                           dw_prepare_##SFX, dw_run, qg_release};

#if defined(__x86_64__) || defined(__i386__)
/* The VBMI depthwise kernel: QConv with 8-bit output whose weights less
 * their zero points fit int8 and whose windows fit one 64-byte load. */
static bool dwv_supports(const er_kernel_info *ki) {
  if (!(qg_supports(ki, QG_QCONV, conv_isa(ki, true)) && is_depthwise(ki, QG_QCONV) && ki->cpu->avx512vbmi))
    return false;
  const qg_layout *L = &layouts[QG_QCONV];
  const er_tensor *w = in_at(ki, L->w), *wz = in_at(ki, L->w_zp);
  if (!in_at(ki, L->y_zp) || w->rank < 3 || w->dims[w->rank - 1] > 4 * ER_QDWV_MAX_GROUPS) return false;
  if (wz && (!wz->data || !er__tensor_shape_known(wz))) return false;
  er_kctx ctx = er__ki_ctx(ki);
  const int64_t *st = NULL, *dl = NULL;
  int64_t nst = 0, ndl = 0;
  er__attr_ints(&ctx, "strides", &st, &nst);
  er__attr_ints(&ctx, "dilations", &dl, &ndl);
  /* (absent: n is -1) */
  int64_t sw = st && nst > 0 ? st[nst - 1] : 1, dw = dl && ndl > 0 ? dl[ndl - 1] : 1, kw = w->dims[w->rank - 1];
  if (sw < 1 || dw < 1 || 15 * sw + (kw - 1) * dw >= 64) return false;
  bool w_u8 = w->dtype == ER_DTYPE_UINT8;
  int64_t C = w->dims[0], taps = er__tensor_count(w) / (C > 0 ? C : 1);
  for (int64_t c = 0; c < C; c++) {
    int32_t z = wz ? (int32_t)pval(wz, er__tensor_count(wz) > 1 ? c : 0) : 0;
    for (int64_t t = 0; t < taps; t++) {
      uint8_t b = ((const uint8_t *)w->data)[c * taps + t];
      int32_t v = (w_u8 ? (int32_t)b : (int32_t)(int8_t)b) - z;
      if (v < -128 || v > 127) return false;
    }
  }
  return true;
}

static er_status dwv_prepare(const er_kernel_info *ki, void **st, size_t *scratch) {
  ER_CHECK(qg_prepare(ki, QG_QCONV, conv_isa(ki, true), &er__qelt_avx512, st, scratch));
  qg_state *s = *st;
  const er_tensor *w = in_at(ki, layouts[QG_QCONV].w);
  const int64_t C = s->channels, taps = s->k, kw = w->dims[w->rank - 1], kh = taps / kw;
  const int groups = (int)((kw + 3) / 4);
  s->dwv_groups = groups;
  s->dwv_wq = calloc((size_t)(C * kh * groups), sizeof *s->dwv_wq);
  s->dwv_corr = malloc((size_t)C * sizeof *s->dwv_corr);
  if (!s->dwv_wq || !s->dwv_corr) {
    qg_release(s);
    *st = NULL;
    return oom(ki);
  }
  /* packed holds (w - w_zp) as floats, checked to fit int8 above. */
  const float *wf = s->packed;
  const int32_t pad_u = (int32_t)(uint8_t)(s->x_pad ^ s->x_flip);
  for (int64_t c = 0; c < C; c++) {
    int32_t sum = 0;
    for (int64_t ky = 0; ky < kh; ky++)
      for (int64_t kx = 0; kx < kw; kx++) {
        int32_t v = (int32_t)wf[c * taps + ky * kw + kx];
        sum += v;
        uint32_t *word = (uint32_t *)&s->dwv_wq[(c * kh + ky) * groups + kx / 4];
        *word |= (uint32_t)(uint8_t)(int8_t)v << (8 * (kx % 4));
      }
    s->dwv_corr[c] = s->corr[c] - pad_u * sum;
  }
  /* The plan for the shapes known now. */
  const er_tensor *x = in_at(ki, layouts[QG_QCONV].x), *y = ki->out[0];
  er_kctx ctx = er__ki_ctx(ki);
  er_window g;
  if (er__tensor_shape_known(x) && er__tensor_shape_known(y) && conv_geom(&ctx, s, x, y, &g)) {
    s->dwv_plan = malloc(sizeof *s->dwv_plan);
    s->dwv_widx = malloc(ER_QDWV_WIDX_BYTES);
    if (!s->dwv_plan || !s->dwv_widx) {
      qg_release(s);
      *st = NULL;
      return oom(ki);
    }
    er_qdwv_geom q = dwv_geom(&g);
    if (!er__qdwv_plan_build(s->dwv_plan, &q, groups, s->dwv_widx)) {
      free(s->dwv_plan);
      s->dwv_plan = NULL;
    }
  }
  return ER_STATUS_OK;
}

static const er_cpu_kernel k_dw_qconv_vbmi = {"q8_qconv_dw__avx512vbmi", "QConv", ER_QFUSED_DOMAIN, dwv_supports,
                                              dwv_prepare, dw_run, qg_release};

DEFINE_DW_KERNEL(qconv_512, "QConv", QG_QCONV, true, er__qelt_avx512, "q8_qconv_dw__avx512vnni")
DEFINE_DW_KERNEL(qlconv_512, "QLinearConv", QG_QLINEARCONV, true, er__qelt_avx512, "q8_qlinearconv_dw__avx512vnni")
DEFINE_DW_KERNEL(convint_512, "ConvInteger", QG_CONVINTEGER, true, er__qelt_avx512, "q8_convinteger_dw__avx512vnni")
DEFINE_DW_KERNEL(qconv_avx2, "QConv", QG_QCONV, false, er__qelt_avx2, "q8_qconv_dw__avx2")
DEFINE_DW_KERNEL(qlconv_avx2, "QLinearConv", QG_QLINEARCONV, false, er__qelt_avx2, "q8_qlinearconv_dw__avx2")
DEFINE_DW_KERNEL(convint_avx2, "ConvInteger", QG_CONVINTEGER, false, er__qelt_avx2, "q8_convinteger_dw__avx2")
#endif

#if defined(ER_QGEMM_NEONDOT)
DEFINE_QG_KERNEL(qconv_dot, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, conv_isa, true, "q8_qconv_8x8__neondot", conv_run)
DEFINE_QG_KERNEL(qlconv_dot, "QLinearConv", "", QG_QLINEARCONV, conv_isa, true, "q8_qlinearconv_8x8__neondot", conv_run)
DEFINE_QG_KERNEL(convint_dot, "ConvInteger", "", QG_CONVINTEGER, conv_isa, true, "q8_convinteger_8x8__neondot", conv_run_any)
DEFINE_QG_KERNEL(qmm_dot, "QMatMul", ER_QFUSED_DOMAIN, QG_QMATMUL, mm_isa, true, "q8_qmatmul_4x16__neondot", mm_run)
DEFINE_QG_KERNEL(qlmm_dot, "QLinearMatMul", "", QG_QLINEARMATMUL, mm_isa, true, "q8_qlinearmatmul_4x16__neondot", mm_run)
DEFINE_QG_KERNEL(mmint_dot, "MatMulInteger", "", QG_MATMULINTEGER, mm_isa, true, "q8_matmulinteger_4x16__neondot", mm_run_any)
#endif

#define DEFINE_DQL_KERNEL(SFX, VNNI, NAME)                                                                   \
  static bool dql_supports_##SFX(const er_kernel_info *ki) { return dql_supports_with(ki, mm_isa(ki, VNNI)); } \
  static er_status dql_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {               \
    return dql_prepare_with(ki, mm_isa(ki, VNNI), st, scratch);                                             \
  }                                                                                                         \
  static const er_cpu_kernel k_dql_##SFX = {NAME, "DynamicQuantizeLSTM", "com.microsoft", dql_supports_##SFX, \
                                            dql_prepare_##SFX, dql_run, dql_release};
#if defined(__x86_64__) || defined(__i386__)
DEFINE_DQL_KERNEL(vnni, true, "q8_dqlstm_4x64__avx512vnni")
DEFINE_DQL_KERNEL(avx2, false, "q8_dqlstm_4x16__avx2")
#endif
#if defined(ER_QGEMM_NEONDOT)
DEFINE_DQL_KERNEL(dot, true, "q8_dqlstm_4x16__neondot")
#endif

const er_cpu_kernel *const er__kernels_quant[] = {
#if defined(__x86_64__) || defined(__i386__)
    &k_dw_qconv_vbmi, &k_dw_qconv_512, &k_dw_qlconv_512, &k_dw_convint_512,
    &k_dw_qconv_avx2, &k_dw_qlconv_avx2, &k_dw_convint_avx2,
    &k_qconv_amx, &k_qlconv_amx, &k_convint_amx,
    &k_qconv_vnni, &k_qlconv_vnni, &k_convint_vnni, &k_qmm_vnni, &k_qlmm_vnni, &k_mmint_vnni,
    &k_qconv_w7, &k_qlconv_w7, &k_convint_w7, &k_qmm_w7, &k_qlmm_w7, &k_mmint_w7,
    &k_qconv_avx2, &k_qlconv_avx2, &k_convint_avx2, &k_qmm_avx2, &k_qlmm_avx2, &k_mmint_avx2,
    &k_dql_vnni, &k_dql_avx2,
#endif
#if defined(ER_QGEMM_NEONDOT)
    &k_qconv_dot, &k_qlconv_dot, &k_convint_dot, &k_qmm_dot, &k_qlmm_dot, &k_mmint_dot, &k_dql_dot,
#endif
    NULL,
};
