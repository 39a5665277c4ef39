"""`check --runner exec:...`: the prompt set through a runner binary, each request judged.

Per request: the harness derives the prompt ids, the stop set and the length rules itself,
runs the binary once through check's one request loop (`jobs.check.observe.observe_each`: the seam's
`observe`, its output parsed by `protocol`) and judges it
against the greedy reference (`judge`: by ids when the binary prints them, else by
bytes). A hang, a crash, an error exit or output off the protocol fails that request with
the reason and the end of stderr; the other requests still run.

Not folded into `prompt_set` (only the loop is shared): a binary shows bytes or printed ids, no RunResult
or call log, so its K and prompt checks (its profile's), its verdict (`judge.binary`) and its report's
keys (`ExecReport`) are its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from eagle3_check.errors import Eagle3CheckError, InputError, OptionError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.observe import observe_each
from eagle3_check.jobs.check.prompt_set import JudgedReport
from eagle3_check.jobs.check.twin_runs import Serial
from eagle3_check.judge.binary import ExecVerdict, Request, judge_observation
from eagle3_check.judge.budget import BinomialBudget, budget_json
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.program.contract import read_metadata
from eagle3_check.runners.binary.acceptance import held_to_ours
from eagle3_check.runners.binary.byte_pieces import BytePieces
from eagle3_check.runners.binary.protocol import ExecOutput
from eagle3_check.runners.binary.runner import (
    ExecRunner,
    ProcessRun,
    binary_options,
    program_data,
    program_file,
    runtime_noise,
)
from eagle3_check.runners.options import (
    RunOptions,
    check_options,
    check_tokenizer,
    prompt_ids,
    stop_set,
)
from eagle3_check.table import format_rows
from eagle3_check.tokenizer import Tokenizer


@dataclass
class ExecOutcome:
    prompt_id: str
    prompt_len: int
    verdict: ExecVerdict
    output: ExecOutput | None
    process: ProcessRun

    def to_json(self) -> dict:
        out = self.output
        return {
            "prompt_id": self.prompt_id, "L": self.prompt_len, "verdict": self.verdict.to_json(),
            "output": None if out is None else {
                "tokens": out.tokens, "rounds": out.rounds, "tau": out.tau, "k": out.k, "max_new": out.max_new,
                "text": out.text.decode("utf-8", "replace"), "ids": out.ids,
                "verify_ms": out.verify_ms, "draft_ms": out.draft_ms},
            "process": {"argv": self.process.argv, "returncode": self.process.returncode,
                        "seconds": round(self.process.seconds, 3), "stderr": self.process.stderr_tail()},
        }


@dataclass
class ExecReport(JudgedReport):  # counts, ties_allowed, over_budget, passed
    k: int
    outcomes: list[ExecOutcome] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    tie_budget: float | BinomialBudget = 0.0  # tie positions allowed (as `check`: judge/budget.py)
    COUNTS_IDENTICAL_POSITIONS = False  # an exec verdict counts judged, tie and failing positions only

    @property
    def tau(self) -> float:
        outs = [o.output for o in self.outcomes if o.output is not None]
        rounds = sum(o.rounds for o in outs)
        return sum(o.tokens - 1 for o in outs) / rounds if rounds else 0.0

    def to_json(self) -> dict:
        return {"passed": self.passed, "k": self.k, "tau": self.tau, "info": self.info, "counts": self.counts(),
                "tie_budget": {**budget_json(self.tie_budget), "ties_allowed": self.ties_allowed},
                "requests": [o.to_json() for o in self.outcomes]}


def byte_pieces_or_none(tokenizer: Tokenizer) -> BytePieces | None:
    """The tokenizer's byte pieces, or None when it is not byte-level (then only ids judge)."""
    try:
        return BytePieces.from_tokenizer_json(tokenizer.path)
    except InputError:
        return None


