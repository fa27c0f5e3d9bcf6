/* rewrite.h - the graph-rewrite toolkit: the one way the graph passes
 * (passes-*.c, contrib.c, hoist.c) and the quantizer's graph builder
 * (quant/qgraph.c) make values, constants, nodes and attributes, count a
 * value's readers and put the edited node list in place.
 *
 * Two ways to edit, both ending in a commit that leaves the graph's links
 * true (er__graph_check_links):
 *
 *   in place   er_rewrite: nodes are marked dead and new ones appended;
 *              reader counts tell a pass whether a value may disappear;
 *              er__rw_commit drops the dead nodes, keeping the order.
 *   rebuilt    er_rw_list: a new node list built in order (kept nodes
 *              copied, new ones pushed); er__rw_list_commit makes it the
 *              graph's and relinks producers.
 *
 * Everything made here lives in the graph's arena, or for tensor data, in
 * the graph's owned list: nothing is freed piecemeal. Names of new values
 * and nodes are `base/er_<what>N`, unique in the graph. */
#ifndef ER_GRAPH_REWRITE_H
#define ER_GRAPH_REWRITE_H

#include "ir/ir.h"

/* A reader count that no rewrite can bring to zero or one: graph outputs
 * and values a subgraph captures count this much. */
#define ER_RW_PINNED 1000

/* ---- looking at the graph ------------------------------------------------ */

/* Node n is the default-domain op `op`. */
bool er__rw_is(const er_node *n, const char *op);
/* Node n is `op` of `domain`. */
bool er__rw_is_in(const er_node *n, const char *domain, const char *op);
/* Value v (>= 0) has element type float32. */
bool er__rw_is_f32(const er_graph *g, int32_t v);
/* A float constant of one element, as a double; NAN otherwise. */
double er__rw_const_scalar(const er_graph *g, int32_t v);
/* Node n carries a subgraph attribute. */
bool er__rw_has_graphs(const er_node *n);

/* ---- making things ------------------------------------------------------- */

/* A name `base/er_<what>N` (N from 0, the first one free in g), in the
 * graph's arena; NULL when out of memory. */
const char *er__rw_name(er_graph *g, const char *base, const char *what);
/* `name` itself when free in g, else `name_K` for the first free K >= 1;
 * arena copy, NULL when out of memory. */
const char *er__rw_name_free(er_graph *g, const char *name);
/* Copies ids into the arena (n may be 0; never returns a NULL for a
 * success). */
int32_t *er__rw_ids(er_graph *g, const int32_t *ids, int n);

/* A new intermediate value named er__rw_name(base, what) of `dtype` and
 * shape (rank -1: unknown; dims NULL for rank 0 or -1). */
er_status er__rw_new_value(er_graph *g, const char *base, const char *what, er_dtype dtype, int rank,
                           const int64_t *dims, int32_t *id_out);
/* A new constant value named er__rw_name(base, what) holding *t. t is
 * moved: after the call its data belongs to the graph or has been
 * released, whatever the result. */
er_status er__rw_new_const(er_graph *g, const char *base, const char *what, er_tensor *t, int32_t *id_out);
/* Turns existing value `id` into a constant holding *t (moved as above). */
er_status er__rw_make_const(er_graph *g, int32_t id, er_tensor *t);
/* A new constant of `dtype`, rank 1 [n] copied from `data` (n values of
 * that type), or rank 0 when n < 0 (one value). */
er_status er__rw_new_const_data(er_graph *g, const char *base, const char *what, er_dtype dtype, int64_t n,
                                const void *data, int32_t *id_out);
/* A new constant of `dtype` filled from doubles (er__store_f64): rank 1
 * [n], or rank 0 holding vals[0] when rank is 0. */
er_status er__rw_new_const_f64(er_graph *g, const char *base, const char *what, er_dtype dtype, int rank,
                               int64_t n, const double *vals, int32_t *id_out);

/* Attribute values (names and arrays must outlive the graph: literals or
 * arena memory). */
