/* signal.c - operators of the "signal" group: DFT, STFT, the window
 * generators (Hann, Hamming, Blackman), MelWeightMatrix and BitCast.
 *
 * Complex numbers travel as a trailing dim of 2 (real, imaginary); a real
 * signal has a trailing dim of 1. Transforms are computed in double with
 * twiddles from a table indexed by exact integer angles (no accumulated
 * angle error); see dft_plan for the algorithms. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

#define VALUE_IN(i) (1u << (i))

#define PI 3.14159265358979323846

static const er_dtype types_index[] = {ER_DTYPE_INT32, ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};

/* Reads the scalar (or one-element) integer input i into *out. Returns
 * false when the input is absent or its value is not known yet. */
static er_status scalar_int(const er_kctx *ctx, int i, const char *what, bool *known,
                            int64_t *out) {
  const er_tensor *t = er__in(ctx, i);
  *known = false;
  if (!t) return ER_STATUS_OK;
  ER_CHECK(er__require_type(ctx, i, types_index));
  if (t->rank > 1 || (t->rank == 1 && t->dims[0] >= 0 && t->dims[0] != 1)) {
    char a[96];
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s %s must be a scalar", what,
                        er__shape_str(t, a, sizeof a));
  }
  if (!t->data || t->rank < 0 || (t->rank == 1 && t->dims[0] < 0)) return ER_STATUS_OK;
  *out = er__get_i64(t, 0);
  *known = true;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The transform                                                             */
/* ======================================================================== */

/* Transforms of one length n. Power-of-two lengths use an iterative
 * radix-2 FFT. Other lengths up to DIRECT_MAX use the direct sum; longer
 * ones use Bluestein's algorithm, which rewrites the DFT as a circular
 * convolution of power-of-two length m >= 2n - 1 with the chirp
 * w[j] = e^{-i pi j^2 / n}, keeping O(n log n) for any n (an STFT frame of
 * 400 samples is common). Chirp angles use j^2 mod 2n, so they stay exact. */
#define DIRECT_MAX 64

typedef enum { PLAN_POW2, PLAN_DIRECT, PLAN_BLUESTEIN } plan_kind;

typedef struct dft_plan {
  plan_kind kind;
  int64_t n;
  int64_t m;              /* FFT length: n, or the Bluestein length */
  double *cos_t, *sin_t;  /* [m] cos / sin of 2 pi k / m */
  double *re, *im;        /* [n] the vector to transform, in place */
  double *wr, *wi;        /* [m] work (direct output / Bluestein buffer) */
  double *cr, *ci;        /* [n] Bluestein chirp w[j] */
  double *br, *bi;        /* [m] FFT of the Bluestein kernel conj(w) */
  double *mem;
} dft_plan;

/* In place radix-2 FFT of length m (a power of two) with the table of p:
 * (re, im) <- sum_j x[j] e^{sign 2 pi i j k / m}, unnormalized. */
static void fft_pow2(const dft_plan *p, double *re, double *im, int sign) {
  const int64_t n = p->m;
  if (n <= 1) return;
  for (int64_t i = 1, j = 0; i < n; i++) {
    int64_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j |= bit;
    if (i < j) {
      double t = re[i];
      re[i] = re[j];
      re[j] = t;
      t = im[i];
      im[i] = im[j];
      im[j] = t;
    }
  }
  for (int64_t len = 2; len <= n; len <<= 1) {
    int64_t step = n / len, half = len / 2;
    for (int64_t s = 0; s < n; s += len)
      for (int64_t k = 0; k < half; k++) {
        double wr = p->cos_t[k * step], wi = sign * p->sin_t[k * step];
        double xr = re[s + k + half], xi = im[s + k + half];
        double tr = xr * wr - xi * wi, ti = xr * wi + xi * wr;
        re[s + k + half] = re[s + k] - tr;
        im[s + k + half] = im[s + k] - ti;
        re[s + k] += tr;
        im[s + k] += ti;
      }
  }
}

