/* rnn.c - optimized CPU kernels of the "rnn" group: float32 LSTM.
 *
 * The reference LSTM (src/ops/rnn.c) computes in double and converts the
 * weights on every run; voice-activity and keyword models call a small
 * LSTM once per audio chunk, so that conversion was most of their time.
 * This kernel keeps W^T [input, 4 * hidden] and R^T [hidden, 4 * hidden]
 * in float32, packed once at compile time into the SGEMM's full-K panels
 * ([4h / NR][k][NR], each panel contiguous). The input products of all
 * steps, x W^T + Wb + Rb, are one SGEMM over the packed W (a row-major
 * [input, 4h] walked four rows at a time re-read all of W seven times for
 * ddddocr's 25 steps, and each 128-byte row segment sat on its own 4 KiB
 * page, out of reach of the prefetchers). Each step's h R^T then runs as a
 * few-row product along every panel, which reads R once, front to back;
 * the gates use vector sigmoid and tanh (er_vec_ops.lstm_cell).
 *
 * Taken: default activations (Sigmoid, Tanh, Tanh), no clip, no coupled
 * input/forget gate, no peepholes, no sequence_lens, constant W and R (and
 * B), either layout, any direction. Anything else runs on the reference. */
#include "backends/cpu/kernels/kernel-groups.h"
#include "backends/cpu/kernels/kutil.h"
#include "backends/cpu/kernels/sgemm.h"
#include "backends/cpu/kernels/vec.h"

enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ_LENS, IN_INITIAL_H, IN_INITIAL_C, IN_P };

typedef struct lstm_state {
  const er_vec_ops *ops;
  const er_sgemm_isa *isa;
  int dirs;
  bool reverse;
  int layout;
  int64_t h, i;
  size_t w_floats, r_floats;  /* one direction's packed W / R */
  float *wp;          /* [dirs] x W^T [i, 4h] in full-K panels */
  float *rp;          /* [dirs] x R^T [h, 4h] in full-K panels */
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

static er_status lstm_prepare(const er_kernel_info *ki, const er_vec_ops *ops, const er_sgemm_isa *isa,
                              void **state_out, size_t *scratch_out) {
  lstm_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for an LSTM kernel");
  lstm_config(ki, &s->dirs, &s->reverse, &s->layout);
  const er_tensor *w = ki->in[IN_W], *r = ki->in[IN_R], *b = er__ki_in(ki, IN_B);
  s->ops = ops;
  s->isa = isa;
  s->h = r->dims[2];
  s->i = w->dims[2];
  const int64_t g = 4 * s->h, D = s->dirs;
  s->w_floats = er__sgemm_packed_b_floats(isa, s->i, g);
  s->r_floats = er__sgemm_packed_b_floats(isa, s->h, g);
  s->wp = er__aligned_alloc((size_t)D * s->w_floats * sizeof(float));
  s->rp = er__aligned_alloc((size_t)D * s->r_floats * sizeof(float));
  s->bias = er__aligned_alloc((size_t)(D * g) * sizeof(float));
  if (!s->wp || !s->rp || !s->bias) {
    er__aligned_free(s->wp);
    er__aligned_free(s->rp);
    er__aligned_free(s->bias);
    free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "LSTM '%s': out of memory for its weights", ki->node->name);
  }
  const float *wd = w->data, *rd = r->data, *bd = b ? b->data : NULL;
  for (int64_t d = 0; d < D; d++) {
    /* W[d] is [4h, i] row-major: W^T's element (k, j) is at j * i + k. */
    er__sgemm_pack_b(isa, wd + d * g * s->i, 1, s->i, s->i, g, s->wp + (size_t)d * s->w_floats);
    er__sgemm_pack_b(isa, rd + d * g * s->h, 1, s->h, s->h, g, s->rp + (size_t)d * s->r_floats);
    for (int64_t j = 0; j < g; j++) s->bias[d * g + j] = bd ? bd[d * 2 * g + j] + bd[d * 2 * g + g + j] : 0.0f;
  }
  *scratch_out = 0; /* per run: depends on the batch */
  *state_out = s;
  return ER_STATUS_OK;
}

static void lstm_release(void *state) {
  lstm_state *s = state;
  if (!s) return;
  er__aligned_free(s->wp);
  er__aligned_free(s->rp);
  er__aligned_free(s->bias);
  free(s);
}

/* Products of at least this many multiply-adds split their panels over
 * the workers (each streams its share of the weights); smaller ones cost
 * less than waking a worker. */
#define LSTM_MIN_PARALLEL_MACS (INT64_C(1) << 15)

/* A few-row product along B's packed panels (er__gemv_panels). */
typedef struct panel_job {
  const er_vec_ops *ops;
  er_gemv g;          /* b: the first panel; n: all columns */
  int64_t nr;
} panel_job;

static void panel_chunk(void *arg, int64_t begin, int64_t end) {
  const panel_job *j = arg;
  er__gemv_panels(j->ops, &j->g, j->nr, begin, end);
}

