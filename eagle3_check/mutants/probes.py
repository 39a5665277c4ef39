"""Kill probes: the cases each runner (reference or mutant) is put through.

A probe takes a runner and returns None when the runner behaves, or a one-line reason.
Toy probes use `StrictToy` and `ToyCase` (mutants/toy_case.py: one request and its judgment):
the toy target (exact greedy chain, so every expectation is derived, never hard-coded) with a
draft that is right only when fed the feature row that belongs to its position, so any feature
or position plumbing bug shows up as lost acceptance. The acceptance the toy must yield is `toy_accepted` (from `wrong_at`);
the length is `rules.expected_length`. The `check` probe runs the real eager fixture
through `run_check`, exactly as `eagle3-check check --runner` does; one `suite:NAME`
probe per edge suite runs its cases (`check --suite NAME`) up to the first failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from eagle3_check.errors import MetadataError, OptionError
from eagle3_check.mutants.toy_case import (
    PROMPT,
    ToyCase,
    first_time,
    multi_token_stop_string,
    one_token_string_not_a_key,
)
from eagle3_check.program.contract import REQUIRED_KEYS
from eagle3_check.runners.options import RunOptions
from eagle3_check.suites import toy


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


def _narrow_verify_range(runner, ctx: Context) -> str | None:
    """K refused past a narrow verify range whatever the runner's profile (k-runtime's clamp to [1, 7]
    leaves these K out of the program's range: the runtime's error; runner-pr has no --chain), and run
    at its bounds (the [2, 5] toy's get_chain_len is 3, so K 1 and 4 are asked for: K 4 a default would hide)."""
    wide, one = dict(verify_range=(2, 5), chain_len=3), dict(verify_range=(3, 3), chain_len=2)
    cases = [(wide, 5, OptionError), (wide, 7, OptionError), (one, 1, OptionError), (one, 3, OptionError),
             (one, 2, None), (wide, 3, None)]
    for program, k, raises in cases:
        problem = ToyCase(program=program, options=dict(chain_len=k, max_new_tokens=12), raises=raises).judge(
            runner, ctx.tokenizer)
        if problem:
            return f"verify range {program['verify_range']}, K {k}: {problem}"
    return None


def _text_ends_in_whitespace(runner, ctx: Context) -> str | None:
    """Three requests, each ending on a token whose text ends in whitespace (suites/text_end.py)."""
    from eagle3_check.suites.text_end import ENDINGS, ending_prompts

    for name, ch in ENDINGS.items():
        prompt = ending_prompts(ctx.tokenizer, PROMPT[:-1], 11, ch, set())[0]
        problem = ToyCase(prompt=prompt, options=dict(max_new_tokens=11)).judge(runner, ctx.tokenizer)
        if problem:
            return f"output ending in a {name}: {problem}"
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
        from eagle3_check.judge.tolerance import tolerance_for

        return tolerance_for(self.dtype)

    @property
    def program(self):
        from eagle3_check.program.eager import EagerBackend

        plain = self._cached("program", lambda: EagerBackend.from_fixture(self.fixture, self.device, self.dtype,
                                                                            reuse_outputs=True))
        return self._cached("program", lambda: self._graphed(plain), per_graphs=True)

    @property
    def suite_env(self):
        from eagle3_check.jobs.suites.execute import SuiteEnv

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

        from eagle3_check.judge.hf import HFReference

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
    from eagle3_check.jobs.check.prompt_set import run_check
    from eagle3_check.judge.verdict import FAIL

    prompts = ctx.fixture.prompts()[: ctx.check_prompts]
    report = run_check(ctx.program, ctx.tokenizer, ctx.reference, prompts,
                       RunOptions(max_new_tokens=ctx.check_max_new), ctx.tolerance, runner=runner)
    bad = next((o for o in report.outcomes if o.verdict.status == FAIL), None)
    return f"check: {bad.prompt_id}: {bad.verdict.message}" if bad else None


def _suite(name: str) -> Callable:
    def fn(runner, ctx: Context) -> str | None:
        """The suite's cases in order, up to the first that fails (a tie is not a kill)."""
        from eagle3_check.jobs.suites.execute import run_case
        from eagle3_check.judge.verdict import FAIL
        from eagle3_check.suites import SUITES

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
          _toy(lambda g, c: ToyCase(options=dict(stop_ids=(g[first_time(g, 2)],))))),
    Probe("toy:stop-bonus", "the bonus is a stop token: bonus alone, no draft",
          _toy(lambda g, c: ToyCase(options=dict(stop_ids=(g[0],))))),
    Probe("toy:program-eos", "the program's get_eos_ids are stop tokens",
          _toy(lambda g, c: ToyCase(program=dict(eos_ids=(g[first_time(g, 3)],))))),
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
          _toy(lambda g, c: ToyCase(tokenizer_eos=(g[first_time(g, 3)],)))),
    Probe("toy:tokenizer-eos-shadowed", "the program's get_eos_ids replace the tokenizer's EOS: no stop there",
          _toy(lambda g, c: ToyCase(program=dict(eos_ids=(7,)), tokenizer_eos=(g[first_time(g, 3)],),
                                    options=dict(max_new_tokens=21)))),
    Probe("toy:eos-id", "eos id alone (a token of the output) stops",
          _toy(lambda g, c: ToyCase(options=dict(eos_id=g[first_time(g, 4)])))),
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
    Probe("toy:narrow-verify-range", "verify range [2, 5] and [3, 3]: K past either bound refused under every "
          "profile (never clamped into the range), K at the bounds runs", _narrow_verify_range),
    Probe("toy:text-ends-in-whitespace", "outputs whose text ends in a space, a newline, a tab: the text keeps it",
          _text_ends_in_whitespace),
    Probe("toy:programs-in-sequence", "one runner: a small program and K = 1, then K = 7, then the small again",
          _programs_in_sequence),
    Probe("check:fixture", "eagle3-check check on the eager tiny-llama fixture (HF reference)",
          _check_fixture, "check"),
    *suite_probes(),
)
FAST_PROBES = tuple(p for p in PROBES if p.group != "suite")  # seconds: what `make check` runs
