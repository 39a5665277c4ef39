"""README and the docs site (docs/*.md) stay true to the CLI and the repository: every `--flag` on
an `eagle3-check SUB ...` line of a shell code block exists in that subcommand's parser (built,
never run), every `make` target, script and `pytest -m` marker they run exists, every repository
path they name in backticks exists, and the costs the docs and --help both state agree."""

from __future__ import annotations

import argparse
import functools
import re
import shlex
from pathlib import Path

import pytest

from eagle3_check.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]  # README first, then every page of the site
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)  # (language, body)


def segments_of(path: Path) -> list[str]:
    """Every command of every shell code block of one markdown file (continued lines joined): each line split at `&&`,
    leading `VAR=value` environment assignments dropped (`PYTHONPATH=. eagle3-check ...` is an
    eagle3-check command)."""
    out = []
    for lang, block in FENCE.findall(path.read_text(encoding="utf-8")):
        if lang.strip() not in ("bash", "sh", "console"):
            continue
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():  # a `\` continuation is one command
            for seg in line.split("&&"):
                seg = re.sub(r"^(\s*[A-Z_]+=\S*\s+)+", "", seg).strip()
                if seg and not seg.startswith("#"):
                    out.append(seg)
    return out


def readme_segments() -> list[str]:
    """The shell commands of README and of every docs page."""
    return [seg for path in DOCS for seg in segments_of(path)]


def readme_commands() -> list[str]:
    """Every README / docs command that runs `eagle3-check` (comments dropped later, by shlex)."""
    return [seg for seg in readme_segments() if seg.startswith("eagle3-check ")]


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """One parser for every line (read only here): building it 76 times cost 10 s of collection."""
    return build_parser()


def flags_of(line: str) -> tuple[str, argparse.ArgumentParser, list[str]]:
    """(`eagle3-check SUB [ACTION]`, that parser, the flags the line names)."""
    tokens = shlex.split(line, comments=True)[1:]
    parser, path = _parser(), ["eagle3-check"]
    while tokens and tokens[0] in _subparsers(parser):
        parser = _subparsers(parser)[tokens[0]]
        path.append(tokens.pop(0))
    flags = [t.split("=", 1)[0] for t in tokens if re.fullmatch(r"--?[a-z][a-z0-9-]*(=.*)?", t)]
    return " ".join(path), parser, flags


COMMANDS = readme_commands()


def test_readme_has_commands_to_check():
    readme = [seg for seg in segments_of(README) if seg.startswith("eagle3-check ")]
    assert len(readme) >= 3 and len(COMMANDS) >= 60, (readme, len(COMMANDS))
    assert len(DOCS) >= 15, DOCS  # the site's pages are read, not only README


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
    """`--all`'s cost: whatever `mutants --help` says about it, the docs say too (or neither gives a number)."""
    mutants = _subparsers(build_parser())["mutants"]
    help_line = next(line for line in mutants.description.splitlines() if "mutants --all" in line)
    numbers = re.findall(r"~\s*\d+[^)\n]*", help_line.split("#", 1)[1])
    lines = [line for path in DOCS for line in path.read_text(encoding="utf-8").splitlines()]
    readme_line = next((line for line in lines if "mutants --all" in line), "")
    assert readme_line, "neither README nor docs/ say what `mutants --all` does"
    assert numbers == re.findall(r"~\s*\d+[^)\n]*", readme_line.split("#", 1)[-1])


SUBCOMMANDS = sorted({flags_of(line)[0] for line in COMMANDS})


