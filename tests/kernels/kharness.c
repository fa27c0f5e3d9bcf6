/* kharness.c - builds kernel cases, runs each optimized kernel against the
 * reference kernel of its op, and reports (see kharness.h). Usage:
 *
 *   test-kernels [--time] [KERNEL_SUBSTRING [CASE_SUBSTRING]]
 *
 * The last line is "N passed, N failed" (a pass is one kernel on one case
 * on every thread count). --time also times each passing case (kernel
 * run only, outputs and scratch already allocated; median of repeated
 * runs on 1 and 2 threads) and adds the generators' full-size cases: a
 * measurement aid, never a test. */
#include "kharness.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/kernel.h"

/* Bytes checked after every output and scratch buffer. */
#define GUARD_BYTES 256
#define GUARD_BYTE 0xa5
/* Outputs start as this pattern (a large finite float), so a kernel that
 * relies on zeroed outputs or skips elements shows up as a mismatch. */
#define GARBAGE_BYTE 0x7e

/* ======================================================================== */
/* Tolerances                                                                */
/* ======================================================================== */

/* GEMM and convolution: both sides sum in float32 but in different orders
 * and blockings, so single elements whose terms cancel can differ by much
 * more than an ulp of the result. The normalized error (NMSE) bounds the
 * whole output; the max error is taken relative to the output's scale. */
const tolerance TOL_GEMM = {TOL_NORM, 2e-5, 1e-6, 1e-10};
/* Copies, max pooling, layout: bit-identical. */
const tolerance TOL_EXACT_T = {TOL_EXACT, 0, 0, 0};
/* exp-based functions (exp, sigmoid, tanh, erf, GELU, softmax's exp)
 * against libm/double: a few float ulp (2^-23 = 1.2e-7 relative), so 2e-6
 * relative plus a tiny absolute term for results that underflow. */
const tolerance TOL_EXPF = {TOL_ELEMENT, 2e-6, 1e-30, 0};
/* GELU: for x far below 0 the result is exp(-arg) with arg = x^2 / 2 (or
 * 2u of the tanh form), computed in float: its rounding (a few 2^-24 * arg
 * absolute) becomes a relative error of the result, 4e-6 at x = -6.6 where
 * the result is 1e-10; below that the absolute term covers it. The double
 * reference itself computes 1 + erf(z) (or 1 + tanh(u)) with cancellation
 * there, good to about |x| * 1e-16 absolute. Hence rtol 1e-5, atol 1e-15. */
const tolerance TOL_GELU = {TOL_ELEMENT, 1e-5, 1e-15, 0};
/* Plain arithmetic (add, mul, div, clip, relu, scaling by a reciprocal
 * instead of dividing): at most an ulp or two. */
const tolerance TOL_ARITH = {TOL_ELEMENT, 4e-7, 1e-37, 0};
/* Reductions (averages, variances, softmax sums): the order of the sum
 * differs, so a normalized bound as for GEMM. */
const tolerance TOL_REDUCE = {TOL_NORM, 1e-5, 1e-7, 1e-11};

/* ======================================================================== */
/* Building cases                                                            */
/* ======================================================================== */

static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float kc_uniform(kcase *c, float lo, float hi) {
  double u = (double)(next_u64(&c->rng) >> 11) / 9007199254740992.0;
  return (float)(lo + (hi - lo) * u);
}

void kc_begin(kcase *c, const char *op, const char *domain, int version, const char *fmt, ...) {
  memset(c, 0, sizeof *c);
  c->op = op;
  c->domain = domain;
  c->version = version;
  c->n_out = 1;
  c->tol = TOL_GEMM;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->name, sizeof c->name, fmt, ap);
  va_end(ap);
  /* The seed depends on the case's name only, so a case is the same
   * whichever kernel or filter runs it. */
  uint64_t h = 1469598103934665603ull;
  for (const char *p = c->name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  c->rng = h;
}

void kc_free(kcase *c) {
  for (int i = 0; i < c->n_in; i++) {
    if (!c->in[i]) continue;
    free(c->in[i]->data);
    free(c->in[i]);
  }
  c->n_in = 0;
}

