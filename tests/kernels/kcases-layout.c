/* kcases-layout.c - cases for Slice, Split, Pad, DepthToSpace, Concat, Transpose (every element size, permutations
 * that collapse to row copies, to 2-D transposes and to neither, unit
 * axes, tiles at and around 16) and nearest Resize / Upsample (every
 * coordinate mode and rounding mode, scales and sizes, up and down, odd
 * factors, elements of 1, 2, 4 and 8 bytes). */
#include <stdlib.h>

#include "kcases.h"

/* Gives float input x the type t (same element count) with random bytes. */
static void retype(kcase *c, er_tensor *x, er_dtype t) {
  if (t == ER_DTYPE_FLOAT) return;
  int64_t n = er__tensor_count(x);
  size_t es = er_dtype_size(t);
  unsigned char *d = calloc(1, n > 0 ? (size_t)n * es : 1);
  for (size_t b = 0; b < (size_t)n * es; b++) d[b] = (unsigned char)(kc_uniform(c, 0, 256));
  free(x->data);
  x->data = d;
  x->dtype = t;
  x->nbytes = (size_t)n * es;
}

static void gen_transpose(case_fn fn, void *arg) {
  static const struct {
    int rank;
    int64_t dims[5];
    int64_t perm[5];
  } specs[] = {
      {2, {17, 33}, {1, 0}},
      {2, {64, 16}, {1, 0}},
      {4, {2, 128, 4, 32}, {0, 2, 1, 3}},    /* attention heads out */
      {4, {2, 4, 128, 32}, {0, 1, 3, 2}},    /* K^T */
      {3, {1, 100, 77}, {0, 2, 1}},          /* 8 x 8 blocks, edges, split along a */
      {5, {1, 3, 85, 9, 10}, {0, 1, 3, 4, 2}}, /* YOLOv5's head: 16 x 16 blocks, 5 columns past them */
      {3, {2, 40, 23}, {0, 2, 1}},           /* 7 columns past a 16 x 16 block, rows past them */
      {4, {1, 3, 9, 11}, {0, 2, 3, 1}},      /* NCHW -> NHWC */
      {4, {1, 9, 11, 3}, {0, 3, 1, 2}},      /* NHWC -> NCHW */
      {5, {1, 2, 3, 7, 7}, {0, 2, 1, 3, 4}}, /* channel shuffle */
      {3, {5, 1, 7}, {2, 1, 0}},             /* unit axis */
      {3, {4, 5, 6}, {1, 2, 0}},
      {3, {4, 5, 6}, {2, 0, 1}},
      {4, {3, 4, 5, 6}, {3, 1, 2, 0}},
      {1, {10}, {0}},
      {3, {2, 0, 3}, {2, 1, 0}},
      /* Short contiguous rows (MobileViT's 2x2 patch unfold and fold):
       * 2 to 16 bytes a row, the longest other axis walked. */
      {4, {6, 2, 16, 2}, {0, 2, 1, 3}},
      {4, {6, 16, 2, 2}, {0, 2, 1, 3}},
      {5, {2, 3, 4, 5, 3}, {3, 0, 2, 1, 4}},
  };
  static const er_dtype types[] = {ER_DTYPE_FLOAT, ER_DTYPE_UINT8, ER_DTYPE_FLOAT16, ER_DTYPE_INT64};
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++) {
    for (size_t t = 0; t < ER_ARRAY_LEN(types); t++) {
      kc_begin(&c, "Transpose", "", 13, "Transpose#%zu %s", i, er_dtype_name(types[t]));
      retype(&c, kc_input(&c, specs[i].rank, specs[i].dims, -100, 100, false), types[t]);
      kc_attr_ints(&c, "perm", specs[i].rank, specs[i].perm);
      c.tol = TOL_EXACT_T;
      fn(&c, arg);
    }
  }
  kc_begin(&c, "Transpose", "", 13, "Transpose default perm (reverse)");
  kc_input(&c, 3, DIMS(3, 4, 5), -1, 1, false);
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
}

