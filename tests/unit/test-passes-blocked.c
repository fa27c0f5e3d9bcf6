/* test-passes-blocked.c - the channel-blocked layout pass
 * (passes-blocked.c) on graphs it converts and on near misses it must
 * leave planar, with outputs compared against the model loaded as written. */
#include "test-passes.h"

/* ---- the channel-blocked layout (passes-blocked.c) ------------------------------ */

/* Ops of type `op` in a session with EDGERUN_LAYOUT = layout. */
static int count_in_layout(const er_model *m, const char *layout, const char *op) {
  setenv("EDGERUN_LAYOUT", layout, 1);
  int n = tp_count_op(m, op);
  unsetenv("EDGERUN_LAYOUT");
  return n;
}

/* Every graph output of a run in each layout, and of the model as
 * written, agree within rtol 1e-4 / atol 1e-5. */
static void same_in_layouts(er_model *opt, er_model *plain, int rank, const int64_t *dims) {
  const char *layouts[2] = {"blocked", "planar"};
  size_t n_out = er_model_output_count(opt);
  er_tensor *x;
  er_tensor_create(ER_DTYPE_FLOAT, rank, dims, &x);
  float *xv = er_tensor_data(x);
  for (int64_t i = 0; i < er_tensor_count(x); i++) xv[i] = tp_frand() * 2;
  er_named_tensor in = {"x", x};
  er_tensor *want[8] = {0}, *got[2][8] = {{0}};
  CHECK(n_out <= 8);
  er_session *sp = NULL;
  CHECK_STATUS(er_session_create(plain, NULL, &sp), ER_STATUS_OK);
  CHECK_STATUS(er_session_run(sp, &in, 1, NULL, n_out, want), ER_STATUS_OK);
  er_session_free(sp);
  for (int l = 0; l < 2; l++) {
    setenv("EDGERUN_LAYOUT", layouts[l], 1);
    er_session *s = NULL;
    CHECK_STATUS(er_session_create(opt, NULL, &s), ER_STATUS_OK);
    unsetenv("EDGERUN_LAYOUT");
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, n_out, got[l]), ER_STATUS_OK);
    er_session_free(s);
    for (size_t k = 0; k < n_out; k++) {
      if (!got[l][k] || !want[k]) continue;
      CHECK(er_tensor_rank(got[l][k]) == er_tensor_rank(want[k]) &&
            er_tensor_count(got[l][k]) == er_tensor_count(want[k]));
      const float *a = er_tensor_cdata(got[l][k]), *b = er_tensor_cdata(want[k]);
      int bad = 0;
      for (int64_t i = 0; i < er_tensor_count(want[k]); i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-5f + 1e-4f * fabsf(b[i]))) bad++;
      if (bad) fprintf(stderr, "  %s layout, output %zu: %d elements differ\n", layouts[l], k, bad);
      CHECK(bad == 0);
    }
  }
  for (size_t k = 0; k < n_out; k++) {
    er_tensor_free(want[k]);
    er_tensor_free(got[0][k]);
    er_tensor_free(got[1][k]);
  }
  er_tensor_free(x);
}

/* A small MobileNet-style network with every kind of node the layout
 * takes: a dense stem reading the planar input, a depthwise layer with a
 * fused HardSwish, a squeeze-excite block (global pool, two 1x1 convs,
 * Sigmoid, a broadcasting Mul), 24 channels (not whole blocks of 16), a
 * 5x5 layer with a residual (a 3x3 one would stay planar for Winograd), a
 * Div by a constant, max pools, a Concat over channels and a
 * last 1x1 conv; and what must come back planar: the graph output y, the
 * intermediate h1 that is also a graph output, and c2 read by a
 * Transpose. */
