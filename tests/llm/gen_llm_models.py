#!/usr/bin/env python3
"""Writes the LLM engine's test models: small Qwen2- and Llama-architecture
decoders with seeded random weights, as GGUF files, with real tokenizers
(the Qwen2 and Llama-2 vocabularies that llama.cpp ships as test data, from
the llama-cpp-python source distribution the setup script unpacks into
.cache/llama.cpp). Nothing here is trained: the models exist to compare
edgerun's arithmetic with llama.cpp's on the same file.

    gen_llm_models.py --out DIR [--edgerun build/edgerun]
                                         the small test models (the k-quant
                                         mixes written by edgerun quantize)
    gen_llm_models.py --out DIR --big    also Qwen2-0.5B's real shapes
                                         (24 layers, width 896, 14/2 heads,
                                         FFN 4864, vocabulary 151,936), for speed

Weights are drawn from numpy's PCG64 with fixed seeds and quantized by the
gguf package (both pinned in scripts/requirements*.txt), so a file is the
same bytes on every machine: tests compare its SHA-256 with the one their
llama.cpp references were made from.

The folder is shared by the release and sanitizer builds (.cache/llm-models
by default): a file that exists is kept, unless this script or the pinned
packages changed since the folder was written (its .generator stamp), which
starts the folder over.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCABS = os.path.join(ROOT, ".cache", "llama.cpp", "models")
Q = gguf.GGMLQuantizationType

# name: architecture, vocabulary file, shapes
SPECS = {
    # Widths and FFN sizes are whole 256-blocks, so the k-quant mixes
    # (derived with edgerun quantize) really hold Q4_K/Q5_K/Q6_K tensors.
    "qwen2-tiny": dict(arch="qwen2", vocab="ggml-vocab-qwen2.gguf", layers=2, embd=256, heads=4, kv_heads=2,
                       ff=768, ctx=4096, rope_base=1000000.0, eps=1e-6, tied=True, bias=True, seed=1,
                       embd_scale=0.05, out_scale=6.0),
    "llama-tiny": dict(arch="llama", vocab="ggml-vocab-llama-spm.gguf", layers=2, embd=256, heads=4, kv_heads=4,
                       ff=512, ctx=2048, rope_base=10000.0, eps=1e-5, tied=False, bias=False, seed=2),
    # Layer 1's gate and up rows are 100x larger and its down rows 10^4x
    # smaller: the same kind of function, but its SwiGLU product (gate x up)
    # reaches ~1e5 and overflows fp16 while every other activation stays in
    # range (fp16 tests: analyze, eval --fp16, quantize --fp16-safe). The
    # down rows are so small that fp16 storage would flush them: they stay
    # float32 in the file (f32_tensors).
    "qwen2-swiglu": dict(arch="qwen2", vocab="ggml-vocab-qwen2.gguf", layers=2, embd=256, heads=4, kv_heads=2,
                         ff=768, ctx=4096, rope_base=1000000.0, eps=1e-6, tied=True, bias=True, seed=4,
                         embd_scale=0.05, out_scale=6.0, ffn_boost={1: 100.0}, f32_tensors=("ffn_down",)),
    "qwen2-0.5b-shape": dict(arch="qwen2", vocab="ggml-vocab-qwen2.gguf", layers=24, embd=896, heads=14,
                             kv_heads=2, ff=4864, ctx=32768, rope_base=1000000.0, eps=1e-6, tied=True, bias=True,
                             seed=3),
}
TYPES = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1,
         "q5_0": Q.Q5_0, "q5_1": Q.Q5_1}
# Written by this script (gguf-py quantizes these types) ...
WRITTEN = {"qwen2-tiny": ["f16", "q8_0", "q4_0", "q4_1"],
           "llama-tiny": ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"],
           "qwen2-swiglu": ["f16"],
           "qwen2-0.5b-shape": ["f16", "q8_0", "q4_0"]}
# ... and derived from one of them by `edgerun quantize` (gguf-py has no
# k-quant quantizer): name -> (source type, edgerun type).
DERIVED = {"qwen2-tiny": {"q4_k_m": ("f16", "Q4_K_M")},
           "llama-tiny": {"q4_k_m": ("f32", "Q4_K_M"), "q5_k_m": ("f32", "Q5_K_M"), "q6_k": ("f32", "Q6_K")},
           "qwen2-swiglu": {},
           "qwen2-0.5b-shape": {"q4_k_m": ("f16", "Q4_K_M")}}
SMALL = ["qwen2-tiny", "llama-tiny", "qwen2-swiglu"]


def copy_tokenizer(w, vocab_path):
    """Every tokenizer.* key of the vocabulary file, with its own type."""
    r = gguf.GGUFReader(vocab_path)
    for key, field in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                vals = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape") for i in field.data]
                w.add_array(key, vals)
            else:
                vals = [field.parts[i].tolist()[0] for i in field.data]
                w.add_key_value(key, vals, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_string(key, bytes(field.parts[field.data[0]]).decode("utf-8", errors="surrogateescape"))
        else:
            w.add_key_value(key, field.parts[field.data[0]].tolist()[0], vtype)
    return len(r.fields["tokenizer.ggml.tokens"].data)


def weights(spec, n_vocab):
    """The float32 tensors, by GGUF name, shaped [rows, cols] (numpy order)."""
    rng = np.random.default_rng(spec["seed"])
    E, F, H, KV = spec["embd"], spec["ff"], spec["heads"], spec["kv_heads"]
    hd = E // H

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(scale / np.sqrt(cols)))

    t = {}
    # A wide embedding spread makes the logits peaked, so greedy choices are
    # far from ties (random models otherwise sit near a uniform softmax).
    # With tied embeddings a large embedding makes every token predict
    # itself; a smaller one and stronger layer outputs keep greedy text
    # varied (embd_scale, out_scale).
    t["token_embd.weight"] = rng.standard_normal((n_vocab, E), dtype=np.float32) * np.float32(spec.get("embd_scale", 1.0))
    for i in range(spec["layers"]):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = (1.0 + 0.1 * rng.standard_normal(E)).astype(np.float32)
        t[p + "attn_q.weight"] = mat(H * hd, E, 1.0)
        t[p + "attn_k.weight"] = mat(KV * hd, E, 1.0)
        t[p + "attn_v.weight"] = mat(KV * hd, E, 1.0)
        if spec["bias"]:
            t[p + "attn_q.bias"] = (0.1 * rng.standard_normal(H * hd)).astype(np.float32)
            t[p + "attn_k.bias"] = (0.1 * rng.standard_normal(KV * hd)).astype(np.float32)
            t[p + "attn_v.bias"] = (0.1 * rng.standard_normal(KV * hd)).astype(np.float32)
        t[p + "attn_output.weight"] = mat(E, H * hd, 0.5 * spec.get("out_scale", 1.0))
        t[p + "ffn_norm.weight"] = (1.0 + 0.1 * rng.standard_normal(E)).astype(np.float32)
        t[p + "ffn_gate.weight"] = mat(F, E, 1.0)
        t[p + "ffn_up.weight"] = mat(F, E, 1.0)
        t[p + "ffn_down.weight"] = mat(E, F, 0.5 * spec.get("out_scale", 1.0))
    t["output_norm.weight"] = (1.0 + 0.1 * rng.standard_normal(E)).astype(np.float32)
    if not spec["tied"]:
        t["output.weight"] = mat(n_vocab, E, 4.0)
    for layer, boost in spec.get("ffn_boost", {}).items():
        p = f"blk.{layer}."
        t[p + "ffn_gate.weight"] *= np.float32(boost)
        t[p + "ffn_up.weight"] *= np.float32(boost)
        t[p + "ffn_down.weight"] /= np.float32(boost * boost)
    return t


def write_model(name, spec, qtype_name, path):
    vocab_path = os.path.join(VOCABS, spec["vocab"])
    if not os.path.exists(vocab_path):
        sys.exit(f"{vocab_path} is missing: run scripts/setup.sh")
    arch = spec["arch"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"edgerun {name} ({qtype_name}, random weights)")
    w.add_string("general.license", "apache-2.0")
    n_vocab = copy_tokenizer(w, vocab_path)
    w.add_block_count(spec["layers"])
    w.add_context_length(spec["ctx"])
    w.add_embedding_length(spec["embd"])
    w.add_feed_forward_length(spec["ff"])
    w.add_head_count(spec["heads"])
    w.add_head_count_kv(spec["kv_heads"])
    w.add_layer_norm_rms_eps(spec["eps"])
    w.add_rope_freq_base(spec["rope_base"])
    w.add_vocab_size(n_vocab)
    qt = TYPES[qtype_name]
    w.add_file_type({"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9}[qtype_name])
    for tname, arr in weights(spec, n_vocab).items():
        # Vectors (norms, biases) stay float32, as llama.cpp's converter
        # writes them; matrices take the file's type.
        if arr.ndim == 1 or qt == Q.F32 or any(f".{k}." in tname for k in spec.get("f32_tensors", ())):
            w.add_tensor(tname, arr)
        elif qt == Q.F16:
            w.add_tensor(tname, arr.astype(np.float16))
        else:
            data = gguf.quants.quantize(arr, qt)
            w.add_tensor(tname, data, raw_shape=data.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def generator_stamp():
    """What the files depend on besides the seeds: this script and the
    packages that draw and quantize the weights."""
    h = hashlib.sha256()
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    h.update(f"numpy {np.__version__} gguf {getattr(gguf, '__version__', '?')}".encode())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--big", action="store_true", help="also the Qwen2-0.5B-shaped models (bench only)")
    ap.add_argument("--only", help="comma-separated model-type names, e.g. qwen2-tiny-q8_0")
    ap.add_argument("--edgerun", help="the edgerun executable, for the k-quant models (skipped without it)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    stamp_path = os.path.join(a.out, ".generator")
    stamp = generator_stamp()
    old = open(stamp_path).read().strip() if os.path.exists(stamp_path) else ""
    if old != stamp:
        for f in os.listdir(a.out):
            if f.endswith((".gguf", ".json", ".html")):
                os.remove(os.path.join(a.out, f))
        with open(stamp_path, "w") as f:
            f.write(stamp + "\n")
    names = SMALL + (["qwen2-0.5b-shape"] if a.big else [])
    jobs = [(n, t, None) for n in names for t in WRITTEN[n]]
    if a.edgerun:
        jobs += [(n, t, src) for n in names for t, src in DERIVED[n].items()]
    if a.only:
        keep = set(a.only.split(","))
        jobs = [j for j in jobs if f"{j[0]}-{j[1]}" in keep or (j[2] and f"{j[0]}-{j[2][0]}" in keep)]
    index_path = os.path.join(a.out, "index.json")
    index = json.load(open(index_path)) if os.path.exists(index_path) else {}
    for name, t, derived in jobs:
        path = os.path.join(a.out, f"{name}-{t}.gguf")
        if not os.path.exists(path):
            if derived:
                src = os.path.join(a.out, f"{name}-{derived[0]}.gguf")
                subprocess.run([a.edgerun, "quantize", src, "-o", path, "--type", derived[1], "--quiet", "--threads",
                                str(os.cpu_count() or 1)], check=True)
            else:
                tmp = f"{path}.{os.getpid()}.tmp"
                write_model(name, SPECS[name], t, tmp)
                os.replace(tmp, path)
        index[f"{name}-{t}"] = {"file": os.path.basename(path), "sha256": sha256(path)}
    with open(f"{index_path}.{os.getpid()}.tmp", "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    os.replace(f"{index_path}.{os.getpid()}.tmp", index_path)
    print(f"gen_llm_models: {len(index)} models in {a.out}")


if __name__ == "__main__":
    main()
