/* bench-qblock.c - times the block-quantized products at the LLM engine's
 * decode shapes (a GEMV: one activation row) on one thread, with the
 * weights coming from DRAM, and prints the effective bandwidth of weight
 * bytes next to a plain streaming read measured in the same run; then the
 * prefill tiles (several activation rows) at one shape. Not a test.
 *
 *   bench-qblock [--quick] [--ref] [--type Q4_0]
 *
 * DRAM, not cache: each shape's weights are copied until the copies fill
 * ER_BENCH_SPAN bytes (well past a 32 MiB L3) and the products run over the
 * copies in turn, so every byte a product reads was evicted since its last
 * use. Each product is timed alone and the figure is the median over all
 * copies and passes; the "stream" column reads the same copies the same
 * way (summing their words with AVX2 loads), interleaved with the product's
 * passes, so both see the same load on a shared machine, and "ratio" is
 * the product's share of that bandwidth. --quick: a quarter of the copies,
 * 3 passes, no 150 MB output matrix. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernel.h"
#include "kernels/qblock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#define ER_BENCH_SPAN ((size_t)512 << 20) /* bytes of weight copies per shape */
#define ER_BENCH_STREAM ((size_t)1 << 30)  /* bytes of the streaming read */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) * 0x1p-53 * 2.0 - 1.0);
}

/* ---- the streaming read ---------------------------------------------------- */

/* Integer adds: the bytes may be anything (weights read as floats could
 * be subnormal, which slows float adds down). */
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) static uint32_t stream_sum_avx2(const void *p, size_t bytes) {
  const __m256i *a = p;
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 4 <= bytes / 32; i += 4) {
    s0 = _mm256_add_epi32(s0, _mm256_load_si256(a + i));
    s1 = _mm256_add_epi32(s1, _mm256_load_si256(a + i + 1));
    s2 = _mm256_add_epi32(s2, _mm256_load_si256(a + i + 2));
    s3 = _mm256_add_epi32(s3, _mm256_load_si256(a + i + 3));
  }
  uint32_t t[8];
  _mm256_storeu_si256((__m256i *)t, _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)));
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif

