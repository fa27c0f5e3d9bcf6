/* kcases-norm.c - cases for BatchNormalization (inference), LRN, Softmax,
 * LogSoftmax and LayerNormalization: shapes of several ranks, row lengths
 * around the vector width, softmax along inner and middle axes and in the
 * opset < 13 coerced form, NaN and infinities in softmax rows, LRN window
 * sizes (odd and even) with the common and other betas, layer norm over
 * one and two axes with and without bias and statistics outputs. */
#include "kcases.h"

static void gen_bn(case_fn fn, void *arg) {
  static const int64_t shapes[][4] = {{1, 16, 7, 9}, {2, 3, 5, 5}, {1, 64, 1, 1}, {1, 33, 28, 28}};
  static const int versions[] = {7, 9, 14, 15};
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(shapes); i++) {
    for (size_t v = 0; v < ER_ARRAY_LEN(versions); v++) {
      int64_t ch = shapes[i][1];
      kc_begin(&c, "BatchNormalization", "", versions[v], "BatchNormalization v%d x[%lld,%lld,%lld,%lld]", versions[v],
               (long long)shapes[i][0], (long long)ch, (long long)shapes[i][2], (long long)shapes[i][3]);
      kc_input(&c, 4, shapes[i], -3, 3, false);
      kc_input(&c, 1, DIMS(ch), 0.5f, 2, v % 2 == 0);
      kc_input(&c, 1, DIMS(ch), -1, 1, v % 2 == 0);
      kc_input(&c, 1, DIMS(ch), -1, 1, v % 2 == 0);
      kc_input(&c, 1, DIMS(ch), 0.1f, 3, v % 2 == 0);
      if (v == 1) kc_attr_float(&c, "epsilon", 1e-3f);
      c.tol = TOL_REDUCE;
      fn(&c, arg);
    }
  }
  kc_begin(&c, "BatchNormalization", "", 15, "BatchNormalization 2-D [5,7]");
  kc_input(&c, 2, DIMS(5, 7), -3, 3, false);
  for (int k = 0; k < 4; k++) kc_input(&c, 1, DIMS(7), k == 3 ? 0.1f : -1, 2, true);
  c.tol = TOL_REDUCE;
  fn(&c, arg);
  kc_begin(&c, "BatchNormalization", "", 15, "BatchNormalization 3-D [2,6,50]");
  kc_input(&c, 3, DIMS(2, 6, 50), -3, 3, false);
  for (int k = 0; k < 4; k++) kc_input(&c, 1, DIMS(6), k == 3 ? 0.1f : -1, 2, true);
  c.tol = TOL_REDUCE;
  fn(&c, arg);
}

static void gen_lrn(case_fn fn, void *arg) {
  static const int64_t sizes[] = {1, 3, 4, 5};
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(sizes); i++) {
    for (int b = 0; b < 2; b++) {
      kc_begin(&c, "LRN", "", 13, "LRN size %lld beta %s x[2,7,9,11]", (long long)sizes[i], b ? "0.6" : "0.75");
      kc_input(&c, 4, DIMS(2, 7, 9, 11), -10, 10, false);
      kc_attr_int(&c, "size", sizes[i]);
      kc_attr_float(&c, "alpha", 1e-2f);
      if (b) {
        kc_attr_float(&c, "beta", 0.6f);
        kc_attr_float(&c, "bias", 2.0f);
      }
      /* pow in double against sqrt/exp/log in float: a few ulp. */
      c.tol = TOL_EXPF;
      fn(&c, arg);
    }
  }
  kc_begin(&c, "LRN", "", 13, "LRN size 5 x[1,96,55,55] AlexNet");
  kc_input(&c, 4, DIMS(1, 96, 55, 55), -50, 50, false);
  kc_attr_int(&c, "size", 5);
  c.tol = TOL_EXPF;
  fn(&c, arg);
}

/* Softmax: exp(x - max) carries the rounding of x - max (up to 2^-24 *
 * |x - max| absolute, |x - max| < 88 before exp underflows) into its
 * relative error: up to 5e-6 for the tiniest outputs. LogSoftmax: the
 * float sum of exps is good to 2^-24 relative, so log(sum) to about 6e-8
 * absolute, which is all the error an output near 0 has. */
static const tolerance TOL_SOFTMAX = {TOL_ELEMENT, 1e-5, 1e-30, 0};
static const tolerance TOL_LOG_SOFTMAX = {TOL_ELEMENT, 1e-5, 1e-7, 0};

