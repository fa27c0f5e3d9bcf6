/* matmul.c - operators of the "matmul" group: Gemm, MatMul and Einsum.
 *
 * float32 multiplies in float32 (as every runtime does), float64 in double;
 * float16 and bfloat16 are widened to float32 and rounded once on store.
 * Integers multiply and add in 64-bit two's complement (wrapping, like the
 * narrower C types would), then are stored back to their own width. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Matrix product kernels                                                    */
/* ======================================================================== */

/* The products themselves are the shared reference ones (ref-gemm.c). */

/* A view of one matrix operand: element (r, c) at data[r * rs + c * cs]. */
typedef struct mat_view {
  const void *data;
  int64_t rs, cs;
} mat_view;

/* A B whose k is contiguous (transposed, or a column vector) is multiplied
 * by dot products when A has fewer rows or B fewer columns than these:
 * transposing it for the i-k-j kernel would cost about as much as the
 * product, and the kernel's rows would be too short to vectorize. */
#define GEMM_DOT_MAX_ROWS 8
#define GEMM_DOT_MAX_COLS 8

/* C[M,N] (contiguous, zeroed) = A[M,K] * B[K,N] for float32 / float64 /
 * uint64 views: the i-k-j kernel when B's rows are contiguous, dot products
 * for a k-contiguous B with few rows of A or columns of B, and otherwise
 * the i-k-j kernel on a row-major copy of B. */
#define DEFINE_MATMUL(SFX, T)                                                                    \
  static er_status matmul_##SFX(int64_t M, int64_t N, int64_t K, mat_view a, mat_view b, T *c) { \
    const T *A = a.data, *B = b.data;                                                            \
    if (M == 0 || N == 0 || K == 0) return ER_STATUS_OK;                                         \
    bool use_dot = b.rs == 1 && (M < GEMM_DOT_MAX_ROWS || N < GEMM_DOT_MAX_COLS);                \
    if (!use_dot && b.cs == 1) {                                                                 \
      er__ref_gemm_##SFX(M, N, K, A, a.rs, a.cs, B, b.rs, c, N);                                    \
      return ER_STATUS_OK;                                                                       \
    }                                                                                            \
    if (use_dot) {                                                                               \
      T *arow = NULL;                                                                            \
      if (a.cs != 1) {                                                                           \
        arow = er__malloc((size_t)K * sizeof *arow, "matrix product row");                       \
        if (!arow) return ER_STATUS_OUT_OF_MEMORY;                                               \
      }                                                                                          \
      for (int64_t m = 0; m < M; m++) {                                                          \
        const T *ar = A + m * a.rs;                                                              \
        if (arow) {                                                                              \
          for (int64_t k = 0; k < K; k++) arow[k] = A[m * a.rs + k * a.cs];                      \
          ar = arow;                                                                             \
        }                                                                                        \
        for (int64_t n = 0; n < N; n++) c[m * N + n] = er__ref_dot_##SFX(K, ar, B + n * b.cs);     \
      }                                                                                          \
      free(arow);                                                                                \
      return ER_STATUS_OK;                                                                       \
    }                                                                                            \
    T *bt = er__malloc((size_t)(K * N) * sizeof *bt, "transposed matrix operand");               \
    if (!bt) return ER_STATUS_OUT_OF_MEMORY;                                                     \
    for (int64_t k = 0; k < K; k++)                                                              \
      for (int64_t n = 0; n < N; n++) bt[k * N + n] = B[k * b.rs + n * b.cs];                    \
    er__ref_gemm_##SFX(M, N, K, A, a.rs, a.cs, bt, N, c, N);                                        \
    free(bt);                                                                                    \
    return ER_STATUS_OK;                                                                         \
  }

DEFINE_MATMUL(f32, float)
DEFINE_MATMUL(f64, double)
DEFINE_MATMUL(u64, uint64_t)

/* ======================================================================== */
/* Conversions for the types computed in a wider one                         */
/* ======================================================================== */

/* Integer tensor data as uint64 (two's complement of the int64 value). */
static er_status as_u64(const er_tensor *t, uint64_t **out) {
  int64_t n = er__count(t);
  uint64_t *u = er__malloc((size_t)(n > 0 ? n : 1) * sizeof *u, "int64 copy of an input");
  if (!u) return ER_STATUS_OUT_OF_MEMORY;
  for (int64_t i = 0; i < n; i++) u[i] = (uint64_t)er__load_i64(t->data, t->dtype, i);
  *out = u;
  return ER_STATUS_OK;
}

static void store_f32(er_tensor *t, const float *v, int64_t n) {
  uint16_t *h = t->data;
  switch (t->dtype) {
    case ER_DTYPE_FLOAT16:
      for (int64_t i = 0; i < n; i++) h[i] = er__f32_to_f16(v[i]);
      break;
    case ER_DTYPE_BFLOAT16:
      for (int64_t i = 0; i < n; i++) h[i] = er__f32_to_bf16(v[i]);
      break;
    default:
      for (int64_t i = 0; i < n; i++) er__store_f64(t->data, t->dtype, i, v[i]);
  }
}

