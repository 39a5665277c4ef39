"""`check --quantize SCHEME` (jobs/gate/quantized.py): the gate's quantized checks in process, on an
eager fixture: the runner against the program's own greedy decoding, and the drift of that decoding
from the full-precision HF target, printed with the gate's drift lines. Bad input is one line each."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torchao.quantization", reason="torchao not installed (it comes with the pte extra): "
                    "pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402


@pytest.fixture
def one_prompt(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"prompts": [{"id": "sky", "text": "Explain why the sky is blue."}]}))
    return str(path)


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv, named", [
    pytest.param(["--quantize", "int3-weight"], "invalid choice: 'int3-weight'", id="unknown-scheme"),
    pytest.param(["--quantize", "int4-weight", "--group-size", "0"], "--group-size", id="group-size-zero"),
    pytest.param(["--quantize", "int4-weight", "--group-size", "48"], "--group-size 48", id="group-size-not-a-divisor"),
    pytest.param(["--group-size", "32"], "--group-size without --quantize", id="group-size-alone"),
    pytest.param(["--max-far-share", "0.1"], "--max-far-share without --quantize", id="threshold-alone"),
    pytest.param(["--quantize", "int8-weight", "--max-far-share", "2"], "--max-far-share 2", id="share-past-one"),
    pytest.param(["--quantize", "int8-weight", "--far-rank", "0"], "--far-rank 0", id="rank-zero"),
    pytest.param(["--quantize", "int8-weight", "--reference", "self"], "--reference self with --quantize",
                 id="self-reference"),
    pytest.param(["--quantize", "int8-weight", "--suite", "edge"], "--suite with --quantize", id="suite"),
    pytest.param(["--quantize", "int8-weight", "--dtype", "bfloat16"], "--dtype bfloat16 with --quantize", id="bf16"),
    pytest.param(["--quantize", "int4-weight", "--fixture", "tiny-llama-int4"], "quantized already",
                 id="variant-already-quantized"),
])
def test_bad_quantize_input_is_one_line(capsys, one_prompt, argv, named):
    err = _error(capsys, ["check", "--fixture", "tiny-llama", "--prompts", one_prompt, "--no-progress", *argv])
    assert named in err, err


def test_check_quantize_prints_the_gate_s_drift_lines(capsys, one_prompt):
    rc = main(["check", "--quantize", "int8-weight", "--prompts", one_prompt, "--max-new-tokens", "12",
               "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "runner vs self reference  PASS" in out and "quantization drift        PASS" in out
    assert "quantization drift (int8-weight per-channel; self reference vs HF full precision, teacher-forced):" in out
    assert "ranks under HF at the " in out and "far divergences " in out
    assert out.rstrip().splitlines()[-1].startswith("CHECK --quantize int8-weight per-channel: PASS")


def test_check_quantize_fails_past_a_tightened_bound_with_json(capsys, one_prompt):
    """The same program, with --min-agreement 1 and --far-rank 1 --max-far-share 0: what it measured
    decides (int4 on tiny-llama diverges), each reason named; exit 1."""
    rc = main(["check", "--quantize", "int4-weight", "--prompts", one_prompt, "--max-new-tokens", "12", "--json",
               "--min-agreement", "1", "--far-rank", "1", "--max-far-share", "0"])
    report = json.loads(capsys.readouterr().out)
    drift = next(c for c in report["checks"] if c["name"] == "quantization drift")
    assert rc == 1 and drift["status"] == "fail", drift["message"]
    d = drift["details"]["drift"]
    assert d["thresholds"]["far_rank"] == 1 and d["divergences"] == sum(d["rank_histogram"].values()) > 0
    assert any(r.startswith("agreement ") for r in d["reasons"])
    assert any(r.startswith("far divergences ") for r in d["reasons"])
    assert next(c for c in report["checks"] if c["name"] == "runner vs self reference")["status"] == "pass"
