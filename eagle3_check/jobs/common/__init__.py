"""The world every job shares, built once from a front end's options.

What lives here: `config` (Config: every option, typed; `Config.build` refuses an unknown one),
`validate` (the checks a Config gets where it is built: paths, ranges, flag combinations; no
torch), `world` (the program a Config names, its tokenizer and run options), `default_program`
(the program a command runs when no flag names one), `context` (CheckContext: program,
tokenizer, run options, reference, tolerance and tie budget, prompts, runner, expected tau, each
built on first use), `outcomes` (what a finished job hands its front end: one protocol every route's
report implements), `isolation` (the runner in its own process on every route) and `provenance`
(the provenance block of a --json report).

May import: jobs.check, jobs.shrink_route (the context's prompt order, sharding and card
expectation, and the flag checks of --workers, --quantize and --shrink: the checks a Config gets
where it is built)

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
