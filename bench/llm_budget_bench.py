#!/usr/bin/env python3
"""`edgerun quantize --keep-float auto:X%` against a greedy search for the
same budget: does the ranked prefix keep more tensors wide than it needs?

For each (model, type, budget): edgerun's own search runs once (ranking by
measured weighted error, then doubling and bisection over prefixes; its
report lists the tensors it kept). The greedy search is forward selection
done from outside with the same evaluator: start with every candidate at
its planned type; at each step widen (keep at F16, the source type) the
one candidate whose widening gives the lowest perplexity; stop when the
budget holds. Both measure perplexity on the same held-out half of GPL-3
(ctx 128, 4 chunks). Greedy costs (candidates x steps) evaluations, so the
models are the small test models (random weights; their perplexities are
near the vocabulary size and measure output perturbation only).

Writes bench/REPORT-llm-budget.md (or --report).

    bench/llm_budget_bench.py [--threads 2]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EDGERUN = os.path.join(ROOT, "build", "edgerun")
MODELS = os.path.join(ROOT, ".cache", "llm-models")
TEXT = "/usr/share/common-licenses/GPL-3"
CTX, CHUNKS = "128", "4"


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p.stdout


def ppl(model, held, threads):
    return json.loads(sh([EDGERUN, "eval", model, "--text", held, "--ctx", CTX, "--chunks", CHUNKS, "--json",
                          "--threads", str(threads)]))["ppl"]


def quantize(src, out, qtype, keep, threads, extra=()):
    cmd = [EDGERUN, "quantize", src, "-o", out, "--type", qtype, "--threads", str(threads), "--quiet", *extra]
    if keep:
        cmd += ["--keep", ",".join(sorted(keep))]
    sh(cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--report", default=os.path.join(HERE, "REPORT-llm-budget.md"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="er-budget-")
    text = open(TEXT, encoding="utf-8").read()
    cut = text.index("\n\n", len(text) // 2)
    held = os.path.join(tmp, "held.txt")
    open(held, "w").write(text[cut:])
    rows = []
    for model, qtype, frac in (("llama-tiny-f16", "Q4_0", 0.3), ("llama-tiny-f16", "Q4_0", 0.6),
                               ("qwen2-tiny-f16", "Q4_0", 0.5)):
        src = os.path.join(MODELS, model + ".gguf")
        base = ppl(src, held, a.threads)
        plain = os.path.join(tmp, "plain.gguf")
        quantize(src, plain, qtype, [], a.threads, ["--report", os.path.join(tmp, "plain")])
        rep = json.load(open(os.path.join(tmp, "plain.json")))
        # Candidates as edgerun's budget sees them: tensors the mix narrows
        # below the wide type (F16 here, which is also the source type).
        cands = [t["name"] for t in rep["tensors"] if t["type"] != t["from"] and len(t["shape"]) == 2
                 and t["type"] not in ("F16", "F32", "BF16")]
        p_plain = ppl(plain, held, a.threads)
        # The budget: a fraction of the way from the plain rise back to 0.
        budget = (p_plain / base - 1) * (1 - frac)
        t0 = time.time()
        auto = os.path.join(tmp, "auto.gguf")
        quantize(src, auto, qtype, [], a.threads, ["--keep-float", f"auto:{budget}", "--keep-type", "F16",
                                                   "--eval-text", held, "--eval-ctx", CTX, "--eval-chunks", CHUNKS,
                                                   "--report", os.path.join(tmp, "auto")])
        t_auto = time.time() - t0
        arep = json.load(open(os.path.join(tmp, "auto.json")))
        auto_kept = sorted(t["name"] for t in arep["tensors"] if t["kept_wide"])
        auto_ppl = arep["budget"]["ppl_out"]
        # Greedy forward selection.
        t0 = time.time()
        kept, cur, evals, trial = [], p_plain, 0, os.path.join(tmp, "trial.gguf")
        while cur > base * (1 + budget) and len(kept) < len(cands):
            best = None
            for c in cands:
                if c in kept:
                    continue
                quantize(src, trial, qtype, kept + [c], a.threads)
                p = ppl(trial, held, a.threads)
                evals += 1
                if best is None or p < best[1]:
                    best = (c, p)
            kept.append(best[0])
            cur = best[1]
        t_greedy = time.time() - t0
        rows.append(dict(model=model, type=qtype, base=base, plain=p_plain, budget=budget, cands=len(cands),
                         auto_n=len(auto_kept), auto_ppl=auto_ppl, auto_trials=len(arep["budget"]["trials"]),
                         auto_s=t_auto, auto_kept=auto_kept, greedy_n=len(kept), greedy_ppl=cur, greedy_evals=evals,
                         greedy_s=t_greedy, greedy_kept=kept))
        print(json.dumps(rows[-1]), flush=True)
    with open(a.report, "w") as f:
        f.write("# `--keep-float auto:` against a greedy search\n\n")
        f.write(f"Written by `bench/llm_budget_bench.py` on {platform.processor() or platform.machine()}, "
                f"{os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}, threads {a.threads}. Perplexity on the second "
                f"half of GPL-3 at ctx {CTX}, {CHUNKS} chunks; wide = F16 (the source type). Greedy = forward "
                "selection, one evaluation per remaining candidate per step (see the script).\n\n")
        f.write("| model | type | f16 PPL | plain PPL | budget | candidates | edgerun wide | edgerun PPL | "
                "edgerun trials | greedy wide | greedy PPL | greedy evaluations |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['model']} | {r['type']} | {r['base']:.1f} | {r['plain']:.1f} | +{100 * r['budget']:.2f}% "
                    f"| {r['cands']} | {r['auto_n']} | {r['auto_ppl']:.1f} | {r['auto_trials']} ({r['auto_s']:.0f} s) "
                    f"| {r['greedy_n']} | {r['greedy_ppl']:.1f} | {r['greedy_evals']} ({r['greedy_s']:.0f} s) |\n")
        f.write("\nTensors kept wide:\n\n")
        for r in rows:
            f.write(f"- {r['model']} {r['type']} +{100 * r['budget']:.2f}%: edgerun {', '.join(r['auto_kept'])}; "
                    f"greedy {', '.join(r['greedy_kept'])}\n")
    print(f"wrote {a.report}")


if __name__ == "__main__":
    main()
