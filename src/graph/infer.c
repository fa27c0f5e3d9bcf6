/* infer.c - binding nodes to ops, load-time checking (shape and type
 * inference), constant folding and dead-node removal. */
#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "graph/graph.h"
#include "graph/rewrite.h"
#include "ops/op.h"

/* Folding materializes outputs at load, where running them would have
 * materialized them on every run; the model's max_tensor_bytes bounds each
 * one (models that build their weights with ConstantOfShape, e.g. the
 * classic VGG/AlexNet test models, fold 100 MB tensors), and folded data
 * counts against max_total_bytes like initializers. */

static int64_t domain_opset(const struct er_model *m, const char *domain) {
  for (int i = 0; i < m->n_opsets; i++)
    if (strcmp(m->opsets[i].domain, domain) == 0) return m->opsets[i].version;
  return -1;
}

er_status er__graph_bind_ops(er_graph *g) {
  const struct er_model *m = g->model;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    er_node *node = &g->nodes[i];
    int64_t opset = domain_opset(m, node->domain);
    int version;
    char have[128];
    if (opset < 0)
      return er__error(ER_STATUS_INVALID_MODEL, "%s node '%s' uses domain '%s', which the model does not import",
                       node->op_type, node->name, node->domain[0] ? node->domain : "ai.onnx");
    if (node->domain[0] == '\0') {
      if (opset > er__onnx_max_opset() || opset < 1)
        return er__error(ER_STATUS_UNSUPPORTED,
                         "default-domain opset %lld is not supported (edgerun knows opsets 1 to %d)",
                         (long long)opset, er__onnx_max_opset());
      version = er__onnx_op_version(node->op_type, opset);
      if (version == 0)
        return er__error(ER_STATUS_UNSUPPORTED, "%s node '%s': '%s' is not an ONNX operator at opset %lld",
                         node->op_type, node->name, node->op_type, (long long)opset);
    } else {
      version = (int)(opset > INT32_MAX ? INT32_MAX : opset);
    }
    node->version = version;
    node->op = er__op_find(node->domain, node->op_type, version);
    if (!node->op) {
      er__op_versions_str(node->domain, node->op_type, have, sizeof have);
      if (have[0])
        return er__error(ER_STATUS_UNSUPPORTED,
                         "%s node '%s': %s version %d (opset %lld) is not supported; edgerun "
                         "implements versions %s",
                         node->op_type, node->name, node->op_type, version, (long long)opset, have);
      return er__error(ER_STATUS_UNSUPPORTED, "%s node '%s': operator %s%s%s is not supported",
                       node->op_type, node->name, node->domain, node->domain[0] ? "." : "",
                       node->op_type);
    }
    const er_op_def *op = node->op;
    if (node->n_inputs < op->min_inputs || node->n_inputs > op->max_inputs)
      return er__error(ER_STATUS_INVALID_GRAPH, "%s node '%s' has %d inputs; %s takes %d to %d",
                       node->op_type, node->name, node->n_inputs, op->name, op->min_inputs,
                       op->max_inputs);
    if (node->n_outputs < op->min_outputs || node->n_outputs > op->max_outputs)
      return er__error(ER_STATUS_INVALID_GRAPH, "%s node '%s' has %d outputs; %s gives %d to %d",
                       node->op_type, node->name, node->n_outputs, op->name, op->min_outputs,
                       op->max_outputs);
    for (int k = 0; k < op->min_inputs && k < node->n_inputs; k++)
      if (node->inputs[k] < 0 && !(op->value_inputs & 0x80000000u))
        return er__error(ER_STATUS_INVALID_GRAPH, "%s node '%s': required input %d is empty",
                         node->op_type, node->name, k);
    for (int a = 0; a < node->n_attrs; a++) {
      er_attr *at = &node->attrs[a];
      if (at->type == ER_ATTR_GRAPH) ER_CHECK(er__graph_bind_ops(at->g));
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n; j++) ER_CHECK(er__graph_bind_ops(at->graphs[j]));
    }
  }
  return ER_STATUS_OK;
}

