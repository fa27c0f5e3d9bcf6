#!/usr/bin/env python3
"""Integer execution of onnxruntime's own QDQ models: quantize_static (QDQ,
per-channel int8 weights, uint8 and int8 activations, MinMax calibration)
on real and generated CNNs, then for each QDQ model:

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


def quantize(src, dst, name, calib, activations):
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.it, None)

    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8 if activations == "int8" else QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"QDQDisableWeightAdjustForInt32Bias": True})


def ort_rows(path, name, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="er-qdq-ort-") as tmp:
        for name, path, iname, calib, evals, labels in models(tmp):
            for act in ("uint8", "int8"):
                qpath = os.path.join(tmp, f"{name}-{act}.onnx")
                quantize(path, qpath, iname, calib, act)
                want = ort_rows(qpath, iname, evals)
                got = er_rows(args.build, qpath, evals, tmp)
                ref = er_rows(args.build, qpath, evals, tmp, reference=True)
                agree = float((got.argmax(1) == want.argmax(1)).mean())
                diff = float(np.abs(got - want).max())
                span = float(want.max() - want.min())
                print(f"{name:16} {act:6} samples {len(evals):4}  top-1 agreement {100 * agree:6.2f}%  "
                      f"max |edgerun - onnxruntime| {diff:.5f} (output range {span:.3f})", flush=True)
                check(agree >= 0.99, f"{name} {act}: top-1 agreement {agree:.4f} < 0.99")
                check(diff <= 0.05 * span + 1e-6, f"{name} {act}: max difference {diff} > 5% of {span}")
                check(np.array_equal(got, ref), f"{name} {act}: optimized kernels differ from the reference kernels")
                if labels is not None:
                    acc_er = int((got.argmax(1) == labels).sum())
                    acc_ort = int((want.argmax(1) == labels).sum())
                    print(f"{'':16} {'':6} accuracy: edgerun {acc_er}/{len(labels)}, onnxruntime {acc_ort}/{len(labels)}")
                    check(abs(acc_er - acc_ort) <= 1, f"{name} {act}: accuracy {acc_er} vs {acc_ort}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
