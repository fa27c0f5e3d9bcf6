/* qlstm.c - com.microsoft DynamicQuantizeLSTM on the integer GEMM (see
 * quant.c). */
#include "kernels/quant-impl.h"

/* ======================================================================== */
/* com.microsoft DynamicQuantizeLSTM                                         */
/* ======================================================================== */

/* The recurrence is the reference's (er__dqlstm_run); its integer
 * products run here on the matrix-product GEMM: W and R of each direction
 * packed once as columns panels [K, 4H], activations (X for every step at
 * once, then each step's hidden state) packed per run, int32 sums out
 * (ER_QEPI_I32) with the input zero point folded into the corrections per
 * product. ddddocr's bidirectional 512-unit LSTM: 77 ms on the plain loops. */

typedef struct dql_mat {
  uint8_t *packed;            /* columns panels over all of K */
  int32_t *wsum, *wzs;        /* [4H]; wzs NULL when every zero point is 0 */
  int64_t k;
} dql_mat;

typedef struct dql_state {
  const er_qgemm_isa *isa;
  const er_vec_ops *vec;      /* the gates' vector sigmoid and tanh (lstm_cell) */
  int dirs;
  int64_t gh;
  dql_mat mats[2][2];         /* [W, R][direction] */
} dql_state;

void er__q8_dql_release(void *state) {
  dql_state *s = state;
  if (!s) return;
  for (int w = 0; w < 2; w++)
    for (int d = 0; d < 2; d++) {
      er__aligned_free(s->mats[w][d].packed);
      free(s->mats[w][d].wsum);
      free(s->mats[w][d].wzs);
    }
  free(s);
}

bool er__q8_dql_supports_with(const er_kernel_info *ki, const er_qgemm_isa *isa) {
  if (ki->n_in < 12 || !isa) return false;
  const er_tensor *x = ki->in[0];
  if (!x || x->dtype != ER_DTYPE_FLOAT) return false;
  for (int i = 1; i <= 2; i++) {
    const er_tensor *w = ki->in[i];
    if (!w || !w->data || !q8(w->dtype) || w->rank != 3 || !er__tensor_shape_known(w)) return false;
  }
  for (int i = 8; i <= 11; i++)
    if (!ki->in[i] || !ki->in[i]->data) return false;
  return true;
}

static er_status dql_pack(dql_state *s, const er_tensor *w, const er_tensor *zp, int d, dql_mat *m) {
  const er_qgemm_isa *isa = s->isa;
  const int64_t K = w->dims[1], GH = w->dims[2];
  const uint8_t flip = w->dtype == ER_DTYPE_UINT8 ? 0x80 : 0;
  size_t cpb = er__qgemm_col_panel_bytes(isa, K);
  int64_t panels = (GH + isa->nr - 1) / isa->nr;
  m->k = K;
  m->packed = er__aligned_alloc(cpb * (size_t)panels);
  m->wsum = calloc((size_t)GH, sizeof *m->wsum);
  m->wzs = calloc((size_t)GH, sizeof *m->wzs);
  if (!m->packed || !m->wsum || !m->wzs) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory packing DynamicQuantizeLSTM weights");
  er_qsrc src = {(const uint8_t *)w->data + (size_t)(d * K * GH), GH, 1, flip, true};
  for (int64_t q = 0; q < panels; q++)
    er__qgemm_pack_cols(isa, &src, q * isa->nr, (int)min64(isa->nr, GH - q * isa->nr), K,
                        m->packed + (size_t)q * cpb, m->wsum + q * isa->nr);
  bool any = false;
  for (int64_t n = 0; n < GH; n++) {
    /* uint8 weights shift by -128 and their zero points with them */
    m->wzs[n] = (int32_t)pval(zp, zp->rank == 2 ? d * GH + n : d) - (flip ? 128 : 0);
    if (m->wzs[n]) any = true;
  }
  if (!any) {
    free(m->wzs);
    m->wzs = NULL;
  }
  return ER_STATUS_OK;
}

