#!/usr/bin/env python3
"""Integer execution benchmark: edgerun float vs edgerun int8 on the same
network, and edgerun int8 vs onnxruntime running the very QDQ model that
onnxruntime's own quantize_static made (QDQ, per-channel int8 weights,
uint8 activations by default, MinMax calibration) -- p50 latency at batch 1
and agreement, measured in the same run. Prints a table, optionally JSON.

    bench/int8_compare.py [--models digits,mnist-8,...] [--light] [--generated]
                          [--threads 1] [--iterations 30] [--rounds 3]
                          [--activations uint8|int8] [--reduce-range auto|on|off]
                          [--json out.json]

Models: the repo's models/digits (real labelled data: sklearn's digits, the
model's own train/test split), ../shared/models/mnist-8 (its 3 official
test digits and shifted copies), the nine ../shared/conformance/light CNNs
(--light; their official input and noisy copies) and gen_bench_models.py's
MobileNetV2, ResNet-18 and YOLO-style detector (--generated; random
inputs). Each float model is first prepared the way onnxruntime's
quantization docs prescribe (opset 13 for per-channel QDQ, onnxruntime's
basic optimizations: constant folding and Conv+BatchNorm fusion), and that
prepared float model is what both runtimes run as "float" and what
quantize_static quantizes. Two fixes keep onnxruntime 1.32's quantizer from
writing models the ONNX spec rejects: Gemm biases of shape [1, N] (from its
MatMul+Add fusion) are made [N], and graph inputs nothing reads are dropped.

--reduce-range: quantize_static's 7-bit weights. `auto` (the default) turns
it on for x86 CPUs without VNNI, as onnxruntime's quantization guide
advises for them (its u8 x s8 kernels there saturate 8-bit weights; see
tests/models/ort_int8.py), and there edgerun takes its vpmaddubsw kernels,
exact for such weights.

Latency: `edgerun bench --json` and bench/ort_runner.py (all onnxruntime
optimizations, intra-op threads = --threads), each in a fresh process,
alternated for --rounds rounds; the median of the rounds' p50s is reported.
Agreement: edgerun's int8 output against onnxruntime's on the same QDQ
model, sample by sample (top-1 agreement, max abs difference), and each
against the float model (and labels where the data set has them).

Not a test: it gates nothing. The light CNNs' weights are constant fills
(so their outputs barely depend on the input: agreement on them says
little); they are here for their architectures and sizes.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper, version_converter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
LIGHT = ["squeezenet", "resnet50", "inception_v1", "inception_v2", "shufflenet", "densenet121", "bvlc_alexnet",
         "zfnet512", "vgg19"]
GENERATED = ["mobilenetv2_224", "resnet18_224", "detector_320"]


def shared():
    for cand in (os.environ.get("EDGERUN_SHARED"), os.path.join(os.path.dirname(ROOT), "shared"), "/work/shared"):
        if cand and os.path.isdir(cand):
            return cand
    return os.path.join(os.path.dirname(ROOT), "shared")


# ---- data -------------------------------------------------------------------


def data_digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.images.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    x_tr, x_te, _, y_te = train_test_split(x, d.target, test_size=0.2, stratify=d.target, random_state=0)
    return os.path.join(ROOT, "models", "digits", "model.onnx"), x_tr[:200], x_te, y_te


def data_mnist():
    d = os.path.join(shared(), "models", "mnist-8")
    sets = [numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"test_data_set_{k}", "input_0.pb")))
            for k in range(3)]
    shift = lambda s, dy, dx: np.roll(np.roll(s, dy, 2), dx, 3)  # noqa: E731
    calib = np.concatenate([shift(s, dy, dx) for s in sets for dy in (-2, 0, 2) for dx in (-2, 0, 2)])
    evals = np.concatenate([shift(s, dy, dx) for s in sets for dy in (-3, -1, 1, 3) for dx in (-3, -1, 1, 3)])
    return os.path.join(d, "model.onnx"), calib, evals, None


def data_light(name, n_eval):
    d = os.path.join(shared(), "conformance", "light", f"test_{name}")
    x = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0", "input_0.pb")))
    rng = np.random.default_rng(3)
    calib = np.concatenate([x] + [x + 0.1 * rng.standard_normal(x.shape).astype(np.float32) for _ in range(7)])
    evals = np.concatenate([x + 0.1 * rng.standard_normal(x.shape).astype(np.float32) for _ in range(n_eval)])
    return os.path.join(d, "model.onnx"), calib, evals, None


def data_generated(name, bench_dir, n_eval):
    path = os.path.join(bench_dir, name, "model.onnx")
    if not os.path.exists(path):
        subprocess.run([PY, os.path.join(ROOT, "bench", "gen_bench_models.py"), "--out", bench_dir], check=True,
                       capture_output=True)
    m = onnx.load(path, load_external_data=False)
    shape = [d.dim_value or 1 for d in m.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(5)
    calib = rng.standard_normal([8] + shape[1:]).astype(np.float32)
    evals = rng.standard_normal([n_eval] + shape[1:]).astype(np.float32)
    return path, calib, evals, None


# ---- preparation and quantization ---------------------------------------------


def prepare(src, dst):
    m = onnx.load(src)
    if m.opset_import[0].version < 13:
        m = version_converter.convert_version(m, 13)
    mid = dst + ".opset13.onnx"
    onnx.save(m, mid)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = dst
    ort.InferenceSession(mid, so, providers=["CPUExecutionProvider"])
    os.remove(mid)
    m = onnx.load(dst)
    inits = {i.name: i for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Gemm" and len(n.input) > 2 and n.input[2] in inits:
            t = numpy_helper.to_array(inits[n.input[2]])
            if t.ndim == 2 and t.shape[0] == 1:
                inits[n.input[2]].CopyFrom(numpy_helper.from_array(t.reshape(-1), n.input[2]))
                for vi in list(m.graph.value_info) + list(m.graph.input):
                    if vi.name == n.input[2]:
                        del vi.type.tensor_type.shape.dim[0]
    used = {i for n in m.graph.node for i in n.input}
    for gi in list(m.graph.input):
        if gi.name not in used:
            m.graph.input.remove(gi)
    onnx.save(m, dst)
    return dst


def input_name(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits][0]


def quantize(src, dst, calib, activations, reduce_range):
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    name = input_name(src)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.it, None)

    # onnxruntime 1.32's int32-bias weight-scale adjustment fails on some
    # fused biases; it matters only for biases beyond int32, so it is off
    # for every model alike.
    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True, reduce_range=reduce_range,
                    activation_type=QuantType.QInt8 if activations == "int8" else QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"QDQDisableWeightAdjustForInt32Bias": True})
    return dst


# ---- measuring ---------------------------------------------------------------


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd[:3]), out.stderr.strip()[-400:]))
    return json.loads(out.stdout.strip().splitlines()[-1])


def er_p50(model, args):
    return run_json([os.path.join(args.build, "edgerun"), "bench", model, "--json", "--threads", str(args.threads),
                     "--iterations", str(args.iterations), "--warmup", "5"])["p50_ms"]


def ort_p50(model, args):
    return run_json([PY, os.path.join(ROOT, "bench", "ort_runner.py"), model, "--threads", str(args.threads),
                     "--iterations", str(args.iterations), "--warmup", "5"])["p50_ms"]


def er_outputs(model, x, args, tmp):
    xin, yout = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xin, x[:, None])  # sample i is x[i:i + 1]
    out = subprocess.run([os.path.join(args.build, "er-batch-run"), model, xin, yout], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("er-batch-run failed: " + out.stderr.strip()[-400:])
    y = np.load(yout)
    return y.reshape(len(x), -1)


def ort_outputs(model, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return np.concatenate([s.run(None, {name: x[i:i + 1]})[0].reshape(1, -1) for i in range(len(x))])


def geomean(v):
    v = [x for x in v if x and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def bench_one(name, loader, args, tmp):
    src, calib, evals, labels = loader()
    row = {"model": name}
    fpath = prepare(src, os.path.join(tmp, f"{name}-float.onnx"))
    t0 = time.time()
    qpath = quantize(fpath, os.path.join(tmp, f"{name}-qdq.onnx"), calib, args.activations, args.reduce_range)
    row["quantize_s"] = round(time.time() - t0, 1)
    # Agreement: edgerun int8 and onnxruntime on the same QDQ model.
    er_q = er_outputs(qpath, evals, args, tmp)
    ort_q = ort_outputs(qpath, evals)
    ref = ort_outputs(fpath, evals)
    row["samples"] = len(evals)
    row["top1_er_vs_ort_int8"] = float((er_q.argmax(1) == ort_q.argmax(1)).mean())
    row["max_abs_er_vs_ort_int8"] = float(np.abs(er_q - ort_q).max())
    row["out_range"] = float(np.abs(ort_q).max())
    row["top1_er_int8_vs_float"] = float((er_q.argmax(1) == ref.argmax(1)).mean())
    row["top1_ort_int8_vs_float"] = float((ort_q.argmax(1) == ref.argmax(1)).mean())
    if labels is not None:
        row["acc_float"] = float((ref.argmax(1) == labels).mean())
        row["acc_er_int8"] = float((er_q.argmax(1) == labels).mean())
        row["acc_ort_int8"] = float((ort_q.argmax(1) == labels).mean())
    # Latency, alternating the four runs per round.
    times = {"er_float": [], "er_int8": [], "ort_int8": [], "ort_float": []}
    for _ in range(args.rounds):
        times["er_float"].append(er_p50(fpath, args))
        times["er_int8"].append(er_p50(qpath, args))
        times["ort_int8"].append(ort_p50(qpath, args))
        times["ort_float"].append(ort_p50(fpath, args))
    for k, v in times.items():
        row["p50_ms_" + k] = round(statistics.median(v), 3)
    row["speedup_int8_vs_float"] = round(row["p50_ms_er_float"] / row["p50_ms_er_int8"], 3)
    row["er_int8_over_ort_int8"] = round(row["p50_ms_er_int8"] / row["p50_ms_ort_int8"], 3)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="digits,mnist-8")
    ap.add_argument("--light", action="store_true", help="the nine shared CNNs (VGG-19's weights are 548 MB)")
    ap.add_argument("--generated", action="store_true", help="MobileNetV2, ResNet-18, detector (bench models)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--eval", type=int, default=16, help="evaluation samples for the light and generated models")
    ap.add_argument("--activations", choices=["uint8", "int8"], default="uint8")
    ap.add_argument("--reduce-range", choices=["auto", "on", "off"], default="auto",
                    help="7-bit weights (auto: on for x86 CPUs without VNNI)")
    ap.add_argument("--bench-dir", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--json")
    ap.add_argument("--keep", help="copy each model's prepared float and QDQ files into this folder, to profile")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
    import ort_int8
    args.reduce_range = args.reduce_range == "on" or (args.reduce_range == "auto" and ort_int8.SATURATES)
    for tool in ("edgerun", "er-batch-run"):
        if not os.path.exists(os.path.join(args.build, tool)):
            sys.exit(f"{tool} not found in {args.build}: build first (cmake --build build)")
    loaders = []
    for name in [n for n in args.models.split(",") if n]:
        if name == "digits":
            loaders.append((name, data_digits))
        elif name == "mnist-8":
            loaders.append((name, data_mnist))
        elif name in LIGHT:
            loaders.append((name, lambda n=name: data_light(n, args.eval)))
        elif name in GENERATED:
            loaders.append((name, lambda n=name: data_generated(n, args.bench_dir, args.eval)))
        else:
            sys.exit(f"unknown model {name}")
    if args.light:
        loaders += [(n, lambda n=n: data_light(n, args.eval)) for n in LIGHT]
    if args.generated:
        loaders += [(n, lambda n=n: data_generated(n, args.bench_dir, args.eval)) for n in GENERATED]
    rows = []
    with tempfile.TemporaryDirectory(prefix="er-int8-") as tmp:
        for name, loader in loaders:
            t0 = time.time()
            try:
                row = bench_one(name, loader, args, tmp)
            except Exception as e:  # report and go on with the next model
                row = {"model": name, "error": str(e)[-300:]}
            row["seconds"] = round(time.time() - t0, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
            for f in os.listdir(tmp):
                if args.keep and f.endswith(".onnx"):
                    os.makedirs(args.keep, exist_ok=True)
                    shutil.copy(os.path.join(tmp, f), os.path.join(args.keep, f))
                os.remove(os.path.join(tmp, f))
    print()
    print(f"threads {args.threads}, batch 1, activations {args.activations}, "
          f"{'7-bit (reduce_range)' if args.reduce_range else '8-bit'} weights; p50 ms (median of {args.rounds} rounds)")
    print(f"{'model':16} {'er float':>9} {'er int8':>9} {'speedup':>8} {'ort int8':>9} {'er/ort':>7} "
          f"{'ort float':>9} {'top1 er=ort':>11} {'max|d|':>9} {'range':>8} {'acc f/er/ort':>18}")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:16} error: {r['error'][:120]}")
            continue
        acc = (f"{100 * r['acc_float']:.1f}/{100 * r['acc_er_int8']:.1f}/{100 * r['acc_ort_int8']:.1f}"
               if "acc_float" in r else "-")
        print(f"{r['model']:16} {r['p50_ms_er_float']:9.3f} {r['p50_ms_er_int8']:9.3f} "
              f"{r['speedup_int8_vs_float']:7.2f}x {r['p50_ms_ort_int8']:9.3f} {r['er_int8_over_ort_int8']:7.2f} "
              f"{r['p50_ms_ort_float']:9.3f} {100 * r['top1_er_vs_ort_int8']:10.1f}% "
              f"{r['max_abs_er_vs_ort_int8']:9.4f} {r['out_range']:8.3f} {acc:>18}")
    ok = [r for r in rows if "error" not in r]
    if ok:
        print(f"{'geomean':16} {'':9} {'':9} {geomean([r['speedup_int8_vs_float'] for r in ok]):7.2f}x {'':9} "
              f"{geomean([r['er_int8_over_ort_int8'] for r in ok]):7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
