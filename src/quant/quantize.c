/* quantize.c - the post-training quantizer: plan, calibrate, emit QDQ,
 * keep-float sensitivity search, and measurement. See quantize.h for the
 * pipeline; the sections below follow it. */
#define _GNU_SOURCE
#include "quant/quantize.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "onnx/onnx-write.h"
#include "quant/prepare.h"
#include "quant/qgraph.h"
#include "runtime/runtime.h"

/* Held-out samples for keep-float auto when no evaluation data is given:
 * a fifth of the calibration set, at most this many. */
#define ER_QUANT_MAX_HOLDOUT 32

/* ======================================================================== */
/* Options                                                                   */
/* ======================================================================== */

void er__quant_options_init(er_quant_options *o) {
  memset(o, 0, sizeof *o);
  o->weights = ER_QW_INT8;
  o->per_channel = true;
  o->block_size = 32;
  o->activations = ER_QA_UINT8;
  o->method = ER_CALIB_MINMAX;
  o->percentile = 99.999;
  o->fold = true;
  o->bias_correction = true;
  o->threads = 1;
  er__qdata_options_init(&o->data);
}

bool er__quant_parse_budget(const char *text, double *budget, er_qbudget *kind, bool *percent) {
  if (!text || strncmp(text, "auto:", 5) != 0) return false;
  const char *s = text + 5;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || !(v >= 0) || !isfinite(v)) return false;
  *percent = false;
  *kind = ER_QBUDGET_REL_ERROR;
  if (strcasecmp(end, "dB") == 0) {
    *kind = ER_QBUDGET_SQNR_DB;
  } else if (strcmp(end, "%") == 0) {
    *percent = true;
  } else if (*end) {
    return false;
  }
  *budget = v;
  return true;
}

/* True when `name` is in the comma-separated `list`. */
static bool in_list(const char *list, const char *name) {
  if (!list || !name) return false;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

/* The axis --channel-axis gives op_type, or INT_MIN when none. */
static er_status axis_override(const char *spec, const char *op_type, int *axis) {
  *axis = INT_MIN;
  if (!spec) return ER_STATUS_OK;
  for (const char *p = spec; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char item[128];
    if (len >= sizeof item) return er__error(ER_STATUS_INVALID_ARGUMENT, "--channel-axis item is too long");
    memcpy(item, p, len);
    item[len] = '\0';
    char *eq = strchr(item, '=');
    char *end = NULL;
    long v = eq ? strtol(eq + 1, &end, 10) : 0;
    if (!eq || end == eq + 1 || *end || v < -ER_MAX_RANK || v >= ER_MAX_RANK)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "--channel-axis item '%s' is not OP=AXIS with an axis in "
                       "[%d, %d]", item, -ER_MAX_RANK, ER_MAX_RANK - 1);
    *eq = '\0';
    if (strcmp(item, op_type) == 0) *axis = (int)v;
    if (!e) break;
    p = e + 1;
  }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The plan                                                                  */
/* ======================================================================== */

/* A node the quantizer considers. Input positions refer to the node. */
typedef struct qcand {
  int32_t node;                 /* index in the prepared graph */
  const char *name, *op;
  int act[2], n_act;            /* activation inputs to quantize */
  int w, b;                     /* weight and bias inputs, -1 = none */
  int w_axis;                   /* per-channel axis, -1 = per-tensor */
  bool natural_axis;            /* w_axis is the output-channel axis */
  bool int4;                    /* block-wise int4 weight */
  int block_axis;               /* int4: the K axis */
  const char *why_float;        /* set: never quantized, and why */
} qcand;

/* An activation tensor to quantize. */
typedef struct qten {
  int32_t value;                /* id in the prepared graph */
  const char *name;
  er_qstat st;
  double lo, hi;
  float scale;
  int32_t zp;
  /* Per-channel means for bias correction: sums along ch_axis (the axis
   * the first quantized reader contracts: 1 for Conv's NCHW input and
   * Gemm's A). ch_n < 0 when shapes varied between samples. */
  int ch_axis;                  /* -1 = not collected */
  int64_t ch_n;                 /* channels; 0 = not seen yet */
  double *ch_sum;               /* [ch_n] */
  uint64_t ch_count;            /* elements summed per channel */
} qten;

typedef struct qplan {
  er_quant_options o;
  struct er_model *mf;          /* the prepared float model */
  uint8_t *prep;                /* its bytes */
  size_t prep_len;
  qcand *c;
  size_t n_c;
  qten *t;
  size_t n_t;
  int32_t *t_of;                /* [n_values] value id -> qten, -1 */
  er_dtype act_dtype;           /* uint8 / int8; UNDEFINED = float */
  /* Graph outputs a quantized layer produces are calibrated too; build()
   * puts Q -> DQ on those out_qdq selects (chosen by measuring, see
   * choose_outputs). */
  size_t n_out_t;
  bool *out_qdq;                /* [n_values] Q -> DQ on this graph output */
} qplan;

static bool is_op(const er_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }
static char *layer_name(const qcand *c);

static bool is_const(const er_graph *g, int32_t id) {
  if (id < 0) return false;
  const er_value *v = &g->values[id];
  return v->kind == ER_VALUE_CONSTANT && v->constant && (!v->is_graph_input || g->model->ir_version < 4);
}

static bool is_float_const(const er_graph *g, int32_t id) {
  return is_const(g, id) && g->values[id].constant->dtype == ER_DTYPE_FLOAT;
}

static er_status add_tensor(qplan *p, int32_t value) {
  if (p->t_of[value] >= 0) return ER_STATUS_OK;
  qten *n = realloc(p->t, (p->n_t + 1) * sizeof *n);
  if (!n) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory planning quantization");
  p->t = n;
  qten *t = &p->t[p->n_t];
  memset(t, 0, sizeof *t);
  t->value = value;
  t->name = p->mf->graph->values[value].name;
  bool hist = p->o.method != ER_CALIB_MINMAX;
  t->ch_axis = -1;
  ER_CHECK(er__qstat_init(&t->st, hist));
  p->t_of[value] = (int32_t)p->n_t++;
  return ER_STATUS_OK;
}

/* Adds a tensor's per-channel sums along t->ch_axis. */
static er_status add_channel_sums(qten *t, const er_tensor *x) {
  if (t->ch_axis < 0 || t->ch_n < 0) return ER_STATUS_OK;
  if (x->rank <= t->ch_axis) {
    t->ch_n = -1;
    return ER_STATUS_OK;
  }
  int64_t C = x->dims[t->ch_axis], outer = 1, inner = 1;
  for (int d = 0; d < t->ch_axis; d++) outer *= x->dims[d];
  for (int d = t->ch_axis + 1; d < x->rank; d++) inner *= x->dims[d];
  if (t->ch_n == 0) {
    t->ch_sum = calloc((size_t)(C > 0 ? C : 1), sizeof *t->ch_sum);
    if (!t->ch_sum) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory calibrating");
    t->ch_n = C;
  } else if (t->ch_n != C) {
    t->ch_n = -1;  /* channel count varies: no correction */
    return ER_STATUS_OK;
  }
  const float *v = x->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < C; c++) {
      double sum = 0;
      const float *row = v + (o * C + c) * inner;
      for (int64_t i = 0; i < inner; i++) sum += row[i];
      t->ch_sum[c] += sum;
    }
  t->ch_count += (uint64_t)(outer * inner);
  return ER_STATUS_OK;
}

