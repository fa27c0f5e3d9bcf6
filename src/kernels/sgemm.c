/* sgemm.c - the float32 GEMM driver: packing, cache blocking and the split
 * over threads (see sgemm.h). Plain C; the ISA files supply the tiles. */
#include "kernels/sgemm.h"

/* Below this many multiply-adds per worker a split costs more in wake-ups
 * than it saves. */
#define SGEMM_MIN_MACS_PER_WORKER (INT64_C(1) << 16)
#ifndef SGEMM_CHUNKS_PER_THREAD
#define SGEMM_CHUNKS_PER_THREAD 4
#endif

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

const er_sgemm_isa *er__sgemm_best(const er_cpu_features *cpu) {
#if defined(__x86_64__) || defined(__i386__)
  if (cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512dq) return &er__sgemm_avx512;
  if (cpu->avx2 && cpu->fma) return &er__sgemm_avx2;
#elif defined(__aarch64__)
  if (cpu->neon) return &er__sgemm_neon;
#endif
  ER_UNUSED(cpu);
  return NULL;
}

/* ======================================================================== */
/* Packing                                                                   */
/* ======================================================================== */

/* A's rows [i0, i0 + mc) and columns [k0, k0 + kc) as panels [p][kc][MR]
 * of h <= MR rows each (the rest of a panel's MR lanes zero), times
 * scale; rows past m are zero. */
static void pack_a_block(const er_sgemm_isa *isa, int h, const float *a, int64_t rs, int64_t cs, int64_t m,
                         int64_t i0, int64_t mc, int64_t k0, int64_t kc, float scale, float *dst) {
  const int mr = isa->mr;
  for (int64_t p = 0; p < mc; p += h) {
    int rows = (int)min64(h, m - (i0 + p));
    if (rows < 0) rows = 0;
    if (isa->pack_a && cs == 1 && rs != 1 && scale == 1.0f && rows > 0) {
      /* Row-major: the ISA's transposing copy. */
      isa->pack_a(a + (i0 + p) * rs + k0, rs, rows, kc, dst);
      dst += kc * mr;
      continue;
    }
    if (rs == 1 && scale == 1.0f && rows > 0) {
      /* A column-major view (a transposed operand, a pixel-major patch
       * matrix): the panel's rows are contiguous for each k. */
      const float *src = a + (i0 + p) + k0 * cs;
      for (int64_t k = 0; k < kc; k++) {
        memcpy(dst + k * mr, src + k * cs, (size_t)rows * sizeof *dst);
        for (int r = rows; r < mr; r++) dst[k * mr + r] = 0.0f;
      }
      dst += kc * mr;
      continue;
    }
    for (int r = 0; r < rows; r++) {
      const float *src = a + (i0 + p + r) * rs + k0 * cs;
      float *d = dst + r;
      if (cs == 1) {
        if (scale == 1.0f)
          for (int64_t k = 0; k < kc; k++) d[k * mr] = src[k];
        else
          for (int64_t k = 0; k < kc; k++) d[k * mr] = scale * src[k];
      } else {
        for (int64_t k = 0; k < kc; k++) d[k * mr] = scale * src[k * cs];
      }
    }
    for (int r = rows; r < mr; r++)
      for (int64_t k = 0; k < kc; k++) dst[k * mr + r] = 0.0f;
    dst += kc * mr;
  }
}

void er__sgemm_pack_b_block(int nr, const float *b, int64_t rs, int64_t cs, int64_t n, int64_t k0,
                            int64_t kc, int64_t j0, int64_t nc, float *dst) {
  for (int64_t q = 0; q < nc; q += nr) {
    int64_t j = j0 + q;
    int cols = (int)min64(nr, n - j);
    if (cols < 0) cols = 0;
    if (cs == 1) {
      for (int64_t k = 0; k < kc; k++) {
        float *d = dst + k * nr;
        memcpy(d, b + (k0 + k) * rs + j, (size_t)cols * sizeof *d);
        for (int c = cols; c < nr; c++) d[c] = 0.0f;
      }
    } else {
      /* Transposed B (Gemm transB): walk each column along k. */
      for (int c = 0; c < cols; c++) {
        const float *src = b + (j + c) * cs + k0 * rs;
        for (int64_t k = 0; k < kc; k++) dst[k * nr + c] = src[k * rs];
      }
      for (int64_t k = 0; k < kc; k++)
        for (int c = cols; c < nr; c++) dst[k * nr + c] = 0.0f;
    }
    dst += kc * nr;
  }
}

