/* attention.c - operators of the "attention" group. */
#include "ops/op.h"
#include "ops/op-groups.h"

const er_op_def *const er__ops_attention[] = {
    NULL,
};
