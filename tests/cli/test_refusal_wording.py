"""The refusals' words (issue 52): the exec runner's fix names `--runner exec:/path/to/runner`; an
unimportable module is said once (one "expected", one "Fix") and never claimed to work in
process; a runner module is looked up by its spec without running any of its code."""

from __future__ import annotations

import pytest

from eagle3_check import preflight
from eagle3_check.errors import InputError
from eagle3_check.runners.isolate.remote import error_parts
from eagle3_check.runners.isolate.runner import child_error


def _one_line(e: InputError) -> str:
    msg = str(e)
    assert "\n" not in msg and msg.count("; expected ") == 1 and msg.count(". Fix: ") == 1, msg
    assert "works in process" not in msg, msg
    return msg


@pytest.mark.parametrize("exe", ["/path/that/does/not/exist", "no-such-runner-e3c", "/"])
def test_an_exec_runner_that_is_not_there_names_the_exec_form_in_its_fix(exe):
    with pytest.raises(InputError) as e:
        preflight.check_executable(exe, f"exec:{exe}")
    assert _one_line(e.value).endswith("Fix: build the runner, or give its path (--runner exec:/path/to/runner)")


def test_an_executable_passes():
    preflight.check_executable("/bin/true", "exec:/bin/true")
    preflight.check_executable("true", "exec:true")  # a bare name on PATH


def test_an_unimportable_module_is_said_once():
    with pytest.raises(InputError) as e:
        preflight.check_runner_module("nosuchmodule:factory", "nosuchmodule")
    assert _one_line(e.value).startswith("--runner 'nosuchmodule:factory': module 'nosuchmodule' cannot be imported")


def test_the_childs_load_error_is_passed_on_in_its_own_words():
    raised = InputError("--runner 'm:f': 'm' has no 'f'", "a factory in that module", "did you mean 'm:g'?")
    got = child_error({"error": str(raised), "raised": error_parts(raised), "stage": "load"})
    assert _one_line(got) == str(raised)
    unreadable = child_error({"error": "something odd", "stage": "load"})  # an older child: its text, once
    assert _one_line(unreadable).startswith("something odd; expected a runner its own process can load")


def test_a_module_is_found_by_its_spec_without_running_its_package(tmp_path, monkeypatch):
    pkg = tmp_path / "e3c_probe_pkg"
    (pkg / "inner").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('never run: looked up, not imported')\n")
    (pkg / "runners.py").write_text("raise RuntimeError('never run')\n")
    (pkg / "inner" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert preflight.module_found("e3c_probe_pkg.runners")
    assert preflight.module_found("e3c_probe_pkg.inner")
    assert not preflight.module_found("e3c_probe_pkg.nosuch")
    assert not preflight.module_found("e3c_probe_pkg.runners.deeper")  # a plain module has no submodules
    assert not preflight.module_found("e3c_probe_pkg..runners")
    assert preflight.module_found("eagle3_check.runners.loop") and preflight.module_found("os.path")


def test_a_pte_and_a_ptd_are_told_by_their_identifier(tmp_path):
    text = tmp_path / "a.pte"
    text.write_text("not a program\n")
    with pytest.raises(InputError, match=r"is not an ExecuTorch program \(identifier b'a pr'\)"):
        preflight.check_pte_file(text)
    empty = tmp_path / "e.pte"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"is empty \(0 bytes\)"):
        preflight.check_pte_file(empty)
    good = tmp_path / "g.pte"
    good.write_bytes(b"\0\0\0\0ET12")
    preflight.check_pte_file(good)
    with pytest.raises(InputError, match="is not an ExecuTorch data file"):
        preflight.check_ptd_file(good)
    with pytest.raises(InputError, match="does not exist"):
        preflight.check_ptd_file(tmp_path / "missing.ptd")


def test_a_model_directory_without_config_json(tmp_path):
    with pytest.raises(InputError) as e:
        preflight.check_model_dir(tmp_path, "--draft")
    assert _one_line(e.value).startswith(f"draft directory {tmp_path} has no config.json")
    (tmp_path / "config.json").write_text("{}")
    preflight.check_model_dir(tmp_path, "--target")


def test_the_gate_leaves_a_pte_that_is_not_one_to_its_load_check(tmp_path):
    """`check --pte TEXT` is refused where the Config is built; `gate` reports it as its load check
    (a FAIL in its report and JUnit, exit 1), as CI reads it."""
    from eagle3_check.cli import config_of

    text = tmp_path / "t.pte"
    text.write_text("not a program\n")
    with pytest.raises(InputError, match="is not an ExecuTorch program"):
        config_of(["check", "--pte", str(text)])
    assert config_of(["gate", "--pte", str(text), "--report", str(tmp_path / "r.json")])[0].pte == str(text)


def test_a_binary_without_pte_is_refused_unless_a_repro_or_a_listing_names_no_program(tmp_path):
    from eagle3_check.cli import config_of

    with pytest.raises(InputError, match="check --runner exec:/bin/false without --pte"):
        config_of(["check", "--runner", "exec:/bin/false"])
    with pytest.raises(InputError, match="golden verify --runner exec:/bin/false without --pte"):
        config_of(["golden", "verify", "--runner", "exec:/bin/false"])
    config_of(["check", "--list", "--runner", "exec:/bin/false"])  # nothing runs
    repro = tmp_path / "r.json"
    repro.write_text("{}")
    assert config_of(["check", "--repro", str(repro), "--runner", "exec:/bin/false"])[0].pte is None  # its own .pte
