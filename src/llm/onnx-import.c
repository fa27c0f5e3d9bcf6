/* onnx-import.c - an ONNX decoder as onnxruntime-genai's model builder
 * writes it, imported into the engine's blueprint.
 *
 * The builder's graphs are regular: per layer a (Skip)SimplifiedLayer-
 * Normalization, the q/k/v products (packed as qkv_proj, or three) with
 * their bias Add, GroupQueryAttention with rotary inside (or
 * RotaryEmbedding + MultiHeadAttention, made causal by the builder's mask
 * subgraph, in its fp16/fp32 form), o_proj, the
 * second norm, gate/up with SiLU as Sigmoid x Mul, and down; the products
 * are MatMul on float weights or com.microsoft MatMulNBits on 4/8-bit
 * blocks; genai_config.json beside the model gives the hyper-parameters.
 * Nodes are found by the builder's names and checked by operator, shape
 * and attributes; what does not fit is an error naming the node.
 *
 * The weights become a GGUF image in memory, with llama.cpp's tensor names
 * and types, so the rest of the engine (forward pass, quantizer, analysis,
 * serving) reads one blueprint:
 * - float MatMul [K, N] -> F32/F16/BF16 rows [N, K] (exact);
 * - MatMulNBits 4-bit, block a multiple of 32, zero point 8 -> Q4_0, other
 *   zero points -> Q4_1 (min = -zp * scale); 8-bit with zero point 128 ->
 *   Q8_0. Values equal the ONNX dequantization except the scales, which
 *   these formats hold in fp16 (a relative rounding of at most 2^-11).
 *   Other layouts (blocks of 16, K not a multiple of 32, 8-bit with zero
 *   points) are dequantized to F32, exactly;
 * - rotary frequencies from the cos/sin caches at position 1 (the base
 *   fitted; per-dimension factors written as rope_freqs when the caches
 *   hold a scaled rope);
 * - a Llama-type model's q/k rows reordered from rotary halves to adjacent
 *   pairs, as llama.cpp's converter does, so it runs as GGUF llama does.
 * The tokenizer comes from tokenizer.json beside the model (tok-json.c). */
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf-write.h"
#include "ir/ir.h"
#include "llm/llm-impl.h"
#include "runtime/runtime.h"

#define MAX_CONFIG_BYTES (4u << 20)
#define PI 3.14159265358979323846
#define MAX_TENSORS (16 + 16 * ER_LLM_MAX_LAYERS)

/* A converted tensor, waiting for the image. */
typedef struct itensor {
  char name[64];
  uint32_t type;
  int64_t rows, cols;         /* GGUF dims [cols, rows]; vectors: rows 1 */
  uint8_t *data;
  size_t nbytes;
} itensor;

/* A matrix product's weight as rows of its output: [rows = N, cols = K]. */
typedef struct imat {
  uint32_t type;
  int64_t rows, cols;
  size_t row_bytes;
  uint8_t *data;
} imat;

typedef struct imp {
  const char *what;           /* the model file, for messages */
  er_model *model;
  const er_graph *g;
  json_t *cfg;
  const char *type;           /* genai_config model.type */
  int n_layer, n_head, n_kv, head_dim;
  int64_t n_embd, n_ff, n_vocab, n_ctx;
  float eps;
  int n_rot;
  double rope_base;
  float *rope_factors;        /* [n_rot / 2] or NULL */
  bool interleaved, permute;
  const char *arch;           /* "qwen2" or "llama" */
  bool unpack;                /* every quantized weight to F32 (unpack_weights) */
  itensor *t;
  size_t n_t;
} imp;

/* ======================================================================== */
/* Graph lookups                                                             */
/* ======================================================================== */

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The first node whose name starts with `prefix` and whose operator is one
 * of `ops` ("A|B"); NULL when none. */
static const er_node *find_node(const imp *im, const char *prefix, const char *ops) {
  for (int32_t i = 0; i < im->g->n_nodes; i++) {
    const er_node *n = &im->g->nodes[i];
    if (!n->name || !starts_with(n->name, prefix)) continue;
    const char *p = ops;
    size_t len = strlen(n->op_type);
    while (*p) {
      const char *bar = strchr(p, '|');
      size_t l = bar ? (size_t)(bar - p) : strlen(p);
      if (l == len && memcmp(p, n->op_type, l) == 0) return n;
      p += l + (bar ? 1 : 0);
    }
  }
  return NULL;
}

static er_status need_node(const imp *im, const char *prefix, const char *ops, const er_node **out) {
  *out = find_node(im, prefix, ops);
  if (!*out)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: no %s node named '%s...'; edgerun reads ONNX decoders as "
                     "onnxruntime-genai's model builder writes them",
                     im->what, ops, prefix);
  return ER_STATUS_OK;
}


/* Input `i` of `n` as a constant (an initializer, through Reshapes), or
 * NULL when it is absent or computed. */
static const er_tensor *const_input(const imp *im, const er_node *n, int i) {
  for (int hops = 0; hops < 4; hops++) {
    if (i >= n->n_inputs || n->inputs[i] < 0) return NULL;
    const er_value *v = &im->g->values[n->inputs[i]];
    if (v->kind == ER_VALUE_CONSTANT && v->constant && v->constant->data) return v->constant;
    if (v->producer < 0) return NULL;
    n = &im->g->nodes[v->producer];
    if (strcmp(n->op_type, "Reshape") != 0) return NULL;
    i = 0;
  }
  return NULL;
}

static bool has_input(const er_node *n, int i) { return i < n->n_inputs && n->inputs[i] >= 0; }

