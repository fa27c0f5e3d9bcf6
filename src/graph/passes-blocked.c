/* passes-blocked.c - the session's layout pass: float convolutions and
 * pools, and the elementwise ops and channel concatenations between them,
 * move to the channel-blocked layout of ops/blocked.c.
 *
 * It runs on a session's own copy of the graph, after the fusion passes,
 * when every node is on the CPU (runtime/session.c), with the block of the
 * CPU's vector width. Nodes are visited in order; each value keeps its
 * planar form under its own id and name, and gets a blocked twin (a new
 * value) when a blocked op makes it or needs it:
 *
 *   Conv / FusedConv, 2-D, constant weights, group 1, depthwise, groups
 *   of whole blocks of input and output channels, or narrow groups (as
 *   many outputs as inputs, dividing the block)
 *                     -> BlockedConv (a group-1 one reads a planar input in
 *                        place, planar_input = 1; the others need it
 *                        blocked)
 *   MaxPool / AveragePool / GlobalMaxPool / GlobalAveragePool of a blocked
 *   value             -> BlockedPool
 *   Relu, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Tanh, Clip, and Add,
 *   Sub, Mul, PRelu of blocked values of one channel count (or with a
 *   one-value constant, or a per-channel one: [C,1,1] or [1,C,1,1], made
 *   a blocked constant [1,CB,1,1,B] with zeros past C), Div by a non-zero
 *   one-value constant
 *                     -> the same op on the blocked twins
 *   Concat over channels of blocked values, all but the last a whole
 *   number of blocks  -> Concat on axis 1 of the twins
 *   BatchNormalization (inference, constant parameters) of a blocked
 *   value         -> BlockedBatchNormalization
 *   Split over channels of a blocked value, every part but the last a
 *   whole number of blocks
 *                     -> Split on axis 1 of the twin, sizes in blocks
 *   Resize, nearest, of a blocked value over height and width, constant
 *   scales or sizes
 *                     -> BlockedResize
 *   Transpose NCHW -> NHWC (perm 0,2,3,1) of a blocked value
 *                     -> FromBlocked of the twin, channels_last = 1
 *   Transpose NHWC -> NCHW (perm 0,3,1,2) whose result a blocked op reads
 *                     -> ToBlocked, channels_last = 1, making the twin
 *                        (ConvNeXt's blocks: a depthwise convolution,
 *                        then LayerNorm and an MLP on channels-last
 *                        rows, back for the residual Add)
 *   Reshape [N, A*K, H, W] -> [N, A, K, H, W] of a blocked value, read
 *   only by Transpose (0, 1, 3, 4, 2) (a YOLO head's anchors)
 *                     -> FromBlocked of the twin, channels_last = 1,
 *                        Reshape to [N, H, W, A, K], Transpose
 *                        (0, 3, 1, 2, 4): rows of K move whole
 *
 * Any other reader of a value that exists only blocked, and every graph
 * output, gets its planar form back through FromBlocked, made once, just
 * before its first reader; a blocked op reading a value that exists only
 * planar gets ToBlocked the same way. So what a caller can observe keeps
 * its names and shapes, and the outputs change by float rounding only
 * (tests/unit/test-passes.c compares both). Subgraphs are left as
 * written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/graph.h"
#include "graph/rewrite.h"
#include "ops/fused.h"

/* Dense convolutions with at most this many taps per axis go blocked (the
 * kernels' limit; larger ones stay planar). */
#define BLK_MAX_TAPS 16
/* Splits into at most this many parts go blocked. */
#define BLK_MAX_PARTS 64

typedef struct bctx {
  er_graph *g;
  int64_t b;
  er_keep_planar_fn keep_planar;
  bool *exclude;          /* [n_nodes] left planar by the island rule */
  int32_t cap;            /* entries of the per-value arrays */
  int32_t *twin;          /* [cap] blocked twin of a value, or -1 */
  int32_t *chan;          /* [cap] channels a blocked value holds */
  bool *planar;           /* [cap] the value's planar form exists so far */
  int32_t *reroute;       /* [cap] a YOLO head's Reshape output read through another value, or -1 */
  er_rw_list list;        /* the rewritten node list */
  int blocked_ops;        /* BlockedConv / BlockedPool made */
} bctx;

/* ---- building the new node list -------------------------------------------- */

/* A new value, the blocked twin of value `of`. */
static er_status new_twin(bctx *bc, int32_t of, int64_t channels, int32_t *id_out) {
  er_graph *g = bc->g;
  const char *name = er__rw_name(g, g->values[of].name, "blocked");
  if (!name) return ER_STATUS_OUT_OF_MEMORY;
  ER_CHECK(er__graph_add_value(g, name, id_out));
  ER_ASSERT(*id_out < bc->cap);
  er__tensor_set(&g->values[*id_out].info, ER_DTYPE_FLOAT, -1, NULL);
  bc->twin[of] = *id_out;
  bc->twin[*id_out] = -1;
  bc->chan[*id_out] = channels;
  bc->planar[*id_out] = false;
  return ER_STATUS_OK;
}

/* Node `proto` retyped as com.edgerun `op` with its attributes (minus any
 * named in `drop`) plus `extra`, reading `in` and writing `out`. */
static er_status emit(bctx *bc, const er_node *proto, const char *op, const int32_t *in, int n_in, int32_t out,
                      const er_attr *extra, int n_extra, const char *drop) {
  er_graph *g = bc->g;
  er_node n = *proto;
  ER_CHECK(er__rw_set_op(&n, ER_FUSED_DOMAIN, op, 1));
  n.inputs = er__rw_ids(g, in, n_in);
  n.outputs = er__rw_ids(g, &out, 1);
  er_attr *attrs = er__arena_array(g->arena, (size_t)(proto->n_attrs + n_extra) + 1, sizeof *attrs);
  if (!n.inputs || !n.outputs || !attrs) return ER_STATUS_OUT_OF_MEMORY;
  int w = 0;
  for (int i = 0; i < proto->n_attrs; i++)
    if (!drop || strcmp(proto->attrs[i].name, drop) != 0) attrs[w++] = proto->attrs[i];
  for (int j = 0; j < n_extra; j++) attrs[w++] = extra[j];
  n.attrs = attrs;
  n.n_attrs = w;
  n.n_inputs = n_in;
  n.n_outputs = 1;
  g->values[out].producer = bc->list.n;
  return er__rw_list_push(&bc->list, &n);
}

/* The planar form of v: FromBlocked of its twin, made now if not yet. */
static er_status need_planar(bctx *bc, int32_t v) {
  if (v < 0 || bc->planar[v]) return ER_STATUS_OK;
  er_graph *g = bc->g;
  int32_t t = bc->twin[v];
  ER_ASSERT(t >= 0);
  er_node proto;
  memset(&proto, 0, sizeof proto);
  proto.name = er__rw_name(g, g->values[v].name, "to_planar");
  if (!proto.name) return ER_STATUS_OUT_OF_MEMORY;
  er_attr extra[2] = {er__rw_attr_int("block", bc->b), er__rw_attr_int("channels", bc->chan[t])};
  ER_CHECK(emit(bc, &proto, "FromBlocked", &t, 1, v, extra, 2, NULL));
  bc->planar[v] = true;
  return ER_STATUS_OK;
}

