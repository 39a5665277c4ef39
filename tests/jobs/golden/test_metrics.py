"""Deterministic metrics: the arithmetic (pinned by the module's worked example) and the exact gate."""

from __future__ import annotations

import json

import pytest

from eagle3_check.errors import InputError
from eagle3_check.jobs.golden.metrics import (
    compare_baseline,
    compare_metrics,
    compute_metrics,
    format_metric_diffs,
    load_baseline,
    write_baseline,
)
from eagle3_check.runners.loop import RunResult


def run(n_tokens: int, accepted: list[int], k: int = 4, draft_calls: int | None = None) -> RunResult:
    rounds = len(accepted)
    calls = {"prefill": 1, "target_verify": rounds,
             "draft_decode": draft_calls if draft_calls is not None else (1 + (k - 1)) * max(rounds, 1)}
    return RunResult(prompt_ids=[2, 3], tokens=list(range(n_tokens)), text="", rounds=rounds, accepted=accepted,
                     tau=(n_tokens - 1) / rounds if rounds else 0.0, stop_reason="max_new", k=k,
                     max_new=n_tokens, method_calls=calls)


WORKED = [run(10, [4, 2, 1], draft_calls=12), run(6, [0, 1, 0, 2, 0], draft_calls=20)]


def test_worked_example_of_the_module_docstring():
    m = compute_metrics(WORKED, k=4)
    assert (m.requests, m.emitted, m.rounds) == (2, 16, 8)
    assert m.tau == (16 - 2) / 8 == 1.75
    assert m.n_alpha == [5 / 8, 3 / 8, 1 / 8, 1 / 8]
    assert m.target_forwards == 2 + 8 and m.target_per_token == 10 / 16
    assert m.draft_forwards == 32 and m.draft_per_token == 2.0


def test_tau_matches_the_check_report_definition():
    from eagle3_check.jobs.check.prompt_set import CheckReport, RequestOutcome
    from eagle3_check.judge.verdict import Verdict

    report = CheckReport(k=4, outcomes=[RequestOutcome(str(i), r, Verdict("pass", "")) for i, r in enumerate(WORKED)])
    m = compute_metrics(WORKED, k=4)
    assert (m.tau, m.n_alpha) == (report.tau, report.n_alpha)


def test_a_request_with_no_round_counts_its_bonus_only():
    m = compute_metrics([run(1, [])], k=4)
    assert (m.emitted, m.rounds, m.tau, m.n_alpha) == (1, 0, 0.0, [0.0] * 4)


def test_runs_without_call_counts_are_refused_with_the_fix():
    r = run(4, [1, 0])
    r.method_calls = {}
    with pytest.raises(InputError, match="method_calls.*RecordingProgram"):
        compute_metrics([r], k=4)


def test_identical_metrics_pass_and_any_change_fails_with_direction():
    base = compute_metrics(WORKED, 4).to_json()
    assert compare_metrics("key", compute_metrics(WORKED, 4), base) == []
    lower = [run(10, [4, 2, 0, 0], draft_calls=16), WORKED[1]]  # one more round for the same tokens
    diffs = {d.metric: d for d in compare_metrics("key", compute_metrics(lower, 4), base)}
    assert diffs["tau"].direction == "regression" and diffs["tau"].now < diffs["tau"].baseline
    assert diffs["rounds"].baseline == 8 and diffs["rounds"].now == 9
    higher = [run(10, [4, 4], draft_calls=8), WORKED[1]]
    diffs = {d.metric: d for d in compare_metrics("key", compute_metrics(higher, 4), base)}
    assert diffs["tau"].direction == "improvement"  # still fails: the gate is exact


def test_table_puts_the_numbers_side_by_side():
    base = compute_metrics(WORKED, 4).to_json()
    lower = [run(10, [4, 2, 0, 0], draft_calls=16), WORKED[1]]
    text = format_metric_diffs(compare_metrics("tiny__k4", compute_metrics(lower, 4), base))
    tau_line = next(line for line in text.splitlines() if line.strip().startswith("tau"))
    assert tau_line.split() == ["tau", "1.7500", f"{14 / 9:.4f}", "regression"]
    assert "target forwards / token" in text and "eagle3-check golden baseline" in text


def test_baseline_file_round_trip_missing_entry_and_merge(tmp_path):
    path = tmp_path / "metrics.json"
    write_baseline(path, {"a": compute_metrics(WORKED, 4)})
    write_baseline(path, {"b": compute_metrics(WORKED[:1], 4)})  # adds, keeps "a"
    assert sorted(load_baseline(path)) == ["a", "b"]
    assert compare_baseline({"a": (WORKED, 4)}, path) == []
    missing = compare_baseline({"c": (WORKED, 4)}, path)
    assert [(d.key, d.direction) for d in missing] == [("c", "missing")]
    assert "no baseline entry; add it with `eagle3-check golden baseline golden/c.json`" in format_metric_diffs(missing)


@pytest.mark.parametrize("content,match", [
    (None, "does not exist"),
    ("{", "not valid JSON"),
    (json.dumps({"schema": 99, "entries": {}}), "schema = 99; expected 1"),
    (json.dumps({"schema": 1, "entries": {"a": {"requests": 1}}}), r"entries\.a\.emitted is missing"),
    (json.dumps({"schema": 1, "entries": {}, "extra": 2}), "unknown field extra"),
], ids=["missing", "bad-json", "bad-schema", "entry-missing-field", "unknown-key"])
def test_unusable_baseline_files_are_refused(tmp_path, content, match):
    path = tmp_path / "metrics.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=match):
        load_baseline(path)
