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

/* The same i-k-j product as conv.c's (the two files keep their own copy so
 * each op group stays self-contained): the innermost loop runs along
 * contiguous rows of B and C, four rows of C share every load of B, and the
 * loop body works in fixed chunks of 8 so compilers vectorize it at -O2.
 * Columns go in panels of GEMM_NC and k in blocks of GEMM_KC so the piece
 * of B being reused stays in L2.
 *
 * C[M,N] (row stride ldc) += A[M,K] * B[K,N] (row stride ldb), where A's
 * element (m,k) is A[m*sam + k*sak], so a transposed A costs nothing.
 *
 * dot_<T> is the other shape of product, for a B whose rows along k are
 * contiguous (Gemm's transB, matrix-vector): eight partial sums, so the
 * compiler can vectorize without reassociating. */
#define GEMM_NC 256
#define GEMM_KC 256

#define DEFINE_GEMM(SFX, T)                                                                     \
  static inline void axpy4_##SFX(int64_t n, T a0, T a1, T a2, T a3, const T *restrict b,          \
                                 T *restrict c0, T *restrict c1, T *restrict c2, T *restrict c3) { \
    int64_t j = 0;                                                                              \
    for (; j + 8 <= n; j += 8)                                                                  \
      for (int u = 0; u < 8; u++) {                                                             \
        T bv = b[j + u];                                                                        \
        c0[j + u] += a0 * bv;                                                                   \
        c1[j + u] += a1 * bv;                                                                   \
        c2[j + u] += a2 * bv;                                                                   \
        c3[j + u] += a3 * bv;                                                                   \
      }                                                                                         \
    for (; j < n; j++) {                                                                        \
      T bv = b[j];                                                                              \
      c0[j] += a0 * bv;                                                                         \
      c1[j] += a1 * bv;                                                                         \
      c2[j] += a2 * bv;                                                                         \
      c3[j] += a3 * bv;                                                                         \
    }                                                                                           \
  }                                                                                             \
  static inline void axpy1_##SFX(int64_t n, T a, const T *restrict b, T *restrict c) {          \
    int64_t j = 0;                                                                              \
    for (; j + 8 <= n; j += 8)                                                                  \
      for (int u = 0; u < 8; u++) c[j + u] += a * b[j + u];                                     \
    for (; j < n; j++) c[j] += a * b[j];                                                        \
  }                                                                                             \
  static void gemm_##SFX(int64_t M, int64_t N, int64_t K, const T *A, int64_t sam, int64_t sak, \
                         const T *B, int64_t ldb, T *C, int64_t ldc) {                          \
    for (int64_t n0 = 0; n0 < N; n0 += GEMM_NC) {                                               \
      int64_t nn = N - n0 < GEMM_NC ? N - n0 : GEMM_NC;                                         \
      for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {                                             \
        int64_t k1 = K - k0 < GEMM_KC ? K : k0 + GEMM_KC;                                       \
        int64_t m = 0;                                                                          \
        for (; m + 4 <= M; m += 4) {                                                            \
          T *c0 = C + m * ldc + n0;                                                             \
          for (int64_t k = k0; k < k1; k++) {                                                   \
            const T *a = A + m * sam + k * sak;                                                 \
            axpy4_##SFX(nn, a[0], a[sam], a[2 * sam], a[3 * sam], B + k * ldb + n0, c0,         \
                        c0 + ldc, c0 + 2 * ldc, c0 + 3 * ldc);                                  \
          }                                                                                     \
        }                                                                                       \
        for (; m < M; m++)                                                                      \
          for (int64_t k = k0; k < k1; k++)                                                     \
            axpy1_##SFX(nn, A[m * sam + k * sak], B + k * ldb + n0, C + m * ldc + n0);          \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  static T dot_##SFX(int64_t n, const T *restrict a, const T *restrict b) {                     \
    T acc[8] = {0}, s = 0;                                                                      \
    int64_t j = 0;                                                                              \
    for (; j + 8 <= n; j += 8)                                                                  \
      for (int u = 0; u < 8; u++) acc[u] += a[j + u] * b[j + u];                                \
    for (; j < n; j++) s += a[j] * b[j];                                                        \
    for (int u = 0; u < 8; u++) s += acc[u];                                                    \
    return s;                                                                                   \
  }

DEFINE_GEMM(f32, float)
DEFINE_GEMM(f64, double)
DEFINE_GEMM(u64, uint64_t)

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
      gemm_##SFX(M, N, K, A, a.rs, a.cs, B, b.rs, c, N);                                         \
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
        for (int64_t n = 0; n < N; n++) c[m * N + n] = dot_##SFX(K, ar, B + n * b.cs);           \
      }                                                                                          \
      free(arow);                                                                                \
      return ER_STATUS_OK;                                                                       \
    }                                                                                            \
    T *bt = er__malloc((size_t)(K * N) * sizeof *bt, "transposed matrix operand");               \
    if (!bt) return ER_STATUS_OUT_OF_MEMORY;                                                     \
    for (int64_t k = 0; k < K; k++)                                                              \
      for (int64_t n = 0; n < N; n++) bt[k * N + n] = B[k * b.rs + n * b.cs];                    \
    gemm_##SFX(M, N, K, A, a.rs, a.cs, bt, N, c, N);                                             \
    free(bt);                                                                                    \
    return ER_STATUS_OK;                                                                         \
  }

DEFINE_MATMUL(f32, float)
DEFINE_MATMUL(f64, double)
DEFINE_MATMUL(u64, uint64_t)

/* ======================================================================== */
/* Conversions for the types computed in a wider one                         */
/* ======================================================================== */

/* Float tensor data as float32 (widened copy unless already float32). */
static er_status as_f32(const er_tensor *t, const float **out, float **owned) {
  *owned = NULL;
  if (t->dtype == ER_DTYPE_FLOAT) {
    *out = t->data;
    return ER_STATUS_OK;
  }
  int64_t n = er__count(t);
  float *f = er__malloc((size_t)(n > 0 ? n : 1) * sizeof *f, "float32 copy of an input");
  if (!f) return ER_STATUS_OUT_OF_MEMORY;
  const uint16_t *h = t->data;
  for (int64_t i = 0; i < n; i++)
    f[i] = t->dtype == ER_DTYPE_FLOAT16 ? er__f16_to_f32(h[i])
           : t->dtype == ER_DTYPE_BFLOAT16 ? er__bf16_to_f32(h[i])
                                           : (float)er__load_f64(t->data, t->dtype, i);
  *out = f;
  *owned = f;
  return ER_STATUS_OK;
}

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
    ER_CHECK(as_f32(t, &f, &o));
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
  er_tensor ba, bb;
  er__tensor_set(&ba, ER_DTYPE_UNDEFINED, a->rank >= 2 ? a->rank - 2 : 0, a->dims);
  er__tensor_set(&bb, ER_DTYPE_UNDEFINED, b->rank >= 2 ? b->rank - 2 : 0, b->dims);
  const er_tensor *both[2] = {&ba, &bb};
  return er__broadcast_shapes(ctx, 2, both, batch);
}

static er_status matmul_check(er_kctx *ctx) {
  er_tensor batch;
  int64_t m, k, n;
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
  int64_t m, k, n;
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

const er_op_def *const er__ops_matmul[] = {
    &op_gemm,
    &op_matmul,
    NULL,
};