static void store_u64(er_tensor *t, const uint64_t *v, int64_t n) {
  for (int64_t i = 0; i < n; i++) er__store_i64(t->data, t->dtype, i, (int64_t)v[i]);
}

/* How a run computes: the element type of its working arrays. */
typedef enum work_type { WORK_F32, WORK_F64, WORK_U64 } work_type;

static work_type work_type_of(er_dtype t) {
  if (t == ER_DTYPE_DOUBLE) return WORK_F64;
  return er__dtype_is_float(t) ? WORK_F32 : WORK_U64;
}

/* An input as an array of the working type; *owned is freed by the caller. */
static er_status work_input(const er_tensor *t, work_type w, const void **out, void **owned) {
  *owned = NULL;
  if (w == WORK_F64) {
    *out = t->data;
    return ER_STATUS_OK;
  }
  if (w == WORK_F32) {
    const float *f;
    float *o;
    ER_CHECK(er__as_f32(t, &f, &o));
    *out = f;
    *owned = o;
    return ER_STATUS_OK;
  }
  uint64_t *u;
  ER_CHECK(as_u64(t, &u));
  *out = u;
  *owned = u;
  return ER_STATUS_OK;
}

static size_t work_size(work_type w) { return w == WORK_F32 ? sizeof(float) : 8; }

/* ======================================================================== */
/* MatMul                                                                    */
/* ======================================================================== */

static const er_dtype matmul_types[] = {ER_DTYPE_FLOAT16, ER_DTYPE_BFLOAT16, ER_DTYPE_FLOAT,
                                        ER_DTYPE_DOUBLE,  ER_DTYPE_INT32,    ER_DTYPE_INT64,
                                        ER_DTYPE_UINT32,  ER_DTYPE_UINT64,   ER_DTYPE_UNDEFINED};

/* numpy.matmul's shape rule: a 1-D A is a row [1, K] and a 1-D B a column
 * [K, 1], whose unit dims are dropped from the result; leading dims are
 * batch dims and broadcast. `batch` receives the broadcast batch shape. */
static er_status matmul_shape(er_kctx *ctx, er_tensor *batch, int64_t *m, int64_t *k, int64_t *n) {
  const er_tensor *a = ctx->in[0], *b = ctx->in[1];
  ER_CHECK(er__require_type(ctx, 0, matmul_types));
  ER_CHECK(er__require_type(ctx, 1, matmul_types));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  if (a->rank == 0 || b->rank == 0)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "input %s is a scalar; MatMul needs rank >= 1",
                        a->rank == 0 ? "A" : "B");
  er__tensor_set(batch, ER_DTYPE_UNDEFINED, -1, NULL);
  *m = *k = *n = -1;
  if (a->rank < 0 || b->rank < 0) return ER_STATUS_OK;
  int64_t ka = a->dims[a->rank - 1], kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
  if (ka >= 0 && kb >= 0 && ka != kb) {
    char sa[160], sb[160];
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "A %s and B %s do not chain: A's last dim %lld differs from B's %s dim %lld",
                        er__shape_str(a, sa, sizeof sa), er__shape_str(b, sb, sizeof sb),
                        (long long)ka, b->rank == 1 ? "only" : "second-to-last", (long long)kb);
  }
  *k = ka >= 0 ? ka : kb;
  *m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
  *n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  /* Batch dims broadcast right-aligned; a clash is named in full here
   * rather than as two anonymous batch shapes. */
  int ra = a->rank >= 2 ? a->rank - 2 : 0, rb = b->rank >= 2 ? b->rank - 2 : 0;
  for (int i = 1; i <= ra && i <= rb; i++) {
    int64_t da = a->dims[ra - i], db = b->dims[rb - i];
    if (da >= 0 && db >= 0 && da != db && da != 1 && db != 1) {
      char sa[160], sb[160];
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "the batch dims of A %s and B %s do not broadcast (%lld vs %lld)",
                          er__shape_str(a, sa, sizeof sa), er__shape_str(b, sb, sizeof sb),
                          (long long)da, (long long)db);
    }
  }
  er_tensor ba, bb;
  er__tensor_set(&ba, ER_DTYPE_UNDEFINED, ra, a->dims);
  er__tensor_set(&bb, ER_DTYPE_UNDEFINED, rb, b->dims);
  const er_tensor *both[2] = {&ba, &bb};
  return er__broadcast_shapes(ctx, 2, both, batch);
}

