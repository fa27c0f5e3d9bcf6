/* cpu-features.h - what the CPU this process runs on can do (ISA extensions,
 * core count), detected once. The kernel tables choose by it and
 * `edgerun devices` reports it. */
#ifndef ER_CPU_FEATURES_H
#define ER_CPU_FEATURES_H

#include "core/core.h"

typedef struct er_cpu_features {
  /* x86 */
  bool sse41, avx, avx2, fma, f16c;
  bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512vbmi, avx512bf16;
  bool avxvnni;      /* VEX-encoded VNNI (Alder Lake+) */
  bool amx_int8;     /* AMX tiles usable (the OS granted the state) */
  /* AVX-512 executed as two 256-bit halves (AMD family 19h, Zen 4): the
   * same multiply-adds a cycle as AVX2, which moves the point where
   * Winograd beats the direct convolution (cpu_keep_planar in
   * backends/cpu/cpu-backend.c). */
  bool avx512_split;
  /* Arm */
  bool neon, dotprod, i8mm;
  int cores;         /* online logical CPUs */
} er_cpu_features;

/* Detected once (thread-safe) on first use. */
const er_cpu_features *er__cpu_features(void);
/* Writes "avx2 fma avx512f ..." into buf. */
const char *er__cpu_features_str(const er_cpu_features *f, char *buf, size_t size);

#endif /* ER_CPU_FEATURES_H */