static er_status plan_init(const er_kctx *ctx, dft_plan *p, int64_t n) {
  memset(p, 0, sizeof *p);
  p->n = n;
  p->m = n;
  if (n > 0 && (n & (n - 1)) == 0) {
    p->kind = PLAN_POW2;
  } else if (n <= DIRECT_MAX) {
    p->kind = PLAN_DIRECT;
  } else {
    p->kind = PLAN_BLUESTEIN;
    if (n > (INT64_C(1) << 40))
      return er__op_error(ctx, ER_STATUS_LIMIT, "transform length %lld is too large",
                          (long long)n);
    p->m = 1;
    while (p->m < 2 * n - 1) p->m <<= 1;
  }
  /* Doubles: tables 2m, re/im 2n, work 2m, chirp 2n, kernel 2m. */
  const uint64_t nn = (uint64_t)(n > 0 ? n : 1), mm = (uint64_t)(p->m > 0 ? p->m : 1);
  uint64_t total = 6 * mm + 4 * nn;
  if (total > SIZE_MAX / sizeof(double))
    return er__op_error(ctx, ER_STATUS_LIMIT, "transform length %lld is too large", (long long)n);
  double *m = er__malloc((size_t)total * sizeof(double), "DFT scratch");
  if (!m) return ER_STATUS_OUT_OF_MEMORY;
  p->mem = m;
  p->cos_t = m;
  p->sin_t = p->cos_t + mm;
  p->wr = p->sin_t + mm;
  p->wi = p->wr + mm;
  p->br = p->wi + mm;
  p->bi = p->br + mm;
  p->re = p->bi + mm;
  p->im = p->re + nn;
  p->cr = p->im + nn;
  p->ci = p->cr + nn;
  for (int64_t k = 0; k < p->m; k++) {
    double a = 2.0 * PI * (double)k / (double)p->m;
    p->cos_t[k] = cos(a);
    p->sin_t[k] = sin(a);
  }
  if (p->kind == PLAN_BLUESTEIN) {
    /* w[j] = e^{-i pi (j^2 mod 2n) / n}; j^2 mod 2n advances by 2j - 1. */
    int64_t sq = 0;
    for (int64_t j = 0; j < n; j++) {
      if (j > 0) {
        sq += 2 * j - 1;
        sq %= 2 * n;
      }
      double a = PI * (double)sq / (double)n;
      p->cr[j] = cos(a);
      p->ci[j] = -sin(a);
    }
    for (int64_t k = 0; k < p->m; k++) p->br[k] = p->bi[k] = 0.0;
    for (int64_t j = 0; j < n; j++) {
      p->br[j] = p->cr[j];
      p->bi[j] = -p->ci[j];
      if (j > 0) {
        p->br[p->m - j] = p->cr[j];
        p->bi[p->m - j] = -p->ci[j];
      }
    }
    fft_pow2(p, p->br, p->bi, -1);
  }
  return ER_STATUS_OK;
}

static void plan_free(dft_plan *p) { free(p->mem); }

/* In place: (re, im) <- sum_j x[j] e^{sign 2 pi i j k / n}, unnormalized.
 * sign is -1 for the forward transform, +1 for the inverse. */
static void transform(dft_plan *p, int sign) {
  const int64_t n = p->n, m = p->m;
  double *re = p->re, *im = p->im;
  if (n <= 1) return;
  switch (p->kind) {
    case PLAN_POW2: fft_pow2(p, re, im, sign); return;
    case PLAN_DIRECT:
      for (int64_t k = 0; k < n; k++) {
        double sr = 0.0, si = 0.0;
        int64_t idx = 0; /* (j * k) mod n */
        for (int64_t j = 0; j < n; j++) {
          double wr = p->cos_t[idx], wi = sign * p->sin_t[idx];
          sr += re[j] * wr - im[j] * wi;
          si += re[j] * wi + im[j] * wr;
          idx += k;
          if (idx >= n) idx -= n;
        }
        p->wr[k] = sr;
        p->wi[k] = si;
      }
      memcpy(re, p->wr, (size_t)n * sizeof(double));
      memcpy(im, p->wi, (size_t)n * sizeof(double));
      return;
    case PLAN_BLUESTEIN: {
      /* The inverse is the conjugate of the forward transform of the
       * conjugate. */
      const double cs = sign > 0 ? -1.0 : 1.0;
      for (int64_t j = 0; j < m; j++) {
        if (j < n) {
          double xr = re[j], xi = cs * im[j];
          p->wr[j] = xr * p->cr[j] - xi * p->ci[j];
          p->wi[j] = xr * p->ci[j] + xi * p->cr[j];
        } else {
          p->wr[j] = p->wi[j] = 0.0;
        }
      }
      fft_pow2(p, p->wr, p->wi, -1);
      for (int64_t j = 0; j < m; j++) {
        double ar = p->wr[j], ai = p->wi[j];
        p->wr[j] = ar * p->br[j] - ai * p->bi[j];
        p->wi[j] = ar * p->bi[j] + ai * p->br[j];
      }
      fft_pow2(p, p->wr, p->wi, 1);
      for (int64_t k = 0; k < n; k++) {
        double ar = p->wr[k] / (double)m, ai = p->wi[k] / (double)m;
        re[k] = ar * p->cr[k] - ai * p->ci[k];
        im[k] = cs * (ar * p->ci[k] + ai * p->cr[k]);
      }
      return;
    }
  }
}

