/* ir.h - the in-memory graph: the blueprint every later stage reads.
 *
 * A model owns one arena; every name, node, attribute and value of every
 * graph (subgraphs included) lives in it and dies with the model. Values are
 * referred to by index ("value id") within their graph. A subgraph refers to a
 * value of an enclosing graph through a value of kind ER_VALUE_OUTER whose
 * `outer` field is the id in the parent graph. */
#ifndef ER_IR_H
#define ER_IR_H

#include "core/core.h"
#include "core/tensor.h"

struct er_op_def;
struct er_graph;

typedef enum er_attr_type {
  ER_ATTR_UNDEFINED = 0,
  ER_ATTR_FLOAT = 1,
  ER_ATTR_INT = 2,
  ER_ATTR_STRING = 3,
  ER_ATTR_TENSOR = 4,
  ER_ATTR_GRAPH = 5,
  ER_ATTR_FLOATS = 6,
  ER_ATTR_INTS = 7,
  ER_ATTR_STRINGS = 8,
  ER_ATTR_TENSORS = 9,
  ER_ATTR_GRAPHS = 10,
  ER_ATTR_SPARSE_TENSOR = 11,
  ER_ATTR_SPARSE_TENSORS = 12,
  ER_ATTR_TYPE_PROTO = 13,
  ER_ATTR_TYPE_PROTOS = 14,
} er_attr_type;

typedef struct er_attr {
  const char *name;
  er_attr_type type;
  float f;                    /* FLOAT */
  int64_t i;                  /* INT */
  const char *s;              /* STRING: NUL-terminated copy */
  size_t s_len;               /* STRING: bytes (may contain NULs) */
  er_tensor *t;               /* TENSOR / SPARSE_TENSOR (densified) */
  struct er_graph *g;         /* GRAPH */
  int64_t n;                  /* element count of the list forms */
  float *floats;              /* FLOATS [n] */
  int64_t *ints;              /* INTS [n] */
  const char **strings;       /* STRINGS [n] */
  er_tensor **tensors;        /* TENSORS [n] */
  struct er_graph **graphs;   /* GRAPHS [n] */
} er_attr;

typedef struct er_node {
  const char *name;           /* "" when the model gives none */
  const char *op_type;
  const char *domain;         /* "" for the default ONNX domain */
  int n_inputs, n_outputs;
  int32_t *inputs;            /* [n_inputs] value ids; -1 = omitted optional */
  int32_t *outputs;           /* [n_outputs] value ids; -1 = omitted optional */
  int n_attrs;
  er_attr *attrs;             /* [n_attrs] */
  const struct er_op_def *op; /* resolved at load */
  int version;                /* schema since-version in force for this node */
} er_node;

typedef enum er_value_kind {
  ER_VALUE_INTERMEDIATE = 0,  /* produced by a node */
  ER_VALUE_INPUT,             /* graph input without initializer */
  ER_VALUE_CONSTANT,          /* initializer (maybe overridable) or folded */
  ER_VALUE_OUTER,             /* captured from an enclosing graph */
} er_value_kind;

typedef struct er_value {
  const char *name;
  er_tensor info;             /* dtype / rank / dims known so far; data NULL */
  const char **dim_params;    /* [dim_params_rank] symbolic names (entries
                                 may be NULL); NULL when none are declared.
                                 Read through er__value_dim_params(). */
  int32_t dim_params_rank;    /* the declared rank the names describe */
  er_tensor *constant;        /* CONSTANT: the data; NULL otherwise */
  int32_t producer;           /* node index; -1 when not node-produced */
  int32_t outer;              /* OUTER: value id in the parent graph */
  er_value_kind kind;
  bool is_graph_input;        /* listed in graph.input (may have a constant) */
  bool is_graph_output;
  bool has_declared_type;     /* info came from input/output/value_info */
} er_value;

/* The declared symbolic dim names of `v`, [v->info.rank], or NULL when none
 * are declared or the rank has changed since they were (a wrong declaration
 * that inference overruled): the names then describe other dims. */
