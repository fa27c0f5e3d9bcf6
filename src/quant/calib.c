/* calib.c - streaming tensor statistics and range methods (minmax,
 * percentile, entropy, mse). See calib.h for the histogram's design. */
#include "quant/calib.h"

#include <math.h>
#include <stdlib.h>

const char *er__calib_method_name(er_calib_method m) {
  switch (m) {
    case ER_CALIB_MINMAX: return "minmax";
    case ER_CALIB_PERCENTILE: return "percentile";
    case ER_CALIB_ENTROPY: return "entropy";
    case ER_CALIB_MSE: return "mse";
  }
  return "?";
}

er_status er__qstat_init(er_qstat *s, bool histogram) {
  memset(s, 0, sizeof *s);
  s->min = INFINITY;
  s->max = -INFINITY;
  if (histogram) {
    s->hist = calloc(ER_QHIST_BINS, sizeof *s->hist);
    if (!s->hist) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a calibration histogram");
  }
  return ER_STATUS_OK;
}

void er__qstat_free(er_qstat *s) {
  free(s->hist);
  s->hist = NULL;
}

/* Doubles the histogram's range: bin i of [-R, R] lies exactly inside bin
 * B/4 + i/2 of [-2R, 2R], so the merge is exact. */
static er_status grow(er_qstat *s, double need) {
  const int B = ER_QHIST_BINS;
  uint64_t *tmp = NULL;
  while (s->range < need) {
    if (!tmp) {
      tmp = malloc(B * sizeof *tmp);
      if (!tmp) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory growing a histogram");
    }
    memset(tmp, 0, B * sizeof *tmp);
    for (int i = 0; i < B; i++) tmp[B / 4 + i / 2] += s->hist[i];
    memcpy(s->hist, tmp, B * sizeof *tmp);
    s->range *= 2;
  }
  free(tmp);
  return ER_STATUS_OK;
}

