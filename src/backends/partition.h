/* partition.h - the partitioner: places each node of a graph on a backend,
 * orders the nodes so each backend gets maximal subgraphs, finds the values
 * that cross between them (the transfers), and measures how much compute
 * falls back to the CPU.
 *
 * Placement: a node goes to the first preferred backend whose supports_op
 * accepts it; otherwise to the CPU, with the preferred backend's reason
 * recorded (or an error when fallback is off).
 *
 * Grouping: nodes are scheduled greedily in a topological order that keeps
 * running nodes of the current backend while any is ready and switches only
 * when none is; each run of one backend in that order is a segment. On a
 * graph with side branches this yields fewer, larger segments than cutting
 * the model's own node order (a CPU-only branch no longer splits the GPU
 * work around it). */
#ifndef ER_PARTITION_H
#define ER_PARTITION_H

#include "backends/backend.h"

/* The most preferred backends a session may list (the CPU is always added
 * behind them). */
#define ER_MAX_PREFERRED_BACKENDS 8
#define ER_MAX_PLAN_BACKENDS (ER_MAX_PREFERRED_BACKENDS + 1)

/* Longest reason kept per node. */
#define ER_PLACE_REASON_BYTES 200

typedef struct er_plan_segment {
  er_backend *backend;
  int32_t *nodes;            /* [n_nodes] node indices in execution order */
  int32_t n_nodes;
  int32_t *inputs;           /* [n_inputs] values read from outside, not
                                fixed at load */
  int32_t n_inputs;
  int32_t *outputs;          /* [n_outputs] values read by later segments or
                                graph outputs */
  int32_t n_outputs;
  int32_t *release;          /* [n_release] intermediates whose last reader
                                is in this segment: freed after it */
  int32_t n_release;
} er_plan_segment;

typedef struct er_plan {
  int32_t n_nodes;
  er_backend **place;        /* [n_nodes] */
  char (*reason)[ER_PLACE_REASON_BYTES];  /* [n_nodes] "" = on preferred */
  uint64_t *macs;            /* [n_nodes] */
  int *segment;              /* [n_nodes] */
  er_plan_segment *segs;     /* [n_segs] in execution order */
  int n_segs;
  er_partition_summary summary;  /* strings point at static/backend names */
} er_plan;

/* Builds the plan for the main graph `g`. `prefs` are the preferred backends
 * in order (n_prefs may be 0: CPU only). NO_FALLBACK naming the nodes when
 * !allow_fallback and a node would land on the CPU; UNSUPPORTED when not
 * even the CPU can run a node. The plan is owned by the caller. */
er_status er__plan_build(const er_graph *g, er_backend *const *prefs, size_t n_prefs,
                         bool allow_fallback, er_plan **plan_out);
/* The two halves of er__plan_build, for a caller that rewrites the graph
 * once it knows where nodes go (session creation): er__plan_place asks the
 * backends where each node goes (and fails as er__plan_build does);
 * er__plan_finish orders the placed nodes, cuts the segments and fills
 * the summary, once per plan. */
er_status er__plan_place(const er_graph *g, er_backend *const *prefs, size_t n_prefs, bool allow_fallback,
                         er_plan **plan_out);
er_status er__plan_finish(er_plan *plan, const er_graph *g, er_backend *const *prefs, size_t n_prefs);
void er__plan_free(er_plan *plan);

/* A growable list of value ids (free v when done). */
typedef struct er_id_list {
  int32_t *v;
  int32_t n, cap;
} er_id_list;

/* Sets *reads to every value of g that node i reads: its inputs and the
 * values its subgraphs capture. False when out of memory. */
bool er__node_reads(const er_graph *g, int32_t i, er_id_list *reads);

/* Estimated multiply-accumulates of a node from the shapes known at load
 * (unknown dims count as 1); one per output element for ops without a
 * reduction inside. */
uint64_t er__node_macs(const er_graph *g, const er_node *node);

/* Bytes of a value from its load-time shape (unknown dims count as 1). */
uint64_t er__value_bytes(const er_graph *g, int32_t id);

/* Whether value `id` of the main graph is fixed at load (a weight or a
 * folded constant that no caller can override). */
bool er__value_is_fixed(const er_graph *g, int32_t id);

#endif /* ER_PARTITION_H */
