"""What a run returns (RunResult) and the plug-in runner interface (PluginRunner: what a plug-in
author writes; `runners.in_process.InProcess` makes it the one runner seam); the stop reasons are
`runners.rules`'.

Its own module so that references, the verdict and gating read a run without importing the
runner loop they judge (tests/test_layout.py checks that).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Protocol

from eagle3_check.program.contract import SpeculatorProgram
from eagle3_check.runners.options import RunOptions
from eagle3_check.tokenizer import Tokenizer


@dataclass
class RunResult:
    prompt_ids: list[int]
    tokens: list[int]  # emitted, the prefill bonus first
    text: str
    rounds: int
    accepted: list[int]  # a per round (leading proposals matching verify_ids)
    tau: float  # (emitted - 1) / rounds; 0.0 when no round ran
    stop_reason: str  # rules.STOP | MAX_NEW | CONTEXT
    k: int
    max_new: int
    method_ms: dict[str, float] = field(default_factory=dict)
    method_calls: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    def summary(self, prompt_id: str) -> dict:
        """The numbers a report plots (tau, accepted per round), without the tokens and text."""
        return {"prompt_id": prompt_id, "k": self.k, "tau": self.tau, "rounds": self.rounds,
                "tokens": len(self.tokens), "accepted": list(self.accepted), "stop_reason": self.stop_reason}


class PluginRunner(Protocol):
    """The plug-in runner interface: run one request through a program (`runners.seam.Runner` is the
    seam every kind implements; a PluginRunner is one through `runners.in_process.InProcess`)."""

    def run(
        self, program: SpeculatorProgram, tokenizer: Tokenizer, prompt: str | list[int], options: RunOptions
    ) -> RunResult: ...
