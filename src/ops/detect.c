/* detect.c - operators of the "detect" group. */
#include "ops/op.h"
#include "ops/op-groups.h"

const er_op_def *const er__ops_detect[] = {
    NULL,
};