@pytest.mark.parametrize("path", SUBCOMMANDS)
def test_every_readme_subcommand_s_help_runs(path, capsys):
    """`eagle3-check SUB [ACTION] --help` for every (sub)command README shows: it exits 0 with
    that command's usage."""
    with pytest.raises(SystemExit) as done:
        main([*path.split()[1:], "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {path}")


def _tokens(prefix: str) -> list[list[str]]:
    return [shlex.split(seg, comments=True) for seg in readme_segments() if seg.split()[0] == prefix]


def test_every_readme_make_target_exists():
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", (ROOT / "Makefile").read_text(), re.M))
    named = {t for toks in _tokens("make") for t in toks[1:] if "=" not in t and not t.startswith("-")}
    readme = {t for seg in segments_of(README) if seg.split()[0] == "make"
              for t in shlex.split(seg, comments=True)[1:] if "=" not in t and not t.startswith("-")}
    assert {"install", "check"} <= readme, readme  # the set-up and the tests are README commands
    assert named <= targets, f"README / docs name make targets the Makefile lacks: {named - targets}"


def test_every_readme_script_and_marker_exists():
    """A script a README command runs (`python bench/x.py`, `bash bench/run_gpu.sh`) is in the
    repository; a `pytest -m` marker is declared in pyproject.toml or by the pytest plugin."""
    scripts = [t for seg in readme_segments() for t in shlex.split(seg, comments=True)
               if re.fullmatch(r"[\w./-]+\.(py|sh)", t) and not t.startswith("/") and "/" in t]
    assert scripts, "README / docs show no script"
    missing = [t for t in scripts if not (ROOT / t).is_file()]
    assert not missing, f"README / docs run scripts that are not in the repository: {missing}"
    from eagle3_check.pytest_plugin import MARKERS

    declared = set(re.findall(r'^\s*"([a-z]\w*):', (ROOT / "pyproject.toml").read_text(), re.M)) | set(MARKERS)
    for seg in readme_segments():
        toks = shlex.split(seg, comments=True)
        after = toks[toks.index("pytest") + 1:] if "pytest" in toks else []  # `python -m pytest -m gpu`
        if "-m" in after:
            expr = after[after.index("-m") + 1]
            words = set(re.findall(r"[a-z]\w*", expr)) - {"and", "or", "not"}
            assert words <= declared, f"`{seg}` (README / docs): undeclared markers {words - declared}"


REPO_PATH = re.compile(r"`((?:eagle3_check|tests|tests_bench|bench|fixtures|golden|docs)/[\w./-]*\w)`")
SUBPACKAGES = sorted(p.parent.name for p in (ROOT / "eagle3_check").glob("*/__init__.py"))
SHORT_PATH = re.compile(r"`((?:" + "|".join(SUBPACKAGES) + r")/[\w/]*\w\.py)`")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_readme_is_self_contained(path):
    """README, DESIGN and the docs point at nothing outside this repository (no ../shared), and every
    repository path they name in backticks exists."""
    text = path.read_text(encoding="utf-8")
    assert "../shared" not in text and "../shared" not in (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    paths = set(REPO_PATH.findall(text))
    missing = sorted(p for p in paths if not (ROOT / p).exists() and not re.search(r"/[A-Z]+/", p))  # NAME: a placeholder
    assert not missing, f"{path.name} names paths that do not exist: {missing}"
    short = set(SHORT_PATH.findall(text))  # `suites/blocks.py`: a path inside the package (or the repository)
    missing = sorted(p for p in short if not (ROOT / "eagle3_check" / p).exists() and not (ROOT / p).exists())
    assert not missing, f"{path.name} names package paths that do not exist under eagle3_check/: {missing}"


def test_a_missing_path_is_found():
    assert REPO_PATH.findall("see `eagle3_check/run/nothing_here.py` and `docs/x.md`") == [
        "eagle3_check/run/nothing_here.py", "docs/x.md"]
    assert not (ROOT / "eagle3_check/run/nothing_here.py").exists()
    assert SHORT_PATH.findall("`suites/blocks.py`, `runners/gone.py`, `golden/x.json`") == ["suites/blocks.py", "runners/gone.py"]
    assert LINK.findall("[a](docs/x.md#y) and [b](https://example.org)") == ["docs/x.md#y", "https://example.org"]


LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path):
    """README's links into docs/ (and the pages' links to each other) name files that exist; mkdocs
    checks the pages' anchors, nothing else reads README's links."""
    targets = [t.split("#", 1)[0] for t in LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8")))
               if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    missing = sorted(t for t in targets if not (path.parent / t).exists())
    assert not missing, f"{path.name} links to files that do not exist: {missing}"
