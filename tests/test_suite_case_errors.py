"""An error met while one edge case is set up fails that case alone; errors about the whole run
(the program factory: the user's fixture, device, dtype) still end the suite.

The real trigger: a program whose prefill range is [9, 32] (chunk 16). The chunk-tail rule of
DESIGN §2.4 plans L = 33 as [16, 8, 9] (16 would leave 1 < 9, so 17 - 9 = 8), and the program's
prefill refuses 8 tokens. The cases whose plan holds such a chunk fail with that line; the
others run.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from eagle3_check.errors import OptionError
from eagle3_check.fixtures.registry import ProgramSpec
from eagle3_check.gating.gate_model import GateInputs, GateReport
from eagle3_check.program.contract import read_metadata
from eagle3_check.program.eager import EagerBackend
from eagle3_check.reference.tolerance import tolerance_for
from eagle3_check.report.junit import to_xml
from eagle3_check.run.rules import prefill_chunks, runnable_chunks
from eagle3_check.suites import suite_cases
from eagle3_check.suites.execute import SELF, SuiteEnv
from eagle3_check.suites.report import run_suite

MIN, MAX = 9, 32  # chunk = MAX // 2 = 16 < 2 * MIN - 1 = 17: some tails fall under the min


def test_runnable_chunks_refuses_a_chunk_below_the_min():
    assert prefill_chunks(33, MAX, MIN, None) == [16, 8, 9]  # 16 leaves 17; 16 would leave 1 < 9 -> 8; 9
    with pytest.raises(OptionError) as e:
        runnable_chunks(33, MAX, MIN, None)
    msg = str(e.value)
    assert "\n" not in msg
    for part in ("L = 33", "[16, 8, 9]", "8-token chunk", "min prefill 9", "chunk-tail rule of DESIGN §2.4",
                 "export prefill with min 1", "at least 2 x min prefill - 1 = 17"):
        assert part in msg, (part, msg)


@pytest.mark.parametrize("L,max_prefill,min_prefill,window", [
    (40, 32, 9, None),  # [16, 15, 9]: every chunk >= 9
    (33, 34, 9, None),  # chunk 17 = 2 * 9 - 1: [17, 16]
    (33, 32, 1, None),  # min 1: [16, 16, 1]
    (20, 32, 1, 8),  # the window's chunk: [8, 8, 4]
], ids=["L40-min9", "chunk17-min9", "min1", "window8"])
def test_runnable_chunks_is_the_plan_where_every_chunk_fits(L, max_prefill, min_prefill, window):
    plan = prefill_chunks(L, max_prefill, min_prefill, window)
    assert min(plan) >= min_prefill
    assert runnable_chunks(L, max_prefill, min_prefill, window) == plan


@pytest.mark.parametrize("chunk", range(1, 20), ids=lambda c: f"chunk{c}")
def test_a_chunk_of_twice_the_min_less_one_never_leaves_a_short_chunk(chunk):
    """The fix the error names: chunk >= 2 x min - 1 keeps every chunk of every L >= min in range."""
    short = [L for L in range(MIN, 80) if min(prefill_chunks(L, 2 * chunk, MIN, None)) < MIN]
    assert (not short) == (chunk >= 2 * MIN - 1), short[:3]


@pytest.fixture(scope="module")
def narrow(program):
    """tiny-llama, eager, declaring prefill [9, 32] (the suite's spec wish is [6, 32])."""
    spec = ProgramSpec(**{**program.spec.__dict__, "max_seq_len": 80, "min_prefill": MIN, "max_prefill": MAX})
    return EagerBackend(program.module, spec)


def _short_chunk_cases(program) -> set[str]:
    """The chunked-prefill cases whose L plans a chunk below the min (derived from the rule)."""
    md = read_metadata(program.metadata())
    out = set()
    for case in suite_cases("chunked-prefill"):
        L = case.prompt.resolve_length(md, md.chain_len)
        if not case.expect.error and not case.fixture and L and L >= MIN \
                and min(prefill_chunks(L, MAX, MIN, None)) < MIN:
            out.add(case.name)
    return out


@pytest.fixture(scope="module")
def gate_check(narrow, tokenizer, fixture, hf_reference):
    from eagle3_check.gating.gate import edge_suites_check

    inputs = GateInputs(None, tokenizer, fixture.target_dir, fixture.prompts(), suite="chunked-prefill",
                        fixture=fixture.name, tolerance=tolerance_for("float32"), tie_budget=0.0)
    return edge_suites_check(narrow, inputs, hf_reference)


def test_the_short_chunk_cases_fail_alone_and_the_rest_run(narrow, gate_check):
    want = _short_chunk_cases(narrow)
    assert "chunked-prefill/max+1" in want  # L = 33 -> [16, 8, 9], the known trigger
    by_name = {c.name: c for c in gate_check.cases}
    assert set(by_name) == {c.name for c in suite_cases("chunked-prefill")}  # every case reported
    assert {n for n, c in by_name.items() if c.status == "fail"} == want, \
        {n: c.message for n, c in by_name.items() if c.status == "fail"}
    for name in want:
        msg = by_name[name].message
        assert msg.startswith("OptionError: chunked prefill of L = ") and "\n" not in msg, msg
        assert "8-token chunk" in msg and "min prefill 9" in msg and "DESIGN §2.4" in msg, msg
        assert "export prefill with min 1" in msg, msg
    ran = [c for c in gate_check.cases if c.status in ("pass", "tie")]
    assert len(ran) >= 5, {c.name: (c.status, c.message) for c in gate_check.cases}


def test_gate_counts_and_junit_show_the_failed_cases(narrow, gate_check):
    want = _short_chunk_cases(narrow)
    assert gate_check.status == "fail" and gate_check.details["fail"] == len(want)
    assert gate_check.message.startswith(f"{gate_check.details['identical']} passed, ")
    root = ET.fromstring(to_xml(GateReport([gate_check]).junit_suites()))
    assert int(root.get("failures")) == len(want)
    failed = {tc.get("name") for tc in root.iter("testcase") if tc.find("failure") is not None}
    assert failed == want


def test_the_suite_report_shows_the_failed_case(narrow, tokenizer, fixture):
    """`run_suite` (what `check --suite` prints) on one short-chunk case and one that fits."""
    env = SuiteEnv.fixed(narrow, tokenizer, SELF, [p.text for p in fixture.prompts()], tolerance_for("float32"),
                         fixture=fixture.name)
    rep = run_suite("chunked-prefill", suite_cases("chunked-prefill/max+1") + suite_cases("chunked-prefill/max"), env)
    got = {r.name: r.status for r in rep.results}
    assert got == {"chunked-prefill/max+1": "fail", "chunked-prefill/max": "pass"}, rep.to_json()
    assert rep.to_json()["counts"]["fail"] == 1 and not rep.passed


def test_an_error_of_the_program_factory_ends_the_suite(tokenizer, fixture):
    """The factory builds from the user's fixture, device and dtype: its error is about every case."""
    def factory(spec):
        raise OptionError("--device cuda", "a CUDA device", "run on a machine with a GPU, or use --device cpu")

    env = SuiteEnv(factory, tokenizer, SELF, [p.text for p in fixture.prompts()], tolerance_for("float32"))
    with pytest.raises(OptionError, match="--device cuda"):
        run_suite("chunked-prefill", suite_cases("chunked-prefill"), env)
