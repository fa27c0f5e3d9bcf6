/* gemm.c - optimized CPU kernels of the "gemm" group: MatMul, Gemm and the
 * fused com.edgerun FusedMatMul / FusedGemm, all float32, on the packed
 * SGEMM of sgemm.h. A constant B (the weights) is packed once at compile
 * time; bias, Gemm's C and the activation are applied in the tile
 * epilogue. Batched MatMul runs whole products per worker when there are
 * enough of them (attention heads). Shapes the fast path does not cover at
 * run time (unusual batch broadcasts) go to the reference kernel. */
#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/sgemm.h"
#include "kernels/vec.h"
#include "ops/fused.h"

typedef enum mm_kind { MM_MATMUL, MM_FUSED_MATMUL, MM_GEMM, MM_FUSED_GEMM } mm_kind;

/* What prepare() works out once per node. */
typedef struct mm_state {
  const er_sgemm_isa *isa;
  const er_vec_ops *ops;
  mm_kind kind;
  bool trans_a, trans_b;     /* Gemm */
  float alpha, beta;         /* Gemm */
  er_activation act;         /* fused ops */
  float *packed_b;           /* constant B [K, N] in full-K panels, or NULL */
  int64_t k, n;              /* of packed_b */
  int slots;                 /* workers the declared scratch covers */
} mm_state;

static bool is_gemm(mm_kind kind) { return kind == MM_GEMM || kind == MM_FUSED_GEMM; }

/* Reads the attributes; false when they are not ones the kernel takes. */
static bool read_attrs(const er_kernel_info *ki, mm_kind kind, mm_state *s) {
  er_kctx ctx = er__ki_ctx(ki);
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->alpha = s->beta = 1.0f;
  if (is_gemm(kind)) {
    int64_t ta, tb;
    if (er__attr_int(&ctx, "transA", 0, &ta) != ER_STATUS_OK ||
        er__attr_int(&ctx, "transB", 0, &tb) != ER_STATUS_OK ||
        er__attr_float(&ctx, "alpha", 1.0f, &s->alpha) != ER_STATUS_OK ||
        er__attr_float(&ctx, "beta", 1.0f, &s->beta) != ER_STATUS_OK)
      return false;
    s->trans_a = ta != 0;
    s->trans_b = tb != 0;
  }
  if (kind == MM_FUSED_GEMM || kind == MM_FUSED_MATMUL) {
    if (er__act_from_node(&ctx, &s->act) != ER_STATUS_OK) {
      er__error_clear();
      return false;
    }
  }
  return true;
}

static bool mm_supports(const er_kernel_info *ki, mm_kind kind, const er_sgemm_isa *isa, bool isa_ok) {
  if (!isa_ok || !isa) return false;
  const er_tensor *a = er__ki_in(ki, 0), *b = er__ki_in(ki, 1), *c = er__ki_in(ki, 2);
  if (!er__ki_f32(ki, 0) || !er__ki_f32(ki, 1) || !er__ki_out_f32(ki)) return false;
  if (c && c->dtype != ER_DTYPE_FLOAT) return false;
  mm_state s;
  if (!read_attrs(ki, kind, &s)) {
    er__error_clear();
    return false;
  }
  if (is_gemm(kind)) {
    /* Gemm before version 7 broadcast C only with the `broadcast` flag. */
    if (kind == MM_GEMM && ki->node->version < 7) return false;
    return a->rank == 2 && b->rank == 2 && (!c || (c->rank >= 0 && c->rank <= 2));
  }
  if (a->rank < 1 || b->rank < 2) return false;
  if (kind == MM_FUSED_MATMUL && c && c->rank != 1) return false;
  return true;
}

/* ======================================================================== */
/* Problems                                                                  */
/* ======================================================================== */

