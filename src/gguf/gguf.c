/* gguf.c - the GGUF reader: one pass over the header with a bounded
 * cursor, then the tensor extents checked against each other and the file.
 * Nothing is allocated from a count before the count is checked against
 * both its cap and the bytes that could hold it. */
#define _DEFAULT_SOURCE /* madvise */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct er_gguf {
  const uint8_t *base;         /* the file's bytes */
  size_t size;
  bool mapped;                 /* munmap on close */
  char what[256];              /* file name for messages */
  uint32_t version;
  uint32_t alignment;
  uint64_t data_offset;        /* start of the tensor data section */
  er_gguf_kv *kvs;             /* [n_kv] */
  size_t n_kv;
  er_gguf_tensor *tensors;     /* [n_tensors] */
  size_t n_tensors;
  /* Open-addressed name -> tensor index, built once; -1 = empty. */
  int32_t *tindex;
  size_t tindex_cap;
};

/* ======================================================================== */
/* Type tables                                                               */
/* ======================================================================== */

typedef struct ggml_geom {
  const char *name;
  int64_t blck, size;
} ggml_geom;

static const ggml_geom *geom_of(uint32_t type) {
  static const ggml_geom table[ER_GGML_TYPE_COUNT_] = {
#define ER__GGML_ROW(nm, id, blck, sz) [id] = {#nm, blck, sz},
      ER_GGML_TYPE_LIST(ER__GGML_ROW)
#undef ER__GGML_ROW
  };
  if (type >= ER_GGML_TYPE_COUNT_ || !table[type].name) return NULL;
  return &table[type];
}

const char *er__ggml_type_name(uint32_t type) {
  const ggml_geom *g = geom_of(type);
  return g ? g->name : NULL;
}

bool er__ggml_type_geometry(uint32_t type, int64_t *block_elems_out, int64_t *block_bytes_out) {
  const ggml_geom *g = geom_of(type);
  if (!g) return false;
  *block_elems_out = g->blck;
  *block_bytes_out = g->size;
  return true;
}

const char *er__gguf_vtype_name(er_gguf_vtype t) {
  static const char *const names[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32",  "float32",
                                      "bool",  "string", "array",  "uint64", "int64", "float64"};
  return (unsigned)t < ER_ARRAY_LEN(names) ? names[t] : "unknown";
}

/* Bytes of one value of a fixed-size type; 0 for string and array. */
static size_t vtype_size(er_gguf_vtype t) {
  switch (t) {
  case ER_GGUF_UINT8:
  case ER_GGUF_INT8:
  case ER_GGUF_BOOL: return 1;
  case ER_GGUF_UINT16:
  case ER_GGUF_INT16: return 2;
  case ER_GGUF_UINT32:
  case ER_GGUF_INT32:
  case ER_GGUF_FLOAT32: return 4;
  case ER_GGUF_UINT64:
  case ER_GGUF_INT64:
  case ER_GGUF_FLOAT64: return 8;
  default: return 0;
  }
}

/* ======================================================================== */
/* The bounded cursor                                                        */
/* ======================================================================== */

typedef struct cursor {
  const er_gguf *g;
  size_t pos;
} cursor;

static size_t left(const cursor *c) { return c->g->size - c->pos; }

static er_status need(const cursor *c, uint64_t n, const char *field) {
  if (n > left(c))
    return er__error(ER_STATUS_TRUNCATED, "%s: %s needs %llu bytes at offset %zu but the file has %zu left",
                     c->g->what, field, (unsigned long long)n, c->pos, left(c));
  return ER_STATUS_OK;
}

static er_status read_u32(cursor *c, const char *field, uint32_t *out) {
  ER_CHECK(need(c, 4, field));
  memcpy(out, c->g->base + c->pos, 4);
  c->pos += 4;
  return ER_STATUS_OK;
}

