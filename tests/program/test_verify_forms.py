"""DESIGN §1: both target_verify forms on the eager backend (the kv_window form emulated), and
K at runtime across the range the program's own verify bounds give."""

from __future__ import annotations

import pytest

from eagle3_check.errors import OptionError
from eagle3_check.program.contract import (
    VERIFY_BOUNDS_KEY,
    VERIFY_KV_WINDOW,
    VERIFY_PLAIN,
    read_metadata,
)
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions


def _eager(program, form: str) -> EagerBackend:
    """A second program over the same module (caches roll back by overwrite), in `form`."""
    return EagerBackend(program.module, program.spec, tuple(program.metadata()["get_eos_ids"])).use_verify_form(form)


def test_kv_window_form_drops_verify_metadata_and_reports_its_bounds(program, fixture):
    md = _eager(program, VERIFY_KV_WINDOW).metadata()
    assert "get_min_verify_len" not in md and "get_max_verify_len" not in md
    assert md[VERIFY_BOUNDS_KEY] == [fixture.spec.min_verify_len, fixture.spec.max_verify_len]
    back = _eager(program, VERIFY_KV_WINDOW).use_verify_form(VERIFY_PLAIN).metadata()
    assert back == program.metadata()


def test_kv_window_form_receives_v_equal_anchor_pos_plus_c(program, tokenizer, fixture, monkeypatch):
    kv = _eager(program, VERIFY_KV_WINDOW)
    seen = []
    inner = type(kv.module).target_verify_kv

    def record(self, tokens, positions, kv_window):  # [1, C], [C], [V]
        seen.append((int(positions[0]), tokens.shape[-1], kv_window.shape[0]))
        return inner(self, tokens, positions, kv_window)

    monkeypatch.setattr(type(kv.module), "target_verify_kv", record)
    res = ReferenceRunner().run(kv, tokenizer, fixture.prompts()[0].text, RunOptions(max_new_tokens=24))
    assert res.rounds == len(seen) > 1
    assert all(v == anchor_pos + c for anchor_pos, c, v in seen), seen


@pytest.mark.parametrize("k", range(1, 8), ids=[f"k{k}" for k in range(1, 8)])
def test_both_forms_emit_the_same_tokens_for_every_k(program, tokenizer, fixture, k):
    runner, opts = ReferenceRunner(), RunOptions(max_new_tokens=32, chain_len=k)
    kv = _eager(program, VERIFY_KV_WINDOW)
    for p in fixture.prompts()[:2]:
        a, b = runner.run(program, tokenizer, p.text, opts), runner.run(kv, tokenizer, p.text, opts)
        assert (b.tokens, b.accepted, b.stop_reason) == (a.tokens, a.accepted, a.stop_reason), p.id


def test_k_outside_the_method_bounds_is_one_line_naming_range_and_source(program, tokenizer):
    kv = _eager(program, VERIFY_KV_WINDOW)
    assert read_metadata(kv.metadata()).k_range == (1, 7)
    with pytest.raises(OptionError, match=r"K = 8.*K in \[1, 7\] \(the verify window range minus one, from target_verify's own input bounds") as e:
        ReferenceRunner().run(kv, tokenizer, "hello", RunOptions(max_new_tokens=4, chain_len=8))
    assert "\n" not in str(e.value)
