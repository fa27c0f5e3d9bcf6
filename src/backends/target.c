/* target.c - target profiles and the offline compatibility check (see
 * target.h and profiles/README.md). The profile stays a jansson tree: the
 * check walks it per node, which keeps the format and the code one-to-one. */
#include "backends/target.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "backends/partition.h"

#define ER_TARGET_SCHEMA "edgerun-target-profile/1"

struct er_target {
  json_t *root;
  char source[512];
  char path[256];
};

/* ======================================================================== */
/* Loading and validation                                                    */
/* ======================================================================== */

static const char *const quantities[] = {
    "strides",       "pads",          "dilations",          "kernel_h",   "kernel_w",
    "kernel_area",   "dilated_kernel_h", "dilated_kernel_w", "dilated_kernel_area",
    "input_hw",      "batch",         "rank",               "weights_const", "inputs",
    "stride_h",      "stride_w",      "square_kernel",      "square_stride", "kernel_equals_stride",
    "kernel_power_of_2", "stride_le_kernel", "output_rank", "clip_min",   "clip_max",
};
static const char *const conditions[] = {"depthwise", "not_depthwise", "padded", "unpadded"};
static const char *const axis_names[] = {"batch", "channel", "height", "width", "all"};

static bool known_quantity(const char *what) {
  if (strncmp(what, "attr:", 5) == 0) return what[5] != '\0';
  for (size_t i = 0; i < ER_ARRAY_LEN(quantities); i++)
    if (strcmp(quantities[i], what) == 0) return true;
  return false;
}

static er_status bad(const er_target *t, const char *where, const char *why) {
  return er__error(ER_STATUS_INVALID_ARGUMENT, "target profile '%s': %s: %s", t->path, where, why);
}

static er_status check_dims(const er_target *t, json_t *dims, const char *where) {
  if (!dims) return ER_STATUS_OK;
  if (!json_is_object(dims)) return bad(t, where, "\"dims\" must be an object of dtype -> axis ranges");
  const char *dt;
  json_t *axes;
  json_object_foreach(dims, dt, axes) {
    if (!json_is_object(axes)) return bad(t, where, "each \"dims\" entry must map axis names to [min, max]");
    const char *ax;
    json_t *range;
    json_object_foreach(axes, ax, range) {
      bool ok = false;
      for (size_t i = 0; i < ER_ARRAY_LEN(axis_names); i++) ok = ok || strcmp(axis_names[i], ax) == 0;
      if (!ok) return bad(t, where, "axis names are batch, channel, height, width or all");
      if (!json_is_array(range) || json_array_size(range) != 2)
        return bad(t, where, "an axis range must be [min, max] (max may be null)");
    }
  }
  return ER_STATUS_OK;
}

static er_status check_rules(const er_target *t, json_t *rules, const char *op) {
  if (!rules) return ER_STATUS_OK;
  char where[160];
  snprintf(where, sizeof where, "ops.%s.rules", op);
  if (!json_is_array(rules)) return bad(t, where, "must be a list");
  size_t i;
  json_t *r;
  json_array_foreach(rules, i, r) {
    json_t *alts = json_object_get(r, "any_of");
    if (alts) {
      if (!json_is_array(alts) || json_array_size(alts) == 0)
        return bad(t, where, "\"any_of\" must be a non-empty list of rule lists");
      size_t j;
      json_t *alt;
      json_array_foreach(alts, j, alt) {
        er_status st = check_rules(t, alt, op);
        if (st != ER_STATUS_OK) return st;
      }
      continue;
    }
    json_t *when = json_object_get(r, "when");
    if (when) {
      bool ok = false;
      for (size_t k = 0; k < ER_ARRAY_LEN(conditions); k++)
        ok = ok || (json_is_string(when) && strcmp(json_string_value(when), conditions[k]) == 0);
      if (!ok) return bad(t, where, "\"when\" must be depthwise, not_depthwise, padded or unpadded");
    }
    json_t *what = json_object_get(r, "what");
    if (!json_is_string(what) || !known_quantity(json_string_value(what))) {
      char msg[200];
      snprintf(msg, sizeof msg, "rule %zu: \"what\" must be attr:NAME or a quantity named in "
               "profiles/README.md", i);
      return bad(t, where, msg);
    }
    if (!json_object_get(r, "min") && !json_object_get(r, "max") && !json_object_get(r, "eq") &&
        !json_object_get(r, "in"))
      return bad(t, where, "each rule needs min, max, eq or in");
  }
  return ER_STATUS_OK;
}

