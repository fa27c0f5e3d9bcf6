#!/usr/bin/env python3
"""edgerun's LLM engine against llama.cpp on the same GGUF files, in one
run: prompt processing (pp) and token generation (tg) tokens/s as
llama-bench measures them, at 1 and 2 threads, alternating the two engines
round by round; peak RSS of each (GNU time); the machine's streaming-read
bandwidth and the decode bound it gives (weight bytes read per token /
bandwidth); and, at 2 threads, decode with a CPU-bound process holding one
core. Writes the table to bench/REPORT-llm.md (or --report).

llama.cpp is built by scripts/setup-llama-cpp.sh from the llama-cpp-python
source distribution (the default build for this CPU, OpenMP included).

    bench/llm_compare.py [--rounds 3] [--threads 1,2] [--quick]
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))
from llm_assets import smollm2_path  # noqa: E402

EDGERUN = os.path.join(ROOT, "build", "edgerun")
LLAMA_BIN = os.path.join(ROOT, ".cache", "llama.cpp-build", "bin")
MODELS = os.path.join(ROOT, ".cache", "llm-models")


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw)


def edgerun_bench(model, threads, p, n, reps, bandwidth=False):
    cmd = [EDGERUN, "bench", model, "--llm", "-p", str(p), "-n", str(n), "-r", str(reps), "--threads", str(threads),
           "--json"]
    if not bandwidth:
        cmd.append("--no-bandwidth")
    return json.loads(sh(cmd).stdout)


def llama_bench(model, threads, p, n, reps):
    out = sh([os.path.join(LLAMA_BIN, "llama-bench"), "-m", model, "-p", str(p), "-n", str(n), "-t", str(threads),
              "-r", str(reps), "-o", "json"]).stdout
    res = {"pp": 0.0, "tg": 0.0}
    for row in json.loads(out):
        if row.get("n_prompt", 0) > 0 and row.get("n_gen", 0) == 0:
            res["pp"] = row["avg_ts"]
        elif row.get("n_gen", 0) > 0 and row.get("n_prompt", 0) == 0:
            res["tg"] = row["avg_ts"]
    return res


def peak_rss_mb(cmd):
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return float("nan")
    return int(p.stderr.strip().splitlines()[-1]) / 1024.0


class Hog:
    """A CPU-bound process pinned to the last core (the competing load)."""

    def __enter__(self):
        core = str(os.cpu_count() - 1)
        self.p = subprocess.Popen(["taskset", "-c", core, sys.executable, "-c", "while True: pass"])
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            txt = f.read()
        name = re.search(r"model name\s*:\s*(.*)", txt).group(1)
        flags = re.search(r"flags\s*:\s*(.*)", txt).group(1).split()
        isa = " ".join(x for x in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if x in flags)
        return f"{name}, {os.cpu_count()} vCPUs ({isa})"
    except Exception:
        return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="SmolLM2 only, 1 round")
    ap.add_argument("--models", default="", help="comma-separated names under .cache/llm-models, or 'smollm2'")
    ap.add_argument("--report", default=os.path.join(HERE, "REPORT-llm.md"))
    a = ap.parse_args()
    if not os.path.exists(os.path.join(LLAMA_BIN, "llama-bench")):
        sys.exit("llama.cpp is not built: run scripts/setup-llama-cpp.sh")
    models = [("SmolLM2-135M-Instruct Q4_1", smollm2_path())]
    if not a.quick:
        names = a.models.split(",") if a.models else ["qwen2-0.5b-shape-q8_0", "qwen2-0.5b-shape-q4_0",
                                                       "qwen2-0.5b-shape-q4_k_m"]
        for n in names:
            path = os.path.join(MODELS, n + ".gguf")
            if os.path.exists(path):
                models.append((n, path))
            else:
                print(f"skipping {n}: {path} is missing (tests/llm/gen_llm_models.py --big)")
    rounds = 1 if a.quick else a.rounds
    threads = [int(t) for t in a.threads.split(",")]
    # Bandwidth once per thread count, quiet, from edgerun's own probe.
    probe = {t: edgerun_bench(models[0][1], t, 0, 1, 1, bandwidth=True) for t in threads}
    rows = []
    for label, path in models:
        for t in threads:
            er_pp, er_tg, ll_pp, ll_tg = [], [], [], []
            for _ in range(rounds):
                e = edgerun_bench(path, t, a.p, a.n, 3)
                l = llama_bench(path, t, a.p, a.n, 3)
                er_pp.append(e["pp_tps"])
                er_tg.append(e["tg_tps"])
                ll_pp.append(l["pp"])
                ll_tg.append(l["tg"])
                bytes_per_token = e["bytes_per_token"]
            med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
            bw = probe[t]["bandwidth_gbs"] * 1e9
            bound = bw / bytes_per_token
            row = dict(model=label, threads=t, er_pp=med(er_pp), ll_pp=med(ll_pp), er_tg=med(er_tg), ll_tg=med(ll_tg),
                       bw=bw / 1e9, bound=bound, mb_per_token=bytes_per_token / 1e6)
            if t > 1:
                with Hog():
                    e = edgerun_bench(path, t, 0, a.n, 2)
                    l = llama_bench(path, t, 0, a.n, 2)
                row["er_tg_busy"] = e["tg_tps"]
                row["ll_tg_busy"] = l["tg"]
            rows.append(row)
            print(json.dumps(row))
        er_rss = peak_rss_mb([EDGERUN, "bench", path, "--llm", "-p", str(a.p), "-n", str(a.n), "-r", "1",
                              "--no-bandwidth"])
        ll_rss = peak_rss_mb([os.path.join(LLAMA_BIN, "llama-bench"), "-m", path, "-p", str(a.p), "-n", str(a.n), "-r",
                              "1"])
        for r in rows:
            if r["model"] == label:
                r["er_rss"], r["ll_rss"] = er_rss, ll_rss
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [
        "# LLM decode and prefill: edgerun against llama.cpp",
        "",
        f"Written by `bench/llm_compare.py` at {commit} on {cpu_name()}; "
        f"{time.strftime('%Y-%m-%d')}. llama.cpp: the source in llama-cpp-python 0.3.36, built by "
        "scripts/setup-llama-cpp.sh (default build: native ISA, OpenMP). Both engines run the same GGUF file; "
        f"pp = prompt processing of {a.p} tokens, tg = generation of {a.n} tokens, tokens/s as llama-bench "
        f"measures them (medians of {rounds} alternating rounds of 3 repetitions each). Bandwidth: edgerun's "
        "streaming-read probe (1 GiB, the best of 4 passes); the decode bound is bandwidth / weight bytes read per "
        "token. 'busy': a CPU-bound process pinned to one core during the 2-thread run.",
        "",
        "| model | threads | pp edgerun | pp llama.cpp | ratio | tg edgerun | tg llama.cpp | ratio | MB/token | "
        "bandwidth GB/s | tg bound | tg % of bound | tg busy edgerun | tg busy llama.cpp | RSS MB edgerun | RSS MB llama.cpp |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        busy_e = f"{r['er_tg_busy']:.1f}" if "er_tg_busy" in r else ""
        busy_l = f"{r['ll_tg_busy']:.1f}" if "ll_tg_busy" in r else ""
        lines.append(
            f"| {r['model']} | {r['threads']} | {r['er_pp']:.1f} | {r['ll_pp']:.1f} | {r['er_pp'] / r['ll_pp']:.2f} | "
            f"{r['er_tg']:.1f} | {r['ll_tg']:.1f} | {r['er_tg'] / r['ll_tg']:.2f} | {r['mb_per_token']:.1f} | "
            f"{r['bw']:.1f} | {r['bound']:.1f} | {100 * r['er_tg'] / r['bound']:.0f}% | {busy_e} | {busy_l} | "
            f"{r['er_rss']:.0f} | {r['ll_rss']:.0f} |")
    with open(a.report, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