/* A node that reads value `v` and has operator `op`, or NULL. */
static const er_node *consumer(const imp *im, int32_t v, const char *op) {
  for (int32_t i = 0; i < im->g->n_nodes; i++) {
    const er_node *n = &im->g->nodes[i];
    if (strcmp(n->op_type, op) != 0) continue;
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == v) return n;
  }
  return NULL;
}

static float elem_f32(const er_tensor *t, int64_t i) {
  switch (t->dtype) {
  case ER_DTYPE_FLOAT: return ((const float *)t->data)[i];
  case ER_DTYPE_FLOAT16: return er__f16_to_f32(((const uint16_t *)t->data)[i]);
  case ER_DTYPE_BFLOAT16: return er__bf16_to_f32(((const uint16_t *)t->data)[i]);
  default: return 0.0f;
  }
}

static bool is_float(er_dtype d) { return d == ER_DTYPE_FLOAT || d == ER_DTYPE_FLOAT16 || d == ER_DTYPE_BFLOAT16; }

/* ======================================================================== */
/* Weights                                                                   */
/* ======================================================================== */

static er_status oom(const imp *im) { return er__error(ER_STATUS_OUT_OF_MEMORY, "%s: out of memory importing", im->what); }

/* A float MatMul's weight [K, N], transposed to rows. */
static er_status mat_float(const imp *im, const er_node *n, const er_tensor *b, imat *out) {
  if (b->rank != 2 || !is_float(b->dtype))
    return er__error(ER_STATUS_UNSUPPORTED, "%s: node '%s': the weight is %s of rank %d; a float matrix is expected",
                     im->what, n->name, er_dtype_name(b->dtype), b->rank);
  int64_t k = b->dims[0], nn = b->dims[1];
  size_t es = b->dtype == ER_DTYPE_FLOAT ? 4 : 2;
  out->type = b->dtype == ER_DTYPE_FLOAT ? ER_GGML_F32 : b->dtype == ER_DTYPE_FLOAT16 ? ER_GGML_F16 : ER_GGML_BF16;
  out->rows = nn;
  out->cols = k;
  out->row_bytes = (size_t)k * es;
  out->data = malloc((size_t)nn * out->row_bytes);
  if (!out->data) return oom(im);
  const uint8_t *src = b->data;
  for (int64_t r = 0; r < nn; r++)
    for (int64_t c = 0; c < k; c++) {
      uint8_t *dst = out->data + (size_t)r * out->row_bytes + (size_t)c * es;
      memcpy(dst, src + ((size_t)c * (size_t)nn + (size_t)r) * es, es);
    }
  return ER_STATUS_OK;
}

/* The geometry of a MatMulNBits weight, checked against its tensors. */
typedef struct nbits {
  int64_t k, n, bs, nb;       /* K, N, block size, blocks per row */
  int bits;
  size_t blob;                /* bytes of one block */
  const uint8_t *b;           /* [n][nb][blob] */
  const er_tensor *scales;    /* [n * nb] */
  const uint8_t *zp;          /* packed zero points or NULL */
  size_t zp_row;              /* bytes of one row's zero points */
} nbits;

static er_status nbits_read(const imp *im, const er_node *n, nbits *q) {
  q->k = er__node_attr_int(n, "K", 0);
  q->n = er__node_attr_int(n, "N", 0);
  q->bits = (int)er__node_attr_int(n, "bits", 4);
  q->bs = er__node_attr_int(n, "block_size", 0);
  if ((q->bits != 4 && q->bits != 8) || q->bs < 16 || (q->bs & (q->bs - 1)) || q->k < 1 || q->n < 1 ||
      q->k > ER_LLM_MAX_EMBD * 16 || q->n > ER_LLM_MAX_VOCAB)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: MatMulNBits '%s': bits %d, block_size %lld, K %lld, N %lld: edgerun "
                     "reads 4 and 8 bits in power-of-two blocks of 16 or more",
                     im->what, n->name, q->bits, (long long)q->bs, (long long)q->k, (long long)q->n);
  if (has_input(n, 4))
    return er__error(ER_STATUS_UNSUPPORTED, "%s: MatMulNBits '%s' has g_idx (act-order) input; edgerun reads plain "
                     "block order", im->what, n->name);
  q->nb = (q->k + q->bs - 1) / q->bs;
  q->blob = (size_t)(q->bs * q->bits / 8);
  const er_tensor *b = const_input(im, n, 1), *s = const_input(im, n, 2), *z = const_input(im, n, 3);
  if (!b || b->dtype != ER_DTYPE_UINT8 || b->nbytes != (size_t)q->n * (size_t)q->nb * q->blob)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: MatMulNBits '%s': B must be a uint8 initializer of %lld x %lld x "
                     "%zu bytes", im->what, n->name, (long long)q->n, (long long)q->nb, q->blob);
  if (!s || !is_float(s->dtype) || er__tensor_count(s) != q->n * q->nb)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: MatMulNBits '%s': scales must be a float initializer of %lld "
                     "values", im->what, n->name, (long long)(q->n * q->nb));
  q->b = b->data;
  q->scales = s;
  q->zp = NULL;
  if (has_input(n, 3)) {
    q->zp_row = q->bits == 4 ? (size_t)(q->nb + 1) / 2 : (size_t)q->nb;
    if (!z || z->dtype != ER_DTYPE_UINT8 || z->nbytes != (size_t)q->n * q->zp_row)
      return er__error(ER_STATUS_UNSUPPORTED, "%s: MatMulNBits '%s': zero points must be a packed uint8 initializer "
                       "of %lld x %zu bytes", im->what, n->name, (long long)q->n, q->zp_row);
    q->zp = z->data;
  }
  return ER_STATUS_OK;
}

