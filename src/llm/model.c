/* model.c - a GGUF decoder loaded into the blueprint: hyper-parameters from
 * the architecture's keys, every weight found by name and checked against
 * them, the product that reads each weight chosen once, the tokenizer and
 * chat template built. Weights stay in the mapping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm-impl.h"

/* ======================================================================== */
/* The architectures                                                         */
/* ======================================================================== */

static const er_llm_arch archs[] = {
    /* Llama and the models converted as llama (SmolLM2, Mistral, TinyLlama):
     * the converter permutes Q and K so rotary pairs are adjacent. */
    {"llama", ER_ROPE_NORM, false},
    /* Qwen2 / Qwen2.5: biases on q, k, v; rotary over halves. */
    {"qwen2", ER_ROPE_NEOX, true},
};

const er_llm_arch *er__llm_arch_find(const char *name) {
  for (size_t i = 0; i < ER_ARRAY_LEN(archs); i++)
    if (strcmp(archs[i].name, name) == 0) return &archs[i];
  return NULL;
}

/* ======================================================================== */
/* Keys                                                                      */
/* ======================================================================== */

static char *dup_str(const er_gguf_str *s) {
  char *p = malloc((size_t)s->len + 1);
  if (!p) return NULL;
  memcpy(p, s->p, (size_t)s->len);
  p[s->len] = 0;
  return p;
}

/* "<arch>.<suffix>" into buf. */
static const char *akey(char *buf, size_t cap, const er_llm *m, const char *suffix) {
  snprintf(buf, cap, "%s.%s", m->s_arch, suffix);
  return buf;
}

/* A required positive integer key, within [1, max]. */
static er_status need_int(const er_llm *m, const char *suffix, int64_t max, int64_t *out) {
  char key[128];
  akey(key, sizeof key, m, suffix);
  er_status st = er__gguf_get_i64(m->gguf, key, out);
  if (st == ER_STATUS_NOT_FOUND)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: key '%s' is missing; a %s model needs it", er__gguf_what(m->gguf),
                     key, m->s_arch);
  ER_CHECK(st);
  if (*out < 1 || *out > max)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: %s is %lld; it must be between 1 and %lld", er__gguf_what(m->gguf),
                     key, (long long)*out, (long long)max);
  return ER_STATUS_OK;
}

/* An optional integer key; *out keeps its default when absent. */
static er_status opt_int(const er_llm *m, const char *suffix, int64_t max, int64_t *out) {
  int64_t v = *out;
  char key[128];
  akey(key, sizeof key, m, suffix);
  er_status st = er__gguf_get_i64(m->gguf, key, &v);
  if (st == ER_STATUS_NOT_FOUND) return ER_STATUS_OK;
  ER_CHECK(st);
  if (v < 1 || v > max)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: %s is %lld; it must be between 1 and %lld", er__gguf_what(m->gguf),
                     key, (long long)v, (long long)max);
  *out = v;
  return ER_STATUS_OK;
}

static er_status opt_float(const er_llm *m, const char *suffix, float lo, float hi, float *out) {
  float v = *out;
  char key[128];
  akey(key, sizeof key, m, suffix);
  er_status st = er__gguf_get_f32(m->gguf, key, &v);
  if (st == ER_STATUS_NOT_FOUND) return ER_STATUS_OK;
  ER_CHECK(st);
  if (!(v >= lo && v <= hi))
    return er__error(ER_STATUS_INVALID_MODEL, "%s: %s is %g; it must be between %g and %g", er__gguf_what(m->gguf),
                     key, (double)v, (double)lo, (double)hi);
  *out = v;
  return ER_STATUS_OK;
}