static er_status need_planar_cb(void *bc, int32_t v) { return need_planar(bc, v); }

/* The blocked form of v: its twin, or ToBlocked of it made now. */
static er_status need_blocked(bctx *bc, int32_t v, int32_t *out) {
  if (bc->twin[v] >= 0) {
    *out = bc->twin[v];
    return ER_STATUS_OK;
  }
  er_graph *g = bc->g;
  const er_tensor *info = &g->values[v].info;
  ER_ASSERT(bc->planar[v] && info->rank == 4 && info->dims[1] > 0);
  int32_t t;
  ER_CHECK(new_twin(bc, v, info->dims[1], &t));
  er_node proto;
  memset(&proto, 0, sizeof proto);
  proto.name = er__rw_name(g, g->values[v].name, "to_blocked");
  if (!proto.name) return ER_STATUS_OUT_OF_MEMORY;
  er_attr extra[1] = {er__rw_attr_int("block", bc->b)};
  ER_CHECK(emit(bc, &proto, "ToBlocked", &v, 1, t, extra, 1, NULL));
  *out = t;
  return ER_STATUS_OK;
}

/* ---- what goes blocked --------------------------------------------------- */

/* A planar rank-4 float32 value with known channels; its channel count. */
static int64_t channels_of(const er_graph *g, int32_t v) {
  if (!er__rw_is_f32(g, v)) return -1;
  const er_tensor *t = &g->values[v].info;
  return t->rank == 4 && t->dims[1] > 0 ? t->dims[1] : -1;
}

/* A 2-D convolution the blocked kernels take: *depthwise is set for the
 * kinds that need a blocked input (depthwise, groups of whole blocks:
 * ShuffleNet's grouped 1x1 layers, and narrow groups of as many outputs
 * as inputs dividing the block: ResNeXt's grouped 3x3 layers). */
static bool conv_ok(const bctx *bc, const er_node *n, bool *depthwise) {
  const er_graph *g = bc->g;
  bool fused = n->domain[0] && strcmp(n->domain, ER_FUSED_DOMAIN) == 0 && strcmp(n->op_type, "FusedConv") == 0;
  if (!fused && !er__rw_is(n, "Conv")) return false;
  if (n->n_outputs != 1 || n->n_inputs < 2 || !er__rw_is_f32(g, n->outputs[0])) return false;
  int64_t c = channels_of(g, n->inputs[0]);
  const er_tensor *w = er__graph_const(g, n->inputs[1]);
  if (c < 1 || !w || w->dtype != ER_DTYPE_FLOAT || w->rank != 4 || !er__tensor_shape_known(w)) return false;
  if (n->n_inputs > 2 && n->inputs[2] >= 0) {
    const er_tensor *bias = er__graph_const(g, n->inputs[2]);
    if (!bias || bias->dtype != ER_DTYPE_FLOAT) return false;
  }
  if (n->n_inputs > 3 && n->inputs[3] >= 0 && channels_of(g, n->inputs[3]) != w->dims[0]) return false;
  int64_t group = er__node_attr_int(n, "group", 1), m = w->dims[0];
  *depthwise = group > 1;
  if (group == 1) {
    if (w->dims[1] != c) return false;
  } else if (!(group == c && m == c && w->dims[1] == 1) &&
             !(group > 1 && c % group == 0 && w->dims[1] == c / group && (c / group) % bc->b == 0 &&
               m % group == 0 && (m / group) % bc->b == 0) &&
             !(group > 1 && m == c && c % group == 0 && w->dims[1] == c / group && w->dims[1] < bc->b &&
               bc->b % w->dims[1] == 0)) {
    return false;
  }
  return w->dims[2] >= 1 && w->dims[3] >= 1 && w->dims[2] <= BLK_MAX_TAPS && w->dims[3] <= BLK_MAX_TAPS;
}

static bool pool_ok(const bctx *bc, const er_node *n) {
  const er_graph *g = bc->g;
  bool window = er__rw_is(n, "MaxPool") || er__rw_is(n, "AveragePool");
  bool global = er__rw_is(n, "GlobalMaxPool") || er__rw_is(n, "GlobalAveragePool");
  if (!window && !global) return false;
  if (n->n_inputs != 1 || n->n_outputs != 1 || !er__rw_is_f32(g, n->outputs[0])) return false;
  if (bc->twin[n->inputs[0]] < 0) return false;
  if (window) {
    const er_attr *k = er__node_attr(n, "kernel_shape");
    if (!k || k->type != ER_ATTR_INTS || k->n != 2) return false;
    if (er__node_attr_int(n, "storage_order", 0) != 0) return false;
  }
  return true;
}

static bool unary_elementwise(const er_node *n) {
  static const char *const ops[] = {"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh"};
  for (size_t i = 0; i < ER_ARRAY_LEN(ops); i++)
    if (er__rw_is(n, ops[i])) return n->n_inputs == 1;
  /* Clip's bounds must be one-value constants (they broadcast). */
  return er__rw_is(n, "Clip") && n->n_inputs >= 1;
}

/* A one-element float constant (broadcasts over any layout). */
static bool scalar_const(const er_graph *g, int32_t v) {
  const er_tensor *t = er__graph_const(g, v);
  return t && er__tensor_count(t) == 1;
}

/* A per-channel float32 constant of an NCHW value of c channels: [C,1,1]
 * or [1,C,1,1] (PReLU slopes, layer scales, an unfolded BatchNorm's Mul
 * and Add). */
static bool chan_const(const er_graph *g, int32_t v, int64_t c) {
  const er_tensor *t = er__graph_const(g, v);
  if (!t || t->dtype != ER_DTYPE_FLOAT || c < 2 || !er__tensor_shape_known(t) || er__tensor_count(t) != c)
    return false;
  if (t->rank == 3) return t->dims[0] == c;
  return t->rank == 4 && t->dims[0] == 1 && t->dims[1] == c;
}

/* Elementwise node whose tensor inputs all have blocked twins of one
 * channel count (broadcasting only over N, H and W), the rest one-value
 * constants, or per-channel ones for Add, Sub, Mul and PRelu. Division
 * only by a non-zero constant: 0 / 0 in the padding would be NaN. */
