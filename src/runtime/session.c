/* session.c - the public session API: a loaded model (model.c) compiled
 * into a plan once, then run many times, from any number of threads. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "graph/graph.h"
#include "graph/planner.h"
#include "onnx/onnx.h"
#include "onnx/onnx-write.h"
#include "backends/partition.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"

/* ======================================================================== */
/* Sessions                                                                  */
/* ======================================================================== */

/* A session: the model's main graph cut into segments, each a maximal
 * group of nodes placed on one backend (backends/partition.h) and compiled
 * by it once. Runs share nothing but this read-only plan. */
struct er_session {
  const er_model *model;
  const er_graph *graph;   /* what runs: the model's graph, or the session's
                              own fused copy (CPU-only sessions) */
  er_arena arena;          /* the fused copy's memory */
  er_owned_list owned;     /* tensors made for the fused copy */
  er_session_options opts;
  er_plan *plan;           /* placement, segments, fallback report */
  int32_t *exec_pos;       /* [n_nodes] position of each node in run order */
  er_segment *segs;        /* [n_segs] */
  int n_segs;
  er_thread_pool *pool;    /* opts.threads workers, shared by runs */
  bool flush_denormals;    /* runs flush subnormals (keep_denormals unset) */
  /* Profiling (opts.profile): accumulated under prof_lock after each run. */
  pthread_mutex_t prof_lock;
  er_node_prof *prof;      /* [n_nodes] */
  uint64_t arena_bytes;    /* largest arena any run context planned */
  int32_t *last_use;       /* [n_values] last reader of each value */
  size_t scratch_bytes;    /* largest kernel scratch of any node */
  pthread_mutex_t ctx_lock;
  struct run_ctx *free_ctx; /* idle run contexts */
  uint64_t *need_max;      /* [n_values] the most bytes any run needed, so
                              every context plans for what one has seen */
};

/* ======================================================================== */
/* Run contexts: the memory one run uses, kept for the next                   */
/* ======================================================================== */

/* Everything a run needs besides the compiled plan: the value frame, the
 * arena with its layout, operand arrays, kernel scratch. A session keeps
 * idle contexts on a free list, so steady-state runs allocate nothing;
 * concurrent runs each take their own. */
typedef struct run_ctx {
  struct run_ctx *next;
  er_tensor *vals;              /* [n_values] */
  int64_t *offset;              /* [n_values] planned offsets */
  uint64_t *capacity;           /* [n_values] */
  uint64_t *need;               /* [n_values] bytes seen per value */
  uint8_t *arena;
  uint64_t arena_bytes;
  er_tensor **bound_out;        /* [n_values] caller outputs (run_into) */
  const er_tensor **bound_in;   /* [n_inputs] */
  int32_t *want;                /* [n_outputs] */
  int32_t *view_of;             /* [n_values] see er_run_mem.view_of */
  int32_t *part_of;             /* [n_values] Concat output holding this value, -1 none */
  er_run_mem mem;
} run_ctx;

static void ctx_free(run_ctx *c) {
  if (!c) return;
  free(c->vals);
  free(c->offset);
  free(c->capacity);
  free(c->need);
  er__aligned_free(c->arena);
  free(c->bound_out);
  free(c->bound_in);
  free(c->want);
  free(c->view_of);
  free(c->part_of);
  er__aligned_free(c->mem.scratch);
  er__aligned_free(c->mem.spill);
  free(c->mem.inp);
  free(c->mem.outp);
  free(c);
}

/* A value the planner places: produced by a CPU-placed node of the main
 * graph, not a graph output (those go to the caller). Values made on a
 * device stay in that backend's own memory. */
static bool plannable(const er_session *s, int32_t v) {
  const er_value *val = &s->graph->values[v];
  return val->kind == ER_VALUE_INTERMEDIATE && val->producer >= 0 && !val->is_graph_output &&
         s->plan->place[val->producer] == er__backend_cpu();
}

/* Static byte size of value v, or -1. */
static int64_t static_bytes(const er_graph *g, int32_t v) {
  int64_t count = er__tensor_count(&g->values[v].info);
  size_t es = er_dtype_size(g->values[v].info.dtype);
  return count < 0 || es == 0 ? -1 : count * (int64_t)es;
}

/* The bytes the plan gives value u, when they are known: its static size,
 * else what runs have needed for it (symbolic dims), if it is planned and
 * has run. */
static int64_t plan_bytes(const er_session *s, const run_ctx *c, const uint64_t *bytes, const uint64_t *part_off,
                          int32_t u) {
  int64_t b = static_bytes(s->graph, u);
  if (b >= 0) return b;
  if (c->part_of[u] >= 0) return (int64_t)part_off[s->graph->n_values + u];
  return plannable(s, u) && c->view_of[u] < 0 && bytes[u] > 0 ? (int64_t)bytes[u] : -1;
}

