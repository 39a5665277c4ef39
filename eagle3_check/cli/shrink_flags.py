"""The flags of shrinking and replaying (`run`, `check`; the gate's shrink flags); the work is
jobs/shrink_route.py's.

`--prompt-ids 2,108,...` gives the prompt as ids (no template applied), `--repro FILE` replays a
repro file (its prompt ids, K, max new tokens and spec), `--shrink` shrinks every failing request
(jobs/check/shrink.py) within `--shrink-budget S` and writes a repro file for each beside the
report (`--shrink-dir`, default: the --junit / --html file's directory, else the current one).
"""

from __future__ import annotations

import argparse

from eagle3_check.errors import OptionError


def add_replay_args(p: argparse.ArgumentParser, prompt_text: bool = False) -> None:
    """`prompt_text`: also --prompt TEXT (one prompt; `run` has its own)."""
    if prompt_text:
        p.add_argument("--prompt", default=None, metavar="TEXT",
                       help="check this one prompt (the chat template applied unless --raw) instead of a prompt set")
    p.add_argument("--prompt-ids", default=None, metavar="IDS",
                   help="the prompt as comma-separated token ids (BOS included; no chat template applied)")
    p.add_argument("--repro", default=None, metavar="FILE",
                   help="replay a repro file written by --shrink: its prompt ids, K, max new tokens and spec")


def add_shrink_args(p: argparse.ArgumentParser, default_on: bool = False) -> None:
    from eagle3_check.shrink.search import DEFAULT_BUDGET_S

    if default_on:
        p.add_argument("--no-shrink", dest="shrink", action="store_false",
                       help="do not shrink the failing requests (shrinking is on by default here)")
    else:
        p.add_argument("--shrink", action="store_true",
                       help="shrink every failing request to its smallest reproduction: a one-line command and "
                       "a repro JSON file beside the report (docs/shrinking.md)")
    p.add_argument("--shrink-budget", type=_budget, default=DEFAULT_BUDGET_S, metavar="S",
                   help=f"seconds all shrinking together may take (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--shrink-dir", default=None, metavar="DIR",
                   help="where the repro files go (default: beside --junit / --html, else the current directory)")


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < float("inf"):
        raise OptionError(f"--shrink-budget {text}", "a number of seconds >= 0", "e.g. --shrink-budget 60")
    return value
