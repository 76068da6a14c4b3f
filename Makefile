# Quick start:  make examples   (set up, then run the paper's examples)
#               make test       (set up, then run every test and the linters: ruff, mypy,
#                                lint-imports for the layers of pyproject.toml)
#               make docs       (the tutorial site, every notebook executed: docs/_build/html)
# System packages (Debian 12), as root (as a user, with sudo): apt-get install -y python3-venv make g++ libboost1.81-dev libjs-mathjax
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PROFILE ?= dev
CXX    ?= g++
SYSTEM_PACKAGES := python3-venv python3-dev make g++ libboost1.81-dev libjs-mathjax
SUDO := $(if $(filter 0,$(shell id -u)),,sudo )# (a fresh root machine has no sudo)
SANITIZE_FLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -DSDQL_CHECKED
TSAN_FLAGS      := -O1 -g -fno-omit-frame-pointer -fsanitize=thread

.PHONY: setup check-system examples test docs sanitize properties bench bench-peers mutation mutation-quick clean

setup: check-system $(VENV)/.installed

# The C++ backend needs a compiler and Boost >= 1.81 (boost::unordered_flat_map).
check-system:
	@command -v $(CXX) >/dev/null 2>&1 || \
	  { echo "no C++ compiler ($(CXX)): on Debian run '$(SUDO)apt-get install -y $(SYSTEM_PACKAGES)'"; exit 1; }
	@echo '#include <boost/unordered/unordered_flat_map.hpp>' | $(CXX) -std=c++17 -x c++ -fsyntax-only - 2>/dev/null || \
	  { echo "Boost >= 1.81 is missing (boost/unordered/unordered_flat_map.hpp): on Debian run '$(SUDO)apt-get install -y $(SYSTEM_PACKAGES)'"; exit 1; }
	@$(PYTHON) -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || \
	  { echo "Python's headers are missing (Python.h, for the compiled calls' fast path): on Debian run '$(SUDO)apt-get install -y $(SYSTEM_PACKAGES)'"; exit 1; }

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "sdqlite needs Python >= 3.11 (found: $$($(PYTHON) --version))"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || \
	  { echo "cannot create a virtual environment: on Debian run '$(SUDO)apt-get install python3-venv'"; exit 1; }
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

examples: setup
	$(BIN)/sdqlite examples

test: setup
	$(BIN)/ruff check sdqlite semantics codegen properties paper_examples tests benchmarks mutation docs
	$(BIN)/mypy
	$(BIN)/lint-imports
	HYPOTHESIS_PROFILE=$(PROFILE) $(BIN)/pytest -n auto
	$(MAKE) --no-print-directory sanitize

# The tutorial site: Sphinx with MyST-NB executes every notebook of docs/tutorial; a cell
# that fails or any warning fails the build (-W). The pages render their mathematics
# with Debian's MathJax (libjs-mathjax), copied into the site, so they need no network.
docs: setup $(VENV)/.docs-installed
	@test -e /usr/share/javascript/mathjax/MathJax.js || \
	  { echo "MathJax is missing: on Debian run '$(SUDO)apt-get install -y libjs-mathjax'"; exit 1; }
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	@echo "the site: docs/_build/html/index.html"

$(VENV)/.docs-installed: $(VENV)/.installed pyproject.toml
	$(BIN)/pip install --quiet -e '.[docs]'
	@touch $@

