#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# SECONDS (default 20) from its seed corpus in fuzz/corpus/<target>. Crashes
# are written to fuzz/crashes/; copy a fixed one into the corpus as a seed.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-20}
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DER_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz-reader fuzz-load fuzz-kserve fuzz-gguf fuzz-tokenizer fuzz-chat fuzz-onnxdec >/dev/null
mkdir -p fuzz/crashes
for t in reader load kserve gguf tokenizer chat onnxdec; do
  work=$(mktemp -d)
  cp fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  echo "fuzz-$t: ${SECONDS_EACH}s"
  build-fuzz/fuzz/fuzz-$t -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 \
    -artifact_prefix=fuzz/crashes/$t- -print_final_stats=0 "$work" 2>&1 | tail -2
  rm -rf "$work"
done
