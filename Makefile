# Turnout: the two commands a new user needs are `make bench` (set up,
# build, run the default campaign, write the report) and `make test`.

SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin
DB    ?= results/turnout.db
OUT   ?= results/report
CAMPAIGN ?= campaigns/default.toml

.PHONY: setup build test test-unit test-rust test-python test-openflow test-openflow-compare test-faucet-compare bench bench-rust bench-wakeup bench-latency bench-overlay bench-flows bench-flows-full bench-vhost-gen bench-ab lint fuzz fuzz-replay soak

setup:
	bash scripts/setup.sh

build:
	cargo build --release --workspace --bins --examples
	cargo build --release -p ports --example hostile_peer --features test-utils

# Every test (scripts/test.py), one step at a time: set-up, the lint gate
# (fmt, clippy, ruff, mypy), Rust unit, property and in-process tests, the
# Rust system tests (real peers: testpmd, namespaces, OVS-DPDK, QEMU), the
# fuzz corpora and the Python tests without and with peers. Every step runs even when one failed; the
# end prints the time of each step, the ten slowest tests and every
# failure, and the exit status is 1 if anything failed (docs/testing.md).
# A system test whose peer the setup installs fails when it is missing
# (TURNOUT_REQUIRE_PEERS=1);
# `make test-rust` / `test-python` / `test-unit` alone skip instead.
# After the set-up, three lanes at once (checks and builds, Rust system
# tests, Python system tests), then the Python system tests marked
# `serial` alone; TEST_FLAGS=--serial: every step alone (docs/testing.md).
test: export TURNOUT_REQUIRE_PEERS ?= 1
test:
	python3 scripts/test.py $(TEST_FLAGS)

# The quick loop: unit, property and in-process tests of both languages.
test-unit:
	python3 scripts/test.py rust-build rust python

test-rust:
	python3 scripts/test.py rust-build rust rust-system

test-python:
	python3 scripts/test.py python python-system python-serial

# os-ken's OpenFlow 1.3 switch test suite (991 tests) against turnoutd,
# held to the floor of python/tests/turnoutd/osken_suite_floor.json (docs/flows.md,
# "The os-ken switch test suite"). Not in `make test` (its run alone is
# minutes, and the suite's throughput phases grow it to about half an hour
# once groups and meters install); .ci/run runs it after `make test`.
test-openflow: export TURNOUT_REQUIRE_PEERS ?= 1
test-openflow: setup
	$(PY)/pytest -q -s python/tests/turnoutd/test_osken_suite.py

# The same suite against turnoutd and Open vSwitch (userspace) in one run,
# per folder side by side, written to results/osken-suite.json; twice
# `test-openflow`'s time.
test-openflow-compare: setup
	mkdir -p results
	$(PY)/python python/tests/turnoutd/osken_suite.py --target turnoutd --target ovs \
		--json results/osken-suite.json

# Faucet's checks (python/tests/turnoutd/test_faucet.py) against turnoutd and Open
# vSwitch, TURNOUT_FAUCET_RUNS runs each (default 10), for comparison.
test-faucet-compare: setup
	TURNOUT_FAUCET_TARGETS=turnoutd,ovs TURNOUT_FAUCET_RUNS=$${TURNOUT_FAUCET_RUNS:-10} \
		$(PY)/pytest -q -s python/tests/turnoutd/test_faucet.py

# The main job: the default campaign (every scenario, every available SUT,
# 64 B and 1518 B) and its report.
bench: setup
	mkdir -p results
	$(PY)/turnout system check || true
	$(PY)/turnout bench run $(CAMPAIGN) --db $(DB) --resume
	$(PY)/turnout report --db $(DB) -o $(OUT)
	@echo "report: $(abspath $(OUT))/index.html"

# Criterion benches of the hot paths (fabric figures of mSwitch, logics).
# `--features bench`: criterion is a dependency only with it (not in the
# test build).
bench-rust:
	cargo bench -p fabric --bench fabric --features bench
	cargo bench -p logic --bench logics --features bench
	cargo bench -p logic --bench flows --features bench
	cargo bench -p ports --bench tunnel --features bench

# CPU vs p99 latency of the wake-up settings next to testpmd and OVS
# (docs/architecture.md, "Wake-up"); about 25 minutes.
bench-wakeup: setup
	mkdir -p results
	$(PY)/python scripts/bench/bench_wakeup.py --rounds 3 --json results/wakeup.json --plot results/wakeup.png

# p2p latency at 10 and 100 kpps for every SUT, the wire as the floor and
# turnoutd adaptive vs poll side by side: campaigns/latency.toml and its
# report (docs/bench.md, "Latency at low rates"); about 6 minutes, in a quiet
# window.
bench-latency: setup
	mkdir -p results
	$(PY)/turnout bench run campaigns/latency.toml --db results/latency.db --resume
	$(PY)/turnout report --db results/latency.db --campaign latency -o results/latency-report
	@echo "report: $(abspath results/latency-report)/index.html"