er_status er__target_load(const char *path, er_target **out) {
  er_target *t = calloc(1, sizeof *t);
  if (!t) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory loading a target profile");
  snprintf(t->path, sizeof t->path, "%s", path);
  er_status st = ER_STATUS_OK;
  struct stat sb;
  if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = er__error(ER_STATUS_IO, "cannot read target profile '%s'", path);
    goto fail;
  }
  if ((uint64_t)sb.st_size > ER_TARGET_MAX_FILE_BYTES) {
    st = er__error(ER_STATUS_LIMIT, "target profile '%s' is %lld bytes, more than %u (ER_TARGET_MAX_FILE_BYTES)",
                   path, (long long)sb.st_size, ER_TARGET_MAX_FILE_BYTES);
    goto fail;
  }
  json_error_t err;
  t->root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!t->root) {
    st = er__error(ER_STATUS_INVALID_ARGUMENT, "target profile '%s' line %d: %s", path, err.line, err.text);
    goto fail;
  }
  json_t *schema = json_object_get(t->root, "schema");
  if (!json_is_string(schema) || strcmp(json_string_value(schema), ER_TARGET_SCHEMA) != 0) {
    st = bad(t, "schema", "must be \"" ER_TARGET_SCHEMA "\"");
    goto fail;
  }
  json_t *src = json_object_get(t->root, "source");
  const char *stitle = json_string_value(json_object_get(src, "title"));
  const char *surl = json_string_value(json_object_get(src, "url"));
  if (!json_is_string(json_object_get(t->root, "name")) || !stitle || !surl) {
    st = bad(t, "name/source", "a profile needs a name and a source with the title and url of the public "
             "document its rules come from");
    goto fail;
  }
  const char *sver = json_string_value(json_object_get(src, "version"));
  snprintf(t->source, sizeof t->source, "%s%s%s: %s", stitle, sver ? ", " : "", sver ? sver : "", surl);
  json_t *ops = json_object_get(t->root, "ops");
  if (!json_is_object(ops)) {
    st = bad(t, "ops", "must be an object of op type -> rules");
    goto fail;
  }
  st = check_dims(t, json_object_get(t->root, "dims"), "dims");
  const char *op;
  json_t *rule;
  json_object_foreach(ops, op, rule) {
    if (st != ER_STATUS_OK) break;
    if (!json_is_object(rule)) {
      st = bad(t, op, "each op maps to an object ({} when it has no constraints)");
      break;
    }
    char where[160];
    snprintf(where, sizeof where, "ops.%s.dims", op);
    st = check_dims(t, json_object_get(rule, "dims"), where);
    if (st == ER_STATUS_OK) st = check_rules(t, json_object_get(rule, "rules"), op);
  }
  if (st != ER_STATUS_OK) goto fail;
  *out = t;
  return ER_STATUS_OK;
fail:
  er__target_free(t);
  return st;
}

void er__target_free(er_target *t) {
  if (!t) return;
  json_decref(t->root);
  free(t);
}

const char *er__target_name(const er_target *t) { return json_string_value(json_object_get(t->root, "name")); }
const char *er__target_title(const er_target *t) {
  const char *s = json_string_value(json_object_get(t->root, "title"));
  return s ? s : er__target_name(t);
}
const char *er__target_source(const er_target *t) { return t->source; }

/* ======================================================================== */
/* Checking                                                                  */
/* ======================================================================== */

typedef struct checker {
  bool assume_quantized;
  const er_target *t;
  const er_graph *g;
  er_violation *v;
  size_t n, cap;
  bool oom;
} checker;

