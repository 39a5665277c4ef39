"""Gating: a runner over a prompt set, goldens, metrics, baselines, the gate, its reports.

What lives here: `check` (a runner over a prompt set against a reference), `judged` (a judged
report's counts and tie budget, shared with `exec_check`), `golden` (the golden
file: key, record, load, save), `golden_diff` (the exact differences of runs from a golden),
`golden_check` (re-run every golden and compare it and the metrics baseline), `metrics`
(deterministic metrics and their baseline file), `tau_baseline` (tau against a card or
baseline), `gate` (every check, one verdict), `gate_requests` (the gate's per-request checks)
`junit` (the JUnit XML report), and the HTML reports: `html_page` (page, tables, atomic
write), `html_report` (check, gate, golden verify), `bench_report` (a benchmark JSON) and
`plots` (matplotlib figures as inline SVG).

May import: program, run, reference, suites

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
