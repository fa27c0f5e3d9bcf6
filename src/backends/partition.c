/* partition.c - placement, grouping into segments, transfers and the
 * fallback share (see partition.h). */
#include "backends/partition.h"

#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"

/* ======================================================================== */
/* What a node reads                                                         */
/* ======================================================================== */

typedef er_id_list id_list;

static bool list_add(id_list *l, int32_t id) {
  for (int32_t i = 0; i < l->n; i++)
    if (l->v[i] == id) return true;
  if (l->n == l->cap) {
    int32_t cap = l->cap ? l->cap * 2 : 8;
    int32_t *nv = realloc(l->v, (size_t)cap * sizeof *nv);
    if (!nv) return false;
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n++] = id;
  return true;
}

/* Values of `owner` that `sub` (or graphs nested in it) captures. */
static bool add_captures(const er_graph *sub, const er_graph *owner, id_list *out) {
  for (int32_t v = 0; v < sub->n_values; v++) {
    if (sub->values[v].kind != ER_VALUE_OUTER) continue;
    const er_graph *gg = sub;
    int32_t id = v;
    while (gg->parent && !er__graph_same(gg, owner) && gg->values[id].kind == ER_VALUE_OUTER) {
      id = gg->values[id].outer;
      gg = gg->parent;
    }
    if (er__graph_same(gg, owner) && !list_add(out, id)) return false;
  }
  for (int32_t i = 0; i < sub->n_nodes; i++) {
    const er_node *n = &sub->nodes[i];
    for (int a = 0; a < n->n_attrs; a++) {
      const er_attr *at = &n->attrs[a];
      if (at->type == ER_ATTR_GRAPH && !add_captures(at->g, owner, out)) return false;
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n; j++)
          if (!add_captures(at->graphs[j], owner, out)) return false;
    }
  }
  return true;
}

/* Every value of g that node i reads: its inputs and what its subgraphs
 * capture. */
bool er__node_reads(const er_graph *g, int32_t i, id_list *out) {
  const er_node *n = &g->nodes[i];
  out->n = 0;
  for (int k = 0; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0 && !list_add(out, n->inputs[k])) return false;
  for (int a = 0; a < n->n_attrs; a++) {
    const er_attr *at = &n->attrs[a];
    if (at->type == ER_ATTR_GRAPH && !add_captures(at->g, g, out)) return false;
    if (at->type == ER_ATTR_GRAPHS)
      for (int64_t j = 0; j < at->n; j++)
        if (!add_captures(at->graphs[j], g, out)) return false;
  }
  return true;
}

bool er__value_is_fixed(const er_graph *g, int32_t id) {
  const er_value *v = &g->values[id];
  if (v->kind != ER_VALUE_CONSTANT) return false;
  /* An initializer listed as a graph input may be overridden by the caller
   * from IR 4 on (the session matches inputs by name). */
  return !v->is_graph_input || g->model->ir_version < 4 || g->parent != NULL;
}

/* ======================================================================== */
/* Compute estimate                                                          */
/* ======================================================================== */

static uint64_t known_product(const er_tensor *t, int from) {
  uint64_t p = 1;
  if (t->rank < 0) return 1;
  for (int d = from; d < t->rank; d++)
    if (t->dims[d] > 0 && !er__mul_u64(p, (uint64_t)t->dims[d], &p)) return UINT64_MAX;
  return p;
}

static const er_tensor *value_info(const er_graph *g, const er_node *n, int k, bool output) {
  int count = output ? n->n_outputs : n->n_inputs;
  if (k >= count) return NULL;
  int32_t id = output ? n->outputs[k] : n->inputs[k];
  return id >= 0 ? &g->values[id].info : NULL;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return er__mul_u64(a, b, &r) ? r : UINT64_MAX;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return er__add_u64(a, b, &r) ? r : UINT64_MAX;
}

static uint64_t graph_macs(const er_graph *g) {
  uint64_t m = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) m = sat_add(m, er__node_macs(g, &g->nodes[i]));
  return m;
}

