"""The fast per-partition legalize (program/fast_lowering.py) leaves a graph in the state stock's
copy builds: node order, names, each node's users and inputs in order, the name namespace, the
find_nodes table and the generated code, after ExecuTorch's own create_submodule_from_nodes on
small exported graphs; a deliberately wrong fast path (a swapped pair) is caught. The .pte bytes
against stock: tests/pte/test_fast_lowering_pte.py."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch.exir", reason="executorch not installed: pip install -e .[pte]")

from executorch.exir import lowered_backend_module as lbm  # noqa: E402

from eagle3_check.program import fast_lowering as fl  # noqa: E402


class Branches(torch.nn.Module):
    def forward(self, x):  # [4, 4] -> [4, 4]
        a, b = x + 1, x * 2
        c, d = a.relu(), b.sin()
        e, f = c * d, (c - d).cos()
        return (e + f).tanh()


class Side(torch.nn.Module):
    def forward(self, x):  # [4, 4] -> [4, 4]
        return (x + x.cos()).sin()  # add reads x and cos, which reads x


class Chain(torch.nn.Module):
    def forward(self, x):  # [4, 4] -> [4, 4]
        return ((x + 1).relu() * 3).sin()


def _early_user(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A node inserted at the top after the rest: find_nodes' table holds it last, the graph first."""
    g, aten = gm.graph, torch.ops.aten
    x = next(n for n in g.nodes if n.op == "placeholder")
    out = g.output_node()
    last = out.args[0][0]
    with g.inserting_before(next(n for n in g.nodes if n.op == "call_function")):
        y = g.call_function(aten.mul.Tensor, (x, x))
    with g.inserting_before(out):
        z = g.call_function(aten.add.Tensor, (last, y))
    y.meta["val"], z.meta["val"] = x.meta["val"], last.meta["val"]
    out.args = ((z,),)
    return gm


def _users_reversed(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Every users dict out of graph order (stock's copy registers users in creation order)."""
    for node in gm.graph.nodes:
        users = list(node.users)[::-1]
        node.users.clear()
        node.users.update(dict.fromkeys(users))
    return gm


# (module, names of the call_function nodes fused into one partition, a graph edit before, moved)
CASES = {
    "branches-right": (Branches, ["mul", "sin"], None, 1),  # the fused node moves: the Kahn order differs
    "branches-join": (Branches, ["mul_1", "sub", "cos"], None, 0),
    "chain-middle": (Chain, ["relu", "mul"], None, 0),  # the Kahn order equals the graph's: nothing moves
    "chain-early-user": (Chain, ["add", "relu"], _early_user, 0),
    "branches-users-reversed": (Branches, ["mul", "sin"], _users_reversed, 1),
    "side-users-reversed": (Side, ["sin"], _users_reversed, None),  # x's users: [add, cos] -> stock [cos, add]
}


def _graph(module_cls) -> torch.fx.GraphModule:
    return torch.export.export(module_cls(), (torch.randn(4, 4),), strict=False).graph_module


def _state(gm: torch.fx.GraphModule) -> dict:
    """Everything of the graph a later pass can observe, by names."""
    g = gm.graph
    nodes = list(g.nodes)
    ns = g._graph_namespace
    table = {str(k): [n.name for n in v] for k, v in g._find_nodes_lookup_table.table.items() if v}
    return {
        "nodes": [(n.name, n.op, str(n.target), str(n.args), str(n.kwargs)) for n in nodes],
        "users": {n.name: [u.name for u in n.users] for n in nodes},
        "inputs": {n.name: [i.name for i in n._input_nodes] for n in nodes},
        "used_names": sorted(ns._used_names), "base_count": dict(sorted(ns._base_count.items())),
        "obj_to_name": sorted(ns._obj_to_name.values()), "table": table, "len": g._len,
        "code": gm.recompile().src,
        "children": {name: child.code for name, child in gm.named_children()},
    }


def _partition(module_cls, names: list[str], edit, fast: bool, reorder=None, moved=None) -> dict:
    gm = _graph(module_cls)
    gm = edit(gm) if edit else gm
    nodes = [n for n in gm.graph.nodes if n.name in names]
    assert len(nodes) == len(names), [n.name for n in gm.graph.nodes]
    with fl.fast_lowering(enabled=fast, reorder=reorder) as stats:
        lbm.create_submodule_from_nodes(gm, nodes, "tag0")
    if fast:
        assert stats.mode == "fast" and stats.fast == 1 and stats.stock == 0, stats
        assert moved is None or stats.moved == moved, stats
    return _state(gm)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_fast_legalize_leaves_the_graph_stock_leaves(case):
    module_cls, names, edit, moved = CASES[case]
    fast, stock = _partition(module_cls, names, edit, True, moved=moved), _partition(module_cls, names, edit, False)
    assert fast == stock, [key for key in fast if fast[key] != stock[key]]


def _swap_first_independent_pair(order):
    """A valid topological order that is not Kahn's: the first adjacent independent pair swapped."""
    for i in range(len(order) - 1):
        a, b = order[i], order[i + 1]
        if a.op == b.op == "call_function" and a not in b.all_input_nodes:
            return [*order[:i], b, a, *order[i + 2:]]
    raise AssertionError("no independent adjacent pair to swap")


def test_a_wrong_fast_order_is_seen():
    module_cls, names, edit, _ = CASES["branches-right"]
    wrong = _partition(module_cls, names, edit, True, reorder=_swap_first_independent_pair)
    assert wrong["nodes"] != _partition(module_cls, names, edit, False)["nodes"]


def test_kahn_order_is_stock_order_and_a_cycle_is_none():
    gm = _graph(Branches)
    stock = [n.name for n in fl.kahn_order(gm.graph)]
    lbm.legalize_graph(gm)  # stock, outside fast_lowering
    assert stock == [n.name for n in gm.graph.nodes]
    a, b = [n for n in gm.graph.nodes if n.name in ("add", "relu")]
    a.args = (b, 1)  # add reads relu, which reads add
    assert fl.kahn_order(gm.graph) is None


def test_another_version_runs_stock_and_says_why(monkeypatch):
    monkeypatch.setitem(fl._STOCK_SOURCES, "torch.fx.passes.tools_common.legalize_graph", "not-this-version")
    from torch.fx.passes.tools_common import legalize_graph

    with fl.fast_lowering() as stats:
        assert lbm.legalize_graph is legalize_graph
    assert stats.mode == "stock" and "legalize_graph source" in stats.reason, stats
    with fl.fast_lowering(enabled=False) as stats:
        pass
    assert stats.to_json()["reason"] == "--stock-lowering"


def test_the_stock_name_is_restored_after_the_lowering():
    stock = lbm.legalize_graph
    with pytest.raises(RuntimeError, match="inside"):
        with fl.fast_lowering() as stats:
            assert stats.mode == "fast" and lbm.legalize_graph is not stock
            raise RuntimeError("inside")
    assert lbm.legalize_graph is stock
