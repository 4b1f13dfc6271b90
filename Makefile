# Convenience targets; CMake is the build system.
#   make run     install what is missing, build, run the main job on the bundled default
#   make test    install what is missing, build, run every suite
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)

.PHONY: all deps configure build run test lit unit format docs clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	scripts/run-default.sh $(BUILD)

unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

lit: build
	cmake --build $(BUILD) --target check-txc-lit

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	cmake --build $(BUILD) --target check-txc-lit

format:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

# Regenerates the dialect and pass reference in docs/ from the .td files.
docs: build
	cmake --build $(BUILD) --target mlir-doc
	mkdir -p docs/dialects docs/passes
	cp $(BUILD)/docs/tx/TxDialect.md docs/dialects/tx.md
	cp $(BUILD)/docs/passes/TxcPasses.md docs/passes/passes.md
	@if [ -f $(BUILD)/docs/txk/TxkDialect.md ]; then cp $(BUILD)/docs/txk/TxkDialect.md docs/dialects/txk.md; fi

clean:
	rm -rf $(BUILD)

# libFuzzer runs of the safetensors, shard-index and config.json parsers,
# FUZZ_SECONDS each (needs clang with libFuzzer: apt install clang).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	@scripts/install-deps.sh --fuzz
	cmake -S fuzz -B $(FUZZ_BUILD) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	fuzz/run-fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)
