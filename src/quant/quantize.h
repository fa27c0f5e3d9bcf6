/* quantize.h - post-training static quantization of an ONNX model to the
 * standard QDQ form, and the report that explains what it cost.
 *
 * The pipeline (er__quantize):
 *  1. load the float model as written; fold constants feeding weights and
 *     BatchNormalization / per-channel affine ops into convolutions; raise
 *     the opset to what the quantization nodes need (prepare.h);
 *  2. choose the nodes to quantize: Conv, ConvTranspose, MatMul and Gemm
 *     (the ones integer kernels speed up), minus --exclude-op/-node and the
 *     kept-float ones; their float activation inputs are the tensors to
 *     calibrate;
 *  3. calibrate: run the prepared float model over the calibration samples,
 *     watching those tensors (streaming statistics, calib.h);
 *  4. emit QDQ: every calibrated tensor gets one QuantizeLinear ->
 *     DequantizeLinear pair right after it is produced, read by the
 *     quantized nodes (float readers keep reading the float tensor); weights
 *     become int8 (per-channel or per-tensor, symmetric) or int4 block-wise
 *     initializers behind a DequantizeLinear; biases become int32 with the
 *     product scale;
 *  5. with --keep-float auto:BUDGET, measure each layer's sensitivity and
 *     keep the fewest layers in float that bring the error within budget;
 *  6. measure the result against the float model (outputs and every layer)
 *     for the report, and write the model atomically.
 *
 * Tensors between two quantized layers that only pass through ops that
 * commute with quantization (Relu, MaxPool, Reshape, ...) are quantized
 * once, where the next quantized layer reads them; so a Conv -> Relu ->
 * MaxPool -> Conv chain has one quantization step, not three. */
#ifndef ER_QUANT_QUANTIZE_H
#define ER_QUANT_QUANTIZE_H

#include "quant/calib.h"
#include "quant/compare.h"
#include "quant/dataset.h"

typedef enum er_qweights { ER_QW_INT8 = 0, ER_QW_INT4 } er_qweights;
typedef enum er_qact { ER_QA_UINT8 = 0, ER_QA_INT8, ER_QA_FLOAT } er_qact;

/* What --keep-float auto:BUDGET bounds. */
typedef enum er_qbudget {
  ER_QBUDGET_REL_ERROR = 0,   /* relative RMS output error <= budget */
  ER_QBUDGET_SQNR_DB,         /* output SQNR >= budget dB */
  ER_QBUDGET_ACC_POINTS,      /* top-1 accuracy drop <= budget points */
} er_qbudget;

/* The most op types or node names one list option may hold. */
#define ER_QUANT_MAX_LIST 256

/* Graph outputs that quantized layers produce. */
typedef enum er_qoutputs {
  ER_QOUT_AUTO = 0,             /* Q -> DQ where it measures closer to float */
  ER_QOUT_QUANTIZED,            /* always Q -> DQ (fully quantized graphs) */
  ER_QOUT_FLOAT,                /* never */
} er_qoutputs;

typedef struct er_quant_options {
  er_qweights weights;          /* default int8 */
  bool per_channel;             /* weights per output channel (default) */
  bool reduce_range;            /* int8 weights within [-64, 64] (7 bits) */
  int block_size;               /* int4 blocks along K: 32 (default), 64, 128 */
  er_qact activations;          /* default uint8 */
  bool symmetric;               /* symmetric activations (default asymmetric) */
  er_calib_method method;       /* default minmax */
  double percentile;            /* for percentile; default 99.999 */
  const char *exclude_ops;      /* "Gemm,MatMul"; borrowed */
  const char *exclude_nodes;    /* node names; borrowed */
  const char *keep_float;       /* node names, or "auto:BUDGET"; borrowed */
  const char *channel_axis;     /* "OP=AXIS,..." per-channel axis overrides */
  bool fold;                    /* fold BatchNorm/affine into Conv (default) */
  bool bias_correction;         /* correct biases for the mean error that
                                   weight rounding causes (default) */
  er_qoutputs outputs;          /* graph outputs of quantized layers:
                                   measured choice (default), Q/DQ, float */
  int64_t holdout;              /* samples held out for auto (0 = default) */
  const char *eval_path;        /* evaluation data (else held-out samples) */
  const char *labels_path;      /* labels of the evaluation samples */
  er_qdata_options data;        /* how samples are read */
  int threads;
  bool progress;                /* progress bars on stderr */
} er_quant_options;

