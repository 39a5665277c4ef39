"""The grid-wide barrier of bench/triton_persistent.py's one-kernel forward (Triton, sm_90).

One arrival count that only grows: arrive with one add, then poll it until it reaches this
launch's base + (barrier index + 1) x programs. POLLS (the `poll` config): "atomic" arrives acq_rel and
polls with acquire RMWs; "load" arrives acq_rel, polls with volatile loads, then one acquire RMW;
"acquire" arrives release and polls with `ld.acquire.gpu` (inline PTX), one round trip to L2 fewer
than "load" after the count is reached; "red" arrives with one thread's `red.release.gpu` (no value
back, so polling starts at once) and polls as "acquire" (the interpreter, which runs no PTX, takes
"load" for both). The base, a multiple of the programs, is read at the start. Bounded: a program
that spins past SPIN_LIMIT polls gives up and bumps an error count (bar_ptr + 2) the forward checks,
never a hang. _wait_count: the same wait (_wait_from) on any count (triton_persistent's dataflow
counters). Needs every program resident at once. Bench-only: not the library's path.
"""

from __future__ import annotations

import triton
import triton.language as tl

SPIN_LIMIT = tl.constexpr(500_000)  # polls of the barrier's generation: far past any phase's length
POLLS = {"atomic": 0, "load": 1, "acquire": 2, "red": 3}  # the `poll` config -> _grid_sync's POLL


@triton.jit
def _load_acquire(ptr):
    """*ptr (int64) with acquire semantics at GPU scope: later reads see what preceded the release."""
    return tl.inline_asm_elementwise("ld.acquire.gpu.global.u64 $0, [$1];", "=l,l", [ptr], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def _arrive_release(ptr):
    """Thread 0 adds 1 to *ptr (int64) with release semantics at GPU scope; no value comes back."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "@p red.release.gpu.global.add.u64 [$1], 1; mov.u32 $0, 0; }",
        "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _poll(ptr, POLL: tl.constexpr):
    """One read of the count *ptr for a wait: acquire RMW (POLL 0), volatile load (1), acquire load (2, 3)."""
    if POLL >= 2:
        return _load_acquire(ptr)
    elif POLL == 1:
        return tl.load(ptr, volatile=True)
    else:
        return tl.atomic_add(ptr, 0, sem="acquire")


@triton.jit
def _wait_count(ptr, target, err_ptr, POLL: tl.constexpr):
    """Wait until the count *ptr (int64, only grows) reaches target; reads after it see what its
    adders released. Bounded like _grid_sync: a give-up bumps *err_ptr."""
    _wait_from(ptr, _poll(ptr, POLL), target, err_ptr, POLL)


@triton.jit
def _wait_from(ptr, cur, target, err_ptr, POLL: tl.constexpr):
    """The wait both use, from a first reading cur of *ptr: poll until it reaches target (at most
    SPIN_LIMIT polls; a give-up bumps *err_ptr), then order the later reads after it."""
    spins = 0
    while (cur < target) & (spins < SPIN_LIMIT):
        cur = _poll(ptr, POLL)
        spins += 1
    if POLL == 1:
        cur = tl.atomic_add(ptr, 0, sem="acquire")  # orders the reads after the wait
    if cur < target:
        tl.atomic_add(err_ptr, 1)  # gave up: the forward reports it
    tl.debug_barrier()


@triton.jit
def _barrier_base(bar_ptr, nprog):
    """The arrival count this launch starts from: a multiple of nprog (every launch adds barriers x
    nprog arrivals), read before this program's first arrival, so below base + nprog."""
    now = tl.atomic_add(bar_ptr, 0, sem="acquire")
    return now - now % nprog


@triton.jit
def _grid_sync(bar_ptr, target, POLL: tl.constexpr):
    """All programs reach this point before any leaves it: arrive (one add on a count that only
    grows), then wait until the count reaches `target` = base + (barrier index + 1) x nprog.
    POLL: POLLS' values."""
    tl.debug_barrier()
    if POLL == 3:  # every thread polls with acquire loads: each one's later reads are ordered after it
        _arrive_release(bar_ptr)
        cur = _load_acquire(bar_ptr)
    elif POLL == 2:
        cur = tl.atomic_add(bar_ptr, 1, sem="release") + 1
    else:
        cur = tl.atomic_add(bar_ptr, 1, sem="acq_rel") + 1
    _wait_from(bar_ptr, cur, target, bar_ptr + 2, POLL)


@triton.jit
def _barriers(bar_ptr, n, POLL: tl.constexpr):
    """n grid barriers and nothing else: what the forward's 5 L of them cost alone."""
    nprog = tl.num_programs(0)
    base = _barrier_base(bar_ptr, nprog)
    for b in range(n):
        _grid_sync(bar_ptr, base + (b + 1) * nprog, POLL)