__attribute__((format(printf, 5, 6))) static void add(checker *c, int32_t node, const char *rule,
                                                      bool advisory, const char *fmt, ...) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 32;
    er_violation *nv = realloc(c->v, cap * sizeof *nv);
    if (!nv) {
      c->oom = true;
      return;
    }
    c->v = nv;
    c->cap = cap;
  }
  er_violation *x = &c->v[c->n++];
  x->node = node;
  x->advisory = advisory;
  snprintf(x->rule, sizeof x->rule, "%s", rule);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->detail, sizeof x->detail, fmt, ap);
  va_end(ap);
}

/* The type a value is computed in on the NPU: a DequantizeLinear output
 * stands for its quantized input (the QDQ convention), and types the
 * toolkit converts automatically count as their conversion. */
static er_dtype effective_dtype(const checker *c, int32_t id) {
  const er_value *v = &c->g->values[id];
  er_dtype t = v->info.dtype;
  if (v->kind == ER_VALUE_INTERMEDIATE && v->producer >= 0) {
    const er_node *p = &c->g->nodes[v->producer];
    if (p->domain[0] == '\0' && strcmp(p->op_type, "DequantizeLinear") == 0 && p->inputs[0] >= 0)
      t = c->g->values[p->inputs[0]].info.dtype;
  }
  /* Asked to judge the model as it will be once quantized: float tensors
   * count as int8 (unless the toolkit converts them itself). */
  json_t *conv = json_object_get(json_object_get(c->t->root, "converts"), er_dtype_name(t));
  if (!json_is_string(conv) && c->assume_quantized && er__dtype_is_float(t)) return ER_DTYPE_INT8;
  if (json_is_string(conv)) {
    for (int d = 1; d <= ER_DTYPE_FLOAT4E2M1; d++)
      if (strcmp(er_dtype_name((er_dtype)d), json_string_value(conv)) == 0) return (er_dtype)d;
  }
  return t;
}

static bool in_list(json_t *list, const char *s) {
  size_t i;
  json_t *e;
  json_array_foreach(list, i, e) if (json_is_string(e) && strcmp(json_string_value(e), s) == 0) return true;
  return false;
}

/* Initializers count as constants here even when a caller could override
 * them (IR 4+ lists many models' weights as graph inputs): an NPU toolkit
 * compiles them as weights. */
static bool is_const(const er_graph *g, int32_t id) { return g->values[id].kind == ER_VALUE_CONSTANT; }

/* The activations of a node: inputs that are not constants, and outputs. */
static int activations(const checker *c, const er_node *n, int32_t *ids, int cap) {
  int k = 0;
  for (int i = 0; i < n->n_inputs && k < cap; i++)
    if (n->inputs[i] >= 0 && !is_const(c->g, n->inputs[i])) ids[k++] = n->inputs[i];
  for (int i = 0; i < n->n_outputs && k < cap; i++)
    if (n->outputs[i] >= 0) ids[k++] = n->outputs[i];
  return k;
}

/* Axis index of a named axis in a tensor of `rank` (NCHW), or -1. */
static int axis_of(const char *name, int rank) {
  if (strcmp(name, "batch") == 0) return rank >= 1 ? 0 : -1;
  if (strcmp(name, "channel") == 0) return rank >= 2 ? 1 : -1;
  if (strcmp(name, "height") == 0) return rank >= 3 ? rank - 2 : -1;
  if (strcmp(name, "width") == 0) return rank >= 3 ? rank - 1 : -1;
  return -1;
}

