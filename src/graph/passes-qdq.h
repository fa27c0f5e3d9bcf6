/* passes-qdq.h - what the files of the QDQ pass share: the pass's
 * context, quantization parameters as matched, and the helpers more than
 * one family of rewrites uses. The pass and its rewrites are described in
 * passes-qdq.c. */
#ifndef ER_GRAPH_PASSES_QDQ_H
#define ER_GRAPH_PASSES_QDQ_H

#include "graph/graph.h"
#include "graph/rewrite.h"
#include "ops/op.h"
#include "ops/qfused.h"

/* Rounds of rewrites before giving up on a fixpoint (each round either
 * changes something or ends the loop; real graphs settle in 2-4). */
#define QDQ_MAX_ROUNDS 16

/* The pass's state: the editor and the phase. */
typedef struct qctx {
  er_rewrite rw;     /* the graph being edited, its reader counts and dead nodes */
  bool float_out;    /* fuse_gemm may make float-output ops (last phase) */
} qctx;

/* A per-tensor quantization as a DQ or Q node gives it. */
typedef struct qparam {
  er_dtype type;       /* uint8 / int8 */
  float scale;
  int32_t zp;
  int32_t scale_v;     /* value ids of the scale and zero point (-1: none) */
  int32_t zp_v;
} qparam;

/* A Relu or Clip before a Q, folded into the integer clamp. */
typedef struct act_range {
  float lo, hi;        /* real bounds (Relu: [0, inf), Clip: [min, max]) */
  int32_t node;        /* the Relu / Clip node, -1 = none */
} act_range;

/* What follows a float value y: an optional Relu/Clip and a per-tensor Q,
 * each the sole reader of its input. */
typedef struct out_chain {
  act_range act;       /* act.node = -1: none */
  int32_t q;           /* Q node, -1: none */
  qparam qp;
  int32_t out;         /* the chain's last value (Q's output, or the act's, or y) */
} out_chain;

/* A DequantizeLinear of constant 8-bit weights: per tensor, or per
 * channel along `axis` of W. */
typedef struct wparam {
  int32_t w_v, zp_v;   /* quantized weights; zero point value (-1 none) */
  const er_tensor *w, *s, *z;
  int64_t channels;    /* scales: 1 or the channel count */
  int axis;
} wparam;

/* A rewrite tried at node i: *done when it changed the graph. */
typedef er_status (*er_qdq_rewrite_fn)(qctx *qc, int32_t i, bool *done);

er_status er__qdq_fuse_gemm(qctx *qc, int32_t i, bool *done);
er_status er__qdq_fuse_binary(qctx *qc, int32_t i, bool *done);
er_status er__qdq_fuse_avgpool(qctx *qc, int32_t i, bool *done);
er_status er__qdq_fuse_block(qctx *qc, int32_t i, bool *done);
er_status er__qdq_fuse_lut(qctx *qc, int32_t i, bool *done);
er_status er__qdq_fuse_lut_chain(qctx *qc, int32_t i, bool *done);
er_status er__qdq_fuse_self_binary(qctx *qc, int32_t i, bool *done);
er_status er__qdq_hoist_q(qctx *qc, int32_t i, bool *done);
er_status er__qdq_sink_dq(qctx *qc, int32_t i, bool *done);

/* A constant with data (a zero-element one is no use to a fusion). */
const er_tensor *er__qdq_const_of(const er_graph *g, int32_t v);

/* Value v's element type (UNDEFINED for -1). */
er_dtype er__qdq_vtype(const er_graph *g, int32_t v);

/* uint8 or int8. */
bool er__qdq_is_q8(er_dtype t);

/* A new intermediate value of the given type and shape. */
er_status er__qdq_new_value(qctx *qc, const char *base, er_dtype t, const er_tensor *shape, int32_t *id_out);

/* A new constant owning the data of *t (allocated with er__tensor_alloc;
 * moved, see er__rw_new_const). */
er_status er__qdq_new_const(qctx *qc, const char *base, er_tensor *t, int32_t *id_out);

/* *t set to dtype and shape, its data allocated. */
er_status er__qdq_alloc_tensor(er_tensor *t, er_dtype dtype, int rank, const int64_t *dims);

/* A constant of one value (rank 0). */
er_status er__qdq_new_scalar(qctx *qc, const char *base, er_dtype t, double v, int32_t *id_out);

/* A float32 constant [n]. */
er_status er__qdq_new_floats(qctx *qc, const char *base, const float *v, int64_t n, int32_t *id_out);

/* Runs node n's check (at load, with what is known) on the given input
 * infos; *out receives output 0's type and shape. False when the op
 * rejects them. */
bool er__qdq_check_with(const qctx *qc, const er_node *n, er_tensor *const *in, er_tensor *out);

/* What node n's check sees of its inputs now: constants with data, other
 * values as type and shape; input `k_over` (if >= 0) replaced by `over`. */
void er__qdq_input_infos(const qctx *qc, const er_node *n, int k_over, const er_tensor *over, er_tensor *buf,
                        er_tensor **ptrs);

/* n's INT attribute `name` is `want`, or n has none. */
bool er__qdq_attr_is(const er_node *n, const char *name, int64_t want);

/* Node i is a per-tensor DequantizeLinear of a uint8/int8 value to float32;
 * *x_out receives the quantized input. */
bool er__qdq_dq_per_tensor(const qctx *qc, int32_t i, qparam *p, int32_t *x_out);

/* Node i is a per-tensor QuantizeLinear of float32 to uint8/int8. */
bool er__qdq_q_per_tensor(const qctx *qc, int32_t i, qparam *p);

/* Equal type, scale and zero point. */
bool er__qdq_same_param(const qparam *a, const qparam *b);

/* QuantizeLinear of one float, as its reference computes it (float
 * division, round half to even, add the zero point, saturate). */
int32_t er__qdq_quantize_value(const qparam *p, float v);

/* The zero point as a value (the node's own, or a new constant). */
er_status er__qdq_zp_value(qctx *qc, const qparam *p, const char *base, int32_t *id);

/* Fills *c with what follows float value y. */
void er__qdq_follow_output(const qctx *qc, int32_t y, out_chain *c);

/* The integer clamp [lo, hi] of a quantized output with the chain's
 * activation folded in. */
void er__qdq_chain_clamp(const out_chain *c, int64_t *lo, int64_t *hi);

/* Marks the chain's nodes dead and moves its output to node i. */
void er__qdq_take_chain(qctx *qc, int32_t i, int32_t y, const out_chain *c);

/* Runs node n's reference kernel on the given inputs into *out (allocated
 * here; the caller releases it). */
er_status er__qdq_eval_node(const qctx *qc, const er_node *n, er_tensor *const *in, er_tensor *out);

/* Value id is a DequantizeLinear of constants. */
bool er__qdq_dq_of_consts(const struct qctx *qc, int32_t id);

#endif /* ER_GRAPH_PASSES_QDQ_H */