/* The Gemm problem for the node's tensors (shapes fully known). */
static void gemm_problem(const mm_state *s, const er_tensor *a, const er_tensor *b, const er_tensor *c,
                         float *y, er_gemm_problem *p) {
  memset(p, 0, sizeof *p);
  p->isa = s->isa;
  p->m = a->dims[s->trans_a ? 1 : 0];
  p->k = a->dims[s->trans_a ? 0 : 1];
  p->n = b->dims[s->trans_b ? 0 : 1];
  p->a.data = a->data;
  p->a.rs = s->trans_a ? 1 : p->k;
  p->a.cs = s->trans_a ? p->m : 1;
  if (s->packed_b) {
    p->b.packed = s->packed_b;
  } else {
    p->b.data = b->data;
    p->b.rs = s->trans_b ? 1 : p->n;
    p->b.cs = s->trans_b ? p->k : 1;
  }
  p->scale = s->alpha;
  p->c = y;
  p->ldc = p->n;
  p->epi.act = s->act;
  if (c && s->beta != 0.0f) {
    int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
    p->epi.add = c->data;
    p->epi.add_rs = cm == 1 ? 0 : cn;
    p->epi.add_cs = cn == 1 ? 0 : 1;
    p->epi.beta = s->beta;
  }
}

/* How a MatMul's batch dims map onto equally strided products. */
typedef struct mm_batch {
  int64_t m, k, n;
  int64_t batch;             /* products */
  int64_t a_bs, b_bs;        /* elements between consecutive A / B matrices */
  bool flat;                 /* one product: A's batch folded into M */
} mm_batch;

static int64_t prod_dims(int n, const int64_t *d) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= d[i];
  return p;
}

/* False when the batch broadcast is not one of the simple forms (B one
 * matrix; A one matrix; equal batch shapes). */
static bool matmul_batch(const er_tensor *a, const er_tensor *b, mm_batch *mb) {
  memset(mb, 0, sizeof *mb);
  mb->k = a->dims[a->rank - 1];
  mb->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
  mb->n = b->dims[b->rank - 1];
  int ra = a->rank >= 2 ? a->rank - 2 : 0, rb = b->rank - 2;
  int64_t na = prod_dims(ra, a->dims), nb = prod_dims(rb, b->dims);
  if (nb == 1) {
    mb->flat = true;
    mb->m *= na;
    mb->batch = 1;
    return true;
  }
  mb->b_bs = mb->k * mb->n;
  if (na == 1) {
    mb->batch = nb;
    mb->a_bs = 0;
    return true;
  }
  /* Equal batch shapes, ignoring leading 1s. */
  int i = 0, j = 0;
  while (i < ra && a->dims[i] == 1) i++;
  while (j < rb && b->dims[j] == 1) j++;
  if (ra - i != rb - j) return false;
  for (; i < ra; i++, j++)
    if (a->dims[i] != b->dims[j]) return false;
  mb->batch = na;
  mb->a_bs = mb->m * mb->k;
  return true;
}

static void matmul_problem(const mm_state *s, const mm_batch *mb, const er_tensor *a,
                           const er_tensor *b, const er_tensor *bias, float *y, er_gemm_problem *p) {
  memset(p, 0, sizeof *p);
  p->isa = s->isa;
  p->m = mb->m;
  p->k = mb->k;
  p->n = mb->n;
  p->a.data = a->data;
  p->a.rs = mb->k;
  p->a.cs = 1;
  if (s->packed_b && mb->batch == 1) {
    p->b.packed = s->packed_b;
  } else {
    p->b.data = b->data;
    p->b.rs = mb->n;
    p->b.cs = 1;
  }
  p->scale = 1.0f;
  p->c = y;
  p->ldc = mb->n;
  p->epi.act = s->act;
  if (bias) p->epi.bias = bias->data;
}

/* ======================================================================== */
/* prepare / run / release                                                   */
/* ======================================================================== */

