/* cpu-backend.c - the CPU backend: always present, registered last, runs
 * every op that has a reference kernel on host memory. Compiling a subgraph
 * chooses each node's kernel and records when each value is last read;
 * computing it runs those nodes with the runtime's interpreter, reached
 * through the run it is given (er_exec.interp). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/partition.h"
#include "kernels/kernel.h"
#include "ops/op.h"

static int cpu_device_count(er_backend *be) {
  ER_UNUSED(be);
  return 1;
}

static er_status cpu_device_desc(er_backend *be, int index, er_device_desc *d) {
  ER_UNUSED(be);
  if (index != 0) return er__error(ER_STATUS_NOT_FOUND, "cpu backend has one device, not %d", index);
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "cpu");
  d->kind = ER_DEVICE_CPU;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  d->compute_units = n > 0 ? (int)n : 1;
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && psize > 0) d->memory_bytes = (uint64_t)pages * (uint64_t)psize;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "model name", 10) == 0 || strncmp(line, "vendor_id", 9) == 0) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        v[strcspn(v, "\n")] = '\0';
        if (line[0] == 'm') snprintf(d->name, sizeof d->name, "%s", v);
        else snprintf(d->vendor, sizeof d->vendor, "%s", v);
      }
    }
    fclose(f);
  }
  return ER_STATUS_OK;
}

static bool cpu_supports_op(er_backend *be, const er_graph *g, const er_node *node, char *reason,
                            size_t size) {
  ER_UNUSED(be);
  ER_UNUSED(g);
  if (node->op && node->op->run) return true;
  snprintf(reason, size, "no CPU kernel for %s version %d", node->op_type, node->version);
  return false;
}

static er_status cpu_buffer_alloc(er_backend *be, size_t bytes, void **out) {
  ER_UNUSED(be);
  void *p = er__aligned_alloc(bytes);
  if (!p) return ER_STATUS_OUT_OF_MEMORY;
  *out = p;
  return ER_STATUS_OK;
}

static void cpu_buffer_free(er_backend *be, void *buffer) {
  ER_UNUSED(be);
  er__aligned_free(buffer);
}

static er_status cpu_buffer_write(er_backend *be, void *buffer, size_t offset, const void *src,
                                  size_t bytes) {
  ER_UNUSED(be);
  memcpy((char *)buffer + offset, src, bytes);
  return ER_STATUS_OK;
}

static er_status cpu_buffer_read(er_backend *be, const void *buffer, size_t offset, void *dst,
                                 size_t bytes) {
  ER_UNUSED(be);
  memcpy(dst, (const char *)buffer + offset, bytes);
  return ER_STATUS_OK;
}

/* A compiled CPU subgraph: the nodes to run, and for each value of the
 * graph the last node reading it (so intermediates are freed early). */
typedef struct cpu_compiled {
  const er_graph *graph;
  int32_t *nodes;          /* [n_nodes] */
  int32_t n_nodes;
  int32_t *last_use;       /* [graph->n_values] */
  er_node_kernel *kernels; /* [graph->n_nodes], by node index */
  er_sub_kernels *subs;    /* [n_subs] the nodes' subgraphs, nested ones too */
  int n_subs, cap_subs;
} cpu_compiled;

static void release_kernels(const er_graph *g, er_node_kernel *k) {
  if (!k) return;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (k[i].kernel && k[i].kernel->release) k[i].kernel->release(k[i].state);
  free(k);
}

static void cpu_release(er_backend *be, void *compiled) {
  ER_UNUSED(be);
  cpu_compiled *c = compiled;
  if (!c) return;
  release_kernels(c->graph, c->kernels);
  for (int i = 0; i < c->n_subs; i++) {
    release_kernels(c->subs[i].graph, c->subs[i].kernels);
    free(c->subs[i].last_use);
  }
  free(c->subs);
  free(c->nodes);
  free(c->last_use);
  free(c);
}

/* The constant behind value id of g, following a subgraph's captures of
 * outer values up to the graph that holds it; NULL when it is not one
 * (inputs that are also initializers can be overridden from IR 4 on). */
