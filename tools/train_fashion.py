#!/usr/bin/env python3
"""Train a CNN on Fashion-MNIST (Debian package dataset-fashion-mnist) and
export it to ONNX: a real, trained model large enough (106k parameters) for
the quantization tests' size and accuracy targets, next to the tiny digits
model. Plain numpy, with the layer code of tools/train_digits.py.

Architecture (NCHW, input [N,1,28,28], pixel values divided by 255):

    Conv 3x3 (1->16, pad 1) -> Relu -> MaxPool 2x2
    Conv 3x3 (16->32, pad 1) -> Relu -> MaxPool 2x2
    Flatten -> Gemm (1568->64) -> Relu -> Gemm (64->10) -> logits

Usage:

    .venv/bin/python tools/train_fashion.py --out models/fashion

Seeded and single-threaded (BLAS pinned to one thread), so it reproduces the
same model. The test images and labels are not copied: tests read them from
/usr/share/datasets/fashion-mnist.
"""

import argparse
import gzip
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_digits import (conv_backward, conv_forward, maxpool_backward,  # noqa: E402
                          maxpool_forward, softmax_cross_entropy)

DATA = "/usr/share/datasets/fashion-mnist"
NAMES = ["conv1_w", "conv1_b", "conv2_w", "conv2_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b"]


