/* llm-quant.c - GGUF LLMs re-encoded to a block type or a k-quant mix:
 * every metadata pair copied (general.file_type set), each weight matrix
 * dequantized to float and quantized with the reference quantizers
 * (qblock.c, which follow ggml's), vectors and norms copied as they are.
 *
 * Which tensor gets which type follows llama.cpp's llama-quantize
 * (src/llama-quant.cpp, llama_tensor_get_type_impl) for the mixes edgerun
 * writes, so a Q4_K_M file from edgerun has the same layout as one from
 * llama.cpp:
 *  - the output matrix (or the token embedding when they are tied) gets
 *    Q6_K, unless the mix is Q8_0 (then Q8_0) or its rows are not whole
 *    256-blocks (then Q8_0);
 *  - Q4_K_M / Q5_K_M: attn_v and ffn_down get Q6_K on "more bits" layers
 *    (the first and last eighth, and every third in between);
 *  - Q4_K_S: the first 4 attn_v and the first eighth of ffn_down get Q5_K;
 *  - Q4_0 / Q5_0 with an importance matrix: the first eighth of ffn_down
 *    gets Q4_1 / Q5_1;
 *  - a k-quant on rows that are not whole 256-blocks falls back to a
 *    32-block type (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), as
 *    llama.cpp's tensor_type_fallback does: Qwen2-0.5B's width 896 is
 *    such a case.
 *
 * With an importance matrix (calibration text or an imatrix file) the
 * block types llama.cpp weighs are rounded by qblock-imatrix.c, weighted
 * by each column's measured activation energy. Every quantized tensor's
 * error is measured as it is written: the relative output error
 * sum_r sum_j q_j (w_rj - w'_rj)^2 / sum_r sum_j q_j w_rj^2 with q the
 * importance (1 without one), the noise-to-signal ratio the product adds.
 *
 * A perplexity budget (max_ppl_rise) then keeps the fewest tensors wide:
 * every tensor is quantized once at its planned type and once at the
 * wide type into two side files; a trial model is assembled from their
 * bytes, so each trial costs a copy and an evaluation, not a quantization.
 * Candidates are ranked token embedding and output first, then by the
 * error above; the smallest prefix of that ranking that meets the budget
 * is found by doubling, then bisection (O(log n) evaluations; perplexity
 * falls as the prefix grows, so this finds the prefix a one-by-one greedy
 * search would stop at, up to noise between neighbours). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kernels/kernel.h"
#include "kernels/qblock.h"
#include "gguf/gguf-write.h"
#include "quant/llm-quant.h"

typedef struct mix {
  const char *name;
  uint32_t base;               /* the default type of the mix */
  uint32_t ftype;              /* general.file_type (llama_ftype) */
  enum { PLAIN, K_M, K_S } rule;
} mix;

static const mix mixes[] = {
    {"F32", ER_GGML_F32, 0, PLAIN},    {"F16", ER_GGML_F16, 1, PLAIN},     {"BF16", ER_GGML_BF16, 32, PLAIN},
    {"Q8_0", ER_GGML_Q8_0, 7, PLAIN},  {"Q4_0", ER_GGML_Q4_0, 2, PLAIN},   {"Q4_1", ER_GGML_Q4_1, 3, PLAIN},
    {"Q5_0", ER_GGML_Q5_0, 8, PLAIN},  {"Q5_1", ER_GGML_Q5_1, 9, PLAIN},   {"Q4_K_S", ER_GGML_Q4_K, 14, K_S},
    {"Q4_K_M", ER_GGML_Q4_K, 15, K_M}, {"Q4_K", ER_GGML_Q4_K, 15, K_M},    {"Q5_K_S", ER_GGML_Q5_K, 16, PLAIN},
    {"Q5_K_M", ER_GGML_Q5_K, 17, K_M}, {"Q5_K", ER_GGML_Q5_K, 17, K_M},    {"Q6_K", ER_GGML_Q6_K, 18, PLAIN},
};

/* The SwiGLU product of a scaled layer stays below this on the calibration
 * text: 16x under fp16's largest value, for text that reaches further. */
#define FP16_SAFE_LIMIT (65504.0 / 16)

static const mix *find_mix(const char *name) {
  for (size_t i = 0; i < ER_ARRAY_LEN(mixes); i++)
    if (strcasecmp(mixes[i].name, name) == 0) return &mixes[i];
  return NULL;
}

