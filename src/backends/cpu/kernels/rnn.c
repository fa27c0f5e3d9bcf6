/* rnn.c - optimized CPU kernels of the "rnn" group: float32 LSTM.
 *
 * The reference LSTM (src/ops/rnn.c) computes in double and converts the
 * weights on every run; voice-activity and keyword models call a small
 * LSTM once per audio chunk, so that conversion was most of their time.
 * This kernel keeps the weights in float32, transposed once at compile
 * time to [input, 4 * hidden] so that products stream their rows
 * (er_gemv): the input products of all steps first, four rows of X per
 * pass over W, then per step h R^T for up to four batch rows at a time,
 * and the gates with vector sigmoid and tanh (er_vec_ops.lstm_cell).
 *
 * Taken: default activations (Sigmoid, Tanh, Tanh), no clip, no coupled
 * input/forget gate, no peepholes, no sequence_lens, constant W and R (and
 * B), either layout, any direction. Anything else runs on the reference. */
#include "backends/cpu/kernels/kernel-groups.h"
#include "backends/cpu/kernels/kutil.h"
#include "backends/cpu/kernels/vec.h"

enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ_LENS, IN_INITIAL_H, IN_INITIAL_C, IN_P };

typedef struct lstm_state {
  const er_vec_ops *ops;
  int dirs;
  bool reverse;
  int layout;
  int64_t h, i;
  float *wt;          /* [dirs][i][4h]: W transposed */
  float *rt;          /* [dirs][h][4h]: R transposed */
  float *bias;        /* [dirs][4h]: Wb + Rb */
} lstm_state;

static bool default_activations(const er_kernel_info *ki, int dirs) {
  const er_attr *a = er__node_attr(ki->node, "activations");
  if (!a) return true;
  static const char *const want[3] = {"Sigmoid", "Tanh", "Tanh"};
  if (a->type != ER_ATTR_STRINGS || a->n != 3 * dirs) return false;
  for (int64_t k = 0; k < a->n; k++)
    if (strcmp(a->strings[k], want[k % 3]) != 0) return false;
  return true;
}

static bool lstm_config(const er_kernel_info *ki, int *dirs, bool *reverse, int *layout) {
  er_kctx ctx = er__ki_ctx(ki);
  const char *dir;
  int64_t v;
  if (er__attr_string(&ctx, "direction", "forward", &dir) != ER_STATUS_OK) return false;
  *dirs = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
  *reverse = strcmp(dir, "reverse") == 0;
  if (er__attr_int(&ctx, "layout", 0, &v) != ER_STATUS_OK || (v != 0 && v != 1)) return false;
  *layout = (int)v;
  if (er__node_attr(ki->node, "clip")) return false;
  if (er__attr_int(&ctx, "input_forget", 0, &v) != ER_STATUS_OK || v != 0) return false;
  return default_activations(ki, *dirs);
}

static bool lstm_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !er__ki_f32(ki, IN_X) || !er__ki_out_f32(ki)) return false;
  const er_tensor *w = er__ki_in(ki, IN_W), *r = er__ki_in(ki, IN_R), *b = er__ki_in(ki, IN_B);
  if (!w || !r || !w->data || !r->data || w->dtype != ER_DTYPE_FLOAT || r->dtype != ER_DTYPE_FLOAT) return false;
  if (w->rank != 3 || r->rank != 3 || w->dims[1] != r->dims[1] || r->dims[1] != 4 * r->dims[2]) return false;
  if (b && (!b->data || b->dtype != ER_DTYPE_FLOAT || b->rank != 2 || b->dims[1] != 8 * r->dims[2])) return false;
  if (er__ki_in(ki, IN_SEQ_LENS) || er__ki_in(ki, IN_P)) return false;
  for (int k = IN_INITIAL_H; k <= IN_INITIAL_C; k++)
    if (er__ki_in(ki, k) && !er__ki_f32(ki, k)) return false;
  int dirs, layout;
  bool reverse;
  return lstm_config(ki, &dirs, &reverse, &layout) && w->dims[0] == dirs && r->dims[0] == dirs &&
         (!b || b->dims[0] == dirs);
}

