# distrl: build, test and benchmark. `make deps` installs the system
# packages building and running need (libzmq for cgo, OpenBLAS) with apt-get
# when they are missing; `make deps-test` adds what the tests need (SLURM,
# Prometheus, Chromium), and `make test` and `make bench` call it.

SHELL        := /bin/bash
GO           ?= go
BIN          := bin
RLCTL        := $(BIN)/rlctl
# What running an experiment needs (`make deps`, and so `make build` and
# `make run`): libzmq for cgo, libopenblas-dev for package nn's matrix
# products (build with -tags noopenblas for gonum's pure Go), and for Python
# environments (package pyenv) python3-zmq and python3-msgpack;
# python3-numpy is optional for users, and the tests cover environments that
# return numpy arrays, as gymnasium's do.
APT_PACKAGES := libzmq3-dev libopenblas-dev pkg-config python3-zmq python3-msgpack python3-numpy
# What only the tests and benchmarks need (`make deps-test`, and so `make
# test` and `make bench`): slurmctld, slurmd, slurm-client and munge run a
# real multi-node SLURM cluster (scripts/slurmcluster.sh; as root, else
# those tests skip) in network namespaces (iproute2, util-linux); prometheus
# and chromium scrape real workers and render the dashboard headless.
TEST_APT_PACKAGES := slurmctld slurmd slurm-client munge iproute2 util-linux prometheus chromium
STATICCHECK_VERSION := v0.8.2
GOBIN        := $(shell $(GO) env GOPATH)/bin
TEST_TIMEOUT ?= 15m
BENCH_OUT    ?= $(BIN)/bench.txt

export CGO_ENABLED := 1

.PHONY: all deps deps-test deps-cuda build build-cuda bundle-gpu bundle-cpu bundle-sweep ptx vet-cuda test test-cudaemu vet lint unit bench bench-minatar bench-spread fuzz demo run clean

all: build

# apt_install installs those of the Debian packages $(1) that are missing,
# retrying once after `apt-get update`.
define apt_install
	@missing=""; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  apt="$$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -q"; \
	  echo "installing:$$missing"; \
	  $$apt install $$missing || { $$apt update && $$apt install $$missing; } || exit 1; \
	fi
endef

# What building and running need.
deps:
	$(call apt_install,$(APT_PACKAGES))
	@pkg-config --exists libzmq || { echo "libzmq not found by pkg-config"; exit 1; }

# What the tests and benchmarks need besides.
deps-test: deps
	$(call apt_install,$(TEST_APT_PACKAGES))

build: deps
	$(GO) build -o $(RLCTL) ./cmd/rlctl

# The GPU path (docs/gpu.md): CUDA 11.8's headers, libcuda and nvcc from
# Debian's non-free component (added to the apt sources where missing).
deps-cuda:
	scripts/deps-cuda.sh

# bin/rlctl-cuda: rlctl with policy workers on NVIDIA GPUs (build tag cuda).
# It runs only where a CUDA driver and device are; `rlctl start` finds it
# beside bin/rlctl for the workers whose config says device: cuda:N.
build-cuda: deps deps-cuda
	$(GO) build -tags cuda -o $(BIN)/rlctl-cuda ./cmd/rlctl

# bin/device: rlctl, rlctl-cuda, the GPU test binaries and libzmq, for a GPU
# machine without Go; there, scripts/gpu-check.sh runs every GPU test and
# benchmark (docs/gpu.md).
# device-bundle refuses bundles over 60 MiB, and OpenBLAS alone is 36 MiB:
# it and every library over 2 MB (libgfortran) are gzipped here (the
# scripts unpack them), and the size checked. rlctl is left out for room:
# gpu-check.sh links rlctl to rlctl-cuda, which runs the CPU workers too on
# a machine with a GPU. With nn's test binary (the C kernels' vector paths
# on the lent machine's CPU) it is 59 MiB, and with the working tree about
# 62 of the 64 the device takes: a further test binary needs room made first.
bundle-gpu: build-cuda
	$(call bundle,-tags cuda ./policy/cuda ./algo/ppo ./algo/dqn ./e2e ./trainerworker ./nn,rlctl.gz)

