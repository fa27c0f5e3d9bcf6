/* llm-ranges.c - activation ranges of a decoder over calibration text, and
 * what fp16 would make of them: the largest magnitude of every site of the
 * forward pass (norm outputs, projections, the attention output, the
 * SwiGLU product, the residual stream), how many values lie beyond fp16's
 * range or below its normal range, and the relative error of rounding the
 * site to fp16. `edgerun analyze MODEL.gguf` prints them; quantize's
 * fp16_safe chooses its scales from them.
 *
 * The sites come from the forward pass's observer (llm/llm-observe.h): a
 * product's input and output, named by the role of the weight. The input
 * of attn_k/attn_v and of ffn_up is the same vector as attn_q's and
 * ffn_gate's, so it is measured once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "quant/llm-quant.h"

typedef struct site_acc {
  er_llm_act_range r;
  double err2, sig2;           /* sums of the fp16 rounding error and the signal, squared */
} site_acc;

struct er_llm_ranges {
  site_acc *s;
  size_t n, cap;
  int64_t chunks, tokens;
  er_status failed;
};

/* Weight role -> the sites of its input (NULL: measured at another weight)
 * and output. */
typedef struct role {
  const char *weight;          /* the part after "blk.N." */
  const char *in, *in_what;
  const char *out, *out_what;
} role;

static const role ROLES[] = {
    {"attn_q.weight", "attn_norm.output", "attention norm output", "attn_q.output", "query projection"},
    {"attn_k.weight", NULL, NULL, "attn_k.output", "key projection"},
    {"attn_v.weight", NULL, NULL, "attn_v.output", "value projection"},
    {"attn_output.weight", "attn.output", "attention output", "attn_output.output", "attention output projection"},
    {"attn_residual", "attn_residual", "residual stream after attention", NULL, NULL},
    {"ffn_gate.weight", "ffn_norm.output", "FFN norm output", "ffn_gate.output", "FFN gate projection"},
    {"ffn_up.weight", NULL, NULL, "ffn_up.output", "FFN up projection"},
    {"ffn_down.weight", "ffn_down.input", "SwiGLU product (gate x up)", "ffn_down.output", "FFN down projection"},
    {"ffn_residual", "ffn_residual", "residual stream after the FFN", NULL, NULL},
};

er_llm_ranges *er__llm_ranges_new(void) { return calloc(1, sizeof(er_llm_ranges)); }

void er__llm_ranges_free(er_llm_ranges *rg) {
  if (!rg) return;
  free(rg->s);
  free(rg);
}

er_status er__llm_ranges_status(const er_llm_ranges *rg) { return rg->failed; }

void er__llm_ranges_set_counts(er_llm_ranges *rg, int64_t chunks, int64_t tokens) {
  rg->chunks = chunks;
  rg->tokens = tokens;
  for (size_t i = 0; i < rg->n; i++) {
    site_acc *a = &rg->s[i];
    a->r.fp16_rel_rms = a->sig2 > 0 ? sqrt(a->err2 / a->sig2) : 0.0;
  }
}

size_t er__llm_ranges_count(const er_llm_ranges *rg) { return rg->n; }

const er_llm_act_range *er__llm_ranges_at(const er_llm_ranges *rg, size_t i) {
  return i < rg->n ? &rg->s[i].r : NULL;
}

const er_llm_act_range *er__llm_ranges_find(const er_llm_ranges *rg, const char *site) {
  for (size_t i = 0; i < rg->n; i++)
    if (strcmp(rg->s[i].r.site, site) == 0) return &rg->s[i].r;
  return NULL;
}

static site_acc *site_get(er_llm_ranges *rg, const char *site, const char *what, int layer) {
  for (size_t i = rg->n; i-- > 0;)
    if (strcmp(rg->s[i].r.site, site) == 0) return &rg->s[i];
  if (rg->n == rg->cap) {
    size_t cap = rg->cap ? 2 * rg->cap : 64;
    site_acc *ns = realloc(rg->s, cap * sizeof *ns);
    if (!ns) return NULL;
    rg->s = ns;
    rg->cap = cap;
  }
  site_acc *a = &rg->s[rg->n++];
  memset(a, 0, sizeof *a);
  snprintf(a->r.site, sizeof a->r.site, "%s", site);
  a->r.what = what;
  a->r.layer = layer;
  return a;
}

