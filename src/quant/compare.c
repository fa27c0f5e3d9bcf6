/* compare.c - float vs quantized runs, output and per-layer metrics. */
#define _GNU_SOURCE
#include "quant/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/runtime.h"

/* ======================================================================== */
/* Metrics                                                                   */
/* ======================================================================== */

void er__qmetric_add(er_qmetric *m, const float *f, const float *q, int64_t n) {
  double sf2 = 0, se2 = 0, sfq = 0, sq2 = 0, mx = m->max_abs;
  for (int64_t i = 0; i < n; i++) {
    double a = f[i], b = q[i], e = a - b;
    sf2 += a * a;
    se2 += e * e;
    sfq += a * b;
    sq2 += b * b;
    if (fabs(e) > mx || isnan(e)) mx = fabs(e);
  }
  m->sf2 += sf2;
  m->se2 += se2;
  m->sfq += sfq;
  m->sq2 += sq2;
  m->max_abs = mx;
  m->n += (uint64_t)n;
}

double er_qmetric_sqnr(const er_qmetric *m) {
  if (m->se2 == 0) return INFINITY;
  if (m->sf2 == 0) return -INFINITY;
  return 10.0 * log10(m->sf2 / m->se2);
}

double er_qmetric_cosine(const er_qmetric *m) {
  if (m->sf2 == 0 && m->sq2 == 0) return 1.0;
  if (m->sf2 == 0 || m->sq2 == 0) return 0.0;
  return m->sfq / sqrt(m->sf2 * m->sq2);
}

double er__qmetric_rel_error(const er_qmetric *m) {
  if (m->se2 == 0) return 0;
  if (m->sf2 == 0) return INFINITY;
  return sqrt(m->se2 / m->sf2);
}

void er__progress(const char *label, int64_t done, int64_t total) {
  if (!isatty(STDERR_FILENO) || total <= 0) return;
  int width = 30, fill = (int)(done * width / total);
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : ' ';
  bar[width] = '\0';
  fprintf(stderr, "\r%s [%s] %lld/%lld", label, bar, (long long)done, (long long)total);
  if (done >= total) fputc('\n', stderr);
  fflush(stderr);
}

/* ======================================================================== */
/* Matching                                                                  */
/* ======================================================================== */

static bool is_op(const er_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

int32_t er__qcmp_find(const er_graph *g, const char *name, bool *quantized) {
  *quantized = false;
  int32_t id = er__graph_find(g, name);
  if (id < 0) return -1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *q = &g->nodes[i];
    if (!is_op(q, "QuantizeLinear") || q->n_inputs < 1 || q->inputs[0] != id || q->outputs[0] < 0) continue;
    for (int32_t j = 0; j < g->n_nodes; j++) {
      const er_node *d = &g->nodes[j];
      if (is_op(d, "DequantizeLinear") && d->n_inputs >= 1 && d->inputs[0] == q->outputs[0] && d->outputs[0] >= 0) {
        *quantized = true;
        return d->outputs[0];
      }
    }
  }
  return id;
}

/* ======================================================================== */
/* Running                                                                   */
/* ======================================================================== */

typedef struct run_state {
  er_qcompare *c;
  const er_graph *g;
  int32_t *slot;        /* value id -> tensor index, or -1 */
  er_tensor *held;      /* [n_tensors] float model copies for this batch */
  bool float_side;
  int64_t sample0;      /* first sample of the batch */
  int64_t batch;
  er_status error;
} run_state;

static void record(er_qcmp_tensor *t, const er_tensor *f, const er_tensor *q, int64_t sample0, int64_t batch) {
  int64_t n = er__tensor_count(f);
  er__qmetric_add(&t->m, f->data, q->data, n);
  if (batch <= 0 || n % batch != 0) return;
  int64_t per = n / batch;
  for (int64_t b = 0; b < batch; b++) {
    int64_t s = sample0 + b;
    if (s >= ER_QCMP_MAX_SAMPLES) break;
    er_qmetric one = {0};
    er__qmetric_add(&one, (const float *)f->data + b * per, (const float *)q->data + b * per, per);
    double v = er_qmetric_sqnr(&one);
    t->sample_sqnr[s] = (float)(isinf(v) ? (v > 0 ? 200.0 : -200.0) : v);
  }
}

