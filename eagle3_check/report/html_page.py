"""The HTML report's page: one self-contained file (inline CSS, inline SVG plots, no script, no
link, no network at view time), its tables, and the atomic write.

Every text that comes from a run or a user (prompt ids, messages, paths) goes through `esc`;
plots come from `plots` as inline `<svg>`; nothing else is pasted raw.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from eagle3_check.atomic import write_text_atomic

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; color: #1b1b1b; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass, .identical { color: #116611; } .tie { color: #8a6100; } .fail { color: #b00020; font-weight: bold; }
.skip { color: #666; }
.verdict { font-size: 1.2em; font-weight: bold; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; } .plots figure { margin: 0; }
.plots svg { max-width: 530px; height: auto; }
dl.info { display: grid; grid-template-columns: max-content auto; gap: 0 1em; font-size: 0.9em; }
dl.info dt { font-weight: bold; } dl.info dd { margin: 0; }
"""


def human(value, nested: bool = False) -> str:
    """A value as a person reads it, never a Python repr: a bool yes / no, a dict `key: value; ...`
    and a list `a, b` (nested ones of more than one item in parentheses), nothing "none" (at the top
    level ""). Example: {'granularity': 'off', 'graphs': True, 'ks': [1, 2], 'mode': None} ->
    'granularity: off; graphs: yes; ks: (1, 2); mode: none'."""
    if value is None:
        return "none" if nested else ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        text = "; ".join(f"{human(k, True)}: {human(v, True)}" for k, v in value.items()) or "none"
        return f"({text})" if nested and len(value) > 1 else text
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        text = ", ".join(human(v, True) for v in items) or "none"
        return f"({text})" if nested and len(items) > 1 else text
    return str(value)


def esc(value) -> str:
    """`value` as escaped HTML text (`human`: no Python reprs)."""
    return html.escape(human(value), quote=True)


def num(value, fmt: str = "{:.2f}") -> str:
    """A number cell's text: `fmt` for floats, plain for ints, "-" for None."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return fmt.format(value)
    return str(value)


def status_class(status: str | None) -> str:
    return {"pass": "pass", "identical": "identical", "tie": "tie", "fail": "fail",
            "skip": "skip"}.get(str(status).lower(), "")


def table(header: Sequence[str], rows: Sequence[Sequence], numeric: Sequence[int] = (),
          status_col: int | None = None, table_id: str | None = None) -> str:
    """An HTML table; cells are escaped. `numeric`: column indexes aligned right; `status_col`:
    the column whose text (pass/tie/fail/skip) colours its row's cell."""
    if any(len(r) != len(header) for r in rows):
        bad = next(r for r in rows if len(r) != len(header))
        raise ValueError(f"HTML table row {list(bad)} has {len(bad)} cells, expected {len(header)} like the header")
    tid = f' id="{esc(table_id)}"' if table_id else ""
    out = [f"<table{tid}>",
           "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            cls = ["num"] if i in numeric else []
            if i == status_col and status_class(c):
                cls.append(status_class(c))
            attr = ' class="' + " ".join(cls) + '"' if cls else ""
            cells.append(f"<td{attr}>{esc(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def info_list(info: dict) -> str:
    """key: value pairs (a run's fixture, device, dtype, runner, ...) as a definition list."""
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in info.items() if v not in (None, ""))
    return f'<dl class="info">{items}</dl>'


def verdict_line(passed: bool, text: str) -> str:
    word = "PASS" if passed else "FAIL"
    return f'<p class="verdict {"pass" if passed else "fail"}" id="verdict">{word}: {esc(text)}</p>'


def section(title: str, *parts: str, section_id: str | None = None) -> str:
    sid = f' id="{esc(section_id)}"' if section_id else ""
    return f"<section{sid}>\n<h2>{esc(title)}</h2>\n" + "\n".join(p for p in parts if p) + "\n</section>"


def plots(*svgs: str) -> str:
    """Plots side by side (each an inline `<svg>` from `plots`)."""
    return '<div class="plots">' + "".join(f"<figure>{s}</figure>" for s in svgs if s) + "</div>"


def page(title: str, *sections: str) -> str:
    """The whole document: no script, no external stylesheet, image or font."""
    body = "\n".join(sections)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{esc(title)}</title>\n'
            f"<style>{CSS}</style>\n</head>\n<body>\n<h1>{esc(title)}</h1>\n{body}\n</body>\n</html>\n")


def write_html(path: str | Path, document: str, what: str = "--html") -> Path:
    """Writes the page atomically (temp file + rename: a reader never sees half a report)."""
    return write_text_atomic(path, document, what)
