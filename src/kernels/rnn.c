/* rnn.c - optimized CPU kernels of the "rnn" group: float32 LSTM and GRU.
 *
 * The reference recurrent layers (src/ops/rnn.c) compute in double and
 * convert the weights on every run; voice-activity and keyword models call
 * a small LSTM or GRU once per audio chunk, so that conversion was most of
 * their time. These kernels keep W^T [input, G * hidden] and R^T [hidden,
 * G * hidden] in float32, packed once at compile time into the SGEMM's
 * full-K panels ([G h / NR][k][NR], each panel contiguous). The input
 * products of all steps, x W^T plus the biases that can be folded in, are
 * one SGEMM over the packed W (a row-major [input, 4h] walked four rows at
 * a time re-read all of W seven times for ddddocr's 25 steps, and each
 * 128-byte row segment sat on its own 4 KiB page, out of reach of the
 * prefetchers). Each step's h R^T then runs as a few-row product along
 * every panel, which reads R once, front to back; the gates use vector
 * sigmoid and tanh (er_vec_ops.lstm_cell, gru_gates, gru_update).
 *
 * LSTM: default activations (Sigmoid, Tanh, Tanh), no clip, no coupled
 * input/forget gate, no peepholes. GRU: default activations (Sigmoid,
 * Tanh), no clip, either linear_before_reset; its R is packed as R_zr
 * [2h] and R_h [h], since the reset gate enters between them. Both: no
 * sequence_lens, constant W and R (and B), either layout, any direction.
 * Anything else runs on the reference. */
#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/sgemm.h"
#include "kernels/vec.h"

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

/* The activations attribute absent, or the defaults spelled out: `per`
 * names per direction (LSTM Sigmoid, Tanh, Tanh; GRU Sigmoid, Tanh). */
static bool default_activations(const er_kernel_info *ki, int dirs, int per) {
  const er_attr *a = er__node_attr(ki->node, "activations");
  if (!a) return true;
  static const char *const want[3] = {"Sigmoid", "Tanh", "Tanh"};
  if (a->type != ER_ATTR_STRINGS || a->n != per * dirs) return false;
  for (int64_t k = 0; k < a->n; k++)
    if (strcmp(a->strings[k], want[k % per]) != 0) return false;
  return true;
}

/* Direction, layout, no clip and default activations, for an LSTM (4
 * gates: also no coupled input/forget gate) or a GRU (3 gates). */
static bool rnn_config(const er_kernel_info *ki, int gates, int *dirs, bool *reverse, int *layout) {
  er_kctx ctx = er__ki_ctx(ki);
  const char *dir;
  int64_t v;
  if (er__attr_string(&ctx, "direction", "forward", &dir) != ER_STATUS_OK) return false;
  *dirs = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
  *reverse = strcmp(dir, "reverse") == 0;
  if (er__attr_int(&ctx, "layout", 0, &v) != ER_STATUS_OK || (v != 0 && v != 1)) return false;
  *layout = (int)v;
  if (er__node_attr(ki->node, "clip")) return false;
  if (gates == 4 && (er__attr_int(&ctx, "input_forget", 0, &v) != ER_STATUS_OK || v != 0)) return false;
  return default_activations(ki, *dirs, gates == 4 ? 3 : 2);
}

