"""program/kv_window.py: the eager program's attention over the used KV slots only gives the same
ids and features, bit for bit, as attention over every slot (float32 and bfloat16, the Llama and the
Gemma 4 tiny fixtures, sliding-window layers included), below and across the 512-slot block boundary."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.program import eager
from eagle3_check.program.eager import EagerBackend
from eagle3_check.program.kv_window import KV_BLOCK, window_slots

SLOTS = 1300  # max_seq_len: two whole blocks and a part one (the tiny configs say 256; RoPE takes any position)


def test_window_slots_worked_examples():
    at = lambda last, s=1024: window_slots(torch.tensor([max(last - 4, 0), last]), s)  # noqa: E731
    assert KV_BLOCK == 512
    assert (at(54), at(511), at(512), at(1023)) == (512, 512, None, None)
    assert (at(0, 1300), at(600, 1300), at(1100, 1300)) == (512, 1024, None)
    assert at(100, 512) is None and at(100, 300) is None  # one block or less: no window


def _program(name: str, dtype: str, monkeypatch) -> EagerBackend:
    monkeypatch.setattr(eager, "check_memory", lambda *a: None)  # max_seq_len past max_position_embeddings
    return EagerBackend.from_fixture(load_fixture(name), dtype=dtype, max_seq_len=SLOTS)


def _calls(program, full: bool, seen: list) -> list[torch.Tensor]:
    """One sequence of contract calls: `full` calls the module itself (every slot, the path an export
    traces), else the eager backend's methods (windowed). Returns every output."""
    m, out = program.module, []
    gen = torch.Generator().manual_seed(0)
    ids = lambda n: torch.randint(3, 200, (1, n), generator=gen)  # noqa: E731
    pos = lambda a, n: torch.arange(a, a + n)  # noqa: E731
    h = program.module.draft.cfg.hidden_size
    with torch.no_grad():
        for start, n in ((0, 40), (500, 30), (1100, 12)):  # one block; across 512; past the last whole block
            out += (m.prefill if full else program.prefill)(ids(n), pos(start, n))
            out += (m.target_verify if full else program.target_verify)(ids(5), pos(start + n, 5))
            feat = torch.randn(1, n, h, generator=gen).to(out[1].dtype)
            out += (m.draft_decode if full else program.draft_decode)(ids(n), feat, pos(start, n))
            out += (m.draft_decode if full else program.draft_decode)(ids(1), feat[:, -1:], pos(start + n, 1))
    seen.append(program.module.target.kv_windowed)
    return out


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gemma4"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_windowed_calls_are_bit_identical_to_every_slot(name, dtype, monkeypatch):
    keys: list[int] = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, *a, **kw):  # [1, h, T, D], [1, h, S', D] x2
        keys.append(k.shape[-2])
        return sdpa(q, k, v, *a, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    flags: list[bool] = []
    full = _calls(_program(name, dtype, monkeypatch), True, flags)
    assert set(keys) == {SLOTS}
    keys.clear()
    win = _calls(_program(name, dtype, monkeypatch), False, flags)
    assert {512, 1024, SLOTS} <= set(keys)  # the window was taken (and none past the last whole block)
    assert flags == [False, False]  # set for a call only: an export of the module never sees it
    assert len(win) == len(full)
    for i, (a, b) in enumerate(zip(win, full)):
        assert a.dtype == b.dtype and torch.equal(a, b), (name, dtype, i)


def test_exact_mode_windowed_is_bit_identical_too(monkeypatch):
    from eagle3_check.exact.mode import exact_numerics

    full_p, win_p = _program("tiny-llama", "float32", monkeypatch), _program("tiny-llama", "float32", monkeypatch)
    with exact_numerics(full_p.module, win_p.module):
        full, win = _calls(full_p, True, []), _calls(win_p, False, [])
    assert all(torch.equal(a, b) for a, b in zip(win, full))
