"""The CLI's ArgumentParser: no abbreviated flags, an unknown flag gets a "did you mean --X?"
from the parser's own option strings, every parse error is one line; `Given` records which
flags the user typed (jobs.common.config.Config.given)."""

from __future__ import annotations

import argparse
import difflib

from eagle3_check.errors import OptionError


class Parser(argparse.ArgumentParser):
    """No abbreviations (`--max-new-token` is an error, not `--max-new-tokens`); unknown flags
    get a suggestion; every parse error is one line. Subparsers inherit the class (argparse's parser_class default)."""

    def __init__(self, *a, **kw):
        kw.setdefault("allow_abbrev", False)
        super().__init__(*a, **kw)

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        for arg in extras:
            if arg.startswith("-") and not _is_number(arg):
                raise unknown_flag_error(arg, self.prog, self._option_string_actions)
        return ns, extras

    def error(self, message: str):
        """argparse's own errors (a bad choice, a missing value, not an int) as the one-line
        Eagle3CheckError every other user error is, instead of usage + exit."""
        raise OptionError(f"{self.prog}: {message}", f"the arguments `{self.prog} --help` lists",
                          f"see `{self.prog} --help`")


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def unknown_flag_error(arg: str, prog: str, options) -> OptionError:
    """'unknown flag --max-new-token; expected a flag of `eagle3-check run`. Fix: did you mean
    --max-new-tokens?' (difflib over the parser's option strings; `--flag=value` is matched on
    its flag part)."""
    flag = arg.split("=", 1)[0]
    close = difflib.get_close_matches(flag, [o for o in options if o.startswith("--")], n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else f"see `{prog} --help` for its flags"
    return OptionError(f"unknown flag {arg}", f"a flag of `{prog}`", hint)


class Given(argparse.Action):
    """Stores the value and records that the user gave the flag (`args.given`), so a default
    can be told from an explicit value equal to it."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = {*vars(namespace).get("given", ()), self.dest}
