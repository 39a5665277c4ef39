"""The pytest plugin's baseline items and its limits, run the way a user runs it (a pytester project;
tests/pytest_plugin/test_pytest_plugin.py holds collection, the suite, prompt and golden items and xdist): the
baseline items against the committed metrics baseline, and the binary, data, timeout and baseline
options, a runner over the request timeout, paths resolved where an option or ini key was given.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_pytest_plugin import (  # tests/ is on sys.path (pytest's prepend import mode)
    BASELINE,
    COUNTING,
    K4,
    PLUGIN,
    SLEEPY,
    _baseline_copy,
    _project,
)

from eagle3_check.jobs.golden.file import golden_root
from eagle3_check.runners.binary.runner import resolve_command

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


def test_the_baseline_items_pass_on_the_fixture_reusing_the_golden_runs(pytester, warm, runner_writable, monkeypatch):
    """One item per baseline key; the k4 key's metrics are counted over the runs its golden items
    made: each golden prompt runs once in the session (the counting runner logs every run)."""
    pytester.makepyfile(counting=COUNTING)
    pytester.syspathinsert()
    monkeypatch.setenv("RUNS_LOG", str(runner_writable / "runs.log"))
    prompts = json.loads((golden_root() / f"{K4}.json").read_text())["prompts"]
    result = pytester.runpytest(*PLUGIN, "--eagle3-fixture=tiny-llama", f"--eagle3-baseline={BASELINE}",
                                "--eagle3-runner=counting:Counting", "-k", K4, "-v")
    result.assert_outcomes(passed=len(prompts) + 1)
    result.stdout.fnmatch_lines([f"eagle3::goldens::{K4}/{prompts[0]['prompt_id']} PASSED*",
                                 f"eagle3::baseline::{K4} PASSED*"], consecutive=False)
    assert (runner_writable / "runs.log").read_text().splitlines() == ["run"] * len(prompts)


def test_a_baseline_off_by_one_draft_call_fails_with_the_metric_table(pytester, warm):
    drafts = json.loads(BASELINE.read_text())["entries"][K4]["draft_forwards"]

    def one_call_less(entries):
        entries[K4]["draft_forwards"] -= 1

    result = pytester.runpytest(*_baseline_copy(pytester, one_call_less), "-m", "eagle3_baseline", "-k", K4)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "metrics: DIFFER from the baseline (exact gate)",
        f"  {K4}",
        "    metric * baseline * now * change",
        f"    draft forwards * {drafts - 1} * {drafts} * regression",  # the run made one call more
        "  a regression: find the change that caused it*",
        "  if the change is intended, refresh: `eagle3-check golden baseline` (baseline */metrics.json)*",
        "  runner: reference",
    ])
    # the failure report alone: the short summary repeats the message in full where the terminal is wide (CI)
    report = result.outlines[:next((i for i, line in enumerate(result.outlines) if "short test summary" in line),
                                   len(result.outlines))]
    table = [line for line in report if line.startswith("    ") and "regression" in line]
    assert len(table) == 1  # nothing else moved: the draft forwards per token are computed, not stored
    assert "Traceback" not in result.stdout.str()


def test_a_baseline_key_whose_golden_is_absent_or_of_another_fixture_skips_with_the_reason(pytester):
    args = _baseline_copy(pytester, lambda entries: entries.update({"tiny-llama__eager__cpu__float32__k3__n48":
                                                                     entries[K4]}))
    collected = pytester.runpytest(*args, "--collect-only", "-q", "-m", "eagle3_baseline")
    keys = json.loads((pytester.path / "metrics.json").read_text())["entries"]
    assert [line for line in collected.outlines if line.startswith("eagle3::")] == \
        [f"eagle3::baseline::{k}" for k in keys]
    result = pytester.runpytest(*args, "-m", "eagle3_baseline", "-k", "gemma4__eager__cpu__float32__k2 or "
                                "tiny-llama__pte or k3__n48", "-rs")
    result.assert_outcomes(skipped=3)
    lines = (pytester.path / "metrics.json").read_text().splitlines()
    at = {k: next(i + 1 for i, line in enumerate(lines) if f'"{k}"' in line) for k in keys}  # where each is written
    gemma, pte, k3 = "tiny-gemma4__eager__cpu__float32__k2__n48", "tiny-llama__pte__cpu__float32__k4__n48", \
        "tiny-llama__eager__cpu__float32__k3__n48"
    result.stdout.fnmatch_lines([  # in the baseline's order, at the key's line
        f"SKIPPED ?1? metrics.json:{at[gemma]}: baseline {gemma}: a golden of fixture tiny-gemma4; this program is "
        "tiny-llama",
        f"SKIPPED ?1? metrics.json:{at[pte]}: baseline {pte}: a .pte golden: pass --pte FILE*",
        f"SKIPPED ?1? metrics.json:{at[k3]}: baseline {k3}: no golden {k3} among the goldens given ({golden_root()}): "
        "nothing to count",
    ])


@pytest.mark.parametrize("args, message", [
    (["--eagle3-runner-bin", "./bin"], "--eagle3-runner-bin without --eagle3-pte*"),
    (["--eagle3-request-timeout", "abc"],  # in-process runners take the timeout too: same rule
     "--eagle3-request-timeout abc; expected a number of seconds > 0. Fix: pass e.g. --eagle3-request-timeout 120"),
    (["--eagle3-pte=model.pte", "--eagle3-runner-bin=./runner", "--eagle3-request-timeout=0"],
     "--eagle3-request-timeout 0; expected a number of seconds > 0. Fix: pass e.g. --eagle3-request-timeout 120"),
    (["--eagle3-data-path=model.ptd"], "--eagle3-data-path */model.ptd without --eagle3-pte; expected "
     "--eagle3-data-path with the .pte it belongs to. Fix: add --eagle3-pte FILE.pte, or drop --eagle3-data-path"),
    (["--eagle3-pte=model.pte", "--eagle3-data-path=missing.ptd"],
     "--eagle3-data-path */missing.ptd does not exist; expected an existing file*"),
    (["--eagle3-pte=model.pte", "--eagle3-data-path=model.ptd", "--eagle3-runner-bin=./runner -m {model_path}"],
     "--eagle3-data-path */model.ptd with the runner template *, which has no {data_path} placeholder; expected a "
     "runner command that passes the program's data file. Fix: add e.g. --data_path={data_path} to the template*"),
    (["--eagle3-pte=model.pte", "--eagle3-runner-bin=./model.pte"],
     "--eagle3-runner-bin 'exec:*/model.pte': */model.pte is not an executable file*"),
    (["--eagle3-pte=model.pte", "--eagle3-runner-bin=./runner {promt}"],
     "--eagle3-runner-bin './runner {promt}': placeholder {promt}; expected one of*"),
    (["--eagle3-pte=model.pte", "--eagle3-runner-bin=./runner", "--eagle3-runner=x:y"],
     "--eagle3-runner with --eagle3-runner-bin; expected one runner under test*"),
    (["--eagle3-baseline", "missing.json"], "--eagle3-baseline */missing.json does not exist*"),
], ids=["bin-without-pte", "timeout-not-a-number", "timeout-0", "ptd-without-pte", "missing-ptd",
        "template-without-data-path", "not-executable", "bad-placeholder", "two-runners", "missing-baseline"])
def test_a_wrong_binary_data_timeout_or_baseline_option_is_a_one_line_usage_error(pytester, args, message):
    """Parsed by runners/binary/runner.py, as `check --runner exec:... --request-timeout S --data-path F` is;
    nothing loads."""
    (pytester.path / "model.pte").write_bytes(b"")  # never loaded: the options are checked first
    (pytester.path / "model.ptd").write_bytes(b"")
    runner = pytester.path / "runner"
    runner.write_text("#!/bin/sh\n")
    runner.chmod(0o755)
    args = args if any(a.startswith("--eagle3-pte") for a in args) else ["--eagle3-fixture", "tiny-llama", *args]
    result = pytester.runpytest(*PLUGIN, *args, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: eagle3: {message}"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize("runner, timeout", [
    ("reference", None), ("eagle3_check.mutants:emit_past_max_new", None), ("reference", "7.5"),
    ("eagle3_check.mutants:emit_past_max_new", "12"),
], ids=["reference-unlimited", "plug-in-default", "reference-given", "plug-in-given"])
def test_the_request_timeout_limits_a_runner_as_check_does(pytester, runner, timeout):
    """--eagle3-request-timeout follows `check --request-timeout` (jobs.common.context.limited): a limit
    given applies to any runner; without one a plug-in gets 300 s and the reference runner none. A
    plug-in runs in its own process (runners/isolate/), whose limit is the same."""
    from eagle3_check.jobs.common.context import limited
    from eagle3_check.runners.watchdog import with_limit

    pytester.makeconftest('''
def pytest_collection_finish(session):
    from eagle3_check.pytest_plugin import STATE
    from eagle3_check.runners.watchdog import limit_flag, with_limit

    runner = session.config.stash[STATE].runner
    if getattr(runner, "isolated", False):  # a plug-in in its own process
        print(f"limit: {runner.timeout} {runner.flag}")
    else:
        print(f"limit: {with_limit(runner)[1]} {limit_flag(runner)}")
''')
    args = [f"--eagle3-runner={runner}", *([f"--eagle3-request-timeout={timeout}"] if timeout else [])]
    result = pytester.runpytest(*PLUGIN, "--eagle3-fixture=tiny-llama", *args, "--collect-only", "-q", "-s")
    cli = limited(object(), runner, float(timeout) if timeout else None)
    seconds = with_limit(cli)[1]
    flag = "--request-timeout" if seconds is None else "--eagle3-request-timeout"  # the plugin names its own flag
    result.stdout.fnmatch_lines([f"limit: {seconds} {flag}"])


def test_a_runner_over_the_request_timeout_fails_its_item(pytester, warm):
    """The hanging plug-in's process is killed (runners/isolate/) and the item fails with the limit named.
    The limit also bounds the child's import + factory (runners/isolate/runner.py): 6 s leaves a loaded
    machine room for those (0.3 s once was not, nor was 2 s with both cores busy: 'not ready within
    2 s'), the runner sleeps 60."""
    pytester.makepyfile(sleepy=SLEEPY)
    pytester.syspathinsert()
    result = pytester.runpytest(*_project(pytester), "--eagle3-runner=sleepy:Sleepy", "--eagle3-request-timeout=6",
                                "-k", "prompts and hi")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["prompt 'hi' FAIL: timeout: request 'hi' timed out after 6 s "
                                 "(--eagle3-request-timeout 6); the runner's process was killed*. Fix: * or pass a larger "
                                 "--eagle3-request-timeout*"])
    assert "Traceback" not in result.stdout.str()


