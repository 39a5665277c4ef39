"""Quantization drift (DESIGN §3): a quantized program against the full-precision target.

For a quantized program "identical to HF" is the wrong question. The gate asks two:
- lossless: the runner against the program's own greedy decoding (the self reference), every
  position identical (`gate_requests`, unchanged);
- drift, measured and bounded: the self reference's greedy tokens teacher-forced through the
  full-precision HF target. Per prompt: the share of positions where the program's token is
  HF's argmax (agreement), the first divergence (index, both tokens, HF's top-1/top-2 margin
  there) and the rank of the program's token under HF (there, and the worst over the prompt);
  over the prompt set: the pooled agreement, and tau against the full-precision program's tau
  (same draft, prompts, options and K, through the reference runner).

The check fails only past stated thresholds, each failure naming its reason:
`agreement A < --min-agreement M` or `tau drop D > --max-tau-drop X`. The defaults come from
`bench/measure_quant_drift.py` on the embedded fixtures (`bench/results/quant-drift-*.json`, gate
defaults: 14 prompts, 64 new tokens, K 4; README "Quantized exports" has the table):
  agreement  good: int8-weight 0.941 / 0.907, int4-weight g32 0.585 / 0.491 (tiny-llama /
             tiny-gemma4), int4 g16 0.582 (tiny-llama);
             broken (one layer's scales zeroed): 0.081, 0.378, 0.352 (tiny-llama), 0.332 (tiny-gemma4)
  tau drop   good: at most 0.49 (tiny-llama int4 g16); broken: 0.94 (tiny-llama down_proj), the
             other broken programs *gain* tau (their draft agrees with their own wrong target)
so --min-agreement 0.43 (halfway between the highest broken 0.378 and the lowest good 0.491)
and --max-tau-drop 0.7 (between the largest good drop 0.49 and the broken 0.94). Agreement is
what separates a broken quantization here; tau alone does not.

Worked example: program tokens [5, 7, 9] with HF rows argmax [5, 8, 9, 4] -> positions 3,
agreement 2/3, first divergence at index 1 (program 7, HF 8), rank of 7 under HF from the row.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from eagle3_check.reference.hf import Scores
from eagle3_check.report.junit import JUnitCase
from eagle3_check.status import FAIL, PASS, SKIP
from eagle3_check.table import format_rows

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
        ranks = [hf.given_rank[j] for j in diff if j < len(hf.given_rank) and hf.given_rank[j] is not None]
        out.first, out.got, out.want = i, tokens[i], hf.argmax[i]
        out.margin = hf.top1[i] - hf.top2[i]
        out.rank = hf.given_rank[i] if i < len(hf.given_rank) else None
        out.worst_rank = max(ranks) if ranks else None
    return out


@dataclass
class DriftThresholds:
    min_agreement: float = DEFAULT_MIN_AGREEMENT
    max_tau_drop: float = DEFAULT_MAX_TAU_DROP


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
        drop = self.tau_drop
        if drop is not None and drop > t.max_tau_drop:
            self.reasons.append(f"tau drop {drop:.2f} > --max-tau-drop {t.max_tau_drop:g} (tau {self.tau:.2f}, "
                                f"full precision {self.fp_tau:.2f})")
        self.status = FAIL if self.reasons else PASS
        return self

    def message(self) -> str:
        diverged = sum(p.first is not None for p in self.prompts)
        tau = (f"tau {self.tau:.2f} vs full precision {self.fp_tau:.2f} (drop {self.tau_drop:.2f}, max "
               f"{self.thresholds.max_tau_drop:g})" if self.tau_drop is not None
               else f"tau vs full precision not measured: {self.fp_note}")
        head = (f"{self.quantization}: agreement {self.agreement:.3f} over {self.positions} positions (min "
                f"{self.thresholds.min_agreement:g}), {diverged}/{len(self.prompts)} prompts diverge; {tau}")
        if self.status == FAIL:
            return "drift past the thresholds: " + "; ".join(self.reasons) + f" [{head}]"
        return head

    def junit_cases(self) -> list[JUnitCase]:
        """One case per prompt: its agreement and first divergence as properties; a prompt that
        diverged fails only when the pooled agreement is past --min-agreement."""
        low = self.status == FAIL and self.agreement < self.thresholds.min_agreement
        return [JUnitCase(p.prompt, FAIL if low and p.first is not None else PASS,
                          f"agreement {p.agreement:.3f} over {p.positions}" + (
                              f"; first divergence at token {p.first}: program {p.got}, HF {p.want}, rank {p.rank}"
                              if p.first is not None else ""),
                          properties={"agreement": f"{p.agreement:.4f}", "positions": str(p.positions),
                                      "first_divergence": str(p.first), "rank_under_hf": str(p.rank)})
                for p in self.prompts]

    def to_json(self) -> dict:
        return {"quantization": self.quantization, "status": str(self.status), "reasons": self.reasons,
                "agreement": round(self.agreement, 4), "positions": self.positions, "tau": self.tau,
                "fp_tau": self.fp_tau, "tau_drop": None if self.tau_drop is None else round(self.tau_drop, 4),
                "fp_note": self.fp_note, "thresholds": asdict(self.thresholds),
                "prompts": [p.to_json() for p in self.prompts]}


def _fmt(x, spec: str = "") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return format(x, spec)


def drift_table(d: dict) -> list[str]:
    """The drift table from `DriftReport.to_json()`: one row per prompt, then the pooled line."""
    rows = [("prompt", "positions", "agreement", "first div", "program", "HF", "HF margin", "rank", "worst rank")]
    for p in d["prompts"]:
        rows.append((p["prompt"], str(p["positions"]), f"{p['agreement']:.3f}", _fmt(p["first"]), _fmt(p["got"]),
                     _fmt(p["want"]), _fmt(p["margin"], ".3g"), _fmt(p["rank"]), _fmt(p["worst_rank"])))
    lines = format_rows(rows)
    tau = (f"tau {d['tau']:.2f} vs full precision {d['fp_tau']:.2f} (drop {d['tau_drop']:.2f}, max "
           f"{d['thresholds']['max_tau_drop']:g})" if d["tau_drop"] is not None else f"tau not compared: {d['fp_note']}")
    lines.append(f"pooled: agreement {d['agreement']:.3f} over {d['positions']} positions (min "
                 f"{d['thresholds']['min_agreement']:g}); {tau}; {str(d['status']).upper()}"
                 + (f": {'; '.join(d['reasons'])}" if d["reasons"] else ""))
    return lines