/* Fills a candidate for node i, or leaves c->why_float set. */
static er_status plan_node(qplan *p, int32_t i, qcand *c) {
  const er_graph *g = p->mf->graph;
  const er_node *n = &g->nodes[i];
  memset(c, 0, sizeof *c);
  c->node = i;
  c->name = n->name;
  c->op = n->op_type;
  c->w = c->b = -1;
  c->w_axis = -1;
  bool conv = is_op(n, "Conv"), convt = is_op(n, "ConvTranspose"), mm = is_op(n, "MatMul"), gemm = is_op(n, "Gemm");
  if (in_list(p->o.exclude_ops, n->op_type)) {
    c->why_float = "excluded by --exclude-op";
    return ER_STATUS_OK;
  }
  if (n->name[0] && in_list(p->o.exclude_nodes, n->name)) {
    c->why_float = "excluded by --exclude-node";
    return ER_STATUS_OK;
  }
  for (int k = 0; k < 2 && k < n->n_inputs; k++) {
    int32_t id = n->inputs[k];
    bool is_weight_pos = k == 1;
    if (id < 0) continue;
    if (is_float_const(g, id)) {
      if (!is_weight_pos) {
        c->why_float = "its first input is a constant";
        return ER_STATUS_OK;
      }
      c->w = 1;
      continue;
    }
    if ((conv || convt) && is_weight_pos) {
      c->why_float = "its weight is not a float constant";
      return ER_STATUS_OK;
    }
    if (g->values[id].info.dtype != ER_DTYPE_FLOAT) {
      c->why_float = "an input is not float32";
      return ER_STATUS_OK;
    }
    /* Weight-only mode leaves activations in float. */
    if (p->act_dtype != ER_DTYPE_UNDEFINED) c->act[c->n_act++] = k;
  }
  if (p->act_dtype == ER_DTYPE_UNDEFINED && c->w < 0) {
    c->why_float = "it has no constant weight (weight-only mode)";
    return ER_STATUS_OK;
  }
  if (c->w >= 0) {
    const er_tensor *W = g->values[n->inputs[c->w]].constant;
    int rank = W->rank;
    int natural = conv ? 0 : convt ? 1 : mm ? rank - 1 : 1;
    if (gemm) {
      const er_attr *tb = er__node_attr(n, "transB");
      natural = tb && tb->i ? 0 : 1;
    }
    if (convt) {
      const er_attr *grp = er__node_attr(n, "group");
      if (grp && grp->i != 1) natural = -1;  /* axis 1 spans one group */
    }
    if (rank < 2 && !conv && !convt) natural = -1;
    if (p->o.weights == ER_QW_INT4 && (mm || gemm) && rank == 2) {
      c->int4 = true;
      c->block_axis = natural == 1 ? 0 : 1;  /* K: the other axis */
      c->w_axis = natural;
      c->natural_axis = false;               /* blocks, not channels */
    } else if (p->o.per_channel) {
      int ov;
      ER_CHECK(axis_override(p->o.channel_axis, n->op_type, &ov));
      if (ov != INT_MIN) {
        if (ov < -rank || ov >= rank)
          return er__error(ER_STATUS_INVALID_ARGUMENT,
                           "--channel-axis %s=%d is outside [%d, %d] for weight '%s' (shape rank %d) of %s "
                           "node '%s'", n->op_type, ov, -rank, rank - 1, g->values[n->inputs[c->w]].name, rank,
                           n->op_type, n->name);
        c->w_axis = ov < 0 ? ov + rank : ov;
      } else {
        c->w_axis = natural;
      }
      c->natural_axis = c->w_axis == natural && natural >= 0;
    } else {
      c->w_axis = -1;
      c->natural_axis = true;
    }
    /* int32 bias: 1-D with one value per output channel. */
    if ((conv || convt || gemm) && n->n_inputs > 2 && is_float_const(g, n->inputs[2]) && c->n_act == 1 &&
        !c->int4 && (c->natural_axis || c->w_axis < 0)) {
      const er_tensor *B = g->values[n->inputs[2]].constant;
      int64_t M = natural >= 0 ? W->dims[natural] : -1;
      bool ok = (B->rank == 1 && B->dims[0] == M) || (gemm && B->rank == 2 && B->dims[0] == 1 && B->dims[1] == M);
      if (ok) c->b = 2;
    }
  } else if (c->n_act < 2 && (mm || gemm)) {
    c->why_float = "it has neither a constant weight nor two float inputs";
    return ER_STATUS_OK;
  } else if (!mm && !gemm) {
    c->why_float = "its weight is not a float constant";
  }
  return ER_STATUS_OK;
}

static er_status make_plan(qplan *p) {
  const er_graph *g = p->mf->graph;
  p->t_of = malloc(((size_t)g->n_values + 1) * sizeof *p->t_of);
  if (!p->t_of) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory planning quantization");
  for (int32_t v = 0; v < g->n_values; v++) p->t_of[v] = -1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    if (!(is_op(n, "Conv") || is_op(n, "ConvTranspose") || is_op(n, "MatMul") || is_op(n, "Gemm"))) continue;
    qcand *nc = realloc(p->c, (p->n_c + 1) * sizeof *nc);
    if (!nc) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory planning quantization");
    p->c = nc;
    qcand *c = &p->c[p->n_c++];
    ER_CHECK(plan_node(p, i, c));
    if (c->why_float) continue;
    for (int a = 0; a < c->n_act; a++) ER_CHECK(add_tensor(p, n->inputs[c->act[a]]));
    /* Bias correction needs the mean of the input each weight multiplies. */
    if (c->w >= 0 && c->n_act == 1 && c->act[0] == 0 && !is_op(n, "MatMul") && !is_op(n, "ConvTranspose")) {
      qten *t = &p->t[p->t_of[n->inputs[0]]];
      const er_attr *ta = er__node_attr(n, "transA");
      int axis = is_op(n, "Gemm") && ta && ta->i ? 0 : 1;
      if (t->ch_axis < 0) t->ch_axis = axis;
    }
  }
  /* Graph outputs of quantizable layers (not in weight-only mode). */
  if (p->act_dtype != ER_DTYPE_UNDEFINED)
    for (size_t i = 0; i < p->n_c; i++) {
      const qcand *c = &p->c[i];
      if (c->why_float) continue;
      const er_node *n = &g->nodes[c->node];
      for (int k = 0; k < n->n_outputs; k++) {
        int32_t v = n->outputs[k];
        if (v < 0 || !g->values[v].is_graph_output || g->values[v].info.dtype != ER_DTYPE_FLOAT || p->t_of[v] >= 0)
          continue;
        ER_CHECK(add_tensor(p, v));
        p->n_out_t++;
      }
    }
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Calibration                                                               */
/* ======================================================================== */

typedef struct calib_state {
  qplan *p;
} calib_state;

static er_status calib_observe(void *user, const er_graph *g, int32_t node_index, er_tensor *const *outs,
                               int n_outs) {
  calib_state *cs = user;
  qplan *p = cs->p;
  if (g != p->mf->graph) return ER_STATUS_OK;
  const er_node *node = &g->nodes[node_index];
  for (int k = 0; k < n_outs; k++) {
    int32_t id = node->outputs[k];
    if (id < 0 || !outs[k] || p->t_of[id] < 0) continue;
    qten *t = &p->t[p->t_of[id]];
    if (outs[k]->dtype != ER_DTYPE_FLOAT)
      return er__error(ER_STATUS_TYPE_MISMATCH, "tensor '%s' is %s at run time, not float32", t->name,
                       er_dtype_name(outs[k]->dtype));
    ER_CHECK(er__qstat_add(&t->st, outs[k]->data, er__tensor_count(outs[k]), t->name));
    if (p->o.bias_correction) ER_CHECK(add_channel_sums(t, outs[k]));
  }
  return ER_STATUS_OK;
}

static er_status calibrate(qplan *p, er_qdata *data, int64_t *samples_out) {
  er_session *s = NULL;
  er_session_options so;
  er_session_options_init(&so);
  so.threads = p->o.threads;
  so.force_reference = true;  /* every intermediate must be observable */
  ER_CHECK(er_session_create(p->mf, &so, &s));
  size_t n_out = er_model_output_count(p->mf);
  er_tensor **outs = calloc(n_out + 1, sizeof *outs);
  calib_state cs = {p};
  er_status st = outs ? ER_STATUS_OK : er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory calibrating");
  int64_t done = 0, total = er__qdata_samples(data);
  er__qdata_rewind(data);
  while (st == ER_STATUS_OK) {
    er_named_tensor in[ER_QDATA_MAX_INPUTS];
    int64_t nb;
    st = er__qdata_next(data, in, &nb);
    if (st != ER_STATUS_OK || nb == 0) break;
    size_t n_in = er__qdata_input_count(data);
    /* Graph inputs that are quantized get their statistics here. */
    for (size_t k = 0; k < n_in && st == ER_STATUS_OK; k++) {
      int32_t id = er__graph_find(p->mf->graph, in[k].name);
      if (id >= 0 && p->t_of[id] >= 0) {
        const er_tensor *t = in[k].tensor;
        if (t->dtype == ER_DTYPE_FLOAT)
          st = er__qstat_add(&p->t[p->t_of[id]].st, t->data, er__tensor_count(t), in[k].name);
        if (st == ER_STATUS_OK && t->dtype == ER_DTYPE_FLOAT && p->o.bias_correction)
          st = add_channel_sums(&p->t[p->t_of[id]], t);
      }
    }
    if (st == ER_STATUS_OK)
      st = er__session_run_observed(s, in, n_in, NULL, n_out, outs, calib_observe, &cs);
    for (size_t k = 0; k < n_out; k++) {
      er_tensor_free(outs[k]);
      outs[k] = NULL;
    }
    done += nb;
    if (p->o.progress) er__progress("calibrating", done, total);
  }
  free(outs);
  er_session_free(s);
  *samples_out = done;
  return st;
}

/* Scale and zero point of every calibrated tensor. */
static void compute_params(qplan *p) {
  bool sym = p->o.symmetric, u8 = p->act_dtype == ER_DTYPE_UINT8;
  for (size_t i = 0; i < p->n_t; i++) {
    qten *t = &p->t[i];
    er__qstat_range(&t->st, p->o.method, p->o.percentile, sym, 255, &t->lo, &t->hi);
    double scale, zp;
    if (sym) {
      double amax = fmax(fabs(t->lo), fabs(t->hi));
      scale = amax / 127.0;
      zp = u8 ? 128 : 0;
    } else {
      scale = (t->hi - t->lo) / 255.0;
      double qmin = u8 ? 0 : -128;
      zp = scale > 0 ? nearbyint(qmin - t->lo / scale) : qmin;
      if (zp < qmin) zp = qmin;
      if (zp > qmin + 255) zp = qmin + 255;
    }
    /* A range of (nearly) nothing: any scale represents it; 1 keeps
     * QuantizeLinear's division finite. */
    if (!(scale >= 1e-30)) scale = 1.0;
    t->scale = (float)scale;
    t->zp = (int32_t)zp;
  }
}

