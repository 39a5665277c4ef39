"""Quantization drift (DESIGN §3): a quantized program against the full-precision target.

For a quantized program "identical to HF" is the wrong question. The gate asks two:
- lossless: the runner against the program's own greedy decoding (the self reference), every
  position identical (`gate_requests`, unchanged);
- drift, measured and bounded: the self reference's greedy tokens teacher-forced through the
  full-precision HF target. Per prompt: the share of positions where the program's token is
  HF's argmax (agreement), the first divergence (index, both tokens, HF's top-1/top-2 margin
  there), and at every divergence the program's token's rank under HF (1 = argmax) and its gap
  (HF's top-1 logit minus that token's logit); over the prompt set: the pooled agreement, the
  ranks at the divergences by bucket (1, 2, 3-5, 6-20, 21-100, >100), and tau against the
  full-precision program's tau (same draft, prompts, options and K, through the reference runner).

Drift by rank: agreement counts a near-tie flipped by rounding the same as a token HF finds
absurd; a real model's good quantization diverges only at near-ties (its token HF's 2nd to 5th,
a few logits below the top), a broken one emits tokens HF ranks in the thousands. Two statistics
judge that, pooled over all positions P of all prompts (a position where the program's token is
HF's argmax has rank 1 and gap 0):
  far share = #(divergences whose token ranks past --far-rank R) / P
  mean gap  = sum over divergences of (HF top-1 logit - the program's token's logit) / P
(the mean gap is the mean, in nats, of how much less likely HF finds the program's token than its
own choice: log-softmax differences equal logit differences).

The check fails only past stated thresholds, each failure naming its reason: agreement below
--min-agreement, far share above --max-far-share, mean gap above --max-mean-gap, tau drop above
--max-tau-drop (every bound exclusive: a value equal to it passes). The defaults come from
`bench/measure_quant_drift.py` (`bench/results/quant-drift-*.json`; docs/quantization.md has the
table and the commands): one layer's scales zeroed is a broken program.
  agreement  good >= 0.491 (tiny-gemma4 int4), tiny broken <= 0.378; but on SmolLM2 broken
             programs reach 0.734 (int8 layers.1.mlp.up_proj) against good int4 0.727: agreement
             cannot tell them apart there. --min-agreement 0.43: halfway on the tiny fixtures.
  far share  R 200: good at most 0.002 (tiny-gemma4 int4; SmolLM2 int4's worst rank is 132),
             SmolLM2 broken 0.312 / 0.047 / 0.086 (layers 0 down, 1 up, 29 down). --max-far-share
             0.02. It misses SmolLM2 layers.15.self_attn.o_proj (one token past rank 200, 0.008).
  mean gap   good at most 0.481 (SmolLM2 int4 g32; Gemma 3 int4 0.362, tiny 0.290); SmolLM2 broken
             at least 0.705 (0.705, 0.737, 1.429, 5.433). --max-mean-gap 0.6, between them: the
             one statistic that fails all four SmolLM2 broken programs.
  tau drop   good at most 0.36; --max-tau-drop 0.7 (tiny-llama layers.0 down_proj drops 0.94). With
             a weak draft (tau ~1) it checks nothing: the ranks and gaps above do not need a draft.

Worked example: program tokens [5, 7, 9] with HF rows argmax [5, 8, 9, 4] -> positions 3,
agreement 2/3, first divergence at index 1 (program 7, HF 8), rank of 7 under HF from the row;
the far share and mean gap: tests/jobs/check/test_drift_rank.py's pinned example.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from eagle3_check.report.junit import JUnitCase
from eagle3_check.status import FAIL, PASS, SKIP
from eagle3_check.table import format_rows

if TYPE_CHECKING:  # annotations only: the CLI reads the defaults before torch is imported
    from eagle3_check.judge.hf import Scores

DEFAULT_MIN_AGREEMENT = 0.43  # see the module doc: measured on the fixtures
DEFAULT_MAX_TAU_DROP = 0.7  # absolute tau, see the module doc


@dataclass
class PromptDrift:
    prompt: str
    positions: int  # the program's greedy tokens judged (each against HF's row for it)
    agree: int  # positions where the program's token is HF's argmax
    first: int | None = None  # the first divergent index (None: none)
    got: int | None = None  # the program's token there
    want: int | None = None  # HF's argmax there
    margin: float | None = None  # HF's top-1 minus top-2 there
    rank: int | None = None  # the program's token's rank under HF there (1 = argmax)
    worst_rank: int | None = None  # the largest rank over every divergent position
    ranks: list[int] = field(default_factory=list)  # the program's token's rank under HF at each divergence
    gaps: list[float] = field(default_factory=list)  # HF's top-1 logit minus the program's token's there

    @property
    def agreement(self) -> float:
        return self.agree / self.positions if self.positions else 1.0

    def to_json(self) -> dict:
        return {**asdict(self), "agreement": round(self.agreement, 4)}


def prompt_drift(prompt: str, tokens: list[int], hf: Scores) -> PromptDrift:
    """`tokens`: the program's greedy tokens; `hf`: the HF reference's rows over prompt + tokens."""
    n = min(len(tokens), len(hf.argmax))
    diff = [i for i in range(n) if tokens[i] != hf.argmax[i]]
    out = PromptDrift(prompt, n, n - len(diff))
    if diff:
        i = diff[0]
        known = [j for j in diff if j < len(hf.given_rank) and hf.given_rank[j] is not None]
        out.first, out.got, out.want = i, tokens[i], hf.argmax[i]
        out.margin = hf.top1[i] - hf.top2[i]
        out.rank = hf.given_rank[i] if i < len(hf.given_rank) else None
        out.ranks = [int(hf.given_rank[j]) for j in known]
        out.gaps = [float(hf.top1[j] - hf.given_logit[j]) for j in known]
        out.worst_rank = max(out.ranks) if out.ranks else None
    return out


DEFAULT_FAR_RANK = 200  # see the module doc: measured
DEFAULT_MAX_FAR_SHARE = 0.02
DEFAULT_MAX_MEAN_GAP = 0.6  # logits (nats) per position
RANK_BUCKETS = ((1, 1), (2, 2), (3, 5), (6, 20), (21, 100), (101, None))  # the report's histogram


def bucket_label(lo: int, hi: int | None) -> str:
    return f">{lo - 1}" if hi is None else str(lo) if lo == hi else f"{lo}-{hi}"


@dataclass
class DriftThresholds:
    min_agreement: float = DEFAULT_MIN_AGREEMENT
    max_tau_drop: float = DEFAULT_MAX_TAU_DROP
    far_rank: int = DEFAULT_FAR_RANK
    max_far_share: float = DEFAULT_MAX_FAR_SHARE
    max_mean_gap: float = DEFAULT_MAX_MEAN_GAP


@dataclass
class DriftReport:
    quantization: str  # QuantSpec.short()
    prompts: list[PromptDrift]
    tau: float | None  # the quantized program's, through the runner
    fp_tau: float | None  # the full-precision program's (None: not measured, `fp_note` says why)
    thresholds: DriftThresholds
    fp_note: str = ""
    status: str = PASS
    reasons: list[str] = field(default_factory=list)

    @property
    def positions(self) -> int:
        return sum(p.positions for p in self.prompts)

    @property
    def agreement(self) -> float:
        return sum(p.agree for p in self.prompts) / self.positions if self.positions else 1.0

    @property
    def ranks(self) -> list[int]:
        return [r for p in self.prompts for r in p.ranks]

    @property
    def far(self) -> int:
        return sum(r > self.thresholds.far_rank for r in self.ranks)

    @property
    def far_share(self) -> float:
        return self.far / self.positions if self.positions else 0.0

    @property
    def mean_gap(self) -> float:
        """HF's top-1 logit minus the program's token's, averaged over every position (0 where they agree)."""
        return sum(g for p in self.prompts for g in p.gaps) / self.positions if self.positions else 0.0

    def worst_divergence(self) -> tuple[PromptDrift, int]:
        """(prompt, index into its `ranks`) of the divergence with the largest rank under HF."""
        return max(((p, i) for p in self.prompts for i in range(len(p.ranks))), key=lambda x: x[0].ranks[x[1]])

    def rank_histogram(self) -> dict[str, int]:
        ranks = self.ranks
        return {bucket_label(lo, hi): sum(lo <= r and (hi is None or r <= hi) for r in ranks) for lo, hi in RANK_BUCKETS}

    @property
    def tau_drop(self) -> float | None:
        return None if self.tau is None or self.fp_tau is None else self.fp_tau - self.tau

    def judge(self) -> DriftReport:
        """Sets status and reasons from the thresholds (a tau gain is no drop)."""
        t = self.thresholds
        self.reasons = []
        if not self.prompts:
            self.status, self.reasons = SKIP, ["no prompt was decoded"]
            return self
        if self.agreement < t.min_agreement:
            worst = min(self.prompts, key=lambda p: p.agreement)
            self.reasons.append(f"agreement {self.agreement:.3f} < --min-agreement {t.min_agreement:g} "
                                f"(worst prompt {worst.prompt}: {worst.agreement:.3f}, first divergence at token "
                                f"{worst.first}: program {worst.got}, HF {worst.want}, rank {worst.rank} under HF)")
        if self.far_share > t.max_far_share:
            p, i = self.worst_divergence()
            self.reasons.append(f"far divergences {self.far_share:.3f} > --max-far-share {t.max_far_share:g} ({self.far} "
                                f"of {self.positions} positions emit a token ranked past --far-rank {t.far_rank} under HF; "
                                f"worst: prompt {p.prompt}, rank {p.ranks[i]}, {p.gaps[i]:.2f} logits below HF's top)")
        if self.mean_gap > t.max_mean_gap:
            self.reasons.append(f"mean gap {self.mean_gap:.3f} > --max-mean-gap {t.max_mean_gap:g} (the program's tokens "
                                f"are on average {self.mean_gap:.3f} logits below HF's top over {self.positions} positions)")
        drop = self.tau_drop
        if drop is not None and drop > t.max_tau_drop:
            self.reasons.append(f"tau drop {drop:.2f} > --max-tau-drop {t.max_tau_drop:g} (tau {self.tau:.2f}, "
                                f"full precision {self.fp_tau:.2f})")
        self.status = FAIL if self.reasons else PASS
        return self

    def message(self) -> str:
        diverged = sum(p.first is not None for p in self.prompts)
        t = self.thresholds
        tau = (f"tau {self.tau:.2f} vs full precision {self.fp_tau:.2f} (drop {self.tau_drop:.2f}, max "
               f"{t.max_tau_drop:g})" if self.tau_drop is not None
               else f"tau vs full precision not measured: {self.fp_note}")
        head = (f"{self.quantization}: agreement {self.agreement:.3f} over {self.positions} positions (min "
                f"{t.min_agreement:g}), {diverged}/{len(self.prompts)} prompts diverge, far divergences "
                f"{self.far}/{self.positions} = {self.far_share:.3f} past rank {t.far_rank} (max {t.max_far_share:g}), "
                f"mean gap {self.mean_gap:.3f} (max {t.max_mean_gap:g}); {tau}")
        if self.status == FAIL:
            return "drift past the thresholds: " + "; ".join(self.reasons) + f" [{head}]"
        return head

    def junit_cases(self) -> list[JUnitCase]:
        """One case per prompt: its agreement, first divergence and far divergences as properties; a
        prompt fails only when a pooled bound it contributes to is past: it diverged and the pooled
        agreement is below --min-agreement, or it diverged far and the pooled far share is past."""
        t = self.thresholds
        low = self.status == FAIL and self.agreement < t.min_agreement
        far = self.status == FAIL and self.far_share > t.max_far_share
        gap = self.status == FAIL and self.mean_gap > t.max_mean_gap
        cases = []
        for p in self.prompts:
            n_far = sum(r > t.far_rank for r in p.ranks)
            bad = ((low or gap) and p.first is not None) or (far and n_far > 0)
            msg = f"agreement {p.agreement:.3f} over {p.positions}" + (
                f"; first divergence at token {p.first}: program {p.got}, HF {p.want}, rank {p.rank}; "
                f"{n_far} of {len(p.ranks)} divergences past rank {t.far_rank} (worst rank {p.worst_rank})"
                if p.first is not None else "")
            cases.append(JUnitCase(p.prompt, FAIL if bad else PASS, msg, properties={
                "agreement": f"{p.agreement:.4f}", "positions": str(p.positions), "first_divergence": str(p.first),
                "rank_under_hf": str(p.rank), "worst_rank": str(p.worst_rank), "far_divergences": str(n_far),
                "worst_gap": _fmt(max(p.gaps, default=None), ".3g")}))
        return cases

    def to_json(self) -> dict:
        return {"quantization": self.quantization, "status": str(self.status), "reasons": self.reasons,
                "agreement": round(self.agreement, 4), "positions": self.positions, "tau": self.tau,
                "fp_tau": self.fp_tau, "tau_drop": None if self.tau_drop is None else round(self.tau_drop, 4),
                "fp_note": self.fp_note, "thresholds": asdict(self.thresholds),
                "divergences": len(self.ranks), "far": self.far, "far_share": round(self.far_share, 4),
                "mean_gap": round(self.mean_gap, 4),
                "rank_histogram": self.rank_histogram(),
                "prompts": [p.to_json() for p in self.prompts]}


