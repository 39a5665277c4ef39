"""Runner binaries without a `.pte`: the runner profiles (runners/profiles.py), the ids recovered from a
text-only binary's bytes (judge/recover.py) and judged per position, runtime noise kept out of the
quoted error lines. The fake binary on a real `.pte` is tests/pte/test_exec_stack_top.py."""

from __future__ import annotations

import pytest

from eagle3_check.errors import InputError
from eagle3_check.judge.binary import RECOVERED, Request, judge
from eagle3_check.judge.hf import Scores
from eagle3_check.judge.recover import NUL, recover_ids
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.runners.binary.byte_pieces import BytePieces
from eagle3_check.runners.binary.protocol import ExecOutput
from eagle3_check.runners.binary.runner import ProcessRun, last_error_line, runtime_noise
from eagle3_check.runners.profiles import CHUNKED, K_RUNTIME, RUNNER_PR, detect, profile_named

# --- profiles ---------------------------------------------------------------------------------


@pytest.mark.parametrize("prof,asked,want", [
    (RUNNER_PR, None, 4), (RUNNER_PR, 6, 4), (K_RUNTIME, None, 4), (K_RUNTIME, 0, 4), (K_RUNTIME, -3, 4),
    (K_RUNTIME, 1, 1), (K_RUNTIME, 6, 6), (K_RUNTIME, 7, 7), (K_RUNTIME, 8, 7), (CHUNKED, 9, 7),
], ids=["pr-default", "pr-ignores-chain", "kr-default", "kr-0-is-default", "kr-negative", "kr-1", "kr-6", "kr-7",
        "kr-8-clamped", "chunked-9-clamped"])
def test_chain_k_follows_main_cpp(prof, asked, want):
    assert prof.chain_k(asked, 4) == want


@pytest.mark.parametrize("prof,L,why", [
    (RUNNER_PR, 33, "exceeds max prefill 32"), (RUNNER_PR, 32, None), (RUNNER_PR, 5, "below min prefill 6"),
    (CHUNKED, 33, None), (CHUNKED, 79, None), (CHUNKED, 80, "does not fit max_seq_len 80"),
    (CHUNKED, 5, "below min prefill 6"),
], ids=["pr-past-max", "pr-max", "pr-below-min", "chunked-past-max", "chunked-last-slot", "chunked-seq-len",
        "chunked-below-min"])
def test_prompt_errors_follow_the_profile(prof, L, why):
    got = prof.prompt_error(L, 6, 32, 80)
    assert (got is None) == (why is None) and (why is None or why in got), got


def test_chunk_plan_is_main_cpps_next_chunk():
    """chunk = max_prefill / 2 = 16 without a window; every prompt longer than it is chunked."""
    assert CHUNKED.chunk_plan(17, 6, 32, None) == [11, 6]
    assert CHUNKED.chunk_plan(33, 9, 32, None) == [16, 8, 9]  # the tail rule's 8 < min 9: kept as the seed has it
    assert CHUNKED.chunk_plan(20, 1, 32, 8) == [8, 8, 4]  # the window wins
    assert RUNNER_PR.chunk_plan(20, 1, 32, 8) == [20] and CHUNKED.chunk_size(32, None) == 16


GFLAGS_TOP = b"""  Flags from main.cpp:
    -chain (Override chain length K at runtime) type: int32 default: -1
    -model_path (Speculator model.pte path.) type: string default: ""
    -prompt_file (Read the prompt text from this file instead of --prompt.)
      type: string default: ""
"""


@pytest.mark.parametrize("text,name,how", [
    (GFLAGS_TOP, "chunked-prefill", "--prompt_file"),
    (GFLAGS_TOP.replace(b"-prompt_file", b"-prompt"), "k-runtime", "#20347 build lists the same flags"),
    (b"    -model_path (x) type: string\n    -prompt (x) type: string\n", "runner-pr", "no --chain"),
], ids=["stack-top", "k-runtime", "runner-pr"])
def test_profile_detected_from_help(text, name, how):
    prof, found = detect(text)
    assert prof.name == name and how in found


