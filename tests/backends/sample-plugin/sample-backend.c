/* sample-backend.c - an out-of-tree edgerun backend, built the way a vendor
 * would wrap an NPU SDK: it includes only include/edgerun-backend.h, links
 * nothing from libedgerun (the build uses -Wl,--no-undefined to prove it),
 * and reaches the core only through the er_host_api table.
 *
 * Its "device" is a private memory pool standing in for accelerator memory:
 * compile copies the weights into it, compute copies the subgraph's inputs
 * in, runs every node on pool buffers (intermediates never go back to the
 * host), and copies the outputs out. It runs float32 Add, Sub, Mul, Relu,
 * Sigmoid, and 2-D MatMul and Gemm (no transposes), and declines everything
 * else with a reason, so tests see both placement and fallback.
 *
 * Compiled with -DSAMPLE_ABI_MAJOR=99 it claims an ABI the core does not
 * speak (the version check test). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun-backend.h"

#ifndef SAMPLE_ABI_MAJOR
#define SAMPLE_ABI_MAJOR ER_PLUGIN_ABI_MAJOR
#endif

static const er_host_api *host;

/* A buffer of the pretend device: float32 data and its shape. */
typedef struct dbuf {
  float *data;   /* [count] */
  int64_t count;
  int rank;
  int64_t dims[ER_MAX_RANK];
} dbuf;

typedef enum sop { OP_ADD, OP_SUB, OP_MUL, OP_RELU, OP_SIGMOID, OP_MATMUL, OP_GEMM } sop;

typedef struct snode {
  sop op;
  int32_t in[3];     /* value ids; -1 absent */
  int n_in;
  int32_t out;
} snode;

typedef struct compiled {
  const er_graph *g;
  snode *nodes;      /* [n_nodes] */
  int32_t n_nodes;
  int32_t n_values;
  dbuf *weights;     /* [n_values]: device copies of constants (data NULL
                        for other values) */
  const int32_t *inputs, *outputs;
  int32_t n_inputs, n_outputs;
} compiled;

/* ---- supports_op --------------------------------------------------------- */

static bool op_of(const char *t, sop *out) {
  static const struct { const char *name; sop op; } ops[] = {
      {"Add", OP_ADD},         {"Sub", OP_SUB},       {"Mul", OP_MUL},   {"Relu", OP_RELU},
      {"Sigmoid", OP_SIGMOID}, {"MatMul", OP_MATMUL}, {"Gemm", OP_GEMM},
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(ops[i].name, t) == 0) {
      *out = ops[i].op;
      return true;
    }
  return false;
}

static bool sample_supports(void *user, const er_graph *g, const er_node *n, char *why, size_t size) {
  (void)user;
  sop op;
  if (host->node_domain(n)[0] != '\0' || !op_of(host->node_op_type(n), &op)) {
    snprintf(why, size, "the sample backend has no %s kernel", host->node_op_type(n));
    return false;
  }
  for (int k = 0; k < host->node_input_count(n); k++) {
    er_value_info vi;
    int32_t id = host->node_input(n, k);
    if (id < 0) continue;
    host->graph_value_info(g, id, &vi);
    if (vi.dtype != ER_DTYPE_FLOAT) {
      snprintf(why, size, "input %d is %s; the sample backend runs float32 only", k,
               host->dtype_name(vi.dtype));
      return false;
    }
  }
  if (op == OP_GEMM) {
    int64_t ta, tb;
    float alpha, beta;
    host->node_attr_int(n, "transA", 0, &ta);
    host->node_attr_int(n, "transB", 0, &tb);
    host->node_attr_float(n, "alpha", 1.0f, &alpha);
    host->node_attr_float(n, "beta", 1.0f, &beta);
    if (ta || tb || alpha != 1.0f || beta != 1.0f) {
      snprintf(why, size, "Gemm with transposes or scaling is not implemented");
      return false;
    }
  }
  if (op == OP_MATMUL || op == OP_GEMM) {
    er_value_info a, b;
    host->graph_value_info(g, host->node_input(n, 0), &a);
    host->graph_value_info(g, host->node_input(n, 1), &b);
    if (a.rank != 2 || b.rank != 2) {
      snprintf(why, size, "%s of rank %d x %d; the sample backend multiplies 2-D matrices",
               host->node_op_type(n), a.rank, b.rank);
      return false;
    }
  }
  return true;
}

/* ---- compile ------------------------------------------------------------- */

static void sample_release(void *user, void *p) {
  (void)user;
  compiled *c = p;
  if (!c) return;
  for (int32_t v = 0; v < c->n_values; v++) free(c->weights[v].data);
  free(c->weights);
  free(c->nodes);
  free(c);
}

