"""The device-resident runner: DESIGN §2 exactly, with the data kept on the program's device.

Same rules, same calls, same arguments as `ReferenceRunner` (a CPU test checks them call for
call); only where the data lives differs:
- positions are views of one device `arange` (no host-to-device copy per call);
- proposals are written into a device window `[anchor, p0..pK-1]` that is passed to
  target_verify as is; the reseed takes `verify_ids[:, :a+1]` and `feature[:, :a+1]` straight
  from target_verify's outputs;
- a round makes one device-to-host read: the window and verify_ids together (2K+2 ints),
  from which the host computes `a`, emits, and checks the ids against the vocab.
The prefill bonus is read once per request. Outputs are only read before the next call of
the same method, so graph-owned outputs (`cuda_graph.GraphedProgram`) are safe.

Worked example of the one read (K = 2): window = [A, x, y] on device, verify_ids = [x, q, r]
-> host reads [A, x, y, x, q, r]; proposals = [x, y], v = [x, q, r]; a = 1, corrected = q;
reseed draft_decode(verify_ids[:, :2] = [x, q], feature[:, :2], positions anchor_pos..+1).

Contract checks differ in one place: draft ids that are never read (the non-last rows of the
seed and reseed calls) are not range-checked here; `ReferenceRunner` checks every id.
"""

from __future__ import annotations

import time

import torch

from eagle3_check.contract import SpeculatorProgram, read_metadata
from eagle3_check.errors import ContractViolation
from eagle3_check.options import RunOptions, check_options, prompt_ids, stop_set
from eagle3_check.runner import CONTEXT, MAX_NEW, STOP, RunResult, _Timed, check_prompt_len
from eagle3_check.tokenizer import Tokenizer


def program_device(program: SpeculatorProgram) -> torch.device:
    """Where the program wants its inputs: its `device`, or that of the program it wraps
    (`inner`, as instrument / forcing wrappers do), else the CPU."""
    while getattr(program, "device", None) is None and getattr(program, "inner", None) is not None:
        program = program.inner
    return torch.device(getattr(program, "device", None) or "cpu")


def check_shapes(
    method: str,
    ids: torch.Tensor,  # [1, T]
    feature: torch.Tensor,  # [1, T, H]
    t: int,
) -> None:
    """DESIGN §1 output shapes, without reading any value back from the device."""
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
    if feature.device.type == "cpu" and not torch.isfinite(feature).all():
        raise ContractViolation(
            f"contract violated: {method} returned a non-finite feature of shape {list(feature.shape)}",
            "finite values", f"fix the program's {method} (NaN/inf in the target or draft)",
        )


def check_vocab(method: str, host_ids: list[int], vocab_size: int | None) -> None:
    if vocab_size is not None:
        bad = next((i for i in host_ids if not 0 <= i < vocab_size), None)
        if bad is not None:
            raise ContractViolation(
                f"contract violated: {method} returned id {bad}",
                f"ids in the target vocab [0, {vocab_size})", f"fix the program's {method} (check d2t)",
            )


class PhaseTimer:
    """Splits each round's time on the device timeline into draft / verify / host.

    The runner marks "draft" before its draft calls, "verify" before target_verify and
    "host" right after it (before the read). On CUDA a mark is an event recorded on the
    stream, so a phase is the device-timeline span to the next mark: "host" is the time from
    the end of verify until the next draft work is queued (the read back, the runner's own
    logic), i.e. time the device waits on the host. On CPU a mark is the wall clock.
    """

    def __init__(self, device: torch.device):
        self.cuda = torch.device(device).type == "cuda"
        self.marks: list[tuple[str, object]] = []

    def mark(self, phase: str) -> None:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append((phase, ev))
        else:
            self.marks.append((phase, time.perf_counter()))

    def totals(self) -> dict[str, float]:
        """Milliseconds per phase, summed over the marks so far (synchronises on CUDA)."""
        out = {"draft": 0.0, "verify": 0.0, "host": 0.0}
        if self.cuda and self.marks:
            self.marks[-1][1].synchronize()
        for (phase, a), (_, b) in zip(self.marks, self.marks[1:]):
            out[phase] = out.get(phase, 0.0) + (a.elapsed_time(b) if self.cuda else (b - a) * 1e3)
        return out