/* A value whose data is fixed at load (initializers a caller cannot
 * override, folded outputs). IR < 4 lists every initializer as an input, and
 * those are constants too. */
static bool value_is_const(const er_graph *g, const er_value *v) {
  if (v->kind == ER_VALUE_CONSTANT)
    return !v->is_graph_input || g->model->ir_version < 4 || g->parent != NULL;
  return false;
}

/* The op reads only its inputs' shapes (Shape, Size): it can fold whenever
 * those shapes are fully known. */
static bool reads_shape_only(const er_node *node) {
  return node->domain[0] == '\0' &&
         (strcmp(node->op_type, "Shape") == 0 || strcmp(node->op_type, "Size") == 0);
}

/* DequantizeLinear in the main graph is not folded here: the QDQ pass
 * (passes-qdq.c) needs the integer weights and their scales, and folds
 * itself what it does not turn into integer ops. */
static bool folded_by_qdq_pass(const er_graph *g, const er_node *node) {
  return g->parent == NULL && node->domain[0] == '\0' && strcmp(node->op_type, "DequantizeLinear") == 0;
}

static er_status fold_node(er_graph *g, er_node *node, er_tensor *const *in, er_tensor *out_infos,
                           bool *folded) {
  er_tensor outs[ER_MAX_NODE_IO > 64 ? 64 : ER_MAX_NODE_IO];
  er_tensor *outp[64];
  uint64_t bytes = 0;
  *folded = false;
  if (node->n_outputs > 64) return ER_STATUS_OK;
  for (int k = 0; k < node->n_outputs; k++) {
    if (node->outputs[k] < 0) {
      outp[k] = NULL;
      continue;
    }
    int64_t c = er__tensor_count(&out_infos[k]);
    if (c < 0) return ER_STATUS_OK;
    uint64_t b;
    if (!er__mul_u64((uint64_t)c, er_dtype_size(out_infos[k].dtype), &b) ||
        !er__add_u64(bytes, b, &bytes) || bytes > g->model->limits.max_tensor_bytes)
      return ER_STATUS_OK;
    if (!er__dtype_is_numeric(out_infos[k].dtype)) return ER_STATUS_OK;
  }
  uint64_t total;
  if (!er__add_u64(g->model->total_bytes, bytes, &total) || total > g->model->limits.max_total_bytes)
    return ER_STATUS_OK; /* left to run time */
  er_kctx ctx = {node, node->n_inputs, in, node->n_outputs, outp, false, NULL, g, NULL};
  int made = 0;
  er_status st = ER_STATUS_OK;
  for (int k = 0; k < node->n_outputs; k++) {
    if (node->outputs[k] < 0) continue;
    outs[k] = out_infos[k];
    outs[k].data = NULL;
    outs[k].flags = 0;
    outp[k] = &outs[k];
  }
  /* Run-time check with everything known, then allocate and run. */
  st = node->op->check(&ctx);
  for (int k = 0; k < node->n_outputs && st == ER_STATUS_OK; k++) {
    if (!outp[k]) continue;
    if (!(node->op->flags & ER_OP_DYNAMIC_OUTPUT))
      st = (node->op->flags & ER_OP_WRITES_ALL) ? er__tensor_alloc_raw(outp[k], g->model->limits.max_tensor_bytes)
                                               : er__tensor_alloc(outp[k], g->model->limits.max_tensor_bytes);
    made = k + 1;
  }
  if (st == ER_STATUS_OK) st = node->op->run(&ctx);
  if (st != ER_STATUS_OK) {
    for (int k = 0; k < made; k++)
      if (outp[k]) er__tensor_release(outp[k]);
    return st;
  }
  /* The outputs become constant values owned by the model. */
  for (int k = 0; k < node->n_outputs; k++) {
    if (!outp[k]) continue;
    er_tensor *t = er__arena_alloc(g->arena, sizeof *t);
    if (!t) return ER_STATUS_OUT_OF_MEMORY;
    *t = outs[k];
    ER_CHECK(er__owned_add(g->owned, t));
    er_value *v = &g->values[node->outputs[k]];
    v->kind = ER_VALUE_CONSTANT;
    v->constant = t;
    v->producer = -1;
    er__tensor_set(&v->info, t->dtype, t->rank, t->dims);
  }
  g->model->total_bytes = total;
  *folded = true;
  return ER_STATUS_OK;
}

