#!/usr/bin/env python3
"""Measures one model in onnxruntime, in its own process, the way
`edgerun bench --json` measures edgerun, and prints one JSON object.

    ort_runner.py MODEL --threads T --warmup N --iterations N [--dim NAME=V ...]

onnxruntime runs with all graph optimizations, intra-op threads = T,
sequential execution, the CPU provider. Inputs are seeded random values of
the declared shapes (uniform [-1, 1] floats, zeros otherwise), like edgerun's.

Memory: peak_rss_kb is the process's high-water RSS minus the RSS measured
after importing numpy but before importing onnxruntime, so the Python
interpreter and numpy do not count against onnxruntime while its own library,
arena and weights do.
"""
import argparse
import json
import resource
import time

import numpy as np


def current_rss_kb():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() // 1024


def peak_rss_kb():
    # VmHWM: this process's own high-water mark. getrusage's ru_maxrss is
    # not reset by execve on Linux and would include the parent's size.
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--input", action="append", default=[],
                    help="NAME=FILE.pb: this input's value (an ONNX TensorProto), as edgerun bench --input")
    args = ap.parse_args()
    dims = dict(d.split("=") for d in args.dim)

    baseline = current_rss_kb()
    import onnxruntime as ort

    t0 = time.perf_counter()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - t0) * 1e3

    types = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32, "tensor(bool)": np.bool_, "tensor(uint8)": np.uint8,
             "tensor(int8)": np.int8, "tensor(float16)": np.float16}
    rng = np.random.default_rng(42)
    feeds = {}
    given = {}
    for spec in args.input:
        from onnx import TensorProto, numpy_helper
        name, path = spec.split("=", 1)
        t = TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        given[name] = numpy_helper.to_array(t)
    for i in sess.get_inputs():
        if i.name in given:
            feeds[i.name] = given[i.name]
            continue
        shape = [d if isinstance(d, int) and d >= 0 else int(dims.get(d, 1)) if isinstance(d, str) else 1
                 for d in i.shape]
        t = types[i.type]
        if t in (np.float32, np.float64, np.float16):
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(t)
        else:
            feeds[i.name] = np.zeros(shape, dtype=t)

    t0 = time.perf_counter()
    sess.run(None, feeds)
    first_ms = (time.perf_counter() - t0) * 1e3
    lat = []
    for k in range(args.warmup + args.iterations):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ms = (time.perf_counter() - t0) * 1e3
        if k >= args.warmup:
            lat.append(ms)
    lat.sort()
    peak = peak_rss_kb()
    print(json.dumps({
        "load_ms": load_ms, "first_run_ms": first_ms,
        "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)),
        "p99_ms": float(np.percentile(lat, 99)), "mean_ms": float(np.mean(lat)), "min_ms": lat[0],
        "peak_rss_kb": peak - baseline, "process_peak_rss_kb": peak,
    }))


if __name__ == "__main__":
    main()
