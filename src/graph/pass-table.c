/* pass-table.c - the graph passes in the order they run, one list for
 * model load and one for session creation, and the invariant check after
 * them.
 *
 * Every pass leaves the graph's links true (er__graph_check_links). Debug
 * and sanitizer builds check after each pass, so a broken index names the
 * pass that broke it; release builds check once after the whole list, which
 * still turns a broken index into an INTERNAL error instead of a read past
 * an array later (the planner indexes per-node arrays by producer). */
#include "graph/passes.h"

#if !defined(NDEBUG) || defined(ER_SANITIZE)
#define CHECK_EACH_PASS 1
#else
#define CHECK_EACH_PASS 0
#endif

static er_status run_validate(er_graph *g, const er_pass_ctx *c) {
  ER_UNUSED(c);
  return er__graph_validate(g);
}

static er_status run_contrib(er_graph *g, const er_pass_ctx *c) {
  ER_UNUSED(c);
  return er__graph_expand_contrib(g);
}

static er_status run_bind(er_graph *g, const er_pass_ctx *c) {
  ER_UNUSED(c);
  return er__graph_bind_ops(g);
}

static er_status run_infer(er_graph *g, const er_pass_ctx *c) { return er__graph_infer(g, c->level > 0); }

static er_status run_hoist(er_graph *g, const er_pass_ctx *c) {
  ER_UNUSED(c);
  return er__graph_hoist_loop_invariants(g, NULL);
}

/* ---- the rewrite groups ---------------------------------------------------- */

/* A group's rewrites run in this order, round after round, until a round
 * changes nothing (at most three rounds); then the dead nodes go (order is
 * kept, so the graph stays topological). */
typedef struct rewrite_step {
  const char *name;
  er_rewrite_fn run;
} rewrite_step;

/* Basic, at model load (optimize >= 2), for every backend: the ops stay
 * standard ONNX. Identity and inference Dropout go once, before them. */
static const rewrite_step basic_rewrites[] = {
    {"conv-bn", er__pass_conv_bn},     {"conv-mul", er__pass_conv_mul}, {"conv-bias", er__pass_conv_bias},
    {"transpose", er__pass_transpose}, {"reshape", er__pass_reshape},   {"slice", er__pass_slice},
};

/* Fusion, per session on the session's own copy when every node runs on
 * the CPU (optimize >= 2), after the QDQ pass: these see what stays float.
 * Order matters within a round: LayerNorm before the matmul/bias fusion
 * can take its Add; the residual before the activation, so Conv + Add +
 * Relu becomes one node. */
static const rewrite_step fusion_rewrites[] = {
    {"layernorm", er__pass_layernorm}, {"matmul-bias", er__pass_matmul_bias}, {"hardswish", er__pass_hardswish},
    {"bn-affine", er__pass_bn_affine}, {"conv-add", er__pass_conv_add},       {"activation", er__pass_activation},
    {"gelu", er__pass_gelu},           {"attention", er__pass_attention},
};

static er_status run_rewrites(er_graph *g, bool identity, const rewrite_step *steps, size_t n_steps) {
  er_rewrite rw;
  er_status st = er__rw_begin(&rw, g);
  if (st == ER_STATUS_OK && identity) st = er__pass_identity(&rw);
  for (int round = 0; round < 3 && st == ER_STATUS_OK; round++) {
    int before = rw.changed;
    for (size_t i = 0; i < n_steps && st == ER_STATUS_OK; i++) {
      st = steps[i].run(&rw);
      if (st != ER_STATUS_OK) er__error_prefix("rewrite %s", steps[i].name);
    }
    if (rw.changed == before) break;
  }
  if (st == ER_STATUS_OK) er__rw_commit(&rw);
  er__rw_end(&rw);
  return st;
}

/* ---- the passes ---------------------------------------------------------------- */

static er_status run_basic(er_graph *g, const er_pass_ctx *c) {
  ER_UNUSED(c);
  return run_rewrites(g, true, basic_rewrites, ER_ARRAY_LEN(basic_rewrites));
}

static er_status run_qdq(er_graph *g, const er_pass_ctx *c) {
  ER_UNUSED(c);
  return er__graph_qdq_fuse(g);
}

static er_status run_fusion(er_graph *g, const er_pass_ctx *c) {
  ER_UNUSED(c);
  return run_rewrites(g, false, fusion_rewrites, ER_ARRAY_LEN(fusion_rewrites));
}

static er_status run_layout(er_graph *g, const er_pass_ctx *c) {
  if (c->block <= 0) return ER_STATUS_OK;
  return er__graph_block_layout(g, c->block, c->keep_planar, NULL);
}

/* The one list. `level`: the pass runs when the model's optimize level is
 * at least this (ER_PASS_ALWAYS: at every level, -1 "as written"
 * included). Load-time passes work on the model's graph for every
 * backend; session-time ones on a session's own copy when the CPU runs
 * every node. */
static const er_pass passes[] = {
    {"validate", ER_PASS_LOAD, ER_PASS_ALWAYS, run_validate},
    {"expand-contrib", ER_PASS_LOAD, ER_PASS_ALWAYS, run_contrib},
    {"bind-ops", ER_PASS_LOAD, ER_PASS_ALWAYS, run_bind},
    {"infer-fold", ER_PASS_LOAD, ER_PASS_ALWAYS, run_infer},
    {"hoist-loop-invariants", ER_PASS_LOAD, 2, run_hoist},
    {"basic", ER_PASS_LOAD, 2, run_basic},
    {"qdq-fuse", ER_PASS_SESSION, 2, run_qdq},
    {"fusion", ER_PASS_SESSION, 2, run_fusion},
    {"block-layout", ER_PASS_SESSION, 2, run_layout},
};

const er_pass *er__graph_passes(size_t *count_out) {
  *count_out = ER_ARRAY_LEN(passes);
  return passes;
}

/* The links of g and of every subgraph it owns. */
static er_status check_tree(const er_graph *g, const char *after) {
  ER_CHECK(er__graph_check_links(g, after));
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const er_node *n = &g->nodes[i];
    for (int a = 0; a < n->n_attrs; a++) {
      const er_attr *at = &n->attrs[a];
      int64_t cnt = at->type == ER_ATTR_GRAPH ? 1 : at->type == ER_ATTR_GRAPHS ? at->n : 0;
      for (int64_t j = 0; j < cnt; j++) {
        const er_graph *sg = at->type == ER_ATTR_GRAPH ? at->g : at->graphs[j];
        /* A session's copy shares the model's subgraphs: checked with the
         * model. */
        if (sg->parent != g) continue;
        ER_CHECK(check_tree(sg, after));
      }
    }
  }
  return ER_STATUS_OK;
}

er_status er__graph_run_passes(er_graph *g, er_pass_phase phase, const er_pass_ctx *ctx) {
  const char *last = NULL;
  for (size_t i = 0; i < ER_ARRAY_LEN(passes); i++) {
    const er_pass *p = &passes[i];
    if (p->phase != phase || ctx->level < p->level) continue;
    ER_CHECK(p->run(g, ctx));
    last = p->name;
    if (CHECK_EACH_PASS) ER_CHECK(check_tree(g, p->name));
  }
  if (last && !CHECK_EACH_PASS) ER_CHECK(check_tree(g, phase == ER_PASS_LOAD ? "load passes" : "session passes"));
  return ER_STATUS_OK;
}
