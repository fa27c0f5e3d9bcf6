/* quant-gemm.c - the "quant" group's integer matrix products and
 * convolutions: MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv,
 * exact in int32 with the float requantization of their specs (see
 * quant.c). */
#include "ops/quant-impl.h"

/* ======================================================================== */
/* Matrix products (MatMulInteger, QLinearMatMul)                            */
/* ======================================================================== */

/* numpy.matmul geometry: a is [..., M, K] (or [K]), b is [..., K, N] (or
 * [K]); batch dims broadcast. */
typedef struct mm_geom {
  int64_t m, k, n;
  int nb;                          /* output batch rank */
  int64_t bdims[ER_MAX_RANK];      /* output batch dims */
  int64_t a_bstride[ER_MAX_RANK];  /* a's matrix-index stride per output batch dim (0 = broadcast) */
  int64_t b_bstride[ER_MAX_RANK];
  int64_t batch;                   /* output matrices */
  int64_t a_batch, b_batch;        /* matrices in a and b */
} mm_geom;

/* Computes the output shape of a matmul into (*rank, dims) with what is
 * known (rank -1 if unknown), and the full geometry when everything is
 * known (g->batch >= 0; -1 otherwise). */
static er_status mm_shape(const er_kctx *ctx, const er_tensor *a, const er_tensor *b, int *rank,
                          int64_t *dims, mm_geom *g) {
  char sa[160], sb[160];
  g->batch = -1;
  *rank = -1;
  if (a->rank == 0 || b->rank == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "matrix product of shapes %s and %s: inputs must be at least 1-D",
                        er__shape_str(a, sa, sizeof sa), er__shape_str(b, sb, sizeof sb));
  if (a->rank < 0 || b->rank < 0) return ER_STATUS_OK;
  int ar = a->rank, br = b->rank;
  int64_t m = ar == 1 ? 1 : a->dims[ar - 2], ka = a->dims[ar - 1];
  int64_t kb = br == 1 ? b->dims[0] : b->dims[br - 2], n = br == 1 ? 1 : b->dims[br - 1];
  if (ka >= 0 && kb >= 0 && ka != kb)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "matrix product of shapes %s and %s: inner dims %lld and %lld differ",
                        er__shape_str(a, sa, sizeof sa), er__shape_str(b, sb, sizeof sb),
                        (long long)ka, (long long)kb);
  int anb = ar > 2 ? ar - 2 : 0, bnb = br > 2 ? br - 2 : 0;
  int nb = anb > bnb ? anb : bnb;
  if (nb + 2 > ER_MAX_RANK)
    return er__op_error(ctx, ER_STATUS_LIMIT, "output rank exceeds %d (ER_MAX_RANK)", ER_MAX_RANK);
  int64_t astr = 1, bstr = 1;
  bool known = er__tensor_shape_known(a) && er__tensor_shape_known(b);
  /* Walk batch dims from the innermost outwards to build matrix strides. */
  for (int d = nb - 1; d >= 0; d--) {
    int ai = d - (nb - anb), bi = d - (nb - bnb);
    int64_t ad = ai >= 0 ? a->dims[ai] : 1, bd = bi >= 0 ? b->dims[bi] : 1, od;
    if (ad >= 0 && bd >= 0 && ad != bd && ad != 1 && bd != 1)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "matrix product of shapes %s and %s: batch dims %lld and %lld cannot be "
                          "broadcast",
                          er__shape_str(a, sa, sizeof sa), er__shape_str(b, sb, sizeof sb),
                          (long long)ad, (long long)bd);
    if (ad < 0 || bd < 0)
      od = (ad == 1) ? bd : (bd == 1 ? ad : (ad >= 0 ? ad : bd));
    else
      od = ad == 1 ? bd : ad;
    g->bdims[d] = od;
    if (known) {
      g->a_bstride[d] = ad == 1 ? 0 : astr;
      g->b_bstride[d] = bd == 1 ? 0 : bstr;
      astr *= ad;
      bstr *= bd;
    }
  }
  int r = 0;
  for (int d = 0; d < nb; d++) dims[r++] = g->bdims[d];
  if (ar > 1) dims[r++] = m;
  if (br > 1) dims[r++] = n;
  *rank = r;
  if (known) {
    g->m = m;
    g->k = ka;
    g->n = n;
    g->nb = nb;
    g->a_batch = astr;
    g->b_batch = bstr;
    g->batch = 1;
    for (int d = 0; d < nb; d++) g->batch *= g->bdims[d];
  }
  return ER_STATUS_OK;
}

/* Matrix indices into a and b of output matrix `ob`. */
static void mm_batch_index(const mm_geom *g, int64_t ob, int64_t *ai, int64_t *bi) {
  int64_t ra = 0, rb = 0;
  for (int d = g->nb - 1; d >= 0; d--) {
    int64_t c = ob % g->bdims[d];
    ob /= g->bdims[d];
    ra += c * g->a_bstride[d];
    rb += c * g->b_bstride[d];
  }
  *ai = ra;
  *bi = rb;
}

