/* core.h - internal foundation shared by every layer: errors, asserts,
 * checked arithmetic, limits, the bump arena and element-type helpers. */
#ifndef ER_CORE_H
#define ER_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "edgerun.h"

/* ======================================================================== */
/* Limits. Every limit edgerun enforces lives here and is named in the       */
/* error message that enforces it.                                           */
/* ======================================================================== */

#define ER_DEFAULT_MAX_FILE_BYTES (UINT64_C(4) << 30)
#define ER_DEFAULT_MAX_TENSOR_BYTES (UINT64_C(2) << 30)
#define ER_DEFAULT_MAX_TOTAL_BYTES (UINT64_C(8) << 30)
#define ER_DEFAULT_MAX_NODES 1000000u
#define ER_DEFAULT_MAX_NESTING 32u
#define ER_MAX_NAME_BYTES 4096        /* one name or string attribute */
#define ER_MAX_META_BYTES (1 << 24)   /* one metadata_props value */
#define ER_MAX_ATTR_ELEMENTS 1000000  /* ints/floats in one attribute */
#define ER_MAX_NODE_IO 4096           /* inputs or outputs of one node */
#define ER_MAX_VALUES 4000000         /* named values in one graph */
#define ER_MAX_OPSET_IMPORTS 64
#define ER_MAX_LOOP_ITERATIONS INT64_C(100000000)
/* The most elements a run-time-shaped output may hold (e.g. Expand, Tile,
 * ConstantOfShape with values computed in the graph). */
#define ER_MAX_RUNTIME_ELEMENTS (INT64_C(1) << 32)

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

/* Records a detailed message for the calling thread and returns `status`, so
 * a failure reads `return er__error(ER_STATUS_LIMIT, "...", ...);`. */
er_status er__error(er_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
er_status er__verror(er_status status, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Prepends "prefix: " to the calling thread's current message (for adding
 * context as an error travels up: file name, node name, tensor name). */
void er__error_prefix(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void er__error_clear(void);

/* Broken invariants (bugs) stop the program, also in release builds. Nothing
 * that comes from a file, a socket or a user may ever reach an assert. */
#define ER_ASSERT(cond)                                                        \
  do {                                                                         \
    if (!(cond)) er__assert_fail(#cond, __FILE__, __LINE__);                   \
  } while (0)
_Noreturn void er__assert_fail(const char *expr, const char *file, int line);

#define ER_CHECK(expr)                                                         \
  do {                                                                         \
    er_status er__st = (expr);                                                 \
    if (er__st != ER_STATUS_OK) return er__st;                                 \
  } while (0)

#define ER_UNUSED(x) ((void)(x))
#define ER_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ======================================================================== */
/* Checked arithmetic: return false on overflow.                             */
/* ======================================================================== */

static inline bool er__mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool er__add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool er__mul_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool er__add_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

/* ======================================================================== */
/* Allocation                                                                */
/* ======================================================================== */

/* malloc/calloc wrappers that record an OUT_OF_MEMORY message naming `what`.
 * They return NULL for a zero-size request only if the system does. */
void *er__malloc(size_t bytes, const char *what);
void *er__calloc(size_t count, size_t size, const char *what);
/* 64-byte aligned allocation, freed with er__aligned_free. */
void *er__aligned_alloc(size_t bytes);
void er__aligned_free(void *ptr);

/* A bump arena: many small allocations freed together. Used for the IR, whose
 * pieces all live exactly as long as the model. */
typedef struct er_arena_block er_arena_block;
typedef struct er_arena {
  er_arena_block *head;
  size_t total;  /* bytes handed out, for reporting */
} er_arena;

void er__arena_init(er_arena *arena);
void er__arena_free(er_arena *arena);
/* Zeroed, 16-byte aligned memory owned by the arena; NULL on OOM (message
 * set). */
void *er__arena_alloc(er_arena *arena, size_t bytes);
void *er__arena_array(er_arena *arena, size_t count, size_t size);
/* NUL-terminated copy of `len` bytes. */
char *er__arena_strndup(er_arena *arena, const char *s, size_t len);
char *er__arena_strdup(er_arena *arena, const char *s);

/* ======================================================================== */
/* Floating-point environment                                                */
/* ======================================================================== */

/* The calling thread's floating-point control register: MXCSR on x86,
 * FPCR on AArch64, 0 (and setting does nothing) elsewhere. */
uint64_t er__fp_mode_get(void);
void er__fp_mode_set(uint64_t mode);
/* `mode` with subnormal floats flushed to zero, as inputs and as results
 * (x86 DAZ + FTZ, AArch64 FZ). An operation on a subnormal operand costs
 * a microcode assist of about a hundred cycles on x86; weights a trainer
 * decayed towards zero are often subnormal (PP-OCRv5's detector has 15,000,
 * one 1x1 layer ran 100x slower than its size). */
uint64_t er__fp_mode_flushing(uint64_t mode);
/* `mode` rounding to nearest, ties to even (what ONNX specifies, and what
 * the optimized kernels' float-to-integer conversions assume: x86's
 * cvtps2dq rounds as MXCSR says), flushing subnormals when `flush`. */
uint64_t er__fp_mode_for_run(uint64_t mode, bool flush);

/* ======================================================================== */
/* Element types                                                             */
/* ======================================================================== */

bool er__dtype_is_float(er_dtype t);    /* f16, bf16, f32, f64 */
bool er__dtype_is_int(er_dtype t);      /* signed or unsigned, 8-64 bit */
bool er__dtype_is_signed(er_dtype t);   /* int8..int64 and floats */
bool er__dtype_is_float8(er_dtype t);
/* True for the types a tensor can hold (everything but complex, string,
 * float4 and undefined). */
bool er__dtype_is_numeric(er_dtype t);

/* IEEE half and bfloat16 conversions (round to nearest even). */
float er__f16_to_f32(uint16_t h);
uint16_t er__f32_to_f16(float f);
float er__bf16_to_f32(uint16_t h);
uint16_t er__f32_to_bf16(float f);
/* double -> float rounded to odd (truncate, then set the last bit when
 * inexact). Rounding that result to nearest-even into half or bfloat16 gives
 * the correctly rounded narrow value; a plain double -> float -> half chain
 * can be off by one unit when the first rounding lands on a tie. */
float er__f64_to_f32_odd(double d);
/* float8 conversions; `saturate` follows the ONNX Cast rule. */
float er__f8_to_f32(uint8_t v, er_dtype t);
uint8_t er__f32_to_f8(float f, er_dtype t, bool saturate);

/* Generic element access for reference code that has to handle every type:
 * element `i` of `data` as a double / int64, and stores back with the ONNX
 * conversion rules (float to int truncates toward zero, like a C cast; out of
 * range is the platform's behaviour and is avoided by callers). */
double er__load_f64(const void *data, er_dtype t, int64_t i);
int64_t er__load_i64(const void *data, er_dtype t, int64_t i);
void er__store_f64(void *data, er_dtype t, int64_t i, double v);
void er__store_i64(void *data, er_dtype t, int64_t i, int64_t v);

/* True when ER_FORCE_REFERENCE is set to a non-empty value other than 0:
 * every layer then keeps to its reference kernels. */
bool er__force_reference_env(void);
/* Monotonic clock in nanoseconds. */
uint64_t er__now_ns(void);

/* Host byte order is little-endian, like the ONNX raw_data encoding. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "edgerun assumes a little-endian host (ONNX raw_data is little-endian)"
#endif

#endif /* ER_CORE_H */