static er_status matmul_check(er_kctx *ctx) {
  er_tensor batch;
  int64_t m = 0, k = 0, n = 0;
  ER_CHECK(matmul_shape(ctx, &batch, &m, &k, &n));
  const er_tensor *a = ctx->in[0], *b = ctx->in[1];
  er_dtype t = a->dtype != ER_DTYPE_UNDEFINED ? a->dtype : b->dtype;
  if (batch.rank < 0) {
    er__set_output(ctx, 0, t, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK + 2];
  int r = batch.rank;
  for (int d = 0; d < r; d++) dims[d] = batch.dims[d];
  if (a->rank >= 2) dims[r++] = m;
  if (b->rank >= 2) dims[r++] = n;
  if (r > ER_MAX_RANK)
    return er__op_error(ctx, ER_STATUS_LIMIT, "the output would have rank %d; at most %d (ER_MAX_RANK)",
                        r, ER_MAX_RANK);
  er__set_output(ctx, 0, t, r, dims);
  return ER_STATUS_OK;
}

static er_status matmul_run(er_kctx *ctx) {
  er_tensor batch;
  int64_t m = 0, k = 0, n = 0;
  ER_CHECK(matmul_shape(ctx, &batch, &m, &k, &n));
  const er_tensor *a = ctx->in[0], *b = ctx->in[1];
  er_tensor *y = ctx->out[0];
  work_type w = work_type_of(a->dtype);
  size_t es = work_size(w);
  int br = batch.rank;
  /* Batch strides (in matrices) of A and B aligned to the output batch;
   * 0 on broadcast axes. */
  int64_t sa[ER_MAX_RANK] = {0}, sb[ER_MAX_RANK] = {0}, idx[ER_MAX_RANK] = {0};
  int ra = a->rank >= 2 ? a->rank - 2 : 0, rb = b->rank >= 2 ? b->rank - 2 : 0;
  int64_t s = 1;
  for (int d = br - 1, i = ra - 1; i >= 0; d--, i--) {
    sa[d] = a->dims[i] == 1 ? 0 : s;
    s *= a->dims[i];
  }
  s = 1;
  for (int d = br - 1, i = rb - 1; i >= 0; d--, i--) {
    sb[d] = b->dims[i] == 1 ? 0 : s;
    s *= b->dims[i];
  }
  int64_t nbatch = 1;
  for (int d = 0; d < br; d++) nbatch *= batch.dims[d];
  const void *ad, *bd;
  void *ao = NULL, *bo = NULL, *yw = NULL;
  int64_t ny = er__count(y);
  er_status st = work_input(a, w, &ad, &ao);
  if (st == ER_STATUS_OK) st = work_input(b, w, &bd, &bo);
  if (st == ER_STATUS_OK) {
    if (y->dtype == ER_DTYPE_FLOAT || y->dtype == ER_DTYPE_DOUBLE) {
      yw = y->data;
    } else {
      yw = er__calloc((size_t)(ny > 0 ? ny : 1), es, "MatMul working output");
      if (!yw) st = ER_STATUS_OUT_OF_MEMORY;
    }
  }
  for (int64_t bi = 0; bi < nbatch && st == ER_STATUS_OK; bi++) {
    int64_t oa = 0, ob = 0;
    for (int d = 0; d < br; d++) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    mat_view va = {(const unsigned char *)ad + (size_t)(oa * m * k) * es, k, 1};
    /* A column vector B (N = 1) is k-contiguous either way: mark it so,
     * so that matrix-vector products run as dot products. */
    mat_view vb = {(const unsigned char *)bd + (size_t)(ob * k * n) * es, n, n == 1 ? k : 1};
    void *c = (unsigned char *)yw + (size_t)(bi * m * n) * es;
    if (w == WORK_F32) st = matmul_f32(m, n, k, va, vb, c);
    else if (w == WORK_F64) st = matmul_f64(m, n, k, va, vb, c);
    else st = matmul_u64(m, n, k, va, vb, c);
    for (int d = br - 1; d >= 0; d--) {
      if (++idx[d] < batch.dims[d]) break;
      idx[d] = 0;
    }
  }
  if (st == ER_STATUS_OK && yw != y->data) {
    if (w == WORK_F32) store_f32(y, yw, ny);
    else store_u64(y, yw, ny);
  }
  if (yw != y->data) free(yw);
  free(ao);
  free(bo);
  return st;
}

static const er_op_def op_matmul = {
    .name = "MatMul", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = matmul_check, .run = matmul_run,
};

/* ======================================================================== */
/* Gemm                                                                      */
/* ======================================================================== */

typedef struct gemm_plan {
  int64_t m, k, n;                  /* -1 = unknown */
  bool trans_a, trans_b;
  float alpha, beta;
} gemm_plan;

static er_status gemm_prepare(er_kctx *ctx, gemm_plan *p) {
  const er_tensor *a = ctx->in[0], *b = ctx->in[1], *c = er__in(ctx, 2);
  int64_t ta, tb;
  ER_CHECK(er__require_type(ctx, 0, matmul_types));
  ER_CHECK(er__require_type(ctx, 1, matmul_types));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  ER_CHECK(er__require_rank(ctx, 0, 2, 2));
  ER_CHECK(er__require_rank(ctx, 1, 2, 2));
  if (c) {
    ER_CHECK(er__require_type(ctx, 2, matmul_types));
    ER_CHECK(er__require_same_type(ctx, 0, 2));
    ER_CHECK(er__require_rank(ctx, 2, 0, 2));
  }
  ER_CHECK(er__attr_int(ctx, "transA", 0, &ta));
  ER_CHECK(er__attr_int(ctx, "transB", 0, &tb));
  ER_CHECK(er__attr_float(ctx, "alpha", 1.0f, &p->alpha));
  ER_CHECK(er__attr_float(ctx, "beta", 1.0f, &p->beta));
  p->trans_a = ta != 0;
  p->trans_b = tb != 0;
  p->m = a->rank == 2 ? a->dims[p->trans_a ? 1 : 0] : -1;
  int64_t ka = a->rank == 2 ? a->dims[p->trans_a ? 0 : 1] : -1;
  int64_t kb = b->rank == 2 ? b->dims[p->trans_b ? 1 : 0] : -1;
  p->n = b->rank == 2 ? b->dims[p->trans_b ? 0 : 1] : -1;
  if (ka >= 0 && kb >= 0 && ka != kb) {
    char sa[160], sb[160];
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                        "A %s%s and B %s%s do not chain: K is %lld for A but %lld for B",
                        er__shape_str(a, sa, sizeof sa), p->trans_a ? " (transposed)" : "",
                        er__shape_str(b, sb, sizeof sb), p->trans_b ? " (transposed)" : "",
                        (long long)ka, (long long)kb);
  }
  p->k = ka >= 0 ? ka : kb;
  /* C broadcasts one way only: each of its dims is 1 or the output's. */
  if (c && c->rank >= 0) {
    int64_t want[2] = {p->m, p->n};
    for (int d = 0; d < c->rank; d++) {
      int64_t cd = c->dims[d], od = want[2 - c->rank + d];
      if (cd >= 0 && od >= 0 && cd != 1 && cd != od) {
        char sc[160];
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "C %s does not broadcast to the output [%lld,%lld]",
                            er__shape_str(c, sc, sizeof sc), (long long)p->m, (long long)p->n);
      }
    }
  }
  return ER_STATUS_OK;
}

