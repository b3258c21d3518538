# soapflow - two commands on a fresh Debian machine:
#   make run    install what is missing, build, run the default job
#   make test   install what is missing, build, run the whole test suite
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps configure build run test asan fuzz-deps fuzz-build fuzz clean format

all: build

deps:
	@bash scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Measure this host as 2 MPI ranks, plan lenet5 for them, train it with the plan
# (scripts/run.sh).
run: build
	@bash scripts/run.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer, warnings as errors.
asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSF_SANITIZE=ON -DSF_WERROR=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

# Fuzzing (fuzz/README.md): the libFuzzer harnesses of every file reader, built
# with clang into build-fuzz/, then each run in turn for FUZZ_SECONDS (one at a
# time: FUZZ_SECONDS=600 is 10 minutes per harness). Fails on any finding.
FUZZ_SECONDS ?= 600
fuzz-deps:
	@bash scripts/deps.sh --fuzz

fuzz-build: fuzz-deps
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DSF_FUZZ=ON -DSF_WERROR=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS)

fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh build-fuzz

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) build-asan build-fuzz