static er_status mm_prepare(const er_kernel_info *ki, mm_kind kind, const er_sgemm_isa *isa,
                            const er_vec_ops *ops, void **state_out, size_t *scratch_out) {
  mm_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a %s kernel", ki->node->op_type);
  read_attrs(ki, kind, s);
  s->isa = isa;
  s->ops = ops;
  s->slots = er__ki_slots(ki);
  const er_tensor *a = er__ki_in(ki, 0), *b = er__ki_in(ki, 1);
  bool b_matrix = b->rank == 2 || (b->rank > 2 && er__tensor_shape_known(b) &&
                                   prod_dims(b->rank - 2, b->dims) == 1);
  /* With a few rows known at compile time (batch-1 fully connected
   * layers), the product runs straight from the weights as stored: it is
   * bound by reading them once either way, and a packed copy would only
   * double their memory (AlexNet's and VGG's classifiers are most of their
   * weights). */
  bool few_rows = false;
  if (er__tensor_shape_known(a) && er__tensor_shape_known(b)) {
    er_gemm_problem p0;
    if (is_gemm(kind)) {
      gemm_problem(s, a, b, NULL, NULL, &p0);
      few_rows = p0.m > 0 && p0.m <= ER_GEMV_MAX_M;
    } else {
      mm_batch mb0;
      if (matmul_batch(a, b, &mb0)) {
        matmul_problem(s, &mb0, a, b, NULL, NULL, &p0);
        few_rows = p0.m > 0 && p0.m <= ER_GEMV_MAX_M && mb0.batch == 1;
      }
    }
  }
  if (b->data && b_matrix && er__tensor_shape_known(b) && !few_rows) {
    int64_t k, n;
    const float *bd = b->data;
    int64_t rs, cs;
    if (is_gemm(kind) && s->trans_b) {
      n = b->dims[0];
      k = b->dims[1];
      rs = 1;
      cs = k;
    } else {
      k = b->dims[b->rank - 2];
      n = b->dims[b->rank - 1];
      rs = n;
      cs = 1;
    }
    s->packed_b = er__aligned_alloc(er__sgemm_packed_b_floats(isa, k, n) * sizeof(float));
    if (!s->packed_b) {
      free(s);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "%s '%s': out of memory packing weights [%lld, %lld]",
                       ki->node->op_type, ki->node->name, (long long)k, (long long)n);
    }
    er__sgemm_pack_b(isa, bd, rs, cs, k, n, s->packed_b);
    s->k = k;
    s->n = n;
  }
  /* Scratch, when the shapes are known now. */
  *scratch_out = 0;
  if (er__tensor_shape_known(a) && er__tensor_shape_known(b)) {
    er_gemm_problem p;
    er_tensor y;
    memset(&y, 0, sizeof y);
    if (is_gemm(kind)) {
      gemm_problem(s, a, b, NULL, NULL, &p);
    } else {
      mm_batch mb;
      if (matmul_batch(a, b, &mb)) matmul_problem(s, &mb, a, b, NULL, NULL, &p);
      else p.m = 0;
    }
    if (p.m > 0) *scratch_out = er__sgemm_scratch_floats(&p) * sizeof(float) * (size_t)s->slots;
  }
  *state_out = s;
  return ER_STATUS_OK;
}

static void mm_release(void *state) {
  mm_state *s = state;
  if (!s) return;
  er__aligned_free(s->packed_b);
  free(s);
}

/* Few rows and a B that is not packed (run-time weights): products
 * straight from B, split over workers by columns. */
typedef struct gemv_job {
  const er_vec_ops *ops;
  er_gemv g;
} gemv_job;

static void gemv_chunk(void *arg, int64_t begin, int64_t end) {
  const gemv_job *j = arg;
  j->ops->gemv(&j->g, begin, end);
}

/* Few rows and weights packed at load (a batch dimension that was not
 * known then: a served model's requests come one row at a time): each
 * NR-wide panel [K][NR] of the packed B is a row-major B of its own, read
 * once, instead of packing A into MR-high panels that are mostly zero rows
 * (the Fashion-MNIST classifier's 1568 x 64 layer took 17 us at one row
 * that way). */
typedef struct panel_gemv_job {
  const er_vec_ops *ops;
  er_gemv g;
  int64_t nr;
} panel_gemv_job;

static void panel_gemv_chunk(void *arg, int64_t begin, int64_t end) {
  const panel_gemv_job *j = arg;
  er__gemv_panels(j->ops, &j->g, j->nr, begin, end);
}

