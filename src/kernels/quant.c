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
#include "kernels/quant-impl.h"
#include "kernels/qelt.h"
#include "kernels/qgemm.h"
#include "kernels/vec.h"
#include "kernels/window.h"
#include "ops/qfused.h"

/* ======================================================================== */
/* The node, read once                                                       */
/* ======================================================================== */

/* A constant with data, of one value or `len` values (len < 0: any). */
static bool const_vec(const er_tensor *t, int64_t len) {
  if (!t || !t->data) return false;
  int64_t n = er__tensor_count(t);
  return n == 1 || (len >= 0 && n == len && t->rank == 1);
}

/* QLinearConv's and QLinearMatMul's multiplier, as their reference
 * computes it: the float product of the scales, then the float quotient. */
static double qlinear_mult(const er_tensor *xs, const er_tensor *ws, const er_tensor *ys, int64_t c) {
  return (float)((double)(float)(pval(xs, 0) * pval(ws, c)) / pval(ys, 0));
}

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
        er__q8_is_depthwise(ki, op))
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
/* Matrix product                                                            */
/* ======================================================================== */

typedef struct mm_pack_ctx {
  const qg_state *s;
  const uint8_t *a;          /* [M, K] */
} mm_pack_ctx;

/* Rows [i0, i0 + rows) of activations a [M, k] as rows panels. */
void er__q8_pack_act_rows(const er_qgemm_isa *isa, const uint8_t *a, int64_t k, uint8_t flip, int64_t i0,
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
  er__q8_pack_act_rows(mc->s->isa, mc->a, mc->s->k, mc->s->x_flip, i0, rows, dst, sums);
}

/* A matrix product of activation rows (packed per block by pack_rows)
 * and prepacked weight columns, into C [m, n]. */
