/* test-gguf.c - the GGUF reader on files this test writes byte by byte:
 * a valid file read back field by field, then the bad-input cases of
 * TESTING.md 16a, each a specific status and a message naming the field,
 * and every truncation of a valid file refused without a crash. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "gguf/gguf.h"

/* ---- a tiny GGUF writer ----------------------------------------------------- */

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
} buf;

static void put(buf *b, const void *v, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, v, n);
  b->n += n;
}
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void str(buf *b, const char *s) {
  u64(b, strlen(s));
  put(b, s, strlen(s));
}
static void pad_to(buf *b, size_t align) {
  while (b->n % align) put(b, "", 1);
}

/* What the writer puts in a file; each bad case changes one field. */
typedef struct spec {
  uint32_t version;
  uint64_t n_tensors_declared, n_kv_declared; /* UINT64_MAX: the real counts */
  uint32_t alignment;                          /* 0: no general.alignment key */
  uint64_t t1_offset;                          /* second tensor's offset; UINT64_MAX: after the first */
  uint32_t t1_type;
  uint64_t t1_dim0, t1_dim1;
  uint64_t str_len_override;                   /* UINT64_MAX: none; else general.name's declared length */
  uint64_t arr_len_override;                   /* same for the token array */
  bool dup_key, dup_tensor;
} spec;

static spec valid_spec(void) {
  return (spec){3, UINT64_MAX, UINT64_MAX, 0, UINT64_MAX, ER_GGML_Q8_0, 64, 2, UINT64_MAX, UINT64_MAX, false, false};
}

/* Two tensors: "a" F32 [4, 3] and "b" (t1_type) [t1_dim0, t1_dim1], plus
 * metadata of several types. */
static void write_gguf(buf *b, const spec *s) {
  b->n = 0;
  put(b, "GGUF", 4);
  u32(b, s->version);
  uint64_t n_kv = 6 + (s->alignment ? 1 : 0) + (s->dup_key ? 1 : 0);
  u64(b, s->n_tensors_declared != UINT64_MAX ? s->n_tensors_declared : 2);
  u64(b, s->n_kv_declared != UINT64_MAX ? s->n_kv_declared : n_kv);
  str(b, "general.architecture");
  u32(b, ER_GGUF_STRING);
  str(b, "llama");
  str(b, "general.name");
  u32(b, ER_GGUF_STRING);
  if (s->str_len_override != UINT64_MAX) {
    u64(b, s->str_len_override);
    put(b, "tiny", 4);
  } else {
    str(b, "tiny");
  }
  str(b, "llama.block_count");
  u32(b, ER_GGUF_UINT32);
  u32(b, 2);
  str(b, "llama.rope.freq_base");
  u32(b, ER_GGUF_FLOAT32);
  float f = 10000.0f;
  put(b, &f, 4);
  str(b, "tokenizer.ggml.add_bos_token");
  u32(b, ER_GGUF_BOOL);
  put(b, "\1", 1);
  str(b, "tokenizer.ggml.tokens");
  u32(b, ER_GGUF_ARRAY);
  u32(b, ER_GGUF_STRING);
  if (s->arr_len_override != UINT64_MAX) u64(b, s->arr_len_override);
  else u64(b, 3);
  str(b, "<s>");
  str(b, "hello");
  str(b, "\xe4\xbd\xa0"); /* a CJK character */
  if (s->alignment) {
    str(b, "general.alignment");
    u32(b, ER_GGUF_UINT32);
    u32(b, s->alignment);
  }
  if (s->dup_key) {
    str(b, "llama.block_count");
    u32(b, ER_GGUF_UINT32);
    u32(b, 3);
  }
  uint32_t align = s->alignment ? s->alignment : 32;
  /* tensor infos */
  str(b, "a");
  u32(b, 2);
  u64(b, 4);
  u64(b, 3);
  u32(b, ER_GGML_F32);
  u64(b, 0);
  str(b, s->dup_tensor ? "a" : "b");
  u32(b, 2);
  u64(b, s->t1_dim0);
  u64(b, s->t1_dim1);
  u32(b, s->t1_type);
  uint64_t a_bytes = 4 * 3 * 4, a_end = (a_bytes + align - 1) / align * align;
  u64(b, s->t1_offset != UINT64_MAX ? s->t1_offset : a_end);
  pad_to(b, align);
  /* data: a = 0..11 as floats, b = Q8_0 blocks of d = 1, q = row index */
  for (int i = 0; i < 12; i++) {
    float v = (float)i;
    put(b, &v, 4);
  }
  pad_to(b, align);
  int64_t be, bb;
  if (!er__ggml_type_geometry(s->t1_type, &be, &bb)) be = 1, bb = 4;
  uint64_t blocks = s->t1_dim0 / (uint64_t)be * s->t1_dim1;
  if (blocks > 4096) blocks = 4096; /* the overflow cases write a few bytes only */
  for (uint64_t k = 0; k < blocks; k++) {
    uint8_t blk[512] = {0};
    uint16_t one = 0x3c00; /* fp16 1.0 */
    memcpy(blk, &one, 2);
    for (int j = 0; j < 32; j++) blk[2 + j] = (uint8_t)(k % 100);
    put(b, blk, (size_t)bb);
  }
}

