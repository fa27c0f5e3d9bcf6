/* attn.c - optimized CPU kernels of the "attn" group: float32 Attention
 * (ONNX opset 23+), which graph fusion also makes from the MatMul /
 * Softmax / MatMul patterns exporters write (src/graph/passes-attention.c).
 *
 * The reference (src/ops/attention.c) works one query row at a time in
 * double. This kernel takes a block of up to ATTN_MAX_ROWS query rows of
 * one (batch, head) at a time:
 *
 *   scores [rows, T] = scale * Q_rows K^T + mask      (SGEMM, mask in the epilogue)
 *   probs            = softmax of each row, in place  (er_vec_ops.softmax)
 *   Y_rows [rows, Dv] = probs V                       (SGEMM, written in place)
 *
 * so the score tile lives in the worker's scratch (rows x T floats, at
 * most ATTN_TILE_FLOATS once T is large) and the full [B, H, S, T] score
 * tensor is never made. Q, K, V and Y are read and written through their
 * strides, so the 3-D form (heads inside each row) needs no head-split
 * copies. K^T and V of a head are packed once per worker and reused by
 * the head's row blocks and by query heads sharing the KV head (up to
 * ATTN_PACK_MAX_FLOATS; larger heads are packed block by block by the
 * GEMM driver). Work units are (batch, head, row block), split statically over
 * the workers; each unit's sums run in the same order whatever the split,
 * so results do not depend on the thread count.
 *
 * Taken: float32 Q, K, V and Y; 3-D (q_num_heads / kv_num_heads) or 4-D
 * inputs; grouped KV heads; an optional float (additive) or bool mask
 * whose last dim is the key length; is_causal; scale. Left to the
 * reference: the KV cache (past_key / past_value, present outputs),
 * nonpad_kv_seqlen, the qk_matmul_output output, softcap,
 * softmax_precision other than float, sliding windows (version 25), and
 * masks shorter than the keys. */
#include <math.h>

#include "kernels/kernel-groups.h"
#include "kernels/kutil.h"
#include "kernels/sgemm.h"
#include "kernels/vec.h"

enum { IN_Q, IN_K, IN_V, IN_MASK, IN_PAST_K, IN_PAST_V, IN_NONPAD };

/* Query rows per work unit: enough rows for several whole GEMM tiles
 * (and to amortize packing Q and the probabilities), few enough that a
 * head of a 128-token sequence still splits in two for two workers. */
#define ATTN_MAX_ROWS 64
/* The most floats of one worker's score tile (256 KiB: L2-resident).
 * With long key sequences the block takes fewer rows rather than more
 * memory; one row of T floats is the floor. */
#define ATTN_TILE_FLOATS (INT64_C(1) << 16)
/* The most floats of K^T and V of one head packed once per worker (4 MiB)
 * and reused by that head's row blocks; larger heads are packed block by
 * block by the GEMM driver. */
#define ATTN_PACK_MAX_FLOATS ((size_t)1 << 20)

typedef struct attn_state {
  const er_sgemm_isa *isa;
  const er_vec_ops *ops;
  bool causal;
  bool has_scale;
  float scale;
  int64_t q_num_heads, kv_num_heads; /* 0 when absent */
} attn_state;

/* ======================================================================== */
/* Which nodes                                                               */
/* ======================================================================== */

static bool read_attrs(const er_kernel_info *ki, attn_state *s) {
  er_kctx ctx = er__ki_ctx(ki);
  int64_t causal, mode, sp, lw = -1, rw = -1;
  float softcap;
  bool ok = er__attr_int(&ctx, "is_causal", 0, &causal) == ER_STATUS_OK &&
            er__attr_int(&ctx, "q_num_heads", 0, &s->q_num_heads) == ER_STATUS_OK &&
            er__attr_int(&ctx, "kv_num_heads", 0, &s->kv_num_heads) == ER_STATUS_OK &&
            er__attr_float(&ctx, "scale", 0.0f, &s->scale) == ER_STATUS_OK &&
            er__attr_float(&ctx, "softcap", 0.0f, &softcap) == ER_STATUS_OK &&
            er__attr_int(&ctx, "qk_matmul_output_mode", 0, &mode) == ER_STATUS_OK &&
            er__attr_int(&ctx, "softmax_precision", 0, &sp) == ER_STATUS_OK;
  if (ok && ki->node->version >= 25)
    ok = er__attr_int(&ctx, "left_window_size", -1, &lw) == ER_STATUS_OK &&
         er__attr_int(&ctx, "right_window_size", -1, &rw) == ER_STATUS_OK;
  if (!ok) {
    er__error_clear();
    return false;
  }
  s->causal = causal == 1;
  s->has_scale = er__node_attr(ki->node, "scale") != NULL;
  return (causal == 0 || causal == 1) && softcap == 0.0f && mode == 0 && (sp == 0 || sp == ER_DTYPE_FLOAT) &&
         lw == -1 && rw == -1 && s->q_num_heads >= 0 && s->kv_num_heads >= 0 &&
         (!s->has_scale || s->scale >= 0.0f);
}

