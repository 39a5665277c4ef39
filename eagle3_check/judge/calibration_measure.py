"""The calibration's measurement (judge/calibration.py): a correct runner's target rows against
the reference's, on the user's own target, dtype, device and kernels.

Row i of each source predicts generated token i (the token after prompt + t_0..t_{i-1}):
- decode: prefill(prompt) gives row 0, then target(t_{i-1}, [L + i - 1]) row i, one row a call;
- verify: row 0 from prefill (as the runner's bonus), then windows [t_j .. t_{j+K}] at positions
  L + j .. L + j + K give rows j + 1 .. j + K + 1; j steps by K + 1.
  Worked example, L = 5, K = 2, 7 tokens: prefill -> row 0; window t0 t1 t2 at 5, 6, 7 -> rows 1, 2, 3;
  window t3 t4 t5 at 8, 9, 10 -> rows 4, 5, 6 (7 rows: the last window's row past them is dropped);
- hf: one forward over prompt + t_0..t_{n-2}: its row L - 1 + i is row i.
The tokens are the decode rows' own greedy choices (a correct runner emits those), up to `n_new` or
the first stop token, and within the cache (L + n + K + 1 <= max_seq_len).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class RowStats:
    shifts: list[float]  # per row: the larger margin shift of verify and decode against hf
    verify_flips: list[tuple[int, float]]  # (rank under hf, gap below hf's top) per flipped verify row
    decode_flips: list[tuple[int, float]]

    @property
    def rows(self) -> int:
        return len(self.shifts)


def verify_rows(target, ids: list[int], tokens: list[int], k: int, first: torch.Tensor) -> list[torch.Tensor]:
    """The verify source's rows (module docstring), `first` the prefill's last row [V]."""
    dev = first.device
    L, n, rows, j = len(ids), len(tokens), [first], 0
    while len(rows) < n:
        window = tokens[j:j + k + 1]
        window = window + [window[-1]] * (k + 1 - len(window))  # rows past the end are dropped
        logits, _ = target(torch.tensor([window], device=dev), torch.arange(L + j, L + j + k + 1, device=dev))
        rows += [logits[0, r] for r in range(k + 1)]  # [V] each, from [1, K+1, V]
        j += k + 1
    return rows[:n]


def compare(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, list[tuple[int, float]]]:
    """Margin shift per row of `a` [n, V] against reference `b` [n, V] on b's top two tokens, and
    (rank under b, gap below b's top) of each row whose argmax differs from b's."""
    a, b = a.float(), b.float()
    top = torch.topk(b, 2, dim=-1)
    i1, i2 = top.indices[:, :1], top.indices[:, 1:2]  # [n, 1]
    shift = ((a.gather(1, i1) - a.gather(1, i2))[:, 0] - (top.values[:, 0] - top.values[:, 1])).abs()  # [n]
    got = a.argmax(-1)  # [n]
    got_b = b.gather(1, got[:, None])[:, 0]  # [n]
    flips = [(int((b[i] > got_b[i]).sum()) + 1, float(top.values[i, 0] - got_b[i]))
             for i in (got != top.indices[:, 0]).nonzero()[:, 0].tolist()]
    return shift, flips


@torch.no_grad()
def measure_rows(target, reference_logits: Callable[[list[int]], torch.Tensor], prompts: list[list[int]], k: int,
                 stops: set[int], n_new: int, max_seq_len: int) -> RowStats:
    """`target(tokens [1, T], positions [T]) -> (logits [1, T, V], taps)` is the runner's target;
    `reference_logits(ids) -> [len(ids), V]` the reference's teacher-forced forward."""
    out = RowStats([], [], [])
    for ids in prompts:
        L = len(ids)
        budget = min(n_new, max_seq_len - L - (k + 1))
        if budget < 1:
            continue
        dev = _device(target)
        logits, _ = target(torch.tensor([ids], device=dev), torch.arange(L, device=dev))  # [1, L, V]
        first = logits[0, -1].clone()  # [V]
        decode, tokens = [first], []
        while True:
            tokens.append(int(decode[-1].argmax()))
            if len(tokens) == budget or tokens[-1] in stops:
                break
            lg, _ = target(torch.tensor([[tokens[-1]]], device=dev), torch.tensor([L + len(tokens) - 1], device=dev))
            decode.append(lg[0, -1].clone())  # [V]
        logits, _ = target(torch.tensor([ids], device=dev), torch.arange(L, device=dev))  # the prefill again
        verify = verify_rows(target, ids, tokens, k, logits[0, -1].clone())
        full = reference_logits(ids + tokens[:-1])  # [L + n - 1, V]
        ref = full[L - 1: L - 1 + len(tokens)].float().cpu()  # [n, V]
        s_verify, f_verify = compare(torch.stack(verify).cpu(), ref)
        s_decode, f_decode = compare(torch.stack(decode).cpu(), ref)
        out.shifts += torch.maximum(s_verify, s_decode).tolist()
        out.verify_flips += f_verify
        out.decode_flips += f_decode
    return out


def _device(target) -> torch.device:
    """The device the target computes on: its parameters', or the CPU for a `.pte` twin (no parameters)."""
    params = getattr(target, "parameters", None)
    return next(params()).device if params is not None else torch.device("cpu")


def q99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(0.99 * len(s)))] if s else 0.0