static er_status read_hparams(er_llm *m) {
  er_llm_hparams *hp = &m->hp;
  int64_t v;
  ER_CHECK(need_int(m, "block_count", ER_LLM_MAX_LAYERS, &v));
  hp->n_layer = (int)v;
  ER_CHECK(need_int(m, "embedding_length", ER_LLM_MAX_EMBD, &hp->n_embd));
  ER_CHECK(need_int(m, "feed_forward_length", (int64_t)ER_LLM_MAX_EMBD * 16, &hp->n_ff));
  ER_CHECK(need_int(m, "attention.head_count", ER_LLM_MAX_HEADS, &v));
  hp->n_head = (int)v;
  int64_t kv = hp->n_head;
  ER_CHECK(opt_int(m, "attention.head_count_kv", ER_LLM_MAX_HEADS, &kv));
  hp->n_head_kv = (int)kv;
  hp->n_ctx_train = 2048;
  ER_CHECK(opt_int(m, "context_length", ER_LLM_MAX_CTX, &hp->n_ctx_train));
  const char *what = er__gguf_what(m->gguf);
  if (hp->n_head % hp->n_head_kv != 0)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: %d attention heads do not divide into %d key/value heads", what,
                     hp->n_head, hp->n_head_kv);
  int64_t hd = hp->n_embd % hp->n_head == 0 ? hp->n_embd / hp->n_head : 0;
  ER_CHECK(opt_int(m, "attention.key_length", ER_LLM_MAX_HEAD_DIM, &hd));
  int64_t vd = hd;
  ER_CHECK(opt_int(m, "attention.value_length", ER_LLM_MAX_HEAD_DIM, &vd));
  if (hd < 2 || hd > ER_LLM_MAX_HEAD_DIM || hd % 2 != 0 || vd != hd)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: head dims %lld (keys) and %lld (values): edgerun runs equal, even head "
                     "dims of 2 to %d",
                     what, (long long)hd, (long long)vd, ER_LLM_MAX_HEAD_DIM);
  hp->head_dim = (int)hd;
  int64_t rot = hd;
  ER_CHECK(opt_int(m, "rope.dimension_count", hd, &rot));
  if (rot % 2 != 0) return er__error(ER_STATUS_INVALID_MODEL, "%s: rope.dimension_count %lld is odd", what, (long long)rot);
  hp->n_rot = (int)rot;
  hp->norm_eps = 1e-5f;
  ER_CHECK(opt_float(m, "attention.layer_norm_rms_epsilon", 0.0f, 1.0f, &hp->norm_eps));
  hp->rope_base = 10000.0f;
  ER_CHECK(opt_float(m, "rope.freq_base", 1.0f, 1e12f, &hp->rope_base));
  hp->rope_scale = 1.0f;
  char key[128];
  er_gguf_str st_type;
  if (er__gguf_get_str(m->gguf, akey(key, sizeof key, m, "rope.scaling.type"), &st_type) == ER_STATUS_OK) {
    float factor = 1.0f;
    ER_CHECK(opt_float(m, "rope.scaling.factor", 1e-3f, 1e6f, &factor));
    if (st_type.len == 6 && memcmp(st_type.p, "linear", 6) == 0) hp->rope_scale = 1.0f / factor;
    else if (!(st_type.len == 4 && memcmp(st_type.p, "none", 4) == 0) && factor != 1.0f)
      return er__error(ER_STATUS_UNSUPPORTED, "%s: rope scaling '%.*s' is not supported (linear and none are)", what,
                       (int)st_type.len, st_type.p);
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Tensors                                                                   */
/* ======================================================================== */

static const er_gguf_tensor *tensor(const er_llm *m, const char *name) { return er__gguf_find_tensor(m->gguf, name); }

/* A matrix weight [rows, cols] (GGUF dims [cols, rows]); NULL t when
 * optional and absent. */
static er_status weight(er_llm *m, const char *name, int64_t rows, int64_t cols, bool optional, er_llm_weight *w) {
  memset(w, 0, sizeof *w);
  const char *what = er__gguf_what(m->gguf);
  const er_gguf_tensor *t = tensor(m, name);
  if (!t) {
    if (optional) return ER_STATUS_OK;
    return er__error(ER_STATUS_INVALID_MODEL, "%s: tensor '%s' is missing", what, name);
  }
  if (t->dims[0] != cols || t->dims[1] != rows || t->dims[2] != 1 || t->dims[3] != 1)
    return er__error(ER_STATUS_INVALID_SHAPE, "%s: tensor '%s' is [%lld, %lld, %lld, %lld]; the hyper-parameters say "
                     "[%lld, %lld]",
                     what, name, (long long)t->dims[0], (long long)t->dims[1], (long long)t->dims[2],
                     (long long)t->dims[3], (long long)cols, (long long)rows);
  const er_qb_kernel *k = er__qb_kernel(t->type, m->force_reference);
  if (!k)
    return er__error(ER_STATUS_UNSUPPORTED, "%s: tensor '%s' has type %s, which edgerun cannot multiply (F32, F16, "
                     "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K are supported)",
                     what, name, er__ggml_type_name(t->type) ? er__ggml_type_name(t->type) : "?");
  w->t = t;
  w->data = t->data;
  w->type = t->type;
  w->rows = rows;
  w->cols = cols;
  w->row_bytes = er__qb_row_bytes(t->type, cols);
  w->kernel = k;
  w->act = k->atype;
  m->n_params += t->n_elems;
  m->weight_bytes += t->nbytes;
  return ER_STATUS_OK;
}

/* A vector of n floats (norm weights, biases): in place when F32, else a
 * float copy the model owns. */
static er_status vector(er_llm *m, const char *name, int64_t n, bool optional, const float **out) {
  *out = NULL;
  const char *what = er__gguf_what(m->gguf);
  const er_gguf_tensor *t = tensor(m, name);
  if (!t) {
    if (optional) return ER_STATUS_OK;
    return er__error(ER_STATUS_INVALID_MODEL, "%s: tensor '%s' is missing", what, name);
  }
  if (t->n_elems != (uint64_t)n || t->dims[0] != n)
    return er__error(ER_STATUS_INVALID_SHAPE, "%s: tensor '%s' holds %llu values; %lld expected", what, name,
                     (unsigned long long)t->n_elems, (long long)n);
  m->n_params += t->n_elems;
  m->weight_bytes += t->nbytes;
  if (t->type == ER_GGML_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
    *out = t->data;
    return ER_STATUS_OK;
  }
  if (!er__qb_can_dequantize(t->type))
    return er__error(ER_STATUS_UNSUPPORTED, "%s: tensor '%s' has type %s; vectors must be F32, F16 or BF16", what, name,
                     er__ggml_type_name(t->type) ? er__ggml_type_name(t->type) : "?");
  float *copy = malloc((size_t)n * sizeof *copy);
  float **list = realloc(m->owned, (m->n_owned + 1) * sizeof *list);
  if (!copy || !list) {
    free(copy);
    if (list) m->owned = list;
    return er__error(ER_STATUS_OUT_OF_MEMORY, "%s: out of memory converting tensor '%s'", what, name);
  }
  m->owned = list;
  m->owned[m->n_owned++] = copy;
  er__qb_dequantize_row(t->type, t->data, copy, n);
  *out = copy;
  return ER_STATUS_OK;
}

static er_status read_weights(er_llm *m) {
  const er_llm_hparams *hp = &m->hp;
  const char *what = er__gguf_what(m->gguf);
  const er_gguf_tensor *te = tensor(m, "token_embd.weight");
  if (!te) return er__error(ER_STATUS_INVALID_MODEL, "%s: tensor 'token_embd.weight' is missing", what);
  m->hp.n_vocab = te->dims[1];
  if (m->hp.n_vocab < 1 || m->hp.n_vocab > ER_LLM_MAX_VOCAB)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: token_embd.weight has %lld rows (the vocabulary); at most %d",
                     what, (long long)m->hp.n_vocab, ER_LLM_MAX_VOCAB);
  int64_t q_rows = (int64_t)hp->n_head * hp->head_dim, kv_rows = (int64_t)hp->n_head_kv * hp->head_dim;
  ER_CHECK(weight(m, "token_embd.weight", hp->n_vocab, hp->n_embd, false, &m->tok_embd));
  if (!er__qb_can_dequantize(m->tok_embd.type))
    return er__error(ER_STATUS_UNSUPPORTED, "%s: token_embd.weight has type %s, whose rows edgerun cannot read", what,
                     er__ggml_type_name(m->tok_embd.type));
  ER_CHECK(vector(m, "output_norm.weight", hp->n_embd, false, &m->output_norm));
  ER_CHECK(weight(m, "output.weight", hp->n_vocab, hp->n_embd, true, &m->output));
  if (!m->output.t) m->output = m->tok_embd; /* tied embeddings */
  ER_CHECK(vector(m, "rope_freqs.weight", hp->n_rot / 2, true, &m->rope_freqs));
  m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
  if (!m->layers) return er__error(ER_STATUS_OUT_OF_MEMORY, "%s: out of memory for %d layers", what, hp->n_layer);
  for (int i = 0; i < hp->n_layer; i++) {
    er_llm_layer *l = &m->layers[i];
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, i), n)
    ER_CHECK(vector(m, NAME("attn_norm.weight"), hp->n_embd, false, &l->attn_norm));
    ER_CHECK(weight(m, NAME("attn_q.weight"), q_rows, hp->n_embd, false, &l->wq));
    ER_CHECK(weight(m, NAME("attn_k.weight"), kv_rows, hp->n_embd, false, &l->wk));
    ER_CHECK(weight(m, NAME("attn_v.weight"), kv_rows, hp->n_embd, false, &l->wv));
    ER_CHECK(weight(m, NAME("attn_output.weight"), hp->n_embd, q_rows, false, &l->wo));
    bool bias_required = m->arch->qkv_bias;
    ER_CHECK(vector(m, NAME("attn_q.bias"), q_rows, !bias_required, &l->bq));
    ER_CHECK(vector(m, NAME("attn_k.bias"), kv_rows, !bias_required, &l->bk));
    ER_CHECK(vector(m, NAME("attn_v.bias"), kv_rows, !bias_required, &l->bv));
    ER_CHECK(vector(m, NAME("ffn_norm.weight"), hp->n_embd, false, &l->ffn_norm));
    ER_CHECK(weight(m, NAME("ffn_gate.weight"), hp->n_ff, hp->n_embd, false, &l->gate));
    ER_CHECK(weight(m, NAME("ffn_up.weight"), hp->n_ff, hp->n_embd, false, &l->up));
    ER_CHECK(weight(m, NAME("ffn_down.weight"), hp->n_embd, hp->n_ff, false, &l->down));