static inline int nb_q(const nbits *q, int64_t r, int64_t blk, int64_t j) {
  const uint8_t *p = q->b + ((size_t)r * (size_t)q->nb + (size_t)blk) * q->blob;
  return q->bits == 8 ? p[j] : (p[j / 2] >> ((j & 1) * 4)) & 15;
}

static inline int nb_zp(const nbits *q, int64_t r, int64_t blk) {
  if (!q->zp) return q->bits == 8 ? 128 : 8;
  const uint8_t *p = q->zp + (size_t)r * q->zp_row;
  return q->bits == 8 ? p[blk] : (p[blk / 2] >> ((blk & 1) * 4)) & 15;
}

static er_status mat_nbits(const imp *im, const er_node *n, imat *out) {
  nbits q = {0};
  ER_CHECK(nbits_read(im, n, &q));
  bool blocks32 = q.k % ER_QK == 0 && q.bs % ER_QK == 0, symmetric = true;
  for (int64_t r = 0; r < q.n && symmetric; r++)
    for (int64_t b = 0; b < q.nb && symmetric; b++) symmetric = nb_zp(&q, r, b) == (q.bits == 8 ? 128 : 8);
  out->type = im->unpack || !blocks32 || (q.bits == 8 && !symmetric) ? ER_GGML_F32
              : q.bits == 8                            ? ER_GGML_Q8_0
              : symmetric                              ? ER_GGML_Q4_0
                                                       : ER_GGML_Q4_1;
  out->rows = q.n;
  out->cols = q.k;
  out->row_bytes = er__qb_row_bytes(out->type, q.k);
  out->data = calloc((size_t)q.n, out->row_bytes);
  if (!out->data) return oom(im);
  for (int64_t r = 0; r < q.n; r++) {
    uint8_t *row = out->data + (size_t)r * out->row_bytes;
    if (out->type == ER_GGML_F32) {
      float *f = (float *)row;
      for (int64_t c = 0; c < q.k; c++) {
        int64_t b = c / q.bs;
        f[c] = (float)(nb_q(&q, r, b, c % q.bs) - nb_zp(&q, r, b)) * elem_f32(q.scales, r * q.nb + b);
      }
      continue;
    }
    for (int64_t sb = 0; sb < q.k / ER_QK; sb++) {
      int64_t c0 = sb * ER_QK, b = c0 / q.bs, o = c0 % q.bs;
      float s = elem_f32(q.scales, r * q.nb + b);
      int zp = nb_zp(&q, r, b);
      if (out->type == ER_GGML_Q8_0) {
        er_block_q8_0 *blk = (er_block_q8_0 *)row + sb;
        blk->d = er__f32_to_f16(s);
        for (int j = 0; j < ER_QK; j++) blk->qs[j] = (int8_t)(nb_q(&q, r, b, o + j) - 128);
      } else if (out->type == ER_GGML_Q4_0) {
        er_block_q4_0 *blk = (er_block_q4_0 *)row + sb;
        blk->d = er__f32_to_f16(s);
        for (int j = 0; j < ER_QK / 2; j++)
          blk->qs[j] = (uint8_t)(nb_q(&q, r, b, o + j) | (nb_q(&q, r, b, o + j + ER_QK / 2) << 4));
      } else {
        er_block_q4_1 *blk = (er_block_q4_1 *)row + sb;
        blk->d = er__f32_to_f16(s);
        blk->m = er__f32_to_f16(-(float)zp * s);
        for (int j = 0; j < ER_QK / 2; j++)
          blk->qs[j] = (uint8_t)(nb_q(&q, r, b, o + j) | (nb_q(&q, r, b, o + j + ER_QK / 2) << 4));
      }
    }
  }
  return ER_STATUS_OK;
}

/* The weight of product node `n` (MatMul or MatMulNBits), [K -> N]. */
static er_status matrix(const imp *im, const er_node *n, int64_t rows, int64_t cols, imat *out) {
  memset(out, 0, sizeof *out);
  er_status st;
  if (strcmp(n->op_type, "MatMulNBits") == 0) {
    st = mat_nbits(im, n, out);
  } else {
    const er_tensor *b = const_input(im, n, 1);
    if (!b) return er__error(ER_STATUS_UNSUPPORTED, "%s: MatMul '%s' has no constant weight", im->what, n->name);
    st = mat_float(im, n, b, out);
  }
  if (st == ER_STATUS_OK && (out->rows != rows || out->cols != cols))
    st = er__error(ER_STATUS_INVALID_SHAPE, "%s: node '%s' maps %lld inputs to %lld outputs; the config says %lld "
                   "to %lld", im->what, n->name, (long long)out->cols, (long long)out->rows, (long long)cols,
                   (long long)rows);
  if (st != ER_STATUS_OK) {
    free(out->data);
    out->data = NULL;
  }
  return st;
}