/* ======================================================================== */
/* Weight quantization                                                       */
/* ======================================================================== */

static er_status check_finite(const er_tensor *W, const char *name, const char *node_op, const char *node) {
  const float *w = W->data;
  int64_t n = er__tensor_count(W);
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(w[i]))
      return er__error(ER_STATUS_INVALID_TENSOR,
                       "weight '%s' of %s node '%s' holds %s at element %lld; it cannot be quantized", name,
                       node_op, node, isnan(w[i]) ? "NaN" : "infinity", (long long)i);
  return ER_STATUS_OK;
}

/* Symmetric int8 weight quantization along `axis` (-1 = one scale).
 * scales[ch] receives the scale of each of *n_ch channels; *sqnr the
 * weight quantization SQNR. */
static er_status quant_int8(const er_tensor *W, int axis, int qmax, er_tensor *q, float **scales_out,
                            int64_t *n_ch, double *sqnr) {
  int64_t outer = 1, C = 1, inner = 1;
  if (axis >= 0) {
    for (int d = 0; d < axis; d++) outer *= W->dims[d];
    C = W->dims[axis];
    for (int d = axis + 1; d < W->rank; d++) inner *= W->dims[d];
  } else {
    inner = er__tensor_count(W);
  }
  float *scales = malloc((size_t)(C > 0 ? C : 1) * sizeof *scales);
  if (!scales) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing weights");
  const float *w = W->data;
  for (int64_t c = 0; c < C; c++) {
    double amax = 0;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) amax = fmax(amax, fabs(w[(o * C + c) * inner + i]));
    /* int8 symmetric uses [-127, 127] so that -x quantizes like x
     * ([-64, 64] with reduce_range: CPUs without VNNI then multiply
     * exactly with vpmaddubsw). An all-zero channel gets scale 1 (every
     * value is exactly 0). */
    float s = (float)(amax / qmax);
    scales[c] = s >= FLT_MIN ? s : 1.0f;
  }
  er__tensor_set(q, ER_DTYPE_INT8, W->rank, W->dims);
  er_status st = er__tensor_alloc(q, 0);
  if (st != ER_STATUS_OK) {
    free(scales);
    return st;
  }
  int8_t *qd = q->data;
  double sw = 0, se = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t at = (o * C + c) * inner + i;
        double v = nearbyint((double)w[at] / scales[c]);
        if (v > qmax) v = qmax;
        if (v < -qmax) v = -qmax;
        qd[at] = (int8_t)v;
        double e = (double)w[at] - v * scales[c];
        sw += (double)w[at] * w[at];
        se += e * e;
      }
  *scales_out = scales;
  *n_ch = C;
  *sqnr = se == 0 ? INFINITY : sw == 0 ? -INFINITY : 10 * log10(sw / se);
  return ER_STATUS_OK;
}

/* Block-wise symmetric int4 of a 2-D weight: blocks of `bs` along
 * block_axis (K), one scale per block and column. Values use [-7, 7], so a
 * weight's error is at most half its block's scale (max |w| / 14). */
