/* rnn.c - recurrent layers: RNN, GRU and LSTM (schema versions 7, 14, 22).
 *
 * The three ops share one shape rule and one driver; they differ only in
 * the number of gates and in the cell update. The reference kernel works in
 * double precision whatever the tensor type: weights are converted once,
 * each input row as it is read, and results are rounded once on store. That
 * keeps float16 and float32 models at least as accurate as the runtimes
 * they are compared with, and lets one typed loop serve every float type.
 *
 * Layouts (layout = 0, the default; layout = 1 is batch-major, opset 14+):
 *   X          [seq, batch, input]           | [batch, seq, input]
 *   W          [dirs, gates*hidden, input]
 *   R          [dirs, gates*hidden, hidden]
 *   B          [dirs, 2*gates*hidden]        (Wb then Rb)
 *   initial_h  [dirs, batch, hidden]         | [batch, dirs, hidden]
 *   P          [dirs, 3*hidden]              (LSTM peepholes i, o, f)
 *   Y          [seq, dirs, batch, hidden]    | [batch, seq, dirs, hidden]
 *   Y_h, Y_c   like initial_h
 * Gate order inside W, R and B: RNN i; GRU z, r, h; LSTM i, o, f, c. */
#include "ops/op.h"
#include "ops/op-groups.h"

#include <stdlib.h>

static const er_dtype float_only_types[] = {ER_DTYPE_FLOAT, ER_DTYPE_UNDEFINED};

/* ======================================================================== */
/* Activations                                                               */
/* ======================================================================== */

typedef enum act_kind {
  ACT_RELU,
  ACT_TANH,
  ACT_SIGMOID,
  ACT_AFFINE,
  ACT_LEAKY_RELU,
  ACT_THRESHOLDED_RELU,
  ACT_SCALED_TANH,
  ACT_HARD_SIGMOID,
  ACT_ELU,
  ACT_SOFTSIGN,
  ACT_SOFTPLUS,
} act_kind;

typedef struct rnn_act {
  act_kind kind;
  double alpha, beta;
} rnn_act;

/* Which activations take alpha / beta, and their defaults: those of the
 * ONNX operators of the same name, as the spec says. activation_alpha and
 * activation_beta are consumed in activation order by the functions that
 * take them; when a list runs out the default applies. ScaledTanh's
 * operator never had defaults, so it takes onnxruntime's 0 and 0. Note that
 * onnxruntime also uses 0 for Affine and ThresholdedRelu, unlike the spec's
 * 1.0; only models that name those activations without giving alpha see a
 * difference. */
static const struct act_info {
  const char *name;
  act_kind kind;
  bool has_alpha, has_beta;
  double alpha, beta;
} act_table[] = {
    {"Relu", ACT_RELU, false, false, 0, 0},
    {"Tanh", ACT_TANH, false, false, 0, 0},
    {"Sigmoid", ACT_SIGMOID, false, false, 0, 0},
    {"Affine", ACT_AFFINE, true, true, 1.0, 0.0},
    {"LeakyRelu", ACT_LEAKY_RELU, true, false, 0.01, 0},
    {"ThresholdedRelu", ACT_THRESHOLDED_RELU, true, false, 1.0, 0},
    {"ScaledTanh", ACT_SCALED_TANH, true, true, 0.0, 0.0},
    {"HardSigmoid", ACT_HARD_SIGMOID, true, true, 0.2, 0.5},
    {"Elu", ACT_ELU, true, false, 1.0, 0},
    {"Softsign", ACT_SOFTSIGN, false, false, 0, 0},
    {"Softplus", ACT_SOFTPLUS, false, false, 0, 0},
};

/* Activation names are compared without regard to case, as onnxruntime
 * does; exporters write both "Tanh" and "tanh". */
static bool name_eq_nocase(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char ca = (*a >= 'A' && *a <= 'Z') ? (char)(*a - 'A' + 'a') : *a;
    char cb = (*b >= 'A' && *b <= 'Z') ? (char)(*b - 'A' + 'a') : *b;
    if (ca != cb) return false;
  }
  return *a == *b;
}

