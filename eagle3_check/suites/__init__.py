"""The edge-case suites: cases as data, run by `eagle3-check check --suite NAME` and by pytest.

`SUITES` is the one place where suites are listed; each suite module holds its cases.
`edge` is every suite together. A case's expectation is derived at run time from DESIGN §2
and a greedy reference (see `jobs.suites.execute`), never from hard-coded tokens.

May import: program, runners (never the judge, the jobs, fixture building, mutants or the CLI).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""

from __future__ import annotations

import difflib
import random

from eagle3_check.errors import OptionError
from eagle3_check.suites.blocks import (
    ACCEPTANCE,
    BUDGET,
    EOS_BONUS,
    EOS_IN_BLOCK,
    ONE_TOKEN,
    STOP_SET,
)
from eagle3_check.suites.case import Case, Expect, PromptSpec, StopAt
from eagle3_check.suites.chunked import CHUNKED_PREFILL
from eagle3_check.suites.inputs import METADATA, OPTIONS
from eagle3_check.suites.limits import CHAIN, CONTEXT, PREFILL_RANGE, STATE
from eagle3_check.suites.text_end import TEXT_END
from eagle3_check.suites.verify_range import VERIFY_RANGE

SUITES: dict[str, list[Case]] = {
    "acceptance": ACCEPTANCE,
    "one-token": ONE_TOKEN,
    "eos-bonus": EOS_BONUS,
    "eos-in-block": EOS_IN_BLOCK,
    "budget": BUDGET,
    "stop-set": STOP_SET,
    "context": CONTEXT,
    "prefill-range": PREFILL_RANGE,
    "chunked-prefill": CHUNKED_PREFILL,
    "metadata": METADATA,
    "chain": CHAIN,
    "verify-range": VERIFY_RANGE,
    "text-end": TEXT_END,
    "options": OPTIONS,
    "state": STATE,
}
ORDERED = ("state",)  # suites whose case order is the test (`--shuffle` keeps it)
ALL = "edge"

__all__ = ["ALL", "ORDERED", "SUITES", "shuffled_cases", "Case", "Expect", "PromptSpec", "StopAt", "all_cases", "suite_cases"]


def all_cases() -> list[Case]:
    """Every case, the `edge` route: the state suite first (its first request is the smallest
    program, so state a runner sizes by its first request and keeps is met), then the others as
    registered."""
    first = [c for name in ORDERED for c in SUITES[name]]
    return first + [c for name, cases in SUITES.items() if name not in ORDERED for c in cases]


def suite_cases(name: str) -> list[Case]:
    """The cases of a suite (`edge` = all), or of one case by its full name."""
    if name == ALL:
        return all_cases()
    if name in SUITES:
        return list(SUITES[name])
    by_name = {c.name: c for c in all_cases()}
    if name in by_name:
        return [by_name[name]]
    names = [ALL, *SUITES]
    close = difflib.get_close_matches(name, names + list(by_name), n=1)
    hint = f"did you mean '{close[0]}'?" if close else "run `eagle3-check check --list`"
    raise OptionError(f"unknown suite '{name}'", f"one of {', '.join(names)} (or a case name)", hint)


def shuffled_cases(cases: list[Case], seed: int) -> list[Case]:
    """`cases` in a seeded, reproducible shuffled order (`check --suite NAME --shuffle SEED`): the
    suites in a shuffled order, each suite's cases shuffled, except an ORDERED suite's (its order is
    its test). Runs in another order expose state a runner carries from one request to the next.

    Worked example: seed 0 on [acceptance/full, acceptance/zero, state/a, state/b] may give
    [state/a, state/b, acceptance/zero, acceptance/full]; the same seed always gives the same."""
    rng = random.Random(seed)
    groups: dict[str, list[Case]] = {}
    for c in cases:
        groups.setdefault(c.suite, []).append(c)
    names = list(groups)
    rng.shuffle(names)
    out: list[Case] = []
    for name in names:
        group = list(groups[name])
        if name not in ORDERED:
            rng.shuffle(group)
        out += group
    return out