/* Concat in place: a Concat whose dims before the axis are all 1 (NCHW
 * channel concatenation at batch 1) holds each input as one contiguous
 * slice of its output. Inputs made on the CPU, planned, not views or view
 * roots, not Concat outputs themselves and listed once are given their
 * slice as their own memory: their producers write straight into the
 * output and the Concat copies nothing for them (copy_all and concat_run
 * skip a source that already is its destination). The output then lives
 * from its first part's birth; it is marked view_of = -2 so that nothing
 * zeroes it. Symbolic dims (a detector exported with dynamic batch and
 * image size) take the sizes runs have seen, so the plan is made after
 * the first run; a later run at other shapes finds inputs out of place,
 * which the Concat kernels detect and handle (er__concat_misplaced).
 * Returns false when out of memory. */
static bool plan_concats(const er_session *s, run_ctx *c, int32_t *first, int32_t *last, uint64_t *bytes,
                         uint64_t *part_off) {
  const er_graph *g = s->graph;
  int32_t n = g->n_values;
  bool *rooted = calloc((size_t)n + 1, sizeof *rooted);
  if (!rooted) return false;
  for (int32_t v = 0; v < n; v++) {
    c->part_of[v] = -1;
    if (c->view_of[v] >= 0) rooted[c->view_of[v]] = true;
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *node = &g->nodes[i];
    if (!node->op || strcmp(node->op->name, "Concat") != 0 || node->op->domain[0] || node->n_outputs < 1) continue;
    int32_t v = node->outputs[0];
    if (v < 0 || first[v] < 0 || c->view_of[v] != -1 || c->part_of[v] >= 0 || plan_bytes(s, c, bytes, part_off, v) < 0)
      continue;
    const er_tensor *oi = &g->values[v].info;
    const er_attr *ax = er__node_attr(node, "axis");
    int64_t axis = ax ? ax->i : 1;
    if (oi->rank < 1) continue;
    if (axis < 0) axis += oi->rank;
    if (axis < 0 || axis >= oi->rank) continue;
    /* (a symbolic batch is taken to be 1, as runs have seen it) */
    bool outer_one = true;
    for (int64_t d = 0; d < axis; d++)
      if (oi->dims[d] != 1 && oi->dims[d] >= 0) outer_one = false;
    if (!outer_one) continue;
    /* With symbolic sizes a run may find its inputs out of place, and the
     * Concat then moves them: only inputs it reads last may be its parts. */
    bool exact = static_bytes(g, v) >= 0;
    for (int k = 0; k < node->n_inputs && exact; k++)
      if (node->inputs[k] < 0 || static_bytes(g, node->inputs[k]) < 0) exact = false;
    uint64_t off = 0;
    bool any = false, ok = true;
    for (int k = 0; k < node->n_inputs && ok; k++) {
      int32_t u = node->inputs[k];
      int64_t ub = u >= 0 ? plan_bytes(s, c, bytes, part_off, u) : -1;
      if (ub < 0) {
        ok = false; /* offsets of the later inputs unknown */
        break;
      }
      bool once = true;
      for (int j = 0; j < node->n_inputs; j++)
        if (j != k && node->inputs[j] == u) once = false;
      /* (view_of[u] == -2: u holds parts of its own) */
      if (once && first[u] >= 0 && c->view_of[u] == -1 && !rooted[u] && c->part_of[u] < 0 && u != v &&
          (exact || last[u] == s->exec_pos[i])) {
        c->part_of[u] = v;
        part_off[u] = off;
        part_off[n + u] = (uint64_t)ub;
        any = true;
      }
      off += (uint64_t)ub;
    }
    if (!ok) {
      for (int32_t u = 0; u < n; u++)
        if (c->part_of[u] == v) c->part_of[u] = -1;
      continue;
    }
    if (!any) continue;
    c->view_of[v] = -2;
    for (int32_t u = 0; u < n; u++) {
      if (c->part_of[u] != v) continue;
      if (first[u] < first[v]) first[v] = first[u];
      if (last[u] > last[v]) last[v] = last[u];
      first[u] = last[u] = -1;
      bytes[u] = 0;
    }
    if (bytes[v] < off) bytes[v] = off;
  }
  free(rooted);
  return true;
}

/* (Re)plans the arena from the larger of what the model declares and what
 * runs needed. */
