/* sgemm.h - the float32 matrix product every optimized MatMul, Gemm and
 * convolution kernel runs on: packed operands, cache blocking, register-
 * blocked microkernels per ISA, the epilogue (bias, addend, activation)
 * applied while a tile is still in registers, and threads over blocks of
 * the output.
 *
 *   C[M, N] = act(scale * A[M, K] B[K, N] + beta * D + bias)
 *
 * The driver (sgemm.c, plain C) walks the blocks the BLIS way: a block of
 * B (KC x NC) is packed into NR-wide micro-panels, a block of A (MC x KC)
 * into MR-high micro-panels, and the ISA's tile function multiplies one MR
 * x KC panel of A by one KC x NR panel of B into registers. Operands that
 * are constants (weights) are packed once, for the whole K, at compile
 * time ("prepacked"); any block of a prepacked operand is then a pointer
 * into it, because full-K panels hold every k-block contiguously.
 *
 * The sum over k is blocked the same way whatever the thread count or the
 * split, so results do not depend on either. */
#ifndef ER_KERNELS_SGEMM_H
#define ER_KERNELS_SGEMM_H

#include "kernels/kernel.h"
#include "ops/fused.h"

/* The largest microkernel tile any ISA uses (rows, columns). */
#define ER_SGEMM_MAX_MR 16
#define ER_SGEMM_MAX_NR 64

/* One call of a tile function: C[mr, nr] (row stride ldc) gets the product
 * of a packed A micro-panel [kc][MR] and a packed B micro-panel [kc][NR]. */
typedef struct er_gemm_tile {
  int64_t kc;
  const float *a;        /* [kc][MR], rows >= mr are zero padding; or, when
                            a_rs is set, row-major: element (r, k) at
                            a[r * a_rs + k], rows < mr only */
  int64_t a_rs;
  const float *b;        /* [kc][NR], columns >= nr are zero padding */
  float *c;              /* [mr, nr] at row stride ldc */
  int64_t ldc;
  int mr, nr;            /* valid rows (1..MR) and columns (1..NR) */
  bool load_c;           /* add onto C (a later k-block) instead of starting fresh */
  bool finish;           /* last k-block: add the bias and apply the activation */
  /* On the first k-block: the addend D, element (r, j) of the tile at
   * add[r * add_rs + j * add_cs] (add_cs is 0 or 1), scaled by beta. It
   * is read before C is written, element by element, so D may be C. */
  const float *add;
  int64_t add_rs, add_cs;
  float beta;
  /* On the last k-block: bias per row (bias[r]) or per column (bias[j]). */
  const float *bias;
  bool bias_rows;
  const er_activation *act;
  /* C is stored transposed: element (r, j) of the tile at c[j * ldc + r]
   * (a convolution computed pixel-major into an NCHW output). The addend
   * is read through add_rs / add_cs as given (any strides then). */
  bool c_trans;
} er_gemm_tile;

typedef void (*er_gemm_tile_fn)(const er_gemm_tile *t);

/* One ISA's microkernel and its block sizes. */
typedef struct er_sgemm_isa {
  const char *name;      /* "14x32__avx512" */
  int mr, nr;            /* tile rows and columns */
  int64_t mc, kc, nc;    /* block sizes: multiples of mr / any / multiples of nr */
  er_gemm_tile_fn tile;
  /* (optional) One A panel [kc][mr] from rows <= mr rows of a row-major A
   * (row stride rs, unit column stride, no scale), lanes past rows zero. */
  void (*pack_a)(const float *a, int64_t rs, int rows, int64_t kc, float *dst);
} er_sgemm_isa;

#if defined(__x86_64__) || defined(__i386__)
extern const er_sgemm_isa er__sgemm_avx512;
extern const er_sgemm_isa er__sgemm_avx512_16;  /* 16 x 16, for conv.c's narrow layers */
extern const er_sgemm_isa er__sgemm_avx2;
#endif
#if defined(__aarch64__)
extern const er_sgemm_isa er__sgemm_neon;
#endif

