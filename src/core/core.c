/* core.c - status texts, per-thread error messages, allocation, the bump
 * arena, and element-type conversions. */
#include "core/core.h"

#include <time.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ======================================================================== */
/* Version and status                                                        */
/* ======================================================================== */

#define ER__STR2(x) #x
#define ER__STR(x) ER__STR2(x)

const char *er_version(void) {
  return ER__STR(ER_VERSION_MAJOR) "." ER__STR(ER_VERSION_MINOR) "." ER__STR(
      ER_VERSION_PATCH);
}

static const char *const status_names[] = {
#define ER__NAME(name, text) #name,
    ER_STATUS_LIST(ER__NAME)
#undef ER__NAME
};

static const char *const status_texts[] = {
#define ER__TEXT(name, text) text,
    ER_STATUS_LIST(ER__TEXT)
#undef ER__TEXT
};

const char *er_status_name(er_status status) {
  if ((unsigned)status >= ER_ARRAY_LEN(status_names)) return "UNKNOWN";
  return status_names[status];
}

const char *er_status_str(er_status status) {
  if ((unsigned)status >= ER_ARRAY_LEN(status_texts)) return "unknown status";
  return status_texts[status];
}

/* ======================================================================== */
/* Per-thread error message                                                  */
/* ======================================================================== */

/* One buffer per thread, so concurrent sessions never see each other's
 * messages. 1 KiB holds any message we build; longer ones are cut. */
static _Thread_local char error_text[1024];

const char *er_last_error(void) { return error_text; }

void er__error_clear(void) { error_text[0] = '\0'; }

er_status er__verror(er_status status, const char *fmt, va_list ap) {
  vsnprintf(error_text, sizeof error_text, fmt, ap);
  return status;
}

er_status er__error(er_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  er__verror(status, fmt, ap);
  va_end(ap);
  return status;
}

void er__error_prefix(const char *fmt, ...) {
  char prefix[512];
  char old[sizeof error_text];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, error_text, sizeof old);
  /* Truncation is fine here: the start of the message matters most. */
  size_t n = strlen(prefix);
  if (n > sizeof error_text - 3) n = sizeof error_text - 3;
  memcpy(error_text, prefix, n);
  error_text[n++] = ':';
  error_text[n++] = ' ';
  size_t rest = strlen(old);
  if (rest > sizeof error_text - 1 - n) rest = sizeof error_text - 1 - n;
  memcpy(error_text + n, old, rest);
  error_text[n + rest] = '\0';
}

_Noreturn void er__assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "edgerun: internal error: assertion '%s' failed at %s:%d\n",
          expr, file, line);
  abort();
}

/* ======================================================================== */
/* Allocation                                                                */
/* ======================================================================== */

void *er__malloc(size_t bytes, const char *what) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s", bytes, what);
  return p;
}

void *er__calloc(size_t count, size_t size, const char *what) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p)
    er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory allocating %zu x %zu bytes for %s", count,
              size, what);
  return p;
}

void *er__aligned_alloc(size_t bytes) {
  void *p = NULL;
  /* Round up so the size is a multiple of the alignment, as C11 requires. */
  size_t rounded = (bytes + 63) & ~(size_t)63;
  if (rounded < bytes) return NULL;
  if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) {
    er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory allocating %zu aligned bytes", bytes);
    return NULL;
  }
  return p;
}

void er__aligned_free(void *ptr) { free(ptr); }

/* ======================================================================== */
/* Bump arena                                                                */
/* ======================================================================== */

struct er_arena_block {
  er_arena_block *next;
  size_t used, cap;  /* bytes */
  _Alignas(16) unsigned char data[];
};

#define ARENA_BLOCK_BYTES (64 * 1024)

void er__arena_init(er_arena *arena) {
  arena->head = NULL;
  arena->total = 0;
}

void er__arena_free(er_arena *arena) {
  er_arena_block *b = arena->head;
  while (b) {
    er_arena_block *next = b->next;
    free(b);
    b = next;
  }
  arena->head = NULL;
  arena->total = 0;
}

