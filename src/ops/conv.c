/* conv.c - operators of the "conv" group: Conv, ConvTranspose, the window
 * pools (AveragePool, MaxPool, LpPool), the global pools, MaxUnpool and
 * Col2Im.
 *
 * Every op here works on channel-first tensors [N, C, D1, ..., Dn] with
 * n >= 1 spatial axes. Convolution is im2col plus a matrix product: the
 * patches a group of output rows needs are copied into a column buffer
 * [C/group * prod(kernel), rows * W_out] and multiplied by the weights
 * [M/group, C/group * prod(kernel)]. ConvTranspose runs the same pieces the
 * other way round (matrix product, then col2im scatter-add). float32
 * computes in float32 (as every runtime does); float64 in double; float16
 * and bfloat16 are widened to float32 and rounded once on store. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"
#include "ops/conv-impl.h"

/* The largest kernel, stride, dilation or pad value accepted. Real models
 * use single or double digits; the cap keeps every product of two such
 * values and a tensor dim inside int64. */
#define CONV_MAX_ATTR_VALUE INT64_C(0x7fffffff)

/* Column buffers hold about this many elements per tile (256 K floats,
 * 1 MiB): large enough that the matrix product runs long rows, small enough
 * to stay in the last-level cache. */
#define CONV_TILE_ELEMENTS (INT64_C(1) << 18)
/* ...but a tile spans at least this many output positions, so deep layers
 * with long weight rows still get a useful inner loop. */
#define CONV_TILE_MIN_COLUMNS 256

/* ======================================================================== */
/* Matrix product kernels                                                    */
/* ======================================================================== */

/* The products are the shared reference ones (ref-gemm.c), through one
 * signature for both element types. */
static void gemm_f32(int64_t M, int64_t N, int64_t K, const void *A, int64_t sam, int64_t sak, const void *B,
                     int64_t ldb, void *C, int64_t ldc) {
  er__ref_gemm_f32(M, N, K, A, sam, sak, B, ldb, C, ldc);
}

static void gemm_f64(int64_t M, int64_t N, int64_t K, const void *A, int64_t sam, int64_t sak, const void *B,
                     int64_t ldb, void *C, int64_t ldc) {
  er__ref_gemm_f64(M, N, K, A, sam, sak, B, ldb, C, ldc);
}

typedef void (*gemm_fn)(int64_t M, int64_t N, int64_t K, const void *A, int64_t sam, int64_t sak,
                        const void *B, int64_t ldb, void *C, int64_t ldc);

/* ======================================================================== */
/* Small helpers                                                             */
/* ======================================================================== */

/* Stores n float32 values into a float16 / bfloat16 / float64 tensor. */
static void store_f32(er_tensor *t, const float *v, int64_t n) {
  uint16_t *h = t->data;
  switch (t->dtype) {
    case ER_DTYPE_FLOAT16:
      for (int64_t i = 0; i < n; i++) h[i] = er__f32_to_f16(v[i]);
      break;
    case ER_DTYPE_BFLOAT16:
      for (int64_t i = 0; i < n; i++) h[i] = er__f32_to_bf16(v[i]);
      break;
    default:
      for (int64_t i = 0; i < n; i++) er__store_f64(t->data, t->dtype, i, v[i]);
  }
}

/* ======================================================================== */
/* Window attributes: kernel_shape, strides, dilations, pads, auto_pad       */
/* ======================================================================== */

/* Reads an INTS attribute that must hold `per_axis` values per spatial
 * axis (nsp < 0: not known yet; *nsp is then set from the attribute's
 * length), each in [lo, CONV_MAX_ATTR_VALUE], into vals[per_axis *
 * ER_MAX_RANK]; absent leaves every entry at `def`. */
static er_status read_axis_ints(const er_kctx *ctx, const char *name, int per_axis, int64_t lo,
                                int64_t def, int *nsp, int64_t *vals, bool *present) {
  const int64_t *v;
  int64_t n;
  ER_CHECK(er__attr_ints(ctx, name, &v, &n));
  for (int i = 0; i < per_axis * ER_MAX_RANK; i++) vals[i] = def;
  if (present) *present = v != NULL;
  if (!v) return ER_STATUS_OK;
  if (*nsp < 0) {
    if (n % per_axis != 0 || n / per_axis < 1 || n / per_axis > ER_MAX_RANK - 2)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "%s has %lld values; expected %d per spatial axis, for 1 to %d axes", name,
                          (long long)n, per_axis, ER_MAX_RANK - 2);
    *nsp = (int)(n / per_axis);
  }
  if (n != (int64_t)*nsp * per_axis)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "%s has %lld values but the input has %d spatial axes (expected %d)", name,
                        (long long)n, *nsp, *nsp * per_axis);
  for (int64_t i = 0; i < n; i++) {
    if (v[i] < lo || v[i] > CONV_MAX_ATTR_VALUE)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "%s[%lld] = %lld; it must be %s", name,
                          (long long)i, (long long)v[i],
                          lo > 0 ? "positive (and below 2^31)" : "non-negative (and below 2^31)");
    vals[i] = v[i];
  }
  return ER_STATUS_OK;
}

/* Reads and validates the window attributes. `nsp` is the spatial rank if
 * known from the inputs (else -1; then it is taken from the attributes).
 * `need_kernel`: kernel_shape is required (pools). */
