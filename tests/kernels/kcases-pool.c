/* kcases-pool.c - cases for MaxPool, AveragePool, GlobalAveragePool and
 * GlobalMaxPool: window sizes, strides, pads (explicit, asymmetric,
 * auto_pad), ceil_mode, dilations, count_include_pad, 1-D, batches, NaN
 * and infinities (MaxPool skips NaN unless a whole window is NaN). */
#include "kcases.h"

typedef struct pool_spec {
  int64_t n, c, h, w, kh, kw, sh, sw, dh, dw;
  int64_t pads[4];
  int ceil;
  const char *auto_pad;
} pool_spec;

static const pool_spec specs[] = {
    {1, 3, 8, 8, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, 0, NULL},
    {1, 5, 112, 112, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, NULL},   /* ResNet stem */
    {2, 4, 13, 13, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, 1, NULL},     /* ceil_mode */
    {1, 4, 14, 15, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, NULL},
    {1, 3, 17, 19, 3, 2, 2, 3, 1, 1, {1, 0, 2, 1}, 1, NULL},     /* asymmetric, ceil */
    {1, 2, 10, 11, 3, 3, 1, 1, 2, 2, {0, 0, 0, 0}, 0, NULL},     /* dilated */
    {1, 3, 9, 10, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, 0, "SAME_UPPER"},
    {1, 3, 9, 10, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, 0, "SAME_LOWER"},
    {1, 2, 7, 7, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 0, NULL},       /* whole plane */
    {1, 6, 5, 40, 1, 5, 1, 4, 1, 1, {0, 2, 0, 2}, 1, NULL},
    {1, 2, 3, 3, 3, 3, 2, 2, 1, 1, {2, 2, 2, 2}, 0, NULL},       /* pads near the kernel size */
    {1, 3, 111, 111, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, 0, NULL},  /* SqueezeNet, odd width */
    {1, 2, 9, 37, 2, 4, 1, 2, 1, 1, {0, 1, 1, 2}, 1, NULL},     /* even kw at stride 2, ceil */
    {1, 2, 6, 33, 3, 5, 3, 1, 1, 1, {2, 2, 0, 1}, 0, NULL},     /* sh 3, sw 1, wide pads */
};

static void gen_pool(case_fn fn, void *arg, const char *op) {
  bool avg = strcmp(op, "AveragePool") == 0;
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++) {
    const pool_spec *s = &specs[i];
    for (int variant = 0; variant < (avg ? 3 : 2); variant++) {
      /* max: 0 plain, 1 with NaN/inf; average: count_include_pad 0 / 1, 2 dynamic */
      if (s->dh > 1 && avg) continue; /* AveragePool dilations arrive in opset 19 */
      kc_begin(&c, op, "", avg ? 11 : 12, "%s x[%lld,%lld,%lld,%lld] k%lldx%lld s%lldx%lld d%lldx%lld p%lld,%lld,%lld,%lld ceil%d %s v%d",
               op, (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->kh,
               (long long)s->kw, (long long)s->sh, (long long)s->sw, (long long)s->dh, (long long)s->dw,
               (long long)s->pads[0], (long long)s->pads[1], (long long)s->pads[2], (long long)s->pads[3], s->ceil,
               s->auto_pad ? s->auto_pad : "", variant);
      er_tensor *x = kc_input(&c, 4, DIMS(s->n, s->c, s->h, s->w), -4, 4, false);
      if (!avg && variant == 1) {
        kc_specials(&c, x);
        /* One window all NaN. */
        float *d = x->data;
        for (int64_t y = 0; y < s->kh && y < s->h; y++)
          for (int64_t q = 0; q < s->kw && q < s->w; q++) d[y * s->w + q] = NAN;
      }
      kc_attr_ints(&c, "kernel_shape", 2, DIMS(s->kh, s->kw));
      kc_attr_ints(&c, "strides", 2, DIMS(s->sh, s->sw));
      if (s->dh > 1 || s->dw > 1) kc_attr_ints(&c, "dilations", 2, DIMS(s->dh, s->dw));
      if (s->auto_pad) kc_attr_string(&c, "auto_pad", s->auto_pad);
      else kc_attr_ints(&c, "pads", 4, s->pads);
      if (s->ceil) kc_attr_int(&c, "ceil_mode", 1);
      if (avg && variant == 1) kc_attr_int(&c, "count_include_pad", 1);
      c.dynamic = variant == 2;
      c.tol = avg ? TOL_REDUCE : TOL_EXACT_T;
      fn(&c, arg);
    }
  }
  kc_begin(&c, op, "", avg ? 11 : 12, "%s 1-D x[2,3,30] k4 s3 p1,2", op);
  kc_input(&c, 3, DIMS(2, 3, 30), -1, 1, false);
  kc_attr_ints(&c, "kernel_shape", 1, DIMS(4));
  kc_attr_ints(&c, "strides", 1, DIMS(3));
  kc_attr_ints(&c, "pads", 2, DIMS(1, 2));
  c.tol = avg ? TOL_REDUCE : TOL_EXACT_T;
  fn(&c, arg);
  if (!avg) {
    kc_begin(&c, op, "", 12, "MaxPool with Indices output");
    kc_input(&c, 4, DIMS(1, 2, 6, 6), -1, 1, false);
    kc_attr_ints(&c, "kernel_shape", 2, DIMS(2, 2));
    c.n_out = 2;
    c.tol = TOL_EXACT_T;
    fn(&c, arg);
  }
}