static bool eltwise_ok(const bctx *bc, const er_node *n, int64_t *channels) {
  const er_graph *g = bc->g;
  /* Max and Min of two (openWakeWord's embedding clamps every LeakyRelu
   * with Max(x, -0.4)): their padding lanes stay finite. */
  bool per_channel = er__rw_is(n, "Add") || er__rw_is(n, "Sub") || er__rw_is(n, "Mul") ||
                     (er__rw_is(n, "PRelu") && n->n_inputs == 2);
  bool binary = per_channel || ((er__rw_is(n, "Max") || er__rw_is(n, "Min")) && n->n_inputs == 2 && n->version >= 8);
  if (er__rw_is(n, "Div")) {
    if (n->n_inputs != 2 || !scalar_const(g, n->inputs[1])) return false;
    const er_tensor *d = er__graph_const(g, n->inputs[1]);
    if (!er__dtype_is_float(d->dtype) || er__load_f64(d->data, d->dtype, 0) == 0.0) return false;
    binary = true;
  }
  if (!binary && !unary_elementwise(n)) return false;
  if (n->n_outputs != 1 || !er__rw_is_f32(g, n->outputs[0]) || channels_of(g, n->outputs[0]) < 1) return false;
  int64_t c = -1;
  int blocked = 0;
  for (int k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v < 0 || bc->twin[v] < 0 || channels_of(g, v) != bc->chan[bc->twin[v]]) continue;
    if (c >= 0 && bc->chan[bc->twin[v]] != c) return false;
    c = bc->chan[bc->twin[v]];
    blocked++;
  }
  if (blocked == 0 || channels_of(g, n->outputs[0]) != c) return false;
  for (int k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v < 0 || (bc->twin[v] >= 0 && channels_of(g, v) == c)) continue;
    if (k == 0 && !binary) return false;
    /* PRelu's slope broadcasts to X, never X to the slope. */
    if (!scalar_const(g, v) && !(per_channel && chan_const(g, v, c) && (k == 1 || !er__rw_is(n, "PRelu"))))
      return false;
  }
  *channels = c;
  return true;
}

/* Inference BatchNormalization of a blocked value, its four parameters
 * constant [C] float32 vectors (DenseNet's BN and ReLU before every
 * convolution, which otherwise took each layer's input planar and back). */
static bool bn_ok(const bctx *bc, const er_node *n, int64_t *channels) {
  const er_graph *g = bc->g;
  if (!er__rw_is(n, "BatchNormalization") || n->n_inputs != 5 || n->version < 7) return false;
  for (int k = 1; k < n->n_outputs; k++)
    if (n->outputs[k] >= 0) return false;
  if (er__node_attr_int(n, "training_mode", 0) != 0 || er__node_attr_int(n, "spatial", 1) != 1) return false;
  int32_t x = n->inputs[0];
  if (x < 0 || bc->twin[x] < 0 || !er__rw_is_f32(g, n->outputs[0])) return false;
  int64_t c = bc->chan[bc->twin[x]];
  if (channels_of(g, x) != c || channels_of(g, n->outputs[0]) != c) return false;
  for (int k = 1; k < 5; k++) {
    const er_tensor *t = er__graph_const(g, n->inputs[k]);
    if (!t || t->dtype != ER_DTYPE_FLOAT || t->rank != 1 || t->dims[0] != c) return false;
  }
  *channels = c;
  return true;
}

/* A channel Concat with at least one blocked input, every input but the
 * last a whole number of blocks; planar inputs (known channels) are
 * converted in. Inception's blocks concatenate blocked 1x1 branches with
 * planar Winograd ones, and the pools and 1x1 layers after the Concat are
 * blocked again: converting the planar branch in costs one conversion,
 * going planar costs one per blocked branch and another after. */
static bool concat_ok(const bctx *bc, const er_node *n, int64_t *channels) {
  const er_graph *g = bc->g;
  if (!er__rw_is(n, "Concat") || n->n_outputs != 1 || !er__rw_is_f32(g, n->outputs[0])) return false;
  int64_t axis = er__node_attr_int(n, "axis", 0);
  if (axis != 1 && axis != -3) return false;
  int64_t c = 0;
  int blocked = 0;
  for (int k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v < 0) return false;
    int64_t ck = bc->twin[v] >= 0 ? bc->chan[bc->twin[v]] : channels_of(g, v);
    if (ck < 1 || (k + 1 < n->n_inputs && ck % bc->b != 0)) return false;
    blocked += bc->twin[v] >= 0;
    c += ck;
  }
  if (blocked == 0 || channels_of(g, n->outputs[0]) != c) return false;
  *channels = c;
  return true;
}

/* The channel counts of a Split's parts when it can split the blocked twin
 * of its input: axis 1 of a rank-4 float32 value, sizes known (attribute,
 * constant input or equal parts), every part but the last a whole number
 * of blocks and none empty. YOLOv8's C2f blocks split a convolution's
 * output in halves that feed convolutions, a residual Add and a Concat,
 * all blocked: planar halves cost a conversion, a reference copy and one
 * more conversion per bottleneck. */
static bool split_ok(const bctx *bc, const er_node *n, int64_t *sizes) {
  const er_graph *g = bc->g;
  if (!er__rw_is(n, "Split") || n->n_inputs < 1 || n->n_outputs < 1 || n->n_outputs > BLK_MAX_PARTS) return false;
  int32_t x = n->inputs[0];
  int64_t c = channels_of(g, x), axis = er__node_attr_int(n, "axis", 0);
  if (c < 1 || bc->twin[x] < 0 || bc->chan[bc->twin[x]] != c || (axis != 1 && axis != -3)) return false;
  int parts = n->n_outputs;
  const er_tensor *given = n->n_inputs > 1 && n->inputs[1] >= 0 ? er__graph_const(g, n->inputs[1]) : NULL;
  const er_attr *list = er__node_attr(n, "split");
  if (n->version < 13 && list) {
    if (list->type != ER_ATTR_INTS || list->n != parts) return false;
    for (int j = 0; j < parts; j++) sizes[j] = list->ints[j];
  } else if (n->version >= 13 && n->n_inputs > 1 && n->inputs[1] >= 0) {
    if (!given || given->dtype != ER_DTYPE_INT64 || given->rank != 1 || er__tensor_count(given) != parts) return false;
    for (int j = 0; j < parts; j++) sizes[j] = er__get_i64(given, j);
  } else {
    /* Equal parts; from opset 18 the last one takes what is left. */
    int64_t chunk = n->version >= 18 ? (c + parts - 1) / parts : c / parts;
    if (n->version < 18 && c % parts != 0) return false;
    for (int j = 0; j < parts; j++) sizes[j] = j + 1 < parts ? chunk : c - chunk * (parts - 1);
  }
  int64_t sum = 0;
  for (int j = 0; j < parts; j++) {
    int32_t y = n->outputs[j];
    if (sizes[j] < 1 || (j + 1 < parts && sizes[j] % bc->b != 0) || y < 0 || channels_of(g, y) != sizes[j])
      return false;
    sum += sizes[j];
  }
  return sum == c;
}

/* A nearest Resize of a blocked value over its height and width, its
 * scales or sizes constant and the output's shape known: YOLOv5/v8's and
 * FPN necks' 2x upsampling between blocked convolutions, which took the
 * map planar, resized it and converted it back (0.8 ms per upsample in a
 * YOLOv8n at 640x640, the Resize itself 0.2 ms). */
