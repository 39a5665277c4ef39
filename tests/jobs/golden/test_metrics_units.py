"""`jobs.golden.metrics` unit by unit: the exact metrics (and their zero cases), the exact list of
differences (direction of each row, n-alpha per index, a baseline entry lacking a field), the
exact table a person reads, and the baseline file: its exact content, its refusals, and the test
that tells it from another JSON. Fast: mutation testing runs these for every mutant of the module.
"""

from __future__ import annotations

import errno
import json
import os

import pytest
from test_metrics import WORKED, run

from eagle3_check.errors import InputError
from eagle3_check.jobs.golden.file import dumps, golden_root
from eagle3_check.jobs.golden.metrics import (
    MetricDiff,
    compare_metrics,
    compute_metrics,
    default_baseline_path,
    format_metric_diffs,
    is_metrics_baseline,
    load_baseline,
    write_baseline,
)
from eagle3_check.runners.result import RunResult

# the module docstring's worked example: 2 requests, 16 tokens in 8 rounds, 2 prefill + 8 target_verify
# calls, 12 + 20 draft_decode calls, accepted [4, 2, 1] + [0, 1, 0, 2, 0]
WORKED_JSON = {"requests": 2, "emitted": 16, "rounds": 8, "target_forwards": 10, "draft_forwards": 32,
               "target_per_token": 10 / 16, "draft_per_token": 32 / 16, "tau": (16 - 2) / 8,
               "n_alpha": [5 / 8, 3 / 8, 1 / 8, 1 / 8]}
# one more round for the same tokens: 9 rounds, 11 target and 36 draft calls
LOWER = [run(10, [4, 2, 0, 0], draft_calls=16), WORKED[1]]
# the first request in two rounds instead of three: 7 rounds, 9 target and 28 draft calls
HIGHER = [run(10, [4, 4], draft_calls=8), WORKED[1]]


def calls_run(tokens: int, calls: dict[str, int], accepted: list[int] | None = None) -> RunResult:
    accepted = [] if accepted is None else accepted
    return RunResult(prompt_ids=[2], tokens=[7] * tokens, text="", rounds=len(accepted), accepted=accepted,
                     tau=0.0, stop_reason="max_new", k=4, max_new=max(tokens, 1), method_calls=calls)


# --- compute_metrics ---------------------------------------------------------------------------


def test_the_worked_example_in_full():
    assert compute_metrics(WORKED, k=4).to_json() == WORKED_JSON


@pytest.mark.parametrize("calls,target,draft", [
    ({"draft_decode": 5}, 0, 5),
    ({"prefill": 2}, 2, 0),
    ({"target_verify": 3}, 3, 0),
    ({"prefill": 1, "target_verify": 3, "draft_decode": 9, "other": 100}, 4, 9),
], ids=["draft-only", "prefill-only", "target-verify-only", "all-and-an-unknown-method"])
def test_a_method_never_called_counts_zero(calls, target, draft):
    m = compute_metrics([calls_run(4, calls, [1, 1, 0])], k=2)
    assert (m.target_forwards, m.draft_forwards) == (target, draft)
    assert (m.target_per_token, m.draft_per_token) == (target / 4, draft / 4)


def test_no_emitted_token_gives_zero_per_token_and_no_round_zero_tau():
    m = compute_metrics([calls_run(0, {"prefill": 1, "draft_decode": 1})], k=2)
    assert m.to_json() == {"requests": 1, "emitted": 0, "rounds": 0, "target_forwards": 1, "draft_forwards": 1,
                           "target_per_token": 0.0, "draft_per_token": 0.0, "tau": 0.0, "n_alpha": [0.0, 0.0]}


def test_no_run_at_all():
    assert compute_metrics([], k=1).to_json() == {
        "requests": 0, "emitted": 0, "rounds": 0, "target_forwards": 0, "draft_forwards": 0,
        "target_per_token": 0.0, "draft_per_token": 0.0, "tau": 0.0, "n_alpha": [0.0]}


