"""Runs onnx.checker over models edgerun's writer produced (test-onnx-write
--save DIR) and compares each with the original it was rewritten from: a
model the checker accepted before must be accepted after, with the same
inputs, outputs, node count and initializer names.

usage: check_written.py WRITTEN_DIR ORIGINAL_ROOT...
"""
import os
import sys

import onnx


def originals(roots):
    found = {}
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            if "model.onnx" in files:
                found[os.path.basename(dirpath)] = os.path.join(dirpath, "model.onnx")
    return found


def io_names(g):
    return [i.name for i in g.input], [o.name for o in g.output]


def main():
    written_dir, roots = sys.argv[1], sys.argv[2:]
    orig = originals(roots)
    checked = failed = 0
    for name in sorted(os.listdir(written_dir)):
        if not name.endswith(".onnx"):
            continue
        key = name[:-5]
        if key not in orig:
            continue
        a = onnx.load(orig[key])
        try:
            onnx.checker.check_model(a)
        except Exception:
            continue  # the original is not valid ONNX to begin with
        b = onnx.load(os.path.join(written_dir, name))
        problems = []
        try:
            onnx.checker.check_model(b)
        except Exception as e:  # noqa: BLE001 - report whatever the checker says
            problems.append(f"checker: {str(e).splitlines()[0]}")
        if io_names(a.graph) != io_names(b.graph):
            problems.append("inputs/outputs differ")
        if len(a.graph.node) != len(b.graph.node):
            problems.append(f"{len(a.graph.node)} nodes became {len(b.graph.node)}")
        used = {i for n in a.graph.node for i in n.input} | {o.name for o in a.graph.output}
        used |= {i.name for i in a.graph.input}
        want = sorted(t.name for t in a.graph.initializer if t.name in used)
        got = sorted(t.name for t in b.graph.initializer)
        if want != got:
            problems.append("initializers differ")
        checked += 1
        if problems:
            failed += 1
            print(f"FAIL {key}: {'; '.join(problems)}")
    print(f"{checked} checked, {failed} failed")
    return 1 if failed or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
