/* kcases-eltwise.c - cases for the unary and binary elementwise kernels:
 * lengths around the vector width (1, 7, 15, 16, 17, 33, 1000), NaN,
 * infinities, denormals and values where exp over- and underflows, input
 * ranges where each function is hard (tanh near 0, erf near 1, GELU far
 * below 0), every attribute form (Clip by attributes and by inputs,
 * HardSigmoid, LeakyRelu, Gelu approximate), and every broadcast form
 * (same shape, scalar either side, per channel, per row, outer product,
 * leading ones, empty). */
#include "kcases.h"

#include <stdlib.h>

#include "ops/op.h"

/* Rewrites a float input (values already drawn) as type t, through the
 * reference's own conversion. */
static void retype(er_tensor *x, er_dtype t) {
  int64_t n = er__tensor_count(x);
  size_t size = er_dtype_size(t);
  void *d = calloc(1, n > 0 ? (size_t)n * size : 1);
  er__cast_elements(x->data, ER_DTYPE_FLOAT, d, t, n, true);
  free(x->data);
  x->data = d;
  x->dtype = t;
  x->nbytes = (size_t)n * size;
}

typedef struct un_spec {
  const char *op;
  int version;
  float lo, hi;
  const tolerance *tol;
} un_spec;

static void gen_unary_one(case_fn fn, void *arg, const un_spec *s, void (*attrs)(kcase *c, int variant), int variants) {
  static const int64_t lens[] = {1, 7, 15, 16, 17, 33, 1000, 40000};
  kcase c;
  for (int v = 0; v < variants; v++) {
    for (size_t i = 0; i < ER_ARRAY_LEN(lens); i++) {
      for (int sp = 0; sp < 2; sp++) {
        kc_begin(&c, s->op, "", s->version, "%s v%d [%lld] [%g,%g]%s", s->op, v, (long long)lens[i], s->lo, s->hi,
                 sp ? " specials" : "");
        er_tensor *x = kc_input(&c, 1, DIMS(lens[i]), s->lo, s->hi, false);
        if (sp) kc_specials(&c, x);
        if (attrs) attrs(&c, v);
        c.tol = *s->tol;
        fn(&c, arg);
      }
    }
  }
  kc_begin(&c, s->op, "", s->version, "%s [2,3,5,7] dynamic", s->op);
  kc_input(&c, 4, DIMS(2, 3, 5, 7), s->lo, s->hi, false);
  if (attrs) attrs(&c, 0);
  c.dynamic = true;
  c.tol = *s->tol;
  fn(&c, arg);
}

static void clip6_attrs(kcase *c, int v) {
  if (v == 1) kc_attr_float(c, "min", -0.5f);
  if (v == 2) kc_attr_float(c, "max", 0.25f);
  if (v == 3) {
    kc_attr_float(c, "min", 0.5f);
    kc_attr_float(c, "max", -0.5f); /* min > max: everything becomes max */
  }
}

static void clip11_inputs(kcase *c, int v) {
  float lo = v == 3 ? 0.5f : -0.5f, hi = v == 3 ? -0.5f : 0.25f;
  er_tensor *t;
  if (v == 1 || v == 3) {
    t = kc_input(c, 0, NULL, 0, 0, v == 1);
    *(float *)t->data = lo;
  } else if (v == 2) {
    kc_input_none(c);
  }
  if (v >= 2) {
    t = kc_input(c, 0, NULL, 0, 0, true);
    *(float *)t->data = hi;
  }
}

static void hardsigmoid_attrs(kcase *c, int v) {
  if (v == 1) {
    kc_attr_float(c, "alpha", 0.3f);
    kc_attr_float(c, "beta", 0.4f);
  }
}

static void leakyrelu_attrs(kcase *c, int v) {
  if (v == 1) kc_attr_float(c, "alpha", 0.2f);
}

static void gelu_attrs(kcase *c, int v) {
  if (v == 1) kc_attr_string(c, "approximate", "tanh");
}

