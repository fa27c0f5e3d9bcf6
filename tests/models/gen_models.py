#!/usr/bin/env python3
"""Generate realistic ONNX test models with onnxruntime reference outputs.

Each model is written in the ONNX backend test-data layout that
`edgerun conform DIR` understands:

    OUTDIR/<name>/model.onnx
    OUTDIR/<name>/test_data_set_0/input_0.pb, input_1.pb, ...
    OUTDIR/<name>/test_data_set_0/output_0.pb, output_1.pb, ...
    OUTDIR/<name>/test_data_set_1/...   (only for some models)

Inputs are written in graph-input order (initializers excluded) and outputs
in graph-output order, each TensorProto carrying the name of the graph value
it belongs to.  Reference outputs come from onnxruntime's CPU execution
provider with all graph optimizations disabled and a single intra-op thread,
so the graph is computed exactly as written and the result is reproducible.

Every model is built with onnx.helper from numpy weights drawn from a
generator seeded by the model's name, so running the script twice produces
byte-identical model files.  Weights use He/Xavier-style scaling so that
activations stay of order one and the outputs are meaningful.

Usage:
    .venv/bin/python tests/models/gen_models.py --out build/test-models
    .venv/bin/python tests/models/gen_models.py --out DIR --only mlp lstm
    .venv/bin/python tests/models/gen_models.py --list
"""

import argparse
import itertools
import os
import shutil
import sys
import time
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from model_builders import (  # noqa: E402,F401 (re-exported for the scripts that import gen_models)
    FLOAT,
    INT64,
    INT32,
    BOOL,
    UINT8,
    INT64_MIN,
    Builder,
    f32,
    he_normal,
    small,
    conv,
    batchnorm,
    linear,
    rnn_weights,
    normal_input,
    make_session,
    run_single_node,
    probe,
    tie_margin,
    asym_qparams,
    calibrate,
    quantize_u8,
    quantize_per_channel_s8,
)




# ---------------------------------------------------------------------------
# Models.  Each build function takes a seeded numpy Generator and returns
# (model, [feeds for test_data_set_0, feeds for test_data_set_1, ...]).
# ---------------------------------------------------------------------------


def build_mlp(rng):
    """Opset 13.  Three-layer MLP (MatMul+Add+Relu twice, then Gemm) with a
    symbolic batch dimension; weights are initializers."""
    b = Builder("mlp", rng)
    x = b.input("x", FLOAT, ["batch", 64])
    h = b.op("Relu", linear(b, x, 64, 128, "fc1"))
    h = b.op("Relu", linear(b, h, 128, 64, "fc2"))
    # Gemm with transB=1 stores the weight as [out, in], like nn.Linear.
    w3 = he_normal(rng, (10, 64), 64, gain=1.0)
    b.op("Gemm", h, b.weight("fc3.weight", w3), b.weight("fc3.bias", small(rng, 10)),
         alpha=1.0, beta=1.0, transB=1, out="logits")
    b.output("logits", FLOAT, ["batch", 10])
    model = b.model(13, "3-layer MLP, dynamic batch")
    feeds = [{"x": normal_input(rng, (4, 64))}, {"x": normal_input(rng, (1, 64))}]
    return model, feeds


def build_resnet_style(rng):
    """Opset 13.  Small ResNet: stride-2 stem conv + BN + Relu, three basic
    residual blocks (the second downsamples with a 1x1 stride-2 projection
    shortcut), GlobalAveragePool, Flatten, Gemm.  Weights are initializers."""
    b = Builder("resnet_style", rng)
    x = b.input("input", FLOAT, [1, 3, 64, 64])
    h = conv(b, x, 3, 16, 3, "stem.conv", stride=2, bias=False)
    h = b.op("Relu", batchnorm(b, h, 16, "stem.bn"))

    def block(x, cin, cout, stride, prefix):
        y = conv(b, x, cin, cout, 3, f"{prefix}.conv1", stride=stride, bias=False)
        y = b.op("Relu", batchnorm(b, y, cout, f"{prefix}.bn1"))
        y = conv(b, y, cout, cout, 3, f"{prefix}.conv2", bias=False)
        # A smaller gamma on the last BN keeps the residual sum well scaled.
        y = batchnorm(b, y, cout, f"{prefix}.bn2", gamma=0.5)
        if stride != 1 or cin != cout:
            s = conv(b, x, cin, cout, 1, f"{prefix}.downsample.conv", stride=stride,
                     pad=0, bias=False, gain=1.0)
            s = batchnorm(b, s, cout, f"{prefix}.downsample.bn")
        else:
            s = x
        return b.op("Relu", b.op("Add", y, s))

    h = block(h, 16, 16, 1, "layer1")  # [1,16,32,32]
    h = block(h, 16, 32, 2, "layer2")  # [1,32,16,16]
    h = block(h, 32, 32, 1, "layer3")  # [1,32,16,16]
    h = b.op("GlobalAveragePool", h)
    h = b.op("Flatten", h, axis=1)
    w = he_normal(rng, (10, 32), 32, gain=1.0)
    b.op("Gemm", h, b.weight("fc.weight", w), b.weight("fc.bias", small(rng, 10)),
         transB=1, out="logits")
    b.output("logits", FLOAT, [1, 10])
    model = b.model(13, "ResNet-style CNN with BatchNormalization and residual adds")
    return model, [{"input": normal_input(rng, (1, 3, 64, 64))}]


def build_mobilenet_style(rng):
    """Opset 14.  MobileNetV2-like net with BatchNorm folded into the convs:
    HardSwish stem, inverted residual blocks (1x1 expand, 3x3 depthwise with
    group=channels, Relu6 as Clip with min/max inputs, linear 1x1 project,
    residual Add when shapes match), HardSwish head, GlobalAveragePool,
    Flatten, Gemm.  Weights are initializers."""
    b = Builder("mobilenet_style", rng)
    x = b.input("input", FLOAT, [1, 3, 64, 64])
    # Clip has taken min/max as optional inputs since opset 11.
    cmin = b.weight("relu6.min", np.float32(0.0))
    cmax = b.weight("relu6.max", np.float32(6.0))

    def relu6(t):
        return b.op("Clip", t, cmin, cmax)

    h = conv(b, x, 3, 16, 3, "features.0", stride=2)
    h = b.op("HardSwish", h)  # [1,16,32,32]

    def inverted_residual(x, cin, cout, stride, expand, prefix):
        mid = cin * expand
        y = relu6(conv(b, x, cin, mid, 1, f"{prefix}.expand", pad=0))
        y = relu6(conv(b, y, mid, mid, 3, f"{prefix}.depthwise", stride=stride, group=mid))
        y = conv(b, y, mid, cout, 1, f"{prefix}.project", pad=0, gain=1.0)
        if stride == 1 and cin == cout:
            y = b.op("Add", x, y)
        return y

    h = inverted_residual(h, 16, 16, 1, 4, "features.1")  # [1,16,32,32]
    h = inverted_residual(h, 16, 24, 2, 4, "features.2")  # [1,24,16,16]
    h = inverted_residual(h, 24, 24, 1, 4, "features.3")  # [1,24,16,16]
    h = inverted_residual(h, 24, 32, 2, 4, "features.4")  # [1,32,8,8]
    h = b.op("HardSwish", conv(b, h, 32, 64, 1, "features.5", pad=0))
    h = b.op("Flatten", b.op("GlobalAveragePool", h), axis=1)
    w = he_normal(rng, (10, 64), 64, gain=1.0)
    b.op("Gemm", h, b.weight("classifier.weight", w),
         b.weight("classifier.bias", small(rng, 10)), transB=1, out="logits")
    b.output("logits", FLOAT, [1, 10])
    model = b.model(14, "MobileNetV2-style CNN: depthwise convs, Clip(0,6), HardSwish")
    return model, [{"input": normal_input(rng, (1, 3, 64, 64))}]


