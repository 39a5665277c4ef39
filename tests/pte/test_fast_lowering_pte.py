"""The exact fast lowering (program/fast_lowering.py, with XNNPACK's preprocess spread over the CPUs:
program/parallel_preprocess.py, the partitioner's fast merge test: program/fast_partition.py, to_edge's
idle re-trace skipped: program/fast_edge.py, XNNPACK's idle passes skipped: program/fast_passes.py) writes the very bytes of ExecuTorch's stock
lowering: tiny-llama's draft_decode method lowered both ways, byte for byte (in `make check`: about a
fifth of the export's partitions, every fast path taken, nodes reordered); the whole cached tiny-llama
export (made with the fast path, its sidecar says so) against a `stock_lowering` export, and the int4 and
kv_window forms too (slow: a stock export costs 75 s of one core); and a deliberately wrong fast path (a
swapped pair of nodes) writes other bytes (slow)."""

from __future__ import annotations

import copy
import functools
import json

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.program import fast_lowering as fl  # noqa: E402
from eagle3_check.program.contract import VERIFY_KV_WINDOW  # noqa: E402
from eagle3_check.program.eager import EagerBackend  # noqa: E402
from eagle3_check.program.export import Phases, export_eager, export_methods, feature_width  # noqa: E402
from eagle3_check.program.lowering import lower_to_pte  # noqa: E402
from eagle3_check.program.parallel_preprocess import MAX_WORKERS, usable_cpus  # noqa: E402
from eagle3_check.program.sidecar import sidecar_path  # noqa: E402
from eagle3_check.quiet import third_party_quiet  # noqa: E402
from tests.shared_lowering import shared_lowering  # noqa: E402

pytestmark = pytest.mark.pte


def _fast(lowering: dict, delegated: dict[str, int]) -> dict:
    """Every fast path ran (`lowering`: the LoweringStats as JSON; `delegated`: delegate calls per method)."""
    assert lowering["mode"] == "fast" and lowering["fast"] > 0 and lowering["stock"] == 0, lowering
    spread = lowering["preprocess"]  # program/parallel_preprocess.py: over the usable CPUs, each result stock's
    want = (min(usable_cpus(), MAX_WORKERS), "") if usable_cpus() > 1 else (1, "one worker")
    assert (spread["workers"], spread["reason"]) == want, spread
    assert sum(spread["partitions"]) == sum(delegated.values())
    # program/fast_partition.py, program/fast_edge.py and program/fast_passes.py ran (their version guards passed)
    modes = (lowering["partition"]["mode"], lowering["edge"]["mode"], lowering["passes"]["mode"])
    assert modes == ("fast", "fast", "fast"), lowering
    return lowering


def _fast_record(pte) -> dict:
    side = json.loads(sidecar_path(pte).read_text())
    return _fast(side["lowering"], side["delegated"])


def _lowered_method(traced, name: str, out, stock: bool) -> tuple[bytes, dict, dict]:
    """One method of `traced` (export_methods' programs) lowered as `export` lowers it (lowering.lower_to_pte,
    no metadata), from a copy of its traced program: its bytes, the LoweringStats as JSON and the delegate calls."""
    with third_party_quiet():  # torch's pytree, copying a LeafSpec: a FutureWarning about isinstance
        method = copy.deepcopy(traced[name])  # each lowering gets the traced program as the trace left it
    delegated, _, lowering = lower_to_pte({name: method}, {}, "xnnpack", out, Phases(), False, stock)
    return out.read_bytes(), lowering, delegated


def test_fast_lowering_writes_the_stock_bytes_of_a_method(pte_path, program, tmp_path):
    # traced once, as export traces it (1 s); both lowerings start from a copy of the same traced method.
    # The fast one is the session export's own lowering of draft_decode where this process made that
    # export (a clean clone: tests/shared_lowering.py), else lowered here; the stock one is always lowered here.
    traced = export_methods(program.module, program.spec, feature_width(program.module), only=("draft_decode",))
    with shared_lowering():
        fast, lowering, delegated = _lowered_method(traced, "draft_decode", tmp_path / "fast.pte", stock=False)
    _fast(lowering, delegated)
    assert lowering["moved"] > 0  # the graph was reordered in place, not only left as it was
    assert lowering["edge"]["skipped"] == 1  # the method's idle third re-trace (program/fast_edge.py)
    # XNNPACK's idle passes skipped on the partitions preprocessed here (program/fast_passes.py)
    assert lowering["passes"]["skipped_in_this_process"] > 0, lowering["passes"]
    stock, stock_lowering, _ = _lowered_method(traced, "draft_decode", tmp_path / "stock.pte", stock=True)
    assert stock_lowering["mode"] == "stock" and stock_lowering["reason"] == "--stock-lowering"
    assert stock_lowering["passes"] == {"mode": "stock", "reason": "--stock-lowering", "skipped_in_this_process": 0,
                                        "ran_in_this_process": 0}
    assert fast == stock


def _stock_bytes(program, tmp_path, source: dict) -> bytes:
    out = tmp_path / "stock.pte"
    record = export_eager(program, out, "xnnpack", source=source, stock_lowering=True)
    assert record.lowering["mode"] == "stock" and record.lowering["reason"] == "--stock-lowering"
    return out.read_bytes()


@pytest.mark.slow
def test_fast_lowering_writes_the_stock_bytes(pte_path, program, fixture, tmp_path):
    lowering = _fast_record(pte_path)
    assert lowering["moved"] > 0  # the graphs were reordered in place, not only left as they were
    assert lowering["edge"]["skipped"] == 3  # each method's idle third re-trace (program/fast_edge.py)
    assert pte_path.read_bytes() == _stock_bytes(program, tmp_path, {"fixture": fixture.name})


@pytest.mark.slow
def test_fast_lowering_writes_the_stock_bytes_int4(q4_pte_path, tmp_path):
    from eagle3_check.fixtures.registry import load_fixture

    _fast_record(q4_pte_path)
    variant = load_fixture("tiny-llama-int4")
    stock = _stock_bytes(EagerBackend.from_fixture(variant), tmp_path,
                         {"fixture": variant.name, "quantization": "int4-weight;group_size=32;scope=target"})
    assert q4_pte_path.read_bytes() == stock


@pytest.mark.slow
def test_fast_lowering_writes_the_stock_bytes_kv_window(kvwin_pte_path, program, fixture, tmp_path):
    _fast_record(kvwin_pte_path)
    kv = EagerBackend(program.module, program.spec, tuple(program.metadata()["get_eos_ids"]))
    stock = _stock_bytes(kv.use_verify_form(VERIFY_KV_WINDOW), tmp_path, {"fixture": fixture.name})
    assert kvwin_pte_path.read_bytes() == stock


def _swap_one_pair(order):
    """A valid topological order that is not Kahn's: the last adjacent independent call pair swapped."""
    for i in reversed(range(len(order) - 1)):
        a, b = order[i], order[i + 1]
        if a.op == b.op == "call_function" and a not in b.all_input_nodes:
            return [*order[:i], b, a, *order[i + 2:]]
    return order


@pytest.mark.slow
def test_a_wrong_fast_lowering_writes_other_bytes(pte_path, program, fixture, tmp_path, monkeypatch):
    monkeypatch.setattr(fl, "fast_lowering", functools.partial(fl.fast_lowering, reorder=_swap_one_pair))
    out = tmp_path / "wrong.pte"
    export_eager(program, out, "xnnpack", source={"fixture": fixture.name})
    assert out.read_bytes() != pte_path.read_bytes()
