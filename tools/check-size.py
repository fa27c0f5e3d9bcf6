#!/usr/bin/env python3
"""check-size.py - the size rule of CONTRIBUTING.md, checked.

  * no source file (C, CUDA, OpenCL, Python) tracked under src/, include/,
    tests/, fuzz/, bench/ and tools/ has more than MAX_FILE_LINES lines,
    except generated tables (GENERATED below);
  * no C function has a body of more than MAX_FUNCTION_LINES lines.

A function is a definition starting in column 0 and ending at the first
line that is a lone "}" (the style every file here follows; see
STYLE.md).

Usage: tools/check-size.py [--root DIR] [--list] [--self-test]
Exit status 0 when the tree obeys, 1 with one line per violation.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

MAX_FILE_LINES = 1200
MAX_FUNCTION_LINES = 150

# Tables written by a generator; the generator is checked instead.
GENERATED = {
    "src/llm/unicode-data.c",
    "src/llm/unicode-nfc.c",
}

DIRS = ("src/", "include/", "tests/", "fuzz/", "bench/", "tools/")
EXTS = (".c", ".h", ".cu", ".cl", ".py", ".inc")

SIG_START = re.compile(r"^[A-Za-z_][\w \t\*]*\b(\w+)\s*\(")


def code_of(line):
    """The line without a trailing /* ... */ or // comment, right-stripped."""
    line = re.sub(r"/\*.*?\*/\s*$", "", line)
    line = re.sub(r"//.*$", "", line)
    return line.rstrip()


def functions(lines):
    """(name, first line, line count) of each function definition."""
    i = 0
    while i < len(lines):
        line = lines[i]
        m = SIG_START.match(line)
        if not m or line.startswith(("typedef", "struct ", "enum ", "union ", "#", "return", "else")) or "=" in line.split("(")[0]:
            i += 1
            continue
        # The signature may span lines; it ends with "{" (a definition)
        # or ";" (a declaration).
        k = i
        while k < len(lines) and not code_of(lines[k]).endswith(("{", ";", "}")):
            k += 1
        if k >= len(lines) or not code_of(lines[k]).endswith("{"):
            i = k + 1
            continue
        j = k + 1
        while j < len(lines) and lines[j] != "}":
            j += 1
        yield m.group(1), i + 1, j - i + 1
        i = j + 1


def tracked(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if p.startswith(DIRS) and p.endswith(EXTS)]


def check(root, files):
    bad = []
    for rel in files:
        if rel in GENERATED:
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        n = len(lines) - (1 if lines and lines[-1] == "" else 0)
        if n > MAX_FILE_LINES:
            bad.append(f"{rel}: {n} lines; at most {MAX_FILE_LINES} (split it by family, see CONTRIBUTING.md)")
        if rel.endswith((".c", ".h", ".cu")):
            for name, first, count in functions(lines):
                if count > MAX_FUNCTION_LINES:
                    bad.append(f"{rel}:{first}: function {name} has {count} lines; at most {MAX_FUNCTION_LINES}")
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "src"))
        body = "\n".join("  x++;" for _ in range(MAX_FUNCTION_LINES))
        with open(os.path.join(d, "src", "long.c"), "w") as f:
            f.write("static int f(int x) {\n" + body + "\n  return x;\n}\n")
        with open(os.path.join(d, "src", "short.c"), "w") as f:
            f.write("static int g(int x,\n             int y) {\n  return x + y;\n}\n")
        with open(os.path.join(d, "src", "proto.h"), "w") as f:
            # A prototype with a trailing comment, then a long struct: not a function.
            f.write("double h(int x);  /* dB */\n\ntypedef struct s {\n" + "  int a;\n" * (MAX_FUNCTION_LINES + 5) +
                    "} s;\n")
        with open(os.path.join(d, "src", "big.py"), "w") as f:
            f.write("x = 1\n" * (MAX_FILE_LINES + 1))
        bad = check(d, ["src/long.c", "src/short.c", "src/proto.h", "src/big.py"])
        want = ["src/long.c:1: function f", "src/big.py: "]
        ok = len(bad) == 2 and all(any(b.startswith(w) for b in bad) for w in want)
        print("check-size self-test:", "ok" if ok else "FAILED: " + "; ".join(bad))
        return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    bad = check(args.root, tracked(args.root))
    for b in bad:
        print(b)
    if bad:
        print(f"check-size: {len(bad)} violation(s)")
        return 1
    print(f"check-size: every file within {MAX_FILE_LINES} lines, every function within {MAX_FUNCTION_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
