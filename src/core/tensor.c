/* tensor.c - tensor shapes, data ownership and the public tensor API. */
#include "core/tensor.h"

#include <stdio.h>
#include <stdlib.h>

void er__tensor_set(er_tensor *t, er_dtype dtype, int rank, const int64_t *dims) {
  ER_ASSERT(rank >= -1 && rank <= ER_MAX_RANK);
  t->dtype = dtype;
  t->rank = rank;
  for (int i = 0; i < ER_MAX_RANK; i++) t->dims[i] = (i < rank && dims) ? dims[i] : 0;
  t->data = NULL;
  t->nbytes = 0;
  t->flags = 0;
}

bool er__tensor_shape_known(const er_tensor *t) {
  if (t->rank < 0) return false;
  for (int i = 0; i < t->rank; i++)
    if (t->dims[i] < 0) return false;
  return true;
}

bool er__shape_count(int rank, const int64_t *dims, int64_t *count_out) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || !er__mul_i64(n, dims[i], &n)) return false;
  }
  *count_out = n;
  return true;
}

int64_t er__tensor_count(const er_tensor *t) {
  int64_t n;
  if (!er__tensor_shape_known(t)) return -1;
  if (!er__shape_count(t->rank, t->dims, &n)) return -1;
  return n;
}

er_status er__tensor_alloc(er_tensor *t, uint64_t max_bytes) {
  ER_CHECK(er__tensor_alloc_raw(t, max_bytes));
  memset(t->data, 0, t->nbytes);
  return ER_STATUS_OK;
}

er_status er__tensor_alloc_raw(er_tensor *t, uint64_t max_bytes) {
  char buf[128];
  int64_t count;
  uint64_t bytes;
  size_t esize = er_dtype_size(t->dtype);
  ER_ASSERT(t->data == NULL);
  if (esize == 0 || t->dtype == ER_DTYPE_STRING)
    return er__error(ER_STATUS_UNSUPPORTED, "tensors of type %s are not supported",
                     er_dtype_name(t->dtype));
  if (!er__tensor_shape_known(t) || !er__shape_count(t->rank, t->dims, &count))
    return er__error(ER_STATUS_INVALID_SHAPE, "cannot allocate a tensor of shape %s",
                     er__shape_str(t, buf, sizeof buf));
  if (!er__mul_u64((uint64_t)count, esize, &bytes) || bytes > SIZE_MAX ||
      (max_bytes && bytes > max_bytes))
    return er__error(ER_STATUS_LIMIT,
                     "tensor of shape %s and type %s needs more than the %llu-byte cap "
                     "(max_tensor_bytes)",
                     er__shape_str(t, buf, sizeof buf), er_dtype_name(t->dtype),
                     (unsigned long long)(max_bytes ? max_bytes : SIZE_MAX));
  t->data = er__aligned_alloc((size_t)bytes);
  if (!t->data) return ER_STATUS_OUT_OF_MEMORY;
  t->nbytes = (size_t)bytes;
  t->flags |= ER_TENSOR_OWNS_DATA;
  return ER_STATUS_OK;
}

void er__tensor_release(er_tensor *t) {
  if (t->flags & ER_TENSOR_OWNS_DATA) er__aligned_free(t->data);
  t->data = NULL;
  t->nbytes = 0;
  t->flags &= ~(uint32_t)(ER_TENSOR_OWNS_DATA | ER_TENSOR_WRAPPED);
}

er_status er__tensor_copy(er_tensor *dst, const er_tensor *src) {
  er__tensor_set(dst, src->dtype, src->rank, src->dims);
  ER_CHECK(er__tensor_alloc(dst, 0));
  if (src->nbytes) memcpy(dst->data, src->data, src->nbytes);
  return ER_STATUS_OK;
}

void er__tensor_borrow(er_tensor *dst, const er_tensor *src) {
  *dst = *src;
  dst->flags &= ~(uint32_t)(ER_TENSOR_OWNS_DATA | ER_TENSOR_WRAPPED);
}

