/* opset.c - raising a model's default-domain opset so quantization nodes
 * can be added (per-channel DequantizeLinear needs opset 13, block-wise
 * int4 needs 21).
 *
 * Raising the opset changes which schema version every node is read under.
 * For most operators the newer versions only add types or optional
 * attributes whose defaults keep the old behaviour; those nodes stay as
 * they are. Where a version moved an attribute into an input (Unsqueeze's
 * axes, Clip's min/max, Pad's pads, ...) or changed a default, the node is
 * rewritten to the new form with the same meaning. Anything else is
 * refused by name, so a raised model never silently computes something
 * else. Nodes in subgraphs are converted too (the opset is model-wide). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "quant/prepare.h"
#include "quant/qgraph.h"

/* Operators whose version changes up to opset 21 keep the meaning of every
 * model that was valid under the older version (types added, optional
 * attributes or inputs added with defaults that reproduce the old
 * behaviour, negative axes allowed). Attributes removed on the way are
 * handled in drop_legacy_attrs. */
static const char *const compatible_ops[] = {
    "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh",
    "AveragePool", "BitShift", "Cast", "CastLike", "Ceil", "Celu", "Concat", "Constant",
    "ConstantOfShape", "Conv", "ConvInteger", "ConvTranspose", "Cos", "Cosh", "CumSum", "DepthToSpace",
    "DequantizeLinear", "Div", "Einsum", "Elu", "Equal", "Erf", "Exp", "Expand", "EyeLike", "Flatten",
    "Floor", "GRU", "Gather", "GatherElements", "GatherND", "Gemm", "GlobalAveragePool", "GlobalLpPool",
    "GlobalMaxPool", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "If", "InstanceNormalization", "IsInf", "IsNaN", "LRN", "LSTM", "LeakyRelu", "Less",
    "LessOrEqual", "Log", "Loop", "LpNormalization", "LpPool", "MatMul", "MatMulInteger", "Max",
    "MaxPool", "MaxRoiPool", "MaxUnpool", "Mean", "MeanVarianceNormalization", "Min", "Mod", "Mul",
    "Multinomial", "Neg", "NonMaxSuppression", "NonZero", "Not", "OneHot", "Or", "PRelu", "Pow",
    "QLinearConv", "QLinearMatMul", "QuantizeLinear", "RNN", "RandomNormal", "RandomNormalLike",
    "RandomUniform", "RandomUniformLike", "Range", "Reciprocal", "Relu", "Reshape", "Round", "Scan",
    "ScatterElements", "ScatterND", "Selu", "Shape", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Size",
    "Softplus", "Softsign", "SpaceToDepth", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu",
    "Tile", "Transpose", "Trilu", "Where", "Xor",
};

static bool is_compatible(const char *op) {
  for (size_t i = 0; i < ER_ARRAY_LEN(compatible_ops); i++)
    if (strcmp(compatible_ops[i], op) == 0) return true;
  return false;
}

static er_attr *find_attr(er_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

static void remove_attr(er_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) {
      memmove(&n->attrs[i], &n->attrs[i + 1], (size_t)(n->n_attrs - i - 1) * sizeof *n->attrs);
      n->n_attrs--;
      return;
    }
}

static er_status refuse(const er_node *n, int from, int to, const char *why) {
  return er__error(ER_STATUS_UNSUPPORTED,
                   "cannot raise the opset for quantization: %s node '%s' (version %d to %d) %s; "
                   "convert the model to a newer opset first (onnx.version_converter) or quantize "
                   "per-tensor at the model's own opset",
                   n->op_type, n->name, from, to, why);
}

/* Appends inputs to a node (arena copy of the new list); -1 pads. */
static er_status set_input(er_qbuild *b, er_node *n, int k, int32_t id) {
  if (k < n->n_inputs) {
    n->inputs[k] = id;
    return ER_STATUS_OK;
  }
  int32_t ids[ER_MAX_NODE_IO > 16 ? 16 : ER_MAX_NODE_IO];
  if (k >= 16) return er__error(ER_STATUS_INTERNAL, "input index %d out of range", k);
  for (int i = 0; i < k + 1; i++) ids[i] = i < n->n_inputs ? n->inputs[i] : -1;
  ids[k] = id;
  int32_t *arr = er__qb_ids(b, ids, k + 1);
  if (!arr) return ER_STATUS_OUT_OF_MEMORY;
  n->inputs = arr;
  n->n_inputs = k + 1;
  return ER_STATUS_OK;
}