static double sigmoid(double x) {
  /* Split by sign so exp never overflows. */
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

/* Applies `a` to v[0..n) in place. The switch sits outside the loops. */
static void act_apply(const rnn_act *a, double *v, int64_t n) {
  const double al = a->alpha, be = a->beta;
  switch (a->kind) {
    case ACT_RELU:
      for (int64_t i = 0; i < n; i++) v[i] = v[i] > 0 ? v[i] : 0.0;
      break;
    case ACT_TANH:
      for (int64_t i = 0; i < n; i++) v[i] = tanh(v[i]);
      break;
    case ACT_SIGMOID:
      for (int64_t i = 0; i < n; i++) v[i] = sigmoid(v[i]);
      break;
    case ACT_AFFINE:
      for (int64_t i = 0; i < n; i++) v[i] = al * v[i] + be;
      break;
    case ACT_LEAKY_RELU:
      for (int64_t i = 0; i < n; i++) v[i] = v[i] >= 0 ? v[i] : al * v[i];
      break;
    case ACT_THRESHOLDED_RELU:
      for (int64_t i = 0; i < n; i++) v[i] = v[i] > al ? v[i] : 0.0;
      break;
    case ACT_SCALED_TANH:
      for (int64_t i = 0; i < n; i++) v[i] = al * tanh(be * v[i]);
      break;
    case ACT_HARD_SIGMOID:
      for (int64_t i = 0; i < n; i++) {
        double y = al * v[i] + be;
        v[i] = y < 0 ? 0.0 : y > 1 ? 1.0 : y;
      }
      break;
    case ACT_ELU:
      for (int64_t i = 0; i < n; i++) v[i] = v[i] >= 0 ? v[i] : al * (exp(v[i]) - 1.0);
      break;
    case ACT_SOFTSIGN:
      for (int64_t i = 0; i < n; i++) v[i] = v[i] / (1.0 + fabs(v[i]));
      break;
    case ACT_SOFTPLUS:
      /* log(1 + e^x) without overflow for large x. */
      for (int64_t i = 0; i < n; i++)
        v[i] = v[i] > 0 ? v[i] + log1p(exp(-v[i])) : log1p(exp(v[i]));
      break;
  }
}

/* ======================================================================== */
/* Configuration from attributes                                             */
/* ======================================================================== */

typedef enum rnn_kind { RNN_SIMPLE, RNN_GRU, RNN_LSTM } rnn_kind;

typedef struct rnn_cfg {
  rnn_kind kind;
  int gates;                 /* 1 (RNN), 3 (GRU), 4 (LSTM) */
  int n_acts;                /* activations per direction: 1, 2, 3 */
  int dirs;                  /* 1, or 2 for bidirectional */
  bool reverse;              /* direction == "reverse" */
  int64_t hidden;            /* hidden_size attribute; -1 when absent */
  int layout;                /* 0 = sequence-major, 1 = batch-major */
  bool has_clip;
  double clip;               /* > 0 when has_clip */
  bool linear_before_reset;  /* GRU */
  bool input_forget;         /* LSTM */
  rnn_act acts[2][3];        /* [direction][f, g, h] */
} rnn_cfg;

static er_status parse_acts(const er_kctx *ctx, rnn_cfg *cfg) {
  static const act_kind defaults[3][3] = {
      {ACT_TANH, ACT_TANH, ACT_TANH},        /* RNN: f */
      {ACT_SIGMOID, ACT_TANH, ACT_TANH},     /* GRU: f, g */
      {ACT_SIGMOID, ACT_TANH, ACT_TANH},     /* LSTM: f, g, h */
  };
  const er_attr *names = er__node_attr(ctx->node, "activations");
  const float *alphas, *betas;
  int64_t n_alpha, n_beta;
  ER_CHECK(er__attr_floats(ctx, "activation_alpha", &alphas, &n_alpha));
  ER_CHECK(er__attr_floats(ctx, "activation_beta", &betas, &n_beta));
  if (names && names->type != ER_ATTR_STRINGS)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "attribute 'activations' must be a list of strings");

  int64_t given = names ? names->n : 0;
  int64_t want = (int64_t)cfg->n_acts * cfg->dirs;
  /* A bidirectional node that lists one direction's activations uses them
   * for both (onnxruntime accepts this too). */
  bool shared = given > 0 && cfg->dirs == 2 && given == cfg->n_acts;
  if (given > 0 && given != want && !shared)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "activations lists %lld functions; this op with %d direction(s) takes %lld",
                        (long long)given, cfg->dirs, (long long)want);
  int64_t ai = 0, bi = 0;
  for (int d = 0; d < cfg->dirs; d++) {
    for (int k = 0; k < cfg->n_acts; k++) {
      rnn_act *a = &cfg->acts[d][k];
      const struct act_info *info = NULL;
      if (given == 0) {
        for (size_t j = 0; j < ER_ARRAY_LEN(act_table); j++)
          if (act_table[j].kind == defaults[cfg->kind][k]) info = &act_table[j];
      } else {
        const char *name = names->strings[shared ? k : d * cfg->n_acts + k];
        for (size_t j = 0; j < ER_ARRAY_LEN(act_table); j++)
          if (name_eq_nocase(name, act_table[j].name)) info = &act_table[j];
        if (!info)
          return er__op_error(
              ctx, ER_STATUS_INVALID_ATTRIBUTE,
              "activation '%s' is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
              "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus",
              name);
      }
      a->kind = info->kind;
      a->alpha = info->alpha;
      a->beta = info->beta;
      if (info->has_alpha && ai < n_alpha) a->alpha = alphas[ai++];
      if (info->has_beta && bi < n_beta) a->beta = betas[bi++];
    }
  }
  return ER_STATUS_OK;
}

static er_status parse_cfg(const er_kctx *ctx, rnn_kind kind, rnn_cfg *cfg) {
  const char *dir;
  int64_t v;
  float clip;
  memset(cfg, 0, sizeof *cfg);
  cfg->kind = kind;
  cfg->gates = kind == RNN_SIMPLE ? 1 : kind == RNN_GRU ? 3 : 4;
  cfg->n_acts = kind == RNN_SIMPLE ? 1 : kind == RNN_GRU ? 2 : 3;

  ER_CHECK(er__attr_string(ctx, "direction", "forward", &dir));
  if (strcmp(dir, "forward") == 0) {
    cfg->dirs = 1;
  } else if (strcmp(dir, "reverse") == 0) {
    cfg->dirs = 1;
    cfg->reverse = true;
  } else if (strcmp(dir, "bidirectional") == 0) {
    cfg->dirs = 2;
  } else {
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "direction '%s' is not one of forward, reverse, bidirectional", dir);
  }

  ER_CHECK(er__attr_int(ctx, "hidden_size", -1, &cfg->hidden));
  /* The cap keeps gates * hidden and every product with it far from
   * overflow; real layers are many orders of magnitude smaller. */
  if (er__node_attr(ctx->node, "hidden_size") &&
      (cfg->hidden <= 0 || cfg->hidden > (INT64_C(1) << 40)))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "hidden_size %lld must be in [1, 2^40]",
                        (long long)cfg->hidden);

  ER_CHECK(er__attr_int(ctx, "layout", 0, &v));
  if (v != 0 && v != 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "layout %lld must be 0 or 1",
                        (long long)v);
  cfg->layout = (int)v;

  cfg->has_clip = er__node_attr(ctx->node, "clip") != NULL;
  ER_CHECK(er__attr_float(ctx, "clip", 0.0f, &clip));
  if (cfg->has_clip && !(clip > 0))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "clip %g must be positive", (double)clip);
  cfg->clip = clip;

  if (kind == RNN_GRU) {
    ER_CHECK(er__attr_int(ctx, "linear_before_reset", 0, &v));
    cfg->linear_before_reset = v != 0;
  }
  if (kind == RNN_LSTM) {
    ER_CHECK(er__attr_int(ctx, "input_forget", 0, &v));
    cfg->input_forget = v != 0;
  }
  return parse_acts(ctx, cfg);
}

/* ======================================================================== */
/* Shape rule                                                                */
/* ======================================================================== */

enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ_LENS, IN_INITIAL_H, IN_INITIAL_C, IN_P };

static const char *const input_names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h",
                                          "initial_c", "P"};

/* Requires dim `axis` of input `i` to be `want` when both are known. */
static er_status expect_dim(const er_kctx *ctx, int i, int axis, int64_t want, const char *rule) {
  const er_tensor *t = er__in(ctx, i);
  if (!t || t->rank <= axis || want < 0 || t->dims[axis] < 0 || t->dims[axis] == want)
    return ER_STATUS_OK;
  char buf[160];
  return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s has shape %s; dim %d must be %s = %lld",
                      input_names[i], er__shape_str(t, buf, sizeof buf), axis, rule,
                      (long long)want);
}

/* A known dim of input i, or -1. */
static int64_t dim_of(const er_kctx *ctx, int i, int axis) {
  const er_tensor *t = er__in(ctx, i);
  return (t && t->rank > axis) ? t->dims[axis] : -1;
}