static er_status add_tensor(imp *im, const char *name, uint32_t type, int64_t rows, int64_t cols, uint8_t *data,
                            size_t nbytes) {
  if (im->n_t == MAX_TENSORS) {
    free(data);
    return er__error(ER_STATUS_LIMIT, "%s: more than %d tensors", im->what, MAX_TENSORS);
  }
  itensor *t = &im->t[im->n_t++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->type = type;
  t->rows = rows;
  t->cols = cols;
  t->data = data;
  t->nbytes = nbytes;
  return ER_STATUS_OK;
}

/* Rows [r0, r0 + n) of `m` as tensor `name`; `perm_heads` > 0: reorder
 * each head's rows from rotary halves to adjacent pairs. */
static er_status add_rows(imp *im, const char *name, const imat *m, int64_t r0, int64_t n, int perm_heads) {
  uint8_t *d = malloc((size_t)n * m->row_bytes);
  if (!d) return oom(im);
  for (int64_t r = 0; r < n; r++) {
    int64_t src = r;
    if (perm_heads > 0) {
      int64_t hd = im->head_dim, h = r / hd, i = r % hd, half = im->n_rot / 2;
      if (i < im->n_rot) src = h * hd + (i % 2) * half + i / 2;
    }
    memcpy(d + (size_t)r * m->row_bytes, m->data + (size_t)(r0 + src) * m->row_bytes, m->row_bytes);
  }
  return add_tensor(im, name, m->type, n, m->cols, d, (size_t)n * m->row_bytes);
}

/* A float vector of n values from `t` starting at element `at`. */
static er_status add_vector(imp *im, const char *name, const er_tensor *t, int64_t at, int64_t n, bool permute,
                            const char *node) {
  if (!t || !is_float(t->dtype) || er__tensor_count(t) < at + n)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: node '%s': a float vector of %lld values is expected", im->what,
                     node, (long long)n);
  float *v = malloc((size_t)n * sizeof *v);
  if (!v) return oom(im);
  for (int64_t i = 0; i < n; i++) {
    int64_t src = i;
    if (permute) {
      int64_t hd = im->head_dim, h = i / hd, j = i % hd, half = im->n_rot / 2;
      if (j < im->n_rot) src = h * hd + (j % 2) * half + j / 2;
    }
    v[i] = elem_f32(t, at + src);
  }
  return add_tensor(im, name, ER_GGML_F32, 1, n, (uint8_t *)v, (size_t)n * sizeof *v);
}

/* ======================================================================== */
/* The layers                                                                */
/* ======================================================================== */

/* A (Skip)SimplifiedLayerNormalization's scale; its epsilon checked. */
static er_status norm(imp *im, const char *prefix, const char *name) {
  const er_node *n;
  ER_CHECK(need_node(im, prefix, "SimplifiedLayerNormalization|SkipSimplifiedLayerNormalization", &n));
  bool skip = strcmp(n->op_type, "SkipSimplifiedLayerNormalization") == 0;
  float eps = er__node_attr_float(n, "epsilon", 1e-5f);
  if (skip && has_input(n, 3))
    return er__error(ER_STATUS_UNSUPPORTED, "%s: node '%s' has a bias input; edgerun's RMS norms have none", im->what,
                     n->name);
  if (im->eps < 0) im->eps = eps;
  else if (fabsf(eps - im->eps) > 1e-3f * im->eps)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: node '%s' has epsilon %g, another norm %g; edgerun uses one",
                     im->what, n->name, (double)eps, (double)im->eps);
  return add_vector(im, name, const_input(im, n, skip ? 2 : 1), 0, im->n_embd, false, n->name);
}

/* The bias added to product `n`'s output (its Add consumer or its own
 * bias input), or NULL. */
static const er_tensor *bias_of(const imp *im, const er_node *n) {
  if (strcmp(n->op_type, "MatMulNBits") == 0 && has_input(n, 5)) return const_input(im, n, 5);
  const er_node *add = consumer(im, n->outputs[0], "Add");
  if (!add) return NULL;
  const er_tensor *b = const_input(im, add, 0);
  if (!b || b->rank != 1) b = const_input(im, add, 1);
  return b && b->rank == 1 ? b : NULL;
}

static er_status proj(imp *im, int layer, const char *hf, const char *gg, int64_t rows, int64_t cols, bool bias,
                      int perm) {
  char prefix[96], name[64];
  snprintf(prefix, sizeof prefix, "/model/layers.%d/%s/", layer, hf);
  const er_node *n;
  ER_CHECK(need_node(im, prefix, "MatMul|MatMulNBits", &n));
  imat m;
  ER_CHECK(matrix(im, n, rows, cols, &m));
  snprintf(name, sizeof name, "blk.%d.%s.weight", layer, gg);
  er_status st = add_rows(im, name, &m, 0, rows, perm);
  free(m.data);
  ER_CHECK(st);
  const er_tensor *b = bias ? bias_of(im, n) : NULL;
  if (!b) return ER_STATUS_OK;
  snprintf(name, sizeof name, "blk.%d.%s.bias", layer, gg);
  return add_vector(im, name, b, 0, rows, perm > 0, n->name);
}

static er_status attention(imp *im, int layer) {
  int64_t q_rows = (int64_t)im->n_head * im->head_dim, kv_rows = (int64_t)im->n_kv * im->head_dim;
  char prefix[96], name[64];
  snprintf(prefix, sizeof prefix, "/model/layers.%d/attn/qkv_proj/", layer);
  const er_node *n = find_node(im, prefix, "MatMul|MatMulNBits");
  int perm = im->permute ? 1 : 0;
  if (!n) {
    ER_CHECK(proj(im, layer, "attn/q_proj", "attn_q", q_rows, im->n_embd, true, perm));
    ER_CHECK(proj(im, layer, "attn/k_proj", "attn_k", kv_rows, im->n_embd, true, perm));
    return proj(im, layer, "attn/v_proj", "attn_v", kv_rows, im->n_embd, true, 0);
  }
  imat m;
  ER_CHECK(matrix(im, n, q_rows + 2 * kv_rows, im->n_embd, &m));
  static const char *const gg[3] = {"attn_q", "attn_k", "attn_v"};
  int64_t at[3] = {0, q_rows, q_rows + kv_rows}, len[3] = {q_rows, kv_rows, kv_rows};
  const er_tensor *b = bias_of(im, n);
  er_status st = ER_STATUS_OK;
  for (int i = 0; i < 3 && st == ER_STATUS_OK; i++) {
    snprintf(name, sizeof name, "blk.%d.%s.weight", layer, gg[i]);
    st = add_rows(im, name, &m, at[i], len[i], i < 2 ? perm : 0);
    if (st == ER_STATUS_OK && b) {
      snprintf(name, sizeof name, "blk.%d.%s.bias", layer, gg[i]);
      st = add_vector(im, name, b, at[i], len[i], i < 2 && perm, n->name);
    }
  }
  free(m.data);
  return st;
}

