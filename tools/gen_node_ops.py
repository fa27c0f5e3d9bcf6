#!/usr/bin/env python3
"""Writes tests/conformance/node-ops.tsv: for each ONNX node test folder in
../shared/conformance/node, the operator types its model uses. The
conformance gate uses it to compute the share of onnxruntime-passing folders
that use only required ops. Regenerate with:

    .venv/bin/python tools/gen_node_ops.py > tests/conformance/node-ops.tsv
"""
import os

import onnx

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "conformance", "node")

for name in sorted(os.listdir(ROOT)):
    m = onnx.load(os.path.join(ROOT, name, "model.onnx"), load_external_data=False)
    ops = sorted({n.op_type for n in m.graph.node})
    print("%s\t%s" % (name, ",".join(ops)))
