/* qgraph.c - graph editing for the quantizer (see qgraph.h). */
#include "quant/qgraph.h"

#include <stdio.h>
#include <stdlib.h>

void er__qb_init(er_qbuild *b, er_graph *g) {
  memset(b, 0, sizeof *b);
  b->model = g->model;
  b->g = g;
}

void er__qb_free(er_qbuild *b) {
  free(b->nodes);
  b->nodes = NULL;
  b->n = b->cap = 0;
}

er_status er__qb_value(er_qbuild *b, const char *base, const char *suffix, int32_t *id_out) {
  size_t n = strlen(base) + strlen(suffix) + 24;
  char *name = er__arena_alloc(&b->model->arena, n);
  if (!name) return ER_STATUS_OUT_OF_MEMORY;
  snprintf(name, n, "%s%s", base, suffix);
  for (int k = 1; er__graph_find(b->g, name) >= 0; k++) snprintf(name, n, "%s%s_%d", base, suffix, k);
  return er__graph_add_value(b->g, name, id_out);
}

er_status er__qb_make_constant(er_qbuild *b, int32_t id, er_tensor *t) {
  er_tensor *kept = er__arena_alloc(&b->model->arena, sizeof *kept);
  if (!kept) {
    er__tensor_release(t);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  *kept = *t;
  t->data = NULL;
  t->flags = 0;
  if (kept->flags & ER_TENSOR_OWNS_DATA) ER_CHECK(er__model_own(b->model, kept));
  er_value *v = &b->g->values[id];
  v->kind = ER_VALUE_CONSTANT;
  v->constant = kept;
  v->producer = -1;
  v->has_declared_type = false;
  er__tensor_set(&v->info, kept->dtype, kept->rank, kept->dims);
  return ER_STATUS_OK;
}

er_status er__qb_constant(er_qbuild *b, const char *base, const char *suffix, er_tensor *t, int32_t *id_out) {
  er_status st = er__qb_value(b, base, suffix, id_out);
  if (st != ER_STATUS_OK) {
    er__tensor_release(t);
    return st;
  }
  return er__qb_make_constant(b, *id_out, t);
}

er_status er__qb_constant_vec(er_qbuild *b, const char *base, const char *suffix, er_dtype dtype, int rank,
                              int64_t n, const double *vals, int32_t *id_out) {
  er_tensor t;
  int64_t dims[1] = {n};
  er__tensor_set(&t, dtype, rank, rank ? dims : NULL);
  ER_CHECK(er__tensor_alloc(&t, 0));
  for (int64_t i = 0; i < (rank ? n : 1); i++) er__store_f64(t.data, dtype, i, vals[i]);
  return er__qb_constant(b, base, suffix, &t, id_out);
}

static er_status reserve(er_qbuild *b) {
  if (b->n < b->cap) return ER_STATUS_OK;
  int32_t cap = b->cap ? b->cap * 2 : 64;
  er_node *n = realloc(b->nodes, (size_t)cap * sizeof *n);
  if (!n) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory editing graph '%s'", b->g->name);
  b->nodes = n;
  b->cap = cap;
  return ER_STATUS_OK;
}

er_status er__qb_keep(er_qbuild *b, const er_node *node) {
  ER_CHECK(reserve(b));
  b->nodes[b->n++] = *node;
  return ER_STATUS_OK;
}

int32_t *er__qb_ids(er_qbuild *b, const int32_t *ids, int n) {
  int32_t *out = er__arena_array(&b->model->arena, (size_t)n + 1, sizeof *out);
  if (out && n) memcpy(out, ids, (size_t)n * sizeof *out);
  return out;
}

er_status er__qb_node(er_qbuild *b, const char *op_type, const char *name, const int32_t *inputs, int n_inputs,
                      const int32_t *outputs, int n_outputs, const er_attr *attrs, int n_attrs) {
  ER_CHECK(reserve(b));
  er_node node;
  memset(&node, 0, sizeof node);
  er_arena *a = &b->model->arena;
  node.op_type = er__arena_strdup(a, op_type);
  node.name = er__arena_strdup(a, name ? name : "");
  node.domain = "";
  node.n_inputs = n_inputs;
  node.n_outputs = n_outputs;
  node.inputs = er__qb_ids(b, inputs, n_inputs);
  node.outputs = er__qb_ids(b, outputs, n_outputs);
  node.n_attrs = n_attrs;
  node.attrs = er__arena_array(a, (size_t)n_attrs + 1, sizeof(er_attr));
  if (!node.op_type || !node.name || !node.inputs || !node.outputs || !node.attrs) return ER_STATUS_OUT_OF_MEMORY;
  for (int i = 0; i < n_attrs; i++) {
    node.attrs[i] = attrs[i];
    node.attrs[i].name = er__arena_strdup(a, attrs[i].name);
    if (!node.attrs[i].name) return ER_STATUS_OUT_OF_MEMORY;
  }
  node.version = 0;
  node.op = NULL;
  b->nodes[b->n++] = node;
  return ER_STATUS_OK;
}

er_node *er__qb_last(er_qbuild *b) { return b->n ? &b->nodes[b->n - 1] : NULL; }

er_status er__qb_commit(er_qbuild *b) {
  er_graph *g = b->g;
  er_node *nodes = er__arena_array(&b->model->arena, (size_t)b->n + 1, sizeof *nodes);
  if (!nodes) return ER_STATUS_OUT_OF_MEMORY;
  if (b->n) memcpy(nodes, b->nodes, (size_t)b->n * sizeof *nodes);
  g->nodes = nodes;
  g->n_nodes = b->n;
  er__graph_relink(g);
  er__qb_free(b);
  return ER_STATUS_OK;
}

er_attr er__qb_attr_int(const char *name, int64_t v) {
  er_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = ER_ATTR_INT;
  a.i = v;
  return a;
}