static er_status read_u64(cursor *c, const char *field, uint64_t *out) {
  ER_CHECK(need(c, 8, field));
  memcpy(out, c->g->base + c->pos, 8);
  c->pos += 8;
  return ER_STATUS_OK;
}

static er_status read_str(cursor *c, const char *field, uint64_t cap, er_gguf_str *out) {
  uint64_t len;
  ER_CHECK(read_u64(c, field, &len));
  if (len > cap)
    return er__error(ER_STATUS_LIMIT, "%s: %s is %llu bytes long; at most %llu are allowed", c->g->what, field,
                     (unsigned long long)len, (unsigned long long)cap);
  ER_CHECK(need(c, len, field));
  out->p = (const char *)c->g->base + c->pos;
  out->len = len;
  c->pos += (size_t)len;
  return ER_STATUS_OK;
}

/* A key or name for messages: at most 80 bytes, non-printing bytes as '?'. */
static const char *show(const er_gguf_str *s, char *buf, size_t cap) {
  size_t n = s->len < cap - 4 ? (size_t)s->len : cap - 4;
  if (n > 80) n = 80;
  for (size_t i = 0; i < n; i++) buf[i] = s->p[i] >= 32 && s->p[i] < 127 ? s->p[i] : '?';
  if (n < s->len) {
    memcpy(buf + n, "...", 3);
    n += 3;
  }
  buf[n] = 0;
  return buf;
}

static bool str_eq(const er_gguf_str *s, const char *z) {
  size_t n = strlen(z);
  return s->len == n && memcmp(s->p, z, n) == 0;
}

/* ======================================================================== */
/* Parsing                                                                   */
/* ======================================================================== */

static er_status parse_value(cursor *c, er_gguf_kv *kv, const char *key) {
  char field[160];
  uint32_t t;
  snprintf(field, sizeof field, "the type of key '%s'", key);
  ER_CHECK(read_u32(c, field, &t));
  if (t >= ER_GGUF_VTYPE_COUNT_)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: key '%s' has value type %u, which GGUF does not define (0-12)",
                     c->g->what, key, t);
  kv->type = (er_gguf_vtype)t;
  kv->elem_type = kv->type;
  kv->n = 1;
  if (kv->type == ER_GGUF_ARRAY) {
    uint32_t et;
    uint64_t n;
    snprintf(field, sizeof field, "the element type of array '%s'", key);
    ER_CHECK(read_u32(c, field, &et));
    if (et >= ER_GGUF_VTYPE_COUNT_ || et == ER_GGUF_ARRAY)
      return er__error(ER_STATUS_UNSUPPORTED,
                       "%s: array '%s' has element type %u; GGUF arrays hold numbers, bools or strings (0-8, 10-12)",
                       c->g->what, key, et);
    snprintf(field, sizeof field, "the length of array '%s'", key);
    ER_CHECK(read_u64(c, field, &n));
    if (n > ER_GGUF_MAX_ARRAY)
      return er__error(ER_STATUS_LIMIT, "%s: array '%s' declares %llu elements; at most %u (ER_GGUF_MAX_ARRAY)",
                       c->g->what, key, (unsigned long long)n, ER_GGUF_MAX_ARRAY);
    kv->elem_type = (er_gguf_vtype)et;
    kv->n = n;
  }
  if (kv->elem_type == ER_GGUF_STRING) {
    /* Each string takes at least its 8-byte length: a count the bytes
     * left cannot hold is refused before the index is allocated. */
    if (kv->n > left(c) / 8)
      return er__error(ER_STATUS_TRUNCATED, "%s: key '%s' declares %llu strings but only %zu bytes are left",
                       c->g->what, key, (unsigned long long)kv->n, left(c));
    kv->strs = malloc((size_t)kv->n * sizeof *kv->strs + 1);
    if (!kv->strs) return er__error(ER_STATUS_OUT_OF_MEMORY, "%s: out of memory indexing key '%s'", c->g->what, key);
    kv->data = c->g->base + c->pos;
    for (uint64_t i = 0; i < kv->n; i++) {
      snprintf(field, sizeof field, "string %llu of key '%s'", (unsigned long long)i, key);
      ER_CHECK(read_str(c, field, ER_GGUF_MAX_STRING_BYTES, &kv->strs[i]));
    }
    return ER_STATUS_OK;
  }
  size_t es = vtype_size(kv->elem_type);
  uint64_t bytes;
  if (!er__mul_u64(kv->n, es, &bytes))
    return er__error(ER_STATUS_LIMIT, "%s: key '%s': %llu values of %zu bytes overflow", c->g->what, key,
                     (unsigned long long)kv->n, es);
  snprintf(field, sizeof field, "the value of key '%s'", key);
  ER_CHECK(need(c, bytes, field));
  kv->data = c->g->base + c->pos;
  c->pos += (size_t)bytes;
  if (kv->elem_type == ER_GGUF_BOOL)
    for (uint64_t i = 0; i < kv->n; i++)
      if (kv->data[i] > 1)
        return er__error(ER_STATUS_INVALID_MODEL, "%s: key '%s': bool %llu is %u, not 0 or 1", c->g->what, key,
                         (unsigned long long)i, kv->data[i]);
  return ER_STATUS_OK;
}