static void gen_resize(case_fn fn, void *arg) {
  static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                       "tf_half_pixel_for_nn"};
  static const char *const rounds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  static const float factors[][2] = {{2, 2}, {3, 1.5f}, {0.5f, 0.5f}, {1.7f, 0.6f}};
  kcase c;
  for (size_t ci = 0; ci < ER_ARRAY_LEN(coords); ci++) {
    for (size_t ri = 0; ri < ER_ARRAY_LEN(rounds); ri++) {
      for (size_t f = 0; f < ER_ARRAY_LEN(factors); f++) {
        bool sizes = (ci + ri + f) % 3 == 0;
        int version = ci == 4 ? 11 : 13;
        kc_begin(&c, "Resize", "", version, "Resize nearest %s %s x[1,3,7,9] %s %gx%g", coords[ci], rounds[ri],
                 sizes ? "sizes" : "scales", factors[f][0], factors[f][1]);
        kc_input(&c, 4, DIMS(1, 3, 7, 9), -1, 1, false);
        kc_input_none(&c); /* roi */
        if (sizes) {
          kc_input_none(&c);
          int64_t s[4] = {1, 3, (int64_t)(7 * factors[f][0]), (int64_t)(9 * factors[f][1])};
          kc_input_i64(&c, 1, DIMS(4), s, true);
        } else {
          er_tensor *t = kc_input(&c, 1, DIMS(4), 0, 0, true);
          float *d = t->data;
          d[0] = d[1] = 1.0f;
          d[2] = factors[f][0];
          d[3] = factors[f][1];
        }
        kc_attr_string(&c, "mode", "nearest");
        kc_attr_string(&c, "coordinate_transformation_mode", coords[ci]);
        kc_attr_string(&c, "nearest_mode", rounds[ri]);
        c.tol = TOL_EXACT_T;
        fn(&c, arg);
      }
    }
  }
  kc_begin(&c, "Resize", "", 13, "Resize nearest default modes x[2,16,20,20] 2x (detector upsample)");
  kc_input(&c, 4, DIMS(2, 16, 20, 20), -1, 1, false);
  kc_input_none(&c);
  er_tensor *t = kc_input(&c, 1, DIMS(4), 0, 0, true);
  ((float *)t->data)[0] = ((float *)t->data)[1] = 1.0f;
  ((float *)t->data)[2] = ((float *)t->data)[3] = 2.0f;
  kc_attr_string(&c, "mode", "nearest");
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
  /* Other element types: a quantized detector's uint8 upsample, and one
   * type of each other size (the random floats' bytes reinterpreted). */
  static const er_dtype types[] = {ER_DTYPE_UINT8, ER_DTYPE_INT8, ER_DTYPE_FLOAT16, ER_DTYPE_INT64};
  for (size_t ti = 0; ti < ER_ARRAY_LEN(types); ti++) {
    kc_begin(&c, "Resize", "", 13, "Resize nearest %s x[1,5,7,9] asymmetric floor 2x1.5", er_dtype_name(types[ti]));
    er_tensor *x = kc_input(&c, 4, DIMS(1, 5, 7, 9), -100, 100, false);
    int64_t n = er__tensor_count(x);
    size_t es = er_dtype_size(types[ti]);
    unsigned char *d = calloc(1, (size_t)n * es);
    for (size_t b = 0; b < (size_t)n * es; b++) d[b] = (unsigned char)(kc_uniform(&c, 0, 256));
    free(x->data);
    x->data = d;
    x->dtype = types[ti];
    x->nbytes = (size_t)n * es;
    kc_input_none(&c);
    t = kc_input(&c, 1, DIMS(4), 0, 0, true);
    ((float *)t->data)[0] = ((float *)t->data)[1] = 1.0f;
    ((float *)t->data)[2] = 2.0f;
    ((float *)t->data)[3] = 1.5f;
    kc_attr_string(&c, "mode", "nearest");
    kc_attr_string(&c, "coordinate_transformation_mode", "asymmetric");
    kc_attr_string(&c, "nearest_mode", "floor");
    c.tol = TOL_EXACT_T;
    fn(&c, arg);
  }
  kc_begin(&c, "Resize", "", 10, "Resize-10 nearest x[1,2,5,6] scales 2x3");
  kc_input(&c, 4, DIMS(1, 2, 5, 6), -1, 1, false);
  t = kc_input(&c, 1, DIMS(4), 0, 0, true);
  ((float *)t->data)[0] = ((float *)t->data)[1] = 1.0f;
  ((float *)t->data)[2] = 2.0f;
  ((float *)t->data)[3] = 3.0f;
  kc_attr_string(&c, "mode", "nearest");
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
  kc_begin(&c, "Resize", "", 13, "Resize linear (not taken)");
  kc_input(&c, 4, DIMS(1, 2, 5, 6), -1, 1, false);
  kc_input_none(&c);
  t = kc_input(&c, 1, DIMS(4), 0, 0, true);
  ((float *)t->data)[0] = ((float *)t->data)[1] = 1.0f;
  ((float *)t->data)[2] = ((float *)t->data)[3] = 2.0f;
  kc_attr_string(&c, "mode", "linear");
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
}

