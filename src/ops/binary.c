/* binary.c - elementwise operators with broadcasting: arithmetic,
 * comparison and logic. */
#include "ops/op.h"
#include "ops/op-groups.h"

/* ======================================================================== */
/* Shared machinery                                                          */
/* ======================================================================== */

/* check() for a broadcasting op of two inputs of the same type from
 * `types`, giving an output of type `out_type` (UNDEFINED = input type). */
static er_status check_broadcast2(er_kctx *ctx, const er_dtype *types, er_dtype out_type) {
  ER_CHECK(er__require_type(ctx, 0, types));
  ER_CHECK(er__require_type(ctx, 1, types));
  ER_CHECK(er__require_same_type(ctx, 0, 1));
  er_tensor *y = ctx->out[0];
  const er_tensor *ins[2] = {ctx->in[0], ctx->in[1]};
  er_dtype t = out_type != ER_DTYPE_UNDEFINED ? out_type : ins[0]->dtype;
  er__tensor_set(y, t, -1, NULL);
  return er__broadcast_shapes(ctx, 2, ins, y);
}

/* ======================================================================== */
/* Add                                                                       */
/* ======================================================================== */

static er_status add_check(er_kctx *ctx) {
  return check_broadcast2(ctx, er__types_numeric, ER_DTYPE_UNDEFINED);
}

static er_status add_run(er_kctx *ctx) {
  const er_tensor *a = ctx->in[0], *b = ctx->in[1];
  er_tensor *y = ctx->out[0];
  const er_tensor *ins[2] = {a, b};
  er_bcast it;
  int64_t n = er__count(y);
  er__bcast_init(&it, 2, ins, y);
  switch (y->dtype) {
    case ER_DTYPE_FLOAT: {
      const float *pa = a->data, *pb = b->data;
      float *py = y->data;
      for (int64_t i = 0; i < n; i++, er__bcast_next(&it)) py[i] = pa[it.off[0]] + pb[it.off[1]];
      break;
    }
    default:
      if (er__dtype_is_float(y->dtype)) {
        for (int64_t i = 0; i < n; i++, er__bcast_next(&it))
          er__store_f64(y->data, y->dtype, i,
                        er__load_f64(a->data, a->dtype, it.off[0]) + er__load_f64(b->data, b->dtype, it.off[1]));
      } else {
        /* Integers wrap in two's complement, computed in unsigned 64-bit. */
        for (int64_t i = 0; i < n; i++, er__bcast_next(&it))
          er__store_i64(y->data, y->dtype, i,
                        (int64_t)((uint64_t)er__load_i64(a->data, a->dtype, it.off[0]) +
                                  (uint64_t)er__load_i64(b->data, b->dtype, it.off[1])));
      }
  }
  return ER_STATUS_OK;
}

static const er_op_def op_add = {
    .name = "Add", .domain = "", .min_version = 7, .max_version = 14,
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .check = add_check, .run = add_run,
};

const er_op_def *const er__ops_binary[] = {
    &op_add,
    NULL,
};