er_status er__opconv_read_window(const er_kctx *ctx, int nsp, bool need_kernel, window *w) {
  int64_t pads[2 * ER_MAX_RANK];
  bool has_pads;
  memset(w, 0, sizeof *w);
  if (nsp > ER_MAX_RANK - 2)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%d spatial axes; at most %d (ER_MAX_RANK)", nsp,
                        ER_MAX_RANK - 2);
  ER_CHECK(read_axis_ints(ctx, "kernel_shape", 1, 1, -1, &nsp, w->kernel, &w->has_kernel));
  if (need_kernel && !w->has_kernel)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute kernel_shape is required");
  ER_CHECK(read_axis_ints(ctx, "strides", 1, 1, 1, &nsp, w->stride, NULL));
  ER_CHECK(read_axis_ints(ctx, "dilations", 1, 1, 1, &nsp, w->dilation, NULL));
  ER_CHECK(read_axis_ints(ctx, "pads", 2, 0, 0, &nsp, pads, &has_pads));
  for (int i = 0; i < ER_MAX_RANK; i++) w->pad_begin[i] = w->pad_end[i] = 0;
  for (int i = 0; has_pads && i < nsp; i++) {
    w->pad_begin[i] = pads[i];
    w->pad_end[i] = pads[nsp + i];
  }
  w->nsp = nsp;

  const char *ap;
  ER_CHECK(er__attr_string(ctx, "auto_pad", "NOTSET", &ap));
  if (strcmp(ap, "NOTSET") == 0 || ap[0] == '\0') w->autopad = AUTO_PAD_NOTSET;
  else if (strcmp(ap, "VALID") == 0) w->autopad = AUTO_PAD_VALID;
  else if (strcmp(ap, "SAME_UPPER") == 0) w->autopad = AUTO_PAD_SAME_UPPER;
  else if (strcmp(ap, "SAME_LOWER") == 0) w->autopad = AUTO_PAD_SAME_LOWER;
  else
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "auto_pad '%s' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", ap);
  return ER_STATUS_OK;
}

/* Output extent of spatial axis `d` for input extent `in` and kernel `k`
 * (both >= 0), with the pads in force written to *pb / *pe. Shared by Conv
 * and the pools; `ceil_mode` only matters for explicit pads. */
