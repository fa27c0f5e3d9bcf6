/* quantize.c - the post-training quantizer: plan, er__qz_calibrate, emit QDQ,
 * keep-float sensitivity search, and measurement. See quantize.h for the
 * pipeline; the sections below follow it. */
#define _GNU_SOURCE
#include "quant/quantize.h"
#include "quant/quantize-impl.h"

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

void er_quant_options_init(er_quant_options *o) {
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
  er_qdata_options_init(&o->data);
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
er_status er__qz_add_channel_sums(qten *t, const er_tensor *x) {
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

void er_qreport_free(er_qreport *r) {
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
  er_qcompare_free(r->cmp);
  free(r);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

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

/* The report's words for the method, the weights and the activations,
 * and the activations' type. */
static void describe_options(er_qreport *rep, qplan *p) {
  snprintf(rep->method, sizeof rep->method, "%s", er__calib_method_name(p->o.method));
  if (p->o.method == ER_CALIB_PERCENTILE)
    snprintf(rep->method, sizeof rep->method, "percentile %.4g", p->o.percentile);
  snprintf(rep->weights, sizeof rep->weights, "%s",
           p->o.weights == ER_QW_INT4 ? "int4 block-wise (MatMul/Gemm), int8 others"
           : p->o.per_channel         ? "int8 per-channel symmetric"
                                     : "int8 per-tensor symmetric");
  if (p->o.reduce_range && p->o.weights == ER_QW_INT8)
    snprintf(rep->weights + strlen(rep->weights), sizeof rep->weights - strlen(rep->weights),
             ", 7-bit range [-64, 64]");
  p->act_dtype = p->o.activations == ER_QA_FLOAT ? ER_DTYPE_UNDEFINED
                : p->o.activations == ER_QA_INT8 ? ER_DTYPE_INT8 : ER_DTYPE_UINT8;
  snprintf(rep->activations, sizeof rep->activations, "%s",
           p->o.activations == ER_QA_FLOAT ? "float (weight-only)"
           : p->o.activations == ER_QA_INT8 ? (p->o.symmetric ? "int8 symmetric" : "int8 asymmetric")
                                           : (p->o.symmetric ? "uint8 symmetric" : "uint8 asymmetric"));
}

/* Names given to --keep-float / --exclude-node must exist: a typo would
 * otherwise quantize what the user meant to protect. */
static er_status check_node_names(const qplan *p, const struct er_model *fm, bool auto_keep) {
  const char *lists[2] = {auto_keep ? NULL : p->o.keep_float, p->o.exclude_nodes};
  for (int l = 0; l < 2; l++)
    for (const char *s = lists[l]; s && *s;) {
      const char *e = strchr(s, ',');
      size_t len = e ? (size_t)(e - s) : strlen(s);
      bool found = false;
      for (int32_t i = 0; i < fm->graph->n_nodes && !found; i++)
        found = strlen(fm->graph->nodes[i].name) == len && strncmp(fm->graph->nodes[i].name, s, len) == 0;
      for (int32_t i = 0; i < p->mf->graph->n_nodes && !found; i++)
        found = strlen(p->mf->graph->nodes[i].name) == len && strncmp(p->mf->graph->nodes[i].name, s, len) == 0;
      if (!found) {
        return er__error(ER_STATUS_NOT_FOUND, "%s names node '%.*s', which the model does not have",
                         l == 0 ? "--keep-float" : "--exclude-node", (int)len, s);
      }
      s = e ? e + 1 : s + len;
    }
  return ER_STATUS_OK;
}

/* --outputs quantized or float: every quantized graph output the same
 * way, listed in the report. */
static er_status fixed_outputs(qplan *p, er_qreport *rep) {
  const er_graph *g = p->mf->graph;
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!g->values[v].is_graph_output || p->t_of[v] < 0) continue;
    p->out_qdq[v] = p->o.outputs == ER_QOUT_QUANTIZED;
    er_qreport_output *o = realloc(rep->outputs, (rep->n_outputs + 1) * sizeof *o);
    if (!o) {
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the report");
    }
    rep->outputs = o;
    rep->outputs[rep->n_outputs++] = (er_qreport_output){strdup(g->values[v].name), p->out_qdq[v], NAN, NAN};
  }
  return ER_STATUS_OK;
}

/* Per-layer output error: the layer's output tensor in the final model. */
static void layer_errors(const qplan *p, er_qreport *rep) {
  for (size_t i = 0; i < p->n_c; i++) {
    const er_node *n = &p->mf->graph->nodes[p->c[i].node];
    if (n->n_outputs < 1 || n->outputs[0] < 0) continue;
    const char *oname = p->mf->graph->values[n->outputs[0]].name;
    for (size_t k = 0; k < rep->cmp->n_tensors; k++) {
      const er_qcmp_tensor *t = &rep->cmp->tensors[k];
      if (strcmp(t->name, oname) != 0) continue;
      rep->layers[i].out_sqnr = er_qmetric_sqnr(&t->m);
      rep->layers[i].out_cosine = er_qmetric_cosine(&t->m);
      rep->layers[i].out_max_abs = t->m.max_abs;
    }
  }
}

/* Step 3: the calibration samples and the samples measurements use (the
 * evaluation set, or the last calibration samples held out for
 * keep-float auto; labels then describe the calibration set, so
 * *label_offset skips its part). */
static er_status open_data(const qplan *p, const char *calib_path, bool auto_keep, er_qdata **calib, er_qdata **eval,
                           int64_t **labels, int64_t *n_labels, int64_t *label_offset) {
  er_status st = ER_STATUS_OK;
  er_qdata_options dopt = p->o.data;
  st = er_qdata_open(calib_path, p->mf, &dopt, calib);
  if (st != ER_STATUS_OK) return st;
  int64_t total = er_qdata_samples(*calib);
  *label_offset = 0;
  if (p->o.labels_path) {
    st = er_qdata_read_labels(p->o.labels_path, labels, n_labels);
    if (st != ER_STATUS_OK) return st;
  }
  if (p->o.eval_path) {
    er_qdata_options eo = p->o.data;
    eo.skip = eo.limit = 0;
    st = er_qdata_open(p->o.eval_path, p->mf, &eo, eval);
  } else if (auto_keep && total >= 2) {
    /* Hold out the last samples for the sensitivity search, so layers are
     * judged on data the ranges were not fitted to. */
    int64_t h = p->o.holdout > 0 ? p->o.holdout : total / 5;
    if (h < 1) h = 1;
    if (h > ER_QUANT_MAX_HOLDOUT && p->o.holdout <= 0) h = ER_QUANT_MAX_HOLDOUT;
    if (h >= total) h = total - 1;
    er_qdata_options co = dopt, eo = dopt;
    co.limit = total - h;
    eo.skip = dopt.skip + (total - h);
    eo.limit = h;
    er_qdata_free(*calib);
    *calib = NULL;
    st = er_qdata_open(calib_path, p->mf, &co, calib);
    if (st == ER_STATUS_OK) st = er_qdata_open(calib_path, p->mf, &eo, eval);
    *label_offset = total - h;  /* labels then describe the calibration set */
  }
  return st;
}

/* Step 1: the model folded, its opset raised as the quantization needs,
 * written (p->prep) and loaded again (p->mf); *fm the model as the user
 * gave it, the float reference for measurements. */
static er_status prepare_model(qplan *p, const char *model_path, er_qreport *rep, er_pbw *prep,
                               struct er_model **fm) {
  struct er_model *m0 = NULL;
  er_status st;
  er_load_options lo;
  er_load_options_init(&lo);
  lo.optimize = -1;
  struct stat sb;
  if (stat(model_path, &sb) == 0) rep->float_file_bytes = (uint64_t)sb.st_size;
  st = er_model_load_file(model_path, &lo, &m0);
  if (st != ER_STATUS_OK) return st;
  rep->opset_from = m0->default_opset;
  st = er__qprep_fold_constants(m0, &rep->prepared_folds);
  if (st == ER_STATUS_OK && p->o.fold) st = er__qprep_fold_affine(m0, &rep->affine_folds);
  int64_t need = p->o.weights == ER_QW_INT4 ? 21 : p->o.per_channel ? 13 : 10;
  bool raised;
  if (st == ER_STATUS_OK) st = er__qprep_raise_opset(m0, need, &raised);
  rep->opset_to = m0->default_opset;
  if (st == ER_STATUS_OK) st = er__onnx_write_model(m0, prep);
  if (st != ER_STATUS_OK) {
    er_model_free(m0);
    return st;
  }
  p->prep = prep->buf;
  p->prep_len = prep->len;
  /* The prepared bytes hold everything now; the folded weights of m0 are
   * a copy too many for large models. */
  er_model_free(m0);
  st = load_bytes(prep, &p->mf);
  if (st != ER_STATUS_OK) {
    er__error_prefix("the prepared model does not load");
    return st;
  }
  /* The float reference for measurements: the model as the user gave it. */
  return er_model_load_file(model_path, &lo, fm);
}

/* The arguments checked and the report started: paths, options, the
 * words for them, and whether keep-float is auto (rep->auto_keep). */
static er_status start_report(qplan *p, const char *model_path, const char *calib_path, const char *out_path,
                              er_qreport *rep) {
  er_status st;
  if (!model_path || !calib_path || !out_path) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "model, calibration data and output path are required");
    return st;
  }
  if (same_file(model_path, out_path)) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "output '%s' is the input model; write the quantized model to a "
                   "new file", out_path);
    return st;
  }
  if (p->o.weights == ER_QW_INT4 && p->o.block_size != 32 && p->o.block_size != 64 && p->o.block_size != 128) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "int4 block size %d is not 32, 64 or 128", p->o.block_size);
    return st;
  }
  rep->model_path = strdup(model_path);
  rep->out_path = strdup(out_path);
  rep->calib_path = strdup(calib_path);
  rep->eval_path = dup_or_null(p->o.eval_path);
  rep->opts = p->o;
  rep->opts.exclude_ops = rep->opts.exclude_nodes = rep->opts.keep_float = rep->opts.channel_axis = NULL;
  rep->opts.eval_path = rep->opts.labels_path = NULL;
  describe_options(rep, p);
  bool percent = false;
  bool auto_keep = er__quant_parse_budget(p->o.keep_float, &rep->budget, &rep->budget_kind, &percent);
  if (auto_keep) {
    if (p->o.labels_path && rep->budget_kind == ER_QBUDGET_REL_ERROR) rep->budget_kind = ER_QBUDGET_ACC_POINTS;
    else if (percent) rep->budget /= 100.0;
  } else if (p->o.keep_float && strncmp(p->o.keep_float, "auto", 4) == 0) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "--keep-float '%s' is not auto:BUDGET (e.g. auto:0.01, auto:1%%, "
                   "auto:40dB)", p->o.keep_float);
    return st;
  }
  rep->auto_keep = auto_keep;
  return ER_STATUS_OK;
}

