"""The bad-input catalogue's program-level cases (tests/cli/test_bad_input.py holds the CLI cases and
the shared assert): metadata keys and contract violations the eager backend cannot reach by a CLI
flag, driven through the same CLI with the fixture's program wrapped by `Altered` (monkeypatched
into `EagerBackend.from_fixture`), which drops or changes one metadata key or corrupts one
method's output; and the catalogue's counts, which docs/reliability.md states.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_bad_input import (  # tests/ is on sys.path (pytest's prepend import mode)
    CLI_CASES,
    assert_clean_error,
)

from eagle3_check.cli import main
from eagle3_check.program.contract import REQUIRED_KEYS, SpeculatorProgram
from eagle3_check.program.eager import EagerBackend

# --- program-level cases: the fixture program behind a wrapper, through the same CLI ------


class Altered(SpeculatorProgram):
    """The fixture's eager program with one metadata key dropped / changed or one output corrupted."""

    def __init__(self, inner: SpeculatorProgram, drop=(), change=None, corrupt=None):
        self.inner, self.drop, self.change, self.corrupt = inner, set(drop), dict(change or {}), corrupt

    def metadata(self):
        md = {k: v for k, v in self.inner.metadata().items() if k not in self.drop}
        return {**md, **self.change}

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        ids, feat = self.inner.prefill(tokens, positions)
        if self.corrupt == "prefill-shape":
            ids = ids.repeat(1, 2)  # [1, 2]
        return ids, feat

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        ids, feat = self.inner.target_verify(tokens, positions)
        if self.corrupt == "verify-id-out-of-vocab":
            ids = ids.clone()
            ids[0, -1] = 100_000
        return ids, feat

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        ids, g = self.inner.draft_decode(tokens, feature, positions)
        if self.corrupt == "draft-nan":
            g = torch.full_like(g, float("nan"))
        return ids, g


PROGRAM_CASES = [
    *[pytest.param(dict(drop=[key]), f"missing required key '{key}'", id=f"metadata-missing-{key}")
      for key in REQUIRED_KEYS],
    pytest.param(dict(change={"get_min_prefill_chunk": 64, "get_max_prefill_chunk": 32}),
                 "get_min_prefill_chunk = 64 > get_max_prefill_chunk = 32", id="metadata-min-above-max-prefill"),
    pytest.param(dict(change={"get_max_seq_len": 128}), "get_max_prefill_chunk = 128 >= get_max_seq_len = 128",
                 id="metadata-max-prefill-at-max-seq-len"),
    pytest.param(dict(change={"get_chain_len": [4, 5]}), "get_chain_len = [4, 5]", id="metadata-not-an-integer"),
    pytest.param(dict(corrupt="prefill-shape"), "contract violated: prefill returned ids [1, 2]",
                 id="contract-prefill-wrong-shape"),
    pytest.param(dict(corrupt="verify-id-out-of-vocab"), "contract violated: target_verify returned id 100000",
                 id="contract-verify-id-out-of-vocab"),
    pytest.param(dict(corrupt="draft-nan"), "contract violated: draft_decode returned a non-finite feature of shape",
                 id="contract-draft-nan-feature"),
]


@pytest.mark.parametrize("alter, named", PROGRAM_CASES)
@pytest.mark.parametrize("command", ["run", "check"])
def test_program_bad_input_through_the_cli(capsys, monkeypatch, program, tmp_path, alter, named, command):
    monkeypatch.setattr(EagerBackend, "from_fixture", classmethod(lambda cls, *a, **k: Altered(program, **alter)))
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    argv = ["run", "--fixture", "tiny-llama", "--prompt", "Hi"] if command == "run" else ["check", "--fixture", "tiny-llama", "--prompts", str(prompts), "--no-progress"]
    before = sorted(tmp_path.rglob("*"))
    rc = main([*argv, "--max-new-tokens", "8"])
    if command == "check" and "corrupt" in alter:  # broken mid-run: a FAIL verdict, not an error (issue 11 part 7)
        cap = capsys.readouterr()
        assert rc == 1 and "Traceback" not in cap.err and named in cap.out, (rc, cap.err)
        return
    assert_clean_error(capsys, rc, named, tmp_path, before)


def test_catalogue_has_at_least_25_cases():
    assert len(CLI_CASES) + len(PROGRAM_CASES) >= 25


def test_readme_counts_the_catalogue_as_it_is():
    """docs/reliability.md's "N CLI cases plus M program cases" is this file's count (the docs cannot drift)."""
    import re

    page = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
    text = " ".join(page.read_text(encoding="utf-8").split())
    m = re.search(r"\((\d+) CLI cases plus (\d+) program cases", text)
    assert m and (int(m[1]), int(m[2])) == (len(CLI_CASES), len(PROGRAM_CASES)), m and m.group(0)
