/* passes-shape.c - rewrites of data movement and no-op nodes (see
 * passes.h for the contract every rewrite keeps):
 *
 *   identity    Identity / inference Dropout removed
 *   transpose   Transpose o Transpose composed; identity perms removed
 *   reshape     Reshape o Reshape -> one Reshape
 *   slice       Slice o Slice on disjoint axes -> one Slice */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/passes.h"

er_status er__pass_identity(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *n = &g->nodes[i];
    bool drop = er__rw_is(n, "Identity") ||
                (er__rw_is(n, "Dropout") && (n->n_outputs < 2 || n->outputs[1] < 0 || pc->uses[n->outputs[1]] == 0) &&
                 (n->n_inputs < 3 || n->inputs[2] < 0));
    if (!drop || n->n_inputs < 1 || n->inputs[0] < 0 || n->outputs[0] < 0) continue;
    int32_t in = n->inputs[0], out = n->outputs[0];
    if (pc->uses[out] >= ER_RW_PINNED) continue; /* graph output or captured */
    /* Readers of out read in instead. */
    for (int32_t j = 0; j < g->n_nodes; j++) {
      if (pc->dead[j]) continue;
      er_node *m = &g->nodes[j];
      for (int k = 0; k < m->n_inputs; k++)
        if (m->inputs[k] == out) m->inputs[k] = in;
    }
    pc->dead[i] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

er_status er__pass_transpose(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *t1 = &g->nodes[i];
    if (!er__rw_is(t1, "Transpose")) continue;
    const er_attr *p1 = er__node_attr(t1, "perm");
    if (!p1 || p1->type != ER_ATTR_INTS || p1->n > ER_MAX_RANK) continue;
    int32_t c = er__rw_sole_consumer(pc, t1->outputs[0]);
    if (c < 0 || !er__rw_is(&g->nodes[c], "Transpose")) continue;
    er_node *t2 = &g->nodes[c];
    const er_attr *p2 = er__node_attr(t2, "perm");
    if (!p2 || p2->type != ER_ATTR_INTS || p2->n != p1->n) continue;
    /* out[k] = in1[p2[k]] = x[p1[p2[k]]] */
    int64_t *perm = er__arena_array(g->arena, (size_t)p1->n + 1, sizeof *perm);
    if (!perm) return ER_STATUS_OUT_OF_MEMORY;
    bool identity = true, ok = true;
    for (int64_t k = 0; k < p1->n; k++) {
      int64_t q = p2->ints[k];
      if (q < 0 || q >= p1->n) ok = false;
      else perm[k] = p1->ints[q];
      if (ok && perm[k] != k) identity = false;
    }
    if (!ok) continue;
    if (identity && pc->uses[t2->outputs[0]] < ER_RW_PINNED) {
      /* Both vanish: readers of t2's output read t1's input. */
      int32_t in = t1->inputs[0], out = t2->outputs[0];
      for (int32_t j = 0; j < g->n_nodes; j++) {
        if (pc->dead[j]) continue;
        er_node *m = &g->nodes[j];
        for (int k = 0; k < m->n_inputs; k++)
          if (m->inputs[k] == out) m->inputs[k] = in;
      }
      pc->dead[i] = pc->dead[c] = true;
    } else {
      ER_CHECK(er__pass_set_perm(g, t2, perm, p1->n));
      t2->inputs[0] = t1->inputs[0];
      pc->dead[i] = true;
    }
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

er_status er__pass_reshape(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *r1 = &g->nodes[i];
    if (!er__rw_is(r1, "Reshape") || r1->version < 5) continue;
    int32_t c = er__rw_sole_consumer(pc, r1->outputs[0]);
    if (c < 0 || !er__rw_is(&g->nodes[c], "Reshape") || g->nodes[c].inputs[0] != r1->outputs[0]) continue;
    er_node *r2 = &g->nodes[c];
    /* The second reshape's shape must not copy dims (0) from the first's
     * output unless allowzero is set; with a constant shape free of 0 the
     * first reshape is irrelevant. */
    const er_tensor *s = er__graph_const(g, r2->inputs[1]);
    if (!s) continue;
    const er_attr *az = er__node_attr(r2, "allowzero");
    bool copies = false;
    for (int64_t k = 0; k < er__tensor_count(s); k++)
      if (er__get_i64(s, k) == 0 && !(az && az->i)) copies = true;
    if (copies) continue;
    r2->inputs[0] = r1->inputs[0];
    pc->dead[i] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}

/* ---- Slice chains ------------------------------------------------------------ */

/* A Slice's constant starts, ends, axes and steps (opset 10+), axes made
 * non-negative. False when any is computed at run time, the lists do not
 * fit, or an axis is out of range or repeated: those are left to the op's
 * own checks at run time. */
typedef struct slice_lists {
  int n;
  int64_t starts[ER_MAX_RANK], ends[ER_MAX_RANK], axes[ER_MAX_RANK], steps[ER_MAX_RANK];
} slice_lists;

static bool slice_lists_of(const er_graph *g, const er_node *n, int rank, slice_lists *l) {
  if (!er__rw_is(n, "Slice") || n->version < 10 || n->n_inputs < 3 || rank < 0) return false;
  const er_tensor *t[4] = {NULL, NULL, NULL, NULL};
  for (int k = 0; k < 4; k++) {
    int32_t v = k + 1 < n->n_inputs ? n->inputs[k + 1] : -1;
    if (v < 0) {
      if (k < 2) return false;
      continue;
    }
    t[k] = er__graph_const(g, v);
    if (!t[k] || t[k]->rank != 1 || (t[k]->dtype != ER_DTYPE_INT64 && t[k]->dtype != ER_DTYPE_INT32)) return false;
  }
  int64_t cnt = er__tensor_count(t[0]);
  if (cnt < 1 || cnt > rank) return false;
  for (int k = 1; k < 4; k++)
    if (t[k] && er__tensor_count(t[k]) != cnt) return false;
  l->n = (int)cnt;
  bool seen[ER_MAX_RANK] = {false};
  for (int i = 0; i < l->n; i++) {
    l->starts[i] = er__get_i64(t[0], i);
    l->ends[i] = er__get_i64(t[1], i);
    int64_t a = t[2] ? er__get_i64(t[2], i) : i;
    if (a < -(int64_t)rank || a >= rank) return false;
    if (a < 0) a += rank;
    if (seen[a]) return false;
    seen[a] = true;
    l->axes[i] = a;
    l->steps[i] = t[3] ? er__get_i64(t[3], i) : 1;
    if (l->steps[i] == 0) return false;
  }
  return true;
}

/* Slice(Slice(x)) on disjoint axes -> one Slice. The second Slice's axes
 * have the same extent before and after the first, so its clamping is
 * unchanged. YOLOv5's and YOLOX's "Focus" stem takes rows, then columns,
 * of the image with stride 2, four times: one pass over the image each
 * instead of two. */
er_status er__pass_slice(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (pc->dead[i]) continue;
    er_node *s1 = &g->nodes[i];
    if (!er__rw_is(s1, "Slice") || s1->n_outputs != 1) continue;
    int rank = g->values[s1->inputs[0]].info.rank;
    slice_lists a, b;
    if (!slice_lists_of(g, s1, rank, &a)) continue;
    int32_t c = er__rw_sole_consumer(pc, s1->outputs[0]);
    if (c < 0 || g->nodes[c].inputs[0] != s1->outputs[0]) continue;
    er_node *s2 = &g->nodes[c];
    if (!slice_lists_of(g, s2, rank, &b) || a.n + b.n > rank) continue;
    bool disjoint = true;
    for (int x = 0; x < a.n; x++)
      for (int y = 0; y < b.n; y++)
        if (a.axes[x] == b.axes[y]) disjoint = false;
    if (!disjoint) continue;
    for (int y = 0; y < b.n; y++) {
      a.starts[a.n + y] = b.starts[y];
      a.ends[a.n + y] = b.ends[y];
      a.axes[a.n + y] = b.axes[y];
      a.steps[a.n + y] = b.steps[y];
    }
    int n = a.n + b.n;
    const char *base = g->values[s2->outputs[0]].name;
    int32_t ids[5] = {s1->inputs[0], -1, -1, -1, -1};
    ER_CHECK(er__rw_new_const_data(g, base, "folded", ER_DTYPE_INT64, n, a.starts, &ids[1]));
    ER_CHECK(er__rw_new_const_data(g, base, "folded", ER_DTYPE_INT64, n, a.ends, &ids[2]));
    ER_CHECK(er__rw_new_const_data(g, base, "folded", ER_DTYPE_INT64, n, a.axes, &ids[3]));
    ER_CHECK(er__rw_new_const_data(g, base, "folded", ER_DTYPE_INT64, n, a.steps, &ids[4]));
    ER_CHECK(er__rw_set_inputs(g, s2, ids, 5));
    pc->dead[i] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}
