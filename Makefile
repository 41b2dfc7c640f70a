# Two commands on a fresh machine with Python 3.11+ and Java 17+: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: install demo lint test test-all bench check-java clean

check-java:
	@java_bin="$${JAVA_HOME:+$$JAVA_HOME/bin/}java"; \
	v=$$($$java_bin -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
	  echo "streamscale needs Java 17+ for Spark (found: $${v:-none}); install it, e.g. 'apt-get install openjdk-17-jre-headless', or set JAVA_HOME"; \
	  exit 1; \
	fi

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "streamscale needs Python 3.11+ (set PYTHON=...)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	@touch $(STAMP)

install: check-java $(STAMP)

demo: install
	$(BIN)/streamscale demo

# The house's habits: ruff (lint and format) and the import layers (pyproject's importlinter contract).
lint: install
	$(BIN)/ruff check streamscale tests benchmarks
	$(BIN)/ruff format --check streamscale tests benchmarks
	$(BIN)/lint-imports

test: install lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The long experiments (marked slow) as well.
test-all: install
	$(BIN)/python -m pytest -m "slow or not slow" $(PYTEST_ARGS)

bench: install
	$(BIN)/python benchmarks/loadgen_throughput.py
	$(BIN)/python benchmarks/source_throughput.py

clean:
	rm -rf $(VENV) demo-results .pytest_cache