/* Validates a scale or zero point of matmul operand `mat` (input mat_i):
 * one value (per tensor), or one value per row of a (rows = true: shape [M]
 * or [..., M, 1]) or per column of b (shape [N] or [..., 1, N]), with
 * leading dims equal to the operand's batch dims or 1. */
static er_status mm_param_check(const er_kctx *ctx, int p_i, int mat_i, bool rows, const char *name) {
  const er_tensor *p = er__in(ctx, p_i), *mat = ctx->in[mat_i];
  char sp[160], sm[160];
  if (!p || !er__tensor_shape_known(p) || mat->rank < 0) return ER_STATUS_OK;
  if (er__tensor_count(p) == 1) return ER_STATUS_OK;
  int r = mat->rank;
  int64_t len = rows ? (r == 1 ? 1 : mat->dims[r - 2]) : (r == 1 ? 1 : mat->dims[r - 1]);
  bool ok;
  if (p->rank == 1) {
    ok = len < 0 || p->dims[0] == len;
  } else {
    ok = p->rank == r && r >= 2;
    if (ok) {
      int64_t p_row = p->dims[r - 2], p_col = p->dims[r - 1];
      ok = rows ? (p_col == 1 && (len < 0 || p_row == len)) : (p_row == 1 && (len < 0 || p_col == len));
      for (int d = 0; ok && d < r - 2; d++)
        ok = p->dims[d] == 1 || mat->dims[d] < 0 || p->dims[d] == mat->dims[d];
    }
  }
  if (!ok)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "%s has shape %s but input %d has shape %s; it must hold one value or one "
                        "per %s ([%s] or [..., %s])",
                        name, er__shape_str(p, sp, sizeof sp), mat_i, er__shape_str(mat, sm, sizeof sm),
                        rows ? "row" : "column", rows ? "M" : "N", rows ? "M, 1" : "1, N");
  return ER_STATUS_OK;
}

/* Expands a validated scale / zero point of operand `mat` into one double
 * per (matrix of mat, row) (rows) or per (matrix of mat, column): a new
 * array of mat_batch * len values; a missing parameter expands to 0. */
