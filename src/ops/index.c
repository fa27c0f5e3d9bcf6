/* index.c - operators of the "index" group. */
#include "ops/op.h"
#include "ops/op-groups.h"

const er_op_def *const er__ops_index[] = {
    NULL,
};