/* ======================================================================== */
/* DFT (17, 20)                                                              */
/* ======================================================================== */

typedef struct dft_cfg {
  int64_t inverse, onesided;
  int axis;            /* normalized; -1 while unknown */
  bool length_known;
  int64_t length;      /* dft_length */
  int64_t out_len;     /* output size along axis; -1 unknown */
  int64_t out_c;       /* 1 (real, IRFFT) or 2 */
} dft_cfg;

static er_status dft_setup(const er_kctx *ctx, dft_cfg *c) {
  const er_tensor *x = ctx->in[0];
  char a[96];
  ER_CHECK(er__attr_int(ctx, "inverse", 0, &c->inverse));
  ER_CHECK(er__attr_int(ctx, "onesided", 0, &c->onesided));
  if ((c->inverse != 0 && c->inverse != 1) || (c->onesided != 0 && c->onesided != 1))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "inverse (%lld) and onesided (%lld) must be 0 or 1",
                        (long long)c->inverse, (long long)c->onesided);
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  int64_t axis = -2;
  bool axis_known = true;
  if (ctx->node->version < 20) {
    ER_CHECK(er__attr_int(ctx, "axis", 1, &axis));
  } else {
    int64_t v;
    ER_CHECK(scalar_int(ctx, 2, "axis", &axis_known, &v));
    if (axis_known) axis = v;
    else if (!er__in(ctx, 2)) axis_known = true; /* the default, -2 */
    if (er__in(ctx, 2)) {
      static const er_dtype i64[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};
      ER_CHECK(er__require_type(ctx, 2, i64));
    }
  }
  int64_t len = 0;
  ER_CHECK(scalar_int(ctx, 1, "dft_length", &c->length_known, &len));
  c->length = len;
  if (c->length_known && len <= 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "dft_length is %lld; it must be > 0",
                        (long long)len);
  c->axis = -1;
  c->out_c = c->inverse && c->onesided ? 1 : 2;
  c->out_len = -1;
  if (x->rank < 0) return ER_STATUS_OK;
  const int r = x->rank;
  if (r < 2)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "input %s must have rank >= 2 (signal dims, then 1 or 2 components)",
                        er__shape_str(x, a, sizeof a));
  int64_t comp = x->dims[r - 1];
  if (comp >= 0 && comp != 1 && comp != 2)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "input %s: the last dim must be 1 (real) or 2 (complex)",
                        er__shape_str(x, a, sizeof a));
  if (c->inverse && c->onesided && comp == 1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "the inverse one-sided transform (IRFFT) needs complex input; got %s",
                        er__shape_str(x, a, sizeof a));
  if (!axis_known) return ER_STATUS_OK;
  /* Accepted: [-r, -2] and [0, r-2]; the last dim holds the components. */
  if (axis < -r || axis > r - 2 || axis == -1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "axis %lld is out of range [-%d, -2] U [0, %d] for input %s",
                        (long long)axis, r, r - 2, er__shape_str(x, a, sizeof a));
  c->axis = (int)(axis < 0 ? axis + r : axis);
  int64_t n = x->dims[c->axis];
  if (!c->length_known && n >= 0) {
    c->length = c->inverse && c->onesided ? 2 * (n - 1) : n;
    c->length_known = true;
    if (c->length <= 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "input %s gives a transform length of %lld along axis %d; give "
                          "dft_length",
                          er__shape_str(x, a, sizeof a), (long long)c->length, c->axis);
  }
  if (c->length_known) c->out_len = c->onesided && !c->inverse ? c->length / 2 + 1 : c->length;
  return ER_STATUS_OK;
}

