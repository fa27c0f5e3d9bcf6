/* session.c - the public model and session API: load (mapped or copied),
 * validate, bind, infer and fold once; then run many times, from any number
 * of threads. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "onnx/onnx.h"
#include "backends/cpu/cpu-exec.h"
#include "runtime/runtime.h"

/* ======================================================================== */
/* Models                                                                    */
/* ======================================================================== */

void er_load_options_init(er_load_options *o) {
  memset(o, 0, sizeof *o);
  o->max_file_bytes = ER_DEFAULT_MAX_FILE_BYTES;
  o->max_tensor_bytes = ER_DEFAULT_MAX_TENSOR_BYTES;
  o->max_total_bytes = ER_DEFAULT_MAX_TOTAL_BYTES;
  o->max_nodes = ER_DEFAULT_MAX_NODES;
  o->max_nesting = ER_DEFAULT_MAX_NESTING;
  o->optimize = 1;
}

static void apply_limits(struct er_model *m, const er_load_options *opts) {
  er_load_options d;
  er_load_options_init(&d);
  if (opts) {
    if (opts->max_file_bytes) d.max_file_bytes = opts->max_file_bytes;
    if (opts->max_tensor_bytes) d.max_tensor_bytes = opts->max_tensor_bytes;
    if (opts->max_total_bytes) d.max_total_bytes = opts->max_total_bytes;
    if (opts->max_nodes) d.max_nodes = opts->max_nodes;
    if (opts->max_nesting) d.max_nesting = opts->max_nesting;
    if (opts->optimize) d.optimize = opts->optimize;
  }
  m->limits = d;
}

static struct er_model *model_new(const er_load_options *opts) {
  struct er_model *m = calloc(1, sizeof *m);
  if (!m) {
    er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory allocating a model");
    return NULL;
  }
  er__arena_init(&m->arena);
  m->base_dirfd = -1;
  apply_limits(m, opts);
  return m;
}

void er_model_free(er_model *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n_owned; i++) er__tensor_release(m->owned[i]);
  free(m->owned);
  free(m->input_info);
  free(m->output_info);
  if (m->map) {
    if (m->map_is_mmap) munmap(m->map, m->map_size);
    else er__aligned_free(m->map);
  }
  if (m->base_dirfd >= 0) close(m->base_dirfd);
  free(m->base_dir);
  er__arena_free(&m->arena);
  free(m);
}

static er_status build_infos(struct er_model *m) {
  er_graph *g = m->graph;
  size_t n_in = 0;
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const er_value *v = &g->values[g->inputs[i]];
    /* Initializers listed as inputs are optional to feed: not listed. */
    if (v->kind == ER_VALUE_INPUT) n_in++;
  }
  m->input_info = calloc(n_in + 1, sizeof *m->input_info);
  m->output_info = calloc((size_t)g->n_outputs + 1, sizeof *m->output_info);
  if (!m->input_info || !m->output_info)
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory describing model inputs");
  static const char *const no_params[ER_MAX_RANK] = {0};
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const er_value *v = &g->values[g->inputs[i]];
    if (v->kind != ER_VALUE_INPUT) continue;
    er_value_info *info = &m->input_info[m->n_input_info++];
    info->name = v->name;
    info->dtype = v->info.dtype;
    info->rank = v->info.rank;
    info->dims = v->info.dims;
    info->dim_params = v->dim_params ? v->dim_params : no_params;
  }
  for (int32_t i = 0; i < g->n_outputs; i++) {
    const er_value *v = &g->values[g->outputs[i]];
    er_value_info *info = &m->output_info[m->n_output_info++];
    info->name = v->name;
    info->dtype = v->info.dtype;
    info->rank = v->info.rank;
    info->dims = v->info.dims;
    info->dim_params = v->dim_params ? v->dim_params : no_params;
  }
  return ER_STATUS_OK;
}

/* Everything after the bytes are in place. */
static er_status finish_load(struct er_model *m) {
  ER_CHECK(er__onnx_parse_model(m));
  ER_CHECK(er__graph_validate(m->graph));
  ER_CHECK(er__graph_bind_ops(m->graph));
  ER_CHECK(er__graph_infer(m->graph, m->limits.optimize > 0));
  for (int32_t i = 0; i < m->graph->n_inputs; i++) {
    const er_value *v = &m->graph->values[m->graph->inputs[i]];
    if (v->kind == ER_VALUE_INPUT && !er__dtype_is_numeric(v->info.dtype))
      return er__error(ER_STATUS_UNSUPPORTED, "graph input '%s' has type %s, which is not supported",
                       v->name, er_dtype_name(v->info.dtype));
  }
  return build_infos(m);
}

