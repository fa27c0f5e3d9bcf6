"""Times onnxruntime's MatMul (MLAS SGEMM) on the shapes bench-sgemm takes,
with B a constant initializer (prepacked by ORT), for a side-by-side
GFLOP/s figure. Median of repeated runs; not a test.

    python ort_matmul.py [--threads T] M K N [M K N ...]
"""
import argparse
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("dims", type=int, nargs="+")
    args = ap.parse_args()
    print(f"onnxruntime {ort.__version__}, {args.threads} threads")
    for i in range(0, len(args.dims) - 2, 3):
        m, k, n = args.dims[i:i + 3]
        b = (np.arange(k * n) % 5 - 2).astype(np.float32).reshape(k, n)
        g = helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["c"])], "g",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [m, n])],
            [onnx.numpy_helper.from_array(b, "b")])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        a = (np.arange(m * k) % 7 - 3).astype(np.float32).reshape(m, k)
        feed = {"a": a}
        s.run(None, feed)
        t0 = time.perf_counter()
        s.run(None, feed)
        one = time.perf_counter() - t0
        reps = int(0.02 / one) + 1
        ts = []
        for _ in range(41):
            t0 = time.perf_counter()
            for _ in range(reps):
                s.run(None, feed)
            ts.append((time.perf_counter() - t0) / reps)
        med = sorted(ts)[20]
        print(f"M {m:5d} K {k:5d} N {n:5d}: {med * 1e6:8.1f} us  {2 * m * n * k / med * 1e-9:6.1f} GFLOP/s (median of 41)")


if __name__ == "__main__":
    main()