static const un_spec relu = {"Relu", 14, -5, 5, &TOL_EXACT_T};
static const un_spec sigmoid = {"Sigmoid", 13, -30, 30, &TOL_EXPF};
static const un_spec tanh_wide = {"Tanh", 13, -10, 10, &TOL_EXPF};
static const un_spec tanh_small = {"Tanh", 13, -0.7f, 0.7f, &TOL_EXPF};
static const un_spec clip6 = {"Clip", 6, -2, 2, &TOL_EXACT_T};
static const un_spec clip11 = {"Clip", 13, -2, 2, &TOL_EXACT_T};
static const un_spec hardsigmoid = {"HardSigmoid", 6, -6, 6, &TOL_ARITH};
/* x / 6 in double against x * (1/6) in float: a couple of ulp. */
static const un_spec hardswish = {"HardSwish", 14, -6, 6, &TOL_EXPF};
static const un_spec leakyrelu = {"LeakyRelu", 16, -5, 5, &TOL_EXACT_T};
static const un_spec gelu = {"Gelu", 20, -10, 10, &TOL_GELU};
static const un_spec gelu_far = {"Gelu", 20, -9, -3, &TOL_GELU};
static const un_spec erf_s = {"Erf", 13, -5, 5, &TOL_EXPF};
static const un_spec erf_near1 = {"Erf", 13, 0.8f, 1.2f, &TOL_EXPF};
static const un_spec exp_s = {"Exp", 13, -100, 100, &TOL_EXPF};
static const un_spec abs_s = {"Abs", 13, -5, 5, &TOL_EXACT_T};
static const un_spec neg_s = {"Neg", 13, -5, 5, &TOL_EXACT_T};
static const un_spec sqrt_s = {"Sqrt", 13, 0, 100, &TOL_EXACT_T};
static const un_spec recip = {"Reciprocal", 13, -10, 10, &TOL_ARITH};
/* Cephes' float log against the double reference: a few float ulp. The
 * specials cases add zero, negatives, subnormals, infinities and NaN. */
static const un_spec log_s = {"Log", 13, 0, 100, &TOL_EXPF};
static const un_spec log_near1 = {"Log", 13, 0.5f, 2.0f, &TOL_EXPF};

static void g_relu(case_fn fn, void *arg) { gen_unary_one(fn, arg, &relu, NULL, 1); }
static void g_sigmoid(case_fn fn, void *arg) { gen_unary_one(fn, arg, &sigmoid, NULL, 1); }
static void g_tanh(case_fn fn, void *arg) {
  gen_unary_one(fn, arg, &tanh_wide, NULL, 1);
  gen_unary_one(fn, arg, &tanh_small, NULL, 1);
}
static void g_clip(case_fn fn, void *arg) {
  gen_unary_one(fn, arg, &clip6, clip6_attrs, 4);
  gen_unary_one(fn, arg, &clip11, clip11_inputs, 4);
}
static void g_hardsigmoid(case_fn fn, void *arg) { gen_unary_one(fn, arg, &hardsigmoid, hardsigmoid_attrs, 2); }
static void g_hardswish(case_fn fn, void *arg) { gen_unary_one(fn, arg, &hardswish, NULL, 1); }
static void g_log(case_fn fn, void *arg) {
  gen_unary_one(fn, arg, &log_s, NULL, 1);
  gen_unary_one(fn, arg, &log_near1, NULL, 1);
}
static void g_leakyrelu(case_fn fn, void *arg) { gen_unary_one(fn, arg, &leakyrelu, leakyrelu_attrs, 2); }
static void g_gelu(case_fn fn, void *arg) {
  gen_unary_one(fn, arg, &gelu, gelu_attrs, 2);
  gen_unary_one(fn, arg, &gelu_far, gelu_attrs, 2);
}
static void g_erf(case_fn fn, void *arg) {
  gen_unary_one(fn, arg, &erf_s, NULL, 1);
  gen_unary_one(fn, arg, &erf_near1, NULL, 1);
}
static void g_exp(case_fn fn, void *arg) { gen_unary_one(fn, arg, &exp_s, NULL, 1); }
static void g_abs(case_fn fn, void *arg) { gen_unary_one(fn, arg, &abs_s, NULL, 1); }
static void g_neg(case_fn fn, void *arg) { gen_unary_one(fn, arg, &neg_s, NULL, 1); }
static void g_sqrt(case_fn fn, void *arg) { gen_unary_one(fn, arg, &sqrt_s, NULL, 1); }
static void g_recip(case_fn fn, void *arg) { gen_unary_one(fn, arg, &recip, NULL, 1); }