er_status er_model_load_file(const char *path, const er_load_options *opts, er_model **model_out) {
  er_status st;
  int fd = -1;
  if (!path || !model_out) return er__error(ER_STATUS_INVALID_ARGUMENT, "path and model_out must not be NULL");
  struct er_model *m = model_new(opts);
  if (!m) return ER_STATUS_OUT_OF_MEMORY;

  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    st = er__error(ER_STATUS_IO, "cannot open model '%s': %s", path, strerror(errno));
    goto fail;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = er__error(ER_STATUS_IO, "model '%s' is not a regular file", path);
    goto fail;
  }
  if ((uint64_t)sb.st_size > m->limits.max_file_bytes) {
    st = er__error(ER_STATUS_LIMIT, "model '%s' is %llu bytes, more than max_file_bytes (%llu)", path,
                   (unsigned long long)sb.st_size, (unsigned long long)m->limits.max_file_bytes);
    goto fail;
  }
  if (sb.st_size == 0) {
    st = er__error(ER_STATUS_TRUNCATED, "model '%s' is empty (0 bytes)", path);
    goto fail;
  }
  m->map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m->map == MAP_FAILED) {
    m->map = NULL;
    st = er__error(ER_STATUS_IO, "cannot map model '%s': %s", path, strerror(errno));
    goto fail;
  }
  m->map_size = (size_t)sb.st_size;
  m->map_is_mmap = true;
  close(fd);
  fd = -1;

  /* The folder external data is resolved in, held open so later renames of
   * the path cannot redirect it. */
  char *copy = strdup(path);
  if (!copy) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
    goto fail;
  }
  m->base_dir = strdup(dirname(copy));
  free(copy);
  if (!m->base_dir) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory");
    goto fail;
  }
  m->base_dirfd = open(m->base_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (m->base_dirfd < 0) {
    st = er__error(ER_STATUS_IO, "cannot open the model's folder: %s", strerror(errno));
    goto fail;
  }
  st = finish_load(m);
  if (st != ER_STATUS_OK) goto fail;
  *model_out = m;
  return ER_STATUS_OK;
fail:
  if (fd >= 0) close(fd);
  er_model_free(m);
  return st;
}

er_status er_model_load_buffer(const void *data, size_t size, const char *base_dir,
                               const er_load_options *opts, er_model **model_out) {
  er_status st;
  if ((!data && size) || !model_out)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "data and model_out must not be NULL");
  struct er_model *m = model_new(opts);
  if (!m) return ER_STATUS_OUT_OF_MEMORY;
  if (size > m->limits.max_file_bytes) {
    st = er__error(ER_STATUS_LIMIT, "model buffer is %zu bytes, more than max_file_bytes (%llu)", size,
                   (unsigned long long)m->limits.max_file_bytes);
    goto fail;
  }
  if (size == 0) {
    st = er__error(ER_STATUS_TRUNCATED, "model is empty (0 bytes)");
    goto fail;
  }
  /* An aligned private copy, so zero-copy tensors see aligned data and the
   * caller may free theirs. */
  m->map = er__aligned_alloc(size);
  if (!m->map) {
    st = ER_STATUS_OUT_OF_MEMORY;
    goto fail;
  }
  memcpy(m->map, data, size);
  m->map_size = size;
  if (base_dir) {
    m->base_dir = strdup(base_dir);
    m->base_dirfd = open(base_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!m->base_dir || m->base_dirfd < 0) {
      st = er__error(ER_STATUS_IO, "cannot open folder '%s': %s", base_dir, strerror(errno));
      goto fail;
    }
  }
  st = finish_load(m);
  if (st != ER_STATUS_OK) goto fail;
  *model_out = m;
  return ER_STATUS_OK;
fail:
  er_model_free(m);
  return st;
}

size_t er_model_input_count(const er_model *m) { return m->n_input_info; }
size_t er_model_output_count(const er_model *m) { return m->n_output_info; }

