/* model-kit.c - see model-kit.h. */
#include "model-kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mk_begin(mk_model *m, const char *graph_name) {
  memset(m, 0, sizeof *m);
  tb_str(&m->g, 2, graph_name);
}

void mk_input(mk_model *m, const char *name, er_dtype dtype, int rank, const int64_t *dims) {
  tb_graph_input(&m->g, name, (int)dtype, rank, dims);
}

void mk_output(mk_model *m, const char *name, er_dtype dtype, int rank, const int64_t *dims) {
  tb_graph_output(&m->g, name, (int)dtype, rank, dims);
}

void mk_const(mk_model *m, const char *name, er_dtype dtype, int rank, const int64_t *dims,
              const void *data) {
  er_pbw t = {0};
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  tb_tensor(&t, name, (int)dtype, rank, dims, data, (size_t)n * er_dtype_size(dtype));
  tb_graph_initializer(&m->g, &t);
  er__pbw_free(&t);
}

/* Splits "a,b,,c" into a NULL-terminated list (empty entries kept). */
static char **split(const char *s, char *buf, size_t size, char **list, int cap) {
  int n = 0;
  snprintf(buf, size, "%s", s ? s : "");
  if (buf[0]) {
    char *p = buf;
    while (n < cap - 1) {
      list[n++] = p;
      char *c = strchr(p, ',');
      if (!c) break;
      *c = '\0';
      p = c + 1;
    }
  }
  list[n] = NULL;
  return list;
}

void mk_node_domain(mk_model *m, const char *op, const char *domain, const char *name,
                    const char *inputs, const char *outputs, const er_pbw *attrs) {
  char ib[512], ob[512];
  char *il[32], *ol[32];
  split(inputs, ib, sizeof ib, il, 32);
  split(outputs, ob, sizeof ob, ol, 32);
  tb_node_domain(&m->g, op, domain, name, (const char *const *)il, (const char *const *)ol, attrs);
}

void mk_node(mk_model *m, const char *op, const char *name, const char *inputs, const char *outputs,
             const er_pbw *attrs) {
  mk_node_domain(m, op, "", name, inputs, outputs, attrs);
}

er_status mk_load(mk_model *m, int64_t opset, er_model **out) {
  er_pbw model = {0};
  if (m->domain) tb_model_domain(&model, 8, opset, m->domain, m->domain_version, &m->g);
  else tb_model(&model, 8, opset, &m->g);
  er_status st = er_model_load_buffer(model.buf, model.len, NULL, NULL, out);
  er__pbw_free(&model);
  er__pbw_free(&m->g);
  return st;
}

void mk_attr_string(er_pbw *attrs, const char *name, const char *v) {
  er_pbw a = {0};
  tb_str(&a, 1, name);
  er__pbw_varint_field(&a, 20, 3);  /* STRING */
  tb_str(&a, 4, v);
  tb_embed(attrs, 5, &a);
  er__pbw_free(&a);
}

void mk_attr_floats(er_pbw *attrs, const char *name, const float *v, int n) {
  er_pbw a = {0};
  tb_str(&a, 1, name);
  er__pbw_varint_field(&a, 20, 6);  /* FLOATS */
  for (int i = 0; i < n; i++) {
    er__pbw_tag(&a, 7, 5);          /* fixed32 */
    er__pbw_raw(&a, &v[i], 4);
  }
  tb_embed(attrs, 5, &a);
  er__pbw_free(&a);
}

/* splitmix64: consecutive seeds give unrelated streams (a plain xorshift
 * started from seeds 1 and 2 yields nearly equal first numbers, which
 * made two inputs of a case almost the same). */
float mk_uniform(mk_rng *r, float lo, float hi) {
  uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  z ^= z >> 31;
  return lo + (hi - lo) * (float)(z >> 40) / (float)0x1000000;
}

void mk_fill(mk_rng *r, float *x, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; i++) x[i] = mk_uniform(r, lo, hi);
}