def test_unknown_help_and_names():
    assert detect(b"usage: my_runner [options]") is None
    with pytest.raises(InputError, match="one of runner-pr, k-runtime, chunked-prefill"):
        profile_named("stack-top")


# --- ids recovered from bytes -----------------------------------------------------------------

PIECES = BytePieces({0: b" a", 1: b" b", 2: b" c", 3: b" ab", 4: b"x\x00y", 5: b"!", 6: b" d", 7: b"b"})


def rows_for(table: dict[tuple[int, ...], tuple[int, int, float]]):
    """A reference whose row after prefix p is table[p] = (argmax, runner-up, margin), else (5, 6, 9)."""
    def score(tokens: list[int]) -> Scores:
        rows = [table.get(tuple(tokens[:i]), (5, 6, 9.0)) for i in range(len(tokens) + 1)]
        given = [10.0 if t == r[0] else 10.0 - r[2] if t == r[1] else -5.0 for t, r in zip(tokens, rows)]
        rank = [1 if t == r[0] else 2 if t == r[1] else 9 for t, r in zip(tokens, rows)]
        return Scores([r[0] for r in rows], [10.0] * len(rows), [10.0 - r[2] for r in rows], [r[1] for r in rows],
                      given, rank)

    def decode(prefix: list[int], m: int) -> list[int]:
        out = list(prefix)
        for _ in range(m):
            out.append(table.get(tuple(out), (5, 6, 9.0))[0])
        return out[len(prefix):]
    return score, decode


TABLE = {(): (0, 1, 9.0), (0,): (2, 1, 0.01), (0, 1): (2, 0, 9.0), (0, 2): (2, 0, 9.0)}


def test_a_runner_up_taken_is_recovered_and_judged_a_tie():
    score, decode = rows_for(TABLE)
    rec = recover_ids(b" a b c", 3, PIECES, [0, 2, 2], score, decode)
    assert rec.ids == [0, 1, 2] and rec.redecodes == 1 and not rec.quirks
    out = ExecOutput(5, 2, 3, b" a b c", 1, 3, 2.0, 0, 0)
    v = judge(out, [0, 2, 2], [9, 0.01, 9], PIECES, Request(5, 2, 3, 64, frozenset()),
              tolerance=Tolerance("bfloat16", 0, 4, 0.5), recover=lambda o: rec)
    assert v.status == "tie" and v.mode == RECOVERED and v.ties == 1 and v.tie_at == [1], v.message


def test_a_wide_margin_other_token_fails_per_position():
    score, decode = rows_for({**TABLE, (0,): (2, 1, 3.0)})  # 1 is the runner-up, 3 logits below: no tie
    rec = recover_ids(b" a b c", 3, PIECES, [0, 2, 2], score, decode)
    v = judge(ExecOutput(5, 2, 3, b" a b c", 1, 3, 2.0, 0, 0), [0, 2, 2], [9, 3, 9], PIECES,
              Request(5, 2, 3, 64, frozenset()), tolerance=Tolerance("bfloat16", 0, 4, 0.5), recover=lambda o: rec)
    assert v.status == "fail" and v.index == 1 and v.got == 1 and v.want == 2, v.message


def test_bytes_no_candidate_continues_fail_with_the_offset():
    score, decode = rows_for(TABLE)
    rec = recover_ids(b" a?", 2, PIECES, [0, 2], score, decode)
    assert rec.ids is None and rec.offset == 2 and rec.index == 1
    assert "expected id 2 b' c' (rank 1), id 1 b' b' (rank 2); stdout has b'?'" in rec.failure


def test_two_segmentations_backtrack():
    """' ab' (one token, the argmax) and ' a' + 'b' both start the bytes; with N = 3 the argmax path
    (' ab' + ' d': 2 tokens) dead-ends and the walk goes back to ' a'."""
    score, decode = rows_for({(): (3, 0, 0.01), (3,): (5, 6, 9.0), (0,): (7, 2, 9.0), (0, 7): (6, 5, 9.0)})
    rec = recover_ids(b" ab d", 3, PIECES, [3, 5, 5], score, decode)
    assert rec.ids == [0, 7, 6], rec