#undef NAME
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Load / free                                                               */
/* ======================================================================== */

static er_status read_strings(er_llm *m) {
  er_gguf_str s;
  struct {
    const char *key;
    char **dst;
  } keys[] = {{"general.name", &m->s_name}, {"general.license", &m->s_license}, {"tokenizer.chat_template", &m->s_template}};
  for (size_t i = 0; i < ER_ARRAY_LEN(keys); i++) {
    er_status st = er__gguf_get_str(m->gguf, keys[i].key, &s);
    if (st != ER_STATUS_OK && st != ER_STATUS_NOT_FOUND) return st;
    er_gguf_str empty = {"", 0};
    *keys[i].dst = dup_str(st == ER_STATUS_OK ? &s : &empty);
    if (!*keys[i].dst) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory reading %s", keys[i].key);
  }
  char tk[160] = "";
  er_gguf_str model = {"", 0}, pre = {"", 0};
  (void)er__gguf_get_str(m->gguf, "tokenizer.ggml.model", &model);
  (void)er__gguf_get_str(m->gguf, "tokenizer.ggml.pre", &pre);
  snprintf(tk, sizeof tk, pre.len ? "%.*s (%.*s)" : "%.*s", (int)(model.len > 60 ? 60 : model.len), model.p,
           (int)(pre.len > 60 ? 60 : pre.len), pre.p);
  if (m->tokenizer_json) snprintf(tk, sizeof tk, "tokenizer.json");
  er_gguf_str t = {tk, strlen(tk)};
  m->s_tokenizer = dup_str(&t);
  uint32_t ft = 0;
  if (er__gguf_get_u32(m->gguf, "general.file_type", &ft) == ER_STATUS_OK) m->file_type = ft;
  return m->s_tokenizer ? ER_STATUS_OK : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory reading the tokenizer name");
}

