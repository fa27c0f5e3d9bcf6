/* cpu-features.c - what the CPU can do, detected once. On x86 from CPUID and
 * XGETBV (a feature counts only if the OS saves its registers); on Arm from
 * the kernel's hwcaps. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "core/cpu-features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#define ER_X86 1
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

static er_cpu_features features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

#ifdef ER_X86
static uint64_t xgetbv0(void) {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return ((uint64_t)edx << 32) | eax;
}

/* Linux keeps AMX tile state off until a process asks for it. */
static bool request_amx(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
  enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
  return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
  return false;
#endif
}
#endif

static void detect(void) {
  er_cpu_features *f = &features;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  f->cores = n > 0 ? (int)n : 1;
#ifdef ER_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  f->sse41 = (c >> 19) & 1;
  bool osxsave = (c >> 27) & 1;
  bool avx_hw = (c >> 28) & 1;
  f->fma = (c >> 12) & 1;
  f->f16c = (c >> 29) & 1;
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  bool ymm_os = (xcr0 & 0x6) == 0x6;
  bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  f->avx = avx_hw && ymm_os;
  f->fma = f->fma && f->avx;
  f->f16c = f->f16c && f->avx;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f->avx2 = f->avx && ((b >> 5) & 1);
    f->avx512f = zmm_os && ((b >> 16) & 1);
    f->avx512dq = f->avx512f && ((b >> 17) & 1);
    f->avx512bw = f->avx512f && ((b >> 30) & 1);
    f->avx512vl = f->avx512f && ((b >> 31) & 1);
    f->avx512vnni = f->avx512f && ((c >> 11) & 1);
    f->avx512vbmi = f->avx512f && ((c >> 1) & 1);
    bool amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1;
    bool amx_os = (xcr0 & (3u << 17)) == (3u << 17);
    f->amx_int8 = amx_tile && amx_int8 && amx_os && request_amx();
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f->avxvnni = f->avx2 && ((a >> 4) & 1);
    f->avx512bf16 = f->avx512f && ((a >> 5) & 1);
  }
  /* Vendor "AuthenticAMD" (EBX, EDX, ECX of leaf 0) and family 19h. */
  if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u &&
      __get_cpuid(1, &a, &b, &c, &d)) {
    unsigned family = ((a >> 8) & 0xf) + (((a >> 8) & 0xf) == 0xf ? (a >> 20) & 0xff : 0);
    f->avx512_split = f->avx512f && family == 0x19;
  }
#elif defined(__aarch64__)
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f->neon = true; /* mandatory on AArch64 */
  f->dotprod = (hw >> 20) & 1;  /* HWCAP_ASIMDDP */
  f->i8mm = (hw2 >> 13) & 1;    /* HWCAP2_I8MM */
#endif
}

const er_cpu_features *er__cpu_features(void) {
  pthread_once(&features_once, detect);
  return &features;
}

const char *er__cpu_features_str(const er_cpu_features *f, char *buf, size_t size) {
  static const struct {
    size_t offset;
    const char *name;
  } names[] = {
#define F(field) {offsetof(er_cpu_features, field), #field}
      F(sse41), F(avx), F(avx2), F(fma), F(f16c), F(avx512f), F(avx512bw), F(avx512vl),
      F(avx512dq), F(avx512vnni), F(avx512vbmi), F(avx512bf16), F(avxvnni), F(amx_int8), F(neon), F(dotprod),
      F(i8mm),
#undef F
  };
  size_t n = 0;
  if (size) buf[0] = '\0';
  for (size_t i = 0; i < ER_ARRAY_LEN(names); i++) {
    bool on;
    memcpy(&on, (const char *)f + names[i].offset, sizeof on);
    if (on && n < size) n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " " : "", names[i].name);
  }
  return buf;
}