static uint32_t hash_bytes(const char *p, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) {
    h ^= (uint8_t)p[i];
    h *= 16777619u;
  }
  return h;
}

static er_status parse_tensor(cursor *c, size_t i, er_gguf_tensor *t) {
  char field[160], nb[96];
  snprintf(field, sizeof field, "the name of tensor %zu", i);
  ER_CHECK(read_str(c, field, ER_GGUF_MAX_NAME_BYTES, &t->name));
  if (t->name.len == 0) return er__error(ER_STATUS_INVALID_MODEL, "%s: tensor %zu has an empty name", c->g->what, i);
  if (memchr(t->name.p, 0, (size_t)t->name.len))
    return er__error(ER_STATUS_INVALID_MODEL, "%s: the name of tensor %zu holds a NUL byte", c->g->what, i);
  memcpy(t->name_z, t->name.p, (size_t)t->name.len);
  t->name_z[t->name.len] = 0;
  const char *nm = show(&t->name, nb, sizeof nb);
  uint32_t nd;
  snprintf(field, sizeof field, "the dim count of tensor '%s'", nm);
  ER_CHECK(read_u32(c, field, &nd));
  if (nd < 1 || nd > ER_GGUF_MAX_DIMS)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: tensor '%s' has %u dims; GGUF tensors have 1 to %d",
                     c->g->what, nm, nd, ER_GGUF_MAX_DIMS);
  t->n_dims = (int)nd;
  uint64_t count = 1;
  for (int d = 0; d < ER_GGUF_MAX_DIMS; d++) t->dims[d] = 1;
  for (uint32_t d = 0; d < nd; d++) {
    uint64_t v;
    snprintf(field, sizeof field, "dim %u of tensor '%s'", d, nm);
    ER_CHECK(read_u64(c, field, &v));
    if (v > (uint64_t)INT64_MAX)
      return er__error(ER_STATUS_INVALID_SHAPE, "%s: tensor '%s' dim %u is %llu, negative as a signed count",
                       c->g->what, nm, d, (unsigned long long)v);
    if (!er__mul_u64(count, v, &count) || count > (uint64_t)INT64_MAX)
      return er__error(ER_STATUS_INVALID_SHAPE, "%s: the dims of tensor '%s' multiply past 2^63 elements", c->g->what,
                       nm);
    t->dims[d] = (int64_t)v;
  }
  t->n_elems = count;
  snprintf(field, sizeof field, "the type of tensor '%s'", nm);
  ER_CHECK(read_u32(c, field, &t->type));
  int64_t blck, bsize;
  if (!er__ggml_type_geometry(t->type, &blck, &bsize))
    return er__error(ER_STATUS_UNSUPPORTED, "%s: tensor '%s' has type %u, which is not a known ggml type",
                     c->g->what, nm, t->type);
  if (t->dims[0] % blck != 0)
    return er__error(ER_STATUS_INVALID_SHAPE, "%s: tensor '%s' of type %s has rows of %lld elements, not a multiple "
                     "of its block of %lld",
                     c->g->what, nm, er__ggml_type_name(t->type), (long long)t->dims[0], (long long)blck);
  if (!er__mul_u64(count / (uint64_t)blck, (uint64_t)bsize, &t->nbytes))
    return er__error(ER_STATUS_LIMIT, "%s: tensor '%s': its byte size overflows", c->g->what, nm);
  snprintf(field, sizeof field, "the offset of tensor '%s'", nm);
  ER_CHECK(read_u64(c, field, &t->offset));
  return ER_STATUS_OK;
}

