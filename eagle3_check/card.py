"""Fixture cards: the acceptance a fixture's draft reaches on held-out prompts.

`fixtures/NAME/card.json` records, for K = 1..7, tau and n-alpha of the reference runner
over the fixture's evaluation prompts (`fixtures/prompts.json`, never used in training),
whether every request matched the HF reference, and the command that produced it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from eagle3_check.fixtures import Fixture, Prompt

CARD_KS = tuple(range(1, 8))
CARD_MAX_NEW = 64


class MemoReference:
    """An HF reference that decodes each (prompt, max_new, stops) once: K does not change it."""

    def __init__(self, reference):
        self.reference = reference
        self._memo: dict = {}

    def greedy(self, prompt_ids: list[int], max_new: int, stop_ids: frozenset[int] = frozenset()):
        key = (tuple(prompt_ids), max_new, frozenset(stop_ids))
        if key not in self._memo:
            self._memo[key] = self.reference.greedy(prompt_ids, max_new, stop_ids)
        return self._memo[key]

    def score(self, prompt_ids: list[int], tokens: list[int]):
        key = ("score", tuple(prompt_ids), tuple(tokens))
        if key not in self._memo:
            self._memo[key] = self.reference.score(prompt_ids, tokens)
        return self._memo[key]


def measure(
    fixture: Fixture,
    ks: Iterable[int] = CARD_KS,
    prompts: list[Prompt] | None = None,
    max_new_tokens: int = CARD_MAX_NEW,
    device: str = "cpu",
    progress=None,
) -> dict:
    """Runs `eagle3-check check` for every K on the held-out prompts; returns the card's
    `k` table: {"K": {"tau", "n_alpha", "passed", "rounds", "tokens"}}."""
    import torch

    from eagle3_check.check import run_check
    from eagle3_check.eager import EagerBackend
    from eagle3_check.hf_reference import HFReference
    from eagle3_check.options import RunOptions
    from eagle3_check.tokenizer import Tokenizer
    from eagle3_check.tolerance import tolerance_for

    prompts = prompts or fixture.prompts()
    program = EagerBackend.from_fixture(fixture, device)
    tokenizer = Tokenizer.load(fixture.tokenizer_path)
    reference = MemoReference(HFReference(fixture.target_dir, device, torch.float32))
    table = {}
    for k in ks:
        opts = RunOptions(max_new_tokens=max_new_tokens, chain_len=k)
        report = run_check(program, tokenizer, reference, prompts, opts, tolerance_for("float32"),
                           on_request=(lambda _: progress.update(1)) if progress else None)
        table[str(k)] = {
            "tau": round(report.tau, 4),
            "n_alpha": [round(a, 4) for a in report.n_alpha],
            "passed": report.passed,
            "rounds": sum(o.run.rounds for o in report.outcomes),
            "tokens": sum(len(o.run.tokens) for o in report.outcomes),
        }
    return table


def write_card(fixture: Fixture, table: dict, command: str, extra: dict | None = None) -> Path:
    card = {
        "fixture": fixture.name,
        "command": command,
        "measured_by": "eagle3_check.card.measure (reference runner vs HF reference, eager fp32 CPU)",
        "prompts": "fixtures/prompts.json (held out: not used to train the draft)",
        "max_new_tokens": CARD_MAX_NEW,
        "k": table,
        **(extra or {}),
    }
    fixture.card_path.write_text(json.dumps(card, indent=2) + "\n")
    return fixture.card_path


def read_card(fixture: Fixture) -> dict | None:
    p = fixture.card_path
    return json.loads(p.read_text()) if p.is_file() else None
