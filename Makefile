# keepon — two commands do everything on a fresh machine:
#   make run    build, then run the main job (Example 2 on the simulated NIC) and report it
#   make test   linters (rustfmt, clippy -D warnings, ruff) and every test (Rust + Python)

CARGO ?= cargo
PY ?= python3
VENV := python/.venv
VPY := $(VENV)/bin/python
OUT := out

.PHONY: run test lint rust-test py-test py-env build bench table3 eval clean

build:
	$(CARGO) build --release -p keepon

run: build
	@mkdir -p $(OUT)
	./target/release/keepon run --config examples/example2.toml --records $(OUT)/example2.csv --pcap $(OUT)/example2.pcap
	./target/release/keepon report $(OUT)/example2.csv

test: lint rust-test py-test

lint: py-env
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python
	$(VENV)/bin/ruff format --check python

rust-test:
	$(CARGO) test --workspace

$(VENV)/.installed: python/pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e 'python[dev]'
	touch $@

py-env: $(VENV)/.installed

py-test: py-env
	$(VENV)/bin/pytest -q python/tests

bench:
	$(CARGO) bench -p keepon --bench core

table3: build
	./target/release/keepon table3

# The paper's evaluation on the simulated NIC: raw CSVs in $(OUT)/eval, summaries and plots in validation/.
EVAL_FRAMES ?= 100000
EVAL_HYPERPERIODS ?= 10000
EVAL_FIG16_FRAMES ?= 20000
EVAL_FIG18_CYCLES ?= 5000
eval: build py-env
	./target/release/keepon eval fig15 --out $(OUT)/eval/fig15 --frames $(EVAL_FRAMES)
	mkdir -p validation/fig15
	cp $(OUT)/eval/fig15/fig15-summary.md validation/fig15/summary.md
	$(VPY) -m keepon_plan.evalplot fig15 $(OUT)/eval/fig15/fig15.csv --out validation/fig15
	./target/release/keepon eval fig16 --out $(OUT)/eval/fig16 --frames $(EVAL_FIG16_FRAMES)
	mkdir -p validation/fig16
	cp $(OUT)/eval/fig16/fig16-summary.md validation/fig16/summary.md
	$(VPY) -m keepon_plan.evalplot fig16 $(OUT)/eval/fig16/fig16.csv --out validation/fig16
	./target/release/keepon eval fig17 --out $(OUT)/eval/fig17 --frames 2000
	mkdir -p validation/fig17
	cp $(OUT)/eval/fig17/fig17-summary.md validation/fig17/summary.md
	cp $(OUT)/eval/fig17/fig17.csv validation/fig17/fig17.csv
	$(VPY) -m keepon_plan.evalplot fig17 $(OUT)/eval/fig17/fig17.csv --out validation/fig17
	./target/release/keepon eval fig18 --out $(OUT)/eval/fig18 --frames $(EVAL_FIG18_CYCLES)
	mkdir -p validation/fig18
	cp $(OUT)/eval/fig18/fig18-summary.md validation/fig18/summary.md
	cp $(OUT)/eval/fig18/fig18.csv validation/fig18/fig18.csv
	$(VPY) -m keepon_plan.evalplot fig18 $(OUT)/eval/fig18/fig18.csv --out validation/fig18
	./target/release/keepon eval table3 --out $(OUT)/eval/table3 --frames 100
	mkdir -p validation/table3
	cp $(OUT)/eval/table3/table3-summary.md validation/table3/summary.md
	cp $(OUT)/eval/table3/table3.csv validation/table3/table3.csv
	./target/release/keepon eval casestudy --out $(OUT)/eval/casestudy --frames $(EVAL_HYPERPERIODS)
	mkdir -p validation/casestudy
	cp $(OUT)/eval/casestudy/casestudy-summary.md validation/casestudy/summary.md
	cp $(OUT)/eval/casestudy/gcl.txt validation/casestudy/gcl.txt
	$(VPY) -m keepon_plan.evalplot casestudy $(OUT)/eval/casestudy/casestudy.csv --out validation/casestudy

clean:
	$(CARGO) clean
	rm -rf $(OUT) $(VENV)
