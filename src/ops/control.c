/* control.c - control flow: If, Loop and Scan.
 *
 * Each op runs subgraphs through er__op_subgraph() (the interpreter's
 * er_kctx.run_subgraph), which hands back output tensors that own their
 * data. The ops move those tensors into their
 * own outputs where they can (If, Loop's carried values) and copy slices
 * where they must (scan outputs). Output shapes depend on which branch runs
 * or how many iterations happen, so every op here allocates its outputs in
 * run() (ER_OP_DYNAMIC_OUTPUT); check() derives types, and shapes as far as
 * they are known, from the subgraphs' declared and inferred output infos.
 *
 * Ownership in this file: a "state" tensor either borrows an input of the
 * node (flags without ER_TENSOR_OWNS_DATA) or owns what a body run produced;
 * er__tensor_release() frees only the latter, so it is safe on both. */
#include "ops/op.h"
#include "ops/op-groups.h"

#include <stdlib.h>

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

static const er_dtype types_bool[] = {ER_DTYPE_BOOL, ER_DTYPE_UNDEFINED};
static const er_dtype types_int64[] = {ER_DTYPE_INT64, ER_DTYPE_UNDEFINED};

/* What the subgraph's load-time inference knows about output i. */
static const er_tensor *sub_out_info(const er_graph *g, int i) {
  return &g->values[g->outputs[i]].info;
}
static const er_tensor *sub_in_info(const er_graph *g, int i) {
  return &g->values[g->inputs[i]].info;
}

/* *dst = what is known about a value that is either a or b: the common
 * dtype, and the dims both agree on (rank unknown when the ranks differ). */
static void merge_info(er_tensor *dst, const er_tensor *a, const er_tensor *b) {
  er_dtype t = a->dtype != ER_DTYPE_UNDEFINED ? a->dtype : b->dtype;
  if (a->rank < 0 || b->rank < 0 || a->rank != b->rank) {
    er__tensor_set(dst, t, -1, NULL);
    return;
  }
  int64_t dims[ER_MAX_RANK];
  for (int d = 0; d < a->rank; d++) dims[d] = a->dims[d] == b->dims[d] ? a->dims[d] : -1;
  er__tensor_set(dst, t, a->rank, dims);
}

/* Sets output i from an info (dtype / rank / dims; data untouched). */
static void set_output_info(const er_kctx *ctx, int i, const er_tensor *info) {
  er__set_output(ctx, i, info->dtype, info->rank, info->rank > 0 ? info->dims : NULL);
}

/* Requires the known dtypes a (what the node passes) and b (what the
 * subgraph declares) to agree. */
static er_status same_dtype(const er_kctx *ctx, er_dtype a, er_dtype b, const char *what, int i) {
  if (a == ER_DTYPE_UNDEFINED || b == ER_DTYPE_UNDEFINED || a == b) return ER_STATUS_OK;
  return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH, "%s %d is %s in the node but %s in the body",
                      what, i, er_dtype_name(a), er_dtype_name(b));
}

/* A known-shaped input must hold exactly one element (If's cond, Loop's M
 * and cond). */
static er_status require_scalar(const er_kctx *ctx, int i, const char *name) {
  const er_tensor *t = er__in(ctx, i);
  int64_t n = t ? er__tensor_count(t) : -1;
  if (n < 0 || n == 1) return ER_STATUS_OK;
  char buf[160];
  return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                      "%s has shape %s; it must hold exactly one element", name,
                      er__shape_str(t, buf, sizeof buf));
}

/* Moves an owned tensor into output slot i (or frees it when the output
 * is omitted); *t is left empty. A borrowed tensor is copied instead. */
static er_status move_to_output(const er_kctx *ctx, int i, er_tensor *t) {
  er_tensor *o = er__out(ctx, i);
  if (!o) {
    er__tensor_release(t);
    return ER_STATUS_OK;
  }
  er__tensor_release(o);
  if (t->flags & ER_TENSOR_OWNS_DATA) {
    *o = *t;
    t->flags &= ~(uint32_t)ER_TENSOR_OWNS_DATA;
    t->data = NULL;
    return ER_STATUS_OK;
  }
  er_status st = er__tensor_copy(o, t);
  if (st != ER_STATUS_OK) er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
  return st;
}

static bool same_shape(const er_tensor *a, const er_tensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

/* Allocates output i as a stack of `n` tensors shaped like `elem`, the
 * stacking axis at `axis` (so rank = elem->rank + 1). */
static er_status alloc_stacked(const er_kctx *ctx, int i, const er_tensor *elem, int axis,
                               int64_t n) {
  int64_t dims[ER_MAX_RANK];
  if (elem->rank + 1 > ER_MAX_RANK)
    return er__op_error(ctx, ER_STATUS_LIMIT,
                        "output %d would have rank %d; at most %d (ER_MAX_RANK)", i, elem->rank + 1,
                        ER_MAX_RANK);
  for (int d = 0, s = 0; d <= elem->rank; d++) dims[d] = d == axis ? n : elem->dims[s++];
  return er__op_output(ctx, i, elem->dtype, elem->rank + 1, dims);
}

/* Splits a shape around `axis` into outer (dims before), len (the axis)
 * and inner (elements after) counts. */
static void split_at(const er_tensor *t, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < axis; d++) *outer *= t->dims[d];
  *len = t->dims[axis];
  for (int d = axis + 1; d < t->rank; d++) *inner *= t->dims[d];
}

/* Writes `elem` at index idx along `axis` of the stacked tensor `dst`. */
static void put_slice(er_tensor *dst, int axis, int64_t idx, const er_tensor *elem) {
  int64_t outer, len, inner;
  size_t es = er_dtype_size(dst->dtype);
  split_at(dst, axis, &outer, &len, &inner);
  const size_t row = (size_t)inner * es;
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)dst->data + ((size_t)(o * len + idx)) * row,
           (const char *)elem->data + (size_t)o * row, row);
}