static er_status rnn_check_kind(er_kctx *ctx, rnn_kind kind) {
  rnn_cfg cfg;
  ER_CHECK(parse_cfg(ctx, kind, &cfg));
  const int G = cfg.gates, D = cfg.dirs;

  /* Types: every float input shares X's type; sequence_lens is int32. */
  static const int float_inputs[] = {IN_X, IN_W, IN_R, IN_B, IN_INITIAL_H, IN_INITIAL_C, IN_P};
  for (size_t k = 0; k < ER_ARRAY_LEN(float_inputs); k++) {
    int i = float_inputs[k];
    if (!er__in(ctx, i)) continue;
    ER_CHECK(er__require_type(ctx, i, er__types_float));
    ER_CHECK(er__require_same_type(ctx, IN_X, i));
  }
  if (er__in(ctx, IN_SEQ_LENS)) ER_CHECK(er__require_type(ctx, IN_SEQ_LENS, er__types_index));

  static const int ranks[] = {3, 3, 3, 2, 1, 3, 3, 2};
  for (int i = 0; i < ctx->n_in && i < 8; i++)
    if (er__in(ctx, i)) ER_CHECK(er__require_rank(ctx, i, ranks[i], ranks[i]));

  /* hidden_size: the attribute, else R's last dim, else W's rows / gates. */
  int64_t H = cfg.hidden;
  if (H < 0) H = dim_of(ctx, IN_R, 2);
  if (H < 0 && dim_of(ctx, IN_W, 1) >= 0 && dim_of(ctx, IN_W, 1) % G == 0)
    H = dim_of(ctx, IN_W, 1) / G;
  if (H == 0 && cfg.hidden < 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "R has hidden size 0");
  const int64_t GH = H >= 0 ? G * H : -1;
  const bool lay1 = cfg.layout == 1;
  int64_t S = dim_of(ctx, IN_X, lay1 ? 1 : 0);
  int64_t N = dim_of(ctx, IN_X, lay1 ? 0 : 1);
  int64_t I = dim_of(ctx, IN_X, 2);

  ER_CHECK(expect_dim(ctx, IN_W, 0, D, "num_directions"));
  ER_CHECK(expect_dim(ctx, IN_W, 1, GH, "gates * hidden_size"));
  ER_CHECK(expect_dim(ctx, IN_W, 2, I, "input_size (X's last dim)"));
  ER_CHECK(expect_dim(ctx, IN_R, 0, D, "num_directions"));
  ER_CHECK(expect_dim(ctx, IN_R, 1, GH, "gates * hidden_size"));
  ER_CHECK(expect_dim(ctx, IN_R, 2, H, "hidden_size"));
  ER_CHECK(expect_dim(ctx, IN_B, 0, D, "num_directions"));
  ER_CHECK(expect_dim(ctx, IN_B, 1, GH >= 0 ? 2 * GH : -1, "2 * gates * hidden_size"));
  ER_CHECK(expect_dim(ctx, IN_SEQ_LENS, 0, N, "batch_size"));
  for (int i = IN_INITIAL_H; i <= IN_INITIAL_C; i++) {
    if (i == IN_INITIAL_C && kind != RNN_LSTM) break;
    ER_CHECK(expect_dim(ctx, i, lay1 ? 1 : 0, D, "num_directions"));
    ER_CHECK(expect_dim(ctx, i, lay1 ? 0 : 1, N, "batch_size"));
    ER_CHECK(expect_dim(ctx, i, 2, H, "hidden_size"));
  }
  if (kind == RNN_LSTM) {
    ER_CHECK(expect_dim(ctx, IN_P, 0, D, "num_directions"));
    ER_CHECK(expect_dim(ctx, IN_P, 1, H >= 0 ? 3 * H : -1, "3 * hidden_size"));
  }

  er_dtype t = ctx->in[IN_X]->dtype;
  int64_t y_dims[4], h_dims[3];
  if (lay1) {
    y_dims[0] = N, y_dims[1] = S, y_dims[2] = D, y_dims[3] = H;
    h_dims[0] = N, h_dims[1] = D, h_dims[2] = H;
  } else {
    y_dims[0] = S, y_dims[1] = D, y_dims[2] = N, y_dims[3] = H;
    h_dims[0] = D, h_dims[1] = N, h_dims[2] = H;
  }
  er__set_output(ctx, 0, t, 4, y_dims);
  er__set_output(ctx, 1, t, 3, h_dims);
  if (kind == RNN_LSTM) er__set_output(ctx, 2, t, 3, h_dims);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Reference kernel                                                          */
/* ======================================================================== */

/* Element offsets of the layout-dependent tensors. */
static int64_t off_x(const rnn_cfg *c, int64_t S, int64_t N, int64_t I, int64_t t, int64_t b) {
  return (c->layout ? b * S + t : t * N + b) * I;
}
static int64_t off_y(const rnn_cfg *c, int64_t S, int64_t N, int64_t H, int64_t t, int d,
                     int64_t b) {
  return (c->layout ? (b * S + t) * c->dirs + d : (t * c->dirs + d) * N + b) * H;
}
static int64_t off_h(const rnn_cfg *c, int64_t N, int64_t H, int d, int64_t b) {
  return (c->layout ? b * c->dirs + d : d * N + b) * H;
}

/* n elements of t starting at element `off`, converted to double. */
static void load_row(const er_tensor *t, int64_t off, double *dst, int64_t n) {
  switch (t->dtype) {
    case ER_DTYPE_FLOAT: {
      const float *s = (const float *)t->data + off;
      for (int64_t i = 0; i < n; i++) dst[i] = s[i];
      break;
    }
    case ER_DTYPE_DOUBLE:
      memcpy(dst, (const double *)t->data + off, (size_t)n * sizeof *dst);
      break;
    default:
      for (int64_t i = 0; i < n; i++) dst[i] = er__load_f64(t->data, t->dtype, off + i);
  }
}

static void store_row(er_tensor *t, int64_t off, const double *src, int64_t n) {
  if (!t) return;
  switch (t->dtype) {
    case ER_DTYPE_FLOAT: {
      float *d = (float *)t->data + off;
      for (int64_t i = 0; i < n; i++) d[i] = (float)src[i];
      break;
    }
    case ER_DTYPE_DOUBLE:
      memcpy((double *)t->data + off, src, (size_t)n * sizeof *src);
      break;
    default:
      for (int64_t i = 0; i < n; i++) er__store_f64(t->data, t->dtype, off + i, src[i]);
  }
}

/* y[r] = bias[r] + dot(m[r, :], x) for r in [0, rows). m is row-major. */
static void matvec(const double *m, const double *x, const double *bias, int64_t rows, int64_t cols,
                   double *y) {
  for (int64_t r = 0; r < rows; r++) {
    const double *row = m + r * cols;
    double acc = bias ? bias[r] : 0.0;
    for (int64_t k = 0; k < cols; k++) acc += row[k] * x[k];
    y[r] = acc;
  }
}

static void clip_vec(const rnn_cfg *c, double *v, int64_t n) {
  if (!c->has_clip) return;
  for (int64_t i = 0; i < n; i++)
    v[i] = v[i] < -c->clip ? -c->clip : v[i] > c->clip ? c->clip : v[i];
}

/* Everything one direction's recurrence reads, as doubles. */
typedef struct rnn_dir {
  const double *w;    /* [G*H, I] */
  const double *r;    /* [G*H, H] */
  const double *wb;   /* [G*H] */
  const double *rb;   /* [G*H] */
  const double *p;    /* [3*H] or NULL: peepholes i, o, f */
  const rnn_act *act; /* [n_acts] */
} rnn_dir;

/* Scratch rows for one cell step. */
typedef struct rnn_scratch {
  double *x;    /* [I]    the input row */
  double *xg;   /* [G*H]  W x + Wb */
  double *hg;   /* [G*H]  R h + Rb */
  double *tmp;  /* [H]    GRU r (.) h, LSTM h(C) */
} rnn_scratch;

/* One step of one batch row: h (and c) [H] are updated in place. */
static void cell_step(const rnn_cfg *c, const rnn_dir *dir, int64_t I, int64_t H, rnn_scratch *s,
                      double *h, double *cell) {
  const int64_t GH = c->gates * H;
  matvec(dir->w, s->x, dir->wb, GH, I, s->xg);
  switch (c->kind) {
    case RNN_SIMPLE: {
      matvec(dir->r, h, dir->rb, H, H, s->hg);
      for (int64_t j = 0; j < H; j++) h[j] = s->xg[j] + s->hg[j];
      clip_vec(c, h, H);
      act_apply(&dir->act[0], h, H);
      break;
    }
    case RNN_GRU: {
      /* z and r gates: rows [0, 2H). */
      double *z = s->xg, *r = s->xg + H, *hh = s->xg + 2 * H;
      matvec(dir->r, h, dir->rb, 2 * H, H, s->hg);
      for (int64_t j = 0; j < 2 * H; j++) s->xg[j] += s->hg[j];
      clip_vec(c, s->xg, 2 * H);
      act_apply(&dir->act[0], s->xg, 2 * H);
      const double *rh = dir->r + 2 * H * H, *rbh = dir->rb + 2 * H;
      if (c->linear_before_reset) {
        matvec(rh, h, rbh, H, H, s->hg);
        for (int64_t j = 0; j < H; j++) hh[j] += r[j] * s->hg[j];
      } else {
        for (int64_t j = 0; j < H; j++) s->tmp[j] = r[j] * h[j];
        matvec(rh, s->tmp, rbh, H, H, s->hg);
        for (int64_t j = 0; j < H; j++) hh[j] += s->hg[j];
      }
      clip_vec(c, hh, H);
      act_apply(&dir->act[1], hh, H);
      for (int64_t j = 0; j < H; j++) h[j] = (1.0 - z[j]) * hh[j] + z[j] * h[j];
      break;
    }
    case RNN_LSTM: {
      double *gi = s->xg, *go = s->xg + H, *gf = s->xg + 2 * H, *gc = s->xg + 3 * H;
      matvec(dir->r, h, dir->rb, GH, H, s->hg);
      for (int64_t j = 0; j < GH; j++) s->xg[j] += s->hg[j];
      if (dir->p) {
        const double *pi = dir->p, *pf = dir->p + 2 * H;
        for (int64_t j = 0; j < H; j++) {
          gi[j] += pi[j] * cell[j];
          gf[j] += pf[j] * cell[j];
        }
      }
      clip_vec(c, gi, H);
      act_apply(&dir->act[0], gi, H);
      if (c->input_forget) {
        /* Coupled gates: the forget gate is 1 - input gate. */
        for (int64_t j = 0; j < H; j++) gf[j] = 1.0 - gi[j];
      } else {
        clip_vec(c, gf, H);
        act_apply(&dir->act[0], gf, H);
      }
      clip_vec(c, gc, H);
      act_apply(&dir->act[1], gc, H);
      for (int64_t j = 0; j < H; j++) cell[j] = gf[j] * cell[j] + gi[j] * gc[j];
      if (dir->p) {
        const double *po = dir->p + H;
        for (int64_t j = 0; j < H; j++) go[j] += po[j] * cell[j];
      }
      clip_vec(c, go, H);
      act_apply(&dir->act[0], go, H);
      memcpy(s->tmp, cell, (size_t)H * sizeof *cell);
      act_apply(&dir->act[2], s->tmp, H);
      for (int64_t j = 0; j < H; j++) h[j] = go[j] * s->tmp[j];
      break;
    }
  }
}

/* Converts all of a float tensor into a fresh double array (NULL on OOM,
 * message set). */
static double *to_double(const er_tensor *t, const char *what) {
  int64_t n = er__count(t);
  double *d = er__malloc((size_t)(n ? n : 1) * sizeof *d, what);
  if (d) load_row(t, 0, d, n);
  return d;
}

static er_status rnn_run_kind(er_kctx *ctx, rnn_kind kind) {
  rnn_cfg cfg;
  er_status st = ER_STATUS_OK;
  ER_CHECK(parse_cfg(ctx, kind, &cfg));
  const er_tensor *X = ctx->in[IN_X], *W = ctx->in[IN_W], *R = ctx->in[IN_R];
  const er_tensor *B = er__in(ctx, IN_B), *SL = er__in(ctx, IN_SEQ_LENS);
  const er_tensor *H0 = er__in(ctx, IN_INITIAL_H);
  const er_tensor *C0 = kind == RNN_LSTM ? er__in(ctx, IN_INITIAL_C) : NULL;
  const er_tensor *P = kind == RNN_LSTM ? er__in(ctx, IN_P) : NULL;
  er_tensor *Y = er__out(ctx, 0), *YH = er__out(ctx, 1);
  er_tensor *YC = kind == RNN_LSTM ? er__out(ctx, 2) : NULL;

  const bool lay1 = cfg.layout == 1;
  const int64_t S = X->dims[lay1 ? 1 : 0], N = X->dims[lay1 ? 0 : 1], I = X->dims[2];
  const int64_t H = R->dims[2], G = cfg.gates, GH = G * H;
  const int D = cfg.dirs;

  /* Every length must lie in [0, seq_length]. */
  for (int64_t b = 0; SL && b < N; b++) {
    int64_t len = er__get_i64(SL, b);
    if (len < 0 || len > S)
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE,
                          "sequence_lens[%lld] = %lld is outside [0, %lld] (seq_length)",
                          (long long)b, (long long)len, (long long)S);
  }

  double *w = NULL, *r = NULL, *bias = NULL, *p = NULL, *state = NULL, *scratch = NULL;
  w = to_double(W, "recurrent weights");
  r = to_double(R, "recurrent weights");
  bias = er__calloc((size_t)(D * 2 * GH) + 1, sizeof *bias, "RNN bias");
  /* state: h [N, H] then c [N, H] for the current direction. */
  state = er__malloc((size_t)(2 * N * H + 1) * sizeof *state, "RNN state");
  scratch = er__malloc((size_t)(I + 2 * GH + H + 1) * sizeof *scratch, "RNN scratch");
  if (P) p = to_double(P, "peepholes");
  if (!w || !r || !bias || !state || !scratch || (P && !p)) {
    st = ER_STATUS_OUT_OF_MEMORY;
    goto done;
  }
  if (B) load_row(B, 0, bias, D * 2 * GH);
  rnn_scratch s = {scratch, scratch + I, scratch + I + GH, scratch + I + 2 * GH};
  double *h = state, *c = state + N * H;

  for (int d = 0; d < D; d++) {
    rnn_dir dir = {w + d * GH * I, r + d * GH * H, bias + d * 2 * GH, bias + d * 2 * GH + GH,
                   p ? p + d * 3 * H : NULL, cfg.acts[d]};
    bool backward = cfg.reverse || d == 1;
    for (int64_t b = 0; b < N; b++) {
      double *hb = h + b * H, *cb = c + b * H;
      if (H0) load_row(H0, off_h(&cfg, N, H, d, b), hb, H);
      else memset(hb, 0, (size_t)H * sizeof *hb);
      if (C0) load_row(C0, off_h(&cfg, N, H, d, b), cb, H);
      else memset(cb, 0, (size_t)H * sizeof *cb);
      /* A sequence of length len runs steps 0..len-1; backward runs read
       * positions len-1 down to 0, so each sequence is reversed within its
       * own length. Y past len stays zero (outputs arrive zeroed); Y_h / Y_c
       * hold the state after the last step. A sequence of length 0 has no
       * valid step, so its Y_h / Y_c stay zero too, as in onnxruntime. */
      int64_t len = SL ? er__get_i64(SL, b) : S;
      for (int64_t t = 0; t < len; t++) {
        int64_t pos = backward ? len - 1 - t : t;
        load_row(X, off_x(&cfg, S, N, I, pos, b), s.x, I);
        cell_step(&cfg, &dir, I, H, &s, hb, cb);
        if (Y) store_row(Y, off_y(&cfg, S, N, H, pos, d, b), hb, H);
      }
      if (len == 0) continue;
      store_row(YH, off_h(&cfg, N, H, d, b), hb, H);
      store_row(YC, off_h(&cfg, N, H, d, b), cb, H);
    }
  }

done:
  free(w);
  free(r);
  free(bias);
  free(p);
  free(state);
  free(scratch);
  return st;
}

