/* onnx-write.c - IR to ONNX ModelProto (protobuf wire format).
 *
 * Each nested message is built in its own growable buffer and then embedded
 * with its length, so no size pass is needed. The main graph is the one
 * large message (it holds the weights); er__onnx_save_model writes it to the
 * file straight from its buffer instead of copying it into the model's.
 * Field numbers follow onnx/onnx.proto. */
#define _GNU_SOURCE
#include "onnx/onnx-write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "onnx/onnx.h"

enum {
  MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_PRODUCER_VERSION = 3, MODEL_DOMAIN = 4,
  MODEL_MODEL_VERSION = 5, MODEL_DOC = 6, MODEL_GRAPH = 7, MODEL_OPSET_IMPORT = 8,
  MODEL_METADATA = 14,

  OPSET_DOMAIN = 1, OPSET_VERSION = 2,
  ENTRY_KEY = 1, ENTRY_VALUE = 2,

  GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
  GRAPH_VALUE_INFO = 13,

  NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5,
  NODE_DOMAIN = 7,

  ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_T = 5, ATTR_G = 6, ATTR_FLOATS = 7,
  ATTR_INTS = 8, ATTR_STRINGS = 9, ATTR_TENSORS = 10, ATTR_GRAPHS = 11, ATTR_TYPE = 20,

  VI_NAME = 1, VI_TYPE = 2,
  TYPE_TENSOR = 1,
  TT_ELEM_TYPE = 1, TT_SHAPE = 2,
  SHAPE_DIM = 1,
  DIM_VALUE = 1, DIM_PARAM = 2,
};

/* ======================================================================== */
/* Small pieces                                                              */
/* ======================================================================== */

static void put_str(er_pbw *w, uint32_t field, const char *s) {
  er__pbw_bytes_field(w, field, s, strlen(s));
}

static void put_fixed32(er_pbw *w, uint32_t field, float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint8_t b[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), (uint8_t)(bits >> 24)};
  er__pbw_tag(w, field, ER_PB_FIXED32);
  er__pbw_raw(w, b, 4);
}

/* Appends child as a length-delimited field and frees it. */
static void embed(er_pbw *w, uint32_t field, er_pbw *child) {
  if (child->failed) w->failed = true;
  er__pbw_bytes_field(w, field, child->buf, child->len);
  er__pbw_free(child);
}

static er_status oom(const er_pbw *w) {
  return w->failed ? er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory writing a model")
                   : ER_STATUS_OK;
}

/* TypeProto of a tensor value: element type and, when the rank is known,
 * the shape (known dims as dim_value, named unknown dims as dim_param,
 * others as an empty dimension). */
static void put_type(er_pbw *w, const er_tensor *info, const char *const *dim_params) {
  er_pbw tt = {0}, shape = {0};
  if (info->dtype != ER_DTYPE_UNDEFINED) er__pbw_varint_field(&tt, TT_ELEM_TYPE, (uint64_t)info->dtype);
  if (info->rank >= 0) {
    for (int d = 0; d < info->rank; d++) {
      er_pbw dim = {0};
      if (info->dims[d] >= 0) er__pbw_varint_field(&dim, DIM_VALUE, (uint64_t)info->dims[d]);
      else if (dim_params && dim_params[d]) put_str(&dim, DIM_PARAM, dim_params[d]);
      embed(&shape, SHAPE_DIM, &dim);
    }
    embed(&tt, TT_SHAPE, &shape);
  }
  er_pbw type = {0};
  embed(&type, TYPE_TENSOR, &tt);
  embed(w, VI_TYPE, &type);
}

static void put_value_info(er_pbw *w, uint32_t field, const er_value *v) {
  er_pbw vi = {0};
  put_str(&vi, VI_NAME, v->name);
  const er_tensor *info = v->kind == ER_VALUE_CONSTANT && v->constant ? v->constant : &v->info;
  /* A value whose type nothing told us gets no TypeProto rather than a
   * wrong one. */
  if (info->dtype != ER_DTYPE_UNDEFINED) put_type(&vi, info, info == &v->info ? er__value_dim_params(v) : NULL);
  embed(w, field, &vi);
}

