"""The HTML reports of `check`, `gate` and `golden verify`, built from their JSON reports.

Each `*_html(report_json)` takes exactly what the command's `--json` prints (plus, for check,
its draft health) and returns one self-contained page (html_page): the verdict, the per-request
table with identical / tie / fail positions, the first-divergence forensics, tau per prompt and
per K, per-position acceptance (n-alpha, per K and per prompt), the tie margins against the
tie tolerance, draft health, and for gate its check list. Plots come from `plots` (matplotlib).

n-alpha of one run: n_alpha[j] = share of its rounds whose accepted count a > j.
Worked example: accepted [4, 2, 0, 0], K = 4 -> [2/4, 2/4, 1/4, 1/4] = [0.5, 0.5, 0.25, 0.25].
"""

from __future__ import annotations

from collections.abc import Sequence

from eagle3_check.report import plots
from eagle3_check.report.html_page import (
    info_list,
    num,
    page,
    section,
    table,
    verdict_line,
)
from eagle3_check.report.html_page import plots as plot_row


def n_alpha(accepted: Sequence[int], k: int) -> list[float]:
    """Share of rounds whose proposal j was accepted, j = 0..k-1 (all 0.0 with no round)."""
    if not accepted:
        return [0.0] * k
    return [sum(a > j for a in accepted) / len(accepted) for j in range(k)]


def _k_label(k) -> str:
    return f"K={k}"


# ----------------------------------------------------------------------------- check


def check_html(report: dict, health: dict | None = None, title: str = "eagle3-check check") -> str:
    """The page of one `check` report (`CheckReport.to_json()`) and its draft health."""
    c, reqs, k = report["counts"], report["requests"], report["k"]
    budget = report["tie_budget"]
    why = []
    if c["fail"]:
        why.append(f"{c['fail']} request(s) fail")
    if budget["exceeded"]:
        why.append(f"{c['tie_positions']} ties exceed the tie budget of {budget['ties_allowed']}")
    flags = (health or {}).get("flags") or []
    if flags:
        why.append(f"draft health: {len(flags)} flag(s)")
    summary = (f"K = {k}, tau = {report['tau']:.2f}; requests: {c['identical']} identical, {c['tie']} tie, "
               f"{c['fail']} fail (of {c['requests']}); positions: {c['identical_positions']} identical, "
               f"{c['tie_positions']} tie, {c['fail_positions']} fail (of {c['positions']})"
               + (f" — {'; '.join(why)}" if why else ""))
    passed = bool(report["passed"]) and not flags
    parts = [verdict_line(passed, summary), info_list({**report.get("info", {}), "tie budget":
             f"{budget['ties_allowed']} positions (" + (f"{budget['share']:.1%} of judged)" if "share" in budget else
             f"binomial bound at a correct runner's rate <= {budget['rate']:.4g}: {budget['source']})")})]
    parts.append(section("Requests", verdict_table(reqs), section_id="requests"))
    parts.append(section("First divergence and first tie (forensics)", forensics_table(reqs), section_id="forensics"))
    if any(r.get("shrunk") for r in reqs):
        parts.append(section("Shrunk failing requests", shrunk_table([(r["prompt_id"], r["shrunk"]) for r in reqs
                                                                      if r.get("shrunk")]), section_id="shrunk"))
    runs = [{"prompt_id": r["prompt_id"], "k": r["run"]["k"], "tau": r["run"]["tau"], "rounds": r["run"]["rounds"],
             "tokens": len(r["run"]["tokens"]), "accepted": r["run"]["accepted"]} for r in reqs]  # RunResult.summary
    parts.append(section("Acceptance", acceptance_plots(runs), n_alpha_table(runs), section_id="acceptance"))
    parts.append(section("Tie margins", tie_margins(reqs), section_id="ties"))
    if health is not None:
        parts.append(section("Draft health", draft_health(health), section_id="draft-health"))
    return page(title, *parts)


def verdict_table(reqs: list[dict]) -> str:
    rows = []
    for r in reqs:
        run, v = r["run"], r["verdict"]
        rows.append((r["prompt_id"], len(run["prompt_ids"]), len(run["tokens"]), run["rounds"], num(run["tau"]),
                     run["stop_reason"], v["identical"], v["ties"], v["fails"], v["status"], v["message"]))
    return table(("prompt", "L", "tokens", "rounds", "tau", "stop", "identical", "tie", "fail", "verdict",
                  "message"), rows, numeric=(1, 2, 3, 4, 6, 7, 8), status_col=9, table_id="verdicts")