static er_status lstm_prepare(const er_kernel_info *ki, const er_vec_ops *ops, void **state_out,
                              size_t *scratch_out) {
  lstm_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for an LSTM kernel");
  lstm_config(ki, &s->dirs, &s->reverse, &s->layout);
  const er_tensor *w = ki->in[IN_W], *r = ki->in[IN_R], *b = er__ki_in(ki, IN_B);
  s->ops = ops;
  s->h = r->dims[2];
  s->i = w->dims[2];
  const int64_t g = 4 * s->h, D = s->dirs;
  s->wt = er__aligned_alloc((size_t)(D * s->i * g) * sizeof(float));
  s->rt = er__aligned_alloc((size_t)(D * s->h * g) * sizeof(float));
  s->bias = er__aligned_alloc((size_t)(D * g) * sizeof(float));
  if (!s->wt || !s->rt || !s->bias) {
    er__aligned_free(s->wt);
    er__aligned_free(s->rt);
    er__aligned_free(s->bias);
    free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "LSTM '%s': out of memory for its weights", ki->node->name);
  }
  const float *wd = w->data, *rd = r->data, *bd = b ? b->data : NULL;
  for (int64_t d = 0; d < D; d++) {
    for (int64_t j = 0; j < g; j++) {
      for (int64_t k = 0; k < s->i; k++) s->wt[(d * s->i + k) * g + j] = wd[(d * g + j) * s->i + k];
      for (int64_t k = 0; k < s->h; k++) s->rt[(d * s->h + k) * g + j] = rd[(d * g + j) * s->h + k];
      s->bias[d * g + j] = bd ? bd[d * 2 * g + j] + bd[d * 2 * g + g + j] : 0.0f;
    }
  }
  *scratch_out = 0; /* per run: depends on the batch */
  *state_out = s;
  return ER_STATUS_OK;
}

static void lstm_release(void *state) {
  lstm_state *s = state;
  if (!s) return;
  er__aligned_free(s->wt);
  er__aligned_free(s->rt);
  er__aligned_free(s->bias);
  free(s);
}

/* Products of at least this many multiply-adds split their columns over
 * the workers (each streams its share of the weights); smaller ones cost
 * less than waking a worker. */
#define LSTM_MIN_PARALLEL_MACS (INT64_C(1) << 15)
#define LSTM_COL_BLOCK 32

typedef struct gemv_job {
  const er_vec_ops *ops;
  const er_gemv *g;
} gemv_job;

static void gemv_chunk(void *arg, int64_t begin, int64_t end) {
  const gemv_job *j = arg;
  int64_t j1 = end * LSTM_COL_BLOCK < j->g->n ? end * LSTM_COL_BLOCK : j->g->n;
  j->ops->gemv(j->g, begin * LSTM_COL_BLOCK, j1);
}

/* g's columns, split over the pool when the product is large enough. */
static void gemv_cols(const lstm_state *s, er_thread_pool *pool, const er_gemv *g) {
  if (er__pool_threads(pool) < 2 || g->m * g->n * g->k < LSTM_MIN_PARALLEL_MACS) {
    s->ops->gemv(g, 0, g->n);
    return;
  }
  gemv_job j = {s->ops, g};
  er__parallel_for(pool, (g->n + LSTM_COL_BLOCK - 1) / LSTM_COL_BLOCK, 1, gemv_chunk, &j);
}

