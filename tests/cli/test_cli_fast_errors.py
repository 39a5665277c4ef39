"""Argument errors arrive before torch is imported or anything loads (issue 16 part 2).

Times are measured as a ratio to `eagle3-check --help` in a fresh subprocess, not in seconds:
the machine may be loaded, and --help pays the same interpreter start-up.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eagle3_check.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "executorch", "safetensors")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _cli_seconds(argv: list[str], rc_want: int) -> float:
    """The fastest of two runs of `python -m eagle3_check.cli ARGV` (load on a shared machine only adds)."""
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "eagle3_check.cli", *argv], capture_output=True, text=True,
                              env=_env(), cwd=ROOT, timeout=120)
        best = min(best, time.perf_counter() - t0)
        assert proc.returncode == rc_want, proc.stderr
    return best


def test_parsing_and_preflight_import_no_torch():
    code = (
        "import sys\n"
        "from eagle3_check.cli import build_parser\n"
        "from eagle3_check.cli import config_of\n"
        "for argv in (['check', '--suite', 'edge'], ['run', '--prompt', 'Hi', '-k', '4'], ['check'],\n"
        "             ['golden', 'verify'], ['mutants', '--no-suites'], ['fixtures', 'list']):\n"
        "    config_of(argv)\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print(','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"imported while parsing: {proc.stdout.strip()}"


ERRORS = [
    pytest.param(["check", "--fixture", "tiny-llama", "--cuda-graph"], id="cuda-graph-on-cpu"),
    pytest.param(["check", "--fixture", "tiny-llama", "--prompts", "/nonexistent/prompts.json"], id="prompts-missing"),
    pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "-k", "8"], id="k-above-static-range"),
    pytest.param(["check", "--target", "/nonexistent/t", "--draft", "/nonexistent/d"], id="target-missing"),
    pytest.param(["gate", "--pte", "/nonexistent/x.pte"], id="pte-missing"),
    pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--tokenizer", "/nonexistent/tok.json"], id="tokenizer-missing"),
    pytest.param(["check", "--fixture", "tiny-llama", "--dtype", "float16"], id="dtype-not-a-choice"),
    pytest.param(["check", "--fixture", "tiny-llama", "--device", "gpu"], id="device-unknown"),
    pytest.param(["check", "--suite", "contxt"], id="suite-unknown"),
    pytest.param(["export", "-o", "/nonexistent/dir/x.pte"], id="export-output-dir-missing"),
    pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-token", "3"], id="flag-abbreviated"),
]


@pytest.fixture(scope="module")
def help_seconds() -> float:
    return _cli_seconds(["--help"], 0)


@pytest.mark.parametrize("argv", ERRORS)
def test_argument_errors_cost_about_a_help(help_seconds, argv):
    seconds = _cli_seconds(argv, 2)
    assert seconds < 3 * help_seconds, f"{' '.join(argv)}: {seconds:.2f} s vs --help {help_seconds:.2f} s"


def _parsers(parser: argparse.ArgumentParser, path: str = "eagle3-check"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_parser_refuses_abbreviations():
    found = list(_parsers(build_parser()))
    assert len(found) > 8  # the top level, seven subcommands, their actions
    assert [path for path, p in found if p.allow_abbrev] == []