static bool attn_supports(const er_kernel_info *ki, const er_sgemm_isa *isa, bool isa_ok) {
  if (!isa_ok || !isa) return false;
  if (!er__ki_f32(ki, IN_Q) || !er__ki_f32(ki, IN_K) || !er__ki_f32(ki, IN_V)) return false;
  for (int i = IN_PAST_K; i <= IN_NONPAD; i++)
    if (er__ki_in(ki, i)) return false;
  for (int i = 1; i < ki->n_out; i++)
    if (ki->out[i]) return false;
  if (!ki->out[0] || ki->out[0]->dtype != ER_DTYPE_FLOAT) return false;
  const er_tensor *mask = er__ki_in(ki, IN_MASK);
  if (mask && mask->dtype != ER_DTYPE_FLOAT && mask->dtype != ER_DTYPE_BOOL) return false;
  int rank = ki->in[IN_Q]->rank;
  if (rank >= 0 && rank != 3 && rank != 4) return false;
  /* A mask shorter than the keys masks the rest: the reference's case. */
  const er_tensor *k = ki->in[IN_K];
  int64_t t = k->rank == 3 ? k->dims[1] : k->rank == 4 ? k->dims[2] : -1;
  if (mask && mask->rank >= 1 && mask->dims[mask->rank - 1] >= 0 && t >= 0 && mask->dims[mask->rank - 1] != t)
    return false;
  attn_state s;
  memset(&s, 0, sizeof s);
  if (!read_attrs(ki, &s)) return false;
  if (rank == 3 && (s.q_num_heads <= 0 || s.kv_num_heads <= 0)) return false;
  return true;
}

/* ======================================================================== */
/* Problem size                                                              */
/* ======================================================================== */

/* Sizes and element strides of one run, in the 4-D view (batch, head,
 * seq, d): a 3-D tensor [batch, seq, heads * d] has its heads inside each
 * row. */
typedef struct attn_dims {
  int64_t b, hq, hkv, s, t, d, dv;
  int64_t qb, qh, qs, kb, kh, ks, vb, vh, vs, yb, yh, ys;
  int64_t mb, mh, mi;   /* mask strides over batch, head, query row (0: broadcast) */
} attn_dims;

static void strides(bool is3d, int64_t heads, int64_t seq, int64_t d, int64_t *sb, int64_t *sh, int64_t *ss) {
  if (is3d) {
    *ss = heads * d;
    *sh = d;
  } else {
    *ss = d;
    *sh = seq * d;
  }
  *sb = heads * seq * d;
}

/* False when the shapes are not the ones the kernel handles (the
 * reference then runs, and rejects what is invalid). */