def shrunk_table(items: list[tuple[str, dict]]) -> str:
    """Each failing request beside its smallest reproduction (jobs/check/shrink.py): the original and
    the shrunk request (L, max new tokens, K), the rule, the one-line command and the repro file."""
    def req(r: dict) -> str:
        spec = "".join(f", {k} {v}" for k, v in r.get("spec", {}).items())
        return f"L {len(r['prompt_ids'])}, max new {r['max_new_tokens']}, K {r['k']}{spec}"

    rows = [(name, req(s["original"]), req(s["shrunk"]), s["failure"]["kind"], s["probes"],
             s.get("command", ""), s.get("file", "")) for name, s in items]
    return table(("request", "original", "shrunk", "rule", "probes", "command", "repro file"), rows,
                 numeric=(4,), table_id="shrunk")


def forensics_table(reqs: list[dict]) -> str:
    rows = [(r["prompt_id"], v["status"], num(v["index"]), num(v["got"]), num(v["want"]), num(v["margin"], "{:.4g}"),
             num(v["rank"]), num(v["expected_len"]), v["expected_reason"] or "-", v["message"])
            for r in reqs if (v := r["verdict"])["status"] != "pass"]
    if not rows:
        return "<p>every request is identical to the reference: no divergence, no tie.</p>"
    return table(("prompt", "verdict", "index", "runner token", "reference token", "margin (top-1 - top-2)",
                  "runner token rank", "expected length", "length rule", "message"), rows,
                 numeric=(2, 3, 4, 5, 6, 7), status_col=1, table_id="forensics-table")


def acceptance_plots(runs: list[dict]) -> str:
    """tau per prompt (one bar per K) and the aggregate n-alpha per K."""
    if not runs:
        return "<p>no run to plot.</p>"
    ks = sorted({r["k"] for r in runs})
    prompts = list(dict.fromkeys(r["prompt_id"] for r in runs))
    by = {(r["prompt_id"], r["k"]): r for r in runs}
    nan = float("nan")  # a prompt with no run at this K (it crashed) gets no bar, never a 0
    taus = {_k_label(k): [by[(p, k)]["tau"] if (p, k) in by else nan for p in prompts] for k in ks}
    alpha = {_k_label(k): (list(range(k)), n_alpha([a for r in runs if r["k"] == k for a in r["accepted"]], k))
             for k in ks}
    out = [plots.bars("tau per prompt", "tau (tokens per round)", prompts, taus, xlabel="prompt"),
           plots.lines("n-alpha: proposal j accepted (share of rounds)", "proposal j", "n-alpha", alpha, (0, 1.05))]
    if len(ks) > 1:
        out.append(plots.bars("tau per K (all prompts)", "tau", [_k_label(k) for k in ks],
                              {"tau": [_tau([r for r in runs if r["k"] == k]) for k in ks]}))
    return plot_row(*out)


def _tau(runs: list[dict]) -> float:
    """Aggregate tau: (emitted - 1) summed over runs / rounds summed (the report's definition)."""
    rounds = sum(r["rounds"] for r in runs)
    emitted = sum(max(r["tokens"] - 1, 0) for r in runs)
    return emitted / rounds if rounds else 0.0


def n_alpha_table(runs: list[dict]) -> str:
    """n-alpha per prompt (rows) and proposal position (columns), per K."""
    kmax = max((r["k"] for r in runs), default=0)
    rows = [(r["prompt_id"], r["k"], r["rounds"], num(r["tau"]),
             *[num(a) for a in n_alpha(r["accepted"], r["k"])], *["-"] * (kmax - r["k"])) for r in runs]
    return table(("prompt", "K", "rounds", "tau", *[f"n-alpha[{j}]" for j in range(kmax)]), rows,
                 numeric=tuple(range(1, 4 + kmax)), table_id="n-alpha")


def tie_margins(reqs: list[dict]) -> str:
    """Every tie position's reference margin against the tie tolerance there."""
    xs, ys, limit, rows = [], [], [], []
    for r in reqs:
        v = r["verdict"]
        at = v["tie_at"]
        margins, tols = (v["tie_margins"], v["tie_tolerances"]) if at else ([], [])  # a report without them: error
        if not len(at) == len(margins) == len(tols):
            raise ValueError(f"request {r['prompt_id']!r} has {len(at)} ties but {len(margins)} tie margins "
                             f"and {len(tols)} tolerances")
        xs, ys, limit = xs + at, ys + margins, limit + tols
        rows += [(r["prompt_id"], i, num(m, "{:.4g}"), num(t, "{:.4g}")) for i, m, t in zip(at, margins, tols)]
    if not rows:
        return "<p>no tie: every judged position is identical or a failure.</p>"
    svg = plots.scatter("tie margins (reference top-1 - top-2)", "emitted token index", "logit margin",
                        {"tie margin": (xs, ys)}, limit=limit, limit_label="tie tolerance")
    return plot_row(svg) + table(("prompt", "index", "margin", "tolerance"), rows, numeric=(1, 2, 3),
                                 table_id="tie-table")


