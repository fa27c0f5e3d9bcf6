/* target.h - offline NPU compatibility: a target profile (JSON) describes
 * what an NPU's toolchain accepts, from its public documentation, and
 * er__target_check lists every node of a model that would not run on it,
 * with the rule it breaks. The format is described in profiles/README.md. */
#ifndef ER_TARGET_H
#define ER_TARGET_H

#include "ir/ir.h"

typedef struct er_target er_target;

/* Bytes of one violation's texts. */
#define ER_TARGET_RULE_BYTES 48
#define ER_TARGET_DETAIL_BYTES 240
/* The largest profile file read. */
#define ER_TARGET_MAX_FILE_BYTES (4u << 20)

typedef struct er_violation {
  int32_t node;                         /* index in the main graph */
  char rule[ER_TARGET_RULE_BYTES];      /* "op", "dtype", "rank", "dynamic",
                                           "dims.width", "strides", ... */
  char detail[ER_TARGET_DETAIL_BYTES];  /* the value and the limit */
  bool advisory;                        /* runs, but slower (alignment) */
} er_violation;

/* Loads and validates a profile: INVALID_ARGUMENT naming the field and the
 * file when it does not follow the format (unknown rule names included, so
 * a typo never silently disables a rule). */
er_status er__target_load(const char *path, er_target **target_out);
void er__target_free(er_target *t);

/* Profile texts (owned by the profile). */
const char *er__target_name(const er_target *t);
const char *er__target_title(const er_target *t);
const char *er__target_source(const er_target *t);  /* "title, version: url" */

/* Checks every node of g. *out (owned by the caller, free()) receives the
 * violations in node order; a node may break several rules. With
 * assume_quantized, float tensors count as int8 (the model as it will be
 * after quantization), so the structural rules show. */
er_status er__target_check(const er_target *t, const er_graph *g, bool assume_quantized, er_violation **out,
                           size_t *n_out);

#endif /* ER_TARGET_H */
