"""Jobs: what a command does, one package a job, on the world its options build.

What lives here: the shared world (`common`: the typed Config, its validation, the program a
Config names, the CheckContext every job runs on), one package per job (`check`: a prompt set,
with sharding, draft health and the quantized drift; `suites`: the edge suites; `golden`: the
goldens, their metrics and the tau baseline; `gate`: every check of a `.pte`, one verdict; each
with its own section of the Config in its `options` module), each
over the runner seam (`runners.seam`: a runner judged by what it prints, a binary, in its
`binary` module) and with its shrink probe (`shrink`, over `shrink.search`, the binary's too),
`check_command` (the `check` command: its Config -> the job it names, by what was asked and the
runner's capabilities -> one Outcome), and what serves several jobs: `--shrink` on every route (`shrink_route`) and the other commands' library side (`export`,
`draft_train`, `fixture_build`). The CLI and the pytest plugin parse, build a Config, call these
and print.

May import: program, runners, exact, judge, suites, report, shrink, fixtures (never the CLI or the pytest plugin)

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
