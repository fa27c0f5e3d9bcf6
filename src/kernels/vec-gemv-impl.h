/* vec-gemv-impl.h - few-row products with an unpacked B (vec_gemv),
 * written once over simd.h and vmath.h for every ISA; included by
 * vec-impl.h, which vec-<isa>.c compiles. */

/* ======================================================================== */
/* Few-row products with an unpacked B                                       */
/* ======================================================================== */

static inline vf gemv_finish(const er_gemv *g, int64_t i, int64_t j, vf x, int n) {
  x = v_mul(x, v_set(g->scale));
  if (g->add) {
    const float *ad = g->add + i * g->add_rs + j * g->add_cs;
    x = v_fma(v_set(g->beta), g->add_cs ? v_ld_n(ad, n) : v_set(ad[0]), x);
  }
  if (g->bias) x = v_add(x, v_ld_n(g->bias + j, n));
  return v_act(x, &g->act);
}

/* B row-major [K, N] (b_cs == 1): rows of B stream once; M rows of C x 2
 * vectors of columns accumulate in registers. M is a constant in each
 * instance so the accumulators stay in registers (with M read at run time
 * they lived on the stack, and every FMA waited on a store: a 1 x 1568 x 64
 * layer took 15 us); one row splits K over two accumulator sets to break
 * the FMA latency chain. */
/* Rows of B prefetched ahead by the multi-row loop: with 2-4 rows of A a
 * k step is long enough that the hardware prefetchers alone left the loads
 * of a 12.8 MB classifier waiting (3 to 4 rows: 28 GB/s against 50-60 for
 * one row). Prefetches never fault. */
#define GEMV_PF_ROWS 32
#define GEMV_LD0(p) (n0 == VN ? v_ld(p) : v_ld_n(p, n0))
#define GEMV_LD1(p) (n1 >= VN ? v_ld((p) + VN) : n1 > 0 ? v_ld_n((p) + VN, n1) : v_zero())
#define GEMV_ROWS_BODY(M, K2)                                                    \
  for (int64_t j = j0; j < j1; j += 2 * VN) {                                    \
    int n0 = j1 - j >= VN ? VN : (int)(j1 - j);                                  \
    int n1 = j1 - j - VN >= VN ? VN : (int)(j1 - j - VN);                        \
    vf acc[M][2], acc2[M][2];                                                    \
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) acc[i][0] = acc[i][1] = acc2[i][0] = acc2[i][1] = v_zero(); \
    const float *br = g->b + j;                                                  \
    int64_t k = 0;                                                               \
    if (K2)                                                                      \
      for (; k + 2 <= g->k; k += 2, br += 2 * g->b_rs) {                         \
        vf b0 = GEMV_LD0(br), b1 = GEMV_LD1(br);                                 \
        vf b2 = GEMV_LD0(br + g->b_rs), b3 = GEMV_LD1(br + g->b_rs);             \
        _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {                    \
          const float *ar = g->a + i * g->a_rs + k * g->a_cs;                    \
          vf av = v_set(ar[0]), aw = v_set(ar[g->a_cs]);                         \
          acc[i][0] = v_fma(av, b0, acc[i][0]);                                  \
          acc[i][1] = v_fma(av, b1, acc[i][1]);                                  \
          acc2[i][0] = v_fma(aw, b2, acc2[i][0]);                                \
          acc2[i][1] = v_fma(aw, b3, acc2[i][1]);                                \
        }                                                                        \
      }                                                                          \
    for (; k < g->k; k++, br += g->b_rs) {                                       \
      __builtin_prefetch(br + GEMV_PF_ROWS * g->b_rs, 0, 3);                     \
      __builtin_prefetch(br + GEMV_PF_ROWS * g->b_rs + VN, 0, 3);                \
      vf b0 = GEMV_LD0(br), b1 = GEMV_LD1(br);                                   \
      _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {                      \
        vf av = v_set(g->a[i * g->a_rs + k * g->a_cs]);                          \
        acc[i][0] = v_fma(av, b0, acc[i][0]);                                    \
        acc[i][1] = v_fma(av, b1, acc[i][1]);                                    \
      }                                                                          \
    }                                                                            \
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {                        \
      float *c = g->c + i * g->ldc + j;                                          \
      v_st_n(c, gemv_finish(g, i, j, v_add(acc[i][0], acc2[i][0]), n0), n0);     \
      if (n1 > 0) v_st_n(c + VN, gemv_finish(g, i, j + VN, v_add(acc[i][1], acc2[i][1]), n1), n1); \
    }                                                                            \
  }

static void gemv_rows1(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(1, 1) }
static void gemv_rows2(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(2, 0) }
static void gemv_rows3(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(3, 0) }
static void gemv_rows4(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(4, 0) }
#if VN == 16
/* 5-8 rows (ER_GEMV_ROWS_MAX_M_16): 2 x M accumulators, in registers
 * only with AVX-512's 32. */
static void gemv_rows5(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(5, 0) }
static void gemv_rows6(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(6, 0) }
static void gemv_rows7(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(7, 0) }
static void gemv_rows8(const er_gemv *g, int64_t j0, int64_t j1) { GEMV_ROWS_BODY(8, 0) }
#endif
#undef GEMV_ROWS_BODY
#undef GEMV_LD0
#undef GEMV_LD1
#undef GEMV_PF_ROWS

