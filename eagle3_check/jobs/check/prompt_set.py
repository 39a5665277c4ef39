"""The main job: run a prompt set through a runner and compare each request with a reference.

`run_check` is what `eagle3-check check` calls; suites, the gate and plug-in runners
reuse it. Aggregate tau and n-alpha (the fraction of rounds whose proposal j was
accepted, for j = 0..K-1) are computed over all requests.

Each request is judged position by position (`verdict.judge`) against the reference's
teacher-forced scores of the runner's own tokens (`reference.score(prompt_ids, tokens)`).
Every run goes through `RecordingProgram` and its call log is audited against DESIGN §2
(`audit_calls`), so a runner that returns the right tokens without calling the program fails;
every other field it reports (text, max_new, accepted, its call counts and times, the stop
reason) is audited against the rules and that log (`judge.audit.result_problems`).
Ties are counted apart from identical positions; a report passes when no request fails and
its ties are within the tie budget (a share of all judged positions, `tolerance.TIE_BUDGET`).
That counting is one rule for `check` and `check --runner exec:...` (`JudgedReport`, the
base of CheckReport and `jobs.check.binary.ExecReport`); each report's JSON keeps its own keys.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from eagle3_check.errors import OptionError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.observe import observe_each
from eagle3_check.judge.audit import result_problems
from eagle3_check.judge.budget import BinomialBudget, allowed, budget_json, noise_note, share_text
from eagle3_check.judge.hf import HFReference
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.judge.verdict import Verdict, judge
from eagle3_check.program.contract import read_metadata
from eagle3_check.runners.crash import crashed_run
from eagle3_check.runners.instrument import RecordingProgram, call_problems
from eagle3_check.runners.loop import ReferenceRunner, check_prompt_len
from eagle3_check.runners.options import (
    RunOptions,
    check_options,
    check_tokenizer,
    prompt_ids,
    stop_set,
)
from eagle3_check.runners.profiles import declared
from eagle3_check.runners.result import PluginRunner, RunResult
from eagle3_check.runners.rules import prefill_chunks
from eagle3_check.status import FAIL, PASS, TIE
from eagle3_check.table import format_rows
from eagle3_check.tokenizer import Tokenizer


@dataclass
class RequestOutcome:
    prompt_id: str
    run: RunResult
    verdict: Verdict
    reference: dict | None = None  # `reference_json` of the scores the verdict read (None: not scored)
    seconds: float = 0.0  # wall time of the request: the run, its audit and the reference's scoring
    shrunk: dict | None = None  # its smallest reproduction (jobs/check/shrink.py), when shrinking ran
    # the run's program calls (instrument.Call) when its audit passed: draft health reads its features
    # from them instead of teacher-forcing the target again (draft_health.step0_from_calls); not in the JSON
    calls: list | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        out = {"prompt_id": self.prompt_id, "run": self.run.to_json(), "verdict": self.verdict.to_json(),
               "reference": self.reference, "seconds": round(self.seconds, 3)}
        return {**out, "shrunk": self.shrunk} if self.shrunk is not None else out


def reference_json(scores) -> dict:
    """The reference's side of a verdict, for the report: row i's argmax (the reference's token at
    emitted index i, teacher-forced over the runner's tokens before it; the last row is the token
    after the run) and its top-1/top-2 margin (None where the reference has no logits: the self
    reference). Example: tokens [5, 7], rows argmax [5, 8, 2] -> {"tokens": [5, 8, 2], ...}."""
    return {"tokens": [int(t) for t in scores.argmax],
            "margins": [float(m) if math.isfinite(m) else None for m in scores.margins]}


class JudgedReport:
    """Mixin of a report with `outcomes` (each with a `verdict`: status, judged, ties, fails) and a
    `tie_budget` (ties allowed, as a share of judged positions)."""

    COUNTS_IDENTICAL_POSITIONS = True  # its verdicts count identical positions (an exec verdict does not)

    def counts(self) -> dict[str, int]:
        """Requests and positions by outcome."""
        vs = [o.verdict for o in self.outcomes]
        c = {"requests": len(vs), "identical": sum(v.status == PASS for v in vs),
             "tie": sum(v.status == TIE for v in vs), "fail": sum(v.status == FAIL for v in vs),
             "positions": sum(v.judged for v in vs)}
        if self.COUNTS_IDENTICAL_POSITIONS:
            c["identical_positions"] = sum(v.identical for v in vs)
        c.update(tie_positions=sum(v.ties for v in vs), fail_positions=sum(v.fails for v in vs))
        return c

    @property
    def ties_allowed(self) -> int:
        """floor(share x positions), the float's rounding forgiven: 0.07 x 100 = 7.000000000000001 -> 7,
        0.29 x 100 = 28.999999999999996 -> 29."""
        return allowed(self.tie_budget, self.counts()["positions"])

    @property
    def budget_text(self) -> str:
        """How the allowed ties were decided ('7.0% of 818 positions', or the calibrated bound)."""
        return share_text(self.tie_budget, self.counts()["positions"])

    @property
    def noise_note(self) -> str | None:
        """A passing verdict that used ties says how much it cannot see (judge/budget.noise_note)."""
        c = self.counts()
        return noise_note(c["tie_positions"], self.ties_allowed, c["positions"], self.exact) if self.passed else None

    @property
    def exact(self) -> bool:
        """Judged in exact mode (`check --exact`: shape-invariant kernels, the verdict is identity)."""
        return str(getattr(self, "info", {}).get("numerics", "")).startswith("exact")

    @property
    def over_budget(self) -> bool:
        return self.counts()["tie_positions"] > self.ties_allowed

    @property
    def passed(self) -> bool:
        """At least one request, none failing, the ties within the budget, not interrupted (Ctrl-C)."""
        return (bool(self.outcomes) and self.counts()["fail"] == 0 and not self.over_budget
                and not getattr(self, "interrupted", None))


@dataclass
class CheckReport(JudgedReport):  # counts, ties_allowed, over_budget, passed
    k: int
    outcomes: list[RequestOutcome] = field(default_factory=list)
    info: dict = field(default_factory=dict)  # fixture, backend, device, dtype, runner
    tie_budget: float | BinomialBudget = 0.0  # ties allowed: a share of judged positions, or the calibrated bound
    interrupted: str | None = None  # Ctrl-C of the harness stopped it (runners/interrupt.py): what was not run

    @property
    def tau(self) -> float:
        rounds = sum(o.run.rounds for o in self.outcomes)
        return sum(max(len(o.run.tokens) - 1, 0) for o in self.outcomes) / rounds if rounds else 0.0

    @property
    def n_alpha(self) -> list[float]:
        """n_alpha[j] = share of rounds whose accepted count a > j (proposal j accepted)."""
        accepted = [a for o in self.outcomes for a in o.run.accepted]
        if not accepted:
            return [0.0] * self.k
        return [sum(a > j for a in accepted) / len(accepted) for j in range(self.k)]

    def to_json(self) -> dict:
        note = self.noise_note
        return {
            **({"interrupted": self.interrupted} if self.interrupted else {}),
            "passed": self.passed,
            "k": self.k,
            "tau": self.tau,
            "n_alpha": self.n_alpha,
            "info": self.info,
            "counts": self.counts(),
            "tie_budget": {**budget_json(self.tie_budget), "ties_allowed": self.ties_allowed,
                           "exceeded": self.over_budget, **({"note": note} if note else {})},
            "requests": [o.to_json() for o in self.outcomes],
        }


def audit_run(run: RunResult, want_ids: list[int], k: int) -> str | None:
    """What a runner reports about itself must agree with the request and with its tokens.

    The harness derives the prompt ids and K itself (a runner that adds BOS twice is
    judged against the prompt the user asked for), and tau / rounds / accepted must be
    the counts DESIGN §2 defines (tau excludes the free prefill token)."""
    if list(run.prompt_ids) != want_ids:
        i = next((i for i, (a, b) in enumerate(zip(run.prompt_ids, want_ids)) if a != b),
                 min(len(run.prompt_ids), len(want_ids)))
        return (f"prompt ids: runner used {len(run.prompt_ids)} ids, the request is {len(want_ids)}; "
                f"first difference at index {i}")
    if run.k != k:
        return f"stats: runner reports K = {run.k}, the request asks K = {k}"
    if len(run.accepted) != run.rounds or any(not 0 <= a <= k for a in run.accepted):
        return f"stats: {run.rounds} rounds but accepted = {run.accepted} (one a in [0, {k}] per round)"
    tau = (len(run.tokens) - 1) / run.rounds if run.rounds else 0.0
    if abs(run.tau - tau) > 1e-9:
        return f"stats: tau = {run.tau:g}, but (emitted - 1) / rounds = {tau:g}"
    return None


def audit_calls(rec: RecordingProgram, run: RunResult, max_seq_len: int, chunks: list[int] | None = None) -> str | None:
    """The program calls the run made, against DESIGN §2's call protocol (`instrument.call_problems`):
    a runner that never calls the program, or calls it out of protocol, fails with the first problem.
    `chunks`: the chunked-prefill plan of the request (`rules.prefill_chunks`), None for one prefill."""
    problems = call_problems(rec, run, max_seq_len, chunks)
    if not problems:
        return None
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"call protocol: {problems[0]}{more}"


def request_ids(tokenizer: Tokenizer, prompts: list[Prompt], options: RunOptions, md) -> list[list[int]]:
    """Every request's prompt ids, each checked against the program's prefill rule before any work
    (a bad prompt is a one-line error naming it, never a partial report)."""
    requests = [list(p.ids) if p.ids is not None else prompt_ids(tokenizer, p.text, options) for p in prompts]
    for p, ids in zip(prompts, requests):
        try:
            check_prompt_len(len(ids), md, options.chunked_prefill)
        except OptionError as e:
            raise OptionError(f"prompt '{p.id}': {e.what}", e.expected, e.fix) from None
    return requests


def shuffled_prompts(prompts: list[Prompt], seed: int) -> list[Prompt]:
    """The prompt set in a seeded, reproducible shuffled order (`check --shuffle SEED`): a runner that
    carries state from one request to the next is judged on another sequence of requests."""
    out = list(prompts)
    random.Random(seed).shuffle(out)
    return out


def run_check(
    program,
    tokenizer: Tokenizer,
    reference: HFReference,
    prompts: Iterable[Prompt],
    options: RunOptions,
    tolerance: Tolerance,
    runner: PluginRunner | None = None,
    on_request: Callable[[RequestOutcome], None] | None = None,
    tie_budget: float = 0.0,
    parallel: bool = False,
) -> CheckReport:
    """Runs every prompt through `runner` (the reference runner by default) and judges it.

    The reference scores the prompt ids the harness derives from the request (not the ones
    the runner reports) followed by the runner's tokens. `reference`: anything with
    `score(prompt_ids, tokens) -> Scores` (HFReference, SelfReference). `parallel`: two requests
    at once where runner and program are ours (jobs/check/twin_runs.py; the same report); only a
    caller that writes nothing to stdout meanwhile asks for it (the runs' stdout capture is shared)."""
    runner = runner or ReferenceRunner()
    md = read_metadata(program.metadata())
    check_tokenizer(tokenizer, md)
    # the request as the runner's profile runs it (runners/profiles.py: K clamped, every prompt chunked, or as
    # given); the runner is asked with the K given (its clamp is checked) and the profile's chunking
    judged = declared(runner)[0].request(options, md)
    k = check_options(judged, md, md.vocab_size or tokenizer.vocab_size)
    options = requested_options(options, md, runner)
    stops = stop_set(tokenizer, md, options)
    report = CheckReport(k=k, tie_budget=tie_budget)
    prompts = list(prompts)
    requests = request_ids(tokenizer, prompts, options, md)
    try:
        _run_requests(report, program, tokenizer, reference, prompts, requests, options, tolerance, runner,
                      on_request, md, k, stops, parallel)
    except KeyboardInterrupt:  # Ctrl-C of the harness: the report holds what was judged (runners/interrupt.py)
        from eagle3_check.runners.interrupt import interrupted_line

        report.interrupted = interrupted_line(len(report.outcomes), len(prompts))
    return report


def requested_options(options, md, runner):
    """The options each request is sent to `runner` with: the given ones, chunked as the runner's
    profile chunks (the K given: its clamp is checked). An isolated runner's requests are sent ahead
    (IsolatedRunner.expect) with exactly these."""
    judged = declared(runner)[0].request(options, md)
    return dataclasses.replace(options, chunked_prefill=judged.chunked_prefill)


def _run_requests(report, program, tokenizer, reference, prompts, requests, options, tolerance, runner, on_request,
                  md, k, stops, parallel=False) -> None:
    """Each request run (one at a time, or two ahead: jobs/check/twin_runs.py) and audited in turn; its
    reference scores taken on a lane (jobs/check/scoring.py: a second thread where runner and reference are
    ours, else right after the run); verdicts in prompt order, each as soon as its scores are in."""
    from eagle3_check.jobs.check.scoring import lane
    from eagle3_check.jobs.check.twin_runs import runs_ahead

    scoring = lane(reference, runner)
    runs = runs_ahead(program, runner, tokenizer, prompts, options, parallel, [len(r) for r in requests], reference)
    ran: list = []  # (prompt, prompt ids, run, problem, call log, seconds), in prompt order, not yet judged

    def take(i: int, p: Prompt, obs, seconds: float) -> None:
        # the seam (runners/in_process.py): every call recorded and audited (DESIGN §2), a runner must really
        # run the program; a crashing runner or a contract-breaking program fails this request, the rest go on
        t0, want_ids = time.perf_counter(), requests[i]
        rec, run = obs.calls, obs.run
        if obs.failure:
            max_new = min(options.max_new_tokens, md.max_seq_len - len(want_ids))
            ran.append((p, want_ids, crashed_run(want_ids, k, max_new), obs.failure, None, seconds))
        else:
            chunks = prefill_chunks(len(want_ids), md.max_prefill, md.min_prefill, md.sliding_window) \
                if options.chunked_prefill else None
            problem = audit_run(run, want_ids, k) or audit_calls(rec, run, md.max_seq_len, chunks) \
                or "; ".join(result_problems(rec, run, tokenizer, options.max_new_tokens, md.max_seq_len))
            if not problem:
                scoring.submit(len(report.outcomes) + len(ran), want_ids, list(run.tokens))
            ran.append((p, want_ids, run, problem or None, rec.calls, seconds + time.perf_counter() - t0))
        _judge_ready(report, ran, scoring, on_request, options, md, stops, tolerance, wait=False)

    try:
        observe_each(runs, prompts, take)  # the one request loop (jobs/check/observe.py)
        _judge_ready(report, ran, scoring, on_request, options, md, stops, tolerance, wait=True)
    except KeyboardInterrupt:  # Ctrl-C: what has run is judged (its scores are under way), as inline scoring would
        _judge_ready(report, ran, scoring, on_request, options, md, stops, tolerance, wait=True)
        raise
    finally:
        runs.close()
        scoring.close()


def _judge_ready(report, ran, scoring, on_request, options, md, stops, tolerance, wait: bool) -> None:
    """Judges the runs in `ran` from the first while their scores are in (all of them with `wait`),
    appending each outcome to `report` in prompt order. A crash or an audit problem is a FAIL unscored."""
    while ran:
        p, want_ids, run, problem, calls, seconds = ran[0]
        key = len(report.outcomes)
        if problem is None and not wait and not scoring.ready(key):
            return
        ran.pop(0)
        if problem is not None:
            outcome = RequestOutcome(p.id, run, Verdict(FAIL, problem), seconds=seconds)
        else:
            scores, spent = scoring.result(key)
            verdict = judge(run, scores, stops.ids, options.max_new_tokens, md.max_seq_len, tolerance)
            if verdict.status != FAIL and verdict.expected_reason and run.stop_reason != verdict.expected_reason:
                verdict = dataclasses.replace(verdict, status=FAIL, message=(
                    f"stop reason: runner says '{run.stop_reason}', the rules fix '{verdict.expected_reason}'"))
            outcome = RequestOutcome(p.id, run, verdict, reference_json(scores), seconds + spent, calls=calls)
        report.outcomes.append(outcome)
        if on_request:
            on_request(outcome)


def format_table(report: CheckReport) -> str:
    rows = [("prompt", "L", "tokens", "rounds", "tau", "stop", "ties", "verdict")]
    for o in report.outcomes:
        r, v = o.run, o.verdict
        rows.append((o.prompt_id, str(len(r.prompt_ids)), str(len(r.tokens)), str(r.rounds),
                     f"{r.tau:.2f}", r.stop_reason, str(v.ties), f"{v.status.upper()}: {v.message}"))
    lines = format_rows(rows)
    c = report.counts()
    alpha = " ".join(f"{a:.2f}" for a in report.n_alpha)
    lines.append("")
    info = report.info
    if "k_range" in info:  # what the program is and how it is judged (set by `check`)
        form = f"target_verify {info['target_verify']}   " if "target_verify" in info else ""
        lines.append(f"program: {form}dtype {info.get('dtype')}   tie tolerance {info.get('tie_tolerance')}   "
                     f"K range {info['k_range']} from {info.get('k_source')}")
    if "tie_source" in info:  # where the tolerance and budget came from (judge/tie_rule.py)
        lines.append(f"tie rule: {info['tie_source']}")
    if report.exact:
        lines.append(f"numerics: {info['numerics']}")
    lines += [f"warning: {w}" for w in info.get("program_warnings", [])]
    prof = info.get("profile")
    if prof:  # the runner's rules and how they were found (declared / detected / given)
        lines.append(f"runner profile {prof['name']} ({prof['pr']}, {prof['commit']}): {prof['found']}")
    from eagle3_check.runners.protections import protections_line

    lines += [p for p in [protections_line(info.get("isolation"))] if p]  # what held the runner in
    for key in ("run_options", "program_shape", "weight_conversion"):  # the options, the --target shape, the dtypes
        if key in info:
            lines += [info[key]["summary"], *(f"note: {n}" for n in info[key].get("notes", []))]
    lines.append(f"K = {report.k}   tau = {report.tau:.2f}   n-alpha = [{alpha}]")
    lines.append(f"requests: {c['identical']} identical, {c['tie']} tie, {c['fail']} fail (of {c['requests']})")
    lines.append(f"positions: {c['identical_positions']} identical, {c['tie_positions']} tie, "
                 f"{c['fail_positions']} fail (of {c['positions']}); tie budget {report.ties_allowed} "
                 f"({report.budget_text})")
    why = f"{c['fail']} request(s) fail" if c["fail"] else ""
    if report.over_budget:
        why += ("; " if why else "") + f"{c['tie_positions']} ties exceed the tie budget of {report.ties_allowed}"
    if report.interrupted:
        why += ("; " if why else "") + report.interrupted
    lines += [f"note: {n}" for n in [report.noise_note] if n]
    lines.append(f"verdict: {'PASS' if report.passed else 'FAIL'}" + (f" ({why})" if why else ""))
    return "\n".join(lines)
