"""A K other than get_chain_len asked of a runner-PR binary through `check --suite ... --runner exec:`:
the binary has no --chain, so `--chain=K` is an unknown flag it must refuse (an error exit); a binary
that takes the flag and runs get_chain_len instead fails. The binaries here are shell scripts that
print the runner PR's --help and answer one request each; the program is the eager fixture named as
a `.pte` (a binary never reads it here)."""

from __future__ import annotations

import pytest

from eagle3_check.jobs.suites.binary import run_exec_suite
from eagle3_check.jobs.suites.execute import SELF, SuiteEnv
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.program.contract import ProgramWrapper
from eagle3_check.runners.binary.runner import ExecRunner
from eagle3_check.suites import suite_cases

HELP = "  -model_path (m) type: string\\n  -prompt (p) type: string\\n"  # gflags' listing, no -chain: runner-pr
SUMMARY = ("Prompt tokens: 9, chain K=4, max_new=12\\nab\\n[timing] verify=1ms draft=1ms over 1 rounds (1.0 / 1.0 ms "
           "per round)\\n\\n--- EAGLE-3 speculative decode ---\\ngenerated 2 tokens in 1 rounds (tau=1.000)\\n")


class NamedPte(ProgramWrapper):
    path = "model.pte"  # runners.binary.runner.program_file reads it; the scripts never open it


def script(tmp_path, name: str, on_chain: str):
    exe = tmp_path / name
    exe.write_text("#!/bin/sh\n"
                   f'case "$*" in *--help*) printf "{HELP}"; exit 1;; esac\n'
                   f'case "$*" in *--chain=*) {on_chain};; esac\n'
                   'echo "E [main.cpp:1] this script runs only --chain requests" >&2; exit 1\n')
    exe.chmod(0o755)
    return ExecRunner(f"exec:{exe}", timeout=30.0)


@pytest.fixture(scope="module")
def env(program, tokenizer, fixture):
    return SuiteEnv.fixed(NamedPte(program), tokenizer, SELF, [p.text for p in fixture.prompts()],
                          tolerance_for("float32"), fixture=fixture.name)


CASES = ["chain/lo", "chain/k3", "chain/hi+1"]


def test_a_runner_pr_binary_refuses_a_k_it_has_no_flag_for(env, tmp_path):
    gflags = script(tmp_path, "runner_pr", "echo \"ERROR: unknown command line flag 'chain'\" >&2; exit 1")
    assert gflags.profile.name == "runner-pr"
    got = {r.name: r for r in run_exec_suite("chain", [c for n in CASES for c in suite_cases(n)], env, gflags).results}
    for name in CASES:
        assert got[name].status == "pass", (name, got[name].message)
        assert got[name].message == "error exit 1: ERROR: unknown command line flag 'chain'"


def test_a_runner_pr_binary_that_runs_get_chain_len_instead_fails(env, tmp_path):
    ignores = script(tmp_path, "ignores_k", f"printf '{SUMMARY}'; exit 0")
    got = {r.name: r for r in run_exec_suite("chain", [c for n in CASES for c in suite_cases(n)], env, ignores).results}
    for name in CASES:
        assert got[name].status == "fail", (name, got[name].message)
        assert got[name].message == "expected OptionError (an error exit), but the binary emitted 2 tokens"