er_status er__opconv_window_output(const er_kctx *ctx, const window *w, int d, int64_t in, int64_t k,
                               int64_t *out, int64_t *pb, int64_t *pe) {
  int64_t s = w->stride[d], dk = (k - 1) * w->dilation[d] + 1;
  switch (w->autopad) {
    case AUTO_PAD_SAME_UPPER:
    case AUTO_PAD_SAME_LOWER: {
      *out = ceil_div(in, s);
      int64_t total = (*out - 1) * s + dk - in;
      if (total < 0) total = 0;
      *pb = w->autopad == AUTO_PAD_SAME_UPPER ? total / 2 : total - total / 2;
      *pe = total - *pb;
      break;
    }
    case AUTO_PAD_VALID:
    case AUTO_PAD_NOTSET: {
      *pb = w->autopad == AUTO_PAD_VALID ? 0 : w->pad_begin[d];
      *pe = w->autopad == AUTO_PAD_VALID ? 0 : w->pad_end[d];
      int64_t span = in + *pb + *pe - dk;
      if (span < 0)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "spatial axis %d: input extent %lld with pads %lld+%lld is smaller than "
                            "the dilated kernel extent %lld",
                            d, (long long)in, (long long)*pb, (long long)*pe, (long long)dk);
      if (w->ceil_mode) {
        *out = ceil_div(span, s) + 1;
        /* A last window that would start in the end padding is dropped. */
        if ((*out - 1) * s >= in + *pb) (*out)--;
      } else {
        *out = span / s + 1;
      }
      break;
    }
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* im2col and col2im                                                         */
/* ======================================================================== */

/* The geometry shared by im2col and col2im. The "image" has `channels`
 * planes of extents image[]; the "grid" (Conv's output, ConvTranspose's
 * input, Col2Im's blocks) has extents grid[]. Tap q of the kernel at grid
 * point o touches image point o*stride - pad + q*dilation (per axis). The
 * column matrix is [channels * kernel_count, grid points], rows ordered
 * (channel, kernel taps row-major). */
typedef struct patch_geom {
  int nsp;
  int64_t channels;
  int64_t image[ER_MAX_RANK];   /* [nsp] */
  int64_t grid[ER_MAX_RANK];    /* [nsp] */
  int64_t kernel[ER_MAX_RANK];  /* [nsp] */
  int64_t stride[ER_MAX_RANK], dilation[ER_MAX_RANK], pad[ER_MAX_RANK]; /* pad: begin */
  int64_t image_count, grid_count, kernel_count;                      /* products */
} patch_geom;

static void patch_finish(patch_geom *g) {
  g->image_count = prod(g->nsp, g->image);
  g->grid_count = prod(g->nsp, g->grid);
  g->kernel_count = prod(g->nsp, g->kernel);
}

/* Grid "rows": lines along the last axis. Tiles are whole rows. */
static int64_t patch_rows(const patch_geom *g) {
  int64_t w = g->grid[g->nsp - 1];
  return w > 0 ? g->grid_count / w : 0;
}

/* One segment of the column matrix: for channel c, kernel taps kq[] and the
 * grid row whose outer coordinates are oc[], the image index touched by the
 * grid point at last-axis position ow is base + ow*stride, valid for ow in
 * [*lo, *hi). Returns false when the outer axes fall outside the image. */
static bool patch_segment(const patch_geom *g, int64_t c, const int64_t *kq, const int64_t *oc,
                          int64_t *base, int64_t *lo, int64_t *hi) {
  int last = g->nsp - 1;
  int64_t off = c;
  for (int d = 0; d < last; d++) {
    int64_t i = oc[d] * g->stride[d] - g->pad[d] + kq[d] * g->dilation[d];
    if (i < 0 || i >= g->image[d]) return false;
    off = off * g->image[d] + i;
  }
  int64_t wimg = g->image[last], s = g->stride[last], gw = g->grid[last];
  int64_t b0 = kq[last] * g->dilation[last] - g->pad[last]; /* image index at ow = 0 */
  int64_t l = b0 >= 0 ? 0 : ceil_div(-b0, s);
  int64_t h = wimg - b0 > 0 ? ceil_div(wimg - b0, s) : 0;
  if (h > gw) h = gw;
  if (l > gw) l = gw;
  if (h < l) h = l;
  *base = off * wimg + b0;
  *lo = l;
  *hi = h;
  return true;
}

static void counter_set(int n, const int64_t *dims, int64_t flat, int64_t *idx) {
  for (int d = n - 1; d >= 0; d--) {
    idx[d] = dims[d] > 0 ? flat % dims[d] : 0;
    flat = dims[d] > 0 ? flat / dims[d] : 0;
  }
}

/* Copies the patches of grid rows [row0, row0 + rows) into col
 * [channels * kernel_count, rows * grid_w]. Works on elements of `es` bytes
 * (4 or 8), so it serves float32 and float64 alike. */
static void im2col(const patch_geom *g, const void *image, size_t es, int64_t row0, int64_t rows,
                   void *col) {
  int last = g->nsp - 1;
  int64_t gw = g->grid[last], s = g->stride[last], width = rows * gw;
  int64_t kq[ER_MAX_RANK] = {0}, oc[ER_MAX_RANK];
  const unsigned char *img = image;
  unsigned char *dst = col;
  for (int64_t c = 0; c < g->channels; c++) {
    for (int64_t q = 0; q < g->kernel_count; q++, counter_next(g->nsp, g->kernel, kq)) {
      counter_set(last, g->grid, row0, oc);
      for (int64_t r = 0; r < rows; r++, counter_next(last, g->grid, oc)) {
        unsigned char *out = dst + (size_t)(r * gw) * es;
        int64_t base, lo, hi;
        if (!patch_segment(g, c, kq, oc, &base, &lo, &hi)) {
          memset(out, 0, (size_t)gw * es);
          continue;
        }
        memset(out, 0, (size_t)lo * es);
        const unsigned char *src = img + (size_t)(base + lo * s) * es;
        if (s == 1) {
          memcpy(out + (size_t)lo * es, src, (size_t)(hi - lo) * es);
        } else if (es == 4) {
          uint32_t *o4 = (uint32_t *)(void *)out;
          const uint32_t *s4 = (const uint32_t *)(const void *)src;
          for (int64_t j = lo; j < hi; j++) o4[j] = s4[(j - lo) * s];
        } else {
          uint64_t *o8 = (uint64_t *)(void *)out;
          const uint64_t *s8 = (const uint64_t *)(const void *)src;
          for (int64_t j = lo; j < hi; j++) o8[j] = s8[(j - lo) * s];
        }
        memset(out + (size_t)hi * es, 0, (size_t)(gw - hi) * es);
      }
      dst += (size_t)width * es;
    }
  }
}

/* Adds col [channels * kernel_count, rows * grid_w] (grid rows [row0,
 * row0 + rows)) into the image, the transpose of im2col. */
#define DEFINE_COL2IM(SFX, T)                                                                     \
  static void col2im_##SFX(const patch_geom *g, const T *col, int64_t row0, int64_t rows,         \
                           T *image) {                                                            \
    int last = g->nsp - 1;                                                                        \
    int64_t gw = g->grid[last], s = g->stride[last];                                              \
    int64_t kq[ER_MAX_RANK] = {0}, oc[ER_MAX_RANK];                                               \
    for (int64_t c = 0; c < g->channels; c++) {                                                   \
      for (int64_t q = 0; q < g->kernel_count; q++, counter_next(g->nsp, g->kernel, kq)) {        \
        counter_set(last, g->grid, row0, oc);                                                     \
        for (int64_t r = 0; r < rows; r++, counter_next(last, g->grid, oc), col += gw) {          \
          int64_t base, lo, hi;                                                                   \
          if (!patch_segment(g, c, kq, oc, &base, &lo, &hi)) continue;                            \
          T *dst = image + base;                                                                  \
          for (int64_t j = lo; j < hi; j++) dst[j * s] += col[j];                                 \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
  }

DEFINE_COL2IM(f32, float)
DEFINE_COL2IM(f64, double)
DEFINE_COL2IM(u64, uint64_t)

/* Grid rows per tile for a column matrix of `col_rows` rows. */
static int64_t tile_rows(const patch_geom *g, int64_t col_rows) {
  int64_t gw = g->grid[g->nsp - 1], total = patch_rows(g);
  if (gw <= 0 || total <= 0) return 1;
  int64_t rows = CONV_TILE_ELEMENTS / (col_rows > 0 ? col_rows : 1) / gw;
  int64_t min_rows = ceil_div(CONV_TILE_MIN_COLUMNS, gw);
  if (rows < min_rows) rows = min_rows;
  if (rows > total) rows = total;
  return rows < 1 ? 1 : rows;
}

/* ======================================================================== */
/* Conv                                                                      */
/* ======================================================================== */

/* Everything a Conv / ConvTranspose node needs to know, from its
 * attributes and input shapes; -1 marks what is not known at load. */
typedef struct conv_plan {
  window win;
  int nsp;                          /* -1 = unknown */
  int64_t group;
  int64_t n, c, m;                  /* batch, input channels, output channels */
  int64_t in[ER_MAX_RANK];          /* input spatial extents */
  int64_t kernel[ER_MAX_RANK];
  int64_t out[ER_MAX_RANK];         /* output spatial extents */
  int64_t pb[ER_MAX_RANK], pe[ER_MAX_RANK]; /* pads in force */
} conv_plan;

/* Type, rank and attribute checks common to Conv and ConvTranspose. W's
 * channel dim checked against X is 1 for Conv (C/group) and 0 for
 * ConvTranspose (C). */
static er_status conv_common(er_kctx *ctx, conv_plan *p) {
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *b = er__in(ctx, 2);
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  ER_CHECK(er__require_type(ctx, 1, er__types_float));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  if (b) {
    ER_CHECK(er__require_type(ctx, 2, er__types_float));
    ER_CHECK(er__require_same_type(ctx, 0, 2));
    ER_CHECK(er__require_rank(ctx, 2, 1, 1));
  }
  if (x->rank >= 0 && x->rank < 3)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "input X has rank %d; expected [N, C, D1, ...] with at least one spatial axis",
                        x->rank);
  if (w->rank >= 0 && w->rank < 3)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "weight W has rank %d; expected at least 3 ([M, C/group, k1, ...])", w->rank);
  if (x->rank >= 0 && w->rank >= 0 && x->rank != w->rank)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input X has rank %d but weight W has rank %d",
                        x->rank, w->rank);
  int rank = x->rank >= 0 ? x->rank : w->rank;
  ER_CHECK(er__opconv_read_window(ctx, rank >= 0 ? rank - 2 : -1, false, &p->win));
  p->nsp = p->win.nsp;
  ER_CHECK(er__attr_int(ctx, "group", 1, &p->group));
  if (p->group < 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "group %lld must be >= 1", (long long)p->group);
  p->n = x->rank >= 0 ? x->dims[0] : -1;
  p->c = x->rank >= 0 ? x->dims[1] : -1;
  if (p->c >= 0 && p->c % p->group != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input channels %lld are not divisible by group %lld",
                        (long long)p->c, (long long)p->group);
  /* The kernel comes from W's dims; kernel_shape must agree with them. */
  for (int d = 0; d < ER_MAX_RANK; d++) p->kernel[d] = p->in[d] = p->out[d] = -1;
  for (int d = 0; d < p->nsp; d++) {
    int64_t wk = w->rank >= 0 ? w->dims[2 + d] : -1;
    p->kernel[d] = wk >= 0 ? wk : (p->win.has_kernel ? p->win.kernel[d] : -1);
    p->in[d] = x->rank >= 0 ? x->dims[2 + d] : -1;
  }
  if (p->win.has_kernel && w->rank >= 0) {
    for (int d = 0; d < p->nsp; d++) {
      if (w->dims[2 + d] >= 0 && w->dims[2 + d] != p->win.kernel[d]) {
        char a[160], bb[160];
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "kernel_shape %s does not match weight dims %s",
                            er__dims_str(p->nsp, p->win.kernel, a, sizeof a),
                            er__dims_str(p->nsp, w->dims + 2, bb, sizeof bb));
      }
    }
  }
  for (int d = 0; d < p->nsp; d++)
    if (p->kernel[d] == 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "weight W has an empty kernel axis (dim %d is 0)",
                          2 + d);
  return ER_STATUS_OK;
}