static void check_dims_of(checker *c, int32_t node, json_t *dims, int32_t id, er_dtype dt) {
  if (!dims) return;
  const er_value *v = &c->g->values[id];
  const char *keys[2] = {"*", er_dtype_name(dt)};
  for (int kk = 0; kk < 2; kk++) {
    json_t *axes = json_object_get(dims, keys[kk]);
    if (!axes) continue;
    const char *ax;
    json_t *range;
    json_object_foreach(axes, ax, range) {
      json_t *lo = json_array_get(range, 0), *hi = json_array_get(range, 1);
      for (int d = 0; d < v->info.rank; d++) {
        bool all = strcmp(ax, "all") == 0;
        if (!all && axis_of(ax, v->info.rank) != d) continue;
        int64_t x = v->info.dims[d];
        if (x < 0) continue;  /* reported as a dynamic shape */
        bool low = json_is_integer(lo) && x < json_integer_value(lo);
        bool high = json_is_integer(hi) && x > json_integer_value(hi);
        if (low || high) {
          char rule[ER_TARGET_RULE_BYTES], los[24] = "-", his[24] = "-";
          snprintf(rule, sizeof rule, "dims.%s", ax);
          if (json_is_integer(lo)) snprintf(los, sizeof los, "%lld", (long long)json_integer_value(lo));
          if (json_is_integer(hi)) snprintf(his, sizeof his, "%lld", (long long)json_integer_value(hi));
          add(c, node, rule, false, "'%s' axis %d is %lld; the %s range%s%s is [%s, %s]", v->name, d,
              (long long)x, ax, kk ? " for " : "", kk ? keys[1] : "", los, his);
        }
      }
    }
  }
}

/* Values of a quantity for a node; returns how many (0 when it does not
 * apply, e.g. kernel sizes of an op without a kernel). Strings go to *s. */
