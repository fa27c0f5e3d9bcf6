/* llm-imatrix.c - the importance matrix: for every weight matrix of the
 * decoder blocks, the mean square of each input column's activation over
 * calibration text. The engine runs the text in chunks; an observer on its
 * forward pass (llm/llm-observe.h) adds each product's input rows to the
 * matrix's sums. Sums are doubles (millions of tokens add up without
 * losing the small columns); the means the quantizer reads are floats.
 *
 * The file format is llama.cpp's GGUF imatrix: per matrix a tensor
 * "<name>.in_sum2" (the sums, f32) and "<name>.counts" (tokens, f32), with
 * general.type "imatrix", imatrix.datasets, imatrix.chunk_count and
 * imatrix.chunk_size, so either tool reads the other's file. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "gguf/gguf-write.h"
#include "llm/llm-observe.h"
#include "quant/llm-quant.h"

typedef struct im_entry {
  char *name;
  int64_t cols;
  double *sum;                 /* [cols] */
  int64_t count;               /* rows added */
  float *mean;                 /* [cols], built by finish() */
} im_entry;

struct er_llm_imatrix {
  im_entry *e;
  size_t n, cap;
  int64_t chunks, chunk_size, tokens;
  char dataset[256];
  er_status failed;            /* an allocation failed inside the observer */
};

static im_entry *entry_get(er_llm_imatrix *im, const char *name, int64_t cols) {
  for (size_t i = 0; i < im->n; i++)
    if (strcmp(im->e[i].name, name) == 0) return im->e[i].cols == cols ? &im->e[i] : NULL;
  if (im->n == im->cap) {
    size_t cap = im->cap ? 2 * im->cap : 256;
    im_entry *ne = realloc(im->e, cap * sizeof *ne);
    if (!ne) return NULL;
    im->e = ne;
    im->cap = cap;
  }
  im_entry *e = &im->e[im->n];
  *e = (im_entry){strdup(name), cols, calloc((size_t)cols, sizeof(double)), 0, NULL};
  if (!e->name || !e->sum) {
    free(e->name);
    free(e->sum);
    return NULL;
  }
  im->n++;
  return e;
}

static void imatrix_add(er_llm_imatrix *im, const char *weight, const float *x, int64_t n, int64_t cols) {
  if (strncmp(weight, "blk.", 4) != 0 || im->failed != ER_STATUS_OK) return;
  im_entry *e = entry_get(im, weight, cols);
  if (!e) {
    im->failed = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the importance matrix of '%s'", weight);
    return;
  }
  for (int64_t t = 0; t < n; t++) {
    const float *r = x + t * cols;
    for (int64_t j = 0; j < cols; j++) e->sum[j] += (double)r[j] * (double)r[j];
  }
  e->count += n;
}

static er_status finish(er_llm_imatrix *im) {
  for (size_t i = 0; i < im->n; i++) {
    im_entry *e = &im->e[i];
    free(e->mean);
    e->mean = malloc((size_t)e->cols * sizeof *e->mean);
    if (!e->mean) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the importance matrix");
    /* A matrix no token reached weighs every column alike (llama.cpp: 1). */
    for (int64_t j = 0; j < e->cols; j++) e->mean[j] = e->count > 0 ? (float)(e->sum[j] / (double)e->count) : 1.0f;
  }
  return ER_STATUS_OK;
}

void er__llm_imatrix_free(er_llm_imatrix *im) {
  if (!im) return;
  for (size_t i = 0; i < im->n; i++) {
    free(im->e[i].name);
    free(im->e[i].sum);
    free(im->e[i].mean);
  }
  free(im->e);
  free(im);
}

const float *er__llm_imatrix_find(const er_llm_imatrix *im, const char *tensor, int64_t cols) {
  if (!im) return NULL;
  for (size_t i = 0; i < im->n; i++)
    if (strcmp(im->e[i].name, tensor) == 0) return im->e[i].cols == cols ? im->e[i].mean : NULL;
  return NULL;
}

void er__llm_imatrix_stats(const er_llm_imatrix *im, int64_t *chunks, int64_t *tokens, size_t *entries) {
  *chunks = im->chunks;
  *tokens = im->tokens;
  *entries = im->n;
}

/* ---- computing it ------------------------------------------------------------------ */

typedef struct calib_run {
  er_llm_context *ctx;
  er_llm_imatrix *im;          /* NULL when not wanted */
  er_llm_ranges *rg;           /* NULL when not wanted */
  int64_t chunks, tokens;
  const er_llm_imatrix_options *o;
  int32_t *chunk;              /* [n_ctx] */
  int64_t fill;                /* tokens in chunk */
  int32_t bos;                 /* -1 when the model adds none */
  bool *want;
  int32_t *seqs;
  long file_bytes, done_bytes;
  bool tty;
} calib_run;