static er_attr *new_attr(kcase *c, const char *name, er_attr_type type) {
  if (c->n_attrs >= KC_MAX_ATTRS) {
    fprintf(stderr, "case %s: too many attributes\n", c->name);
    exit(2);
  }
  er_attr *a = &c->attrs[c->n_attrs++];
  memset(a, 0, sizeof *a);
  a->name = name;
  a->type = type;
  return a;
}

void kc_attr_int(kcase *c, const char *name, int64_t v) { new_attr(c, name, ER_ATTR_INT)->i = v; }
void kc_attr_float(kcase *c, const char *name, float v) { new_attr(c, name, ER_ATTR_FLOAT)->f = v; }

void kc_attr_string(kcase *c, const char *name, const char *s) {
  er_attr *a = new_attr(c, name, ER_ATTR_STRING);
  a->s = s;
  a->s_len = strlen(s);
}

void kc_attr_ints(kcase *c, const char *name, int n, const int64_t *v) {
  int slot = c->n_attrs;
  er_attr *a = new_attr(c, name, ER_ATTR_INTS);
  memcpy(c->ints[slot], v, (size_t)n * sizeof *v);
  a->ints = c->ints[slot];
  a->n = n;
}

/* The strings themselves must outlive the case (string literals). */
void kc_attr_strings(kcase *c, const char *name, int n, const char *const *v) {
  int slot = c->n_attrs;
  er_attr *a = new_attr(c, name, ER_ATTR_STRINGS);
  for (int k = 0; k < n && k < KC_MAX_ATTR_VALUES; k++) c->strs[slot][k] = v[k];
  a->strings = c->strs[slot];
  a->n = n;
}

void kc_attr_floats(kcase *c, const char *name, int n, const float *v) {
  int slot = c->n_attrs;
  er_attr *a = new_attr(c, name, ER_ATTR_FLOATS);
  memcpy(c->floats[slot], v, (size_t)n * sizeof *v);
  a->floats = c->floats[slot];
  a->n = n;
}

static er_tensor *new_input(kcase *c, er_dtype dtype, int rank, const int64_t *dims, bool constant) {
  if (c->n_in >= KC_MAX_IO) {
    fprintf(stderr, "case %s: too many inputs\n", c->name);
    exit(2);
  }
  er_tensor *t = calloc(1, sizeof *t);
  er__tensor_set(t, dtype, rank, dims);
  int64_t n = er__tensor_count(t);
  t->nbytes = (size_t)n * er_dtype_size(dtype);
  t->data = calloc(1, t->nbytes ? t->nbytes : 1);
  if (!t->data) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  c->is_const[c->n_in] = constant;
  c->in[c->n_in++] = t;
  return t;
}

er_tensor *kc_input(kcase *c, int rank, const int64_t *dims, float lo, float hi, bool constant) {
  er_tensor *t = new_input(c, ER_DTYPE_FLOAT, rank, dims, constant);
  float *d = t->data;
  int64_t n = er__tensor_count(t);
  for (int64_t i = 0; i < n; i++) d[i] = kc_uniform(c, lo, hi);
  return t;
}

er_tensor *kc_input_i64(kcase *c, int rank, const int64_t *dims, const int64_t *values, bool constant) {
  er_tensor *t = new_input(c, ER_DTYPE_INT64, rank, dims, constant);
  memcpy(t->data, values, t->nbytes);
  return t;
}

void kc_input_none(kcase *c) {
  c->is_const[c->n_in] = false;
  c->in[c->n_in++] = NULL;
}

void kc_specials(kcase *c, er_tensor *t) {
  static const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3e38f, -3e38f, 1e-40f, -1e-40f,
                                   88.7f, -88.7f, 89.0f, -104.0f, 20.0f, -20.0f};
  float *d = t->data;
  int64_t n = er__tensor_count(t);
  for (size_t i = 0; i < ER_ARRAY_LEN(specials) && (int64_t)i < n; i++)
    d[next_u64(&c->rng) % (uint64_t)n] = specials[i];
}

/* ======================================================================== */
/* Running a case                                                            */
/* ======================================================================== */

typedef enum outcome { OUT_UNSUPPORTED, OUT_PASS, OUT_FAIL } outcome;