static er_status build(er_llm *m) {
  er_gguf_str arch;
  const char *what = er__gguf_what(m->gguf);
  er_status st = er__gguf_get_str(m->gguf, "general.architecture", &arch);
  if (st == ER_STATUS_NOT_FOUND)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: key 'general.architecture' is missing", what);
  ER_CHECK(st);
  m->s_arch = dup_str(&arch);
  if (!m->s_arch) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory loading %s", what);
  if (memchr(arch.p, 0, (size_t)arch.len) || !(m->arch = er__llm_arch_find(m->s_arch))) {
    char shown[64];
    snprintf(shown, sizeof shown, "%.*s", (int)(arch.len > 40 ? 40 : arch.len), arch.p);
    for (char *c = shown; *c; c++)
      if (*c < 32 || *c > 126) *c = '?';
    return er__error(ER_STATUS_UNSUPPORTED, "%s: architecture '%s' is not supported (llama and qwen2 are)", what, shown);
  }
  ER_CHECK(read_strings(m));
  ER_CHECK(read_hparams(m));
  ER_CHECK(read_weights(m));
  if (m->tokenizer_json) ER_CHECK(er__tok_create_hf_json(m->tokenizer_json, &m->tok));
  else ER_CHECK(er__tok_create_gguf(m->gguf, &m->tok));
  if (er__tok_vocab_size(m->tok) > (size_t)m->hp.n_vocab)
    return er__error(ER_STATUS_INVALID_MODEL, "%s: the tokenizer has %zu tokens but the embedding only %lld rows", what,
                     er__tok_vocab_size(m->tok), (long long)m->hp.n_vocab);
  /* A template the interpreter cannot parse is not fatal: the built-in
   * format its markers name, or plain prompts only. */
  if (m->s_template[0] && er__chat_parse(m->s_template, strlen(m->s_template), ER_CHAT_JINJA, &m->chat) != ER_STATUS_OK) {
    m->chat = NULL;
    er__error_clear();
  }
  return ER_STATUS_OK;
}

