/* shapevals.c - partly known shape vectors at load (ONNX's data
 * propagation).
 *
 * Models exported with dynamic sizes compute the shapes they feed to
 * Resize, Reshape, Expand or ConstantOfShape from Shape at run time:
 * Resize(x, sizes = Concat(Slice(Shape(x), 0, 2), hw)). The vector is not a
 * constant, since some dims are known only at run time, but some of its
 * entries are (here the batch and the channels). Knowing those entries
 * gives the output's channel count at load, which the layout pass and the
 * planner need.
 *
 * The table holds, per value id, the entries of a small integer vector
 * known so far. Rules below only ever copy or combine known integers
 * exactly, so a known entry is what the run will compute. */
#include <stdlib.h>

#include "graph/graph.h"
#include "graph/rewrite.h"

static bool int_vector_type(er_dtype t) { return t == ER_DTYPE_INT64 || t == ER_DTYPE_INT32; }

/* What is known of input k: a constant integer vector of at most
 * ER_MAX_RANK entries (all known), or the table's entry. */
static bool input_vals(const er_node *node, const er_tensor *const *in, const er_shape_vals *tab, int k,
                       er_shape_vals *out) {
  out->n = -1;
  out->known = 0;
  if (k >= node->n_inputs || node->inputs[k] < 0 || !in[k]) return false;
  const er_tensor *t = in[k];
  if (t->data) {
    int64_t c = er__tensor_count(t);
    if (t->rank > 1 || c < 0 || c > ER_MAX_RANK || !int_vector_type(t->dtype)) return false;
    out->n = (int8_t)c;
    for (int64_t i = 0; i < c; i++) {
      out->v[i] = er__load_i64(t->data, t->dtype, i);
      out->known |= 1u << i;
    }
    return true;
  }
  const er_shape_vals *s = &tab[node->inputs[k]];
  if (s->n < 0 || s->known == 0) return false;
  *out = *s;
  return true;
}