/* ======================================================================== */
/* com.microsoft DynamicQuantizeLSTM                                         */
/* ======================================================================== */

/* onnxruntime's quantize_dynamic writes each LSTM as this contrib op
 * (ddddocr's default OCR model has one). Its weights are 8-bit and
 * transposed against LSTM's, with a scale and zero point per direction or
 * per column:
 *   W [dirs, input, 4*hidden]    R [dirs, hidden, 4*hidden]   (int8 | uint8)
 *   W_scale, W_zero_point, R_scale, R_zero_point: [dirs] | [dirs, 4*hidden]
 * and the LSTM's other inputs, attributes (no layout) and outputs.
 * onnxruntime computes it with activations quantized at run time, and that
 * is what the op means in practice: X (every step at once) and each step's
 * hidden state (every batch row together) are quantized to uint8 with
 * DynamicQuantizeLinear's rule, multiplied in integers and scaled back in
 * float32,
 *   G = (Xq - xz)(Wq - wz) * (xs * ws) + (Hq - hz)(Rq - rz) * (hs * rs),
 * then the bias and the gates as in LSTM. Doing the same arithmetic keeps
 * the two runtimes within float rounding of each other; a float LSTM over
 * dequantized weights would differ by the activations' quantization error.
 * The hidden state quantized at step t is, per row, what onnxruntime holds
 * there: the row's last output, or zeros once its sequence has ended and Y
 * is produced (the range includes 0 anyway). All rows of a step share one
 * scale, as in onnxruntime on one thread; on more it quantizes each
 * thread's share of the rows on its own, so its results then depend on its
 * thread count. */

