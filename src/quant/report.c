/* report.c - quantization and analysis reports as JSON and as one
 * self-contained HTML page (inline CSS and SVG; nothing to fetch, no
 * scripts), both written atomically. Non-finite numbers (an exact layer has
 * infinite SQNR) are written as null in JSON and as "exact" / "-" in HTML. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "onnx/onnx-write.h"
#include "quant/quantize.h"

/* ======================================================================== */
/* A growable text buffer                                                    */
/* ======================================================================== */

typedef struct sb {
  char *buf;
  size_t len, cap;
  bool failed;
} sb;

static void sb_printf(sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb *s, const char *fmt, ...) {
  if (s->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = s->cap - s->len;
    int n = vsnprintf(s->buf ? s->buf + s->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      s->failed = true;
      return;
    }
    if ((size_t)n < room) {
      s->len += (size_t)n;
      return;
    }
    size_t cap = s->cap ? s->cap * 2 : 4096;
    while (cap - s->len <= (size_t)n) cap *= 2;
    char *nb = realloc(s->buf, cap);
    if (!nb) {
      s->failed = true;
      return;
    }
    s->buf = nb;
    s->cap = cap;
  }
}

static void sb_json_str(sb *s, const char *str) {
  sb_printf(s, "\"");
  for (const unsigned char *p = (const unsigned char *)(str ? str : ""); *p; p++) {
    if (*p == '"' || *p == '\\') sb_printf(s, "\\%c", *p);
    else if (*p == '\n') sb_printf(s, "\\n");
    else if (*p < 0x20) sb_printf(s, "\\u%04x", *p);
    else sb_printf(s, "%c", *p);
  }
  sb_printf(s, "\"");
}

static void sb_num(sb *s, double v) {
  if (isfinite(v)) sb_printf(s, "%.6g", v);
  else sb_printf(s, "null");
}

static void sb_html(sb *s, const char *str) {
  for (const char *p = str ? str : ""; *p; p++) {
    switch (*p) {
      case '<': sb_printf(s, "&lt;"); break;
      case '>': sb_printf(s, "&gt;"); break;
      case '&': sb_printf(s, "&amp;"); break;
      case '"': sb_printf(s, "&quot;"); break;
      default: sb_printf(s, "%c", *p);
    }
  }
}

static void sb_db(sb *s, double v) {
  if (isnan(v)) sb_printf(s, "-");
  else if (isinf(v)) sb_printf(s, v > 0 ? "exact" : "-inf");
  else sb_printf(s, "%.2f", v);
}

static er_status sb_save(sb *s, const char *path) {
  er_status st = s->failed ? er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory writing a report")
                           : er__write_file_atomic(path, s->buf ? s->buf : "", s->len);
  free(s->buf);
  return st;
}

/* ======================================================================== */
/* Shared pieces                                                             */
/* ======================================================================== */

static void json_metric(sb *s, const er_qmetric *m) {
  sb_printf(s, "\"sqnr_db\": ");
  sb_num(s, er_qmetric_sqnr(m));
  sb_printf(s, ", \"cosine\": ");
  sb_num(s, er_qmetric_cosine(m));
  sb_printf(s, ", \"max_abs_error\": ");
  sb_num(s, m->max_abs);
  sb_printf(s, ", \"relative_error\": ");
  sb_num(s, er__qmetric_rel_error(m));
}

