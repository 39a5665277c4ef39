"""One check's world, built once from a front end's options: the library side of every command.

`config.Config` holds every option, typed and checked where it is built (`validate.py`, no
torch); `context.CheckContext` assembles the world of a check from it (program, tokenizer,
run options, reference, tolerance and tie budget, prompts, runner, expected tau;
`world.py` builds the program); the jobs run on a context: `check.py` (a prompt set, in
process or over workers), `suite.py` (the edge suites), `quantized.py` (`check --quantize`),
`exec_route.py` (a runner binary), `golden.py`, `gate.py`, and the other commands' library
side: `export.py`, `draft_train.py`, `fixture_build.py`, `mutants.py`. The CLI and the pytest
plugin parse, build a `Config`, call these and print.

May import: program, runners, judge, suites, gating, binary, report, fixtures, mutants, shrink (not the CLI, not the pytest plugin).
"""