static bool attn_dims_of(const attn_state *st, const er_tensor *q, const er_tensor *k, const er_tensor *v,
                         const er_tensor *mask, const er_tensor *y, attn_dims *a) {
  memset(a, 0, sizeof *a);
  if (q->rank != k->rank || q->rank != v->rank) return false;
  bool is3d = q->rank == 3;
  if (is3d) {
    int64_t hq = st->q_num_heads, hkv = st->kv_num_heads;
    if (hq <= 0 || hkv <= 0 || q->dims[2] % hq || v->dims[2] % hkv) return false;
    a->b = q->dims[0], a->s = q->dims[1], a->hq = hq, a->hkv = hkv, a->d = q->dims[2] / hq;
    a->t = k->dims[1], a->dv = v->dims[2] / hkv;
    if (k->dims[0] != a->b || v->dims[0] != a->b || v->dims[1] != a->t || k->dims[2] != hkv * a->d) return false;
    if (y->rank != 3 || y->dims[0] != a->b || y->dims[1] != a->s || y->dims[2] != hq * a->dv) return false;
  } else if (q->rank == 4) {
    a->b = q->dims[0], a->hq = q->dims[1], a->s = q->dims[2], a->d = q->dims[3];
    a->hkv = k->dims[1], a->t = k->dims[2], a->dv = v->dims[3];
    if (k->dims[0] != a->b || v->dims[0] != a->b || v->dims[1] != a->hkv || v->dims[2] != a->t ||
        k->dims[3] != a->d)
      return false;
    if (y->rank != 4 || y->dims[0] != a->b || y->dims[1] != a->hq || y->dims[2] != a->s || y->dims[3] != a->dv)
      return false;
  } else {
    return false;
  }
  if (a->hkv <= 0 || a->hq % a->hkv != 0 || a->d <= 0) return false;
  strides(is3d, a->hq, a->s, a->d, &a->qb, &a->qh, &a->qs);
  strides(is3d, a->hkv, a->t, a->d, &a->kb, &a->kh, &a->ks);
  strides(is3d, a->hkv, a->t, a->dv, &a->vb, &a->vh, &a->vs);
  strides(is3d, a->hq, a->s, a->dv, &a->yb, &a->yh, &a->ys);
  if (mask) {
    /* Right-aligned to (batch, q_heads, q_len, keys); the last dim must be
     * the key length (a shorter one means masked keys: the reference's
     * case). */
    int r = mask->rank;
    if (r < 1 || r > 4 || mask->dims[r - 1] != a->t) return false;
    const int64_t full[3] = {a->b, a->hq, a->s};
    int64_t *out[3] = {&a->mb, &a->mh, &a->mi};
    int64_t stride = a->t;
    for (int d = r - 2; d >= 0; d--) {
      int pos = 3 - (r - 1) + d;
      int64_t m = mask->dims[d];
      if (m != 1 && m != full[pos]) return false;
      *out[pos] = m == 1 ? 0 : stride;
      stride *= m;
    }
  }
  return true;
}

/* Query rows per unit: at most ATTN_MAX_ROWS, fewer when the score tile
 * would exceed ATTN_TILE_FLOATS (one row at least), and the query length
 * split into blocks of equal size (128 rows are two blocks of 64, not 56 +
 * 56 + 16). Depends only on S and T, never on the thread count. */
static int64_t rows_per_block(int64_t s, int64_t t) {
  int64_t cap = ATTN_TILE_FLOATS / (t > 0 ? t : 1);
  if (cap > ATTN_MAX_ROWS) cap = ATTN_MAX_ROWS;
  if (cap < 1) cap = 1;
  int64_t blocks = (s + cap - 1) / cap;
  return blocks > 0 ? (s + blocks - 1) / blocks : 1;
}

/* A worker's scratch, in floats from its start. */
typedef struct attn_layout {
  int64_t rows;          /* query rows per unit */
  bool prepack;          /* K^T and V packed once per head (fit ATTN_PACK_MAX_FLOATS) */
  size_t tile, kp, vp;   /* offsets: score tile [rows, T], packed K^T, packed V */
  size_t gemm;           /* offset of the GEMMs' packing buffers */
  size_t total;          /* floats per worker */
} attn_layout;

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* The two products of a unit of `rows` rows, pointers left unset. */
static void problems(const attn_state *st, const attn_dims *a, int64_t rows, bool prepack, er_gemm_problem *p1,
                     er_gemm_problem *p2) {
  memset(p1, 0, sizeof *p1);
  memset(p2, 0, sizeof *p2);
  p1->isa = p2->isa = st->isa;
  /* scores [rows, T] = scale * Q [rows, D] K^T [D, T] (+ mask) */
  p1->m = rows, p1->n = a->t, p1->k = a->d;
  p1->a.rs = a->qs, p1->a.cs = 1;
  p1->b.rs = 1, p1->b.cs = a->ks;
  p1->ldc = a->t;
  /* Y [rows, Dv] = probs [rows, T] V [T, Dv] */
  p2->m = rows, p2->n = a->dv, p2->k = a->t;
  p2->a.rs = a->t, p2->a.cs = 1;
  p2->b.rs = a->vs, p2->b.cs = 1;
  p2->scale = 1.0f;
  p2->ldc = a->ys;
  if (prepack) {
    /* Only for the scratch size: the run points these at the packs. */
    p1->b.packed = p2->b.packed = (const float *)p1;
  }
}

