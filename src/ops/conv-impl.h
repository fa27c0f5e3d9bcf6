/* conv-impl.h - what the files of the "conv" op group share (conv.c:
 * window attributes, im2col and col2im, Conv, ConvTranspose, Col2Im and
 * the group table; pool.c: MaxPool, AveragePool, LpPool, the global pools,
 * MaxUnpool): the window geometry and the helpers more than one uses. */
#ifndef ER_OPS_CONV_IMPL_H
#define ER_OPS_CONV_IMPL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

typedef enum auto_pad {
  AUTO_PAD_NOTSET,
  AUTO_PAD_VALID,
  AUTO_PAD_SAME_UPPER,
  AUTO_PAD_SAME_LOWER,
} auto_pad;

/* What the attributes say about a sliding window, per spatial axis. */
typedef struct window {
  int nsp;                         /* spatial axes; -1 = not known yet */
  bool has_kernel;                 /* kernel_shape attribute present */
  int64_t kernel[ER_MAX_RANK];     /* taps per axis (from kernel_shape) */
  int64_t stride[ER_MAX_RANK];
  int64_t dilation[ER_MAX_RANK];
  int64_t pad_begin[ER_MAX_RANK];  /* explicit pads (auto_pad NOTSET) */
  int64_t pad_end[ER_MAX_RANK];
  auto_pad autopad;
  bool ceil_mode;
} window;

/* Reads and validates the window attributes. `nsp` is the spatial rank if
 * known from the inputs (else -1; then it is taken from the attributes).
 * `need_kernel`: kernel_shape is required (pools). */
er_status er__opconv_read_window(const er_kctx *ctx, int nsp, bool need_kernel, window *w);

/* Output extent of spatial axis `d` for input extent `in` and kernel `k`
 * (both >= 0), with the pads in force written to *pb / *pe. Shared by Conv
 * and the pools; `ceil_mode` only matters for explicit pads. */
er_status er__opconv_window_output(const er_kctx *ctx, const window *w, int d, int64_t in, int64_t k,
                               int64_t *out, int64_t *pb, int64_t *pe);

extern const er_op_def er__opconv_op_maxpool;
extern const er_op_def er__opconv_op_avgpool;
extern const er_op_def er__opconv_op_lppool;
extern const er_op_def er__opconv_op_global_maxpool;
extern const er_op_def er__opconv_op_global_avgpool;
extern const er_op_def er__opconv_op_global_lppool;
extern const er_op_def er__opconv_op_maxunpool;
static inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

static inline int64_t prod(int n, const int64_t *v) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= v[i];
  return p;
}

/* Steps a row-major counter over dims[0..n) (the kernel taps, or the outer
 * grid axes). */
static inline void counter_next(int n, const int64_t *dims, int64_t *idx) {
  for (int d = n - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return;
    idx[d] = 0;
  }
}

#endif /* ER_OPS_CONV_IMPL_H */
