"""XNNPACK's per-partition passes skipped on a partition that holds none of the ops they act on (issue 49).

ExecuTorch 1.5.1's XNNPACK preprocess runs 17 passes on every partition (`XNNPACKPassManager.transform`),
each through its own pass-manager run: a shallow copy of the program, `recompile`, lint, `validate`,
and for nearly all of them a whole re-trace of the partition on fake tensors (`ExportPass.call`).
That is ~18 ms a pass a partition whatever the partition holds: 33 of the 83 CPU seconds of the tiny
fixture's export on one core (106 partitions), most of it in passes that look for ops a decoder's
partitions do not have (docs/speed.md "Export").

`fast_passes()` skips a pass on a partition when the pass cannot act there: none of the call targets it
looks for is in the partition's graph (`_ACTS_ON`), or, for the two pattern passes (SDPA, bilinear
upsampling), no pattern's every call target is (a subgraph match needs each of them). A pass that
finds nothing to act on only re-traces, which reproduces the partition; the delegate's bytes are pinned,
not argued: tests/program/test_fast_passes.py lowers small programs whose partitions do hold those ops
(so the passes run and change them) and ones that do not, with and without the skip, byte for byte;
tests/pte/test_fast_lowering_pte.py compares the tiny-llama export with `--stock-lowering`'s. The
passes left to run always: the clone removal, the linear conversion, constant propagation, the
channels-last tagging and the redundant-copy removal (they act on ops every partition may hold).

Guarded: the pass manager's `transform` and each skipped pass's module source must hash to the versions
this was written from (executorch 1.5.1); otherwise stock runs and the export's sidecar says why
(`passes` in its `lowering`).
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from typing import Any

_PASSES = "executorch.backends.xnnpack._passes"
# pass name -> the call target names it acts on (each a substring of `target.__name__`): each pass's
# own node tests (its `call` / `call_operator`), widened, never narrowed. Its module: _STOCK_SOURCES.
_ACTS_ON = {
    "DimOrderOpsRevertPass": ("dim_order",),
    "PropagateCustomMetaPass": ("quantize",),
    "FuseBatchNormPass": ("batch_norm",),
    "DecomposeBatchNorm": ("batch_norm",),
    "FuseActivationPass": ("relu", "hardtanh"),
    "DecomposeConcatenate": ("cat",),
    "RemoveGetItemPass": ("max_pool2d_with_indices", "max.dim"),
    "InsertPadQDQPass": ("constant_pad_nd",),
    "Conv1dUnsqueezePass": ("convolution",),
    "PReLUReshapePass": ("prelu",),
}
# the pattern passes: a pass -> the module whose `get_graphs()` returns its pattern graphs
_PATTERNS = {
    "ConvertToSDPAPass": "executorch.backends.xnnpack.partition.graphs.sdpa",
    "ConvertToUpsampleBilinear2d": "executorch.backends.xnnpack.partition.graphs.bilinear_2d",
}
# sha256 (first 16 hex) of the relied-on sources: the pass manager's transform, each skipped pass's module
# (in _ACTS_ON's order, then the pattern passes') and each pattern module (executorch 1.5.1)
_STOCK_SOURCES = {
    "XNNPACKPassManager.transform": "18e3bd06d0a97585",
    "executorch.exir.passes.memory_format_ops_pass": "36b7d07d6ab9435b",
    f"{_PASSES}.propagate_custom_meta_pass": "54782959d1a72572",
    f"{_PASSES}.fuse_batch_norm": "95f8526ff34ad14c",
    f"{_PASSES}.decompose_batch_norm": "088d123269e24031",
    f"{_PASSES}.fuse_activation_pass": "03e2b4130c2f1d92",
    f"{_PASSES}.decompose_cat": "a3f43f45a53e705a",
    "executorch.backends.transforms.remove_getitem_op": "91bf1a6cfcca25ad",
    f"{_PASSES}.insert_pad_qdq": "4bf12a678b16eccd",
    f"{_PASSES}.conv1d_unsqueeze_pass": "208f7d0fb0bdf372",
    f"{_PASSES}.prelu_reshape_pass": "e9934e871f0a4f62",
    f"{_PASSES}.convert_to_sdpa": "2abbe24a5377a0e5",
    "executorch.backends.xnnpack.partition.graphs.sdpa": "72dc165858843f37",
    f"{_PASSES}.convert_to_upsample_bilinear2d": "34f0529921da6df9",
    "executorch.backends.xnnpack.partition.graphs.bilinear_2d": "516f2e3fcb9c6835",
}


@dataclass
class PassStats:
    """How XNNPACK's per-partition passes went: `mode` fast or stock, `reason` when stock was forced,
    `skipped` and `ran`: the pass runs of the partitions preprocessed in this process (a forked
    preprocess worker, program/parallel_preprocess.py, counts its own, not reported)."""

    mode: str = "stock"
    reason: str = ""
    skipped: int = 0
    ran: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "reason": self.reason, "skipped_in_this_process": self.skipped,
                "ran_in_this_process": self.ran}


def _digests() -> dict[str, str]:
    """The relied-on sources' digests as installed."""
    from eagle3_check.program.fast_lowering import _source_digest

    manager = importlib.import_module(_PASSES).XNNPACKPassManager
    out = {"XNNPACKPassManager.transform": _source_digest(manager.transform)}
    for name in list(_STOCK_SOURCES)[1:]:
        out[name] = _source_digest(importlib.import_module(name))  # a module: its whole source
    return out


def guard() -> str:
    """'' when the relied-on sources are the versions this was written from; otherwise why not."""
    try:
        got = _digests()
    except (ImportError, AttributeError, OSError) as e:  # pragma: no cover - export requires executorch
        return f"XNNPACK's passes not inspectable ({e})"
    for name, want in _STOCK_SOURCES.items():
        if got[name] != want:
            return f"executorch's {name} source {got[name]} is not the relied-on version {want}"
    return ""


def call_names(graph) -> set[str]:
    """The names of the graph's call targets (`aten.cat.default`, `getitem`, ...)."""
    return {str(getattr(n.target, "__name__", n.target)) for n in graph.nodes if n.op == "call_function"}


def can_act(pass_name: str, names: set[str]) -> bool:
    """Whether the XNNPACK pass `pass_name` may change a partition whose call targets are `names`:
    True for a pass this module does not know."""
    if pass_name in _ACTS_ON:
        return any(s in n for s in _ACTS_ON[pass_name] for n in names)
    if pass_name in _PATTERNS:
        patterns = importlib.import_module(_PATTERNS[pass_name]).get_graphs()  # lru_cached there: built once a process
        return any(call_names(p.graph) <= names for p in patterns)
    return True


@contextlib.contextmanager
def fast_passes(enabled: bool = True):
    """Within: each XNNPACK pass that cannot act on a partition is skipped there (when `enabled` and the
    guard passes). Yields the PassStats."""
    stats = PassStats()
    why = guard() if enabled else "--stock-lowering"
    if why:
        stats.reason = why
        yield stats
        return
    manager = importlib.import_module(_PASSES).XNNPACKPassManager
    stock = manager.transform

    def transform(self):  # XNNPACKPassManager.transform: the stock one, a pass at a time, each asked first
        ep, names = self.exported_program, None
        for pass_ in self.passes:
            if names is None:  # read again only after a pass ran
                names = call_names(ep.graph)
            if not can_act(pass_.__name__, names):
                stats.skipped += 1
                continue
            stats.ran += 1
            ep, names = stock(manager(ep, passes=[pass_])), None
        return ep

    manager.transform = transform
    stats.mode = "fast"
    try:
        yield stats
    finally:
        manager.transform = stock