static bool try_gemv(const er_kernel_run *kr, const mm_state *s, const er_gemm_problem *p, const mm_batch *mb) {
  if (p->b.pack) return false;
  if (p->b.packed) {
    if (mb->batch != 1 || p->m > (s->ops->vn == 16 ? ER_GEMV_ROWS_MAX_M_16 : ER_GEMV_MAX_M)) return false;
    panel_gemv_job j;
    memset(&j, 0, sizeof j);
    j.ops = s->ops;
    j.nr = p->isa->nr;
    er_gemv *g = &j.g;
    g->m = p->m, g->n = p->n, g->k = p->k;
    g->a = p->a.data, g->a_rs = p->a.rs, g->a_cs = p->a.cs;
    g->b = p->b.packed;
    g->c = p->c, g->ldc = p->ldc;
    g->scale = p->scale, g->beta = p->epi.beta;
    g->add = p->epi.add, g->add_rs = p->epi.add_rs, g->add_cs = p->epi.add_cs;
    g->bias = p->epi.bias;
    g->act = p->epi.act;
    int64_t panels = (p->n + j.nr - 1) / j.nr;
    int64_t grain = (INT64_C(1) << 16) / (p->m * j.nr * (p->k > 0 ? p->k : 1)) + 1;
    er__parallel_for(kr->pool, panels, grain, panel_gemv_chunk, &j);
    return true;
  }
  if (p->m > ER_GEMV_MAX_M || (p->b.cs != 1 && p->b.rs != 1)) return false;
  gemv_job j;
  memset(&j, 0, sizeof j);
  j.ops = s->ops;
  er_gemv *g = &j.g;
  g->m = p->m;
  g->n = p->n;
  g->k = p->k;
  g->a_rs = p->a.rs;
  g->a_cs = p->a.cs;
  g->b_rs = p->b.rs;
  g->b_cs = p->b.cs;
  g->ldc = p->ldc;
  g->scale = p->scale;
  g->beta = p->epi.beta;
  g->add_rs = p->epi.add_rs;
  g->add_cs = p->epi.add_cs;
  g->bias = p->epi.bias;
  g->act = p->epi.act;
  int64_t macs_per_col = p->m * (p->k > 0 ? p->k : 1);
  int64_t grain = (INT64_C(1) << 16) / macs_per_col + 1;
  for (int64_t i = 0; i < mb->batch; i++) {
    g->a = p->a.data + i * mb->a_bs;
    g->b = p->b.data + i * mb->b_bs;
    g->c = p->c + i * p->m * p->n;
    g->add = p->epi.add;
    er__parallel_for(kr->pool, p->n, grain, gemv_chunk, &j);
  }
  return true;
}

static er_status mm_run(const er_kernel_run *kr) {
  const mm_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *a = ctx->in[0], *b = ctx->in[1], *c = er__in(ctx, 2);
  er_tensor *y = ctx->out[0];
  er_gemm_problem p;
  mm_batch mb = {0};
  if (is_gemm(s->kind)) {
    gemm_problem(s, a, b, c, y->data, &p);
    mb.batch = 1;
  } else {
    if (!matmul_batch(a, b, &mb)) return er__kr_reference(kr);
    matmul_problem(s, &mb, a, b, s->kind == MM_FUSED_MATMUL ? c : NULL, y->data, &p);
  }
  if (p.b.packed && (s->k != p.k || s->n != p.n)) return er__kr_reference(kr);
  if (p.m <= 0 || p.n <= 0) return ER_STATUS_OK;
  if (try_gemv(kr, s, &p, &mb)) return ER_STATUS_OK;
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, er__sgemm_scratch_floats(&p) * sizeof(float), &scratch, &slots, &owned));
  if (mb.batch == 1)
    er__sgemm_run(&p, kr->pool, scratch, slots);
  else
    er__sgemm_run_batch(&p, mb.batch, mb.a_bs, mb.b_bs, mb.m * mb.n, 0, kr->pool, scratch, slots);
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