static er_status open_spec(const spec *s, er_gguf **g) {
  static buf b;
  write_gguf(&b, s);
  return er__gguf_open_buffer(b.p, b.n, "test.gguf", g);
}

/* ---- the valid file ------------------------------------------------------------ */

static void test_valid(void) {
  spec s = valid_spec();
  er_gguf *g = NULL;
  CHECK_STATUS(open_spec(&s, &g), ER_STATUS_OK);
  if (!g) return;
  CHECK(er__gguf_version(g) == 3);
  CHECK(er__gguf_kv_count(g) == 6);
  CHECK(er__gguf_tensor_count(g) == 2);
  er_gguf_str arch;
  CHECK_STATUS(er__gguf_get_str(g, "general.architecture", &arch), ER_STATUS_OK);
  CHECK(arch.len == 5 && memcmp(arch.p, "llama", 5) == 0);
  uint32_t blocks = 0;
  CHECK_STATUS(er__gguf_get_u32(g, "llama.block_count", &blocks), ER_STATUS_OK);
  CHECK(blocks == 2);
  int64_t bl64 = 0;
  CHECK_STATUS(er__gguf_get_i64(g, "llama.block_count", &bl64), ER_STATUS_OK);
  CHECK(bl64 == 2);
  float base = 0;
  CHECK_STATUS(er__gguf_get_f32(g, "llama.rope.freq_base", &base), ER_STATUS_OK);
  CHECK(base == 10000.0f);
  bool bos = false;
  CHECK_STATUS(er__gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &bos), ER_STATUS_OK);
  CHECK(bos);
  /* A missing key is NOT_FOUND and leaves the output alone. */
  uint32_t keep = 77;
  CHECK_STATUS(er__gguf_get_u32(g, "llama.context_length", &keep), ER_STATUS_NOT_FOUND);
  CHECK(keep == 77);
  /* Wrong types are named. */
  CHECK_STATUS(er__gguf_get_u32(g, "general.name", &keep), ER_STATUS_TYPE_MISMATCH);
  CHECK_MSG("general.name");
  CHECK_STATUS(er__gguf_get_bool(g, "llama.block_count", &bos), ER_STATUS_TYPE_MISMATCH);
  CHECK_STATUS(er__gguf_get_str(g, "tokenizer.ggml.tokens", &arch), ER_STATUS_TYPE_MISMATCH);
  CHECK_MSG("is an array");
  const er_gguf_kv *tok = er__gguf_find(g, "tokenizer.ggml.tokens");
  CHECK(tok && tok->type == ER_GGUF_ARRAY && tok->elem_type == ER_GGUF_STRING && tok->n == 3);
  if (tok && tok->n == 3) {
    CHECK(tok->strs[1].len == 5 && memcmp(tok->strs[1].p, "hello", 5) == 0);
    CHECK(tok->strs[2].len == 3);
  }
  const er_gguf_tensor *a = er__gguf_find_tensor(g, "a"), *b = er__gguf_find_tensor(g, "b");
  CHECK(a && b && !er__gguf_find_tensor(g, "c"));
  if (a && b) {
    CHECK(a->n_dims == 2 && a->dims[0] == 4 && a->dims[1] == 3 && a->type == ER_GGML_F32);
    CHECK(a->nbytes == 48 && a->n_elems == 12);
    float v[12];
    memcpy(v, a->data, sizeof v);
    CHECK(v[0] == 0.0f && v[11] == 11.0f);
    CHECK(b->type == ER_GGML_Q8_0 && b->nbytes == 4 * 34 && b->dims[0] == 64 && b->dims[1] == 2);
    CHECK(((const uint8_t *)b->data)[2 + 34] == 1); /* block 1's quants */
    CHECK((uintptr_t)((const uint8_t *)b->data - (const uint8_t *)a->data) % 32 == 0);
  }
  CHECK(strcmp(er__ggml_type_name(ER_GGML_Q4_K), "Q4_K") == 0 && er__ggml_type_name(5) == NULL);
  er__gguf_close(g);
  er__gguf_close(NULL);
  /* A custom alignment is honoured. */
  s.alignment = 64;
  CHECK_STATUS(open_spec(&s, &g), ER_STATUS_OK);
  if (g) {
    const er_gguf_tensor *t = er__gguf_find_tensor(g, "b");
    CHECK(t && t->offset == 64);
    er__gguf_close(g);
  }
  /* Version 2 reads the same. */
  s = valid_spec();
  s.version = 2;
  CHECK_STATUS(open_spec(&s, &g), ER_STATUS_OK);
  er__gguf_close(g);
}

