"""`check --suite`: the edge cases (suites/, as data) run and judged.

What lives here: `execute` (a case set up, forced and run on its program), `judging` (that run
judged against its oracle and a greedy reference, the audits and the case's expectations), `report` (a suite's report and the loop over its cases), `outcomes` (the reports'
outcome, printed by the front end), `job` (the edge cases on the fixtures or on one given program,
any runner or a binary), `binary` (a case through a runner without forced acceptance: a binary)
and `shrink` (the probe: a failing case shrunk, where it is one plain request, through
any runner).
`options`: its section of the Config (`SuitesOptions`: `cfg.suites`).

May import: jobs.check, jobs.common, jobs.shrink_route

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