/* The Conv plan: shapes, output extents and pads. */
static er_status conv_prepare(er_kctx *ctx, conv_plan *p) {
  const er_tensor *w = ctx->in[1], *b = er__in(ctx, 2);
  ER_CHECK(conv_common(ctx, p));
  p->m = w->rank >= 0 ? w->dims[0] : -1;
  int64_t cw = w->rank >= 0 ? w->dims[1] : -1;
  if (p->c >= 0 && cw >= 0 && cw * p->group != p->c)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "weight W expects %lld input channels per group, but X has %lld channels in "
                        "%lld groups (%lld per group)",
                        (long long)cw, (long long)p->c, (long long)p->group,
                        (long long)(p->c / p->group));
  if (p->m >= 0 && p->m % p->group != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "output channels %lld (W dim 0) are not divisible by group %lld", (long long)p->m,
                        (long long)p->group);
  if (b && b->rank == 1 && b->dims[0] >= 0 && p->m >= 0 && b->dims[0] != p->m)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "bias B has %lld values but W has %lld output channels",
                        (long long)b->dims[0], (long long)p->m);
  for (int d = 0; d < p->nsp; d++) {
    if (p->in[d] < 0 || p->kernel[d] < 0) continue;
    ER_CHECK(er__opconv_window_output(ctx, &p->win, d, p->in[d], p->kernel[d], &p->out[d], &p->pb[d], &p->pe[d]));
  }
  return ER_STATUS_OK;
}

