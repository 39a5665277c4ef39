"""`golden_diff` unit by unit, on hand-built goldens and runs: the exact diff (every field) and the
exact message of each kind of difference, the order the stats are compared in, and which
difference stops the comparison of a prompt. Fast (no program, no tokenizer): mutation testing
runs these for every mutant of the module.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from eagle3_check.jobs.check.prompt_set import CheckReport, RequestOutcome
from eagle3_check.jobs.golden.diff import GoldenDiff, diff_golden, format_diffs, runs_by_prompt
from eagle3_check.jobs.golden.file import Golden, GoldenKey, GoldenPrompt, save_golden
from eagle3_check.judge.verdict import Verdict
from eagle3_check.runners.crash import CRASHED
from eagle3_check.runners.options import RunOptions
from eagle3_check.runners.result import RunResult

KEY = GoldenKey("toy", "eager", "cpu", "float32", 4, 8)
STEM = "toy__eager__cpu__float32__k4__n8"
TIE_TOL = 0.01
OPTIONS = asdict(RunOptions(chain_len=KEY.k, max_new_tokens=KEY.max_new))
TEXT = "abcdefghijklmnopqrstuvwxyz0123"  # 30 characters: the text diff shows 20 from the first difference


def prompt(pid: str = "p", **changes) -> GoldenPrompt:
    """Five tokens: the prefill bonus, then two rounds accepting 2 and 0 proposals (each plus its
    bonus/corrected token: 1 + 3 + 1 = 5); tau = (5 - 1) / 2 = 2.0; one margin per token."""
    p = GoldenPrompt(prompt_id=pid, prompt_text=pid.upper(), prompt_ids=[5, 6, 7], tokens=[10, 11, 12, 13, 14],
                     text=TEXT, rounds=2, accepted=[2, 0], tau=2.0, stop_reason="max_new", min_margin=0.002,
                     margins=[0.5, 0.75, 0.002, 0.01, 2.0])
    return dataclasses.replace(p, **changes)


def golden(*prompts: GoldenPrompt) -> Golden:
    return Golden(KEY, OPTIONS, TIE_TOL, {}, list(prompts) or [prompt()])


def run_of(p: GoldenPrompt, **changes) -> RunResult:
    """The run that emitted exactly what the golden prompt recorded, then `changes`."""
    r = RunResult(prompt_ids=list(p.prompt_ids), tokens=list(p.tokens), text=p.text, rounds=p.rounds,
                  accepted=list(p.accepted), tau=p.tau, stop_reason=p.stop_reason, k=KEY.k, max_new=KEY.max_new)
    return dataclasses.replace(r, **changes)


def diff_json(**fields) -> dict:
    """A GoldenDiff's JSON with the defaults of the unset fields."""
    return {"golden": STEM, "prompt_id": "p", "index": None, "got": None, "want": None, "margin": None,
            "tie": False, **fields}


def only(runs, g: Golden | None = None) -> dict:
    (d,) = diff_golden(runs, g or golden())
    return d.to_json()


# --- identical --------------------------------------------------------------------------------


def test_identical_runs_have_no_difference():
    g = golden(prompt("a"), prompt("b", tokens=[20, 21, 22, 23, 24]))
    assert diff_golden({p.prompt_id: run_of(p) for p in g.prompts}, g) == []


def test_tuples_from_a_runner_compare_equal_to_the_recorded_lists():
    p = prompt()
    r = run_of(p, prompt_ids=tuple(p.prompt_ids), tokens=tuple(p.tokens), accepted=tuple(p.accepted))
    assert diff_golden({"p": r}, golden(p)) == []


def test_a_run_of_a_prompt_the_golden_does_not_hold_is_not_compared():
    p = prompt()
    assert diff_golden({"p": run_of(p), "other": run_of(p, tokens=[1])}, golden(p)) == []


# --- what stops the comparison of a prompt: missing, crashed, K, prompt ids ------------------


def test_a_missing_run():
    assert only({}) == diff_json(field="missing", message=f"{STEM} 'p': no run for this prompt")


@pytest.mark.parametrize("notes,message", [
    (["prefill raised ValueError: boom"], "prefill raised ValueError: boom"),
    (["first", "second"], "first; second"),
    ([], "crashed"),
], ids=["one-note", "two-notes-joined", "no-note"])
def test_a_crashed_run_is_reported_by_its_notes(notes, message):
    r = run_of(prompt(), stop_reason=CRASHED, notes=notes, tokens=[], rounds=0, accepted=[], tau=0.0, k=3,
               prompt_ids=[])
    assert only({"p": r}) == diff_json(field="crashed", message=f"{STEM} 'p': {message}")