def reference_decode(reference, prompt_ids: list[int], max_seq_len: int) -> Callable[[list[int], int], list[int]]:
    """`decode(prefix, m)` for `recover_ids`: m greedy reference tokens after prompt + prefix (no
    stop set: the walk follows the bytes), fewer where the context ends; a reference that cannot
    take the longer prompt (its own one-line error) gives none, and the walk uses its rows alone."""
    def decode(prefix: list[int], m: int) -> list[int]:
        m = min(m, max_seq_len - len(prompt_ids) - len(prefix) - 1)
        if m <= 0:
            return []
        try:
            return list(reference.greedy(list(prompt_ids) + list(prefix), m, frozenset()).tokens)
        except Eagle3CheckError:
            return []
    return decode


def exec_k(runner: ExecRunner, options: RunOptions, md) -> int:
    """The K the binary runs for these options under its profile (the clamp of K at runtime), checked
    against the program's range: a K the binary cannot be asked for, or one the program cannot
    take after the clamp, is a one-line error."""
    prof = runner.profile
    if options.chain_len is not None and options.chain_len != md.chain_len and not prof.chain_flag:
        raise OptionError(f"chain length K = {options.chain_len} with the runner binary {runner.name} (profile "
                          f"{prof.describe()}: no --chain flag)", f"K = get_chain_len = {md.chain_len}",
                          "drop -k, or build the binary at #20345 or later")
    return prof.chain_k(options.chain_len, md.chain_len)


def exec_prompt_check(runner: ExecRunner, prompts: list[Prompt], requests: list[list[int]], md) -> None:
    """Every prompt's length against the binary's profile before any request (one line naming it)."""
    prof = runner.profile
    for p, ids in zip(prompts, requests):
        why = prof.prompt_error(len(ids), md.min_prefill, md.max_prefill, md.max_seq_len)
        if why:
            lo, hi = md.min_prefill, (md.max_seq_len - 1 if prof.chunks else md.max_prefill)
            raise OptionError(f"prompt '{p.id}': prompt length L = {len(ids)} ({why})",
                              f"L in [{lo}, {hi}] for the binary's profile {prof.name}",
                              "shorten or lengthen the prompt, or re-export with a wider range")