void *er__arena_alloc(er_arena *arena, size_t bytes) {
  size_t need = (bytes + 15) & ~(size_t)15;
  if (need < bytes) {
    er__error(ER_STATUS_OUT_OF_MEMORY, "arena request of %zu bytes overflows", bytes);
    return NULL;
  }
  er_arena_block *b = arena->head;
  if (!b || b->cap - b->used < need) {
    /* Large requests get a block of their own so small ones keep packing. */
    size_t cap = need > ARENA_BLOCK_BYTES / 4 ? need : ARENA_BLOCK_BYTES;
    er_arena_block *nb = malloc(sizeof *nb + cap);
    if (!nb) {
      er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory allocating %zu bytes for the model IR", bytes);
      return NULL;
    }
    nb->used = 0;
    nb->cap = cap;
    if (b && need > ARENA_BLOCK_BYTES / 4) {
      /* Keep the current partly-used block at the head. */
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      arena->head = nb;
    }
    b = nb;
  }
  void *p = b->data + b->used;
  b->used += need;
  arena->total += need;
  memset(p, 0, need);
  return p;
}

void *er__arena_array(er_arena *arena, size_t count, size_t size) {
  uint64_t bytes;
  if (!er__mul_u64(count, size, &bytes) || bytes > SIZE_MAX) {
    er__error(ER_STATUS_OUT_OF_MEMORY, "array of %zu x %zu bytes overflows", count, size);
    return NULL;
  }
  return er__arena_alloc(arena, (size_t)bytes);
}