static er_status mm_param_expand(const er_kctx *ctx, const er_tensor *p, const er_tensor *mat,
                                 bool rows, double **out) {
  int r = mat->rank;
  int64_t len = rows ? (r == 1 ? 1 : mat->dims[r - 2]) : (r == 1 ? 1 : mat->dims[r - 1]);
  int nb = r > 2 ? r - 2 : 0;
  int64_t mats = 1;
  for (int d = 0; d < nb; d++) mats *= mat->dims[d];
  size_t total = (size_t)(mats * len);
  double *v = er__malloc((total ? total : 1) * sizeof *v, "quantization parameters");
  if (!v) {
    er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  int64_t pcount = p ? er__count(p) : 0;
  int64_t pstr[ER_MAX_RANK];
  if (p && p->rank == r && pcount != 1) er__strides(p->rank, p->dims, pstr);
  for (int64_t mi = 0; mi < mats; mi++)
    for (int64_t l = 0; l < len; l++) {
      double val = 0.0;
      if (p) {
        int64_t pi = 0;
        if (pcount == 1) {
          pi = 0;
        } else if (p->rank == 1) {
          pi = l;
        } else {
          int64_t rem = mi;
          for (int d = nb - 1; d >= 0; d--) {
            int64_t c = rem % mat->dims[d];
            rem /= mat->dims[d];
            if (p->dims[d] != 1) pi += c * pstr[d];
          }
          pi += l * (rows ? pstr[r - 2] : pstr[r - 1]);
        }
        val = er__load_f64(p->data, p->dtype, pi);
      }
      v[mi * len + l] = val;
    }
  *out = v;
  return ER_STATUS_OK;
}

/* ---- MatMulInteger ------------------------------------------------------ */

static const er_dtype int8_types[] = {ER_DTYPE_INT8, ER_DTYPE_UINT8, ER_DTYPE_UNDEFINED};

static er_status matmul_integer_check(er_kctx *ctx) {
  int rank;
  int64_t dims[ER_MAX_RANK];
  mm_geom g;
  ER_CHECK(er__require_type(ctx, 0, int8_types));
  ER_CHECK(er__require_type(ctx, 1, int8_types));
  if (er__in(ctx, 2)) ER_CHECK(er__require_same_type(ctx, 0, 2));
  if (er__in(ctx, 3)) ER_CHECK(er__require_same_type(ctx, 1, 3));
  ER_CHECK(mm_shape(ctx, ctx->in[0], ctx->in[1], &rank, dims, &g));
  ER_CHECK(mm_param_check(ctx, 2, 0, true, "a_zero_point"));
  ER_CHECK(mm_param_check(ctx, 3, 1, false, "b_zero_point"));
  er__set_output(ctx, 0, ER_DTYPE_INT32, rank, dims);
  return ER_STATUS_OK;
}

static er_status matmul_integer_run(er_kctx *ctx) {
  const er_tensor *a = ctx->in[0], *b = ctx->in[1];
  int32_t *y = ctx->out[0]->data; /* [batch, M, N] */
  int rank;
  int64_t dims[ER_MAX_RANK];
  mm_geom g;
  ER_CHECK(mm_shape(ctx, a, b, &rank, dims, &g));
  int64_t M = g.m, K = g.k, N = g.n;
  double *za = NULL, *zb = NULL;
  int32_t *bsub = NULL, *arow = NULL; /* [K, N] b minus its zero point; [K] one row of a */
  int64_t *acc = NULL;                /* [N] */
  er_status st = mm_param_expand(ctx, er__in(ctx, 2), a, true, &za);
  if (st == ER_STATUS_OK) st = mm_param_expand(ctx, er__in(ctx, 3), b, false, &zb);
  if (st == ER_STATUS_OK) {
    bsub = er__malloc((size_t)(K * N + 1) * sizeof *bsub, "MatMulInteger buffers");
    arow = er__malloc((size_t)(K + 1) * sizeof *arow, "MatMulInteger buffers");
    acc = er__malloc((size_t)(N + 1) * sizeof *acc, "MatMulInteger buffers");
    if (!bsub || !arow || !acc) st = ER_STATUS_OUT_OF_MEMORY;
  }
  if (st != ER_STATUS_OK) goto done;
  int64_t last_bi = -1;
  for (int64_t ob = 0; ob < g.batch; ob++) {
    int64_t ai, bi;
    mm_batch_index(&g, ob, &ai, &bi);
    if (bi != last_bi) {
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++)
          bsub[k * N + j] = (int32_t)(er__load_i64(b->data, b->dtype, (bi * K + k) * N + j) -
                                      (int64_t)zb[bi * N + j]);
      last_bi = bi;
    }
    for (int64_t i = 0; i < M; i++) {
      int32_t zpa = (int32_t)za[ai * M + i];
      for (int64_t k = 0; k < K; k++)
        arow[k] = (int32_t)er__load_i64(a->data, a->dtype, (ai * M + i) * K + k) - zpa;
      for (int64_t j = 0; j < N; j++) acc[j] = 0;
      for (int64_t k = 0; k < K; k++) {
        int64_t av = arow[k];
        if (av == 0) continue;
        const int32_t *brow = bsub + k * N;
        for (int64_t j = 0; j < N; j++) acc[j] += av * brow[j];
      }
      int32_t *yrow = y + (ob * M + i) * N;
      for (int64_t j = 0; j < N; j++) yrow[j] = (int32_t)(uint32_t)(uint64_t)acc[j];
    }
  }
done:
  if (st == ER_STATUS_OUT_OF_MEMORY) er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
  free(za);
  free(zb);
  free(bsub);
  free(arow);
  free(acc);
  return st;
}

const er_op_def er__oq_op_matmul_integer = {
    .name = "MatMulInteger", .domain = "", .min_version = 10, .max_version = 10,
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .check = matmul_integer_check, .run = matmul_integer_run,
};

/* ---- QLinearMatMul ------------------------------------------------------ */

static const er_dtype qlinear_types_21[] = {
    ER_DTYPE_INT8,           ER_DTYPE_UINT8,       ER_DTYPE_FLOAT8E4M3FN, ER_DTYPE_FLOAT8E4M3FNUZ,
    ER_DTYPE_FLOAT8E5M2,     ER_DTYPE_FLOAT8E5M2FNUZ, ER_DTYPE_UNDEFINED};

static er_status qlinear_matmul_check(er_kctx *ctx) {
  int v = ctx->node->version;
  const er_dtype *qt = v >= 21 ? qlinear_types_21 : int8_types;
  const er_dtype *st = v >= 21 ? scale_types_19 : scale_types_10;
  int rank;
  int64_t dims[ER_MAX_RANK];
  mm_geom g;
  ER_CHECK(er__require_type(ctx, 0, qt));
  ER_CHECK(er__require_type(ctx, 1, st));
  ER_CHECK(er__require_same_type(ctx, 0, 2));
  ER_CHECK(er__require_type(ctx, 3, qt));
  ER_CHECK(er__require_type(ctx, 4, st));
  ER_CHECK(er__require_same_type(ctx, 3, 5));
  ER_CHECK(er__require_type(ctx, 6, st));
  ER_CHECK(er__require_type(ctx, 7, qt));
  ER_CHECK(mm_shape(ctx, ctx->in[0], ctx->in[3], &rank, dims, &g));
  ER_CHECK(mm_param_check(ctx, 1, 0, true, "a_scale"));
  ER_CHECK(mm_param_check(ctx, 2, 0, true, "a_zero_point"));
  ER_CHECK(mm_param_check(ctx, 4, 3, false, "b_scale"));
  ER_CHECK(mm_param_check(ctx, 5, 3, false, "b_zero_point"));
  ER_CHECK(er__oq_require_scalar_like(ctx, 6, "y_scale"));
  ER_CHECK(er__oq_require_scalar_like(ctx, 7, "y_zero_point"));
  er__set_output(ctx, 0, ctx->in[7]->dtype, rank, dims);
  return ER_STATUS_OK;
}

