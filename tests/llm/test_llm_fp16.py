#!/usr/bin/env python3
"""fp16 for LLMs as a user meets it: a model whose SwiGLU product overflows
fp16 (qwen2-swiglu from gen_llm_models.py: layer 1's product reaches ~1e5,
every other activation stays in range).

- `edgerun analyze MODEL.gguf --calib-text` reports each activation site's
  largest value; they are checked against a numpy forward pass of the same
  file on the same tokens (written here from the GGUF tensors, float64),
  and exactly the overflowing site is flagged;
- `edgerun eval --fp16` (every activation rounded to fp16) fails on that
  model naming layer 1's SwiGLU product, and runs a normal model with a KL
  divergence from its fp32 run that is small;
- `edgerun quantize --fp16-safe` divides layer 1's ffn_up and multiplies its
  ffn_down by one power of two (checked in the file's bytes): the fp32 run
  is unchanged and the fp16 run is finite and close to the fp32 baseline,
  at F16 and at Q4_K_M;
- a model whose gate projection itself overflows is refused by
  --fp16-safe with the site named; bad arguments fail with a message.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_llm_models  # noqa: E402

TEXT = "/usr/share/common-licenses/GPL-3"  # Debian's base-files
CTX = 128
CHUNKS = 4                     # evaluation chunks (2 in the sanitizer build)
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def run(args):
    t0 = time.time()
    p = subprocess.run(args, capture_output=True, text=True, timeout=900, errors="replace")
    if time.time() - t0 > 5:
        print(f"     ({time.time() - t0:.1f} s: {' '.join(os.path.basename(x) for x in args[:2])} ...)")
    return p.returncode, p.stdout, p.stderr


def load(path):
    r = gguf.GGUFReader(path)
    t = {x.name: np.asarray(x.data) for x in r.tensors}
    f = {}
    for key in ("qwen2.embedding_length", "qwen2.attention.head_count", "qwen2.attention.head_count_kv",
                "qwen2.rope.freq_base", "qwen2.attention.layer_norm_rms_epsilon", "qwen2.block_count"):
        fld = r.fields[key]
        f[key.split(".", 1)[1]] = fld.parts[fld.data[0]].tolist()[0]
    return t, f


def reference_sites(path, ids):
    """Largest |value| of each site edgerun's analyze names, for one chunk,
    in float64 (keys and values rounded to fp16, as edgerun's cache)."""
    t, f = load(path)
    w = {k: v.astype(np.float64) for k, v in t.items()}
    E, H, KV = int(f["embedding_length"]), int(f["attention.head_count"]), int(f["attention.head_count_kv"])
    hd, eps, base = E // H, float(f["attention.layer_norm_rms_epsilon"]), float(f["rope.freq_base"])
    n = len(ids)
    x = w["token_embd.weight"][ids]
    pos = np.arange(n, dtype=np.float64)
    half = hd // 2
    inv = base ** (-2.0 * np.arange(half) / hd)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)

    def rms(v, g):
        return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps) * g

    def rope(v, heads):
        v = v.reshape(n, heads, hd)
        a, b = v[..., :half], v[..., half:]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)

    sites = {}
    for L in range(int(f["block_count"])):
        p = f"blk.{L}."
        h = rms(x, w[p + "attn_norm.weight"])
        sites[p + "attn_norm.output"] = h
        q0, k0, v0 = h @ w[p + "attn_q.weight"].T, h @ w[p + "attn_k.weight"].T, h @ w[p + "attn_v.weight"].T
        sites[p + "attn_q.output"], sites[p + "attn_k.output"], sites[p + "attn_v.output"] = q0, k0, v0
        q = rope(q0 + w[p + "attn_q.bias"], H)
        k = rope(k0 + w[p + "attn_k.bias"], KV).astype(np.float16).astype(np.float64)
        v = (v0 + w[p + "attn_v.bias"]).reshape(n, KV, hd).astype(np.float16).astype(np.float64)
        att = np.zeros((n, H, hd))
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for hh in range(H):
            kh = hh // (H // KV)
            s = q[:, hh, :] @ k[:, kh, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, hh, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, kh, :]
        att = att.reshape(n, H * hd)
        sites[p + "attn.output"] = att
        o = att @ w[p + "attn_output.weight"].T
        sites[p + "attn_output.output"] = o
        x = x + o
        sites[p + "attn_residual"] = x
        h = rms(x, w[p + "ffn_norm.weight"])
        sites[p + "ffn_norm.output"] = h
        g, u = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
        sites[p + "ffn_gate.output"], sites[p + "ffn_up.output"] = g, u
        prod = g / (1 + np.exp(-g)) * u
        sites[p + "ffn_down.input"] = prod
        d = prod @ w[p + "ffn_down.weight"].T
        sites[p + "ffn_down.output"] = d
        x = x + d
        sites[p + "ffn_residual"] = x
    return sites


