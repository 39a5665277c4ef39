"""The runner under test in its own process: nothing it does can change the verdict, silence the
report, or outlive the check.

What lives here: `wire` (the framed protocol: pickles to the child, plain JSON back, validated),
`child` (the runner's process: its own program, tokenizer and plug-in; `python -m
eagle3_check.runners.isolate.child`), `fork` (starting it by fork where safe) and `runner` (`IsolatedRunner`, the harness's side: one child at a
time, every way out of it a verdict, its output per request). The process tree and bounded reads
are `runners.proc`'s.

May import: program, runners

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""
