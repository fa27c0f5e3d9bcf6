/* model-kit.h - small models built in memory for the backend tests: a
 * graph body grows node by node, then loads as an er_model. Built on the
 * protobuf writers of tests/unit/onnx-builder.h. */
#ifndef ER_TEST_MODEL_KIT_H
#define ER_TEST_MODEL_KIT_H

#include "edgerun.h"
#include "onnx-builder.h"

typedef struct mk_model {
  er_pbw g;                  /* GraphProto body */
  const char *domain;        /* an extra opset import (custom ops), or NULL */
  int64_t domain_version;
} mk_model;

void mk_begin(mk_model *m, const char *graph_name);
void mk_input(mk_model *m, const char *name, er_dtype dtype, int rank, const int64_t *dims);
/* rank -1: the output's shape is left for inference. */
void mk_output(mk_model *m, const char *name, er_dtype dtype, int rank, const int64_t *dims);
void mk_const(mk_model *m, const char *name, er_dtype dtype, int rank, const int64_t *dims,
              const void *data);
/* Inputs and outputs are comma-separated names ("x,w,b"; an empty name
 * between commas is an omitted optional input). attrs may be NULL. */
void mk_node(mk_model *m, const char *op, const char *name, const char *inputs,
             const char *outputs, const er_pbw *attrs);
void mk_node_domain(mk_model *m, const char *op, const char *domain, const char *name,
                    const char *inputs, const char *outputs, const er_pbw *attrs);
/* Loads the model (default-domain opset `opset`) and frees the body. */
er_status mk_load(mk_model *m, int64_t opset, er_model **model_out);

/* Attribute writers missing from onnx-builder. */
void mk_attr_string(er_pbw *attrs, const char *name, const char *v);
void mk_attr_floats(er_pbw *attrs, const char *name, const float *v, int n);

/* Deterministic pseudo-random numbers (splitmix64), so failures reproduce. */
typedef struct mk_rng {
  uint64_t s;
} mk_rng;
float mk_uniform(mk_rng *r, float lo, float hi);
void mk_fill(mk_rng *r, float *x, int64_t n, float lo, float hi);

#endif
