/* custom-op.c - the registry of user kernels (er_custom_op_register) and
 * the kernel-context accessors they call.
 *
 * A new operator becomes an er_op_def like the built-in ones (its check
 * calls the user's `infer`, its run the user's CPU kernel), so loading,
 * shape inference and the CPU backend need nothing special. Kernels for
 * other backends, and overrides of standard ops, are looked up by the
 * backend that runs the node (er__custom_kernel_find).
 *
 * Entries live until the process exits: loaded models point at their
 * op defs, and a replaced entry may still be running on another thread. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "edgerun-backend.h"
#include "ops/op.h"

/* The most registrations a process may make (replacements count too). */
#define ER_MAX_CUSTOM_OPS 1024
#define ER_CUSTOM_NAME_BYTES 128

struct er_custom_kernel {
  er_op_def def;             /* new ops: what nodes bind to (first member) */
  char domain[ER_CUSTOM_NAME_BYTES];
  char op_type[ER_CUSTOM_NAME_BYTES];
  char backend[32];
  bool is_new_op;            /* no built-in op of this name */
  bool active;               /* false once replaced */
  er_custom_op op;           /* the caller's table, strings re-pointed */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static er_custom_kernel *entries[ER_MAX_CUSTOM_OPS];
static int n_entries;

static _Thread_local void *current_stream;

/* ---- the op def of a new operator -------------------------------------- */

static const er_custom_kernel *entry_of(const er_kctx *ctx) {
  /* def is the first member, so the node's op pointer is the entry. */
  return (const er_custom_kernel *)(const void *)ctx->node->op;
}

static er_status custom_check(er_kctx *ctx) {
  const er_custom_kernel *k = entry_of(ctx);
  if (!k->op.infer) {
    if (ctx->n_out > 0 && ctx->n_in > 0 && ctx->in[0]) er__same_as_input(ctx, 0, 0);
    return ER_STATUS_OK;
  }
  er__error_clear();
  er_status st = k->op.infer(k->op.user, ctx);
  if (st != ER_STATUS_OK && !er_last_error()[0])
    er__op_error(ctx, st, "the registered shape rule failed (%s)", er_status_name(st));
  return st;
}

static er_status custom_run(er_kctx *ctx) {
  return er__custom_kernel_run(entry_of(ctx), ctx, NULL);
}

er_status er__custom_kernel_run(const er_custom_kernel *k, er_kctx *ctx, void *stream) {
  void *saved = current_stream;
  current_stream = stream;
  er__error_clear();
  er_status st = k->op.compute(k->op.user, ctx);
  current_stream = saved;
  if (st != ER_STATUS_OK && !er_last_error()[0])
    er__op_error(ctx, st, "the registered %s kernel failed (%s)", k->backend, er_status_name(st));
  else if (st != ER_STATUS_OK)
    er__error_prefix("%s '%s' (%s kernel)", ctx->node->op_type, ctx->node->name, k->backend);
  return st;
}

/* ---- registration ------------------------------------------------------ */

static bool builtin_exists(const char *domain, const char *op_type) {
  if (domain[0] == '\0') return er__onnx_op_version(op_type, er__onnx_max_opset()) > 0;
  /* Any version of a built-in op of another domain (com.microsoft, ...). */
  for (int v = 1; v <= 64; v++)
    if (er__op_find_builtin(domain, op_type, v)) return true;
  return false;
}

static er_custom_kernel *find_locked(const char *domain, const char *op_type, const char *backend) {
  for (int i = n_entries - 1; i >= 0; i--) {
    er_custom_kernel *k = entries[i];
    if (k->active && strcmp(k->domain, domain) == 0 && strcmp(k->op_type, op_type) == 0 &&
        strcmp(k->backend, backend) == 0)
      return k;
  }
  return NULL;
}

static bool valid_name(const char *s, size_t max) {
  return s && strlen(s) < max;
}

er_status er_custom_op_register(const er_custom_op *op) {
  if (!op) return er__error(ER_STATUS_INVALID_ARGUMENT, "custom op: the table is NULL");
  if (ER_PLUGIN_ABI_MAJOR_OF(op->abi_version) != ER_PLUGIN_ABI_MAJOR)
    return er__error(ER_STATUS_UNSUPPORTED,
                     "custom op: built against ABI %u.%u, this edgerun speaks %u.%u",
                     ER_PLUGIN_ABI_MAJOR_OF(op->abi_version), ER_PLUGIN_ABI_MINOR_OF(op->abi_version),
                     ER_PLUGIN_ABI_MAJOR, ER_PLUGIN_ABI_MINOR);
  if (op->struct_size < offsetof(er_custom_op, user) + sizeof op->user)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "custom op: struct_size %u is smaller than ABI 1.0's",
                     op->struct_size);
  const char *backend = op->backend ? op->backend : "cpu";
  if (!valid_name(op->domain, ER_CUSTOM_NAME_BYTES) || !valid_name(op->op_type, ER_CUSTOM_NAME_BYTES) ||
      !op->op_type[0])
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "custom op: domain and op_type must be set and shorter than %d bytes",
                     ER_CUSTOM_NAME_BYTES);
  const char *what = op->op_type;
  if (strcmp(backend, "cpu") != 0 && strcmp(backend, "opencl") != 0 && strcmp(backend, "cuda") != 0)
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "custom op %s: backend '%s' cannot take registered kernels (cpu, opencl and "
                     "cuda can; a plugin backend claims ops through its own supports_op)",
                     what, backend);
  if (!op->compute)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "custom op %s: compute is NULL", what);
  if (op->min_version < 0 || op->max_version < op->min_version)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "custom op %s: versions %d to %d are not a range",
                     what, op->min_version, op->max_version);
  bool is_new = !builtin_exists(op->domain, op->op_type);
  if (is_new && op->domain[0] == '\0')
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "custom op %s: the default ONNX domain has no op of that name; put new ops in "
                     "your own domain (\"com.example\")", what);
  if (!is_new && op->infer)
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "custom op %s.%s overrides a built-in op, whose shape rule stays: infer must be "
                     "NULL", op->domain, what);
  if (is_new && (op->min_inputs < 0 || op->max_inputs < op->min_inputs ||
                 op->max_inputs > ER_MAX_NODE_IO || op->min_outputs < 1 ||
                 op->max_outputs < op->min_outputs || op->max_outputs > ER_MAX_NODE_IO))
    return er__error(ER_STATUS_INVALID_ARGUMENT,
                     "custom op %s: arity inputs %d..%d, outputs %d..%d is not valid (at least one "
                     "output, at most %d)", what, op->min_inputs, op->max_inputs, op->min_outputs,
                     op->max_outputs, ER_MAX_NODE_IO);

  er_status st = ER_STATUS_OK;
  pthread_mutex_lock(&reg_lock);
  if (is_new && strcmp(backend, "cpu") != 0 && !find_locked(op->domain, op->op_type, "cpu")) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT,
                   "custom op %s.%s: register its CPU kernel first; it is the fallback wherever "
                   "the %s kernel cannot run", op->domain, what, backend);
    goto out;
  }
  if (n_entries == ER_MAX_CUSTOM_OPS) {
    st = er__error(ER_STATUS_LIMIT, "custom op %s: more than %d registrations (ER_MAX_CUSTOM_OPS)",
                   what, ER_MAX_CUSTOM_OPS);
    goto out;
  }
  er_custom_kernel *k = calloc(1, sizeof *k);
  if (!k) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory registering custom op %s", what);
    goto out;
  }
  snprintf(k->domain, sizeof k->domain, "%s", op->domain);
  snprintf(k->op_type, sizeof k->op_type, "%s", op->op_type);
  snprintf(k->backend, sizeof k->backend, "%s", backend);
  memcpy(&k->op, op, sizeof k->op);
  k->op.domain = k->domain;
  k->op.op_type = k->op_type;
  k->op.backend = k->backend;
  k->is_new_op = is_new;
  k->active = true;
  if (is_new && strcmp(backend, "cpu") == 0) {
    k->def.name = k->op_type;
    k->def.domain = k->domain;
    k->def.min_version = op->min_version ? op->min_version : 1;
    k->def.max_version = op->max_version ? op->max_version : INT32_MAX;
    k->def.min_inputs = op->min_inputs;
    k->def.max_inputs = op->max_inputs;
    k->def.min_outputs = op->min_outputs;
    k->def.max_outputs = op->max_outputs;
    /* A user kernel may count calls or touch devices: never run it at
     * load to fold constants. */
    k->def.flags = ER_OP_NO_FOLD;
    k->def.check = custom_check;
    k->def.run = custom_run;
  }
  er_custom_kernel *old = find_locked(op->domain, op->op_type, backend);
  if (old) old->active = false;
  entries[n_entries++] = k;