static er_status gemm_check(er_kctx *ctx) {
  gemm_plan p;
  ER_CHECK(gemm_prepare(ctx, &p));
  er_dtype t = ctx->in[0]->dtype != ER_DTYPE_UNDEFINED ? ctx->in[0]->dtype : ctx->in[1]->dtype;
  int64_t dims[2] = {p.m, p.n};
  er__set_output(ctx, 0, t, 2, dims);
  return ER_STATUS_OK;
}

/* Truncates toward zero, saturating out-of-range values (NaN gives 0), so
 * the conversion is never undefined. */
static int64_t f64_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

static er_status gemm_run(er_kctx *ctx) {
  gemm_plan p;
  ER_CHECK(gemm_prepare(ctx, &p));
  const er_tensor *a = ctx->in[0], *b = ctx->in[1], *c = er__in(ctx, 2);
  er_tensor *y = ctx->out[0];
  work_type w = work_type_of(a->dtype);
  int64_t m = p.m, n = p.n, k = p.k, ny = m * n;
  const void *ad, *bd, *cd = NULL;
  void *ao = NULL, *bo = NULL, *co = NULL, *yw = NULL;
  er_status st = work_input(a, w, &ad, &ao);
  if (st == ER_STATUS_OK) st = work_input(b, w, &bd, &bo);
  if (st == ER_STATUS_OK && c && p.beta != 0.0f) st = work_input(c, w, &cd, &co);
  if (st == ER_STATUS_OK) {
    if (y->dtype == ER_DTYPE_FLOAT || y->dtype == ER_DTYPE_DOUBLE) {
      yw = y->data;
    } else {
      yw = er__calloc((size_t)(ny > 0 ? ny : 1), work_size(w), "Gemm working output");
      if (!yw) st = ER_STATUS_OUT_OF_MEMORY;
    }
  }
  if (st != ER_STATUS_OK) goto done;
  mat_view va = {ad, p.trans_a ? 1 : k, p.trans_a ? m : 1};
  mat_view vb = {bd, p.trans_b ? 1 : n, p.trans_b ? k : 1};
  if (w == WORK_F32) st = matmul_f32(m, n, k, va, vb, yw);
  else if (w == WORK_F64) st = matmul_f64(m, n, k, va, vb, yw);
  else st = matmul_u64(m, n, k, va, vb, yw);
  if (st != ER_STATUS_OK) goto done;

  /* Y = alpha * AB + beta * C, C indexed through its broadcast. */
  int64_t crs = 0, ccs = 0;
  if (cd) {
    int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
    crs = cm == 1 ? 0 : cn;
    ccs = cn == 1 ? 0 : 1;
  }
  if (w == WORK_F32) {
    float *yv = yw, al = p.alpha, be = p.beta;
    const float *cv = cd;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        yv[i * n + j] = al * yv[i * n + j] + (cv ? be * cv[i * crs + j * ccs] : 0.0f);
  } else if (w == WORK_F64) {
    double *yv = yw, al = p.alpha, be = p.beta;
    const double *cv = cd;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        yv[i * n + j] = al * yv[i * n + j] + (cv ? be * cv[i * crs + j * ccs] : 0.0);
  } else {
    /* Integers: exact when alpha and beta are whole numbers, else computed
     * in double and truncated toward zero. */
    uint64_t *yv = yw;
    const uint64_t *cv = cd;
    bool whole = p.alpha == truncf(p.alpha) && p.beta == truncf(p.beta) && fabsf(p.alpha) < 9e18f &&
                 fabsf(p.beta) < 9e18f;
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < n; j++) {
        uint64_t ab = yv[i * n + j], cc = cv ? cv[i * crs + j * ccs] : 0;
        if (whole)
          yv[i * n + j] = (uint64_t)(int64_t)p.alpha * ab + (uint64_t)(int64_t)p.beta * cc;
        else
          yv[i * n + j] =
              (uint64_t)f64_to_i64(p.alpha * (double)(int64_t)ab + p.beta * (double)(int64_t)cc);
      }
    }
  }
  if (yw != y->data) {
    if (w == WORK_F32) store_f32(y, yw, ny);
    else store_u64(y, yw, ny);
  }
