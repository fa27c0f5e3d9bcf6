/* ir.c - building the IR: values, name lookup, outer-scope capture, and
 * structural validation with a topological sort. */
#define _DEFAULT_SOURCE /* madvise */
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

er_graph *er__graph_new(struct er_model *model, er_graph *parent, const char *name) {
  er_graph *g = er__arena_alloc(&model->arena, sizeof *g);
  if (!g) return NULL;
  g->model = model;
  g->arena = &model->arena;
  g->owned = &model->owned;
  g->parent = parent;
  g->name = name ? name : "";
  return g;
}

static uint32_t hash_name(const char *s) {
  uint32_t h = 2166136261u; /* FNV-1a */
  while (*s) {
    h ^= (uint8_t)*s++;
    h *= 16777619u;
  }
  return h;
}

int32_t er__graph_find(const er_graph *g, const char *name) {
  if (!g->index_cap) return -1;
  uint32_t mask = g->index_cap - 1;
  for (uint32_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
    int32_t id = g->index[i];
    if (id < 0) return -1;
    if (strcmp(g->values[id].name, name) == 0) return id;
  }
}

static er_status grow_index(er_graph *g) {
  /* The index is rebuilt at twice the size when it is half full; the old
   * arrays stay in the arena (freed with the model). */
  uint32_t cap = g->index_cap ? g->index_cap * 2 : 64;
  int32_t *index = er__arena_array(g->arena, cap, sizeof(int32_t));
  if (!index) return ER_STATUS_OUT_OF_MEMORY;
  for (uint32_t i = 0; i < cap; i++) index[i] = -1;
  for (int32_t id = 0; id < g->n_values; id++) {
    uint32_t j = hash_name(g->values[id].name) & (cap - 1);
    while (index[j] >= 0) j = (j + 1) & (cap - 1);
    index[j] = id;
  }
  g->index = index;
  g->index_cap = cap;
  return ER_STATUS_OK;
}

er_status er__graph_add_value(er_graph *g, const char *name, int32_t *id_out) {
  if (er__graph_find(g, name) >= 0)
    return er__error(ER_STATUS_INVALID_GRAPH, "value '%s' is defined twice in graph '%s'", name,
                     g->name);
  if (g->n_values >= ER_MAX_VALUES)
    return er__error(ER_STATUS_LIMIT, "graph '%s' has more than %d values (ER_MAX_VALUES)",
                     g->name, ER_MAX_VALUES);
  if (g->n_values == g->cap_values) {
    int32_t cap = g->cap_values ? g->cap_values * 2 : 32;
    er_value *nv = er__arena_array(g->arena, (size_t)cap, sizeof *nv);
    if (!nv) return ER_STATUS_OUT_OF_MEMORY;
    if (g->n_values) memcpy(nv, g->values, (size_t)g->n_values * sizeof *nv);
    g->values = nv;
    g->cap_values = cap;
  }
  if ((uint32_t)(g->n_values + 1) * 2 > g->index_cap) ER_CHECK(grow_index(g));
  int32_t id = g->n_values++;
  er_value *v = &g->values[id];
  memset(v, 0, sizeof *v);
  v->name = name;
  v->producer = -1;
  v->outer = -1;
  er__tensor_set(&v->info, ER_DTYPE_UNDEFINED, -1, NULL);
  uint32_t mask = g->index_cap - 1;
  uint32_t j = hash_name(name) & mask;
  while (g->index[j] >= 0) j = (j + 1) & mask;
  g->index[j] = id;
  *id_out = id;
  return ER_STATUS_OK;
}

er_status er__graph_resolve(er_graph *g, const char *name, int32_t *id_out) {
  int32_t id = er__graph_find(g, name);
  if (id >= 0) {
    *id_out = id;
    return ER_STATUS_OK;
  }
  if (!g->parent) return ER_STATUS_NOT_FOUND;
  int32_t pid;
  er_status st = er__graph_resolve(g->parent, name, &pid);
  if (st != ER_STATUS_OK) return st;
  ER_CHECK(er__graph_add_value(g, g->parent->values[pid].name, &id));
  er_value *v = &g->values[id];
  v->kind = ER_VALUE_OUTER;
  v->outer = pid;
  v->info = g->parent->values[pid].info;
  v->info.data = NULL;
  v->info.flags = 0;
  *id_out = id;
  return ER_STATUS_OK;
}

