#!/usr/bin/env python3
"""Writes the generated models of the CPU benchmark (random weights, real
architectures and sizes), in the layouts exporters produce:

  mobilenetv2_224     MobileNetV2 (width 1.0) at 224x224: 1x1 expand, 3x3
                      depthwise, Clip(0, 6), BatchNormalization after convs
  resnet18_224        ResNet-18 at 224x224 with BatchNormalization
  detector_320        a YOLO-style detector at 320x320: SiLU (x * Sigmoid(x))
                      convs, nearest 2x Resize + Concat FPN, three heads
  transformer_s128    two encoder layers, sequence 128, hidden 256, 4 heads,
                      FFN 1024, LayerNormalization and Erf-GELU (opset 17)

    gen_bench_models.py --out build/bench-models
"""
import argparse
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
from gen_models import FLOAT, Builder, batchnorm, conv, f32, linear, small  # noqa: E402


def conv_bn(b, x, cin, cout, k, name, stride=1, group=1, act="relu"):
    y = batchnorm(b, conv(b, x, cin, cout, k, name, stride=stride, group=group, bias=False), cout, name + ".bn")
    if act == "relu":
        return b.op("Relu", y)
    if act == "relu6":
        return b.op("Clip", y, b.const(np.float32(0.0)), b.const(np.float32(6.0)))
    if act == "silu":
        return b.op("Mul", y, b.op("Sigmoid", y))
    return y


def mobilenetv2(rng):
    b = Builder("mobilenetv2_224", rng)
    x = b.input("input", FLOAT, [1, 3, 224, 224])
    y = conv_bn(b, x, 3, 32, 3, "stem", stride=2, act="relu6")
    cin = 32
    cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
           (6, 320, 1, 1)]
    i = 0
    for t, c, n, s in cfg:
        for j in range(n):
            stride = s if j == 0 else 1
            hidden = cin * t
            h = y
            if t != 1:
                h = conv_bn(b, h, cin, hidden, 1, f"b{i}.expand", act="relu6")
            h = conv_bn(b, h, hidden, hidden, 3, f"b{i}.dw", stride=stride, group=hidden, act="relu6")
            h = conv_bn(b, h, hidden, c, 1, f"b{i}.project", act=None)
            y = b.op("Add", y, h) if stride == 1 and cin == c else h
            cin = c
            i += 1
    y = conv_bn(b, y, cin, 1280, 1, "head", act="relu6")
    y = b.op("Flatten", b.op("GlobalAveragePool", y), axis=1)
    w = f32(rng.standard_normal((1000, 1280)) * np.sqrt(1.0 / 1280))
    b.op("Gemm", y, b.weight("fc.weight", w), b.weight("fc.bias", small(rng, 1000)), transB=1, out="logits")
    b.output("logits", FLOAT, [1, 1000])
    return b.model(13, "MobileNetV2 at 224x224, random weights")


def resnet18(rng):
    b = Builder("resnet18_224", rng)
    x = b.input("input", FLOAT, [1, 3, 224, 224])
    y = conv_bn(b, x, 3, 64, 7, "stem", stride=2)
    y = b.op("MaxPool", y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (c, s) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)]):
        for blk in range(2):
            stride = s if blk == 0 else 1
            name = f"l{stage}.{blk}"
            h = conv_bn(b, y, cin, c, 3, name + ".c1", stride=stride)
            h = conv_bn(b, h, c, c, 3, name + ".c2", act=None)
            sc = y if stride == 1 and cin == c else conv_bn(b, y, cin, c, 1, name + ".down", stride=stride, act=None)
            y = b.op("Relu", b.op("Add", h, sc))
            cin = c
    y = b.op("Flatten", b.op("GlobalAveragePool", y), axis=1)
    w = f32(rng.standard_normal((1000, 512)) * np.sqrt(1.0 / 512))
    b.op("Gemm", y, b.weight("fc.weight", w), b.weight("fc.bias", small(rng, 1000)), transB=1, out="logits")
    b.output("logits", FLOAT, [1, 1000])
    return b.model(13, "ResNet-18 at 224x224, random weights")