void er_llm_load_options_init(er_llm_load_options *o) { memset(o, 0, sizeof *o); }

er_status er_llm_load(const char *path, const er_llm_load_options *opts, er_llm **llm_out) {
  if (!path || !llm_out) return er__error(ER_STATUS_INVALID_ARGUMENT, "path and llm_out must not be NULL");
  er_llm_load_options o;
  er_llm_load_options_init(&o);
  if (opts) o = *opts;
  er_llm *m = calloc(1, sizeof *m);
  if (!m) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory loading '%s'", path);
  m->force_reference = o.force_reference;
  er_status st;
  if (er__llm_is_onnx_path(path)) {
    size_t size = 0;
    st = er__llm_import_onnx(path, o.max_file_bytes, o.unpack_weights, &m->image, &size, &m->tokenizer_json);
    if (st == ER_STATUS_OK) st = er__gguf_open_buffer(m->image, size, path, &m->gguf);
  } else {
    st = er__gguf_open(path, o.max_file_bytes, &m->gguf);
  }
  if (st == ER_STATUS_OK) st = build(m);
  if (st != ER_STATUS_OK) {
    er_llm_free(m);
    return st;
  }
  *llm_out = m;
  return ER_STATUS_OK;
}

void er_llm_free(er_llm *m) {
  if (!m) return;
  er__chat_free(m->chat);
  er__tok_free(m->tok);
  for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
  free(m->owned);
  free(m->layers);
  free(m->s_arch);
  free(m->s_name);
  free(m->s_license);
  free(m->s_template);
  free(m->s_tokenizer);
  er__gguf_close(m->gguf);
  er__aligned_free(m->image);
  free(m->tokenizer_json);
  free(m);
}

