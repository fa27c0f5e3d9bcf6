/* signal.c - operators of the "signal" group. */
#include "ops/op.h"
#include "ops/op-groups.h"

const er_op_def *const er__ops_signal[] = {
    NULL,
};