/* The slice at index idx along `axis` of src, as a tensor of one rank less.
 * When nothing precedes the axis the slice is contiguous and *dst borrows
 * it; otherwise it is copied into *dst, whose data (owned) is reused from
 * call to call. */
static er_status take_slice(const er_tensor *src, int axis, int64_t idx, er_tensor *dst) {
  int64_t outer, len, inner, dims[ER_MAX_RANK];
  size_t es = er_dtype_size(src->dtype);
  split_at(src, axis, &outer, &len, &inner);
  for (int d = 0, s = 0; d < src->rank; d++)
    if (d != axis) dims[s++] = src->dims[d];
  const size_t row = (size_t)inner * es;
  if (outer == 1) {
    er__tensor_release(dst);
    er__tensor_set(dst, src->dtype, src->rank - 1, dims);
    dst->data = (char *)src->data + (size_t)idx * row;
    dst->nbytes = row;
    return ER_STATUS_OK;
  }
  if (!(dst->flags & ER_TENSOR_OWNS_DATA)) {
    er__tensor_set(dst, src->dtype, src->rank - 1, dims);
    ER_CHECK(er__tensor_alloc(dst, 0));
  }
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)dst->data + (size_t)o * row,
           (const char *)src->data + ((size_t)(o * len + idx)) * row, row);
  return ER_STATUS_OK;
}

/* The shape a stacked output of a run with zero iterations gets: the
 * per-iteration info with the axis of length 0 and unknown dims as 0 (any
 * such shape holds no elements). */
static er_status alloc_empty_stack(const er_kctx *ctx, int i, const er_tensor *elem_info,
                                   int axis) {
  er_tensor e = *elem_info;
  if (e.dtype == ER_DTYPE_UNDEFINED) e.dtype = ER_DTYPE_FLOAT;
  if (e.rank < 0) e.rank = 0;
  for (int d = 0; d < e.rank; d++)
    if (e.dims[d] < 0) e.dims[d] = 0;
  if (axis > e.rank) axis = e.rank;
  return alloc_stacked(ctx, i, &e, axis, 0);
}

/* ======================================================================== */
/* If                                                                        */
/* ======================================================================== */

static er_status if_check(er_kctx *ctx) {
  const er_graph *then_g, *else_g;
  ER_CHECK(er__attr_graph(ctx, "then_branch", &then_g));
  ER_CHECK(er__attr_graph(ctx, "else_branch", &else_g));
  ER_CHECK(er__require_type(ctx, 0, types_bool));
  ER_CHECK(require_scalar(ctx, 0, "cond"));
  if (then_g->n_outputs != ctx->n_out || else_g->n_outputs != ctx->n_out)
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH,
                        "the node has %d outputs but then_branch gives %d and else_branch %d",
                        ctx->n_out, (int)then_g->n_outputs, (int)else_g->n_outputs);
  /* A constant condition decides the branch, and with it the shapes. */
  const er_tensor *cond = ctx->in[0];
  const er_graph *only = NULL;
  if (cond->data && er__tensor_count(cond) == 1)
    only = er__load_i64(cond->data, ER_DTYPE_BOOL, 0) ? then_g : else_g;
  for (int i = 0; i < ctx->n_out; i++) {
    const er_tensor *a = sub_out_info(then_g, i), *b = sub_out_info(else_g, i);
    if (a->dtype != ER_DTYPE_UNDEFINED && b->dtype != ER_DTYPE_UNDEFINED && a->dtype != b->dtype)
      return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH,
                          "output %d is %s in then_branch but %s in else_branch", i,
                          er_dtype_name(a->dtype), er_dtype_name(b->dtype));
    er_tensor m;
    if (only) m = *sub_out_info(only, i);
    else merge_info(&m, a, b);
    set_output_info(ctx, i, &m);
  }
  return ER_STATUS_OK;
}

static er_status if_run(er_kctx *ctx) {
  const er_graph *then_g, *else_g;
  ER_CHECK(er__attr_graph(ctx, "then_branch", &then_g));
  ER_CHECK(er__attr_graph(ctx, "else_branch", &else_g));
  const er_tensor *cond = ctx->in[0];
  if (er__count(cond) != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "cond must hold exactly one element");
  const er_graph *g = er__load_i64(cond->data, ER_DTYPE_BOOL, 0) ? then_g : else_g;

  er_tensor *res = calloc((size_t)ctx->n_out + 1, sizeof *res);
  if (!res) return er__op_error(ctx, ER_STATUS_OUT_OF_MEMORY, "out of memory");
  er_status st = er__op_subgraph(ctx, g, NULL, 0, res, NULL);
  for (int i = 0; i < ctx->n_out && st == ER_STATUS_OK; i++) st = move_to_output(ctx, i, &res[i]);
  for (int i = 0; i < ctx->n_out; i++) er__tensor_release(&res[i]);
  free(res);
  return st;
}

/* ======================================================================== */
/* Loop                                                                      */
/* ======================================================================== */

/* Loop's inputs are (M, cond, v_initial...) with M and cond optional; its
 * body takes (iteration_num, cond, v...) and gives (cond, v..., scans...);
 * the node gives (v_final..., scan outputs...). */
typedef struct loop_shape {
  int n_carried;  /* N */
  int n_scans;    /* K */
} loop_shape;