class DeviceRunner:
    """The reference runner's rules with device-resident data (see module doc)."""

    name = "device"

    def __init__(self, timer: PhaseTimer | None = None):
        self.timer = timer

    def _mark(self, phase: str) -> None:
        if self.timer is not None:
            self.timer.mark(phase)

    def run(
        self, program: SpeculatorProgram, tokenizer: Tokenizer, prompt: str | list[int], options: RunOptions
    ) -> RunResult:
        md = read_metadata(program.metadata())
        vocab = md.vocab_size or tokenizer.vocab_size
        k = check_options(options, md, vocab)
        stops = stop_set(tokenizer, md, options)
        ids = list(prompt) if isinstance(prompt, list) else prompt_ids(tokenizer, prompt, options)
        L = len(ids)
        check_prompt_len(L, md)
        max_new = min(options.max_new_tokens, md.max_seq_len - L)
        cap_reason = MAX_NEW if max_new == options.max_new_tokens else CONTEXT
        program.reset()
        call = _Timed(program)  # host-side time per method (on CUDA: launch time)
        dev = program_device(program)
        slots = torch.arange(md.max_seq_len, device=dev)  # positions are views: slots[p : p + t]
        accepted: list[int] = []

        def draft(tokens: torch.Tensor, feature: torch.Tensor, start: int):  # [1, T], [1, T, H]
            t = tokens.shape[1]
            out_ids, g = call("draft_decode", tokens, feature, slots[start : start + t])
            check_shapes("draft_decode", out_ids, g, t)
            return out_ids, g  # [1, T], [1, T, H]

        g_in: list[torch.Tensor] = []  # runner-owned [1, 1, H] input row for chain steps

        def chain(window: torch.Tensor, first: torch.Tensor, g: torch.Tensor, start: int) -> None:
            """Writes p0..p(K-1) into window[:, 1:]: p0 = first; step j feeds p(j-1) with the
            last g row at start + j - 1. The g row is copied into a runner-owned buffer first:
            a graph-owned g is overwritten by the very call it feeds, and a wrapper that looks
            at its inputs after the call (instrument.RecordingProgram) must see what was fed."""
            window[:, 1:2].copy_(first)
            for j in range(1, k):
                if not g_in or g_in[0].shape != g[:, -1:].shape or g_in[0].dtype != g.dtype:
                    g_in[:] = [torch.empty_like(g[:, -1:])]
                g_in[0].copy_(g[:, -1:])
                step_ids, g = draft(window[:, j : j + 1], g_in[0], start + j - 1)
                window[:, j + 1 : j + 2].copy_(step_ids[:, -1:])

        prompt_t = torch.tensor([ids], device=dev)  # [1, L]
        bonus_t, feature = call("prefill", prompt_t, slots[:L])
        check_shapes("prefill", bonus_t, feature[:, -1:], 1)
        if feature.device != dev:  # a program that answers elsewhere: follow its outputs
            dev = feature.device
            slots, prompt_t = slots.to(dev), prompt_t.to(dev)
        if feature.shape[:2] != (1, L):
            raise ContractViolation(
                f"contract violated: prefill returned feature {list(feature.shape)}",
                f"[1, {L}, H]", "fix the program's prefill output shapes",
            )
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
            window = torch.empty(1, k + 1, dtype=torch.long, device=dev)  # [anchor, p0..pK-1]
            window[:, :1].copy_(bonus_t.reshape(1, 1))
            self._mark("draft")
            seed_ids, g = draft(torch.cat([prompt_t[:, 1:], window[:, :1]], dim=1), feature, 0)
            anchor_pos = L
            chain(window, seed_ids[:, -1:], g, anchor_pos)
            while True:
                self._mark("verify")
                vids, vfeat = call("target_verify", window, slots[anchor_pos : anchor_pos + k + 1])
                self._mark("host")
                check_shapes("target_verify", vids, vfeat, k + 1)
                host = torch.cat([window, vids], dim=1).reshape(-1).tolist()  # the round's one read
                proposals, v = host[1 : k + 1], host[k + 1 :]
                check_vocab("draft_decode", proposals, vocab)
                check_vocab("target_verify", v, vocab)
                a = 0
                while a < k and proposals[a] == v[a]:
                    a += 1
                accepted.append(a)
                for tok in proposals[:a] + [v[a]]:  # accepted proposals, then corrected
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
                re_ids, g = draft(vids[:, : a + 1], vfeat[:, : a + 1], reseed_pos)
                window[:, :1].copy_(vids[:, a : a + 1])  # anchor = corrected
                chain(window, re_ids[:, -1:], g, anchor_pos)
        self._mark("end")
        rounds = len(accepted)
        return RunResult(
            prompt_ids=ids,
            tokens=out,
            text=tokenizer.decode(out),
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