/* ---- TESTING.md 16a --------------------------------------------------------------- */

static void expect(const spec *s, er_status want, const char *needle) {
  er_gguf *g = (er_gguf *)(uintptr_t)1;
  CHECK_STATUS(open_spec(s, &g), want);
  if (needle) CHECK_MSG(needle);
  CHECK(g == (er_gguf *)(uintptr_t)1); /* untouched on failure */
}

static void test_header(void) {
  er_gguf *g = NULL;
  CHECK_STATUS(er__gguf_open_buffer("", 0, "empty.gguf", &g), ER_STATUS_TRUNCATED);
  CHECK_MSG("empty.gguf");
  CHECK_STATUS(er__gguf_open_buffer("GGML\3\0\0\0", 8, "x.gguf", &g), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("not a GGUF file");
  spec s = valid_spec();
  s.version = 1;
  expect(&s, ER_STATUS_UNSUPPORTED, "GGUF version 1");
  s.version = 4;
  expect(&s, ER_STATUS_UNSUPPORTED, "GGUF version 4");
  /* Counts past the caps, and past what the file could hold. */
  s = valid_spec();
  s.n_tensors_declared = (uint64_t)ER_GGUF_MAX_TENSORS + 1;
  expect(&s, ER_STATUS_LIMIT, "ER_GGUF_MAX_TENSORS");
  s = valid_spec();
  s.n_kv_declared = UINT64_MAX - 1;
  expect(&s, ER_STATUS_LIMIT, "ER_GGUF_MAX_KV");
  s = valid_spec();
  s.n_kv_declared = 60000;
  expect(&s, ER_STATUS_TRUNCATED, "cannot fit");
  s = valid_spec();
  s.n_tensors_declared = 3;
  expect(&s, ER_STATUS_INVALID_MODEL, "tensor 2 has an empty name"); /* the data read as a tensor info */
  s = valid_spec();
  s.dup_key = true;
  expect(&s, ER_STATUS_INVALID_MODEL, "key 'llama.block_count' appears twice");
  s = valid_spec();
  s.alignment = 48;
  expect(&s, ER_STATUS_INVALID_MODEL, "general.alignment is 48");
}

static void test_lengths(void) {
  spec s = valid_spec();
  s.str_len_override = UINT64_MAX - 3; /* wraps if added to the position */
  expect(&s, ER_STATUS_LIMIT, "string");
  s.str_len_override = 1u << 20; /* under the cap but past the file */
  expect(&s, ER_STATUS_TRUNCATED, "the file has");
  s = valid_spec();
  s.arr_len_override = UINT64_MAX / 8;
  expect(&s, ER_STATUS_LIMIT, "ER_GGUF_MAX_ARRAY");
  s.arr_len_override = 1u << 24; /* under the cap: more strings than bytes */
  expect(&s, ER_STATUS_TRUNCATED, "strings but only");
}

static void test_tensors(void) {
  spec s = valid_spec();
  s.t1_offset = 40; /* not a multiple of 32 */
  expect(&s, ER_STATUS_INVALID_MODEL, "not a multiple of the alignment 32");
  s.t1_offset = 32; /* inside tensor a (48 bytes at 0) */
  expect(&s, ER_STATUS_INVALID_MODEL, "overlaps tensor 'a'");
  s.t1_offset = 1u << 20; /* past the end */
  expect(&s, ER_STATUS_TRUNCATED, "ends past");
  s.t1_offset = UINT64_MAX - 31; /* offset + bytes wraps */
  expect(&s, ER_STATUS_TRUNCATED, "ends past");
  s = valid_spec();
  s.t1_type = 5; /* a removed ggml type (Q4_2) */
  expect(&s, ER_STATUS_UNSUPPORTED, "type 5, which is not a known ggml type");
  s.t1_type = 1000;
  expect(&s, ER_STATUS_UNSUPPORTED, "type 1000");
  s = valid_spec();
  s.t1_dim0 = 48; /* not whole Q8_0 blocks */
  expect(&s, ER_STATUS_INVALID_SHAPE, "not a multiple of its block of 32");
  s = valid_spec();
  s.t1_dim0 = (uint64_t)1 << 32;
  s.t1_dim1 = (uint64_t)1 << 32;
  expect(&s, ER_STATUS_INVALID_SHAPE, "multiply past 2^63");
  s = valid_spec();
  s.t1_dim1 = (uint64_t)1 << 63;
  expect(&s, ER_STATUS_INVALID_SHAPE, "negative as a signed count");
  s = valid_spec();
  s.dup_tensor = true;
  s.t1_type = ER_GGML_F32;
  s.t1_dim0 = 4;
  s.t1_dim1 = 3;
  expect(&s, ER_STATUS_INVALID_MODEL, "tensor 'a' is defined twice");
}

static void test_truncations(void) {
  spec s = valid_spec();
  buf b = {0};
  write_gguf(&b, &s);
  int refused = 0;
  for (size_t n = 0; n < b.n; n++) {
    /* An exact-size copy: a read past it is a sanitizer report. */
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, b.p, n);
    er_gguf *g = NULL;
    er_status st = er__gguf_open_buffer(copy, n, "cut.gguf", &g);
    if (st != ER_STATUS_OK) refused++;
    else er__gguf_close(g);
    free(copy);
  }
  /* Every cut before the last tensor's last byte is refused. */
  CHECK(refused == (int)b.n);
  free(b.p);
}

