/* bench-sgemm.c - times the packed SGEMM (sgemm.h) on given shapes with
 * the weights (B) prepacked, as a MatMul/Gemm node runs it, and prints
 * GFLOP/s (median of repeated runs). Not a test: numbers depend on the
 * machine and its load.
 *
 *   bench-sgemm [--threads T] [--isa avx512|avx2] M K N [M K N ...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/sgemm.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int threads = 1, i = 1;
  const er_sgemm_isa *isa = er__sgemm_best(er__cpu_features());
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
      i++;
      isa = strcmp(argv[i], "avx2") == 0 ? &er__sgemm_avx2 : &er__sgemm_avx512;
    }
  }
  if (!isa) {
    fprintf(stderr, "no SGEMM microkernel for this CPU\n");
    return 1;
  }
  er_thread_pool *pool = NULL;
  if (threads > 1 && er__pool_create(threads, &pool) != ER_STATUS_OK) return 1;
  printf("isa %s, %d threads\n", isa->name, threads);
  for (; i + 2 < argc; i += 3) {
    int64_t m = atoll(argv[i]), k = atoll(argv[i + 1]), n = atoll(argv[i + 2]);
    float *a = er__aligned_alloc((size_t)(m * k) * 4), *b = er__aligned_alloc((size_t)(k * n) * 4);
    float *c = er__aligned_alloc((size_t)(m * n) * 4);
    for (int64_t j = 0; j < m * k; j++) a[j] = (float)(j % 7) - 3;
    for (int64_t j = 0; j < k * n; j++) b[j] = (float)(j % 5) - 2;
    float *pb = er__aligned_alloc(er__sgemm_packed_b_floats(isa, k, n) * 4);
    er__sgemm_pack_b(isa, b, n, 1, k, n, pb);
    er_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.isa = isa;
    p.m = m;
    p.n = n;
    p.k = k;
    p.a.data = a;
    p.a.rs = k;
    p.a.cs = 1;
    p.b.packed = pb;
    p.scale = 1;
    p.c = c;
    p.ldc = n;
    int slots = threads;
    float *scratch = er__aligned_alloc(er__sgemm_scratch_floats(&p) * 4 * (size_t)slots + 64);
    double flop = 2.0 * (double)m * (double)n * (double)k, t[41];
    int reps = 1;
    double t0 = now_s();
    er__sgemm_run(&p, pool, scratch, slots);
    double one = now_s() - t0;
    reps = one > 0 ? (int)(0.02 / one) + 1 : 100;
    for (int r = 0; r < 41; r++) {
      t0 = now_s();
      for (int q = 0; q < reps; q++) er__sgemm_run(&p, pool, scratch, slots);
      t[r] = (now_s() - t0) / reps;
    }
    qsort(t, 41, sizeof t[0], cmp_double);
    printf("M %5lld K %5lld N %5lld: %8.1f us  %6.1f GFLOP/s (median of 41)\n", (long long)m, (long long)k,
           (long long)n, t[20] * 1e6, flop / t[20] * 1e-9);
    er__aligned_free(a);
    er__aligned_free(b);
    er__aligned_free(c);
    er__aligned_free(pb);
    er__aligned_free(scratch);
  }
  er__pool_free(pool);
  return 0;
}