static er_status ctx_plan(const er_session *s, run_ctx *c) {
  const er_graph *g = s->graph;
  int32_t n = g->n_values;
  int32_t *first = malloc(((size_t)n + 1) * sizeof *first);
  int32_t *last = malloc(((size_t)n + 1) * sizeof *last);
  uint64_t *bytes = malloc(((size_t)n + 1) * sizeof *bytes);
  /* [0, n): a Concat part's byte offset in its holder; [n, 2n): its bytes */
  uint64_t *part_off = malloc((2 * (size_t)n + 1) * sizeof *part_off);
  er_status st = ER_STATUS_OK;
  if (!first || !last || !bytes || !part_off) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory planning memory");
    goto done;
  }
  pthread_mutex_lock((pthread_mutex_t *)&s->ctx_lock);
  for (int32_t v = 0; v < n; v++) bytes[v] = s->need_max[v];
  pthread_mutex_unlock((pthread_mutex_t *)&s->ctx_lock);
  for (int32_t v = 0; v < n; v++) {
    uint64_t session_seen = bytes[v];
    first[v] = last[v] = -1;
    bytes[v] = 0;
    if (!plannable(s, v)) continue;
    int64_t count = er__tensor_count(&g->values[v].info);
    uint64_t known = count >= 0 ? (uint64_t)count * er_dtype_size(g->values[v].info.dtype) : 0;
    uint64_t seen = c->need[v] > session_seen ? c->need[v] : session_seen;
    bytes[v] = known > seen ? known : seen;
    /* Lifetimes in run order (segments may reorder nodes). */
    first[v] = s->exec_pos[g->values[v].producer];
    last[v] = s->last_use[v] >= first[v] ? s->last_use[v] : first[v];
  }
  /* A view (Reshape and kin) shares its input's slot: the group lives as
   * long as its last member and is as large as its largest. Copies of
   * feature maps between layers that only relabel the dims vanish. */
  for (int32_t v = 0; v < n; v++) {
    c->view_of[v] = -1;
    if (first[v] < 0) continue;
    const er_node *node = &g->nodes[g->values[v].producer];
    if (!(node->op->flags & ER_OP_VIEW) || node->n_inputs < 1 || node->n_outputs < 1 || node->outputs[0] != v)
      continue;
    int32_t u = node->inputs[0];
    if (u >= 0 && plannable(s, u)) c->view_of[v] = u;
  }
  for (int32_t v = 0; v < n; v++) {
    if (c->view_of[v] < 0) continue;
    int32_t r = c->view_of[v];
    while (c->view_of[r] >= 0) r = c->view_of[r];
    if (last[v] > last[r]) last[r] = last[v];
    if (bytes[v] > bytes[r]) bytes[r] = bytes[v];
    first[v] = last[v] = -1;
    bytes[v] = 0;
  }
  if (!plan_concats(s, c, first, last, bytes, part_off)) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory planning memory");
    goto done;
  }
  uint64_t total = 0;
  st = er__plan_memory(n, first, last, bytes, c->offset, &total);
  if (st != ER_STATUS_OK) goto done;
  for (int32_t v = 0; v < n; v++) {
    if (c->view_of[v] < 0) continue;
    int32_t r = c->view_of[v];
    while (c->view_of[r] >= 0) r = c->view_of[r];
    c->offset[v] = c->offset[r];
    bytes[v] = bytes[r];
  }
  for (int32_t v = 0; v < n; v++) {
    if (c->part_of[v] < 0) continue;
    c->offset[v] = c->offset[c->part_of[v]] + (int64_t)part_off[v];
    bytes[v] = part_off[n + v];
  }
  if (total > c->arena_bytes || !c->arena) {
    uint8_t *arena = er__aligned_alloc(total ? total : 64);
    if (!arena) {
      st = ER_STATUS_OUT_OF_MEMORY;
      goto done;
    }
    er__aligned_free(c->arena);
    c->arena = arena;
    c->arena_bytes = total;
  }
  for (int32_t v = 0; v < n; v++) c->capacity[v] = bytes[v];
  c->mem.offset = c->offset;
  c->mem.capacity = c->capacity;
  c->mem.arena = c->arena;
  c->mem.view_of = c->view_of;
done:
  free(first);
  free(last);
  free(bytes);
  free(part_off);
  return st;
}

static er_status ctx_new(er_session *s, run_ctx **out) {
  const er_graph *g = s->graph;
  size_t n = (size_t)g->n_values + 1;
  run_ctx *c = calloc(1, sizeof *c);
  if (!c) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a run context");
  c->vals = calloc(n, sizeof *c->vals);
  c->offset = calloc(n, sizeof *c->offset);
  c->capacity = calloc(n, sizeof *c->capacity);
  c->need = calloc(n, sizeof *c->need);
  c->bound_out = calloc(n, sizeof *c->bound_out);
  c->bound_in = calloc((size_t)g->n_inputs + 1, sizeof *c->bound_in);
  c->want = calloc((size_t)g->n_outputs + 1, sizeof *c->want);
  c->view_of = calloc(n, sizeof *c->view_of);
  c->part_of = calloc(n, sizeof *c->part_of);
  c->mem.width = er__graph_width(g);
  c->mem.inp = calloc((size_t)c->mem.width, sizeof *c->mem.inp);
  c->mem.outp = calloc((size_t)c->mem.width, sizeof *c->mem.outp);
  c->mem.need = c->need;
  c->mem.bound_outputs = c->bound_out;
  c->mem.scratch_bytes = s->scratch_bytes;
  c->mem.scratch = s->scratch_bytes ? er__aligned_alloc(s->scratch_bytes) : NULL;
  if (!c->vals || !c->offset || !c->capacity || !c->need || !c->bound_out || !c->bound_in || !c->want || !c->view_of || !c->part_of ||
      !c->mem.inp || !c->mem.outp || (s->scratch_bytes && !c->mem.scratch)) {
    ctx_free(c);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a run context");
  }
  er_status st = ctx_plan(s, c);
  if (st != ER_STATUS_OK) {
    ctx_free(c);
    return st;
  }
  *out = c;
  return ER_STATUS_OK;
}

