"""Timing benchmarks (pytest-benchmark): not collected by `make check` (testpaths = tests).

`make bench` runs them; `make bench-compare` fails on a median regression beyond
BENCH_THRESHOLD percent against bench/baselines/timing.json, and on a speculative /
self-reference ratio that grew beyond the same threshold (`--ratio-baseline`). The ratio
is measured in one session, so it carries over between machines better than medians.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture
from eagle3_check.program.eager import EagerBackend
from eagle3_check.tokenizer import Tokenizer

torch.set_num_threads(1)
SPECULATIVE, SELF_REF = "speculative-runner", "self-reference"
_medians: dict[str, float] = {}


def pytest_addoption(parser):
    g = parser.getgroup("eagle3 bench")
    g.addoption("--ratio-baseline", default=None, help="timing baseline JSON whose ratio is the reference")
    g.addoption("--ratio-fail", type=float, default=25.0, help="fail if the ratio grew by more than this %%")


@pytest.fixture(scope="session")
def bench_setup():
    fx = load_fixture(DEFAULT_FIXTURE)
    return EagerBackend.from_fixture(fx), Tokenizer.load(fx.tokenizer_path)


class _Recorder:
    """Keeps a finished benchmark's median under its role in the ratio."""

    def speculative(self, benchmark) -> None:
        _medians[SPECULATIVE] = benchmark.stats.stats.median

    def self_reference(self, benchmark) -> None:
        _medians[SELF_REF] = benchmark.stats.stats.median


@pytest.fixture
def record_median():
    return _Recorder()


def ratio() -> float | None:
    if SPECULATIVE in _medians and SELF_REF in _medians:
        return _medians[SPECULATIVE] / _medians[SELF_REF]
    return None


def baseline_ratio(path: str | Path) -> float | None:
    data = json.loads(Path(path).read_text())
    return data.get("eagle3", {}).get("ratio")


def pytest_benchmark_update_json(config, benchmarks, output_json):
    output_json["eagle3"] = {"ratio": ratio(), "medians_s": dict(_medians),
                             "meaning": f"median {SPECULATIVE} / median {SELF_REF}, same session"}


def ratio_verdict(config) -> tuple[list[str], bool]:
    """Lines to print and whether the ratio grew beyond --ratio-fail percent of the baseline's."""
    r = ratio()
    if r is None:
        return [], False
    lines = [f"{SPECULATIVE} median {_medians[SPECULATIVE] * 1e3:.1f} ms, "
             f"{SELF_REF} median {_medians[SELF_REF] * 1e3:.1f} ms: ratio {r:.3f} "
             f"(< 1: speculation beats plain greedy through the same program)"]
    path = config.getoption("--ratio-baseline")
    if not path:
        return lines, False
    base = baseline_ratio(path)
    if base is None:
        return lines + [f"ratio baseline: {path} has no eagle3.ratio; refresh it with `make bench-baseline`"], True
    grew = (r / base - 1) * 100
    limit = config.getoption("--ratio-fail")
    failed = grew > limit
    lines.append(f"ratio baseline {base:.3f} -> now {r:.3f} ({grew:+.1f}%, limit +{limit:g}%): "
                 f"{'FAIL' if failed else 'ok'}")
    return lines, failed


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    lines, failed = ratio_verdict(session.config)
    session.config._eagle3_ratio_lines = lines
    if failed and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    lines = getattr(config, "_eagle3_ratio_lines", [])
    if lines:
        terminalreporter.section("eagle3 speed ratio")
        for line in lines:
            terminalreporter.write_line(line)
