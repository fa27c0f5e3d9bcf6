/* sgemm-impl.h - the SGEMM tile (microkernel) written once over simd.h,
 * instantiated per ISA by sgemm-<isa>.c, which defines MR (tile rows) and
 * NV (vectors per tile row; NR = NV * VN columns) before including it.
 *
 * Per k step the tile loads NV vectors of the packed B row, broadcasts MR
 * values of the packed A column and issues MR * NV FMAs into accumulators
 * that live in registers (MR * NV + NV + 1 of them must fit the register
 * file: 12 x 2 + 3 = 27 of AVX-512's 32, 6 x 2 + 3 = 15 of AVX2's 16).
 * One copy of the loop is compiled per row count 1..MR so that partial
 * tiles at the bottom edge (and GEMV-shaped products with M = 1) do no
 * wasted work. */
#ifndef MR
#error "define MR and NV before including sgemm-impl.h"
#endif

#define NR (NV * VN)

/* The tile prefetches its B panel this many k rows ahead (4 KiB at
 * AVX-512's 32 columns). A prepacked B that comes from memory, not cache
 * (ddddocr's 1024 x 8210 classifier, 33 MB, read once per run after the
 * LSTM has evicted it), otherwise stalls the first row panel of every
 * block: the hardware prefetchers restart at each 4 KiB page. Measured on
 * Zen 4: that Gemm 6.3 -> 4.5 ms, ResNet-50 -6 to -9%, the cached
 * 256 x 1024 x 1024 product unchanged (8 and 16 rows ahead gained less, 64
 * no more). Prefetches never fault, so reading past the panel's end is
 * harmless. */
#ifndef SGEMM_PF_ROWS
#define SGEMM_PF_ROWS 32
#endif
#ifndef SGEMM_PF_ROWS_FEW
#define SGEMM_PF_ROWS_FEW 96
#endif

/* Adds, scales, biases, activates and stores an accumulated tile that went
 * through memory: the general path (partial columns, first and last
 * k-blocks). */
/* Rows of the memory tile: at least VN, so that the strided column loads
 * of the transposed epilogue stay inside it. */
#define TILE_ROWS (MR > VN ? MR : VN)

/* The same for a transposed C: one column of the tile is a contiguous run
 * of mr floats in C, read from the tile with a strided (gather) load. */
static void tile_epilogue_trans(const er_gemm_tile *t, const float *acc /* [TILE_ROWS][NR] */) {
  const vf beta = v_set(t->beta);
  for (int j = 0; j < t->nr; j++) {
    float *c = t->c + j * t->ldc;
    for (int r0 = 0; r0 < t->mr; r0 += VN) {
      int n = t->mr - r0 >= VN ? VN : t->mr - r0;
      vf x = v_ld_stride(acc + r0 * NR + j, NR);
      if (t->load_c) {
        x = v_add(x, v_ld_n(c + r0, n));
      } else if (t->add) {
        const float *ad = t->add + j * t->add_cs + r0 * t->add_rs;
        vf d;
        if (t->add_rs == 1) {
          d = v_ld_n(ad, n);
        } else {
          float tmp[VN] = {0};
          for (int i = 0; i < n; i++) tmp[i] = ad[i * t->add_rs];
          d = v_ld(tmp);
        }
        x = v_fma(beta, d, x);
      }
      if (t->finish) {
        if (t->bias) x = v_add(x, t->bias_rows ? v_ld_n(t->bias + r0, n) : v_set(t->bias[j]));
        x = v_act(x, t->act);
      }
      v_st_n(c + r0, x, n);
    }
  }
}

/* The activation over an mr x nr block of C (row stride ldc), chosen once
 * for the block: v_act's switch per vector, not inlined, cost magika's
 * GELU-fused MatMul 3% of the model's time. */
#define ACT_ROWS(EXPR)                                                     \
  for (int r = 0; r < mr; r++) {                                           \
    float *row = c + r * ldc;                                              \
    for (int col = 0; col < nr; col += VN) {                               \
      int n = nr - col < VN ? nr - col : VN;                               \
      vf v = n == VN ? v_ld(row + col) : v_ld_n(row + col, n);             \
      v = (EXPR);                                                          \
      if (n == VN) v_st(row + col, v);                                     \
      else v_st_n(row + col, v, n);                                        \
    }                                                                      \
  }
