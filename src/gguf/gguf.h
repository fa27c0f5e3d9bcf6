/* gguf.h - a bounded, zero-copy reader of GGUF files (llama.cpp's model
 * format, versions 2 and 3).
 *
 * The file is memory-mapped (or a caller's buffer borrowed) and every
 * count, length, offset and alignment it declares is checked against the
 * bytes that are there and against the caps below before anything is
 * sized by it. Metadata values and tensor data are read in place: the
 * pointers handed out point into the mapping and live as long as the
 * er_gguf.
 *
 * Layout (all little-endian): "GGUF", u32 version, u64 tensor count, u64
 * key-value count; the key-value pairs (string key, u32 type, value); the
 * tensor infos (string name, u32 n_dims, u64 dims[n_dims], u32 type, u64
 * offset); padding to `general.alignment` (default 32); the tensor data,
 * each tensor at its offset from the start of that section. A string is a
 * u64 byte length and the bytes, without a terminating NUL. */
#ifndef ER_GGUF_H
#define ER_GGUF_H

#include "core/core.h"

/* Caps (STYLE rule 14); each appears in the error that enforces it. */
#define ER_GGUF_MAX_TENSORS 65536          /* tensor infos in one file */
#define ER_GGUF_MAX_KV 65536               /* metadata key-value pairs */
#define ER_GGUF_MAX_KEY_BYTES 65535        /* one metadata key */
#define ER_GGUF_MAX_NAME_BYTES 256         /* one tensor name */
#define ER_GGUF_MAX_STRING_BYTES (64u << 20) /* one string value (chat templates) */
#define ER_GGUF_MAX_ARRAY (64u << 20)      /* elements of one array */
#define ER_GGUF_MAX_DIMS 4                 /* dims of one tensor */
#define ER_GGUF_DEFAULT_ALIGNMENT 32
#define ER_GGUF_MAX_ALIGNMENT (1u << 20)

/* Metadata value types, as numbered in the file. */
typedef enum er_gguf_vtype {
  ER_GGUF_UINT8 = 0,
  ER_GGUF_INT8 = 1,
  ER_GGUF_UINT16 = 2,
  ER_GGUF_INT16 = 3,
  ER_GGUF_UINT32 = 4,
  ER_GGUF_INT32 = 5,
  ER_GGUF_FLOAT32 = 6,
  ER_GGUF_BOOL = 7,
  ER_GGUF_STRING = 8,
  ER_GGUF_ARRAY = 9,
  ER_GGUF_UINT64 = 10,
  ER_GGUF_INT64 = 11,
  ER_GGUF_FLOAT64 = 12,
  ER_GGUF_VTYPE_COUNT_
} er_gguf_vtype;

/* Tensor types, as numbered in the file (ggml's type ids). The reader
 * knows the block geometry of each so it can check every tensor's extent;
 * which of them the engine runs is the engine's business. */
#define ER_GGML_TYPE_LIST(X)                                                   \
  X(F32, 0, 1, 4)                                                              \
  X(F16, 1, 1, 2)                                                              \
  X(Q4_0, 2, 32, 18)                                                           \
  X(Q4_1, 3, 32, 20)                                                           \
  X(Q5_0, 6, 32, 22)                                                           \
  X(Q5_1, 7, 32, 24)                                                           \
  X(Q8_0, 8, 32, 34)                                                           \
  X(Q8_1, 9, 32, 36)                                                           \
  X(Q2_K, 10, 256, 84)                                                         \
  X(Q3_K, 11, 256, 110)                                                        \
  X(Q4_K, 12, 256, 144)                                                        \
  X(Q5_K, 13, 256, 176)                                                        \
  X(Q6_K, 14, 256, 210)                                                        \
  X(Q8_K, 15, 256, 292)                                                        \
  X(IQ2_XXS, 16, 256, 66)                                                      \
  X(IQ2_XS, 17, 256, 74)                                                       \
  X(IQ3_XXS, 18, 256, 98)                                                      \
  X(IQ1_S, 19, 256, 50)                                                        \
  X(IQ4_NL, 20, 32, 18)                                                        \
  X(IQ3_S, 21, 256, 110)                                                       \
  X(IQ2_S, 22, 256, 82)                                                        \
  X(IQ4_XS, 23, 256, 136)                                                      \
  X(I8, 24, 1, 1)                                                              \
  X(I16, 25, 1, 2)                                                             \
  X(I32, 26, 1, 4)                                                             \
  X(I64, 27, 1, 8)                                                             \
  X(F64, 28, 1, 8)                                                             \
  X(IQ1_M, 29, 256, 56)                                                        \
  X(BF16, 30, 1, 2)                                                            \
  X(TQ1_0, 34, 256, 54)                                                        \
  X(TQ2_0, 35, 256, 66)                                                        \
  X(MXFP4, 39, 32, 17)