/* ======================================================================== */
/* Inspection                                                                */
/* ======================================================================== */

void er_llm_info_get(const er_llm *m, er_llm_info *o) {
  memset(o, 0, sizeof *o);
  o->architecture = m->s_arch;
  o->name = m->s_name;
  o->license = m->s_license;
  o->chat_template = m->s_template;
  o->tokenizer = m->s_tokenizer;
  o->n_layers = m->hp.n_layer;
  o->n_heads = m->hp.n_head;
  o->n_kv_heads = m->hp.n_head_kv;
  o->head_dim = m->hp.head_dim;
  o->n_embd = m->hp.n_embd;
  o->n_ff = m->hp.n_ff;
  o->n_vocab = m->hp.n_vocab;
  o->n_ctx_train = m->hp.n_ctx_train;
  o->rope_freq_base = m->hp.rope_base;
  o->norm_eps = m->hp.norm_eps;
  o->n_params = m->n_params;
  o->weight_bytes = m->weight_bytes;
  o->file_type = m->file_type;
  o->bos = er__tok_bos(m->tok);
  o->eos = er__tok_eos(m->tok);
  o->eot = er__tok_eot(m->tok);
}

size_t er_llm_tensor_count(const er_llm *m) { return er__gguf_tensor_count(m->gguf); }

er_status er_llm_tensor_info(const er_llm *m, size_t i, const char **name_out, const char **type_out,
                             uint64_t *elements_out, uint64_t *bytes_out) {
  const er_gguf_tensor *t = er__gguf_tensor_at(m->gguf, i);
  if (!t) return er__error(ER_STATUS_OUT_OF_RANGE, "tensor %zu: the model has %zu", i, er__gguf_tensor_count(m->gguf));
  if (name_out) *name_out = t->name_z;
  if (type_out) *type_out = er__ggml_type_name(t->type);
  if (elements_out) *elements_out = t->n_elems;
  if (bytes_out) *bytes_out = t->nbytes;
  return ER_STATUS_OK;
}

size_t er_llm_metadata_count(const er_llm *m) { return er__gguf_kv_count(m->gguf); }

er_status er_llm_metadata(const er_llm *m, size_t i, const char **key_out, char *buf, size_t cap) {
  const er_gguf_kv *kv = er__gguf_kv_at(m->gguf, i);
  if (!kv) return er__error(ER_STATUS_OUT_OF_RANGE, "metadata %zu: the model has %zu", i, er__gguf_kv_count(m->gguf));
  /* Keys are not NUL-terminated in the file: a static copy per call would
   * not be thread-safe, so keys are shown through the buffer's start. */
  static _Thread_local char key[256];
  snprintf(key, sizeof key, "%.*s", (int)(kv->key.len > 255 ? 255 : kv->key.len), kv->key.p);
  if (key_out) *key_out = key;
  if (!buf || cap == 0) return ER_STATUS_OK;
  buf[0] = 0;
  if (kv->elem_type == ER_GGUF_STRING) {
    if (kv->type == ER_GGUF_ARRAY) snprintf(buf, cap, "[%llu strings]", (unsigned long long)kv->n);
    else snprintf(buf, cap, "%.*s", (int)(kv->strs[0].len > cap ? cap : kv->strs[0].len), kv->strs[0].p);
  } else if (kv->type == ER_GGUF_ARRAY) {
    snprintf(buf, cap, "[%llu %s]", (unsigned long long)kv->n, er__gguf_vtype_name(kv->elem_type));
  } else if (kv->type == ER_GGUF_FLOAT32 || kv->type == ER_GGUF_FLOAT64) {
    snprintf(buf, cap, "%g", er__gguf_kv_f64(kv, 0));
  } else if (kv->type == ER_GGUF_BOOL) {
    snprintf(buf, cap, "%s", kv->data[0] ? "true" : "false");
  } else {
    snprintf(buf, cap, "%lld", (long long)er__gguf_kv_i64(kv, 0));
  }
  return ER_STATUS_OK;
}