/* Removes folded nodes and nodes whose outputs nobody uses; renumbers
 * producers. */
static er_status compact(er_graph *g, const bool *dead_in) {
  int32_t n = g->n_nodes;
  bool *dead = malloc((size_t)n + 1);
  int32_t *uses = calloc((size_t)g->n_values + 1, sizeof *uses);
  if (!dead || !uses) {
    free(dead);
    free(uses);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory optimizing graph '%s'", g->name);
  }
  memcpy(dead, dead_in, (size_t)n);
  for (int32_t i = 0; i < n; i++)
    if (!dead[i])
      for (int k = 0; k < g->nodes[i].n_inputs; k++)
        if (g->nodes[i].inputs[k] >= 0) uses[g->nodes[i].inputs[k]]++;
  for (int32_t i = 0; i < g->n_outputs; i++) uses[g->outputs[i]]++;
  /* Subgraphs may capture values of this graph. */
  for (int32_t i = 0; i < n; i++) er__node_count_captures(g, &g->nodes[i], uses, 1);
  /* Backwards sweep: a node none of whose outputs is used is dead. Random
   * ops are kept only if used too; no op here has other side effects. */
  for (int32_t i = n - 1; i >= 0; i--) {
    er_node *node = &g->nodes[i];
    if (dead[i]) continue;
    bool used = false;
    for (int k = 0; k < node->n_outputs; k++)
      if (node->outputs[k] >= 0 && uses[node->outputs[k]] > 0) used = true;
    if (!used) {
      dead[i] = true;
      for (int k = 0; k < node->n_inputs; k++)
        if (node->inputs[k] >= 0) uses[node->inputs[k]]--;
    }
  }
  /* Values only a dropped node made are made by no one now. */
  er__graph_remove_nodes(g, dead);
  free(dead);
  free(uses);
  return ER_STATUS_OK;
}

/* A Loop's carried values that its body passes through unchanged (output
 * 1 + i is input 2 + i) and whose initial value is a load-time constant
 * hold that constant in every iteration: the body sees them as constants,
 * so what it computes from them alone folds at load and its kernels take
 * them as constant weights. Exporters route a decoder's weights through
 * the loop this way (PaddleOCR's SLANet transposed its GRU weights and
 * packed its MatMul weights again in each of its 119 steps). */
static void loop_invariant_inputs(er_graph *g, const er_node *node) {
  if (node->domain[0] != '\0' || strcmp(node->op_type, "Loop") != 0) return;
  const er_attr *at = er__node_attr(node, "body");
  if (!at || at->type != ER_ATTR_GRAPH) return;
  er_graph *body = at->g;
  int n = node->n_inputs - 2;
  for (int i = 0; i < n && 2 + i < body->n_inputs && 1 + i < body->n_outputs; i++) {
    int32_t bid = body->inputs[2 + i], pid = node->inputs[2 + i];
    if (pid < 0 || body->outputs[1 + i] != bid) continue;
    er_value *bv = &body->values[bid];
    const er_value *pv = &g->values[pid];
    const er_tensor *c = (pv->kind == ER_VALUE_CONSTANT && value_is_const(g, pv)) ? pv->constant
                         : (pv->kind == ER_VALUE_OUTER ? pv->constant : NULL);
    if (!c || !c->data || bv->kind != ER_VALUE_INPUT) continue;
    if (bv->info.dtype != ER_DTYPE_UNDEFINED && bv->info.dtype != c->dtype) continue;
    bv->kind = ER_VALUE_CONSTANT;
    bv->constant = (er_tensor *)c;
    er__tensor_set(&bv->info, c->dtype, c->rank, c->dims);
  }
}