static void act_rows(float *c, int64_t ldc, int mr, int nr, const er_activation *a) {
  switch (a->kind) {
    case ER_ACT_GELU_TANH: ACT_ROWS(v_gelu_tanh(v)); break;
    case ER_ACT_GELU: ACT_ROWS(v_gelu(v)); break;
    case ER_ACT_SIGMOID: ACT_ROWS(v_sigmoid(v)); break;
    case ER_ACT_TANH: ACT_ROWS(v_tanh(v)); break;
    case ER_ACT_SILU: ACT_ROWS(v_silu(v)); break;
    default: ACT_ROWS(v_act(v, a)); break;
  }
}
#undef ACT_ROWS

static void tile_epilogue(const er_gemm_tile *t, const float *acc /* [MR][NR] */) {
  const int mr = t->mr, nr = t->nr;
  if (t->c_trans) {
    tile_epilogue_trans(t, acc);
    return;
  }
  const vf beta = v_set(t->beta);
  for (int r = 0; r < mr; r++) {
    float *c = t->c + r * t->ldc;
    const float *add = t->add ? t->add + r * t->add_rs : NULL;
    for (int col = 0; col < nr; col += VN) {
      int n = nr - col;
      bool full = n >= VN;
      vf x = v_ld(acc + r * NR + col);
      if (t->load_c) {
        x = v_add(x, full ? v_ld(c + col) : v_ld_n(c + col, n));
      } else if (add) {
        vf d = t->add_cs == 0 ? v_set(add[0]) : full ? v_ld(add + col) : v_ld_n(add + col, n);
        x = v_fma(beta, d, x);
      }
      if (t->finish && t->bias)
        x = v_add(x, t->bias_rows ? v_set(t->bias[r]) : full ? v_ld(t->bias + col) : v_ld_n(t->bias + col, n));
      if (full) v_st(c + col, x);
      else v_st_n(c + col, x, n);
    }
  }
  if (t->finish && t->act->kind != ER_ACT_NONE) act_rows(t->c, t->ldc, mr, nr, t->act);
}

/* Activations cheap enough to apply while the tile is in registers (a
 * few vector operations, no table or division); the others go through
 * tile_epilogue's memory tile. HardSwish is MobileNetV3's and PP-LCNet's
 * (their 1x1 layers took the memory path). */
static inline bool register_act(er_act k) {
  return k == ER_ACT_NONE || k == ER_ACT_RELU || k == ER_ACT_CLIP || k == ER_ACT_HARDSWISH ||
         k == ER_ACT_LEAKYRELU;
}

static inline __attribute__((always_inline)) vf register_act_apply(vf x, const er_activation *a, vf lo, vf hi) {
  /* As v_act orders them (NaN handling). */
  switch (a->kind) {
    case ER_ACT_RELU: return v_max(v_zero(), x);
    case ER_ACT_CLIP: return v_min(hi, v_max(lo, x));
    case ER_ACT_HARDSWISH: return v_hardswish(x);
    case ER_ACT_LEAKYRELU: return v_act(x, a);
    default: return x;
  }
}

/* R rows of the tile; A packed or row-major; NVE of the NV vectors of
 * columns (the last panel of a product whose N leaves at most VN columns
 * there: N = 40 on the 32-column tile ran its 8-column panel at the cost
 * of a full one). Columns past NVE * VN are not computed; the tile stores
 * only t->nr <= NVE * VN of them. */
static inline __attribute__((always_inline)) void tile_rows(const er_gemm_tile *t, const int R, const bool rowmajor,
                                                            const int NVE) {
  vf acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      if (r < R) acc[r][v] = v_zero();
  const float *a = t->a, *b = t->b;
  const int64_t ars = rowmajor ? t->a_rs : 0;
  for (int64_t k = 0; k < t->kc; k++) {
    vf bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NR; v += 16) __builtin_prefetch(b + (R < 8 ? SGEMM_PF_ROWS_FEW : SGEMM_PF_ROWS) * NR + v, 0, 3);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      if (v < NVE) bv[v] = v_ld(b + v * VN);
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      if (r < R) {
        vf ar = v_set(rowmajor ? a[r * ars] : a[r]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
          if (v < NVE) acc[r][v] = v_fma(ar, bv[v], acc[r][v]);
      }
    }
    a += rowmajor ? 1 : MR;
    b += NR;
  }
  if (!t->finish && !t->add && t->nr == NR && !t->c_trans) {
    /* A middle k-block of a full-width tile: add to C in place. */
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      if (r < R) {
        float *c = t->c + r * t->ldc;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
          vf x = acc[r][v];
          if (t->load_c) x = v_add(x, v_ld(c + v * VN));
          v_st(c + v * VN, x);
        }
      }
    }
    return;
  }
  if (t->finish && t->nr == NR && !t->c_trans && register_act(t->act->kind)) {
    /* A full-width last block with a cheap activation: finish in
     * registers (the common convolution + bias + ReLU case). */
    const vf beta = v_set(t->beta), lo = v_set(t->act->p[0]), hi = v_set(t->act->p[1]);
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      if (r < R) {
        float *c = t->c + r * t->ldc;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
          vf x = acc[r][v];
          if (t->load_c) {
            x = v_add(x, v_ld(c + v * VN));
          } else if (t->add) {
            const float *ad = t->add + r * t->add_rs;
            x = v_fma(beta, t->add_cs ? v_ld(ad + v * VN) : v_set(ad[0]), x);
          }
          if (t->bias) x = v_add(x, t->bias_rows ? v_set(t->bias[r]) : v_ld(t->bias + v * VN));
          if (t->act->kind == ER_ACT_NONE) v_st(c + v * VN, x);
          else acc[r][v] = x;
        }
      }
    }
    if (t->act->kind == ER_ACT_NONE) return;
    /* The activation chosen once per tile, not per vector (as in the
     * blocked tiles: a switch per vector cost 1x1 layers with few input
     * channels a fifth of their time there). */
