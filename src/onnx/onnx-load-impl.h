/* onnx-load-impl.h - what onnx-load.c (types, graphs, nodes, attributes,
 * the model) and onnx-tensor.c (TensorProto, standalone tensor files)
 * share: the field numbers of onnx.proto, the parse context and the
 * helpers both use. */
#ifndef ER_ONNX_LOAD_IMPL_H
#define ER_ONNX_LOAD_IMPL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "onnx/onnx.h"

enum {
  MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_PRODUCER_VERSION = 3, MODEL_DOMAIN = 4,
  MODEL_MODEL_VERSION = 5, MODEL_DOC = 6, MODEL_GRAPH = 7, MODEL_OPSET_IMPORT = 8,
  MODEL_METADATA = 14, MODEL_FUNCTIONS = 25,

  OPSET_DOMAIN = 1, OPSET_VERSION = 2,
  ENTRY_KEY = 1, ENTRY_VALUE = 2,

  GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
  GRAPH_VALUE_INFO = 13, GRAPH_SPARSE_INITIALIZER = 15,

  NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5,
  NODE_DOMAIN = 7,

  ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_T = 5, ATTR_G = 6, ATTR_FLOATS = 7,
  ATTR_INTS = 8, ATTR_STRINGS = 9, ATTR_TENSORS = 10, ATTR_GRAPHS = 11, ATTR_TP = 14,
  ATTR_TYPE = 20, ATTR_REF_ATTR_NAME = 21, ATTR_SPARSE_TENSOR = 22, ATTR_SPARSE_TENSORS = 23,
  ATTR_TYPE_PROTOS = 15,

  VI_NAME = 1, VI_TYPE = 2,
  TYPE_TENSOR = 1, TYPE_SEQUENCE = 4, TYPE_MAP = 5, TYPE_OPTIONAL = 9, TYPE_SPARSE = 8,
  TT_ELEM_TYPE = 1, TT_SHAPE = 2,
  SHAPE_DIM = 1,
  DIM_VALUE = 1, DIM_PARAM = 2,

  TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_SEGMENT = 3, TENSOR_FLOAT_DATA = 4,
  TENSOR_INT32_DATA = 5, TENSOR_STRING_DATA = 6, TENSOR_INT64_DATA = 7, TENSOR_NAME = 8,
  TENSOR_RAW_DATA = 9, TENSOR_DOUBLE_DATA = 10, TENSOR_UINT64_DATA = 11,
  TENSOR_EXTERNAL_DATA = 13, TENSOR_DATA_LOCATION = 14,

  SPARSE_VALUES = 1, SPARSE_INDICES = 2, SPARSE_DIMS = 3,
};

typedef struct parse_ctx {
  struct er_model *model;
  er_arena *arena;
  uint64_t total_nodes;  /* across all graphs, against limits.max_nodes */
} parse_ctx;

er_status er__ox_copy_string(parse_ctx *pc, const er_pb_field *f, const char *what,
                             const char **out);

/* Reads every occurrence of one repeated scalar field of message [p, end)
 * into a new arena array. */
er_status er__ox_read_repeated(parse_ctx *pc, const uint8_t *p, const uint8_t *end,
                               uint32_t number, er_pb_scalar kind, uint64_t cap,
                               const char *what, uint64_t **vals_out, uint64_t *n_out);

er_status er__ox_tensor_attr(parse_ctx *pc, const er_pb_field *f, er_tensor **out);

/* SparseTensorProto -> dense tensor. Indices are [NNZ] linear or
 * [NNZ, rank] coordinates, each checked against the dims. */
er_status er__ox_sparse_to_dense(parse_ctx *pc, const uint8_t *p, size_t len, er_tensor *out,
                                 const char **name_out);

static inline er_status expect_wire(const er_pb_field *f, uint32_t wire, const char *what) {
  if (f->wire != wire)
    return er__error(ER_STATUS_MALFORMED, "%s (field %u) has wire type %u, expected %u", what,
                     f->number, f->wire, wire);
  return ER_STATUS_OK;
}

static inline bool dtype_known(int64_t t) { return t >= 1 && t <= 23; }

/* Registers `t` with the model when it owns data, so the model frees it. */
static inline er_status adopt_tensor(parse_ctx *pc, er_tensor *t) {
  if (!(t->flags & ER_TENSOR_OWNS_DATA)) return ER_STATUS_OK;
  er_status st = er__model_own(pc->model, t);
  if (st != ER_STATUS_OK) er__tensor_release(t);
  return st;
}

/* Parses a TensorProto at [p, p+len) into `t` (onnx-tensor.c); its name
 * into *name_out when not NULL. */
er_status er__onnx_tensor_from_proto(parse_ctx *pc, const uint8_t *p, size_t len, er_tensor *t,
                                     const char **name_out);

#endif /* ER_ONNX_LOAD_IMPL_H */