static void progress(const calib_run *r) {
  if (!r->o->progress || !r->tty) return;
  const int width = 30;
  double f = r->file_bytes > 0 ? (double)r->done_bytes / (double)r->file_bytes : 1.0;
  int fill = (int)(f * width + 0.5);
  fprintf(stderr, "\rcalibration [%.*s%*s] %3d%%  %lld chunks, %lld tokens", fill,
          "##############################", width - fill, "", (int)(f * 100 + 0.5), (long long)r->chunks,
          (long long)r->tokens);
  fflush(stderr);
}

/* One full chunk through the model from an empty cache. */
static er_status run_chunk(calib_run *r) {
  const int64_t n = r->fill, B = r->o->n_ctx < 512 ? r->o->n_ctx : 512;
  /* As llama-imatrix: the chunk's first token is replaced by BOS when the
   * model starts texts with one. */
  if (r->bos >= 0) r->chunk[0] = r->bos;
  ER_CHECK(er_llm_seq_truncate(r->ctx, 0, 0));
  for (int64_t b0 = 0; b0 < n; b0 += B) {
    int64_t bn = n - b0 < B ? n - b0 : B;
    er_llm_batch bt = {(size_t)bn, r->chunk + b0, r->seqs, r->want};
    ER_CHECK(er_llm_decode(r->ctx, &bt));
    if (r->im && r->im->failed != ER_STATUS_OK) return r->im->failed;
    if (r->rg) ER_CHECK(er__llm_ranges_status(r->rg));
  }
  r->chunks++;
  r->tokens += n;
  r->fill = 0;
  return ER_STATUS_OK;
}

/* Appends a piece's tokens, running every chunk that fills. */
static er_status feed(calib_run *r, const er_llm *llm, const char *text, size_t len, bool first) {
  size_t n = 0;
  /* The text's first piece with the model's special prefix (BOS), as
   * llama-imatrix tokenizes the whole text: its chunks then line up. */
  er_status st = er_llm_tokenize(llm, text, len, first, false, NULL, 0, &n);
  if (st != ER_STATUS_OK && st != ER_STATUS_LIMIT) return st;
  int32_t *ids = malloc((n + 1) * sizeof *ids);
  if (!ids) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for %zu calibration tokens", n);
  st = er_llm_tokenize(llm, text, len, first, false, ids, n, &n);
  for (size_t i = 0; st == ER_STATUS_OK && i < n; i++) {
    r->chunk[r->fill++] = ids[i];
    if (r->fill == r->o->n_ctx) {
      st = run_chunk(r);
      progress(r);
      if (r->o->max_chunks > 0 && r->chunks >= r->o->max_chunks) break;
    }
  }
  free(ids);
  return st;
}

/* Every product (and the residual stream) to whichever collectors run. */
static void observe(void *user, const char *weight, const float *x, int64_t n, int64_t cols, const float *y,
                    int64_t rows, int64_t ldy) {
  calib_run *r = user;
  if (r->im && y) imatrix_add(r->im, weight, x, n, cols);
  if (r->rg) er__llm_ranges_observe(r->rg, weight, x, n, cols, y, rows, ldy);
}