size_t er__sgemm_packed_a_floats(const er_sgemm_isa *isa, int64_t m, int64_t k) {
  return (size_t)(round_up(m > 0 ? m : 1, isa->mr) * (k > 0 ? k : 1));
}

size_t er__sgemm_packed_b_floats(const er_sgemm_isa *isa, int64_t k, int64_t n) {
  return (size_t)(round_up(n > 0 ? n : 1, isa->nr) * (k > 0 ? k : 1));
}

void er__sgemm_pack_a(const er_sgemm_isa *isa, const float *a, int64_t rs, int64_t cs, int64_t m,
                      int64_t k, float scale, float *dst) {
  pack_a_block(isa, isa->mr, a, rs, cs, m, 0, round_up(m, isa->mr), 0, k, scale, dst);
}

void er__sgemm_pack_b(const er_sgemm_isa *isa, const float *b, int64_t rs, int64_t cs, int64_t k,
                      int64_t n, float *dst) {
  er__sgemm_pack_b_block(isa->nr, b, rs, cs, n, 0, k, 0, round_up(n, isa->nr), dst);
}

/* ======================================================================== */
/* Blocking                                                                  */
/* ======================================================================== */

static int64_t block_nc(const er_gemm_problem *p) {
  return min64(p->isa->nc, round_up(p->n > 0 ? p->n : 1, p->isa->nr));
}
static int64_t block_mc(const er_gemm_problem *p) {
  return min64(p->isa->mc, round_up(p->m > 0 ? p->m : 1, p->isa->mr));
}
static int64_t block_kc(const er_gemm_problem *p) {
  return min64(p->isa->kc, p->k > 0 ? p->k : 1);
}

size_t er__sgemm_scratch_floats(const er_gemm_problem *p) {
  size_t n = 0;
  if (!p->b.packed) n += (size_t)(block_kc(p) * block_nc(p));
  if (!p->a.packed) n += (size_t)(block_kc(p) * block_mc(p));
  /* Keep every slot 64-byte aligned. */
  return (n + 15) / 16 * 16;
}

/* Rows per tile for a block of `rows` rows: as many tiles as MR-row tiles
 * would take, of as equal heights as they allow. A tile of one row keeps
 * two accumulators on AVX2 and waits on the FMA latency at a quarter of
 * the rate: ddddocr's 25-row Gemm (25 x 1024 by 1024 x 8210) ran as
 * 6 + 6 + 6 + 6 + 1 rows, now 5 x 5. Panels stay MR lanes apart, so no
 * more than the MR-row panels' scratch is used. */
static int tile_height(int mr, int64_t rows) {
  if (rows <= 0) return mr;
  int64_t tiles = (rows + mr - 1) / mr;
  return (int)((rows + tiles - 1) / tiles);
}

/* Rows and bytes up to which a block of A is kept whole while each B
 * panel passes over all of it (sgemm_part). The generated transformer's
 * attention products (128 rows, k = 64) ran about 1% slower that way, so
 * blocks of more rows keep the other order. */
#define SGEMM_SMALL_A_ROWS 32
#define SGEMM_SMALL_A_BYTES (32 * 1024)

/* Column panels of B up to which a row-major A is not packed: the tile
 * broadcasts its elements from the rows as they are. The packing (a
 * transpose into MR-wide panels) was a third of the time of [3136, 160] x
 * [160, 32] (ConvNeXt's MLP projections back to the channels): 0.47 ->
 * 0.32 ms on Zen 4, [3136, 160] x [160, 128] 1.38 -> 1.26 ms; at 32
 * panels ([512, 256] x [256, 1024]) neither way is ahead. Rows whose
 * stride is a multiple of 2 KiB fall into one or two L1 sets (14 rows, 8
 * ways), so those are packed: [2048, 1024] x [1024, 64] read directly went
 * 3.56 -> 4.59 ms. */
#ifndef SGEMM_DIRECT_A_PANELS
#define SGEMM_DIRECT_A_PANELS 8
#endif
#define SGEMM_DIRECT_A_ALIAS_BYTES 2048

/* The tile at rows i (A panel pa of h rows) and columns j (B panel pb). */
static inline void sgemm_tile(const er_gemm_problem *p, er_gemm_tile *t, const float *ap, int64_t a_panel,
                              const float *bp, int64_t b_panel, int64_t i, int64_t pa, int h, int64_t j,
                              int64_t pb) {
  const er_gemm_epilogue *e = &p->epi;
  t->a = ap + pa * a_panel;
  t->mr = (int)min64(h, p->m - i);
  t->b = bp + pb * b_panel;
  t->nr = (int)min64(p->isa->nr, p->n - j);
  t->c = p->c_trans ? p->c + j * p->ldc + i : p->c + i * p->ldc + j;
  t->add = e->add && !t->load_c ? e->add + i * e->add_rs + j * e->add_cs : NULL;
  t->bias = e->bias && t->finish ? e->bias + (e->bias_rows ? i : j) : NULL;
  p->isa->tile(t);
}

