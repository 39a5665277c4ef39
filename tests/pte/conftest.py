"""Shared `.pte` fixtures: the default fixture exported once per session (and cached on disk).

The export of tiny-llama takes about a minute on two cores, so it is done once and cached
under `.cache/pte/<key>.pte`, the key hashing the fixture files, the modules that shape the
program and the torch / executorch versions (any change re-exports). The `.ptd` form is the fp32
program with its constants outside: made from the same lowering, and the kv_window program takes the
fp32 program's prefill and draft_decode (tests/shared_lowering.py: a method lowered once). Negative programs
are derived from it in seconds: metadata dropped (`pte_edit`), or the draft's d2t constant shifted
past the vocab (out-of-vocab draft ids).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

# No executorch import here: without it the test modules skip themselves (importorskip) and
# these fixtures are never used. program/export.py and program/pte_backend.py import executorch lazily.
from eagle3_check.program.eager import EagerBackend
from eagle3_check.program.export import export_eager
from eagle3_check.program.pte_backend import PteBackend
from tests.export_cache import ROOT, cache_key, cached_export
from tests.shared_lowering import shared_lowering

SHAPING = ["program/export.py", "program/fast_lowering.py", "program/sidecar.py", "program/target.py", "program/draft.py", "program/draft_config.py", "program/rope.py", "program/checkpoint.py", "program/speculator.py", "program/eager.py", "program/gelu_tanh.py", "program/lowering.py", "program/parallel_preprocess.py", "program/fast_partition.py", "program/fast_edge.py", "program/fast_passes.py"]


def _cache_key(fixture, backend: str) -> str:
    import executorch

    return cache_key(fixture, f"{backend} {torch.__version__} {getattr(executorch, '__version__', '')}", SHAPING)


def _cached_export(name: str, key: str, export, tmp_path_factory) -> Path:
    return cached_export(name, key, export, tmp_path_factory)


@pytest.fixture(scope="session")
def fp32_exports(fixture, program, tmp_path_factory) -> tuple[Path, Path]:
    """The default fixture as an XNNPACK `.pte`, and the same program with its weights in an external
    data file (`export --external-data`: `<name>.pte` beside `<name>.ptd`), each with its sidecar,
    exported once from one lowering."""
    def export(external_data: bool):
        return lambda out: export_eager(program, out, "xnnpack", source={"fixture": fixture.name},
                                        external_data=external_data)

    with shared_lowering():  # one lowering for both: the .ptd is an option of to_executorch
        inline = _cached_export("tiny-llama", _cache_key(fixture, "xnnpack"), export(False), tmp_path_factory)
        ptd = _cached_export("tiny-llama-ptd", _cache_key(fixture, "xnnpack external-data"), export(True),
                             tmp_path_factory)
    return inline, ptd


@pytest.fixture(scope="session")
def pte_path(fp32_exports) -> Path:
    """The default fixture as an XNNPACK `.pte` (with its sidecar), exported once."""
    return fp32_exports[0]


@pytest.fixture(scope="session")
def q4_pte_path(fixture, tmp_path_factory) -> Path:
    """tiny-llama with INT4 weights (the tiny-llama-int4 variant's program) as an XNNPACK `.pte`,
    exported once; its sidecar names the variant, as `export --quantize int4-weight` does (the gate
    takes the HF reference and the full-precision twin from its base)."""
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.program.eager import EagerBackend

    variant = load_fixture("tiny-llama-int4")
    return _cached_export(
        "tiny-llama-int4", _cache_key(fixture, "xnnpack int4-weight g32 " + hashlib.sha256(
            (ROOT / "eagle3_check" / "program" / "quantize.py").read_bytes()).hexdigest()),
        lambda out: export_eager(EagerBackend.from_fixture(variant), out, "xnnpack",
                                 source={"fixture": variant.name, "quantization": "int4-weight;group_size=32;scope=target"}),
        tmp_path_factory,
    )


@pytest.fixture(scope="session")
def pte_program(pte_path) -> PteBackend:
    return PteBackend(pte_path)


@pytest.fixture(scope="session")
def kvwin_pte_path(fixture, program, tmp_path_factory) -> Path:
    """The default fixture in the newer target_verify form (kv_window input, dynamic C and V, no
    verify range metadata), exported once (`export --verify-kv-window`)."""
    from eagle3_check.program.contract import VERIFY_KV_WINDOW

    kv = EagerBackend(program.module, program.spec, tuple(program.metadata()["get_eos_ids"]))
    with shared_lowering():  # prefill and draft_decode are the fp32 program's: lowered once where it was
        return _cached_export(
            "tiny-llama-kvwin", _cache_key(fixture, "xnnpack kv_window"),
            lambda out: export_eager(kv.use_verify_form(VERIFY_KV_WINDOW), out, "xnnpack",
                                     source={"fixture": fixture.name}), tmp_path_factory,
        )


@pytest.fixture(scope="session")
def bf16_pte_path(fixture, tmp_path_factory) -> Path:
    """The default fixture exported in bfloat16 (`export --dtype bfloat16`), once."""
    return _cached_export(
        "tiny-llama-bf16", _cache_key(fixture, "xnnpack bfloat16"),
        lambda out: export_eager(EagerBackend.from_fixture(fixture, dtype="bfloat16"), out, "xnnpack",
                                 source={"fixture": fixture.name}), tmp_path_factory,
    )


@pytest.fixture(scope="session")
def ptd_pte_path(fp32_exports) -> Path:
    """The default fixture with its weights in an external data file (`export --external-data`):
    `<name>.pte` beside `<name>.ptd`, exported once (with `pte_path`, from its lowering)."""
    return fp32_exports[1]


def _shift_draft_ids(src: Path, dst: Path, offset: int, draft_vocab: int) -> Path:
    """Copies `src` with its d2t constant shifted by `offset`: draft_decode then returns
    `id + d2t[id] + offset`, outside the target vocab for offset = vocab size. A seconds-long
    edit of the serialized program instead of a second full export."""
    import numpy as np
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte = deserialize_pte_binary(src.read_bytes())
    plan = next(p for p in pte.program.execution_plan if p.name == "draft_decode")
    consts = [v.val for v in plan.values if type(v.val).__name__ == "Tensor" and v.val.data_buffer_idx > 0
              and list(v.val.sizes) == [draft_vocab] and v.val.scalar_type == 4]  # int64 [draft vocab]
    assert len(consts) == 1, f"expected one int64 [{draft_vocab}] constant (d2t) in draft_decode, got {len(consts)}"
    buf = pte.program.constant_buffer[consts[0].data_buffer_idx]
    buf.storage = (np.frombuffer(bytes(buf.storage), dtype=np.int64) + offset).tobytes()
    dst.write_bytes(bytes(serialize_pte_binary(pte, extract_delegate_segments=True)))
    return dst


@pytest.fixture(scope="session")
def oov_pte_path(pte_path, program, tmp_path_factory) -> Path:
    """A program whose draft_decode returns ids outside the target vocab."""
    md = program.metadata()
    out = tmp_path_factory.mktemp("oov") / "oov.pte"
    return _shift_draft_ids(pte_path, out, md["get_vocab_size"], md["get_draft_vocab_size"])


@pytest.fixture(scope="session")
def small_kvwin_pte_path(fixture, tmp_path_factory) -> Path:
    """The spec of the seed's out-of-bounds reseed (issue 28): max_seq_len 48, prefill [4, 47], the
    kv_window verify form (`export --verify-kv-window --max-seq-len 48 --min-prefill 4 --max-prefill 47`)."""
    from eagle3_check.program.contract import VERIFY_KV_WINDOW

    small = EagerBackend.from_fixture(fixture, max_seq_len=48, min_prefill=4, max_prefill=47)
    return _cached_export(
        "tiny-llama-small-kvwin", _cache_key(fixture, "xnnpack kv_window seq48 prefill4-47"),
        lambda out: export_eager(small.use_verify_form(VERIFY_KV_WINDOW), out, "xnnpack",
                                 source={"fixture": fixture.name}), tmp_path_factory,
    )
