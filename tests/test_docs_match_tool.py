"""The docs checked against the tool, not by hand (issue 52): every mkdocs.yml nav page is in
docs/index.md's table; every subcommand, action and flag of `eagle3-check --help` (and of each
subcommand's --help) is in docs/cli.md; every name `--fixture` takes is in `fixtures list` and
docs/fixtures.md; every markdown table of README and docs/ has one column count; a subcommand's
one-line help names each of its actions. The parser walk is tests/test_readme_flags.py's."""

from __future__ import annotations

import argparse
import json
import re

import pytest
import yaml
from test_readme_flags import DOCS, ROOT, _parser, _subparsers

from eagle3_check.cli import main
from eagle3_check.fixtures.registry import list_fixtures, list_variants

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CELL_SPLIT = re.compile(r"(?<!\\)\|")  # a cell border; `\|` is a pipe inside a cell


def leaves(parser: argparse.ArgumentParser | None = None, path: str = "eagle3-check"):
    """(`eagle3-check SUB [ACTION]`, its parser) for every command that runs (a parser without actions)."""
    parser = parser or _parser()
    subs = _subparsers(parser)
    if not subs:
        yield path, parser
    for name, sub in subs.items():
        yield from leaves(sub, f"{path} {name}")


def flags(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings if s not in ("-h", "--help")]


def tables(text: str) -> list[list[list[str]]]:
    """Every markdown table outside code fences: its rows (the separator row included), as cells."""
    out, current = [], []
    for line in FENCE.sub("", text).splitlines() + [""]:
        if line.lstrip().startswith("|"):
            cells = [c.strip() for c in CELL_SPLIT.split(line.strip())][1:]  # before the first border: nothing
            current.append(cells[:-1] if line.strip().endswith("|") else cells)
        elif current:
            out.append(current)
            current = []
    return out


def table_after(text: str, heading: str) -> list[list[str]]:
    """The first table under `heading` (a `## ` line)."""
    return tables(text.split(f"\n{heading}\n", 1)[1])[0]


CLI_MD = (ROOT / "docs" / "cli.md").read_text()


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_markdown_table_has_one_column_count(path):
    for rows in tables(path.read_text()):
        counts = {len(r) for r in rows}
        assert len(counts) == 1, f"{path.name}: a table with rows of {sorted(counts)} cells: " + next(
            " | ".join(r)[:120] for r in rows if len(r) != len(rows[0]))


def test_the_table_reader_counts_cells_and_keeps_escaped_pipes():
    md = "| a | b |\n|---|---|\n| `x\\|y` | z |\n| 1 | 2 | 3 |\n\n```\n| not | a | table |\n```\n"
    assert [[len(r) for r in t] for t in tables(md)] == [[2, 2, 2, 3]]


def test_every_nav_page_is_in_the_index_table():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]

    def pages(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for n in node:
                yield from pages(n)
        elif isinstance(node, dict):
            for v in node.values():
                yield from pages(v)

    index = table_after((ROOT / "docs" / "index.md").read_text(), "## The pages")
    linked = {m for row in index for m in re.findall(r"\]\(([\w.-]+\.md)\)", row[0])}
    missing = [p for p in pages(nav) if p != "index.md" and p not in linked]
    assert not missing, f"docs/index.md's table lacks {missing}"


def test_every_subcommand_of_readmes_table_is_in_cli_md():
    """docs/cli.md's subcommand table has every row README's has (it may have more)."""
    first = lambda rows: {r[0] for r in rows[2:]}  # noqa: E731 - the first cells, header and separator left out
    readme = first(table_after((ROOT / "README.md").read_text(), "## Subcommands"))
    cli = first(table_after(CLI_MD, "## Subcommands"))
    assert readme <= cli, f"docs/cli.md's subcommand table lacks {sorted(readme - cli)}"


def test_every_command_and_its_flags_are_in_cli_md_s_flag_table():
    rows = {r[0].strip("`"): r[1] for r in table_after(CLI_MD, "## Every flag")[2:]}
    commands = dict(leaves())
    assert set(rows) == set(commands), f"missing {sorted(set(commands) - set(rows))}, " \
                                       f"not commands {sorted(set(rows) - set(commands))}"
    for command, parser in commands.items():
        listed = re.findall(r"`(-[\w-]+)`", rows[command])
        assert sorted(set(listed)) == sorted(set(flags(parser))), (
            f"{command}: docs/cli.md lacks {sorted(set(flags(parser)) - set(listed))}, "
            f"lists {sorted(set(listed) - set(flags(parser)))} it does not take")


def test_a_subcommand_s_help_names_each_of_its_actions():
    top = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in top._choices_actions}
    for name, sub in _subparsers(_parser()).items():
        for action in _subparsers(sub):
            assert action in helps[name], f"`eagle3-check --help`: {name}'s line {helps[name]!r} omits {action}"


def test_every_fixture_the_flag_takes_is_listed_and_documented(capsys):
    takes = set(list_fixtures()) | set(list_variants())  # what load_fixture accepts
    assert main(["fixtures", "list", "--json"]) == 0
    listed = {r["name"] for r in json.loads(capsys.readouterr().out)}
    assert listed == takes
    doc = (ROOT / "docs" / "fixtures.md").read_text()
    assert not [n for n in sorted(takes) if f"`{n}`" not in doc], "docs/fixtures.md lacks some"
