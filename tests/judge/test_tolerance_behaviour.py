"""The tie tolerance, tie rank and tie budget pinned by behaviour (issue 31 item 4), not by name.

Two kinds of case, both computed through the public API (`tolerance_for(dtype).at(top)`, `.top_n`,
`default_budget`, `judge_position`, a report's `passed`):
- the rule at its boundaries: margin / gap at 0.5x, 0.99x, 1.01x, 2x of the tolerance, the rank
  at top_n and top_n + 1, the ties at the budget and one over;
- the rule against the committed measurements (bench/results): every disagreement a correct
  runner showed there is a tie (a narrower tolerance fails here), and a disagreement four times
  the largest margin shift a correct runner showed is not (a tolerance 10x wider fails here), and
  the perturbed programs `docs/calibration.md` says must fail fail when judged again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from eagle3_check.jobs.check.prompt_set import JudgedReport
from eagle3_check.judge.hf import Scores
from eagle3_check.judge.tolerance import default_budget, tolerance_for
from eagle3_check.judge.verdict import FAIL, TIE, Verdict, judge_position
from eagle3_check.status import PASS

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
TOPS = (1.5, 7.5, 24.0, 45.0)  # top logits of the tiny fixtures (1.5 to 7.5) and SmolLM2 (7 to 45)
DTYPES = ("float32", "bfloat16")


def row(top: float, margin: float, gap: float, rank: int | None = 2) -> Scores:
    """One reference row: argmax 5 at `top`, runner-up 6 `margin` below; the runner's token 7 sits
    `gap` below the top at `rank`."""
    return Scores([5], [top], [top - margin], [6], [top - gap], [rank])


def status(dtype: str, top: float, margin: float, gap: float, rank: int | None = 2):
    return judge_position(0, 7, row(top, margin, gap, rank), tolerance_for(dtype)).status


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("top", TOPS, ids=[f"top-{t:g}" for t in TOPS])
@pytest.mark.parametrize("factor, want", [(0.5, TIE), (0.99, TIE), (1.01, FAIL), (2.0, FAIL)],
                         ids=["0.5x-tie", "0.99x-tie", "1.01x-fails", "2x-fails"])
@pytest.mark.parametrize("which", ["margin", "gap", "both"])
def test_margin_and_gap_at_the_tolerance(dtype, top, factor, want, which):
    t = tolerance_for(dtype).at(top)
    margin = t * factor if which in ("margin", "both") else t / 2
    gap = max(margin, t * factor if which in ("gap", "both") else t / 2)  # the runner's token is never above the runner-up
    assert status(dtype, top, margin, gap) == want, f"{which} {factor} x {t:.3g} at top {top} ({dtype})"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset, want", [(-1, TIE), (0, TIE), (1, FAIL)], ids=["top_n-1", "top_n", "top_n+1"])
def test_the_rank_at_top_n_and_one_past(dtype, offset, want):
    tol = tolerance_for(dtype)
    t = tol.at(24.0)
    assert status(dtype, 24.0, t / 2, t / 2, tol.top_n + offset) == want
    assert status(dtype, 24.0, t / 2, t / 2, None) == FAIL  # an unknown rank is never a tie


class _Report(JudgedReport):
    def __init__(self, verdicts: list[Verdict], budget: float):
        self.outcomes = [type("Outcome", (), {"verdict": v})() for v in verdicts]
        self.tie_budget = budget


def _report(positions: int, ties: int, dtype: str) -> _Report:
    """Ten requests over `positions` positions, `ties` of them ties (each request a TIE or PASS)."""
    per, extra = divmod(positions, 10)
    verdicts = []
    for i in range(10):
        n = per + (i < extra)
        k = ties // 10 + (i < ties % 10)
        verdicts.append(Verdict(TIE if k else PASS, "", identical=n - k, ties=k))
    return _Report(verdicts, default_budget(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("positions", [200, 607, 1000])
def test_ties_at_the_budget_pass_one_over_fails(dtype, positions):
    allowed = _report(positions, 0, dtype).ties_allowed
    assert _report(positions, allowed, dtype).passed
    assert not _report(positions, allowed + 1, dtype).passed


def _measured(dtype: str) -> list[dict]:
    files = sorted(RESULTS.glob(f"tolerance-*-{dtype}-*.json"))
    assert files, f"no committed measurement bench/results/tolerance-*-{dtype}-*.json"
    return [json.loads(f.read_text()) for f in files]


PAIRS = ("verify-hf", "decode-hf")  # a runner's verify or decode rows against the verdict's reference


# the one measured disagreement outside the rule (docs/calibration.md, "The tie rank"): the chaotic
# untrained tiny-llama-random on the H200 picks a 5th-ranked token at "sky" token 29; it fails there
KNOWN_FAIL = {("tiny-llama-random", "cuda", "sky", 29)}


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_disagreement_a_correct_runner_showed_is_a_tie(dtype):
    """Where a correct runner's argmax differed from the reference (measured: tiny and real
    fixtures, CPU and H200), its token is a tie: a narrower tolerance or rank fails here."""
    seen, known = 0, set()
    for m in _measured(dtype):
        for p in m["prompts"]:
            for pair in PAIRS:
                for f in p["records"][pair]["flips"]:
                    seen += 1
                    got = status(dtype, f["b_top1"], f["margin"], f["gap"], f["rank"])
                    where = (m["fixture"], m["device"], p["prompt"], f["i"])
                    if where in KNOWN_FAIL:
                        known.add(where)
                        assert got == FAIL, f"{where}: {f}"
                        continue
                    assert got == TIE, f"{m['fixture']} {m['device']} {pair} at {p['prompt']}:{f['i']}: {f}"
    assert dtype == "float32" or known == KNOWN_FAIL
    assert dtype == "float32" or seen > 50  # bf16 has measured disagreements (fp32 none)


@pytest.mark.parametrize("dtype", DTYPES)
def test_four_times_the_largest_measured_shift_is_not_a_tie(dtype):
    """The largest margin shift between a correct runner's rows and the reference's over every
    committed measurement of `dtype`: a token four times that far below the top fails, at the
    smallest and the largest top logit measured (a tolerance 10x wider would make it a tie)."""
    ms = _measured(dtype)
    worst = max(s for m in ms for p in m["prompts"] for pair in PAIRS for s in p["records"][pair]["shift"])
    tops = [abs(t) for m in ms for p in m["prompts"] for t in p["records"]["hf_top1"]]
    far = 4 * worst
    for top in (min(tops), max(tops)):
        assert status(dtype, top, far, far) == FAIL, f"{far:.3g} below a top of {top:.3g} ({dtype})"


def expected(kind: str) -> bool | None:
    """A perturbed program's expected verdict by its kind: the correct one passes, zeroed layers and
    the int8 copy fail; scale:L (one layer x 1.01) cannot be told from bf16 rounding (None: either)."""
    if kind == "none":
        return True
    return None if kind.startswith("scale:") else False


def test_the_perturbed_programs_verdicts_follow_from_the_rule():
    """Each committed perturbed check (bench/results/verdict-perturbed-*.json) judged again from its
    disagreements with today's tolerance and the fixture's budget: the correct program passes, the
    zeroed layers fail by their gaps, the int8 copy by its tie count (a budget twice as wide passes it)."""
    sys.path.insert(0, str(RESULTS.parent))
    try:
        from perturbed_check import rejudge
    finally:
        sys.path.remove(str(RESULTS.parent))
    files = sorted(RESULTS.glob("verdict-perturbed-*.json"))
    assert files, "no committed bench/results/verdict-perturbed-*.json"
    for f in files:
        data = json.loads(f.read_text())
        rows = {r["program"]: r for r in rejudge(data)}
        assert {"none", "int8"} <= set(rows) and any(k.startswith("int4-zero:") for k in rows), f.name
        for kind, row in rows.items():
            if expected(kind) is not None:
                assert row["passed"] == expected(kind), f"{f.name} {kind}: {row['ties']} ties, {row['fails']} fails"
        assert rows["int8"]["fails"] == 0 and rows["int8"]["ties"] > rows["int8"]["ties_allowed"]
