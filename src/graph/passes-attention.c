/* passes-attention.c - scaled dot-product attention from primitives (see
 * passes.h for the contract every rewrite keeps):
 *
 *   attention  MatMul/[Div|Mul]/[Add]/Softmax/MatMul (with the head split
 *              and merge Transposes/Reshapes when present) -> Attention */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/passes.h"

/* Scaled dot-product attention from primitives, as PyTorch and BERT-style
 * exporters write it:
 *
 *   S = MatMul(Q, KT) [; S = Div(S, c) | Mul(S, c)] [; S = Add(S, M)]
 *   P = Softmax(S, last axis); O = MatMul(P, V)
 *
 * with Q [B,H,S,D], KT [B,H,D,T], V [B,H,T,Dv] becomes the standard
 * Attention(Q, K, V[, M]) (opset 23) with an explicit `scale` (its default
 * would be 1/sqrt(D)). When Q, KT and V are the usual head split of 3-D
 * projections, Transpose(Reshape(x3, [0, 0, H, D]), perm), and O is merged
 * back by Transpose + Reshape, the 3-D form Attention(q3, k3, v3[, M])
 * with q_num_heads = kv_num_heads = H replaces all of it: the head split
 * and merge copies disappear.
 *
 * One difference is accepted: a query row whose every score the mask sets
 * to -inf gives NaN through Softmax and zeros through Attention (its spec);
 * masks written as large finite negatives (what exporters emit) behave
 * the same either way. */

typedef struct attn_match {
  int32_t mm1, scale_op, add, softmax, mm2; /* nodes; -1 when absent */
  int32_t q, kt, v, mask;                   /* values; mask -1 when absent */
  float scale;
} attn_match;

static int64_t dim_of(const er_graph *g, int32_t v, int d) {
  const er_tensor *t = &g->values[v].info;
  return t->rank > d && d >= 0 ? t->dims[d] : -1;
}

/* Two dims that must be equal for the rewrite to keep MatMul's meaning:
 * known and equal, or both unknown (a broadcast between unknown dims
 * would then fail loudly in Attention's shape check, not silently). */
static bool same_dim(int64_t a, int64_t b) { return (a >= 0 && a == b) || (a < 0 && b < 0); }

static bool has_perm(const er_node *n, const int64_t *perm, int rank) {
  const er_attr *p = er__node_attr(n, "perm");
  if (!er__rw_is(n, "Transpose") || !p || p->type != ER_ATTR_INTS || p->n != rank) return false;
  for (int k = 0; k < rank; k++)
    if (p->ints[k] != perm[k]) return false;
  return true;
}

/* The softmax axis is the last of a rank-4 input. Before opset 13 the
 * input is flattened at `axis` (default 1) into [prod before, prod from];
 * at axis 3 that is the same as a softmax over the last axis. */
static bool softmax_last_axis(const er_node *n) {
  const er_attr *a = er__node_attr(n, "axis");
  int64_t axis = a && a->type == ER_ATTR_INT ? a->i : n->version >= 13 ? -1 : 1;
  return axis == -1 || axis == 3;
}

/* A mask M added to S [B,H,S,T] that Attention's attn_mask reads the
 * same way: float32, rank 1 to 4, every dim 1 or S's dim, and the last
 * dim T itself (Attention treats a shorter last dim as masked keys, not as
 * a broadcast). */
static bool mask_ok(const er_graph *g, int32_t m, int32_t s) {
  const er_tensor *mi = &g->values[m].info;
  if (!er__rw_is_f32(g, m) || mi->rank < 1 || mi->rank > 4) return false;
  for (int d = 0; d < mi->rank; d++) {
    int64_t md = mi->dims[d], sd = dim_of(g, s, 4 - mi->rank + d);
    bool last = d == mi->rank - 1;
    if (!(md >= 0 && md == sd) && !(md == 1 && !last)) return false;
  }
  return true;
}