static int cmp_offset(const void *a, const void *b) {
  const er_gguf_tensor *const *x = a, *const *y = b;
  return (*x)->offset < (*y)->offset ? -1 : (*x)->offset > (*y)->offset ? 1 : 0;
}

static er_status check_tensors(er_gguf *g) {
  uint64_t data_bytes = g->size - g->data_offset;
  char nb[96], nb2[96];
  for (size_t i = 0; i < g->n_tensors; i++) {
    er_gguf_tensor *t = &g->tensors[i];
    const char *nm = show(&t->name, nb, sizeof nb);
    if (t->offset % g->alignment != 0)
      return er__error(ER_STATUS_INVALID_MODEL, "%s: tensor '%s' is at offset %llu, not a multiple of the alignment %u",
                       g->what, nm, (unsigned long long)t->offset, g->alignment);
    uint64_t end;
    if (!er__add_u64(t->offset, t->nbytes, &end) || end > data_bytes)
      return er__error(ER_STATUS_TRUNCATED, "%s: tensor '%s' (%llu bytes at offset %llu) ends past the %llu bytes of "
                       "tensor data in the file",
                       g->what, nm, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                       (unsigned long long)data_bytes);
    t->data = g->base + g->data_offset + t->offset;
  }
  /* No two tensors share bytes. */
  er_gguf_tensor **by = malloc((g->n_tensors + 1) * sizeof *by);
  if (!by) return er__error(ER_STATUS_OUT_OF_MEMORY, "%s: out of memory checking tensor offsets", g->what);
  for (size_t i = 0; i < g->n_tensors; i++) by[i] = &g->tensors[i];
  qsort(by, g->n_tensors, sizeof *by, cmp_offset);
  er_status st = ER_STATUS_OK;
  for (size_t i = 1; i < g->n_tensors && st == ER_STATUS_OK; i++)
    if (by[i - 1]->nbytes > 0 && by[i]->offset < by[i - 1]->offset + by[i - 1]->nbytes)
      st = er__error(ER_STATUS_INVALID_MODEL, "%s: tensor '%s' at offset %llu overlaps tensor '%s' (%llu bytes at %llu)",
                     g->what, show(&by[i]->name, nb, sizeof nb), (unsigned long long)by[i]->offset,
                     show(&by[i - 1]->name, nb2, sizeof nb2), (unsigned long long)by[i - 1]->nbytes,
                     (unsigned long long)by[i - 1]->offset);
  free(by);
  if (st != ER_STATUS_OK) return st;
  /* Names are unique: a hash index, built once. */
  size_t cap = 16;
  while (cap < 2 * g->n_tensors) cap *= 2;
  g->tindex = malloc(cap * sizeof *g->tindex);
  if (!g->tindex) return er__error(ER_STATUS_OUT_OF_MEMORY, "%s: out of memory indexing tensor names", g->what);
  g->tindex_cap = cap;
  for (size_t i = 0; i < cap; i++) g->tindex[i] = -1;
  for (size_t i = 0; i < g->n_tensors; i++) {
    const er_gguf_tensor *t = &g->tensors[i];
    size_t j = hash_bytes(t->name.p, (size_t)t->name.len) & (cap - 1);
    for (; g->tindex[j] >= 0; j = (j + 1) & (cap - 1))
      if (strcmp(g->tensors[g->tindex[j]].name_z, t->name_z) == 0)
        return er__error(ER_STATUS_INVALID_MODEL, "%s: tensor '%s' is defined twice", g->what,
                         show(&t->name, nb, sizeof nb));
    g->tindex[j] = (int32_t)i;
  }
  return ER_STATUS_OK;
}

