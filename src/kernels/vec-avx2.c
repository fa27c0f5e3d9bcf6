/* vec-avx2.c - the vectorized non-GEMM kernels (vec-impl.h) for avx2.
 * Called only when er__cpu_features() reports the ISA. */
#define ER_SIMD_AVX2 1
#include "kernels/simd.h"
#include "kernels/vmath.h"
#include "kernels/vec-impl.h"

const er_vec_ops er__vec_avx2 = {
    .isa = ER_ISA_NAME,
    .vn = VN,
    .dw = vec_dw,
    .global_pool = vec_global_pool,
    .unary = vec_unary,
    .binary = vec_binary,
    .binary_rows = vec_binary_rows,
    .affine = vec_affine,
    .lrn = vec_lrn,
    .softmax = vec_softmax,
    .layernorm = vec_layernorm,
    .instnorm = vec_instnorm,
    .im2col_pack = vec_im2col_pack,
    .gemv = vec_gemv,
    .wino_input = vec_wino_input,
    .wino_output = vec_wino_output,
    .wino4_input = vec_wino4_input,
    .wino4_output = vec_wino4_output,
    .wino_weights = vec_wino_weights,
    .lstm_cell = vec_lstm_cell,
    .gru_gates = vec_gru_gates,
    .gru_update = vec_gru_update,
    .cd_rows = CD_ROWS,
    .conv_direct = vec_conv_direct,
};
