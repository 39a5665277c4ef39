"""Deterministic performance metrics, gated exactly against a committed baseline.

For a configuration (a golden key: fixture, backend, device, dtype, K, max new tokens) run
over its golden prompts, the metrics are counts, not times, so they are identical on every
machine for identical tokens:

- target forwards per emitted token = (prefill + target_verify calls) / emitted tokens
- draft forwards per emitted token  = draft_decode calls / emitted tokens
- tau = (emitted - requests) / rounds (the free prefill token of each request excluded)
- n-alpha[j] = share of rounds whose proposal j was accepted (a > j), j = 0..K-1

Worked example: two requests, emitted 10 and 6 tokens in 3 and 5 rounds, accepted
[4, 2, 1] and [0, 1, 0, 2, 0]: tau = (16 - 2) / 8 = 1.75; n-alpha[0] = 5/8 (a > 0 in 5
of 8 rounds), n-alpha[1] = 3/8, n-alpha[2] = 1/8, n-alpha[3] = 1/8.

The baseline (`bench/baselines/metrics.json`) maps a key's stem to its metrics. The gate is
exact: any difference fails, shown as a table with the baseline and the current numbers
side by side and which way each moved (a lower tau or n-alpha, more forwards per token:
a regression; the other way: an improvement, refresh the baseline on purpose).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from eagle3_check.atomic import locked, write_text_atomic
from eagle3_check.errors import InputError
from eagle3_check.jobs.golden.file import dumps
from eagle3_check.runners.result import RunResult
from eagle3_check.table import format_rows

SCHEMA = 1
REFRESH = "eagle3-check golden baseline"


def default_baseline_path() -> Path:
    return Path(__file__).resolve().parents[3] / "bench" / "baselines" / "metrics.json"


@dataclass
class Metrics:
    requests: int
    emitted: int
    rounds: int
    target_forwards: int  # prefill + target_verify calls
    draft_forwards: int  # draft_decode calls
    target_per_token: float
    draft_per_token: float
    tau: float
    n_alpha: list[float]

    def to_json(self) -> dict:
        return asdict(self)


def compute_metrics(runs: Iterable[RunResult], k: int) -> Metrics:
    """Metrics over a set of runs (each must report method_calls, as ReferenceRunner does)."""
    runs = list(runs)
    for r in runs:
        if not r.method_calls:
            raise InputError("a run without method_calls", "RunResult.method_calls with per-method call counts",
                             "make the runner count prefill / target_verify / draft_decode calls "
                             "(see ReferenceRunner, or wrap the program in RecordingProgram)")
    emitted = sum(len(r.tokens) for r in runs)
    rounds = sum(r.rounds for r in runs)
    target = sum(r.method_calls.get("prefill", 0) + r.method_calls.get("target_verify", 0) for r in runs)
    draft = sum(r.method_calls.get("draft_decode", 0) for r in runs)
    accepted = [a for r in runs for a in r.accepted]
    n_alpha = [sum(a > j for a in accepted) / len(accepted) if accepted else 0.0 for j in range(k)]
    return Metrics(
        requests=len(runs), emitted=emitted, rounds=rounds, target_forwards=target, draft_forwards=draft,
        target_per_token=target / emitted if emitted else 0.0,
        draft_per_token=draft / emitted if emitted else 0.0,
        tau=(emitted - len(runs)) / rounds if rounds else 0.0,
        n_alpha=n_alpha,
    )


def is_metrics_baseline(path: str | Path) -> bool:
    """True for a file in this module's format (schema + entries), not some other JSON with a tau
    (read through inputs.read_json: a FIFO or a huge file is "no", and `load_baseline` says why)."""
    from eagle3_check.inputs import read_json

    try:
        data = read_json(path, "baseline", "JSON", "")
    except InputError:
        return False
    return isinstance(data, dict) and "entries" in data and "schema" in data


def load_baseline(path: str | Path) -> dict[str, dict]:
    """The entries of a metrics baseline, validated (schema.MetricsBaseline): stem -> metrics."""
    from eagle3_check.schema import MetricsBaseline, load

    p = Path(path)
    fix = f"write it with `{REFRESH}`"
    if not p.exists():
        raise InputError(f"metrics baseline {p} does not exist", "a baseline JSON file", fix)
    data = load(MetricsBaseline, p, "metrics baseline", fix)
    return {stem: m.model_dump() for stem, m in data.entries.items()}


def write_baseline(path: str | Path, entries: dict[str, Metrics]) -> Path:
    """Adds or replaces the given entries, keeping the others."""
    p = Path(path)
    with locked(p, "metrics baseline"):  # checks p is writable; read-modify-write: a second writer waits
        old = load_baseline(p) if p.is_file() else {}
        old.update({k: m.to_json() for k, m in entries.items()})
        data = {"schema": SCHEMA, "refresh": REFRESH, "entries": dict(sorted(old.items()))}
        write_text_atomic(p, dumps(data), "metrics baseline")
    return p


# (field, label, which way is better: +1 higher is better, -1 lower is better, 0 neither)
_ROWS = [
    ("tau", "tau", +1),
    ("target_per_token", "target forwards / token", -1),
    ("draft_per_token", "draft forwards / token", -1),
    ("emitted", "emitted tokens", 0),
    ("rounds", "rounds", -1),
    ("target_forwards", "target forwards", -1),
    ("draft_forwards", "draft forwards", -1),
    ("requests", "requests", 0),
]


@dataclass
class MetricDiff:
    key: str
    metric: str
    baseline: object
    now: object
    direction: str  # "regression" | "improvement" | "changed" | "missing"

    def to_json(self) -> dict:
        return asdict(self)


def compare_metrics(key: str, now: Metrics, baseline: dict | None) -> list[MetricDiff]:
    """Exact comparison; one MetricDiff per differing metric (n-alpha per index)."""
    if baseline is None:
        return [MetricDiff(key, "entry", None, None, "missing")]
    diffs = []
    cur = now.to_json()
    for name, _, better in _ROWS:
        if cur[name] != baseline.get(name):
            diffs.append(MetricDiff(key, name, baseline.get(name), cur[name], _direction(baseline.get(name), cur[name], better)))
    old_alpha = list(baseline.get("n_alpha", []))
    if cur["n_alpha"] != old_alpha:
        for j in range(max(len(old_alpha), len(cur["n_alpha"]))):
            b, c = _get(old_alpha, j), _get(cur["n_alpha"], j)
            if b != c:
                diffs.append(MetricDiff(key, f"n_alpha[{j}]", b, c, _direction(b, c, +1)))
    return diffs


def compare_baseline(runs_by_key: dict[str, tuple[Iterable[RunResult], int]], baseline_path: str | Path) -> list[MetricDiff]:
    """Gate hook: `{key stem: (runs, K)}` against the baseline file; [] when all identical."""
    entries = load_baseline(baseline_path)
    diffs: list[MetricDiff] = []
    for key, (runs, k) in runs_by_key.items():
        diffs.extend(compare_metrics(key, compute_metrics(runs, k), entries.get(key)))
    return diffs


def _get(seq: list, j: int):
    return seq[j] if j < len(seq) else None


def _direction(old, new, better: int) -> str:
    if old is None or new is None or better == 0:
        return "changed"
    return "improvement" if (new - old) * better > 0 else "regression"


def _label(metric: str) -> str:
    labels = {name: label for name, label, _ in _ROWS}
    return labels.get(metric, metric.replace("n_alpha", "n-alpha"))


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def format_metric_diffs(diffs: list[MetricDiff], baseline_path: str | Path = "bench/baselines/metrics.json") -> str:
    """The baseline and current numbers side by side, one table per key."""
    if not diffs:
        return "metrics: identical to the baseline"
    lines = ["metrics: DIFFER from the baseline (exact gate)"]
    for key in dict.fromkeys(d.key for d in diffs):
        mine = [d for d in diffs if d.key == key]
        if mine[0].direction == "missing":
            pte = " --pte FILE" if "__pte__" in key else ""
            lines.append(f"  {key}: no baseline entry; add it with `{REFRESH} golden/{key}.json{pte}`")
            continue
        lines.append(f"  {key}")
        rows = [("metric", "baseline", "now", "change")]
        rows += [(_label(d.metric), _fmt(d.baseline), _fmt(d.now), d.direction) for d in mine]
        lines += ["    " + line for line in format_rows(rows, align=("left", "right", "right", "left"))]
    if any(d.direction == "regression" for d in diffs):
        lines.append("  a regression: find the change that caused it (tau lower or more forwards per token)")
    lines.append(f"  if the change is intended, refresh: `{REFRESH}` (baseline {baseline_path}) and commit it")
    return "\n".join(lines)
