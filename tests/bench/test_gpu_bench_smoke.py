"""bench/gpu_bench.py end to end on CPU at toy size (emulated graphs, no compile, no floor):
the distilled draft, the card, the rows and the ratios are written. Slow (minutes on 2 cores)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.slow
def test_gpu_bench_runs_on_cpu(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import gpu_bench

    out = tmp_path / "bench.json"
    args = ["--device", "cpu", "--layers", "3", "--hidden", "64", "--intermediate", "128", "--heads", "4",
            "--kv-heads", "2", "--vocab", "300", "--prompt-len", "16", "--new", "16", "--ks", "2",
            "--repeats", "1", "--hf-eager-repeats", "1", "--train-prompts", "8", "--train-new", "16",
            "--train-steps", "4", "--train-batch", "4", "--card-ks", "1,2", "--card-prompts", "1",
            "--out", str(out)]
    assert gpu_bench.main(args) == 0
    res = json.loads(out.read_text())
    assert set(res["results"]) >= {"hf-eager", "self-graph", "spec-K4-eager-target", "spec-K2"}
    assert all("error" not in v for v in res["results"].values()), res["results"]
    assert all(v["identical_to_self_graph"] for n, v in res["results"].items() if n.startswith("spec"))
    assert set(res["card"]["k"]) == {"1", "2"} and res["draft"]["recipe"]["train"]["steps"] == 4
    assert "spec-K2 / self-graph" in res["ratios"]
    sys.modules.pop("gpu_bench", None)
