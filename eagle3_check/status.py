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