static er_status observe(void *user, const er_graph *g, int32_t node_index, er_tensor *const *outs, int n_outs) {
  run_state *rs = user;
  if (g != rs->g) return ER_STATUS_OK;  /* subgraph nodes */
  const er_node *node = &g->nodes[node_index];
  for (int k = 0; k < n_outs; k++) {
    int32_t id = node->outputs[k];
    if (id < 0 || !outs[k] || rs->slot[id] < 0) continue;
    size_t ti = (size_t)rs->slot[id];
    er_qcmp_tensor *t = &rs->c->tensors[ti];
    if (outs[k]->dtype != ER_DTYPE_FLOAT) continue;
    if (rs->float_side) {
      er__tensor_release(&rs->held[ti]);
      er_status st = er__tensor_copy(&rs->held[ti], outs[k]);
      if (st != ER_STATUS_OK) return st;
    } else if (rs->held[ti].data) {
      const er_tensor *f = &rs->held[ti];
      if (f->rank == outs[k]->rank && er__tensor_count(f) == er__tensor_count(outs[k]) &&
          memcmp(f->dims, outs[k]->dims, (size_t)f->rank * sizeof f->dims[0]) == 0)
        record(t, f, outs[k], rs->sample0, rs->batch);
      er__tensor_release(&rs->held[ti]);
    }
  }
  return ER_STATUS_OK;
}

/* Row-wise argmax / top-k membership over the last axis of a score
 * tensor [rows, classes]. */
static int64_t argmax_row(const float *v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

static bool in_top5(const float *v, int64_t n, int64_t label) {
  if (label < 0 || label >= n) return false;
  int64_t above = 0;
  for (int64_t i = 0; i < n; i++)
    if (v[i] > v[label]) above++;
  return above < 5;
}

static bool looks_like_scores(const er_tensor *t, int64_t batch) {
  if (t->dtype != ER_DTYPE_FLOAT || t->rank < 1) return false;
  int64_t classes = t->dims[t->rank - 1], rows = er__tensor_count(t) / (classes ? classes : 1);
  return classes >= 2 && rows == batch;
}

static er_status add_tensor(er_qcompare *c, size_t *cap, const er_graph *fg, int32_t fid, int32_t qid, bool quantized,
                            bool is_output) {
  if (c->n_tensors == *cap) {
    size_t nc = *cap ? *cap * 2 : 64;
    er_qcmp_tensor *n = realloc(c->tensors, nc * sizeof *n);
    if (!n) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory comparing models");
    c->tensors = n;
    *cap = nc;
  }
  er_qcmp_tensor *t = &c->tensors[c->n_tensors++];
  memset(t, 0, sizeof *t);
  const er_value *v = &fg->values[fid];
  /* Copies: the comparison outlives the models (reports are written after
   * they are freed). */
  t->name = strdup(v->name);
  t->op_type = strdup(v->producer >= 0 ? fg->nodes[v->producer].op_type : "");
  t->node = strdup(v->producer >= 0 ? fg->nodes[v->producer].name : "");
  if (!t->name || !t->op_type || !t->node) {
    c->n_tensors--;
    free(t->name);
    free(t->op_type);
    free(t->node);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory comparing models");
  }
  t->fid = fid;
  t->qid = qid;
  t->quantized = quantized;
  t->is_output = is_output;
  t->order = v->producer;
  for (int s = 0; s < ER_QCMP_MAX_SAMPLES; s++) t->sample_sqnr[s] = NAN;
  return ER_STATUS_OK;
}

void er_qcompare_attribute(er_qcompare *c, const er_model *float_model) {
  if (c && float_model) er__qcompare_attribute(c, float_model->graph);
}

void er__qcompare_attribute(er_qcompare *c, const er_graph *fg) {
  for (size_t i = 0; i < c->n_tensors; i++) {
    er_qcmp_tensor *t = &c->tensors[i];
    double in = INFINITY;
    int32_t prod = fg->values[t->fid].producer;
    if (prod >= 0) {
      const er_node *n = &fg->nodes[prod];
      for (int k = 0; k < n->n_inputs; k++)
        for (size_t j = 0; j < c->n_tensors; j++)
          if (n->inputs[k] >= 0 && c->tensors[j].fid == n->inputs[k]) in = fmin(in, er_qmetric_sqnr(&c->tensors[j].m));
    }
    double own = er_qmetric_sqnr(&t->m);
    t->input_sqnr = in;
    double added = pow(10.0, -own / 10.0) - (isinf(in) ? 0.0 : pow(10.0, -in / 10.0));
    t->local_sqnr = added > 0 ? -10.0 * log10(added) : INFINITY;
  }
}

void er_qcompare_free(er_qcompare *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n_tensors; i++) {
    free(c->tensors[i].name);
    free(c->tensors[i].op_type);
    free(c->tensors[i].node);
  }
  free(c->tensors);
  free(c);
}

