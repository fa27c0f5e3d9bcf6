/* plugin.c - backends from shared objects: the host API table handed to
 * plugins, the adapter that turns a plugin's er_backend_plugin into the
 * core's er_backend, and loading with dlopen. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "backends/backend.h"
#include "backends/partition.h"
#include "backends/registry.h"
#include "ops/op.h"

/* ======================================================================== */
/* The host API                                                              */
/* ======================================================================== */

static er_status host_set_error(er_status status, const char *message) {
  return er__error(status, "%s", message ? message : "");
}

static void host_log(er_log_level level, const char *message) {
  er__log(level, "%s", message ? message : "");
}

static size_t host_dtype_size(er_dtype t) { return er_dtype_size(t); }
static const char *host_dtype_name(er_dtype t) { return er_dtype_name(t); }

static int32_t graph_node_count(const er_graph *g) { return g->n_nodes; }
static const er_node *graph_node(const er_graph *g, int32_t i) {
  return i >= 0 && i < g->n_nodes ? &g->nodes[i] : NULL;
}
static int32_t graph_value_count(const er_graph *g) { return g->n_values; }

static er_status graph_value_info(const er_graph *g, int32_t id, er_value_info *out) {
  static const char *const no_params[ER_MAX_RANK] = {0};
  if (id < 0 || id >= g->n_values)
    return er__error(ER_STATUS_NOT_FOUND, "value %d does not exist (graph '%s' has %d)", (int)id,
                     g->name, (int)g->n_values);
  const er_value *v = &g->values[id];
  out->name = v->name;
  out->dtype = v->info.dtype;
  out->rank = v->info.rank;
  out->dims = v->info.dims;
  out->dim_params = er__value_dim_params(v) ? er__value_dim_params(v) : no_params;
  return ER_STATUS_OK;
}

static const er_tensor *graph_value_constant(const er_graph *g, int32_t id) {
  if (id < 0 || id >= g->n_values || !er__value_is_fixed(g, id)) return NULL;
  return g->values[id].constant;
}

static const char *node_op_type(const er_node *n) { return n->op_type; }
static const char *node_domain(const er_node *n) { return n->domain; }
static const char *node_name(const er_node *n) { return n->name; }
static int node_version(const er_node *n) { return n->version; }
static int node_input_count(const er_node *n) { return n->n_inputs; }
static int32_t node_input(const er_node *n, int i) { return i >= 0 && i < n->n_inputs ? n->inputs[i] : -1; }
static int node_output_count(const er_node *n) { return n->n_outputs; }
static int32_t node_output(const er_node *n, int i) {
  return i >= 0 && i < n->n_outputs ? n->outputs[i] : -1;
}

static const er_tensor *frame_value(const er_frame *f, int32_t id) {
  if (id < 0 || id >= f->g->n_values || !f->vals[id].data) return NULL;
  return &f->vals[id];
}

static er_status frame_output(er_frame *f, int32_t id, er_dtype dtype, int rank, const int64_t *dims,
                              er_tensor **out) {
  if (id < 0 || id >= f->g->n_values)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "frame_output: value %d does not exist", (int)id);
  if (rank < 0 || rank > ER_MAX_RANK || (rank > 0 && !dims) || !er__dtype_is_numeric(dtype))
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "frame_output: value '%s' given type %s and rank %d (rank must be 0..%d)",
                     f->g->values[id].name, er_dtype_name(dtype), rank, ER_MAX_RANK);
  int64_t count;
  if (!er__shape_count(rank, dims, &count) || count > ER_MAX_RUNTIME_ELEMENTS)
    return er__error(ER_STATUS_LIMIT,
                     "frame_output: value '%s' would exceed %lld elements (ER_MAX_RUNTIME_ELEMENTS)",
                     f->g->values[id].name, (long long)ER_MAX_RUNTIME_ELEMENTS);
  er_tensor *t = &f->vals[id];
  er__tensor_release(t);
  er__tensor_set(t, dtype, rank, dims);
  ER_CHECK(er__tensor_alloc(t, 0));
  *out = t;
  return ER_STATUS_OK;
}