void er__model_release_pages(const struct er_model *m, const void *p, size_t n) {
  if (!m->map_is_mmap || !p || !n) return;
  uintptr_t lo = (uintptr_t)m->map, hi = lo + m->map_size, a = (uintptr_t)p, b = a + n;
  if (a < lo || b > hi) return;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t start = (a + page - 1) & ~(page - 1), end = b & ~(page - 1);
  if (end > start) madvise((void *)start, end - start, MADV_DONTNEED);
}

er_status er__owned_add(er_owned_list *l, er_tensor *t) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    er_tensor **n = realloc(l->v, cap * sizeof *n);
    if (!n) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory tracking tensors");
    l->v = n;
    l->cap = cap;
  }
  l->v[l->n++] = t;
  return ER_STATUS_OK;
}

void er__owned_free(er_owned_list *l) {
  for (size_t i = 0; i < l->n; i++) er__tensor_release(l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

er_status er__model_own(struct er_model *model, er_tensor *t) { return er__owned_add(&model->owned, t); }

er_status er__graph_clone(const er_graph *src, er_arena *arena, er_owned_list *owned, er_graph **out) {
  er_graph *g = er__arena_alloc(arena, sizeof *g);
  if (!g) return ER_STATUS_OUT_OF_MEMORY;
  *g = *src;
  g->arena = arena;
  g->owned = owned;
  g->origin = src->origin ? src->origin : src;
  g->values = er__arena_array(arena, (size_t)src->cap_values + 1, sizeof *g->values);
  g->nodes = er__arena_array(arena, (size_t)src->n_nodes + 1, sizeof *g->nodes);
  g->inputs = er__arena_array(arena, (size_t)src->n_inputs + 1, sizeof *g->inputs);
  g->outputs = er__arena_array(arena, (size_t)src->n_outputs + 1, sizeof *g->outputs);
  g->index = er__arena_array(arena, (size_t)src->index_cap + 1, sizeof *g->index);
  if (!g->values || !g->nodes || !g->inputs || !g->outputs || !g->index) return ER_STATUS_OUT_OF_MEMORY;
  if (src->n_values) memcpy(g->values, src->values, (size_t)src->n_values * sizeof *g->values);
  if (src->n_inputs) memcpy(g->inputs, src->inputs, (size_t)src->n_inputs * sizeof *g->inputs);
  if (src->n_outputs) memcpy(g->outputs, src->outputs, (size_t)src->n_outputs * sizeof *g->outputs);
  if (src->index_cap) memcpy(g->index, src->index, (size_t)src->index_cap * sizeof *g->index);
  for (int32_t i = 0; i < src->n_nodes; i++) {
    er_node *n = &g->nodes[i];
    *n = src->nodes[i];
    n->inputs = er__arena_array(arena, (size_t)n->n_inputs + 1, sizeof *n->inputs);
    n->outputs = er__arena_array(arena, (size_t)n->n_outputs + 1, sizeof *n->outputs);
    if (!n->inputs || !n->outputs) return ER_STATUS_OUT_OF_MEMORY;
    memcpy(n->inputs, src->nodes[i].inputs, (size_t)n->n_inputs * sizeof *n->inputs);
    memcpy(n->outputs, src->nodes[i].outputs, (size_t)n->n_outputs * sizeof *n->outputs);
  }
  *out = g;
  return ER_STATUS_OK;
}

const er_attr *er__node_attr(const er_node *node, const char *name) {
  /* Kernels look attributes up on every run, often ones a node leaves
   * out: the first byte settles most comparisons without a call. */
  for (int i = 0; i < node->n_attrs; i++) {
    const char *an = node->attrs[i].name;
    if (an[0] == name[0] && strcmp(an, name) == 0) return &node->attrs[i];
  }
  return NULL;
}

int64_t er__node_attr_int(const er_node *node, const char *name, int64_t dflt) {
  const er_attr *a = er__node_attr(node, name);
  return a && a->type == ER_ATTR_INT ? a->i : dflt;
}

float er__node_attr_float(const er_node *node, const char *name, float dflt) {
  const er_attr *a = er__node_attr(node, name);
  return a && a->type == ER_ATTR_FLOAT ? a->f : dflt;
}

/* ======================================================================== */
/* Validation and topological order                                          */
/* ======================================================================== */

/* A growable list of value ids. */
typedef struct id_list {
  int32_t *v;
  size_t n, cap;
  bool oom;
} id_list;

static void id_push(id_list *l, int32_t id) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    int32_t *nv = realloc(l->v, cap * sizeof *nv);
    if (!nv) {
      l->oom = true;
      return;
    }
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n++] = id;
}

