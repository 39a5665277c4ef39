"""`check`'s sections of the Config: `CheckOptions` (a prompt set's sharding and order, the card's
expected tau, `check --quantize`'s program) and `DriftOptions` (a quantized program's drift
thresholds, shared by `check --quantize` and `gate`)."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_check.jobs.common.section import Section


@dataclass(frozen=True)
class CheckOptions(Section):
    """`check`'s own flags."""

    COMMANDS = ("check",)
    workers: int = 1  # --workers N: the prompt set over N processes (jobs/check/workers.py)
    shard: str | None = None  # --shard I/N
    shuffle: int | None = None  # --shuffle SEED: the prompts' (or the suite cases') order
    expect_tau: float | None = None  # the draft's tau on a good run (else the fixture card's)
    quantize: str | None = None  # check --quantize SCHEME: the quantized checks in process (jobs/gate/quantized.py)
    group_size: int | None = None
    quantize_draft: bool = False


@dataclass(frozen=True)
class DriftOptions(Section):
    """A quantized program's drift thresholds (None: the measured default, jobs/check/drift.py)."""

    COMMANDS = ("check", "gate")
    min_agreement: float | None = None
    max_tau_drop: float | None = None
    far_rank: int | None = None
    max_far_share: float | None = None
    max_mean_gap: float | None = None

    def given(self) -> str | None:
        """The first threshold given, as its flag (None: none was)."""
        name = next((f for f in self.flat_names() if getattr(self, f) is not None), None)
        return name and "--" + name.replace("_", "-")