static const er_host_api host_api = {
    .abi_version = ER_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(er_host_api),
    .set_error = host_set_error,
    .log = host_log,
    .tensor_dtype = er_tensor_dtype,
    .tensor_rank = er_tensor_rank,
    .tensor_dims = er_tensor_dims,
    .tensor_count = er_tensor_count,
    .tensor_nbytes = er_tensor_nbytes,
    .tensor_data = er_tensor_data,
    .tensor_cdata = er_tensor_cdata,
    .dtype_size = host_dtype_size,
    .dtype_name = host_dtype_name,
    .graph_node_count = graph_node_count,
    .graph_node = graph_node,
    .graph_value_count = graph_value_count,
    .graph_value_info = graph_value_info,
    .graph_value_constant = graph_value_constant,
    .node_op_type = node_op_type,
    .node_domain = node_domain,
    .node_name = node_name,
    .node_version = node_version,
    .node_input_count = node_input_count,
    .node_input = node_input,
    .node_output_count = node_output_count,
    .node_output = node_output,
    .node_attr_int = er_node_attr_int,
    .node_attr_float = er_node_attr_float,
    .node_attr_string = er_node_attr_string,
    .node_attr_ints = er_node_attr_ints,
    .node_attr_floats = er_node_attr_floats,
    .frame_value = frame_value,
    .frame_output = frame_output,
    .custom_op_register = er_custom_op_register,
    .kernel_input_count = er_kernel_input_count,
    .kernel_output_count = er_kernel_output_count,
    .kernel_input = er_kernel_input,
    .kernel_output = er_kernel_output,
    .kernel_set_output = er_kernel_set_output,
    .kernel_is_loading = er_kernel_is_loading,
    .kernel_node = er_kernel_node,
};

const er_host_api *er__host_api(void) { return &host_api; }

/* ======================================================================== */
/* The adapter                                                               */
/* ======================================================================== */

/* One registered plugin: its table, the core's view of it, and the
 * library handle (NULL for er_backend_register). */
typedef struct plugin {
  er_backend_plugin table;
  er_backend_iface iface;
  er_backend backend;
  char name[ER_PLUGIN_NAME_BYTES];
  char path[512];
  void *dl;
} plugin;

typedef struct plugin_compiled {
  void *compiled;            /* the plugin's */
  er_subgraph sg;            /* arrays owned by the session's plan */
} plugin_compiled;

static plugin *plugin_of(er_backend *be) { return be->impl; }

static int ad_device_count(er_backend *be) {
  plugin *p = plugin_of(be);
  return p->table.device_count ? p->table.device_count(p->table.user) : 1;
}

static er_status ad_device_desc(er_backend *be, int index, er_device_desc *d) {
  plugin *p = plugin_of(be);
  memset(d, 0, sizeof *d);
  if (!p->table.device_desc) {
    snprintf(d->name, sizeof d->name, "%s", p->name);
    d->kind = ER_DEVICE_OTHER;
    return ER_STATUS_OK;
  }
  er__error_clear();
  er_status st = p->table.device_desc(p->table.user, index, d);
  d->name[sizeof d->name - 1] = d->vendor[sizeof d->vendor - 1] = d->driver[sizeof d->driver - 1] = '\0';
  if (st != ER_STATUS_OK && !er_last_error()[0])
    er__error(st, "plugin '%s': device %d: %s", p->name, index, er_status_str(st));
  return st;
}

static bool ad_supports_op(er_backend *be, const er_graph *g, const er_node *node, char *reason,
                           size_t size) {
  plugin *p = plugin_of(be);
  if (size) reason[0] = '\0';
  bool ok = p->table.supports_op(p->table.user, g, node, reason, size);
  if (size) reason[size - 1] = '\0';
  return ok;
}

static void ad_release(er_backend *be, void *compiled) {
  plugin *p = plugin_of(be);
  plugin_compiled *c = compiled;
  if (!c) return;
  if (p->table.release && c->compiled) p->table.release(p->table.user, c->compiled);
  free(c);
}

