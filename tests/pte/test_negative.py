"""Negative `.pte` fixtures, built here: each required key missing, a truncated file, random
bytes, an out-of-vocab draft. Each gets a clear error from `gate`, `check` and `run`."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402
from eagle3_check.errors import MetadataError, OptionError  # noqa: E402
from eagle3_check.program.contract import REQUIRED_KEYS, read_metadata  # noqa: E402
from eagle3_check.program.pte_backend import PteBackend  # noqa: E402
from eagle3_check.program.pte_edit import omit_metadata  # noqa: E402

pytestmark = pytest.mark.pte


@pytest.fixture(scope="module")
def negatives(pte_path, oov_pte_path, tmp_path_factory) -> dict[str, tuple]:
    """name -> (path, message fragment every command must print)."""
    d = tmp_path_factory.mktemp("negatives")
    out = {}
    for key in REQUIRED_KEYS:
        out[f"no-{key}"] = (omit_metadata(pte_path, d / f"no-{key}.pte", [key]),
                            f"missing required key '{key}'")
    data = pte_path.read_bytes()
    (d / "truncated.pte").write_bytes(data[: len(data) // 3])
    out["truncated"] = (d / "truncated.pte", "truncated or corrupt")
    (d / "random.pte").write_bytes(os.urandom(65536))
    out["random-bytes"] = (d / "random.pte", "not an ExecuTorch program")
    out["oov-draft"] = (oov_pte_path, "contract violated: draft_decode returned id")
    return out


NAMES = [f"no-{k}" for k in REQUIRED_KEYS] + ["truncated", "random-bytes", "oov-draft"]


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_omitted_key_is_named_by_read_metadata(negatives, key):
    program = PteBackend(negatives[f"no-{key}"][0])
    assert key not in program.metadata()
    with pytest.raises(MetadataError, match=f"missing required key '{key}'"):
        read_metadata(program.metadata())


def test_omitting_an_unknown_key_is_refused(pte_path, tmp_path):
    with pytest.raises(OptionError, match="--omit-metadata get_colour"):
        omit_metadata(pte_path, tmp_path / "x.pte", ["get_colour"])


@pytest.mark.parametrize("name", NAMES)
def test_gate_fails_with_the_right_message(negatives, name, tmp_path, capsys):
    path, named = negatives[name]
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "count", "text": "Count from one to ten."}]}))
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    rc = main(["gate", "--pte", str(path), "--fixture", "tiny-llama", "--prompts", str(prompts),
               "--max-new-tokens", "8", "--report", str(report), "--junit", str(junit), "--suite", "none"])
    out = capsys.readouterr().out
    assert rc == 1 and "GATE: FAIL" in out and named in out
    data = json.loads(report.read_text())
    assert data["passed"] is False
    failed = [c for c in data["checks"] if c["status"] == "fail"]
    assert failed and named in failed[0]["message"]
    assert "<failure" in junit.read_text() and named in junit.read_text()


@pytest.mark.parametrize("cmd", ["check", "run"])
@pytest.mark.parametrize("name", NAMES)
def test_check_and_run_print_one_clear_error(negatives, name, cmd, capsys):
    path, named = negatives[name]
    argv = [cmd, "--pte", str(path), "--max-new-tokens", "8"]
    argv += ["--prompt", "Count from one to ten."] if cmd == "run" else ["--no-progress"]
    rc = main(argv)
    cap = capsys.readouterr()
    if name == "oov-draft" and cmd == "check":  # broken mid-run: a FAIL verdict per request (issue 11 part 7)
        assert rc == 1 and "Traceback" not in cap.err and named in cap.out, (rc, cap.err)
        return
    assert rc == 2, cap.out
    assert cap.err.startswith("error: ") and named in cap.err and cap.err.count("\n") == 1
