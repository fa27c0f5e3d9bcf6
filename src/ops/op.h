/* op.h - how an operator is defined: one op, one place.
 *
 * Each ONNX operator has one er_op_def holding its arity, the schema
 * versions it implements, a `check` function (attribute validation plus the
 * type and shape rule) and a `run` function (the reference kernel: plain C,
 * the numerical truth). Op files live in src/ops/ and export their defs
 * through a NULL-terminated array that op-table.c lists.
 *
 * check() is called twice in a model's life:
 *  - at load time, with what is known (ctx->checking == true): an input's
 *    rank may be -1 (unknown), a dim may be -1 (unknown), and its data is
 *    non-NULL only for constants. check() must validate attributes, reject
 *    anything that is wrong with what *is* known (with a message naming the
 *    node, the value and the rule), and set every output's dtype. It sets
 *    output shapes as far as they are known (rank -1 or dims -1 otherwise).
 *    It must never fail merely because something is unknown.
 *  - at run time (ctx->checking == false) with every input fully known, just
 *    before run(); then it must set every output's full shape, unless the op
 *    has ER_OP_DYNAMIC_OUTPUT (its run() then allocates the outputs with
 *    er__op_output()).
 * After check at run time, the executor allocates each output with known
 * shape (zeroed, 64-byte aligned) and calls run(), which fills them. */
#ifndef ER_OP_H
#define ER_OP_H

#include <math.h>

#include "core/core.h"
#include "core/tensor.h"
#include "ir/ir.h"

struct er_exec;
struct er_kctx;

/* Runs subgraph `sub` of the node being executed (an If branch, a Loop or
 * Scan body) with the given inputs; each outputs[k] receives a tensor owning
 * its data, or is left empty where skip && skip[k] (a Loop's carried value
 * the body passes through unchanged). The interpreter (src/runtime/exec.c)
 * provides it; ops reach it only through er_kctx.run_subgraph. */
typedef er_status (*er_subgraph_fn)(const struct er_kctx *ctx, const er_graph *sub,
                                    const er_tensor *const *inputs, int n_inputs, er_tensor *outputs,
                                    const bool *skip);

typedef struct er_kctx {
  const er_node *node;
  int n_in;
  er_tensor *const *in;    /* [n_in]; NULL entries for omitted inputs */
  int n_out;
  er_tensor *const *out;   /* [n_out]; NULL entries for omitted outputs */
  bool checking;           /* load-time check with partial knowledge */
  struct er_exec *exec;    /* the run (opaque to ops); NULL when checking */
  const struct er_graph *graph;  /* graph holding the node */
  er_subgraph_fn run_subgraph;   /* NULL outside the interpreter */
} er_kctx;

enum {
  /* run() allocates outputs itself (NonZero, Loop, ...). */
  ER_OP_DYNAMIC_OUTPUT = 1u << 0,
  /* The op is not a pure function of its inputs (random ops): never fold. */
  ER_OP_NO_FOLD = 1u << 1,
  /* Output 0 holds input 0's bytes unchanged (Reshape, Flatten, Squeeze,
   * Unsqueeze, Identity): the memory planner may give both one buffer,
   * so run() must not copy when the two data pointers are equal. */
  ER_OP_VIEW = 1u << 2,
  /* run() writes every element of every output itself: outputs need not
   * arrive zeroed (ConstantOfShape: folding VGG-19's 548 MB of generated
   * weights touched every page twice). */
  ER_OP_WRITES_ALL = 1u << 3,
};

typedef struct er_op_def {
  const char *name;        /* ONNX op_type */
  const char *domain;      /* "" = default ONNX domain */
  int min_version;         /* oldest schema since-version implemented */
  int max_version;         /* newest schema since-version implemented */
  int min_inputs, max_inputs;    /* arity, counting omitted optionals */
  int min_outputs, max_outputs;
  uint32_t value_inputs;   /* bit i: the shape rule reads input i's values */
  uint32_t flags;
  er_status (*check)(er_kctx *ctx);
  er_status (*run)(er_kctx *ctx);
} er_op_def;

/* Number of inputs accepted by variadic ops. */
#define ER_VARIADIC ER_MAX_NODE_IO

/* Looks up the implementation for (domain, op_type) at schema version
 * `version`; NULL when there is none. */
const er_op_def *er__op_find(const char *domain, const char *op_type, int version);
/* The same among the built-in ops only, and among registered custom ops
 * only (src/ops/custom-op.c). */
const er_op_def *er__op_find_builtin(const char *domain, const char *op_type, int version);
const er_op_def *er__custom_op_find(const char *domain, const char *op_type, int version);

