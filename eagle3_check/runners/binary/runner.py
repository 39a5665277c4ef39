"""`--runner exec:PATH`: a runner binary (the seed's C++ runner, or yours) run as a subprocess.

One process per request, its stdout and stderr read as bytes, bounded (head and tail,
`runners.proc.BoundedOutput`), a per-request timeout that holds within a second or two (no
`communicate()` without a deadline), and on completion or timeout the request's whole process
tree ended (`runners.proc.end_tree`: its process group, its descendants, and, this process being
their subreaper, its double-forked and `setsid` children too), stderr kept for the verdict. The binary gets the program
file (`--pte`), its external data file when it has one (`--data-path`, as the seed's
`--data_path`), the tokenizer file and the request as the seed's flags (`protocol`).

Each process of the binary (a request, the `--help` probe) is started closed in
(`runners.isolate.binary_sandbox.Launch`, `ExecRunner._launch`): as root another user, its own
namespaces, session, limits and private directory; its inputs made reachable to it.

A binary cannot be handed a wrapped program, so what the harness learns is only what the
binary prints; `check`, `suites` and `golden` judge that.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from eagle3_check.errors import InputError
from eagle3_check.runners.binary.protocol import ExecCommand, OutputError, parse_output
from eagle3_check.runners.options import RunOptions
from eagle3_check.runners.proc import (
    BoundedOutput,
    become_subreaper,
    children_of,
    end_tree,
    read_until,
)
from eagle3_check.runners.profiles import NEWEST, RunnerProfile, detect, profile_named
from eagle3_check.runners.seam import BINARY, Capabilities, Observation

DEFAULT_TIMEOUT_S = 300.0
HELP_TIMEOUT_S = 60.0  # the `--help` profile probe: at most this, and never past the request timeout
STDERR_KEPT = 4000  # characters of stderr kept in a verdict (the end of it)
STDOUT_KEPT = (64 * 1024 * 1024, 1024 * 1024)  # bytes of a binary's stdout kept: head, tail (the text it judges)
STDERR_KEPT_BYTES = (1024 * 1024, 1024 * 1024)  # bytes of its stderr kept: head, tail (the [ids] line, the errors)


@dataclass
class ProcessRun:
    argv: list[str]
    returncode: int | None  # None: killed on timeout
    stdout: bytes
    stderr: bytes
    seconds: float
    hint: str = ""  # what to change when a binary run as another user could not reach a file (binary_sandbox)

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def stderr_tail(self) -> str:
        return self.stderr.decode("utf-8", "replace")[-STDERR_KEPT:]

    def failure(self, timeout: float) -> str | None:
        """Why the process itself failed (hang, crash, error exit), or None."""
        if self.timed_out:
            return f"hung: no exit within the {timeout:g} s timeout (process group killed)"
        if self.returncode < 0:
            name = signal.Signals(-self.returncode).name if -self.returncode in signal.valid_signals() else "?"
            return f"crashed: killed by signal {-self.returncode} ({name}){_last_line(self.stderr)}{self.hint}"
        if self.returncode != 0:
            return f"exit status {self.returncode}{_last_line(self.stderr)}{self.hint}"
        return None


# ExecuTorch's own stderr lines that are not the binary's error: the runtime logs a missing method
# when a binary probes an optional metadata method (main.cpp's module->get("get_sliding_window")).
RUNTIME_NOISE = (re.compile(r"E \[program\.cpp:\d+\] No method named '(get_\w+)' in program"),)


def runtime_noise(stderr: bytes) -> list[str]:
    """The noise lines of `stderr` as notes, one per distinct line (they are kept out of the quoted
    error lines). Example: "E [program.cpp:67] No method named 'get_sliding_window' in program" ->
    "runtime noise (not the binary's error): ExecuTorch logs ... (an optional metadata method the
    binary probes; the program does not have it)"."""
    seen = []
    for line in stderr.decode("utf-8", "replace").splitlines():
        if any(p.fullmatch(line.strip()) for p in RUNTIME_NOISE) and line.strip() not in seen:
            seen.append(line.strip())
    return [f"runtime noise (not the binary's error): ExecuTorch logs {line!r} (an optional metadata method the "
            "binary probes; the program does not have it)" for line in seen]


