# Quick start: `make demo` and `make test`. Both create .venv and install the project into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy --strict src

# pytest exits 5 when it collected no test; make treats every non-zero exit as failure.
test: lint
	$(BIN)/python -m pytest -q

# Every benchmark in turn (about 15 minutes); see bench/README.md to run one.
BENCHES := window loading forgetting tokens packing_self peers_turn dedup_core peers_dedup memory_quality

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	cd bench && for b in $(BENCHES); do echo "== bench_$$b"; ../$(BIN)/python bench_$$b.py || exit 1; done

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