/* ======================================================================== */
/* Graphs                                                                    */
/* ======================================================================== */

static er_status put_graph(er_pbw *w, const er_graph *g);

static er_status put_tensor(er_pbw *w, uint32_t field, const er_tensor *t, const char *name) {
  er_pbw tp = {0};
  er_status st = er__onnx_write_tensor(&tp, t, name);
  if (st != ER_STATUS_OK) {
    er__pbw_free(&tp);
    return st;
  }
  embed(w, field, &tp);
  return oom(w);
}

static er_status put_attr(er_pbw *w, const er_node *node, const er_attr *a) {
  er_pbw ap = {0}, packed = {0};
  er_status st = ER_STATUS_OK;
  put_str(&ap, ATTR_NAME, a->name);
  if (a->type != ER_ATTR_UNDEFINED) er__pbw_varint_field(&ap, ATTR_TYPE, (uint64_t)a->type);
  switch (a->type) {
    case ER_ATTR_UNDEFINED: break;
    case ER_ATTR_FLOAT: put_fixed32(&ap, ATTR_F, a->f); break;
    case ER_ATTR_INT: er__pbw_varint_field(&ap, ATTR_I, (uint64_t)a->i); break;
    case ER_ATTR_STRING: er__pbw_bytes_field(&ap, ATTR_S, a->s, a->s_len); break;
    case ER_ATTR_TENSOR:
    case ER_ATTR_SPARSE_TENSOR: st = put_tensor(&ap, ATTR_T, a->t, NULL); break;
    case ER_ATTR_GRAPH: {
      er_pbw gp = {0};
      st = put_graph(&gp, a->g);
      if (st == ER_STATUS_OK) embed(&ap, ATTR_G, &gp);
      else er__pbw_free(&gp);
      break;
    }
    case ER_ATTR_FLOATS:
      for (int64_t i = 0; i < a->n; i++) {
        uint32_t bits;
        memcpy(&bits, &a->floats[i], 4);
        uint8_t b[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), (uint8_t)(bits >> 24)};
        er__pbw_raw(&packed, b, 4);
      }
      embed(&ap, ATTR_FLOATS, &packed);
      break;
    case ER_ATTR_INTS:
      for (int64_t i = 0; i < a->n; i++) er__pbw_varint(&packed, (uint64_t)a->ints[i]);
      embed(&ap, ATTR_INTS, &packed);
      break;
    case ER_ATTR_STRINGS:
      for (int64_t i = 0; i < a->n; i++) put_str(&ap, ATTR_STRINGS, a->strings[i]);
      break;
    case ER_ATTR_TENSORS:
      for (int64_t i = 0; i < a->n && st == ER_STATUS_OK; i++)
        st = put_tensor(&ap, ATTR_TENSORS, a->tensors[i], NULL);
      break;
    case ER_ATTR_GRAPHS:
      for (int64_t i = 0; i < a->n && st == ER_STATUS_OK; i++) {
        er_pbw gp = {0};
        st = put_graph(&gp, a->graphs[i]);
        if (st == ER_STATUS_OK) embed(&ap, ATTR_GRAPHS, &gp);
        else er__pbw_free(&gp);
      }
      break;
    case ER_ATTR_SPARSE_TENSORS:
    case ER_ATTR_TYPE_PROTO:
    case ER_ATTR_TYPE_PROTOS:
      st = er__error(ER_STATUS_UNSUPPORTED,
                     "%s node '%s': attribute '%s' of type %d cannot be written (edgerun does not "
                     "keep TypeProto or sparse-tensor-list attributes)",
                     node->op_type, node->name, a->name, (int)a->type);
      break;
  }
  if (st != ER_STATUS_OK) {
    er__pbw_free(&ap);
    er__pbw_free(&packed);
    return st;
  }
  embed(w, NODE_ATTRIBUTE, &ap);
  return oom(w);
}

static const char *value_name(const er_graph *g, int32_t id) {
  return id >= 0 ? g->values[id].name : "";
}