def last_error_line(stderr: bytes) -> str:
    """The last stderr line that is not runtime noise ('(no stderr)' when there is none)."""
    lines = [line for line in stderr.decode("utf-8", "replace").strip().splitlines()
             if line.strip() and not any(p.fullmatch(line.strip()) for p in RUNTIME_NOISE)]
    return (lines or ["(no stderr)"])[-1][:200]


def _last_line(stderr: bytes) -> str:
    """The error lines (`E [file:line] msg`, the seed's format; runtime noise left out): the runtime's
    first failed check with its message (its cause, e.g. "Index 48 is out of bounds") and the last
    error line, else the last two; or the last line."""
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines()
             if line.strip() and not any(p.fullmatch(line.strip()) for p in RUNTIME_NOISE)]
    errors = [line[:200] for line in lines if line.startswith("E [")]
    cause = next((e for e in errors if "Check failed" in e and "):" in e and not e.rstrip().endswith("):")), None)
    errors = ([cause] if cause and cause not in errors[-1:] else []) + errors[-1:] if cause else errors[-2:]
    return f"; stderr: {' | '.join(errors or lines[-1:])}" if lines else "; no stderr"


class ExecRunner:
    """A runner binary: the runner seam (`runners.seam.Runner`: `capabilities`, `observe`) over one
    process a request (`execute`)."""

    def __init__(self, spec: str, timeout: float = DEFAULT_TIMEOUT_S, flag: str = "--runner",
                 profile: str | None = None):
        """`flag` is the option that gave `spec`, named in its errors; `profile`: the runner profile's
        name (`runners.profiles`, `--runner-profile`), None to detect it from the binary's `--help`."""
        self.spec, self.flag = spec, flag
        self.command = ExecCommand.parse(spec, flag)
        self.timeout = timeout
        self._profile: tuple[RunnerProfile, str] | None = None
        self.protections: dict = {}  # what held its last process in (runners/isolate/binary_sandbox.py)
        if profile is not None:
            self.set_profile(profile)
        from eagle3_check.preflight import check_executable

        check_executable(self.command.argv[0], spec, flag)  # also checked where the Config is built

    @property
    def name(self) -> str:
        return self.spec

    def set_profile(self, name: str, flag: str = "--runner-profile") -> None:
        """The profile given by name (`flag`'s value), instead of detecting it."""
        self._profile = (profile_named(name, flag), f"given ({flag} {name})")

    @property
    def profile(self) -> RunnerProfile:
        """The binary's runner profile (`runners.profiles`): given, or detected once from its `--help`
        (gflags lists its flags); a templated command, or a binary whose help lists no seed flag, is
        taken as the newest profile (`profile_how` says so)."""
        if self._profile is None:
            found = None
            if not self.command.templated:
                try:  # under the request's limit and tree kill, as a request (a probe that forks or hangs)
                    _, out, err = run_tree([*self.command.argv, "--help"], min(HELP_TIMEOUT_S, self.timeout),
                                           self._launch())
                    found = detect(out + err)
                except OSError:
                    pass
            self._profile = found or (NEWEST, "the newest profile: " + (
                "a templated command is not asked (give --runner-profile)" if self.command.templated else
                "its --help lists none of the seed's flags (give --runner-profile)"))
        return self._profile[0]

    @property
    def profile_how(self) -> str:
        """How the profile was found, in words (for reports)."""
        self.profile  # noqa: B018 - detects it
        return self._profile[1]

    def profile_info(self) -> dict:
        return {"name": self.profile.name, "pr": self.profile.pr, "commit": self.profile.commit,
                "found": self.profile_how}

    @property
    def capabilities(self) -> Capabilities:
        """No call log, no forcing (it runs its own program file), text bytes; its profile's chunking."""
        return dataclasses.replace(BINARY, chunked_prefill=self.profile.chunks, profile=self.profile.name)

    def observe(self, program, tokenizer, prompt: str, options: RunOptions, what: str = "") -> Observation:
        """The seam's one request (`runners.seam.Runner.observe`): `program`'s file and .ptd, the tokenizer's
        file, the options as a binary gets them (`binary_options`); a hang, a crash, an error exit or
        output off the protocol is the observation's `failure`."""
        from eagle3_check.program.contract import read_metadata

        options = binary_options(options, read_metadata(program.metadata()))
        proc = self.execute(program_file(program), tokenizer.path, prompt, options, program_data(program))
        return observed(proc, self.timeout)

    def supports_chain(self) -> bool:
        """Does the binary take `--chain`? Its profile says (`profile`)."""
        return self.profile.chain_flag

    def check_data(self, data_path: str | Path | None, flag: str = "--data-path") -> None:
        """Refuses (InputError) a templated command with no place for the program's `.ptd` (`flag`'s)."""
        self.command.check_data(str(data_path) if data_path else None, flag)

    def execute(self, model: str | Path, tokenizer: str | Path, prompt: str, options: RunOptions,
                data_path: str | Path | None = None) -> ProcessRun:
        """One request; `data_path`: the program's external data file (`program_data`), passed as the
        seed's `--data_path` (or the template's {data_path})."""
        launch = self._launch()
        try:
            model, tokenizer, data_path = launch.inputs(model, tokenizer, data_path)  # reachable by its account
            argv = self.command.request(str(model), str(tokenizer), prompt, options,
                                        str(data_path) if data_path else None)
        except BaseException:  # nothing started: its private directory goes now (run_tree removes it after)
            launch.close()
            raise
        t0 = time.perf_counter()
        try:
            code, out, err = run_tree(argv, self.timeout, launch)
        except OSError as e:
            raise InputError(f"--runner {self.spec!r}: cannot start {argv[0]} ({e.strerror})", "a runnable binary",
                             "check the path and that it is executable") from None
        return ProcessRun(argv, code, out, err, time.perf_counter() - t0, launch.hint(code, err))

    def _launch(self):
        """The protected start of one process of the binary (runners/isolate/binary_sandbox.py): another
        user when root, its own namespaces, session, limits and private directory."""
        from eagle3_check.runners.isolate.binary_sandbox import Launch

        return Launch(self.command.argv[0], self.spec, self.flag, on_start=self._started)

    def _started(self, protections: dict) -> None:
        self.protections = protections


