/* onnx-load.c - ONNX ModelProto (protobuf wire format) to IR.
 *
 * Every count, length and dim is checked against a named limit and against
 * the bytes that remain before anything is allocated for it. Tensor data is
 * used in place (zero-copy) when it is suitably aligned in the mapped file,
 * else copied once. Field numbers follow onnx/onnx.proto. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "onnx/onnx.h"
#include "onnx/onnx-load-impl.h"

/* ======================================================================== */
/* Field numbers from onnx.proto                                             */
/* ======================================================================== */

/* The newest IR version whose format this reader understands. IR 14 (onnx
 * 1.23, the version its helper writes by default) adds the FLOAT6 types
 * and TypeProto.Opaque outside ONNX-ML: tensors of those types are refused
 * by name like any type edgerun does not hold. */
#define ER_MAX_IR_VERSION 14
#define ER_MIN_IR_VERSION 3

/* ======================================================================== */
/* Parse context                                                             */
/* ======================================================================== */

er_status er__ox_copy_string(parse_ctx *pc, const er_pb_field *f, const char *what,
                             const char **out) {
  if (f->wire != ER_PB_LEN)
    return er__error(ER_STATUS_MALFORMED, "%s: expected a length-delimited string", what);
  if (f->len > ER_MAX_NAME_BYTES)
    return er__error(ER_STATUS_LIMIT, "%s is %zu bytes, more than %d (ER_MAX_NAME_BYTES)", what,
                     f->len, ER_MAX_NAME_BYTES);
  char *s = er__arena_strndup(pc->arena, (const char *)f->data, f->len);
  if (!s) return ER_STATUS_OUT_OF_MEMORY;
  *out = s;
  return ER_STATUS_OK;
}

/* Reads every occurrence of one repeated scalar field of message [p, end)
 * into a new arena array. */
er_status er__ox_read_repeated(parse_ctx *pc, const uint8_t *p, const uint8_t *end,
                               uint32_t number, er_pb_scalar kind, uint64_t cap,
                               const char *what, uint64_t **vals_out, uint64_t *n_out) {
  er_pb pb = {p, end};
  er_pb_field f;
  bool done;
  uint64_t count = 0;
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != number) continue;
    uint64_t c;
    ER_CHECK(er__pb_scalar_count(&f, kind, &c));
    if (!er__add_u64(count, c, &count) || count > cap)
      return er__error(ER_STATUS_LIMIT, "%s holds more than %llu elements", what,
                       (unsigned long long)cap);
  }
  *n_out = count;
  *vals_out = NULL;
  if (count == 0) return ER_STATUS_OK;
  uint64_t *vals = er__arena_array(pc->arena, (size_t)count, sizeof *vals);
  if (!vals) return ER_STATUS_OUT_OF_MEMORY;
  uint64_t n = 0;
  pb = (er_pb){p, end};
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != number) continue;
    ER_CHECK(er__pb_scalar_read(&f, kind, vals, count, &n));
  }
  *vals_out = vals;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Types (ValueInfoProto)                                                    */
/* ======================================================================== */

static er_status parse_shape(parse_ctx *pc, const er_pb_field *sf, er_value *v) {
  er_pb pb = er__pb_init(sf->data, sf->len);
  er_pb_field f;
  bool done;
  int rank = 0;
  int64_t dims[ER_MAX_RANK];
  const char *params[ER_MAX_RANK] = {0};
  bool any_param = false;
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != SHAPE_DIM) continue;
    ER_CHECK(expect_wire(&f, ER_PB_LEN, "TensorShapeProto.dim"));
    if (rank >= ER_MAX_RANK)
      return er__error(ER_STATUS_LIMIT, "value '%s' has more than %d dims (ER_MAX_RANK)",
                       v->name, ER_MAX_RANK);
    er_pb db = er__pb_init(f.data, f.len);
    er_pb_field d;
    int64_t val = -1;
    const char *param = NULL;
    for (;;) {
      ER_CHECK(er__pb_next(&db, &d, &done));
      if (done) break;
      if (d.number == DIM_VALUE && d.wire == ER_PB_VARINT) {
        val = (int64_t)d.value;
        /* Some exporters (paddle2onnx) write -1 for a dynamic dim; treat it
         * as unknown, as onnxruntime does. Other negatives are errors. */
        if (val < -1)
          return er__error(ER_STATUS_INVALID_SHAPE,
                           "value '%s': dim %d is %lld; declared dims must be >= 0 (or -1 for "
                           "unknown)",
                           v->name, rank, (long long)val);
      } else if (d.number == DIM_PARAM && d.wire == ER_PB_LEN) {
        ER_CHECK(er__ox_copy_string(pc, &d, "dim_param", &param));
      }
    }
    dims[rank] = val;
    params[rank] = val < 0 ? param : NULL;
    if (params[rank]) any_param = true;
    rank++;
  }
  er__tensor_set(&v->info, v->info.dtype, rank, dims);
  if (any_param) {
    v->dim_params = er__arena_array(pc->arena, (size_t)rank, sizeof(char *));
    if (!v->dim_params) return ER_STATUS_OUT_OF_MEMORY;
    for (int i = 0; i < rank; i++) v->dim_params[i] = params[i];
    v->dim_params_rank = rank;
  }
  return ER_STATUS_OK;
}