def read_idx(path):
    """Reads an IDX file (the MNIST format): big-endian dims, then uint8."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    """(images float32 [N,1,28,28] in [0,1], labels int64) of 'train' or 't10k'."""
    x = read_idx(os.path.join(DATA, f"{split}-images-idx3-ubyte.gz")).astype(np.float32) / np.float32(255)
    y = read_idx(os.path.join(DATA, f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    return x.reshape(-1, 1, 28, 28), y


def init_params(rng):
    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    return {
        "conv1_w": he((16, 1, 3, 3), 9), "conv1_b": np.zeros(16, np.float32),
        "conv2_w": he((32, 16, 3, 3), 144), "conv2_b": np.zeros(32, np.float32),
        "fc1_w": he((64, 1568), 1568), "fc1_b": np.zeros(64, np.float32),
        "fc2_w": he((10, 64), 64), "fc2_b": np.zeros(10, np.float32),
    }


def forward(p, x):
    c1, cols1 = conv_forward(x, p["conv1_w"], p["conv1_b"])
    r1 = np.maximum(c1, 0)
    p1, idx1 = maxpool_forward(r1)          # [N,16,14,14]
    c2, cols2 = conv_forward(p1, p["conv2_w"], p["conv2_b"])
    r2 = np.maximum(c2, 0)
    p2, idx2 = maxpool_forward(r2)          # [N,32,7,7]
    f = p2.reshape(p2.shape[0], -1)
    h = f @ p["fc1_w"].T + p["fc1_b"]
    rh = np.maximum(h, 0)
    logits = rh @ p["fc2_w"].T + p["fc2_b"]
    return logits, (x, cols1, c1, r1, idx1, p1, cols2, c2, r2, idx2, p2, f, h, rh)


def backward(p, cache, dlogits):
    x, cols1, c1, r1, idx1, p1, cols2, c2, r2, idx2, p2, f, h, rh = cache
    g = {"fc2_w": dlogits.T @ rh, "fc2_b": dlogits.sum(0)}
    dh = (dlogits @ p["fc2_w"]) * (h > 0)
    g["fc1_w"], g["fc1_b"] = dh.T @ f, dh.sum(0)
    dr2 = maxpool_backward((dh @ p["fc1_w"]).reshape(p2.shape), idx2, r2.shape)
    dp1, g["conv2_w"], g["conv2_b"] = conv_backward(dr2 * (c2 > 0), cols2, p1.shape, p["conv2_w"])
    dr1 = maxpool_backward(dp1, idx1, r1.shape)
    _, g["conv1_w"], g["conv1_b"] = conv_backward(dr1 * (c1 > 0), cols1, x.shape, p["conv1_w"])
    return g


def predict(p, x, batch=500):
    return np.concatenate([forward(p, x[i:i + batch])[0] for i in range(0, len(x), batch)])


def train(x, y, xt, yt, epochs, batch, lr, seed):
    """Adam with a cosine decay; float32 throughout for speed."""
    rng = np.random.default_rng(seed)
    p = init_params(rng)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(val) for k, val in p.items()}
    step = 0
    for epoch in range(1, epochs + 1):
        lr_e = lr * 0.5 * (1 + np.cos(np.pi * (epoch - 1) / epochs))
        order = rng.permutation(len(x))
        t0, total = time.time(), 0.0
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            logits, cache = forward(p, x[idx])
            loss, dl = softmax_cross_entropy(logits, y[idx])
            total += loss * len(idx)
            g = backward(p, cache, dl.astype(np.float32))
            step += 1
            for k in NAMES:
                m[k] = 0.9 * m[k] + 0.1 * g[k]
                v[k] = 0.999 * v[k] + 0.001 * g[k] ** 2
                p[k] -= (lr_e * (m[k] / (1 - 0.9 ** step)) / (np.sqrt(v[k] / (1 - 0.999 ** step)) + 1e-8)).astype(
                    np.float32)
        acc = (predict(p, xt).argmax(1) == yt).mean()
        print(f"epoch {epoch}  loss {total / len(x):.4f}  test acc {acc:.4f}  ({time.time() - t0:.0f} s)", flush=True)
    return p, acc


def export(p, acc, args):
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["input", "conv1_w", "conv1_b"], ["conv1_out"], name="conv1", **conv),
        helper.make_node("Relu", ["conv1_out"], ["relu1_out"], name="relu1"),
        helper.make_node("MaxPool", ["relu1_out"], ["pool1_out"], name="pool1", **pool),
        helper.make_node("Conv", ["pool1_out", "conv2_w", "conv2_b"], ["conv2_out"], name="conv2", **conv),
        helper.make_node("Relu", ["conv2_out"], ["relu2_out"], name="relu2"),
        helper.make_node("MaxPool", ["relu2_out"], ["pool2_out"], name="pool2", **pool),
        helper.make_node("Flatten", ["pool2_out"], ["flatten_out"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flatten_out", "fc1_w", "fc1_b"], ["fc1_out"], name="fc1", transB=1),
        helper.make_node("Relu", ["fc1_out"], ["relu3_out"], name="relu3"),
        helper.make_node("Gemm", ["relu3_out", "fc2_w", "fc2_b"], ["logits"], name="fc2", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "fashion_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(p[k].astype(np.float32), k) for k in NAMES])
    model = helper.make_model(graph, producer_name="edgerun tools/train_fashion.py",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model.doc_string = ("CNN classifying 28x28 Fashion-MNIST images. Input: [N,1,28,28] float32, pixel / 255. "
                        "Output: [N,10] logits.")
    helper.set_model_props(model, {
        "dataset": "Fashion-MNIST (Debian dataset-fashion-mnist, MIT license)",
        "preprocessing": "pixel / 255.0, float32, NCHW [N,1,28,28]",
        "training": f"numpy Adam lr={args.lr} cosine, epochs={args.epochs}, batch={args.batch}, seed={args.seed}",
        "accuracy_test": f"{acc:.4f}",
    })
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.002)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-samples", type=int, default=60000)
    args = ap.parse_args()
    x, y = load("train")
    xt, yt = load("t10k")
    x, y = x[:args.train_samples], y[:args.train_samples]
    p, acc = train(x, y, xt, yt, args.epochs, args.batch, args.lr, args.seed)
    os.makedirs(args.out, exist_ok=True)
    onnx.save(export(p, acc, args), os.path.join(args.out, "model.onnx"))
    print(f"wrote {args.out}/model.onnx, test accuracy {acc:.4f}")


if __name__ == "__main__":
    main()
