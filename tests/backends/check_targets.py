#!/usr/bin/env python3
"""inspect --target: the shipped NPU profiles flag what their source
documents say on real models (../shared), and every rule kind of the
profile format works on small generated models.

Usage: check_targets.py --edgerun build/edgerun --profiles profiles --work DIR
Last line: "N passed, N failed"."""
import argparse
import collections
import json
import os
import subprocess
import sys

import onnx
from onnx import TensorProto, helper, numpy_helper
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


def find_shared():
    for cand in (os.environ.get("EDGERUN_SHARED"), os.path.join(os.path.dirname(ROOT), "shared"), "/work/shared"):
        if cand and os.path.isdir(os.path.join(cand, "conformance", "light")):
            return cand
    return None


def inspect(edgerun, model, profiles, quantized=True, expect_rc=0):
    cmd = [edgerun, "inspect", model, "--json"]
    for p in profiles:
        cmd += ["--target", p]
    if quantized:
        cmd.append("--assume-quantized")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != expect_rc:
        return None, r.stderr
    return (json.loads(r.stdout) if expect_rc == 0 else None), r.stderr


def findings(report):
    """(op, rule) -> count over the first target."""
    c = collections.Counter()
    for v in report["targets"][0]["violations"]:
        c[(v["op"], v["rule"])] += 1
    return c


def real_models(args):
    shared = find_shared()
    if not shared:
        print("SKIP real models: ../shared not found (set EDGERUN_SHARED)")
        return
    light = os.path.join(shared, "conformance", "light")
    prof = lambda n: os.path.join(args.profiles, n + ".json")
    model = lambda n: os.path.join(light, "test_" + n, "model.onnx")
    # Each expectation quotes the profile's source document.
    expect = [
        # RKNN-Toolkit2 1.4.0: "Sum | Not Supported"; AveragePool "count_include_pad: 1";
        # Reshape "channel: [1, 8192]".
        ("rockchip-rknpu2", "resnet50", {("Sum", "op"): 16, ("AveragePool", "count_include_pad"): 1}),
        ("rockchip-rknpu2", "inception_v1", {("AveragePool", "count_include_pad"): 1}),
        ("rockchip-rknpu2", "densenet121", {("AveragePool", "count_include_pad"): 3}),
        ("rockchip-rknpu2", "bvlc_alexnet", {("Reshape", "dims.channel"): 1}),
        # Vela 3.6.1: LRN and ConstantOfShape are not NPU operators; tensors at most 4-D
        # (each channel shuffle reshapes to 5-D and back: two Reshapes touch a 5-D tensor).
        ("arm-ethos-u", "inception_v1", {("LRN", "op"): 2}),
        # (AlexNet builds its weights with ConstantOfShape; all of them fold at
        # load now, so no ConstantOfShape node is left for the NPU to reject.)
        ("arm-ethos-u", "bvlc_alexnet", {("LRN", "op"): 2, ("ConstantOfShape", "op"): 0}),
        ("arm-ethos-u", "shufflenet", {("Reshape", "rank"): 32, ("Transpose", "op"): 16}),
        # Kneron KL720 column: LRN N, Dropout N, Softmax N (note 39), Sum N; AveragePool note 3.
        ("kneron-kl720", "inception_v1", {("LRN", "op"): 2, ("Dropout", "op"): 1, ("Softmax", "op"): 1,
                                          ("AveragePool", "conditions"): 1}),
        ("kneron-kl720", "resnet50", {("Sum", "op"): 16, ("Softmax", "op"): 1}),
        ("kneron-kl720", "squeezenet", {("Dropout", "op"): 1, ("Softmax", "op"): 1}),
    ]
    flagged = collections.Counter()
    for pname, mname, want in expect:
        rep, err = inspect(args.edgerun, model(mname), [prof(pname)])
        check(rep is not None, f"{pname} on {mname}: inspect failed: {err}")
        if rep is None:
            continue
        got = findings(rep)
        for key, n in want.items():
            check(got.get(key, 0) == n, f"{pname} on {mname}: {key} flagged {got.get(key, 0)} times, want {n}")
        t = rep["targets"][0]
        check(t["source"].startswith(json.load(open(prof(pname)))["source"]["title"]),
              f"{pname}: the report cites the source document")
        if t["nodes_blocked"] > 0:
            flagged[pname] += 1
    for pname in ("rockchip-rknpu2", "arm-ethos-u", "kneron-kl720"):
        check(flagged[pname] >= 3, f"{pname} flags at least three real models (got {flagged[pname]})")
    # Without --assume-quantized, a float model breaks Ethos-U's type rule at every node.
    rep, _ = inspect(args.edgerun, model("squeezenet"), [prof("arm-ethos-u")], quantized=False)
    if rep:
        t = rep["targets"][0]
        check(t["nodes_blocked"] == t["nodes"], "a float model is blocked everywhere on an int8 NPU")
        check(any(v["rule"] == "dtype" and "quantize" in v["detail"] for v in t["violations"]),
              "the type finding says to quantize")