static er_status parse(er_gguf *g) {
  cursor c = {g, 0};
  uint32_t magic;
  ER_CHECK(need(&c, 4, "the magic"));
  memcpy(&magic, g->base, 4);
  if (memcmp(g->base, "GGUF", 4) != 0)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: not a GGUF file (the first 4 bytes are not \"GGUF\")", g->what);
  c.pos = 4;
  ER_CHECK(read_u32(&c, "the version", &g->version));
  if (g->version != 2 && g->version != 3)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: GGUF version %u is not supported (versions 2 and 3 are)", g->what,
                     g->version);
  uint64_t nt, nkv;
  ER_CHECK(read_u64(&c, "the tensor count", &nt));
  ER_CHECK(read_u64(&c, "the key-value count", &nkv));
  if (nt > ER_GGUF_MAX_TENSORS)
    return er__error(ER_STATUS_LIMIT, "%s: %llu tensors declared; at most %d (ER_GGUF_MAX_TENSORS)", g->what,
                     (unsigned long long)nt, ER_GGUF_MAX_TENSORS);
  if (nkv > ER_GGUF_MAX_KV)
    return er__error(ER_STATUS_LIMIT, "%s: %llu key-value pairs declared; at most %d (ER_GGUF_MAX_KV)", g->what,
                     (unsigned long long)nkv, ER_GGUF_MAX_KV);
  /* A pair takes at least 8 + 4 bytes, a tensor info 8 + 4 + 8 + 4 + 8. */
  if (nkv > left(&c) / 12 || nt > left(&c) / 32)
    return er__error(ER_STATUS_TRUNCATED, "%s: %llu key-value pairs and %llu tensors cannot fit in the %zu bytes left",
                     g->what, (unsigned long long)nkv, (unsigned long long)nt, left(&c));
  g->kvs = calloc((size_t)nkv + 1, sizeof *g->kvs);
  g->tensors = calloc((size_t)nt + 1, sizeof *g->tensors);
  if (!g->kvs || !g->tensors) return er__error(ER_STATUS_OUT_OF_MEMORY, "%s: out of memory reading the header", g->what);
  char kb[96];
  g->alignment = ER_GGUF_DEFAULT_ALIGNMENT;
  for (size_t i = 0; i < nkv; i++) {
    er_gguf_kv *kv = &g->kvs[i];
    char field[64];
    snprintf(field, sizeof field, "key %zu", i);
    ER_CHECK(read_str(&c, field, ER_GGUF_MAX_KEY_BYTES, &kv->key));
    g->n_kv = i + 1; /* kv->strs is freed from here on */
    const char *key = show(&kv->key, kb, sizeof kb);
    for (size_t j = 0; j < i; j++)
      if (g->kvs[j].key.len == kv->key.len && memcmp(g->kvs[j].key.p, kv->key.p, (size_t)kv->key.len) == 0)
        return er__error(ER_STATUS_INVALID_MODEL, "%s: key '%s' appears twice", g->what, key);
    ER_CHECK(parse_value(&c, kv, key));
    if (str_eq(&kv->key, "general.alignment")) {
      if (kv->type != ER_GGUF_UINT32)
        return er__error(ER_STATUS_TYPE_MISMATCH, "%s: general.alignment is %s; it must be uint32", g->what,
                         er__gguf_vtype_name(kv->type));
      uint32_t a;
      memcpy(&a, kv->data, 4);
      if (a == 0 || (a & (a - 1)) != 0 || a > ER_GGUF_MAX_ALIGNMENT)
        return er__error(ER_STATUS_INVALID_MODEL, "%s: general.alignment is %u; it must be a power of two up to %u",
                         g->what, a, ER_GGUF_MAX_ALIGNMENT);
      g->alignment = a;
    }
  }
  for (size_t i = 0; i < nt; i++) {
    ER_CHECK(parse_tensor(&c, i, &g->tensors[i]));
    g->n_tensors = i + 1;
  }
  uint64_t off = c.pos, pad = (g->alignment - off % g->alignment) % g->alignment;
  if (nt > 0 && pad > left(&c))
    return er__error(ER_STATUS_TRUNCATED, "%s: the file ends before its tensor data section (at offset %llu)", g->what,
                     (unsigned long long)(off + pad));
  g->data_offset = off + pad > g->size ? g->size : off + pad;
  return check_tensors(g);
}