static int quantity(const checker *c, const er_node *n, const char *what, int64_t *vals, int cap,
                    const char **s, double *f, bool *is_float) {
  const er_graph *g = c->g;
  *s = NULL;
  *is_float = false;
  const er_tensor *x = n->n_inputs > 0 && n->inputs[0] >= 0 ? &g->values[n->inputs[0]].info : NULL;
  int nsp = x && x->rank > 2 ? x->rank - 2 : 0;
  if (strncmp(what, "attr:", 5) == 0) {
    const er_attr *a = er__node_attr(n, what + 5);
    if (!a) return -1;  /* absent: the rule's default decides */
    switch (a->type) {
      case ER_ATTR_INT: vals[0] = a->i; return 1;
      case ER_ATTR_FLOAT: *f = a->f; *is_float = true; return 1;
      case ER_ATTR_STRING: *s = a->s; return 1;
      case ER_ATTR_INTS: {
        int k = 0;
        for (int64_t i = 0; i < a->n && k < cap; i++) vals[k++] = a->ints[i];
        return k;
      }
      default: return 0;
    }
  }
  if (strcmp(what, "rank") == 0) {
    if (!x || x->rank < 0) return 0;
    vals[0] = x->rank;
    return 1;
  }
  if (strcmp(what, "inputs") == 0) {
    vals[0] = n->n_inputs;
    return 1;
  }
  if (strcmp(what, "batch") == 0) {
    if (!x || x->rank < 1 || x->dims[0] < 0) return 0;
    vals[0] = x->dims[0];
    return 1;
  }
  if (strcmp(what, "input_hw") == 0) {
    if (!x || x->rank < 3 || x->dims[x->rank - 1] < 0 || x->dims[x->rank - 2] < 0) return 0;
    vals[0] = x->dims[x->rank - 1] * x->dims[x->rank - 2];
    return 1;
  }
  if (strcmp(what, "weights_const") == 0) {
    if (n->n_inputs < 2 || n->inputs[1] < 0) return 0;
    vals[0] = is_const(g, n->inputs[1]);
    return 1;
  }
  if (strcmp(what, "output_rank") == 0) {
    if (n->n_outputs < 1 || n->outputs[0] < 0 || g->values[n->outputs[0]].info.rank < 0) return 0;
    vals[0] = g->values[n->outputs[0]].info.rank;
    return 1;
  }
  if (strcmp(what, "clip_min") == 0 || strcmp(what, "clip_max") == 0) {
    /* Clip bounds: attributes before opset 11, constant inputs after. */
    bool lo = what[5] == 'm' && what[6] == 'i';
    const er_attr *a = er__node_attr(n, lo ? "min" : "max");
    int k = lo ? 1 : 2;
    *is_float = true;
    if (a && a->type == ER_ATTR_FLOAT) *f = a->f;
    else if (k < n->n_inputs && n->inputs[k] >= 0 && is_const(g, n->inputs[k]) &&
             g->values[n->inputs[k]].constant && g->values[n->inputs[k]].constant->data)
      *f = er__load_f64(g->values[n->inputs[k]].constant->data, g->values[n->inputs[k]].constant->dtype, 0);
    else if (k < n->n_inputs && n->inputs[k] >= 0) return 0;  /* computed at run time */
    else *f = lo ? -INFINITY : INFINITY;
    return 1;
  }
  if (nsp == 0 || nsp > 3) return 0;
  /* Geometry of convolutions and pools: kernel from kernel_shape, else the
   * weights' trailing dims; global pools cover the whole input. */
  int64_t k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, pads[6] = {0};
  bool has_kernel = false;
  const er_attr *ks = er__node_attr(n, "kernel_shape");
  if (ks && ks->type == ER_ATTR_INTS && ks->n == nsp) {
    for (int d = 0; d < nsp; d++) k[d] = ks->ints[d];
    has_kernel = true;
  } else if (strncmp(n->op_type, "Global", 6) == 0) {
    for (int d = 0; d < nsp; d++) k[d] = x->dims[2 + d];
    has_kernel = true;
  } else if (strstr(n->op_type, "Conv") && n->n_inputs > 1 && n->inputs[1] >= 0) {
    const er_tensor *w = &g->values[n->inputs[strcmp(n->op_type, "QLinearConv") == 0 ? 3 : 1]].info;
    if (w->rank == nsp + 2) {
      for (int d = 0; d < nsp; d++) k[d] = w->dims[2 + d];
      has_kernel = true;
    }
  }
  const er_attr *a;
  if ((a = er__node_attr(n, "strides")) && a->type == ER_ATTR_INTS && a->n == nsp)
    for (int d = 0; d < nsp; d++) st[d] = a->ints[d];
  if ((a = er__node_attr(n, "dilations")) && a->type == ER_ATTR_INTS && a->n == nsp)
    for (int d = 0; d < nsp; d++) dl[d] = a->ints[d];
  if ((a = er__node_attr(n, "pads")) && a->type == ER_ATTR_INTS && a->n == 2 * nsp)
    for (int d = 0; d < 2 * nsp; d++) pads[d] = a->ints[d];
  int hi = nsp >= 2 ? nsp - 2 : 0, wi = nsp - 1;
  if (strcmp(what, "strides") == 0) {
    for (int d = 0; d < nsp; d++) vals[d] = st[d];
    return nsp;
  }
  if (strcmp(what, "stride_h") == 0 || strcmp(what, "stride_w") == 0) {
    vals[0] = st[what[7] == 'h' ? hi : wi];
    return 1;
  }
  if (strcmp(what, "square_stride") == 0) {
    vals[0] = nsp < 2 || st[hi] == st[wi];
    return 1;
  }
  if (strcmp(what, "dilations") == 0) {
    for (int d = 0; d < nsp; d++) vals[d] = dl[d];
    return nsp;
  }
  if (strcmp(what, "pads") == 0) {
    for (int d = 0; d < 2 * nsp; d++) vals[d] = pads[d];
    return 2 * nsp;
  }
  if (!has_kernel) return 0;
  bool pow2 = k[hi] > 0 && (k[hi] & (k[hi] - 1)) == 0;
  if (strcmp(what, "square_kernel") == 0) vals[0] = nsp < 2 || k[hi] == k[wi];
  else if (strcmp(what, "kernel_equals_stride") == 0) vals[0] = k[hi] == st[hi] && k[wi] == st[wi];
  else if (strcmp(what, "kernel_power_of_2") == 0) vals[0] = pow2;
  else if (strcmp(what, "stride_le_kernel") == 0) vals[0] = st[hi] <= k[hi] && st[wi] <= k[wi];
  else if (strcmp(what, "kernel_h") == 0) vals[0] = k[hi];
  else if (strcmp(what, "kernel_w") == 0) vals[0] = k[wi];
  else if (strcmp(what, "kernel_area") == 0) vals[0] = k[hi] * (nsp >= 2 ? k[wi] : 1);
  else if (strcmp(what, "dilated_kernel_h") == 0) vals[0] = (k[hi] - 1) * dl[hi] + 1;
  else if (strcmp(what, "dilated_kernel_w") == 0) vals[0] = (k[wi] - 1) * dl[wi] + 1;
  else if (strcmp(what, "dilated_kernel_area") == 0)
    vals[0] = ((k[hi] - 1) * dl[hi] + 1) * (nsp >= 2 ? (k[wi] - 1) * dl[wi] + 1 : 1);
  else return 0;
  return 1;
}

