/* conv-wino.c - the "conv" group's Winograd F(2x2, 3x3) and F(4x4, 3x3)
 * convolutions: transformed weights at compile time, tiles of transformed
 * inputs through the SGEMM (see conv.c). */
#include "kernels/conv-impl.h"

/* ======================================================================== */
/* Winograd F(2x2, 3x3)                                                      */
/* ======================================================================== */

/* 3x3 stride-1 convolutions as 16 GEMMs over 4x4 input tiles (Lavin and
 * Gray): Y = A^T [ (G g G^T) .* (B^T d B) ] A per 2x2 output tile, so each
 * output costs 16 / 4 = 4 multiply-adds per input channel instead of 9.
 * U_t = (G g G^T)_t [M, C] is packed once per t as a GEMM left-hand side;
 * per chunk of tiles the input transform writes V_t [C, tiles] straight
 * into the right-hand packing layout, 16 GEMMs (one per t, spread over the
 * workers) give M_t = U_t V_t, and the output transform adds bias and
 * residual and applies the activation. F(2x2, 3x3)'s transforms hold only
 * 0, +-1 and 1/2, so its rounding error stays within a few times that of
 * the direct sum. Tiles are chunked so that V and M stay in the last-level
 * cache. */

/* Bytes of V and M one chunk of tiles may use. */
#define WINO_CHUNK_BYTES (INT64_C(4) << 20)
/* At or below these channel counts the transforms cost more than they
 * save (measured: the Fashion-MNIST CNN's 16 -> 32 layer at 14x14 took 33
 * us in F(2x2) and 22 us direct at batch 1, 545 and 323 us at batch 16;
 * YOLOv8n's 16 -> 16 layers and the detector's ran as fast either way). */
#define WINO_FEW_CHANNELS 16

typedef struct wino_state {
  const er_sgemm_isa *isa;
  const er_vec_ops *ops;
  int tile;           /* output tile: 2 (F(2x2,3x3)) or 4 (F(4x4,3x3)) */
  int mats;           /* (tile + 2)^2 products */
  er_activation act;
  float *u;           /* `mats` packed [M, C] matrices, u_stride floats apart */
  size_t u_stride;
  int64_t m, c;
  int slots;
  /* Output size unknown at load (F(4x4) only): where a run's size makes
   * F(4x4) compute mostly padding tiles, F(2x2) or the GEMM, their
   * weights transformed or packed by the first run that needs them (so
   * memory goes only to the forms a model's sizes use). `gemm` is the
   * GEMM's state without weights; the rest is published through the
   * atomics (F(2x2)'s U has u_stride too). */
  conv_state *gemm;
  _Atomic(float *) u2;
  _Atomic(float *) gemm_w;
} wino_state;

/* Panel-rounded GEMM columns times products: the work of each form. */
static int64_t wino_work(int64_t oh, int64_t ow, int tile) {
  int64_t tiles = ((oh + tile - 1) / tile) * ((ow + tile - 1) / tile);
  return (int64_t)(tile + 2) * (tile + 2) * ((tiles + 31) / 32 * 32);
}

/* Whether the tile-`tile` form pays at this output size: the products
 * over the tiles (rounded up to whole 32-wide panels) against 9 over the
 * pixels, with a margin for the transforms; F(4x4) only where it beats
 * F(2x2) by the same margin. Small images (7x7: 16 tiles) stay with the
 * direct GEMM. */
static bool wino_worth(int64_t oh, int64_t ow, int tile) {
  int64_t direct = 9 * oh * ow;
  int64_t w2 = wino_work(oh, ow, 2), w4 = wino_work(oh, ow, 4);
  if (tile == 4) return 4 * w4 < 3 * direct && 4 * w4 < 3 * w2;
  return 4 * w2 < 3 * direct;
}

