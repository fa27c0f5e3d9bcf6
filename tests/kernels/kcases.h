/* kcases.h - what the case generator files share. */
#ifndef ER_KCASES_H
#define ER_KCASES_H

#include <stdio.h>
#include <string.h>

#include "kharness.h"

/* The fused activations (ops/fused.h), by index: sets case c's
 * activation attributes (when c is not NULL) and writes its label. */
extern const int er_kcases_n_activations;
void er_kcases_activation(int i, kcase *c, char *label, size_t size);

extern const case_gen kcases_gemm[];
extern const case_gen kcases_conv[];
extern const case_gen kcases_convt[];
extern const case_gen kcases_pool[];
extern const case_gen kcases_eltwise[];
extern const case_gen kcases_norm[];
extern const case_gen kcases_layout[];
extern const case_gen kcases_quant[];
extern const case_gen kcases_rnn[];
extern const case_gen kcases_attn[];
extern const case_gen kcases_blocked[];

#endif