static void blocked_net(er_pbw *m) {
  er_pbw g = {0};
  tp_add_weight(&g, "W1", 4, (const int64_t[]){32, 8, 3, 3}, 0.3f, 0);
  tp_add_weight(&g, "B1", 1, (const int64_t[]){32}, 0.1f, 0);
  tp_add_weight(&g, "Wd", 4, (const int64_t[]){32, 1, 3, 3}, 0.5f, 0);
  tp_add_weight(&g, "Ws1", 4, (const int64_t[]){8, 32, 1, 1}, 0.3f, 0);
  tp_add_weight(&g, "Ws2", 4, (const int64_t[]){32, 8, 1, 1}, 0.3f, 0);
  tp_add_weight(&g, "W2", 4, (const int64_t[]){24, 32, 1, 1}, 0.3f, 0);
  tp_add_weight(&g, "B2", 1, (const int64_t[]){24}, 0.1f, 0);
  tp_add_weight(&g, "W3", 4, (const int64_t[]){24, 24, 5, 5}, 0.1f, 0);
  tp_add_weight(&g, "Wb", 4, (const int64_t[]){32, 32, 1, 1}, 0.3f, 0);
  tp_add_weight(&g, "Wy", 4, (const int64_t[]){16, 56, 1, 1}, 0.2f, 0);
  tp_add_scalar(&g, "six", 6.0f);
  er_pbw p1 = {0}, p2 = {0}, gr = {0}, pool = {0}, cat = {0}, perm = {0};
  tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_ints(&gr, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_attr_int(&gr, "group", 32);
  tb_attr_ints(&pool, "kernel_shape", (const int64_t[]){2, 2}, 2);
  tb_attr_ints(&pool, "strides", (const int64_t[]){2, 2}, 2);
  tb_attr_int(&cat, "axis", 1);
  tb_attr_ints(&perm, "perm", (const int64_t[]){0, 2, 3, 1}, 4);
  tb_node(&g, "Conv", "c1", IN("x", "W1", "B1"), OUT("c1"), &p1);
  tb_node(&g, "Relu", "r1", IN("c1"), OUT("r1"), NULL);
  tb_node(&g, "Conv", "d1", IN("r1", "Wd"), OUT("d1"), &gr);
  tb_node(&g, "HardSwish", "h1", IN("d1"), OUT("h1"), NULL);
  tb_node(&g, "GlobalAveragePool", "gap", IN("h1"), OUT("p"), NULL);
  tb_node(&g, "Conv", "s1", IN("p", "Ws1"), OUT("s1"), NULL);
  tb_node(&g, "Relu", "s1r", IN("s1"), OUT("s1r"), NULL);
  tb_node(&g, "Conv", "s2", IN("s1r", "Ws2"), OUT("s2"), NULL);
  tb_node(&g, "Sigmoid", "sg", IN("s2"), OUT("sg"), NULL);
  tb_node(&g, "Mul", "se", IN("h1", "sg"), OUT("se"), NULL);
  tb_node(&g, "Conv", "c2", IN("se", "W2", "B2"), OUT("c2"), NULL);
  tb_node(&g, "Conv", "c3", IN("c2", "W3"), OUT("c3"), &p2);
  tb_node(&g, "Add", "res", IN("c3", "c2"), OUT("a"), NULL);
  tb_node(&g, "Div", "div", IN("a", "six"), OUT("q"), NULL);
  tb_node(&g, "MaxPool", "mp", IN("q"), OUT("mp"), &pool);
  tb_node(&g, "Conv", "br", IN("se", "Wb"), OUT("br"), NULL);
  tb_node(&g, "MaxPool", "bp", IN("br"), OUT("bp"), &pool);
  tb_node(&g, "Concat", "cat", IN("bp", "mp"), OUT("cat"), &cat);
  tb_node(&g, "Conv", "cy", IN("cat", "Wy"), OUT("y"), NULL);
  tb_node(&g, "Transpose", "t", IN("c2"), OUT("t"), &perm);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 14, 14});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_graph_output(&g, "h1", 1, -1, NULL);
  tb_graph_output(&g, "t", 1, -1, NULL);
  tb_model(m, 8, 14, &g);
  er__pbw_free(&g);
  er__pbw_free(&p1);
  er__pbw_free(&p2);
  er__pbw_free(&gr);
  er__pbw_free(&pool);
  er__pbw_free(&cat);
  er__pbw_free(&perm);
}

void tp_test_blocked_layout(void) {
  if (er__cpu_layout_block() == 0) {
    printf("  (this CPU has no blocked kernels: the layout stays planar)\n");
    return;
  }
  er_pbw m = {0};
  blocked_net(&m);
  er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
  /* Eight convolutions and three pools blocked; y, h1 and c2 come back
   * planar once each; nothing is converted in. */
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 8);
  CHECK(count_in_layout(opt, "blocked", "BlockedPool") == 3);
  CHECK(count_in_layout(opt, "blocked", "FromBlocked") == 3);
  CHECK(count_in_layout(opt, "blocked", "ToBlocked") == 0);
  CHECK(count_in_layout(opt, "planar", "BlockedConv") == 0);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 14, 14});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&m);
}

/* Near misses: an Add of a per-channel tensor made at run time (a
 * ReduceMean, which stays planar; a constant one would be folded into
 * the bias at tp_load), a Div by a tensor and a Concat whose first input is
 * not whole blocks (20 channels) take planar inputs; the convolutions
 * around them stay blocked and the results agree. */
void tp_test_blocked_near_misses(void) {
  if (er__cpu_layout_block() == 0) return;
  er_pbw g = {0}, m = {0}, p2 = {0}, cat = {0}, rm = {0};
  tp_add_weight(&g, "W1", 4, (const int64_t[]){32, 16, 5, 5}, 0.1f, 0);
  tp_add_weight(&g, "W2", 4, (const int64_t[]){20, 32, 5, 5}, 0.1f, 0);
  tp_add_weight(&g, "W3", 4, (const int64_t[]){16, 32, 5, 5}, 0.1f, 0);
  tp_add_weight(&g, "D", 4, (const int64_t[]){1, 16, 1, 1}, 0.2f, 2);
  tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_int(&cat, "axis", 1);
  tb_attr_ints(&rm, "axes", (const int64_t[]){2, 3}, 2);
  tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p2);
  tb_node(&g, "ReduceMean", "rm", IN("c1"), OUT("r"), &rm);
  tb_node(&g, "Add", "k", IN("c1", "r"), OUT("k"), NULL);
  tb_node(&g, "Conv", "c2", IN("k", "W2"), OUT("c2"), &p2);
  tb_node(&g, "Conv", "c3", IN("k", "W3"), OUT("c3"), &p2);
  tb_node(&g, "Div", "dv", IN("c3", "D"), OUT("dv"), NULL);
  tb_node(&g, "Concat", "cat", IN("c2", "dv"), OUT("y"), &cat);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 12, 12});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 3);
  CHECK(count_in_layout(opt, "blocked", "Add") == 1 && count_in_layout(opt, "blocked", "Div") == 1);
  /* c1 once for the ReduceMean and the Add, c2 for the Concat, c3 for
   * the Div. */
  CHECK(count_in_layout(opt, "blocked", "FromBlocked") == 3);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 12, 12});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p2);
  er__pbw_free(&cat);
  er__pbw_free(&rm);
}

/* DenseNet's pre-activation: Conv -> Concat -> BatchNormalization ->
 * Relu -> Conv. The BN of the blocked Concat stays blocked (one
 * BlockedBatchNormalization carrying the ReLU, no conversion); the near
 * miss, whose scale
 * is a graph input, is a planar BatchNormalization between a FromBlocked
 * and a ToBlocked. The results agree with the graph as written. */
