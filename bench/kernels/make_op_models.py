"""Writes single-node ONNX models (typical CNN and transformer layers) for
timing one kernel at a time against onnxruntime with compare_models.py:

    python make_op_models.py OUT_DIR
    python compare_models.py --bench build/tests/bench-model OUT_DIR/*.onnx
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(out, name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, os.path.join(out, name + ".onnx"))


def conv(out, name, c, h, w, m, k, s, group=1, relu=True):
    rng = np.random.default_rng(0)
    wt = rng.standard_normal((m, c // group, k, k)).astype(np.float32) * 0.1
    b = rng.standard_normal(m).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[s, s],
                              pads=[k // 2] * 4, group=group)]
    nodes.append(helper.make_node("Relu", ["c"], ["y"]) if relu else helper.make_node("Identity", ["c"], ["y"]))
    oh, ow = (h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1
    save(out, name, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, oh, ow])],
         [numpy_helper.from_array(wt, "w"), numpy_helper.from_array(b, "b")])


def unary(out, name, op, shape, **attrs):
    save(out, name, [helper.make_node(op, ["x"], ["y"], **attrs)],
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [])


def transformer(out, name, seq=128, hidden=256, heads=4, ffn=1024, layers=2):
    """Post-LN encoder layers with LayerNormalization and exact GELU (Erf),
    weights as initializers, the shape a BERT-style export has."""
    rng = np.random.default_rng(1)
    nodes, inits = [], []
    hd = hidden // heads

    def w(name_, *shape, scale=0.05):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name_))
        return name_

    def const(name_, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name_))
        return name_

    cnt = [0]

    def op(t, ins, **attrs):
        cnt[0] += 1
        o = f"{t.lower()}_{cnt[0]}"
        nodes.append(helper.make_node(t, ins, [o], **attrs))
        return o

    def linear(x, i, o, tag):
        return op("Add", [op("MatMul", [x, w(tag + ".w", i, o)]), w(tag + ".b", o)])

    split = const("split_shape", np.array([0, 0, heads, hd], np.int64))
    merge = const("merge_shape", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.float32(np.sqrt(hd)))
    sqrt2 = const("sqrt2", np.float32(np.sqrt(2.0)))
    one = const("one", np.float32(1.0))
    half = const("half", np.float32(0.5))
    x = "x"
    for l in range(layers):
        t = f"l{l}"
        q = op("Transpose", [op("Reshape", [linear(x, hidden, hidden, t + ".q"), split])], perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [linear(x, hidden, hidden, t + ".k"), split])], perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [linear(x, hidden, hidden, t + ".v"), split])], perm=[0, 2, 1, 3])
        p = op("Softmax", [op("Div", [op("MatMul", [q, k]), scale])], axis=-1)
        c = op("Reshape", [op("Transpose", [op("MatMul", [p, v])], perm=[0, 2, 1, 3]), merge])
        h = op("LayerNormalization", [op("Add", [x, linear(c, hidden, hidden, t + ".o")]),
                                      w(t + ".ln1.g", hidden), w(t + ".ln1.b", hidden)], axis=-1)
        f1 = linear(h, hidden, ffn, t + ".fc1")
        g = op("Mul", [op("Mul", [f1, op("Add", [op("Erf", [op("Div", [f1, sqrt2])]), one])]), half])
        x = op("LayerNormalization", [op("Add", [h, linear(g, ffn, hidden, t + ".fc2")]),
                                      w(t + ".ln2.g", hidden), w(t + ".ln2.b", hidden)], axis=-1)
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, os.path.join(out, name + ".onnx"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    conv(out, "conv1x1_256_56", 256, 56, 56, 64, 1, 1)
    conv(out, "conv3x3_64_56", 64, 56, 56, 64, 3, 1)
    conv(out, "conv3x3_256_14", 256, 14, 14, 256, 3, 1)
    conv(out, "conv3x3_512_7", 512, 7, 7, 512, 3, 1)
    conv(out, "conv7x7s2_3_224", 3, 224, 224, 64, 7, 2)
    conv(out, "dw3x3_32_112", 32, 112, 112, 32, 3, 1, group=32)
    conv(out, "dw3x3s2_96_112", 96, 112, 112, 96, 3, 2, group=96)
    conv(out, "dw3x3_512_14", 512, 14, 14, 512, 3, 1, group=512)
    conv(out, "dw5x5_240_14", 240, 14, 14, 240, 5, 1, group=240)
    unary(out, "maxpool3x3s2_64_112", "MaxPool", [1, 64, 112, 112], kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 1, 1, 1])
    unary(out, "softmax_8x128x128", "Softmax", [8, 128, 128], axis=-1)
    unary(out, "gelu_128x1024", "Sigmoid", [128, 1024])
    transformer(out, "transformer_s128_h256")


if __name__ == "__main__":
    main()