static void json_compare_body(sb *s, const er_qcompare *c) {
  sb_printf(s, "\"samples\": %lld,\n  \"outputs\": [", (long long)c->samples);
  bool first = true;
  for (size_t i = 0; i < c->n_tensors; i++) {
    const er_qcmp_tensor *t = &c->tensors[i];
    if (!t->is_output) continue;
    sb_printf(s, "%s\n    {\"name\": ", first ? "" : ",");
    sb_json_str(s, t->name);
    sb_printf(s, ", ");
    json_metric(s, &t->m);
    sb_printf(s, "}");
    first = false;
  }
  sb_printf(s, "\n  ],\n  \"top1_agreement\": ");
  if (c->rows) sb_num(s, (double)c->agree / (double)c->rows);
  else sb_printf(s, "null");
  sb_printf(s, ",\n  \"classification_rows\": %lld,\n  \"accuracy\": ", (long long)c->rows);
  if (c->labelled) {
    double n = (double)c->labelled;
    sb_printf(s, "{\"labelled\": %lld, \"float_top1\": ", (long long)c->labelled);
    if (c->have_float) sb_num(s, c->f_top1 / n);
    else sb_printf(s, "null");
    sb_printf(s, ", \"quant_top1\": ");
    sb_num(s, c->q_top1 / n);
    sb_printf(s, ", \"float_top5\": ");
    if (c->have_float) sb_num(s, c->f_top5 / n);
    else sb_printf(s, "null");
    sb_printf(s, ", \"quant_top5\": ");
    sb_num(s, c->q_top5 / n);
    sb_printf(s, ", \"top1_drop_points\": ");
    if (c->have_float) sb_num(s, 100.0 * (double)(c->f_top1 - c->q_top1) / n);
    else sb_printf(s, "null");
    sb_printf(s, "}");
  } else {
    sb_printf(s, "null");
  }
}

static void json_layers(sb *s, const er_qcompare *c) {
  sb_printf(s, "[");
  bool first = true;
  for (size_t i = 0; i < c->n_tensors; i++) {
    const er_qcmp_tensor *t = &c->tensors[i];
    sb_printf(s, "%s\n    {\"tensor\": ", first ? "" : ",");
    sb_json_str(s, t->name);
    sb_printf(s, ", \"op_type\": ");
    sb_json_str(s, t->op_type);
    sb_printf(s, ", \"node\": ");
    sb_json_str(s, t->node);
    sb_printf(s, ", \"output\": %s, \"quantized\": %s, ", t->is_output ? "true" : "false",
              t->quantized ? "true" : "false");
    json_metric(s, &t->m);
    sb_printf(s, ", \"local_sqnr_db\": ");
    sb_num(s, t->local_sqnr);
    sb_printf(s, "}");
    first = false;
  }
  sb_printf(s, "\n  ]");
}

/* Indices of the compared tensors ordered by the noise their producer adds
 * (most first). */
static size_t *ranking(const er_qcompare *c) {
  size_t *idx = malloc((c->n_tensors + 1) * sizeof *idx);
  if (!idx) return NULL;
  for (size_t i = 0; i < c->n_tensors; i++) idx[i] = i;
  for (size_t i = 1; i < c->n_tensors; i++)
    for (size_t j = i; j > 0 && c->tensors[idx[j]].local_sqnr < c->tensors[idx[j - 1]].local_sqnr; j--) {
      size_t t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  return idx;
}

static const char *css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}"
    "th{background:#f4f4f4}td.l,th.l{text-align:left}.bad{color:#b00}.good{color:#070}"
    ".kv td:first-child{text-align:left;color:#555}.bar{display:inline-block;height:10px;background:#48c}"
    ".note{color:#666;font-size:12px}svg text{font:10px monospace}";

/* Colour of an SQNR value: red (<= 10 dB) through yellow to green (>= 50). */
static void heat_colour(double db, char *out, size_t size) {
  if (isnan(db)) {
    snprintf(out, size, "#eee");
    return;
  }
  double t = (db - 10.0) / 40.0;
  if (t < 0) t = 0;
  if (t > 1) t = 1;
  int r = t < 0.5 ? 220 : (int)(220 - (t - 0.5) * 2 * 180);
  int g = t < 0.5 ? (int)(60 + t * 2 * 160) : 220;
  snprintf(out, size, "#%02x%02x%02x", r, g, 60);
}

/* The heatmap: compared tensors (rows, in graph order) x samples
 * (columns), each cell coloured by that sample's SQNR; a last column shows
 * the SQNR over all samples. Inline SVG. */
