/* compare.h - running a float model and a quantized one on the same samples
 * and measuring how far apart they are: at the outputs (SQNR, cosine, max
 * abs error, top-1 agreement, accuracy against labels) and, optionally, at
 * every intermediate tensor the two models share.
 *
 * Tensors are matched by name. Where the quantized model quantizes a tensor
 * T (QuantizeLinear(T) -> DequantizeLinear, whoever wrote it), T is
 * compared with what the quantized model's consumers read: that
 * DequantizeLinear's output. Metrics accumulate over samples in a few
 * doubles per tensor, plus per-sample SQNR for the first ER_QCMP_MAX_SAMPLES
 * samples (the analysis heatmap), so memory does not grow with the set. */
#ifndef ER_QUANT_COMPARE_H
#define ER_QUANT_COMPARE_H

#include "quant/dataset.h"

/* Samples whose per-sample metrics are kept for the heatmap. */
#define ER_QCMP_MAX_SAMPLES 64

typedef struct er_qmetric {
  double sf2, se2, sfq, sq2;  /* sums of f^2, (f-q)^2, f*q, q^2 */
  double max_abs;             /* largest |f - q| */
  uint64_t n;                 /* elements */
} er_qmetric;

double er__qmetric_sqnr(const er_qmetric *m);    /* dB; +inf when exact */
double er__qmetric_cosine(const er_qmetric *m);  /* 1 when both are zero */
/* Relative RMS error ||f - q|| / ||f|| (0 when exact). */
double er__qmetric_rel_error(const er_qmetric *m);
void er__qmetric_add(er_qmetric *m, const float *f, const float *q, int64_t n);

typedef struct er_qcmp_tensor {
  char *name;                 /* in the float model (copies owned here) */
  char *op_type;              /* producer in the float model ("" = input) */
  char *node;                 /* producer's node name */
  int32_t order;              /* producer's node index (topological rank) */
  bool is_output;             /* a graph output */
  bool quantized;             /* the quantized model quantizes it */
  int32_t fid, qid;           /* value ids in the float / quantized graph */
  er_qmetric m;
  float sample_sqnr[ER_QCMP_MAX_SAMPLES];  /* dB per sample; NaN = none */
  /* Filled by er__qcompare_attribute: the lowest SQNR among the producer's
   * compared inputs (+inf when they are exact or not compared), and the
   * SQNR of the noise this tensor's producer adds by itself: relative noise
   * powers subtract (10^(-SQNR/10) of the output minus that of the worst
   * input), so a layer fed clean inputs and one fed noisy inputs are ranked
   * on what each adds. +inf when it adds nothing. */
  double input_sqnr, local_sqnr;
} er_qcmp_tensor;

typedef struct er_qcompare {
  er_qcmp_tensor *tensors;    /* [n_tensors]: graph outputs first, then
                                 intermediates in node order */
  size_t n_tensors;
  int64_t samples;            /* samples compared */
  int64_t rows;               /* classification rows (samples x outputs
                                 that look like class scores) */
  int64_t agree;              /* rows where both models' argmax agree */
  /* With labels (the first graph output's rows): */
  int64_t labelled, f_top1, q_top1, f_top5, q_top5;
  bool have_float;            /* a float model was compared */
} er_qcompare;

typedef struct er_qcompare_options {
  bool layers;                /* compare intermediate tensors too */
  const int64_t *labels;      /* [n_labels] or NULL; indexed by sample */
  int64_t n_labels;
  int threads;
  bool progress;              /* progress bar on stderr */
  const char *what;           /* progress text, e.g. "evaluating" */
} er_qcompare_options;

/* Runs both models over the whole data set (rewound first). `fm` may be
 * NULL for an accuracy-only run of `qm`. The data set must have been opened
 * for qm's inputs (the float model must have the same input names). */
er_status er__qcompare_run(const er_model *fm, const er_model *qm, er_qdata *data,
                           const er_qcompare_options *opts, er_qcompare **out);
void er__qcompare_free(er_qcompare *c);

/* Works out, with the float graph the comparison ran on, how much error
 * each producer adds on top of what its inputs already carried, so layers
 * can be ranked by sensitivity rather than by accumulated error. */
void er__qcompare_attribute(er_qcompare *c, const er_graph *fg);

/* Finds, in quantized graph `g`, what its consumers read for the value
 * named `name`: the DequantizeLinear output of a QuantizeLinear(name) pair,
 * else the value itself; -1 when the graph has neither. *quantized tells
 * which. */
int32_t er__qcmp_find(const er_graph *g, const char *name, bool *quantized);

/* Draws "label [####      ] done/total" on stderr when it is a terminal. */
void er__progress(const char *label, int64_t done, int64_t total);

#endif /* ER_QUANT_COMPARE_H */