/* A constant integer input as int64 values; false when it is not one. */
static bool const_ints(const er_tensor *const *in, int n_in, int k, int64_t *v, int64_t *n) {
  if (k >= n_in || !in[k] || !in[k]->data || !int_vector_type(in[k]->dtype) || in[k]->rank > 1) return false;
  int64_t c = er__tensor_count(in[k]);
  if (c < 0 || c > ER_MAX_RANK) return false;
  for (int64_t i = 0; i < c; i++) v[i] = er__load_i64(in[k]->data, in[k]->dtype, i);
  *n = c;
  return true;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Slice of a 1-D vector (ONNX's clamping rules for one axis). */
static bool slice_vals(const er_node *node, const er_tensor *const *in, const er_shape_vals *x,
                       er_shape_vals *y) {
  int64_t st[ER_MAX_RANK], en[ER_MAX_RANK], ax[ER_MAX_RANK], sp[ER_MAX_RANK];
  int64_t ns, ne, na = 1, np = 1;
  ax[0] = 0;
  sp[0] = 1;
  if (node->version < 10) {
    const er_attr *as = er__node_attr(node, "starts"), *ae = er__node_attr(node, "ends");
    const er_attr *aa = er__node_attr(node, "axes");
    if (!as || !ae || as->type != ER_ATTR_INTS || ae->type != ER_ATTR_INTS || as->n != 1 || ae->n != 1) return false;
    st[0] = as->ints[0];
    en[0] = ae->ints[0];
    if (aa && (aa->type != ER_ATTR_INTS || aa->n != 1 || (aa->ints[0] != 0 && aa->ints[0] != -1))) return false;
  } else {
    if (!const_ints(in, node->n_inputs, 1, st, &ns) || !const_ints(in, node->n_inputs, 2, en, &ne) || ns != 1 ||
        ne != 1)
      return false;
    if (node->n_inputs > 3 && node->inputs[3] >= 0 &&
        (!const_ints(in, node->n_inputs, 3, ax, &na) || na != 1 || (ax[0] != 0 && ax[0] != -1)))
      return false;
    if (node->n_inputs > 4 && node->inputs[4] >= 0 &&
        (!const_ints(in, node->n_inputs, 4, sp, &np) || np != 1 || sp[0] == 0))
      return false;
  }
  int64_t n = x->n, s = st[0], e = en[0], step = sp[0];
  /* Steps past the vector's end take one entry, and i + step stays in
   * range. */
  if (step > n) step = n + 1;
  if (step < -n - 1) step = -n - 1;
  if (s < 0) s += n;
  if (e < 0) e += n;
  if (step > 0) {
    s = clamp64(s, 0, n);
    e = clamp64(e, 0, n);
  } else {
    s = clamp64(s, 0, n - 1);
    e = clamp64(e, -1, n - 1);
  }
  y->n = 0;
  y->known = 0;
  for (int64_t i = s; step > 0 ? i < e : i > e; i += step) {
    if (y->n >= ER_MAX_RANK) return false;
    y->v[y->n] = x->v[i];
    if (x->known & (1u << i)) y->known |= 1u << y->n;
    y->n++;
  }
  return true;
}

static bool gather_vals(const er_node *node, const er_tensor *const *in, const er_shape_vals *x,
                        er_shape_vals *y) {
  int64_t idx[ER_MAX_RANK], n;
  int64_t axis = er__node_attr_int(node, "axis", 0);
  if ((axis != 0 && axis != -1) || !const_ints(in, node->n_inputs, 1, idx, &n)) return false;
  y->n = (int8_t)n;
  y->known = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t j = idx[i] < 0 ? idx[i] + x->n : idx[i];
    if (j < 0 || j >= x->n) return false; /* the op's check reports it */
    y->v[i] = x->v[j];
    if (x->known & (1u << j)) y->known |= 1u << i;
  }
  return true;
}

static bool concat_vals(const er_node *node, const er_tensor *const *in, const er_shape_vals *tab,
                        er_shape_vals *y) {
  int64_t axis = er__node_attr_int(node, "axis", 0);
  if (axis != 0 && axis != -1) return false;
  y->n = 0;
  y->known = 0;
  for (int k = 0; k < node->n_inputs; k++) {
    er_shape_vals p;
    if (!input_vals(node, in, tab, k, &p)) {
      /* An input with unknown values but a known length keeps the others. */
      if (node->inputs[k] < 0 || !in[k] || in[k]->rank != 1 || in[k]->dims[0] < 0) return false;
      p.n = (int8_t)(in[k]->dims[0] <= ER_MAX_RANK ? in[k]->dims[0] : ER_MAX_RANK + 1);
      p.known = 0;
      memset(p.v, 0, sizeof p.v);
    }
    if (y->n + p.n > ER_MAX_RANK) return false;
    for (int i = 0; i < p.n; i++) {
      y->v[y->n + i] = p.v[i];
      if (p.known & (1u << i)) y->known |= 1u << (y->n + i);
    }
    y->n = (int8_t)(y->n + p.n);
  }
  return true;
}

/* Add, Sub, Mul of integer vectors, equal lengths or one of length 1. */
static bool arith_vals(const er_node *node, const er_tensor *const *in, const er_shape_vals *tab,
                       er_shape_vals *y) {
  er_shape_vals a, b;
  if (!input_vals(node, in, tab, 0, &a) || !input_vals(node, in, tab, 1, &b)) return false;
  if (a.n != b.n && a.n != 1 && b.n != 1) return false;
  y->n = a.n > b.n ? a.n : b.n;
  y->known = 0;
  for (int i = 0; i < y->n; i++) {
    int ia = a.n == 1 ? 0 : i, ib = b.n == 1 ? 0 : i;
    if (!(a.known & (1u << ia)) || !(b.known & (1u << ib))) continue;
    int64_t r, p = a.v[ia], q = b.v[ib];
    bool ok;
    if (er__rw_is(node, "Add")) ok = !__builtin_add_overflow(p, q, &r);
    else if (er__rw_is(node, "Sub")) ok = !__builtin_sub_overflow(p, q, &r);
    else ok = !__builtin_mul_overflow(p, q, &r);
    if (!ok) continue;
    y->v[i] = r;
    y->known |= 1u << i;
  }
  return true;
}

void er__shape_vals_propagate(const er_node *node, const er_tensor *const *in, const er_tensor *out0,
                              er_shape_vals *tab) {
  if (node->domain[0] != '\0' || node->n_outputs < 1 || node->outputs[0] < 0 || !out0) return;
  er_shape_vals *y = &tab[node->outputs[0]];
  er_shape_vals x, r;
  r.n = -1;
  r.known = 0;
  /* Only small integer (or float, after a Cast) vectors of a known length. */
  int64_t count = er__tensor_count(out0);
  if (out0->rank > 1 || count < 0 || count > ER_MAX_RANK) return;
  if (er__rw_is(node, "Shape")) {
    const er_tensor *t = in[0];
    if (!t || t->rank < 0) return;
    int64_t s = er__node_attr_int(node, "start", 0), e = er__node_attr_int(node, "end", t->rank);
    if (s < 0) s += t->rank;
    if (e < 0) e += t->rank;
    s = clamp64(s, 0, t->rank);
    e = clamp64(e, 0, t->rank);
    r.n = 0;
    for (int64_t d = s; d < e; d++, r.n++) {
      r.v[r.n] = t->dims[d];
      if (t->dims[d] >= 0) r.known |= 1u << r.n;
    }
  } else if (er__rw_is(node, "Identity") || er__rw_is(node, "Squeeze") || er__rw_is(node, "Unsqueeze") ||
             er__rw_is(node, "Reshape") || er__rw_is(node, "Cast")) {
    /* Same entries in the same order. A Cast keeps them when its target
     * holds the values exactly. */
    if (er__rw_is(node, "Cast") && out0->dtype != ER_DTYPE_INT64 && out0->dtype != ER_DTYPE_INT32 &&
        out0->dtype != ER_DTYPE_FLOAT && out0->dtype != ER_DTYPE_DOUBLE)
      return;
    if (!input_vals(node, in, tab, 0, &x)) return;
    r = x;
    if (out0->dtype == ER_DTYPE_INT32 || out0->dtype == ER_DTYPE_FLOAT)
      for (int i = 0; i < r.n; i++)
        if (r.v[i] > (1 << 24) || r.v[i] < -(1 << 24)) r.known &= ~(1u << i);
  } else if (er__rw_is(node, "Slice")) {
    if (!input_vals(node, in, tab, 0, &x) || !slice_vals(node, in, &x, &r)) return;
  } else if (er__rw_is(node, "Gather")) {
    if (!input_vals(node, in, tab, 0, &x) || !gather_vals(node, in, &x, &r)) return;
  } else if (er__rw_is(node, "Concat")) {
    if (!concat_vals(node, in, tab, &r)) return;
  } else if (er__rw_is(node, "Add") || er__rw_is(node, "Sub") || er__rw_is(node, "Mul")) {
    if (!int_vector_type(out0->dtype) || !arith_vals(node, in, tab, &r)) return;
  } else {
    return;
  }
  if (r.n != count || r.known == 0) return;
  *y = r;
}

/* Output dim d from a partly known requested size: set only where the op's
 * own check left it unknown. */
static void set_dim(er_tensor *out, int d, int64_t v) {
  if (d >= 0 && d < out->rank && out->dims[d] < 0 && v >= 0) out->dims[d] = v;
}

void er__shape_vals_refine(const er_node *node, const er_tensor *const *in, const er_shape_vals *tab,
                           er_tensor *out) {
  er_shape_vals s;
  if (node->domain[0] != '\0' || !out || out->rank < 0) return;
  if (er__rw_is(node, "Reshape")) {
    if (!input_vals(node, in, tab, 1, &s) || s.n != out->rank) return;
    bool allowzero = er__node_attr_int(node, "allowzero", 0) != 0;
    const er_tensor *x = in[0];
    for (int d = 0; d < s.n; d++) {
      if (!(s.known & (1u << d))) continue;
      if (s.v[d] > 0 || (s.v[d] == 0 && allowzero)) set_dim(out, d, s.v[d]);
      else if (s.v[d] == 0 && x && d < x->rank) set_dim(out, d, x->dims[d]);
    }
  } else if (er__rw_is(node, "Resize") && node->version >= 11) {
    const er_attr *pol = er__node_attr(node, "keep_aspect_ratio_policy");
    if (pol && pol->type == ER_ATTR_STRING && strcmp(pol->s, "stretch") != 0) return;
    if (!input_vals(node, in, tab, 3, &s)) return;
    const er_attr *axes = er__node_attr(node, "axes");
    if (axes) {
      if (axes->type != ER_ATTR_INTS || axes->n != s.n) return;
      for (int k = 0; k < s.n; k++) {
        int64_t a = axes->ints[k] < 0 ? axes->ints[k] + out->rank : axes->ints[k];
        if (s.known & (1u << k)) set_dim(out, (int)a, s.v[k]);
      }
    } else if (s.n == out->rank) {
      for (int d = 0; d < s.n; d++)
        if (s.known & (1u << d)) set_dim(out, d, s.v[d]);
    }
  } else if (er__rw_is(node, "ConstantOfShape")) {
    if (!input_vals(node, in, tab, 0, &s) || s.n != out->rank) return;
    for (int d = 0; d < s.n; d++)
      if (s.known & (1u << d)) set_dim(out, d, s.v[d]);
  } else if (er__rw_is(node, "Expand")) {
    /* Broadcast of the input's shape with the requested one: a requested 1
     * keeps the input's dim, any other value is the dim. */
    const er_tensor *x = in[0];
    if (!x || x->rank < 0 || !input_vals(node, in, tab, 1, &s) || out->rank != (x->rank > s.n ? x->rank : s.n))
      return;
    for (int d = 0; d < s.n; d++) {
      if (!(s.known & (1u << d))) continue;
      int od = out->rank - s.n + d, xd = od - (out->rank - x->rank);
      if (s.v[d] != 1) set_dim(out, od, s.v[d]);
      else if (xd >= 0) set_dim(out, od, x->dims[xd]);
      else set_dim(out, od, 1);
    }
  }
}