static er_status upload_constant(compiled *c, int32_t id) {
  const er_tensor *t = host->graph_value_constant(c->g, id);
  if (!t || c->weights[id].data) return ER_STATUS_OK;
  dbuf *b = &c->weights[id];
  b->count = host->tensor_count(t);
  b->rank = host->tensor_rank(t);
  memcpy(b->dims, host->tensor_dims(t), (size_t)b->rank * sizeof b->dims[0]);
  b->data = malloc((size_t)(b->count ? b->count : 1) * sizeof(float));
  if (!b->data) return host->set_error(ER_STATUS_OUT_OF_MEMORY, "sample: out of device memory");
  memcpy(b->data, host->tensor_cdata(t), (size_t)b->count * sizeof(float));
  return ER_STATUS_OK;
}

static er_status sample_compile(void *user, const er_subgraph *sg, void **out) {
  (void)user;
  compiled *c = calloc(1, sizeof *c);
  if (!c) return host->set_error(ER_STATUS_OUT_OF_MEMORY, "sample: out of memory");
  c->g = sg->graph;
  c->n_values = host->graph_value_count(sg->graph);
  c->nodes = calloc((size_t)sg->n_nodes + 1, sizeof *c->nodes);
  c->weights = calloc((size_t)c->n_values + 1, sizeof *c->weights);
  if (!c->nodes || !c->weights) {
    sample_release(NULL, c);
    return host->set_error(ER_STATUS_OUT_OF_MEMORY, "sample: out of memory");
  }
  c->n_nodes = sg->n_nodes;
  c->inputs = sg->inputs;
  c->n_inputs = sg->n_inputs;
  c->outputs = sg->outputs;
  c->n_outputs = sg->n_outputs;
  for (int32_t j = 0; j < sg->n_nodes; j++) {
    const er_node *n = host->graph_node(sg->graph, sg->nodes[j]);
    snode *s = &c->nodes[j];
    op_of(host->node_op_type(n), &s->op);
    s->n_in = host->node_input_count(n);
    for (int k = 0; k < 3; k++) s->in[k] = k < s->n_in ? host->node_input(n, k) : -1;
    s->out = host->node_output(n, 0);
    for (int k = 0; k < s->n_in; k++) {
      if (s->in[k] < 0) continue;
      er_status st = upload_constant(c, s->in[k]);
      if (st != ER_STATUS_OK) {
        sample_release(NULL, c);
        return st;
      }
    }
  }
  *out = c;
  return ER_STATUS_OK;
}

/* ---- compute ------------------------------------------------------------- */

static er_status alloc_buf(dbuf *b, int rank, const int64_t *dims) {
  b->rank = rank;
  b->count = 1;
  for (int d = 0; d < rank; d++) {
    b->dims[d] = dims[d];
    b->count *= dims[d];
  }
  b->data = calloc((size_t)(b->count ? b->count : 1), sizeof(float));
  return b->data ? ER_STATUS_OK : host->set_error(ER_STATUS_OUT_OF_MEMORY, "sample: out of device memory");
}

/* Numpy broadcasting of two shapes (the sample keeps to rank <= 4). */
static er_status broadcast(const dbuf *a, const dbuf *b, dbuf *y) {
  int rank = a->rank > b->rank ? a->rank : b->rank;
  int64_t dims[ER_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    int da = d - (rank - a->rank), db = d - (rank - b->rank);
    int64_t x = da >= 0 ? a->dims[da] : 1, z = db >= 0 ? b->dims[db] : 1;
    if (x != z && x != 1 && z != 1) return host->set_error(ER_STATUS_INVALID_SHAPE, "sample: shapes do not broadcast");
    dims[d] = x == 1 ? z : x;
  }
  return alloc_buf(y, rank, dims);
}

static int64_t bidx(const dbuf *t, const dbuf *y, int64_t i) {
  int64_t off = 0, stride = 1;
  for (int d = y->rank - 1; d >= 0; d--) {
    int64_t coord = i % y->dims[d];
    i /= y->dims[d];
    int dt = d - (y->rank - t->rank);
    if (dt >= 0) {
      if (t->dims[dt] != 1) off += coord * stride;
      stride *= t->dims[dt];
    }
  }
  return off;
}