/* Whether condition `when` holds for node n ("depthwise": a grouped
 * convolution with one group per input channel; "padded": any pad > 0). */
static bool condition(const checker *c, const er_node *n, const char *when) {
  const er_graph *g = c->g;
  if (strstr(when, "depthwise")) {
    const er_attr *gr = er__node_attr(n, "group");
    const er_tensor *x = n->n_inputs > 0 && n->inputs[0] >= 0 ? &g->values[n->inputs[0]].info : NULL;
    bool dw = gr && gr->type == ER_ATTR_INT && gr->i > 1 && x && x->rank > 1 && x->dims[1] == gr->i;
    return strncmp(when, "not_", 4) == 0 ? !dw : dw;
  }
  bool padded = false;
  const er_attr *p = er__node_attr(n, "pads");
  if (p && p->type == ER_ATTR_INTS)
    for (int64_t i = 0; i < p->n; i++) padded = padded || p->ints[i] != 0;
  const er_attr *ap = er__node_attr(n, "auto_pad");
  if (ap && ap->type == ER_ATTR_STRING && strncmp(ap->s, "SAME", 4) == 0) padded = true;
  return strcmp(when, "padded") == 0 ? padded : !padded;
}

/* Evaluates one rule; false with `why` written when the node breaks it.
 * *name_out is the rule's name for the report. */