static attn_layout layout_of(const attn_state *st, const attn_dims *a) {
  attn_layout l;
  memset(&l, 0, sizeof l);
  l.rows = rows_per_block(a->s, a->t);
  size_t kp = er__sgemm_packed_b_floats(st->isa, a->d, a->t), vp = er__sgemm_packed_b_floats(st->isa, a->t, a->dv);
  /* Packing per head pays when a head has several row blocks (or GQA
   * heads share it); it is bounded so long sequences keep the scratch
   * small (the GEMM driver then packs block by block). */
  l.prepack = kp + vp <= ATTN_PACK_MAX_FLOATS && (a->s > l.rows || a->hq > a->hkv);
  er_gemm_problem p1, p2;
  problems(st, a, l.rows, l.prepack, &p1, &p2);
  size_t g1 = er__sgemm_scratch_floats(&p1), g2 = er__sgemm_scratch_floats(&p2);
  l.tile = 0;
  l.kp = round16((size_t)(l.rows * a->t));
  l.vp = l.kp + (l.prepack ? round16(kp) : 0);
  l.gemm = l.vp + (l.prepack ? round16(vp) : 0);
  l.total = l.gemm + (g1 > g2 ? g1 : g2);
  return l;
}

/* ======================================================================== */
/* prepare / run                                                             */
/* ======================================================================== */

