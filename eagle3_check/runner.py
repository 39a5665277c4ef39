"""The reference runner: DESIGN §2 exactly (the shifted, vLLM-EAGLE scheme).

A runner is anything with `run(program, tokenizer, prompt, options) -> RunResult`
(`Runner` below); `ReferenceRunner` is ours. Plug-in runners implement the same.

Worked example of one round (K = 4), the index arithmetic the tests pin:

    anchor = A at anchor_pos = 10, proposals p = [x, y, z, w]
    target_verify([A, x, y, z, w], positions 10..14)
    verify_ids v = [x, y, q, r, s]   (v[j] = target's token for position 10 + j + 1)
    p0 == v0, p1 == v1, p2 = z != v2 = q      ->  a = 2, corrected = v[a] = q
    emit x, y, q                               (a + 1 tokens)
    reseed draft_decode([x, y, q], verify_feature[0..2], positions 10..12)
        row i pairs the feature of the token at 10 + i (A, x, y) with the token after it
    anchor = q, anchor_pos = 10 + a + 1 = 13
    chain: proposal 0 = last reseed id; step j (1..K-1) feeds the previous proposal
           with the last g row at position 13 + j - 1.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Protocol

import torch

from eagle3_check.contract import Metadata, SpeculatorProgram, read_metadata
from eagle3_check.errors import ContractViolation, OptionError
from eagle3_check.options import (
    RunOptions,
    check_options,
    check_tokenizer,
    decode_checked,
    prompt_ids,
    stop_set,
)
from eagle3_check.tokenizer import Tokenizer

STOP, MAX_NEW, CONTEXT = "stop", "max_new", "context"


@dataclass
class RunResult:
    prompt_ids: list[int]
    tokens: list[int]  # emitted, the prefill bonus first
    text: str
    rounds: int
    accepted: list[int]  # a per round (leading proposals matching verify_ids)
    tau: float  # (emitted - 1) / rounds; 0.0 when no round ran
    stop_reason: str  # "stop" | "max_new" | "context"
    k: int
    max_new: int
    method_ms: dict[str, float] = field(default_factory=dict)
    method_calls: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


class Runner(Protocol):
    """The plug-in runner interface: run one request through a program."""

    def run(
        self, program: SpeculatorProgram, tokenizer: Tokenizer, prompt: str | list[int], options: RunOptions
    ) -> RunResult: ...


class _Timed:
    """Calls program methods, accumulating wall time (ms) and call counts per method."""

    def __init__(self, program: SpeculatorProgram):
        self.program = program
        self.ms: dict[str, float] = {"prefill": 0.0, "target_verify": 0.0, "draft_decode": 0.0}
        self.calls: dict[str, int] = {"prefill": 0, "target_verify": 0, "draft_decode": 0}

    def __call__(self, name: str, *args):
        t0 = time.perf_counter()
        out = getattr(self.program, name)(*args)
        self.ms[name] += (time.perf_counter() - t0) * 1e3
        self.calls[name] += 1
        return out


def check_output(
    method: str,
    ids: torch.Tensor,  # [1, T]
    feature: torch.Tensor,  # [1, T, H]
    t: int,
    vocab_size: int | None,
) -> list[int]:
    """Enforces DESIGN §1 on a method's outputs; returns the ids as host ints."""
    if not isinstance(ids, torch.Tensor) or not isinstance(feature, torch.Tensor):
        raise ContractViolation(
            f"contract violated: {method} returned {type(ids).__name__}, {type(feature).__name__}",
            "two tensors (ids, feature)", f"fix the program's {method}",
        )
    want = [1, 1] if method == "prefill" else [1, t]
    if list(ids.shape) != want or feature.dim() != 3 or feature.shape[:2] != (1, t):
        raise ContractViolation(
            f"contract violated: {method} returned ids {list(ids.shape)} and feature {list(feature.shape)}",
            f"ids {want} and feature [1, {t}, H]", f"fix the program's {method} output shapes",
        )
    host = ids.reshape(-1).tolist()
    if vocab_size is not None and any(not 0 <= i < vocab_size for i in host):
        bad = next(i for i in host if not 0 <= i < vocab_size)
        raise ContractViolation(
            f"contract violated: {method} returned id {bad}",
            f"ids in the target vocab [0, {vocab_size})", f"fix the program's {method} (check d2t)",
        )
    if feature.device.type == "cpu" and not torch.isfinite(feature).all():
        raise ContractViolation(
            f"contract violated: {method} returned a non-finite feature of shape {list(feature.shape)}",
            "finite values", f"fix the program's {method} (NaN/inf in the target or draft)",
        )
    return host


