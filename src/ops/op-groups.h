/* op-groups.h - the operator group files. Each src/ops/<group>.c defines
 * `const er_op_def *const er__ops_<group>[]`, a NULL-terminated array. */
#ifndef ER_OP_GROUPS_H
#define ER_OP_GROUPS_H

#include "ops/op.h"

#define ER_OP_GROUP_LIST(X) \
  X(unary)                  \
  X(binary)                 \
  X(shape)                  \
  X(index)                  \
  X(reduce)                 \
  X(conv)                   \
  X(norm)                   \
  X(matmul)                 \
  X(resize)                 \
  X(quant)                  \
  X(rnn)                    \
  X(control)                \
  X(misc)                   \
  X(attention)              \
  X(signal)                 \
  X(detect)                 \
  X(fused)                  \
  X(blocked)                \
  X(qfused)

#define ER_OP_GROUP_DECL(name) extern const er_op_def *const er__ops_##name[];
ER_OP_GROUP_LIST(ER_OP_GROUP_DECL)
#undef ER_OP_GROUP_DECL

#endif /* ER_OP_GROUPS_H */