/* Applies a TypeProto to value `v`. Non-tensor types leave dtype UNDEFINED;
 * the caller decides whether that is acceptable. */
static er_status parse_type(parse_ctx *pc, const er_pb_field *tfield, er_value *v,
                            bool *is_tensor_out) {
  er_pb pb = er__pb_init(tfield->data, tfield->len);
  er_pb_field f;
  bool done;
  *is_tensor_out = false;
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != TYPE_TENSOR || f.wire != ER_PB_LEN) continue;
    *is_tensor_out = true;
    er_pb tb = er__pb_init(f.data, f.len);
    er_pb_field g;
    bool has_shape = false;
    er_dtype dt = ER_DTYPE_UNDEFINED;
    er_pb_field shape_field = {0};
    for (;;) {
      ER_CHECK(er__pb_next(&tb, &g, &done));
      if (done) break;
      if (g.number == TT_ELEM_TYPE && g.wire == ER_PB_VARINT) {
        int64_t e = (int64_t)(int32_t)g.value;
        if (e != 0 && !dtype_known(e))
          return er__error(ER_STATUS_UNSUPPORTED, "value '%s': element type %lld is unknown",
                           v->name, (long long)e);
        dt = (er_dtype)e;
      } else if (g.number == TT_SHAPE && g.wire == ER_PB_LEN) {
        has_shape = true;
        shape_field = g;
      }
    }
    v->info.dtype = dt;
    if (has_shape) {
      ER_CHECK(parse_shape(pc, &shape_field, v));
    } else {
      er__tensor_set(&v->info, dt, -1, NULL);
    }
    v->has_declared_type = true;
  }
  return ER_STATUS_OK;
}

typedef struct vi_fields {
  const char *name;
  er_pb_field type;
  bool has_type;
} vi_fields;

static er_status parse_value_info(parse_ctx *pc, const er_pb_field *f, vi_fields *vi) {
  er_pb pb = er__pb_init(f->data, f->len);
  er_pb_field g;
  bool done;
  memset(vi, 0, sizeof *vi);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &g, &done));
    if (done) break;
    if (g.number == VI_NAME) ER_CHECK(er__ox_copy_string(pc, &g, "value name", &vi->name));
    if (g.number == VI_TYPE && g.wire == ER_PB_LEN) {
      vi->type = g;
      vi->has_type = true;
    }
  }
  if (!vi->name) vi->name = "";
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Graphs, nodes, attributes                                                 */
/* ======================================================================== */

static er_status parse_graph(parse_ctx *pc, const uint8_t *p, size_t len, er_graph *parent,
                             int depth, er_graph **out);

/* The n elements of a list attribute (strings, tensors or graphs), read
 * in a second pass over the AttributeProto. */
static er_status parse_attr_list(parse_ctx *pc, er_graph *g, const er_pb_field *af, er_attr *a, uint64_t n,
                                 int depth) {
  er_pb pb;
  er_pb_field f;
  bool done;
  uint32_t want = a->type == ER_ATTR_STRINGS ? ATTR_STRINGS : a->type == ER_ATTR_TENSORS ? ATTR_TENSORS : ATTR_GRAPHS;
  a->n = (int64_t)n;
  void *arr = er__arena_array(pc->arena, (size_t)n + 1, sizeof(void *));
  if (!arr) return ER_STATUS_OUT_OF_MEMORY;
  if (a->type == ER_ATTR_STRINGS) a->strings = arr;
  if (a->type == ER_ATTR_TENSORS) a->tensors = arr;
  if (a->type == ER_ATTR_GRAPHS) a->graphs = arr;
  uint64_t k = 0;
  pb = er__pb_init(af->data, af->len);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != want) continue;
    ER_CHECK(expect_wire(&f, ER_PB_LEN, "attribute list element"));
    if (a->type == ER_ATTR_STRINGS) {
      a->strings[k] = er__arena_strndup(pc->arena, (const char *)f.data, f.len);
      if (!a->strings[k]) return ER_STATUS_OUT_OF_MEMORY;
    } else if (a->type == ER_ATTR_TENSORS) {
      ER_CHECK(er__ox_tensor_attr(pc, &f, &a->tensors[k]));
    } else {
      ER_CHECK(parse_graph(pc, f.data, f.len, g, depth + 1, &a->graphs[k]));
    }
    k++;
  }
  return ER_STATUS_OK;
}