static er_status attn_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, const er_vec_ops *ops,
                              void **state_out, size_t *scratch_out) {
  attn_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for an Attention kernel");
  read_attrs(ki, s);
  s->isa = isa;
  s->ops = ops;
  *scratch_out = 0;
  const er_tensor *q = ki->in[IN_Q], *k = ki->in[IN_K], *v = ki->in[IN_V], *mask = er__ki_in(ki, IN_MASK);
  attn_dims a;
  if (er__tensor_shape_known(q) && er__tensor_shape_known(k) && er__tensor_shape_known(v) &&
      (!mask || er__tensor_shape_known(mask)) && ki->out[0]->rank >= 0 && er__tensor_shape_known(ki->out[0]) &&
      attn_dims_of(s, q, k, v, mask, ki->out[0], &a))
    *scratch_out = layout_of(s, &a).total * sizeof(float) * (size_t)er__ki_slots(ki);
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct attn_job {
  const attn_state *st;
  const attn_dims *a;
  attn_layout l;
  const float *q, *k, *v, *mask; /* mask: NULL, or float (additive) */
  const uint8_t *bmask;          /* or bool */
  float *y;
  float scale;
  int64_t blocks, units;         /* row blocks per head, units */
  int chunks;
  float *scratch;
} attn_job;

/* One unit: query rows [r0, r0 + rows) of (batch b, head h). *packed is
 * the KV head (b * kv_heads + kv head) whose K^T and V the slot holds,
 * -1 for none. */
static void attn_unit(const attn_job *j, int64_t b, int64_t h, int64_t r0, int64_t rows, float *slot,
                      int64_t *packed) {
  const attn_dims *a = j->a;
  const er_sgemm_isa *isa = j->st->isa;
  const int64_t T = a->t, hk = h / (a->hq / a->hkv);
  float *sc = slot + j->l.tile; /* [rows, T] */
  float *gs = slot + j->l.gemm;
  const float *kh = j->k + b * a->kb + hk * a->kh, *vh = j->v + b * a->vb + hk * a->vh;
  er_gemm_problem p1, p2;
  problems(j->st, a, rows, false, &p1, &p2);
  if (j->l.prepack) {
    float *kp = slot + j->l.kp, *vp = slot + j->l.vp;
    if (*packed != b * a->hkv + hk) {
      er__sgemm_pack_b(isa, kh, 1, a->ks, a->d, T, kp);
      er__sgemm_pack_b(isa, vh, a->vs, 1, T, a->dv, vp);
      *packed = b * a->hkv + hk;
    }
    p1.b.packed = kp;
    p2.b.packed = vp;
  } else {
    p1.b.data = kh;
    p2.b.data = vh;
  }
  p1.a.data = j->q + b * a->qb + h * a->qh + r0 * a->qs;
  p1.scale = j->scale;
  p1.c = sc;
  int64_t moff = b * a->mb + h * a->mh + r0 * a->mi;
  if (j->mask) {
    p1.epi.add = j->mask + moff;
    p1.epi.add_rs = a->mi;
    p1.epi.add_cs = 1;
    p1.epi.beta = 1.0f;
  }
  er__sgemm_run(&p1, NULL, gs, 1);
  for (int64_t i = 0; i < rows; i++) {
    float *row = sc + i * T;
    if (j->bmask) {
      const uint8_t *mr = j->bmask + moff + i * a->mi;
      for (int64_t c = 0; c < T; c++)
        if (!mr[c]) row[c] = -INFINITY;
    }
    if (j->st->causal) {
      /* No cache here, so query row r sees keys 0..r. */
      for (int64_t c = r0 + i + 1; c < T; c++) row[c] = -INFINITY;
    }
    if (j->mask || j->bmask) {
      /* A row whose every key is masked outputs zeros (the spec's rule):
       * zero probabilities make the product below write them. */
      bool visible = false;
      for (int64_t c = 0; c < T && !visible; c++) visible = !(row[c] == -INFINITY);
      if (!visible) {
        memset(row, 0, (size_t)T * sizeof *row);
        continue;
      }
    }
    j->st->ops->softmax(row, row, T, 1, false);
  }
  p2.a.data = sc;
  p2.c = j->y + b * a->yb + h * a->yh + r0 * a->ys;
  er__sgemm_run(&p2, NULL, gs, 1);
}

static void attn_chunk(void *arg, int64_t begin, int64_t end) {
  const attn_job *j = arg;
  const attn_dims *a = j->a;
  for (int64_t c = begin; c < end; c++) {
    float *slot = j->scratch + (size_t)c * j->l.total;
    int64_t packed = -1;
    for (int64_t u = j->units * c / j->chunks; u < j->units * (c + 1) / j->chunks; u++) {
      int64_t blk = u % j->blocks, bh = u / j->blocks;
      int64_t r0 = blk * j->l.rows, rows = a->s - r0 < j->l.rows ? a->s - r0 : j->l.rows;
      attn_unit(j, bh / a->hq, bh % a->hq, r0, rows, slot, &packed);
    }
  }
}

static er_status attn_run(const er_kernel_run *kr) {
  const attn_state *st = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *q = ctx->in[IN_Q], *k = ctx->in[IN_K], *v = ctx->in[IN_V], *mask = er__in(ctx, IN_MASK);
  er_tensor *y = ctx->out[0];
  attn_dims a;
  if (!attn_dims_of(st, q, k, v, mask, y, &a)) return er__kr_reference(kr);
  if (a.b == 0 || a.hq == 0 || a.s == 0 || a.dv == 0) return ER_STATUS_OK;
  if (a.t == 0) {
    /* No keys: every row is masked, so zeros (the reference's rule). */
    memset(y->data, 0, y->nbytes);
    return ER_STATUS_OK;
  }
  attn_job j;
  memset(&j, 0, sizeof j);
  j.st = st;
  j.a = &a;
  j.l = layout_of(st, &a);
  j.q = q->data, j.k = k->data, j.v = v->data, j.y = y->data;
  if (mask && mask->dtype == ER_DTYPE_BOOL) j.bmask = mask->data;
  else if (mask) j.mask = mask->data;
  j.scale = st->has_scale ? st->scale : (float)(1.0 / sqrt((double)a.d));
  j.blocks = (a.s + j.l.rows - 1) / j.l.rows;
  j.units = a.b * a.hq * j.blocks;
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  ER_CHECK(er__kr_scratch(kr, j.l.total * sizeof(float), &scratch, &slots, &owned));
  j.scratch = scratch;
  j.chunks = (int)(j.units < slots ? j.units : slots);
  er__parallel_for(kr->pool, j.chunks, 1, attn_chunk, &j);
  er__aligned_free(owned);
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* The kernel table                                                          */
/* ======================================================================== */

#define DEFINE_ATTN_KERNEL(SFX, ISA, GEMM, VO, ISA_OK)                                                  \
  static bool attn_supports_##SFX(const er_kernel_info *ki) {                                         \
    return attn_supports(ki, &GEMM, ISA_OK(ki->cpu));                                                 \
  }                                                                                                   \
  static er_status attn_prepare_##SFX(const er_kernel_info *ki, void **st, size_t *scratch) {         \
    return attn_prepare(ki, &GEMM, &VO, st, scratch);                                                 \
  }                                                                                                   \
  static const er_cpu_kernel k_attn_##SFX = {"f32_attention__" ISA, "Attention", "", attn_supports_##SFX, \
                                             attn_prepare_##SFX, attn_run, free};

#if defined(__x86_64__) || defined(__i386__)
DEFINE_ATTN_KERNEL(avx512, "avx512", er__sgemm_avx512, er__vec_avx512, er__cpu_has_avx512)
DEFINE_ATTN_KERNEL(avx2, "avx2", er__sgemm_avx2, er__vec_avx2, er__cpu_has_avx2)
#endif
#if defined(__aarch64__)
static bool has_neon(const er_cpu_features *c) { return c->neon; }
DEFINE_ATTN_KERNEL(neon, "neon", er__sgemm_neon, er__vec_neon, has_neon)
#endif

const er_cpu_kernel *const er__kernels_attn[] = {
#if defined(__x86_64__) || defined(__i386__)
    &k_attn_avx512,
    &k_attn_avx2,
#endif
#if defined(__aarch64__)
    &k_attn_neon,
#endif
    NULL,
};