er_status er__llm_calibrate(const er_llm *llm, const char *text_path, const er_llm_imatrix_options *opts,
                            er_llm_imatrix **im_out, er_llm_ranges **rg_out) {
  er_llm_imatrix_options o = {0};
  if (opts) o = *opts;
  if (o.n_ctx == 0) o.n_ctx = 512;
  if (o.n_ctx < 8)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "calibration chunks of %lld tokens are too short (at least 8)",
                     (long long)o.n_ctx);
  FILE *f = fopen(text_path, "rb");
  if (!f) return er__error(ER_STATUS_IO, "cannot open calibration text '%s': %s", text_path, strerror(errno));
  er_llm_imatrix *im = im_out ? calloc(1, sizeof *im) : NULL;
  er_llm_ranges *rg = rg_out ? er__llm_ranges_new() : NULL;
  calib_run r = {0};
  r.im = im;
  r.rg = rg;
  r.o = &o;
  r.tty = isatty(2);
  enum { PIECE = 1 << 20 };
  char *buf = malloc(PIECE + 1);
  r.chunk = malloc((size_t)o.n_ctx * sizeof *r.chunk);
  r.want = calloc(512, sizeof *r.want);
  r.seqs = calloc(512, sizeof *r.seqs);
  er_status st = ER_STATUS_OK;
  if ((im_out && !im) || (rg_out && !rg) || !buf || !r.chunk || !r.want || !r.seqs)
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for calibration");
  if (st == ER_STATUS_OK) {
    if (im) {
      snprintf(im->dataset, sizeof im->dataset, "%s", text_path);
      im->chunk_size = o.n_ctx;
    }
    if (fseek(f, 0, SEEK_END) == 0) r.file_bytes = ftell(f);
    rewind(f);
    /* Whether the model starts a text with BOS: as llama-imatrix, every
     * chunk then starts with it. */
    er_llm_info info;
    er_llm_info_get(llm, &info);
    int32_t probe[4];
    size_t n_with = 0;
    r.bos = -1;
    if (info.bos >= 0 && er_llm_tokenize(llm, "a", 1, true, false, probe, 4, &n_with) == ER_STATUS_OK && n_with > 0 &&
        probe[0] == info.bos)
      r.bos = info.bos;
    er_llm_context_options co;
    er_llm_context_options_init(&co);
    co.n_ctx = o.n_ctx;
    co.n_batch = (int)(o.n_ctx < 512 ? o.n_ctx : 512);
    co.threads = o.threads < 1 ? 1 : o.threads;
    st = er_llm_context_create(llm, &co, &r.ctx);
  }
  if (st == ER_STATUS_OK) er__llm_context_observe(r.ctx, observe, &r);
  /* The text a piece at a time; a piece ends after its last newline (the
   * rest starts the next piece), so no word is split between two. */
  size_t carry = 0;
  while (st == ER_STATUS_OK && !(o.max_chunks > 0 && r.chunks >= o.max_chunks)) {
    size_t got = fread(buf + carry, 1, PIECE - carry, f);
    size_t have = carry + got, cut = have;
    if (have == 0) break;
    const bool last = got == 0 || feof(f) || ferror(f);
    if (!last) {
      while (cut > 0 && buf[cut - 1] != '\n') cut--;
      if (cut == 0) cut = have; /* a megabyte without a newline: cut anyway */
    }
    r.done_bytes += (long)got;
    st = feed(&r, llm, buf, cut, r.done_bytes == (long)got);
    carry = have - cut;
    memmove(buf, buf + cut, carry);
    if (last) break;
  }
  if (st == ER_STATUS_OK && ferror(f)) st = er__error(ER_STATUS_IO, "cannot read '%s'", text_path);
  /* Whole chunks only, as llama-imatrix: the rest of the text is left. */
  if (o.progress && r.tty) {
    r.done_bytes = r.file_bytes;
    progress(&r);
    fputc('\n', stderr);
  }
  if (st == ER_STATUS_OK && r.chunks == 0)
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "calibration text '%s' has fewer than %lld tokens (one chunk)",
                   text_path, (long long)o.n_ctx);
  if (st == ER_STATUS_OK && im) {
    im->chunks = r.chunks;
    im->tokens = r.tokens;
    st = finish(im);
  }
  if (rg) er__llm_ranges_set_counts(rg, r.chunks, r.tokens);
  er_llm_context_free(r.ctx);
  fclose(f);
  free(buf);
  free(r.chunk);
  free(r.want);
  free(r.seqs);
  if (st != ER_STATUS_OK) {
    er__llm_imatrix_free(im);
    er__llm_ranges_free(rg);
    return st;
  }
  if (im_out) *im_out = im;
  if (rg_out) *rg_out = rg;
  return ER_STATUS_OK;
}

