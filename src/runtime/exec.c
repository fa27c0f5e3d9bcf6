/* exec.c - the interpreter: nodes in topological order, each checked with
 * its actual inputs, given freshly allocated outputs, and run; intermediate
 * tensors are freed after their last use. Sessions run the main graph
 * through backend segments (er__exec_main); the CPU backend's compute
 * (through er_exec.interp) and the control-flow ops (through
 * er_kctx.run_subgraph) come back here. */
#include "runtime/exec.h"

#include <stdio.h>
#include <stdlib.h>

#include "backends/backend.h"
#include "kernels/kernel.h"

static er_status run_subgraph(const er_kctx *ctx, const er_graph *sub, const er_tensor *const *inputs,
                             int n_inputs, er_tensor *outputs, const bool *skip);

/* What backends call back into (er_exec.interp). */
static const er_interp interp = {er__exec_nodes};

#define ER_MAX_SUBGRAPH_DEPTH 64


/* ======================================================================== */
/* Running nodes                                                             */
/* ======================================================================== */

/* Runs an optimized kernel with its per-run scratch: the run context's
 * buffer when there is one (sized at compile time), else a fresh one. */
static er_status run_kernel(er_exec *ex, er_frame *frame, er_kctx *ctx, const er_node_kernel *nk) {
  void *scratch = NULL, *own = NULL;
  if (nk->scratch_bytes) {
    if (frame->mem && frame->mem->scratch_bytes >= nk->scratch_bytes) {
      scratch = frame->mem->scratch;
    } else {
      scratch = own = er__aligned_alloc(nk->scratch_bytes);
      if (!scratch) return ER_STATUS_OUT_OF_MEMORY;
    }
  }
  er_kernel_run kr = {ctx,
                      nk->state,
                      scratch,
                      nk->scratch_bytes,
                      ex->pool,
                      frame->mem ? &frame->mem->spill : NULL,
                      frame->mem ? &frame->mem->spill_bytes : NULL};
  er_status st = nk->kernel->run(&kr);
  er__aligned_free(own);
  return st;
}

/* Gives output value `id` (shape set by check) its memory: a caller's
 * output tensor, a planned arena slot, or a fresh allocation. Reference
 * kernels get zeroed memory, as op.h promises; optimized kernels write
 * every element themselves. */
static er_status place_output(er_frame *frame, int32_t id, er_tensor *o, bool zero) {
  er_run_mem *mem = frame->mem;
  int64_t count = er__tensor_count(o);
  size_t es = er_dtype_size(o->dtype);
  uint64_t bytes = (uint64_t)count * es;
  if (mem && es && count >= 0) {
    if (mem->view_of && mem->view_of[id] != -1) zero = false;
    er_tensor *b = mem->bound_outputs ? mem->bound_outputs[id] : NULL;
    if (b && b->dtype == o->dtype && b->rank == o->rank && b->nbytes == bytes &&
        memcmp(b->dims, o->dims, sizeof(int64_t) * (size_t)o->rank) == 0) {
      o->data = b->data;
      o->nbytes = (size_t)bytes;
      o->flags = 0;
      if (zero && bytes) memset(o->data, 0, (size_t)bytes);
      return ER_STATUS_OK;
    }
    if (mem->need && bytes > mem->need[id]) mem->need[id] = bytes;
    if (mem->offset && mem->offset[id] >= 0) {
      if (bytes <= mem->capacity[id]) {
        o->data = mem->arena + mem->offset[id];
        o->nbytes = (size_t)bytes;
        o->flags = 0;
        if (zero && bytes) memset(o->data, 0, (size_t)bytes);
        return ER_STATUS_OK;
      }
      mem->overflow = true; /* the plan grows after this run */
    }
  }
  return zero ? er__tensor_alloc(o, 0) : er__tensor_alloc_raw(o, 0);
}