typedef enum er_ggml_type {
#define ER__GGML_ENUM(name, id, blck, size) ER_GGML_##name = id,
  ER_GGML_TYPE_LIST(ER__GGML_ENUM)
#undef ER__GGML_ENUM
  ER_GGML_TYPE_COUNT_ = 40
} er_ggml_type;

/* "Q4_K", ...; NULL for an id the list does not have. */
const char *er__ggml_type_name(uint32_t type);
/* Elements per block and bytes per block; false for an unknown id. */
bool er__ggml_type_geometry(uint32_t type, int64_t *block_elems_out, int64_t *block_bytes_out);

/* A string inside the mapping: not NUL-terminated. */
typedef struct er_gguf_str {
  const char *p;
  uint64_t len;                /* bytes */
} er_gguf_str;

typedef struct er_gguf_kv {
  er_gguf_str key;
  er_gguf_vtype type;
  /* Scalars and arrays of numbers: `data` points at the first value in the
   * mapping (unaligned; read with the accessors), `n` values of type
   * elem_type (a scalar has n = 1 and elem_type = type). Strings: `strs`,
   * n of them (a scalar string has n = 1). */
  er_gguf_vtype elem_type;
  uint64_t n;
  const uint8_t *data;
  er_gguf_str *strs;           /* [n] for STRING and arrays of strings */
} er_gguf_kv;

typedef struct er_gguf_tensor {
  er_gguf_str name;
  char name_z[ER_GGUF_MAX_NAME_BYTES + 1]; /* the name, NUL-terminated */
  int n_dims;
  int64_t dims[ER_GGUF_MAX_DIMS]; /* ggml order: dims[0] is the row length
                                     (contiguous), unused entries 1 */
  uint32_t type;               /* er_ggml_type */
  uint64_t offset;             /* from the start of the data section */
  uint64_t n_elems;
  uint64_t nbytes;
  const void *data;            /* in the mapping */
} er_gguf_tensor;

typedef struct er_gguf er_gguf;

/* Opens and checks a GGUF file, memory-mapped read-only. `path` is
 * borrowed; max_file_bytes caps the file (0 = ER_DEFAULT_MAX_FILE_BYTES).
 * The reader is owned by the caller (er__gguf_close). Errors name the file,
 * the field and the rule: bad magic, unsupported version, a count past the
 * file or its cap, a string or array longer than the bytes left, an
 * unknown value or tensor type, dims whose product overflows, a tensor
 * offset that is unaligned, overlaps another tensor or ends past the file. */
er_status er__gguf_open(const char *path, uint64_t max_file_bytes, er_gguf **out);
/* The same over `size` bytes at `data`, which MUST outlive the reader (not
 * copied); `what` (borrowed) names it in errors. */
er_status er__gguf_open_buffer(const void *data, size_t size, const char *what, er_gguf **out);
void er__gguf_close(er_gguf *g);

uint32_t er__gguf_version(const er_gguf *g);
size_t er__gguf_kv_count(const er_gguf *g);
const er_gguf_kv *er__gguf_kv_at(const er_gguf *g, size_t i);
/* The pair with this key, or NULL. */
const er_gguf_kv *er__gguf_find(const er_gguf *g, const char *key);
size_t er__gguf_tensor_count(const er_gguf *g);
const er_gguf_tensor *er__gguf_tensor_at(const er_gguf *g, size_t i);
/* The tensor with this name, or NULL. */
const er_gguf_tensor *er__gguf_find_tensor(const er_gguf *g, const char *name);
/* The mapped bytes [base, base + size) (for the engine's page hints). */
void er__gguf_mapping(const er_gguf *g, const void **base_out, size_t *size_out);
/* The file's name as given (for messages). */
const char *er__gguf_what(const er_gguf *g);

/* Typed reads of scalar pairs. A missing key leaves *out alone and returns
 * NOT_FOUND (callers with a default ignore that); a present key of a type
 * that cannot represent the value exactly is TYPE_MISMATCH naming the key
 * and both types. Integers of any width convert when the value fits. */
er_status er__gguf_get_u64(const er_gguf *g, const char *key, uint64_t *out);
er_status er__gguf_get_u32(const er_gguf *g, const char *key, uint32_t *out);
er_status er__gguf_get_i64(const er_gguf *g, const char *key, int64_t *out);
er_status er__gguf_get_f32(const er_gguf *g, const char *key, float *out);
er_status er__gguf_get_bool(const er_gguf *g, const char *key, bool *out);
er_status er__gguf_get_str(const er_gguf *g, const char *key, er_gguf_str *out);

/* Element i (< kv->n) of a numeric pair, converted. */
int64_t er__gguf_kv_i64(const er_gguf_kv *kv, uint64_t i);
double er__gguf_kv_f64(const er_gguf_kv *kv, uint64_t i);
const char *er__gguf_vtype_name(er_gguf_vtype t);

#endif /* ER_GGUF_H */
