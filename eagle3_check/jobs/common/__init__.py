"""The world every job shares, built once from a front end's options.

What lives here: `config` (Config: the shared options, typed, and one section per job; `Config.build`
routes each flag to its place by the command and refuses an unknown one), `section` (what a job's
section is), `shrink_options` and `tool_options` (the sections of shrinking and of the building
commands),
`validate` (the checks a Config gets where it is built: paths, ranges, flag combinations; no
torch), `world` (the program a Config names, its tokenizer and run options), `default_program`
(the program a command runs when no flag names one), `context` (CheckContext: program,
tokenizer, run options, reference, tolerance and tie budget, prompts, runner, expected tau, each
built on first use), `outcomes` (what a finished job hands its front end: one protocol every route's
report implements), `isolation` (the runner in its own process on every route) and `provenance`
(the provenance block of a --json report).

May import: jobs.check, jobs.shrink_route, jobs.suites.options, jobs.gate.options, jobs.golden.options
(the context's prompt order, sharding and card expectation, and the flag checks of --workers,
--quantize and --shrink: the checks a Config gets where it is built; and the Config's sections of
those jobs)

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
