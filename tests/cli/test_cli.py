"""The CLI: `check` on the embedded fixture, `run`, JSON output and one-line errors (exit 2)."""

import json

import pytest

from eagle3_check.cli import main


def test_check_json_passes_on_embedded_fixture(capsys, tmp_path):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "a", "text": "Hi"}, {"id": "b", "text": "Count."}]}))
    rc = main(["check", "--fixture", "tiny-llama", "--prompts", str(prompts), "--max-new-tokens", "12", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["passed"] is True
    assert [r["prompt_id"] for r in report["requests"]] == ["a", "b"]
    assert all(r["verdict"]["status"] == "pass" for r in report["requests"])
    assert len(report["n_alpha"]) == report["k"] == 4


def test_check_table_prints_rows_and_verdict(capsys, tmp_path):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hello", "text": "Hello there"}]}))
    rc = main(["check", "--fixture", "tiny-llama", "--prompts", str(prompts), "--max-new-tokens", "8", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "hello" in out and "identical" in out and "verdict: PASS" in out and "tau =" in out


def test_run_prints_text_and_stats_line(capsys):
    rc = main(["run", "--fixture", "tiny-llama", "--prompt", "Count from one to ten.", "--max-new-tokens", "6", "-k", "2"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "tokens: 6" in out and "tau:" in out and "verify:" in out and "draft:" in out


def test_run_reports_a_multi_token_stop_string(capsys):
    rc = main(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "2", "--stop-token", "hello world"])
    out = capsys.readouterr().out
    assert rc == 0 and "not added to the stop set" in out


@pytest.mark.parametrize(
    "argv, named",
    [
        pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "-k", "9"], "K = 9", id="k-above-range"),
        pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "-k", "0"], "K = 0", id="k-zero"),
        pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "0"], "max new tokens = 0", id="max-new-0"),
        pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "-3"], "max new tokens = -3", id="max-new-negative"),
        pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "word " * 200], "prompt length L =", id="prompt-above-prefill-range"),
        pytest.param(["run", "--prompt", "Hi", "--target", "/nonexistent", "--draft", "/nonexistent"],
                     "/nonexistent", id="missing-target-dir"),
        pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--tokenizer", "/nonexistent/tokenizer.json"],
                     "/nonexistent/tokenizer.json", id="missing-tokenizer"),
        pytest.param(["check", "--fixture", "tiny-lama"], "did you mean 'tiny-llama'", id="unknown-fixture"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, named):
    rc = main(argv)
    cap = capsys.readouterr()
    assert rc == 2
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Fix:" in lines[0]
    assert named in lines[0]
    assert "Traceback" not in cap.err
