"""The order of `make check`, and its work units under `-n 2 --dist loadgroup` (what CI runs).

The tests under tests/pte wait on `.pte` exports (tests/pte/conftest.py; the `.ptd` program is made
from the fp32 one's lowering, the kv_window program from its prefill and draft_decode), about a CPU
minute each on a clean clone, cached in .cache/pte. A test belongs to the group of the rarest export
it uses (EXPORTS; SAME_EXPORT names a fixture made from another's lowering, in its worker), so each
export is done by the one worker that runs its group, and the groups spread over both workers
instead of one worker waiting on the other's export lock.

pytest-xdist 3.8 groups by an `@group` suffix it appends to the node ids, which pytest 9.2 no longer
lets it do (pytest-xdist#1386: xdist_group marks are silently ignored there). So the groups travel
by file: the controller names one in each worker's `workerinput`, the first worker writes
{node id: group} into it after collection, and the scheduler (`GroupScheduling`) reads it; xdist
calls the scheduler only once every worker has collected.

Tests marked `shared(name)` (one computation behind several tests, e.g. a golden's runs that its
golden test and its baseline test both compare) form one group as well, so one worker computes it.

Order under loadgroup (`ordered`): the fp32 group (the export most tests need), a quarter of the
fast tests (dots from the first test on, while the first worker exports), the `long` tests (the
real-model check: started early, never the tail), the other export groups, the other fast tests.
The scheduler keeps that order (not xdist's by group size). Serial: the .pte tests last, so nothing
waits minutes on an export before the first dot. docs/contributing.md "How long make check takes".
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

PTE_TESTS = Path(__file__).resolve().parent / "pte"
# the export fixtures of tests/pte/conftest.py, rarest first: a test's group is the first it uses
EXPORTS = ("small_kvwin_pte_path", "q4_pte_path", "bf16_pte_path", "pte_path")
# fixtures made in the worker of another's export, from its lowering (tests/shared_lowering.py): the `.ptd`
# program is the fp32 program's lowering, the kv_window program lowers only its target_verify there
SAME_EXPORT = {"ptd_pte_path": "pte_path", "kvwin_pte_path": "pte_path"}
GROUPS_KEY = "eagle3_test_groups"  # the workerinput key: the file the first worker writes the groups to
FIRST_FAST = 0.25  # the share of the fast tests run before the export groups other than fp32


def export_group(item) -> str | None:
    """`pte:<fixture>` for a test under tests/pte using an export, else None."""
    if not Path(str(item.path)).is_relative_to(PTE_TESTS):
        return None
    used = {SAME_EXPORT.get(name, name) for name in getattr(item, "fixturenames", ())}
    return next((f"pte:{name}" for name in EXPORTS if name in used), None)


def shared_group(item) -> str | None:
    """`shared:<name>` for a test marked `shared(name)`: tests that share one computation (a module's
    cache of one golden's runs, say) are one work unit, so no second worker computes it again."""
    mark = item.get_closest_marker("shared")
    return f"shared:{mark.args[0]}" if mark is not None else None


def ordered(items: list, parallel: bool) -> dict[str, str]:
    """Sorts `items` in place (stable within each part); returns {node id: group} (an export's, or a
    `shared` mark's)."""
    groups = {item.nodeid: g for item in items if (g := export_group(item) or shared_group(item))}
    pte = {id(item) for item in items if Path(str(item.path)).is_relative_to(PTE_TESTS)}
    if not parallel:
        items.sort(key=lambda item: id(item) in pte)
        return groups
    fast = [item for item in items if id(item) not in pte and not item.get_closest_marker("long")]
    first_fast = {id(item) for item in fast[: int(len(fast) * FIRST_FAST)]}

    def rank(item) -> int:
        if groups.get(item.nodeid) == "pte:pte_path":
            return 0
        if id(item) in first_fast:
            return 1
        if item.get_closest_marker("long"):
            return 2
        return 3 if id(item) in pte else 4

    items.sort(key=rank)
    return groups


def write_groups(config, groups: dict[str, str]) -> None:
    """On the first xdist worker: the groups to the file the controller named (atomically)."""
    target = getattr(config, "workerinput", {}).get(GROUPS_KEY)
    if target and config.workerinput.get("workerid") == "gw0":
        tmp = Path(target).with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        os.replace(tmp, target)


def configure_node(config, node, path: Path) -> None:
    """On the controller, under loadgroup: tells each worker where the groups go."""
    if config.getoption("dist", "no") == "loadgroup":
        node.workerinput[GROUPS_KEY] = str(path)


def make_scheduler(config, log, path: Path):
    """xdist's LoadGroupScheduling with our groups (read from `path`) and our order."""
    from xdist.scheduler import LoadGroupScheduling

    class GroupScheduling(LoadGroupScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                if not path.is_file():
                    raise pytest.UsageError(f"no test groups in {path}: the first worker wrote none after collection")
                self._groups = json.loads(path.read_text())
            return self._groups.get(nodeid) or super()._split_scope(nodeid)

    config.option.loadscopereorder = False  # the work units in `ordered`'s order, not by group size
    return GroupScheduling(config, log)