er_status er__q8_dql_prepare_with(const er_kernel_info *ki, const er_qgemm_isa *isa, void **state_out,
                                  size_t *scratch_out) {
  dql_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory preparing DynamicQuantizeLSTM");
  s->isa = isa;
#if defined(__x86_64__) || defined(__i386__)
  s->vec = er__cpu_has_avx512(ki->cpu) ? &er__vec_avx512 : &er__vec_avx2;
#elif defined(__aarch64__)
  s->vec = &er__vec_neon;
#endif
  s->dirs = (int)ki->in[1]->dims[0];
  s->gh = ki->in[1]->dims[2];
  if (s->dirs < 1 || s->dirs > 2 || ki->in[2]->dims[0] != s->dirs || ki->in[2]->dims[2] != s->gh) {
    er__q8_dql_release(s);
    return er__error(ER_STATUS_INVALID_SHAPE, "DynamicQuantizeLSTM '%s': W and R disagree", ki->node->name);
  }
  for (int w = 0; w < 2; w++)
    for (int d = 0; d < s->dirs; d++) {
      er_status st = dql_pack(s, ki->in[1 + w], ki->in[w ? 11 : 9], d, &s->mats[w][d]);
      if (st != ER_STATUS_OK) {
        er__q8_dql_release(s);
        return st;
      }
    }
  *scratch_out = 0;
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct dql_rows {
  const er_qgemm_isa *isa;
  const uint8_t *a;           /* [m, K] */
  int64_t k;
} dql_rows;

static void dql_pack_rows(const void *vctx, int64_t i0, int64_t rows, void *dst, int32_t *sums) {
  const dql_rows *r = vctx;
  er__q8_pack_act_rows(r->isa, r->a, r->k, 0, i0, rows, dst, sums);
}

/* What a run hands the products: the kernel run (pool), the state, a
 * buffer for the corrections, the GEMM's scratch, and the first error. */
typedef struct dql_run_ctx {
  const er_kernel_run *kr;
  const dql_state *s;
  int32_t *corr;              /* [4H] */
  uint8_t *gemm;              /* slots * gemm_bytes */
  size_t gemm_bytes;
  int slots;
  er_status st;
} dql_run_ctx;

static void dql_problem(const dql_state *s, const dql_mat *mat, const dql_rows *rows, int64_t m, int32_t *corr,
                        int32_t *acc, er_qgemm_problem *p) {
  er_qepi epi;
  memset(&epi, 0, sizeof epi);
  epi.kind = ER_QEPI_I32;
  epi.corr = corr;
  epi.wzp = mat->wzs;
  er__q8_mm_problem(p, s->isa, m, s->gh, mat->k, dql_pack_rows, rows, mat->packed, &epi, acc);
}

static void dql_product(void *self, er_kctx *ctx, int which, int d, const uint8_t *a, int32_t az, int64_t m,
                        int32_t *acc) {
  (void)ctx;
  dql_run_ctx *rc = self;
  const dql_state *s = rc->s;
  const dql_mat *mat = &s->mats[which][d];
  if (rc->st != ER_STATUS_OK || m == 0) return;
  const uint32_t az_u = (uint32_t)az;
  for (int64_t n = 0; n < s->gh; n++)
    rc->corr[n] = (int32_t)(0u - az_u * (uint32_t)mat->wsum[n] +
                            (uint32_t)mat->k * az_u * (uint32_t)(mat->wzs ? mat->wzs[n] : 0));
  dql_rows rows = {s->isa, a, mat->k};
  er_qgemm_problem p;
  dql_problem(s, mat, &rows, m, rc->corr, acc, &p);
  if (er__qgemm_scratch_bytes(&p) > rc->gemm_bytes) {
    rc->st = er__error(ER_STATUS_INTERNAL, "DynamicQuantizeLSTM '%s': GEMM scratch larger than sized",
                       rc->kr->ctx->node->name);
    return;
  }
  er__qgemm_run(&p, rc->kr->pool, rc->gemm, rc->slots);
}

/* One buffer per run, from the run context's spill scratch (kept between
 * runs, so steady-state runs allocate nothing): the recurrence's scratch,
 * the corrections [4H] and the GEMM's per-worker scratch, sized for the
 * larger of the two products (all of X's steps at once). */
er_status er__q8_dql_run(const er_kernel_run *kr) {
  const dql_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0];
  if (x->rank != 3) return er__kr_reference(kr);
  size_t rec = (er__dqlstm_scratch_bytes(ctx) + 63) / 64 * 64;
  size_t corr = ((size_t)s->gh * sizeof(int32_t) + 63) / 64 * 64;
  size_t gemm = 0;
  for (int w = 0; w < 2; w++) {
    er_qgemm_problem p;
    dql_rows rows = {s->isa, NULL, s->mats[w][0].k};
    dql_problem(s, &s->mats[w][0], &rows, w ? x->dims[1] : x->dims[0] * x->dims[1], NULL, NULL, &p);
    size_t b = er__qgemm_scratch_bytes(&p);
    if (b > gemm) gemm = b;
  }
  int slots = er__pool_threads(kr->pool);
  if (slots > ER_KERNEL_MAX_SLOTS) slots = ER_KERNEL_MAX_SLOTS;
  if (slots < 1) slots = 1;
  void *owned = NULL;
  uint8_t *buf = er__kr_spill(kr, rec + corr + gemm * (size_t)slots, &owned);
  if (!buf)
    return er__error(ER_STATUS_OUT_OF_MEMORY, "DynamicQuantizeLSTM '%s': out of memory for %zu bytes of scratch",
                     ctx->node->name, rec + corr + gemm * (size_t)slots);
  /* The recurrence leaves Y past each sequence's length (and Y_h, Y_c of
   * empty sequences) as it finds them, like the reference: zero first. */
  for (int i = 0; i < ctx->n_out; i++)
    if (ctx->out[i] && ctx->out[i]->data) memset(ctx->out[i]->data, 0, ctx->out[i]->nbytes);
  dql_run_ctx rc = {kr, s, (int32_t *)(void *)(buf + rec), buf + rec + corr, gemm, slots, ER_STATUS_OK};
  const er_dq_products prod = {dql_product, &rc, s->vec ? s->vec->lstm_cell : NULL};
  er_status st = er__dqlstm_run(ctx, &prod, buf);
  er__aligned_free(owned);
  return st != ER_STATUS_OK ? st : rc.st;
}
