# Convenience wrapper around CMake. `make build` leaves the CLI at build/edgerun.
.PHONY: build check test asan fuzz setup clean demo serve-demo

JOBS ?= $(shell nproc)

setup:
	scripts/setup.sh

build:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j $(JOBS)

# The whole suite: release build, the same suite under ASan+UBSan, and a
# short libFuzzer run of each fuzz target.
test: check asan fuzz

check: setup build
	cd build && ctest --output-on-failure -j $(JOBS)

# -O1 keeps the sanitizer run of the real CNNs to minutes, not tens.
asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DER_SANITIZE=ON >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

fuzz: setup
	fuzz/run.sh 20

# The main job on the bundled model: one inference from the command line,
# then the same model served on loopback, asked once, and drained.
demo: setup build
	build/edgerun run models/digits/model.onnx --input input=models/digits/sample.npy
	scripts/serve-demo.sh

# Starts the inference service on the bundled model, sends one request, stops it.
serve-demo: setup build
	scripts/serve-demo.sh

clean:
	rm -rf build build-asan