bool kc_timing = false;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + 1e-3 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Best time of the kernel's run on outputs and scratch already there. */
static double time_kernel(const er_cpu_kernel *k, er_kernel_run *kr) {
  double t[15];
  k->run(kr);
  double one_start = now_us();
  k->run(kr);
  double one = now_us() - one_start;
  int reps = one > 0 ? (int)(2000.0 / one) + 1 : 100;
  if (reps > 200) reps = 200;
  for (int r = 0; r < 15; r++) {
    double a = now_us();
    for (int q = 0; q < reps; q++) k->run(kr);
    t[r] = (now_us() - a) / reps;
  }
  /* The minimum: the machine is shared, and other load only adds. */
  qsort(t, 15, sizeof t[0], cmp_double);
  return t[0];
}

typedef struct node_box {
  er_node node;
  int32_t ins[KC_MAX_IO], outs[KC_MAX_IO];
} node_box;

static bool make_node(const kcase *c, node_box *b) {
  memset(b, 0, sizeof *b);
  for (int i = 0; i < c->n_in; i++) b->ins[i] = c->in[i] ? i : -1;
  for (int i = 0; i < c->n_out; i++) b->outs[i] = KC_MAX_IO + i;
  b->node.name = c->name;
  b->node.op_type = c->op;
  b->node.domain = c->domain;
  b->node.n_inputs = c->n_in;
  b->node.n_outputs = c->n_out;
  b->node.inputs = b->ins;
  b->node.outputs = b->outs;
  b->node.n_attrs = c->n_attrs;
  b->node.attrs = (er_attr *)c->attrs;
  b->node.version = c->version;
  b->node.op = er__op_find(c->domain, c->op, c->version);
  return b->node.op != NULL;
}

/* Runs check() and allocates each output with guard bytes after it,
 * filled with the garbage pattern. */
static er_status alloc_outputs(const er_node *node, const kcase *c, er_tensor *outs, bool guarded) {
  er_tensor *out_ptrs[KC_MAX_IO];
  for (int i = 0; i < c->n_out; i++) {
    memset(&outs[i], 0, sizeof outs[i]);
    er__tensor_set(&outs[i], ER_DTYPE_UNDEFINED, -1, NULL);
    out_ptrs[i] = &outs[i];
  }
  er_kctx ctx = {node, c->n_in, (er_tensor *const *)c->in, c->n_out, out_ptrs, false, NULL, NULL, NULL};
  ER_CHECK(node->op->check(&ctx));
  for (int i = 0; i < c->n_out; i++) {
    int64_t n = er__tensor_count(&outs[i]);
    if (n < 0) return er__error(ER_STATUS_INTERNAL, "output %d has no shape after check", i);
    size_t bytes = (size_t)n * er_dtype_size(outs[i].dtype);
    outs[i].nbytes = bytes;
    outs[i].data = er__aligned_alloc(bytes + GUARD_BYTES);
    if (!outs[i].data) return ER_STATUS_OUT_OF_MEMORY;
    memset(outs[i].data, guarded ? GARBAGE_BYTE : 0, bytes);
    memset((char *)outs[i].data + bytes, GUARD_BYTE, GUARD_BYTES);
  }
  return ER_STATUS_OK;
}

static void free_outputs(er_tensor *outs, int n) {
  for (int i = 0; i < n; i++) {
    er__aligned_free(outs[i].data);
    outs[i].data = NULL;
  }
}

static bool guard_ok(const void *p, size_t bytes) {
  const unsigned char *g = (const unsigned char *)p + bytes;
  for (size_t i = 0; i < GUARD_BYTES; i++)
    if (g[i] != GUARD_BYTE) return false;
  return true;
}

/* Compares float32 outputs; writes a description of the worst element
 * into why on failure. */
