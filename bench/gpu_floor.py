"""The bandwidth floor of a target forward, measured in the same run as the bench.

floor ms = bytes of weights one forward reads / measured device copy bandwidth. The bytes:
every target parameter except the embedding table (a forward reads T of its rows), the
lm_head included; the KV cache read (2 x layers x kv x S x D x 2 bytes, ~1 % here) is
reported beside it, not added. The bandwidth: a large device-to-device copy, counting bytes
read plus bytes written (METHOD.md's measure), median of repeats.

`matmul_only_ms` times a CUDA graph holding only the forward's matrix products at M = T rows
(per layer qkv, o, gate_up, down, then lm_head) over the same weights: what cuBLAS alone takes
for the weight stream, the part no op fusion removes. `replay_ms` times replays of a captured
method graph (verify) directly, without the runner.
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F


def copy_bandwidth(device: torch.device, gib: float = 2.0, repeats: int = 20) -> float:
    """Bytes per second of a device-to-device copy (read + written), median of `repeats`."""
    n = int(gib * 2**30) // 2
    src = torch.randn(n, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    times = []
    for _ in range(3 + repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    del src, dst
    return 2 * n * 2 / statistics.median(times[3:])


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the parameters a forward streams: all but the input embedding table."""
    emb = model.get_input_embeddings().weight
    seen, total = set(), 0
    for p in model.parameters():
        if p is emb or p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        total += p.numel() * p.element_size()
    return total


def _time_graph(fn, repeats: int = 50) -> float:
    """Median ms of one replay of a CUDA graph capturing fn()."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return replay_graph_ms(graph, repeats)


def replay_graph_ms(graph, repeats: int = 50) -> float:
    graph.replay()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


@torch.no_grad()
def matmul_only_ms(layer_weights: list[tuple[torch.Tensor, ...]], lm_head: torch.Tensor, t: int) -> float:
    """Median ms of a graph doing only a T-row forward's matrix products (see module doc).
    layer_weights: FastLlamaForward.weights, each (ln1, qkv, o, ln2, gate_up, down)."""
    hidden = lm_head.shape[1]
    x = torch.randn(1, t, hidden, device=lm_head.device, dtype=lm_head.dtype)  # [1, T, H]

    def fn():
        for _, qkv, o, _, gate_up, down in layer_weights:
            F.linear(x, qkv)
            F.linear(x, o)  # o: [H, h*D], here h*D == H
            F.linear(F.linear(x, gate_up)[..., : down.shape[1]], down)
        return F.linear(x, lm_head)

    return _time_graph(fn)


def verify_graph(graphed_program, t: int):
    """The program's captured T-row target_verify graph, or None where it holds none."""
    for key, entry in graphed_program.verify_graphs.entries.items():
        if key[0][0] == (1, t) and entry.graph is not None:
            return entry.graph
    return None


def verify_replay_ms(graphed_program, t: int) -> float | None:
    """Median ms of one replay of the program's captured T-row target_verify graph, if any."""
    graph = verify_graph(graphed_program, t)
    return replay_graph_ms(graph) if graph is not None else None