static bool rule_ok(const checker *c, int32_t node, json_t *r, char *why, size_t size, const char **name_out) {
  const er_node *n = &c->g->nodes[node];
  const char *what = json_string_value(json_object_get(r, "what"));
  const char *when = json_string_value(json_object_get(r, "when"));
  json_t *min = json_object_get(r, "min"), *max = json_object_get(r, "max"), *eq = json_object_get(r, "eq"),
         *in = json_object_get(r, "in"), *def = json_object_get(r, "default");
  const char *note = json_string_value(json_object_get(r, "note"));
  *name_out = strncmp(what, "attr:", 5) == 0 ? what + 5 : what;
  if (when && !condition(c, n, when)) return true;
  int64_t vals[16];
  const char *s = NULL;
  double f = 0;
  bool is_float = false;
  int cnt = quantity(c, n, what, vals, 16, &s, &f, &is_float);
  if (cnt < 0) {
    /* Absent attribute: check the ONNX default the rule names. */
    if (!def) return true;
    if (json_is_string(def)) s = json_string_value(def), cnt = 1;
    else if (json_is_integer(def)) vals[0] = json_integer_value(def), cnt = 1;
    else if (json_is_real(def)) f = json_real_value(def), is_float = true, cnt = 1;
    else return true;
  }
  for (int i = 0; i < cnt; i++) {
    char val[96];
    bool ok = true;
    if (s) {
      snprintf(val, sizeof val, "'%s'", s);
      if (in && !in_list(in, s)) ok = false;
      if (json_is_string(eq) && strcmp(json_string_value(eq), s) != 0) ok = false;
    } else {
      double x = is_float ? f : (double)vals[i];
      if (is_float) snprintf(val, sizeof val, "%g", f);
      else snprintf(val, sizeof val, "%lld", (long long)vals[i]);
      if (json_is_number(min) && x < json_number_value(min)) ok = false;
      if (json_is_number(max) && x > json_number_value(max)) ok = false;
      if (json_is_number(eq) && x != json_number_value(eq)) ok = false;
      if (json_is_boolean(eq)) {
        snprintf(val, sizeof val, "%s", x != 0 ? "true" : "false");
        if ((x != 0) != json_is_true(eq)) ok = false;
      }
      if (in) {
        bool found = false;
        size_t j;
        json_t *e;
        json_array_foreach(in, j, e) if (json_is_number(e) && json_number_value(e) == x) found = true;
        if (!found) ok = false;
      }
    }
    if (ok) continue;
    char limit[160] = "";
    size_t used = 0;
    if (json_is_number(min) || json_is_number(max)) {
      char lo[32] = "-", hi_s[32] = "-";
      if (json_is_number(min)) snprintf(lo, sizeof lo, "%g", json_number_value(min));
      if (json_is_number(max)) snprintf(hi_s, sizeof hi_s, "%g", json_number_value(max));
      used += (size_t)snprintf(limit + used, sizeof limit - used, "range [%s, %s]", lo, hi_s);
    }
    if (eq && used < sizeof limit) {
      char *e = json_dumps(eq, JSON_ENCODE_ANY);
      used += (size_t)snprintf(limit + used, sizeof limit - used, "%smust be %s", used ? ", " : "", e ? e : "?");
      free(e);
    }
    if (in && used < sizeof limit) {
      char *e = json_dumps(in, JSON_COMPACT);
      used += (size_t)snprintf(limit + used, sizeof limit - used, "%sone of %s", used ? ", " : "", e ? e : "?");
      free(e);
    }
    snprintf(why, size, "%s is %s; %s%s%s%s", *name_out, val, limit, when ? " when " : "", when ? when : "",
             note ? "" : "");
    if (note) {
      size_t len = strlen(why);
      snprintf(why + len, size - len, " - %s", note);
    }
    return false;
  }
  return true;
}

static void check_rule(checker *c, int32_t node, json_t *r) {
  char why[ER_TARGET_DETAIL_BYTES];
  const char *name;
  json_t *alts = json_object_get(r, "any_of");
  if (!alts) {
    if (!rule_ok(c, node, r, why, sizeof why, &name)) add(c, node, name, false, "%s", why);
    return;
  }
  /* Alternatives (a footnote's "or"): the node passes when every rule of
   * one alternative holds. */
  size_t i, j;
  json_t *alt, *rr;
  json_array_foreach(alts, i, alt) {
    bool all = true;
    json_array_foreach(alt, j, rr) if (all && !rule_ok(c, node, rr, why, sizeof why, &name)) all = false;
    if (all) return;
  }
  const char *note = json_string_value(json_object_get(r, "note"));
  add(c, node, "conditions", false, "meets none of the %zu alternative conditions%s%s", json_array_size(alts),
      note ? ": " : "", note ? note : "");
}

