"""CUDA graphs over stable buffers: a program method captured once per input shape, then replayed.

`GraphedMethod(fn)` keeps, for every input shape it has seen, static input buffers, the
captured graph and the graph's own output tensors. A call copies its inputs into the
buffers in place (device-to-device when they already live there), replays the graph and
returns the graph's output tensors themselves: no allocation, no host synchronisation.

Consequence callers must respect (the same as an ExecuTorch program's memory-planned
outputs): an output is valid until the next call of the same method with the same input
shape, which overwrites it. The reference runners only ever read an output before that.

Modes:
- "cuda": `torch.cuda.CUDAGraph`, warmed up on a side stream, captured on first use of a shape.
- "emulate": the same buffer discipline without a graph (runs anywhere): each call re-runs
  `fn` on the static inputs and copies the results into the static outputs. CPU tests use it
  to pin that a runner never relies on an output surviving the next same-shape call.
- "off": calls `fn` directly.

`GraphedProgram` applies this to an eager program: `target_verify` is captured per verify
window length (K + 1) and `draft_decode` per call length up to the verify window (the
reseed and chain steps; the prompt-long seed call runs eagerly).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from eagle3_check.errors import OptionError
from eagle3_check.program.contract import ProgramWrapper, read_metadata

MODES = ("cuda", "emulate", "off")


@dataclass
class _Entry:
    inputs: tuple[torch.Tensor, ...]  # static input buffers, one per argument
    outputs: tuple[torch.Tensor, ...]  # the graph's own output tensors
    graph: Any = None  # torch.cuda.CUDAGraph in "cuda" mode
    replays: int = 0


class GraphedMethod:
    """`fn(*tensors) -> tuple of tensors`, one captured graph per input-shape key."""

    def __init__(
        self,
        fn: Callable[..., tuple[torch.Tensor, ...]],
        device: torch.device,
        mode: str = "cuda",
        max_tokens: int | None = None,
        warmup: int = 2,
    ):
        if mode not in MODES:
            raise OptionError(f"cuda graph mode {mode!r}", f"one of {MODES}", "pass mode='cuda' or 'off'")
        if mode == "cuda" and torch.device(device).type != "cuda":
            raise OptionError(
                f"cuda graphs on device {device}", "a CUDA device", "use --no-cuda-graph on CPU"
            )
        self.fn = fn
        self.device = torch.device(device)
        self.mode = mode
        self.max_tokens = max_tokens  # calls whose tokens.shape[1] exceeds this run eagerly
        self.warmup = warmup
        self.entries: dict[tuple, _Entry] = {}
        self.eager_calls = 0

    @property
    def captures(self) -> dict[tuple, int]:
        """Shape key -> replays so far (one capture per key by construction)."""
        return {key: e.replays for key, e in self.entries.items()}

    def _graphed(self, args: tuple[torch.Tensor, ...]) -> bool:
        if self.mode == "off":
            return False
        return self.max_tokens is None or args[0].shape[-1] <= self.max_tokens

    @torch.no_grad()
    def __call__(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if not self._graphed(args):
            self.eager_calls += 1
            return self.fn(*(a.to(self.device) for a in args))
        key = tuple((tuple(a.shape), a.dtype) for a in args)
        entry = self.entries.get(key) or self._capture(key, args)
        for buf, a in zip(entry.inputs, args):
            if buf.data_ptr() != a.data_ptr():
                buf.copy_(a)
        if entry.graph is not None:
            entry.graph.replay()
        else:  # emulate: same buffers, recomputed
            for out, new in zip(entry.outputs, self.fn(*entry.inputs)):
                out.copy_(new)
        entry.replays += 1
        return entry.outputs

    def _capture(self, key: tuple, args: tuple[torch.Tensor, ...]) -> _Entry:
        inputs = tuple(a.detach().to(self.device, copy=True) for a in args)
        if self.mode == "emulate":
            entry = _Entry(inputs, tuple(o.clone() for o in self.fn(*inputs)))
        else:
            # Warm-up on a side stream (cuBLAS handles, lazy buffers), then capture. The
            # methods write their KV cache only at the given positions from the given
            # inputs, so running them on the real inputs first is idempotent.
            # Everything under the program's device, captured on our own stream of that device:
            # torch.cuda.graph() otherwise captures on the current device's stream, or on a
            # class-wide default capture stream made on whichever device captured first, so a
            # program on cuda:1 captured an empty graph and replayed nothing (found on a 2-GPU
            # H200: `check --device cuda:1` failed every request). A graph replays on its capture device.
            with torch.cuda.device(self.device):
                stream = torch.cuda.Stream(self.device)
                stream.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(stream):
                    for _ in range(self.warmup):
                        self.fn(*inputs)
                torch.cuda.current_stream(self.device).wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=stream):  # not torch's class-wide default capture
                    outputs = self.fn(*inputs)  # stream: it lives on whichever device captured first
            entry = _Entry(inputs, tuple(outputs), graph)
        self.entries[key] = entry
        return entry


class GraphedProgram(ProgramWrapper):
    """An eager program (`EagerBackend`) whose target_verify and short draft_decode calls
    replay CUDA graphs. Outputs of those two methods are graph-owned (see module doc)."""

    def __init__(self, inner, mode: str = "cuda", draft_graphs: bool = True, compile_draft_steps: bool = False):
        super().__init__(inner)
        self.device = inner.device
        module = inner.module
        md = read_metadata(inner.metadata())
        self.verify_graphs = GraphedMethod(module.target_verify, self.device, mode)
        draft = module.draft_decode
        if compile_draft_steps:  # experimental: inductor-fused one-token chain steps, then captured
            draft = _one_token_compiled(module.draft_decode)
        self.draft_graphs = GraphedMethod(
            draft, self.device, mode if draft_graphs else "off", max_tokens=md.max_verify_len
        )

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H] (graph-owned)
        return self.verify_graphs(tokens, positions)

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        return self.draft_graphs(tokens, feature, positions)


def _one_token_compiled(fn: Callable[..., tuple[torch.Tensor, ...]]) -> Callable[..., tuple[torch.Tensor, ...]]:
    """`fn` with its one-token calls (the chain steps) compiled by torch.compile (static shapes);
    other lengths run `fn` as is. Fewer, fused kernels per step; rounding may differ from eager,
    which changes proposals at most, never the emitted tokens. Inputs reach the compiled step
    with row-major strides (`_row_major`): dynamo guards on strides, and uncaptured (CPU, or
    --no-cuda-graph) the feature is a one-row view of whichever buffer it came from (the seed's
    g, a verify feature of K + 1 rows), and each new stride recompiled the step (5 recompiles in
    one `check --compile layer` on CPU; past dynamo's limit of 8 it runs eagerly). Captured, the inputs
    are GraphedMethod's static buffers, already row-major: nothing is copied."""
    compiled = torch.compile(fn, dynamic=False)

    def call(tokens, feature, positions):  # [1, T], [1, T, H], [T]
        if tokens.shape[-1] != 1:
            return fn(tokens, feature, positions)
        return compiled(_row_major(tokens), _row_major(feature), _row_major(positions))

    return call


def _row_major(a: torch.Tensor) -> torch.Tensor:
    """`a` itself when its strides are row-major for its shape, else a row-major copy. Worked
    example: row 4 of a [1, 5, 64] feature, [1, 1, 64] with strides (320, 64, 1), becomes strides
    (64, 64, 1); a [1, 1, 64] buffer of its own already has them."""
    want, step = [], 1
    for size in reversed(a.shape):
        want.insert(0, step)
        step *= size
    return a if a.stride() == tuple(want) else a.clone(memory_format=torch.contiguous_format)


def with_cuda_graphs(program, enabled: bool | None = None, draft_graphs: bool = True,
                     compile_draft_steps: bool = False):
    """`program` wrapped in `GraphedProgram` when graphs are wanted: `enabled=None` means on
    for an eager program on a CUDA device, off elsewhere. Asking for graphs on CPU is an error.
    `compile_draft_steps` (the CLI's --compile): the one-token chain steps compiled, captured
    with the graphs, or run compiled without them (a GraphedProgram in mode "off")."""
    device = getattr(program, "device", torch.device("cpu"))
    on_cuda = torch.device(device).type == "cuda"
    if enabled is None:
        enabled = on_cuda and hasattr(program, "module")
    if not enabled:
        return GraphedProgram(program, "off", compile_draft_steps=True) if compile_draft_steps else program
    if not on_cuda or not hasattr(program, "module"):
        raise OptionError(
            f"--cuda-graph with a program on {device}",
            "an eager program on a CUDA device (--device cuda)",
            "add --device cuda, or drop --cuda-graph",
        )
    return GraphedProgram(program, "cuda", draft_graphs, compile_draft_steps)