def eval_json(E, model, extra, base=None):
    args = [E, "eval", model, "--text", TEXT, "--ctx", str(CTX), "--chunks", str(CHUNKS), "--json", "--threads",
            "2"] + extra
    if base:
        args += ["--baseline", base]
    rc, out, err = run(args)
    return rc, (json.loads(out) if rc == 0 else None), err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgerun", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--light", action="store_true", help="sanitizer build: --fp16-safe at F16 only")
    a = ap.parse_args()
    global CHUNKS
    if a.light:
        CHUNKS = 2
    E = a.edgerun
    M = os.path.join(a.models, "qwen2-swiglu-f16.gguf")
    NORMAL = os.path.join(a.models, "qwen2-tiny-f16.gguf")
    tmp = tempfile.mkdtemp(prefix="er-fp16-")

    # ---- analyze against numpy ------------------------------------------------
    rc, out, err = run([E, "analyze", M, "--calib-text", TEXT, "--calib-ctx", str(CTX), "--calib-chunks", "1",
                        "--json", "--threads", "2"])
    check(rc == 0, f"analyze --json runs (rc {rc}: {err.strip()[-300:]})")
    if rc != 0:
        return
    rep = json.loads(out)
    sites = {s["site"]: s for s in rep["sites"]}
    check(rep["chunks"] == 1 and rep["tokens"] == CTX, f"analyze measured one chunk of {CTX} tokens")
    rc, out, err = run([E, "tokenize", M, "--file", TEXT, "--ids"])
    ids = json.loads(out)[:CTX]
    ref = reference_sites(M, ids)
    worst = 0.0
    for name, v in ref.items():
        got = sites.get(name)
        if got is None:
            check(False, f"analyze reports site {name}")
            continue
        want = float(np.max(np.abs(v)))
        rel = abs(got["max_abs"] - want) / want
        worst = max(worst, rel)
        if rel > 2e-3:
            check(False, f"{name}: max {got['max_abs']:.6g}, numpy {want:.6g}")
        if got["count"] != v.size:
            check(False, f"{name}: {got['count']} values counted, numpy has {v.size}")
    check(worst <= 2e-3, f"all {len(ref)} sites' largest values equal numpy's (worst relative difference {worst:.1e})")
    prod = ref["blk.1.ffn_down.input"]
    over = int(np.sum(np.abs(prod) >= 65520))
    got = sites["blk.1.ffn_down.input"]
    check(abs(got["over_fp16"] - over) <= max(2, over // 100),
          f"blk.1 SwiGLU product: {got['over_fp16']} values beyond fp16, numpy {over}")
    flagged = sorted(s["site"] for s in rep["sites"] if s["verdict"] == "overflow")
    check(flagged == ["blk.1.ffn_down.input"], f"only layer 1's SwiGLU product overflows fp16 ({flagged})")
    check(sites["blk.0.ffn_down.input"]["verdict"] == "ok", "layer 0's SwiGLU product is in range")
    rc, txt, err = run([E, "analyze", M, "--calib-text", TEXT, "--calib-ctx", str(CTX), "--calib-chunks", "1"])
    check(rc == 0 and "blk.1.ffn_down.input" in txt and "1 sites overflow" in txt,
          "the text report names the overflowing site")

    # ---- fp16 activations in the engine --------------------------------------
    rc, _, err = eval_json(E, M, ["--fp16"])
    check(rc != 0 and "layer 1: the SwiGLU product (gate x up) reaches" in err,
          f"eval --fp16 fails naming layer 1's SwiGLU product ({err.strip()[-200:]})")
    rc, r, err = eval_json(E, M, [])
    check(rc == 0, "the same model runs in fp32")
    rc, r, err = eval_json(E, NORMAL, ["--fp16"], base=NORMAL)
    check(rc == 0 and r["mean_kld"] < 1e-3 and r["top1_agreement"] >= 0.95,
          f"a normal model in fp16 stays close to its fp32 run ({r and (r['mean_kld'], r['top1_agreement'])})")

    # ---- quantize --fp16-safe ----------------------------------------------------
    src_t, _ = load(M)
    for qtype in ["F16"] if a.light else ["F16", "Q4_K_M"]:
        out_path = os.path.join(tmp, f"safe-{qtype}.gguf")
        rc, _, err = run([E, "quantize", M, "-o", out_path, "--type", qtype, "--fp16-safe", "--calib-text", TEXT,
                          "--calib-ctx", str(CTX), "--calib-chunks", "2", "--threads", "2", "--quiet",
                          "--report", os.path.join(tmp, f"safe-{qtype}")])
        check(rc == 0, f"quantize --type {qtype} --fp16-safe runs ({err.strip()[-300:]})")
        if rc != 0:
            continue
        rj = json.load(open(os.path.join(tmp, f"safe-{qtype}.json")))
        layers = rj["fp16_safe"]["layers"]
        check(len(layers) == 1 and layers[0]["layer"] == 1, f"{qtype}: exactly layer 1 was scaled ({layers})")
        if len(layers) != 1:
            continue
        s = layers[0]["ffn_down_scale"]
        check(s >= 2 and float(s).is_integer() and (int(s) & (int(s) - 1)) == 0
              and layers[0]["max_abs"] / s <= 65504 / 16 < layers[0]["max_abs"] / (s / 2),
              f"{qtype}: the scale {s} is the smallest power of two that brings {layers[0]['max_abs']:.4g} "
              f"under 65504/16")
        if qtype == "F16":
            out_t, _ = load(out_path)
            up_ok = np.array_equal(out_t["blk.1.ffn_up.weight"],
                                   (src_t["blk.1.ffn_up.weight"].astype(np.float32) / s).astype(np.float16))
            down_ok = np.array_equal(out_t["blk.1.ffn_down.weight"],
                                     (src_t["blk.1.ffn_down.weight"] * np.float32(s)).astype(np.float16))
            # The others as they were, or converted to f16 where --type F16
            # asks it of a float32 matrix.
            same = all(np.array_equal(out_t[k], src_t[k].astype(out_t[k].dtype)) for k in src_t
                       if k not in ("blk.1.ffn_up.weight", "blk.1.ffn_down.weight"))
            check(up_ok and down_ok and same, "F16: ffn_up / s and ffn_down * s exactly; every other tensor as it was")
            rc, r, err = eval_json(E, out_path, [], base=M)
            check(rc == 0 and r["mean_kld"] < 1e-6,
                  f"F16: the scaled model's fp32 run equals the original's ({r and r['mean_kld']})")
        rc, r, err = eval_json(E, out_path, ["--fp16"], base=M)
        # The random test model's next-token choices are near ties (its
        # perplexity is ~2e5 of 151,936 tokens), so agreement is a weak
        # measure here; the KL divergence carries the tolerance.
        kld_max = 1e-4 if qtype == "F16" else 0.05
        check(rc == 0 and r["mean_kld"] < kld_max,
              f"{qtype}: the fp16 run is finite and within KL {kld_max} of the fp32 original "
              f"({err.strip()[-200:] if rc else (r['mean_kld'], r['top1_agreement'])})")

    # ---- what it cannot fix ------------------------------------------------------
    spec = dict(gen_llm_models.SPECS["llama-tiny"], seed=7, ffn_boost={0: 30000.0}, f32_tensors=("ffn_down",))
    gate_model = os.path.join(tmp, "gate-overflow.gguf")
    gen_llm_models.write_model("gate-overflow", spec, "f16", gate_model)
    rc, _, err = run([E, "quantize", gate_model, "-o", os.path.join(tmp, "g.gguf"), "--type", "F16", "--fp16-safe",
                      "--calib-text", TEXT, "--calib-ctx", str(CTX), "--calib-chunks", "1", "--quiet"])
    check(rc != 0 and "blk.0.ffn_gate.output" in err and "cannot run finite in fp16" in err
          and not os.path.exists(os.path.join(tmp, "g.gguf")),
          f"a gate projection beyond fp16 is refused by name, nothing written ({err.strip()[-240:]})")

    # ---- bad arguments -----------------------------------------------------------------
    rc, _, err = run([E, "quantize", M, "-o", os.path.join(tmp, "x.gguf"), "--fp16-safe"])
    check(rc != 0 and "--fp16-safe needs --calib-text" in err, "--fp16-safe without text is refused")
    rc, _, err = run([E, "analyze", M])
    check(rc != 0 and "--calib-text" in err, "analyze on an LLM without text is refused")
    short = os.path.join(tmp, "short.txt")
    open(short, "w").write("Too short.\n")
    rc, _, err = run([E, "analyze", M, "--calib-text", short])
    check(rc != 0 and "fewer than 512 tokens" in err, f"a text shorter than one chunk is refused ({err.strip()})")
    rc, _, err = run([E, "analyze", M, "--calib-text", os.path.join(tmp, "missing.txt")])
    check(rc != 0 and "missing.txt" in err, "a missing text file is named")
    rc, _, err = run([E, "analyze", M, "--calib-text", TEXT, "--calib-ctx", "4"])
    check(rc != 0 and "--calib-ctx" in err, "a chunk length under 8 is refused")


if __name__ == "__main__":
    main()
    if FAILS:
        print(f"{len(FAILS)} failed")
        sys.exit(1)
    print("all passed")
