/* onnx-tensor.c - TensorProto to a tensor: every dim, count and offset
 * checked against a named limit and the bytes that remain, raw and typed
 * data (used in place when aligned, else copied once), external data
 * through extdata.c, and standalone tensor files (the .pb files of ONNX
 * test data) (see onnx-load.c). */
#include "onnx/onnx-load-impl.h"

/* ======================================================================== */
/* Tensors                                                                   */
/* ======================================================================== */

typedef struct tensor_fields {
  const char *name;
  int64_t data_type;
  bool has_data_type;
  const uint8_t *raw;
  size_t raw_len;
  bool has_raw;
  bool external;
  const char *ext_location;
  size_t ext_location_len;
  bool has_location;
  uint64_t ext_offset, ext_length;
  bool has_length;
  bool has_segment;
} tensor_fields;

/* Parses a decimal unsigned integer from an external_data value. */
static er_status parse_u64_text(const uint8_t *s, size_t len, const char *key, uint64_t *out) {
  uint64_t v = 0;
  if (len == 0)
    return er__error(ER_STATUS_EXTERNAL_DATA, "external data %s is empty", key);
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return er__error(ER_STATUS_EXTERNAL_DATA,
                       "external data %s '%.*s' is not a non-negative decimal integer", key,
                       (int)(len > 64 ? 64 : len), (const char *)s);
    if (!er__mul_u64(v, 10, &v) || !er__add_u64(v, (uint64_t)(s[i] - '0'), &v))
      return er__error(ER_STATUS_EXTERNAL_DATA, "external data %s '%.*s' overflows 64 bits", key,
                       (int)(len > 64 ? 64 : len), (const char *)s);
  }
  *out = v;
  return ER_STATUS_OK;
}

static er_status parse_external_entry(tensor_fields *tf, const er_pb_field *f) {
  er_pb pb = er__pb_init(f->data, f->len);
  er_pb_field e;
  bool done;
  const uint8_t *key = NULL, *val = NULL;
  size_t key_len = 0, val_len = 0;
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &e, &done));
    if (done) break;
    if (e.number == ENTRY_KEY && e.wire == ER_PB_LEN) {
      key = e.data;
      key_len = e.len;
    } else if (e.number == ENTRY_VALUE && e.wire == ER_PB_LEN) {
      val = e.data;
      val_len = e.len;
    }
  }
  if (!key) return er__error(ER_STATUS_EXTERNAL_DATA, "external_data entry without a key");
  if (!val) val = (const uint8_t *)"";
#define KEY_IS(lit) (key_len == sizeof(lit) - 1 && memcmp(key, lit, key_len) == 0)
  if (KEY_IS("location")) {
    tf->ext_location = (const char *)val;
    tf->ext_location_len = val_len;
    tf->has_location = true;
  } else if (KEY_IS("offset")) {
    ER_CHECK(parse_u64_text(val, val_len, "offset", &tf->ext_offset));
  } else if (KEY_IS("length")) {
    ER_CHECK(parse_u64_text(val, val_len, "length", &tf->ext_length));
    tf->has_length = true;
  } else if (KEY_IS("checksum")) {
    /* A SHA-1 of the data, informational in ONNX; not verified. */
  } else {
    return er__error(ER_STATUS_EXTERNAL_DATA, "unknown external_data key '%.*s'",
                     (int)(key_len > 64 ? 64 : key_len), (const char *)key);
  }
#undef KEY_IS
  return ER_STATUS_OK;
}

/* Element storage of the typed repeated fields, by data type. */
static uint32_t typed_field_for(er_dtype t) {
  switch (t) {
    case ER_DTYPE_FLOAT: return TENSOR_FLOAT_DATA;
    case ER_DTYPE_INT64: return TENSOR_INT64_DATA;
    case ER_DTYPE_DOUBLE: return TENSOR_DOUBLE_DATA;
    case ER_DTYPE_UINT32: case ER_DTYPE_UINT64: return TENSOR_UINT64_DATA;
    case ER_DTYPE_STRING: return TENSOR_STRING_DATA;
    default: return TENSOR_INT32_DATA;
  }
}

static bool dtype_is_4bit(er_dtype t) { return t == ER_DTYPE_INT4 || t == ER_DTYPE_UINT4; }

