"""README stays true to the CLI: every `--flag` on an `eagle3-check SUB ...` line of a README code
block exists in that subcommand's parser (built, never run), and the costs README and --help
both state agree."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from eagle3_check.cli import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


def readme_commands() -> list[str]:
    """Every line of a README code block that starts with `eagle3-check ` (comments dropped)."""
    lines = []
    for block in FENCE.findall(README.read_text(encoding="utf-8")):
        for line in block.splitlines():
            line = line.strip()
            if line.startswith("eagle3-check "):
                lines.append(line)
    return lines


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def flags_of(line: str) -> tuple[str, argparse.ArgumentParser, list[str]]:
    """(`eagle3-check SUB [ACTION]`, that parser, the flags the line names)."""
    tokens = shlex.split(line, comments=True)[1:]
    parser, path = build_parser(), ["eagle3-check"]
    while tokens and tokens[0] in _subparsers(parser):
        parser = _subparsers(parser)[tokens[0]]
        path.append(tokens.pop(0))
    flags = [t.split("=", 1)[0] for t in tokens if re.fullmatch(r"--?[a-z][a-z0-9-]*(=.*)?", t)]
    return " ".join(path), parser, flags


COMMANDS = readme_commands()


def test_readme_has_commands_to_check():
    assert len(COMMANDS) >= 20, COMMANDS


@pytest.mark.parametrize("line", COMMANDS, ids=[f"{i:02d}" for i in range(len(COMMANDS))])
def test_every_readme_flag_exists_in_its_subcommand(line):
    path, parser, flags = flags_of(line)
    assert path != "eagle3-check" or flags == ["--help"], f"no subcommand in README line: {line}"
    unknown = [f for f in flags if f not in parser._option_string_actions]
    assert unknown == [], f"README `{line}`: {path} has no {unknown}"


def test_flags_of_finds_an_unknown_flag():
    path, parser, flags = flags_of('eagle3-check check --prompt-file p.txt -k 4  # a comment --ignored')
    assert path == "eagle3-check check" and flags == ["--prompt-file", "-k"]
    assert "--prompt-file" not in parser._option_string_actions and "-k" in parser._option_string_actions


def test_mutants_all_cost_agrees_between_help_and_readme():
    """`--all`'s cost: whatever `mutants --help` says about it, README says too (or neither gives a number)."""
    mutants = _subparsers(build_parser())["mutants"]
    help_line = next(line for line in mutants.description.splitlines() if "mutants --all" in line)
    readme = README.read_text(encoding="utf-8")
    numbers = re.findall(r"~\s*\d+[^)\n]*", help_line.split("#", 1)[1])
    readme_line = next((line for line in readme.splitlines() if "mutants --all" in line), "")
    assert readme_line, "README does not say what `mutants --all` does"
    assert numbers == re.findall(r"~\s*\d+[^)\n]*", readme_line.split("#", 1)[-1])
