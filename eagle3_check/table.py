"""One table helper for every text table the tool prints (check, suites, gate).

Worked example:
    format_rows([("prompt", "L", "verdict"), ("hi", "12", "identical")])
    -> ["prompt  L   verdict",
        "hi      12  identical"]
Every column but the last is padded to its widest cell; columns are joined by two spaces;
the last column (a free-text message) is never padded.
"""

from __future__ import annotations

from collections.abc import Sequence


def format_rows(rows: Sequence[Sequence[str]], sep: str = "  ") -> list[str]:
    """The rows as aligned lines (the first row is usually the header)."""
    if not rows:
        return []
    n = len(rows[0])
    bad = [r for r in rows if len(r) != n]
    if bad:
        raise ValueError(f"table row {list(bad[0])} has {len(bad[0])} cells, expected {n} like the header")
    widths = [max(len(r[i]) for r in rows) for i in range(n - 1)]
    return [sep.join([c.ljust(w) for c, w in zip(r[:-1], widths)] + [r[-1]]) for r in rows]
