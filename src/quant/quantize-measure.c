/* quantize-measure.c - edgerun quantize's calibration (activation ranges
 * over the calibration data) and its measurements of what quantization
 * cost (see quantize.c). */
#define _GNU_SOURCE
#include "quant/quantize-impl.h"

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
    if (p->o.bias_correction) ER_CHECK(er__qz_add_channel_sums(t, outs[k]));
  }
  return ER_STATUS_OK;
}

er_status er__qz_calibrate(qplan *p, er_qdata *data, int64_t *samples_out) {
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
  int64_t done = 0, total = er_qdata_samples(data);
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
          st = er__qz_add_channel_sums(&p->t[p->t_of[id]], t);
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
void er__qz_compute_params(qplan *p) {
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
/* Measuring                                                                 */
/* ======================================================================== */

/* The budget metric of a comparison: relative output error, output SQNR,
 * or accuracy drop in points. */
static double budget_metric(const er_qcompare *c, er_qbudget kind) {
  er_qmetric all = {0};
  for (size_t i = 0; i < c->n_tensors; i++)
    if (c->tensors[i].is_output) {
      all.sf2 += c->tensors[i].m.sf2;
      all.se2 += c->tensors[i].m.se2;
    }
  if (kind == ER_QBUDGET_SQNR_DB) return er_qmetric_sqnr(&all);
  if (kind == ER_QBUDGET_ACC_POINTS)
    return c->labelled ? 100.0 * (double)(c->f_top1 - c->q_top1) / (double)c->labelled : NAN;
  return er__qmetric_rel_error(&all);
}

static bool within(double v, double budget, er_qbudget kind) {
  if (isnan(v)) return false;
  return kind == ER_QBUDGET_SQNR_DB ? v >= budget : v <= budget;
}

/* Builds the model for `quant` and measures its outputs. */
er_status er__qz_measure(evalctx *ec, const bool *quant, er_qbudget kind, double *metric, double *sqnr) {
  er_pbw w = {0};
  struct er_model *qm = NULL;
  er_qcompare *c = NULL;
  er_status st = er__qz_build(ec->p, quant, &w, NULL);
  if (st == ER_STATUS_OK) st = load_bytes(&w, &qm);
  er_qcompare_options co = {false, ec->labels, ec->n_labels, ec->p->o.threads, false, NULL};
  if (st == ER_STATUS_OK) st = er_qcompare_run(ec->fm, qm, ec->data, &co, &c);
  if (st == ER_STATUS_OK) {
    *metric = budget_metric(c, kind);
    *sqnr = budget_metric(c, ER_QBUDGET_SQNR_DB);
  }
  er_qcompare_free(c);
  er_model_free(qm);
  er__pbw_free(&w);
  return st;
}

/* Builds the model for `quant` and compares it with the float model; the
 * comparison is the caller's (er_qcompare_free). */
static er_status measure_cmp(evalctx *ec, const bool *quant, er_qcompare **out) {
  er_pbw w = {0};
  struct er_model *qm = NULL;
  er_status st = er__qz_build(ec->p, quant, &w, NULL);
  if (st == ER_STATUS_OK) st = load_bytes(&w, &qm);
  er_qcompare_options co = {false, ec->labels, ec->n_labels, ec->p->o.threads, false, NULL};
  if (st == ER_STATUS_OK) st = er_qcompare_run(ec->fm, qm, ec->data, &co, out);
  er_model_free(qm);
  er__pbw_free(&w);
  return st;
}

/* Output SQNR (dB) of graph output `name` in a comparison; NaN if absent. */
static double output_sqnr(const er_qcompare *c, const char *name) {
  for (size_t i = 0; i < c->n_tensors; i++)
    if (c->tensors[i].is_output && strcmp(c->tensors[i].name, name) == 0) return er_qmetric_sqnr(&c->tensors[i].m);
  return NAN;
}

/* --outputs auto: every graph output of a quantized layer once with and
 * once without Q -> DQ; each keeps the form whose SQNR against the float
 * model is higher (outputs are leaves, so the choices do not interact).
 * With a keep-float budget that is not an SQNR, the choice stands only if
 * the budget metric does not get worse. */
er_status er__qz_choose_outputs(evalctx *ec, const bool *quant, er_qreport *rep, bool auto_keep) {
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
    st = er__qz_measure(ec, quant, rep->budget_kind, &after, &sq);
    if (st == ER_STATUS_OK && !(after <= before)) {
      for (int32_t v = 0; v < g->n_values; v++) p->out_qdq[v] = false;
      for (size_t i = 0; i < rep->n_outputs; i++) rep->outputs[i].quantized = false;
    }
  }
  er_qcompare_free(off);
  er_qcompare_free(on);
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
er_status er__qz_keep_float_auto(evalctx *ec, bool *quant, er_qreport *rep) {
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
    st = er__qz_measure(ec, trial, kind, &metric, &sqnr);
    if (st != ER_STATUS_OK) break;
    rep->layers[i].sensitivity = sqnr;
    order[n_order++] = (sens){i, sqnr};
    if (p->o.progress) er__progress("sensitivity", (int64_t)++done_count, (int64_t)active);
  }
  if (st != ER_STATUS_OK) goto done;
  qsort(order, n_order, sizeof *order, by_sqnr);
  double metric, sqnr;
  memcpy(trial, quant, n);
  st = er__qz_measure(ec, trial, kind, &metric, &sqnr);
  if (st != ER_STATUS_OK) goto done;
  rep->auto_metric_before = metric;
  size_t kept = 0;
  while (!within(metric, rep->budget, kind) && kept < n_order) {
    trial[order[kept++].cand] = false;
    st = er__qz_measure(ec, trial, kind, &metric, &sqnr);
    if (st != ER_STATUS_OK) goto done;
  }
  /* Prune: a layer added early may be unnecessary once later ones are in
   * float; try giving each back to quantization, least sensitive first. */
  if (within(metric, rep->budget, kind))
    for (size_t k = kept; k-- > 0;) {
      size_t ci = order[k].cand;
      trial[ci] = true;
      double m2, s2;
      st = er__qz_measure(ec, trial, kind, &m2, &s2);
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