static er_status quant_int4(const er_tensor *W, int block_axis, int bs, er_tensor *q, er_tensor *scale_t,
                            double *sqnr, double *smin, double *smax) {
  int64_t K = W->dims[block_axis], N = W->dims[1 - block_axis], nb = (K + bs - 1) / bs;
  int64_t sdims[2];
  sdims[block_axis] = nb;
  sdims[1 - block_axis] = N;
  er__tensor_set(scale_t, ER_DTYPE_FLOAT, 2, sdims);
  ER_CHECK(er__tensor_alloc(scale_t, 0));
  er__tensor_set(q, ER_DTYPE_INT4, 2, W->dims);
  er_status st = er__tensor_alloc(q, 0);
  if (st != ER_STATUS_OK) {
    er__tensor_release(scale_t);
    return st;
  }
  const float *w = W->data;
  float *s = scale_t->data;
  int8_t *qd = q->data;
  double sw = 0, se = 0;
  *smin = INFINITY;
  *smax = 0;
  /* Element (k, n) lives at k * N + n when K is axis 0, else n * K + k. */
  for (int64_t n = 0; n < N; n++)
    for (int64_t b = 0; b < nb; b++) {
      int64_t k0 = b * bs, k1 = k0 + bs < K ? k0 + bs : K;
      double amax = 0;
      for (int64_t k = k0; k < k1; k++) {
        int64_t at = block_axis == 0 ? k * N + n : n * K + k;
        amax = fmax(amax, fabs(w[at]));
      }
      float sc = (float)(amax / 7.0);
      if (!(sc >= FLT_MIN)) sc = 1.0f;
      s[block_axis == 0 ? b * N + n : n * nb + b] = sc;
      if (sc < *smin) *smin = sc;
      if (sc > *smax) *smax = sc;
      for (int64_t k = k0; k < k1; k++) {
        int64_t at = block_axis == 0 ? k * N + n : n * K + k;
        double v = nearbyint((double)w[at] / sc);
        if (v > 7) v = 7;
        if (v < -7) v = -7;
        qd[at] = (int8_t)v;
        double e = (double)w[at] - v * sc;
        sw += (double)w[at] * w[at];
        se += e * e;
      }
    }
  *sqnr = se == 0 ? INFINITY : sw == 0 ? -INFINITY : 10 * log10(sw / se);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Emitting the QDQ model                                                    */
/* ======================================================================== */

/* A quantized weight: where its values and scales are, so bias work can
 * dequantize it. Pointers are borrowed from the model being built. */
typedef struct wquant {
  const er_tensor *w;           /* the float weight */
  const er_tensor *q;           /* int8 or int4 values, W's shape */
  const float *scales;          /* int8: [n_ch] per channel (1 = tensor) */
  int64_t n_ch;
  int axis;                     /* int8 per-channel axis, -1 = tensor */
  const er_tensor *blocks;      /* int4: the block scale tensor */
  int block_axis, block_size;
} wquant;

typedef struct wcache {
  int32_t value, axis;
  bool int4;
  int32_t dq;                   /* DQ output id */
  wquant wq;
} wcache;

typedef struct emit_state {
  qplan *p;
  er_qbuild b;
  er_graph *g;
  int32_t *dq_of;               /* [n_values] activation DQ outputs, -1 */
  wcache *wc;
  size_t n_wc;
  float **owned_scales;
  size_t n_owned;
  er_qreport *rep;              /* fill layer details when not NULL */
} emit_state;

static er_status own_scales(emit_state *e, float *s) {
  float **n = realloc(e->owned_scales, (e->n_owned + 1) * sizeof *n);
  if (!n) {
    free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing");
  }
  e->owned_scales = n;
  e->owned_scales[e->n_owned++] = s;
  return ER_STATUS_OK;
}

/* A new node's name: its output value's name without "_Output". Value
 * names are unique, so these are too (a weight shared by two layers gets
 * one DequantizeLinear; a bias shared by two gets one per layer). */
static void node_name(const er_graph *g, int32_t out, char *buf, size_t size) {
  snprintf(buf, size, "%s", g->values[out].name);
  char *tail = strstr(buf, "_Output");
  if (tail && (tail[7] == '\0' || tail[7] == '_')) memmove(tail, tail + 7, strlen(tail + 7) + 1);
}

/* Q -> DQ after tensor `v` (calibrated qten t). */
static er_status emit_qdq(emit_state *e, int32_t v, const qten *t) {
  er_qbuild *b = &e->b;
  const char *name = e->g->values[v].name;
  double s = t->scale, z = t->zp;
  int32_t sid, zid, qid, did;
  ER_CHECK(er__qb_constant_vec(b, name, "_scale", ER_DTYPE_FLOAT, 0, 1, &s, &sid));
  ER_CHECK(er__qb_constant_vec(b, name, "_zero_point", e->p->act_dtype, 0, 1, &z, &zid));
  ER_CHECK(er__qb_value(b, name, "_QuantizeLinear_Output", &qid));
  ER_CHECK(er__qb_value(b, name, "_DequantizeLinear_Output", &did));
  char nm[512];
  int32_t qin[3] = {v, sid, zid}, din[3] = {qid, sid, zid};
  node_name(e->g, qid, nm, sizeof nm);
  ER_CHECK(er__qb_node(b, "QuantizeLinear", nm, qin, 3, &qid, 1, NULL, 0));
  node_name(e->g, did, nm, sizeof nm);
  ER_CHECK(er__qb_node(b, "DequantizeLinear", nm, din, 3, &did, 1, NULL, 0));
  e->dq_of[v] = did;
  return ER_STATUS_OK;
}

/* Q -> DQ from `src` into the existing value `dst` (a graph output the
 * layer produced before; the layer now writes src). */
static er_status emit_qdq_into(emit_state *e, int32_t src, int32_t dst, const qten *t) {
  er_qbuild *b = &e->b;
  const char *name = e->g->values[dst].name;
  double s = t->scale, z = t->zp;
  int32_t sid, zid, qid;
  ER_CHECK(er__qb_constant_vec(b, name, "_scale", ER_DTYPE_FLOAT, 0, 1, &s, &sid));
  ER_CHECK(er__qb_constant_vec(b, name, "_zero_point", e->p->act_dtype, 0, 1, &z, &zid));
  ER_CHECK(er__qb_value(b, name, "_QuantizeLinear_Output", &qid));
  char nm[512];
  int32_t qin[3] = {src, sid, zid}, din[3] = {qid, sid, zid};
  node_name(e->g, qid, nm, sizeof nm);
  ER_CHECK(er__qb_node(b, "QuantizeLinear", nm, qin, 3, &qid, 1, NULL, 0));
  snprintf(nm, sizeof nm, "%s_DequantizeLinear", name);
  return er__qb_node(b, "DequantizeLinear", nm, din, 3, &dst, 1, NULL, 0);
}

static er_qreport_layer *rep_layer(emit_state *e, const qcand *c) {
  return e->rep ? &e->rep->layers[c - e->p->c] : NULL;
}

/* The DQ output standing for weight input c->w of node n. */
static er_status emit_weight(emit_state *e, const er_node *n, const qcand *c, int32_t *dq_out, wquant *wq) {
  er_qbuild *b = &e->b;
  int32_t wv = n->inputs[c->w];
  int axis = c->int4 ? c->block_axis : c->w_axis;
  for (size_t i = 0; i < e->n_wc; i++)
    if (e->wc[i].value == wv && e->wc[i].axis == axis && e->wc[i].int4 == c->int4) {
      *dq_out = e->wc[i].dq;
      *wq = e->wc[i].wq;
      return ER_STATUS_OK;
    }
  const er_value *val = &e->g->values[wv];
  const er_tensor *W = val->constant;
  ER_CHECK(check_finite(W, val->name, n->op_type, n->name));
  er_qreport_layer *L = rep_layer(e, c);
  er_tensor q, sc;
  int32_t qid, sid, zid = -1, did;
  float *ch_scales = NULL;
  int64_t C = 1;
  double sqnr = NAN, smin = 0, smax = 0;
  er_attr attrs[2];
  int n_attrs = 0;
  char scheme[96];
  if (c->int4) {
    ER_CHECK(quant_int4(W, c->block_axis, e->p->o.block_size, &q, &sc, &sqnr, &smin, &smax));
    C = er__tensor_count(&sc);
    ER_CHECK(er__qb_constant(b, val->name, "_quantized", &q, &qid));
    ER_CHECK(er__qb_constant(b, val->name, "_scale", &sc, &sid));
    *wq = (wquant){W, e->g->values[qid].constant, NULL, C, -1, e->g->values[sid].constant, c->block_axis,
                   e->p->o.block_size};
    attrs[n_attrs++] = er__qb_attr_int("axis", c->block_axis);
    attrs[n_attrs++] = er__qb_attr_int("block_size", e->p->o.block_size);
    snprintf(scheme, sizeof scheme, "int4 symmetric, blocks of %d along axis %d", e->p->o.block_size,
             c->block_axis);
  } else {
    ER_CHECK(quant_int8(W, c->w_axis, e->p->o.reduce_range ? 64 : 127, &q, &ch_scales, &C, &sqnr));
    ER_CHECK(own_scales(e, ch_scales));
    smin = INFINITY;
    smax = 0;
    double *sv = malloc((size_t)C * sizeof *sv);
    if (!sv) {
      er__tensor_release(&q);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing weights");
    }
    for (int64_t i = 0; i < C; i++) {
      sv[i] = ch_scales[i];
      smin = fmin(smin, sv[i]);
      smax = fmax(smax, sv[i]);
    }
    /* Symmetric weights have zero points of 0, which is what an omitted
     * zero point means; leaving it out saves a tensor per weight. */
    er_status st = er__qb_constant(b, val->name, "_quantized", &q, &qid);
    if (st == ER_STATUS_OK)
      st = er__qb_constant_vec(b, val->name, "_scale", ER_DTYPE_FLOAT, c->w_axis >= 0 ? 1 : 0, C, sv, &sid);
    free(sv);
    ER_CHECK(st);
    *wq = (wquant){W, e->g->values[qid].constant, ch_scales, C, c->w_axis, NULL, 0, 0};
    if (c->w_axis >= 0) {
      attrs[n_attrs++] = er__qb_attr_int("axis", c->w_axis);
      snprintf(scheme, sizeof scheme, "int8%s symmetric per-channel (axis %d)",
               e->p->o.reduce_range ? " (7-bit range)" : "", c->w_axis);
    } else {
      snprintf(scheme, sizeof scheme, "int8%s symmetric per-tensor", e->p->o.reduce_range ? " (7-bit range)" : "");
    }
  }
  ER_CHECK(er__qb_value(b, val->name, "_DequantizeLinear_Output", &did));
  int32_t din[3] = {qid, sid, zid};
  char nm[512];
  node_name(e->g, did, nm, sizeof nm);
  ER_CHECK(er__qb_node(b, "DequantizeLinear", nm, din, zid >= 0 ? 3 : 2, &did, 1, attrs, n_attrs));
  wcache *nw = realloc(e->wc, (e->n_wc + 1) * sizeof *nw);
  if (!nw) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing");
  e->wc = nw;
  e->wc[e->n_wc++] = (wcache){wv, axis, c->int4, did, *wq};
  if (L) {
    free(L->weight);
    free(L->scheme);
    L->weight = strdup(val->name);
    L->scheme = strdup(scheme);
    L->channels = C;
    L->w_scale_min = smin;
    L->w_scale_max = smax;
    L->w_sqnr = sqnr;
    L->w_bytes_float = W->nbytes;
    L->w_bytes_quant = (uint64_t)(c->int4 ? (er__tensor_count(W) + 1) / 2 + C * 4 : er__tensor_count(W) + C * 4);
  }
  *dq_out = did;
  return ER_STATUS_OK;
}

/* The dequantized value of weight element i. */
static double dq_at(const wquant *wq, int64_t i) {
  const er_tensor *W = wq->w;
  double v = ((const int8_t *)wq->q->data)[i];
  if (wq->blocks) {
    int64_t d0 = W->dims[0], d1 = W->dims[1], r = i / d1, col = i % d1;
    const float *s = wq->blocks->data;
    if (wq->block_axis == 0) return v * s[(r / wq->block_size) * d1 + col];
    int64_t nb = (d1 + wq->block_size - 1) / wq->block_size;
    (void)d0;
    return v * s[r * nb + col / wq->block_size];
  }
  if (wq->axis < 0) return v * wq->scales[0];
  int64_t inner = 1;
  for (int d = wq->axis + 1; d < W->rank; d++) inner *= W->dims[d];
  return v * wq->scales[(i / inner) % W->dims[wq->axis]];
}

/* Bias correction (Nagel et al., "Data-Free Quantization", 2019): weight
 * rounding shifts each output's mean by sum_k dW[m,k] * E[x_k]; subtracting
 * that from the bias removes the shift. corr[m] receives it for the M
 * output channels; false when the input means are not known. */
static bool bias_correction(const er_node *n, const wquant *wq, const qten *t, double *corr, int64_t M) {
  if (!t || t->ch_n <= 0 || !t->ch_count) return false;
  const er_tensor *W = wq->w;
  const float *w = W->data;
  int64_t count = er__tensor_count(W);
  double inv = 1.0 / (double)t->ch_count;
  for (int64_t m = 0; m < M; m++) corr[m] = 0;
  if (is_op(n, "Conv")) {
    const er_attr *ga = er__node_attr(n, "group");
    int64_t groups = ga ? ga->i : 1, Cg = W->dims[1], per_m = count / M;
    if (groups < 1 || M % groups || t->ch_n != Cg * groups) return false;
    int64_t k = per_m / Cg;  /* kernel elements per input channel */
    for (int64_t i = 0; i < count; i++) {
      int64_t m = i / per_m, c = (i / k) % Cg, cin = (m / (M / groups)) * Cg + c;
      corr[m] += (dq_at(wq, i) - w[i]) * t->ch_sum[cin] * inv;
    }
    return true;
  }
  if (is_op(n, "Gemm") && W->rank == 2) {
    const er_attr *tb = er__node_attr(n, "transB");
    bool trans = tb && tb->i;
    int64_t K = trans ? W->dims[1] : W->dims[0], N = trans ? W->dims[0] : W->dims[1];
    if (N != M || t->ch_n != K) return false;
    for (int64_t i = 0; i < count; i++) {
      int64_t k = trans ? i % K : i / N, col = trans ? i / K : i % N;
      corr[col] += (dq_at(wq, i) - w[i]) * t->ch_sum[k] * inv;
    }
    const er_attr *al = er__node_attr(n, "alpha"), *be = er__node_attr(n, "beta");
    double alpha = al ? al->f : 1.0, beta = be ? be->f : 1.0;
    if (beta == 0) return false;
    for (int64_t m = 0; m < M; m++) corr[m] *= alpha / beta;
    return true;
  }
  return false;
}

/* The bias input of a quantized node: int32 with scale s_x * s_w[m] when
 * the activation is quantized and every value fits, else float. `bvals`
 * [M] are the bias values (corrected). */
static er_status emit_bias(emit_state *e, const er_node *n, const qcand *c, const qten *t, const wquant *wq,
                           const double *bvals, int64_t M, int32_t *id_out, bool *as_int32) {
  er_qbuild *bb = &e->b;
  *as_int32 = false;
  int64_t dims[1] = {M};
  const char *base = c->b >= 0 ? e->g->values[n->inputs[c->b]].name : (n->name[0] ? n->name : n->op_type);
  bool int_ok = t && !c->int4 && (c->natural_axis || c->w_axis < 0) && wq->scales && (wq->n_ch == M || wq->n_ch == 1);
  double *sv = malloc((size_t)M * sizeof *sv);
  if (!sv) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing a bias");
  er_tensor q;
  for (int64_t m = 0; m < M && int_ok; m++) {
    /* The product in float32, as an integer kernel and the DQ node form it. */
    float s = t->scale * wq->scales[wq->n_ch == 1 ? 0 : m];
    sv[m] = s;
    double v = s > 0 ? nearbyint(bvals[m] / s) : 0;
    if (!(s > 0) || fabs(v) > 2147483647.0) int_ok = false;
  }
  er_status st;
  if (!int_ok) {
    /* Float bias (weight-only, int4, or out of int32 range). */
    st = er__qb_constant_vec(bb, base, c->b >= 0 ? "_corrected" : "_bias", ER_DTYPE_FLOAT, 1, M, bvals, id_out);
    free(sv);
    return st;
  }
  er__tensor_set(&q, ER_DTYPE_INT32, 1, dims);
  st = er__tensor_alloc(&q, 0);
  if (st != ER_STATUS_OK) {
    free(sv);
    return st;
  }
  for (int64_t m = 0; m < M; m++) ((int32_t *)q.data)[m] = (int32_t)nearbyint(bvals[m] / sv[m]);
  int32_t qid, sid, did;
  st = er__qb_constant(bb, base, "_quantized", &q, &qid);
  if (st == ER_STATUS_OK) st = er__qb_constant_vec(bb, base, "_quantized_scale", ER_DTYPE_FLOAT, 1, M, sv, &sid);
  free(sv);
  ER_CHECK(st);
  ER_CHECK(er__qb_value(bb, base, "_DequantizeLinear_Output", &did));
  int32_t din[2] = {qid, sid};
  er_attr ax = er__qb_attr_int("axis", 0);
  char nm[512];
  node_name(e->g, did, nm, sizeof nm);
  ER_CHECK(er__qb_node(bb, "DequantizeLinear", nm, din, 2, &did, 1, &ax, 1));
  /* A Gemm bias of shape [1, N] is read as the 1-D dequantized one: C
   * broadcasts either way. */
  *id_out = did;
  *as_int32 = true;
  return ER_STATUS_OK;
}

/* Output channels of a weighted node and whether its bias input may be
 * replaced (absent, or a 1-D per-channel constant the plan accepted). */
static int64_t out_channels(const er_node *n, const qcand *c, const er_tensor *W) {
  if (is_op(n, "Conv")) return W->dims[0];
  if (is_op(n, "Gemm") && W->rank == 2) {
    const er_attr *tb = er__node_attr(n, "transB");
    return tb && tb->i ? W->dims[0] : W->dims[1];
  }
  if (is_op(n, "ConvTranspose") && c->b >= 0) {
    const er_attr *ga = er__node_attr(n, "group");
    return W->dims[1] * (ga ? ga->i : 1);
  }
  return -1;
}

/* Builds the QDQ model with the candidates for which quant[i] is true; the
 * serialized model is appended to `out`. */
static er_status build(qplan *p, const bool *quant, er_pbw *out, er_qreport *rep) {
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  struct er_model *m = NULL;
  ER_CHECK(er_model_load_buffer(p->prep, p->prep_len, NULL, &lo, &m));
  emit_state e;
  memset(&e, 0, sizeof e);
  e.p = p;
  e.g = m->graph;
  e.rep = rep;
  er_graph *g = m->graph;
  er__qb_init(&e.b, g);
  er_status st = ER_STATUS_OK;
  int32_t *cand_of = malloc(((size_t)g->n_nodes + 1) * sizeof *cand_of);
  bool *needed = calloc((size_t)g->n_values + 1, 1);
  e.dq_of = malloc(((size_t)g->n_values + 1) * sizeof *e.dq_of);
  if (!cand_of || !needed || !e.dq_of) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory building the quantized model");
    goto done;
  }
  if (g->n_nodes != p->mf->graph->n_nodes || g->n_values != p->mf->graph->n_values) {
    st = er__error(ER_STATUS_INTERNAL, "the prepared model loaded differently twice");
    goto done;
  }
  for (int32_t i = 0; i < g->n_nodes; i++) cand_of[i] = -1;
  for (int32_t v = 0; v < g->n_values; v++) e.dq_of[v] = -1;
  for (size_t i = 0; i < p->n_c; i++) {
    const qcand *c = &p->c[i];
    if (c->why_float || !quant[i]) continue;
    cand_of[c->node] = (int32_t)i;
    for (int a = 0; a < c->n_act; a++) needed[g->nodes[c->node].inputs[c->act[a]]] = true;
  }
  /* Graph inputs (and anything not produced by a node) first. New values
   * are added as we go; only the model's own are visited. */
  int32_t n_values0 = g->n_values;
  for (int32_t v = 0; v < n_values0 && st == ER_STATUS_OK; v++)
    if (needed[v] && g->values[v].producer < 0) st = emit_qdq(&e, v, &p->t[p->t_of[v]]);
  for (int32_t i = 0; i < g->n_nodes && st == ER_STATUS_OK; i++) {
    er_node node = g->nodes[i];
    int32_t ci = cand_of[i];
    if (ci >= 0) {
      const qcand *c = &p->c[ci];
      int32_t ins[16];
      for (int k = 0; k < node.n_inputs && k < 16; k++) ins[k] = node.inputs[k];
      for (int a = 0; a < c->n_act; a++) ins[c->act[a]] = e.dq_of[node.inputs[c->act[a]]];
      wquant wq;
      memset(&wq, 0, sizeof wq);
      if (c->w >= 0) st = emit_weight(&e, &node, c, &ins[c->w], &wq);
      if (st != ER_STATUS_OK) break;
      /* The bias: corrected for the weights' rounding, int32 where it can
       * be. A node without a bias gets one only to carry a correction. */
      const qten *t = c->n_act >= 1 ? &p->t[p->t_of[node.inputs[c->act[0]]]] : NULL;
      bool has_other_bias = c->b < 0 && node.n_inputs > 2 && node.inputs[2] >= 0;
      int64_t M = c->w >= 0 ? out_channels(&node, c, wq.w) : -1;
      double *bvals = M > 0 && !has_other_bias ? calloc((size_t)M, sizeof *bvals) : NULL;
      double *corr = bvals ? malloc((size_t)M * sizeof *corr) : NULL;
      bool corrected = false, as_int32 = false;
      if (bvals && corr) {
        if (c->b >= 0) {
          const er_value *bv = &g->values[node.inputs[c->b]];
          st = check_finite(bv->constant, bv->name, node.op_type, node.name);
          for (int64_t j = 0; j < M && st == ER_STATUS_OK; j++) bvals[j] = ((const float *)bv->constant->data)[j];
        }
        if (st == ER_STATUS_OK && p->o.bias_correction && t && c->act[0] == 0 && bias_correction(&node, &wq, t, corr, M)) {
          for (int64_t j = 0; j < M; j++) bvals[j] -= corr[j];
          corrected = true;
        }
        if (st == ER_STATUS_OK && (c->b >= 0 || corrected)) {
          int bpos = 2;
          st = emit_bias(&e, &node, c, c->n_act == 1 ? t : NULL, &wq, bvals, M, &ins[bpos], &as_int32);
          if (node.n_inputs < 3) node.n_inputs = 3;
        }
      } else if (M > 0 && !has_other_bias) {
        st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory quantizing a bias");
      }
      free(bvals);
      free(corr);
      if (rep && st == ER_STATUS_OK) {
        rep->layers[ci].bias_int32 = as_int32;
        rep->layers[ci].bias_corrected = corrected;
      }
      if (st != ER_STATUS_OK) break;
      node.inputs = er__qb_ids(&e.b, ins, node.n_inputs);
      if (!node.inputs) {
        st = ER_STATUS_OUT_OF_MEMORY;
        break;
      }
    }
    /* Graph outputs of a quantized layer, when chosen: the layer writes a
     * new float value, Q -> DQ turn it into the output. Not for a value
     * quantized layers also read (its own Q -> DQ is emitted below). */
    int32_t outs[16], redirected[16];
    int n_red = 0;
    if (ci >= 0 && p->out_qdq && node.n_outputs <= 16) {
      for (int k = 0; k < node.n_outputs && st == ER_STATUS_OK; k++) {
        int32_t v = node.outputs[k];
        outs[k] = v;
        if (v < 0 || v >= n_values0 || !p->out_qdq[v] || !g->values[v].is_graph_output || p->t_of[v] < 0 ||
            needed[v])
          continue;
        st = er__qb_value(&e.b, g->values[v].name, "_float", &outs[k]);
        redirected[n_red++] = k;
      }
      if (st != ER_STATUS_OK) break;
      if (n_red > 0) {
        node.outputs = er__qb_ids(&e.b, outs, node.n_outputs);
        if (!node.outputs) {
          st = ER_STATUS_OUT_OF_MEMORY;
          break;
        }
      }
    }
    st = er__qb_keep(&e.b, &node);
    for (int r = 0; r < n_red && st == ER_STATUS_OK; r++) {
      int k = redirected[r];
      int32_t v = g->nodes[i].outputs[k];
      st = emit_qdq_into(&e, node.outputs[k], v, &p->t[p->t_of[v]]);
    }
    for (int k = 0; k < node.n_outputs && st == ER_STATUS_OK; k++) {
      int32_t v = node.outputs[k];
      if (v >= 0 && v < n_values0 && needed[v]) st = emit_qdq(&e, v, &p->t[p->t_of[v]]);
    }
  }
  if (st == ER_STATUS_OK) st = er__qb_commit(&e.b);
  if (st == ER_STATUS_OK) st = er__onnx_write_model(m, out);
done:
  er__qb_free(&e.b);
  for (size_t i = 0; i < e.n_owned; i++) free(e.owned_scales[i]);
  free(e.owned_scales);
  free(e.wc);
  free(e.dq_of);
  free(cand_of);
  free(needed);
  er_model_free(m);
  return st;
}