uint64_t er__node_macs(const er_graph *g, const er_node *n) {
  const char *op = n->op_type;
  const er_tensor *y = value_info(g, n, 0, true);
  uint64_t out = y ? known_product(y, 0) : 1;
  bool std = n->domain[0] == '\0';
  if (std && (strcmp(op, "Conv") == 0 || strcmp(op, "ConvInteger") == 0 ||
              strcmp(op, "QLinearConv") == 0)) {
    /* Each output element sums C/group * kernel products. */
    const er_tensor *w = value_info(g, n, strcmp(op, "QLinearConv") == 0 ? 3 : 1, false);
    return w ? sat_mul(out, known_product(w, 1)) : out;
  }
  if (std && strcmp(op, "ConvTranspose") == 0) {
    const er_tensor *x = value_info(g, n, 0, false), *w = value_info(g, n, 1, false);
    return x && w ? sat_mul(known_product(x, 0), known_product(w, 1)) : out;
  }
  if (std && (strcmp(op, "MatMul") == 0 || strcmp(op, "MatMulInteger") == 0 ||
              strcmp(op, "QLinearMatMul") == 0 || strcmp(op, "Gemm") == 0)) {
    const er_tensor *a = value_info(g, n, 0, false);
    if (!a || a->rank < 1) return out;
    int64_t k = a->dims[a->rank - 1];
    if (strcmp(op, "Gemm") == 0) {
      int64_t trans_a = 0;
      const er_attr *at = er__node_attr(n, "transA");
      if (at && at->type == ER_ATTR_INT) trans_a = at->i;
      if (trans_a && a->rank == 2) k = a->dims[0];
    }
    return sat_mul(out, k > 0 ? (uint64_t)k : 1);
  }
  /* Control flow: the work is in the subgraphs (If: the larger branch;
   * Loop and Scan: one pass of the body, as the trip count is a run-time
   * value). */
  uint64_t sub = 0;
  for (int a = 0; a < n->n_attrs; a++) {
    const er_attr *at = &n->attrs[a];
    uint64_t m = at->type == ER_ATTR_GRAPH ? graph_macs(at->g) : 0;
    for (int64_t j = 0; at->type == ER_ATTR_GRAPHS && j < at->n; j++) m = sat_add(m, graph_macs(at->graphs[j]));
    sub = std && strcmp(op, "If") == 0 ? (m > sub ? m : sub) : sat_add(sub, m);
  }
  if (sub) return sub;
  /* Recurrent ops and the rest: one unit per output element (the share
   * they contribute is small in the CNNs and transformers this reports on,
   * and an over-precise guess would hide that it is an estimate). */
  uint64_t total = 0;
  for (int k = 0; k < n->n_outputs; k++) {
    const er_tensor *t = value_info(g, n, k, true);
    if (t && !er__add_u64(total, known_product(t, 0), &total)) return UINT64_MAX;
  }
  return total ? total : 1;
}

uint64_t er__value_bytes(const er_graph *g, int32_t id) {
  const er_tensor *t = &g->values[id].info;
  return sat_mul(known_product(t, 0), er_dtype_size(t->dtype));
}

/* ======================================================================== */
/* Plan                                                                      */
/* ======================================================================== */

void er__plan_free(er_plan *p) {
  if (!p) return;
  for (int s = 0; s < p->n_segs; s++) {
    free(p->segs[s].nodes);
    free(p->segs[s].inputs);
    free(p->segs[s].outputs);
    free(p->segs[s].release);
  }
  free(p->segs);
  free(p->place);
  free(p->reason);
  free(p->macs);
  free(p->segment);
  free(p);
}

/* Places node i; writes the reason of the preferred backend that said no. */
static er_status place_node(er_plan *p, const er_graph *g, int32_t i, er_backend *const *prefs,
                            size_t n_prefs) {
  er_backend *cpu = er__backend_cpu();
  const er_node *node = &g->nodes[i];
  char *why = p->reason[i];
  size_t used = 0, n_accel = 0;
  why[0] = '\0';
  /* With several accelerators preferred, each reason names its backend. */
  while (n_accel < n_prefs && prefs[n_accel] != cpu) n_accel++;
  for (size_t b = 0; b < n_prefs; b++) {
    er_backend *be = prefs[b];
    if (be == cpu) break;
    char r[ER_PLACE_REASON_BYTES] = "";
    if (be->iface->supports_op(be, g, node, r, sizeof r)) {
      /* Placed; the reasons of the backends preferred before it stay. */
      p->place[i] = be;
      return ER_STATUS_OK;
    }
    if (!r[0]) snprintf(r, sizeof r, "not supported");
    if (used < ER_PLACE_REASON_BYTES)
      used += (size_t)snprintf(why + used, ER_PLACE_REASON_BYTES - used, "%s%s%s%s", used ? "; " : "",
                               n_accel > 1 ? be->iface->name : "", n_accel > 1 ? ": " : "", r);
  }
  char r[ER_PLACE_REASON_BYTES] = "";
  if (!cpu->iface->supports_op(cpu, g, node, r, sizeof r))
    return er__error(ER_STATUS_UNSUPPORTED, "%s node '%s': %s", node->op_type, node->name, r);
  p->place[i] = cpu;
  return ER_STATUS_OK;
}