static er_status ad_compile(er_backend *be, const er_subgraph *sg, const er_compile_options *opts, void **out) {
  ER_UNUSED(opts);
  plugin *p = plugin_of(be);
  plugin_compiled *c = calloc(1, sizeof *c);
  if (!c) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling for plugin '%s'", p->name);
  c->sg = *sg;
  er__error_clear();
  er_status st = p->table.compile(p->table.user, sg, &c->compiled);
  if (st != ER_STATUS_OK) {
    if (!er_last_error()[0]) er__error(st, "%s", er_status_str(st));
    er__error_prefix("plugin '%s' could not compile %d nodes", p->name, (int)sg->n_nodes);
    free(c);
    return st;
  }
  *out = c;
  return ER_STATUS_OK;
}

static er_status ad_compute(er_backend *be, void *compiled, er_exec *run, er_tensor *values) {
  plugin *p = plugin_of(be);
  plugin_compiled *c = compiled;
  ER_UNUSED(run);
  er_frame frame = {c->sg.graph, values, NULL, NULL};
  er__error_clear();
  er_status st = p->table.compute(p->table.user, c->compiled, &frame);
  if (st != ER_STATUS_OK) {
    if (!er_last_error()[0]) er__error(st, "%s", er_status_str(st));
    er__error_prefix("plugin '%s'", p->name);
    return st;
  }
  /* A plugin that forgets an output would leave a later segment reading
   * nothing: say which one here. */
  for (int32_t k = 0; k < c->sg.n_outputs; k++)
    if (!values[c->sg.outputs[k]].data)
      return er__error(ER_STATUS_BACKEND, "plugin '%s' did not produce value '%s'", p->name,
                       c->sg.graph->values[c->sg.outputs[k]].name);
  return ER_STATUS_OK;
}

static void ad_destroy(er_backend *be) {
  plugin *p = plugin_of(be);
  if (p->table.destroy) p->table.destroy(p->table.user);
}

static bool valid_plugin_name(const char *s) {
  if (!s || !s[0] || strlen(s) >= ER_PLUGIN_NAME_BYTES) return false;
  for (const char *c = s; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-')) return false;
  return true;
}

/* Checks a filled table and wraps it; the caller registers the result. */
static er_status adopt(const er_backend_plugin *t, const char *path, void *dl, plugin **out) {
  const char *from = path ? path : "an in-process plugin";
  if (ER_PLUGIN_ABI_MAJOR_OF(t->abi_version) != ER_PLUGIN_ABI_MAJOR)
    return er__error(ER_STATUS_UNSUPPORTED,
                     "%s was built for backend ABI %u.%u; this edgerun speaks %u.%u (rebuild the "
                     "plugin against this include/edgerun-backend.h)",
                     from, ER_PLUGIN_ABI_MAJOR_OF(t->abi_version), ER_PLUGIN_ABI_MINOR_OF(t->abi_version),
                     ER_PLUGIN_ABI_MAJOR, ER_PLUGIN_ABI_MINOR);
  if (t->struct_size < offsetof(er_backend_plugin, destroy) + sizeof t->destroy)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "%s: struct_size %u is smaller than ABI 1.0's %zu", from,
                     t->struct_size, offsetof(er_backend_plugin, destroy) + sizeof t->destroy);
  if (!valid_plugin_name(t->name))
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "%s: backend name '%s' must be 1 to %d characters of [a-z0-9_-]", from,
                     t->name ? t->name : "(null)", ER_PLUGIN_NAME_BYTES - 1);
  if (!t->supports_op || !t->compile || !t->compute)
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "%s: backend '%s' lacks supports_op, compile or compute", from, t->name);
  plugin *p = calloc(1, sizeof *p);
  if (!p) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory loading %s", from);
  /* Members past what the plugin knows stay zero (NULL = absent). */
  memcpy(&p->table, t, t->struct_size < sizeof p->table ? t->struct_size : sizeof p->table);
  snprintf(p->name, sizeof p->name, "%s", t->name);
  snprintf(p->path, sizeof p->path, "%s", path ? path : "");
  p->dl = dl;
  p->iface = (er_backend_iface){
      .abi_version = ER_BACKEND_ABI_VERSION,
      .name = p->name,
      .device_count = ad_device_count,
      .device_desc = ad_device_desc,
      .supports_op = ad_supports_op,
      .compile = ad_compile,
      .compute = ad_compute,
      .release = ad_release,
      .destroy = ad_destroy,
  };
  p->backend.iface = &p->iface;
  p->backend.impl = p;
  *out = p;
  return ER_STATUS_OK;
}