def draft_health(h: dict) -> str:
    alpha = " ".join(f"{a:.2f}" for a in h.get("n_alpha", []))
    rows = [("step-0 agreement (teacher-forced)", f"{h['step0_agreement']:.3f} over {h['step0_rows']} positions"),
            ("tau", num(h["tau"])), ("acceptance by position", alpha or "-"),
            ("expected tau", f"{h['expect_tau']:.2f} ({h.get('expect_source')})" if h.get("expect_tau") is not None
             else "none")]
    rows += [("FLAG", f) for f in h.get("flags", [])]
    return table(("draft health", "value"), rows, table_id="draft-health-table")


# ----------------------------------------------------------------------------- gate


def gate_html(report: dict, title: str = "eagle3-check gate") -> str:
    """The page of one gate report (`GateReport.to_json()`, the --report file)."""
    checks = report["checks"]
    tau = f", tau = {report['tau']:.2f}" if report.get("tau") is not None else ""
    n_fail = sum(c["status"] == "fail" for c in checks)
    summary = f"{len(checks)} checks, {n_fail} fail{tau}"
    rows = [(c["name"], c["status"], f"{c['seconds']:.1f}s", c["message"]) for c in checks]
    parts = [verdict_line(bool(report["passed"]), summary), info_list(report.get("info", {})),
             section("Checks", table(("check", "status", "time", "message"), rows, status_col=1,
                                     table_id="checks"), section_id="checks")]
    runs = next((c["details"]["runs"] for c in checks if "runs" in c.get("details", {})), None)
    if runs:
        parts.append(section("Acceptance", acceptance_plots(runs), n_alpha_table(runs), section_id="acceptance"))
    shrunk = [(f"{c['name']}: {name}", s) for c in checks for name, s in c.get("details", {}).get("shrunk", {}).items()]
    if shrunk:  # the gate's failing suite and request cases beside their smallest reproduction (jobs/gate/shrink_route.py)
        parts.append(section("Shrunk failing cases", shrunk_table(shrunk), section_id="shrunk"))
    for c in checks:
        if c.get("cases"):
            cases = [(x["name"], x["status"], x["message"]) for x in c["cases"]]
            counts = ", ".join(f"{n} {s}" for s, n in c.get("counts", {}).items() if n)
            parts.append(section(f"{c['name']} ({counts})", table(("case", "status", "message"), cases,
                                                                 status_col=1)))
    return page(title, *parts)


# ----------------------------------------------------------------------------- golden verify


def golden_html(outcome: dict, title: str = "eagle3-check golden verify") -> str:
    """The page of `golden verify` (`GateOutcome.to_json()`)."""
    diffs, mdiffs = outcome["golden_diffs"], outcome["metric_diffs"]
    runs = [s for v in outcome.get("runs", {}).values() for s in v["prompts"]]
    summary = (f"{len(outcome['goldens'])} golden(s) run, {len(outcome['skipped'])} skipped, {len(diffs)} golden "
               f"difference(s), {len(mdiffs)} metric difference(s)")
    gold_rows = [(stem, v["k"], len(v["prompts"]), num(_tau(v["prompts"])))
                 for stem, v in outcome.get("runs", {}).items()]
    parts = [verdict_line(bool(outcome["passed"]), summary),
             section("Goldens", table(("golden", "K", "prompts", "tau"), gold_rows, numeric=(1, 2, 3),
                                      table_id="goldens"), section_id="goldens"),
             section("Golden differences", _dict_table(diffs, "diffs") if diffs else
                     "<p>every run is identical to its golden.</p>", section_id="golden-diffs"),
             section("Metric differences", _dict_table(mdiffs, "metric-diffs") if mdiffs else
                     f"<p>{'no baseline given' if not outcome.get('baseline') else 'identical to the baseline'}"
                     "</p>", section_id="metric-diffs")]
    if runs:
        parts.append(section("Acceptance", acceptance_plots(runs), n_alpha_table(runs), section_id="acceptance"))
    notes = [(stem, why) for stem, why in outcome["skipped"].items()] + [("note", n) for n in outcome["notes"]]
    if notes:
        parts.append(section("Skipped and notes", table(("what", "why"), notes)))
    return page(title, *parts)


def _dict_table(items: list[dict], table_id: str) -> str:
    """A table of JSON objects, one column per key (in first-seen order)."""
    keys = list(dict.fromkeys(k for d in items for k in d))
    return table(keys, [tuple(num(d.get(k), "{:.4g}") for k in keys) for d in items], table_id=table_id)
