"""The pytest plugin (eagle3_check/pytest_plugin), run the way a user runs it: in a pytester
project of their own, `pytest -p eagle3_check.pytest_plugin --eagle3-fixture tiny-llama ...`
(the pytest11 entry point loads the same module by the same name once the package is installed).

Each run that executes items loads the models, so the runs are few and small: one suite
narrowed with -k, a two-prompt set with 8 new tokens, one golden prompt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_check.jobs.golden.file import golden_root
from eagle3_check.jobs.golden.metrics import default_baseline_path
from eagle3_check.suites import SUITES, all_cases

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ["-p", "eagle3_check.pytest_plugin", "-p", "no:cacheprovider"]
GOLDEN = golden_root() / "tiny-llama__eager__cpu__float32__k4__n48.json"
PROMPTS = {"prompts": [{"id": "hi", "text": "Hi there"}, {"id": "count", "text": "Count to five."}]}
# a user's own cases, written with the plugin's fixtures
USER_TEST = '''
def test_my_request(eagle3_check_request):
    verdict = eagle3_check_request("Write one line about caches.", max_new_tokens=8)
    assert verdict.status != "fail", verdict.message


def test_my_program(eagle3_program, eagle3_tokenizer, eagle3_reference):
    ids = [2, *eagle3_tokenizer.encode("Hi")]
    ref = eagle3_reference.greedy(ids, 4)
    assert eagle3_program.metadata()["get_chain_len"] >= 1 and len(ref.tokens) == 4
'''
# a user's runner that loses a token: it runs the reference runner, then emits the next id at index 2
LOSSY = '''
import dataclasses

from eagle3_check.runners.loop import ReferenceRunner


class Lossy:
    def run(self, program, tokenizer, prompt, options):
        r = ReferenceRunner().run(program, tokenizer, prompt, options)
        tokens = list(r.tokens)
        if len(tokens) > 2:
            tokens[2] = (tokens[2] + 1) % tokenizer.vocab_size
        return dataclasses.replace(r, tokens=tokens)
'''
# the reference runner, counting its runs in $RUNS_LOG (a directory the runner's process may write:
# as root it runs as `nobody`): a golden prompt must run once per session; with $RUNS_LOG_OPTIONS set each
# line also names the run's max new tokens, K and prompt
COUNTING = '''
import os

from eagle3_check.runners.loop import ReferenceRunner


class Counting:
    def run(self, program, tokenizer, prompt, options):
        with open(os.environ["RUNS_LOG"], "a") as log:
            named = os.environ.get("RUNS_LOG_OPTIONS")
            log.write(f"run {options.max_new_tokens} {options.chain_len} {prompt!r}\\n" if named else "run\\n")
        return ReferenceRunner().run(program, tokenizer, prompt, options)
'''
# a user's runner that hangs (sleeps past the limit before its first program call)
SLEEPY = '''
import time

from eagle3_check.runners.loop import ReferenceRunner


class Sleepy:
    def run(self, program, tokenizer, prompt, options):
        time.sleep(60)  # killed at the request limit long before
        return ReferenceRunner().run(program, tokenizer, prompt, options)
'''
BASELINE = default_baseline_path()
K4 = "tiny-llama__eager__cpu__float32__k4__n48"  # a golden key of tiny-llama in the committed baseline
K2 = "tiny-llama__eager__cpu__float32__k2__n48"  # another
# narrow the run: 2 one-token cases, a case that skips on tiny-llama, the 2 prompts, one golden prompt
SELECT = "one-token/max-new-1 or one-token/max-new-2-full or window-ring or prompts or k4__n48/capital or my_"


def _project(pytester) -> list[str]:
    pytester.makepyfile(test_user=USER_TEST)
    prompts = pytester.path / "prompts.json"
    prompts.write_text(json.dumps(PROMPTS))
    # `--opt=value`: pytest takes a separate value that is an existing path for a path argument
    # when it looks for the rootdir and ini file (here: this repository's pyproject.toml)
    return [*PLUGIN, "--eagle3-fixture=tiny-llama", "--eagle3-prompts=prompts.json",
            "--eagle3-max-new-tokens=8", f"--eagle3-goldens={GOLDEN}"]


def test_collects_every_suite_case_prompt_and_golden_with_readable_ids(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest(*PLUGIN, "--eagle3-fixture", "tiny-llama", "--collect-only", "-q")
    ids = {line for line in result.outlines if line.startswith("eagle3::")}
    cases = {f"eagle3::suites::{c.name}" for c in all_cases()}
    prompts = {f"eagle3::prompts::{p['id']}" for p in json.loads((ROOT / "fixtures/prompts.json").read_text())["prompts"]}
    goldens = {f"eagle3::goldens::{p.stem}/{q['prompt_id']}" for p in sorted(golden_root().glob("tiny-llama__*.json"))
               for q in json.loads(p.read_text())["prompts"]}
    assert cases <= ids and prompts <= ids and goldens <= ids
    assert ids == cases | prompts | goldens  # nothing else, and no golden of another fixture
    assert "test_user.py::test_my_request" in result.outlines
    result.assert_outcomes()  # collect-only: nothing ran


@pytest.mark.parametrize("args, want", [
    (["-k", "context"], {f"eagle3::suites::{c.name}" for c in SUITES["context"]}),
    (["-m", "eagle3_golden and not eagle3_suite", "-k", "k2__n48"],
     {f"eagle3::goldens::tiny-llama__eager__cpu__float32__k2__n48/{q['prompt_id']}"
      for q in json.loads((golden_root() / "tiny-llama__eager__cpu__float32__k2__n48.json").read_text())["prompts"]}),
    (["--eagle3-suite", "none", "--eagle3-goldens", "none", "-m", "eagle3"],
     {f"eagle3::prompts::{p['id']}" for p in json.loads((ROOT / "fixtures/prompts.json").read_text())["prompts"]}),
], ids=["k-selects-a-suite", "m-selects-goldens", "groups-turned-off"])
def test_k_and_m_select_items(pytester, args, want):
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest(*PLUGIN, "--eagle3-fixture", "tiny-llama", "--collect-only", "-q", *args)
    assert {line for line in result.outlines if line.startswith(("eagle3::", "test_user"))} == want


def test_off_without_a_program_collects_nothing_and_the_fixtures_skip(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest(*PLUGIN, "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*eagle3 fixtures need a program: pass --eagle3-pte FILE or --eagle3-fixture NAME*"])
    assert not any("eagle3::" in line for line in result.outlines)


def test_importing_the_plugin_loads_nothing_of_eagle3_check():
    """The entry point is imported by every pytest run where eagle3_check is installed."""
    code = ("import sys, eagle3_check.pytest_plugin; "
            "heavy = sorted(m for m in sys.modules if m == 'torch' or m.startswith('eagle3_check.') "
            "and m != 'eagle3_check.pytest_plugin'); print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "[]"


def test_registered_as_a_pytest11_entry_point_named_as_its_module():
    """Named as its module: `-p eagle3_check.pytest_plugin` and the installed entry point are one plugin."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.entry-points.pytest11]\n", 1)[1].split("\n[", 1)[0]
    assert [line for line in section.splitlines() if line.strip()] == \
        ['"eagle3_check.pytest_plugin" = "eagle3_check.pytest_plugin"']