static er_status conv_check(er_kctx *ctx) {
  conv_plan p;
  ER_CHECK(conv_prepare(ctx, &p));
  er_dtype t = ctx->in[0]->dtype != ER_DTYPE_UNDEFINED ? ctx->in[0]->dtype : ctx->in[1]->dtype;
  if (p.nsp < 0) {
    er__set_output(ctx, 0, t, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  dims[0] = p.n;
  dims[1] = p.m;
  for (int d = 0; d < p.nsp; d++) dims[2 + d] = p.out[d];
  er__set_output(ctx, 0, t, p.nsp + 2, dims);
  return ER_STATUS_OK;
}

/* Fills `rows` rows of `len` elements (row stride ld) with bias values. */
static void fill_rows(void *y, size_t es, int64_t rows, int64_t len, int64_t ld, const void *bias) {
  for (int64_t r = 0; r < rows; r++) {
    if (es == 4) {
      float v = ((const float *)bias)[r], *row = (float *)y + r * ld;
      for (int64_t j = 0; j < len; j++) row[j] = v;
    } else {
      double v = ((const double *)bias)[r], *row = (double *)y + r * ld;
      for (int64_t j = 0; j < len; j++) row[j] = v;
    }
  }
}

/* Conv on float32 or float64 arrays (es = 4 or 8): x [N, C, in...],
 * w [M, C/group, k...], bias [M] or NULL, y [N, M, out...] (zeroed). */
static er_status conv_compute(const er_kctx *ctx, const conv_plan *p, size_t es, gemm_fn gemm,
                              const void *x, const void *w, const void *bias, void *y) {
  int nsp = p->nsp;
  int64_t cg = p->c / p->group, mg = p->m / p->group;
  patch_geom g;
  memset(&g, 0, sizeof g);
  g.nsp = nsp;
  g.channels = cg;
  bool pointwise = true;
  for (int d = 0; d < nsp; d++) {
    g.image[d] = p->in[d];
    g.grid[d] = p->out[d];
    g.kernel[d] = p->kernel[d];
    g.stride[d] = p->win.stride[d];
    g.dilation[d] = p->win.dilation[d];
    g.pad[d] = p->pb[d];
    if (g.kernel[d] != 1 || g.stride[d] != 1 || g.pad[d] != 0 || p->pe[d] != 0) pointwise = false;
  }
  patch_finish(&g);
  int64_t kc = cg * g.kernel_count;            /* weight row length */
  int64_t pin = g.image_count, pout = g.grid_count;
  int64_t rows_total = patch_rows(&g), rows = tile_rows(&g, kc);
  int64_t gw = g.grid[nsp - 1];
  unsigned char *col = NULL;
  if (!pointwise && pout > 0 && kc > 0) {
    col = er__malloc((size_t)(kc * rows * gw) * es, "Conv column buffer");
    if (!col) {
      er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
      return ER_STATUS_OUT_OF_MEMORY;
    }
  }
  const unsigned char *xb = x, *wb = w, *bb = bias;
  unsigned char *yb = y;
  for (int64_t n = 0; n < p->n; n++) {
    for (int64_t gi = 0; gi < p->group; gi++) {
      const unsigned char *xg = xb + (size_t)((n * p->c + gi * cg) * pin) * es;
      const unsigned char *wg = wb + (size_t)(gi * mg * kc) * es;
      unsigned char *yg = yb + (size_t)((n * p->m + gi * mg) * pout) * es;
      if (bb) fill_rows(yg, es, mg, pout, pout, bb + (size_t)(gi * mg) * es);
      if (kc == 0 || pout == 0) continue;
      if (pointwise) {
        gemm(mg, pout, kc, wg, kc, 1, xg, pin, yg, pout);
        continue;
      }
      for (int64_t r0 = 0; r0 < rows_total; r0 += rows) {
        int64_t nr = rows_total - r0 < rows ? rows_total - r0 : rows;
        im2col(&g, xg, es, r0, nr, col);
        gemm(mg, nr * gw, kc, wg, kc, 1, col, nr * gw, yg + (size_t)(r0 * gw) * es, pout);
      }
    }
  }
  free(col);
  return ER_STATUS_OK;
}

static er_status conv_run(er_kctx *ctx) {
  conv_plan p;
  ER_CHECK(conv_prepare(ctx, &p));
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *b = er__in(ctx, 2);
  er_tensor *y = ctx->out[0];
  if (x->dtype == ER_DTYPE_DOUBLE)
    return conv_compute(ctx, &p, 8, gemm_f64, x->data, w->data, b ? b->data : NULL, y->data);
  if (x->dtype == ER_DTYPE_FLOAT)
    return conv_compute(ctx, &p, 4, gemm_f32, x->data, w->data, b ? b->data : NULL, y->data);
  /* float16 / bfloat16: widen, compute in float32, round once. */
  const float *xf, *wf, *bf = NULL;
  float *xo = NULL, *wo = NULL, *bo = NULL, *yf = NULL;
  er_status st = er__as_f32(x, &xf, &xo);
  if (st == ER_STATUS_OK) st = er__as_f32(w, &wf, &wo);
  if (st == ER_STATUS_OK && b) st = er__as_f32(b, &bf, &bo);
  int64_t ny = er__count(y);
  if (st == ER_STATUS_OK) {
    yf = er__calloc((size_t)(ny > 0 ? ny : 1), sizeof *yf, "Conv float32 output");
    if (!yf) st = ER_STATUS_OUT_OF_MEMORY;
  }
  if (st == ER_STATUS_OK) st = conv_compute(ctx, &p, 4, gemm_f32, xf, wf, bf, yf);
  if (st == ER_STATUS_OK) store_f32(y, yf, ny);
  free(xo);
  free(wo);
  free(bo);
  free(yf);
  return st;
}

static const er_op_def op_conv = {
    .name = "Conv", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = conv_check, .run = conv_run,
};

/* ======================================================================== */
/* ConvTranspose                                                             */
/* ======================================================================== */

/* The ConvTranspose plan: output extents from output_shape, auto_pad or
 * pads (in that order of precedence, as the spec has it). */
static er_status convt_prepare(er_kctx *ctx, conv_plan *p) {
  const er_tensor *w = ctx->in[1], *b = er__in(ctx, 2);
  ER_CHECK(conv_common(ctx, p));
  int64_t cw = w->rank >= 0 ? w->dims[0] : -1, mg = w->rank >= 0 ? w->dims[1] : -1;
  if (p->c >= 0 && cw >= 0 && cw != p->c)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "weight W has %lld input channels (dim 0) but X has %lld", (long long)cw,
                        (long long)p->c);
  p->m = mg >= 0 ? mg * p->group : -1;
  if (b && b->rank == 1 && b->dims[0] >= 0 && p->m >= 0 && b->dims[0] != p->m)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "bias B has %lld values but the output has %lld channels (W dim 1 * group)",
                        (long long)b->dims[0], (long long)p->m);
  int nsp = p->nsp;
  int64_t opad[2 * ER_MAX_RANK];
  ER_CHECK(read_axis_ints(ctx, "output_padding", 1, 0, 0, &nsp, opad, NULL));
  for (int d = 0; d < p->nsp; d++)
    if (opad[d] >= p->win.stride[d] && opad[d] >= p->win.dilation[d])
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "output_padding[%d] = %lld must be less than the stride (%lld) or the "
                          "dilation (%lld)",
                          d, (long long)opad[d], (long long)p->win.stride[d],
                          (long long)p->win.dilation[d]);
  const int64_t *os;
  int64_t nos;
  ER_CHECK(er__attr_ints(ctx, "output_shape", &os, &nos));
  if (os && p->nsp >= 0) {
    /* Some exporters give the full [N, C, ...] shape; the spatial part is
     * the last nsp values. */
    if (nos != p->nsp && nos != p->nsp + 2)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "output_shape has %lld values; expected %d (one per spatial axis)",
                          (long long)nos, p->nsp);
    os += nos - p->nsp;
    for (int d = 0; d < p->nsp; d++)
      if (os[d] < 1 || os[d] > CONV_MAX_ATTR_VALUE)
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "output_shape[%d] = %lld must be positive",
                            d, (long long)os[d]);
  }
  for (int d = 0; d < p->nsp; d++) {
    int64_t in = p->in[d], k = p->kernel[d];
    if (in < 0 || k < 0) continue;
    int64_t s = p->win.stride[d], dk = (k - 1) * p->win.dilation[d] + 1;
    int64_t full; /* output extent without pads: s * (in - 1) + opad + dk */
    if (!er__mul_i64(s, in > 0 ? in - 1 : 0, &full) || !er__add_i64(full, opad[d] + dk, &full))
      return er__op_error(ctx, ER_STATUS_LIMIT, "spatial axis %d: the output extent overflows int64", d);
    if (os || p->win.autopad == AUTO_PAD_SAME_UPPER || p->win.autopad == AUTO_PAD_SAME_LOWER) {
      int64_t want = os ? os[d] : in * s;
      /* A larger output than the kernel covers makes total negative; the
       * halves round down (floor), as the ONNX reference computes them, so
       * the uncovered positions land at the end. */
      int64_t total = full - want, half = total >= 0 ? total / 2 : -((1 - total) / 2);
      if (p->win.autopad == AUTO_PAD_SAME_UPPER) {
        p->pb[d] = half;
        p->pe[d] = total - half;
      } else {
        p->pb[d] = total - half;
        p->pe[d] = half;
      }
      p->out[d] = want;
    } else {
      p->pb[d] = p->win.autopad == AUTO_PAD_VALID ? 0 : p->win.pad_begin[d];
      p->pe[d] = p->win.autopad == AUTO_PAD_VALID ? 0 : p->win.pad_end[d];
      p->out[d] = full - p->pb[d] - p->pe[d];
    }
    if (p->out[d] < 1 && in > 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "spatial axis %d: the output extent would be %lld (input %lld, pads "
                          "%lld+%lld)",
                          d, (long long)p->out[d], (long long)in, (long long)p->pb[d],
                          (long long)p->pe[d]);
    if (in == 0) p->out[d] = 0; /* an empty input axis gives an empty output axis */
  }
  return ER_STATUS_OK;
}

