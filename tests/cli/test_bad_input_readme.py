"""Bad input found by using each subcommand as README shows it (issue: make README true).

Each case failed before its fix: a traceback (`fixtures build --root FILE`), a run with no reason
(`golden verify EMPTY_DIR`: "goldens: 0", gate FAIL), a silent no-op (`golden baseline EMPTY_DIR`:
"wrote 0 entries") or a nonsense value taken (`check --expect-tau -1`). Each must now be the one
`error: <value>; expected <what>. Fix: <how>` line, exit 2, nothing on stdout, nothing written
(`test_bad_input.assert_clean_error`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bad_input import assert_clean_error

from eagle3_check.cli import main

# test_bad_input: tests/ is on sys.path (pytest's prepend import mode)

CASES = [
    pytest.param(lambda d: ["fixtures", "build", "tiny-llama", "--root", str(_file(d, "a.json"))],
                 "--root {d}/a.json exists and is not a directory; expected a directory", id="fixtures-build-root-is-a-file"),
    pytest.param(lambda d: ["golden", "verify", str(_dir(d, "empty"))],
                 "golden directory {d}/empty holds no *.json file", id="golden-verify-empty-directory"),
    pytest.param(lambda d: ["golden", "baseline", str(_dir(d, "empty")), "--baseline", str(d / "m.json")],
                 "golden directory {d}/empty holds no *.json file", id="golden-baseline-empty-directory"),
    pytest.param(lambda d: ["check", "--fixture", "tiny-llama", "--expect-tau", "-1"], "--expect-tau -1; expected a tau > 0",
                 id="check-expect-tau-negative"),
    pytest.param(lambda d: ["check", "--fixture", "tiny-llama", "--expect-tau", "0"], "--expect-tau 0; expected a tau > 0", id="check-expect-tau-zero"),
    pytest.param(lambda d: ["check", "--fixture", "tiny-llama", "--expect-tau", "nan"], "--expect-tau nan; expected a tau > 0",
                 id="check-expect-tau-nan"),
    pytest.param(lambda d: ["gate", "--pte", str(_file(d, "x.pte")), "--tau-tolerance", "nan"],
                 "--tau-tolerance nan; expected a tau drop >= 0", id="gate-tau-tolerance-nan"),
]


def _file(d: Path, name: str) -> Path:
    p = d / name
    p.write_text("{}")
    return p


def _dir(d: Path, name: str) -> Path:
    p = d / name
    p.mkdir(exist_ok=True)
    return p


@pytest.mark.parametrize("argv, named", CASES)
def test_bad_input_is_one_line(capsys, tmp_path, argv, named):
    args = argv(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    line = assert_clean_error(capsys, main(args), named.format(d=tmp_path), tmp_path, before)
    assert "Traceback" not in line


def test_a_tiny_memory_budget_names_real_sizes(capsys, tmp_path):
    """`check --max-memory 0.000001` said "needs about 0.00 GiB ... but 0.00 GiB is the budget":
    sizes under 0.01 GiB now keep three significant digits."""
    line = assert_clean_error(capsys, main(["check", "--fixture", "tiny-llama", "--max-memory", "0.000001"]), "GiB is the --max-memory budget")
    assert "0.00 GiB" not in line and "9.99e-07 GiB is the --max-memory budget" in line, line


@pytest.mark.parametrize("n, text", [(0, "0.00"), (1 << 29, "0.50"), (1 << 30, "1.00"), (1 << 10, "9.54e-07"),
                                     (int(0.0099 * (1 << 30)), "0.0099")],
                         ids=["zero", "half", "one", "one-kib", "just-below-0.01"])
def test_gib_format(n, text):
    from eagle3_check.resources import gib

    assert gib(n) == text