static er_status dft_check(er_kctx *ctx) {
  dft_cfg c;
  ER_CHECK(dft_setup(ctx, &c));
  const er_tensor *x = ctx->in[0];
  if (x->rank < 0) {
    er__set_output(ctx, 0, x->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  for (int d = 0; d < x->rank; d++) dims[d] = c.axis >= 0 ? x->dims[d] : -1;
  if (c.axis >= 0) dims[c.axis] = c.out_len;
  dims[x->rank - 1] = c.out_c;
  er__set_output(ctx, 0, x->dtype, x->rank, dims);
  return ER_STATUS_OK;
}

static er_status dft_run(er_kctx *ctx) {
  dft_cfg c;
  ER_CHECK(dft_setup(ctx, &c));
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  const int r = x->rank;
  const int64_t n_in = x->dims[c.axis], comp = x->dims[r - 1], L = c.length;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < c.axis; d++) outer *= x->dims[d];
  for (int d = c.axis + 1; d < r - 1; d++) inner *= x->dims[d];
  dft_plan p;
  ER_CHECK(plan_init(ctx, &p, L));
  const bool irfft = c.inverse && c.onesided;
  const double norm = c.inverse ? 1.0 / (double)L : 1.0;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      /* Gather the line, truncated or zero-padded to L. */
      if (irfft) {
        /* One-sided spectrum: rebuild the full Hermitian one from the
         * first L/2 + 1 bins; the imaginary parts of DC (and of the
         * Nyquist bin for even L) do not contribute, as in numpy's irfft. */
        int64_t half = L / 2;
        for (int64_t k = 0; k < L; k++) p.re[k] = p.im[k] = 0.0;
        for (int64_t k = 0; k <= half && k < n_in; k++) {
          int64_t xi = ((o * n_in + k) * inner + i) * comp;
          double re = er__load_f(x, xi), im = er__load_f(x, xi + 1);
          if (k == 0 || (L % 2 == 0 && k == half)) im = 0.0;
          p.re[k] = re;
          p.im[k] = im;
          if (k > 0 && L - k != k) {
            p.re[L - k] = re;
            p.im[L - k] = -im;
          }
        }
      } else {
        for (int64_t j = 0; j < L; j++) {
          if (j < n_in) {
            int64_t xi = ((o * n_in + j) * inner + i) * comp;
            p.re[j] = er__load_f(x, xi);
            p.im[j] = comp == 2 ? er__load_f(x, xi + 1) : 0.0;
          } else {
            p.re[j] = p.im[j] = 0.0;
          }
        }
      }
      transform(&p, c.inverse ? 1 : -1);
      for (int64_t k = 0; k < c.out_len; k++) {
        int64_t yi = ((o * c.out_len + k) * inner + i) * c.out_c;
        er__store_f(y, yi, p.re[k] * norm);
        if (c.out_c == 2) er__store_f(y, yi + 1, p.im[k] * norm);
      }
    }
  }
  plan_free(&p);
  return ER_STATUS_OK;
}

static const er_op_def op_dft_17 = {
    .name = "DFT", .domain = "", .min_version = 17, .max_version = 17,
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1), .check = dft_check, .run = dft_run,
};

/* 20 moved axis from an attribute to input 2 (default -2). */
static const er_op_def op_dft_20 = {
    .name = "DFT", .domain = "", .min_version = 20, .max_version = 20,
    .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1) | VALUE_IN(2), .check = dft_check, .run = dft_run,
};

/* ======================================================================== */
/* STFT (17)                                                                 */
/* ======================================================================== */

typedef struct stft_cfg {
  int64_t onesided;
  bool known;               /* frame_step and frame_length known */
  int64_t step, frame_len;  /* frame_len -1 while unknown */
  int64_t frames, bins;     /* -1 while unknown */
} stft_cfg;

