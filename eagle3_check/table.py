"""One table helper for every text table the tool prints (check, suites, gate, golden, mutants,
metrics, fixtures), on tabulate's "plain" format.

Worked example:
    format_rows([("prompt", "L", "verdict"), ("hi", "12", "identical")])
    -> ["prompt  L   verdict",
        "hi      12  identical"]
Every column is padded to its widest cell (left-aligned unless `align` says "right"); columns are
joined by two spaces; trailing blanks are cut, so the last column (a free-text message) is never
padded. Cells are printed as given: no number parsing, "007" stays "007"; ANSI sequences are removed
and control characters shown as escapes (`untrusted.line_safe`: one row, one line).
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from eagle3_check.untrusted import line_safe

ALIGNS = ("left", "right")


def format_rows(rows: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> list[str]:
    """The rows as aligned lines (the first row is usually the header; it is aligned like the rest)."""
    if not rows:
        return []
    n = len(rows[0])
    bad = [r for r in rows if len(r) != n]
    if bad:
        raise ValueError(f"table row {list(bad[0])} has {len(bad[0])} cells, expected {n} like the header")
    not_str = [c for r in rows for c in r if not isinstance(c, str)]
    if not_str:
        raise ValueError(f"table cell {not_str[0]!r} is a {type(not_str[0]).__name__}, expected str: format it first")
    align = list(align) if align is not None else ["left"] * n
    if len(align) != n or any(a not in ALIGNS for a in align):
        raise ValueError(f"table align {align} must name {n} columns, each one of {ALIGNS}")
    # a cell may hold a runner's string: no ANSI sequence or control character reaches the terminal
    text = tabulate([[line_safe(c) for c in r] for r in rows], tablefmt="plain", disable_numparse=True,
                    colalign=align)
    return [line.rstrip() for line in text.split("\n")]
