"""A golden check where no golden applies to the program fails (the skip rule) with one line that
says why each golden skipped and how to record one that applies (jobs/golden/verify.py
`no_golden_line`; the gate's golden check, in process and through a binary, and `golden verify
--runner exec:`). The route on a real `.pte` is tests/pte/test_golden_none_applies_pte.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3_check.jobs.golden.verify import no_golden_line

SKIPPED = {"tiny-gemma4__eager__cpu__float32__k4__n48": "a float32 golden; this program is a bfloat16 program"}


@pytest.mark.parametrize("golden,where", [(Path("golden"), "golden"), (Path("g/x.json"), "g"), (None, None)],
                         ids=["dir", "file", "default"])
def test_a_bf16_program_without_a_golden_is_told_how_to_record_one(golden, where):
    line = no_golden_line(SKIPPED, "s.pte", "tiny-gemma4", "bfloat16", golden)
    where = where or str(Path(__file__).resolve().parents[3] / "golden")
    assert line.startswith("no golden applies to this program (a bfloat16 program of fixture tiny-gemma4), 1 skipped "
                           "(first: tiny-gemma4__eager__cpu__float32__k4__n48: a float32 golden; "), line
    assert f"record one for it: `eagle3-check golden record --pte s.pte --fixture tiny-gemma4 --dir {where}`" in line
    assert "inside the bfloat16 tie tolerance: where it refuses every prompt, goldens cannot gate" in line
    assert line.endswith(", or drop --golden")


def test_a_float32_program_and_golden_verify_lines():
    line = no_golden_line(SKIPPED, None, "tiny-llama", "float32", Path("golden"), gate=False)
    assert "`eagle3-check golden record --fixture tiny-llama --dtype float32 --dir golden`" in line
    assert "tie tolerance" not in line and "drop --golden" not in line


def test_through_a_binary_the_gates_fixture_names_a_pte_without_a_sidecar(tmp_path):
    """The seed's own export has no sidecar: the gate's --fixture names the fixture to record with."""
    from types import SimpleNamespace

    from eagle3_check.jobs.golden.binary import ExecGoldenOutcome, none_applies

    pte = tmp_path / "seed.pte"
    line = none_applies(ExecGoldenOutcome(skipped=SKIPPED), pte, SimpleNamespace(dtype="bfloat16"), Path("golden"),
                        True, "tiny-gemma4")
    assert f"`eagle3-check golden record --pte {pte} --fixture tiny-gemma4 --dir golden`" in line, line
    assert "(a bfloat16 program of fixture tiny-gemma4)" in line


def test_no_golden_ran_is_said_as_nothing_compared_and_golden_verify_has_no_gate_label():
    """Issue 48/52: zero comparisons printed `golden: identical`, and `golden verify` a `gate: FAIL` line."""
    from eagle3_check.jobs.golden.binary import ExecGoldenOutcome
    from eagle3_check.jobs.golden.verify import GateOutcome

    for outcome in (ExecGoldenOutcome(skipped=SKIPPED, none_applies="no golden applies"),
                    GateOutcome(skipped=SKIPPED)):
        lines = outcome.format().splitlines()
        assert "golden: nothing compared (no golden ran)" in lines, lines
        assert not any("identical" in line for line in lines), lines
        assert not any(line.startswith("gate:") for line in lines), lines
        assert lines[-1] == "verdict: FAIL"
    ran = ExecGoldenOutcome(verified={"g": 2})
    assert "golden: identical" in ran.format().splitlines() and ran.format().endswith("verdict: PASS")