static void check_node(checker *c, int32_t i) {
  const er_node *n = &c->g->nodes[i];
  json_t *root = c->t->root;
  char key[160];
  snprintf(key, sizeof key, "%s%s%s", n->domain, n->domain[0] ? "." : "", n->op_type);
  json_t *op = json_object_get(json_object_get(root, "ops"), key);
  if (!op) {
    add(c, i, "op", false, "%s is not among the operators the NPU runs", key);
    return;
  }
  if (json_is_false(json_object_get(op, "supported"))) {
    const char *note = json_string_value(json_object_get(op, "note"));
    add(c, i, "op", false, "%s is listed as not supported%s%s", key, note ? ": " : "", note ? note : "");
    return;
  }
  int32_t ids[64];
  int na = activations(c, n, ids, 64);
  /* Types. */
  json_t *types = json_object_get(op, "dtypes");
  if (!types) types = json_object_get(root, "activation_dtypes");
  if (types) {
    for (int k = 0; k < na; k++) {
      er_dtype dt = effective_dtype(c, ids[k]);
      if (dt == ER_DTYPE_UNDEFINED || in_list(types, er_dtype_name(dt))) continue;
      char *list = json_dumps(types, JSON_COMPACT);
      add(c, i, "dtype", false, "'%s' is %s; the NPU computes in %s%s", c->g->values[ids[k]].name,
          er_dtype_name(dt), list ? list : "?",
          er__dtype_is_float(dt) ? " (quantize the model first)" : "");
      free(list);
      break;
    }
  }
  /* Rank and dynamic shapes. */
  json_t *mr = json_object_get(op, "max_rank");
  if (!mr) mr = json_object_get(root, "max_rank");
  bool dyn_ok = !json_is_false(json_object_get(root, "dynamic_shapes"));
  for (int k = 0; k < na; k++) {
    const er_value *v = &c->g->values[ids[k]];
    if (json_is_integer(mr) && v->info.rank > json_integer_value(mr)) {
      add(c, i, "rank", false, "'%s' has rank %d; at most %lld", v->name, v->info.rank,
          (long long)json_integer_value(mr));
      break;
    }
  }
  for (int k = 0; k < na && !dyn_ok; k++) {
    const er_value *v = &c->g->values[ids[k]];
    bool dyn = v->info.rank < 0;
    for (int d = 0; d < v->info.rank; d++) dyn = dyn || v->info.dims[d] < 0;
    if (dyn) {
      char buf[96];
      add(c, i, "dynamic", false, "'%s' has shape %s; the NPU needs static shapes (edgerun fix-shapes)", v->name,
          er__shape_str(&v->info, buf, sizeof buf));
      break;
    }
  }
  /* Per-axis limits, the profile's then the op's. */
  for (int k = 0; k < na; k++) {
    er_dtype dt = effective_dtype(c, ids[k]);
    check_dims_of(c, i, json_object_get(root, "dims"), ids[k], dt);
    check_dims_of(c, i, json_object_get(op, "dims"), ids[k], dt);
  }
  /* Attribute and geometry rules. */
  size_t j;
  json_t *r;
  json_array_foreach(json_object_get(op, "rules"), j, r) check_rule(c, i, r);
  /* Alignment (performance): the axis should be a multiple of N. */
  json_array_foreach(json_object_get(root, "alignment"), j, r) {
    json_t *ops = json_object_get(r, "ops");
    if (ops && !in_list(ops, key)) continue;
    const char *ax = json_string_value(json_object_get(r, "axis"));
    json_int_t mult = json_integer_value(json_object_get(r, "multiple"));
    json_t *dts = json_object_get(r, "dtypes");
    bool hard = json_is_true(json_object_get(r, "required"));
    if (!ax || mult <= 1) continue;
    for (int k = 0; k < na; k++) {
      const er_value *v = &c->g->values[ids[k]];
      er_dtype dt = effective_dtype(c, ids[k]);
      int d = axis_of(ax, v->info.rank);
      if (dts && !in_list(dts, er_dtype_name(dt))) continue;
      if (d < 0 || v->info.dims[d] < 0 || v->info.dims[d] % mult == 0) continue;
      const char *note = json_string_value(json_object_get(r, "note"));
      add(c, i, "alignment", !hard, "'%s' %s is %lld, not a multiple of %lld%s%s", v->name, ax,
          (long long)v->info.dims[d], (long long)mult, note ? " - " : "", note ? note : "");
      break;
    }
  }
}

er_status er__target_check(const er_target *t, const er_graph *g, bool assume_quantized, er_violation **out,
                           size_t *n_out) {
  checker c = {assume_quantized, t, g, NULL, 0, 0, false};
  for (int32_t i = 0; i < g->n_nodes && !c.oom; i++) check_node(&c, i);
  if (c.oom) {
    free(c.v);
    return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory checking against a target profile");
  }
  *out = c.v;
  *n_out = c.n;
  return ER_STATUS_OK;
}
