/* dataset.c - calibration / evaluation data: files found at open, read one
 * batch at a time. See dataset.h for the layouts understood.
 *
 * The blueprint: a data set is a list of "chunks"; a chunk is one group of
 * files that together feed every model input with the same number of
 * samples (one .npy per input, one test_data_set_* folder, one image). Only
 * the current chunk's data is open at a time: .npy files are mapped and
 * sliced, .pb files are parsed when their chunk comes up and freed after. */
#define _GNU_SOURCE
#include "quant/dataset.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx.h"

/* The largest .pb tensor file read whole (bytes). */
#define ER_QDATA_MAX_PB_BYTES (UINT64_C(1) << 31)

enum { SRC_NPY, SRC_PB, SRC_IMAGE };

/* One file feeding one input. */
typedef struct src {
  char *path;
  int kind;
  er_dtype dtype;           /* element type in the file */
  int rank;
  int64_t dims[ER_MAX_RANK];
  bool batched;             /* leading axis holds samples */
  /* .npy: where the elements start in the file. */
  size_t data_offset;
} src;

typedef struct chunk {
  src *srcs;                /* [n_inputs] */
  int64_t samples;
} chunk;

struct er_qdata {
  const er_model *model;
  er_qdata_options opts;
  size_t n_inputs;
  const er_value *inputs[ER_QDATA_MAX_INPUTS];  /* the model's fed inputs */
  int64_t fixed_batch;      /* the inputs' fixed leading dim, or 0 */
  chunk *chunks;
  size_t n_chunks, cap_chunks;
  int64_t total;            /* samples after skip/limit */

  /* Reading position. */
  size_t cur;               /* chunk index */
  int64_t pos;              /* sample within the chunk */
  int64_t served;           /* samples handed out */
  bool skipped;
  /* The open chunk's data. */
  int fds[ER_QDATA_MAX_INPUTS];              /* open .npy files, -1 */
  void *scratch;                              /* float64 rows being converted */
  size_t scratch_bytes;
  er_tensor loaded[ER_QDATA_MAX_INPUTS];  /* .pb and image data */
  size_t open_chunk;        /* SIZE_MAX = none */
  er_tensor batch[ER_QDATA_MAX_INPUTS];   /* what next() hands out */
};

/* ======================================================================== */
/* Options                                                                   */
/* ======================================================================== */

void er_image_prep_init(er_image_prep *p) {
  memset(p, 0, sizeof *p);
  p->scale = 1.0f / 255.0f;
  for (int i = 0; i < 3; i++) p->std[i] = 1.0f;
}

void er_qdata_options_init(er_qdata_options *o) {
  memset(o, 0, sizeof *o);
  o->batch = 1;
  er_image_prep_init(&o->image);
}

static bool parse_floats3(const char *s, float *out) {
  float v[3];
  int n = 0;
  while (n < 3) {
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || end == s || !isfinite(d)) return false;
    v[n++] = (float)d;
    if (*end == '\0') break;
    if (*end != ':') return false;
    s = end + 1;
  }
  for (int i = 0; i < 3; i++) out[i] = v[n == 1 ? 0 : (i < n ? i : n - 1)];
  return n == 1 || n == 3;
}

er_status er_image_prep_parse(er_image_prep *p, const char *text) {
  char buf[512];
  if (strlen(text) >= sizeof buf)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "preprocessing text is longer than %zu bytes",
                     sizeof buf - 1);
  strcpy(buf, text);
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "preprocessing item '%s' is not key=value", item);
    *eq = '\0';
    const char *k = item, *v = eq + 1;
    bool ok = true;
    if (strcmp(k, "size") == 0) {
      ok = sscanf(v, "%dx%d", &p->height, &p->width) == 2 && p->height > 0 && p->width > 0 &&
           p->height <= 16384 && p->width <= 16384;
    } else if (strcmp(k, "layout") == 0) {
      ok = strcasecmp(v, "nchw") == 0 || strcasecmp(v, "nhwc") == 0;
      p->nhwc = strcasecmp(v, "nhwc") == 0;
    } else if (strcmp(k, "channels") == 0) {
      if (strcasecmp(v, "rgb") == 0) p->channels = 3, p->bgr = false;
      else if (strcasecmp(v, "bgr") == 0) p->channels = 3, p->bgr = true;
      else if (strcasecmp(v, "gray") == 0) p->channels = 1;
      else ok = false;
    } else if (strcmp(k, "scale") == 0) {
      char *end;
      double d = strtod(v, &end);
      ok = end != v && *end == '\0' && isfinite(d) && d != 0;
      p->scale = (float)d;
    } else if (strcmp(k, "mean") == 0) {
      ok = parse_floats3(v, p->mean);
    } else if (strcmp(k, "std") == 0) {
      ok = parse_floats3(v, p->std);
      for (int i = 0; ok && i < 3; i++) ok = p->std[i] != 0;
    } else {
      return er__error(ER_STATUS_INVALID_ARGUMENT,
                       "unknown preprocessing key '%s' (size, layout, channels, scale, mean, std)", k);
    }
    if (!ok)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "preprocessing %s='%s' is not valid", k, v);
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* File inspection                                                           */
/* ======================================================================== */