static er_status ctx_take(er_session *s, run_ctx **out) {
  pthread_mutex_lock(&s->ctx_lock);
  run_ctx *c = s->free_ctx;
  if (c) s->free_ctx = c->next;
  /* A context planned before another run saw larger shapes grows now,
   * between runs, rather than overflowing its plan mid-run. */
  bool grow = false;
  for (int32_t v = 0; c && v < s->graph->n_values && !grow; v++)
    if (c->offset[v] >= 0 && s->need_max[v] > c->capacity[v]) grow = true;
  pthread_mutex_unlock(&s->ctx_lock);
  if (c) {
    er_status st = grow ? ctx_plan(s, c) : ER_STATUS_OK;
    if (st != ER_STATUS_OK) {
      ctx_free(c);
      return st;
    }
    *out = c;
    return ER_STATUS_OK;
  }
  return ctx_new(s, out);
}

static void ctx_give(er_session *s, run_ctx *c) {
  pthread_mutex_lock(&s->ctx_lock);
  c->next = s->free_ctx;
  s->free_ctx = c;
  if (c->arena_bytes > s->arena_bytes) s->arena_bytes = c->arena_bytes;
  for (int32_t v = 0; v < s->graph->n_values; v++)
    if (c->need[v] > s->need_max[v]) s->need_max[v] = c->need[v];
  pthread_mutex_unlock(&s->ctx_lock);
}


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
  while (s->free_ctx) {
    struct run_ctx *next = s->free_ctx->next;
    ctx_free(s->free_ctx);
    s->free_ctx = next;
  }
  pthread_mutex_destroy(&s->ctx_lock);
  free(s->last_use);
  free(s->exec_pos);
  free(s->need_max);
  er__plan_free(s->plan);
  er__owned_free(&s->owned);
  er__arena_free(&s->arena);
  er__pool_free(s->pool);
  if (s->prof) pthread_mutex_destroy(&s->prof_lock);
  free(s->prof);
  free(s);
}

static const char *node_kernel_name(const er_session *s, int32_t i) {
  for (int k = 0; k < s->n_segs; k++) {
    er_backend *be = s->segs[k].backend;
    if (!be->iface->kernel_name) continue;
    const char *name = be->iface->kernel_name(be, s->segs[k].compiled, i);
    if (name) return name;
  }
  return "reference";
}

void er_session_stats_get(const er_session *s, er_session_stats *out) {
  memset(out, 0, sizeof *out);
  const er_graph *g = s->graph;
  out->node_count = (size_t)g->n_nodes;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (strcmp(node_kernel_name(s, i), "reference") != 0) out->optimized_nodes++;
  out->threads = er__pool_threads(s->pool);
  out->arena_bytes = s->arena_bytes;
}

er_status er_session_node(const er_session *s, size_t index, const char **op_type_out, const char **name_out) {
  if (index >= (size_t)s->graph->n_nodes)
    return er__error(ER_STATUS_NOT_FOUND, "node index %zu is out of range (the session runs %d nodes)", index,
                     (int)s->graph->n_nodes);
  *op_type_out = s->graph->nodes[index].op_type;
  *name_out = s->graph->nodes[index].name;
  return ER_STATUS_OK;
}

er_status er_session_profile(er_session *s, er_node_timing *out, size_t cap, size_t *n_out) {
  if (!s || !n_out || (cap && !out)) return er__error(ER_STATUS_INVALID_ARGUMENT, "session and n_out must not be NULL");
  if (!s->prof)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "the session was created without profiling (opts.profile)");
  const er_graph *g = s->graph;
  pthread_mutex_lock(&s->prof_lock);
  for (int32_t i = 0; i < g->n_nodes && (size_t)i < cap; i++) {
    const er_node *node = &g->nodes[i];
    const er_node_prof *p = &s->prof[i];
    out[i] = (er_node_timing){node->name, node->op_type, node_kernel_name(s, i), p->total_ns / 1e3,
                              p->count, p->start_ns / 1e3, p->dur_ns / 1e3};
  }
  pthread_mutex_unlock(&s->prof_lock);
  *n_out = (size_t)g->n_nodes;
  return ER_STATUS_OK;
}

/* Logs each kind of CPU fallback once (op type and reason, with a count),
 * then the share of compute it carries, as a warning above
 * ER_FALLBACK_WARN_SHARE. */
static void log_fallbacks(const er_graph *g, const er_plan *p) {
  const er_partition_summary *sum = &p->summary;
  if (!sum->fallback_nodes) return;
  er_backend *cpu = er__backend_cpu();
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (p->place[i] != cpu) continue;
    bool seen = false;
    int count = 0;
    for (int32_t j = 0; j < g->n_nodes; j++) {
      if (p->place[j] != cpu || strcmp(g->nodes[j].op_type, g->nodes[i].op_type) != 0 ||
          strcmp(p->reason[j], p->reason[i]) != 0)
        continue;
      if (j < i) seen = true;
      count++;
    }
    if (seen) continue;
    if (count == 1)
      er__log(ER_LOG_WARNING, "%s node '%s' falls back from %s to the CPU: %s", g->nodes[i].op_type,
              g->nodes[i].name, sum->preferred, p->reason[i]);
    else
      er__log(ER_LOG_WARNING, "%d %s nodes (the first '%s') fall back from %s to the CPU: %s", count,
              g->nodes[i].op_type, g->nodes[i].name, sum->preferred, p->reason[i]);
  }
  er__log(sum->fallback_share > ER_FALLBACK_WARN_SHARE ? ER_LOG_WARNING : ER_LOG_INFO,
          "%zu of %zu nodes run on the CPU instead of %s: %.1f%% of the compute (%llu of %llu MACs)%s",
          sum->fallback_nodes, sum->node_count, sum->preferred, 100.0 * sum->fallback_share,
          (unsigned long long)sum->fallback_macs, (unsigned long long)sum->total_macs,
          sum->fallback_share > ER_FALLBACK_WARN_SHARE ? ", more than the 20% edgerun warns at" : "");
}