def test_a_runner_binary_path_is_resolved_where_the_option_was_given():
    assert resolve_command("./bin/runner --flag x", "/proj") == "exec:/proj/bin/runner --flag x"
    assert resolve_command("exec:../r '{prompt}'", "/proj/sub") == "exec:/proj/r '{prompt}'"
    assert resolve_command("runner -m {model_path}", "/proj") == "exec:runner -m '{model_path}'"  # on $PATH
    assert resolve_command("/abs/runner 'a b'", "/proj") == "exec:/abs/runner 'a b'"


def test_ini_keys_take_the_baseline_and_a_runner_binary_relative_to_the_ini_file(pytester, monkeypatch):
    """eagle3_runner_bin's program path and eagle3_data_path are the ini file's directory's, wherever
    pytest is invoked; the binary's arguments and eagle3_request_timeout are kept. Nothing loads: only
    collected."""
    (pytester.path / "bin").mkdir()
    (pytester.path / "model.pte").write_bytes(b"")
    (pytester.path / "model.ptd").write_bytes(b"")
    runner = pytester.path / "bin" / "runner"
    runner.write_text("#!/bin/sh\n")
    runner.chmod(0o755)
    pytester.makeini("[pytest]\neagle3_pte = model.pte\neagle3_fixture = tiny-llama\neagle3_suite = none\n"
                     "eagle3_prompts = none\neagle3_goldens = none\neagle3_runner_bin = bin/runner --flag '{prompt}' "
                     "--data_path={data_path}\neagle3_data_path = model.ptd\n"
                     f"eagle3_request_timeout = 7.5\neagle3_baseline = {BASELINE}\n")
    pytester.makeconftest('''
def pytest_collection_finish(session):
    from eagle3_check.pytest_plugin import STATE

    state = session.config.stash[STATE]
    binary = state.runner  # the session's one runner: the binary, as parsed
    print(f"binary: {binary.command.argv} {binary.timeout} {state.settings['data_path']}")
''')
    (pytester.path / "elsewhere").mkdir()
    monkeypatch.chdir(pytester.path / "elsewhere")
    result = pytester.runpytest(*PLUGIN, "-c", str(pytester.path / "tox.ini"), "--rootdir", str(pytester.path),
                                "--collect-only", "-q", "-s")
    keys = json.loads(BASELINE.read_text())["entries"]
    assert [line for line in result.outlines if line.startswith("eagle3::")] == [f"eagle3::baseline::{k}" for k in keys]
    result.stdout.fnmatch_lines([f"binary: ('{runner}', '--flag', '{{prompt}}', '--data_path={{data_path}}') 7.5 "
                                 f"{pytester.path / 'model.ptd'}"])
