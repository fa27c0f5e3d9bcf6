/* onnx-builder.h - writes ONNX protobuf bytes field by field, for tests that
 * need exact control over what a model file contains (bad lengths, deep
 * nesting, hostile external-data paths). Field numbers follow onnx.proto. */
#ifndef ER_TEST_ONNX_BUILDER_H
#define ER_TEST_ONNX_BUILDER_H

#include "onnx/pb.h"

/* Appends `child` to `w` as length-delimited field `field`. */
void tb_embed(er_pbw *w, uint32_t field, const er_pbw *child);
void tb_str(er_pbw *w, uint32_t field, const char *s);

/* TensorProto body: name, data_type, dims and raw_data (raw may be NULL:
 * no data field). */
void tb_tensor(er_pbw *w, const char *name, int dtype, int rank, const int64_t *dims, const void *raw,
               size_t raw_len);
/* Adds an external_data key/value entry to a TensorProto body. */
void tb_tensor_ext(er_pbw *w, const char *key, const char *value);
/* ValueInfoProto body for a tensor; rank < 0: no shape. Dims -1, -2 and
 * any other negative one are the symbolic dims "N", "H" and "W". */
void tb_value_info(er_pbw *w, const char *name, int elem, int rank, const int64_t *dims);

/* AttributeProto fields appended to a node's attribute list `attrs` (each
 * call adds one NodeProto.attribute field). */
void tb_attr_int(er_pbw *attrs, const char *name, int64_t v);
void tb_attr_float(er_pbw *attrs, const char *name, float v);
void tb_attr_string(er_pbw *attrs, const char *name, const char *v);
void tb_attr_ints(er_pbw *attrs, const char *name, const int64_t *v, int n);
void tb_attr_graph(er_pbw *attrs, const char *name, const er_pbw *graph);
void tb_attr_tensor(er_pbw *attrs, const char *name, const er_pbw *tensor);

/* NodeProto field (GraphProto.node) appended to graph body `g`. Inputs and
 * outputs are NULL-terminated lists; attrs may be NULL. */
void tb_node(er_pbw *g, const char *op, const char *name, const char *const *inputs,
             const char *const *outputs, const er_pbw *attrs);
void tb_node_domain(er_pbw *g, const char *op, const char *domain, const char *name,
                    const char *const *inputs, const char *const *outputs, const er_pbw *attrs);
/* Graph-level fields appended to graph body `g`. */
void tb_graph_input(er_pbw *g, const char *name, int elem, int rank, const int64_t *dims);
void tb_graph_output(er_pbw *g, const char *name, int elem, int rank, const int64_t *dims);
void tb_graph_initializer(er_pbw *g, const er_pbw *tensor);
void tb_graph_sparse_initializer(er_pbw *g, const er_pbw *values, const er_pbw *indices,
                                 int rank, const int64_t *dims);

/* ModelProto: ir_version, default opset (and an extra domain opset when
 * extra_domain is not NULL), graph. */
void tb_model(er_pbw *m, int64_t ir, int64_t opset, const er_pbw *graph);
void tb_model_domain(er_pbw *m, int64_t ir, int64_t opset, const char *extra_domain,
                     int64_t extra_version, const er_pbw *graph);

/* A float input x [1,4] -> Relu -> y model, the smallest useful model. */
void tb_relu_model(er_pbw *m);

#endif