void tp_test_blocked_batchnorm(void) {
  if (er__cpu_layout_block() == 0) return;
  for (int near = 0; near < 2; near++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, cat = {0};
    tp_add_weight(&g, "W1", 4, (const int64_t[]){16, 8, 3, 3}, 0.2f, 0);
    tp_add_weight(&g, "W2", 4, (const int64_t[]){12, 24, 1, 1}, 0.2f, 0);
    if (!near) tp_add_weight(&g, "scale", 1, (const int64_t[]){24}, 0.5f, 1.0f);
    tp_add_weight(&g, "bias", 1, (const int64_t[]){24}, 0.3f, 0);
    tp_add_weight(&g, "mean", 1, (const int64_t[]){24}, 0.3f, 0);
    tp_add_weight(&g, "var", 1, (const int64_t[]){24}, 0.2f, 1.0f);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_int(&cat, "axis", 1);
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p1);
    tb_node(&g, "Concat", "cat", IN("c1", "x"), OUT("cat"), &cat);
    tb_node(&g, "BatchNormalization", "bn", IN("cat", "scale", "bias", "mean", "var"), OUT("bn"), NULL);
    tb_node(&g, "Relu", "r", IN("bn"), OUT("r"), NULL);
    tb_node(&g, "Conv", "c2", IN("r", "W2"), OUT("y"), NULL);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 9, 11});
    if (near) tb_graph_input(&g, "scale", 1, 1, (const int64_t[]){24});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 15, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    if (opt && plain) {
      CHECK(count_in_layout(opt, "blocked", "BlockedBatchNormalization") == (near ? 0 : 1));
      CHECK(count_in_layout(opt, "blocked", "BatchNormalization") == (near ? 1 : 0));
      /* The ReLU goes into the blocked BN. */
      CHECK(count_in_layout(opt, "blocked", "Relu") == (near ? 1 : 0));
      /* One conversion back: the output y, or for the near miss the
       * BN's input (c2 then stays planar, a lone layer not worth two
       * conversions). */
      CHECK(count_in_layout(opt, "blocked", "FromBlocked") == 1);
      if (!near) same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 9, 11});
    }
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&cat);
  }
}

/* Convolutions in groups of whole blocks (ShuffleNet's grouped 1x1
 * layers) go blocked after a dense one, with a blocked input, and so does
 * one in narrow groups (two channels in, two out: whole groups in every
 * block); a near miss whose groups take two channels and make one stays
 * planar, and the results agree. */
void tp_test_blocked_groups(void) {
  if (er__cpu_layout_block() == 0) return;
  er_pbw g = {0}, m = {0}, p1 = {0}, g4 = {0}, g2 = {0}, g16 = {0};
  tp_add_weight(&g, "W1", 4, (const int64_t[]){64, 16, 3, 3}, 0.1f, 0);
  tp_add_weight(&g, "G1", 4, (const int64_t[]){64, 16, 1, 1}, 0.2f, 0);
  tp_add_weight(&g, "G2", 4, (const int64_t[]){32, 32, 3, 3}, 0.1f, 0);
  tp_add_weight(&g, "G3", 4, (const int64_t[]){32, 2, 1, 1}, 0.5f, 0);
  tp_add_weight(&g, "G4", 4, (const int64_t[]){16, 2, 1, 1}, 0.5f, 0);
  tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_attr_int(&g4, "group", 4);
  tb_attr_int(&g2, "group", 2);
  tb_attr_ints(&g2, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_attr_int(&g16, "group", 16);
  tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p1);
  tb_node(&g, "Conv", "g1", IN("c1", "G1"), OUT("g1"), &g4);
  tb_node(&g, "Relu", "r", IN("g1"), OUT("r"), NULL);
  tb_node(&g, "Conv", "g2", IN("r", "G2"), OUT("g2"), &g2);
  tb_node(&g, "Conv", "g3", IN("g2", "G3"), OUT("g3"), &g16);
  tb_node(&g, "Conv", "g4", IN("g3", "G4"), OUT("y"), &g16);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 9, 11});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 4);
  CHECK(count_in_layout(opt, "blocked", "ToBlocked") == 0 && count_in_layout(opt, "blocked", "FromBlocked") == 1);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 9, 11});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p1);
  er__pbw_free(&g4);
  er__pbw_free(&g2);
  er__pbw_free(&g16);
}

/* Blocked convolutions among c x c channels on an h x w map (-2 and -3
 * for sizes known only at run time): a 3x3 layer between two 1x1 layers. */
static int blocked_convs_of_chain(int64_t c, int64_t h, int64_t w) {
  er_pbw g = {0}, m = {0}, p1 = {0};
  tp_add_weight(&g, "A", 4, (const int64_t[]){c, c, 1, 1}, 0.2f, 0);
  tp_add_weight(&g, "W", 4, (const int64_t[]){c, c, 3, 3}, 0.1f, 0);
  tp_add_weight(&g, "B", 4, (const int64_t[]){c, c, 1, 1}, 0.2f, 0);
  tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_node(&g, "Conv", "a", IN("x", "A"), OUT("a"), NULL);
  tb_node(&g, "Relu", "r", IN("a"), OUT("r"), NULL);
  tb_node(&g, "Conv", "w", IN("r", "W"), OUT("w"), &p1);
  tb_node(&g, "Conv", "b", IN("w", "B"), OUT("y"), NULL);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, c, h, w});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = tp_load(&m, 2);
  int n = count_in_layout(opt, "blocked", "BlockedConv");
  if (h > 0 && h * w <= 56 * 56) {
    er_model *plain = tp_load(&m, -1);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, c, h, w});
    er_model_free(plain);
  }
  er_model_free(opt);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p1);
  return n;
}