/* ======================================================================== */
/* Open / close                                                              */
/* ======================================================================== */

static er_gguf *alloc_reader(const char *what) {
  er_gguf *g = calloc(1, sizeof *g);
  if (!g) {
    er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory opening a GGUF file");
    return NULL;
  }
  const char *slash = what ? strrchr(what, '/') : NULL;
  snprintf(g->what, sizeof g->what, "%s", slash ? slash + 1 : what ? what : "GGUF data");
  return g;
}

er_status er__gguf_open_buffer(const void *data, size_t size, const char *what, er_gguf **out) {
  if (!out || (!data && size)) return er__error(ER_STATUS_INVALID_ARGUMENT, "GGUF buffer or out is NULL");
  er_gguf *g = alloc_reader(what);
  if (!g) return ER_STATUS_OUT_OF_MEMORY;
  g->base = data ? data : (const uint8_t *)"";
  g->size = size;
  er_status st = parse(g);
  if (st != ER_STATUS_OK) {
    er__gguf_close(g);
    return st;
  }
  *out = g;
  return ER_STATUS_OK;
}

er_status er__gguf_open(const char *path, uint64_t max_file_bytes, er_gguf **out) {
  if (!path || !out) return er__error(ER_STATUS_INVALID_ARGUMENT, "GGUF path or out is NULL");
  if (!max_file_bytes) max_file_bytes = ER_DEFAULT_MAX_FILE_BYTES;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return er__error(ER_STATUS_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return er__error(ER_STATUS_IO, "'%s' is not a regular file", path);
  }
  if ((uint64_t)sb.st_size > max_file_bytes) {
    close(fd);
    return er__error(ER_STATUS_LIMIT, "'%s' is %lld bytes; the cap is %llu (max_file_bytes)", path,
                     (long long)sb.st_size, (unsigned long long)max_file_bytes);
  }
  er_gguf *g = alloc_reader(path);
  if (!g) {
    close(fd);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  g->size = (size_t)sb.st_size;
  if (g->size > 0) {
    void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int e = errno;
      close(fd);
      free(g);
      return er__error(ER_STATUS_IO, "cannot map '%s': %s", path, strerror(e));
    }
    g->base = m;
    g->mapped = true;
  } else {
    g->base = (const uint8_t *)"";
  }
  close(fd);
  er_status st = parse(g);
  if (st != ER_STATUS_OK) {
    er__gguf_close(g);
    return st;
  }
  *out = g;
  return ER_STATUS_OK;
}

void er__gguf_close(er_gguf *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n_kv; i++) free(g->kvs[i].strs);
  free(g->kvs);
  free(g->tensors);
  free(g->tindex);
  if (g->mapped) munmap((void *)g->base, g->size);
  free(g);
}

