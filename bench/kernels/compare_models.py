"""Runs edgerun (bench-model) and onnxruntime on the same models and inputs,
alternating, at the given thread counts, and prints p50 latency for both
and the edgerun/onnxruntime ratio per model, with the geometric mean.
The machine is shared, so each figure is the median over --rounds
alternations of medians over --runs runs. Not a test.

    python compare_models.py --bench build/tests/bench-model [--threads 1 2] DIR_OR_MODEL...

A folder holding model.onnx and test_data_set_0/ is run on that data;
a bare .onnx file on a fixed input pattern (unknown dims = 1).
"""
import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def ort_inputs(model_path, data_dir, sess):
    feeds = {}
    if data_dir:
        files = sorted(glob.glob(os.path.join(data_dir, "input_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
        m = onnx.load(model_path, load_external_data=False)
        inits = {i.name for i in m.graph.initializer}
        names = [i.name for i in m.graph.input if i.name not in inits] or [i.name for i in m.graph.input]
        all_names = [i.name for i in m.graph.input]
        for idx, f in enumerate(files):
            t = onnx.TensorProto()
            t.ParseFromString(open(f, "rb").read())
            name = t.name or (all_names[idx] if idx < len(all_names) else names[idx])
            feeds[name] = numpy_helper.to_array(t)
        valid = {i.name for i in sess.get_inputs()}
        return {k: v for k, v in feeds.items() if k in valid}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        n = int(np.prod(shape)) if shape else 1
        if i.type == "tensor(float)":
            v = ((np.arange(n) * 7919) % 255 / 255.0 - 0.5).astype(np.float32).reshape(shape)
        elif i.type == "tensor(int64)":
            v = np.ones(shape, np.int64)
        else:
            v = np.zeros(shape, np.float32)
        feeds[i.name] = v
    return feeds


def time_ort(sess, feeds, runs, warmup):
    for _ in range(warmup):
        sess.run(None, feeds)
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    for threads in args.threads:
        ratios = []
        print(f"\n{threads} thread(s): p50 ms, median of {args.rounds} alternating rounds of {args.runs} runs")
        print(f"{'model':34s} {'edgerun':>9s} {'ort':>9s} {'ratio':>6s}")
        for item in args.models:
            if os.path.isdir(item):
                model = os.path.join(item, "model.onnx")
                data = os.path.join(item, "test_data_set_0")
                data = data if os.path.isdir(data) else None
            else:
                model, data = item, None
            so = ort.SessionOptions()
            so.log_severity_level = 3
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
            feeds = ort_inputs(model, data, sess)
            er, ot = [], []
            for _ in range(args.rounds):
                cmd = [args.bench, model, "--threads", str(threads), "--runs", str(args.runs), "--warmup", str(args.warmup)]
                if data:
                    cmd += ["--data", data]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    print(f"{os.path.basename(item):34s} edgerun failed: {out.stderr.strip()[:200]}")
                    er = None
                    break
                er.append(json.loads(out.stdout)["p50_ms"])
                ot.append(time_ort(sess, feeds, args.runs, args.warmup))
            if not er:
                continue
            e, o = statistics.median(er), statistics.median(ot)
            ratios.append(e / o)
            name = os.path.basename(item.rstrip("/"))
            print(f"{name:34s} {e:9.2f} {o:9.2f} {e / o:6.2f}")
        if ratios:
            gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            print(f"{'geometric mean':34s} {'':9s} {'':9s} {gm:6.2f}")


if __name__ == "__main__":
    main()
