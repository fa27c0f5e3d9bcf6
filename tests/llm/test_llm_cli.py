#!/usr/bin/env python3
"""The LLM commands as a user runs them: edgerun generate, tokenize,
inspect, perplexity and bench --llm on the generated test models and the
real SmolLM2, and their errors on bad models and bad arguments (TESTING.md
16a, 16b): each exits non-zero with a one-line message naming the problem,
never a crash."""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llm_assets import smollm2_path  # noqa: E402

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what)
    else:
        print("ok  ", what)


def run(args, timeout=600):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, errors="replace")
    return p.returncode, p.stdout, p.stderr


def write_model(path, arch="llama", license_="apache-2.0", drop=None, bad_shape=False, tensor_type=None):
    """A tiny llama-style model with a byte vocabulary, for the bad cases."""
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, arch)
    w.add_string("general.license", license_)
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(32)
    w.add_feed_forward_length(64)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    toks = ["<s>", "</s>"] + [chr(0x100 + i) if i < 33 or 126 < i < 161 or i == 173 else chr(i) for i in range(256)]
    toks = toks[:2] + [t for t in dict.fromkeys(toks[2:])]
    w.add_token_list(toks)
    w.add_token_types([3, 3] + [1] * (len(toks) - 2))
    w.add_token_merges([])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    n_vocab = len(toks)
    tensors = {
        "token_embd.weight": (n_vocab, 32), "output_norm.weight": (32,), "output.weight": (n_vocab, 32),
        "blk.0.attn_norm.weight": (32,), "blk.0.attn_q.weight": (32, 32), "blk.0.attn_k.weight": (32, 32),
        "blk.0.attn_v.weight": (32, 32), "blk.0.attn_output.weight": (32, 32), "blk.0.ffn_norm.weight": (32,),
        "blk.0.ffn_gate.weight": (64, 32), "blk.0.ffn_up.weight": (64, 32), "blk.0.ffn_down.weight": (32, 64),
    }
    for name, shape in tensors.items():
        if name == drop:
            continue
        if bad_shape and name == "blk.0.attn_k.weight":
            shape = (16, 32)
        arr = rng.standard_normal(shape).astype(np.float32)
        if tensor_type is not None and len(shape) == 2 and name == "blk.0.ffn_up.weight":
            data = gguf.quants.quantize(arr, tensor_type)
            w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=tensor_type)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgerun", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--dump", required=True)
    a = ap.parse_args()
    er = a.edgerun
    tiny = os.path.join(a.models, "llama-tiny-q8_0.gguf")
    qwen = os.path.join(a.models, "qwen2-tiny-q4_0.gguf")
    smol = smollm2_path()
    tmp = tempfile.mkdtemp(prefix="er-llm-cli-")

    # generate: streams, deterministic, greedy equal to the API's.
    args = [er, "generate", tiny, "--prompt", "Once upon a time", "-n", "16", "--temp", "0", "--ignore-eos"]
    rc, out1, err1 = run(args)
    rc2, out2, _ = run(args)
    check(rc == 0 and rc2 == 0, f"generate exits 0 ({err1.strip()[-200:]})")
    check(out1 == out2 and out1.startswith("Once upon a time") and len(out1) > len("Once upon a time"),
          "generate --temp 0 is deterministic and continues the prompt")
    check("decode: 16 tokens" in err1 and "tokens/s" in err1, "generate reports prompt and decode tokens/s")
    prompt_file = os.path.join(tmp, "p.txt")
    with open(prompt_file, "w") as f:
        f.write("Once upon a time")
    p = subprocess.run([a.dump, tiny, "16", "1", prompt_file], capture_output=True, text=True)
    greedy = json.loads(p.stdout)["greedy"]
    rc, detok, _ = run([er, "tokenize", tiny, "--ids", "Once upon a time"])
    check(rc == 0 and detok.strip().startswith("["), "tokenize --ids prints a list")
    rc, o3, _ = run([er, "generate", tiny, "--prompt", "Once upon a time", "-n", "16", "--temp", "0.9", "--seed", "3",
                     "--ignore-eos"])
    rc4, o4, _ = run([er, "generate", tiny, "--prompt", "Once upon a time", "-n", "16", "--temp", "0.9", "--seed", "4",
                      "--ignore-eos"])
    check(rc == 0 and rc4 == 0 and o3 != o4, "another seed gives another text")
    check(len(greedy) == 16, "llm-dump gives 16 greedy tokens")

    # chat on the real model: one turn in its template.
    rc, out, err = run([er, "generate", smol, "--chat", "--prompt", "What is 2 + 2?", "-n", "24", "--temp", "0"])
    check(rc == 0 and len(out.strip()) > 0 and "tokens/s" in err, f"generate --chat on SmolLM2 answers ({out.strip()[:60]!r})")

    # tokenize on SmolLM2: pieces and JSON.
    rc, out, _ = run([er, "tokenize", smol, "--json", "--no-special", "Hello world"])
    ok = rc == 0
    if ok:
        j = json.loads(out)
        ok = j["ids"] == [19556, 905] and j["pieces"] == ["Hello", " world"] and j["count"] == 2
    check(ok, "tokenize --json on SmolLM2 gives [19556, 905] for 'Hello world'")
    rc, out, _ = run([er, "tokenize", smol, "Hello world"])
    check(rc == 0 and "19556 -> 'Hello'" in out, "tokenize prints id -> 'piece'")

    # inspect: text and JSON, the licence and its warning.
    rc, out, _ = run([er, "inspect", smol])
    check(rc == 0 and "architecture llama" in out and "apache-2.0" in out and "Q4_1" in out and "WARNING" not in out
          and "<|im_start|>" in out, "inspect SmolLM2: architecture, licence, tensor types, chat template")
    rc, out, _ = run([er, "inspect", smol, "--json"])
    ok = rc == 0
    if ok:
        j = json.loads(out)
        ok = (j["layers"] == 30 and j["heads"] == 9 and j["kv_heads"] == 3 and j["vocab"] == 49152
              and any(t["type"] == "Q4_1" for t in j["tensor_types"]) and j["license_warning"] is None
              and 4.0 < j["bits_per_weight"] < 6.5)
    check(ok, "inspect --json on SmolLM2")
    nc = os.path.join(tmp, "nc.gguf")
    write_model(nc, license_="cc-by-nc-4.0")
    rc, out, _ = run([er, "inspect", nc])
    check(rc == 0 and "WARNING" in out and "restricts use" in out, "inspect warns on a non-commercial licence")

    # perplexity: finite, llama.cpp's chunk count.
    text = os.path.join(tmp, "t.txt")
    with open(text, "w") as f:
        f.write(" ".join(f"word{i % 50} and the number {i}." for i in range(400)))
    rc, out, err = run([er, "perplexity", tiny, "--text", text, "--ctx", "64", "--chunks", "3", "--json"])
    ok = rc == 0
    if ok:
        j = json.loads(out)
        ok = j["chunks"] == 3 and j["tokens_scored"] == 3 * 31 and math.isfinite(j["ppl"]) and j["ppl"] > 1
    check(ok, f"perplexity --json ({out.strip()[:120]} {err.strip()[-120:]})")
    rc, _, err = run([er, "perplexity", tiny, "--text", text, "--ctx", "4096"])
    check(rc == 1 and "at least" in err, "perplexity refuses a text shorter than two contexts")

    # bench --llm.
    rc, out, err = run([er, "bench", qwen, "--llm", "-p", "16", "-n", "8", "-r", "1", "--json", "--threads", "2"])
    ok = rc == 0
    if ok:
        j = json.loads(out)
        ok = j["pp_tps"] > 0 and j["tg_tps"] > 0 and j["ttft_ms"] > 0 and j["kv_bytes"] > 0 and j["bandwidth_gbs"] > 0 \
            and j["decode_bound_tps"] > 0 and j["threads"] == 2
    check(ok, f"bench --llm --json ({err.strip()[-200:]})")

    # Errors: bad arguments, a prompt past the context, broken models.
    rc, _, err = run([er, "generate", tiny, "--prompt", "a b c d e f g h i j k l m n o p", "--ctx", "4"])
    check(rc == 1 and "n_ctx" in err, "a prompt longer than the context is refused naming n_ctx")
    rc, _, err = run([er, "generate", tiny, "--prompt", "x", "--top-p", "0"])
    check(rc == 1 and "--top-p" in err, "a bad sampling option is refused")
    rc, _, err = run([er, "generate", os.path.join(tmp, "missing.gguf"), "--prompt", "x"])
    check(rc == 1 and "missing.gguf" in err, "a missing model file is named")
    bad = os.path.join(tmp, "bad.bin")
    with open(bad, "wb") as f:
        f.write(b"\x00" * 64)
    rc, _, err = run([er, "generate", bad, "--prompt", "x"])
    check(rc == 1 and "not a GGUF file" in err, "a non-GGUF file is refused")
    cases = [
        (dict(arch="gpt99"), "architecture 'gpt99' is not supported"),
        (dict(drop="blk.0.ffn_down.weight"), "tensor 'blk.0.ffn_down.weight' is missing"),
        (dict(bad_shape=True), "tensor 'blk.0.attn_k.weight' is [32, 16"),
        (dict(tensor_type=gguf.GGMLQuantizationType.MXFP4), "MXFP4, which edgerun cannot multiply"),
    ]
    for i, (kw, want) in enumerate(cases):
        path = os.path.join(tmp, f"bad{i}.gguf")
        try:
            write_model(path, **kw)
        except Exception as e:  # a writer that refuses the case is skipped, said so
            print(f"skip {want}: gguf cannot write it ({e})")
            continue
        rc, _, err = run([er, "generate", path, "--prompt", "x"])
        check(rc == 1 and want in err and "Traceback" not in err, f"bad model: {want} ({err.strip()[:160]})")
    with open(smol, "rb") as f:
        head = f.read(1 << 20)
    cut = os.path.join(tmp, "cut.gguf")
    with open(cut, "wb") as f:
        f.write(head)
    rc, _, err = run([er, "inspect", cut])
    check(rc == 1 and ("ends past" in err or "TRUNCATED" in err), f"a truncated GGUF is refused ({err.strip()[:120]})")
    print(f"test_llm_cli: {len(FAILS)} failures")
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