static bool resize_ok(const bctx *bc, const er_node *n) {
  const er_graph *g = bc->g;
  if (!er__rw_is(n, "Resize") || n->version < 10 || n->version > 19 || n->n_outputs != 1 || n->n_inputs < 2)
    return false;
  int32_t x = n->inputs[0], y = n->outputs[0];
  int64_t c = channels_of(g, x);
  if (c < 1 || bc->twin[x] < 0 || bc->chan[bc->twin[x]] != c || channels_of(g, y) != c) return false;
  const er_tensor *xi = &g->values[x].info, *yi = &g->values[y].info;
  if (xi->dims[0] < 1 || yi->dims[0] != xi->dims[0] || yi->dims[2] < 1 || yi->dims[3] < 1) return false;
  const er_attr *mode = er__node_attr(n, "mode"), *ct = er__node_attr(n, "coordinate_transformation_mode");
  const er_attr *policy = er__node_attr(n, "keep_aspect_ratio_policy");
  if (mode && (mode->type != ER_ATTR_STRING || strcmp(mode->s, "nearest") != 0)) return false;
  if (ct && (ct->type != ER_ATTR_STRING || strcmp(ct->s, "tf_crop_and_resize") == 0)) return false;
  if (policy && (policy->type != ER_ATTR_STRING || strcmp(policy->s, "stretch") != 0)) return false;
  if (er__node_attr(n, "axes")) return false;
  for (int k = 1; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0 && !er__graph_const(g, n->inputs[k])) return false;
  return true;
}

/* A Transpose of a rank-4 value by exactly `perm`. */
static bool transpose_by(const er_node *n, const int64_t perm[4]) {
  if (!er__rw_is(n, "Transpose") || n->n_inputs != 1 || n->n_outputs != 1 || n->inputs[0] < 0 || n->outputs[0] < 0)
    return false;
  const er_attr *a = er__node_attr(n, "perm");
  if (!a || a->type != ER_ATTR_INTS || a->n != 4) return false;
  for (int k = 0; k < 4; k++)
    if (a->ints[k] != perm[k]) return false;
  return true;
}

/* NCHW -> NHWC of a value with a blocked twin: FromBlocked straight to
 * channels-last. */
static bool to_nhwc_ok(const bctx *bc, const er_node *n) {
  static const int64_t perm[4] = {0, 2, 3, 1};
  if (!transpose_by(n, perm)) return false;
  const er_graph *g = bc->g;
  int32_t x = n->inputs[0], y = n->outputs[0];
  int64_t c = channels_of(g, x);
  const er_tensor *yi = &g->values[y].info;
  return c > 0 && bc->twin[x] >= 0 && bc->chan[bc->twin[x]] == c && er__rw_is_f32(g, y) && yi->rank == 4 &&
         yi->dims[3] == c;
}

/* NHWC -> NCHW of a float32 value with known channels: ToBlocked from
 * channels-last makes the result's twin (the island rule keeps it only
 * when a blocked op reads that twin). */
static bool from_nhwc_ok(const bctx *bc, const er_node *n) {
  static const int64_t perm[4] = {0, 3, 1, 2};
  if (!transpose_by(n, perm)) return false;
  const er_graph *g = bc->g;
  int32_t x = n->inputs[0];
  const er_tensor *xi = &g->values[x].info;
  return er__rw_is_f32(g, x) && xi->rank == 4 && xi->dims[3] > 0 && channels_of(g, n->outputs[0]) == xi->dims[3];
}

/* A detection head's split of a blocked value's channels into anchors
 * (YOLOv3-v7: Reshape [N, A*K, H, W] -> [N, A, K, H, W], then Transpose
 * (0, 1, 3, 4, 2) to [N, A, H, W, K]), where the Reshape's result has no
 * other reader and is not a graph output. The planar form and a 2-D
 * transpose of every anchor's [K, H*W] cost YOLOv5n's largest head about
 * 1.5 ms against onnxruntime's 0.9; as FromBlocked to channels-last
 * [N, H, W, A*K], a Reshape to [N, H, W, A, K] and a Transpose
 * (0, 3, 1, 2, 4) that moves whole rows of K, the same values take one
 * blocked conversion and a row copy. *tr gets the Transpose's index. */
static bool head_split_ok(const bctx *bc, const er_node *nodes, int32_t n_nodes, const er_node *n, int32_t *tr) {
  static const int64_t perm[5] = {0, 1, 3, 4, 2};
  const er_graph *g = bc->g;
  if (!er__rw_is(n, "Reshape") || n->n_inputs < 2 || n->n_outputs != 1 || n->inputs[0] < 0 || n->outputs[0] < 0)
    return false;
  int32_t x = n->inputs[0], r = n->outputs[0];
  const er_tensor *xi = &g->values[x].info, *ri = &g->values[r].info;
  if (bc->twin[x] < 0 || !er__rw_is_f32(g, x) || xi->rank != 4 || ri->rank != 5 || bc->chan[bc->twin[x]] != xi->dims[1])
    return false;
  for (int d = 0; d < 5; d++)
    if (ri->dims[d] <= 0) return false;
  if (ri->dims[0] != xi->dims[0] || ri->dims[1] * ri->dims[2] != xi->dims[1] || ri->dims[3] != xi->dims[2] ||
      ri->dims[4] != xi->dims[3])
    return false;
  for (int32_t k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == r) return false;
  int readers = 0;
  *tr = -1;
  for (int32_t j = 0; j < n_nodes; j++)
    for (int k = 0; k < nodes[j].n_inputs; k++)
      if (nodes[j].inputs[k] == r) {
        readers++;
        *tr = j;
      }
  if (readers != 1 || *tr < 0) return false;
  const er_node *t = &nodes[*tr];
  const er_attr *a = er__node_attr(t, "perm");
  if (!er__rw_is(t, "Transpose") || t->n_inputs != 1 || !a || a->type != ER_ATTR_INTS || a->n != 5) return false;
  for (int k = 0; k < 5; k++)
    if (a->ints[k] != perm[k]) return false;
  return true;
}

static er_status rewrite_head_split(bctx *bc, const er_node *n) {
  er_graph *g = bc->g;
  int32_t x = n->inputs[0], r = n->outputs[0], xb = bc->twin[x], t, u, shape;
  const int64_t *rd = g->values[r].info.dims;
  int64_t nhwc[4] = {rd[0], rd[3], rd[4], rd[1] * rd[2]}, split[5] = {rd[0], rd[3], rd[4], rd[1], rd[2]};
  const char *name = er__rw_name(g, g->values[r].name, "nhwc");
  if (!name) return ER_STATUS_OUT_OF_MEMORY;
  ER_CHECK(er__graph_add_value(g, name, &t));
  ER_ASSERT(t < bc->cap);
  er__tensor_set(&g->values[t].info, ER_DTYPE_FLOAT, 4, nhwc);
  er_node proto;
  memset(&proto, 0, sizeof proto);
  proto.name = er__rw_name(g, g->values[r].name, "to_nhwc");
  if (!proto.name) return ER_STATUS_OUT_OF_MEMORY;
  er_attr extra[3] = {er__rw_attr_int("block", bc->b), er__rw_attr_int("channels", bc->chan[xb]), er__rw_attr_int("channels_last", 1)};
  ER_CHECK(emit(bc, &proto, "FromBlocked", &xb, 1, t, extra, 3, NULL));
  bc->planar[t] = true;
  er_tensor st;
  er__tensor_set(&st, ER_DTYPE_INT64, 1, (const int64_t[]){5});
  ER_CHECK(er__tensor_alloc(&st, 0));
  memcpy(st.data, split, sizeof split);
  ER_CHECK(er__rw_new_const(g, g->values[r].name, "folded", &st, &shape));
  name = er__rw_name(g, g->values[r].name, "anchors_last");
  if (!name) return ER_STATUS_OUT_OF_MEMORY;
  ER_CHECK(er__graph_add_value(g, name, &u));
  ER_ASSERT(u < bc->cap);
  er__tensor_set(&g->values[u].info, ER_DTYPE_FLOAT, 5, split);
  er_node c = *n;
  int32_t in[2] = {t, shape};
  c.inputs = er__rw_ids(g, in, 2);
  c.outputs = er__rw_ids(g, &u, 1);
  if (!c.inputs || !c.outputs) return ER_STATUS_OUT_OF_MEMORY;
  c.n_inputs = 2;
  g->values[u].producer = bc->list.n;
  g->values[r].producer = -1;
  bc->planar[u] = true;
  bc->reroute[r] = u;
  return er__rw_list_push(&bc->list, &c);
}