/* Unpacks two 4-bit elements per byte (low nibble first), sign-extending
 * int4, into one element per byte. */
static void unpack_4bit(const uint8_t *src, int8_t *dst, int64_t count, bool is_signed) {
  for (int64_t i = 0; i < count; i++) {
    uint8_t nib = (src[i / 2] >> ((i & 1) * 4)) & 0xf;
    dst[i] = is_signed && nib >= 8 ? (int8_t)(nib - 16) : (int8_t)nib;
  }
}

/* Pass 1 over a TensorProto: its scalar facts, where its data is, and
 * its dims into dims[*rank]. */
static er_status scan_tensor(parse_ctx *pc, const uint8_t *p, size_t len, tensor_fields *tfp, int64_t *dims,
                             int *rank_out) {
  tensor_fields tf = {0};
  er_pb pb = er__pb_init(p, len);
  er_pb_field f;
  bool done;
  int rank = 0;
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    switch (f.number) {
      case TENSOR_DIMS: {
        uint64_t c;
        ER_CHECK(er__pb_scalar_count(&f, ER_PB_S_VARINT, &c));
        if (c > (uint64_t)(ER_MAX_RANK - rank))
          return er__error(ER_STATUS_LIMIT, "tensor has more than %d dims (ER_MAX_RANK)",
                           ER_MAX_RANK);
        uint64_t tmp[ER_MAX_RANK], n = 0;
        ER_CHECK(er__pb_scalar_read(&f, ER_PB_S_VARINT, tmp, c, &n));
        for (uint64_t i = 0; i < n; i++) {
          int64_t d = (int64_t)tmp[i];
          if (d < 0)
            return er__error(ER_STATUS_INVALID_SHAPE, "tensor dim %d is %lld; dims must be >= 0",
                             rank, (long long)d);
          dims[rank++] = d;
        }
        break;
      }
      case TENSOR_DATA_TYPE:
        ER_CHECK(expect_wire(&f, ER_PB_VARINT, "TensorProto.data_type"));
        tf.data_type = (int64_t)(int32_t)f.value;
        tf.has_data_type = true;
        break;
      case TENSOR_NAME: ER_CHECK(er__ox_copy_string(pc, &f, "tensor name", &tf.name)); break;
      case TENSOR_RAW_DATA:
        ER_CHECK(expect_wire(&f, ER_PB_LEN, "TensorProto.raw_data"));
        tf.raw = f.data;
        tf.raw_len = f.len;
        tf.has_raw = true;
        break;
      case TENSOR_EXTERNAL_DATA:
        ER_CHECK(expect_wire(&f, ER_PB_LEN, "TensorProto.external_data"));
        ER_CHECK(parse_external_entry(&tf, &f));
        break;
      case TENSOR_DATA_LOCATION:
        ER_CHECK(expect_wire(&f, ER_PB_VARINT, "TensorProto.data_location"));
        if (f.value > 1)
          return er__error(ER_STATUS_INVALID_TENSOR, "tensor data_location %llu is unknown",
                           (unsigned long long)f.value);
        tf.external = f.value == 1;
        break;
      case TENSOR_SEGMENT: tf.has_segment = true; break;
      default: break;
    }
  }
  *tfp = tf;
  *rank_out = rank;
  return ER_STATUS_OK;
}

/* The data of tensor t (dtype and dims set) from external data. */
static er_status load_external(parse_ctx *pc, er_tensor *t, const tensor_fields *tfp, int64_t count, uint64_t bytes,
                               uint64_t packed_bytes, const char *tname) {
  const tensor_fields tf = *tfp;
  er_dtype dt = t->dtype;
  if (!tf.has_location)
    return er__error(ER_STATUS_EXTERNAL_DATA, "tensor '%s': external data without a location",
                     tname);
  if (!pc->model)
    return er__error(ER_STATUS_EXTERNAL_DATA,
                     "tensor '%s': external data is not allowed in a standalone tensor file",
                     tname);
  if (tf.has_length && tf.ext_length != packed_bytes)
    return er__error(ER_STATUS_EXTERNAL_DATA,
                     "tensor '%s': external data length %llu does not match the %llu bytes "
                     "its dims and type need",
                     tname, (unsigned long long)tf.ext_length,
                     (unsigned long long)packed_bytes);
  void *data;
  uint64_t got;
  ER_CHECK(er__extdata_read(pc->model, tf.ext_location, tf.ext_location_len, tf.ext_offset,
                            packed_bytes, &data, &got));
  if (dtype_is_4bit(dt)) {
    void *un = er__aligned_alloc((size_t)bytes);
    if (!un) {
      er__aligned_free(data);
      return ER_STATUS_OUT_OF_MEMORY;
    }
    unpack_4bit(data, un, count, dt == ER_DTYPE_INT4);
    er__aligned_free(data);
    data = un;
  }
  t->data = data;
  t->nbytes = (size_t)bytes;
  t->flags = ER_TENSOR_OWNS_DATA;
  return ER_STATUS_OK;
}