static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* A 32-block type for rows that are not whole 256-blocks. */
static uint32_t fallback(uint32_t t, int64_t cols) {
  int64_t blck, bytes;
  if (!er__ggml_type_geometry(t, &blck, &bytes) || cols % blck == 0) return t;
  uint32_t f = t == ER_GGML_Q4_K ? ER_GGML_Q5_0 : t == ER_GGML_Q5_K ? ER_GGML_Q5_1 : t == ER_GGML_Q6_K ? ER_GGML_Q8_0 : t;
  if (!er__ggml_type_geometry(f, &blck, &bytes) || cols % blck != 0) return ER_GGML_F16;
  return f;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

typedef struct plan_state {
  const mix *mx;
  int n_layer, i_attn_v, n_attn_v, i_ffn_down;
  bool tied;
  bool has_imatrix;            /* rounding weighted by an importance matrix */
} plan_state;

/* The layer of "blk.N.*": llama-quantize walks the tensors in layer
 * order, so its "i-th attn_v" is layer N's. Files store blk.10 before
 * blk.2 when their writer sorted names as strings (SmolLM2's does), so
 * the position in the file is not the layer; `fallback` is used only for
 * a name without a layer number. */
static int layer_of(const char *name, int fallback) {
  int il = -1, n = 0;
  if (sscanf(name, "blk.%d.%n", &il, &n) == 1 && n > 0 && il >= 0) return il;
  return fallback;
}

/* The type tensor t gets, or its own type when it is not quantized. */
static uint32_t choose(plan_state *ps, const er_gguf_tensor *t, const er_llm_quantize_options *o) {
  const char *name = t->name_z;
  for (size_t i = 0; i < o->n_keep; i++)
    if (strcmp(o->keep[i], name) == 0) return t->type;
  if (t->n_dims < 2 || !ends_with(name, "weight") || strstr(name, "_norm.weight")) return t->type;
  uint32_t base = ps->mx->base, ty = base;
  bool quantized_mix = base != ER_GGML_F32 && base != ER_GGML_F16 && base != ER_GGML_BF16;
  if (!quantized_mix) return base;
  bool output = strcmp(name, "output.weight") == 0, embd = strcmp(name, "token_embd.weight") == 0;
  if (output || (ps->tied && embd)) {
    ty = base == ER_GGML_Q8_0 || t->dims[0] % ER_QK_K != 0 ? ER_GGML_Q8_0 : ER_GGML_Q6_K;
  } else if (strstr(name, "attn_v.weight")) {
    int il = layer_of(name, ps->i_attn_v);
    if (ps->mx->rule == K_M && more_bits(il, ps->n_attn_v)) ty = ER_GGML_Q6_K;
    else if (ps->mx->rule == K_S && il < 4) ty = ER_GGML_Q5_K;
    ps->i_attn_v++;
  } else if (strstr(name, "ffn_down.weight")) {
    int il = layer_of(name, ps->i_ffn_down);
    if (ps->mx->rule == K_M && more_bits(il, ps->n_layer)) ty = ER_GGML_Q6_K;
    else if (ps->mx->rule == K_S && il < ps->n_layer / 8) ty = ER_GGML_Q5_K;
    /* llama.cpp: with an importance matrix, the first eighth of ffn_down
     * gets the type with a minimum (Q4_0 and Q5_0 go wrong there). */
    else if ((base == ER_GGML_Q4_0 || base == ER_GGML_Q5_0) && ps->has_imatrix && il < ps->n_layer / 8)
      ty = base == ER_GGML_Q4_0 ? ER_GGML_Q4_1 : ER_GGML_Q5_1;
    ps->i_ffn_down++;
  }
  return fallback(ty, t->dims[0]);
}

/* ---- quantizing one tensor over the workers ------------------------------------ */

typedef struct qjob {
  const er_gguf_tensor *t;
  uint32_t to;
  size_t src_row, dst_row;
  int64_t cols;
  uint8_t *dst;
  const float *qw;             /* importance [cols] or NULL */
  float scale;                 /* every weight times this first (fp16_safe) */
  float *scratch;              /* [threads][2 * cols] */
  double *num, *den;           /* [threads] weighted error and signal */
  bool bad;                    /* a NaN or Inf in the weights */
} qjob;

static void quant_rows(void *arg, int64_t r0, int64_t r1) {
  qjob *j = arg;
  const int slot = er__pool_slot();
  float *row = j->scratch + (size_t)slot * 2 * (size_t)j->cols, *back = row + j->cols;
  double num = 0, den = 0;
  for (int64_t r = r0; r < r1; r++) {
    uint8_t *dst = j->dst + (size_t)r * j->dst_row;
    er__qb_dequantize_row(j->t->type, (const uint8_t *)j->t->data + (size_t)r * j->src_row, row, j->cols);
    for (int64_t i = 0; i < j->cols; i++) {
      if (!isfinite(row[i])) j->bad = true;
      row[i] *= j->scale;
    }
    er__qb_quantize_row_weighted(j->to, row, dst, j->cols, j->qw);
    er__qb_dequantize_row(j->to, dst, back, j->cols);
    for (int64_t i = 0; i < j->cols; i++) {
      const double q = j->qw ? j->qw[i] : 1.0, e = (double)row[i] - (double)back[i];
      num += q * e * e;
      den += q * (double)row[i] * (double)row[i];
    }
  }
  j->num[slot] += num;
  j->den[slot] += den;
}

void er_llm_quantize_options_init(er_llm_quantize_options *o) {
  memset(o, 0, sizeof *o);
  o->type = "Q4_K_M";
  o->threads = 1;
  o->keep_type = "Q8_0";
}

/* What the run knows about each tensor. */
typedef struct tinfo {
  uint32_t planned;            /* the mix's type (or the source type when copied) */
  uint32_t wide;               /* the budget's wide type for it */
  bool candidate;              /* planned is a quantized type narrower than wide */
  bool is_wide;                /* kept wide in the output */
  bool weighted;               /* rounded with importance values */
  float scale;                 /* fp16_safe's factor for the weights (1 = none) */
  double rel_err, wide_err;    /* relative output error at planned / at wide */
  uint64_t bytes, wide_bytes;
} tinfo;

typedef struct qrun {
  const char *in, *out;
  er_llm_quantize_options o;
  const mix *mx;
  er_gguf *g;
  er_thread_pool *pool;
  er_llm_imatrix *im;
  tinfo *ti;
  size_t n;
  float *scratch;
  double *num, *den;
  uint8_t *buf;
  size_t buf_cap;
  er_llm_quantize_result r;
  /* the budget's trials: (wide tensors, perplexity) */
  struct { size_t wide_n; double ppl; int dropped; } trial[128]; /* dropped: tensor index, or -1 */
  int n_trials;
  /* fp16_safe: the layers scaled, their SwiGLU/up maximum and the factor */
  struct { int layer; double max_abs; float scale; } *fp16;
  int n_fp16;
  bool eval_is_calib;
} qrun;

static bool is_float_type(uint32_t t) { return t == ER_GGML_F32 || t == ER_GGML_F16 || t == ER_GGML_BF16; }

/* Quantizes tensor i to type `to` into q->buf; *err gets its relative error. */
static er_status quantize_tensor(qrun *q, size_t i, uint32_t to, size_t *nbytes, double *err, bool *weighted) {
  const er_gguf_tensor *t = er__gguf_tensor_at(q->g, i);
  int64_t cols = t->dims[0], rows = (int64_t)(t->n_elems / (uint64_t)cols);
  size_t dst_row = er__qb_row_bytes(to, cols), need = (size_t)rows * dst_row;
  if (need > q->buf_cap) {
    uint8_t *nb = realloc(q->buf, need);
    if (!nb) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for tensor '%s' (%zu bytes)", t->name_z, need);
    q->buf = nb;
    q->buf_cap = need;
  }
  const float *qw = er__llm_imatrix_find(q->im, t->name_z, cols);
  int threads = er__pool_threads(q->pool);
  memset(q->num, 0, (size_t)threads * sizeof *q->num);
  memset(q->den, 0, (size_t)threads * sizeof *q->den);
  qjob j = {t,        to,     er__qb_row_bytes(t->type, cols), dst_row, cols, q->buf, qw, q->ti[i].scale,
            q->scratch, q->num, q->den,                          false};
  er__parallel_for_items(q->pool, rows, quant_rows, &j);
  if (j.bad)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: tensor '%s' holds NaN or Inf; it cannot be quantized", q->in,
                     t->name_z);
  double num = 0, den = 0;
  for (int s = 0; s < threads; s++) {
    num += q->num[s];
    den += q->den[s];
  }
  *err = den > 0 ? num / den : 0.0;
  *nbytes = need;
  *weighted = qw != NULL && er__qb_uses_importance(to);
  return ER_STATUS_OK;
}

