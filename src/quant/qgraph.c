/* qgraph.c - graph editing for the quantizer (see qgraph.h). */
#include "quant/qgraph.h"

#include <stdio.h>
#include <stdlib.h>

void er__qb_init(er_qbuild *b, er_graph *g) {
  b->g = g;
  er__rw_list_init(&b->list, g);
}

void er__qb_free(er_qbuild *b) { er__rw_list_init(&b->list, b->g); }

er_status er__qb_value(er_qbuild *b, const char *base, const char *suffix, int32_t *id_out) {
  size_t n = strlen(base) + strlen(suffix) + 1;
  char joined[1024];
  if (n > sizeof joined) return er__error(ER_STATUS_LIMIT, "value name '%s%s' is too long", base, suffix);
  snprintf(joined, sizeof joined, "%s%s", base, suffix);
  const char *name = er__rw_name_free(b->g, joined);
  if (!name) return ER_STATUS_OUT_OF_MEMORY;
  return er__graph_add_value(b->g, name, id_out);
}

er_status er__qb_make_constant(er_qbuild *b, int32_t id, er_tensor *t) {
  ER_CHECK(er__rw_make_const(b->g, id, t));
  b->g->values[id].has_declared_type = false;
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

er_status er__qb_keep(er_qbuild *b, const er_node *node) { return er__rw_list_push(&b->list, node); }

int32_t *er__qb_ids(er_qbuild *b, const int32_t *ids, int n) { return er__rw_ids(b->g, ids, n); }

er_status er__qb_node(er_qbuild *b, const char *op_type, const char *name, const int32_t *inputs, int n_inputs,
                      const int32_t *outputs, int n_outputs, const er_attr *attrs, int n_attrs) {
  er_node node;
  memset(&node, 0, sizeof node);
  er_arena *a = b->g->arena;
  node.op_type = er__arena_strdup(a, op_type);
  node.name = er__arena_strdup(a, name ? name : "");
  node.domain = "";
  node.n_inputs = n_inputs;
  node.n_outputs = n_outputs;
  node.inputs = er__qb_ids(b, inputs, n_inputs);
  node.outputs = er__qb_ids(b, outputs, n_outputs);
  node.n_attrs = n_attrs;
  er_attr *copy = er__arena_array(a, (size_t)n_attrs + 1, sizeof(er_attr));
  if (!node.op_type || !node.name || !node.inputs || !node.outputs || !copy) return ER_STATUS_OUT_OF_MEMORY;
  for (int i = 0; i < n_attrs; i++) {
    copy[i] = attrs[i];
    copy[i].name = er__arena_strdup(a, attrs[i].name);
    if (!copy[i].name) return ER_STATUS_OUT_OF_MEMORY;
  }
  node.attrs = copy;
  /* Bound when the written model is loaded again. */
  node.version = 0;
  node.op = NULL;
  return er__rw_list_push(&b->list, &node);
}

er_node *er__qb_last(er_qbuild *b) { return b->list.n ? &b->list.nodes[b->list.n - 1] : NULL; }

er_status er__qb_commit(er_qbuild *b) {
  er__rw_list_commit(&b->list);
  return ER_STATUS_OK;
}

er_attr er__qb_attr_int(const char *name, int64_t v) { return er__rw_attr_int(name, v); }
