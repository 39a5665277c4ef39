"""Ctrl-C of the harness, told apart from a KeyboardInterrupt the runner under test raises.

Both arrive as KeyboardInterrupt. Under `harness_sigint()` (the front end's, around a command)
SIGINT sets a flag before it raises, so `signalled()` says which one it was: the runner's own is
that request's failure (runners/crash.py; in a child process it is the child's crash), the harness's
stops every route, which writes the report with what was judged so far, marked interrupted, and
exits 130. Outside it (a library caller, a worker thread) SIGINT is Python's default.

Worked example: `check` on 10 prompts, SIGINT during request 4 -> the report (JSON, JUnit)
holds requests 1-3 and `"interrupted": "interrupted (SIGINT) after 3 of 10 requests"`; exit 130.
"""

from __future__ import annotations

import contextlib
import signal
import threading

_SIGNALLED = threading.Event()


def _on_sigint(signum, frame):
    _SIGNALLED.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def harness_sigint():
    """SIGINT (Ctrl-C) in this block is the harness's: `signalled()` is True after it (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    _SIGNALLED.clear()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _SIGNALLED.clear()


def signalled() -> bool:
    """Was this KeyboardInterrupt a SIGINT of the harness (under `harness_sigint`)?"""
    return _SIGNALLED.is_set()


def interrupted_line(done: int, total: int, what: str = "requests") -> str:
    """The line an interrupted report carries."""
    return f"interrupted (SIGINT) after {done} of {total} {what}; the rest was not run"