static void panel_gemv(const lstm_state *s, er_thread_pool *pool, const er_gemv *g) {
  panel_job j = {s->ops, *g, s->isa->nr};
  int64_t panels = (g->n + j.nr - 1) / j.nr;
  if (er__pool_threads(pool) < 2 || g->m * g->n * g->k < LSTM_MIN_PARALLEL_MACS) {
    panel_chunk(&j, 0, panels);
    return;
  }
  er__parallel_for(pool, panels, 1, panel_chunk, &j);
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
  /* h, c [N, H]; the input products of every step [S * N, 4H]; the gates
   * of one step [N, 4H]; then the SGEMM's per-worker scratch (64-byte
   * aligned: every part is a multiple of 16 floats). */
  const int64_t rows = S * N;
  const bool use_gemm = rows > ER_GEMV_MAX_M;
  er_gemm_problem p;
  memset(&p, 0, sizeof p);
  p.isa = s->isa;
  p.m = rows, p.n = G, p.k = I;
  p.a.data = x->data, p.a.rs = I, p.a.cs = 1;
  p.scale = 1.0f;
  p.ldc = G;
  int workers = er__pool_threads(kr->pool);
  if (workers < 1) workers = 1;
  if (workers > ER_SGEMM_MAX_SLOTS) workers = ER_SGEMM_MAX_SLOTS;
  p.b.packed = s->wp;
  size_t state_floats = ((size_t)(2 * N * H + rows * G + N * G) + 15) / 16 * 16;
  size_t gemm_floats = use_gemm ? er__sgemm_scratch_floats(&p) : 0;
  size_t bytes = (state_floats + (size_t)workers * gemm_floats) * sizeof(float);
  void *owned = NULL;
  float *h = kr->scratch && kr->scratch_bytes >= bytes ? kr->scratch : er__kr_spill(kr, bytes, &owned);
  if (!h)
    return er__error(ER_STATUS_OUT_OF_MEMORY, "LSTM '%s': out of memory for %zu bytes of scratch",
                     ctx->node->name, bytes);
  float *c = h + N * H, *gx = c + N * H, *g2 = gx + rows * G, *gemm_scratch = h + state_floats;
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
    const float *wp = s->wp + (size_t)d * s->w_floats, *rp = s->rp + (size_t)d * s->r_floats;
    const float *bias = s->bias + d * G;
    /* x W^T + Wb + Rb for every row of X, in X's own row order. */
    if (use_gemm) {
      p.b.packed = wp;
      p.c = gx;
      p.epi.bias = bias;
      er__sgemm_run(&p, kr->pool, gemm_scratch, workers);
    } else {
      er_gemv gi;
      memset(&gi, 0, sizeof gi);
      gi.m = rows, gi.n = G, gi.k = I;
      gi.a = xd, gi.a_rs = I, gi.a_cs = 1;
      gi.b = wp;
      gi.c = gx, gi.ldc = G;
      gi.scale = 1.0f;
      gi.bias = bias;
      panel_gemv(s, kr->pool, &gi);
    }
    for (int64_t t = 0; t < S; t++) {
      int64_t pos = backward ? S - 1 - t : t;
      for (int64_t b0 = 0; b0 < N; b0 += ER_GEMV_MAX_M) {
        int64_t m = N - b0 < ER_GEMV_MAX_M ? N - b0 : ER_GEMV_MAX_M;
        er_gemv gh;
        memset(&gh, 0, sizeof gh);
        gh.m = m, gh.n = G, gh.k = H;
        gh.a = h + b0 * H, gh.a_rs = H, gh.a_cs = 1;
        gh.b = rp;
        gh.c = g2 + b0 * G, gh.ldc = G;
        gh.scale = 1.0f;
        gh.add = gx + (lay1 ? b0 * S + pos : pos * N + b0) * G;
        gh.add_rs = lay1 ? S * G : G, gh.add_cs = 1, gh.beta = 1.0f;
        panel_gemv(s, kr->pool, &gh);
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

#define DEFINE_RNN_KERNELS(SFX, ISA, VO, GEMM, ISA_OK)                                                    \
  static bool lstm_supports_##SFX(const er_kernel_info *ki) { return lstm_supports(ki, ISA_OK(ki->cpu)); } \
  static er_status lstm_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {           \
    return lstm_prepare(ki, &VO, &GEMM, st, scratch);                                                   \
  }                                                                                                     \
  static const er_cpu_kernel k_lstm_##SFX = {"f32_lstm__" ISA, "LSTM", "", lstm_supports_##SFX,           \
                                            lstm_prepare_##SFX, lstm_run, lstm_release};

#if defined(__x86_64__) || defined(__i386__)
DEFINE_RNN_KERNELS(avx512, "avx512", er__vec_avx512, er__sgemm_avx512, er__cpu_has_avx512)
DEFINE_RNN_KERNELS(avx2, "avx2", er__vec_avx2, er__sgemm_avx2, er__cpu_has_avx2)
#endif
#if defined(__aarch64__)
static bool has_neon(const er_cpu_features *c) { return c->neon; }
DEFINE_RNN_KERNELS(neon, "neon", er__vec_neon, er__sgemm_neon, has_neon)
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