static er_status stft_setup(const er_kctx *ctx, stft_cfg *c) {
  const er_tensor *x = ctx->in[0], *win = er__in(ctx, 2);
  char a[96];
  bool step_known, len_known;
  int64_t v = 0;
  ER_CHECK(er__attr_int(ctx, "onesided", 1, &c->onesided));
  if (c->onesided != 0 && c->onesided != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "onesided is %lld; it must be 0 or 1",
                        (long long)c->onesided);
  ER_CHECK(er__require_type(ctx, 0, er__types_float));
  ER_CHECK(er__require_rank(ctx, 0, 3, 3));
  if (win) {
    ER_CHECK(er__require_same_type(ctx, 0, 2));
    ER_CHECK(er__require_rank(ctx, 2, 1, 1));
  }
  int64_t comp = x->rank == 3 ? x->dims[2] : -1;
  if (comp >= 0 && comp != 1 && comp != 2)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "signal %s must be [batch, length, 1] (real) or [batch, length, 2] "
                        "(complex)",
                        er__shape_str(x, a, sizeof a));
  ER_CHECK(scalar_int(ctx, 1, "frame_step", &step_known, &v));
  if (!er__in(ctx, 1))
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "frame_step (input 1) is required");
  c->step = v;
  if (step_known && v <= 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "frame_step is %lld; it must be > 0",
                        (long long)v);
  ER_CHECK(scalar_int(ctx, 3, "frame_length", &len_known, &v));
  int64_t wlen = win && win->rank == 1 ? win->dims[0] : -1;
  int64_t slen = x->rank == 3 ? x->dims[1] : -1;
  c->frame_len = -1;
  if (len_known) {
    c->frame_len = v;
    if (wlen >= 0 && wlen != v)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "window has %lld values but frame_length is %lld; they must match",
                          (long long)wlen, (long long)v);
  } else if (!er__in(ctx, 3)) {
    c->frame_len = win ? wlen : slen;
  }
  if (c->frame_len == 0 || c->frame_len < -1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "frame_length is %lld; it must be > 0",
                        (long long)c->frame_len);
  if (c->frame_len > 0 && slen >= 0 && c->frame_len > slen)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "frame_length %lld is longer than the signal %s",
                        (long long)c->frame_len, er__shape_str(x, a, sizeof a));
  c->known = step_known && c->frame_len > 0;
  c->frames = c->known && slen >= 0 ? (slen - c->frame_len) / c->step + 1 : -1;
  c->bins = c->frame_len > 0 ? (c->onesided ? c->frame_len / 2 + 1 : c->frame_len) : -1;
  return ER_STATUS_OK;
}

static er_status stft_check(er_kctx *ctx) {
  stft_cfg c;
  ER_CHECK(stft_setup(ctx, &c));
  const er_tensor *x = ctx->in[0];
  const int64_t dims[4] = {x->rank == 3 ? x->dims[0] : -1, c.frames, c.bins, 2};
  er__set_output(ctx, 0, x->dtype, 4, dims);
  return ER_STATUS_OK;
}

static er_status stft_run(er_kctx *ctx) {
  stft_cfg c;
  ER_CHECK(stft_setup(ctx, &c));
  const er_tensor *x = ctx->in[0], *win = er__in(ctx, 2);
  er_tensor *y = ctx->out[0];
  const int64_t B = x->dims[0], S = x->dims[1], comp = x->dims[2], FL = c.frame_len;
  dft_plan p;
  ER_CHECK(plan_init(ctx, &p, FL));
  for (int64_t b = 0; b < B; b++) {
    for (int64_t f = 0; f < c.frames; f++) {
      for (int64_t j = 0; j < FL; j++) {
        int64_t xi = (b * S + f * c.step + j) * comp;
        double w = win ? er__load_f(win, j) : 1.0;
        p.re[j] = er__load_f(x, xi) * w;
        p.im[j] = comp == 2 ? er__load_f(x, xi + 1) * w : 0.0;
      }
      transform(&p, -1);
      for (int64_t k = 0; k < c.bins; k++) {
        int64_t yi = ((b * c.frames + f) * c.bins + k) * 2;
        er__store_f(y, yi, p.re[k]);
        er__store_f(y, yi + 1, p.im[k]);
      }
    }
  }
  plan_free(&p);
  return ER_STATUS_OK;
}