enum { DQ_W_SCALE = 8, DQ_W_ZP, DQ_R_SCALE, DQ_R_ZP };

static const er_dtype dq_weight_types[] = {ER_DTYPE_INT8, ER_DTYPE_UINT8, ER_DTYPE_UNDEFINED};

static er_status dqlstm_check(er_kctx *ctx) {
  rnn_cfg cfg;
  ER_CHECK(parse_cfg(ctx, RNN_LSTM, &cfg));
  if (er__node_attr(ctx->node, "layout"))
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "DynamicQuantizeLSTM has no 'layout' attribute");
  static const char *const qnames[] = {"W_scale", "W_zero_point", "R_scale", "R_zero_point"};
  for (int i = DQ_W_SCALE; i <= DQ_R_ZP; i++)
    if (!er__in(ctx, i))
      return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "input %d (%s) is required", i, qnames[i - DQ_W_SCALE]);
  static const int float_inputs[] = {IN_X, IN_B, IN_INITIAL_H, IN_INITIAL_C, IN_P, DQ_W_SCALE, DQ_R_SCALE};
  for (size_t k = 0; k < ER_ARRAY_LEN(float_inputs); k++)
    if (er__in(ctx, float_inputs[k])) ER_CHECK(er__require_type(ctx, float_inputs[k], float_only_types));
  ER_CHECK(er__require_type(ctx, IN_W, dq_weight_types));
  ER_CHECK(er__require_type(ctx, IN_R, dq_weight_types));
  ER_CHECK(er__require_same_type(ctx, IN_W, DQ_W_ZP));
  ER_CHECK(er__require_same_type(ctx, IN_R, DQ_R_ZP));
  if (er__in(ctx, IN_SEQ_LENS)) ER_CHECK(er__require_type(ctx, IN_SEQ_LENS, er__types_index));
  static const int ranks[] = {3, 3, 3, 2, 1, 3, 3, 2};
  for (int i = 0; i < 8 && i < ctx->n_in; i++)
    if (er__in(ctx, i)) ER_CHECK(er__require_rank(ctx, i, ranks[i], ranks[i]));
  for (int i = DQ_W_SCALE; i <= DQ_R_ZP; i++) ER_CHECK(er__require_rank(ctx, i, 1, 2));

  const int D = cfg.dirs;
  int64_t H = cfg.hidden >= 0 ? cfg.hidden : dim_of(ctx, IN_R, 1);
  const int64_t GH = H >= 0 ? 4 * H : -1;
  int64_t S = dim_of(ctx, IN_X, 0), N = dim_of(ctx, IN_X, 1), I = dim_of(ctx, IN_X, 2);
  ER_CHECK(expect_dim(ctx, IN_W, 0, D, "num_directions"));
  ER_CHECK(expect_dim(ctx, IN_W, 1, I, "input_size (X's last dim)"));
  ER_CHECK(expect_dim(ctx, IN_W, 2, GH, "4 * hidden_size"));
  ER_CHECK(expect_dim(ctx, IN_R, 0, D, "num_directions"));
  ER_CHECK(expect_dim(ctx, IN_R, 1, H, "hidden_size"));
  ER_CHECK(expect_dim(ctx, IN_R, 2, GH, "4 * hidden_size"));
  ER_CHECK(expect_dim(ctx, IN_B, 0, D, "num_directions"));
  ER_CHECK(expect_dim(ctx, IN_B, 1, GH >= 0 ? 2 * GH : -1, "8 * hidden_size"));
  ER_CHECK(expect_dim(ctx, IN_SEQ_LENS, 0, N, "batch_size"));
  for (int i = IN_INITIAL_H; i <= IN_INITIAL_C; i++) {
    ER_CHECK(expect_dim(ctx, i, 0, D, "num_directions"));
    ER_CHECK(expect_dim(ctx, i, 1, N, "batch_size"));
    ER_CHECK(expect_dim(ctx, i, 2, H, "hidden_size"));
  }
  ER_CHECK(expect_dim(ctx, IN_P, 0, D, "num_directions"));
  ER_CHECK(expect_dim(ctx, IN_P, 1, H >= 0 ? 3 * H : -1, "3 * hidden_size"));
  /* Scales and zero points: [dirs] per direction, [dirs, 4*hidden] per
   * column; a zero point has its scale's shape. */
  char a[96], b[96];
  for (int i = DQ_W_SCALE; i <= DQ_R_ZP; i++) {
    const er_tensor *q = ctx->in[i];
    if (q->rank < 0) continue;
    if ((q->dims[0] >= 0 && q->dims[0] != D) || (q->rank == 2 && GH >= 0 && q->dims[1] >= 0 && q->dims[1] != GH))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "%s has shape %s; it must be [%d] (per direction) or [%d, %lld] (per column)",
                          qnames[i - DQ_W_SCALE], er__shape_str(q, a, sizeof a), D, D, (long long)GH);
  }
  for (int i = DQ_W_SCALE; i <= DQ_R_SCALE; i += 2) {
    const er_tensor *sc = ctx->in[i], *zp = ctx->in[i + 1];
    if (sc->rank >= 0 && zp->rank >= 0 && sc->rank != zp->rank)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "%s has shape %s but %s has shape %s; they must match",
                          qnames[i - DQ_W_SCALE], er__shape_str(sc, a, sizeof a), qnames[i + 1 - DQ_W_SCALE],
                          er__shape_str(zp, b, sizeof b));
  }
  int64_t y_dims[4] = {S, D, N, H}, h_dims[3] = {D, N, H};
  er__set_output(ctx, 0, ER_DTYPE_FLOAT, 4, y_dims);
  er__set_output(ctx, 1, ER_DTYPE_FLOAT, 3, h_dims);
  er__set_output(ctx, 2, ER_DTYPE_FLOAT, 3, h_dims);
  return ER_STATUS_OK;
}

