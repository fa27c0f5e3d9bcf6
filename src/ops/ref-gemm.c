/* ref-gemm.c - the reference matrix products that the ops' reference
 * kernels share (MatMul, Gemm, Conv, ConvTranspose): one plain C
 * implementation, written only so that compilers vectorize it. The
 * optimized kernels (src/kernels/) are tested against the ops that run
 * it. */
#include <string.h>

#include "ops/op.h"

/* The matrix product in i-k-j order: for each row of A, each k scales a row
 * of B into a row of C. The innermost loop runs along contiguous rows, four
 * rows of C share every load of B, and the loop body works in fixed chunks
 * of 8 so that compilers vectorize it at -O2 (GCC's cheap cost model skips
 * loops of unknown trip count). Columns go in panels of GEMM_NC and k in
 * blocks of GEMM_KC so the piece of B being reused stays in cache. Each k
 * block sums into a zeroed tile that is then added to C: short running sums
 * make float32 accumulation 3-5x more accurate (RMS error against a double
 * reference) than one long one, at no cost in speed.
 *
 * C[M,N] (row stride ldc) += A[M,K] * B[K,N] (row stride ldb), where A's
 * element (m,k) is A[m*sam + k*sak], so a transposed A costs nothing.
 *
 * er__ref_dot_<T> is the other shape of product, for a B whose rows along
 * k are contiguous (Gemm's transB, matrix-vector): eight partial sums, so
 * the compiler can vectorize without reassociating. */
#define GEMM_NC 256
#define GEMM_KC 64

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
  void er__ref_gemm_##SFX(int64_t M, int64_t N, int64_t K, const T *A, int64_t sam, int64_t sak, \
                         const T *B, int64_t ldb, T *C, int64_t ldc) {                          \
    T tile[4 * GEMM_NC];                                                                        \
    for (int64_t n0 = 0; n0 < N; n0 += GEMM_NC) {                                               \
      int64_t nn = N - n0 < GEMM_NC ? N - n0 : GEMM_NC;                                         \
      for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {                                             \
        int64_t k1 = K - k0 < GEMM_KC ? K : k0 + GEMM_KC;                                       \
        for (int64_t m = 0; m < M; m += 4) {                                                    \
          int64_t rows = M - m < 4 ? M - m : 4;                                                 \
          memset(tile, 0, (size_t)(rows * nn) * sizeof *tile);                                  \
          for (int64_t k = k0; k < k1; k++) {                                                   \
            const T *a = A + m * sam + k * sak, *b = B + k * ldb + n0;                          \
            if (rows == 4)                                                                      \
              axpy4_##SFX(nn, a[0], a[sam], a[2 * sam], a[3 * sam], b, tile, tile + nn,         \
                          tile + 2 * nn, tile + 3 * nn);                                        \
            else                                                                                \
              for (int64_t i = 0; i < rows; i++) axpy1_##SFX(nn, a[i * sam], b, tile + i * nn); \
          }                                                                                     \
          for (int64_t i = 0; i < rows; i++)                                                    \
            axpy1_##SFX(nn, 1, tile + i * nn, C + (m + i) * ldc + n0);                          \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  T er__ref_dot_##SFX(int64_t n, const T *restrict a, const T *restrict b) {                     \
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
