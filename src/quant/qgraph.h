/* qgraph.h - editing a loaded graph in place for the quantizer's passes:
 * new values and constants, and a new node list built in order and then
 * committed; a thin layer over the graph-rewrite toolkit
 * (graph/rewrite.h) that names values the quantizer's way (`base` +
 * `suffix`, as onnxruntime's tools do) and copies names into the arena. The edited model is meant to be written (onnx-write.h) and
 * loaded again, which validates and binds it; nodes added here carry no op
 * binding until then. Everything allocated lives in the model's arena or is
 * owned by the model (tensors), so nothing is freed piecemeal. */
#ifndef ER_QUANT_QGRAPH_H
#define ER_QUANT_QGRAPH_H

#include "graph/rewrite.h"

typedef struct er_qbuild {
  er_graph *g;
  er_rw_list list;           /* the new node list */
} er_qbuild;

void er__qb_init(er_qbuild *b, er_graph *g);
void er__qb_free(er_qbuild *b);

/* A new value named `base` + `suffix`, made unique in the graph with a
 * numeric tail when taken. */
er_status er__qb_value(er_qbuild *b, const char *base, const char *suffix, int32_t *id_out);
/* A new constant value owning `t`'s data from now on (t is moved: its data
 * belongs to the model after the call, whatever the result). */
er_status er__qb_constant(er_qbuild *b, const char *base, const char *suffix, er_tensor *t,
                          int32_t *id_out);
/* Turns an existing value into a constant holding `t` (moved as above). */
er_status er__qb_make_constant(er_qbuild *b, int32_t id, er_tensor *t);
/* A scalar or 1-D constant of the given type filled from `vals` (as
 * doubles, converted with er__store_f64). rank 0 or 1. */
er_status er__qb_constant_vec(er_qbuild *b, const char *base, const char *suffix, er_dtype dtype,
                              int rank, int64_t n, const double *vals, int32_t *id_out);

/* Appends a copy of an existing node to the new list. */
er_status er__qb_keep(er_qbuild *b, const er_node *node);
/* Appends a new node. `inputs`/`outputs` are value ids (-1 = omitted);
 * attributes are copied into the arena. */
er_status er__qb_node(er_qbuild *b, const char *op_type, const char *name, const int32_t *inputs,
                      int n_inputs, const int32_t *outputs, int n_outputs, const er_attr *attrs,
                      int n_attrs);
/* The last node appended (to adjust its inputs). */
er_node *er__qb_last(er_qbuild *b);
/* Replaces the graph's nodes with the new list and updates producers. */
er_status er__qb_commit(er_qbuild *b);

/* Attribute constructors for er__qb_node. */
er_attr er__qb_attr_int(const char *name, int64_t v);

/* Copies an int array into the arena (for new node inputs). */
int32_t *er__qb_ids(er_qbuild *b, const int32_t *ids, int n);

#endif /* ER_QUANT_QGRAPH_H */