/* The attention operator's settings, and the rotary caches it (or the
 * RotaryEmbedding before it) reads: *cos_out / *sin_out. */
static er_status attention_op(imp *im, int layer, const er_tensor **cos_out, const er_tensor **sin_out) {
  char prefix[96];
  snprintf(prefix, sizeof prefix, "/model/layers.%d/attn/", layer);
  const er_node *n;
  ER_CHECK(need_node(im, prefix, "GroupQueryAttention|MultiHeadAttention", &n));
  bool gqa = strcmp(n->op_type, "GroupQueryAttention") == 0;
  float scale = er__node_attr_float(n, "scale", 0.0f), want = 1.0f / sqrtf((float)im->head_dim);
  if (er__node_attr_int(n, "num_heads", 0) != im->n_head || (gqa && er__node_attr_int(n, "kv_num_heads", 0) != im->n_kv) ||
      (scale != 0.0f && fabsf(scale - want) > 1e-5f * want) || er__node_attr_float(n, "softcap", 0.0f) != 0.0f ||
      er__node_attr_int(n, "local_window_size", -1) != -1)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: node '%s' has %lld query / %lld key-value heads, scale %g, softcap "
                     "%g, window %lld; genai_config.json says %d / %d heads, and edgerun runs causal attention scaled "
                     "by 1/sqrt(%d) without softcap or sliding window",
                     im->what, n->name, (long long)er__node_attr_int(n, "num_heads", 0),
                     (long long)er__node_attr_int(n, "kv_num_heads", 0), (double)scale,
                     (double)er__node_attr_float(n, "softcap", 0.0f),
                     (long long)er__node_attr_int(n, "local_window_size", -1),
                     im->n_head, im->n_kv, im->head_dim);
  const er_node *rot = n;
  int ci = 7, si = 8;
  if (!gqa || !er__node_attr_int(n, "do_rotary", 0)) {
    snprintf(prefix, sizeof prefix, "/model/layers.%d/attn/q_rotary/", layer);
    ER_CHECK(need_node(im, prefix, "RotaryEmbedding", &rot));
    ci = 2;
    si = 3;
    im->interleaved = er__node_attr_int(rot, "interleaved", 0) != 0;
  } else {
    im->interleaved = er__node_attr_int(n, "rotary_interleaved", 0) != 0;
  }
  *cos_out = const_input(im, rot, ci);
  *sin_out = const_input(im, rot, si);
  if (!*cos_out || !*sin_out)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: node '%s': the cos/sin caches must be initializers", im->what,
                     rot->name);
  return ER_STATUS_OK;
}

/* n_rot, the base and any per-dimension factors, from the caches. */
static er_status rope(imp *im, const er_tensor *c, const er_tensor *s) {
  if (c->rank != 2 || s->rank != 2 || c->dims[0] != s->dims[0] || c->dims[1] != s->dims[1] || c->dims[0] < 2 ||
      c->dims[1] < 2 || 2 * c->dims[1] > im->head_dim || !is_float(c->dtype) || !is_float(s->dtype))
    return er__error(ER_STATUS_UNSUPPORTED, "%s: rotary caches of [%lld, %lld]: [positions >= 2, 2..head_dim/2 "
                     "(%d)] floats are expected",
                     im->what, (long long)c->dims[0], (long long)c->dims[1], im->head_dim / 2);
  int half = (int)c->dims[1];
  im->n_rot = 2 * half;
  float *freq = malloc((size_t)half * sizeof *freq);
  if (!freq) return oom(im);
  /* Each frequency from position 1, then refined at later positions (the
   * angle unwrapped by the estimate so far): fp16 caches give 3 digits at
   * position 1, about 5 at position 255. */
  int64_t n_pos = c->dims[0];
  for (int i = 0; i < half; i++) {
    double f = atan2((double)elem_f32(s, half + i), (double)elem_f32(c, half + i));
    const int64_t at[3] = {16, 256, n_pos - 1};
    for (int j = 0; j < 3; j++) {
      int64_t p = at[j];
      if (p >= n_pos || (j > 0 && p <= at[j - 1])) continue;
      double a = atan2((double)elem_f32(s, p * half + i), (double)elem_f32(c, p * half + i));
      double k = round(((double)p * f - a) / (2.0 * PI));
      f = (a + 2.0 * PI * k) / (double)p;
    }
    freq[i] = (float)f;
  }
  if (!(freq[1] > 0.0f && freq[1] < 1.0f)) {
    double f1 = (double)freq[1];
    free(freq);
    return er__error(ER_STATUS_UNSUPPORTED, "%s: the rotary caches' second frequency is %g; a rope base above 1 is "
                     "expected", im->what, f1);
  }
  double base = pow((double)freq[1], -(double)half);
  if (fabs(base - round(base)) < 1e-4 * base) base = round(base);
  im->rope_base = base;
  bool scaled = false;
  for (int i = 0; i < half; i++) {
    double f = pow(base, -(double)i / half);
    freq[i] = (float)(f / (double)freq[i]);
    if (!(fabs(freq[i] - 1.0) < 2e-3)) scaled = true;
  }
  if (scaled) im->rope_factors = freq;
  else free(freq);
  return ER_STATUS_OK;
}