/* The registered custom kernel for a node on a backend ("cpu", "opencl",
 * "cuda"), or NULL (custom-op.c). The result stays valid for the life of
 * the process. */
typedef struct er_custom_kernel er_custom_kernel;
const er_custom_kernel *er__custom_kernel_find(const char *backend, const er_node *node);
/* Runs a custom kernel for a node whose inputs and outputs are in `ctx`
 * (outputs allocated). `stream` is the device queue (NULL on the CPU). */
er_status er__custom_kernel_run(const er_custom_kernel *k, er_kctx *ctx, void *stream);
/* Resolves the schema version a default-domain op has under `opset`
 * (the newest since-version <= opset); 0 when the op is unknown or did not
 * exist yet. */
int er__onnx_op_version(const char *op_type, int64_t opset);
/* The newest default-domain opset whose schemas edgerun knows. */
int er__onnx_max_opset(void);
/* Fills `buf` with "versions 7 to 13" style text of what edgerun implements
 * for op_type, for error messages. */
void er__op_versions_str(const char *domain, const char *op_type, char *buf, size_t size);

/* ======================================================================== */
/* Helpers for op implementations (op-util.c)                                */
/* ======================================================================== */

/* Records an error prefixed with "OpType 'node name': " and returns status. */
er_status er__op_error(const er_kctx *ctx, er_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Runs subgraph `sub` through ctx->run_subgraph (er_subgraph_fn); an
 * INTERNAL error naming the node when there is no interpreter. */
er_status er__op_subgraph(const er_kctx *ctx, const er_graph *sub, const er_tensor *const *inputs,
                          int n_inputs, er_tensor *outputs, const bool *skip);

/* Attribute getters. Absent attributes yield the default; an attribute of
 * the wrong type is an INVALID_ATTRIBUTE error naming it. */
er_status er__attr_int(const er_kctx *ctx, const char *name, int64_t def, int64_t *out);
er_status er__attr_float(const er_kctx *ctx, const char *name, float def, float *out);
/* *out = NULL (and *len = 0) when absent and def is NULL. */
er_status er__attr_string(const er_kctx *ctx, const char *name, const char *def,
                          const char **out);
/* *n = -1 and *out = NULL when absent. */
er_status er__attr_ints(const er_kctx *ctx, const char *name, const int64_t **out, int64_t *n);
er_status er__attr_floats(const er_kctx *ctx, const char *name, const float **out, int64_t *n);
/* Tensor attribute (e.g. Constant's value, ConstantOfShape's value); NULL when absent. */
er_status er__attr_tensor(const er_kctx *ctx, const char *name, const er_tensor **out);
/* Graph attribute (If/Loop/Scan bodies); INVALID_ATTRIBUTE when absent. */
er_status er__attr_graph(const er_kctx *ctx, const char *name, const er_graph **out);

/* Normalizes a possibly negative axis into [0, rank); INVALID_ATTRIBUTE with
 * the attribute name and range otherwise. `what` names it ("axis"). */
er_status er__norm_axis(const er_kctx *ctx, const char *what, int64_t axis, int rank,
                        int *out);

/* Input i, or NULL when omitted or absent. */
static inline er_tensor *er__in(const er_kctx *ctx, int i) {
  return i < ctx->n_in ? ctx->in[i] : NULL;
}
static inline er_tensor *er__out(const er_kctx *ctx, int i) {
  return i < ctx->n_out ? ctx->out[i] : NULL;
}

/* Requires input i to be present with one of the listed dtypes (list ends
 * with ER_DTYPE_UNDEFINED); TYPE_MISMATCH / INVALID_GRAPH otherwise. A type
 * not yet known (UNDEFINED at load) passes. */
er_status er__require_type(const er_kctx *ctx, int i, const er_dtype *allowed);
/* Requires inputs i and j to have the same dtype (when both are known). */
er_status er__require_same_type(const er_kctx *ctx, int i, int j);
/* Requires a known rank to equal `rank` (or lie in [lo, hi]). */
er_status er__require_rank(const er_kctx *ctx, int i, int lo, int hi);

/* Type lists for er__require_type. */
extern const er_dtype er__types_float[];    /* f16, bf16, f32, f64 */
extern const er_dtype er__types_numeric[];  /* floats and all integers */
extern const er_dtype er__types_signed[];   /* floats and signed integers */
extern const er_dtype er__types_int[];      /* all integers */
extern const er_dtype er__types_all[];      /* numeric and bool */
extern const er_dtype er__types_index[];    /* int32, int64 */

/* Sets output i's type and shape (dims may be NULL for rank <= 0). */
void er__set_output(const er_kctx *ctx, int i, er_dtype dtype, int rank, const int64_t *dims);
/* Output i gets input j's type and shape. */
void er__same_as_input(const er_kctx *ctx, int i, int j);

/* Multidirectional (numpy) broadcasting of the given shapes into *out
 * (dtype untouched). Unknown ranks make the result rank unknown; unknown
 * dims propagate as -1. INVALID_SHAPE names both shapes when they clash. */
er_status er__broadcast_shapes(const er_kctx *ctx, int n, const er_tensor *const *shapes,
                               er_tensor *out);

/* Reads element `i` of an integer tensor (int32 or int64; others via cast)
 * as int64. */
int64_t er__get_i64(const er_tensor *t, int64_t i);

/* Allocates output i at run time with the given type and shape (for
 * ER_OP_DYNAMIC_OUTPUT ops). Checks the size against the run-time cap. */
er_status er__op_output(const er_kctx *ctx, int i, er_dtype dtype, int rank,
                        const int64_t *dims);

/* The reference matrix products (ref-gemm.c): C[M,N] (row stride ldc) +=
 * A[M,K] * B[K,N] (row stride ldb), A's element (m,k) at A[m*sam + k*sak];
 * and the dot product of n elements. */
void er__ref_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t sam, int64_t sak, const float *B,
                      int64_t ldb, float *C, int64_t ldc);
