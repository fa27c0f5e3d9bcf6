/* quant-impl.h - what the files of the "quant" kernel group share
 * (quant.c: the node as read, prepare and the kernel table; qconv.c,
 * qdwconv.c, qlstm.c: the families): the node state, the convolution
 * geometry and problem, and the helpers more than one family uses. */
#ifndef ER_KERNELS_QUANT_IMPL_H
#define ER_KERNELS_QUANT_IMPL_H

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
   * zero points (er__q8_dyn_xz_run). */
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
   * small feature maps, er__q8_px_wins): the same weights as columns panels of
   * NR channels, per group px_gstride bytes apart. */
  uint8_t *pxw;
  size_t px_gstride;
  /* In place over planes without padding columns (w3_mode): per channel,
   * the padding's part of the sum over the window's left column, then
   * over its right one ([2][channels]; NULL where the ISA has no such
   * tile or the layer cannot take it). */
  int32_t *w3_corr;
} qg_state;

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

/* The shared scratch of the in-place path: the planes, the offset table,
 * one row of padding and KG rows of strided input; with weight zero points
 * also each phase's sum over channels (int32 per plane pixel) and the
 * activation sum of each virtual column (at most a plane's pixels). */
typedef struct grouped_layout {
  size_t planes, koff, padrow, gather, chsum, asum, total; /* byte offsets; total size */
} grouped_layout;

bool er__q8_conv_geom(const er_kctx *ctx, const qg_state *s, const er_tensor *x, const er_tensor *y, er_window *g);

/* The GEMM of image n, group gi; planes at `planes` (unless direct). */
void er__q8_conv_problem(const qg_state *s, const er_window *g, int64_t gi, conv_pack_ctx *cc, const uint8_t *x,
                         const uint8_t *planes, void *y, int64_t n, er_qgemm_problem *p);

grouped_layout er__q8_grouped_scratch(const qg_state *s, const er_window *g);

/* The activation sums of the n virtual columns of the grouped planes (the
 * packed values, pads and the zeros past Cg included), for the weight
 * zero points' term: each used phase's planes summed over channels, then
 * column v's sum is the sum over taps of those sums at the tap's offset
 * from v. */
void er__q8_grouped_asum(const qg_state *s, const er_window *g, uint8_t *scratch, int64_t n);

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
bool er__q8_px_wins(const qg_state *s, const er_window *g);

er_status er__q8_conv_run(const er_kernel_run *kr);

bool er__q8_is_depthwise(const er_kernel_info *ki, qg_op op);

/* One worker's planes, sums and tap pointers, or its band. */
size_t er__q8_dw_slot_bytes(const qg_state *s, const er_window *g);

er_status er__q8_dw_run(const er_kernel_run *kr);

/* Rows [i0, i0 + rows) of activations a [M, k] as rows panels. */
void er__q8_pack_act_rows(const er_qgemm_isa *isa, const uint8_t *a, int64_t k, uint8_t flip, int64_t i0,
                          int64_t rows, void *dst, int32_t *sums);

/* A matrix product of activation rows (packed per block by pack_rows)
 * and prepacked weight columns, into C [m, n]. */
void er__q8_mm_problem(er_qgemm_problem *p, const er_qgemm_isa *isa, int64_t m, int64_t n, int64_t k,
                       er_qpack_rows_fn pack_rows, const void *rows_ctx, const uint8_t *cols_packed,
                       const er_qepi *epi, void *c);

/* Runs `run` with the state's input zero point and corrections taken from
 * this run's zero point (a copy of the state; the shared one is never
 * written). */
er_status er__q8_dyn_xz_run(const er_kernel_run *kr, er_status (*run)(const er_kernel_run *));

void er__q8_dql_release(void *state);

bool er__q8_dql_supports_with(const er_kernel_info *ki, const er_qgemm_isa *isa);

er_status er__q8_dql_prepare_with(const er_kernel_info *ki, const er_qgemm_isa *isa, void **state_out,
                                  size_t *scratch_out);

/* One buffer per run, from the run context's spill scratch (kept between
 * runs, so steady-state runs allocate nothing): the recurrence's scratch,
 * the corrections [4H] and the GEMM's per-worker scratch, sized for the
 * larger of the two products (all of X's steps at once). */
er_status er__q8_dql_run(const er_kernel_run *kr);

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static inline bool is_conv(qg_op op) { return op <= QG_CONVINTEGER; }

static inline const er_tensor *in_at(const er_kernel_info *ki, int i) { return i < 0 ? NULL : er__ki_in(ki, i); }

static inline bool q8(er_dtype t) { return t == ER_DTYPE_UINT8 || t == ER_DTYPE_INT8; }

/* Element c of a one-or-per-channel parameter. */
static inline double pval(const er_tensor *t, int64_t c) {
  return er__load_f64(t->data, t->dtype, er__tensor_count(t) == 1 ? 0 : c);
}

static inline void planes_geometry(const er_window *g, conv_planes *pl) {
  int64_t hp = g->h + g->pt + g->pb, wp = g->w + g->pl + g->pr;
  pl->direct = g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 && g->pb == 0 && g->pr == 0;
  pl->hs = pl->direct ? g->h : (hp + g->sh - 1) / g->sh;
  pl->ws = pl->direct ? g->w : (wp + g->sw - 1) / g->sw;
  pl->plane = pl->hs * pl->ws;
}

/* Bytes of the planes of one image and group (0 when direct). */
static inline size_t planes_bytes(const er_window *g) {
  conv_planes pl;
  planes_geometry(g, &pl);
  return pl.direct ? 0 : (size_t)(g->sh * g->sw * (g->c / g->group) * pl.plane + 64);
}

/* Bytes of scratch shared by all workers. */
static inline size_t conv_scratch_fixed(const qg_state *s, const er_window *g) {
  if (!s->inplace) return (planes_bytes(g) + 63) / 64 * 64;
  return er__q8_grouped_scratch(s, g).total;
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
 * transposed tile runs (er__q8_px_wins counts the columns this way). Measured on
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
static inline bool w3_mode(const qg_state *s, const er_window *g) {
  if (!s->w3_corr || !s->inplace || g->kh != 3 || g->kw != 3 || g->dh != 1 || g->dw != 1 || g->pl != 1 ||
      g->pr != 1 || g->ow < 2)
    return false;
  return (g->sh == 1 && g->sw == 1 && g->ow == g->w) ||
         (g->sh == 2 && g->sw == 2 && g->w % 2 == 0 && g->ow * 2 == g->w);
}

static inline er_qdwv_geom dwv_geom(const er_window *g) {
  er_qdwv_geom q = {g->h, g->w, g->pt, g->pl, g->kh, g->kw, g->sh, g->sw, g->dh, g->dw, g->oh, g->ow};
  return q;
}

#endif /* ER_KERNELS_QUANT_IMPL_H */
