/* model.c - the public model API: load (mapped, copied, or raw for an
 * importer), validate, bind, infer and fold once; the model's limits, its
 * inputs and outputs, metadata and nodes; fixing symbolic dims; saving. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/graph.h"
#include "onnx/onnx.h"
#include "onnx/onnx-write.h"
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
  o->optimize = 2;
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
  er__owned_free(&m->owned);
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
    info->dim_params = er__value_dim_params(v) ? er__value_dim_params(v) : no_params;
  }
  for (int32_t i = 0; i < g->n_outputs; i++) {
    const er_value *v = &g->values[g->outputs[i]];
    er_value_info *info = &m->output_info[m->n_output_info++];
    info->name = v->name;
    info->dtype = v->info.dtype;
    info->rank = v->info.rank;
    info->dims = v->info.dims;
    info->dim_params = er__value_dim_params(v) ? er__value_dim_params(v) : no_params;
  }
  return ER_STATUS_OK;
}

/* Everything after the bytes are in place. A raw load (an importer that
 * reads the graph as data: er__model_load_file_raw) stops after parsing
 * and the topological check, so operators edgerun does not run may appear. */
static er_status finish_load(struct er_model *m, bool raw) {
  ER_CHECK(er__onnx_parse_model(m));
  if (raw) return er__graph_validate(m->graph);
  er_pass_ctx pc = {.level = m->limits.optimize};
  ER_CHECK(er__graph_run_passes(m->graph, ER_PASS_LOAD, &pc));
  for (int32_t i = 0; i < m->graph->n_inputs; i++) {
    const er_value *v = &m->graph->values[m->graph->inputs[i]];
    if (v->kind == ER_VALUE_INPUT && !er__dtype_is_numeric(v->info.dtype))
      return er__error(ER_STATUS_UNSUPPORTED, "graph input '%s' has type %s, which is not supported",
                       v->name, er_dtype_name(v->info.dtype));
  }
  return build_infos(m);
}

static er_status load_file(const char *path, const er_load_options *opts, bool raw, er_model **model_out) {
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
  st = finish_load(m, raw);
  if (st != ER_STATUS_OK) goto fail;
  *model_out = m;
  return ER_STATUS_OK;
fail:
  if (fd >= 0) close(fd);
  er_model_free(m);
  return st;
}

er_status er_model_load_file(const char *path, const er_load_options *opts, er_model **model_out) {
  return load_file(path, opts, false, model_out);
}

er_status er__model_load_file_raw(const char *path, const er_load_options *opts, er_model **model_out) {
  return load_file(path, opts, true, model_out);
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
  st = finish_load(m, false);
  if (st != ER_STATUS_OK) goto fail;
  *model_out = m;
  return ER_STATUS_OK;
fail:
  er_model_free(m);
  return st;
}

er_status er_model_fix_dims(er_model *m, const char *const *names, const int64_t *values, size_t n) {
  er_graph *g = m->graph;
  if (n && (!names || !values)) return er__error(ER_STATUS_INVALID_ARGUMENT, "names and values must not be NULL");
  for (size_t k = 0; k < n; k++) {
    if (!names[k] || values[k] <= 0)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "dim '%s' = %lld: a fixed dim must be positive",
                       names[k] ? names[k] : "(null)", (long long)values[k]);
    bool found = false;
    for (int32_t i = 0; i < g->n_inputs; i++) {
      er_value *v = &g->values[g->inputs[i]];
      const char **params = er__value_dim_params(v);
      if (v->kind != ER_VALUE_INPUT || !params) continue;
      for (int d = 0; d < v->info.rank; d++)
        if (params[d] && strcmp(params[d], names[k]) == 0) {
          v->info.dims[d] = values[k];
          params[d] = NULL;
          found = true;
        }
    }
    if (!found) {
      char have[512] = "";
      size_t used = 0;
      for (int32_t i = 0; i < g->n_inputs; i++) {
        const er_value *v = &g->values[g->inputs[i]];
        const char **params = er__value_dim_params(v);
        for (int d = 0; params && d < v->info.rank; d++)
          if (params[d] && used < sizeof have)
            used += (size_t)snprintf(have + used, sizeof have - used, "%s%s", used ? ", " : "", params[d]);
      }
      return er__error(ER_STATUS_NOT_FOUND, "no input has a dim named '%s' (symbolic dims: %s)", names[k],
                       have[0] ? have : "none");
    }
  }
  /* Intermediate shapes are derived again from the fixed inputs. */
  for (int32_t v = 0; v < g->n_values; v++) {
    er_value *val = &g->values[v];
    if (val->kind == ER_VALUE_INTERMEDIATE && !val->has_declared_type) er__tensor_set(&val->info, val->info.dtype, -1, NULL);
  }
  ER_CHECK(er__graph_infer(g, false));
  /* The public descriptions point at the values' dims; refresh the
   * symbolic names they report. */
  for (size_t i = 0; i < m->n_input_info; i++)
    for (int32_t k = 0; k < g->n_inputs; k++) {
      const er_value *v = &g->values[g->inputs[k]];
      if (strcmp(v->name, m->input_info[i].name) == 0) m->input_info[i].rank = v->info.rank;
    }
  return ER_STATUS_OK;
}

er_status er_model_save(const er_model *m, const char *path) {
  if (!m || !path) return er__error(ER_STATUS_INVALID_ARGUMENT, "model and path must not be NULL");
  return er__onnx_save_model(m, path);
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