static void test_file(void) {
  er_gguf *g = NULL;
  CHECK_STATUS(er__gguf_open("/nonexistent/x.gguf", 0, &g), ER_STATUS_IO);
  CHECK_MSG("/nonexistent/x.gguf");
  CHECK_STATUS(er__gguf_open("/tmp", 0, &g), ER_STATUS_IO);
  spec s = valid_spec();
  buf b = {0};
  write_gguf(&b, &s);
  char path[] = "/tmp/er-gguf-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  FILE *f = fdopen(fd, "wb");
  fwrite(b.p, 1, b.n, f);
  fclose(f);
  CHECK_STATUS(er__gguf_open(path, 0, &g), ER_STATUS_OK);
  er__gguf_close(g);
  CHECK_STATUS(er__gguf_open(path, 100, &g), ER_STATUS_LIMIT);
  CHECK_MSG("max_file_bytes");
  remove(path);
  free(b.p);
}

/* A float metadata value read as an integer saturates (NaN gives 0): a
 * plain cast of NaN or of -1e30 to int64 is undefined behaviour. */
static void test_float_as_int(void) {
  static const float vals[] = {NAN, -1e30f, 1e30f, -2.5f};
  static const int64_t want[] = {0, INT64_MIN, INT64_MAX, -2};
  spec s = valid_spec();
  buf b = {0};
  write_gguf(&b, &s);
  const char *key = "llama.rope.freq_base";
  size_t at = 0;
  for (size_t i = 0; i + strlen(key) <= b.n; i++)
    if (memcmp(b.p + i, key, strlen(key)) == 0) at = i + strlen(key) + 4; /* after the name and its type */
  CHECK(at > 0);
  for (size_t c = 0; c < ER_ARRAY_LEN(vals) && at; c++) {
    memcpy(b.p + at, &vals[c], 4);
    er_gguf *g = NULL;
    CHECK_STATUS(er__gguf_open_buffer(b.p, b.n, "test.gguf", &g), ER_STATUS_OK);
    if (!g) continue;
    const er_gguf_kv *kv = er__gguf_find(g, key);
    CHECK(kv != NULL);
    if (kv) CHECK(er__gguf_kv_i64(kv, 0) == want[c]);
    er__gguf_close(g);
  }
  free(b.p);
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"valid", test_valid},       {"header", test_header}, {"lengths", test_lengths},
      {"tensors", test_tensors},   {"truncations", test_truncations}, {"file", test_file},
      {"float_as_int", test_float_as_int},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