def eager_target(program):
    """The eager target module under `program` and any wrappers around it (a CUDA-graph program, a
    recording: each a ProgramWrapper with `inner`), or of the eager program an AOTI package without
    weights is bound to (`weights_source`, as judge/shared.eager_program reads it), else None (a `.pte`,
    an embedded AOTI package, a plug-in)."""
    while program is not None:
        target = getattr(getattr(program, "module", None), "target", None)
        if target is not None:
            return target
        program = getattr(program, "inner", None) or getattr(program, "weights_source", None)
    return None


def calibrate(program, reference, prompts: list[list[int]], k: int, stops: set[int], n_new: int, device: str,
              key=None):
    """The Calibration of an eager program's target (its module's `target`) against `reference`
    (an HFReference: its `model`), measured on `prompts` (token ids as the runner encodes them);
    `key` (a CalibrationKey) names it, else the target's parameter digest on `device`, eager kernels."""
    from eagle3_check.errors import InputError
    from eagle3_check.judge.calibration import CalibrationKey
    from eagle3_check.program.calibration_export import weights_digest

    target = eager_target(program)
    if target is None:
        raise InputError("a calibration on this program", "an eager program (its target's logits are measured)",
                         "calibrate on the eager program of the same target (--target DIR), then judge this one")
    dtype = str(next(target.parameters()).dtype).removeprefix("torch.")
    key = key or CalibrationKey(weights_digest(target.model), dtype, device.split(":")[0], "eager")
    return calibrate_target(target, reference, prompts, k, stops, n_new, target.max_seq_len, key)


def calibrate_target(target, reference, prompts: list[list[int]], k: int, stops: set[int], n_new: int,
                     max_seq_len: int, key):
    """The Calibration named `key` of `target(tokens [1, T], positions [T]) -> (logits [1, T, V], taps)`:
    an eager TargetAdapter, or a `.pte` twin's target_logits (program/calibration_export.py)."""
    import time

    from eagle3_check.errors import InputError
    from eagle3_check.judge.calibration import Calibration

    t0 = time.perf_counter()

    def reference_logits(ids: list[int]) -> torch.Tensor:  # [len(ids), V]
        dev = next(reference.model.parameters()).device
        return reference.model(input_ids=torch.tensor([ids], device=dev)).logits[0]

    rows = measure_rows(target, reference_logits, prompts, k, stops, n_new, max_seq_len)
    if not rows.rows:
        raise InputError(f"a calibration over {len(prompts)} prompts", "at least one prompt leaving room for "
                         f"K + 2 = {k + 2} tokens in the cache", "pass shorter prompts or a program with a longer max_seq_len")
    flips = max(rows.verify_flips, rows.decode_flips, key=len)
    both = rows.verify_flips + rows.decode_flips
    return Calibration(key, k, len(prompts), rows.rows, max(rows.shifts), q99(rows.shifts), len(flips),
                       max((r for r, _ in both), default=0), max((g for _, g in both), default=0.0),
                       seconds=round(time.perf_counter() - t0, 1))
