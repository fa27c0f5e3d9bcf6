#!/usr/bin/env python3
"""Makes the llama.cpp references that tests/llm/check_refs.py compares
edgerun with: for each test model (tests/llm/gen_llm_models.py, and the
real SmolLM2-135M-Instruct Q4_1) and prompt, llama.cpp's prompt token ids,
its greedy continuation of 64 tokens and its first step's 64 largest
logits, written to tests/llm/refs/llama-cpp.json with each model's SHA-256.

Needs llama.cpp built by scripts/setup-llama-cpp.sh (about 15 minutes), so
it is not part of `make test`: run `make llm-refs` after changing the test
models or the prompts, and commit the JSON.
"""
import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SRC = os.path.join(ROOT, ".cache", "llama.cpp-src")
BUILD = os.path.join(ROOT, ".cache", "llama.cpp-build")
sys.path.insert(0, os.path.dirname(HERE))
from llm_assets import (IMATRIX_DIR, IMATRIX_REFS, IMATRIX_TEXT, PERPLEXITY_TEXT, PROMPTS, QUANT_REFS,  # noqa: E402
                        REF_MODELS, gguf_tensor_digest, smollm2_path)


def build_oracle():
    exe = os.path.join(BUILD, "llama-oracle")
    src = os.path.join(HERE, "llama-oracle.c")
    if os.path.exists(exe) and os.path.getmtime(exe) > os.path.getmtime(src):
        return exe
    libdir = os.path.join(BUILD, "bin")
    cmd = ["cc", "-O2", "-o", exe, src, "-I", os.path.join(SRC, "include"), "-I", os.path.join(SRC, "ggml", "include"),
           "-L", libdir, "-lllama", "-lggml", "-lggml-base", "-lm", f"-Wl,-rpath,{libdir}"]
    subprocess.run(cmd, check=True)
    return exe


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def imatrix_refs(models):
    """llama-imatrix on each model over the first half of IMATRIX_TEXT (into
    tests/llm/data/imatrix/, committed), then llama-quantize --imatrix."""
    text = open(IMATRIX_TEXT, encoding="utf-8").read()
    out = []
    os.makedirs(IMATRIX_DIR, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        calib = os.path.join(tmp, "calib.txt")
        open(calib, "w").write(text[:text.index("\n\n", len(text) // 2)])
        for name in sorted({m for m, _ in IMATRIX_REFS}):
            im = os.path.join(IMATRIX_DIR, name + ".imatrix.gguf")
            subprocess.run([os.path.join(BUILD, "bin", "llama-imatrix"), "-m", os.path.join(models, name + ".gguf"),
                            "-f", calib, "-o", im, "-c", "128", "--chunks", "8", "-t", "1", "--no-ppl"],
                           check=True, capture_output=True)
        for name, qtype in IMATRIX_REFS:
            src, im = os.path.join(models, name + ".gguf"), os.path.join(IMATRIX_DIR, name + ".imatrix.gguf")
            dst = os.path.join(tmp, f"{name}-{qtype}.gguf")
            subprocess.run([os.path.join(BUILD, "bin", "llama-quantize"), "--imatrix", im, src, dst, qtype],
                           check=True, capture_output=True)
            out.append({"model": name, "sha256": sha256(src), "type": qtype, "imatrix": os.path.basename(im),
                        "imatrix_sha256": sha256(im), "bytes": os.path.getsize(dst),
                        "tensors_sha256": gguf_tensor_digest(dst)})
            print(f"llama-quantize --imatrix {name} {qtype}: {os.path.getsize(dst)} bytes")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True, help="folder of gen_llm_models.py output")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "refs", "llama-cpp.json"))
    ap.add_argument("--n-gen", type=int, default=64)
    ap.add_argument("--only-imatrix", action="store_true",
                    help="remake only the importance matrices and the quantize_imatrix references")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(BUILD, "bin", "llama-bench")):
        sys.exit("llama.cpp is not built: run scripts/setup-llama-cpp.sh")
    if a.only_imatrix:
        with open(a.out) as f:
            refs = json.load(f)
        refs["quantize_imatrix"] = imatrix_refs(a.models)
        with open(a.out, "w") as f:
            json.dump(refs, f, indent=0)
            f.write("\n")
        return
    exe = build_oracle()
    version = sorted(glob.glob(os.path.join(SRC, ".complete-*")))
    # Flash attention off: llama.cpp's CPU flash attention accumulates the
    # value mix in fp16, its plain attention in float (as edgerun does).
    # Repacking off: llama.cpp's AVX2 build repacks Q4_0 / Q4_K weights
    # into interleaved layouts with products of their own; measured on
    # llama-tiny-q4_0, its logits then differ from its own stored-layout
    # products (which edgerun computes) by 0.01 of their spread, 4e-7 off.
    refs = {"source": "llama.cpp from llama-cpp-python " + (os.path.basename(version[-1])[10:] if version else "?")
            + ", flash attention and weight repacking off",
            "n_gen": a.n_gen, "runs": []}
    models = [(name, os.path.join(a.models, name + ".gguf")) for name in REF_MODELS]
    models.append(("smollm2-135m-q4_1", smollm2_path()))
    for name, path in models:
        digest = sha256(path)
        for pname, text in PROMPTS.items():
            with tempfile.NamedTemporaryFile("w", delete=False, suffix=".txt") as f:
                f.write(text)
                prompt_file = f.name
            out = subprocess.run([exe, path, str(a.n_gen), "2", prompt_file, "nofa", "norepack"], check=True, capture_output=True,
                                 text=True).stdout
            os.unlink(prompt_file)
            r = json.loads(out)
            r.update({"model": name, "sha256": digest, "prompt": pname})
            refs["runs"].append(r)
            print(f"{name:24s} {pname:8s} prompt {len(r['prompt_ids'])} tokens, greedy {r['greedy'][:6]}...")
    # Perplexity of SmolLM2 on a text every Debian system ships, with
    # llama-perplexity's own chunking (edgerun perplexity copies it), with
    # the same settings as the logits above.
    ppl_text, ppl_ctx, ppl_chunks = PERPLEXITY_TEXT, 512, 4
    out = subprocess.run([os.path.join(BUILD, "bin", "llama-perplexity"), "-m", smollm2_path(), "-f", ppl_text,
                          "-c", str(ppl_ctx), "--chunks", str(ppl_chunks), "-t", "2", "-fa", "off", "--no-repack"],
                         check=True, capture_output=True, text=True)
    est = [line for line in (out.stdout + out.stderr).splitlines() if "Final estimate: PPL = " in line]
    if not est:
        sys.exit("make_refs: llama-perplexity printed no final estimate")
    ppl = float(est[-1].split("PPL = ")[1].split()[0])
    refs["perplexity"] = {"model": "smollm2-135m-q4_1", "text": ppl_text, "sha256": sha256(ppl_text),
                          "ctx": ppl_ctx, "chunks": ppl_chunks, "ppl": ppl}
    print(f"smollm2 perplexity on {ppl_text} (ctx {ppl_ctx}, {ppl_chunks} chunks): {ppl}")
    # llama-quantize's output (no imatrix) for each (float model, type).
    refs["quantize"] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, qtype in QUANT_REFS:
            src = os.path.join(a.models, name + ".gguf")
            dst = os.path.join(tmp, f"{name}-{qtype}.gguf")
            subprocess.run([os.path.join(BUILD, "bin", "llama-quantize"), src, dst, qtype], check=True,
                           capture_output=True)
            refs["quantize"].append({"model": name, "sha256": sha256(src), "type": qtype, "bytes": os.path.getsize(dst),
                                     "tensors_sha256": gguf_tensor_digest(dst)})
            print(f"llama-quantize {name} {qtype}: {os.path.getsize(dst)} bytes")
    refs["quantize_imatrix"] = imatrix_refs(a.models)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(refs, f, indent=0)
        f.write("\n")
    print(f"make_refs: {len(refs['runs'])} runs -> {a.out}")


if __name__ == "__main__":
    main()