static void gen_maxpool(case_fn fn, void *arg) {
  gen_pool(fn, arg, "MaxPool");
  kcase c;
  kc_begin(&c, "MaxPool", "", 12, "MaxPool 1-D k70: more taps than the kernels take");
  kc_input(&c, 3, DIMS(1, 2, 100), -1, 1, false);
  kc_attr_ints(&c, "kernel_shape", 1, DIMS(70));
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
  /* NaN rows: every other input row is NaN, so windows start, end or
   * lie wholly on NaN rows; at strides 1, 2 and 3 (NaN is skipped unless
   * the whole window is NaN). */
  for (int64_t st = 1; st <= 3; st++) {
    kc_begin(&c, "MaxPool", "", 12, "MaxPool NaN rows x[1,2,7,37] k3x3 s%lld p1", (long long)st);
    er_tensor *x = kc_input(&c, 4, DIMS(1, 2, 7, 37), -1, 1, false);
    float *d = x->data;
    for (int64_t p = 0; p < 2; p++)
      for (int64_t y = 0; y < 7; y += 2)
        for (int64_t q = 0; q < 37; q++) d[(p * 7 + y) * 37 + q] = NAN;
    kc_attr_ints(&c, "kernel_shape", 2, DIMS(3, 3));
    kc_attr_ints(&c, "strides", 2, DIMS(st, st));
    kc_attr_ints(&c, "pads", 4, DIMS(1, 1, 1, 1));
    c.tol = TOL_EXACT_T;
    fn(&c, arg);
  }
  if (kc_timing) {
    kc_begin(&c, "MaxPool", "", 12, "full-size MaxPool x[1,64,112,112] k3 s2 p1");
    kc_input(&c, 4, DIMS(1, 64, 112, 112), -1, 1, false);
    kc_attr_ints(&c, "kernel_shape", 2, DIMS(3, 3));
    kc_attr_ints(&c, "strides", 2, DIMS(2, 2));
    kc_attr_ints(&c, "pads", 4, DIMS(1, 1, 1, 1));
    c.tol = TOL_EXACT_T;
    fn(&c, arg);
  }
}
static void gen_avgpool(case_fn fn, void *arg) { gen_pool(fn, arg, "AveragePool"); }

static void gen_global(case_fn fn, void *arg, const char *op) {
  static const int64_t shapes[][4] = {{1, 3, 7, 7}, {2, 5, 1, 1}, {1, 64, 13, 11}, {1, 2, 112, 112}, {3, 4, 9, 0}};
  kcase c;
  bool max = strcmp(op, "GlobalMaxPool") == 0;
  for (size_t i = 0; i < ER_ARRAY_LEN(shapes); i++) {
    for (int sp = 0; sp < 2; sp++) {
      if (shapes[i][3] == 0 && (max || sp)) continue; /* empty planes: mean NaN; max undefined */
      kc_begin(&c, op, "", 1, "%s x[%lld,%lld,%lld,%lld]%s", op, (long long)shapes[i][0], (long long)shapes[i][1],
               (long long)shapes[i][2], (long long)shapes[i][3], sp ? " specials" : "");
      er_tensor *x = kc_input(&c, 4, shapes[i], -3, 3, false);
      if (sp) kc_specials(&c, x);
      c.tol = max ? TOL_EXACT_T : TOL_REDUCE;
      fn(&c, arg);
    }
  }
  kc_begin(&c, op, "", 1, "%s 3-D x[2,3,50]", op);
  kc_input(&c, 3, DIMS(2, 3, 50), -1, 1, false);
  c.tol = max ? TOL_EXACT_T : TOL_REDUCE;
  fn(&c, arg);
}

static void gen_gavg(case_fn fn, void *arg) { gen_global(fn, arg, "GlobalAveragePool"); }
static void gen_gmax(case_fn fn, void *arg) { gen_global(fn, arg, "GlobalMaxPool"); }

const case_gen kcases_pool[] = {
    {"MaxPool", "", gen_maxpool},
    {"AveragePool", "", gen_avgpool},
    {"GlobalAveragePool", "", gen_gavg},
    {"GlobalMaxPool", "", gen_gmax},
    {NULL, NULL, NULL},
};