/* Computes rows [m0, m1) x columns [n0, n1) of the problem (both aligned
 * to the tile) with the given scratch. */
static void sgemm_part(const er_gemm_problem *p, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                       float *scratch) {
  const er_sgemm_isa *isa = p->isa;
  const int mr = isa->mr, nr = isa->nr;
  const int64_t K = p->k, KC = block_kc(p), NC = block_nc(p), MC = block_mc(p);
  /* No scratch at all when both operands are prepacked (no offsets from
   * a null pointer, not even zero ones). */
  float *bbuf = scratch, *abuf = scratch && !p->b.packed ? scratch + KC * NC : scratch;
  const er_gemm_epilogue *e = &p->epi;
  er_gemm_tile t;
  memset(&t, 0, sizeof t);
  t.act = &e->act;
  t.beta = e->beta;
  t.add_cs = e->add_cs;
  t.add_rs = e->add_rs;
  t.bias_rows = e->bias_rows;
  t.ldc = p->ldc;
  t.c_trans = p->c_trans;
  for (int64_t j0 = n0; j0 < n1; j0 += NC) {
    int64_t nc = min64(NC, n1 - j0);
    for (int64_t k0 = 0; k0 < K || (K == 0 && k0 == 0); k0 += KC) {
      int64_t kc = min64(KC, K - k0);
      if (kc < 0) kc = 0;
      const float *bp;
      int64_t b_panel;  /* floats between consecutive B panels */
      if (p->b.packed) {
        bp = p->b.packed + j0 * K + k0 * nr;
        b_panel = nr * K;
      } else {
        if (p->b.pack) p->b.pack(p->b.pack_ctx, k0, kc, j0, nc, bbuf);
        else er__sgemm_pack_b_block(nr, p->b.data, p->b.rs, p->b.cs, p->n, k0, kc, j0, nc, bbuf);
        bp = bbuf;
        b_panel = nr * kc;
      }
      /* A row-major A whose block meets few B panels is read where it
       * is (SGEMM_DIRECT_A_PANELS). */
      const bool direct_a = !p->a.packed && !p->a.pack && p->a.cs == 1 && p->a.rs > 1 && p->scale == 1.0f &&
                            nc <= SGEMM_DIRECT_A_PANELS * nr &&
                            (p->a.rs * (int64_t)sizeof(float)) % SGEMM_DIRECT_A_ALIAS_BYTES != 0;
      t.a_rs = direct_a ? p->a.rs : 0;
      t.kc = kc;
      t.load_c = k0 > 0;
      t.finish = k0 + kc >= K;
      for (int64_t i0 = m0; i0 < m1; i0 += MC) {
        int64_t mc = min64(MC, m1 - i0);
        const float *ap;
        int64_t a_panel;
        int h = mr; /* rows per tile */
        if (p->a.packed) {
          ap = p->a.packed + i0 * K + k0 * mr;
          a_panel = mr * K;
        } else if (direct_a) {
          h = tile_height(mr, min64(mc, p->m - i0));
          ap = p->a.data + i0 * p->a.rs + k0;
          a_panel = h * p->a.rs;
        } else {
          if (p->a.pack) {
            p->a.pack(p->a.pack_ctx, k0, kc, i0, round_up(mc, mr), abuf);
          } else {
            h = tile_height(mr, min64(mc, p->m - i0));
            pack_a_block(isa, h, p->a.data, p->a.rs, p->a.cs, p->m, i0, mc, k0, kc, p->scale, abuf);
          }
          ap = abuf;
          a_panel = mr * kc;
        }
        /* A block of a few rows (SGEMM_SMALL_A_*): each B panel
         * stays in L1 while every A panel passes over it, so B streams
         * once (ddddocr's 25-row Gemm over 8210 columns, and a 25 x 1024
         * by 1024 x 1024 one, 4-7% faster than re-reading the block of B
         * from L2 per A panel). Else the A panel (MR x kc) stays in L1
         * while the B panels of the block stream past it from L2. */
        if (mc <= SGEMM_SMALL_A_ROWS && mc * kc * (int64_t)sizeof(float) <= SGEMM_SMALL_A_BYTES) {
          for (int64_t jr = 0; jr < nc; jr += nr)
            for (int64_t ir = 0; ir < mc; ir += h) sgemm_tile(p, &t, ap, a_panel, bp, b_panel, i0 + ir, ir / h,
                                                              h, j0 + jr, jr / nr);
        } else {
          for (int64_t ir = 0; ir < mc; ir += h)
            for (int64_t jr = 0; jr < nc; jr += nr) sgemm_tile(p, &t, ap, a_panel, bp, b_panel, i0 + ir, ir / h,
                                                               h, j0 + jr, jr / nr);
        }
      }
    }
  }
}