/* Appends the ids of `owner`'s values that subgraph `sub` (or subgraphs
 * nested in it) capture: a node with a subgraph implicitly reads them. */
static void add_captures(const er_graph *sub, const er_graph *owner, id_list *out) {
  for (int32_t v = 0; v < sub->n_values; v++) {
    const er_graph *gg = sub;
    int32_t id = v;
    while (!er__graph_same(gg, owner) && gg->parent && gg->values[id].kind == ER_VALUE_OUTER) {
      id = gg->values[id].outer;
      gg = gg->parent;
    }
    if (er__graph_same(gg, owner) && sub != owner) id_push(out, id);
  }
  for (int32_t i = 0; i < sub->n_nodes; i++) {
    const er_node *n = &sub->nodes[i];
    for (int a = 0; a < n->n_attrs; a++) {
      const er_attr *at = &n->attrs[a];
      if (at->type == ER_ATTR_GRAPH) add_captures(at->g, owner, out);
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n; j++) add_captures(at->graphs[j], owner, out);
    }
  }
}

/* The values each node of g depends on, node i's at
 * deps->v[(*dep_start)[i] .. (*dep_start)[i + 1]): its inputs and what its
 * subgraphs capture from g. */
static er_status node_deps(er_graph *g, id_list *deps, int32_t **dep_start_out) {
  int32_t n = g->n_nodes;
  int32_t *dep_start = malloc(((size_t)n + 1) * sizeof *dep_start);
  *dep_start_out = dep_start;
  if (!dep_start) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory validating graph '%s'", g->name);
  for (int32_t i = 0; i < n; i++) {
    er_node *node = &g->nodes[i];
    dep_start[i] = (int32_t)deps->n;
    for (int k = 0; k < node->n_inputs; k++)
      if (node->inputs[k] >= 0) id_push(deps, node->inputs[k]);
    for (int a = 0; a < node->n_attrs; a++) {
      er_attr *at = &node->attrs[a];
      if (at->type == ER_ATTR_GRAPH) add_captures(at->g, g, deps);
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n; j++) add_captures(at->graphs[j], g, deps);
    }
  }
  dep_start[n] = (int32_t)deps->n;
  if (deps->oom) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory validating graph '%s'", g->name);
  return ER_STATUS_OK;
}

static er_status validate_subgraphs(er_graph *g) {
  er_status st = ER_STATUS_OK;
  for (int32_t i = 0; i < g->n_nodes && st == ER_STATUS_OK; i++) {
    er_node *node = &g->nodes[i];
    for (int a = 0; a < node->n_attrs && st == ER_STATUS_OK; a++) {
      er_attr *at = &node->attrs[a];
      if (at->type == ER_ATTR_GRAPH) st = er__graph_validate(at->g);
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n && st == ER_STATUS_OK; j++) st = er__graph_validate(at->graphs[j]);
      if (st != ER_STATUS_OK) er__error_prefix("%s node '%s' attribute '%s'", node->op_type, node->name, at->name);
    }
  }
  return st;
}

