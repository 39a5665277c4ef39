"""A toy request for the kill probes and its judgment: `StrictToy`, the toy target (exact greedy
chain) with a draft that is right only when fed the feature row that belongs to its position, and
`ToyCase`, one request with every expectation derived from DESIGN §2 (the tokens, the acceptance
`toy_accepted` yields from `wrong_at`, the stop reason, tau, the call log), never hard-coded.
mutants/probes.py builds the probes from these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.program.contract import read_metadata
from eagle3_check.program.owned import OutputBuffers
from eagle3_check.runners.instrument import RecordingProgram, call_problems
from eagle3_check.runners.options import RunOptions, prompt_ids, stop_set
from eagle3_check.runners.rules import expected_length, prefill_chunks
from eagle3_check.suites import toy

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


def first_time(tokens: list[int], i: int) -> int:
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
