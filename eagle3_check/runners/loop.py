"""The reference runner: DESIGN §2 exactly (the shifted, vLLM-EAGLE scheme), one loop.

A runner is anything with `run(program, tokenizer, prompt, options) -> RunResult`
(`Runner`, in runners/result.py); `ReferenceRunner` is ours. Plug-in runners implement the same.
The loop is written once; where its data lives is a strategy (`runners/placement.py`):
`ReferenceRunner()` keeps it in host lists, `ReferenceRunner("device")` (alias
`runners.device_loop.DeviceRunner`) in device buffers with one read back per round.
Mutation testing (`eagle3_check.mutants`) edits this loop and runs it on both.

Worked example of one round (K = 4), the index arithmetic the tests pin:

    anchor = A at anchor_pos = 10, proposals p = [x, y, z, w]
    target_verify([A, x, y, z, w], positions 10..14)
    verify_ids v = [x, y, q, r, s]   (v[j] = target's token for position 10 + j + 1)
    p0 == v0, p1 == v1, p2 = z != v2 = q      ->  a = 2, corrected = v[a] = q
    emit x, y, q                               (a + 1 tokens)
    reseed draft_decode([x, y, q], verify_feature[0..2], positions 10..12)
        row i pairs the feature of the token at 10 + i (A, x, y) with the token after it
    anchor = q (window slot 0), anchor_pos = 10 + a + 1 = 13
    chain: proposal 0 = last reseed id; step j (1..K-1) feeds the previous proposal
           with the last g row at position 13 + j - 1.
"""

from __future__ import annotations

import time

import torch

from eagle3_check.errors import ContractViolation, OptionError
from eagle3_check.program.contract import Metadata, SpeculatorProgram, read_metadata
from eagle3_check.runners.options import (
    RunOptions,
    check_options,
    check_tokenizer,
    decode_checked,
    prompt_ids,
    stop_set,
)
from eagle3_check.runners.placement import PLACEMENTS, check_output, check_vocab
from eagle3_check.runners.profiles import DESIGN_NAME, profile_named
from eagle3_check.runners.result import PluginRunner, RunResult  # noqa: F401 (PluginRunner: re-exported)
from eagle3_check.runners.rules import CONTEXT, MAX_NEW, STOP, prefill_chunk, prefill_chunks
from eagle3_check.tokenizer import Tokenizer


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


def check_prompt_len(n: int, md: Metadata, chunked: bool = False) -> None:
    if n == 0:
        raise OptionError("prompt is empty (0 tokens)", "at least one token", "pass a non-empty prompt")
    if chunked:
        if not md.min_prefill <= n < md.max_seq_len:
            raise OptionError(
                f"prompt length L = {n} tokens",
                f"L in [{md.min_prefill}, {md.max_seq_len - 1}] with chunked prefill (the prefill range's min, max_seq_len - 1)",
                "shorten or lengthen the prompt, or re-export with a longer max_seq_len",
            )
        return
    if not md.min_prefill <= n <= md.max_prefill:
        raise OptionError(
            f"prompt length L = {n} tokens",
            f"L in the program's prefill range [{md.min_prefill}, {md.max_prefill}]",
            "shorten or lengthen the prompt, re-export with a wider prefill range, or pass --chunked-prefill",
        )