/* Linear: the four coordinate rules, growing, shrinking and mixed factors
 * (height shrinking while width grows is the reference's other pass
 * order, which the kernel leaves to it), scales and sizes, and a value
 * range with NaN-free extremes; exact against the reference. */
static void gen_resize_linear(case_fn fn, void *arg) {
  static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
  static const float factors[][2] = {{2, 2}, {3, 1.5f}, {0.5f, 0.5f}, {1.7f, 0.6f}, {0.6f, 1.7f}, {1, 2}, {4, 4}};
  kcase c;
  for (size_t ci = 0; ci < ER_ARRAY_LEN(coords); ci++)
    for (size_t f = 0; f < ER_ARRAY_LEN(factors); f++) {
      bool sizes = (ci + f) % 2 == 0;
      kc_begin(&c, "Resize", "", 13, "Resize linear %s x[2,3,7,9] %s %gx%g", coords[ci], sizes ? "sizes" : "scales",
               factors[f][0], factors[f][1]);
      kc_input(&c, 4, DIMS(2, 3, 7, 9), -4, 4, false);
      kc_input_none(&c); /* roi */
      if (sizes) {
        kc_input_none(&c);
        int64_t sz[4] = {2, 3, (int64_t)(7 * factors[f][0]), (int64_t)(9 * factors[f][1])};
        kc_input_i64(&c, 1, DIMS(4), sz, true);
      } else {
        er_tensor *t = kc_input(&c, 1, DIMS(4), 0, 0, true);
        float *d = t->data;
        d[0] = d[1] = 1.0f;
        d[2] = factors[f][0];
        d[3] = factors[f][1];
      }
      kc_attr_string(&c, "mode", "linear");
      kc_attr_string(&c, "coordinate_transformation_mode", coords[ci]);
      c.tol = TOL_EXACT_T;
      fn(&c, arg);
    }
  kc_begin(&c, "Resize", "", 11, "Resize-11 linear x[1,8,40,40] 2x (FPN upsample)");
  kc_input(&c, 4, DIMS(1, 8, 40, 40), -1, 1, false);
  kc_input_none(&c);
  er_tensor *t = kc_input(&c, 1, DIMS(4), 0, 0, true);
  ((float *)t->data)[0] = ((float *)t->data)[1] = 1.0f;
  ((float *)t->data)[2] = ((float *)t->data)[3] = 2.0f;
  kc_attr_string(&c, "mode", "linear");
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
}

static void gen_upsample(case_fn fn, void *arg) {
  kcase c;
  kc_begin(&c, "Upsample", "", 9, "Upsample-9 nearest x[1,4,6,5] 2x2");
  kc_input(&c, 4, DIMS(1, 4, 6, 5), -1, 1, false);
  er_tensor *t = kc_input(&c, 1, DIMS(4), 0, 0, true);
  ((float *)t->data)[0] = ((float *)t->data)[1] = 1.0f;
  ((float *)t->data)[2] = ((float *)t->data)[3] = 2.0f;
  kc_attr_string(&c, "mode", "nearest");
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
  kc_begin(&c, "Upsample", "", 9, "Upsample-9 linear x[1,4,6,5] 2x3");
  kc_input(&c, 4, DIMS(1, 4, 6, 5), -1, 1, false);
  t = kc_input(&c, 1, DIMS(4), 0, 0, true);
  ((float *)t->data)[0] = ((float *)t->data)[1] = 1.0f;
  ((float *)t->data)[2] = 2.0f;
  ((float *)t->data)[3] = 3.0f;
  kc_attr_string(&c, "mode", "linear");
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
}