void er__ref_gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t sam, int64_t sak, const double *B,
                      int64_t ldb, double *C, int64_t ldc);
void er__ref_gemm_u64(int64_t M, int64_t N, int64_t K, const uint64_t *A, int64_t sam, int64_t sak,
                      const uint64_t *B, int64_t ldb, uint64_t *C, int64_t ldc);
float er__ref_dot_f32(int64_t n, const float *a, const float *b);
double er__ref_dot_f64(int64_t n, const double *a, const double *b);
uint64_t er__ref_dot_u64(int64_t n, const uint64_t *a, const uint64_t *b);

/* Element i of a float tensor as a double (float32 read directly), and
 * the store back with the tensor's rounding. */
static inline double er__load_f(const er_tensor *t, int64_t i) {
  if (t->dtype == ER_DTYPE_FLOAT) return ((const float *)t->data)[i];
  return er__load_f64(t->data, t->dtype, i);
}
static inline void er__store_f(er_tensor *t, int64_t i, double v) {
  if (t->dtype == ER_DTYPE_FLOAT)
    ((float *)t->data)[i] = (float)v;
  else
    er__store_f64(t->data, t->dtype, i, v);
}

/* Dim d of t, or -1 when t, its rank or the dim is not known. */
static inline int64_t er__dim_of(const er_tensor *t, int d) {
  if (!t || t->rank < 0 || d >= t->rank) return -1;
  return t->dims[d];
}

/* A float tensor's data as float32: the data itself for float32, else a
 * widened copy in *owned (free it). */
er_status er__as_f32(const er_tensor *t, const float **out, float **owned);

/* Strides of a contiguous row-major shape: strides[i] = prod(dims[i+1..]). */
void er__strides(int rank, const int64_t *dims, int64_t *strides);

/* Broadcast iteration: for an output of shape out_dims, computes for each
 * input its element strides aligned to the output (0 on broadcast axes).
 * Walk with er__bcast_next. */
typedef struct er_bcast {
  int rank;
  int n;                              /* inputs */
  int64_t dims[ER_MAX_RANK];
  int64_t strides[4][ER_MAX_RANK];    /* per input, aligned to output */
  int64_t idx[ER_MAX_RANK];
  int64_t off[4];                     /* current element offset per input */
} er_bcast;
void er__bcast_init(er_bcast *b, int n, const er_tensor *const *inputs, const er_tensor *out);
/* Advances to the next output element (row-major); offsets updated. */
void er__bcast_next(er_bcast *b);

/* The output shape in dims of a tensor known to be fully shaped; asserts. */
int64_t er__count(const er_tensor *t);

/* DynamicQuantizeLinear's rule (quant.c): the uint8 scale and zero point
 * of x[0..n) over its range widened to include 0, NaNs left out; and x
 * quantized with them (round half to even, saturated; NaN to the zero
 * point). Shared by the ops that quantize activations at run time. */
void er__dynamic_qparams_u8(const float *x, int64_t n, float *scale_out, uint8_t *zp_out);
/* The same from the range [lo, hi] (lo <= 0 <= hi) already found. */
void er__dynamic_qparams_range_u8(float lo, float hi, float *scale_out, uint8_t *zp_out);
void er__quantize_u8(const float *x, int64_t n, float scale, uint8_t zp, uint8_t *y);

