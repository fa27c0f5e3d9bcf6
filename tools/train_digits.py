#!/usr/bin/env python3
"""Train a small CNN on scikit-learn's digits data set and export it to ONNX.

The network is trained with plain numpy (hand-written forward and backward
passes), so the only dependencies are numpy, scikit-learn, onnx and
onnxruntime.  The result is a small, real, accurate model that edgerun can use
for end-to-end tests, a CLI demo and accuracy checks.

Architecture (NCHW, input [N,1,8,8], pixel values divided by 16):

    Conv 3x3 (1->8, pad 1) -> Relu -> MaxPool 2x2
    Conv 3x3 (8->16, pad 1) -> Relu -> MaxPool 2x2
    Flatten -> Gemm (64->32) -> Relu -> Gemm (32->10) -> logits

Usage:

    .venv/bin/python tools/train_digits.py --out models/digits

Everything is seeded, so running the script twice gives the same model.
"""

import argparse
import os
import sys
import time

# Pin BLAS to one thread before numpy is imported.  The matrices here are tiny,
# so threads buy nothing, and a fixed thread count keeps floating-point
# reduction order (and hence the exported weights) identical from run to run.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------

def load_data(seed):
    """Return (x_train, y_train, x_test, y_test) as float32 NCHW and int64.

    The split is stratified so that every digit is represented in the test
    set in the same proportion as in the whole data set, and it is seeded so
    that the held-out images are always the same ones.
    """
    digits = load_digits()
    # Pixel values are integers 0..16; dividing by 16 maps them onto [0, 1],
    # which is the preprocessing the exported model expects.
    x = (digits.images.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, stratify=y, random_state=seed)
    return x_train, y_train, x_test, y_test


# --------------------------------------------------------------------------
# Layers (forward and backward)
# --------------------------------------------------------------------------

def im2col_3x3(x):
    """Unfold 3x3 patches of a pad-1 convolution into columns.

    Input x has shape [N, C, H, W].  The result has shape [N, C*9, H*W] and
    its row index is c*9 + ki*3 + kj, which matches the memory order of an
    ONNX Conv weight [Cout, Cin, 3, 3] flattened to [Cout, Cin*9].  That way
    the weight matrix used here can be exported without any reordering.
    """
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, c, 3, 3, h, w), dtype=x.dtype)
    for ki in range(3):
        for kj in range(3):
            cols[:, :, ki, kj] = xp[:, :, ki:ki + h, kj:kj + w]
    return cols.reshape(n, c * 9, h * w)


def col2im_3x3(dcols, shape):
    """Fold column gradients back onto the input (the adjoint of im2col_3x3).

    Each input pixel appears in up to nine patches, so its gradient is the sum
    of the gradients of all the patch entries that copied it.
    """
    n, c, h, w = shape
    dcols = dcols.reshape(n, c, 3, 3, h, w)
    dxp = np.zeros((n, c, h + 2, w + 2), dtype=dcols.dtype)
    for ki in range(3):
        for kj in range(3):
            dxp[:, :, ki:ki + h, kj:kj + w] += dcols[:, :, ki, kj]
    return dxp[:, :, 1:-1, 1:-1]


def conv_forward(x, w, b):
    """3x3 convolution, stride 1, pad 1.  w is [Cout, Cin, 3, 3], b is [Cout]."""
    n, _, h, wd = x.shape
    cout = w.shape[0]
    cols = im2col_3x3(x)
    out = np.matmul(w.reshape(cout, -1), cols) + b[None, :, None]
    return out.reshape(n, cout, h, wd), cols


def conv_backward(dout, cols, x_shape, w):
    """Gradients of conv_forward with respect to its input, weight and bias."""
    n, cout, h, wd = dout.shape
    dout = dout.reshape(n, cout, h * wd)
    # dW sums the outer products over the batch and over output positions.
    dw = np.tensordot(dout, cols, axes=([0, 2], [0, 2])).reshape(w.shape)
    db = dout.sum(axis=(0, 2))
    dcols = np.matmul(w.reshape(cout, -1).T, dout)
    dx = col2im_3x3(dcols, x_shape)
    return dx, dw, db