static void gen_softmax_op(case_fn fn, void *arg, const char *op) {
  kcase c;
  const tolerance *tol = strcmp(op, "Softmax") == 0 ? &TOL_SOFTMAX : &TOL_LOG_SOFTMAX;
  static const int64_t lens[] = {1, 2, 7, 16, 17, 33, 128, 1000};
  for (size_t i = 0; i < ER_ARRAY_LEN(lens); i++) {
    for (int sp = 0; sp < 3; sp++) {
      kc_begin(&c, op, "", 13, "%s [3,%lld] last axis%s", op, (long long)lens[i],
               sp == 1 ? " specials" : sp == 2 ? " one -inf row" : "");
      er_tensor *x = kc_input(&c, 2, DIMS(3, lens[i]), -20, 20, false);
      if (sp == 1) kc_specials(&c, x);
      if (sp == 2)
        for (int64_t k = 0; k < lens[i]; k++) ((float *)x->data)[k] = k % 2 ? -INFINITY : 5.0f;
      c.tol = *tol;
      fn(&c, arg);
    }
  }
  kc_begin(&c, op, "", 13, "%s [2,5,33,3] axis 1 (middle)", op);
  kc_input(&c, 4, DIMS(2, 5, 33, 3), -20, 20, false);
  kc_attr_int(&c, "axis", 1);
  c.tol = *tol;
  fn(&c, arg);
  kc_begin(&c, op, "", 13, "%s [4,40,17] axis -2", op);
  kc_input(&c, 3, DIMS(4, 40, 17), -20, 20, false);
  kc_attr_int(&c, "axis", -2);
  c.tol = *tol;
  fn(&c, arg);
  kc_begin(&c, op, "", 11, "%s v11 [2,3,4,5] axis 1 coerced to 2-D", op);
  kc_input(&c, 4, DIMS(2, 3, 4, 5), -20, 20, false);
  c.tol = *tol;
  fn(&c, arg);
  kc_begin(&c, op, "", 13, "%s [8,128,128] attention scores", op);
  kc_input(&c, 3, DIMS(8, 128, 128), -10, 10, false);
  c.tol = *tol;
  fn(&c, arg);
  /* Rank unknown when the kernel is chosen (SLANet+'s Softmax over a
   * Slice of a dynamic shape): the optimized kernel must take it. */
  kc_begin(&c, op, "", 13, "%s [2,6,40] rank unknown at load", op);
  kc_input(&c, 3, DIMS(2, 6, 40), -20, 20, false);
  c.tol = *tol;
  c.unknown_rank = true;
  c.must_take = "_softmax__";
  fn(&c, arg);
  kc_begin(&c, op, "", 13, "%s [3,0] empty rows", op);
  kc_input(&c, 2, DIMS(3, 0), -1, 1, false);
  c.tol = *tol;
  fn(&c, arg);
}

static void gen_softmax(case_fn fn, void *arg) { gen_softmax_op(fn, arg, "Softmax"); }
static void gen_log_softmax(case_fn fn, void *arg) { gen_softmax_op(fn, arg, "LogSoftmax"); }

static void gen_layernorm(case_fn fn, void *arg) {
  static const int64_t cols[] = {1, 7, 16, 33, 40, 50, 64, 256, 768};
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(cols); i++) {
    for (int v = 0; v < 3; v++) {
      kc_begin(&c, "LayerNormalization", "", 17, "LayerNormalization [2,5,%lld] %s", (long long)cols[i],
               v == 0 ? "scale+bias" : v == 1 ? "scale only" : "with statistics, dynamic");
      kc_input(&c, 3, DIMS(2, 5, cols[i]), -3, 5, false);
      kc_input(&c, 1, DIMS(cols[i]), -2, 2, true);
      if (v != 1) kc_input(&c, 1, DIMS(cols[i]), -1, 1, true);
      if (v == 2) {
        c.n_out = 3;
        c.dynamic = true;
      }
      c.tol = TOL_REDUCE;
      fn(&c, arg);
    }
  }
  kc_begin(&c, "LayerNormalization", "", 17, "LayerNormalization [3,4,10] axis -2 scale [4,10]");
  kc_input(&c, 3, DIMS(3, 4, 10), -3, 3, false);
  kc_input(&c, 2, DIMS(4, 10), -2, 2, true);
  kc_input(&c, 3, DIMS(1, 4, 10), -2, 2, true);
  kc_attr_int(&c, "axis", -2);
  c.tol = TOL_REDUCE;
  fn(&c, arg);
  kc_begin(&c, "LayerNormalization", "", 17, "LayerNormalization [3,4,10] axis 1, scale broadcast [10]");
  kc_input(&c, 3, DIMS(3, 4, 10), -3, 3, false);
  kc_input(&c, 1, DIMS(10), -2, 2, true);
  kc_attr_int(&c, "axis", 1);
  c.tol = TOL_REDUCE;
  fn(&c, arg);
  kc_begin(&c, "LayerNormalization", "", 17, "LayerNormalization [128,256] epsilon 1e-12");
  kc_input(&c, 2, DIMS(128, 256), -3, 3, false);
  kc_input(&c, 1, DIMS(256), -2, 2, true);
  kc_input(&c, 1, DIMS(256), -2, 2, true);
  kc_attr_float(&c, "epsilon", 1e-12f);
  c.tol = TOL_REDUCE;
  fn(&c, arg);
}

