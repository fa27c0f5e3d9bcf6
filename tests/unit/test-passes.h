/* test-passes.h - what test-passes.c and test-passes-blocked.c share: the
 * graph-building and comparison helpers and the test functions main lists. */
#ifndef ER_TEST_PASSES_H
#define ER_TEST_PASSES_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "onnx-builder.h"
#include "kernels/kernel.h"
#include "graph/graph.h"

#define IN(...) (const char *const[]){__VA_ARGS__, NULL}

#define OUT(...) (const char *const[]){__VA_ARGS__, NULL}

float tp_frand(void);

void tp_add_weight(er_pbw *g, const char *name, int rank, const int64_t *dims, float scale, float offset);

void tp_add_scalar(er_pbw *g, const char *name, float v);

er_model *tp_load(const er_pbw *m, int optimize);

/* The graph a CPU session runs: model-level rewrites plus the session's
 * own fusions. Counts nodes of op type `op` (NULL: all nodes). */
int tp_session_count_named(const er_model *m, const char *op, const char *fragment);

int tp_count_op(const er_model *m, const char *op);

void tp_add_i64(er_pbw *g, const char *name, int n, const int64_t *v);

void tp_test_blocked_layout(void);

/* Near misses: an Add of a per-channel tensor made at run time (a
 * ReduceMean, which stays planar; a constant one would be folded into
 * the bias at load), a Div by a tensor and a Concat whose first input is
 * not whole blocks (20 channels) take planar inputs; the convolutions
 * around them stay blocked and the results agree. */
void tp_test_blocked_near_misses(void);

/* DenseNet's pre-activation: Conv -> Concat -> BatchNormalization ->
 * Relu -> Conv. The BN of the blocked Concat stays blocked (one
 * BlockedBatchNormalization carrying the ReLU, no conversion); the near
 * miss, whose scale
 * is a graph input, is a planar BatchNormalization between a FromBlocked
 * and a ToBlocked. The results agree with the graph as written. */
void tp_test_blocked_batchnorm(void);

/* Convolutions in groups of whole blocks (ShuffleNet's grouped 1x1
 * layers) go blocked after a dense one, with a blocked input, and so does
 * one in narrow groups (two channels in, two out: whole groups in every
 * block); a near miss whose groups take two channels and make one stays
 * planar, and the results agree. */
void tp_test_blocked_groups(void);

/* With AVX-512, 3x3 layers with C * M / (C + M) from 12 to 32 go to
 * planar Winograd on maps of 56 x 56 and more: all of them where AVX-512
 * runs as two 256-bit halves (Zen 4), those whose channel counts are not
 * both multiples of 32 elsewhere. On smaller maps, on sizes known only at
 * run time and without AVX-512 they stay blocked. 64 channels (32) take
 * Winograd from 14 x 14 on every CPU with a Winograd kernel. */
void tp_test_winograd_choice(void);

/* Max and Min of two stay blocked: with a one-value constant (openWakeWord
 * clamps every LeakyRelu with Max(x, -0.4)) or of two blocked values, over
 * 24 channels (padding lanes the constant makes non-zero, which the
 * convolutions after ignore). Near misses stay planar: a Max of three
 * inputs and one with a per-channel constant. */
void tp_test_blocked_max_min(void);

/* A channel Concat of a blocked input and a planar one (a Softplus,
 * which stays planar) stays blocked: the planar input is converted in,
 * and the 1x1 layer after it reads the blocked result. */
void tp_test_blocked_mixed_concat(void);

/* YOLOv8's C2f block: a 1x1 layer, a channel Split in halves, a
 * bottleneck (3x3 layer and residual Add) on the second half, a Concat of
 * both halves and the bottleneck, a last 1x1 layer. With the sizes as a
 * constant input (opset 13), an attribute (opset 11) or equal parts
 * (opset 18's num_outputs), the Split runs on the blocked twin and nothing
 * is converted but the output. Near misses stay planar and agree: parts of
 * 2 and 30 channels (not whole blocks), and a Split along the height. */
void tp_test_blocked_split(void);

/* An FPN upsample: Conv (24 channels, not whole blocks on AVX-512),
 * Sigmoid, nearest Resize, 3x3 Conv. The Resize runs on the blocked twin
 * (BlockedResize) with scales (opset 13), sizes and an empty roi with
 * asymmetric/floor (opset 11), and Resize 10's scales; nothing is
 * converted but y. Near misses stay planar and agree: linear mode, and
 * a Resize that also doubles the channels. */
void tp_test_blocked_resize(void);

/* A ConvNeXt block: a stem convolution, a 7x7 depthwise one, a Transpose
 * to channels-last rows (Softplus stands in for LayerNorm and the MLP),
 * a Transpose back and the residual Add, then a 3x3 convolution. Both
 * Transposes become conversions (FromBlocked and ToBlocked with
 * channels_last) and the Add runs blocked. Near miss: when only a planar
 * op reads the Transpose back, it stays a Transpose (a ToBlocked there
 * would need a FromBlocked after it). */
void tp_test_blocked_channels_last(void);

/* A YOLO head: a blocked convolution's 30 channels split into 3 anchors of
 * 10 by Reshape, then Transpose (0, 1, 3, 4, 2) puts each anchor's values
 * last. It becomes FromBlocked to channels-last, a Reshape and a row
 * Transpose (0, 3, 1, 2, 4). Near misses keep the planar form and the
 * Transpose as written: another permutation, and the Reshape's result
 * read a second time. */
void tp_test_blocked_head_split(void);

/* Per-channel constants: a convolution, PRelu with [C,1,1] slopes (face
 * models' activation), Mul by [1,C,1,1] and Add of [C,1,1] (an unfolded
 * BatchNorm), a convolution: all blocked over 24 channels (not whole
 * blocks on AVX-512), the constants made blocked. Near miss: Div by a
 * per-channel constant stays planar (its padding lanes would divide by
 * zero), and the ops after it with it (the last convolution then is an
 * island of the conversion rule, planar too). */
void tp_test_blocked_channel_consts(void);

/* Two 3x3 convolutions with one weight tensor (a detection head's tower
 * at two pyramid levels) and a third with other weights of that shape:
 * the Winograd kernels share the first two's transformed weights and must
 * not hand them to the third. Outputs agree with the reference kernels in
 * both layouts, with a second session of the model alive at once. */
void tp_test_shared_weights(void);

/* MNIST's layers: a 5x5 convolution of one input channel to half a block
 * of outputs stays planar (the direct kernel; blocked, half of every
 * output vector would be empty lanes); the next two layers are blocked,
 * the first reading it planar in place. The near miss, a whole block of
 * outputs, is blocked too. */
void tp_test_blocked_half_block(void);

/* Islands: a lone small convolution between planar ops is not worth its
 * conversions and stays planar; a lone large one (5x5, 64 channels) is
 * converted; a 3x3 layer the planar Winograd kernel takes stays planar:
 * 64 -> 64, and uneven ones with C * M / (C + M) >= 32 (48 -> 192 and
 * 192 -> 48); 40 -> 96 (28) and 32 -> 32 (16) are converted. */
void tp_test_blocked_islands(void);

#endif /* ER_TEST_PASSES_H */