# The C++ agreement property on generated code built with AddressSanitizer and UBSan
# (fewer programs: the `sanitize` profile), the sanitizers' runtimes preloaded into Python;
# the door's check, on one thread and on two, on damaged arrays; and CSR results written
# row by row (sdql::csr), in order (through sdql::csr_writer's cursors, a block of rows on
# the diagonal at a time) or by key
# (sdql::by_key, its rows added up in a table until a key beyond it), of 32- or 64-bit keys,
# each checked against the columns; accumulators kept as workspaces
# (sdql::work), on one thread and on three; and CSR inputs, damaged or not, checked by
# the kernel block by block (sdql::checked_block; their values in the result where each
# is a factor of a term of it), on one thread and on two.  Then
# the loops run in chunks on several threads (the agreement property runs each kernel on
# three), built with ThreadSanitizer (a race ends its worker process, which fails the run,
# the report on stderr).  Both runs take both cores (pytest-xdist).
sanitize: setup
	LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0 SDQLITE_CXXFLAGS="$(SANITIZE_FLAGS)" HYPOTHESIS_PROFILE=sanitize \
	  $(BIN)/pytest -q -n auto -p no:cacheprovider properties/test_cpp_agreement.py \
	  properties/test_front_door.py::test_the_check_on_two_threads_is_the_check_on_one \
	  tests/test_codegen.py::test_rows_written_in_key_order_are_appended_as_csr \
	  properties/test_csr_writer.py tests/test_codegen.py::test_rows_in_key_order_go_through_the_writer_fast_or_not \
	  'tests/test_codegen.py::test_rows_by_key_add_as_the_rows_loop_does[int32]' \
	  tests/test_codegen.py::test_a_csr_result_s_columns_are_32_bit_where_its_size_allows \
	  tests/test_codegen.py::test_a_csr_result_s_row_pointers_are_narrowed_a_block_at_a_time \
	  tests/test_codegen.py::test_a_csr_result_s_keys_are_checked_as_the_kernel_writes_them \
	  tests/test_codegen.py::test_a_bounded_accumulator_is_a_workspace_and_a_key_that_came_twice_counts_once \
	  tests/test_codegen.py::test_a_row_added_up_in_the_table_until_a_key_beyond_it \
	  tests/test_codegen.py::test_a_csr_matrix_is_checked_by_the_kernel_block_by_block_as_it_reads_it \
	  tests/test_codegen.py::test_values_left_to_the_result_only_where_each_is_a_factor_of_a_term \
	  tests/test_codegen.py::test_rows_of_one_entry_on_the_diagonal_are_stored_a_block_at_a_time \
	  properties/test_front_door.py::test_malformed_scipy_data_are_the_interpreters_error_or_value \
	  properties/test_fast_door.py::test_the_fast_path_answers_what_the_python_door_answers \
	  properties/test_fast_door.py::test_data_not_plainly_right_are_declined_before_the_kernel_runs \
	  properties/test_fast_door.py::test_a_kernel_that_fails_is_declined_and_an_interrupt_raised \
	  properties/test_fast_door.py::test_a_plan_made_otherwise_is_an_error_not_a_crash
	LD_PRELOAD="$$($(CXX) -print-file-name=libtsan.so)" TSAN_OPTIONS=halt_on_error=1 \
	SDQLITE_CXXFLAGS="$(TSAN_FLAGS)" HYPOTHESIS_PROFILE=sanitize \
	  $(BIN)/pytest -s -q -n auto -p no:cacheprovider properties/test_cpp_agreement.py \
	  properties/test_front_door.py::test_the_check_on_two_threads_is_the_check_on_one \
	  tests/test_codegen.py -k "agree or two_threads or chunks or workspace or table_until or block_by_block"

bench: setup
	$(BIN)/python -m benchmarks.optimizer
	$(BIN)/python -m benchmarks.kernels --readme
	$(BIN)/python -m benchmarks.interpreter

# The gate's own strength: plant each mutant of mutation/operators.py's table in the AD,
# rewrite, semantics and backend modules and run the tests that reach it (docs/reference/testing.md).
mutation: setup
	$(BIN)/python -m mutation --report

# A seeded sample of 15 mutants per module: a check before stopping.
mutation-quick: setup
	$(BIN)/python -m mutation --quick

# §7 against PyTorch, JAX, TensorFlow and scipy (benchmarks/peers): the frameworks live in
# their own environment, never needed by the tests. QUICK=1 for the few-minute sweep.
PEERS := .venv-peers
bench-peers: check-system $(PEERS)/.installed $(PEERS)/matrices
	$(PEERS)/bin/python -m benchmarks.peers $(if $(QUICK),--quick)
	$(if $(QUICK),,$(PEERS)/bin/python -m benchmarks.peers --probe)

$(PEERS)/.installed: pyproject.toml
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/pip install --quiet --upgrade pip
	$(PEERS)/bin/pip install --quiet -e '.[peers]'
	@touch $@

# Real sparse matrices that a Debian package ships (R's Matrix package: lund_a, pores_1);
# the harness runs without them if the download fails.
$(PEERS)/matrices:
	mkdir -p $@.tmp
	cd $@.tmp && apt-get download r-cran-matrix >/dev/null 2>&1 && \
	  dpkg-deb -x r-cran-matrix_*.deb x && \
	  cp x/usr/lib/R/library/Matrix/external/lund_a.mtx x/usr/lib/R/library/Matrix/external/pores_1.mtx . \
	  || echo "no real matrices: apt-get download r-cran-matrix failed"
	rm -rf $@.tmp/x $@.tmp/*.deb
	mv $@.tmp $@

properties: setup
	HYPOTHESIS_PROFILE=$(PROFILE) $(BIN)/pytest properties

clean:
	rm -rf $(VENV) $(PEERS) .hypothesis .mypy_cache .ruff_cache .pytest_cache *.egg-info docs/_build