def test_the_nul_quirk_is_named_not_failed():
    score, decode = rows_for({(): (0, 1, 9.0), (0,): (4, 1, 9.0), (0, 4): (5, 6, 9.0)})
    rec = recover_ids(b" ax!", 3, PIECES, [0, 4, 5], score, decode)
    assert rec.ids == [0, 4, 5] and len(rec.quirks) == 1 and NUL in rec.quirks[0] and "token 1" in rec.quirks[0]


def test_summary_n_bounds_the_walk():
    score, decode = rows_for(TABLE)
    rec = recover_ids(b" a c c", 2, PIECES, [0, 2, 2], score, decode)
    assert rec.ids is None and "the 2 tokens the summary reports end at byte 4" in rec.failure


# --- runtime noise ----------------------------------------------------------------------------

NOISE = "E [program.cpp:67] No method named 'get_sliding_window' in program"


def test_runtime_noise_is_a_note_not_the_quoted_error():
    err = f"I tokenizers:regex.cpp:40] x\n{NOISE}\nE [main.cpp:12] draft_decode failed\n".encode()
    assert len(runtime_noise(err)) == 1 and "get_sliding_window" in runtime_noise(err)[0]
    assert last_error_line(err) == "E [main.cpp:12] draft_decode failed"
    why = ProcessRun(["x"], 1, b"", err, 0.1).failure(10)
    assert "draft_decode failed" in why and "get_sliding_window" not in why
    assert last_error_line(f"{NOISE}\n".encode()) == "(no stderr)" and runtime_noise(b"E [a.cpp:1] b\n") == []


def test_a_top_token_that_is_a_prefix_of_the_printed_one_backtracks_to_it():
    """The seed printed Gemma's added token '<unused47>' whole, where the reference's argmax '<' is a
    prefix of it (the real stack top on the seed's own tiny-gemma4 export, prompt 'harbour'): the
    '<' path dead-ends (the text goes on), and the walk takes the token the bytes continue with."""
    pieces = BytePieces({0: b" a", 6: b" d", 8: b"<", 9: b"<unused47>", 10: b"unused"})
    score, decode = rows_for({(): (0, 6, 9.0), (0,): (8, 6, 9.0)})
    rec = recover_ids(b" a<unused47>", 2, pieces, [0, 8], score, decode)
    assert rec.ids == [0, 9] and rec.failure is None, rec


def test_a_nul_token_printed_as_nothing_mid_run_is_recovered():
    """The seed's printf prints a token whose bytes start with NUL as nothing, anywhere in the run
    (the real stack top, `harbour` token 45): the walk takes the reference's top token's empty form."""
    pieces = BytePieces({0: b" a", 6: b" d", 11: b"\x00", 12: b"a", 13: b" ad"})
    score, decode = rows_for({(): (0, 6, 9.0), (0,): (11, 6, 9.0), (0, 11): (6, 0, 9.0)})
    rec = recover_ids(b" a d", 3, pieces, [0, 11, 6], score, decode)
    assert rec.ids == [0, 11, 6] and len(rec.quirks) == 1 and "token 1 (id 11" in rec.quirks[0], rec


def test_every_token_off_the_reference_and_a_split_found_at_the_end_is_one_pass():
    """A flat model's binary may leave the reference at every token (each a re-decode, 41 here) and
    the text split only one way into N: the walk takes only what leaves the rest splittable into the
    tokens left, so it never dead-ends (before: 41 x b"b" used every token 1 byte short, and the
    backtracking, capped by the re-decodes spent, gave up)."""
    pieces = BytePieces({0: b"a", 1: b"b", 2: b"bb"})
    score, decode = rows_for({tuple([1] * i): (0, 1, 0.01) for i in range(42)})
    rec = recover_ids(b"b" * 42, 41, pieces, [0] * 41, score, decode)
    assert rec.ids == [1] * 40 + [2] and rec.redecodes == 41, rec
