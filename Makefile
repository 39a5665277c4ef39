# `make check` is what CI runs (via .ci/run): lint + the CPU test suite.
PY ?= python
PYTEST ?= $(PY) -m pytest

.PHONY: check lint test gpu slow mutants

check: lint test

lint:
	$(PY) -m ruff check eagle3_check tests

test:
	$(PYTEST) -m "not gpu and not slow" -q

gpu:
	$(PYTEST) -m gpu -q

slow:
	$(PYTEST) -m slow -q

# Mutation testing of the harness: every seeded runner mutant must be killed (also run,
# first-kill mode, by tests/test_mutants.py inside `make check`).
mutants:
	$(PY) -m eagle3_check.cli mutants --no-progress