/* With AVX-512, 3x3 layers with C * M / (C + M) from 12 to 32 go to
 * planar Winograd on maps of 56 x 56 and more: all of them where AVX-512
 * runs as two 256-bit halves (Zen 4), those whose channel counts are not
 * both multiples of 32 elsewhere. On smaller maps, on sizes known only at
 * run time and without AVX-512 they stay blocked. 64 channels (32) take
 * Winograd from 14 x 14 on every CPU with a Winograd kernel. */
void tp_test_winograd_choice(void) {
  if (er__cpu_layout_block() == 0) return;
  const er_cpu_features *f = er__cpu_features();
  const bool avx512 = er__cpu_layout_block() == 16;
  CHECK(blocked_convs_of_chain(24, 56, 56) == (avx512 ? 0 : 3));
  CHECK(blocked_convs_of_chain(32, 56, 56) == (f->avx512_split ? 0 : 3));
  CHECK(blocked_convs_of_chain(24, 28, 28) == 3);
  CHECK(blocked_convs_of_chain(32, 28, 28) == 3);
  CHECK(blocked_convs_of_chain(24, -2, -3) == 3);
  if (f->avx2) CHECK(blocked_convs_of_chain(64, 28, 28) == 0);
}

/* Max and Min of two stay blocked: with a one-value constant (openWakeWord
 * clamps every LeakyRelu with Max(x, -0.4)) or of two blocked values, over
 * 24 channels (padding lanes the constant makes non-zero, which the
 * convolutions after ignore). Near misses stay planar: a Max of three
 * inputs and one with a per-channel constant. */
void tp_test_blocked_max_min(void) {
  if (er__cpu_layout_block() == 0) return;
  er_pbw g = {0}, m = {0}, p1 = {0}, p2 = {0}, lr = {0};
  tp_add_weight(&g, "W1", 4, (const int64_t[]){24, 8, 5, 5}, 0.2f, 0);
  tp_add_weight(&g, "W2", 4, (const int64_t[]){24, 24, 5, 5}, 0.1f, 0);
  tp_add_weight(&g, "W3", 4, (const int64_t[]){24, 24, 1, 1}, 0.3f, 0);
  tp_add_weight(&g, "P", 4, (const int64_t[]){1, 24, 1, 1}, 0.2f, 0);
  tp_add_scalar(&g, "neg", -0.4f);
  tp_add_scalar(&g, "half", 0.5f);
  tb_attr_ints(&p1, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_float(&lr, "alpha", 0.2f);
  tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p1);
  tb_node(&g, "LeakyRelu", "l1", IN("c1"), OUT("l1"), &lr);
  tb_node(&g, "Max", "m1", IN("l1", "neg"), OUT("m1"), NULL);
  tb_node(&g, "Conv", "c2", IN("m1", "W2"), OUT("c2"), &p2);
  tb_node(&g, "Min", "n1", IN("c2", "half"), OUT("n1"), NULL);
  tb_node(&g, "Conv", "c3", IN("n1", "W3"), OUT("c3"), NULL);
  tb_node(&g, "Max", "mx", IN("c3", "n1"), OUT("y"), NULL);
  tb_node(&g, "Max", "m3", IN("c3", "n1", "m1"), OUT("y2"), NULL);
  tb_node(&g, "Max", "mp", IN("c3", "P"), OUT("y3"), NULL);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 12, 12});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_graph_output(&g, "y2", 1, -1, NULL);
  tb_graph_output(&g, "y3", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 3);
  /* Back to planar: y (the blocked Max) and, for the near misses, m1, n1
   * and c3. */
  CHECK(count_in_layout(opt, "blocked", "FromBlocked") == 4);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 12, 12});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p1);
  er__pbw_free(&p2);
  er__pbw_free(&lr);
}

/* A channel Concat of a blocked input and a planar one (a Softplus,
 * which stays planar) stays blocked: the planar input is converted in,
 * and the 1x1 layer after it reads the blocked result. */
void tp_test_blocked_mixed_concat(void) {
  if (er__cpu_layout_block() == 0) return;
  er_pbw g = {0}, m = {0}, p2 = {0}, cat = {0};
  tp_add_weight(&g, "W1", 4, (const int64_t[]){32, 16, 5, 5}, 0.1f, 0);
  tp_add_weight(&g, "W2", 4, (const int64_t[]){24, 48, 1, 1}, 0.2f, 0);
  tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
  tb_attr_int(&cat, "axis", 1);
  tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p2);
  tb_node(&g, "Softplus", "sp", IN("x"), OUT("s"), NULL);
  tb_node(&g, "Concat", "cat", IN("c1", "s"), OUT("cat"), &cat);
  tb_node(&g, "Conv", "c2", IN("cat", "W2"), OUT("y"), NULL);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 10, 10});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
  CHECK(count_in_layout(opt, "blocked", "BlockedConv") == 2);
  CHECK(count_in_layout(opt, "blocked", "ToBlocked") == 1 && count_in_layout(opt, "blocked", "FromBlocked") == 1);
  same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 10, 10});
  er_model_free(opt);
  er_model_free(plain);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p2);
  er__pbw_free(&cat);
}

/* YOLOv8's C2f block: a 1x1 layer, a channel Split in halves, a
 * bottleneck (3x3 layer and residual Add) on the second half, a Concat of
 * both halves and the bottleneck, a last 1x1 layer. With the sizes as a
 * constant input (opset 13), an attribute (opset 11) or equal parts
 * (opset 18's num_outputs), the Split runs on the blocked twin and nothing
 * is converted but the output. Near misses stay planar and agree: parts of
 * 2 and 30 channels (not whole blocks), and a Split along the height. */