/* com.microsoft DynamicQuantizeLSTM (rnn.c) with its integer products
 * supplied by the caller: the reference passes plain loops, the CPU
 * kernel its packed integer GEMM, and both share the recurrence.
 * product() writes acc[r][n] = sum_k (a[r][k] - az) (w[k][n] - wz[n]) for
 * the m rows of a ([m, K] uint8), where w is direction d's W ([I, 4H],
 * which = 0) or R ([H, 4H], which = 1) and wz its zero points, in wrapping
 * 32-bit arithmetic. */
typedef struct er_dq_products {
  void (*product)(void *self, er_kctx *ctx, int which, int d, const uint8_t *a, int32_t az, int64_t m,
                  int32_t *acc /* [m][4H] */);
  void *self;
  /* (may be NULL) One step of one batch row when the LSTM has the default
   * activations (Sigmoid, Tanh, Tanh), no clip, no peepholes and no
   * input_forget: gates [4H] before their activations in ONNX order (i,
   * o, f, c); c and h [H] updated in place, c = f * c + i * g, h = o *
   * tanh(c). NULL: the recurrence's scalar loops. */
  void (*cell)(const float *gates, float *c, float *h, int64_t n);
} er_dq_products;
/* Cast's element conversion (unary.c): n elements of type st at src to
 * type dt at dst; saturate applies to float8 targets. The CPU kernel runs
 * it over ranges on the workers. */
void er__cast_elements(const void *src, er_dtype st, void *dst, er_dtype dt, int64_t n, bool saturate);

/* ws: er__dqlstm_scratch_bytes of scratch, 64-byte aligned, or NULL to
 * allocate it for this run. */
size_t er__dqlstm_scratch_bytes(const er_kctx *ctx);
er_status er__dqlstm_run(er_kctx *ctx, const er_dq_products *prod, void *ws);

/* A strided view of a tensor's elements, normalized for copying: dims of
 * size 1 dropped and neighbours that walk memory as one merged, so the
 * innermost run is as long as possible. Element (i_0, ..., i_{rank-1})
 * lies at offset + sum(i_k * strides[k]) elements of the source. Views
 * reach twice the largest tensor rank (Tile views its output as
 * [r0, d0, r1, d1, ...]). */
#define ER_VIEW_MAX_RANK (2 * ER_MAX_RANK)
typedef struct er_view {
  int rank;                            /* 0: a single element */
  bool empty;                          /* some dim is 0 */
  size_t es;                           /* element bytes */
  int64_t offset;                      /* elements */
  int64_t dims[ER_VIEW_MAX_RANK];
  int64_t strides[ER_VIEW_MAX_RANK];   /* elements; may be 0 or negative */
} er_view;
void er__view_make(er_view *v, size_t es, int rank, const int64_t *dims, const int64_t *strides,
                   int64_t offset);
/* The view is er__view_rows() rows of dims[rank - 1] elements each. */
int64_t er__view_rows(const er_view *v);
/* Copies rows [begin, end) of the view of `src` to their place in `dst`,
 * the contiguous copy of the whole view. Disjoint row ranges may be
 * copied concurrently. */
void er__view_copy(const er_view *v, void *dst, const void *src, int64_t begin, int64_t end);
/* Slice's output as a view of its input (shapes known, at run time). */
er_status er__slice_view(const er_kctx *ctx, er_view *v);

/* Pad as rows of the output (the last padded axis, with the unpadded axes
 * after it carried whole): er__pad_job_make reads the node (mode, pads,
 * constant; shapes known, at run time), er__pad_rows writes output rows
 * [begin, end) of the job's `rows`. Disjoint row ranges may be written
 * concurrently. */
typedef struct er_pad_job {
  const void *x;
  size_t es;
  int mode;          /* constant, reflect, edge, wrap */
  int rank;          /* axes up to the last padded one; 0 for a scalar */
  uint8_t value[8];  /* the constant, one element */
  int64_t before[ER_MAX_RANK], lo[ER_MAX_RANK], len[ER_MAX_RANK];
  int64_t in_strides[ER_MAX_RANK], out_dims[ER_MAX_RANK];
  int64_t inner, block, rows;
} er_pad_job;
er_status er__pad_job_make(er_kctx *ctx, er_pad_job *j);
void er__pad_rows(const er_pad_job *j, void *dst, int64_t begin, int64_t end);

/* Concat in place (runtime/session.c) plans inputs where they belong in
 * the output. True when a run's inputs do not match that plan: some input
 * lies inside the output's memory at a place other than its own, where
 * copying the others would overwrite it before it is read (a model with
 * symbolic dims run at other shapes than the plan was made for). The
 * Concat must then build its output elsewhere first. */
bool er__concat_misplaced(const er_kctx *ctx, int axis);

#endif /* ER_OP_H */