static er_status run_node(const snode *s, dbuf *vals) {
  dbuf *a = &vals[s->in[0]], *b = s->n_in > 1 ? &vals[s->in[1]] : NULL, *y = &vals[s->out];
  switch (s->op) {
    case OP_ADD:
    case OP_SUB:
    case OP_MUL: {
      er_status st = broadcast(a, b, y);
      if (st != ER_STATUS_OK) return st;
      for (int64_t i = 0; i < y->count; i++) {
        float x = a->data[bidx(a, y, i)], z = b->data[bidx(b, y, i)];
        y->data[i] = s->op == OP_ADD ? x + z : s->op == OP_SUB ? x - z : x * z;
      }
      return ER_STATUS_OK;
    }
    case OP_RELU:
    case OP_SIGMOID: {
      er_status st = alloc_buf(y, a->rank, a->dims);
      if (st != ER_STATUS_OK) return st;
      for (int64_t i = 0; i < y->count; i++)
        y->data[i] = s->op == OP_RELU ? (a->data[i] > 0 ? a->data[i] : 0) : 1.0f / (1.0f + expf(-a->data[i]));
      return ER_STATUS_OK;
    }
    case OP_MATMUL:
    case OP_GEMM: {
      int64_t m = a->dims[0], k = a->dims[1], n = b->dims[1];
      if (b->dims[0] != k) return host->set_error(ER_STATUS_INVALID_SHAPE, "sample: inner dims differ");
      int64_t dims[2] = {m, n};
      er_status st = alloc_buf(y, 2, dims);
      if (st != ER_STATUS_OK) return st;
      const dbuf *c = s->op == OP_GEMM && s->n_in > 2 && s->in[2] >= 0 ? &vals[s->in[2]] : NULL;
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
          double acc = 0;
          for (int64_t q = 0; q < k; q++) acc += (double)a->data[i * k + q] * b->data[q * n + j];
          if (c) acc += c->data[bidx(c, y, i * n + j)];
          y->data[i * n + j] = (float)acc;
        }
      return ER_STATUS_OK;
    }
  }
  return host->set_error(ER_STATUS_INTERNAL, "sample: unknown op");
}

static er_status sample_compute(void *user, void *p, er_frame *frame) {
  (void)user;
  compiled *c = p;
  er_status st = ER_STATUS_OK;
  /* This run's device buffers: weights are shared, the rest per run, so
   * concurrent runs never touch each other's memory. */
  dbuf *vals = calloc((size_t)c->n_values + 1, sizeof *vals);
  if (!vals) return host->set_error(ER_STATUS_OUT_OF_MEMORY, "sample: out of memory");
  for (int32_t v = 0; v < c->n_values; v++)
    if (c->weights[v].data) vals[v] = c->weights[v];
  /* Host to device: the subgraph's inputs. */
  for (int32_t k = 0; k < c->n_inputs && st == ER_STATUS_OK; k++) {
    const er_tensor *t = host->frame_value(frame, c->inputs[k]);
    if (!t) {
      st = host->set_error(ER_STATUS_INTERNAL, "sample: an input has no data");
      break;
    }
    st = alloc_buf(&vals[c->inputs[k]], host->tensor_rank(t), host->tensor_dims(t));
    if (st == ER_STATUS_OK)
      memcpy(vals[c->inputs[k]].data, host->tensor_cdata(t), host->tensor_nbytes(t));
  }
  for (int32_t j = 0; j < c->n_nodes && st == ER_STATUS_OK; j++) st = run_node(&c->nodes[j], vals);
  /* Device to host: the outputs. */
  for (int32_t k = 0; k < c->n_outputs && st == ER_STATUS_OK; k++) {
    const dbuf *b = &vals[c->outputs[k]];
    er_tensor *t;
    st = host->frame_output(frame, c->outputs[k], ER_DTYPE_FLOAT, b->rank, b->dims, &t);
    if (st == ER_STATUS_OK) memcpy(host->tensor_data(t), b->data, (size_t)b->count * sizeof(float));
  }
  for (int32_t v = 0; v < c->n_values; v++)
    if (!c->weights[v].data) free(vals[v].data);
  free(vals);
  return st;
}

/* ---- devices and the entry point ----------------------------------------- */

static int sample_device_count(void *user) {
  (void)user;
  return 1;
}

static er_status sample_device_desc(void *user, int index, er_device_desc *d) {
  (void)user;
  if (index != 0) return host->set_error(ER_STATUS_NOT_FOUND, "sample: one device only");
  snprintf(d->name, sizeof d->name, "sample accelerator (host memory pool)");
  snprintf(d->vendor, sizeof d->vendor, "edgerun tests");
  snprintf(d->driver, sizeof d->driver, "sample 1.0");
  d->kind = ER_DEVICE_NPU;
  return ER_STATUS_OK;
}

ER_PLUGIN_EXPORT er_status er_backend_plugin_init(const er_host_api *h, er_backend_plugin *p) {
  if (ER_PLUGIN_ABI_MAJOR_OF(h->abi_version) != ER_PLUGIN_ABI_MAJOR ||
      h->struct_size < sizeof(er_host_api))
    return ER_STATUS_UNSUPPORTED;
  host = h;
  p->abi_version = (uint32_t)((SAMPLE_ABI_MAJOR << 16) | ER_PLUGIN_ABI_MINOR);
  p->struct_size = sizeof *p;
  p->name = SAMPLE_ABI_MAJOR == ER_PLUGIN_ABI_MAJOR ? "sample" : "sample-future";
  p->user = NULL;
  p->device_count = sample_device_count;
  p->device_desc = sample_device_desc;
  p->supports_op = sample_supports;
  p->compile = sample_compile;
  p->compute = sample_compute;
  p->release = sample_release;
  p->destroy = NULL;
  host->log(ER_LOG_DEBUG, "sample backend plugin initialized");
  return ER_STATUS_OK;
}
