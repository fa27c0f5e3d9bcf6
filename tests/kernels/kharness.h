/* kharness.h - the kernel test harness (tests/kernels): every optimized CPU
 * kernel against its op's reference kernel, in the spirit of ggml's
 * test-backend-ops and XNNPACK's kernel tests.
 *
 * A case is one node (op, attributes, inputs with seeded random data, a
 * tolerance). For each kernel in the table the harness builds every case
 * of the kernel's op, asks supports(), prepares the kernel with what a
 * compiled graph would know (constant inputs carry data; "dynamic" cases
 * hide the non-constant dims), runs the reference run() and the kernel on
 * 1, 2 and 3 threads, and checks: the tolerance against the reference,
 * bit-identical results across thread counts, untouched guard bytes after
 * every output and scratch buffer, untouched inputs. Kernels whose ISA the
 * CPU lacks are skipped and listed; a kernel that no case reaches fails. */
#ifndef ER_KHARNESS_H
#define ER_KHARNESS_H

#include "core/core.h"
#include "core/tensor.h"
#include "ir/ir.h"
#include "ops/op.h"

#define KC_MAX_IO 12 /* QLinearConv has 9 inputs */
#define KC_MAX_ATTRS 16
#define KC_MAX_ATTR_VALUES 32

/* How outputs are compared with the reference. */
typedef enum tol_kind {
  TOL_EXACT,     /* bit-identical (NaN matches NaN): copies, max, layout */
  TOL_ELEMENT,   /* each |got - want| <= atol + rtol * |want| */
  TOL_NORM,      /* NMSE <= nmse and max |got - want| <= rtol * max |want| + atol:
                    sums whose order differs (GEMM, convolution, reductions) */
} tol_kind;

typedef struct tolerance {
  tol_kind kind;
  double rtol, atol, nmse;
} tolerance;

typedef struct kcase {
  char name[256];
  const char *op, *domain;
  int version;
  er_attr attrs[KC_MAX_ATTRS];
  int n_attrs;
  int64_t ints[KC_MAX_ATTRS][KC_MAX_ATTR_VALUES];
  float floats[KC_MAX_ATTRS][KC_MAX_ATTR_VALUES];
  const char *strs[KC_MAX_ATTRS][KC_MAX_ATTR_VALUES];
  int n_in;
  er_tensor *in[KC_MAX_IO];      /* NULL = omitted optional input */
  bool is_const[KC_MAX_IO];      /* data known at compile time */
  int n_out;
  bool dynamic;                  /* non-constant dims unknown at compile time */
  bool dynamic_batch;            /* only their dim 0 unknown at compile time */
  bool unknown_rank;             /* non-constant inputs of unknown rank at compile
                                    time (an If whose branches differ) */
  const char *must_take;         /* kernels whose name holds one of these '|'-separated
                                    fragments must support the case (NULL: any may
                                    decline) */
  tolerance tol;
  uint64_t rng;
} kcase;

/* True under --time: generators add their full-size (model-like) cases. */
extern bool kc_timing;

/* Receives each case a generator builds. */
typedef void (*case_fn)(kcase *c, void *arg);

/* ---- building cases (kharness.c) ---------------------------------------- */

void kc_begin(kcase *c, const char *op, const char *domain, int version, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void kc_free(kcase *c);
void kc_attr_int(kcase *c, const char *name, int64_t v);
void kc_attr_float(kcase *c, const char *name, float v);
void kc_attr_string(kcase *c, const char *name, const char *s);
void kc_attr_ints(kcase *c, const char *name, int n, const int64_t *v);
void kc_attr_floats(kcase *c, const char *name, int n, const float *v);
void kc_attr_strings(kcase *c, const char *name, int n, const char *const *v);
/* Appends a float32 input of the given shape, uniform in [lo, hi). */
er_tensor *kc_input(kcase *c, int rank, const int64_t *dims, float lo, float hi, bool constant);
/* Appends an int64 input (e.g. shapes, axes) holding `values`. */
er_tensor *kc_input_i64(kcase *c, int rank, const int64_t *dims, const int64_t *values, bool constant);
/* Appends an omitted optional input. */
void kc_input_none(kcase *c);
/* Sprinkles special values (NaN, +-inf, +-0, huge) into a float tensor. */
void kc_specials(kcase *c, er_tensor *t);
float kc_uniform(kcase *c, float lo, float hi);

#define DIMS(...) (const int64_t[]){__VA_ARGS__}
#define NDIMS(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), DIMS(__VA_ARGS__)

/* Tolerances, named once; the comments say why each is what it is. */
extern const tolerance TOL_GEMM, TOL_EXACT_T, TOL_EXPF, TOL_GELU, TOL_ARITH, TOL_REDUCE;

/* ---- generators, one per op family (kcases-*.c) -------------------------- */

typedef struct case_gen {
  const char *op, *domain;
  void (*gen)(case_fn fn, void *arg);
} case_gen;

/* NULL-terminated tables of generators, one per kcases-*.c file. */
extern const case_gen *const kcase_groups[];

#endif
