"""`eagle3-check`: a thin command line over the library. One module per subcommand.

Each subcommand module defines `register(subparsers)` which adds its parser and sets
`func`; `main` parses, builds the one typed `jobs.common.config.Config` of the flags (every value
checked there, before torch is imported) and calls `func(cfg)`, which calls the library and
prints. Errors a user can fix (`Eagle3CheckError`) print one line and exit 2.

May import: anything in eagle3_check (nothing in eagle3_check imports the CLI).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""

from __future__ import annotations

import argparse
import importlib
import io
import sys

from eagle3_check.cli.common import offline_environment
from eagle3_check.cli.parser import Parser
from eagle3_check.errors import Eagle3CheckError
from eagle3_check.jobs.common.config import Config
from eagle3_check.resources import set_budget

# Subcommand modules, in --help order. Add new ones here.
SUBCOMMANDS = ["run", "check", "calibrate", "export", "gate", "golden", "mutants", "fixtures", "draft", "report"]

EPILOG = """quick start:
  eagle3-check check                       # SmolLM2-135M (real fixture): runner vs HF reference
  eagle3-check run --prompt "Hi"           # one request on SmolLM2-135M, text and stats
  eagle3-check check --json > report.json  # machine-readable
"""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="eagle3-check",
        description="Validate EAGLE-3 speculative decoding: greedy speculative output must equal "
        "greedy decoding of the target, token for token.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)  # parser_class: Parser
    for name in SUBCOMMANDS:
        importlib.import_module(f"eagle3_check.cli.{name}").register(sub)
    return parser


def config_of(argv: list[str] | None) -> tuple[Config, object]:
    """(the checked Config of the flags, the subcommand's function): an unknown flag, a bad value,
    a missing file is one line here, before torch is imported or anything loads."""
    values = vars(build_parser().parse_args(argv))  # an unknown flag raises OptionError ("did you mean")
    func = values.pop("func")
    return Config.build(values), func


def main(argv: list[str] | None = None) -> int:
    stdin, sys.stdin = sys.stdin, io.StringIO("")  # nothing reads stdin: a library [y/N] prompt gets EOF
    try:
        cfg, func = config_of(argv)
        set_budget(cfg.max_memory)  # resources.py: the memory estimate's budget
        offline_environment()
        from eagle3_check.runners.interrupt import harness_sigint

        with harness_sigint():  # Ctrl-C: each route writes what it judged and exits 130 (runners/interrupt.py)
            return int(func(cfg) or 0)
    except Eagle3CheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        sys.stdin = stdin
        set_budget(None)  # the budget is this command's: a later in-process call starts without it


if __name__ == "__main__":
    sys.exit(main())
