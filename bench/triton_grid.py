"""The grid-wide barrier of bench/triton_persistent.py's one-kernel forward (Triton, sm_90).

One arrival count that only grows: arrive with one acq_rel add, then poll it (acquire RMWs, or
volatile loads then one acquire) until it reaches this launch's base + (barrier index + 1) x
programs; the base, a multiple of the programs, is read at the start. Bounded: a program that
spins past SPIN_LIMIT polls gives up and bumps an error count (bar_ptr + 2) the forward checks,
never a hang. Needs every program resident at once. Bench-only: not the library's path.
"""

from __future__ import annotations

import triton
import triton.language as tl

SPIN_LIMIT = tl.constexpr(500_000)  # polls of the barrier's generation: far past any phase's length


@triton.jit
def _barrier_base(bar_ptr, nprog):
    """The arrival count this launch starts from: a multiple of nprog (every launch adds barriers x
    nprog arrivals), read before this program's first arrival, so below base + nprog."""
    now = tl.atomic_add(bar_ptr, 0, sem="acquire")
    return now - now % nprog


@triton.jit
def _grid_sync(bar_ptr, target, LOAD_POLL: tl.constexpr):
    """All programs reach this point before any leaves it: arrive (one acq_rel add on a count that
    only grows), then wait until the count reaches `target` = base + (barrier index + 1) x nprog."""
    tl.debug_barrier()
    cur = tl.atomic_add(bar_ptr, 1, sem="acq_rel") + 1
    spins = 0
    while (cur < target) & (spins < SPIN_LIMIT):
        if LOAD_POLL:
            cur = tl.load(bar_ptr, volatile=True)
        else:
            cur = tl.atomic_add(bar_ptr, 0, sem="acquire")
        spins += 1
    if LOAD_POLL:
        cur = tl.atomic_add(bar_ptr, 0, sem="acquire")  # orders the reads after the barrier
    if cur < target:
        tl.atomic_add(bar_ptr + 2, 1)  # gave up: the forward reports it
    tl.debug_barrier()


@triton.jit
def _barriers(bar_ptr, n, LOAD_POLL: tl.constexpr):
    """n grid barriers and nothing else: what the forward's 5 L of them cost alone."""
    nprog = tl.num_programs(0)
    base = _barrier_base(bar_ptr, nprog)
    for b in range(n):
        _grid_sync(bar_ptr, base + (b + 1) * nprog, LOAD_POLL)