static er_status parse_attribute(parse_ctx *pc, er_graph *g, const er_pb_field *af,
                                 er_attr *a, int depth) {
  er_pb pb = er__pb_init(af->data, af->len);
  er_pb_field f;
  bool done;
  int64_t declared = -1;
  uint64_t n_strings = 0, n_tensors = 0, n_graphs = 0;
  bool has_f = false, has_i = false, has_s = false, has_t = false, has_g = false;
  bool has_floats = false, has_ints = false, has_sparse = false, has_tp = false;
  memset(a, 0, sizeof *a);

  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    switch (f.number) {
      case ATTR_NAME: ER_CHECK(er__ox_copy_string(pc, &f, "attribute name", &a->name)); break;
      case ATTR_TYPE: declared = (int64_t)f.value; break;
      case ATTR_F:
        ER_CHECK(expect_wire(&f, ER_PB_FIXED32, "AttributeProto.f"));
        { uint32_t w = (uint32_t)f.value; memcpy(&a->f, &w, 4); }
        has_f = true;
        break;
      case ATTR_I: ER_CHECK(expect_wire(&f, ER_PB_VARINT, "AttributeProto.i")); a->i = (int64_t)f.value; has_i = true; break;
      case ATTR_S:
        ER_CHECK(expect_wire(&f, ER_PB_LEN, "AttributeProto.s"));
        if (f.len > (size_t)ER_DEFAULT_MAX_TENSOR_BYTES)
          return er__error(ER_STATUS_LIMIT, "string attribute is %zu bytes", f.len);
        a->s = er__arena_strndup(pc->arena, (const char *)f.data, f.len);
        if (!a->s) return ER_STATUS_OUT_OF_MEMORY;
        a->s_len = f.len;
        has_s = true;
        break;
      case ATTR_T: ER_CHECK(er__ox_tensor_attr(pc, &f, &a->t)); has_t = true; break;
      case ATTR_SPARSE_TENSOR: {
        ER_CHECK(expect_wire(&f, ER_PB_LEN, "AttributeProto.sparse_tensor"));
        er_tensor *t = er__arena_alloc(pc->arena, sizeof *t);
        if (!t) return ER_STATUS_OUT_OF_MEMORY;
        ER_CHECK(er__ox_sparse_to_dense(pc, f.data, f.len, t, NULL));
        ER_CHECK(adopt_tensor(pc, t));
        a->t = t;
        has_sparse = true;
        break;
      }
      case ATTR_G:
        ER_CHECK(expect_wire(&f, ER_PB_LEN, "AttributeProto.g"));
        ER_CHECK(parse_graph(pc, f.data, f.len, g, depth + 1, &a->g));
        has_g = true;
        break;
      case ATTR_FLOATS: has_floats = true; break;
      case ATTR_INTS: has_ints = true; break;
      case ATTR_STRINGS: n_strings++; break;
      case ATTR_TENSORS: n_tensors++; break;
      case ATTR_GRAPHS: n_graphs++; break;
      case ATTR_TP: has_tp = true; break;
      case ATTR_TYPE_PROTOS: has_tp = true; break;
      case ATTR_REF_ATTR_NAME:
        return er__error(ER_STATUS_UNSUPPORTED,
                         "attribute references a function attribute (ref_attr_name); "
                         "functions are not supported here");
      default: break;
    }
  }
  if (!a->name || !a->name[0])
    return er__error(ER_STATUS_INVALID_ATTRIBUTE, "attribute without a name");

  /* Old models omit the type field; infer it from which field is set. */
  if (declared < 0 || declared == 0) {
    declared = has_f ? ER_ATTR_FLOAT : has_i ? ER_ATTR_INT : has_s ? ER_ATTR_STRING
             : has_t ? ER_ATTR_TENSOR : has_g ? ER_ATTR_GRAPH : has_floats ? ER_ATTR_FLOATS
             : has_ints ? ER_ATTR_INTS : n_strings ? ER_ATTR_STRINGS : n_tensors ? ER_ATTR_TENSORS
             : n_graphs ? ER_ATTR_GRAPHS : has_sparse ? ER_ATTR_SPARSE_TENSOR
             : has_tp ? ER_ATTR_TYPE_PROTO : ER_ATTR_UNDEFINED;
  }
  if (declared < 0 || declared > ER_ATTR_TYPE_PROTOS)
    return er__error(ER_STATUS_INVALID_ATTRIBUTE, "attribute '%s' has unknown type %lld",
                     a->name, (long long)declared);
  a->type = (er_attr_type)declared;
  if (a->type == ER_ATTR_SPARSE_TENSOR) a->type = ER_ATTR_TENSOR;
  /* A declared type whose value field is absent: a string's absent value
   * is protobuf's default, ""; a tensor or a graph has none to take. */
  if (a->type == ER_ATTR_STRING && !has_s) {
    a->s = "";
    a->s_len = 0;
  }
  if ((a->type == ER_ATTR_TENSOR && !a->t) || (a->type == ER_ATTR_GRAPH && !a->g))
    return er__error(ER_STATUS_INVALID_ATTRIBUTE, "attribute '%s' is declared a %s but holds none", a->name,
                     a->type == ER_ATTR_TENSOR ? "tensor" : "graph");

  switch (a->type) {
    case ER_ATTR_FLOATS: {
      uint64_t *vals, n;
      ER_CHECK(er__ox_read_repeated(pc, af->data, af->data + af->len, ATTR_FLOATS, ER_PB_S_FIXED32,
                             ER_MAX_ATTR_ELEMENTS, "attribute floats", &vals, &n));
      a->n = (int64_t)n;
      a->floats = er__arena_array(pc->arena, (size_t)n + 1, sizeof(float));
      if (!a->floats) return ER_STATUS_OUT_OF_MEMORY;
      for (uint64_t i = 0; i < n; i++) {
        uint32_t w = (uint32_t)vals[i];
        memcpy(&a->floats[i], &w, 4);
      }
      break;
    }
    case ER_ATTR_INTS: {
      uint64_t *vals, n;
      ER_CHECK(er__ox_read_repeated(pc, af->data, af->data + af->len, ATTR_INTS, ER_PB_S_VARINT,
                             ER_MAX_ATTR_ELEMENTS, "attribute ints", &vals, &n));
      a->n = (int64_t)n;
      a->ints = er__arena_array(pc->arena, (size_t)n + 1, sizeof(int64_t));
      if (!a->ints) return ER_STATUS_OUT_OF_MEMORY;
      for (uint64_t i = 0; i < n; i++) a->ints[i] = (int64_t)vals[i];
      break;
    }
    case ER_ATTR_STRINGS:
    case ER_ATTR_TENSORS:
    case ER_ATTR_GRAPHS:
      ER_CHECK(parse_attr_list(pc, g, af, a, a->type == ER_ATTR_STRINGS   ? n_strings
                                             : a->type == ER_ATTR_TENSORS ? n_tensors
                                                                          : n_graphs,
                               depth));
      break;
    case ER_ATTR_TENSOR:
      if (!a->t)
        return er__error(ER_STATUS_INVALID_ATTRIBUTE, "tensor attribute '%s' holds no tensor",
                         a->name);
      break;
    case ER_ATTR_GRAPH:
      if (!a->g)
        return er__error(ER_STATUS_INVALID_ATTRIBUTE, "graph attribute '%s' holds no graph",
                         a->name);
      break;
    default: break;
  }
  return ER_STATUS_OK;
}