/* ======================================================================== */
/* Measuring                                                                 */
/* ======================================================================== */

/* Loads serialized model bytes (no external data). */
static er_status load_bytes(const er_pbw *w, struct er_model **m) {
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  return er_model_load_buffer(w->buf, w->len, NULL, &lo, m);
}

/* The budget metric of a comparison: relative output error, output SQNR,
 * or accuracy drop in points. */
static double budget_metric(const er_qcompare *c, er_qbudget kind) {
  er_qmetric all = {0};
  for (size_t i = 0; i < c->n_tensors; i++)
    if (c->tensors[i].is_output) {
      all.sf2 += c->tensors[i].m.sf2;
      all.se2 += c->tensors[i].m.se2;
    }
  if (kind == ER_QBUDGET_SQNR_DB) return er__qmetric_sqnr(&all);
  if (kind == ER_QBUDGET_ACC_POINTS)
    return c->labelled ? 100.0 * (double)(c->f_top1 - c->q_top1) / (double)c->labelled : NAN;
  return er__qmetric_rel_error(&all);
}

static bool within(double v, double budget, er_qbudget kind) {
  if (isnan(v)) return false;
  return kind == ER_QBUDGET_SQNR_DB ? v >= budget : v <= budget;
}

typedef struct evalctx {
  qplan *p;
  const er_model *fm;           /* float reference */
  er_qdata *data;
  const int64_t *labels;
  int64_t n_labels;
} evalctx;