static er_status run_node(er_exec *ex, er_frame *frame, int32_t i, er_tensor **inp, er_tensor **outp,
                          const er_node_kernel *nk) {
  bool custom = nk && nk->custom;
  bool optimized = !custom && nk && nk->kernel;
  const er_graph *g = frame->g;
  const er_node *node = &g->nodes[i];
  er_status st = ER_STATUS_OK;
  for (int k = 0; k < node->n_inputs; k++) {
    int32_t id = node->inputs[k];
    inp[k] = id >= 0 ? &frame->vals[id] : NULL;
    if (id >= 0 && !frame->vals[id].data)
      return er__error(ER_STATUS_INTERNAL, "%s node '%s': input '%s' has no data", node->op_type,
                       node->name, g->values[id].name);
  }
  for (int k = 0; k < node->n_outputs; k++) {
    int32_t id = node->outputs[k];
    if (id < 0) {
      outp[k] = NULL;
      continue;
    }
    er__tensor_release(&frame->vals[id]);
    er__tensor_set(&frame->vals[id], ER_DTYPE_UNDEFINED, -1, NULL);
    outp[k] = &frame->vals[id];
  }
  const er_frame *saved = ex->frame;
  ex->frame = frame;
  er_kctx ctx = {node, node->n_inputs, inp, node->n_outputs, outp, false, ex, g, run_subgraph};
  st = node->op->check(&ctx);
  for (int k = 0; k < node->n_outputs && st == ER_STATUS_OK; k++) {
    er_tensor *o = outp[k];
    if (!o || (node->op->flags & ER_OP_DYNAMIC_OUTPUT)) continue;
    int64_t count = er__tensor_count(o);
    if (count < 0) {
      st = er__error(ER_STATUS_INTERNAL, "%s node '%s': output %d has no shape after check",
                     node->op_type, node->name, k);
    } else if (count > ER_MAX_RUNTIME_ELEMENTS) {
      char buf[160];
      st = er__error(ER_STATUS_LIMIT,
                     "%s node '%s': output %d of shape %s exceeds %lld elements "
                     "(ER_MAX_RUNTIME_ELEMENTS)",
                     node->op_type, node->name, k, er__shape_str(o, buf, sizeof buf),
                     (long long)ER_MAX_RUNTIME_ELEMENTS);
    } else if ((uint64_t)count * er_dtype_size(o->dtype) > er__graph_tensor_cap(g)) {
      /* The caller's one-tensor cap holds for what a run computes too: a
       * 7x5 input padded by 14 million (a fuzzed Conv) asked for 3.3 GB. */
      char buf[160];
      st = er__error(ER_STATUS_LIMIT, "%s node '%s': output %d of shape %s needs %llu bytes; the cap is %llu "
                     "(max_tensor_bytes)",
                     node->op_type, node->name, k, er__shape_str(o, buf, sizeof buf),
                     (unsigned long long)((uint64_t)count * er_dtype_size(o->dtype)),
                     (unsigned long long)er__graph_tensor_cap(g));
    } else {
      st = place_output(frame, node->outputs[k], o, !optimized && !(node->op->flags & ER_OP_WRITES_ALL));
    }
  }
  if (st == ER_STATUS_OK)
    st = custom      ? er__custom_kernel_run(nk->custom, &ctx, NULL)
         : optimized ? run_kernel(ex, frame, &ctx, nk)
                     : node->op->run(&ctx);
  ex->frame = saved;
  for (int k = 0; k < node->n_outputs && st == ER_STATUS_OK; k++)
    if (outp[k] && !outp[k]->data)
      st = er__error(ER_STATUS_INTERNAL, "%s node '%s': output %d was not produced", node->op_type,
                     node->name, k);
  return st;
}