#define SG_ACT_MAP(EXPR)                                        \
  _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++)         \
  _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)          \
    if (r < R) {                                                \
      vf o = acc[r][v];                                         \
      acc[r][v] = (EXPR);                                       \
    }
    switch (t->act->kind) {
      case ER_ACT_RELU: SG_ACT_MAP(v_max(v_zero(), o)); break;
      case ER_ACT_CLIP: SG_ACT_MAP(v_min(hi, v_max(lo, o))); break;
      case ER_ACT_HARDSWISH: SG_ACT_MAP(v_hardswish(o)); break;
      case ER_ACT_LEAKYRELU: SG_ACT_MAP(v_act(o, t->act)); break;
      default: break;
    }
#undef SG_ACT_MAP
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      if (r < R) {
        float *c = t->c + r * t->ldc;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) v_st(c + v * VN, acc[r][v]);
      }
    }
    return;
  }
#if MR <= VN
  if (t->c_trans && t->nr == NR && !t->bias_rows && (!t->add || t->load_c || t->add_rs == 1) &&
      (!t->finish || register_act(t->act->kind))) {
    /* A full-width tile stored transposed (pixel-major convolutions):
     * VN x VN register transposes turn the rows of pixels into runs of
     * one channel, stored whole, instead of gathering each run from a
     * memory tile. */
    const vf beta = v_set(t->beta), lo = v_set(t->act->p[0]), hi = v_set(t->act->p[1]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      vf blk[VN];
#pragma GCC unroll 16
      for (int r = 0; r < VN; r++) blk[r] = r < MR && r < R ? acc[r][v] : v_zero();
      v_transpose(blk);
      for (int j = 0; j < VN; j++) {
        int64_t col = v * VN + j;
        float *c = t->c + col * t->ldc;
        vf x = blk[j];
        if (t->load_c) x = v_add(x, v_ld_n(c, R));
        else if (t->add) x = v_fma(beta, v_ld_n(t->add + col * t->add_cs, R), x);
        if (t->finish) {
          if (t->bias) x = v_add(x, v_set(t->bias[col]));
          x = register_act_apply(x, t->act, lo, hi);
        }
        v_st_n(c, x, R);
      }
    }
    return;
  }
#endif
  float tmp[TILE_ROWS * NR] __attribute__((aligned(64)));
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      if (r < R) v_st(tmp + r * NR + v * VN, acc[r][v]);
  tile_epilogue(t, tmp);
}

#if NV > 1
#define DEFINE_TILE_ROWS(R)                                                        \
  static void tile_##R(const er_gemm_tile *t) { tile_rows(t, R, false, NV); }      \
  static void tile_rm_##R(const er_gemm_tile *t) { tile_rows(t, R, true, NV); }    \
  static void tile_1v_##R(const er_gemm_tile *t) { tile_rows(t, R, false, 1); }    \
  static void tile_rm_1v_##R(const er_gemm_tile *t) { tile_rows(t, R, true, 1); }
#else
#define DEFINE_TILE_ROWS(R)                                                        \
  static void tile_##R(const er_gemm_tile *t) { tile_rows(t, R, false, NV); }      \
  static void tile_rm_##R(const er_gemm_tile *t) { tile_rows(t, R, true, NV); }