def maxpool_forward(x):
    """2x2 max pooling with stride 2.  Returns the output and the argmax mask.

    The mask marks exactly one element per window (the first maximum, as
    np.argmax picks), so ties do not duplicate gradients.
    """
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    win = win.reshape(n, c, h // 2, w // 2, 4)
    idx = np.argmax(win, axis=-1)
    out = np.take_along_axis(win, idx[..., None], axis=-1)[..., 0]
    return out, idx


def maxpool_backward(dout, idx, x_shape):
    """Route each pooled gradient back to the element that was the maximum."""
    n, c, h, w = x_shape
    dwin = np.zeros((n, c, h // 2, w // 2, 4), dtype=dout.dtype)
    np.put_along_axis(dwin, idx[..., None], dout[..., None], axis=-1)
    dwin = dwin.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
    return dwin.reshape(n, c, h, w)


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------

PARAM_NAMES = ("conv1_w", "conv1_b", "conv2_w", "conv2_b",
               "fc1_w", "fc1_b", "fc2_w", "fc2_b")


def init_params(rng):
    """He-normal weights (suited to Relu) and zero biases.

    Fully connected weights are stored as [out, in], which is the layout ONNX
    Gemm uses with transB=1, so they too export without reordering.
    """
    def he(shape, fan_in):
        return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)

    return {
        "conv1_w": he((8, 1, 3, 3), 1 * 9),
        "conv1_b": np.zeros(8),
        "conv2_w": he((16, 8, 3, 3), 8 * 9),
        "conv2_b": np.zeros(16),
        "fc1_w": he((32, 64), 64),
        "fc1_b": np.zeros(32),
        "fc2_w": he((10, 32), 32),
        "fc2_b": np.zeros(10),
    }


def forward(p, x):
    """Run the network; return logits and the cache needed for backward."""
    c1, cols1 = conv_forward(x, p["conv1_w"], p["conv1_b"])
    r1 = np.maximum(c1, 0)
    p1, idx1 = maxpool_forward(r1)                 # [N, 8, 4, 4]
    c2, cols2 = conv_forward(p1, p["conv2_w"], p["conv2_b"])
    r2 = np.maximum(c2, 0)
    p2, idx2 = maxpool_forward(r2)                 # [N, 16, 2, 2]
    # C-order reshape is exactly what ONNX Flatten(axis=1) does.
    f = p2.reshape(p2.shape[0], -1)                # [N, 64]
    h = f @ p["fc1_w"].T + p["fc1_b"]
    rh = np.maximum(h, 0)
    logits = rh @ p["fc2_w"].T + p["fc2_b"]
    cache = (x, cols1, c1, r1, idx1, p1, cols2, c2, r2, idx2, p2, f, h, rh)
    return logits, cache


def backward(p, cache, dlogits):
    """Back-propagate dL/dlogits through the network; return all gradients."""
    x, cols1, c1, r1, idx1, p1, cols2, c2, r2, idx2, p2, f, h, rh = cache
    g = {}
    g["fc2_w"] = dlogits.T @ rh
    g["fc2_b"] = dlogits.sum(axis=0)
    dh = (dlogits @ p["fc2_w"]) * (h > 0)
    g["fc1_w"] = dh.T @ f
    g["fc1_b"] = dh.sum(axis=0)
    dp2 = (dh @ p["fc1_w"]).reshape(p2.shape)
    dr2 = maxpool_backward(dp2, idx2, r2.shape)
    dc2 = dr2 * (c2 > 0)
    dp1, g["conv2_w"], g["conv2_b"] = conv_backward(dc2, cols2, p1.shape, p["conv2_w"])
    dr1 = maxpool_backward(dp1, idx1, r1.shape)
    dc1 = dr1 * (c1 > 0)
    # The gradient with respect to the image itself is not needed.
    _, g["conv1_w"], g["conv1_b"] = conv_backward(dc1, cols1, x.shape, p["conv1_w"])
    return g


def softmax_cross_entropy(logits, y):
    """Mean cross-entropy loss and its gradient with respect to the logits."""
    z = logits - logits.max(axis=1, keepdims=True)   # For numerical stability.
    e = np.exp(z)
    prob = e / e.sum(axis=1, keepdims=True)
    n = logits.shape[0]
    loss = -np.log(prob[np.arange(n), y] + 1e-12).mean()
    dlogits = prob.copy()
    dlogits[np.arange(n), y] -= 1.0
    return loss, dlogits / n


def predict(p, x, batch=256):
    """Logits for x, computed in batches to bound memory use."""
    outs = [forward(p, x[i:i + batch])[0] for i in range(0, len(x), batch)]
    return np.concatenate(outs, axis=0)


# --------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------

def train(x_train, y_train, x_test, y_test, epochs, batch_size, lr, seed,
          weight_decay):
    """Train with Adam on mini-batches; return float64 parameters.

    Weight decay is decoupled from the gradient (as in AdamW) and applied to
    weights only, not biases; it mildly regularises this small data set.
    Training runs in float64 so that the optimisation itself is insensitive
    to rounding; the weights are cast to float32 only for export.  The test
    accuracy printed during training is for information only: it is never
    used to pick a checkpoint, so the final figure is not selected on it.
    """
    rng = np.random.default_rng(seed)
    p = init_params(rng)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(val) for k, val in p.items()}
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    xt = x_train.astype(np.float64)
    n = len(xt)
    step = 0
    for epoch in range(1, epochs + 1):
        # A cosine learning-rate decay lets the last epochs settle into a
        # minimum instead of bouncing around it.
        lr_epoch = lr * 0.5 * (1.0 + np.cos(np.pi * (epoch - 1) / epochs))
        order = rng.permutation(n)
        total = 0.0
        for i in range(0, n, batch_size):
            idx = order[i:i + batch_size]
            logits, cache = forward(p, xt[idx])
            loss, dlogits = softmax_cross_entropy(logits, y_train[idx])
            total += loss * len(idx)
            g = backward(p, cache, dlogits)
            step += 1
            for k in PARAM_NAMES:
                m[k] = beta1 * m[k] + (1 - beta1) * g[k]
                v[k] = beta2 * v[k] + (1 - beta2) * g[k] ** 2
                mhat = m[k] / (1 - beta1 ** step)
                vhat = v[k] / (1 - beta2 ** step)
                p[k] -= lr_epoch * mhat / (np.sqrt(vhat) + eps)
                if k.endswith("_w"):
                    p[k] -= lr_epoch * weight_decay * p[k]
        if epoch == 1 or epoch % 5 == 0 or epoch == epochs:
            acc = (predict(p, x_test.astype(np.float64)).argmax(1) == y_test).mean()
            print(f"epoch {epoch:3d}  loss {total / n:.4f}  test acc {acc:.4f}",
                  flush=True)
    return p


# --------------------------------------------------------------------------
# ONNX export
# --------------------------------------------------------------------------

def export_onnx(p32, accuracy, seed, training):
    """Build the ONNX graph from float32 parameters and return the ModelProto."""
    inits = [numpy_helper.from_array(p32[k], name=k) for k in PARAM_NAMES]
    conv_attrs = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    pool_attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["input", "conv1_w", "conv1_b"], ["conv1_out"],
                         name="conv1", **conv_attrs),
        helper.make_node("Relu", ["conv1_out"], ["relu1_out"], name="relu1"),
        helper.make_node("MaxPool", ["relu1_out"], ["pool1_out"], name="pool1",
                         **pool_attrs),
        helper.make_node("Conv", ["pool1_out", "conv2_w", "conv2_b"], ["conv2_out"],
                         name="conv2", **conv_attrs),
        helper.make_node("Relu", ["conv2_out"], ["relu2_out"], name="relu2"),
        helper.make_node("MaxPool", ["relu2_out"], ["pool2_out"], name="pool2",
                         **pool_attrs),
        helper.make_node("Flatten", ["pool2_out"], ["flatten_out"], name="flatten",
                         axis=1),
        helper.make_node("Gemm", ["flatten_out", "fc1_w", "fc1_b"], ["fc1_out"],
                         name="fc1", transB=1),
        helper.make_node("Relu", ["fc1_out"], ["relu3_out"], name="relu3"),
        helper.make_node("Gemm", ["relu3_out", "fc2_w", "fc2_b"], ["logits"],
                         name="fc2", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        inputs=[helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                              ["N", 1, 8, 8])],
        outputs=[helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                               ["N", 10])],
        initializer=inits)
    model = helper.make_model(
        graph, producer_name="edgerun tools/train_digits.py",
        opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model.doc_string = ("Small CNN classifying 8x8 hand-written digits. Input: "
                        "[N,1,8,8] float32, pixel values divided by 16. Output: "
                        "[N,10] logits (argmax is the digit).")
    helper.set_model_props(model, {
        "source": "tools/train_digits.py, trained on scikit-learn digits",
        "dataset": "sklearn.datasets.load_digits (UCI ML hand-written digits), "
                   "BSD-3-Clause via scikit-learn",
        "preprocessing": "pixel / 16.0, float32, NCHW [N,1,8,8]",
        "split": f"stratified 80/20, random_state={seed}",
        "training": training,
        "accuracy_test": f"{accuracy:.4f}",
    })
    onnx.checker.check_model(model, full_check=True)
    return model


def write_tensor(path, array, name):
    """Write one TensorProto in the ONNX backend test-data layout."""
    with open(path, "wb") as fh:
        fh.write(numpy_helper.from_array(array, name=name).SerializeToString())


README_TEMPLATE = """\
# digits: a small CNN for 8x8 hand-written digits

A real, trained model for end-to-end tests, the CLI demo and accuracy checks.
It classifies the 8x8 grayscale digit images of scikit-learn's `digits` data
set into the classes 0-9.

## Model

- Input `input`: float32 `[N,1,8,8]` (NCHW, symbolic batch `N`), pixel values
  (0..16) divided by 16.0.
- Output `logits`: float32 `[N,10]`; the predicted digit is the argmax.
- Graph (opset 13, IR version 8): Conv 3x3 (1->8, pad 1) -> Relu -> MaxPool
  2x2 -> Conv 3x3 (8->16, pad 1) -> Relu -> MaxPool 2x2 -> Flatten -> Gemm
  (64->32) -> Relu -> Gemm (32->10). {n_params} parameters.
- Test accuracy: **{acc_pct:.2f}%** ({n_correct}/{n_test} held-out images,
  computed with onnxruntime; also in the model's `accuracy_test` metadata).

## Training

Trained with plain numpy (hand-written forward/backward passes):
Adam, learning rate {lr} with cosine decay, decoupled weight decay {wd},
{epochs} epochs, batch {batch}, seed {seed}; stratified 80/20 split,
{n_train} train / {n_test} test images. To regenerate every file here:

    .venv/bin/python tools/train_digits.py --out models/digits

The script is seeded and single-threaded, so it reproduces the same model.

## Data source

scikit-learn's bundled `digits` data set (`sklearn.datasets.load_digits`), a
copy of the test set of the UCI ML hand-written digits data set
(Optical Recognition of Handwritten Digits), distributed with scikit-learn
under the BSD-3-Clause license.

## Files

- `model.onnx`: the trained model.
- `test_data_set_0/` .. `test_data_set_2/`: ONNX backend test-data layout.
  `input_0.pb` is a TensorProto named `input` with a batch of test images
  (1, 8 and 32 images), `output_0.pb` the `logits` onnxruntime {ort_version}
  computed for it (compare with a float tolerance, e.g. 1e-4).
- `sample.npy`: one test image, float32 `[1,1,8,8]`, for the CLI demo;
  `sample_label.txt`: its true label ({sample_label}).
- `test_images.npy` (float32 `[{n_test},1,8,8]`) and `test_labels.npy` (int64
  `[{n_test}]`): the whole held-out test split, for accuracy evaluation.
"""


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="models/digits", help="output directory")
    ap.add_argument("--seed", type=int, default=0, help="seed for split and training")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=1e-2,
                    help="decoupled (AdamW-style) weight decay on weights")
    args = ap.parse_args()

    t0 = time.perf_counter()
    x_train, y_train, x_test, y_test = load_data(args.seed)
    print(f"train {x_train.shape}, test {x_test.shape}", flush=True)

    p = train(x_train, y_train, x_test, y_test,
              args.epochs, args.batch_size, args.lr, args.seed, args.weight_decay)
    t_train = time.perf_counter() - t0

    # The exported model runs in float32, so evaluate the numpy model with the
    # very same float32 weights and inputs that onnxruntime will see.
    p32 = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in p.items()}
    np_logits = predict(p32, x_test)
    np_pred = np_logits.argmax(axis=1)
    accuracy = float((np_pred == y_test).mean())
    print(f"numpy float32 test accuracy {accuracy:.4f}", flush=True)

    training = (f"numpy, Adam lr={args.lr:g} cosine decay, "
                f"weight_decay={args.weight_decay:g}, epochs={args.epochs}, "
                f"batch={args.batch_size}, seed={args.seed}")
    model = export_onnx(p32, accuracy, args.seed, training)
    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, "model.onnx")
    onnx.save_model(model, model_path)

    # Check the saved file, not the in-memory model, so that serialisation is
    # covered too.  One thread keeps onnxruntime's outputs reproducible.
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    ort_logits = sess.run(["logits"], {"input": x_test})[0]
    ort_pred = ort_logits.argmax(axis=1)
    mismatches = int((ort_pred != np_pred).sum())
    max_diff = float(np.abs(ort_logits - np_logits).max())
    ort_acc = float((ort_pred == y_test).mean())
    print(f"onnxruntime vs numpy: {mismatches} argmax mismatches, "
          f"max |logit diff| {max_diff:.2e}")
    print(f"onnxruntime test accuracy {ort_acc:.4f} "
          f"({int((ort_pred == y_test).sum())}/{len(y_test)})")
    if mismatches:
        sys.exit("error: onnxruntime predictions differ from the numpy model")

    # Backend-style test cases: batches of 1, 8 and 32 held-out images.
    for i, n in enumerate((1, 8, 32)):
        d = os.path.join(args.out, f"test_data_set_{i}")
        os.makedirs(d, exist_ok=True)
        xb = np.ascontiguousarray(x_test[:n])
        yb = sess.run(["logits"], {"input": xb})[0]
        write_tensor(os.path.join(d, "input_0.pb"), xb, "input")
        write_tensor(os.path.join(d, "output_0.pb"), yb, "logits")

    np.save(os.path.join(args.out, "sample.npy"), np.ascontiguousarray(x_test[:1]))
    with open(os.path.join(args.out, "sample_label.txt"), "w") as fh:
        fh.write(f"{int(y_test[0])}\n")
    np.save(os.path.join(args.out, "test_images.npy"), np.ascontiguousarray(x_test))
    np.save(os.path.join(args.out, "test_labels.npy"), y_test.astype(np.int64))

    with open(os.path.join(args.out, "README.md"), "w") as fh:
        fh.write(README_TEMPLATE.format(
            n_params=sum(v.size for v in p32.values()),
            acc_pct=100.0 * ort_acc, n_correct=int((ort_pred == y_test).sum()),
            n_test=len(y_test), n_train=len(y_train), epochs=args.epochs,
            batch=args.batch_size, seed=args.seed, lr=args.lr, wd=args.weight_decay,
            ort_version=ort.__version__, sample_label=int(y_test[0])))

    print(f"training {t_train:.1f} s, total {time.perf_counter() - t0:.1f} s; "
          f"wrote {args.out}")


if __name__ == "__main__":
    main()
