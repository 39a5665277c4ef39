"""The metadata-only rewrite (`pte_edit.omit_metadata`, which patches the execution_plan vector in
the bytes) against the full deserialize / re-serialize it replaced: ExecuTorch's own deserializer
reads the same program, and the runtime loads the same methods with the same values and refuses a
missing required key with the same error."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.errors import InputError, MetadataError  # noqa: E402
from eagle3_check.program.contract import read_metadata  # noqa: E402
from eagle3_check.program.pte_backend import PteBackend  # noqa: E402
from eagle3_check.program.pte_edit import drop_plans, omit_metadata  # noqa: E402
from eagle3_check.program.sidecar import read_sidecar  # noqa: E402

pytestmark = pytest.mark.pte


def _full_rewrite(src, dst, keys):
    """The rewrite omit_metadata did before the byte edit: every table deserialized, the plans
    filtered, every byte serialized again."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte = deserialize_pte_binary(src.read_bytes())
    pte.program.execution_plan = [p for p in pte.program.execution_plan if p.name not in keys]
    dst.write_bytes(bytes(serialize_pte_binary(pte, extract_delegate_segments=True)))
    return dst


def _refusal(program) -> str | None:
    try:
        read_metadata(program.metadata())
    except MetadataError as e:
        return str(e)
    return None


@pytest.fixture(scope="module")
def source(pte_path):
    from executorch.exir._serialize._program import deserialize_pte_binary

    return deserialize_pte_binary(pte_path.read_bytes())


def test_every_key_reads_as_the_filtered_program(pte_path, source, tmp_path):
    """For each constant method alone, and two at once: ExecuTorch's deserializer reads the edited
    bytes as the source program with those plans filtered out (what the full rewrite serialized)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    keys = [p.name for p in source.program.execution_plan if p.name.startswith("get_")]
    assert "get_chain_len" in keys and len(keys) >= 4
    for drop in [[k] for k in keys] + [["get_min_verify_len", "get_max_verify_len"]]:
        edited = deserialize_pte_binary(drop_plans(pte_path.read_bytes(), drop)[0])
        assert [p.name for p in edited.program.execution_plan] == \
            [p.name for p in source.program.execution_plan if p.name not in drop]
        source_plans = source.program.execution_plan
        source.program.execution_plan = [p for p in source_plans if p.name not in drop]
        try:
            assert edited.program == source.program, drop
            assert edited.mutable_data == source.mutable_data and edited.named_data == source.named_data
        finally:
            source.program.execution_plan = source_plans


@pytest.mark.parametrize("key", ["get_chain_len", "get_max_seq_len"])
def test_loader_sees_the_full_rewrite(pte_path, key, tmp_path):
    """Loaded through the runtime: the same methods' values, the same refusal of the missing key,
    the sidecar updated alike (the gate's metadata/no-chain-len case ran on the full rewrite)."""
    fast = PteBackend(omit_metadata(pte_path, tmp_path / "fast.pte", [key]))
    full = PteBackend(_full_rewrite(pte_path, tmp_path / "full.pte", [key]))
    assert key not in fast.metadata()
    assert fast.metadata() == full.metadata()
    assert fast.method_maxima() == full.method_maxima()
    assert _refusal(fast) == _refusal(full) and f"missing required key '{key}'" in _refusal(fast)
    side = read_sidecar(tmp_path / "fast.pte")
    assert key in side["omitted"] and key not in side["metadata"]


def test_the_compute_methods_run_alike(pte_path, tmp_path):
    """prefill on the edited program returns what it returns on the source (the bytes it runs are
    the source's: no offset moved)."""
    import torch

    src = PteBackend(pte_path)
    fast = PteBackend(omit_metadata(pte_path, tmp_path / "fast.pte", ["get_eos_ids"]))
    toks, pos = torch.tensor([[1, 5, 9, 13]]), torch.arange(4)  # [1, 4], [4]
    a, b = src.execute("prefill", [toks, pos]), fast.execute("prefill", [toks, pos])
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_a_file_that_is_no_program_is_refused(tmp_path):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"\x10\x00\x00\x00XXXX" + bytes(64))
    with pytest.raises(InputError, match="cannot be parsed"):
        omit_metadata(bad, tmp_path / "out.pte", ["get_chain_len"])
