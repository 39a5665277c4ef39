"""Shrinking a failing request (shrink/search.py, jobs/check/shrink.py, shrink/repro.py).

The search on fake probes (what it finds, its budget, its determinism, a flaky runner), the
seeded mutants shrunk to known minimal requests on the embedded fixture (each checked 1-minimal:
one id fewer, one token fewer, a smaller K all stop failing the same way), the out-of-bounds
reseed of the seed's stack-top runner (issue 28), and the repro file and command replayed
through the CLI.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from eagle3_check.cli import main
from eagle3_check.errors import OptionError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.jobs.check.shrink import check_probe, prompt_frame, shrink_report
from eagle3_check.judge.self_ref import SelfReference
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.mutants import factory
from eagle3_check.runners.options import RunOptions
from eagle3_check.shrink.repro import load_repro, split_line
from eagle3_check.shrink.search import Bounds, Failure, Request, failure_kind, shrink
from eagle3_check.suites.toy import ToyProgram

FP32 = tolerance_for("float32")


class Clock:
    """A fake clock: each probe costs `step` seconds."""

    def __init__(self, step: float = 1.0):
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        return self.t


def counting(rule, clock: Clock | None = None):
    """A probe from `rule(req) -> kind or None`, recording every request it was asked."""
    asked: list[Request] = []

    def probe(req: Request):
        asked.append(req)
        if clock:
            clock.t += clock.step
        kind = rule(req)
        return Failure(kind, kind) if kind else None

    return probe, asked


ORIGINAL = Request(tuple(range(100, 120)), 64, 4)
BOUNDS = Bounds(frame_head=1, frame_tail=0, min_prompt=1, k_range=(1, 7))


def test_the_worked_example_of_the_module_doc():
    probe, _ = counting(lambda r: "crashed" if r.max_new_tokens > 5 else None)
    res = shrink(ORIGINAL, probe, BOUNDS)
    assert res.shrunk == Request((100,), 6, 1) and res.complete
    assert res.steps == ["prompt 20 -> 1 ids", "max new tokens 64 -> 6", "K 4 -> 1"]


def test_delta_debugging_keeps_the_ids_that_matter_in_order_and_the_frame():
    probe, _ = counting(lambda r: "diverged" if {107, 113} <= set(r.prompt_ids) else None)
    res = shrink(ORIGINAL, probe, Bounds(frame_head=2, frame_tail=1, min_prompt=1, k_range=(1, 7)))
    assert res.shrunk.prompt_ids == (100, 101, 107, 113, 119)


def test_the_prompt_never_goes_below_the_min_prefill():
    probe, _ = counting(lambda r: "diverged")
    res = shrink(ORIGINAL, probe, dataclasses.replace(BOUNDS, min_prompt=5))
    assert res.shrunk == Request((100, 101, 102, 103, 104), 1, 1)


def test_only_the_same_kind_of_failure_is_kept():
    """Shorter prompts fail too, but by another rule: they are not taken."""
    probe, _ = counting(lambda r: "length" if len(r.prompt_ids) >= 10 else "crashed")
    res = shrink(ORIGINAL, probe, BOUNDS)
    assert len(res.shrunk.prompt_ids) == 10 and res.failure.kind == "length"


def test_a_request_the_program_refuses_is_not_a_failure():
    def rule(r):
        if r.k < 3:
            raise OptionError(f"chain length K = {r.k}", "K in [3, 7]", "pass -k 3")
        return "diverged"

    probe, _ = counting(rule)
    assert shrink(ORIGINAL, probe, BOUNDS).shrunk.k == 3


def test_the_search_is_deterministic():
    rule = lambda r: "diverged" if sum(r.prompt_ids) % 7 and r.max_new_tokens > 3 else None  # noqa: E731
    (p1, asked1), (p2, asked2) = counting(rule), counting(rule)
    assert shrink(ORIGINAL, p1, BOUNDS).shrunk == shrink(ORIGINAL, p2, BOUNDS).shrunk
    assert asked1 == asked2 and asked1


@pytest.mark.parametrize("budget", [0.0, 3.0, 10.0], ids=["budget-0", "budget-3", "budget-10"])
def test_the_search_stops_within_its_budget(budget):
    clock = Clock(1.0)
    probe, asked = counting(lambda r: "diverged", clock)
    res = shrink(ORIGINAL, probe, BOUNDS, budget_s=budget, clock=clock)
    assert not res.complete
    assert len(asked) <= max(budget, 1)  # the original's probe, the search, the re-run of the result
    assert res.seconds <= max(budget, 1.0)
    assert probe(res.shrunk) is not None  # what it reports still fails


def test_a_flaky_runner_keeps_the_original():
    """A candidate fails once, then passes when the result is re-run: nothing shrunk is reported."""
    seen: set[Request] = set()

    def rule(r):
        if r == ORIGINAL:
            return "diverged"
        first = r not in seen
        seen.add(r)
        return "diverged" if first and len(r.prompt_ids) == 1 else None

    probe, _ = counting(rule)
    res = shrink(ORIGINAL, probe, BOUNDS)
    assert res.shrunk == ORIGINAL and "did not fail again" in res.steps[-1]


def test_a_passing_original_is_refused():
    with pytest.raises(ValueError, match="passes"):
        shrink(ORIGINAL, counting(lambda r: None)[0], BOUNDS)


@pytest.mark.parametrize("message, kind", [
    ("diverged at token 3: runner 5, reference 8 (margin 1.2 vs tolerance 0.1)", "diverged at token #: runner #, reference #"),
    ("crashed: IndexError: index 48 is out of bounds for dimension 0 with size 48",
     "crashed: IndexError: index # is out of bounds for dimension # with size #"),
    ("call protocol: draft_decode wrote KV position 48 >= max_seq_len 48 (+1 more)",
     "call protocol: draft_decode wrote KV position # >= max_seq_len #"),
    ("request 'p1' timed out after 2.5 s", "request … timed out after # s"),
    ("round 2: reseed [5, 6] at 10..12; more", "round #: reseed […] at #..#"),
], ids=["divergence", "crash", "call-protocol", "quoted-name", "list"])
def test_failure_kind(message, kind):
    assert failure_kind(message) == kind


# --- the seeded mutants on the embedded fixture -----------------------------------------------

RAW = RunOptions(raw=True, max_new_tokens=16)


def one_minimal(probe, res, bounds: Bounds) -> list[str]:
    """What still fails the same way one step below the result (empty: the result is 1-minimal)."""
    req, out = res.shrunk, []
    ids = list(req.prompt_ids)
    for i in range(bounds.frame_head, len(ids) - bounds.frame_tail):
        cand = dataclasses.replace(req, prompt_ids=tuple(ids[:i] + ids[i + 1:]))
        if len(cand.prompt_ids) >= bounds.min_prompt and (f := probe(cand)) and f.kind == res.failure.kind:
            out.append(f"without id {i}")
    for cand, what in ((dataclasses.replace(req, max_new_tokens=req.max_new_tokens - 1), "max new - 1"),
                       (dataclasses.replace(req, k=req.k - 1), "K - 1")):
        if cand.max_new_tokens >= 1 and cand.k >= bounds.k_range[0] and (f := probe(cand)) \
                and f.kind == res.failure.kind:
            out.append(what)
    return out


@pytest.mark.parametrize("name, want", [
    ("emit_past_max_new", (1, 2, 1)),
    ("accept_off_by_one", (2, 7, 1)),
    ("chain_feeds_first_g_row", (2, 2, 2)),
    ("bos_twice", (1, 1, 1)),
    ("text_without_bonus", (1, 1, 1)),
], ids=lambda x: x if isinstance(x, str) else "")
def test_a_mutant_shrinks_to_its_known_minimal_request(name, want, fixture, program, tokenizer, hf_reference):
    prompts = [p for p in fixture.prompts() if p.id == "story-long"]
    runner = factory(name)()
    report = run_check(program, tokenizer, hf_reference, prompts, RAW, FP32, runner=runner)
    before = json.dumps(report.to_json(), sort_keys=True)
    [(outcome, res)] = shrink_report(report, prompts, program, tokenizer, hf_reference, RAW, FP32, runner, 60)
    assert (len(res.shrunk.prompt_ids), res.shrunk.max_new_tokens, res.shrunk.k) == want, res.steps
    assert res.complete and res.failure.kind == res.original_failure.kind
    assert res.shrunk.prompt_ids[0] == RAW.bos_id  # the frame (BOS) is kept
    after = report.to_json()
    assert all(r.pop("shrunk") for r in after["requests"])  # the shrunk case sits beside the original ...
    assert json.dumps(after, sort_keys=True) == before  # ... whose verdict and counts are untouched
    probe = check_probe(program, tokenizer, hf_reference, RAW, FP32, runner, text_frame=(1, 0))
    assert probe(res.shrunk).kind == res.failure.kind  # it fails, the same way
    assert one_minimal(probe, res, Bounds(1, 0, 1, (1, 7))) == []


def test_the_reference_runner_has_nothing_to_shrink(fixture, program, tokenizer, hf_reference):
    prompts = fixture.prompts()[:2]
    report = run_check(program, tokenizer, hf_reference, prompts, RAW, FP32)
    assert report.passed
    assert shrink_report(report, prompts, program, tokenizer, hf_reference, RAW, FP32, None, 60) == []


def test_the_frame_is_bos_and_the_template(tokenizer):
    opts = RunOptions()
    ids = [opts.bos_id, *tokenizer.encode(opts.chat_prefix + "Count from one to ten." + opts.chat_suffix)]
    head, tail = prompt_frame(tokenizer, opts, ids)
    assert ids[:head] == [opts.bos_id, *tokenizer.encode(opts.chat_prefix)]
    assert ids[len(ids) - tail:] == tokenizer.encode(opts.chat_suffix)
    assert prompt_frame(tokenizer, RAW, ids) == (1, 0)


# --- issue 28: the seed's stack-top runner reseeds before it checks the room left -------------

TOY_OPTS = RunOptions(raw=True, bos_id=-1, stop_ids=(), stop_token=None, eos_id=None, max_new_tokens=64)


def toy(max_seq_len: int = 48) -> ToyProgram:
    """max_seq_len 48, prefill [4, 47], K 4; the draft misses position 46 (max_seq_len - 2), so the
    round verified at 42 accepts 3 and the next anchor is 46: the context rule stops there, the
    mutant chains on to 48."""
    return ToyProgram(max_seq_len=max_seq_len, min_prefill=4, max_prefill=max_seq_len - 1, chain_len=4,
                      wrong_at={max_seq_len - 2})


def test_the_reseed_past_the_end_shrinks_to_its_smallest_request(tokenizer):
    prog = toy()
    runner = factory("reseed_before_room_check")()
    prompts = [Prompt("L32", "", ids=tuple(range(10, 42)))]
    report = run_check(prog, tokenizer, SelfReference(prog), prompts, TOY_OPTS, FP32, runner=runner)
    assert "draft_decode wrote KV position 48 >= max_seq_len 48" in report.outcomes[0].verdict.message
    [(_, res)] = shrink_report(report, prompts, prog, tokenizer, SelfReference(prog), TOY_OPTS, FP32, runner, 60)
    # L 4 and 5 stop on the context rule before a round lands on 46; L 6 lands there after 8 full rounds
    assert res.shrunk == Request(tuple(range(36, 42)), 42, 4), res.steps  # the toy target reads the last id
    assert res.failure.message.startswith("call protocol: draft_decode wrote KV position 48 >= max_seq_len 48")
    probe = check_probe(prog, tokenizer, SelfReference(prog), TOY_OPTS, FP32, runner)
    assert one_minimal(probe, res, Bounds(0, 0, 4, (1, 7))) == []
    assert run_check(prog, tokenizer, SelfReference(prog), [Prompt("s", "", ids=res.shrunk.prompt_ids)],
                     dataclasses.replace(TOY_OPTS, max_new_tokens=42, chain_len=4), FP32).passed  # the reference


def test_the_program_spec_shrinks_where_the_failure_involves_its_limits(tokenizer):
    prog = toy()
    runner = factory("reseed_before_room_check")()
    prompts = [Prompt("L32", "", ids=tuple(range(10, 42)))]
    report = run_check(prog, tokenizer, SelfReference(prog), prompts, TOY_OPTS, FP32, runner=runner)

    def rebuild(spec):
        p = toy(spec["max_seq_len"])
        return p, SelfReference(p)

    [(_, res)] = shrink_report(report, prompts, prog, tokenizer, SelfReference(prog), TOY_OPTS, FP32, runner, 60,
                               spec={"max_seq_len": 48}, spec_floors={"max_seq_len": 8}, rebuild=rebuild)
    spec = res.shrunk.spec_dict()
    # max_seq_len 9, L 4 = min prefill, K 4: one verify at 4..8 accepts 2 (position 7 = 9 - 2 missed),
    # the anchor lands on 7 with 4 of max new 5 emitted, and the mutant's chain writes 7, 8, 9
    assert res.shrunk.describe() == "L 4, max new tokens 5, K 4, max_seq_len 9", res.steps
    assert res.failure.kind == res.original_failure.kind
    assert f"KV position {spec['max_seq_len']} >= max_seq_len {spec['max_seq_len']}" in res.failure.message


def test_the_reseed_past_the_end_on_the_fixture_crashes_and_shrinks_through_the_cli(tmp_path, capsys, tokenizer):
    """The eager fixture on the spec of issue 28 (max_seq_len 48, prefill [4, 47], K 4), the prompt of
    options/trailing-space (L 32): the draft's cache write at 48 raises, as the binary's did."""
    opts = RunOptions()
    ids = [opts.bos_id, *tokenizer.encode(opts.chat_prefix + "Count from one to ten.  " + opts.chat_suffix)]
    assert len(ids) == 32
    spec = ["--max-seq-len", "48", "--min-prefill", "4", "--max-prefill", "47", "-k", "4"]
    runner = ["--runner", "eagle3_check.mutants:reseed_before_room_check"]
    rc = main(["check", "--fixture", "tiny-llama", *runner, *spec, "--prompt-ids", ",".join(map(str, ids)), "--shrink",
               "--shrink-dir", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1 and "crashed: IndexError" in out
    line = next(x for x in out.splitlines() if x.startswith("shrunk "))
    assert "L 32, max new tokens 64, K 4 -> L 21, max new tokens 27, K 4" in line  # the template's frame: 21 ids
    repro = load_repro(tmp_path / "repro-prompt-ids.json")
    assert repro.request.max_new_tokens == 27 and repro.rule.startswith("crashed: IndexError")
    command = next(x for x in out.splitlines() if x.startswith("  repro: ")).removeprefix("  repro: ")
    assert command.split()[:2] == ["eagle3-check", "check"] and "--max-seq-len 48" in command

    assert main(split_line(command)[1:] + ["--no-progress"]) == 1  # the command reproduces it
    assert "crashed: IndexError" in capsys.readouterr().out


# --- the repro file, replayed -----------------------------------------------------------------

def two_prompts(tmp_path) -> str:
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps({"prompts": [{"id": "sky", "text": "Why is the sky blue?"},
                                            {"id": "count", "text": "Count from one to ten."}]}))
    return str(path)


def test_check_shrink_writes_a_repro_that_check_and_run_replay(tmp_path, capsys):
    runner = "eagle3_check.mutants:emit_past_max_new"
    rc = main(["check", "--fixture", "tiny-llama", "--runner", runner, "--prompts", two_prompts(tmp_path), "--max-new-tokens", "10",
               "--shrink", "--shrink-dir", str(tmp_path), "--no-progress", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1
    shrunk = [r["shrunk"] for r in report["requests"] if r["verdict"]["status"] == "fail"]
    assert shrunk and all(s["shrunk"]["max_new_tokens"] == 2 and s["file"] for s in shrunk)
    first = report["requests"][0]
    repro = json.loads((tmp_path / f"repro-{first['prompt_id']}.json").read_text())
    assert repro["runner"] == runner and repro["prompt_text"] == "" and repro["program"]["sha256"]
    assert repro["original"]["max_new_tokens"] == 10 and repro["rule"].startswith("length:")
    path = str(tmp_path / f"repro-{first['prompt_id']}.json")
    assert main(["check", "--repro", path, "--no-progress", "--json"]) == 1
    again = json.loads(capsys.readouterr().out)
    assert again["requests"][0]["verdict"]["message"] == repro["message"]
    assert main(["run", "--repro", path, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["tokens"] == repro["got"] and len(run["tokens"]) == 3  # one past max new tokens 2


def test_a_repro_on_another_program_is_refused(tmp_path, capsys):
    main(["check", "--fixture", "tiny-llama", "--runner", "eagle3_check.mutants:emit_past_max_new", "--max-new-tokens", "10", "--shrink",
          "--prompts", two_prompts(tmp_path), "--shrink-dir", str(tmp_path), "--no-progress"])
    capsys.readouterr()
    path = next(tmp_path.glob("repro-*.json"))
    assert main(["check", "--repro", str(path), "--fixture", "tiny-gemma4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "the repro was recorded on" in err and "Fix: pass the flags of its command" in err


@pytest.mark.parametrize("argv, what", [
    (["check", "--fixture", "tiny-llama", "--prompt-ids", "2,x"], "comma-separated token ids"),
    (["check", "--fixture", "tiny-llama", "--prompt-ids", "2,5", "--prompts", "fixtures/prompts.json"], "--prompt-ids with --prompts"),
    (["check", "--fixture", "tiny-llama", "--prompt-ids", "2,999999"], "ids below the tokenizer's"),
    (["check", "--prompt-ids", "2,5", "--suite", "context"], "--prompt-ids with --suite"),
    (["check", "--fixture", "tiny-llama", "--shrink", "--shrink-budget", "-3"], "--shrink-budget -3"),
    (["check", "--repro", "no-such-repro.json"], "no-such-repro.json"),
], ids=["not-ids", "two-prompt-sources", "past-vocab", "suite", "negative-budget", "missing-repro"])
def test_bad_replay_flags_are_one_line_errors(argv, what, capsys):
    assert main(argv + ["--no-progress"]) == 2
    err = capsys.readouterr().err
    assert what in err and len(err.strip().splitlines()) == 1


def test_the_html_report_and_junit_show_the_shrunk_case_beside_the_original(tmp_path, capsys):
    html, junit = tmp_path / "check.html", tmp_path / "check.xml"
    rc = main(["check", "--fixture", "tiny-llama", "--runner", "eagle3_check.mutants:emit_past_max_new", "--prompts", two_prompts(tmp_path),
               "--max-new-tokens", "10", "--shrink", "--html", str(html), "--junit", str(junit), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1 and out.count("  repro: eagle3-check check ") == 2
    assert (tmp_path / "repro-sky.json").is_file()  # beside the reports
    page = html.read_text()
    assert 'id="shrunk"' in page and "L 21, max new 2, K 1" in page and "--max-new-tokens 2" in page
    xml = junit.read_text()
    assert 'name="shrunk_max_new_tokens" value="2"' in xml and "repro: eagle3-check check" in xml


def test_a_failing_plain_suite_case_shrinks_and_its_command_replays_it(tmp_path, capsys):
    """prompt_stripped on options/raw-edge-whitespace ('\\n Count from one to ten. \\n', raw): one
    whitespace character is enough; the case's --raw is in the command."""
    runner = ["--runner", "eagle3_check.mutants:prompt_stripped"]
    rc = main(["check", "--suite", "options/raw-edge-whitespace", "--fixture", "tiny-llama", *runner, "--shrink",
               "--shrink-dir", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1
    line = next(x for x in out.splitlines() if x.startswith("shrunk 'options/raw-edge-whitespace'"))
    assert "-> L 2, max new tokens 1, K 1" in line and "prompt ids: runner used" in line
    repro = load_repro(tmp_path / "repro-options_raw-edge-whitespace.json")
    assert repro.prompt_text.isspace() and len(repro.prompt_text) == 1 and "--raw" in repro.command

    assert main(split_line(repro.command)[1:] + ["--no-progress"]) == 1
    assert "prompt ids: runner used" in capsys.readouterr().out


def test_a_forced_suite_case_says_why_it_is_not_shrunk(tmp_path, capsys):
    rc = main(["check", "--suite", "acceptance/full", "--fixture", "tiny-llama", "--runner",
               "eagle3_check.mutants:last_proposal_never_accepted", "--shrink", "--shrink-dir", str(tmp_path),
               "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1 and "acceptance/full: not shrunk: its draft is forced" in out