/* The data of tensor t from raw_data: in place when the model maps the
 * bytes and they are aligned, else an aligned copy. */
static er_status load_raw(parse_ctx *pc, er_tensor *t, const tensor_fields *tfp, int64_t count, uint64_t bytes,
                          uint64_t packed_bytes, const char *tname) {
  const tensor_fields tf = *tfp;
  er_dtype dt = t->dtype;
  size_t esize = er_dtype_size(dt);
  char sbuf[160];
  int rank = t->rank;
  const int64_t *dims = t->dims;
  if (tf.raw_len != packed_bytes)
    return er__error(ER_STATUS_INVALID_TENSOR,
                     "tensor '%s': raw_data holds %zu bytes but dims %s of type %s need %llu",
                     tname, tf.raw_len, er__dims_str(rank, dims, sbuf, sizeof sbuf),
                     er_dtype_name(dt), (unsigned long long)packed_bytes);
  bool aligned = ((uintptr_t)tf.raw % (esize < 8 ? esize : 8)) == 0;
  if (pc->model && aligned && !dtype_is_4bit(dt)) {
    /* Zero-copy: the mapping lives as long as the model. */
    t->data = (void *)(uintptr_t)tf.raw;
    t->nbytes = (size_t)bytes;
    t->flags = 0;
    return ER_STATUS_OK;
  }
  ER_CHECK(er__tensor_alloc(t, 0));
  if (dtype_is_4bit(dt))
    unpack_4bit(tf.raw, t->data, count, dt == ER_DTYPE_INT4);
  else if (bytes)
    memcpy(t->data, tf.raw, (size_t)bytes);
  /* The file's copy of these bytes is not read again: its pages need
   * not stay resident next to the aligned copy until the session has
   * compiled (ddddocr's recognizer, 38 of its 54 MB unaligned, peaked
   * at 156 MB against onnxruntime's 132). */
  if (pc->model) er__model_release_pages(pc->model, tf.raw, tf.raw_len);
  return ER_STATUS_OK;
}