/* Node fields kept between the two passes over a graph's nodes. */
typedef struct node_span {
  const uint8_t *p;
  size_t len;
} node_span;

/* Pass A: name, op, domain, outputs (created as values). */
static er_status parse_node_outputs(parse_ctx *pc, er_graph *g, int32_t index,
                                    const node_span *span) {
  er_node *node = &g->nodes[index];
  er_pb pb = er__pb_init(span->p, span->len);
  er_pb_field f;
  bool done;
  int n_in = 0, n_out = 0;
  node->name = "";
  node->domain = "";
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    switch (f.number) {
      case NODE_INPUT: n_in++; break;
      case NODE_OUTPUT: n_out++; break;
      case NODE_NAME: ER_CHECK(er__ox_copy_string(pc, &f, "node name", &node->name)); break;
      case NODE_OP_TYPE: ER_CHECK(er__ox_copy_string(pc, &f, "op_type", &node->op_type)); break;
      case NODE_DOMAIN: ER_CHECK(er__ox_copy_string(pc, &f, "node domain", &node->domain)); break;
      default: break;
    }
    if (n_in > ER_MAX_NODE_IO || n_out > ER_MAX_NODE_IO)
      return er__error(ER_STATUS_LIMIT, "node '%s' has more than %d inputs or outputs (ER_MAX_NODE_IO)",
                       node->name, ER_MAX_NODE_IO);
  }
  if (!node->op_type || !node->op_type[0])
    return er__error(ER_STATUS_INVALID_GRAPH, "node %d ('%s') has no op_type", (int)index, node->name);
  if (strcmp(node->domain, "ai.onnx") == 0) node->domain = "";
  node->n_inputs = n_in;
  node->n_outputs = n_out;
  node->inputs = er__arena_array(pc->arena, (size_t)n_in + 1, sizeof(int32_t));
  node->outputs = er__arena_array(pc->arena, (size_t)n_out + 1, sizeof(int32_t));
  if (!node->inputs || !node->outputs) return ER_STATUS_OUT_OF_MEMORY;
  int k = 0;
  pb = er__pb_init(span->p, span->len);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != NODE_OUTPUT) continue;
    const char *name = NULL;
    ER_CHECK(er__ox_copy_string(pc, &f, "node output name", &name));
    if (!name[0]) {
      node->outputs[k++] = -1;
      continue;
    }
    int32_t id = er__graph_find(g, name);
    if (id >= 0) {
      er_value *v = &g->values[id];
      if (v->kind != ER_VALUE_INTERMEDIATE || v->producer >= 0)
        return er__error(ER_STATUS_INVALID_GRAPH,
                         "value '%s' is produced more than once (again by %s node '%s')", name,
                         node->op_type, node->name);
    } else {
      ER_CHECK(er__graph_add_value(g, name, &id));
    }
    g->values[id].producer = index;
    node->outputs[k++] = id;
  }
  return ER_STATUS_OK;
}