def test_a_run_with_another_k():
    r = run_of(prompt(), k=3, prompt_ids=[1], tokens=[1], rounds=9)  # nothing after K is compared
    assert only({"p": r}) == diff_json(field="k", message=f"{STEM} 'p': run used K = 3, golden K = 4",
                                       got=3, want=4)


@pytest.mark.parametrize("ids,index,got,want", [
    ([5, 9, 7], 1, 9, 6),
    ([5, 6], 2, None, 7),
    ([5, 6, 7, 8], 3, 8, None),
    ([4, 6, 7], 0, 4, 5),
], ids=["differs-at-1", "shorter", "longer", "differs-at-0"])
def test_prompt_ids_that_differ_stop_the_comparison(ids, index, got, want):
    r = run_of(prompt(), prompt_ids=ids, tokens=[1], rounds=9)  # tokens and stats are not compared
    gw = "None" if want is None else want
    assert only({"p": r}) == diff_json(
        field="prompt_ids", index=index, got=got, want=want,
        message=f"{STEM} 'p': prompt ids differ at {index} (tokenizer or options changed): got {got}, golden {gw}")


@pytest.mark.parametrize("change,field", [
    ({"stop_reason": CRASHED}, "crashed"),
    ({"k": 3}, "k"),
    ({"prompt_ids": [5, 6]}, "prompt_ids"),
], ids=["crashed", "k", "prompt-ids"])
def test_the_next_prompt_is_still_compared_after_a_stopping_difference(change, field):
    a, b = prompt("a"), prompt("b")
    runs = {"a": run_of(a, **change), "b": run_of(b, rounds=3)}
    assert [(d.prompt_id, d.field) for d in diff_golden(runs, golden(a, b))] == [("a", field), ("b", "rounds")]


def test_the_next_prompt_is_still_compared_after_a_missing_run():
    a, b = prompt("a"), prompt("b")
    assert [(d.prompt_id, d.field) for d in diff_golden({"b": run_of(b, rounds=3)}, golden(a, b))] == [
        ("a", "missing"), ("b", "rounds")]


# --- the first differing token ---------------------------------------------------------------


@pytest.mark.parametrize("index,margin,tie", [
    (0, 0.5, False),
    (1, 0.75, False),
    (2, 0.002, True),
    (3, 0.01, True),  # a margin equal to the tolerance is a tie
    (4, 2.0, False),
], ids=["token-0", "token-1", "tie-under-tolerance", "tie-at-tolerance", "last-token"])
def test_the_first_differing_token_names_both_ids_and_the_margin(index, margin, tie):
    p = prompt()
    tokens = list(p.tokens)
    tokens[index] = 99
    if index < 4:
        tokens[4] = 98  # a later difference is not reported
    what = "a tie: margin within the recorded tolerance 0.01; " if tie else ""
    assert only({"p": run_of(p, tokens=tokens)}) == diff_json(
        field="tokens", index=index, got=99, want=p.tokens[index], margin=margin, tie=tie,
        message=f"{STEM} 'p': token {index} differs: got 99, golden {p.tokens[index]} "
                f"({what}reference margin there {margin:.3g}; {index} tokens before it identical)")


def test_a_tie_message_rounds_the_tolerance_and_margin_to_three_digits():
    p = prompt(margins=[0.5, 0.75, 0.0012345, 0.01, 2.0], min_margin=0.0012345)
    g = dataclasses.replace(golden(p), tie_tolerance=0.0123456)
    (d,) = diff_golden({"p": run_of(p, tokens=[10, 11, 99, 13, 14])}, g)
    assert d.message == (f"{STEM} 'p': token 2 differs: got 99, golden 12 (a tie: margin within the recorded "
                         "tolerance 0.0123; reference margin there 0.00123; 2 tokens before it identical)")


def test_fewer_tokens_than_the_golden():
    assert only({"p": run_of(prompt(), tokens=[10, 11, 12])}) == diff_json(
        field="length", index=3, got=None, want=13, margin=0.01,
        message=f"{STEM} 'p': emitted 3 tokens, golden 5 (first 3 identical; first extra/missing: got None, golden 13)")