er_status er_backend_register(const er_backend_plugin *table) {
  if (!table) return er__error(ER_STATUS_INVALID_ARGUMENT, "er_backend_register: plugin is NULL");
  plugin *p = NULL;
  ER_CHECK(adopt(table, NULL, NULL, &p));
  er_status st = er__registry_add(&p->backend, true);
  if (st != ER_STATUS_OK) free(p);
  return st;
}

static er_status load_file(const char *path) {
  /* RTLD_LOCAL: two plugins may define the same helper names. */
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) return er__error(ER_STATUS_IO, "cannot load backend plugin '%s': %s", path, dlerror());
  er_backend_plugin_init_fn init;
  /* ISO C forbids converting void * to a function pointer; POSIX requires
   * dlsym results to convert, and copying the bytes is the sanctioned way. */
  void *sym = dlsym(dl, ER_PLUGIN_ENTRY);
  if (!sym) {
    dlclose(dl);
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "'%s' is not an edgerun backend plugin: it does not export %s()", path,
                     ER_PLUGIN_ENTRY);
  }
  memcpy(&init, &sym, sizeof init);
  er_backend_plugin table;
  memset(&table, 0, sizeof table);
  er__error_clear();
  er_status st = init(&host_api, &table);
  if (st != ER_STATUS_OK) {
    if (!er_last_error()[0]) er__error(st, "%s", er_status_str(st));
    er__error_prefix("backend plugin '%s' declined to start", path);
    dlclose(dl);
    return st;
  }
  plugin *p = NULL;
  st = adopt(&table, path, dl, &p);
  if (st == ER_STATUS_OK) {
    st = er__registry_add(&p->backend, true);
    if (st != ER_STATUS_OK) {
      if (p->table.destroy) p->table.destroy(p->table.user);
      free(p);
    }
  }
  if (st != ER_STATUS_OK) {
    dlclose(dl);
    return st;
  }
  er__log(ER_LOG_INFO, "loaded backend plugin '%s' from %s (ABI %u.%u)", table.name, path,
          ER_PLUGIN_ABI_MAJOR_OF(table.abi_version), ER_PLUGIN_ABI_MINOR_OF(table.abi_version));
  return ER_STATUS_OK;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

er_status er_backend_load(const char *path) {
  if (!path || !path[0]) return er__error(ER_STATUS_INVALID_ARGUMENT, "er_backend_load: path is empty");
  struct stat sb;
  if (stat(path, &sb) != 0)
    return er__error(ER_STATUS_IO, "backend path '%s' does not exist", path);
  if (!S_ISDIR(sb.st_mode)) return load_file(path);
  /* A plugin folder: every *.so in name order, so the outcome does not
   * depend on the file system's listing order. */
  DIR *d = opendir(path);
  if (!d) return er__error(ER_STATUS_IO, "cannot open plugin folder '%s'", path);
  char *names[ER_MAX_PLUGINS];
  int n = 0;
  er_status st = ER_STATUS_OK;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 3, ".so") != 0) continue;
    if (n == ER_MAX_PLUGINS) {
      st = er__error(ER_STATUS_LIMIT, "plugin folder '%s' has more than %d plugins (ER_MAX_PLUGINS)",
                     path, ER_MAX_PLUGINS);
      break;
    }
    names[n] = malloc(strlen(path) + len + 2);
    if (!names[n]) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory listing '%s'", path);
      break;
    }
    sprintf(names[n], "%s/%s", path, e->d_name);
    n++;
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  for (int i = 0; i < n; i++) {
    if (st == ER_STATUS_OK) st = load_file(names[i]);
    free(names[i]);
  }
  return st;
}
