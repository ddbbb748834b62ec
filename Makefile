# The two commands of the README:
#   make serve   installs what is missing, builds, and serves the embedded default model
#   make test    installs what is missing (test tools too), builds, and runs every test suite
# Other targets: build, asan, fuzz, bench, format, clean.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
GENERATOR  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CMAKE_ARGS ?=
SERVE_ARGS ?=

.PHONY: all setup setup-test configure build serve test unit-tests asan fuzz format clean

all: build

setup:
	@scripts/setup.sh

setup-test:
	@scripts/setup.sh --test

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: setup configure
	cmake --build $(BUILD) -j $(JOBS)

# The default model is the first directory under models/ with a config.json (the trained tiny model once it is
# committed); until then a random-weight model is generated into the build directory and served, with the
# default model's trained tokenizer when it is already there (else the tiny test tokenizer) and the MiniMax chat
# template.
SERVE_MODEL ?= $(firstword $(patsubst %/config.json,%,$(wildcard models/*/config.json)))
RANDOM_MODEL := $(BUILD)/random-model
RANDOM_TOKENIZER := $(firstword $(wildcard models/default/tokenizer.json) tests/tokenizer/data/tiny_tokenizer.json)

serve: build
ifeq ($(SERVE_MODEL),)
	@test -f $(RANDOM_MODEL)/config.json || $(BUILD)/msa random-model --out $(RANDOM_MODEL) \
	    --tokenizer $(RANDOM_TOKENIZER) --chat-template tools/chat/templates/minimax_m3.jinja
	$(BUILD)/msa serve --model $(RANDOM_MODEL) --served-model-name random-minimax-m3 \
	    --reasoning-parser minimax_m3 --tool-call-parser minimax_m3 --kv-cache-gib 0.25 $(SERVE_ARGS)
else
	$(BUILD)/msa serve --model $(SERVE_MODEL) --reasoning-parser minimax_m3 --tool-call-parser minimax_m3 $(SERVE_ARGS)
endif

# Everything: the release build with all suites, then the unit suites again under ASan+UBSan.
test: setup-test configure
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory asan

asan:
	@test -f $(ASAN_BUILD)/CMakeCache.txt || cmake -S . -B $(ASAN_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DMSA_SANITIZE=ON -DMSA_CUDA=OFF -DMSA_BUILD_BENCH=OFF -DMSA_UNIT_TESTS_ONLY=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --test-dir $(ASAN_BUILD) -L unit --output-on-failure -j $(JOBS)

# Real libFuzzer binaries (clang); run one with e.g. build-fuzz/fuzz_safetensors_header fuzz/corpus/fuzz_safetensors_header
fuzz: setup-test
	@test -f $(FUZZ_BUILD)/CMakeCache.txt || CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) $(GENERATOR) \
	    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMSA_LIBFUZZER=ON -DMSA_CUDA=OFF -DMSA_BUILD_BENCH=OFF -DMSA_WERROR=OFF -DMSA_PCH=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

format:
	find src tests bench fuzz -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