static er_status convt_check(er_kctx *ctx) {
  conv_plan p;
  ER_CHECK(convt_prepare(ctx, &p));
  er_dtype t = ctx->in[0]->dtype != ER_DTYPE_UNDEFINED ? ctx->in[0]->dtype : ctx->in[1]->dtype;
  if (p.nsp < 0) {
    er__set_output(ctx, 0, t, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  dims[0] = p.n;
  dims[1] = p.m;
  for (int d = 0; d < p.nsp; d++) dims[2 + d] = p.out[d];
  er__set_output(ctx, 0, t, p.nsp + 2, dims);
  return ER_STATUS_OK;
}

/* ConvTranspose on float32 / float64 arrays: for each image and group,
 * col [M/group * prod(k), tile] = W_g^T [.., C/group] x X_g [C/group, tile]
 * over tiles of input rows, then col2im scatter-adds col into Y. */
static er_status convt_compute(const er_kctx *ctx, const conv_plan *p, size_t es, const void *x,
                               const void *w, const void *bias, void *y) {
  int nsp = p->nsp;
  int64_t cg = p->c / p->group, mg = p->m / p->group;
  patch_geom g;
  memset(&g, 0, sizeof g);
  g.nsp = nsp;
  g.channels = mg;
  for (int d = 0; d < nsp; d++) {
    g.image[d] = p->out[d];
    g.grid[d] = p->in[d];
    g.kernel[d] = p->kernel[d];
    g.stride[d] = p->win.stride[d];
    g.dilation[d] = p->win.dilation[d];
    g.pad[d] = p->pb[d];
  }
  patch_finish(&g);
  int64_t kr = mg * g.kernel_count; /* col rows */
  int64_t pin = g.grid_count, pout = g.image_count;
  int64_t rows_total = patch_rows(&g), rows = tile_rows(&g, kr);
  int64_t gw = g.grid[nsp - 1];
  unsigned char *col = NULL;
  size_t col_bytes = (size_t)(kr * rows * gw) * es;
  if (pin > 0 && kr > 0) {
    col = er__malloc(col_bytes, "ConvTranspose column buffer");
    if (!col) {
      er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
      return ER_STATUS_OUT_OF_MEMORY;
    }
  }
  const unsigned char *xb = x, *wb = w, *bb = bias;
  unsigned char *yb = y;
  for (int64_t n = 0; n < p->n; n++) {
    for (int64_t gi = 0; gi < p->group; gi++) {
      const unsigned char *xg = xb + (size_t)((n * p->c + gi * cg) * pin) * es;
      const unsigned char *wg = wb + (size_t)(gi * cg * kr) * es;
      unsigned char *yg = yb + (size_t)((n * p->m + gi * mg) * pout) * es;
      if (bb) fill_rows(yg, es, mg, pout, pout, bb + (size_t)(gi * mg) * es);
      if (!col) continue;
      for (int64_t r0 = 0; r0 < rows_total; r0 += rows) {
        int64_t nr = rows_total - r0 < rows ? rows_total - r0 : rows;
        memset(col, 0, (size_t)(kr * nr * gw) * es);
        if (es == 4) {
          gemm_f32(kr, nr * gw, cg, wg, 1, kr, xg + (size_t)(r0 * gw) * es, pin, col, nr * gw);
          col2im_f32(&g, (const float *)(void *)col, r0, nr, (float *)(void *)yg);
        } else {
          gemm_f64(kr, nr * gw, cg, wg, 1, kr, xg + (size_t)(r0 * gw) * es, pin, col, nr * gw);
          col2im_f64(&g, (const double *)(void *)col, r0, nr, (double *)(void *)yg);
        }
      }
    }
  }
  free(col);
  return ER_STATUS_OK;
}

static er_status convt_run(er_kctx *ctx) {
  conv_plan p;
  ER_CHECK(convt_prepare(ctx, &p));
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *b = er__in(ctx, 2);
  er_tensor *y = ctx->out[0];
  if (x->dtype == ER_DTYPE_DOUBLE || x->dtype == ER_DTYPE_FLOAT)
    return convt_compute(ctx, &p, er_dtype_size(x->dtype), x->data, w->data, b ? b->data : NULL,
                         y->data);
  const float *xf, *wf, *bf = NULL;
  float *xo = NULL, *wo = NULL, *bo = NULL, *yf = NULL;
  er_status st = er__as_f32(x, &xf, &xo);
  if (st == ER_STATUS_OK) st = er__as_f32(w, &wf, &wo);
  if (st == ER_STATUS_OK && b) st = er__as_f32(b, &bf, &bo);
  int64_t ny = er__count(y);
  if (st == ER_STATUS_OK) {
    yf = er__calloc((size_t)(ny > 0 ? ny : 1), sizeof *yf, "ConvTranspose float32 output");
    if (!yf) st = ER_STATUS_OUT_OF_MEMORY;
  }
  if (st == ER_STATUS_OK) st = convt_compute(ctx, &p, 4, xf, wf, bf, yf);
  if (st == ER_STATUS_OK) store_f32(y, yf, ny);
  free(xo);
  free(wo);
  free(bo);
  free(yf);
  return st;
}

static const er_op_def op_conv_transpose = {
    .name = "ConvTranspose", .domain = "", .min_version = 1, .max_version = 22,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = convt_check, .run = convt_run,
};

/* ======================================================================== */
/* Col2Im                                                                    */
/* ======================================================================== */

typedef struct col2im_plan {
  int nsp;                          /* -1 = unknown */
  patch_geom g;                     /* valid when everything is known */
  bool known;
  int64_t out[ER_MAX_RANK];         /* [N, C, image...]; -1 unknown */
} col2im_plan;

static er_status col2im_prepare(er_kctx *ctx, col2im_plan *p) {
  static const er_dtype i64[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};
  const er_tensor *x = ctx->in[0], *img = ctx->in[1], *blk = ctx->in[2];
  memset(p, 0, sizeof *p);
  ER_CHECK(er__require_type(ctx, 0, er__types_all));
  ER_CHECK(er__require_type(ctx, 1, i64));
  ER_CHECK(er__require_type(ctx, 2, i64));
  ER_CHECK(er__require_rank(ctx, 0, 3, 3));
  ER_CHECK(er__require_rank(ctx, 1, 1, 1));
  ER_CHECK(er__require_rank(ctx, 2, 1, 1));
  int nsp = -1;
  int64_t ni = img->rank == 1 ? img->dims[0] : -1, nb = blk->rank == 1 ? blk->dims[0] : -1;
  if (ni >= 0 && nb >= 0 && ni != nb)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "image_shape has %lld values but block_shape has %lld", (long long)ni,
                        (long long)nb);
  if (ni < 0) ni = nb;
  if (ni == 0 || ni > ER_MAX_RANK - 2)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "image_shape has %lld values; expected 1 to %d spatial axes", (long long)ni,
                        ER_MAX_RANK - 2);
  if (ni > 0) nsp = (int)ni;
  int64_t strides[ER_MAX_RANK], dil[ER_MAX_RANK], pads[2 * ER_MAX_RANK];
  ER_CHECK(read_axis_ints(ctx, "strides", 1, 1, 1, &nsp, strides, NULL));
  ER_CHECK(read_axis_ints(ctx, "dilations", 1, 1, 1, &nsp, dil, NULL));
  ER_CHECK(read_axis_ints(ctx, "pads", 2, 0, 0, &nsp, pads, NULL));
  p->nsp = nsp;
  for (int d = 0; d < ER_MAX_RANK; d++) p->out[d] = -1;
  if (nsp < 0) return ER_STATUS_OK;
  if (x->rank == 3) p->out[0] = x->dims[0];
  int64_t kcount = -1;
  if (blk->data) {
    kcount = 1;
    for (int d = 0; d < nsp; d++) {
      int64_t b = er__get_i64(blk, d);
      if (b < 1 || b > CONV_MAX_ATTR_VALUE)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "block_shape[%d] = %lld must be positive", d,
                            (long long)b);
      p->g.kernel[d] = b;
      kcount *= b;
    }
  }
  if (img->data) {
    for (int d = 0; d < nsp; d++) {
      int64_t v = er__get_i64(img, d);
      if (v < 1 || v > CONV_MAX_ATTR_VALUE)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "image_shape[%d] = %lld must be positive", d,
                            (long long)v);
      p->g.image[d] = p->out[2 + d] = v;
    }
  }
  if (kcount > 0 && x->rank == 3 && x->dims[1] >= 0) {
    if (x->dims[1] % kcount != 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "input dim 1 (%lld) is not divisible by the block size %lld",
                          (long long)x->dims[1], (long long)kcount);
    p->out[1] = x->dims[1] / kcount;
  }
  if (!img->data || !blk->data) return ER_STATUS_OK;
  /* The number of blocks along each axis, as a convolution would slide. */
  for (int d = 0; d < nsp; d++) {
    int64_t dk = (p->g.kernel[d] - 1) * dil[d] + 1;
    int64_t span = p->g.image[d] + pads[d] + pads[nsp + d] - dk;
    if (span < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "spatial axis %d: image extent %lld with pads %lld+%lld is smaller than the "
                          "dilated block extent %lld",
                          d, (long long)p->g.image[d], (long long)pads[d], (long long)pads[nsp + d],
                          (long long)dk);
    p->g.grid[d] = span / strides[d] + 1;
    p->g.stride[d] = strides[d];
    p->g.dilation[d] = dil[d];
    p->g.pad[d] = pads[d];
  }
  p->g.nsp = nsp;
  patch_finish(&p->g);
  if (x->rank == 3 && x->dims[2] >= 0 && x->dims[2] != p->g.grid_count)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "input dim 2 is %lld but the image has %lld sliding blocks",
                        (long long)x->dims[2], (long long)p->g.grid_count);
  p->g.channels = p->out[1];
  p->known = p->out[0] >= 0 && p->out[1] >= 0;
  return ER_STATUS_OK;
}