@pytest.mark.parametrize("args, message", [
    (["--eagle3-pte", "missing.pte"], "--eagle3-pte */missing.pte does not exist*"),
    (["--eagle3-fixture", "tiny-lama"], "*unknown fixture 'tiny-lama'*did you mean 'tiny-llama'*"),
    (["--eagle3-fixture", "tiny-llama", "--eagle3-suite", "contxt"], "*unknown suite 'contxt'*did you mean 'context'*"),
    (["--eagle3-fixture", "tiny-llama", "--eagle3-runner", "exec:./bin"], "*--eagle3-runner exec:./bin*"),
    (["--eagle3-fixture", "tiny-llama", "--eagle3-max-new-tokens", "0"], "*--eagle3-max-new-tokens 0*"),
], ids=["missing-pte", "unknown-fixture", "unknown-suite", "exec-runner", "max-new-0"])
def test_a_wrong_option_is_a_one_line_usage_error(pytester, args, message):
    result = pytester.runpytest(*PLUGIN, *args, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: eagle3: {message}"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_ini_keys_configure_the_plugin(pytester):
    pytester.makeini("[pytest]\neagle3_fixture = tiny-llama\neagle3_suite = one-token\neagle3_goldens = none\n"
                     "eagle3_prompts = none\n")
    result = pytester.runpytest(*PLUGIN, "--collect-only", "-q")
    assert {line for line in result.outlines if line.startswith("eagle3::")} == \
        {f"eagle3::suites::{c.name}" for c in SUITES["one-token"]}


def test_the_suites_prompts_goldens_and_a_users_own_tests_pass(pytester, warm):
    result = pytester.runpytest(*_project(pytester), "-k", SELECT, "-rs", "-v")
    assert f"rootdir: {pytester.path}" in result.stdout.str()  # the user's project, not this repository
    result.assert_outcomes(passed=8, skipped=1)
    result.stdout.fnmatch_lines([
        "test_user.py::test_my_request PASSED*",
        "eagle3::suites::one-token/max-new-2-full PASSED*",
        "eagle3::prompts::hi PASSED*",
        "eagle3::goldens::tiny-llama__eager__cpu__float32__k4__n48/capital PASSED*",
        # a skip is reported where the case is written down, with the case's reason
        "SKIPPED ?1? */eagle3_check/suites/chunked.py:*: a case for fixture tiny-gemma4 (this run: tiny-llama)",
    ])


@pytest.mark.parametrize("runner, select, complaints", [
    ("lossy:Lossy", "acceptance/full or prompts or k4__n48/capital or my_request",
     ["acceptance/full FAIL (every proposal accepted each round (a = K)): diverged at token 2: runner *, "
      "reference * (margin * vs tolerance *, runner's token rank *",
      "prompt 'hi' FAIL: call protocol: *",  # the tokens it reports are not the ones it fed the program
      "  runner: lossy:Lossy",
      "golden tiny-llama__eager__cpu__float32__k4__n48 'capital' differs:",
      "*'capital': token 2 differs: got *, golden * (reference margin there *"]),
    ("eagle3_check.mutants:emit_past_max_new", "one-token/max-new-2-full or prompts or k4__n48/capital or my_request",
     ["one-token/max-new-2-full FAIL (*): length: runner emitted 3 tokens, rules fix 2 (max_new)",
      "prompt 'hi' FAIL: length: runner emitted 9 tokens, rules fix 8 (max_new)",
      "  runner: eagle3_check.mutants:emit_past_max_new",
      "golden tiny-llama__eager__cpu__float32__k4__n48 'capital' differs:"]),
], ids=["token-lost", "mutant-emits-past-max-new"])
def test_a_lossy_runner_fails_the_items_with_the_verdicts_forensics(pytester, warm, runner, select, complaints):
    """A runner that loses greedy equality (a user's, or a seeded mutant of ours) fails the
    items; the failure text is the verdict's forensics, without a traceback."""
    pytester.makepyfile(lossy=LOSSY)
    pytester.syspathinsert()
    result = pytester.runpytest(*_project(pytester), f"--eagle3-runner={runner}", "-k", select)
    result.assert_outcomes(failed=5)  # the case, both prompts, the golden prompt, the user's own request
    result.stdout.fnmatch_lines(complaints, consecutive=False)
    out = result.stdout.str()
    assert "Traceback" not in out and "eagle3_check/pytest_plugin" not in out


def _golden_prompts(stem: str) -> list[str]:
    return [p["prompt_id"] for p in json.loads((golden_root() / f"{stem}.json").read_text())["prompts"]]


def test_the_items_run_under_pytest_xdist_and_a_baseline_keys_golden_prompts_share_a_worker(pytester, monkeypatch,
                                                                                          runner_writable):
    """`pytest -n 2 --dist loadgroup --eagle3-...` (one run answers both questions: a run with two workers
    costs ~20 s): each worker collects the same items and builds its own program, and the suite cases, the
    prompts and the user's own request pass with the goldens of two baseline keys; each golden prompt of a
    baseline key runs once in the whole run (the counting runner logs every run; on the tree before workers.py
    these 8 prompts ran 12 times: the baseline item re-ran on its worker the prompts another worker had run)."""
    pytest.importorskip("xdist", reason="pytest-xdist not installed: pip install -e .[dev]")
    pytester.makepyfile(counting=COUNTING, test_user=USER_TEST)
    (pytester.path / "prompts.json").write_text(json.dumps(PROMPTS))
    # the workers get this process's sys.path as it was when xdist was imported: the project's
    # conftest puts the project (counting.py) on it; the workers start in the user's project
    pytester.makeconftest("import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).parent))\n")
    paths = [str(ROOT), *(str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    monkeypatch.setenv("RUNS_LOG", str(runner_writable / "runs.log"))
    monkeypatch.setenv("RUNS_LOG_OPTIONS", "1")
    prompts = _golden_prompts(K4) + _golden_prompts(K2)
    result = pytester.runpytest(*PLUGIN, "--eagle3-fixture=tiny-llama", "--eagle3-prompts=prompts.json",
                                "--eagle3-max-new-tokens=8", f"--eagle3-baseline={BASELINE}",
                                "--eagle3-runner=counting:Counting", "-k", "one-token/max-new-1 or one-token/max-new-2-full "
                                f"or prompts or my_request or {K4} or {K2}", "-n", "2", "--dist", "loadgroup")
    # 3 suite cases (one-token/max-new-1, -1-full, -2-full), 2 prompts, the user's request; the golden prompts and
    # the 2 baseline items
    items = 6 + len(prompts) + 2
    result.assert_outcomes(passed=items)
    result.stdout.fnmatch_lines([f"*2 workers [[]{items} items[]]*"])
    runs = (runner_writable / "runs.log").read_text().splitlines()
    golden_runs = [r for r in runs if r.startswith("run 48 ")]  # the goldens' max new tokens (the others: 1, 2 and 8)
    assert len(golden_runs) == len(prompts) and len(set(golden_runs)) == len(golden_runs), golden_runs


@pytest.mark.parametrize("nodeid, group", [
    (f"eagle3::goldens::{K4}/capital", f"eagle3-{K4}"),
    (f"eagle3::goldens::{K4}/soup@eagle3-{K4}", f"eagle3-{K4}"),  # the suffix xdist appends under pytest < 9.2
    (f"eagle3::baseline::{K4}", f"eagle3-{K4}"),
    (f"eagle3::goldens::{K2}/capital", None),  # no baseline item needs it
    ("eagle3::prompts::hi", None),
    (f"test_user.py::test_goldens::{K4}/x", None),
], ids=["golden-prompt", "golden-prompt-suffixed", "baseline-item", "golden-without-baseline", "prompt", "user-test"])
def test_the_xdist_group_of_an_item_is_its_baseline_key(nodeid, group):
    from eagle3_check.pytest_plugin.workers import group_of

    assert group_of(nodeid, {K4}) == group


def _baseline_copy(pytester, edit) -> list[str]:
    """The committed metrics baseline, edited by `edit(entries)`, as the user's metrics.json."""
    data = json.loads(BASELINE.read_text())
    edit(data["entries"])
    (pytester.path / "metrics.json").write_text(json.dumps(data, indent=1))
    return [*PLUGIN, "--eagle3-fixture=tiny-llama", "--eagle3-baseline=metrics.json"]


def test_the_xdist_group_marks_name_the_baseline_keys(pytester):
    """The items of a baseline key carry xdist_group("eagle3-<stem>"): the mark xdist groups by itself
    (under pytest < 9.2); the other golden items carry none. Without pytest-xdist the plugin declares
    the mark itself (--strict-markers) and its xdist hook is optional."""
    pytester.makeconftest('''
def pytest_collection_finish(session):
    for item in session.items:
        print("group:", item.nodeid, [m.args for m in item.iter_markers("xdist_group")])
''')
    one_key = _baseline_copy(pytester, lambda entries: [entries.pop(k) for k in list(entries) if k != K4])
    result = pytester.runpytest(*one_key, "--eagle3-suite=none", "--eagle3-prompts=none", "--collect-only", "-s",
                                "-k", f"{K4} or {K2}", "-p", "no:xdist", "--strict-markers")
    assert result.ret == pytest.ExitCode.OK
    groups = {line.split()[1]: line.split(" ", 2)[2] for line in result.outlines if line.startswith("group: ")}
    want = {f"eagle3::goldens::{stem}/{p}": f"[('eagle3-{K4}',)]" if stem == K4 else "[]"
            for stem in (K4, K2) for p in _golden_prompts(stem)}
    assert groups == {**want, f"eagle3::baseline::{K4}": f"[('eagle3-{K4}',)]"}
