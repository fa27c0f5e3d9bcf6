/* quantize.h - post-training static quantization of an ONNX model to the
 * standard QDQ form, and the report that explains what it cost.
 *
 * The pipeline (er_quantize):
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

#include "edgerun-quant.h"

#include "quant/calib.h"
#include "quant/compare.h"
#include "quant/dataset.h"

/* The most op types or node names one list option may hold. */
#define ER_QUANT_MAX_LIST 256

/* Parses --keep-float's "auto:BUDGET" ("auto:0.01", "auto:1%", "auto:35dB");
 * false when `text` is not an auto form. */
bool er__quant_parse_budget(const char *text, double *budget, er_qbudget *kind, bool *percent);

/* ---- the report --------------------------------------------------------- */

/* The quantized file size over the float one etc. are in the report; this
 * gives the bytes a model's initializers take (int4 counted packed). */
uint64_t er__model_weight_bytes(const er_model *m);

#endif /* ER_QUANT_QUANTIZE_H */