#define DEFINE_MM_KERNEL(KIND, OP, DOMAIN, NAME, ISA_VAR, VEC_VAR, ISA_OK)                        \
  static bool supports_##NAME(const er_kernel_info *ki) {                                       \
    return mm_supports(ki, KIND, &ISA_VAR, ISA_OK(ki->cpu));                                    \
  }                                                                                             \
  static er_status prepare_##NAME(const er_kernel_info *ki, void **state, size_t *scratch) {    \
    return mm_prepare(ki, KIND, &ISA_VAR, &VEC_VAR, state, scratch);                            \
  }                                                                                             \
  static const er_cpu_kernel k_##NAME = {#NAME, OP, DOMAIN, supports_##NAME, prepare_##NAME,    \
                                         mm_run, mm_release};

#if defined(__x86_64__) || defined(__i386__)
DEFINE_MM_KERNEL(MM_MATMUL, "MatMul", "", f32_matmul_14x32__avx512, er__sgemm_avx512, er__vec_avx512, er__cpu_has_avx512)
DEFINE_MM_KERNEL(MM_GEMM, "Gemm", "", f32_gemm_14x32__avx512, er__sgemm_avx512, er__vec_avx512, er__cpu_has_avx512)
DEFINE_MM_KERNEL(MM_FUSED_MATMUL, "FusedMatMul", ER_FUSED_DOMAIN, f32_fused_matmul_14x32__avx512,
                 er__sgemm_avx512, er__vec_avx512, er__cpu_has_avx512)
DEFINE_MM_KERNEL(MM_FUSED_GEMM, "FusedGemm", ER_FUSED_DOMAIN, f32_fused_gemm_14x32__avx512,
                 er__sgemm_avx512, er__vec_avx512, er__cpu_has_avx512)
DEFINE_MM_KERNEL(MM_MATMUL, "MatMul", "", f32_matmul_6x16__avx2, er__sgemm_avx2, er__vec_avx2, er__cpu_has_avx2)
DEFINE_MM_KERNEL(MM_GEMM, "Gemm", "", f32_gemm_6x16__avx2, er__sgemm_avx2, er__vec_avx2, er__cpu_has_avx2)
DEFINE_MM_KERNEL(MM_FUSED_MATMUL, "FusedMatMul", ER_FUSED_DOMAIN, f32_fused_matmul_6x16__avx2,
                 er__sgemm_avx2, er__vec_avx2, er__cpu_has_avx2)
DEFINE_MM_KERNEL(MM_FUSED_GEMM, "FusedGemm", ER_FUSED_DOMAIN, f32_fused_gemm_6x16__avx2, er__sgemm_avx2,
                 er__vec_avx2, er__cpu_has_avx2)
#endif
#if defined(__aarch64__)
static bool has_neon(const er_cpu_features *c) { return c->neon; }
DEFINE_MM_KERNEL(MM_MATMUL, "MatMul", "", f32_matmul_8x8__neon, er__sgemm_neon, er__vec_neon, has_neon)
DEFINE_MM_KERNEL(MM_GEMM, "Gemm", "", f32_gemm_8x8__neon, er__sgemm_neon, er__vec_neon, has_neon)
DEFINE_MM_KERNEL(MM_FUSED_MATMUL, "FusedMatMul", ER_FUSED_DOMAIN, f32_fused_matmul_8x8__neon,
                 er__sgemm_neon, er__vec_neon, has_neon)
DEFINE_MM_KERNEL(MM_FUSED_GEMM, "FusedGemm", ER_FUSED_DOMAIN, f32_fused_gemm_8x8__neon, er__sgemm_neon,
                 er__vec_neon, has_neon)
#endif

const er_cpu_kernel *const er__kernels_gemm[] = {
#if defined(__x86_64__) || defined(__i386__)
    &k_f32_matmul_14x32__avx512,
    &k_f32_gemm_14x32__avx512,
    &k_f32_fused_matmul_14x32__avx512,
    &k_f32_fused_gemm_14x32__avx512,
    &k_f32_matmul_6x16__avx2,
    &k_f32_gemm_6x16__avx2,
    &k_f32_fused_matmul_6x16__avx2,
    &k_f32_fused_gemm_6x16__avx2,
#endif
#if defined(__aarch64__)
    &k_f32_matmul_8x8__neon,
    &k_f32_gemm_8x8__neon,
    &k_f32_fused_matmul_8x8__neon,
    &k_f32_fused_gemm_8x8__neon,
#endif
    NULL,
};