static er_status writer_begin(qrun *q, const char *path, const uint32_t *types, er_gguf_writer **wout) {
  er_gguf_writer *w = NULL;
  ER_CHECK(er__gguf_writer_open(path, &w));
  er_status st = ER_STATUS_OK;
  for (size_t i = 0; st == ER_STATUS_OK && i < er__gguf_kv_count(q->g); i++)
    st = er__gguf_writer_kv_copy(w, er__gguf_kv_at(q->g, i));
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_u32(w, "general.file_type", q->mx->ftype);
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_u32(w, "general.quantization_version", 2);
  if (st == ER_STATUS_OK && q->im) {
    int64_t chunks, tokens;
    size_t entries;
    er__llm_imatrix_stats(q->im, &chunks, &tokens, &entries);
    /* The keys llama-quantize writes for an imatrix-quantized file. */
    st = er__gguf_writer_kv_str(w, "quantize.imatrix.file", q->o.imatrix ? q->o.imatrix : q->o.calib_text);
    if (st == ER_STATUS_OK) st = er__gguf_writer_kv_u32(w, "quantize.imatrix.entries_count", (uint32_t)entries);
    if (st == ER_STATUS_OK) st = er__gguf_writer_kv_u32(w, "quantize.imatrix.chunks_count", (uint32_t)chunks);
  }
  for (size_t i = 0; st == ER_STATUS_OK && i < q->n; i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(q->g, i);
    st = er__gguf_writer_add_tensor(w, t->name_z, t->n_dims, t->dims, types[i]);
  }
  if (st != ER_STATUS_OK) {
    er__gguf_writer_abort(w);
    return st;
  }
  *wout = w;
  return ER_STATUS_OK;
}

static void show(const qrun *q, size_t i, uint32_t from, uint32_t to, const char *what) {
  if (!q->o.progress || !isatty(2)) return;
  fprintf(stderr, "\r%s [%zu/%zu] %-32s %-5s -> %-5s", what, i + 1, q->n, er__gguf_tensor_at(q->g, i)->name_z,
          er__ggml_type_name(from), er__ggml_type_name(to));
  fflush(stderr);
}

/* Writes `path` with every tensor at types[i], quantizing (and measuring)
 * each; with `wide` the error and bytes go to ti[i].wide_* instead. */
static er_status write_quantized(qrun *q, const char *path, const uint32_t *types, bool wide) {
  er_gguf_writer *w = NULL;
  ER_CHECK(writer_begin(q, path, types, &w));
  er_status st = ER_STATUS_OK;
  for (size_t i = 0; st == ER_STATUS_OK && i < q->n; i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(q->g, i);
    if (types[i] == t->type && q->ti[i].scale == 1.0f) {
      st = er__gguf_writer_data(w, t->data, t->nbytes);
      if (!wide) q->ti[i].bytes = t->nbytes;
      else q->ti[i].wide_bytes = t->nbytes;
      continue;
    }
    size_t nb = 0;
    double err = 0;
    bool weighted = false;
    st = quantize_tensor(q, i, types[i], &nb, &err, &weighted);
    if (st == ER_STATUS_OK) st = er__gguf_writer_data(w, q->buf, nb);
    if (wide) {
      q->ti[i].wide_err = err;
      q->ti[i].wide_bytes = nb;
    } else {
      q->ti[i].rel_err = err;
      q->ti[i].bytes = nb;
      q->ti[i].weighted = weighted;
    }
    show(q, i, t->type, types[i], wide ? "wide" : "quantize");
  }
  if (q->o.progress && isatty(2)) fputc('\n', stderr);
  if (st != ER_STATUS_OK) {
    er__gguf_writer_abort(w);
    return st;
  }
  return er__gguf_writer_commit(w);
}

/* Writes `path` from the two side files: tensor i from `wide` where
 * use_wide[i], else from `base`. */
static er_status assemble(qrun *q, const char *path, er_gguf *base, er_gguf *wide, const bool *use_wide,
                          uint32_t *types) {
  for (size_t i = 0; i < q->n; i++) types[i] = use_wide[i] ? q->ti[i].wide : q->ti[i].planned;
  er_gguf_writer *w = NULL;
  ER_CHECK(writer_begin(q, path, types, &w));
  er_status st = ER_STATUS_OK;
  for (size_t i = 0; st == ER_STATUS_OK && i < q->n; i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(use_wide[i] ? wide : base, i);
    st = er__gguf_writer_data(w, t->data, t->nbytes);
  }
  if (st != ER_STATUS_OK) {
    er__gguf_writer_abort(w);
    return st;
  }
  return er__gguf_writer_commit(w);
}

/* Perplexity of a GGUF file on the evaluation tokens. */
static er_status perplexity_of(qrun *q, const char *path, const int32_t *toks, size_t n_tok, double *ppl) {
  er_llm *m = NULL;
  ER_CHECK(er_llm_load(path, NULL, &m));
  er_llm_eval_options eo;
  er_llm_eval_options_init(&eo);
  eo.n_ctx = q->o.eval_ctx ? q->o.eval_ctx : 512;
  eo.max_chunks = q->o.eval_chunks;
  eo.threads = q->o.threads;
  er_llm_eval_result r;
  er_status st = er_llm_evaluate(m, NULL, toks, n_tok, &eo, &r);
  er_llm_free(m);
  if (st == ER_STATUS_OK) *ppl = r.ppl;
  return st;
}

