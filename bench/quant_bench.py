#!/usr/bin/env python3
"""Quantization benchmark: edgerun float vs edgerun int8, and edgerun int8
vs onnxruntime running the model its own quantize_static makes from the same
float model and the same calibration samples -- accuracy and p50 latency
side by side, measured in the same run. Prints a table and writes JSON.

For every model the float model both tools get is the same file. Models
below opset 13 or with weights computed by nodes (the "light" CNNs build
theirs with ConstantOfShape) are first prepared the way onnxruntime's own
pre-processing does it: onnxruntime's basic graph optimizations (constant
folding, Conv+BatchNorm fusion) and onnx.version_converter to opset 13,
because quantize_static needs initializer weights and opset 13 for
per-channel QDQ. edgerun would do the same preparation itself.

Both quantizers use QDQ, per-channel int8 weights, int8 activations and
minmax calibration. Accuracy: top-1 against labels where the data set has
them (digits, Fashion-MNIST), else top-1 agreement with the float model and
output SQNR. Latency: batch 1, 1 thread, p50 of --runs runs, edgerun through
build/er-latency, onnxruntime through InferenceSession.run.

Not a test: it gates nothing. Speed of edgerun's int8 path depends on the
integer kernels, which are built separately; this script reports what the
current build does.

usage: bench/quant_bench.py [--build build] [--models digits,fashion,...]
                            [--light] [--runs 50] [--json out.json]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper, version_converter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, os.path.join(ROOT, "tools"))


def shared():
    for cand in (os.environ.get("EDGERUN_SHARED"), os.path.join(os.path.dirname(ROOT), "shared"), "/work/shared"):
        if cand and os.path.isdir(cand):
            return cand
    return os.path.join(os.path.dirname(ROOT), "shared")


def session(path, threads=1):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def prepare(src, dst):
    """onnxruntime basic optimizations (folds constants and BatchNorm into
    Conv) then opset 13, as quantize_static's pre-processing recommends."""
    m = onnx.load(src)
    if m.opset_import[0].version < 13:
        m = version_converter.convert_version(m, 13)
    mid = dst + ".opset13.onnx"
    onnx.save(m, mid)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = dst
    ort.InferenceSession(mid, so, providers=["CPUExecutionProvider"])
    # IR 3 models list every initializer as a graph input; after the opset
    # change those became overridable inputs, and folding left some of them
    # unused. Keep only the real, used inputs.
    m = onnx.load(dst)
    inits = {t.name for t in m.graph.initializer}
    used = {i for n in m.graph.node for i in n.input}
    keep = [i for i in m.graph.input if i.name not in inits and i.name in used]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    onnx.save(m, dst)
    return dst


# ---- data ----------------------------------------------------------------


def digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.images.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    x_tr, x_te, _, y_te = train_test_split(x, d.target, test_size=0.2, stratify=d.target, random_state=0)
    return os.path.join(ROOT, "models", "digits", "model.onnx"), "input", x_tr[:200], x_te, y_te


def fashion():
    import train_fashion
    x_tr, _ = train_fashion.load("train")
    x_te, y_te = train_fashion.load("t10k")
    return os.path.join(ROOT, "models", "fashion", "model.onnx"), "input", x_tr[:200], x_te[:2000], y_te[:2000]


def mnist8():
    d = os.path.join(shared(), "models", "mnist-8")
    sets = [numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"test_data_set_{k}", "input_0.pb")))
            for k in range(3)]
    calib = np.concatenate([np.roll(np.roll(s, dy, 2), dx, 3) for s in sets for dy in (-2, 0, 2) for dx in (-2, 0, 2)])
    evals = np.concatenate([np.roll(np.roll(s, dy, 2), dx, 3) for s in sets for dy in (-1, 1) for dx in (-1, 1)])
    return os.path.join(d, "model.onnx"), "Input3", calib, evals, None


