#!/usr/bin/env python3
"""Benchmarks `edgerun serve` (a benchmark, not a test: it prints numbers
and ratios, it asserts nothing about speed). For each model:

  1. The compute side, in this process (er_session_run): p50 of one run at
     batch 1 and per image at batch --max-batch. Their ratio is the most
     batching could gain if HTTP cost nothing.
  2. Added latency: p50 of one binary-data infer request over a kept-alive
     loopback connection minus the in-process p50 at batch 1.
  3. Throughput at concurrency 1, 4 and 16 with kept-alive connections and
     binary-data requests: without batching (max_batch 1), with batching
     and batch_delay_us 0 (a run takes whatever is queued when a worker is
     free), and with batching and --batch-delay-us (each batch that does
     not fill waits that long for more). Mean batch = rows per run.

Every model is served by one server (--instances workers per model,
--http-threads HTTP threads); the load client is bench/serve_client.c, on
the same machine. Models: digits (models/digits, 8x8 input), the
Fashion-MNIST CNN (models/fashion, 28x28; its input is the first test image
from the Debian dataset package when installed, else a seeded random image:
the timing does not depend on the pixel values), and mnist_cnn, the classic
"deep MNIST" CNN of TensorFlow's tutorial (5x5 conv 32, pool, 5x5 conv 64,
pool, fully connected 3136->1024->10; 3.3 M parameters, 13 MB), generated
here with seeded random weights: its first fully connected layer reads all
its 12.8 MB of weights once per run, so it is the small CNN whose compute
batching can amortize, where the other two are so small that the HTTP cost
of a request outweighs their compute.

Usage: .venv/bin/python bench/serve_bench.py [--build build] [--edgerun PATH]
       [--models digits,fashion] [--seconds 2] [--max-batch 16] [--batch-delay-us 500]
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))
import harness  # noqa: E402

FASHION_IMAGES = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"


def run(*args):
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    return float(out[1])


def model_input(name):
    """One request's input, [1, ...] float32."""
    if name == "digits":
        return np.load(os.path.join(ROOT, "models", "digits", "sample.npy")).astype(np.float32)
    if os.path.exists(FASHION_IMAGES):
        with gzip.open(FASHION_IMAGES) as f:
            raw = f.read()
        return (np.frombuffer(raw, np.uint8, 28 * 28, offset=16).reshape(1, 1, 28, 28)
                .astype(np.float32) / 255.0)
    return np.random.default_rng(0).random((1, 1, 28, 28), dtype=np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--edgerun", help="server binary (default: BUILD/edgerun)")
    ap.add_argument("--models", default="digits,fashion,mnist_cnn")
    ap.add_argument("--seconds", type=float, default=2.0, help="per throughput point")
    ap.add_argument("--requests", type=int, default=3000, help="per latency measurement")
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--http-threads", type=int, default=2)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--batch-delay-us", type=int, default=500)
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    client = os.path.join(a.build, "bench", "serve-client")
    harness.EDGERUN = a.edgerun or os.path.join(a.build, "edgerun")
    names = a.models.split(",")
    tmp = tempfile.mkdtemp(prefix="edgerun-serve-bench-")
    repo = harness.Repo()
    variants = (("plain", 1, 0), ("d0", a.max_batch, 0), ("dD", a.max_batch, a.batch_delay_us))
    inputs = {}
    for name in names:
        path = os.path.join(ROOT, "models", name, "model.onnx")
        if name == "mnist_cnn":
            path = os.path.join(tmp, "mnist_cnn.onnx")
            harness.mnist_cnn(path)
        x = model_input(name)
        inputs[name] = (path, os.path.join(tmp, name + ".npy"), os.path.join(tmp, name + "_b.npy"))
        np.save(inputs[name][1], x)
        np.save(inputs[name][2], np.repeat(x, a.max_batch, axis=0))
        for v, mb, d in variants:
            repo.add(f"{name}-{v}", 1, model=lambda p, s=path: shutil.copy(s, p),
                     config={"instances": a.instances, "max_batch": mb, "batch_delay_us": d,
                             "queue_size": 1024})
    srv = harness.Server(repo, "--http-threads", str(a.http_threads), "--log-level", "warn")
    results = {}
    try:
        port = str(srv.port)
        print(f"{os.cpu_count()} CPUs; server: {os.path.relpath(harness.EDGERUN, ROOT)}, "
              f"{a.instances} instances per model, {a.http_threads} HTTP threads; "
              f"batching: max_batch {a.max_batch}; {a.seconds:g} s per point")
        for name in names:
            path, x1, xb = inputs[name]
            one = run(client, "inproc", path, x1, str(a.requests))
            batch = run(client, "inproc", path, xb, str(max(a.requests // a.max_batch, 50)))
            http = run(client, "latency", port, f"{name}-plain", x1, str(a.requests))
            print()
            where = "generated, seeded weights" if name == "mnist_cnn" else os.path.relpath(path, ROOT)
            print(f"== {name} ({where})")
            print(f"in-process: {one:.1f} us at batch 1, {batch / a.max_batch:.1f} us per image at "
                  f"batch {a.max_batch} (compute ceiling for batching {one * a.max_batch / batch:.2f}x)")
            print(f"latency p50: in-process {one:.1f} us, over HTTP {http:.1f} us, "
                  f"added by the service {http - one:.1f} us")
            res = results[name] = {"inproc_b1_us": one, "inproc_per_image_us": batch / a.max_batch,
                                   "http_p50_us": http, "added_us": http - one, "load": {}}
            print(f"{'concurrency':>11} | {'no batching':>11} | {'batching, delay 0':>26} | "
                  f"{f'batching, delay {a.batch_delay_us} us':>26}")
            print(f"{'':>11} | {'req/s':>11} | {'req/s  ratio  mean batch':>26} | "
                  f"{'req/s  ratio  mean batch':>26}")
            print("-" * 84)
            for c in (1, 4, 16):
                row = {}
                for v, _, _ in variants:
                    model = f"{name}-{v}"
                    m = srv.metrics()
                    runs0 = srv.sample(m, "edgerun_batch_size_count", model=model) or 0
                    rows0 = srv.sample(m, "edgerun_batch_size_sum", model=model) or 0
                    rps = run(client, "load", port, model, x1, str(c), str(a.seconds))
                    m = srv.metrics()
                    runs = srv.sample(m, "edgerun_batch_size_count", model=model) - runs0
                    rows = srv.sample(m, "edgerun_batch_size_sum", model=model) - rows0
                    row[v] = (rps, rows / max(runs, 1))
                res["load"][c] = row
                plain = row["plain"][0]
                cells = [f"{row[v][0]:>7.0f}  {row[v][0] / plain:5.2f}  {row[v][1]:>10.1f}"
                         for v in ("d0", "dD")]
                print(f"{c:>11} | {plain:>11.0f} | {cells[0]:>26} | {cells[1]:>26}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"args": vars(a), "results": results}, f, indent=1)
        rc = srv.stop()
        if rc:
            print(f"server exited {rc}", file=sys.stderr)
    finally:
        srv.cleanup()
        repo.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
