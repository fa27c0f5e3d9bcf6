/* hoist.c - loop-invariant nodes move out of Loop bodies.
 *
 * Exporters leave work in a decoder's Loop body that reads only what every
 * iteration sees alike: PaddleOCR SLANet's attention step projects the
 * encoder features ([1, 256, 96] x [96, 256]) in each of its up to 500
 * steps, about 150 us each on one Zen 3 core. A body node is invariant when
 * it is deterministic, has no subgraph, and reads only
 *   - constants of the body,
 *   - values the body captures from the main graph,
 *   - carried values the body passes through unchanged (output 1 + i is
 *     input 2 + i), which hold the Loop's input in every iteration,
 *   - outputs of invariant nodes.
 * Such nodes run once, just before the Loop, in the main graph; the body
 * captures their outputs under the same names, as an exporter could have
 * written it. The cost: they also run when the loop runs no iteration.
 * Loops in the main graph only. */
#include <stdlib.h>

#include "graph/graph.h"
#include "graph/rewrite.h"


/* Ops whose result is the same for the same inputs. */
static bool deterministic(const er_node *n) {
  static const char *const random_ops[] = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                           "RandomUniformLike", "Bernoulli", "Multinomial", "Dropout"};
  if (n->domain[0] != '\0') return false;
  for (size_t k = 0; k < ER_ARRAY_LEN(random_ops); k++)
    if (strcmp(n->op_type, random_ops[k]) == 0) return false;
  return true;
}

/* The main-graph value that holds body value v in every iteration, or -1
 * when v may change between iterations (or is made by a body node that
 * stays). `parent_of` holds the ids given to hoisted values so far. */
static int32_t invariant_source(const er_graph *body, const er_node *loop, const int32_t *parent_of, int32_t v) {
  const er_value *bv = &body->values[v];
  if (parent_of[v] >= 0) return parent_of[v];
  if (bv->kind == ER_VALUE_OUTER) return bv->outer;
  for (int i = 2; i < body->n_inputs; i++) {
    if (body->inputs[i] != v) continue;
    /* A carried value passed through unchanged. */
    if (i - 1 < body->n_outputs && body->outputs[i - 1] == v && i < loop->n_inputs) return loop->inputs[i];
    return -1;
  }
  return -1;
}

/* Moves the invariant nodes of the Loop at g->nodes[li] in front of it;
 * *moved_out: how many. */
