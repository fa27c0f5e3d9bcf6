/* llm-impl.h - the LLM engine's internal structs: the blueprint (hyper-
 * parameters and weights of a decoder), the KV cache, the run state of a
 * context. llama2.c's three structs, grown up: er_llm is the Transformer's
 * config and weights plus its tokenizer; er_llm_context is the run state
 * (KV cache and the buffers for a wave of activations); er_llm_sampler is
 * the sampler. */
#ifndef ER_LLM_IMPL_H
#define ER_LLM_IMPL_H

#include <pthread.h>

#include "kernels/kernel.h"
#include "kernels/qblock.h"
#include "gguf/gguf.h"
#include "llm/chat.h"
#include "llm/tokenizer.h"
#include "llm/llm-observe.h"

#define ER_LLM_MAX_LAYERS 512
#define ER_LLM_MAX_HEADS 1024
#define ER_LLM_MAX_HEAD_DIM 512
#define ER_LLM_MAX_EMBD 65536
#define ER_LLM_MAX_CTX (1 << 20)      /* positions per sequence */
#define ER_LLM_MAX_SEQ 256            /* sequences per context */
#define ER_LLM_MAX_BATCH 4096         /* tokens per forward pass */
#define ER_LLM_MAX_VOCAB (1 << 20)

/* How rotary embeddings pair dimensions. */
typedef enum er_rope_kind {
  ER_ROPE_NORM = 0,           /* adjacent pairs (x[2i], x[2i+1]): llama as converted to GGUF */
  ER_ROPE_NEOX,               /* halves (x[i], x[i + d/2]): qwen2, GPT-NeoX */
} er_rope_kind;

/* An architecture: its GGUF key prefix and what its layers have. An
 * architecture is a row of this table, not a fork of the forward pass. */
typedef struct er_llm_arch {
  const char *name;           /* general.architecture */
  er_rope_kind rope;
  bool qkv_bias;              /* Qwen2: biases on q, k and v */
} er_llm_arch;

/* A weight: its tensor in the file and the product that reads it. */
typedef struct er_llm_weight {
  const er_gguf_tensor *t;    /* NULL when absent (optional tensors) */
  const void *data;           /* [rows][row_bytes] in the mapping */
  uint32_t type;              /* er_ggml_type */
  int64_t rows, cols;         /* the matrix is [rows, cols]: cols = k, contiguous */
  size_t row_bytes;
  const er_qb_kernel *kernel; /* the product for this type on this CPU */
  uint32_t act;               /* the activation format the product reads */
} er_llm_weight;

/* One transformer block's weights. Shapes in the [rows, cols] of the
 * products y = W x (GGUF lists them as [cols, rows]). */
typedef struct er_llm_layer {
  const float *attn_norm;     /* [n_embd] */
  er_llm_weight wq;           /* [n_head * head_dim, n_embd] */
  er_llm_weight wk, wv;       /* [n_kv_head * head_dim, n_embd] */
  const float *bq, *bk, *bv;  /* [rows] or NULL */
  er_llm_weight wo;           /* [n_embd, n_head * head_dim] */
  const float *ffn_norm;      /* [n_embd] */
  er_llm_weight gate, up;     /* [n_ff, n_embd] */
  er_llm_weight down;         /* [n_embd, n_ff] */
} er_llm_layer;

typedef struct er_llm_hparams {
  int n_layer, n_head, n_head_kv, head_dim;
  int64_t n_embd, n_ff, n_vocab, n_ctx_train;
  float norm_eps, rope_base, rope_scale; /* rope_scale: positions are multiplied by it (1 = none) */
  int n_rot;                  /* rotated dims of a head (= head_dim unless the file says less) */
} er_llm_hparams;

struct er_llm {
  er_gguf *gguf;
  void *image;                /* an imported model's GGUF image (onnx-import.c), or NULL */
  char *tokenizer_json;       /* its tokenizer.json, or NULL (the GGUF's tokenizer) */
  const er_llm_arch *arch;
  er_llm_hparams hp;
  er_llm_weight tok_embd;     /* [n_vocab, n_embd]: rows are token embeddings */
  const float *output_norm;   /* [n_embd] */
  er_llm_weight output;       /* [n_vocab, n_embd]; tok_embd when tied */
  const float *rope_freqs;    /* [n_rot / 2] frequency divisors (Llama 3.1) or NULL */
  er_llm_layer *layers;       /* [n_layer] */
  er_tokenizer *tok;
  er_chat_template *chat;     /* NULL when the model has no usable template */
  bool force_reference;
  /* Float copies of small F16/BF16 vectors (norms, biases) the file stores
   * narrow: owned here. */
  float **owned;
  size_t n_owned;
  /* Strings for er_llm_info, NUL-terminated copies. */
  char *s_arch, *s_name, *s_license, *s_template, *s_tokenizer;
  uint64_t n_params, weight_bytes;
  uint32_t file_type;
};