/* ======================================================================== */
/* Splitting over workers                                                    */
/* ======================================================================== */

typedef struct split {
  int chunks;
  bool along_n;          /* chunks split the columns (else the rows) */
  int64_t panels;        /* tiles along the split dimension */
} split;

/* The largest of `chunks` chunks of `panels` tiles of `tile` elements
 * (chunk c takes tiles [panels * c / chunks, panels * (c + 1) / chunks),
 * as run_chunks splits them) when the dimension has `total` elements: a
 * partial last tile counts only its elements when `exact` (rows: a tile
 * of R rows does R rows of work), else whole (columns: a partial panel
 * computes all NR). */
static int64_t largest_chunk(int64_t total, int64_t tile, int64_t panels, int64_t chunks, bool exact) {
  int64_t most = 0;
  for (int64_t c = 0; c < chunks; c++) {
    int64_t lo = panels * c / chunks * tile, hi = panels * (c + 1) / chunks * tile;
    if (exact && hi > total) hi = total;
    if (hi - lo > most) most = hi - lo;
  }
  return most;
}

/* Packing one float costs about this many multiply-adds of tile time
 * (a copy at a few floats per cycle against 32 multiply-adds per cycle). */
#define SGEMM_PACK_MACS 4

/* Chooses how many chunks and along which dimension: the one whose
 * largest chunk costs least, counting the rows a chunk really computes
 * (a 7x7 map is 49 pixel rows, tiles of 14, 14, 14 and 7: split in two
 * by rows that is 28 against 21, by columns exactly half), whole column
 * panels, and the packing each chunk does (an operand that is not
 * prepacked is packed by every chunk that needs its whole extent). */
static split choose_split(const er_gemm_problem *p, int workers) {
  split s = {1, true, 1};
  const int mr = p->isa->mr, nr = p->isa->nr;
  int64_t mp = (p->m + mr - 1) / mr, np = (p->n + nr - 1) / nr;
  int64_t k = p->k > 0 ? p->k : 1;
  int64_t macs = p->m * p->n * k;
  int64_t by_work = macs / SGEMM_MIN_MACS_PER_WORKER;
  int chunks = (int)min64(workers, by_work > 1 ? by_work : 1);
  if (chunks <= 1 || (mp <= 1 && np <= 1)) return s;
  int64_t cn = min64(chunks, np), cm = min64(chunks, mp);
  bool pack_a = !p->a.packed, pack_b = !p->b.packed;
  /* Along N: every chunk computes all rows for its panels and packs all
   * of A; along M: its rows against every panel, packing all of B. */
  int64_t cols_n = largest_chunk(p->n, nr, np, cn, false);
  int64_t rows_m = largest_chunk(p->m, mr, mp, cm, true);
  int64_t work_n = (p->m * cols_n + SGEMM_PACK_MACS * ((pack_a ? p->m : 0) + (pack_b ? cols_n : 0))) * k;
  int64_t work_m = (rows_m * np * nr + SGEMM_PACK_MACS * ((pack_a ? rows_m : 0) + (pack_b ? p->n : 0))) * k;
  bool along_n;
  if (work_n < work_m) along_n = true;
  else if (work_m < work_n) along_n = false;
  else along_n = np >= mp;
  s.along_n = along_n;
  s.panels = along_n ? np : mp;
  s.chunks = (int)(along_n ? cn : cm);
  return s;
}

typedef struct run_args {
  const er_gemm_problem *p;
  split s;
  float *scratch;
  size_t slot_floats;
  bool per_thread;     /* scratch slot per thread (er__pool_slot), else per chunk */
} run_args;