bool er__kconv_wino_supports(const er_kernel_info *ki, bool isa_ok, int tile) {
  if (!isa_ok || !er__kconv_conv_common_ok(ki, is_fused(ki))) return false;
  const er_tensor *x = ki->in[0], *w = ki->in[1];
  if (x->rank != 4 || !w->data || !er__tensor_shape_known(w)) return false;
  if (w->dims[2] != 3 || w->dims[3] != 3 || w->dims[0] <= WINO_FEW_CHANNELS || w->dims[1] <= WINO_FEW_CHANNELS ||
      !er__kconv_dense_unit_steps(ki))
    return false;
  const er_tensor *y = ki->out[0];
  if (y->rank != 4) return false;
  /* Image size unknown until run time (detectors exported with a free
   * height and width): F(4x4), which wins on the images such models take,
   * with the GEMM for the small maps deep in the network (er__kconv_wino_run);
   * F(2x2) is chosen only when the size is known. */
  if (y->dims[2] < 0 || y->dims[3] < 0) return tile == 4;
  return wino_worth(y->dims[2], y->dims[3], tile);
}

/* The chunk of tiles and the scratch layout for a given geometry. */
typedef struct wino_plan {
  int64_t th, tw, tiles, chunk;   /* chunk: tiles per pass, a multiple of 32 */
  size_t v_stride, m_stride;      /* floats */
  size_t slot_floats;             /* input-transform rows per worker */
  size_t total_floats;            /* V + M + slots */
} wino_plan;

static void wino_plan_make(const wino_state *s, const er_window *g, int slots, wino_plan *p) {
  p->th = (g->oh + s->tile - 1) / s->tile;
  p->tw = (g->ow + s->tile - 1) / s->tile;
  p->tiles = p->th * p->tw;
  int64_t per_tile = s->mats * (s->c + s->m) * (int64_t)sizeof(float);
  /* A multiple of 32, so of every ISA's panel width. */
  int64_t chunk = WINO_CHUNK_BYTES / per_tile / 32 * 32;
  if (chunk < 32) chunk = 32;
  int64_t all = (p->tiles + 31) / 32 * 32;
  p->chunk = chunk < all ? chunk : all;
  p->v_stride = (size_t)(s->c * p->chunk);
  p->m_stride = (size_t)(s->m * p->chunk);
  p->slot_floats = (er__wino_scratch_floats(p->tw, s->ops->vn, s->tile, p->chunk) + 15) / 16 * 16;
  p->total_floats = (size_t)s->mats * (p->v_stride + p->m_stride) + (size_t)slots * p->slot_floats;
}

/* U = G g G^T of every (output, input) channel pair for F(tile x tile,
 * 3x3): (tile + 2)^2 matrices [M, C], each packed as the GEMM's A, *stride
 * floats apart. NULL when out of memory. */
static float *wino_make_u(const er_sgemm_isa *isa, const er_vec_ops *ops, const float *wd, int64_t mm, int64_t cc,
                          int tile, size_t *stride) {
  const int a = tile + 2, mats = a * a;
  *stride = (er__sgemm_packed_a_floats(isa, mm, cc) + 15) / 16 * 16;
  float *u_out = er__aligned_alloc((size_t)mats * *stride * sizeof(float));
  float *tmp = malloc((size_t)(mats * mm * cc) * sizeof *tmp);
  if (!u_out || !tmp) {
    er__aligned_free(u_out);
    free(tmp);
    return NULL;
  }
  ops->wino_weights(wd, mm, cc, tile, tmp);
  for (int t = 0; t < mats; t++)
    er__sgemm_pack_a(isa, tmp + (size_t)t * (size_t)(mm * cc), cc, 1, mm, cc, 1.0f, u_out + (size_t)t * *stride);
  free(tmp);
  return u_out;
}

/* Transformed weights shared by the nodes that convolve with one weight
 * tensor: detection heads apply the same towers to every pyramid level
 * (an FCOS head's eight 128 x 128 3x3 layers at three levels held 24
 * copies of 2.4 MB U, 57 MB, and transformed each at load). Entries are
 * found by shape and a 64-bit hash of the weights' contents (not their
 * address, which a freed session's folded weights could pass on to other
 * ones), and freed with their last user; any session on any thread may
 * share them, so two sessions of one model share theirs too. */