/* Element j of an 8-bit weight or zero-point tensor as an integer. */
static int32_t q8_at(const er_tensor *t, int64_t j) {
  return t->dtype == ER_DTYPE_INT8 ? ((const int8_t *)t->data)[j] : ((const uint8_t *)t->data)[j];
}

/* The plain products: acc[r][n] = sum_k (a[r][k] - az) (w[k][n] - wz[n])
 * in wrapping 32-bit arithmetic, as onnxruntime's int32 accumulators and
 * edgerun's integer kernels compute them. */
static void dq_products_plain(void *self, er_kctx *ctx, int which, int d, const uint8_t *a, int32_t az, int64_t m,
                              int32_t *acc) {
  (void)self;
  const er_tensor *w = ctx->in[which ? IN_R : IN_W], *wzt = ctx->in[which ? DQ_R_ZP : DQ_W_ZP];
  const int64_t K = w->dims[1], GH = w->dims[2], w_off = (int64_t)d * K * GH;
  for (int64_t r = 0; r < m; r++) {
    uint32_t *row = (uint32_t *)acc + r * GH;
    for (int64_t n = 0; n < GH; n++) row[n] = 0;
    for (int64_t k = 0; k < K; k++) {
      uint32_t av = (uint32_t)((int32_t)a[r * K + k] - az);
      if (av == 0) continue;
      for (int64_t n = 0; n < GH; n++) {
        int32_t wz = q8_at(wzt, wzt->rank == 2 ? d * GH + n : d);
        row[n] += av * (uint32_t)(q8_at(w, w_off + k * GH + n) - wz);
      }
    }
  }
}

/* act_apply in float32, for DynamicQuantizeLSTM, whose gates onnxruntime
 * computes in float: Sigmoid and Tanh through expf and tanhf (double exp
 * and tanh were a tenth of ddddocr's model), the other activations through
 * their double forms (dtmp [n] scratch), rounded once. */
static void act_apply_f(const rnn_act *a, float *v, int64_t n, double *dtmp) {
  switch (a->kind) {
    case ACT_SIGMOID:
      for (int64_t i = 0; i < n; i++) {
        float x = v[i];
        if (x >= 0) {
          v[i] = 1.0f / (1.0f + expf(-x));
        } else {
          float e = expf(x);
          v[i] = e / (1.0f + e);
        }
      }
      return;
    case ACT_TANH:
      for (int64_t i = 0; i < n; i++) v[i] = tanhf(v[i]);
      return;
    default:
      for (int64_t i = 0; i < n; i++) dtmp[i] = v[i];
      act_apply(a, dtmp, n);
      for (int64_t i = 0; i < n; i++) v[i] = (float)dtmp[i];
  }
}

