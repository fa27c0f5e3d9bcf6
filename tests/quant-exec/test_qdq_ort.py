#!/usr/bin/env python3
"""Integer execution of onnxruntime's own quantized models: quantize_static
(QDQ, per-channel int8 weights, uint8 and int8 activations, MinMax
calibration) on real and generated CNNs, and its QOperator format (QLinearConv
with the com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid,
QLinearLeakyRelu, QLinearAveragePool, QLinearGlobalAveragePool,
QLinearConcat, QLinearSoftmax and QGemm, which edgerun rewrites into QDQ at
load) with uint8 activations, then for each model:

  1. edgerun (its QDQ pass and integer kernels) agrees with onnxruntime
     running the same QDQ model on top-1 for at least 99% of the samples,
     and no output differs by more than 5% of the output range (a gross
     error bound: the two runtimes round requantizations differently, and a
     one-step difference can grow through later layers);
  2. edgerun's optimized integer kernels give exactly what its reference
     kernels give on the same rewritten graph (er-batch-run --reference);
  3. on the digits model (real labelled data), edgerun's int8 accuracy is
     onnxruntime's int8 accuracy within one sample.

Prints the agreement and largest difference per model; the last line is
"N passed, N failed".

    test_qdq_ort.py --build build
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
import ort_int8  # noqa: E402

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL", what, flush=True)


def shared():
    from check import SHARED  # noqa: E402
    return SHARED


def quantize(src, dst, name, calib, activations, fmt="qdq"):
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.it, None)

    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                    per_channel=True,
                    activation_type=QuantType.QInt8 if activations == "int8" else QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
                    reduce_range=ort_int8.SATURATES,
                    extra_options={"QDQDisableWeightAdjustForInt32Bias": True})


def ort_rows(path, name, x, qdq=False):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if qdq:
        ort_int8.qdq_session_options(so)
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return np.concatenate([s.run(None, {name: x[i:i + 1]})[0].reshape(1, -1) for i in range(len(x))])


def er_rows(build, path, x, tmp, reference=False):
    xin, yout = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xin, x[:, None])
    cmd = [os.path.join(build, "er-batch-run"), path, xin, yout] + (["--reference"] if reference else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return np.load(yout).reshape(len(x), -1)


def models(tmp):
    """(name, float model path, input name, calibration, evaluation, labels)"""
    import gen_models
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.images.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    x_tr, x_te, _, y_te = train_test_split(x, d.target, test_size=0.2, stratify=d.target, random_state=0)
    yield "digits", os.path.join(ROOT, "models", "digits", "model.onnx"), "input", x_tr[:200], x_te, y_te

    mnist = os.path.join(shared(), "models", "mnist-8")
    if os.path.isdir(mnist):
        # Opset 8: raised to 13 for per-channel QDQ.
        m = onnx.version_converter.convert_version(onnx.load(os.path.join(mnist, "model.onnx")), 13)
        path = os.path.join(tmp, "mnist-13.onnx")
        onnx.save(m, path)
        sets = [numpy_helper.to_array(onnx.load_tensor(os.path.join(mnist, f"test_data_set_{k}", "input_0.pb")))
                for k in range(3)]
        shift = lambda s, dy, dx: np.roll(np.roll(s, dy, 2), dx, 3)  # noqa: E731
        calib = np.concatenate([shift(s, dy, dx) for s in sets for dy in (-2, 0, 2) for dx in (-2, 0, 2)])
        evals = np.concatenate([shift(s, dy, dx) for s in sets for dy in (-3, -1, 1, 3) for dx in (-3, -1, 1, 3)])
        yield "mnist-8", path, "Input3", calib, evals, None

    for builder in (gen_models.build_resnet_style, gen_models.build_mobilenet_style):
        model, feeds = builder(np.random.default_rng(1))
        name = model.graph.name
        path = os.path.join(tmp, f"{name}.onnx")
        onnx.save(model, path)
        iname = model.graph.input[0].name
        shape = list(feeds[0][iname].shape)
        rng = np.random.default_rng(2)
        yield (name, path, iname, rng.standard_normal([16] + shape[1:]).astype(np.float32),
               rng.standard_normal([48] + shape[1:]).astype(np.float32), None)


def contrib_zoo(tmp):
    """A small CNN whose QOperator form uses every com.microsoft op edgerun
    expands: Conv, LeakyRelu, x * Sigmoid(x), a channel Concat, AveragePool,
    a residual Add, GlobalAveragePool, Gemm and Softmax."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(5)

    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((scale * rng.standard_normal(shape)).astype(np.float32), name)

    inits = [w("w1", 8, 3, 3, 3), w("b1", 8, scale=0.1), w("w2", 8, 8, 3, 3, scale=0.15), w("b2", 8, scale=0.1),
             w("w3", 16, 16, 1, 1, scale=0.2), w("fc", 10, 16, scale=3.0), w("fcb", 10, scale=1.0)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("LeakyRelu", ["c1"], ["l1"], alpha=0.1),
        helper.make_node("Conv", ["l1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["s2"]),
        helper.make_node("Mul", ["c2", "s2"], ["m2"]),
        helper.make_node("Concat", ["l1", "m2"], ["cat"], axis=1),
        helper.make_node("AveragePool", ["cat"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["ap", "w3"], ["c3"]),
        helper.make_node("Add", ["c3", "ap"], ["res"]),
        helper.make_node("GlobalAveragePool", ["res"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], axis=1),
    ]
    g = helper.make_graph(nodes, "contrib_zoo", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    path = os.path.join(tmp, "contrib_zoo.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    r = np.random.default_rng(6)
    return ("contrib_zoo", path, "x", r.standard_normal([16, 3, 16, 16]).astype(np.float32),
            r.standard_normal([48, 3, 16, 16]).astype(np.float32), None)


def compare(build, name, label, qpath, iname, evals, labels, tmp):
    want = ort_rows(qpath, iname, evals, qdq=label.endswith("qdq"))
    got = er_rows(build, qpath, evals, tmp)
    ref = er_rows(build, qpath, evals, tmp, reference=True)
    agree = float((got.argmax(1) == want.argmax(1)).mean())
    diff = float(np.abs(got - want).max())
    span = float(want.max() - want.min())
    print(f"{name:16} {label:15} samples {len(evals):4}  top-1 agreement {100 * agree:6.2f}%  "
          f"max |edgerun - onnxruntime| {diff:.5f} (output range {span:.3f})", flush=True)
    check(agree >= 0.99, f"{name} {label}: top-1 agreement {agree:.4f} < 0.99")
    check(diff <= 0.05 * span + 1e-6, f"{name} {label}: max difference {diff} > 5% of {span}")
    check(np.array_equal(got, ref), f"{name} {label}: optimized kernels differ from the reference kernels")
    if labels is not None:
        acc_er = int((got.argmax(1) == labels).sum())
        acc_ort = int((want.argmax(1) == labels).sum())
        print(f"{'':16} {'':15} accuracy: edgerun {acc_er}/{len(labels)}, onnxruntime {acc_ort}/{len(labels)}")
        check(abs(acc_er - acc_ort) <= 1, f"{name} {label}: accuracy {acc_er} vs {acc_ort}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    if ort_int8.SATURATES:
        print(f"note: {ort_int8.explain()}: the models are quantized with reduce_range (7-bit weights), "
              "and QDQ models run with onnxruntime's QDQ fusion off")
    with tempfile.TemporaryDirectory(prefix="er-qdq-ort-") as tmp:
        for name, path, iname, calib, evals, labels in list(models(tmp)) + [contrib_zoo(tmp)]:
            # contrib_zoo is there for the QOperator ops; its peaked softmax
            # output (needed to rule out ties) turns a one-step difference of
            # a QDQ run's logits into 0.04 of probability.
            forms = (("uint8", "qdq"), ("int8", "qdq"), ("uint8", "qoperator"))
            for act, fmt in forms[2:] if name == "contrib_zoo" else forms:
                qpath = os.path.join(tmp, f"{name}-{act}-{fmt}.onnx")
                quantize(path, qpath, iname, calib, act, fmt)
                if fmt == "qoperator":
                    ms = sorted({n.op_type for n in onnx.load(qpath).graph.node if n.domain == "com.microsoft"})
                    print(f"{name:16} QOperator com.microsoft ops: {', '.join(ms) or 'none'}")
                    if name == "contrib_zoo":
                        every = ["QGemm", "QLinearAdd", "QLinearAveragePool", "QLinearConcat",
                                 "QLinearGlobalAveragePool", "QLinearLeakyRelu", "QLinearMul", "QLinearSigmoid",
                                 "QLinearSoftmax"]
                        check(ms == every, f"contrib_zoo's QOperator model has {ms}, not {every}")
                compare(args.build, name, f"{act} {fmt}", qpath, iname, evals, labels, tmp)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
