"""Kill probes: the cases each runner (reference or mutant) is put through.

A probe takes a runner and returns None when the runner behaves, or a one-line reason.
Toy probes use `StrictToy`: the toy target (exact greedy chain, so every expectation is
derived, never hard-coded) with a draft that is right only when fed the feature row
that belongs to its position, so any feature or position plumbing bug shows up as lost
acceptance. The acceptance the toy must yield is `toy_accepted` (from `wrong_at`);
the length is `rules.expected_length`. The `check` probe runs the real eager fixture
through `run_check`, exactly as `eagle3-check check --runner` does; one `suite:NAME`
probe per edge suite runs its cases (`check --suite NAME`) up to the first failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from eagle3_check.errors import Eagle3CheckError, MetadataError, OptionError
from eagle3_check.program.contract import REQUIRED_KEYS, read_metadata
from eagle3_check.program.owned import OutputBuffers
from eagle3_check.run.options import RunOptions, prompt_ids, stop_set
from eagle3_check.run.rules import expected_length, prefill_chunks
from eagle3_check.suites import toy
from eagle3_check.suites.instrument import RecordingProgram, call_problems

PROMPT = list(range(300, 310))  # L = 10 raw ids; greedy chain below repeats every 12 tokens


class StrictToy(toy.ToyProgram):
    """ToyProgram whose draft proposes wrong when its feature row is not the right one.

    Feature rows are `[position, token]` (target) or `[position, -token]` (g). At draft
    position p the contract feeds the target feature of the token at p, or g from the
    draft step at p - 1; anything else (a row of another position) spoils the proposal."""

    def __init__(self, eos_ids: tuple[int, ...] = (), drop: tuple[str, ...] = (), **kw):
        super().__init__(**kw)
        if eos_ids:
            self._md["get_eos_ids"] = list(eos_ids)
        self.buffers = OutputBuffers(self._md["get_max_seq_len"])  # graph-owned outputs (program/owned.py)
        for key in drop:
            del self._md[key]

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, 2] (graph-owned)
        return self.buffers.own("prefill", *super().prefill(tokens, positions))

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, 2] (graph-owned)
        return self.buffers.own("target_verify", *super().target_verify(tokens, positions))

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, 2], [T] -> [1, T], [1, T, 2]
        if feature.shape[:2] != tokens.shape:
            raise ValueError(f"draft_decode: feature {list(feature.shape)} for tokens {list(tokens.shape)}")
        ids, g = super().draft_decode(tokens, feature, positions)
        rows = feature[0]  # [T, 2]
        want = torch.where(rows[:, 1] < 0, positions - 1, positions).float()
        return self.buffers.own("draft_decode", ids + (rows[:, 0] != want).long()[None], g)


def toy_accepted(prompt_len: int, k: int, wrong_at: set[int], rounds: int = 64) -> list[int]:
    """a per round for the toy: proposal j of the round anchored at p is for position p + 1 + j."""
    out, pos = [], prompt_len
    for _ in range(rounds):
        a = next((j for j in range(k) if pos + 1 + j in wrong_at), k)
        out.append(a)
        pos += a + 1
    return out


def raw_options(**kw) -> RunOptions:
    base = dict(stop_ids=(), stop_token=None, eos_id=None, max_new_tokens=32, chain_len=4)
    return RunOptions(**{**base, **kw})


@dataclass
class ToyCase:
    """One toy request and what DESIGN §2 says must come out of it."""

    program: dict = field(default_factory=dict)  # StrictToy kwargs
    prompt: list[int] | str = field(default_factory=lambda: list(PROMPT))
    options: dict = field(default_factory=dict)  # RunOptions overrides on raw_options
    raises: type[Eagle3CheckError] | None = None
    tokenizer_eos: tuple[int, ...] | None = None  # a tokenizer variant with these EOS ids

    def judge(self, runner, tokenizer) -> str | None:
        if self.tokenizer_eos is not None:
            tokenizer = tokenizer.with_eos(self.tokenizer_eos)
        program = RecordingProgram(StrictToy(**self.program))
        opts = raw_options(**self.options)
        try:
            result = runner.run(program, tokenizer, self.prompt, opts)
        except Eagle3CheckError as e:
            if self.raises and isinstance(e, self.raises):
                return None
            return f"raised {type(e).__name__}: {e}"
        if self.raises:
            return f"returned {len(result.tokens)} tokens instead of raising {self.raises.__name__}"
        md = read_metadata(program.metadata())
        want_ids = self.prompt if isinstance(self.prompt, list) else prompt_ids(tokenizer, self.prompt, opts)
        if result.prompt_ids != want_ids:
            return f"prompt ids {result.prompt_ids[:4]}... (L = {len(result.prompt_ids)}), want L = {len(want_ids)}"
        k = opts.chain_len or md.chain_len
        L = len(want_ids)
        oracle = toy_accepted(L, k, set(self.program.get("wrong_at", ())))
        reference = toy.greedy(want_ids, md.max_seq_len)
        stops = stop_set(tokenizer, md, opts).ids
        exp = expected_length(reference, stops, opts.max_new_tokens, L, k, md.max_seq_len, oracle)
        rounds, emitted = 0, 1
        while emitted < exp.length:
            emitted += oracle[rounds] + 1
            rounds += 1
        checks = [
            ("tokens", result.tokens, reference[: exp.length]),
            ("accepted", result.accepted, oracle[:rounds]),
            ("stop reason", result.stop_reason, exp.reason),
            ("tau", result.tau, (exp.length - 1) / rounds if rounds else 0.0),
            ("max_new", result.max_new, min(opts.max_new_tokens, md.max_seq_len - L)),
            ("text", result.text, tokenizer.decode(list(result.tokens))),
        ]
        for what, got, want in checks:
            if got != want:
                return f"{what} {_short(got)}, want {_short(want)}"
        if program.max_position() >= md.max_seq_len:
            return f"wrote KV position {program.max_position()} >= max_seq_len {md.max_seq_len}"
        chunks = prefill_chunks(L, md.max_prefill, md.min_prefill, md.sliding_window) if opts.chunked_prefill else None
        problems = call_problems(program, result, md.max_seq_len, chunks)  # e.g. a seed fed stale features
        return f"call log: {problems[0]}" if problems else None


def _short(v) -> str:
    return repr(v) if not isinstance(v, list) or len(v) <= 8 else f"{v[:8]!r}... ({len(v)})"


def _first_time(tokens: list[int], i: int) -> int:
    """The first index >= i whose token did not occur before it."""
    return next(j for j in range(i, len(tokens)) if tokens[j] not in tokens[:j])


def multi_token_stop_string(tokenizer, tokens: list[int], start: int) -> str:
    """A string encoding to >= 2 tokens whose first token is tokens[j] for some j >= start."""
    for j in range(start, len(tokens)):
        s = tokenizer.decode([tokens[j]]) + "<turn|>"
        enc = tokenizer.encode(s)
        if len(enc) >= 2 and enc[0] == tokens[j] and tokens[j] not in tokens[:j]:
            return s
    raise RuntimeError("no multi-token stop string found for the toy chain")


def one_token_string_not_a_key(tokenizer, tokens: list[int], start: int) -> tuple[int, str]:
    """(j, s): s encodes to exactly [tokens[j]] (its first time, j >= start) but is no vocabulary key."""
    for j in range(start, len(tokens)):
        s = tokenizer.decode([tokens[j]])
        if tokenizer.encode(s) == [tokens[j]] and tokenizer.token_to_id(s) is None and tokens[j] not in tokens[:j]:
            return j, s
    raise RuntimeError("no one-token stop string that is no vocabulary key in the toy chain")


def _programs_in_sequence(runner, ctx: Context) -> str | None:
    """One runner instance, two requests: a small program and K = 1, then the default toy with K = 7
    (state sized by the first request must not survive)."""
    first = ToyCase(program=dict(max_seq_len=24, max_prefill=12), options=dict(chain_len=1, max_new_tokens=6))
    second = ToyCase(options=dict(chain_len=7, max_new_tokens=30))
    for n, case in enumerate((first, second, first), start=1):
        problem = case.judge(runner, ctx.tokenizer)
        if problem:
            return f"request {n} of the sequence: {problem}"
    return None


@dataclass
class Probe:
    name: str
    what: str
    fn: Callable[[object, Context], str | None]
    group: str = "toy"  # toy (our kill cases) | check (the prompt set) | suite (the edge suites)


class Context:
    """What probes share: the fixture tokenizer; the eager program and HF reference, loaded once.

    `dtype` / `device` are those of the eager program and the HF reference (the toy probes
    always run on CPU). `graphs` wraps the eager programs (check and the suites) in
    `cuda_graph.GraphedProgram` ("emulate" on CPU, "cuda" on a GPU; "off": plain):
    the device placement runs over them, so graph-owned outputs are exercised.
    `with_graphs` gives a sibling context sharing the fixture, tokenizer and references."""

    def __init__(self, check_prompts: int = 2, check_max_new: int = 12, dtype: str = "float32",
                 device: str = "cpu", graphs: str = "off", _shared: dict | None = None,
                 fixture_name: str | None = None):
        self.check_prompts = check_prompts
        self.check_max_new = check_max_new
        self.dtype, self.device, self.graphs = dtype, device, graphs
        self.fixture_name = fixture_name  # None: the default embedded fixture
        self._shared = {} if _shared is None else _shared  # cached by (what, graphs)

    def with_graphs(self, graphs: str) -> Context:
        return Context(self.check_prompts, self.check_max_new, self.dtype, self.device, graphs, self._shared,
                       self.fixture_name)

    def _cached(self, what: str, make: Callable[[], object], per_graphs: bool = False):
        key = (what, self.graphs if per_graphs else None)
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def _graphed(self, program):
        from eagle3_check.program.cuda_graph import GraphedProgram

        return program if self.graphs == "off" else GraphedProgram(program, self.graphs)

    @property
    def fixture(self):
        from eagle3_check.fixtures.registry import load_fixture

        return self._cached("fixture", lambda: load_fixture(self.fixture_name) if self.fixture_name else load_fixture())

    @property
    def tokenizer(self):
        from eagle3_check.tokenizer import Tokenizer

        return self._cached("tokenizer", lambda: Tokenizer.load(self.fixture.tokenizer_path))

    @property
    def tolerance(self):
        from eagle3_check.reference.tolerance import tolerance_for

        return tolerance_for(self.dtype)

    @property
    def program(self):
        from eagle3_check.program.eager import EagerBackend

        plain = self._cached("program", lambda: EagerBackend.from_fixture(self.fixture, self.device, self.dtype,
                                                                            reuse_outputs=True))
        return self._cached("program", lambda: self._graphed(plain), per_graphs=True)

    @property
    def suite_env(self):
        from eagle3_check.suites.execute import SuiteEnv

        plain = self._cached("suite_env", lambda: SuiteEnv.eager(self.fixture.name, self.device, self.dtype))
        return self._cached("suite_env", lambda: self._graphed_env(plain), per_graphs=True)

    def _graphed_env(self, plain):
        """`plain` with each spec's program graphed; the references (and their memo) shared."""
        if self.graphs == "off":
            return plain
        built: dict = {}

        def program_for(spec: dict[str, int]):
            key = tuple(sorted(spec.items()))
            if key not in built:
                built[key] = self._graphed(plain.program_for(spec))
            return built[key]

        env = type(plain)(program_for, plain.tokenizer, plain.reference, plain.prompts, plain.tolerance,
                          fixture=plain.fixture)
        if hasattr(plain, "_refs"):
            env._refs = plain._refs  # the HF reference's memo: it does not depend on the program
        return env

    @property
    def reference(self):
        import torch

        from eagle3_check.reference.hf import HFReference

        return self._cached("reference", lambda: CachedReference(
            HFReference(self.fixture.target_dir, self.device, getattr(torch, self.dtype))))