def test_more_tokens_than_the_golden():
    assert only({"p": run_of(prompt(), tokens=[10, 11, 12, 13, 14, 15])}) == diff_json(
        field="length", index=5, got=15, want=None, margin=None,
        message=f"{STEM} 'p': emitted 6 tokens, golden 5 (first 5 identical; first extra/missing: got 15, golden None)")


def test_no_tokens_at_all():
    assert only({"p": run_of(prompt(), tokens=[])}) == diff_json(
        field="length", index=0, got=None, want=10, margin=0.5,
        message=f"{STEM} 'p': emitted 0 tokens, golden 5 (first 0 identical; first extra/missing: got None, golden 10)")


def test_a_token_difference_and_a_stat_difference_are_both_reported_token_first():
    r = run_of(prompt(), tokens=[10, 99, 12, 13, 14], rounds=3, tau=1.5)
    assert [(d.field, d.index) for d in diff_golden({"p": r}, golden())] == [("tokens", 1), ("rounds", None)]


def test_a_text_difference_is_not_reported_when_the_tokens_differ():
    r = run_of(prompt(), tokens=[10, 99, 12, 13, 14], text="other")
    assert [d.field for d in diff_golden({"p": r}, golden())] == ["tokens"]


# --- the first differing stat, in order: rounds, accepted, tau, stop reason, text ---------------

ROUNDS = diff_json(field="rounds", got=3, want=2, message=f"{STEM} 'p': rounds 3, golden 2 (tau 1.333, golden 2.000)")
ACCEPTED = diff_json(field="accepted", index=1, got=1, want=0,
                     message=f"{STEM} 'p': accepted count of round 1: got 1, golden 0")
TAU = diff_json(field="tau", got=2.03125, want=2.0, message=f"{STEM} 'p': tau 2.0312, golden 2.0000")
STOP = diff_json(field="stop_reason", got="stop", want="max_new",
                 message=f"{STEM} 'p': stop reason 'stop', golden 'max_new'")
TEXT_DIFF = diff_json(field="text", index=2, got="abX" + TEXT[3:] + "!", want=TEXT,
                      message=f"{STEM} 'p': same tokens, text differs at char 2 (detokenizer changed): "
                              f"got 'Xdefghijklmnopqrstuv', golden 'cdefghijklmnopqrstuv'")
ALL = {"rounds": 3, "tau": 4 / 3, "accepted": [2, 1], "stop_reason": "stop", "text": "abX" + TEXT[3:] + "!"}


@pytest.mark.parametrize("same,want", [
    ((), ROUNDS),
    (("rounds",), dict(ACCEPTED)),
    (("rounds", "accepted"), dict(TAU, got=4 / 3, message=f"{STEM} 'p': tau 1.3333, golden 2.0000")),
    (("rounds", "accepted", "tau"), STOP),
    (("rounds", "accepted", "tau", "stop_reason"), TEXT_DIFF),
], ids=["rounds-first", "then-accepted", "then-tau", "then-stop-reason", "then-text"])
def test_only_the_first_differing_stat_is_reported(same, want):
    p = prompt()
    changes = {k: v for k, v in ALL.items() if k not in same}
    assert only({"p": run_of(p, **changes)}) == want


@pytest.mark.parametrize("changes,want", [
    ({"rounds": 3, "tau": 4 / 3}, ROUNDS),
    ({"accepted": [2, 1]}, ACCEPTED),
    ({"accepted": [3, 0]}, diff_json(field="accepted", index=0, got=3, want=2,
                                     message=f"{STEM} 'p': accepted count of round 0: got 3, golden 2")),
    ({"accepted": [2]}, diff_json(field="accepted", index=1, got=None, want=0,
                                  message=f"{STEM} 'p': accepted count of round 1: got None, golden 0")),
    ({"accepted": [2, 0, 2]}, diff_json(field="accepted", index=2, got=2, want=None,
                                        message=f"{STEM} 'p': accepted count of round 2: got 2, golden None")),
    ({"tau": 2.03125}, TAU),
    ({"stop_reason": "stop"}, STOP),
    ({"text": "abX" + TEXT[3:] + "!"}, TEXT_DIFF),
    ({"text": "Xbc"}, diff_json(field="text", index=0, got="Xbc", want=TEXT,
                                message=f"{STEM} 'p': same tokens, text differs at char 0 (detokenizer changed): "
                                        f"got 'Xbc', golden {TEXT[:20]!r}")),
    ({"text": TEXT[:5]}, diff_json(field="text", index=5, got=TEXT[:5], want=TEXT,
                                   message=f"{STEM} 'p': same tokens, text differs at char 5 (detokenizer changed): "
                                           f"got '', golden {TEXT[5:25]!r}")),
], ids=["rounds", "accepted", "accepted-round-0", "accepted-fewer", "accepted-more", "tau", "stop-reason",
        "text", "text-at-0", "text-shorter"])
