"""Judging a runner binary's output (runners.binary.protocol, byte_pieces, judge), without processes.

Outputs are written here in the seed runner's format from a run of our reference runner on
the eager fixture, then mutated the way a buggy binary would; each mutation must fail with
a reason that names it. The lengths a binary may emit (`rules.allowed_lengths`) are pinned
against `rules.expected_length` in test_runner_rules.py.
"""

from __future__ import annotations

import pytest

from eagle3_check.judge.binary import (
    BYTES,
    FAIL,
    IDS,
    PASS,
    Request,
    judge,
)
from eagle3_check.runners.binary.byte_pieces import BytePieces, byte_table
from eagle3_check.runners.binary.protocol import ExecCommand, OutputError, parse_output
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions


def seed_stdout(text: bytes, L: int, k: int, max_new: int, n: int, rounds: int, tau: float | None = None) -> bytes:
    """stdout as the seed's main.cpp prints it."""
    tau = (n - 1) / rounds if rounds and tau is None else (tau or 0.0)
    return (f"Prompt tokens: {L}, chain K={k}, max_new={max_new}\n".encode() + text
            + f"\n[timing] verify=3ms draft=2ms over {rounds} rounds (0.5 / 0.3 ms per round)\n".encode()
            + b"\n--- EAGLE-3 speculative decode ---\n"
            + f"generated {n} tokens in {rounds} rounds (tau={tau:.3f})\n".encode()
            + b"decode: 100.00 tok/s (0.010 s)\nPyTorchObserver {\"prompt_tokens\":3}\n")


@pytest.fixture(scope="module")
def pieces(fixture) -> BytePieces:
    return BytePieces.from_tokenizer_json(fixture.tokenizer_path)


@pytest.fixture(scope="module")
def run(program, tokenizer):
    """A reference run (stands in for the greedy reference too: test_hf_parity pins that equality)."""
    return ReferenceRunner().run(program, tokenizer, "The capital of France", RunOptions(max_new_tokens=20))


def test_byte_table_is_gpt2s():
    t = byte_table()
    assert sorted(t.values()) == list(range(256))
    assert (t["Ġ"], t["Ċ"], t["Ā"], t["!"], t["é"]) == (0x20, 0x0A, 0x00, 0x21, 0xE9)


def test_pieces_concatenate_to_the_tokenizers_decode(pieces, tokenizer):
    ids = tokenizer.encode("Hello  world,\n<turn|> café 日本 <eos>")
    assert pieces.of(ids) == tokenizer.decode(ids).encode("utf-8")
    assert any(not pieces.of([i]).decode("utf-8", "replace") == pieces.of([i]).decode("utf-8", "ignore")
               for i in ids), "a multi-byte character split over pieces: partial UTF-8 pieces are exercised"


def test_locate_and_whole_tokens_worked_example(pieces, tokenizer):
    ids = tokenizer.encode(" the cat")
    first = len(pieces.of(ids[:1]))
    assert pieces.locate(ids, 0) == 0 and pieces.locate(ids, first) == 1
    assert pieces.locate(ids, len(pieces.of(ids))) == len(ids)
    assert pieces.whole_tokens(ids, pieces.of(ids[:1]) + b"\xff") == 1


def test_parse_round_trip():
    out = parse_output(seed_stdout(b"ab\ncd", 7, 4, 20, 5, 2), b"I some log\n[ids] 1,2,3,4,5\n")
    assert (out.prompt_len, out.k, out.max_new, out.text, out.tokens, out.rounds, out.tau) == \
        (7, 4, 20, b"ab\ncd", 5, 2, 2.0)
    assert out.ids == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("mutate,names", [
    (lambda s: s.replace(b"Prompt tokens", b"Prompt ids"), "Prompt tokens"),
    (lambda s: s.replace(b"[timing]", b"[timer]"), "[timing]"),
    (lambda s: s.replace(b"generated", b"emitted"), "generated N tokens"),
    (lambda s: s.replace(b"over 2 rounds", b"over 3 rounds"), "rounds"),
    (lambda s: s + b"bonus line\n", "unexpected stdout line"),
], ids=["header", "timing", "summary", "rounds-disagree", "trailing-line"])
def test_output_off_protocol_is_an_error(mutate, names):
    with pytest.raises(OutputError, match=None) as e:
        parse_output(mutate(seed_stdout(b"xy", 7, 4, 20, 5, 2)), b"")
    assert names in str(e.value)


