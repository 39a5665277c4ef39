"""A runner binary is given the program's external data file (`--data-path FILE.ptd`) as the seed's
`--data_path=FILE` (its main.cpp hands that file to the Module), or through the template's
{data_path}; a template with no place for it is refused with one line before any request runs.
The end-to-end run with an `export --external-data` program is tests/pte/test_exec_data_path_pte.py."""

from __future__ import annotations

import pytest

from eagle3_check.errors import InputError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.program.contract import ProgramWrapper
from eagle3_check.runners.binary.protocol import ExecCommand
from eagle3_check.runners.binary.runner import ExecRunner, program_data
from eagle3_check.runners.options import RunOptions
from eagle3_check.suites import toy

OPTS = RunOptions(max_new_tokens=7)


def test_the_seed_flags_carry_the_data_file_only_when_there_is_one():
    cmd = ExecCommand.parse("exec:./runner")
    with_data = cmd.request("m.pte", "t.json", "hi", OPTS, "m.ptd")
    assert with_data[-1] == "--data_path=m.ptd" and "--model_path=m.pte" in with_data
    assert not any(a.startswith("--data_path") for a in cmd.request("m.pte", "t.json", "hi", OPTS))


@pytest.mark.parametrize("data,want", [("w.ptd", ["r", "--pte", "m.pte", "--data_path=w.ptd"]),
                                       (None, ["r", "--pte", "m.pte", "--data_path="])],
                         ids=["with-ptd", "without-ptd"])
def test_a_template_places_the_data_file(data, want):
    cmd = ExecCommand.parse("exec:r --pte {model_path} --data_path={data_path}")
    assert cmd.request("m.pte", "t.json", "hi", OPTS, data) == want


def test_a_template_without_a_place_for_the_data_file_is_refused():
    cmd = ExecCommand.parse("exec:./r -m {model_path} -p {prompt}")
    assert cmd.request("m.pte", "t.json", "hi", OPTS) == ["./r", "-m", "m.pte", "-p", "hi"]  # no .ptd: fine
    with pytest.raises(InputError) as e:
        cmd.request("m.pte", "t.json", "hi", OPTS, "m.ptd")
    msg = str(e.value)
    assert "\n" not in msg and "--data-path m.ptd" in msg and "no {data_path} placeholder" in msg, msg
    assert "Fix: add e.g. --data_path={data_path}" in msg, msg


def _toy_pte(data: str | None):
    prog = toy.ToyProgram(max_seq_len=64, min_prefill=1, max_prefill=32)
    prog.path, prog.data_path = "toy.pte", data  # program_file() / program_data() find them; no binary starts
    return prog


def test_program_data_is_found_through_wrappers():
    assert program_data(ProgramWrapper(_toy_pte("w.ptd"))).name == "w.ptd"
    assert program_data(ProgramWrapper(_toy_pte(None))) is None


def test_check_suite_and_golden_refuse_before_any_request(tokenizer, tmp_path):
    """The refusal is about the whole run: one line before the binary (which would fail) is started."""
    from eagle3_check.jobs.check.binary import run_exec_check
    from eagle3_check.jobs.golden.binary import verify_exec_goldens
    from eagle3_check.jobs.suites.binary import run_exec_suite
    from eagle3_check.jobs.suites.execute import SELF, SuiteEnv
    from eagle3_check.judge.tolerance import tolerance_for
    from eagle3_check.suites import suite_cases

    runner = ExecRunner("exec:/bin/false {model_path}")
    prog = _toy_pte("toy.ptd")
    with pytest.raises(InputError, match="no {data_path} placeholder"):
        run_exec_check(runner, prog, tokenizer, None, [Prompt("p", "hi")], OPTS)
    env = SuiteEnv.fixed(prog, tokenizer, SELF, ["hi"], tolerance_for("float32"))
    with pytest.raises(InputError, match="no {data_path} placeholder"):
        run_exec_suite("budget", suite_cases("budget"), env, runner)
    with pytest.raises(InputError, match="no {data_path} placeholder"):
        verify_exec_goldens([], runner, tmp_path / "toy.pte", prog, tokenizer)
