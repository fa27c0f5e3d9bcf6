/* kcases-rnn.c - cases for LSTM and GRU: directions (forward, reverse,
 * bidirectional), both layouts, batches below, at and above the four rows
 * a product step takes, hidden sizes around the vector width, with and
 * without bias and initial states, one output or all, the default
 * activations spelled out, both GRU reset forms (linear_before_reset);
 * and near misses the optimized kernels leave to the reference (clip,
 * other activations, peepholes, sequence_lens). */
#include <math.h>
#include <stdlib.h>

#include "kcases.h"

typedef struct lstm_spec {
  int64_t seq, batch, input, hidden;
  const char *direction;
  int layout;
  bool bias, initial, all_outputs;
} lstm_spec;

static const lstm_spec specs[] = {
    {1, 1, 64, 64, "forward", 0, true, true, true},       /* Silero VAD's step */
    {4, 1, 7, 5, "forward", 0, false, false, false},
    {3, 3, 16, 16, "reverse", 0, true, false, true},
    {5, 6, 9, 33, "bidirectional", 0, true, true, true},  /* batch past 4 rows */
    {2, 4, 12, 17, "forward", 1, true, true, true},       /* batch-major layout */
    {3, 2, 20, 8, "bidirectional", 1, false, true, true},
    /* ddddocr's recognizer in small: 25 steps of one row, the input
     * products of all steps one SGEMM; 4h = 256 whole panels. */
    {25, 1, 48, 64, "bidirectional", 0, true, false, false},
    /* 4h = 400: a partial last panel; 80K multiply-adds a step, split over
     * the workers; 14 rows of X: a full SGEMM tile on AVX-512. */
    {7, 2, 40, 100, "forward", 1, true, true, true},
    {1, 3, 33, 31, "reverse", 0, false, false, true},  /* 3 rows: no SGEMM */
};

static void add_lstm(kcase *c, const lstm_spec *s, int dirs) {
  int64_t x0 = s->layout ? s->batch : s->seq, x1 = s->layout ? s->seq : s->batch;
  kc_input(c, 3, DIMS(x0, x1, s->input), -1, 1, false);
  kc_input(c, 3, DIMS(dirs, 4 * s->hidden, s->input), -0.4f, 0.4f, true);
  kc_input(c, 3, DIMS(dirs, 4 * s->hidden, s->hidden), -0.4f, 0.4f, true);
  if (s->bias) kc_input(c, 2, DIMS(dirs, 8 * s->hidden), -0.5f, 0.5f, true);
  else kc_input_none(c);
  kc_input_none(c); /* sequence_lens */
  if (s->initial) {
    int64_t h0 = s->layout ? s->batch : dirs, h1 = s->layout ? dirs : s->batch;
    kc_input(c, 3, DIMS(h0, h1, s->hidden), -1, 1, false);
    kc_input(c, 3, DIMS(h0, h1, s->hidden), -1, 1, false);
  }
  kc_attr_int(c, "hidden_size", s->hidden);
  kc_attr_string(c, "direction", s->direction);
  if (s->layout) kc_attr_int(c, "layout", 1);
  c->n_out = s->all_outputs ? 3 : 1;
  /* float32 products and vector sigmoid/tanh against the double
   * reference, through a few recurrent steps: a normalized bound. */
  c->tol = TOL_REDUCE;
}

static void gen_lstm(case_fn fn, void *arg) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++) {
    const lstm_spec *s = &specs[i];
    int dirs = strcmp(s->direction, "bidirectional") == 0 ? 2 : 1;
    kc_begin(&c, "LSTM", "", 14, "LSTM seq %lld batch %lld input %lld hidden %lld %s layout %d%s%s",
             (long long)s->seq, (long long)s->batch, (long long)s->input, (long long)s->hidden, s->direction,
             s->layout, s->bias ? " bias" : "", s->initial ? " initial" : "");
    add_lstm(&c, s, dirs);
    fn(&c, arg);
  }
  /* The default activations written out. */
  kc_begin(&c, "LSTM", "", 14, "LSTM activations Sigmoid,Tanh,Tanh written out");
  add_lstm(&c, &specs[1], 1);
  static const char *const acts[] = {"Sigmoid", "Tanh", "Tanh"};
  kc_attr_strings(&c, "activations", 3, acts);
  fn(&c, arg);
  /* Near misses: the reference runs them (reported as outside). */
  kc_begin(&c, "LSTM", "", 14, "LSTM with clip");
  add_lstm(&c, &specs[2], 1);
  kc_attr_float(&c, "clip", 0.5f);
  fn(&c, arg);
  kc_begin(&c, "LSTM", "", 14, "LSTM with Relu activations");
  add_lstm(&c, &specs[1], 1);
  static const char *const relu[] = {"Sigmoid", "Relu", "Tanh"};
  kc_attr_strings(&c, "activations", 3, relu);
  fn(&c, arg);
}

