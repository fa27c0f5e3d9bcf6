/* onnx-builder.c - protobuf writers for test models. */
#include "onnx-builder.h"

#include <stdio.h>
#include <string.h>

void tb_embed(er_pbw *w, uint32_t field, const er_pbw *child) {
  er__pbw_bytes_field(w, field, child->buf, child->len);
}

void tb_str(er_pbw *w, uint32_t field, const char *s) { er__pbw_bytes_field(w, field, s, strlen(s)); }

void tb_tensor(er_pbw *w, const char *name, int dtype, int rank, const int64_t *dims, const void *raw,
               size_t raw_len) {
  for (int i = 0; i < rank; i++) er__pbw_varint_field(w, 1, (uint64_t)dims[i]);
  er__pbw_varint_field(w, 2, (uint64_t)(int64_t)dtype);
  if (name) tb_str(w, 8, name);
  if (raw) er__pbw_bytes_field(w, 9, raw, raw_len);
}

void tb_tensor_ext(er_pbw *w, const char *key, const char *value) {
  er_pbw e = {0};
  tb_str(&e, 1, key);
  tb_str(&e, 2, value);
  tb_embed(w, 13, &e);
  er__pbw_free(&e);
  /* data_location = EXTERNAL; repeated writes are harmless (last wins). */
  er__pbw_varint_field(w, 14, 1);
}

void tb_value_info(er_pbw *w, const char *name, int elem, int rank, const int64_t *dims) {
  er_pbw tt = {0}, type = {0}, shape = {0};
  tb_str(w, 1, name);
  er__pbw_varint_field(&tt, 1, (uint64_t)elem);
  if (rank >= 0) {
    for (int i = 0; i < rank; i++) {
      er_pbw dim = {0};
      if (dims[i] >= 0) er__pbw_varint_field(&dim, 1, (uint64_t)dims[i]);
      else tb_str(&dim, 2, dims[i] == -1 ? "N" : dims[i] == -2 ? "H" : "W");
      tb_embed(&shape, 1, &dim);
      er__pbw_free(&dim);
    }
    tb_embed(&tt, 2, &shape);
  }
  tb_embed(&type, 1, &tt);
  tb_embed(w, 2, &type);
  er__pbw_free(&tt);
  er__pbw_free(&type);
  er__pbw_free(&shape);
}

static void attr_begin(er_pbw *a, const char *name, int type) {
  tb_str(a, 1, name);
  er__pbw_varint_field(a, 20, (uint64_t)type);
}

void tb_attr_int(er_pbw *attrs, const char *name, int64_t v) {
  er_pbw a = {0};
  attr_begin(&a, name, 2);
  er__pbw_varint_field(&a, 3, (uint64_t)v);
  tb_embed(attrs, 5, &a);
  er__pbw_free(&a);
}

void tb_attr_string(er_pbw *attrs, const char *name, const char *v) {
  er_pbw a = {0};
  attr_begin(&a, name, 3);
  tb_str(&a, 4, v);
  tb_embed(attrs, 5, &a);
  er__pbw_free(&a);
}

void tb_attr_float(er_pbw *attrs, const char *name, float v) {
  er_pbw a = {0};
  attr_begin(&a, name, 1);
  er__pbw_tag(&a, 2, ER_PB_FIXED32);
  er__pbw_raw(&a, &v, 4);
  tb_embed(attrs, 5, &a);
  er__pbw_free(&a);
}

void tb_attr_ints(er_pbw *attrs, const char *name, const int64_t *v, int n) {
  er_pbw a = {0};
  attr_begin(&a, name, 7);
  for (int i = 0; i < n; i++) er__pbw_varint_field(&a, 8, (uint64_t)v[i]);
  tb_embed(attrs, 5, &a);
  er__pbw_free(&a);
}