static bool has_suffix(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && strcasecmp(s + n - m, suf) == 0;
}

static bool is_image_name(const char *s) {
  return has_suffix(s, ".png") || has_suffix(s, ".jpg") || has_suffix(s, ".jpeg");
}

static bool is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static const struct {
  const char *descr;
  er_dtype dtype;
} npy_types[] = {
    {"f4", ER_DTYPE_FLOAT},  {"f8", ER_DTYPE_DOUBLE}, {"f2", ER_DTYPE_FLOAT16}, {"i1", ER_DTYPE_INT8},
    {"u1", ER_DTYPE_UINT8},  {"i2", ER_DTYPE_INT16},  {"u2", ER_DTYPE_UINT16},  {"i4", ER_DTYPE_INT32},
    {"u4", ER_DTYPE_UINT32}, {"i8", ER_DTYPE_INT64},  {"u8", ER_DTYPE_UINT64},  {"b1", ER_DTYPE_BOOL},
};

/* Reads a .npy header (only the header) into s. */
static er_status npy_header(src *s) {
  int fd = open(s->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return er__error(ER_STATUS_IO, "cannot open '%s': %s", s->path, strerror(errno));
  uint8_t head[12];
  char hdr[4097];
  struct stat sb;
  er_status st = ER_STATUS_OK;
  ssize_t n = read(fd, head, sizeof head);
  if (fstat(fd, &sb) != 0 || n < 10 || memcmp(head, "\x93NUMPY", 6) != 0) {
    st = er__error(ER_STATUS_MALFORMED, "'%s' is not a .npy file", s->path);
    goto done;
  }
  size_t hlen, hstart;
  if (head[6] == 1) {
    hlen = (size_t)head[8] | ((size_t)head[9] << 8);
    hstart = 10;
  } else {
    hlen = (size_t)head[8] | ((size_t)head[9] << 8) | ((size_t)head[10] << 16) | ((size_t)head[11] << 24);
    hstart = 12;
  }
  if (hlen >= sizeof hdr || (off_t)(hstart + hlen) > sb.st_size ||
      pread(fd, hdr, hlen, (off_t)hstart) != (ssize_t)hlen) {
    st = er__error(ER_STATUS_MALFORMED, "'%s': .npy header of %zu bytes is too long or truncated",
                   s->path, hlen);
    goto done;
  }
  hdr[hlen] = '\0';
  const char *d = strstr(hdr, "'descr'");
  const char *q = d ? strchr(d + 7, '\'') : NULL;
  s->dtype = ER_DTYPE_UNDEFINED;
  if (q) {
    char descr[8] = {0};
    /* Skip the byte-order mark; big-endian data is refused. */
    if (q[1] == '>') {
      st = er__error(ER_STATUS_UNSUPPORTED, "'%s': big-endian .npy data is not supported", s->path);
      goto done;
    }
    memcpy(descr, q + 2, 2);
    for (size_t i = 0; i < ER_ARRAY_LEN(npy_types); i++)
      if (strcmp(descr, npy_types[i].descr) == 0) s->dtype = npy_types[i].dtype;
  }
  if (s->dtype == ER_DTYPE_UNDEFINED) {
    st = er__error(ER_STATUS_UNSUPPORTED, "'%s': .npy element type is not a supported number type", s->path);
    goto done;
  }
  if (strstr(hdr, "'fortran_order': True")) {
    st = er__error(ER_STATUS_UNSUPPORTED, "'%s': Fortran-ordered .npy is not supported (save with "
                   "np.ascontiguousarray)", s->path);
    goto done;
  }
  const char *p = strstr(hdr, "'shape'");
  p = p ? strchr(p, '(') : NULL;
  if (!p) {
    st = er__error(ER_STATUS_MALFORMED, "'%s': .npy header has no shape", s->path);
    goto done;
  }
  p++;
  s->rank = 0;
  for (;;) {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') break;
    if (!isdigit((unsigned char)*p) || s->rank >= ER_MAX_RANK) {
      st = er__error(ER_STATUS_MALFORMED, "'%s': bad .npy shape (or more than %d dims)", s->path, ER_MAX_RANK);
      goto done;
    }
    int64_t v = 0;
    while (isdigit((unsigned char)*p)) {
      if (!er__mul_i64(v, 10, &v) || !er__add_i64(v, *p - '0', &v)) {
        st = er__error(ER_STATUS_INVALID_SHAPE, "'%s': .npy dim overflows", s->path);
        goto done;
      }
      p++;
    }
    s->dims[s->rank++] = v;
  }
  int64_t count;
  uint64_t bytes;
  if (!er__shape_count(s->rank, s->dims, &count) ||
      !er__mul_u64((uint64_t)count, er_dtype_size(s->dtype), &bytes) ||
      bytes != (uint64_t)sb.st_size - (hstart + hlen)) {
    st = er__error(ER_STATUS_INVALID_TENSOR, "'%s': .npy data is %lld bytes, not what its shape needs",
                   s->path, (long long)(sb.st_size - (off_t)(hstart + hlen)));
    goto done;
  }
  s->data_offset = hstart + hlen;
done:
  close(fd);
  return st;
}

static er_status read_pb(const char *path, er_tensor *t, char **name_out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return er__error(ER_STATUS_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size > ER_QDATA_MAX_PB_BYTES) {
    close(fd);
    return er__error(ER_STATUS_LIMIT, "'%s' is larger than %llu bytes", path,
                     (unsigned long long)ER_QDATA_MAX_PB_BYTES);
  }
  size_t size = (size_t)sb.st_size;
  void *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (size && map == MAP_FAILED) return er__error(ER_STATUS_IO, "cannot map '%s': %s", path, strerror(errno));
  er_status st = er__onnx_parse_tensor_file(map ? map : "", size, t, name_out);
  if (map) munmap(map, size);
  if (st != ER_STATUS_OK) er__error_prefix("'%s'", path);
  return st;
}

/* Fills a source's type and shape from its file. */
static er_status inspect(src *s, char **pb_name) {
  if (pb_name) *pb_name = NULL;
  if (s->kind == SRC_NPY) return npy_header(s);
  if (s->kind == SRC_IMAGE) return ER_STATUS_OK;
  er_tensor t;
  ER_CHECK(read_pb(s->path, &t, pb_name));
  s->dtype = t.dtype;
  s->rank = t.rank;
  memcpy(s->dims, t.dims, sizeof s->dims);
  er__tensor_release(&t);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Building the chunk list                                                   */
/* ======================================================================== */

static er_status add_chunk(er_qdata *d, src *srcs) {
  if (d->n_chunks >= ER_QDATA_MAX_FILES)
    return er__error(ER_STATUS_LIMIT, "data set lists more than %d files (ER_QDATA_MAX_FILES)",
                     ER_QDATA_MAX_FILES);
  if (d->n_chunks == d->cap_chunks) {
    size_t cap = d->cap_chunks ? d->cap_chunks * 2 : 64;
    chunk *n = realloc(d->chunks, cap * sizeof *n);
    if (!n) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory listing data files");
    d->chunks = n;
    d->cap_chunks = cap;
  }
  d->chunks[d->n_chunks++] = (chunk){srcs, 0};
  return ER_STATUS_OK;
}

static src *new_srcs(const er_qdata *d) { return calloc(d->n_inputs, sizeof(src)); }

static void free_srcs(const er_qdata *d, src *s) {
  if (!s) return;
  for (size_t i = 0; i < d->n_inputs; i++) free(s[i].path);
  free(s);
}

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static int kind_of(const char *name) {
  if (has_suffix(name, ".npy")) return SRC_NPY;
  if (has_suffix(name, ".pb")) return SRC_PB;
  if (is_image_name(name)) return SRC_IMAGE;
  return -1;
}

/* File-name form of an input name: '/', '\\' and ':' become '_'. */
static void safe_name(const char *in, char *out, size_t size) {
  size_t k = 0;
  for (const char *p = in; *p && k + 1 < size; p++) out[k++] = (*p == '/' || *p == '\\' || *p == ':') ? '_' : *p;
  out[k] = '\0';
}

/* Lists the entries of a folder in name order (callers free each and the
 * list). */
static er_status list_dir(const char *dir, struct dirent ***list, int *n) {
  *n = scandir(dir, list, NULL, alphasort);
  if (*n < 0) return er__error(ER_STATUS_IO, "cannot list folder '%s': %s", dir, strerror(errno));
  return ER_STATUS_OK;
}

static void free_list(struct dirent **list, int n) {
  for (int i = 0; i < n; i++) free(list[i]);
  free(list);
}

/* The model input a file belongs to: by file stem, by TensorProto name, by
 * input_K position (ONNX test sets), or the only input. -1 if none. */
static int match_input(const er_qdata *d, const char *fname, const char *pb_name, bool positional) {
  char stem[1024], safe[1024];
  snprintf(stem, sizeof stem, "%s", fname);
  char *dot = strrchr(stem, '.');
  if (dot) *dot = '\0';
  for (size_t i = 0; i < d->n_inputs; i++) {
    safe_name(d->inputs[i]->name, safe, sizeof safe);
    if (strcmp(stem, safe) == 0 || (pb_name && strcmp(pb_name, d->inputs[i]->name) == 0)) return (int)i;
  }
  int k;
  char tail;
  if (positional && sscanf(stem, "input_%d%c", &k, &tail) == 1 && k >= 0 && (size_t)k < d->n_inputs)
    return k;
  if (d->n_inputs == 1) return 0;
  return -1;
}

/* A folder whose files feed the inputs once (one sample set): every input
 * must be found. */
static er_status add_sample_folder(er_qdata *d, const char *dir) {
  struct dirent **list;
  int n;
  ER_CHECK(list_dir(dir, &list, &n));
  src *s = new_srcs(d);
  er_status st = s ? ER_STATUS_OK : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < n && st == ER_STATUS_OK; i++) {
    const char *name = list[i]->d_name;
    int kind = kind_of(name);
    if (name[0] == '.' || (kind != SRC_NPY && kind != SRC_PB)) continue;
    /* ONNX test sets hold expected outputs beside the inputs. */
    if (strncmp(name, "output_", 7) == 0) continue;
    src tmp = {0};
    tmp.kind = kind;
    tmp.path = join(dir, name);
    char *pb_name = NULL;
    if (!tmp.path) st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == ER_STATUS_OK) st = inspect(&tmp, &pb_name);
    int k = st == ER_STATUS_OK ? match_input(d, name, pb_name, true) : -1;
    free(pb_name);
    if (st == ER_STATUS_OK && k >= 0 && !s[k].path) {
      s[k] = tmp;
    } else {
      free(tmp.path);
    }
  }
  for (size_t k = 0; k < d->n_inputs && st == ER_STATUS_OK; k++)
    if (!s[k].path)
      st = er__error(ER_STATUS_NOT_FOUND, "sample folder '%s' has no file for input '%s' (name it '%s.npy' "
                     "or input_%zu.pb)", dir, d->inputs[k]->name, d->inputs[k]->name, k);
  if (st == ER_STATUS_OK) st = add_chunk(d, s);
  if (st != ER_STATUS_OK) free_srcs(d, s);
  free_list(list, n);
  return st;
}