def test_a_run_without_call_counts_is_refused_with_the_exact_message():
    runs = [WORKED[0], calls_run(3, {})]
    with pytest.raises(InputError) as e:
        compute_metrics(runs, k=4)
    assert str(e.value) == (
        "a run without method_calls; expected RunResult.method_calls with per-method call counts. "
        "Fix: make the runner count prefill / target_verify / draft_decode calls "
        "(see ReferenceRunner, or wrap the program in RecordingProgram)")


# --- compare_metrics ---------------------------------------------------------------------------


def test_a_missing_entry_is_one_difference():
    assert [d.to_json() for d in compare_metrics("k", compute_metrics(WORKED, 4), None)] == [
        {"key": "k", "metric": "entry", "baseline": None, "now": None, "direction": "missing"}]


def test_every_differing_row_in_order_with_its_direction_lower():
    diffs = compare_metrics("key", compute_metrics(LOWER, 4), WORKED_JSON)
    assert [(d.key, d.metric, d.baseline, d.now, d.direction) for d in diffs] == [
        ("key", "tau", 1.75, 14 / 9, "regression"),
        ("key", "target_per_token", 10 / 16, 11 / 16, "regression"),
        ("key", "draft_per_token", 2.0, 36 / 16, "regression"),
        ("key", "rounds", 8, 9, "regression"),
        ("key", "target_forwards", 10, 11, "regression"),
        ("key", "draft_forwards", 32, 36, "regression"),
        ("key", "n_alpha[0]", 5 / 8, 4 / 9, "regression"),
        ("key", "n_alpha[1]", 3 / 8, 3 / 9, "regression"),
        ("key", "n_alpha[2]", 1 / 8, 1 / 9, "regression"),
        ("key", "n_alpha[3]", 1 / 8, 1 / 9, "regression"),
    ]


def test_every_differing_row_in_order_with_its_direction_higher():
    diffs = compare_metrics("key", compute_metrics(HIGHER, 4), WORKED_JSON)
    assert [(d.metric, d.baseline, d.now, d.direction) for d in diffs] == [
        ("tau", 1.75, 2.0, "improvement"),
        ("target_per_token", 10 / 16, 9 / 16, "improvement"),
        ("draft_per_token", 2.0, 28 / 16, "improvement"),
        ("rounds", 8, 7, "improvement"),
        ("target_forwards", 10, 9, "improvement"),
        ("draft_forwards", 32, 28, "improvement"),
        ("n_alpha[0]", 5 / 8, 4 / 7, "regression"),
        ("n_alpha[1]", 3 / 8, 3 / 7, "improvement"),
        ("n_alpha[2]", 1 / 8, 2 / 7, "improvement"),
        ("n_alpha[3]", 1 / 8, 2 / 7, "improvement"),
    ]


def test_rows_without_a_better_way_are_changed():
    """More tokens and more requests are neither better nor worse (a different prompt set)."""
    more = WORKED + [calls_run(1, {"prefill": 1})]  # a bonus-only request: one token, no round; tau (17 - 3) / 8
    diffs = compare_metrics("key", compute_metrics(more, 4), WORKED_JSON)
    assert [(d.metric, d.baseline, d.now, d.direction) for d in diffs] == [
        ("target_per_token", 10 / 16, 11 / 17, "regression"),
        ("draft_per_token", 2.0, 32 / 17, "improvement"),
        ("emitted", 16, 17, "changed"),
        ("target_forwards", 10, 11, "regression"),
        ("requests", 2, 3, "changed"),
    ]


def test_a_baseline_entry_without_a_field_is_changed_from_nothing():
    base = {k: v for k, v in WORKED_JSON.items() if k not in ("tau", "n_alpha")}
    diffs = compare_metrics("key", compute_metrics(WORKED, 4), base)
    assert [(d.metric, d.baseline, d.now, d.direction) for d in diffs] == [
        ("tau", None, 1.75, "changed"),
        ("n_alpha[0]", None, 5 / 8, "changed"),
        ("n_alpha[1]", None, 3 / 8, "changed"),
        ("n_alpha[2]", None, 1 / 8, "changed"),
        ("n_alpha[3]", None, 1 / 8, "changed"),
    ]


