/* calib.h - streaming statistics of float tensors and the range methods
 * that turn them into quantization ranges.
 *
 * One er_qstat per observed tensor holds its running minimum and maximum and
 * a histogram of fixed bin count over a symmetric range [-R, R] that doubles
 * (merging neighbouring bins, which keeps every count exact) whenever a value
 * falls outside it. Memory per tensor is fixed (ER_QHIST_BINS counters)
 * however many samples pass through, which is what keeps calibration flat. */
#ifndef ER_QUANT_CALIB_H
#define ER_QUANT_CALIB_H

#include "edgerun-quant.h"

#include "core/core.h"

/* Histogram resolution: bins over [-R, R]. 4096 gives 2048 bins to each
 * sign, finer than the 128 to 2048 bins ONNX Runtime's calibrators use, at
 * 32 KiB per tensor. */
#define ER_QHIST_BINS 4096

typedef struct er_qstat {
  double min, max;           /* over every element seen */
  uint64_t count;            /* elements seen */
  uint64_t zeros;            /* elements exactly 0 (ReLU outputs, padding) */
  double range;              /* R: the histogram covers [-R, R]; 0 = empty */
  uint64_t *hist;            /* [ER_QHIST_BINS]; NULL when not collected */
} er_qstat;

/* Sets up an empty statistic; with `histogram` the bins are allocated
 * (ER_QHIST_BINS counters, freed by er__qstat_free). */
er_status er__qstat_init(er_qstat *s, bool histogram);
void er__qstat_free(er_qstat *s);

/* Adds n float values. NaN or infinity is refused with INVALID_TENSOR (a
 * range cannot be calibrated from them); `what` names the tensor in the
 * message. */
er_status er__qstat_add(er_qstat *s, const float *x, int64_t n, const char *what);

/* The calibrated range [*lo, *hi] of the tensor under a method. `symmetric`
 * says the range will be used as [-t, t] (methods then work on |x|);
 * `levels` is the number of quantization levels the range is split into
 * (255 for 8 bits), used by mse and entropy. `percentile` (e.g. 99.999) is
 * used by ER_CALIB_PERCENTILE. The range always contains 0. */
void er__qstat_range(const er_qstat *s, er_calib_method method, double percentile, bool symmetric,
                     int levels, double *lo, double *hi);

const char *er__calib_method_name(er_calib_method m);

#endif /* ER_QUANT_CALIB_H */
