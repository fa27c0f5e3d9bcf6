/* kcases-attn.c - cases for Attention (opset 23): 4-D and 3-D inputs,
 * query lengths below, at and above the kernel's row block (64 rows, or
 * 56 / 60 rounded to the AVX-512 / AVX2 tile heights), key lengths other
 * than the query length, a key length long enough that the block shrinks
 * (the score tile is bounded), head sizes other than the value head size,
 * grouped KV heads, float masks broadcast from [S, T], [B, 1, S, T] and
 * [1, H, 1, T], a bool mask, rows whose every key is masked, is_causal,
 * the default scale; shapes unknown at compile time; and near misses the
 * kernel leaves to the reference (softcap, a KV cache, the qk output, a
 * mask shorter than the keys). */
#include <math.h>

#include "kcases.h"

/* Two float32 GEMMs around a float32 softmax against the reference's
 * double sums (which also rounds Q and K scaled by sqrt(scale) each, where
 * the kernel scales Q once): as for GEMM, a normalized bound. */
static const tolerance TOL_ATTN = {TOL_NORM, 1e-5, 1e-6, 1e-10};

typedef enum mask_kind {
  MASK_NONE,
  MASK_ST,        /* float [S, T] */
  MASK_B1ST,      /* float [B, 1, S, T] */
  MASK_1H1T,      /* float [1, H, 1, T] */
  MASK_BOOL,      /* bool [S, T] */
  MASK_ROWS_OFF,  /* float [B, 1, S, T] with two query rows fully -inf */
} mask_kind;

typedef struct attn_spec {
  int64_t b, hq, hkv, s, t, d, dv;
  bool is3d;
  mask_kind mask;
  bool causal, default_scale;
} attn_spec;

static const attn_spec specs[] = {
    /* b hq hkv  s    t   d  dv  3d    mask        causal default scale */
    {1, 2, 2, 13, 13, 8, 8, false, MASK_NONE, false, false},     /* below one GEMM tile */
    {2, 3, 3, 56, 40, 16, 24, false, MASK_ST, false, false},    /* the AVX-512 block, S != T, D != Dv */
    {1, 2, 2, 60, 33, 12, 5, true, MASK_NONE, false, true},     /* the AVX2 block, 3-D */
    {1, 2, 2, 64, 64, 32, 32, false, MASK_B1ST, false, false},  /* 64 rows */
    {2, 2, 2, 65, 70, 8, 16, true, MASK_B1ST, false, false},    /* just above 64 */
    {1, 4, 2, 130, 17, 16, 16, false, MASK_1H1T, false, false}, /* grouped heads, three blocks */
    {1, 6, 2, 37, 29, 8, 12, true, MASK_ST, false, false},      /* grouped heads, 3-D */
    {2, 2, 2, 20, 31, 8, 8, false, MASK_BOOL, false, false},
    {1, 2, 1, 70, 70, 16, 16, true, MASK_NONE, true, false},    /* causal, 3-D, one KV head */
    {1, 2, 2, 9, 23, 8, 8, false, MASK_NONE, true, false},      /* causal with S < T */
    {2, 2, 2, 18, 18, 8, 8, false, MASK_ROWS_OFF, false, false},
    {1, 1, 1, 30, 5000, 4, 4, false, MASK_ST, false, false},    /* long keys: 13-row blocks */
};

