"""A case's run judged: what one edge case's run showed (`CaseRun`), against its oracle, the rules and the
case's own expectations, as a `CaseResult`. The run itself (set-up, forcing, the runner observed) is
`jobs.suites.execute`.

Checks on every case that runs (besides what its `Expect` adds):
- every emitted token is the reference's argmax over the request + the runner's own tokens
  (or a tie within the tolerance), and the length and stop rules of DESIGN §2 hold (the
  verdict: `verdict.judge`, `rules.expected_length`); a tie is reported as a tie only when
  nothing else is wrong: all the checks below run whatever the tokens hold;
- the runner's stop reason is the one the rules fix;
- under forcing, every forced round accepted exactly the forced a;
- the call log holds the DESIGN §2 invariants (`instrument.call_problems`), which include
  "no KV position >= max_seq_len";
- tau * rounds + 1 = tokens emitted;
- every other field of the RunResult against the rules and the call log (`audit.result_problems`).

A case that must fail before any program method runs (`Expect.error`) is judged by `judge_refusal`: the
error's type, what it mentions, one line, no program call before it (or the program's own refusal of the
verify window, passed on: the runtime's error).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from eagle3_check.judge.audit import result_problems
from eagle3_check.judge.verdict import FAIL, TIE, judge
from eagle3_check.program.contract import Metadata, SpeculatorProgram
from eagle3_check.runners.instrument import call_problems
from eagle3_check.runners.options import RunOptions, prompt_ids, stop_set
from eagle3_check.runners.seam import Observation
from eagle3_check.status import PASS
from eagle3_check.suites.case import Case
from eagle3_check.suites.request import oracle_stops, prompt_problem


@dataclass
class CaseResult:
    name: str
    status: str  # pass | fail | tie | skip
    message: str
    details: dict[str, Any] = field(default_factory=dict)  # L, K, tokens, rounds, accepted, stop
    seconds: float = 0.0  # wall time of the case, skips included (set by run_case)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class CaseRun:
    """What one case's run was asked (its program, request and oracle) and what it showed."""

    case: Case
    base: SpeculatorProgram  # the case's program, unpatched: the reference scores on it
    md: Metadata  # the metadata the runner met (patched where the case patches the program)
    k: int  # the K the run must have used (a profile's clamp, or the case's K)
    options: RunOptions  # as the runner got them (stops applied)
    prompt: str | list[int]  # the request as given: text, or exactly L prompt ids
    ids: list[int]  # the request's prompt ids
    oracle: list[int]  # the program's own greedy tokens after `ids`: what the case was set up on
    stop_idx: list[int]  # emitted indices the case places a stop token at
    tokenizer: Any  # the tokenizer the runner got (a variant whose EOS differs, where the case patches it)
    chunks: list[int] | None  # the chunked-prefill plan the call audit expects, None: one prefill
    turned: str | None  # why the runner's profile runs what the case expects to be an error, else None
    profile: str  # the runner's profile's name
    obs: Observation  # the runner's run and call log


def judge_run(env, r: CaseRun) -> CaseResult:
    """The run of `r` judged against `env`'s reference (a `jobs.suites.execute.SuiteEnv`): the verdict, then
    every structural check and the case's expectations, whatever the tokens hold."""
    case, md, options, rec, run = r.case, r.md, r.options, r.obs.calls, r.obs.run
    stops = oracle_stops(case, r.oracle, r.stop_idx, stop_set(r.tokenizer, md, options).ids)
    verdict = judge(run, env.score(r.ids, run.tokens, r.base, own=bool(case.toy)), stops, options.max_new_tokens,
                    md.max_seq_len, env.tolerance)
    # every check runs whatever the tokens hold: a tie never excuses forcing, stop or call-log problems
    structural = call_problems(rec, run, md.max_seq_len, r.chunks)
    structural += result_problems(rec, run, r.tokenizer, options.max_new_tokens, md.max_seq_len)
    if run.prompt_ids != r.ids:
        structural.append(f"runner's prompt ids ({len(run.prompt_ids)}) differ from the request's ({len(r.ids)})")
    structural += filter(None, [prompt_problem(env.tokenizer, r.prompt, options, run.prompt_ids)])
    if run.k != r.k:  # a profile's clamp, or the case's K
        structural.append(f"the runner ran K = {run.k}, expected K = {r.k}" + (f" ({r.turned})" if r.turned else ""))
    if abs((run.tau * run.rounds + 1 if run.rounds else 1) - len(run.tokens)) > 1e-6 or (not run.rounds and run.tau):
        structural.append(f"tau {run.tau} * rounds {run.rounds} + 1 != {len(run.tokens)} tokens emitted")
    outcome = [verdict.message] if verdict.status == FAIL else []
    if verdict.expected_reason and run.stop_reason != verdict.expected_reason:
        outcome.append(f"runner says stop '{run.stop_reason}', rules fix '{verdict.expected_reason}'")
    if case.forcing:
        for i, (got, want) in enumerate(zip(run.accepted, case.forcing.resolve(r.k, run.rounds)), start=1):
            if want is not None and got != want:
                outcome.append(f"round {i} accepted {got}, forced {want}")
                break
    outcome += _expectations(case, env, run, verdict, rec, options)
    details = {"L": len(r.ids), "K": r.k, "tokens": len(run.tokens), "rounds": run.rounds,
               "accepted": run.accepted, "stop": run.stop_reason, "max_new": run.max_new}
    details.update(identical=verdict.identical, ties=verdict.ties, profile=r.profile)
    if r.turned:
        details["notes"] = [r.turned]
    if structural or outcome:
        return CaseResult(case.name, FAIL, "; ".join(outcome + structural), details)
    message = f"{verdict.message} ({r.turned})" if r.turned else verdict.message
    return CaseResult(case.name, TIE if verdict.status == TIE else PASS, message, details)