def superres():
    d = os.path.join(shared(), "models", "super-resolution-10")
    x = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0", "input_0.pb")))
    rng = np.random.default_rng(4)
    calib = np.concatenate([x] + [np.clip(x + 0.05 * rng.standard_normal(x.shape), 0, 1).astype(np.float32)
                                  for _ in range(7)])
    evals = np.concatenate([np.clip(x + 0.05 * rng.standard_normal(x.shape), 0, 1).astype(np.float32)
                            for _ in range(4)])
    return os.path.join(d, "model.onnx"), "input", calib, evals, None


def generated(name):
    import gen_models
    build = {"resnet_style": gen_models.build_resnet_style, "mobilenet_style": gen_models.build_mobilenet_style}[name]
    model, feeds = build(np.random.default_rng(1))
    path = os.path.join(TMP, f"{name}.onnx")
    onnx.save(model, path)
    iname = model.graph.input[0].name
    shape = [1] + list(feeds[0][iname].shape[1:])
    rng = np.random.default_rng(2)
    calib = rng.standard_normal([32] + shape[1:]).astype(np.float32)
    evals = rng.standard_normal([16] + shape[1:]).astype(np.float32)
    return path, iname, calib, evals, None


def light(name):
    d = os.path.join(shared(), "conformance", "light", f"test_{name}")
    x = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0", "input_0.pb")))
    rng = np.random.default_rng(3)
    # The one official input, and perturbed copies of it as more samples.
    calib = np.concatenate([x] + [x + 0.1 * rng.standard_normal(x.shape).astype(np.float32) for _ in range(7)])
    evals = np.concatenate([x + 0.1 * rng.standard_normal(x.shape).astype(np.float32) for _ in range(4)])
    g = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False).graph
    inits = {t.name for t in g.initializer}
    iname = [i.name for i in g.input if i.name not in inits][0]
    return os.path.join(d, "model.onnx"), iname, calib, evals, None


LIGHT = ["squeezenet", "resnet50", "inception_v1", "inception_v2", "shufflenet", "densenet121", "bvlc_alexnet",
         "zfnet512", "vgg19"]

# ---- measuring -------------------------------------------------------------


def ort_quantize(float_path, out, iname, calib):
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, \
        quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{iname: calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.it, None)

    # onnxruntime 1.32's int32-bias weight-scale adjustment fails on biases
    # that fusion left with shape [C,1,1] (mnist-8); it only matters for
    # biases beyond int32 range, so it is turned off for every model alike.
    quantize_static(float_path, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"QDQDisableWeightAdjustForInt32Bias": True})


def run_rows(sess, iname, x):
    return np.concatenate([sess.run(None, {iname: x[i:i + 1]})[0] for i in range(len(x))])


def edgerun_rows(model, iname, x, name):
    """edgerun's outputs (output 0) for each sample, through `edgerun run`
    on the whole batch when the batch is free, else sample by sample."""
    outs = []
    dims = onnx.load(model, load_external_data=False).graph.input[0].type.tensor_type.shape.dim
    free = dims and not dims[0].dim_value
    batches = [x] if free else [x[i:i + 1] for i in range(len(x))]
    for k, b in enumerate(batches):
        inp = os.path.join(TMP, f"{name}-in-{k}.npy")
        np.save(inp, b)
        od = os.path.join(TMP, f"{name}-out-{k}")
        subprocess.run([EDGERUN, "run", model, "--input", f"{iname}={inp}", "--out", od], check=True,
                       capture_output=True)
        f = sorted(p for p in os.listdir(od) if p.endswith(".npy"))[0]
        outs.append(np.load(os.path.join(od, f)))
    return np.concatenate(outs)


def sqnr(ref, got):
    e = ((ref.astype(np.float64) - got) ** 2).sum()
    return float("inf") if e == 0 else float(10 * np.log10((ref.astype(np.float64) ** 2).sum() / e))