static er_status loop_shape_of(const er_kctx *ctx, const er_graph *body, loop_shape *ls) {
  int n = ctx->n_in > 2 ? ctx->n_in - 2 : 0;
  if (body->n_inputs != 2 + n)
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH,
                        "body takes %d inputs; with %d loop-carried values it must take %d "
                        "(iteration_num, cond, carried...)",
                        (int)body->n_inputs, n, 2 + n);
  if (body->n_outputs < 1 + n)
    return er__op_error(
        ctx, ER_STATUS_INVALID_GRAPH,
        "body gives %d outputs; with %d loop-carried values it must give at least %d "
        "(cond, carried..., scan outputs...)",
        (int)body->n_outputs, n, 1 + n);
  int k = body->n_outputs - 1 - n;
  if (ctx->n_out != n + k)
    return er__op_error(
        ctx, ER_STATUS_INVALID_GRAPH,
        "the node has %d outputs; its body gives %d loop-carried values and %d scan "
        "outputs, so it must have %d",
        ctx->n_out, n, k, n + k);
  ls->n_carried = n;
  ls->n_scans = k;
  return ER_STATUS_OK;
}

static er_status loop_check(er_kctx *ctx) {
  const er_graph *body;
  loop_shape ls;
  ER_CHECK(er__attr_graph(ctx, "body", &body));
  ER_CHECK(loop_shape_of(ctx, body, &ls));
  if (er__in(ctx, 0)) {
    ER_CHECK(er__require_type(ctx, 0, types_int64));
    ER_CHECK(require_scalar(ctx, 0, "M (trip count)"));
  }
  if (er__in(ctx, 1)) {
    ER_CHECK(er__require_type(ctx, 1, types_bool));
    ER_CHECK(require_scalar(ctx, 1, "cond"));
  }
  ER_CHECK(same_dtype(ctx, ER_DTYPE_BOOL, sub_out_info(body, 0)->dtype, "the condition output", 0));
  for (int i = 0; i < ls.n_carried; i++) {
    const er_tensor *init = er__in(ctx, 2 + i);
    if (!init)
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "loop-carried input %d is missing", 2 + i);
    const er_tensor *out = sub_out_info(body, 1 + i);
    ER_CHECK(
        same_dtype(ctx, init->dtype, sub_in_info(body, 2 + i)->dtype, "loop-carried value", i));
    ER_CHECK(same_dtype(ctx, init->dtype, out->dtype, "loop-carried value", i));
    /* After zero iterations the initial value comes out, else the body's. */
    er_tensor m;
    merge_info(&m, init, out);
    if (m.dtype == ER_DTYPE_UNDEFINED) m.dtype = out->dtype;
    set_output_info(ctx, i, &m);
  }
  for (int k = 0; k < ls.n_scans; k++) {
    const er_tensor *e = sub_out_info(body, 1 + ls.n_carried + k);
    if (e->rank < 0 || e->rank + 1 > ER_MAX_RANK) {
      er__set_output(ctx, ls.n_carried + k, e->dtype, -1, NULL);
      continue;
    }
    int64_t dims[ER_MAX_RANK];
    dims[0] = -1;  /* the iteration count */
    for (int d = 0; d < e->rank; d++) dims[d + 1] = e->dims[d];
    er__set_output(ctx, ls.n_carried + k, e->dtype, e->rank + 1, dims);
  }
  return ER_STATUS_OK;
}

/* A scan output collected over iterations whose count is not known ahead:
 * a byte buffer that grows by doubling. */
typedef struct scan_acc {
  er_tensor elem;      /* dtype and shape of the first iteration's value */
  unsigned char *buf;  /* [count * elem bytes] */
  size_t cap, len;     /* bytes */
  int64_t count;       /* elements held (all iterations) */
} scan_acc;

static er_status acc_append(const er_kctx *ctx, scan_acc *a, int k, int64_t iter,
                            const er_tensor *v) {
  if (iter == 0) {
    a->elem = *v;
    a->elem.data = NULL;
    a->elem.flags = 0;
  } else if (!same_shape(&a->elem, v)) {
    char x[160], y[160];
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "scan output %d is %s %s in iteration %lld but %s %s in iteration 0; every "
                        "iteration must give the same shape",
                        k, er_dtype_name(v->dtype), er__shape_str(v, x, sizeof x), (long long)iter,
                        er_dtype_name(a->elem.dtype), er__shape_str(&a->elem, y, sizeof y));
  }
  int64_t n = er__count(v);
  if (a->count + n > ER_MAX_RUNTIME_ELEMENTS)
    return er__op_error(ctx, ER_STATUS_LIMIT,
                        "scan output %d would exceed %lld elements (ER_MAX_RUNTIME_ELEMENTS) after "
                        "%lld iterations",
                        k, (long long)ER_MAX_RUNTIME_ELEMENTS, (long long)iter + 1);
  if (a->len + v->nbytes > a->cap) {
    size_t cap = a->cap ? a->cap : 256;
    while (cap < a->len + v->nbytes) cap *= 2;
    unsigned char *nb = realloc(a->buf, cap);
    if (!nb)
      return er__op_error(ctx, ER_STATUS_OUT_OF_MEMORY, "out of memory collecting scan output %d",
                          k);
    a->buf = nb;
    a->cap = cap;
  }
  if (v->nbytes) memcpy(a->buf + a->len, v->data, v->nbytes);
  a->len += v->nbytes;
  a->count += n;
  return ER_STATUS_OK;
}