void tp_test_blocked_split(void) {
  if (er__cpu_layout_block() == 0) return;
  static const struct {
    int opset;
    int form;          /* 0 input, 1 attribute, 2 num_outputs */
    int64_t first;     /* channels of the first part */
    int64_t axis;
    bool blocked;
  } cases[] = {{13, 0, 16, 1, true},  {11, 1, 16, -3, true}, {18, 2, 16, 1, true},
               {13, 0, 2, 1, false},  {13, 0, 6, 2, false}};
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, cat = {0}, sp = {0}, sizes = {0};
    bool height = cases[i].axis == 2;
    int64_t half = height ? 32 : 32 - cases[i].first;   /* channels of the second part */
    int64_t split[2] = {cases[i].first, height ? 6 : half};
    tp_add_weight(&g, "W1", 4, (const int64_t[]){32, 16, 1, 1}, 0.3f, 0);
    tp_add_weight(&g, "Wm", 4, (const int64_t[]){half, half, 3, 3}, 0.1f, 0);
    tp_add_weight(&g, "Wy", 4, (const int64_t[]){16, height ? 96 : 32 + half, 1, 1}, 0.2f, 0);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_int(&cat, "axis", 1);
    tb_attr_int(&sp, "axis", cases[i].axis);
    if (cases[i].form == 0) {
      tb_tensor(&sizes, "S", 7, 1, (const int64_t[]){2}, split, sizeof split);
      tb_graph_initializer(&g, &sizes);
    } else if (cases[i].form == 1) {
      tb_attr_ints(&sp, "split", split, 2);
    } else {
      tb_attr_int(&sp, "num_outputs", 2);
    }
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), NULL);
    tb_node(&g, "Sigmoid", "s1", IN("c1"), OUT("s1"), NULL);
    if (cases[i].form == 0) tb_node(&g, "Split", "split", IN("s1", "S"), OUT("a", "b"), &sp);
    else tb_node(&g, "Split", "split", IN("s1"), OUT("a", "b"), &sp);
    if (height) {
      /* rows 6..11 of all 32 channels; the bottleneck reads both parts */
      tb_node(&g, "Conv", "m1", IN("s1", "Wm"), OUT("m1"), &p1);
      tb_node(&g, "Add", "res", IN("m1", "s1"), OUT("r"), NULL);
      er_pbw cat2 = {0};
      tb_attr_int(&cat2, "axis", 2);
      tb_node(&g, "Concat", "rows", IN("a", "b"), OUT("ab"), &cat2);
      tb_node(&g, "Concat", "cat", IN("ab", "r", "s1"), OUT("cat"), &cat);
      er__pbw_free(&cat2);
    } else {
      tb_node(&g, "Conv", "m1", IN("b", "Wm"), OUT("m1"), &p1);
      tb_node(&g, "Add", "res", IN("m1", "b"), OUT("r"), NULL);
      tb_node(&g, "Concat", "cat", IN("a", "b", "r"), OUT("cat"), &cat);
    }
    tb_node(&g, "Conv", "cy", IN("cat", "Wy"), OUT("y"), NULL);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 12, 12});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, cases[i].opset, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    /* All blocked: three blocked convolutions, no conversion in, one out
     * (y). A near miss cannot look like that. */
    int to = count_in_layout(opt, "blocked", "ToBlocked"), from = count_in_layout(opt, "blocked", "FromBlocked");
    int convs = count_in_layout(opt, "blocked", "BlockedConv");
    bool all_blocked = convs == 3 && to == 0 && from == 1;
    CHECK(all_blocked == cases[i].blocked);
    if (all_blocked != cases[i].blocked)
      fprintf(stderr, "  case %zu: %d BlockedConv, %d ToBlocked, %d FromBlocked\n", i, convs, to, from);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 12, 12});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&cat);
    er__pbw_free(&sp);
    er__pbw_free(&sizes);
  }
}

/* An FPN upsample: Conv (24 channels, not whole blocks on AVX-512),
 * Sigmoid, nearest Resize, 3x3 Conv. The Resize runs on the blocked twin
 * (BlockedResize) with scales (opset 13), sizes and an empty roi with
 * asymmetric/floor (opset 11), and Resize 10's scales; nothing is
 * converted but y. Near misses stay planar and agree: linear mode, and
 * a Resize that also doubles the channels. */
void tp_test_blocked_resize(void) {
  if (er__cpu_layout_block() == 0) return;
  static const struct {
    int opset;
    int form;          /* 0 scales, 1 roi + sizes, 2 Resize-10 scales */
    const char *mode;
    float channel_scale;
    bool blocked;
  } cases[] = {{13, 0, "nearest", 1, true}, {11, 1, "nearest", 1, true}, {10, 2, "nearest", 1, true},
               {13, 0, "linear", 1, false}, {13, 0, "nearest", 2, false}};
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, rs = {0}, t = {0};
    int64_t up = (int64_t)(24 * cases[i].channel_scale);
    tp_add_weight(&g, "W1", 4, (const int64_t[]){24, 16, 1, 1}, 0.3f, 0);
    tp_add_weight(&g, "W2", 4, (const int64_t[]){16, up, 3, 3}, 0.1f, 0);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_string(&rs, "mode", cases[i].mode);
    if (cases[i].form == 1) {
      tb_attr_string(&rs, "coordinate_transformation_mode", "asymmetric");
      tb_attr_string(&rs, "nearest_mode", "floor");
      const int64_t sizes[4] = {1, up, 12, 12};
      tb_tensor(&t, "Z", 7, 1, (const int64_t[]){4}, sizes, sizeof sizes);
      tb_graph_initializer(&g, &t);
      er__pbw_free(&t);
      tb_tensor(&t, "R", 1, 1, (const int64_t[]){0}, NULL, 0);
      tb_graph_initializer(&g, &t);
    } else {
      const float scales[4] = {1, cases[i].channel_scale, 2, 2};
      tb_tensor(&t, "S", 1, 1, (const int64_t[]){4}, scales, sizeof scales);
      tb_graph_initializer(&g, &t);
    }
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), NULL);
    tb_node(&g, "Sigmoid", "s1", IN("c1"), OUT("s1"), NULL);
    if (cases[i].form == 0) tb_node(&g, "Resize", "up", IN("s1", "", "S"), OUT("u"), &rs);
    else if (cases[i].form == 1) tb_node(&g, "Resize", "up", IN("s1", "R", "", "Z"), OUT("u"), &rs);
    else tb_node(&g, "Resize", "up", IN("s1", "S"), OUT("u"), &rs);
    tb_node(&g, "Conv", "c2", IN("u", "W2"), OUT("y"), &p1);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 16, 6, 6});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, cases[i].opset, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    int to = count_in_layout(opt, "blocked", "ToBlocked"), from = count_in_layout(opt, "blocked", "FromBlocked");
    int resized = count_in_layout(opt, "blocked", "BlockedResize");
    bool all_blocked = resized == 1 && to == 0 && from == 1;
    CHECK(all_blocked == cases[i].blocked);
    if (all_blocked != cases[i].blocked)
      fprintf(stderr, "  case %zu: %d BlockedResize, %d ToBlocked, %d FromBlocked\n", i, resized, to, from);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 16, 6, 6});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&rs);
    er__pbw_free(&t);
  }
}