static er_status hoist_loop(er_graph *g, int32_t li, int32_t *moved_out) {
  *moved_out = 0;
  const er_attr *at = er__node_attr(&g->nodes[li], "body");
  if (!at || at->type != ER_ATTR_GRAPH || !at->g) return ER_STATUS_OK;
  er_graph *body = at->g;
  if (body->n_nodes == 0) return ER_STATUS_OK;
  er_status st = ER_STATUS_OK;
  int32_t *parent_of = malloc(((size_t)body->n_values + 1) * sizeof *parent_of);
  bool *moved = calloc((size_t)body->n_nodes + 1, sizeof *moved);
  er_node *hoisted = er__arena_array(g->arena, (size_t)body->n_nodes + 1, sizeof *hoisted);
  int32_t n_hoisted = 0;
  if (!parent_of || !moved || !hoisted) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory hoisting loop-invariant nodes");
    goto done;
  }
  for (int32_t v = 0; v < body->n_values; v++) parent_of[v] = -1;

  for (int32_t i = 0; i < body->n_nodes; i++) {
    const er_node *n = &body->nodes[i];
    if (!deterministic(n) || er__rw_has_graphs(n) || n->n_inputs == 0) continue;
    int32_t src[ER_MAX_NODE_IO];
    bool ok = n->n_inputs <= ER_MAX_NODE_IO && n->n_outputs <= ER_MAX_NODE_IO;
    for (int k = 0; ok && k < n->n_inputs; k++) {
      int32_t v = n->inputs[k];
      src[k] = -1;
      if (v < 0) continue;
      const er_value *bv = &body->values[v];
      if (bv->kind == ER_VALUE_CONSTANT && invariant_source(body, &g->nodes[li], parent_of, v) < 0) {
        /* A body constant (not an input): the main graph gets it under
         * its name, and the body captures it from there. */
        if (er__graph_find(g, bv->name) >= 0) ok = false;
        continue;
      }
      src[k] = invariant_source(body, &g->nodes[li], parent_of, v);
      if (src[k] < 0) ok = false;
    }
    /* Outputs keep their names in the main graph. */
    for (int k = 0; ok && k < n->n_outputs; k++)
      if (n->outputs[k] >= 0 && er__graph_find(g, body->values[n->outputs[k]].name) >= 0) ok = false;
    if (!ok) continue;

    er_node h = *n;
    h.inputs = er__arena_array(g->arena, (size_t)n->n_inputs + 1, sizeof *h.inputs);
    h.outputs = er__arena_array(g->arena, (size_t)n->n_outputs + 1, sizeof *h.outputs);
    if (!h.inputs || !h.outputs) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory moving node '%s' out of a Loop body", n->name);
      goto done;
    }
    for (int k = 0; k < n->n_inputs; k++) {
      int32_t v = n->inputs[k];
      h.inputs[k] = v < 0 ? -1 : src[k] >= 0 ? src[k] : parent_of[v];
      if (v < 0 || h.inputs[k] >= 0) continue;
      er_value *bv = &body->values[v];
      int32_t pid;
      st = er__graph_add_value(g, bv->name, &pid);
      if (st != ER_STATUS_OK) goto done;
      bv = &body->values[v];
      er_value *pv = &g->values[pid];
      pv->kind = ER_VALUE_CONSTANT;
      pv->constant = bv->constant;
      pv->info = bv->info;
      bv->kind = ER_VALUE_OUTER;
      bv->outer = pid;
      parent_of[v] = pid;
      h.inputs[k] = pid;
    }
    for (int k = 0; k < n->n_outputs; k++) {
      int32_t v = n->outputs[k];
      h.outputs[k] = -1;
      if (v < 0) continue;
      int32_t pid;
      st = er__graph_add_value(g, body->values[v].name, &pid);
      if (st != ER_STATUS_OK) goto done;
      er_value *bv = &body->values[v];
      g->values[pid].info = bv->info;
      g->values[pid].info.data = NULL;
      bv->kind = ER_VALUE_OUTER;
      bv->outer = pid;
      bv->producer = -1;
      parent_of[v] = pid;
      h.outputs[k] = pid;
    }
    hoisted[n_hoisted++] = h;
    moved[i] = true;
  }
  if (n_hoisted == 0) goto done;

  /* The body without them. */
  er__graph_remove_nodes(body, moved);

  /* The main graph with them just before the Loop. */
  er_node *nodes = er__arena_array(g->arena, (size_t)(g->n_nodes + n_hoisted) + 1, sizeof *nodes);
  if (!nodes) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory placing %d hoisted nodes in graph '%s'", (int)n_hoisted, g->name);
    goto done;
  }
  memcpy(nodes, g->nodes, (size_t)li * sizeof *nodes);
  memcpy(nodes + li, hoisted, (size_t)n_hoisted * sizeof *nodes);
  memcpy(nodes + li + n_hoisted, g->nodes + li, (size_t)(g->n_nodes - li) * sizeof *nodes);
  g->nodes = nodes;
  g->n_nodes += n_hoisted;
  er__graph_relink(g);
  *moved_out = n_hoisted;
done:
  free(parent_of);
  free(moved);
  return st;
}

er_status er__graph_hoist_loop_invariants(er_graph *g, int32_t *hoisted_out) {
  int32_t total = 0;
  if (g->parent == NULL)
    for (int32_t i = 0; i < g->n_nodes; i++) {
      if (!er__rw_is(&g->nodes[i], "Loop")) continue;
      int32_t moved;
      ER_CHECK(hoist_loop(g, i, &moved));
      i += moved;
      total += moved;
    }
  if (hoisted_out) *hoisted_out = total;
  return ER_STATUS_OK;
}
