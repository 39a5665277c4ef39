"""`--exact` on every job (check, check --suite, golden record / verify, the pytest plugin): the runner
and the reference on exact mode's shape-invariant kernels (eagle3_check/exact, docs/exact.md), and the
verdict as identity.

In exact mode a verify window, a one-row decode and the HF reference's full forward compute each row
in one order, so a correct runner's logits are the reference's bit for bit: the tie tolerance is 0
and the tie budget 0 (a position whose token is not the reference's argmax fails; one whose logit
equals the top's exactly is still a tie, and the budget of 0 fails it). The report and its JSON name
the mode (`info.numerics`).

What it covers (checked where the config is built, no torch): eager programs, with any runner in
PyTorch: in this process, or isolated in its own (a plug-in, `--isolate`, `--workers`), whose child
builds its program with the mode installed for its life (jobs/check/job.py's child_program), or calls
the harness's program over the pipe with the mode installed too (jobs/common/isolation.py's
remote_runner: the suites, golden verify, the pytest plugin). Refused, one line each: a `.pte` (its
XNNPACK kernels are not aten's: so `gate`, which judges a `.pte`), `--compile` (the compiled forward is
inductor's code), `--quantize`, a runner binary (its own kernels), `--tie-budget`.
"""

from __future__ import annotations

import contextlib

from eagle3_check.errors import OptionError

EXACT_TOLERANCE_NOTE = "0 (exact mode: identity)"


def check_exact_flags(cfg) -> None:
    """--exact with a route it does not cover: one line naming the flag and the fix."""
    if not cfg.exact:
        return
    from eagle3_check.runners.seam import kind_of

    if cfg.command == "gate":
        raise OptionError("gate --exact", "an eager program (exact mode replaces aten's kernels; a .pte runs "
                          "ExecuTorch's own)", "judge the eager program the .pte was exported from with "
                          "`eagle3-check check --exact --target T --draft D`, and gate the .pte without --exact")
    refused = (
        ("--pte", bool(cfg.pte), "a .pte runs ExecuTorch's kernels, not aten's"),
        ("--aoti", bool(getattr(cfg, "aoti", None)), "an AOTI package runs inductor's kernels, not aten's"),
        ("--compile", (cfg.compile or "off") != "off", "the compiled forward is inductor's code"),
        ("--quantize", bool(cfg.check.quantize), "the quantized checks judge drift, not identity"),
        ("--runner exec:PATH", kind_of(cfg.runner).program_file, "a binary runs its own kernels"),
        ("--tie-budget", cfg.tie_budget is not None, "exact mode's budget is 0"),
    )
    for flag, hit, why in refused:
        if hit:
            raise OptionError(f"--exact with {flag}", "an eager program judged in this process",
                              f"drop {flag} or --exact ({why})")


def numerics(cfg) -> str:
    """The numerics mode's name, as the report and the JSON say it."""
    from eagle3_check.exact import EXACT_NUMERICS, NORMAL_NUMERICS

    return EXACT_NUMERICS if cfg.exact else NORMAL_NUMERICS


def exact_tolerance(cfg, tolerance):
    """The tolerance a job judges with: exact mode's 0 (identity), else `tolerance` as given."""
    return exact_rule(cfg.dtype).tolerance if cfg.exact else tolerance


def exact_rule(dtype: str):
    """The tie rule of exact mode (judge/tie_rule.py's TieRule): tolerance 0 logits + 0 ulp, budget 0."""
    from eagle3_check.judge.tie_rule import TieRule
    from eagle3_check.judge.tolerance import Tolerance

    return TieRule(Tolerance(dtype, 0.0), 0.0, "exact mode: identity (no tolerance, no budget; docs/exact.md)")


def scope(cfg, reference=None):
    """The block the runner and the reference run in: exact_numerics over the HF reference's model
    (switched to the fixed-block attention, as the runner's target already runs sdpa), or nothing."""
    if not cfg.exact:
        return contextlib.nullcontext()
    from eagle3_check.exact import exact_numerics

    model = getattr(reference, "model", None)
    return exact_numerics(*([model] if model is not None else []))


def numerics_line(info: dict) -> list[str]:
    """The report's numerics line in exact mode (normal mode prints none: README's sample stays)."""
    mode = info.get("numerics", "")
    return [f"numerics: {mode}"] if mode.startswith("exact") else []