/* The sum of the 32-bit words of [p, p + bytes), p 32-byte aligned. */
static uint32_t stream_sum(const void *p, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  if (er__cpu_features()->avx2) return stream_sum_avx2(p, bytes);
#endif
  const uint32_t *a = p;
  uint32_t s[8] = {0};
  for (size_t i = 0; i + 8 <= bytes / 4; i += 8) {
    for (int j = 0; j < 8; j++) s[j] += a[i + j];
  }
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

/* GB/s of a 1 GiB streaming read, best of `reps`. */
static double stream_bandwidth(int reps) {
  uint8_t *a = er__aligned_alloc(ER_BENCH_STREAM);
  if (!a) return 0;
  memset(a, 1, ER_BENCH_STREAM);
  double best = 1e30;
  volatile uint32_t sink = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    sink += stream_sum(a, ER_BENCH_STREAM);
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  (void)sink;
  er__aligned_free(a);
  return (double)ER_BENCH_STREAM / best * 1e-9;
}

/* ---- the products ---------------------------------------------------------- */

typedef struct shape {
  const char *what;
  int64_t k, n;
} shape;

static const shape SHAPES[] = {
    {"SmolLM2 q/o", 576, 576},        {"SmolLM2 k/v", 576, 192},      {"SmolLM2 gate/up", 576, 1536},
    {"SmolLM2 down", 1536, 576},      {"SmolLM2 output", 576, 49152}, {"Qwen2 q/o", 896, 896},
    {"Qwen2 k/v", 896, 128},          {"Qwen2 gate/up", 896, 4864},   {"Qwen2 down", 4864, 896},
    {"Qwen2 output", 896, 151936},    {"4096 x 4096", 4096, 4096},
};

static const uint32_t TYPES[] = {ER_GGML_F32,  ER_GGML_F16,  ER_GGML_BF16, ER_GGML_Q4_0,
                                 ER_GGML_Q4_1, ER_GGML_Q5_0, ER_GGML_Q5_1, ER_GGML_Q8_0,
                                 ER_GGML_Q4_K, ER_GGML_Q5_K, ER_GGML_Q6_K};

typedef struct setup {
  uint8_t *w;        /* copies of the [n, k] weights, back to back */
  size_t wrb, mat;   /* bytes per row, per copy */
  int64_t copies;
  uint8_t *xq;       /* [m] activation rows */
  size_t xrb;
  float *y;          /* [m, n] */
} setup;

static bool setup_make(uint32_t type, int64_t k, int64_t n, int64_t m, size_t span, setup *s) {
  memset(s, 0, sizeof *s);
  s->wrb = er__qb_row_bytes(type, k);
  s->mat = s->wrb * (size_t)n;
  s->copies = (int64_t)((span + s->mat - 1) / s->mat);
  if (s->copies < 1) s->copies = 1;
  s->w = er__aligned_alloc(s->mat * (size_t)s->copies);
  const uint32_t at = er__qb_act_type(type);
  s->xrb = er__qb_act_row_bytes(at, k);
  s->xq = malloc(s->xrb * (size_t)m);
  s->y = malloc((size_t)(m * n) * sizeof(float));
  float *row = malloc((size_t)k * sizeof(float)), *x = malloc((size_t)(m * k) * sizeof(float));
  if (!s->w || !s->xq || !s->y || !row || !x) {
    free(row);
    free(x);
    return false;
  }
  for (int64_t r = 0; r < n; r++) {
    for (int64_t i = 0; i < k; i++) row[i] = 0.05f * frand();
    er__qb_quantize_row(type, row, s->w + (size_t)r * s->wrb, k);
  }
  for (int64_t c = 1; c < s->copies; c++) memcpy(s->w + (size_t)c * s->mat, s->w, s->mat);
  for (int64_t i = 0; i < m * k; i++) x[i] = frand();
  er__qb_quantize_act(at, x, k, m, k, s->xq, s->xrb);
  free(row);
  free(x);
  return true;
}

static void setup_free(setup *s) {
  er__aligned_free(s->w);
  free(s->xq);
  free(s->y);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of n samples (sorted in place). */
static double median(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Seconds per product (what = 0) or per streaming read of the same bytes
 * (what = 1: the weight copies summed as words, the bandwidth at that
 * moment on that memory), timed copy by copy over `reps` passes, the median
 * of the samples: a sample that another process's time slice hit is an
 * outlier the median ignores, and every sample reads its copy from DRAM
 * (the other copies evicted it). */
static double time_copies(const er_qb_kernel *kern, const setup *s, int64_t k, int64_t n, int64_t m, int reps,
                          int what) {
  const size_t ns = (size_t)s->copies * (size_t)reps;
  double *v = malloc(ns * sizeof *v);
  if (!v) return 0;
  volatile uint32_t sink = 0;
  size_t i = 0;
  for (int r = 0; r < reps; r++) {
    for (int64_t c = 0; c < s->copies; c++) {
      const uint8_t *w = s->w + (size_t)c * s->mat;
      const double t0 = now_s();
      if (what == 0) kern->gemm(w, s->wrb, s->xq, s->xrb, k, 0, n, m, s->y, n);
      else sink += stream_sum(w, s->mat);
      v[i++] = now_s() - t0;
    }
  }
  (void)sink;
  const double t = median(v, ns);
  free(v);
  return t;
}

int main(int argc, char **argv) {
  bool quick = false, with_ref = false;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = true;
    else if (!strcmp(argv[i], "--ref")) with_ref = true;
    else if (!strcmp(argv[i], "--type") && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--quick] [--ref] [--type Q4_0]\n", argv[0]);
      return 2;
    }
  }
  const int reps = quick ? 3 : 7;
  const size_t span = quick ? ER_BENCH_SPAN / 4 : ER_BENCH_SPAN;
  char feat[256];
  printf("CPU features: %s; 1 thread\n", er__cpu_features_str(er__cpu_features(), feat, sizeof feat));
  const double bw0 = stream_bandwidth(reps);
  printf("streaming read (1 GiB, AVX2 loads): %.2f GB/s; \"stream\" below: the same read over each shape's copies, interleaved with its runs\n\n", bw0);

  printf("decode GEMV (m = 1), weights from DRAM (%zu MiB of copies per shape), medians of %d passes:\n",
         span >> 20, reps);
  printf("%-5s %-16s %6s %7s %9s %9s %8s %8s  %s\n", "type", "shape", "k", "n", "MiB", "us", "GB/s", "stream", "ratio");
  for (size_t it = 0; it < sizeof TYPES / sizeof TYPES[0]; it++) {
    const uint32_t type = TYPES[it];
    if (only && strcmp(only, er__ggml_type_name(type)) != 0) continue;
    const er_qb_kernel *kern = er__qb_kernel(type, false), *ref = er__qb_kernel(type, true);
    printf("%s: %s\n", er__ggml_type_name(type), kern->name);
    for (size_t is = 0; is < sizeof SHAPES / sizeof SHAPES[0]; is++) {
      const shape *sh = &SHAPES[is];
      if (er__qb_row_bytes(type, sh->k) == 0) continue; /* k not a whole number of blocks */
      if (quick && sh->n > 60000) continue;
      setup s;
      if (!setup_make(type, sh->k, sh->n, 1, span, &s)) {
        printf("  (out of memory)\n");
        setup_free(&s);
        continue;
      }
      /* Interleaved, so both figures see the same load on the machine. */
      double t = 0, ts = 0;
      for (int rr = 0; rr < reps; rr++) {
        t += time_copies(kern, &s, sh->k, sh->n, 1, 1, 0) / reps;
        ts += time_copies(kern, &s, sh->k, sh->n, 1, 1, 1) / reps;
      }
      const double gbs = (double)s.mat / t * 1e-9, sgbs = (double)s.mat / ts * 1e-9;
      printf("%-5s %-16s %6lld %7lld %9.2f %9.1f %8.2f %8.2f  %5.0f%%\n", er__ggml_type_name(type), sh->what,
             (long long)sh->k, (long long)sh->n, (double)s.mat / (1 << 20), t * 1e6, gbs, sgbs, 100 * gbs / sgbs);
      if (with_ref && is == 2) {
        const double tr = time_copies(ref, &s, sh->k, sh->n, 1, 1, 0);
        printf("%-5s %-16s %6lld %7lld %9.2f %9.1f %8.2f %8s  %5.0f%%  (%s)\n", er__ggml_type_name(type), sh->what,
               (long long)sh->k, (long long)sh->n, (double)s.mat / (1 << 20), tr * 1e6,
               (double)s.mat / tr * 1e-9, "", 100 * (double)s.mat / tr * 1e-9 / sgbs, ref->name);
      }
      setup_free(&s);
    }
  }

  /* Prefill: m activation rows against one weight matrix that stays in
   * cache (the tiles' compute rate, not memory). */
  static const int64_t ms[] = {1, 2, 4, 8, 32, 128};
  const int64_t pk = 1536, pn = 576;
  printf("\nprefill (k = %lld, n = %lld, weights in cache): GOP/s (2 k n m / time), best of %d\n", (long long)pk,
         (long long)pn, reps);
  printf("%-5s", "type");
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) printf("  m=%-5lld", (long long)ms[i]);
  printf("\n");
  for (size_t it = 0; it < sizeof TYPES / sizeof TYPES[0]; it++) {
    const uint32_t type = TYPES[it];
    if (only && strcmp(only, er__ggml_type_name(type)) != 0) continue;
    const er_qb_kernel *kern = er__qb_kernel(type, false);
    printf("%-5s", er__ggml_type_name(type));
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
      setup s;
      if (!setup_make(type, pk, pn, ms[i], 0, &s)) {
        setup_free(&s);
        continue;
      }
      const int inner = (int)(256 / ms[i]) + 1;
      double best = 1e30;
      for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (int j = 0; j < inner; j++) kern->gemm(s.w, s.wrb, s.xq, s.xrb, pk, 0, pn, ms[i], s.y, pn);
        double tt = (now_s() - t0) / inner;
        if (tt < best) best = tt;
      }
      printf("  %7.1f", 2.0 * (double)pk * (double)pn * (double)ms[i] / best * 1e-9);
      fflush(stdout);
      setup_free(&s);
    }
    printf("   (%s)\n", kern->name);
  }
  return 0;
}
