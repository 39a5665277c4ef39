"""`check --device cuda --compile layer|model` through the CLI on the tiny-llama fixture: the
compiled, graph-captured fast path of bench/gpu_bench.py (compiled target forward, compiled
one-token draft steps, both captured as CUDA graphs) passes the check against HF eager in fp32,
with tokens identical to the uncompiled run, request for request.

Each check runs in its own interpreter, as a user's would: dynamo's caches are per process, and
tests/gpu/test_compiled_cuda.py compiles the same functions for other fixtures, dtypes and
attentions, which in one process could pass dynamo's recompile limit and run eagerly unseen. The
child also prints how many graphs dynamo compiled, so a run that compiled nothing fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cuda_marks import COMPILE_ON_CUDA

pytestmark = COMPILE_ON_CUDA

ROOT = Path(__file__).resolve().parents[2]
CHILD = ("import json, sys\n"
         "from eagle3_check.cli import main\n"
         "rc = main(sys.argv[1:])\n"
         "from torch._dynamo.utils import counters\n"
         "print('dynamo ' + json.dumps(dict(counters['stats'])), file=sys.stderr)\n"
         "sys.exit(rc)\n")
_runs: dict = {}


def check(granularity: str) -> tuple[int, dict, dict, float]:
    """(exit code, the --json report, dynamo's stats, wall seconds) of `check --device cuda
    --compile GRANULARITY` on the fixture's own prompt set (fp32, 64 new tokens, K = 4)."""
    if granularity not in _runs:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        argv = ["check", "--fixture", "tiny-llama", "--device", "cuda", "--json", "--compile", granularity]
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=900)
        seconds = time.perf_counter() - t0
        stats = [line for line in proc.stderr.splitlines() if line.startswith("dynamo ")]
        assert stats, proc.stderr[-3000:]
        _runs[granularity] = (proc.returncode, json.loads(proc.stdout), json.loads(stats[-1][7:]), seconds)
    return _runs[granularity]


def tokens(report: dict) -> dict[str, list[int]]:
    return {r["prompt_id"]: r["run"]["tokens"] for r in report["requests"]}


@pytest.mark.parametrize("granularity", ["layer", "model"])
def test_check_compiled_passes_with_the_uncompiled_tokens(granularity):
    rc_off, off, _, s_off = check("off")
    rc, report, stats, seconds = check(granularity)
    print(f"\ncheck --device cuda --compile {granularity}: exit {rc}, {report['counts']}, tau {report['tau']:.3f}, "
          f"{seconds:.1f} s wall (--compile off: exit {rc_off}, tau {off['tau']:.3f}, {s_off:.1f} s); "
          f"dynamo {stats}; info.compile {report['info']['compile']}")
    assert rc_off == 0 and off["passed"] and off["info"]["compile"] == {"granularity": "off"}
    assert rc == 0 and report["passed"], report["counts"]
    assert report["counts"]["identical"] == report["counts"]["requests"] == len(off["requests"])
    same = [pid for pid, t in tokens(report).items() if t == tokens(off)[pid]]
    print(f"tokens identical to --compile off: {len(same)} / {len(off['requests'])} requests")
    assert tokens(report) == tokens(off)
    info = report["info"]
    assert info["cuda_graph"] is True and info["compile"]["granularity"] == granularity
    assert info["compile"]["draft_steps"] is True
    assert stats.get("unique_graphs", 0) >= 2, stats  # the target forward and the draft step, at least