er_status er_model_input_info(const er_model *m, size_t index, er_value_info *out) {
  if (index >= m->n_input_info)
    return er__error(ER_STATUS_NOT_FOUND, "input index %zu is out of range (model has %zu)", index,
                     m->n_input_info);
  *out = m->input_info[index];
  return ER_STATUS_OK;
}

er_status er_model_output_info(const er_model *m, size_t index, er_value_info *out) {
  if (index >= m->n_output_info)
    return er__error(ER_STATUS_NOT_FOUND, "output index %zu is out of range (model has %zu)", index,
                     m->n_output_info);
  *out = m->output_info[index];
  return ER_STATUS_OK;
}

void er_model_summary_get(const er_model *m, er_model_summary *s) {
  memset(s, 0, sizeof *s);
  s->ir_version = m->ir_version;
  s->opset = m->default_opset;
  s->producer_name = m->producer_name ? m->producer_name : "";
  s->producer_version = m->producer_version ? m->producer_version : "";
  s->graph_name = m->graph->name;
  s->node_count = (size_t)m->graph->n_nodes;
  s->metadata_count = (size_t)m->n_meta;
  const er_graph *g = m->graph;
  for (int32_t v = 0; v < g->n_values; v++) {
    const er_value *val = &g->values[v];
    if (val->kind != ER_VALUE_CONSTANT || !val->constant) continue;
    s->initializer_count++;
    int64_t c = er__tensor_count(val->constant);
    if (c > 0) s->parameter_count += (uint64_t)c;
    s->weight_bytes += val->constant->nbytes;
  }
}

er_status er_model_metadata(const er_model *m, size_t index, const char **key_out,
                            const char **value_out) {
  if (index >= (size_t)m->n_meta)
    return er__error(ER_STATUS_NOT_FOUND, "metadata index %zu is out of range", index);
  *key_out = m->meta[index].key;
  *value_out = m->meta[index].value;
  return ER_STATUS_OK;
}

er_status er_model_node(const er_model *m, size_t index, const char **op_type_out, const char **name_out) {
  if (index >= (size_t)m->graph->n_nodes)
    return er__error(ER_STATUS_NOT_FOUND, "node index %zu is out of range", index);
  *op_type_out = m->graph->nodes[index].op_type;
  *name_out = m->graph->nodes[index].name;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Sessions                                                                  */
/* ======================================================================== */

/* A session: the model's main graph cut into segments, each a maximal run
 * of consecutive nodes (in topological order) placed on one backend and
 * compiled by it once. Runs share nothing but this read-only plan. */
struct er_session {
  const er_model *model;
  er_session_options opts;
  er_segment *segs;        /* [n_segs] */
  int n_segs;
};

void er_session_options_init(er_session_options *o) {
  memset(o, 0, sizeof *o);
  o->threads = 1;
  o->allow_fallback = true;
}

void er_session_free(er_session *s) {
  if (!s) return;
  for (int i = 0; i < s->n_segs; i++)
    if (s->segs[i].backend->iface->release) s->segs[i].backend->iface->release(s->segs[i].backend, s->segs[i].compiled);
  free(s->segs);
  free(s);
}

/* Places every node: the first preferred backend whose supports_op says
 * yes, else the CPU (when fallback is allowed). place[i] is the backend. */
static er_status place_nodes(const er_graph *g, const er_session_options *o, er_backend **place) {
  er_backend *cpu = er__backend_cpu();
  for (int32_t i = 0; i < g->n_nodes; i++) {
    char reason[256] = "";
    const er_node *node = &g->nodes[i];
    place[i] = NULL;
    for (size_t b = 0; b < o->backend_count && !place[i]; b++) {
      er_backend *be = er__backend_find(o->backends[b]);
      if (be == cpu) break;
      if (be->iface->supports_op(be, g, node, reason, sizeof reason)) place[i] = be;
    }
    if (place[i]) continue;
    bool wanted_accel = o->backend_count > 0 && strcmp(o->backends[0], "cpu") != 0;
    if (wanted_accel && !o->allow_fallback)
      return er__error(ER_STATUS_NO_FALLBACK,
                       "%s node '%s' would run on the CPU (%s), and fallback is disabled", node->op_type,
                       node->name, reason[0] ? reason : "no preferred backend supports it");
    if (!cpu->iface->supports_op(cpu, g, node, reason, sizeof reason))
      return er__error(ER_STATUS_UNSUPPORTED, "%s node '%s': %s", node->op_type, node->name, reason);
    place[i] = cpu;
  }
  return ER_STATUS_OK;
}

er_status er_session_create(const er_model *model, const er_session_options *opts,
                            er_session **session_out) {
  er_status st = ER_STATUS_OK;
  if (!model || !session_out) return er__error(ER_STATUS_INVALID_ARGUMENT, "model and session_out must not be NULL");
  er_session_options o;
  er_session_options_init(&o);
  if (opts) o = *opts;
  if (o.threads <= 0) o.threads = 1;
  for (size_t i = 0; i < o.backend_count; i++) {
    const char *name = o.backends[i];
    if (!name || !er__backend_find(name))
      return er__error(ER_STATUS_UNSUPPORTED, "backend '%s' is not available in this build",
                       name ? name : "(null)");
  }
  const er_graph *g = model->graph;
  er_session *s = calloc(1, sizeof *s);
  er_backend **place = calloc((size_t)g->n_nodes + 1, sizeof *place);
  int32_t *order = calloc((size_t)g->n_nodes + 1, sizeof *order);
  if (!s || !place || !order) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
    goto fail;
  }
  s->model = model;
  s->opts = o;
  s->opts.backends = NULL;  /* borrowed only for the create */
  s->opts.backend_count = 0;
  st = place_nodes(g, &o, place);
  if (st != ER_STATUS_OK) goto fail;
  /* Cut into maximal runs of one backend and compile each. A graph without
   * nodes (outputs straight from inputs or constants) has no segment. */
  s->segs = calloc((size_t)g->n_nodes + 1, sizeof *s->segs);
  if (!s->segs) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
    goto fail;
  }
  for (int32_t i = 0; i < g->n_nodes;) {
    int32_t j = i;
    while (j < g->n_nodes && place[j] == place[i]) {
      order[j] = j;
      j++;
    }
    er_subgraph sg = {g, order + i, j - i, NULL, 0, NULL, 0};
    er_backend *be = place[i];
    if (!be->iface->compile || !be->iface->compute) {
      st = er__error(ER_STATUS_BACKEND, "backend '%s' cannot compile subgraphs", be->iface->name);
      goto fail;
    }
    st = be->iface->compile(be, &sg, &s->segs[s->n_segs].compiled);
    if (st != ER_STATUS_OK) goto fail;
    s->segs[s->n_segs++].backend = be;
    i = j;
  }
  free(place);
  free(order);
  *session_out = s;
  return ER_STATUS_OK;
