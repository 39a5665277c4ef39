"""Shrinking a failing request to its smallest reproduction: a deterministic search, bounded in time.

A request here is what a runner is asked (`Request`: the prompt ids, max new tokens, K and,
where the caller can rebuild the program, integer fields of its spec such as max_seq_len).
A `probe` runs one request and says how it fails (`Failure`: the rule it broke, normalised
by `failure_kind`) or returns None when it passes. `shrink` keeps only candidates that fail
in the same way as the original (the same kind), so what it reports always fails as the
original did; it never touches the original's verdict.

The passes, repeated until none shrinks any more (or the budget is spent):
1. prompt: delta debugging over the ids between the frame (`frame_head` ids at the front:
   BOS and the chat template's prefix; `frame_tail` at the end: its suffix), never below
   `min_prompt` ids: the whole middle first, then chunks of halves, quarters, ... down to
   single ids (ddmin's complement step, chunk granularity doubling when nothing goes);
2. max new tokens: the failing index and the one after first (`Failure.index + 2`), then a
   bisection down to 1;
3. K: every smaller K in `k_range`, smallest first;
4. the program spec: each integer field bisected down to its floor (`spec_floors`).

Deterministic: the same probe answers give the same candidates in the same order. The
budget is wall time: no probe starts once the elapsed time plus two mean probes so far (that
one and the final re-run of the result) would reach it (`complete` is False then), so a search
ends within its budget when the probes are alike. A candidate the probe refuses as bad input (an `Eagle3CheckError`: K out of range,
a prompt below the prefill range) counts as not failing in the same way.

Worked example: a runner that crashes once max new tokens exceeds 5, on a 20-id prompt with
a 1-id frame, max new 64, K 4 in [1, 7]: the prompt shrinks to `min_prompt` ids (the crash
does not depend on it), max new tokens to 6, K to 1.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from eagle3_check.errors import Eagle3CheckError

DEFAULT_BUDGET_S = 120.0  # --shrink-budget: a tiny fixture's probe takes ~0.05-0.3 s; a real model's seconds


@dataclass(frozen=True)
class Request:
    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    k: int
    spec: tuple[tuple[str, int], ...] = ()  # program spec fields the probe rebuilds the program with

    def spec_dict(self) -> dict[str, int]:
        return dict(self.spec)

    def describe(self) -> str:
        spec = "".join(f", {k} {v}" for k, v in self.spec)
        return f"L {len(self.prompt_ids)}, max new tokens {self.max_new_tokens}, K {self.k}{spec}"

    def to_json(self) -> dict:
        return {"prompt_ids": list(self.prompt_ids), "max_new_tokens": self.max_new_tokens, "k": self.k,
                "spec": dict(self.spec)}


@dataclass(frozen=True)
class Failure:
    kind: str  # the rule broken, normalised (failure_kind): what "fails in the same way" compares
    message: str  # the verdict's own message
    index: int | None = None  # the first failing emitted index, when the verdict names one
    expected: list[int] | None = None  # the reference's tokens (None: not scored, e.g. a crash)
    got: list[int] | None = None  # the runner's tokens

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


Probe = Callable[[Request], "Failure | None"]

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_LIST = re.compile(r"\[[^\[\]]*\]")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def failure_kind(message: str) -> str:
    """The rule a verdict message names, without its particulars: the first clause (up to the
    verdict's " (" extras or "; "), quoted names, lists and numbers replaced.

    'diverged at token 3: runner 5, reference 8 (margin 1.2 vs ...)' -> 'diverged at token #: runner #, reference #';
    "crashed on 'p1': IndexError: index 48 is out of bounds" -> 'crashed on …: IndexError: index # is out of bounds'."""
    return normalise(message.split(" (", 1)[0].split("; ", 1)[0])


def normalise(text: str) -> str:
    """`text` without its particulars: quoted names as …, lists as […], numbers as #."""
    return _NUMBER.sub("#", _LIST.sub("[…]", _QUOTED.sub("…", text))).strip()


@dataclass
class ShrinkResult:
    original: Request
    original_failure: Failure
    shrunk: Request
    failure: Failure  # the shrunk request's failure, re-run at the end (same kind as the original's)
    probes: int = 0
    seconds: float = 0.0
    complete: bool = True  # the search ended by itself, not on the budget
    steps: list[str] = field(default_factory=list)  # what each accepted pass changed
    prompt_text: str | None = None  # the shrunk prompt as text, when the original was text (set by the caller)
    kept: list[str] = field(default_factory=list)  # the dimensions the route cannot shrink, and why (the caller's)

    @property
    def reduced(self) -> bool:
        return self.shrunk != self.original

    def to_json(self) -> dict:
        return {"original": self.original.to_json(), "original_failure": self.original_failure.to_json(),
                "shrunk": self.shrunk.to_json(), "failure": self.failure.to_json(), "probes": self.probes,
                "seconds": round(self.seconds, 3), "complete": self.complete, "steps": self.steps,
                "kept": self.kept}


@dataclass
class Bounds:
    """What the search may try: the prompt frame, the least prompt, K's range, the spec floors."""

    frame_head: int = 0  # ids kept at the front (BOS, the chat template's prefix)
    frame_tail: int = 0  # ids kept at the end (the chat template's suffix)
    min_prompt: int = 1  # the program's min prefill
    k_range: tuple[int, int] = (1, 1)
    spec_floors: dict[str, int] = field(default_factory=dict)  # spec field -> the least value to try


class _Search:
    def __init__(self, probe: Probe, kind: str, budget_s: float, clock, on_probe, t0: float):
        self.probe, self.kind, self.budget_s, self.clock = probe, kind, budget_s, clock
        self.on_probe = on_probe
        self.t0 = t0
        self.probes = 0
        self.spent = 0.0  # seconds inside probes
        self.out_of_time = False
        self.last: Failure | None = None  # the failure of the latest candidate that failed the same way
        self.seen: dict[Request, bool] = {}  # each candidate probed once (the passes revisit some)

    def room(self) -> bool:
        """Time for one more probe and the final re-run of the result, at the mean probe so far."""
        mean = self.spent / self.probes if self.probes else 0.0
        if self.clock() - self.t0 + 2 * mean >= self.budget_s:
            self.out_of_time = True
        return not self.out_of_time

    def fails(self, req: Request) -> bool:
        """Whether `req` fails in the original's way (False when out of budget: not probed)."""
        if req in self.seen:
            return self.seen[req]
        if not self.room():
            return False
        t = self.clock()
        try:
            got = self.probe(req)
        except Eagle3CheckError:  # a request the program or options refuse: not the same failure
            got = None
        self.spent += self.clock() - t
        self.probes += 1
        same = got is not None and got.kind == self.kind
        self.seen[req] = same
        if same:
            self.last = got
        if self.on_probe:
            self.on_probe(self.probes, req, same)
        return same


def budget_shares(n: int, budget_s: float, clock=time.monotonic):
    """The budget of each of `n` searches in turn: what is left, shared out evenly over those still to go."""
    t0 = clock()
    for i in range(n):
        yield max(budget_s - (clock() - t0), 0.0) / (n - i)


def _ddmin(mid: list[int], ok: Callable[[list[int]], bool], least: int) -> list[int]:
    """The smallest middle (at least `least` ids) ddmin's complement steps find that keeps ok()."""
    if len(mid) > least and ok(mid[:least]):  # the whole middle at once (or all but the least)
        return mid[:least]
    n = 2
    while len(mid) > least:
        chunk = -(-len(mid) // n)
        for i in range(0, len(mid), chunk):
            cand = mid[:i] + mid[i + chunk:]
            if len(cand) >= least and ok(cand):
                mid, n = cand, max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(2 * n, len(mid))
    return mid


def _bisect_down(lo: int, hi: int, ok: Callable[[int], bool], hint: int | None = None) -> int:
    """The least value in [lo, hi] that ok() accepts, assuming hi is accepted (bisection; `hint`,
    when inside, is tried first as the new upper end)."""
    if hint is not None and lo <= hint < hi and ok(hint):
        hi = hint
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def _prompt_pass(cur: Request, s: _Search, bounds: Bounds) -> tuple[Request, list[str]]:
    ids = list(cur.prompt_ids)
    head, tail = ids[: bounds.frame_head], ids[len(ids) - bounds.frame_tail:] if bounds.frame_tail else []
    mid = ids[len(head): len(ids) - len(tail)]
    least = max(bounds.min_prompt - len(head) - len(tail), 0)
    new = _ddmin(mid, lambda m: s.fails(dataclasses.replace(cur, prompt_ids=tuple(head + m + tail))), least)
    out = dataclasses.replace(cur, prompt_ids=tuple(head + new + tail))
    return out, [f"prompt {len(ids)} -> {len(out.prompt_ids)} ids"]


def _max_new_pass(cur: Request, s: _Search, bounds: Bounds) -> tuple[Request, list[str]]:
    hint = s.last.index + 2 if s.last and s.last.index is not None else None  # the failing index and one after
    n = _bisect_down(1, cur.max_new_tokens, lambda m: s.fails(dataclasses.replace(cur, max_new_tokens=m)), hint)
    return dataclasses.replace(cur, max_new_tokens=n), [f"max new tokens {cur.max_new_tokens} -> {n}"]


def _k_pass(cur: Request, s: _Search, bounds: Bounds) -> tuple[Request, list[str]]:
    k = next((k for k in range(bounds.k_range[0], cur.k) if s.fails(dataclasses.replace(cur, k=k))), cur.k)
    return dataclasses.replace(cur, k=k), [f"K {cur.k} -> {k}"]


def _spec_pass(cur: Request, s: _Search, bounds: Bounds) -> tuple[Request, list[str]]:
    steps = []
    for name, floor in bounds.spec_floors.items():
        spec = cur.spec_dict()

        def with_value(x: int, spec=spec, name=name, base=cur) -> Request:
            return dataclasses.replace(base, spec=tuple({**spec, name: x}.items()))

        v = _bisect_down(floor, spec[name], lambda x, f=with_value: s.fails(f(x)))
        if v != spec[name]:
            steps.append(f"{name} {spec[name]} -> {v}")
            cur = with_value(v)
    return cur, steps


def shrink(original: Request, probe: Probe, bounds: Bounds, budget_s: float = DEFAULT_BUDGET_S,
           on_probe: Callable[[int, Request, bool], None] | None = None, clock=time.monotonic,
           original_failure: Failure | None = None) -> ShrinkResult:
    """The smallest request the passes find that fails as `original` does (see the module doc).
    `original_failure`: the original's failure when the caller has it (else it is probed first);
    an original that passes is an error (nothing to shrink)."""
    t0 = clock()
    first = original_failure or probe(original)
    if first is None:
        raise ValueError(f"shrink: the original request ({original.describe()}) passes; nothing to shrink")
    s = _Search(probe, first.kind, budget_s, clock, on_probe, t0)
    if original_failure is None:
        s.probes, s.spent = 1, clock() - t0
    s.last, s.seen[original] = first, True
    cur, steps = original, []
    changed = True
    while changed and not s.out_of_time:
        changed = False
        for step in (_prompt_pass, _max_new_pass, _k_pass, _spec_pass):
            nxt, what = step(cur, s, bounds)
            if nxt != cur:
                steps += what
                cur, changed = nxt, True
    final, complete = first, not s.out_of_time
    if cur != original:  # re-run the result: it must still fail as the original did (a flaky runner does not)
        try:
            again = probe(cur)
        except Eagle3CheckError:
            again = None
        s.probes += 1
        if again is not None and again.kind == first.kind:
            final = again
        else:
            steps.append(f"the shrunk request ({cur.describe()}) did not fail again the same way: kept the original")
            cur = original
    return ShrinkResult(original, first, cur, final, s.probes, clock() - s.t0, complete, steps)