static void run_chunks(void *arg, int64_t begin, int64_t end) {
  const run_args *ra = arg;
  const er_gemm_problem *p = ra->p;
  for (int64_t c = begin; c < end; c++) {
    int64_t lo = ra->s.panels * c / ra->s.chunks, hi = ra->s.panels * (c + 1) / ra->s.chunks;
    int64_t slot = ra->per_thread ? er__pool_slot() : c;
    float *scratch = ra->scratch ? ra->scratch + (size_t)slot * ra->slot_floats : NULL;
    if (ra->s.along_n)
      sgemm_part(p, 0, p->m, lo * p->isa->nr, min64(hi * p->isa->nr, p->n), scratch);
    else
      sgemm_part(p, lo * p->isa->mr, min64(hi * p->isa->mr, p->m), 0, p->n, scratch);
  }
}

void er__sgemm_run(const er_gemm_problem *p, er_thread_pool *pool, float *scratch, int slots) {
  if (p->m <= 0 || p->n <= 0) return;
  int workers = er__pool_threads(pool);
  if (workers > slots) workers = slots;
  if (workers > ER_SGEMM_MAX_SLOTS) workers = ER_SGEMM_MAX_SLOTS;
  /* Several chunks per thread when every thread of the pool has a scratch
   * slot (indexed by er__pool_slot) and the finer split packs nothing
   * twice (the operand it does not split is prepacked). Note: the pool
   * (er__parallel_for) hands out at most one claim per thread, so today
   * these chunks run grouped, a thread's share at a time; letting the pool
   * hand them out singly cost MobileNetV2 at 2 threads ~7% on its best
   * runs and gained ~3% on ResNet-50 with a busy loop on one core (2026-12). */
  run_args ra = {p, choose_split(p, workers), scratch, er__sgemm_scratch_floats(p), false};
  if (workers > 1 && workers == er__pool_threads(pool)) {
    split fine = choose_split(p, SGEMM_CHUNKS_PER_THREAD * workers);
    if (fine.chunks > ra.s.chunks && (fine.along_n ? p->a.packed != NULL : p->b.packed != NULL)) {
      ra.s = fine;
      ra.per_thread = true;
    }
  }
  if (ra.s.chunks <= 1) {
    sgemm_part(p, 0, p->m, 0, p->n, scratch);
    return;
  }
  er__parallel_for(pool, ra.s.chunks, 1, run_chunks, &ra);
}

typedef struct batch_args {
  const er_gemm_problem *p;
  int64_t batch, a_bs, b_bs, c_bs, add_bs;
  float *scratch;
  size_t slot_floats;
  int chunks;
} batch_args;

static er_gemm_problem batch_item(const batch_args *ba, int64_t i) {
  er_gemm_problem q = *ba->p;
  if (q.a.packed) q.a.packed += i * ba->a_bs;
  else q.a.data += i * ba->a_bs;
  if (q.b.packed) q.b.packed += i * ba->b_bs;
  else q.b.data += i * ba->b_bs;
  q.c += i * ba->c_bs;
  if (q.epi.add) q.epi.add += i * ba->add_bs;
  return q;
}

static void run_batch_chunks(void *arg, int64_t begin, int64_t end) {
  const batch_args *ba = arg;
  for (int64_t c = begin; c < end; c++) {
    float *scratch = ba->scratch ? ba->scratch + (size_t)c * ba->slot_floats : NULL;
    for (int64_t i = ba->batch * c / ba->chunks; i < ba->batch * (c + 1) / ba->chunks; i++) {
      er_gemm_problem q = batch_item(ba, i);
      sgemm_part(&q, 0, q.m, 0, q.n, scratch);
    }
  }
}

void er__sgemm_run_batch(const er_gemm_problem *p, int64_t batch, int64_t a_bs, int64_t b_bs,
                         int64_t c_bs, int64_t add_bs, er_thread_pool *pool, float *scratch,
                         int slots) {
  if (p->m <= 0 || p->n <= 0 || batch <= 0) return;
  int workers = er__pool_threads(pool);
  if (workers > slots) workers = slots;
  if (workers > ER_SGEMM_MAX_SLOTS) workers = ER_SGEMM_MAX_SLOTS;
  batch_args ba = {p, batch, a_bs, b_bs, c_bs, add_bs, scratch, er__sgemm_scratch_floats(p), 1};
  int64_t macs = batch * p->m * p->n * (p->k > 0 ? p->k : 1);
  if (batch >= workers && workers > 1 && macs / workers >= SGEMM_MIN_MACS_PER_WORKER) {
    ba.chunks = workers;
    er__parallel_for(pool, workers, 1, run_batch_chunks, &ba);
    return;
  }
  for (int64_t i = 0; i < batch; i++) {
    er_gemm_problem q = batch_item(&ba, i);
    er__sgemm_run(&q, pool, scratch, slots);
  }
}
