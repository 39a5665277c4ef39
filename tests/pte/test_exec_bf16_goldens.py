"""bf16 goldens through a runner binary (issue 28 item 5), in CI with the fake stack-top binary: every
committed golden is either verified or skipped with its reason, counted; never a silent mismatch.

The committed bf16 golden is a real fixture's (golden/smollm2-135m__eager__cpu__bfloat16__k4__n16.json:
a tiny fixture's bf16 margins all fall inside the bf16 tie tolerance 0.516 at token 0, so no tiny bf16
golden can be recorded; docs/runner-binaries.md has the measurement). Through the fake on the tiny
`.pte` files it skips, for its dtype on a float32 program and for its fixture on a bf16 one; the
real route (the stack-top binary on a bf16 SmolLM2 export) is measured in docs/runner-binaries.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.jobs.golden.binary import verify_exec_goldens  # noqa: E402
from eagle3_check.jobs.golden.file import golden_root, load_golden  # noqa: E402
from eagle3_check.program.pte_backend import PteBackend  # noqa: E402
from eagle3_check.runners.binary.runner import ExecRunner  # noqa: E402

pytestmark = pytest.mark.pte

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "fake_runners" / "fake_seed_runner.py"
BF16 = golden_root() / "smollm2-135m__eager__cpu__bfloat16__k4__n16.json"


def fake() -> ExecRunner:
    return ExecRunner(f"exec:{sys.executable} {FAKE}")


def test_the_bf16_golden_is_committed_and_in_bf16():
    key = load_golden(BF16).key
    assert (key.fixture, key.dtype, key.backend, key.k) == ("smollm2-135m", "bfloat16", "eager", 4)


def test_on_a_bf16_program_every_committed_golden_is_skipped_with_its_reason(bf16_pte_path, tokenizer):
    paths = sorted(golden_root().glob("*.json"))
    out = verify_exec_goldens(paths, fake(), bf16_pte_path, PteBackend(bf16_pte_path), tokenizer)
    assert not out.verified and not out.diffs and not out.passed  # nothing silently compared
    assert set(out.skipped) == {load_golden(p).key.stem for p in paths}
    for path in paths:
        key = load_golden(path).key
        why = out.skipped[key.stem]
        if key.dtype != "bfloat16":
            assert why == f"a {key.dtype} golden; {bf16_pte_path.name} is a bfloat16 program (a binary runs the " \
                "program's own dtype)", why
        else:  # its dtype fits: the fixture is what differs
            assert why == f"a golden of fixture smollm2-135m; {bf16_pte_path.name} is an export of tiny-llama", why


def test_on_a_float32_program_the_bf16_golden_skips_for_its_dtype(pte_path, pte_program, tokenizer):
    out = verify_exec_goldens([BF16], fake(), pte_path, pte_program, tokenizer)
    assert not out.verified and not out.diffs
    assert out.skipped == {load_golden(BF16).key.stem: f"a bfloat16 golden; {pte_path.name} is a float32 program "
                           "(a binary runs the program's own dtype)"}


def test_in_process_the_gate_skips_a_golden_of_another_dtype_too():
    """gate --pte on a bf16 program: the fixture's float32 goldens skip, each saying so (they are
    never run: the program factory is not called)."""
    from eagle3_check.jobs.golden.verify import gate_goldens

    def build(key):
        raise AssertionError(f"{key.stem} was run")

    paths = [p for p in sorted(golden_root().glob("tiny-llama__*.json"))]
    out = gate_goldens(paths, build=build, pte="given", fixture="tiny-llama", dtype="bfloat16")
    assert not out.runs and set(out.skipped) == {load_golden(p).key.stem for p in paths}
    assert all(why == "a float32 golden; this program is a bfloat16 program (a golden applies in its own dtype)"
               for why in out.skipped.values()), out.skipped