def observed(proc: ProcessRun, timeout: float) -> Observation:
    """A finished process as the seam's Observation: its parsed output, or why there is none."""
    why = proc.failure(timeout)
    if why:
        return Observation(None, None, 0, 0.0, process=proc, failure=why)
    try:
        out = parse_output(proc.stdout, proc.stderr)
    except OutputError as e:
        return Observation(None, None, 0, 0.0, process=proc, failure=f"output: {e}")
    return Observation(None if out.ids is None else list(out.ids), out.text, out.rounds, out.tau, process=proc,
                       output=out)


def run_tree(argv: list[str], timeout: float, launch=None) -> tuple[int | None, bytes, bytes]:
    """Runs `argv` (stdin /dev/null, its own session; closed in by `launch`, a
    `runners.isolate.binary_sandbox.Launch`, or one made for `argv[0]`) until it exits and its pipes go
    quiet, or `timeout` seconds pass; then its whole process tree is ended (`runners.proc.end_tree`) and
    its private directory removed. (exit status, None when it was still running; stdout and stderr,
    bounded). Raises OSError when it cannot start."""
    become_subreaper()  # a double-forked or setsid child of the binary is reparented to us: end_tree finds it
    if launch is None:
        from eagle3_check.runners.isolate.binary_sandbox import Launch

        launch = Launch(argv[0])
    before = children_of(os.getpid())
    try:
        proc = launch.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except BaseException:
        launch.close()
        raise
    out, err = BoundedOutput(*STDOUT_KEPT), BoundedOutput(*STDERR_KEPT_BYTES)
    fds = [proc.stdout.fileno(), proc.stderr.fileno()]
    deadline = time.monotonic() + timeout
    try:  # bounded reads until EOF, or the binary exited and its pipes went quiet, or the deadline
        eof = read_until(fds, [out, err], deadline, done=lambda: proc.poll() is not None)
        if eof:  # it closed its pipes: it has until the deadline to exit
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(deadline - time.monotonic(), 0))
        code: int | None = proc.poll()
        end_tree(proc, before)  # the whole tree, on completion and on timeout
        if not eof:
            read_until(fds, [out, err], time.monotonic() + 1.0)  # what the killed tree left in the pipes
    finally:
        proc.stdout.close()
        proc.stderr.close()
        launch.close()
    return code, out.bytes(), err.bytes()