class CachedReference:
    """HFReference.greedy memoized on (prompt ids, max_new, stops): one decode for all runners."""

    def __init__(self, inner):
        self.inner = inner
        self.memo: dict = {}

    def greedy(self, prompt_ids, max_new, stop_ids=frozenset()):
        key = (tuple(prompt_ids), max_new, frozenset(stop_ids))
        if key not in self.memo:
            self.memo[key] = self.inner.greedy(prompt_ids, max_new, stop_ids)
        return self.memo[key]

    def score(self, prompt_ids, tokens):
        key = ("score", tuple(prompt_ids), tuple(tokens))
        if key not in self.memo:
            self.memo[key] = self.inner.score(prompt_ids, tokens)
        return self.memo[key]


def _toy(case_fn: Callable[[list[int], Context], ToyCase]) -> Callable:
    def fn(runner, ctx: Context) -> str | None:
        return case_fn(toy.greedy(PROMPT, 64), ctx).judge(runner, ctx.tokenizer)

    return fn


def _missing_metadata(runner, ctx: Context) -> str | None:
    for key in REQUIRED_KEYS:
        problem = ToyCase(program=dict(drop=(key,)), raises=MetadataError).judge(runner, ctx.tokenizer)
        if problem:
            return f"program without {key}: {problem}"
    return None


