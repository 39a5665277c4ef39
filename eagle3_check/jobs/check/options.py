"""`check`'s sections of the Config: `CheckOptions` (a prompt set's sharding and order, the card's
expected tau, `check --quantize`'s program) and `DriftOptions` (a quantized program's drift
thresholds, shared by `check --quantize` and `gate`)."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_check.errors import OptionError
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

    def check_values(self) -> None:
        """The values that need no other option, checked where the Config is built (jobs/common/validate.py)."""
        expect = self.expect_tau
        if expect is not None and not 0 < expect < float("inf"):
            raise OptionError(f"--expect-tau {expect:g}", "a tau > 0 (the draft's tau on a good run, e.g. the card's)",
                              "pass e.g. --expect-tau 2.0")


@dataclass(frozen=True)
class DriftOptions(Section):
    """A quantized program's drift thresholds (None: the measured default, jobs/check/drift.py)."""

    COMMANDS = ("check", "gate")
    min_agreement: float | None = None
    max_tau_drop: float | None = None
    far_rank: int | None = None
    max_far_share: float | None = None
    max_mean_gap: float | None = None

    def thresholds(self):
        """`DriftThresholds` (jobs/check/drift.py) from these, each checked where the Config is built
        (jobs/common/validate.py): a one-line error names a value out of range."""
        from eagle3_check.jobs.check.drift import DriftThresholds

        t = DriftThresholds()
        for flag, attr, lo, hi, what in (("--min-agreement", "min_agreement", 0.0, 1.0, "a share in [0, 1]"),
                                         ("--max-tau-drop", "max_tau_drop", 0.0, 8.0, "a tau in [0, 8]"),
                                         ("--far-rank", "far_rank", 1, 10**9, "a rank >= 1"),
                                         ("--max-far-share", "max_far_share", 0.0, 1.0, "a share in [0, 1]"),
                                         ("--max-mean-gap", "max_mean_gap", 0.0, 1e6, "logits >= 0")):
            value = getattr(self, attr)
            if value is None:
                continue
            if not lo <= value <= hi:
                raise OptionError(f"{flag} {value:g}", what, f"pass e.g. {flag} {getattr(t, attr):g}")
            setattr(t, attr, value)
        return t