/* ======================================================================== */
/* Lookups                                                                   */
/* ======================================================================== */

uint32_t er__gguf_version(const er_gguf *g) { return g->version; }
size_t er__gguf_kv_count(const er_gguf *g) { return g->n_kv; }
const er_gguf_kv *er__gguf_kv_at(const er_gguf *g, size_t i) { return i < g->n_kv ? &g->kvs[i] : NULL; }
size_t er__gguf_tensor_count(const er_gguf *g) { return g->n_tensors; }
const er_gguf_tensor *er__gguf_tensor_at(const er_gguf *g, size_t i) {
  return i < g->n_tensors ? &g->tensors[i] : NULL;
}
const char *er__gguf_what(const er_gguf *g) { return g->what; }

void er__gguf_mapping(const er_gguf *g, const void **base_out, size_t *size_out) {
  *base_out = g->base;
  *size_out = g->size;
}

const er_gguf_kv *er__gguf_find(const er_gguf *g, const char *key) {
  for (size_t i = 0; i < g->n_kv; i++)
    if (str_eq(&g->kvs[i].key, key)) return &g->kvs[i];
  return NULL;
}

const er_gguf_tensor *er__gguf_find_tensor(const er_gguf *g, const char *name) {
  if (!g->tindex_cap) return NULL;
  size_t cap = g->tindex_cap;
  for (size_t j = hash_bytes(name, strlen(name)) & (cap - 1); g->tindex[j] >= 0; j = (j + 1) & (cap - 1))
    if (strcmp(g->tensors[g->tindex[j]].name_z, name) == 0) return &g->tensors[g->tindex[j]];
  return NULL;
}

/* A float value as an integer, truncated, saturating at the int64 range;
 * NaN gives 0 (a plain cast of those is undefined). */
static int64_t f64_to_i64(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

int64_t er__gguf_kv_i64(const er_gguf_kv *kv, uint64_t i) {
  const uint8_t *p = kv->data + i * vtype_size(kv->elem_type);
  switch (kv->elem_type) {
  case ER_GGUF_UINT8:
  case ER_GGUF_BOOL: return *p;
  case ER_GGUF_INT8: return (int8_t)*p;
  case ER_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
  case ER_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
  case ER_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
  case ER_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
  case ER_GGUF_UINT64: { uint64_t v; memcpy(&v, p, 8); return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v; }
  case ER_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); return v; }
  case ER_GGUF_FLOAT32: { float v; memcpy(&v, p, 4); return f64_to_i64(v); }
  case ER_GGUF_FLOAT64: { double v; memcpy(&v, p, 8); return f64_to_i64(v); }
  default: return 0;
  }
}

double er__gguf_kv_f64(const er_gguf_kv *kv, uint64_t i) {
  const uint8_t *p = kv->data + i * vtype_size(kv->elem_type);
  if (kv->elem_type == ER_GGUF_FLOAT32) {
    float v;
    memcpy(&v, p, 4);
    return v;
  }
  if (kv->elem_type == ER_GGUF_FLOAT64) {
    double v;
    memcpy(&v, p, 8);
    return v;
  }
  return (double)er__gguf_kv_i64(kv, i);
}

static bool is_int(er_gguf_vtype t) {
  return t == ER_GGUF_UINT8 || t == ER_GGUF_INT8 || t == ER_GGUF_UINT16 || t == ER_GGUF_INT16 ||
         t == ER_GGUF_UINT32 || t == ER_GGUF_INT32 || t == ER_GGUF_UINT64 || t == ER_GGUF_INT64;
}

static er_status scalar(const er_gguf *g, const char *key, const er_gguf_kv **kv_out) {
  const er_gguf_kv *kv = er__gguf_find(g, key);
  if (!kv) return ER_STATUS_NOT_FOUND; /* no message: callers with defaults ignore it */
  if (kv->type == ER_GGUF_ARRAY)
    return er__error(ER_STATUS_TYPE_MISMATCH, "%s: key '%s' is an array; a single value was expected", g->what, key);
  *kv_out = kv;
  return ER_STATUS_OK;
}