/* Moves an ints attribute into input k as an int64 1-D constant. */
static er_status ints_to_input(er_qbuild *b, er_node *n, const char *attr, int k, const char *suffix) {
  er_attr *a = find_attr(n, attr);
  if (!a) return ER_STATUS_OK;
  if (a->type != ER_ATTR_INTS)
    return er__error(ER_STATUS_INVALID_ATTRIBUTE, "%s node '%s': attribute '%s' is not a list of ints",
                     n->op_type, n->name, attr);
  double *vals = malloc(((size_t)a->n + 1) * sizeof *vals);
  if (!vals) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  for (int64_t i = 0; i < a->n; i++) vals[i] = (double)a->ints[i];
  int32_t id;
  const char *base = n->name[0] ? n->name : n->op_type;
  er_status st = er__qb_constant_vec(b, base, suffix, ER_DTYPE_INT64, 1, a->n, vals, &id);
  free(vals);
  ER_CHECK(st);
  ER_CHECK(set_input(b, n, k, id));
  remove_attr(n, attr);
  return ER_STATUS_OK;
}

/* A float attribute into input k as a scalar of the node's data type
 * (input 0's known type, float when unknown). */
static er_status float_to_input(er_qbuild *b, er_graph *g, er_node *n, const char *attr, int k, double def,
                                bool always) {
  er_attr *a = find_attr(n, attr);
  if (!a && !always) return ER_STATUS_OK;
  double v = a ? (double)a->f : def;
  er_dtype dt = n->inputs[0] >= 0 ? g->values[n->inputs[0]].info.dtype : ER_DTYPE_FLOAT;
  if (dt == ER_DTYPE_UNDEFINED) dt = ER_DTYPE_FLOAT;
  int32_t id;
  char suffix[64];
  snprintf(suffix, sizeof suffix, "_%s", attr);
  ER_CHECK(er__qb_constant_vec(b, n->name[0] ? n->name : n->op_type, suffix, dt, 0, 1, &v, &id));
  ER_CHECK(set_input(b, n, k, id));
  if (a) remove_attr(n, attr);
  return ER_STATUS_OK;
}

/* Attributes that older versions had and newer ones dropped, harmless to
 * remove when they hold the value the newer semantics assume. */
static er_status drop_legacy_attrs(er_node *n, int from) {
  remove_attr(n, "consumed_inputs");
  remove_attr(n, "is_test");
  er_attr *a = find_attr(n, "broadcast");
  if (a && from < 7) {
    /* Legacy broadcasting with an explicit axis has no numpy equivalent
     * without reshaping the operand. */
    if (a->i != 0 && find_attr(n, "axis") && strcmp(n->op_type, "Gemm") != 0)
      return refuse(n, from, 7, "uses legacy broadcasting with an axis");
    remove_attr(n, "broadcast");
    if (strcmp(n->op_type, "Gemm") != 0) remove_attr(n, "axis");
  }
  return ER_STATUS_OK;
}

/* Whether any node (or subgraph capture, or graph output) reads value id. */
static bool value_read(const er_graph *g, int32_t id) {
  if (g->values[id].is_graph_output) return true;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *m = &g->nodes[i];
    for (int k = 0; k < m->n_inputs; k++)
      if (m->inputs[k] == id) return true;
    for (int a = 0; a < m->n_attrs; a++) {
      const er_attr *at = &m->attrs[a];
      int64_t cnt = at->type == ER_ATTR_GRAPH ? 1 : at->type == ER_ATTR_GRAPHS ? at->n : 0;
      for (int64_t j = 0; j < cnt; j++) {
        const er_graph *sg = at->type == ER_ATTR_GRAPH ? at->g : at->graphs[j];
        for (int32_t v = 0; v < sg->n_values; v++)
          if (sg->values[v].kind == ER_VALUE_OUTER && sg->values[v].outer == id) return true;
      }
    }
  }
  return false;
}