/* ---- binary ------------------------------------------------------------------ */

typedef struct bshape {
  int ra;
  int64_t a[5];
  int rb;
  int64_t b[5];
} bshape;

static const bshape bshapes[] = {
    {2, {3, 17}, 2, {3, 17}},                 /* same shape */
    {1, {1000}, 1, {1000}},
    {3, {2, 3, 17}, 0, {0}},                  /* scalar b */
    {0, {0}, 3, {2, 3, 17}},                  /* scalar a */
    {4, {2, 3, 4, 5}, 4, {1, 3, 1, 1}},       /* per channel */
    {4, {1, 64, 56, 56}, 3, {64, 1, 1}},      /* per channel, large */
    {4, {2, 3, 4, 5}, 1, {5}},                /* per row */
    {2, {4, 1}, 2, {1, 5}},                   /* outer product */
    {3, {2, 1, 4}, 2, {3, 1}},
    {3, {1, 1, 1}, 3, {2, 3, 4}},
    {3, {2, 3, 1}, 3, {2, 3, 33}},
    {2, {0, 3}, 1, {3}},                      /* empty */
    {3, {128, 4, 64}, 3, {128, 1, 64}},       /* middle-axis broadcast */
    /* Blocked tensors by per-channel blocked constants: rows of one
     * AVX-512 / AVX2 vector, b repeating; and a repeating over b's rows. */
    {5, {1, 3, 7, 9, 16}, 5, {1, 3, 1, 1, 16}},
    {5, {1, 5, 6, 7, 8}, 5, {1, 5, 1, 1, 8}},
    {3, {3, 1, 16}, 3, {3, 5, 16}},
};

static void gen_binary(case_fn fn, void *arg, const char *op, float blo, float bhi) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(bshapes); i++) {
    const bshape *s = &bshapes[i];
    for (int v = 0; v < 2; v++) {
      kc_begin(&c, op, "", 14, "%s shape#%zu %s", op, i, v ? "specials, const b" : "");
      er_tensor *a = kc_input(&c, s->ra, s->a, -5, 5, false);
      er_tensor *b = kc_input(&c, s->rb, s->b, blo, bhi, v == 1);
      if (v) {
        kc_specials(&c, a);
        kc_specials(&c, b);
      }
      c.tol = TOL_ARITH;
      fn(&c, arg);
    }
  }
  kc_begin(&c, op, "", 14, "%s [3,40,7]x[40,1] dynamic", op);
  kc_input(&c, 3, DIMS(3, 40, 7), -5, 5, false);
  kc_input(&c, 2, DIMS(40, 1), blo, bhi, false);
  c.dynamic = true;
  c.tol = TOL_ARITH;
  fn(&c, arg);
  kc_begin(&c, op, "", 6, "%s version 6 (legacy broadcast attribute)", op);
  kc_input(&c, 2, DIMS(3, 4), -5, 5, false);
  kc_input(&c, 2, DIMS(3, 4), blo, bhi, false);
  c.tol = TOL_ARITH;
  fn(&c, arg);
}

/* int32 operands over every broadcast form, in [-2^31, 2^31) so that sums
 * and products wrap; one constant per-channel bias as quantize_dynamic
 * writes them. */