er_status er_quantize(const char *model_path, const char *calib_path, const char *out_path,
                       const er_quant_options *opts, er_qreport **report_out) {
  double t0 = now_seconds();
  er_status st = ER_STATUS_OK;
  qplan p;
  memset(&p, 0, sizeof p);
  er_quant_options_init(&p.o);
  if (opts) p.o = *opts;
  if (p.o.threads < 1) p.o.threads = 1;
  er_qreport *rep = calloc(1, sizeof *rep);
  struct er_model *fm = NULL, *qm = NULL;
  er_qdata *calib = NULL, *eval = NULL;
  int64_t *labels = NULL, n_labels = 0;
  bool *quant = NULL;
  er_pbw prep = {0}, outw = {0};
  if (!rep) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
  st = start_report(&p, model_path, calib_path, out_path, rep);
  if (st != ER_STATUS_OK) goto done;
  bool auto_keep = rep->auto_keep;

  /* 1. Load and prepare. */
  st = prepare_model(&p, model_path, rep, &prep, &fm);
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
  st = check_node_names(&p, fm, auto_keep);
  if (st != ER_STATUS_OK) goto done;

  /* 3. Data: calibration samples, held-out / evaluation samples. */
  int64_t label_offset = 0;
  st = open_data(&p, calib_path, auto_keep, &calib, &eval, &labels, &n_labels, &label_offset);
  if (st != ER_STATUS_OK) goto done;

  /* 4. Calibrate and set the ranges. */
  if (p.n_t > 0) {
    st = er__qz_calibrate(&p, calib, &rep->calib_samples);
    if (st != ER_STATUS_OK) goto done;
  }
  er__qz_compute_params(&p);
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
    st = er__qz_keep_float_auto(&ec, quant, rep);
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
      st = er__qz_choose_outputs(&ec, quant, rep, auto_keep);
      if (st != ER_STATUS_OK) goto done;
    } else {
      st = fixed_outputs(&p, rep);
      if (st != ER_STATUS_OK) goto done;
    }
  }

  /* 7. The final model: er__qz_build, write, er__qz_measure. */
  st = er__qz_build(&p, quant, &outw, rep);
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
  st = er_qcompare_run(fm, qm, evald, &co, &rep->cmp);
  if (st != ER_STATUS_OK) goto done;
  rep->eval_samples = rep->cmp->samples;
  er__qcompare_attribute(rep->cmp, fm->graph);
  layer_errors(&p, rep);
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
  er_qdata_free(calib);
  er_qdata_free(eval);
  er_model_free(p.mf);
  er_model_free(fm);
  er_model_free(qm);
  er__pbw_free(&prep);
  er__pbw_free(&outw);
  if (report_out) *report_out = rep;
  else er_qreport_free(rep);
  return st;
}
