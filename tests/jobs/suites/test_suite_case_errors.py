"""A chunk below the program's declared min prefill, run as the seed's runner runs it: the program
decides. An error met while one edge case is set up fails that case alone; errors about the whole
run (the program factory: the user's fixture, device, dtype) still end the suite.

The real trigger: a program whose prefill range is [9, 32] (chunk 16), the seed's own export
(prefill min 9 from its INT4 dispatch). The chunk-tail rule of DESIGN §2.4 plans L = 33 as
[16, 8, 9] (16 would leave 1 < 9, so 17 - 9 = 8). The eager program takes the 8 (as the ExecuTorch
runtime does): those cases are judged like any other and pass. A program that refuses it (a
backend guarding its lower bound) fails exactly those cases, each with one line; the others run.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from eagle3_check.errors import OptionError
from eagle3_check.fixtures.registry import ProgramSpec
from eagle3_check.jobs.gate.model import GateInputs, GateReport
from eagle3_check.jobs.suites.execute import SELF, SuiteEnv
from eagle3_check.jobs.suites.report import run_suite
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.program.contract import ProgramWrapper, read_metadata
from eagle3_check.program.eager import EagerBackend
from eagle3_check.report.junit import to_xml
from eagle3_check.runners.rules import prefill_chunks
from eagle3_check.suites import suite_cases

MIN, MAX = 9, 32  # chunk = MAX // 2 = 16 < 2 * MIN - 1 = 17: some tails fall under the min


def test_the_trigger_plans_a_chunk_below_the_min():
    assert prefill_chunks(33, MAX, MIN, None) == [16, 8, 9]  # 16 leaves 17; 16 would leave 1 < 9 -> 8; 9


@pytest.mark.parametrize("L,max_prefill,min_prefill,window", [
    (40, 32, 9, None),  # [16, 15, 9]: every chunk >= 9
    (33, 34, 9, None),  # chunk 17 = 2 * 9 - 1: [17, 16]
    (33, 32, 1, None),  # min 1: [16, 16, 1]
    (20, 32, 1, 8),  # the window's chunk: [8, 8, 4]
], ids=["L40-min9", "chunk17-min9", "min1", "window8"])
def test_plans_whose_chunks_all_fit(L, max_prefill, min_prefill, window):
    assert min(prefill_chunks(L, max_prefill, min_prefill, window)) >= min_prefill


@pytest.mark.parametrize("chunk", range(1, 20), ids=lambda c: f"chunk{c}")
def test_a_chunk_of_twice_the_min_less_one_never_leaves_a_short_chunk(chunk):
    """The fix the error names: chunk >= 2 x min - 1 keeps every chunk of every L >= min in range."""
    short = [L for L in range(MIN, 80) if min(prefill_chunks(L, 2 * chunk, MIN, None)) < MIN]
    assert (not short) == (chunk >= 2 * MIN - 1), short[:3]


class RefusesShortPrefill(ProgramWrapper):
    """A program whose prefill guards its declared lower bound (as a backend with a shape guard would)."""

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        if tokens.shape[-1] < MIN:
            raise OptionError(f"prefill called with length {tokens.shape[-1]}", f"a length in [{MIN}, {MAX}]",
                              "re-export the program with a wider range")
        return self.inner.prefill(tokens, positions)


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


def _gate_check(program, tokenizer, fixture, hf_reference):
    from eagle3_check.jobs.gate.gate import edge_suites_check

    inputs = GateInputs(None, tokenizer, fixture.target_dir, fixture.prompts(), suite="chunked-prefill",
                        fixture=fixture.name, tolerance=tolerance_for("float32"), tie_budget=0.0)
    return edge_suites_check(program, inputs, hf_reference)


@pytest.fixture(scope="module")
def gate_check(narrow, tokenizer, fixture, hf_reference):
    """The chunked-prefill suite on a program that refuses the short chunks."""
    return _gate_check(RefusesShortPrefill(narrow), tokenizer, fixture, hf_reference)


@pytest.fixture(scope="module")
def gate_accepts(narrow, tokenizer, fixture, hf_reference):
    """The same suite on the eager program, which takes them."""
    return _gate_check(narrow, tokenizer, fixture, hf_reference)


def test_the_short_chunk_cases_fail_alone_and_the_rest_run(narrow, gate_check):
    want = _short_chunk_cases(narrow)
    assert "chunked-prefill/max+1" in want  # L = 33 -> [16, 8, 9], the known trigger
    by_name = {c.name: c for c in gate_check.cases}
    assert set(by_name) == {c.name for c in suite_cases("chunked-prefill")}  # every case reported
    assert {n for n, c in by_name.items() if c.status == "fail"} == want, \
        {n: c.message for n, c in by_name.items() if c.status == "fail"}
    for name in want:
        msg = by_name[name].message
        assert "OptionError: chunked prefill of L = " in msg and "\n" not in msg, msg
        assert "the program refused the " in msg and "-token chunk, below its declared min prefill 9" in msg, msg
        assert "DESIGN §2.4" in msg and "export --min-prefill 1" in msg, msg
    ran = [c for c in gate_check.cases if c.status in ("pass", "tie")]
    assert len(ran) >= 5, {c.name: (c.status, c.message) for c in gate_check.cases}


def test_a_program_that_takes_the_short_chunks_is_judged_like_any_run(narrow, gate_accepts):
    want = _short_chunk_cases(narrow)
    by_name = {c.name: c for c in gate_accepts.cases}
    assert {n for n, c in by_name.items() if c.status == "fail"} == set(), \
        {n: c.message for n, c in by_name.items() if c.status == "fail"}
    assert all(by_name[n].status in ("pass", "tie") for n in want), {n: by_name[n].status for n in want}


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
    cases = suite_cases("chunked-prefill/max+1") + suite_cases("chunked-prefill/max")
    prompts = [p.text for p in fixture.prompts()]
    env = SuiteEnv.fixed(RefusesShortPrefill(narrow), tokenizer, SELF, prompts, tolerance_for("float32"),
                         fixture=fixture.name)
    rep = run_suite("chunked-prefill", cases, env)
    got = {r.name: r.status for r in rep.results}
    assert got == {"chunked-prefill/max+1": "fail", "chunked-prefill/max": "pass"}, rep.to_json()
    assert rep.to_json()["counts"]["fail"] == 1 and not rep.passed
    env = SuiteEnv.fixed(narrow, tokenizer, SELF, prompts, tolerance_for("float32"), fixture=fixture.name)
    rep = run_suite("chunked-prefill", cases, env)  # the program that takes the 8: both judged, both pass
    assert {r.name: r.status for r in rep.results} == {"chunked-prefill/max+1": "pass", "chunked-prefill/max": "pass"}


def test_an_error_of_the_program_factory_ends_the_suite(tokenizer, fixture):
    """The factory builds from the user's fixture, device and dtype: its error is about every case."""
    def factory(spec):
        raise OptionError("--device cuda", "a CUDA device", "run on a machine with a GPU, or use --device cpu")

    env = SuiteEnv(factory, tokenizer, SELF, [p.text for p in fixture.prompts()], tolerance_for("float32"))
    with pytest.raises(OptionError, match="--device cuda"):
        run_suite("chunked-prefill", suite_cases("chunked-prefill"), env)