static bool compare_f32(const tolerance *tol, const float *got, const float *want, int64_t n, char *why,
                        size_t size) {
  double err2 = 0, ref2 = 0, max_ref = 0, max_err = 0;
  int64_t worst = -1;
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    if (isnan(w) || isnan(g)) {
      if (isnan(w) && isnan(g)) continue;
      snprintf(why, size, "element %lld: got %.9g, want %.9g (NaN mismatch)", (long long)i, g, w);
      return false;
    }
    if (isinf(w) || isinf(g)) {
      if (g == w) continue;
      snprintf(why, size, "element %lld: got %.9g, want %.9g (infinity mismatch)", (long long)i, g, w);
      return false;
    }
    double d = fabs(g - w);
    if (tol->kind == TOL_EXACT) {
      if (memcmp(&got[i], &want[i], sizeof got[i]) != 0 && !(g == 0 && w == 0)) {
        snprintf(why, size, "element %lld: got %.9g, want %.9g (exact)", (long long)i, g, w);
        return false;
      }
      continue;
    }
    if (tol->kind == TOL_ELEMENT && d > tol->atol + tol->rtol * fabs(w)) {
      snprintf(why, size, "element %lld: got %.9g, want %.9g (|d| %.3g > %.3g + %.3g * |want|)", (long long)i, g,
               w, d, tol->atol, tol->rtol);
      return false;
    }
    err2 += d * d;
    ref2 += w * w;
    if (fabs(w) > max_ref) max_ref = fabs(w);
    if (d > max_err) {
      max_err = d;
      worst = i;
    }
  }
  if (tol->kind == TOL_NORM) {
    double nmse = ref2 > 0 ? err2 / ref2 : err2;
    if (nmse > tol->nmse || max_err > tol->rtol * max_ref + tol->atol) {
      snprintf(why, size, "NMSE %.3g (limit %.3g), max error %.3g at %lld (got %.9g, want %.9g; limit %.3g)", nmse,
               tol->nmse, max_err, (long long)worst, worst >= 0 ? got[worst] : 0.0,
               worst >= 0 ? want[worst] : 0.0, tol->rtol * max_ref + tol->atol);
      return false;
    }
  }
  return true;
}

typedef struct run_ctx {
  const er_cpu_kernel *kernel;
  const char *case_filter;
  er_thread_pool *pools[3];      /* 1 (NULL), 2 and 3 threads */
  int supported, unsupported, failed;
} run_ctx;

static outcome fail(const run_ctx *rc, const kcase *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static outcome fail(const run_ctx *rc, const kcase *c, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "FAIL %s on %s: %s\n", rc->kernel->name, c->name, msg);
  return OUT_FAIL;
}

/* Whether kernel `name` is one that c->must_take ('|'-separated name
 * fragments) says must support the case. */
static bool must_take(const kcase *c, const char *name) {
  for (const char *p = c->must_take; p && *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    for (const char *q = name; *q; q++)
      if (strncmp(q, p, len) == 0) return true;
    p = bar ? bar + 1 : NULL;
  }
  return false;
}

