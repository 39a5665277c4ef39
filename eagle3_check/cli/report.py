"""`--html FILE` on check, gate and golden verify, and `eagle3-check report`: render a report as
one self-contained HTML page (eagle3_check/report/html_report.py, bench_report.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = """Render a saved JSON report, or a benchmark JSON, as one self-contained HTML page
(inline plots, no network needed to view it).

examples:
  eagle3-check report --bench bench/results/h200.json --html bench.html
  eagle3-check check --json > r.json && eagle3-check report --check r.json --html r.html
  eagle3-check report --gate gate-report.json --html gate.html
  eagle3-check golden verify --json > g.json && eagle3-check report --golden g.json --html g.html
"""

KINDS = {"bench": "a benchmark JSON (bench/gpu_bench.py --out)", "check": "a `check --json` report",
         "gate": "a gate --report file", "golden": "a `golden verify --json` outcome"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="render a saved JSON report or a benchmark JSON as an HTML page",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = p.add_mutually_exclusive_group(required=True)
    for kind, what in KINDS.items():
        group.add_argument(f"--{kind}", default=None, metavar="FILE", help=what)
    p.add_argument("--html", required=True, metavar="FILE", help="the HTML page to write")
    p.set_defaults(func=main)


def main(cfg) -> int:
    from eagle3_check.errors import InputError
    from eagle3_check.report.bench_report import bench_html
    from eagle3_check.report.html_report import check_html, gate_html, golden_html

    kind = next(k for k in KINDS if getattr(cfg.report, k))
    src = Path(getattr(cfg.report, kind))
    if not src.is_file():
        raise InputError(f"--{kind} {src} does not exist", "an existing JSON file", f"fix the --{kind} path")
    try:
        data = json.loads(src.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"--{kind} {src} is not JSON ({e})", KINDS[kind], "pass the file the command wrote") from e
    try:
        if kind == "bench":
            doc = bench_html(data, src)
        elif kind == "check":
            doc = check_html({k: v for k, v in data.items() if k != "draft_health"}, data.get("draft_health"))
        else:
            doc = gate_html(data) if kind == "gate" else golden_html(data)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise InputError(f"--{kind} {src}: cannot read {type(e).__name__} {e}", KINDS[kind],
                         f"pass the file that wrote it, or a matching flag instead of --{kind}") from e
    from eagle3_check.report.html_page import write_html

    write_html(cfg.html, doc)
    print(f"wrote {cfg.html}")
    return 0
