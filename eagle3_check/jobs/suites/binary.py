"""`check --suite NAME --runner exec:...`: the edge cases a runner binary can take.

A binary runs a `.pte` file: the harness cannot wrap its program. Cases that need forced
draft proposals to exist at all (a stop or max new tokens placed inside a forced block) or
that patch the program (extra `get_eos_ids`) skip, with the reason. Cases whose forcing only
shapes the acceptance run unforced (their L, K and budget boundaries are kept; the forced
aim is reported as not observed). Metadata cases run on a copy of the `.pte` with the key
dropped (`pte_edit`); a K other than get_chain_len is asked of the runner-PR binary too (`--chain=K`, a
flag it does not have): it must refuse it with an error exit, never run get_chain_len. Each is judged like `check` (`judge.binary`); error cases pass on a
clean error exit (a status >= 1, no summary line) whose stderr names what the case needs.
Expectations a binary cannot show (draft calls, run notes) are listed as not observed.

Not folded into `execute` and `judging` (the loop is `report.run_suite`'s): a binary runs its .pte unforced and takes
text, so a case's setup (unforced positions, metadata copies, text prompts, a K to refuse) and its verdict
(`judge.binary`, held to our runner's rounds and tau) are its own.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.jobs.check.binary import byte_pieces_or_none
from eagle3_check.jobs.suites.execute import (
    SKIP,
    SuiteEnv,
    WholeRun,
    about_the_run,
    case_error,
    case_setup,
)
from eagle3_check.jobs.suites.judging import CaseResult
from eagle3_check.jobs.suites.report import SuiteReport, run_suite
from eagle3_check.judge.binary import FAIL, PASS, TIE, Request, judge_observation
from eagle3_check.runners.binary.acceptance import held_to_ours
from eagle3_check.runners.binary.protocol import OutputError, parse_output
from eagle3_check.runners.binary.runner import (
    ExecRunner,
    binary_options,
    last_error_line,
    observed,
    program_data,
    program_file,
    runtime_noise,
)
from eagle3_check.runners.options import RunOptions, prompt_ids, stop_set
from eagle3_check.runners.seam import Capabilities
from eagle3_check.suites.case import Case
from eagle3_check.suites.forcing import block_end, emitted_index
from eagle3_check.suites.request import CaseSkip, apply_stops, pick_prompt
from eagle3_check.suites.turns import REFUSED_K, profile_turns

BINARY_VIAS = ("stop_ids", "eos_id", "stop_token", "stop_string_multi")


def skip_reason(case: Case, caps: Capabilities) -> str | None:
    """Why a runner with these capabilities (runners/seam.py) cannot take this case at all (None: it can,
    maybe unforced): one that runs its own program file cannot run the toy program, one the harness
    cannot force cannot be given a patched program or tokenizer."""
    if case.toy and caps.program_file:
        return "runs on the toy program (suites/toy.py), which has no .pte a runner binary could load"
    for st in case.stop_at if not caps.forced_acceptance else ():
        if st.via not in BINARY_VIAS:
            return (f"needs the program's get_eos_ids or the tokenizer's EOS patched (stop via {st.via}): "
                    "a binary's .pte and tokenizer cannot be patched")
    return None


def _unforced_positions(case: Case, k: int) -> tuple[int | None, list[int]]:
    """(max new tokens, stop indices) the case places through its forcing pattern, as plain
    numbers: the binary runs unforced, so the boundary is kept and the forced aim is not.
    Example: forcing (K=4, then 0), stop at round 2 slot 0 -> emitted index 1 + 5 + 0 = 6."""
    accepts = [a if a is not None else -1 for a in case.forcing.resolve(k, 64)] if case.forcing else []
    needed = [case.max_new_at[0]] if case.max_new_at else []  # rounds whose a the positions depend on
    needed += [st.round - 1 for st in case.stop_at if st.round]
    if any(n > 0 and (len(accepts) < n or min(accepts[:n]) < 0) for n in needed):
        raise CaseSkip("places a stop or the budget after rounds whose acceptance only forcing fixes")
    max_new = block_end(accepts, case.max_new_at[0]) + case.max_new_at[1] if case.max_new_at else None
    return max_new, [emitted_index(accepts, st.round, st.slot) for st in case.stop_at]


def run_exec_suite(name: str, cases: list[Case], env: SuiteEnv, runner: ExecRunner,
                   on_case: Callable[[CaseResult], None] | None = None) -> SuiteReport:
    """`report.run_suite`'s loop, each case on the program's file (`run_exec_case`); the .pte copies a
    metadata case needs live in one temporary directory for the suite."""
    runner.check_data(program_data(env.program_for({})))  # before any case: a template with no place for the .ptd
    with tempfile.TemporaryDirectory(prefix="eagle3-exec-") as tmp:
        return run_suite(name, cases, env, runner, on_case, run_one=functools.partial(run_exec_case, tmp=Path(tmp)))


def run_exec_case(case: Case, env: SuiteEnv, runner: ExecRunner, tmp: Path) -> CaseResult:
    """One case through the binary, with its wall time (skips included), as `execute.run_case`."""
    t0 = time.perf_counter()
    result = _judge(case, env, runner, tmp)
    result.seconds = time.perf_counter() - t0
    return result


def _judge(case: Case, env: SuiteEnv, runner: ExecRunner, tmp: Path) -> CaseResult:
    why = skip_reason(case, runner.capabilities)
    if why:
        return CaseResult(case.name, SKIP, why)
    try:
        return _run(case, env, runner, tmp)
    except CaseSkip as s:
        return CaseResult(case.name, SKIP, str(s))
    except WholeRun as w:  # the program file, the binary or its command line: every case would hit it
        raise w.error from None
    except Eagle3CheckError as e:  # this case's prompt, reference run, metadata copy: this case fails
        return case_error(case, e)


def _run(case: Case, env: SuiteEnv, runner: ExecRunner, tmp: Path) -> CaseResult:
    setup = case_setup(case, env)
    base, md, k, options = setup.base, setup.md, setup.k, setup.options
    with about_the_run():
        model = program_file(base)
    prof = runner.profile
    if options.chunked_prefill and not prof.chunks:
        raise CaseSkip(f"chunked prefill: the binary's profile {prof.name} ({prof.pr}) does not chunk")
    if binary_options(options, md).chain_len is not None and not runner.supports_chain():
        if runner.command.templated and not any("{chain}" in a for a in runner.command.argv):
            raise CaseSkip(f"needs K = {k} (not the program's default {md.chain_len}), the binary has no --chain flag "
                           f"(profile {prof.name}) and its command template no {{chain}} to ask it")
        # asked anyway (--chain=K): the runner-PR binary must refuse it (gflags: unknown flag), never run get_chain_len
        return _run_error(dataclasses.replace(case, expect=REFUSED_K, drop_key=None), env, runner,
                          (model, program_data(base)), options, md, k)
    if case.drop_key:
        model = _without(model, case.drop_key, tmp)
    k_asked = options.chain_len
    turned = profile_turns(case, md, k_asked, prof)
    if case.expect.error and not turned:
        return _run_error(case, env, runner, (model, program_data(base)), options, md, k)
    if turned:  # the profile runs what the case expects to be an error: judged as a run of that K / those chunks
        k = prof.chain_k(k_asked, md.chain_len)
    # a binary that chunks takes every L up to max_seq_len - 1 (the context cases on a default export), as in process
    options.chunked_prefill = options.chunked_prefill or prof.chunks
    max_new, stop_idx = _unforced_positions(case, k)
    if max_new is not None:
        options.max_new_tokens = max_new
    base_stops = stop_set(env.tokenizer, md, options).ids
    prompt, ids, ref = pick_prompt(case, env, base, md, k, options, stop_idx, base_stops, [])
    options, _ = apply_stops(case, env.tokenizer, ref.tokens, stop_idx, options)
    text, options = _as_text(prompt, ids, options, env.tokenizer)
    stops = stop_set(env.tokenizer, md, options).ids
    req = Request(len(ids), k, options.max_new_tokens, md.max_seq_len, stops, k_asked)
    with about_the_run():  # the binary cannot start, its command line has no place for an input
        proc = runner.execute(model, env.tokenizer.path, text, binary_options(options, md), program_data(base))
    verdict, out = judge_observation(observed(proc, runner.timeout), ref.tokens, ref.margins,
                                     byte_pieces_or_none(env.tokenizer), req, lambda toks: env.score(ids, toks, base),
                                     env.tolerance, decode=_decode(env, ids, base, md.max_seq_len))
    # its R and tau are our runner's on the same program and options (a binary runs unforced, and so does ours here)
    held_to_ours(verdict, out, ref.tokens, base, env.tokenizer, text, binary_options(options, md), prof.name)
    plan = prof.chunk_plan(len(ids), md.min_prefill, md.max_prefill, md.sliding_window)
    details = {"L": len(ids), "K": k, "judged_by": verdict.mode, "returncode": proc.returncode,
               "profile": prof.name, "stderr": proc.stderr_tail()[-800:]}
    notes = runtime_noise(proc.stderr) + ([turned] if turned else [])
    if len(plan) > 1:
        details["chunks"] = plan
        notes.append(f"the binary prefills in chunks {plan}: the call log is not observable from outside the process")
    if notes:
        details["notes"] = notes
    if out is not None:
        details.update(tokens=out.tokens, rounds=out.rounds, stop=(verdict.expected or {}).get(out.tokens))
    if verdict.judged:  # judged positions, by outcome (the gate's tie budget is a share of them)
        details.update(identical=verdict.judged - verdict.ties - verdict.fails, ties=verdict.ties, fails=verdict.fails)
    problems = [] if verdict.status == PASS else [verdict.message]
    ex = case.expect
    if out is not None and verdict.status == PASS and not case.forcing:  # forced aims need the forcing
        if ex.reason and verdict.expected.get(out.tokens) != ex.reason:
            problems.append(f"case aims at stop '{ex.reason}' but the rules give "
                            f"'{verdict.expected.get(out.tokens)}' (case setup)")
        if ex.rounds is not None and out.rounds != ex.rounds:
            problems.append(f"{out.rounds} rounds, expected {ex.rounds}")
    unseen = [what for what, wanted in (("draft calls", ex.draft_calls is not None), ("run notes", ex.note),
                                        ("the forced acceptance (run unforced)", case.forcing)) if wanted]
    if unseen:
        details["not_observed"] = unseen
    if turned:
        verdict.message = f"{verdict.message} ({turned})"
    if verdict.status == TIE:
        return CaseResult(case.name, TIE, verdict.message, details)
    if problems:
        return CaseResult(case.name, FAIL, "; ".join(problems), details)
    return CaseResult(case.name, PASS, verdict.message + (f" (not observed: {', '.join(unseen)})" if unseen else ""),
                      details)


def _decode(env: SuiteEnv, ids: list[int], base, max_seq_len: int):
    """`decode(prefix, m)` for recovering a text-only binary's ids: the program's own greedy tokens
    after prompt + prefix (a hypothesis only: the candidates come from the reference's rows)."""
    def decode(prefix: list[int], m: int) -> list[int]:
        m = min(m, max_seq_len - len(ids) - len(prefix) - 1)
        if m <= 0:
            return []
        try:
            return list(env.greedy(list(ids) + list(prefix), m, base).tokens)[:m]
        except Eagle3CheckError:
            return []
    return decode


def _without(model: Path, key: str, tmp: Path) -> Path:
    """A copy of the .pte without metadata `key` (made once per key)."""
    from eagle3_check.program.pte_edit import omit_metadata

    dst = tmp / f"{model.stem}-no-{key}.pte"
    return dst if dst.is_file() else omit_metadata(model, dst, [key])


def _as_text(prompt, ids: list[int], options: RunOptions, tokenizer) -> tuple[str, RunOptions]:
    """A binary takes text: exact-L id prompts go as raw text that must encode back to the ids."""
    if not isinstance(prompt, list):
        return prompt, options
    raw = dataclasses.replace(options, raw=True)
    body = ids if options.bos_id == -1 else ids[1:]
    text = tokenizer.decode(body)
    if prompt_ids(tokenizer, text, raw) != ids:
        raise CaseSkip(f"the case's {len(ids)} prompt ids do not survive decode/encode, and a binary takes text")
    return text, raw


def _run_error(case, env, runner, files, options, md, k) -> CaseResult:
    """Cases that must end in a clean error: a status >= 1 and no summary line. `files`: (the .pte, its
    .ptd or None)."""
    L = case.prompt.resolve_length(md, k)
    if L is not None and L < 1 and case.prompt.anchor is not None:
        raise CaseSkip(f"{case.prompt.describe()} is L = {L} on this program: prefill-range/empty covers it")
    if L is not None:
        text, options = _as_text(env.filler_ids(L, options.bos_id), env.filler_ids(L, options.bos_id), options,
                                 env.tokenizer)
    else:
        text = case.prompt.text or env.prompts[0]
    with about_the_run():  # the binary cannot start, its command line has no place for an input
        proc = runner.execute(files[0], env.tokenizer.path, text, binary_options(options, md), files[1])
    details = {"L": L, "K": k, "returncode": proc.returncode, "stderr": proc.stderr_tail()[-800:]}
    last = last_error_line(proc.stderr)
    if proc.timed_out or proc.returncode < 0:
        return CaseResult(case.name, FAIL, f"expected a clean error exit: {proc.failure(runner.timeout)}", details)
    if proc.returncode == 0:
        try:
            out = parse_output(proc.stdout, proc.stderr)
            said = f"emitted {out.tokens} tokens"
        except (OutputError, Eagle3CheckError) as e:
            said = f"exited 0 ({e})"
        return CaseResult(case.name, FAIL, f"expected {case.expect.error} (an error exit), but the binary {said}",
                          details)
    missing = [m for m in case.expect.mentions if case.drop_key and m == case.drop_key and m not in proc.stderr_tail()]
    if missing:
        return CaseResult(case.name, FAIL, f"error exit {proc.returncode}, but stderr does not name "
                          f"{', '.join(missing)}: {last}", details)
    return CaseResult(case.name, PASS, f"error exit {proc.returncode}: {last}", details)