static outcome run_case(run_ctx *rc, kcase *c) {
  const er_cpu_kernel *k = rc->kernel;
  node_box nb;
  if (!make_node(c, &nb)) return fail(rc, c, "no reference op %s version %d", c->op, c->version);
  const er_node *node = &nb.node;

  /* What a compiled graph knows: constants with data, other inputs as
   * type and shape (shape hidden for dynamic cases), outputs as the
   * load-time check infers them. */
  er_tensor info_in[KC_MAX_IO], info_out[KC_MAX_IO];
  const er_tensor *ki_in[KC_MAX_IO];
  er_tensor *ki_out[KC_MAX_IO];
  for (int i = 0; i < c->n_in; i++) {
    if (!c->in[i]) {
      ki_in[i] = NULL;
      continue;
    }
    if (c->is_const[i]) {
      ki_in[i] = c->in[i];
      continue;
    }
    info_in[i] = *c->in[i];
    info_in[i].data = NULL;
    info_in[i].nbytes = 0;
    info_in[i].flags = 0;
    if (c->dynamic)
      for (int d = 0; d < info_in[i].rank; d++) info_in[i].dims[d] = -1;
    else if (c->dynamic_batch && info_in[i].rank > 0)
      info_in[i].dims[0] = -1;
    if (c->unknown_rank) er__tensor_set(&info_in[i], info_in[i].dtype, -1, NULL);
    ki_in[i] = &info_in[i];
  }
  for (int i = 0; i < c->n_out; i++) {
    memset(&info_out[i], 0, sizeof info_out[i]);
    er__tensor_set(&info_out[i], ER_DTYPE_UNDEFINED, -1, NULL);
    ki_out[i] = &info_out[i];
  }
  er_kctx cctx = {node, c->n_in, (er_tensor *const *)ki_in, c->n_out, ki_out, true, NULL, NULL, NULL};
  if (node->op->check(&cctx) != ER_STATUS_OK) return fail(rc, c, "load-time check failed: %s", er_last_error());
  er_kernel_info ki = {node, c->n_in, c->n_out, ki_in, (const er_tensor *const *)ki_out, er__cpu_features()};
  if (!k->supports(&ki)) {
    if (must_take(c, k->name)) return fail(rc, c, "the kernel declines this case");
    return OUT_UNSUPPORTED;
  }

  void *state = NULL;
  size_t scratch_bytes = 0;
  if (k->prepare && k->prepare(&ki, &state, &scratch_bytes) != ER_STATUS_OK)
    return fail(rc, c, "prepare failed: %s", er_last_error());

  outcome result = OUT_PASS;
  er_tensor ref[KC_MAX_IO], got[3][KC_MAX_IO];
  memset(got, 0, sizeof got);
  memset(ref, 0, sizeof ref);
  void *snapshot[KC_MAX_IO] = {0};
  if (alloc_outputs(node, c, ref, false) != ER_STATUS_OK) {
    result = fail(rc, c, "run-time check failed: %s", er_last_error());
    goto done;
  }
  {
    er_tensor *ref_ptrs[KC_MAX_IO];
    for (int i = 0; i < c->n_out; i++) ref_ptrs[i] = &ref[i];
    er_kctx rctx = {node, c->n_in, (er_tensor *const *)c->in, c->n_out, ref_ptrs, false, NULL, NULL, NULL};
    if (node->op->run(&rctx) != ER_STATUS_OK) {
      result = fail(rc, c, "reference run failed: %s", er_last_error());
      goto done;
    }
  }
  for (int i = 0; i < c->n_in; i++) {
    if (!c->in[i]) continue;
    snapshot[i] = malloc(c->in[i]->nbytes ? c->in[i]->nbytes : 1);
    memcpy(snapshot[i], c->in[i]->data, c->in[i]->nbytes);
  }
  for (int t = 0; t < 3 && result == OUT_PASS; t++) {
    if (alloc_outputs(node, c, got[t], true) != ER_STATUS_OK) {
      result = fail(rc, c, "run-time check failed: %s", er_last_error());
      break;
    }
    er_tensor *got_ptrs[KC_MAX_IO];
    for (int i = 0; i < c->n_out; i++) got_ptrs[i] = &got[t][i];
    unsigned char *scratch = er__aligned_alloc(scratch_bytes + GUARD_BYTES);
    memset(scratch, 0x5a, scratch_bytes);
    memset(scratch + scratch_bytes, GUARD_BYTE, GUARD_BYTES);
    er_kctx kctx = {node, c->n_in, (er_tensor *const *)c->in, c->n_out, got_ptrs, false, NULL, NULL, NULL};
    er_kernel_run kr = {&kctx, state, scratch_bytes ? scratch : NULL, scratch_bytes, rc->pools[t], NULL, NULL};
    er_status st = k->run(&kr);
    if (st != ER_STATUS_OK) result = fail(rc, c, "%d threads: run failed: %s", t + 1, er_last_error());
    if (result == OUT_PASS && !guard_ok(scratch, scratch_bytes))
      result = fail(rc, c, "%d threads: wrote past its %zu bytes of scratch", t + 1, scratch_bytes);
    er__aligned_free(scratch);
    for (int i = 0; i < c->n_out && result == OUT_PASS; i++) {
      if (!guard_ok(got[t][i].data, got[t][i].nbytes)) {
        result = fail(rc, c, "%d threads: wrote past the end of output %d", t + 1, i);
        break;
      }
      char why[512];
      if (got[t][i].dtype == ER_DTYPE_FLOAT) {
        int64_t n = er__tensor_count(&got[t][i]);
        if (!compare_f32(&c->tol, got[t][i].data, ref[i].data, n, why, sizeof why)) {
          result = fail(rc, c, "%d threads: output %d: %s", t + 1, i, why);
          break;
        }
      } else if (memcmp(got[t][i].data, ref[i].data, got[t][i].nbytes) != 0) {
        result = fail(rc, c, "%d threads: output %d differs from the reference", t + 1, i);
        break;
      }
      if (t > 0 && memcmp(got[t][i].data, got[0][i].data, got[t][i].nbytes) != 0) {
        result = fail(rc, c, "output %d on %d threads differs from 1 thread (not deterministic)", i, t + 1);
        break;
      }
    }
    for (int i = 0; i < c->n_in && result == OUT_PASS; i++)
      if (c->in[i] && memcmp(snapshot[i], c->in[i]->data, c->in[i]->nbytes) != 0)
        result = fail(rc, c, "%d threads: input %d was modified", t + 1, i);
    if (kc_timing && result == OUT_PASS && t < 2) {
      void *ts = er__aligned_alloc(scratch_bytes + GUARD_BYTES);
      kr.scratch = scratch_bytes ? ts : NULL;
      printf("time %-36s %8.1f us  %d thread%s  %s\n", k->name, time_kernel(k, &kr), t + 1, t ? "s" : " ", c->name);
      er__aligned_free(ts);
    }
  }
done:
  for (int t = 0; t < 3; t++) free_outputs(got[t], c->n_out);
  free_outputs(ref, c->n_out);
  for (int i = 0; i < c->n_in; i++) free(snapshot[i]);
  if (k->release) k->release(state);
  return result;
}