static void gen_binary_i32(case_fn fn, void *arg, const char *op) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(bshapes); i++) {
    const bshape *s = &bshapes[i];
    kc_begin(&c, op, "", 14, "%s int32 shape#%zu", op, i);
    retype(kc_input(&c, s->ra, s->a, -2147483648.0f, 2147483520.0f, false), ER_DTYPE_INT32);
    retype(kc_input(&c, s->rb, s->b, -2147483648.0f, 2147483520.0f, i % 2 == 1), ER_DTYPE_INT32);
    c.tol = TOL_EXACT_T;
    fn(&c, arg);
  }
  kc_begin(&c, op, "", 14, "%s int32 [1,24,32,100] + [1,24,1,1] bias", op);
  retype(kc_input(&c, 4, DIMS(1, 24, 32, 100), -70000, 70000, false), ER_DTYPE_INT32);
  retype(kc_input(&c, 4, DIMS(1, 24, 1, 1), -3000, 3000, true), ER_DTYPE_INT32);
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
}

static void g_add(case_fn fn, void *arg) {
  gen_binary(fn, arg, "Add", -5, 5);
  gen_binary_i32(fn, arg, "Add");
}
static void g_sub(case_fn fn, void *arg) {
  gen_binary(fn, arg, "Sub", -5, 5);
  gen_binary_i32(fn, arg, "Sub");
}
static void g_mul(case_fn fn, void *arg) {
  gen_binary(fn, arg, "Mul", -5, 5);
  gen_binary_i32(fn, arg, "Mul");
}

/* Max and Min: every broadcast form with NaN and infinities on either
 * side (a NaN in either operand gives NaN), signed zeros, and the
 * variadic fold of three inputs. */
static void gen_minmax(case_fn fn, void *arg, const char *op) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(bshapes); i++) {
    const bshape *s = &bshapes[i];
    for (int v = 0; v < 2; v++) {
      kc_begin(&c, op, "", 13, "%s shape#%zu %s", op, i, v ? "specials, const b" : "");
      er_tensor *a = kc_input(&c, s->ra, s->a, -5, 5, false);
      er_tensor *b = kc_input(&c, s->rb, s->b, -5, 5, v == 1);
      if (v) {
        kc_specials(&c, a);
        kc_specials(&c, b);
      }
      c.tol = TOL_EXACT_T;
      fn(&c, arg);
    }
  }
  kc_begin(&c, op, "", 13, "%s of 3 [2,5,40] with specials", op);
  for (int k = 0; k < 3; k++) kc_specials(&c, kc_input(&c, 3, DIMS(2, 5, 40), -5, 5, false));
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
  kc_begin(&c, op, "", 13, "%s [1,24,74,32] with a scalar constant", op);
  kc_input(&c, 4, DIMS(1, 24, 74, 32), -5, 5, false);
  kc_input(&c, 4, DIMS(1, 1, 1, 1), -0.4f, -0.39f, true);
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
  kc_begin(&c, op, "", 13, "%s of one input", op);
  kc_input(&c, 2, DIMS(3, 17), -5, 5, false);
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
}

static void g_max(case_fn fn, void *arg) { gen_minmax(fn, arg, "Max"); }
static void g_min(case_fn fn, void *arg) { gen_minmax(fn, arg, "Min"); }

/* ---- Cast ---------------------------------------------------------------------- */

/* Every pair among float, double, float16, int8, uint8, int32, int64 and
 * bool, on lengths below, at and past the thread split; float sources
 * carry NaN, infinities and values past every integer range (the
 * conversions' edge rules), integer sources their full range. */
