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
 *  - a k-quant on rows that are not whole 256-blocks falls back to a
 *    32-block type (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), as
 *    llama.cpp's tensor_type_fallback does: Qwen2-0.5B's width 896 is
 *    such a case. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strings.h>

#include "backends/cpu/cpu-kernels.h"
#include "backends/cpu/kernels/qblock.h"
#include "gguf/gguf-write.h"

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
} plan_state;

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
    if (ps->mx->rule == K_M && more_bits(ps->i_attn_v, ps->n_attn_v)) ty = ER_GGML_Q6_K;
    else if (ps->mx->rule == K_S && ps->i_attn_v < 4) ty = ER_GGML_Q5_K;
    ps->i_attn_v++;
  } else if (strstr(name, "ffn_down.weight")) {
    if (ps->mx->rule == K_M && more_bits(ps->i_ffn_down, ps->n_layer)) ty = ER_GGML_Q6_K;
    else if (ps->mx->rule == K_S && ps->i_ffn_down < ps->n_layer / 8) ty = ER_GGML_Q5_K;
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
  float *scratch;              /* [threads][cols] */
  bool bad;                    /* a NaN or Inf in the weights */
} qjob;

static void quant_rows(void *arg, int64_t r0, int64_t r1) {
  qjob *j = arg;
  float *row = j->scratch + (size_t)er__pool_slot() * (size_t)j->cols;
  for (int64_t r = r0; r < r1; r++) {
    er__qb_dequantize_row(j->t->type, (const uint8_t *)j->t->data + (size_t)r * j->src_row, row, j->cols);
    for (int64_t i = 0; i < j->cols; i++)
      if (!isfinite(row[i])) j->bad = true;
    er__qb_quantize_row(j->to, row, j->dst + (size_t)r * j->dst_row, j->cols);
  }
}

void er_llm_quantize_options_init(er_llm_quantize_options *o) {
  memset(o, 0, sizeof *o);
  o->type = "Q4_K_M";
  o->threads = 1;
}

er_status er_llm_quantize(const char *in, const char *out, const er_llm_quantize_options *opts,
                          er_llm_quantize_result *res) {
  if (!in || !out) return er__error(ER_STATUS_INVALID_ARGUMENT, "input and output paths must not be NULL");
  er_llm_quantize_options o;
  er_llm_quantize_options_init(&o);
  if (opts) o = *opts;
  const mix *mx = o.type ? find_mix(o.type) : NULL;
  if (!mx)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "quantization type '%s' is not one edgerun writes (F32, F16, BF16, "
                     "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K)",
                     o.type ? o.type : "(null)");
  if (strcmp(in, out) == 0)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "the output '%s' is the input: write to another file", out);
  er_gguf *g = NULL;
  ER_CHECK(er__gguf_open(in, 0, &g));
  er_thread_pool *pool = NULL;
  er_gguf_writer *w = NULL;
  float *scratch = NULL;
  uint8_t *buf = NULL;
  size_t buf_cap = 0;
  er_llm_quantize_result r = {0};
  er_status st = er__pool_create(o.threads < 1 ? 1 : o.threads, &pool);
  plan_state ps = {mx, 0, 0, 0, 0, true};
  uint32_t *types = calloc(er__gguf_tensor_count(g) + 1, sizeof *types);
  if (st == ER_STATUS_OK && !types) st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing '%s'", in);
  /* The counts the rules need: layers and attn_v tensors. */
  int64_t max_cols = 0;
  for (size_t i = 0; st == ER_STATUS_OK && i < er__gguf_tensor_count(g); i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(g, i);
    if (strcmp(t->name_z, "output.weight") == 0) ps.tied = false;
    if (strstr(t->name_z, "attn_v.weight")) ps.n_attn_v++;
    if (strstr(t->name_z, "ffn_down.weight")) ps.n_layer++;
    if (t->dims[0] > max_cols) max_cols = t->dims[0];
    if (!er__qb_can_dequantize(t->type) && t->n_dims >= 2)
      st = er__error(ER_STATUS_UNSUPPORTED, "%s: tensor '%s' has type %s, which edgerun cannot read back", in,
                     t->name_z, er__ggml_type_name(t->type) ? er__ggml_type_name(t->type) : "?");
  }
  if (st == ER_STATUS_OK) st = er__gguf_writer_open(out, &w);
  for (size_t i = 0; st == ER_STATUS_OK && i < er__gguf_kv_count(g); i++) {
    const er_gguf_kv *kv = er__gguf_kv_at(g, i);
    st = er__gguf_writer_kv_copy(w, kv);
  }
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_u32(w, "general.file_type", mx->ftype);
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_u32(w, "general.quantization_version", 2);
  for (size_t i = 0; st == ER_STATUS_OK && i < er__gguf_tensor_count(g); i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(g, i);
    types[i] = choose(&ps, t, &o);
    st = er__gguf_writer_add_tensor(w, t->name_z, t->n_dims, t->dims, types[i]);
  }
  if (st == ER_STATUS_OK) {
    scratch = malloc((size_t)(o.threads < 1 ? 1 : o.threads) * (size_t)max_cols * sizeof *scratch + 64);
    if (!scratch) st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing '%s'", in);
  }
  for (size_t i = 0; st == ER_STATUS_OK && i < er__gguf_tensor_count(g); i++) {
    const er_gguf_tensor *t = er__gguf_tensor_at(g, i);
    r.bytes_in += t->nbytes;
    if (types[i] == t->type) {
      st = er__gguf_writer_data(w, t->data, t->nbytes);
      r.bytes_out += t->nbytes;
      r.tensors_copied++;
      continue;
    }
    int64_t cols = t->dims[0], rows = (int64_t)(t->n_elems / (uint64_t)cols);
    size_t dst_row = er__qb_row_bytes(types[i], cols), need = (size_t)rows * dst_row;
    if (need > buf_cap) {
      uint8_t *nb = realloc(buf, need);
      if (!nb) {
        st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for tensor '%s' (%zu bytes)", t->name_z, need);
        break;
      }
      buf = nb;
      buf_cap = need;
    }
    qjob j = {t, types[i], er__qb_row_bytes(t->type, cols), dst_row, cols, buf, scratch, false};
    er__parallel_for_items(pool, rows, quant_rows, &j);
    if (j.bad) {
      st = er__error(ER_STATUS_INVALID_MODEL, "%s: tensor '%s' holds NaN or Inf; it cannot be quantized", in, t->name_z);
      break;
    }
    st = er__gguf_writer_data(w, buf, need);
    r.bytes_out += need;
    r.tensors_quantized++;
    if (o.progress) {
      fprintf(stderr, "\r[%zu/%zu] %-32s %-5s -> %-5s", i + 1, er__gguf_tensor_count(g), t->name_z,
              er__ggml_type_name(t->type), er__ggml_type_name(types[i]));
      fflush(stderr);
    }
  }
  if (o.progress) fputc('\n', stderr);
  if (st == ER_STATUS_OK) {
    st = er__gguf_writer_commit(w);
  } else {
    er__gguf_writer_abort(w);
  }
  free(buf);
  free(scratch);
  free(types);
  er__pool_free(pool);
  er__gguf_close(g);
  if (st == ER_STATUS_OK && res) *res = r;
  return st;
}
