/* cpu-kernels.h - optimized CPU kernels: CPU features, the thread pool, and
 * the kernel table the CPU backend chooses from when it compiles a graph.
 *
 * Every node has a reference kernel (its op's run(), src/ops/); optimized
 * kernels are alternatives chosen once, at compile time, when the CPU has
 * their ISA and the node's types, shapes and attributes are ones they
 * handle. ER_FORCE_REFERENCE=1 in the environment (or the session option
 * force_reference) skips them all. Kernel names carry dtype, kernel and ISA,
 * XNNPACK-style: "f32_gemm_6x16__avx2_fma". Every optimized kernel is tested
 * against the reference by tests/kernels/ (seeded inputs, sizes around its
 * tiles, guard bytes), and skipped with a message where the CPU lacks it. */
#ifndef ER_CPU_KERNELS_H
#define ER_CPU_KERNELS_H

#include "graph/ir.h"
#include "ops/op.h"

/* ======================================================================== */
/* CPU features                                                              */
/* ======================================================================== */

typedef struct er_cpu_features {
  /* x86 */
  bool sse41, avx, avx2, fma, f16c;
  bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512vbmi, avx512bf16;
  bool avxvnni;      /* VEX-encoded VNNI (Alder Lake+) */
  bool amx_int8;     /* AMX tiles usable (the OS granted the state) */
  /* AVX-512 executed as two 256-bit halves (AMD family 19h, Zen 4): the
   * same multiply-adds a cycle as AVX2, which moves the point where
   * Winograd beats the direct convolution (er__cpu_node_prefers_planar). */
  bool avx512_split;
  /* Arm */
  bool neon, dotprod, i8mm;
  int cores;         /* online logical CPUs */
} er_cpu_features;

/* Detected once (thread-safe) on first use. */
const er_cpu_features *er__cpu_features(void);
/* Writes "avx2 fma avx512f ..." into buf. */
const char *er__cpu_features_str(const er_cpu_features *f, char *buf, size_t size);

/* ======================================================================== */
/* Thread pool                                                               */
/* ======================================================================== */

typedef struct er_thread_pool er_thread_pool;

/* A pool of `threads` - 1 persistent workers (the caller is the last one).
 * threads <= 1 creates a pool that runs everything on the caller. */
er_status er__pool_create(int threads, er_thread_pool **pool_out);
void er__pool_free(er_thread_pool *pool);
int er__pool_threads(const er_thread_pool *pool);

/* Work in [begin, end) of a range. */
typedef void (*er_range_fn)(void *arg, int64_t begin, int64_t end);

/* Splits [0, n) into er__pool_threads() contiguous chunks (the split
 * depends only on n and the thread count, so results are deterministic)
 * and runs them, the caller taking part. `grain` is the smallest chunk
 * worth a thread (fewer chunks when n is small). When another run is
 * using the pool at the moment, the caller runs every chunk itself, in the
 * same split: same results, no waiting. pool may be NULL (one thread). */
void er__parallel_for(er_thread_pool *pool, int64_t n, int64_t grain, er_range_fn fn, void *arg);

/* Like er__parallel_for, but [0, n) is split into up to 65535 items of
 * near-equal size (one index each when n is smaller), handed to whichever
 * thread is free: a worker slowed by another process on its core takes
 * fewer items instead of holding everyone back. fn must compute the same
 * result for an item whoever runs it. */
void er__parallel_for_items(er_thread_pool *pool, int64_t n, er_range_fn fn, void *arg);

/* The calling thread's slot: 0 on the thread that called
 * er__parallel_for (and on any thread that is not a pool worker), i on
 * worker i (1 .. threads - 1). A chunk function indexes per-thread
 * scratch with it, so a loop may have more chunks than scratch slots. */
int er__pool_slot(void);

/* ======================================================================== */
/* Kernels                                                                   */
/* ======================================================================== */

/* What a kernel sees at compile time: the node and what is known of its
 * inputs and outputs (shapes may hold -1; data is set for constants, e.g.
 * weights). */
typedef struct er_kernel_info {
  const er_node *node;
  int n_in, n_out;
  const er_tensor *const *in;   /* [n_in], NULL for omitted inputs */
  const er_tensor *const *out;  /* [n_out], NULL for omitted outputs */
  const er_cpu_features *cpu;
} er_kernel_info;

/* What a kernel sees at run time. */
typedef struct er_kernel_run {
  er_kctx *ctx;                 /* inputs and allocated outputs */
  const void *state;            /* from prepare(); read-only, shared by runs */
  void *scratch;                /* scratch_bytes, 64-byte aligned, per run */
  size_t scratch_bytes;
  er_thread_pool *pool;         /* may be NULL */
  /* (may be NULL) the run context's spill scratch: er__kr_scratch grows
   * it when scratch_bytes is too small, instead of allocating per run */
  void **spill;
  size_t *spill_bytes;
} er_kernel_run;

typedef struct er_cpu_kernel {
  const char *name;             /* "<dtype>_<kernel>__<isa>" */
  const char *op;               /* op type */
  const char *domain;           /* "" (ONNX) or "com.edgerun" (fused ops) */
  /* Whether the kernel handles this node given what is known and the CPU.
   * Must be cheap and must not fail. */
  bool (*supports)(const er_kernel_info *ki);
  /* (optional) Per-node state made once: packed weights, folded constants.
   * *scratch_bytes_out is the per-run scratch the kernel needs when the
   * shapes are fully known (0 otherwise: run() may then allocate). */
  er_status (*prepare)(const er_kernel_info *ki, void **state_out, size_t *scratch_bytes_out);
  er_status (*run)(const er_kernel_run *kr);
  void (*release)(void *state); /* (optional) */
} er_cpu_kernel;

/* Every kernel (for the test harness and `edgerun devices`). */
const er_cpu_kernel *const *er__cpu_kernels_all(void);
/* The first kernel that supports the node, or NULL (use the reference). */
const er_cpu_kernel *er__cpu_kernel_pick(const er_kernel_info *ki);
/* The channel block the session's layout pass uses (graph/passes-blocked.c):
 * the vector width of the best ISA the blocked kernels have (16 floats on
 * AVX-512, 8 on AVX2, 4 on NEON), or 0 to keep every tensor planar: no
 * such ISA, or EDGERUN_LAYOUT=planar in the environment (for comparisons
 * and as a way out). */
int er__cpu_layout_block(void);
/* Whether node i of g runs faster on its planar kernel than it would in
 * the blocked layout (the layout pass then leaves it planar): its planar
 * kernel is Winograd with enough channels on a large enough map (the rule
 * and its measurements are in cpu-backend.c), or a direct convolution to at
 * most half a block of outputs. */
struct er_graph;
bool er__cpu_node_prefers_planar(const struct er_graph *g, int32_t i);
/* True when ER_FORCE_REFERENCE is set to a non-empty value other than 0. */
bool er__force_reference_env(void);

#endif /* ER_CPU_KERNELS_H */
