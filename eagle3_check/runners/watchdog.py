"""A per-request time limit for an in-process runner: a hanging run becomes a FAIL, the report is written.

Python cannot kill a thread, so the runner's `run()` goes to a daemon worker thread and the
harness waits at most `seconds` for it (`run_limited`). On timeout the worker is abandoned:
- its program handle is revoked (`Revocable`): the next program call it makes raises, so a
  runner that loops over the program stops at its next call and never touches the shared KV
  cache again;
- if it is inside a program call when the time runs out, the harness waits `GRACE_S` for the
  call to return; a call still running then (a hang in native code) leaves the program busy,
  and every later request on it fails at once as not run ("busy"), since another call would
  race with it on the same caches;
- what it prints from then on is dropped (`StdoutRouter`): stdout carries `--json`.
A thread a run starts and leaves running after `run()` returns is a stray (`stray_threads`): its
sys.stdout writes are dropped the same way, so it cannot blame a later request (runners/crash.py fails
the request that left it, for a plug-in runner).
A subprocess was the alternative: it can be killed, but the program (an eager module, a loaded
`.pte`, CUDA graphs, the recording wrapper that audits every call) lives in this process and
cannot be shared with a child without re-building it per request (fork after CUDA is unsafe).
Runner binaries (`--runner exec:PATH`) are processes already: their process group is killed.

`TimeLimited(runner, seconds)` asks for a limit; a bare runner (the library's default, our own
reference runner) runs unlimited in the caller's thread. `with_limit(runner)` unwraps it.
`time_limited(runner, spec, seconds)` is the one rule of `check --request-timeout` and the pytest
plugin's `--eagle3-request-timeout`: a limit given applies to any in-process runner; without one a
plug-in gets 300 s and our own runners (reference, device: long on a large model on CPU) none.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from eagle3_check.program.contract import ProgramWrapper

DEFAULT_REQUEST_TIMEOUT = 300.0  # seconds a plug-in's request may take by default (CPU fixtures: < 1 s)
FLAG = "--request-timeout"  # the option named in a timeout's message (the plugin's: --eagle3-request-timeout)
GRACE_S = 2.0  # after a timeout, how long an abandoned program call gets to return
_ABANDONED: weakref.WeakSet = weakref.WeakSet()  # threads of abandoned runs (their stdout is dropped);
# Thread objects, not idents: an ident is reused by a later thread, whose output must not be dropped
_STRAY: weakref.WeakSet = weakref.WeakSet()  # threads a run left running after it returned (runners/crash.py):
# their stdout is dropped, so what they print during a later request never blames that request
_BUSY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # root program -> why it is busy


class RequestTimeout(Exception):
    """The run took longer than its limit; `str()` is the one-line reason for the report."""


class Revoked(Exception):
    """Raised into an abandoned run at its next program call."""


@dataclass
class TimeLimited:
    """A runner with a per-request time limit (the CLI's --request-timeout)."""

    runner: object
    seconds: float
    flag: str = FLAG  # the option that gave the limit, named in a timeout's message

    def run(self, program, tokenizer, prompt, options):
        return self.runner.run(program, tokenizer, prompt, options)


def with_limit(runner) -> tuple[object, float | None]:
    """(the runner itself, its limit in seconds): `TimeLimited` unwrapped, else no limit (None)."""
    if isinstance(runner, TimeLimited):
        return runner.runner, runner.seconds
    return runner, None


def limit_flag(runner) -> str:
    """The option a `TimeLimited` runner's limit came from (FLAG for any other runner)."""
    return runner.flag if isinstance(runner, TimeLimited) else FLAG


def time_limited(runner, spec: str, seconds: float | None, flag: str = FLAG):
    """`runner` (loaded from `spec`) under the per-request limit the options give: `seconds` when
    given, else DEFAULT_REQUEST_TIMEOUT for a plug-in and none for our own runners (`ALIASES`)."""
    from eagle3_check.runners.plugin import ALIASES

    if seconds is None and (spec in ALIASES or spec in ALIASES.values()):
        return runner
    return TimeLimited(runner, DEFAULT_REQUEST_TIMEOUT if seconds is None else seconds, flag)


class Revocable(ProgramWrapper):
    """The program handle one run gets: counts calls in flight; once revoked, every call raises."""

    def __init__(self, inner):
        super().__init__(inner)
        self.revoked: str | None = None
        self.in_call: str | None = None  # the method being called now

    def _enter(self, method: str, fn: Callable, *args):
        if self.revoked:
            raise Revoked(self.revoked)
        self.in_call = method
        try:
            return fn(*args)
        finally:
            self.in_call = None
            if self.revoked:  # an abandoned call came back: the program is free again
                with contextlib.suppress(TypeError):
                    _BUSY.pop(root_of(self.inner), None)

    def reset(self) -> None:
        self._enter("reset", self.inner.reset)

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        return self._enter("prefill", self.inner.prefill, tokens, positions)

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        return self._enter("target_verify", self.inner.target_verify, tokens, positions)

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        return self._enter("draft_decode", self.inner.draft_decode, tokens, feature, positions)


def root_of(program):
    """The innermost program under the wrappers (recording, forcing, patched metadata)."""
    while getattr(program, "inner", None) is not None:
        program = program.inner
    return program


def busy_reason(program) -> str | None:
    """Why `program` cannot be called now (a timed-out request is still inside one of its calls), or None."""
    try:
        return _BUSY.get(root_of(program))
    except TypeError:  # not weak-referenceable: never marked
        return None


class StdoutRouter(io.TextIOBase):
    """sys.stdout while runs are guarded: writes from abandoned runs are dropped, writes during a
    guarded run go to its capture buffer, the rest to the real stdout."""

    def __init__(self, real):
        self.real = real
        self.capture: io.StringIO | None = None

    def write(self, s: str) -> int:
        me = threading.current_thread()
        if me in _ABANDONED or me in _STRAY:
            return len(s)
        return (self.capture or self.real).write(s)

    def flush(self) -> None:
        (self.capture or self.real).flush()

    def __getattr__(self, name: str):  # fileno, encoding, isatty, buffer: the real stream's
        return getattr(self.real, name)


@contextlib.contextmanager
def captured_stdout() -> Iterator[io.StringIO]:
    """What a run prints to stdout lands in the yielded buffer; after an abandoned run the router
    stays installed (its late output must never reach the report)."""
    prev = sys.stdout
    router = prev if isinstance(prev, StdoutRouter) else StdoutRouter(prev)
    buf = io.StringIO()
    router.capture, sys.stdout = buf, router
    try:
        yield buf
    finally:
        router.capture = None
        if router is not prev and not len(_ABANDONED) and not any(t.is_alive() for t in _STRAY):
            sys.stdout = prev


def stray_threads(before: set) -> list[threading.Thread]:
    """The threads started since `before` (a `threading.enumerate()` taken as the run began) that are
    still running, each marked stray: what it prints to sys.stdout from now on is dropped."""
    left = [t for t in threading.enumerate() if t not in before and t.is_alive() and t not in _ABANDONED]
    _STRAY.update(left)
    if left and not isinstance(sys.stdout, StdoutRouter):  # between requests and after the last: dropped too
        sys.stdout = StdoutRouter(sys.stdout)
    return left


def run_limited(fn: Callable[[Revocable], object], program, seconds: float | None, what: str,
                flag: str = FLAG) -> object:
    """`fn(handle)` in a daemon worker thread, `handle` a `Revocable` over `program`; returns its
    result or raises what it raised (SystemExit included). After `seconds`, raises RequestTimeout
    (naming `flag`, the option that gave the limit) and abandons the worker (see the module doc).
    A program left busy by an earlier timeout raises RequestTimeout at once, without running `fn`."""
    if seconds is None:  # no limit: the caller's own thread, as a plain call
        return fn(program)
    busy = busy_reason(program)
    if busy:
        raise RequestTimeout(f"not run: the program is busy ({busy}); expected a free program. Fix: make "
                             "that runner return within the limit, then run the check again")
    handle = Revocable(program)
    box: dict[str, object] = {}
    grad = _grad_enabled()

    def work() -> None:
        try:
            with _grad_mode(grad):  # grad mode is per thread: the caller's carries over
                box["value"] = fn(handle)
        except BaseException as e:  # noqa: BLE001 - handed to the caller, which judges it
            box["error"] = e

    worker = threading.Thread(target=work, name=f"eagle3-check run {what}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        _ABANDONED.add(worker)
        why = f"request {what} timed out after {seconds:g} s ({flag} {seconds:g})"
        handle.revoked = f"{why}; this run was abandoned"
        method = handle.in_call
        deadline = time.monotonic() + GRACE_S
        while handle.in_call and time.monotonic() < deadline:
            time.sleep(0.01)
        if handle.in_call:
            with contextlib.suppress(TypeError):
                _BUSY[root_of(program)] = f"{why} inside the program's {handle.in_call}, which has not returned"
        where = f" inside {method}" if method else ""
        raise RequestTimeout(f"timeout: {why}{where}; the run was abandoned. Fix: make the runner return "
                             f"within the limit (a loop that never ends?) or pass a larger {flag}")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]


def _grad_enabled() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch.is_grad_enabled()) if torch else True


def _grad_mode(enabled: bool):
    torch = sys.modules.get("torch")
    return torch.set_grad_enabled(enabled) if torch else contextlib.nullcontext()