/* Matches the chain from MatMul node i. */
static bool attn_core(const er_rewrite *pc, int32_t i, attn_match *m) {
  const er_graph *g = pc->g;
  const er_node *mm = &g->nodes[i];
  if (pc->dead[i] || !er__rw_is(mm, "MatMul") || mm->n_inputs != 2 || mm->n_outputs != 1) return false;
  m->mm1 = i;
  m->scale_op = m->add = m->softmax = m->mm2 = m->mask = -1;
  m->q = mm->inputs[0];
  m->kt = mm->inputs[1];
  m->scale = 1.0f;
  int32_t s = mm->outputs[0], cur = s;
  if (s < 0 || !er__rw_is_f32(g, s) || g->values[s].info.rank != 4) return false;
  if (!er__rw_is_f32(g, m->q) || !er__rw_is_f32(g, m->kt) || g->values[m->q].info.rank != 4 ||
      g->values[m->kt].info.rank != 4)
    return false;
  int32_t c = er__rw_sole_consumer(pc, cur);
  if (c < 0) return false;
  const er_node *n = &g->nodes[c];
  if ((er__rw_is(n, "Div") && n->n_inputs == 2 && n->inputs[0] == cur) || er__pass_mul_other(n, cur) >= 0) {
    int32_t other = er__rw_is(n, "Div") ? n->inputs[1] : er__pass_mul_other(n, cur);
    const er_tensor *t = er__graph_const(g, other);
    double v = er__rw_const_scalar(g, other);
    /* One value of rank <= 4, so S keeps its shape; Attention wants a
     * positive scale. */
    if (other == cur || !t || t->rank > 4 || !isfinite(v) || !(v > 0)) return false;
    double sc = er__rw_is(n, "Div") ? 1.0 / v : v;
    if (!isfinite(sc) || !(sc > 0) || sc > 3.4e38) return false;
    m->scale = (float)sc;
    m->scale_op = c;
    cur = n->outputs[0];
    if ((c = er__rw_sole_consumer(pc, cur)) < 0) return false;
    n = &g->nodes[c];
  }
  if (er__rw_is(n, "Add") && n->n_inputs == 2) {
    int32_t other = n->inputs[0] == cur ? n->inputs[1] : n->inputs[0];
    if (other == cur || !mask_ok(g, other, s)) return false;
    m->mask = other;
    m->add = c;
    cur = n->outputs[0];
    if ((c = er__rw_sole_consumer(pc, cur)) < 0) return false;
    n = &g->nodes[c];
  }
  if (!er__rw_is(n, "Softmax") || !softmax_last_axis(n) || n->n_outputs != 1) return false;
  m->softmax = c;
  cur = n->outputs[0];
  if ((c = er__rw_sole_consumer(pc, cur)) < 0) return false;
  n = &g->nodes[c];
  if (!er__rw_is(n, "MatMul") || n->n_inputs != 2 || n->inputs[0] != cur || n->outputs[0] < 0) return false;
  m->mm2 = c;
  m->v = n->inputs[1];
  if (!er__rw_is_f32(g, m->v) || g->values[m->v].info.rank != 4) return false;
  /* Batch dims equal; K/V heads equal, and equal to Q's or 1 (MatMul's
   * broadcast, which is Attention's grouped heads with one KV head). */
  int64_t hq = dim_of(g, m->q, 1), hk = dim_of(g, m->kt, 1), hv = dim_of(g, m->v, 1);
  if (!same_dim(dim_of(g, m->q, 0), dim_of(g, m->kt, 0)) || !same_dim(dim_of(g, m->q, 0), dim_of(g, m->v, 0)))
    return false;
  if (!same_dim(hk, hv) || !(same_dim(hq, hk) || hk == 1)) return false;
  return true;
}

/* One of Q, KT, V written as Transpose(Reshape(x3, shape), perm): x3
 * [B, S, H * D] split into heads. The Reshape must split only the last
 * dim: shape [0 or B, 0 or S, H, D], with at most one of H and D -1. */
typedef struct attn_split {
  int32_t x3, transpose, reshape;
  int64_t heads, size;
} attn_split;

static bool reshape_const(const er_graph *g, const er_node *r, int64_t n, int64_t *out) {
  if (!er__rw_is(r, "Reshape") || r->version < 5 || r->n_inputs != 2 || r->n_outputs != 1) return false;
  const er_attr *az = er__node_attr(r, "allowzero");
  if (az && az->i != 0) return false;
  const er_tensor *t = er__graph_const(g, r->inputs[1]);
  if (!t || t->dtype != ER_DTYPE_INT64 || t->rank != 1 || er__tensor_count(t) != n) return false;
  for (int64_t k = 0; k < n; k++) out[k] = er__get_i64(t, k);
  return true;
}

