"""The fake of the seed's stack-top runner (fixtures/fake_runners/, FAKE_PROFILE) on real `.pte`
files: text-only output judged per position (ids recovered from the bytes), the profile detected
from its --help and followed by the edge cases (K clamp, chunking past max prefill), chunked
prefill through a binary, goldens per dtype, runtime noise kept out of the quoted errors, and each
of its seeded bugs failing with its named reason.

Each fake run is a fresh Python process (seconds); the tests that make many are marked slow.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.fixtures.registry import Prompt  # noqa: E402
from eagle3_check.jobs.check.binary import run_exec_check  # noqa: E402
from eagle3_check.jobs.golden.binary import verify_exec_goldens  # noqa: E402
from eagle3_check.jobs.golden.file import golden_root, load_golden  # noqa: E402
from eagle3_check.jobs.suites.binary import run_exec_suite  # noqa: E402
from eagle3_check.jobs.suites.execute import SuiteEnv  # noqa: E402
from eagle3_check.judge.tolerance import tolerance_for  # noqa: E402
from eagle3_check.program.pte_backend import PteBackend  # noqa: E402
from eagle3_check.runners.binary.runner import ExecRunner  # noqa: E402
from eagle3_check.runners.options import RunOptions  # noqa: E402
from eagle3_check.suites import suite_cases  # noqa: E402

pytestmark = pytest.mark.pte

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "fake_runners" / "fake_seed_runner.py"
PROMPT = [Prompt("capital", "The capital of France is")]
# 182 raw tokens: past max prefill 128 (chunks [64, 64, 54]); with K = 7 the run ends by the context
# limit (256) on a last round whose reseed reaches position 256 (the seed's reseed order)
LONG = Prompt("long", " ".join(["the cat sat on the mat"] * 20))
RAW = dict(raw=True, chat_prefix="", chat_suffix="", stop_ids=(), stop_token=None, bos_id=1, eos_id=None)


def fake(*flags: str) -> ExecRunner:
    return ExecRunner(f"exec:{sys.executable} {FAKE} {' '.join(flags)}")


@pytest.fixture(scope="module")
def kvwin(kvwin_pte_path) -> PteBackend:
    return PteBackend(kvwin_pte_path)


def check(runner, program, tokenizer, reference, prompts=PROMPT, **opts):
    return run_exec_check(runner, program, tokenizer, reference, prompts, RunOptions(**{"max_new_tokens": 12, **opts}),
                          tolerance=tolerance_for("float32"))


@pytest.mark.parametrize("profile", ["runner-pr", "k-runtime", "chunked-prefill"])
def test_profile_detected_from_the_fakes_help(monkeypatch, profile):
    monkeypatch.setenv("FAKE_PROFILE", profile)
    r = fake()
    assert r.profile.name == profile and "--help lists" in r.profile_how
    assert r.supports_chain() == (profile != "runner-pr")


def test_stack_top_text_only_judged_per_position_with_notes(kvwin, tokenizer, hf_reference):
    report = check(fake(), kvwin, tokenizer, hf_reference)
    o = report.outcomes[0]
    assert report.passed and o.verdict.mode == "recovered" and report.info["judged_by"] == {"recovered": 1}, \
        o.verdict.message
    assert report.info["profile"]["name"] == "chunked-prefill"
    assert any("get_sliding_window" in n and "runtime noise" in n for n in report.info["notes"])


# (bug, options, a phrase its verdict must carry)
BUGS = [
    ("other-token", {}, "diverged at token 1: runner"),
    ("clamp-off-by-one", {"chain_len": 8}, "--chain=8, which the binary's profile runs as K = 7"),
    ("no-chunking", {"max_new_tokens": 4, **RAW}, "prefill failed at pos 0"),
]


@pytest.mark.slow  # four fake runs (~40 s on two busy cores)
@pytest.mark.parametrize("bug,opts,phrase", BUGS, ids=[b[0] for b in BUGS])
def test_seeded_bugs_fail_with_their_reason(kvwin, tokenizer, hf_reference, bug, opts, phrase):
    prompts = [LONG] if bug == "no-chunking" else PROMPT
    good = check(fake(), kvwin, tokenizer, hf_reference, prompts, **opts)
    assert good.passed, good.outcomes[0].verdict.message
    if "chain_len" in opts:
        assert good.outcomes[0].output.k == 7  # --chain=8 clamped, and the harness expected it
    bad = check(fake(f"--fake_bug={bug}"), kvwin, tokenizer, hf_reference, prompts, **opts)
    v = bad.outcomes[0].verdict
    assert not bad.passed and v.status == "fail" and phrase in v.message, v.message
    assert "get_sliding_window" not in v.message  # runtime noise is not quoted as the error


@pytest.mark.slow
def test_the_seeds_out_of_bounds_reseed_is_named(kvwin, tokenizer, hf_reference):
    opts = {"max_new_tokens": 300, "chain_len": 7, **RAW}
    good = check(fake(), kvwin, tokenizer, hf_reference, [LONG], **opts)
    assert good.passed and good.outcomes[0].verdict.expected[good.outcomes[0].output.tokens] == "context"
    v = check(fake("--fake_bug=oob-reseed"), kvwin, tokenizer, hf_reference, [LONG], **opts).outcomes[0].verdict
    assert v.status == "fail" and "Index 256 is out of bounds" in v.message, v.message
    assert "reseeded past max_seq_len 256 after the last verify" in v.message


@pytest.mark.slow
def test_edge_cases_follow_the_profile(kvwin, tokenizer, hf_reference, fixture, monkeypatch):
    names = ("chain/lo-1", "chain/hi+1", "prefill-range/max+1", "chunked-prefill/max+1")
    cases = [c for n in names for c in suite_cases("edge") + suite_cases("chunked-prefill") if c.name == n]
    env = SuiteEnv.fixed(kvwin, tokenizer, hf_reference, [p.text for p in fixture.prompts()], tolerance_for("float32"),
                         fixture=fixture.name)
    top = {r.name: r for r in run_exec_suite("mixed", cases, env, fake()).results}
    assert all(r.status == "pass" for r in top.values()), {n: r.message for n, r in top.items()}
    assert "runs --chain=8 as K = 7" in top["chain/hi+1"].message and top["chain/hi+1"].details["K"] == 7
    assert "runs --chain=0 as K = 4" in top["chain/lo-1"].message
    assert "chunks a prompt past max prefill 128" in top["prefill-range/max+1"].message
    assert len(top["chunked-prefill/max+1"].details["chunks"]) > 1
    assert any("call log is not observable" in n for n in top["chunked-prefill/max+1"].details["notes"])
    monkeypatch.setenv("FAKE_PROFILE", "runner-pr")
    pr = {r.name: r for r in run_exec_suite("mixed", cases, env, fake()).results}
    # --chain=8 asked of a binary without the flag: its refusal (gflags' unknown flag) passes
    assert pr["chain/hi+1"].status == "pass" and "unknown command line flag 'chain'" in pr["chain/hi+1"].message
    assert pr["chunked-prefill/max+1"].status == "skip" and "does not chunk" in pr["chunked-prefill/max+1"].message
    assert pr["prefill-range/max+1"].status == "pass" and "error exit 1" in pr["prefill-range/max+1"].message


def test_goldens_of_another_dtype_skip_per_golden(bf16_pte_path, tokenizer):
    program = PteBackend(bf16_pte_path)
    gold = [p for p in sorted(golden_root().glob("tiny-llama__*.json")) if load_golden(p).key.dtype == "float32"]
    out = verify_exec_goldens(gold, fake(), bf16_pte_path, program, tokenizer)
    assert not out.verified and set(out.skipped) == {load_golden(p).key.stem for p in gold}
    assert all("a float32 golden" in why and "bfloat16 program" in why for why in out.skipped.values())


def test_a_binary_that_cannot_run_the_dtype_skips_saying_so(pte_path, pte_program, tokenizer, monkeypatch):
    monkeypatch.setenv("FAKE_BF16_ONLY", "1")
    src = next(p for p in sorted(golden_root().glob("*.json"))
               if load_golden(p).key.backend == "pte" and load_golden(p).key.fixture == "tiny-llama")  # the session export's
    out = verify_exec_goldens([src], fake(), pte_path, pte_program, tokenizer)
    (why,) = out.skipped.values()
    assert not out.verified and not out.diffs and "unexpected scalar type" in why and "bf16 only" in why