def _check_fixture(runner, ctx: Context) -> str | None:
    from eagle3_check.gating.check import run_check
    from eagle3_check.reference.verdict import FAIL

    prompts = ctx.fixture.prompts()[: ctx.check_prompts]
    report = run_check(ctx.program, ctx.tokenizer, ctx.reference, prompts,
                       RunOptions(max_new_tokens=ctx.check_max_new), ctx.tolerance, runner=runner)
    bad = next((o for o in report.outcomes if o.verdict.status == FAIL), None)
    return f"check: {bad.prompt_id}: {bad.verdict.message}" if bad else None


def _suite(name: str) -> Callable:
    def fn(runner, ctx: Context) -> str | None:
        """The suite's cases in order, up to the first that fails (a tie is not a kill)."""
        from eagle3_check.reference.verdict import FAIL
        from eagle3_check.suites import SUITES
        from eagle3_check.suites.execute import run_case

        for case in SUITES[name]:
            result = run_case(case, ctx.suite_env, runner)
            if result.status == FAIL:
                return f"{result.name}: {result.message}"
        return None

    return fn


def suite_probes() -> tuple[Probe, ...]:
    """One probe per edge suite (issue 4's `eagle3_check.suites`), when it is installed."""
    try:
        from eagle3_check.suites import SUITES
    except ImportError:
        return ()
    return tuple(Probe(f"suite:{name}", f"edge suite {name} ({len(cases)} cases)", _suite(name), "suite")
                 for name, cases in SUITES.items())