static const er_tensor *constant_of(const er_graph *g, int32_t id) {
  for (int depth = 0; g && depth < 64; depth++) {
    const er_value *v = &g->values[id];
    if (v->kind == ER_VALUE_CONSTANT)
      return v->constant && !(v->is_graph_input && g->model->ir_version >= 4) ? v->constant : NULL;
    if (v->kind != ER_VALUE_OUTER || !g->parent) return NULL;
    id = v->outer;
    g = g->parent;
  }
  return NULL;
}

/* What a kernel sees of node i at compile time: constants where the
 * graph holds them, else the values' known types and shapes. false when
 * the node has more inputs or outputs than the arrays hold. */
static bool kernel_info_of(const er_graph *g, int32_t i, const er_tensor **in, const er_tensor **out,
                           er_kernel_info *ki) {
  const er_node *node = &g->nodes[i];
  if (node->n_inputs > 64 || node->n_outputs > 64) return false;
  for (int k = 0; k < node->n_inputs; k++) {
    int32_t id = node->inputs[k];
    const er_tensor *c = id < 0 ? NULL : constant_of(g, id);
    in[k] = id < 0 ? NULL : c ? c : &g->values[id].info;
  }
  for (int k = 0; k < node->n_outputs; k++)
    out[k] = node->outputs[k] < 0 ? NULL : &g->values[node->outputs[k]].info;
  *ki = (er_kernel_info){node, node->n_inputs, node->n_outputs, in, out, er__cpu_features()};
  return true;
}

