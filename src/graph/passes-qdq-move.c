/* passes-qdq-move.c - the QDQ pass's movements: Q up and DQ down through
 * data-movement and max ops, so that fusions see their DQs and Qs next to
 * the op (see passes-qdq.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/passes-qdq.h"

/* ======================================================================== */
/* Moving Q up and DQ down through data-movement ops                         */
/* ======================================================================== */

/* Ops whose output elements are input elements (or maxima of them), so
 * that a monotonic elementwise map commutes with them; only input 0 is
 * data, the others must be constants. */
static bool movement_op(const qctx *qc, const er_node *n) {
  static const char *const ops[] = {"Reshape",   "Flatten",      "Squeeze", "Unsqueeze",     "Transpose",
                                    "Identity",  "MaxPool",      "GlobalMaxPool", "Slice", "Expand",
                                    "Tile",      "DepthToSpace", "SpaceToDepth", "Resize", NULL};
  if (n->domain[0] != '\0' || n->n_inputs < 1 || n->inputs[0] < 0) return false;
  bool known = false;
  for (int k = 0; ops[k]; k++)
    if (strcmp(n->op_type, ops[k]) == 0) known = true;
  if (!known) return false;
  for (int k = 1; k < n->n_outputs; k++)
    if (n->outputs[k] >= 0) return false; /* MaxPool's Indices */
  for (int k = 1; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0 && !er__qdq_const_of(qc->rw.g, n->inputs[k])) return false;
  if (er__rw_is(n, "Resize")) {
    const er_attr *mode = er__node_attr(n, "mode");
    if (!mode || mode->type != ER_ATTR_STRING || strcmp(mode->s, "nearest") != 0) return false;
  }
  if (er__rw_is(n, "MaxPool")) {
    /* Every window must hold an input element (pads smaller than the
     * kernel): an empty window is -inf in float but 0 in integers. */
    const er_attr *ks = er__node_attr(n, "kernel_shape"), *pads = er__node_attr(n, "pads");
    if (!ks || ks->type != ER_ATTR_INTS) return false;
    if (pads && pads->type == ER_ATTR_INTS)
      for (int64_t d = 0; d < pads->n; d++)
        if (pads->ints[d] >= ks->ints[d % ks->n]) return false;
  }
  return true;
}

/* Node p with input 0 of type t: its output info (when the op accepts t). */
static bool accepts_type(const qctx *qc, const er_node *p, er_dtype t, er_tensor *out) {
  er_tensor over = qc->rw.g->values[p->inputs[0]].info, buf[16], *ptrs[16];
  if (p->n_inputs > 16) return false;
  over.dtype = t;
  er__qdq_input_infos(qc, p, 0, &over, buf, ptrs);
  return er__qdq_check_with(qc, p, ptrs, out) && out->dtype == t;
}

/* Q(P(u)) -> P(Q(u)). */
er_status er__qdq_hoist_q(qctx *qc, int32_t q, bool *done) {
  er_graph *g = qc->rw.g;
  *done = false;
  qparam qp;
  if (!er__qdq_q_per_tensor(qc, q, &qp)) return ER_STATUS_OK;
  int32_t v = g->nodes[q].inputs[0], p = er__rw_producer(&qc->rw, v);
  if (p < 0 || er__rw_sole_consumer(&qc->rw, v) != q || g->nodes[p].n_outputs < 1 || g->nodes[p].outputs[0] != v)
    return ER_STATUS_OK;
  er_node *pn = &g->nodes[p];
  if (er__rw_is(pn, "Concat")) {
    /* Every input gets its own Q. */
    if (pn->n_inputs < 1 || pn->n_inputs > 64) return ER_STATUS_OK;
    for (int k = 0; k < pn->n_inputs; k++) {
      int32_t u = pn->inputs[k];
      if (u < 0 || er__qdq_vtype(g, u) != ER_DTYPE_FLOAT || er__qdq_const_of(g, u) || qc->rw.uses[u] != 1) return ER_STATUS_OK;
    }
    int32_t q_out = g->nodes[q].outputs[0];
    int32_t new_in[64];
    for (int k = 0; k < g->nodes[p].n_inputs; k++) {
      int32_t u = g->nodes[p].inputs[k], t, idx;
      ER_CHECK(er__qdq_new_value(qc, g->nodes[q].name, qp.type, &g->values[u].info, &t));
      er_node proto = g->nodes[q];
      int32_t qin[3] = {u, g->nodes[q].inputs[1], g->nodes[q].n_inputs > 2 ? g->nodes[q].inputs[2] : -1};
      ER_CHECK(er__rw_add_node(&qc->rw, &proto, qin, g->nodes[q].n_inputs, &t, 1, &idx));
      new_in[k] = t;
    }
    pn = &g->nodes[p];
    ER_CHECK(er__rw_set_inputs(g, pn, new_in, pn->n_inputs));
    er__rw_redirect_output(g, p, v, q_out);
    qc->rw.dead[q] = true;
    *done = true;
    return ER_STATUS_OK;
  }
  if (!movement_op(qc, pn)) return ER_STATUS_OK;
  int32_t u = pn->inputs[0];
  if (er__qdq_vtype(g, u) != ER_DTYPE_FLOAT || qc->rw.uses[u] != 1 || er__qdq_const_of(g, u)) return ER_STATUS_OK;
  er_tensor out;
  if (!accepts_type(qc, pn, qp.type, &out)) return ER_STATUS_OK;
  int32_t t, q_out = g->nodes[q].outputs[0];
  ER_CHECK(er__qdq_new_value(qc, g->nodes[q].name, qp.type, &g->values[u].info, &t));
  er_node *qn = &g->nodes[q];
  qn->inputs[0] = u;
  qn->outputs[0] = t;
  g->values[t].producer = q;
  pn = &g->nodes[p];
  pn->inputs[0] = t;
  pn->outputs[0] = q_out;
  g->values[q_out].producer = p;
  g->values[v].producer = -1;
  *done = true;
  return ER_STATUS_OK;
}