er_status er_qcompare_run(const er_model *fm, const er_model *qm, er_qdata *data, const er_qcompare_options *o,
                           er_qcompare **out) {
  er_status st = ER_STATUS_OK;
  er_qcompare *c = calloc(1, sizeof *c);
  er_session *fs = NULL, *qs = NULL;
  size_t cap = 0;
  const er_graph *fg = fm ? fm->graph : NULL, *qg = qm->graph;
  run_state frs = {0}, qrs = {0};
  er_tensor **fo = NULL, **qo = NULL;
  size_t n_out = er_model_output_count(qm);
  int32_t *qslot = NULL;
  if (!c) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory comparing models");
  c->have_float = fm != NULL;
  fo = calloc(n_out + 1, sizeof *fo);
  qo = calloc(n_out + 1, sizeof *qo);
  if (!fo || !qo) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory comparing models");
    goto done;
  }
  if (fm) {
    if (er_model_output_count(fm) != n_out) {
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "the float model has %zu outputs and the quantized one %zu",
                     er_model_output_count(fm), n_out);
      goto done;
    }
    /* Outputs first (by position), then matching intermediates. */
    for (int32_t k = 0; k < fg->n_outputs && st == ER_STATUS_OK; k++)
      st = add_tensor(c, &cap, fg, fg->outputs[k], qg->outputs[k], false, true);
    if (o->layers)
      for (int32_t i = 0; i < fg->n_nodes && st == ER_STATUS_OK; i++) {
        const er_node *n = &fg->nodes[i];
        for (int k = 0; k < n->n_outputs && st == ER_STATUS_OK; k++) {
          int32_t fid = n->outputs[k];
          if (fid < 0 || fg->values[fid].is_graph_output || fg->values[fid].info.dtype != ER_DTYPE_FLOAT) continue;
          bool quantized;
          int32_t qid = er__qcmp_find(qg, fg->values[fid].name, &quantized);
          if (qid >= 0) st = add_tensor(c, &cap, fg, fid, qid, quantized, false);
        }
      }
    if (st != ER_STATUS_OK) goto done;
    frs.slot = malloc(((size_t)fg->n_values + 1) * sizeof *frs.slot);
    qslot = malloc(((size_t)qg->n_values + 1) * sizeof *qslot);
    frs.held = calloc(c->n_tensors + 1, sizeof *frs.held);
    if (!frs.slot || !qslot || !frs.held) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory comparing models");
      goto done;
    }
    for (int32_t v = 0; v < fg->n_values; v++) frs.slot[v] = -1;
    for (int32_t v = 0; v < qg->n_values; v++) qslot[v] = -1;
    /* Outputs are compared from the run results, not from the observer. */
    for (size_t i = 0; i < c->n_tensors; i++)
      if (!c->tensors[i].is_output) {
        frs.slot[c->tensors[i].fid] = (int32_t)i;
        qslot[c->tensors[i].qid] = (int32_t)i;
      }
    frs.c = qrs.c = c;
    frs.g = fg;
    qrs.g = qg;
    qrs.slot = qslot;
    qrs.held = frs.held;
    frs.float_side = true;
  }
  er_session_options so;
  er_session_options_init(&so);
  so.threads = o->threads > 0 ? o->threads : 1;
  /* Observed runs see every tensor only on the reference path. */
  so.force_reference = o->layers;
  if (fm && (st = er_session_create(fm, &so, &fs)) != ER_STATUS_OK) goto done;
  if ((st = er_session_create(qm, &so, &qs)) != ER_STATUS_OK) goto done;
  er__qdata_rewind(data);
  int64_t total = er_qdata_samples(data);
  for (;;) {
    er_named_tensor in[ER_QDATA_MAX_INPUTS];
    int64_t nb;
    st = er__qdata_next(data, in, &nb);
    if (st != ER_STATUS_OK || nb == 0) break;
    size_t n_in = er__qdata_input_count(data);
    frs.sample0 = qrs.sample0 = c->samples;
    frs.batch = qrs.batch = nb;
    if (fm) {
      st = er__session_run_observed(fs, in, n_in, NULL, n_out, fo, o->layers ? observe : NULL, &frs);
      if (st != ER_STATUS_OK) {
        er__error_prefix("running the float model");
        break;
      }
    }
    st = er__session_run_observed(qs, in, n_in, NULL, n_out, qo, (fm && o->layers) ? observe : NULL, &qrs);
    if (st != ER_STATUS_OK) {
      er__error_prefix("running the quantized model");
      break;
    }
    for (size_t k = 0; k < n_out; k++) {
      er_tensor *q = qo[k], *f = fm ? fo[k] : NULL;
      if (f && f->dtype == ER_DTYPE_FLOAT && q->dtype == ER_DTYPE_FLOAT &&
          er__tensor_count(f) == er__tensor_count(q))
        record(&c->tensors[k], f, q, c->samples, nb);
      if (!looks_like_scores(q, nb)) continue;
      int64_t classes = q->dims[q->rank - 1];
      for (int64_t r = 0; r < nb; r++) {
        const float *qv = (const float *)q->data + r * classes;
        int64_t qa = argmax_row(qv, classes);
        if (f && looks_like_scores(f, nb) && f->dims[f->rank - 1] == classes) {
          const float *fv = (const float *)f->data + r * classes;
          c->rows++;
          if (argmax_row(fv, classes) == qa) c->agree++;
          if (k == 0 && o->labels && c->samples + r < o->n_labels) {
            int64_t lab = o->labels[c->samples + r];
            c->f_top1 += argmax_row(fv, classes) == lab;
            c->f_top5 += in_top5(fv, classes, lab);
          }
        } else if (!f) {
          c->rows++;
        }
        if (k == 0 && o->labels && c->samples + r < o->n_labels) {
          int64_t lab = o->labels[c->samples + r];
          c->labelled++;
          c->q_top1 += qa == lab;
          c->q_top5 += in_top5(qv, classes, lab);
        }
      }
    }
    for (size_t k = 0; k < n_out; k++) {
      er_tensor_free(fo[k]);
      er_tensor_free(qo[k]);
      fo[k] = qo[k] = NULL;
    }
    /* Anything the quantized run did not reach is dropped with the batch. */
    for (size_t i = 0; frs.held && i < c->n_tensors; i++) er__tensor_release(&frs.held[i]);
    c->samples += nb;
    if (o->progress) er__progress(o->what ? o->what : "comparing", c->samples, total);
  }
done:
  for (size_t k = 0; fo && k < n_out; k++) er_tensor_free(fo[k]);
  for (size_t k = 0; qo && k < n_out; k++) er_tensor_free(qo[k]);
  free(fo);
  free(qo);
  if (frs.held)
    for (size_t i = 0; i < c->n_tensors; i++) er__tensor_release(&frs.held[i]);
  free(frs.held);
  free(frs.slot);
  free(qslot);
  er_session_free(fs);
  er_session_free(qs);
  if (st != ER_STATUS_OK) {
    er_qcompare_free(c);
    return st;
  }
  *out = c;
  return ER_STATUS_OK;
}