static er_status layer(imp *im, int i) {
  char p[96];
  snprintf(p, sizeof p, "/model/layers.%d/input_layernorm/", i);
  char name[64];
  snprintf(name, sizeof name, "blk.%d.attn_norm.weight", i);
  ER_CHECK(norm(im, p, name));
  ER_CHECK(attention(im, i));
  ER_CHECK(proj(im, i, "attn/o_proj", "attn_output", im->n_embd, (int64_t)im->n_head * im->head_dim, false, 0));
  snprintf(p, sizeof p, "/model/layers.%d/post_attention_layernorm/", i);
  snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", i);
  ER_CHECK(norm(im, p, name));
  ER_CHECK(proj(im, i, "mlp/gate_proj", "ffn_gate", im->n_ff, im->n_embd, false, 0));
  ER_CHECK(proj(im, i, "mlp/up_proj", "ffn_up", im->n_ff, im->n_embd, false, 0));
  ER_CHECK(proj(im, i, "mlp/down_proj", "ffn_down", im->n_embd, im->n_ff, false, 0));
  /* SiLU on the gate: Sigmoid(gate) x gate. */
  snprintf(p, sizeof p, "/model/layers.%d/mlp/gate_proj/", i);
  const er_node *gate = find_node(im, p, "MatMul|MatMulNBits");
  const er_node *sig = gate ? consumer(im, gate->outputs[0], "Sigmoid") : NULL;
  if (!sig)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: layer %d: the gate's activation is not SiLU (Sigmoid x gate); "
                     "edgerun runs SwiGLU feed-forward layers", im->what, i);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Embeddings, head, config                                                  */
/* ======================================================================== */

static er_status embeddings(imp *im, const er_node **lm_out) {
  const er_node *e, *lm;
  ER_CHECK(need_node(im, "/model/embed_tokens/", "Gather|GatherBlockQuantized", &e));
  ER_CHECK(need_node(im, "/lm_head/", "MatMul|MatMulNBits", &lm));
  *lm_out = lm;
  const er_tensor *w = const_input(im, e, 0);
  if (!w) return er__error(ER_STATUS_UNSUPPORTED, "%s: node '%s': the embedding is not an initializer", im->what, e->name);
  if (strcmp(e->op_type, "Gather") == 0) {
    if (w->rank != 2 || w->dims[1] != im->n_embd || !is_float(w->dtype) || w->dims[0] < 1 ||
        w->dims[0] > ER_LLM_MAX_VOCAB)
      return er__error(ER_STATUS_INVALID_SHAPE, "%s: node '%s': the embedding must be float [vocabulary, %lld]",
                       im->what, e->name, (long long)im->n_embd);
    im->n_vocab = w->dims[0];
    size_t es = w->dtype == ER_DTYPE_FLOAT ? 4 : 2;
    uint8_t *d = malloc(w->nbytes);
    if (!d) return oom(im);
    memcpy(d, w->data, w->nbytes);
    uint32_t type = w->dtype == ER_DTYPE_FLOAT ? ER_GGML_F32 : w->dtype == ER_DTYPE_FLOAT16 ? ER_GGML_F16 : ER_GGML_BF16;
    ER_CHECK(add_tensor(im, "token_embd.weight", type, im->n_vocab, im->n_embd, d, (size_t)im->n_vocab * im->n_embd * es));
    imat m;
    ER_CHECK(matrix(im, lm, im->n_vocab, im->n_embd, &m));
    er_status st = add_rows(im, "output.weight", &m, 0, m.rows, 0);
    free(m.data);
    return st;
  }
  /* GatherBlockQuantized: the builder's shared embeddings read lm_head's
   * blocks; one tensor serves both (GGUF's tied embeddings). */
  const er_tensor *lw = const_input(im, lm, 1);
  if (strcmp(lm->op_type, "MatMulNBits") != 0 || lw != w || const_input(im, lm, 2) != const_input(im, e, 2) ||
      er__node_attr_int(e, "block_size", 0) != er__node_attr_int(lm, "block_size", -1) ||
      er__node_attr_int(e, "quantize_axis", 1) != 1 ||
      er__node_attr_int(e, "gather_axis", 0) != 0)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: node '%s': a GatherBlockQuantized embedding is read only as the "
                     "builder's shared embeddings (lm_head's own blocks and scales)", im->what, e->name);
  im->n_vocab = er__node_attr_int(lm, "N", 0);
  if (im->n_vocab < 1 || im->n_vocab > ER_LLM_MAX_VOCAB)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: lm_head has %lld outputs", im->what, (long long)im->n_vocab);
  imat m;
  ER_CHECK(matrix(im, lm, im->n_vocab, im->n_embd, &m));
  er_status st = add_rows(im, "token_embd.weight", &m, 0, m.rows, 0);
  free(m.data);
  return st;
}

static er_status cfg_int(const imp *im, const json_t *obj, const char *key, int64_t max, int64_t *out) {
  const json_t *v = obj ? json_object_get(obj, key) : NULL;
  if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: genai_config.json: model.decoder.%s must be an integer from 1 "
                     "to %lld", im->what, key, (long long)max);
  *out = json_integer_value(v);
  return ER_STATUS_OK;
}

