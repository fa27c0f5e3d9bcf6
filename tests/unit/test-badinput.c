/* test-badinput.c - the model-file bad-input cases of TESTING.md (1-12, 15;
 * 13 and 14 live in test-badinput-ops.c): each must fail with its specific
 * status and a message naming the problem, never crash, never read outside
 * the model's folder. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "onnx-builder.h"

static er_status load_bytes(const er_pbw *w, const char *dir, er_model **out) {
  return er_model_load_buffer(w->buf, w->len, dir, NULL, out);
}

static er_status load_expect(const er_pbw *w, const char *dir) {
  er_model *m = NULL;
  er_status st = load_bytes(w, dir, &m);
  er_model_free(m);
  return st;
}

/* A model y = x + W with W an initializer whose TensorProto body is `w`. */
static void add_model_with(er_pbw *m, const er_pbw *w_tensor, int64_t ir) {
  er_pbw g = {0};
  const int64_t dims[1] = {4};
  tb_node(&g, "Add", "add", (const char *const[]){"x", "W", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_initializer(&g, w_tensor);
  tb_graph_input(&g, "x", 1, 1, dims);
  tb_graph_output(&g, "y", 1, 1, dims);
  tb_model(m, ir, 13, &g);
  er__pbw_free(&g);
}

static const float four[4] = {1, 2, 3, 4};

/* ---- case 1: empty file, truncations ----------------------------------- */

static void test_empty(void) {
  er_model *m = NULL;
  CHECK_STATUS(er_model_load_buffer("", 0, NULL, NULL, &m), ER_STATUS_TRUNCATED);
  CHECK(m == NULL);
  char path[] = "/tmp/er-empty-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  CHECK_STATUS(er_model_load_file(path, NULL, &m), ER_STATUS_TRUNCATED);
  CHECK_MSG("empty");
  unlink(path);
}

static void test_every_truncation(void) {
  er_pbw w = {0}, t = {0};
  const int64_t d[1] = {4};
  tb_tensor(&t, "W", 1, 1, d, four, sizeof four);
  add_model_with(&w, &t, 8);
  er_model *m = NULL;
  CHECK_STATUS(load_bytes(&w, NULL, &m), ER_STATUS_OK);
  er_model_free(m);
  int ok_count = 0, bad = 0;
  for (size_t len = 0; len < w.len; len++) {
    m = NULL;
    er_status st = er_model_load_buffer(w.buf, len, NULL, NULL, &m);
    if (st == ER_STATUS_OK) ok_count++;
    /* A cut inside a field is TRUNCATED; a cut between top-level fields
     * leaves a shorter valid message, which must then fail validation. */
    if (st != ER_STATUS_TRUNCATED && st != ER_STATUS_INVALID_MODEL && st != ER_STATUS_INVALID_GRAPH &&
        st != ER_STATUS_MALFORMED && st != ER_STATUS_UNSUPPORTED && st != ER_STATUS_OK)
      bad++;
    er_model_free(m);
  }
  CHECK(ok_count == 0);
  CHECK(bad == 0);
  er__pbw_free(&w);
  er__pbw_free(&t);
}

static void test_truncated_real_model(void) {
  /* Every truncation of the bundled digits model (about 16 KB). A cut
   * inside a top-level field must be TRUNCATED; a cut between top-level
   * fields leaves a shorter, well-formed message, which loads only if it
   * still holds the graph and the opset imports (only trailing metadata was
   * cut). */
  FILE *f = fopen(ER_SOURCE_DIR "/models/digits/model.onnx", "rb");
  CHECK(f != NULL);
  if (!f) return;
  static unsigned char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  static bool boundary[1 << 20];
  size_t graph_end = 0;
  er_pb pb = er__pb_init(buf, n);
  er_pb_field fld;
  bool done;
  boundary[0] = true;
  while (er__pb_next(&pb, &fld, &done) == ER_STATUS_OK && !done) {
    boundary[pb.p - buf] = true;
    if (fld.number == 7 || fld.number == 8) graph_end = (size_t)(pb.p - buf);
  }
  CHECK(graph_end > 0);
  int wrong = 0;
  for (size_t len = 0; len < n; len++) {
    er_model *m = NULL;
    er_status st = er_model_load_buffer(buf, len, NULL, NULL, &m);
    er_model_free(m);
    if (!boundary[len]) {
      if (st != ER_STATUS_TRUNCATED) wrong++;
    } else if (len >= graph_end) {
      if (st != ER_STATUS_OK) wrong++;
    } else if (st == ER_STATUS_OK) {
      wrong++;
    }
  }
  CHECK(wrong == 0);
}

/* ---- case 2: length past the end; 11-byte varint ------------------------ */

static void test_length_past_end(void) {
  er_pbw w = {0};
  er__pbw_varint_field(&w, 1, 8);
  er__pbw_tag(&w, 7, ER_PB_LEN);
  er__pbw_varint(&w, 1000); /* graph claims 1000 bytes; 3 follow */
  er__pbw_raw(&w, "abc", 3);
  CHECK_STATUS(load_expect(&w, NULL), ER_STATUS_TRUNCATED);
  CHECK_MSG("1000 bytes");
  er__pbw_free(&w);
}

static void test_long_varint(void) {
  er_pbw w = {0};
  er__pbw_tag(&w, 1, ER_PB_VARINT);
  for (int i = 0; i < 10; i++) er__pbw_raw(&w, "\xff", 1);
  er__pbw_raw(&w, "\x01", 1); /* 11th byte */
  CHECK_STATUS(load_expect(&w, NULL), ER_STATUS_MALFORMED);
  CHECK_MSG("varint");
  er__pbw_free(&w);
  /* Ten bytes whose last one overflows 64 bits. */
  er_pbw v = {0};
  er__pbw_tag(&v, 1, ER_PB_VARINT);
  for (int i = 0; i < 9; i++) er__pbw_raw(&v, "\xff", 1);
  er__pbw_raw(&v, "\x7f", 1);
  CHECK_STATUS(load_expect(&v, NULL), ER_STATUS_MALFORMED);
  er__pbw_free(&v);
  /* A huge length (2^63) in a nested message. */
  er_pbw h = {0};
  er__pbw_varint_field(&h, 1, 8);
  er__pbw_tag(&h, 6, ER_PB_LEN);
  er__pbw_varint(&h, UINT64_C(1) << 63);
  CHECK_STATUS(load_expect(&h, NULL), ER_STATUS_TRUNCATED);
  er__pbw_free(&h);
}

/* ---- case 3: nesting -------------------------------------------------- */

/* A chain of `depth` nested If nodes, each then/else branch holding the
 * next level. */
static void nested_if_graph(er_pbw *g, int depth) {
  const int64_t one[1] = {1};
  if (depth == 0) {
    tb_node(g, "Relu", "leaf", (const char *const[]){"x", NULL}, (const char *const[]){"o", NULL}, NULL);
    tb_graph_output(g, "o", 1, 1, one);
    return;
  }
  /* Only the then-branch nests further, so the size grows linearly. */
  er_pbw inner = {0}, leaf = {0}, attrs = {0};
  nested_if_graph(&inner, depth - 1);
  nested_if_graph(&leaf, 0);
  tb_attr_graph(&attrs, "then_branch", &inner);
  tb_attr_graph(&attrs, "else_branch", &leaf);
  er__pbw_free(&leaf);
  tb_node(g, "If", "if", (const char *const[]){"c", NULL}, (const char *const[]){"o", NULL}, &attrs);
  tb_graph_output(g, "o", 1, 1, one);
  er__pbw_free(&inner);
  er__pbw_free(&attrs);
}

static void test_deep_subgraphs(void) {
  er_pbw g = {0}, m = {0};
  const int64_t one[1] = {1};
  nested_if_graph(&g, 40);
  tb_graph_input(&g, "c", 9, 1, one);
  tb_graph_input(&g, "x", 1, 1, one);
  tb_model(&m, 8, 13, &g);
  CHECK_STATUS(load_expect(&m, NULL), ER_STATUS_LIMIT);
  CHECK_MSG("max_nesting");
  er__pbw_free(&g);
  er__pbw_free(&m);
}

static void test_deep_unknown_fields(void) {
  /* 100,000 levels of an unknown field inside a node: the reader skips
   * unknown fields by length and never descends, so this costs no stack
   * and loads fine. The blob is written outside-in: level i's length is
   * the size of everything inside it. */
  enum { DEPTH = 100000 };
  static uint64_t inner[DEPTH + 1];
  inner[DEPTH] = 0;
  for (int i = DEPTH - 1; i >= 0; i--) {
    er_pbw tmp = {0};
    er__pbw_varint(&tmp, inner[i + 1]);
    inner[i] = 2 + tmp.len + inner[i + 1]; /* tag 99 takes 2 bytes */
    er__pbw_free(&tmp);
  }
  er_pbw blob = {0};
  for (int i = 0; i < DEPTH; i++) {
    er__pbw_tag(&blob, 99, ER_PB_LEN);
    er__pbw_varint(&blob, inner[i + 1]);
  }
  CHECK(blob.len == inner[0]);
  er_pbw g = {0}, m = {0}, n = {0};
  const int64_t dims[2] = {1, 4};
  tb_str(&n, 1, "x");
  tb_str(&n, 2, "y");
  tb_str(&n, 4, "Relu");
  er__pbw_raw(&n, blob.buf, blob.len);
  tb_embed(&g, 1, &n);
  tb_graph_input(&g, "x", 1, 2, dims);
  tb_graph_output(&g, "y", 1, 2, dims);
  tb_model(&m, 8, 13, &g);
  CHECK_STATUS(load_expect(&m, NULL), ER_STATUS_OK);
  er__pbw_free(&blob);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&n);
}

/* ---- case 4: negative and overflowing dims ----------------------------- */

static void test_bad_dims(void) {
  er_pbw t = {0}, m = {0};
  const int64_t neg[1] = {-3};
  tb_tensor(&t, "W", 1, 1, neg, four, sizeof four);
  add_model_with(&m, &t, 8);
  CHECK_STATUS(load_expect(&m, NULL), ER_STATUS_INVALID_SHAPE);
  CHECK_MSG("-3");
  er__pbw_free(&t);
  er__pbw_free(&m);

  er_pbw t2 = {0}, m2 = {0};
  const int64_t big[3] = {INT64_C(1) << 32, INT64_C(1) << 32, INT64_C(1) << 32};
  tb_tensor(&t2, "W", 1, 3, big, four, sizeof four);
  add_model_with(&m2, &t2, 8);
  CHECK_STATUS(load_expect(&m2, NULL), ER_STATUS_INVALID_SHAPE);
  CHECK_MSG("overflow");
  er__pbw_free(&t2);
  er__pbw_free(&m2);

  /* [2^32, 2^32] overflows int64 as an element count. */
  er_pbw t4 = {0}, m5 = {0};
  tb_tensor(&t4, "W", 1, 2, big, four, sizeof four);
  add_model_with(&m5, &t4, 8);
  CHECK_STATUS(load_expect(&m5, NULL), ER_STATUS_INVALID_SHAPE);
  er__pbw_free(&t4);
  er__pbw_free(&m5);

  /* [2^31, 2^31] fits int64 as a count, but its float bytes overflow. */
  er_pbw t3 = {0}, m3 = {0};
  const int64_t half[2] = {INT64_C(1) << 31, INT64_C(1) << 31};
  tb_tensor(&t3, "W", 1, 2, half, four, sizeof four);
  add_model_with(&m3, &t3, 8);
  CHECK_STATUS(load_expect(&m3, NULL), ER_STATUS_LIMIT);
  CHECK_MSG("max_tensor_bytes");
  er__pbw_free(&t3);
  er__pbw_free(&m3);

  /* A graph input declared with a negative dim. */
  er_pbw g = {0}, m4 = {0};
  er_pbw vi = {0}, tt = {0}, type = {0}, shape = {0}, dim = {0};
  er__pbw_varint_field(&dim, 1, (uint64_t)(int64_t)-5); /* -1 means unknown; -5 is wrong */
  tb_embed(&shape, 1, &dim);
  er__pbw_varint_field(&tt, 1, 1);
  tb_embed(&tt, 2, &shape);
  tb_embed(&type, 1, &tt);
  tb_str(&vi, 1, "x");
  tb_embed(&vi, 2, &type);
  tb_node(&g, "Relu", "r", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_embed(&g, 11, &vi);
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m4, 8, 13, &g);
  CHECK_STATUS(load_expect(&m4, NULL), ER_STATUS_INVALID_SHAPE);
  er__pbw_free(&g);
  er__pbw_free(&m4);
  er__pbw_free(&vi);
  er__pbw_free(&tt);
  er__pbw_free(&type);
  er__pbw_free(&shape);
  er__pbw_free(&dim);
}

/* ---- case 5: initializer totals over the cap ----------------------------- */

static void test_total_cap(void) {
  er_pbw g = {0}, m = {0};
  const int64_t d[1] = {4};
  static float data[1024];
  const int64_t dn[1] = {1024};
  /* Ten 4 KiB initializers against a 16 KiB total cap. */
  for (int i = 0; i < 10; i++) {
    er_pbw t = {0};
    char name[16];
    snprintf(name, sizeof name, "W%d", i);
    tb_tensor(&t, name, 1, 1, dn, data, sizeof data);
    tb_graph_initializer(&g, &t);
    er__pbw_free(&t);
  }
  tb_node(&g, "Relu", "r", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 1, d);
  tb_graph_output(&g, "y", 1, 1, d);
  tb_model(&m, 8, 13, &g);
  er_load_options o;
  er_load_options_init(&o);
  o.max_total_bytes = 16 * 1024;
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, &o, &model), ER_STATUS_LIMIT);
  CHECK_MSG("max_total_bytes");
  er_model_free(model);
  o.max_total_bytes = 0;
  o.max_tensor_bytes = 1024;
  CHECK_STATUS(er_model_load_buffer(m.buf, m.len, NULL, &o, &model), ER_STATUS_LIMIT);
  CHECK_MSG("max_tensor_bytes");
  er__pbw_free(&g);
  er__pbw_free(&m);
}