static void html_heatmap(sb *s, const er_qcompare *c) {
  int cols = (int)(c->samples < ER_QCMP_MAX_SAMPLES ? c->samples : ER_QCMP_MAX_SAMPLES);
  int cw = 10, rh = 12, label = 260, top = 16;
  size_t rows = c->n_tensors;
  int width = label + (cols + 2) * cw, height = top + (int)rows * rh + 4;
  sb_printf(s, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' role='img' "
            "aria-label='per-layer SQNR heatmap'>\n", width, height);
  sb_printf(s, "<text x='%d' y='11'>samples 1..%d, then all</text>\n", label, cols);
  for (size_t r = 0; r < rows; r++) {
    const er_qcmp_tensor *t = &c->tensors[r];
    int y = top + (int)r * rh;
    char name[48];
    snprintf(name, sizeof name, "%.40s", t->name);
    sb_printf(s, "<text x='0' y='%d'>", y + 9);
    sb_html(s, name);
    sb_printf(s, "</text>\n");
    for (int k = 0; k <= cols; k++) {
      double v = k < cols ? t->sample_sqnr[k] : er_qmetric_sqnr(&t->m);
      char col[16];
      heat_colour(isinf(v) ? 200 : v, col, sizeof col);
      int x = label + (k < cols ? k : cols + 1) * cw;
      sb_printf(s, "<rect x='%d' y='%d' width='%d' height='%d' fill='%s'><title>", x, y, cw - 1, rh - 1, col);
      sb_html(s, t->name);
      sb_printf(s, k < cols ? " sample %d: " : " all samples: ", k + 1);
      sb_db(s, v);
      sb_printf(s, " dB</title></rect>\n");
    }
  }
  sb_printf(s, "</svg>\n<p class='note'>Colour: SQNR of the quantized model's tensor against the float one, "
            "red at 10 dB or less, yellow at 30, green at 50 dB or more.</p>\n");
}