er_status er__qstat_add(er_qstat *s, const float *x, int64_t n, const char *what) {
  double lo = INFINITY, hi = -INFINITY;
  uint64_t zeros = 0;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    zeros += v == 0;
    if (!isfinite(v))
      return er__error(ER_STATUS_INVALID_TENSOR,
                       "tensor '%s' holds %s at element %lld during calibration; a quantization "
                       "range cannot be calibrated from it (check the model and the data)",
                       what, isnan(v) ? "NaN" : "infinity", (long long)i);
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (n == 0) return ER_STATUS_OK;
  if (lo < s->min) s->min = lo;
  if (hi > s->max) s->max = hi;
  uint64_t before = s->count;
  s->count += (uint64_t)n;
  s->zeros += zeros;
  if (!s->hist) return ER_STATUS_OK;
  const int B = ER_QHIST_BINS;
  double amax = fmax(fabs(lo), fabs(hi));
  if (s->range == 0) {
    if (amax == 0) {
      /* All zeros so far: they are counted in the zero bin once a range
       * exists (see below). */
      return ER_STATUS_OK;
    }
    s->range = amax;
    /* Earlier all-zero batches: their elements sit in the bin holding 0. */
    s->hist[B / 2] += before;
  } else if (amax > s->range) {
    ER_CHECK(grow(s, amax));
  }
  double scale = B / (2 * s->range);
  for (int64_t i = 0; i < n; i++) {
    int64_t b = (int64_t)((x[i] + s->range) * scale);
    if (b < 0) b = 0;
    if (b >= B) b = B - 1;
    s->hist[b]++;
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Range methods                                                             */
/* ======================================================================== */

/* |x| histogram folded from the signed one: bin k covers [k w, (k+1) w)
 * with w = R / (B/2). */
static void fold(const er_qstat *s, double *a) {
  const int B = ER_QHIST_BINS, H = B / 2;
  for (int k = 0; k < H; k++) a[k] = (double)s->hist[H + k] + (double)s->hist[H - 1 - k];
}

static double percentile_abs(const er_qstat *s, double p) {
  const int H = ER_QHIST_BINS / 2;
  double a[ER_QHIST_BINS / 2], total = 0, run = 0;
  fold(s, a);
  for (int k = 0; k < H; k++) total += a[k];
  double w = s->range / H;
  for (int k = 0; k < H; k++) {
    run += a[k];
    if (run >= total * p) return (k + 1) * w;
  }
  return s->range;
}

/* Signed quantile q in [0, 1]: the edge of the first bin where the
 * cumulative count reaches q (lower edge for the left tail, upper for the
 * right). */
static double quantile(const er_qstat *s, double q, bool upper) {
  const int B = ER_QHIST_BINS;
  double total = 0, run = 0, w = 2 * s->range / B;
  for (int i = 0; i < B; i++) total += (double)s->hist[i];
  for (int i = 0; i < B; i++) {
    run += (double)s->hist[i];
    if (run >= total * q) return -s->range + (upper ? i + 1 : i) * w;
  }
  return s->range;
}

/* KL divergence threshold search of TensorRT (Migacz, GTC 2017) on the |x|
 * histogram with `qbins` quantized bins. Candidates step by 8 bins, which
 * changes the threshold by at most 0.4% of the range and keeps the search
 * at a few hundred thousand operations per tensor. */
static double entropy_threshold(const er_qstat *s, int qbins) {
  const int H = ER_QHIST_BINS / 2;
  double a[ER_QHIST_BINS / 2], p[ER_QHIST_BINS / 2], q[ER_QHIST_BINS / 2];
  fold(s, a);
  /* Exact zeros (a ReLU's negative half) are represented exactly by any
   * range; left in, their spike dominates the divergence and pulls the
   * threshold far below the data's real tail. */
  a[0] -= (double)s->zeros;
  if (a[0] < 0) a[0] = 0;
  double w = s->range / H, best_kl = INFINITY, best_t = s->range;
  int last = H;
  while (last > qbins && a[last - 1] == 0) last--;
  if (last <= qbins) return last * w;
  for (int i = qbins; i <= last; i += 8) {
    double outliers = 0;
    for (int k = i; k < H; k++) outliers += a[k];
    for (int k = 0; k < i; k++) p[k] = a[k];
    p[i - 1] += outliers;
    /* Quantize a[0..i) into qbins bins, then spread each back over its
     * non-empty source bins. */
    double merged = (double)i / qbins;
    for (int j = 0; j < qbins; j++) {
      int start = (int)(j * merged), end = (int)((j + 1) * merged);
      if (j == qbins - 1) end = i;
      double sum = 0;
      int nonzero = 0;
      for (int k = start; k < end; k++) {
        sum += a[k];
        if (a[k] != 0) nonzero++;
      }
      for (int k = start; k < end; k++) q[k] = (a[k] != 0 && nonzero) ? sum / nonzero : 0;
    }
    double psum = 0, qsum = 0;
    for (int k = 0; k < i; k++) {
      psum += p[k];
      qsum += q[k];
    }
    if (psum == 0 || qsum == 0) continue;
    double kl = 0;
    for (int k = 0; k < i; k++) {
      if (p[k] == 0) continue;
      double pk = p[k] / psum;
      /* An empty q bin where p has mass: smooth it with a small epsilon, as
       * the reference implementations do, instead of an infinite cost. */
      double qk = q[k] > 0 ? q[k] / qsum : 1e-12;
      kl += pk * log(pk / qk);
    }
    if (kl < best_kl) {
      best_kl = kl;
      best_t = (i + 0.5) * w;
    }
  }
  return best_t;
}

/* Expected squared error of quantizing the histogram's values to `levels`
 * steps over [lo, hi]: rounding noise (step^2 / 12) inside, clipping error
 * outside. */
static double mse_cost(const er_qstat *s, double lo, double hi, int levels) {
  const int B = ER_QHIST_BINS;
  double w = 2 * s->range / B, step = (hi - lo) / levels, cost = 0;
  double noise = step * step / 12;
  for (int i = 0; i < B; i++) {
    if (!s->hist[i]) continue;
    double c = -s->range + (i + 0.5) * w, e;
    if (c < lo) e = (lo - c) * (lo - c);
    else if (c > hi) e = (c - hi) * (c - hi);
    else e = noise;
    cost += (double)s->hist[i] * e;
  }
  return cost;
}

void er__qstat_range(const er_qstat *s, er_calib_method method, double percentile, bool symmetric,
                     int levels, double *lo_out, double *hi_out) {
  double lo = s->count ? s->min : 0, hi = s->count ? s->max : 0;
  double amax = fmax(fabs(lo), fabs(hi));
  bool have_hist = s->hist && s->range > 0;
  if (method != ER_CALIB_MINMAX && have_hist) {
    if (method == ER_CALIB_PERCENTILE) {
      double p = percentile / 100.0;
      if (symmetric) {
        double t = fmin(percentile_abs(s, p), amax);
        lo = -t;
        hi = t;
      } else {
        double cut = (1.0 - p) / 2;
        lo = fmax(quantile(s, cut, false), s->min);
        hi = fmin(quantile(s, 1.0 - cut, true), s->max);
      }
    } else if (method == ER_CALIB_ENTROPY) {
      /* A one-sided (e.g. post-ReLU) tensor in an asymmetric range spends
       * every level on [0, t]; a symmetric range gives each side half. */
      bool one_sided = !symmetric && (lo >= 0 || hi <= 0);
      double t = fmin(entropy_threshold(s, one_sided ? levels : levels / 2 + 1), amax);
      if (symmetric) {
        lo = -t;
        hi = t;
      } else {
        lo = fmax(lo, -t);
        hi = fmin(hi, t);
      }
    } else if (method == ER_CALIB_MSE) {
      /* Shrink the observed range by a factor alpha in (0, 1] and keep the
       * alpha whose quantization error is least. */
      double best = INFINITY, blo = lo, bhi = hi;
      for (int k = 200; k >= 10; k--) {
        double alpha = k / 200.0;
        double l = symmetric ? -alpha * amax : alpha * lo, h = symmetric ? alpha * amax : alpha * hi;
        double cost = mse_cost(s, l, h, levels);
        if (cost < best) {
          best = cost;
          blo = l;
          bhi = h;
        }
      }
      lo = blo;
      hi = bhi;
    }
  }
  if (symmetric) {
    double t = fmax(fabs(lo), fabs(hi));
    lo = -t;
    hi = t;
  }
  /* Zero must be exactly representable (zero padding, ReLU outputs). */
  if (lo > 0) lo = 0;
  if (hi < 0) hi = 0;
  *lo_out = lo;
  *hi_out = hi;
}