/* A binary min-heap of node indices. */
typedef struct heap {
  int32_t *v;
  int32_t n;
} heap;

static void heap_push(heap *h, int32_t x) {
  int32_t i = h->n++;
  while (i > 0 && h->v[(i - 1) / 2] > x) {
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = x;
}

static int32_t heap_pop(heap *h) {
  int32_t top = h->v[0], x = h->v[--h->n], i = 0;
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->v[c + 1] < h->v[c]) c++;
    if (h->v[c] >= x) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n) h->v[i] = x;
  return top;
}

/* Greedy scheduling into segments (see partition.h). order[] receives the
 * node indices in execution order. */
static er_status schedule(er_plan *p, const er_graph *g, int32_t *order) {
  int32_t n = g->n_nodes;
  er_status st = ER_STATUS_OK;
  int32_t *pending = calloc((size_t)n + 1, sizeof *pending);  /* unmet deps */
  int32_t *first_dep = calloc((size_t)n + 2, sizeof *first_dep);
  int32_t *dep_to = NULL;  /* CSR: consumers of each node */
  int *slot = calloc((size_t)n + 1, sizeof *slot);  /* node -> backend slot */
  er_backend *slot_be[ER_MAX_PLAN_BACKENDS];
  heap heaps[ER_MAX_PLAN_BACKENDS] = {{0}};
  int n_slots = 0;
  id_list reads = {0};
  int32_t n_edges = 0;
  if (!pending || !first_dep || !slot) goto oom;
  /* Count edges producer -> consumer, then fill. */
  for (int pass = 0; pass < 2; pass++) {
    int32_t *fill = NULL;
    if (pass == 1) {
      for (int32_t i = 0; i < n; i++) first_dep[i + 1] += first_dep[i];
      dep_to = malloc(((size_t)n_edges + 1) * sizeof *dep_to);
      fill = calloc((size_t)n + 1, sizeof *fill);
      if (!dep_to || !fill) {
        free(fill);
        goto oom;
      }
    }
    for (int32_t i = 0; i < n; i++) {
      if (!er__node_reads(g, i, &reads)) {
        free(fill);
        goto oom;
      }
      for (int32_t k = 0; k < reads.n; k++) {
        const er_value *v = &g->values[reads.v[k]];
        if (v->kind != ER_VALUE_INTERMEDIATE || v->producer < 0) continue;
        int32_t src = v->producer;
        if (pass == 0) {
          first_dep[src + 1]++;
          pending[i]++;
          n_edges++;
        } else {
          dep_to[first_dep[src] + fill[src]++] = i;
        }
      }
    }
    free(fill);
  }
  /* Run: keep to the current backend while it has a ready node; when it
   * has none, switch to the backend of the lowest-numbered ready node. One
   * min-heap of ready nodes per backend keeps this O(n log n). */
  for (int32_t i = 0; i < n; i++) {
    int b = 0;
    while (b < n_slots && slot_be[b] != p->place[i]) b++;
    if (b == n_slots) slot_be[n_slots++] = p->place[i];
    slot[i] = b;
  }
  for (int b = 0; b < n_slots; b++) {
    heaps[b].v = malloc(((size_t)n + 1) * sizeof *heaps[b].v);
    if (!heaps[b].v) goto oom;
  }
  for (int32_t i = 0; i < n; i++)
    if (!pending[i]) heap_push(&heaps[slot[i]], i);
  int cur = -1, seg = -1;
  for (int32_t step = 0; step < n; step++) {
    if (cur < 0 || heaps[cur].n == 0) {
      int best = -1;
      for (int b = 0; b < n_slots; b++)
        if (heaps[b].n && (best < 0 || heaps[b].v[0] < heaps[best].v[0])) best = b;
      ER_ASSERT(best >= 0);  /* the graph was validated acyclic */
      cur = best;
      seg++;
    }
    int32_t pick = heap_pop(&heaps[cur]);
    order[step] = pick;
    p->segment[pick] = seg;
    for (int32_t e = first_dep[pick]; e < first_dep[pick + 1]; e++)
      if (--pending[dep_to[e]] == 0) heap_push(&heaps[slot[dep_to[e]]], dep_to[e]);
  }
  p->n_segs = seg + 1;
  goto out;
oom:
  st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory partitioning graph '%s'", g->name);
out:
  free(pending);
  free(first_dep);
  free(dep_to);
  free(slot);
  for (int b = 0; b < ER_MAX_PLAN_BACKENDS; b++) free(heaps[b].v);
  free(reads.v);
  return st;
}

