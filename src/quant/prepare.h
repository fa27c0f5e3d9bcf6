/* prepare.h - graph passes run on the float model before it is calibrated
 * and quantized. Each keeps the model's meaning (up to float rounding) and
 * makes quantization better or possible:
 *  - constant folding of what feeds weights (Constant, ConstantOfShape,
 *    Unsqueeze of constants, ...), so weights are initializers to quantize;
 *  - folding BatchNormalization, and per-channel Mul / Add / Sub / Div by
 *    constants, into the Conv before them, so one quantized Conv replaces a
 *    float chain with its own rounding at every step;
 *  - raising the opset to what the quantization nodes need. */
#ifndef ER_QUANT_PREPARE_H
#define ER_QUANT_PREPARE_H

#include "ir/ir.h"

/* Folds nodes whose inputs are all constants and whose outputs feed weights,
 * biases or per-channel affine operands (and every Constant node) into
 * initializers. *n_folded counts the nodes removed. */
er_status er__qprep_fold_constants(struct er_model *m, int *n_folded);

/* Folds BatchNormalization and per-channel Mul/Add/Sub/Div by constants
 * into the preceding Conv / ConvTranspose where that Conv's output has no
 * other reader. *n_folded counts the nodes removed. */
er_status er__qprep_fold_affine(struct er_model *m, int *n_folded);

/* Raises the default-domain opset to `target` (no-op when it is already
 * there), rewriting nodes whose form changed and refusing (UNSUPPORTED,
 * naming the node) those that cannot be converted. Also raises the IR
 * version the new opset needs. *changed tells whether anything changed. */
er_status er__qprep_raise_opset(struct er_model *m, int64_t target, bool *changed);

#endif /* ER_QUANT_PREPARE_H */