/* The head's Transpose, now of the channels-last value: (0, 3, 1, 2, 4). */
static er_status rewrite_head_transpose(bctx *bc, const er_node *n) {
  er_graph *g = bc->g;
  static const int64_t perm[5] = {0, 3, 1, 2, 4};
  er_node c = *n;
  int32_t in = bc->reroute[n->inputs[0]];
  er_attr *attrs = er__arena_array(g->arena, 2, sizeof *attrs);
  int64_t *p = er__arena_array(g->arena, 5, sizeof *p);
  c.inputs = er__rw_ids(g, &in, 1);
  if (!attrs || !p || !c.inputs) return ER_STATUS_OUT_OF_MEMORY;
  memcpy(p, perm, sizeof perm);
  memset(attrs, 0, sizeof *attrs);
  attrs[0].name = "perm";
  attrs[0].type = ER_ATTR_INTS;
  attrs[0].ints = p;
  attrs[0].n = 5;
  c.attrs = attrs;
  c.n_attrs = 1;
  bc->planar[n->outputs[0]] = true;
  g->values[n->outputs[0]].producer = bc->list.n;
  return er__rw_list_push(&bc->list, &c);
}

/* ---- the rewrite ------------------------------------------------------------ */

static er_status rewrite_conv(bctx *bc, const er_node *n, bool depthwise) {
  er_graph *g = bc->g;
  int32_t x = n->inputs[0], in[4] = {x, n->inputs[1], n->n_inputs > 2 ? n->inputs[2] : -1, -1};
  int n_in = n->n_inputs > 2 && n->inputs[2] >= 0 ? 3 : 2;
  int64_t planar_in = 0;
  if (bc->twin[x] >= 0) in[0] = bc->twin[x];
  else if (!depthwise) planar_in = 1;
  else ER_CHECK(need_blocked(bc, x, &in[0]));
  if (n->n_inputs > 3 && n->inputs[3] >= 0) {
    ER_CHECK(need_blocked(bc, n->inputs[3], &in[3]));
    n_in = 4;
  }
  const er_tensor *w = er__graph_const(g, n->inputs[1]);
  int32_t y = n->outputs[0], yb;
  ER_CHECK(new_twin(bc, y, w->dims[0], &yb));
  er_attr extra[2] = {er__rw_attr_int("block", bc->b), er__rw_attr_int("planar_input", planar_in)};
  ER_CHECK(emit(bc, n, "BlockedConv", in, n_in, yb, extra, 2, NULL));
  g->values[y].producer = -1;
  bc->blocked_ops++;
  return ER_STATUS_OK;
}

static er_status rewrite_bn(bctx *bc, const er_node *n, int64_t channels) {
  int32_t in[5] = {bc->twin[n->inputs[0]], n->inputs[1], n->inputs[2], n->inputs[3], n->inputs[4]};
  int32_t y = n->outputs[0], yb;
  ER_CHECK(new_twin(bc, y, channels, &yb));
  er_attr extra[1] = {er__rw_attr_int("block", bc->b)};
  ER_CHECK(emit(bc, n, "BlockedBatchNormalization", in, 5, yb, extra, 1, "spatial"));
  bc->g->values[y].producer = -1;
  return ER_STATUS_OK;
}

static er_status rewrite_pool(bctx *bc, const er_node *n) {
  int32_t xb = bc->twin[n->inputs[0]], y = n->outputs[0], yb;
  ER_CHECK(new_twin(bc, y, bc->chan[xb], &yb));
  er_attr extra[2] = {er__rw_attr_int("block", bc->b), er__rw_attr_string("op", n->op_type)};
  ER_CHECK(emit(bc, n, "BlockedPool", &xb, 1, yb, extra, 2, NULL));
  bc->g->values[y].producer = -1;
  bc->blocked_ops++;
  return ER_STATUS_OK;
}

/* A per-channel constant [C,1,1] as a blocked one [1,CB,1,1,B], zeros
 * past C (so padding lanes stay finite through Add, Sub, Mul and PRelu). */
static er_status blocked_const(bctx *bc, int32_t v, int64_t channels, int32_t *out) {
  er_graph *g = bc->g;
  const er_tensor *src = er__graph_const(g, v);
  int64_t cb = (channels + bc->b - 1) / bc->b, d[5] = {1, cb, 1, 1, bc->b};
  er_tensor t;
  er__tensor_set(&t, ER_DTYPE_FLOAT, 5, d);
  ER_CHECK(er__tensor_alloc(&t, 0));
  float *dst = t.data;
  for (int64_t j = 0; j < cb * bc->b; j++) dst[j] = j < channels ? ((const float *)src->data)[j] : 0.0f;
  return er__rw_new_const(g, g->values[v].name, "folded", &t, out);
}

/* The node as it is, on the blocked twins of its tensor inputs (Concat on
 * axis 1 of the 5-D twins; per-channel constants made blocked). */
static er_status rewrite_same(bctx *bc, const er_node *n, int64_t channels) {
  er_graph *g = bc->g;
  er_node c = *n;
  int32_t in[ER_MAX_NODE_IO];
  ER_ASSERT(n->n_inputs <= ER_MAX_NODE_IO);
  bool concat = er__rw_is(n, "Concat");
  for (int k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (concat && v >= 0 && bc->twin[v] < 0) ER_CHECK(need_blocked(bc, v, &in[k]));
    else if (v >= 0 && bc->twin[v] < 0 && !concat && chan_const(g, v, channels))
      ER_CHECK(blocked_const(bc, v, channels, &in[k]));
    else in[k] = v >= 0 && bc->twin[v] >= 0 ? bc->twin[v] : v;
  }
  int32_t y = n->outputs[0], yb;
  ER_CHECK(new_twin(bc, y, channels, &yb));
  c.inputs = er__rw_ids(g, in, n->n_inputs);
  c.outputs = er__rw_ids(g, &yb, 1);
  if (!c.inputs || !c.outputs) return ER_STATUS_OUT_OF_MEMORY;
  if (concat) {
    er_attr *attrs = er__arena_array(g->arena, (size_t)n->n_attrs + 1, sizeof *attrs);
    if (!attrs) return ER_STATUS_OUT_OF_MEMORY;
    for (int i = 0; i < n->n_attrs; i++)
      attrs[i] = strcmp(n->attrs[i].name, "axis") == 0 ? er__rw_attr_int("axis", 1) : n->attrs[i];
    c.attrs = attrs;
  }
  g->values[y].producer = -1;
  g->values[yb].producer = bc->list.n;
  return er__rw_list_push(&bc->list, &c);
}

