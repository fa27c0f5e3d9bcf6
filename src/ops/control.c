/* control.c - operators of the "control" group. */
#include "ops/op.h"
#include "ops/op-groups.h"

const er_op_def *const er__ops_control[] = {
    NULL,
};