/* n rows of `cols` values, `ld` apart. */
static void add_rows(site_acc *a, const float *v, int64_t n, int64_t cols, int64_t ld) {
  double mx = a->r.max_abs, err2 = 0, sig2 = 0;
  int64_t over = 0, sub = 0, zero = 0;
  for (int64_t t = 0; t < n; t++) {
    const float *p = v + t * ld;
    for (int64_t j = 0; j < cols; j++) {
      const float x = p[j], ax = fabsf(x);
      if (ax > mx) mx = ax;
      if (!(ax < 65520.0f)) { /* inf in fp16 (and NaN) */
        over++;
        continue;
      }
      if (ax != 0 && ax < 0x1p-14f) {
        sub++;
        if (ax <= 0x1p-25f) zero++;
      }
      const double e = (double)x - (double)er__f16_to_f32(er__f32_to_f16(x));
      err2 += e * e;
      sig2 += (double)x * (double)x;
    }
  }
  a->r.max_abs = mx;
  a->r.count += n * cols;
  a->r.over_fp16 += over;
  a->r.subnormal_fp16 += sub;
  a->r.zero_fp16 += zero;
  a->err2 += err2;
  a->sig2 += sig2;
}

static void record(er_llm_ranges *rg, const char *site, const char *what, int layer, const float *v, int64_t n,
                   int64_t cols, int64_t ld) {
  site_acc *a = site_get(rg, site, what, layer);
  if (!a) {
    rg->failed = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the activation ranges of '%s'", site);
    return;
  }
  add_rows(a, v, n, cols, ld);
}

void er__llm_ranges_observe(er_llm_ranges *rg, const char *weight, const float *x, int64_t n, int64_t cols,
                            const float *y, int64_t rows, int64_t ldy) {
  if (rg->failed != ER_STATUS_OK) return;
  char site[64];
  if (strcmp(weight, "output.weight") == 0) {
    record(rg, "output_norm.output", "output norm output", -1, x, n, cols, cols);
    if (y) record(rg, "output.logits", "logits", -1, y, n, rows, ldy);
    return;
  }
  int layer = -1, used = 0;
  if (sscanf(weight, "blk.%d.%n", &layer, &used) != 1 || used == 0 || layer < 0) {
    layer = -1; /* outside the blocks: only the generic sites below */
    used = 0;
  }
  const char *part = weight + used;
  for (size_t i = 0; layer >= 0 && i < sizeof ROLES / sizeof ROLES[0]; i++) {
    const role *ro = &ROLES[i];
    if (strcmp(part, ro->weight) != 0) continue;
    if (ro->in) {
      snprintf(site, sizeof site, "blk.%d.%s", layer, ro->in);
      record(rg, site, ro->in_what, layer, x, n, cols, cols);
    }
    if (ro->out && y && rg->failed == ER_STATUS_OK) {
      snprintf(site, sizeof site, "blk.%d.%s", layer, ro->out);
      record(rg, site, ro->out_what, layer, y, n, rows, ldy);
    }
    return;
  }
  /* A weight the roles do not know: its product's input and output. */
  snprintf(site, sizeof site, "%.50s.input", weight);
  record(rg, site, "product input", layer, x, n, cols, cols);
  if (y && rg->failed == ER_STATUS_OK) {
    snprintf(site, sizeof site, "%.50s.output", weight);
    record(rg, site, "product output", layer, y, n, rows, ldy);
  }
}

/* ---- the public entry ------------------------------------------------------- */

er_status er_llm_analyze(const er_llm *llm, const char *text_path, const er_llm_analyze_options *opts,
                         er_llm_analyze_result *res) {
  if (!llm || !text_path || !res)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "er_llm_analyze needs a model, a text path and a result");
  memset(res, 0, sizeof *res);
  er_llm_imatrix_options io = {0};
  if (opts) {
    io.n_ctx = opts->n_ctx;
    io.max_chunks = opts->max_chunks;
    io.threads = opts->threads;
    io.progress = opts->progress;
  }
  er_llm_ranges *rg = NULL;
  ER_CHECK(er__llm_calibrate(llm, text_path, &io, NULL, &rg));
  res->ranges = malloc((rg->n ? rg->n : 1) * sizeof *res->ranges);
  if (!res->ranges) {
    er__llm_ranges_free(rg);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for %zu activation ranges", rg->n);
  }
  for (size_t i = 0; i < rg->n; i++) res->ranges[i] = rg->s[i].r;
  res->n_ranges = rg->n;
  res->chunks = rg->chunks;
  res->tokens = rg->tokens;
  er__llm_ranges_free(rg);
  return ER_STATUS_OK;
}

void er_llm_analyze_result_free(er_llm_analyze_result *res) {
  if (!res) return;
  free(res->ranges);
  res->ranges = NULL;
  res->n_ranges = 0;
}
