/* edgerun-quant.h - post-training quantization of ONNX models, and the
 * measurements that go with it: data sets of calibration and evaluation
 * samples, the comparison of a quantized model with its float one, and
 * `edgerun quantize`, `analyze` and `eval` as library calls.
 *
 * The quantizer writes standard QDQ models (QuantizeLinear ->
 * DequantizeLinear pairs, int8 per-channel or int4 block-wise weights) that
 * onnxruntime runs too; docs/int8.md describes the pipeline. Every call
 * returns an er_status with er_last_error() naming what failed; structs the
 * library fills (er_qreport, er_qcompare) are freed with their _free call.
 * Paths and options are borrowed for the call. */
#ifndef EDGERUN_QUANT_H
#define EDGERUN_QUANT_H

#include "edgerun.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- data sets ------------------------------------------------------------ */

/* How images become input tensors. */
typedef struct er_image_prep {
  int height, width;        /* resize target; 0 = the input's declared H, W */
  bool nhwc;                /* layout: false = NCHW (default), true = NHWC */
  int channels;             /* 1 (gray), 3; 0 = the input's declared C */
  bool bgr;                 /* channel order BGR instead of RGB */
  float scale;              /* pixel (0..255) multiplier, default 1/255 */
  float mean[3], std[3];    /* per channel, after scale: (x - mean) / std */
} er_image_prep;

void er_image_prep_init(er_image_prep *p);
/* Parses a "--preprocess" text: comma-separated key=value items among
 * size=HxW, layout=nchw|nhwc, channels=rgb|bgr|gray, scale=F,
 * mean=F[:F:F], std=F[:F:F]. INVALID_ARGUMENT names a bad item. */
er_status er_image_prep_parse(er_image_prep *p, const char *text);

typedef struct er_qdata_options {
  int batch;                /* samples per run where the batch is free; 0 = 1 */
  int64_t limit;            /* stop after this many samples; 0 = all */
  int64_t skip;             /* skip this many samples first */
  er_image_prep image;
} er_qdata_options;

void er_qdata_options_init(er_qdata_options *o);

/* A data set: .npy/.npz files, ONNX test folders or a folder of images
 * (see `edgerun quantize --help`). */
typedef struct er_qdata er_qdata;

/* Opens DATA for `model`'s inputs (the model must outlive the data set). */
er_status er_qdata_open(const char *path, const er_model *model, const er_qdata_options *opts, er_qdata **out);
void er_qdata_free(er_qdata *d);
/* Samples the data set holds (after skip and limit). */
int64_t er_qdata_samples(const er_qdata *d);
/* Reads integer class labels, one per line or a .npy of integers. */
er_status er_qdata_read_labels(const char *path, int64_t **labels_out, int64_t *n_out);

/* ---- comparing a quantized model with its float one ------------------------ */

/* Samples whose per-sample metrics are kept for the heatmap. */
#define ER_QCMP_MAX_SAMPLES 64

typedef struct er_qmetric {
  double sf2, se2, sfq, sq2;  /* sums of f^2, (f-q)^2, f*q, q^2 */
  double max_abs;             /* largest |f - q| */
  uint64_t n;                 /* elements */
} er_qmetric;

double er_qmetric_sqnr(const er_qmetric *m);    /* dB; +inf when exact */
double er_qmetric_cosine(const er_qmetric *m);  /* 1 when both are zero */

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
er_status er_qcompare_run(const er_model *fm, const er_model *qm, er_qdata *data, const er_qcompare_options *opts,
                          er_qcompare **out);
void er_qcompare_free(er_qcompare *c);
/* How much error each producer adds on top of what its inputs carried
 * (input_sqnr, local_sqnr), with the float model the comparison ran on. */
void er_qcompare_attribute(er_qcompare *c, const er_model *float_model);
/* The comparison as JSON, or a self-contained HTML page; written
 * atomically. */
er_status er_qcompare_write_json(const er_qcompare *c, const char *float_path, const char *quant_path,
                                 const char *path);
er_status er_qcompare_write_html(const er_qcompare *c, const char *float_path, const char *quant_path,
                                 const char *path);

/* ---- quantizing ------------------------------------------------------------ */

typedef enum er_calib_method {
  ER_CALIB_MINMAX = 0,   /* the observed minimum and maximum */
  ER_CALIB_PERCENTILE,   /* cut the tails beyond a percentile */
  ER_CALIB_ENTROPY,      /* threshold minimizing KL divergence (TensorRT) */
  ER_CALIB_MSE,          /* clipping range minimizing the quantization MSE */
} er_calib_method;

typedef enum er_qweights { ER_QW_INT8 = 0, ER_QW_INT4 } er_qweights;
typedef enum er_qact { ER_QA_UINT8 = 0, ER_QA_INT8, ER_QA_FLOAT } er_qact;

/* What --keep-float auto:BUDGET bounds. */
typedef enum er_qbudget {
  ER_QBUDGET_REL_ERROR = 0,   /* relative RMS output error <= budget */
  ER_QBUDGET_SQNR_DB,         /* output SQNR >= budget dB */
  ER_QBUDGET_ACC_POINTS,      /* top-1 accuracy drop <= budget points */
} er_qbudget;

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

void er_quant_options_init(er_quant_options *o);

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

void er_qreport_free(er_qreport *r);

/* Quantizes MODEL with calibration DATA into OUT. OUT may not be the model
 * itself (refused before anything is written); it is written through a
 * temporary file and renamed, so it is never seen half-written. The report
 * (owned by the caller, er_qreport_free) is filled when report_out is not
 * NULL, also on most failures after calibration. */
er_status er_quantize(const char *model_path, const char *calib_path, const char *out_path,
                      const er_quant_options *opts, er_qreport **report_out);

/* The report as JSON, and as a self-contained HTML page (inline CSS and
 * SVG, no scripts or links to fetch). Written atomically. */
er_status er_qreport_write_json(const er_qreport *r, const char *path);
er_status er_qreport_write_html(const er_qreport *r, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* EDGERUN_QUANT_H */
