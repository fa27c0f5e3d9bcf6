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

#include "edgerun-quant.h"

#include "quant/dataset.h"

/* Relative RMS error ||f - q|| / ||f|| (0 when exact). */
double er__qmetric_rel_error(const er_qmetric *m);
void er__qmetric_add(er_qmetric *m, const float *f, const float *q, int64_t n);

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
