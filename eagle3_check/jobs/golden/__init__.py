"""Goldens: record the exact tokens and stats of a configuration once, verify every later run.

What lives here: `file` (the golden file: key, record, load, save), `diff` (the exact differences
of runs from a golden), `verify` (re-run every golden, compare it and the metrics baseline),
`metrics` (deterministic metrics and their baseline file), `tau_baseline` (tau against a card or
an earlier report), `job` (golden record / verify / baseline from a Config, through any runner),
`outcomes` (golden verify through any runner, as the front end prints it), `binary` (the goldens
through a runner that prints text: a binary) and the probe `shrink` (a failing golden
prompt shrunk) with its writing (`shrink_route`).
`options`: its section of the Config (`GoldenOptions`: `cfg.golden`).

May import: jobs.check, jobs.common, jobs.shrink_route

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