er_status er_session_create(const er_model *model, const er_session_options *opts,
                            er_session **session_out) {
  er_status st = ER_STATUS_OK;
  if (!model || !session_out) return er__error(ER_STATUS_INVALID_ARGUMENT, "model and session_out must not be NULL");
  er_session_options o;
  er_session_options_init(&o);
  if (opts) o = *opts;
  if (o.threads <= 0) o.threads = 1;
  if (o.backend_count > ER_MAX_PREFERRED_BACKENDS)
    return er__error(ER_STATUS_LIMIT, "%zu preferred backends given; at most %d (ER_MAX_PREFERRED_BACKENDS)",
                     o.backend_count, ER_MAX_PREFERRED_BACKENDS);
  if (o.backend_count && !o.backends)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "backend_count is %zu but backends is NULL", o.backend_count);
  er_backend *prefs[ER_MAX_PREFERRED_BACKENDS];
  for (size_t i = 0; i < o.backend_count; i++) ER_CHECK(er__backend_require(o.backends[i], &prefs[i]));
  const er_graph *g = model->graph;
  er_session *s = calloc(1, sizeof *s);
  if (!s) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
  s->model = model;
  s->graph = g;
  er__arena_init(&s->arena);
  s->opts = o;
  s->opts.backends = NULL;  /* borrowed only for the create */
  s->opts.backend_count = 0;
  pthread_mutex_init(&s->ctx_lock, NULL);
  /* Where each node goes decides whether the session rewrites the graph;
   * the plan (order, segments, transfers) is then built once, on the graph
   * that runs. */
  st = er__plan_place(g, prefs, o.backend_count, o.allow_fallback, &s->plan);
  if (st != ER_STATUS_OK) goto fail;
  /* When every node runs on the CPU, the session fuses its own copy of the
   * graph into edgerun's fused ops (optimize level 2). Accelerators and
   * plugins keep seeing the model's standard operators. */
  bool all_cpu = true;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (s->plan->place[i] != er__backend_cpu()) all_cpu = false;
  if (model->limits.optimize > 1 && all_cpu && g->n_nodes > 0) {
    er_graph *copy;
    st = er__graph_clone(g, &s->arena, &s->owned, &copy);
    /* The session passes end with convolution chains in the
     * channel-blocked layout, unless the session runs the reference
     * kernels (the numerical truth is the model's own ops). */
    const er_backend_iface *cpu = er__backend_cpu()->iface;
    er_pass_ctx pc = {.level = model->limits.optimize,
                      .block = o.force_reference || !cpu->layout_block ? 0 : cpu->layout_block(er__backend_cpu()),
                      .keep_planar = cpu->keep_planar};
    if (st == ER_STATUS_OK) st = er__graph_run_passes(copy, ER_PASS_SESSION, &pc);
    if (st != ER_STATUS_OK) goto fail;
    /* The copy's nodes are new (fused ops): placed again, on the CPU. */
    er__plan_free(s->plan);
    s->plan = NULL;
    g = s->graph = copy;
    st = er__plan_place(g, prefs, o.backend_count, o.allow_fallback, &s->plan);
    if (st != ER_STATUS_OK) goto fail;
  }
  st = er__plan_finish(s->plan, g, prefs, o.backend_count);
  if (st != ER_STATUS_OK) goto fail;
  st = er__pool_create(o.threads, &s->pool);
  if (st != ER_STATUS_OK) goto fail;
  s->flush_denormals = !o.keep_denormals && !o.force_reference && !er__force_reference_env();
  if (o.profile) {
    s->prof = calloc((size_t)g->n_nodes + 1, sizeof *s->prof);
    if (!s->prof) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
      goto fail;
    }
    pthread_mutex_init(&s->prof_lock, NULL);
  }
  /* Run order: the segments' nodes one after the other. The planner needs
   * each value's lifetime in that order. */
  s->need_max = calloc((size_t)g->n_values + 1, sizeof *s->need_max);
  s->exec_pos = malloc(((size_t)g->n_nodes + 1) * sizeof *s->exec_pos);
  s->last_use = malloc(((size_t)g->n_values + 1) * sizeof *s->last_use);
  if (!s->exec_pos || !s->last_use || !s->need_max) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
    goto fail;
  }
  {
    int32_t pos = 0;
    for (int k = 0; k < s->plan->n_segs; k++)
      for (int32_t j = 0; j < s->plan->segs[k].n_nodes; j++) s->exec_pos[s->plan->segs[k].nodes[j]] = pos++;
    er_id_list reads = {0};
    for (int32_t v = 0; v < g->n_values; v++) s->last_use[v] = -1;
    for (int32_t i = 0; i < g->n_nodes; i++) {
      if (!er__node_reads(g, i, &reads)) {
        free(reads.v);
        st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
        goto fail;
      }
      for (int32_t k = 0; k < reads.n; k++)
        if (s->exec_pos[i] > s->last_use[reads.v[k]]) s->last_use[reads.v[k]] = s->exec_pos[i];
    }
    free(reads.v);
  }
  /* Compile each segment. A graph without nodes (outputs straight from
   * inputs or constants) has no segment. */
  s->segs = calloc((size_t)s->plan->n_segs + 1, sizeof *s->segs);
  if (!s->segs) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
    goto fail;
  }
  for (int k = 0; k < s->plan->n_segs; k++) {
    const er_plan_segment *ps = &s->plan->segs[k];
    er_subgraph sg = {g, ps->nodes, ps->n_nodes, ps->inputs, ps->n_inputs, ps->outputs, ps->n_outputs};
    er_backend *be = ps->backend;
    if (!be->iface->compile || !be->iface->compute) {
      st = er__error(ER_STATUS_BACKEND, "backend '%s' cannot compile subgraphs", be->iface->name);
      goto fail;
    }
    er_compile_options co = {.force_reference = o.force_reference};
    st = be->iface->compile(be, &sg, &co, &s->segs[s->n_segs].compiled);
    if (st != ER_STATUS_OK) goto fail;
    s->segs[s->n_segs].backend = be;
    s->segs[s->n_segs].release = ps->release;
    s->segs[s->n_segs].n_release = ps->n_release;
    s->n_segs++;
    if (be->iface->scratch_bytes) {
      size_t sb = be->iface->scratch_bytes(be, s->segs[s->n_segs - 1].compiled);
      if (sb > s->scratch_bytes) s->scratch_bytes = sb;
    }
  }
  log_fallbacks(g, s->plan);
  /* Compiling copied what the kernels want (packed weights) and the passes
   * folded what they could; the file's pages are now mostly dead weight.
   * Dropping them from the mapping costs nothing: the mapping is private
   * and never written, so a page a reference kernel still reads faults
   * back in from the file. This keeps peak RSS near one copy of the
   * weights. */
  er__model_release_pages(model, model->map, model->map_size);
  /* One run context made now: the arena of a model with static shapes is
   * planned (and reported) before the first run. */
  {
    struct run_ctx *c;
    st = ctx_new(s, &c);
    if (st != ER_STATUS_OK) {
      er_session_free(s);
      return st;
    }
    ctx_give(s, c);
  }
  *session_out = s;
  return ER_STATUS_OK;
