"""Shrinking: a failing request reduced to its smallest reproduction, for any job.

What lives here: the search (`search`: the passes over prompt, max new, K and the spec, their
budget; it knows no job: each job passes its probe, a function that runs one candidate and says
whether it still fails the same way) and the repro file (`repro`: its format, the one-line command
of a shrunk request, its replay with --repro). The probes are the jobs' own (`jobs.check.shrink`,
`jobs.suites.shrink`, `jobs.gate.shrink`, `jobs.golden.shrink`): docs/shrinking.md.

May import: report.provenance

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
