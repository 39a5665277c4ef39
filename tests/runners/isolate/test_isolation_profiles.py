"""Issue 47, item 6: a runner's profile is the same in process and isolated.

An unmodified copy of the reference runner (a plug-in: isolated by default) declares `design` by
inheritance and runs any `--runner-profile` it is given. Before issue 47 its child's declaration was
not read and `--runner-profile` did not reach an isolated plug-in: it was judged as chunked-prefill
and failed `chain/lo-1` and `chain/hi+1`, which it gets right in process. Here the same plug-in runs
the suites in process and isolated under every profile, and the verdicts (status and message) are
compared case by case, with the profile each report names.

The default run covers `chain` (K and its clamp: where the verdicts turn on the profile); `-m slow`
adds `prefill-range` (the prompt-length errors) and the whole edge suite under every profile.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eagle3_check.cli import main
from eagle3_check.runners.profiles import PROFILES

ROOT = Path(__file__).resolve().parents[3]
COPY = '''from eagle3_check.runners.loop import ReferenceRunner


class CopyRunner(ReferenceRunner):
    """The reference runner, unmodified: it declares `design` (inherited) and runs a given profile."""


def make():
    return CopyRunner()
'''
NO_DECLARATION = '''from eagle3_check.runners.loop import ReferenceRunner


class Plain:
    """Runs as the reference runner, declares nothing: judged as the newest profile either way."""

    def __init__(self):
        self.inner = ReferenceRunner()

    def run(self, program, tokenizer, prompt, options):
        return self.inner.run(program, tokenizer, prompt, options)


def make():
    return Plain()
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    def write(name: str, code: str) -> str:
        (tmp_path / f"{name}.py").write_text(code)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
        return f"{name}:make"
    return write


def _suite(capsys, suite: str, spec: str, profile: str | None, in_process: bool) -> tuple[int, dict]:
    argv = ["check", "--suite", suite, "--fixture", "tiny-llama", "--runner", spec, "--json"]
    argv += ["--runner-profile", profile] if profile else []
    argv += ["--in-process"] if in_process else []
    rc = main(argv)
    out = capsys.readouterr()
    assert "Traceback" not in out.err, out.err[-2000:]
    return rc, json.loads(out.out)


def _verdicts(doc: dict) -> tuple[dict, list]:
    cases, profiles = {}, []
    for r in doc["reports"]:
        profiles.append(r["info"]["profile"]["name"])
        cases.update({c["name"]: (c["status"], c["message"]) for c in r["cases"]})
    return cases, profiles


def _same_both_ways(capsys, suite, spec, profile, want_profile):
    rc_in, doc_in = _suite(capsys, suite, spec, profile, in_process=True)
    rc_iso, doc_iso = _suite(capsys, suite, spec, profile, in_process=False)
    (cases_in, prof_in), (cases_iso, prof_iso) = _verdicts(doc_in), _verdicts(doc_iso)
    assert set(prof_in) == set(prof_iso) == {want_profile}
    assert cases_iso.keys() == cases_in.keys() and cases_in
    differ = {n: (cases_in[n], cases_iso[n]) for n in cases_in if cases_in[n] != cases_iso[n]}
    assert not differ, differ
    assert rc_in == rc_iso
    return rc_iso, cases_iso


PROFILE_CASES = [None, *PROFILES]


@pytest.mark.parametrize("profile", PROFILE_CASES, ids=[p or "declared" for p in PROFILE_CASES])
@pytest.mark.parametrize("suite", ["chain", pytest.param("prefill-range", marks=pytest.mark.slow)])
def test_a_reference_copy_gets_the_same_verdicts_isolated(suite, profile, plugin, capsys):
    spec = plugin("refcopy_profiles", COPY)
    rc, cases = _same_both_ways(capsys, suite, spec, profile, profile or "design")
    assert rc == 0, {n: v for n, v in cases.items() if v[0] == "fail"}  # an unmodified copy passes
    if suite == "chain" and profile in (None, "design"):  # the false failure of issue 47, judged right now
        assert cases["chain/lo-1"][0] == cases["chain/hi+1"][0] == "pass"


def test_a_runner_that_declares_nothing_is_the_newest_both_ways(plugin, capsys):
    spec = plugin("plain_profiles", NO_DECLARATION)
    _same_both_ways(capsys, "chain", spec, None, "chunked-prefill")


def test_an_unknown_declared_profile_is_the_same_one_line_error(plugin, capsys):
    spec = plugin("bad_profile", COPY.replace('"""The reference', 'profile = "nope"\n    """The reference'))
    for extra in (["--in-process"], []):
        rc = main(["check", "--suite", "chain", "--fixture", "tiny-llama", "--runner", spec, *extra])
        err = capsys.readouterr().err
        assert rc == 2 and "CopyRunner.profile nope" in err and "Traceback" not in err, err[-1500:]


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILE_CASES, ids=[p or "declared" for p in PROFILE_CASES])
def test_the_whole_edge_suite_is_the_same_isolated(profile, plugin, capsys):
    spec = plugin("refcopy_edge", COPY)
    rc, _ = _same_both_ways(capsys, "edge", spec, profile, profile or "design")
    assert rc == 0
