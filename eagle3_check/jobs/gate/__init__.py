"""`gate`: every check of a `.pte` (or of `check --quantize`'s program in process), one verdict.

What lives here: `gate` (every check, one verdict), `model` (the gate's inputs, a check's result,
the report and its table), `requests` (the per-request checks), `job` (gate --pte from a Config),
`outcomes` (the gate's outcome, its --report file, as the front end prints it), `quantized` (check
--quantize: the gate's quantized checks in process), `binary` (the gate's runner checks through a
runner binary) and the probes `shrink` (failing request cases) and
`shrink_suites` (failing edge-suite cases, in the gate's env) with their writing (`shrink_route`).
`options`: its section of the Config (`GateOptions`: `cfg.gate`).

May import: jobs.check, jobs.common, jobs.golden, jobs.suites, jobs.shrink_route

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