/* ---- GRU ------------------------------------------------------------------ */

/* The LSTM shapes with 3 gates, linear_before_reset alternating. */
static void add_gru(kcase *c, const lstm_spec *s, int dirs, int lbr) {
  int64_t x0 = s->layout ? s->batch : s->seq, x1 = s->layout ? s->seq : s->batch;
  kc_input(c, 3, DIMS(x0, x1, s->input), -1, 1, false);
  kc_input(c, 3, DIMS(dirs, 3 * s->hidden, s->input), -0.4f, 0.4f, true);
  kc_input(c, 3, DIMS(dirs, 3 * s->hidden, s->hidden), -0.4f, 0.4f, true);
  if (s->bias) kc_input(c, 2, DIMS(dirs, 6 * s->hidden), -0.5f, 0.5f, true);
  else kc_input_none(c);
  kc_input_none(c); /* sequence_lens */
  if (s->initial) {
    int64_t h0 = s->layout ? s->batch : dirs, h1 = s->layout ? dirs : s->batch;
    kc_input(c, 3, DIMS(h0, h1, s->hidden), -1, 1, false);
  }
  kc_attr_int(c, "hidden_size", s->hidden);
  kc_attr_string(c, "direction", s->direction);
  if (s->layout) kc_attr_int(c, "layout", 1);
  if (lbr) kc_attr_int(c, "linear_before_reset", 1);
  c->n_out = s->all_outputs ? 2 : 1;
  c->tol = TOL_REDUCE;
}

static void gen_gru(case_fn fn, void *arg) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++) {
    const lstm_spec *s = &specs[i];
    int dirs = strcmp(s->direction, "bidirectional") == 0 ? 2 : 1;
    for (int lbr = 0; lbr < 2; lbr++) {
      kc_begin(&c, "GRU", "", 14, "GRU seq %lld batch %lld input %lld hidden %lld %s layout %d%s%s%s",
               (long long)s->seq, (long long)s->batch, (long long)s->input, (long long)s->hidden, s->direction,
               s->layout, s->bias ? " bias" : "", s->initial ? " initial" : "", lbr ? " linear_before_reset" : "");
      add_gru(&c, s, dirs, lbr);
      fn(&c, arg);
    }
  }
  kc_begin(&c, "GRU", "", 14, "GRU activations Sigmoid,Tanh written out");
  add_gru(&c, &specs[3], 2, 1);
  static const char *const acts[] = {"Sigmoid", "Tanh", "Sigmoid", "Tanh"};
  kc_attr_strings(&c, "activations", 4, acts);
  fn(&c, arg);
  /* Near misses: the reference runs them (reported as outside). */
  kc_begin(&c, "GRU", "", 14, "GRU with clip");
  add_gru(&c, &specs[2], 1, 0);
  kc_attr_float(&c, "clip", 0.5f);
  fn(&c, arg);
  kc_begin(&c, "GRU", "", 14, "GRU with HardSigmoid activations");
  add_gru(&c, &specs[1], 1, 1);
  static const char *const hs[] = {"HardSigmoid", "Tanh"};
  kc_attr_strings(&c, "activations", 2, hs);
  fn(&c, arg);
}

/* ---- com.microsoft DynamicQuantizeLSTM ------------------------------------- */

/* A constant 8-bit tensor of random values in [lo, hi]. */
static er_tensor *q8_const(kcase *c, er_dtype t, int rank, const int64_t *dims, int lo, int hi) {
  er_tensor *x = kc_input(c, rank, dims, (float)lo, (float)hi + 0.999f, true);
  int64_t n = er__tensor_count(x);
  uint8_t *d = calloc(1, n > 0 ? (size_t)n : 1);
  const float *f = x->data;
  for (int64_t i = 0; i < n; i++) {
    int v = (int)floorf(f[i]);
    d[i] = t == ER_DTYPE_INT8 ? (uint8_t)(int8_t)v : (uint8_t)v;
  }
  free(x->data);
  x->data = d;
  x->dtype = t;
  x->nbytes = (size_t)n;
  return x;
}