/* A ConvNeXt block: a stem convolution, a 7x7 depthwise one, a Transpose
 * to channels-last rows (Softplus stands in for LayerNorm and the MLP),
 * a Transpose back and the residual Add, then a 3x3 convolution. Both
 * Transposes become conversions (FromBlocked and ToBlocked with
 * channels_last) and the Add runs blocked. Near miss: when only a planar
 * op reads the Transpose back, it stays a Transpose (a ToBlocked there
 * would need a FromBlocked after it). */
void tp_test_blocked_channels_last(void) {
  if (er__cpu_layout_block() == 0) return;
  for (int near = 0; near < 2; near++) {
    er_pbw g = {0}, m = {0}, dw = {0}, p1 = {0}, to = {0}, back = {0};
    tp_add_weight(&g, "W0", 4, (const int64_t[]){24, 8, 1, 1}, 0.3f, 0);
    tp_add_weight(&g, "Wd", 4, (const int64_t[]){24, 1, 7, 7}, 0.1f, 0);
    tp_add_weight(&g, "W2", 4, (const int64_t[]){16, 24, 3, 3}, 0.1f, 0);
    tb_attr_ints(&dw, "pads", (const int64_t[]){3, 3, 3, 3}, 4);
    tb_attr_int(&dw, "group", 24);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_ints(&to, "perm", (const int64_t[]){0, 2, 3, 1}, 4);
    tb_attr_ints(&back, "perm", (const int64_t[]){0, 3, 1, 2}, 4);
    tb_node(&g, "Conv", "stem", IN("x", "W0"), OUT("r"), NULL);
    tb_node(&g, "Conv", "dw", IN("r", "Wd"), OUT("d"), &dw);
    tb_node(&g, "Transpose", "to_nhwc", IN("d"), OUT("t"), &to);
    tb_node(&g, "Softplus", "mlp", IN("t"), OUT("s"), NULL);
    tb_node(&g, "Transpose", "to_nchw", IN("s"), OUT("b"), &back);
    if (near) {
      tb_node(&g, "Softplus", "post", IN("b"), OUT("y"), NULL);
    } else {
      tb_node(&g, "Add", "res", IN("r", "b"), OUT("a"), NULL);
      tb_node(&g, "Conv", "c2", IN("a", "W2"), OUT("y"), &p1);
    }
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 9, 11});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    int transposes = count_in_layout(opt, "blocked", "Transpose"), to_b = count_in_layout(opt, "blocked", "ToBlocked");
    int from_b = count_in_layout(opt, "blocked", "FromBlocked");
    CHECK(transposes == near && to_b == 1 - near && from_b == (near ? 1 : 2));
    if (transposes != near || to_b != 1 - near || from_b != (near ? 1 : 2))
      fprintf(stderr, "  near %d: %d Transpose, %d ToBlocked, %d FromBlocked\n", near, transposes, to_b, from_b);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 9, 11});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&dw);
    er__pbw_free(&p1);
    er__pbw_free(&to);
    er__pbw_free(&back);
  }
}

/* Nodes of the session's graph whose name holds `fragment`, with the
 * layout `layout`. */
static int count_named(const er_model *m, const char *layout, const char *fragment) {
  setenv("EDGERUN_LAYOUT", layout, 1);
  int n = tp_session_count_named(m, NULL, fragment);
  unsetenv("EDGERUN_LAYOUT");
  return n;
}

/* A YOLO head: a blocked convolution's 30 channels split into 3 anchors of
 * 10 by Reshape, then Transpose (0, 1, 3, 4, 2) puts each anchor's values
 * last. It becomes FromBlocked to channels-last, a Reshape and a row
 * Transpose (0, 3, 1, 2, 4). Near misses keep the planar form and the
 * Transpose as written: another permutation, and the Reshape's result
 * read a second time. */