static er_status add_single_file(er_qdata *d, const char *path, int kind) {
  if (d->n_inputs != 1 && kind == SRC_IMAGE)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "images can feed a model with one input; this one has %zu",
                     d->n_inputs);
  src *s = new_srcs(d);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  s[0].kind = kind;
  s[0].path = strdup(path);
  er_status st = s[0].path ? inspect(&s[0], NULL) : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  if (st == ER_STATUS_OK) st = add_chunk(d, s);
  if (st != ER_STATUS_OK) free_srcs(d, s);
  return st;
}

/* A folder of per-input files each holding many samples ("<input>.npy"):
 * one chunk with every input. */
static er_status add_named_files(er_qdata *d, const char *dir, struct dirent **list, int n) {
  src *s = new_srcs(d);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  er_status st = ER_STATUS_OK;
  for (int i = 0; i < n && st == ER_STATUS_OK; i++) {
    const char *name = list[i]->d_name;
    int kind = kind_of(name);
    if (name[0] == '.' || (kind != SRC_NPY && kind != SRC_PB)) continue;
    src tmp = {0};
    tmp.kind = kind;
    tmp.path = join(dir, name);
    char *pb_name = NULL;
    st = tmp.path ? inspect(&tmp, &pb_name) : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
    int k = st == ER_STATUS_OK ? match_input(d, name, pb_name, false) : -1;
    free(pb_name);
    if (st == ER_STATUS_OK && k < 0)
      st = er__error(ER_STATUS_NOT_FOUND, "data file '%s' matches none of the model's %zu inputs by name",
                     tmp.path, d->n_inputs);
    if (st == ER_STATUS_OK && s[k].path)
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "both '%s' and '%s' feed input '%s'", s[k].path, tmp.path,
                     d->inputs[k]->name);
    if (st == ER_STATUS_OK) s[k] = tmp;
    else free(tmp.path);
  }
  for (size_t k = 0; k < d->n_inputs && st == ER_STATUS_OK; k++)
    if (!s[k].path)
      st = er__error(ER_STATUS_NOT_FOUND, "folder '%s' has no file for input '%s'", dir, d->inputs[k]->name);
  if (st == ER_STATUS_OK) st = add_chunk(d, s);
  if (st != ER_STATUS_OK) free_srcs(d, s);
  return st;
}