static er_status loop_run(er_kctx *ctx) {
  const er_graph *body;
  loop_shape ls;
  ER_CHECK(er__attr_graph(ctx, "body", &body));
  ER_CHECK(loop_shape_of(ctx, body, &ls));
  const int N = ls.n_carried, K = ls.n_scans;
  const er_tensor *M = er__in(ctx, 0), *C = er__in(ctx, 1);
  if (M && er__count(M) != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "M must hold one element");
  if (C && er__count(C) != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "cond must hold one element");
  const int64_t trip = M ? er__get_i64(M, 0) : INT64_MAX;
  bool cond = C ? er__load_i64(C->data, ER_DTYPE_BOOL, 0) != 0 : true;

  er_status st = ER_STATUS_OK;
  er_tensor *state = calloc((size_t)N + 1, sizeof *state);           /* [N] */
  er_tensor *outs = calloc((size_t)(1 + N + K), sizeof *outs);       /* [1+N+K] */
  const er_tensor **ins = calloc((size_t)(2 + N), sizeof *ins);      /* [2+N] */
  scan_acc *acc = calloc((size_t)K + 1, sizeof *acc);                /* [K] */
  bool *same = calloc((size_t)(1 + N + K), sizeof *same);            /* [1+N+K] */
  if (!state || !outs || !ins || !acc || !same) {
    st = er__op_error(ctx, ER_STATUS_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (int i = 0; i < N; i++) er__tensor_borrow(&state[i], ctx->in[2 + i]);
  /* Carried values the body passes through unchanged (its output is its
   * input: exporters route a decoder's weights and encoder features
   * through the loop this way) keep their state; copying them every
   * iteration was most of PaddleOCR SLANet's decoder step. */
  for (int i = 0; i < N; i++) same[1 + i] = body->outputs[1 + i] == body->inputs[2 + i];

  /* The body's first two inputs: iteration_num (int64 scalar) and cond
   * (bool scalar), backed by locals. */
  int64_t iter = 0;
  bool cond_in = true;
  er_tensor iter_t, cond_t;
  er__tensor_set(&iter_t, ER_DTYPE_INT64, 0, NULL);
  iter_t.data = &iter;
  iter_t.nbytes = sizeof iter;
  er__tensor_set(&cond_t, ER_DTYPE_BOOL, 0, NULL);
  cond_t.data = &cond_in;
  cond_t.nbytes = sizeof cond_in;
  ins[0] = &iter_t;
  ins[1] = &cond_t;

  for (iter = 0; iter < trip && cond; iter++) {
    if (iter >= ER_MAX_LOOP_ITERATIONS) {
      st = er__op_error(
          ctx, ER_STATUS_LIMIT,
          "still running after %lld iterations (ER_MAX_LOOP_ITERATIONS); the trip count "
          "or condition never ends it",
          (long long)ER_MAX_LOOP_ITERATIONS);
      goto done;
    }
    cond_in = cond;
    for (int i = 0; i < N; i++) ins[2 + i] = &state[i];
    st = er__op_subgraph(ctx, body, ins, 2 + N, outs, same);
    if (st != ER_STATUS_OK) {
      er__error_prefix("%s '%s' iteration %lld", ctx->node->op_type, ctx->node->name,
                       (long long)iter);
      goto done;
    }
    const er_tensor *c = &outs[0];
    if (c->dtype != ER_DTYPE_BOOL || er__count(c) != 1) {
      char buf[160];
      st = er__op_error(ctx, ER_STATUS_TYPE_MISMATCH,
                        "body's condition output is %s %s; it must be one bool",
                        er_dtype_name(c->dtype), er__shape_str(c, buf, sizeof buf));
      goto done;
    }
    cond = er__load_i64(c->data, ER_DTYPE_BOOL, 0) != 0;
    er__tensor_release(&outs[0]);
    /* The new carried values replace the old (which may be the inputs). */
    for (int i = 0; i < N; i++) {
      if (same[1 + i]) continue;
      er__tensor_release(&state[i]);
      state[i] = outs[1 + i];
      outs[1 + i].flags = 0;
      outs[1 + i].data = NULL;
    }
    for (int k = 0; k < K; k++) {
      st = acc_append(ctx, &acc[k], k, iter, &outs[1 + N + k]);
      er__tensor_release(&outs[1 + N + k]);
      if (st != ER_STATUS_OK) goto done;
    }
  }

  for (int i = 0; i < N && st == ER_STATUS_OK; i++) st = move_to_output(ctx, i, &state[i]);
  for (int k = 0; k < K && st == ER_STATUS_OK; k++) {
    if (!er__out(ctx, N + k)) continue;
    if (iter == 0) {
      st = alloc_empty_stack(ctx, N + k, sub_out_info(body, 1 + N + k), 0);
      continue;
    }
    st = alloc_stacked(ctx, N + k, &acc[k].elem, 0, iter);
    if (st == ER_STATUS_OK && acc[k].len) memcpy(ctx->out[N + k]->data, acc[k].buf, acc[k].len);
  }

done:
  for (int i = 0; state && i < N; i++) er__tensor_release(&state[i]);
  for (int i = 0; outs && i < 1 + N + K; i++) er__tensor_release(&outs[i]);
  for (int k = 0; acc && k < K; k++) free(acc[k].buf);
  free(state);
  free(outs);
  free(ins);
  free(acc);
  free(same);
  return st;
}

/* ======================================================================== */
/* Scan (version 9 and later)                                                */
/* ======================================================================== */

/* Attributes of Scan 9+, normalized. Axes are normalized against the
 * known ranks only at run time (or when the ranks are known at load). */
typedef struct scan_cfg {
  int n_states;                 /* N */
  int n_ins;                    /* M */
  int n_outs;                   /* K */
  const int64_t *in_axes, *in_dirs, *out_axes, *out_dirs; /* NULL = all 0 */
} scan_cfg;

/* Reads ints attribute `name`, which needs one entry per `per` (scan
 * input or output: `want` of them); directions must be 0 or 1. */
static er_status scan_ints(const er_kctx *ctx, const char *name, const char *per, int64_t want,
                           bool directions, const int64_t **out) {
  int64_t n;
  ER_CHECK(er__attr_ints(ctx, name, out, &n));
  if (n < 0) return ER_STATUS_OK;
  if (n != want)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "%s has %lld entries; it needs one per %s (%lld)", name, (long long)n, per,
                        (long long)want);
  for (int64_t i = 0; directions && i < n; i++)
    if ((*out)[i] != 0 && (*out)[i] != 1)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "%s[%lld] = %lld must be 0 (forward) or 1 (reverse)", name, (long long)i,
                          (long long)(*out)[i]);
  return ER_STATUS_OK;
}