done:
  if (yw != y->data) free(yw);
  free(ao);
  free(bo);
  free(co);
  return st;
}

static const er_op_def op_gemm = {
    .name = "Gemm", .domain = "", .min_version = 1, .max_version = 13,
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .check = gemm_check, .run = gemm_run,
};

/* ======================================================================== */
/* Einsum                                                                    */
/* ======================================================================== */

/* Labels: 'A'..'Z' are 0..25 and 'a'..'z' 26..51 (so sorting labels sorts
 * them in ASCII order, as the implicit output needs); the dims an ellipsis
 * stands for are labels 52... Dims of size 1 broadcast against the same
 * label's other dims, as in numpy. */
#define EINSUM_LETTERS 52
#define EINSUM_MAX_LABELS (EINSUM_LETTERS + ER_MAX_RANK)
/* Inputs an Einsum node may have; the equation parser keeps their terms on
 * the stack. */
#define EINSUM_MAX_INPUTS 32

typedef struct einsum_term {
  int n_letters;
  int8_t letters[ER_MAX_RANK];      /* letter labels, in order */
  int ellipsis;                     /* letters before the "...", -1 = none */
} einsum_term;

typedef struct einsum_plan {
  int n_in;
  einsum_term in[EINSUM_MAX_INPUTS];
  bool explicit_out;
  einsum_term out;                  /* valid when explicit_out */
  /* From the input shapes (when known): */
  int n_ell;                        /* broadcast dims; -1 = unknown */
  int n_out;                        /* output labels; -1 = unknown */
  int8_t out_labels[EINSUM_MAX_LABELS];
  int64_t size[EINSUM_MAX_LABELS];  /* per label; -1 = unknown */
  int count[EINSUM_MAX_LABELS];     /* letter occurrences over the inputs */
} einsum_plan;

static int letter_label(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return 26 + (ch - 'a');
  return -1;
}

static char label_char(int l) { return (char)(l < 26 ? 'A' + l : 'a' + (l - 26)); }

/* Parses the equation into terms; checks everything that needs no shapes. */
static er_status einsum_parse(const er_kctx *ctx, const char *eq, einsum_plan *p) {
  einsum_term cur = {0, {0}, -1};
  bool rhs = false;
  p->n_in = 0;
  p->explicit_out = false;
  for (size_t i = 0; eq[i]; i++) {
    char ch = eq[i];
    int l = letter_label(ch);
    if (ch == ' ') continue;
    if (l >= 0) {
      if (cur.n_letters >= ER_MAX_RANK)
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                            "equation '%s': a term has more than %d subscripts (ER_MAX_RANK)", eq,
                            ER_MAX_RANK);
      cur.letters[cur.n_letters++] = (int8_t)l;
    } else if (ch == '.') {
      if (eq[i + 1] != '.' || eq[i + 2] != '.')
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                            "equation '%s': '.' at position %zu is not part of an ellipsis '...'", eq, i);
      if (cur.ellipsis >= 0)
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                            "equation '%s': a term has more than one ellipsis", eq);
      cur.ellipsis = cur.n_letters;
      i += 2;
    } else if (ch == ',' || (ch == '-' && eq[i + 1] == '>')) {
      if (rhs)
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                            "equation '%s': unexpected '%c' after '->' at position %zu", eq, ch, i);
      if (p->n_in >= EINSUM_MAX_INPUTS)
        return er__op_error(ctx, ER_STATUS_LIMIT, "equation '%s' has more than %d input terms "
                            "(EINSUM_MAX_INPUTS)", eq, EINSUM_MAX_INPUTS);
      p->in[p->n_in++] = cur;
      cur = (einsum_term){0, {0}, -1};
      if (ch == '-') {
        rhs = true;
        i++;
      }
    } else {
      return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                          "equation '%s': unexpected character '%c' at position %zu", eq, ch, i);
    }
  }
  if (rhs) {
    p->explicit_out = true;
    p->out = cur;
  } else {
    if (p->n_in >= EINSUM_MAX_INPUTS)
      return er__op_error(ctx, ER_STATUS_LIMIT, "equation '%s' has more than %d input terms "
                          "(EINSUM_MAX_INPUTS)", eq, EINSUM_MAX_INPUTS);
    p->in[p->n_in++] = cur;
  }
  if (p->n_in != ctx->n_in)
    return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                        "equation '%s' has %d input term%s but the node has %d input%s", eq,
                        p->n_in, p->n_in == 1 ? "" : "s", ctx->n_in, ctx->n_in == 1 ? "" : "s");
  memset(p->count, 0, sizeof p->count);
  for (int t = 0; t < p->n_in; t++)
    for (int j = 0; j < p->in[t].n_letters; j++) p->count[p->in[t].letters[j]]++;
  if (p->explicit_out) {
    bool seen[EINSUM_LETTERS] = {false};
    for (int j = 0; j < p->out.n_letters; j++) {
      int l = p->out.letters[j];
      if (seen[l])
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                            "equation '%s': output subscript '%c' appears twice", eq, label_char(l));
      if (p->count[l] == 0)
        return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE,
                            "equation '%s': output subscript '%c' appears in no input term", eq,
                            label_char(l));
      seen[l] = true;
    }
  }
  return ER_STATUS_OK;
}

