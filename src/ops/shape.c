/* shape.c - operators of the "shape" group. */
#include "ops/op.h"
#include "ops/op-groups.h"

const er_op_def *const er__ops_shape[] = {
    NULL,
};