static er_status scan(er_qdata *d, const char *path) {
  if (!is_dir(path)) {
    int kind = kind_of(path);
    if (kind < 0)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "data '%s' is not a folder, .npy, .pb or image file", path);
    if (d->n_inputs != 1)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "a single data file can feed a model with one input; this "
                       "one has %zu (use a folder with one file per input)", d->n_inputs);
    return add_single_file(d, path, kind);
  }
  struct dirent **list;
  int n;
  ER_CHECK(list_dir(path, &list, &n));
  int n_dirs = 0, n_tensors = 0, n_images = 0;
  for (int i = 0; i < n; i++) {
    const char *name = list[i]->d_name;
    if (name[0] == '.') continue;
    char *full = join(path, name);
    if (!full) {
      free_list(list, n);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (is_dir(full)) n_dirs++;
    else if (kind_of(name) == SRC_IMAGE) n_images++;
    else if (kind_of(name) >= 0) n_tensors++;
    free(full);
  }
  er_status st = ER_STATUS_OK;
  if (n_tensors == 0 && n_images == 0 && n_dirs > 0) {
    /* Sample folders: ONNX test sets (only test_data_set_N, as an ONNX test
     * folder may hold other folders too) or any per-sample folders. */
    bool test_sets = false;
    for (int i = 0; i < n; i++) test_sets = test_sets || strncmp(list[i]->d_name, "test_data_set_", 14) == 0;
    for (int i = 0; i < n && st == ER_STATUS_OK; i++) {
      if (list[i]->d_name[0] == '.') continue;
      if (test_sets && strncmp(list[i]->d_name, "test_data_set_", 14) != 0) continue;
      char *full = join(path, list[i]->d_name);
      if (!full) st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
      else if (is_dir(full)) st = add_sample_folder(d, full);
      free(full);
    }
  } else if (n_images > 0 && n_tensors == 0) {
    for (int i = 0; i < n && st == ER_STATUS_OK; i++) {
      if (list[i]->d_name[0] == '.' || kind_of(list[i]->d_name) != SRC_IMAGE) continue;
      char *full = join(path, list[i]->d_name);
      st = full ? add_single_file(d, full, SRC_IMAGE) : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
      free(full);
    }
  } else if (n_tensors > 0 && d->n_inputs == 1) {
    /* Every file feeds the one input; an ONNX test folder's model.onnx and
     * outputs are not data. */
    for (int i = 0; i < n && st == ER_STATUS_OK; i++) {
      const char *name = list[i]->d_name;
      int kind = kind_of(name);
      if (name[0] == '.' || (kind != SRC_NPY && kind != SRC_PB) || strncmp(name, "output_", 7) == 0) continue;
      char *full = join(path, name);
      st = full ? add_single_file(d, full, kind) : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
      free(full);
    }
  } else if (n_tensors > 0) {
    st = add_named_files(d, path, list, n);
  } else {
    st = er__error(ER_STATUS_NOT_FOUND, "data folder '%s' holds no .npy, .pb or image files", path);
  }
  free_list(list, n);
  return st;
}