fail:
  free(place);
  free(order);
  er_session_free(s);
  return st;
}

static er_status check_input(const er_value *v, const er_tensor *t) {
  char a[160], b[160];
  if (t->dtype != v->info.dtype && v->info.dtype != ER_DTYPE_UNDEFINED)
    return er__error(ER_STATUS_TYPE_MISMATCH, "input '%s' is %s but the model expects %s", v->name,
                     er_dtype_name(t->dtype), er_dtype_name(v->info.dtype));
  if (v->info.rank >= 0) {
    bool ok = t->rank == v->info.rank;
    for (int d = 0; ok && d < t->rank; d++)
      if (v->info.dims[d] >= 0 && v->info.dims[d] != t->dims[d]) ok = false;
    if (!ok)
      return er__error(ER_STATUS_INVALID_SHAPE, "input '%s' has shape %s but the model expects %s",
                       v->name, er__shape_str(t, a, sizeof a), er__shape_str(&v->info, b, sizeof b));
  }
  return ER_STATUS_OK;
}

er_status er_session_run(er_session *s, const er_named_tensor *inputs, size_t n_inputs,
                         const char *const *output_names, size_t n_outputs, er_tensor **outputs_out) {
  return er__session_run_observed(s, inputs, n_inputs, output_names, n_outputs, outputs_out, NULL,
                                  NULL);
}

