"""The runner seam: one protocol every kind of runner implements, so the jobs never ask which kind.

Three kinds, one `Runner` protocol (`capabilities`, `observe`):

| kind | implemented by | call log | forced acceptance | returns | runs |
|---|---|---|---|---|---|
| in process (ours, a plug-in) | `runners.in_process.InProcess` over any `run()` runner | yes | yes | token ids | the harness's program |
| isolated (runners/isolate) | `InProcess` over `IsolatedRunner` | yes (over the pipe) | yes | token ids | the harness's program (or its child's own copy) |
| binary (runners/binary) | `runners.binary.runner.ExecRunner` | no | no | text bytes (`[ids]` when printed) | its program file |

A job adapts a case, a check or a report to what the runner can show (`Capabilities`), as the
suites' `skip_reason` skips a case that needs a patched program: never by the `--runner` value's
form. What can be told before anything is loaded (a usage error before torch) comes from the spec
alone (`kind_of`); the profile, which a binary's `--help` says, from the loaded runner
(`capabilities`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the seam's types, without their imports at run time (a spec is classified before torch)
    from eagle3_check.runners.options import RunOptions
    from eagle3_check.runners.result import RunResult
    from eagle3_check.tokenizer import Tokenizer

BINARY_PREFIX = "exec:"  # `--runner exec:PATH [ARGS]`: a runner binary (runners/binary)


@dataclass(frozen=True)
class Capabilities:
    """What a runner lets the harness observe and control; a job skips or adapts by these."""

    kind: str  # "in-process" | "isolated" | "binary": named in reports and messages only, never branched on
    call_log: bool  # every program call it makes is recorded (audited; draft calls and notes observable)
    forced_acceptance: bool  # it runs the harness's program object: forcing, patched metadata, owned outputs reach it
    token_ids: bool  # it returns token ids (False: text bytes; ids when it prints them, else recovered)
    program_file: bool  # it runs a program file itself (a .pte: --pte needed), not the harness's program object
    chunked_prefill: bool | None = None  # its profile prefills a prompt longer than the chunk in chunks (None: unknown yet)
    profile: str | None = None  # its profile's name (runners/profiles.py), None until known

    @property
    def in_process(self) -> bool:
        """Does it take the harness's program and return a RunResult (an HTML page, --workers, --exact,
        --quantize, every suite case's forcing)?"""
        return self.token_ids and not self.program_file


IN_PROCESS = Capabilities("in-process", call_log=True, forced_acceptance=True, token_ids=True, program_file=False)
ISOLATED = dataclasses.replace(IN_PROCESS, kind="isolated")
BINARY = Capabilities("binary", call_log=False, forced_acceptance=False, token_ids=False, program_file=True)


def kind_of(spec: str | None, isolated: bool = False) -> Capabilities:
    """A `--runner` value's capabilities from its form alone (nothing imported): `exec:PATH` a binary,
    else a runner in process (`isolated`: in its own process, `runners.isolate.policy.wants_isolation`).
    The profile is unknown here. Example: kind_of("exec:./runner").program_file -> True."""
    if (spec or "").startswith(BINARY_PREFIX):
        return BINARY
    return ISOLATED if isolated else IN_PROCESS


@dataclass
class Observation:
    """What one request showed the harness: the kind's own record plus the fields every judge reads."""

    tokens: list[int] | None  # ids it emitted (the prefill bonus first); None: a text-only binary's (see `text`)
    text: bytes | None  # the bytes it printed (a binary), None for a runner that returns ids
    rounds: int
    tau: float  # (emitted - 1) / rounds, as it reported it
    calls: Any = None  # its call log (runners.instrument.RecordingProgram) where the kind has one, else None
    run: RunResult | None = None  # a token-id runner's whole RunResult
    process: Any = None  # a binary's process (runners.binary.runner.ProcessRun)
    output: Any = None  # a binary's parsed output (runners.binary.protocol.ExecOutput), None when off protocol
    failure: str | None = None  # why there is nothing to judge (a crash, a hang, output off the protocol)
    recovery: Any = None  # ids recovered from `text` (judge.recover.Recovery), set where a judge recovered them


class Runner(Protocol):
    """The one runner seam: every kind of runner the harness judges implements it."""

    @property
    def capabilities(self) -> Capabilities:
        """What it lets the harness observe and control (the profile read on first use: a binary's --help)."""
        ...

    @property
    def name(self) -> str:
        """Its `--runner` value, as reports name it."""
        ...

    def observe(self, program, tokenizer: Tokenizer, prompt: str | list[int], options: RunOptions,
                what: str = "") -> Observation:
        """Runs one request and returns what it showed.

        Args:
            program: the harness's program; a runner that takes the program object runs it (wrapped to
                record every call), a binary runs the file it was loaded from (and its .ptd).
            tokenizer: the harness's tokenizer (a binary gets its file).
            prompt: the request as text, or its prompt ids (a binary takes text only).
            options: the run options as the harness derived them (a binary gets those its flags carry).
            what: the request's name, for a time-limit message.

        Returns:
            An Observation: the ids (or the bytes), rounds and tau it reported, its call log where the
            kind has one, and `failure` (never an exception) when it crashed, hung or broke its protocol.
        """
        ...