/* ---- Concat ------------------------------------------------------------------ */

/* Concat: channel concatenation with N = 1 (one copy per input, split into
 * 64 KiB pieces) and N = 3, the first and last axes, a negative axis, an
 * empty input, int64 data, and opset 1's default axis. */
static void gen_concat(case_fn fn, void *arg) {
  static const struct {
    int64_t n, c[3], h, w;
    int64_t axis;
    int version;
  } specs[] = {
      {1, {16, 48, 8}, 28, 28, 1, 13},     /* DenseNet-style, pieces of 64 KiB */
      {3, {5, 7, 1}, 4, 6, 1, 13},
      {2, {3, 3, 3}, 5, 7, 0, 13},
      {1, {4, 2, 6}, 3, 9, 3, 13},
      {2, {8, 0, 8}, 3, 3, -3, 13},        /* an empty input */
      {1, {6, 10, 2}, 2, 2, 1, 1},         /* opset 1: axis 1 when absent */
      {1, {64, 64, 64}, 56, 56, 1, 11},    /* 800 KiB per input */
  };
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++) {
    kc_begin(&c, "Concat", "", specs[i].version, "Concat axis %lld of [%lld,{%lld,%lld,%lld},%lld,%lld] v%d",
             (long long)specs[i].axis, (long long)specs[i].n, (long long)specs[i].c[0], (long long)specs[i].c[1],
             (long long)specs[i].c[2], (long long)specs[i].h, (long long)specs[i].w, specs[i].version);
    for (int k = 0; k < 3; k++) {
      int64_t d[4] = {specs[i].n, specs[i].c[k], specs[i].h, specs[i].w};
      int64_t ax = specs[i].axis < 0 ? specs[i].axis + 4 : specs[i].axis;
      if (ax != 1) {
        d[1] = 4;
        d[ax] = specs[i].c[k];
      }
      kc_input(&c, 4, d, -1, 1, false);
    }
    if (specs[i].version >= 4) kc_attr_int(&c, "axis", specs[i].axis);
    c.tol = TOL_EXACT_T;
    c.dynamic = i == 1;
    fn(&c, arg);
  }
  /* Many rows (more copies than the piece path takes): YOLOv5's head
   * along its last axis, in one unit and in many, and short int64 and
   * uint8 rows. */
  static const struct {
    int rank;
    int64_t dims[5];
    int64_t parts[3];
    er_dtype type;
  } rows[] = {
      {5, {1, 3, 20, 20, 0}, {2, 2, 81}, ER_DTYPE_FLOAT},
      {5, {1, 3, 80, 80, 0}, {2, 2, 81}, ER_DTYPE_FLOAT},
      {2, {700, 0}, {1, 3, 2}, ER_DTYPE_INT64},
      {3, {3, 400, 0}, {5, 1, 16}, ER_DTYPE_UINT8},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(rows); i++) {
    int r = rows[i].rank;
    kc_begin(&c, "Concat", "", 13, "Concat rows#%zu of {%lld,%lld,%lld} %s", i, (long long)rows[i].parts[0],
             (long long)rows[i].parts[1], (long long)rows[i].parts[2], er_dtype_name(rows[i].type));
    for (int k = 0; k < 3; k++) {
      int64_t d[5];
      memcpy(d, rows[i].dims, sizeof d);
      d[r - 1] = rows[i].parts[k];
      retype(&c, kc_input(&c, r, d, -100, 100, false), rows[i].type);
    }
    kc_attr_int(&c, "axis", -1);
    c.tol = TOL_EXACT_T;
    c.dynamic = i == 0;
    fn(&c, arg);
  }
  kc_begin(&c, "Concat", "", 13, "Concat int64 axis 0");
  kc_input_i64(&c, 1, DIMS(3), DIMS(1, 2, 3), false);
  kc_input_i64(&c, 1, DIMS(2), DIMS(-7, 9), false);
  kc_attr_int(&c, "axis", 0);
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
}

/* ---- Pad --------------------------------------------------------------------- */

/* Pad: every mode on a style-transfer reflect pad's shape, pads wider
 * than the axis (reflected again), negative pads (cropping), a constant
 * value, opset 2's attributes, opset 18's axes, an unpadded trailing axis
 * carried whole, int64 and uint8 data, and sizes known only at run time. */