/* Decides, per file, whether its leading axis holds samples, checks type
 * and shape against the input, and counts each chunk's samples. */
static er_status settle(er_qdata *d) {
  char a[160], b[160];
  for (size_t c = 0; c < d->n_chunks; c++) {
    chunk *ch = &d->chunks[c];
    int64_t samples = -1;
    for (size_t k = 0; k < d->n_inputs; k++) {
      src *s = &ch->srcs[k];
      const er_value *v = d->inputs[k];
      int r = v->info.rank;
      if (s->kind == SRC_IMAGE) {
        s->batched = false;
        s->dtype = ER_DTYPE_FLOAT;
        if (v->info.dtype != ER_DTYPE_FLOAT)
          return er__error(ER_STATUS_TYPE_MISMATCH, "images feed float32 inputs; input '%s' is %s", v->name,
                           er_dtype_name(v->info.dtype));
        if (r != 4 && r != 3)
          return er__error(ER_STATUS_INVALID_SHAPE, "images feed inputs of rank 3 or 4; input '%s' has rank %d",
                           v->name, r);
      } else {
        bool float_ok = v->info.dtype == ER_DTYPE_FLOAT && s->dtype == ER_DTYPE_DOUBLE;
        if (s->dtype != v->info.dtype && !float_ok)
          return er__error(ER_STATUS_TYPE_MISMATCH, "'%s' holds %s but input '%s' is %s", s->path,
                           er_dtype_name(s->dtype), v->name, er_dtype_name(v->info.dtype));
        if (r < 0 || s->rank == r) {
          s->batched = r >= 1 && s->rank >= 1;
        } else if (s->rank == r - 1) {
          s->batched = false;
        } else {
          return er__error(ER_STATUS_INVALID_SHAPE, "'%s' has shape %s; input '%s' expects %s (or one sample of "
                           "it)", s->path, er__dims_str(s->rank, s->dims, a, sizeof a), v->name,
                           er__shape_str(&v->info, b, sizeof b));
        }
        /* The per-sample dims must agree with what the model declares. */
        int off = s->batched ? 1 : 0, voff = (r >= 0 && s->rank == r) ? 1 : (r >= 0 ? 1 : 0);
        if (r >= 0)
          for (int i = off; i < s->rank; i++) {
            int64_t want = v->info.dims[i - off + voff];
            if (want >= 0 && want != s->dims[i])
              return er__error(ER_STATUS_INVALID_SHAPE, "'%s' has shape %s; input '%s' expects %s", s->path,
                               er__dims_str(s->rank, s->dims, a, sizeof a), v->name,
                               er__shape_str(&v->info, b, sizeof b));
          }
      }
      int64_t n = s->batched ? s->dims[0] : 1;
      if (samples >= 0 && n != samples)
        return er__error(ER_STATUS_INVALID_SHAPE, "'%s' holds %lld samples but the other inputs' files hold %lld",
                         s->path, (long long)n, (long long)samples);
      samples = n;
    }
    ch->samples = samples < 0 ? 0 : samples;
  }
  return ER_STATUS_OK;
}