/* Whether tensor a ranks before b as a candidate to keep wide: the token
 * embedding and output first, then the larger error saved by widening. */
static bool ranks_before(const qrun *q, size_t a, size_t b) {
  const char *na = er__gguf_tensor_at(q->g, a)->name_z, *nb = er__gguf_tensor_at(q->g, b)->name_z;
  bool ea = strcmp(na, "token_embd.weight") == 0 || strcmp(na, "output.weight") == 0;
  bool eb = strcmp(nb, "token_embd.weight") == 0 || strcmp(nb, "output.weight") == 0;
  if (ea != eb) return ea;
  double ga = q->ti[a].rel_err - q->ti[a].wide_err, gb = q->ti[b].rel_err - q->ti[b].wide_err;
  if (ga != gb) return ga > gb;
  return a < b;
}

/* Insertion sort: a few hundred tensors at most. */
static void rank_sort(const qrun *q, size_t *idx, size_t n) {
  for (size_t i = 1; i < n; i++) {
    size_t v = idx[i], j = i;
    while (j > 0 && ranks_before(q, v, idx[j - 1])) {
      idx[j] = idx[j - 1];
      j--;
    }
    idx[j] = v;
  }
}

static char *tmp_name(const char *out, const char *what) {
  size_t n = strlen(out) + 64;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s.%s-%ld", out, what, (long)getpid());
  return p;
}

static er_status read_tokens(const char *path, const er_llm *m, int32_t **toks, size_t *n_tok) {
  FILE *f = fopen(path, "rb");
  if (!f) return er__error(ER_STATUS_IO, "cannot open evaluation text '%s': %s", path, strerror(errno));
  char *text = NULL;
  size_t len = 0, cap = 0;
  er_status st = ER_STATUS_OK;
  for (;;) {
    if (len + 65536 + 1 > cap) {
      cap = cap ? 2 * cap : 1 << 20;
      if (cap > (1u << 30)) {
        st = er__error(ER_STATUS_LIMIT, "evaluation text '%s' is over 1 GiB", path);
        break;
      }
      char *nt = realloc(text, cap);
      if (!nt) {
        st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory reading '%s'", path);
        break;
      }
      text = nt;
    }
    size_t got = fread(text + len, 1, 65536, f);
    len += got;
    if (got == 0) break;
  }
  fclose(f);
  size_t n = 0;
  if (st == ER_STATUS_OK) {
    st = er_llm_tokenize(m, text, len, true, false, NULL, 0, &n);
    if (st == ER_STATUS_LIMIT) st = ER_STATUS_OK;
  }
  int32_t *ids = st == ER_STATUS_OK ? malloc((n + 1) * sizeof *ids) : NULL;
  if (st == ER_STATUS_OK && !ids) st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for %zu tokens", n);
  if (st == ER_STATUS_OK) st = er_llm_tokenize(m, text, len, true, false, ids, n, &n);
  free(text);
  if (st != ER_STATUS_OK) {
    free(ids);
    return st;
  }
  *toks = ids;
  *n_tok = n;
  return ER_STATUS_OK;
}

/* One trial of the budget search: the first k of the ranking wide. */
typedef struct trial_ctx {
  qrun *q;
  er_gguf *gb, *gw;
  const size_t *rank;
  bool *use;
  uint32_t *types;
  const char *path;
  const int32_t *toks;
  size_t n_tok;
  double limit;
  size_t *best;
  double *best_ppl;
} trial_ctx;

/* The perplexity with the tensors flagged in `use` wide; recorded. */
static er_status measure(trial_ctx *c, const bool *use, size_t n_wide, int dropped, double *ppl) {
  qrun *q = c->q;
  ER_CHECK(assemble(q, c->path, c->gb, c->gw, use, c->types));
  ER_CHECK(perplexity_of(q, c->path, c->toks, c->n_tok, ppl));
  if (q->n_trials < (int)(sizeof q->trial / sizeof q->trial[0])) {
    q->trial[q->n_trials].wide_n = n_wide;
    q->trial[q->n_trials].dropped = dropped;
    q->trial[q->n_trials++].ppl = *ppl;
  }
  return ER_STATUS_OK;
}

static er_status trial(trial_ctx *c, size_t k, double *ppl) {
  qrun *q = c->q;
  memset(c->use, 0, q->n * sizeof *c->use);
  for (size_t r = 0; r < k; r++) c->use[c->rank[r]] = true;
  ER_CHECK(measure(c, c->use, k, -1, ppl));
  if (q->o.progress)
    fprintf(stderr, "budget: %zu tensors wide: PPL %.4f (input %.4f, limit %.4f)\n", k, *ppl, q->r.ppl_in, c->limit);
  if (*ppl <= c->limit && k < *c->best) {
    *c->best = k;
    *c->best_ppl = *ppl;
  }
  return ER_STATUS_OK;
}