void tp_test_blocked_head_split(void) {
  if (er__cpu_layout_block() == 0) return;
  for (int near = 0; near < 3; near++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, tp = {0};
    tp_add_weight(&g, "W1", 4, (const int64_t[]){16, 8, 3, 3}, 0.1f, 0);
    tp_add_weight(&g, "W2", 4, (const int64_t[]){30, 16, 1, 1}, 0.2f, 0);
    tp_add_i64(&g, "shape", 5, (const int64_t[]){1, 3, 10, 6, 7});
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_attr_ints(&tp, "perm", near == 1 ? (const int64_t[]){0, 1, 2, 4, 3} : (const int64_t[]){0, 1, 3, 4, 2}, 5);
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("a"), &p1);
    tb_node(&g, "Relu", "r1", IN("a"), OUT("b"), NULL);
    tb_node(&g, "Conv", "c2", IN("b", "W2"), OUT("c"), NULL);
    tb_node(&g, "Reshape", "split", IN("c", "shape"), OUT("s"), NULL);
    if (near == 2) tb_node(&g, "Sigmoid", "other", IN("s"), OUT("z"), NULL);
    tb_node(&g, "Transpose", "t", IN("s"), OUT("y"), &tp);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 6, 7});
    tb_graph_output(&g, "y", 1, -1, NULL);
    if (near == 2) tb_graph_output(&g, "z", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    int nhwc = count_named(opt, "blocked", "er_to_nhwc"), convs = count_in_layout(opt, "blocked", "BlockedConv");
    CHECK(convs == 2);
    CHECK(nhwc == (near ? 0 : 1));
    if (nhwc != (near ? 0 : 1)) fprintf(stderr, "  near %d: %d channels-last conversions\n", near, nhwc);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 6, 7});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&tp);
  }
}

/* Per-channel constants: a convolution, PRelu with [C,1,1] slopes (face
 * models' activation), Mul by [1,C,1,1] and Add of [C,1,1] (an unfolded
 * BatchNorm), a convolution: all blocked over 24 channels (not whole
 * blocks on AVX-512), the constants made blocked. Near miss: Div by a
 * per-channel constant stays planar (its padding lanes would divide by
 * zero), and the ops after it with it (the last convolution then is an
 * island of the conversion rule, planar too). */
void tp_test_blocked_channel_consts(void) {
  if (er__cpu_layout_block() == 0) return;
  for (int near = 0; near < 2; near++) {
    er_pbw g = {0}, m = {0}, p1 = {0};
    tp_add_weight(&g, "W1", 4, (const int64_t[]){24, 8, 3, 3}, 0.3f, 0);
    tp_add_weight(&g, "W2", 4, (const int64_t[]){16, 24, 3, 3}, 0.1f, 0);
    tp_add_weight(&g, "slope", 3, (const int64_t[]){24, 1, 1}, 0.3f, 0);
    tp_add_weight(&g, "k", 4, (const int64_t[]){1, 24, 1, 1}, 0.5f, 1);
    tp_add_weight(&g, "b", 3, (const int64_t[]){24, 1, 1}, 0.2f, 0);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p1);
    tb_node(&g, "PRelu", "pr", IN("c1", "slope"), OUT("pr"), NULL);
    tb_node(&g, near ? "Div" : "Mul", "scale", IN("pr", "k"), OUT("sc"), NULL);
    tb_node(&g, "Add", "shift", IN("b", "sc"), OUT("sh"), NULL);
    tb_node(&g, "Conv", "c2", IN("sh", "W2"), OUT("y"), &p1);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 8, 7, 9});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    int convs = count_in_layout(opt, "blocked", "BlockedConv"), to = count_in_layout(opt, "blocked", "ToBlocked");
    int from = count_in_layout(opt, "blocked", "FromBlocked");
    CHECK(convs == 2 - near && to == 0 && from == 1);
    if (convs != 2 - near || to != 0 || from != 1)
      fprintf(stderr, "  near %d: %d BlockedConv, %d ToBlocked, %d FromBlocked\n", near, convs, to, from);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 8, 7, 9});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
  }
}

/* Two 3x3 convolutions with one weight tensor (a detection head's tower
 * at two pyramid levels) and a third with other weights of that shape:
 * the Winograd kernels share the first two's transformed weights and must
 * not hand them to the third. Outputs agree with the reference kernels in
 * both layouts, with a second session of the model alive at once. */
void tp_test_shared_weights(void) {
  er_pbw g = {0}, m = {0}, p1 = {0};
  tp_add_weight(&g, "W", 4, (const int64_t[]){64, 64, 3, 3}, 0.05f, 0);
  tp_add_weight(&g, "W2", 4, (const int64_t[]){64, 64, 3, 3}, 0.05f, 0);
  tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
  tb_node(&g, "Conv", "c1", IN("x", "W"), OUT("c1"), &p1);
  tb_node(&g, "Relu", "r1", IN("c1"), OUT("r1"), NULL);
  tb_node(&g, "Conv", "c2", IN("r1", "W"), OUT("c2"), &p1);
  tb_node(&g, "Conv", "c3", IN("x", "W2"), OUT("c3"), &p1);
  tb_node(&g, "Add", "sum", IN("c2", "c3"), OUT("y"), NULL);
  tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 64, 16, 16});
  tb_graph_output(&g, "y", 1, -1, NULL);
  tb_model(&m, 8, 13, &g);
  er_model *model = tp_load(&m, 2);
  er_tensor *x;
  er_tensor_create(ER_DTYPE_FLOAT, 4, (const int64_t[]){1, 64, 16, 16}, &x);
  float *xv = er_tensor_data(x);
  for (int64_t i = 0; i < er_tensor_count(x); i++) xv[i] = tp_frand() * 2;
  er_named_tensor in = {"x", x};
  er_session_options ro;
  er_session_options_init(&ro);
  ro.force_reference = true;
  er_session *sr = NULL, *other = NULL;
  er_tensor *want = NULL;
  CHECK_STATUS(er_session_create(model, &ro, &sr), ER_STATUS_OK);
  CHECK_STATUS(er_session_run(sr, &in, 1, NULL, 1, &want), ER_STATUS_OK);
  er_session_free(sr);
  CHECK_STATUS(er_session_create(model, NULL, &other), ER_STATUS_OK);
  const char *layouts[2] = {"blocked", "planar"};
  for (int l = 0; l < 2; l++) {
    setenv("EDGERUN_LAYOUT", layouts[l], 1);
    er_session *s = NULL;
    er_tensor *got = NULL;
    CHECK_STATUS(er_session_create(model, NULL, &s), ER_STATUS_OK);
    unsetenv("EDGERUN_LAYOUT");
    CHECK_STATUS(er_session_run(s, &in, 1, NULL, 1, &got), ER_STATUS_OK);
    er_session_free(s);
    const float *a = er_tensor_cdata(got), *b = er_tensor_cdata(want);
    int bad = 0;
    for (int64_t i = 0; i < er_tensor_count(want); i++)
      if (!(fabsf(a[i] - b[i]) <= 1e-4f + 1e-4f * fabsf(b[i]))) bad++;
    if (bad) fprintf(stderr, "  %s layout: %d elements differ from the reference\n", layouts[l], bad);
    CHECK(bad == 0);
    er_tensor_free(got);
  }
  er_session_free(other);
  er_tensor_free(want);
  er_tensor_free(x);
  er_model_free(model);
  er__pbw_free(&g);
  er__pbw_free(&m);
  er__pbw_free(&p1);
}