def test_two_ids_lines_are_an_error():
    with pytest.raises(OutputError, match="one"):
        parse_output(seed_stdout(b"x", 7, 4, 20, 1, 0), b"[ids] 1\n[ids] 1\n")


def _req(run, max_new=20, stops=frozenset(), max_seq_len=256):
    return Request(len(run.prompt_ids), run.k, max_new, max_seq_len, stops)


def _out(run, pieces, tokens=None, ids=False, **over):
    tokens = run.tokens if tokens is None else tokens
    f = dict(text=pieces.of(tokens), L=len(run.prompt_ids), k=run.k, max_new=run.max_new, n=len(tokens),
             rounds=run.rounds)
    f.update(over)
    stderr = ("[ids] " + ",".join(map(str, tokens)) + "\n").encode() if ids else b""
    return parse_output(seed_stdout(f["text"], f["L"], f["k"], f["max_new"], f["n"], f["rounds"]), stderr)


@pytest.mark.parametrize("ids", [False, True], ids=["bytes", "ids"])
def test_a_correct_run_passes_and_says_its_mode(run, pieces, ids):
    ref = run.tokens + [5, 6]
    v = judge(_out(run, pieces, ids=ids), ref, [1.0] * len(ref), pieces, _req(run))
    assert (v.status, v.mode) == (PASS, IDS if ids else BYTES), v.message
    assert f"by {v.mode}" in v.message


@pytest.mark.parametrize("ids", [False, True], ids=["bytes", "ids"])
def test_one_token_too_many_fails_on_length(run, pieces, tokenizer, ids):
    ref = run.tokens + tokenizer.encode(" more")
    out = _out(run, pieces, tokens=ref[:len(run.tokens) + 1], ids=ids, rounds=run.rounds + 1)
    v = judge(out, ref, [1.0] * len(ref), pieces, _req(run))
    assert v.status == FAIL and "length" in v.message and "rules fix 20 (max_new)" in v.message, v.message


def test_garbage_bytes_fail_at_their_offset(run, pieces):
    half = pieces.of(run.tokens[:5])
    out = _out(run, pieces, text=half + b"\xff\xfe" + pieces.of(run.tokens[5:]))
    v = judge(out, run.tokens, [1.0] * len(run.tokens), pieces, _req(run))
    assert v.status == FAIL and f"bytes differ at offset {len(half)}" in v.message and v.index == 5, v.message


def test_missed_stop_fails(run, pieces):
    stop = run.tokens[3]
    v = judge(_out(run, pieces), run.tokens, [1.0] * len(run.tokens), pieces,
              _req(run, stops=frozenset({stop})))
    first = run.tokens.index(stop) + 1
    assert v.status == FAIL and f"rules fix {first} (stop)" in v.message, v.message


@pytest.mark.parametrize("margin,status", [(1e-6, FAIL), (0.5, FAIL)], ids=["near-tie", "diverged"])
def test_ids_divergence_fails_even_at_a_near_tie(run, pieces, margin, status):
    ref = list(run.tokens)
    ref[4] = next(t for t in range(20, 500) if t not in run.tokens)
    v = judge(_out(run, pieces, ids=True), ref, [margin] * len(ref), pieces, _req(run))
    assert (v.status, v.index, v.mode) == (status, 4, IDS), v.message


def test_bytes_divergence_is_never_a_tie(run, pieces):
    ref = list(run.tokens)
    ref[4] = next(t for t in range(20, 500) if t not in run.tokens and pieces.pieces[t][:1] != b"<")
    v = judge(_out(run, pieces), ref, [1e-6] * len(ref), pieces, _req(run))
    assert v.status == FAIL and "margin 1e-06" in v.message and "tie" not in v.message, v.message