void er__quant_options_init(er_quant_options *o);
/* Parses --keep-float's "auto:BUDGET" ("auto:0.01", "auto:1%", "auto:35dB");
 * false when `text` is not an auto form. */
bool er__quant_parse_budget(const char *text, double *budget, er_qbudget *kind, bool *percent);

/* ---- the report --------------------------------------------------------- */

typedef struct er_qreport_tensor {   /* one quantized activation tensor */
  char *name;
  double min, max;                   /* observed */
  double lo, hi;                     /* calibrated range */
  float scale;
  int32_t zero_point;
  er_dtype dtype;
} er_qreport_tensor;

typedef struct er_qreport_layer {    /* one candidate node */
  char *name, *op_type;
  bool quantized;
  char *why_float;                   /* when not quantized: why */
  char *weight;                      /* weight tensor name or NULL */
  char *scheme;                      /* "int8 per-channel axis 0", ... */
  int64_t channels;                  /* scales in the weight's DQ */
  double w_scale_min, w_scale_max;
  double w_sqnr;                     /* weight quantization SQNR, dB */
  uint64_t w_bytes_float, w_bytes_quant;
  bool bias_int32;
  bool bias_corrected;               /* bias corrected for weight rounding */
  double sensitivity;                /* output SQNR (dB) with only this
                                        layer quantized; NaN = not measured */
  double out_sqnr, out_cosine, out_max_abs;  /* this layer's output in the
                                                final model; NaN = none */
} er_qreport_layer;

typedef struct er_qreport_output {  /* a graph output a quantized layer makes */
  char *name;
  bool quantized;                    /* through Q -> DQ in the written model */
  double sqnr_float, sqnr_quantized; /* dB each way (auto); NaN = not measured */
} er_qreport_output;

typedef struct er_qreport {
  char *model_path, *out_path, *calib_path, *eval_path;
  er_quant_options opts;             /* string members not kept */
  char method[32], weights[64], activations[48];
  uint64_t float_file_bytes, quant_file_bytes;
  uint64_t float_weight_bytes, quant_weight_bytes;
  int64_t calib_samples, eval_samples;
  bool eval_on_calib;                /* no separate evaluation data */
  int prepared_folds, affine_folds;
  int64_t opset_from, opset_to;
  er_qreport_tensor *tensors;
  size_t n_tensors;
  er_qreport_layer *layers;
  size_t n_layers;
  /* keep-float auto */
  bool auto_keep;
  double budget;
  er_qbudget budget_kind;
  bool budget_met;
  char **kept;                       /* layers kept float by auto, in order */
  size_t n_kept;
  double auto_metric_before, auto_metric_after;  /* budget metric, all
                                                    quantized vs final */
  /* Graph outputs of quantized layers, and what --outputs chose. */
  er_qoutputs outputs_mode;
  er_qreport_output *outputs;
  size_t n_outputs;
  /* Evaluation against the float model (outputs and layers). */
  er_qcompare *cmp;
  double seconds;                    /* wall time of the whole run */
} er_qreport;

void er__qreport_free(er_qreport *r);

/* Quantizes MODEL with calibration DATA into OUT. OUT may not be the model
 * itself (refused before anything is written); it is written through a
 * temporary file and renamed, so it is never seen half-written. The report
 * (owned by the caller, er__qreport_free) is filled when report_out is not
 * NULL, also on most failures after calibration. */
er_status er__quantize(const char *model_path, const char *calib_path, const char *out_path,
                       const er_quant_options *opts, er_qreport **report_out);

/* Report writers (report.c): JSON, and a self-contained HTML page (inline
 * CSS and SVG, no scripts or links to fetch). Written atomically. */
er_status er__qreport_write_json(const er_qreport *r, const char *path);
er_status er__qreport_write_html(const er_qreport *r, const char *path);

/* Writes the comparison of two models as JSON / HTML (analyze). */
er_status er__qcompare_write_json(const er_qcompare *c, const char *float_path, const char *quant_path,
                                  const char *path);
er_status er__qcompare_write_html(const er_qcompare *c, const char *float_path, const char *quant_path,
                                  const char *path);

/* The quantized file size over the float one etc. are in the report; this
 * gives the bytes a model's initializers take (int4 counted packed). */
uint64_t er__model_weight_bytes(const er_model *m);

#endif /* ER_QUANT_QUANTIZE_H */