er_status er__session_run_observed(er_session *s, const er_named_tensor *inputs, size_t n_inputs,
                                   const char *const *output_names, size_t n_outputs,
                                   er_tensor **outputs_out, er_exec_observer observe, void *user) {
  er_status st = ER_STATUS_OK;
  if (!s || (!inputs && n_inputs) || !outputs_out)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "session, inputs and outputs_out must not be NULL");
  const er_graph *g = s->model->graph;
  const er_tensor **bound = calloc((size_t)g->n_inputs + 1, sizeof *bound);
  er_tensor *results = calloc((size_t)g->n_outputs + 1, sizeof *results);
  int32_t *want = calloc(n_outputs + 1, sizeof *want);
  if (!bound || !results || !want) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory starting a run");
    goto done;
  }
  /* Match inputs by name. */
  for (size_t i = 0; i < n_inputs; i++) {
    const char *name = inputs[i].name;
    const er_tensor *t = inputs[i].tensor;
    if (!name || !t) {
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "input %zu has a NULL name or tensor", i);
      goto done;
    }
    int32_t slot = -1;
    for (int32_t k = 0; k < g->n_inputs; k++)
      if (strcmp(g->values[g->inputs[k]].name, name) == 0) slot = k;
    if (slot < 0) {
      st = er__error(ER_STATUS_NOT_FOUND, "the model has no input named '%s'", name);
      goto done;
    }
    const er_value *v = &g->values[g->inputs[slot]];
    if (v->kind == ER_VALUE_CONSTANT && s->model->ir_version < 4) {
      st = er__error(ER_STATUS_INVALID_ARGUMENT,
                     "input '%s' is an initializer of an IR %lld model and cannot be overridden",
                     name, (long long)s->model->ir_version);
      goto done;
    }
    if (bound[slot]) {
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "input '%s' is given twice", name);
      goto done;
    }
    if (!t->data && t->nbytes) {
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "input '%s' has no data", name);
      goto done;
    }
    st = check_input(v, t);
    if (st != ER_STATUS_OK) goto done;
    bound[slot] = t;
  }
  for (int32_t k = 0; k < g->n_inputs; k++) {
    const er_value *v = &g->values[g->inputs[k]];
    if (!bound[k] && v->kind == ER_VALUE_INPUT) {
      st = er__error(ER_STATUS_NOT_FOUND, "input '%s' is required but was not given", v->name);
      goto done;
    }
  }
  /* Resolve requested outputs. */
  if (output_names) {
    for (size_t i = 0; i < n_outputs; i++) {
      want[i] = -1;
      for (int32_t k = 0; k < g->n_outputs; k++)
        if (output_names[i] && strcmp(g->values[g->outputs[k]].name, output_names[i]) == 0) want[i] = k;
      if (want[i] < 0) {
        st = er__error(ER_STATUS_NOT_FOUND, "the model has no output named '%s'",
                       output_names[i] ? output_names[i] : "(null)");
        goto done;
      }
    }
  } else {
    if (n_outputs != (size_t)g->n_outputs) {
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "n_outputs is %zu but the model has %d outputs",
                     n_outputs, (int)g->n_outputs);
      goto done;
    }
    for (size_t i = 0; i < n_outputs; i++) want[i] = (int32_t)i;
  }

  er_exec ex = {s->opts.threads, s->opts.force_reference, NULL, 0, observe, user};
  /* Inputs with initializers that were not given fall back to the
   * initializer (bound inside exec). */
  int n_bind = 0;
  for (int32_t k = 0; k < g->n_inputs; k++)
    if (bound[k]) n_bind = k + 1;
  st = er__exec_graph_segments(&ex, g, NULL, (const er_tensor *const *)bound, n_bind, s->segs,
                               s->n_segs, results);
  if (st != ER_STATUS_OK) goto done;

  for (size_t i = 0; i < n_outputs; i++) outputs_out[i] = NULL;
  for (size_t i = 0; i < n_outputs; i++) {
    er_tensor *t = er__tensor_new();
    if (!t) {
      st = ER_STATUS_OUT_OF_MEMORY;
      for (size_t j = 0; j < i; j++) {
        er_tensor_free(outputs_out[j]);
        outputs_out[j] = NULL;
      }
      goto done;
    }
    er_tensor *r = &results[want[i]];
    if (r->flags & ER_TENSOR_OWNS_DATA) {
      *t = *r;
      r->flags &= ~(uint32_t)ER_TENSOR_OWNS_DATA;
      r->data = NULL;
    } else {
      st = er__tensor_copy(t, r);
      if (st != ER_STATUS_OK) {
        free(t);
        goto done;
      }
    }
    outputs_out[i] = t;
  }
done:
  if (results)
    for (int32_t k = 0; k < g->n_outputs; k++) er__tensor_release(&results[k]);
  free(bound);
  free(results);
  free(want);
  return st;
}