static er_status scan_cfg_of(const er_kctx *ctx, const er_graph *body, scan_cfg *c) {
  int64_t m;
  memset(c, 0, sizeof *c);
  if (!er__node_attr(ctx->node, "num_scan_inputs"))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'num_scan_inputs' is missing");
  ER_CHECK(er__attr_int(ctx, "num_scan_inputs", 0, &m));
  if (m < 1 || m > ctx->n_in)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "num_scan_inputs %lld must be in [1, %d] (the inputs)", (long long)m,
                        ctx->n_in);
  c->n_ins = (int)m;
  c->n_states = ctx->n_in - c->n_ins;
  if (body->n_inputs != c->n_states + c->n_ins)
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH,
                        "body takes %d inputs; the node passes %d states and %d scan inputs",
                        (int)body->n_inputs, c->n_states, c->n_ins);
  if (body->n_outputs < c->n_states)
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH,
                        "body gives %d outputs; it must give at least the %d states",
                        (int)body->n_outputs, c->n_states);
  c->n_outs = body->n_outputs - c->n_states;
  if (ctx->n_out != body->n_outputs)
    return er__op_error(ctx, ER_STATUS_INVALID_GRAPH,
                        "the node has %d outputs but its body gives %d", ctx->n_out,
                        (int)body->n_outputs);
  for (int i = 0; i < ctx->n_in; i++)
    if (!er__in(ctx, i))
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input %d is missing", i);
  ER_CHECK(scan_ints(ctx, "scan_input_axes", "scan input", c->n_ins, false, &c->in_axes));
  ER_CHECK(scan_ints(ctx, "scan_input_directions", "scan input", c->n_ins, true, &c->in_dirs));
  ER_CHECK(scan_ints(ctx, "scan_output_axes", "scan output", c->n_outs, false, &c->out_axes));
  ER_CHECK(scan_ints(ctx, "scan_output_directions", "scan output", c->n_outs, true, &c->out_dirs));
  return ER_STATUS_OK;
}

/* The scan axis of scan input j (whose rank must be known), normalized. */
static er_status scan_in_axis(const er_kctx *ctx, const scan_cfg *c, int j, int *axis) {
  const er_tensor *t = ctx->in[c->n_states + j];
  if (t->rank == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "scan input %d is a scalar; it has no axis to scan", j);
  return er__norm_axis(ctx, "scan_input_axes entry", c->in_axes ? c->in_axes[j] : 0, t->rank, axis);
}

/* The stacking axis of scan output k for a per-iteration rank. */
static er_status scan_out_axis(const er_kctx *ctx, const scan_cfg *c, int k, int elem_rank,
                               int *axis) {
  return er__norm_axis(ctx, "scan_output_axes entry", c->out_axes ? c->out_axes[k] : 0,
                       elem_rank + 1, axis);
}

static er_status scan_check(er_kctx *ctx) {
  const er_graph *body;
  scan_cfg c;
  ER_CHECK(er__attr_graph(ctx, "body", &body));
  ER_CHECK(scan_cfg_of(ctx, body, &c));
  int64_t seq = -1;
  for (int j = 0; j < c.n_ins; j++) {
    const er_tensor *t = ctx->in[c.n_states + j];
    ER_CHECK(same_dtype(ctx, t->dtype, sub_in_info(body, c.n_states + j)->dtype, "scan input", j));
    if (t->rank < 0) continue;
    int axis;
    ER_CHECK(scan_in_axis(ctx, &c, j, &axis));
    int64_t len = t->dims[axis];
    if (len < 0) continue;
    if (seq >= 0 && len != seq)
      return er__op_error(
          ctx, ER_STATUS_INVALID_SHAPE,
          "scan input %d has %lld steps along its scan axis but an earlier one has %lld; "
          "they must match",
          j, (long long)len, (long long)seq);
    seq = len;
  }
  for (int i = 0; i < c.n_states; i++) {
    const er_tensor *init = ctx->in[i], *out = sub_out_info(body, i);
    ER_CHECK(same_dtype(ctx, init->dtype, sub_in_info(body, i)->dtype, "state", i));
    ER_CHECK(same_dtype(ctx, init->dtype, out->dtype, "state", i));
    er_tensor m;
    merge_info(&m, init, out);
    set_output_info(ctx, i, &m);
  }
  for (int k = 0; k < c.n_outs; k++) {
    const er_tensor *e = sub_out_info(body, c.n_states + k);
    if (e->rank < 0 || e->rank + 1 > ER_MAX_RANK) {
      er__set_output(ctx, c.n_states + k, e->dtype, -1, NULL);
      continue;
    }
    int axis;
    ER_CHECK(scan_out_axis(ctx, &c, k, e->rank, &axis));
    int64_t dims[ER_MAX_RANK];
    for (int d = 0, s = 0; d <= e->rank; d++) dims[d] = d == axis ? seq : e->dims[s++];
    er__set_output(ctx, c.n_states + k, e->dtype, e->rank + 1, dims);
  }
  return ER_STATUS_OK;
}