er_status er_qdata_open(const char *path, const er_model *model, const er_qdata_options *opts,
                         er_qdata **out) {
  er_qdata *d = calloc(1, sizeof *d);
  if (!d) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  d->model = model;
  er_qdata_options_init(&d->opts);
  if (opts) d->opts = *opts;
  if (d->opts.batch < 1) d->opts.batch = 1;
  d->open_chunk = SIZE_MAX;
  for (size_t k = 0; k < ER_QDATA_MAX_INPUTS; k++) d->fds[k] = -1;
  const er_graph *g = model->graph;
  er_status st = ER_STATUS_OK;
  d->fixed_batch = 0;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const er_value *v = &g->values[g->inputs[i]];
    if (v->kind != ER_VALUE_INPUT) continue;
    if (d->n_inputs >= ER_QDATA_MAX_INPUTS) {
      st = er__error(ER_STATUS_LIMIT, "model has more than %d inputs (ER_QDATA_MAX_INPUTS)", ER_QDATA_MAX_INPUTS);
      goto fail;
    }
    d->inputs[d->n_inputs++] = v;
    if (v->info.rank >= 1 && v->info.dims[0] > 0) d->fixed_batch = v->info.dims[0];
  }
  if (d->n_inputs == 0) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "the model has no inputs to feed");
    goto fail;
  }
  st = scan(d, path);
  if (st == ER_STATUS_OK) st = settle(d);
  if (st != ER_STATUS_OK) goto fail;
  int64_t total = 0;
  for (size_t c = 0; c < d->n_chunks; c++) total += d->chunks[c].samples;
  total -= d->opts.skip;
  if (total < 0) total = 0;
  if (d->opts.limit > 0 && total > d->opts.limit) total = d->opts.limit;
  d->total = total;
  if (total == 0) {
    st = er__error(ER_STATUS_NOT_FOUND, "data '%s' holds no samples%s", path,
                   d->opts.skip ? " after the skipped ones" : "");
    goto fail;
  }
  *out = d;
  return ER_STATUS_OK;
fail:
  er_qdata_free(d);
  return st;
}

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

static void close_chunk(er_qdata *d) {
  for (size_t k = 0; k < d->n_inputs; k++) {
    if (d->fds[k] >= 0) close(d->fds[k]);
    d->fds[k] = -1;
    er__tensor_release(&d->loaded[k]);
  }
  d->open_chunk = SIZE_MAX;
}

void er_qdata_free(er_qdata *d) {
  if (!d) return;
  close_chunk(d);
  for (size_t k = 0; k < ER_QDATA_MAX_INPUTS; k++) er__tensor_release(&d->batch[k]);
  for (size_t c = 0; c < d->n_chunks; c++) free_srcs(d, d->chunks[c].srcs);
  free(d->chunks);
  free(d->scratch);
  free(d);
}

int64_t er_qdata_samples(const er_qdata *d) { return d->total; }
size_t er__qdata_input_count(const er_qdata *d) { return d->n_inputs; }

void er__qdata_rewind(er_qdata *d) {
  close_chunk(d);
  d->cur = 0;
  d->pos = 0;
  d->served = 0;
  d->skipped = false;
}