er_status er__exec_nodes(er_exec *ex, er_frame *frame, const int32_t *nodes, int32_t n_nodes,
                         const int32_t *last_use, const er_node_kernel *kernels) {
  const er_graph *g = frame->g;
  er_tensor **inp = NULL, **outp = NULL, **own_in = NULL, **own_out = NULL;
  er_status st = ER_STATUS_OK;
  if (frame->mem && frame->mem->inp) {
    inp = frame->mem->inp;
    outp = frame->mem->outp;
  } else {
    int width = er__graph_width(g);
    inp = own_in = malloc((size_t)width * sizeof *inp);
    outp = own_out = malloc((size_t)width * sizeof *outp);
    if (!inp || !outp) {
      st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory running graph '%s'", g->name);
      goto done;
    }
  }
  for (int32_t j = 0; j < n_nodes; j++) {
    int32_t i = nodes ? nodes[j] : j;
    const er_node *node = &g->nodes[i];
    bool timed = ex->prof && !frame->parent;
    uint64_t t = timed ? er__now_ns() : 0;
    st = run_node(ex, frame, i, inp, outp, kernels ? &kernels[i] : NULL);
    if (timed) {
      uint64_t end = er__now_ns();
      er_node_prof *p = &ex->prof[i];
      p->start_ns = t - ex->t0_ns;
      p->dur_ns = end - t;
      p->total_ns += end - t;
      p->count++;
    }
    if (st == ER_STATUS_OK && ex->observe)
      st = ex->observe(ex->observe_user, g, i, outp, node->n_outputs);
    if (st != ER_STATUS_OK) break;
    /* Free what no later node reads. */
    for (int k = 0; k < node->n_inputs; k++) {
      int32_t id = node->inputs[k];
      if (id >= 0 && last_use[id] == i && g->values[id].kind == ER_VALUE_INTERMEDIATE)
        er__tensor_release(&frame->vals[id]);
    }
    for (int k = 0; k < node->n_outputs; k++) {
      int32_t id = node->outputs[k];
      if (id >= 0 && last_use[id] < 0) er__tensor_release(&frame->vals[id]);
    }
  }
done:
  free(own_in);
  free(own_out);
  return st;
}

/* ======================================================================== */
/* Graphs                                                                    */
/* ======================================================================== */

static er_status bind_value(er_frame *f, int32_t id) {
  const er_value *v = &f->g->values[id];
  er_tensor *t = &f->vals[id];
  if (v->kind == ER_VALUE_CONSTANT && !t->data) {
    er__tensor_borrow(t, v->constant);
  } else if (v->kind == ER_VALUE_OUTER) {
    const er_frame *pf = f->parent;
    if (!pf || !pf->vals[v->outer].data)
      return er__error(ER_STATUS_INTERNAL, "captured value '%s' has no data", v->name);
    er__tensor_borrow(t, &pf->vals[v->outer]);
  }
  return ER_STATUS_OK;
}

/* Runs subgraph `g` (a control-flow op's body) in a frame of its own:
 * inputs[i] binds g->inputs[i] (borrowed; entries may be NULL and n_inputs
 * may be less than g->n_inputs for inputs with initializers); each
 * outputs[k] not skipped receives a tensor owning its data (copied when the
 * value is a constant or an input). `parent` is the enclosing frame. */
static er_status exec_graph(er_exec *ex, const er_graph *g, const er_frame *parent,
                            const er_tensor *const *inputs, int n_inputs, er_tensor *outputs, const bool *skip) {
  ex->interp = &interp;
  er_status st = ER_STATUS_OK;
  er_frame frame = {g, NULL, parent, NULL};
  int32_t *last_use = NULL;
  int made_outputs = 0;

  if (ex->depth > ER_MAX_SUBGRAPH_DEPTH)
    return er__error(ER_STATUS_LIMIT, "subgraph calls nested more than %d deep", ER_MAX_SUBGRAPH_DEPTH);
  if (n_inputs > g->n_inputs)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "graph '%s' takes %d inputs, got %d", g->name,
                     (int)g->n_inputs, n_inputs);
  frame.vals = calloc((size_t)g->n_values + 1, sizeof *frame.vals);
  if (!frame.vals) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory running graph '%s'", g->name);

  /* Bind inputs (borrowed), constants and captured values. */
  for (int i = 0; i < n_inputs; i++)
    if (inputs[i]) er__tensor_borrow(&frame.vals[g->inputs[i]], inputs[i]);
  for (int32_t id = 0; id < g->n_values && st == ER_STATUS_OK; id++)
    if (!frame.vals[id].data) st = bind_value(&frame, id);
  if (st != ER_STATUS_OK) goto done;
  for (int i = n_inputs; i < g->n_inputs; i++) {
    int32_t id = g->inputs[i];
    if (!frame.vals[id].data) {
      st = er__error(ER_STATUS_INVALID_ARGUMENT, "graph '%s': input '%s' was not given", g->name,
                     g->values[id].name);
      goto done;
    }
  }

  ex->depth++;
  {
    /* A compiled subgraph's kernels and last uses; else the last uses
     * computed for this run. */
    const er_node_kernel *kernels = NULL;
    const int32_t *lu = NULL;
    for (int i = 0; i < ex->n_subs && !kernels; i++)
      if (ex->subs[i].graph == g) kernels = ex->subs[i].kernels, lu = ex->subs[i].last_use;
    if (!lu) {
      last_use = malloc(((size_t)g->n_values + 1) * sizeof *last_use);
      if (last_use) er__graph_last_use(g, last_use);
      lu = last_use;
    }
    if (!lu) st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory running graph '%s'", g->name);
    else st = er__exec_nodes(ex, &frame, NULL, g->n_nodes, lu, kernels);
  }
  ex->depth--;
  if (st != ER_STATUS_OK) goto done;

  /* Hand outputs over: move owned data, copy borrowed data. */
  for (int32_t k = 0; k < g->n_outputs; k++) {
    if (skip && skip[k]) {
      made_outputs = k + 1;
      continue;
    }
    int32_t id = g->outputs[k];
    er_tensor *t = &frame.vals[id];
    if (!t->data) {
      st = er__error(ER_STATUS_INTERNAL, "graph '%s': output '%s' has no data", g->name, g->values[id].name);
      goto done;
    }
    bool used_again = false;
    for (int32_t j = k + 1; j < g->n_outputs; j++)
      if (g->outputs[j] == id) used_again = true;
    if ((t->flags & ER_TENSOR_OWNS_DATA) && !used_again) {
      outputs[k] = *t;
      t->flags &= ~(uint32_t)ER_TENSOR_OWNS_DATA;
      t->data = NULL;
    } else {
      st = er__tensor_copy(&outputs[k], t);
      if (st != ER_STATUS_OK) goto done;
    }
    made_outputs = k + 1;
  }