static er_status scan_run(er_kctx *ctx) {
  const er_graph *body;
  scan_cfg c;
  ER_CHECK(er__attr_graph(ctx, "body", &body));
  ER_CHECK(scan_cfg_of(ctx, body, &c));
  const int N = c.n_states, M = c.n_ins, K = c.n_outs;
  int in_axis[ER_MAX_NODE_IO];
  int64_t seq = -1;
  for (int j = 0; j < M; j++) {
    ER_CHECK(scan_in_axis(ctx, &c, j, &in_axis[j]));
    int64_t len = ctx->in[N + j]->dims[in_axis[j]];
    if (seq >= 0 && len != seq)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "scan input %d has %lld steps but scan input 0 has %lld; they must match",
                          j, (long long)len, (long long)seq);
    seq = len;
  }

  er_status st = ER_STATUS_OK;
  er_tensor *state = calloc((size_t)N + 1, sizeof *state);         /* [N] */
  er_tensor *slices = calloc((size_t)M + 1, sizeof *slices);       /* [M] */
  er_tensor *outs = calloc((size_t)(N + K) + 1, sizeof *outs);     /* [N+K] */
  const er_tensor **ins = calloc((size_t)(N + M) + 1, sizeof *ins); /* [N+M] */
  int *out_axis = calloc((size_t)K + 1, sizeof *out_axis);         /* [K] */
  if (!state || !slices || !outs || !ins || !out_axis) {
    st = er__op_error(ctx, ER_STATUS_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (int i = 0; i < N; i++) er__tensor_borrow(&state[i], ctx->in[i]);

  for (int64_t t = 0; t < seq; t++) {
    for (int i = 0; i < N; i++) ins[i] = &state[i];
    for (int j = 0; j < M; j++) {
      int64_t idx = (c.in_dirs && c.in_dirs[j]) ? seq - 1 - t : t;
      st = take_slice(ctx->in[N + j], in_axis[j], idx, &slices[j]);
      if (st != ER_STATUS_OK) goto done;
      ins[N + j] = &slices[j];
    }
    st = er__op_subgraph(ctx, body, ins, N + M, outs, NULL);
    if (st != ER_STATUS_OK) {
      er__error_prefix("%s '%s' iteration %lld", ctx->node->op_type, ctx->node->name, (long long)t);
      goto done;
    }
    for (int i = 0; i < N; i++) {
      er__tensor_release(&state[i]);
      state[i] = outs[i];
      outs[i].flags = 0;
      outs[i].data = NULL;
    }
    for (int k = 0; k < K; k++) {
      er_tensor *e = &outs[N + k];
      er_tensor *o = er__out(ctx, N + k);
      if (o && t == 0) {
        st = scan_out_axis(ctx, &c, k, e->rank, &out_axis[k]);
        if (st == ER_STATUS_OK) st = alloc_stacked(ctx, N + k, e, out_axis[k], seq);
      } else if (o) {
        /* The stacked output's shape minus its axis must match. */
        er_tensor want = *o;
        want.rank = o->rank - 1;
        for (int d = out_axis[k]; d < want.rank; d++) want.dims[d] = o->dims[d + 1];
        if (!same_shape(&want, e)) {
          char x[160], y[160];
          st = er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "scan output %d is %s %s in iteration %lld but %s %s in iteration 0", k,
                            er_dtype_name(e->dtype), er__shape_str(e, x, sizeof x), (long long)t,
                            er_dtype_name(want.dtype), er__shape_str(&want, y, sizeof y));
        }
      }
      if (st == ER_STATUS_OK && o) {
        int64_t pos = (c.out_dirs && c.out_dirs[k]) ? seq - 1 - t : t;
        put_slice(o, out_axis[k], pos, e);
      }
      er__tensor_release(e);
      if (st != ER_STATUS_OK) goto done;
    }
  }

  for (int i = 0; i < N && st == ER_STATUS_OK; i++) st = move_to_output(ctx, i, &state[i]);
  for (int k = 0; k < K && st == ER_STATUS_OK && seq == 0; k++) {
    if (!er__out(ctx, N + k)) continue;
    const er_tensor *e = sub_out_info(body, N + k);
    int axis = 0;
    if (e->rank >= 0) st = scan_out_axis(ctx, &c, k, e->rank, &axis);
    if (st == ER_STATUS_OK) st = alloc_empty_stack(ctx, N + k, e, axis);
  }

done:
  for (int i = 0; state && i < N; i++) er__tensor_release(&state[i]);
  for (int j = 0; slices && j < M; j++) er__tensor_release(&slices[j]);
  for (int i = 0; outs && i < N + K; i++) er__tensor_release(&outs[i]);
  free(state);
  free(slices);
  free(outs);
  free(ins);
  free(out_axis);
  return st;
}

/* ======================================================================== */
/* Scan version 8: batched, with optional sequence_lens                      */
/* ======================================================================== */

/* Scan 8 takes (sequence_lens?, states..., scan inputs...). Every input
 * has a batch axis 0 that the body never sees; scan inputs are scanned
 * along axis 1. Each batch row runs its own loop of sequence_lens[b] steps
 * (all of axis 1 by default); scan outputs are [batch, max_seq, ...], with
 * the steps past a row's length left zero. */
static er_status scan8_cfg_of(const er_kctx *ctx, const er_graph *body, scan_cfg *c) {
  int64_t m;
  memset(c, 0, sizeof *c);
  if (!er__node_attr(ctx->node, "num_scan_inputs"))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute 'num_scan_inputs' is missing");
  ER_CHECK(er__attr_int(ctx, "num_scan_inputs", 0, &m));
  if (m < 1 || m > ctx->n_in - 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "num_scan_inputs %lld must be in [1, %d]",
                        (long long)m, ctx->n_in - 1);
  c->n_ins = (int)m;
  c->n_states = ctx->n_in - 1 - c->n_ins;
  if (body->n_inputs != c->n_states + c->n_ins || body->n_outputs < c->n_states ||
      ctx->n_out != body->n_outputs)
    return er__op_error(
        ctx, ER_STATUS_INVALID_GRAPH,
        "body takes %d inputs and gives %d outputs; the node passes %d states and %d "
        "scan inputs and has %d outputs",
        (int)body->n_inputs, (int)body->n_outputs, c->n_states, c->n_ins, ctx->n_out);
  c->n_outs = body->n_outputs - c->n_states;
  for (int i = 1; i < ctx->n_in; i++)
    if (!er__in(ctx, i))
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input %d is missing", i);
  ER_CHECK(scan_ints(ctx, "directions", "scan input", c->n_ins, true, &c->in_dirs));
  return ER_STATUS_OK;
}

