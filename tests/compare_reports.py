"""Two sets of reports (JSON, JUnit XML, HTML) compared byte for byte except times and paths.

The house move (issue 46) changes no behaviour: the reports `check`, `check --suite edge` and
`golden verify` write before it and after it are the same files once what must differ between two
runs is taken out. That is, in every file:
  - each directory given with --root (the checkout, the output directory of each run) -> `<ROOT>`;
  - a duration: a JSON number under a key that names a time (`seconds`, `time`, `elapsed`, `*_s`,
    `*_ms`, `wall`, `duration`), at any depth below it, a JUnit `time=` / `timestamp=` / `hostname=` attribute, and in the
    HTML a number followed by `s` or `ms` (a table cell or a plot label) -> `<T>`;
  - the embedded plots' SVG ids (matplotlib numbers them per process) -> `<ID>`.
Nothing else is normalised: a token, a count, a verdict, a message or a field that differs is a
difference, printed as a unified diff of the normalised files.

usage: python tests/compare_reports.py BEFORE_DIR AFTER_DIR [--root DIR ...]
exit 0: every file of BEFORE_DIR is in AFTER_DIR and the same once normalised; 1 otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path

TIME_KEY = re.compile(r"^(seconds|time|times|elapsed|wall|duration|timestamp|started|finished|.*_s|.*_ms|.*_seconds)$")
XML_TIME = re.compile(r'\b(time|timestamp|hostname)="[^"]*"')
HTML_TIME = re.compile(r"\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\s?(?:ms|s)\b")
SVG_ID = re.compile(r'\b(id|href|clip-path|xlink:href)="(#?url\(#|#)?[A-Za-z_]*[0-9a-f]{6,}[^"]*"')


def replace_roots(text: str, roots: list[str]) -> str:
    """Every given directory (longest first, so a checkout inside an output dir stays whole) -> <ROOT>."""
    for r in sorted({r.rstrip("/") for r in roots if r}, key=len, reverse=True):
        text = text.replace(r, "<ROOT>")
    return text


def normalise_json(value, timed: bool = False):
    """Every number under a key that names a time (at any depth below it: `method_ms: {prefill: 7.1}`)."""
    if isinstance(value, dict):
        return {k: normalise_json(v, timed or bool(TIME_KEY.match(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise_json(v, timed) for v in value]
    if timed and isinstance(value, (int, float)) and not isinstance(value, bool):
        return "<T>"
    return value


def normalise(name: str, text: str, roots: list[str]) -> str:
    """One report's text with its times and paths taken out (see the module docstring)."""
    text = replace_roots(text, roots)
    if name.endswith(".json"):
        try:
            return json.dumps(normalise_json(json.loads(text)), indent=1, sort_keys=True)
        except json.JSONDecodeError:
            return text
    if name.endswith(".xml"):
        return XML_TIME.sub(lambda m: f'{m.group(1)}="<T>"', text)
    if name.endswith(".html"):
        return SVG_ID.sub(lambda m: f'{m.group(1)}="<ID>"', HTML_TIME.sub("<T>", text))
    return text


def compare(before: Path, after: Path, roots: list[str]) -> list[str]:
    """The differences, one block a file (empty: the same reports)."""
    out = []
    for b in sorted(p for p in before.iterdir() if p.suffix in (".json", ".xml", ".html")):
        a = after / b.name
        if not a.exists():
            out.append(f"{b.name}: missing from {after}")
            continue
        nb = normalise(b.name, b.read_text(errors="replace"), roots).splitlines()
        na = normalise(a.name, a.read_text(errors="replace"), roots).splitlines()
        if nb != na:
            diff = difflib.unified_diff(nb, na, f"before/{b.name}", f"after/{a.name}", lineterm="", n=1)
            out.append("\n".join(list(diff)[:80]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--root", action="append", default=[], help="a directory that differs between the runs")
    args = ap.parse_args(argv)
    roots = [*args.root, str(args.before.resolve()), str(args.after.resolve())]
    problems = compare(args.before, args.after, roots)
    for p in problems:
        print(p)
    n = len([p for p in args.before.iterdir() if p.suffix in (".json", ".xml", ".html")])
    print(f"{n - len(problems)} of {n} reports the same once times and paths are taken out")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
