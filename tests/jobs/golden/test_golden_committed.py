"""The committed goldens (golden/) and metrics baseline (bench/baselines/metrics.json), verified exactly.

Each golden's prompts run once through the reference runner on its own configuration; the
same runs are compared with the golden (tokens and stats) and with the baseline (forwards
per token, tau, n-alpha). A failure prints the diff; if a change is intended, re-record
(docs/goldens.md).
"""

from __future__ import annotations

import importlib.util

import pytest
from test_golden import KMinusOneRunner  # tests/ is on sys.path (pytest's prepend import mode)

from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, list_fixtures, load_fixture
from eagle3_check.jobs.golden.diff import diff_golden, format_diffs
from eagle3_check.jobs.golden.file import golden_root, load_golden, run_golden
from eagle3_check.jobs.golden.metrics import (
    compare_metrics,
    compute_metrics,
    default_baseline_path,
    format_metric_diffs,
    load_baseline,
)
from eagle3_check.jobs.golden.verify import gate_goldens, golden_paths, program_for_key

PATHS = golden_paths() if golden_root().is_dir() else []
RECORD = "eagle3-check golden record --fixture {f} -k 4 --max-new-tokens 48 --only ..."
_outcomes: dict = {}
_programs: dict = {}


def build(key):
    """(program, tokenizer) of a golden key, built once per configuration."""
    pk = (key.fixture, key.backend, key.device, key.dtype)
    if pk not in _programs:
        _programs[pk] = program_for_key(key)
    return _programs[pk]


def gated(path):
    """The gate outcome of one golden file, computed once per session."""
    if path not in _outcomes:
        _outcomes[path] = gate_goldens([path], default_baseline_path(), build=build)
    return _outcomes[path]


def eager_cpu(path) -> bool:
    key = load_golden(path).key
    return key.backend == "eager" and key.device == "cpu"


@pytest.mark.parametrize("fixture_name", list_fixtures(real=False))  # real ones: tests/fixtures/test_real_fixtures.py
def test_every_embedded_fixture_has_a_committed_cpu_golden(fixture_name):
    keys = [load_golden(p).key for p in PATHS]
    assert any(k.fixture == fixture_name and k.device == "cpu" for k in keys), (
        f"no CPU golden for fixture {fixture_name} under golden/; record one: {RECORD.format(f=fixture_name)}"
    )


def test_every_committed_golden_has_a_baseline_entry():
    entries = load_baseline(default_baseline_path())
    missing = [p.stem for p in PATHS if p.stem not in entries]
    assert not missing, f"no metrics baseline entry for {missing}; run `eagle3-check golden baseline`"


def _runnable(path):
    """A golden of a quantized fixture variant needs torchao (it quantizes at load): skipped without it."""
    quantized = load_fixture(load_golden(path).key.fixture).quantization is not None
    missing = quantized and importlib.util.find_spec("torchao") is None
    marks = [pytest.mark.skipif(missing, reason=f"{path.stem} is a quantized fixture: needs torchao (the pte extra), "
                                                "found none: pip install -e .[pte]")]
    if load_golden(path).key.fixture in SLOW_FIXTURES:
        marks.append(pytest.mark.slow)
    marks.append(pytest.mark.shared(f"golden:{path.stem}"))  # its two tests, one `gated` run: on one worker
    return pytest.param(path, id=path.stem, marks=marks)


# Goldens whose check costs over 20 s (each test, as xdist may run the two of a golden on two workers):
# Gemma 3 270M, 34-35 CPU s each plus its GGUF conversion on a clean clone (docs/contributing.md,
# "How long make check takes"); `make slow` runs them. SmolLM2's (4-8 s each) stay in make check.
SLOW_FIXTURES = ("gemma3-270m",)


EAGER_CPU = [_runnable(p) for p in PATHS if eager_cpu(p)]


@pytest.mark.parametrize("path", EAGER_CPU)
def test_committed_golden_verifies_exactly(path):
    outcome = gated(path)
    assert outcome.golden_diffs == [], outcome.format()


@pytest.mark.parametrize("path", EAGER_CPU)
def test_deterministic_metrics_match_the_baseline(path):
    outcome = gated(path)
    assert outcome.metric_diffs == [], outcome.format()


def test_k_minus_one_runner_fails_the_committed_golden_and_baseline():
    """The 'done when' demo on the default fixture's committed K = 4 golden.

    K - 1 only changes the emitted stats where a golden round accepted all K proposals
    (a = K - 1 leaves the same corrected token), so the golden diff is expected exactly then;
    the draft forwards per token change in every case."""
    path = next(p for p in PATHS if eager_cpu(p) and load_golden(p).key.fixture == DEFAULT_FIXTURE
                and load_golden(p).key.k == 4)
    golden = load_golden(path)
    program, tokenizer = build(golden.key)
    bad = run_golden(program, tokenizer, golden, runner=KMinusOneRunner())
    diffs = diff_golden(bad, golden)
    print(format_diffs(diffs))
    full_rounds = any(a == golden.key.k for p in golden.prompts for a in p.accepted)
    assert bool(diffs) == full_rounds, [d.message for d in diffs]
    metric_diffs = compare_metrics(golden.key.stem, compute_metrics(bad.values(), golden.key.k),
                                   load_baseline(default_baseline_path())[golden.key.stem])
    print(format_metric_diffs(metric_diffs))
    assert "draft_per_token" in {d.metric for d in metric_diffs}
    if full_rounds:
        assert next(d for d in metric_diffs if d.metric == "tau").direction == "regression"
