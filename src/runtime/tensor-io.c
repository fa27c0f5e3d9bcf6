/* tensor-io.c - tensors to and from files: NumPy .npy and ONNX TensorProto
 * .pb. Reads are bounded by the file size; writes go to a temporary file
 * that is renamed into place, so a failure never leaves a partial file. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tensor.h"
#include "onnx/onnx.h"

/* The largest tensor file read (bytes). */
#define ER_MAX_TENSOR_FILE_BYTES (UINT64_C(4) << 30)

static er_status read_all(const char *path, uint8_t **data_out, size_t *size_out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return er__error(ER_STATUS_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return er__error(ER_STATUS_IO, "'%s' is not a regular file", path);
  }
  if ((uint64_t)sb.st_size > ER_MAX_TENSOR_FILE_BYTES) {
    close(fd);
    return er__error(ER_STATUS_LIMIT, "'%s' is %llu bytes, more than the %llu-byte cap on tensor files",
                     path, (unsigned long long)sb.st_size,
                     (unsigned long long)ER_MAX_TENSOR_FILE_BYTES);
  }
  size_t size = (size_t)sb.st_size;
  uint8_t *buf = er__aligned_alloc(size ? size : 1);
  if (!buf) {
    close(fd);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, buf + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      er__aligned_free(buf);
      return er__error(ER_STATUS_IO, "reading '%s' failed: %s", path, n < 0 ? strerror(errno) : "short read");
    }
    done += (size_t)n;
  }
  close(fd);
  *data_out = buf;
  *size_out = size;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* .npy                                                                      */
/* ======================================================================== */

static const struct {
  const char *descr;
  er_dtype dtype;
} npy_types[] = {
    {"<f4", ER_DTYPE_FLOAT},  {"<f8", ER_DTYPE_DOUBLE}, {"<f2", ER_DTYPE_FLOAT16},
    {"|i1", ER_DTYPE_INT8},   {"|u1", ER_DTYPE_UINT8},  {"<i2", ER_DTYPE_INT16},
    {"<u2", ER_DTYPE_UINT16}, {"<i4", ER_DTYPE_INT32},  {"<u4", ER_DTYPE_UINT32},
    {"<i8", ER_DTYPE_INT64},  {"<u8", ER_DTYPE_UINT64}, {"|b1", ER_DTYPE_BOOL},
};

/* Finds 'key': in the header dict and returns a pointer after the colon. */
static const char *npy_find(const char *hdr, const char *key) {
  const char *p = strstr(hdr, key);
  if (!p) return NULL;
  p += strlen(key);
  while (*p == ' ') p++;
  if (*p != ':') return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
}

static er_status parse_npy(const char *path, const uint8_t *d, size_t size, er_tensor *t) {
  if (size < 10 || memcmp(d, "\x93NUMPY", 6) != 0)
    return er__error(ER_STATUS_MALFORMED, "'%s' is not a .npy file", path);
  uint8_t major = d[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)d[8] | ((size_t)d[9] << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return er__error(ER_STATUS_TRUNCATED, "'%s': .npy header is truncated", path);
    hlen = (size_t)d[8] | ((size_t)d[9] << 8) | ((size_t)d[10] << 16) | ((size_t)d[11] << 24);
    hstart = 12;
  } else {
    return er__error(ER_STATUS_UNSUPPORTED, "'%s': .npy format version %u is not supported", path, major);
  }
  if (hlen > 65536 || hlen > size - hstart)
    return er__error(ER_STATUS_TRUNCATED, "'%s': .npy header of %zu bytes runs past the file", path, hlen);
  char hdr[65537];
  memcpy(hdr, d + hstart, hlen);
  hdr[hlen] = '\0';

  const char *p = npy_find(hdr, "'descr'");
  if (!p || *p != '\'') return er__error(ER_STATUS_MALFORMED, "'%s': .npy header has no descr", path);
  char descr[16] = {0};
  size_t k = 0;
  p++;
  while (*p && *p != '\'' && k < sizeof descr - 1) descr[k++] = *p++;
  /* NumPy writes single-byte types with '|' but accept '<' and '=' too. */
  if ((descr[0] == '=' ) && k == 3) descr[0] = '<';
  er_dtype dt = ER_DTYPE_UNDEFINED;
  for (size_t i = 0; i < ER_ARRAY_LEN(npy_types); i++) {
    const char *nd = npy_types[i].descr;
    if (strcmp(nd, descr) == 0 || (nd[0] == '|' && descr[0] == '<' && strcmp(nd + 1, descr + 1) == 0))
      dt = npy_types[i].dtype;
  }
  if (dt == ER_DTYPE_UNDEFINED)
    return er__error(ER_STATUS_UNSUPPORTED, "'%s': .npy dtype '%s' is not supported (little-endian "
                     "numeric and bool types are)", path, descr);
  p = npy_find(hdr, "'fortran_order'");
  if (!p) return er__error(ER_STATUS_MALFORMED, "'%s': .npy header has no fortran_order", path);
  if (strncmp(p, "True", 4) == 0)
    return er__error(ER_STATUS_UNSUPPORTED, "'%s': Fortran-ordered .npy arrays are not supported; "
                     "save with np.ascontiguousarray", path);
  p = npy_find(hdr, "'shape'");
  if (!p || *p != '(') return er__error(ER_STATUS_MALFORMED, "'%s': .npy header has no shape", path);
  p++;
  int rank = 0;
  int64_t dims[ER_MAX_RANK];
  for (;;) {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') break;
    if (*p < '0' || *p > '9') return er__error(ER_STATUS_MALFORMED, "'%s': bad .npy shape", path);
    if (rank >= ER_MAX_RANK)
      return er__error(ER_STATUS_LIMIT, "'%s': .npy array has more than %d dims (ER_MAX_RANK)", path, ER_MAX_RANK);
    int64_t v = 0;
    while (*p >= '0' && *p <= '9') {
      if (!er__mul_i64(v, 10, &v) || !er__add_i64(v, *p - '0', &v))
        return er__error(ER_STATUS_INVALID_SHAPE, "'%s': .npy dim overflows", path);
      p++;
    }
    dims[rank++] = v;
  }
  er__tensor_set(t, dt, rank, dims);
  int64_t count;
  uint64_t bytes;
  if (!er__shape_count(rank, dims, &count) || !er__mul_u64((uint64_t)count, er_dtype_size(dt), &bytes))
    return er__error(ER_STATUS_INVALID_SHAPE, "'%s': .npy shape overflows", path);
  size_t data_off = hstart + hlen;
  if (bytes != size - data_off)
    return er__error(ER_STATUS_INVALID_TENSOR, "'%s': .npy data holds %zu bytes but the shape needs %llu",
                     path, size - data_off, (unsigned long long)bytes);
  ER_CHECK(er__tensor_alloc(t, 0));
  if (bytes) memcpy(t->data, d + data_off, (size_t)bytes);
  return ER_STATUS_OK;
}