/* How the driver reads an operand. A's element (i, k) is
 * data[i * rs + k * cs]; B's element (k, j) is data[k * rs + j * cs].
 * When `packed` is set (full-K panels from er__sgemm_pack_a / _b) the data
 * view is not used. Either may instead come from `pack`, a callback that
 * writes B's block [k0, k0 + kc) x [j0, j0 + nc) as NR-wide panels
 * [q][kc][NR] with zero columns past N (for A: rows [j0, j0 + nc) as
 * MR-high panels [q][kc][MR], zero rows past M); convolution packs its
 * patches this way. A packed by callback does not get `scale`. */
typedef struct er_gemm_operand {
  const float *data;
  int64_t rs, cs;
  const float *packed;
  void (*pack)(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *dst);
  const void *pack_ctx;
} er_gemm_operand;

/* The epilogue, in matrix coordinates (offsets per tile are the driver's
 * business). */
typedef struct er_gemm_epilogue {
  const float *add;      /* D: element (i, j) at add[i * add_rs + j * add_cs]; NULL = none */
  int64_t add_rs, add_cs;
  float beta;
  const float *bias;     /* [M] when bias_rows, else [N]; NULL = none */
  bool bias_rows;
  er_activation act;
} er_gemm_epilogue;

typedef struct er_gemm_problem {
  const er_sgemm_isa *isa;
  int64_t m, n, k;
  er_gemm_operand a, b;
  float scale;           /* applied to A when it is packed at run time; a
                            prepacked A carries it already */
  float *c;              /* [M, N] at row stride ldc */
  int64_t ldc;
  bool c_trans;          /* C stored as [N, M] at row stride ldc instead */
  er_gemm_epilogue epi;
} er_gemm_problem;

/* Floats of a full-K prepacked A [M, K] / B [K, N]. */
size_t er__sgemm_packed_a_floats(const er_sgemm_isa *isa, int64_t m, int64_t k);
size_t er__sgemm_packed_b_floats(const er_sgemm_isa *isa, int64_t k, int64_t n);
/* Packs all of A (times scale) / all of B into full-K panels. */
void er__sgemm_pack_a(const er_sgemm_isa *isa, const float *a, int64_t rs, int64_t cs, int64_t m,
                      int64_t k, float scale, float *dst);
void er__sgemm_pack_b(const er_sgemm_isa *isa, const float *b, int64_t rs, int64_t cs, int64_t k,
                      int64_t n, float *dst);
/* Writes B's block [k0, k0 + kc) x [j0, j0 + nc) as panels [q][kc][NR]. */
void er__sgemm_pack_b_block(int nr, const float *b, int64_t rs, int64_t cs, int64_t n, int64_t k0,
                            int64_t kc, int64_t j0, int64_t nc, float *dst);

/* Scratch one worker needs for problems of this size (floats). */
size_t er__sgemm_scratch_floats(const er_gemm_problem *p);
/* How many workers the scratch layout allows at most. */
#define ER_SGEMM_MAX_SLOTS 16

/* Computes the problem on up to `slots` workers of the pool (NULL: the
 * caller alone); scratch holds slots * er__sgemm_scratch_floats() floats,
 * 64-byte aligned. */
void er__sgemm_run(const er_gemm_problem *p, er_thread_pool *pool, float *scratch, int slots);
/* The same over `batch` problems that differ only in where A, B, C and D
 * start (element strides between consecutive problems, 0 to reuse): runs
 * whole problems on each worker when there are enough of them, else each
 * problem across the workers. */
void er__sgemm_run_batch(const er_gemm_problem *p, int64_t batch, int64_t a_bs, int64_t b_bs,
                         int64_t c_bs, int64_t add_bs, er_thread_pool *pool, float *scratch,
                         int slots);

/* The best microkernel this CPU runs, or NULL when none. */
const er_sgemm_isa *er__sgemm_best(const er_cpu_features *cpu);

#endif /* ER_KERNELS_SGEMM_H */
