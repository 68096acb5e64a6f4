# keepon — two commands do everything on a fresh machine:
#   make run    build, then run the main job (Example 2 on the simulated NIC) and report it
#   make test   linters (rustfmt, clippy -D warnings, ruff) and the fast tests (Rust + Python; minutes)
# and, beyond the quick start, `make test-all`: those plus the minute-long PTP and namespace tests (what CI runs).

CARGO ?= cargo
PY ?= python3
VENV := python/.venv
VPY := $(VENV)/bin/python
OUT := out

.PHONY: run test test-all lint rust-test rust-test-all py-test py-test-all py-env build c-client txtime-preload bench table3 eval eval-fig27 eval-network clean soak qemu-test

build:
	$(CARGO) build --release -p keepon

# The C client (clients/c): static and shared library, example, and the test program (with AddressSanitizer and
# UBSan when the compiler has them); python/tests/test_c_client.py runs them against a daemon.
CC ?= cc
CWARN := -std=c11 -Wall -Wextra -Werror -O2
C_OUT := target/c
C_SAN := $(shell echo 'int main(void){return 0;}' | $(CC) -x c -fsanitize=address,undefined -o /dev/null - 2>/dev/null && echo -fsanitize=address,undefined)

c-client: $(C_OUT)/libkeepon.a $(C_OUT)/libkeepon.so $(C_OUT)/keepon-example $(C_OUT)/keepon-test

$(C_OUT)/keepon.o: clients/c/keepon.c clients/c/keepon.h
	@mkdir -p $(C_OUT)
	$(CC) $(CWARN) -fPIC -c -o $@ clients/c/keepon.c

$(C_OUT)/libkeepon.a: $(C_OUT)/keepon.o
	ar rcs $@ $<

$(C_OUT)/libkeepon.so: $(C_OUT)/keepon.o
	$(CC) -shared -o $@ $<

$(C_OUT)/keepon-example: clients/c/example.c $(C_OUT)/libkeepon.a
	$(CC) $(CWARN) -o $@ clients/c/example.c $(C_OUT)/libkeepon.a

# The SO_TXTIME preload library (clients/txtime) and the ETF-style test program; crates/keepon/tests/txtime_preload.rs
# builds them with this target.
txtime-preload: $(C_OUT)/libkeepon_txtime.so $(C_OUT)/etf-sender $(C_OUT)/preload-check

$(C_OUT)/libkeepon_txtime.so: clients/txtime/keepon_txtime.c clients/txtime/udp4.c clients/txtime/udp4.h \
		clients/c/keepon.c clients/c/keepon.h
	@mkdir -p $(C_OUT)
	$(CC) $(CWARN) -fPIC -shared -fvisibility=hidden -o $@ clients/txtime/keepon_txtime.c clients/txtime/udp4.c \
		clients/c/keepon.c -ldl -lpthread

$(C_OUT)/etf-sender: clients/txtime/etf_sender.c
	@mkdir -p $(C_OUT)
	$(CC) $(CWARN) -o $@ clients/txtime/etf_sender.c

$(C_OUT)/preload-check: clients/txtime/preload_check.c
	@mkdir -p $(C_OUT)
	$(CC) $(CWARN) -o $@ clients/txtime/preload_check.c

$(C_OUT)/keepon-test: clients/c/test_keepon.c clients/c/keepon.c clients/c/keepon.h
	@mkdir -p $(C_OUT)
	$(CC) $(CWARN) -g $(C_SAN) -o $@ clients/c/test_keepon.c clients/c/keepon.c

run: build
	@mkdir -p $(OUT)
	./target/release/keepon run --config examples/example2.toml --records $(OUT)/example2.csv --pcap $(OUT)/example2.pcap
	./target/release/keepon report $(OUT)/example2.csv

# Tests in tiers (README): `test` — lint, unit, property and the fast integration tests (those needing root run
# when root, as everywhere); `test-all` adds the minute-long PTP tests (cargo feature `slow-tests`, pytest marker
# `slow`). CI (.ci/run) runs `test-all` and the QEMU bench.
test: lint rust-test py-test

test-all: lint rust-test-all py-test-all

lint: py-env
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	$(VENV)/bin/ruff check python
	$(VENV)/bin/ruff format --check python

rust-test:
	$(CARGO) test --workspace

rust-test-all:
	$(CARGO) test --workspace --all-features

$(VENV)/.installed: python/pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e 'python[dev]'
	touch $@

py-env: $(VENV)/.installed

py-test: py-env build c-client
	$(VENV)/bin/pytest -q -m "not slow" python/tests

py-test-all: py-env build c-client
	$(VENV)/bin/pytest -q python/tests

# The real-kernel bench (tests/qemu): Debian's stock kernel in QEMU (TCG) with the kernel's ETF qdisc; about a
# minute once the kernel package is cached in target/qemu/cache. Skips with a message without QEMU.
qemu-test:
	KEEPON_QEMU=1 $(CARGO) test -p keepon --test qemu_etf -- --nocapture

bench:
	$(CARGO) bench -p keepon --bench core
	$(CARGO) bench -p keepon --bench daemon_idle

