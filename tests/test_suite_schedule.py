"""The suite's own order and export groups (tests/suite_schedule.py): each .pte export's tests in one
group, the rarest export a test uses naming it; under loadgroup the fp32 group first, then fast
tests, the `long` ones, the other groups and the rest; serial: the .pte tests last."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import suite_schedule as sched  # tests/ is on sys.path


def item(name: str, fixtures=(), pte=False, long=False, shared=None):
    path = (sched.PTE_TESTS if pte else sched.PTE_TESTS.parent) / "test_x.py"
    marks = {"long": object() if long else None, "shared": pytest.mark.shared(shared).mark if shared else None}
    return SimpleNamespace(path=path, nodeid=name, fixturenames=list(fixtures),
                           get_closest_marker=lambda m: marks.get(m))


@pytest.mark.parametrize("fixtures, group", [
    (["pte_path"], "pte:pte_path"),
    (["pte_path", "bf16_pte_path"], "pte:bf16_pte_path"),
    (["pte_program", "pte_path", "small_kvwin_pte_path"], "pte:small_kvwin_pte_path"),
    (["ptd_pte_path", "tmp_path"], "pte:pte_path"),  # made by the fp32 export's lowering: its group
    (["kvwin_pte_path"], "pte:pte_path"),  # lowered beside the fp32 program: its prefill and draft_decode
    (["kvwin_pte_path", "bf16_pte_path"], "pte:bf16_pte_path"),
    (["tmp_path"], None),
], ids=["fp32", "bf16-beside-fp32", "small-kvwin-beside-fp32", "ptd", "kvwin", "kvwin-beside-bf16", "no-export"])
def test_a_pte_test_joins_the_group_of_its_rarest_export(fixtures, group):
    assert sched.export_group(item("t", fixtures, pte=True)) == group
    assert sched.export_group(item("t", fixtures, pte=False)) is None  # only tests under tests/pte


def test_tests_marked_shared_are_one_group_and_an_export_group_wins():
    items = [item("golden-a", shared="golden:a"), item("fast"), item("metrics-a", shared="golden:a"),
             item("pte-a", ["pte_path"], pte=True, shared="golden:a")]
    groups = sched.ordered(items, parallel=True)
    assert groups == {"golden-a": "shared:golden:a", "metrics-a": "shared:golden:a", "pte-a": "pte:pte_path"}


def suite():
    fast = [item(f"fast{i}") for i in range(8)]
    return [fast[0], item("q4", ["q4_pte_path"], pte=True), fast[1], item("fp32a", ["pte_path"], pte=True),
            item("real", long=True), *fast[2:], item("fp32b", ["pte_path"], pte=True)]


def test_serial_runs_the_pte_tests_last_in_collection_order():
    items = suite()
    groups = sched.ordered(items, parallel=False)
    assert [i.nodeid for i in items] == ["fast0", "fast1", "real", *[f"fast{i}" for i in range(2, 8)],
                                         "q4", "fp32a", "fp32b"]
    assert groups == {"q4": "pte:q4_pte_path", "fp32a": "pte:pte_path", "fp32b": "pte:pte_path"}


def test_loadgroup_order_fp32_group_fast_share_long_groups_rest():
    items = suite()
    sched.ordered(items, parallel=True)
    # 8 fast tests: the first quarter (2) right after the fp32 group
    assert [i.nodeid for i in items] == ["fp32a", "fp32b", "fast0", "fast1", "real", "q4",
                                         *[f"fast{i}" for i in range(2, 8)]]


def test_the_scheduler_groups_by_the_file_the_first_worker_wrote(tmp_path):
    pytest.importorskip("xdist")
    path = tmp_path / "groups.json"
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True, maxschedchunk=None),
                             getvalue=lambda name: {"tx": ["popen"], "numprocesses": 2}.get(name))
    scheduler = sched.make_scheduler(config, None, path)
    assert config.option.loadscopereorder is False
    with pytest.raises(pytest.UsageError, match="no test groups in"):
        scheduler._split_scope("tests/pte/test_x.py::a")
    path.write_text(json.dumps({"tests/pte/test_x.py::a": "pte:pte_path"}))
    assert scheduler._split_scope("tests/pte/test_x.py::a") == "pte:pte_path"
    assert scheduler._split_scope("tests/test_y.py::b") == "tests/test_y.py::b"  # alone, as loadgroup does
