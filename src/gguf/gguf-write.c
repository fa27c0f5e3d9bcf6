/* gguf-write.c - the GGUF writer. Metadata and tensor infos are kept in
 * memory until the first tensor's data arrives (the header must come
 * first and holds every offset); tensor data then streams to the file. */
#define _DEFAULT_SOURCE /* fsync */
#include "gguf/gguf-write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIGN ER_GGUF_DEFAULT_ALIGNMENT

typedef struct wkv {
  char *key;
  uint32_t type;               /* er_gguf_vtype */
  uint8_t *bytes;              /* the value as the file holds it (after the type) */
  size_t n_bytes;
} wkv;

typedef struct wtensor {
  char *name;
  int n_dims;
  int64_t dims[ER_GGUF_MAX_DIMS];
  uint32_t type;
  uint64_t nbytes, offset;
} wtensor;

struct er_gguf_writer {
  char *path, *tmp;
  FILE *f;
  /* Memory mode (er__gguf_writer_open_memory): the image, sized exactly
   * when the header is written; `mem_len` bytes of it so far. */
  bool memory;
  uint8_t *mem;
  size_t mem_len, mem_cap;
  wkv *kv;
  size_t n_kv, cap_kv;
  wtensor *t;
  size_t n_t, cap_t;
  bool header_done;
  size_t next;                 /* the tensor whose data comes next */
  uint64_t written;            /* data-section bytes so far */
  er_status failed;            /* the first error, sticky */
};

static er_status fail(er_gguf_writer *w, er_status st) {
  if (w->failed == ER_STATUS_OK) w->failed = st;
  return st;
}

er_status er__gguf_writer_open(const char *path, er_gguf_writer **out) {
  er_gguf_writer *w = calloc(1, sizeof *w);
  if (!w) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory writing '%s'", path);
  size_t n = strlen(path) + 32;
  w->path = strdup(path);
  w->tmp = malloc(n);
  if (!w->path || !w->tmp) {
    er__gguf_writer_abort(w);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory writing '%s'", path);
  }
  snprintf(w->tmp, n, "%s.tmp-%ld", path, (long)getpid());
  w->f = fopen(w->tmp, "wb");
  if (!w->f) {
    er_status st = er__error(ER_STATUS_IO, "cannot create '%s': %s", w->tmp, strerror(errno));
    er__gguf_writer_abort(w);
    return st;
  }
  *out = w;
  return ER_STATUS_OK;
}

er_status er__gguf_writer_open_memory(er_gguf_writer **out) {
  er_gguf_writer *w = calloc(1, sizeof *w);
  if (!w) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a GGUF image");
  w->memory = true;
  w->tmp = strdup("the GGUF image in memory");
  if (!w->tmp) {
    er__gguf_writer_abort(w);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a GGUF image");
  }
  *out = w;
  return ER_STATUS_OK;
}

static void release(er_gguf_writer *w) {
  er__aligned_free(w->mem);
  for (size_t i = 0; i < w->n_kv; i++) {
    free(w->kv[i].key);
    free(w->kv[i].bytes);
  }
  for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
  free(w->kv);
  free(w->t);
  free(w->path);
  free(w->tmp);
  free(w);
}

void er__gguf_writer_abort(er_gguf_writer *w) {
  if (!w) return;
  if (w->f) fclose(w->f);
  if (w->tmp && !w->memory) unlink(w->tmp);
  release(w);
}

/* ---- metadata ------------------------------------------------------------------- */