er_status er__graph_validate(er_graph *g) {
  int32_t n = g->n_nodes;
  er_status st = ER_STATUS_OK;
  int32_t *pending = calloc((size_t)n + 1, sizeof *pending);   /* unmet inputs */
  int32_t *order = calloc((size_t)n + 1, sizeof *order);
  int32_t *users_start = calloc((size_t)g->n_values + 1, sizeof *users_start);
  int32_t *users = NULL;
  er_node *sorted = NULL;
  if (!pending || !order || !users_start) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory validating graph '%s'", g->name);
    goto done;
  }
  /* A graph output or node input that is an intermediate nobody produces. */
  for (int32_t i = 0; i < g->n_outputs; i++) {
    er_value *v = &g->values[g->outputs[i]];
    if (v->kind == ER_VALUE_INTERMEDIATE && v->producer < 0) {
      st = er__error(ER_STATUS_INVALID_GRAPH, "graph output '%s' is not produced by any node",
                     v->name);
      goto done;
    }
  }
  /* Each node's dependencies: its inputs plus the values its subgraphs
   * capture from this graph. */
  id_list deps = {0};
  int32_t *dep_start = NULL;
  st = node_deps(g, &deps, &dep_start);
  if (st != ER_STATUS_OK) goto deps_done;
  /* Count, per value, the nodes consuming it (an edge per distinct use). */
  int64_t edges = 0;
  for (int32_t i = 0; i < n; i++) {
    er_node *node = &g->nodes[i];
    for (int32_t k = dep_start[i]; k < dep_start[i + 1]; k++) {
      int32_t id = deps.v[k];
      er_value *v = &g->values[id];
      if (v->kind == ER_VALUE_INTERMEDIATE) {
        if (v->producer < 0) {
          st = er__error(ER_STATUS_INVALID_GRAPH,
                         "%s node '%s': input '%s' is not produced by any node", node->op_type,
                         node->name, v->name);
          goto deps_done;
        }
        if (v->producer == i) {
          st = er__error(ER_STATUS_INVALID_GRAPH, "%s node '%s' consumes its own output '%s' (a cycle)",
                         node->op_type, node->name, v->name);
          goto deps_done;
        }
        users_start[id]++;
        pending[i]++;
        edges++;
      }
    }
  }
  users = calloc((size_t)edges + 1, sizeof *users);
  if (!users) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory validating graph '%s'", g->name);
    goto deps_done;
  }
  /* Prefix sums turn counts into start offsets. */
  int32_t run = 0;
  for (int32_t v = 0; v < g->n_values; v++) {
    int32_t c = users_start[v];
    users_start[v] = run;
    run += c;
  }
  {
    int32_t *fill = calloc((size_t)g->n_values + 1, sizeof *fill);
    if (!fill) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory validating graph '%s'", g->name);
      goto deps_done;
    }
    for (int32_t i = 0; i < n; i++) {
      for (int32_t k = dep_start[i]; k < dep_start[i + 1]; k++) {
        int32_t id = deps.v[k];
        if (g->values[id].kind != ER_VALUE_INTERMEDIATE) continue;
        users[users_start[id] + fill[id]++] = i;
      }
    }
    free(fill);
  }
  free(deps.v);
  free(dep_start);
  deps.v = NULL;
  dep_start = NULL;
  /* Kahn's algorithm; ties keep the model's order (stable), which keeps runs
   * reproducible and error messages predictable. */
  int32_t head = 0, tail = 0;
  for (int32_t i = 0; i < n; i++)
    if (pending[i] == 0) order[tail++] = i;
  while (head < tail) {
    int32_t i = order[head++];
    er_node *node = &g->nodes[i];
    for (int k = 0; k < node->n_outputs; k++) {
      int32_t id = node->outputs[k];
      if (id < 0) continue;
      int32_t end = id + 1 < g->n_values ? users_start[id + 1] : (int32_t)edges;
      for (int32_t u = users_start[id]; u < end; u++)
        if (--pending[users[u]] == 0) order[tail++] = users[u];
    }
  }
  if (tail != n) {
    for (int32_t i = 0; i < n; i++)
      if (pending[i] > 0) {
        st = er__error(ER_STATUS_INVALID_GRAPH,
                       "graph '%s' has a cycle through %s node '%s' (%d of %d nodes cannot be "
                       "ordered)",
                       g->name, g->nodes[i].op_type, g->nodes[i].name, (int)(n - tail), (int)n);
        goto done;
      }
  }
  /* Reorder the nodes and renumber producers. */
  sorted = malloc(((size_t)n + 1) * sizeof *sorted);
  if (!sorted) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory validating graph '%s'", g->name);
    goto done;
  }
  for (int32_t i = 0; i < n; i++) sorted[i] = g->nodes[order[i]];
  for (int32_t i = 0; i < n; i++) g->nodes[i] = sorted[i];
  er__graph_relink(g);

  /* Subgraphs are validated as graphs of their own. */
  st = validate_subgraphs(g);
  goto done;
