"""`--exact` on every route (jobs/common/exact.py) besides check's prompt set (tests/jobs/check/test_exact_check.py):
the edge suites, golden record / verify, `--workers`, a plug-in in its own process on the remote routes, and
the pytest plugin. Each in bfloat16 on tiny-llama: normal mode has ties where exact mode has none, and each
report names the mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_check.cli import main
from eagle3_check.jobs.golden.file import golden_root
from tests.cli.test_bad_input import assert_clean_error

BF16 = ["--fixture", "tiny-llama", "--dtype", "bfloat16"]
# a plug-in that runs the reference runner only where exact mode is installed in its own process: the remote
# routes' child (jobs/common/isolation.py exact_child) must install it, as check's own child does
EXACT_ONLY = '''
from eagle3_check.exact import exact_active
from eagle3_check.runners.loop import ReferenceRunner


class ExactOnly:
    def run(self, program, tokenizer, prompt, options):
        if not exact_active():
            raise RuntimeError("exact mode is not installed in this runner's process")
        return ReferenceRunner().run(program, tokenizer, prompt, options)
'''


def suite_json(capsys, *flags: str) -> tuple[int, dict]:
    rc = main(["check", "--suite", "acceptance", *BF16, "--json", "--no-progress", *flags])
    (report,) = json.loads(capsys.readouterr().out)["reports"]
    return rc, report


def test_suite_ties_in_normal_bf16_and_none_in_exact_mode(capsys):
    """acceptance on tiny-llama bf16: 5 of 5 cases tie in normal mode (measured), none with --exact."""
    rc, normal = suite_json(capsys)
    assert normal["info"]["numerics"] == "normal (torch's kernels)"
    assert sum(c["status"] == "tie" for c in normal["cases"]) >= 1, normal["cases"]
    rc, exact = suite_json(capsys, "--exact")
    assert rc == 0 and exact["info"]["numerics"] == "exact (shape-invariant kernels)"
    assert [c["status"] for c in exact["cases"]] == ["pass"] * len(exact["cases"]) and exact["cases"]
    assert all(c["details"]["ties"] == 0 and c["details"]["identical"] for c in exact["cases"])


def test_suite_table_names_exact_mode(capsys):
    rc = main(["check", "--suite", "acceptance/full", *BF16, "--no-progress", "--exact"])
    out = capsys.readouterr().out
    assert rc == 0 and "numerics: exact (shape-invariant kernels)" in out


def test_a_plugin_in_its_own_process_runs_in_exact_mode_on_the_suites(capsys, tmp_path, monkeypatch):
    """The suites run a plug-in in its own process, the harness's program over the pipe: with --exact the
    child installs exact mode too (the plug-in fails every case where it is not)."""
    (tmp_path / "exact_only.py").write_text(EXACT_ONLY)
    monkeypatch.syspath_prepend(str(tmp_path))
    rc, exact = suite_json(capsys, "--exact", "--runner", "exact_only:ExactOnly")
    assert rc == 0 and exact["info"]["isolation"], exact["cases"]
    assert [c["status"] for c in exact["cases"]] == ["pass"] * len(exact["cases"])
    rc, normal = suite_json(capsys, "--runner", "exact_only:ExactOnly")
    assert rc == 1 and all(c["status"] == "fail" for c in normal["cases"])
    assert "exact mode is not installed" in normal["cases"][0]["message"]


def test_check_workers_in_exact_mode_is_identity(capsys, tmp_path):
    """--workers 2: each worker child builds its program with exact mode installed (child_program)."""
    from tests.jobs.check.test_exact_check import check_json

    rc, exact = check_json(capsys, tmp_path, "--exact", "--workers", "2")
    assert rc == 0 and exact["info"]["workers"] == 2 and exact["counts"]["tie_positions"] == 0
    assert exact["counts"]["identical_positions"] == exact["counts"]["positions"] > 0
    assert exact["info"]["numerics"] == "exact (shape-invariant kernels)"


# sky and capital: in normal bf16 their reference margins (0.039, 0.0078) sit inside the 0.5-logit tolerance,
# so a normal-mode golden refuses them; exact mode records them (its margins are bit-identical to the runner's)
RECORD = ["golden", "record", *BF16, "--max-new-tokens", "16", "--only", "sky,capital", "--no-progress"]


def test_golden_in_bf16_is_recorded_and_verified_only_in_exact_mode(capsys, tmp_path):
    rc = main([*RECORD, "--dir", str(tmp_path)])
    assert_clean_error(capsys, rc, "reference margin within the tie tolerance (0.5 logits")
    assert main([*RECORD, "--dir", str(tmp_path), "--exact"]) == 0
    (path,) = tmp_path.glob("*.json")
    assert path.name == "tiny-llama__eager__cpu__bfloat16__k4__n16__exact.json"
    assert json.loads(path.read_text())["key"]["numerics"] == "exact"
    capsys.readouterr()
    rc = main(["golden", "verify", str(path), "--exact", "--no-baseline", "--json", "--no-progress"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["passed"] and out["numerics"] == "exact" and out["golden_diffs"] == []
    rc = main(["golden", "verify", str(path), "--no-baseline", "--no-progress"])
    assert "Fix: verify it with --exact" in assert_clean_error(capsys, rc, "was recorded in exact mode (1 golden(s) so)")


def test_a_normal_golden_is_refused_in_exact_mode(capsys):
    committed = golden_root() / "tiny-llama__eager__cpu__float32__k4__n48.json"
    rc = main(["golden", "verify", str(committed), "--exact", "--no-baseline", "--no-progress"])
    assert "Fix: verify it without --exact" in assert_clean_error(capsys, rc, "was recorded in normal mode")


def test_a_golden_key_reads_its_mode_from_its_name():
    from eagle3_check.jobs.golden.file import GoldenKey

    key = GoldenKey("tiny-llama", "eager", "cpu", "bfloat16", 4, 16, "exact")
    assert GoldenKey.from_path(Path(key.filename)) == key
    normal = GoldenKey("tiny-llama", "eager", "cpu", "bfloat16", 4, 16)
    assert normal.filename.endswith("__n16.json") and "numerics" not in normal.to_json()
    assert GoldenKey.from_path(normal.filename).numerics == "normal"


def test_gate_exact_is_a_one_line_refusal(capsys, tmp_path):
    pte = tmp_path / "p.pte"
    pte.write_bytes(b"\0" * 64)
    rc = main(["gate", "--pte", str(pte), "--exact"])
    assert "check --exact" in assert_clean_error(capsys, rc, "gate --exact")


pytest_plugins = ["pytester"]


@pytest.mark.parametrize("numerics, ties", [("normal", True), ("exact", False)])
def test_pytest_plugin_exact_numerics(pytester, numerics, ties):
    """--eagle3-dtype bfloat16 --eagle3-numerics exact: the prompt items pass with no tie and the session's
    tie rule is identity; in normal mode 'hi' ties twice at 24 tokens (measured: past its budget of 1)."""
    prompts = pytester.path / "prompts.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}, {"id": "cache", "text": (
        "Why does a cache that rolls back by overwrite need a careful count of positions?")}]}))
    result = pytester.runpytest("-p", "eagle3_check.pytest_plugin", "-p", "no:cacheprovider",
                                "--eagle3-fixture=tiny-llama", "--eagle3-prompts=prompts.json",
                                "--eagle3-max-new-tokens=24", "--eagle3-goldens=none", "--eagle3-suite=none",
                                "--eagle3-dtype=bfloat16", f"--eagle3-numerics={numerics}", "-v", "-rA")
    text = result.stdout.str()
    if ties:
        assert "tie(s)" in text and "eagle3: tie rule: built-in constants" in text, text
    else:
        result.assert_outcomes(passed=2)
        assert "tie(s)" not in text and "eagle3: tie rule: exact mode: identity" in text, text


def test_pytest_plugin_refuses_exact_with_a_pte(pytester, tmp_path):
    pte = tmp_path / "p.pte"
    pte.write_bytes(b"\0" * 64)
    result = pytester.runpytest("-p", "eagle3_check.pytest_plugin", f"--eagle3-pte={pte}",
                                "--eagle3-numerics=exact", "--collect-only")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--eagle3-numerics exact with --eagle3-pte*"])
