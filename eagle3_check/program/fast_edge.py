"""to_edge without its third re-trace where that re-trace has nothing to decompose (issue 49).

For a partitioner that checks its ops (XNNPACK does: `ops_to_not_decompose` returns a
`check_op_support`), ExecuTorch 1.5.1's `_gen_edge_manager_for_partitioners` re-traces each method
three times (`run_decompositions`, each a whole `aot_export` of the graph on fake tensors): (1) with
no table, to functionalize; (2) with the default table less the partitioner's preserved ops; then
`_replace_aten_ops_with_transformed_ops` moves each preserved op the partitioner accepts into a
no-decompose namespace, and (3) re-traces with the whole default table, so that the preserved ops
the partitioner refused are decomposed after all, and `_restore_transformed_ops_to_aten_ops` moves
them back. Re-trace (3) is ~28 % of to_edge's CPU on SmolLM2 (docs/speed.md "Export").

When, after the move, no call of the method (its control-flow graphs included) is an op of the
default table, re-trace (3) has nothing to decompose: ExecuTorch's own can-skip path reasons the same
way before its second call (`contains_any_call_fn_target_op`). `fast_edge()` then hands the program
back from that one call as it is. One op of the table is let through: `aten.sym_size.int` (a
dynamic dimension read; its table entry is the CompositeImplicit marker, which re-records the same
read): re-trace (2) ran with that same entry and left every one of them in the graph. The bytes are pinned, not argued: tests/pte/test_fast_lowering_pte.py
compares the tiny-llama export with `--stock-lowering`'s, byte for byte, and docs/speed.md records
SmolLM2's sha256 before and after.

Guarded: the stock functions' source must hash to the versions this was written from (executorch
1.5.1); otherwise stock runs and the export's sidecar says why (`edge` in its `lowering`).
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from typing import Any

# sha256 (first 16 hex) of inspect.getsource of the stock functions whose call sequence this relies on.
_STOCK_SOURCES = {
    "_gen_edge_manager_for_partitioners": "14a2b38bd338a215",
    "_replace_aten_ops_with_transformed_ops": "80a553326cc44553",
}




def _let_through() -> tuple:
    import torch

    return (torch.ops.aten.sym_size.int,)  # why: the module docstring


@dataclass
class EdgeStats:
    """How to_edge's third re-traces went: `mode` fast or stock, `reason` when stock was forced,
    `skipped` re-traces with nothing to decompose, `ran` the others."""

    mode: str = "stock"
    reason: str = ""
    skipped: int = 0
    ran: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def guard() -> str:
    """'' when the stock functions are the versions relied on here; otherwise why not."""
    from eagle3_check.program.fast_lowering import _source_digest

    try:
        from executorch.exir.program import _program
    except ImportError as e:  # pragma: no cover - export requires executorch
        return f"executorch.exir.program._program not importable ({e})"
    for name, want in _STOCK_SOURCES.items():
        got = _source_digest(getattr(_program, name))
        if got != want:
            return f"executorch's {name} source {got} is not the relied-on version {want}"
    return ""


def _hand_back_once(program) -> None:
    """`program.run_decompositions(...)`, called once, returns `program` itself (then the method is
    the class's again)."""
    def run_decompositions(*args, **kwargs):
        del program.__dict__["run_decompositions"]
        return program

    program.__dict__["run_decompositions"] = run_decompositions


@contextlib.contextmanager
def fast_edge(enabled: bool = True):
    """Within: a third re-trace with nothing to decompose is skipped (when `enabled` and the guard
    passes). Yields the EdgeStats."""
    stats = EdgeStats()
    why = guard() if enabled else "--stock-lowering"
    if why:
        stats.reason = why
        yield stats
        return
    from executorch.exir.graph_module import contains_any_call_fn_target_op
    from executorch.exir.program import _program

    stock = _program._replace_aten_ops_with_transformed_ops
    let_through = _let_through()

    def replace_then_decide(name, program, partitioner):
        preserved = stock(name, program, partitioner)
        table = _program._default_decomposition_table()
        for op in let_through:
            table.pop(op, None)
        if contains_any_call_fn_target_op(program.graph_module, table):
            stats.ran += 1
        else:
            stats.skipped += 1
            _hand_back_once(program)
        return preserved

    _program._replace_aten_ops_with_transformed_ops = replace_then_decide
    stats.mode = "fast"
    try:
        yield stats
    finally:
        _program._replace_aten_ops_with_transformed_ops = stock
