/* rewrite.c - the graph-rewrite toolkit (see rewrite.h). */
#include "graph/rewrite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"

/* ---- looking at the graph ------------------------------------------------ */

bool er__rw_is(const er_node *n, const char *op) { return n->domain[0] == '\0' && strcmp(n->op_type, op) == 0; }

bool er__rw_is_in(const er_node *n, const char *domain, const char *op) {
  return strcmp(n->domain, domain) == 0 && strcmp(n->op_type, op) == 0;
}

bool er__rw_is_f32(const er_graph *g, int32_t v) { return v >= 0 && g->values[v].info.dtype == ER_DTYPE_FLOAT; }

double er__rw_const_scalar(const er_graph *g, int32_t v) {
  const er_tensor *t = er__graph_const(g, v);
  if (!t || er__tensor_count(t) != 1 || !er__dtype_is_float(t->dtype)) return NAN;
  return er__load_f64(t->data, t->dtype, 0);
}

bool er__rw_has_graphs(const er_node *n) {
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].type == ER_ATTR_GRAPH || n->attrs[a].type == ER_ATTR_GRAPHS) return true;
  return false;
}

/* ---- making things ------------------------------------------------------- */

const char *er__rw_name(er_graph *g, const char *base, const char *what) {
  char name[512];
  for (int k = 0;; k++) {
    snprintf(name, sizeof name, "%s/er_%s%s%d", base, what, k ? "_" : "", k);
    if (er__graph_find(g, name) < 0) break;
  }
  return er__arena_strdup(g->arena, name);
}

const char *er__rw_name_free(er_graph *g, const char *name) {
  size_t n = strlen(name) + 24;
  char *s = er__arena_alloc(g->arena, n);
  if (!s) return NULL;
  snprintf(s, n, "%s", name);
  for (int k = 1; er__graph_find(g, s) >= 0; k++) snprintf(s, n, "%s_%d", name, k);
  return s;
}

int32_t *er__rw_ids(er_graph *g, const int32_t *ids, int n) {
  int32_t *p = er__arena_array(g->arena, (size_t)n + 1, sizeof *p);
  if (p && n) memcpy(p, ids, (size_t)n * sizeof *p);
  return p;
}

er_status er__rw_new_value(er_graph *g, const char *base, const char *what, er_dtype dtype, int rank,
                           const int64_t *dims, int32_t *id_out) {
  const char *name = er__rw_name(g, base, what);
  if (!name) return ER_STATUS_OUT_OF_MEMORY;
  ER_CHECK(er__graph_add_value(g, name, id_out));
  er_value *v = &g->values[*id_out];
  v->kind = ER_VALUE_INTERMEDIATE;
  v->producer = -1;
  er__tensor_set(&v->info, dtype, rank, rank > 0 ? dims : NULL);
  return ER_STATUS_OK;
}

