"""The reference's scoring lane (jobs/check/scoring.py): a second thread for our own runner and an
HF reference, the same report as scoring inline; anything else inline; an error raised while
scoring on the thread (the program's weights changed under a shared reference) reaches the caller."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.errors import InputError
from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.jobs.check.scoring import InlineLane, ThreadLane, lane
from eagle3_check.judge.shared import shareable, shared_reference
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions


class Delegating:
    """Our runner under another type: a plug-in's place (scored inline)."""

    def __init__(self):
        self.inner = ReferenceRunner()

    def run(self, *a, **kw):
        return self.inner.run(*a, **kw)


def _check(program, tokenizer, reference, runner, n=5):
    prompts = load_fixture("tiny-llama").prompts()[:n]
    report = run_check(program, tokenizer, reference, prompts, RunOptions(max_new_tokens=12),
                       tolerance_for("float32"), runner=runner)
    out = [{k: v for k, v in o.to_json().items() if k != "seconds"} for o in report.outcomes]
    for o in out:
        o["run"].pop("method_ms")  # times
    return out


def test_lane_kinds(program, hf_reference):
    from eagle3_check.judge.self_ref import SelfReference

    threaded = lane(hf_reference, ReferenceRunner())
    threaded.close()
    assert isinstance(threaded, ThreadLane) and not threaded.thread.is_alive()
    assert type(lane(hf_reference, Delegating())) is InlineLane
    assert type(lane(SelfReference(program), ReferenceRunner())) is InlineLane


def test_thread_lane_report_is_the_inline_one(program, tokenizer):
    ref = shared_reference(shareable(program, "cpu", torch.float32), "cpu")
    threaded = _check(program, tokenizer, ref, ReferenceRunner())
    inline = _check(program, tokenizer, ref, Delegating())
    assert threaded == inline and len(threaded) == 5
    assert all(o["reference"] is not None for o in threaded)


def test_thread_lane_raises_what_scoring_raised(program, tokenizer):
    ref = shared_reference(shareable(program, "cpu", torch.float32), "cpu")
    w = next(ref.model.parameters())
    with torch.no_grad():
        w[0, 0] += 1.0  # after the fingerprint: every score refuses
    try:
        with pytest.raises(InputError, match="changed its own target weights"):
            _check(program, tokenizer, ref, ReferenceRunner(), n=2)
    finally:
        with torch.no_grad():
            w[0, 0] -= 1.0


def test_thread_lane_scores_what_waits_together(hf_reference):
    scoring = ThreadLane(hf_reference)
    try:
        with scoring.cv:  # the thread is held off while three requests are submitted
            for i in range(3):
                scoring.waiting.append((i, [5, 6, 7] * 6, [8, 9] * (i + 3)))
            scoring.cv.notify_all()
        got = [scoring.result(i) for i in range(3)]
    finally:
        scoring.close()
    assert [s for s, _ in got] == [hf_reference.score([5, 6, 7] * 6, [8, 9] * (i + 3)) for i in range(3)]
    assert not scoring.thread.is_alive()


def test_ctrl_c_judges_what_ran(program, tokenizer, monkeypatch):
    from eagle3_check.runners import in_process  # the seam: observe runs each request

    ref = shared_reference(shareable(program, "cpu", torch.float32), "cpu")
    real, calls = in_process.guarded_run, []

    def interrupted_third(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(in_process, "guarded_run", interrupted_third)
    prompts = load_fixture("tiny-llama").prompts()[:5]
    report = run_check(program, tokenizer, ref, prompts, RunOptions(max_new_tokens=8), tolerance_for("float32"),
                       runner=ReferenceRunner())
    assert report.interrupted and len(report.outcomes) == 2  # both runs before Ctrl-C judged, scores and all
    assert all(o.reference is not None and o.verdict.status == "pass" for o in report.outcomes)
    assert not [t for t in __import__("threading").enumerate() if t.name == "eagle3-reference"]