static er_status qlinear_matmul_run(er_kctx *ctx) {
  const er_tensor *a = ctx->in[0], *b = ctx->in[3];
  er_tensor *y = ctx->out[0];
  int rank;
  int64_t dims[ER_MAX_RANK];
  mm_geom g;
  ER_CHECK(mm_shape(ctx, a, b, &rank, dims, &g));
  int64_t M = g.m, K = g.k, N = g.n;
  er_dtype st_type = ctx->in[1]->dtype; /* precision of the multiplier */
  double ys = er__load_f64(ctx->in[6]->data, ctx->in[6]->dtype, 0);
  double yz = er__load_f64(ctx->in[7]->data, ctx->in[7]->dtype, 0);
  double *sa = NULL, *za = NULL, *sb = NULL, *zb = NULL;
  /* Operands minus zero points as doubles: exact for 8-bit integers, and
   * float8 values are dequantized the same way. Products of two 8-bit
   * integer differences need at most 17 bits, so double sums of them are
   * exact integers (below 2^53) - the same as an int32/int64 accumulator. */
  double *bsub = NULL, *arow = NULL, *acc = NULL; /* [K, N], [K], [N] */
  er_status st = mm_param_expand(ctx, ctx->in[1], a, true, &sa);
  if (st == ER_STATUS_OK) st = mm_param_expand(ctx, ctx->in[2], a, true, &za);
  if (st == ER_STATUS_OK) st = mm_param_expand(ctx, ctx->in[4], b, false, &sb);
  if (st == ER_STATUS_OK) st = mm_param_expand(ctx, ctx->in[5], b, false, &zb);
  if (st == ER_STATUS_OK) {
    bsub = er__malloc((size_t)(K * N + 1) * sizeof *bsub, "QLinearMatMul buffers");
    arow = er__malloc((size_t)(K + 1) * sizeof *arow, "QLinearMatMul buffers");
    acc = er__malloc((size_t)(N + 1) * sizeof *acc, "QLinearMatMul buffers");
    if (!bsub || !arow || !acc) st = ER_STATUS_OUT_OF_MEMORY;
  }
  if (st != ER_STATUS_OK) goto done;
  int64_t last_bi = -1;
  for (int64_t ob = 0; ob < g.batch; ob++) {
    int64_t ai, bi;
    mm_batch_index(&g, ob, &ai, &bi);
    if (bi != last_bi) {
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++)
          bsub[k * N + j] = er__load_f64(b->data, b->dtype, (bi * K + k) * N + j) - zb[bi * N + j];
      last_bi = bi;
    }
    for (int64_t i = 0; i < M; i++) {
      double zpa = za[ai * M + i], sav = sa[ai * M + i];
      for (int64_t k = 0; k < K; k++)
        arow[k] = er__load_f64(a->data, a->dtype, (ai * M + i) * K + k) - zpa;
      for (int64_t j = 0; j < N; j++) acc[j] = 0.0;
      for (int64_t k = 0; k < K; k++) {
        double av = arow[k];
        if (av == 0.0) continue;
        const double *brow = bsub + k * N;
        for (int64_t j = 0; j < N; j++) acc[j] += av * brow[j];
      }
      int64_t base = (ob * M + i) * N;
      for (int64_t j = 0; j < N; j++) {
        double mult = er__oq_round_to(st_type, er__oq_round_to(st_type, sav * sb[bi * N + j]) / ys);
        er__oq_store_quant(y->data, y->dtype, base + j, acc[j] * mult + yz, yz, true);
      }
    }
  }
done:
  if (st == ER_STATUS_OUT_OF_MEMORY) er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
  free(sa);
  free(za);
  free(sb);
  free(zb);
  free(bsub);
  free(arow);
  free(acc);
  return st;
}

const er_op_def er__oq_op_qlinear_matmul = {
    .name = "QLinearMatMul", .domain = "", .min_version = 10, .max_version = 21,
    .min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .check = qlinear_matmul_check, .run = qlinear_matmul_run,
};

/* ======================================================================== */
/* Integer convolution (ConvInteger, QLinearConv)                            */
/* ======================================================================== */

/* The geometry of an N-D convolution: x [N, C, in...], w [M, C/group, k...],
 * y [N, M, out...]. Unknown sizes are -1. */
typedef struct conv_geom {
  int nsp;                          /* spatial dims; -1 when unknown */
  int64_t n, c, m, group;
  int64_t in[ER_MAX_RANK];          /* input spatial dims */
  int64_t k[ER_MAX_RANK];           /* kernel spatial dims */
  int64_t out[ER_MAX_RANK];         /* output spatial dims */
  int64_t stride[ER_MAX_RANK], dil[ER_MAX_RANK];
  int64_t pad0[ER_MAX_RANK], pad1[ER_MAX_RANK]; /* padding before / after */
} conv_geom;

