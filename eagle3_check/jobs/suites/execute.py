"""Running one case: build the request, force it, run it through the runner; `jobs.suites.judging`
judges what the run showed (the verdict, the audits, the case's expectations: its docstring lists them).

A `SuiteEnv` holds what cases need and nothing case-specific: a program factory (spec wish ->
program; the eager one builds and caches small programs, a fixed one returns its program),
a tokenizer, a reference (`greedy(ids, n, stop_ids)` for forcing and prompt picking,
`score(ids, tokens)` for the verdict; HF or self) and the prompt set.

Errors: an `Eagle3CheckError` raised while one case is set up or run (its K and options, its
prompt, its chunk plan, the self/HF reference run for it, its stops) fails that case alone, with
the error's one line, and the suite goes on. Errors about the whole run are raised where the
run's own inputs are used: the program factory (`env.program_for`: the user's fixture, target,
device, dtype, memory) and, for a runner binary, the binary and its command line; those are
wrapped in `about_the_run()` and end the suite as the error they are (the CLI's exit 2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from eagle3_check.errors import Eagle3CheckError, first_line
from eagle3_check.jobs.suites.judging import (
    CaseResult,
    CaseRun,
    judge_refusal,
    judge_run,
    verify_refused,
)
from eagle3_check.judge.self_ref import SelfReference, self_score
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.judge.verdict import FAIL
from eagle3_check.program.contract import Metadata, ProgramWrapper, SpeculatorProgram, read_metadata
from eagle3_check.runners.crash import crash_reason
from eagle3_check.runners.in_process import as_runner
from eagle3_check.runners.instrument import RecordingProgram
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions, stop_set
from eagle3_check.runners.profiles import declared
from eagle3_check.runners.result import PluginRunner
from eagle3_check.runners.rules import prefill_chunks
from eagle3_check.runners.watchdog import RequestTimeout, limit_flag, run_limited, with_limit
from eagle3_check.status import PASS, SKIP
from eagle3_check.suites.case import Case
from eagle3_check.suites.forcing import ForcedDraft, block_end, emitted_index
from eagle3_check.suites.request import (
    CaseSkip,
    StopPatch,
    apply_stops,
    pick_prompt,
)
from eagle3_check.suites.toy import LO, SPAN, ToyProgram
from eagle3_check.suites.turns import (
    REFUSED_K,
    profile_refuses,
    profile_skip,
    profile_turns,
    runtime_refusal,
)

SELF = "self"  # SuiteEnv reference: each program's own greedy decoding (judge/self_ref.py)
DEFAULT_MAX_NEW = 16  # suites keep requests short; cases that need more say so


class SuiteEnv:
    def __init__(
        self,
        program_for: Callable[[dict[str, int]], SpeculatorProgram],
        tokenizer,
        reference,
        prompts: list[str],
        tolerance: Tolerance,
        fixture: str | None = None,
    ):
        self.fixture = fixture  # the embedded fixture's name (None: a user's program)
        self.program_for = program_for
        self.tokenizer = tokenizer
        self.reference = reference  # an object with greedy(ids, n, stop_ids) and score(ids, tokens), or SELF
        self.prompts = prompts
        self.tolerance = tolerance
        self._refs: dict[tuple, Any] = {}
        self._toys: dict[tuple, ToyProgram] = {}  # Case.toy -> its toy program, built once
        self.one_program: SpeculatorProgram | None = None  # `fixed`: the one given program (no spec is built)

    @classmethod
    def eager(cls, fixture_name: str = "tiny-llama", device: str = "cpu", dtype: str = "float32",
              reference: str = "hf") -> SuiteEnv:
        """The embedded fixture on the eager backend; programs built per spec wish and cached, with
        graph-owned outputs (`EagerBackend(reuse_outputs=True)`: a stale output read fails on CPU).
        `reference`: "hf" (Transformers) or "self" (each program's own target methods)."""
        import torch

        from eagle3_check.fixtures.registry import load_fixture
        from eagle3_check.judge.hf import HFReference
        from eagle3_check.judge.tolerance import tolerance_for
        from eagle3_check.program.eager import EagerBackend
        from eagle3_check.tokenizer import Tokenizer

        fx = load_fixture(fixture_name)
        built: dict[tuple, SpeculatorProgram] = {}

        def program_for(spec: dict[str, int]) -> SpeculatorProgram:
            key = tuple(sorted(spec.items()))
            if key not in built:
                built[key] = EagerBackend.from_fixture(fx, device, dtype, reuse_outputs=True, **spec)
            return built[key]

        ref = HFReference(fx.target_dir, device, getattr(torch, dtype)) if reference == "hf" else SELF
        return cls(program_for, Tokenizer.load(fx.tokenizer_path), ref,
                   [p.text for p in fx.prompts()], tolerance_for(dtype), fixture=fx.name)

    @classmethod
    def fixed(cls, program: SpeculatorProgram, tokenizer, reference, prompts: list[str], tolerance: Tolerance,
              fixture: str | None = None) -> SuiteEnv:
        """One given program (e.g. a `.pte`): spec wishes are ignored; cases that cannot fit skip.

        `reference` is anything with `greedy(ids, n, stop_ids)` (the HF reference), or SELF: the
        program's own target methods, the fair reference for a quantized program (forcing needs
        the program's own greedy tokens; its margins are unknown, so no divergence is a tie)."""
        env = cls(lambda spec: program, tokenizer, reference, prompts, tolerance, fixture)
        env.one_program = program
        return env

    def greedy(self, ids: list[int], n: int, program: SpeculatorProgram):
        """The program's own greedy continuation of `ids`, at least n tokens where it can give them
        (it stops at max_seq_len); no stop set: the rules cut it.

        A case is set up on this trajectory (forced proposals, stop tokens, budgets), since it is
        what a correct runner on this program emits; the verdict then scores the run against the
        configured reference (`score`). Where the program and the HF reference differ by a
        numerical tie (bf16), forcing HF's tokens would make the program reject them and the
        case would test nothing; in fp32 the two trajectories are identical on our fixtures."""
        key = (id(program), tuple(ids))
        got = self._refs.get(key)
        if got is None or len(got.tokens) < n:
            got = SelfReference(program).greedy(list(ids), n, frozenset())
            self._refs[key] = got
        return got

    def score(self, ids: list[int], tokens: list[int], program: SpeculatorProgram, own: bool = False):
        """The reference's teacher-forced rows over `ids` + `tokens` (the verdict's input); `own`: the
        program's own target's instead (a `Case.toy` case: the toy has no HF twin)."""
        if self.reference == SELF or own:
            return self_score(program, list(ids), list(tokens))
        return self.reference.score(list(ids), list(tokens))

    def toy_program(self, case: Case) -> ToyProgram:
        """The toy program of a `Case.toy` case (suites/toy.py), its vocab the tokenizer's; CaseSkip where
        the tokenizer cannot name the ids the toy emits."""
        if self.tokenizer.vocab_size < LO + SPAN:
            raise CaseSkip(f"the toy program emits ids up to {LO + SPAN - 1}; this tokenizer names "
                           f"{self.tokenizer.vocab_size}")
        if case.toy not in self._toys:
            self._toys[case.toy] = ToyProgram(**dict(case.toy), vocab_size=self.tokenizer.vocab_size)
        return self._toys[case.toy]

    def filler_ids(self, length: int, bos_id: int, start: int = 0) -> list[int]:
        """Exactly `length` prompt ids: BOS (unless -1), then the prompt set's text ids, repeated;
        `start` rotates the prompt set (start 1: the second prompt's text first) for another candidate."""
        k = start % len(self.prompts)
        body = self.tokenizer.encode(" ".join(self.prompts[k:] + self.prompts[:k]))
        head = [] if bos_id == -1 else [bos_id]
        need = max(0, length - len(head))
        return (head + (body * (need // len(body) + 1))[:need])[:max(0, length)]


class _PatchedMetadata(ProgramWrapper):
    """The program with one metadata key removed, or its get_eos_ids patched (program-side forcing)."""

    def __init__(self, inner: SpeculatorProgram, drop: str | None = None, patch: StopPatch | None = None):
        super().__init__(inner)
        self.drop, self.patch = drop, patch

    def metadata(self) -> dict[str, Any]:
        md = {k: v for k, v in self.inner.metadata().items() if k != self.drop}
        return self.patch.metadata(md) if self.patch else md


def _resolve_k(case: Case, md: Metadata) -> int | None:
    """The K the case asks for (None: the program's default)."""
    if isinstance(case.k, tuple):
        end, off = case.k
        return md.k_range[0 if end == "lo" else 1] + off
    return case.k


def run_case(case: Case, env: SuiteEnv, runner: PluginRunner | None = None) -> CaseResult:
    """Runs one case through `runner` (the reference runner by default) and judges it."""
    t0 = time.perf_counter()
    result = _judge(case, env, runner)
    result.seconds = time.perf_counter() - t0
    return result


class WholeRun(Exception):
    """An `Eagle3CheckError` about the whole run met inside a case (`about_the_run`): `_judge`
    re-raises the error itself, so the suite ends with its one line instead of failing a case."""

    def __init__(self, error: Eagle3CheckError):
        super().__init__(str(error))
        self.error = error


@contextlib.contextmanager
def about_the_run():
    """Marks code that uses the run's own inputs (the program factory, a runner binary): an
    `Eagle3CheckError` raised there is about every case, so it ends the suite (`WholeRun`)."""
    try:
        yield
    except Eagle3CheckError as e:
        raise WholeRun(e) from e


def case_error(case: Case, e: Eagle3CheckError) -> CaseResult:
    """A case whose set-up or run raised a user-facing error: it fails with the error's one line
    (type and message, e.g. "OptionError: chunked prefill of L = 33, chunks [16, 8, 9] ...: the program
    refused the 8-token chunk, below its declared min prefill 9; ...")."""
    return CaseResult(case.name, FAIL, f"{type(e).__name__}: {first_line(e)}", {"error": type(e).__name__})


def _judge(case: Case, env: SuiteEnv, runner: PluginRunner | None) -> CaseResult:
    try:
        return _run(case, env, runner or ReferenceRunner())
    except CaseSkip as s:
        return CaseResult(case.name, SKIP, str(s))
    except WholeRun as w:  # the program factory refused the user's fixture, device, dtype, ...
        raise w.error from None
    except Eagle3CheckError as e:  # this case's prompt, chunk plan, reference run, ... or a contract
        return case_error(case, e)  # violation by the program (a finding): this case fails, the suite goes on
    except Exception as e:  # a crashing program or runner fails its case; the suite goes on
        return CaseResult(case.name, FAIL, crash_reason(e))


@dataclasses.dataclass
class CaseSetup:
    """What every way of running a case starts from (in-process or through a runner binary):
    the program it asks for, its metadata, K and the run options."""

    base: SpeculatorProgram
    md: Metadata
    k: int  # the case's K, or the program's get_chain_len
    options: RunOptions


def case_setup(case: Case, env: SuiteEnv) -> CaseSetup:
    """The case's program, metadata, K and options; CaseSkip where this run cannot take it."""
    if case.fixture and case.fixture != env.fixture:
        raise CaseSkip(f"a case for fixture {case.fixture} (this run: {env.fixture or 'a given program'})")
    if case.toy:  # a second program every run has (suites/toy.py), whatever program it was given
        base = env.toy_program(case)
    else:
        with about_the_run():  # the user's fixture/target, device, dtype and memory: the same for every case
            base = env.program_for(dict(case.spec))
    md = read_metadata(base.metadata())
    k_req = _resolve_k(case, md)
    lo, hi = md.k_range
    if k_req is not None and not lo <= k_req <= hi and case.expect.error is None:
        raise CaseSkip(f"K = {k_req} is outside this program's range [{lo}, {hi}]")
    opts = case.option_dict()
    opts.setdefault("max_new_tokens", DEFAULT_MAX_NEW)
    k = md.chain_len if k_req is None else k_req
    return CaseSetup(base, md, k, RunOptions(**opts, chain_len=k_req))


def _run(case: Case, env: SuiteEnv, runner: PluginRunner) -> CaseResult:
    setup = case_setup(case, env)
    base, md, k, options = setup.base, setup.md, setup.k, setup.options
    program: SpeculatorProgram = _PatchedMetadata(base, drop=case.drop_key) if case.drop_key else base
    prof, _ = declared(runner)  # the runner's rules (runners/profiles.py): an error case may be a run under them
    refused = profile_refuses(options, md, prof)  # runner-pr: a K other than get_chain_len, whatever the case
    if refused:
        return _run_error(dataclasses.replace(case, expect=REFUSED_K), env, program, options, md, k, runner,
                          note=refused)
    profile_skip(options, md, prof, "the runner's")
    turned = profile_turns(case, md, options.chain_len, prof)
    if case.expect.error and not turned:
        return _run_error(case, env, program, options, md, k, runner,
                          runtime=runtime_refusal(case, md, options.chain_len, prof))
    k = prof.chain_k(options.chain_len, md.chain_len) if turned else k
    options.chunked_prefill = options.chunked_prefill or prof.chunks  # that runner chunks every request

    accepts = [a if a is not None else -1 for a in case.forcing.resolve(k, 64)] if case.forcing else []
    if case.max_new_at:
        r, off = case.max_new_at
        options.max_new_tokens = block_end(accepts, r) + off
    stop_idx = [emitted_index(accepts, s.round, s.slot) for s in case.stop_at]
    base_stops = stop_set(env.tokenizer, md, options).ids
    prompt, ids, ref = pick_prompt(case, env, base, md, k, options, stop_idx, base_stops, accepts)
    options, patch = apply_stops(case, env.tokenizer, ref.tokens, stop_idx, options)
    # the plan the call audit expects (a chunk below min prefill included: the program decides, rules.prefill_chunk)
    chunks = prefill_chunks(len(ids), md.max_prefill, md.min_prefill, md.sliding_window) \
        if options.chunked_prefill else None
    tokenizer = patch.tokenizer(env.tokenizer)  # a variant whose EOS differs from the program's
    if patch.changes_program:
        program = _PatchedMetadata(base, patch=patch)
        md = read_metadata(program.metadata())
    inner = ForcedDraft(program, ids + ref.tokens, case.forcing, k, md.vocab_size or env.tokenizer.vocab_size) \
        if case.forcing else program
    obs = as_runner(runner).observe(inner, tokenizer, prompt, options, what=case.name)  # its calls recorded
    if obs.failure:  # any exception, or a run() that returns no RunResult: this case fails
        why = obs.failure
        return CaseResult(case.name, FAIL, why if why.startswith(("crashed", "contract")) else f"raised {why}",
                          {"L": len(ids), "K": k})
    return judge_run(env, CaseRun(case, base, md, k, options, prompt, ids, ref.tokens, stop_idx, tokenizer, chunks,
                                  turned, prof.name, obs))


def _run_error(case, env, program, options, md, k, runner, runtime: str | None = None,
               note: str | None = None) -> CaseResult:
    """Cases that must fail before any program method runs, with a clear one-line error. `runtime`
    (`turns.runtime_refusal`): the error may also be the program's refusal of the verify window at
    target_verify (the runtime's), after calls; `note`: why the profile must refuse (in the message)."""
    L = case.prompt.resolve_length(md, k)
    if L is not None and L < 1 and case.prompt.anchor is not None:  # e.g. min prefill 1, offset -1
        raise CaseSkip(f"{case.prompt.describe()} is L = {L} on this program: prefill-range/empty covers it")
    prompt = env.filler_ids(L, options.bos_id) if L is not None else (case.prompt.text or env.prompts[0])
    rec = RecordingProgram(program)
    inner, seconds = with_limit(runner)  # a hang here is a finding too, never the end of the suite
    try:
        run = run_limited(lambda prog: inner.run(prog, env.tokenizer, prompt, options), rec, seconds, case.name,
                          limit_flag(runner))
    except RequestTimeout as e:
        return CaseResult(case.name, FAIL, str(e), {"L": L, "K": k})
    except Eagle3CheckError as e:  # the error the case expects, or the program's refusal passed on
        return judge_refusal(case, e, rec, L, k, runtime, note)
    except Exception as e:  # noqa: BLE001 - the program's refusal of the window is the runtime's error
        by_program = verify_refused(rec) if runtime else None
        if not by_program:
            raise
        return CaseResult(case.name, PASS, f"{by_program}; {runtime}", {"L": L, "K": k, "error": first_line(e)})
    return CaseResult(case.name, FAIL, f"expected {case.expect.error}, but the run emitted "
                      f"{len(run.tokens)} tokens ({run.stop_reason})", {"L": L, "K": k})