/* Pass B: inputs (resolved by name) and attributes (subgraphs parsed). */
static er_status parse_node_inputs(parse_ctx *pc, er_graph *g, int32_t index,
                                   const node_span *span, int depth) {
  er_node *node = &g->nodes[index];
  er_pb pb = er__pb_init(span->p, span->len);
  er_pb_field f;
  bool done;
  int k = 0, n_attr = 0;
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number == NODE_ATTRIBUTE) n_attr++;
    if (f.number != NODE_INPUT) continue;
    const char *name = NULL;
    ER_CHECK(er__ox_copy_string(pc, &f, "node input name", &name));
    if (!name[0]) {
      node->inputs[k++] = -1;
      continue;
    }
    int32_t id;
    er_status st = er__graph_resolve(g, name, &id);
    if (st == ER_STATUS_NOT_FOUND)
      return er__error(ER_STATUS_INVALID_GRAPH,
                       "%s node '%s': input '%s' is not defined by any node, input or "
                       "initializer",
                       node->op_type, node->name, name);
    ER_CHECK(st);
    node->inputs[k++] = id;
  }
  node->n_attrs = n_attr;
  node->attrs = er__arena_array(pc->arena, (size_t)n_attr + 1, sizeof(er_attr));
  if (!node->attrs) return ER_STATUS_OUT_OF_MEMORY;
  int a = 0;
  pb = er__pb_init(span->p, span->len);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != NODE_ATTRIBUTE) continue;
    ER_CHECK(expect_wire(&f, ER_PB_LEN, "NodeProto.attribute"));
    er_status st = parse_attribute(pc, g, &f, &node->attrs[a], depth);
    if (st != ER_STATUS_OK) {
      er__error_prefix("%s node '%s'", node->op_type, node->name);
      return st;
    }
    for (int j = 0; j < a; j++)
      if (strcmp(node->attrs[j].name, node->attrs[a].name) == 0)
        return er__error(ER_STATUS_INVALID_ATTRIBUTE, "%s node '%s': attribute '%s' appears twice",
                         node->op_type, node->name, node->attrs[a].name);
    a++;
  }
  return ER_STATUS_OK;
}

static er_status add_constant_value(parse_ctx *pc, er_graph *g, er_tensor *t, const char *name) {
  int32_t id;
  /* The model owns the data from here on, whatever happens next. */
  ER_CHECK(adopt_tensor(pc, t));
  if (!name || !name[0])
    return er__error(ER_STATUS_INVALID_GRAPH, "graph '%s' has an initializer without a name",
                     g->name);
  if (er__graph_find(g, name) >= 0)
    return er__error(ER_STATUS_INVALID_GRAPH, "initializer '%s' is defined twice", name);
  ER_CHECK(er__graph_add_value(g, name, &id));
  er_value *v = &g->values[id];
  v->kind = ER_VALUE_CONSTANT;
  v->constant = t;
  er__tensor_set(&v->info, t->dtype, t->rank, t->dims);
  return ER_STATUS_OK;
}