static er_status scan8_check(er_kctx *ctx) {
  const er_graph *body;
  scan_cfg c;
  ER_CHECK(er__attr_graph(ctx, "body", &body));
  ER_CHECK(scan8_cfg_of(ctx, body, &c));
  if (er__in(ctx, 0)) {
    ER_CHECK(er__require_type(ctx, 0, types_int64));
    ER_CHECK(er__require_rank(ctx, 0, 1, 1));
  }
  int64_t batch = -1, seq = -1;
  for (int j = 0; j < c.n_ins; j++) {
    ER_CHECK(er__require_rank(ctx, 1 + c.n_states + j, 2, ER_MAX_RANK));
    const er_tensor *t = ctx->in[1 + c.n_states + j];
    if (t->rank < 0) continue;
    if (t->dims[0] >= 0) batch = t->dims[0];
    if (t->dims[1] >= 0) seq = t->dims[1];
  }
  for (int i = 0; i < c.n_states; i++) {
    ER_CHECK(er__require_rank(ctx, 1 + i, 1, ER_MAX_RANK));
    set_output_info(ctx, i, ctx->in[1 + i]);
  }
  for (int k = 0; k < c.n_outs; k++) {
    const er_tensor *e = sub_out_info(body, c.n_states + k);
    if (e->rank < 0 || e->rank + 2 > ER_MAX_RANK) {
      er__set_output(ctx, c.n_states + k, e->dtype, -1, NULL);
      continue;
    }
    int64_t dims[ER_MAX_RANK];
    dims[0] = batch;
    dims[1] = seq;
    for (int d = 0; d < e->rank; d++) dims[2 + d] = e->dims[d];
    er__set_output(ctx, c.n_states + k, e->dtype, e->rank + 2, dims);
  }
  return ER_STATUS_OK;
}

/* Row b of a tensor with a leading batch axis, borrowed. */
static void batch_row(const er_tensor *src, int64_t b, er_tensor *dst) {
  int64_t outer, len, inner;
  split_at(src, 0, &outer, &len, &inner);
  size_t row = (size_t)inner * er_dtype_size(src->dtype);
  er__tensor_set(dst, src->dtype, src->rank - 1, src->dims + 1);
  dst->data = (char *)src->data + (size_t)b * row;
  dst->nbytes = row;
}