const char *er__dims_str(int rank, const int64_t *dims, char *buf, size_t size) {
  size_t n = 0;
  if (size == 0) return buf;
  buf[0] = '\0';
  if (rank < 0) {
    snprintf(buf, size, "[?]");
    return buf;
  }
  n += (size_t)snprintf(buf + n, size - n, "[");
  for (int i = 0; i < rank && n < size; i++) {
    if (dims[i] < 0)
      n += (size_t)snprintf(buf + n, size - n, "%s?", i ? "," : "");
    else
      n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? "," : "", (long long)dims[i]);
  }
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

const char *er__shape_str(const er_tensor *t, char *buf, size_t size) {
  return er__dims_str(t->rank, t->dims, buf, size);
}

er_tensor *er__tensor_new(void) {
  er_tensor *t = calloc(1, sizeof *t);
  if (!t) er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory allocating a tensor");
  return t;
}

/* ======================================================================== */
/* Public API                                                                */
/* ======================================================================== */

static er_status check_public_shape(er_dtype dtype, int rank, const int64_t *dims) {
  int64_t count;
  if (!er__dtype_is_numeric(dtype))
    return er__error(ER_STATUS_UNSUPPORTED, "tensor type %d (%s) is not supported", (int)dtype,
                     er_dtype_name(dtype));
  if (rank < 0 || rank > ER_MAX_RANK)
    return er__error(ER_STATUS_INVALID_SHAPE, "rank %d is outside 0..%d (ER_MAX_RANK)", rank,
                     ER_MAX_RANK);
  if (rank > 0 && !dims) return er__error(ER_STATUS_INVALID_ARGUMENT, "dims is NULL");
  if (!er__shape_count(rank, dims, &count))
    return er__error(ER_STATUS_INVALID_SHAPE, "dims are negative or their product overflows");
  return ER_STATUS_OK;
}

er_status er_tensor_create(er_dtype dtype, int rank, const int64_t *dims, er_tensor **tensor_out) {
  if (!tensor_out) return er__error(ER_STATUS_INVALID_ARGUMENT, "tensor_out is NULL");
  ER_CHECK(check_public_shape(dtype, rank, dims));
  er_tensor *t = er__tensor_new();
  if (!t) return ER_STATUS_OUT_OF_MEMORY;
  er__tensor_set(t, dtype, rank, dims);
  er_status st = er__tensor_alloc(t, 0);
  if (st != ER_STATUS_OK) {
    free(t);
    return st;
  }
  *tensor_out = t;
  return ER_STATUS_OK;
}

er_status er_tensor_wrap(er_dtype dtype, int rank, const int64_t *dims, void *data, size_t nbytes,
                         er_tensor **tensor_out) {
  int64_t count;
  if (!tensor_out) return er__error(ER_STATUS_INVALID_ARGUMENT, "tensor_out is NULL");
  ER_CHECK(check_public_shape(dtype, rank, dims));
  er__shape_count(rank, dims, &count);
  uint64_t need;
  if (!er__mul_u64((uint64_t)count, er_dtype_size(dtype), &need) || need != nbytes)
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "wrapped buffer holds %zu bytes but the shape needs %llu", nbytes,
                     (unsigned long long)need);
  if (need && !data) return er__error(ER_STATUS_INVALID_ARGUMENT, "data is NULL");
  er_tensor *t = er__tensor_new();
  if (!t) return ER_STATUS_OUT_OF_MEMORY;
  er__tensor_set(t, dtype, rank, dims);
  t->data = data;
  t->nbytes = nbytes;
  t->flags = ER_TENSOR_WRAPPED;
  *tensor_out = t;
  return ER_STATUS_OK;
}

void er_tensor_free(er_tensor *t) {
  if (!t) return;
  er__tensor_release(t);
  free(t);
}

er_dtype er_tensor_dtype(const er_tensor *t) { return t->dtype; }
int er_tensor_rank(const er_tensor *t) { return t->rank; }
const int64_t *er_tensor_dims(const er_tensor *t) { return t->dims; }
int64_t er_tensor_count(const er_tensor *t) { return er__tensor_count(t); }
size_t er_tensor_nbytes(const er_tensor *t) { return t->nbytes; }
void *er_tensor_data(er_tensor *t) { return t->data; }
const void *er_tensor_cdata(const er_tensor *t) { return t->data; }