static void clip_f(const rnn_cfg *c, float *v, int64_t n) {
  if (!c->has_clip) return;
  const float lim = (float)c->clip;
  for (int64_t i = 0; i < n; i++) v[i] = v[i] < -lim ? -lim : v[i] > lim ? lim : v[i];
}

/* Where er__dqlstm_run's scratch lies in one buffer of
 * er__dqlstm_scratch_bytes, each part 64-byte aligned (S is the full
 * sequence length, an upper bound of the longest one). */
typedef struct dq_scratch {
  uint8_t *xq;
  int32_t *accx;
  float *fbuf, *gates;
  double *dtmp;
  size_t bytes;
} dq_scratch;

static void dq_scratch_layout(int64_t S, int64_t N, int64_t I, int64_t H, void *base, dq_scratch *sc) {
  const int64_t GH = 4 * H, NH = N * H;
  const size_t parts[5] = {(size_t)(S * N * I + NH), (size_t)(S * N * GH + N * GH) * sizeof(int32_t),
                           (size_t)(3 * NH + 3 * GH) * sizeof(float), (size_t)(GH + 4 * H) * sizeof(float),
                           (size_t)H * sizeof(double)};
  size_t off[5], at = 0;
  for (int i = 0; i < 5; i++) {
    off[i] = at;
    at += (parts[i] + 63) / 64 * 64;
  }
  uint8_t *b = base;
  sc->bytes = at + 64;
  sc->xq = b ? b + off[0] : NULL;
  sc->accx = b ? (int32_t *)(void *)(b + off[1]) : NULL;
  sc->fbuf = b ? (float *)(void *)(b + off[2]) : NULL;
  sc->gates = b ? (float *)(void *)(b + off[3]) : NULL;
  sc->dtmp = b ? (double *)(void *)(b + off[4]) : NULL;
}

size_t er__dqlstm_scratch_bytes(const er_kctx *ctx) {
  const er_tensor *X = ctx->in[IN_X], *R = ctx->in[IN_R];
  if (!X || !R || X->rank != 3 || R->rank != 3) return 64;
  dq_scratch sc;
  dq_scratch_layout(X->dims[0], X->dims[1], X->dims[2], R->dims[1], NULL, &sc);
  return sc.bytes;
}