typedef struct wino_u_entry {
  const er_sgemm_isa *isa;
  uint64_t hash;
  int64_t m, c;
  int tile;
  float *u;
  size_t stride;
  int refs;
  struct wino_u_entry *next;
} wino_u_entry;

/* The list's lock: a spin lock held only to walk and link the list (the
 * kernel files compile for every target without pthread.h). */
static atomic_flag wino_u_busy = ATOMIC_FLAG_INIT;
static wino_u_entry *wino_u_list;

static void wino_u_lock(void) {
  while (atomic_flag_test_and_set_explicit(&wino_u_busy, memory_order_acquire)) {
  }
}

static void wino_u_unlock(void) { atomic_flag_clear_explicit(&wino_u_busy, memory_order_release); }

/* A 64-bit multiply-xorshift hash of n floats' bits: four independent
 * chains over interleaved 8-byte words (one chain's multiply latency
 * bounded it: 1 ms of fast_style's session), folded together at the end. */
static uint64_t hash_floats(const float *p, size_t n) {
  const uint64_t k = 0x9e3779b97f4a7c15ull;
  uint64_t h[4] = {0x243f6a8885a308d3ull ^ (uint64_t)n, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                   0x082efa98ec4e6c89ull};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 4; l++) {
      uint64_t w;
      memcpy(&w, p + i + 2 * l, sizeof w);
      h[l] = (h[l] ^ w) * k;
      h[l] ^= h[l] >> 29;
    }
  for (; i < n; i++) {
    uint32_t w;
    memcpy(&w, p + i, sizeof w);
    h[0] = (h[0] ^ w) * k;
    h[0] ^= h[0] >> 29;
  }
  uint64_t r = h[0];
  for (int l = 1; l < 4; l++) {
    r = (r ^ h[l]) * k;
    r ^= r >> 29;
  }
  return r;
}

static wino_u_entry *wino_u_find(const er_sgemm_isa *isa, uint64_t hash, int64_t mm, int64_t cc, int tile) {
  for (wino_u_entry *e = wino_u_list; e; e = e->next)
    if (e->isa == isa && e->hash == hash && e->m == mm && e->c == cc && e->tile == tile) return e;
  return NULL;
}

static float *wino_u_get(const er_sgemm_isa *isa, const er_vec_ops *ops, const float *wd, int64_t mm, int64_t cc,
                         int tile, size_t *stride) {
  const uint64_t hash = hash_floats(wd, (size_t)(mm * cc * 9));
  wino_u_lock();
  wino_u_entry *e = wino_u_find(isa, hash, mm, cc, tile);
  if (e) {
    e->refs++;
    *stride = e->stride;
    wino_u_unlock();
    return e->u;
  }
  wino_u_unlock();
  /* Made outside the lock (tens of milliseconds for large layers); a
   * racing maker of the same U keeps the first one inserted. */
  float *u = wino_make_u(isa, ops, wd, mm, cc, tile, stride);
  wino_u_entry *made = u ? malloc(sizeof *made) : NULL;
  if (!made) {
    er__aligned_free(u);
    return NULL;
  }
  wino_u_lock();
  e = wino_u_find(isa, hash, mm, cc, tile);
  if (e) {
    e->refs++;
    *stride = e->stride;
    wino_u_unlock();
    er__aligned_free(u);
    free(made);
    return e->u;
  }
  *made = (wino_u_entry){isa, hash, mm, cc, tile, u, *stride, 1, wino_u_list};
  wino_u_list = made;
  wino_u_unlock();
  return u;
}

static void wino_u_put(float *u) {
  if (!u) return;
  wino_u_lock();
  for (wino_u_entry **p = &wino_u_list; *p; p = &(*p)->next) {
    wino_u_entry *e = *p;
    if (e->u != u) continue;
    if (--e->refs == 0) {
      *p = e->next;
      er__aligned_free(e->u);
      free(e);
    }
    break;
  }
  wino_u_unlock();
}