/* MNIST's layers: a 5x5 convolution of one input channel to half a block
 * of outputs stays planar (the direct kernel; blocked, half of every
 * output vector would be empty lanes); the next two layers are blocked,
 * the first reading it planar in place. The near miss, a whole block of
 * outputs, is blocked too. */
void tp_test_blocked_half_block(void) {
  int64_t b = er__cpu_layout_block();
  if (b == 0) return;
  for (int near = 0; near < 2; near++) {
    er_pbw g = {0}, m = {0}, p1 = {0}, p2 = {0};
    int64_t m1 = near ? b : b / 2;
    tp_add_weight(&g, "W1", 4, (const int64_t[]){m1, 1, 5, 5}, 0.3f, 0);
    tp_add_weight(&g, "W2", 4, (const int64_t[]){2 * b, m1, 5, 5}, 0.1f, 0);
    tp_add_weight(&g, "W3", 4, (const int64_t[]){2 * b, 2 * b, 3, 3}, 0.1f, 0);
    tb_attr_ints(&p2, "pads", (const int64_t[]){2, 2, 2, 2}, 4);
    tb_attr_ints(&p1, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tb_node(&g, "Conv", "c1", IN("x", "W1"), OUT("c1"), &p2);
    tb_node(&g, "Relu", "r1", IN("c1"), OUT("r1"), NULL);
    tb_node(&g, "Conv", "c2", IN("r1", "W2"), OUT("c2"), &p2);
    tb_node(&g, "Relu", "r2", IN("c2"), OUT("r2"), NULL);
    tb_node(&g, "Conv", "c3", IN("r2", "W3"), OUT("y"), &p1);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, 1, 28, 28});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    /* The planar choice goes with the direct kernel, which takes output
     * blocks of 8 channels at least 3/4 full: half of an AVX2 block (4
     * channels) is below that, so on AVX2 the first layer is blocked too
     * (an AMD EPYC without AVX-512 runs this case that way). */
    int want = near || b / 2 < 6 ? 3 : 2;
    int blocked = count_in_layout(opt, "blocked", "BlockedConv");
    CHECK(blocked == want);
    if (blocked != want) fprintf(stderr, "  near %d: %d BlockedConv, expected %d\n", near, blocked, want);
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, 1, 28, 28});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&p1);
    er__pbw_free(&p2);
  }
}

/* Islands: a lone small convolution between planar ops is not worth its
 * conversions and stays planar; a lone large one (5x5, 64 channels) is
 * converted; a 3x3 layer the planar Winograd kernel takes stays planar:
 * 64 -> 64, and uneven ones with C * M / (C + M) >= 32 (48 -> 192 and
 * 192 -> 48); 40 -> 96 (28) and 32 -> 32 (16) are converted. */
void tp_test_blocked_islands(void) {
  if (er__cpu_layout_block() == 0) return;
  struct {
    int64_t c, hw, m, k;
    bool blocked;
  } cases[] = {{4, 8, 8, 1, false},    {64, 14, 64, 5, true},  {64, 32, 64, 3, false}, {48, 16, 192, 3, false},
               {192, 16, 48, 3, false}, {40, 16, 96, 3, true}, {32, 20, 32, 3, true}};
  for (size_t i = 0; i < ER_ARRAY_LEN(cases); i++) {
    er_pbw g = {0}, m = {0}, a = {0};
    tp_add_weight(&g, "W", 4, (const int64_t[]){cases[i].m, cases[i].c, cases[i].k, cases[i].k}, 0.1f, 0);
    int64_t pad = cases[i].k / 2;
    tb_attr_ints(&a, "pads", (const int64_t[]){pad, pad, pad, pad}, 4);
    tb_node(&g, "Softplus", "pre", IN("x"), OUT("sp"), NULL);
    tb_node(&g, "Conv", "c", IN("sp", "W"), OUT("c"), &a);
    tb_node(&g, "Softplus", "post", IN("c"), OUT("y"), NULL);
    tb_graph_input(&g, "x", 1, 4, (const int64_t[]){1, cases[i].c, cases[i].hw, cases[i].hw});
    tb_graph_output(&g, "y", 1, -1, NULL);
    tb_model(&m, 8, 13, &g);
    er_model *opt = tp_load(&m, 2), *plain = tp_load(&m, -1);
    CHECK(count_in_layout(opt, "blocked", "BlockedConv") == (cases[i].blocked ? 1 : 0));
    same_in_layouts(opt, plain, 4, (const int64_t[]){1, cases[i].c, cases[i].hw, cases[i].hw});
    er_model_free(opt);
    er_model_free(plain);
    er__pbw_free(&g);
    er__pbw_free(&m);
    er__pbw_free(&a);
  }
}