def _transformer(rng, name, opset, variant):
    """One post-LN transformer encoder block on [batch, 32, 64] inputs.

    variant "fused":      LayerNormalization op, Reshape with constant
                          [0, 0, heads, head_dim] shapes, Gelu as Erf
                          pattern, weights as initializers.
    variant "gelu_op":    like "fused" but uses the Gelu op (opset >= 20).
    variant "decomposed": LayerNorm as ReduceMean/Sub/Pow/ReduceMean/Add/
                          Sqrt/Div/Mul/Add, head shapes computed in-graph
                          with Shape/Slice/Concat, an additive attention
                          mask from an int64 input, weights in Constant nodes.
    """
    hidden, heads, seq, ffn = 64, 4, 32, 256
    head_dim = hidden // heads
    decomposed = variant == "decomposed"
    b = Builder(name, rng, weights="constant" if decomposed else "initializer")
    x = b.input("x", FLOAT, ["batch", seq, hidden])
    mask = b.input("attention_mask", INT64, ["batch", seq]) if decomposed else None

    def layer_norm(t, prefix, out=None):
        gamma = b.weight(f"{prefix}.weight", f32(rng.uniform(0.8, 1.2, hidden)))
        beta = b.weight(f"{prefix}.bias", small(rng, hidden))
        if not decomposed:
            return b.op("LayerNormalization", t, gamma, beta, axis=-1, epsilon=1e-5, out=out)
        # The pattern PyTorch emits for nn.LayerNorm at opsets below 17.
        mean = b.op("ReduceMean", t, axes=[-1], keepdims=1)
        d = b.op("Sub", t, mean)
        var = b.op("ReduceMean", b.op("Pow", d, b.const(np.float32(2.0))), axes=[-1], keepdims=1)
        std = b.op("Sqrt", b.op("Add", var, b.const(np.float32(1e-5))))
        return b.op("Add", b.op("Mul", b.op("Div", d, std), gamma), beta, out=out)

    def gelu(t):
        if variant == "gelu_op":
            return b.op("Gelu", t, approximate="none")
        # Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2))).
        e = b.op("Erf", b.op("Div", t, b.const(np.float32(np.sqrt(2.0)))))
        return b.op("Mul", b.op("Mul", t, b.op("Add", e, b.const(np.float32(1.0)))),
                    b.const(np.float32(0.5)))

    if decomposed:
        # [batch, seq] taken from the input's runtime shape, then [.., heads, head_dim].
        bs = b.op("Slice", b.op("Shape", x), b.const([0], np.int64), b.const([2], np.int64))
        split_shape = b.op("Concat", bs, b.const([heads, head_dim], np.int64), axis=0)
        merge_shape = b.op("Concat", bs, b.const([hidden], np.int64), axis=0)
    else:
        split_shape = b.const([0, 0, heads, head_dim], np.int64)
        merge_shape = b.const([0, 0, hidden], np.int64)

    def heads_of(t, perm):
        return b.op("Transpose", b.op("Reshape", t, split_shape), perm=perm)

    q = heads_of(linear(b, x, hidden, hidden, "attn.q", gain=1.0), [0, 2, 1, 3])
    k = heads_of(linear(b, x, hidden, hidden, "attn.k", gain=1.0), [0, 2, 3, 1])
    v = heads_of(linear(b, x, hidden, hidden, "attn.v", gain=1.0), [0, 2, 1, 3])
    scores = b.op("Div", b.op("MatMul", q, k), b.const(np.float32(np.sqrt(head_dim))))
    if decomposed:
        # BERT-style additive mask: (1 - mask) * -10000, broadcast to [b, h, s, s].
        m = b.op("Cast", b.op("Unsqueeze", mask, b.const([1, 2], np.int64)), to=FLOAT)
        m = b.op("Mul", b.op("Sub", b.const(np.float32(1.0)), m), b.const(np.float32(-10000.0)))
        scores = b.op("Add", scores, m)
    probs = b.op("Softmax", scores, axis=-1)
    ctx = b.op("Transpose", b.op("MatMul", probs, v), perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", ctx, merge_shape)
    attn = linear(b, ctx, hidden, hidden, "attn.out", gain=1.0)
    h = layer_norm(b.op("Add", x, attn), "ln1")
    f = linear(b, gelu(linear(b, h, hidden, ffn, "ffn.fc1")), ffn, hidden, "ffn.fc2", gain=1.0)
    layer_norm(b.op("Add", h, f), "ln2", out="y")
    b.output("y", FLOAT, ["batch", seq, hidden])

    model = b.model(opset, f"Transformer encoder block ({variant})")
    feeds = []
    for batch in (1, 2):
        feed = {"x": normal_input(rng, (batch, seq, hidden))}
        if decomposed:
            am = np.ones((batch, seq), np.int64)
            am[0, seq - 5:] = 0  # The first sequence is padded at its end.
            if batch > 1:
                am[1, seq - 12:] = 0
            feed["attention_mask"] = am
        feeds.append(feed)
    return model, feeds


def build_transformer_encoder(rng):
    """Opset 17.  Encoder block with LayerNormalization, dynamic batch."""
    return _transformer(rng, "transformer_encoder", 17, "fused")


def build_transformer_encoder_decomposed(rng):
    """Opset 13.  Encoder block from primitive ops only (ReduceMean with the
    axes attribute), attention mask input, weights in Constant nodes."""
    return _transformer(rng, "transformer_encoder_decomposed", 13, "decomposed")


def build_transformer_encoder_opset21(rng):
    """Opset 21.  Same block as transformer_encoder but with the Gelu op
    (opset 20) and the opset-21 versions of Reshape/Transpose/Cast etc."""
    return _transformer(rng, "transformer_encoder_opset21", 21, "gelu_op")


def build_lstm(rng):
    """Opset 14.  Bidirectional LSTM (B, initial_h and initial_c given; the
    states are graph inputs) over [seq, 2, 16] with hidden size 32 and a
    symbolic sequence length, then a MatMul head on Y_h."""
    b = Builder("lstm", rng)
    hidden, batch, feat = 32, 2, 16
    x = b.input("X", FLOAT, ["seq", batch, feat])
    h0 = b.input("initial_h", FLOAT, [2, batch, hidden])
    c0 = b.input("initial_c", FLOAT, [2, batch, hidden])
    w, r, bias = rnn_weights(rng, 4, 2, hidden, feat)
    b.op("LSTM", x, b.weight("lstm.W", w), b.weight("lstm.R", r), b.weight("lstm.B", bias),
         "", h0, c0, hidden_size=hidden, direction="bidirectional",
         out=["Y", "Y_h", "Y_c"])
    # [dirs, batch, hidden] -> [batch, dirs * hidden] -> logits.
    hh = b.op("Reshape", b.op("Transpose", "Y_h", perm=[1, 0, 2]), b.const([0, -1], np.int64))
    # Recurrent outputs are small (|h| of about 0.2), so the head uses a
    # larger gain to give logits of order one.
    linear(b, hh, 2 * hidden, 8, "head", gain=32.0, out="logits")
    b.output("Y", FLOAT, ["seq", 2, batch, hidden])
    b.output("Y_c", FLOAT, [2, batch, hidden])
    b.output("logits", FLOAT, [batch, 8])
    model = b.model(14, "Bidirectional LSTM with initial states and a linear head")
    feeds = [
        {"X": normal_input(rng, (seq, batch, feat)),
         "initial_h": normal_input(rng, (2, batch, hidden), 0.3),
         "initial_c": normal_input(rng, (2, batch, hidden), 0.3)}
        for seq in (10, 4)
    ]
    return model, feeds


def build_gru(rng):
    """Opset 14.  Forward GRU with linear_before_reset=1 (PyTorch's variant),
    initial_h as a graph input, symbolic sequence length, MatMul head."""
    b = Builder("gru", rng)
    hidden, batch, feat = 32, 2, 16
    x = b.input("X", FLOAT, ["seq", batch, feat])
    h0 = b.input("initial_h", FLOAT, [1, batch, hidden])
    w, r, bias = rnn_weights(rng, 3, 1, hidden, feat)
    b.op("GRU", x, b.weight("gru.W", w), b.weight("gru.R", r), b.weight("gru.B", bias),
         "", h0, hidden_size=hidden, linear_before_reset=1, direction="forward",
         out=["Y", "Y_h"])
    hh = b.op("Squeeze", "Y_h", b.const([0], np.int64))
    # Recurrent outputs are small (|h| of about 0.2), so the head uses a
    # larger gain to give logits of order one.
    linear(b, hh, hidden, 8, "head", gain=8.0, out="logits")
    b.output("Y", FLOAT, ["seq", 1, batch, hidden])
    b.output("Y_h", FLOAT, [1, batch, hidden])
    b.output("logits", FLOAT, [batch, 8])
    model = b.model(14, "Forward GRU (linear_before_reset=1) with a linear head")
    feeds = [
        {"X": normal_input(rng, (seq, batch, feat)),
         "initial_h": normal_input(rng, (1, batch, hidden), 0.3)}
        for seq in (10, 5)
    ]
    return model, feeds


def build_rnn(rng):
    """Opset 14.  Forward tanh RNN with a sequence_lens input (so sequences
    of different lengths are masked), default zero initial state, head."""
    b = Builder("rnn", rng)
    hidden, batch, feat = 32, 2, 16
    x = b.input("X", FLOAT, ["seq", batch, feat])
    lens = b.input("sequence_lens", INT32, [batch])
    w, r, bias = rnn_weights(rng, 1, 1, hidden, feat)
    b.op("RNN", x, b.weight("rnn.W", w), b.weight("rnn.R", r), b.weight("rnn.B", bias),
         lens, hidden_size=hidden, activations=["Tanh"], direction="forward",
         out=["Y", "Y_h"])
    hh = b.op("Squeeze", "Y_h", b.const([0], np.int64))
    # Recurrent outputs are small (|h| of about 0.2), so the head uses a
    # larger gain to give logits of order one.
    linear(b, hh, hidden, 8, "head", gain=8.0, out="logits")
    b.output("Y", FLOAT, ["seq", 1, batch, hidden])
    b.output("Y_h", FLOAT, [1, batch, hidden])
    b.output("logits", FLOAT, [batch, 8])
    model = b.model(14, "Forward tanh RNN with sequence_lens and a linear head")
    feeds = [
        {"X": normal_input(rng, (10, batch, feat)),
         "sequence_lens": np.array([10, 7], np.int32)},
        {"X": normal_input(rng, (6, batch, feat)),
         "sequence_lens": np.array([3, 6], np.int32)},
    ]
    return model, feeds


def build_if_graph(rng):
    """Opset 13.  If on a condition computed in the graph (ReduceSum(x) > 0).
    Both branches read the outer-scope tensor x: then = Relu(x) * 2,
    else = Neg(x) + 1.  The result feeds a linear layer.  Data set 0 takes
    the then-branch, data set 1 the else-branch."""
    b = Builder("if_graph", rng)
    x = b.input("x", FLOAT, ["batch", 16])
    total = b.op("ReduceSum", x, keepdims=0)  # No axes input: reduce everything.
    b.op("Greater", total, b.const(np.float32(0.0)), out="cond")

    then_b = b.subgraph("then_branch")
    then_b.op("Mul", then_b.op("Relu", x), then_b.const(np.float32(2.0)), out="then_out")
    then_b.output("then_out", FLOAT, None)

    else_b = b.subgraph("else_branch")
    else_b.op("Add", else_b.op("Neg", x), else_b.const(np.float32(1.0)), out="else_out")
    else_b.output("else_out", FLOAT, None)

    chosen = b.op("If", "cond", then_branch=then_b.graph(), else_branch=else_b.graph())
    b.op("Tanh", linear(b, chosen, 16, 8, "fc", gain=1.0), out="y")
    b.output("y", FLOAT, ["batch", 8])
    b.output("cond", BOOL, [])
    model = b.model(13, "If with a data-dependent condition and outer-scope reads")
    pos = np.abs(normal_input(rng, (3, 16))) * 0.5 + normal_input(rng, (3, 16)) * 0.2
    neg = -np.abs(normal_input(rng, (2, 16))) * 0.5 + normal_input(rng, (2, 16)) * 0.2
    assert pos.sum() > 0 and neg.sum() < 0
    return model, [{"x": f32(pos)}, {"x": f32(neg)}]


def build_loop_graph(rng):
    """Opset 13.  Three Loops.

    The first is a recurrent cell unrolled over the rows of x: its trip
    count is computed from Shape(x) in the graph, its condition is computed
    in the body (always true here), it carries a hidden state and a running
    sum, and it stacks every hidden state as a scan output.  Its body reads
    x and an initializer from the outer scope.

    The second is a while-loop with a max trip count of 20 whose condition
    depends on the data (grow a vector by 1.5x until its sum reaches 50), so
    the length of its scan output depends on the input values.
    """
    b = Builder("loop_graph", rng)
    feat = 8
    x = b.input("x", FLOAT, ["T", feat])
    h0 = b.input("h0", FLOAT, [feat])
    w = b.weight("cell.weight", he_normal(rng, (feat, feat), feat, gain=1.0))
    bias = b.weight("cell.bias", small(rng, feat))

    trip = b.op("Gather", b.op("Shape", x), b.const(np.int64(0)), axis=0)
    acc0 = b.const(np.zeros(feat, np.float32))
    true = b.const(np.array(True))

    body = b.subgraph("cell_body")
    it = body.input("iter", INT64, [])
    body.input("cond_in", BOOL, [])
    h_in = body.input("h_in", FLOAT, [feat])
    acc_in = body.input("acc_in", FLOAT, [feat])
    x_t = body.op("Gather", x, it, axis=0)  # Outer-scope read of row `iter`.
    pre = body.op("Add", body.op("Add", body.op("MatMul", h_in, w), bias), x_t)
    body.op("Tanh", pre, out="h_out")
    body.op("Add", acc_in, "h_out", out="acc_out")
    biggest = body.op("ReduceMax", body.op("Abs", "h_out"), keepdims=0)
    body.op("Less", biggest, body.const(np.float32(100.0)), out="cond_out")
    body.op("Identity", "h_out", out="h_scan")
    body.output("cond_out", BOOL, [])
    body.output("h_out", FLOAT, [feat])
    body.output("acc_out", FLOAT, [feat])
    body.output("h_scan", FLOAT, [feat])
    b.op("Loop", trip, true, h0, acc0, body=body.graph(),
         out=["h_final", "acc_final", "h_all"])

    # While-loop: v starts at |acc_final| + 0.1 and is multiplied by 1.5
    # until its sum reaches 50 or 20 iterations have run.
    v0 = b.op("Add", b.op("Abs", "acc_final"), b.const(np.float32(0.1)))
    limit = b.const(np.float32(50.0))
    start = b.op("Less", b.op("ReduceSum", v0, keepdims=0), limit)
    grow = b.subgraph("grow_body")
    grow.input("i", INT64, [])
    grow.input("c", BOOL, [])
    v_in = grow.input("v_in", FLOAT, [feat])
    grow.op("Mul", v_in, grow.const(np.float32(1.5)), out="v_out")
    total = grow.op("ReduceSum", "v_out", keepdims=0)
    grow.op("Less", total, limit, out="c_out")  # `limit` is read from the outer scope.
    grow.op("Identity", total, out="v_sum")
    grow.output("c_out", BOOL, [])
    grow.output("v_out", FLOAT, [feat])
    grow.output("v_sum", FLOAT, [])
    b.op("Loop", b.const(np.int64(20)), start, v0, body=grow.graph(),
         out=["v_final", "v_sums"])

    # A third Loop carries a matrix that its body passes through unchanged
    # (as exporters route a decoder's weights and encoder features through
    # a loop: PaddleOCR's SLANet) and one it scales each step, both from
    # the same load-time constant and both multiplying a vector it updates;
    # the matrices also come out.  edgerun keeps the first instead of
    # copying it every iteration and treats it as a constant inside the
    # body (its MatMul weights packed once); the second must not be.
    m0 = b.op("Mul", w, b.const(np.float32(0.5)))
    keep = b.subgraph("keep_body")
    keep.input("k_i", INT64, [])
    keep.input("k_c", BOOL, [])
    keep.input("m_in", FLOAT, [feat, feat])
    keep.input("r_in", FLOAT, [feat, feat])
    keep.input("u_in", FLOAT, [feat])
    keep.op("Mul", "r_in", keep.const(np.float32(0.8)), out="r_out")
    keep.op("Tanh", keep.op("Add", keep.op("MatMul", "u_in", "m_in"), keep.op("MatMul", "u_in", "r_in")),
            out="u_out")
    keep.op("Identity", "k_c", out="k_c_out")
    keep.output("k_c_out", BOOL, [])
    keep.output("m_in", FLOAT, [feat, feat])
    keep.output("r_out", FLOAT, [feat, feat])
    keep.output("u_out", FLOAT, [feat])
    b.op("Loop", b.const(np.int64(5)), "", m0, m0, "h_final", body=keep.graph(),
         out=["m_final", "r_final", "u_final"])

    b.output("h_final", FLOAT, [feat])
    b.output("acc_final", FLOAT, [feat])
    b.output("h_all", FLOAT, ["T", feat])
    b.output("v_final", FLOAT, [feat])
    b.output("v_sums", FLOAT, ["steps"])
    b.output("m_final", FLOAT, [feat, feat])
    b.output("r_final", FLOAT, [feat, feat])
    b.output("u_final", FLOAT, [feat])
    model = b.model(13, "Loops with computed trip count, scan outputs, a while condition and a "
                        "carried value passed through")
    feeds = [
        {"x": normal_input(rng, (6, feat)), "h0": normal_input(rng, (feat,), 0.5)},
        {"x": normal_input(rng, (3, feat)), "h0": normal_input(rng, (feat,), 0.5)},
    ]
    return model, feeds


def build_detector_style(rng):
    """Opset 13.  FPN-style detector: three stride-2 backbone convs, a
    top-down path with Resize (nearest/asymmetric/floor as PyTorch exports
    nn.Upsample, then linear/half_pixel; scales from Constant nodes), Concat
    along channels, and per-level heads whose outputs are Reshaped,
    Transposed and concatenated into [1, N, 4 + C] boxes with a Sigmoid."""
    b = Builder("detector_style", rng)
    anchors, classes = 2, 3
    per_box = 4 + classes
    x = b.input("images", FLOAT, [1, 3, 64, 64])
    c1 = b.op("Relu", conv(b, x, 3, 16, 3, "backbone.c1", stride=2))    # [1,16,32,32]
    c2 = b.op("Relu", conv(b, c1, 16, 32, 3, "backbone.c2", stride=2))  # [1,32,16,16]
    c3 = b.op("Relu", conv(b, c2, 32, 64, 3, "backbone.c3", stride=2))  # [1,64,8,8]

    scales = b.const([1.0, 1.0, 2.0, 2.0], np.float32, prefix="upsample_scales")
    p3 = b.op("Relu", conv(b, c3, 64, 32, 1, "fpn.lateral3", pad=0))    # [1,32,8,8]
    up = b.op("Resize", p3, "", scales, mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    p2 = b.op("Concat", up, c2, axis=1)                                  # [1,64,16,16]
    p2 = b.op("Relu", conv(b, p2, 64, 32, 3, "fpn.smooth2"))             # [1,32,16,16]
    up = b.op("Resize", p2, "", scales, mode="linear",
              coordinate_transformation_mode="half_pixel")
    p1 = b.op("Concat", up, c1, axis=1)                                  # [1,48,32,32]
    p1 = b.op("Relu", conv(b, p1, 48, 32, 3, "fpn.smooth1"))             # [1,32,32,32]

    levels = []
    for name, p, size in (("p3", p3, 8), ("p2", p2, 16), ("p1", p1, 32)):
        t = b.op("Relu", conv(b, p, 32, 32, 3, f"head.{name}.conv"))
        t = conv(b, t, 32, anchors * per_box, 1, f"head.{name}.pred", pad=0, gain=1.0)
        # [1, A*(4+C), H, W] -> [1, A, 4+C, H*W] -> [1, H*W, A, 4+C] -> [1, H*W*A, 4+C]
        t = b.op("Reshape", t, b.const([1, anchors, per_box, size * size], np.int64))
        t = b.op("Transpose", t, perm=[0, 3, 1, 2])
        levels.append(b.op("Reshape", t, b.const([1, -1, per_box], np.int64)))
    b.op("Sigmoid", b.op("Concat", *levels, axis=1), out="boxes")
    n = anchors * (8 * 8 + 16 * 16 + 32 * 32)
    b.output("boxes", FLOAT, [1, n, per_box])
    model = b.model(13, "FPN-style detector with nearest and linear Resize")
    return model, [{"images": normal_input(rng, (1, 3, 64, 64))}]


def build_ocr_crnn(rng):
    """Opset 13.  CRNN text recognizer: convs and MaxPools (the later ones
    with 2x1 kernels) collapse the height, a 2x1 conv removes the last row,
    Squeeze + Transpose give [T=25, batch, C], a bidirectional LSTM runs
    over time, then MatMul projection and LogSoftmax over 37 classes."""
    b = Builder("ocr_crnn", rng)
    hidden, classes = 32, 37
    x = b.input("image", FLOAT, [1, 1, 32, 100])
    h = b.op("Relu", conv(b, x, 1, 16, 3, "cnn.0"))
    h = b.op("MaxPool", h, kernel_shape=[2, 2], strides=[2, 2])                # [1,16,16,50]
    h = b.op("Relu", conv(b, h, 16, 32, 3, "cnn.1"))
    h = b.op("MaxPool", h, kernel_shape=[2, 2], strides=[2, 2])                # [1,32,8,25]
    h = b.op("Relu", batchnorm(b, conv(b, h, 32, 64, 3, "cnn.2", bias=False), 64, "cnn.2.bn"))
    h = b.op("MaxPool", h, kernel_shape=[2, 1], strides=[2, 1])                # [1,64,4,25]
    h = b.op("Relu", conv(b, h, 64, 64, 3, "cnn.3"))
    h = b.op("MaxPool", h, kernel_shape=[2, 1], strides=[2, 1])                # [1,64,2,25]
    h = b.op("Relu", conv(b, h, 64, 64, (2, 1), "cnn.4", pad=0))              # [1,64,1,25]
    h = b.op("Squeeze", h, b.const([2], np.int64))                             # [1,64,25]
    h = b.op("Transpose", h, perm=[2, 0, 1])                                   # [25,1,64]
    w, r, bias = rnn_weights(rng, 4, 2, hidden, 64)
    y = b.op("LSTM", h, b.weight("rnn.W", w), b.weight("rnn.R", r), b.weight("rnn.B", bias),
             hidden_size=hidden, direction="bidirectional")                    # [25,2,1,32]
    y = b.op("Transpose", y, perm=[0, 2, 1, 3])                                # [25,1,2,32]
    y = b.op("Reshape", y, b.const([0, 0, -1], np.int64))                      # [25,1,64]
    # Recurrent outputs are small (|h| of about 0.2), so the head uses a
    # larger gain to give logits of order one.
    y = linear(b, y, 2 * hidden, classes, "fc", gain=32.0)
    b.op("LogSoftmax", y, axis=2, out="log_probs")
    b.output("log_probs", FLOAT, [25, 1, classes])
    model = b.model(13, "CRNN OCR: CNN + bidirectional LSTM + LogSoftmax")
    return model, [{"image": f32(rng.uniform(0.0, 1.0, (1, 1, 32, 100)))}]


def build_vad_style(rng):
    """Opset 16.  Silero-VAD-like streaming model with all weights in
    Constant nodes.  Inputs: input [1,512] audio, state [2,1,64] (h and c of
    the LSTM), sr int64 scalar.  An If on sr == 16000 picks one of two
    learned "STFT" Conv1d front-ends (different kernel and stride, hence a
    different number of frames; their weights live inside the branches).
    A magnitude computation, two Conv1d + Relu layers, a time average, one
    LSTM step initialised from `state`, and a Sigmoid head follow.
    Outputs: output [1,1] speech probability and stateN [2,1,64]."""
    b = Builder("vad_style", rng, weights="constant")
    bins, hidden = 16, 64
    audio = b.input("input", FLOAT, [1, 512])
    state = b.input("state", FLOAT, [2, 1, hidden])
    sr = b.input("sr", INT64, [])

    is16k = b.op("Equal", sr, b.const(np.int64(16000)))
    x3 = b.op("Unsqueeze", audio, b.const([1], np.int64))  # [1,1,512]

    def front_end(name, kernel, stride):
        # The real and imaginary parts of `bins` filters, as 2*bins channels.
        g = b.subgraph(name)
        y = conv(g, x3, 1, 2 * bins, (kernel,), f"{name}.stft", stride=stride, pad=0,
                 bias=False, gain=1.0)
        g.output(y, FLOAT, None)
        return g.graph()

    spec = b.op("If", is16k, then_branch=front_end("sr16k", 64, 32),
                else_branch=front_end("sr8k", 32, 16))                  # [1,32,frames]
    real = b.op("Slice", spec, b.const([0], np.int64), b.const([bins], np.int64),
                b.const([1], np.int64))
    imag = b.op("Slice", spec, b.const([bins], np.int64), b.const([2 * bins], np.int64),
                b.const([1], np.int64))
    power = b.op("Add", b.op("Mul", real, real), b.op("Mul", imag, imag))
    mag = b.op("Sqrt", b.op("Add", power, b.const(np.float32(1e-6))))   # [1,16,frames]
    h = b.op("Relu", conv(b, mag, bins, 32, (3,), "encoder.0"))
    h = b.op("Relu", conv(b, h, 32, hidden, (3,), "encoder.1", stride=2))
    h = b.op("ReduceMean", h, axes=[2], keepdims=0)                    # [1,64]
    h = b.op("Unsqueeze", h, b.const([0], np.int64))                   # [seq=1,1,64]

    h0 = b.op("Slice", state, b.const([0], np.int64), b.const([1], np.int64),
              b.const([0], np.int64))
    c0 = b.op("Gather", state, b.const([1], np.int64), axis=0)
    w, r, bias = rnn_weights(rng, 4, 1, hidden, hidden)
    _, y_h, y_c = b.op("LSTM", h, b.weight("decoder.rnn.W", w), b.weight("decoder.rnn.R", r),
                       b.weight("decoder.rnn.B", bias), "", h0, c0,
                       hidden_size=hidden, n_out=3)
    b.op("Concat", y_h, y_c, axis=0, out="stateN")
    d = b.op("Relu", b.op("Squeeze", y_h, b.const([0], np.int64)))     # [1,64]
    # Recurrent outputs are small (|h| of about 0.2), so the head uses a
    # larger gain to give logits of order one.
    b.op("Sigmoid", linear(b, d, hidden, 1, "decoder.out", gain=32.0), out="output")
    b.output("output", FLOAT, [1, 1])
    b.output("stateN", FLOAT, [2, 1, hidden])
    model = b.model(16, "Silero-VAD-style model: If on sample rate, Conv1d, LSTM state")
    feeds = [
        {"input": normal_input(rng, (1, 512), 0.3),
         "state": np.zeros((2, 1, hidden), np.float32),
         "sr": np.array(16000, np.int64)},
        {"input": normal_input(rng, (1, 512), 0.3),
         "state": normal_input(rng, (2, 1, hidden), 0.3),
         "sr": np.array(8000, np.int64)},
    ]
    return model, feeds


def build_dynamic_dims(rng):
    """Opset 18.  Shapes are symbolic (batch, seq) and all shape arithmetic
    happens in the graph: Shape, Gather, Unsqueeze, Concat, Range, Cast,
    ConstantOfShape, Where (length mask), Expand (a CLS token to batch),
    Reshape with computed shapes, Slice with computed ends and negative
    steps, ReduceSum and ReduceMean with axes as inputs (opset-18 form)."""
    b = Builder("dynamic_dims", rng)
    feat, out_dim = 16, 8
    x = b.input("x", FLOAT, ["batch", "seq", feat])
    lengths = b.input("lengths", INT64, ["batch"])
    one = b.const([1], np.int64)

    shape = b.op("Shape", x)
    batch = b.op("Gather", shape, b.const(np.int64(0)), axis=0)       # scalar
    seq = b.op("Gather", shape, b.const(np.int64(1)), axis=0)         # scalar
    pos = b.op("Range", b.const(np.int64(0)), seq, b.const(np.int64(1)))  # [seq]

    # Sinusoidal position encoding from the runtime sequence length.
    posf = b.op("Unsqueeze", b.op("Cast", pos, to=FLOAT), one)       # [seq,1]
    freqs = b.const(f32(1.0 / (10.0 ** (np.arange(feat) / feat))))
    xp = b.op("Add", x, b.op("Sin", b.op("Mul", posf, freqs)))

    # Zero the padded positions: mask[b, s] = s < lengths[b].
    mask = b.op("Less", b.op("Unsqueeze", pos, b.const([0], np.int64)),
                b.op("Unsqueeze", lengths, one))                       # [batch,seq]
    mask3 = b.op("Unsqueeze", mask, b.const([2], np.int64))            # [batch,seq,1]
    zeros = b.op("ConstantOfShape", shape,
                 value=numpy_helper.from_array(np.zeros(1, np.float32)))
    xm = b.op("Where", mask3, xp, zeros)

    # Prepend a learned CLS token, expanded to the runtime batch size.
    cls_shape = b.op("Concat", b.op("Unsqueeze", batch, b.const([0], np.int64)),
                     b.const([1, feat], np.int64), axis=0)
    cls = b.op("Expand", b.weight("cls_token", normal_input(rng, (1, 1, feat), 0.5)), cls_shape)
    tokens = b.op("Concat", cls, xm, axis=1)                           # [batch,seq+1,feat]

    flat = b.op("Reshape", tokens, b.const([-1, feat], np.int64))
    proj = b.op("Tanh", linear(b, flat, feat, out_dim, "proj", gain=1.0))
    seq1 = b.op("Add", seq, b.const(np.int64(1)))
    out_shape = b.op("Concat", b.op("Unsqueeze", batch, b.const([0], np.int64)),
                     b.op("Unsqueeze", seq1, b.const([0], np.int64)),
                     b.const([out_dim], np.int64), axis=0)
    y = b.op("Reshape", proj, out_shape)                               # [batch,seq+1,8]

    first = b.op("Slice", y, b.const([0], np.int64), one, one)
    b.op("Squeeze", first, one, out="cls")
    body = b.op("Slice", y, one, b.op("Unsqueeze", seq1, b.const([0], np.int64)), one)
    maskf = b.op("Cast", mask3, to=FLOAT)
    summed = b.op("ReduceSum", b.op("Mul", body, maskf), one, keepdims=0)
    count = b.op("ReduceSum", maskf, one, keepdims=0)
    b.op("Div", summed, count, out="pooled")
    b.op("ReduceMean", body, b.const([2], np.int64), keepdims=0, out="token_mean")
    b.op("Slice", body, b.const([-1], np.int64), b.const([INT64_MIN], np.int64), one,
         b.const([-1], np.int64), out="tokens_reversed")
    b.output("pooled", FLOAT, ["batch", out_dim])
    b.output("cls", FLOAT, ["batch", out_dim])
    b.output("token_mean", FLOAT, ["batch", "seq"])
    b.output("tokens_reversed", FLOAT, ["batch", "seq", out_dim])
    model = b.model(18, "Symbolic batch/seq with in-graph shape computation")
    feeds = [
        {"x": normal_input(rng, (2, 7, feat)), "lengths": np.array([7, 4], np.int64)},
        {"x": normal_input(rng, (3, 5, feat)), "lengths": np.array([5, 1, 3], np.int64)},
    ]
    return model, feeds


def build_qdq_conv(rng):
    """Opset 13.  QDQ-quantized CNN in the layout onnxruntime's quantizer
    produces: uint8 activations (QuantizeLinear -> DequantizeLinear pairs),
    int8 symmetric per-channel weights (DequantizeLinear with axis=0), int32
    per-channel biases, QDQ after each Relu and after GlobalAveragePool, and
    a QDQ Gemm.  Activation scales are calibrated on the test input."""
    layers = [("conv1", 3, 16, 1), ("conv2", 16, 32, 2), ("conv3", 32, 32, 1)]
    weights = {}
    for name, cin, cout, _ in layers:
        weights[name] = (he_normal(rng, (cout, cin, 3, 3), cin * 9), small(rng, cout))
    weights["fc"] = (he_normal(rng, (10, 32), 32, gain=1.0), small(rng, 10))
    feeds = {"input": normal_input(rng, (1, 3, 32, 32))}

    def build(qparams):
        """Builds the model; activations without qparams get a placeholder."""
        # The weights are already drawn, so this builder needs no generator.
        b = Builder("qdq_conv", rng=None)
        x = b.input("input", FLOAT, [1, 3, 32, 32])

        def qdq(t):
            scale, zp = qparams.get(t, (np.float32(1.0), np.uint8(0)))
            s = b.weight(f"{t}.scale", np.float32(scale))
            z = b.weight(f"{t}.zero_point", np.uint8(zp))
            return b.op("DequantizeLinear", b.op("QuantizeLinear", t, s, z), s, z)

        def qdq_weight(name, w, bias, x_scale):
            wq, ws = quantize_per_channel_s8(w)
            bs = f32(x_scale * ws)
            bq = np.rint(bias / bs).astype(np.int32)
            wd = b.op("DequantizeLinear", b.weight(f"{name}.weight_quantized", wq),
                      b.weight(f"{name}.weight_scale", ws),
                      b.weight(f"{name}.weight_zero_point", np.zeros_like(wq, shape=ws.shape)),
                      axis=0)
            bd = b.op("DequantizeLinear", b.weight(f"{name}.bias_quantized", bq),
                      b.weight(f"{name}.bias_scale", bs),
                      b.weight(f"{name}.bias_zero_point", np.zeros(bq.shape, np.int32)),
                      axis=0)
            return wd, bd

        h, h_name = qdq(x), x
        for name, _, _, stride in layers:
            wd, bd = qdq_weight(name, *weights[name], qparams.get(h_name, (1.0,))[0])
            c = b.op("Conv", h, wd, bd, kernel_shape=[3, 3], strides=[stride] * 2,
                     pads=[1, 1, 1, 1])
            h_name = b.op("Relu", c, out=f"{name}.relu")
            h = qdq(h_name)
        h_name = b.op("GlobalAveragePool", h, out="gap")
        h = b.op("Flatten", qdq(h_name), axis=1)
        wd, bd = qdq_weight("fc", *weights["fc"], qparams.get(h_name, (1.0,))[0])
        b.op("Gemm", h, wd, bd, transB=1, out="logits")
        b.output("logits", FLOAT, [1, 10])
        return b.model(13, "QDQ CNN: uint8 activations, int8 per-channel weights")

    # Calibrate one activation at a time so that each measured range already
    # reflects the quantization of everything before it.
    qparams = {"input": calibrate(feeds["input"], "input")}
    for t in ("conv1.relu", "conv2.relu", "conv3.relu", "gap"):
        (values,) = probe(build(qparams), [t], feeds)
        qparams[t] = calibrate(values, t)
    return build(qparams), [feeds]


def build_qlinear_ops(rng):
    """Opset 13 (the ops date from opset 10).  Integer-operator quantized
    network: QuantizeLinear -> QLinearConv (int8 per-channel weights, int32
    bias) -> ConvInteger (uint8 weights with zero point 128, stride 2) ->
    Cast/Mul rescale + Relu -> QuantizeLinear -> QLinearMatMul (int8
    weights) -> MatMulInteger (int8 weights) -> Cast/Mul/Add -> logits.
    The uint8 results of QLinearConv and QLinearMatMul are also outputs, so
    integer rounding is checked exactly.  Scales are calibrated in numpy.
    The int8 weights use 7 bits (as onnxruntime's reduce_range), so that the
    expected outputs onnxruntime computes are exact on every x86 CPU: without
    VNNI its uint8 x int8 kernels add pairs of products in saturating int16
    (tests/models/ort_int8.py)."""
    b = Builder("qlinear_ops", rng)
    x_in = normal_input(rng, (1, 4, 16, 16))
    w1 = he_normal(rng, (8, 4, 3, 3), 36)
    b1 = small(rng, 8)
    w2 = he_normal(rng, (8, 8, 3, 3), 72)
    w3 = he_normal(rng, (512, 16), 512, gain=1.0)
    w4 = he_normal(rng, (16, 10), 16, gain=1.0)
    b4 = small(rng, 10)

    # Calibration, stage by stage, on the test input.  Integer accumulators
    # are computed exactly (float32 convolutions of small integers are exact
    # below 2**24), so every requantization input is known exactly.
    s0, zp0 = calibrate(x_in, "x")
    xq = quantize_u8(x_in, s0, zp0)
    w1q, s_w1 = quantize_per_channel_s8(w1, 63)
    b1q = np.rint(b1 / (s0 * s_w1)).astype(np.int32)
    acc1 = run_single_node("Conv", [f32(xq.astype(np.float32) - zp0), f32(w1q)],
                           pads=[1, 1, 1, 1]).astype(np.float64) + b1q.reshape(-1, 1, 1)
    y1 = acc1 * (np.float64(s0) * s_w1).reshape(-1, 1, 1)
    s1, zp1 = calibrate(y1, "conv1")
    y1q = quantize_u8(y1, s1, zp1)
    s_w2, zp_w2 = asym_qparams(w2)
    w2q = quantize_u8(w2, s_w2, zp_w2)
    acc2 = run_single_node("Conv", [f32(y1q.astype(np.float32) - zp1),
                                    f32(w2q.astype(np.float32) - zp_w2)],
                           pads=[1, 1, 1, 1], strides=[2, 2])
    # The graph computes Cast(acc) * rescale in float32, exactly as here.
    f2 = np.maximum(acc2 * np.float32(s1 * s_w2), np.float32(0)).reshape(1, 512)
    s2, zp2 = calibrate(f2, "fc1.x")  # zp2 is 0 because f2 >= 0.
    s_w3 = np.float32(np.abs(w3).max() / 63.0)
    w3q = np.clip(np.rint(w3 / s_w3), -63, 63).astype(np.int8)
    acc3 = (quantize_u8(f2, s2, zp2).astype(np.int64) - int(zp2)) @ w3q.astype(np.int64)
    s3, zp3 = calibrate(acc3 * (np.float64(s2) * np.float64(s_w3)), "fc1")
    s_w4 = np.float32(np.abs(w4).max() / 63.0)
    w4q = np.clip(np.rint(w4 / s_w4), -63, 63).astype(np.int8)

    x = b.input("x", FLOAT, [1, 4, 16, 16])
    xs, xz = b.weight("x.scale", s0), b.weight("x.zero_point", zp0)
    xq = b.op("QuantizeLinear", x, xs, xz)
    b.op("QLinearConv", xq, xs, xz,
         b.weight("conv1.weight_quantized", w1q), b.weight("conv1.weight_scale", s_w1),
         b.weight("conv1.weight_zero_point", np.zeros(8, np.int8)),
         b.weight("conv1.y_scale", s1), b.weight("conv1.y_zero_point", zp1),
         b.weight("conv1.bias_quantized", b1q),
         kernel_shape=[3, 3], pads=[1, 1, 1, 1], out="conv1_q")
    acc = b.op("ConvInteger", "conv1_q", b.weight("conv2.weight_quantized", w2q),
               "conv1.y_zero_point", b.weight("conv2.weight_zero_point", zp_w2),
               kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])  # int32 [1,8,8,8]
    f = b.op("Mul", b.op("Cast", acc, to=FLOAT), b.weight("conv2.rescale", np.float32(s1 * s_w2)))
    f = b.op("Reshape", b.op("Relu", f), b.const([1, 512], np.int64))
    fs, fz = b.weight("fc1.x_scale", s2), b.weight("fc1.x_zero_point", zp2)
    b.op("QLinearMatMul", b.op("QuantizeLinear", f, fs, fz), fs, fz,
         b.weight("fc1.weight_quantized", w3q), b.weight("fc1.weight_scale", s_w3),
         b.weight("fc1.weight_zero_point", np.int8(0)),
         b.weight("fc1.y_scale", s3), b.weight("fc1.y_zero_point", zp3), out="fc1_q")
    acc = b.op("MatMulInteger", "fc1_q", b.weight("fc2.weight_quantized", w4q),
               "fc1.y_zero_point", b.weight("fc2.weight_zero_point", np.int8(0)))
    f = b.op("Mul", b.op("Cast", acc, to=FLOAT), b.weight("fc2.rescale", np.float32(s3 * s_w4)))
    b.op("Add", f, b.weight("fc2.bias", b4), out="logits")
    b.output("logits", FLOAT, [1, 10])
    b.output("conv1_q", UINT8, [1, 8, 16, 16])
    b.output("fc1_q", UINT8, [1, 16])
    model = b.model(13, "QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger")
    return model, [{"x": x_in}]


def build_misc_ops(rng):
    """Opset 14.  A grab-bag of ops: Einsum, TopK, ArgMax, CumSum (exclusive),
    GatherElements, ScatterND, Tile, Softmax(axis=-1), Trilu (lower and
    upper with k), OneHot, NonZero (data-dependent output shape), and an
    image path with Pad(reflect), InstanceNormalization, LRN, PRelu,
    DepthToSpace (CRD and DCR) and LeakyRelu.  Also uses the Constant
    node's value_ints / value_int / value_float attributes."""
    b = Builder("misc_ops", rng)
    a = b.input("a", FLOAT, [2, 3, 4])
    m = b.input("b", FLOAT, [2, 4, 5])
    img = b.input("img", FLOAT, [1, 8, 6, 6])

    e = b.op("Einsum", a, m, equation="bij,bjk->bik")                  # [2,3,5]
    k = b.op("Constant", value_ints=[3])
    b.op("TopK", e, k, axis=-1, largest=1, sorted=1, out=["topk_values", "topk_indices"])
    b.op("ArgMax", e, axis=2, keepdims=0, out="argmax")                # [2,3] int64
    cs = b.op("CumSum", e, b.op("Constant", value_int=2), exclusive=1, reverse=0)
    b.op("GatherElements", cs, "topk_indices", axis=2, out="gathered")
    sc = b.op("ScatterND", e, b.const([[0, 1], [1, 2]], np.int64),
              b.const(normal_input(rng, (2, 5))))
    tiled = b.op("Tile", sc, b.const([1, 2, 1], np.int64))             # [2,6,5]
    b.op("Softmax", tiled, axis=-1, out="softmax")
    sq = b.op("MatMul", e, b.op("Transpose", e, perm=[0, 2, 1]))        # [2,3,3]
    b.op("Trilu", sq, upper=0, out="tril")
    b.op("Trilu", sq, b.const(np.int64(1)), upper=1, out="triu_k1")
    oh = b.op("OneHot", "argmax", b.const(np.int64(5)), b.const([0.0, 1.0], np.float32), axis=-1)
    b.op("ReduceSum", b.op("Mul", oh, e), b.const([2], np.int64), keepdims=0, out="onehot_max")
    b.op("NonZero", b.op("Greater", e, b.op("Constant", value_float=0.5)), out="nonzero")

    p = b.op("Pad", img, b.const([0, 0, 1, 1, 0, 0, 1, 1], np.int64), mode="reflect")  # [1,8,8,8]
    p = b.op("InstanceNormalization", p, b.weight("in.scale", f32(rng.uniform(0.8, 1.2, 8))),
             b.weight("in.bias", small(rng, 8, 0.1)), epsilon=1e-5)
    p = b.op("LRN", p, size=3, alpha=0.5, beta=0.75, bias=1.0)
    p = b.op("PRelu", p, b.weight("prelu.slope", f32(rng.uniform(0.05, 0.3, (8, 1, 1)))))
    b.op("LeakyRelu", b.op("DepthToSpace", p, blocksize=2, mode="CRD"), alpha=0.1, out="d2s_crd")
    b.op("DepthToSpace", p, blocksize=2, mode="DCR", out="d2s_dcr")

    b.output("topk_values", FLOAT, [2, 3, 3])
    b.output("topk_indices", INT64, [2, 3, 3])
    b.output("argmax", INT64, [2, 3])
    b.output("gathered", FLOAT, [2, 3, 3])
    b.output("softmax", FLOAT, [2, 6, 5])
    b.output("tril", FLOAT, [2, 3, 3])
    b.output("triu_k1", FLOAT, [2, 3, 3])
    b.output("onehot_max", FLOAT, [2, 3])
    b.output("nonzero", INT64, [3, "nnz"])
    b.output("d2s_crd", FLOAT, [1, 2, 16, 16])
    b.output("d2s_dcr", FLOAT, [1, 2, 16, 16])
    model = b.model(14, "Grab-bag of tensor-manipulation and normalization ops")
    feeds = {"a": normal_input(rng, (2, 3, 4)), "b": normal_input(rng, (2, 4, 5)),
             "img": normal_input(rng, (1, 8, 6, 6))}
    return model, [feeds]


MODELS = {
    "mlp": build_mlp,
    "resnet_style": build_resnet_style,
    "mobilenet_style": build_mobilenet_style,
    "transformer_encoder": build_transformer_encoder,
    "transformer_encoder_decomposed": build_transformer_encoder_decomposed,
    "transformer_encoder_opset21": build_transformer_encoder_opset21,
    "lstm": build_lstm,
    "gru": build_gru,
    "rnn": build_rnn,
    "if_graph": build_if_graph,
    "loop_graph": build_loop_graph,
    "detector_style": build_detector_style,
    "ocr_crnn": build_ocr_crnn,
    "vad_style": build_vad_style,
    "dynamic_dims": build_dynamic_dims,
    "qdq_conv": build_qdq_conv,
    "qlinear_ops": build_qlinear_ops,
    "misc_ops": build_misc_ops,
}


# ---------------------------------------------------------------------------
# Writing and checking
# ---------------------------------------------------------------------------


def all_op_types(graph):
    """Returns the op types used in a graph and all of its subgraphs."""
    ops = set()
    for node in graph.node:
        ops.add(node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                ops |= all_op_types(attr.g)
            for g in attr.graphs:
                ops |= all_op_types(g)
    return ops


def describe(array):
    """One-line statistics of an output, used to spot degenerate models."""
    if array.dtype.kind == "f":
        return (f"{array.dtype}{list(array.shape)} min={array.min():.3g} "
                f"max={array.max():.3g} std={array.std():.3g} "
                f"zeros={np.mean(array == 0):.0%}")
    return f"{array.dtype}{list(array.shape)} min={array.min()} max={array.max()}"


def write_model(out_dir, name, model, feed_sets):
    """Checks `model`, runs it on each feed set and writes the test case.

    Returns the size of the case folder in bytes and one line of statistics
    per output and data set.
    """
    onnx.checker.check_model(model, full_check=True)
    initializers = {t.name for t in model.graph.initializer}
    data_inputs = [i.name for i in model.graph.input if i.name not in initializers]
    out_names = [o.name for o in model.graph.output]

    case_dir = os.path.join(out_dir, name)
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)  # Drop stale data sets from earlier runs.
    os.makedirs(case_dir)
    onnx.save(model, os.path.join(case_dir, "model.onnx"))
    session = make_session(model)

    stats = []
    for index, feeds in enumerate(feed_sets):
        if list(feeds) != data_inputs:
            raise ValueError(f"{name}: feeds {list(feeds)} do not match inputs {data_inputs}")
        outputs = session.run(out_names, feeds)
        set_dir = os.path.join(case_dir, f"test_data_set_{index}")
        os.makedirs(set_dir)
        for i, input_name in enumerate(data_inputs):
            tensor = numpy_helper.from_array(feeds[input_name], input_name)
            with open(os.path.join(set_dir, f"input_{i}.pb"), "wb") as f:
                f.write(tensor.SerializeToString())
        for i, (output_name, value) in enumerate(zip(out_names, outputs)):
            if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
                raise ValueError(f"{name}: output {output_name} is not finite")
            tensor = numpy_helper.from_array(np.asarray(value), output_name)
            with open(os.path.join(set_dir, f"output_{i}.pb"), "wb") as f:
                f.write(tensor.SerializeToString())
            stats.append(f"    set {index} {output_name}: {describe(np.asarray(value))}")

    size = sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(case_dir) for f in files)
    return size, stats


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="build/test-models", help="output folder")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="generate only these models")
    parser.add_argument("--list", action="store_true", help="list model names and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="print output statistics")
    args = parser.parse_args(argv)

    if args.list:
        for name in MODELS:
            print(name)
        return 0
    names = args.only or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")

    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    total = 0
    for name in names:
        # Seeding by name keeps each model stable when others are added.
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        model, feed_sets = MODELS[name](rng)
        size, stats = write_model(args.out, name, model, feed_sets)
        total += size
        opset = model.opset_import[0].version
        ops = sorted(all_op_types(model.graph))
        print(f"{name:32s} opset {opset:2d}  {len(feed_sets)} data set(s)  {size / 1024:8.1f} KiB  "
              f"{len(ops)} op types")
        if args.verbose:
            print("    ops: " + " ".join(ops))
            print("\n".join(stats))
    print(f"wrote {len(names)} models, {total / 1024:.1f} KiB, to {args.out} "
          f"in {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
