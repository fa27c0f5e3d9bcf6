#!/usr/bin/env python3
"""Benchmarks `edgerun serve` in one run (a benchmark, not a test: it prints
numbers and ratios, it asserts nothing about speed).

  1. Added latency: p50 of one binary-data infer request over a kept-alive
     loopback connection minus p50 of the same run in-process
     (er_session_run), both measured by bench/serve_client.c.
  2. Throughput at concurrency 1, 4 and 16, with and without dynamic
     batching, on the same model.

Usage: .venv/bin/python bench/serve_bench.py [--build build] [--model models/digits/model.onnx]
       [--input models/digits/sample.npy] [--seconds 3]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))
import harness  # noqa: E402


def run(*args):
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    return float(out[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "digits", "model.onnx"))
    ap.add_argument("--input", default=os.path.join(ROOT, "models", "digits", "sample.npy"))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--batch-delay-us", type=int, default=1000)
    a = ap.parse_args()
    client = os.path.join(a.build, "bench", "serve-client")
    harness.EDGERUN = os.path.join(a.build, "edgerun")
    repo = harness.Repo()
    model = lambda p: shutil.copy(a.model, p)  # noqa: E731
    repo.add("plain", 1, model=model, config={"instances": a.instances, "max_batch": 1,
                                              "queue_size": 1024})
    repo.add("batched", 1, model=model, config={"instances": a.instances, "max_batch": a.max_batch,
                                                "batch_delay_us": a.batch_delay_us,
                                                "queue_size": 1024})
    srv = harness.Server(repo, "--http-threads", "2", "--log-level", "warn")
    try:
        port = str(srv.port)
        inproc = run(client, "inproc", a.model, a.input, str(a.requests))
        http = run(client, "latency", port, "plain", a.input, str(a.requests))
        print(f"model {os.path.relpath(a.model, ROOT)}, input {os.path.relpath(a.input, ROOT)}, "
              f"{os.cpu_count()} CPUs, instances {a.instances}")
        print(f"latency p50: in-process {inproc:.1f} us, over HTTP {http:.1f} us, "
              f"added by the service {http - inproc:.1f} us")
        print()
        print(f"{'concurrency':>11} | {'no batching req/s':>17} | {'batching req/s':>14} | ratio | mean batch")
        print("-" * 70)
        for c in (1, 4, 16):
            before = srv.sample(srv.metrics(), "edgerun_batch_size_count", model="batched") or 0
            done_before = srv.sample(srv.metrics(), "edgerun_batch_size_sum", model="batched") or 0
            plain = run(client, "load", port, "plain", a.input, str(c), str(a.seconds))
            batched = run(client, "load", port, "batched", a.input, str(c), str(a.seconds))
            m = srv.metrics()
            runs = srv.sample(m, "edgerun_batch_size_count", model="batched") - before
            rows = srv.sample(m, "edgerun_batch_size_sum", model="batched") - done_before
            print(f"{c:>11} | {plain:>17.0f} | {batched:>14.0f} | {batched / plain:5.2f} | "
                  f"{rows / max(runs, 1):.1f}")
        rc = srv.stop()
        if rc:
            print(f"server exited {rc}", file=sys.stderr)
    finally:
        srv.cleanup()
        repo.cleanup()


if __name__ == "__main__":
    main()