static void gemv_rows(const er_gemv *g, int64_t j0, int64_t j1) {
  switch (g->m) {
    case 1: gemv_rows1(g, j0, j1); break;
    case 2: gemv_rows2(g, j0, j1); break;
    case 3: gemv_rows3(g, j0, j1); break;
#if VN == 16
    case 4: gemv_rows4(g, j0, j1); break;
    case 5: gemv_rows5(g, j0, j1); break;
    case 6: gemv_rows6(g, j0, j1); break;
    case 7: gemv_rows7(g, j0, j1); break;
    default: gemv_rows8(g, j0, j1); break;
#else
    default: gemv_rows4(g, j0, j1); break;
#endif
  }
}

/* One column of gemv_dots for M rows of A (contiguous along K): M a
 * constant in each instance, so the accumulators stay in registers (a
 * run-time count kept them on the stack, a store per FMA). */
static inline __attribute__((always_inline)) void dots_col(const er_gemv *g, const float *br,
                                                           float (*out)[VN], int jj, const int M) {
  const int64_t k = g->k;
  vf acc[ER_GEMV_MAX_M];
#pragma GCC unroll 4
  for (int i = 0; i < M; i++) acc[i] = v_zero();
  int64_t q = 0;
  for (; q + VN <= k; q += VN) {
    vf bv = v_ld(br + q);
#pragma GCC unroll 4
    for (int i = 0; i < M; i++) acc[i] = v_fma(v_ld(g->a + i * g->a_rs + q), bv, acc[i]);
  }
  if (q < k) {
    int r = (int)(k - q);
    vf bv = v_ld_n(br + q, r);
#pragma GCC unroll 4
    for (int i = 0; i < M; i++) acc[i] = v_fma(v_ld_n(g->a + i * g->a_rs + q, r), bv, acc[i]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < M; i++) out[i][jj] = v_hsum(acc[i]);
}

/* B transposed, stored [N, K] (b_rs == 1): each column of C is a dot
 * product along a contiguous row of B, which is read once for all rows of
 * A. */
static void gemv_dots(const er_gemv *g, int64_t j0, int64_t j1) {
  const int64_t m = g->m, k = g->k;
  float out[ER_GEMV_MAX_M][VN];
  for (int64_t jb = j0; jb < j1; jb += VN) {
    int nj = j1 - jb >= VN ? VN : (int)(j1 - jb);
    int jj = 0;
    if (g->a_cs == 1 && m == 1)
      /* One row of A (a classifier at batch 1): four accumulators over
       * consecutive vectors of the row of B, which streams in order (one
       * chain was FMA-latency-bound: MobileNetV2's 1280 x 1000 classifier
       * took 281 us with its weights in cache, 96 us now; four rows of B
       * side by side were slower from DRAM). */
      for (; jj < nj; jj++) {
        const float *br = g->b + (jb + jj) * g->b_cs, *a = g->a;
        vf a0 = v_zero(), a1 = v_zero(), a2 = v_zero(), a3 = v_zero();
        int64_t q = 0;
        for (; q + 4 * VN <= k; q += 4 * VN) {
          a0 = v_fma(v_ld(a + q), v_ld(br + q), a0);
          a1 = v_fma(v_ld(a + q + VN), v_ld(br + q + VN), a1);
          a2 = v_fma(v_ld(a + q + 2 * VN), v_ld(br + q + 2 * VN), a2);
          a3 = v_fma(v_ld(a + q + 3 * VN), v_ld(br + q + 3 * VN), a3);
        }
        for (; q + VN <= k; q += VN) a0 = v_fma(v_ld(a + q), v_ld(br + q), a0);
        if (q < k) a1 = v_fma(v_ld_n(a + q, (int)(k - q)), v_ld_n(br + q, (int)(k - q)), a1);
        out[0][jj] = v_hsum(v_add(v_add(a0, a1), v_add(a2, a3)));
      }
    for (; jj < nj; jj++) {
      const float *br = g->b + (jb + jj) * g->b_cs;
      if (g->a_cs == 1) {
        switch (m) {
          case 1: dots_col(g, br, out, jj, 1); break;
          case 2: dots_col(g, br, out, jj, 2); break;
          case 3: dots_col(g, br, out, jj, 3); break;
          default: dots_col(g, br, out, jj, 4); break;
        }
      } else {
        int64_t q;
        for (int64_t i = 0; i < m; i++) {
          float sacc = 0.0f;
          for (q = 0; q < k; q++) sacc += g->a[i * g->a_rs + q * g->a_cs] * br[q];
          out[i][jj] = sacc;
        }
      }
    }
    for (int64_t i = 0; i < m; i++)
      v_st_n(g->c + i * g->ldc + jb, gemv_finish(g, i, jb, v_ld_n(out[i], nj), nj), nj);
  }
}

static void vec_gemv(const er_gemv *g, int64_t j0, int64_t j1) {
  if (g->b_cs == 1) gemv_rows(g, j0, j1);
  else gemv_dots(g, j0, j1);
}