/* The budget: finds the shortest prefix of the ranking that meets it. */
static er_status budget_search(qrun *q, const er_llm *src, uint32_t *types) {
  const char *eval_path = q->o.eval_text ? q->o.eval_text : q->o.calib_text;
  if (!eval_path)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "a perplexity budget needs evaluation text (eval_text or calib_text)");
  q->eval_is_calib = !q->o.eval_text;
  int32_t *toks = NULL;
  size_t n_tok = 0;
  ER_CHECK(read_tokens(eval_path, src, &toks, &n_tok));
  char *p_base = tmp_name(q->out, "base"), *p_wide = tmp_name(q->out, "wide"), *p_trial = tmp_name(q->out, "trial");
  size_t *rank = calloc(q->n + 1, sizeof *rank);
  bool *use = calloc(q->n + 1, sizeof *use);
  uint32_t *wide_types = calloc(q->n + 1, sizeof *wide_types);
  er_gguf *gb = NULL, *gw = NULL;
  er_status st = p_base && p_wide && p_trial && rank && use && wide_types
                     ? ER_STATUS_OK
                     : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the perplexity budget");
  if (st == ER_STATUS_OK) {
    er_llm_eval_options eo;
    er_llm_eval_options_init(&eo);
    eo.n_ctx = q->o.eval_ctx ? q->o.eval_ctx : 512;
    eo.max_chunks = q->o.eval_chunks;
    eo.threads = q->o.threads;
    er_llm_eval_result r;
    st = er_llm_evaluate(src, NULL, toks, n_tok, &eo, &r);
    if (st == ER_STATUS_OK) q->r.ppl_in = r.ppl;
  }
  if (st == ER_STATUS_OK) st = write_quantized(q, p_base, types, false);
  size_t n_cand = 0;
  for (size_t i = 0; i < q->n; i++) {
    /* Only candidates are ever taken from the wide file: the rest are
     * copied there as they are, not quantized twice. */
    wide_types[i] = q->ti[i].candidate ? q->ti[i].wide : er__gguf_tensor_at(q->g, i)->type;
    if (q->ti[i].candidate) rank[n_cand++] = i;
  }
  if (st == ER_STATUS_OK) st = write_quantized(q, p_wide, wide_types, true);
  if (st == ER_STATUS_OK) st = er__gguf_open(p_base, 0, &gb);
  if (st == ER_STATUS_OK) st = er__gguf_open(p_wide, 0, &gw);
  rank_sort(q, rank, n_cand);
  const double limit = q->r.ppl_in * (1 + q->o.max_ppl_rise);
  double ppl = 0, best_ppl = 0;
  size_t lo = 0, hi = 0, best = SIZE_MAX;
  trial_ctx tc = {q, gb, gw, rank, use, types, p_trial, toks, n_tok, limit, &best, &best_ppl};
  if (st == ER_STATUS_OK) st = trial(&tc, 0, &ppl);
  /* Doubling: 1, 2, 4, ... until one meets the budget or all are wide. */
  if (st == ER_STATUS_OK && best != 0) {
    size_t k = 1;
    for (;;) {
      if (k > n_cand) k = n_cand;
      st = trial(&tc, k, &ppl);
      if (st != ER_STATUS_OK || best == k || k == n_cand) break;
      lo = k;
      k *= 2;
    }
    hi = best == SIZE_MAX ? n_cand : best;
    /* Bisection in (lo, hi]: the budget holds at hi. */
    while (st == ER_STATUS_OK && best != SIZE_MAX && hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      st = trial(&tc, mid, &ppl);
      if (st == ER_STATUS_OK && best == mid) hi = mid;
      else lo = mid;
    }
  }
  if (st == ER_STATUS_OK && best == SIZE_MAX)
    st = er__error(ER_STATUS_LIMIT, "the perplexity budget (+%.2f%% over %.4f) is not met even with all %zu "
                   "candidate tensors at %s (PPL %.4f): raise the budget or choose a wider --type",
                   100 * q->o.max_ppl_rise, q->r.ppl_in, n_cand, q->o.keep_type, ppl);
  /* Pruning: the ranking is a guess, so a tensor of the prefix may not be
   * needed once the others are wide. From the lowest-ranked up, each is
   * dropped when the budget holds without it (one evaluation each, at
   * most PRUNE_MAX of them: the rest stay). */
  size_t kept = best;
  if (st == ER_STATUS_OK) {
    memset(use, 0, q->n * sizeof *use);
    for (size_t r_ = 0; r_ < best; r_++) use[rank[r_]] = true;
    enum { PRUNE_MAX = 32 };
    for (size_t r_ = best, tried = 0; st == ER_STATUS_OK && r_-- > 0 && tried < PRUNE_MAX; tried++) {
      use[rank[r_]] = false;
      st = measure(&tc, use, kept - 1, (int)rank[r_], &ppl);
      if (st != ER_STATUS_OK) break;
      if (q->o.progress)
        fprintf(stderr, "budget: without %s: PPL %.4f (limit %.4f): %s\n", er__gguf_tensor_at(q->g, rank[r_])->name_z,
                ppl, limit, ppl <= limit ? "dropped" : "kept");
      if (ppl <= limit) {
        kept--;
        best_ppl = ppl;
      } else {
        use[rank[r_]] = true;
      }
    }
  }
  if (st == ER_STATUS_OK) {
    for (size_t i = 0; i < q->n; i++) q->ti[i].is_wide = use[i];
    st = assemble(q, q->out, gb, gw, use, types);
    q->r.ppl_out = best_ppl;
    q->r.tensors_kept_wide = kept;
  }
  er__gguf_close(gb);
  er__gguf_close(gw);
  if (p_base) unlink(p_base);
  if (p_wide) unlink(p_wide);
  if (p_trial) unlink(p_trial);
  free(p_base);
  free(p_wide);
  free(p_trial);
  free(rank);
  free(use);
  free(wide_types);
  free(toks);
  return st;
}

/* ---- the report ------------------------------------------------------------------ */

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

static void html_str(FILE *f, const char *s) {
  for (; s && *s; s++) {
    if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '&') fputs("&amp;", f);
    else fputc(*s, f);
  }
}