/* P(DQ(x)) -> DQ(P(x)) for one reader P of the DQ's output. */
er_status er__qdq_sink_dq(qctx *qc, int32_t p, bool *done) {
  er_graph *g = qc->rw.g;
  *done = false;
  er_node *pn = &g->nodes[p];
  if (pn->n_outputs < 1 || pn->outputs[0] < 0 || qc->rw.uses[pn->outputs[0]] == 0) return ER_STATUS_OK;
  qparam xp;
  int32_t xq;
  if (er__rw_is(pn, "Concat")) {
    if (pn->n_inputs < 1 || pn->n_inputs > 64 || pn->n_outputs != 1) return ER_STATUS_OK;
    /* Input 0's parameters are read before the loop, not on its first
     * trip: gcc (-Wmaybe-uninitialized under -fsanitize=thread) could not
     * see that the trip always runs, and every other input is compared
     * with them. */
    int32_t qs[64];
    qparam first;
    if (pn->inputs[0] < 0 || !er__qdq_dq_per_tensor(qc, er__rw_producer(&qc->rw, pn->inputs[0]), &first, &qs[0])) return ER_STATUS_OK;
    for (int k = 1; k < pn->n_inputs; k++) {
      if (pn->inputs[k] < 0 || !er__qdq_dq_per_tensor(qc, er__rw_producer(&qc->rw, pn->inputs[k]), &xp, &qs[k])) return ER_STATUS_OK;
      if (!er__qdq_same_param(&first, &xp)) return ER_STATUS_OK;
    }
    er_tensor over = g->values[pn->outputs[0]].info;
    over.dtype = first.type;
    int32_t d0 = er__rw_producer(&qc->rw, pn->inputs[0]), t, idx, y = pn->outputs[0];
    ER_CHECK(er__qdq_new_value(qc, pn->name, first.type, &over, &t));
    pn = &g->nodes[p];
    ER_CHECK(er__rw_set_inputs(g, pn, qs, pn->n_inputs));
    er_node proto = g->nodes[d0];
    int32_t din[3] = {t, proto.inputs[1], proto.n_inputs > 2 ? proto.inputs[2] : -1};
    er__rw_redirect_output(g, p, y, t);
    ER_CHECK(er__rw_add_node(&qc->rw, &proto, din, proto.n_inputs, &y, 1, &idx));
    *done = true;
    return ER_STATUS_OK;
  }
  if (!movement_op(qc, pn)) return ER_STATUS_OK;
  int32_t d = er__rw_producer(&qc->rw, pn->inputs[0]);
  if (!er__qdq_dq_per_tensor(qc, d, &xp, &xq)) return ER_STATUS_OK;
  for (int k = 1; k < pn->n_inputs; k++)
    if (pn->inputs[k] == pn->inputs[0]) return ER_STATUS_OK;
  er_tensor out;
  if (!accepts_type(qc, pn, xp.type, &out)) return ER_STATUS_OK;
  int32_t y = pn->outputs[0], t, idx;
  ER_CHECK(er__qdq_new_value(qc, pn->name, xp.type, &out, &t));
  pn = &g->nodes[p];
  pn->inputs[0] = xq;
  er__rw_redirect_output(g, p, y, t);
  if (qc->rw.uses[g->nodes[d].outputs[0]] == 1) {
    /* The DQ moves below P. Its old output, which only P read, is made by
     * no one now: leaving it naming the DQ left a producer index that
     * outlived the node list's compaction (fuzz finding stale-producer). */
    er_node *dn = &g->nodes[d];
    g->values[dn->outputs[0]].producer = -1;
    dn->inputs[0] = t;
    dn->outputs[0] = y;
    g->values[y].producer = d;
  } else {
    er_node proto = g->nodes[d];
    int32_t din[3] = {t, proto.inputs[1], proto.n_inputs > 2 ? proto.inputs[2] : -1};
    ER_CHECK(er__rw_add_node(&qc->rw, &proto, din, proto.n_inputs, &y, 1, &idx));
  }
  *done = true;
  return ER_STATUS_OK;
}