er_status er__gguf_get_i64(const er_gguf *g, const char *key, int64_t *out) {
  const er_gguf_kv *kv = NULL;
  ER_CHECK(scalar(g, key, &kv));
  if (!is_int(kv->type))
    return er__error(ER_STATUS_TYPE_MISMATCH, "%s: key '%s' is %s; an integer was expected", g->what, key,
                     er__gguf_vtype_name(kv->type));
  if (kv->type == ER_GGUF_UINT64) {
    uint64_t v;
    memcpy(&v, kv->data, 8);
    if (v > (uint64_t)INT64_MAX)
      return er__error(ER_STATUS_OUT_OF_RANGE, "%s: key '%s' is %llu, past the int64 range", g->what, key,
                       (unsigned long long)v);
  }
  *out = er__gguf_kv_i64(kv, 0);
  return ER_STATUS_OK;
}

er_status er__gguf_get_u64(const er_gguf *g, const char *key, uint64_t *out) {
  const er_gguf_kv *kv = NULL;
  ER_CHECK(scalar(g, key, &kv));
  if (kv->type == ER_GGUF_UINT64) {
    memcpy(out, kv->data, 8);
    return ER_STATUS_OK;
  }
  int64_t v;
  ER_CHECK(er__gguf_get_i64(g, key, &v));
  if (v < 0) return er__error(ER_STATUS_OUT_OF_RANGE, "%s: key '%s' is %lld; it must not be negative", g->what, key, (long long)v);
  *out = (uint64_t)v;
  return ER_STATUS_OK;
}

er_status er__gguf_get_u32(const er_gguf *g, const char *key, uint32_t *out) {
  uint64_t v;
  ER_CHECK(er__gguf_get_u64(g, key, &v));
  if (v > UINT32_MAX)
    return er__error(ER_STATUS_OUT_OF_RANGE, "%s: key '%s' is %llu, past the uint32 range", g->what, key,
                     (unsigned long long)v);
  *out = (uint32_t)v;
  return ER_STATUS_OK;
}

er_status er__gguf_get_f32(const er_gguf *g, const char *key, float *out) {
  const er_gguf_kv *kv = NULL;
  ER_CHECK(scalar(g, key, &kv));
  if (kv->type != ER_GGUF_FLOAT32 && kv->type != ER_GGUF_FLOAT64 && !is_int(kv->type))
    return er__error(ER_STATUS_TYPE_MISMATCH, "%s: key '%s' is %s; a number was expected", g->what, key,
                     er__gguf_vtype_name(kv->type));
  *out = (float)er__gguf_kv_f64(kv, 0);
  return ER_STATUS_OK;
}

er_status er__gguf_get_bool(const er_gguf *g, const char *key, bool *out) {
  const er_gguf_kv *kv = NULL;
  ER_CHECK(scalar(g, key, &kv));
  if (kv->type != ER_GGUF_BOOL)
    return er__error(ER_STATUS_TYPE_MISMATCH, "%s: key '%s' is %s; a bool was expected", g->what, key,
                     er__gguf_vtype_name(kv->type));
  *out = kv->data[0] != 0;
  return ER_STATUS_OK;
}

er_status er__gguf_get_str(const er_gguf *g, const char *key, er_gguf_str *out) {
  const er_gguf_kv *kv = NULL;
  ER_CHECK(scalar(g, key, &kv));
  if (kv->type != ER_GGUF_STRING)
    return er__error(ER_STATUS_TYPE_MISMATCH, "%s: key '%s' is %s; a string was expected", g->what, key,
                     er__gguf_vtype_name(kv->type));
  *out = kv->strs[0];
  return ER_STATUS_OK;
}