fail:
  er_session_free(s);
  return st;
}

void er_session_partition(const er_session *s, er_partition_summary *out) {
  *out = s->plan->summary;
}

er_status er_session_transfer(const er_session *s, size_t index, er_transfer *out) {
  const er_graph *g = s->graph;
  er_backend *cpu = er__backend_cpu();
  size_t k = 0;
  for (int i = 0; i < s->plan->n_segs; i++) {
    const er_plan_segment *seg = &s->plan->segs[i];
    if (seg->backend == cpu) continue;
    for (int dir = 0; dir < 2; dir++) {
      const int32_t *ids = dir == 0 ? seg->inputs : seg->outputs;
      int32_t n = dir == 0 ? seg->n_inputs : seg->n_outputs;
      for (int32_t j = 0; j < n; j++, k++) {
        if (k != index) continue;
        const er_value *v = &g->values[ids[j]];
        out->value = v->name;
        out->segment = i;
        out->backend = seg->backend->iface->name;
        out->to_device = dir == 0;
        out->bytes = er__value_bytes(g, ids[j]);
        return ER_STATUS_OK;
      }
    }
  }
  return er__error(ER_STATUS_NOT_FOUND, "transfer index %zu is out of range (the session has %zu)", index, k);
}

er_status er_session_placement(const er_session *s, size_t index, er_placement *out) {
  const er_graph *g = s->graph;
  if (index >= (size_t)g->n_nodes)
    return er__error(ER_STATUS_NOT_FOUND, "node index %zu is out of range (the graph has %d nodes)", index,
                     (int)g->n_nodes);
  const er_node *n = &g->nodes[index];
  out->op_type = n->op_type;
  out->node_name = n->name;
  out->backend = s->plan->place[index]->iface->name;
  out->reason = s->plan->reason[index];
  out->macs = s->plan->macs[index];
  out->segment = s->plan->segment[index];
  return ER_STATUS_OK;
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

/* ======================================================================== */
/* Running                                                                   */
/* ======================================================================== */

static er_status run_in_ctx_mode(er_session *s, run_ctx *c, const er_named_tensor *inputs, size_t n_inputs,
                                 const char *const *output_names, size_t n_outputs, er_exec_observer observe,
                                 void *user);

/* One run into `c`: inputs by name, outputs resolved into c->want. The
 * run rounds to nearest even whatever the caller set, and flushes
 * subnormals to zero unless the session keeps them (see
 * er_session_options.keep_denormals); the caller's mode is restored. */
static er_status run_in_ctx(er_session *s, run_ctx *c, const er_named_tensor *inputs, size_t n_inputs,
                            const char *const *output_names, size_t n_outputs, er_exec_observer observe,
                            void *user) {
  uint64_t mode = er__fp_mode_get();
  er__fp_mode_set(er__fp_mode_for_run(mode, s->flush_denormals));
  er_status st = run_in_ctx_mode(s, c, inputs, n_inputs, output_names, n_outputs, observe, user);
  er__fp_mode_set(mode);
  return st;
}

static er_status run_in_ctx_mode(er_session *s, run_ctx *c, const er_named_tensor *inputs, size_t n_inputs,
                                 const char *const *output_names, size_t n_outputs, er_exec_observer observe,
                                 void *user) {
  const er_graph *g = s->graph;
  memset(c->bound_in, 0, ((size_t)g->n_inputs + 1) * sizeof *c->bound_in);
  for (size_t i = 0; i < n_inputs; i++) {
    const char *name = inputs[i].name;
    const er_tensor *t = inputs[i].tensor;
    if (!name || !t) return er__error(ER_STATUS_INVALID_ARGUMENT, "input %zu has a NULL name or tensor", i);
    int32_t slot = -1;
    for (int32_t k = 0; k < g->n_inputs; k++)
      if (strcmp(g->values[g->inputs[k]].name, name) == 0) slot = k;
    if (slot < 0) return er__error(ER_STATUS_NOT_FOUND, "the model has no input named '%s'", name);
    const er_value *v = &g->values[g->inputs[slot]];
    if (v->kind == ER_VALUE_CONSTANT && s->model->ir_version < 4)
      return er__error(ER_STATUS_INVALID_ARGUMENT,
                       "input '%s' is an initializer of an IR %lld model and cannot be overridden", name,
                       (long long)s->model->ir_version);
    if (c->bound_in[slot]) return er__error(ER_STATUS_INVALID_ARGUMENT, "input '%s' is given twice", name);
    if (!t->data && t->nbytes) return er__error(ER_STATUS_INVALID_ARGUMENT, "input '%s' has no data", name);
    ER_CHECK(check_input(v, t));
    c->bound_in[slot] = t;
  }
  for (int32_t k = 0; k < g->n_inputs; k++) {
    const er_value *v = &g->values[g->inputs[k]];
    if (!c->bound_in[k] && v->kind == ER_VALUE_INPUT)
      return er__error(ER_STATUS_NOT_FOUND, "input '%s' is required but was not given", v->name);
  }
  if (output_names) {
    for (size_t i = 0; i < n_outputs; i++) {
      c->want[i] = -1;
      for (int32_t k = 0; k < g->n_outputs; k++)
        if (output_names[i] && strcmp(g->values[g->outputs[k]].name, output_names[i]) == 0) c->want[i] = k;
      if (c->want[i] < 0)
        return er__error(ER_STATUS_NOT_FOUND, "the model has no output named '%s'",
                         output_names[i] ? output_names[i] : "(null)");
    }
  } else {
    if (n_outputs != (size_t)g->n_outputs)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "n_outputs is %zu but the model has %d outputs", n_outputs,
                       (int)g->n_outputs);
    for (size_t i = 0; i < n_outputs; i++) c->want[i] = (int32_t)i;
  }

  er_exec ex = {s->pool, NULL, 0, NULL, 0, &c->mem, observe, user, NULL, 0, NULL};
  er_node_prof *prof = NULL;
  if (s->prof) {
    prof = calloc((size_t)g->n_nodes + 1, sizeof *prof);
    if (!prof) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory profiling a run");
    ex.prof = prof;
    ex.t0_ns = er__now_ns();
  }
  int n_bind = 0;
  for (int32_t k = 0; k < g->n_inputs; k++)
    if (c->bound_in[k]) n_bind = k + 1;
  c->mem.overflow = false;
  er_status st = er__exec_main(&ex, g, c->vals, c->bound_in, n_bind, s->segs, s->n_segs);
  if (prof) {
    /* Fold this run's timings into the session's. */
    pthread_mutex_lock(&s->prof_lock);
    for (int32_t i = 0; i < g->n_nodes; i++) {
      s->prof[i].total_ns += prof[i].total_ns;
      s->prof[i].count += prof[i].count;
      s->prof[i].start_ns = prof[i].start_ns;
      s->prof[i].dur_ns = prof[i].dur_ns;
    }
    pthread_mutex_unlock(&s->prof_lock);
    free(prof);
  }
  return st;
}