ALL_RIGHT = dict(options=dict(max_new_tokens=21))  # 1 + 4 rounds of K + 1 = 5
PROBES: tuple[Probe, ...] = (
    Probe("toy:all-right", "draft right everywhere: every round accepts K, tau = K + 1",
          _toy(lambda g, c: ToyCase(**ALL_RIGHT))),
    Probe("toy:wrong-at", "draft wrong at chosen positions: exact a per round",
          _toy(lambda g, c: ToyCase(program=dict(wrong_at={13, 19, 26, 27}), options=dict(max_new_tokens=24)))),
    Probe("toy:stop-mid-round", "a stop token among the accepted proposals ends the output there",
          _toy(lambda g, c: ToyCase(options=dict(stop_ids=(g[_first_time(g, 2)],))))),
    Probe("toy:stop-bonus", "the bonus is a stop token: bonus alone, no draft",
          _toy(lambda g, c: ToyCase(options=dict(stop_ids=(g[0],))))),
    Probe("toy:program-eos", "the program's get_eos_ids are stop tokens",
          _toy(lambda g, c: ToyCase(program=dict(eos_ids=(g[_first_time(g, 3)],))))),
    Probe("toy:multi-token-stop-string", "a stop string of several tokens stops nothing",
          _toy(lambda g, c: ToyCase(options=dict(stop_token=multi_token_stop_string(c.tokenizer, g, 2),
                                                 max_new_tokens=21)))),
    Probe("toy:max-new-mid-round", "max new tokens reached inside a round",
          _toy(lambda g, c: ToyCase(options=dict(max_new_tokens=7)))),
    Probe("toy:context-boundary", "full acceptance lands anchor_pos + K on max_seq_len: stop (context)",
          _toy(lambda g, c: ToyCase(prompt=PROMPT[:5], program=dict(max_seq_len=19, max_prefill=12),
                                    options=dict(max_new_tokens=100)))),
    Probe("toy:context-first-round", "L + K == max_seq_len: bonus alone (context)",
          _toy(lambda g, c: ToyCase(program=dict(max_seq_len=14, max_prefill=12),
                                    options=dict(max_new_tokens=100)))),
    Probe("toy:max-new-capped-by-context", "max_new = max_seq_len - L caps a fully accepted round",
          _toy(lambda g, c: ToyCase(prompt=PROMPT[:5], program=dict(max_seq_len=20, max_prefill=12),
                                    options=dict(max_new_tokens=100)))),
    Probe("toy:missing-metadata", "a program missing each required metadata key is rejected",
          _missing_metadata),
    Probe("toy:prompt-above-prefill", "a prompt one token above max prefill is an error",
          _toy(lambda g, c: ToyCase(prompt=list(range(300, 333)), raises=OptionError))),
    Probe("toy:text-prompt", "a text request: chat template and one BOS, Gemma 4 defaults",
          _toy(lambda g, c: ToyCase(prompt="Hi", options=dict(
              **{f: getattr(RunOptions(), f) for f in ("stop_ids", "stop_token", "eos_id")}, max_new_tokens=9)))),
    Probe("toy:tokenizer-eos", "no get_eos_ids: the tokenizer's EOS (a token of the output) stops",
          _toy(lambda g, c: ToyCase(tokenizer_eos=(g[_first_time(g, 3)],)))),
    Probe("toy:tokenizer-eos-shadowed", "the program's get_eos_ids replace the tokenizer's EOS: no stop there",
          _toy(lambda g, c: ToyCase(program=dict(eos_ids=(7,)), tokenizer_eos=(g[_first_time(g, 3)],),
                                    options=dict(max_new_tokens=21)))),
    Probe("toy:eos-id", "eos id alone (a token of the output) stops",
          _toy(lambda g, c: ToyCase(options=dict(eos_id=g[_first_time(g, 4)])))),
    Probe("toy:stop-token-not-key", "a stop string that encodes to one token but is no vocabulary key stops",
          _toy(lambda g, c: ToyCase(options=dict(stop_token=one_token_string_not_a_key(c.tokenizer, g, 2)[1])))),
    Probe("toy:prompt-edges", "a text request with edge whitespace, newlines and a tab: taken as given",
          _toy(lambda g, c: ToyCase(prompt="  Hi\n\tthere \n", options=dict(
              **{f: getattr(RunOptions(), f) for f in ("stop_ids", "stop_token", "eos_id")}, max_new_tokens=9)))),
    Probe("toy:chunked-prefill", "chunked prefill of 40 ids on graph-owned outputs: each chunk's features seed",
          _toy(lambda g, c: ToyCase(prompt=list(range(300, 340)), options=dict(chunked_prefill=True)))),
    Probe("toy:chunked-prefill-window", "chunked prefill of 40 ids on a toy declaring window 8 (max prefill 32): "
          "chunks of the window, not of max prefill / 2",
          _toy(lambda g, c: ToyCase(program=dict(sliding_window=8), prompt=list(range(300, 340)),
                                    options=dict(chunked_prefill=True)))),
    Probe("toy:programs-in-sequence", "one runner: a small program and K = 1, then K = 7, then the small again",
          _programs_in_sequence),
    Probe("check:fixture", "eagle3-check check on the eager tiny-llama fixture (HF reference)",
          _check_fixture, "check"),
    *suite_probes(),
)
FAST_PROBES = tuple(p for p in PROBES if p.group != "suite")  # seconds: what `make check` runs