/* Merges a dim into a label's size, numpy style: sizes must agree unless
 * one of them is 1. `unknown` collects dims not known yet. */
static bool merge_size(int64_t *size, bool *unknown, int64_t dim) {
  if (dim < 0) {
    *unknown = true;
    return true;
  }
  if (*size < 0 || *size == 1) {
    if (*size < 0 || dim != 1) *size = dim;
    return true;
  }
  return dim == 1 || dim == *size;
}

/* The dims of input t with their labels: letters, and the ellipsis's dims
 * as labels EINSUM_LETTERS + (n_ell - e) .. for its e dims. */
static void term_labels(const einsum_term *term, int rank, int n_ell, int8_t *labels) {
  int e = term->ellipsis >= 0 ? rank - term->n_letters : 0, j = 0;
  for (int i = 0; i < term->n_letters; i++) {
    if (i == term->ellipsis)
      for (int k = 0; k < e; k++) labels[j++] = (int8_t)(EINSUM_LETTERS + n_ell - e + k);
    labels[j++] = term->letters[i];
  }
  if (term->ellipsis == term->n_letters)
    for (int k = 0; k < e; k++) labels[j++] = (int8_t)(EINSUM_LETTERS + n_ell - e + k);
}

static er_status einsum_prepare(er_kctx *ctx, einsum_plan *p) {
  const char *eq;
  ER_CHECK(er__attr_string(ctx, "equation", NULL, &eq));
  if (!eq) return er__op_error(ctx, ER_STATUS_INVALID_ATTRIBUTE, "attribute equation is required");
  if (ctx->n_in < 1) return er__op_error(ctx, ER_STATUS_INVALID_GRAPH, "Einsum needs at least one input");
  for (int i = 0; i < ctx->n_in; i++) {
    ER_CHECK(er__require_type(ctx, i, er__types_numeric));
    ER_CHECK(er__require_same_type(ctx, 0, i));
  }
  ER_CHECK(einsum_parse(ctx, eq, p));
  /* Ranks against terms; the broadcast dims are the most any ellipsis
   * covers. */
  p->n_ell = 0;
  int ell_from = -1; /* input that set n_ell */
  for (int t = 0; t < p->n_in; t++) {
    const einsum_term *term = &p->in[t];
    int rank = ctx->in[t]->rank;
    if (rank < 0) {
      if (term->ellipsis >= 0) p->n_ell = -1;
      continue;
    }
    if (term->ellipsis < 0 ? rank != term->n_letters : rank < term->n_letters)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "equation '%s': input %d has rank %d but its term has %d subscripts%s", eq, t,
                          rank, term->n_letters, term->ellipsis >= 0 ? " and an ellipsis" : "");
    /* The spec requires every ellipsis to stand for the same number of
     * dims (numpy would broadcast differing counts; onnx rejects them). */
    if (term->ellipsis >= 0 && p->n_ell >= 0) {
      int e = rank - term->n_letters;
      if (ell_from >= 0 && e != p->n_ell)
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "equation '%s': the ellipsis stands for %d dims in input %d but %d in "
                            "input %d; it must be the same everywhere",
                            eq, p->n_ell, ell_from, e, t);
      p->n_ell = e;
      ell_from = t;
    }
  }
  for (int l = 0; l < EINSUM_MAX_LABELS; l++) p->size[l] = -1;
  p->n_out = -1;
  if (p->n_ell < 0) return ER_STATUS_OK;
  bool unknown[EINSUM_MAX_LABELS] = {false};
  for (int t = 0; t < p->n_in; t++) {
    const er_tensor *x = ctx->in[t];
    int8_t labels[ER_MAX_RANK];
    if (x->rank < 0) {
      for (int j = 0; j < p->in[t].n_letters; j++) unknown[p->in[t].letters[j]] = true;
      continue;
    }
    term_labels(&p->in[t], x->rank, p->n_ell, labels);
    for (int j = 0; j < x->rank; j++) {
      int l = labels[j];
      int64_t before = p->size[l];
      if (!merge_size(&p->size[l], &unknown[l], x->dims[j])) {
        char name[16];
        if (l < EINSUM_LETTERS) snprintf(name, sizeof name, "'%c'", label_char(l));
        else snprintf(name, sizeof name, "'...' dim %d", l - EINSUM_LETTERS);
        return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                            "equation '%s': subscript %s has size %lld in input %d but %lld elsewhere",
                            eq, name, (long long)x->dims[j], t, (long long)before);
      }
    }
  }
  /* A label seen only as 1 next to unknown dims may still broadcast. */
  for (int l = 0; l < EINSUM_MAX_LABELS; l++)
    if (unknown[l] && p->size[l] == 1) p->size[l] = -1;
  /* Output labels. */
  int n = 0;
  if (p->explicit_out) {
    if (p->n_ell > 0 && p->out.ellipsis < 0)
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE,
                          "equation '%s': the inputs' ellipsis covers %d dims but the output term has "
                          "no '...' to keep them",
                          eq, p->n_ell);
    for (int j = 0; j <= p->out.n_letters; j++) {
      if (j == p->out.ellipsis)
        for (int k = 0; k < p->n_ell; k++) p->out_labels[n++] = (int8_t)(EINSUM_LETTERS + k);
      if (j < p->out.n_letters) p->out_labels[n++] = p->out.letters[j];
    }
  } else {
    for (int k = 0; k < p->n_ell; k++) p->out_labels[n++] = (int8_t)(EINSUM_LETTERS + k);
    for (int l = 0; l < EINSUM_LETTERS; l++)
      if (p->count[l] == 1) p->out_labels[n++] = (int8_t)l;
  }
  if (n > ER_MAX_RANK)
    return er__op_error(ctx, ER_STATUS_LIMIT,
                        "equation '%s': the output would have rank %d; at most %d (ER_MAX_RANK)", eq, n,
                        ER_MAX_RANK);
  p->n_out = n;
  return ER_STATUS_OK;
}