static void g_cast(case_fn fn, void *arg) {
  static const er_dtype types[] = {ER_DTYPE_FLOAT, ER_DTYPE_DOUBLE, ER_DTYPE_FLOAT16, ER_DTYPE_INT8,
                                   ER_DTYPE_UINT8, ER_DTYPE_INT32,  ER_DTYPE_INT64,   ER_DTYPE_BOOL};
  static const int64_t lens[] = {1, 17, 40000};
  kcase c;
  for (size_t a = 0; a < ER_ARRAY_LEN(types); a++)
    for (size_t b = 0; b < ER_ARRAY_LEN(types); b++)
      for (size_t l = 0; l < ER_ARRAY_LEN(lens); l++) {
        if (a == b && l != 2) continue;
        kc_begin(&c, "Cast", "", 19, "Cast %s -> %s [%lld]", er_dtype_name(types[a]), er_dtype_name(types[b]),
                 (long long)lens[l]);
        kc_attr_int(&c, "to", types[b]);
        bool fl = types[a] == ER_DTYPE_FLOAT || types[a] == ER_DTYPE_DOUBLE || types[a] == ER_DTYPE_FLOAT16;
        float lo = fl ? -3e9f : types[a] == ER_DTYPE_UINT8 ? 0 : types[a] == ER_DTYPE_INT8 ? -128 : -3e9f;
        float hi = fl ? 3e9f : types[a] == ER_DTYPE_UINT8 ? 255.99f : types[a] == ER_DTYPE_INT8 ? 127.99f : 3e9f;
        if (types[a] == ER_DTYPE_INT32) lo = -2147483648.0f, hi = 2147483520.0f;
        if (types[a] == ER_DTYPE_BOOL) lo = -1, hi = 1;
        er_tensor *x = kc_input(&c, 1, DIMS(lens[l]), lo, hi, false);
        if (fl) kc_specials(&c, x);
        if (types[a] != ER_DTYPE_FLOAT) retype(x, types[a]);
        c.tol = TOL_EXACT_T;
        fn(&c, arg);
      }
}
/* Comparisons: every broadcast form, float (with NaN and infinities),
 * int32 and int64, operands drawn as small integers so that equal pairs
 * are common; int64 across 2^32 so that a 32-bit compare would differ. */
static void gen_compare(case_fn fn, void *arg, const char *op, int version) {
  static const er_dtype types[] = {ER_DTYPE_FLOAT, ER_DTYPE_INT32, ER_DTYPE_INT64};
  kcase c;
  for (size_t t = 0; t < ER_ARRAY_LEN(types); t++)
    for (size_t i = 0; i < ER_ARRAY_LEN(bshapes); i++) {
      const bshape *s = &bshapes[i];
      kc_begin(&c, op, "", version, "%s %s shape#%zu", op, er_dtype_name(types[t]), i);
      er_tensor *a = kc_input(&c, s->ra, s->a, -3, 3, false);
      er_tensor *b = kc_input(&c, s->rb, s->b, -3, 3, i % 2 == 1);
      retype(a, ER_DTYPE_INT32);
      retype(b, ER_DTYPE_INT32);
      if (types[t] == ER_DTYPE_INT64) {
        retype(a, ER_DTYPE_INT64);
        retype(b, ER_DTYPE_INT64);
        int64_t *av = a->data;
        for (int64_t e = 0; e < er__tensor_count(a); e++) av[e] += (e % 3 == 0) ? (INT64_C(1) << 32) : 0;
      } else if (types[t] == ER_DTYPE_FLOAT) {
        retype(a, ER_DTYPE_FLOAT);
        retype(b, ER_DTYPE_FLOAT);
        kc_specials(&c, a);
        kc_specials(&c, b);
      }
      c.tol = TOL_EXACT_T;
      fn(&c, arg);
    }
  kc_begin(&c, op, "", version, "%s int32 [1,2048,1] vs [1,1,257] (one-hot)", op);
  er_tensor *x = kc_input(&c, 3, DIMS(1, 2048, 1), 0, 257, false);
  er_tensor *r = kc_input(&c, 3, DIMS(1, 1, 257), 0, 257, true);
  retype(x, ER_DTYPE_INT32);
  retype(r, ER_DTYPE_INT32);
  for (int e = 0; e < 257; e++) ((int32_t *)r->data)[e] = e;
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
}
static void g_equal(case_fn fn, void *arg) { gen_compare(fn, arg, "Equal", 13); }
static void g_greater(case_fn fn, void *arg) { gen_compare(fn, arg, "Greater", 13); }
static void g_less(case_fn fn, void *arg) { gen_compare(fn, arg, "Less", 13); }
static void g_greater_equal(case_fn fn, void *arg) { gen_compare(fn, arg, "GreaterOrEqual", 16); }
static void g_less_equal(case_fn fn, void *arg) { gen_compare(fn, arg, "LessOrEqual", 16); }