def request_timeout(value: str | float | None, flag: str = "--request-timeout") -> float | None:
    """A per-request timeout as given (a number, or its text from an ini file): seconds > 0, or
    None when not given. One rule for `--request-timeout` and `--eagle3-request-timeout`."""
    if value is None:
        return None
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        shown = f"{value:g}" if isinstance(value, float | int) else str(value)
        raise InputError(f"{flag} {shown}", "a number of seconds > 0", f"pass e.g. {flag} 120")
    return t


def exec_runner(spec: str, timeout: str | float | None = None, flag: str = "--runner",
                timeout_flag: str = "--request-timeout", profile: str | None = None) -> ExecRunner:
    """A runner binary from its command line (`exec:PATH [ARGS]`, or `PATH [ARGS]`), its
    per-request timeout (None: DEFAULT_TIMEOUT_S) and its profile (None: detected); errors name
    the options that gave them."""
    t = request_timeout(timeout, timeout_flag)
    return ExecRunner(spec, DEFAULT_TIMEOUT_S if t is None else t, flag, profile)


def resolve_command(spec: str, base: str | Path, flag: str = "--runner") -> str:
    """`exec:PATH [ARGS]` with a relative PATH that names a file (holds a `/`) made absolute
    against `base` (where the option was given: the invocation directory, or an ini file's);
    a bare name (looked up on $PATH) and the arguments are kept. Example, base /proj:
    `./bin/runner --flag x` -> `exec:/proj/bin/runner --flag x`."""
    argv = list(ExecCommand.parse(spec, flag).argv)
    if os.sep in argv[0] and not os.path.isabs(argv[0]):
        argv[0] = os.path.normpath(os.path.join(base, argv[0]))
    return "exec:" + shlex.join(argv)


def binary_options(options: RunOptions, md) -> RunOptions:
    """The options as a binary gets them: K only when it is not the program's default (the
    runner-PR binary has no --chain flag and runs get_chain_len)."""
    if options.chain_len is not None and options.chain_len == md.chain_len:
        return dataclasses.replace(options, chain_len=None)
    return options


def program_file(program) -> Path:
    """The `.pte` a program was loaded from (through wrappers); a binary can run nothing else."""
    p = program
    while p is not None:
        path = getattr(p, "path", None)
        if path is not None and str(path).endswith(".pte"):
            return Path(path)
        p = getattr(p, "inner", None)
    raise InputError(f"a {type(program).__name__} program with an exec runner", "a .pte program file",
                     "pass --pte FILE (export one with `eagle3-check export -o FILE.pte`)")


def program_data(program) -> Path | None:
    """The external data file (.ptd) the program was loaded with (through wrappers), or None when
    its weights are inside the .pte: a binary must be given it too (`--data_path`)."""
    p = program
    while p is not None:
        path = getattr(p, "data_path", None)
        if path is not None:
            return Path(path)
        p = getattr(p, "inner", None)
    return None