def test_each_stat_difference_alone(changes, want):
    assert only({"p": run_of(prompt(), **changes)}) == want


# --- inputs: runs as a report, a mapping, pairs or outcomes; the golden as an object or a file --


def test_runs_by_prompt_reads_a_mapping_as_a_copy():
    r = run_of(prompt())
    runs = {"p": r}
    out = runs_by_prompt(runs)
    assert out == {"p": r} and out is not runs


def test_runs_by_prompt_reads_pairs_and_outcomes():
    a, b = run_of(prompt("a")), run_of(prompt("b"))
    assert runs_by_prompt([("a", a), ("b", b)]) == {"a": a, "b": b}
    assert runs_by_prompt(iter([("a", a)])) == {"a": a}
    outcomes = [SimpleNamespace(prompt_id="a", run=a), SimpleNamespace(prompt_id="b", run=b)]
    assert runs_by_prompt(outcomes) == {"a": a, "b": b}
    assert runs_by_prompt([]) == {}


def test_runs_by_prompt_reads_a_check_report():
    a, b = run_of(prompt("a")), run_of(prompt("b"))
    report = CheckReport(k=4, outcomes=[RequestOutcome("a", a, Verdict("pass", "")),
                                        RequestOutcome("b", b, Verdict("pass", ""))])
    assert runs_by_prompt(report) == {"a": a, "b": b}
    assert diff_golden(report, golden(prompt("a"), prompt("b", tokens=[10, 11, 12, 13, 15]))) == [
        GoldenDiff(STEM, "b", "tokens", f"{STEM} 'b': token 4 differs: got 14, golden 15 "
                   "(reference margin there 2; 4 tokens before it identical)", 4, 14, 15, 2.0, False)]


@pytest.mark.parametrize("as_type", [str, lambda p: p], ids=["str", "path"])
def test_diff_golden_reads_the_golden_from_a_file(tmp_path, as_type):
    p = prompt()
    path = save_golden(golden(p), tmp_path)
    assert diff_golden({"p": run_of(p)}, as_type(path)) == []
    assert [d.to_json() for d in diff_golden({"p": run_of(p, rounds=3, tau=4 / 3)}, as_type(path))] == [ROUNDS]


# --- the text a person reads --------------------------------------------------------------------


def _d(message: str, tie: bool = False) -> GoldenDiff:
    return GoldenDiff(STEM, "p", "tokens", message, tie=tie)


@pytest.mark.parametrize("diffs,text", [
    ([], "golden: identical"),
    ([_d("m1")], "golden: DIFFERS\n  m1"),
    ([_d("m1"), _d("m2")], "golden: DIFFERS\n  m1\n  m2"),
    ([_d("m1", tie=True), _d("m2")], "golden: DIFFERS (1 of them ties)\n  m1\n  m2"),
    ([_d("m1", tie=True), _d("m2", tie=True)], "golden: DIFFERS (2 of them ties)\n  m1\n  m2"),
], ids=["none", "one", "two", "one-tie", "two-ties"])
def test_format_diffs(diffs, text):
    assert format_diffs(diffs) == text


def test_format_diffs_of_a_real_diff_list():
    p = prompt()
    diffs = diff_golden({"p": run_of(p, tokens=[10, 11, 99, 13, 14], rounds=3, tau=4 / 3)}, golden(p))
    assert format_diffs(diffs) == (
        "golden: DIFFERS (1 of them ties)\n"
        f"  {STEM} 'p': token 2 differs: got 99, golden 12 (a tie: margin within the recorded tolerance 0.01; "
        "reference margin there 0.002; 2 tokens before it identical)\n"
        f"  {STEM} 'p': rounds 3, golden 2 (tau 1.333, golden 2.000)")
