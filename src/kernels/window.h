/* window.h - the geometry of a 1-D or 2-D sliding window over NCHW data
 * (Conv, FusedConv, the pools), read from a node's attributes and its
 * input and output shapes the way the reference kernels (src/ops/conv.c)
 * read them. 1-D windows are 2-D ones with a height of 1. */
#ifndef ER_KERNELS_WINDOW_H
#define ER_KERNELS_WINDOW_H

#include "kernels/kutil.h"

typedef struct er_window {
  int64_t n, c, h, w;          /* input [N, C, H, W] */
  int64_t m, oh, ow;           /* output [N, M, OH, OW] */
  int64_t kh, kw;              /* taps */
  int64_t sh, sw, dh, dw;      /* strides, dilations */
  int64_t pt, pl;              /* padding before (top, left) in force */
  int64_t pb, pr;              /* padding after (bottom, right) in force */
  int64_t group;
} er_window;

/* Reads the attributes that do not depend on shapes and checks that the
 * window is one the kernels handle: 1 or 2 spatial axes (rank 3 or 4).
 * `kernel_from` is the weight tensor for convolutions (NULL for pools,
 * which take kernel_shape). Returns false when not handled. */
static inline bool er__window_attrs_ok(const er_kctx *ctx, int rank) {
  const int64_t *v;
  int64_t n;
  if (rank != 3 && rank != 4) return false;
  const char *names[] = {"kernel_shape", "strides", "dilations"};
  for (int i = 0; i < 3; i++) {
    if (er__attr_ints(ctx, names[i], &v, &n) != ER_STATUS_OK) return false;
    if (v && n != rank - 2) return false;
  }
  if (er__attr_ints(ctx, "pads", &v, &n) != ER_STATUS_OK) return false;
  if (v && n != 2 * (rank - 2)) return false;
  return true;
}

/* Fills the geometry from the node and fully known shapes: x is the input
 * [N, C, (H,) W], y the output, kernel dims from `w` ([M, C/g, (kh,) kw])
 * or from kernel_shape. The pads in force follow auto_pad exactly as the
 * reference computes them. */
static inline bool er__window_get(const er_kctx *ctx, const er_tensor *x, const er_tensor *w,
                                  const er_tensor *y, er_window *g) {
  int rank = x->rank;
  if (rank != 3 && rank != 4) return false;
  bool two = rank == 4;
  memset(g, 0, sizeof *g);
  g->n = x->dims[0];
  g->c = x->dims[1];
  g->h = two ? x->dims[2] : 1;
  g->w = x->dims[rank - 1];
  g->m = y->dims[1];
  g->oh = two ? y->dims[2] : 1;
  g->ow = y->dims[rank - 1];
  const int64_t *ks, *st, *dl, *pads;
  int64_t nks, nst, ndl, npads, group;
  const char *ap;
  if (er__attr_ints(ctx, "kernel_shape", &ks, &nks) != ER_STATUS_OK ||
      er__attr_ints(ctx, "strides", &st, &nst) != ER_STATUS_OK ||
      er__attr_ints(ctx, "dilations", &dl, &ndl) != ER_STATUS_OK ||
      er__attr_ints(ctx, "pads", &pads, &npads) != ER_STATUS_OK ||
      er__attr_string(ctx, "auto_pad", "NOTSET", &ap) != ER_STATUS_OK ||
      er__attr_int(ctx, "group", 1, &group) != ER_STATUS_OK)
    return false;
  int nsp = rank - 2;
  if ((ks && nks != nsp) || (st && nst != nsp) || (dl && ndl != nsp) || (pads && npads != 2 * nsp)) return false;
  g->group = group;
  if (w) {
    g->kh = two ? w->dims[2] : 1;
    g->kw = w->dims[rank - 1];
  } else {
    if (!ks) return false;
    g->kh = two ? ks[0] : 1;
    g->kw = ks[nsp - 1];
  }
  g->sh = two && st ? st[0] : 1;
  g->sw = st ? st[nsp - 1] : 1;
  g->dh = two && dl ? dl[0] : 1;
  g->dw = dl ? dl[nsp - 1] : 1;
  int64_t in[2] = {g->h, g->w}, out[2] = {g->oh, g->ow}, k[2] = {g->kh, g->kw};
  int64_t s[2] = {g->sh, g->sw}, d[2] = {g->dh, g->dw}, pb[2] = {0, 0}, pe[2] = {0, 0};
  for (int a = two ? 0 : 1; a < 2; a++) {
    int ai = two ? a : 0; /* attribute index */
    if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
      int64_t total = (out[a] - 1) * s[a] + (k[a] - 1) * d[a] + 1 - in[a];
      if (total < 0) total = 0;
      pb[a] = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
      pe[a] = total - pb[a];
    } else if (strcmp(ap, "VALID") == 0) {
      pb[a] = pe[a] = 0;
    } else {
      pb[a] = pads ? pads[ai] : 0;
      pe[a] = pads ? pads[ai + nsp] : 0;
    }
  }
  g->pt = pb[0];
  g->pl = pb[1];
  g->pb = pe[0];
  g->pr = pe[1];
  return g->kh > 0 && g->kw > 0 && g->sh > 0 && g->sw > 0 && g->dh > 0 && g->dw > 0 && g->group > 0;
}

/* A column image (W = 1, a k x 1 window, no padding left or right: a 1-D
 * convolution exported with time on H, as TF/JAX write them) as the row
 * image it is in memory: [..][H][1] is [..][1][H], and a weight's taps run
 * in the same order either way. Kernels that work along rows (tiles of a
 * row's pixels, im2col segments of a row) would otherwise take one pixel
 * at a time. */
static inline void er__window_column_as_row(er_window *g) {
  if (g->w != 1 || g->ow != 1 || g->kw != 1 || g->pl != 0 || g->pr != 0 || g->h <= 1) return;
  er_window t = *g;
  g->h = t.w, g->w = t.h, g->oh = t.ow, g->ow = t.oh, g->kh = t.kw, g->kw = t.kh;
  g->sh = t.sw, g->sw = t.sh, g->dh = t.dw, g->dw = t.dh;
  g->pt = t.pl, g->pl = t.pt, g->pb = t.pr, g->pr = t.pb;
}

#endif /* ER_KERNELS_WINDOW_H */
