/* llm-observe.h - a look inside the forward pass for the toolchain:
 * calibration (the importance matrix of src/quant/llm-imatrix.c) and
 * activation-range analysis see every matrix product's input and output
 * as the engine computes them. Not part of the public API: the callback
 * runs on the thread that called er_llm_decode, between the products, so
 * it costs nothing when unset. */
#ifndef ER_LLM_OBSERVE_H
#define ER_LLM_OBSERVE_H

#include "edgerun.h"

/* One product y = W x over a wave of n rows: x is [n][cols] floats (the
 * product's input before it is quantized to the kernel's format), y is
 * [n][ldy] with `rows` outputs each (before any bias is added). `weight`
 * is the GGUF tensor's name ("blk.3.ffn_down.weight", "output.weight").
 * After each half of a block the residual stream comes too, as x with y
 * NULL and `weight` "blk.N.attn_residual" or "blk.N.ffn_residual". */
typedef void (*er_llm_observer)(void *user, const char *weight, const float *x, int64_t n, int64_t cols,
                                const float *y, int64_t rows, int64_t ldy);

/* Sets (or with fn NULL clears) the observer of ctx's forward passes. */
void er__llm_context_observe(er_llm_context *ctx, er_llm_observer fn, void *user);

#endif /* ER_LLM_OBSERVE_H */
