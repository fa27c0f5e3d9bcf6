/* layout.c - optimized CPU kernels of the "layout" group: Transpose,
 * Slice, Split, Pad, DepthToSpace and Concat (any element type),
 * nearest-neighbour Resize / Upsample (any element type) and bilinear ones
 * (float32).
 *
 * Transpose first drops unit axes and merges output axes that stay
 * consecutive in the input, so most real permutations (attention heads,
 * channel shuffles, NCHW <-> NHWC) become either runs of contiguous rows
 * (copied whole) or one 2-D transpose per outer index (done in cache-sized
 * tiles). Resize builds, per spatial axis, the input index of every output
 * position with the reference's own formulas for the supported modes, then
 * copies rows, reusing the previous output row whenever two output rows
 * map to the same input row (every upsampling). */
#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/vec.h"

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Bytes of copying below which a second thread is not worth waking. */
#define LAYOUT_GRAIN_BYTES (INT64_C(1) << 16)
/* Side of the square tiles of 2-D transposes (elements). */
#define TRANSPOSE_TILE 16

/* ======================================================================== */
/* Transpose                                                                 */
/* ======================================================================== */

typedef struct tr_plan {
  int nd;                         /* collapsed output axes */
  int64_t dims[ER_MAX_RANK];      /* output extents */
  int64_t is[ER_MAX_RANK];        /* input stride (elements) of each output axis */
  int64_t os[ER_MAX_RANK];        /* output strides */
  size_t es;                      /* element bytes */
  int q;                          /* output axis with input stride 1 (when not last) */
} tr_plan;

static bool read_perm(const er_kctx *ctx, int rank, int *perm) {
  const int64_t *p;
  int64_t n;
  if (er__attr_ints(ctx, "perm", &p, &n) != ER_STATUS_OK) return false;
  bool seen[ER_MAX_RANK] = {false};
  for (int d = 0; d < rank; d++) {
    int64_t v = p ? p[d] : rank - 1 - d;
    if ((p && n != rank) || v < 0 || v >= rank || seen[v]) return false;
    seen[v] = true;
    perm[d] = (int)v;
  }
  return true;
}

static void tr_plan_make(const er_tensor *x, const int *perm, tr_plan *p) {
  int r = x->rank;
  int64_t in_stride[ER_MAX_RANK];
  int64_t s = 1;
  for (int d = r - 1; d >= 0; d--) {
    in_stride[d] = s;
    s *= x->dims[d];
  }
  p->nd = 0;
  p->es = er_dtype_size(x->dtype);
  for (int i = 0; i < r; i++) {
    int64_t dim = x->dims[perm[i]], st = in_stride[perm[i]];
    if (dim == 1) continue;
    /* Merge with the previous output axis when that one steps over exactly
     * this one's extent in the input. */
    if (p->nd > 0 && p->is[p->nd - 1] == st * dim) {
      p->dims[p->nd - 1] *= dim;
      p->is[p->nd - 1] = st;
      continue;
    }
    p->dims[p->nd] = dim;
    p->is[p->nd] = st;
    p->nd++;
  }
  if (p->nd == 0) {
    p->nd = 1;
    p->dims[0] = 1;
    p->is[0] = 1;
  }
  s = 1;
  for (int k = p->nd - 1; k >= 0; k--) {
    p->os[k] = s;
    s *= p->dims[k];
  }
  p->q = -1;
  for (int k = 0; k < p->nd - 1; k++)
    if (p->is[k] == 1) p->q = k;
}

typedef struct tr_job {
  const tr_plan *p;
  const unsigned char *x;
  unsigned char *y;
  int64_t outer;          /* iterations of the outer loop */
  int64_t a_parts;        /* 2-D steps: parts of the a axis per outer index */
  int isa;                /* 4-byte 2-D steps: 0 plain C, 1 er__transpose32_avx2, 2 _avx512 */
  int k;                  /* short rows: the axis one unit walks */
} tr_job;

/* Offsets of outer index o over the axes other than `skip1`, `skip2`
 * (and the last): a mixed-radix decode. */
static void outer_offsets(const tr_plan *p, int64_t o, int skip1, int skip2, int64_t *in_off, int64_t *out_off) {
  *in_off = *out_off = 0;
  for (int k = p->nd - 1; k >= 0; k--) {
    if (k == skip1 || k == skip2) continue;
    int64_t idx = o % p->dims[k];
    o /= p->dims[k];
    *in_off += idx * p->is[k];
    *out_off += idx * p->os[k];
  }
}

/* Contiguous inner run: copy rows of dims[last] elements. The first row's
 * offsets are decoded once, the rest stepped like an odometer (a decode
 * per row, four divisions, was half the time of YOLOv5's head Transpose
 * [1,80,80,3,85] -> [1,3,80,80,85], 19200 rows of 340 bytes). */
static void tr_rows(void *arg, int64_t begin, int64_t end) {
  const tr_job *j = arg;
  const tr_plan *p = j->p;
  const int last = p->nd - 1;
  const size_t row = (size_t)p->dims[last] * p->es;
  int64_t idx[ER_MAX_RANK], io = 0, oo = 0, q = begin;
  for (int k = last - 1; k >= 0; k--) {
    idx[k] = q % p->dims[k];
    q /= p->dims[k];
    io += idx[k] * p->is[k];
    oo += idx[k] * p->os[k];
  }
  for (int64_t o = begin; o < end; o++) {
    memcpy(j->y + (size_t)oo * p->es, j->x + (size_t)io * p->es, row);
    for (int k = last - 1; k >= 0; k--) {
      io += p->is[k];
      oo += p->os[k];
      if (++idx[k] < p->dims[k]) break;
      io -= p->is[k] * p->dims[k];
      oo -= p->os[k] * p->dims[k];
      idx[k] = 0;
    }
  }
}

/* Contiguous inner runs of at most TR_SHORT_ROW bytes (MobileViT's 2x2
 * patches unfolded by Reshape and Transpose: rows of 8 bytes). Copying
 * them one outer index at a time decoded every row's offsets and called
 * memcpy for 8 bytes: 850 us for 98304 floats. A unit here copies all the
 * rows along axis j->k (the longest other than the last) at fixed
 * strides, with fixed-size copies the compiler turns into moves. */
#define TR_SHORT_ROW 32

#define TR_SHORT_LOOP(BYTES)                                               \
  for (int64_t i = 0; i < nk; i++) memcpy(d + i * osk, s + i * isk, BYTES); \
  break;