/* ReduceSum and ReduceMean over float32: a reduced last axis (rows below,
 * at and past 16 lanes), a middle axis (JAX's LayerNorm over [1, 2048,
 * 64]), the first axis, a run of axes, all axes, inner runs past the
 * 256-column block; keepdims both ways; axes as attribute (ReduceSum 11,
 * ReduceMean 13) and as input (13 and 18); NaN and infinities; and axes
 * that are not one run (the reference's). */
static void gen_reduce(case_fn fn, void *arg, const char *op) {
  static const struct {
    int rank;
    int64_t dims[4];
    int n_axes;
    int64_t axes[3];
  } rs[] = {
      {2, {3, 7}, 1, {-1}},          {2, {5, 16}, 1, {1}},        {2, {4, 67}, 1, {1}},
      {3, {1, 2048, 64}, 1, {1}},    {3, {2, 5, 40}, 1, {1}},     {3, {6, 3, 300}, 1, {0}},
      {4, {2, 3, 5, 6}, 2, {1, 2}},  {3, {2, 3, 4}, 3, {0, 1, 2}}, {3, {4, 9, 33}, 2, {0, 2}},
      {3, {1, 40000, 1}, 1, {1}},
  };
  const bool sum = strcmp(op, "ReduceSum") == 0;
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(rs); i++)
    for (int v = 0; v < 3; v++) {
      /* v 0: axes by attribute; 1: axes as a constant input; 2: input, keepdims 0, specials */
      int version = v == 0 ? (sum ? 11 : 13) : (sum ? 13 : 18);
      kc_begin(&c, op, "", version, "%s rank %d axes#%zu v%d", op, rs[i].rank, i, v);
      er_tensor *x = kc_input(&c, rs[i].rank, rs[i].dims, -3, 3, false);
      if (v == 2) kc_specials(&c, x);
      if (v == 0) kc_attr_ints(&c, "axes", rs[i].n_axes, rs[i].axes);
      else kc_input_i64(&c, 1, DIMS(rs[i].n_axes), rs[i].axes, true);
      if (v == 2) kc_attr_int(&c, "keepdims", 0);
      c.tol = TOL_REDUCE;
      fn(&c, arg);
    }
}

/* InstanceNormalization: planes around and below the vector width, one
 * pixel (variance 0), rank 3 and 5, a batch, planes far from zero (the
 * mean subtracted before scaling), another epsilon, shapes unknown at
 * compile time, and GroupNorm's exported form (Reshape to [N, groups, -1]
 * first: rank 3, long rows). */
static void gen_instnorm(case_fn fn, void *arg) {
  static const struct {
    int rank;
    int64_t d[5];
    float lo, hi;
  } sh[] = {
      {4, {1, 16, 7, 9}, -3, 3},   {3, {2, 5, 33}, -3, 3},      {4, {1, 32, 1, 1}, -1, 1}, {4, {1, 8, 56, 56}, -2, 4},
      {5, {2, 3, 4, 5, 6}, -3, 3}, {4, {1, 4, 10, 10}, 100, 101}, {3, {1, 32, 1600}, -2, 2},
  };
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(sh); i++) {
    for (int v = 0; v < 2; v++) {
      int64_t ch = sh[i].d[1];
      kc_begin(&c, "InstanceNormalization", "", 6, "InstanceNormalization #%zu%s", i,
               v ? " epsilon 1e-3, dynamic" : "");
      kc_input(&c, sh[i].rank, sh[i].d, sh[i].lo, sh[i].hi, false);
      kc_input(&c, 1, DIMS(ch), 0.5f, 2, true);
      kc_input(&c, 1, DIMS(ch), -1, 1, true);
      if (v) {
        kc_attr_float(&c, "epsilon", 1e-3f);
        c.dynamic = true;
      }
      c.tol = TOL_REDUCE;
      fn(&c, arg);
    }
  }
}

static void gen_reduce_sum(case_fn fn, void *arg) { gen_reduce(fn, arg, "ReduceSum"); }
static void gen_reduce_mean(case_fn fn, void *arg) { gen_reduce(fn, arg, "ReduceMean"); }

const case_gen kcases_norm[] = {
    {"BatchNormalization", "", gen_bn},
    {"LRN", "", gen_lrn},
    {"Softmax", "", gen_softmax},
    {"LogSoftmax", "", gen_log_softmax},
    {"LayerNormalization", "", gen_layernorm},
    {"InstanceNormalization", "", gen_instnorm},
    {"ReduceSum", "", gen_reduce_sum},
    {"ReduceMean", "", gen_reduce_mean},
    {NULL, NULL, NULL},
};
