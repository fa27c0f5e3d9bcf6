#!/usr/bin/env bash
# Builds llama.cpp (the LLM engine's speed and output oracle) from the
# source that the llama-cpp-python package on the Python package index
# carries (vendor/llama.cpp, MIT), into .cache/llama.cpp-build/bin:
# llama-bench, llama-cli, llama-simple, llama-perplexity, llama-quantize, llama-imatrix,
# llama-tokenize, llama-server. About 15 minutes on 2 cores, so it is not
# part of `make test`; bench/llm_compare.py and `make llama-cpp` builds it.
# Safe to run again: it only builds what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
LCPP_VERSION=0.3.36
SRC=.cache/llama.cpp-src
BUILD=.cache/llama.cpp-build
if [ ! -f "$SRC/.complete-$LCPP_VERSION" ]; then
  if [ ! -f .cache/sdist/llama_cpp_python-$LCPP_VERSION.tar.gz ]; then
    .venv/bin/python scripts/fetch_sdist.py llama-cpp-python "$LCPP_VERSION" .cache/sdist >/dev/null ||
      .venv/bin/pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
        "llama-cpp-python==$LCPP_VERSION" -d .cache/sdist
  fi
  rm -rf "$SRC" .cache/sdist/llama_cpp_python-$LCPP_VERSION
  tar -xzf .cache/sdist/llama_cpp_python-$LCPP_VERSION.tar.gz -C .cache/sdist \
    llama_cpp_python-$LCPP_VERSION/vendor/llama.cpp
  mv .cache/sdist/llama_cpp_python-$LCPP_VERSION/vendor/llama.cpp "$SRC"
  rm -rf .cache/sdist/llama_cpp_python-$LCPP_VERSION
  touch "$SRC/.complete-$LCPP_VERSION"
fi
TOOLS="llama-bench llama-cli llama-simple llama-perplexity llama-quantize llama-imatrix llama-tokenize llama-server"
missing=0
for t in $TOOLS; do [ -x "$BUILD/bin/$t" ] || missing=1; done
if [ "$missing" = 1 ]; then
  # The default build for this CPU (GGML_NATIVE, OpenMP when present), as a
  # user building llama.cpp gets it; no network features.
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON >/dev/null
  cmake --build "$BUILD" -j "$(nproc)" --target $TOOLS >/dev/null
fi
echo "llama.cpp: $BUILD/bin ($(ls "$BUILD/bin" | tr '\n' ' '))"