/* Builds the model for `quant` and measures its outputs. */
static er_status measure(evalctx *ec, const bool *quant, er_qbudget kind, double *metric, double *sqnr) {
  er_pbw w = {0};
  struct er_model *qm = NULL;
  er_qcompare *c = NULL;
  er_status st = build(ec->p, quant, &w, NULL);
  if (st == ER_STATUS_OK) st = load_bytes(&w, &qm);
  er_qcompare_options co = {false, ec->labels, ec->n_labels, ec->p->o.threads, false, NULL};
  if (st == ER_STATUS_OK) st = er__qcompare_run(ec->fm, qm, ec->data, &co, &c);
  if (st == ER_STATUS_OK) {
    *metric = budget_metric(c, kind);
    *sqnr = budget_metric(c, ER_QBUDGET_SQNR_DB);
  }
  er__qcompare_free(c);
  er_model_free(qm);
  er__pbw_free(&w);
  return st;
}

/* Builds the model for `quant` and compares it with the float model; the
 * comparison is the caller's (er__qcompare_free). */
static er_status measure_cmp(evalctx *ec, const bool *quant, er_qcompare **out) {
  er_pbw w = {0};
  struct er_model *qm = NULL;
  er_status st = build(ec->p, quant, &w, NULL);
  if (st == ER_STATUS_OK) st = load_bytes(&w, &qm);
  er_qcompare_options co = {false, ec->labels, ec->n_labels, ec->p->o.threads, false, NULL};
  if (st == ER_STATUS_OK) st = er__qcompare_run(ec->fm, qm, ec->data, &co, out);
  er_model_free(qm);
  er__pbw_free(&w);
  return st;
}

/* Output SQNR (dB) of graph output `name` in a comparison; NaN if absent. */
static double output_sqnr(const er_qcompare *c, const char *name) {
  for (size_t i = 0; i < c->n_tensors; i++)
    if (c->tensors[i].is_output && strcmp(c->tensors[i].name, name) == 0) return er__qmetric_sqnr(&c->tensors[i].m);
  return NAN;
}

/* --outputs auto: every graph output of a quantized layer once with and
 * once without Q -> DQ; each keeps the form whose SQNR against the float
 * model is higher (outputs are leaves, so the choices do not interact).
 * With a keep-float budget that is not an SQNR, the choice stands only if
 * the budget metric does not get worse. */
static er_status choose_outputs(evalctx *ec, const bool *quant, er_qreport *rep, bool auto_keep) {
  qplan *p = ec->p;
  const er_graph *g = p->mf->graph;
  er_qcompare *off = NULL, *on = NULL;
  for (int32_t v = 0; v < g->n_values; v++) p->out_qdq[v] = false;
  er_status st = measure_cmp(ec, quant, &off);
  for (int32_t v = 0; v < g->n_values; v++) p->out_qdq[v] = g->values[v].is_graph_output && p->t_of[v] >= 0;
  if (st == ER_STATUS_OK) st = measure_cmp(ec, quant, &on);
  bool any = false;
  for (int32_t v = 0; v < g->n_values && st == ER_STATUS_OK; v++) {
    if (!p->out_qdq[v]) continue;
    double sf = output_sqnr(off, g->values[v].name), sq = output_sqnr(on, g->values[v].name);
    p->out_qdq[v] = sq > sf;
    any |= p->out_qdq[v];
    er_qreport_output *o = realloc(rep->outputs, (rep->n_outputs + 1) * sizeof *o);
    if (!o) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the report");
      break;
    }
    rep->outputs = o;
    rep->outputs[rep->n_outputs++] = (er_qreport_output){strdup(g->values[v].name), p->out_qdq[v], sf, sq};
  }
  if (st == ER_STATUS_OK && any && auto_keep && rep->budget_kind != ER_QBUDGET_SQNR_DB) {
    double before = budget_metric(off, rep->budget_kind), after, sq;
    st = measure(ec, quant, rep->budget_kind, &after, &sq);
    if (st == ER_STATUS_OK && !(after <= before)) {
      for (int32_t v = 0; v < g->n_values; v++) p->out_qdq[v] = false;
      for (size_t i = 0; i < rep->n_outputs; i++) rep->outputs[i].quantized = false;
    }
  }
  er__qcompare_free(off);
  er__qcompare_free(on);
  return st;
}

typedef struct sens {
  size_t cand;
  double sqnr;
} sens;

static int by_sqnr(const void *a, const void *b) {
  double x = ((const sens *)a)->sqnr, y = ((const sens *)b)->sqnr;
  return x < y ? -1 : x > y ? 1 : 0;
}

/* --keep-float auto: sensitivity of each layer alone, then the fewest
 * layers kept float (most sensitive first, then pruned) within budget. */
static er_status keep_float_auto(evalctx *ec, bool *quant, er_qreport *rep) {
  qplan *p = ec->p;
  er_qbudget kind = rep->budget_kind;
  size_t n = p->n_c;
  bool *trial = malloc(n + 1);
  sens *order = malloc((n + 1) * sizeof *order);
  size_t n_order = 0;
  er_status st = ER_STATUS_OK;
  if (!trial || !order) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  if (kind == ER_QBUDGET_ACC_POINTS && !ec->labels) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "an accuracy budget needs --labels for the evaluation samples");
    goto done;
  }
  size_t active = 0;
  for (size_t i = 0; i < n; i++) active += quant[i] ? 1 : 0;
  size_t done_count = 0;
  for (size_t i = 0; i < n && st == ER_STATUS_OK; i++) {
    if (!quant[i]) continue;
    for (size_t j = 0; j < n; j++) trial[j] = j == i;
    double metric, sqnr;
    st = measure(ec, trial, kind, &metric, &sqnr);
    if (st != ER_STATUS_OK) break;
    rep->layers[i].sensitivity = sqnr;
    order[n_order++] = (sens){i, sqnr};
    if (p->o.progress) er__progress("sensitivity", (int64_t)++done_count, (int64_t)active);
  }
  if (st != ER_STATUS_OK) goto done;
  qsort(order, n_order, sizeof *order, by_sqnr);
  double metric, sqnr;
  memcpy(trial, quant, n);
  st = measure(ec, trial, kind, &metric, &sqnr);
  if (st != ER_STATUS_OK) goto done;
  rep->auto_metric_before = metric;
  size_t kept = 0;
  while (!within(metric, rep->budget, kind) && kept < n_order) {
    trial[order[kept++].cand] = false;
    st = measure(ec, trial, kind, &metric, &sqnr);
    if (st != ER_STATUS_OK) goto done;
  }
  /* Prune: a layer added early may be unnecessary once later ones are in
   * float; try giving each back to quantization, least sensitive first. */
  if (within(metric, rep->budget, kind))
    for (size_t k = kept; k-- > 0;) {
      size_t ci = order[k].cand;
      trial[ci] = true;
      double m2, s2;
      st = measure(ec, trial, kind, &m2, &s2);
      if (st != ER_STATUS_OK) goto done;
      if (within(m2, rep->budget, kind)) metric = m2;
      else trial[ci] = false;
    }
  rep->budget_met = within(metric, rep->budget, kind);
  rep->auto_metric_after = metric;
  rep->kept = calloc(n + 1, sizeof *rep->kept);
  if (!rep->kept) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (size_t k = 0; k < n_order; k++) {
    size_t ci = order[k].cand;
    if (quant[ci] && !trial[ci]) {
      rep->kept[rep->n_kept++] = layer_name(&p->c[ci]);
      free(rep->layers[ci].why_float);
      char why[160];
      snprintf(why, sizeof why, "kept float by --keep-float auto (alone it brings the output to %.1f dB SQNR)",
               order[k].sqnr);
      rep->layers[ci].why_float = strdup(why);
    }
  }
  memcpy(quant, trial, n);