def detector(rng):
    b = Builder("detector_320", rng)
    x = b.input("images", FLOAT, [1, 3, 320, 320])
    chans = [16, 32, 64, 128, 256]
    feats, y, cin = [], x, 3
    for i, c in enumerate(chans):
        y = conv_bn(b, y, cin, c, 3, f"down{i}", stride=2, act="silu")
        y = conv_bn(b, y, c, c, 3, f"blk{i}", act="silu")
        feats.append(y)
        cin = c
    scales = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    p5 = conv_bn(b, feats[4], 256, 128, 1, "lat5", act="silu")                      # 10x10
    up = b.op("Resize", p5, "", scales, mode="nearest", coordinate_transformation_mode="asymmetric",
              nearest_mode="floor")
    p4 = conv_bn(b, b.op("Concat", up, feats[3], axis=1), 256, 128, 3, "fpn4", act="silu")  # 20x20
    up = b.op("Resize", p4, "", scales, mode="nearest", coordinate_transformation_mode="asymmetric",
              nearest_mode="floor")
    p3 = conv_bn(b, b.op("Concat", up, feats[2], axis=1), 192, 64, 3, "fpn3", act="silu")   # 40x40
    outs = []
    classes = 80
    for name, p, c, hw in (("p3", p3, 64, 40), ("p4", p4, 128, 20), ("p5", p5, 128, 10)):
        t = conv_bn(b, p, c, 64, 3, f"head.{name}", act="silu")
        t = conv(b, t, 64, 4 + classes, 1, f"pred.{name}", pad=0, gain=1.0)
        outs.append(b.op("Reshape", t, b.const([1, 4 + classes, hw * hw], np.int64)))
    cat = b.op("Concat", *outs, axis=2)
    b.op("Sigmoid", cat, out="preds")
    b.output("preds", FLOAT, [1, 4 + classes, 40 * 40 + 20 * 20 + 10 * 10])
    return b.model(13, "YOLO-style detector at 320x320, random weights")


def transformer(rng):
    hidden, heads, seq, ffn, layers = 256, 4, 128, 1024, 2
    hd = hidden // heads
    b = Builder("transformer_s128", rng)
    x = b.input("x", FLOAT, [1, seq, hidden])
    split = b.const([0, 0, heads, hd], np.int64)
    merge = b.const([0, 0, hidden], np.int64)
    h = x
    for l in range(layers):
        def heads_of(t, perm):
            return b.op("Transpose", b.op("Reshape", t, split), perm=perm)
        q = heads_of(linear(b, h, hidden, hidden, f"l{l}.q", gain=1.0), [0, 2, 1, 3])
        k = heads_of(linear(b, h, hidden, hidden, f"l{l}.k", gain=1.0), [0, 2, 3, 1])
        v = heads_of(linear(b, h, hidden, hidden, f"l{l}.v", gain=1.0), [0, 2, 1, 3])
        s = b.op("Div", b.op("MatMul", q, k), b.const(np.float32(np.sqrt(hd))))
        p = b.op("Softmax", s, axis=-1)
        c = b.op("Reshape", b.op("Transpose", b.op("MatMul", p, v), perm=[0, 2, 1, 3]), merge)
        a = linear(b, c, hidden, hidden, f"l{l}.o", gain=1.0)
        g1 = b.weight(f"l{l}.ln1.w", f32(rng.uniform(0.8, 1.2, hidden)))
        b1 = b.weight(f"l{l}.ln1.b", small(rng, hidden))
        h = b.op("LayerNormalization", b.op("Add", h, a), g1, b1, axis=-1, epsilon=1e-5)
        f = linear(b, h, hidden, ffn, f"l{l}.fc1")
        e = b.op("Erf", b.op("Div", f, b.const(np.float32(np.sqrt(2.0)))))
        f = b.op("Mul", b.op("Mul", f, b.op("Add", e, b.const(np.float32(1.0)))), b.const(np.float32(0.5)))
        f = linear(b, f, ffn, hidden, f"l{l}.fc2", gain=1.0)
        g2 = b.weight(f"l{l}.ln2.w", f32(rng.uniform(0.8, 1.2, hidden)))
        b2 = b.weight(f"l{l}.ln2.b", small(rng, hidden))
        h = b.op("LayerNormalization", b.op("Add", h, f), g2, b2, axis=-1, epsilon=1e-5,
                 out="y" if l == layers - 1 else None)
    b.output("y", FLOAT, [1, seq, hidden])
    return b.model(17, "Transformer encoder, 2 layers, seq 128, hidden 256")


def write_models(out, models, seed):
    """Builds each (name, build) with a generator seeded `seed`, checks it
    and writes OUT/name/model.onnx."""
    for name, build in models:
        model = build(np.random.default_rng(seed))
        onnx.checker.check_model(model)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        onnx.save(model, os.path.join(d, "model.onnx"))
        print("wrote", name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    write_models(args.out, (("mobilenetv2_224", mobilenetv2), ("resnet18_224", resnet18),
                            ("detector_320", detector), ("transformer_s128", transformer)), 7)


if __name__ == "__main__":
    main()
