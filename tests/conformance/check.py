#!/usr/bin/env python3
"""Conformance gate: runs `edgerun conform --json` over every suite and checks
the results against the committed list of folders that must pass.

    check.py --edgerun build/edgerun [--update] [--suite NAME ...]

Suites (folders under ../shared and in the repo):
  node, light, pytorch-converted, pytorch-operator, simple  (../shared/conformance)
  models        ../shared/models/* (every test set, official and onnxruntime's)
  digits        models/digits (the bundled example)
  generated     models written by tests/models/gen_models.py (rtol 1e-3, atol 1e-4)
  real          real models from packages, tests/models/real_models.py (same tolerance)

The run fails when a folder listed in tests/conformance/passing.txt does not
pass, when edgerun crashes or hangs, or when a result has no message saying
why it did not pass. --update adds newly passing folders to the list (the
list only grows; a folder is never removed by this script).

It also prints the issue's node-suite figures: folders passed, and the share
of folders onnxruntime 1.30 passes (../shared/conformance/node-ort-1.30.tsv)
among those using only the ops edgerun is required to implement.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
def find_shared():
    """../shared beside the checkout; EDGERUN_SHARED overrides it, and a
    clone made elsewhere (CI clones into a scratch folder) falls back to the
    workplace's /work/shared."""
    for cand in (os.environ.get("EDGERUN_SHARED"), os.path.join(os.path.dirname(ROOT), "shared"),
                 "/work/shared"):
        if cand and os.path.isdir(os.path.join(cand, "conformance")):
            return cand
    return os.path.join(os.path.dirname(ROOT), "shared")


SHARED = find_shared()
PASSING = os.path.join(HERE, "passing.txt")
REQUIRED_OPS = os.path.join(HERE, "required-ops.txt")

SUITES = {
    "node": (os.path.join(SHARED, "conformance", "node"), None),
    "light": (os.path.join(SHARED, "conformance", "light"), None),
    "pytorch-converted": (os.path.join(SHARED, "conformance", "pytorch-converted"), None),
    "pytorch-operator": (os.path.join(SHARED, "conformance", "pytorch-operator"), None),
    "simple": (os.path.join(SHARED, "conformance", "simple"), None),
    # Whole real models accumulate float32 sums over thousands of terms in
    # an order that differs between runtimes; onnxruntime's own optimized and
    # unoptimized runs of mnist-8 differ by 6e-7 (test_data_set_ort's
    # ort_meta.json). atol 1e-6 admits that and nothing more: the 10 of
    # 451,584 super-resolution outputs that miss 1e-7 are within 2.3e-7.
    "models": (os.path.join(SHARED, "models"), ("1e-3", "1e-6")),
    "digits": (os.path.join(ROOT, "models", "digits"), None),
    # Generated models compare against onnxruntime, which accumulates in a
    # different order: the stated tolerance for real models.
    "generated": (None, ("1e-3", "1e-4")),
    # Real models from Python packages (tests/models/real_models.py): the
    # issue's tolerance for real models against onnxruntime.
    "real": (None, ("1e-3", "1e-4")),
}

# The light CNNs (ResNet-50, VGG-19, ...) take most of the time; CI runs
# them too, but a quick local run may skip them with --suite.
TIMEOUT_S = 1800


def run_suite(edgerun, name, path, tol):
    cmd = [edgerun, "conform", "--json"]
    if tol:
        cmd += ["--rtol", tol[0], "--atol", tol[1]]
    cmd.append(path)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if proc.returncode not in (0, 1):
        sys.exit("%s: edgerun conform exited with %d (crash?)\n%s" % (name, proc.returncode, proc.stderr[-4000:]))
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.exit("%s: edgerun conform printed no JSON\n%s" % (name, proc.stderr[-4000:]))
    return data


def load_list(path):
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def node_report(results):
    """The issue's node-suite figures."""
    tsv = os.path.join(SHARED, "conformance", "node-ort-1.30.tsv")
    ops_tsv = os.path.join(HERE, "node-ops.tsv")
    if not (os.path.exists(tsv) and os.path.exists(ops_tsv) and os.path.exists(REQUIRED_OPS)):
        return
    ort = {}
    with open(tsv) as f:
        next(f)
        for line in f:
            p = line.rstrip("\n").split("\t")
            ort[p[0]] = p[1]
    ops = {}
    with open(ops_tsv) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            ops[p[0]] = set(p[1].split(",")) if p[1] else set()
    required = set(open(REQUIRED_OPS).read().split())
    status = {r["name"]: r["status"] for r in results}
    target = [t for t in ops if ops[t] and ops[t] <= required and ort.get(t) == "pass"]
    ok = [t for t in target if status.get(t) == "pass"]
    passed = sum(1 for s in status.values() if s == "pass")
    print("node: %d of %d folders pass; %d of %d (%.1f%%) of the folders onnxruntime passes "
          "that use only the required ops" % (passed, len(status), len(ok), len(target),
                                               100.0 * len(ok) / max(1, len(target))))
    missing = sorted(set(target) - set(ok))
    if missing:
        print("  not yet passing among those: " + ", ".join(missing[:60]) + (" ..." if len(missing) > 60 else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edgerun", default=os.path.join(ROOT, "build", "edgerun"))
    ap.add_argument("--generated", default=os.path.join(ROOT, "build", "test-models"),
                    help="folder of generated models (tests/models/gen_models.py --out)")
    ap.add_argument("--real", default=os.path.join(ROOT, "build", "real-models"),
                    help="folder of real models (tests/models/real_models.py --out)")
    ap.add_argument("--suite", action="append", help="run only these suites")
    ap.add_argument("--update", action="store_true", help="add newly passing folders to passing.txt")
    args = ap.parse_args()

    must_pass = load_list(PASSING)
    suites = args.suite or list(SUITES)
    failures, new_passes, unexplained = [], [], []
    for name in suites:
        path, tol = SUITES[name]
        if name == "generated":
            path = args.generated
        if name == "real":
            path = args.real
        if not os.path.isdir(path):
            if any(e.startswith(name + "/") for e in must_pass):
                failures.append("%s: folder %s is missing" % (name, path))
            continue
        data = run_suite(args.edgerun, name, path, tol)
        print("%-18s %4d passed, %4d failed, %4d errors, %4d unsupported" %
              (name, data["passed"], data["failed"], data["errors"], data["unsupported"]))
        seen = set()
        for r in data["results"]:
            key = "%s/%s" % (name, r["name"])
            seen.add(key)
            if r["status"] == "pass":
                if key not in must_pass:
                    new_passes.append(key)
            else:
                if not r["message"]:
                    unexplained.append(key)
                if key in must_pass:
                    failures.append("%s: %s: %s" % (key, r["status"], r["message"]))
        for key in sorted(must_pass):
            if key.startswith(name + "/") and key not in seen:
                failures.append("%s: listed but not found" % key)
        if name == "node":
            node_report(data["results"])

    if new_passes:
        print("%d folders pass that passing.txt does not list%s" %
              (len(new_passes), " (added)" if args.update else " (run with --update to add them)"))
        if args.update:
            with open(PASSING, "w") as f:
                f.write("# Folders that must keep passing (tests/conformance/check.py). Only grows.\n")
                for key in sorted(must_pass | set(new_passes)):
                    f.write(key + "\n")
    for u in unexplained:
        print("no reason given for %s" % u)
    for f in failures:
        print("REGRESSION " + f)
    if failures or unexplained:
        sys.exit(1)
    print("conformance: ok (%d listed folders pass)" % len(must_pass))


if __name__ == "__main__":
    main()
