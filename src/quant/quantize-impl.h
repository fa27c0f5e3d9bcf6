/* quantize-impl.h - what the files of edgerun quantize share (quantize.c:
 * options, the plan, sizes, the report and the pipeline; quantize-emit.c:
 * weight quantization and the QDQ model; quantize-measure.c: calibration
 * and measuring): the plan and the helpers more than one uses. */
#ifndef ER_QUANT_QUANTIZE_IMPL_H
#define ER_QUANT_QUANTIZE_IMPL_H

#include "quant/quantize.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "onnx/onnx-write.h"
#include "quant/prepare.h"
#include "quant/qgraph.h"
#include "runtime/runtime.h"

/* A node the quantizer considers. Input positions refer to the node. */
typedef struct qcand {
  int32_t node;                 /* index in the prepared graph */
  const char *name, *op;
  int act[2], n_act;            /* activation inputs to quantize */
  int w, b;                     /* weight and bias inputs, -1 = none */
  int w_axis;                   /* per-channel axis, -1 = per-tensor */
  bool natural_axis;            /* w_axis is the output-channel axis */
  bool int4;                    /* block-wise int4 weight */
  int block_axis;               /* int4: the K axis */
  const char *why_float;        /* set: never quantized, and why */
} qcand;

/* An activation tensor to quantize. */
typedef struct qten {
  int32_t value;                /* id in the prepared graph */
  const char *name;
  er_qstat st;
  double lo, hi;
  float scale;
  int32_t zp;
  /* Per-channel means for bias correction: sums along ch_axis (the axis
   * the first quantized reader contracts: 1 for Conv's NCHW input and
   * Gemm's A). ch_n < 0 when shapes varied between samples. */
  int ch_axis;                  /* -1 = not collected */
  int64_t ch_n;                 /* channels; 0 = not seen yet */
  double *ch_sum;               /* [ch_n] */
  uint64_t ch_count;            /* elements summed per channel */
} qten;

typedef struct qplan {
  er_quant_options o;
  struct er_model *mf;          /* the prepared float model */
  uint8_t *prep;                /* its bytes */
  size_t prep_len;
  qcand *c;
  size_t n_c;
  qten *t;
  size_t n_t;
  int32_t *t_of;                /* [n_values] value id -> qten, -1 */
  er_dtype act_dtype;           /* uint8 / int8; UNDEFINED = float */
  /* Graph outputs a quantized layer produces are calibrated too; er__qz_build()
   * puts Q -> DQ on those out_qdq selects (chosen by measuring, see
   * er__qz_choose_outputs). */
  size_t n_out_t;
  bool *out_qdq;                /* [n_values] Q -> DQ on this graph output */
} qplan;

/* A quantized weight: where its values and scales are, so bias work can
 * dequantize it. Pointers are borrowed from the model being built. */
typedef struct wquant {
  const er_tensor *w;           /* the float weight */
  const er_tensor *q;           /* int8 or int4 values, W's shape */
  const float *scales;          /* int8: [n_ch] per channel (1 = tensor) */
  int64_t n_ch;
  int axis;                     /* int8 per-channel axis, -1 = tensor */
  const er_tensor *blocks;      /* int4: the block scale tensor */
  int block_axis, block_size;
} wquant;

typedef struct evalctx {
  qplan *p;
  const er_model *fm;           /* float reference */
  er_qdata *data;
  const int64_t *labels;
  int64_t n_labels;
} evalctx;

/* Adds a tensor's per-channel sums along t->ch_axis. */
er_status er__qz_add_channel_sums(qten *t, const er_tensor *x);

er_status er__qz_calibrate(qplan *p, er_qdata *data, int64_t *samples_out);

/* Scale and zero point of every calibrated tensor. */
void er__qz_compute_params(qplan *p);

/* Bias correction (Nagel et al., "Data-Free Quantization", 2019): weight
 * rounding shifts each output's mean by sum_k dW[m,k] * E[x_k]; subtracting
 * that from the bias removes the shift. corr[m] receives it for the M
 * output channels; false when the input means are not known. */
bool er__qz_bias_correction(const er_node *n, const wquant *wq, const qten *t, double *corr, int64_t M);

/* Builds the QDQ model with the candidates for which quant[i] is true; the
 * serialized model is appended to `out`. */
er_status er__qz_build(qplan *p, const bool *quant, er_pbw *out, er_qreport *rep);

/* Builds the model for `quant` and measures its outputs. */
er_status er__qz_measure(evalctx *ec, const bool *quant, er_qbudget kind, double *metric, double *sqnr);

/* --outputs auto: every graph output of a quantized layer once with and
 * once without Q -> DQ; each keeps the form whose SQNR against the float
 * model is higher (outputs are leaves, so the choices do not interact).
 * With a keep-float budget that is not an SQNR, the choice stands only if
 * the budget metric does not get worse. */
er_status er__qz_choose_outputs(evalctx *ec, const bool *quant, er_qreport *rep, bool auto_keep);

/* --keep-float auto: sensitivity of each layer alone, then the fewest
 * layers kept float (most sensitive first, then pruned) within budget. */
er_status er__qz_keep_float_auto(evalctx *ec, bool *quant, er_qreport *rep);

static inline bool is_op(const er_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

/* Loads serialized model bytes (no external data). */
static inline er_status load_bytes(const er_pbw *w, struct er_model **m) {
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  return er_model_load_buffer(w->buf, w->len, NULL, &lo, m);
}

/* A layer's name for reports: its node name, or "Op #index" (index in the
 * prepared graph) for nodes the model leaves unnamed. */
static inline char *layer_name(const qcand *c) {
  if (c->name[0]) return strdup(c->name);
  char buf[160];
  snprintf(buf, sizeof buf, "%s #%d", c->op, (int)c->node);
  return strdup(buf);
}

#endif /* ER_QUANT_QUANTIZE_IMPL_H */