/* The data of tensor t from the typed repeated field of its type. */
static er_status load_typed(const uint8_t *p, size_t len, er_tensor *t, int64_t count, const char *tname) {
  er_dtype dt = t->dtype;
  er_pb pb;
  er_pb_field f;
  bool done;
  char sbuf[160];
  int rank = t->rank;
  const int64_t *dims = t->dims;
  /* Typed repeated fields. */
  uint32_t field = typed_field_for(dt);
  er_pb_scalar kind = field == TENSOR_FLOAT_DATA    ? ER_PB_S_FIXED32
                      : field == TENSOR_DOUBLE_DATA ? ER_PB_S_FIXED64
                                                    : ER_PB_S_VARINT;
  /* Count first, before allocating anything for the values. */
  uint64_t n = 0;
  pb = er__pb_init(p, len);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != field) continue;
    uint64_t c;
    ER_CHECK(er__pb_scalar_count(&f, kind, &c));
    if (!er__add_u64(n, c, &n)) return er__error(ER_STATUS_LIMIT, "tensor '%s': count overflows", tname);
  }
  uint64_t want = dtype_is_4bit(dt) ? ((uint64_t)count + 1) / 2 : (uint64_t)count;
  if (n != want)
    return er__error(ER_STATUS_INVALID_TENSOR,
                     "tensor '%s': holds %llu values but dims %s need %llu", tname,
                     (unsigned long long)n, er__dims_str(rank, dims, sbuf, sizeof sbuf),
                     (unsigned long long)want);
  ER_CHECK(er__tensor_alloc(t, 0));
  if (n == 0) return ER_STATUS_OK;
  uint64_t *raw = malloc((size_t)n * sizeof *raw);
  if (!raw) {
    er__tensor_release(t);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory reading tensor '%s'", tname);
  }
  uint64_t got = 0;
  er_status st = ER_STATUS_OK;
  pb = er__pb_init(p, len);
  for (;;) {
    st = er__pb_next(&pb, &f, &done);
    if (st != ER_STATUS_OK || done) break;
    if (f.number != field) continue;
    st = er__pb_scalar_read(&f, kind, raw, n, &got);
    if (st != ER_STATUS_OK) break;
  }
  if (st != ER_STATUS_OK) {
    free(raw);
    er__tensor_release(t);
    return st;
  }
  void *d = t->data;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t v = raw[i];
    switch (dt) {
      case ER_DTYPE_FLOAT: { uint32_t w = (uint32_t)v; memcpy((float *)d + i, &w, 4); break; }
      case ER_DTYPE_DOUBLE: memcpy((double *)d + i, &v, 8); break;
      case ER_DTYPE_INT64: ((int64_t *)d)[i] = (int64_t)v; break;
      case ER_DTYPE_UINT64: ((uint64_t *)d)[i] = v; break;
      case ER_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)v; break;
      case ER_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
      case ER_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
      case ER_DTYPE_UINT16: case ER_DTYPE_FLOAT16: case ER_DTYPE_BFLOAT16:
        ((uint16_t *)d)[i] = (uint16_t)v;
        break;
      case ER_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
      case ER_DTYPE_INT4: case ER_DTYPE_UINT4: {
        /* Each int32 holds one byte of two packed nibbles. */
        uint8_t b = (uint8_t)v;
        for (int k = 0; k < 2; k++) {
          int64_t idx = (int64_t)i * 2 + k;
          if (idx >= count) break;
          uint8_t nib = (b >> (4 * k)) & 0xf;
          ((int8_t *)d)[idx] = dt == ER_DTYPE_INT4 && nib >= 8 ? (int8_t)(nib - 16) : (int8_t)nib;
        }
        break;
      }
      default: ((uint8_t *)d)[i] = (uint8_t)v; break; /* int8, uint8, float8 */
    }
  }
  free(raw);
  return ER_STATUS_OK;
}

/* Parses a TensorProto at [p, p+len) into `t`. Data is zero-copy when it is
 * raw, aligned and the model holds the bytes; else it is copied into memory
 * the model owns (pc->model may be NULL for standalone files: then the
 * tensor owns its data). */