static void html_compare_tables(sb *s, const er_qcompare *c) {
  sb_printf(s, "<h2>Outputs</h2><table><tr><th class='l'>output</th><th>SQNR dB</th><th>cosine</th>"
            "<th>max abs error</th></tr>\n");
  for (size_t i = 0; i < c->n_tensors; i++) {
    const er_qcmp_tensor *t = &c->tensors[i];
    if (!t->is_output) continue;
    sb_printf(s, "<tr><td class='l'>");
    sb_html(s, t->name);
    sb_printf(s, "</td><td>");
    sb_db(s, er_qmetric_sqnr(&t->m));
    sb_printf(s, "</td><td>%.6f</td><td>%.4g</td></tr>\n", er_qmetric_cosine(&t->m), t->m.max_abs);
  }
  sb_printf(s, "</table>\n<table class='kv'>");
  sb_printf(s, "<tr><td>samples compared</td><td>%lld</td></tr>", (long long)c->samples);
  if (c->rows)
    sb_printf(s, "<tr><td>top-1 agreement</td><td>%.2f%% (%lld of %lld)</td></tr>", 100.0 * c->agree / c->rows,
              (long long)c->agree, (long long)c->rows);
  if (c->labelled) {
    double n = (double)c->labelled;
    if (c->have_float)
      sb_printf(s, "<tr><td>top-1 accuracy float / quantized</td><td>%.2f%% / %.2f%% (drop %.2f points)</td></tr>",
                100 * c->f_top1 / n, 100 * c->q_top1 / n, 100.0 * (double)(c->f_top1 - c->q_top1) / n);
    else
      sb_printf(s, "<tr><td>top-1 accuracy</td><td>%.2f%%</td></tr>", 100 * c->q_top1 / n);
    sb_printf(s, "<tr><td>top-5 accuracy%s</td><td>", c->have_float ? " float / quantized" : "");
    if (c->have_float) sb_printf(s, "%.2f%% / ", 100 * c->f_top5 / n);
    sb_printf(s, "%.2f%%</td></tr>", 100 * c->q_top5 / n);
  }
  sb_printf(s, "</table>\n");
  size_t *idx = ranking(c);
  if (idx) {
    sb_printf(s, "<h2>Sensitivity ranking</h2><p class='note'>Tensors ordered by the noise their producing layer "
              "adds by itself (local SQNR: output noise minus input noise); the first ones are where accuracy "
              "goes.</p><table><tr><th>#</th><th class='l'>tensor</th><th class='l'>op</th><th>local SQNR dB</th>"
              "<th>SQNR dB</th><th>cosine</th><th>max abs error</th><th class='l'>quantized</th></tr>\n");
    size_t shown = c->n_tensors < 30 ? c->n_tensors : 30;
    for (size_t r = 0; r < shown; r++) {
      const er_qcmp_tensor *t = &c->tensors[idx[r]];
      sb_printf(s, "<tr><td>%zu</td><td class='l'>", r + 1);
      sb_html(s, t->name);
      sb_printf(s, "</td><td class='l'>");
      sb_html(s, t->op_type);
      sb_printf(s, "</td><td>");
      sb_db(s, t->local_sqnr);
      sb_printf(s, "</td><td>");
      sb_db(s, er_qmetric_sqnr(&t->m));
      sb_printf(s, "</td><td>%.6f</td><td>%.4g</td><td class='l'>%s</td></tr>\n", er_qmetric_cosine(&t->m),
                t->m.max_abs, t->quantized ? "yes" : "");
    }
    sb_printf(s, "</table>\n");
    free(idx);
  }
  sb_printf(s, "<h2>Heatmap: layers &times; samples</h2>\n");
  html_heatmap(s, c);
  sb_printf(s, "<h2>Every compared tensor</h2><table><tr><th class='l'>tensor</th><th class='l'>op</th>"
            "<th class='l'>node</th><th>SQNR dB</th><th>local SQNR dB</th><th>cosine</th><th>max abs error</th>"
            "<th></th></tr>\n");
  for (size_t i = 0; i < c->n_tensors; i++) {
    const er_qcmp_tensor *t = &c->tensors[i];
    double v = er_qmetric_sqnr(&t->m);
    int bar = isinf(v) ? 120 : v < 0 ? 0 : v > 60 ? 120 : (int)(v * 2);
    sb_printf(s, "<tr><td class='l'>");
    sb_html(s, t->name);
    sb_printf(s, "</td><td class='l'>");
    sb_html(s, t->op_type);
    sb_printf(s, "</td><td class='l'>");
    sb_html(s, t->node);
    sb_printf(s, "</td><td>");
    sb_db(s, v);
    sb_printf(s, "</td><td>");
    sb_db(s, t->local_sqnr);
    sb_printf(s, "</td><td>%.6f</td><td>%.4g</td><td class='l'><span class='bar' style='width:%dpx'></span></td>"
              "</tr>\n", er_qmetric_cosine(&t->m), t->m.max_abs, bar);
  }
  sb_printf(s, "</table>\n");
}

/* ======================================================================== */
/* Quantization report                                                       */
/* ======================================================================== */

static const char *budget_name(er_qbudget k) {
  return k == ER_QBUDGET_SQNR_DB ? "output_sqnr_db" : k == ER_QBUDGET_ACC_POINTS ? "top1_drop_points"
                                                                                 : "relative_output_error";
}

