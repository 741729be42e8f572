# smelt: two entry points, `make demo` and `make test`. Both install missing
# Debian packages (needs root or sudo), configure and build into ./build.
BUILD ?= build
JOBS ?= $(shell nproc)
DEB_PACKAGES := cmake g++ make libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev \
                libdnnl-dev libfmt-dev nlohmann-json3-dev libcli11-dev libomp-dev \
                libicu-dev python3-pip
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps configure build demo test clean

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release > /dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/smelt demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