@pytest.mark.parametrize("over,names", [
    ({"L": 3}, "header: binary encoded L = 3"),
    ({"k": 2}, "header: binary runs K = 2"),
    ({"max_new": 99}, "header: max_new = 99"),
    ({"rounds": 1}, "impossible"),
], ids=["L", "K", "max_new", "rounds"])
def test_header_and_stats_are_checked(run, pieces, over, names):
    v = judge(_out(run, pieces, **over), run.tokens, [1.0] * len(run.tokens), pieces, _req(run))
    assert v.status == FAIL and names in v.message, v.message


def test_ids_and_bytes_must_agree(run, pieces):
    out = _out(run, pieces, ids=True)
    out.ids = [out.ids[1], out.ids[0], *out.ids[2:]] if out.ids[0] != out.ids[1] else [3, *out.ids[1:]]
    v = judge(out, run.tokens, [1.0] * len(run.tokens), pieces, _req(run))
    assert v.status == FAIL and "disagree" in v.message, v.message


def test_command_line_seed_flags_and_placeholders():
    opts = RunOptions(max_new_tokens=7, stop_ids=(1, 9), chain_len=3, raw=True)
    argv = ExecCommand.parse("exec:./runner --v=1").request("m.pte", "t.json", "hi there", opts)
    assert argv[:2] == ["./runner", "--v=1"]
    assert {"--model_path=m.pte", "--prompt=hi there", "--max_new_tokens=7", "--stop_ids=1,9",
            "--raw_prompt=true", "--chain=3"} <= set(argv)
    templ = ExecCommand.parse("exec:'my runner' -m {model_path} -p {prompt} -n {max_new_tokens}")
    assert templ.request("m.pte", "t.json", "hi there", opts) == ["my runner", "-m", "m.pte", "-p", "hi there",
                                                                   "-n", "7"]


def test_unknown_placeholder_is_a_one_line_error():
    from eagle3_check.errors import InputError

    with pytest.raises(InputError, match=r"placeholder \{model\}.*Fix"):
        ExecCommand.parse("exec:./r --m {model}")


def test_unforced_positions_worked_example():
    """A binary runs unforced: the case's stop index and budget become plain numbers from its pattern."""
    from eagle3_check.jobs.suites.binary import _unforced_positions
    from eagle3_check.suites.case import Case, StopAt
    from eagle3_check.suites.forcing import Forcing
    from eagle3_check.suites.request import CaseSkip

    case = Case("x/stop", "w", forcing=Forcing((4, 0)), stop_at=(StopAt(2, 0),), max_new_at=(1, 2))
    assert _unforced_positions(case, 4) == (1 + 5 + 2, [1 + 5 + 0])  # bonus, round 1 emits a + 1 = 5
    real_draft = Case("x/real", "w", forcing=Forcing((4,), then=None), stop_at=(StopAt(3, 0),))
    with pytest.raises(CaseSkip, match="only forcing fixes"):
        _unforced_positions(real_draft, 4)


@pytest.mark.parametrize("help_text,chain", [("  -model_path (m) type: string\n", False),
                                             ("  -model_path (m) type: string\n  -chain (K) type: int32\n", True),
                                             ("usage: runner\n", True)], ids=["pr-flags", "with-chain", "not-gflags"])
def test_chain_flag_read_from_the_binarys_help(tmp_path, help_text, chain):
    """The runner-PR binary has no --chain: K other than the program's default cannot be asked of it."""
    from eagle3_check.runners.binary.runner import ExecRunner

    exe = tmp_path / "runner"
    exe.write_text(f"#!/bin/sh\nprintf '{help_text.replace(chr(10), chr(92) + 'n')}'\nexit 1\n")
    exe.chmod(0o755)
    assert ExecRunner(f"exec:{exe}").supports_chain() is chain