done:
  free(trial);
  free(order);
  return st;
}

/* ======================================================================== */
/* Sizes and the report                                                      */
/* ======================================================================== */

uint64_t er__model_weight_bytes(const er_model *m) {
  uint64_t total = 0;
  const er_graph *g = m->graph;
  for (int32_t v = 0; v < g->n_values; v++) {
    const er_value *val = &g->values[v];
    if (val->kind != ER_VALUE_CONSTANT || !val->constant) continue;
    const er_tensor *t = val->constant;
    bool four = t->dtype == ER_DTYPE_INT4 || t->dtype == ER_DTYPE_UINT4;
    total += four ? (uint64_t)(er__tensor_count(t) + 1) / 2 : t->nbytes;
  }
  return total;
}

void er__qreport_free(er_qreport *r) {
  if (!r) return;
  free(r->model_path);
  free(r->out_path);
  free(r->calib_path);
  free(r->eval_path);
  for (size_t i = 0; i < r->n_tensors; i++) free(r->tensors[i].name);
  free(r->tensors);
  for (size_t i = 0; i < r->n_layers; i++) {
    er_qreport_layer *L = &r->layers[i];
    free(L->name);
    free(L->op_type);
    free(L->why_float);
    free(L->weight);
    free(L->scheme);
  }
  free(r->layers);
  for (size_t i = 0; i < r->n_kept; i++) free(r->kept[i]);
  free(r->kept);
  for (size_t i = 0; i < r->n_outputs; i++) free(r->outputs[i].name);
  free(r->outputs);
  er__qcompare_free(r->cmp);
  free(r);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* A layer's name for reports: its node name, or "Op #index" (index in the
 * prepared graph) for nodes the model leaves unnamed. */
static char *layer_name(const qcand *c) {
  if (c->name[0]) return strdup(c->name);
  char buf[160];
  snprintf(buf, sizeof buf, "%s #%d", c->op, (int)c->node);
  return strdup(buf);
}

static er_status report_init(er_qreport *r, const qplan *p) {
  r->layers = calloc(p->n_c + 1, sizeof *r->layers);
  r->tensors = calloc(p->n_t + 1, sizeof *r->tensors);
  if (!r->layers || !r->tensors) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the report");
  r->n_layers = p->n_c;
  for (size_t i = 0; i < p->n_c; i++) {
    er_qreport_layer *L = &r->layers[i];
    L->name = layer_name(&p->c[i]);
    L->op_type = strdup(p->c[i].op);
    L->why_float = dup_or_null(p->c[i].why_float);
    L->sensitivity = NAN;
    L->out_sqnr = L->out_cosine = L->out_max_abs = NAN;
    L->w_sqnr = NAN;
  }
  return ER_STATUS_OK;
}