/* BlockedResize of the twin; the Resize's other inputs and attributes as
 * they are, with its opset. */
static er_status rewrite_resize(bctx *bc, const er_node *n) {
  int32_t in[4], y = n->outputs[0], yb;
  ER_ASSERT(n->n_inputs <= 4);
  for (int k = 0; k < n->n_inputs; k++) in[k] = n->inputs[k];
  in[0] = bc->twin[n->inputs[0]];
  ER_CHECK(new_twin(bc, y, bc->chan[in[0]], &yb));
  er_attr extra[2] = {er__rw_attr_int("block", bc->b), er__rw_attr_int("opset", n->version)};
  ER_CHECK(emit(bc, n, "BlockedResize", in, n->n_inputs, yb, extra, 2, NULL));
  bc->g->values[y].producer = -1;
  return ER_STATUS_OK;
}

/* Split on axis 1 of the twin, in the opset-11 form whose sizes are an
 * attribute (the pass adds no constants), sizes in blocks. */
static er_status rewrite_split(bctx *bc, const er_node *n, const int64_t *sizes) {
  er_graph *g = bc->g;
  er_node c = *n;
  int parts = n->n_outputs;
  int32_t in = bc->twin[n->inputs[0]], out[BLK_MAX_PARTS];
  er_attr *attrs = er__arena_array(g->arena, 3, sizeof *attrs);
  int64_t *blocks = er__arena_array(g->arena, (size_t)parts + 1, sizeof *blocks);
  if (!attrs || !blocks) return ER_STATUS_OUT_OF_MEMORY;
  for (int j = 0; j < parts; j++) {
    blocks[j] = (sizes[j] + bc->b - 1) / bc->b;
    ER_CHECK(new_twin(bc, n->outputs[j], sizes[j], &out[j]));
  }
  attrs[0] = er__rw_attr_int("axis", 1);
  memset(&attrs[1], 0, sizeof attrs[1]);
  attrs[1].name = "split";
  attrs[1].type = ER_ATTR_INTS;
  attrs[1].ints = blocks;
  attrs[1].n = parts;
  c.attrs = attrs;
  c.n_attrs = 2;
  c.version = 11;
  c.op = er__op_find("", "Split", 11);
  if (!c.op) return er__error(ER_STATUS_INTERNAL, "Split of opset 11 is missing");
  c.inputs = er__rw_ids(g, &in, 1);
  c.outputs = er__rw_ids(g, out, parts);
  if (!c.inputs || !c.outputs) return ER_STATUS_OUT_OF_MEMORY;
  c.n_inputs = 1;
  for (int j = 0; j < parts; j++) {
    g->values[n->outputs[j]].producer = -1;
    g->values[out[j]].producer = bc->list.n;
  }
  return er__rw_list_push(&bc->list, &c);
}

static er_status rewrite_to_nhwc(bctx *bc, const er_node *n) {
  int32_t xb = bc->twin[n->inputs[0]], y = n->outputs[0];
  er_attr extra[3] = {er__rw_attr_int("block", bc->b), er__rw_attr_int("channels", bc->chan[xb]), er__rw_attr_int("channels_last", 1)};
  ER_CHECK(emit(bc, n, "FromBlocked", &xb, 1, y, extra, 3, "perm"));
  bc->planar[y] = true;
  return ER_STATUS_OK;
}

static er_status rewrite_from_nhwc(bctx *bc, const er_node *n) {
  er_graph *g = bc->g;
  int32_t x = n->inputs[0], y = n->outputs[0], yb;
  ER_CHECK(need_planar(bc, x));
  ER_CHECK(new_twin(bc, y, g->values[x].info.dims[3], &yb));
  er_attr extra[2] = {er__rw_attr_int("block", bc->b), er__rw_attr_int("channels_last", 1)};
  ER_CHECK(emit(bc, n, "ToBlocked", &x, 1, yb, extra, 2, "perm"));
  g->values[y].producer = -1;
  return ER_STATUS_OK;
}

static er_status rewrite(bctx *bc) {
  er_graph *g = bc->g;
  int32_t n_old = g->n_nodes;
  er_node *old = malloc(((size_t)n_old + 1) * sizeof *old);
  if (!old) return ER_STATUS_OUT_OF_MEMORY;
  memcpy(old, g->nodes, (size_t)n_old * sizeof *old);
  er_status st = ER_STATUS_OK;
  for (int32_t i = 0; i < n_old && st == ER_STATUS_OK; i++) {
    const er_node *n = &old[i];
    bool depthwise;
    int64_t c, sizes[BLK_MAX_PARTS];
    int32_t tr;
    if (n->n_inputs == 1 && n->inputs[0] >= 0 && bc->reroute[n->inputs[0]] >= 0) {
      st = rewrite_head_transpose(bc, n);
    } else if (head_split_ok(bc, old, n_old, n, &tr)) {
      st = rewrite_head_split(bc, n);
    } else if (!bc->exclude[i] && conv_ok(bc, n, &depthwise) && !(bc->keep_planar && bc->keep_planar(g, i))) {
      st = rewrite_conv(bc, n, depthwise);
    } else if (!bc->exclude[i] && pool_ok(bc, n)) {
      st = rewrite_pool(bc, n);
    } else if (eltwise_ok(bc, n, &c) || concat_ok(bc, n, &c)) {
      st = rewrite_same(bc, n, c);
    } else if (bn_ok(bc, n, &c)) {
      st = rewrite_bn(bc, n, c);
    } else if (split_ok(bc, n, sizes)) {
      st = rewrite_split(bc, n, sizes);
    } else if (resize_ok(bc, n)) {
      st = rewrite_resize(bc, n);
    } else if (to_nhwc_ok(bc, n)) {
      st = rewrite_to_nhwc(bc, n);
    } else if (!bc->exclude[i] && from_nhwc_ok(bc, n)) {
      st = rewrite_from_nhwc(bc, n);
    } else {
      for (int k = 0; k < n->n_inputs && st == ER_STATUS_OK; k++) st = need_planar(bc, n->inputs[k]);
      /* Values a subgraph captures are read in planar form too. */
      if (st == ER_STATUS_OK) st = er__node_captures(g, n, need_planar_cb, bc);
      if (st != ER_STATUS_OK) break;
      for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0) {
          bc->planar[n->outputs[k]] = true;
          g->values[n->outputs[k]].producer = bc->list.n;
        }
      st = er__rw_list_push(&bc->list, n);
    }
  }
  for (int32_t k = 0; k < g->n_outputs && st == ER_STATUS_OK; k++) st = need_planar(bc, g->outputs[k]);
  free(old);
  return st;
}