void er__kconv_wino_release(void *state) {
  wino_state *s = state;
  if (!s) return;
  er__kconv_conv_gemm_release(s->gemm);
  er__aligned_free(atomic_load(&s->u2));
  er__aligned_free(atomic_load(&s->gemm_w));
  wino_u_put(s->u);
  free(s);
}

er_status er__kconv_wino_prepare(const er_kernel_info *ki, const er_sgemm_isa *isa, const er_vec_ops *ops, int tile,
                              void **state_out, size_t *scratch_out) {
  wino_state *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a Conv kernel");
  er_kctx ctx = er__ki_ctx(ki);
  const er_tensor *w = ki->in[1];
  s->isa = isa;
  s->ops = ops;
  s->tile = tile;
  s->mats = (tile + 2) * (tile + 2);
  s->act = er__kconv_node_act(&ctx);
  s->slots = er__ki_slots(ki);
  s->m = w->dims[0];
  s->c = w->dims[1];
  const float *wd = w->data;
  s->u = wino_u_get(isa, ops, wd, s->m, s->c, tile, &s->u_stride);
  if (!s->u) {
    free(s);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "Conv '%s': out of memory transforming weights", ki->node->name);
  }
  const er_tensor *y = ki->out[0];
  if (tile == 4 && y->rank == 4 && (y->dims[2] < 0 || y->dims[3] < 0)) {
    /* The GEMM's state without weights (er__kconv_conv_gemm_prepare would pack
     * them both ways for an unknown size); a run packs them once if a
     * size needs them (wino_gemm_weights). */
    const er_tensor *in[8];
    er_tensor w_nodata = *w;
    w_nodata.data = NULL;
    int n_in = ki->n_in < 8 ? ki->n_in : 8;
    for (int i = 0; i < n_in; i++) in[i] = ki->in[i];
    in[1] = &w_nodata;
    er_kernel_info gki = *ki;
    gki.n_in = n_in;
    gki.in = in;
    size_t gscratch = 0;
    void *gs = NULL;
    er_status st = er__kconv_conv_gemm_prepare(&gki, isa, ops, &gs, &gscratch);
    if (st != ER_STATUS_OK) {
      er__kconv_wino_release(s);
      return st;
    }
    s->gemm = gs;
  }
  *scratch_out = 0;
  er_window g;
  if (er__tensor_shape_known(ki->in[0]) && er__tensor_shape_known(ki->out[0]) &&
      er__window_get(&ctx, ki->in[0], w, ki->out[0], &g)) {
    wino_plan p;
    wino_plan_make(s, &g, s->slots, &p);
    *scratch_out = p.total_floats * sizeof(float);
  }
  *state_out = s;
  return ER_STATUS_OK;
}

typedef struct wino_job {
  const wino_state *s;
  const er_wino *w;
  const wino_plan *p;
  float *slots;       /* input-transform rows, one slot per chunk */
  int64_t count;      /* channels or output channels split */
  int chunks;
  bool per_thread;    /* input-transform slot per thread (er__pool_slot), else per chunk */
} wino_job;

static void wino_in_chunk(void *arg, int64_t begin, int64_t end) {
  const wino_job *j = arg;
  for (int64_t c = begin; c < end; c++) {
    int64_t slot = j->per_thread ? er__pool_slot() : c;
    (j->s->tile == 4 ? j->s->ops->wino4_input : j->s->ops->wino_input)(
        j->w, j->count * c / j->chunks, j->count * (c + 1) / j->chunks, j->slots + (size_t)slot * j->p->slot_floats);
  }
}