/* Validates the conv attributes against x (input 0) and w (input w_i) and
 * computes the geometry with what is known. */
static er_status conv_geometry(const er_kctx *ctx, int w_i, conv_geom *g) {
  const er_tensor *x = ctx->in[0], *w = ctx->in[w_i];
  const int64_t *ks, *strides, *dils, *pads;
  int64_t nks, nstrides, ndils, npads, group;
  const char *auto_pad;
  char sx[160], sw[160];
  ER_CHECK(er__attr_ints(ctx, "kernel_shape", &ks, &nks));
  ER_CHECK(er__attr_ints(ctx, "strides", &strides, &nstrides));
  ER_CHECK(er__attr_ints(ctx, "dilations", &dils, &ndils));
  ER_CHECK(er__attr_ints(ctx, "pads", &pads, &npads));
  ER_CHECK(er__attr_int(ctx, "group", 1, &group));
  ER_CHECK(er__attr_string(ctx, "auto_pad", "NOTSET", &auto_pad));
  bool same_upper = strcmp(auto_pad, "SAME_UPPER") == 0, same_lower = strcmp(auto_pad, "SAME_LOWER") == 0;
  bool valid = strcmp(auto_pad, "VALID") == 0;
  if (!same_upper && !same_lower && !valid && strcmp(auto_pad, "NOTSET") != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "auto_pad '%s' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID", auto_pad);
  if (group < 1)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "group %lld must be >= 1", (long long)group);
  g->group = group;
  if (x->rank >= 0 && x->rank < 3)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "x has shape %s; it must be [N, C, D1, ...]",
                        er__shape_str(x, sx, sizeof sx));
  if (x->rank >= 0 && w->rank >= 0 && x->rank != w->rank)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "x %s and w %s must have the same rank",
                        er__shape_str(x, sx, sizeof sx), er__shape_str(w, sw, sizeof sw));
  int rank = x->rank >= 0 ? x->rank : w->rank;
  if (rank < 0 && nks > 0) rank = (int)nks + 2;
  g->nsp = rank < 0 ? -1 : rank - 2;
  if (rank < 0) return ER_STATUS_OK;
  if (rank < 3)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "w has shape %s; it must be [M, C/group, k1, ...]",
                        er__shape_str(w, sw, sizeof sw));
  int nsp = g->nsp;
  if (nks >= 0 && nks != nsp)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "kernel_shape has %lld values; expected %d",
                        (long long)nks, nsp);
  if (nstrides >= 0 && nstrides != nsp)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "strides has %lld values; expected %d",
                        (long long)nstrides, nsp);
  if (ndils >= 0 && ndils != nsp)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "dilations has %lld values; expected %d",
                        (long long)ndils, nsp);
  if (npads >= 0 && npads != 2 * nsp)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "pads has %lld values; expected %d",
                        (long long)npads, 2 * nsp);
  g->n = x->rank >= 0 ? x->dims[0] : -1;
  g->c = x->rank >= 0 ? x->dims[1] : -1;
  g->m = w->rank >= 0 ? w->dims[0] : -1;
  int64_t wc = w->rank >= 0 ? w->dims[1] : -1;
  if (g->c >= 0 && g->c % group != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "x has %lld channels, not divisible by group %lld",
                        (long long)g->c, (long long)group);
  if (g->m >= 0 && g->m % group != 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "w has %lld output channels, not divisible by group %lld", (long long)g->m,
                        (long long)group);
  if (g->c >= 0 && wc >= 0 && wc * group != g->c)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "w %s expects %lld input channels per group but x %s has %lld channels in %lld "
                        "groups",
                        er__shape_str(w, sw, sizeof sw), (long long)wc, er__shape_str(x, sx, sizeof sx),
                        (long long)g->c, (long long)group);
  for (int d = 0; d < nsp; d++) {
    int64_t kd = w->rank >= 0 ? w->dims[d + 2] : -1;
    if (nks > 0) {
      if (ks[d] < 1)
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "kernel_shape[%d] = %lld must be >= 1", d,
                            (long long)ks[d]);
      if (kd >= 0 && ks[d] != kd)
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                            "kernel_shape[%d] = %lld does not match weight dim %lld", d,
                            (long long)ks[d], (long long)kd);
      kd = ks[d];
    }
    g->k[d] = kd;
    g->stride[d] = strides ? strides[d] : 1;
    g->dil[d] = dils ? dils[d] : 1;
    if (g->stride[d] < 1)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "strides[%d] = %lld must be >= 1", d,
                          (long long)g->stride[d]);
    if (g->dil[d] < 1)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "dilations[%d] = %lld must be >= 1", d,
                          (long long)g->dil[d]);
    g->pad0[d] = pads ? pads[d] : 0;
    g->pad1[d] = pads ? pads[d + nsp] : 0;
    if (g->pad0[d] < 0 || g->pad1[d] < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "pads on spatial axis %d (%lld, %lld) must be >= 0",
                          d, (long long)g->pad0[d], (long long)g->pad1[d]);
    int64_t in = x->rank >= 0 ? x->dims[d + 2] : -1;
    g->in[d] = in;
    g->out[d] = -1;
    if (in < 0 || kd < 0) continue;
    int64_t ek = (kd - 1) * g->dil[d] + 1; /* dilated kernel extent */
    if (same_upper || same_lower) {
      int64_t out = (in + g->stride[d] - 1) / g->stride[d];
      int64_t total = (out - 1) * g->stride[d] + ek - in;
      if (total < 0) total = 0;
      g->pad0[d] = same_upper ? total / 2 : total - total / 2;
      g->pad1[d] = total - g->pad0[d];
      g->out[d] = out;
    } else {
      if (valid) g->pad0[d] = g->pad1[d] = 0;
      int64_t span = in + g->pad0[d] + g->pad1[d] - ek;
      if (span < 0)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "dilated kernel extent %lld exceeds the padded input %lld on spatial axis %d",
                            (long long)ek, (long long)(in + g->pad0[d] + g->pad1[d]), d);
      g->out[d] = span / g->stride[d] + 1;
    }
  }
  return ER_STATUS_OK;
}