er_status er__rw_make_const(er_graph *g, int32_t id, er_tensor *t) {
  er_tensor *kept = er__arena_alloc(g->arena, sizeof *kept);
  if (!kept) {
    er__tensor_release(t);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  *kept = *t;
  t->data = NULL;
  t->flags = 0;
  if (kept->flags & ER_TENSOR_OWNS_DATA) {
    er_status st = er__owned_add(g->owned, kept);
    if (st != ER_STATUS_OK) {
      er__tensor_release(kept);
      return st;
    }
  }
  er_value *v = &g->values[id];
  v->kind = ER_VALUE_CONSTANT;
  v->constant = kept;
  v->producer = -1;
  er__tensor_set(&v->info, kept->dtype, kept->rank, kept->dims);
  return ER_STATUS_OK;
}

er_status er__rw_new_const(er_graph *g, const char *base, const char *what, er_tensor *t, int32_t *id_out) {
  const char *name = er__rw_name(g, base, what);
  er_status st = name ? er__graph_add_value(g, name, id_out) : ER_STATUS_OUT_OF_MEMORY;
  if (st != ER_STATUS_OK) {
    er__tensor_release(t);
    return st;
  }
  return er__rw_make_const(g, *id_out, t);
}

er_status er__rw_new_const_data(er_graph *g, const char *base, const char *what, er_dtype dtype, int64_t n,
                                const void *data, int32_t *id_out) {
  er_tensor t;
  memset(&t, 0, sizeof t);
  er__tensor_set(&t, dtype, n < 0 ? 0 : 1, n < 0 ? NULL : &n);
  ER_CHECK(er__tensor_alloc(&t, 0));
  if (t.nbytes) memcpy(t.data, data, t.nbytes);
  return er__rw_new_const(g, base, what, &t, id_out);
}

er_status er__rw_new_const_f64(er_graph *g, const char *base, const char *what, er_dtype dtype, int rank,
                               int64_t n, const double *vals, int32_t *id_out) {
  er_tensor t;
  memset(&t, 0, sizeof t);
  er__tensor_set(&t, dtype, rank, rank ? &n : NULL);
  ER_CHECK(er__tensor_alloc(&t, 0));
  for (int64_t i = 0; i < (rank ? n : 1); i++) er__store_f64(t.data, dtype, i, vals[i]);
  return er__rw_new_const(g, base, what, &t, id_out);
}

er_attr er__rw_attr_int(const char *name, int64_t v) {
  er_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = ER_ATTR_INT;
  a.i = v;
  return a;
}

er_attr er__rw_attr_float(const char *name, float v) {
  er_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = ER_ATTR_FLOAT;
  a.f = v;
  return a;
}

er_attr er__rw_attr_string(const char *name, const char *v) {
  er_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = ER_ATTR_STRING;
  a.s = v;
  a.s_len = strlen(v);
  return a;
}

er_attr er__rw_attr_ints(const char *name, int64_t *v, int64_t n) {
  er_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = ER_ATTR_INTS;
  a.ints = v;
  a.n = n;
  return a;
}

er_status er__rw_merge_attrs(er_graph *g, er_node *n, const er_attr *extra, int n_extra) {
  er_attr *attrs = er__arena_array(g->arena, (size_t)(n->n_attrs + n_extra) + 1, sizeof *attrs);
  if (!attrs) return ER_STATUS_OUT_OF_MEMORY;
  int w = 0;
  for (int i = 0; i < n->n_attrs; i++) {
    bool replaced = false;
    for (int j = 0; j < n_extra; j++)
      if (strcmp(n->attrs[i].name, extra[j].name) == 0) replaced = true;
    if (!replaced) attrs[w++] = n->attrs[i];
  }
  for (int j = 0; j < n_extra; j++) attrs[w++] = extra[j];
  n->attrs = attrs;
  n->n_attrs = w;
  return ER_STATUS_OK;
}

er_status er__rw_set_attrs(er_graph *g, er_node *n, const char *const *keep, const er_attr *extra, int n_extra) {
  er_attr *attrs = er__arena_array(g->arena, (size_t)(n->n_attrs + n_extra) + 1, sizeof *attrs);
  if (!attrs) return ER_STATUS_OUT_OF_MEMORY;
  int w = 0;
  for (int i = 0; i < n->n_attrs && keep; i++)
    for (int k = 0; keep[k]; k++)
      if (strcmp(n->attrs[i].name, keep[k]) == 0) attrs[w++] = n->attrs[i];
  for (int j = 0; j < n_extra; j++) attrs[w++] = extra[j];
  n->attrs = attrs;
  n->n_attrs = w;
  return ER_STATUS_OK;
}

er_status er__rw_set_inputs(er_graph *g, er_node *n, const int32_t *ids, int count) {
  int32_t *in = er__rw_ids(g, ids, count);
  if (!in) return ER_STATUS_OUT_OF_MEMORY;
  n->inputs = in;
  n->n_inputs = count;
  return ER_STATUS_OK;
}

er_status er__rw_set_op(er_node *n, const char *domain, const char *op, int version) {
  const er_op_def *def = er__op_find(domain, op, version);
  if (!def)
    return er__error(ER_STATUS_INTERNAL, "op %s%s%s version %d is missing", domain, domain[0] ? "." : "", op, version);
  n->op_type = op;
  n->domain = domain;
  n->version = version;
  n->op = def;
  return ER_STATUS_OK;
}

void er__rw_redirect_output(er_graph *g, int32_t producer, int32_t from, int32_t to) {
  er_node *p = &g->nodes[producer];
  for (int k = 0; k < p->n_outputs; k++)
    if (p->outputs[k] == from) p->outputs[k] = to;
  g->values[to].producer = producer;
  if (g->values[from].producer == producer) g->values[from].producer = -1;
}

/* ---- editing in place ---------------------------------------------------- */

er_status er__rw_begin(er_rewrite *rw, er_graph *g) {
  memset(rw, 0, sizeof *rw);
  rw->g = g;
  rw->ncap = g->n_nodes;
  rw->dead = calloc((size_t)rw->ncap + 1, sizeof *rw->dead);
  if (!rw->dead) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory rewriting graph '%s'", g->name);
  return er__rw_count_uses(rw);
}

er_status er__rw_count_uses(er_rewrite *rw) {
  er_graph *g = rw->g;
  if (g->n_values > rw->ucap) {
    /* Room for the values rewrites add before the next count (a few per
     * node); those read as unused until counted. */
    int32_t cap = g->n_values + 3 * g->n_nodes + 64;
    int32_t *u = realloc(rw->uses, (size_t)cap * sizeof *u);
    if (!u) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory rewriting graph '%s'", g->name);
    rw->uses = u;
    rw->ucap = cap;
  }
  memset(rw->uses, 0, (size_t)rw->ucap * sizeof *rw->uses);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (rw->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) rw->uses[n->inputs[k]]++;
    /* Subgraph captures count as uses; such values are never folded away. */
    er__node_count_captures(g, n, rw->uses, ER_RW_PINNED);
  }
  for (int32_t k = 0; k < g->n_outputs; k++) rw->uses[g->outputs[k]] += ER_RW_PINNED;
  return ER_STATUS_OK;
}

