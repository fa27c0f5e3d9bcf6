#!/usr/bin/env python3
"""edgerun against onnxruntime on the same models and inputs, in one run.

    bench/compare_ort.py [--threads 1,2] [--iterations 30] [--rounds 2]
                         [--models NAME,...] [--report bench/REPORT-cpu.md]

For every model and thread count the two runtimes are measured alternately
(edgerun, onnxruntime, edgerun, onnxruntime, ... for --rounds rounds), each
run in a fresh process so peak RSS and load time are its own; the median of
the rounds' p50 latencies is reported. onnxruntime runs with all graph
optimizations, intra-op threads = T and sequential execution
(bench/ort_runner.py). Inputs: seeded random values of the declared shapes in
both runtimes. Ratios are edgerun / onnxruntime (below 1 is better for
edgerun); the geometric mean is over the models.

Model set: ../shared/models/*, the nine ../shared/conformance/light CNNs,
and bench/gen_bench_models.py's MobileNetV2, ResNet-18, YOLO-style detector
and transformer encoder (written into build/bench-models). --real adds the
real models the tests fetch from pip packages, --extra the architectures of
bench/gen_extra_models.py (EfficientNet, MobileNetV3, YOLOv8n, ViT, U-Net,
ConvNeXt, CRNN, a keyword spotter).
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
from check import SHARED  # noqa: E402

PY = os.path.join(ROOT, ".venv", "bin", "python")


def model_set(bench_dir):
    models = []
    for name in sorted(os.listdir(os.path.join(SHARED, "models"))):
        models.append((name, os.path.join(SHARED, "models", name, "model.onnx")))
    light = os.path.join(SHARED, "conformance", "light")
    for name in sorted(os.listdir(light)):
        models.append((name.replace("test_", ""), os.path.join(light, name, "model.onnx")))
    for name in ("mobilenetv2_224", "resnet18_224", "detector_320", "transformer_s128"):
        models.append((name, os.path.join(bench_dir, name, "model.onnx")))
    return models


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd[:3]), out.stderr.strip()[-500:]))
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import onnxruntime
    return "%s, %d logical CPUs, %s; onnxruntime %s" % (cpu, os.cpu_count(), platform.platform(),
                                                       onnxruntime.__version__)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edgerun", default=os.path.join(ROOT, "build", "edgerun"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=0.25,
                    help="raise --iterations for models so fast that a round would be shorter")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--models", help="comma-separated subset")
    ap.add_argument("--bench-dir", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--report", help="also write a Markdown report here")
    ap.add_argument("--real", help="also measure the real models in this folder (written by "
                    "tests/models/real_models.py --out DIR; the test suite leaves them in build/real-models)")
    ap.add_argument("--extra", help="also measure the models in this folder (DIR/NAME/model.onnx, written by "
                    "bench/gen_extra_models.py --out DIR), on seeded random inputs")
    args = ap.parse_args()

    if not os.path.exists(os.path.join(args.bench_dir, "transformer_s128", "model.onnx")):
        subprocess.run([PY, os.path.join(HERE, "gen_bench_models.py"), "--out", args.bench_dir], check=True,
                       stdout=subprocess.DEVNULL)
    models = model_set(args.bench_dir)
    inputs = {}
    if args.real:
        # Real models run on their first test data set: their symbolic
        # dims (audio length, image size) have no meaningful default.
        from onnx import TensorProto
        for name in sorted(os.listdir(args.real)):
            path = os.path.join(args.real, name, "model.onnx")
            data = os.path.join(args.real, name, "test_data_set_0")
            if not os.path.exists(path):
                continue
            models.append((name, path))
            specs = []
            for fn in sorted(f for f in os.listdir(data) if f.startswith("input_")) if os.path.isdir(data) else []:
                t = TensorProto()
                with open(os.path.join(data, fn), "rb") as f:
                    t.ParseFromString(f.read())
                specs += ["--input", "%s=%s" % (t.name, os.path.join(data, fn))]
            inputs[path] = specs
    if args.extra:
        for name in sorted(os.listdir(args.extra)):
            path = os.path.join(args.extra, name, "model.onnx")
            if os.path.exists(path):
                models.append((name, path))
    if args.models:
        keep = set(args.models.split(","))
        models = [m for m in models if m[0] in keep]
    threads = [int(t) for t in args.threads.split(",")]

    rows = []
    for name, path in models:
        for t in threads:
            er, ort = [], []
            try:
                # Small models get more iterations, so that each measured
                # round lasts at least --min-seconds and one scheduling
                # hiccup cannot move the median.
                probe = run_json([args.edgerun, "bench", path, "--json", "--threads", str(t),
                                  "--warmup", "2", "--iterations", "5"] + inputs.get(path, []))
                iters = args.iterations
                if probe["p50_ms"] > 0:
                    iters = max(iters, min(20000, int(math.ceil(args.min_seconds * 1000.0 / probe["p50_ms"]))))
                common = ["--threads", str(t), "--warmup", str(max(args.warmup, iters // 10)),
                          "--iterations", str(iters)] + inputs.get(path, [])
                for _ in range(args.rounds):
                    er.append(run_json([args.edgerun, "bench", path, "--json"] + common))
                    ort.append(run_json([PY, os.path.join(HERE, "ort_runner.py"), path] + common))
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print("%s (%d threads): %s" % (name, t, e), file=sys.stderr)
                continue
            med = lambda rs, k: statistics.median(r[k] for r in rs)
            row = {"model": name, "threads": t,
                   "er_p50": med(er, "p50_ms"), "ort_p50": med(ort, "p50_ms"),
                   "er_rss": med(er, "peak_rss_kb"), "ort_rss": med(ort, "peak_rss_kb"),
                   "er_load": med(er, "load_ms"), "ort_load": med(ort, "load_ms"),
                   "arena": er[-1].get("arena_bytes", 0), "optimized": er[-1].get("optimized_nodes", 0),
                   "nodes": er[-1].get("nodes", 0)}
            row["ratio"] = row["er_p50"] / row["ort_p50"]
            rows.append(row)
            print("%-22s T=%d  p50 %8.2f / %8.2f ms  ratio %5.2f   RSS %7d / %7d KiB   load %7.1f / %7.1f ms" %
                  (name, t, row["er_p50"], row["ort_p50"], row["ratio"], row["er_rss"], row["ort_rss"],
                   row["er_load"], row["ort_load"]), flush=True)

    lines = ["| model | T | edgerun p50 ms | onnxruntime p50 ms | ratio | edgerun peak RSS KiB | "
             "onnxruntime peak RSS KiB | edgerun load ms | onnxruntime load ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %d | %.2f | %.2f | %.2f | %d | %d | %.1f | %.1f |" %
                     (r["model"], r["threads"], r["er_p50"], r["ort_p50"], r["ratio"], r["er_rss"], r["ort_rss"],
                      r["er_load"], r["ort_load"]))
    summary = []
    for t in threads:
        rs = [r["ratio"] for r in rows if r["threads"] == t]
        if rs:
            g = math.exp(sum(math.log(x) for x in rs) / len(rs))
            summary.append("T=%d: geometric mean p50 ratio %.3f over %d models (max %.2f: %s)" %
                           (t, g, len(rs), max(rs),
                            max((r for r in rows if r["threads"] == t), key=lambda r: r["ratio"])["model"]))
    print("\n".join(lines))
    print("\n".join(summary))
    if args.report:
        with open(args.report, "w") as f:
            f.write("# CPU benchmark: edgerun vs onnxruntime\n\n")
            f.write("Measured %s by `bench/compare_ort.py --threads %s --iterations %d --rounds %d%s`.\n\n" %
                    (time.strftime("%Y-%m-%d"), args.threads, args.iterations, args.rounds,
                     " --real %s" % os.path.relpath(args.real, ROOT) if args.real else ""))
            f.write("Machine: %s.\n\n" % machine())
            f.write("p50 latency is the median over rounds of each round's p50; peak RSS is the process "
                    "high-water mark (onnxruntime's minus the Python interpreter and numpy, see "
                    "bench/ort_runner.py); load is file to ready session. Ratio = edgerun / onnxruntime. Models faster than --min-seconds per round get more iterations (the same for both runtimes); real models (--real) run on their test_data_set_0 inputs.\n\n")
            f.write("\n".join(lines) + "\n\n")
            f.write("\n".join("- " + s for s in summary) + "\n")


if __name__ == "__main__":
    main()