er_status er__onnx_tensor_from_proto(parse_ctx *pc, const uint8_t *p, size_t len, er_tensor *t,
                                     const char **name_out) {
  char sbuf[160];
  tensor_fields tf = {0};
  int rank = 0;
  int64_t dims[ER_MAX_RANK];
  uint64_t max_tensor = pc->model ? pc->model->limits.max_tensor_bytes : ER_DEFAULT_MAX_TENSOR_BYTES;
  ER_CHECK(scan_tensor(pc, p, len, &tf, dims, &rank));
  const char *tname = tf.name ? tf.name : "";
  if (name_out) *name_out = tf.name;
  static const char *const newer_types[] = {"FLOAT8E8M0", "UINT2", "INT2", "FLOAT6E2M3", "FLOAT6E3M2"};
  if (tf.has_data_type && tf.data_type >= 24 && tf.data_type <= 28)
    return er__error(ER_STATUS_UNSUPPORTED, "tensor '%s': data type %lld (%s) is not supported", tname,
                     (long long)tf.data_type, newer_types[tf.data_type - 24]);
  if (!tf.has_data_type || !dtype_known(tf.data_type))
    return er__error(ER_STATUS_INVALID_TENSOR,
                     "tensor '%s': data type %lld is %s (ONNX defines types 1 to 23)", tname,
                     (long long)tf.data_type, tf.has_data_type ? "unknown" : "missing");
  er_dtype dt = (er_dtype)tf.data_type;
  if (!er__dtype_is_numeric(dt))
    return er__error(ER_STATUS_UNSUPPORTED, "tensor '%s': data type %s is not supported", tname,
                     er_dtype_name(dt));
  if (tf.has_segment)
    return er__error(ER_STATUS_UNSUPPORTED, "tensor '%s': segmented tensors are not supported",
                     tname);

  int64_t count;
  if (!er__shape_count(rank, dims, &count))
    return er__error(ER_STATUS_INVALID_SHAPE, "tensor '%s': dims %s overflow 64 bits", tname,
                     er__dims_str(rank, dims, sbuf, sizeof sbuf));
  size_t esize = er_dtype_size(dt);
  uint64_t bytes;
  if (!er__mul_u64((uint64_t)count, esize, &bytes) || bytes > max_tensor)
    return er__error(ER_STATUS_LIMIT,
                     "tensor '%s' of dims %s and type %s exceeds max_tensor_bytes (%llu)", tname,
                     er__dims_str(rank, dims, sbuf, sizeof sbuf), er_dtype_name(dt),
                     (unsigned long long)max_tensor);
  if (pc->model) {
    uint64_t total;
    if (!er__add_u64(pc->model->total_bytes, bytes, &total) ||
        total > pc->model->limits.max_total_bytes)
      return er__error(ER_STATUS_LIMIT,
                       "tensor '%s': initializers together exceed max_total_bytes (%llu)", tname,
                       (unsigned long long)pc->model->limits.max_total_bytes);
    pc->model->total_bytes = total;
  }

  er__tensor_set(t, dt, rank, dims);
  /* Bytes the stored form takes: 4-bit types pack two per byte. */
  uint64_t packed_bytes = dtype_is_4bit(dt) ? ((uint64_t)count + 1) / 2 : bytes;

  if (tf.external || tf.has_location) return load_external(pc, t, &tf, count, bytes, packed_bytes, tname);
  if (tf.has_raw) return load_raw(pc, t, &tf, count, bytes, packed_bytes, tname);
  return load_typed(p, len, t, count, tname);
}

er_status er__ox_tensor_attr(parse_ctx *pc, const er_pb_field *f, er_tensor **out) {
  er_tensor *t = er__arena_alloc(pc->arena, sizeof *t);
  if (!t) return ER_STATUS_OUT_OF_MEMORY;
  ER_CHECK(expect_wire(f, ER_PB_LEN, "tensor"));
  ER_CHECK(er__onnx_tensor_from_proto(pc, f->data, f->len, t, NULL));
  ER_CHECK(adopt_tensor(pc, t));
  *out = t;
  return ER_STATUS_OK;
}

/* SparseTensorProto -> dense tensor. Indices are [NNZ] linear or
 * [NNZ, rank] coordinates, each checked against the dims. */
