# smelt: two entry points, `make demo` and `make test`. Both install missing
# Debian packages (needs root or sudo), configure and build into ./build.
# CMAKE_ARGS adds configure options (e.g. CMAKE_ARGS=-DSMELT_WERROR=ON, as CI does).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
DEB_PACKAGES := cmake g++ make ccache libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev \
                libdnnl-dev libfmt-dev nlohmann-json3-dev libcli11-dev libomp-dev \
                libicu-dev libsleef-dev python3-pip
# Only `make test` needs these: the second-compiler check (Clang, under Ninja)
# and the check of the installed package (pkg-config).
TEST_DEB_PACKAGES := clang ninja-build pkg-config
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# $(call install_missing,packages): apt-get installs those not installed yet.
define install_missing
missing=""; for p in $(1); do \
  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
done; \
if [ -n "$$missing" ]; then \
  echo "installing:$$missing"; \
  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
fi
endef

.PHONY: deps test-deps configure build demo test clean

deps:
	@$(call install_missing,$(DEB_PACKAGES))

test-deps: deps
	@$(call install_missing,$(TEST_DEB_PACKAGES))

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(TEST_CMAKE_ARGS) $(CMAKE_ARGS) > /dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/smelt demo

# `make test` compiles the CUDA kernels (when the toolkit is there) for one GPU
# architecture only: this machine's GPU, or sm_90's PTX where there is none (no
# SASS to assemble: the cheapest build that still compiles every kernel). The
# default set (SMELT_CUDA_ARCHITECTURES: sm_80 + sm_90 + PTX) costs several times
# the nvcc time.
TEST_CUDA_ARCHITECTURES ?= $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader \
  2>/dev/null | head -n 1 | tr -d '. ' | sed 's/$$/-real/' | grep . || echo 90-virtual)
test: TEST_CMAKE_ARGS := -DSMELT_CHECK_CXX=clang++ -DSMELT_CUDA_ARCHITECTURES=$(TEST_CUDA_ARCHITECTURES)
test: test-deps build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
