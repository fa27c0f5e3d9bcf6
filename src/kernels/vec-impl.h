/* vec-impl.h - the vectorized non-GEMM kernels of vec.h, written once over
 * simd.h and vmath.h, one family per header; vec-<isa>.c includes this
 * after defining its ISA and builds its table with VEC_OPS_INIT:
 *
 *   #define ER_SIMD_AVX2 1
 *   #include "kernels/simd.h"
 *   #include "kernels/vmath.h"
 *   #include "kernels/vec-impl.h"
 *   const er_vec_ops er__vec_avx2 = VEC_OPS_INIT;
 */
#include <float.h>
#include <math.h>

#include "kernels/vec.h"
#include "kernels/window.h"

/* The first n lanes of v, the rest 0 (in registers: reading back what a
 * partial store just wrote stalls store forwarding). */
static inline vf first_lanes(vf v, int n) {
  static const float iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return n >= VN ? v : v_sel(v_lt(v_ld(iota), v_set((float)n)), v_zero(), v);
}

/* The families, each after those it calls (the window kernels run
 * vec_unary for their activation). */
#include "kernels/vec-elt-impl.h"
#include "kernels/vec-window-impl.h"
#include "kernels/vec-norm-impl.h"
#include "kernels/vec-im2col-impl.h"
#include "kernels/vec-gemv-impl.h"
#include "kernels/vec-wino-impl.h"
#include "kernels/vec-conv-impl.h"
#include "kernels/vec-rnn-impl.h"

/* The table of one ISA, the same fields for all. */
#define VEC_OPS_INIT                                                             \
  {                                                                              \
    .isa = ER_ISA_NAME, .vn = VN, .dw = vec_dw, .global_pool = vec_global_pool,  \
    .unary = vec_unary, .binary = vec_binary, .binary_rows = vec_binary_rows,    \
    .affine = vec_affine, .lrn = vec_lrn, .softmax = vec_softmax,                \
    .layernorm = vec_layernorm, .instnorm = vec_instnorm,                        \
    .im2col_pack = vec_im2col_pack, .gemv = vec_gemv,                            \
    .wino_input = vec_wino_input, .wino_output = vec_wino_output,                \
    .wino4_input = vec_wino4_input, .wino4_output = vec_wino4_output,            \
    .wino_weights = vec_wino_weights, .lstm_cell = vec_lstm_cell,                \
    .gru_gates = vec_gru_gates, .gru_update = vec_gru_update,                    \
    .cd_rows = CD_ROWS, .conv_direct = vec_conv_direct,                          \
  }