/* Sets output 0 to [N, M, out...] of type t from the geometry. */
static void conv_set_output(const er_kctx *ctx, const conv_geom *g, er_dtype t) {
  if (g->nsp < 0) {
    er__set_output(ctx, 0, t, -1, NULL);
    return;
  }
  int64_t dims[ER_MAX_RANK];
  dims[0] = g->n;
  dims[1] = g->m;
  for (int d = 0; d < g->nsp; d++) dims[d + 2] = g->out[d];
  er__set_output(ctx, 0, t, g->nsp + 2, dims);
}

/* Columns of the im2col buffer built at a time, bounding its size. */
#define CONV_COL_BUDGET (INT64_C(1) << 20) /* int32 elements */

/* Exact integer convolution: y[n, m, p] = sum over (c, kernel position) of
 * (x - x_zp) * (w[m] - w_zp[m]), with padding contributing 0 (i.e. padding
 * holds the zero point). x and w are int8 or uint8; wzp has one value per
 * output channel. The int64 sums are written to acc [N, M, P]. */
static er_status conv_int_exact(const er_kctx *ctx, const conv_geom *g, const er_tensor *x,
                                int32_t xzp, const er_tensor *w, const int32_t *wzp, int64_t *acc) {
  int nsp = g->nsp;
  int64_t P = 1, K = 1, IN = 1;
  for (int d = 0; d < nsp; d++) {
    P *= g->out[d];
    K *= g->k[d];
    IN *= g->in[d];
  }
  int64_t cg = g->c / g->group, mg = g->m / g->group;
  int64_t CK = cg * K; /* rows of the im2col matrix per group */
  int64_t T = CK > 0 ? CONV_COL_BUDGET / CK : P;
  if (T < 1) T = 1;
  if (T > P) T = P;
  int64_t in_str[ER_MAX_RANK], k_str[ER_MAX_RANK], out_str[ER_MAX_RANK];
  er__strides(nsp, g->in, in_str);
  er__strides(nsp, g->k, k_str);
  er__strides(nsp, g->out, out_str);

  int32_t *wsub = er__malloc((size_t)(g->m * CK + 1) * sizeof *wsub, "convolution weights"); /* [M, CK] */
  int32_t *xs = er__malloc((size_t)(g->c * IN + 1) * sizeof *xs, "convolution input");       /* [C, IN] */
  int32_t *col = er__malloc((size_t)(CK * T + 1) * sizeof *col, "convolution columns");      /* [CK, T] */
  int64_t *koff = er__malloc((size_t)(K * nsp + 1) * sizeof *koff, "convolution offsets");  /* [K, nsp] */
  int64_t *tacc = er__malloc((size_t)(T + 1) * sizeof *tacc, "convolution accumulators");   /* [T] */
  er_status st = ER_STATUS_OK;
  if (!wsub || !xs || !col || !koff || !tacc) {
    er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
    st = ER_STATUS_OUT_OF_MEMORY;
    goto done;
  }
  for (int64_t m = 0; m < g->m; m++)
    for (int64_t j = 0; j < CK; j++)
      wsub[m * CK + j] = (int32_t)er__load_i64(w->data, w->dtype, m * CK + j) - wzp[m];
  /* Dilated offsets of each kernel position. */
  for (int64_t kk = 0; kk < K; kk++) {
    int64_t rem = kk;
    for (int d = 0; d < nsp; d++) {
      koff[kk * nsp + d] = (rem / k_str[d]) * g->dil[d];
      rem %= k_str[d];
    }
  }
  for (int64_t n = 0; n < g->n; n++) {
    for (int64_t i = 0; i < g->c * IN; i++)
      xs[i] = (int32_t)er__load_i64(x->data, x->dtype, n * g->c * IN + i) - xzp;
    for (int64_t gi = 0; gi < g->group; gi++) {
      const int32_t *xg = xs + gi * cg * IN;
      for (int64_t p0 = 0; p0 < P; p0 += T) {
        int64_t tn = P - p0 < T ? P - p0 : T;
        /* im2col: column t holds the receptive field of output p0 + t. */
        for (int64_t t = 0; t < tn; t++) {
          int64_t base[ER_MAX_RANK], rem = p0 + t;
          for (int d = 0; d < nsp; d++) {
            base[d] = (rem / out_str[d]) * g->stride[d] - g->pad0[d];
            rem %= out_str[d];
          }
          for (int64_t kk = 0; kk < K; kk++) {
            int64_t off = 0;
            bool inside = true;
            for (int d = 0; d < nsp && inside; d++) {
              int64_t pos = base[d] + koff[kk * nsp + d];
              inside = pos >= 0 && pos < g->in[d];
              off += pos * in_str[d];
            }
            for (int64_t c = 0; c < cg; c++)
              col[(c * K + kk) * T + t] = inside ? xg[c * IN + off] : 0;
          }
        }
        for (int64_t mi = 0; mi < mg; mi++) {
          int64_t m = gi * mg + mi;
          const int32_t *wrow = wsub + m * CK;
          for (int64_t t = 0; t < tn; t++) tacc[t] = 0;
          for (int64_t j = 0; j < CK; j++) {
            int64_t wv = wrow[j];
            if (wv == 0) continue;
            const int32_t *crow = col + j * T;
            for (int64_t t = 0; t < tn; t++) tacc[t] += wv * crow[t];
          }
          int64_t *dst = acc + (n * g->m + m) * P + p0;
          for (int64_t t = 0; t < tn; t++) dst[t] = tacc[t];
        }
      }
    }
  }
done:
  free(wsub);
  free(xs);
  free(col);
  free(koff);
  free(tacc);
  return st;
}

