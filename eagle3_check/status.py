"""The statuses a request, a case or a gate check ends with.

A `str` Enum: a status compares equal to its string ("pass") and is written to JSON, JUnit
and tables as that string, so reports are unchanged; code names the member (`Status.FAIL`).
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    PASS = "pass"  # identical to the reference
    TIE = "tie"  # differs only where the reference had a numerical tie (passes)
    FAIL = "fail"
    SKIP = "skip"  # could not run here; the reason says what was needed

    __str__ = str.__str__  # "pass", not "Status.PASS", in f-strings and str()
    __format__ = str.__format__


PASS, TIE, FAIL, SKIP = Status.PASS, Status.TIE, Status.FAIL, Status.SKIP


def overall(statuses) -> Status:
    """The one rule for a list of cases, in `check --suite`, the gate, their JSON and JUnit:
    any FAIL -> FAIL; nothing ran (every case skipped, or no case) -> SKIP; any TIE -> TIE;
    else PASS. A skipped case never fails on its own; see `passes` for a list where none ran.
    Example: [pass, skip, tie] -> tie; [skip, skip] -> skip; [pass, fail, skip] -> fail."""
    ss = list(statuses)
    if FAIL in ss:
        return FAIL
    if all(s == SKIP for s in ss):
        return SKIP
    return TIE if TIE in ss else PASS


def passes(status: Status) -> bool:
    """Whether an `overall` status passes: PASS and TIE do; FAIL does not, and neither does SKIP,
    a list of cases where nothing ran (asked to test something, it tested nothing)."""
    return status in (PASS, TIE)


def skip_note(names_and_reasons) -> str:
    """', 3 skipped (first: NAME: why)' for the (name, reason) of each skipped case, '' for none:
    the one wording of skips in the gate's and `check --suite`'s summaries."""
    skips = list(names_and_reasons)
    return f", {len(skips)} skipped (first: {skips[0][0]}: {skips[0][1]})" if skips else ""