static const er_op_def op_stft = {
    .name = "STFT", .domain = "", .min_version = 17, .max_version = 17,
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(1) | VALUE_IN(3), .check = stft_check, .run = stft_run,
};

/* ======================================================================== */
/* HannWindow, HammingWindow, BlackmanWindow (17)                            */
/* ======================================================================== */

/* Types output_datatype may name (T2 of the window ops, T3 of
 * MelWeightMatrix). */
static bool window_out_type(int64_t t) {
  switch (t) {
    case ER_DTYPE_UINT8: case ER_DTYPE_UINT16: case ER_DTYPE_UINT32: case ER_DTYPE_UINT64:
    case ER_DTYPE_INT8: case ER_DTYPE_INT16: case ER_DTYPE_INT32: case ER_DTYPE_INT64:
    case ER_DTYPE_FLOAT16: case ER_DTYPE_FLOAT: case ER_DTYPE_DOUBLE: case ER_DTYPE_BFLOAT16:
      return true;
    default: return false;
  }
}

static er_status out_datatype(const er_kctx *ctx, er_dtype *out) {
  int64_t t;
  ER_CHECK(er__attr_int(ctx, "output_datatype", ER_DTYPE_FLOAT, &t));
  if (!window_out_type(t))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "output_datatype %lld is not a numeric (non-bool) tensor type",
                        (long long)t);
  *out = (er_dtype)t;
  return ER_STATUS_OK;
}

typedef enum window_kind { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN } window_kind;

static er_status window_setup(const er_kctx *ctx, er_dtype *dt, int64_t *periodic, bool *known,
                              int64_t *size) {
  ER_CHECK(out_datatype(ctx, dt));
  ER_CHECK(er__attr_int(ctx, "periodic", 1, periodic));
  if (*periodic != 0 && *periodic != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "periodic is %lld; it must be 0 or 1",
                        (long long)*periodic);
  ER_CHECK(er__require_type(ctx, 0, types_index));
  ER_CHECK(scalar_int(ctx, 0, "size", known, size));
  if (*known && *size < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "size is %lld; it must be >= 0",
                        (long long)*size);
  return ER_STATUS_OK;
}

static er_status window_check(er_kctx *ctx) {
  er_dtype dt = ER_DTYPE_UNDEFINED;
  int64_t periodic, size = -1;
  bool known;
  ER_CHECK(window_setup(ctx, &dt, &periodic, &known, &size));
  er__set_output(ctx, 0, dt, 1, &size);
  return ER_STATUS_OK;
}

static er_status window_run(er_kctx *ctx, window_kind kind) {
  er_dtype dt;
  int64_t periodic, size = 0;
  bool known;
  ER_CHECK(window_setup(ctx, &dt, &periodic, &known, &size));
  er_tensor *y = ctx->out[0];
  /* The period: size for a periodic window, size - 1 for a symmetric one. A
   * symmetric window of one point is the single value 1 (the formula would
   * divide by zero). */
  const double N = (double)(periodic ? size : size - 1);
  for (int64_t i = 0; i < size; i++) {
    double v;
    if (N == 0.0) {
      v = 1.0;
    } else {
      double a = 2.0 * PI * (double)i / N;
      switch (kind) {
        case WIN_HANN: v = 0.5 - 0.5 * cos(a); break;
        /* The ONNX definition uses alpha = 25/46, the exact-cancellation
         * value, not the rounded 0.54 of some textbooks. */
        case WIN_HAMMING: v = 25.0 / 46.0 - (21.0 / 46.0) * cos(a); break;
        default: v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2.0 * a); break;
      }
    }
    er__store_f(y, i, v);
  }
  return ER_STATUS_OK;
}

static er_status hann_run(er_kctx *ctx) { return window_run(ctx, WIN_HANN); }
static er_status hamming_run(er_kctx *ctx) { return window_run(ctx, WIN_HAMMING); }
static er_status blackman_run(er_kctx *ctx) { return window_run(ctx, WIN_BLACKMAN); }

#define WINDOW_OP(VAR, NAME, RUN)                                               \
  static const er_op_def VAR = {                                                \
      .name = NAME, .domain = "", .min_version = 17, .max_version = 17,         \
      .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,    \
      .value_inputs = VALUE_IN(0), .check = window_check, .run = RUN,          \
  };
