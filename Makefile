# The README's two commands. Both install what is missing (Debian packages), configure and build.
#   make demo   heavy hitters with and without failures on the embedded local cluster
#   make check  the whole test suite (what CI runs)
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: deps build demo check format bench
deps:
	bash .ci/install-deps

build: deps
	cmake --preset default >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	bash experiments/demo.sh $(BUILD)/afstream/cli/afstream

check: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 600

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

bench: build
	bash experiments/bench/run_all.sh $(BUILD)
