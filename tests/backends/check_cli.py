#!/usr/bin/env python3
"""The accelerator commands end to end through build/edgerun:

- a model whose ops are all covered runs entirely on OpenCL (--no-fallback)
  within tolerance of the CPU reference, and inspect shows 0% fallback;
- models with uncovered ops run correctly split, each fallback listed with
  its reason (inspect) and logged (run);
- the sample out-of-tree plugin loads from --backend-path and runs a model;
- devices (--json, --html, --require), bench --compare, and bench's hint
  when symbolic dims left at 1 break a run.

Skips the OpenCL parts, saying so, when the OpenCL backend is unusable
(no PoCL). Last line: "N passed, N failed"."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL", what)


def run(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, env=e)


def find_shared():
    for cand in (os.environ.get("EDGERUN_SHARED"), os.path.join(os.path.dirname(ROOT), "shared"), "/work/shared"):
        if cand and os.path.isdir(os.path.join(cand, "models")):
            return cand
    return None


def opencl_usable(er):
    r = run([er, "devices", "--json"])
    d = json.loads(r.stdout)
    for b in d["backends"]:
        if b["name"] == "opencl":
            return b["available"], b["status"]
    return False, "not listed"


def covered_models(er, shared, work):
    """Done when: all-covered models run entirely on OpenCL within tolerance; 0% fallback."""
    folders = [os.path.join(shared, "models", "mnist-8")] + [
        os.path.join(shared, "conformance", "light", "test_" + n) for n in ("squeezenet", "inception_v1", "shufflenet")]
    r = run([er, "conform", "--json", "--backend", "opencl", "--no-fallback"] + folders)
    res = json.loads(r.stdout) if r.stdout.startswith("{") else {"passed": 0, "results": []}
    check(r.returncode == 0 and res["passed"] == len(folders),
          f"covered models pass on OpenCL with --no-fallback: {[x for x in res['results'] if x['status'] != 'pass']}")
    for f in folders:
        r = run([er, "inspect", os.path.join(f, "model.onnx"), "--backend", "opencl", "--json"])
        p = json.loads(r.stdout)["placement"]
        check(p["fallback_nodes"] == 0 and p["fallback_share"] == 0 and p["segments"] == 1,
              f"inspect shows 0% fallback and one segment for {os.path.basename(f)}")
        check(all(n["backend"] == "opencl" for n in p["nodes"]), f"every node of {os.path.basename(f)} on opencl")


def split_models(er, gen, real):
    """Done when: a model with uncovered ops runs correctly split, each fallback listed."""
    folders = [os.path.join(gen, n) for n in ("transformer_encoder", "detector_style", "lstm")]
    folders += [os.path.join(real, n) for n in ("ppocr_v4_det", "nudenet_320n")]
    folders = [f for f in folders if os.path.isdir(f)]
    check(len(folders) >= 3, f"generated and real models are there ({gen}, {real})")
    r = run([er, "conform", "--json", "--rtol", "1e-3", "--atol", "1e-4", "--backend", "opencl"] + folders)
    res = json.loads(r.stdout) if r.stdout.startswith("{") else {"passed": 0, "results": []}
    check(res["passed"] == len(folders), f"split models pass: {[x for x in res['results'] if x['status'] != 'pass']}")
    for f in folders:
        model = os.path.join(f, "model.onnx")
        p = json.loads(run([er, "inspect", model, "--backend", "opencl", "--json"]).stdout)["placement"]
        cpu = [n for n in p["nodes"] if n["backend"] == "cpu"]
        name = os.path.basename(f)
        check(len(cpu) == p["fallback_nodes"] > 0, f"{name}: fallbacks listed ({len(cpu)} of {len(p['nodes'])})")
        check(all(n["reason"] for n in cpu), f"{name}: every fallback has a reason")
        check(p["segments"] >= 2 and p["transfers"] >= 2, f"{name}: split into segments with transfers")
        check(abs(p["fallback_macs"] / p["total_macs"] - p["fallback_share"]) < 1e-6, f"{name}: share = MACs ratio")
        # --no-fallback names the nodes that would fall back.
        r = run([er, "run", model, "--backend", "opencl", "--no-fallback"])
        check(r.returncode != 0 and "NO_FALLBACK" in r.stderr and cpu[0]["op"] in r.stderr,
              f"{name}: --no-fallback refuses, naming {cpu[0]['op']}: {r.stderr.strip()[:200]}")


def plugin_run(er, plugin, work):
    """The sample out-of-tree backend loads from --backend-path and runs a model."""
    model = os.path.join(ROOT, "models", "digits", "model.onnx")
    sample = os.path.join(ROOT, "models", "digits", "sample.npy")
    outs = {}
    for be in ("cpu", "sample"):
        d = os.path.join(work, "out-" + be)
        r = run([er, "run", model, "--input", sample, "--out", d, "--backend", be, "--backend-path", plugin])
        check(r.returncode == 0, f"run on {be}: {r.stderr.strip()[:300]}")
        if r.returncode == 0:
            outs[be] = np.load(os.path.join(d, "logits.npy"))
        if be == "sample":
            check("falls back from sample to the CPU" in r.stderr, "run logs the fallbacks")
    if len(outs) == 2:
        check(np.max(np.abs(outs["cpu"] - outs["sample"])) < 1e-4, "the plugin's outputs match the CPU's")
    r = run([er, "inspect", model, "--backend", "sample", "--json"], env={"EDGERUN_BACKEND_PATH": plugin})
    p = json.loads(r.stdout)["placement"] if r.returncode == 0 else None
    check(p is not None and any(n["backend"] == "sample" for n in p["nodes"]),
          "EDGERUN_BACKEND_PATH loads the plugin; some nodes run on it")
    # A plugin folder: every .so in it; a bad one stops the command, named.
    folder = os.path.join(work, "plugins")
    os.makedirs(folder, exist_ok=True)
    import shutil
    shutil.copy(plugin, os.path.join(folder, "sample-backend.so"))
    r = run([er, "devices", "--backend-path", folder, "--require", "sample"])
    check(r.returncode == 0, f"a plugin folder loads: {r.stderr.strip()[:200]}")
    r = run([er, "devices", "--backend-path", os.path.dirname(plugin)])
    check(r.returncode != 0 and "not-a-plugin.so" in r.stderr, f"a bad plugin in a folder is named: {r.stderr.strip()[:200]}")
    r = run([er, "devices", "--backend-path", plugin, "--json", "--require", "sample"])
    d = json.loads(r.stdout) if r.returncode == 0 else {"backends": []}
    check(any(b["name"] == "sample" and b["plugin"] and b["devices"] for b in d["backends"]),
          "devices lists the plugin and its device")


def devices(er, work, opencl_ok):
    r = run([er, "devices", "--json"])
    d = json.loads(r.stdout)
    check(r.returncode == 0 and d["cpu"]["cores_online"] >= 1 and d["memory"]["total_bytes"] > 0, "devices --json")
    # The ISA features the kernels are chosen by agree with the Linux
    # kernel's view in /proc/cpuinfo (x86).
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        flags = None
    if flags is not None and d["cpu"]["arch"] == "x86_64":
        for flag, name in (("avx2", "AVX2"), ("avx512f", "AVX-512F"), ("avx512vbmi", "AVX-512-VBMI"),
                           ("avx512_vnni", "AVX-512-VNNI")):
            check((flag in flags) == (name in d["cpu"]["features"]),
                  f"devices lists {name} exactly when /proc/cpuinfo has {flag}")
    names = [b["name"] for b in d["backends"]]
    check(names[:3] == ["cpu", "opencl", "cuda"], f"built-in backends listed: {names}")
    cuda = next(b for b in d["backends"] if b["name"] == "cuda")
    check(cuda["available"] or cuda["status"], "cuda is usable or says why not")
    r = run([er, "devices", "--require", "cpu"])
    check(r.returncode == 0, "--require cpu succeeds")
    r = run([er, "devices", "--require", "nosuch"])
    check(r.returncode == 1 and "'nosuch' is not known" in r.stderr, "--require of an unknown backend fails")
    if not cuda["available"]:
        r = run([er, "devices", "--require", "cuda"])
        check(r.returncode == 1 and cuda["status"] in r.stderr, "--require cuda fails with the reason")
    r = run([er, "devices", "--require", "opencl"])
    check((r.returncode == 0) == opencl_ok, "--require opencl matches availability")
    # Thermal zones from a fake sysfs tree, and the HTML report.
    root = os.path.join(work, "thermal")
    for i, (t, m) in enumerate((("x86_pkg_temp", 47500), ("soc-thermal", 91000))):
        os.makedirs(os.path.join(root, f"thermal_zone{i}"), exist_ok=True)
        open(os.path.join(root, f"thermal_zone{i}", "type"), "w").write(t + "\n")
        open(os.path.join(root, f"thermal_zone{i}", "temp"), "w").write(f"{m}\n")
    env = {"EDGERUN_THERMAL_ROOT": root}
    d = json.loads(run([er, "devices", "--json"], env).stdout)
    check([(z["type"], z["celsius"]) for z in d["thermal_zones"]] == [("x86_pkg_temp", 47.5), ("soc-thermal", 91.0)],
          f"thermal zones read: {d['thermal_zones']}")
    html = os.path.join(work, "devices.html")
    r = run([er, "devices", "--html", html], env)
    text = open(html).read() if r.returncode == 0 and os.path.exists(html) else ""
    check("<h2>Backends</h2>" in text and "91.0 &deg;C (hot" in text and "</html>" in text,
          "--html writes a report with backends and temperatures")


def bench(er):
    shared = find_shared()
    model = os.path.join(shared, "models", "mnist-8", "model.onnx")
    r = run([er, "bench", model, "--backend", "opencl", "--compare", "cpu", "--iterations", "3", "--warmup", "1",
             "--json"])
    check(r.returncode == 0, f"bench --compare: {r.stderr.strip()[:200]}")
    if r.returncode == 0:
        d = json.loads(r.stdout)
        check(d["backend"] == "opencl" and d["compare"] == "cpu", "bench measures both")
        check(d["p50_ms"] > 0 and d["compare_p50_ms"] > 0 and d["ratio"] > 0, "bench reports latency and the ratio")
        check(d["max_abs_diff"] is not None and d["max_abs_diff"] < 1e-4, "bench: the backends agree")


def bench_symbolic_dims(er, real):
    """A detector with a symbolic image size run without --dim: the failure
    names the dims left at 1 and how to set them; with --dim it runs."""
    model = os.path.join(real, "nudenet_320n", "model.onnx")
    if not os.path.exists(model):
        print("SKIP bench --dim check: nudenet_320n not in the real models")
        return
    r = run([er, "bench", model, "--iterations", "1", "--warmup", "0"])
    check(r.returncode != 0 and "symbolic dims batch, height, width were set to 1" in r.stderr
          and "--dim NAME=V" in r.stderr, f"bench names the defaulted dims: {r.stderr.strip()[-300:]}")
    r = run([er, "bench", model, "--iterations", "1", "--warmup", "0", "--dim", "height=64", "--dim", "width=96"])
    check(r.returncode == 0 and "were set to 1" not in r.stderr, f"bench --dim: {r.stderr.strip()[-200:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgerun", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--generated", required=True)
    ap.add_argument("--real", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ok, why = opencl_usable(a.edgerun)
    shared = find_shared()
    if not ok:
        print(f"SKIP OpenCL checks: the OpenCL backend is not usable here ({why}); "
              "scripts/setup.sh installs PoCL (pocl-opencl-icd)")
    elif not shared:
        print("SKIP covered-model checks: ../shared not found (set EDGERUN_SHARED)")
    else:
        covered_models(a.edgerun, shared, a.work)
        split_models(a.edgerun, a.generated, a.real)
        bench(a.edgerun)
    plugin_run(a.edgerun, a.plugin, a.work)
    devices(a.edgerun, a.work, ok)
    bench_symbolic_dims(a.edgerun, a.real)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