WINDOW_OP(op_hann, "HannWindow", hann_run)
WINDOW_OP(op_hamming, "HammingWindow", hamming_run)
WINDOW_OP(op_blackman, "BlackmanWindow", blackman_run)

/* ======================================================================== */
/* MelWeightMatrix (17)                                                      */
/* ======================================================================== */

typedef struct mel_cfg {
  er_dtype dt;
  bool known;
  int64_t bins, dft_len, rate;
} mel_cfg;

static er_status mel_setup(const er_kctx *ctx, mel_cfg *c) {
  bool k0, k1, k2;
  c->bins = c->dft_len = c->rate = -1;
  ER_CHECK(out_datatype(ctx, &c->dt));
  for (int i = 0; i < 3; i++) ER_CHECK(er__require_type(ctx, i, types_index));
  ER_CHECK(er__require_type(ctx, 3, er__types_float));
  ER_CHECK(er__require_type(ctx, 4, er__types_float));
  ER_CHECK(scalar_int(ctx, 0, "num_mel_bins", &k0, &c->bins));
  ER_CHECK(scalar_int(ctx, 1, "dft_length", &k1, &c->dft_len));
  ER_CHECK(scalar_int(ctx, 2, "sample_rate", &k2, &c->rate));
  if ((k0 && c->bins <= 0) || (k1 && c->dft_len <= 0) || (k2 && c->rate <= 0))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "num_mel_bins (%lld), dft_length (%lld) and sample_rate (%lld) must be "
                        "> 0",
                        (long long)c->bins, (long long)c->dft_len, (long long)c->rate);
  if (!k0) c->bins = -1;
  if (!k1) c->dft_len = -1;
  c->known = k0 && k1 && k2;
  return ER_STATUS_OK;
}

static er_status mel_check(er_kctx *ctx) {
  mel_cfg c;
  ER_CHECK(mel_setup(ctx, &c));
  const int64_t dims[2] = {c.dft_len >= 0 ? c.dft_len / 2 + 1 : -1, c.bins};
  er__set_output(ctx, 0, c.dt, 2, dims);
  return ER_STATUS_OK;
}

static er_status mel_run(er_kctx *ctx) {
  mel_cfg c;
  ER_CHECK(mel_setup(ctx, &c));
  er_tensor *y = ctx->out[0];
  const int64_t nspec = c.dft_len / 2 + 1, M = c.bins;
  const double lo = er__load_f(ctx->in[3], 0), hi = er__load_f(ctx->in[4], 0);
  /* Band edges: num_mel_bins + 2 points spread over the mel range with a
   * step of range / (num_mel_bins + 2), as the ONNX definition does, then
   * mapped back to hertz and to spectrogram bin indices. */
  const double lo_mel = 2595.0 * log10(1.0 + lo / 700.0);
  const double hi_mel = 2595.0 * log10(1.0 + hi / 700.0);
  const double step = (hi_mel - lo_mel) / (double)(M + 2);
  if ((uint64_t)M > SIZE_MAX / sizeof(int64_t) - 2)
    return er__op_error(ctx, ER_STATUS_LIMIT, "num_mel_bins %lld is too large", (long long)M);
  int64_t *edge = er__malloc((size_t)(M + 2) * sizeof(int64_t), "MelWeightMatrix edges");
  if (!edge) return ER_STATUS_OUT_OF_MEMORY;
  er_status st = ER_STATUS_OK;
  for (int64_t i = 0; i < M + 2; i++) {
    double hz = 700.0 * (pow(10.0, ((double)i * step + lo_mel) / 2595.0) - 1.0);
    double bin = floor((double)(c.dft_len + 1) * hz / (double)c.rate);
    if (!(bin >= 0.0 && bin < (double)nspec)) {
      st = er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                        "band edge %lld (%g Hz) falls on spectrogram bin %g, outside [0, %lld): "
                        "lower_edge_hertz %g and upper_edge_hertz %g must lie in [0, "
                        "sample_rate / 2]",
                        (long long)i, hz, bin, (long long)nspec, lo, hi);
      break;
    }
    edge[i] = (int64_t)bin;
  }
  for (int64_t m = 0; m < M && st == ER_STATUS_OK; m++) {
    int64_t left = edge[m], center = edge[m + 1], right = edge[m + 2];
    /* Rising edge (a degenerate one puts 1 at the center), then falling. */
    if (center == left) {
      er__store_f(y, center * M + m, 1.0);
    } else {
      for (int64_t j = left; j <= center; j++)
        er__store_f(y, j * M + m, (double)(j - left) / (double)(center - left));
    }
    for (int64_t j = center; j < right; j++)
      er__store_f(y, j * M + m, (double)(right - j) / (double)(right - center));
  }
  free(edge);
  return st;
}

