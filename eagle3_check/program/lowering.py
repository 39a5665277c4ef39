"""Lowering the traced methods of a program to a `.pte`: ExecuTorch's edge dialect, XNNPACK where it
lowers (portable kernels elsewhere), to_executorch with the target and draft caches shared across
methods, and the file (with its `.ptd` data file when the weights go outside).

Six changes to the stock lowering, each exact: to_edge's third re-trace skipped where it has nothing
to decompose (program/fast_edge.py), the per-partition legalize (program/fast_lowering.py),
the XNNPACK partitioner's merge test (program/fast_partition.py), XNNPACK's per-partition preprocess
spread over the CPUs (program/parallel_preprocess.py), its per-partition passes skipped where a
partition has none of their ops (program/fast_passes.py) and, on XNNPACK, each tanh GELU kept a tanh
GELU (program/gelu_tanh.py). Needs the `pte` extra.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch

from eagle3_check.atomic import atomic_writer
from eagle3_check.errors import OptionError
from eagle3_check.program.metadata_check import XNNPACK_BACKENDS
from eagle3_check.program.sidecar import data_path_for
from eagle3_check.quiet import third_party_quiet

CACHE_BUFFER_PATTERNS = ["k_cache", "v_cache"]  # zero-initialised in the program


def _summarise(edge, names) -> tuple[dict[str, int], dict[str, list[str]]]:
    delegated, portable = {}, {}
    for name in names:
        gm = edge.exported_program(name).graph_module
        calls, ops = 0, set()
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            target = str(getattr(node.target, "__name__", node.target))
            if "executorch_call_delegate" in target:
                calls += 1
            elif target not in ("getitem", "sym_size.int", "sym_size"):
                ops.add(target.split("::")[-1].split(":")[0].replace("aten.", ""))
        delegated[name], portable[name] = calls, sorted(ops)
    return delegated, portable


def has_gelu(programs: dict) -> bool:
    """Whether any call in the traced methods (their nested graphs too) is a GELU of any form."""
    return any(node.op == "call_function" and "gelu" in str(node.target)
               for ep in programs.values() for gm in ep.graph_module.modules() if isinstance(gm, torch.fx.GraphModule)
               for node in gm.graph.nodes)


def lower_edge(programs: dict, constants: dict[str, Any], backend: str, stock_lowering: bool = False):
    """to_edge_transform_and_lower of the traced methods (XNNPACK where it lowers), with the exact
    fast per-partition legalize (program/fast_lowering.py), to_edge's idle re-trace skipped
    (program/fast_edge.py), the fast merge test of the partitioner
    (program/fast_partition.py), XNNPACK's preprocess over the usable CPUs
    (program/parallel_preprocess.py) and its idle passes skipped (program/fast_passes.py) unless
    `stock_lowering`, and on XNNPACK each tanh GELU kept one (program/gelu_tanh.py). Returns the
    EdgeProgramManager and the lowering's LoweringStats as JSON, with the count of tanh GELUs rewritten,
    the EdgeStats, the PartitionStats, the PreprocessStats and the PassStats (this process's passes)."""
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from eagle3_check.program.fast_edge import fast_edge
    from eagle3_check.program.fast_lowering import fast_lowering
    from eagle3_check.program.fast_partition import fast_partition
    from eagle3_check.program.fast_passes import fast_passes
    from eagle3_check.program.parallel_preprocess import parallel_preprocess

    partitioner, passes, backend_cls = [], [], None
    if backend in XNNPACK_BACKENDS:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

        from eagle3_check.program.gelu_tanh import tanh_gelu_pass

        # xnnpack-bf16: bf16 linears delegated (metadata_check.BACKENDS); the default partitioner otherwise (stock bytes)
        partitioner = [XnnpackPartitioner(enable_bf16=True) if backend == "xnnpack-bf16" else XnnpackPartitioner()]
        backend_cls = XnnpackBackend
        # gelu_tanh.py: why. The pass re-interprets each whole method on fake tensors (~7 CPU s on
        # SmolLM2); a program without any GELU skips it (the same bytes: tests/pte/test_fast_lowering_pte.py).
        passes = [tanh_gelu_pass()] if stock_lowering or has_gelu(programs) else []
    spread = parallel_preprocess(backend_cls, enabled=not stock_lowering) if backend_cls else contextlib.nullcontext()
    idle = fast_passes(enabled=not stock_lowering) if backend_cls else contextlib.nullcontext()
    with (third_party_quiet(), fast_edge(enabled=not stock_lowering) as edge_stats,
          fast_lowering(enabled=not stock_lowering) as lowering,
          fast_partition(enabled=not stock_lowering) as partition,
          idle as xnn_passes, spread as preprocess):
        edge = to_edge_transform_and_lower(
            programs,
            transform_passes=passes or None,
            partitioner=partitioner,
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
            constant_methods=constants,
        )
    return edge, {**lowering.to_json(), "tanh_gelu_as_ops": sum(p.rewritten for p in passes),
                  "edge": edge_stats.to_json(), "partition": partition.to_json(),
                  "passes": xnn_passes.to_json() if xnn_passes is not None else None,
                  "preprocess": preprocess.to_json() if preprocess is not None else None}


def lower_to_pte(programs: dict, constants: dict[str, Any], backend: str, out_path: Path,
                 phases, external_data: bool = False, stock_lowering: bool = False):
    """`lower_edge` + to_executorch with shared, zero-initialised caches; with `external_data`, the
    weights go to `data_path_for(out_path)` (a `.ptd`) instead of the `.pte`. `phases` (export.Phases)
    is told each phase as it starts. Returns (delegate
    calls, portable ops, the lowering's LoweringStats as JSON)."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    phases.start("lower")
    edge, lowering = lower_edge(programs, constants, backend, stock_lowering)
    summary = (*_summarise(edge, list(programs)), lowering)
    with third_party_quiet():  # executorch's and torch's deprecation notes
        phases.start("to_executorch")
        et = edge.to_executorch(
            ExecutorchBackendConfig(
                passes=[InitializedMutableBufferPass(CACHE_BUFFER_PATTERNS)],
                memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False, share_mutable_buffers=True),
                emit_mutable_buffer_names=True,
                external_constants=external_data,
            )
        )
    phases.start("serialize")
    with atomic_writer(out_path, binary=True, what=".pte") as f:
        et.write_to_file(f)  # also serialises the external data, which the .ptd write below needs
    if external_data:
        _write_data_file(et, data_path_for(out_path))
    phases.stop()
    return summary


def _write_data_file(et, dest: Path) -> None:
    """The program's one external data file to `dest`, atomically: executorch 1.5.1 writes it as
    `<tag>.ptd` into a directory (`write_tensor_data_to_file`; its `data_files` is not usable)."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}.") as tmp:
        et.write_tensor_data_to_file(tmp)
        files = sorted(Path(tmp).glob("*.ptd"))
        if len(files) != 1:
            raise OptionError(f"--external-data produced {len(files)} data files ({', '.join(p.name for p in files)})",
                              "one .ptd with the program's constants", "export without --external-data")
        os.replace(files[0], dest)