def check_prompt_len(n: int, md: Metadata) -> None:
    if n == 0:
        raise OptionError("prompt is empty (0 tokens)", "at least one token", "pass a non-empty prompt")
    if not md.min_prefill <= n <= md.max_prefill:
        raise OptionError(
            f"prompt length L = {n} tokens",
            f"L in the program's prefill range [{md.min_prefill}, {md.max_prefill}]",
            "shorten or lengthen the prompt, or re-export with a wider prefill range (no chunking)",
        )


class ReferenceRunner:
    name = "reference"

    def run(
        self, program: SpeculatorProgram, tokenizer: Tokenizer, prompt: str | list[int], options: RunOptions
    ) -> RunResult:
        md = read_metadata(program.metadata())
        check_tokenizer(tokenizer, md)
        vocab = md.vocab_size or tokenizer.vocab_size
        k = check_options(options, md, vocab)
        stops = stop_set(tokenizer, md, options)
        ids = list(prompt) if isinstance(prompt, list) else prompt_ids(tokenizer, prompt, options)
        L = len(ids)
        check_prompt_len(L, md)
        max_new = min(options.max_new_tokens, md.max_seq_len - L)
        cap_reason = MAX_NEW if max_new == options.max_new_tokens else CONTEXT
        program.reset()
        call = _Timed(program)
        accepted: list[int] = []

        def draft(tokens: list[int], feature: torch.Tensor, start: int) -> tuple[list[int], torch.Tensor]:
            t = len(tokens)
            out_ids, g = call("draft_decode", torch.tensor([tokens]), feature, torch.arange(start, start + t))
            return check_output("draft_decode", out_ids, g, t, vocab), g

        def chain(first: int, g: torch.Tensor, start: int) -> list[int]:
            """Proposals p0..p(K-1): p0 given; step j feeds p(j-1) with the last g row at start + j - 1."""
            props = [first]
            for j in range(1, k):
                step_ids, g = draft([props[-1]], g[:, -1:], start + j - 1)
                props.append(step_ids[-1])
            return props

        bonus_t, feature = call("prefill", torch.tensor([ids]), torch.arange(L))
        bonus = check_output("prefill", bonus_t, feature[:, -1:], 1, vocab)[0]
        if feature.shape[:2] != (1, L):
            raise ContractViolation(
                f"contract violated: prefill returned feature {list(feature.shape)}",
                f"[1, {L}, H]", "fix the program's prefill output shapes",
            )
        out = [bonus]
        reason = None
        if bonus in stops.ids:
            reason = STOP
        elif max_new <= 1:
            reason = cap_reason
        elif L + k > md.max_seq_len - 1:
            reason = CONTEXT
        else:
            seed_ids, g = draft(ids[1:] + [bonus], feature, 0)
            anchor, anchor_pos = bonus, L
            proposals = chain(seed_ids[-1], g, anchor_pos)
            while True:
                window = torch.tensor([[anchor, *proposals]])
                verify_ids, vfeat = call("target_verify", window, torch.arange(anchor_pos, anchor_pos + k + 1))
                v = check_output("target_verify", verify_ids, vfeat, k + 1, vocab)
                a = 0
                while a < k and proposals[a] == v[a]:
                    a += 1
                round_tokens = proposals[:a] + [v[a]]  # accepted proposals, then corrected
                accepted.append(a)
                for tok in round_tokens:
                    out.append(tok)
                    if tok in stops.ids:
                        reason = STOP
                        break
                    if len(out) >= max_new:
                        reason = cap_reason
                        break
                if reason:
                    break
                reseed_pos = anchor_pos
                anchor, anchor_pos = round_tokens[-1], anchor_pos + a + 1
                if anchor_pos + k > md.max_seq_len - 1:
                    reason = CONTEXT
                    break
                re_ids, g = draft(round_tokens, vfeat[:, : a + 1], reseed_pos)
                proposals = chain(re_ids[-1], g, anchor_pos)
        rounds = len(accepted)
        return RunResult(
            prompt_ids=ids,
            tokens=out,
            text=decode_checked(tokenizer, out),
            rounds=rounds,
            accepted=accepted,
            tau=(len(out) - 1) / rounds if rounds else 0.0,
            stop_reason=reason,
            k=k,
            max_new=max_new,
            method_ms=call.ms,
            method_calls=call.calls,
            notes=list(stops.notes),
        )
