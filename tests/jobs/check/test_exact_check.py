"""`check --exact` (jobs/common/exact.py): the same bf16 request on tiny-llama gives ties in normal mode and
none in exact mode, where the verdict is identity (tolerance 0, budget 0) and the report and JSON name
the mode; the routes exact mode does not cover are refused in one line."""

from __future__ import annotations

import json

import pytest
import torch

from eagle3_check.cli import main
from tests.cli.test_bad_input import assert_clean_error

# "hi" and "cache" of fixtures/prompts.json: 3 and 2 tie positions in normal bf16 at 24 new tokens (measured)
PROMPTS = {"prompts": [{"id": "hi", "text": "Hi"}, {"id": "cache", "text": (
    "Why does a cache that rolls back by overwrite need a careful count of positions?")}]}


def check_json(capsys, tmp_path, *flags: str) -> tuple[int, dict]:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(PROMPTS))
    rc = main(["check", "--fixture", "tiny-llama", "--dtype", "bfloat16", "--prompts", str(path),
               "--max-new-tokens", "24", "--json", "--no-progress", *flags])
    out = capsys.readouterr()
    assert out.out.startswith("{"), f"rc {rc}, no JSON on stdout; stderr: {out.err[-3000:]}"
    return rc, json.loads(out.out)


def test_normal_bf16_ties_where_exact_mode_is_identical(capsys, tmp_path):
    rc, normal = check_json(capsys, tmp_path)
    assert normal["info"]["numerics"] == "normal (torch's kernels)"  # rc 1 here: 5 ties in 48 positions exceed 7 %
    assert normal["counts"]["tie_positions"] >= 1, normal["counts"]  # bf16 rounds by shape: verify vs HF
    rc, exact = check_json(capsys, tmp_path, "--exact")
    assert rc == 0 and exact["passed"] is True
    assert exact["info"]["numerics"] == "exact (shape-invariant kernels)"
    assert exact["counts"]["tie_positions"] == 0 and exact["counts"]["fail_positions"] == 0
    assert exact["counts"]["identical_positions"] == exact["counts"]["positions"] > 0
    assert exact["tie_budget"]["ties_allowed"] == 0 and exact["info"]["tie_tolerance"].startswith("0 ")
    assert exact["provenance"]["options"]["exact"] is True


def test_exact_mode_reaches_the_isolated_runner_s_process(capsys, tmp_path):
    """--isolate: the reference runner in its own child process, which installs exact mode for its life
    (jobs/check/job.py child_program); judged in the harness's exact block: identity again."""
    rc, exact = check_json(capsys, tmp_path, "--exact", "--isolate")
    assert rc == 0 and exact["info"]["isolation"] and exact["counts"]["tie_positions"] == 0
    assert exact["counts"]["identical_positions"] == exact["counts"]["positions"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; torch.cuda.is_available() is False")
def test_exact_check_on_cuda_is_identity(capsys, tmp_path):
    """The device runner (CUDA graph on) and the HF reference on the Triton kernels: no tie, no failure."""
    rc, exact = check_json(capsys, tmp_path, "--exact", "--device", "cuda")
    assert rc == 0 and exact["counts"]["tie_positions"] == 0 and exact["counts"]["fail_positions"] == 0
    assert exact["info"]["runner"] == "device" and exact["info"]["numerics"] == "exact (shape-invariant kernels)"


def test_exact_table_names_the_mode(capsys, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"prompts": PROMPTS["prompts"][:1]}))
    rc = main(["check", "--fixture", "tiny-llama", "--dtype", "bfloat16", "--prompts", str(path),
               "--max-new-tokens", "8", "--exact", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0 and "numerics: exact (shape-invariant kernels)" in out and "verdict: PASS" in out


@pytest.mark.parametrize("flags, named", [
    (["--tie-budget", "0.1"], "--exact with --tie-budget"),
    (["--quantize", "int8-weight"], "--exact with --quantize"),
    (["--compile", "layer"], "--exact with --compile"),
], ids=["tie-budget", "quantize", "compile"])
def test_routes_exact_mode_does_not_cover_are_one_line_errors(capsys, flags, named):
    rc = main(["check", "--fixture", "tiny-llama", "--exact", *flags])
    assert_clean_error(capsys, rc, named)


def test_a_normal_bf16_pass_on_ties_says_what_it_cannot_see(capsys, tmp_path):
    """Normal mode passes "hi" on its ties (a budget wide enough); the table and the JSON say the pass
    is within the tolerance's noise and name --exact; exact mode's pass has no such note."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"prompts": PROMPTS["prompts"][:1]}))
    args = ["check", "--fixture", "tiny-llama", "--dtype", "bfloat16", "--prompts", str(path),
            "--max-new-tokens", "24", "--no-progress"]
    rc = main([*args, "--tie-budget", "0.5"])
    out = capsys.readouterr().out
    assert rc == 0 and "note: passed within the tolerance's noise:" in out and "--exact" in out, out
    rc = main([*args, "--tie-budget", "0.5", "--json"])
    budget = json.loads(capsys.readouterr().out)["tie_budget"]
    assert rc == 0 and budget["note"].startswith("passed within the tolerance's noise")
    rc = main([*args, "--exact", "--json"])
    assert rc == 0 and "note" not in json.loads(capsys.readouterr().out)["tie_budget"]