/* ---- BN + activation ------------------------------------------------------------ */

/* The activation a blocked elementwise node applies, for the ones
 * BlockedBatchNormalization carries. */
static bool blocked_act_of(const er_graph *g, const er_node *n, er_activation *act) {
  memset(act, 0, sizeof *act);
  if (n->n_outputs != 1 || n->outputs[0] < 0 || n->n_inputs < 1) return false;
  if (er__rw_is(n, "Relu")) act->kind = ER_ACT_RELU;
  else if (er__rw_is(n, "HardSwish")) act->kind = ER_ACT_HARDSWISH;
  else if (er__rw_is(n, "Sigmoid")) act->kind = ER_ACT_SIGMOID;
  else if (er__rw_is(n, "LeakyRelu")) {
    const er_attr *a = er__node_attr(n, "alpha");
    act->kind = ER_ACT_LEAKYRELU;
    act->p[0] = a && a->type == ER_ATTR_FLOAT ? a->f : 0.01f;
  } else if (er__rw_is(n, "Clip") && n->version >= 11) {
    float lim[2] = {-INFINITY, INFINITY};
    for (int k = 1; k < 3 && k < n->n_inputs; k++) {
      if (n->inputs[k] < 0) continue;
      const er_tensor *t = er__graph_const(g, n->inputs[k]);
      if (!t || t->dtype != ER_DTYPE_FLOAT || er__tensor_count(t) != 1) return false;
      lim[k - 1] = ((const float *)t->data)[0];
    }
    act->kind = ER_ACT_CLIP;
    act->p[0] = lim[0];
    act->p[1] = lim[1];
  } else {
    return false;
  }
  return true;
}

/* A BlockedBatchNormalization whose output only an activation reads takes
 * that activation (DenseNet's BN + ReLU before each layer: one pass over
 * the growing Concat instead of two). Runs on the rewritten node list. */
static er_status fuse_bn_activations(bctx *bc) {
  er_graph *g = bc->g;
  int32_t *uses = calloc((size_t)g->n_values + 1, sizeof *uses), *prod = malloc(((size_t)g->n_values + 1) * sizeof *prod);
  bool *dead = calloc((size_t)bc->list.n + 1, sizeof *dead);
  er_status st = ER_STATUS_OK;
  if (!uses || !prod || !dead) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory fusing activations into blocked BatchNormalizations");
    goto done;
  }
  for (int32_t v = 0; v < g->n_values; v++) prod[v] = -1;
  for (int32_t i = 0; i < bc->list.n; i++) {
    const er_node *n = &bc->list.nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) uses[n->inputs[k]]++;
    for (int k = 0; k < n->n_outputs; k++)
      if (n->outputs[k] >= 0) prod[n->outputs[k]] = i;
    er__node_count_captures(g, n, uses, 2);
  }
  for (int32_t k = 0; k < g->n_outputs; k++) uses[g->outputs[k]] += 2;
  for (int32_t i = 0; i < bc->list.n; i++) {
    er_node *n = &bc->list.nodes[i];
    er_activation act;
    int32_t v = n->n_inputs > 0 ? n->inputs[0] : -1;
    if (v < 0 || uses[v] != 1 || prod[v] < 0 || !blocked_act_of(g, n, &act)) continue;
    er_node *p = &bc->list.nodes[prod[v]];
    if (strcmp(p->op_type, "BlockedBatchNormalization") != 0 || er__node_attr(p, "activation")) continue;
    er_attr *attrs = er__arena_array(g->arena, (size_t)p->n_attrs + 3, sizeof *attrs);
    float *params = er__arena_array(g->arena, 2, sizeof *params);
    int32_t *outs = er__arena_array(g->arena, 1, sizeof *outs);
    if (!attrs || !params || !outs) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory fusing %s into BlockedBatchNormalization '%s'", n->op_type, p->name ? p->name : "");
      goto done;
    }
    memcpy(attrs, p->attrs, (size_t)p->n_attrs * sizeof *attrs);
    attrs[p->n_attrs] = er__rw_attr_string("activation", er__act_name(act.kind));
    int np = act.kind == ER_ACT_CLIP ? 2 : act.kind == ER_ACT_LEAKYRELU ? 1 : 0;
    int na = p->n_attrs + 1;
    if (np) {
      params[0] = act.p[0];
      params[1] = act.p[1];
      memset(&attrs[na], 0, sizeof attrs[na]);
      attrs[na].name = "activation_params";
      attrs[na].type = ER_ATTR_FLOATS;
      attrs[na].floats = params;
      attrs[na].n = np;
      na++;
    }
    p->attrs = attrs;
    p->n_attrs = na;
    outs[0] = n->outputs[0];
    p->outputs = outs;
    g->values[v].producer = -1;
    dead[i] = true;
  }
  /* The list is not the graph's yet: the caller relinks once it is. */
  int32_t w = 0;
  for (int32_t i = 0; i < bc->list.n; i++)
    if (!dead[i]) bc->list.nodes[w++] = bc->list.nodes[i];
  bc->list.n = w;
done:
  free(uses);
  free(prod);
  free(dead);
  return st;
}

/* ---- islands ------------------------------------------------------------------ */

/* A converted convolution is worth its conversions when it does at least
 * this many multiply-adds per byte converted: the blocked kernels gain
 * about a fifth over the planar ones at some 75 G multiply-adds/s, and a
 * conversion moves a byte in and out at some 20 GB/s, so break-even is
 * near 40. */
#define BLK_ISLAND_MACS_PER_BYTE 64

static int64_t elems(const er_graph *g, int32_t v) {
  const er_tensor *t = &g->values[v].info;
  return er__tensor_shape_known(t) ? er__tensor_count(t) : -1;
}

/* A dry run of rewrite()'s decisions with placeholder twins: converted
 * convolutions and pools whose blocked input had to be converted and
 * whose blocked output no blocked op reads are islands, each costing two
 * conversions for one op (ShuffleNet's depthwise layers between channel
 * shuffles: 3.3 ms planar, 3.7 blocked). Islands are marked in
 * bc->exclude unless they do enough work per converted byte. Returns how
 * many were marked. */