static bool cpu_keep_planar(const er_graph *g, int32_t i) {
  const er_tensor *in[64], *out[64];
  er_kernel_info ki;
  if (!kernel_info_of(g, i, in, out, &ki)) return false;
  const er_cpu_kernel *k = er__cpu_kernel_pick(&ki);
  if (k && strstr(k->name, "conv_direct") && in[1] && in[1]->rank == 4) {
    /* Output channels filling at most half a block, input channels at most
     * one (MNIST's 1 -> 8 5x5 layer): the blocked kernel computes the empty
     * output lanes, the planar direct kernel does not. Its 8 -> 16 layer
     * then reads a planar input in place (no empty input lanes either).
     * Zen 4, 1 thread: 8.0 -> 5.2 and 23.0 -> 13.0 us; mnist-8 33.9 ->
     * 21.6 us of kernels. A stem with more outputs (3 -> 16) stays blocked:
     * it reads the image in place and fills its blocks. */
    int64_t b = er__cpu_layout_block(), c = in[1]->dims[1], m = in[1]->dims[0];
    return b > 0 && c >= 1 && m >= 1 && c <= b && 2 * m <= b;
  }
  if (!k || !strstr(k->name, "winograd")) return false;
  /* Winograd does fewer multiplications than the blocked direct kernel,
   * and wins by more with more channels and larger maps. Measured per
   * layer on a Xeon (1 thread, planar Winograd against blocked direct):
   * 64 channels at 56x56 1.45x, 256 at 56x56 2.4x, 256 at 14x14 1.15x, but
   * 32 -> 128 at 27x27 and 32 at 80x80 even, and 64 -> 256 at 13x13 the
   * blocked kernel 1.2x faster; a planar layer inside a blocked chain also
   * costs two conversions (SqueezeNet's Fire modules). VGG-19 took 254 ms
   * all blocked against 183 with its large layers planar.
   * The transforms cost in proportion to C + M channels and the products
   * to C * M, so the rule is on C * M / (C + M) >= 32 (64 -> 64 is 32):
   * it keeps the cases above and takes uneven layers like ddddocr's 48 ->
   * 192 at 16x50 (on a Zen 3 EPYC 1.11 ms planar Winograd against 1.56
   * blocked; the model 22.6 -> 21.7 ms), where both >= 64 left them out,
   * while 32 -> 32 at 80x80 (the detector: 1.72 ms planar plus a
   * conversion, 1.55 blocked) stays blocked. */
  const er_tensor *w = in[1], *y = out[0];
  if (!w || w->rank != 4 || w->dims[0] < 1 || w->dims[1] < 1) return false;
  int64_t cm = w->dims[0] * w->dims[1], c_plus_m = w->dims[0] + w->dims[1];
  /* Where AVX-512 runs as two 256-bit halves (Zen 4) the blocked direct
   * kernel gains little over AVX2 while AVX-512 Winograd gains much, so
   * narrower layers on large maps win too. Zen 4, 1 thread, planar
   * Winograd against blocked direct, each between two 1x1 layers: 64 ->
   * 32 at 224x224 24.2 -> 20.3 ms, 32 -> 32 at 112x112 2.64 -> 2.33, at
   * 56x56 0.66 -> 0.55, 24 -> 24 at 56x56 0.64 -> 0.36 (24 channels fill
   * 3/4 of the blocked vectors); at 28x28 32 -> 32 lost (0.166 -> 0.19)
   * and 32 -> 16 at 224x224 (C * M / (C + M) = 10.7) was even. With AVX2
   * on the same core the first lost (25.3 -> 26.4), hence the ISA test.
   * With full-width AVX-512 units (an Intel Xeon, family 6 model 207) the
   * same band wins only where the channels fill the blocked kernel's
   * groups of two 16-channel blocks badly. A 3x3 layer between two 1x1
   * layers, planar Winograd against blocked direct, 1 / 2 threads: 24 ->
   * 24 at 56x56 0.47 -> 0.33 / 0.27 -> 0.22 ms, at 112x112 2.02 -> 1.40 /
   * 1.04 -> 0.81, 48 -> 48 at 56x56 1.12 -> 0.91 / 0.59 -> 0.52, 48 -> 24
   * at 112x112 3.20 -> 2.67 / 1.68 -> 1.49, ESPCN's 32 -> 27 at 224x224
   * 6.1 -> 5.2 (1 thread). Multiples of 32 did not hold up: 32 -> 32 lost
   * at 56x56, 80x80 and 112x112 (1.09 -> 1.21 at 2 threads; YOLOv8n's
   * bottlenecks at 80x80 0.80 -> 0.88 each), and layers that won at 1
   * thread lost at 2, where the conversions around a planar layer weigh
   * more: 64 -> 32 at 80x80 (1.04x), DenseNet-121's 128 -> 32 at 56x56
   * (the model 1.04x) and an ESRGAN-style generator's 32 -> 32 and 96 ->
   * 32 at 128x128 to 512x512 (1.03x, 0.965x at 1 thread). */
  const bool wide = strstr(k->name, "avx512") != NULL;
  const bool split = wide && er__cpu_features()->avx512_split;
  if (cm < (wide ? 12 : 32) * c_plus_m) return false;
  bool known = y && y->rank == 4 && y->dims[2] >= 0 && y->dims[3] >= 0;
  if (cm < 32 * c_plus_m)
    return known && y->dims[2] * y->dims[3] >= 56 * 56 &&
           (split || w->dims[0] % 32 != 0 || w->dims[1] % 32 != 0);
  return !known || y->dims[2] * y->dims[3] >= 14 * 14; /* a size known only at run time: Winograd */
}

/* Chooses and prepares an optimized kernel for node i, if one applies. */
static er_status pick_kernel(const er_graph *g, int32_t i, er_node_kernel *nk) {
  const er_node *node = &g->nodes[i];
  const er_tensor *in[64], *out[64];
  er_kernel_info ki;
  if (!kernel_info_of(g, i, in, out, &ki)) return ER_STATUS_OK;
  const er_cpu_kernel *k = er__cpu_kernel_pick(&ki);
  if (!k) return ER_STATUS_OK;
  void *state = NULL;
  size_t scratch = 0;
  if (k->prepare) {
    er_status st = k->prepare(&ki, &state, &scratch);
    if (st != ER_STATUS_OK) {
      er__error_prefix("kernel %s for %s node '%s'", k->name, node->op_type, node->name);
      return st;
    }
  }
  nk->kernel = k;
  nk->state = state;
  nk->scratch_bytes = scratch;
  /* A kernel with state has packed what it needs from its constant
   * inputs; the file's pages of those can go. */
  if (state)
    for (int j = 0; j < node->n_inputs; j++)
      if (in[j] && in[j]->data) er__model_release_pages(g->model, in[j]->data, in[j]->nbytes);
  return ER_STATUS_OK;
}