static er_status einsum_check(er_kctx *ctx) {
  einsum_plan p;
  ER_CHECK(einsum_prepare(ctx, &p));
  if (p.n_out < 0) {
    er__set_output(ctx, 0, ctx->in[0]->dtype, -1, NULL);
    return ER_STATUS_OK;
  }
  int64_t dims[ER_MAX_RANK];
  for (int j = 0; j < p.n_out; j++) dims[j] = p.size[p.out_labels[j]];
  er__set_output(ctx, 0, ctx->in[0]->dtype, p.n_out, dims);
  return ER_STATUS_OK;
}

/* The summation loop: output labels outside, summed labels inside, the
 * last summed label as the innermost loop. stride[t][j] is input t's
 * element step along loop label j (diagonals add their strides; size-1
 * dims step 0). */
typedef struct einsum_loop {
  int n_in;
  int n_out, n_sum;                 /* loop labels: n_out outer, then n_sum */
  int64_t size[EINSUM_MAX_LABELS];
  int64_t stride[EINSUM_MAX_INPUTS][EINSUM_MAX_LABELS];
} einsum_loop;

/* Steps the counter over loop labels [lo, hi), moving every input offset. */
static void einsum_step(const einsum_loop *L, int lo, int hi, int64_t *idx, int64_t *off) {
  for (int d = hi - 1; d >= lo; d--) {
    for (int t = 0; t < L->n_in; t++) off[t] += L->stride[t][d];
    if (++idx[d] < L->size[d]) return;
    for (int t = 0; t < L->n_in; t++) off[t] -= L->stride[t][d] * L->size[d];
    idx[d] = 0;
  }
}

#define DEFINE_EINSUM(SFX, T)                                                                     \
  static void einsum_##SFX(const einsum_loop *L, const T *const *x, T *y) {                        \
    int last = L->n_out + L->n_sum - 1;                                                           \
    int64_t outs = 1, sums = 1, inner = L->n_sum > 0 ? L->size[last] : 1;                         \
    for (int d = 0; d < L->n_out; d++) outs *= L->size[d];                                        \
    for (int d = L->n_out; d < last; d++) sums *= L->size[d];                                     \
    if (L->n_sum == 0) sums = 1;                                                                  \
    int64_t oidx[EINSUM_MAX_LABELS] = {0}, ooff[EINSUM_MAX_INPUTS] = {0};                         \
    for (int64_t o = 0; o < outs; o++) {                                                          \
      int64_t sidx[EINSUM_MAX_LABELS] = {0}, soff[EINSUM_MAX_INPUTS];                             \
      T acc = 0;                                                                                  \
      memcpy(soff, ooff, sizeof soff);                                                            \
      for (int64_t r = 0; r < sums && inner > 0; r++) {                                           \
        int64_t s0 = L->n_sum > 0 ? L->stride[0][last] : 0;                                       \
        if (L->n_in == 1) {                                                                       \
          for (int64_t j = 0; j < inner; j++) acc += x[0][soff[0] + j * s0];                      \
        } else if (L->n_in == 2) {                                                                \
          int64_t s1 = L->n_sum > 0 ? L->stride[1][last] : 0;                                     \
          for (int64_t j = 0; j < inner; j++) acc += x[0][soff[0] + j * s0] * x[1][soff[1] + j * s1]; \
        } else {                                                                                  \
          for (int64_t j = 0; j < inner; j++) {                                                   \
            T v = 1;                                                                              \
            for (int t = 0; t < L->n_in; t++)                                                     \
              v *= x[t][soff[t] + j * (L->n_sum > 0 ? L->stride[t][last] : 0)];                   \
            acc += v;                                                                             \
          }                                                                                       \
        }                                                                                         \
        if (L->n_sum > 1) einsum_step(L, L->n_out, last, sidx, soff);                             \
      }                                                                                           \
      y[o] = acc;                                                                                 \
      einsum_step(L, 0, L->n_out, oidx, ooff);                                                    \
    }                                                                                             \
  }

