"""Gating: a runner over a prompt set, goldens, metrics, baselines, the gate.

What lives here: `check` (a runner over a prompt set against a reference, and a judged
report's counts and tie budget, shared with `binary.check`), `golden` (the golden
file: key, record, load, save), `golden_diff` (the exact differences of runs from a golden),
`golden_check` (re-run every golden and compare it and the metrics baseline), `metrics`
(deterministic metrics and their baseline file), `tau_baseline` (tau against a card or
baseline), `gate` (every check, one verdict), `gate_requests` (the gate's per-request checks),
`gate_model` (the gate's inputs, a check's result, the report), `drift` (a quantized program's
drift), `draft_health`, `workers`, and shrinking a failing request to its smallest reproduction
(the probes `shrink_check`, `shrink_gate`, `shrink_suite`, `shrink_golden` over `shrink`'s search: docs/shrinking.md). Its reports (HTML, JUnit, provenance) are in `report`;
the same routes through a runner binary in `binary`, which sits above gating.

May import: program, runners, judge, suites, report, shrink

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
