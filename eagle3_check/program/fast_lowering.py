"""An exact, faster per-partition `legalize_graph` for ExecuTorch's lowering (issue 32 item 4).

`to_edge_transform_and_lower` creates each delegate partition with
`exir.lowered_backend_module.create_submodule_from_nodes`, which ends with torch's
`legalize_graph(gm)`: a Kahn topological sort of the WHOLE method that copies every node into a
new `Graph` (`node_copy`) and assigns it to `gm.graph`, which recompiles `gm` and all its
children, once per partition: cost ~ partitions x nodes (measured: docs/quantized-exports.md).

`fast_lowering()` replaces the `legalize_graph` name that `exir.lowered_backend_module` imported,
for the duration of our lowering only, with `_FastLegalize`: it computes stock's Kahn order (same
queue, same PRIORITIZED_OPS, same `users` iteration order) without copying, moves the nodes in
place into that order where it differs from the graph's, and brings the graph into the state
stock's copy would have: a fresh name namespace (every name replayed in order; a name the copy
would change sends the call to stock), the find_nodes table, each node's `users` and
`_input_nodes` in creation order, and the fused submodule inserted since the last call
recompiled. What it skips is the copy and the recompile of `gm` itself: nothing between two
partitions runs or reads `gm`'s code, and the ExportedProgram built after lowering makes a new
GraphModule from the graph. A cycle goes to stock (which raises its own error).
`tests/program/test_fast_lowering.py` compares the graph state with stock's; tests/pte/test_fast_lowering_pte.py
the .pte bytes.

Guarded: the stock functions' source must hash to the versions this was written from (torch
2.13.0's `legalize_graph`, executorch 1.5.1's `create_submodule_from_nodes`) and the graph
internals it uses must exist; otherwise stock runs and `LoweringStats.reason` says why (the
export's sidecar records it).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import inspect
import operator
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

# sha256 (first 16 hex) of inspect.getsource of the stock functions this module reproduces.
_STOCK_SOURCES = {
    "torch.fx.passes.tools_common.legalize_graph": "6dc8094b32ebd463",
    "executorch.exir.lowered_backend_module.create_submodule_from_nodes": "3279f5ec23b0b723",
}

# torch 2.13.0's legalize_graph PRIORITIZED_OPS, in its order (queued at the front when ready).
PRIORITIZED_OPS = [
    operator.add, operator.mul, operator.sub, operator.floordiv, operator.truediv, operator.mod,
    operator.le, operator.lt, operator.ge, operator.gt, operator.eq, operator.ne,
    torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten._assert_async.msg,
    torch.ops.aten.scalar_tensor.default,
    torch.ops.aten._assert_scalar.default,
]


@dataclass
class LoweringStats:
    """How the lowering's legalize calls went: `mode` fast or stock, `reason` when stock was forced
    by a version guard; `fast` calls kept in place, `stock` calls handed to torch's function."""

    mode: str = "stock"
    reason: str = ""
    fast: int = 0
    stock: int = 0
    moved: int = 0  # fast calls whose Kahn order differed from the graph's: nodes moved, not copied
    fast_s: float = 0.0  # seconds inside the fast calls
    stock_s: float = 0.0  # seconds inside the stock calls

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _source_digest(fn) -> str:
    return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]


def guard() -> str:
    """'' when the stock functions are the versions reproduced here; otherwise why not."""
    from torch.fx.passes import tools_common

    try:
        from executorch.exir import lowered_backend_module as lbm
    except ImportError as e:  # pragma: no cover - export requires executorch
        return f"executorch.exir.lowered_backend_module not importable ({e})"
    if getattr(lbm, "legalize_graph", None) is not tools_common.legalize_graph:
        return "exir.lowered_backend_module.legalize_graph is not torch.fx.passes.tools_common.legalize_graph"
    for name, fn in (("torch.fx.passes.tools_common.legalize_graph", tools_common.legalize_graph),
                     ("executorch.exir.lowered_backend_module.create_submodule_from_nodes",
                      lbm.create_submodule_from_nodes)):
        got = _source_digest(fn)
        if got != _STOCK_SOURCES[name]:
            return f"{name} source {got} is not the reproduced version {_STOCK_SOURCES[name]}"
    g = torch.fx.Graph()
    for attr in ("_graph_namespace", "_find_nodes_lookup_table"):
        if not hasattr(g, attr):
            return f"torch.fx.Graph has no {attr}"
    ns = g._graph_namespace
    if not all(hasattr(ns, a) for a in ("create_name", "associate_name_with_obj")):
        return "torch.fx.graph._Namespace lacks create_name / associate_name_with_obj"
    return ""