deps_done:
  free(deps.v);
  free(dep_start);
done:
  free(pending);
  free(order);
  free(users_start);
  free(users);
  free(sorted);
  return st;
}

er_status er__node_captures(const er_graph *g, const er_node *n, er_status (*fn)(void *ctx, int32_t v), void *ctx) {
  for (int a = 0; a < n->n_attrs; a++) {
    const er_attr *at = &n->attrs[a];
    int64_t cnt = at->type == ER_ATTR_GRAPH ? 1 : at->type == ER_ATTR_GRAPHS ? at->n : 0;
    for (int64_t j = 0; j < cnt; j++) {
      const er_graph *sg = at->type == ER_ATTR_GRAPH ? at->g : at->graphs[j];
      if (!sg->parent || !er__graph_same(sg->parent, g)) continue;
      for (int32_t v = 0; v < sg->n_values; v++) {
        if (sg->values[v].kind != ER_VALUE_OUTER || sg->values[v].outer < 0) continue;
        er_status st = fn(ctx, sg->values[v].outer);
        if (st != ER_STATUS_OK) return st;
      }
    }
  }
  return ER_STATUS_OK;
}

typedef struct count_ctx {
  int32_t *uses;
  int32_t weight;
} count_ctx;

static er_status count_one(void *ctx, int32_t v) {
  count_ctx *c = ctx;
  c->uses[v] += c->weight;
  return ER_STATUS_OK;
}

void er__node_count_captures(const er_graph *g, const er_node *n, int32_t *uses, int32_t weight) {
  count_ctx c = {uses, weight};
  (void)er__node_captures(g, n, count_one, &c);
}

/* ======================================================================== */
/* Links between values and nodes: the one place that keeps them true        */
/* ======================================================================== */

void er__graph_relink(er_graph *g) {
  for (int32_t v = 0; v < g->n_values; v++) g->values[v].producer = -1;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++)
      if (g->nodes[i].outputs[k] >= 0) g->values[g->nodes[i].outputs[k]].producer = i;
}

void er__graph_remove_nodes(er_graph *g, const bool *dead) {
  int32_t w = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!dead[i]) g->nodes[w++] = g->nodes[i];
  g->n_nodes = w;
  er__graph_relink(g);
}

/* A value id a node or the graph may name: -1 (omitted) or in range. */
static bool id_ok(const er_graph *g, int32_t v, bool optional) {
  return (optional && v == -1) || (v >= 0 && v < g->n_values);
}

