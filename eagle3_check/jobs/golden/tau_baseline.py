"""tau against a baseline for the gate: tau may not drop more than a stated tolerance below it.

A baseline is any JSON with a top-level number `tau` (and optionally `k`, or `info.k`): an
earlier `eagle3-check gate --report`, a `check --json` report, or `{"tau": 2.1, "k": 4}`.
The tolerance is absolute (default 0.05): on CPU fp32 tau is deterministic, so the slack
is for a new export whose kernels round differently, not for run-to-run noise.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_check.errors import InputError
from eagle3_check.status import FAIL, PASS

TAU_TOLERANCE = 0.05


def read_baseline_tau(path: Path) -> tuple[float, int | None]:
    """tau (and K when recorded) from a baseline JSON (schema.TauBaseline: tau a finite number >= 0)."""
    from eagle3_check.schema import TauBaseline, load

    fix = 'pass a previous gate report (--report) or {"tau": 2.1}'
    if not Path(path).exists():
        raise InputError(f"--baseline {path} does not exist", "a JSON file with a 'tau' number", fix)
    data = load(TauBaseline, path, "tau baseline", fix)
    k = data.k if data.k is not None else (data.info or {}).get("k")
    return data.tau, k if type(k) is int else None


def compare_tau(path: Path, tau: float | None, ks: list[int], tolerance: float = TAU_TOLERANCE) -> tuple[str, str, dict]:
    """(status pass|fail, one-line message, details) of this run's tau against the baseline."""
    base, base_k = read_baseline_tau(path)
    if tau is None:
        return FAIL, ("no speculative round ran, so tau is undefined; expected rounds. "
                        "Fix: use prompts with max new tokens > 1"), {}
    if base_k is not None and ks != [base_k]:
        return FAIL, (f"baseline is for K = {base_k} but the gate ran K = {ks}; expected the same K. "
                        f"Fix: pass -k {base_k}"), {}
    details = {"tau": tau, "baseline": base, "tolerance": tolerance}
    if tau - base < -tolerance:
        return FAIL, (f"tau {tau:.3f} < baseline {base:.3f} - tolerance {tolerance:g}; expected no "
                        "regression. Fix: find why acceptance dropped"), details
    return PASS, f"tau {tau:.3f} vs baseline {base:.3f} (tolerance {tolerance:g})", details
