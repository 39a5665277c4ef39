"""The test session's `.pte` exports lowered one method at a time, a method lowered once per session.

ExecuTorch's `to_edge_transform_and_lower` treats each method on its own: each is decomposed, made
edge dialect, partitioned and preprocessed by itself, and the manager it returns is the methods'
programs under `_check_ir_validity=False` (executorch 1.5.1, exir/program/_program.py). So a program
lowered one method at a time, its methods then put into one `EdgeProgramManager`, serializes to the
very bytes of the joint lowering (tests/test_shared_lowering.py pins it on a two-method program;
the whole tiny-llama exports, fp32 and kv_window, are compared with `--stock-lowering` exports in the
slow tests of tests/pte/test_fast_lowering_pte.py).

The session's exports share methods: the kv_window program's `prefill` and `draft_decode` are the fp32
program's (only `target_verify` takes the other form), and the `.ptd` program is the fp32 program
with its constants outside (an option of to_executorch, after the lowering). Inside `shared_lowering()`
a method whose traced program was lowered before in this process (the same code, node values,
tensors, signature, range constraints and lowering options: `method_key`) gets a copy of that
lowering instead of half a minute of one core again.

The export's sidecar records the lowering's stats; for a composed program they are the methods'
stats merged (`merge_stats`: counts summed, the preprocess's per-process partitions added per
process, the worker count the largest), the shape a joint lowering records.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from typing import Any

import torch

from eagle3_check.quiet import third_party_quiet


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def method_key(name: str, ep, backend: str, stock_lowering: bool) -> str:
    """What decides one method's lowering: its name, code, every node's value (shape, dtype: the
    code does not say them), its tensors' bytes, signature and range constraints, and the other
    arguments of `lower_edge` but the constant methods (those are the program's, added when composing)."""
    h = hashlib.sha256(f"{name}\n{ep.graph_module.code}\n{ep.graph_signature}\n{ep.range_constraints}".encode())
    for gm in ep.graph_module.modules():
        if isinstance(gm, torch.fx.GraphModule):
            for node in gm.graph.nodes:
                h.update(f"{node.op} {node.name} {node.target} {node.meta.get('val')!r}\n".encode())
    tensors = {**ep.state_dict, **{k: v for k, v in ep.constants.items() if isinstance(v, torch.Tensor)}}
    for k in sorted(tensors):
        t = tensors[k]
        h.update(f"{k} {t.dtype} {tuple(t.shape)}\n".encode() + _tensor_bytes(t))
    h.update(f"{backend} {stock_lowering}".encode())
    return h.hexdigest()


def merge_stats(parts: list[Any]) -> Any:
    """The methods' lowering stats as one (the shape `lower_edge` returns for a joint lowering): numbers
    summed, `workers` the largest, lists of numbers added index by index (the preprocess's
    partitions per process), equal strings kept, differing ones' non-empty values joined with '; '."""
    first = parts[0]
    if isinstance(first, dict):
        return {k: (max(p[k] for p in parts) if k == "workers" else merge_stats([p[k] for p in parts]))
                for k in first}
    if isinstance(first, bool) or first is None:
        return first if all(p == first for p in parts) else any(parts)
    if isinstance(first, (int, float)):
        total = sum(parts)
        return round(total, 3) if isinstance(total, float) else total
    if isinstance(first, list):
        width = max(len(p) for p in parts)
        return [sum(p[i] for p in parts if i < len(p)) for i in range(width)]
    return first if all(p == first for p in parts) else "; ".join(dict.fromkeys(str(p) for p in parts if p))


@contextlib.contextmanager
def shared_lowering(memo: dict | None = None):
    """Inside: `lowering.lower_edge` lowers each method by itself, a method already lowered in `memo`
    (default: this process's) taken from there (a copy: to_executorch changes the program it is
    given), and composes the methods in their order into one EdgeProgramManager. Yields the memo."""
    from executorch.exir import EdgeCompileConfig
    from executorch.exir.program._program import EdgeProgramManager

    from eagle3_check.program import lowering

    memo = _MEMO if memo is None else memo
    stock = lowering.lower_edge

    def composed(programs: dict, constants: dict, backend: str, stock_lowering: bool = False):
        methods, stats = {}, []
        for name, ep in programs.items():
            key = method_key(name, ep, backend, stock_lowering)
            if key not in memo:
                edge, method_stats = stock({name: ep}, {}, backend, stock_lowering)
                memo[key] = (edge.exported_program(name), method_stats)
            with third_party_quiet():  # torch's pytree, copying a LeafSpec: a FutureWarning about isinstance
                methods[name] = copy.deepcopy(memo[key][0])
            stats.append(memo[key][1])
        edge = EdgeProgramManager(methods, constants, EdgeCompileConfig(_check_ir_validity=False))
        return edge, merge_stats(stats)

    lowering.lower_edge = composed
    try:
        yield memo
    finally:
        lowering.lower_edge = stock


_MEMO: dict[str, tuple] = {}  # this process's lowered methods: {method_key: (ExportedProgram, stats)}