/* The KV cache: for each layer, sequence and position, a K and a V row of
 * n_head_kv * head_dim values, as fp16 or as Q8_0 blocks (32 values, one
 * fp16 scale). Rows of one (layer, sequence) are contiguous, so attention
 * reads each sequence's keys as one stream. */
typedef struct er_kv_cache {
  er_llm_kv_type type;
  int64_t n_ctx;
  int n_seq;
  size_t row_bytes;           /* one position's K (or V) row of one layer */
  uint8_t *k, *v;             /* [n_layer][n_seq][n_ctx][row_bytes] */
  int64_t *len;               /* [n_seq] positions held */
  uint64_t bytes;
} er_kv_cache;

struct er_llm_context {
  const er_llm *llm;
  pthread_mutex_t lock;
  er_thread_pool *pool;
  int threads, n_batch;
  er_kv_cache kv;
  /* Buffers for a wave of up to n_batch tokens (floats unless said). */
  float *x;                   /* [n_batch][n_embd] the residual stream */
  float *h;                   /* [n_batch][max(n_embd, n_ff)] normed input / FFN product */
  float *q;                   /* [n_batch][n_head * head_dim] */
  float *kk, *vv;             /* [n_batch][n_head_kv * head_dim] this wave's keys and values */
  float *att;                 /* [n_batch][n_head * head_dim] attention output */
  float *g, *u;               /* [n_batch][n_ff] gate and up */
  float *scores;              /* [threads][n_ctx] attention scores per worker */
  uint8_t *xq;                /* [n_batch][act row bytes] the quantized activations */
  size_t xq_row_bytes;        /* bytes of one quantized row (the largest format) */
  float *logits;              /* [n_batch][n_vocab] of the flagged entries */
  size_t n_logits;
  int32_t *pos, *seq;         /* [n_batch] each wave entry's position and sequence */
  float *rope;                /* [2][n_batch][n_rot / 2] cos, then sin, per entry */
  uint64_t scratch_bytes;
  char kernels[512];
  bool fp16;                  /* activations rounded to fp16 (fp16_activations) */
  er_llm_observer observe;    /* NULL, or called with every product's input (llm-observe.h) */
  void *observe_user;
};

/* ---- model.c -------------------------------------------------------------- */

const er_llm_arch *er__llm_arch_find(const char *name);

/* ---- onnx-import.c ------------------------------------------------------- */

/* Whether `path` names an ONNX decoder (a folder, or a .onnx file). */
bool er__llm_is_onnx_path(const char *path);
/* An ONNX decoder folder (genai_config.json, model.onnx, tokenizer.json),
 * or its model file, as a GGUF image in memory (free with
 * er__aligned_free) and the path of its tokenizer.json (free). */
er_status er__llm_import_onnx(const char *path, uint64_t max_file_bytes, bool unpack, void **image_out,
                              size_t *size_out, char **tokenizer_out);

/* ---- kv.c ------------------------------------------------------------------- */

er_status er__kv_init(er_kv_cache *kv, const er_llm_hparams *hp, er_llm_kv_type type, int64_t n_ctx, int n_seq);
void er__kv_free(er_kv_cache *kv);
/* Where position `pos` of sequence `seq` in layer `layer` lives. */
static inline uint8_t *er__kv_k(const er_kv_cache *kv, int layer, int seq, int64_t pos) {
  return kv->k + (((size_t)layer * (size_t)kv->n_seq + (size_t)seq) * (size_t)kv->n_ctx + (size_t)pos) * kv->row_bytes;
}
static inline uint8_t *er__kv_v(const er_kv_cache *kv, int layer, int seq, int64_t pos) {
  return kv->v + (((size_t)layer * (size_t)kv->n_seq + (size_t)seq) * (size_t)kv->n_ctx + (size_t)pos) * kv->row_bytes;
}
/* Stores n floats as one cache row (fp16 or Q8_0). */
void er__kv_store(const er_kv_cache *kv, const float *src, int64_t n, uint8_t *row);

/* ---- forward.c -------------------------------------------------------------- */

/* One forward pass over the wave of `n` entries (tokens[i] at position
 * pos[i] of sequence seq[i], their K/V already allowed for by the
 * caller's length checks). want[i]: compute entry i's logits, in order,
 * into ctx->logits. */
er_status er__llm_forward(er_llm_context *ctx, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                          const bool *want, size_t n);

#endif /* ER_LLM_IMPL_H */