@pytest.mark.parametrize("k,old,want", [
    (2, [5 / 8, 3 / 8, 1 / 8, 1 / 8], [("n_alpha[2]", 1 / 8, None), ("n_alpha[3]", 1 / 8, None)]),
    (5, [5 / 8, 3 / 8, 1 / 8, 1 / 8], [("n_alpha[4]", None, 0.0)]),
    (4, [5 / 8, 3 / 8, 1 / 8, 1 / 8], []),
], ids=["k-shorter-than-baseline", "k-longer-than-baseline", "same"])
def test_n_alpha_of_another_length_differs_per_index(k, old, want):
    diffs = compare_metrics("key", compute_metrics(WORKED, k), dict(WORKED_JSON, n_alpha=old))
    assert [(d.metric, d.baseline, d.now, d.direction) for d in diffs] == [(*w, "changed") for w in want]


# --- the table -----------------------------------------------------------------------------------

HEAD = "metrics: DIFFER from the baseline (exact gate)"
REFRESH_LINE = "  if the change is intended, refresh: `eagle3-check golden baseline` (baseline {}) and commit it"
REGRESSION_LINE = "  a regression: find the change that caused it (tau lower or more forwards per token)"


def test_no_difference_reads_identical():
    assert format_metric_diffs([]) == "metrics: identical to the baseline"


def test_the_table_of_a_regression_in_full():
    text = format_metric_diffs(compare_metrics("tiny__k4", compute_metrics(LOWER, 4), WORKED_JSON))
    assert text.split("\n") == [
        HEAD,
        "  tiny__k4",
        "    metric                   baseline     now  change",
        "    tau                        1.7500  1.5556  regression",
        "    target forwards / token    0.6250  0.6875  regression",
        "    draft forwards / token     2.0000  2.2500  regression",
        "    rounds                          8       9  regression",
        "    target forwards                10      11  regression",
        "    draft forwards                 32      36  regression",
        "    n-alpha[0]                 0.6250  0.4444  regression",
        "    n-alpha[1]                 0.3750  0.3333  regression",
        "    n-alpha[2]                 0.1250  0.1111  regression",
        "    n-alpha[3]                 0.1250  0.1111  regression",
        REGRESSION_LINE,
        REFRESH_LINE.format("bench/baselines/metrics.json"),
    ]


def test_the_table_without_a_regression_names_no_regression_and_the_given_baseline():
    diffs = [MetricDiff("a", "emitted", 16, 17, "changed"), MetricDiff("a", "requests", 2, 3, "changed"),
             MetricDiff("a", "n_alpha[4]", None, 0.0, "changed"), MetricDiff("a", "tau", 1.75, 2.0, "improvement")]
    assert format_metric_diffs(diffs, "my/base.json").split("\n") == [
        HEAD,
        "  a",
        "    metric          baseline     now  change",
        "    emitted tokens        16      17  changed",
        "    requests               2       3  changed",
        "    n-alpha[4]             -  0.0000  changed",
        "    tau               1.7500  2.0000  improvement",
        REFRESH_LINE.format("my/base.json"),
    ]


def test_missing_entries_and_tables_one_block_per_key_in_first_seen_order():
    diffs = [MetricDiff("b", "rounds", 8, 9, "regression"),
             MetricDiff("tiny__pte__cpu__k4", "entry", None, None, "missing"),
             MetricDiff("c__eager__cpu__k4", "entry", None, None, "missing"),
             MetricDiff("b", "n_alpha[0]", 0.5, None, "changed")]
    assert format_metric_diffs(diffs).split("\n") == [
        HEAD,
        "  b",
        "    metric      baseline  now  change",
        "    rounds             8    9  regression",
        "    n-alpha[0]    0.5000    -  changed",
        "  tiny__pte__cpu__k4: no baseline entry; add it with "
        "`eagle3-check golden baseline golden/tiny__pte__cpu__k4.json --pte FILE`",
        "  c__eager__cpu__k4: no baseline entry; add it with `eagle3-check golden baseline golden/c__eager__cpu__k4.json`",
        REGRESSION_LINE,
        REFRESH_LINE.format("bench/baselines/metrics.json"),
    ]


