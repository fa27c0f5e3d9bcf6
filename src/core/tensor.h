/* tensor.h - the tensor struct every layer shares.
 *
 * One struct serves two purposes. At run time it is a tensor: a type, a
 * shape and data. During load-time checking it is what is *known* about a
 * value: rank -1 means the rank is unknown, a dim of -1 is unknown, and
 * data == NULL means the values are unknown. */
#ifndef ER_TENSOR_H
#define ER_TENSOR_H

#include "core/core.h"

enum {
  ER_TENSOR_OWNS_DATA = 1u << 0,  /* data is freed with er__aligned_free */
  ER_TENSOR_WRAPPED = 1u << 1,    /* data belongs to the API caller */
};

struct er_tensor {
  er_dtype dtype;
  int rank;                    /* -1 = unknown (checking only) */
  int64_t dims[ER_MAX_RANK];   /* -1 = unknown (checking only) */
  void *data;                  /* NULL = values unknown / not allocated */
  size_t nbytes;               /* bytes of data when allocated */
  uint32_t flags;
};

/* Sets type and shape, clearing data (no allocation). dims may be NULL when
 * rank is 0 or -1. */
void er__tensor_set(er_tensor *t, er_dtype dtype, int rank, const int64_t *dims);
/* True when rank and every dim are known. */
bool er__tensor_shape_known(const er_tensor *t);
/* Element count; -1 if the shape is not fully known. Shapes are validated so
 * the product cannot overflow (see er__shape_count). */
int64_t er__tensor_count(const er_tensor *t);
/* Product of dims with overflow and negative checks; returns false when the
 * product overflows int64 or a dim is negative. */
bool er__shape_count(int rank, const int64_t *dims, int64_t *count_out);

/* Allocates zeroed, 64-byte aligned data for a tensor whose shape is fully
 * known, after checking the byte size against `max_bytes` (0 = no cap). */
er_status er__tensor_alloc(er_tensor *t, uint64_t max_bytes);
/* The same without zeroing, for producers that write every element. */
er_status er__tensor_alloc_raw(er_tensor *t, uint64_t max_bytes);
/* Frees owned data and clears data/nbytes (keeps type and shape). */
void er__tensor_release(er_tensor *t);
/* Makes `dst` a deep copy of `src` (owned data). */
er_status er__tensor_copy(er_tensor *dst, const er_tensor *src);
/* Makes `dst` refer to `src`'s data without owning it. */
void er__tensor_borrow(er_tensor *dst, const er_tensor *src);

/* Writes "[2,3,?]" (or "[?]" for unknown rank) into buf; returns buf. */
const char *er__shape_str(const er_tensor *t, char *buf, size_t size);
const char *er__dims_str(int rank, const int64_t *dims, char *buf, size_t size);

/* Heap-allocated tensor struct (for the public API and for outputs handed to
 * callers). */
er_tensor *er__tensor_new(void);

#endif /* ER_TENSOR_H */
