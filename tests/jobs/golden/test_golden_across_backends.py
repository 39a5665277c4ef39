"""A golden run on another backend than its own (`jobs.golden.diff.stats_exact`, DESIGN §3): tokens are
compared exactly everywhere; rounds, accepted counts and tau exactly on the golden's own backend
and in float32, and as notes for a reduced-precision golden run on a `.pte` (SmolLM2's bf16 golden
`code-explain-recursion`: 9 rounds eager, 10 on its XNNPACK export, the same 16 tokens)."""

from __future__ import annotations

import dataclasses

import pytest

from eagle3_check.jobs.golden.diff import diff_golden, stats_exact
from eagle3_check.jobs.golden.file import GoldenKey
from tests.jobs.golden.test_golden_diff_units import golden, prompt, run_of

BF16_EAGER = GoldenKey("toy", "eager", "cpu", "bfloat16", 4, 8)
BF16_PTE = dataclasses.replace(BF16_EAGER, backend="pte")
FP32_EAGER = GoldenKey("toy", "eager", "cpu", "float32", 4, 8)


@pytest.mark.parametrize("key, run_backend, exact", [
    pytest.param(BF16_EAGER, None, True, id="bf16-eager-golden-on-its-own-backend"),
    pytest.param(BF16_EAGER, "eager", True, id="bf16-eager-golden-on-eager"),
    pytest.param(BF16_EAGER, "pte", False, id="bf16-eager-golden-on-a-pte"),
    pytest.param(BF16_PTE, "pte", False, id="bf16-pte-golden-naming-no-program-on-a-pte"),
    pytest.param(FP32_EAGER, "pte", True, id="fp32-eager-golden-on-a-pte"),
])
def test_which_runs_compare_acceptance_exactly(key, run_backend, exact):
    assert stats_exact(key.backend, key.dtype, run_backend) is exact


A, B = "a" * 64, "b" * 64  # two programs' sha256


@pytest.mark.parametrize("golden_sha, run_sha, exact", [
    pytest.param(A, A, True, id="bf16-pte-golden-on-its-own-program"),
    pytest.param(A, B, False, id="bf16-pte-golden-on-another-export"),
    pytest.param(A, None, False, id="bf16-pte-golden-on-an-unnamed-program"),
    pytest.param(None, A, False, id="bf16-pte-golden-naming-no-program"),
])
def test_a_pte_golden_is_exact_on_its_own_program_alone(golden_sha, run_sha, exact):
    assert stats_exact("pte", "bfloat16", "pte", golden_sha, run_sha) is exact
    assert stats_exact("pte", "float32", "pte", golden_sha, run_sha) is True  # fp32: every export agrees


def on(key: GoldenKey):
    return dataclasses.replace(golden(), key=key)


# the golden prompt accepted [2, 0] in 2 rounds (tau 2.0); the run on the other backend emits the same
# five tokens in 3 rounds accepting [1, 0, 0] (1 + 2 + 1 + 1 = 5 tokens, tau 4 / 3)
OTHER_ACCEPTANCE = {"rounds": 3, "accepted": [1, 0, 0], "tau": 4 / 3}


def test_a_bf16_eager_golden_on_a_pte_notes_its_other_acceptance():
    notes: list[str] = []
    p = prompt()
    assert diff_golden({"p": run_of(p, **OTHER_ACCEPTANCE)}, on(BF16_EAGER), "pte", notes) == []
    assert notes == ["toy__eager__cpu__bfloat16__k4__n8 'p': rounds 3, golden 2 (tau 1.333, golden 2.000): "
                     "an eager golden run on a pte program in bfloat16 (acceptance follows the draft's numerics "
                     "there; tokens compared exactly; record a pte golden to compare it exactly); the golden holds no "
                     "draft margins (recorded before goldens kept them, or on a program that returns ids only)"]


@pytest.mark.parametrize("key, run_backend", [
    pytest.param(BF16_EAGER, None, id="bf16-on-its-own-backend"),
    pytest.param(FP32_EAGER, "pte", id="fp32-eager-golden-on-a-pte"),
])
def test_where_acceptance_is_exact_it_is_a_difference(key, run_backend):
    notes: list[str] = []
    (d,) = diff_golden({"p": run_of(prompt(), **OTHER_ACCEPTANCE)}, on(key), run_backend, notes)
    assert (d.field, d.got, d.want, notes) == ("rounds", 3, 2, [])


def test_tokens_are_exact_on_every_backend():
    notes: list[str] = []
    (d,) = diff_golden({"p": run_of(prompt(), tokens=[10, 11, 99, 13, 14])}, on(BF16_EAGER), "pte", notes)
    assert (d.field, d.index, d.got, d.want) == ("tokens", 2, 99, 12)


def test_the_stop_reason_is_still_compared_when_acceptance_is_a_note():
    notes: list[str] = []
    run = run_of(prompt(), stop_reason="stop", **OTHER_ACCEPTANCE)
    (d,) = diff_golden({"p": run}, on(BF16_EAGER), "pte", notes)
    assert (d.field, d.got, d.want, len(notes)) == ("stop_reason", "stop", "max_new", 1)


# --- through a runner binary (jobs/golden/binary.compare_prompt), on a stub binary's output ---------


class StubProc:
    """A finished binary run in the seed's stdout format (text only: judged by bytes)."""

    def __init__(self, stdout: bytes):
        self.stdout, self.stderr = stdout, b""

    def failure(self, timeout):
        return None


class StubRunner:
    """Prints the golden prompt's own bytes with `rounds` and `tau` of another backend."""

    timeout = None

    def __init__(self, text: bytes, L: int, n: int, rounds: int):
        tau = (n - 1) / rounds
        self.out = (f"Prompt tokens: {L}, chain K=4, max_new={n}\n".encode() + text
                    + f"\n[timing] verify=1ms draft=1ms over {rounds} rounds (0.1 / 0.1 ms per round)\n\n"
                      f"--- EAGLE-3 speculative decode ---\ngenerated {n} tokens in {rounds} rounds "
                      f"(tau={tau:.3f})\n".encode())

    def execute(self, *args):
        return StubProc(self.out)


@pytest.mark.parametrize("dtype, expect_diff", [
    pytest.param("bfloat16", False, id="bf16-eager-golden-noted"),
    pytest.param("float32", True, id="fp32-eager-golden-differs"),
])
def test_a_binary_on_a_pte_notes_or_fails_other_acceptance(tmp_path, tokenizer, dtype, expect_diff):
    from eagle3_check.jobs.golden.binary import compare_prompt
    from eagle3_check.jobs.golden.file import golden_root, load_golden
    from eagle3_check.runners.binary.byte_pieces import BytePieces

    g = load_golden(golden_root() / "tiny-llama__eager__cpu__float32__k4__n48.json")
    g = dataclasses.replace(g, key=dataclasses.replace(g.key, dtype=dtype))
    want = g.prompts[0]
    pieces = BytePieces.from_tokenizer_json(tokenizer.path)
    runner = StubRunner(pieces.of(want.tokens), len(want.prompt_ids), len(want.tokens), want.rounds + 1)
    notes: list[str] = []
    diffs = compare_prompt(g.key.stem, want, g, runner, tmp_path / "x.pte", tokenizer, pieces, g.run_options(),
                           {}, None, notes)
    rounds = f"rounds {want.rounds + 1}, golden {want.rounds}"
    if expect_diff:
        assert any(rounds in d for d in diffs) and notes == [], (diffs, notes)
    else:
        assert diffs == [] and len(notes) == 1 and rounds in notes[0], (diffs, notes)
