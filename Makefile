# draq: one entry point for people and CI. `make demo` runs the main job locally; `make test` runs every test.
VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup deps controlplane demo test lint unit e2e e2e-alpha bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

deps:
	bash scripts/install-deps.sh

controlplane: $(STAMP) deps
	$(BIN)/python -m admission.localcluster.build

setup: controlplane

demo: setup
	$(BIN)/draq demo

lint: $(STAMP)
	$(BIN)/ruff check admission tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest tests --ignore=tests/e2e

e2e: setup
	$(BIN)/pytest tests/e2e

# The same e2e tests with the alpha DRA gates on in every component (partitions, taints, ...).
e2e-alpha: setup
	DRAQ_ALPHA_DRA=1 $(BIN)/pytest tests/e2e/test_local_cluster.py tests/e2e/test_allocator_vs_scheduler.py tests/e2e/test_operator.py

test: setup lint
	$(BIN)/pytest

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