static void on_case(kcase *c, void *arg) {
  run_ctx *rc = arg;
  if (rc->case_filter && !strstr(c->name, rc->case_filter)) {
    kc_free(c);
    return;
  }
  switch (run_case(rc, c)) {
    case OUT_UNSUPPORTED: rc->unsupported++; break;
    case OUT_PASS: rc->supported++; break;
    case OUT_FAIL:
      rc->supported++;
      rc->failed++;
      break;
  }
  kc_free(c);
}

/* ======================================================================== */
/* main                                                                      */
/* ======================================================================== */

/* The pool the kernels split work on must run every chunk of every job
 * exactly once, also when workers lag (more workers than cores, jobs with
 * fewer chunks than workers): many small jobs, each chunk counting its
 * runs. */
#define POOL_JOBS 30000
static _Atomic int pool_hits[8];

static void pool_count(void *arg, int64_t begin, int64_t end) {
  ER_UNUSED(arg);
  for (int64_t i = begin; i < end; i++) atomic_fetch_add(&pool_hits[i], 1);
}

static bool pool_selfcheck(void) {
  er_thread_pool *pool;
  if (er__pool_create(4, &pool) != ER_STATUS_OK) return false;
  long bad = 0;
  for (long job = 0; job < POOL_JOBS; job++) {
    int n = 1 + (int)(job % 4);
    for (int i = 0; i < 8; i++) atomic_store(&pool_hits[i], 0);
    er__parallel_for(pool, n, 1, pool_count, NULL);
    for (int i = 0; i < n; i++)
      if (atomic_load(&pool_hits[i]) != 1) {
        bad++;
        break;
      }
  }
  er__pool_free(pool);
  if (bad) fprintf(stderr, "FAIL thread pool: %ld of %d jobs ran a chunk other than once\n", bad, POOL_JOBS);
  return bad == 0;
}