static bool attn_heads_of(const er_rewrite *pc, int32_t v, const int64_t perm[4], attn_split *hs) {
  const er_graph *g = pc->g;
  if (pc->uses[v] != 1) return false;
  int32_t t = g->values[v].producer;
  if (t < 0 || pc->dead[t] || !has_perm(&g->nodes[t], perm, 4)) return false;
  int32_t rv = g->nodes[t].inputs[0];
  if (rv < 0 || pc->uses[rv] != 1) return false;
  int32_t r = g->values[rv].producer;
  int64_t sh[4];
  if (r < 0 || pc->dead[r] || !reshape_const(g, &g->nodes[r], 4, sh)) return false;
  int32_t x3 = g->nodes[r].inputs[0];
  if (!er__rw_is_f32(g, x3) || g->values[x3].info.rank != 3) return false;
  int64_t e = dim_of(g, x3, 2);
  for (int d = 0; d < 2; d++)
    if (!(sh[d] == 0 || (sh[d] > 0 && sh[d] == dim_of(g, x3, d)))) return false;
  /* With the first two dims kept, the element count forces H * D = E. */
  if (sh[2] > 0 && sh[3] > 0) {
    if (e >= 0 && sh[2] * sh[3] != e) return false;
  } else if (sh[2] > 0 && sh[3] == -1 && e > 0 && e % sh[2] == 0) {
    sh[3] = e / sh[2];
  } else if (sh[3] > 0 && sh[2] == -1 && e > 0 && e % sh[3] == 0) {
    sh[2] = e / sh[3];
  } else {
    return false;
  }
  hs->x3 = x3;
  hs->transpose = t;
  hs->reshape = r;
  hs->heads = sh[2];
  hs->size = sh[3];
  return true;
}

/* The 3-D form: Q, KT and V are head splits of q3, k3, v3 with the same H,
 * and O is merged back by Transpose(O, [0,2,1,3]) -> Reshape(.., [0|B,
 * 0|S, -1|H*Dv]). nodes[] receives the eight nodes that go, and *last the
 * final Reshape, which becomes the Attention node. */
static bool attn_3d(const er_rewrite *pc, const attn_match *m, attn_split hs[3], int32_t nodes[8], int32_t *last) {
  static const int64_t p_qv[4] = {0, 2, 1, 3}, p_k[4] = {0, 2, 3, 1};
  const er_graph *g = pc->g;
  if (!attn_heads_of(pc, m->q, p_qv, &hs[0]) || !attn_heads_of(pc, m->kt, p_k, &hs[1]) ||
      !attn_heads_of(pc, m->v, p_qv, &hs[2]))
    return false;
  int64_t h = hs[0].heads;
  if (hs[1].heads != h || hs[2].heads != h || hs[1].size != hs[0].size) return false;
  int64_t b0 = dim_of(g, hs[0].x3, 0);
  if (!same_dim(b0, dim_of(g, hs[1].x3, 0)) || !same_dim(b0, dim_of(g, hs[2].x3, 0))) return false;
  int32_t o = g->nodes[m->mm2].outputs[0];
  int32_t t = er__rw_sole_consumer(pc, o);
  if (t < 0 || !has_perm(&g->nodes[t], p_qv, 4) || g->nodes[t].outputs[0] < 0) return false;
  int32_t r = er__rw_sole_consumer(pc, g->nodes[t].outputs[0]);
  int64_t sh[3];
  if (r < 0 || g->nodes[r].inputs[0] != g->nodes[t].outputs[0] || !reshape_const(g, &g->nodes[r], 3, sh)) return false;
  if (g->nodes[r].outputs[0] < 0 || !er__rw_is_f32(g, g->nodes[r].outputs[0])) return false;
  /* Merged dims: [B, S, H * Dv] of the transposed O [B, S, H, Dv]. */
  for (int d = 0; d < 2; d++)
    if (!(sh[d] == 0 || (sh[d] > 0 && sh[d] == dim_of(g, hs[0].x3, d)))) return false;
  if (!(sh[2] == -1 || sh[2] == h * hs[2].size)) return false;
  nodes[0] = hs[0].transpose, nodes[1] = hs[0].reshape;
  nodes[2] = hs[1].transpose, nodes[3] = hs[1].reshape;
  nodes[4] = hs[2].transpose, nodes[5] = hs[2].reshape;
  nodes[6] = m->mm2, nodes[7] = t;
  *last = r;
  return true;
}

/* A new intermediate value named after `base`, of float32 and the given
 * shape. */