static er_status scan8_run(er_kctx *ctx) {
  const er_graph *body;
  scan_cfg c;
  ER_CHECK(er__attr_graph(ctx, "body", &body));
  ER_CHECK(scan8_cfg_of(ctx, body, &c));
  const int N = c.n_states, M = c.n_ins, K = c.n_outs;
  const er_tensor *SL = er__in(ctx, 0);
  const er_tensor *first = ctx->in[1 + N];
  const int64_t batch = first->dims[0], seq = first->dims[1];
  for (int j = 0; j < M; j++) {
    const er_tensor *t = ctx->in[1 + N + j];
    if (t->dims[0] != batch || t->dims[1] != seq)
      return er__op_error(
          ctx, ER_STATUS_INVALID_SHAPE,
          "scan input %d has batch %lld and length %lld; scan input 0 has %lld and %lld", j,
          (long long)t->dims[0], (long long)t->dims[1], (long long)batch, (long long)seq);
  }
  for (int i = 0; i < N; i++)
    if (ctx->in[1 + i]->dims[0] != batch)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "state %d has batch %lld; the scan inputs have %lld", i,
                          (long long)ctx->in[1 + i]->dims[0], (long long)batch);
  if (SL && er__count(SL) != batch)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "sequence_lens has %lld entries; the batch is %lld",
                        (long long)er__count(SL), (long long)batch);

  er_status st = ER_STATUS_OK;
  er_tensor *state = calloc((size_t)N + 1, sizeof *state);          /* [N] */
  er_tensor *slices = calloc((size_t)M + 1, sizeof *slices);        /* [M] */
  er_tensor *outs = calloc((size_t)(N + K) + 1, sizeof *outs);      /* [N+K] */
  const er_tensor **ins = calloc((size_t)(N + M) + 1, sizeof *ins); /* [N+M] */
  if (!state || !slices || !outs || !ins) {
    st = er__op_error(ctx, ER_STATUS_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  /* Final states have the initial states' shapes. */
  for (int i = 0; i < N && st == ER_STATUS_OK; i++) {
    const er_tensor *s0 = ctx->in[1 + i];
    st = er__op_output(ctx, i, s0->dtype, s0->rank, s0->dims);
  }
  for (int64_t b = 0; b < batch && st == ER_STATUS_OK; b++) {
    int64_t len = SL ? er__get_i64(SL, b) : seq;
    if (len < 0 || len > seq) {
      st = er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                        "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                        (long long)len, (long long)seq);
      goto done;
    }
    for (int i = 0; i < N; i++) batch_row(ctx->in[1 + i], b, &state[i]);
    for (int64_t t = 0; t < len; t++) {
      for (int i = 0; i < N; i++) ins[i] = &state[i];
      for (int j = 0; j < M; j++) {
        er_tensor row;
        int64_t idx = (c.in_dirs && c.in_dirs[j]) ? len - 1 - t : t;
        batch_row(ctx->in[1 + N + j], b, &row);
        batch_row(&row, idx, &slices[j]);
        ins[N + j] = &slices[j];
      }
      st = er__op_subgraph(ctx, body, ins, N + M, outs, NULL);
      if (st != ER_STATUS_OK) {
        er__error_prefix("%s '%s' batch %lld iteration %lld", ctx->node->op_type, ctx->node->name,
                         (long long)b, (long long)t);
        goto done;
      }
      for (int i = 0; i < N; i++) {
        er__tensor_release(&state[i]);
        state[i] = outs[i];
        outs[i].flags = 0;
        outs[i].data = NULL;
      }
      for (int k = 0; k < K && st == ER_STATUS_OK; k++) {
        er_tensor *e = &outs[N + k];
        er_tensor *o = er__out(ctx, N + k);
        if (!o) continue;
        if (!o->data) {
          /* First step anywhere: the output becomes [batch, seq, e...]. */
          int64_t dims[ER_MAX_RANK];
          if (e->rank + 2 > ER_MAX_RANK) {
            st = er__op_error(ctx, ER_STATUS_LIMIT,
                              "scan output %d would exceed rank %d (ER_MAX_RANK)", k, ER_MAX_RANK);
            break;
          }
          dims[0] = batch;
          dims[1] = seq;
          for (int d = 0; d < e->rank; d++) dims[2 + d] = e->dims[d];
          st = er__op_output(ctx, N + k, e->dtype, e->rank + 2, dims);
          if (st != ER_STATUS_OK) break;
        }
        er_tensor row, want;
        batch_row(o, b, &row);
        batch_row(&row, 0, &want);
        if (!same_shape(&want, e)) {
          char x[160], y[160];
          st = er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "scan output %d is %s %s at batch %lld step %lld but %s %s before", k,
                            er_dtype_name(e->dtype), er__shape_str(e, x, sizeof x), (long long)b,
                            (long long)t, er_dtype_name(want.dtype),
                            er__shape_str(&want, y, sizeof y));
          break;
        }
        /* Scan outputs are in step order whatever the input directions. */
        memcpy((char *)row.data + (size_t)t * want.nbytes, e->data, want.nbytes);
      }
      for (int k = 0; k < K; k++) er__tensor_release(&outs[N + k]);
      if (st != ER_STATUS_OK) goto done;
    }
    /* This row's final states. */
    for (int i = 0; i < N; i++) {
      er_tensor *o = er__out(ctx, i);
      if (!o) continue;
      er_tensor row;
      batch_row(o, b, &row);
      if (!same_shape(&row, &state[i])) {
        char x[160], y[160];
        st =
            er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                         "state %d ends as %s %s but starts as %s %s; states must keep their shape",
                         i, er_dtype_name(state[i].dtype), er__shape_str(&state[i], x, sizeof x),
                         er_dtype_name(row.dtype), er__shape_str(&row, y, sizeof y));
        goto done;
      }
      if (row.nbytes) memcpy(row.data, state[i].data, row.nbytes);
      er__tensor_release(&state[i]);
    }
  }
  /* Scan outputs no step produced (every row empty). */
  for (int k = 0; k < K && st == ER_STATUS_OK; k++) {
    er_tensor *o = er__out(ctx, N + k);
    if (!o || o->data) continue;
    er_tensor e = *sub_out_info(body, N + k);
    if (e.dtype == ER_DTYPE_UNDEFINED) e.dtype = ER_DTYPE_FLOAT;
    if (e.rank < 0) e.rank = 0;
    if (e.rank + 2 > ER_MAX_RANK) e.rank = ER_MAX_RANK - 2;
    int64_t dims[ER_MAX_RANK];
    dims[0] = batch;
    dims[1] = seq;
    for (int d = 0; d < e.rank; d++) dims[2 + d] = e.dims[d] < 0 ? 0 : e.dims[d];
    st = er__op_output(ctx, N + k, e.dtype, e.rank + 2, dims);
  }

done:
  for (int i = 0; state && i < N; i++) er__tensor_release(&state[i]);
  for (int i = 0; outs && i < N + K; i++) er__tensor_release(&outs[i]);
  free(state);
  free(slices);
  free(outs);
  free(ins);
  return st;
}

/* ======================================================================== */
/* Op definitions                                                            */
/* ======================================================================== */

/* If: versions 1 to 25 differ only in the types they list; a branch
 * producing an undeclared type fails when the subgraph is loaded. */
static const er_op_def op_if = {
    .name = "If", .domain = "", .min_version = 1, .max_version = 25,
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = ER_VARIADIC,
    .flags = ER_OP_DYNAMIC_OUTPUT,
    .check = if_check, .run = if_run,
};

/* Loop: M and cond are optional positional inputs, so the arity starts at
 * zero. */
static const er_op_def op_loop = {
    .name = "Loop", .domain = "", .min_version = 1, .max_version = 25,
    .min_inputs = 0, .max_inputs = ER_VARIADIC, .min_outputs = 0, .max_outputs = ER_VARIADIC,
    .flags = ER_OP_DYNAMIC_OUTPUT,
    .check = loop_check, .run = loop_run,
};

/* Scan 8: sequence_lens is an optional positional input, so the arity
 * starts at zero. */
static const er_op_def op_scan8 = {
    .name = "Scan", .domain = "", .min_version = 8, .max_version = 8,
    .min_inputs = 0, .max_inputs = ER_VARIADIC, .min_outputs = 0, .max_outputs = ER_VARIADIC,
    .flags = ER_OP_DYNAMIC_OUTPUT,
    .check = scan8_check, .run = scan8_run,
};

static const er_op_def op_scan = {
    .name = "Scan", .domain = "", .min_version = 9, .max_version = 25,
    .min_inputs = 1, .max_inputs = ER_VARIADIC, .min_outputs = 0, .max_outputs = ER_VARIADIC,
    .flags = ER_OP_DYNAMIC_OUTPUT,
    .check = scan_check, .run = scan_run,
};

const er_op_def *const er__ops_control[] = {
    &op_if,
    &op_loop,
    &op_scan8,
    &op_scan,
    NULL,
};