done:
  if (st != ER_STATUS_OK)
    for (int k = 0; k < made_outputs; k++) er__tensor_release(&outputs[k]);
  for (int32_t id = 0; id < g->n_values; id++) er__tensor_release(&frame.vals[id]);
  free(frame.vals);
  free(last_use);
  return st;
}

er_status er__exec_main(er_exec *ex, const er_graph *g, er_tensor *vals, const er_tensor *const *inputs,
                        int n_inputs, const er_segment *segs, int n_segs) {
  er_status st = ER_STATUS_OK;
  ex->interp = &interp;
  er_frame frame = {g, vals, NULL, ex->mem};
  if (n_inputs > g->n_inputs)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "graph '%s' takes %d inputs, got %d", g->name,
                     (int)g->n_inputs, n_inputs);
  for (int i = 0; i < n_inputs; i++)
    if (inputs[i]) er__tensor_borrow(&vals[g->inputs[i]], inputs[i]);
  for (int32_t id = 0; id < g->n_values && st == ER_STATUS_OK; id++)
    if (!vals[id].data) st = bind_value(&frame, id);
  if (st != ER_STATUS_OK) return st;
  for (int i = n_inputs; i < g->n_inputs; i++) {
    int32_t id = g->inputs[i];
    if (!vals[id].data)
      return er__error(ER_STATUS_INVALID_ARGUMENT, "graph '%s': input '%s' was not given", g->name,
                       g->values[id].name);
  }
  ex->depth++;
  for (int k = 0; k < n_segs && st == ER_STATUS_OK; k++) {
    st = segs[k].backend->iface->compute(segs[k].backend, segs[k].compiled, ex, vals);
    /* Free what no later segment reads (a device segment leaves its
     * inputs in the frame). */
    for (int32_t r = 0; r < segs[k].n_release; r++) er__tensor_release(&vals[segs[k].release[r]]);
  }
  ex->depth--;
  return st;
}

static er_status run_subgraph(const er_kctx *ctx, const er_graph *sub, const er_tensor *const *inputs,
                             int n_inputs, er_tensor *outputs, const bool *skip) {
  er_exec *ex = ctx->exec;
  if (!ex)
    return er__error(ER_STATUS_INTERNAL, "%s '%s': subgraph run without an executor",
                     ctx->node->op_type, ctx->node->name);
  const er_frame *saved = ex->frame;
  er_status st = exec_graph(ex, sub, saved, inputs, n_inputs, outputs, skip);
  ex->frame = saved;
  return st;
}