/* ---- case 6: raw_data length -------------------------------------------- */

static void test_raw_length(void) {
  er_pbw t = {0}, m = {0};
  const int64_t d[1] = {4};
  tb_tensor(&t, "W", 1, 1, d, four, 12); /* 12 bytes for 4 floats */
  add_model_with(&m, &t, 8);
  CHECK_STATUS(load_expect(&m, NULL), ER_STATUS_INVALID_TENSOR);
  CHECK_MSG("raw_data holds 12 bytes");
  er__pbw_free(&t);
  er__pbw_free(&m);
  /* Typed data with the wrong count. */
  er_pbw t2 = {0}, m2 = {0};
  tb_tensor(&t2, "W", 1, 1, d, NULL, 0);
  for (int i = 0; i < 3; i++) {
    er__pbw_tag(&t2, 4, ER_PB_FIXED32);
    er__pbw_raw(&t2, &four[i], 4);
  }
  add_model_with(&m2, &t2, 8);
  CHECK_STATUS(load_expect(&m2, NULL), ER_STATUS_INVALID_TENSOR);
  er__pbw_free(&t2);
  er__pbw_free(&m2);
}

/* ---- case 7: unknown type, huge string ---------------------------------- */

static void test_unknown_dtype(void) {
  er_pbw t = {0}, m = {0};
  const int64_t d[1] = {4};
  tb_tensor(&t, "W", 99, 1, d, four, sizeof four);
  add_model_with(&m, &t, 8);
  CHECK_STATUS(load_expect(&m, NULL), ER_STATUS_INVALID_TENSOR);
  CHECK_MSG("99");
  er__pbw_free(&t);
  er__pbw_free(&m);
  /* A negative type (varint of -1). */
  er_pbw t2 = {0}, m2 = {0};
  tb_tensor(&t2, "W", -1, 1, d, four, sizeof four);
  add_model_with(&m2, &t2, 8);
  CHECK_STATUS(load_expect(&m2, NULL), ER_STATUS_INVALID_TENSOR);
  er__pbw_free(&t2);
  er__pbw_free(&m2);
  /* A type newer IR versions define (FLOAT6E2M3, IR 14): refused by name. */
  er_pbw t3 = {0}, m3 = {0};
  tb_tensor(&t3, "W", 27, 1, d, four, sizeof four);
  add_model_with(&m3, &t3, 8);
  CHECK_STATUS(load_expect(&m3, NULL), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("FLOAT6E2M3");
  er__pbw_free(&t3);
  er__pbw_free(&m3);
}

static void test_huge_string(void) {
  /* A node name declaring 2^40 bytes: rejected before any allocation. */
  er_pbw g = {0}, m = {0}, n = {0};
  tb_str(&n, 4, "Relu");
  er__pbw_tag(&n, 3, ER_PB_LEN);
  er__pbw_varint(&n, UINT64_C(1) << 40);
  tb_embed(&g, 1, &n);
  tb_model(&m, 8, 13, &g);
  CHECK_STATUS(load_expect(&m, NULL), ER_STATUS_TRUNCATED);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&n);
  /* A name longer than ER_MAX_NAME_BYTES that is really there. */
  static char longname[10000];
  memset(longname, 'a', sizeof longname - 1);
  er_pbw g2 = {0}, m2 = {0};
  tb_node(&g2, "Relu", longname, (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_model(&m2, 8, 13, &g2);
  CHECK_STATUS(load_expect(&m2, NULL), ER_STATUS_LIMIT);
  CHECK_MSG("ER_MAX_NAME_BYTES");
  er__pbw_free(&g2);
  er__pbw_free(&m2);
}

/* ---- cases 8-11: external data ------------------------------------------ */

static char tmpdir[64];

static void write_file(const char *rel, const void *data, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(data, 1, n, f);
    fclose(f);
  }
}

typedef enum { SRC_INITIALIZER, SRC_SPARSE, SRC_CONSTANT, SRC_SUBGRAPH } tensor_source;

/* An external tensor W of 4 floats at `location` with extra entries, put in
 * the model through source `src`. */
static void ext_model(er_pbw *m, tensor_source src, const char *location, const char *offset,
                      const char *length, const char *extra_key) {
  er_pbw t = {0}, g = {0};
  const int64_t d[1] = {4};
  tb_tensor(&t, "W", 1, 1, d, NULL, 0);
  if (location) tb_tensor_ext(&t, "location", location);
  if (offset) tb_tensor_ext(&t, "offset", offset);
  if (length) tb_tensor_ext(&t, "length", length);
  if (extra_key) tb_tensor_ext(&t, extra_key, "1");
  switch (src) {
    case SRC_INITIALIZER:
      tb_graph_initializer(&g, &t);
      break;
    case SRC_SPARSE: {
      er_pbw idx = {0};
      const int64_t two[1] = {4};
      const int64_t ind[4] = {0, 1, 2, 3};
      tb_tensor(&idx, NULL, 7, 1, two, ind, sizeof ind);
      tb_graph_sparse_initializer(&g, &t, &idx, 1, d);
      er__pbw_free(&idx);
      break;
    }
    case SRC_CONSTANT: {
      er_pbw attrs = {0};
      tb_attr_tensor(&attrs, "value", &t);
      tb_node(&g, "Constant", "c", NULL, (const char *const[]){"W", NULL}, &attrs);
      er__pbw_free(&attrs);
      break;
    }
    case SRC_SUBGRAPH: {
      er_pbw sub = {0}, attrs = {0};
      tb_graph_initializer(&sub, &t);
      tb_node(&sub, "Relu", "inner", (const char *const[]){"W", NULL}, (const char *const[]){"o", NULL}, NULL);
      tb_graph_output(&sub, "o", 1, 1, d);
      tb_attr_graph(&attrs, "then_branch", &sub);
      tb_attr_graph(&attrs, "else_branch", &sub);
      tb_node(&g, "If", "if", (const char *const[]){"c", NULL}, (const char *const[]){"W", NULL}, &attrs);
      tb_graph_input(&g, "c", 9, 0, NULL);
      er__pbw_free(&sub);
      er__pbw_free(&attrs);
      break;
    }
  }
  tb_node(&g, "Add", "add", (const char *const[]){"x", "W", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 1, d);
  tb_graph_output(&g, "y", 1, 1, d);
  tb_model(m, 8, 13, &g);
  er__pbw_free(&t);
  er__pbw_free(&g);
}

static er_status ext_load(tensor_source src, const char *location, const char *offset, const char *length,
                          const char *extra) {
  er_pbw m = {0};
  ext_model(&m, src, location, offset, length, extra);
  er_status st = load_expect(&m, tmpdir);
  er__pbw_free(&m);
  return st;
}

static void test_external_data(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/er-ext-XXXXXX");
  CHECK(mkdtemp(tmpdir) != NULL);
  char sub[128], outside[128], lpath[256];
  snprintf(sub, sizeof sub, "%s/sub", tmpdir);
  mkdir(sub, 0755);
  write_file("w.bin", four, sizeof four);
  write_file("sub/w.bin", four, sizeof four);
  /* A file outside the model folder, and links to it. */
  snprintf(outside, sizeof outside, "%s-outside.bin", tmpdir);
  FILE *f = fopen(outside, "wb");
  if (f) {
    fwrite(four, 1, sizeof four, f);
    fclose(f);
  }
  snprintf(lpath, sizeof lpath, "%s/sym.bin", tmpdir);
  CHECK(symlink(outside, lpath) == 0);
  snprintf(lpath, sizeof lpath, "%s/hard.bin", tmpdir);
  CHECK(link(outside, lpath) == 0);
  char outdir[128];
  snprintf(outdir, sizeof outdir, "%s-outdir", tmpdir);
  mkdir(outdir, 0755);
  char outfile[256];
  snprintf(outfile, sizeof outfile, "%s/w.bin", outdir);
  f = fopen(outfile, "wb");
  if (f) {
    fwrite(four, 1, sizeof four, f);
    fclose(f);
  }
  snprintf(lpath, sizeof lpath, "%s/symdir", tmpdir);
  CHECK(symlink(outdir, lpath) == 0);

  static const tensor_source sources[] = {SRC_INITIALIZER, SRC_SPARSE, SRC_CONSTANT, SRC_SUBGRAPH};
  for (size_t s = 0; s < ER_ARRAY_LEN(sources); s++) {
    tensor_source src = sources[s];
    /* The good cases load. */
    CHECK_STATUS(ext_load(src, "w.bin", NULL, NULL, NULL), ER_STATUS_OK);
    CHECK_STATUS(ext_load(src, "sub/w.bin", "0", "16", NULL), ER_STATUS_OK);
    /* Case 8: paths. */
    CHECK_STATUS(ext_load(src, "../x", NULL, NULL, NULL), ER_STATUS_UNSAFE_PATH);
    CHECK_STATUS(ext_load(src, "a/../../x", NULL, NULL, NULL), ER_STATUS_UNSAFE_PATH);
    CHECK_STATUS(ext_load(src, "/etc/passwd", NULL, NULL, NULL), ER_STATUS_UNSAFE_PATH);
    CHECK_STATUS(ext_load(src, "sub\\w.bin", NULL, NULL, NULL), ER_STATUS_UNSAFE_PATH);
    CHECK_STATUS(ext_load(src, "", NULL, NULL, NULL), ER_STATUS_UNSAFE_PATH);
    {
      /* An embedded NUL: "w.bin\0../../etc/passwd". */
      er_pbw t = {0}, g = {0}, m = {0}, e = {0};
      const int64_t d[1] = {4};
      static const char nul_path[] = "w.bin\0../../etc/passwd";
      tb_tensor(&t, "W", 1, 1, d, NULL, 0);
      tb_str(&e, 1, "location");
      er__pbw_bytes_field(&e, 2, nul_path, sizeof nul_path - 1);
      tb_embed(&t, 13, &e);
      er__pbw_varint_field(&t, 14, 1);
      tb_graph_initializer(&g, &t);
      tb_node(&g, "Add", "add", (const char *const[]){"x", "W", NULL}, (const char *const[]){"y", NULL}, NULL);
      tb_graph_input(&g, "x", 1, 1, d);
      tb_graph_output(&g, "y", 1, 1, d);
      tb_model(&m, 8, 13, &g);
      if (src == SRC_INITIALIZER) CHECK_STATUS(load_expect(&m, tmpdir), ER_STATUS_UNSAFE_PATH);
      er__pbw_free(&t);
      er__pbw_free(&g);
      er__pbw_free(&m);
      er__pbw_free(&e);
    }
    /* Case 9: links. */
    CHECK_STATUS(ext_load(src, "sym.bin", NULL, NULL, NULL), ER_STATUS_UNSAFE_PATH);
    CHECK_STATUS(ext_load(src, "symdir/w.bin", NULL, NULL, NULL), ER_STATUS_UNSAFE_PATH);
    CHECK_STATUS(ext_load(src, "hard.bin", NULL, NULL, NULL), ER_STATUS_UNSAFE_PATH);
    CHECK_MSG("hard link");
    /* Case 10: offsets and lengths. */
    CHECK_STATUS(ext_load(src, "w.bin", "-4", NULL, NULL), ER_STATUS_EXTERNAL_DATA);
    CHECK_STATUS(ext_load(src, "w.bin", "abc", NULL, NULL), ER_STATUS_EXTERNAL_DATA);
    CHECK_STATUS(ext_load(src, "w.bin", NULL, "-16", NULL), ER_STATUS_EXTERNAL_DATA);
    CHECK_STATUS(ext_load(src, "w.bin", NULL, NULL, "colour"), ER_STATUS_EXTERNAL_DATA);
    CHECK_MSG("unknown external_data key");
    CHECK_STATUS(ext_load(src, "w.bin", "8", NULL, NULL), ER_STATUS_EXTERNAL_DATA);
    CHECK_STATUS(ext_load(src, "w.bin", "100", NULL, NULL), ER_STATUS_EXTERNAL_DATA);
    CHECK_STATUS(ext_load(src, "w.bin", NULL, "12", NULL), ER_STATUS_EXTERNAL_DATA);
    CHECK_STATUS(ext_load(src, "w.bin", "99999999999999999999999", NULL, NULL), ER_STATUS_EXTERNAL_DATA);
    CHECK_STATUS(ext_load(src, "missing.bin", NULL, NULL, NULL), ER_STATUS_EXTERNAL_DATA);
  }
  /* A model in memory has no folder to resolve against. */
  er_pbw m = {0};
  ext_model(&m, SRC_INITIALIZER, "w.bin", NULL, NULL, NULL);
  CHECK_STATUS(load_expect(&m, NULL), ER_STATUS_EXTERNAL_DATA);
  er__pbw_free(&m);

  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s'", tmpdir, outside, outdir);
  CHECK(system(cmd) == 0);
}

/* ---- case 12: graph structure ------------------------------------------- */

static void test_graph_structure(void) {
  const int64_t d[1] = {4};
  er_pbw g = {0}, m = {0};
  /* Undefined input name. */
  tb_node(&g, "Relu", "r", (const char *const[]){"nowhere", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 1, d);
  tb_graph_output(&g, "y", 1, 1, d);
  tb_model(&m, 8, 13, &g);
  CHECK_STATUS(load_expect(&m, NULL), ER_STATUS_INVALID_GRAPH);
  CHECK_MSG("nowhere");
  er__pbw_free(&g);
  er__pbw_free(&m);

  /* A cycle: a = Relu(b), b = Relu(a). */
  er_pbw g2 = {0}, m2 = {0};
  tb_node(&g2, "Relu", "r1", (const char *const[]){"b", NULL}, (const char *const[]){"a", NULL}, NULL);
  tb_node(&g2, "Relu", "r2", (const char *const[]){"a", NULL}, (const char *const[]){"b", NULL}, NULL);
  tb_node(&g2, "Add", "add", (const char *const[]){"x", "a", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g2, "x", 1, 1, d);
  tb_graph_output(&g2, "y", 1, 1, d);
  tb_model(&m2, 8, 13, &g2);
  CHECK_STATUS(load_expect(&m2, NULL), ER_STATUS_INVALID_GRAPH);
  CHECK_MSG("cycle");
  er__pbw_free(&g2);
  er__pbw_free(&m2);

  /* A self-loop. */
  er_pbw g5 = {0}, m5 = {0};
  tb_node(&g5, "Add", "self", (const char *const[]){"x", "y", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g5, "x", 1, 1, d);
  tb_graph_output(&g5, "y", 1, 1, d);
  tb_model(&m5, 8, 13, &g5);
  CHECK_STATUS(load_expect(&m5, NULL), ER_STATUS_INVALID_GRAPH);
  er__pbw_free(&g5);
  er__pbw_free(&m5);

  /* Two nodes producing the same output. */
  er_pbw g3 = {0}, m3 = {0};
  tb_node(&g3, "Relu", "r1", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_node(&g3, "Relu", "r2", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g3, "x", 1, 1, d);
  tb_graph_output(&g3, "y", 1, 1, d);
  tb_model(&m3, 8, 13, &g3);
  CHECK_STATUS(load_expect(&m3, NULL), ER_STATUS_INVALID_GRAPH);
  CHECK_MSG("more than once");
  er__pbw_free(&g3);
  er__pbw_free(&m3);

  /* A node output shadowing a graph input. */
  er_pbw g6 = {0}, m6 = {0};
  tb_node(&g6, "Relu", "r1", (const char *const[]){"x", NULL}, (const char *const[]){"x", NULL}, NULL);
  tb_graph_input(&g6, "x", 1, 1, d);
  tb_graph_output(&g6, "x", 1, 1, d);
  tb_model(&m6, 8, 13, &g6);
  CHECK_STATUS(load_expect(&m6, NULL), ER_STATUS_INVALID_GRAPH);
  er__pbw_free(&g6);
  er__pbw_free(&m6);

  /* Too many nodes for the cap. */
  er_pbw g4 = {0}, m4 = {0};
  char in[16], out[16];
  for (int i = 0; i < 50; i++) {
    snprintf(in, sizeof in, i ? "t%d" : "x", i - 1);
    snprintf(out, sizeof out, i == 49 ? "y" : "t%d", i);
    tb_node(&g4, "Relu", NULL, (const char *const[]){in, NULL}, (const char *const[]){out, NULL}, NULL);
  }
  tb_graph_input(&g4, "x", 1, 1, d);
  tb_graph_output(&g4, "y", 1, 1, d);
  tb_model(&m4, 8, 13, &g4);
  er_load_options o;
  er_load_options_init(&o);
  o.max_nodes = 10;
  er_model *model = NULL;
  CHECK_STATUS(er_model_load_buffer(m4.buf, m4.len, NULL, &o, &model), ER_STATUS_LIMIT);
  CHECK_MSG("max_nodes");
  o.max_nodes = 0;
  CHECK_STATUS(er_model_load_buffer(m4.buf, m4.len, NULL, &o, &model), ER_STATUS_OK);
  er_model_free(model);
  er__pbw_free(&g4);
  er__pbw_free(&m4);

  /* Wrong arity. */
  er_pbw g7 = {0}, m7 = {0};
  tb_node(&g7, "Relu", "r", (const char *const[]){"x", "x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g7, "x", 1, 1, d);
  tb_graph_output(&g7, "y", 1, 1, d);
  tb_model(&m7, 8, 13, &g7);
  CHECK_STATUS(load_expect(&m7, NULL), ER_STATUS_INVALID_GRAPH);
  CHECK_MSG("2 inputs");
  er__pbw_free(&g7);
  er__pbw_free(&m7);
}

/* ---- case 15: versions and domains -------------------------------------- */

static void test_versions(void) {
  er_pbw g = {0};
  const int64_t d[1] = {4};
  tb_node(&g, "Relu", "r", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 1, d);
  tb_graph_output(&g, "y", 1, 1, d);
  struct {
    int64_t ir, opset;
    er_status want;
    const char *msg;
  } cases[] = {
      {2, 13, ER_STATUS_UNSUPPORTED, "IR version 2"},
      {99, 13, ER_STATUS_UNSUPPORTED, "IR version 99"},
      {15, 13, ER_STATUS_UNSUPPORTED, "IR version 15"},
      {14, 13, ER_STATUS_OK, ""}, /* onnx 1.23's default */
      {8, 99, ER_STATUS_UNSUPPORTED, "opset 99"},
      {8, -1, ER_STATUS_INVALID_MODEL, "does not import"},
      {8, 13, ER_STATUS_OK, ""},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    er_pbw m = {0};
    tb_model(&m, cases[i].ir, cases[i].opset, &g);
    CHECK_STATUS(load_expect(&m, NULL), cases[i].want);
    if (cases[i].msg[0]) CHECK_MSG(cases[i].msg);
    er__pbw_free(&m);
  }
  /* Cast version 1 (opset 5, which took 'to' as a string) is not
   * implemented: the message names the version and what is. */
  er_pbw gc = {0}, m5 = {0}, ca = {0};
  tb_attr_int(&ca, "to", 1);
  tb_node(&gc, "Cast", "c", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, &ca);
  tb_graph_input(&gc, "x", 1, 1, d);
  tb_graph_output(&gc, "y", 1, 1, d);
  tb_model(&m5, 3, 5, &gc);
  CHECK_STATUS(load_expect(&m5, NULL), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("Cast version 1 (opset 5)");
  er__pbw_free(&m5);
  er__pbw_free(&gc);
  er__pbw_free(&ca);
  /* An unknown op in the default domain, and an op of a foreign domain. */
  er_pbw g2 = {0}, m2 = {0};
  tb_node(&g2, "FancyOp", "f", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g2, "x", 1, 1, d);
  tb_graph_output(&g2, "y", 1, 1, d);
  tb_model(&m2, 8, 13, &g2);
  CHECK_STATUS(load_expect(&m2, NULL), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("FancyOp");
  er__pbw_free(&g2);
  er__pbw_free(&m2);
  er_pbw g3 = {0}, m3 = {0};
  tb_node_domain(&g3, "FusedConv", "com.microsoft", "f", (const char *const[]){"x", NULL},
                 (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g3, "x", 1, 1, d);
  tb_graph_output(&g3, "y", 1, 1, d);
  tb_model_domain(&m3, 8, 13, "com.microsoft", 1, &g3);
  CHECK_STATUS(load_expect(&m3, NULL), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("com.microsoft.FusedConv");
  er__pbw_free(&m3);
  /* ... and the same domain not imported at all. */
  er_pbw m4 = {0};
  tb_model(&m4, 8, 13, &g3);
  CHECK_STATUS(load_expect(&m4, NULL), ER_STATUS_INVALID_MODEL);
  CHECK_MSG("com.microsoft");
  er__pbw_free(&m4);
  er__pbw_free(&g3);
  er__pbw_free(&g);
}

/* ---- a declared output shape of the wrong rank ------------------------ */

/* ddddocr's OCR model declares its [T, 1, classes] output as [1, seqlen]:
 * the computed shape wins, as in onnxruntime, and the symbolic names that
 * described the declared rank are not handed out for the computed one
 * (`edgerun inspect` read them past their end and crashed). */
static void test_wrong_declared_rank(void) {
  const int64_t in_dims[3] = {2, 3, 4}, out_dims[2] = {-1, 4};   /* -1: dim_param "N" */
  er_pbw g = {0}, m = {0};
  tb_node(&g, "Relu", "r", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 3, in_dims);
  tb_graph_output(&g, "y", 1, 2, out_dims);
  tb_model(&m, 8, 13, &g);
  er_model *model = NULL;
  CHECK_STATUS(load_bytes(&m, NULL, &model), ER_STATUS_OK);
  er_value_info info;
  CHECK_STATUS(er_model_output_info(model, 0, &info), ER_STATUS_OK);
  CHECK(info.rank == 3);
  for (int d = 0; d < info.rank; d++) {
    CHECK(info.dims[d] == in_dims[d]);
    CHECK(info.dim_params[d] == NULL);
  }
  /* And it runs, with the computed shape. */
  er_session *s = NULL;
  CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
  float xv[24];
  for (int i = 0; i < 24; i++) xv[i] = (float)(i - 12);
  er_tensor *x = NULL, *y = NULL;
  CHECK_STATUS(er_tensor_wrap(ER_DTYPE_FLOAT, 3, in_dims, xv, sizeof xv, &x), ER_STATUS_OK);
  er_named_tensor in = {"x", x};
  CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &y), ER_STATUS_OK);
  if (y) {
    CHECK(er_tensor_rank(y) == 3 && er_tensor_count(y) == 24);
    const float *yv = er_tensor_cdata(y);
    for (int i = 0; i < 24; i++) CHECK(yv[i] == (xv[i] > 0 ? xv[i] : 0));
  }
  er_tensor_free(y);
  er_tensor_free(x);
  er_session_free(s);
  er_model_free(model);
  er__pbw_free(&g);
  er__pbw_free(&m);
}

/* ---- onnxruntime's com.microsoft QLinear operators ---------------------- */

/* x (uint8 [1, 2, 4, 4]) -> <op> -> y with scalar scales and zero points;
 * `attrs` for the node, `inputs` its input names, `opset` the model's. */
static er_status contrib_model(const char *op, const char *const *inputs, const er_pbw *attrs, int64_t opset) {
  er_pbw g = {0}, m = {0}, t = {0};
  const int64_t d[4] = {1, 2, 4, 4};
  const float sc = 0.05f;
  const uint8_t zp = 128;
  static const char *const scales[] = {"xs", "ys"}, *const zps[] = {"xz", "yz"};
  for (int i = 0; i < 2; i++) {
    tb_tensor(&t, scales[i], 1, 0, NULL, &sc, sizeof sc);
    tb_graph_initializer(&g, &t);
    er__pbw_free(&t);
    tb_tensor(&t, zps[i], 2, 0, NULL, &zp, sizeof zp);
    tb_graph_initializer(&g, &t);
    er__pbw_free(&t);
  }
  tb_node_domain(&g, op, "com.microsoft", "q", inputs, (const char *const[]){"y", NULL}, attrs);
  tb_graph_input(&g, "x", 2, 4, d);
  tb_graph_output(&g, "y", 2, -1, NULL);
  tb_model_domain(&m, 8, opset, "com.microsoft", 1, &g);
  er_status st = load_expect(&m, NULL);
  er__pbw_free(&g);
  er__pbw_free(&m);
  return st;
}

static void test_contrib_qlinear(void) {
  static const char *const one[] = {"x", "xs", "xz", "ys", "yz", NULL};
  /* Accepted: the pattern is rewritten and loads. */
  CHECK_STATUS(contrib_model("QLinearSigmoid", one, NULL, 13), ER_STATUS_OK);
  er_pbw a = {0};
  tb_attr_int(&a, "channels_last", 1);
  CHECK_STATUS(contrib_model("QLinearGlobalAveragePool", one, &a, 13), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("channels_last");
  er__pbw_free(&a);
  /* QLinearSoftmax: the opset attribute is required and must agree with
   * the model's on Softmax's axis rule. */
  CHECK_STATUS(contrib_model("QLinearSoftmax", one, NULL, 13), ER_STATUS_INVALID_ATTRIBUTE);
  CHECK_MSG("'opset'");
  tb_attr_int(&a, "opset", 11);
  CHECK_STATUS(contrib_model("QLinearSoftmax", one, &a, 13), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("axis rules");
  CHECK_STATUS(contrib_model("QLinearSoftmax", one, &a, 11), ER_STATUS_OK);
  er__pbw_free(&a);
  /* Below opset 10 there is no DequantizeLinear to write it with. */
  CHECK_STATUS(contrib_model("QLinearSigmoid", one, NULL, 9), ER_STATUS_UNSUPPORTED);
  CHECK_MSG("opset 10");
  /* QLinearConcat takes Y's scale and zero point, then triples. */
  static const char *const concat_bad[] = {"ys", "yz", "x", "xs", NULL};
  tb_attr_int(&a, "axis", 1);
  CHECK_STATUS(contrib_model("QLinearConcat", concat_bad, &a, 13), ER_STATUS_INVALID_GRAPH);
  CHECK_MSG("2 + 3 per input");
  er__pbw_free(&a);
  /* A missing scale. */
  static const char *const no_scale[] = {"x", "", "xz", "ys", "yz", NULL};
  CHECK_STATUS(contrib_model("QLinearSigmoid", no_scale, NULL, 13), ER_STATUS_INVALID_GRAPH);
  CHECK_MSG("scale is missing");
}

/* Attributes that declare a type but carry no value (found by fuzz-load:
 * Conv's auto_pad declared STRING without s reached strcmp as NULL). A
 * string's absent value is protobuf's default, the empty string, so the
 * Conv loads and runs (auto_pad "" is NOTSET); a tensor or graph has no
 * default and is refused, naming the attribute. */
static void test_attribute_without_value(void) {
  static const struct {
    const char *op, *attr;
    int type;
    er_status want;
  } cases[] = {{"Conv", "auto_pad", 3, ER_STATUS_OK},
               {"Constant", "value", 4, ER_STATUS_INVALID_ATTRIBUTE},
               {"If", "then_branch", 5, ER_STATUS_INVALID_ATTRIBUTE}};
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    er_pbw g = {0}, m = {0}, attrs = {0}, a = {0}, w = {0};
    tb_str(&a, 1, cases[i].attr);
    er__pbw_varint_field(&a, 20, (uint64_t)cases[i].type);
    tb_embed(&attrs, 5, &a);
    const int64_t xd[4] = {1, 1, 4, 4}, wd[4] = {1, 1, 3, 3};
    if (i == 0) {
      const float wv[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
      tb_tensor(&w, "W", 1, 4, wd, wv, sizeof wv);
      tb_graph_initializer(&g, &w);
      tb_node(&g, "Conv", "c", (const char *const[]){"x", "W", NULL}, (const char *const[]){"y", NULL}, &attrs);
      tb_graph_input(&g, "x", 1, 4, xd);
    } else if (i == 1) {
      tb_node(&g, "Constant", "k", NULL, (const char *const[]){"y", NULL}, &attrs);
    } else {
      tb_node(&g, "If", "if", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, &attrs);
      tb_graph_input(&g, "x", 9, 0, NULL);
    }
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *model = NULL;
    CHECK_STATUS(load_bytes(&m, NULL, &model), cases[i].want);
    if (cases[i].want != ER_STATUS_OK) CHECK_MSG(cases[i].attr);
    if (model) {
      er_session *s = NULL;
      CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
      er_tensor *x = NULL, *y = NULL;
      er_tensor_create(ER_DTYPE_FLOAT, 4, xd, &x);
      er_named_tensor in = {"x", x};
      if (s) CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &y), ER_STATUS_OK);
      er_tensor_free(y);
      er_tensor_free(x);
      er_session_free(s);
    }
    er_model_free(model);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&attrs);
    er__pbw_free(&a);
    er__pbw_free(&w);
  }
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"empty", test_empty},
      {"every_truncation", test_every_truncation},
      {"truncated_real_model", test_truncated_real_model},
      {"length_past_end", test_length_past_end},
      {"long_varint", test_long_varint},
      {"deep_subgraphs", test_deep_subgraphs},
      {"deep_unknown_fields", test_deep_unknown_fields},
      {"bad_dims", test_bad_dims},
      {"total_cap", test_total_cap},
      {"raw_length", test_raw_length},
      {"unknown_dtype", test_unknown_dtype},
      {"huge_string", test_huge_string},
      {"external_data", test_external_data},
      {"graph_structure", test_graph_structure},
      {"versions", test_versions},
      {"wrong_declared_rank", test_wrong_declared_rank},
      {"contrib_qlinear", test_contrib_qlinear},
      {"attribute_without_value", test_attribute_without_value},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
