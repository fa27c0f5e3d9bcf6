# Convenience wrapper around CMake. `make build` leaves the CLI at build/edgerun.
.PHONY: build test asan setup clean demo conform

JOBS ?= $(shell nproc)

setup:
	scripts/setup.sh

build:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j $(JOBS)

test: setup build
	cd build && ctest --output-on-failure -j $(JOBS)

asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DER_SANITIZE=ON >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

demo: setup build
	build/edgerun run models/digits/model.onnx --input input=models/digits/sample.npy

clean:
	rm -rf build build-asan