# Two-host VXLAN vs plain switching for turnoutd, OVS userspace and the
# Linux bridge: the campaign campaigns/overlay.toml and its report, whose
# "Overlay" section gives the encapsulation's cost per frame (docs/bench.md,
# "Overlay"); about 5 minutes.
bench-overlay: setup
	mkdir -p results
	$(PY)/turnout bench run campaigns/overlay.toml --db results/overlay.db
	$(PY)/turnout report --db results/overlay.db --campaign overlay -o results/overlay-report
	@echo "report: $(abspath results/overlay-report)/index.html"

# OpenFlow rule sets: the same generated rules installed with
# ovs-ofctl -O OpenFlow13 add-flows into turnoutd (flows logic), OVS
# userspace (p2p over veths, AF_XDP) and OVS-DPDK (v2v over vhost-user), and
# turnoutd alone over memif; R+, each SUT's own cost per frame and its CPU
# time split into user and system vs rules, masks, concurrent flows and
# mirror outputs, with turnoutd's cost over the same path's OVS printed per
# path (campaigns/flows.toml, docs/bench.md "OpenFlow rule sets"); then the
# rule-update time through ovs-ofctl mod-flows and flow-mods per second
# (10^4 and 10^5 flows by ovs-ofctl add-flows, and turnoutd's JSON-RPC),
# turnoutd vs OVS (campaigns/flows-update.toml, ~3 min); about 13 minutes.
bench-flows: setup
	mkdir -p results
	$(PY)/turnout bench run campaigns/flows.toml --db results/flows.db --resume
	$(PY)/turnout report --db results/flows.db --campaign flows -o results/flows-report
	$(PY)/turnout bench run campaigns/flows-update.toml --db results/flows.db --resume
	$(PY)/turnout report --db results/flows.db --campaign flows-update -o results/flows-update-report
	@echo "report: $(abspath results/flows-report)/index.html"
	@echo "rule updates: $(abspath results/flows-update-report)/index.html"

# The full product of the OpenFlow curves (rules 1..10^5 x masks 1, 8, 64 x
# outputs 1, 2, 4 x flows 1..10^6 x paths p2p / v2v vhost-user / v2v memif,
# 3 repetitions; campaigns/flows-full.toml): about 2.5 hours on 2 cores.
bench-flows-full: setup
	mkdir -p results
	$(PY)/turnout bench run campaigns/flows-full.toml --db results/flows-full.db --resume
	$(PY)/turnout report --db results/flows-full.db --campaign flows-full -o results/flows-full-report
	@echo "report: $(abspath results/flows-full-report)/index.html"

# Before/after of a turnoutd change: BEFORE's turnoutd (built in a
# throwaway worktree, its own target dir under target/bench-ab) against this
# checkout's, interleaved in campaigns/ab.toml (memif v2v, vhost-user v2v,
# AF_XDP p2p at 64 B: R+ and cycles per frame, 5 repetitions), then
# after/before per cell with its spread (docs/bench.md, "Before and after");
# the campaign takes about 3 minutes, plus BEFORE's build the first time a
# commit is named (its binary is kept per commit); run it in a quiet window.
bench-ab: setup
	@test -n "$(BEFORE)" || { echo "usage: make bench-ab BEFORE=<git rev>"; exit 2; }
	PY=$(abspath $(PY)) scripts/bench-ab.sh $(BEFORE)

# turnout-gen's vhost-user frontend vs testpmd's virtio-user, as sender and
# as receiver against a testpmd net_vhost backend, 64 and 1518 B, the tool
# under test on CPU 0 and the backend on CPU 1, runs interleaved, ratios
# pair by pair (docs/bench.md, "turnout-gen over vhost-user"); run it in a
# quiet window, about 3 minutes.
bench-vhost-gen: build
	mkdir -p results
	python3 scripts/bench/bench_max_rate.py --only vhost --runs 5 --window-s 2 --sizes 64,1518 \
		| tee results/vhost-gen.txt

# Coverage-guided fuzzing (docs/fuzzing.md): every target in fuzz/ one after
# the other for FUZZ_SECS each (FUZZ_RUNS=N: stop a target after N runs).
# Needs nightly Rust and cargo-fuzz; not part of `make test`.
FUZZ_SECS ?= 60
fuzz:
	FUZZ_SECS=$(FUZZ_SECS) scripts/fuzz.sh

# Every fuzz target over its checked-in corpus once (seeds, the inputs the
# campaigns grew, past crashes): the target files compiled into the test
# crates/fuzzreplay/tests/corpus.rs of the workspace's test build (stable
# Rust, no libFuzzer), seconds once built. Part of `make test`.
fuzz-replay:
	python3 fuzz/seeds.py
	cargo test --profile test-release -p fuzz-replay -- --test-threads=1

# Soak (docs/testing.md): every port kind under mixed traffic while ports,
# logics and peers churn, for SOAK_SECS; root, testpmd. Not in `make test`.
SOAK_SECS ?= 3600
soak: setup
	cargo build --release -p turnoutd -p turnout-gen
	mkdir -p results
	SOAK_SECS=$(SOAK_SECS) $(PY)/python scripts/bench/soak.py --json results/soak.json

# The lint gate (also steps of `make test`): rustfmt, clippy with warnings as
# errors (every target and feature, the tests' profile), ruff on every
# Python file, mypy on the workbench (settings in python/pyproject.toml).
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --all-features --profile test-release -q -- -D warnings
	$(PY)/ruff check python tests scripts
	cd python && ../$(PY)/mypy

