"""The gate through a runner binary runs each distinct request once (`jobs.gate.binary.OncePerRequest`):
the vs-self and vs-HF checks send the same requests and the seed's CLI takes one prompt per process,
so the second check judges the first one's output; a request that differs in any flag is a new process."""

from __future__ import annotations

import os

import eagle3_check.jobs.gate.binary as gate_binary
import eagle3_check.jobs.suites.binary as binary_suites
from eagle3_check.jobs.gate.binary import OncePerRequest, exec_gate_checks
from eagle3_check.jobs.gate.gate import GateInputs
from eagle3_check.jobs.gate.model import timed
from eagle3_check.jobs.suites.report import SuiteReport
from eagle3_check.runners.binary.runner import ExecRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.suites.toy import ToyProgram


def _counting_binary(tmp_path):
    """A binary that appends one line per run to runs.txt (its pid) and exits 1; `tmp_path` must be
    writable by the account binaries run as (the `runner_writable` fixture)."""
    log = tmp_path / "runs.txt"
    script = tmp_path / "bin.sh"
    script.write_text(f"#!/bin/sh\necho $$ >> {log}\necho 'E [bin:0] no' >&2\nexit 1\n")
    os.chmod(script, 0o755)
    return ExecRunner(f"exec:{script}", profile="chunked-prefill"), log


def test_an_identical_request_runs_once(runner_writable):
    runner, log = _counting_binary(runner_writable)  # a directory the binary's own account can write
    once = OncePerRequest(runner)
    a = once.execute("m.pte", "tok.json", "Hi", RunOptions(max_new_tokens=4))
    b = once.execute("m.pte", "tok.json", "Hi", RunOptions(max_new_tokens=4))
    assert b is a and a.returncode == 1 and len(log.read_text().split()) == 1
    once.execute("m.pte", "tok.json", "Hi", RunOptions(max_new_tokens=5))  # one flag differs: a new process
    once.execute("other.pte", "tok.json", "Hi", RunOptions(max_new_tokens=4))  # another program file
    assert len(log.read_text().split()) == 3
    assert once.profile.name == "chunked-prefill" and once.timeout == runner.timeout  # the rest is the runner's


def test_every_check_of_one_gate_shares_one(tokenizer, monkeypatch, tmp_path):
    """The edge suites and both request checks get the same OncePerRequest around the gate's runner."""
    seen = []
    monkeypatch.setattr(binary_suites, "run_exec_suite", lambda name, cases, env, r, **k: seen.append(r)
                        or SuiteReport("edge", []))
    monkeypatch.setattr("eagle3_check.jobs.gate.gate.gate_suite_env", lambda *a: None)

    class Report:
        k, tau, outcomes, info = 4, 0.0, [], {"judged_by": {}}

    monkeypatch.setattr(gate_binary, "run_exec_check", lambda r, *a, **k: seen.append(r) or Report())
    runner, _ = _counting_binary(tmp_path)
    inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=None, prompts=[], options=RunOptions(),
                        suite="edge", tie_budget=0.0)
    exec_gate_checks(runner, ToyProgram(), inputs, object(), timed)
    assert len(seen) == 3 and all(r is seen[0] for r in seen) and isinstance(seen[0], OncePerRequest)
    assert seen[0].runner is runner


class NamedToy(ToyProgram):
    path = "m.pte"  # the file a binary would run (runners.binary.runner.program_file)


def test_the_request_loop_shares_them_too(runner_writable, tokenizer):
    """check's request loop reaches the binary through the seam's `observe` (jobs/check/observe.py), not
    `execute`: an identical request observed twice is still one process."""
    runner, log = _counting_binary(runner_writable)
    once = OncePerRequest(runner)
    a = once.observe(NamedToy(), tokenizer, "Hi", RunOptions(max_new_tokens=4))
    b = once.observe(NamedToy(), tokenizer, "Hi", RunOptions(max_new_tokens=4))
    assert a.process is b.process and a.failure and len(log.read_text().split()) == 1