static er_status set_attention(er_graph *g, er_node *n, const int32_t *ins, int n_ins, float scale,
                               int64_t heads) {
  ER_CHECK(er__rw_set_inputs(g, n, ins, n_ins));
  ER_CHECK(er__rw_set_op(n, "", "Attention", 23));
  er_attr attrs[3] = {er__rw_attr_float("scale", scale), er__rw_attr_int("q_num_heads", heads),
                      er__rw_attr_int("kv_num_heads", heads)};
  n->n_attrs = 0;
  return er__rw_merge_attrs(g, n, attrs, heads > 0 ? 3 : 1);
}

er_status er__pass_attention(er_rewrite *pc) {
  er_graph *g = pc->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    attn_match m;
    if (!attn_core(pc, i, &m)) continue;
    attn_split hs[3];
    int32_t gone[8], last;
    int32_t chain[4] = {m.mm1, m.scale_op, m.add, m.softmax};
    if (attn_3d(pc, &m, hs, gone, &last)) {
      int32_t ins[4] = {hs[0].x3, hs[1].x3, hs[2].x3, m.mask};
      ER_CHECK(set_attention(g, &g->nodes[last], ins, m.mask >= 0 ? 4 : 3, m.scale, hs[0].heads));
      for (int k = 0; k < 8; k++) pc->dead[gone[k]] = true;
      for (int k = 0; k < 4; k++)
        if (chain[k] >= 0) pc->dead[chain[k]] = true;
      pc->changed++;
      ER_CHECK(er__rw_count_uses(pc));
      continue;
    }
    /* The 4-D form: K [B,H,T,D] from KT. A Transpose making KT (read only
     * here) takes the composed perm; otherwise the first MatMul's node
     * becomes Transpose(KT, [0,1,3,2]). */
    int32_t k = -1, kt = m.kt, tp = g->values[kt].producer;
    er_node *t = tp >= 0 && !pc->dead[tp] && pc->uses[kt] == 1 ? &g->nodes[tp] : NULL;
    const er_attr *pa = t && er__rw_is(t, "Transpose") ? er__node_attr(t, "perm") : NULL;
    if (pa && pa->type == ER_ATTR_INTS && pa->n == 4) {
      int64_t *perm = er__arena_array(g->arena, 5, sizeof *perm);
      if (!perm) return ER_STATUS_OUT_OF_MEMORY;
      perm[0] = pa->ints[0], perm[1] = pa->ints[1], perm[2] = pa->ints[3], perm[3] = pa->ints[2];
      if (perm[0] == 0 && perm[1] == 1 && perm[2] == 2 && perm[3] == 3) {
        k = t->inputs[0];
        pc->dead[tp] = true;
      } else {
        ER_CHECK(er__pass_set_perm(g, t, perm, 4));
        er_tensor *info = &g->values[kt].info;
        int64_t d2 = info->dims[2];
        info->dims[2] = info->dims[3];
        info->dims[3] = d2;
        k = kt;
      }
      pc->dead[m.mm1] = true;
    } else {
      const er_tensor *ki = &g->values[kt].info;
      int64_t kd[4] = {ki->dims[0], ki->dims[1], ki->dims[3], ki->dims[2]};
      er_node *mm = &g->nodes[m.mm1];
      ER_CHECK(er__rw_new_value(g, mm->name[0] ? mm->name : "attention", "key", ER_DTYPE_FLOAT, 4, kd, &k));
      mm = &g->nodes[m.mm1];
      g->values[mm->outputs[0]].producer = -1;
      mm->outputs[0] = k;
      g->values[k].producer = m.mm1;
      int32_t in1[1] = {kt};
      ER_CHECK(er__rw_set_inputs(g, mm, in1, 1));
      ER_CHECK(er__rw_set_op(mm, "", "Transpose", 13));
      static const int64_t swap[4] = {0, 1, 3, 2};
      int64_t *perm = er__arena_array(g->arena, 5, sizeof *perm);
      if (!perm) return ER_STATUS_OUT_OF_MEMORY;
      memcpy(perm, swap, sizeof swap);
      mm->n_attrs = 0;
      ER_CHECK(er__pass_set_perm(g, mm, perm, 4));
      chain[0] = -1;
    }
    int32_t ins[4] = {m.q, k, m.v, m.mask};
    ER_CHECK(set_attention(g, &g->nodes[m.mm2], ins, m.mask >= 0 ? 4 : 3, m.scale, 0));
    for (int j = 0; j < 4; j++)
      if (chain[j] >= 0) pc->dead[chain[j]] = true;
    pc->changed++;
    ER_CHECK(er__rw_count_uses(pc));
  }
  return ER_STATUS_OK;
}