static er_status col2im_check(er_kctx *ctx) {
  col2im_plan p;
  ER_CHECK(col2im_prepare(ctx, &p));
  er__set_output(ctx, 0, ctx->in[0]->dtype, p.nsp >= 0 ? p.nsp + 2 : -1, p.out);
  return ER_STATUS_OK;
}

static er_status col2im_run(er_kctx *ctx) {
  col2im_plan p;
  ER_CHECK(col2im_prepare(ctx, &p));
  ER_ASSERT(p.known);
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  int64_t batch = p.out[0], nx = er__count(x), ny = er__count(y);
  int64_t xs = p.g.channels * p.g.kernel_count * p.g.grid_count, ys = p.g.channels * p.g.image_count;
  int64_t rows = patch_rows(&p.g);
  if (x->dtype == ER_DTYPE_FLOAT || x->dtype == ER_DTYPE_DOUBLE) {
    for (int64_t n = 0; n < batch; n++) {
      if (x->dtype == ER_DTYPE_FLOAT)
        col2im_f32(&p.g, (const float *)x->data + n * xs, 0, rows, (float *)y->data + n * ys);
      else
        col2im_f64(&p.g, (const double *)x->data + n * xs, 0, rows, (double *)y->data + n * ys);
    }
    return ER_STATUS_OK;
  }
  if (er__dtype_is_float(x->dtype)) {
    const float *xf;
    float *xo, *yf = er__calloc((size_t)(ny > 0 ? ny : 1), sizeof *yf, "Col2Im float32 output");
    if (!yf) return ER_STATUS_OUT_OF_MEMORY;
    er_status st = er__as_f32(x, &xf, &xo);
    if (st == ER_STATUS_OK) {
      for (int64_t n = 0; n < batch; n++) col2im_f32(&p.g, xf + n * xs, 0, rows, yf + n * ys);
      store_f32(y, yf, ny);
    }
    free(xo);
    free(yf);
    return st;
  }
  /* Integers add in two's complement (uint64 wraps); bool ORs. */
  uint64_t *xu = er__malloc((size_t)(nx > 0 ? nx : 1) * sizeof *xu, "Col2Im integer copy");
  uint64_t *yu = er__calloc((size_t)(ny > 0 ? ny : 1), sizeof *yu, "Col2Im integer output");
  if (!xu || !yu) {
    free(xu);
    free(yu);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  for (int64_t i = 0; i < nx; i++) xu[i] = (uint64_t)er__load_i64(x->data, x->dtype, i);
  for (int64_t n = 0; n < batch; n++) col2im_u64(&p.g, xu + n * xs, 0, rows, yu + n * ys);
  for (int64_t i = 0; i < ny; i++) er__store_i64(y->data, y->dtype, i, (int64_t)yu[i]);
  free(xu);
  free(yu);
  return ER_STATUS_OK;
}

static const er_op_def op_col2im = {
    .name = "Col2Im", .domain = "", .min_version = 18, .max_version = 18,
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = (1u << 1) | (1u << 2), .check = col2im_check, .run = col2im_run,
};

const er_op_def *const er__ops_conv[] = {
    &op_conv,
    &op_conv_transpose,
    &er__opconv_op_maxpool,
    &er__opconv_op_avgpool,
    &er__opconv_op_lppool,
    &er__opconv_op_global_maxpool,
    &er__opconv_op_global_avgpool,
    &er__opconv_op_global_lppool,
    &er__opconv_op_maxunpool,
    &op_col2im,
    NULL,
};
