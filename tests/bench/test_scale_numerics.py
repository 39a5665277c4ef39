"""bench/scale_numerics.py on CPU at the TINY scale shape: the comparison's arithmetic on a worked
example, and the table end to end in bf16 (the runner with eager attention moves the margins exactly as
HF's own eager window does; the runner in fp32 is HF fp32; a backend missing here is recorded)."""

from __future__ import annotations

import json

import pytest
import torch

from eagle3_check.fixtures import scale_target as st
from eagle3_check.fixtures.registry import fixtures_root


@pytest.fixture(scope="module")
def numerics():
    import sys

    sys.path.insert(0, str(fixtures_root().parent / "bench"))
    try:
        import scale_numerics
    finally:
        sys.path.pop(0)
    return scale_numerics


def test_compare_worked_example(numerics):
    """Reference row [3, 1, 0]: top-1 id 0, top-2 id 1, margin 2. Variant [2, 1.5, 0]: the same two ids
    at margin 0.5, so the margin shift is 1.5; its argmax is still id 0 (gap 0); max |diff| 1.0."""
    r = torch.tensor([[3.0, 1.0, 0.0]])  # [1, V]
    v = torch.tensor([[2.0, 1.5, 0.0]])  # [1, V]
    got = numerics.compare(v, r)
    assert (got["margin_shift"], got["gap"], got["max_abs"], got["agree"]) == (1.5, 0.0, 1.0, 1)
    flipped = numerics.compare(torch.tensor([[1.0, 3.0, 0.0]]), r)  # argmax now id 1: 2 below the top
    assert (flipped["margin_shift"], flipped["gap"], flipped["agree"]) == (4.0, 2.0, 0)


def test_table_on_cpu(numerics, tmp_path):
    st.build_scale_pair(tmp_path / "pair", fixtures_root() / "tiny-llama", seed=1, shape=st.TINY, dtype=torch.bfloat16,
                        max_seq_len=256)
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "a", "text": "Count from one to ten."},
                                               {"id": "b", "text": "Why is the sky blue? Answer in two sentences."}]}))
    out = tmp_path / "num.json"
    numerics.main(["--target", str(tmp_path / "pair" / "target"), "--prompts", str(prompts), "--device", "cpu",
                   "--max-seq-len", "256", "--greedy", "4", "--out", str(out)])
    rep = json.loads(out.read_text())
    assert [r["prompt"] for r in rep["prompts"]] == ["a", "b"]
    for r in rep["prompts"]:
        v = r["variants"]
        assert v["adapter_eager"]["vs_ref"] | {"agree": 0} == v["hf_window"]["vs_ref"] | {"agree": 0}
        assert v["adapter_fp32"]["vs_fp32"]["max_abs"] < 1e-4  # fp32 runner = HF fp32 (static slots, SDPA)
        assert isinstance(v["adapter_sdpa_cudnn"], str)  # no cuDNN on CPU: the error is recorded, not raised
        assert r["hf_greedy"]["identical"] + r["hf_greedy"]["tie"] + r["hf_greedy"]["fail"] == 4
    assert set(rep["summary"]) >= {"adapter", "adapter_cast", "hf_window", "hf_greedy"}