void er__q8_mm_problem(er_qgemm_problem *p, const er_qgemm_isa *isa, int64_t m, int64_t n, int64_t k,
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
  er__q8_mm_problem(&p, s->isa, m, s->channels, s->k, mm_pack, &mc, s->packed, &s->epi, y->data);
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

/* A convolution's weights packed as the GEMM's rows panels (in place:
 * reordered to [m][channel group][tap][KG] first), their sums per channel
 * into wsum, the 3x3 planes' edge corrections and the transposed tile's
 * columns panels where they will run. */
static er_status pack_conv_weights(const er_kernel_info *ki, qg_state *s, const er_tensor *x, const er_tensor *w,
                                   const er_tensor *yz, bool any_wz, int32_t xz_u, int32_t *wsum) {
  const er_qgemm_isa *isa = s->isa;
  const qg_op op = s->op;
  const int64_t C = s->channels, K = s->k, group = s->group;
  er_kctx ctx = er__ki_ctx(ki);
  int64_t mg = C / group, cg = w->dims[1], khw = K / cg;
  /* In place for windows larger than one pixel, where it saves
   * rereading each input byte kh * kw times; a 1x1 window packs each
   * byte once either way, and packed panels read sequentially. Weight
   * zero points need the activation sums, which the planes give too
   * (er__q8_grouped_asum). */
  /* 1x1 layers too on AVX2's 7-bit tiles (6 x 16, KG 4), whose grouped
   * planes are built in whole vectors: they beat packed panels there
   * (1 thread, Zen 3: 384 -> 64 at 14x14 0.091 -> 0.082 ms, 64 -> 128
   * stride 2 at 56x56 0.171 -> 0.151 ms, none slower), and the
   * transposed tile reads them where it runs (small maps: er__q8_px_wins). */
  er_window g;
  const er_tensor *y = ki->out[0];
  const bool px_ok = (isa->px_tile || isa->px_row_tile) && op == QG_QCONV && yz && !any_wz &&
                     er__tensor_shape_known(x) && er__tensor_shape_known(y) && er__q8_conv_geom(&ctx, s, x, y, &g);
  s->cq = (cg + isa->kg - 1) / isa->kg;
  s->inplace = isa->tile_ind && (khw > 1 || isa->px_tile || isa->px_row_tile || (px_ok && er__q8_px_wins(s, &g)));
  /* In place: weights reordered to [m][channel group][tap][KG], zero
   * for the channels past Cg. */
  int64_t kp = s->inplace ? s->cq * khw * isa->kg : K;
  uint8_t *reordered = NULL;
  if (s->inplace) {
    reordered = calloc((size_t)(C * kp), 1);
    if (!reordered) return oom(ki);
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
  if (reordered && px_ok && er__q8_px_wins(s, &g)) {
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
  return ER_STATUS_OK;
}

/* The requantization epilogue of the node's op: scales and offsets per
 * channel, the output type's range and clamps. */
static er_status set_epilogue(const er_kernel_info *ki, qg_state *s, const er_tensor *yz) {
  const qg_layout *L = &layouts[s->op];
  const qg_op op = s->op;
  const int64_t C = s->channels;
  er_kctx ctx = er__ki_ctx(ki);
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
      return oom(ki);
    }
    for (int64_t c = 0; c < C; c++) s->mult_d[c] = qlinear_mult(xs, ws, ys, c);
    e->kind = ER_QEPI_QLINEAR;
    e->mult_d = s->mult_d;
  } else {
    e->kind = ER_QEPI_I32;
  }
  return ER_STATUS_OK;
}

/* The depthwise kernel's weights with channels in lanes, and the
 * scratch a run needs when the shapes are known (0 otherwise). */
static er_status prepare_scratch(const er_kernel_info *ki, qg_state *s, const er_tensor *x, size_t *scratch_out) {
  const er_qgemm_isa *isa = s->isa;
  const er_qelt_ops *dw = s->dw;
  const int64_t C = s->channels, K = s->k;
  er_kctx ctx = er__ki_ctx(ki);
  *scratch_out = 0;
  const er_tensor *y = ki->out[0];
  if (dw && s->epi.kind == ER_QEPI_Q8 && dw->dw_block && C >= dw->dwc_lanes / 2) {
    /* Channels in lanes: at least half a vector of channels (fewer run a
     * plane at a time). */
    const int64_t lanes = dw->dwc_lanes, blocks = (C + lanes - 1) / lanes;
    s->dwc_w = er__aligned_alloc((size_t)(blocks * K * lanes) * sizeof *s->dwc_w);
    if (!s->dwc_w) return oom(ki);
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
    if (er__tensor_shape_known(x) && er__tensor_shape_known(y) && er__q8_conv_geom(&ctx, s, x, y, &g))
      *scratch_out = er__q8_dw_slot_bytes(s, &g) * (size_t)s->slots;
  } else if (s->conv) {
    er_window g;
    if (er__tensor_shape_known(x) && er__tensor_shape_known(y) && er__q8_conv_geom(&ctx, s, x, y, &g)) {
      er_qgemm_problem p;
      conv_pack_ctx cc;
      er__q8_conv_problem(s, &g, 0, &cc, NULL, NULL, NULL, 0, &p);
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
  return ER_STATUS_OK;
}

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
    er_status st = pack_conv_weights(ki, s, x, w, yz, any_wz, xz_u, wsum);
    if (st != ER_STATUS_OK) {
      free(wsum);
      if (!any_wz) free(wz_s);
      qg_release(s);
      return st;
    }
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
  er_status st = set_epilogue(ki, s, yz);
  if (st != ER_STATUS_OK) {
    qg_release(s);
    return st;
  }
  /* Scratch, when the shapes are known. */
  st = prepare_scratch(ki, s, x, scratch_out);
  if (st != ER_STATUS_OK) {
    qg_release(s);
    return st;
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
er_status er__q8_dyn_xz_run(const er_kernel_run *kr, er_status (*run)(const er_kernel_run *)) {
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

static er_status conv_run_any(const er_kernel_run *kr) { return er__q8_dyn_xz_run(kr, er__q8_conv_run); }
static er_status mm_run_any(const er_kernel_run *kr) { return er__q8_dyn_xz_run(kr, mm_run); }

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
DEFINE_QG_W7_KERNEL(qconv_w7, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, "q8_qconv_6x16w7__avx2", er__q8_conv_run)
DEFINE_QG_W7_KERNEL(qlconv_w7, "QLinearConv", "", QG_QLINEARCONV, "q8_qlinearconv_6x16w7__avx2", er__q8_conv_run)
DEFINE_QG_W7_KERNEL(convint_w7, "ConvInteger", "", QG_CONVINTEGER, "q8_convinteger_6x16w7__avx2", conv_run_any)
DEFINE_QG_W7_KERNEL(qmm_w7, "QMatMul", ER_QFUSED_DOMAIN, QG_QMATMUL, "q8_qmatmul_4x16w7__avx2", mm_run)
DEFINE_QG_W7_KERNEL(qlmm_w7, "QLinearMatMul", "", QG_QLINEARMATMUL, "q8_qlinearmatmul_4x16w7__avx2", mm_run)
DEFINE_QG_W7_KERNEL(mmint_w7, "MatMulInteger", "", QG_MATMULINTEGER, "q8_matmulinteger_4x16w7__avx2", mm_run_any)

DEFINE_QG_AMX_KERNEL(qconv_amx, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, "q8_qconv_32x32__amx")
DEFINE_QG_AMX_KERNEL(qlconv_amx, "QLinearConv", "", QG_QLINEARCONV, "q8_qlinearconv_32x32__amx")
DEFINE_QG_AMX_KERNEL(convint_amx, "ConvInteger", "", QG_CONVINTEGER, "q8_convinteger_32x32__amx")
DEFINE_QG_KERNEL(qconv_vnni, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, conv_isa, true, "q8_qconv_8x32__avx512vnni", er__q8_conv_run)
DEFINE_QG_KERNEL(qlconv_vnni, "QLinearConv", "", QG_QLINEARCONV, conv_isa, true, "q8_qlinearconv_8x32__avx512vnni", er__q8_conv_run)
DEFINE_QG_KERNEL(convint_vnni, "ConvInteger", "", QG_CONVINTEGER, conv_isa, true, "q8_convinteger_8x32__avx512vnni", conv_run_any)
DEFINE_QG_KERNEL(qmm_vnni, "QMatMul", ER_QFUSED_DOMAIN, QG_QMATMUL, mm_isa, true, "q8_qmatmul_4x64__avx512vnni", mm_run)
DEFINE_QG_KERNEL(qlmm_vnni, "QLinearMatMul", "", QG_QLINEARMATMUL, mm_isa, true, "q8_qlinearmatmul_4x64__avx512vnni", mm_run)
DEFINE_QG_KERNEL(mmint_vnni, "MatMulInteger", "", QG_MATMULINTEGER, mm_isa, true, "q8_matmulinteger_4x64__avx512vnni", mm_run_any)
DEFINE_QG_KERNEL(qconv_avx2, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, conv_isa, false, "q8_qconv_6x16__avx2", er__q8_conv_run)
DEFINE_QG_KERNEL(qlconv_avx2, "QLinearConv", "", QG_QLINEARCONV, conv_isa, false, "q8_qlinearconv_6x16__avx2", er__q8_conv_run)
DEFINE_QG_KERNEL(convint_avx2, "ConvInteger", "", QG_CONVINTEGER, conv_isa, false, "q8_convinteger_6x16__avx2", conv_run_any)
DEFINE_QG_KERNEL(qmm_avx2, "QMatMul", ER_QFUSED_DOMAIN, QG_QMATMUL, mm_isa, false, "q8_qmatmul_4x16__avx2", mm_run)
DEFINE_QG_KERNEL(qlmm_avx2, "QLinearMatMul", "", QG_QLINEARMATMUL, mm_isa, false, "q8_qlinearmatmul_4x16__avx2", mm_run)
DEFINE_QG_KERNEL(mmint_avx2, "MatMulInteger", "", QG_MATMULINTEGER, mm_isa, false, "q8_matmulinteger_4x16__avx2", mm_run_any)
#endif

/* Depthwise kernels: the epilogue of the ISA's conv GEMM, the loops of
 * its qelt table. */
#define DEFINE_DW_KERNEL(SFX, OP, QOP, VNNI, OPS, NAME)                                                     \
  static bool dw_supports_##SFX(const er_kernel_info *ki) {                                                  \
    return qg_supports(ki, QOP, conv_isa(ki, VNNI)) && er__q8_is_depthwise(ki, QOP);                               \
  }                                                                                                         \
  static er_status dw_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {                \
    return qg_prepare(ki, QOP, conv_isa(ki, VNNI), &OPS, st, scratch);                                     \
  }                                                                                                         \
  static const er_cpu_kernel k_dw_##SFX = {NAME, OP, QOP == QG_QCONV ? ER_QFUSED_DOMAIN : "", dw_supports_##SFX, \
                                           dw_prepare_##SFX, er__q8_dw_run, qg_release};

#if defined(__x86_64__) || defined(__i386__)
/* The VBMI depthwise kernel: QConv with 8-bit output whose weights less
 * their zero points fit int8 and whose windows fit one 64-byte load. */
static bool dwv_supports(const er_kernel_info *ki) {
  if (!(qg_supports(ki, QG_QCONV, conv_isa(ki, true)) && er__q8_is_depthwise(ki, QG_QCONV) && ki->cpu->avx512vbmi))
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
  if (er__tensor_shape_known(x) && er__tensor_shape_known(y) && er__q8_conv_geom(&ctx, s, x, y, &g)) {
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
                                              dwv_prepare, er__q8_dw_run, qg_release};

DEFINE_DW_KERNEL(qconv_512, "QConv", QG_QCONV, true, er__qelt_avx512, "q8_qconv_dw__avx512vnni")
DEFINE_DW_KERNEL(qlconv_512, "QLinearConv", QG_QLINEARCONV, true, er__qelt_avx512, "q8_qlinearconv_dw__avx512vnni")
DEFINE_DW_KERNEL(convint_512, "ConvInteger", QG_CONVINTEGER, true, er__qelt_avx512, "q8_convinteger_dw__avx512vnni")
DEFINE_DW_KERNEL(qconv_avx2, "QConv", QG_QCONV, false, er__qelt_avx2, "q8_qconv_dw__avx2")
DEFINE_DW_KERNEL(qlconv_avx2, "QLinearConv", QG_QLINEARCONV, false, er__qelt_avx2, "q8_qlinearconv_dw__avx2")
DEFINE_DW_KERNEL(convint_avx2, "ConvInteger", QG_CONVINTEGER, false, er__qelt_avx2, "q8_convinteger_dw__avx2")
#endif

#if defined(ER_QGEMM_NEONDOT)
DEFINE_QG_KERNEL(qconv_dot, "QConv", ER_QFUSED_DOMAIN, QG_QCONV, conv_isa, true, "q8_qconv_8x8__neondot", er__q8_conv_run)
DEFINE_QG_KERNEL(qlconv_dot, "QLinearConv", "", QG_QLINEARCONV, conv_isa, true, "q8_qlinearconv_8x8__neondot", er__q8_conv_run)
DEFINE_QG_KERNEL(convint_dot, "ConvInteger", "", QG_CONVINTEGER, conv_isa, true, "q8_convinteger_8x8__neondot", conv_run_any)
DEFINE_QG_KERNEL(qmm_dot, "QMatMul", ER_QFUSED_DOMAIN, QG_QMATMUL, mm_isa, true, "q8_qmatmul_4x16__neondot", mm_run)
DEFINE_QG_KERNEL(qlmm_dot, "QLinearMatMul", "", QG_QLINEARMATMUL, mm_isa, true, "q8_qlinearmatmul_4x16__neondot", mm_run)
DEFINE_QG_KERNEL(mmint_dot, "MatMulInteger", "", QG_MATMULINTEGER, mm_isa, true, "q8_matmulinteger_4x16__neondot", mm_run_any)
#endif

#define DEFINE_DQL_KERNEL(SFX, VNNI, NAME)                                                                   \
  static bool dql_supports_##SFX(const er_kernel_info *ki) { return er__q8_dql_supports_with(ki, mm_isa(ki, VNNI)); } \
  static er_status dql_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {               \
    return er__q8_dql_prepare_with(ki, mm_isa(ki, VNNI), st, scratch);                                             \
  }                                                                                                         \
  static const er_cpu_kernel k_dql_##SFX = {NAME, "DynamicQuantizeLSTM", "com.microsoft", dql_supports_##SFX, \
                                            dql_prepare_##SFX, er__q8_dql_run, er__q8_dql_release};
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