static er_status write_report(const qrun *q, const uint32_t *types) {
  size_t n = strlen(q->o.report) + 8;
  char *pj = malloc(n), *ph = malloc(n);
  if (!pj || !ph) {
    free(pj);
    free(ph);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the report");
  }
  snprintf(pj, n, "%s.json", q->o.report);
  snprintf(ph, n, "%s.html", q->o.report);
  FILE *fj = fopen(pj, "w"), *fh = fopen(ph, "w");
  er_status st = ER_STATUS_OK;
  if (!fj || !fh) st = er__error(ER_STATUS_IO, "cannot write the report '%s': %s", fj ? ph : pj, strerror(errno));
  double total_err = 0;
  for (size_t i = 0; i < q->n; i++) total_err += q->ti[i].is_wide ? q->ti[i].wide_err : q->ti[i].rel_err;
  if (st == ER_STATUS_OK) {
    fprintf(fj, "{\n  \"input\": ");
    json_str(fj, q->in);
    fprintf(fj, ",\n  \"output\": ");
    json_str(fj, q->out);
    fprintf(fj, ",\n  \"type\": ");
    json_str(fj, q->mx->name);
    fprintf(fj, ",\n  \"bytes_in\": %llu,\n  \"bytes_out\": %llu,\n", (unsigned long long)q->r.bytes_in,
            (unsigned long long)q->r.bytes_out);
    fprintf(fj, "  \"importance\": ");
    if (q->im) {
      fprintf(fj, "{\"source\": ");
      json_str(fj, q->o.imatrix ? q->o.imatrix : q->o.calib_text);
      fprintf(fj, ", \"chunks\": %lld, \"tokens\": %lld}", (long long)q->r.calib_chunks, (long long)q->r.calib_tokens);
    } else {
      fprintf(fj, "null");
    }
    fprintf(fj, ",\n  \"budget\": ");
    if (q->o.max_ppl_rise > 0) {
      fprintf(fj, "{\"max_ppl_rise\": %.6f, \"eval_text\": ", q->o.max_ppl_rise);
      json_str(fj, q->o.eval_text ? q->o.eval_text : q->o.calib_text);
      fprintf(fj, ", \"eval_is_calibration_text\": %s, \"keep_type\": ", q->eval_is_calib ? "true" : "false");
      json_str(fj, q->o.keep_type);
      fprintf(fj, ", \"ppl_in\": %.6f, \"ppl_out\": %.6f, \"kept_wide\": %zu, \"trials\": [", q->r.ppl_in,
              q->r.ppl_out, q->r.tensors_kept_wide);
      for (int t = 0; t < q->n_trials; t++) {
        fprintf(fj, "%s{\"wide\": %zu, \"ppl\": %.6f, \"dropped\": ", t ? ", " : "", q->trial[t].wide_n,
                q->trial[t].ppl);
        if (q->trial[t].dropped >= 0) json_str(fj, er__gguf_tensor_at(q->g, (size_t)q->trial[t].dropped)->name_z);
        else fprintf(fj, "null");
        fprintf(fj, "}");
      }
      fprintf(fj, "]}");
    } else {
      fprintf(fj, "null");
    }
    fprintf(fj, ",\n  \"fp16_safe\": ");
    if (q->o.fp16_safe) {
      fprintf(fj, "{\"limit\": %g, \"layers\": [", FP16_SAFE_LIMIT);
      for (int k = 0; k < q->n_fp16; k++)
        fprintf(fj, "%s{\"layer\": %d, \"max_abs\": %.6g, \"ffn_up_scale\": %.9g, \"ffn_down_scale\": %.9g}",
                k ? ", " : "", q->fp16[k].layer, q->fp16[k].max_abs, 1.0 / q->fp16[k].scale, (double)q->fp16[k].scale);
      fprintf(fj, "]}");
    } else {
      fprintf(fj, "null");
    }
    fprintf(fj, ",\n  \"tensors\": [\n");
    for (size_t i = 0; i < q->n; i++) {
      const er_gguf_tensor *t = er__gguf_tensor_at(q->g, i);
      const tinfo *ti = &q->ti[i];
      double err = ti->is_wide ? ti->wide_err : ti->rel_err;
      fprintf(fj, "    {\"name\": ");
      json_str(fj, t->name_z);
      fprintf(fj, ", \"shape\": [%lld, %lld], \"from\": \"%s\", \"type\": \"%s\", \"bytes\": %llu, "
                  "\"importance_weighted\": %s, \"kept_wide\": %s, \"rel_error\": %.6e, \"error_share\": %.6f}%s\n",
              (long long)t->dims[0], (long long)(t->n_dims > 1 ? t->dims[1] : 1), er__ggml_type_name(t->type),
              er__ggml_type_name(types[i]), (unsigned long long)(ti->is_wide ? ti->wide_bytes : ti->bytes),
              ti->weighted && !ti->is_wide ? "true" : "false", ti->is_wide ? "true" : "false", err,
              total_err > 0 ? err / total_err : 0.0, i + 1 < q->n ? "," : "");
    }
    fprintf(fj, "  ]\n}\n");

    fprintf(fh, "<!doctype html><meta charset=utf-8><title>edgerun quantize report</title>\n"
                "<style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}"
                "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
                "td:first-child,th:first-child{text-align:left}.w{background:#eef}</style>\n<h1>");
    html_str(fh, q->in);
    fprintf(fh, " &rarr; %s</h1>\n<p>", q->mx->name);
    fprintf(fh, "%.2f MB &rarr; %.2f MB. ", (double)q->r.bytes_in / 1e6, (double)q->r.bytes_out / 1e6);
    if (q->im)
      fprintf(fh, "Importance matrix from %lld chunks (%lld tokens). ", (long long)q->r.calib_chunks,
              (long long)q->r.calib_tokens);
    else
      fprintf(fh, "No importance matrix (plain rounding). ");
    if (q->o.max_ppl_rise > 0)
      fprintf(fh, "Perplexity %.4f &rarr; %.4f (%+.2f%%, budget %.2f%%%s), %zu tensors kept at %s.",
              q->r.ppl_in, q->r.ppl_out, 100 * (q->r.ppl_out / q->r.ppl_in - 1), 100 * q->o.max_ppl_rise,
              q->eval_is_calib ? ", measured on the calibration text" : "", q->r.tensors_kept_wide,
              q->o.keep_type);
    if (q->o.fp16_safe)
      fprintf(fh, " fp16-safe: the SwiGLU product of %d layers scaled below %g.", q->n_fp16, FP16_SAFE_LIMIT);
    fprintf(fh, "</p>\n<table><tr><th>tensor<th>shape<th>from<th>type<th>bytes<th>relative error<th>share of error"
                "</tr>\n");
    for (size_t i = 0; i < q->n; i++) {
      const er_gguf_tensor *t = er__gguf_tensor_at(q->g, i);
      const tinfo *ti = &q->ti[i];
      double err = ti->is_wide ? ti->wide_err : ti->rel_err;
      fprintf(fh, "<tr%s><td>", ti->is_wide ? " class=w" : "");
      html_str(fh, t->name_z);
      fprintf(fh, "<td>%lld&times;%lld<td>%s<td>%s<td>%llu<td>%.3e<td>%.2f%%</tr>\n", (long long)t->dims[0],
              (long long)(t->n_dims > 1 ? t->dims[1] : 1), er__ggml_type_name(t->type), er__ggml_type_name(types[i]),
              (unsigned long long)(ti->is_wide ? ti->wide_bytes : ti->bytes), err,
              total_err > 0 ? 100 * err / total_err : 0.0);
    }
    fprintf(fh, "</table>\n");
    if (ferror(fj) || ferror(fh)) st = er__error(ER_STATUS_IO, "cannot write the report '%s'", q->o.report);
  }
  if (fj && fclose(fj) != 0 && st == ER_STATUS_OK) st = er__error(ER_STATUS_IO, "cannot write '%s'", pj);
  if (fh && fclose(fh) != 0 && st == ER_STATUS_OK) st = er__error(ER_STATUS_IO, "cannot write '%s'", ph);
  free(pj);
  free(ph);
  return st;
}

