/* shape-impl.h - what the files of the "shape" op group share (shape.c:
 * the shared machinery, Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
 * Expand, Tile, Identity, Dropout and the group table; shape-slice.c:
 * Concat, Split, Slice; shape-make.c: Shape, Size, ConstantOfShape,
 * Constant, Range, EyeLike; shape-pad.c: Pad, DepthToSpace, SpaceToDepth,
 * Trilu, CenterCropPad): the helpers more than one uses and the op
 * definitions the table lists. */
#ifndef ER_OPS_SHAPE_IMPL_H
#define ER_OPS_SHAPE_IMPL_H

#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* The view copier below handles views of up to twice the largest tensor
 * rank: Tile views its output as [r0, d0, r1, d1, ...]. */
#define VIEW_MAX_RANK ER_VIEW_MAX_RANK

/* Bit of er_op_def.value_inputs for input i. */
#define VALUE_IN(i) (1u << (i))

/* A short integer list that a shape rule reads: from an input tensor or an
 * attribute. */
typedef struct ivec {
  int64_t n;  /* length; -1 when unknown */
  bool known; /* the values are known */
  int64_t v[VIEW_MAX_RANK];
} ivec;

/* Requires input i to be present and of a type edgerun can hold (strings,
 * complex numbers and float4 are rejected as UNSUPPORTED). */
er_status er__shp_require_holdable(const er_kctx *ctx, int i);

/* Ops that create elements (Expand, Tile, Pad, ConstantOfShape, Range)
 * could be asked for absurd sizes; a known shape whose element count
 * overflows or passes ER_MAX_RUNTIME_ELEMENTS is rejected here, naming it. */
er_status er__shp_check_output_size(const er_kctx *ctx, int rank, const int64_t *dims);

/* Formats an ivec as "[1,-1,3]" (the values as given, unlike
 * er__dims_str, which prints negative dims as "?"). */
const char *er__shp_ivec_str(const ivec *a, char *buf, size_t size);

/* Reads integer input i (int32 or int64), 1-D or, when scalar_ok, a scalar
 * (then n = 1), into *out. Lengths above `cap` are refused with `over`
 * status: callers pass LIMIT where the length becomes a rank (Reshape's
 * shape) and INVALID_SHAPE where it must match a rank. An absent input
 * gives n = -1 and known = false; callers test presence first. */
er_status er__shp_read_ivec(const er_kctx *ctx, int i, const char *what, int cap, bool scalar_ok,
                           er_status over, ivec *out);

/* Reads an ints attribute into *out; n = -1 when absent. */
er_status er__shp_attr_ivec(const er_kctx *ctx, const char *name, int cap, ivec *out);

/* Normalizes a list of axes for a tensor of rank `rank` in place and
 * rejects out-of-range and repeated axes. `what` names the list. */
er_status er__shp_norm_axes(const er_kctx *ctx, const char *what, ivec *axes, int rank);

/* Fills `n` elements of dst with the `es`-byte value at `value`. */
void er__shp_fill_bytes(uint8_t *dst, const void *value, size_t es, int64_t n);

/* Product of dims[lo..hi) or -1 when one is unknown or it overflows. */
int64_t er__shp_dims_product(const int64_t *dims, int lo, int hi);

extern const er_op_def er__shp_op_concat;
extern const er_op_def er__shp_op_split_2;
extern const er_op_def er__shp_op_split_13;
extern const er_op_def er__shp_op_slice_1;
extern const er_op_def er__shp_op_slice_10;
extern const er_op_def er__shp_op_shape;
extern const er_op_def er__shp_op_size;
extern const er_op_def er__shp_op_constant_of_shape;
extern const er_op_def er__shp_op_constant;
extern const er_op_def er__shp_op_range;
extern const er_op_def er__shp_op_pad_1;
extern const er_op_def er__shp_op_pad_11;
extern const er_op_def er__shp_op_depth_to_space;
extern const er_op_def er__shp_op_space_to_depth;
extern const er_op_def er__shp_op_trilu;
extern const er_op_def er__shp_op_eyelike;
extern const er_op_def er__shp_op_center_crop_pad;
static inline int version(const er_kctx *ctx) { return ctx->node->version; }

/* Sets output i to `dtype` with rank `rank` (-1 = unknown) and every dim
 * unknown. */
static inline void set_unknown_dims(const er_kctx *ctx, int i, er_dtype dtype, int rank) {
  int64_t dims[ER_MAX_RANK];
  for (int d = 0; d < ER_MAX_RANK; d++) dims[d] = -1;
  er__set_output(ctx, i, dtype, rank, rank > 0 ? dims : NULL);
}

/* Copies a strided view of `src` into the contiguous `dst`: element
 * (i_0, ..., i_{r-1}) of the view, for i_k < dims[k], is the src element at
 * offset + sum(i_k * strides[k]) (in elements; strides may be zero or
 * negative). This one routine is Transpose, Slice, Expand, Tile,
 * DepthToSpace and SpaceToDepth. */
static inline void copy_view(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                      const int64_t *strides, int64_t offset) {
  er_view v;
  er__view_make(&v, es, rank, dims, strides, offset);
  er__view_copy(&v, dst, src, 0, er__view_rows(&v));
}

#endif /* ER_OPS_SHAPE_IMPL_H */