table3: build
	./target/release/keepon table3

# The paper's evaluation on the simulated NIC: raw CSVs in $(OUT)/eval, summaries, sensitivity CSVs, the small raw
# CSVs (fig17, fig18, fig19, table3) and plots in validation/ (committed; see .gitignore).
EVAL_FRAMES ?= 100000
EVAL_HYPERPERIODS ?= 10000
EVAL_FIG16_FRAMES ?= 20000
EVAL_FIG18_CYCLES ?= 5000
eval: build py-env
	./target/release/keepon eval fig15 --out $(OUT)/eval/fig15 --frames $(EVAL_FRAMES)
	mkdir -p validation/fig15
	cp $(OUT)/eval/fig15/fig15-summary.md validation/fig15/summary.md
	cp $(OUT)/eval/fig15/fig15-sensitivity.csv validation/fig15/sensitivity.csv
	$(VPY) -m keepon_plan.evalplot fig15 $(OUT)/eval/fig15/fig15.csv --out validation/fig15
	./target/release/keepon eval fig16 --out $(OUT)/eval/fig16 --frames $(EVAL_FIG16_FRAMES)
	mkdir -p validation/fig16
	cp $(OUT)/eval/fig16/fig16-summary.md validation/fig16/summary.md
	cp $(OUT)/eval/fig16/fig16-sensitivity.csv validation/fig16/sensitivity.csv
	$(VPY) -m keepon_plan.evalplot fig16 $(OUT)/eval/fig16/fig16.csv --out validation/fig16
	./target/release/keepon eval fig17 --out $(OUT)/eval/fig17 --frames 2000
	mkdir -p validation/fig17
	cp $(OUT)/eval/fig17/fig17-summary.md validation/fig17/summary.md
	cp $(OUT)/eval/fig17/fig17.csv validation/fig17/fig17.csv
	cp $(OUT)/eval/fig17/fig17-sensitivity.csv validation/fig17/sensitivity.csv
	$(VPY) -m keepon_plan.evalplot fig17 $(OUT)/eval/fig17/fig17.csv --out validation/fig17
	./target/release/keepon eval fig18 --out $(OUT)/eval/fig18 --frames $(EVAL_FIG18_CYCLES)
	mkdir -p validation/fig18
	cp $(OUT)/eval/fig18/fig18-summary.md validation/fig18/summary.md
	cp $(OUT)/eval/fig18/fig18.csv validation/fig18/fig18.csv
	cp $(OUT)/eval/fig18/fig18-sensitivity.csv validation/fig18/sensitivity.csv
	$(VPY) -m keepon_plan.evalplot fig18 $(OUT)/eval/fig18/fig18.csv --out validation/fig18
	./target/release/keepon eval fig19 --out $(OUT)/eval/fig19 --frames 50
	mkdir -p validation/fig19
	cp $(OUT)/eval/fig19/fig19-summary.md validation/fig19/summary.md
	cp $(OUT)/eval/fig19/fig19.csv validation/fig19/fig19.csv
	cp $(OUT)/eval/fig19/fig19-sensitivity.csv validation/fig19/sensitivity.csv
	$(VPY) -m keepon_plan.evalplot fig19 $(OUT)/eval/fig19/fig19.csv --out validation/fig19
	./target/release/keepon eval table3 --out $(OUT)/eval/table3 --frames 100
	mkdir -p validation/table3
	cp $(OUT)/eval/table3/table3-summary.md validation/table3/summary.md
	cp $(OUT)/eval/table3/table3.csv validation/table3/table3.csv
	cp $(OUT)/eval/table3/table3-sensitivity.csv validation/table3/sensitivity.csv
	./target/release/keepon eval casestudy --out $(OUT)/eval/casestudy --frames $(EVAL_HYPERPERIODS)
	mkdir -p validation/casestudy
	cp $(OUT)/eval/casestudy/casestudy-summary.md validation/casestudy/summary.md
	cp $(OUT)/eval/casestudy/gcl.txt validation/casestudy/gcl.txt
	cp $(OUT)/eval/casestudy/casestudy-sensitivity.csv validation/casestudy/sensitivity.csv
	$(VPY) -m keepon_plan.evalplot casestudy $(OUT)/eval/casestudy/casestudy.csv --out validation/casestudy
	./target/release/keepon eval robustness --out $(OUT)/eval/robustness
	mkdir -p validation/robustness
	cp $(OUT)/eval/robustness/robustness-summary.md validation/robustness/summary.md
	cp $(OUT)/eval/robustness/robustness.csv validation/robustness/robustness.csv
	cp $(OUT)/eval/robustness/robustness-sensitivity.csv validation/robustness/sensitivity.csv
	$(VPY) -m keepon_plan.evalplot robustness $(OUT)/eval/robustness/robustness.csv --out validation/robustness
	$(CARGO) build --release -p keepon-ptp --bin keepon-sync-sim
	./target/release/keepon-sync-sim --out $(OUT)/a9
	mkdir -p validation/a9-sync validation/dual-clock
	cp $(OUT)/a9/a9_summary.csv validation/a9-sync/a9_summary.csv
	cp $(OUT)/a9/dual_summary.csv validation/dual-clock/dual_summary.csv
	cp $(OUT)/a9/dual_convergence.csv validation/dual-clock/dual_convergence.csv
	$(VPY) -m keepon_plan.evalplot fig22 $(OUT)/a9/dual_convergence.csv --out validation/dual-clock
	mkdir -p validation/fig12
	cp $(OUT)/a9/fig12.csv validation/fig12/fig12.csv
	cp $(OUT)/a9/fig12-summary.md validation/fig12/summary.md
	$(VPY) -m keepon_plan.evalplot fig12 $(OUT)/a9/fig12.csv --out validation/fig12
	$(VPY) -m keepon_plan.plots_sync $(OUT)/a9 --out validation/a9-sync
	$(MAKE) eval-fig27
	$(MAKE) eval-network

