/* kcases.c - the list of case generator tables. */
#include "kcases.h"

const case_gen *const kcase_groups[] = {
    kcases_gemm,
    kcases_conv,
    kcases_convt,
    kcases_pool,
    kcases_eltwise,
    kcases_norm,
    kcases_layout,
    kcases_quant,
    kcases_rnn,
    kcases_attn,
    kcases_blocked,
    NULL,
};