static er_status open_chunk(er_qdata *d, size_t c) {
  if (d->open_chunk == c) return ER_STATUS_OK;
  close_chunk(d);
  chunk *ch = &d->chunks[c];
  for (size_t k = 0; k < d->n_inputs; k++) {
    src *s = &ch->srcs[k];
    if (s->kind == SRC_NPY) {
      /* Read with pread per batch, not mapped: mapped pages stay resident
       * and would make memory grow with the file. */
      int fd = open(s->path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) return er__error(ER_STATUS_IO, "cannot open '%s': %s", s->path, strerror(errno));
      d->fds[k] = fd;
    } else if (s->kind == SRC_PB) {
      ER_CHECK(read_pb(s->path, &d->loaded[k], NULL));
      /* The file must not have changed since it was inspected. */
      if (d->loaded[k].rank != s->rank || memcmp(d->loaded[k].dims, s->dims, sizeof s->dims) != 0)
        return er__error(ER_STATUS_IO, "'%s' changed while it was being read", s->path);
    } else {
      uint8_t *px;
      int h, w, cc;
      ER_CHECK(er__image_decode(s->path, &px, &h, &w, &cc));
      const er_value *v = d->inputs[k];
      er_image_prep p = d->opts.image;
      int r = v->info.rank;
      const int64_t *vd = v->info.dims + (r == 4 ? 1 : 0);
      int64_t dc = p.nhwc ? vd[2] : vd[0], dh = p.nhwc ? vd[0] : vd[1], dw = p.nhwc ? vd[1] : vd[2];
      if (!p.channels) p.channels = dc > 0 ? (int)dc : 3;
      if (!p.height) p.height = dh > 0 ? (int)dh : 0;
      if (!p.width) p.width = dw > 0 ? (int)dw : 0;
      if (p.height <= 0 || p.width <= 0) {
        free(px);
        return er__error(ER_STATUS_INVALID_ARGUMENT, "input '%s' has no fixed height and width; declare them "
                         "with --preprocess size=HxW", v->name);
      }
      if (p.channels != 1 && p.channels != 3) {
        free(px);
        return er__error(ER_STATUS_INVALID_SHAPE, "input '%s' wants %d channels; images give 1 or 3", v->name,
                         p.channels);
      }
      int64_t dims[4];
      int rank = 0;
      if (r == 4) dims[rank++] = 1;
      if (p.nhwc) {
        dims[rank++] = p.height;
        dims[rank++] = p.width;
        dims[rank++] = p.channels;
      } else {
        dims[rank++] = p.channels;
        dims[rank++] = p.height;
        dims[rank++] = p.width;
      }
      er__tensor_set(&d->loaded[k], ER_DTYPE_FLOAT, rank, dims);
      er_status st = er__tensor_alloc(&d->loaded[k], 0);
      if (st == ER_STATUS_OK) er__image_prepare(px, h, w, cc, &p, d->loaded[k].data);
      free(px);
      ER_CHECK(st);
      /* An image tensor carries its own batch axis of 1 when the input is
       * rank 4; treat it as one batched sample. */
      s->rank = rank;
      memcpy(s->dims, dims, sizeof dims);
      s->batched = r == 4;
      s->dtype = ER_DTYPE_FLOAT;
    }
  }
  d->open_chunk = c;
  return ER_STATUS_OK;
}

/* Copies samples [first, first + n) of source k into the batch tensor,
 * converting float64 to float32. */
