"""README's sample output is what `bench/readme_sample.py` prints (issue 52): the same header,
columns and summary lines as a run of the script now (on the tiny fixture: the README's own run,
SmolLM2's 16 prompts, costs minutes), and no path of the machine it was written on."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("readme_sample", ROOT / "bench" / "readme_sample.py")
readme_sample = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_sample)

# a verdict-table row: prompt, L, tokens, rounds, tau, stop, ties, verdict ("PASS: identical (...)")
ROW = re.compile(r"(\S+) +(\d+) +(\d+) +(\d+) +(\d+\.\d\d) +(\w+) +(\d+) +((?:PASS|TIE|FAIL)\b.*)")
# the summary lines, in the order check prints them (cli/check.py, jobs/check/prompt_set.py, draft_health.py)
LABELS = ("program: ", "tie rule: ", "runner profile ", "options: ", "weights: ", "K = ", "requests: ", "positions: ",
          "verdict: ", "draft health: ")


def parts(block: str) -> tuple[str, list[str], list[str]]:
    """(header, table rows, summary lines) of a check's text report."""
    table, _, summary = block.strip("\n").partition("\n\n")
    header, *rows = table.splitlines()
    return header, rows, summary.splitlines()


def label(line: str) -> str:
    return next((lab for lab in LABELS if line.startswith(lab)), line[:40])


def columns_line_up(header: str, rows: list[str]) -> bool:
    """Every row's first seven cells start where their header word starts (tabulate's plain format)."""
    starts = [m.start() for m in re.finditer(r"\S+", header)][:7]
    return all(all(len(r) > s and r[s] != " " and (s == 0 or r[s - 1] == " ") for s in starts) for r in rows)


README_BLOCK = readme_sample.readme_block(readme_sample.README.read_text())


def test_readme_holds_no_path_of_a_machine():
    text = readme_sample.README.read_text()
    assert str(ROOT) not in text and "/work/" not in text and "/home/" not in text
    assert not re.search(r"(?<![\w.])/(?!path/to/)[\w.-]+/", README_BLOCK), "an absolute path in the sample"
    assert "card fixtures/smollm2-135m/card.json at K=4" in README_BLOCK


def test_relative_makes_the_checkout_s_paths_relative(tmp_path):
    assert readme_sample.relative(f"card {tmp_path}/fixtures/a/card.json at K=4", tmp_path) == \
        "card fixtures/a/card.json at K=4"
    assert readme_sample.relative("card /elsewhere/card.json", tmp_path) == "card /elsewhere/card.json"


@pytest.fixture(scope="module")
def run_block(tmp_path_factory) -> str:
    """The script's block for two prompts on tiny-llama in bfloat16 (its fp32 weights convert: the
    `weights:` line README's bf16-stored SmolLM2 draft prints too)."""
    prompts = tmp_path_factory.mktemp("prompts") / "two.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}, {"id": "capital", "text":
                                                                           "The capital of France is"}]}))
    return readme_sample.sample(["--fixture", "tiny-llama", "--dtype", "bfloat16", "--prompts", str(prompts),
                                 "--max-new-tokens", "8"])


def test_readme_block_has_the_format_of_a_run(run_block):
    for block in (README_BLOCK, run_block):
        header, rows, _ = parts(block)
        assert header.split() == ["prompt", "L", "tokens", "rounds", "tau", "stop", "ties", "verdict"], header
        assert rows and all(ROW.fullmatch(r) for r in rows), [r for r in rows if not ROW.fullmatch(r)]
        assert columns_line_up(header, rows), block
    readme_labels = [label(line) for line in parts(README_BLOCK)[2]]
    assert readme_labels == [label(line) for line in parts(run_block)[2]]
    assert set(readme_labels) <= set(LABELS), readme_labels
    assert str(ROOT) not in run_block  # the script's own run prints the card relative too