static er_status read_config(imp *im, const char *dir, char **onnx_path_out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/genai_config.json", dir);
  struct stat sb;
  if (stat(path, &sb) != 0)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: not found; an ONNX decoder folder holds genai_config.json "
                     "beside model.onnx (onnxruntime-genai's model builder writes both)", path);
  if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > MAX_CONFIG_BYTES)
    return er__error(ER_STATUS_LIMIT, "%s: not a regular file of at most %u bytes", path, MAX_CONFIG_BYTES);
  json_error_t err;
  im->cfg = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!im->cfg)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: line %d: %s", path, err.line, err.text);
  const json_t *model = json_object_get(im->cfg, "model");
  const json_t *dec = json_object_get(model, "decoder");
  const json_t *type = json_object_get(model, "type");
  if (!json_is_object(dec) || !json_is_string(type))
    return er__error(ER_STATUS_INVALID_MODEL, "%s: model.type and model.decoder are required", path);
  im->type = json_string_value(type);
  int64_t v = 0;
  ER_CHECK(cfg_int(im, dec, "num_hidden_layers", ER_LLM_MAX_LAYERS, &v));
  im->n_layer = (int)v;
  ER_CHECK(cfg_int(im, dec, "num_attention_heads", ER_LLM_MAX_HEADS, &v));
  im->n_head = (int)v;
  ER_CHECK(cfg_int(im, dec, "num_key_value_heads", ER_LLM_MAX_HEADS, &v));
  im->n_kv = (int)v;
  ER_CHECK(cfg_int(im, dec, "head_size", ER_LLM_MAX_HEAD_DIM, &v));
  im->head_dim = (int)v;
  ER_CHECK(cfg_int(im, dec, "hidden_size", ER_LLM_MAX_EMBD, &im->n_embd));
  im->n_ctx = 2048;
  if (json_object_get(model, "context_length")) ER_CHECK(cfg_int(im, model, "context_length", ER_LLM_MAX_CTX, &im->n_ctx));
  const json_t *file = json_object_get(dec, "filename");
  const char *fname = json_is_string(file) ? json_string_value(file) : "model.onnx";
  if (!*fname || strchr(fname, '/') || strchr(fname, '\\') || strcmp(fname, "..") == 0 || strcmp(fname, ".") == 0)
    return er__error(ER_STATUS_UNSAFE_PATH, "%s: model.decoder.filename '%s' must be a file name in the folder", path,
                     fname);
  if (strcmp(im->type, "qwen2") == 0) {
    im->arch = "qwen2";
  } else if (strcmp(im->type, "llama") == 0 || strcmp(im->type, "mistral") == 0) {
    im->arch = "llama";
  } else {
    return er__error(ER_STATUS_UNSUPPORTED, "%s: model type '%s' is not supported (qwen2, llama and mistral are)", path,
                     im->type);
  }
  size_t n = strlen(dir) + strlen(fname) + 2;
  *onnx_path_out = malloc(n);
  if (!*onnx_path_out) return oom(im);
  snprintf(*onnx_path_out, n, "%s/%s", dir, fname);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The image                                                                 */
/* ======================================================================== */

/* The chat template: chat_template.jinja, else tokenizer_config.json's
 * (*out NULL when neither has one). */
