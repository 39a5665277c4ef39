# `make check` is what CI runs (via .ci/run): lint + the CPU test suite.
PY ?= python
PYTEST ?= $(PY) -m pytest

.PHONY: check lint test gpu slow

check: lint test

lint:
	$(PY) -m ruff check eagle3_check tests

test:
	$(PYTEST) -m "not gpu and not slow" -q

gpu:
	$(PYTEST) -m gpu -q

slow:
	$(PYTEST) -m slow -q