er_attr er__rw_attr_int(const char *name, int64_t v);
er_attr er__rw_attr_float(const char *name, float v);
er_attr er__rw_attr_string(const char *name, const char *v);
er_attr er__rw_attr_ints(const char *name, int64_t *v, int64_t n);

/* Node n's attributes: its own minus any named in `extra`, then `extra`
 * (a replace-or-add). */
er_status er__rw_merge_attrs(er_graph *g, er_node *n, const er_attr *extra, int n_extra);
/* Node n's attributes: those of its own named in `keep` (NULL-terminated;
 * NULL keeps none), then `extra`. */
er_status er__rw_set_attrs(er_graph *g, er_node *n, const char *const *keep, const er_attr *extra, int n_extra);
/* Node n reads `ids` from now on. */
er_status er__rw_set_inputs(er_graph *g, er_node *n, const int32_t *ids, int count);
/* Node n becomes op `op` version `version` of `domain` ("" = default),
 * bound to its definition; INTERNAL when the op table lacks it. */
er_status er__rw_set_op(er_node *n, const char *domain, const char *op, int version);
/* Node `producer` writes `to` where it wrote `from`; `from` loses its
 * producer (a consumer of `from` is being removed and its output `to`
 * now comes straight from `producer`). */
void er__rw_redirect_output(er_graph *g, int32_t producer, int32_t from, int32_t to);

/* ---- editing in place ---------------------------------------------------- */

typedef struct er_rewrite {
  er_graph *g;
  int32_t *uses;      /* [ucap] readers per value: one per node input,
                         ER_RW_PINNED for graph outputs and captures */
  int32_t ucap;
  bool *dead;         /* [ncap] nodes removed, dropped at commit */
  int32_t ncap;
  int changed;        /* rewrites made; a pass bumps it */
} er_rewrite;

/* Starts editing g: reader counts as g stands, no node dead. */
er_status er__rw_begin(er_rewrite *rw, er_graph *g);
/* Recounts the readers of every value over the live nodes (after a
 * rewrite changed who reads what). */
er_status er__rw_count_uses(er_rewrite *rw);
/* The one live node reading v, once, or -1. */
int32_t er__rw_sole_consumer(const er_rewrite *rw, int32_t v);
/* The live node producing v, or -1. */
int32_t er__rw_producer(const er_rewrite *rw, int32_t v);
/* Every live node reading `from` reads `to` instead. */
void er__rw_replace_uses(er_rewrite *rw, int32_t from, int32_t to);
/* Appends a node: a copy of `proto` (its op, attributes) named
 * er__rw_name(proto->name, "n"), reading `in` and writing `out`; its
 * index into *index_out. Node pointers taken before are invalid after. */
er_status er__rw_add_node(er_rewrite *rw, const er_node *proto, const int32_t *in, int n_in, const int32_t *out,
                          int n_out, int32_t *index_out);
/* Marks live nodes none of whose outputs are read (backwards, so chains
 * go at once) dead, updating the counts. Nodes without outputs stay, and
 * so do nodes with subgraphs when `keep_graphs`. */
void er__rw_prune(er_rewrite *rw, bool keep_graphs);
/* Drops the dead nodes (order kept) when there are any; the editor stays
 * usable with no node dead. */
void er__rw_commit(er_rewrite *rw);
/* Frees the editor's own arrays (not the graph's). */
void er__rw_end(er_rewrite *rw);

/* ---- rebuilding the node list -------------------------------------------- */

typedef struct er_rw_list {
  er_graph *g;
  er_node *nodes;     /* [n] the new list, in the graph's arena */
  int32_t n, cap;
} er_rw_list;

void er__rw_list_init(er_rw_list *l, er_graph *g);
/* Appends a copy of *n (its arrays are shared, not copied). */
er_status er__rw_list_push(er_rw_list *l, const er_node *n);
/* The list becomes the graph's nodes; producers relinked. */
void er__rw_list_commit(er_rw_list *l);

#endif /* ER_GRAPH_REWRITE_H */
