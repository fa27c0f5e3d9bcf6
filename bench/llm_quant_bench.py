#!/usr/bin/env python3
"""edgerun quantize against llama.cpp's llama-quantize on the same float
models, in one run, with and without an importance matrix:

- the text is Debian's GPL-3 (/usr/share/common-licenses/GPL-3), split at a
  paragraph in the middle: the first half calibrates (edgerun --calib-text,
  llama-imatrix -f), the second half evaluates;
- every file, ours and llama.cpp's, is measured by the same evaluator
  (`edgerun eval --baseline F16`, llama-perplexity's chunking at ctx 512):
  perplexity rise over the f16 model, next-token greedy agreement, mean KL
  divergence; and its size;
- llama.cpp loads each file edgerun writes and generates 24 greedy tokens
  (llama-simple); edgerun generates from the same file; the report says
  how many tokens agree before the first difference.

Models: SmolLM2-135M-Instruct dequantized to f16 (its baseline is a
dequantized Q4_1, not the original bf16 weights), and the Qwen2 and Llama
test models (random weights: their perplexities are near the vocabulary
size, so their rises measure output perturbation, not language quality).
Writes bench/REPORT-llm-quant.md (or --report).

    bench/llm_quant_bench.py [--quick] [--threads 2]
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
sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))
from llm_assets import smollm2_path  # noqa: E402

EDGERUN = os.path.join(ROOT, "build", "edgerun")
LLAMA_BIN = os.path.join(ROOT, ".cache", "llama.cpp-build", "bin")
MODELS = os.path.join(ROOT, ".cache", "llm-models")
TEXT = "/usr/share/common-licenses/GPL-3"
PROMPT = "The GNU General Public License is"


def sh(cmd, timeout=1800):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p


def evaluate(model, base, held, threads):
    out = sh([EDGERUN, "eval", model, "--text", held, "--baseline", base, "--json", "--threads", str(threads)]).stdout
    return json.loads(out)


def llama_greedy(model, n):
    """llama-simple prints the prompt then the generated text; compare text."""
    p = sh([os.path.join(LLAMA_BIN, "llama-simple"), "-m", model, "-n", str(n), PROMPT])
    return p.stdout


def edgerun_text(model, n):
    return sh([EDGERUN, "generate", model, "--prompt", PROMPT, "-n", str(n), "--temp", "0"]).stdout


def common_prefix_words(a, b):
    wa, wb = a.split(), b.split()
    k = 0
    while k < min(len(wa), len(wb)) and wa[k] == wb[k]:
        k += 1
    return k, min(len(wa), len(wb))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="SmolLM2 only, three types")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--report", default=os.path.join(HERE, "REPORT-llm-quant.md"))
    a = ap.parse_args()
    T = a.threads
    tmp = tempfile.mkdtemp(prefix="er-qbench-")
    text = open(TEXT, encoding="utf-8").read()
    half = text.index("\n\n", len(text) // 2)
    calib, held = os.path.join(tmp, "calib.txt"), os.path.join(tmp, "eval.txt")
    open(calib, "w").write(text[:half])
    open(held, "w").write(text[half:])
    have_llama = all(os.access(os.path.join(LLAMA_BIN, t), os.X_OK)
                     for t in ("llama-quantize", "llama-imatrix", "llama-simple"))
    if not have_llama:
        print("llama.cpp is not built (make llama-cpp): edgerun's figures only", file=sys.stderr)

    sm16 = os.path.join(tmp, "smollm2-f16.gguf")
    sh([EDGERUN, "quantize", smollm2_path(), "-o", sm16, "--type", "F16", "--quiet"])
    models = [("SmolLM2-135M (f16 from Q4_1)", sm16)]
    if not a.quick:
        models += [("qwen2-tiny (random)", os.path.join(MODELS, "qwen2-tiny-f16.gguf")),
                   ("llama-tiny (random)", os.path.join(MODELS, "llama-tiny-f16.gguf"))]
    types = ["Q4_K_M", "Q4_0", "Q8_0"] if a.quick else ["Q4_0", "Q4_1", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"]
    rows = []
    t0 = time.time()
    for mname, f16 in models:
        base_ppl = None
        im_llama = os.path.join(tmp, os.path.basename(f16) + ".llama-imatrix.gguf")
        if have_llama:
            sh([os.path.join(LLAMA_BIN, "llama-imatrix"), "-m", f16, "-f", calib, "-o", im_llama, "-c", "512",
                "-t", str(T), "--no-ppl"])
        for ty in types:
            variants = [("edgerun", []), ("edgerun + imatrix", ["--calib-text", calib])]
            if have_llama:
                variants += [("llama.cpp", None), ("llama.cpp + imatrix", ["--imatrix", im_llama])]
            for vname, extra in variants:
                out = os.path.join(tmp, f"{os.path.basename(f16)}.{ty}.{vname.replace(' ', '').replace('+', '-')}.gguf")
                ts = time.time()
                if vname.startswith("edgerun"):
                    sh([EDGERUN, "quantize", f16, "-o", out, "--type", ty, "--threads", str(T), "--quiet", *extra])
                else:
                    args = [os.path.join(LLAMA_BIN, "llama-quantize")]
                    if extra:
                        args += extra
                    sh(args + [f16, out, ty, str(T)])
                secs = time.time() - ts
                e = evaluate(out, f16, held, T)
                base_ppl = e["baseline_ppl"]
                row = {"model": mname, "type": ty, "tool": vname, "bytes": os.path.getsize(out),
                       "ppl": e["ppl"], "rise": e["ppl_rise"], "agree": e["top1_agreement"], "kld": e["mean_kld"],
                       "seconds": secs, "base_ppl": base_ppl}
                if have_llama and vname.startswith("edgerun") and mname.startswith("SmolLM2"):
                    try:
                        k, n = common_prefix_words(llama_greedy(out, 24), edgerun_text(out, 24))
                        row["greedy"] = f"{k}/{n} words"
                    except RuntimeError as err:
                        row["greedy"] = f"llama.cpp failed: {str(err)[-80:]}"
                rows.append(row)
                print(json.dumps(row), flush=True)

    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    with open(a.report, "w") as f:
        f.write("# LLM quantization: edgerun against llama-quantize\n\n")
        f.write(f"Written by `bench/llm_quant_bench.py{' --quick' if a.quick else ''}` on {cpu}, "
                f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, {T} threads, "
                f"{time.strftime('%Y-%m-%d')}; {time.time() - t0:.0f} s.\n\n")
        f.write("Text: Debian's GPL-3 (`/usr/share/common-licenses/GPL-3`), split at the paragraph nearest its "
                "middle: the first half calibrates (`edgerun quantize --calib-text`, `llama-imatrix -f -c 512`), "
                "the second half evaluates. Every file is measured by `edgerun eval FILE --baseline F16 --text "
                "second-half` (llama-perplexity's chunking: chunks of 512, second half of each scored): the "
                "perplexity rise over the f16 model, the next-token greedy agreement and the mean KL divergence "
                "per scored position. SmolLM2's f16 model is its Q4_1 release dequantized, so its baseline is a "
                "dequantized Q4_1, not the original weights. The tiny models have random weights.\n\n")
        if not have_llama:
            f.write("llama.cpp was not built for this run (`make llama-cpp`): edgerun's rows only.\n\n")
        for mname, _ in models:
            sub = [r for r in rows if r["model"] == mname]
            if not sub:
                continue
            f.write(f"## {mname}: f16 perplexity {sub[0]['base_ppl']:.4f}\n\n")
            f.write("| type | tool | size (bytes) | PPL | rise | greedy agreement | mean KLD | quantize s | "
                    "llama.cpp greedy text vs edgerun's (same file) |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n")
            for r in sub:
                f.write(f"| {r['type']} | {r['tool']} | {r['bytes']} | {r['ppl']:.4f} | {100 * r['rise']:+.2f}% | "
                        f"{100 * r['agree']:.2f}% | {r['kld']:.5f} | {r['seconds']:.1f} | {r.get('greedy', '')} |\n")
            f.write("\n")
            if have_llama:
                f.write("edgerun / llama.cpp at each type (rise difference in points; size ratio):\n\n")
                for ty in types:
                    for imx in ("", " + imatrix"):
                        e = next((r for r in sub if r["type"] == ty and r["tool"] == "edgerun" + imx), None)
                        l = next((r for r in sub if r["type"] == ty and r["tool"] == "llama.cpp" + imx), None)
                        if e and l:
                            f.write(f"- {ty}{imx}: rise {100 * e['rise']:+.2f}% vs {100 * l['rise']:+.2f}% "
                                    f"({100 * (e['rise'] - l['rise']):+.2f} points), size {e['bytes'] / l['bytes']:.4f}\n")
                f.write("\n")
    print(f"wrote {a.report}")


if __name__ == "__main__":
    main()
