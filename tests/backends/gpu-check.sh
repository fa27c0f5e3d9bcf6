#!/usr/bin/env bash
# Runs the CUDA backend's checks on a machine with an NVIDIA GPU: builds
# with the GPU's own architecture, runs every op case on CUDA against the CPU
# reference, then the CNNs with --no-fallback and inspect's placement.
# Usage: tests/backends/gpu-check.sh [BUILD_DIR]   (from the repository root)
set -euo pipefail
BUILD=${1:-build-gpu}
SHARED=${EDGERUN_SHARED:-../shared}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=native >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target edgerun test-backend-ops
"$BUILD"/edgerun devices --require cuda
"$BUILD"/tests/backends/test-backend-ops --backend cuda
if [ -d "$SHARED/conformance/light" ]; then
  "$BUILD"/edgerun conform --backend cuda --no-fallback "$SHARED"/models/mnist-8 "$SHARED"/conformance/light
  "$BUILD"/edgerun inspect "$SHARED"/conformance/light/test_resnet50/model.onnx --backend cuda | tail -4
  "$BUILD"/edgerun bench "$SHARED"/conformance/light/test_resnet50/model.onnx --backend cuda --compare cpu --runs 10
fi
echo "gpu-check: ok"