/* When each value can be freed inside the segment: after its last reader
 * among the segment's nodes (in their execution order), unless a later
 * segment or the caller needs it (the subgraph's outputs) or it came from
 * outside (the session frees those after their last segment). -1: nothing
 * in the segment reads it (freed as soon as it is produced). */
static void segment_last_use(const er_subgraph *sg, int32_t *last_use) {
  const er_graph *g = sg->graph;
  er_id_list reads = {0};
  for (int32_t v = 0; v < g->n_values; v++) last_use[v] = -1;
  for (int32_t j = 0; j < sg->n_nodes; j++) {
    if (!er__node_reads(g, sg->nodes[j], &reads)) {
      /* Out of memory: free nothing early (correct, only less thrifty). */
      for (int32_t v = 0; v < g->n_values; v++) last_use[v] = INT32_MAX;
      break;
    }
    for (int32_t k = 0; k < reads.n; k++) last_use[reads.v[k]] = sg->nodes[j];
  }
  for (int32_t k = 0; k < g->n_outputs; k++) last_use[g->outputs[k]] = INT32_MAX;
  for (int32_t k = 0; k < sg->n_outputs; k++) last_use[sg->outputs[k]] = INT32_MAX;
  for (int32_t k = 0; k < sg->n_inputs; k++) last_use[sg->inputs[k]] = INT32_MAX;
  free(reads.v);
}

/* Kernels the application registered for the CPU (overrides of standard
 * ops, custom ops) come first, then the optimized kernels. */
static er_status choose_kernel(const er_graph *g, int32_t i, bool optimize, er_node_kernel *nk) {
  nk->custom = er__custom_kernel_find("cpu", &g->nodes[i]);
  if (nk->custom || !optimize) return ER_STATUS_OK;
  return pick_kernel(g, i, nk);
}

/* Chooses kernels for the subgraphs node holds (and theirs), so that the
 * bodies of If, Loop and Scan run on optimized kernels too (Silero VAD's
 * network sits in If branches). Their shapes may be partly unknown here;
 * the kernels check at run time, as for symbolic dims of the main graph. */
static er_status compile_subgraphs(cpu_compiled *c, const er_node *node, bool optimize) {
  for (int a = 0; a < node->n_attrs; a++) {
    const er_attr *at = &node->attrs[a];
    int64_t cnt = at->type == ER_ATTR_GRAPH ? 1 : at->type == ER_ATTR_GRAPHS ? at->n : 0;
    for (int64_t k = 0; k < cnt; k++) {
      const er_graph *sub = at->type == ER_ATTR_GRAPH ? at->g : at->graphs[k];
      bool seen = false;
      for (int s = 0; s < c->n_subs; s++)
        if (c->subs[s].graph == sub) seen = true;
      if (seen) continue;
      if (c->n_subs == c->cap_subs) {
        int cap = c->cap_subs ? 2 * c->cap_subs : 4;
        er_sub_kernels *n = realloc(c->subs, (size_t)cap * sizeof *n);
        if (!n) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling subgraph '%s'", sub->name);
        c->subs = n;
        c->cap_subs = cap;
      }
      er_node_kernel *ks = calloc((size_t)sub->n_nodes + 1, sizeof *ks);
      int32_t *lu = malloc(((size_t)sub->n_values + 1) * sizeof *lu);
      if (!ks || !lu) {
        free(ks);
        free(lu);
        return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling subgraph '%s'", sub->name);
      }
      /* Last uses once, not per run of the body (a Loop's every iteration). */
      er__graph_last_use(sub, lu);
      c->subs[c->n_subs++] = (er_sub_kernels){sub, ks, lu};
      for (int32_t i = 0; i < sub->n_nodes; i++) {
        ER_CHECK(choose_kernel(sub, i, optimize, &ks[i]));
        ER_CHECK(compile_subgraphs(c, &sub->nodes[i], optimize));
      }
    }
  }
  return ER_STATUS_OK;
}