char *er__arena_strndup(er_arena *arena, const char *s, size_t len) {
  char *p = er__arena_alloc(arena, len + 1);
  if (!p) return NULL;
  if (len) memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

char *er__arena_strdup(er_arena *arena, const char *s) {
  return er__arena_strndup(arena, s, strlen(s));
}

/* ======================================================================== */
/* Element types                                                             */
/* ======================================================================== */

const char *er_dtype_name(er_dtype t) {
  switch (t) {
    case ER_DTYPE_FLOAT: return "float32";
    case ER_DTYPE_UINT8: return "uint8";
    case ER_DTYPE_INT8: return "int8";
    case ER_DTYPE_UINT16: return "uint16";
    case ER_DTYPE_INT16: return "int16";
    case ER_DTYPE_INT32: return "int32";
    case ER_DTYPE_INT64: return "int64";
    case ER_DTYPE_STRING: return "string";
    case ER_DTYPE_BOOL: return "bool";
    case ER_DTYPE_FLOAT16: return "float16";
    case ER_DTYPE_DOUBLE: return "float64";
    case ER_DTYPE_UINT32: return "uint32";
    case ER_DTYPE_UINT64: return "uint64";
    case ER_DTYPE_COMPLEX64: return "complex64";
    case ER_DTYPE_COMPLEX128: return "complex128";
    case ER_DTYPE_BFLOAT16: return "bfloat16";
    case ER_DTYPE_FLOAT8E4M3FN: return "float8e4m3fn";
    case ER_DTYPE_FLOAT8E4M3FNUZ: return "float8e4m3fnuz";
    case ER_DTYPE_FLOAT8E5M2: return "float8e5m2";
    case ER_DTYPE_FLOAT8E5M2FNUZ: return "float8e5m2fnuz";
    case ER_DTYPE_UINT4: return "uint4";
    case ER_DTYPE_INT4: return "int4";
    case ER_DTYPE_FLOAT4E2M1: return "float4e2m1";
    case ER_DTYPE_UNDEFINED: break;
  }
  return "undefined";
}

size_t er_dtype_size(er_dtype t) {
  switch (t) {
    case ER_DTYPE_BOOL:
    case ER_DTYPE_UINT8:
    case ER_DTYPE_INT8:
    case ER_DTYPE_UINT4:
    case ER_DTYPE_INT4:
    case ER_DTYPE_FLOAT8E4M3FN:
    case ER_DTYPE_FLOAT8E4M3FNUZ:
    case ER_DTYPE_FLOAT8E5M2:
    case ER_DTYPE_FLOAT8E5M2FNUZ: return 1;
    case ER_DTYPE_UINT16:
    case ER_DTYPE_INT16:
    case ER_DTYPE_FLOAT16:
    case ER_DTYPE_BFLOAT16: return 2;
    case ER_DTYPE_FLOAT:
    case ER_DTYPE_INT32:
    case ER_DTYPE_UINT32: return 4;
    case ER_DTYPE_DOUBLE:
    case ER_DTYPE_INT64:
    case ER_DTYPE_UINT64: return 8;
    default: return 0;
  }
}

bool er__dtype_is_float(er_dtype t) {
  return t == ER_DTYPE_FLOAT || t == ER_DTYPE_DOUBLE || t == ER_DTYPE_FLOAT16 ||
         t == ER_DTYPE_BFLOAT16;
}

bool er__dtype_is_float8(er_dtype t) {
  return t == ER_DTYPE_FLOAT8E4M3FN || t == ER_DTYPE_FLOAT8E4M3FNUZ ||
         t == ER_DTYPE_FLOAT8E5M2 || t == ER_DTYPE_FLOAT8E5M2FNUZ;
}

bool er__dtype_is_int(er_dtype t) {
  switch (t) {
    case ER_DTYPE_UINT8: case ER_DTYPE_INT8: case ER_DTYPE_UINT16:
    case ER_DTYPE_INT16: case ER_DTYPE_INT32: case ER_DTYPE_INT64:
    case ER_DTYPE_UINT32: case ER_DTYPE_UINT64: case ER_DTYPE_UINT4:
    case ER_DTYPE_INT4: return true;
    default: return false;
  }
}

bool er__dtype_is_signed(er_dtype t) {
  switch (t) {
    case ER_DTYPE_INT8: case ER_DTYPE_INT16: case ER_DTYPE_INT32:
    case ER_DTYPE_INT64: case ER_DTYPE_INT4: return true;
    default: return er__dtype_is_float(t) || er__dtype_is_float8(t);
  }
}

bool er__dtype_is_numeric(er_dtype t) {
  return t != ER_DTYPE_STRING && t != ER_DTYPE_FLOAT4E2M1 && er_dtype_size(t) != 0;
}

/* ---- half precision ---------------------------------------------------- */

float er__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {
      /* Subnormal half: value = man * 2^-24; renormalise. */
      float v = (float)man * 0x1p-24f;
      memcpy(&bits, &v, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t er__f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  /* inf or NaN; keep NaN quiet */
    return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00;  /* rounds to >= 65520: inf */
  if (ax < 0x38800000u) {
    /* Result is subnormal (or zero): value / 2^-24 rounded to nearest even. */
    float a;
    memcpy(&a, &ax, 4);
    float q = a * 0x1p24f;
    float r = nearbyintf(q);
    return sign | (uint16_t)r;
  }
  /* Normal: drop 13 mantissa bits with round-to-nearest-even. */
  uint32_t rounded = ax + 0xfff + ((ax >> 13) & 1);
  return sign | (uint16_t)((rounded - 0x38000000u) >> 13);
}

float er__bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t er__f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

float er__f64_to_f32_odd(double d) {
  float f = (float)d;
  if (d != d || (double)f == d) return f;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if (fabs((double)f) > fabs(d)) bits -= 1; /* rounded away from zero: step back */
  bits |= 1;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* ---- float8 ------------------------------------------------------------ */

typedef struct f8_format {
  int ebits, mbits, bias;
  bool fnuz;     /* no negative zero; 0x80 is the only NaN */
  bool has_inf;  /* E5M2 has infinities */
} f8_format;

static f8_format f8_format_of(er_dtype t) {
  switch (t) {
    case ER_DTYPE_FLOAT8E4M3FN: return (f8_format){4, 3, 7, false, false};
    case ER_DTYPE_FLOAT8E4M3FNUZ: return (f8_format){4, 3, 8, true, false};
    case ER_DTYPE_FLOAT8E5M2: return (f8_format){5, 2, 15, false, true};
    default: return (f8_format){5, 2, 16, true, false};
  }
}

static bool f8_is_nan(uint8_t v, f8_format f) {
  if (f.fnuz) return v == 0x80;
  if (f.has_inf) return ((v >> 2) & 0x1f) == 0x1f && (v & 3) != 0;
  return (v & 0x7f) == 0x7f;
}

float er__f8_to_f32(uint8_t v, er_dtype t) {
  f8_format f = f8_format_of(t);
  /* NaN keeps its sign bit (FNUZ has a single NaN, 0x80). */
  if (f8_is_nan(v, f)) return (v & 0x80) && !f.fnuz ? -NAN : NAN;
  bool neg = (v & 0x80) != 0;
  int e = (v >> f.mbits) & ((1 << f.ebits) - 1);
  int m = v & ((1 << f.mbits) - 1);
  if (f.has_inf && e == (1 << f.ebits) - 1) return neg ? -INFINITY : INFINITY;
  float val;
  if (e == 0)
    val = ldexpf((float)m, 1 - f.bias - f.mbits);
  else
    val = ldexpf(1.0f + (float)m / (float)(1 << f.mbits), e - f.bias);
  return neg ? -val : val;
}

static float f8_max(f8_format f) {
  if (f.fnuz || f.has_inf) {
    /* FNUZ uses every exponent; E5M2 reserves the top one for inf/NaN. */
    int emax = (1 << f.ebits) - 1 - (f.has_inf ? 1 : 0);
    return ldexpf(2.0f - ldexpf(1.0f, -f.mbits), emax - f.bias);
  }
  /* E4M3FN: the top exponent holds normal values except mantissa 111 (NaN). */
  int emax = (1 << f.ebits) - 1;
  return ldexpf(2.0f - ldexpf(2.0f, -f.mbits), emax - f.bias);
}

uint8_t er__f32_to_f8(float x, er_dtype t, bool saturate) {
  f8_format f = f8_format_of(t);
  /* The NaN codes onnx writes: 0x7f (E4M3FN), 0x7e (E5M2), 0x80 (FNUZ). */
  uint8_t nan_code = f.fnuz ? 0x80 : f.has_inf ? 0x7e : 0x7f;
  uint8_t sign = signbit(x) ? 0x80 : 0;
  float maxv = f8_max(f);
  uint8_t max_code, inf_code = 0;
  if (isnan(x)) return f.fnuz ? nan_code : (uint8_t)(sign | nan_code);
  /* Code of the largest finite value. */
  if (f.has_inf) {
    max_code = 0x7b;
    inf_code = 0x7c;
  } else {
    max_code = f.fnuz ? 0x7f : 0x7e;
  }
  float a = fabsf(x);
  if (isinf(x)) {
    if (saturate) return sign | max_code;
    return f.has_inf ? (uint8_t)(sign | inf_code) : (f.fnuz ? nan_code : (uint8_t)(sign | nan_code));
  }
  /* Round |x| to the format's grid with round-half-to-even. */
  int min_exp = 1 - f.bias;  /* exponent of the smallest normal */
  int e;
  frexpf(a, &e);
  e -= 1;  /* a = 1.xxx * 2^e */
  if (e < min_exp) e = min_exp;
  float quantum = ldexpf(1.0f, e - f.mbits);
  float r = nearbyintf(a / quantum) * quantum;
  if (r > maxv) {
    if (saturate) return sign | max_code;
    return f.has_inf ? (uint8_t)(sign | inf_code) : (f.fnuz ? nan_code : (uint8_t)(sign | nan_code));
  }
  if (r == 0.0f) return f.fnuz ? 0 : sign;
  frexpf(r, &e);
  e -= 1;
  uint8_t code;
  if (e >= min_exp) {
    int m = (int)nearbyintf((ldexpf(r, -e) - 1.0f) * (float)(1 << f.mbits));
    code = (uint8_t)(((e + f.bias) << f.mbits) | m);
  } else {
    int m = (int)nearbyintf(ldexpf(r, f.bias - 1 + f.mbits));
    code = (uint8_t)m;
  }
  return sign | code;
}

/* ---- generic element access -------------------------------------------- */

double er__load_f64(const void *data, er_dtype t, int64_t i) {
  switch (t) {
    case ER_DTYPE_FLOAT: return ((const float *)data)[i];
    case ER_DTYPE_DOUBLE: return ((const double *)data)[i];
    case ER_DTYPE_FLOAT16: return er__f16_to_f32(((const uint16_t *)data)[i]);
    case ER_DTYPE_BFLOAT16: return er__bf16_to_f32(((const uint16_t *)data)[i]);
    case ER_DTYPE_INT8: case ER_DTYPE_INT4: return ((const int8_t *)data)[i];
    case ER_DTYPE_UINT8: case ER_DTYPE_UINT4: return ((const uint8_t *)data)[i];
    case ER_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    case ER_DTYPE_INT16: return ((const int16_t *)data)[i];
    case ER_DTYPE_UINT16: return ((const uint16_t *)data)[i];
    case ER_DTYPE_INT32: return ((const int32_t *)data)[i];
    case ER_DTYPE_UINT32: return ((const uint32_t *)data)[i];
    case ER_DTYPE_INT64: return (double)((const int64_t *)data)[i];
    case ER_DTYPE_UINT64: return (double)((const uint64_t *)data)[i];
    case ER_DTYPE_FLOAT8E4M3FN: case ER_DTYPE_FLOAT8E4M3FNUZ:
    case ER_DTYPE_FLOAT8E5M2: case ER_DTYPE_FLOAT8E5M2FNUZ:
      return er__f8_to_f32(((const uint8_t *)data)[i], t);
    default: ER_ASSERT(!"er__load_f64: type without numeric elements");
  }
  return 0;
}

int64_t er__load_i64(const void *data, er_dtype t, int64_t i) {
  switch (t) {
    case ER_DTYPE_INT8: case ER_DTYPE_INT4: return ((const int8_t *)data)[i];
    case ER_DTYPE_UINT8: case ER_DTYPE_UINT4: return ((const uint8_t *)data)[i];
    case ER_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    case ER_DTYPE_INT16: return ((const int16_t *)data)[i];
    case ER_DTYPE_UINT16: return ((const uint16_t *)data)[i];
    case ER_DTYPE_INT32: return ((const int32_t *)data)[i];
    case ER_DTYPE_UINT32: return ((const uint32_t *)data)[i];
    case ER_DTYPE_INT64: return ((const int64_t *)data)[i];
    case ER_DTYPE_UINT64: return (int64_t)((const uint64_t *)data)[i];
    default: {
      double v = er__load_f64(data, t, i);
      if (!(v >= -9.2233720368547758e18 && v < 9.2233720368547758e18)) return INT64_MIN;
      return (int64_t)v;
    }
  }
}

/* Float to integer conversion that never invokes undefined behaviour: NaN
 * and out-of-range values saturate (what x86 SIMD conversions also give for
 * NaN is INT_MIN; we pick saturation and document it). */
static int64_t f64_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

void er__store_f64(void *data, er_dtype t, int64_t i, double v) {
  switch (t) {
    case ER_DTYPE_FLOAT: ((float *)data)[i] = (float)v; return;
    case ER_DTYPE_DOUBLE: ((double *)data)[i] = v; return;
    case ER_DTYPE_FLOAT16: ((uint16_t *)data)[i] = er__f32_to_f16(er__f64_to_f32_odd(v)); return;
    case ER_DTYPE_BFLOAT16: ((uint16_t *)data)[i] = er__f32_to_bf16(er__f64_to_f32_odd(v)); return;
    case ER_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; return;
    case ER_DTYPE_FLOAT8E4M3FN: case ER_DTYPE_FLOAT8E4M3FNUZ:
    case ER_DTYPE_FLOAT8E5M2: case ER_DTYPE_FLOAT8E5M2FNUZ:
      ((uint8_t *)data)[i] = er__f32_to_f8((float)v, t, true);
      return;
    case ER_DTYPE_UINT64:
      /* Values past INT64_MAX still fit an unsigned 64-bit integer. */
      if (v >= 9.2233720368547758e18 && v < 1.8446744073709552e19) {
        ((uint64_t *)data)[i] = (uint64_t)v;
        return;
      }
      er__store_i64(data, t, i, f64_to_i64(v));
      return;
    default: er__store_i64(data, t, i, f64_to_i64(v)); return;
  }
}

void er__store_i64(void *data, er_dtype t, int64_t i, int64_t v) {
  switch (t) {
    /* Integer narrowing wraps (two's complement), like a C cast on every
     * platform we target; the ONNX spec leaves it to the implementation. */
    case ER_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)(uint8_t)v; return;
    case ER_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; return;
    case ER_DTYPE_INT4: {
      int64_t w = v & 0xf;
      ((int8_t *)data)[i] = (int8_t)(w >= 8 ? w - 16 : w);
      return;
    }
    case ER_DTYPE_UINT4: ((uint8_t *)data)[i] = (uint8_t)(v & 0xf); return;
    case ER_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; return;
    case ER_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)(uint16_t)v; return;
    case ER_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)v; return;
    case ER_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)(uint32_t)v; return;
    case ER_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)v; return;
    case ER_DTYPE_INT64: ((int64_t *)data)[i] = v; return;
    case ER_DTYPE_UINT64: ((uint64_t *)data)[i] = (uint64_t)v; return;
    default: er__store_f64(data, t, i, (double)v); return;
  }
}