DEFINE_EINSUM(f64, double)
DEFINE_EINSUM(u64, uint64_t)

static er_status einsum_run(er_kctx *ctx) {
  einsum_plan p;
  ER_CHECK(einsum_prepare(ctx, &p));
  ER_ASSERT(p.n_out >= 0);
  er_tensor *y = ctx->out[0];
  bool is_float = er__dtype_is_float(y->dtype);
  /* Loop labels: the output's, then every other label in label order. */
  einsum_loop *L = er__calloc(1, sizeof *L, "Einsum loop plan");
  if (!L) return ER_STATUS_OUT_OF_MEMORY;
  int8_t order[EINSUM_MAX_LABELS];
  int where[EINSUM_MAX_LABELS];
  bool used[EINSUM_MAX_LABELS] = {false};
  int n = 0;
  for (int j = 0; j < p.n_out; j++) {
    order[n++] = p.out_labels[j];
    used[p.out_labels[j]] = true;
  }
  L->n_out = n;
  for (int l = 0; l < EINSUM_MAX_LABELS; l++)
    if (!used[l] && p.size[l] >= 0) order[n++] = (int8_t)l;
  L->n_sum = n - L->n_out;
  L->n_in = p.n_in;
  for (int j = 0; j < n; j++) {
    where[order[j]] = j;
    L->size[j] = p.size[order[j]];
  }
  for (int t = 0; t < p.n_in; t++) {
    const er_tensor *x = ctx->in[t];
    int8_t labels[ER_MAX_RANK];
    int64_t st[ER_MAX_RANK];
    term_labels(&p.in[t], x->rank, p.n_ell, labels);
    er__strides(x->rank, x->dims, st);
    for (int d = 0; d < x->rank; d++)
      if (x->dims[d] != 1) L->stride[t][where[labels[d]]] += st[d];
  }
  /* Working copies: double for floats (accurate sums), uint64 for ints. */
  void *bufs[EINSUM_MAX_INPUTS] = {NULL};
  const void *xs[EINSUM_MAX_INPUTS];
  int64_t ny = er__count(y);
  er_status st = ER_STATUS_OK;
  void *yw = er__calloc((size_t)(ny > 0 ? ny : 1), 8, "Einsum working output");
  if (!yw) st = ER_STATUS_OUT_OF_MEMORY;
  for (int t = 0; t < p.n_in && st == ER_STATUS_OK; t++) {
    const er_tensor *x = ctx->in[t];
    int64_t cnt = er__count(x);
    if (x->dtype == ER_DTYPE_DOUBLE) {
      xs[t] = x->data;
      continue;
    }
    bufs[t] = er__malloc((size_t)(cnt > 0 ? cnt : 1) * 8, "Einsum working input");
    if (!bufs[t]) {
      st = ER_STATUS_OUT_OF_MEMORY;
      break;
    }
    if (is_float) {
      double *d = bufs[t];
      if (x->dtype == ER_DTYPE_FLOAT)
        for (int64_t i = 0; i < cnt; i++) d[i] = ((const float *)x->data)[i];
      else
        for (int64_t i = 0; i < cnt; i++) d[i] = er__load_f64(x->data, x->dtype, i);
    } else {
      uint64_t *u = bufs[t];
      for (int64_t i = 0; i < cnt; i++) u[i] = (uint64_t)er__load_i64(x->data, x->dtype, i);
    }
    xs[t] = bufs[t];
  }
  if (st == ER_STATUS_OK) {
    if (is_float) {
      einsum_f64(L, (const double *const *)xs, yw);
      if (y->dtype == ER_DTYPE_DOUBLE) memcpy(y->data, yw, (size_t)ny * sizeof(double));
      else
        for (int64_t i = 0; i < ny; i++) er__store_f64(y->data, y->dtype, i, ((double *)yw)[i]);
    } else {
      einsum_u64(L, (const uint64_t *const *)xs, yw);
      for (int64_t i = 0; i < ny; i++) er__store_i64(y->data, y->dtype, i, (int64_t)((uint64_t *)yw)[i]);
    }
  }
  for (int t = 0; t < p.n_in; t++) free(bufs[t]);
  free(yw);
  free(L);
  return st;
}

static const er_op_def op_einsum = {
    .name = "Einsum", .domain = "", .min_version = 12, .max_version = 28,
    .min_inputs = 1, .max_inputs = ER_VARIADIC, .min_outputs = 1, .max_outputs = 1,
    .check = einsum_check, .run = einsum_run,
};

const er_op_def *const er__ops_matmul[] = {
    &op_gemm,
    &op_matmul,
    &op_einsum,
    NULL,
};