/* The integer products on the GEMM against the plain loops: int8 and
 * uint8 weights, per-direction and per-column scales, weight zero points
 * of 0 and not, 4H below, at and past a panel, batches of 1 to 3 with
 * sequence lengths, initial states, peepholes and clip. Both share the
 * recurrence's arithmetic. */
static void gen_dqlstm(case_fn fn, void *arg) {
  static const struct {
    int64_t seq, batch, input, hidden;
    const char *direction;
    er_dtype wt;
    bool per_column, wzp, bias, initial, lens, peep, clip;
  } v[] = {
      {5, 1, 40, 16, "bidirectional", ER_DTYPE_INT8, false, false, true, false, false, false, false},
      {4, 3, 33, 9, "forward", ER_DTYPE_UINT8, true, true, true, true, true, false, false},
      {6, 2, 17, 20, "reverse", ER_DTYPE_INT8, true, true, false, false, false, true, true},
      {25, 1, 64, 32, "bidirectional", ER_DTYPE_UINT8, false, true, true, true, false, false, false},
  };
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(v); i++) {
    int dirs = strcmp(v[i].direction, "bidirectional") == 0 ? 2 : 1;
    int64_t gh = 4 * v[i].hidden, qn = v[i].per_column ? 2 : 1;
    int lo = v[i].wt == ER_DTYPE_INT8 ? -127 : 0, hi = v[i].wt == ER_DTYPE_INT8 ? 127 : 255;
    kc_begin(&c, "DynamicQuantizeLSTM", "com.microsoft", 1, "DynamicQuantizeLSTM #%zu %s %s %s", i, v[i].direction,
             v[i].wt == ER_DTYPE_INT8 ? "s8" : "u8", v[i].per_column ? "per-column" : "per-direction");
    kc_input(&c, 3, DIMS(v[i].seq, v[i].batch, v[i].input), -2, 2, false);
    q8_const(&c, v[i].wt, 3, DIMS(dirs, v[i].input, gh), lo, hi);
    q8_const(&c, v[i].wt, 3, DIMS(dirs, v[i].hidden, gh), lo, hi);
    if (v[i].bias) kc_input(&c, 2, DIMS(dirs, 2 * gh), -0.5f, 0.5f, true);
    else kc_input_none(&c);
    if (v[i].lens) kc_input_i64(&c, 1, DIMS(v[i].batch), DIMS(4, 1, 3), true);
    else kc_input_none(&c);
    if (v[i].initial) {
      kc_input(&c, 3, DIMS(dirs, v[i].batch, v[i].hidden), -1, 1, false);
      kc_input(&c, 3, DIMS(dirs, v[i].batch, v[i].hidden), -1, 1, false);
    } else {
      kc_input_none(&c);
      kc_input_none(&c);
    }
    if (v[i].peep) kc_input(&c, 2, DIMS(dirs, 3 * v[i].hidden), -0.3f, 0.3f, true);
    else kc_input_none(&c);
    int zlo = v[i].wzp ? lo / 4 + (hi - lo) / 8 : (v[i].wt == ER_DTYPE_INT8 ? 0 : 128), zhi = v[i].wzp ? zlo + 40 : zlo;
    for (int w = 0; w < 2; w++) {
      kc_input(&c, (int)qn, qn == 2 ? DIMS(dirs, gh) : DIMS(dirs), 0.002f, 0.01f, true);
      q8_const(&c, v[i].wt, (int)qn, qn == 2 ? DIMS(dirs, gh) : DIMS(dirs), zlo, zhi);
    }
    kc_attr_int(&c, "hidden_size", v[i].hidden);
    kc_attr_string(&c, "direction", v[i].direction);
    if (v[i].clip) kc_attr_float(&c, "clip", 1.5f);
    c.n_out = 3;
    /* The kernel's default-activation steps use vector sigmoid and tanh
     * (a few ulp from libm's), and each step's hidden state is quantized
     * again, so a last-bit difference can move one value by a quantization
     * step: a normalized bound, as for the float LSTM. Peepholes and clip
     * take the shared scalar loops. */
    c.tol = TOL_REDUCE;
    fn(&c, arg);
  }
}

const case_gen kcases_rnn[] = {
    {"LSTM", "", gen_lstm},
    {"GRU", "", gen_gru},
    {"DynamicQuantizeLSTM", "com.microsoft", gen_dqlstm},
    {NULL, NULL, NULL},
};