/* ---- fp16_safe ------------------------------------------------------------------- */

static size_t tensor_index(const qrun *q, const char *name) {
  for (size_t i = 0; i < q->n; i++)
    if (strcmp(er__gguf_tensor_at(q->g, i)->name_z, name) == 0) return i;
  return (size_t)-1;
}

/* From the ranges on the calibration text: per layer whose SwiGLU product
 * (or up projection) comes within 16x of fp16's largest value, the power
 * of two s that brings it under FP16_SAFE_LIMIT; ffn_up (and its bias) is
 * divided by s and ffn_down multiplied by it. silu(gate) * up is linear in
 * up, so the layer's output is the same; a power of two changes no
 * rounding in the block formats. Any other site beyond fp16's range is an
 * error: this remedy does not reach it. */
static er_status plan_fp16(qrun *q, const er_llm_ranges *rg, int n_layer) {
  q->fp16 = calloc((size_t)(n_layer > 0 ? n_layer : 1), sizeof *q->fp16);
  if (!q->fp16) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the fp16 plan");
  char name[96];
  for (int l = 0; l < n_layer; l++) {
    snprintf(name, sizeof name, "blk.%d.ffn_down.input", l);
    const er_llm_act_range *prod = er__llm_ranges_find(rg, name);
    snprintf(name, sizeof name, "blk.%d.ffn_up.output", l);
    const er_llm_act_range *up = er__llm_ranges_find(rg, name);
    double mx = prod ? prod->max_abs : 0;
    if (up && up->max_abs > mx) mx = up->max_abs;
    if (!(mx > FP16_SAFE_LIMIT)) continue;
    if (!isfinite(mx))
      return er__error(ER_STATUS_INVALID_MODEL, "%s: the SwiGLU product of layer %d is not finite even in fp32", q->in,
                       l);
    int e = (int)ceil(log2(mx / FP16_SAFE_LIMIT));
    float s = ldexpf(1.0f, e);
    size_t iu, id;
    snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
    iu = tensor_index(q, name);
    snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
    id = tensor_index(q, name);
    if (iu == (size_t)-1 || id == (size_t)-1)
      return er__error(ER_STATUS_UNSUPPORTED, "%s: layer %d has no ffn_up/ffn_down pair to scale", q->in, l);
    q->ti[iu].scale = 1.0f / s;
    q->ti[id].scale = s;
    snprintf(name, sizeof name, "blk.%d.ffn_up.bias", l);
    size_t ib = tensor_index(q, name);
    if (ib != (size_t)-1) q->ti[ib].scale = 1.0f / s;
    q->fp16[q->n_fp16].layer = l;
    q->fp16[q->n_fp16].max_abs = mx;
    q->fp16[q->n_fp16].scale = s;
    q->n_fp16++;
    if (q->o.progress)
      fprintf(stderr, "fp16-safe: layer %d, SwiGLU product up to %.4g: ffn_up / %g, ffn_down * %g\n", l, mx,
              (double)s, (double)s);
  }
  /* What the scaling does not reach. The product and the up projection
   * of every layer are in range now (their maximum divided by s). */
  for (size_t i = 0; i < er__llm_ranges_count(rg); i++) {
    const er_llm_act_range *a = er__llm_ranges_at(rg, i);
    const char *dot = strrchr(a->site, '.');
    bool fixed = dot && (strcmp(dot, ".input") == 0 ? strstr(a->site, ".ffn_down.") != NULL
                                                     : strstr(a->site, ".ffn_up.output") != NULL);
    if (a->over_fp16 == 0 || fixed) continue;
    return er__error(ER_STATUS_UNSUPPORTED,
                     "%s: %s (%s, layer %d) reaches %g on the calibration text, beyond fp16's largest value 65504; "
                     "--fp16-safe scales only the SwiGLU product, so this model cannot run finite in fp16",
                     q->in, a->site, a->what, a->layer, a->max_abs);
  }
  return ER_STATUS_OK;
}

/* ---- the entry point ----------------------------------------------------------- */

static uint32_t wide_type_for(const qrun *q, const er_gguf_tensor *t) {
  uint32_t w = strcasecmp(q->o.keep_type, "F16") == 0 ? ER_GGML_F16 : ER_GGML_Q8_0;
  if (w == ER_GGML_Q8_0 && t->dims[0] % ER_QK != 0) w = ER_GGML_F16;
  return w;
}

/* Bits per weight of a type (for "narrower than"). */
static double type_bits(uint32_t t) {
  int64_t blck, bytes;
  if (!er__ggml_type_geometry(t, &blck, &bytes)) return 32;
  return 8.0 * (double)bytes / (double)blck;
}

