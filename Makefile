# Thin wrapper over CMake. The two commands a new user needs:
#   make run    build, then run the main job on the best device present
#   make test   build, then run every test (ctest, then the Python package's pytest suite)
# Both install missing Debian packages first (as root) or say how.
BUILD ?= build
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local

.PHONY: all deps configure build run test python-test install asan clang clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

run: build
	$(BUILD)/kernelkit

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)
	@bash scripts/python-test.sh $(BUILD)

# The Python package's tests alone (after a build), against $(BUILD)/libkernelkit.so:
# a virtualenv $(BUILD)/pyenv with numpy, ml_dtypes and pytest (KERNELKIT_TEST_PYTHON
# picks another interpreter). See docs/python.md.
python-test: build
	@bash scripts/python-test.sh $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# AddressSanitizer + UndefinedBehaviorSanitizer build running the unit tests.
# CUDA stays off here: the sanitizers instrument host C code only.
asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKK_SANITIZE=ON -DKK_CUDA=OFF \
		-DKK_BUILD_EXAMPLES=OFF >/dev/null
	@cmake --build build-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --test-dir build-asan -L unit --output-on-failure -j$(JOBS)

# The host code must also build cleanly with clang.
clang: deps
	@cmake -S . -B build-clang -DCMAKE_C_COMPILER=clang -DKK_CUDA=OFF >/dev/null
	@cmake --build build-clang -j$(JOBS)
	ctest --test-dir build-clang -L unit --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD) build-asan build-clang