int32_t er__rw_sole_consumer(const er_rewrite *rw, int32_t v) {
  if (v < 0 || v >= rw->ucap || rw->uses[v] != 1) return -1;
  const er_graph *g = rw->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (rw->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == v) return i;
  }
  return -1;
}

int32_t er__rw_producer(const er_rewrite *rw, int32_t v) {
  if (v < 0) return -1;
  int32_t p = rw->g->values[v].producer;
  return p >= 0 && p < rw->g->n_nodes && !rw->dead[p] ? p : -1;
}

void er__rw_replace_uses(er_rewrite *rw, int32_t from, int32_t to) {
  for (int32_t i = 0; i < rw->g->n_nodes; i++) {
    if (rw->dead[i]) continue;
    er_node *n = &rw->g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] == from) n->inputs[k] = to;
  }
}

er_status er__rw_add_node(er_rewrite *rw, const er_node *proto, const int32_t *in, int n_in, const int32_t *out,
                          int n_out, int32_t *index_out) {
  er_graph *g = rw->g;
  if (g->n_nodes >= rw->ncap) {
    int32_t cap = rw->ncap * 2 + 16;
    er_node *nodes = er__arena_array(g->arena, (size_t)cap + 1, sizeof *nodes);
    bool *dead = realloc(rw->dead, ((size_t)cap + 1) * sizeof *dead);
    if (dead) rw->dead = dead;
    if (!nodes || !dead) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory rewriting graph '%s'", g->name);
    memcpy(nodes, g->nodes, (size_t)g->n_nodes * sizeof *nodes);
    g->nodes = nodes;
    rw->ncap = cap;
  }
  int32_t i = g->n_nodes;
  er_node *n = &g->nodes[i];
  *n = *proto;
  n->name = er__rw_name(g, proto->name[0] ? proto->name : proto->op_type, "n");
  n->inputs = er__rw_ids(g, in, n_in);
  n->outputs = er__rw_ids(g, out, n_out);
  if (!n->name || !n->inputs || !n->outputs) return ER_STATUS_OUT_OF_MEMORY;
  n->n_inputs = n_in;
  n->n_outputs = n_out;
  rw->dead[i] = false;
  g->n_nodes++;
  for (int k = 0; k < n_out; k++)
    if (out[k] >= 0) g->values[out[k]].producer = i;
  *index_out = i;
  return ER_STATUS_OK;
}

void er__rw_prune(er_rewrite *rw, bool keep_graphs) {
  er_graph *g = rw->g;
  for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
    if (rw->dead[i]) continue;
    const er_node *n = &g->nodes[i];
    bool used = n->n_outputs == 0;
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0 && rw->uses[n->outputs[k]] > 0) used = true;
    if (used || (keep_graphs && er__rw_has_graphs(n))) continue;
    rw->dead[i] = true;
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) rw->uses[n->inputs[k]]--;
  }
}

void er__rw_commit(er_rewrite *rw) {
  bool any = false;
  for (int32_t i = 0; i < rw->g->n_nodes && !any; i++) any = rw->dead[i];
  if (!any) return;
  er__graph_remove_nodes(rw->g, rw->dead);
  memset(rw->dead, 0, ((size_t)rw->ncap + 1) * sizeof *rw->dead);
}

void er__rw_end(er_rewrite *rw) {
  free(rw->uses);
  free(rw->dead);
  rw->uses = NULL;
  rw->dead = NULL;
  rw->ucap = rw->ncap = 0;
}

/* ---- rebuilding the node list -------------------------------------------- */

void er__rw_list_init(er_rw_list *l, er_graph *g) {
  memset(l, 0, sizeof *l);
  l->g = g;
}

er_status er__rw_list_push(er_rw_list *l, const er_node *n) {
  if (l->n == l->cap) {
    int32_t cap = l->cap * 2 + 16;
    er_node *nodes = er__arena_array(l->g->arena, (size_t)cap + 1, sizeof *nodes);
    if (!nodes) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory rewriting graph '%s'", l->g->name);
    if (l->n) memcpy(nodes, l->nodes, (size_t)l->n * sizeof *nodes);
    l->nodes = nodes;
    l->cap = cap;
  }
  l->nodes[l->n++] = *n;
  return ER_STATUS_OK;
}

void er__rw_list_commit(er_rw_list *l) {
  if (!l->nodes) {
    /* An empty list: the graph keeps a valid (empty) node array. */
    l->g->n_nodes = 0;
  } else {
    l->g->nodes = l->nodes;
    l->g->n_nodes = l->n;
  }
  er__graph_relink(l->g);
  l->nodes = NULL;
  l->n = l->cap = 0;
}