out:
  pthread_mutex_unlock(&reg_lock);
  return st;
}

const er_op_def *er__custom_op_find(const char *domain, const char *op_type, int version) {
  const er_op_def *found = NULL;
  pthread_mutex_lock(&reg_lock);
  er_custom_kernel *k = find_locked(domain, op_type, "cpu");
  if (k && k->is_new_op && version >= k->def.min_version && version <= k->def.max_version)
    found = &k->def;
  pthread_mutex_unlock(&reg_lock);
  return found;
}

const er_custom_kernel *er__custom_kernel_find(const char *backend, const er_node *node) {
  const er_custom_kernel *found = NULL;
  pthread_mutex_lock(&reg_lock);
  er_custom_kernel *k = find_locked(node->domain, node->op_type, backend);
  if (k) {
    int lo = k->op.min_version ? k->op.min_version : 1;
    int hi = k->op.max_version ? k->op.max_version : INT32_MAX;
    if (node->version >= lo && node->version <= hi) found = k;
  }
  pthread_mutex_unlock(&reg_lock);
  return found;
}

/* ---- the kernel context ------------------------------------------------ */

int er_kernel_input_count(const er_kernel_ctx *ctx) { return ctx->n_in; }
int er_kernel_output_count(const er_kernel_ctx *ctx) { return ctx->n_out; }

