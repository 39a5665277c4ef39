"""The eager program's attention over the used KV slots only, on CPU: the same result, bit for bit.

The target and the draft keep one static cache slot per absolute position (max_seq_len slots) and
attend over all of them, the slots past the query masked. SmolLM2's check uses ~100 of 1,024 slots, yet
every call copies all 1,024 for grouped-query attention and scores them. Windowed, a call attends
over the first `window_slots` slots instead: the used ones (the last position + 1) rounded up to whole
`KV_BLOCK`s.

Why the result is bit-identical: torch's CPU flash attention (aten/src/ATen/native/cpu/
FlashAttentionKernel.cpp, the kernel scaled_dot_product_attention runs on CPU in float32 and bfloat16)
walks the keys in blocks of 512 (its `kv_split_size`) with an online softmax. A window of whole
blocks hands the kernel the same first blocks, with the same shapes and the same mask, so each is
computed exactly as before; a block past the window has every slot masked (-inf), and in the full call
it changes nothing: its row max leaves the running max as it was, so the rescale is exp(0) = 1, its
exp(-inf) are 0 (the sum gains 0) and P @ V adds 0 x V. Dropping such blocks cannot change a bit; a
window cut inside a block would give the kernel other shapes (other summation orders). Pinned on the
tiny fixtures in float32 and bfloat16, prefill, target_verify and draft_decode, across the block
boundary (tests/program/test_kv_window.py), and on SmolLM2's check (the same report).

Only the eager backend turns it on, for one call at a time on CPU (`windowed`): an export, a
compiled or CUDA-graph target (static shapes) never sees a window. Exact mode (exact/attention.py)
needs nothing either: its attention cuts the keys into blocks of 64 from slot 0 and skips a block
with no allowed slot, so whole 512-slot blocks dropped past the last position were skipped anyway. Worked example (max_seq_len 1,024): target_verify at positions 50..54 attends over 512
slots (55 used, one block); at 600..604 over 1,024 (605 used, two blocks); max_seq_len 700 at
600..604: 700 (all of them: no window).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

KV_BLOCK = 512  # torch's CPU flash attention's key block (kv_split_size): a window is whole blocks (module doc)


def window_slots(positions: torch.Tensor, max_seq_len: int) -> int | None:  # [T] -> slots, or None: all
    """The first slots a windowed call attends over: (last position + 1) rounded up to whole KV_BLOCKs,
    None where that is every slot. Examples (max_seq_len 1,024): last position 54 -> 512, 511 -> 512,
    512 -> 1,024 (None: all)."""
    used = int(positions.max()) + 1
    slots = -(-used // KV_BLOCK) * KV_BLOCK
    return slots if slots < max_seq_len else None


def _windowable(module: torch.nn.Module) -> list:
    """The modules of `module` that take a window: the target adapter and the draft's attentions."""
    return [m for m in module.modules() if hasattr(m, "kv_windowed")]


@contextmanager
def windowed(program):
    """The eager `program`'s module windowed for the block, where it runs on CPU (module doc); else unchanged."""
    if program.device.type != "cpu":
        yield
        return
    mods = program.__dict__.get("_windowable")
    if mods is None:
        mods = program.__dict__["_windowable"] = _windowable(program.module)
    for m in mods:
        m.kv_windowed = True
    try:
        yield
    finally:
        for m in mods:
            m.kv_windowed = False
