"""pytest-xdist: a baseline key's golden prompts and its baseline item on one worker.

A golden prompt runs once per process (`Eagle3State.golden_run`) for its golden item and the baseline
item of its key; under `pytest -n N` every worker is a process, so a baseline item that lands on
another worker than some of its golden prompts runs them again. With `--dist loadgroup` they
are kept together: the items carry `xdist_group("eagle3-<stem>")` (items.py), and the scheduler
below groups them by their node ids as well, because pytest-xdist 3.8 marks a group by appending
`@group` to a node id, which pytest 9.2 no longer lets it do (pytest-xdist#1386: the mark is then
silently ignored). Other items keep loadgroup's own rule (their xdist_group mark, else alone).

Node ids and their groups, for a baseline with key K (and none with key J):

    eagle3::goldens::K/capital        -> eagle3-K
    eagle3::goldens::K/soup@eagle3-K  -> eagle3-K   (the suffix older pytest lets xdist append)
    eagle3::baseline::K               -> eagle3-K
    eagle3::goldens::J/capital        -> loadgroup's own scope (no baseline item needs it)
"""

from __future__ import annotations

from collections.abc import Container

GOLDENS, BASELINE = "eagle3::goldens::", "eagle3::baseline::"
XDIST_GROUP = "eagle3-"  # + a golden stem: the xdist_group of a baseline key's items


def group_of(nodeid: str, stems: Container[str]) -> str | None:
    """The group of an eagle3 golden or baseline item whose key is in `stems`, else None."""
    base = nodeid.partition("@")[0]  # stems and prompt ids hold no '@'
    if base.startswith(GOLDENS):
        stem = base[len(GOLDENS):].partition("/")[0]
    elif base.startswith(BASELINE):
        stem = base[len(BASELINE):]
    else:
        return None
    return XDIST_GROUP + stem if stem in stems else None


def make_scheduler(config, log, stems: Container[str]):
    """xdist's LoadGroupScheduling, with the eagle3 items grouped by `group_of`."""
    from xdist.scheduler import LoadGroupScheduling

    class Eagle3GroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid, stems) or super()._split_scope(nodeid)

    return Eagle3GroupScheduling(config, log)