er_status er_qreport_write_json(const er_qreport *r, const char *path) {
  sb s = {0};
  sb_printf(&s, "{\n  \"model\": ");
  sb_json_str(&s, r->model_path);
  sb_printf(&s, ",\n  \"output\": ");
  sb_json_str(&s, r->out_path);
  sb_printf(&s, ",\n  \"calibration\": {\"data\": ");
  sb_json_str(&s, r->calib_path);
  sb_printf(&s, ", \"samples\": %lld, \"method\": ", (long long)r->calib_samples);
  sb_json_str(&s, r->method);
  sb_printf(&s, "},\n  \"scheme\": {\"weights\": ");
  sb_json_str(&s, r->weights);
  sb_printf(&s, ", \"activations\": ");
  sb_json_str(&s, r->activations);
  sb_printf(&s, ", \"int4_block_size\": %d},\n", r->opts.weights == ER_QW_INT4 ? r->opts.block_size : 0);
  sb_printf(&s, "  \"prepare\": {\"constant_nodes_folded\": %d, \"affine_nodes_folded\": %d, \"opset_from\": %lld, "
            "\"opset_to\": %lld},\n", r->prepared_folds, r->affine_folds, (long long)r->opset_from,
            (long long)r->opset_to);
  sb_printf(&s, "  \"size\": {\"float_file_bytes\": %llu, \"quant_file_bytes\": %llu, \"file_ratio\": ",
            (unsigned long long)r->float_file_bytes, (unsigned long long)r->quant_file_bytes);
  sb_num(&s, r->float_file_bytes ? (double)r->quant_file_bytes / (double)r->float_file_bytes : NAN);
  sb_printf(&s, ", \"float_weight_bytes\": %llu, \"quant_weight_bytes\": %llu, \"weight_ratio\": ",
            (unsigned long long)r->float_weight_bytes, (unsigned long long)r->quant_weight_bytes);
  sb_num(&s, r->float_weight_bytes ? (double)r->quant_weight_bytes / (double)r->float_weight_bytes : NAN);
  sb_printf(&s, "},\n  \"evaluation\": ");
  if (r->cmp) {
    sb_printf(&s, "{\"data\": ");
    sb_json_str(&s, r->eval_path ? r->eval_path
                    : r->eval_on_calib ? "calibration samples" : "held-out calibration samples");
    sb_printf(&s, ", ");
    json_compare_body(&s, r->cmp);
    sb_printf(&s, "}");
  } else {
    sb_printf(&s, "null");
  }
  sb_printf(&s, ",\n  \"keep_float\": ");
  if (r->auto_keep) {
    sb_printf(&s, "{\"mode\": \"auto\", \"metric\": \"%s\", \"budget\": ", budget_name(r->budget_kind));
    sb_num(&s, r->budget);
    sb_printf(&s, ", \"all_quantized\": ");
    sb_num(&s, r->auto_metric_before);
    sb_printf(&s, ", \"final\": ");
    sb_num(&s, r->auto_metric_after);
    sb_printf(&s, ", \"met\": %s, \"kept\": [", r->budget_met ? "true" : "false");
    for (size_t i = 0; i < r->n_kept; i++) {
      if (i) sb_printf(&s, ", ");
      sb_json_str(&s, r->kept[i]);
    }
    sb_printf(&s, "]}");
  } else {
    sb_printf(&s, "null");
  }
  sb_printf(&s, ",\n  \"graph_outputs\": {\"mode\": \"%s\", \"outputs\": [",
            r->outputs_mode == ER_QOUT_QUANTIZED ? "quantized" : r->outputs_mode == ER_QOUT_FLOAT ? "float" : "auto");
  for (size_t i = 0; i < r->n_outputs; i++) {
    const er_qreport_output *o = &r->outputs[i];
    sb_printf(&s, "%s{\"name\": ", i ? ", " : "");
    sb_json_str(&s, o->name);
    sb_printf(&s, ", \"quantized\": %s, \"sqnr_db_float\": ", o->quantized ? "true" : "false");
    sb_num(&s, o->sqnr_float);
    sb_printf(&s, ", \"sqnr_db_quantized\": ");
    sb_num(&s, o->sqnr_quantized);
    sb_printf(&s, "}");
  }
  sb_printf(&s, "]}");
  sb_printf(&s, ",\n  \"layers\": [");
  for (size_t i = 0; i < r->n_layers; i++) {
    const er_qreport_layer *L = &r->layers[i];
    sb_printf(&s, "%s\n    {\"name\": ", i ? "," : "");
    sb_json_str(&s, L->name);
    sb_printf(&s, ", \"op_type\": ");
    sb_json_str(&s, L->op_type);
    sb_printf(&s, ", \"quantized\": %s, \"why_float\": ", L->quantized ? "true" : "false");
    if (L->why_float && !L->quantized) sb_json_str(&s, L->why_float);
    else sb_printf(&s, "null");
    sb_printf(&s, ", \"weight\": ");
    if (L->weight && L->quantized) {
      sb_json_str(&s, L->weight);
      sb_printf(&s, ", \"scheme\": ");
      sb_json_str(&s, L->scheme);
      sb_printf(&s, ", \"scales\": %lld, \"weight_scale_min\": ", (long long)L->channels);
      sb_num(&s, L->w_scale_min);
      sb_printf(&s, ", \"weight_scale_max\": ");
      sb_num(&s, L->w_scale_max);
      sb_printf(&s, ", \"weight_sqnr_db\": ");
      sb_num(&s, L->w_sqnr);
      sb_printf(&s, ", \"weight_bytes_float\": %llu, \"weight_bytes_quant\": %llu",
                (unsigned long long)L->w_bytes_float, (unsigned long long)L->w_bytes_quant);
    } else {
      sb_printf(&s, "null");
    }
    sb_printf(&s, ", \"bias_int32\": %s, \"sensitivity_sqnr_db\": ", L->bias_int32 && L->quantized ? "true" : "false");
    sb_num(&s, L->sensitivity);
    sb_printf(&s, ", \"output_sqnr_db\": ");
    sb_num(&s, L->out_sqnr);
    sb_printf(&s, ", \"output_cosine\": ");
    sb_num(&s, L->out_cosine);
    sb_printf(&s, ", \"output_max_abs_error\": ");
    sb_num(&s, L->out_max_abs);
    sb_printf(&s, "}");
  }
  sb_printf(&s, "\n  ],\n  \"tensors\": [");
  for (size_t i = 0; i < r->n_tensors; i++) {
    const er_qreport_tensor *t = &r->tensors[i];
    sb_printf(&s, "%s\n    {\"name\": ", i ? "," : "");
    sb_json_str(&s, t->name);
    sb_printf(&s, ", \"min\": ");
    sb_num(&s, t->min);
    sb_printf(&s, ", \"max\": ");
    sb_num(&s, t->max);
    sb_printf(&s, ", \"range\": [");
    sb_num(&s, t->lo);
    sb_printf(&s, ", ");
    sb_num(&s, t->hi);
    sb_printf(&s, "], \"scale\": ");
    sb_num(&s, t->scale);
    sb_printf(&s, ", \"zero_point\": %d, \"dtype\": \"%s\"}", (int)t->zero_point, er_dtype_name(t->dtype));
  }
  sb_printf(&s, "\n  ],\n  \"per_tensor_error\": ");
  if (r->cmp) json_layers(&s, r->cmp);
  else sb_printf(&s, "null");
  sb_printf(&s, ",\n  \"seconds\": ");
  sb_num(&s, r->seconds);
  sb_printf(&s, "\n}\n");
  return sb_save(&s, path);
}