static bool lstm_config(const er_kernel_info *ki, int *dirs, bool *reverse, int *layout) {
  return rnn_config(ki, 4, dirs, reverse, layout);
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

static void panel_gemv(const er_vec_ops *ops, const er_sgemm_isa *isa, er_thread_pool *pool, const er_gemv *g) {
  panel_job j = {ops, *g, isa->nr};
  int64_t panels = (g->n + j.nr - 1) / j.nr;
  if (er__pool_threads(pool) < 2 || g->m * g->n * g->k < LSTM_MIN_PARALLEL_MACS) {
    panel_chunk(&j, 0, panels);
    return;
  }
  er__parallel_for(pool, panels, 1, panel_chunk, &j);
}

/* The input products x W^T + bias of every row of X [rows, I] into gx
 * [rows, G], in X's own row order: one SGEMM over the packed W past a
 * few rows, else a few-row product. */
typedef struct rnn_input {
  const er_vec_ops *ops;
  const er_sgemm_isa *isa;
  er_gemm_problem p;
  bool use_gemm;
  int workers;
  size_t gemm_floats;         /* per worker, when use_gemm */
} rnn_input;

static void rnn_input_init(rnn_input *r, const er_vec_ops *ops, const er_sgemm_isa *isa, er_thread_pool *pool,
                           const float *x, int64_t rows, int64_t in, int64_t g, const float *w_packed) {
  memset(r, 0, sizeof *r);
  r->ops = ops;
  r->isa = isa;
  r->use_gemm = rows > ER_GEMV_MAX_M;
  r->p.isa = isa;
  r->p.m = rows, r->p.n = g, r->p.k = in;
  r->p.a.data = x, r->p.a.rs = in, r->p.a.cs = 1;
  r->p.scale = 1.0f;
  r->p.ldc = g;
  r->p.b.packed = w_packed;
  r->workers = er__pool_threads(pool);
  if (r->workers < 1) r->workers = 1;
  if (r->workers > ER_SGEMM_MAX_SLOTS) r->workers = ER_SGEMM_MAX_SLOTS;
  r->gemm_floats = r->use_gemm ? er__sgemm_scratch_floats(&r->p) : 0;
}

static void rnn_input_run(rnn_input *r, er_thread_pool *pool, const float *w_packed, const float *bias, float *gx,
                          float *gemm_scratch) {
  if (r->use_gemm) {
    r->p.b.packed = w_packed;
    r->p.c = gx;
    r->p.epi.bias = bias;
    er__sgemm_run(&r->p, pool, gemm_scratch, r->workers);
    return;
  }
  er_gemv gi;
  memset(&gi, 0, sizeof gi);
  gi.m = r->p.m, gi.n = r->p.n, gi.k = r->p.k;
  gi.a = r->p.a.data, gi.a_rs = r->p.k, gi.a_cs = 1;
  gi.b = w_packed;
  gi.c = gx, gi.ldc = r->p.n;
  gi.scale = 1.0f;
  gi.bias = bias;
  panel_gemv(r->ops, r->isa, pool, &gi);
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
  rnn_input ri;
  rnn_input_init(&ri, s->ops, s->isa, kr->pool, x->data, rows, I, G, s->wp);
  size_t state_floats = ((size_t)(2 * N * H + rows * G + N * G) + 15) / 16 * 16;
  size_t bytes = (state_floats + (size_t)ri.workers * ri.gemm_floats) * sizeof(float);
  void *owned = NULL;
  float *h = kr->scratch && kr->scratch_bytes >= bytes ? kr->scratch : er__kr_spill(kr, bytes, &owned);
  if (!h)
    return er__error(ER_STATUS_OUT_OF_MEMORY, "LSTM '%s': out of memory for %zu bytes of scratch",
                     ctx->node->name, bytes);
  float *c = h + N * H, *gx = c + N * H, *g2 = gx + rows * G, *gemm_scratch = h + state_floats;
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
    /* x W^T + Wb + Rb for every row of X. */
    rnn_input_run(&ri, kr->pool, wp, bias, gx, gemm_scratch);
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
        panel_gemv(s->ops, s->isa, kr->pool, &gh);
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

/* ---- GRU ------------------------------------------------------------------------ */

typedef struct gru_state {
  const er_vec_ops *ops;
  const er_sgemm_isa *isa;
  int dirs;
  bool reverse, lbr;  /* lbr: linear_before_reset */
  int layout;
  int64_t h, i;
  size_t w_floats, rzr_floats, rh_floats;  /* one direction's packed W / R_zr / R_h */
  float *wp;          /* [dirs] x W^T [i, 3h] */
  float *rzr;         /* [dirs] x R_zr^T [h, 2h] */
  float *rh;          /* [dirs] x R_h^T [h, h] */
  float *bx;          /* [dirs][3h]: Wb + Rb for z and r; Wb_h, plus Rb_h unless lbr */
  float *bh;          /* [dirs][h]: Rb_h when lbr (inside the reset product), else 0 */
} gru_state;

static bool gru_supports(const er_kernel_info *ki, bool isa_ok) {
  if (!isa_ok || !er__ki_f32(ki, IN_X) || !er__ki_out_f32(ki)) return false;
  const er_tensor *w = er__ki_in(ki, IN_W), *r = er__ki_in(ki, IN_R), *b = er__ki_in(ki, IN_B);
  if (!w || !r || !w->data || !r->data || w->dtype != ER_DTYPE_FLOAT || r->dtype != ER_DTYPE_FLOAT) return false;
  if (w->rank != 3 || r->rank != 3 || w->dims[1] != r->dims[1] || r->dims[1] != 3 * r->dims[2]) return false;
  if (b && (!b->data || b->dtype != ER_DTYPE_FLOAT || b->rank != 2 || b->dims[1] != 6 * r->dims[2])) return false;
  if (er__ki_in(ki, IN_SEQ_LENS)) return false;
  if (er__ki_in(ki, IN_INITIAL_H) && !er__ki_f32(ki, IN_INITIAL_H)) return false;
  int dirs, layout;
  bool reverse;
  return rnn_config(ki, 3, &dirs, &reverse, &layout) && w->dims[0] == dirs && r->dims[0] == dirs &&
         (!b || b->dims[0] == dirs);
}

static void gru_release(void *state) {
  gru_state *s = state;
  if (!s) return;
  er__aligned_free(s->wp);
  er__aligned_free(s->rzr);
  er__aligned_free(s->rh);
  er__aligned_free(s->bx);
  er__aligned_free(s->bh);
  free(s);
}

static er_status gru_prepare(const er_kernel_info *ki, const er_vec_ops *ops, const er_sgemm_isa *isa,
                             void **state_out, size_t *scratch_out) {
  gru_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a GRU kernel");
  rnn_config(ki, 3, &s->dirs, &s->reverse, &s->layout);
  er_kctx ctx = er__ki_ctx(ki);
  int64_t lbr = 0;
  if (er__attr_int(&ctx, "linear_before_reset", 0, &lbr) != ER_STATUS_OK) lbr = 0;
  s->lbr = lbr != 0;
  const er_tensor *w = ki->in[IN_W], *r = ki->in[IN_R], *b = er__ki_in(ki, IN_B);
  s->ops = ops;
  s->isa = isa;
  s->h = r->dims[2];
  s->i = w->dims[2];
  const int64_t H = s->h, D = s->dirs;
  s->w_floats = er__sgemm_packed_b_floats(isa, s->i, 3 * H);
  s->rzr_floats = er__sgemm_packed_b_floats(isa, H, 2 * H);
  s->rh_floats = er__sgemm_packed_b_floats(isa, H, H);
  s->wp = er__aligned_alloc((size_t)D * s->w_floats * sizeof(float));
  s->rzr = er__aligned_alloc((size_t)D * s->rzr_floats * sizeof(float));
  s->rh = er__aligned_alloc((size_t)D * s->rh_floats * sizeof(float));
  s->bx = er__aligned_alloc((size_t)(D * 3 * H) * sizeof(float));
  s->bh = er__aligned_alloc((size_t)(D * H) * sizeof(float));
  if (!s->wp || !s->rzr || !s->rh || !s->bx || !s->bh) {
    gru_release(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "GRU '%s': out of memory for its weights", ki->node->name);
  }
  const float *wd = w->data, *rd = r->data, *bd = b ? b->data : NULL;
  for (int64_t d = 0; d < D; d++) {
    /* W[d] is [3h, i] row-major: W^T's element (k, j) is at j * i + k;
     * R[d]'s rows [0, 2h) are z and r, [2h, 3h) the candidate. */
    const float *rdd = rd + d * 3 * H * H;
    er__sgemm_pack_b(isa, wd + d * 3 * H * s->i, 1, s->i, s->i, 3 * H, s->wp + (size_t)d * s->w_floats);
    er__sgemm_pack_b(isa, rdd, 1, H, H, 2 * H, s->rzr + (size_t)d * s->rzr_floats);
    er__sgemm_pack_b(isa, rdd + 2 * H * H, 1, H, H, H, s->rh + (size_t)d * s->rh_floats);
    const float *wb = bd ? bd + d * 6 * H : NULL, *rb = bd ? bd + d * 6 * H + 3 * H : NULL;
    for (int64_t j = 0; j < 3 * H; j++) {
      bool folded = j < 2 * H || !s->lbr;
      s->bx[d * 3 * H + j] = bd ? wb[j] + (folded ? rb[j] : 0.0f) : 0.0f;
    }
    for (int64_t j = 0; j < H; j++) s->bh[d * H + j] = bd && s->lbr ? rb[2 * H + j] : 0.0f;
  }
  *scratch_out = 0; /* per run: depends on the batch */
  *state_out = s;
  return ER_STATUS_OK;
}

static er_status gru_run(const er_kernel_run *kr) {
  const gru_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[IN_X], *h0 = er__in(ctx, IN_INITIAL_H);
  er_tensor *y = er__out(ctx, 0), *yh = er__out(ctx, 1);
  if (x->rank != 3 || x->dims[2] != s->i) return er__kr_reference(kr);
  const bool lay1 = s->layout == 1;
  const int64_t S = x->dims[lay1 ? 1 : 0], N = x->dims[lay1 ? 0 : 1], I = s->i, H = s->h, G = 3 * H;
  const int D = s->dirs;
  if (N == 0) return ER_STATUS_OK;
  if (S == 0) return er__kr_reference(kr); /* Y_h of empty sequences: the reference's rule */
  /* h [N, H]; the input products of every step [S * N, 3H]; per step the
   * z, r products [N, 2H], the candidate's [N, H] and r * h [N, H]; then
   * the SGEMM's per-worker scratch (each part a multiple of 16 floats). */
  const int64_t rows = S * N;
  rnn_input ri;
  rnn_input_init(&ri, s->ops, s->isa, kr->pool, x->data, rows, I, G, s->wp);
  size_t state_floats = ((size_t)(N * H + rows * G + 2 * N * H + N * H + N * H) + 15) / 16 * 16;
  size_t bytes = (state_floats + (size_t)ri.workers * ri.gemm_floats) * sizeof(float);
  void *owned = NULL;
  float *h = kr->scratch && kr->scratch_bytes >= bytes ? kr->scratch : er__kr_spill(kr, bytes, &owned);
  if (!h)
    return er__error(ER_STATUS_OUT_OF_MEMORY, "GRU '%s': out of memory for %zu bytes of scratch", ctx->node->name,
                     bytes);
  float *gx = h + N * H, *gzr = gx + rows * G, *gc = gzr + 2 * N * H, *rh = gc + N * H;
  float *gemm_scratch = h + state_floats;
  for (int d = 0; d < D; d++) {
    bool backward = s->reverse || d == 1;
    /* Initial state rows: [dirs, N, H] (layout 0) or [N, dirs, H]. */
    for (int64_t b = 0; b < N; b++) {
      int64_t off = (lay1 ? b * D + d : d * N + b) * H;
      if (h0) memcpy(h + b * H, (const float *)h0->data + off, (size_t)H * sizeof(float));
      else memset(h + b * H, 0, (size_t)H * sizeof(float));
    }
    const float *wp = s->wp + (size_t)d * s->w_floats;
    const float *rzr = s->rzr + (size_t)d * s->rzr_floats, *rhp = s->rh + (size_t)d * s->rh_floats;
    /* x W^T + the folded biases for every row of X. */
    rnn_input_run(&ri, kr->pool, wp, s->bx + d * G, gx, gemm_scratch);
    for (int64_t t = 0; t < S; t++) {
      int64_t pos = backward ? S - 1 - t : t;
      for (int64_t b0 = 0; b0 < N; b0 += ER_GEMV_MAX_M) {
        int64_t m = N - b0 < ER_GEMV_MAX_M ? N - b0 : ER_GEMV_MAX_M;
        const float *xrow = gx + (lay1 ? b0 * S + pos : pos * N + b0) * G;
        const int64_t x_rs = lay1 ? S * G : G;
        /* z, r: h R_zr^T + their input products. */
        er_gemv g1;
        memset(&g1, 0, sizeof g1);
        g1.m = m, g1.n = 2 * H, g1.k = H;
        g1.a = h + b0 * H, g1.a_rs = H, g1.a_cs = 1;
        g1.b = rzr;
        g1.c = gzr + b0 * 2 * H, g1.ldc = 2 * H;
        g1.scale = 1.0f;
        g1.add = xrow, g1.add_rs = x_rs, g1.add_cs = 1, g1.beta = 1.0f;
        panel_gemv(s->ops, s->isa, kr->pool, &g1);
        for (int64_t b = b0; b < b0 + m; b++)
          s->ops->gru_gates(gzr + b * 2 * H, h + b * H, s->lbr ? NULL : rh + b * H, H);
        /* The candidate: (h R_h^T + Rb_h), scaled by r after (lbr), or
         * (r * h) R_h^T plus its input product. */
        er_gemv g2;
        memset(&g2, 0, sizeof g2);
        g2.m = m, g2.n = H, g2.k = H;
        g2.a = (s->lbr ? h : rh) + b0 * H, g2.a_rs = H, g2.a_cs = 1;
        g2.b = rhp;
        g2.c = gc + b0 * H, g2.ldc = H;
        g2.scale = 1.0f;
        if (s->lbr) {
          g2.bias = s->bh + d * H;
        } else {
          g2.add = xrow + 2 * H, g2.add_rs = x_rs, g2.add_cs = 1, g2.beta = 1.0f;
        }
        panel_gemv(s->ops, s->isa, kr->pool, &g2);
        for (int64_t b = b0; b < b0 + m; b++) {
          const float *zr = gzr + b * 2 * H;
          const float *xh = s->lbr ? xrow + (b - b0) * x_rs + 2 * H : NULL;
          s->ops->gru_update(xh, gc + b * H, zr, s->lbr ? zr + H : NULL, h + b * H, H);
        }
      }
      if (y)
        for (int64_t b = 0; b < N; b++) {
          int64_t off = (lay1 ? (b * S + pos) * D + d : (pos * D + d) * N + b) * H;
          memcpy((float *)y->data + off, h + b * H, (size_t)H * sizeof(float));
        }
    }
    for (int64_t b = 0; b < N; b++) {
      int64_t off = (lay1 ? b * D + d : d * N + b) * H;
      if (yh) memcpy((float *)yh->data + off, h + b * H, (size_t)H * sizeof(float));
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
                                            lstm_prepare_##SFX, lstm_run, lstm_release};                  \
  static bool gru_supports_##SFX(const er_kernel_info *ki) { return gru_supports(ki, ISA_OK(ki->cpu)); }   \
  static er_status gru_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {            \
    return gru_prepare(ki, &VO, &GEMM, st, scratch);                                                    \
  }                                                                                                     \
  static const er_cpu_kernel k_gru_##SFX = {"f32_gru__" ISA, "GRU", "", gru_supports_##SFX,               \
                                           gru_prepare_##SFX, gru_run, gru_release};

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
    &k_gru_avx512,
    &k_lstm_avx2,
    &k_gru_avx2,
#endif
#if defined(__aarch64__)
    &k_lstm_neon,
    &k_gru_neon,
#endif
    NULL,
};
