"""User-facing errors: one line that names the value, what was expected, and the fix.

Every error a user can cause (bad path, bad option, bad program) is raised as an
`Eagle3CheckError` subclass. The CLI prints `error: <message>` and exits 2; it never
shows a traceback for these.
"""

from __future__ import annotations


class Eagle3CheckError(Exception):
    """Base class of every error a user can fix. `str(err)` is the whole one-line message."""

    def __init__(self, what: str, expected: str, fix: str):
        self.what = what
        self.expected = expected
        self.fix = fix
        super().__init__(f"{what}; expected {expected}. Fix: {fix}")

    def __reduce__(self):  # pickled by its parts (an error raised in a `check --workers` process)
        return type(self), (self.what, self.expected, self.fix)


class MetadataError(Eagle3CheckError):
    """A program's metadata is missing a required key or is inconsistent."""


class OptionError(Eagle3CheckError):
    """A runner option or request is outside what the program supports."""


class InputError(Eagle3CheckError):
    """A path, file or checkpoint given by the user cannot be used."""


class ContractViolation(Eagle3CheckError):
    """A program method returned something the contract (DESIGN §1) does not allow."""


def first_line(e: BaseException) -> str:
    """The first line of an exception's message, or its type name when the message is empty
    (a bare `str(e).splitlines()[0]` raises IndexError on an empty message)."""
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__