static er_status copy_samples(er_qdata *d, size_t k, const src *s, int64_t first, int64_t n, er_tensor *dst) {
  int64_t per = 1;
  for (int i = s->batched ? 1 : 0; i < s->rank; i++) per *= s->dims[i];
  size_t es = er_dtype_size(s->dtype), bytes = (size_t)(n * per) * es;
  bool convert = s->dtype != dst->dtype;
  if (s->kind != SRC_NPY) {
    const uint8_t *from = (const uint8_t *)d->loaded[k].data + (size_t)(first * per) * es;
    if (!convert) {
      memcpy(dst->data, from, bytes);
    } else {
      for (int64_t i = 0; i < n * per; i++) {
        double v;
        memcpy(&v, from + (size_t)i * 8, 8);
        ((float *)dst->data)[i] = (float)v;
      }
    }
    return ER_STATUS_OK;
  }
  uint8_t *to = dst->data;
  if (convert) {
    if (d->scratch_bytes < bytes) {
      void *nb = realloc(d->scratch, bytes);
      if (!nb) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory reading '%s'", s->path);
      d->scratch = nb;
      d->scratch_bytes = bytes;
    }
    to = d->scratch;
  }
  off_t at = (off_t)(s->data_offset + (size_t)(first * per) * es);
  for (size_t done = 0; done < bytes;) {
    ssize_t r = pread(d->fds[k], to + done, bytes - done, at + (off_t)done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return er__error(ER_STATUS_IO, "reading '%s' failed: %s", s->path, r < 0 ? strerror(errno) : "file shrank");
    done += (size_t)r;
  }
  if (convert)
    for (int64_t i = 0; i < n * per; i++) {
      double v;
      memcpy(&v, (const uint8_t *)d->scratch + (size_t)i * 8, 8);
      ((float *)dst->data)[i] = (float)v;
    }
  return ER_STATUS_OK;
}

er_status er__qdata_next(er_qdata *d, er_named_tensor *inputs, int64_t *n_samples) {
  *n_samples = 0;
  if (!d->skipped) {
    /* Skip whole chunks, then part of one. */
    int64_t left = d->opts.skip;
    while (d->cur < d->n_chunks && left >= d->chunks[d->cur].samples) {
      left -= d->chunks[d->cur].samples;
      d->cur++;
    }
    d->pos = left;
    d->skipped = true;
  }
  while (d->cur < d->n_chunks && d->pos >= d->chunks[d->cur].samples) {
    d->cur++;
    d->pos = 0;
  }
  if (d->cur >= d->n_chunks || d->served >= d->total) {
    close_chunk(d);
    return ER_STATUS_OK;
  }
  chunk *ch = &d->chunks[d->cur];
  ER_CHECK(open_chunk(d, d->cur));
  int64_t want = d->fixed_batch > 0 ? d->fixed_batch : d->opts.batch;
  int64_t left = ch->samples - d->pos, room = d->total - d->served;
  bool whole = !ch->srcs[0].batched;
  int64_t n = whole ? 1 : (left < want ? left : want);
  if (!whole && d->fixed_batch > 0 && n < d->fixed_batch) {
    /* A fixed batch cannot take a partial one: the remainder is dropped. */
    d->pos = ch->samples;
    return er__qdata_next(d, inputs, n_samples);
  }
  if (n > room && d->fixed_batch <= 0) n = room;
  for (size_t k = 0; k < d->n_inputs; k++) {
    const src *s = &ch->srcs[k];
    const er_value *v = d->inputs[k];
    er_tensor *t = &d->batch[k];
    int64_t dims[ER_MAX_RANK];
    int rank;
    if (s->batched) {
      rank = s->rank;
      memcpy(dims, s->dims, sizeof dims);
      dims[0] = n;
    } else if (v->info.rank == s->rank + 1) {
      rank = s->rank + 1;
      dims[0] = 1;
      memcpy(dims + 1, s->dims, (size_t)s->rank * sizeof *dims);
    } else {
      rank = s->rank;
      memcpy(dims, s->dims, sizeof dims);
    }
    er_dtype dt = v->info.dtype != ER_DTYPE_UNDEFINED ? v->info.dtype : s->dtype;
    bool same = t->data && t->dtype == dt && t->rank == rank && memcmp(t->dims, dims, (size_t)rank * 8) == 0;
    if (!same) {
      er__tensor_release(t);
      er__tensor_set(t, dt, rank, dims);
      ER_CHECK(er__tensor_alloc(t, 0));
    }
    ER_CHECK(copy_samples(d, k, s, s->batched ? d->pos : 0, s->batched ? n : 1, t));
    inputs[k].name = v->name;
    inputs[k].tensor = t;
  }
  d->pos += n;
  d->served += n;
  *n_samples = n;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Labels                                                                    */
/* ======================================================================== */

er_status er_qdata_read_labels(const char *path, int64_t **labels_out, int64_t *n_out) {
  if (has_suffix(path, ".npy") || has_suffix(path, ".pb")) {
    er_tensor *t;
    ER_CHECK(er_tensor_read_file(path, &t, NULL));
    if (!er__dtype_is_int(t->dtype)) {
      er_status st = er__error(ER_STATUS_TYPE_MISMATCH, "labels '%s' are %s; integers are expected", path,
                               er_dtype_name(t->dtype));
      er_tensor_free(t);
      return st;
    }
    int64_t n = er__tensor_count(t);
    int64_t *l = malloc((size_t)(n > 0 ? n : 1) * sizeof *l);
    if (!l) {
      er_tensor_free(t);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory reading labels");
    }
    for (int64_t i = 0; i < n; i++) l[i] = er__load_i64(t->data, t->dtype, i);
    er_tensor_free(t);
    *labels_out = l;
    *n_out = n;
    return ER_STATUS_OK;
  }
  FILE *f = fopen(path, "r");
  if (!f) return er__error(ER_STATUS_IO, "cannot open labels '%s': %s", path, strerror(errno));
  int64_t cap = 1024, n = 0, line_no = 0;
  int64_t *l = malloc((size_t)cap * sizeof *l);
  char line[256];
  er_status st = l ? ER_STATUS_OK : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory reading labels");
  while (st == ER_STATUS_OK && fgets(line, sizeof line, f)) {
    line_no++;
    char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) continue;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (errno || end == p || *end) {
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "labels '%s' line %lld is not an integer", path,
                     (long long)line_no);
      break;
    }
    if (n == cap) {
      if (cap >= ER_QDATA_MAX_FILES * 64LL) {
        st = er__error(ER_STATUS_LIMIT, "labels '%s' holds too many lines", path);
        break;
      }
      cap *= 2;
      int64_t *nl = realloc(l, (size_t)cap * sizeof *nl);
      if (!nl) {
        st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory reading labels");
        break;
      }
      l = nl;
    }
    l[n++] = v;
  }
  fclose(f);
  if (st != ER_STATUS_OK) {
    free(l);
    return st;
  }
  *labels_out = l;
  *n_out = n;
  return ER_STATUS_OK;
}