class ReferenceRunner:
    """DESIGN §2 with data placement `placement` ("host" or "device", see runners/placement.py)."""

    name = "reference"
    plan = staticmethod(prefill_chunks)  # the chunked-prefill plan (a test runner swaps in a wrong one)
    profile = DESIGN_NAME  # DESIGN §2 as written; `--runner-profile NAME` runs a seed version's rules (runners/profiles.py)

    def __init__(self, placement: str = "host", timer=None):
        self.placement = PLACEMENTS[placement]
        self.timer = timer  # device_loop.PhaseTimer, or None

    def _mark(self, phase: str) -> None:
        if self.timer is not None:
            self.timer.mark(phase)

    def run(
        self, program: SpeculatorProgram, tokenizer: Tokenizer, prompt: str | list[int], options: RunOptions
    ) -> RunResult:
        md = read_metadata(program.metadata())
        options = profile_named(self.profile).request(options, md)  # K clamp, chunking: the profile's
        check_tokenizer(tokenizer, md)
        vocab = md.vocab_size or tokenizer.vocab_size
        k = check_options(options, md, vocab)
        stops = stop_set(tokenizer, md, options)
        ids = list(prompt) if isinstance(prompt, list) else prompt_ids(tokenizer, prompt, options)
        L = len(ids)
        check_prompt_len(L, md, options.chunked_prefill)
        max_new = min(options.max_new_tokens, md.max_seq_len - L)
        cap_reason = MAX_NEW if max_new == options.max_new_tokens else CONTEXT
        program.reset()
        call = _Timed(program)  # host-side time per method (on CUDA: launch time)
        place = self.placement(program, md.max_seq_len, k, vocab)
        accepted: list[int] = []

        def draft(tokens: torch.Tensor, feature: torch.Tensor, start: int):  # [1, T], [1, T, H]
            t = tokens.shape[1]
            out_ids, g = call("draft_decode", tokens, feature, place.positions(start, t))
            place.check("draft_decode", out_ids, g, t)
            return out_ids, g  # [1, T], [1, T, H]

        def chain(first: torch.Tensor, g: torch.Tensor, start: int) -> None:  # [1, T], [1, T, H]
            """Window slots 1..K := p0..p(K-1): p0 = the last id of `first`; step j feeds p(j-1)
            with the last g row at start + j - 1."""
            place.put(1, first)
            for j in range(1, k):
                step_ids, g = draft(place.window(j, j + 1), place.feed(g[:, -1:]), start + j - 1)
                place.put(j + 1, step_ids)

        chunks = self.plan(L, md.max_prefill, md.min_prefill, md.sliding_window) \
            if options.chunked_prefill else [L]
        prompt_t = place.tokens(ids)  # [1, L]
        features = []  # per chunk [1, T, H]; copies when chunked (the next prefill may overwrite its output)
        start = 0
        for t in chunks:  # one prefill per chunk at its positions; the bonus is the last chunk's
            # a chunk below min prefill (the tail rule's) is sent as the seed's runner sends it: the program decides
            bonus_t, feature = prefill_chunk(lambda tok, pos: call("prefill", tok, pos), prompt_t[:, start : start + t],
                                             place.positions(start, t), chunks, md)
            place.check("prefill", bonus_t, feature[:, -1:], 1)
            if feature.shape[:2] != (1, t):
                raise ContractViolation(
                    f"contract violated: prefill returned feature {list(feature.shape)}",
                    f"[1, {t}, H]", "fix the program's prefill output shapes",
                )
            features.append(feature.clone() if len(chunks) > 1 else feature)
            start += t
        prompt_t = place.follow(feature, prompt_t)
        bonus = int(bonus_t.reshape(-1)[0])  # the request's one read outside the rounds
        check_vocab("prefill", [bonus], vocab)
        out = [bonus]
        reason = None
        if bonus in stops.ids:
            reason = STOP
        elif max_new <= 1:
            reason = cap_reason
        elif L + k > md.max_seq_len - 1:
            reason = CONTEXT
        else:
            place.put(0, bonus_t)  # anchor = bonus
            self._mark("draft")
            seed_t = torch.cat([prompt_t[:, 1:], place.window(0, 1)], dim=1)  # [1, L]: prompt[1:] + [bonus]
            start = 0
            for t, feature in zip(chunks, features):  # the draft is seeded in the prefill's chunks
                seed_ids, g = draft(seed_t[:, start : start + t], feature, start)
                start += t
            anchor_pos = L
            chain(seed_ids, g, anchor_pos)
            while True:
                self._mark("verify")
                vids, vfeat = call("target_verify", place.window(0, k + 1), place.positions(anchor_pos, k + 1))
                self._mark("host")
                place.check("target_verify", vids, vfeat, k + 1)
                proposals, v = place.read_round(vids)  # host ints: p0..pK-1, v0..vK
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
                anchor_pos += a + 1
                if anchor_pos + k > md.max_seq_len - 1:
                    reason = CONTEXT
                    break
                self._mark("draft")
                re_ids, g = draft(place.reseed_tokens(round_tokens, vids), vfeat[:, : a + 1], reseed_pos)
                place.put(0, vids[:, a : a + 1])  # anchor = corrected
                chain(re_ids, g, anchor_pos)
        self._mark("end")
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


__all__ = ["CONTEXT", "MAX_NEW", "STOP", "ReferenceRunner", "RunResult", "PluginRunner", "check_output",
           "check_prompt_len"]