static er_status convert(er_qbuild *b, er_graph *g, er_node *n, int from, int to) {
  const char *op = n->op_type;
  ER_CHECK(drop_legacy_attrs(n, from));
  if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0) {
    if (from < 13 && to >= 13) return ints_to_input(b, n, "axes", 1, "_axes");
    return ER_STATUS_OK;
  }
  if (strcmp(op, "ReduceSum") == 0) {
    if (from < 13 && to >= 13) return ints_to_input(b, n, "axes", 1, "_axes");
    return ER_STATUS_OK;
  }
  if (strncmp(op, "Reduce", 6) == 0) {
    if (from < 18 && to >= 18) return ints_to_input(b, n, "axes", 1, "_axes");
    return ER_STATUS_OK;
  }
  if (strcmp(op, "Split") == 0) {
    if (from < 13 && to >= 13) return ints_to_input(b, n, "split", 1, "_split");
    return ER_STATUS_OK;
  }
  if (strcmp(op, "Slice") == 0) {
    if (from < 10 && to >= 10) {
      ER_CHECK(ints_to_input(b, n, "starts", 1, "_starts"));
      ER_CHECK(ints_to_input(b, n, "ends", 2, "_ends"));
      ER_CHECK(ints_to_input(b, n, "axes", 3, "_axes"));
    }
    return ER_STATUS_OK;
  }
  if (strcmp(op, "TopK") == 0) {
    if (from < 10 && to >= 10) {
      er_attr *k = find_attr(n, "k");
      if (!k) return refuse(n, from, to, "has no k");
      double kv = (double)k->i;
      int32_t id;
      ER_CHECK(er__qb_constant_vec(b, n->name[0] ? n->name : op, "_k", ER_DTYPE_INT64, 1, 1, &kv, &id));
      ER_CHECK(set_input(b, n, 1, id));
      remove_attr(n, "k");
    }
    return ER_STATUS_OK;
  }
  if (strcmp(op, "Clip") == 0) {
    if (from < 11 && to >= 11) {
      ER_CHECK(float_to_input(b, g, n, "min", 1, -INFINITY, false));
      if (find_attr(n, "max") && n->n_inputs < 2) ER_CHECK(set_input(b, n, 1, -1));
      ER_CHECK(float_to_input(b, g, n, "max", 2, INFINITY, false));
    }
    return ER_STATUS_OK;
  }
  if (strcmp(op, "Pad") == 0) {
    if (from < 11 && to >= 11) {
      ER_CHECK(ints_to_input(b, n, "pads", 1, "_pads"));
      ER_CHECK(float_to_input(b, g, n, "value", 2, 0.0, false));
    }
    return ER_STATUS_OK;
  }
  if (strcmp(op, "BatchNormalization") == 0) {
    er_attr *sp = find_attr(n, "spatial");
    if (sp && sp->i != 1) return refuse(n, from, to, "is not spatial (spatial=0)");
    remove_attr(n, "spatial");
    /* Versions before 14 with training outputs are inference-only here. */
    return ER_STATUS_OK;
  }
  if (strcmp(op, "Dropout") == 0) {
    /* At inference Dropout is the identity; ratio moved to an input in 12
     * and is_test disappeared in 7. An unused mask output lets the node
     * become an Identity, which every version has. */
    bool mask_used = n->n_outputs > 1 && n->outputs[1] >= 0 && value_read(g, n->outputs[1]);
    if (mask_used) return refuse(n, from, to, "has its mask output in use");
    n->op_type = "Identity";
    n->n_attrs = 0;
    n->n_inputs = 1;
    n->n_outputs = 1;
    return ER_STATUS_OK;
  }
  if (strcmp(op, "Softmax") == 0 || strcmp(op, "LogSoftmax") == 0 || strcmp(op, "Hardmax") == 0) {
    if (from < 13 && to >= 13) {
      /* Before 13 the input was flattened to 2-D at `axis`; from 13 the op
       * works along `axis` alone. The two agree when axis is the last one. */
      er_attr *ax = find_attr(n, "axis");
      int64_t axis = ax ? ax->i : 1;
      int rank = n->inputs[0] >= 0 ? g->values[n->inputs[0]].info.rank : -1;
      if (rank < 0) return refuse(n, from, to, "has an input of unknown rank (axis semantics changed in 13)");
      if (axis < 0) axis += rank;
      /* Flattening at `axis` and working along `axis` agree when every dim
       * after it is 1 ([N, C, 1, 1] class scores). */
      const er_tensor *x = &g->values[n->inputs[0]].info;
      bool trailing_ones = true;
      for (int d = (int)axis + 1; d < rank; d++) trailing_ones = trailing_ones && x->dims[d] == 1;
      if (axis != rank - 1 && !trailing_ones)
        return refuse(n, from, to, "is not on the last axis (axis semantics changed in 13)");
    }
    return ER_STATUS_OK;
  }
  if (strcmp(op, "Cast") == 0) {
    er_attr *to_attr = find_attr(n, "to");
    if (to_attr && to_attr->type == ER_ATTR_STRING) return refuse(n, from, to, "names its type as a string");
    return ER_STATUS_OK;
  }
  if (is_compatible(op)) return ER_STATUS_OK;
  if (strcmp(op, "Upsample") == 0) return refuse(n, from, to, "was removed in opset 10 (Resize replaces it)");
  if (strcmp(op, "Resize") == 0 && from < 11)
    return refuse(n, from, to, "changes its coordinate mapping in version 11");
  if (strcmp(op, "Resize") == 0) return ER_STATUS_OK;
  return refuse(n, from, to, "has no known conversion between these versions");
}

