"""Strings that came from the runner under test, made safe for where a report puts them (issue 47).

A runner chooses its RunResult's `stop_reason`, `notes` and `text`, and a binary its stderr; the
reports put them in XML, a terminal table and JSON. Here:

- `bounded(run)`: the RunResult the harness judges and reports, its free text bounded (`LIMITS`):
  a stop reason of at most 200 characters (the real ones are `stop`, `max_new`, `context`), at most
  32 notes of 500 characters each (the 32nd says how many more were cut), a text of at most 1 MiB.
  What was cut is said in place
  ("... [cut: 9,999,000 more characters]"), so a judged text that was cut differs from its decode
  and is named by the audit, as a wrong text is.
- `xml_safe(s)`: XML 1.0 allows tab, newline, carriage return and code points from U+0020 on, less
  the surrogates and U+FFFE/U+FFFF; every other character becomes its escape in letters (`\\x1b`).
- `line_safe(s)`: for a table cell: ANSI escape sequences removed, every other control character
  (newlines included) shown as its escape, so one row stays one line and cannot move the cursor.

Worked example: xml_safe("stop\\x1b[31m") == "stop\\\\x1b[31m"; line_safe("stop\\x1b[31m\\nX") == "stop\\\\nX".

With these bounds a `--json` report holds, per request, at most 200 + 32 x 500 + 1 MiB characters of
the runner's free text, its token ids (at most `runners.isolate.wire.MAX_LEN` each), and 32 KiB of its
output (an isolated runner's record: `runners.proc.BoundedOutput`).
"""

from __future__ import annotations

import dataclasses
import re

LIMITS = {"stop_reason": 200, "note": 500, "notes": 32, "text": 1 << 20}
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(m: re.Match) -> str:
    if m.group(0) in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[m.group(0)]
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def xml_safe(s: str) -> str:
    return _XML_BAD.sub(_escape, s)


def line_safe(s: str) -> str:
    return _CONTROL.sub(_escape, _ANSI.sub("", s))


MARK = 48  # characters of "... [cut: N more characters]" at most (N < 10**15)


def cut(s: str, limit: int) -> str:
    """`s` within `limit` characters, the note of what was cut included (so cutting twice is cutting once).
    Example: cut("x" * 300, 200) -> "x" * 152 + "... [cut: 148 more characters]"."""
    if len(s) <= limit:
        return s
    keep = limit - MARK
    return f"{s[:keep]}... [cut: {len(s) - keep:,} more characters]"


def bounded(run):
    """The RunResult with its free text bounded (LIMITS); the same object when nothing was over."""
    notes = run.notes
    over = len(run.stop_reason) > LIMITS["stop_reason"] or len(run.text) > LIMITS["text"] \
        or len(notes) > LIMITS["notes"] or any(len(n) > LIMITS["note"] for n in notes)
    if not over:
        return run
    kept = [cut(n, LIMITS["note"]) for n in notes[: LIMITS["notes"]]]
    if len(notes) > LIMITS["notes"]:  # the last place says how many were cut (bounded twice: the same)
        kept[-1] = f"[cut: {len(notes) - LIMITS['notes'] + 1:,} more notes]"
    return dataclasses.replace(run, stop_reason=cut(run.stop_reason, LIMITS["stop_reason"]),
                               text=cut(run.text, LIMITS["text"]), notes=kept)