/* Graph inputs: new INPUT values, or declarations of initializers. */
static er_status parse_graph_inputs(parse_ctx *pc, const uint8_t *p, size_t len, er_graph *g, const char *gname) {
  er_pb pb;
  er_pb_field f;
  bool done;
  pb = er__pb_init(p, len);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != GRAPH_INPUT) continue;
    ER_CHECK(expect_wire(&f, ER_PB_LEN, "GraphProto.input"));
    vi_fields vi;
    ER_CHECK(parse_value_info(pc, &f, &vi));
    if (!vi.name[0]) return er__error(ER_STATUS_INVALID_GRAPH, "graph '%s' has an input without a name", gname);
    int32_t id = er__graph_find(g, vi.name);
    if (id >= 0 && g->values[id].is_graph_input)
      return er__error(ER_STATUS_INVALID_GRAPH, "graph input '%s' is listed twice", vi.name);
    if (id < 0) {
      ER_CHECK(er__graph_add_value(g, vi.name, &id));
      g->values[id].kind = ER_VALUE_INPUT;
      er__tensor_set(&g->values[id].info, ER_DTYPE_UNDEFINED, -1, NULL);
    }
    er_value *v = &g->values[id];
    v->is_graph_input = true;
    if (vi.has_type) {
      bool is_tensor;
      if (v->kind == ER_VALUE_CONSTANT) {
        /* The initializer's own type and shape are authoritative. */
        er_value tmp = *v;
        ER_CHECK(parse_type(pc, &vi.type, &tmp, &is_tensor));
      } else {
        ER_CHECK(parse_type(pc, &vi.type, v, &is_tensor));
        if (!is_tensor)
          return er__error(ER_STATUS_UNSUPPORTED,
                           "graph input '%s' is not a tensor (sequence, map and optional inputs "
                           "are not supported)",
                           vi.name);
      }
    }
    g->inputs[g->n_inputs++] = id;
  }
  return ER_STATUS_OK;
}