static bool append(int32_t **arr, int32_t *n, int32_t id) {
  int32_t *nv = realloc(*arr, ((size_t)*n + 1) * sizeof *nv);
  if (!nv) return false;
  nv[(*n)++] = id;
  *arr = nv;
  return true;
}

static bool contains(const int32_t *arr, int32_t n, int32_t id) {
  for (int32_t i = 0; i < n; i++)
    if (arr[i] == id) return true;
  return false;
}

/* Segment node lists, boundary values and release lists. */
static er_status build_segments(er_plan *p, const er_graph *g, const int32_t *order) {
  int32_t n = g->n_nodes;
  id_list reads = {0};
  int32_t *last_seg = NULL;  /* [n_values] last segment reading a value */
  p->segs = calloc((size_t)p->n_segs + 1, sizeof *p->segs);
  last_seg = malloc(((size_t)g->n_values + 1) * sizeof *last_seg);
  if (!p->segs || !last_seg) goto oom;
  for (int32_t v = 0; v < g->n_values; v++) last_seg[v] = -1;
  for (int32_t step = 0; step < n; step++) {
    int32_t i = order[step];
    er_plan_segment *s = &p->segs[p->segment[i]];
    s->backend = p->place[i];
    if (!append(&s->nodes, &s->n_nodes, i)) goto oom;
  }
  for (int s = 0; s < p->n_segs; s++) {
    er_plan_segment *seg = &p->segs[s];
    for (int32_t j = 0; j < seg->n_nodes; j++) {
      if (!er__node_reads(g, seg->nodes[j], &reads)) goto oom;
      for (int32_t k = 0; k < reads.n; k++) {
        int32_t id = reads.v[k];
        const er_value *v = &g->values[id];
        if (last_seg[id] < s) last_seg[id] = s;
        if (er__value_is_fixed(g, id) || v->kind == ER_VALUE_OUTER) continue;
        bool inside = v->kind == ER_VALUE_INTERMEDIATE && v->producer >= 0 &&
                      p->segment[v->producer] == s;
        if (!inside && !contains(seg->inputs, seg->n_inputs, id) &&
            !append(&seg->inputs, &seg->n_inputs, id))
          goto oom;
      }
    }
  }
  /* Outputs: produced here and read by another segment, or graph outputs. */
  for (int s = 0; s < p->n_segs; s++) {
    er_plan_segment *seg = &p->segs[s];
    for (int32_t j = 0; j < seg->n_nodes; j++) {
      const er_node *node = &g->nodes[seg->nodes[j]];
      for (int k = 0; k < node->n_outputs; k++) {
        int32_t id = node->outputs[k];
        if (id < 0) continue;
        bool needed = g->values[id].is_graph_output || last_seg[id] > s;
        if (needed && !contains(seg->outputs, seg->n_outputs, id) &&
            !append(&seg->outputs, &seg->n_outputs, id))
          goto oom;
      }
    }
  }
  /* Intermediates die after the last segment that reads them. */
  for (int32_t v = 0; v < g->n_values; v++) {
    const er_value *val = &g->values[v];
    if (val->kind != ER_VALUE_INTERMEDIATE || val->is_graph_output || last_seg[v] < 0) continue;
    if (!append(&p->segs[last_seg[v]].release, &p->segs[last_seg[v]].n_release, v)) goto oom;
  }
  free(reads.v);
  free(last_seg);
  return ER_STATUS_OK;
oom:
  free(reads.v);
  free(last_seg);
  return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory partitioning graph '%s'", g->name);
}

