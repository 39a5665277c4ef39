"""`golden verify` runs torch on one CPU thread unless told otherwise, as `check` does (issue 32:
with torch's default of two threads it cost ~24x as much a prompt on the loaded 2-core machine;
bench/golden_speed.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from eagle3_check.cli import main

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "tiny-llama-random__eager__cpu__float32__k4__n48.json"


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # what a fresh process on a 2-core machine starts with
    yield
    torch.set_num_threads(before)


def test_golden_verify_runs_on_one_thread_by_default(two_threads, capsys):
    assert main(["golden", "verify", str(GOLDEN), "--no-baseline", "--no-progress"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize(("argv", "want"), [
    pytest.param(["verify", "--no-baseline"], 1, id="verify-default"),
    pytest.param(["verify", "--no-baseline", "--threads", "2"], 2, id="verify-threads-2"),
    pytest.param(["baseline", "--threads", "3", "--baseline", "{tmp}/metrics.json"], 3, id="baseline-threads-3"),
])
def test_the_threads_are_set_before_the_goldens_run(two_threads, monkeypatch, tmp_path, argv, want):
    """The goldens themselves replaced by a recorder of the thread count they would run with."""
    import eagle3_check.jobs.golden.verify as golden_check

    seen = []

    def recorder(*a, **kw):
        seen.append(torch.get_num_threads())
        return golden_check.GateOutcome()  # nothing ran: the command fails, which is not what is tested

    monkeypatch.setattr(golden_check, "gate_goldens", recorder)
    main(["golden", *(a.format(tmp=tmp_path) for a in argv), str(GOLDEN), "--no-progress"])
    assert seen == [want]
