"""`check --runner exec:...`: the prompt set through a runner binary, each request judged.

Per request: the harness derives the prompt ids, the stop set and the length rules itself,
runs the binary once (`runner`), parses its output (`protocol`) and judges it
against the greedy reference (`judge`: by ids when the binary prints them, else by
bytes). A hang, a crash, an error exit or output off the protocol fails that request with
the reason and the end of stderr; the other requests still run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from eagle3_check.binary.byte_pieces import BytePieces
from eagle3_check.binary.judge import FAIL, ExecVerdict, Request, judge
from eagle3_check.binary.protocol import ExecOutput, OutputError, parse_output
from eagle3_check.binary.runner import (
    ExecRunner,
    ProcessRun,
    binary_options,
    program_data,
    program_file,
)
from eagle3_check.errors import InputError, OptionError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.gating.check import JudgedReport, request_ids
from eagle3_check.program.contract import read_metadata
from eagle3_check.reference.hf import Scores
from eagle3_check.reference.tolerance import Tolerance
from eagle3_check.run.options import (
    RunOptions,
    check_options,
    check_tokenizer,
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
    tie_budget: float = 0.0  # tie positions allowed, a share of judged positions (as `check`)
    COUNTS_IDENTICAL_POSITIONS = False  # an exec verdict counts judged, tie and failing positions only

    @property
    def tau(self) -> float:
        outs = [o.output for o in self.outcomes if o.output is not None]
        rounds = sum(o.rounds for o in outs)
        return sum(o.tokens - 1 for o in outs) / rounds if rounds else 0.0

    def to_json(self) -> dict:
        return {"passed": self.passed, "k": self.k, "tau": self.tau, "info": self.info, "counts": self.counts(),
                "tie_budget": {"share": self.tie_budget, "ties_allowed": self.ties_allowed},
                "requests": [o.to_json() for o in self.outcomes]}


def byte_pieces_or_none(tokenizer: Tokenizer) -> BytePieces | None:
    """The tokenizer's byte pieces, or None when it is not byte-level (then only ids judge)."""
    try:
        return BytePieces.from_tokenizer_json(tokenizer.path)
    except InputError:
        return None


def judge_process(proc: ProcessRun, timeout: float, ref: list[int], margins: list[float],
                  pieces: BytePieces | None, req: Request, score: Callable[[list[int]], Scores] | None = None,
                  tolerance: Tolerance | None = None, vocab_size: int | None = None,
                  ) -> tuple[ExecVerdict, ExecOutput | None]:
    """The verdict of one process: its failure, an output off the protocol, or `judge`. With
    `score` (the reference's teacher-forced scores of the request's prompt + given tokens) and
    `tolerance`, a binary that prints its ids is judged per position, ties included. An `[ids]` id
    outside the vocabulary (`vocab_size`, else the byte pieces') fails the request, never the harness."""
    why = proc.failure(timeout)
    if why:
        return ExecVerdict(FAIL, why, fails=1), None
    try:
        out = parse_output(proc.stdout, proc.stderr)
    except OutputError as e:
        return ExecVerdict(FAIL, f"output: {e}", fails=1), None
    vocab = vocab_size or (max(pieces.pieces) + 1 if pieces is not None and pieces.pieces else None)
    bad = next((i for i, t in enumerate(out.ids or ()) if vocab and not 0 <= t < vocab), None)
    if bad is not None:
        return ExecVerdict(FAIL, f"output: [ids] id {out.ids[bad]} at index {bad} is outside the vocabulary "
                           f"(ids 0..{vocab - 1}); expected the ids the binary emitted", fails=1), None
    scores = score(list(out.ids)) if score is not None and tolerance is not None and out.ids is not None else None
    return judge(out, ref, margins, pieces, req, scores, tolerance), out


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
    k = check_options(options, md, md.vocab_size or tokenizer.vocab_size)
    if options.chunked_prefill:  # a binary has no such flag: judging it as chunked would be a guess
        raise OptionError("--chunked-prefill with an exec runner", "a runner the harness can pass the option to",
                          "drop --chunked-prefill (the binary prefills on its own terms)")
    stops = stop_set(tokenizer, md, options)
    pieces = byte_pieces_or_none(tokenizer)
    prompts = list(prompts)
    requests = request_ids(tokenizer, prompts, options, md)
    report = ExecReport(k=k, info={"runner": runner.name, "model": str(model), "judged_by": {}},
                        tie_budget=tie_budget if tolerance is not None else 0.0)
    for p, ids in zip(prompts, requests):
        req = Request(len(ids), k, options.max_new_tokens, md.max_seq_len, stops.ids)
        max_new = min(options.max_new_tokens, md.max_seq_len - len(ids))
        ref = reference.greedy(ids, max(max_new, 1), stops.ids)
        proc = runner.execute(model, tokenizer.path, p.text, binary_options(options, md), data)
        verdict, out = judge_process(proc, runner.timeout, ref.tokens, ref.margins, pieces, req,
                                     lambda toks, ids=ids: reference.score(ids, toks), tolerance,
                                     md.vocab_size or tokenizer.vocab_size)
        outcome = ExecOutcome(p.id, len(ids), verdict, out, proc)
        report.outcomes.append(outcome)
        mode = verdict.mode or "not judged"
        report.info["judged_by"][mode] = report.info["judged_by"].get(mode, 0) + 1
        if on_request:
            on_request(outcome)
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
    if "run_options" in report.info:  # run/defaults.py
        lines += ["", report.info["run_options"]["summary"]]
    lines += ["", f"runner {report.info.get('runner')}   K = {report.k}   tau = {report.tau:.2f}   judged by {modes}",
              f"verdict: {'PASS' if report.passed else 'FAIL'} "
              f"({c['identical']}/{c['requests']} requests identical to the reference{ties}, {c['fail']} fail)"]
    return "\n".join(lines)