def _fmt(x, spec: str = "") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return format(x, spec)


def drift_table(d: dict) -> list[str]:
    """The drift table from `DriftReport.to_json()`: one row per prompt, the ranks at the
    divergences by bucket, then the pooled line."""
    t = d["thresholds"]
    rows = [("prompt", "positions", "agreement", "first div", "program", "HF", "HF margin", "rank", "worst rank",
             f"far (>{t['far_rank']})", "worst gap")]
    for p in d["prompts"]:
        rows.append((p["prompt"], str(p["positions"]), f"{p['agreement']:.3f}", _fmt(p["first"]), _fmt(p["got"]),
                     _fmt(p["want"]), _fmt(p["margin"], ".3g"), _fmt(p["rank"]), _fmt(p["worst_rank"]),
                     str(sum(r > t["far_rank"] for r in p["ranks"])), _fmt(max(p["gaps"], default=None), ".3g")))
    lines = format_rows(rows)
    hist = ", ".join(f"{k}: {v}" for k, v in d["rank_histogram"].items())
    lines.append(f"ranks under HF at the {d['divergences']} divergences: {hist}")
    tau = (f"tau {d['tau']:.2f} vs full precision {d['fp_tau']:.2f} (drop {d['tau_drop']:.2f}, max "
           f"{t['max_tau_drop']:g})" if d["tau_drop"] is not None else f"tau not compared: {d['fp_note']}")
    lines.append(f"pooled: agreement {d['agreement']:.3f} over {d['positions']} positions (min "
                 f"{t['min_agreement']:g}); far divergences {d['far']}/{d['positions']} = {d['far_share']:.3f} "
                 f"(max {t['max_far_share']:g}); mean gap {d['mean_gap']:.3f} (max {t['max_mean_gap']:g}); {tau}; "
                 f"{str(d['status']).upper()}"
                 + (f": {'; '.join(d['reasons'])}" if d["reasons"] else ""))
    return lines