/* Whether the CPU runs kernels of this ISA; *lacks names what is missing. */
static bool isa_available(const char *isa, const er_cpu_features *f, const char **lacks) {
  if (strcmp(isa, "avx512") == 0) {
    *lacks = "avx512f/bw/vl/dq";
    return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
  }
  if (strcmp(isa, "scalar") == 0) {
    *lacks = "nothing";
    return true;
  }
  if (strcmp(isa, "avx512vnni") == 0) {
    *lacks = "avx512f/bw/vl/dq/vnni";
    return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni;
  }
  if (strcmp(isa, "amx") == 0) {
    *lacks = "amx-int8 (with the OS's permission) and avx512f/bw/vl/dq/vnni";
    return f->amx_int8 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni;
  }
  if (strcmp(isa, "avx512vbmi") == 0) {
    *lacks = "avx512f/bw/vl/dq/vnni/vbmi";
    return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni && f->avx512vbmi;
  }
  if (strcmp(isa, "avxvnni") == 0) {
    *lacks = "avx2/fma/f16c/avxvnni";
    return f->avx2 && f->fma && f->f16c && f->avxvnni;
  }
  if (strcmp(isa, "neondot") == 0) {
    *lacks = "neon/dotprod";
    return f->neon && f->dotprod;
  }
  if (strcmp(isa, "avx2") == 0) {
    *lacks = "avx2/fma/f16c";
    return f->avx2 && f->fma && f->f16c;
  }
  if (strcmp(isa, "neon") == 0) {
    *lacks = "neon";
    return f->neon;
  }
  if (strcmp(isa, "scalar") == 0) return true;
  *lacks = "an ISA the harness does not know";
  return false;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--time") == 0) {
    kc_timing = true;
    argc--;
    argv++;
  }
  const char *kernel_filter = argc > 1 ? argv[1] : NULL, *case_filter = argc > 2 ? argv[2] : NULL;
  const er_cpu_features *cpu = er__cpu_features();
  char feat[256];
  printf("cpu: %s (%d cores)\n", er__cpu_features_str(cpu, feat, sizeof feat), cpu->cores);
  run_ctx rc;
  memset(&rc, 0, sizeof rc);
  rc.case_filter = case_filter;
  if (er__pool_create(2, &rc.pools[1]) != ER_STATUS_OK || er__pool_create(3, &rc.pools[2]) != ER_STATUS_OK) {
    fprintf(stderr, "cannot create thread pools: %s\n", er_last_error());
    return 2;
  }
  int passed = 0, failed = 0, skipped = 0, kernels = 0;
  if (!kernel_filter) {
    bool ok = pool_selfcheck();
    printf("%s thread pool: %d jobs, each chunk run exactly once\n", ok ? "ok  " : "FAIL", POOL_JOBS);
    if (ok) passed++;
    else failed++;
  }
  for (const er_cpu_kernel *const *kp = er__cpu_kernels_all(); *kp; kp++) {
    const er_cpu_kernel *k = *kp;
    if (kernel_filter && !strstr(k->name, kernel_filter)) continue;
    kernels++;
    const char *isa = strstr(k->name, "__");
    const char *lacks;
    if (!isa || !isa_available(isa + 2, cpu, &lacks)) {
      printf("skip %s: CPU lacks %s\n", k->name, isa ? lacks : "(name has no __isa suffix)");
      skipped++;
      if (!isa) failed++;
      continue;
    }
    rc.kernel = k;
    rc.supported = rc.unsupported = rc.failed = 0;
    bool have_gen = false;
    for (const case_gen *const *grp = kcase_groups; *grp; grp++) {
      for (const case_gen *g = *grp; g->op; g++) {
        if (strcmp(g->op, k->op) != 0 || strcmp(g->domain, k->domain) != 0) continue;
        have_gen = true;
        g->gen(on_case, &rc);
      }
    }
    passed += rc.supported - rc.failed;
    failed += rc.failed;
    if (!have_gen || (rc.supported == 0 && !case_filter)) {
      printf("FAIL %s (%s): no case exercises it\n", k->name, k->op);
      failed++;
      continue;
    }
    printf("%s %s (%s): %d cases, %d failed, %d outside what it supports\n", rc.failed ? "FAIL" : "ok  ",
           k->name, k->op, rc.supported, rc.failed, rc.unsupported);
  }
#if defined(__x86_64__) || defined(__i386__)
  printf("skip *__neon kernels: not built for this architecture (x86)\n");
#elif defined(__aarch64__)
  printf("skip *__avx2 and *__avx512 kernels: not built for this architecture (AArch64)\n");
#endif
  printf("%d kernels, %d skipped for the CPU\n", kernels, skipped);
  er__pool_free(rc.pools[1]);
  er__pool_free(rc.pools[2]);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