const er_tensor *er_kernel_input(const er_kernel_ctx *ctx, int i) {
  return i >= 0 && i < ctx->n_in ? ctx->in[i] : NULL;
}

er_tensor *er_kernel_output(const er_kernel_ctx *ctx, int i) {
  if (ctx->checking || i < 0 || i >= ctx->n_out) return NULL;
  return ctx->out[i];
}

er_status er_kernel_set_output(er_kernel_ctx *ctx, int i, er_dtype dtype, int rank,
                               const int64_t *dims) {
  if (i < 0 || i >= ctx->n_out)
    return er__op_error(ctx, ER_STATUS_INVALID_ARGUMENT, "output %d does not exist (the node has %d)",
                        i, ctx->n_out);
  if (!ctx->out[i]) return ER_STATUS_OK;  /* omitted optional output */
  if (rank < -1 || rank > ER_MAX_RANK || (rank > 0 && !dims))
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "output %d: rank %d is not in -1..%d", i, rank,
                        ER_MAX_RANK);
  if (!er__dtype_is_numeric(dtype) && !(ctx->checking && dtype == ER_DTYPE_UNDEFINED))
    return er__op_error(ctx, ER_STATUS_TYPE_MISMATCH, "output %d: type %s cannot be held", i,
                        er_dtype_name(dtype));
  for (int d = 0; d < rank; d++)
    if (dims[d] < -1 || (dims[d] < 0 && !ctx->checking))
      return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "output %d: dim %d is %lld", i, d,
                          (long long)dims[d]);
  if (rank < 0 && !ctx->checking)
    return er__op_error(ctx, ER_STATUS_INVALID_SHAPE, "output %d: the rank must be known at run time",
                        i);
  er__set_output(ctx, i, dtype, rank, dims);
  return ER_STATUS_OK;
}

bool er_kernel_is_loading(const er_kernel_ctx *ctx) { return ctx->checking; }
const er_node *er_kernel_node(const er_kernel_ctx *ctx) { return ctx->node; }
void *er_kernel_stream(const er_kernel_ctx *ctx) {
  ER_UNUSED(ctx);
  return current_stream;
}

/* ---- node attributes --------------------------------------------------- */

static er_status typed_attr(const er_node *node, const char *name, er_attr_type want,
                            const er_attr **out) {
  *out = node && name ? er__node_attr(node, name) : NULL;
  if (*out && (*out)->type != want) {
    *out = NULL;
    return er__error(ER_STATUS_INVALID_ATTRIBUTE, "%s '%s': attribute '%s' has another type",
                     node->op_type, node->name, name);
  }
  return ER_STATUS_OK;
}

er_status er_node_attr_int(const er_node *node, const char *name, int64_t def, int64_t *out) {
  const er_attr *a;
  ER_CHECK(typed_attr(node, name, ER_ATTR_INT, &a));
  *out = a ? a->i : def;
  return ER_STATUS_OK;
}

er_status er_node_attr_float(const er_node *node, const char *name, float def, float *out) {
  const er_attr *a;
  ER_CHECK(typed_attr(node, name, ER_ATTR_FLOAT, &a));
  *out = a ? a->f : def;
  return ER_STATUS_OK;
}

er_status er_node_attr_string(const er_node *node, const char *name, const char *def,
                              const char **out) {
  const er_attr *a;
  ER_CHECK(typed_attr(node, name, ER_ATTR_STRING, &a));
  *out = a ? a->s : def;
  return ER_STATUS_OK;
}

er_status er_node_attr_ints(const er_node *node, const char *name, const int64_t **out,
                            int64_t *count) {
  const er_attr *a;
  ER_CHECK(typed_attr(node, name, ER_ATTR_INTS, &a));
  *out = a ? a->ints : NULL;
  *count = a ? a->n : -1;
  return ER_STATUS_OK;
}

er_status er_node_attr_floats(const er_node *node, const char *name, const float **out,
                              int64_t *count) {
  const er_attr *a;
  ER_CHECK(typed_attr(node, name, ER_ATTR_FLOATS, &a));
  *out = a ? a->floats : NULL;
  *count = a ? a->n : -1;
  return ER_STATUS_OK;
}
