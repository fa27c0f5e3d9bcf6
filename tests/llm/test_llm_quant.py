#!/usr/bin/env python3
"""The LLM quantizer and the perplexity gate as a user runs them:

- `edgerun quantize MODEL.gguf --calib-text FILE` measures an importance
  matrix (written with --imatrix-out in llama.cpp's GGUF imatrix format and
  read back with --imatrix to the same tensor bytes); Q, K and V share one
  input, so their measured columns must be equal, and the counts must be
  the calibration tokens; the rounding must change with it;
- the report lists every tensor with the type and bytes the file holds;
- `edgerun eval MODEL.gguf --baseline` gives perplexity, agreement and KL
  divergence; a model against itself agrees fully; --max-ppl-rise exits 3
  past its budget; the perplexity equals `edgerun perplexity`'s;
- `--keep-float auto:X%` meets its budget and widens the tensors it says;
- on SmolLM2 (dequantized to f16; its baseline is a dequantized Q4_1),
  Q4_K_M with the importance matrix from one half of GPL-3 loses less
  perplexity on the other half than without it (release build only);
- bad arguments and bad files fail with a message naming the problem.
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
from llm_assets import smollm2_path  # noqa: E402

TEXT = "/usr/share/common-licenses/GPL-3"  # Debian's base-files
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def run(args, timeout=900):
    t0 = time.time()
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, errors="replace")
    if time.time() - t0 > 5:
        print(f"     ({time.time() - t0:.1f} s: {' '.join(os.path.basename(x) for x in args[:2])} ...)")
    return p.returncode, p.stdout, p.stderr


def tensors(path):
    r = gguf.GGUFReader(path)
    return {t.name: (t.tensor_type.name, bytes(t.data.tobytes())) for t in r.tensors}


def budget_minimal(b, kept_names):
    """The budget search's trials show its choice cannot lose a tensor:
    the ranked prefix one shorter than the first that passed missed the
    budget, and every kept tensor the pruning pass tried to drop was
    needed (dropping it missed the budget)."""
    limit = b["ppl_in"] * (1 + b["max_ppl_rise"])
    prefix = [t for t in b["trials"] if t["dropped"] is None]
    passing = [t["wide"] for t in prefix if t["ppl"] <= limit]
    if not passing:
        return False
    k0 = min(passing)
    shorter_misses = k0 == 0 or any(t["wide"] == k0 - 1 and t["ppl"] > limit for t in prefix)
    tried = {t["dropped"]: t["ppl"] for t in b["trials"] if t["dropped"]}
    dropped = [n for n, p in tried.items() if p <= limit]
    return (shorter_misses and all(tried[n] > limit for n in kept_names if n in tried)
            and not set(dropped) & set(kept_names) and len(kept_names) == k0 - len(dropped))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgerun", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--light", action="store_true", help="sanitizer build: skip the SmolLM2 runs")
    a = ap.parse_args()
    E = a.edgerun
    tmp = tempfile.mkdtemp(prefix="er-llmq-")
    text = open(TEXT, encoding="utf-8").read()
    half = text.index("\n\n", len(text) // 2)
    calib, held = os.path.join(tmp, "calib.txt"), os.path.join(tmp, "eval.txt")
    open(calib, "w").write(text[:half])
    open(held, "w").write(text[half:])
    f16 = os.path.join(a.models, "qwen2-tiny-f16.gguf")

    # --- the importance matrix, written and read back ---------------------
    qa, qb, qp, im = (os.path.join(tmp, n) for n in ("a.gguf", "b.gguf", "plain.gguf", "m.imatrix.gguf"))
    rc, _, err = run([E, "quantize", f16, "-o", qa, "--type", "Q4_K_M", "--calib-text", calib, "--calib-ctx", "64",
                      "--calib-chunks", "4", "--imatrix-out", im, "--threads", "2", "--quiet"])
    check(rc == 0, f"quantize --calib-text --imatrix-out ({err.strip()[-200:]})")
    rc, _, err = run([E, "quantize", f16, "-o", qb, "--type", "Q4_K_M", "--imatrix", im, "--quiet"])
    check(rc == 0, f"quantize --imatrix ({err.strip()[-200:]})")
    rc, _, err = run([E, "quantize", f16, "-o", qp, "--type", "Q4_K_M", "--quiet"])
    check(rc == 0, "quantize without calibration")
    if not FAILS:
        ta, tb, tp = tensors(qa), tensors(qb), tensors(qp)
        check(ta == tb, "the matrix read back from its file gives the same tensors as the measured one")
        changed = [n for n in ta if ta[n] != tp[n]]
        check(any(n.startswith("blk.") for n in changed), f"importance changes the rounding ({len(changed)} tensors)")
        check(all(n.startswith("blk.") for n in changed), "only the measured blk.* matrices change")
        r = gguf.GGUFReader(im)
        check(bytes(r.fields["general.type"].parts[-1]).decode() == "imatrix", "imatrix file: general.type")
        check(int(r.fields["imatrix.chunk_count"].parts[-1][0]) == 4, "imatrix file: 4 chunks")
        m = {t.name: np.array(t.data, dtype=np.float64).ravel() for t in r.tensors}
        n_layers = sum(1 for n in m if n.endswith("attn_q.weight.in_sum2"))
        check(n_layers == 2 and len(m) == 2 * 7 * n_layers, f"an entry per block matrix ({len(m) // 2})")
        for L in range(n_layers):
            q, k, v = (m[f"blk.{L}.attn_{x}.weight.in_sum2"] for x in "qkv")
            check(np.array_equal(q, k) and np.array_equal(q, v), f"blk.{L}: Q, K and V saw the same input")
            g, u = m[f"blk.{L}.ffn_gate.weight.in_sum2"], m[f"blk.{L}.ffn_up.weight.in_sum2"]
            check(np.array_equal(g, u), f"blk.{L}: gate and up saw the same input")
            check(np.all(q > 0) and np.all(np.isfinite(q)), f"blk.{L}: sums of squares are positive")
            check(m[f"blk.{L}.ffn_down.weight.in_sum2"].size == 768, f"blk.{L}: ffn_down's input is n_ff wide")
        check(all(m[n][0] == 256 for n in m if n.endswith(".counts")), "counts: 4 chunks of 64 tokens")

        # --- the report ------------------------------------------------------
        rep = json.load(open(os.path.join(tmp, "a.report.json")))
        check(os.path.exists(os.path.join(tmp, "a.report.html")), "report: HTML beside the JSON")
        by = {t["name"]: t for t in rep["tensors"]}
        check(set(by) == set(ta), "report: every tensor")
        check(all(by[n]["type"] == ta[n][0] for n in ta), "report: the types the file holds")
        check(all(by[n]["bytes"] == len(ta[n][1]) for n in ta), "report: the bytes the file holds")
        check(rep["importance"]["chunks"] == 4 and rep["importance"]["tokens"] == 256, "report: calibration size")
        shares = [t["error_share"] for t in rep["tensors"]]
        check(abs(sum(shares) - 1) < 1e-3 and min(shares) >= 0, "report: error shares sum to 1")

    # --- eval and the gate -------------------------------------------------
    def ev(model, *extra):
        rc, out, err = run([E, "eval", model, "--text", held, "--ctx", "64", "--chunks", "4", "--json",
                            "--threads", "2", *extra])
        try:
            return rc, json.loads(out), err
        except ValueError:
            return rc, {}, err
    rc, self_, err = ev(f16, "--baseline", f16)
    check(rc == 0 and self_.get("top1_agreement") == 1.0 and self_.get("mean_kld", 1) < 1e-9 and
          self_.get("ppl_rise") == 0, f"a model against itself: full agreement, no divergence ({err.strip()[-200:]})")
    rc, q, _ = ev(qa, "--baseline", f16)
    check(rc == 0 and 0 <= q.get("top1_agreement", -1) <= 1 and q.get("mean_kld", -1) > 0, "Q4_K_M vs f16: figures")
    rc, q2, _ = ev(qa)
    check(rc == 0 and abs(q2.get("ppl", 0) - q.get("ppl", 1)) <= 1e-6 * q2.get("ppl", 0),
          "the model's perplexity does not depend on the baseline run beside it")
    rc, out, _ = run([E, "perplexity", qa, "--text", held, "--ctx", "64", "--chunks", "4", "--json", "--threads", "2"])
    check(rc == 0 and abs(json.loads(out)["ppl"] - q2.get("ppl", 0)) <= 1e-6 * q2.get("ppl", 0),
          "eval's perplexity is edgerun perplexity's")
    rc, g, _ = ev(qa, "--baseline", f16, "--max-ppl-rise", "0%")
    check(rc == (3 if q.get("ppl_rise", 0) > 0 else 0) and g.get("pass") is (rc == 0),
          f"gate at 0%: exit {rc} for a rise of {q.get('ppl_rise')}")
    rc, g, _ = ev(qa, "--baseline", f16, "--max-ppl-rise", "1000%")
    check(rc == 0 and g.get("pass") is True, "gate at 1000%: passes")

    # --- the perplexity budget ---------------------------------------------
    qk = os.path.join(tmp, "k.gguf")
    rc, _, err = run([E, "quantize", f16, "-o", qk, "--type", "Q4_0", "--calib-text", calib, "--calib-ctx", "64",
                      "--calib-chunks", "4", "--eval-text", held, "--eval-ctx", "64", "--eval-chunks", "4",
                      "--keep-float", "auto:0.1%",
                      "--threads", "2"])
    check(rc == 0, f"--keep-float auto:0.1% ({err.strip()[-300:]})")
    if rc == 0:
        rep = json.load(open(os.path.join(tmp, "k.report.json")))
        b = rep["budget"]
        check(b["ppl_out"] <= b["ppl_in"] * 1.001, f"budget met: {b['ppl_in']:.2f} -> {b['ppl_out']:.2f}")
        kept = [t for t in rep["tensors"] if t["kept_wide"]]
        check(len(kept) == b["kept_wide"] and all(t["type"] == "Q8_0" for t in kept), "kept tensors are Q8_0")
        tk = tensors(qk)
        check(all(tk[t["name"]][0] == "Q8_0" for t in kept), "the file holds them at Q8_0")
        rc, e, _ = ev(qk, "--baseline", f16)
        check(rc == 0 and abs(e.get("ppl", 0) - b["ppl_out"]) <= 1e-6 * b["ppl_out"],
              "the budget's figure is the written file's")
        check(budget_minimal(b, [t["name"] for t in kept]), "no kept tensor can be dropped within the budget")

    # --- bad arguments and files ---------------------------------------------
    out = os.path.join(tmp, "bad.gguf")
    bad = [
        (["quantize", f16, "-o", out, "--keep-float", "auto:1%"], "--eval-text"),
        (["quantize", f16, "-o", out, "--keep-float", "blk.0.attn_q.weight"], "auto:"),
        (["quantize", f16, "-o", out, "--keep-float", "auto:x"], "budget"),
        (["quantize", f16, "-o", out, "--imatrix", f16], "general.type"),
        (["quantize", f16, "-o", out, "--calib-text", os.path.join(tmp, "none.txt")], "none.txt"),
        (["quantize", f16, "-o", out, "--calib-text", calib, "--imatrix", im], "not both"),
        (["quantize", f16, "-o", out, "--keep-type", "Q4_0", "--keep-float", "auto:1%", "--eval-text", held],
         "Q8_0 or F16"),
        (["eval", f16, "--text", held, "--max-ppl-rise", "1%"], "--baseline"),
        (["eval", f16, "--text", held, "--baseline", os.path.join(a.models, "llama-tiny-f16.gguf")], "vocabulary"),
        (["eval", f16, "--text", held, "--baseline", f16, "--max-ppl-rise", "-1"], "percentage"),
    ]
    short = os.path.join(tmp, "short.txt")
    open(short, "w").write("too short")
    bad.append((["quantize", f16, "-o", out, "--calib-text", short], "fewer than"))
    bad.append((["eval", f16, "--text", short], "tokens"))
    for args, needle in bad:
        rc, _, err = run([E, *args])
        check(rc != 0 and needle in err and "Sanitizer" not in err and not os.path.exists(out),
              f"{' '.join(args[2:])}: fails naming '{needle}' ({err.strip()[-160:]})")

    # --- SmolLM2: importance helps a real model ------------------------------
    if not a.light:
        sm16 = os.path.join(tmp, "smol-f16.gguf")
        rc, _, _ = run([E, "quantize", smollm2_path(), "-o", sm16, "--type", "F16", "--quiet"])
        rises = {}
        for name, extra in (("plain", []), ("imatrix", ["--calib-text", calib])):
            o = os.path.join(tmp, f"smol-{name}.gguf")
            rc2, _, _ = run([E, "quantize", sm16, "-o", o, "--type", "Q4_K_M", "--threads", "2", "--quiet", *extra])
            rc3, out, _ = run([E, "eval", o, "--text", held, "--baseline", sm16, "--json", "--threads", "2",
                               "--chunks", "4"])
            rises[name] = json.loads(out)["ppl_rise"] if rc == rc2 == rc3 == 0 else None
        # SmolLM2 stores blk.10 before blk.2: the wider attn_v / ffn_down
        # layers must follow the layer number (llama-quantize's rule), not
        # the file's order: Q6_K on the first and last eighth and every
        # third layer between (30 layers: 0-2, 26-29, 5, 8, ...).
        ts = tensors(os.path.join(tmp, "smol-plain.gguf"))
        n = 30
        more = [i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2 for i in range(n)]
        got = [ts[f"blk.{i}.ffn_down.weight"][0] == "Q6_K" for i in range(n)]
        check(got == more, f"SmolLM2 Q4_K_M: Q6_K ffn_down on layers {[i for i in range(n) if got[i]]}")
        check(None not in rises.values() and rises["imatrix"] < rises["plain"],
              f"SmolLM2 Q4_K_M: perplexity rise {rises.get('imatrix')} with the importance matrix, "
              f"{rises.get('plain')} without")
        # A budget that needs wide tensors on a real model.
        o = os.path.join(tmp, "smol-auto.gguf")
        rc, _, err = run([E, "quantize", sm16, "-o", o, "--type", "Q4_0", "--threads", "2", "--quiet",
                          "--eval-text", held, "--eval-ctx", "128", "--eval-chunks", "4", "--keep-float", "auto:4%"])
        check(rc == 0, f"SmolLM2 Q4_0 --keep-float auto:4% ({err.strip()[-200:]})")
        if rc == 0:
            b = json.load(open(os.path.join(tmp, "smol-auto.report.json")))["budget"]
            k = b["kept_wide"]
            kept = [t["name"] for t in json.load(open(os.path.join(tmp, "smol-auto.report.json")))["tensors"]
                    if t["kept_wide"]]
            pruned = sum(1 for t in b["trials"] if t["dropped"] and t["ppl"] <= b["ppl_in"] * 1.04)
            check(k > 0 and b["ppl_out"] <= b["ppl_in"] * 1.04 and budget_minimal(b, kept),
                  f"SmolLM2 budget: {k} tensors wide ({pruned} dropped by pruning), {b['ppl_in']:.3f} -> "
                  f"{b['ppl_out']:.3f}")

    print(f"{'FAIL' if FAILS else 'ok'}: {len(FAILS)} failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