static void html_size(sb *s, const char *what, uint64_t a, uint64_t b) {
  double ratio = a ? (double)b / (double)a : NAN;
  sb_printf(s, "<tr><td>%s</td><td>%.1f KiB &rarr; %.1f KiB (%.1f%%)</td></tr>", what, a / 1024.0, b / 1024.0,
            100 * ratio);
}

er_status er_qreport_write_html(const er_qreport *r, const char *path) {
  sb s = {0};
  sb_printf(&s, "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>edgerun quantization report"
            "</title><style>%s</style></head><body>\n<h1>Quantization report</h1>\n<table class='kv'>", css);
  sb_printf(&s, "<tr><td>model</td><td class='l'>");
  sb_html(&s, r->model_path);
  sb_printf(&s, "</td></tr><tr><td>output</td><td class='l'>");
  sb_html(&s, r->out_path);
  sb_printf(&s, "</td></tr><tr><td>calibration</td><td class='l'>");
  sb_html(&s, r->calib_path);
  sb_printf(&s, " (%lld samples, %s)</td></tr>", (long long)r->calib_samples, r->method);
  sb_printf(&s, "<tr><td>weights</td><td class='l'>%s", r->weights);
  if (r->opts.weights == ER_QW_INT4) sb_printf(&s, ", block %d", r->opts.block_size);
  sb_printf(&s, "</td></tr><tr><td>activations</td><td class='l'>%s</td></tr>", r->activations);
  sb_printf(&s, "<tr><td>prepared</td><td class='l'>%d constant nodes folded, %d BatchNorm/affine nodes folded "
            "into convolutions, opset %lld &rarr; %lld</td></tr>", r->prepared_folds, r->affine_folds,
            (long long)r->opset_from, (long long)r->opset_to);
  html_size(&s, "model file", r->float_file_bytes, r->quant_file_bytes);
  html_size(&s, "weights", r->float_weight_bytes, r->quant_weight_bytes);
  for (size_t i = 0; i < r->n_outputs; i++) {
    const er_qreport_output *o = &r->outputs[i];
    sb_printf(&s, "<tr><td>graph output ");
    sb_html(&s, o->name);
    sb_printf(&s, "</td><td class='l'>%s", o->quantized ? "quantized" : "left float");
    if (isnan(o->sqnr_quantized)) sb_printf(&s, " (as --outputs asked)</td></tr>");
    else
      sb_printf(&s, " (SQNR %.2f dB float, %.2f dB through Q/DQ)</td></tr>", o->sqnr_float, o->sqnr_quantized);
  }
  sb_printf(&s, "<tr><td>time</td><td class='l'>%.1f s</td></tr></table>\n", r->seconds);
  if (r->auto_keep) {
    sb_printf(&s, "<h2>Keep-float (auto)</h2><table class='kv'><tr><td>budget</td><td class='l'>%s %s %.4g</td></tr>",
              budget_name(r->budget_kind), r->budget_kind == ER_QBUDGET_SQNR_DB ? "&ge;" : "&le;", r->budget);
    sb_printf(&s, "<tr><td>all layers quantized</td><td class='l'>%.4g</td></tr><tr><td>final</td><td class='l'>"
              "%.4g (%s)</td></tr>", r->auto_metric_before, r->auto_metric_after,
              r->budget_met ? "<span class='good'>within budget</span>" : "<span class='bad'>budget not met</span>");
    sb_printf(&s, "<tr><td>kept float</td><td class='l'>");
    if (!r->n_kept) sb_printf(&s, "none");
    for (size_t i = 0; i < r->n_kept; i++) {
      if (i) sb_printf(&s, ", ");
      sb_html(&s, r->kept[i]);
    }
    sb_printf(&s, "</td></tr></table><p class='note'>Layers are ranked by the output SQNR each gives when it is "
              "the only quantized layer; the most sensitive are kept float until the budget holds, then each is "
              "tried back in quantized so the kept set is as small as the search finds.</p>\n");
  }
  if (r->cmp) {
    sb_printf(&s, "<h2>Accuracy against the float model</h2><p class='note'>On ");
    sb_html(&s, r->eval_path ? r->eval_path
                : r->eval_on_calib ? "the calibration samples" : "held-out calibration samples");
    sb_printf(&s, ".</p>\n");
    html_compare_tables(&s, r->cmp);
  }
  sb_printf(&s, "<h2>Layers</h2><table><tr><th class='l'>node</th><th class='l'>op</th><th class='l'>status</th>"
            "<th class='l'>weight scheme</th><th>scales</th><th>scale min</th><th>scale max</th><th>weight SQNR dB</th>"
            "<th>bytes float &rarr; quant</th><th>int32 bias</th><th>alone: output SQNR dB</th>"
            "<th>output SQNR dB</th><th>cosine</th><th>max abs err</th></tr>\n");
  for (size_t i = 0; i < r->n_layers; i++) {
    const er_qreport_layer *L = &r->layers[i];
    sb_printf(&s, "<tr><td class='l'>");
    sb_html(&s, L->name);
    sb_printf(&s, "</td><td class='l'>");
    sb_html(&s, L->op_type);
    sb_printf(&s, "</td><td class='l'>");
    if (L->quantized) sb_printf(&s, "quantized");
    else sb_html(&s, L->why_float ? L->why_float : "float");
    sb_printf(&s, "</td><td class='l'>");
    if (L->quantized && L->scheme) {
      sb_html(&s, L->scheme);
      sb_printf(&s, "</td><td>%lld</td><td>%.3g</td><td>%.3g</td><td>", (long long)L->channels, L->w_scale_min,
                L->w_scale_max);
      sb_db(&s, L->w_sqnr);
      sb_printf(&s, "</td><td>%llu &rarr; %llu</td>", (unsigned long long)L->w_bytes_float,
                (unsigned long long)L->w_bytes_quant);
    } else {
      sb_printf(&s, "</td><td></td><td></td><td></td><td></td><td></td>");
    }
    sb_printf(&s, "<td>%s</td><td>", L->bias_int32 && L->quantized ? "yes" : "");
    sb_db(&s, L->sensitivity);
    sb_printf(&s, "</td><td>");
    sb_db(&s, L->out_sqnr);
    sb_printf(&s, "</td><td>");
    if (isnan(L->out_cosine)) sb_printf(&s, "-");
    else sb_printf(&s, "%.6f", L->out_cosine);
    sb_printf(&s, "</td><td>");
    if (isnan(L->out_max_abs)) sb_printf(&s, "-");
    else sb_printf(&s, "%.4g", L->out_max_abs);
    sb_printf(&s, "</td></tr>\n");
  }
  sb_printf(&s, "</table>\n<h2>Activation ranges</h2><table><tr><th class='l'>tensor</th><th>observed min</th>"
            "<th>observed max</th><th>range</th><th>scale</th><th>zero point</th><th class='l'>type</th></tr>\n");
  for (size_t i = 0; i < r->n_tensors; i++) {
    const er_qreport_tensor *t = &r->tensors[i];
    sb_printf(&s, "<tr><td class='l'>");
    sb_html(&s, t->name);
    sb_printf(&s, "</td><td>%.5g</td><td>%.5g</td><td>[%.5g, %.5g]</td><td>%.5g</td><td>%d</td><td class='l'>%s"
              "</td></tr>\n", t->min, t->max, t->lo, t->hi, t->scale, (int)t->zero_point, er_dtype_name(t->dtype));
  }
  sb_printf(&s, "</table>\n<p class='note'>Written by edgerun %s.</p></body></html>\n", er_version());
  return sb_save(&s, path);
}