/* Reads a per-tensor or per-output-channel integer zero point (input i, may
 * be absent) into wzp[M]. */
static void load_channel_zp(const er_tensor *z, int64_t m, int32_t *out) {
  int64_t n = z ? er__count(z) : 0;
  for (int64_t i = 0; i < m; i++)
    out[i] = z ? (int32_t)er__load_i64(z->data, z->dtype, n == 1 ? 0 : i) : 0;
}

/* Allocates the accumulator [N, M, P] and the zero points, then runs the
 * exact convolution. On success the caller frees *acc_out. */
static er_status conv_int_run(const er_kctx *ctx, int w_i, const er_tensor *xz, const er_tensor *wz,
                              conv_geom *g, int64_t **acc_out) {
  ER_CHECK(conv_geometry(ctx, w_i, g));
  int64_t count = er__count(ctx->out[0]);
  int64_t *acc = er__malloc((size_t)(count + 1) * sizeof *acc, "convolution accumulators");
  int32_t *wzp = er__malloc((size_t)(g->m + 1) * sizeof *wzp, "zero points");
  if (!acc || !wzp) {
    free(acc);
    free(wzp);
    er__error_prefix("%s '%s'", ctx->node->op_type, ctx->node->name);
    return ER_STATUS_OUT_OF_MEMORY;
  }
  load_channel_zp(wz, g->m, wzp);
  int32_t xzp = xz ? (int32_t)er__load_i64(xz->data, xz->dtype, 0) : 0;
  er_status st = conv_int_exact(ctx, g, ctx->in[0], xzp, ctx->in[w_i], wzp, acc);
  free(wzp);
  if (st != ER_STATUS_OK) {
    free(acc);
    return st;
  }
  *acc_out = acc;
  return ER_STATUS_OK;
}

/* ---- ConvInteger -------------------------------------------------------- */

static er_status conv_integer_check(er_kctx *ctx) {
  conv_geom g;
  ER_CHECK(er__require_type(ctx, 0, int8_types));
  ER_CHECK(er__require_type(ctx, 1, int8_types));
  if (er__in(ctx, 2)) ER_CHECK(er__require_same_type(ctx, 0, 2));
  if (er__in(ctx, 3)) ER_CHECK(er__require_same_type(ctx, 1, 3));
  ER_CHECK(conv_geometry(ctx, 1, &g));
  ER_CHECK(er__oq_require_scalar_like(ctx, 2, "x_zero_point"));
  ER_CHECK(er__oq_require_scalar_or_vec(ctx, 3, g.nsp >= 0 ? g.m : -1, "w_zero_point"));
  conv_set_output(ctx, &g, ER_DTYPE_INT32);
  return ER_STATUS_OK;
}