def run_exec_check(
    runner: ExecRunner,
    program,
    tokenizer: Tokenizer,
    reference,
    prompts: Iterable[Prompt],
    options: RunOptions,
    on_request: Callable[[ExecOutcome], None] | None = None,
    tolerance: Tolerance | None = None,
    tie_budget: float = 0.0,
) -> ExecReport:
    """Runs every prompt through the binary on `program`'s .pte and judges it. `reference` has
    `greedy(ids, n, stop_ids)` and `score(ids, tokens)` (HF or self); with `tolerance`, a binary
    that prints its ids is judged per position (ties within `tie_budget`), else exactly."""
    model, data = program_file(program), program_data(program)
    runner.check_data(data)  # a template with no place for the .ptd: refused before any request
    md = read_metadata(program.metadata())
    check_tokenizer(tokenizer, md)
    prof = runner.profile
    k = exec_k(runner, options, md)
    check_options(dataclasses.replace(options, chain_len=k), md, md.vocab_size or tokenizer.vocab_size)
    if options.chunked_prefill and not prof.chunks:  # the binary does not chunk: nothing chunked to judge
        raise OptionError(f"--chunked-prefill with the runner binary {runner.name} (profile {prof.describe()}, "
                          f"found: {runner.profile_how})", "a binary whose profile chunks (chunked-prefill, #20347)",
                          "drop --chunked-prefill, or pass --runner-profile chunked-prefill if the binary chunks")
    stops = stop_set(tokenizer, md, options)
    pieces = byte_pieces_or_none(tokenizer)
    prompts = list(prompts)
    requests = [prompt_ids(tokenizer, p.text, options) for p in prompts]
    exec_prompt_check(runner, prompts, requests, md)
    report = ExecReport(k=k, info={"runner": runner.name, "model": str(model), "judged_by": {},
                                   "profile": runner.profile_info(), "notes": []},
                        tie_budget=tie_budget if tolerance is not None else 0.0)
    chunked = 0

    def take(i: int, p: Prompt, obs, _seconds: float) -> None:  # the process's own time is in obs.process
        nonlocal chunked
        ids = requests[i]
        req = Request(len(ids), k, options.max_new_tokens, md.max_seq_len, stops.ids, options.chain_len)
        max_new = min(options.max_new_tokens, md.max_seq_len - len(ids))
        ref = reference.greedy(ids, max(max_new, 1), stops.ids)
        verdict, out = judge_observation(obs, ref.tokens, ref.margins, pieces, req,
                                         lambda toks, ids=ids: reference.score(ids, toks), tolerance,
                                         md.vocab_size or tokenizer.vocab_size,
                                         reference_decode(reference, ids, md.max_seq_len))
        held_to_ours(verdict, out, ref.tokens, program, tokenizer, p.text, binary_options(options, md), prof.name)
        chunked += len(prof.chunk_plan(len(ids), md.min_prefill, md.max_prefill, md.sliding_window)) > 1
        for note in runtime_noise(obs.process.stderr):
            if note not in report.info["notes"]:
                report.info["notes"].append(note)
        outcome = ExecOutcome(p.id, len(ids), verdict, out, obs.process)
        report.outcomes.append(outcome)
        mode = verdict.mode or "not judged"
        report.info["judged_by"][mode] = report.info["judged_by"].get(mode, 0) + 1
        if on_request:
            on_request(outcome)

    observe_each(Serial(program, runner, tokenizer, prompts, options), prompts, take)  # one at a time: check's loop
    if runner.protections:  # what held its processes in (runners/isolate/binary_sandbox.py)
        report.info["isolation"] = {"protections": runner.protections}
    if chunked:
        size = prof.chunk_size(md.max_prefill, md.sliding_window)
        report.info["notes"].append(
            f"the binary prefills {chunked} of {len(prompts)} prompts in chunks of {size} (profile {prof.name}: every "
            "prompt longer than the chunk); tokens, N, rounds and tau are judged, the call log (the chunks' prefill "
            "and draft seeding calls) cannot be observed from outside the process")
    return report


def format_exec_table(report: ExecReport) -> str:
    rows = [("prompt", "L", "tokens", "rounds", "tau", "judged", "exit", "verdict")]
    for o in report.outcomes:
        out, code = o.output, o.process.returncode
        rows.append((o.prompt_id, str(o.prompt_len), str(out.tokens) if out else "-", str(out.rounds) if out else "-",
                     f"{out.tau:.3f}" if out else "-", o.verdict.mode or "-",
                     "timeout" if code is None else str(code), o.verdict.message))
    lines = format_rows(rows)
    c = report.counts()
    modes = ", ".join(f"{m}: {n}" for m, n in sorted(report.info.get("judged_by", {}).items()))
    ties = (f", {c['tie']} tie ({c['tie_positions']} positions, budget {report.ties_allowed})"
            if c["tie"] or c["tie_positions"] else "")
    if "run_options" in report.info:  # runners/defaults.py
        lines += ["", report.info["run_options"]["summary"]]
    prof = report.info.get("profile")
    if prof:
        lines += ["", f"runner profile {prof['name']} ({prof['pr']}, {prof['commit']}): {prof['found']}"]
    lines += [f"note: {n}" for n in report.info.get("notes", [])]
    from eagle3_check.runners.protections import protections_line

    lines += [p for p in [protections_line(report.info.get("isolation"))] if p]  # what held the binary in
    lines += ["", f"runner {report.info.get('runner')}   K = {report.k}   tau = {report.tau:.2f}   judged by {modes}",
              f"verdict: {'PASS' if report.passed else 'FAIL'} "
              f"({c['identical']}/{c['requests']} requests identical to the reference{ties}, {c['fail']} fail)"]
    return "\n".join(lines)