static void wino_gemm_chunk(void *arg, int64_t begin, int64_t end) {
  const wino_job *j = arg;
  for (int64_t t = begin; t < end; t++) {
    er_gemm_problem gp;
    memset(&gp, 0, sizeof gp);
    gp.isa = j->s->isa;
    gp.m = j->s->m;
    gp.n = j->w->tn;
    gp.k = j->s->c;
    gp.a.packed = j->s->u + (size_t)t * j->s->u_stride;
    gp.b.packed = j->w->v + (size_t)t * j->w->v_stride;
    gp.scale = 1.0f;
    gp.c = (float *)j->w->mo + (size_t)t * j->w->m_stride;
    gp.ldc = j->w->tn;
    er__sgemm_run(&gp, NULL, NULL, 1);
  }
}

static void wino_out_chunk(void *arg, int64_t begin, int64_t end) {
  const wino_job *j = arg;
  (j->s->tile == 4 ? j->s->ops->wino4_output : j->s->ops->wino_output)(j->w, begin, end);
}

/* The GEMM's view of weights packed by wino_lazy: pixel-major when the
 * output channels fill whole panels (small maps have few pixels). */
static void wino_gemm_view(const wino_state *s, float *packed, conv_state *cs) {
  cs->pixel_major = s->m % s->isa->nr == 0;
  cs->packed_w = packed;
  cs->gstride = ((cs->pixel_major ? er__sgemm_packed_b_floats(s->isa, s->c * 9, s->m)
                                  : er__sgemm_packed_a_floats(s->isa, s->m, s->c * 9)) + 15) / 16 * 16;
  cs->m = s->m;
  cs->kg = s->c * 9;
  cs->group = 1;
}

/* F(2x2)'s U (tile 2) or the GEMM's packed weights (tile 0), built by the
 * first run that needs them; NULL when out of memory. Runs that race to
 * build them each build a copy and publish it with a compare-and-swap; the
 * losers free theirs (no lock: this happens once per layer and size). */
static float *wino_lazy(const wino_state *cs, int tile, const float *wd) {
  wino_state *s = (wino_state *)cs;  /* only the atomic members change */
  _Atomic(float *) *slot = tile == 2 ? &s->u2 : &s->gemm_w;
  float *p = atomic_load_explicit(slot, memory_order_acquire);
  if (p || !wd) return p;
  if (tile == 2) {
    size_t stride;
    p = wino_make_u(s->isa, s->ops, wd, s->m, s->c, 2, &stride);
  } else {
    conv_state tmp = *s->gemm;
    wino_gemm_view(s, NULL, &tmp);
    if (er__kconv_conv_pack_weights(&tmp, s->isa, wd, 1, s->m, s->c * 9)) p = tmp.packed_w;
  }
  if (!p) return NULL;
  float *expected = NULL;
  if (!atomic_compare_exchange_strong_explicit(slot, &expected, p, memory_order_acq_rel, memory_order_acquire)) {
    er__aligned_free(p);
    p = expected;
  }
  return p;
}