/* Releases what a run left in the context and grows the plan if a value
 * needed more than its slot, so the next run fits. */
static er_status ctx_finish(er_session *s, run_ctx *c) {
  const er_graph *g = s->graph;
  for (int32_t id = 0; id < g->n_values; id++) {
    er__tensor_release(&c->vals[id]);
    memset(&c->vals[id], 0, sizeof c->vals[id]);
    c->bound_out[id] = NULL;
  }
  bool grow = false;
  for (int32_t v = 0; v < g->n_values && !grow; v++)
    if (plannable(s, v) && c->need[v] > c->capacity[v]) grow = true;
  return grow ? ctx_plan(s, c) : ER_STATUS_OK;
}

er_status er_session_run(er_session *s, const er_named_tensor *inputs, size_t n_inputs,
                         const char *const *output_names, size_t n_outputs, er_tensor **outputs_out) {
  return er__session_run_observed(s, inputs, n_inputs, output_names, n_outputs, outputs_out, NULL, NULL);
}

er_status er__session_run_observed(er_session *s, const er_named_tensor *inputs, size_t n_inputs,
                                   const char *const *output_names, size_t n_outputs,
                                   er_tensor **outputs_out, er_exec_observer observe, void *user) {
  if (!s || (!inputs && n_inputs) || !outputs_out)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "session, inputs and outputs_out must not be NULL");
  const er_graph *g = s->graph;
  run_ctx *c;
  ER_CHECK(ctx_take(s, &c));
  er_status st = run_in_ctx(s, c, inputs, n_inputs, output_names, n_outputs, observe, user);
  for (size_t i = 0; i < n_outputs; i++) outputs_out[i] = NULL;
  for (size_t i = 0; i < n_outputs && st == ER_STATUS_OK; i++) {
    er_tensor *r = &c->vals[g->outputs[c->want[i]]];
    er_tensor *t = er__tensor_new();
    if (!t) {
      st = ER_STATUS_OUT_OF_MEMORY;
      break;
    }
    /* Each requested output is moved out when this run owns it and no
     * later request reads the same value again (two requests, or two graph
     * outputs of one value); otherwise copied. */
    bool again = false;
    for (size_t j = i + 1; j < n_outputs; j++)
      if (g->outputs[c->want[j]] == g->outputs[c->want[i]]) again = true;
    if ((r->flags & ER_TENSOR_OWNS_DATA) && !again) {
      *t = *r;
      r->flags &= ~(uint32_t)ER_TENSOR_OWNS_DATA;
      r->data = NULL;
      r->nbytes = 0;
    } else if ((st = er__tensor_copy(t, r)) != ER_STATUS_OK) {
      free(t);
      break;
    }
    outputs_out[i] = t;
  }
  if (st != ER_STATUS_OK)
    for (size_t i = 0; i < n_outputs; i++) {
      er_tensor_free(outputs_out[i]);
      outputs_out[i] = NULL;
    }
  er_status fst = ctx_finish(s, c);
  ctx_give(s, c);
  return st != ER_STATUS_OK ? st : fst;
}

