/* extdata.c - the one resolver for ONNX external data.
 *
 * Every tensor source (initializers, sparse initializers, Constant and other
 * tensor attributes, subgraph initializers) reaches external bytes through
 * er__extdata_read, so the rules below hold everywhere:
 *  - the location is relative, non-empty, without NUL bytes, backslashes or
 *    ".." components;
 *  - every folder on the way and the file itself are opened with O_NOFOLLOW
 *    relative to the model's folder, so no symbolic link is ever followed;
 *  - the file is a regular file with exactly one hard link (a hard link
 *    could alias a file outside the folder);
 *  - offset and length lie inside the file. */
#define _GNU_SOURCE
#include "onnx/onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Checks the location text and splits it into components in `buf`. */
static er_status check_location(const char *loc, size_t len, char *buf, size_t buf_size) {
  if (len == 0) return er__error(ER_STATUS_UNSAFE_PATH, "external data location is empty");
  if (len >= buf_size)
    return er__error(ER_STATUS_UNSAFE_PATH,
                     "external data location is %zu bytes, more than %zu (ER_MAX_NAME_BYTES)", len,
                     buf_size - 1);
  if (memchr(loc, '\0', len))
    return er__error(ER_STATUS_UNSAFE_PATH, "external data location contains a NUL byte");
  if (memchr(loc, '\\', len))
    return er__error(ER_STATUS_UNSAFE_PATH,
                     "external data location '%.*s' contains a backslash; use '/' and stay in "
                     "the model's folder",
                     (int)len, loc);
  if (loc[0] == '/')
    return er__error(ER_STATUS_UNSAFE_PATH,
                     "external data location '%.*s' is absolute; it must be relative to the "
                     "model's folder",
                     (int)len, loc);
  memcpy(buf, loc, len);
  buf[len] = '\0';
  /* Reject ".." anywhere as a component. */
  const char *p = buf;
  while (*p) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return er__error(ER_STATUS_UNSAFE_PATH,
                       "external data location '%s' contains '..'; it must stay in the model's "
                       "folder",
                       buf);
    if (!slash) break;
    p = slash + 1;
  }
  return ER_STATUS_OK;
}

er_status er__extdata_read(const struct er_model *model, const char *location, size_t location_len,
                           uint64_t offset, uint64_t length, void **data_out,
                           uint64_t *length_out) {
  char path[ER_MAX_NAME_BYTES];
  int dirfd = -1, fd = -1;
  void *data = NULL;
  er_status st;

  ER_CHECK(check_location(location, location_len, path, sizeof path));
  if (model->base_dirfd < 0)
    return er__error(ER_STATUS_EXTERNAL_DATA,
                     "external data '%s' cannot be resolved: the model was loaded from memory "
                     "without a folder",
                     path);

  /* Walk the folders one by one so that no component is a symbolic link. */
  dirfd = dup(model->base_dirfd);
  if (dirfd < 0) return er__error(ER_STATUS_IO, "dup of the model folder failed: %s", strerror(errno));
  char *comp = path;
  for (;;) {
    char *slash = strchr(comp, '/');
    if (!slash) break;
    *slash = '\0';
    if (comp[0] != '\0' && strcmp(comp, ".") != 0) {
      int next = openat(dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0) {
        int e = errno;
        st = er__error(e == ELOOP || e == ENOTDIR ? ER_STATUS_UNSAFE_PATH : ER_STATUS_EXTERNAL_DATA,
                       "external data folder '%s' in '%.*s': %s", comp, (int)location_len,
                       location, e == ELOOP ? "is a symbolic link" : strerror(e));
        goto fail;
      }
      close(dirfd);
      dirfd = next;
    }
    comp = slash + 1;
  }
  if (comp[0] == '\0' || strcmp(comp, ".") == 0) {
    st = er__error(ER_STATUS_UNSAFE_PATH, "external data location '%.*s' names a folder",
                   (int)location_len, location);
    goto fail;
  }
  fd = openat(dirfd, comp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    st = er__error(e == ELOOP ? ER_STATUS_UNSAFE_PATH : ER_STATUS_EXTERNAL_DATA,
                   "external data file '%.*s': %s", (int)location_len, location,
                   e == ELOOP ? "is a symbolic link" : strerror(e));
    goto fail;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    st = er__error(ER_STATUS_IO, "external data file '%.*s': %s", (int)location_len, location,
                   strerror(errno));
    goto fail;
  }
  if (!S_ISREG(sb.st_mode)) {
    st = er__error(ER_STATUS_UNSAFE_PATH, "external data '%.*s' is not a regular file",
                   (int)location_len, location);
    goto fail;
  }
  if (sb.st_nlink != 1) {
    st = er__error(ER_STATUS_UNSAFE_PATH,
                   "external data file '%.*s' has %llu hard links; only files with one link are "
                   "read, since a hard link can alias a file outside the model's folder",
                   (int)location_len, location, (unsigned long long)sb.st_nlink);
    goto fail;
  }
  uint64_t fsize = (uint64_t)sb.st_size;
  if (offset > fsize) {
    st = er__error(ER_STATUS_EXTERNAL_DATA,
                   "external data '%.*s': offset %llu is past the end of the %llu-byte file",
                   (int)location_len, location, (unsigned long long)offset,
                   (unsigned long long)fsize);
    goto fail;
  }
  if (length == UINT64_MAX) length = fsize - offset;
  if (length > fsize - offset) {
    st = er__error(ER_STATUS_EXTERNAL_DATA,
                   "external data '%.*s': offset %llu + length %llu is past the end of the "
                   "%llu-byte file",
                   (int)location_len, location, (unsigned long long)offset,
                   (unsigned long long)length, (unsigned long long)fsize);
    goto fail;
  }
  if (length > model->limits.max_tensor_bytes || length > SIZE_MAX) {
    st = er__error(ER_STATUS_LIMIT,
                   "external data '%.*s': %llu bytes exceeds max_tensor_bytes (%llu)",
                   (int)location_len, location, (unsigned long long)length,
                   (unsigned long long)model->limits.max_tensor_bytes);
    goto fail;
  }
  data = er__aligned_alloc((size_t)length);
  if (!data) {
    st = ER_STATUS_OUT_OF_MEMORY;
    goto fail;
  }
  size_t done = 0;
  while (done < length) {
    ssize_t n = pread(fd, (char *)data + done, (size_t)length - done, (off_t)(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      st = er__error(ER_STATUS_IO, "external data '%.*s': read failed at byte %llu: %s",
                     (int)location_len, location, (unsigned long long)(offset + done),
                     n < 0 ? strerror(errno) : "unexpected end of file");
      goto fail;
    }
    done += (size_t)n;
  }
  close(fd);
  close(dirfd);
  *data_out = data;
  *length_out = length;
  return ER_STATUS_OK;

fail:
  er__aligned_free(data);
  if (fd >= 0) close(fd);
  if (dirfd >= 0) close(dirfd);
  return st;
}
