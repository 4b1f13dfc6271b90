# Convenience targets; CMake is the build system.
#   make run     install what is missing, build, run the main job on the bundled default
#   make test    install what is missing, build, run every suite
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)

.PHONY: all deps configure build run test lit unit format fuzz clean

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

clean:
	rm -rf $(BUILD)