static er_status chat_template(const char *dir, char **out) {
  *out = NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
  FILE *f = fopen(path, "rb");
  if (f) {
    char *buf = malloc(MAX_CONFIG_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_CONFIG_BYTES + 1, f) : 0;
    fclose(f);
    if (!buf) return er__error(ER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    if (n > MAX_CONFIG_BYTES || memchr(buf, 0, n)) {
      free(buf);
      return er__error(ER_STATUS_INVALID_MODEL, "%s: a template must be text of at most %u bytes without NUL bytes",
                       path, MAX_CONFIG_BYTES);
    }
    buf[n] = 0;
    *out = buf;
    return ER_STATUS_OK;
  }
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  json_t *root = json_load_file(path, 0, NULL);
  const json_t *t = json_object_get(root, "chat_template");
  if (json_is_string(t) && !(*out = strdup(json_string_value(t)))) {
    json_decref(root);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  json_decref(root);
  return ER_STATUS_OK;
}

static er_status write_image(imp *im, const char *dir, void **image_out, size_t *size_out) {
  er_gguf_writer *w;
  ER_CHECK(er__gguf_writer_open_memory(&w));
  char key[128];
#define KEY(s) (snprintf(key, sizeof key, "%s.%s", im->arch, s), key)
  char *name = strdup(dir), *tmpl = NULL;
  er_status st = name ? chat_template(dir, &tmpl) : oom(im);
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_str(w, "general.architecture", im->arch);
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_str(w, "general.name", basename(name));
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_str(w, "general.source.format", "onnx (onnxruntime-genai builder)");
  struct {
    const char *k;
    int64_t v;
  } ints[] = {{"block_count", im->n_layer},         {"context_length", im->n_ctx},
              {"embedding_length", im->n_embd},     {"feed_forward_length", im->n_ff},
              {"attention.head_count", im->n_head}, {"attention.head_count_kv", im->n_kv},
              {"attention.key_length", im->head_dim}, {"attention.value_length", im->head_dim},
              {"rope.dimension_count", im->n_rot}};
  for (size_t i = 0; i < ER_ARRAY_LEN(ints) && st == ER_STATUS_OK; i++)
    st = er__gguf_writer_kv_u32(w, KEY(ints[i].k), (uint32_t)ints[i].v);
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_f32(w, KEY("attention.layer_norm_rms_epsilon"), im->eps);
  if (st == ER_STATUS_OK) st = er__gguf_writer_kv_f32(w, KEY("rope.freq_base"), (float)im->rope_base);
  if (st == ER_STATUS_OK && tmpl) st = er__gguf_writer_kv_str(w, "tokenizer.chat_template", tmpl);
#undef KEY
  free(name);
  free(tmpl);
  for (size_t i = 0; i < im->n_t && st == ER_STATUS_OK; i++) {
    const itensor *t = &im->t[i];
    int64_t dims[2] = {t->cols, t->rows};
    st = er__gguf_writer_add_tensor(w, t->name, t->rows == 1 ? 1 : 2, dims, t->type);
  }
  for (size_t i = 0; i < im->n_t && st == ER_STATUS_OK; i++) {
    st = er__gguf_writer_data(w, im->t[i].data, im->t[i].nbytes);
    free(im->t[i].data); /* the image holds it now */
    im->t[i].data = NULL;
  }
  if (st != ER_STATUS_OK) {
    er__gguf_writer_abort(w);
    return st;
  }
  return er__gguf_writer_finish_memory(w, image_out, size_out);
}

static er_status import(imp *im, const char *dir, void **image_out, size_t *size_out) {
  const er_tensor *cs, *sn;
  ER_CHECK(attention_op(im, 0, &cs, &sn));
  ER_CHECK(rope(im, cs, sn));
  if (strcmp(im->arch, "llama") == 0 && !im->interleaved) im->permute = true;
  if (strcmp(im->arch, "qwen2") == 0 && im->interleaved)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: a qwen2 model with interleaved rotary pairs", im->what);
  char p[96];
  snprintf(p, sizeof p, "/model/layers.0/mlp/gate_proj/");
  const er_node *gate;
  ER_CHECK(need_node(im, p, "MatMul|MatMulNBits", &gate));
  im->n_ff = strcmp(gate->op_type, "MatMulNBits") == 0 ? er__node_attr_int(gate, "N", 0)
             : const_input(im, gate, 1) && const_input(im, gate, 1)->rank == 2 ? const_input(im, gate, 1)->dims[1]
                                                                              : 0;
  if (im->n_ff < 1 || im->n_ff > ER_LLM_MAX_EMBD * 16)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: '%s' gives a feed-forward width of %lld", im->what, gate->name,
                     (long long)im->n_ff);
  im->t = calloc(MAX_TENSORS, sizeof *im->t);
  if (!im->t) return oom(im);
  const er_node *lm;
  ER_CHECK(embeddings(im, &lm));
  for (int i = 0; i < im->n_layer; i++) {
    if (i > 0) {
      const er_tensor *c2, *s2;
      ER_CHECK(attention_op(im, i, &c2, &s2));
      if (c2 != cs || s2 != sn)
        return er__error(ER_STATUS_UNSUPPORTED, "%s: layer %d has its own rotary caches; edgerun uses one rope",
                         im->what, i);
    }
    ER_CHECK(layer(im, i));
  }
  snprintf(p, sizeof p, "/model/layers.%d/final_norm_layernorm/", im->n_layer);
  ER_CHECK(norm(im, p, "output_norm.weight"));
  if (im->rope_factors) {
    size_t n = (size_t)im->n_rot / 2 * sizeof(float);
    uint8_t *d = malloc(n);
    if (!d) return oom(im);
    memcpy(d, im->rope_factors, n);
    ER_CHECK(add_tensor(im, "rope_freqs.weight", ER_GGML_F32, 1, im->n_rot / 2, d, n));
  }
  return write_image(im, dir, image_out, size_out);
}

bool er__llm_is_onnx_path(const char *path) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return true;
  size_t n = strlen(path);
  return n > 5 && strcmp(path + n - 5, ".onnx") == 0;
}

er_status er__llm_import_onnx(const char *path, uint64_t max_file_bytes, bool unpack, void **image_out,
                              size_t *size_out, char **tokenizer_out) {
  *image_out = NULL;
  *tokenizer_out = NULL;
  struct stat sb;
  char *dir = strdup(path);
  if (!dir) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory loading '%s'", path);
  if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    char *d = strdup(dirname(dir));
    free(dir);
    dir = d;
    if (!dir) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory loading '%s'", path);
  }
  imp im = {.what = path, .eps = -1.0f, .unpack = unpack};
  char *onnx_path = NULL;
  er_status st = read_config(&im, dir, &onnx_path);
  if (st == ER_STATUS_OK) {
    er_load_options lo;
    er_load_options_init(&lo);
    if (max_file_bytes) lo.max_file_bytes = max_file_bytes;
    st = er__model_load_file_raw(onnx_path, &lo, &im.model);
  }
  if (st == ER_STATUS_OK) {
    im.what = onnx_path;
    im.g = im.model->graph;
    st = import(&im, dir, image_out, size_out);
  }
  if (st == ER_STATUS_OK) {
    size_t n = strlen(dir) + 32;
    *tokenizer_out = malloc(n);
    if (*tokenizer_out) snprintf(*tokenizer_out, n, "%s/tokenizer.json", dir);
    else st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory loading '%s'", path);
  }
  if (st != ER_STATUS_OK && *image_out) {
    er__aligned_free(*image_out);
    *image_out = NULL;
  }
  for (size_t i = 0; im.t && i < im.n_t; i++) free(im.t[i].data);
  free(im.t);
  free(im.rope_factors);
  er_model_free(im.model);
  json_decref(im.cfg);
  free(onnx_path);
  free(dir);
  return st;
}
