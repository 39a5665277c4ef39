"""The runner seam (`runners.seam.Runner`) over a runner that returns a RunResult: ours and a plug-in in
this process, or one in its own process (`runners.isolate.runner.IsolatedRunner`). Its call log is the
harness's recording of the program's calls (runners/instrument.py); its crash is the observation's failure.
"""

from __future__ import annotations

import dataclasses

from eagle3_check.runners.crash import RunCrash, guarded_run
from eagle3_check.runners.instrument import RecordingProgram
from eagle3_check.runners.profiles import declared
from eagle3_check.runners.seam import IN_PROCESS, ISOLATED, Capabilities, Observation, Runner


class InProcess:
    """The seam over a runner that takes the harness's program and returns a RunResult: ours and a
    plug-in in this process (under its time limit), or one in its own process (`IsolatedRunner`)."""

    def __init__(self, runner, name: str | None = None):
        self.runner = runner
        self._name = name

    @property
    def name(self) -> str:
        return self._name or getattr(self.runner, "spec", None) or type(self.runner).__name__

    @property
    def capabilities(self) -> Capabilities:
        prof = declared(self.runner)[0]
        base = ISOLATED if getattr(self.runner, "isolated", False) else IN_PROCESS
        return dataclasses.replace(base, chunked_prefill=prof.chunks, profile=prof.name)

    def observe(self, program, tokenizer, prompt, options, what: str = "") -> Observation:
        """`guarded_run` on a recording wrapper of `program` (runners/crash.py): a crash is the failure."""
        rec = RecordingProgram(program)  # every call audited (DESIGN §2): a runner must really run the program
        try:
            run = guarded_run(self.runner, rec, tokenizer, prompt, options, what=what)
        except RunCrash as e:
            return Observation(None, None, 0, 0.0, calls=rec, failure=str(e))
        return Observation(list(run.tokens), None, run.rounds, run.tau, calls=rec, run=run)


def as_runner(runner) -> Runner:
    """Any runner as the seam: a PluginRunner (it has `run`: ours, a plug-in, an isolated one) through
    `InProcess`; one that implements the seam itself (a binary, an `InProcess`) as it is."""
    return InProcess(runner) if callable(getattr(runner, "run", None)) else runner


def capabilities(runner) -> Capabilities:
    """A loaded runner's capabilities (a plain `run()` runner read through `InProcess`)."""
    return as_runner(runner).capabilities