static er_status put_node(er_pbw *w, const er_graph *g, const er_node *node) {
  er_pbw np = {0};
  for (int k = 0; k < node->n_inputs; k++) put_str(&np, NODE_INPUT, value_name(g, node->inputs[k]));
  for (int k = 0; k < node->n_outputs; k++) put_str(&np, NODE_OUTPUT, value_name(g, node->outputs[k]));
  if (node->name && node->name[0]) put_str(&np, NODE_NAME, node->name);
  put_str(&np, NODE_OP_TYPE, node->op_type);
  if (node->domain && node->domain[0]) put_str(&np, NODE_DOMAIN, node->domain);
  for (int a = 0; a < node->n_attrs; a++) {
    er_status st = put_attr(&np, node, &node->attrs[a]);
    if (st != ER_STATUS_OK) {
      er__pbw_free(&np);
      return st;
    }
  }
  embed(w, GRAPH_NODE, &np);
  return oom(w);
}

static er_status mark_one(void *used, int32_t v) {
  ((bool *)used)[v] = true;
  return ER_STATUS_OK;
}

/* Marks the values of `g` that something reads: node inputs, graph inputs
 * and outputs, and values captured by the nodes' subgraphs (the immediate
 * subgraph holds an OUTER value for every name captured through it). */
static void mark_used(const er_graph *g, bool *used) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) used[n->inputs[k]] = true;
    (void)er__node_captures(g, n, mark_one, used);
  }
  for (int32_t i = 0; i < g->n_inputs; i++) used[g->inputs[i]] = true;
  for (int32_t i = 0; i < g->n_outputs; i++) used[g->outputs[i]] = true;
}

static er_status put_graph(er_pbw *w, const er_graph *g) {
  er_status st = ER_STATUS_OK;
  bool *used = calloc((size_t)g->n_values + 1, 1);
  if (!used) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory writing graph '%s'", g->name);
  mark_used(g, used);
  if (g->name && g->name[0]) put_str(w, GRAPH_NAME, g->name);
  for (int32_t i = 0; i < g->n_nodes && st == ER_STATUS_OK; i++) st = put_node(w, g, &g->nodes[i]);
  for (int32_t v = 0; v < g->n_values && st == ER_STATUS_OK; v++) {
    const er_value *val = &g->values[v];
    if (val->kind != ER_VALUE_CONSTANT || !val->constant || !used[v]) continue;
    if (!val->constant->data && val->constant->nbytes)
      st = er__error(ER_STATUS_INTERNAL, "initializer '%s' has no data", val->name);
    else
      st = put_tensor(w, GRAPH_INITIALIZER, val->constant, val->name);
  }
  for (int32_t i = 0; i < g->n_inputs && st == ER_STATUS_OK; i++)
    put_value_info(w, GRAPH_INPUT, &g->values[g->inputs[i]]);
  for (int32_t i = 0; i < g->n_outputs && st == ER_STATUS_OK; i++)
    put_value_info(w, GRAPH_OUTPUT, &g->values[g->outputs[i]]);
  /* value_info: what the model declared for its intermediate values (kept
   * as refined by inference), never guesses of our own. */
  for (int32_t v = 0; v < g->n_values && st == ER_STATUS_OK; v++) {
    const er_value *val = &g->values[v];
    if (val->kind == ER_VALUE_INTERMEDIATE && val->producer >= 0 && val->has_declared_type &&
        !val->is_graph_output && val->info.dtype != ER_DTYPE_UNDEFINED)
      put_value_info(w, GRAPH_VALUE_INFO, val);
  }
  free(used);
  if (st == ER_STATUS_OK) st = oom(w);
  return st;
}

/* ======================================================================== */
/* Models                                                                    */
/* ======================================================================== */

/* Everything of the ModelProto except the graph's bytes, which end `head`
 * as the GraphProto field's tag and length; the caller appends them. */
