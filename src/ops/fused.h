/* fused.h - edgerun's own fused operators (domain "com.edgerun"), made by
 * the graph passes (src/graph/passes-*.c) from patterns of standard
 * ops, and the activation functions they carry.
 *
 *   FusedConv(X, W, B?, Z?)    = act(Conv(X, W, B) + Z)
 *     Conv's attributes, plus `activation` and `activation_params`.
 *   FusedGemm(A, B, C?)        = act(Gemm(A, B, C))
 *     Gemm's attributes, plus the activation ones.
 *   FusedMatMul(A, B, bias?)   = act(MatMul(A, B) + bias)
 *     bias is 1-D of B's last dim (broadcast over rows).
 *
 * `activation` is one of the names below (default "" = identity);
 * `activation_params` holds its parameters in the order listed. These ops
 * are internal: models never name them, passes create them, and every one
 * has a reference kernel built from the standard ops' reference kernels. */
#ifndef ER_FUSED_H
#define ER_FUSED_H

#include <math.h>

#include "ops/op.h"

#define ER_FUSED_DOMAIN "com.edgerun"

typedef enum er_act {
  ER_ACT_NONE = 0,
  ER_ACT_RELU,          /* max(x, 0) */
  ER_ACT_CLIP,          /* min(max(x, p0), p1) */
  ER_ACT_SIGMOID,       /* 1 / (1 + exp(-x)) */
  ER_ACT_TANH,
  ER_ACT_HARDSIGMOID,   /* max(0, min(1, p0 * x + p1)) */
  ER_ACT_HARDSWISH,     /* x * max(0, min(1, x / 6 + 1/2)) */
  ER_ACT_LEAKYRELU,     /* x >= 0 ? x : p0 * x */
  ER_ACT_SILU,          /* x * sigmoid(x) */
  ER_ACT_GELU,          /* 0.5 x (1 + erf(x / sqrt 2)) */
  ER_ACT_GELU_TANH,     /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  ER_ACT_COUNT_,
} er_act;

typedef struct er_activation {
  er_act kind;
  float p[2];
} er_activation;

/* Name used in the `activation` attribute; "" for NONE. */
const char *er__act_name(er_act kind);
/* Parses a node's activation attributes; INVALID_ATTRIBUTE on unknown names
 * or a wrong parameter count. */
er_status er__act_from_node(const er_kctx *ctx, er_activation *out);

/* The activation of one value, computed in double (the reference). */
static inline double er__act_apply(const er_activation *a, double x) {
  switch (a->kind) {
    case ER_ACT_NONE: return x;
    case ER_ACT_RELU: return x > 0 ? x : (x == x ? 0.0 : x);
    case ER_ACT_CLIP: return x < a->p[0] ? a->p[0] : x > a->p[1] ? a->p[1] : x;
    case ER_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ER_ACT_TANH: return tanh(x);
    case ER_ACT_HARDSIGMOID: {
      double v = a->p[0] * x + a->p[1];
      return v < 0 ? 0 : v > 1 ? 1 : v;
    }
    case ER_ACT_HARDSWISH: {
      double v = x / 6.0 + 0.5;
      return x * (v < 0 ? 0 : v > 1 ? 1 : v);
    }
    case ER_ACT_LEAKYRELU: return x >= 0 ? x : a->p[0] * x;
    case ER_ACT_SILU: return x / (1.0 + exp(-x));
    case ER_ACT_GELU: return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
    case ER_ACT_GELU_TANH:
      return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    default: return x;
  }
}

#endif /* ER_FUSED_H */