er_status er__kconv_wino_run(const er_kernel_run *kr) {
  const wino_state *s = kr->state;
  er_kctx *ctx = kr->ctx;
  const er_tensor *x = ctx->in[0], *w = ctx->in[1], *b = er__in(ctx, 2), *z = er__in(ctx, 3);
  er_tensor *y = ctx->out[0];
  er_window g;
  if (!er__window_get(ctx, x, w, y, &g) || g.c != s->c || g.m != s->m || g.kh != 3 || g.kw != 3 || g.sh != 1 ||
      g.sw != 1 || g.dh != 1 || g.dw != 1 || g.group != 1)
    return er__kr_reference(kr);
  if (er__tensor_count(y) == 0) return ER_STATUS_OK;
  if (s->gemm && !wino_worth(g.oh, g.ow, s->tile)) {
    /* The size was unknown at load and F(4x4) does not pay at this one:
     * F(2x2) where it does, else the GEMM (F(4x4) after all if memory
     * for their weights runs out: slower, never wrong). */
    if (wino_worth(g.oh, g.ow, 2)) {
      float *u2 = wino_lazy(s, 2, kr->ctx->in[1]->data);
      if (u2) {
        wino_state s2 = *s;
        s2.tile = 2;
        s2.mats = 16;
        s2.u = u2;
        s2.gemm = NULL;
        er_kernel_run wkr = *kr;
        wkr.state = &s2;
        return er__kconv_wino_run(&wkr);
      }
    } else {
      float *pw = wino_lazy(s, 0, kr->ctx->in[1]->data);
      if (pw) {
        conv_state cs = *s->gemm;
        wino_gemm_view(s, pw, &cs);
        er_kernel_run gkr = *kr;
        gkr.state = &cs;
        return er__kconv_conv_gemm_run(&gkr);
      }
    }
  }
  int workers = er__pool_threads(kr->pool);
  if (workers > ER_KERNEL_MAX_SLOTS) workers = ER_KERNEL_MAX_SLOTS;
  wino_plan p;
  wino_plan_make(s, &g, workers, &p);
  void *scratch = NULL, *owned = NULL;
  int slots = 1;
  /* One allocation for V, M and every worker's rows: ask for it as one slot. */
  ER_CHECK(er__kr_scratch(kr, p.total_floats * sizeof(float), &scratch, &slots, &owned));
  float *v = scratch, *mo = v + (size_t)s->mats * p.v_stride, *rows = mo + (size_t)s->mats * p.m_stride;
  for (int64_t n = 0; n < g.n; n++) {
    for (int64_t t0 = 0; t0 < p.tiles; t0 += p.chunk) {
      er_wino wj;
      memset(&wj, 0, sizeof wj);
      wj.x = (const float *)x->data + n * g.c * g.h * g.w;
      wj.c = g.c, wj.h = g.h, wj.w = g.w, wj.oh = g.oh, wj.ow = g.ow, wj.pt = g.pt, wj.pl = g.pl;
      wj.tw = p.tw;
      wj.t0 = t0;
      wj.tn = p.tiles - t0 < p.chunk ? p.tiles - t0 : p.chunk;
      wj.chunk = p.chunk;
      wj.v = v;
      wj.nr = s->isa->nr;
      wj.v_stride = p.v_stride;
      wj.mo = mo;
      wj.m_stride = (size_t)(g.m * wj.tn);
      wj.m = g.m;
      wj.y = (float *)y->data + n * g.m * g.oh * g.ow;
      wj.bias = b ? b->data : NULL;
      wj.add = z ? (const float *)z->data + n * g.m * g.oh * g.ow : NULL;
      wj.act = s->act;
      /* The last panel's columns past the chunk's tiles: zeros. */
      int64_t nr = s->isa->nr, tail = wj.tn % nr;
      if (tail)
        for (int t = 0; t < s->mats; t++)
          for (int64_t c = 0; c < g.c; c++)
            memset(v + (size_t)t * p.v_stride + (size_t)(((wj.tn / nr) * g.c + c) * nr + tail), 0,
                   (size_t)(nr - tail) * sizeof(float));
      int64_t work = g.c * wj.tn;
      /* The plan has a rows slot for every thread of the pool: several
       * chunks per thread (see sgemm.c). */
      bool per_thread = workers > 1 && workers == er__pool_threads(kr->pool);
      int in_chunks = (int)min64(min64(per_thread ? 4 * (int64_t)workers : workers, g.c), max64(1, work >> 8));
      wino_job jin = {s, &wj, &p, rows, g.c, in_chunks, per_thread};
      er__parallel_for(kr->pool, in_chunks, 1, wino_in_chunk, &jin);
      wino_job jg = {s, &wj, &p, rows, s->mats, s->mats, false};
      er__parallel_for(kr->pool, s->mats, 1, wino_gemm_chunk, &jg);
      er__parallel_for(kr->pool, g.m, max64(1, 256 / max64(1, wj.tn)), wino_out_chunk, &jg);
    }
  }
  er__aligned_free(owned);
  return ER_STATUS_OK;
}