/* ======================================================================== */
/* Analysis report                                                           */
/* ======================================================================== */

er_status er_qcompare_write_json(const er_qcompare *c, const char *float_path, const char *quant_path,
                                  const char *path) {
  sb s = {0};
  sb_printf(&s, "{\n  \"float\": ");
  sb_json_str(&s, float_path);
  sb_printf(&s, ",\n  \"quant\": ");
  sb_json_str(&s, quant_path);
  sb_printf(&s, ",\n  ");
  json_compare_body(&s, c);
  sb_printf(&s, ",\n  \"layers\": ");
  json_layers(&s, c);
  sb_printf(&s, ",\n  \"ranking\": [");
  size_t *idx = ranking(c);
  for (size_t i = 0; idx && i < c->n_tensors; i++) {
    if (i) sb_printf(&s, ", ");
    sb_json_str(&s, c->tensors[idx[i]].name);
  }
  free(idx);
  sb_printf(&s, "]\n}\n");
  return sb_save(&s, path);
}

er_status er_qcompare_write_html(const er_qcompare *c, const char *float_path, const char *quant_path,
                                  const char *path) {
  sb s = {0};
  sb_printf(&s, "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>edgerun analysis</title>"
            "<style>%s</style></head><body>\n<h1>Float vs quantized: where the error comes from</h1>\n"
            "<table class='kv'><tr><td>float model</td><td class='l'>", css);
  sb_html(&s, float_path);
  sb_printf(&s, "</td></tr><tr><td>quantized model</td><td class='l'>");
  sb_html(&s, quant_path);
  sb_printf(&s, "</td></tr></table>\n");
  html_compare_tables(&s, c);
  sb_printf(&s, "<p class='note'>Written by edgerun %s.</p></body></html>\n", er_version());
  return sb_save(&s, path);
}