static er_status upgrade_graph(er_qbuild *b, er_graph *g, int64_t from_opset, int64_t to_opset) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    er_node *n = &g->nodes[i];
    for (int a = 0; a < n->n_attrs; a++) {
      er_attr *at = &n->attrs[a];
      if (at->type == ER_ATTR_GRAPH) {
        er_qbuild sb;
        er__qb_init(&sb, at->g);
        ER_CHECK(upgrade_graph(&sb, at->g, from_opset, to_opset));
      }
      if (at->type == ER_ATTR_GRAPHS)
        for (int64_t j = 0; j < at->n; j++) {
          er_qbuild sb;
          er__qb_init(&sb, at->graphs[j]);
          ER_CHECK(upgrade_graph(&sb, at->graphs[j], from_opset, to_opset));
        }
    }
    if (n->domain[0]) continue;
    int from = er__onnx_op_version(n->op_type, from_opset);
    int to = er__onnx_op_version(n->op_type, to_opset);
    if (to == 0) return refuse(n, from, to, "no longer exists at the new opset");
    if (from == to) continue;
    ER_CHECK(convert(b, g, n, from, to));
  }
  return ER_STATUS_OK;
}

er_status er__qprep_raise_opset(struct er_model *m, int64_t target, bool *changed) {
  *changed = false;
  int64_t cur = m->default_opset;
  if (cur >= target) return ER_STATUS_OK;
  if (target > er__onnx_max_opset())
    return er__error(ER_STATUS_UNSUPPORTED, "opset %lld is newer than edgerun knows (%d)", (long long)target,
                     er__onnx_max_opset());
  er_qbuild b;
  er__qb_init(&b, m->graph);
  ER_CHECK(upgrade_graph(&b, m->graph, cur < 1 ? 1 : cur, target));
  bool found = false;
  for (int i = 0; i < m->n_opsets; i++)
    if (!m->opsets[i].domain[0]) {
      m->opsets[i].version = target;
      found = true;
    }
  if (!found) {
    er_opset *o = er__arena_array(&m->arena, (size_t)m->n_opsets + 1, sizeof *o);
    if (!o) return ER_STATUS_OUT_OF_MEMORY;
    if (m->n_opsets) memcpy(o, m->opsets, (size_t)m->n_opsets * sizeof *o);
    o[m->n_opsets].domain = "";
    o[m->n_opsets].version = target;
    m->opsets = o;
    m->n_opsets++;
  }
  m->default_opset = target;
  /* Each opset needs a minimum IR version (opset 13: IR 7, 21: IR 10). */
  int64_t ir = target >= 21 ? 10 : target >= 19 ? 9 : target >= 15 ? 8 : target >= 13 ? 7 : target >= 11 ? 6 : 5;
  if (m->ir_version < ir) {
    /* IR 3 listed every initializer as a graph input; from IR 4 that makes
     * them overridable inputs, which they never were. */
    if (m->ir_version < 4) {
      er_graph *g = m->graph;
      int32_t w = 0;
      for (int32_t i = 0; i < g->n_inputs; i++) {
        er_value *v = &g->values[g->inputs[i]];
        if (v->kind == ER_VALUE_CONSTANT) {
          v->is_graph_input = false;
          continue;
        }
        g->inputs[w++] = g->inputs[i];
      }
      g->n_inputs = w;
    }
    m->ir_version = ir;
  }
  *changed = true;
  return ER_STATUS_OK;
}