static const er_op_def op_mel = {
    .name = "MelWeightMatrix", .domain = "", .min_version = 17, .max_version = 17,
    .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .value_inputs = VALUE_IN(0) | VALUE_IN(1), .check = mel_check, .run = mel_run,
};

/* ======================================================================== */
/* BitCast (26)                                                              */
/* ======================================================================== */

/* Bits per element of the ONNX type; 0 for types edgerun cannot hold. */
static int type_bits(er_dtype t) {
  if (t == ER_DTYPE_INT4 || t == ER_DTYPE_UINT4) return 4;
  if (!er__dtype_is_numeric(t)) return 0;
  return (int)er_dtype_size(t) * 8;
}

static er_status bitcast_check(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  int64_t to;
  ER_CHECK(er__attr_int(ctx, "to", 0, &to));
  if (!er__node_attr(ctx->node, "to"))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'to' is required");
  if (to <= 0 || to > ER_DTYPE_FLOAT4E2M1 || to == ER_DTYPE_STRING)
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED,
                        "to = %lld is not a tensor type edgerun knows (string and types newer "
                        "than float4e2m1 are not supported)",
                        (long long)to);
  if (type_bits((er_dtype)to) == 0)
    return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "BitCast to %s is not supported",
                        er_dtype_name((er_dtype)to));
  if (x->dtype != ER_DTYPE_UNDEFINED) {
    if (type_bits(x->dtype) == 0)
      return er__op_error(ctx, ER_STATUS_UNSUPPORTED, "BitCast from %s is not supported",
                          er_dtype_name(x->dtype));
    if (type_bits(x->dtype) != type_bits((er_dtype)to))
      return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH,
                          "%s (%d bits) and %s (%d bits) differ in width; BitCast needs equal "
                          "widths",
                          er_dtype_name(x->dtype), type_bits(x->dtype),
                          er_dtype_name((er_dtype)to), type_bits((er_dtype)to));
  }
  er__set_output(ctx, 0, (er_dtype)to, x->rank, x->dims);
  return ER_STATUS_OK;
}

static er_status bitcast_run(er_kctx *ctx) {
  const er_tensor *x = ctx->in[0];
  er_tensor *y = ctx->out[0];
  const int64_t n = er__count(x);
  const er_dtype from = x->dtype, to = y->dtype;
  const uint8_t *src = x->data;
  uint8_t *dst = y->data;
  if (from == ER_DTYPE_INT4 || from == ER_DTYPE_UINT4) {
    /* 4-bit values sit one per byte, int4 sign-extended: move the nibble. */
    for (int64_t i = 0; i < n; i++) {
      uint8_t nib = src[i] & 0xf;
      dst[i] = to == ER_DTYPE_INT4 ? (uint8_t)(int8_t)((nib ^ 8) - 8) : nib;
    }
  } else if (to == ER_DTYPE_BOOL) {
    /* Every other kernel relies on bools being 0 or 1, so nonzero bytes
     * become 1 (the only lossy case). */
    for (int64_t i = 0; i < n; i++) dst[i] = src[i] != 0;
  } else {
    memcpy(dst, src, (size_t)n * er_dtype_size(from));
  }
  return ER_STATUS_OK;
}

static const er_op_def op_bitcast = {
    .name = "BitCast", .domain = "", .min_version = 26, .max_version = 26,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .check = bitcast_check, .run = bitcast_run,
};

const er_op_def *const er__ops_signal[] = {
    &op_dft_17,
    &op_dft_20,
    &op_stft,
    &op_hann,
    &op_hamming,
    &op_blackman,
    &op_mel,
    &op_bitcast,
    NULL,
};