def kahn_order(graph: torch.fx.Graph) -> list[torch.fx.Node] | None:
    """The node order stock legalize_graph builds (None on a cycle), computed without copying."""
    nodes = list(graph.nodes)
    indeg = dict.fromkeys(nodes, 0)
    for node in nodes:
        for user in node.users:
            indeg[user] += 1
    queue = collections.deque(n for n in nodes if indeg[n] == 0)
    order = []
    prioritized = PRIORITIZED_OPS
    while queue:
        cur = queue.popleft()
        order.append(cur)
        for user in cur.users:
            indeg[user] -= 1
            if indeg[user] == 0:
                if user.op == "call_function" and user.target in prioritized:
                    queue.appendleft(user)
                else:
                    queue.append(user)
    return order if len(order) == len(nodes) else None


def _fresh_namespace(nodes: list[torch.fx.Node]):
    """The namespace `node_copy` of `nodes` in order into a new Graph builds; None if a name changes."""
    from torch.fx.graph import _Namespace

    ns = _Namespace()
    for node in nodes:
        name = ns.create_name(node.name, None)
        if name != node.name:
            return None
        ns.associate_name_with_obj(name, node)
    return ns


def _inputs_in_arg_order(node: torch.fx.Node) -> list[torch.fx.Node]:
    seen: dict[torch.fx.Node, None] = {}
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: seen.setdefault(n))
    return list(seen)


def _settle_in_place(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node], ns) -> None:
    """Brings `gm.graph` (its nodes already in Kahn order, `nodes`) into the state of stock's copy."""
    from torch.fx.graph import _FindNodesLookupTable

    graph = gm.graph
    position = {n: i for i, n in enumerate(nodes)}
    table = _FindNodesLookupTable()
    for node in nodes:
        table.insert(node)
        want = _inputs_in_arg_order(node)
        if list(node._input_nodes) != want:
            node._input_nodes.clear()
            node._input_nodes.update(dict.fromkeys(want))
        users = list(node.users)
        ordered = sorted(users, key=position.__getitem__)
        if users != ordered:
            node.users.clear()
            node.users.update(dict.fromkeys(ordered))
    graph._graph_namespace = ns
    graph._find_nodes_lookup_table = table
    graph._tracer_cls, graph._tracer_extras = None, None  # a new Graph() has neither
    graph._co_fields, graph._used_names = {}, {}


class _FastLegalize:
    """The replacement `legalize_graph` (one instance per lowering, counting its calls)."""

    def __init__(self, stock, stats: LoweringStats, reorder=None, sample_every: int = 0):
        self.stock, self.stats, self.reorder, self.sample_every = stock, stats, reorder, sample_every
        self._last_stock = False
        self.compiled: dict[int, set[str]] = {}

    def __call__(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        t0 = time.perf_counter()
        try:
            return self._legalize(gm)
        finally:
            spent = time.perf_counter() - t0
            if self._last_stock:
                self.stats.stock_s = round(self.stats.stock_s + spent, 3)
            else:
                self.stats.fast_s = round(self.stats.fast_s + spent, 3)

    def _legalize(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        graph, calls = gm.graph, self.stats.fast + self.stats.stock
        sampled = self.sample_every > 0 and calls % self.sample_every == self.sample_every - 1
        order = None if sampled else kahn_order(graph)
        if order is not None and self.reorder is not None:  # tests only: a wrong fast path must be caught
            order = self.reorder(order)
        ns = _fresh_namespace(order) if order is not None else None
        self._last_stock = ns is None
        if self._last_stock:  # sampled, a cycle (stock raises its error) or a name stock's copy would change
            self.stats.stock += 1
            out = self.stock(gm)
            self.compiled[id(gm)] = {n for n, m in gm.named_children() if isinstance(m, torch.fx.GraphModule)}
            return out
        if order != list(graph.nodes):
            root = graph._root
            for node in order:  # each to the end, in turn: the list is then `order`
                root._prepend(node)
            self.stats.moved += 1
        _settle_in_place(gm, order, ns)
        # Stock recompiles every child; only the fused submodule inserted since the last call is new
        # (its output node was rewritten after it was built). The others are unchanged since.
        done = self.compiled.setdefault(id(gm), set())
        for name, child in gm.named_children():
            if isinstance(child, torch.fx.GraphModule) and name not in done:
                child.recompile()
                done.add(name)
        self.stats.fast += 1
        return gm


@contextlib.contextmanager
def fast_lowering(enabled: bool = True, reorder=None, sample_every: int = 0):
    """Within: exir.lowered_backend_module.legalize_graph is the exact fast path (when `enabled` and
    the guard passes). Yields the LoweringStats, filled in as the lowering runs. `sample_every` N > 0
    (benches) hands every N-th call to stock, to time stock's calls in the same lowering."""
    stats = LoweringStats()
    why = guard() if enabled else "--stock-lowering"
    if why and why != "--stock-lowering":
        stats.reason = why
        yield stats
        return
    from executorch.exir import lowered_backend_module as lbm

    stock = lbm.legalize_graph
    if why:  # stock, only timed: every call is stock's own
        stats.reason = why
        lbm.legalize_graph = _FastLegalize(stock, stats, sample_every=1)
    else:
        lbm.legalize_graph = _FastLegalize(stock, stats, reorder, sample_every)
        stats.mode = "fast"
    try:
        yield stats
    finally:
        lbm.legalize_graph = stock