def test_a_metric_without_a_row_is_labelled_by_its_name():
    (line,) = [ln for ln in format_metric_diffs([MetricDiff("a", "other_thing", 1, 2, "changed")]).split("\n")
               if "other_thing" in ln]
    assert line.split() == ["other_thing", "1", "2", "changed"]


# --- the baseline file ---------------------------------------------------------------------------


def test_write_baseline_writes_exactly_the_sorted_entries(tmp_path):
    path = tmp_path / "metrics.json"
    assert write_baseline(path, {"b": compute_metrics(WORKED, 4)}) == path
    assert write_baseline(str(path), {"a": compute_metrics(WORKED[:1], 4), "c": compute_metrics(LOWER, 4)}) == path
    assert write_baseline(path, {"b": compute_metrics(HIGHER, 4)}) == path  # replaces b, keeps a and c
    entries = {"a": compute_metrics(WORKED[:1], 4).to_json(), "b": compute_metrics(HIGHER, 4).to_json(),
               "c": compute_metrics(LOWER, 4).to_json()}
    assert path.read_text() == dumps({"schema": 1, "refresh": "eagle3-check golden baseline", "entries": entries})
    assert list(json.loads(path.read_text())["entries"]) == ["a", "b", "c"]
    assert load_baseline(path) == entries
    assert (tmp_path / ".metrics.json.lock").is_file()  # written under the lock beside the file


def test_write_baseline_into_a_missing_directory_is_refused_naming_the_baseline(tmp_path):
    path = tmp_path / "nope" / "metrics.json"
    with pytest.raises(InputError) as e:
        write_baseline(path, {"a": compute_metrics(WORKED, 4)})
    assert str(e.value).startswith(f"metrics baseline {path}: directory {path.parent} does not exist;")


def test_a_full_disk_keeps_the_old_baseline_and_names_it(tmp_path, monkeypatch):
    path = write_baseline(tmp_path / "metrics.json", {"a": compute_metrics(WORKED, 4)})
    before = path.read_text()

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(InputError) as e:
        write_baseline(path, {"b": compute_metrics(WORKED, 4)})
    assert str(e.value).startswith(f"writing metrics baseline {path}: no space left on device;")
    assert path.read_text() == before


def test_load_baseline_of_a_missing_file_names_it_and_the_command(tmp_path):
    path = tmp_path / "metrics.json"
    with pytest.raises(InputError) as e:
        load_baseline(path)
    assert str(e.value) == (f"metrics baseline {path} does not exist; expected a baseline JSON file. "
                            "Fix: write it with `eagle3-check golden baseline`")


def test_load_baseline_of_a_bad_file_names_it_and_the_command(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"schema": 1, "entries": {"a": dict(WORKED_JSON, tau=-1.0)}}))
    with pytest.raises(InputError) as e:
        load_baseline(path)
    msg = str(e.value)
    assert msg.startswith(f"metrics baseline {path}: entries.a.tau") and msg.endswith(
        "Fix: write it with `eagle3-check golden baseline`")
    path.write_text("[1")
    with pytest.raises(InputError) as e:
        load_baseline(path)
    assert f"metrics baseline {path}" in str(e.value) and "expected a metrics baseline in its JSON format" in str(
        e.value)


@pytest.mark.parametrize("content,want", [
    ({"schema": 1, "entries": {}}, True),
    ({"schema": 2, "entries": {"a": 1}}, True),  # the format, even if load_baseline then refuses it
    ({"entries": {}}, False),
    ({"schema": 1}, False),
    ({"tau": 2.0}, False),
    ([{"schema": 1, "entries": {}}], False),
    ("{", False),
    (None, False),
], ids=["baseline", "other-schema", "no-schema", "no-entries", "tau-report", "a-list", "bad-json", "no-file"])
def test_is_metrics_baseline(tmp_path, content, want):
    path = tmp_path / "b.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    assert is_metrics_baseline(path) is want
    assert is_metrics_baseline(str(path)) is want


def test_the_default_baseline_is_the_committed_one_beside_golden():
    path = default_baseline_path()
    assert path == golden_root().parent / "bench" / "baselines" / "metrics.json"
    assert path.is_file() and is_metrics_baseline(path)
