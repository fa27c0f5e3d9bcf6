/* op-table.c - the table of operator implementations and ONNX schema
 * version resolution. Adding an op touches its group file's array, not this
 * file; adding a group adds one line to `groups` below. */
#include <stdio.h>

#include "ops/op.h"
#include "ops/op-groups.h"

static const er_op_def *const *const groups[] = {
#define ER_OP_GROUP(name) er__ops_##name,
    ER_OP_GROUP_LIST(ER_OP_GROUP)
#undef ER_OP_GROUP
};

/* ---- ONNX schema history (generated) ------------------------------------ */

typedef struct onnx_op_versions {
  const char *name;
  int versions[16];  /* ascending since-versions, 0-terminated */
} onnx_op_versions;

static const onnx_op_versions onnx_ops[] = {
#define ER_ONNX_OP(name, ...) {name, {__VA_ARGS__, 0}},
#include "ops/onnx-versions.inc"
#undef ER_ONNX_OP
};

int er__onnx_op_version(const char *op_type, int64_t opset) {
  for (size_t i = 0; i < ER_ARRAY_LEN(onnx_ops); i++) {
    if (strcmp(onnx_ops[i].name, op_type) != 0) continue;
    int best = 0;
    for (const int *v = onnx_ops[i].versions; *v; v++)
      if (*v <= opset) best = *v;
    return best;
  }
  return 0;
}

int er__onnx_max_opset(void) { return ER_ONNX_MAX_OPSET; }

const er_op_def *er__op_find(const char *domain, const char *op_type, int version) {
  const er_op_def *op = er__op_find_builtin(domain, op_type, version);
  /* Operators registered by the application (er_custom_op_register). */
  return op ? op : er__custom_op_find(domain, op_type, version);
}

const er_op_def *er__op_find_builtin(const char *domain, const char *op_type, int version) {
  /* Also on every run (fused ops' shape checks find the op they extend):
   * the first byte rules out most of the ~200 ops without a call. */
  for (size_t g = 0; g < ER_ARRAY_LEN(groups); g++)
    for (const er_op_def *const *d = groups[g]; *d; d++) {
      const er_op_def *op = *d;
      if (op->name[0] != op_type[0] || strcmp(op->name, op_type) != 0 || strcmp(op->domain, domain) != 0) continue;
      if (version >= op->min_version && version <= op->max_version) return op;
    }
  return NULL;
}

void er__op_versions_str(const char *domain, const char *op_type, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (size_t g = 0; g < ER_ARRAY_LEN(groups); g++)
    for (const er_op_def *const *d = groups[g]; *d; d++) {
      const er_op_def *op = *d;
      if (strcmp(op->name, op_type) != 0 || strcmp(op->domain, domain) != 0) continue;
      if (n < size)
        n += (size_t)snprintf(buf + n, size - n, "%s%d to %d", n ? ", " : "", op->min_version,
                              op->max_version);
    }
}
