"""Data placement for the runner loop (`runners.loop.ReferenceRunner`): where the verify window and
the positions live, how a round's `a` is read back, how the reseed tokens are taken.

The loop (DESIGN §2) is written once; a placement answers its few data questions:

- `HostPlacement` ("host"): every id a method returns is read back and range-checked at
  once; the window `[anchor, p0..pK-1]` is a host list, made into a fresh tensor per call;
  positions are a fresh `arange` per call; the reseed tokens are built from host ints.
- `DevicePlacement` ("device"): positions are views of one `arange` on the program's device;
  proposals are copied into a device window that is passed to target_verify as is; a round
  makes ONE device-to-host read (the window and verify_ids together, 2K+2 ints) from which
  the host computes `a`, emits and range-checks; the reseed tokens are `verify_ids[:, :a+1]`
  taken straight from target_verify's output. The chain's g row is copied into a buffer the
  runner owns before it is fed (a graph-owned g is overwritten by the very call it feeds).
  The only other read is the prefill bonus, once per request.

Both placements read an output only before the next call of the same method, so graph-owned
outputs (`cuda_graph.GraphedProgram`, an ExecuTorch program's planned outputs) are safe.

Worked example of the device read (K = 2): window = [A, x, y] on device, verify_ids =
[x, q, r] -> host reads [A, x, y, x, q, r]; proposals = [x, y], v = [x, q, r]; a = 1,
corrected = q; reseed tokens verify_ids[:, :2] = [x, q] (the host placement builds the same
[x, q] from proposals[:1] + [v[1]]).

Contract checks differ in one place: draft ids that are never read (the non-last rows of the
seed and reseed calls) are range-checked by the host placement only.
"""

from __future__ import annotations

import torch

from eagle3_check.errors import ContractViolation
from eagle3_check.program.contract import SpeculatorProgram


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
    """DESIGN §1 output shapes (and finite CPU features), without reading any id back."""
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


def check_output(
    method: str,
    ids: torch.Tensor,  # [1, T]
    feature: torch.Tensor,  # [1, T, H]
    t: int,
    vocab_size: int | None,
) -> list[int]:
    """Enforces DESIGN §1 on a method's outputs; returns the ids as host ints."""
    check_shapes(method, ids, feature, t)
    host = ids.reshape(-1).tolist()
    check_vocab(method, host, vocab_size)
    return host


class HostPlacement:
    """Host lists: ids read back after every call; a fresh input tensor per call (module doc)."""

    name = "host"

    def __init__(self, program: SpeculatorProgram, max_seq_len: int, k: int, vocab: int | None):
        self.vocab = vocab
        self.win = [0] * (k + 1)  # [anchor, p0..pK-1] as host ints

    def tokens(self, ids: list[int]) -> torch.Tensor:  # -> [1, T]
        return torch.tensor([ids])

    def positions(self, start: int, t: int) -> torch.Tensor:  # -> [T]
        return torch.arange(start, start + t)

    def follow(self, feature: torch.Tensor, prompt_t: torch.Tensor) -> torch.Tensor:  # [1, L, H], [1, L]
        return prompt_t  # host tensors go to whatever device the program wants

    def check(self, method: str, ids: torch.Tensor, feature: torch.Tensor, t: int) -> None:  # [1, T], [1, T, H]
        check_output(method, ids, feature, t, self.vocab)

    def put(self, j: int, ids: torch.Tensor) -> None:  # [1, T]: window slot j := the last id
        self.win[j] = int(ids.reshape(-1)[-1])

    def window(self, lo: int, hi: int) -> torch.Tensor:  # -> [1, hi - lo]
        return torch.tensor([self.win[lo:hi]])

    def feed(self, row: torch.Tensor) -> torch.Tensor:  # [1, 1, H] -> [1, 1, H]
        return row

    def read_round(self, verify_ids: torch.Tensor) -> tuple[list[int], list[int]]:  # [1, K + 1]
        """(proposals p0..pK-1, verify_ids v0..vK) as host ints (v was range-checked by check)."""
        return self.win[1:], verify_ids.reshape(-1).tolist()

    def reseed_tokens(self, round_tokens: list[int], verify_ids: torch.Tensor) -> torch.Tensor:  # -> [1, a + 1]
        return self.tokens(round_tokens)


class DevicePlacement:
    """Device buffers: one device-to-host read per round (module doc)."""

    name = "device"

    def __init__(self, program: SpeculatorProgram, max_seq_len: int, k: int, vocab: int | None):
        self.vocab, self.k = vocab, k
        self.dev = program_device(program)
        self.slots = torch.arange(max_seq_len, device=self.dev)
        self.buf = torch.zeros(1, k + 1, dtype=torch.long, device=self.dev)  # [anchor, p0..pK-1]
        self.g_in: torch.Tensor | None = None  # [1, 1, H], runner-owned input row of chain steps

    def tokens(self, ids: list[int]) -> torch.Tensor:  # -> [1, T]
        return torch.tensor([ids], device=self.dev)

    def positions(self, start: int, t: int) -> torch.Tensor:  # -> [T], a view of one arange
        return self.slots[start : start + t]

    def follow(self, feature: torch.Tensor, prompt_t: torch.Tensor) -> torch.Tensor:  # [1, L, H], [1, L]
        """A program that answers on another device than it was asked: keep the data there."""
        if feature.device != self.dev:
            self.dev = feature.device
            self.slots, self.buf = self.slots.to(self.dev), self.buf.to(self.dev)
        return prompt_t.to(self.dev)

    def check(self, method: str, ids: torch.Tensor, feature: torch.Tensor, t: int) -> None:  # [1, T], [1, T, H]
        check_shapes(method, ids, feature, t)  # ids are range-checked when read (read_round)

    def put(self, j: int, ids: torch.Tensor) -> None:  # [1, T]: window slot j := the last id
        self.buf[:, j : j + 1].copy_(ids.reshape(1, -1)[:, -1:])

    def window(self, lo: int, hi: int) -> torch.Tensor:  # -> [1, hi - lo], a view of the buffer
        return self.buf[:, lo:hi]

    def feed(self, row: torch.Tensor) -> torch.Tensor:  # [1, 1, H] -> [1, 1, H], runner-owned
        """The g row copied into a runner-owned buffer: a graph-owned g is overwritten by the
        very call it feeds, and a wrapper that looks at its inputs after the call
        (instrument.RecordingProgram) must see what was fed."""
        if self.g_in is None or self.g_in.shape != row.shape or self.g_in.dtype != row.dtype:
            self.g_in = torch.empty_like(row)
        self.g_in.copy_(row)
        return self.g_in

    def read_round(self, verify_ids: torch.Tensor) -> tuple[list[int], list[int]]:  # [1, K + 1]
        """The round's one read: the window and verify_ids together (2K + 2 ints)."""
        host = torch.cat([self.buf, verify_ids.to(self.dev)], dim=1).reshape(-1).tolist()
        proposals, v = host[1 : self.k + 1], host[self.k + 1 :]
        check_vocab("draft_decode", proposals, self.vocab)
        check_vocab("target_verify", v, self.vocab)
        return proposals, v

    def reseed_tokens(self, round_tokens: list[int], verify_ids: torch.Tensor) -> torch.Tensor:  # -> [1, a + 1]
        """verify_ids[:, :a+1] on device: p0..p(a-1) equal v0..v(a-1) (accepted), then corrected."""
        return verify_ids[:, : len(round_tokens)]


PLACEMENTS = {p.name: p for p in (HostPlacement, DevicePlacement)}
