"""DESIGN §1: the metadata reader rejects a program missing any required key, naming it."""

import pytest
import torch

from eagle3_check.errors import MetadataError
from eagle3_check.program.contract import (
    REQUIRED_KEYS,
    VERIFY_BOUNDS_FROM_KEY,
    VERIFY_BOUNDS_KEY,
    VERIFY_KV_WINDOW,
    kv_window_for,
    read_metadata,
)

GOOD = {
    "get_chain_len": 4,
    "get_max_prefill_chunk": 128,
    "get_min_prefill_chunk": 1,
    "get_max_seq_len": 256,
    "get_min_verify_len": 2,
    "get_max_verify_len": 8,
    "get_eos_ids": [1, 50],
}


def test_good_metadata_reads():
    md = read_metadata(GOOD)
    assert (md.chain_len, md.max_prefill, md.min_prefill, md.max_seq_len) == (4, 128, 1, 256)
    assert md.k_range == (1, 7)
    assert md.eos_ids == (1, 50)


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_missing_required_key_is_named(key):
    raw = {k: v for k, v in GOOD.items() if k != key}
    with pytest.raises(MetadataError, match=f"missing required key '{key}'") as e:
        read_metadata(raw)
    assert "re-export" in str(e.value)


@pytest.mark.parametrize(
    "change, message",
    [
        pytest.param({"get_min_prefill_chunk": 200}, "min prefill <= max prefill", id="min-above-max-prefill"),
        pytest.param({"get_max_prefill_chunk": 256}, "max prefill < max seq len", id="max-prefill-at-seq-len"),
        pytest.param({"get_chain_len": 8}, r"K in \[1, 7\]", id="chain-len-outside-verify-range"),
        pytest.param({"get_chain_len": 0}, "at least 1", id="chain-len-zero"),
        pytest.param({"get_max_seq_len": "256"}, "an integer", id="non-integer-value"),
    ],
)
def test_inconsistent_metadata_is_rejected(change, message):
    with pytest.raises(MetadataError, match=message):
        read_metadata({**GOOD, **change})


def test_without_verify_range_or_method_bounds_k_falls_back_to_the_seed_clamp():
    md = read_metadata({k: GOOD[k] for k in REQUIRED_KEYS})
    assert md.k_range == (1, 7) and "seed runner's clamp [1, 7]" in md.k_source


@pytest.mark.parametrize("raw, k_range, source", [
    pytest.param({VERIFY_BOUNDS_KEY: [2, 6]}, (1, 5), "input bounds", id="method-bounds-dynamic-C"),
    pytest.param({VERIFY_BOUNDS_KEY: [5, 5]}, (4, 4), "input bounds", id="method-bounds-static-C"),
    pytest.param({VERIFY_BOUNDS_KEY: [2, 6], "get_min_verify_len": 3, "get_max_verify_len": 5}, (2, 4),
                 "verify range metadata", id="metadata-wins-over-bounds"),
])
def test_k_range_comes_from_metadata_then_method_bounds(raw, k_range, source):
    md = read_metadata({**{k: GOOD[k] for k in REQUIRED_KEYS}, **raw})
    assert md.k_range == k_range and source in md.k_source


@pytest.mark.parametrize("source", ["ExecuTorch method meta", "the AOTI package's sidecar"])
def test_k_source_names_where_the_backend_read_the_method_bounds(source):
    md = read_metadata({**{k: GOOD[k] for k in REQUIRED_KEYS}, VERIFY_BOUNDS_KEY: [2, 6],
                        VERIFY_BOUNDS_FROM_KEY: source})
    assert md.k_source.startswith(f"target_verify's own input bounds ({source}")


def test_the_eager_kv_window_form_names_its_spec_and_drops_it_back_in_the_plain_form():
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.program.eager import EagerBackend

    backend = EagerBackend.from_fixture(load_fixture("tiny-llama")).use_verify_form(VERIFY_KV_WINDOW)
    assert "(the eager program's spec; kv_window form" in read_metadata(backend.metadata()).k_source
    assert VERIFY_BOUNDS_FROM_KEY not in backend.use_verify_form("tokens+positions").metadata()


def test_chain_len_outside_the_method_bounds_names_where_the_range_came_from():
    raw = {**{k: GOOD[k] for k in REQUIRED_KEYS}, VERIFY_BOUNDS_KEY: [2, 4]}
    with pytest.raises(MetadataError, match=r"K range \[1, 3\] from target_verify's own input bounds"):
        read_metadata(raw)


def test_kv_window_length_is_anchor_pos_plus_c():
    # anchor_pos = 20, K = 4: positions 20..24 (C = 5), V = 25 valid KV slots after the round
    win = kv_window_for(torch.arange(20, 25))
    assert win.dtype == torch.int32 and win.shape == (25,)
    assert kv_window_for(torch.arange(0, 2)).shape == (2,)  # the smallest window: anchor 0, K = 1


def test_eager_program_metadata_comes_from_how_it_was_built(program, fixture):
    md = read_metadata(program.metadata())
    spec = fixture.spec
    assert (md.max_seq_len, md.min_prefill, md.max_prefill, md.chain_len) == (
        spec.max_seq_len, spec.min_prefill, spec.max_prefill, spec.chain_len,
    )
    assert md.vocab_size == program.module.target.vocab_size
    assert md.n_layers == program.module.target.n_layers
    assert md.k_range == (spec.min_verify_len - 1, spec.max_verify_len - 1)
