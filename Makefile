# Everything a fresh clone needs is installed here: `make test` and `make demo`
# work on a machine with only python3 (3.11+) and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint docs clean engine

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP) engine
	$(BIN)/python -m pytest -q

# The pinned engine binary the tests run (see docs/engine.md).
engine: $(STAMP)
	$(BIN)/python -m tools.fetch_engine --dest $(VENV)/engine

# The whole lifecycle on the embedded stack: plan -> policy -> approve -> apply,
# then a plan with no changes; prints the run reviews.
demo: $(STAMP) engine
	$(BIN)/python -m runplane.local.demo

lint: $(STAMP)
	$(BIN)/ruff check layers functions infra tests benchmarks tools examples
	$(BIN)/ruff format --check layers functions infra tests benchmarks tools examples
	$(BIN)/mypy layers/runplane functions tools

# Regenerate documents derived from code (tests fail while they are stale).
docs: $(STAMP)
	$(BIN)/python -m runplane.docs

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