er_status er_llm_quantize(const char *in, const char *out, const er_llm_quantize_options *opts,
                          er_llm_quantize_result *res) {
  if (!in || !out) return er__error(ER_STATUS_INVALID_ARGUMENT, "input and output paths must not be NULL");
  qrun q = {0};
  q.in = in;
  q.out = out;
  er_llm_quantize_options_init(&q.o);
  if (opts) q.o = *opts;
  if (!q.o.keep_type) q.o.keep_type = "Q8_0";
  if (q.o.threads < 1) q.o.threads = 1;
  q.mx = q.o.type ? find_mix(q.o.type) : NULL;
  if (!q.mx)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "quantization type '%s' is not one edgerun writes (F32, F16, BF16, "
                     "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K)",
                     q.o.type ? q.o.type : "(null)");
  if (strcasecmp(q.o.keep_type, "Q8_0") != 0 && strcasecmp(q.o.keep_type, "F16") != 0)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "keep type '%s' is not Q8_0 or F16", q.o.keep_type);
  if (!(q.o.max_ppl_rise >= 0) || q.o.max_ppl_rise > 10)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "perplexity budget %g is not a relative rise in [0, 10]",
                     q.o.max_ppl_rise);
  if (q.o.calib_text && q.o.imatrix)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "give calibration text or an importance matrix file, not both");
  if (q.o.fp16_safe && !q.o.calib_text)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "fp16-safe needs calibration text: its scales come from the "
                     "activation ranges measured on it");
  if (strcmp(in, out) == 0)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "the output '%s' is the input: write to another file", out);
  ER_CHECK(er__gguf_open(in, 0, &q.g));
  q.n = er__gguf_tensor_count(q.g);
  er_llm *src = NULL;
  er_status st = er__pool_create(q.o.threads, &q.pool);
  uint32_t *types = calloc(q.n + 1, sizeof *types);
  q.ti = calloc(q.n + 1, sizeof *q.ti);
  q.num = calloc((size_t)q.o.threads, sizeof *q.num);
  q.den = calloc((size_t)q.o.threads, sizeof *q.den);
  if (st == ER_STATUS_OK && (!types || !q.ti || !q.num || !q.den))
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing '%s'", in);
  /* The counts the rules need: layers and attn_v tensors. */
  plan_state ps = {q.mx, 0, 0, 0, 0, true, q.o.calib_text != NULL || q.o.imatrix != NULL};
  int64_t max_cols = 0;
  for (size_t i = 0; st == ER_STATUS_OK && i < q.n; i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(q.g, i);
    if (strcmp(t->name_z, "output.weight") == 0) ps.tied = false;
    if (strstr(t->name_z, "attn_v.weight")) ps.n_attn_v++;
    if (strstr(t->name_z, "ffn_down.weight")) ps.n_layer++;
    if (t->dims[0] > max_cols) max_cols = t->dims[0];
    if (!er__qb_can_dequantize(t->type) && t->n_dims >= 2)
      st = er__error(ER_STATUS_UNSUPPORTED, "%s: tensor '%s' has type %s, which edgerun cannot read back", in,
                     t->name_z, er__ggml_type_name(t->type) ? er__ggml_type_name(t->type) : "?");
  }
  for (size_t i = 0; st == ER_STATUS_OK && i < q.n; i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(q.g, i);
    types[i] = choose(&ps, t, &q.o);
    q.ti[i].planned = types[i];
    q.ti[i].wide = wide_type_for(&q, t);
    q.ti[i].scale = 1.0f;
    q.ti[i].candidate = types[i] != t->type && !is_float_type(types[i]) && type_bits(types[i]) < type_bits(q.ti[i].wide);
  }
  if (st == ER_STATUS_OK) {
    q.scratch = malloc((size_t)q.o.threads * 2 * (size_t)max_cols * sizeof *q.scratch + 64);
    if (!q.scratch) st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing '%s'", in);
  }
  /* The importance matrix: read, or measured with the input model. */
  if (st == ER_STATUS_OK && q.o.imatrix) st = er__llm_imatrix_read(q.o.imatrix, &q.im);
  if (st == ER_STATUS_OK && (q.o.calib_text || q.o.max_ppl_rise > 0)) st = er_llm_load(in, NULL, &src);
  if (st == ER_STATUS_OK && q.o.calib_text) {
    er_llm_imatrix_options io = {q.o.calib_ctx, q.o.calib_chunks, q.o.threads, q.o.progress};
    er_llm_ranges *rg = NULL;
    st = er__llm_calibrate(src, q.o.calib_text, &io, &q.im, q.o.fp16_safe ? &rg : NULL);
    if (st == ER_STATUS_OK && rg) st = plan_fp16(&q, rg, ps.n_layer);
    er__llm_ranges_free(rg);
    q.r.fp16_scaled_layers = q.n_fp16;
  }
  if (st == ER_STATUS_OK && q.im) {
    size_t entries;
    er__llm_imatrix_stats(q.im, &q.r.calib_chunks, &q.r.calib_tokens, &entries);
    if (q.o.imatrix_out) st = er__llm_imatrix_write(q.im, q.o.imatrix_out);
  }
  if (st == ER_STATUS_OK) {
    if (q.o.max_ppl_rise > 0) st = budget_search(&q, src, types);
    else st = write_quantized(&q, out, types, false);
  }
  if (st == ER_STATUS_OK) {
    for (size_t i = 0; i < q.n; i++) {
      const er_gguf_tensor *t = er__gguf_tensor_at(q.g, i);
      q.r.bytes_in += t->nbytes;
      q.r.bytes_out += q.ti[i].is_wide ? q.ti[i].wide_bytes : q.ti[i].bytes;
      if (types[i] == t->type) q.r.tensors_copied++;
      else q.r.tensors_quantized++;
    }
    if (q.o.report) st = write_report(&q, types);
  }
  er_llm_free(src);
  er__llm_imatrix_free(q.im);
  free(q.buf);
  free(q.scratch);
  free(q.num);
  free(q.den);
  free(q.ti);
  free(q.fp16);
  free(types);
  er__pool_free(q.pool);
  er__gguf_close(q.g);
  if (st == ER_STATUS_OK && res) *res = q.r;
  return st;
}