static void gen_pad(case_fn fn, void *arg) {
  static const struct {
    int rank;
    int64_t dims[4];
    const char *mode;
    int64_t pads[8];
    int n_axes;
    int64_t axes[4];
    int version;
    er_dtype type;
  } specs[] = {
      {4, {1, 16, 30, 30}, "reflect", {0, 0, 4, 4, 0, 0, 4, 4}, 0, {0}, 13, ER_DTYPE_FLOAT},
      {4, {1, 16, 30, 30}, "constant", {0, 0, 1, 1, 0, 0, 1, 1}, 0, {0}, 13, ER_DTYPE_FLOAT},
      {4, {1, 16, 30, 30}, "edge", {0, 0, 1, 2, 0, 0, 3, 0}, 0, {0}, 13, ER_DTYPE_FLOAT},
      {4, {2, 3, 5, 4}, "reflect", {0, 1, 7, 9, 0, 2, 6, 5}, 0, {0}, 13, ER_DTYPE_FLOAT}, /* wider than the axis */
      {4, {2, 3, 5, 4}, "wrap", {0, 0, 6, 3, 0, 0, 2, 5}, 0, {0}, 19, ER_DTYPE_FLOAT},
      {4, {2, 3, 9, 8}, "constant", {0, -1, 2, -3, 1, 0, -2, 2}, 0, {0}, 13, ER_DTYPE_FLOAT}, /* crops */
      {4, {2, 3, 9, 8}, "reflect", {0, 0, -2, 1, 0, 0, 1, -3}, 0, {0}, 13, ER_DTYPE_FLOAT},
      {3, {4, 76, 32}, "constant", {0, 3, 0, 0, 4, 0}, 0, {0}, 11, ER_DTYPE_FLOAT},           /* rows carried whole */
      {3, {1, 1, 1536}, "reflect", {64, 64}, 1, {-1}, 18, ER_DTYPE_FLOAT},                  /* VAD: axes */
      {2, {37, 19}, "edge", {2, 5, 3, 1}, 0, {0}, 13, ER_DTYPE_INT64},
      {2, {37, 19}, "constant", {1, 1, 1, 1}, 0, {0}, 2, ER_DTYPE_UINT8},                   /* opset 2 */
  };
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++)
    for (int dyn = 0; dyn < 2; dyn++) {
      if (dyn && specs[i].type != ER_DTYPE_FLOAT) continue;
      kc_begin(&c, "Pad", "", specs[i].version, "Pad#%zu %s %s v%d%s", i, specs[i].mode, er_dtype_name(specs[i].type),
               specs[i].version, dyn ? " dynamic" : "");
      retype(&c, kc_input(&c, specs[i].rank, specs[i].dims, -100, 100, false), specs[i].type);
      int n_pads = 2 * (specs[i].n_axes ? specs[i].n_axes : specs[i].rank);
      if (specs[i].version < 11) {
        kc_attr_ints(&c, "pads", n_pads, specs[i].pads);
        kc_attr_float(&c, "value", 3.0f);
      } else {
        kc_input_i64(&c, 1, (const int64_t[]){n_pads}, specs[i].pads, true);
        if (specs[i].type == ER_DTYPE_FLOAT && strcmp(specs[i].mode, "constant") == 0) {
          er_tensor *v = kc_input(&c, 0, NULL, 0, 0, true);
          ((float *)v->data)[0] = -2.5f;
        } else if (specs[i].n_axes) {
          kc_input_none(&c);
        }
        if (specs[i].n_axes) kc_input_i64(&c, 1, (const int64_t[]){specs[i].n_axes}, specs[i].axes, true);
      }
      kc_attr_string(&c, "mode", specs[i].mode);
      c.dynamic = dyn;
      c.tol = TOL_EXACT_T;
      fn(&c, arg);
    }
}

/* ---- DepthToSpace -------------------------------------------------------------- */

/* DepthToSpace: both modes, blocks of 2, 3 (ESPCN), 4 (the 4-byte loops)
 * and 5 (the general one), opset 1 (DCR only), a batch, rows of one
 * pixel, uint8 and int64 data, and sizes known only at run time. */