static er_status cpu_compile(er_backend *be, const er_subgraph *sg, const er_compile_options *opts,
                             void **compiled_out) {
  bool force_reference = opts && opts->force_reference;
  cpu_compiled *c = calloc(1, sizeof *c);
  if (!c) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling a CPU subgraph");
  c->graph = sg->graph;
  c->n_nodes = sg->n_nodes;
  c->nodes = malloc(((size_t)sg->n_nodes + 1) * sizeof *c->nodes);
  c->last_use = malloc(((size_t)sg->graph->n_values + 1) * sizeof *c->last_use);
  if (!c->nodes || !c->last_use) {
    cpu_release(be, c);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling a CPU subgraph");
  }
  if (sg->n_nodes) memcpy(c->nodes, sg->nodes, (size_t)sg->n_nodes * sizeof *c->nodes);
  segment_last_use(sg, c->last_use);
  c->kernels = calloc((size_t)sg->graph->n_nodes + 1, sizeof *c->kernels);
  if (!c->kernels) {
    cpu_release(be, c);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling a CPU subgraph");
  }
  bool optimize = !force_reference && !er__force_reference_env();
  er_status st = ER_STATUS_OK;
  for (int32_t j = 0; j < sg->n_nodes && st == ER_STATUS_OK; j++) {
    int32_t i = sg->nodes[j];
    st = choose_kernel(sg->graph, i, optimize, &c->kernels[i]);
    if (st == ER_STATUS_OK) st = compile_subgraphs(c, &sg->graph->nodes[i], optimize);
  }
  if (st != ER_STATUS_OK) {
    cpu_release(be, c);
    return st;
  }
  *compiled_out = c;
  return ER_STATUS_OK;
}

static er_status cpu_compute(er_backend *be, void *compiled, er_exec *run, er_tensor *values) {
  ER_UNUSED(be);
  cpu_compiled *c = compiled;
  if (!run || !run->interp)
    return er__error(ER_STATUS_INTERNAL, "the CPU backend computes only inside a run of the interpreter");
  run->subs = c->subs;
  run->n_subs = c->n_subs;
  /* Segments belong to the main graph, whose reusable memory the run
   * carries. */
  er_frame frame = {c->graph, values, NULL, run->mem};
  return run->interp->run_nodes(run, &frame, c->nodes, c->n_nodes, c->last_use, c->kernels);
}

static size_t cpu_scratch_bytes(er_backend *be, const void *compiled) {
  ER_UNUSED(be);
  const cpu_compiled *c = compiled;
  size_t most = 0;
  if (c && c->kernels)
    for (int32_t i = 0; i < c->graph->n_nodes; i++)
      if (c->kernels[i].kernel && c->kernels[i].scratch_bytes > most) most = c->kernels[i].scratch_bytes;
  return most;
}

static const char *cpu_kernel_name(er_backend *be, const void *compiled, int32_t node) {
  ER_UNUSED(be);
  const cpu_compiled *c = compiled;
  if (!c || !c->kernels || node < 0 || node >= c->graph->n_nodes || !c->kernels[node].kernel) return NULL;
  return c->kernels[node].kernel->name;
}

/* The channel block the session's layout pass uses (graph/passes-blocked.c):
 * the vector width of the best ISA the blocked kernels have (16 floats on
 * AVX-512, 8 on AVX2, 4 on NEON), or 0 to keep every tensor planar: no
 * such ISA, ER_FORCE_REFERENCE, or EDGERUN_LAYOUT=planar in the
 * environment (for comparisons and as a way out). */
static int cpu_layout_block(er_backend *be) {
  ER_UNUSED(be);
  return er__force_reference_env() ? 0 : er__cpu_layout_block();
}

static const er_backend_iface cpu_iface = {
    .abi_version = ER_BACKEND_ABI_VERSION,
    .name = "cpu",
    .device_count = cpu_device_count,
    .device_desc = cpu_device_desc,
    .supports_op = cpu_supports_op,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .compile = cpu_compile,
    .compute = cpu_compute,
    .release = cpu_release,
    .destroy = NULL,
    .scratch_bytes = cpu_scratch_bytes,
    .kernel_name = cpu_kernel_name,
    .layout_block = cpu_layout_block,
    .keep_planar = cpu_keep_planar,
};

static er_backend cpu_backend = {&cpu_iface, NULL};

er_backend *er__backend_cpu(void) { return &cpu_backend; }