def _scores(tokens: list[int], diff: dict[int, tuple[int, float, int]] | None = None, top: float = 10.0):
    """Teacher-forced rows for a binary that emitted `tokens`: row i's argmax is tokens[i] except
    at the indices of `diff` ({i: (reference argmax, margin, rank of the binary's token)}); one
    extra row (the next token: `tokens[-1] + 1`, not a stop here)."""
    from eagle3_check.judge.hf import Scores

    diff = diff or {}
    n = len(tokens)
    argmax = [diff[i][0] if i in diff else t for i, t in enumerate(tokens)] + [tokens[-1] + 1]
    margin = [diff[i][1] if i in diff else 5.0 for i in range(n)] + [5.0]
    given = [top - (diff[i][1] if i in diff else 0.0) for i in range(n)]
    rank = [diff[i][2] if i in diff else 1 for i in range(n)]
    return Scores(argmax, [top] * (n + 1), [top - m for m in margin], [-1] * (n + 1), given, rank)


@pytest.mark.parametrize("diff,status,ties,fails", [
    ({4: (7, 1e-6, 2)}, "tie", 1, 0),
    ({4: (7, 1e-6, 2), 9: (7, 2e-6, 2)}, "tie", 2, 0),
    ({4: (7, 0.5, 2)}, "fail", 0, 1),
    ({4: (7, 1e-6, 9)}, "fail", 0, 1),
    ({4: (7, 0.5, 2), 9: (7, 0.5, 3)}, "fail", 0, 2),
], ids=["one-near-tie", "two-near-ties", "far", "near-but-rank-9", "two-far-both-counted"])
def test_scored_ids_judged_per_position(run, pieces, diff, status, ties, fails):
    """A binary that prints its ids gets judge.verdict's rule: a difference inside the
    tolerance (and within the top-N) is a tie, everything else fails, every position counted."""
    from eagle3_check.judge.tolerance import tolerance_for

    v = judge(_out(run, pieces, ids=True), [], [], pieces, _req(run), _scores(run.tokens, diff),
              tolerance_for("float32"))
    assert (v.status, v.ties, v.fails, v.judged, v.mode) == (status, ties, fails, len(run.tokens), IDS), v.message
    assert v.index == min(diff), v.message
    if status == "fail":
        assert v.rank == diff[min(diff)][2] and "diverged at token 4" in v.message
    else:  # a tie is no identical position: the message says how many of the others are
        assert f"the other {len(run.tokens) - ties} identical by ids" in v.message, v.message


def test_scored_ids_length_uses_the_reference_next_token(run, pieces):
    """Stopping one token early fails on length: the next row's token is no stop, the budget is not spent."""
    from eagle3_check.judge.tolerance import tolerance_for

    short = run.tokens[:-1]
    out = _out(run, pieces, tokens=short, ids=True)
    v = judge(out, [], [], pieces, _req(run), _scores(short), tolerance_for("float32"))
    assert v.status == FAIL and "length" in v.message and v.fails == 1, v.message
    ended = short + [_scores(short).argmax[-1]]  # the same run ending on that next token, a stop: it holds
    v = judge(_out(run, pieces, tokens=ended, ids=True), [], [], pieces, _req(run, stops=frozenset({ended[-1]})),
              _scores(ended), tolerance_for("float32"))
    assert v.status == PASS and v.expected == {len(ended): "stop"}, v.message


def test_exec_report_tie_budget():
    from eagle3_check.jobs.check.binary import ExecOutcome, ExecReport
    from eagle3_check.judge.binary import ExecVerdict

    def outcome(status, judged, ties):
        return ExecOutcome("p", 3, ExecVerdict(status, "", IDS, judged=judged, ties=ties), None, None)

    report = ExecReport(k=4, outcomes=[outcome(PASS, 50, 0), outcome("tie", 50, 1)], tie_budget=0.0)
    assert not report.passed and report.counts()["tie_positions"] == 1  # fp32: no ties allowed
    report.tie_budget = 0.01  # 1 % of 100 positions = 1 tie allowed
    assert report.passed and report.ties_allowed == 1
    report.outcomes.append(outcome(FAIL, 1, 0))
    assert not report.passed