static er_status parse_graph(parse_ctx *pc, const uint8_t *p, size_t len, er_graph *parent,
                             int depth, er_graph **out) {
  er_pb pb = er__pb_init(p, len);
  er_pb_field f;
  bool done;
  uint64_t n_nodes = 0, n_inputs = 0, n_outputs = 0;
  const char *gname = "";

  if ((uint32_t)depth >= pc->model->limits.max_nesting)
    return er__error(ER_STATUS_LIMIT, "subgraphs are nested more than %u deep (max_nesting)",
                     pc->model->limits.max_nesting);

  /* Count the repeated fields first so arrays are allocated once. */
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    switch (f.number) {
      case GRAPH_NODE: n_nodes++; break;
      case GRAPH_INPUT: n_inputs++; break;
      case GRAPH_OUTPUT: n_outputs++; break;
      case GRAPH_NAME: ER_CHECK(er__ox_copy_string(pc, &f, "graph name", &gname)); break;
      default: break;
    }
  }
  pc->total_nodes += n_nodes;
  if (pc->total_nodes > pc->model->limits.max_nodes)
    return er__error(ER_STATUS_LIMIT, "model has more than %u nodes (max_nodes)",
                     pc->model->limits.max_nodes);

  er_graph *g = er__graph_new(pc->model, parent, gname);
  if (!g) return ER_STATUS_OUT_OF_MEMORY;
  g->depth = depth;
  g->nodes = er__arena_array(pc->arena, (size_t)n_nodes + 1, sizeof(er_node));
  g->inputs = er__arena_array(pc->arena, (size_t)n_inputs + 1, sizeof(int32_t));
  g->outputs = er__arena_array(pc->arena, (size_t)n_outputs + 1, sizeof(int32_t));
  node_span *spans = er__arena_array(pc->arena, (size_t)n_nodes + 1, sizeof(node_span));
  if (!g->nodes || !g->inputs || !g->outputs || !spans) return ER_STATUS_OUT_OF_MEMORY;

  /* Initializers (dense and sparse) become constant values. */
  pb = er__pb_init(p, len);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != GRAPH_INITIALIZER && f.number != GRAPH_SPARSE_INITIALIZER) continue;
    ER_CHECK(expect_wire(&f, ER_PB_LEN, "GraphProto.initializer"));
    er_tensor *t = er__arena_alloc(pc->arena, sizeof *t);
    const char *name = NULL;
    if (!t) return ER_STATUS_OUT_OF_MEMORY;
    er_status st = f.number == GRAPH_INITIALIZER
                       ? er__onnx_tensor_from_proto(pc, f.data, f.len, t, &name)
                       : er__ox_sparse_to_dense(pc, f.data, f.len, t, &name);
    if (st != ER_STATUS_OK) {
      er__error_prefix("graph '%s' initializer", gname);
      return st;
    }
    if (f.number == GRAPH_INITIALIZER && t->flags & ER_TENSOR_OWNS_DATA) {
      /* add_constant_value adopts it; nothing else to do. */
    }
    ER_CHECK(add_constant_value(pc, g, t, name));
  }

  ER_CHECK(parse_graph_inputs(pc, p, len, g, gname));

  /* Nodes, pass A: outputs become values. */
  pb = er__pb_init(p, len);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != GRAPH_NODE) continue;
    ER_CHECK(expect_wire(&f, ER_PB_LEN, "GraphProto.node"));
    int32_t idx = g->n_nodes++;
    spans[idx] = (node_span){f.data, f.len};
    ER_CHECK(parse_node_outputs(pc, g, idx, &spans[idx]));
  }
  /* Pass B: inputs by name, attributes and subgraphs. */
  for (int32_t i = 0; i < g->n_nodes; i++) ER_CHECK(parse_node_inputs(pc, g, i, &spans[i], depth));

  /* Outputs and value_info. */
  pb = er__pb_init(p, len);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number != GRAPH_OUTPUT && f.number != GRAPH_VALUE_INFO) continue;
    ER_CHECK(expect_wire(&f, ER_PB_LEN, "GraphProto.output"));
    vi_fields vi;
    ER_CHECK(parse_value_info(pc, &f, &vi));
    int32_t id;
    if (f.number == GRAPH_OUTPUT) {
      if (!vi.name[0]) return er__error(ER_STATUS_INVALID_GRAPH, "graph '%s' has an output without a name", gname);
      er_status st = er__graph_resolve(g, vi.name, &id);
      if (st == ER_STATUS_NOT_FOUND)
        return er__error(ER_STATUS_INVALID_GRAPH, "graph output '%s' is not produced by any node",
                         vi.name);
      ER_CHECK(st);
      g->outputs[g->n_outputs++] = id;
      g->values[id].is_graph_output = true;
    } else {
      id = er__graph_find(g, vi.name);
      if (id < 0) continue;  /* value_info for a value nobody makes: ignore */
    }
    er_value *v = &g->values[id];
    if (vi.has_type && v->kind == ER_VALUE_INTERMEDIATE) {
      bool is_tensor;
      er_value tmp = *v;
      ER_CHECK(parse_type(pc, &vi.type, &tmp, &is_tensor));
      if (is_tensor) *v = tmp;
    } else if (vi.has_type && v->kind == ER_VALUE_OUTER && f.number == GRAPH_OUTPUT) {
      bool is_tensor;
      er_value tmp = *v;
      ER_CHECK(parse_type(pc, &vi.type, &tmp, &is_tensor));
    }
  }
  *out = g;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Model                                                                     */
/* ======================================================================== */

static er_status parse_opset(parse_ctx *pc, const er_pb_field *f, er_opset *o) {
  er_pb pb = er__pb_init(f->data, f->len);
  er_pb_field g;
  bool done;
  o->domain = "";
  o->version = 0;
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &g, &done));
    if (done) break;
    if (g.number == OPSET_DOMAIN) ER_CHECK(er__ox_copy_string(pc, &g, "opset domain", &o->domain));
    if (g.number == OPSET_VERSION && g.wire == ER_PB_VARINT) o->version = (int64_t)g.value;
  }
  if (strcmp(o->domain, "ai.onnx") == 0) o->domain = "";
  return ER_STATUS_OK;
}

static er_status parse_entry(parse_ctx *pc, const er_pb_field *f, er_meta *m) {
  er_pb pb = er__pb_init(f->data, f->len);
  er_pb_field g;
  bool done;
  m->key = "";
  m->value = "";
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &g, &done));
    if (done) break;
    if (g.number == ENTRY_KEY) ER_CHECK(er__ox_copy_string(pc, &g, "metadata key", &m->key));
    if (g.number == ENTRY_VALUE) {
      /* Values carry real payloads (OCR models keep their character
       * dictionary here), so they get their own, larger cap. */
      ER_CHECK(expect_wire(&g, ER_PB_LEN, "metadata value"));
      if (g.len > ER_MAX_META_BYTES)
        return er__error(ER_STATUS_LIMIT, "metadata value is %zu bytes, more than %d (ER_MAX_META_BYTES)",
                         g.len, ER_MAX_META_BYTES);
      m->value = er__arena_strndup(pc->arena, (const char *)g.data, g.len);
      if (!m->value) return ER_STATUS_OUT_OF_MEMORY;
    }
  }
  return ER_STATUS_OK;
}