static void tr_short_rows(void *arg, int64_t begin, int64_t end) {
  const tr_job *j = arg;
  const tr_plan *p = j->p;
  const int last = p->nd - 1, k = j->k;
  const int64_t nk = p->dims[k], isk = p->is[k] * (int64_t)p->es, osk = p->os[k] * (int64_t)p->es;
  const size_t row = (size_t)p->dims[last] * p->es;
  for (int64_t o = begin; o < end; o++) {
    int64_t io, oo;
    outer_offsets(p, o, last, k, &io, &oo);
    const unsigned char *s = j->x + (size_t)io * p->es;
    unsigned char *d = j->y + (size_t)oo * p->es;
    switch (row) {
      case 4: TR_SHORT_LOOP(4)
      case 8: TR_SHORT_LOOP(8)
      case 12: TR_SHORT_LOOP(12)
      case 16: TR_SHORT_LOOP(16)
      case 24: TR_SHORT_LOOP(24)
      case 32: TR_SHORT_LOOP(32)
      default: TR_SHORT_LOOP(row)
    }
  }
}
#undef TR_SHORT_LOOP

#define DEFINE_TILE(T)                                                                                    \
  static void tile_##T(const T *in, int64_t in_a, int64_t in_b, T *out, int64_t out_a, int64_t na, int64_t nb) { \
    for (int64_t a0 = 0; a0 < na; a0 += TRANSPOSE_TILE)                                                   \
      for (int64_t b0 = 0; b0 < nb; b0 += TRANSPOSE_TILE) {                                               \
        int64_t a1 = a0 + TRANSPOSE_TILE < na ? a0 + TRANSPOSE_TILE : na;                                 \
        int64_t b1 = b0 + TRANSPOSE_TILE < nb ? b0 + TRANSPOSE_TILE : nb;                                 \
        for (int64_t a = a0; a < a1; a++)                                                                 \
          for (int64_t b = b0; b < b1; b++) out[a * out_a + b] = in[a * in_a + b * in_b];                 \
      }                                                                                                   \
  }
DEFINE_TILE(uint8_t)
DEFINE_TILE(uint16_t)
DEFINE_TILE(uint32_t)
DEFINE_TILE(uint64_t)
#undef DEFINE_TILE

/* The input's innermost axis is output axis q, not the last: one 2-D
 * transpose (axes q and last) per outer index. */
/* Rows of the a axis per unit of a 2-D step's split: a lone large
 * transpose (outer 1: magika's [512, 508] one) splits over the workers
 * along a. */
#define TR_A_PART 64

static void tr_2d(void *arg, int64_t begin, int64_t end) {
  const tr_job *j = arg;
  const tr_plan *p = j->p;
  int last = p->nd - 1, q = p->q;
  int64_t na = p->dims[q], nb = p->dims[last];
  for (int64_t u = begin; u < end; u++) {
    int64_t o = u / j->a_parts, a_lo = u % j->a_parts * TR_A_PART;
    int64_t n_a = min64(TR_A_PART, na - a_lo);
    int64_t io, oo;
    outer_offsets(p, o, q, last, &io, &oo);
    /* out[a, b] at out + (a * os_q + b), in[a, b] at in + (a + b * is_last). */
    const unsigned char *in = j->x + (size_t)(io + a_lo * p->is[q]) * p->es;
    unsigned char *out = j->y + (size_t)(oo + a_lo * p->os[q]) * p->es;
    switch (p->es) {
      case 1: tile_uint8_t((const uint8_t *)in, 1, p->is[last], (uint8_t *)out, p->os[q], n_a, nb); break;
      case 2: tile_uint16_t((const uint16_t *)(const void *)in, 1, p->is[last], (uint16_t *)(void *)out, p->os[q], n_a, nb); break;
      case 4:
#if defined(__x86_64__) || defined(__i386__)
        if (j->isa == 2) {
          er__transpose32_avx512((const uint32_t *)(const void *)in, p->is[last], (uint32_t *)(void *)out, p->os[q],
                                 n_a, nb);
          break;
        }
        if (j->isa == 1) {
          er__transpose32_avx2((const uint32_t *)(const void *)in, p->is[last], (uint32_t *)(void *)out, p->os[q], n_a,
                               nb);
          break;
        }
#endif
        tile_uint32_t((const uint32_t *)(const void *)in, 1, p->is[last], (uint32_t *)(void *)out, p->os[q], n_a, nb);
        break;
      default: tile_uint64_t((const uint64_t *)(const void *)in, 1, p->is[last], (uint64_t *)(void *)out, p->os[q], n_a, nb); break;
    }
  }
}

static bool tr_supports(const er_kernel_info *ki, bool isa_ok) {
  const er_tensor *x = ki->in[0];
  if (!isa_ok || x->rank < 0 || x->dtype == ER_DTYPE_UNDEFINED || x->dtype == ER_DTYPE_STRING) return false;
  size_t es = er_dtype_size(x->dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8) return false;
  int perm[ER_MAX_RANK];
  er_kctx ctx = er__ki_ctx(ki);
  return read_perm(&ctx, x->rank, perm);
}