static void summarize(er_plan *p, const er_graph *g, er_backend *const *prefs, size_t n_prefs) {
  er_backend *cpu = er__backend_cpu();
  er_partition_summary *s = &p->summary;
  bool wanted_accel = n_prefs > 0 && prefs[0] != cpu;
  s->preferred = n_prefs > 0 ? prefs[0]->iface->name : "cpu";
  s->node_count = (size_t)g->n_nodes;
  s->segments = (size_t)p->n_segs;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    p->macs[i] = er__node_macs(g, &g->nodes[i]);
    if (!er__add_u64(s->total_macs, p->macs[i], &s->total_macs)) s->total_macs = UINT64_MAX;
    if (wanted_accel && p->place[i] == cpu) {
      s->fallback_nodes++;
      if (!er__add_u64(s->fallback_macs, p->macs[i], &s->fallback_macs)) s->fallback_macs = UINT64_MAX;
    }
  }
  s->fallback_share = s->total_macs ? (double)s->fallback_macs / (double)s->total_macs : 0.0;
  /* Every value entering or leaving a non-CPU segment crosses between host
   * memory (the run's frame) and the device. */
  for (int k = 0; k < p->n_segs; k++) {
    const er_plan_segment *seg = &p->segs[k];
    if (seg->backend == cpu) continue;
    for (int32_t j = 0; j < seg->n_inputs; j++) {
      s->transfers++;
      er__add_u64(s->transfer_bytes, er__value_bytes(g, seg->inputs[j]), &s->transfer_bytes);
    }
    for (int32_t j = 0; j < seg->n_outputs; j++) {
      s->transfers++;
      er__add_u64(s->transfer_bytes, er__value_bytes(g, seg->outputs[j]), &s->transfer_bytes);
    }
  }
}

er_status er__plan_place(const er_graph *g, er_backend *const *prefs, size_t n_prefs, bool allow_fallback,
                         er_plan **plan_out) {
  er_status st = ER_STATUS_OK;
  er_backend *cpu = er__backend_cpu();
  int32_t n = g->n_nodes;
  er_plan *p = calloc(1, sizeof *p);
  if (!p) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory partitioning graph '%s'", g->name);
  p->n_nodes = n;
  p->place = calloc((size_t)n + 1, sizeof *p->place);
  p->reason = calloc((size_t)n + 1, sizeof *p->reason);
  p->macs = calloc((size_t)n + 1, sizeof *p->macs);
  p->segment = calloc((size_t)n + 1, sizeof *p->segment);
  if (!p->place || !p->reason || !p->macs || !p->segment) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory partitioning graph '%s'", g->name);
    goto fail;
  }
  for (int32_t i = 0; i < n; i++) {
    st = place_node(p, g, i, prefs, n_prefs);
    if (st != ER_STATUS_OK) goto fail;
  }
  bool wanted_accel = n_prefs > 0 && prefs[0] != cpu;
  if (wanted_accel && !allow_fallback) {
    /* Name every node that would fall back (as many as the message holds),
     * so one attempt shows the whole list. */
    char list[768];
    size_t used = 0;
    int count = 0;
    for (int32_t i = 0; i < n; i++) {
      if (p->place[i] != cpu) continue;
      count++;
      if (used < sizeof list)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s '%s' (%s)", used ? "; " : "",
                                 g->nodes[i].op_type, g->nodes[i].name, p->reason[i]);
    }
    if (count) {
      st = er__error(ER_STATUS_NO_FALLBACK,
                     "%d node%s would run on the CPU instead of %s, and fallback is disabled: %s",
                     count, count == 1 ? "" : "s", prefs[0]->iface->name, list);
      goto fail;
    }
  }
  *plan_out = p;
  return ER_STATUS_OK;
fail:
  er__plan_free(p);
  return st;
}

er_status er__plan_finish(er_plan *p, const er_graph *g, er_backend *const *prefs, size_t n_prefs) {
  ER_ASSERT(p->n_nodes == g->n_nodes && p->n_segs == 0);
  if (g->n_nodes > 0) {
    int32_t *order = calloc((size_t)g->n_nodes + 1, sizeof *order);
    if (!order) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory partitioning graph '%s'", g->name);
    er_status st = schedule(p, g, order);
    if (st == ER_STATUS_OK) st = build_segments(p, g, order);
    free(order);
    if (st != ER_STATUS_OK) return st;
  }
  summarize(p, g, prefs, n_prefs);
  return ER_STATUS_OK;
}

er_status er__plan_build(const er_graph *g, er_backend *const *prefs, size_t n_prefs, bool allow_fallback,
                         er_plan **plan_out) {
  er_plan *p;
  ER_CHECK(er__plan_place(g, prefs, n_prefs, allow_fallback, &p));
  er_status st = er__plan_finish(p, g, prefs, n_prefs);
  if (st != ER_STATUS_OK) {
    er__plan_free(p);
    return st;
  }
  *plan_out = p;
  return ER_STATUS_OK;
}