er_status er__ox_sparse_to_dense(parse_ctx *pc, const uint8_t *p, size_t len, er_tensor *out,
                                 const char **name_out) {
  er_pb pb = er__pb_init(p, len);
  er_pb_field f;
  bool done;
  const uint8_t *vp = NULL, *ip = NULL;
  size_t vlen = 0, ilen = 0;
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number == SPARSE_VALUES && f.wire == ER_PB_LEN) { vp = f.data; vlen = f.len; }
    if (f.number == SPARSE_INDICES && f.wire == ER_PB_LEN) { ip = f.data; ilen = f.len; }
  }
  uint64_t *dimv;
  uint64_t rank;
  ER_CHECK(er__ox_read_repeated(pc, p, p + len, SPARSE_DIMS, ER_PB_S_VARINT, ER_MAX_RANK,
                         "sparse tensor dims", &dimv, &rank));
  if (!vp || !ip)
    return er__error(ER_STATUS_INVALID_TENSOR, "sparse tensor lacks values or indices");
  er_tensor values, indices;
  const char *vname = NULL;
  parse_ctx tmp = *pc;  /* values and indices are parsed as model tensors */
  ER_CHECK(er__onnx_tensor_from_proto(&tmp, vp, vlen, &values, &vname));
  er_status st = er__onnx_tensor_from_proto(&tmp, ip, ilen, &indices, NULL);
  if (st != ER_STATUS_OK) {
    er__tensor_release(&values);
    return st;
  }
  if (name_out) *name_out = vname;
  int64_t dims[ER_MAX_RANK];
  for (uint64_t i = 0; i < rank; i++) {
    dims[i] = (int64_t)dimv[i];
    if (dims[i] < 0) {
      st = er__error(ER_STATUS_INVALID_SHAPE, "sparse tensor dim %lld is negative", (long long)dims[i]);
      goto done;
    }
  }
  int64_t nnz = er__tensor_count(&values);
  if (values.rank != 1 || indices.dtype != ER_DTYPE_INT64 ||
      !((indices.rank == 1 && indices.dims[0] == nnz) ||
        (indices.rank == 2 && indices.dims[0] == nnz && indices.dims[1] == (int64_t)rank))) {
    st = er__error(ER_STATUS_INVALID_TENSOR,
                   "sparse tensor: values must be 1-D and indices int64 [NNZ] or [NNZ, rank]");
    goto done;
  }
  er__tensor_set(out, values.dtype, (int)rank, dims);
  int64_t total = er__tensor_count(out);
  if (total < 0) {
    st = er__error(ER_STATUS_INVALID_SHAPE, "sparse tensor dims overflow");
    goto done;
  }
  st = er__tensor_alloc(out, pc->model ? pc->model->limits.max_tensor_bytes : 0);
  if (st != ER_STATUS_OK) goto done;
  size_t es = er_dtype_size(values.dtype);
  const int64_t *ind = indices.data;
  for (int64_t k = 0; k < nnz; k++) {
    int64_t lin = 0;
    if (indices.rank == 1) {
      lin = ind[k];
    } else {
      for (uint64_t d = 0; d < rank; d++) {
        int64_t c = ind[k * (int64_t)rank + (int64_t)d];
        if (c < 0 || c >= dims[d]) { lin = -1; break; }
        lin = lin * dims[d] + c;
      }
    }
    if (lin < 0 || lin >= total) {
      er__tensor_release(out);
      st = er__error(ER_STATUS_INVALID_TENSOR, "sparse tensor index %lld is outside %lld elements",
                     (long long)lin, (long long)total);
      goto done;
    }
    memcpy((char *)out->data + lin * (int64_t)es, (char *)values.data + k * (int64_t)es, es);
  }
done:
  er__tensor_release(&values);
  er__tensor_release(&indices);
  return st;
}

/* ======================================================================== */
/* Standalone tensor files                                                   */
/* ======================================================================== */

er_status er__onnx_parse_tensor_file(const void *data, size_t size, er_tensor *tensor_out,
                                     char **name_out) {
  er_arena arena;
  er__arena_init(&arena);
  parse_ctx pc = {NULL, &arena, 0};
  const char *name = NULL;
  er_tensor t = {0};
  /* On failure the parser has already freed anything it allocated. */
  er_status st = er__onnx_tensor_from_proto(&pc, data, size, &t, &name);
  if (st == ER_STATUS_OK && name_out) {
    *name_out = name ? strdup(name) : NULL;
    if (name && !*name_out) {
      er__tensor_release(&t);
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
    }
  }
  er__arena_free(&arena);
  if (st == ER_STATUS_OK) *tensor_out = t;
  return st;
}

er_status er__onnx_write_tensor(er_pbw *w, const er_tensor *t, const char *name) {
  for (int i = 0; i < t->rank; i++) {
    er__pbw_varint_field(w, TENSOR_DIMS, (uint64_t)t->dims[i]);
  }
  er__pbw_varint_field(w, TENSOR_DATA_TYPE, (uint64_t)t->dtype);
  if (name) er__pbw_bytes_field(w, TENSOR_NAME, name, strlen(name));
  if (t->dtype == ER_DTYPE_INT4 || t->dtype == ER_DTYPE_UINT4) {
    int64_t count = er__tensor_count(t);
    size_t packed = (size_t)(count + 1) / 2;
    uint8_t *buf = calloc(packed ? packed : 1, 1);
    if (!buf) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory writing a tensor");
    for (int64_t i = 0; i < count; i++)
      buf[i / 2] |= (uint8_t)((((const uint8_t *)t->data)[i] & 0xf) << ((i & 1) * 4));
    er__pbw_bytes_field(w, TENSOR_RAW_DATA, buf, packed);
    free(buf);
  } else {
    er__pbw_bytes_field(w, TENSOR_RAW_DATA, t->data, t->nbytes);
  }
  if (w->failed) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory writing a tensor");
  return ER_STATUS_OK;
}
