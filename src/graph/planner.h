/* planner.h - the memory planner: intermediate tensors in one arena. */
#ifndef ER_PLANNER_H
#define ER_PLANNER_H

#include "core/core.h"

/* Assigns each of n tensors with bytes[v] > 0 and first[v] >= 0 a 64-byte
 * aligned offset such that two tensors whose lifetimes [first, last]
 * (node indices, inclusive) overlap never overlap in memory. offset_out[v]
 * is -1 for tensors not planned; *total_out is the arena size (bytes). */
er_status er__plan_memory(int32_t n, const int32_t *first, const int32_t *last, const uint64_t *bytes,
                          int64_t *offset_out, uint64_t *total_out);

#endif /* ER_PLANNER_H */