er_status er_tensor_read_file(const char *path, er_tensor **tensor_out, char **name_out) {
  uint8_t *data = NULL;
  size_t size = 0;
  er_tensor tmp;
  char *name = NULL;
  er_status st;
  if (!path || !tensor_out) return er__error(ER_STATUS_INVALID_ARGUMENT, "path and tensor_out must not be NULL");
  ER_CHECK(read_all(path, &data, &size));
  if (size >= 6 && memcmp(data, "\x93NUMPY", 6) == 0) {
    st = parse_npy(path, data, size, &tmp);
  } else {
    st = er__onnx_parse_tensor_file(data, size, &tmp, &name);
    if (st != ER_STATUS_OK) er__error_prefix("'%s'", path);
  }
  er__aligned_free(data);
  if (st != ER_STATUS_OK) return st;
  er_tensor *t = er__tensor_new();
  if (!t) {
    er__tensor_release(&tmp);
    free(name);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  *t = tmp;
  *tensor_out = t;
  if (name_out) *name_out = name;
  else free(name);
  return ER_STATUS_OK;
}

/* Writes bytes to path through a temporary file in the same folder. */
static er_status write_atomic(const char *path, const void *a, size_t alen, const void *b, size_t blen) {
  size_t n = strlen(path);
  char *tmp = malloc(n + 32);
  if (!tmp) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  snprintf(tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    er_status st = er__error(ER_STATUS_IO, "cannot create '%s': %s", tmp, strerror(errno));
    free(tmp);
    return st;
  }
  const void *parts[2] = {a, b};
  size_t lens[2] = {alen, blen};
  for (int i = 0; i < 2; i++) {
    size_t done = 0;
    while (done < lens[i]) {
      ssize_t w = write(fd, (const char *)parts[i] + done, lens[i] - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        er_status st = er__error(ER_STATUS_IO, "writing '%s' failed: %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return st;
      }
      done += (size_t)w;
    }
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    er_status st = er__error(ER_STATUS_IO, "writing '%s' failed: %s", path, strerror(errno));
    unlink(tmp);
    free(tmp);
    return st;
  }
  if (rename(tmp, path) != 0) {
    er_status st = er__error(ER_STATUS_IO, "cannot rename to '%s': %s", path, strerror(errno));
    unlink(tmp);
    free(tmp);
    return st;
  }
  free(tmp);
  return ER_STATUS_OK;
}

er_status er_tensor_write_file(const char *path, const er_tensor *t, const char *name) {
  if (!path || !t) return er__error(ER_STATUS_INVALID_ARGUMENT, "path and tensor must not be NULL");
  size_t n = strlen(path);
  if (n >= 4 && strcmp(path + n - 4, ".npy") == 0) {
    const char *descr = NULL;
    for (size_t i = 0; i < ER_ARRAY_LEN(npy_types); i++)
      if (npy_types[i].dtype == t->dtype) descr = npy_types[i].descr;
    if (!descr)
      return er__error(ER_STATUS_UNSUPPORTED, "type %s cannot be written as .npy; use .pb",
                       er_dtype_name(t->dtype));
    char hdr[512], shape[256];
    size_t k = 0;
    shape[0] = '\0';
    for (int i = 0; i < t->rank; i++)
      k += (size_t)snprintf(shape + k, sizeof shape - k, "%lld,%s", (long long)t->dims[i],
                            (i + 1 < t->rank) ? " " : "");
    if (t->rank > 1 && k > 0) shape[k - 1] = '\0';  /* drop the trailing comma */
    int len = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                       descr, shape);
    /* Pad with spaces so the data starts on a 64-byte boundary, ending the
     * header with a newline, as NumPy does. */
    size_t total = 10 + (size_t)len + 1;
    size_t padded = (total + 63) & ~(size_t)63;
    memset(hdr + 10 + len, ' ', padded - total);
    hdr[padded - 1] = '\n';
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)((padded - 10) & 0xff);
    hdr[9] = (char)((padded - 10) >> 8);
    return write_atomic(path, hdr, padded, t->data, t->nbytes);
  }
  er_pbw w = {0};
  er_status st = er__onnx_write_tensor(&w, t, name);
  if (st == ER_STATUS_OK) st = write_atomic(path, w.buf, w.len, NULL, 0);
  er__pbw_free(&w);
  return st;
}