# The paper's Fig 27 (A.8, schedulability of slot isolation) into validation/fig27: keepon-plan on all 2688 flow
# sets of the paper's generator (about a minute), and a small run beside the paper-like Z3 encoding (2 sets per
# family at 10 and 50 %, Z3 stopped after 10 s; the 24-minute comparison is in python/bench-results/z3-reduced).
eval-fig27: py-env
	$(VENV)/bin/keepon-plan bench --no-z3 --sets 64 --time-limit 60 --out $(OUT)/fig27
	mkdir -p validation/fig27/z3-small
	cp $(OUT)/fig27/rows.csv $(OUT)/fig27/summary.md $(OUT)/fig27/fig27.png validation/fig27/
	$(VPY) -m pip install --quiet -e 'python[dev,bench]'
	$(VENV)/bin/keepon-plan bench --sets 2 --levels 10,50 --z3-timeout 10 --time-limit 60 --out $(OUT)/fig27-z3
	cp $(OUT)/fig27-z3/rows.csv $(OUT)/fig27-z3/summary.md $(OUT)/fig27-z3/fig27.png validation/fig27/z3-small/

# keepon-plan network plans replayed on the simulator (validation/network): the §7 case study (its talkers on slots,
# and on the byte clock) and a generated 20-switch tree (200 streams), each planned by keepon-plan network, then
# replayed by keepon eval network.
EVAL_NET := $(OUT)/eval/network
eval-network: build py-env
	mkdir -p $(EVAL_NET) validation/network/casestudy validation/network/casestudy-bytes validation/network/tree20
	$(VPY) -c 'from keepon_plan.network.bench import generate; print(generate("tree", 20, 200, 4, 3, 1, guard="500ns", max_jitter="1us"), end="")' > $(EVAL_NET)/tree20.toml
	sed 's/^guard = "500ns"/guard = "500ns"\ntiming = "bytes"/' python/examples/network/casestudy.toml > $(EVAL_NET)/casestudy-bytes.toml
	$(VENV)/bin/keepon-plan network python/examples/network/casestudy.toml --out $(EVAL_NET)/casestudy-plan
	$(VENV)/bin/keepon-plan network $(EVAL_NET)/casestudy-bytes.toml --out $(EVAL_NET)/casestudy-bytes-plan
	$(VENV)/bin/keepon-plan network $(EVAL_NET)/tree20.toml --out $(EVAL_NET)/tree20-plan
	./target/release/keepon eval network --plan $(EVAL_NET)/casestudy-plan --out $(EVAL_NET)/casestudy --duration 2s
	./target/release/keepon eval network --plan $(EVAL_NET)/casestudy-bytes-plan --out $(EVAL_NET)/casestudy-bytes --duration 2s
	./target/release/keepon eval network --plan $(EVAL_NET)/tree20-plan --out $(EVAL_NET)/tree20 --duration 1s
	for n in casestudy casestudy-bytes tree20; do \
	  cp $(EVAL_NET)/$$n/network-summary.md validation/network/$$n/summary.md; \
	  cp $(EVAL_NET)/$$n/network.csv $(EVAL_NET)/$$n/gate-misses.csv validation/network/$$n/; \
	  cp $(EVAL_NET)/$$n/network-sensitivity.csv validation/network/$$n/sensitivity.csv; \
	  cp $(EVAL_NET)/$$n-plan/streams.csv validation/network/$$n/plan-streams.csv; \
	done
	cp $(EVAL_NET)/tree20.toml validation/network/tree20/network.toml

clean:
	$(CARGO) clean
	rm -rf $(OUT) $(VENV)

# Soak: peak RSS of `keepon run` over a 10^6-slot and a 10^8-slot simulated run (records streamed to disk).
soak: build
	@mkdir -p $(OUT)/soak
	@for n in 1 100; do \
	  sed -e "s/COUNT_RT/$$((n * 15625))/" -e "s/COUNT_BE/$$((n * 336000))/" crates/keepon/benches/soak/soak.toml > $(OUT)/soak/soak-$$n.toml; \
	  echo "== $$n x 10^6 slots"; \
	  ./target/release/keepon run --config $(OUT)/soak/soak-$$n.toml --records $(OUT)/soak/soak-$$n.csv | grep -E '^(frames|wire|memory|records):'; \
	  rm -f $(OUT)/soak/soak-$$n.csv; \
	done