er_status er_session_run_into(er_session *s, const er_named_tensor *inputs, size_t n_inputs,
                              const char *const *output_names, size_t n_outputs, er_tensor *const *outputs) {
  if (!s || (!inputs && n_inputs) || !outputs)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "session, inputs and outputs must not be NULL");
  const er_graph *g = s->graph;
  run_ctx *c;
  ER_CHECK(ctx_take(s, &c));
  /* Outputs are written straight into the caller's tensors when shapes
   * match; the names are resolved first so the binding is by value. */
  er_status st = ER_STATUS_OK;
  for (size_t i = 0; i < n_outputs && st == ER_STATUS_OK; i++) {
    int32_t k = -1;
    if (output_names) {
      for (int32_t j = 0; j < g->n_outputs; j++)
        if (output_names[i] && strcmp(g->values[g->outputs[j]].name, output_names[i]) == 0) k = j;
    } else if (i < (size_t)g->n_outputs) {
      k = (int32_t)i;
    }
    if (!outputs[i]) st = er__error(ER_STATUS_INVALID_ARGUMENT, "output tensor %zu is NULL", i);
    else if (k >= 0) c->bound_out[g->outputs[k]] = outputs[i];
  }
  if (st == ER_STATUS_OK) st = run_in_ctx(s, c, inputs, n_inputs, output_names, n_outputs, NULL, NULL);
  for (size_t i = 0; i < n_outputs && st == ER_STATUS_OK; i++) {
    const er_tensor *r = &c->vals[g->outputs[c->want[i]]];
    er_tensor *o = outputs[i];
    if (r->data == o->data) continue; /* written in place */
    char a[160], b[160];
    if (r->dtype != o->dtype || r->nbytes != o->nbytes || r->rank != o->rank ||
        memcmp(r->dims, o->dims, sizeof(int64_t) * (size_t)(r->rank > 0 ? r->rank : 0)) != 0)
      st = er__error(ER_STATUS_INVALID_SHAPE, "output '%s' is %s %s but the tensor given for it is %s %s",
                     g->values[g->outputs[c->want[i]]].name, er_dtype_name(r->dtype),
                     er__shape_str(r, a, sizeof a), er_dtype_name(o->dtype), er__shape_str(o, b, sizeof b));
    else if (r->nbytes)
      memcpy(o->data, r->data, r->nbytes);
  }
  er_status fst = ctx_finish(s, c);
  ctx_give(s, c);
  return st != ER_STATUS_OK ? st : fst;
}