static er_status lstm_run(const er_kernel_run *kr) {
  const lstm_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[IN_X], *h0 = er__in(ctx, IN_INITIAL_H), *c0 = er__in(ctx, IN_INITIAL_C);
  er_tensor *y = er__out(ctx, 0), *yh = er__out(ctx, 1), *yc = er__out(ctx, 2);
  if (x->rank != 3 || x->dims[2] != s->i) return er__kr_reference(kr);
  const bool lay1 = s->layout == 1;
  const int64_t S = x->dims[lay1 ? 1 : 0], N = x->dims[lay1 ? 0 : 1], I = s->i, H = s->h, G = 4 * H;
  const int D = s->dirs;
  if (N == 0) return ER_STATUS_OK;
  if (S == 0) return er__kr_reference(kr); /* Y_h / Y_c of empty sequences: the reference's rule */
  /* h, c [N, H]; the input products of every step [S * N, 4H] (one
   * pass over W for four rows at a time, not one row per step); the gates
   * of one step [N, 4H]. */
  size_t floats = (size_t)(2 * N * H + S * N * G + N * G);
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, floats * sizeof(float), &scratch, &slots, &owned));
  float *h = scratch, *c = h + N * H, *gx = c + N * H, *g2 = gx + S * N * G;
  const float *xd = x->data;
  for (int d = 0; d < D; d++) {
    bool backward = s->reverse || d == 1;
    /* Initial state rows: [dirs, N, H] (layout 0) or [N, dirs, H]. */
    for (int64_t b = 0; b < N; b++) {
      int64_t off = (lay1 ? b * D + d : d * N + b) * H;
      if (h0) memcpy(h + b * H, (const float *)h0->data + off, (size_t)H * sizeof(float));
      else memset(h + b * H, 0, (size_t)H * sizeof(float));
      if (c0) memcpy(c + b * H, (const float *)c0->data + off, (size_t)H * sizeof(float));
      else memset(c + b * H, 0, (size_t)H * sizeof(float));
    }
    const float *wt = s->wt + (size_t)(d * I * G), *rt = s->rt + (size_t)(d * H * G), *bias = s->bias + d * G;
    /* x W^T + Wb + Rb for every row of X, in X's own row order. */
    for (int64_t r0 = 0; r0 < S * N; r0 += ER_GEMV_MAX_M) {
      er_gemv gi;
      memset(&gi, 0, sizeof gi);
      gi.m = S * N - r0 < ER_GEMV_MAX_M ? S * N - r0 : ER_GEMV_MAX_M, gi.n = G, gi.k = I;
      gi.a = xd + r0 * I, gi.a_rs = I, gi.a_cs = 1;
      gi.b = wt, gi.b_rs = G, gi.b_cs = 1;
      gi.c = gx + r0 * G, gi.ldc = G;
      gi.scale = 1.0f;
      gi.bias = bias;
      gemv_cols(s, kr->pool, &gi);
    }
    for (int64_t t = 0; t < S; t++) {
      int64_t pos = backward ? S - 1 - t : t;
      for (int64_t b0 = 0; b0 < N; b0 += ER_GEMV_MAX_M) {
        int64_t m = N - b0 < ER_GEMV_MAX_M ? N - b0 : ER_GEMV_MAX_M;
        er_gemv gh;
        memset(&gh, 0, sizeof gh);
        gh.m = m, gh.n = G, gh.k = H;
        gh.a = h + b0 * H, gh.a_rs = H, gh.a_cs = 1;
        gh.b = rt, gh.b_rs = G, gh.b_cs = 1;
        gh.c = g2 + b0 * G, gh.ldc = G;
        gh.scale = 1.0f;
        gh.add = gx + (lay1 ? b0 * S + pos : pos * N + b0) * G;
        gh.add_rs = lay1 ? S * G : G, gh.add_cs = 1, gh.beta = 1.0f;
        gemv_cols(s, kr->pool, &gh);
      }
      for (int64_t b = 0; b < N; b++) {
        s->ops->lstm_cell(g2 + b * G, c + b * H, h + b * H, H);
        if (y) {
          int64_t off = (lay1 ? (b * S + pos) * D + d : (pos * D + d) * N + b) * H;
          memcpy((float *)y->data + off, h + b * H, (size_t)H * sizeof(float));
        }
      }
    }
    for (int64_t b = 0; b < N; b++) {
      int64_t off = (lay1 ? b * D + d : d * N + b) * H;
      if (yh) memcpy((float *)yh->data + off, h + b * H, (size_t)H * sizeof(float));
      if (yc) memcpy((float *)yc->data + off, c + b * H, (size_t)H * sizeof(float));
    }
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

#define DEFINE_RNN_KERNELS(SFX, ISA, VO, ISA_OK)                                                          \
  static bool lstm_supports_##SFX(const er_kernel_info *ki) { return lstm_supports(ki, ISA_OK(ki->cpu)); } \
  static er_status lstm_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {           \
    return lstm_prepare(ki, &VO, st, scratch);                                                          \
  }                                                                                                     \
  static const er_cpu_kernel k_lstm_##SFX = {"f32_lstm__" ISA, "LSTM", "", lstm_supports_##SFX,           \
                                            lstm_prepare_##SFX, lstm_run, lstm_release};

#if defined(__x86_64__) || defined(__i386__)
DEFINE_RNN_KERNELS(avx512, "avx512", er__vec_avx512, er__cpu_has_avx512)
DEFINE_RNN_KERNELS(avx2, "avx2", er__vec_avx2, er__cpu_has_avx2)
#endif
#if defined(__aarch64__)
static bool has_neon(const er_cpu_features *c) { return c->neon; }
DEFINE_RNN_KERNELS(neon, "neon", er__vec_neon, has_neon)
#endif

const er_cpu_kernel *const er__kernels_rnn[] = {
#if defined(__x86_64__) || defined(__i386__)
    &k_lstm_avx512,
    &k_lstm_avx2,
#endif
#if defined(__aarch64__)
    &k_lstm_neon,
#endif
    NULL,
};
