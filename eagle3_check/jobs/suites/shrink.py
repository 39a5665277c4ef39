"""A failing edge-suite case shrunk (`check --suite NAME --shrink`), where the case is a plain request.

A plain case is a prompt, options, K and a program spec: no forced draft, no stop placed on its
own trajectory, no expected error, no metadata key dropped, no max new tokens set from a round
(`plain`). Such a case is run again as `check` runs a request, on the case's program against the
suite's reference (`SuiteEnv.score`); if it fails there it is shrunk (`jobs.check.shrink.shrink_report`),
its max_seq_len too where the failure involves the program's limits and the suite builds programs
per spec (an eager fixture: `SuiteEnv.eager`; on one given program, `SuiteEnv.fixed`, the spec is
kept and left out of the repro). The other cases say why they are not shrunk. The case's own
verdict is not touched.
"""

from __future__ import annotations

from eagle3_check.errors import Eagle3CheckError, OptionError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.jobs.check.shrink import shrink_report
from eagle3_check.jobs.suites.execute import SELF, SuiteEnv, case_setup
from eagle3_check.judge.self_ref import SelfReference
from eagle3_check.runners.options import stop_set
from eagle3_check.shrink.search import ShrinkResult
from eagle3_check.status import FAIL
from eagle3_check.suites.case import Case
from eagle3_check.suites.request import CaseSkip, pick_prompt


class EnvReference:
    """The suite's reference of one program, as `run_check` reads a reference (`score(ids, tokens)`) and a
    binary's check does (`greedy(ids, n, stop_ids)` too)."""

    def __init__(self, env: SuiteEnv, program):
        self.env, self.program = env, program

    def score(self, ids: list[int], tokens: list[int]):
        return self.env.score(ids, tokens, self.program)

    def greedy(self, ids: list[int], n: int, stop_ids=frozenset()):
        """The suite's reference decoding `ids` (a binary's check reads its tokens and margins)."""
        if self.env.reference == SELF:
            return SelfReference(self.program).greedy(list(ids), n, stop_ids)
        return self.env.reference.greedy(list(ids), n, stop_ids)


def plain(case: Case) -> str | None:
    """Why the case is not one plain request (None: it is)."""
    for attr, why in (("forcing", "its draft is forced along the case's own trajectory"),
                      ("stop_at", "its stops are placed on the case's own trajectory"),
                      ("max_new_at", "its max new tokens are set from a round of its own trajectory"),
                      ("drop_key", "it drops a metadata key")):
        if getattr(case, attr):
            return why
    return "it expects an error, not a run" if case.expect.error else None


def shrink_case(case: Case, env: SuiteEnv, runner, budget_s: float,
                on_probe=None) -> tuple[ShrinkResult | None, dict | None, str]:
    """(result, its JSON for the case's details, a note why not when there is no result)."""
    why = plain(case)
    if why:
        return None, None, f"not shrunk: {why}"
    setup = case_setup(case, env)
    base, md, k, options = setup.base, setup.md, setup.k, setup.options
    try:
        prompt, ids, _ = pick_prompt(case, env, base, md, k, options, [], stop_set(env.tokenizer, md, options).ids, [])
    except CaseSkip as e:  # no prompt of the case's shape fits this program: nothing to run again
        return None, None, f"not shrunk: {e}"
    p = Prompt(case.name, prompt) if isinstance(prompt, str) else Prompt(case.name, "", ids=tuple(prompt))
    ref = EnvReference(env, base)
    report = run_check(base, env.tokenizer, ref, [p], options, env.tolerance, runner=runner)
    if report.outcomes[0].verdict.status != FAIL:
        return None, None, "not shrunk: it passes as a check request (only the case's own expectations fail it)"

    def rebuild(spec: dict):
        try:
            prog = env.program_for({**dict(case.spec), **spec})
        except (Eagle3CheckError, ValueError) as e:
            raise OptionError(f"program spec {spec}", "a spec the fixture can build", str(e)[:80]) from None
        return prog, EnvReference(env, prog)

    # one given program (a .pte, the gate's): no spec to shrink, none in the repro
    limits = {} if env.one_program is not None else {
        "spec": {"max_seq_len": md.max_seq_len}, "spec_floors": {"max_seq_len": md.min_prefill + 1}, "rebuild": rebuild}
    [(outcome, result)] = shrink_report(report, [p], base, env.tokenizer, ref, options, env.tolerance, runner,
                                        budget_s, on_probe=on_probe, **limits)
    return result, outcome.shrunk, ""


def shrink_exec_case(case, env, runner, budget_s: float, on_probe=None) -> tuple[ShrinkResult | None, dict | None, str]:
    """A failing suite case through a binary (`check --runner exec:... --suite NAME --shrink`): a plain
    case (`jobs.suites.shrink.plain`) a binary takes is run again as `check` runs a request through it, on the
    suite's one program, and shrunk (its spec is kept: the binary runs the given .pte). (result, its
    JSON for the case's details, a note why not when there is no result)."""
    from eagle3_check.jobs.check.binary import run_exec_check
    from eagle3_check.jobs.check.shrink import shrink_exec_report
    from eagle3_check.jobs.suites.binary import _as_text, skip_reason

    why = plain(case) or skip_reason(case, runner.capabilities)
    if why:
        return None, None, f"not shrunk: {why}"
    setup = case_setup(case, env)
    base, md, k, options = setup.base, setup.md, setup.k, setup.options
    try:  # no prompt of the case's shape fits this program, or none the binary can be given as text
        prompt, ids, _ = pick_prompt(case, env, base, md, k, options, [], stop_set(env.tokenizer, md, options).ids, [])
        text, options = _as_text(prompt, ids, options, env.tokenizer)
    except CaseSkip as e:
        return None, None, f"not shrunk: {e}"
    p = Prompt(case.name, text)
    ref = EnvReference(env, base)
    report = run_exec_check(runner, base, env.tokenizer, ref, [p], options, tolerance=env.tolerance)
    if report.outcomes[0].verdict.status != FAIL:
        return None, None, "not shrunk: it passes as a check request (only the case's own expectations fail it)"
    [(_, result)] = shrink_exec_report(report, [p], runner, base, env.tokenizer, ref, options, env.tolerance,
                                       budget_s, on_probe=on_probe)
    return result, {**result.to_json(), "prompt_text": result.prompt_text}, ""
