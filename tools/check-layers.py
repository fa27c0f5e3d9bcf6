#!/usr/bin/env python3
"""check-layers.py - the layer rule of docs/architecture.md, checked.

Every quoted #include in src/ and include/ is resolved to the folder (the
"unit") that holds the header, and must point down the stack:

  * a unit includes only its own headers, public headers (include/), and
    units of a lower layer;
  * units of one layer are siblings and never include each other;
  * a backend implementation (backends/cpu, backends/cuda, backends/opencl)
    is private: no other unit includes it, not even the runtime - the
    runtime reaches every backend through the backend table (backends/);
    backends/gpu is shared by the two GPU backends only;
  * public headers include only public headers;
  * an include that names no file in the tree is an error too (a typo
    would otherwise hide an arrow);
  * the folder graph has no cycle (implied by the above; reported
    separately so a changed table cannot hide one).

Usage: tools/check-layers.py [--root DIR] [--graph] [--self-test]
Exit status 0 when the tree obeys, 1 with one line per violation.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The stack, bottom first. Units on one line are siblings.
LAYERS = [
    ["core"],
    ["ir"],
    ["onnx", "gguf"],
    ["ops"],
    ["graph"],
    ["kernels"],
    ["backends"],
    ["backends/gpu"],
    ["backends/cpu", "backends/cuda", "backends/opencl"],
    ["runtime"],
    ["llm"],
    ["quant"],
    ["serve"],
    ["cli"],
]
RANK = {u: i for i, row in enumerate(LAYERS) for u in row}
# Units only the listed units may include.
PRIVATE = {
    "backends/cpu": set(),
    "backends/cuda": set(),
    "backends/opencl": set(),
    "backends/gpu": {"backends/cuda", "backends/opencl"},
}
PUBLIC = "include"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def unit_of(rel):
    """The unit of a path relative to src/ (or PUBLIC for include/)."""
    parts = rel.split("/")
    if parts[0] == "backends" and len(parts) > 2:
        return "backends/" + parts[1]
    return parts[0]


def scan(root):
    """Yields (file, line number, included text, unit of the file, unit of
    the target or None when unresolved, target path)."""
    src = os.path.join(root, "src")
    inc = os.path.join(root, PUBLIC)
    for base, kind in ((src, "src"), (inc, PUBLIC)):
        for d, _, files in os.walk(base):
            for f in sorted(files):
                if not f.endswith((".c", ".h", ".inc", ".cu")):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, base)
                unit = PUBLIC if kind == PUBLIC else unit_of(rel)
                with open(path, errors="replace") as fh:
                    for no, line in enumerate(fh, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        name = m.group(1)
                        # The compiler's order for quoted includes here: the
                        # including file's folder, then src/ and include/.
                        target = None
                        for cand_base in (d, src, inc):
                            cand = os.path.normpath(os.path.join(cand_base, name))
                            if os.path.isfile(cand):
                                target = cand
                                break
                        tunit = None
                        if target:
                            if target.startswith(inc + os.sep):
                                tunit = PUBLIC
                            elif target.startswith(src + os.sep):
                                tunit = unit_of(os.path.relpath(target, src))
                            else:
                                tunit = "outside"
                        yield (os.path.relpath(path, root), no, name, unit, tunit)


def check(root):
    errors = []
    edges = {}
    for path, no, name, unit, tunit in scan(root):
        where = f"{path}:{no}: #include \"{name}\""
        if tunit is None:
            errors.append(f"{where}: no such header in src/ or include/")
            continue
        if tunit == unit:
            continue
        if unit == PUBLIC:
            errors.append(f"{where}: a public header may include only public headers")
            continue
        if tunit == PUBLIC:
            continue
        if tunit == "outside" or unit not in RANK or tunit not in RANK:
            errors.append(f"{where}: {unit} -> {tunit}: a folder missing from the layer table "
                          "(tools/check-layers.py LAYERS, docs/architecture.md)")
            continue
        edges.setdefault(unit, set()).add(tunit)
        if tunit in PRIVATE and unit not in PRIVATE[tunit]:
            who = ", ".join(sorted(PRIVATE[tunit])) or "nobody else"
            errors.append(f"{where}: {tunit} is private to its backend (may be included by {who}); "
                          "go through the backend table (backends/backend.h)")
        elif RANK[tunit] == RANK[unit]:
            errors.append(f"{where}: {unit} and {tunit} are siblings (layer {RANK[unit]}) "
                          "and may not include each other")
        elif RANK[tunit] > RANK[unit]:
            errors.append(f"{where}: {unit} (layer {RANK[unit]}) may not include {tunit} "
                          f"(layer {RANK[tunit]}, above it)")
    # Cycles between folders (Tarjan's strongly connected components).
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    for comp in sccs:
        errors.append("cycle between folders: " + " <-> ".join(comp))
    return errors, edges


def self_test(root):
    """Copies the tree, breaks the rule four ways, and checks that each is
    caught with its own message (and that the untouched copy passes)."""
    cases = [
        ("src/ops/op-util.c", '#include "runtime/exec.h"\n', "ops (layer 3) may not include runtime"),
        ("src/runtime/session.c", '#include "backends/cpu/cpu-backend.h"\n', "no such header"),
        ("src/onnx/pb.c", '#include "gguf/gguf.h"\n', "siblings"),
        ("include/edgerun.h", '#include "core/core.h"\n', "public header may include only public"),
    ]
    private_case = ("src/runtime/session.c", "backends/cpu/cpu-private.h", "private to its backend")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for top in ("src", PUBLIC):
            shutil.copytree(os.path.join(root, top), os.path.join(tmp, top))
        errs, _ = check(tmp)
        if errs:
            print("self-test: the untouched copy fails:\n  " + "\n  ".join(errs))
            return 1
        for path, line, want in cases + [private_case]:
            p = os.path.join(tmp, path)
            with open(p) as fh:
                orig = fh.read()
            extra = None
            if want.startswith("private"):
                extra = os.path.join(tmp, "src", line)
                with open(extra, "w") as fh:
                    fh.write("/* a header of the CPU backend */\n")
                line = f'#include "{line}"\n'
            with open(p, "w") as fh:
                fh.write(line + orig)
            errs, _ = check(tmp)
            hit = [e for e in errs if want in e]
            if not hit:
                print(f"self-test: adding {line.strip()} to {path} was not caught as '{want}' "
                      f"(got: {errs})")
                failures += 1
            else:
                print(f"self-test: caught: {hit[0]}")
            with open(p, "w") as fh:
                fh.write(orig)
            if extra:
                os.remove(extra)
        # A cycle: with the table's order reversed for two layers, the
        # rank rule would pass one direction; the cycle check must still
        # see both arrows.
        global RANK
        saved = RANK
        RANK = {u: 0 for u in saved}
        for path, line in (("src/ops/op-util.c", '#include "graph/planner.h"\n'),):
            p = os.path.join(tmp, path)
            with open(p) as fh:
                orig = fh.read()
            with open(p, "w") as fh:
                fh.write(line + orig)
        errs, _ = check(tmp)
        RANK = saved
        if not any(e.startswith("cycle between folders") and "graph" in e and "ops" in e for e in errs):
            print(f"self-test: the ops <-> graph cycle was not reported (got: {errs[:3]})")
            failures += 1
        else:
            print("self-test: caught: " + next(e for e in errs if e.startswith("cycle")))
    print("self-test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--graph", action="store_true", help="print the folder arrows")
    ap.add_argument("--self-test", action="store_true",
                    help="show that forbidden includes are caught, on a copy of the tree")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    if a.self_test:
        return self_test(root)
    errors, edges = check(root)
    if a.graph:
        for u in sorted(edges, key=lambda u: (RANK.get(u, 99), u)):
            print(f"{u:16} -> " + ", ".join(sorted(edges[u], key=lambda t: (RANK.get(t, 99), t))))
    for e in errors:
        print(e)
    if errors:
        print(f"check-layers: {len(errors)} violation(s) of the layers in docs/architecture.md")
        return 1
    print(f"check-layers: {sum(len(v) for v in edges.values())} folder arrows, all down the stack")
    return 0


if __name__ == "__main__":
    sys.exit(main())
