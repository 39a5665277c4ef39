"""A forked runner child renews torch's CPU thread pool before any thread asks for it
(runners/isolate/fork.py `reset_torch_thread_pool`). Without it, fresh threads whose first parallel op
comes at once (transformers' threaded weight loading in the child) race for the pool torch replaces
after fork and one gets none: `pool INTERNAL ASSERT FAILED`, once reported as a corrupt weight file by
`check --exact --workers 2` in `make check`."""

from __future__ import annotations

import os
import sys
import threading

import pytest
import torch

from eagle3_check.runners.isolate.fork import reset_torch_thread_pool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs os.fork on Linux")

THREADS, CHILDREN = 32, 12


def _child(reset: bool) -> int:
    """In a forked child: THREADS fresh threads run their first parallel op at once (after
    `reset_torch_thread_pool` when `reset`); 1 if any of them raised."""
    if reset:
        reset_torch_thread_pool()
    errors, start = [], threading.Barrier(THREADS)

    def first_op():
        start.wait()
        try:
            torch.zeros(100_000).add_(1)  # parallel_for: the thread's lazy thread-count setup
        except RuntimeError as e:
            errors.append(e)

    threads = [threading.Thread(target=first_op) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 1 if errors else 0


def _failed_children(reset: bool, children: int = CHILDREN, until_one: bool = False) -> int:
    """How many of `children` forked children fail (`_child`); `until_one`: stop at the first that does."""
    (torch.randn(256, 256) @ torch.randn(256, 256)).sum()  # the parent has used its pool
    failed = 0
    for _ in range(children):
        if until_one and failed:
            break
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                code = _child(reset)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        failed += os.waitstatus_to_exitcode(status) != 0
    return failed


def test_threads_of_a_forked_child_get_a_pool_after_the_reset():
    assert _failed_children(reset=True) == 0


def test_without_the_reset_the_race_is_there_to_catch():
    # 169 of 200 children failed on torch 2.13.0 (2 cores, quiet), but a make check under load once saw
    # 12 of 12 pass: so up to 200 children, stopping at the first failure (usually the first child).
    # If a torch release fixes the race, this fails: the reset is then harmless and this test can go.
    assert _failed_children(reset=False, children=200, until_one=True) > 0, (
        f"torch {torch.__version__} no longer races for its pool after fork (200 children)")