void tb_attr_graph(er_pbw *attrs, const char *name, const er_pbw *graph) {
  er_pbw a = {0};
  attr_begin(&a, name, 5);
  tb_embed(&a, 6, graph);
  tb_embed(attrs, 5, &a);
  er__pbw_free(&a);
}

void tb_attr_tensor(er_pbw *attrs, const char *name, const er_pbw *tensor) {
  er_pbw a = {0};
  attr_begin(&a, name, 4);
  tb_embed(&a, 5, tensor);
  tb_embed(attrs, 5, &a);
  er__pbw_free(&a);
}

void tb_node_domain(er_pbw *g, const char *op, const char *domain, const char *name,
                    const char *const *inputs, const char *const *outputs, const er_pbw *attrs) {
  er_pbw n = {0};
  for (const char *const *p = inputs; p && *p; p++) tb_str(&n, 1, *p);
  for (const char *const *p = outputs; p && *p; p++) tb_str(&n, 2, *p);
  if (name) tb_str(&n, 3, name);
  tb_str(&n, 4, op);
  if (domain) tb_str(&n, 7, domain);
  if (attrs) er__pbw_raw(&n, attrs->buf, attrs->len);
  tb_embed(g, 1, &n);
  er__pbw_free(&n);
}

void tb_node(er_pbw *g, const char *op, const char *name, const char *const *inputs,
             const char *const *outputs, const er_pbw *attrs) {
  tb_node_domain(g, op, NULL, name, inputs, outputs, attrs);
}

void tb_graph_input(er_pbw *g, const char *name, int elem, int rank, const int64_t *dims) {
  er_pbw v = {0};
  tb_value_info(&v, name, elem, rank, dims);
  tb_embed(g, 11, &v);
  er__pbw_free(&v);
}

void tb_graph_output(er_pbw *g, const char *name, int elem, int rank, const int64_t *dims) {
  er_pbw v = {0};
  tb_value_info(&v, name, elem, rank, dims);
  tb_embed(g, 12, &v);
  er__pbw_free(&v);
}

void tb_graph_initializer(er_pbw *g, const er_pbw *tensor) { tb_embed(g, 5, tensor); }

void tb_graph_sparse_initializer(er_pbw *g, const er_pbw *values, const er_pbw *indices, int rank,
                                 const int64_t *dims) {
  er_pbw s = {0};
  tb_embed(&s, 1, values);
  tb_embed(&s, 2, indices);
  for (int i = 0; i < rank; i++) er__pbw_varint_field(&s, 3, (uint64_t)dims[i]);
  tb_embed(g, 15, &s);
  er__pbw_free(&s);
}

void tb_model_domain(er_pbw *m, int64_t ir, int64_t opset, const char *extra_domain,
                     int64_t extra_version, const er_pbw *graph) {
  er_pbw o = {0};
  er__pbw_varint_field(m, 1, (uint64_t)ir);
  tb_str(m, 2, "edgerun-tests");
  if (opset >= 0) {
    er__pbw_varint_field(&o, 2, (uint64_t)opset);
    tb_embed(m, 8, &o);
    er__pbw_free(&o);
  }
  if (extra_domain) {
    er_pbw e = {0};
    tb_str(&e, 1, extra_domain);
    er__pbw_varint_field(&e, 2, (uint64_t)extra_version);
    tb_embed(m, 8, &e);
    er__pbw_free(&e);
  }
  if (graph) tb_embed(m, 7, graph);
}

void tb_model(er_pbw *m, int64_t ir, int64_t opset, const er_pbw *graph) {
  tb_model_domain(m, ir, opset, NULL, 0, graph);
}

void tb_relu_model(er_pbw *m) {
  er_pbw g = {0};
  const int64_t dims[2] = {1, 4};
  tb_str(&g, 2, "relu_graph");
  tb_node(&g, "Relu", "relu", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  tb_graph_input(&g, "x", 1, 2, dims);
  tb_graph_output(&g, "y", 1, 2, dims);
  tb_model(m, 8, 13, &g);
  er__pbw_free(&g);
}
