#!/usr/bin/env python3
"""Checks edgerun's tokenizers (through tests/llm/tok-dump) against

 1. llama.cpp's test vectors: ggml-vocab-NAME.gguf.inp / .out, the ids
    Hugging Face's own tokenizer for that model gave (convert_hf_to_gguf_
    update.py writes them with encode(add_special_tokens=False)), exactly;
 2. Hugging Face `tokenizers`, built from the same GGUF by transformers'
    convert_gguf_tokenizer, on tests/llm/data/tokenizer-texts.txt (and the
    .inp texts): ids exactly, decode exactly, and decode(encode(t)) == t
    wherever Hugging Face round-trips too;
 3. the same Hugging Face tokenizer saved as tokenizer.json and read back
    by edgerun's tokenizer.json reader: ids exactly.

Where transformers' GGUF converter does not rebuild a model's tokenizer as
that model's own tokenizer.json has it, the oracle is corrected to the
tokenizer.json (each case is in ORACLE_FIXES with the reason), and the
llama.cpp vectors, which came from the real tokenizer.json, confirm it.

Exit status 0 when everything matches; the last line is "N passed, N failed".
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import gguf  # noqa: E402
from tokenizers import Regex, decoders, normalizers, pre_tokenizers  # noqa: E402
from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer  # noqa: E402

SEP = "\n__ggml_vocab_test__\n"

# llama.cpp vocabularies edgerun claims. "hf": also compared with the
# Hugging Face oracle (mpt is not: its tokenizer.json has added tokens made
# of spaces, "  " .. "                        ", that transformers' GGUF
# converter drops because a space is not a byte-level character, so that
# oracle splits whitespace runs differently from the model's own tokenizer
# and from llama.cpp; edgerun follows the model, as the vectors show).
VOCABS = {
    "gpt-2": {"hf": True},
    "qwen2": {"hf": True},
    "qwen35": {"hf": True},
    "llama-bpe": {"hf": True},
    "llama-spm": {"hf": True},
    "phi-3": {"hf": True},
    "starcoder": {"hf": True},
    "refact": {"hf": True},
    "command-r": {"hf": True},
    "deepseek-coder": {"hf": True},
    "deepseek-llm": {"hf": True},
    "mpt": {"hf": False},
    "falcon": {"hf": True},
}

GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
DEEPSEEK_CJK = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"
DEEPSEEK_LLM_LETTERS = (
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"
    "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"
    "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA"
    "\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45"
    "\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-"
    "\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107"
    "\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F"
    "\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D"
    "\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17"
    "\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB"
    "\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+"
)


def split_chain(patterns):
    return pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in patterns]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def digits_then_bytelevel():
    # StarCoder / SmolLM2 / Command-R tokenizer.json: every digit alone,
    # then GPT-2's ByteLevel split.
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])


def fix_llama3(tok):
    # Llama 3's tokenizer.json sets ignore_merges (a piece that is a whole
    # token is used as it is); the converter builds a plain BPE.
    tok.model.ignore_merges = True


def fix_spm_legacy(tok):
    # Llama 2's tokenizer.json (and sentencepiece, and llama.cpp) put U+2581
    # in front of every text segment with a Prepend normalizer: " Hello" is
    # "\u2581\u2581Hello". transformers' LlamaTokenizer uses Metaspace(prepend_scheme="first"), which
    # skips the prefix when the text already starts with a space and after
    # added tokens; the vectors (" " -> 259 "\u2581\u2581") show the model's own.
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])


# pre name -> how the oracle is corrected (see the module docstring).
ORACLE_FIXES = {
    "smollm": lambda t: setattr(t, "pre_tokenizer", digits_then_bytelevel()),
    "starcoder": lambda t: setattr(t, "pre_tokenizer", digits_then_bytelevel()),
    "refact": lambda t: setattr(t, "pre_tokenizer", digits_then_bytelevel()),
    "command-r": lambda t: setattr(t, "pre_tokenizer", digits_then_bytelevel()),
    "deepseek-coder": lambda t: setattr(t, "pre_tokenizer", split_chain(
        ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", DEEPSEEK_CJK, r"\p{N}"])),
    "deepseek-llm": lambda t: setattr(t, "pre_tokenizer", split_chain(
        ["[\r\n]", DEEPSEEK_LLM_LETTERS, "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
         r"\s+$", DEEPSEEK_CJK, r"\p{N}+"])),
    # Falcon's tokenizer.json: Punctuation, ByteLevel, Digits, then runs of
    # three digits.
    "falcon": lambda t: setattr(t, "pre_tokenizer", pre_tokenizers.Sequence([
        pre_tokenizers.Punctuation(behavior="contiguous"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), behavior="isolated")])),
    "llama-bpe": fix_llama3,
    "llama3": fix_llama3,
}


def gguf_tokenizer_dict(path):
    """The dict transformers' get_gguf_tokenizer builds, read with the gguf
    package (get_gguf_tokenizer itself imports torch)."""
    r = gguf.GGUFReader(path)

    def strs(k):
        f = r.fields[k]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def nums(k):
        f = r.fields[k]
        return [f.parts[i][0].item() for i in f.data]

    def scalar(k):
        f = r.fields.get(k)
        return None if f is None else f.contents()

    d = {"tokenizer_type": scalar("tokenizer.ggml.model"), "tokens": strs("tokenizer.ggml.tokens")}
    if scalar("tokenizer.ggml.pre") is not None:
        d["pre_tokenizer_type"] = scalar("tokenizer.ggml.pre")
    if "tokenizer.ggml.scores" in r.fields:
        d["scores"] = nums("tokenizer.ggml.scores")
    if "tokenizer.ggml.token_type" in r.fields:
        d["token_type"] = nums("tokenizer.ggml.token_type")
    if "tokenizer.ggml.merges" in r.fields:
        d["merges"] = strs("tokenizer.ggml.merges")
    for key, name in [("bos_token_id", "bos_token_id"), ("eos_token_id", "eos_token_id"),
                      ("unknown_token_id", "unk_token_id"), ("padding_token_id", "pad_token_id")]:
        v = scalar("tokenizer.ggml." + key)
        if v is not None:
            d[name] = v
    v = scalar("tokenizer.ggml.add_space_prefix")
    if v is not None:
        d["add_prefix_space"] = v
    return scalar("general.architecture"), d


def build_oracle(path, name):
    arch, d = gguf_tokenizer_dict(path)
    tok, _ = convert_gguf_tokenizer(arch, d)
    if d["tokenizer_type"] == "llama":
        fix_spm_legacy(tok)
    fix = ORACLE_FIXES.get(name) or ORACLE_FIXES.get(d.get("pre_tokenizer_type"))
    if fix:
        fix(tok)
    return tok


def records(texts):
    out = bytearray()
    for t in texts:
        b = t.encode("utf-8")
        out += b"%d\n" % len(b) + b + b"\n"
    return bytes(out)


def run_dump(dump, model, texts, tmp):
    inp = os.path.join(tmp, "texts.bin")
    with open(inp, "wb") as f:
        f.write(records(texts))
    p = subprocess.run([dump, model, inp], capture_output=True)
    if p.returncode != 0:
        raise RuntimeError("tok-dump %s failed: %s" % (model, p.stderr.decode("utf-8", "replace")))
    lines = p.stdout.decode("utf-8").split("\n")
    res, i = [], 0
    while i < len(lines) and lines[i]:
        if lines[i].startswith("ids:"):
            ids = [int(x) for x in lines[i][4:].split()]
            dec = bytes.fromhex(lines[i + 1][5:].split(" ")[0]).decode("utf-8", "replace")
            res.append((ids, dec))
            i += 2
        else:
            res.append((None, lines[i]))
            i += 1
    if len(res) != len(texts):
        raise RuntimeError("tok-dump gave %d results for %d texts" % (len(res), len(texts)))
    return res


def read_sep(path):
    with open(path, encoding="utf-8", newline="") as f:
        raw = f.read()
    parts = raw.split(SEP)
    if parts and parts[-1] == "":
        parts = parts[:-1]
    return parts


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL", what)


def show(t, n=70):
    r = repr(t)
    return r if len(r) <= n else r[:n] + "..."


def check_vocab(args, tally, name, path, vectors, use_hf, texts, tmp):
    extra, want = [], []
    if vectors:
        extra = read_sep(path + ".inp")
        with open(path + ".out") as f:
            want = [[int(x) for x in line.split()] for line in f.read().split("\n")[:len(extra)]]
    all_texts = texts + extra
    got = run_dump(args.dump, path, all_texts, tmp)
    summary = [name]
    if vectors:
        bad = 0
        for t, w, (ids, _) in zip(extra, want, got[len(texts):]):
            if ids != w:
                bad += 1
                if bad <= 3:
                    print("  %s vector %s: llama.cpp %s, edgerun %s" % (name, show(t), w[:16], ids and ids[:16]))
        tally.check(bad == 0, "%s: %d of %d llama.cpp vectors differ" % (name, bad, len(extra)))
        summary.append("vectors %d/%d" % (len(extra) - bad, len(extra)))
    if not use_hf:
        print("  " + ", ".join(summary))
        return
    tok = build_oracle(path, name)
    n_vocab = len(gguf_tokenizer_dict(path)[1]["tokens"])
    bad_ids = bad_dec = bad_rt = hf_lossy = artifacts = 0
    for t, (ids, dec) in zip(all_texts, got):
        hf = tok.encode(t, add_special_tokens=False).ids
        if any(i >= n_vocab for i in hf):
            # transformers' GPT2Tokenizer adds its default "<|endoftext|>"
            # as a new token when the vocabulary lacks it (Llama 3,
            # DeepSeek): an id the model does not have, so no comparison.
            artifacts += 1
            continue
        if ids != hf:
            bad_ids += 1
            if bad_ids <= 3:
                print("  %s text %s: HF %s, edgerun %s" % (name, show(t), hf[:16], ids and ids[:16]))
            continue
        hf_dec = tok.decode(hf, skip_special_tokens=False)
        if dec != hf_dec:
            bad_dec += 1
            if bad_dec <= 3:
                print("  %s decode %s: HF %s, edgerun %s" % (name, show(t), show(hf_dec), show(dec)))
        if hf_dec != t:
            hf_lossy += 1
        elif dec != t:
            bad_rt += 1
    tally.check(bad_ids == 0, "%s: %d of %d texts tokenize differently from Hugging Face" % (name, bad_ids, len(all_texts)))
    tally.check(bad_dec == 0, "%s: %d decodes differ from Hugging Face's" % (name, bad_dec))
    tally.check(bad_rt == 0, "%s: %d texts do not round-trip where Hugging Face's do" % (name, bad_rt))
    compared = len(all_texts) - artifacts
    summary.append("HF ids %d/%d" % (compared - bad_ids, compared))
    summary.append("decode %d/%d" % (compared - bad_ids - bad_dec, compared - bad_ids))
    if artifacts:
        summary.append("%d texts skipped (the oracle gave an id past the vocabulary)" % artifacts)
    if hf_lossy:
        summary.append("%d texts HF itself does not round-trip" % hf_lossy)

    # The same tokenizer through tokenizer.json. Where the converter's
    # respelling made two tokens one (Command-R has raw "\u200d" beside its
    # byte-level spelling), the vocabulary it writes has ids without a token,
    # which edgerun's reader rejects as a missing token: no comparison.
    holes = n_vocab - len(set(tok.get_vocab(with_added_tokens=False).values()))
    if holes > 0:
        summary.append("tokenizer.json skipped (%d ids without a token in the oracle's vocabulary)" % holes)
        print("  " + ", ".join(summary))
        return
    jdir = os.path.join(tmp, name)
    os.makedirs(jdir, exist_ok=True)
    jpath = os.path.join(jdir, "tokenizer.json")
    tok.save(jpath)
    got_json = run_dump(args.dump, jpath, all_texts, tmp)
    bad_json = 0
    for t, (ids, _), (jids, _) in zip(all_texts, got, got_json):
        if jids != tok.encode(t, add_special_tokens=False).ids:
            bad_json += 1
            if bad_json <= 3:
                print("  %s tokenizer.json text %s: edgerun %s" % (name, show(t), jids and jids[:16]))
    tally.check(bad_json == 0, "%s: %d texts differ through tokenizer.json" % (name, bad_json))
    summary.append("tokenizer.json %d/%d" % (len(all_texts) - bad_json, len(all_texts)))
    print("  " + ", ".join(summary))


def bench(args, tally, model, texts, tmp):
    """Encoding time of 100 KB texts: English prose and code, and inputs
    that would expose a quadratic path (one long run of spaces, of digits,
    of CJK without spaces)."""
    prose = "\n".join(t for t in texts[:12] + texts[22:31])
    cases = {
        "english+code": (prose * (102400 // len(prose) + 1))[:102400],
        "spaces": " " * 102400,
        "digits": "7" * 102400,
        "cjk": ("我想在工作这是一个测试" * 4000)[:34000],
    }
    for what, text in cases.items():
        p = os.path.join(tmp, "bench.txt")
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        t0 = time.time()
        out = subprocess.run([args.dump, model, p, "bench"], capture_output=True, text=True)
        line = out.stdout.strip()
        ms = float(line.split(" in ")[1].split(" ms")[0]) if " in " in line else 1e9
        print("  bench %s %s: %s (%.1f s wall)" % (os.path.basename(model), what, line, time.time() - t0))
        # A generous bound: the point is to catch a quadratic path (seconds
        # to minutes), not to time a shared machine.
        tally.check(ms < args.bench_limit_ms, "%s %s: %.1f ms for 100 KB is over %d ms" % (
            os.path.basename(model), what, ms, args.bench_limit_ms))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--vocabs", required=True, help="llama.cpp's models/ folder")
    ap.add_argument("--smollm2", required=True)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--only", help="check only this vocabulary")
    ap.add_argument("--hf-only", help="compare only these vocabularies (comma-separated) with Hugging Face; "
                    "the rest with llama.cpp's vectors alone")
    ap.add_argument("--bench-limit-ms", type=int, default=2000)
    args = ap.parse_args()
    texts = read_sep(args.texts)
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="er-tok-") as tmp:
        todo = [("smollm2", args.smollm2, False, True)]
        for name, v in VOCABS.items():
            todo.append((name, os.path.join(args.vocabs, "ggml-vocab-%s.gguf" % name), True, v["hf"]))
        for name, path, vectors, use_hf in todo:
            if args.only and args.only != name:
                continue
            if not os.path.exists(path):
                tally.check(False, "%s: %s is missing (run scripts/setup.sh)" % (name, path))
                continue
            if args.hf_only is not None and name not in args.hf_only.split(","):
                use_hf = False
            t0 = time.time()
            try:
                check_vocab(args, tally, name, path, vectors, use_hf, texts, tmp)
            except Exception as e:  # a crash of the driver is a failure, not a skip
                tally.check(False, "%s: %s" % (name, e))
            print("  %s: %.1f s" % (name, time.time() - t0))
        if not args.only:
            bench(args, tally, args.smollm2, texts, tmp)
            bench(args, tally, os.path.join(args.vocabs, "ggml-vocab-llama-spm.gguf"), texts, tmp)
    print("%d passed, %d failed" % (tally.passed, tally.failed))
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