# bin/device for the CPU measurements of a many-core machine without Go
# (scripts/cpu-scale.sh: the pipeline from 1 to 14 actors, learning, the
# kernels, policy workers and the PPO update; docs/performance.md).
bundle-cpu: build
	$(call bundle,./e2e ./nn ./policyworker ./algo/ppo)

# rlctl alone, for scripts/minatar-sweep.sh on the device machine.
bundle-sweep: build
	$(call bundle,)

# bundle packs the packages $(1) with device-bundle, which refuses bundles
# over 60 MiB and OpenBLAS alone is 36 MiB: the files $(2) are dropped, the
# libraries it left are
# gzipped here and the size checked again (scripts/gpu-check.sh and
# scripts/cpu-scale.sh unpack them on the machine).
define bundle
	-../shared/tools/device-bundle $(1)
	@test -x bin/device/run || { echo "bundle: device-bundle failed"; exit 1; }
	@$(if $(2),cd bin/device && rm -f $(2))
	@for f in bin/device/lib/*; do case $$f in *.gz) ;; *) [ $$(stat -c %s $$f) -lt 2000000 ] || gzip -9f $$f ;; esac; done
	@size=$$(du -sm bin/device | cut -f1); echo "bin/device: $$size MiB"; [ $$size -le 60 ] || { echo "bundle: over 60 MiB"; exit 1; }
endef

# Regenerate the committed PTX of the CUDA kernels (needs nvcc: deps-cuda).
ptx:
	scripts/ptx.sh

# The CUDA code compiles and passes the checks (no GPU needed).
vet-cuda: deps-cuda $(GOBIN)/staticcheck
	$(GO) vet -tags cuda ./...
	$(GOBIN)/staticcheck -tags cuda ./...

vet:
	$(GO) vet ./...

$(GOBIN)/staticcheck:
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Also refuses tracked files over 1 MB (a committed binary once weighed 35 MB).
lint: vet $(GOBIN)/staticcheck
	@unformatted=$$(gofmt -l .); [ -z "$$unformatted" ] || { echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; }
	$(GO) vet -tags noopenblas ./nn
	$(GO) vet -tags cudaemu ./nn/... ./policy/... ./algo/... ./internal/...
	$(GOBIN)/staticcheck ./...
	$(GOBIN)/staticcheck -tags cudaemu ./nn/... ./policy/... ./algo/...
	scripts/checksize.sh

# Every test, integration tests included (real sockets, real etcd, real processes), with -race.
# The dashboard tests keep their headless-Chromium screenshots under $(ARTIFACTS).
ARTIFACTS ?= $(abspath $(BIN))/artifacts
test: deps-test lint test-cudaemu
	DISTRL_ARTIFACTS=$(ARTIFACTS) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

# The GPU tests on nn/cuda's host emulator (the build tag cudaemu; docs/gpu.md,
# "The host emulator"): the GPU code's launches, buffers and copies, and the
# kernels' results, checked without a GPU (about 1.5 minutes on 2 cores).
test-cudaemu:
	$(GO) test -tags cudaemu -count=1 -timeout 20m ./nn/cuda/... ./policy/cuda
	$(GO) test -tags cudaemu -count=1 -timeout 20m -run CUDA ./algo/... ./trainerworker

# Unit tests only: quick, in-process.
unit:
	$(GO) test -count=1 -short ./...

# Every fuzz target for FUZZTIME each (their seed corpora already run in
# `make test`); a table of executions per target. FUZZ_PKGS narrows it.
FUZZTIME  ?= 30s
FUZZMINIMIZETIME ?= 5s
FUZZ_PKGS ?= ./...
fuzz: deps
	FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) GO=$(GO) scripts/fuzz.sh $(FUZZ_PKGS)

# Go benchmarks and end-to-end benchmarks, then a table of ratios against
# the limits measured in the same run.
# BENCH_TAGS=cuda adds the GPU benchmarks where Go, CUDA and a GPU are on one
# machine (else scripts/gpu-check.sh on a bundle).
BENCH_TAGS ?=
bench: build deps-test
	@mkdir -p $(BIN)
	set -o pipefail; $(GO) test $(if $(BENCH_TAGS),-tags $(BENCH_TAGS)) -run '^$$' -bench . -benchmem -count=1 -timeout 30m ./... | tee $(BENCH_OUT)
	$(GO) run ./cmd/benchtab < $(BENCH_OUT)

# Learning curves of the MinAtar built-ins against the paper's (Young & Tian
# 2019; docs/minatar.md "Learning curves against the paper"): every
# minatar-<game>-<algo> experiment rlctl lists (or MINATAR_EXPERIMENTS, comma
# separated) trains for MINATAR_FRAMES env steps through `rlctl start`, one
# after the other; a table (summary.md: 1M, 2M, 3M and 5M frames, a verdict
# per game against the paper's best at 5M), return against frames
# (curves.csv) and a plot per game next to the paper's curves, digitized
# from its figure (e2e/testdata/minatar_paper_curves.csv: DQN and the better
# AC(lambda), and the other two lighter), land in MINATAR_OUT. Not part of
# `make test`, and `make bench` skips it (it needs MINATAR_BENCH=1): at the
# paper's 5M frames minatar-breakout-ppo alone ran 16 minutes on the 2-core
# machine (frames/s in docs/minatar.md);
# MINATAR_FRAMES=1000000 for a shorter run. MINATAR_WALL caps each run's wall time (a duration; default none).
# MINATAR_SEEDS=0,1,2 runs each experiment once per seed and adds their mean.
MINATAR_FRAMES      ?= 5000000
MINATAR_EXPERIMENTS ?=
MINATAR_WALL        ?=
MINATAR_SEEDS       ?=
MINATAR_OUT         ?= $(abspath $(BIN))/minatar
MINATAR_TIMEOUT     ?= 240h
bench-minatar: build
	MINATAR_BENCH=1 MINATAR_FRAMES=$(MINATAR_FRAMES) MINATAR_EXPERIMENTS=$(MINATAR_EXPERIMENTS) \
	  MINATAR_WALL=$(MINATAR_WALL) MINATAR_SEEDS=$(MINATAR_SEEDS) MINATAR_OUT=$(MINATAR_OUT) E2E_RLCTL=$(abspath $(RLCTL)) \
	  $(GO) test -run '^$$' -bench '^BenchmarkMinAtarCurves$$' -benchtime 1x -count=1 -timeout $(MINATAR_TIMEOUT) ./e2e

# spread-ppo against MAPPO's Spread curve (docs/spread.md): MAPPO's 20M env
# steps or 20 minutes; SPREAD_STEPS shortens it. Not part of `make bench`.
SPREAD_STEPS ?=
bench-spread: build
	SPREAD_BENCH=1 E2E_SPREAD_STEPS=$(SPREAD_STEPS) E2E_RLCTL=$(abspath $(RLCTL)) \
	  $(GO) test -run '^$$' -bench '^BenchmarkSpreadMAPPO$$' -benchtime 1x -count=1 -timeout 40m ./e2e | tee $(BIN)/bench-spread.txt
	$(GO) run ./cmd/benchtab < $(BIN)/bench-spread.txt

# The main job: PPO learns CartPole through the distributed pipeline
# (embedded etcd, a trainer, a policy worker and two actors as processes),
# with progress on the terminal; metrics, checkpoints, logs and a plot land
# in ~/.distrl/trials/cartpole-ppo/$(TRIAL) (or under WORKDIR).
EXPERIMENT ?= cartpole-ppo
TRIAL      ?= trial1
run: build
	$(RLCTL) start $(EXPERIMENT) $(TRIAL) $(if $(WORKDIR),--workdir $(WORKDIR))
	$(RLCTL) plot $(EXPERIMENT) $(TRIAL) $(if $(WORKDIR),--workdir $(WORKDIR))

# A tour of rlctl by hand: echo workers, requests, then the data plane.
demo: build
	./scripts/demo.sh $(RLCTL)

clean:
	rm -rf $(BIN)
