/* edgerun.h - the public C API of libedgerun.
 *
 * edgerun loads ONNX models, validates them, and runs them on the CPU or on an
 * accelerator backend. This header is the whole public surface of the library.
 *
 * Conventions (read these once, they hold for every function below):
 *  - Every fallible call returns er_status and writes its result through an
 *    `*_out` parameter, which is left untouched on failure.
 *  - On failure the calling thread's last-error text (er_last_error()) names
 *    the offending value and the rule it broke, e.g.
 *    "Conv 'conv_3': kernel_shape [3,3] does not match weight dims [5,5]".
 *  - Ownership is stated on every pointer parameter: "borrowed" means the
 *    library reads it only during the call; "must outlive X" means the library
 *    keeps the pointer; "owned by the caller" means the caller frees it with
 *    the matching _free function.
 *  - Every _free(NULL) is a no-op.
 */
#ifndef EDGERUN_H
#define EDGERUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define ER_API __declspec(dllexport)
#else
#define ER_API __attribute__((visibility("default")))
#endif

#define ER_VERSION_MAJOR 0
#define ER_VERSION_MINOR 1
#define ER_VERSION_PATCH 0

/* Returns the library version as "MAJOR.MINOR.PATCH". Static string. */
ER_API const char *er_version(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

/* One list generates the enum, er_status_name() and er_status_str(). */
#define ER_STATUS_LIST(X)                                                      \
  X(OK, "success")                                                             \
  X(INVALID_ARGUMENT, "invalid argument to an API call")                       \
  X(IO, "file could not be opened, read or written")                          \
  X(OUT_OF_MEMORY, "out of memory")                                            \
  X(TRUNCATED, "data ends before a field it declares")                        \
  X(MALFORMED, "malformed protobuf encoding")                                 \
  X(LIMIT, "a size or count exceeds a configured limit")                      \
  X(INVALID_MODEL, "model structure is invalid")                              \
  X(INVALID_GRAPH, "graph is invalid (names, cycles, arity)")                 \
  X(INVALID_ATTRIBUTE, "node attribute is missing or out of range")           \
  X(INVALID_SHAPE, "tensor shape is invalid or does not match")               \
  X(INVALID_TENSOR, "tensor data is inconsistent with its type or shape")    \
  X(TYPE_MISMATCH, "tensor element type does not match")                      \
  X(UNSAFE_PATH, "external data path leaves the model folder")                \
  X(EXTERNAL_DATA, "external data reference is invalid")                     \
  X(UNSUPPORTED, "unsupported version, operator, domain or type")             \
  X(OUT_OF_RANGE, "index or value out of range at run time")                  \
  X(NOT_FOUND, "named input, output or item not found")                       \
  X(NO_FALLBACK, "node needs the CPU but fallback is disabled")                \
  X(BACKEND, "backend or device failure")                                     \
  X(INTERNAL, "internal error (a bug in edgerun)")

typedef enum er_status {
#define ER__STATUS_ENUM(name, text) ER_STATUS_##name,
  ER_STATUS_LIST(ER__STATUS_ENUM)
#undef ER__STATUS_ENUM
  ER_STATUS_COUNT_
} er_status;

/* "OK", "TRUNCATED", ... Static string; "UNKNOWN" for values out of range. */
ER_API const char *er_status_name(er_status status);
/* A one-line description of the status code. Static string. */
ER_API const char *er_status_str(er_status status);
/* The detailed message of the last failure on the calling thread. The text is
 * owned by the library and valid until the next edgerun call on this thread. */
ER_API const char *er_last_error(void);

/* ------------------------------------------------------------------------ */
/* Element types (values equal ONNX TensorProto.DataType)                    */
/* ------------------------------------------------------------------------ */

typedef enum er_dtype {
  ER_DTYPE_UNDEFINED = 0,
  ER_DTYPE_FLOAT = 1,
  ER_DTYPE_UINT8 = 2,
  ER_DTYPE_INT8 = 3,
  ER_DTYPE_UINT16 = 4,
  ER_DTYPE_INT16 = 5,
  ER_DTYPE_INT32 = 6,
  ER_DTYPE_INT64 = 7,
  ER_DTYPE_STRING = 8,
  ER_DTYPE_BOOL = 9,
  ER_DTYPE_FLOAT16 = 10,
  ER_DTYPE_DOUBLE = 11,
  ER_DTYPE_UINT32 = 12,
  ER_DTYPE_UINT64 = 13,
  ER_DTYPE_COMPLEX64 = 14,
  ER_DTYPE_COMPLEX128 = 15,
  ER_DTYPE_BFLOAT16 = 16,
  ER_DTYPE_FLOAT8E4M3FN = 17,
  ER_DTYPE_FLOAT8E4M3FNUZ = 18,
  ER_DTYPE_FLOAT8E5M2 = 19,
  ER_DTYPE_FLOAT8E5M2FNUZ = 20,
  ER_DTYPE_UINT4 = 21,
  ER_DTYPE_INT4 = 22,
  ER_DTYPE_FLOAT4E2M1 = 23
} er_dtype;

/* "float32", "int8", ... Static string; "undefined" when unknown. */
ER_API const char *er_dtype_name(er_dtype dtype);
/* Bytes per element; 0 for types edgerun cannot hold in a tensor. Sub-byte
 * types (int4, uint4) report 1: edgerun stores them one element per byte. */
ER_API size_t er_dtype_size(er_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Limits                                                                    */
/* ------------------------------------------------------------------------ */

/* The largest rank of any tensor edgerun holds. */
#define ER_MAX_RANK 8

/* Caps on what a model may declare. Every cap is checked before the memory it
 * guards is allocated, and the error message names the cap. Zero in any field
 * of a caller's er_load_options means "use the default". */
typedef struct er_load_options {
  uint64_t max_file_bytes;     /* model file size; default 4 GiB */
  uint64_t max_tensor_bytes;   /* one tensor's data; default 2 GiB */
  uint64_t max_total_bytes;    /* all initializers together; default 8 GiB */
  uint32_t max_nodes;          /* nodes in one graph; default 1,000,000 */
  uint32_t max_nesting;        /* subgraph and message nesting; default 32 */
  int optimize;                /* graph rewrites: 2 (default) = constant
                                  folding and dead nodes; BatchNorm folding,
                                  Identity/Dropout removal and Transpose/
                                  Reshape chains at load; and, in sessions
                                  that run every node on the CPU, fusion into
                                  edgerun's fused ops on the session's copy.
                                  1 = constant folding and dead nodes only
                                  (the operators as written, e.g. to check an
                                  NPU profile). -1 = exactly as written. */
} er_load_options;

/* Fills *opts with the defaults. */
ER_API void er_load_options_init(er_load_options *opts);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct er_tensor er_tensor;

/* Creates a tensor of the given type and shape with zeroed data owned by the
 * tensor. `dims` is borrowed; `rank` 0 means a scalar (one element). The new
 * tensor is owned by the caller (er_tensor_free). */
ER_API er_status er_tensor_create(er_dtype dtype, int rank, const int64_t *dims,
                                  er_tensor **tensor_out);

/* Creates a tensor that refers to caller memory without copying. `data` must
 * hold nbytes = product(dims) * er_dtype_size(dtype) bytes and must outlive the
 * tensor; it is read (input) or written (output) only during calls that take
 * the tensor. `dims` is borrowed. The tensor is owned by the caller. */
ER_API er_status er_tensor_wrap(er_dtype dtype, int rank, const int64_t *dims,
                                void *data, size_t nbytes,
                                er_tensor **tensor_out);

/* Frees the tensor and, unless it wraps caller memory, its data. */
ER_API void er_tensor_free(er_tensor *tensor);

ER_API er_dtype er_tensor_dtype(const er_tensor *tensor);
ER_API int er_tensor_rank(const er_tensor *tensor);
/* The dims array (rank entries), owned by the tensor. */
ER_API const int64_t *er_tensor_dims(const er_tensor *tensor);
ER_API int64_t er_tensor_count(const er_tensor *tensor);  /* elements */
ER_API size_t er_tensor_nbytes(const er_tensor *tensor);  /* bytes */
/* The element data, owned by the tensor (or by the caller for wrapped data). */
ER_API void *er_tensor_data(er_tensor *tensor);
ER_API const void *er_tensor_cdata(const er_tensor *tensor);

/* ------------------------------------------------------------------------ */
/* Models                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct er_model er_model;

/* Loads an ONNX model from a file, memory-mapped. External data is resolved
 * relative to the file's folder and may never leave it. `path` and `opts`
 * (NULL = defaults) are borrowed. The model is owned by the caller. */
ER_API er_status er_model_load_file(const char *path,
                                    const er_load_options *opts,
                                    er_model **model_out);

/* Loads an ONNX model from memory. `data` is copied. `base_dir` (may be NULL,
 * then external data is refused) is the folder external data is resolved in.
 * All pointers are borrowed. The model is owned by the caller. */
ER_API er_status er_model_load_buffer(const void *data, size_t size,
                                      const char *base_dir,
                                      const er_load_options *opts,
                                      er_model **model_out);

/* Frees the model. Every session created from it MUST be freed first. */
ER_API void er_model_free(er_model *model);

/* Description of one graph input or output. All pointers are owned by the
 * model and valid until er_model_free. A dim of -1 is unknown; where the model
 * names it, dim_params[i] holds the symbolic name (else NULL). rank is -1 when
 * the model does not declare a shape at all. */
typedef struct er_value_info {
  const char *name;
  er_dtype dtype;
  int rank;
  const int64_t *dims;            /* [rank] */
  const char *const *dim_params;  /* [rank], entries may be NULL */
} er_value_info;

ER_API size_t er_model_input_count(const er_model *model);
ER_API size_t er_model_output_count(const er_model *model);
ER_API er_status er_model_input_info(const er_model *model, size_t index,
                                     er_value_info *info_out);
ER_API er_status er_model_output_info(const er_model *model, size_t index,
                                      er_value_info *info_out);

/* Model-level facts for inspection. Strings are owned by the model. */
typedef struct er_model_summary {
  int64_t ir_version;
  int64_t opset;               /* default-domain opset */
  const char *producer_name;
  const char *producer_version;
  const char *graph_name;
  size_t node_count;           /* top-level graph, after load-time folding */
  size_t initializer_count;
  uint64_t parameter_count;    /* elements in all initializers */
  uint64_t weight_bytes;       /* bytes in all initializers */
  size_t metadata_count;       /* entries in metadata_props */
} er_model_summary;

ER_API void er_model_summary_get(const er_model *model,
                                 er_model_summary *summary_out);
/* The index-th metadata_props entry. Strings owned by the model. */
ER_API er_status er_model_metadata(const er_model *model, size_t index,
                                   const char **key_out,
                                   const char **value_out);
/* Node `index` of the top-level graph: op type and name (owned by the
 * model; the name may be ""). */
ER_API er_status er_model_node(const er_model *model, size_t index,
                               const char **op_type_out,
                               const char **name_out);

/* Freezes symbolic input dims: every dim of a graph input whose dim_param
 * is names[i] becomes values[i] (> 0), then value shapes are re-inferred.
 * NOT_FOUND names a dim no input has. The model MUST have no sessions yet.
 * Both arrays are borrowed. */
ER_API er_status er_model_fix_dims(er_model *model, const char *const *names, const int64_t *values,
                                   size_t n);

/* Writes the model as an ONNX file (its graph as loaded and rewritten,
 * weights inline), through a temporary file and a rename, so a failure
 * never leaves a partial file. `path` is borrowed. */
ER_API er_status er_model_save(const er_model *model, const char *path);

/* ------------------------------------------------------------------------ */
/* Sessions                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct er_session er_session;

typedef struct er_session_options {
  int threads;                 /* worker threads per run; 0 = 1 */
  const char *const *backends; /* preferred backends in order, e.g. {"cpu"};
                                  NULL = CPU only. Borrowed for the create. */
  size_t backend_count;
  bool allow_fallback;         /* true (default): nodes an accelerator cannot
                                  run go to the CPU; false: that is an error */
  bool force_reference;        /* true: use the reference kernels only */
  bool profile;                /* true: time every node (er_session_profile) */
  bool keep_denormals;         /* false (default): runs flush subnormal floats
                                  (below 1.18e-38) to zero, as TensorFlow's
                                  runtime does, on x86 and AArch64: an
                                  operation on one costs ~100 cycles there.
                                  true: keep them (IEEE arithmetic, as
                                  force_reference always does). */
} er_session_options;

ER_API void er_session_options_init(er_session_options *opts);

/* Compiles the model for execution: picks backends, checks every node, plans.
 * `model` MUST outlive the session. `opts` (NULL = defaults) is borrowed.
 * The session is owned by the caller (er_session_free). */
ER_API er_status er_session_create(const er_model *model,
                                   const er_session_options *opts,
                                   er_session **session_out);
ER_API void er_session_free(er_session *session);

/* A named tensor for er_session_run. Both pointers are borrowed. */
typedef struct er_named_tensor {
  const char *name;
  const er_tensor *tensor;
} er_named_tensor;

/* Runs the model once. `inputs` names every graph input that has no
 * initializer (inputs with initializers may be overridden by name).
 * `output_names` (n_outputs entries; NULL = all graph outputs in order, then
 * n_outputs must equal er_model_output_count) selects outputs. On success
 * outputs_out[i] receives a new tensor owned by the caller.
 *
 * Safe to call from several threads at once on the same session; each call
 * uses its own working memory. Deterministic for a given backend and thread
 * count. */
ER_API er_status er_session_run(er_session *session,
                                const er_named_tensor *inputs, size_t n_inputs,
                                const char *const *output_names,
                                size_t n_outputs, er_tensor **outputs_out);

/* Like er_session_run, but writes the outputs into caller tensors
 * (borrowed; each must already have the output's type and shape, e.g. from
 * a previous run or from er_model_output_info for static models). With
 * static shapes, a run then allocates no memory at all: intermediates live
 * in the session's planned arena, reused from run to run. */
ER_API er_status er_session_run_into(er_session *session, const er_named_tensor *inputs,
                                     size_t n_inputs, const char *const *output_names,
                                     size_t n_outputs, er_tensor *const *outputs);

/* What a session compiled into. Strings are owned by the session. */
typedef struct er_session_stats {
  size_t node_count;           /* nodes of the main graph after optimization */
  size_t optimized_nodes;      /* nodes running an optimized kernel */
  uint64_t arena_bytes;        /* peak bytes of the intermediate-tensor plan
                                  (0 until the first run for dynamic shapes) */
  int threads;
} er_session_stats;

ER_API void er_session_stats_get(const er_session *session, er_session_stats *stats_out);

/* Node `index` (< stats.node_count) of the graph the session runs, after
 * its own fusions: op type and name, owned by the session. */
ER_API er_status er_session_node(const er_session *session, size_t index, const char **op_type_out,
                                 const char **name_out);

/* Per-node timing, collected when the session was created with
 * opts.profile. total_us and count accumulate over runs; start_us/dur_us
 * describe the node in the most recent run (start relative to the run's
 * start), for trace files. Strings are owned by the session. */
typedef struct er_node_timing {
  const char *name;
  const char *op_type;
  const char *kernel;          /* optimized kernel name, or "reference" */
  double total_us;
  uint64_t count;
  double start_us, dur_us;
} er_node_timing;

/* Copies up to `cap` node timings (graph order) into out; *n_out receives
 * the number of nodes. INVALID_ARGUMENT when profiling was not enabled. */
ER_API er_status er_session_profile(er_session *session, er_node_timing *out, size_t cap,
                                    size_t *n_out);

/* ------------------------------------------------------------------------ */
/* Tensor files (.npy and ONNX TensorProto .pb)                              */
/* ------------------------------------------------------------------------ */

/* Reads a tensor from a .npy file or a serialized ONNX TensorProto (.pb);
 * the format is chosen by content. `path` is borrowed. If name_out is not
 * NULL it receives the TensorProto's name (or NULL), owned by the caller
 * (free()). The tensor is owned by the caller. */
ER_API er_status er_tensor_read_file(const char *path, er_tensor **tensor_out,
                                     char **name_out);
/* Writes a tensor as .npy (when path ends in ".npy") or as a TensorProto
 * (otherwise) with the given name (may be NULL). Written to a temporary file
 * and renamed, so a failure never leaves a partial file. */
ER_API er_status er_tensor_write_file(const char *path, const er_tensor *tensor,
                                      const char *name);

/* ------------------------------------------------------------------------ */
/* LLMs: decoder language models (GGUF)                                      */
/* ------------------------------------------------------------------------ */

/* A loaded decoder LLM: hyper-parameters, weights (memory-mapped, used in
 * place), tokenizer and chat template. Read-only once loaded: any number
 * of contexts, on any threads, may share one. */
typedef struct er_llm er_llm;

typedef struct er_llm_load_options {
  uint64_t max_file_bytes;     /* 0 = ER_DEFAULT (4 GiB) */
  bool force_reference;        /* plain C kernels only (the numerical truth) */
  bool unpack_weights;         /* ONNX decoders: quantized weights unpacked to F32 (their exact
                                  values, at 8x the memory), not repacked into GGUF blocks */
} er_llm_load_options;

ER_API void er_llm_load_options_init(er_llm_load_options *opts);

/* Loads a GGUF file (architectures llama and qwen2; tensor types F32, F16,
 * BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), or an
 * ONNX decoder as onnxruntime-genai's model builder writes it: its folder
 * (genai_config.json, model.onnx, tokenizer.json) or its .onnx file, whose
 * weights are converted at load (docs/llm.md). Every count, offset and shape
 * is checked; a type or architecture edgerun cannot run is UNSUPPORTED
 * naming it. `path` and `opts` (NULL = defaults) are borrowed.
 * The model is owned by the caller (er_llm_free). */
ER_API er_status er_llm_load(const char *path, const er_llm_load_options *opts, er_llm **llm_out);
/* Frees the model. Every context created from it MUST be freed first. */
ER_API void er_llm_free(er_llm *llm);

/* What the model is. Strings are owned by the model ("" when absent). */
typedef struct er_llm_info {
  const char *architecture;    /* "llama", "qwen2" */
  const char *name;            /* general.name */
  const char *license;         /* general.license */
  const char *chat_template;   /* tokenizer.chat_template source */
  const char *tokenizer;       /* "gpt2 (smollm)", "llama", ... */
  int n_layers, n_heads, n_kv_heads, head_dim;
  int64_t n_embd, n_ff, n_vocab, n_ctx_train;
  float rope_freq_base, norm_eps;
  uint64_t n_params;           /* weight elements */
  uint64_t weight_bytes;       /* bytes of all weights as stored */
  uint32_t file_type;          /* general.file_type (llama_ftype), 0 when absent */
  int32_t bos, eos, eot;       /* special ids, -1 = none */
} er_llm_info;

ER_API void er_llm_info_get(const er_llm *llm, er_llm_info *info_out);
/* Tensor `index` of the model (< er_llm_tensor_count): name, ggml type
 * name ("Q4_1"), elements and bytes. Strings owned by the model. */
ER_API size_t er_llm_tensor_count(const er_llm *llm);
ER_API er_status er_llm_tensor_info(const er_llm *llm, size_t index, const char **name_out,
                                    const char **type_out, uint64_t *elements_out, uint64_t *bytes_out);
/* Metadata entry `index` (< er_llm_metadata_count) rendered as text (arrays
 * summarised). *key_out owned by the model; the value is written to buf. */
ER_API size_t er_llm_metadata_count(const er_llm *llm);
ER_API er_status er_llm_metadata(const er_llm *llm, size_t index, const char **key_out, char *buf,
                                 size_t cap);

/* Text to token ids. `text` (len bytes, UTF-8) is borrowed. add_special:
 * BOS/EOS as the model says; parse_special: special-token texts in the
 * text become their tokens. Writes at most `cap` ids and sets *n_out to the
 * full count: LIMIT when it exceeds cap (call with cap = 0 to size). */
ER_API er_status er_llm_tokenize(const er_llm *llm, const char *text, size_t len, bool add_special,
                                 bool parse_special, int32_t *ids, size_t cap, size_t *n_out);
/* Token ids to text (special: render control tokens). Same buffer rule,
 * in bytes. OUT_OF_RANGE names an id outside the vocabulary. */
ER_API er_status er_llm_detokenize(const er_llm *llm, const int32_t *ids, size_t n, bool special, char *buf,
                                   size_t cap, size_t *len_out);
/* The bytes of one token (may be part of a UTF-8 sequence). */
ER_API er_status er_llm_token_piece(const er_llm *llm, int32_t id, bool special, char *buf, size_t cap,
                                    size_t *len_out);
/* Whether generation ends at this token (EOS, end of turn). */
ER_API bool er_llm_token_is_eog(const er_llm *llm, int32_t id);

/* One chat message; both strings borrowed. */
typedef struct er_llm_message {
  const char *role;            /* "system", "user", "assistant" */
  const char *content;
} er_llm_message;

/* The prompt for a conversation in the model's own chat template (or the
 * built-in format its markers name). *text_out is malloc'd, owned by the
 * caller (free()). */
ER_API er_status er_llm_chat_prompt(const er_llm *llm, const er_llm_message *msgs, size_t n,
                                    bool add_generation_prompt, char **text_out);

/* ---- contexts: the KV cache and the decode step ------------------------- */

typedef enum er_llm_kv_type {
  ER_LLM_KV_F16 = 0,           /* default */
  ER_LLM_KV_Q8,                /* int8, one scale per 32 values (half the bytes) */
} er_llm_kv_type;

typedef struct er_llm_context_options {
  int64_t n_ctx;               /* positions per sequence; 0 = min(training context, 4096) */
  int n_seq;                   /* sequences (slots) sharing the context; 0 = 1 */
  int threads;                 /* 0 = 1 */
  int n_batch;                 /* tokens per forward pass at most; 0 = 512 */
  er_llm_kv_type kv_type;
  /* Rounds every activation (norm outputs, projections, attention output,
   * the SwiGLU product, the residual stream) to fp16 as an accelerator
   * that computes in fp16 stores it, and fails with the layer and the
   * value when one is beyond fp16's range (65504). A check before
   * deploying to such a device: slower, not a speed mode. */
  bool fp16_activations;
} er_llm_context_options;

ER_API void er_llm_context_options_init(er_llm_context_options *opts);

/* A context holds the preallocated KV cache of n_seq sequences of n_ctx
 * positions (er_llm_context_stats tells its bytes), scratch for n_batch
 * tokens and a thread pool. `llm` MUST outlive the context. Calls on one
 * context are serialized (a lock), so one context serves one thread at a
 * time; use several contexts for parallel work. Owned by the caller. */
typedef struct er_llm_context er_llm_context;

ER_API er_status er_llm_context_create(const er_llm *llm, const er_llm_context_options *opts,
                                       er_llm_context **ctx_out);
ER_API void er_llm_context_free(er_llm_context *ctx);

typedef struct er_llm_context_stats {
  int64_t n_ctx;
  int n_seq, threads, n_batch;
  uint64_t kv_bytes;           /* the whole KV cache */
  uint64_t scratch_bytes;      /* activations and logits for n_batch tokens */
  const char *kernels;         /* e.g. "q4_1_q8_1_gemm_4x1__avx2, q8_0_q8_0_gemm_4x1__avx2" */
} er_llm_context_stats;

ER_API void er_llm_context_stats_get(const er_llm_context *ctx, er_llm_context_stats *stats_out);

/* Tokens held in sequence `seq` (< n_seq) of the cache. */
ER_API int64_t er_llm_seq_length(const er_llm_context *ctx, int seq);
/* Drops the sequence's positions from `keep` on (0 = empty it): the
 * service keeps a shared prompt prefix and drops the rest. */
ER_API er_status er_llm_seq_truncate(er_llm_context *ctx, int seq, int64_t keep);

/* A batch for one forward pass: n entries, each a token appended to a
 * sequence (at that sequence's current length, in entry order). Entries of
 * several sequences may be mixed (continuous batching). All arrays are
 * borrowed for the call. */
typedef struct er_llm_batch {
  size_t n;
  const int32_t *tokens;       /* [n] */
  const int32_t *seq;          /* [n] sequence of each entry */
  const bool *logits;          /* [n] whether to compute this entry's logits;
                                  NULL = only the last entry of each sequence */
} er_llm_batch;

/* Runs the model over the batch (split into passes of n_batch tokens),
 * appending every entry to its sequence's cache. LIMIT when a sequence
 * would pass n_ctx (nothing is appended then); OUT_OF_RANGE for a token or
 * sequence id out of range; INTERNAL naming the layer when the activations
 * turn non-finite (fp16 overflow, broken weights) - no logits are produced
 * then. The logits of the flagged entries are then read with
 * er_llm_logits (in entry order), valid until the next decode. */
ER_API er_status er_llm_decode(er_llm_context *ctx, const er_llm_batch *batch);
/* The logits row (n_vocab floats, owned by the context) of the i-th
 * flagged entry of the last decode, or NULL. */
ER_API const float *er_llm_logits(const er_llm_context *ctx, size_t i);

/* ---- evaluating on text ------------------------------------------------- */

typedef struct er_llm_eval_options {
  int64_t n_ctx;               /* chunk length; 0 = 512 */
  int64_t max_chunks;          /* 0 = every whole chunk of the text */
  int threads;                 /* 0 = 1 */
  int n_batch;                 /* tokens per forward pass; 0 = min(n_ctx, 512), 128 with a baseline */
  er_llm_kv_type kv_type;      /* the contexts' KV cache (default f16) */
  bool fp16_activations;       /* the model (not the baseline) in fp16 (er_llm_context_options) */
  /* Called after each chunk with the perplexity so far (NULL = silent). */
  void (*progress)(void *user, int64_t chunk, int64_t n_chunks, double ppl_so_far);
  void *progress_user;
} er_llm_eval_options;

typedef struct er_llm_eval_result {
  double ppl, ppl_error;       /* the model's perplexity and its standard error */
  double base_ppl, base_ppl_error; /* the baseline's (0 without one) */
  double top1_agreement;       /* scored positions where both argmaxes agree (0..1) */
  double mean_kld;             /* mean KL(baseline || model) in nats per position */
  int64_t chunks, n_ctx, tokens_scored;
} er_llm_eval_result;

ER_API void er_llm_eval_options_init(er_llm_eval_options *opts);
/* Perplexity of `model` over `tokens` (a text tokenized with its special
 * tokens, er_llm_tokenize add_special), chunked as llama.cpp's
 * llama-perplexity does: floor(n / n_ctx) chunks (at most max_chunks), each
 * from an empty cache with its first token BOS when the text starts with
 * one, the second half of each scored. With a baseline (NULL = none; same
 * vocabulary) both run over the same positions and the result also holds
 * the baseline's perplexity, the next-token argmax agreement and the mean
 * KL divergence. LIMIT when the text is shorter than 2 * n_ctx tokens. */
ER_API er_status er_llm_evaluate(const er_llm *model, const er_llm *baseline, const int32_t *tokens, size_t n_tokens,
                                 const er_llm_eval_options *opts, er_llm_eval_result *result_out);

/* ---- sampling ------------------------------------------------------------ */

/* The sampler chain, applied in this order: repetition / presence /
 * frequency penalties over the last penalty_last_n tokens, top-k, top-p,
 * min-p, temperature, then a seeded draw. temperature 0 = greedy (argmax,
 * ties to the lower id). Same seed and inputs: same tokens. */
typedef struct er_llm_sampler_options {
  float temperature;           /* default 0.8; 0 = greedy */
  int top_k;                   /* default 40; 0 = off */
  float top_p;                 /* default 0.95; 1 = off */
  float min_p;                 /* default 0.05; 0 = off */
  float repeat_penalty;        /* default 1.0 = off (llama.cpp's rule) */
  float presence_penalty;      /* default 0 (OpenAI's rule) */
  float frequency_penalty;     /* default 0 */
  int penalty_last_n;          /* default 64 */
  uint64_t seed;               /* default 0 */
} er_llm_sampler_options;

ER_API void er_llm_sampler_options_init(er_llm_sampler_options *opts);

typedef struct er_llm_sampler er_llm_sampler;

/* A sampler with its own random state and scratch for n_vocab candidates.
 * `opts` is copied. Owned by the caller; one thread at a time. */
ER_API er_status er_llm_sampler_create(const er_llm *llm, const er_llm_sampler_options *opts,
                                       er_llm_sampler **sampler_out);
ER_API void er_llm_sampler_free(er_llm_sampler *sampler);
/* Picks the next token from a logits row (borrowed; not modified).
 * history (n_history ids, borrowed) feeds the penalties. INVALID_ARGUMENT
 * when a logit is NaN (reported, never sampled from). */
ER_API er_status er_llm_sample(er_llm_sampler *sampler, const float *logits, const int32_t *history,
                               size_t n_history, int32_t *token_out);

/* ---- generation (prompt in, text out) ----------------------------------- */

/* Called with each new token and its bytes (piece, len; may be part of a
 * UTF-8 sequence) as it is generated. Return false to stop. */
typedef bool (*er_llm_token_fn)(void *user, int32_t token, const char *piece, size_t len);

typedef struct er_llm_generate_options {
  int64_t max_tokens;          /* new tokens at most; default 256 */
  const char *const *stop;     /* stop strings (borrowed), n_stop of them; the
                                  text up to a stop string is kept */
  size_t n_stop;
  bool ignore_eos;             /* keep going past end-of-generation tokens */
  er_llm_sampler_options sampling;
} er_llm_generate_options;

ER_API void er_llm_generate_options_init(er_llm_generate_options *opts);

typedef enum er_llm_finish {
  ER_LLM_FINISH_STOP = 0,      /* an end-of-generation token or a stop string */
  ER_LLM_FINISH_LENGTH,        /* max_tokens or the context's end */
  ER_LLM_FINISH_CALLBACK,      /* the callback returned false */
} er_llm_finish;

typedef struct er_llm_generate_result {
  int64_t prompt_tokens, completion_tokens;
  double prompt_ms, decode_ms; /* prefill (to the first token) and the rest */
  er_llm_finish finish;
} er_llm_generate_result;

/* Feeds `prompt` (n_prompt ids, borrowed) to sequence `seq` after what it
 * holds, then samples and feeds up to max_tokens new tokens, calling `fn`
 * (may be NULL) for each. The generated tokens stay in the sequence.
 * result_out may be NULL. */
ER_API er_status er_llm_generate(er_llm_context *ctx, int seq, const int32_t *prompt, size_t n_prompt,
                                 const er_llm_generate_options *opts, er_llm_token_fn fn, void *user,
                                 er_llm_generate_result *result_out);

/* ---- quantizing GGUF models ---------------------------------------------- */

typedef struct er_llm_quantize_options {
  const char *type;            /* "Q4_K_M" (default), "Q5_K_M", "Q4_K_S", "Q5_K_S",
                                  "Q6_K", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                  "F16", "BF16", "F32"; which tensors get wider
                                  types follows llama.cpp's llama-quantize */
  int threads;                 /* default 1 */
  const char *const *keep;     /* tensors copied in their source type (borrowed) */
  size_t n_keep;
  bool progress;               /* progress on stderr */
  /* Activation-aware rounding: an importance matrix (the mean square of
   * each weight column's input) weighs each block's rounding error. It is
   * measured by running the input model over calib_text, or read from
   * imatrix (llama.cpp's GGUF imatrix format); NULL both = plain rounding. */
  const char *calib_text;      /* a UTF-8 text file */
  int64_t calib_ctx;           /* tokens per calibration chunk; 0 = 512 */
  int64_t calib_chunks;        /* at most this many chunks; 0 = the whole text */
  const char *imatrix;         /* read this importance matrix instead */
  const char *imatrix_out;     /* write the measured one here (llama-quantize reads it) */
  /* Mixed precision by budget: with max_ppl_rise > 0 the fewest tensors
   * (token embedding and output first, then by measured error) are kept at
   * keep_type so that the perplexity on eval_text rises at most
   * max_ppl_rise (relative: 0.02 = 2 %) over the input model's. */
  double max_ppl_rise;
  const char *eval_text;       /* default: calib_text (the report says so) */
  int64_t eval_ctx;            /* 0 = 512 */
  int64_t eval_chunks;         /* 0 = every chunk of the text */
  const char *keep_type;       /* "Q8_0" (default) or "F16" */
  const char *report;          /* write REPORT.json and REPORT.html (NULL = none) */
  /* For accelerators that compute in fp16: where the SwiGLU product
   * (gate x up) or the up projection came within 16x of fp16's largest
   * value on calib_text, that layer's ffn_up rows are divided and its
   * ffn_down multiplied by the same power of two, which leaves the
   * model's function unchanged and the product inside fp16's range. Needs
   * calib_text; fails naming the site when another activation overflows
   * fp16 (scaling the product cannot help there). */
  bool fp16_safe;
} er_llm_quantize_options;

typedef struct er_llm_quantize_result {
  size_t tensors_quantized, tensors_copied;
  uint64_t bytes_in, bytes_out;
  size_t tensors_kept_wide;    /* by the perplexity budget */
  double ppl_in, ppl_out;      /* on eval_text, when a budget was given (else 0) */
  int64_t calib_chunks, calib_tokens; /* of the importance matrix (0 without) */
  int fp16_scaled_layers;      /* layers whose SwiGLU product fp16_safe scaled */
} er_llm_quantize_result;

ER_API void er_llm_quantize_options_init(er_llm_quantize_options *opts);
/* Re-encodes the GGUF model at in_path (any type edgerun reads) as
 * out_path, written through a temporary file and a rename. Metadata is
 * copied; general.file_type says the new type. result_out may be NULL. */
ER_API er_status er_llm_quantize(const char *in_path, const char *out_path, const er_llm_quantize_options *opts,
                                 er_llm_quantize_result *result_out);

/* ---- activation ranges: what an fp16 accelerator would see --------------- */

/* One place in the forward pass, measured over calibration text in fp32. */
typedef struct er_llm_act_range {
  char site[64];               /* "blk.3.ffn_down.input" (see what) */
  const char *what;            /* "SwiGLU product (gate x up)", static */
  int layer;                   /* block index; -1 after the last block */
  double max_abs;              /* the largest magnitude seen */
  int64_t count;               /* values seen */
  int64_t over_fp16;           /* values beyond fp16's range (round to inf) */
  int64_t subnormal_fp16;      /* nonzero values below 2^-14 (fewer bits in fp16) */
  int64_t zero_fp16;           /* nonzero values that fp16 rounds to zero */
  double fp16_rel_rms;         /* sqrt(sum (v - fp16(v))^2 / sum v^2) */
} er_llm_act_range;

typedef struct er_llm_analyze_options {
  int64_t n_ctx;               /* tokens per calibration chunk; 0 = 512 */
  int64_t max_chunks;          /* 0 = every whole chunk of the text */
  int threads;                 /* 0 = 1 */
  bool progress;               /* a progress bar on stderr when it is a terminal */
} er_llm_analyze_options;

typedef struct er_llm_analyze_result {
  er_llm_act_range *ranges;    /* in forward order; er_llm_analyze_result_free */
  size_t n_ranges;
  int64_t chunks, tokens;
} er_llm_analyze_result;

/* Runs the model in fp32 over a text file (chunks as for calibration;
 * memory flat in the text length) and measures every activation site of
 * every block: largest magnitude and what rounding to fp16 would do. */
ER_API er_status er_llm_analyze(const er_llm *llm, const char *text_path, const er_llm_analyze_options *opts,
                                er_llm_analyze_result *result_out);
ER_API void er_llm_analyze_result_free(er_llm_analyze_result *result);

/* ------------------------------------------------------------------------ */
/* Log lines from the core (fallback warnings, plugin loading)               */
/* ------------------------------------------------------------------------ */

/* Severity of a log line. */
typedef enum er_log_level {
  ER_LOG_DEBUG = 0,
  ER_LOG_INFO = 1,
  ER_LOG_WARNING = 2,
  ER_LOG_ERROR = 3,
} er_log_level;

/* The callback receives each line (borrowed for the call). NULL restores
 * the default, which writes warnings and errors to stderr. `min_level`
 * drops lines below it. `user` must outlive the registration. */
typedef void (*er_log_fn)(void *user, er_log_level level, const char *message);
ER_API void er_log_set_callback(er_log_fn fn, void *user, er_log_level min_level);

#ifdef __cplusplus
}
#endif
#endif /* EDGERUN_H */
