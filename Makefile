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

demo: install
	$(BIN)/orchestrl curriculum configs/curricula/lemon_demo.yaml

# The two tiers run at once, one per core: the unit tests (no Ray) and the integration tests (one
# shared local Ray, mostly waiting on servers and workers). The unit tier's report follows the
# integration tier's; the target fails when either tier fails ("no tests" in a tier is fine).
test: install
	$(BIN)/lint-imports
	@unit_log=$$(mktemp); \
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not ray" --durations=15 $(PYTEST_ARGS) > $$unit_log 2>&1 & unit=$$!; \
	echo "unit tests (no Ray) running alongside; their report follows"; \
	$(BIN)/python -m pytest -q -m ray --durations=30 $(PYTEST_ARGS); ray_rc=$$?; \
	wait $$unit; unit_rc=$$?; \
	echo "---------------- unit tests (no Ray) ----------------"; cat $$unit_log; rm -f $$unit_log; \
	echo "integration tier exit $$ray_rc, unit tier exit $$unit_rc"; \
	[ $$ray_rc -eq 0 -o $$ray_rc -eq 5 ] && [ $$unit_rc -eq 0 -o $$unit_rc -eq 5 ]

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