static er_status set_kv(er_gguf_writer *w, const char *key, size_t key_len, uint32_t type, const void *bytes,
                        size_t n) {
  if (w->header_done) return fail(w, er__error(ER_STATUS_INTERNAL, "GGUF metadata set after tensor data began"));
  size_t i = 0;
  while (i < w->n_kv && !(strlen(w->kv[i].key) == key_len && memcmp(w->kv[i].key, key, key_len) == 0)) i++;
  if (i == w->n_kv) {
    if (w->n_kv == w->cap_kv) {
      size_t cap = w->cap_kv ? 2 * w->cap_kv : 64;
      wkv *nk = realloc(w->kv, cap * sizeof *nk);
      if (!nk) return fail(w, er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for GGUF metadata"));
      w->kv = nk;
      w->cap_kv = cap;
    }
    w->kv[i].key = malloc(key_len + 1);
    if (!w->kv[i].key) return fail(w, er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for GGUF metadata"));
    memcpy(w->kv[i].key, key, key_len);
    w->kv[i].key[key_len] = 0;
    w->kv[i].bytes = NULL;
    w->n_kv++;
  }
  uint8_t *copy = malloc(n ? n : 1);
  if (!copy) return fail(w, er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for GGUF metadata"));
  memcpy(copy, bytes, n);
  free(w->kv[i].bytes);
  w->kv[i].bytes = copy;
  w->kv[i].n_bytes = n;
  w->kv[i].type = type;
  return ER_STATUS_OK;
}

/* Bytes of one fixed-size value. */
static size_t vsize(uint32_t t) {
  switch (t) {
  case ER_GGUF_UINT8: case ER_GGUF_INT8: case ER_GGUF_BOOL: return 1;
  case ER_GGUF_UINT16: case ER_GGUF_INT16: return 2;
  case ER_GGUF_UINT32: case ER_GGUF_INT32: case ER_GGUF_FLOAT32: return 4;
  case ER_GGUF_UINT64: case ER_GGUF_INT64: case ER_GGUF_FLOAT64: return 8;
  default: return 0;
  }
}

er_status er__gguf_writer_kv_copy(er_gguf_writer *w, const er_gguf_kv *kv) {
  /* The value as the file stores it: [array header] then the elements. */
  uint64_t bytes = kv->type == ER_GGUF_ARRAY ? 12 : 0;
  if (kv->elem_type == ER_GGUF_STRING)
    for (uint64_t i = 0; i < kv->n; i++) bytes += 8 + kv->strs[i].len;
  else
    bytes += kv->n * vsize(kv->elem_type);
  uint8_t *buf = malloc((size_t)bytes + 1), *p = buf;
  if (!buf) return fail(w, er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory copying GGUF metadata"));
  if (kv->type == ER_GGUF_ARRAY) {
    uint32_t et = kv->elem_type;
    memcpy(p, &et, 4);
    memcpy(p + 4, &kv->n, 8);
    p += 12;
  }
  if (kv->elem_type == ER_GGUF_STRING) {
    for (uint64_t i = 0; i < kv->n; i++) {
      memcpy(p, &kv->strs[i].len, 8);
      memcpy(p + 8, kv->strs[i].p, (size_t)kv->strs[i].len);
      p += 8 + kv->strs[i].len;
    }
  } else {
    memcpy(p, kv->data, (size_t)(kv->n * vsize(kv->elem_type)));
  }
  er_status st = set_kv(w, kv->key.p, (size_t)kv->key.len, kv->type, buf, (size_t)bytes);
  free(buf);
  return st;
}

er_status er__gguf_writer_kv_u32(er_gguf_writer *w, const char *key, uint32_t v) {
  return set_kv(w, key, strlen(key), ER_GGUF_UINT32, &v, 4);
}

er_status er__gguf_writer_kv_f32(er_gguf_writer *w, const char *key, float v) {
  return set_kv(w, key, strlen(key), ER_GGUF_FLOAT32, &v, 4);
}

er_status er__gguf_writer_kv_str_array(er_gguf_writer *w, const char *key, const char *const *v, size_t n) {
  uint64_t bytes = 12;
  for (size_t i = 0; i < n; i++) bytes += 8 + strlen(v[i]);
  uint8_t *buf = malloc((size_t)bytes), *p = buf;
  if (!buf) return fail(w, er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for GGUF metadata"));
  uint32_t et = ER_GGUF_STRING;
  uint64_t count = n;
  memcpy(p, &et, 4);
  memcpy(p + 4, &count, 8);
  p += 12;
  for (size_t i = 0; i < n; i++) {
    uint64_t len = strlen(v[i]);
    memcpy(p, &len, 8);
    memcpy(p + 8, v[i], (size_t)len);
    p += 8 + len;
  }
  er_status st = set_kv(w, key, strlen(key), ER_GGUF_ARRAY, buf, (size_t)bytes);
  free(buf);
  return st;
}

er_status er__gguf_writer_kv_str(er_gguf_writer *w, const char *key, const char *v) {
  uint64_t n = strlen(v);
  uint8_t *buf = malloc((size_t)n + 8);
  if (!buf) return fail(w, er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for GGUF metadata"));
  memcpy(buf, &n, 8);
  memcpy(buf + 8, v, (size_t)n);
  er_status st = set_kv(w, key, strlen(key), ER_GGUF_STRING, buf, (size_t)n + 8);
  free(buf);
  return st;
}

/* ---- tensors ------------------------------------------------------------------- */

er_status er__gguf_writer_add_tensor(er_gguf_writer *w, const char *name, int n_dims, const int64_t *dims,
                                     uint32_t type) {
  if (w->header_done) return fail(w, er__error(ER_STATUS_INTERNAL, "GGUF tensor declared after tensor data began"));
  int64_t blck, bsize;
  if (n_dims < 1 || n_dims > ER_GGUF_MAX_DIMS || !er__ggml_type_geometry(type, &blck, &bsize) || dims[0] % blck)
    return fail(w, er__error(ER_STATUS_INVALID_ARGUMENT, "tensor '%s': %d dims of type %u cannot be written", name,
                             n_dims, type));
  if (strlen(name) > ER_GGUF_MAX_NAME_BYTES)
    return fail(w, er__error(ER_STATUS_LIMIT, "tensor name '%.40s...' is longer than %d bytes", name,
                             ER_GGUF_MAX_NAME_BYTES));
  if (w->n_t == w->cap_t) {
    size_t cap = w->cap_t ? 2 * w->cap_t : 256;
    wtensor *nt = realloc(w->t, cap * sizeof *nt);
    if (!nt) return fail(w, er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for GGUF tensor infos"));
    w->t = nt;
    w->cap_t = cap;
  }
  wtensor *t = &w->t[w->n_t];
  memset(t, 0, sizeof *t);
  t->name = strdup(name);
  if (!t->name) return fail(w, er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for GGUF tensor infos"));
  t->n_dims = n_dims;
  uint64_t count = 1;
  for (int d = 0; d < ER_GGUF_MAX_DIMS; d++) t->dims[d] = d < n_dims ? dims[d] : 1;
  for (int d = 0; d < n_dims; d++) count *= (uint64_t)dims[d];
  t->type = type;
  t->nbytes = count / (uint64_t)blck * (uint64_t)bsize;
  uint64_t off = 0;
  if (w->n_t) {
    const wtensor *p = &w->t[w->n_t - 1];
    off = (p->offset + p->nbytes + ALIGN - 1) / ALIGN * ALIGN;
  }
  t->offset = off;
  w->n_t++;
  return ER_STATUS_OK;
}

static bool put(er_gguf_writer *w, const void *p, size_t n) {
  if (!w->memory) return fwrite(p, 1, n, w->f) == n;
  if (!w->mem) { /* the header pass only counts */
    w->mem_len += n;
    return true;
  }
  if (n > w->mem_cap - w->mem_len) return false;
  memcpy(w->mem + w->mem_len, p, n);
  w->mem_len += n;
  return true;
}

static long tell(er_gguf_writer *w) { return w->memory ? (long)w->mem_len : ftell(w->f); }

static er_status write_header_to(er_gguf_writer *w);

/* Memory mode: the header's size is counted first, then the image is
 * allocated at its final size (header, padding, every tensor), so the
 * weights are written once and never moved. */
static er_status write_header(er_gguf_writer *w) {
  if (!w->memory) return write_header_to(w);
  w->mem_len = 0;
  ER_CHECK(write_header_to(w));
  uint64_t total = w->mem_len;
  if (w->n_t) total += w->t[w->n_t - 1].offset + w->t[w->n_t - 1].nbytes;
  if (total > SIZE_MAX / 2) return fail(w, er__error(ER_STATUS_LIMIT, "a GGUF image of %llu bytes", (unsigned long long)total));
  w->mem = er__aligned_alloc((size_t)total ? (size_t)total : 1);
  if (!w->mem)
    return fail(w, er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a GGUF image of %llu bytes",
                             (unsigned long long)total));
  w->mem_cap = (size_t)total;
  w->mem_len = 0;
  w->header_done = false;
  return write_header_to(w);
}

static bool put_str(er_gguf_writer *w, const char *s) {
  uint64_t n = strlen(s);
  return put(w, &n, 8) && put(w, s, (size_t)n);
}

static bool pad(er_gguf_writer *w, uint64_t pos) {
  static const uint8_t zeros[ALIGN];
  uint64_t p = (ALIGN - pos % ALIGN) % ALIGN;
  return put(w, zeros, (size_t)p);
}

static er_status write_header_to(er_gguf_writer *w) {
  uint32_t version = 3;
  uint64_t nt = w->n_t, nkv = w->n_kv;
  bool ok = put(w, "GGUF", 4) && put(w, &version, 4) && put(w, &nt, 8) && put(w, &nkv, 8);
  for (size_t i = 0; ok && i < w->n_kv; i++)
    ok = put_str(w, w->kv[i].key) && put(w, &w->kv[i].type, 4) && put(w, w->kv[i].bytes, w->kv[i].n_bytes);
  for (size_t i = 0; ok && i < w->n_t; i++) {
    const wtensor *t = &w->t[i];
    uint32_t nd = (uint32_t)t->n_dims;
    ok = put_str(w, t->name) && put(w, &nd, 4);
    for (int d = 0; ok && d < t->n_dims; d++) {
      uint64_t v = (uint64_t)t->dims[d];
      ok = put(w, &v, 8);
    }
    ok = ok && put(w, &t->type, 4) && put(w, &t->offset, 8);
  }
  long pos = tell(w);
  ok = ok && pos >= 0 && pad(w, (uint64_t)pos);
  if (!ok) return fail(w, er__error(ER_STATUS_IO, "cannot write '%s': %s", w->tmp, strerror(errno)));
  w->header_done = true;
  return ER_STATUS_OK;
}

er_status er__gguf_writer_data(er_gguf_writer *w, const void *data, uint64_t nbytes) {
  if (w->failed != ER_STATUS_OK) return w->failed;
  if (!w->header_done) ER_CHECK(write_header(w));
  if (w->next >= w->n_t)
    return fail(w, er__error(ER_STATUS_INTERNAL, "more GGUF tensor data than the %zu tensors declared", w->n_t));
  const wtensor *t = &w->t[w->next];
  if (nbytes != t->nbytes)
    return fail(w, er__error(ER_STATUS_INTERNAL, "tensor '%s': %llu bytes given, %llu declared", t->name,
                             (unsigned long long)nbytes, (unsigned long long)t->nbytes));
  static const uint8_t zeros[ALIGN];
  bool ok = put(w, zeros, (size_t)(t->offset - w->written)) && put(w, data, (size_t)nbytes);
  if (!ok) return fail(w, er__error(ER_STATUS_IO, "cannot write '%s': %s", w->tmp, strerror(errno)));
  w->written = t->offset + nbytes;
  w->next++;
  return ER_STATUS_OK;
}

er_status er__gguf_writer_commit(er_gguf_writer *w) {
  er_status st = w->failed;
  if (st == ER_STATUS_OK && !w->header_done) st = write_header(w);
  if (st == ER_STATUS_OK && w->next != w->n_t)
    st = er__error(ER_STATUS_INTERNAL, "GGUF writer: %zu of %zu tensors written", w->next, w->n_t);
  if (st == ER_STATUS_OK && (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0))
    st = er__error(ER_STATUS_IO, "cannot write '%s': %s", w->tmp, strerror(errno));
  if (fclose(w->f) != 0 && st == ER_STATUS_OK) st = er__error(ER_STATUS_IO, "cannot close '%s'", w->tmp);
  w->f = NULL;
  if (st == ER_STATUS_OK && rename(w->tmp, w->path) != 0)
    st = er__error(ER_STATUS_IO, "cannot rename '%s' to '%s': %s", w->tmp, w->path, strerror(errno));
  if (st != ER_STATUS_OK) unlink(w->tmp);
  release(w);
  return st;
}

er_status er__gguf_writer_finish_memory(er_gguf_writer *w, void **data_out, size_t *size_out) {
  er_status st = w->failed;
  if (st == ER_STATUS_OK && !w->memory) st = er__error(ER_STATUS_INTERNAL, "GGUF writer: not in memory mode");
  if (st == ER_STATUS_OK && !w->header_done) st = write_header(w);
  if (st == ER_STATUS_OK && w->next != w->n_t)
    st = er__error(ER_STATUS_INTERNAL, "GGUF writer: %zu of %zu tensors written", w->next, w->n_t);
  if (st == ER_STATUS_OK && w->mem_len != w->mem_cap)
    st = er__error(ER_STATUS_INTERNAL, "GGUF writer: %zu of %zu image bytes written", w->mem_len, w->mem_cap);
  if (st == ER_STATUS_OK) {
    *data_out = w->mem;
    *size_out = w->mem_len;
    w->mem = NULL;
  }
  release(w);
  return st;
}