er_status er__graph_check_links(const er_graph *g, const char *after) {
  const char *pass = after ? after : "?";
#define LINK_FAIL(...)                                                                                    \
  do {                                                                                                    \
    char msg_[400];                                                                                       \
    snprintf(msg_, sizeof msg_, __VA_ARGS__);                                                             \
    return er__error(ER_STATUS_INTERNAL, "graph '%s' after pass '%s': %s (a bug in that pass)", g->name, \
                     pass, msg_);                                                                         \
  } while (0)
  if (g->n_nodes < 0 || g->n_values < 0) LINK_FAIL("negative node or value count");
  for (int32_t i = 0; i < g->n_inputs; i++)
    if (!id_ok(g, g->inputs[i], false)) LINK_FAIL("graph input %d names value %d of %d", (int)i, (int)g->inputs[i], (int)g->n_values);
  for (int32_t i = 0; i < g->n_outputs; i++) {
    int32_t v = g->outputs[i];
    if (!id_ok(g, v, false)) LINK_FAIL("graph output %d names value %d of %d", (int)i, (int)v, (int)g->n_values);
    if (g->values[v].kind == ER_VALUE_INTERMEDIATE && g->values[v].producer < 0)
      LINK_FAIL("graph output '%s' has no producer", g->values[v].name);
  }
  for (int32_t v = 0; v < g->n_values; v++) {
    const er_value *val = &g->values[v];
    int32_t p = val->producer;
    if (p == -1) continue;
    if (p < 0 || p >= g->n_nodes)
      LINK_FAIL("value %d '%s' names producer node %d but the graph has %d nodes", (int)v, val->name, (int)p,
                (int)g->n_nodes);
    const er_node *n = &g->nodes[p];
    bool listed = false;
    for (int k = 0; k < n->n_outputs; k++) listed |= n->outputs[k] == v;
    if (!listed)
      LINK_FAIL("value %d '%s' names producer %s node '%s' (%d), which does not output it", (int)v, val->name,
                n->op_type, n->name, (int)p);
    if (val->kind != ER_VALUE_INTERMEDIATE)
      LINK_FAIL("value %d '%s' is a graph input, constant or capture but has producer node %d", (int)v, val->name,
                (int)p);
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++) {
      int32_t v = n->inputs[k];
      if (!id_ok(g, v, true)) LINK_FAIL("%s node '%s' input %d names value %d of %d", n->op_type, n->name, k, (int)v, (int)g->n_values);
      if (v >= 0 && g->values[v].kind == ER_VALUE_INTERMEDIATE && g->values[v].producer < 0)
        LINK_FAIL("%s node '%s' reads '%s', which no node produces", n->op_type, n->name, g->values[v].name);
    }
    for (int k = 0; k < n->n_outputs; k++) {
      int32_t v = n->outputs[k];
      if (!id_ok(g, v, true)) LINK_FAIL("%s node '%s' output %d names value %d of %d", n->op_type, n->name, k, (int)v, (int)g->n_values);
      if (v >= 0 && g->values[v].producer != i)
        LINK_FAIL("%s node '%s' (%d) outputs '%s', whose producer is node %d", n->op_type, n->name, (int)i,
                  g->values[v].name, (int)g->values[v].producer);
    }
  }
#undef LINK_FAIL
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Last use of values                                                        */
/* ======================================================================== */

/* Marks, for the values of `owner` that `sub` (or subgraphs nested in it)
 * captures, node_index as a reader. */
static void mark_captures(const er_graph *sub, int32_t node_index, int32_t *last_use,
                          const er_graph *owner) {
  for (int32_t v = 0; v < sub->n_values; v++) {
    if (sub->values[v].kind != ER_VALUE_OUTER) continue;
    const er_graph *gg = sub;
    int32_t id = v;
    while (gg->parent && !er__graph_same(gg, owner) && gg->values[id].kind == ER_VALUE_OUTER) {
      id = gg->values[id].outer;
      gg = gg->parent;
    }
    if (er__graph_same(gg, owner) && last_use[id] < node_index) last_use[id] = node_index;
  }
  for (int32_t i = 0; i < sub->n_nodes; i++) {
    const er_node *n = &sub->nodes[i];
    for (int a = 0; a < n->n_attrs; a++) {
      const er_attr *at = &n->attrs[a];
      if (at->type == ER_ATTR_GRAPH) mark_captures(at->g, node_index, last_use, owner);
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n; j++) mark_captures(at->graphs[j], node_index, last_use, owner);
    }
  }
}

void er__graph_last_use(const er_graph *g, int32_t *last_use) {
  for (int32_t v = 0; v < g->n_values; v++) last_use[v] = -1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) last_use[n->inputs[k]] = i;
    for (int a = 0; a < n->n_attrs; a++) {
      const er_attr *at = &n->attrs[a];
      if (at->type == ER_ATTR_GRAPH) mark_captures(at->g, i, last_use, g);
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n; j++) mark_captures(at->graphs[j], i, last_use, g);
    }
  }
  for (int32_t k = 0; k < g->n_outputs; k++) last_use[g->outputs[k]] = INT32_MAX;
}

int er__graph_width(const er_graph *g) {
  int width = 1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].n_inputs > width) width = g->nodes[i].n_inputs;
    if (g->nodes[i].n_outputs > width) width = g->nodes[i].n_outputs;
  }
  return width;
}