def _expectations(case, env, run, verdict, rec, options) -> list[str]:
    ex, out = case.expect, []
    if ex.reason and verdict.expected_reason and verdict.expected_reason != ex.reason:
        out.append(f"case aims at stop '{ex.reason}' but the rules fix '{verdict.expected_reason}' (case setup)")
    if ex.draft_calls is not None and len(rec.of("draft_decode")) != ex.draft_calls:
        out.append(f"{len(rec.of('draft_decode'))} draft_decode calls, expected {ex.draft_calls}")
    if ex.rounds is not None and run.rounds != ex.rounds:
        out.append(f"{run.rounds} rounds, expected {ex.rounds}")
    if ex.note and not any(ex.note in n for n in run.notes):
        out.append(f"no run note mentions {ex.note!r} (notes: {run.notes})")
    text = case.prompt.text if case.prompt.text is not None else env.prompts[0]
    if ex.prompt == "drop-bos":
        with_bos = prompt_ids(env.tokenizer, text, dataclasses.replace(options, bos_id=RunOptions.bos_id))
        if run.prompt_ids != with_bos[1:]:
            out.append(f"bos -1: prompt ids {run.prompt_ids[:4]}... are not the default ids minus BOS {with_bos[:4]}...")
    elif ex.prompt == "decodes":
        want = text if options.raw else options.chat_prefix + text + options.chat_suffix
        body = run.prompt_ids if options.bos_id == -1 else run.prompt_ids[1:]
        if (options.bos_id != -1 and run.prompt_ids[:1] != [options.bos_id]) or env.tokenizer.decode(body) != want:
            out.append(f"prompt decodes to {env.tokenizer.decode(run.prompt_ids)!r}, rules give BOS + {want!r}")
    return out


def judge_refusal(case: Case, e: Exception, rec, L: int | None, k: int, runtime: str | None = None,
                  note: str | None = None) -> CaseResult:
    """An error case's run that raised `e` (an `Eagle3CheckError`), judged: the program's own refusal of
    the verify window passed on (`runtime`: the profile's words), else the error the case expects, naming
    what it must, in one line, before any program call (`rec`: the call log). `note`: why the profile
    must refuse (in the message)."""
    msg, problems = str(e), []
    by_program = verify_refused(rec) if runtime else None
    if by_program:  # the runner passed the program's own refusal on: the runtime's error
        return CaseResult(case.name, PASS, f"error: {msg} ({by_program}; {runtime})", {"L": L, "K": k, "error": msg})
    if type(e).__name__ != case.expect.error:
        problems.append(f"raised {type(e).__name__}, expected {case.expect.error}")
    problems += [f"error does not mention {m!r}" for m in case.expect.mentions if m not in msg]
    if "\n" in msg:
        problems.append("error message is more than one line")
    if rec.calls:
        problems.append(f"{len(rec.calls)} program calls ran before the error (expected none)")
    details = {"L": L, "K": k, "error": msg}
    passed = f"error: {msg}" + (f" ({note or runtime})" if note or runtime else "")
    return CaseResult(case.name, FAIL if problems else PASS, "; ".join(problems) or passed, details)


def verify_refused(rec) -> str | None:
    """The program's refusal of a target_verify window, in words, when the run met one (None: none)."""
    hit = next((r for r in rec.refused if r[0] == "target_verify"), None)
    return f"the program refused target_verify at positions {hit[1]}: {hit[2]}" if hit else None