static void add_attention(kcase *c, const attn_spec *s) {
  if (s->is3d) {
    kc_input(c, 3, DIMS(s->b, s->s, s->hq * s->d), -1, 1, false);
    kc_input(c, 3, DIMS(s->b, s->t, s->hkv * s->d), -1, 1, false);
    kc_input(c, 3, DIMS(s->b, s->t, s->hkv * s->dv), -1, 1, false);
    kc_attr_int(c, "q_num_heads", s->hq);
    kc_attr_int(c, "kv_num_heads", s->hkv);
  } else {
    kc_input(c, 4, DIMS(s->b, s->hq, s->s, s->d), -1, 1, false);
    kc_input(c, 4, DIMS(s->b, s->hkv, s->t, s->d), -1, 1, false);
    kc_input(c, 4, DIMS(s->b, s->hkv, s->t, s->dv), -1, 1, false);
  }
  er_tensor *m = NULL;
  switch (s->mask) {
    case MASK_NONE: break;
    case MASK_ST: m = kc_input(c, 2, DIMS(s->s, s->t), -2, 0.5f, false); break;
    case MASK_B1ST:
    case MASK_ROWS_OFF: m = kc_input(c, 4, DIMS(s->b, 1, s->s, s->t), -2, 0.5f, false); break;
    case MASK_1H1T: m = kc_input(c, 4, DIMS(1, s->hq, 1, s->t), -2, 0.5f, false); break;
    case MASK_BOOL: {
      /* A float draw turned into bytes in place (byte i lies in float i/4,
       * already read); about a quarter of the keys masked. */
      m = kc_input(c, 2, DIMS(s->s, s->t), 0, 1, false);
      int64_t n = er__tensor_count(m);
      const float *f = m->data;
      uint8_t *u = m->data;
      for (int64_t i = 0; i < n; i++) u[i] = f[i] >= 0.25f;
      m->dtype = ER_DTYPE_BOOL;
      m->nbytes = (size_t)n;
      break;
    }
  }
  if (m) {
    /* Some masked keys (-inf) in every float mask. */
    float *f = m->dtype == ER_DTYPE_FLOAT ? m->data : NULL;
    int64_t n = er__tensor_count(m);
    for (int64_t i = 0; f && i < n; i += 7) f[i] = -INFINITY;
    if (s->mask == MASK_ROWS_OFF) {
      for (int64_t j = 0; j < s->t; j++) {
        f[3 * s->t + j] = -INFINITY;                                 /* batch 0, row 3 */
        f[((s->b - 1) * s->s + s->s - 1) * s->t + j] = -INFINITY; /* last batch, last row */
      }
    }
  }
  if (s->causal) kc_attr_int(c, "is_causal", 1);
  if (!s->default_scale) kc_attr_float(c, "scale", 0.3f);
  c->tol = TOL_ATTN;
}

static const char *const mask_names[] = {"", " mask [S,T]", " mask [B,1,S,T]", " mask [1,H,1,T]",
                                         " bool mask [S,T]", " mask with fully masked rows"};

static void begin(kcase *c, const attn_spec *s, const char *extra) {
  kc_begin(c, "Attention", "", 23, "Attention %s b %lld hq %lld hkv %lld s %lld t %lld d %lld dv %lld%s%s%s%s",
           s->is3d ? "3-D" : "4-D", (long long)s->b, (long long)s->hq, (long long)s->hkv, (long long)s->s,
           (long long)s->t, (long long)s->d, (long long)s->dv, mask_names[s->mask], s->causal ? " causal" : "",
           s->default_scale ? " default scale" : "", extra);
}

static void gen_attention(case_fn fn, void *arg) {
  kcase c;
  for (size_t i = 0; i < ER_ARRAY_LEN(specs); i++) {
    begin(&c, &specs[i], "");
    add_attention(&c, &specs[i]);
    fn(&c, arg);
  }
  /* Shapes known only at run time (the scratch is then allocated per run). */
  for (size_t i = 1; i < 3; i++) {
    begin(&c, &specs[i], " dynamic");
    add_attention(&c, &specs[i]);
    c.dynamic = true;
    fn(&c, arg);
  }
  /* The transformer_s128 benchmark model's layer (measurement aid). */
  if (kc_timing) {
    static const attn_spec big = {1, 4, 4, 128, 128, 64, 64, true, MASK_NONE, false, false};
    begin(&c, &big, "");
    add_attention(&c, &big);
    fn(&c, arg);
  }
  /* Near misses: the reference runs them (reported as outside). */
  const attn_spec *s = &specs[1];
  begin(&c, s, " softcap");
  add_attention(&c, s);
  kc_attr_float(&c, "softcap", 2.0f);
  fn(&c, arg);
  begin(&c, s, " with the qk output");
  add_attention(&c, s);
  c.n_out = 4;
  fn(&c, arg);
  begin(&c, s, " with a KV cache");
  add_attention(&c, s);
  kc_input(&c, 4, DIMS(s->b, s->hkv, 3, s->d), -1, 1, false);
  kc_input(&c, 4, DIMS(s->b, s->hkv, 3, s->dv), -1, 1, false);
  fn(&c, arg);
  /* A mask shorter than the keys: the rest count as masked. */
  attn_spec shorter = specs[0];
  shorter.mask = MASK_NONE;
  begin(&c, &shorter, " mask shorter than the keys");
  add_attention(&c, &shorter);
  kc_input(&c, 2, DIMS(shorter.s, shorter.t - 3), -1, 0, false);
  fn(&c, arg);
  /* The same with shapes unknown at compile time: the kernel takes the
   * node and must hand this run to the reference. */
  begin(&c, &shorter, " mask shorter than the keys, dynamic");
  add_attention(&c, &shorter);
  kc_input(&c, 2, DIMS(shorter.s, shorter.t - 3), -1, 0, false);
  c.dynamic = true;
  fn(&c, arg);
}

const case_gen kcases_attn[] = {
    {"Attention", "", gen_attention},
    {NULL, NULL, NULL},
};
