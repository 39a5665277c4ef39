"""Two requests at once (jobs/check/twin_runs.py): our runner on the program and on a twin sharing its
weights gives the serial report; anything not ours runs serially; the runs' stdout capture is shared
(runners/shared_output.py) and still fails a run that prints."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.jobs.check import twin_runs
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.jobs.check.twin_runs import Serial, Twins, concurrent_runs, runs_ahead, twin
from eagle3_check.judge.shared import shareable, shared_reference
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.runners.shared_output import run_output, shared_output


class Delegating:
    """Our runner under another type: a plug-in's place (one request at a time)."""

    def __init__(self):
        self.inner = ReferenceRunner()

    def run(self, *a, **kw):
        return self.inner.run(*a, **kw)


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})


def test_only_our_runner_on_our_eager_cpu_program_runs_two_at_once(program, two_cores, monkeypatch):
    from eagle3_check.exact.mode import exact_numerics

    assert concurrent_runs(program, ReferenceRunner(), 5) == 2
    assert concurrent_runs(program, Delegating(), 5) == 1
    assert concurrent_runs(program, ReferenceRunner(), 1) == 1
    assert concurrent_runs(twin_runs, ReferenceRunner(), 5) == 1  # not an EagerBackend
    with exact_numerics():
        assert concurrent_runs(program, ReferenceRunner(), 5) == 1
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert concurrent_runs(program, ReferenceRunner(), 5) == 1
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    from eagle3_check import resources

    need = twin_runs.twin_bytes(program)
    assert need > sum(b.numel() * b.element_size() for b in program.module.buffers()) > 0
    monkeypatch.setattr(resources, "host_available", lambda: 2 * need)  # no room for a twin twice over
    assert concurrent_runs(program, ReferenceRunner(), 5) == 1
    monkeypatch.setattr(resources, "host_available", lambda: 2 * need + 1)
    assert concurrent_runs(program, ReferenceRunner(), 5) == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert concurrent_runs(program, ReferenceRunner(), 5) == 1


def test_twin_shares_the_weights_not_the_caches(program):
    t = twin(program)
    for a, b in zip(program.module.parameters(), t.module.parameters()):
        assert a is b
    assert t.module.target.k_cache_0 is not program.module.target.k_cache_0
    assert t.module.draft.layers[0].self_attn.k_cache is not program.module.draft.layers[0].self_attn.k_cache


def _report(program, tokenizer, reference, parallel: bool, n=6):
    prompts = load_fixture("tiny-llama").prompts()[:n]
    report = run_check(program, tokenizer, reference, prompts, RunOptions(max_new_tokens=16),
                       tolerance_for("float32"), runner=ReferenceRunner(), parallel=parallel)
    out = [{k: v for k, v in o.to_json().items() if k != "seconds"} for o in report.outcomes]
    for o in out:
        o["run"].pop("method_ms")  # times
    return out


def test_two_at_once_gives_the_serial_report(program, tokenizer, two_cores, monkeypatch):
    ran_on: list = []
    real = Twins._work

    def spy(self, j):
        ran_on.append(id(self.programs[j]))
        return real(self, j)

    monkeypatch.setattr(Twins, "_work", spy)
    ref = shared_reference(shareable(program, "cpu", torch.float32), "cpu")
    serial = _report(program, tokenizer, ref, parallel=False)
    assert not ran_on
    twins = _report(program, tokenizer, ref, parallel=True)
    assert len(set(ran_on)) == 2  # the program and its twin
    assert twins == serial and len(twins) == 6
    assert all(o["verdict"]["status"] == "pass" for o in twins)
    assert not [t for t in threading.enumerate() if t.name.startswith("eagle3-runner")]


def test_a_reference_on_the_program_itself_runs_the_requests_one_at_a_time(program, tokenizer, two_cores,
                                                                           monkeypatch):
    """--reference self decodes on the program the requests run on: with requests running ahead on it
    (and its twin), its scoring raced them (a bf16 check vs self crashed in index_copy_). Serial then."""
    from eagle3_check.judge.self_ref import SelfReference

    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert concurrent_runs(program, ReferenceRunner(), 6) == 2  # twins were allowed here
    assert concurrent_runs(program, ReferenceRunner(), 6, SelfReference(program)) == 1
    made: list = []
    monkeypatch.setattr(Twins, "__init__", lambda self, *a: made.append(a) or (_ for _ in ()).throw(AssertionError))
    out = _report(program, tokenizer, SelfReference(program), parallel=True)
    assert not made and len(out) == 6 and all(o["verdict"]["status"] == "pass" for o in out)


def test_runs_ahead_reads_in_prompt_order_whatever_finishes_first(program, tokenizer, two_cores):
    prompts = load_fixture("tiny-llama").prompts()[:4]
    runs = runs_ahead(program, ReferenceRunner(), tokenizer, prompts, RunOptions(max_new_tokens=6), True, [3, 9, 1, 5])
    try:
        assert isinstance(runs, Twins) and runs.order == [1, 3, 0, 2]  # the longest prompt first
        got = [runs.observe(i)[0].run for i in range(4)]
    finally:
        runs.close()
    serial = Serial(program, ReferenceRunner(), tokenizer, prompts, RunOptions(max_new_tokens=6))
    assert [r.tokens for r in got] == [serial.observe(i)[0].run.tokens for i in range(4)]


def test_shared_output_fails_every_run_beside_the_one_that_printed():
    seen: dict[str, tuple[str, int]] = {}
    go = threading.Barrier(2)

    def run(name: str, prints: bool, fd_write: bool = False):
        with run_output() as (printed, raw):
            go.wait()
            if prints:
                print("hello from", name)
            if fd_write:
                os.write(1, b"raw bytes\n")
            time.sleep(0.05)
            go.wait()
        seen[name] = (printed.getvalue(), raw.size)

    with shared_output():
        threads = [threading.Thread(target=run, args=("a", True)), threading.Thread(target=run, args=("b", False))]
        [t.start() for t in threads]
        [t.join() for t in threads]
        go = threading.Barrier(1)
        run("alone", False)
        go = threading.Barrier(2)
        threads = [threading.Thread(target=run, args=("c", False, True)), threading.Thread(target=run, args=("d", False))]
        [t.start() for t in threads]
        [t.join() for t in threads]
    assert "hello from a" in seen["a"][0] and "hello from a" in seen["b"][0]  # overlapping: both see it
    assert seen["alone"] == ("", 0)
    assert seen["c"][1] == seen["d"][1] == len(b"raw bytes\n")


def test_ctrl_c_in_a_run_judges_what_ran_before_it(program, tokenizer, two_cores, monkeypatch):
    from eagle3_check.runners import in_process

    ref = shared_reference(shareable(program, "cpu", torch.float32), "cpu")
    real, calls = in_process.guarded_run, []

    def interrupted_third(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(in_process, "guarded_run", interrupted_third)
    prompts = load_fixture("tiny-llama").prompts()[:6]
    report = run_check(program, tokenizer, ref, prompts, RunOptions(max_new_tokens=8), tolerance_for("float32"),
                       runner=ReferenceRunner(), parallel=True)
    assert report.interrupted and len(report.outcomes) < 6
    assert all(o.reference is not None and o.verdict.status == "pass" for o in report.outcomes)
    assert not [t for t in threading.enumerate() if t.name.startswith(("eagle3-runner", "eagle3-reference"))]