static er_status tr_run_isa(const er_kernel_run *kr, int isa) {
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  int perm[ER_MAX_RANK];
  if (!read_perm(ctx, x->rank, perm)) return er__kr_reference(kr);
  int64_t n = er__tensor_count(x);
  if (n == 0) return ER_STATUS_OK;
  tr_plan p;
  tr_plan_make(x, perm, &p);
  tr_job j = {&p, x->data, ctx->out[0]->data, 0, 1, isa, -1};
  int last = p.nd - 1;
  if (p.is[last] == 1 && last >= 1 && p.dims[last] * (int64_t)p.es <= TR_SHORT_ROW) {
    j.k = 0;
    for (int a = 1; a < last; a++)
      if (p.dims[a] > p.dims[j.k]) j.k = a;
    j.outer = n / (p.dims[last] * p.dims[j.k]);
    int64_t unit_bytes = p.dims[j.k] * p.dims[last] * (int64_t)p.es;
    er__parallel_for(kr->pool, j.outer, max64(1, LAYOUT_GRAIN_BYTES / max64(1, unit_bytes)), tr_short_rows, &j);
  } else if (p.is[last] == 1) {
    j.outer = n / p.dims[last];
    int64_t row_bytes = p.dims[last] * (int64_t)p.es;
    er__parallel_for(kr->pool, j.outer, max64(1, LAYOUT_GRAIN_BYTES / max64(1, row_bytes)), tr_rows, &j);
  } else {
    j.outer = n / (p.dims[last] * p.dims[p.q]);
    j.a_parts = (p.dims[p.q] + TR_A_PART - 1) / TR_A_PART;
    int64_t block = min64(p.dims[p.q], TR_A_PART) * p.dims[last] * (int64_t)p.es;
    er__parallel_for(kr->pool, j.outer * j.a_parts, max64(1, LAYOUT_GRAIN_BYTES / max64(1, block)), tr_2d, &j);
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Resize / Upsample, nearest                                                */
/* ======================================================================== */

typedef enum coord_mode { CM_HALF_PIXEL, CM_PYTORCH_HALF_PIXEL, CM_ALIGN_CORNERS, CM_ASYMMETRIC, CM_TF_HALF_PIXEL_NN } coord_mode;
typedef enum round_mode { RM_PREFER_FLOOR, RM_PREFER_CEIL, RM_FLOOR, RM_CEIL, RM_SIMPLE } round_mode;

typedef struct rs_state {
  coord_mode coord;
  round_mode round;
  int scales_i, sizes_i;       /* input indices; -1 = not in this version */
} rs_state;

static bool rs_blocked(const er_kernel_info *ki) { return strcmp(ki->node->op_type, "BlockedResize") == 0; }

/* The node's Resize / Upsample parameters, when they are ones this kernel
 * takes: nearest mode, no axes, stretch policy, no antialiasing. */
static bool rs_params(const er_kernel_info *ki, rs_state *s, bool linear) {
  er_kctx ctx = er__ki_ctx(ki);
  const char *mode, *ct = "half_pixel", *nm = "round_prefer_floor", *policy = "stretch";
  int64_t antialias = 0, exclude = 0;
  const int64_t *axes;
  int64_t n_axes;
  bool upsample = strcmp(ki->node->op_type, "Upsample") == 0;
  int v = ki->node->version;
  if (rs_blocked(ki)) {
    /* BlockedResize: the rules of the Resize version it names. */
    int64_t opset = 0;
    if (er__attr_int(&ctx, "opset", 0, &opset) != ER_STATUS_OK || opset < 10 || opset > 19) return false;
    v = (int)opset;
  }
  if (er__attr_string(&ctx, "mode", "nearest", &mode) != ER_STATUS_OK ||
      strcmp(mode, linear ? "linear" : "nearest") != 0)
    return false;
  if (upsample || v == 10) {
    /* Upsample 9 and Resize 10: scales input 1, asymmetric, truncation. */
    if (upsample && v < 9) return false;
    s->coord = CM_ASYMMETRIC;
    s->round = RM_SIMPLE;
    s->scales_i = 1;
    s->sizes_i = -1;
    return true;
  }
  if (er__attr_string(&ctx, "coordinate_transformation_mode", "half_pixel", &ct) != ER_STATUS_OK ||
      er__attr_string(&ctx, "nearest_mode", "round_prefer_floor", &nm) != ER_STATUS_OK ||
      er__attr_string(&ctx, "keep_aspect_ratio_policy", "stretch", &policy) != ER_STATUS_OK ||
      er__attr_int(&ctx, "antialias", 0, &antialias) != ER_STATUS_OK ||
      er__attr_int(&ctx, "exclude_outside", 0, &exclude) != ER_STATUS_OK ||
      er__attr_ints(&ctx, "axes", &axes, &n_axes) != ER_STATUS_OK)
    return false;
  if (axes || antialias || exclude || strcmp(policy, "stretch") != 0) return false;
  if (strcmp(ct, "half_pixel") == 0) s->coord = CM_HALF_PIXEL;
  else if (strcmp(ct, "pytorch_half_pixel") == 0) s->coord = CM_PYTORCH_HALF_PIXEL;
  else if (strcmp(ct, "align_corners") == 0) s->coord = CM_ALIGN_CORNERS;
  else if (strcmp(ct, "asymmetric") == 0) s->coord = CM_ASYMMETRIC;
  else if (strcmp(ct, "tf_half_pixel_for_nn") == 0 && !linear) s->coord = CM_TF_HALF_PIXEL_NN;
  else return false;
  if (strcmp(nm, "round_prefer_floor") == 0) s->round = RM_PREFER_FLOOR;
  else if (strcmp(nm, "round_prefer_ceil") == 0) s->round = RM_PREFER_CEIL;
  else if (strcmp(nm, "floor") == 0) s->round = RM_FLOOR;
  else if (strcmp(nm, "ceil") == 0) s->round = RM_CEIL;
  else return false;
  s->scales_i = 2;
  s->sizes_i = 3;
  return true;
}

/* Input index of output position j along an axis of in -> out elements
 * at the given scale, as the reference computes it (then clamped). */
static double rs_coord(const rs_state *s, int64_t j, int64_t in, int64_t out, double scale, double out_w) {
  switch (s->coord) {
    case CM_HALF_PIXEL: return ((double)j + 0.5) / scale - 0.5;
    case CM_PYTORCH_HALF_PIXEL: return out > 1 ? ((double)j + 0.5) / scale - 0.5 : 0.0;
    case CM_ALIGN_CORNERS: return out_w == 1.0 ? 0.0 : (double)j * ((double)in - 1.0) / (out_w - 1.0);
    case CM_TF_HALF_PIXEL_NN: return ((double)j + 0.5) / scale;
    default: return (double)j / scale;
  }
}

static int64_t rs_index(const rs_state *s, int64_t j, int64_t in, int64_t out, double scale, double out_w) {
  double x = rs_coord(s, j, in, out, scale, out_w);
  double bound = (double)in + 16.0;
  if (x < -bound) x = -bound;
  if (x > bound) x = bound;
  double f = floor(x);
  int64_t i;
  switch (s->round) {
    case RM_PREFER_FLOOR: i = (int64_t)(x - f <= 0.5 ? f : f + 1.0); break;
    case RM_PREFER_CEIL: i = (int64_t)(x - f < 0.5 ? f : f + 1.0); break;
    case RM_FLOOR: i = (int64_t)f; break;
    case RM_CEIL: i = (int64_t)ceil(x); break;
    default: i = scale < 1.0 ? (int64_t)ceil(x) : (int64_t)trunc(x); break;
  }
  return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* Nearest moves whole elements: any type of 1, 2, 4 or 8 bytes (the
 * uint8 feature maps of a quantized detector's upsample ran on the
 * reference, 0.48 ms of a 5.6 ms run); linear is float32 only. */
static bool rs_elem_ok(const er_kernel_info *ki, bool linear) {
  if (linear) return er__ki_f32(ki, 0) && er__ki_out_f32(ki);
  const er_tensor *x = ki->in[0], *y = ki->n_out > 0 ? ki->out[0] : NULL;
  if (!x || !y || x->dtype != y->dtype || x->dtype == ER_DTYPE_STRING) return false;
  size_t es = er_dtype_size(x->dtype);
  return es == 1 || es == 2 || es == 4 || es == 8;
}

static bool rs_supports(const er_kernel_info *ki, bool linear) {
  rs_state s;
  if (rs_blocked(ki)) {
    /* Whole blocks of 4, 8 or 16 floats move as one element. */
    const er_tensor *x = ki->in[0];
    if (linear || !er__ki_f32(ki, 0) || !er__ki_out_f32(ki) || x->rank != 5 ||
        (x->dims[4] != 4 && x->dims[4] != 8 && x->dims[4] != 16))
      return false;
  } else if (!rs_elem_ok(ki, linear) || ki->in[0]->rank != 4) {
    return false;
  }
  bool ok = rs_params(ki, &s, linear);
  er__error_clear();
  return ok;
}

static er_status rs_prepare_mode(const er_kernel_info *ki, bool linear, void **state_out, size_t *scratch_out) {
  rs_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a Resize kernel");
  rs_params(ki, s, linear);
  *state_out = s;
  *scratch_out = 0;
  return ER_STATUS_OK;
}

static er_status rs_prepare(const er_kernel_info *ki, void **state_out, size_t *scratch_out) {
  return rs_prepare_mode(ki, false, state_out, scratch_out);
}

typedef struct rs_job {
  const void *x;
  void *y;
  size_t es;                   /* element bytes: 1, 2, 4 or 8; blocks 16, 32, 64 */
  int64_t h, w, oh, ow;
  const int64_t *mh, *mw;      /* [oh], [ow] input indices */
} rs_job;

/* One output row gathered from one input row, elements of type T. */
#define RS_GATHER(T)                                                   \
  static void rs_gather_##T(void *row, const void *src, const int64_t *mw, int64_t ow) { \
    T *r = row;                                                        \
    const T *x = src;                                                  \
    for (int64_t ox = 0; ox < ow; ox++) r[ox] = x[mw[ox]];            \
  }
/* Blocked elements: a pixel's block of 4, 8 or 16 floats. */
typedef struct rs_blk16 {
  uint64_t v[2];
} rs_blk16;
typedef struct rs_blk32 {
  uint64_t v[4];
} rs_blk32;
typedef struct rs_blk64 {
  uint64_t v[8];
} rs_blk64;
RS_GATHER(uint8_t)
RS_GATHER(uint16_t)
RS_GATHER(uint32_t)
RS_GATHER(uint64_t)
RS_GATHER(rs_blk16)
RS_GATHER(rs_blk32)
RS_GATHER(rs_blk64)
#undef RS_GATHER

static void rs_planes(void *arg, int64_t begin, int64_t end) {
  const rs_job *j = arg;
  void (*gather)(void *, const void *, const int64_t *, int64_t);
  switch (j->es) {
    case 1: gather = rs_gather_uint8_t; break;
    case 2: gather = rs_gather_uint16_t; break;
    case 4: gather = rs_gather_uint32_t; break;
    case 8: gather = rs_gather_uint64_t; break;
    case 16: gather = rs_gather_rs_blk16; break;
    case 32: gather = rs_gather_rs_blk32; break;
    default: gather = rs_gather_rs_blk64; break;
  }
  const size_t in_row = (size_t)j->w * j->es, out_row = (size_t)j->ow * j->es;
  for (int64_t p = begin; p < end; p++) {
    const uint8_t *x = (const uint8_t *)j->x + (size_t)(p * j->h) * in_row;
    uint8_t *y = (uint8_t *)j->y + (size_t)(p * j->oh) * out_row;
    for (int64_t oy = 0; oy < j->oh; oy++) {
      uint8_t *row = y + (size_t)oy * out_row;
      if (oy > 0 && j->mh[oy] == j->mh[oy - 1]) {
        memcpy(row, row - out_row, out_row);
        continue;
      }
      gather(row, x + (size_t)j->mh[oy] * in_row, j->mw, j->ow);
    }
  }
}

/* Each axis's scale and fractional output length, as the reference takes
 * them from the scales or sizes input; false for inputs this kernel leaves
 * to the reference (batch or channel axes resized, no scales nor sizes). */
static bool rs_scales(const rs_state *s, const er_kctx *ctx, double scale[4], double out_w[4]) {
  const er_tensor *x = ctx->in[0], *sc = er__in(ctx, s->scales_i), *sz = s->sizes_i >= 0 ? er__in(ctx, s->sizes_i) : NULL;
  const er_tensor *y = ctx->out[0];
  if (sc && er__tensor_count(sc) == 0) sc = NULL;
  if (sz && er__tensor_count(sz) == 0) sz = NULL;
  if (y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1] || (!sc && !sz) || (sc && sc->dtype != ER_DTYPE_FLOAT) ||
      (sc && er__tensor_count(sc) != 4))
    return false;
  for (int a = 0; a < 4; a++) {
    int64_t in = x->dims[a], out = y->dims[a];
    if (sc) {
      scale[a] = ((const float *)sc->data)[a];
      out_w[a] = scale[a] * (double)in;
    } else {
      scale[a] = in == 0 ? 1.0 : (double)out / (double)in;
      out_w[a] = (double)out;
    }
  }
  return true;
}

static er_status rs_run(const er_kernel_run *kr) {
  const rs_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  double scale[4], out_w[4];
  /* Batch and channel axes must not be resized. */
  if (!rs_scales(s, ctx, scale, out_w)) return er__kr_reference(kr);
  int64_t h = x->dims[2], w = x->dims[3], oh = y->dims[2], ow = y->dims[3];
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  /* The coordinate rule applies to every axis: with tf_half_pixel_for_nn
   * and a ceiling rounding even an unscaled batch or channel axis shifts
   * by one. Only identity maps on those two are taken here. */
  for (int a = 0; a < 2; a++)
    for (int64_t j = 0; j < x->dims[a]; j++)
      if (rs_index(s, j, x->dims[a], y->dims[a], scale[a], out_w[a]) != j) return er__kr_reference(kr);
  /* The index maps in the run context's spill scratch (kept between runs). */
  void *owned = NULL;
  int64_t *maps = er__kr_spill(kr, (size_t)(oh + ow) * sizeof *maps, &owned);
  if (!maps) return er__error(ER_STATUS_OUT_OF_MEMORY, "Resize '%s': out of memory", ctx->node->name);
  for (int64_t j = 0; j < oh; j++) maps[j] = rs_index(s, j, h, oh, scale[2], out_w[2]);
  for (int64_t j = 0; j < ow; j++) maps[oh + j] = rs_index(s, j, w, ow, scale[3], out_w[3]);
  /* A blocked map [N, CB, H, W, B] is N * CB planes of blocks. */
  size_t es = x->rank == 5 ? (size_t)x->dims[4] * sizeof(float) : er_dtype_size(x->dtype);
  rs_job job = {x->data, y->data, es, h, w, oh, ow, maps, maps + oh};
  int64_t planes = x->dims[0] * x->dims[1];
  er__parallel_for(kr->pool, planes, max64(1, LAYOUT_GRAIN_BYTES / max64(1, oh * ow * (int64_t)es)), rs_planes, &job);
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ---- linear ---------------------------------------------------------------- */

/* Bilinear Resize of NCHW float planes with the reference's arithmetic:
 * per axis two taps (floor(x), floor(x) + 1, clamped to the edge) with
 * weights 1 - frac and frac computed in double; the rows pass in double
 * (0.0, plus each nonzero-weight product in tap order), then the columns
 * pass, then one rounding to float. That is the reference's order when
 * the height grows or both axes shrink or only the width changes; a height
 * that shrinks while the width grows is left to it (it passes the width
 * first then). Equal bit for bit. */
typedef struct rs_lin_axis {
  int64_t i0, i1;
  double w0, w1;
} rs_lin_axis;

static void rs_lin_taps(const rs_state *s, int64_t in, int64_t out, double scale, double out_w, rs_lin_axis *t) {
  double bound = (double)in + 16.0 + 2.0;
  for (int64_t j = 0; j < out; j++) {
    double x = rs_coord(s, j, in, out, scale, out_w);
    if (!(x >= -bound)) x = -bound;
    if (x > bound) x = bound;
    double x0 = floor(x), frac = x - x0;
    int64_t i0 = (int64_t)x0, i1 = i0 + 1;
    t[j].i0 = i0 < 0 ? 0 : i0 > in - 1 ? in - 1 : i0;
    t[j].i1 = i1 < 0 ? 0 : i1 > in - 1 ? in - 1 : i1;
    double w0 = 1.0 - fabs(0.0 - frac), w1 = 1.0 - fabs(1.0 - frac);
    t[j].w0 = w0 < 0.0 ? 0.0 : w0;
    t[j].w1 = w1 < 0.0 ? 0.0 : w1;
  }
}

typedef struct rsl_job {
  const float *x;
  float *y;
  int64_t h, w, oh, ow, planes;
  const rs_lin_axis *th, *tw;
  double *rows;                /* [chunks][w] */
  int chunks;
} rsl_job;

static void rsl_chunk(void *arg, int64_t begin, int64_t end) {
  const rsl_job *j = arg;
  for (int64_t ch = begin; ch < end; ch++) {
    double *row = j->rows + ch * j->w;
    for (int64_t p = j->planes * ch / j->chunks; p < j->planes * (ch + 1) / j->chunks; p++) {
      const float *x = j->x + p * j->h * j->w;
      float *y = j->y + p * j->oh * j->ow;
      for (int64_t oy = 0; oy < j->oh; oy++) {
        const rs_lin_axis *ty = &j->th[oy];
        const float *r0 = x + ty->i0 * j->w, *r1 = x + ty->i1 * j->w;
        /* The rows pass: 0.0, then each nonzero-weight product. */
        for (int64_t i = 0; i < j->w; i++) {
          double v = 0.0;
          if (ty->w0 != 0.0) v += ty->w0 * (double)r0[i];
          if (ty->w1 != 0.0) v += ty->w1 * (double)r1[i];
          row[i] = v;
        }
        float *out = y + oy * j->ow;
        for (int64_t ox = 0; ox < j->ow; ox++) {
          const rs_lin_axis *tx = &j->tw[ox];
          double v = 0.0;
          if (tx->w0 != 0.0) v += tx->w0 * row[tx->i0];
          if (tx->w1 != 0.0) v += tx->w1 * row[tx->i1];
          out[ox] = (float)v;
        }
      }
    }
  }
}

static er_status rsl_run(const er_kernel_run *kr) {
  const rs_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  double scale[4], out_w[4];
  if (!rs_scales(s, ctx, scale, out_w)) return er__kr_reference(kr);
  int64_t h = x->dims[2], w = x->dims[3], oh = y->dims[2], ow = y->dims[3];
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  /* The reference passes shrinking axes first: the width first when only
   * it shrinks while the height grows (left to it). The batch and channel
   * axes must map to themselves (a fractional scale of 1 does). */
  if (oh > h && ow < w) return er__kr_reference(kr);
  for (int a = 0; a < 2; a++)
    if (scale[a] != 1.0) return er__kr_reference(kr);
  int want = er__pool_threads(kr->pool);
  int64_t planes = x->dims[0] * x->dims[1];
  int64_t by_work = max64(1, planes * oh * ow / (LAYOUT_GRAIN_BYTES / 4));
  int64_t c = want < planes ? want : planes;
  int chunks = (int)(c < by_work ? c : by_work);
  if (chunks < 1) chunks = 1;
  /* Taps of both axes, then a row of doubles per chunk, in the run
   * context's spill scratch (kept between runs). */
  size_t taps = (size_t)(oh + ow) * sizeof(rs_lin_axis);
  void *owned = NULL;
  uint8_t *buf = er__kr_spill(kr, taps + (size_t)chunks * (size_t)w * sizeof(double) + 64, &owned);
  if (!buf) return er__error(ER_STATUS_OUT_OF_MEMORY, "Resize '%s': out of memory", ctx->node->name);
  rs_lin_axis *th = (rs_lin_axis *)(void *)buf, *tw = th + oh;
  rs_lin_taps(s, h, oh, scale[2], out_w[2], th);
  rs_lin_taps(s, w, ow, scale[3], out_w[3], tw);
  double *rows = (double *)(void *)(buf + (taps + 63) / 64 * 64);
  rsl_job job = {x->data, y->data, h, w, oh, ow, planes, th, tw, rows, chunks};
  er__parallel_for(kr->pool, chunks, 1, rsl_chunk, &job);
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

/* Plain C (copies and index maps): ISA "scalar", there on every CPU. */
static bool tr_supports_any(const er_kernel_info *ki) { return tr_supports(ki, true); }
static er_status tr_run(const er_kernel_run *kr) { return tr_run_isa(kr, 0); }
#if defined(__x86_64__) || defined(__i386__)
static bool tr_supports_avx2(const er_kernel_info *ki) { return tr_supports(ki, ki->cpu->avx2); }
static er_status tr_run_avx2(const er_kernel_run *kr) { return tr_run_isa(kr, 1); }
static bool tr_supports_avx512(const er_kernel_info *ki) { return tr_supports(ki, ki->cpu->avx512f); }
static er_status tr_run_avx512(const er_kernel_run *kr) { return tr_run_isa(kr, 2); }
static const er_cpu_kernel k_transpose_avx2 = {"x_transpose__avx2", "Transpose", "", tr_supports_avx2, NULL,
                                               tr_run_avx2, NULL};
static const er_cpu_kernel k_transpose_avx512 = {"x_transpose__avx512", "Transpose", "", tr_supports_avx512, NULL,
                                                 tr_run_avx512, NULL};
#endif
static bool rs_supports_any(const er_kernel_info *ki) { return rs_supports(ki, false); }
static bool rsl_supports(const er_kernel_info *ki) { return rs_supports(ki, true); }
static er_status rsl_prepare(const er_kernel_info *ki, void **state_out, size_t *scratch_out) {
  return rs_prepare_mode(ki, true, state_out, scratch_out);
}

static const er_cpu_kernel k_transpose = {"x_transpose__scalar", "Transpose", "", tr_supports_any, NULL, tr_run, NULL};
static const er_cpu_kernel k_resize = {"any_resize_nearest__scalar", "Resize", "", rs_supports_any, rs_prepare, rs_run,
                                       free};
static const er_cpu_kernel k_blocked_resize = {"f32_blocked_resize_nearest__scalar", "BlockedResize", ER_FUSED_DOMAIN,
                                               rs_supports_any, rs_prepare, rs_run, free};
static const er_cpu_kernel k_upsample = {"any_upsample_nearest__scalar", "Upsample", "", rs_supports_any, rs_prepare,
                                         rs_run, free};
static const er_cpu_kernel k_resize_linear = {"f32_resize_linear__scalar", "Resize", "", rsl_supports, rsl_prepare,
                                              rsl_run, free};
static const er_cpu_kernel k_upsample_linear = {"f32_upsample_linear__scalar", "Upsample", "", rsl_supports,
                                                rsl_prepare, rsl_run, free};

/* ======================================================================== */
/* Slice                                                                     */
/* ======================================================================== */

/* Slice as the reference's strided view of its input (er__slice_view,
 * the same clamping rules), its rows split over the workers. YOLOv5 and
 * YOLOX "Focus" stems take a 640x640 image apart with stride-2 slices
 * before the first convolution: on one thread that was a millisecond per
 * run. Any element type: only bytes move. */

typedef struct slice_job {
  const er_view *v;
  const void *x;
  void *y;
} slice_job;

static void slice_rows(void *arg, int64_t begin, int64_t end) {
  const slice_job *j = arg;
  er__view_copy(j->v, j->y, j->x, begin, end);
}

static bool slice_supports(const er_kernel_info *ki) {
  const er_tensor *x = ki->in[0];
  return ki->n_out == 1 && ki->out[0] && x && x->dtype != ER_DTYPE_UNDEFINED && x->dtype != ER_DTYPE_STRING &&
         er_dtype_size(x->dtype) > 0;
}

static er_status slice_run(const er_kernel_run *kr) {
  er_kctx *ctx = kr->ctx;
  er_view v;
  ER_CHECK(er__slice_view(ctx, &v));
  int64_t rows = er__view_rows(&v);
  if (rows == 0) return ER_STATUS_OK;
  int64_t row_bytes = (v.rank > 0 ? v.dims[v.rank - 1] : 1) * (int64_t)v.es;
  slice_job j = {&v, ctx->in[0]->data, ctx->out[0]->data};
  er__parallel_for(kr->pool, rows, max64(1, LAYOUT_GRAIN_BYTES / max64(1, row_bytes)), slice_rows, &j);
  return ER_STATUS_OK;
}

static const er_cpu_kernel k_slice = {"any_slice__scalar", "Slice", "", slice_supports, NULL, slice_run, NULL};

/* ======================================================================== */
/* Pad                                                                       */
/* ======================================================================== */

/* Pad as the reference computes it (er__pad_rows: every mode, negative
 * pads, opset 18's axes), its output rows split over the workers. Style
 * transfer networks reflect-pad before every convolution: fast_style's
 * five 128-channel 56x56 ones took 0.6-1.2 ms each on one thread. */
typedef struct pad_kjob {
  const er_pad_job *job;
  void *y;
} pad_kjob;

static void pad_rows(void *arg, int64_t begin, int64_t end) {
  const pad_kjob *j = arg;
  er__pad_rows(j->job, j->y, begin, end);
}

static bool pad_supports(const er_kernel_info *ki) {
  const er_tensor *x = ki->in[0];
  if (!x || ki->n_out != 1 || !ki->out[0] || x->dtype == ER_DTYPE_UNDEFINED || x->dtype == ER_DTYPE_STRING)
    return false;
  size_t es = er_dtype_size(x->dtype);
  return es > 0 && es <= 8;
}

static er_status pad_run(const er_kernel_run *kr) {
  er_pad_job job;
  ER_CHECK(er__pad_job_make(kr->ctx, &job));
  pad_kjob j = {&job, kr->ctx->out[0]->data};
  int64_t row_bytes = job.inner * job.block * (int64_t)job.es;
  er__parallel_for(kr->pool, job.rows, max64(1, LAYOUT_GRAIN_BYTES / max64(1, row_bytes)), pad_rows, &j);
  return ER_STATUS_OK;
}

static const er_cpu_kernel k_pad = {"any_pad__scalar", "Pad", "", pad_supports, NULL, pad_run, NULL};

/* ======================================================================== */
/* DepthToSpace                                                              */
/* ======================================================================== */

/* Each output row (n, c, h, i) of W * b elements interleaves b input rows
 * (j = 0 .. b - 1) of W elements, y[w * b + j] = x_j[w], where x_j is
 * channel c * b * b + i * b + j (CRD) or (i * b + j) * C + c (DCR). The
 * reference walks the 6-D view whose innermost axis is j: rows of b
 * elements at a stride of a whole plane (ESPCN's 3x upsampling, 1.3 ms on
 * one thread). Rows are split over the workers; 4-byte elements with b of
 * 2, 3 or 4 have their own loops. */
typedef struct d2s_job {
  const uint8_t *x;
  uint8_t *y;
  int64_t c, h, w, b, cin;
  bool crd;
  size_t es;
} d2s_job;

#define D2S_LOOP(B)                                                  \
  for (int64_t k = 0; k < w; k++)                                   \
    for (int64_t j = 0; j < (B); j++) out[k * (B) + j] = src[j][k]; \
  break;

static void d2s_rows(void *arg, int64_t r0, int64_t r1) {
  const d2s_job *jb = arg;
  const int64_t b = jb->b, w = jb->w, h = jb->h, c = jb->c;
  const size_t es = jb->es;
  for (int64_t r = r0; r < r1; r++) {
    int64_t i = r % b, hh = r / b % h, cc = r / (b * h) % c, n = r / (b * h * c);
    uint8_t *row = jb->y + (size_t)(r * w * b) * es;
    const uint8_t *srcb[16];
    for (int64_t j = 0; j < b; j++) {
      int64_t ch = jb->crd ? cc * b * b + i * b + j : (i * b + j) * c + cc;
      srcb[j] = jb->x + (size_t)(((n * jb->cin + ch) * h + hh) * w) * es;
    }
    if (es == 4 && b <= 4) {
      const uint32_t *src[4];
      for (int64_t j = 0; j < b; j++) src[j] = (const uint32_t *)(const void *)srcb[j];
      uint32_t *out = (uint32_t *)(void *)row;
      switch (b) {
        case 2: D2S_LOOP(2)
        case 3: D2S_LOOP(3)
        case 4: D2S_LOOP(4)
        default: D2S_LOOP(1)
      }
      continue;
    }
    for (int64_t k = 0; k < w; k++)
      for (int64_t j = 0; j < b; j++) memcpy(row + (size_t)(k * b + j) * es, srcb[j] + (size_t)k * es, es);
  }
}
#undef D2S_LOOP

static bool d2s_supports(const er_kernel_info *ki) {
  const er_tensor *x = ki->in[0];
  return ki->n_out == 1 && ki->out[0] && x && (x->rank == 4 || x->rank < 0) && x->dtype != ER_DTYPE_UNDEFINED &&
         x->dtype != ER_DTYPE_STRING && er_dtype_size(x->dtype) > 0;
}

static er_status d2s_run(const er_kernel_run *kr) {
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0], *y = ctx->out[0];
  int64_t b;
  const char *mode = "DCR";
  ER_CHECK(er__attr_int(ctx, "blocksize", 0, &b));
  if (ctx->node->version >= 11) ER_CHECK(er__attr_string(ctx, "mode", "DCR", &mode));
  /* Blocks of up to 16 (the source table), shapes that agree; the rest
   * (and the reference's own errors) go to the reference. */
  if (b < 1 || b > 16 || x->rank != 4 || y->rank != 4 || x->dims[1] % (b * b) != 0 ||
      y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1] / (b * b) || y->dims[2] != x->dims[2] * b ||
      y->dims[3] != x->dims[3] * b || (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0))
    return er__kr_reference(kr);
  d2s_job j = {x->data, ctx->out[0]->data, y->dims[1], x->dims[2], x->dims[3], b, x->dims[1],
               strcmp(mode, "CRD") == 0, er_dtype_size(x->dtype)};
  int64_t rows = y->dims[0] * y->dims[1] * y->dims[2];
  if (rows == 0 || j.w == 0) return ER_STATUS_OK;
  int64_t row_bytes = j.w * b * (int64_t)j.es;
  er__parallel_for(kr->pool, rows, max64(1, LAYOUT_GRAIN_BYTES / max64(1, row_bytes)), d2s_rows, &j);
  return ER_STATUS_OK;
}

static const er_cpu_kernel k_d2s = {"any_depth_to_space__scalar", "DepthToSpace", "", d2s_supports, NULL, d2s_run,
                                    NULL};

/* ======================================================================== */
/* Split                                                                     */
/* ======================================================================== */

/* Each output is a strided view of the input (its range of the split
 * axis), its rows copied by the workers. YOLOv5's decoding head splits
 * [1,3,80,80,85] into 2, 2 and 81 along the last axis: the reference made
 * a memcpy call per 8-byte row on one thread (0.68 ms). The sizes come
 * from the outputs' shapes, which the op's check set from 'split' (or
 * equal chunks); any disagreement goes to the reference. Any element
 * type: only bytes move. */
#define SPLIT_MAX_OUT 32

typedef struct split_job {
  er_view v[SPLIT_MAX_OUT];
  void *y[SPLIT_MAX_OUT];
  int64_t first[SPLIT_MAX_OUT + 1]; /* units of the outputs before each */
  int64_t unit_rows[SPLIT_MAX_OUT];
  int64_t rows[SPLIT_MAX_OUT];
  const void *x;
  int n;
} split_job;

static void split_units(void *arg, int64_t u0, int64_t u1) {
  const split_job *j = arg;
  int k = 0;
  for (int64_t u = u0; u < u1; u++) {
    while (u >= j->first[k + 1]) k++;
    int64_t r0 = (u - j->first[k]) * j->unit_rows[k];
    er__view_copy(&j->v[k], j->y[k], j->x, r0, min64(r0 + j->unit_rows[k], j->rows[k]));
  }
}

static bool split_supports(const er_kernel_info *ki) {
  const er_tensor *x = ki->in[0];
  if (!x || ki->n_out < 1 || ki->n_out > SPLIT_MAX_OUT || x->dtype == ER_DTYPE_UNDEFINED ||
      x->dtype == ER_DTYPE_STRING || er_dtype_size(x->dtype) == 0)
    return false;
  for (int i = 0; i < ki->n_out; i++)
    if (ki->out[i] && ki->out[i]->dtype != x->dtype) return false;
  return true;
}

static er_status split_run(const er_kernel_run *kr) {
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  int64_t axis_attr;
  int axis;
  ER_CHECK(er__attr_int(ctx, "axis", 0, &axis_attr));
  if (x->rank < 1 || er__norm_axis(ctx, "axis", axis_attr, x->rank, &axis) != ER_STATUS_OK)
    return er__kr_reference(kr);
  int64_t strides[ER_MAX_RANK], start = 0;
  er__strides(x->rank, x->dims, strides);
  split_job job, *j = &job; /* about 10 KB: a run allocates nothing */
  j->x = x->data;
  j->n = 0;
  j->first[0] = 0;
  for (int i = 0; i < ctx->n_out; i++) {
    const er_tensor *y = ctx->out[i];
    /* An absent output's size is not known here. */
    if (!y || y->rank != x->rank) goto reference;
    int64_t size = y->dims[axis];
    for (int d = 0; d < x->rank; d++)
      if (d != axis && y->dims[d] != x->dims[d]) goto reference;
    if (size < 0 || size > x->dims[axis] - start) goto reference;
    int k = j->n;
    er__view_make(&j->v[k], er_dtype_size(x->dtype), y->rank, y->dims, strides, start * strides[axis]);
    start += size;
    j->rows[k] = er__view_rows(&j->v[k]);
    if (j->rows[k] == 0) continue;
    int64_t row_bytes = (j->v[k].rank > 0 ? j->v[k].dims[j->v[k].rank - 1] : 1) * (int64_t)j->v[k].es;
    j->unit_rows[k] = max64(1, LAYOUT_GRAIN_BYTES / max64(1, row_bytes));
    j->y[k] = y->data;
    j->first[k + 1] = j->first[k] + (j->rows[k] + j->unit_rows[k] - 1) / j->unit_rows[k];
    j->n++;
  }
  if (start != x->dims[axis]) goto reference;
  if (j->n > 0) er__parallel_for(kr->pool, j->first[j->n], 1, split_units, j);
  return ER_STATUS_OK;
reference:
  return er__kr_reference(kr);
}

static const er_cpu_kernel k_split = {"any_split__scalar", "Split", "", split_supports, NULL, split_run, NULL};

/* ======================================================================== */
/* Concat                                                                    */
/* ======================================================================== */

/* Concat as copies split over the workers: every output row (fixed index
 * over the axes before `axis`) is the inputs' matching rows one after the
 * other, and each copy is cut into pieces of at most CONCAT_PIECE bytes.
 * The reference does the same copies on one thread; with N = 1 a channel
 * concat is one large copy per input (DenseNet-121's 58 concatenations of
 * growing feature maps took 2 ms per run whatever the thread count). Any
 * element type: only bytes move. */
#define CONCAT_PIECE (INT64_C(64) << 10)
/* Copies a kernel run takes on; more rows than this go to the reference. */
#define CONCAT_MAX_COPIES 1024
/* Inputs the many-row path takes (more go to the reference). */
#define CONCAT_MAX_INPUTS 64

typedef struct concat_copy {
  const uint8_t *src;
  uint8_t *dst;
  int64_t bytes;
  int64_t first_piece;   /* pieces of the copies before this one */
} concat_copy;

typedef struct concat_job {
  const concat_copy *copies;
  int n;
} concat_job;

static void concat_pieces(void *arg, int64_t p0, int64_t p1) {
  const concat_job *j = arg;
  int c = 0;
  while (c + 1 < j->n && j->copies[c + 1].first_piece <= p0) c++;
  for (int64_t p = p0; p < p1; p++) {
    while (c + 1 < j->n && j->copies[c + 1].first_piece <= p) c++;
    const concat_copy *k = &j->copies[c];
    int64_t off = (p - k->first_piece) * CONCAT_PIECE;
    int64_t len = k->bytes - off < CONCAT_PIECE ? k->bytes - off : CONCAT_PIECE;
    if (len > 0) memcpy(k->dst + off, k->src + off, (size_t)len);
  }
}

/* Many rows (YOLOv5's head concatenates [19200, 2], [19200, 2] and
 * [19200, 81] along the last axis; the reference did it on one thread):
 * units of output rows split over the workers, short pieces with
 * fixed-size copies. */
typedef struct concat_rows_job {
  const er_kctx *ctx;
  uint8_t *y;
  int64_t row_bytes[CONCAT_MAX_INPUTS], out_row, unit_rows, outer;
} concat_rows_job;

/* One row piece; fixed sizes become moves. */
static inline void copy_piece(uint8_t *dst, const uint8_t *src, int64_t bytes) {
  switch (bytes) {
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 12: memcpy(dst, src, 12); break;
    case 16: memcpy(dst, src, 16); break;
    case 32: memcpy(dst, src, 32); break;
    default: memcpy(dst, src, (size_t)bytes); break;
  }
}

/* Output rows in order, as the reference writes them (writing each input's
 * column of rows in turn was 10-30% slower on one thread). */
static void concat_rows(void *arg, int64_t u0, int64_t u1) {
  const concat_rows_job *j = arg;
  const int n_in = j->ctx->n_in;
  int64_t r0 = u0 * j->unit_rows, r1 = min64(u1 * j->unit_rows, j->outer);
  uint8_t *out = j->y + r0 * j->out_row;
  for (int64_t r = r0; r < r1; r++)
    for (int i = 0; i < n_in; i++) {
      int64_t rb = j->row_bytes[i];
      copy_piece(out, (const uint8_t *)j->ctx->in[i]->data + r * rb, rb);
      out += rb;
    }
}

static bool concat_supports(const er_kernel_info *ki) {
  if (ki->n_out != 1 || ki->n_in < 1) return false;
  for (int i = 0; i < ki->n_in; i++)
    if (!ki->in[i] || ki->in[i]->dtype != ki->out[0]->dtype) return false;
  return er_dtype_size(ki->out[0]->dtype) > 0;
}

static er_status concat_run(const er_kernel_run *kr) {
  er_kctx *ctx = kr->ctx;
  er_tensor *y = ctx->out[0];
  int64_t axis_attr;
  int axis;
  /* Before opset 4 the axis was optional, default 1 (the check has
   * already required it from 4 on). */
  ER_CHECK(er__attr_int(ctx, "axis", ctx->node->version < 4 ? 1 : 0, &axis_attr));
  ER_CHECK(er__norm_axis(ctx, "axis", axis_attr, y->rank, &axis));
  int64_t outer = 1, after = 1;
  for (int d = 0; d < axis; d++) outer *= y->dims[d];
  for (int d = axis + 1; d < y->rank; d++) after *= y->dims[d];
  const size_t es = er_dtype_size(y->dtype);
  /* The reference takes inputs out of their planned place (it builds the
   * output aside first). It writes every byte, and must not have the
   * output zeroed as er__kr_reference does: parts made in place are in
   * it. */
  if (er__concat_misplaced(ctx, axis)) return ctx->node->op->run(ctx);
  if (outer * ctx->n_in > CONCAT_MAX_COPIES) {
    /* Inputs planned in place are whole channel blocks of one image, so
     * never here; any input inside the output goes to the reference. */
    concat_rows_job j = {ctx, y->data, {0}, 0, 0, outer};
    const uint8_t *y0 = y->data, *y1 = y0 + er__tensor_count(y) * (int64_t)es;
    if (ctx->n_in > CONCAT_MAX_INPUTS) return ctx->node->op->run(ctx);
    for (int i = 0; i < ctx->n_in; i++) {
      const uint8_t *src = ctx->in[i]->data;
      j.row_bytes[i] = ctx->in[i]->dims[axis] * after * (int64_t)es;
      if (j.row_bytes[i] > 0 && src + outer * j.row_bytes[i] > y0 && src < y1) return ctx->node->op->run(ctx);
      j.out_row += j.row_bytes[i];
    }
    if (j.out_row == 0) return ER_STATUS_OK;
    j.unit_rows = max64(1, LAYOUT_GRAIN_BYTES / j.out_row);
    er__parallel_for(kr->pool, (outer + j.unit_rows - 1) / j.unit_rows, 1, concat_rows, &j);
    return ER_STATUS_OK;
  }
  concat_copy copies[CONCAT_MAX_COPIES];
  int n = 0;
  int64_t pieces = 0;
  uint8_t *out = y->data;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < ctx->n_in; i++) {
      const er_tensor *t = ctx->in[i];
      int64_t row = t->dims[axis] * after * (int64_t)es;
      const uint8_t *src = (const uint8_t *)t->data + o * row;
      /* A source made in place (session.c) is already where it belongs. */
      if (row > 0 && src != out) {
        copies[n] = (concat_copy){src, out, row, pieces};
        pieces += (row + CONCAT_PIECE - 1) / CONCAT_PIECE;
        n++;
      }
      out += row;
    }
  if (n == 0) return ER_STATUS_OK;
  concat_job j = {copies, n};
  er__parallel_for(kr->pool, pieces, 1, concat_pieces, &j);
  return ER_STATUS_OK;
}

static const er_cpu_kernel k_concat = {"any_concat__scalar", "Concat", "", concat_supports, NULL, concat_run, NULL};

const er_cpu_kernel *const er__kernels_layout[] = {
    &k_concat,
    &k_split,
    &k_pad,
    &k_d2s,
    &k_slice,
#if defined(__x86_64__) || defined(__i386__)
    &k_transpose_avx512,
    &k_transpose_avx2,
#endif
    &k_transpose,
    &k_resize,
    &k_blocked_resize,
    &k_upsample,
    &k_resize_linear,
    &k_upsample_linear,
    NULL,
};