/* ======================================================================== */
/* Floating-point environment                                                */
/* ======================================================================== */

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
uint64_t er__fp_mode_get(void) { return _mm_getcsr(); }
void er__fp_mode_set(uint64_t mode) { _mm_setcsr((unsigned)mode); }
/* MXCSR bit 15 flushes results to zero (FTZ), bit 6 reads subnormal
 * operands as zero (DAZ). */
uint64_t er__fp_mode_flushing(uint64_t mode) { return mode | 0x8040u; }
/* MXCSR bits 13-14 are the rounding control; 00 is to nearest. */
uint64_t er__fp_mode_for_run(uint64_t mode, bool flush) { return (flush ? er__fp_mode_flushing(mode) : mode) & ~UINT64_C(0x6000); }
#elif defined(__aarch64__)
uint64_t er__fp_mode_get(void) {
  uint64_t v;
  __asm__ volatile("mrs %0, fpcr" : "=r"(v));
  return v;
}
void er__fp_mode_set(uint64_t mode) { __asm__ volatile("msr fpcr, %0" : : "r"(mode)); }
/* FPCR bit 24 (FZ) flushes subnormal inputs and results of single and
 * double precision operations. */
uint64_t er__fp_mode_flushing(uint64_t mode) { return mode | (UINT64_C(1) << 24); }
/* FPCR bits 22-23 (RMode); 00 is to nearest. */
uint64_t er__fp_mode_for_run(uint64_t mode, bool flush) {
  return (flush ? er__fp_mode_flushing(mode) : mode) & ~(UINT64_C(3) << 22);
}
#else
uint64_t er__fp_mode_get(void) { return 0; }
void er__fp_mode_set(uint64_t mode) { (void)mode; }
uint64_t er__fp_mode_flushing(uint64_t mode) { return mode; }
uint64_t er__fp_mode_for_run(uint64_t mode, bool flush) {
  (void)flush;
  return mode;
}
#endif

uint64_t er__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool er__force_reference_env(void) {
  const char *v = getenv("ER_FORCE_REFERENCE");
  return v && v[0] && strcmp(v, "0") != 0;
}