er_status er__dqlstm_run(er_kctx *ctx, const er_dq_products *prod, void *ws) {
  rnn_cfg cfg;
  er_status st = ER_STATUS_OK;
  ER_CHECK(parse_cfg(ctx, RNN_LSTM, &cfg));
  const er_tensor *X = ctx->in[IN_X], *R = ctx->in[IN_R];
  const er_tensor *B = er__in(ctx, IN_B), *SL = er__in(ctx, IN_SEQ_LENS);
  const er_tensor *H0 = er__in(ctx, IN_INITIAL_H), *C0 = er__in(ctx, IN_INITIAL_C), *P = er__in(ctx, IN_P);
  const er_tensor *WS = ctx->in[DQ_W_SCALE], *RS = ctx->in[DQ_R_SCALE];
  er_tensor *Y = er__out(ctx, 0), *YH = er__out(ctx, 1), *YC = er__out(ctx, 2);
  const int64_t S = X->dims[0], N = X->dims[1], I = X->dims[2], H = R->dims[1], GH = 4 * H;
  const int D = cfg.dirs;

  int64_t max_len = SL ? 0 : S;
  for (int64_t b = 0; SL && b < N; b++) {
    int64_t len = er__get_i64(SL, b);
    if (len < 0 || len > S)
      return er__op_error(ctx, ER_STATUS_OUT_OF_RANGE, "sequence_lens[%lld] = %lld is outside [0, %lld] (seq_length)",
                          (long long)b, (long long)len, (long long)S);
    if (len > max_len) max_len = len;
  }

  /* Scratch (er__dqlstm_scratch_bytes, sized for the full sequence): X
   * quantized [max_len*N*I] and the previous outputs quantized [N*H]; the
   * integer products of X [max_len*N, GH] and of a step's hidden state
   * [N, GH]; in float the state h, c and the previous outputs onnxruntime
   * quantizes [N*H] each, the multipliers [2*GH], the summed bias [GH], a
   * row's gates [GH], h(C) [H] and the peepholes [3*H]; [H] doubles for
   * the activations computed in double. */
  const int64_t XN = max_len * N * I, NH = N * H;
  void *owned = NULL;
  if (!ws) {
    ws = owned = er__malloc(er__dqlstm_scratch_bytes(ctx), "DynamicQuantizeLSTM scratch");
    if (!ws) return ER_STATUS_OUT_OF_MEMORY;
  }
  dq_scratch sc;
  dq_scratch_layout(S, N, I, H, ws, &sc);
  uint8_t *xq = sc.xq;
  int32_t *accx = sc.accx;
  float *fbuf = sc.fbuf, *gates = sc.gates;
  double *dtmp = sc.dtmp;
  uint8_t *hq = xq + XN;
  int32_t *acch = accx + max_len * N * GH;
  float *h = fbuf, *c = h + NH, *hprev = c + NH, *wmul = hprev + NH, *rmul = wmul + GH, *bias = rmul + GH;
  float *g = gates, *tmp = g + GH, *peep = tmp + H;
  float xs;
  uint8_t xz;
  er__dynamic_qparams_u8(X->data, XN, &xs, &xz);
  er__quantize_u8(X->data, XN, xs, xz, xq);
  const float *wsv = WS->data, *rsv = RS->data;

  for (int d = 0; d < D; d++) {
    const bool backward = cfg.reverse || d == 1;
    const rnn_act *act = cfg.acts[d];
    const bool plain_cell = prod->cell && !P && !cfg.has_clip && !cfg.input_forget && act[0].kind == ACT_SIGMOID &&
                            act[1].kind == ACT_TANH && act[2].kind == ACT_TANH;
    /* X's products for every step at once (rows in position order). */
    prod->product(prod->self, ctx, 0, d, xq, xz, max_len * N, accx);
    /* Per-column multipliers as onnxruntime forms them, and Wb + Rb summed
     * in float32 as it does before the gates. */
    for (int64_t n = 0; n < GH; n++) {
      wmul[n] = xs * wsv[WS->rank == 2 ? d * GH + n : d];
      bias[n] = B ? ((const float *)B->data)[d * 2 * GH + n] + ((const float *)B->data)[d * 2 * GH + GH + n] : 0.0f;
    }
    if (P)
      for (int64_t j = 0; j < 3 * H; j++) peep[j] = ((const float *)P->data)[d * 3 * H + j];
    for (int64_t i = 0; i < NH; i++) {
      h[i] = H0 ? ((const float *)H0->data)[d * NH + i] : 0.0f;
      c[i] = C0 ? ((const float *)C0->data)[d * NH + i] : 0.0f;
      hprev[i] = h[i];
    }
    for (int64_t t = 0; t < max_len; t++) {
      float hs;
      uint8_t hz;
      er__dynamic_qparams_u8(hprev, NH, &hs, &hz);
      er__quantize_u8(hprev, NH, hs, hz, hq);
      for (int64_t n = 0; n < GH; n++) rmul[n] = hs * rsv[RS->rank == 2 ? d * GH + n : d];
      prod->product(prod->self, ctx, 1, d, hq, hz, N, acch);
      for (int64_t b = 0; b < N; b++) {
        int64_t len = SL ? er__get_i64(SL, b) : S;
        float *hb = h + b * H, *cb = c + b * H;
        if (t >= len) {
          /* Ended: onnxruntime zeroes this row's output, which it then
           * reads as the previous state. */
          if (Y) memset(hprev + b * H, 0, (size_t)H * sizeof *hprev);
          continue;
        }
        int64_t pos = backward ? len - 1 - t : t;
        const int32_t *ax = accx + (pos * N + b) * GH, *ah = acch + b * GH;
        for (int64_t n = 0; n < GH; n++) {
          float gx = (float)ax[n] * wmul[n], gh = (float)ah[n] * rmul[n];
          g[n] = (gx + gh) + bias[n];
        }
        if (plain_cell) {
          prod->cell(g, cb, hb, H);
          memcpy(hprev + b * H, hb, (size_t)H * sizeof *hb);
          if (Y) memcpy((float *)Y->data + ((pos * D + d) * N + b) * H, hb, (size_t)H * sizeof *hb);
          continue;
        }
        float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
        if (P)
          for (int64_t j = 0; j < H; j++) {
            gi[j] += peep[j] * cb[j];
            gf[j] += peep[2 * H + j] * cb[j];
          }
        clip_f(&cfg, gi, H);
        act_apply_f(&act[0], gi, H, dtmp);
        if (cfg.input_forget) {
          for (int64_t j = 0; j < H; j++) gf[j] = 1.0f - gi[j];
        } else {
          clip_f(&cfg, gf, H);
          act_apply_f(&act[0], gf, H, dtmp);
        }
        clip_f(&cfg, gc, H);
        act_apply_f(&act[1], gc, H, dtmp);
        for (int64_t j = 0; j < H; j++) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
        if (P)
          for (int64_t j = 0; j < H; j++) go[j] += peep[H + j] * cb[j];
        clip_f(&cfg, go, H);
        act_apply_f(&act[0], go, H, dtmp);
        for (int64_t j = 0; j < H; j++) tmp[j] = cb[j];
        act_apply_f(&act[2], tmp, H, dtmp);
        for (int64_t j = 0; j < H; j++) hb[j] = go[j] * tmp[j];
        memcpy(hprev + b * H, hb, (size_t)H * sizeof *hb);
        if (Y) memcpy((float *)Y->data + ((pos * D + d) * N + b) * H, hb, (size_t)H * sizeof *hb);
      }
    }
    for (int64_t b = 0; b < N; b++) {
      int64_t len = SL ? er__get_i64(SL, b) : S;
      if (len == 0) continue; /* Y_h / Y_c stay zero, as for LSTM */
      if (YH) memcpy((float *)YH->data + (d * N + b) * H, h + b * H, (size_t)H * sizeof *h);
      if (YC) memcpy((float *)YC->data + (d * N + b) * H, c + b * H, (size_t)H * sizeof *c);
    }
  }

  free(owned);
  return st;
}

static er_status dqlstm_run(er_kctx *ctx) {
  const er_dq_products plain = {dq_products_plain, NULL, NULL};
  return er__dqlstm_run(ctx, &plain, NULL);
}

/* ======================================================================== */
/* Op definitions                                                            */
/* ======================================================================== */

static er_status rnn_check(er_kctx *ctx) { return rnn_check_kind(ctx, RNN_SIMPLE); }
static er_status rnn_run(er_kctx *ctx) { return rnn_run_kind(ctx, RNN_SIMPLE); }
static er_status gru_check(er_kctx *ctx) { return rnn_check_kind(ctx, RNN_GRU); }
static er_status gru_run(er_kctx *ctx) { return rnn_run_kind(ctx, RNN_GRU); }
static er_status lstm_check(er_kctx *ctx) { return rnn_check_kind(ctx, RNN_LSTM); }
static er_status lstm_run(er_kctx *ctx) { return rnn_run_kind(ctx, RNN_LSTM); }

/* Versions 7, 14 (layout attribute) and 22 (bfloat16) share one rule. */
static const er_op_def op_rnn = {
    .name = "RNN", .domain = "", .min_version = 7, .max_version = 22,
    .min_inputs = 3, .max_inputs = 6, .min_outputs = 0, .max_outputs = 2,
    .check = rnn_check, .run = rnn_run,
};

static const er_op_def op_gru = {
    .name = "GRU", .domain = "", .min_version = 7, .max_version = 22,
    .min_inputs = 3, .max_inputs = 6, .min_outputs = 0, .max_outputs = 2,
    .check = gru_check, .run = gru_run,
};

static const er_op_def op_lstm = {
    .name = "LSTM", .domain = "", .min_version = 7, .max_version = 22,
    .min_inputs = 3, .max_inputs = 8, .min_outputs = 0, .max_outputs = 3,
    .check = lstm_check, .run = lstm_run,
};

/* Inputs 3 to 7 are optional, 8 to 11 required (dqlstm_check says so by
 * name). */
static const er_op_def op_dynamic_quantize_lstm = {
    .name = "DynamicQuantizeLSTM", .domain = "com.microsoft", .min_version = 1, .max_version = 1,
    .min_inputs = 3, .max_inputs = 12, .min_outputs = 0, .max_outputs = 3,
    .check = dqlstm_check, .run = dqlstm_run,
};

const er_op_def *const er__ops_rnn[] = {
    &op_rnn,
    &op_gru,
    &op_lstm,
    &op_dynamic_quantize_lstm,
    NULL,
};