er_status er__onnx_parse_model(struct er_model *model) {
  parse_ctx pc = {model, &model->arena, 0};
  const uint8_t *p = model->map;
  size_t len = model->map_size;
  er_pb pb = er__pb_init(p, len);
  er_pb_field f;
  bool done;
  er_pb_field graph_field = {0};
  bool has_graph = false, has_ir = false;
  int n_opsets = 0, n_meta = 0;

  if (len == 0) return er__error(ER_STATUS_TRUNCATED, "model is empty (0 bytes)");

  /* Pass 1: scalars, counts, and the position of the graph. */
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    switch (f.number) {
      case MODEL_IR_VERSION:
        ER_CHECK(expect_wire(&f, ER_PB_VARINT, "ModelProto.ir_version"));
        model->ir_version = (int64_t)f.value;
        has_ir = true;
        break;
      case MODEL_PRODUCER_NAME: ER_CHECK(er__ox_copy_string(&pc, &f, "producer_name", &model->producer_name)); break;
      case MODEL_PRODUCER_VERSION: ER_CHECK(er__ox_copy_string(&pc, &f, "producer_version", &model->producer_version)); break;
      case MODEL_DOMAIN: ER_CHECK(er__ox_copy_string(&pc, &f, "domain", &model->domain)); break;
      case MODEL_MODEL_VERSION: model->model_version = (int64_t)f.value; break;
      case MODEL_GRAPH:
        ER_CHECK(expect_wire(&f, ER_PB_LEN, "ModelProto.graph"));
        graph_field = f;
        has_graph = true;
        break;
      case MODEL_OPSET_IMPORT:
        ER_CHECK(expect_wire(&f, ER_PB_LEN, "ModelProto.opset_import"));
        if (++n_opsets > ER_MAX_OPSET_IMPORTS)
          return er__error(ER_STATUS_LIMIT, "model imports more than %d opsets (ER_MAX_OPSET_IMPORTS)",
                           ER_MAX_OPSET_IMPORTS);
        break;
      case MODEL_METADATA:
        ER_CHECK(expect_wire(&f, ER_PB_LEN, "ModelProto.metadata_props"));
        if (++n_meta > 100000) return er__error(ER_STATUS_LIMIT, "model has more than 100000 metadata entries");
        break;
      default: break;
    }
  }
  if (!has_ir)
    return er__error(ER_STATUS_INVALID_MODEL, "model has no ir_version (is this an ONNX model?)");
  if (model->ir_version < ER_MIN_IR_VERSION || model->ir_version > ER_MAX_IR_VERSION)
    return er__error(ER_STATUS_UNSUPPORTED,
                     "IR version %lld is not supported (edgerun reads IR versions %d to %d)",
                     (long long)model->ir_version, ER_MIN_IR_VERSION, ER_MAX_IR_VERSION);
  if (!has_graph) return er__error(ER_STATUS_INVALID_MODEL, "model has no graph");

  model->opsets = er__arena_array(&model->arena, (size_t)n_opsets + 1, sizeof(er_opset));
  model->meta = er__arena_array(&model->arena, (size_t)n_meta + 1, sizeof(er_meta));
  if (!model->opsets || !model->meta) return ER_STATUS_OUT_OF_MEMORY;
  model->default_opset = -1;
  pb = er__pb_init(p, len);
  for (;;) {
    ER_CHECK(er__pb_next(&pb, &f, &done));
    if (done) break;
    if (f.number == MODEL_OPSET_IMPORT) {
      er_opset *o = &model->opsets[model->n_opsets];
      ER_CHECK(parse_opset(&pc, &f, o));
      for (int i = 0; i < model->n_opsets; i++)
        if (strcmp(model->opsets[i].domain, o->domain) == 0)
          return er__error(ER_STATUS_INVALID_MODEL, "opset domain '%s' is imported twice", o->domain);
      if (!o->domain[0]) model->default_opset = o->version;
      model->n_opsets++;
    } else if (f.number == MODEL_METADATA) {
      ER_CHECK(parse_entry(&pc, &f, &model->meta[model->n_meta++]));
    }
  }
  /* A model may import no default-domain opset when none of its nodes use
   * that domain; binding checks each node's domain. */
  ER_CHECK(parse_graph(&pc, graph_field.data, graph_field.len, NULL, 0, &model->graph));
  return ER_STATUS_OK;
}