static void gen_d2s(case_fn fn, void *arg) {
  static const struct {
    int64_t dims[4];
    int64_t b;
    const char *mode; /* NULL: opset 1 */
    er_dtype type;
  } specs[] = {
      {{1, 27, 20, 24}, 3, "CRD", ER_DTYPE_FLOAT}, {{1, 27, 20, 24}, 3, "DCR", ER_DTYPE_FLOAT},
      {{2, 8, 5, 7}, 2, "CRD", ER_DTYPE_FLOAT},    {{2, 8, 5, 7}, 2, "DCR", ER_DTYPE_FLOAT},
      {{1, 32, 6, 1}, 4, "CRD", ER_DTYPE_FLOAT},   {{1, 50, 3, 4}, 5, "DCR", ER_DTYPE_FLOAT},
      {{1, 12, 9, 11}, 2, NULL, ER_DTYPE_FLOAT},   {{1, 18, 4, 6}, 3, "CRD", ER_DTYPE_UINT8},
      {{2, 16, 3, 5}, 2, "DCR", ER_DTYPE_INT64},
  };
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++)
    for (int dyn = 0; dyn < 2; dyn++) {
      if (dyn && specs[i].type != ER_DTYPE_FLOAT) continue;
      kc_begin(&c, "DepthToSpace", "", specs[i].mode ? 13 : 1, "DepthToSpace#%zu %s b%lld %s%s", i,
               specs[i].mode ? specs[i].mode : "v1", (long long)specs[i].b, er_dtype_name(specs[i].type),
               dyn ? " dynamic" : "");
      retype(&c, kc_input(&c, 4, specs[i].dims, -100, 100, false), specs[i].type);
      kc_attr_int(&c, "blocksize", specs[i].b);
      if (specs[i].mode) kc_attr_string(&c, "mode", specs[i].mode);
      c.dynamic = dyn;
      c.tol = TOL_EXACT_T;
      fn(&c, arg);
    }
}

/* ---- Split ------------------------------------------------------------------- */

/* Split: YOLOv5's head (rows of 2, 2 and 81 floats along the last axis),
 * a C2f channel split in halves, a 'split' input, equal chunks without
 * one, opset 18's smaller last chunk (num_outputs), opset 11's attribute,
 * a negative axis, an empty part, int64 and uint8 data, 2- to 16-byte rows
 * (the short-row copies) and sizes known only at run time. */
static void gen_split(case_fn fn, void *arg) {
  static const struct {
    int rank;
    int64_t dims[5];
    int64_t axis;
    int n;
    int64_t split[4]; /* all 0: equal chunks */
    int version;
    er_dtype type;
  } specs[] = {
      {5, {1, 3, 20, 20, 85}, 4, 3, {2, 2, 81}, 13, ER_DTYPE_FLOAT},  /* YOLOv5 head */
      {4, {1, 64, 40, 40}, 1, 2, {32, 32}, 13, ER_DTYPE_FLOAT},       /* C2f, 200 KiB parts */
      {4, {2, 6, 5, 7}, 1, 3, {0}, 13, ER_DTYPE_FLOAT},               /* equal chunks */
      {3, {4, 10, 9}, -1, 4, {0}, 18, ER_DTYPE_FLOAT},                /* chunks of 3, last 0 */
      {3, {4, 11, 6}, 1, 3, {0}, 18, ER_DTYPE_FLOAT},                 /* 4, 4, 3 */
      {3, {3, 7, 12}, 2, 3, {4, 0, 8}, 11, ER_DTYPE_FLOAT},           /* an empty part */
      {2, {300, 7}, 1, 3, {1, 2, 4}, 13, ER_DTYPE_INT64},             /* 8- to 32-byte rows */
      {2, {129, 19}, 1, 3, {3, 12, 4}, 13, ER_DTYPE_UINT8},
      {2, {64, 20}, 1, 4, {1, 2, 3, 14}, 13, ER_DTYPE_FLOAT16},       /* 2-byte rows */
      {1, {100}, 0, 2, {37, 63}, 13, ER_DTYPE_FLOAT},
  };
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++)
    for (int dyn = 0; dyn < 2; dyn++) {
      if (dyn && specs[i].type != ER_DTYPE_FLOAT) continue;
      kc_begin(&c, "Split", "", specs[i].version, "Split#%zu axis %lld into %d %s v%d%s", i,
               (long long)specs[i].axis, specs[i].n, er_dtype_name(specs[i].type), specs[i].version,
               dyn ? " dynamic" : "");
      retype(&c, kc_input(&c, specs[i].rank, specs[i].dims, -100, 100, false), specs[i].type);
      bool listed = specs[i].split[0] || specs[i].split[1];
      if (specs[i].version >= 13 && listed) kc_input_i64(&c, 1, (const int64_t[]){specs[i].n}, specs[i].split, true);
      if (specs[i].version < 13 && listed) kc_attr_ints(&c, "split", specs[i].n, specs[i].split);
      if (specs[i].version >= 18 && !listed) kc_attr_int(&c, "num_outputs", specs[i].n);
      kc_attr_int(&c, "axis", specs[i].axis);
      c.n_out = specs[i].n;
      c.dynamic = dyn;
      c.tol = TOL_EXACT_T;
      fn(&c, arg);
    }
}