er_status er__graph_infer(er_graph *g, bool fold) {
  er_status st = ER_STATUS_OK;
  er_tensor *in_t = NULL, *out_t = NULL;
  er_tensor **inp = NULL, **outp = NULL;
  /* Scratch sized for the widest node, not for ER_MAX_NODE_IO. */
  size_t width = 1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if ((size_t)g->nodes[i].n_inputs > width) width = (size_t)g->nodes[i].n_inputs;
    if ((size_t)g->nodes[i].n_outputs > width) width = (size_t)g->nodes[i].n_outputs;
  }
  bool *dead = calloc((size_t)g->n_nodes + 1, 1);
  /* Partly known shape vectors, by value id (shapevals.c). */
  int32_t n_tab = g->n_values;
  er_shape_vals *tab = malloc(((size_t)n_tab + 1) * sizeof *tab);
  in_t = malloc(width * sizeof *in_t);
  out_t = malloc(width * sizeof *out_t);
  inp = malloc(width * sizeof *inp);
  outp = malloc(width * sizeof *outp);
  if (!dead || !tab || !in_t || !out_t || !inp || !outp) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory checking graph '%s'", g->name);
    goto done;
  }
  for (int32_t v = 0; v < n_tab; v++) {
    tab[v].n = -1;
    tab[v].known = 0;
  }
  /* Captured values take what the enclosing graph knows now. */
  if (g->parent) {
    for (int32_t v = 0; v < g->n_values; v++) {
      er_value *val = &g->values[v];
      if (val->kind != ER_VALUE_OUTER) continue;
      const er_value *pv = &g->parent->values[val->outer];
      val->info = pv->info;
      val->info.data = NULL;
      val->info.flags = 0;
      if (pv->kind == ER_VALUE_CONSTANT && value_is_const(g->parent, pv)) val->constant = pv->constant;
    }
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    er_node *node = &g->nodes[i];
    bool all_const = true, shapes_known = true;
    /* Subgraphs first, so the node's check can read their output types. An
     * If whose condition is a load-time constant never runs the other
     * branch, so that branch is not checked against shapes it will never
     * see (ONNX function bodies rely on this). */
    const char *skip_branch = NULL;
    if (node->domain[0] == '\0' && strcmp(node->op_type, "If") == 0 && node->n_inputs > 0 &&
        node->inputs[0] >= 0) {
      const er_value *cv = &g->values[node->inputs[0]];
      const er_tensor *c = (cv->kind == ER_VALUE_CONSTANT && value_is_const(g, cv)) ? cv->constant
                           : (cv->kind == ER_VALUE_OUTER ? cv->constant : NULL);
      if (c && c->data && c->dtype == ER_DTYPE_BOOL && er__tensor_count(c) == 1)
        skip_branch = ((const uint8_t *)c->data)[0] ? "else_branch" : "then_branch";
    }
    if (fold) loop_invariant_inputs(g, node);
    for (int a = 0; a < node->n_attrs; a++) {
      er_attr *at = &node->attrs[a];
      if (skip_branch && strcmp(at->name, skip_branch) == 0) continue;
      if (at->type == ER_ATTR_GRAPH) st = er__graph_infer(at->g, fold);
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n && st == ER_STATUS_OK; j++) st = er__graph_infer(at->graphs[j], fold);
      if (st != ER_STATUS_OK) {
        er__error_prefix("%s node '%s' attribute '%s'", node->op_type, node->name, at->name);
        goto done;
      }
    }
    for (int k = 0; k < node->n_inputs; k++) {
      int32_t id = node->inputs[k];
      if (id < 0) {
        inp[k] = NULL;
        continue;
      }
      er_value *v = &g->values[id];
      in_t[k] = v->info;
      in_t[k].data = NULL;
      in_t[k].flags = 0;
      bool is_const = (v->kind == ER_VALUE_CONSTANT && value_is_const(g, v)) ||
                      (v->kind == ER_VALUE_OUTER && v->constant);
      if (is_const) {
        in_t[k] = *v->constant;
        in_t[k].flags = 0;
      } else {
        all_const = false;
      }
      if (!er__tensor_shape_known(&in_t[k])) shapes_known = false;
      inp[k] = &in_t[k];
    }
    for (int k = 0; k < node->n_outputs; k++) {
      er__tensor_set(&out_t[k], ER_DTYPE_UNDEFINED, -1, NULL);
      outp[k] = node->outputs[k] >= 0 ? &out_t[k] : NULL;
    }
    er_kctx ctx = {node, node->n_inputs, inp, node->n_outputs, outp, true, NULL, g, NULL};
    st = node->op->check(&ctx);
    if (st != ER_STATUS_OK) goto done;
    bool in_tab = g->n_values == n_tab;
    if (in_tab && node->n_outputs > 0 && node->outputs[0] >= 0)
      er__shape_vals_refine(node, (const er_tensor *const *)inp, tab, &out_t[0]);
    for (int k = 0; k < node->n_outputs; k++) {
      if (node->outputs[k] < 0) continue;
      er_value *v = &g->values[node->outputs[k]];
      er_tensor *o = &out_t[k];
      /* Keep a declared shape where inference could not tell. */
      if (v->has_declared_type) {
        if (o->dtype == ER_DTYPE_UNDEFINED) o->dtype = v->info.dtype;
        if (o->rank < 0 && v->info.rank >= 0) {
          o->rank = v->info.rank;
          memcpy(o->dims, v->info.dims, sizeof o->dims);
        } else if (o->rank >= 0 && o->rank == v->info.rank) {
          for (int d = 0; d < o->rank; d++)
            if (o->dims[d] < 0 && v->info.dims[d] >= 0) o->dims[d] = v->info.dims[d];
        } else if (o->rank >= 0 && v->info.rank >= 0) {
          /* The declaration is wrong (ddddocr's OCR model declares its
           * [T, 1, classes] output as [1, seqlen]). As in onnxruntime the
           * computed shape wins; the declared symbolic names described the
           * other rank and go with it, so nothing indexes them past their
           * end. */
          er__log(ER_LOG_WARNING, "%s node '%s': output '%s' is declared with rank %d but computes rank %d; using the computed shape",
                  node->op_type, node->name ? node->name : "", v->name ? v->name : "", v->info.rank, o->rank);
          v->dim_params = NULL;
        }
      }
      er__tensor_set(&v->info, o->dtype, o->rank, o->rank > 0 ? o->dims : NULL);
    }
    if (in_tab && node->n_outputs > 0 && node->outputs[0] >= 0)
      er__shape_vals_propagate(node, (const er_tensor *const *)inp, &g->values[node->outputs[0]].info, tab);
    bool foldable = fold && !(node->op->flags & ER_OP_NO_FOLD) && !er__rw_has_graphs(node) &&
                    !folded_by_qdq_pass(g, node) &&
                    (all_const || (reads_shape_only(node) && shapes_known));
    if (foldable) {
      bool folded;
      for (int k = 0; k < node->n_outputs; k++)
        if (node->outputs[k] >= 0) out_t[k] = g->values[node->outputs[k]].info;
      st = fold_node(g, node, inp, out_t, &folded);
      if (st != ER_STATUS_OK) goto done;
      if (folded) dead[i] = true;
    }
  }
  if (fold) st = compact(g, dead);
done:
  free(dead);
  free(tab);
  free(in_t);
  free(out_t);
  free(inp);
  free(outp);
  return st;
}