/* ---- the file ------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix, size_t *stem) {
  size_t n = strlen(s), m = strlen(suffix);
  if (n <= m || strcmp(s + n - m, suffix) != 0) return false;
  *stem = n - m;
  return true;
}

er_status er__llm_imatrix_read(const char *path, er_llm_imatrix **out) {
  er_gguf *g = NULL;
  ER_CHECK(er__gguf_open(path, 0, &g));
  er_llm_imatrix *im = calloc(1, sizeof *im);
  er_status st = im ? ER_STATUS_OK : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory reading '%s'", path);
  er_gguf_str ty = {0};
  if (st == ER_STATUS_OK && (er__gguf_get_str(g, "general.type", &ty) != ER_STATUS_OK || ty.len != 7 ||
                             memcmp(ty.p, "imatrix", 7) != 0))
    st = er__error(ER_STATUS_INVALID_MODEL, "%s: general.type is not \"imatrix\": not an importance-matrix file", path);
  uint32_t u = 0;
  if (st == ER_STATUS_OK && er__gguf_get_u32(g, "imatrix.chunk_count", &u) == ER_STATUS_OK) im->chunks = u;
  if (st == ER_STATUS_OK && er__gguf_get_u32(g, "imatrix.chunk_size", &u) == ER_STATUS_OK) im->chunk_size = u;
  for (size_t i = 0; st == ER_STATUS_OK && i < er__gguf_tensor_count(g); i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(g, i);
    size_t stem;
    if (!ends_with(t->name_z, ".in_sum2", &stem)) continue;
    char name[ER_GGUF_MAX_NAME_BYTES + 1], cname[ER_GGUF_MAX_NAME_BYTES + 16];
    memcpy(name, t->name_z, stem);
    name[stem] = 0;
    snprintf(cname, sizeof cname, "%s.counts", name);
    const er_gguf_tensor *c = er__gguf_find_tensor(g, cname);
    if (!c || t->type != ER_GGML_F32 || c->type != ER_GGML_F32 || c->n_elems < 1) {
      st = er__error(ER_STATUS_INVALID_MODEL, "%s: '%s' needs an F32 '%s' beside it", path, t->name_z, cname);
      break;
    }
    if (c->n_elems != 1 || t->n_dims > 2 || (t->n_dims == 2 && t->dims[1] != 1)) {
      st = er__error(ER_STATUS_UNSUPPORTED, "%s: '%s' holds %llu experts; edgerun quantizes dense models only", path,
                     name, (unsigned long long)c->n_elems);
      break;
    }
    float count;
    memcpy(&count, c->data, sizeof count);
    if (!isfinite(count) || count < 0) {
      st = er__error(ER_STATUS_INVALID_MODEL, "%s: '%s' has count %g (must be finite and >= 0)", path, cname,
                     (double)count);
      break;
    }
    im_entry *e = entry_get(im, name, t->dims[0]);
    if (!e) {
      st = er__error(ER_STATUS_INVALID_MODEL, "%s: '%s' appears twice or is out of memory", path, name);
      break;
    }
    const float *s = t->data;
    for (int64_t j = 0; j < e->cols; j++) {
      float v;
      memcpy(&v, s + j, sizeof v);
      if (!isfinite(v) || v < 0) {
        st = er__error(ER_STATUS_INVALID_MODEL, "%s: '%s' column %lld is %g (sums of squares are finite, >= 0)", path,
                       t->name_z, (long long)j, (double)v);
        break;
      }
      e->sum[j] = v;
    }
    e->count = (int64_t)count;
    if ((int64_t)count > im->tokens) im->tokens = (int64_t)count;
  }
  if (st == ER_STATUS_OK && im->n == 0)
    st = er__error(ER_STATUS_INVALID_MODEL, "%s: no '<tensor>.in_sum2' entries: not an importance matrix", path);
  if (st == ER_STATUS_OK) {
    er_gguf_str ds;
    const er_gguf_kv *kv = er__gguf_find(g, "imatrix.datasets");
    if (kv && kv->elem_type == ER_GGUF_STRING && kv->n > 0) {
      ds = kv->strs[0];
      snprintf(im->dataset, sizeof im->dataset, "%.*s", (int)(ds.len < 255 ? ds.len : 255), ds.p);
    }
    st = finish(im);
  }
  er__gguf_close(g);
  if (st != ER_STATUS_OK) {
    er__llm_imatrix_free(im);
    return st;
  }
  *out = im;
  return ER_STATUS_OK;
}

er_status er__llm_imatrix_write(const er_llm_imatrix *im, const char *path) {
  er_gguf_writer *w = NULL;
  ER_CHECK(er__gguf_writer_open(path, &w));
  const char *ds[1] = {im->dataset[0] ? im->dataset : "edgerun"};
  er_status st = er__gguf_writer_kv_str(w, "general.type", "imatrix");
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_str_array(w, "imatrix.datasets", ds, 1);
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_u32(w, "imatrix.chunk_count", (uint32_t)im->chunks);
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_u32(w, "imatrix.chunk_size", (uint32_t)im->chunk_size);
  char name[ER_GGUF_MAX_NAME_BYTES + 16];
  for (size_t i = 0; st == ER_STATUS_OK && i < im->n; i++) {
    int64_t d2[2] = {im->e[i].cols, 1}, d1[2] = {1, 1};
    snprintf(name, sizeof name, "%s.in_sum2", im->e[i].name);
    st = er__gguf_writer_add_tensor(w, name, 2, d2, ER_GGML_F32);
    snprintf(name, sizeof name, "%s.counts", im->e[i].name);
    if (st == ER_STATUS_OK) st = er__gguf_writer_add_tensor(w, name, 2, d1, ER_GGML_F32);
  }
  float *row = NULL;
  for (size_t i = 0; st == ER_STATUS_OK && i < im->n; i++) {
    float *nr = realloc(row, (size_t)im->e[i].cols * sizeof *row);
    if (!nr) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory writing '%s'", path);
      break;
    }
    row = nr;
    for (int64_t j = 0; j < im->e[i].cols; j++) row[j] = (float)im->e[i].sum[j];
    float count = (float)im->e[i].count;
    st = er__gguf_writer_data(w, row, (uint64_t)im->e[i].cols * sizeof *row);
    if (st == ER_STATUS_OK) st = er__gguf_writer_data(w, &count, sizeof count);
  }
  free(row);
  if (st != ER_STATUS_OK) {
    er__gguf_writer_abort(w);
    return st;
  }
  return er__gguf_writer_commit(w);
}
