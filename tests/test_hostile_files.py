"""Issue 17's probe catalogue, part 2: hostile files (part 3, tests/program/test_hostile_models.py: resource
bounds, remote code, a .pte that aborts the runtime, stale sidecars, swallowed KV writes).

Every probe that broke is a case here (or, where another file owns it, a row of `COVERED` naming
the test that pins it; `test_every_covered_probe_names_a_test_that_exists` keeps the rows true).
A hostile input is one line `error: <file>: <field path> = <value>; expected ... Fix: ...` and exit
2: no traceback, nothing on stdout. The table is docs/reliability.md's "Hostile input" section.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
from pathlib import Path

import pytest

from eagle3_check.cli import main
from eagle3_check.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "tiny-llama"
GOLDEN = ROOT / "golden" / "tiny-llama__eager__cpu__float32__k4__n48.json"


def clean_error(capsys, rc: int, named: str) -> str:
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and cap.out == "", cap.out + cap.err
    lines = cap.err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, cap.err
    assert lines[0].startswith("error: ") and "; expected " in lines[0] and ". Fix: " in lines[0], lines[0]
    assert named in lines[0], lines[0]
    return lines[0]


# --- goldens: valid JSON, wrong schema (16 of 30 were tracebacks; an empty one passed) ---------

def _set(path: str, value):
    def edit(d):
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node = d
        for p in parents:
            node = node[p]
        node[last] = value
        return d
    return edit


def _drop(path: str):
    def edit(d):
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node = d
        for p in parents:
            node = node[p]
        del node[last]
        return d
    return edit


GOLDEN_CASES = [
    pytest.param(_set("prompts", []), "prompts = []; expected at least 1 item(s)", id="empty-prompts"),
    pytest.param(_set("prompts.0.tokens.3", -4), "prompts[0].tokens[3] = -4; expected a number >= 0",
                 id="negative-token"),
    pytest.param(_set("prompts.0.tokens.0", 5.0), "prompts[0].tokens[0] = 5.0; expected a valid integer",
                 id="float-token"),
    pytest.param(_set("prompts.0.tokens.0", "5"), "prompts[0].tokens[0] = '5'; expected a valid integer",
                 id="string-token"),
    pytest.param(_set("prompts.0.tokens.0", True), "prompts[0].tokens[0] = True; expected a valid integer",
                 id="bool-token"),
    pytest.param(_set("prompts.0.prompt_ids.1", -1), "prompts[0].prompt_ids[1] = -1", id="negative-prompt-id"),
    pytest.param(_set("prompts.0.tokens.0", 999999),
                 "prompts[0].tokens[0] = 999999; expected a token id in [0, 511]", id="token-out-of-vocab"),
    pytest.param(_set("prompts.1.prompt_ids.0", 512), "prompts[1].prompt_ids[0] = 512", id="prompt-id-out-of-vocab"),
    pytest.param(_set("options.foo", 1), "unknown field options.foo", id="unknown-option-key"),
    pytest.param(_drop("prompts.0.margins"), "prompts[0].margins is missing", id="missing-margins"),
    pytest.param(_set("prompts.0.margins", [1.0]), "prompts[0].margins has 1 entries", id="margins-wrong-length"),
    pytest.param(_set("prompts.0.accepted.0", 9), "prompts[0].accepted[0] = 9; expected an accepted count in [0, K = 4]",
                 id="accepted-above-k"),
    pytest.param(_set("prompts.0.rounds", 0), "prompts[0].accepted has", id="rounds-disagree"),
    pytest.param(_set("prompts.0.min_margin", 0.0), "prompts[0].min_margin = 0.0 but min(margins)",
                 id="min-margin-disagrees"),
    pytest.param(lambda d: _set("prompts.1.prompt_id", d["prompts"][0]["prompt_id"])(d), "prompts[1].prompt_id = ",
                 id="duplicate-prompt"),
    pytest.param(_set("key.k", 0), "key.k = 0; expected a number >= 1", id="k-zero"),
    pytest.param(_set("key", None), "key = None", id="key-null"),
    pytest.param(_set("tie_tolerance", -1.0), "tie_tolerance = -1.0", id="negative-tolerance"),
    pytest.param(_set("versions", ["torch"]), "versions = ['torch']", id="versions-not-a-mapping"),
    pytest.param(_set("prompts.0.stop_reason", ""), "prompts[0].stop_reason = ''", id="empty-stop-reason"),
    pytest.param(_set("options.stop_ids", "1,50"), "options.stop_ids = '1,50'", id="stop-ids-a-string"),
    pytest.param(_set("schema", 2), "has schema 2", id="schema-2"),
    pytest.param(lambda d: [d], "(top level) = [", id="top-level-list"),
]


@pytest.mark.parametrize("edit, named", GOLDEN_CASES)
def test_a_malformed_golden_is_one_line_naming_the_field(edit, named, tmp_path, capsys):
    bad = tmp_path / GOLDEN.name
    bad.write_text(json.dumps(edit(json.loads(GOLDEN.read_text()))))
    rc = main(["golden", "verify", str(bad), "--no-baseline", "--no-progress"])
    line = clean_error(capsys, rc, named)
    assert GOLDEN.name in line  # the file is named


@pytest.mark.parametrize("text, named", [
    ('{"schema": 1, "tau": NaN}', "NaN is not a JSON number"),
    ('{"schema": 1, "schema": 1}', "key 'schema' appears twice"),
    ("[" * 100000, "nests too deeply"),
], ids=["nan", "duplicate-key", "deep-nesting"])
def test_inexact_json_is_refused(text, named, tmp_path, capsys):
    bad = tmp_path / GOLDEN.name
    bad.write_text(text)
    clean_error(capsys, main(["golden", "verify", str(bad), "--no-baseline"]), named)


# --- prompt sets -----------------------------------------------------------------------------------

@pytest.mark.parametrize("data, named", [
    ({"prompts": [{"id": 1, "text": "x"}]}, "prompts[0].id = 1; expected a valid string"),
    ({"prompts": [{"id": "a", "text": None}]}, "prompts[0].text = None"),
    ({"prompts": [{"id": "a", "text": "x", "lang": "en"}]}, "unknown field prompts[0].lang"),
    ({"prompts": []}, "prompts = []; expected at least 1 item(s)"),
    ([{"id": "a", "text": "x"}], "(top level) = ["),
    ({"prompts": [{"id": "a", "text": "x\ud800y"}]}, "lone surrogate '\\ud800' at character"),
    ({"prompts": [{"id": "a", "text": "word " * 400_000}]}, "is 2000"),
], ids=["id-int", "text-null", "unknown-key", "empty-list", "top-level-list", "lone-surrogate", "two-million-chars"])
def test_a_hostile_prompt_set_is_one_line(data, named, tmp_path, capsys):
    p = tmp_path / "p.json"
    p.write_text(json.dumps(data))
    clean_error(capsys, main(["check", "--fixture", "tiny-llama", "--prompts", str(p), "--max-new-tokens", "2"]), named)


def test_a_lone_surrogate_on_the_command_line_is_one_line(capsys):
    clean_error(capsys, main(["run", "--fixture", "tiny-llama", "--prompt", "a\udc80b"]), "lone surrogate")


# --- baselines and cards ---------------------------------------------------------------------------

@pytest.mark.parametrize("entry, named", [
    ({"n_alpha": ["x"]}, "n_alpha[0] = 'x'"),
    ({"n_alpha": [1.5]}, "n_alpha[0] = 1.5; expected a number <= 1.0"),
    ({"rounds": -1}, "rounds = -1"),
], ids=["n-alpha-string", "n-alpha-above-one", "negative-rounds"])
def test_a_hostile_metrics_baseline_is_one_line(entry, named, tmp_path, capsys):
    from eagle3_check.jobs.golden.metrics import default_baseline_path

    data = json.loads(default_baseline_path().read_text())
    stem = GOLDEN.stem
    data["entries"][stem].update(entry)
    p = tmp_path / "metrics.json"
    p.write_text(json.dumps(data))
    clean_error(capsys, main(["golden", "verify", str(GOLDEN), "--baseline", str(p)]), f"entries.{stem}.{named}")


@pytest.mark.parametrize("data, named", [
    ({"tau": "2.1"}, "tau = '2.1'"),
    ({"tau": -1}, "tau = -1"),
    ({"tau": True}, "tau = True"),
    ({"k": 4}, "tau is missing"),
    ({"tau": None}, "tau = None"),
], ids=["tau-string", "tau-negative", "tau-bool", "tau-missing", "tau-null"])
def test_a_hostile_tau_baseline_is_one_line(data, named, tmp_path):
    from eagle3_check.jobs.golden.tau_baseline import read_baseline_tau

    p = tmp_path / "base.json"
    p.write_text(json.dumps(data))
    with pytest.raises(InputError, match=named.replace("(", r"\(").replace("[", r"\[")) as e:
        read_baseline_tau(p)
    assert "\n" not in str(e.value)


def test_a_tau_baseline_reads_a_gate_report_and_a_bare_tau(tmp_path):
    from eagle3_check.jobs.golden.tau_baseline import read_baseline_tau

    p = tmp_path / "r.json"
    p.write_text(json.dumps({"tau": 2.5, "passed": True, "info": {"k": 4}, "checks": []}))
    assert read_baseline_tau(p) == (2.5, 4)
    p.write_text(json.dumps({"tau": 2}))
    assert read_baseline_tau(p) == (2.0, None)


def test_a_hostile_card_is_one_line(tmp_path):
    from eagle3_check.fixtures.card import read_card
    from eagle3_check.fixtures.registry import Fixture, load_fixture

    fx = load_fixture("tiny-llama")
    root = tmp_path / "tiny-llama"
    root.mkdir()
    card = json.loads(fx.card_path.read_text())
    assert read_card(fx)["k"]["4"]["tau"] == card["k"]["4"]["tau"]  # the committed cards validate
    card["k"]["4"]["passed"] = "yes"
    (root / "card.json").write_text(json.dumps(card))
    with pytest.raises(InputError, match=r"k\.4\.passed = 'yes'; expected a valid boolean"):
        read_card(Fixture("tiny-llama", root, fx.spec))


# --- non-regular and huge files --------------------------------------------------------------------

def _copy_fixture(tmp_path: Path, target_edit=None, draft_edit=None, weights_fifo: str = "") -> list[str]:
    t, d = tmp_path / "target", tmp_path / "draft"
    shutil.copytree(FIXTURE / "target", t)
    shutil.copytree(FIXTURE / "draft", d)
    if weights_fifo:  # its weights replaced by a FIFO: reading it would block forever
        (tmp_path / weights_fifo / "model.safetensors").unlink()
        os.mkfifo(tmp_path / weights_fifo / "model.safetensors")
    for path, edit in ((t / "config.json", target_edit), (d / "config.json", draft_edit)):
        if edit:
            path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    return ["run", "--prompt", "Hi", "--target", str(t), "--draft", str(d), "--tokenizer", str(FIXTURE / "tokenizer.json")]


def _fifo(tmp_path: Path) -> str:
    p = tmp_path / "fifo.json"
    os.mkfifo(p)
    return str(p)


def _sparse(tmp_path: Path, name: str, mib: int) -> str:
    p = tmp_path / name
    with open(p, "wb") as f:
        f.truncate(mib << 20)  # sparse: no disk used, but stat says it is that big
    return str(p)


@pytest.mark.parametrize("argv, named", [
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--tokenizer", _fifo(t)], "is a FIFO (named pipe); expected a regular file"),
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--tokenizer", "/dev/zero"], "/dev/zero is a character device"),
    (lambda t: ["check", "--fixture", "tiny-llama", "--prompts", str(t)], "is a directory; expected a regular file"),
    (lambda t: ["check", "--fixture", "tiny-llama", "--prompts", _fifo(t)], "is a FIFO"),
    (lambda t: ["golden", "verify", _fifo(t)], "is a FIFO"),
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt-file", "/dev/zero"], "is a character device"),
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--tokenizer", _sparse(t, "tok.json", 600)],
     "is 600.0 MiB; expected at most 512 MiB"),
    (lambda t: ["run", "--fixture", "tiny-llama", "--prompt-file", _sparse(t, "big.txt", 10)], "is 10.0 MiB; expected at most 4 MiB"),
    (lambda t: ["check", "--target", _fifo(t), "--draft", str(t)], "is a FIFO (named pipe); expected an existing directory"),
    (lambda t: _copy_fixture(t, weights_fifo="draft"), "model.safetensors is a FIFO (named pipe)"),
    (lambda t: _copy_fixture(t, weights_fifo="target"), "model.safetensors is a FIFO (named pipe)"),
], ids=["tokenizer-fifo", "tokenizer-dev-zero", "prompts-directory", "prompts-fifo", "golden-fifo",
        "prompt-file-dev-zero", "tokenizer-600mib", "prompt-file-10mib", "target-fifo", "draft-weights-fifo",
        "target-weights-fifo"])
def test_a_non_regular_or_huge_input_is_named_as_such(argv, named, tmp_path, capsys):
    clean_error(capsys, main(argv(tmp_path)), named)


# --- probes another test file pins ----------------------------------------------------------------

COVERED = {
    "kill -9 at a write leaves the old file":
        "tests/test_atomic.py::test_a_writer_killed_between_temp_write_and_rename_leaves_the_old_file",
    "a full disk is one line, old file intact": "tests/test_atomic.py::test_a_full_disk_is_one_line_and_the_old_file_survives",
    "two golden record --force at once":
        "tests/test_atomic.py::test_two_force_writers_of_one_golden_and_one_baseline_leave_valid_files",
    "gate --report into a missing directory": "tests/test_atomic.py::test_gate_report_into_a_missing_directory_errors_at_start",
    "runner sets options.max_new_tokens = 1": "tests/runners/isolate/test_isolation.py::test_a_runner_that_changes_the_options_is_judged_on_the_request",
    "runner never calls the program": "tests/runners/isolate/test_isolation.py::test_a_runner_that_never_calls_the_program_fails",
    "runner calls sys.exit(0)": "tests/runners/isolate/test_isolation.py::test_cli_check_json_stays_valid_and_exits_1",
    "runner prints to stdout": "tests/runners/isolate/test_isolation.py::test_the_printed_text_is_in_the_reason",
    "float / numpy / tensor tokens": "tests/runners/isolate/test_isolation.py::test_type_problem_names_the_field",
    "runner raises": "tests/runners/test_crash.py::test_a_crash_fails_its_request_and_the_others_are_still_judged",
    "runner hangs": "tests/runners/test_timeout.py::test_a_looping_runner_fails_its_request_names_it_and_stops_at_its_next_call",
    "runner hangs inside a program call": "tests/runners/test_timeout.py::test_a_run_stuck_inside_a_program_call_leaves_the_program_busy_until_it_returns",
    "runner calls the program out of protocol": "tests/runners/isolate/test_isolation.py::test_a_runner_that_calls_the_program_out_of_protocol_fails",
    "corrupt method section aborts the runtime": "tests/pte/test_gate_abort.py::test_gate_reports_a_pte_whose_method_aborts_the_runtime",
    "check / run / golden on a .pte that aborts the runtime":
        "tests/pte/test_gate_abort.py::test_a_pte_that_aborts_the_runtime_is_one_error_line",
}


def test_every_covered_probe_names_a_test_that_exists():
    for probe, node in COVERED.items():
        path, name = node.split("::")
        tree = ast.parse((ROOT / path).read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in names, f"{probe}: {node} does not exist"


def test_the_golden_options_schema_mirrors_run_options():
    """A RunOptions field added without its schema twin would make every new golden unreadable."""
    from dataclasses import fields

    from eagle3_check.runners.options import RunOptions
    from eagle3_check.schema import GoldenOptions

    assert set(GoldenOptions.model_fields) == {f.name for f in fields(RunOptions)}
