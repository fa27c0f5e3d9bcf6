/* index-impl.h - what the files of the "index" op group share (index.c:
 * the shared machinery, Gather, GatherElements, GatherND, ScatterElements,
 * Scatter, ScatterND and the group table; index-scan.c: OneHot, NonZero,
 * TopK, ArgMax, ArgMin, CumSum, CumProd, Compress, Unique,
 * ReverseSequence): the helpers more than one uses and the op definitions
 * the table lists. */
#ifndef ER_OPS_INDEX_IMPL_H
#define ER_OPS_INDEX_IMPL_H

#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* Row-major walk over a shape `dims` that keeps an element offset into
 * another tensor with the given strides (elements) up to date. */
typedef struct walk {
  int rank;
  int64_t dims[ER_MAX_RANK];
  int64_t strides[ER_MAX_RANK];  /* elements per step of each dim */
  int64_t idx[ER_MAX_RANK];
  int64_t off;                   /* elements */
} walk;

/* Stable bottom-up merge sort of the index array a[n] under cmp (tmp holds
 * n entries). The comparators below break ties by index, which makes the
 * order fully determined. */
typedef int (*index_cmp)(const void *ctx, int64_t a, int64_t b);

/* Requires input i to be present with a type edgerun can hold. Byte-moving
 * ops accept any such type; string, complex and float4 are UNSUPPORTED. */
er_status er__idx_require_holdable(const er_kctx *ctx, int i);

/* An output shape built from several inputs (Gather's, OneHot's depth)
 * must have an element count that fits in int64 before the executor looks
 * at it. */
er_status er__idx_require_countable(const er_kctx *ctx, int rank, const int64_t *dims);

/* Reads the one value of input i (a scalar or one-element tensor; floats
 * are truncated toward zero). *known is false while the values are unknown
 * (load time). `what` names the input in messages. */
er_status er__idx_read_scalar(const er_kctx *ctx, int i, const char *what, bool *known, int64_t *v);

void er__idx_walk_init(walk *w, int rank, const int64_t *dims, const int64_t *strides);

void er__idx_walk_next(walk *w);

/* A key whose unsigned order is the value order of element i: integers
 * shifted to unsigned, floats by their sign-magnitude bits. -0.0 equals 0.0
 * (they compare equal) and every NaN becomes `nan_key`, so NaNs sort
 * together at the end (UINT64_MAX) or the start (0). */
uint64_t er__idx_order_key(const void *data, er_dtype t, int64_t i, uint64_t nan_key);

void er__idx_sort_indices(int64_t *a, int64_t *tmp, int64_t n, index_cmp cmp, const void *c);

extern const er_op_def er__idx_op_onehot;
extern const er_op_def er__idx_op_nonzero;
extern const er_op_def er__idx_op_topk_1;
extern const er_op_def er__idx_op_topk;
extern const er_op_def er__idx_op_argmax;
extern const er_op_def er__idx_op_argmin;
extern const er_op_def er__idx_op_cumsum;
extern const er_op_def er__idx_op_cumprod;
extern const er_op_def er__idx_op_compress;
extern const er_op_def er__idx_op_unique;
extern const er_op_def er__idx_op_reverse_sequence;
/* Product of dims[from..to). Shapes of allocated tensors are validated, so
 * this cannot overflow for them. */
static inline int64_t dims_prod(const int64_t *dims, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; d++) p *= dims[d];
  return p;
}

static inline er_status check_out_rank(const er_kctx *ctx, int rank) {
  if (rank > ER_MAX_RANK)
    return er__op_error(ctx, ER_STATUS_LIMIT, "output would have rank %d; at most %d (ER_MAX_RANK)",
                        rank, ER_MAX_RANK);
  return ER_STATUS_OK;
}

/* Copies one element or chunk of `bytes` bytes; the common element sizes
 * become single moves. */
static inline void copy_bytes(void *dst, const void *src, size_t bytes) {
  switch (bytes) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, bytes);
  }
}

#endif /* ER_OPS_INDEX_IMPL_H */