static int mark_islands(bctx *bc, bool *native, bool *used) {
  er_graph *g = bc->g;
  int32_t next = g->n_values;
  for (int32_t v = 0; v < bc->cap; v++) bc->twin[v] = -1, native[v] = used[v] = false;
  int32_t *out_twin = malloc(((size_t)g->n_nodes + 1) * sizeof *out_twin);
  int64_t *in_bytes = calloc((size_t)g->n_nodes + 1, sizeof *in_bytes);
  bool *in_native = calloc((size_t)g->n_nodes + 1, sizeof *in_native);
  int marked = 0;
  if (!out_twin || !in_bytes || !in_native) goto done;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    out_twin[i] = -1;
    const er_node *n = &g->nodes[i];
    bool depthwise;
    int64_t c, sizes[BLK_MAX_PARTS];
    bool conv = !bc->exclude[i] && conv_ok(bc, n, &depthwise) && !(bc->keep_planar && bc->keep_planar(g, i));
    bool pool = !conv && !bc->exclude[i] && pool_ok(bc, n);
    bool same = !conv && !pool && (eltwise_ok(bc, n, &c) || concat_ok(bc, n, &c) || bn_ok(bc, n, &c));
    if (!conv && !pool && !same && split_ok(bc, n, sizes)) {
      used[bc->twin[n->inputs[0]]] = true;
      for (int j = 0; j < n->n_outputs; j++) {
        int32_t t = next++;
        bc->twin[n->outputs[j]] = t;
        bc->twin[t] = -1;
        bc->chan[t] = sizes[j];
        native[t] = true;
      }
      continue;
    }
    if (!conv && !pool && !same && resize_ok(bc, n)) {
      used[bc->twin[n->inputs[0]]] = true;
      int32_t t = next++;
      bc->twin[n->outputs[0]] = t;
      bc->twin[t] = -1;
      bc->chan[t] = bc->chan[bc->twin[n->inputs[0]]];
      native[t] = true;
      continue;
    }
    if (!conv && !pool && !same && to_nhwc_ok(bc, n)) {
      used[bc->twin[n->inputs[0]]] = true;   /* the conversion replaces the Transpose */
      continue;
    }
    if (!conv && !pool && !same && !bc->exclude[i] && from_nhwc_ok(bc, n)) {
      int32_t t = next++;
      bc->twin[n->outputs[0]] = t;
      bc->twin[t] = -1;
      bc->chan[t] = g->values[n->inputs[0]].info.dims[3];
      native[t] = true;
      out_twin[i] = t;   /* an island, left a Transpose, unless a blocked op reads it */
      continue;
    }
    if (!conv && !pool && !same) continue;
    for (int k = 0; k < n->n_inputs; k++) {
      int32_t v = n->inputs[k], t;
      if (v < 0 || (conv && k == 1) || (conv && k == 2)) continue;
      if (bc->twin[v] >= 0) {
        used[bc->twin[v]] = true;
        if (k == 0) in_native[i] = native[bc->twin[v]];
        continue;
      }
      if (conv && k == 0 && !depthwise) continue;   /* read planar in place */
      if (!conv || (k != 0 && k != 3)) continue;
      /* A ToBlocked would be made. */
      t = next++;
      bc->twin[v] = t;
      bc->twin[t] = -1;
      bc->chan[t] = channels_of(g, v);
      int64_t e = elems(g, v);
      in_bytes[i] += e > 0 ? 4 * e : 0;
    }
    int32_t y = n->outputs[0], t = next++;
    bc->twin[y] = t;
    bc->twin[t] = -1;
    bc->chan[t] = conv ? er__graph_const(g, n->inputs[1])->dims[0] : pool ? bc->chan[bc->twin[n->inputs[0]]] : c;
    native[t] = true;
    if (conv || pool) out_twin[i] = t;
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (out_twin[i] < 0 || used[out_twin[i]] || in_native[i]) continue;
    const er_node *n = &g->nodes[i];
    bool keep = false;
    int64_t oe = elems(g, n->outputs[0]);
    const er_tensor *w = n->n_inputs > 1 ? er__graph_const(g, n->inputs[1]) : NULL;
    if (w && w->rank == 4 && oe > 0 && !er__rw_is(n, "MaxPool") && !er__rw_is(n, "AveragePool")) {
      int64_t macs = oe * w->dims[1] * w->dims[2] * w->dims[3];
      keep = macs >= BLK_ISLAND_MACS_PER_BYTE * (in_bytes[i] + 4 * oe);
    }
    if (!keep) {
      bc->exclude[i] = true;
      marked++;
    }
  }
done:
  free(out_twin);
  free(in_bytes);
  free(in_native);
  for (int32_t v = 0; v < bc->cap; v++) bc->twin[v] = -1;
  return marked;
}

er_status er__graph_block_layout(er_graph *g, int block, er_keep_planar_fn keep_planar, int *blocked_out) {
  if (blocked_out) *blocked_out = 0;
  if (block < 2 || g->n_nodes == 0) return ER_STATUS_OK;
  bctx bc;
  memset(&bc, 0, sizeof bc);
  bc.g = g;
  er__rw_list_init(&bc.list, g);
  bc.b = block;
  bc.keep_planar = keep_planar;
  /* Each node adds at most three values (its twin, a converted input and
   * a converted residual), a Split one twin per output. */
  bc.cap = g->n_values + 16;
  for (int32_t i = 0; i < g->n_nodes; i++) bc.cap += 3 + g->nodes[i].n_outputs;
  bc.twin = malloc((size_t)bc.cap * sizeof *bc.twin);
  bc.chan = calloc((size_t)bc.cap, sizeof *bc.chan);
  bc.planar = calloc((size_t)bc.cap, sizeof *bc.planar);
  bc.reroute = malloc((size_t)bc.cap * sizeof *bc.reroute);
  er_status st = ER_STATUS_OK;
  if (!bc.twin || !bc.chan || !bc.planar || !bc.reroute) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory in the layout pass over graph '%s'", g->name);
    goto done;
  }
  for (int32_t v = 0; v < bc.cap; v++) bc.twin[v] = bc.reroute[v] = -1;
  bc.exclude = calloc((size_t)g->n_nodes + 1, sizeof *bc.exclude);
  bool *native = calloc((size_t)bc.cap, sizeof *native), *used = calloc((size_t)bc.cap, sizeof *used);
  if (!bc.exclude || !native || !used) {
    free(native);
    free(used);
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory in the layout pass over graph '%s'", g->name);
    goto done;
  }
  /* Leaving an island planar can make its neighbours islands: a few
   * rounds to a fixed point. */
  for (int round = 0; round < 4 && mark_islands(&bc, native, used) > 0; round++) {
  }
  free(native);
  free(used);
  for (int32_t v = 0; v < g->n_values; v++) bc.planar[v] = g->values[v].kind != ER_VALUE_INTERMEDIATE;
  st = rewrite(&bc);
  if (st == ER_STATUS_OK && bc.blocked_ops == 0) goto done;  /* nothing changed worth keeping */
  if (st == ER_STATUS_OK) st = fuse_bn_activations(&bc);
  if (st == ER_STATUS_OK) {
    er__rw_list_commit(&bc.list);
    /* The list is built in order (conversions just before their first
     * reader); validate re-derives the order, then every value's type and
     * shape is computed once more. */
    st = er__graph_validate(g);
    if (st == ER_STATUS_OK) st = er__graph_infer(g, false);
  }
  if (blocked_out && st == ER_STATUS_OK) *blocked_out = bc.blocked_ops;
done:
  free(bc.twin);
  free(bc.reroute);
  free(bc.chan);
  free(bc.planar);
  free(bc.exclude);
  if (st != ER_STATUS_OK) er__error_prefix("layout pass over graph '%s'", g->name);
  return st;
}