static void g_div(case_fn fn, void *arg) { gen_binary(fn, arg, "Div", 0.5f, 5); }

static void g_prelu(case_fn fn, void *arg) {
  static const bshape s[] = {
      {4, {1, 8, 5, 6}, 3, {8, 1, 1}}, {4, {2, 3, 4, 33}, 0, {0}}, {2, {7, 40}, 1, {40}}, {3, {2, 5, 9}, 3, {2, 5, 9}},
      /* blocked activations by blocked per-channel slopes (AVX-512, AVX2) */
      {5, {1, 3, 7, 9, 16}, 5, {1, 3, 1, 1, 16}}, {5, {1, 5, 6, 7, 8}, 5, {1, 5, 1, 1, 8}}};
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(s); i++) {
    kc_begin(&c, "PRelu", "", 16, "PRelu shape#%zu", i);
    kc_specials(&c, kc_input(&c, s[i].ra, s[i].a, -5, 5, false));
    kc_input(&c, s[i].rb, s[i].b, -1, 1, true);
    c.tol = TOL_EXACT_T;
    fn(&c, arg);
  }
}

static void g_sum(case_fn fn, void *arg) {
  kcase c;
  for (int n = 1; n <= 4; n++) {
    kc_begin(&c, "Sum", "", 13, "Sum of %d [3,5,33]", n);
    for (int k = 0; k < n; k++) kc_input(&c, 3, DIMS(3, 5, 33), -5, 5, false);
    c.tol = TOL_EXACT_T;
    fn(&c, arg);
  }
  kc_begin(&c, "Sum", "", 13, "Sum with broadcast third input");
  kc_input(&c, 3, DIMS(3, 5, 33), -5, 5, false);
  kc_input(&c, 3, DIMS(3, 5, 33), -5, 5, false);
  kc_input(&c, 1, DIMS(33), -5, 5, true);
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
  kc_begin(&c, "Sum", "", 6, "Sum version 6 of 2 [64,56]");
  kc_input(&c, 2, DIMS(64, 56), -5, 5, false);
  kc_input(&c, 2, DIMS(64, 56), -5, 5, false);
  c.tol = TOL_EXACT_T;
  fn(&c, arg);
}

const case_gen kcases_eltwise[] = {
    {"Relu", "", g_relu},
    {"Sigmoid", "", g_sigmoid},
    {"Tanh", "", g_tanh},
    {"Clip", "", g_clip},
    {"HardSigmoid", "", g_hardsigmoid},
    {"HardSwish", "", g_hardswish},
    {"LeakyRelu", "", g_leakyrelu},
    {"Gelu", "", g_gelu},
    {"Erf", "", g_erf},
    {"Exp", "", g_exp},
    {"Abs", "", g_abs},
    {"Neg", "", g_neg},
    {"Sqrt", "", g_sqrt},
    {"Reciprocal", "", g_recip},
    {"Log", "", g_log},
    {"Add", "", g_add},
    {"Sub", "", g_sub},
    {"Mul", "", g_mul},
    {"Div", "", g_div},
    {"PRelu", "", g_prelu},
    {"Sum", "", g_sum},
    {"Max", "", g_max},
    {"Min", "", g_min},
    {"Cast", "", g_cast},
    {"Equal", "", g_equal},
    {"Greater", "", g_greater},
    {"Less", "", g_less},
    {"GreaterOrEqual", "", g_greater_equal},
    {"LessOrEqual", "", g_less_equal},
    {NULL, NULL, NULL},
};
