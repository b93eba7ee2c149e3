# orchestrl: the two commands are `make demo` and `make test`.
#
# Torch is installed first, pinned, so that a CPU-only machine never pulls a multi-GB CUDA build:
# on these machines `pip install torch==2.13.0` takes a local CPU wheel; elsewhere, on a machine
# without a GPU, pass the CPU wheel index, e.g. `make demo TORCH_INDEX=<pytorch cpu index url>`.
# A machine with a GPU gets PyPI's default (CUDA) build of the same version.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
TORCH_INDEX ?=
PYTEST_ARGS ?=

.PHONY: install demo test test-fast lint bench mutants results ui peers clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# The demo: a planning team trained from scratch, then asked to plan a hand-written export with its
# last checkpoint (the newest run's), and scored on the export's whole wanted table.
DEMO_TEAM = $$(ls -dt runs/experiments/lemon_planning_demo/*/checkpoints/iter_* | head -1)
DEMO_EXPORT = examples/exports/bike_rentals
DEMO_ASK = Total fare per station for completed rentals, each rental counted once, highest first.

demo: install
	$(BIN)/orchestrl train configs/lemon_planning_demo.yaml
	$(BIN)/orchestrl plan --checkpoint "$(DEMO_TEAM)" --source rentals=$(DEMO_EXPORT)/rentals.csv \
	    --target-example $(DEMO_EXPORT)/target_example.csv --description "$(DEMO_ASK)" --out runs/plans/demo
	$(BIN)/python benchmarks/plan.py --corpora examples/exports --no-env-gap --checkpoint "$(DEMO_TEAM)"

# Three tiers run at once (tools/test_tiers.py): the integration tests on one shared local Ray, the
# tests that start their own multi-node clusters, and the unit tests (no Ray). The first streams,
# the others' reports follow, then every failure once more; the target fails when any tier fails.
test: install
	$(BIN)/lint-imports
	$(BIN)/python -m tools.test_tiers --tier "ray and not cluster" --tier cluster --tier "not ray" -- $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest -q -m "not ray and not slow" $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check orchestrl tests benchmarks tools
	$(BIN)/lint-imports

bench: install
	$(BIN)/python benchmarks/throughput.py --quick

mutants: install
	$(BIN)/python benchmarks/mutants.py

results: install
	$(BIN)/python benchmarks/results.py

ui: install
	$(BIN)/orchestrl ui

# BenchMARL, the peer that benchmarks/spread_wallclock.py trains beside mappo, in its own
# environment (its torch and PettingZoo conflict with orchestrl's: benchmarks/peers/requirements.txt).
# Torch first, as for install: TORCH_INDEX picks its CPU build on a machine without a GPU.
peers: .venv-peers/.installed

.venv-peers/.installed: benchmarks/peers/requirements.txt
	$(PYTHON) -m venv .venv-peers
	.venv-peers/bin/python -m pip install -q torch==2.14.1 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	.venv-peers/bin/python -m pip install -q -r benchmarks/peers/requirements.txt
	touch $@

clean:
	rm -rf runs .pytest_cache