/* Is `out` the same file as `in` (or would writing it replace it)? */
static bool same_file(const char *in, const char *out) {
  struct stat a, b;
  if (stat(in, &a) != 0) return false;
  if (stat(out, &b) == 0) return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  char ra[PATH_MAX], rb[PATH_MAX];
  return realpath(in, ra) && realpath(out, rb) && strcmp(ra, rb) == 0;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ======================================================================== */
/* The pipeline                                                              */
/* ======================================================================== */

er_status er__quantize(const char *model_path, const char *calib_path, const char *out_path,
                       const er_quant_options *opts, er_qreport **report_out) {
  double t0 = now_seconds();
  er_status st = ER_STATUS_OK;
  qplan p;
  memset(&p, 0, sizeof p);
  er__quant_options_init(&p.o);
  if (opts) p.o = *opts;
  if (p.o.threads < 1) p.o.threads = 1;
  er_qreport *rep = calloc(1, sizeof *rep);
  struct er_model *m0 = NULL, *fm = NULL, *qm = NULL;
  er_qdata *calib = NULL, *eval = NULL;
  int64_t *labels = NULL, n_labels = 0;
  bool *quant = NULL;
  er_pbw prep = {0}, outw = {0};
  if (!rep) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  if (!model_path || !calib_path || !out_path) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "model, calibration data and output path are required");
    goto done;
  }
  if (same_file(model_path, out_path)) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "output '%s' is the input model; write the quantized model to a "
                   "new file", out_path);
    goto done;
  }
  if (p.o.weights == ER_QW_INT4 && p.o.block_size != 32 && p.o.block_size != 64 && p.o.block_size != 128) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "int4 block size %d is not 32, 64 or 128", p.o.block_size);
    goto done;
  }
  rep->model_path = strdup(model_path);
  rep->out_path = strdup(out_path);
  rep->calib_path = strdup(calib_path);
  rep->eval_path = dup_or_null(p.o.eval_path);
  rep->opts = p.o;
  rep->opts.exclude_ops = rep->opts.exclude_nodes = rep->opts.keep_float = rep->opts.channel_axis = NULL;
  rep->opts.eval_path = rep->opts.labels_path = NULL;
  snprintf(rep->method, sizeof rep->method, "%s", er__calib_method_name(p.o.method));
  if (p.o.method == ER_CALIB_PERCENTILE)
    snprintf(rep->method, sizeof rep->method, "percentile %.4g", p.o.percentile);
  snprintf(rep->weights, sizeof rep->weights, "%s",
           p.o.weights == ER_QW_INT4 ? "int4 block-wise (MatMul/Gemm), int8 others"
           : p.o.per_channel         ? "int8 per-channel symmetric"
                                     : "int8 per-tensor symmetric");
  if (p.o.reduce_range && p.o.weights == ER_QW_INT8)
    snprintf(rep->weights + strlen(rep->weights), sizeof rep->weights - strlen(rep->weights),
             ", 7-bit range [-64, 64]");
  p.act_dtype = p.o.activations == ER_QA_FLOAT ? ER_DTYPE_UNDEFINED
                : p.o.activations == ER_QA_INT8 ? ER_DTYPE_INT8 : ER_DTYPE_UINT8;
  snprintf(rep->activations, sizeof rep->activations, "%s",
           p.o.activations == ER_QA_FLOAT ? "float (weight-only)"
           : p.o.activations == ER_QA_INT8 ? (p.o.symmetric ? "int8 symmetric" : "int8 asymmetric")
                                           : (p.o.symmetric ? "uint8 symmetric" : "uint8 asymmetric"));
  bool percent = false;
  bool auto_keep = er__quant_parse_budget(p.o.keep_float, &rep->budget, &rep->budget_kind, &percent);
  if (auto_keep) {
    if (p.o.labels_path && rep->budget_kind == ER_QBUDGET_REL_ERROR) rep->budget_kind = ER_QBUDGET_ACC_POINTS;
    else if (percent) rep->budget /= 100.0;
  } else if (p.o.keep_float && strncmp(p.o.keep_float, "auto", 4) == 0) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "--keep-float '%s' is not auto:BUDGET (e.g. auto:0.01, auto:1%%, "
                   "auto:40dB)", p.o.keep_float);
    goto done;
  }
  rep->auto_keep = auto_keep;

  /* 1. Load and prepare. */
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  struct stat sb;
  if (stat(model_path, &sb) == 0) rep->float_file_bytes = (uint64_t)sb.st_size;
  st = er_model_load_file(model_path, &lo, &m0);
  if (st != ER_STATUS_OK) goto done;
  rep->opset_from = m0->default_opset;
  st = er__qprep_fold_constants(m0, &rep->prepared_folds);
  if (st == ER_STATUS_OK && p.o.fold) st = er__qprep_fold_affine(m0, &rep->affine_folds);
  int64_t need = p.o.weights == ER_QW_INT4 ? 21 : p.o.per_channel ? 13 : 10;
  bool raised;
  if (st == ER_STATUS_OK) st = er__qprep_raise_opset(m0, need, &raised);
  rep->opset_to = m0->default_opset;
  if (st == ER_STATUS_OK) st = er__onnx_write_model(m0, &prep);
  if (st != ER_STATUS_OK) goto done;
  p.prep = prep.buf;
  p.prep_len = prep.len;
  /* The prepared bytes hold everything now; the folded weights of m0 are
   * a copy too many for large models. */
  er_model_free(m0);
  m0 = NULL;
  st = load_bytes(&prep, &p.mf);
  if (st != ER_STATUS_OK) {
    er__error_prefix("the prepared model does not load");
    goto done;
  }
  /* The float reference for measurements: the model as the user gave it. */
  st = er_model_load_file(model_path, &lo, &fm);
  if (st != ER_STATUS_OK) goto done;

  /* 2. Plan. */
  st = make_plan(&p);
  if (st == ER_STATUS_OK) st = report_init(rep, &p);
  if (st != ER_STATUS_OK) goto done;
  quant = calloc(p.n_c + 1, sizeof *quant);
  if (!quant) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < p.n_c; i++) {
    quant[i] = !p.c[i].why_float;
    if (quant[i] && !auto_keep && p.o.keep_float && p.c[i].name[0] && in_list(p.o.keep_float, p.c[i].name)) {
      quant[i] = false;
      free(rep->layers[i].why_float);
      rep->layers[i].why_float = strdup("kept float by --keep-float");
    }
  }
  /* Names given to --keep-float / --exclude-node must exist: a typo would
   * otherwise quantize what the user meant to protect. */
  const char *lists[2] = {auto_keep ? NULL : p.o.keep_float, p.o.exclude_nodes};
  for (int l = 0; l < 2; l++)
    for (const char *s = lists[l]; s && *s;) {
      const char *e = strchr(s, ',');
      size_t len = e ? (size_t)(e - s) : strlen(s);
      bool found = false;
      for (int32_t i = 0; i < fm->graph->n_nodes && !found; i++)
        found = strlen(fm->graph->nodes[i].name) == len && strncmp(fm->graph->nodes[i].name, s, len) == 0;
      for (int32_t i = 0; i < p.mf->graph->n_nodes && !found; i++)
        found = strlen(p.mf->graph->nodes[i].name) == len && strncmp(p.mf->graph->nodes[i].name, s, len) == 0;
      if (!found) {
        st = er__error(ER_STATUS_NOT_FOUND, "%s names node '%.*s', which the model does not have",
                       l == 0 ? "--keep-float" : "--exclude-node", (int)len, s);
        goto done;
      }
      s = e ? e + 1 : s + len;
    }

  /* 3. Data: calibration samples, held-out / evaluation samples. */
  er_qdata_options dopt = p.o.data;
  st = er__qdata_open(calib_path, p.mf, &dopt, &calib);
  if (st != ER_STATUS_OK) goto done;
  int64_t total = er__qdata_samples(calib), label_offset = 0;
  if (p.o.labels_path) {
    st = er__qdata_read_labels(p.o.labels_path, &labels, &n_labels);
    if (st != ER_STATUS_OK) goto done;
  }
  if (p.o.eval_path) {
    er_qdata_options eo = p.o.data;
    eo.skip = eo.limit = 0;
    st = er__qdata_open(p.o.eval_path, p.mf, &eo, &eval);
  } else if (auto_keep && total >= 2) {
    /* Hold out the last samples for the sensitivity search, so layers are
     * judged on data the ranges were not fitted to. */
    int64_t h = p.o.holdout > 0 ? p.o.holdout : total / 5;
    if (h < 1) h = 1;
    if (h > ER_QUANT_MAX_HOLDOUT && p.o.holdout <= 0) h = ER_QUANT_MAX_HOLDOUT;
    if (h >= total) h = total - 1;
    er_qdata_options co = dopt, eo = dopt;
    co.limit = total - h;
    eo.skip = dopt.skip + (total - h);
    eo.limit = h;
    er__qdata_free(calib);
    calib = NULL;
    st = er__qdata_open(calib_path, p.mf, &co, &calib);
    if (st == ER_STATUS_OK) st = er__qdata_open(calib_path, p.mf, &eo, &eval);
    label_offset = total - h;  /* labels then describe the calibration set */
  }
  if (st != ER_STATUS_OK) goto done;

  /* 4. Calibrate and set the ranges. */
  if (p.n_t > 0) {
    st = calibrate(&p, calib, &rep->calib_samples);
    if (st != ER_STATUS_OK) goto done;
  }
  compute_params(&p);
  rep->n_tensors = p.n_t;
  for (size_t i = 0; i < p.n_t; i++) {
    const qten *t = &p.t[i];
    rep->tensors[i] = (er_qreport_tensor){strdup(t->name), t->st.count ? t->st.min : 0, t->st.count ? t->st.max : 0,
                                          t->lo, t->hi, t->scale, t->zp, p.act_dtype};
  }

  /* 5. keep-float auto. */
  er_qdata *evald = eval ? eval : calib;
  rep->eval_on_calib = eval == NULL;
  const int64_t *elabels = labels && label_offset < n_labels ? labels + label_offset : NULL;
  int64_t n_elabels = elabels ? n_labels - label_offset : 0;
  evalctx ec = {&p, fm, evald, elabels, n_elabels};
  if (auto_keep) {
    st = keep_float_auto(&ec, quant, rep);
    if (st != ER_STATUS_OK) goto done;
  }

  /* 6. Graph outputs of quantized layers: through Q -> DQ only where that
   * measures better on the evaluation samples. onnxruntime's quantizer
   * always quantizes them; an 8-bit output usually costs accuracy, but
   * where the output's calibrated range is tight the last step snaps the
   * accumulated error of the layers before back onto the float values. */
  if (p.n_out_t > 0) {
    p.out_qdq = calloc((size_t)p.mf->graph->n_values + 1, sizeof *p.out_qdq);
    if (!p.out_qdq) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
      goto done;
    }
    rep->outputs_mode = p.o.outputs;
    if (p.o.outputs == ER_QOUT_AUTO) {
      st = choose_outputs(&ec, quant, rep, auto_keep);
      if (st != ER_STATUS_OK) goto done;
    } else {
      const er_graph *g = p.mf->graph;
      for (int32_t v = 0; v < g->n_values && st == ER_STATUS_OK; v++) {
        if (!g->values[v].is_graph_output || p.t_of[v] < 0) continue;
        p.out_qdq[v] = p.o.outputs == ER_QOUT_QUANTIZED;
        er_qreport_output *o = realloc(rep->outputs, (rep->n_outputs + 1) * sizeof *o);
        if (!o) {
          st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the report");
          goto done;
        }
        rep->outputs = o;
        rep->outputs[rep->n_outputs++] = (er_qreport_output){strdup(g->values[v].name), p.out_qdq[v], NAN, NAN};
      }
    }
  }

  /* 7. The final model: build, write, measure. */
  st = build(&p, quant, &outw, rep);
  if (st == ER_STATUS_OK) st = load_bytes(&outw, &qm);
  if (st != ER_STATUS_OK) {
    er__error_prefix("the quantized model");
    goto done;
  }
  for (size_t i = 0; i < p.n_c; i++) rep->layers[i].quantized = quant[i];
  rep->float_weight_bytes = er__model_weight_bytes(fm);
  rep->quant_weight_bytes = er__model_weight_bytes(qm);
  st = er__write_file_atomic(out_path, outw.buf, outw.len);
  if (st != ER_STATUS_OK) goto done;
  rep->quant_file_bytes = outw.len;
  er_qcompare_options co = {true, elabels, n_elabels, p.o.threads, p.o.progress, "measuring"};
  st = er__qcompare_run(fm, qm, evald, &co, &rep->cmp);
  if (st != ER_STATUS_OK) goto done;
  rep->eval_samples = rep->cmp->samples;
  er__qcompare_attribute(rep->cmp, fm->graph);
  /* Per-layer output error: the layer's output tensor in the final model. */
  for (size_t i = 0; i < p.n_c; i++) {
    const er_node *n = &p.mf->graph->nodes[p.c[i].node];
    if (n->n_outputs < 1 || n->outputs[0] < 0) continue;
    const char *oname = p.mf->graph->values[n->outputs[0]].name;
    for (size_t k = 0; k < rep->cmp->n_tensors; k++) {
      const er_qcmp_tensor *t = &rep->cmp->tensors[k];
      if (strcmp(t->name, oname) != 0) continue;
      rep->layers[i].out_sqnr = er__qmetric_sqnr(&t->m);
      rep->layers[i].out_cosine = er__qmetric_cosine(&t->m);
      rep->layers[i].out_max_abs = t->m.max_abs;
    }
  }
done:
  rep->seconds = now_seconds() - t0;
  if (p.t)
    for (size_t i = 0; i < p.n_t; i++) {
      er__qstat_free(&p.t[i].st);
      free(p.t[i].ch_sum);
    }
  free(p.t);
  free(p.t_of);
  free(p.out_qdq);
  free(p.c);
  free(quant);
  free(labels);
  er__qdata_free(calib);
  er__qdata_free(eval);
  er_model_free(p.mf);
  er_model_free(m0);
  er_model_free(fm);
  er_model_free(qm);
  er__pbw_free(&prep);
  er__pbw_free(&outw);
  if (report_out) *report_out = rep;
  else er__qreport_free(rep);
  return st;
}