static inline const char **er__value_dim_params(const er_value *v) {
  return v->dim_params && v->dim_params_rank == v->info.rank ? v->dim_params : NULL;
}

/* Tensors whose data someone must free, and where. */
typedef struct er_owned_list {
  er_tensor **v;
  size_t n, cap;
} er_owned_list;

typedef struct er_graph {
  const char *name;
  struct er_graph *parent;    /* enclosing graph; NULL for the main graph */
  struct er_model *model;     /* the model it came from */
  er_arena *arena;            /* where its nodes, values and names live: the
                                 model's, or a session's for a session's own
                                 optimized copy */
  er_owned_list *owned;       /* where tensors made for it are registered */
  const struct er_graph *origin; /* for a copy (er__graph_clone): the graph
                                 it copies, whose subgraphs it shares; NULL */
  int depth;                  /* 0 for the main graph */

  er_value *values;           /* [n_values] */
  int32_t n_values, cap_values;
  er_node *nodes;             /* [n_nodes], topologically ordered once valid */
  int32_t n_nodes;
  int32_t *inputs;            /* [n_inputs] value ids, as graph.input lists */
  int32_t n_inputs;
  int32_t *outputs;           /* [n_outputs] value ids */
  int32_t n_outputs;

  /* Name -> value id, open addressing; built while loading. */
  int32_t *index;             /* [index_cap], -1 = empty */
  uint32_t index_cap;
} er_graph;

typedef struct er_opset {
  const char *domain;         /* "" for the default domain */
  int64_t version;
} er_opset;

typedef struct er_meta {
  const char *key, *value;
} er_meta;

/* The loaded model: the main graph plus everything it references. */
struct er_model {
  er_arena arena;
  er_load_options limits;
  er_graph *graph;
  int64_t ir_version;
  er_opset *opsets;
  int n_opsets;
  int64_t default_opset;
  const char *producer_name, *producer_version, *domain, *doc;
  int64_t model_version;
  er_meta *meta;
  int n_meta;

  /* Where the bytes came from: a mapping of the file, or an owned copy. */
  void *map;
  size_t map_size;
  bool map_is_mmap;
  char *base_dir;             /* folder for external data; NULL = none */
  int base_dirfd;             /* open folder for openat(); -1 = none */

  /* Tensors that own data (external data, converted or folded tensors);
   * freed with the model. */
  er_owned_list owned;
  uint64_t total_bytes;       /* initializer bytes, checked against limits */

  /* Public info arrays built once at load. */
  er_value_info *input_info, *output_info;
  size_t n_input_info, n_output_info;
};

/* ---- construction helpers (ir.c) --------------------------------------- */

er_graph *er__graph_new(struct er_model *model, er_graph *parent, const char *name);
/* Value id for `name` in `g` (not searching parents), or -1. */
int32_t er__graph_find(const er_graph *g, const char *name);
/* Adds a new value called `name`; INVALID_GRAPH if it already exists. */
er_status er__graph_add_value(er_graph *g, const char *name, int32_t *id_out);
/* Resolves a name used by a node of `g`: a local value, else a value of an
 * enclosing graph captured as an OUTER value (created on first use, through
 * every graph in between). NOT_FOUND when no graph defines it. */
er_status er__graph_resolve(er_graph *g, const char *name, int32_t *id_out);
/* Tells the OS that the mapped model bytes [p, p + n) are not needed now
 * (whole pages inside the range only). Always safe: the mapping is private
 * and never written, so a later read faults the page back in from the file.
 * Used after weights are folded or packed elsewhere, to keep peak RSS near
 * one copy of the weights. No-op for models loaded from memory. */
void er__model_release_pages(const struct er_model *m, const void *p, size_t n);
/* Registers a tensor whose data the model must free. */
er_status er__model_own(struct er_model *model, er_tensor *t);
/* Registers a tensor with a list (freed by er__owned_free). */
er_status er__owned_add(er_owned_list *list, er_tensor *t);
void er__owned_free(er_owned_list *list);

