# Quick start:  make examples   (set up, then run the paper's examples)
#               make test       (set up, then run every test and the linters)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PROFILE ?= dev

.PHONY: setup examples test properties bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "sdqlite needs Python >= 3.11 (found: $$($(PYTHON) --version))"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || \
	  { echo "cannot create a virtual environment: on Debian run 'sudo apt-get install python3-venv'"; exit 1; }
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

examples: setup
	$(BIN)/sdqlite examples

test: setup
	$(BIN)/ruff check sdqlite semantics codegen properties paper_examples tests benchmarks
	$(BIN)/mypy
	HYPOTHESIS_PROFILE=$(PROFILE) $(BIN)/pytest

bench: setup
	$(BIN)/python -m benchmarks.optimizer

properties: setup
	HYPOTHESIS_PROFILE=$(PROFILE) $(BIN)/pytest properties

clean:
	rm -rf $(VENV) .hypothesis .mypy_cache .ruff_cache .pytest_cache *.egg-info