/* ---- Slice ------------------------------------------------------------------- */

/* Slice: a YOLO Focus stem (step 2 on rows and columns, the rows split
 * over the workers), steps of 1 (whole rows), 3 and negative, negative
 * starts and axes, ends past the axis, an empty result, a rank-1 input,
 * every element size, a plane of 64 KiB rows and above (row grain), and
 * starts given at run time (not constant at compile time). */
static void gen_slice(case_fn fn, void *arg) {
  static const struct {
    int rank;
    int64_t dims[4];
    int n;
    int64_t starts[4], ends[4], axes[4], steps[4];
  } specs[] = {
      {4, {1, 3, 64, 64}, 2, {0, 1}, {INT64_MAX, INT64_MAX}, {2, 3}, {2, 2}},        /* Focus */
      {4, {1, 3, 416, 416}, 2, {1, 0}, {INT64_MAX, INT64_MAX}, {2, 3}, {2, 2}},      /* Focus, 2 MiB */
      {4, {2, 5, 7, 9}, 1, {1}, {4}, {1}, {1}},                                      /* channel range */
      {4, {2, 5, 7, 9}, 2, {-2, 8}, {-100, 1}, {-1, 2}, {-1, -3}},                   /* negative */
      {3, {4, 6, 33}, 3, {0, 2, 3}, {4, 100, 33}, {0, 1, 2}, {3, 1, 3}},
      {3, {4, 6, 33}, 1, {3}, {3}, {2}, {1}},                                        /* empty */
      {1, {100}, 1, {7}, {93}, {0}, {5}},
      {2, {300, 257}, 1, {1}, {257}, {1}, {1}},                                     /* rows 1 KiB */
  };
  static const er_dtype types[] = {ER_DTYPE_FLOAT, ER_DTYPE_UINT8, ER_DTYPE_FLOAT16, ER_DTYPE_INT64};
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++)
    for (size_t t = 0; t < ER_ARRAY_LEN(types); t++)
      for (int runtime_starts = 0; runtime_starts < 2; runtime_starts++) {
        if (runtime_starts && t > 0) continue;
        kc_begin(&c, "Slice", "", 13, "Slice#%zu %s%s", i, er_dtype_name(types[t]),
                 runtime_starts ? " starts at run time" : "");
        retype(&c, kc_input(&c, specs[i].rank, specs[i].dims, -100, 100, false), types[t]);
        const int64_t n[1] = {specs[i].n};
        kc_input_i64(&c, 1, n, specs[i].starts, !runtime_starts);
        kc_input_i64(&c, 1, n, specs[i].ends, true);
        kc_input_i64(&c, 1, n, specs[i].axes, true);
        kc_input_i64(&c, 1, n, specs[i].steps, true);
        c.tol = TOL_EXACT_T;
        fn(&c, arg);
      }
}

const case_gen kcases_layout[] = {
    {"Concat", "", gen_concat},
    {"Slice", "", gen_slice},
    {"Split", "", gen_split},
    {"Pad", "", gen_pad},
    {"DepthToSpace", "", gen_d2s},
    {"Transpose", "", gen_transpose},
    {"Resize", "", gen_resize},
    {"Resize", "", gen_resize_linear},
    {"Upsample", "", gen_upsample},
    {NULL, NULL, NULL},
};