static er_status conv_integer_run(er_kctx *ctx) {
  conv_geom g;
  int64_t *acc;
  ER_CHECK(conv_int_run(ctx, 1, er__in(ctx, 2), er__in(ctx, 3), &g, &acc));
  int32_t *y = ctx->out[0]->data;
  int64_t n = er__count(ctx->out[0]);
  for (int64_t i = 0; i < n; i++) y[i] = (int32_t)(uint32_t)(uint64_t)acc[i];
  free(acc);
  return ER_STATUS_OK;
}

const er_op_def er__oq_op_conv_integer = {
    .name = "ConvInteger", .domain = "", .min_version = 10, .max_version = 10,
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .check = conv_integer_check, .run = conv_integer_run,
};

/* ---- QLinearConv -------------------------------------------------------- */

static const er_dtype int32_only[] = {ER_DTYPE_INT32, ER_DTYPE_UNDEFINED};

static er_status qlinear_conv_check(er_kctx *ctx) {
  conv_geom g;
  ER_CHECK(er__require_type(ctx, 0, int8_types));
  ER_CHECK(er__require_type(ctx, 1, scale_types_10));
  ER_CHECK(er__require_same_type(ctx, 0, 2));
  ER_CHECK(er__require_type(ctx, 3, int8_types));
  ER_CHECK(er__require_type(ctx, 4, scale_types_10));
  ER_CHECK(er__require_same_type(ctx, 3, 5));
  ER_CHECK(er__require_type(ctx, 6, scale_types_10));
  ER_CHECK(er__require_type(ctx, 7, int8_types));
  if (er__in(ctx, 8)) {
    ER_CHECK(er__require_type(ctx, 8, int32_only));
    ER_CHECK(er__require_rank(ctx, 8, 1, 1));
  }
  ER_CHECK(conv_geometry(ctx, 3, &g));
  int64_t m = g.nsp >= 0 ? g.m : -1;
  ER_CHECK(er__oq_require_scalar_like(ctx, 1, "x_scale"));
  ER_CHECK(er__oq_require_scalar_like(ctx, 2, "x_zero_point"));
  ER_CHECK(er__oq_require_scalar_or_vec(ctx, 4, m, "w_scale"));
  ER_CHECK(er__oq_require_scalar_or_vec(ctx, 5, m, "w_zero_point"));
  ER_CHECK(er__oq_require_scalar_like(ctx, 6, "y_scale"));
  ER_CHECK(er__oq_require_scalar_like(ctx, 7, "y_zero_point"));
  const er_tensor *bias = er__in(ctx, 8);
  if (bias && bias->rank == 1 && bias->dims[0] >= 0 && m >= 0 && bias->dims[0] != m)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "bias B has %lld values but w has %lld output channels",
                        (long long)bias->dims[0], (long long)m);
  conv_set_output(ctx, &g, ctx->in[7]->dtype);
  return ER_STATUS_OK;
}

static er_status qlinear_conv_run(er_kctx *ctx) {
  conv_geom g;
  int64_t *acc;
  ER_CHECK(conv_int_run(ctx, 3, ctx->in[2], ctx->in[5], &g, &acc));
  er_tensor *y = ctx->out[0];
  const er_tensor *ws = ctx->in[4], *bias = er__in(ctx, 8);
  double xs = er__load_f64(ctx->in[1]->data, ctx->in[1]->dtype, 0);
  double ys = er__load_f64(ctx->in[6]->data, ctx->in[6]->dtype, 0);
  double yz = er__load_f64(ctx->in[7]->data, ctx->in[7]->dtype, 0);
  double lo = 0, hi = 0;
  er__oq_quant_int_range(y->dtype, &lo, &hi);
  int64_t P = 1, nws = er__count(ws);
  for (int d = 0; d < g.nsp; d++) P *= g.out[d];
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t m = 0; m < g.m; m++) {
      /* Multiplier in float, like the float scales it comes from. */
      double wsv = er__load_f64(ws->data, ws->dtype, nws == 1 ? 0 : m);
      double mult = er__oq_round_to(ER_DTYPE_FLOAT, er__oq_round_to(ER_DTYPE_FLOAT, xs * wsv) / ys);
      int64_t b = bias ? ((const int32_t *)bias->data)[m] : 0;
      int64_t base = (n * g.m + m) * P;
      for (int64_t p = 0; p < P; p++) {
        /* The int32 accumulator (with bias) wraps like the spec's int32. */
        int32_t a32 = (int32_t)(uint32_t)(uint64_t)(acc[base + p] + b);
        double v = (double)a32 * mult + yz;
        er__store_i64(y->data, y->dtype, base + p, er__oq_saturate_round(v, lo, hi, yz));
      }
    }
  free(acc);
  return ER_STATUS_OK;
}

const er_op_def er__oq_op_qlinear_conv = {
    .name = "QLinearConv", .domain = "", .min_version = 10, .max_version = 10,
    .min_inputs = 8, .max_inputs = 9, .min_outputs = 1, .max_outputs = 1,
    .check = qlinear_conv_check, .run = qlinear_conv_run,
};
