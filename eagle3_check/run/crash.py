"""A run that crashes is a FAIL verdict for its request, never a traceback or a "user error".

A plug-in runner's `run()` may raise anything (ZeroDivisionError, a torch shape error) or
return something that is not a `RunResult`; a program may break the contract during a run
(`ContractViolation`). These are findings about the code under test, so `check`, the edge
suites, the gate and `golden verify` report them as a failed request with the reason (type
and first line of the message) and go on judging the other requests; exit code 1.
Options found wrong before any work (prompt length, flags) stay errors (exit 2).
"""

from __future__ import annotations

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.run.result import RunResult

CRASHED = "crashed"  # the stop reason of the empty RunResult that stands in for a crashed run


class RunCrash(Exception):
    """A run that did not produce a RunResult; `str()` is the one-line reason for the report."""


def crash_reason(e: BaseException) -> str:
    """'crashed: ZeroDivisionError: division by zero' (first line of the message, at most 300 chars);
    a contract violation or other harness error keeps its own one-line message."""
    first = (str(e).splitlines() or [""])[0][:300]
    if isinstance(e, Eagle3CheckError):
        return f"{type(e).__name__}: {first}"
    return f"crashed: {type(e).__name__}: {first}" if first else f"crashed: {type(e).__name__}"


def guarded_run(runner, program, tokenizer, prompt, options) -> RunResult:
    """`runner.run(...)`, with any exception or a non-RunResult return turned into `RunCrash`."""
    try:
        run = runner.run(program, tokenizer, prompt, options)
    except Exception as e:  # noqa: BLE001 - whatever the code under test raises is a finding
        raise RunCrash(crash_reason(e)) from e
    if not isinstance(run, RunResult):
        raise RunCrash(f"contract violated: the runner's run() returned {type(run).__name__}; expected an "
                       "eagle3_check.run.loop.RunResult. Fix: return RunResult(...) from run() (see the Runner protocol)")
    return run


def crashed_run(prompt_ids: list[int], k: int, max_new: int) -> RunResult:
    """The empty RunResult that stands in for a crashed run in a report (no tokens, no rounds)."""
    return RunResult(prompt_ids=list(prompt_ids), tokens=[], text="", rounds=0, accepted=[], tau=0.0,
                     stop_reason=CRASHED, k=k, max_new=max_new)