def save(model, path):
    onnx.save(model, path)
    return path


def synthetic(args):
    os.makedirs(args.work, exist_ok=True)
    w = numpy_helper.from_array(np.ones((8, 3, 5, 5), np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", strides=[2, 2], pads=[2, 2, 2, 2]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("AveragePool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("LRN", ["p"], ["y"], name="lrn", size=3),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 30])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    mpath = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), os.path.join(args.work, "m.onnx"))
    prof = {
        "schema": "edgerun-target-profile/1", "name": "test", "title": "test NPU",
        "source": {"title": "test document", "url": "https://example.invalid/doc"},
        "activation_dtypes": ["int8"], "max_rank": 4, "dynamic_shapes": False,
        "dims": {"*": {"width": [1, 31]}, "int8": {"channel": [1, 4]}},
        "alignment": [{"axis": "channel", "multiple": 16, "ops": ["Relu"], "note": "16-channel tiles"}],
        "ops": {
            "Conv": {"rules": [{"what": "strides", "max": 1},
                               {"what": "kernel_area", "max": 9},
                               {"what": "attr:auto_pad", "in": ["NOTSET"], "default": "NOTSET"}]},
            "Relu": {},
            "AveragePool": {"rules": [{"any_of": [[{"what": "kernel_h", "eq": 3}],
                                                   [{"what": "square_kernel", "eq": False}]],
                                       "note": "footnote"}]},
        },
    }
    ppath = os.path.join(args.work, "p.json")
    json.dump(prof, open(ppath, "w"))
    rep, err = inspect(args.edgerun, mpath, [ppath])
    check(rep is not None, f"synthetic profile: {err}")
    if rep is None:
        return
    got = findings(rep)
    check(got[("Conv", "strides")] == 1, "strides max 1 flags stride 2")
    check(got[("Conv", "kernel_area")] == 1, "kernel_area 25 > 9")
    check(got[("Conv", "auto_pad")] == 0, "an absent auto_pad uses its default NOTSET")
    check(got[("Conv", "dynamic")] == 1, "dynamic batch flagged")
    check(got[("Conv", "dims.channel")] == 1, "conv output channels 8 > 4 (int8 limit)")
    check(got[("Relu", "alignment")] == 1, "8 channels are not a multiple of 16")
    check(got[("AveragePool", "conditions")] == 1, "any_of: no alternative holds")
    check(got[("LRN", "op")] == 1, "LRN is not in the profile")
    adv = [v for v in rep["targets"][0]["violations"] if v["rule"] == "alignment"]
    check(adv and adv[0]["advisory"], "alignment findings are advisory")
    check(not any(v["rule"] == "dims.width" for v in rep["targets"][0]["violations"] if v["op"] == "Relu"),
          "width 15 fits [1, 31]")
    check(any(v["rule"] == "dims.width" and v["op"] == "Conv" for v in rep["targets"][0]["violations"]) is False,
          "input width 30 is within the limit")
    # Malformed profiles are errors naming the field.
    for mutate, needle in [
        (lambda p: p["ops"]["Conv"]["rules"].append({"what": "stridez", "max": 1}), "\"what\""),
        (lambda p: p.pop("source"), "source"),
        (lambda p: p.update(schema="x"), "schema"),
        (lambda p: p["ops"]["Conv"]["rules"].append({"what": "strides", "max": 1, "when": "sometimes"}), "when"),
        (lambda p: p.update(dims={"*": {"depth": [1, 2]}}), "axis names"),
    ]:
        bad = json.loads(json.dumps(prof))
        mutate(bad)
        bpath = os.path.join(args.work, "bad.json")
        json.dump(bad, open(bpath, "w"))
        _, err = inspect(args.edgerun, mpath, [bpath], expect_rc=1)
        check(needle in err, f"a bad profile names the field ({needle}): {err.strip()}")
    # QDQ: a DequantizeLinear output counts as its int8 input.
    xq = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    z = numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xf"], name="dq"),
             helper.make_node("Relu", ["xf"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("xq", TensorProto.INT8, [1, 16, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [xq, z])
    qpath = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), os.path.join(args.work, "q.onnx"))
    prof2 = dict(prof, ops={"Relu": {"dtypes": ["int8", "float32"]}, "DequantizeLinear": {"dtypes": ["int8", "float32"]}},
                 dims={}, alignment=[])
    json.dump(prof2, open(ppath, "w"))
    rep, err = inspect(args.edgerun, qpath, [ppath], quantized=False)
    if rep:
        got = findings(rep)
        check(got[("Relu", "dtype")] == 0, "Relu after DequantizeLinear counts as int8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgerun", required=True)
    ap.add_argument("--profiles", default=os.path.join(ROOT, "profiles"))
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    real_models(args)
    synthetic(args)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
