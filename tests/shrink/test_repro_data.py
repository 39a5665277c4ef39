"""Issue 47, item 4: a repro file is data. Every field that reaches the command is validated (one line,
exit 2, no traceback), and a repro never runs a command, imports a module or writes an output the
command line did not name: its runner is used only when it is ours, else a note names it."""

from __future__ import annotations

import json

import pytest

from eagle3_check.cli import main


def _repro(tmp_path, **over) -> str:
    req = {"prompt_ids": [2, 10, 11], "max_new_tokens": 3, "k": 4, "spec": {}}
    data = {"format": "eagle3-check-repro/1", "prompt_id": "hi", "program": {"flags": ["--fixture", "tiny-llama"]},
            "runner": "reference", "options": {}, "request": req, "prompt_text": None, "rule": "length",
            "message": "", "index": None, "expected": None, "got": None, "original": req, "original_message": "",
            "command": "eagle3-check check --fixture tiny-llama", "kept": []}
    for key, value in over.items():
        if key == "flags":
            data["program"]["flags"] = value
        elif key == "spec":
            data["request"] = {**req, "spec": value}
        else:
            data[key] = value
    path = tmp_path / "repro-hi.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("over, what", [
    ({"flags": {"--fixture": "tiny-llama"}}, "program.flags {'--fixture'"),
    ({"flags": ["--fixture", 3]}, "a list of strings"),
    ({"flags": ["--fixture"]}, "a value on one line after each flag"),
    ({"flags": ["--fixture", "tiny-llama", "--junit", "/tmp/owned.xml"]}, "program.flags '--junit'"),
    ({"flags": ["--fixture", "tiny-llama", "--runner", "exec:/bin/true"]}, "program.flags '--runner'"),
    ({"flags": ["--fixture", "tiny\nllama"]}, "a value on one line"),
    ({"flags": ["--fixture", "tiny-llama", "--max-seq-len", "4x"]}, "an int"),
    ({"spec": {"json_out": 3}}, "request.spec field 'json_out'"),
    ({"runner": "exec:/bin/true\nrm"}, "a runner spec on one line"),
], ids=["flags-a-dict", "flags-ints", "odd-length", "an-output", "a-runner-flag", "newline", "int-option",
        "spec-field", "runner-newline"])
def test_a_bad_repro_field_is_a_one_line_error(over, what, tmp_path, capsys):
    assert main(["check", "--repro", _repro(tmp_path, **over), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert what in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_repro_never_runs_the_command_or_imports_the_module_it_names(tmp_path, capsys, monkeypatch):
    marker = tmp_path / "ran"
    (tmp_path / "repro_plugin.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef make(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for runner in (f"exec:/usr/bin/touch {marker}", "repro_plugin:make"):
        rc = main(["check", "--repro", _repro(tmp_path, runner=runner), "--no-progress", "--json"])
        out = capsys.readouterr()
        assert rc == 0 and not marker.exists(), out.err[-1500:]  # the default runner replayed it
        assert "note: the repro was recorded with --runner" in out.err and "which it does not run" in out.err
        assert json.loads(out.out)["info"]["runner"] == "reference"