static er_status put_model_head(const struct er_model *m, const er_pbw *graph, er_pbw *head) {
  er__pbw_varint_field(head, MODEL_IR_VERSION, (uint64_t)m->ir_version);
  if (m->producer_name && m->producer_name[0]) put_str(head, MODEL_PRODUCER_NAME, m->producer_name);
  if (m->producer_version && m->producer_version[0])
    put_str(head, MODEL_PRODUCER_VERSION, m->producer_version);
  if (m->domain && m->domain[0]) put_str(head, MODEL_DOMAIN, m->domain);
  if (m->model_version) er__pbw_varint_field(head, MODEL_MODEL_VERSION, (uint64_t)m->model_version);
  if (m->doc && m->doc[0]) put_str(head, MODEL_DOC, m->doc);
  for (int i = 0; i < m->n_opsets; i++) {
    er_pbw op = {0};
    if (m->opsets[i].domain[0]) put_str(&op, OPSET_DOMAIN, m->opsets[i].domain);
    er__pbw_varint_field(&op, OPSET_VERSION, (uint64_t)m->opsets[i].version);
    embed(head, MODEL_OPSET_IMPORT, &op);
  }
  for (int i = 0; i < m->n_meta; i++) {
    er_pbw e = {0};
    put_str(&e, ENTRY_KEY, m->meta[i].key);
    put_str(&e, ENTRY_VALUE, m->meta[i].value);
    embed(head, MODEL_METADATA, &e);
  }
  er__pbw_tag(head, MODEL_GRAPH, ER_PB_LEN);
  er__pbw_varint(head, graph->len);
  return oom(head);
}

static er_status build(const struct er_model *m, er_pbw *head, er_pbw *graph) {
  if (!m || !m->graph) return er__error(ER_STATUS_INVALID_ARGUMENT, "no model to write");
  er_status st = put_graph(graph, m->graph);
  if (st == ER_STATUS_OK) st = put_model_head(m, graph, head);
  return st;
}

er_status er__onnx_write_model(const struct er_model *m, er_pbw *w) {
  er_pbw head = {0}, graph = {0};
  er_status st = build(m, &head, &graph);
  if (st == ER_STATUS_OK) {
    er__pbw_raw(w, head.buf, head.len);
    er__pbw_raw(w, graph.buf, graph.len);
    st = oom(w);
  }
  er__pbw_free(&head);
  er__pbw_free(&graph);
  return st;
}

static er_status write_parts(const char *path, const void *const *parts, const size_t *lens, int n) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 32);
  if (!tmp) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    er_status st = er__error(ER_STATUS_IO, "cannot create '%s': %s", tmp, strerror(errno));
    free(tmp);
    return st;
  }
  er_status st = ER_STATUS_OK;
  for (int i = 0; i < n && st == ER_STATUS_OK; i++) {
    size_t done = 0;
    while (done < lens[i]) {
      ssize_t k = write(fd, (const char *)parts[i] + done, lens[i] - done);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        st = er__error(ER_STATUS_IO, "writing '%s' failed: %s", path, k < 0 ? strerror(errno) : "no progress");
        break;
      }
      done += (size_t)k;
    }
  }
  if (st == ER_STATUS_OK && fsync(fd) != 0)
    st = er__error(ER_STATUS_IO, "writing '%s' failed: %s", path, strerror(errno));
  if (close(fd) != 0 && st == ER_STATUS_OK)
    st = er__error(ER_STATUS_IO, "writing '%s' failed: %s", path, strerror(errno));
  if (st == ER_STATUS_OK && rename(tmp, path) != 0)
    st = er__error(ER_STATUS_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
  if (st != ER_STATUS_OK) unlink(tmp);
  free(tmp);
  return st;
}

er_status er__write_file_atomic(const char *path, const void *data, size_t size) {
  const void *parts[1] = {data};
  size_t lens[1] = {size};
  return write_parts(path, parts, lens, 1);
}

er_status er__onnx_save_model(const struct er_model *m, const char *path) {
  er_pbw head = {0}, graph = {0};
  er_status st = build(m, &head, &graph);
  if (st == ER_STATUS_OK) {
    const void *parts[2] = {head.buf, graph.buf};
    size_t lens[2] = {head.len, graph.len};
    st = write_parts(path, parts, lens, 2);
  }
  er__pbw_free(&head);
  er__pbw_free(&graph);
  return st;
}