#endif
DEFINE_TILE_ROWS(1)
DEFINE_TILE_ROWS(2)
DEFINE_TILE_ROWS(3)
DEFINE_TILE_ROWS(4)
#if MR > 4
DEFINE_TILE_ROWS(5)
DEFINE_TILE_ROWS(6)
#endif
#if MR > 6
DEFINE_TILE_ROWS(7)
DEFINE_TILE_ROWS(8)
#endif
#if MR > 8
DEFINE_TILE_ROWS(9)
DEFINE_TILE_ROWS(10)
DEFINE_TILE_ROWS(11)
DEFINE_TILE_ROWS(12)
#endif
#if MR > 12
DEFINE_TILE_ROWS(13)
DEFINE_TILE_ROWS(14)
#endif
#if MR > 14
DEFINE_TILE_ROWS(15)
DEFINE_TILE_ROWS(16)
#endif
#if MR > 16 || MR % 2 != 0 || (MR != 4 && MR != 6 && MR != 8 && MR != 12 && MR != 14 && MR != 16)
#error "MR must be one of 4, 6, 8, 12, 14, 16"
#endif
#undef DEFINE_TILE_ROWS

/* The functions of one kind for 1..MR rows, indexed by rows. */
#define TILE_TABLE(P) P##1, P##2, P##3, P##4, TILE_TABLE_6(P) TILE_TABLE_8(P) TILE_TABLE_12(P) TILE_TABLE_14(P) TILE_TABLE_16(P)
#if MR > 4
#define TILE_TABLE_6(P) P##5, P##6,
#else
#define TILE_TABLE_6(P)
#endif
#if MR > 6
#define TILE_TABLE_8(P) P##7, P##8,
#else
#define TILE_TABLE_8(P)
#endif
#if MR > 8
#define TILE_TABLE_12(P) P##9, P##10, P##11, P##12,
#else
#define TILE_TABLE_12(P)
#endif
#if MR > 12
#define TILE_TABLE_14(P) P##13, P##14,
#else
#define TILE_TABLE_14(P)
#endif
#if MR > 14
#define TILE_TABLE_16(P) P##15, P##16,
#else
#define TILE_TABLE_16(P)
#endif

static void tile(const er_gemm_tile *t) {
  static void (*const by_rows[])(const er_gemm_tile *) = {NULL, TILE_TABLE(tile_)};
  static void (*const by_rows_rm[])(const er_gemm_tile *) = {NULL, TILE_TABLE(tile_rm_)};
#if NV > 1
  static void (*const by_rows_1v[])(const er_gemm_tile *) = {NULL, TILE_TABLE(tile_1v_)};
  static void (*const by_rows_rm_1v[])(const er_gemm_tile *) = {NULL, TILE_TABLE(tile_rm_1v_)};
  if (t->nr <= VN) {
    (t->a_rs ? by_rows_rm_1v : by_rows_1v)[t->mr](t);
    return;
  }
#endif
  (t->a_rs ? by_rows_rm : by_rows)[t->mr](t);
}
#undef TILE_TABLE
#undef TILE_TABLE_6
#undef TILE_TABLE_8
#undef TILE_TABLE_12
#undef TILE_TABLE_14
#undef TILE_TABLE_16

#if MR <= VN
/* One A panel [kc][MR] from `rows` <= MR rows of a row-major A (row
 * stride rs), lanes past `rows` zero: VN x VN blocks transposed in
 * registers (v_transpose), each k's MR floats stored as one vector whose
 * last VN - MR lanes spill into the next k's slot, written next; the
 * panel's last k stores exactly MR. The plain C copy wrote each float on
 * its own with a stride of MR (magika's [2048, 257] x [257, 64] MatMul
 * spent a quarter of its time there). */
static void pack_a_panel(const float *a, int64_t rs, int rows, int64_t kc, float *dst) {
  int64_t k = 0;
  for (; k + VN <= kc; k += VN) {
    vf t[VN];
    for (int i = 0; i < VN; i++) t[i] = i < rows ? v_ld(a + i * rs + k) : v_zero();
    v_transpose(t);
    for (int j = 0; j < VN; j++) {
      if (k + j == kc - 1) v_st_n(dst + (k + j) * MR, t[j], MR);
      else v_st(dst + (k + j) * MR, t[j]);
    }
  }
  for (; k < kc; k++)
    for (int i = 0; i < MR; i++) dst[k * MR + i] = i < rows ? a[i * rs + k] : 0.0f;
}
#define SGEMM_PACK_A pack_a_panel
#else
#define SGEMM_PACK_A NULL
#endif