/* A copy of main graph `src` that rewrites can change without touching
 * the model: values, nodes and their input/output lists are copied into
 * `arena` (subgraphs, attributes and constant data are shared, read-only);
 * value ids stay the same. Tensors made for the copy go to `owned`. */
er_status er__graph_clone(const er_graph *src, er_arena *arena, er_owned_list *owned, er_graph **out);

/* The constant value v holds, or NULL: not a constant, or an initializer
 * that is also a graph input from IR 4 on (a caller may override it). For
 * the graph passes. */
static inline const er_tensor *er__graph_const(const er_graph *g, int32_t v) {
  if (v < 0) return NULL;
  const er_value *val = &g->values[v];
  if (val->kind != ER_VALUE_CONSTANT || !val->constant) return NULL;
  if (val->is_graph_input && g->model->ir_version >= 4) return NULL; /* overridable */
  return val->constant;
}

/* The largest tensor a run of g may make, in bytes: the loading caller's
 * max_tensor_bytes (it caps what a model declares and what it computes). */
static inline uint64_t er__graph_tensor_cap(const er_graph *g) {
  return g->model && g->model->limits.max_tensor_bytes ? g->model->limits.max_tensor_bytes
                                                       : ER_DEFAULT_MAX_TENSOR_BYTES;
}

/* True when a and b are the same graph, or b is a copy of a (subgraphs
 * keep pointing at the original as their parent). */
static inline bool er__graph_same(const er_graph *a, const er_graph *b) {
  return a == b || (b->origin && a == b->origin);
}

/* The values of g that the subgraphs of node n (one of g's nodes)
 * capture: fn(ctx, v) for each, once per capturing subgraph, until fn
 * returns a status other than OK, which is returned. */
er_status er__node_captures(const er_graph *g, const er_node *n, er_status (*fn)(void *ctx, int32_t v), void *ctx);

/* Adds `weight` to uses[v] for each value v of g that a subgraph of node
 * n captures (er__node_captures): the graph passes count captures as
 * readers they cannot see or rewrite. */
void er__node_count_captures(const er_graph *g, const er_node *n, int32_t *uses, int32_t weight);

/* Every value's producer recomputed from the nodes' output lists: the one
 * place that keeps producer indices true after nodes are added, removed or
 * reordered. Graph rewrites call it (or er__graph_remove_nodes) rather than
 * renumbering by hand. */
void er__graph_relink(er_graph *g);
/* Drops the nodes with dead[i] set (dead: [g->n_nodes]), keeping the order
 * of the rest, and relinks. */
void er__graph_remove_nodes(er_graph *g, const bool *dead);
/* The graph invariant a pass must leave behind: every value id in range,
 * every producer index names a node that lists the value as an output and
 * every node output names its node back, every intermediate that is read
 * has a producer. INTERNAL naming the graph and `after` (the pass just run)
 * when broken: a bug in that pass, reported instead of a wild read later.
 * Cheap (linear); run after every pass in debug and sanitizer builds and
 * once after all passes in release builds (er__graph_checked). */
er_status er__graph_check_links(const er_graph *g, const char *after);

/* Attribute lookup; NULL when absent. */
const er_attr *er__node_attr(const er_node *node, const char *name);
/* An INT (FLOAT) attribute's value; `dflt` when absent or of another type. */
int64_t er__node_attr_int(const er_node *node, const char *name, int64_t dflt);
float er__node_attr_float(const er_node *node, const char *name, float dflt);

/* Checks graph structure (every input defined, no cycles, each value
 * produced once, outputs defined) and sorts nodes topologically. */
er_status er__graph_validate(er_graph *g);

/* last_use[v] = index of the last node of g that reads value v (a node
 * whose subgraphs capture v counts), INT32_MAX for graph outputs, -1 when
 * nothing reads it. `last_use` has g->n_values entries. */
void er__graph_last_use(const er_graph *g, int32_t *last_use);
/* The widest node (inputs or outputs) of g: the size of operand arrays. */
int er__graph_width(const er_graph *g);

#endif /* ER_IR_H */