def er_p50(model, runs):
    out = subprocess.run([ER_LATENCY, model, "--runs", str(runs)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["p50_ms"]


def ort_p50(model, iname, x, runs):
    s = session(model)
    feed = {iname: x[:1]}
    for _ in range(3):
        s.run(None, feed)
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        s.run(None, feed)
        t.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(t))


def bench(name, src, iname, calib, evals, labels, runs, prepare_first, auto):
    row = {"model": name}
    fpath = src
    if prepare_first:
        fpath = prepare(src, os.path.join(TMP, f"{name}-prepared.onnx"))
        row["prepared"] = True
    cdir = os.path.join(TMP, f"{name}-calib")
    os.makedirs(cdir, exist_ok=True)
    np.save(os.path.join(cdir, "samples.npy"), calib)
    er_q, ort_q = os.path.join(TMP, f"{name}-er.onnx"), os.path.join(TMP, f"{name}-ort.onnx")
    t0 = time.time()
    epath = os.path.join(TMP, f"{name}-eval.npy")
    np.save(epath, evals)
    p = subprocess.run([EDGERUN, "quantize", fpath, "--calib", os.path.join(cdir, "samples.npy"), "-o", er_q,
                        "--activations", "int8", "--quiet", "--report", os.path.join(TMP, f"{name}-report"),
                        "--eval", epath], capture_output=True, text=True)
    if p.returncode != 0:
        row["error"] = p.stderr.strip()
        return row
    row["edgerun_quantize_s"] = round(time.time() - t0, 2)
    if auto:
        # keep-float auto with a budget 3 dB above what full quantization
        # reaches on the evaluation samples, so some layers must stay float.
        rep = json.load(open(os.path.join(TMP, f"{name}-report.json")))
        base = rep["evaluation"]["outputs"][0]["sqnr_db"]
        if base is not None:
            budget = round(base + 3.0, 1)
            t1 = time.time()
            p = subprocess.run([EDGERUN, "quantize", fpath, "--calib", os.path.join(cdir, "samples.npy"), "-o",
                                os.path.join(TMP, f"{name}-auto.onnx"), "--activations", "int8", "--quiet",
                                "--keep-float", f"auto:{budget}dB", "--eval", epath, "--report",
                                os.path.join(TMP, f"{name}-auto")], capture_output=True, text=True)
            if p.returncode in (0, 3):
                kf = json.load(open(os.path.join(TMP, f"{name}-auto.json")))["keep_float"]
                row["auto"] = {"budget_db": budget, "all_quantized_db": kf["all_quantized"], "final_db": kf["final"],
                               "met": kf["met"], "kept": kf["kept"],
                               "layers": len(json.load(open(os.path.join(TMP, f"{name}-auto.json")))["layers"]),
                               "seconds": round(time.time() - t1, 1)}
    t0 = time.time()
    ort_quantize(fpath, ort_q, iname, calib)
    row["ort_quantize_s"] = round(time.time() - t0, 2)
    row["float_bytes"] = os.path.getsize(fpath)
    row["edgerun_int8_bytes"] = os.path.getsize(er_q)
    row["ort_int8_bytes"] = os.path.getsize(ort_q)
    ref = run_rows(session(fpath), iname, evals)
    ours = edgerun_rows(er_q, iname, evals, f"{name}-er")
    ours_float = edgerun_rows(fpath, iname, evals, f"{name}-erf")
    theirs = run_rows(session(ort_q), iname, evals)
    # Cross-check: onnxruntime running edgerun's QDQ model.
    ours_in_ort = run_rows(session(er_q), iname, evals)
    row["sqnr_edgerun_int8_db"] = round(sqnr(ref, ours), 2)
    row["sqnr_ort_int8_db"] = round(sqnr(ref, theirs), 2)
    top = (lambda a: a.reshape(len(evals), -1).argmax(1))
    row["top1_agree_edgerun_int8"] = float((top(ours) == top(ref)).mean())
    row["top1_agree_ort_int8"] = float((top(theirs) == top(ref)).mean())
    row["ort_runs_edgerun_qdq_agree"] = float((top(ours_in_ort) == top(ours)).mean())
    if labels is not None:
        row["acc_float"] = float((top(ours_float) == labels).mean())
        row["acc_edgerun_int8"] = float((top(ours) == labels).mean())
        row["acc_ort_float"] = float((top(ref) == labels).mean())
        row["acc_ort_int8"] = float((top(theirs) == labels).mean())
    row["p50_ms_edgerun_float"] = er_p50(fpath, runs)
    row["p50_ms_edgerun_int8"] = er_p50(er_q, runs)
    row["p50_ms_ort_float"] = ort_p50(fpath, iname, evals, runs)
    row["p50_ms_ort_int8"] = ort_p50(ort_q, iname, evals, runs)
    return row


def main():
    global TMP, EDGERUN, ER_LATENCY
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="digits,fashion,mnist8,superres,resnet_style,mobilenet_style")
    ap.add_argument("--light", action="store_true", help="also the shared classic CNNs (slow: VGG-19 is 548 MB)")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json")
    ap.add_argument("--auto", default="digits,fashion,mnist8,superres,resnet_style,mobilenet_style",
                    help="models on which to run --keep-float auto (budget: full quantization + 3 dB)")
    args = ap.parse_args()
    EDGERUN = os.path.join(args.build, "edgerun")
    ER_LATENCY = os.path.join(args.build, "er-latency")
    names = [n for n in args.models.split(",") if n]
    auto = set(a for a in args.auto.split(",") if a)
    if args.light:
        names += LIGHT
    rows = []
    with tempfile.TemporaryDirectory(prefix="er-quant-bench-") as d:
        TMP = d
        for name in names:
            if name == "digits":
                src, iname, calib, evals, labels = digits()
            elif name == "fashion":
                if not os.path.exists(os.path.join(ROOT, "models", "fashion", "model.onnx")):
                    print("skip fashion: models/fashion/model.onnx missing (tools/train_fashion.py)")
                    continue
                src, iname, calib, evals, labels = fashion()
            elif name == "mnist8":
                src, iname, calib, evals, labels = mnist8()
            elif name == "superres":
                src, iname, calib, evals, labels = superres()
            elif name in ("resnet_style", "mobilenet_style"):
                src, iname, calib, evals, labels = generated(name)
            else:
                src, iname, calib, evals, labels = light(name)
            m = onnx.load(src, load_external_data=False)
            needs_prep = m.opset_import[0].version < 13 or any(n.op_type in ("ConstantOfShape", "Constant")
                                                               for n in m.graph.node)
            t0 = time.time()
            row = bench(name, src, iname, calib, evals, labels, args.runs, needs_prep, name in auto)
            row["seconds"] = round(time.time() - t0, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    hdr = (f"{'model':16} {'SQNR er':>8} {'SQNR ort':>8} {'agree er':>8} {'agree ort':>9} {'acc f/er/ort':>20} "
           f"{'p50 er f':>9} {'p50 er i8':>9} {'p50 ort f':>9} {'p50 ort i8':>10} {'er/ort i8':>9}")
    print(hdr)
    for r in rows:
        if "error" in r:
            print(f"{r['model']:16} error: {r['error'][:100]}")
            continue
        acc = (f"{100 * r['acc_float']:.1f}/{100 * r['acc_edgerun_int8']:.1f}/{100 * r['acc_ort_int8']:.1f}"
               if "acc_float" in r else "-")
        print(f"{r['model']:16} {r['sqnr_edgerun_int8_db']:8.2f} {r['sqnr_ort_int8_db']:8.2f} "
              f"{100 * r['top1_agree_edgerun_int8']:7.1f}% {100 * r['top1_agree_ort_int8']:8.1f}% {acc:>20} "
              f"{r['p50_ms_edgerun_float']:9.3f} {r['p50_ms_edgerun_int8']:9.3f} {r['p50_ms_ort_float']:9.3f} "
              f"{r['p50_ms_ort_int8']:10.3f} {r['p50_ms_edgerun_int8'] / r['p50_ms_ort_int8']:9.2f}")
    for r in rows:
        if "auto" in r:
            a = r["auto"]
            print(f"keep-float auto {r['model']:16} budget {a['budget_db']} dB: {a['all_quantized_db']:.2f} -> "
                  f"{a['final_db']:.2f} dB, {'met' if a['met'] else 'NOT met'}, kept {len(a['kept'])} of "
                  f"{a['layers']} layers float {a['kept']} ({a['seconds']} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
